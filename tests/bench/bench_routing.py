#!/usr/bin/env python3
"""Routing benchmark: AUTO against each kernel family forced, on multi-token decode.

For every (B, Hq, Hkv, S, T) of the grid, one process times libfmha with the kernel
AUTO picks and with the decode and Hopper kernels forced, on the same inputs
(bf16, causal bottom-right, contiguous or paged KV cache), with bench_serving.py's
timer (L2 flush, GPU spin, CUDA events, median of --reps). Each output is checked
against the float32 reference first. It prints one line per (problem, kernel) and,
at the end, how far AUTO is from the fastest family on each problem: this is what
sets the routing thresholds in src/launch_decode.cpp (prefers_decode).

    FMHA_LIBRARY=build/libfmha.so PYTHONPATH=bindings/python/src \\
        python3 tests/bench/bench_routing.py [--t 2,4,8,16,32,64] [--heads 32/32,32/8] \\
        [--shapes 1/32768,8/8192] [--d 128] [--page 16]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_serving as bs  # noqa: E402  (the timer, inputs and reference live there)


def pairs(text: str) -> List[Tuple[int, int]]:
    out = []
    for item in text.split(","):
        a, b = item.split("/")
        out.append((int(a), int(b)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--t", default="2,4,8,16,32,64", help="query tokens per sequence")
    ap.add_argument("--heads", default="32/32,32/8,64/8,32/2", help="Hq/Hkv pairs")
    ap.add_argument("--shapes", default="1/32768,8/8192,32/4096,64/2048", help="B/S pairs")
    ap.add_argument("--d", type=int, default=128, help="head_dim")
    ap.add_argument("--page", type=int, default=0, help="page size of a shuffled paged cache (0: contiguous)")
    ap.add_argument("--kernels", default="auto,decode,hopper")
    ap.add_argument("--splits", default="0",
                    help="split counts to force on the decode and Hopper kernels (0: automatic), e.g. 0,2,4")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--flush", choices=["write", "read", "off"], default="write")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    import fmha
    bs.torch, bs.F, bs.fmha = torch, F, fmha
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to benchmark")
        return 0
    timer = bs.Timer(args.warmup, args.reps, args.flush)
    kernels = args.kernels.split(",")
    splits = [int(x) for x in args.splits.split(",")]
    d = args.d
    print(f"device: {torch.cuda.get_device_name()}; libfmha {fmha.version()}; commit {bs.git_head()}; "
          f"head_dim {d}; {'pages of %d' % args.page if args.page else 'contiguous cache'}; "
          f"flush {args.flush}; median of {args.reps}")
    print(f"{'problem':<24} {'T':>3} {'rows':>4} {'kernel':<9} {'us':>8} {'err':>7}  chosen")
    times: Dict[Tuple[str, int], Dict[str, float]] = {}
    mismatches = 0
    for b, s in pairs(args.shapes):
        for hq, hkv in pairs(args.heads):
            for t in (int(x) for x in args.t.split(",")):
                label = bs.decode_label(b, hq, hkv, s, d)
                torch.manual_seed(b * 1_000_003 + t * 10_007 + hq * 101 + hkv * 7 + s + d)
                q, k, v = bs.randn(b, t, hq, d), bs.randn(b, s, hkv, d), bs.randn(b, s, hkv, d)
                lengths = torch.full((b,), s, dtype=torch.int32, device=bs.DEVICE)
                k_cache, v_cache, table = k, v, None
                if args.page:
                    k_cache, v_cache, table = bs.to_pages(k, v, args.page, seed=b + s)
                ref = bs.reference(q, k, v, True)
                runs = [(k, 0) for k in kernels if k == "auto"]
                runs += [(k, n) for k in kernels if k != "auto" for n in splits]
                for kernel, num_splits in runs:
                    bs.KERNEL, bs.NUM_SPLITS = kernel, num_splits
                    name = kernel if num_splits == 0 else f"{kernel}/{num_splits}"

                    def run() -> object:
                        return bs.fmha_kvcache(q, k_cache, v_cache, lengths, block_table=table)

                    try:
                        out, chosen = bs.call_and_get_kernel(run)
                        err = bs.rel_err(out, ref)
                        del out
                        us = timer.time_ms(run) * 1e3
                    except Exception as exc:  # a family that cannot run the problem
                        print(f"{label:<24} {t:>3} {t * hq // hkv:>4} {name:<9} {'n/a':>8} {'':>7}  "
                              f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}", flush=True)
                        continue
                    if not err <= bs.ERR_LIMIT:
                        mismatches += 1
                    times.setdefault((label, t), {})[name] = us
                    print(f"{label:<24} {t:>3} {t * hq // hkv:>4} {name:<9} {us:>8.1f} {bs.err_str(err):>7}  {chosen}",
                          flush=True)
                del q, k, v, k_cache, v_cache, ref
                torch.cuda.empty_cache()

    if "auto" in kernels:
        ratios = []
        print("\nAUTO against the fastest forced run (1.0 = AUTO picked it):")
        for (label, t), row in times.items():
            forced = [row[k] for k in row if k != "auto"]
            if "auto" not in row or not forced:
                continue
            r = min(forced) / row["auto"]
            ratios.append(r)
            if r < 0.97:
                print(f"  {label} T={t}: AUTO {row['auto']:.1f} us, fastest {min(forced):.1f} ({r:.3f})")
        if ratios:
            geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            print(f"  {len(ratios)} problems: geometric mean {geo:.3f}, worst {min(ratios):.3f}")
    print(f"mismatches: {mismatches}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
