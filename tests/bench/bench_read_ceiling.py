#!/usr/bin/env python3
"""Read-ceiling benchmark: the decode rows against plain reads of the same bytes.

For each decode row (bench_serving.py's DECODE_ROWS by default: bf16, T = 1, head_dim 128),
one process times libfmha and torch SDPA's cuDNN backend on the row (alternated run by run,
as in bench_serving's decode section), then reads a buffer as large as the row's K and V
without computing attention:

  torch.sum  torch's own reduction over the buffer
  grid       a Triton kernel, one program per equal contiguous piece: the hardware hands
             programs to SMs as they free up (pieces of 8 KB to 1 MB)
  static     a persistent grid (8 or 16 programs per SM), program p reading pieces
             p, p + P, p + 2P, ...
  counter    the same persistent grid taking pieces from an atomic counter (relaxed; the
             next ticket is fetched before the current piece is read; the program holding
             the last ticket sets the counter back to 0 for the next run)

Every read is checked: the buffer holds random integers 0-7, which each program adds up
exactly (float32 per lane, then int32 across the lanes, which needs no more registers than
a float32 sum; an int64 sum slowed the static reads by up to 7%, kernel notes d62), and the
programs' sums must add up to the buffer's sum exactly; the counter must be 0 after the
timed runs. The table gives microseconds (median of --reps after an L2 flush,
bench_serving's Timer) for libfmha, cuDNN and the fastest configuration of each read, and
libfmha's time over the fastest read of any kind. A detail line per configuration is
printed as it runs. This is what kernel notes d61 and d62 measured (docs/kernel-notes.md).

    FMHA_LIBRARY=build/libfmha.so PYTHONPATH=bindings/python/src \\
        python3 tests/bench/bench_read_ceiling.py [--rows 8/32/8/8192,64/32/32/2048] \\
        [--flush write,read] [--quick] [--markdown out.md]
    python3 tests/bench/bench_read_ceiling.py --self-test     # pure Python checks, no GPU

Needs torch and Triton on the GPU machine. Exit status 1 when a read's check fails or
libfmha's output is off the float32 reference by more than bench_serving's ERR_LIMIT.
"""
from __future__ import annotations

import argparse
import os
import sys
import types
from typing import Any, Callable, Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_serving as bs  # noqa: E402  (timer, decode inputs, cuDNN peer and table live there)

ELEM_BYTES = 2                      # the buffer is bf16, as the K/V cache
VALUE_LIMIT = 8                     # buffer values: integers in [0, VALUE_LIMIT)
EXACT_LIMIT = 1 << 24               # float32 holds every integer up to this
REFERENCE_ROW = 1 << 20             # elements per float32 partial of the reference sum
# (piece KB, elements a program loads per step) of the one-program-per-piece grids: the
# smallest pieces read fastest with the smaller step (kernel notes d61).
GRID_PIECES = ((8, 2048), (16, 2048), (16, 4096), (32, 4096), (64, 4096), (128, 4096),
               (256, 4096), (1024, 4096))
PERSISTENT_PER_SM = (8, 16)
PERSISTENT_PIECES_KB = (16, 32, 64, 128)
QUICK_GRID_PIECES = ((16, 2048), (128, 4096))
QUICK_PERSISTENT = ((16, 32),)      # (programs per SM, piece KB)
BLOCK = 4096                        # elements a persistent program loads per step
MIN_BLOCK = min(b for _, b in GRID_PIECES + ((0, BLOCK),))
WARPS, STAGES = 4, 3


# ============================================================================
# Pure helpers (no torch; exercised by --self-test)
# ============================================================================

def parse_rows(text: str) -> List[Tuple[int, int, int, int]]:
    """"B/Hq/Hkv/S,..." -> [(batch, q heads, kv heads, seqlen_k)]."""
    rows = []
    for item in text.split(","):
        parts = item.strip().split("/")
        if len(parts) != 4:
            raise ValueError(f"--rows: {item!r} is not B/Hq/Hkv/S")
        b, hq, hkv, s = (int(x) for x in parts)
        if min(b, hq, hkv, s) <= 0 or hq % hkv:
            raise ValueError(f"--rows: {item!r}: all positive, Hq a multiple of Hkv")
        rows.append((b, hq, hkv, s))
    return rows


