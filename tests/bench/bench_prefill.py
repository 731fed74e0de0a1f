#!/usr/bin/env python3
"""Prefill benchmark: libfmha beside torch SDPA (cuDNN and flash backends).

One process, the same random tensors for every implementation, CUDA events,
warm-ups, median of --reps timed runs. Prints TFLOP/s of each and the ratio
libfmha / cuDNN per row, then the median ratio over the grid. Rows neither
cuDNN nor flash runs (head_dim 512) take SDPA's memory-efficient backend as
the peer and reference instead ("mem-eff" column; no cuDNN ratio).

    FMHA_LIBRARY=build/libfmha.so PYTHONPATH=bindings/python/src \\
        python3 tests/bench/bench_prefill.py [--quick] [--markdown out.md]
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import warnings
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import fmha

HIDDEN = 2048
TOKENS = 16384


@dataclass
class Row:
    dtype: torch.dtype
    head_dim: int
    seqlen: int
    causal: bool
    kv_ratio: int = 1  # num_q_heads / num_kv_heads

    @property
    def batch(self) -> int:
        return max(1, TOKENS // self.seqlen)

    @property
    def heads(self) -> int:
        return HIDDEN // self.head_dim

    def flops(self) -> float:
        f = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.head_dim
        return f / 2 if self.causal else f

    def label(self) -> str:
        dt = "bf16" if self.dtype == torch.bfloat16 else "fp16"
        gqa = f" gqa{self.kv_ratio}" if self.kv_ratio > 1 else ""
        return f"{dt} d{self.head_dim} s{self.seqlen} {'causal' if self.causal else 'full'}{gqa}"


def grid(quick: bool) -> List[Row]:
    seqlens = [1024, 8192] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    rows = [Row(torch.bfloat16, d, s, c) for d in (64, 128, 256) for s in seqlens for c in (False, True)]
    extra = [2048, 8192]
    rows += [Row(torch.float16, 128, s, c) for s in extra for c in (False, True)]
    rows += [Row(torch.bfloat16, 128, s, c, kv_ratio=8) for s in extra for c in (False, True)]
    rows += [Row(torch.bfloat16, 512, s, c) for s in extra for c in (False, True)]
    return rows


def time_ms(fn: Callable[[], object], warmup: int, reps: int) -> float:
    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def run_row(row: Row, args: argparse.Namespace) -> dict:
    torch.manual_seed(hash(row.label()) & 0xFFFF)
    hq, hkv = row.heads, row.heads // row.kv_ratio
    shape_q = (row.batch, row.seqlen, hq, row.head_dim)
    shape_kv = (row.batch, row.seqlen, hkv, row.head_dim)
    q = torch.randn(shape_q, dtype=row.dtype, device="cuda")
    k = torch.randn(shape_kv, dtype=row.dtype, device="cuda")
    v = torch.randn(shape_kv, dtype=row.dtype, device="cuda")
    out = torch.empty_like(q)
    # torch SDPA takes [B, H, S, D]; these are views of the same BSHD memory.
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    causal_mode = "top_left" if row.causal else None

    # A plan made ahead and raw pointers keep Python overhead out of the timing.
    plan = fmha.Plan(fmha.describe(q, k, v, causal=causal_mode, out=out, kernel=args.kernel))
    ws = torch.empty(max(plan.workspace_size, 16), dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    ptrs = (q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr())

    def ours() -> object:
        return plan.run(*ptrs, workspace=ws.data_ptr(), workspace_bytes=ws.numel(), stream=stream)

    result = {"row": row, "kernel": plan.info.kernel_name}
    result["fmha_ms"] = time_ms(ours, args.warmup, args.reps)
    ref: Optional[torch.Tensor] = None
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
                          ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
        if name == "efficient" and ref is not None:
            result["efficient_ms"] = None  # only where neither cuDNN nor flash runs
            continue
        try:
            # A refusing backend explains itself in warnings; the row shows n/a.
            with sdpa_kernel(backend), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                def peer() -> torch.Tensor:
                    return F.scaled_dot_product_attention(qt, kt, vt, is_causal=row.causal,
                                                          enable_gqa=row.kv_ratio > 1)
                result[f"{name}_ms"] = time_ms(peer, args.warmup, args.reps)
                if ref is None:
                    ref = peer()
        except RuntimeError as exc:  # backend refuses this problem
            result[f"{name}_ms"] = None
            result[f"{name}_why"] = str(exc).splitlines()[0][:60]
    ours()
    torch.cuda.synchronize()
    if ref is not None:
        result["max_diff"] = (out.transpose(1, 2).float() - ref.float()).abs().max().item()
    return result


def tflops(row: Row, ms: Optional[float]) -> Optional[float]:
    return None if ms is None else row.flops() / (ms * 1e-3) / 1e12


def fmt(x: Optional[float], spec: str = "7.1f") -> str:
    return "n/a".rjust(7) if x is None else format(x, spec)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few rows only")
    ap.add_argument("--kernel", default="auto", help="auto, portable or hopper")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--only", default="", help="regular expression searched in the row label, e.g. 'd128 s8192' or 's(512|1024) causal'")
    ap.add_argument("--markdown", help="also write the table as markdown to this file")
    args = ap.parse_args()

    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; torch {torch.__version__}; cuDNN {torch.backends.cudnn.version()}; "
          f"libfmha {fmha.version()}; kernel={args.kernel}")
    header = (f"{'problem':<28} {'B':>3} {'H':>3} {'fmha':>7} {'cuDNN':>7} {'flash':>7} {'mem-eff':>7} "
              f"{'fmha/cuDNN':>10} {'maxdiff':>8}")
    print(header)
    md = ["| problem | B | H | libfmha TFLOP/s | cuDNN | flash (FA2) | mem-eff | libfmha/cuDNN | max diff vs peer |",
          "|---|---|---|---|---|---|---|---|---|"]
    ratios = []
    failures = 0
    for row in grid(args.quick):
        if args.only and not re.search(args.only, row.label()):
            continue
        r = run_row(row, args)
        ours, cudnn, flash, eff = (tflops(row, r.get(k))
                                   for k in ("fmha_ms", "cudnn_ms", "flash_ms", "efficient_ms"))
        ratio = ours / cudnn if ours and cudnn else None
        if ratio is not None:
            ratios.append(ratio)
        diff = r.get("max_diff")
        # bf16 outputs of two correct kernels differ by a few ulps of |O| <= ~4.
        bad = diff is not None and not diff < 0.05
        failures += bad
        print(f"{row.label():<28} {row.batch:>3} {row.heads:>3} {fmt(ours)} {fmt(cudnn)} {fmt(flash)} {fmt(eff)} "
              f"{fmt(ratio, '10.3f')} {fmt(diff, '8.4f')}{'  MISMATCH' if bad else ''}  {r['kernel']}", flush=True)
        md.append(f"| {row.label()} | {row.batch} | {row.heads} | {fmt(ours).strip()} | {fmt(cudnn).strip()} | "
                  f"{fmt(flash).strip()} | {fmt(eff).strip()} | {fmt(ratio, '.3f').strip()} | "
                  f"{fmt(diff, '.4f').strip()} |")
    if ratios:
        print(f"median libfmha/cuDNN over {len(ratios)} rows: {statistics.median(ratios):.3f}; "
              f"min {min(ratios):.3f}")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"Device: {dev}; torch {torch.__version__}; cuDNN {torch.backends.cudnn.version()}\n\n")
            f.write("\n".join(md) + "\n")
            if ratios:
                f.write(f"\nMedian libfmha/cuDNN: {statistics.median(ratios):.3f} (min {min(ratios):.3f})\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