def kv_elements(b: int, hkv: int, s: int, d: int) -> int:
    """Elements of K and V together for one decode row."""
    return 2 * b * s * hkv * d


def piece_plan(n: int, piece_kb: int, block: int = BLOCK) -> Tuple[int, int]:
    """(elements per piece, number of pieces) covering n elements; pieces are whole blocks
    (the last one may be partial)."""
    chunk = max(block, piece_kb * 1024 // ELEM_BYTES // block * block)
    return chunk, (n + chunk - 1) // chunk


def sums_exact(n: int, block: int = MIN_BLOCK) -> bool:
    """Whether a buffer of n elements keeps every sum exact: a lane of a program's float32
    accumulator adds at most ceil(n / block) values below VALUE_LIMIT, however the pieces
    fall to programs; the reference adds REFERENCE_ROW values per float32 partial. A
    program's int32 total is exact up to 2**31 - 1 (3e8 elements); a counter program that
    took more would wrap, and its check would fail (by a multiple of 2**32), never pass."""
    lane_max = (VALUE_LIMIT - 1) * ((n + block - 1) // block)
    return lane_max < EXACT_LIMIT and (VALUE_LIMIT - 1) * REFERENCE_ROW < EXACT_LIMIT


def self_test() -> int:
    assert parse_rows("8/32/8/8192, 64/32/32/2048") == [(8, 32, 8, 8192), (64, 32, 32, 2048)]
    for bad in ("8/32/8", "8/32/7/8192", "0/32/8/8192"):
        try:
            parse_rows(bad)
        except ValueError:
            pass
        else:
            raise AssertionError(f"parse_rows accepted {bad!r}")
    for b, hq, hkv, s in bs.DECODE_ROWS:
        n = kv_elements(b, hkv, s, bs.HEAD_DIM)
        # bench_serving counts K, V, Q and O bytes: K and V are all but Q and O.
        assert n * ELEM_BYTES == bs.kv_decode_bytes(b, 1, hq, hkv, s, bs.HEAD_DIM) - 2 * b * hq * bs.HEAD_DIM * 2
        for kb, block in GRID_PIECES + tuple((kb, BLOCK) for kb in PERSISTENT_PIECES_KB + (1, 3, 100000)):
            chunk, pieces = piece_plan(n, kb, block)
            assert chunk % block == 0 and chunk >= block
            assert (pieces - 1) * chunk < n <= pieces * chunk, (n, kb, chunk, pieces)
        assert sums_exact(n), (b, hq, hkv, s)
    # The bound itself: 2**24 / 7 values per lane, MIN_BLOCK lanes.
    limit = (EXACT_LIMIT - 1) // (VALUE_LIMIT - 1) * MIN_BLOCK
    assert sums_exact(limit) and not sums_exact(limit + MIN_BLOCK)
    print("self-test: ok")
    return 0


# ============================================================================
# GPU part
# ============================================================================

def build_kernels(triton: Any, tl: Any) -> Dict[str, Any]:
    @triton.jit
    def read_grid(x_ptr, out_ptr, n, chunk, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        start = pid.to(tl.int64) * chunk
        end = tl.minimum(start + chunk, n)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for i in range(start, end, BLOCK):
            offs = i + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + offs, mask=offs < end, other=0.0).to(tl.float32)
        tl.store(out_ptr + pid, tl.sum(acc.to(tl.int32), axis=0))

    @triton.jit
    def read_static(x_ptr, out_ptr, n, chunk, pieces, programs, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for c in range(pid, pieces, programs):
            start = c.to(tl.int64) * chunk
            end = tl.minimum(start + chunk, n)
            for i in range(start, end, BLOCK):
                offs = i + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + offs, mask=offs < end, other=0.0).to(tl.float32)
        tl.store(out_ptr + pid, tl.sum(acc.to(tl.int32), axis=0))

    @triton.jit
    def read_counter(x_ptr, out_ptr, counter_ptr, n, chunk, pieces, programs, BLOCK: tl.constexpr):
        # Tickets pieces .. pieces + programs - 1 end the programs, one each; the program
        # holding the last one is the last to stop taking pieces and resets the counter.
        pid = tl.program_id(0)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        c = tl.atomic_add(counter_ptr, 1, sem="relaxed")
        while c < pieces:
            following = tl.atomic_add(counter_ptr, 1, sem="relaxed")
            start = c.to(tl.int64) * chunk
            end = tl.minimum(start + chunk, n)
            for i in range(start, end, BLOCK):
                offs = i + tl.arange(0, BLOCK)
                acc += tl.load(x_ptr + offs, mask=offs < end, other=0.0).to(tl.float32)
            c = following
        if c == pieces + programs - 1:
            tl.atomic_xchg(counter_ptr, 0)
        tl.store(out_ptr + pid, tl.sum(acc.to(tl.int32), axis=0))

    return {"grid": read_grid, "static": read_static, "counter": read_counter}


def exact_sum(torch: Any, buf: Any) -> int:
    """The buffer's sum, exactly (float32 partials of REFERENCE_ROW small integers)."""
    m = buf.numel() // REFERENCE_ROW * REFERENCE_ROW
    total = buf[:m].view(-1, REFERENCE_ROW).float().sum(dim=1).double().sum().item()
    if m < buf.numel():
        total += buf[m:].float().double().sum().item()
    return int(round(total))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", default=",".join("/".join(str(x) for x in r) for r in bs.DECODE_ROWS),
                    help="B/Hq/Hkv/S decode rows (T = 1)")
    ap.add_argument("--d", type=int, default=bs.HEAD_DIM, help="head_dim")
    ap.add_argument("--flush", default="write", help="comma-separated: write, read, off (bench_serving's Timer)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="two grid and one persistent configuration")
    ap.add_argument("--markdown", help="append the tables to this file")
    ap.add_argument("--self-test", action="store_true", help="pure Python checks, no GPU")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    rows = parse_rows(args.rows)

    import torch
    import torch.nn.functional as F
    import fmha
    bs.torch, bs.F, bs.fmha = torch, F, fmha
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to benchmark")
        return 0
    import triton
    import triton.language as tl
    kernels = build_kernels(triton, tl)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    grid_pieces = QUICK_GRID_PIECES if args.quick else GRID_PIECES
    persistent = (list(QUICK_PERSISTENT) if args.quick
                  else [(p, kb) for p in PERSISTENT_PER_SM for kb in PERSISTENT_PIECES_KB])
    print(f"device: {torch.cuda.get_device_name()} ({sms} SMs); libfmha {fmha.version()}; "
          f"commit {bs.git_head()}; triton {triton.__version__}; head_dim {args.d}; median of {args.reps}")

    failures = 0
    tables = []
    columns = [("problem", 22), ("fmha us", 8), ("cuDNN us", 8), ("torch.sum", 9), ("grid", 7),
               ("static", 7), ("counter", 7), ("fmha/fastest", 12)]
    for flush in args.flush.split(","):
        timer = bs.Timer(args.warmup, args.reps, flush=flush)
        ctx = bs.Ctx(types.SimpleNamespace(kv_layout="mixed", sequential=False), timer)
        tab = bs.Table(f"decode rows against plain reads of their K+V bytes, flush {flush} (µs)", columns)
        tab.header()
        for b, hq, hkv, s in rows:
            label = bs.decode_label(b, hq, hkv, s, args.d)
            r = bs.decode_vs_cudnn(ctx, b, 1, hq, hkv, s, args.d)
            if not r["err"] <= bs.ERR_LIMIT:
                failures += 1
            ours_us = r["ours_ms"] * 1e3
            peer_us = r["peer_ms"] * 1e3 if r["peer_ms"] is not None else None
            print(f"  {label}: libfmha {ours_us:.1f} us ({r['kernel']}, err {bs.err_str(r['err'])}), "
                  f"cuDNN {bs.fmt(peer_us, '.1f')} us {r['note']}", flush=True)
            torch.cuda.empty_cache()

            n = kv_elements(b, hkv, s, args.d)
            if not sums_exact(n):
                tab.error(label, ValueError(f"{n} elements: too many for exact sums (sums_exact)"))
                failures += 1
                continue
            buf = torch.empty(n, dtype=torch.bfloat16, device=bs.DEVICE).random_(0, VALUE_LIMIT)
            total = exact_sum(torch, buf)
            out = torch.empty(max(max(piece_plan(n, kb, blk)[1] for kb, blk in grid_pieces),
                                  max(PERSISTENT_PER_SM) * sms),
                              dtype=torch.int32, device=bs.DEVICE)
            counter = torch.zeros(1, dtype=torch.int32, device=bs.DEVICE)
            best: Dict[str, float] = {}

            def measure(kind: str, what: str, fn: Callable[[], Any], programs: int) -> None:
                nonlocal failures
                out.zero_()
                fn()
                torch.cuda.synchronize()
                got = int(out[:programs].sum().item())
                us = timer.time_ms(fn) * 1e3
                ok = got == total and (kind != "counter" or int(counter.item()) == 0)
                failures += not ok
                print(f"  {label} {kind} {what}: {us:.1f} us, {n * ELEM_BYTES / us / 1e6:.3f} TB/s "
                      f"{'check ok' if ok else f'CHECK FAILED (sum {got} against {total}, counter {int(counter.item())})'}",
                      flush=True)
                if ok:
                    best[kind] = min(best.get(kind, float("inf")), us)

            sum_us = timer.time_ms(lambda: buf.sum()) * 1e3
            for kb, blk in grid_pieces:
                chunk, pieces = piece_plan(n, kb, blk)
                measure("grid", f"{pieces} pieces of {chunk * ELEM_BYTES // 1024} KB, steps of {blk}",
                        lambda chunk=chunk, pieces=pieces, blk=blk: kernels["grid"][(pieces,)](
                            buf, out, n, chunk, BLOCK=blk, num_warps=WARPS, num_stages=STAGES), pieces)
            for per_sm, kb in persistent:
                chunk, pieces = piece_plan(n, kb)
                programs = per_sm * sms
                what = f"{programs} programs, {pieces} pieces of {chunk * ELEM_BYTES // 1024} KB"
                measure("static", what,
                        lambda chunk=chunk, pieces=pieces, programs=programs: kernels["static"][(programs,)](
                            buf, out, n, chunk, pieces, programs, BLOCK=BLOCK, num_warps=WARPS,
                            num_stages=STAGES), programs)
                measure("counter", what,
                        lambda chunk=chunk, pieces=pieces, programs=programs: kernels["counter"][(programs,)](
                            buf, out, counter, n, chunk, pieces, programs, BLOCK=BLOCK, num_warps=WARPS,
                            num_stages=STAGES), programs)
            fastest = min(best.values()) if best else None
            tab.add([label, f"{ours_us:.1f}", bs.fmt(peer_us, ".1f"), f"{sum_us:.1f}",
                     bs.fmt(best.get("grid"), ".1f"), bs.fmt(best.get("static"), ".1f"),
                     bs.fmt(best.get("counter"), ".1f"), bs.fmt(bs.ratio(ours_us, fastest), ".3f")])
            buf = out = counter = None  # free the row's buffers before the next row
            torch.cuda.empty_cache()
        tab.note("grid: one program per piece; static / counter: 8 or 16 programs per SM taking pieces "
                 "round-robin / from a counter; each column the fastest configuration that passed its check")
        tab.note("fmha/fastest: libfmha's time over the fastest plain read of any kind (1.0 = as fast as a read)")
        tables.append(tab)
    if args.markdown:
        with open(args.markdown, "a", encoding="utf-8") as f:
            for tab in tables:
                f.write(tab.markdown() + "\n")
    print(f"failures: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
