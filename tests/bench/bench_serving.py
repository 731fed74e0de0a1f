#!/usr/bin/env python3
"""Serving benchmark: decode, paged KV, multi-token decode, head_dim 512, varlen prefill.

One process, the same random tensors (torch.randn) for every implementation,
CUDA events, warm-ups, median of --reps timed runs. libfmha is called through
the Python binding's serving functions (fmha.attention_with_kvcache,
fmha.attention_varlen, fmha.attention); the peer is torch SDPA's cuDNN backend
where it can run the problem.

Sections (--only decode,paged,...):
  decode    T=1 bf16 hd128 GQA decode, contiguous KV cache, vs cuDNN SDPA (TB/s)
  decode-hd the decode rows at head_dim 64, 96 and 256 (reported, no bar)
  paged     the same rows with a paged KV cache (pages 16 and 64, shuffled) vs contiguous
  paged-t   the paged rows at T=32 query tokens (causal bottom-right) vs contiguous
  decode-t  T=4 and T=32 query tokens, causal bottom-right, vs cuDNN SDPA with that mask
  hd512     MQA decode with head_dim 512 (cuDNN: n/a where it refuses)
  varlen    ragged prefill (16384 tokens) vs dense prefill of the mean length (TFLOP/s)
  chunked   the same ragged prompts as varlen Q against a KV cache holding them (causal):
            paged cache (pages 16 and 64, shuffled) vs contiguous cache (TFLOP/s)
  features  causal prefill with a sliding window, softcap and sinks: AUTO vs the portable
            kernel forced, and the same prefill without them (TFLOP/s; no peer has them)
  host      CPU microseconds per call of the Python binding and of torch SDPA (cuDNN) on
            the decode rows, the GPU kept busy so that calls only enqueue (C: fmha_bench_host)

Timing: every timed run is preceded by an L2 flush and a GPU spin (torch.cuda._sleep) long enough to cover the host cost
of the call, so the events measure GPU time only and not Python overhead. On the
rows timed against cuDNN with one call each (decode, decode-hd, decode-t, hd512)
the two alternate run by run, so a drift over the measurement falls on both
(--sequential: all of libfmha's runs first).
--flush write (default) zeroes 256 MiB: L2 is left full of dirty lines whose
write-back the timed kernel pays for; --flush read sums 256 MiB: L2 is left
cold and clean (what ncu's cache control gives); --flush off skips it.
KV layout of the decode rows (--kv-layout): "mixed" (default) gives libfmha
its [B, S, Hkv, D] cache and SDPA a contiguous [B, Hkv, S, D] copy; "bshd"
and "bhsd" give both the same memory in that layout (one through views).
Bandwidth counts the bytes of K, V, Q and O once (1 TB/s = 1e12 B/s); FLOPs
count 4*D per visible (query, key) pair per head, exactly, masks included.
"err" is max|libfmha - float32 reference| / max|reference| on the same inputs.

    FMHA_LIBRARY=build/libfmha.so PYTHONPATH=bindings/python/src \\
        python3 tests/bench/bench_serving.py [--quick] [--only decode,paged] [--markdown out.md]
    python3 tests/bench/bench_serving.py --self-test     # pure Python checks, no GPU

--self-test also checks, when the binding imports and libfmha.so loads (no
driver needed), that the binding has the functions and parameters used here
and that fmha_check_support(sm=90) accepts every problem's descriptor as the
adapter (kvcache_args, varlen_args, dense_args) builds it.
"""
from __future__ import annotations

import argparse
import os
import datetime
import random
import re
import statistics
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

# torch and fmha are imported in main() so that --self-test runs anywhere.
torch: Any = None
F: Any = None
fmha: Any = None
DEVICE = "cuda"

SECTIONS = ("decode", "decode-hd", "paged", "paged-t", "decode-t", "hd512", "varlen", "chunked", "features",
            "host")

# (batch, num_q_heads, num_kv_heads, seqlen_k) of the decode rows (shared/notes/anchors.md).
DECODE_ROWS: List[Tuple[int, int, int, int]] = [
    (1, 32, 8, 32768),
    (8, 32, 8, 8192),
    (32, 32, 8, 4096),
    (64, 32, 32, 2048),
    (8, 64, 8, 16384),
]
# cuDNN 9.19 on the same H200, TB/s (anchors.md), printed beside the live figures.
DECODE_ANCHOR_CUDNN = {(1, 32, 8, 32768): 2.20, (8, 32, 8, 8192): 3.25, (32, 32, 8, 4096): 3.94,
                       (64, 32, 32, 2048): 4.43, (8, 64, 8, 16384): 3.77}
HEAD_DIM = 128
PAGE_SIZES = (16, 64)
DECODE_T = (4, 32)
DECODE_HEAD_DIMS = (64, 96, 256)  # the decode-hd section: the decode rows at other head dims
PAGED_T = 32  # query tokens of the paged-t section (speculative / multi-token decode)
VARLEN_TOTAL = 16384
VARLEN_MIN, VARLEN_MAX = 256, 4096
VARLEN_SEED = 20261201

# Bars.
BAR_DECODE_TBPS_B1 = 2.5
BAR_DECODE_TBPS = 3.6
BAR_DECODE_RATIO = 1.0
BAR_PAGED_RATIO = 0.85
BAR_VARLEN_RATIO = 0.90
# A row whose err exceeds this is flagged MISMATCH (bf16 output: about 0.002-0.005).
ERR_LIMIT = 0.02
# cuDNN may need K/V repeated per query head; skip that fallback above this many bytes.
REPEAT_LIMIT_BYTES = 8 << 30


# ============================================================================
# Pure helpers (no torch; exercised by --self-test)
# ============================================================================

def visible_pairs(seqlen_q: int, seqlen_k: int, mask: Optional[str]) -> int:
    """Number of (query, key) pairs that attend: mask None, "top_left" (j <= i) or
    "bottom_right" (j <= i + seqlen_k - seqlen_q); rows that see nothing count 0."""
    if mask is None:
        return seqlen_q * seqlen_k
    if mask == "top_left":
        offset = 0
    elif mask == "bottom_right":
        offset = seqlen_k - seqlen_q
    else:
        raise ValueError(f"unknown mask {mask!r}")
    # Row i sees min(max(i + offset + 1, 0), seqlen_k) keys.
    total = 0
    for i in range(seqlen_q):
        total += min(max(i + offset + 1, 0), seqlen_k)
    return total


def attention_flops(batch: int, num_q_heads: int, head_dim: int, pairs_per_seq: int) -> float:
    """4*D FLOPs per visible pair per query head (QK^T and PV, 2 FLOPs per MAC each)."""
    return 4.0 * batch * num_q_heads * head_dim * pairs_per_seq


def kv_decode_bytes(batch: int, tokens: int, num_q_heads: int, num_kv_heads: int, seqlen_k: int,
                    head_dim: int, elem_bytes: int = 2) -> int:
    """Bytes of K and V (read once) plus Q (read) and O (written)."""
    kv = 2 * batch * seqlen_k * num_kv_heads * head_dim
    qo = 2 * batch * tokens * num_q_heads * head_dim
    return elem_bytes * (kv + qo)


def tbps(nbytes: float, ms: Optional[float]) -> Optional[float]:
    return None if not ms else nbytes / (ms * 1e-3) / 1e12


def tflops(flops: float, ms: Optional[float]) -> Optional[float]:
    return None if not ms else flops / (ms * 1e-3) / 1e12


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a and b else None


def ragged_lengths(total: int, lo: int, hi: int, seed: int) -> List[int]:
    """Lengths uniform in [lo, hi] from random.Random(seed) until they sum to `total`;
    the last one is cut to fit (so it may be shorter than lo)."""
    rng = random.Random(seed)
    lengths: List[int] = []
    left = total
    while left > 0:
        n = min(rng.randint(lo, hi), left)
        lengths.append(n)
        left -= n
    return lengths


def cumulative(lengths: Sequence[int]) -> List[int]:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def shuffled_block_table(batch: int, pages_per_seq: int, seed: int) -> List[List[int]]:
    """A random permutation of the batch*pages_per_seq pages, as [batch][pages_per_seq]."""
    pages = list(range(batch * pages_per_seq))
    random.Random(seed).shuffle(pages)
    return [pages[b * pages_per_seq:(b + 1) * pages_per_seq] for b in range(batch)]


def decode_bar(batch: int, bw: Optional[float], rat: Optional[float]) -> str:
    """'ok' when the bandwidth bar (2.5 TB/s at B=1, else 3.6) and ratio >= 1.0 hold."""
    if bw is None:
        return "n/a"
    need = BAR_DECODE_TBPS_B1 if batch == 1 else BAR_DECODE_TBPS
    miss = []
    if bw < need:
        miss.append(f"bw<{need}")
    if rat is not None and rat < BAR_DECODE_RATIO:
        miss.append(f"ratio<{BAR_DECODE_RATIO}")
    if rat is None:
        return "ok(bw)" if not miss else "MISS " + ",".join(miss)
    return "ok" if not miss else "MISS " + ",".join(miss)


def ratio_bar(rat: Optional[float], need: float) -> str:
    if rat is None:
        return "n/a"
    return "ok" if rat >= need else f"MISS <{need}"


def decode_rows(quick: bool) -> List[Tuple[int, int, int, int]]:
    return list(DECODE_ROWS)


def decode_hd_rows(quick: bool) -> List[Tuple[int, int, int, int, int]]:
    """(batch, num_q_heads, num_kv_heads, seqlen_k, head_dim)."""
    rows = DECODE_ROWS[1:4:2] if quick else list(DECODE_ROWS)
    dims = DECODE_HEAD_DIMS[::2] if quick else DECODE_HEAD_DIMS
    return [r + (d,) for d in dims for r in rows]


def paged_rows(quick: bool) -> List[Tuple[int, int, int, int]]:
    return DECODE_ROWS[::2] if quick else list(DECODE_ROWS)


def decode_t_rows(quick: bool) -> List[Tuple[int, int, int, int, int]]:
    rows = DECODE_ROWS[:3:2] if quick else list(DECODE_ROWS)
    return [r + (t,) for t in DECODE_T for r in rows]


def hd512_rows(quick: bool) -> List[Tuple[int, int, int]]:
    """(batch, num_q_heads, seqlen_k); num_kv_heads = 1, head_dim = 512."""
    batches = (1, 32) if quick else (1, 8, 32)
    seqlens = (16384,) if quick else (4096, 16384)
    return [(b, hq, s) for hq in (16, 128) for b in batches for s in seqlens]


def varlen_rows(quick: bool) -> List[Tuple[int, int, bool]]:
    """(num_q_heads, num_kv_heads, causal)."""
    heads = [(32, 8)] if quick else [(16, 16), (32, 8)]
    return [(hq, hkv, c) for hq, hkv in heads for c in (False, True)]


def parse_only(value: str) -> List[str]:
    if not value:
        return list(SECTIONS)
    names = [s.strip() for s in value.split(",") if s.strip()]
    bad = [s for s in names if s not in SECTIONS]
    if bad:
        raise SystemExit(f"--only: unknown section(s) {bad}; choose from {', '.join(SECTIONS)}")
    return [s for s in SECTIONS if s in names]


def parse_page_sizes(value: str) -> Tuple[int, ...]:
    """--page-sizes: comma-separated rows per page, each dividing 256 (the chunked section's
    cache capacity is a multiple of 256 and every decode length a multiple of 2048)."""
    try:
        sizes = tuple(int(x) for x in value.split(",") if x.strip())
    except ValueError:
        raise SystemExit(f"--page-sizes: '{value}' is not a comma-separated list of integers")
    bad = [x for x in sizes if x <= 0 or 256 % x != 0]
    if not sizes or bad:
        raise SystemExit(f"--page-sizes: {bad or value!r}: each size must divide 256 (1, 2, 4, ..., 256)")
    return sizes


def fmt(x: Optional[float], spec: str = ".2f") -> str:
    return "n/a" if x is None else format(x, spec)


class Table:
    """Prints rows as they come; keeps them for --markdown."""

    def __init__(self, title: str, columns: Sequence[Tuple[str, int]]) -> None:
        self.title = title
        self.columns = list(columns)
        self.rows: List[List[str]] = []
        self.notes: List[str] = []

    def header(self) -> None:
        print(f"\n== {self.title}", flush=True)
        print(" ".join(name.rjust(w) if i else name.ljust(w) for i, (name, w) in enumerate(self.columns)), flush=True)

    def add(self, values: Sequence[str]) -> None:
        values = [str(v) for v in values]
        assert len(values) == len(self.columns), (values, self.columns)
        self.rows.append(values)
        print(" ".join(v.rjust(w) if i else v.ljust(w) for i, (v, (_, w)) in enumerate(zip(values, self.columns))),
              flush=True)

    def error(self, label: str, exc: BaseException) -> None:
        msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:160]
        self.rows.append([label, f"ERROR {msg}"] + [""] * (len(self.columns) - 2))
        print(f"{label.ljust(self.columns[0][1])} ERROR {msg}", flush=True)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}", flush=True)

    def markdown(self) -> str:
        lines = [f"### {self.title}", "", "| " + " | ".join(n for n, _ in self.columns) + " |",
                 "|" + "---|" * len(self.columns)]
        for r in self.rows:
            lines.append("| " + " | ".join(v.replace("|", "/") for v in r) + " |")
        lines += [""] + [f"- {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


class _FakeDeviceArray:
    """An object with __cuda_array_interface__ at a made-up address: enough for the
    binding's describe_* functions, which read shapes and strides and run nothing."""

    _next_address = 1 << 40

    def __init__(self, shape: Sequence[int], typestr: str = "<f2") -> None:
        item = 4 if typestr == "<i4" else 2
        strides, acc = [], item
        for n in reversed(shape):
            strides.append(acc)
            acc *= n
        address = _FakeDeviceArray._next_address
        _FakeDeviceArray._next_address += (acc // 4096 + 2) * 4096
        self.shape = tuple(shape)
        self.__cuda_array_interface__ = {"shape": self.shape, "typestr": typestr, "data": (address, False),
                                         "strides": tuple(reversed(strides)), "version": 3}


def api_check() -> Tuple[int, int]:
    """If the binding and libfmha.so load (no driver needed): do the functions this script
    calls exist, and does the library accept (fmha_check_support, sm 90) the descriptor of
    every problem as the adapter passes it? fp16 stands in for bf16 (a
    __cuda_array_interface__ cannot say bfloat16). Returns (accepted, checked)."""
    global fmha
    import inspect
    import os
    try:
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python", "src")
        if os.path.isdir(src) and src not in sys.path:
            sys.path.append(src)
        import fmha as _fmha
        fmha = _fmha
    except Exception as exc:
        print(f"api: binding not importable ({type(exc).__name__}: {exc}); skipped")
        return 0, 0
    for name, params in (("attention_with_kvcache", ("cache_seqlens", "block_table", "causal", "num_splits")),
                         ("attention_varlen", ("cu_seqlens_q", "max_seqlen_k", "causal")),
                         ("attention", ("causal", "kernel"))):
        fn = getattr(fmha, name, None)
        if fn is None:
            print(f"api: fmha.{name} does not exist in this binding")
            continue
        have = inspect.signature(fn).parameters
        missing = [p for p in params if p not in have]
        print(f"api: fmha.{name}: " + (f"MISSING parameters {missing}" if missing else "parameters as expected"))
    dk, dv, dd = (getattr(fmha, n, None) for n in ("describe_with_kvcache", "describe_varlen", "describe"))
    if dk is None or dv is None or dd is None or not hasattr(fmha, "check_support"):
        print("api: no describe_with_kvcache/describe_varlen/describe: descriptors not checked")
        return 0, 0
    try:
        fmha.library()
    except Exception as exc:
        print(f"api: libfmha not loadable ({str(exc).splitlines()[0]}; set FMHA_LIBRARY): descriptors not checked")
        return 0, 0
    T = _FakeDeviceArray
    problems: List[Tuple[str, Callable[[], Any]]] = []
    for b, hq, hkv, s, d, t in ([r + (HEAD_DIM, 1) for r in DECODE_ROWS] +
                                [r[:4] + (HEAD_DIM, r[4]) for r in decode_t_rows(False)] +
                                [r + (1,) for r in decode_hd_rows(False)] +
                                [(b, hq, 1, s, 512, 1) for b, hq, s in hd512_rows(False)]):
        def kv(b=b, hq=hq, hkv=hkv, s=s, d=d, t=t) -> Any:
            a, kw = kvcache_args(T((b, t, hq, d)), T((b, s, hkv, d)), T((b, s, hkv, d)), T((b,), "<i4"))
            return dk(*a, **kw, out=T((b, t, hq, d)))
        problems.append((f"kvcache {decode_label(b, hq, hkv, s, d)} T{t}", kv))
    for b, hq, hkv, s in paged_rows(False):
        for page in PAGE_SIZES:
            for t in (1, PAGED_T):
                def pg(b=b, hq=hq, hkv=hkv, s=s, page=page, t=t) -> Any:
                    pages = b * (s // page)
                    a, kw = kvcache_args(T((b, t, hq, HEAD_DIM)), T((pages, page, hkv, HEAD_DIM)),
                                         T((pages, page, hkv, HEAD_DIM)), T((b,), "<i4"),
                                         block_table=T((b, s // page), "<i4"))
                    return dk(*a, **kw, out=T((b, t, hq, HEAD_DIM)))
                problems.append((f"paged {decode_label(b, hq, hkv, s)} page {page} T{t}", pg))
    lengths = ragged_lengths(VARLEN_TOTAL, VARLEN_MIN, VARLEN_MAX, VARLEN_SEED)
    n, dense_s = len(lengths), round(VARLEN_TOTAL / len(lengths))
    for hq, hkv, causal in varlen_rows(False):
        def vl(hq=hq, hkv=hkv, causal=causal) -> Any:
            cu = T((n + 1,), "<i4")
            a, kw = varlen_args(T((VARLEN_TOTAL, hq, HEAD_DIM)), T((VARLEN_TOTAL, hkv, HEAD_DIM)),
                                T((VARLEN_TOTAL, hkv, HEAD_DIM)), cu, cu, max(lengths), max(lengths), causal=causal)
            return dv(*a, **kw, out=T((VARLEN_TOTAL, hq, HEAD_DIM)))

        def dn(hq=hq, hkv=hkv, causal=causal) -> Any:
            a, kw = dense_args(T((n, dense_s, hq, HEAD_DIM)), T((n, dense_s, hkv, HEAD_DIM)),
                               T((n, dense_s, hkv, HEAD_DIM)), causal=causal)
            return dd(*a, **kw, out=T((n, dense_s, hq, HEAD_DIM)))
        problems += [(f"varlen H{hq}/{hkv} causal={causal}", vl), (f"dense {n}x{dense_s} H{hq}/{hkv} causal={causal}", dn)]
    accepted = 0
    for label, make in problems:
        try:
            res = fmha.check_support(make(), sm=90)
            ok, why = bool(res), getattr(res, "message", "")
        except Exception as exc:
            ok, why = False, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        accepted += ok
        if not ok:
            print(f"api: {label}: NOT accepted for sm90: {why}")
    print(f"api: {accepted}/{len(problems)} problem descriptors accepted by fmha_check_support(sm=90)")
    return accepted, len(problems)


def self_test() -> int:
    """Checks of the pure-Python parts; needs neither torch nor a GPU."""
    failures = 0

    def check(cond: bool, what: str) -> None:
        nonlocal failures
        if not cond:
            failures += 1
            print(f"FAIL: {what}")

    # visible_pairs against brute force.
    for sq in range(1, 9):
        for sk in range(1, 12):
            for mask in (None, "top_left", "bottom_right"):
                off = 0 if mask == "top_left" else sk - sq
                brute = sum(1 for i in range(sq) for j in range(sk) if mask is None or j <= i + off)
                check(visible_pairs(sq, sk, mask) == brute, f"visible_pairs({sq},{sk},{mask}) = "
                      f"{visible_pairs(sq, sk, mask)} != {brute}")
    check(visible_pairs(4096, 4096, "top_left") == 4096 * 4097 // 2, "causal square")
    check(visible_pairs(1, 32768, "bottom_right") == 32768, "decode T=1 sees every key")
    check(visible_pairs(32, 4096, "bottom_right") == 32 * 4096 - 32 * 31 // 2, "decode T=32")
    check(attention_flops(2, 16, 128, 10) == 4.0 * 2 * 16 * 128 * 10, "flops")

    # Bytes and bandwidth: the anchors' cuDNN row (1,32,8,32768) at 60.9 us is 2.20 TB/s.
    b = kv_decode_bytes(1, 1, 32, 8, 32768, 128)
    check(b == 2 * (2 * 32768 * 8 * 128 + 2 * 32 * 128), "decode bytes")
    check(abs(tbps(b, 0.0609) - 2.20) < 0.01, f"anchor bandwidth {tbps(b, 0.0609)}")
    b = kv_decode_bytes(64, 1, 32, 32, 2048, 128)
    check(abs(tbps(b, 0.485) - 4.43) < 0.01, f"anchor bandwidth 64x2048 {tbps(b, 0.485)}")

    # Ragged lengths: exact total, bounds, deterministic, several sequences.
    lens = ragged_lengths(VARLEN_TOTAL, VARLEN_MIN, VARLEN_MAX, VARLEN_SEED)
    check(sum(lens) == VARLEN_TOTAL, f"ragged total {sum(lens)}")
    check(all(1 <= n <= VARLEN_MAX for n in lens), "ragged upper bound")
    check(all(VARLEN_MIN <= n for n in lens[:-1]), "ragged lower bound (all but the last)")
    check(lens == ragged_lengths(VARLEN_TOTAL, VARLEN_MIN, VARLEN_MAX, VARLEN_SEED), "ragged determinism")
    check(len(lens) >= 3, f"ragged: only {len(lens)} sequences")
    cu = cumulative(lens)
    check(cu[0] == 0 and cu[-1] == VARLEN_TOTAL and len(cu) == len(lens) + 1, "cu_seqlens")
    for seed in range(50):
        ls = ragged_lengths(1000 + seed, 10, 300, seed)
        check(sum(ls) == 1000 + seed and all(n > 0 for n in ls), f"ragged seed {seed}")
    mean = VARLEN_TOTAL / len(lens)
    print(f"varlen lengths (seed {VARLEN_SEED}): {lens}; {len(lens)} sequences, mean {mean:.0f}, "
          f"causal pairs {sum(visible_pairs(n, n, 'top_left') for n in lens)}")

    # Block tables: a permutation, right shape, deterministic.
    bt = shuffled_block_table(8, 512, 7)
    flat = [p for row in bt for p in row]
    check(len(bt) == 8 and all(len(r) == 512 for r in bt), "block table shape")
    check(sorted(flat) == list(range(8 * 512)), "block table is a permutation")
    check(flat != list(range(8 * 512)), "block table is shuffled")
    check(bt == shuffled_block_table(8, 512, 7), "block table determinism")

    # Bars.
    check(decode_bar(1, 2.6, 1.1) == "ok", "bar B=1")
    check(decode_bar(1, 2.4, 1.1).startswith("MISS"), "bar B=1 bw")
    check(decode_bar(8, 3.5, 1.2).startswith("MISS"), "bar batched bw")
    check(decode_bar(8, 3.7, 0.99).startswith("MISS"), "bar ratio")
    check(decode_bar(8, 3.7, None) == "ok(bw)", "bar without peer")
    check(ratio_bar(0.86, BAR_PAGED_RATIO) == "ok" and ratio_bar(0.84, BAR_PAGED_RATIO) != "ok", "paged bar")
    check(ratio_bar(None, 1.0) == "n/a", "bar n/a")

    # Grids and section selection.
    check(len(decode_rows(False)) == 5 and len(paged_rows(True)) == 3, "row grids")
    check(len(decode_t_rows(False)) == 10 and len(hd512_rows(False)) == 12, "row grids 2")
    check(len(decode_hd_rows(False)) == 15 and len(decode_hd_rows(True)) == 4
          and {r[4] for r in decode_hd_rows(False)} == set(DECODE_HEAD_DIMS), "decode-hd grid")
    check(len(varlen_rows(False)) == 4 and len(varlen_rows(True)) == 2, "varlen grid")
    check(parse_page_sizes("1,16,256") == (1, 16, 256), "parse_page_sizes")
    for bad in ("", "48", "0", "x", "512"):
        try:
            parse_page_sizes(bad)
            check(False, f"parse_page_sizes accepts {bad!r}")
        except SystemExit:
            pass
    check(parse_only("") == list(SECTIONS) and parse_only("varlen,decode") == ["decode", "varlen"], "parse_only")
    try:
        parse_only("nope")
        check(False, "parse_only accepts an unknown section")
    except SystemExit:
        pass
    for b_, hq, hkv, s in DECODE_ROWS:
        check(hq % hkv == 0, "GQA groups")
        for p in PAGE_SIZES:
            check(s % p == 0, "page sizes divide the decode lengths")

    # Table rendering.
    t = Table("t", [("a", 4), ("b", 6)])
    t.rows.append(["x", "1|2"])
    check("| x | 1/2 |" in t.markdown(), "markdown row")

    # The cuDNN refusal reason: the cause after torch's "not used because:" warning.
    caught = ["Memory Efficient attention has been runtime disabled. (Triggered internally at x.h:1.)",
              "cuDNN attention kernel not used because: (Triggered internally at y.cpp:2.)",
              "head_dim should be no more than 256 (Triggered internally at y.cpp:3.)"]
    check(_reason(RuntimeError("no kernel"), caught) == "head_dim should be no more than 256",
          "cuDNN refusal reason")
    check(_reason(RuntimeError("no kernel"), []) == "no kernel", "refusal reason from the exception")

    api_check()

    print("self-test: " + ("ok" if not failures else f"{failures} failure(s)"))
    return 1 if failures else 0


# ============================================================================
# Adapter: the only place the serving functions of the binding are called.
# ============================================================================

# Set from --num-splits and --kernel in main().
NUM_SPLITS = 0
KERNEL = "auto"


def kvcache_args(q: Any, k_cache: Any, v_cache: Any, cache_seqlens: Any, *,
                 block_table: Any = None) -> Tuple[tuple, Dict[str, Any]]:
    """q [B, T, Hq, D]; caches [B, S, Hkv, D] or paged [pages, page_size, Hkv, D];
    causal=True is bottom-right (the decode convention; T=1 sees every key)."""
    kw: Dict[str, Any] = {"block_table": block_table, "causal": True, "num_splits": NUM_SPLITS}
    if KERNEL != "auto":
        kw["kernel"] = KERNEL
    return (q, k_cache, v_cache, cache_seqlens), kw


def varlen_args(q: Any, k: Any, v: Any, cu_q: Any, cu_k: Any, max_q: int, max_k: int, *,
                causal: bool) -> Tuple[tuple, Dict[str, Any]]:
    """q [total_q, Hq, D], k/v [total_k, Hkv, D]. causal=True with cu_k the same tensor
    as cu_q: every sequence has as many keys as queries, where both alignments agree."""
    kw: Dict[str, Any] = {"causal": causal}
    if KERNEL != "auto":
        kw["kernel"] = KERNEL
    return (q, k, v, cu_q, cu_k, max_q, max_k), kw


def dense_args(q: Any, k: Any, v: Any, *, causal: bool) -> Tuple[tuple, Dict[str, Any]]:
    """[B, S, H, D]; causal top-left (seqlen_q == seqlen_k here)."""
    return (q, k, v), {"causal": "top_left" if causal else None, "kernel": KERNEL}


def fmha_kvcache(*args: Any, **kwargs: Any) -> Any:
    a, kw = kvcache_args(*args, **kwargs)
    return fmha.attention_with_kvcache(*a, **kw)


def fmha_varlen(*args: Any, **kwargs: Any) -> Any:
    a, kw = varlen_args(*args, **kwargs)
    return fmha.attention_varlen(*a, **kw)


def fmha_dense(*args: Any, **kwargs: Any) -> Any:
    a, kw = dense_args(*args, **kwargs)
    return fmha.attention(*a, **kw)


def call_and_get_kernel(fn: Callable[[], Any]) -> Tuple[Any, str]:
    """Calls fn once and names the kernel of the plan it used (fmha.last_plan()),
    with '(+N plan)' when the call used more than one plan (counted by the plan
    cache's statistics); '?' when it used none or the binding cannot say."""
    try:
        before = fmha.plan_cache_info()
    except Exception:
        before = None
    out = fn()
    try:
        after = fmha.plan_cache_info()
        used = (after.hits + after.misses) - (before.hits + before.misses)
        plan = fmha.last_plan()
        if used >= 1 and plan is not None:
            info = plan.info
            label = info.kernel_name or "?"
            splits = getattr(info, "num_splits", None)
            if splits is not None:
                label += f" splits={splits}"
            if used > 1:
                label += f" (+{used - 1} plan)"
            return out, label
    except Exception:
        pass
    return out, "?"


# ============================================================================
# GPU infrastructure
# ============================================================================

class Timer:
    """Median of CUDA-event timings; each run after an L2 flush and a GPU spin that
    covers the host cost of the call (so Python overhead is not measured)."""

    def __init__(self, warmup: int, reps: int, flush: str) -> None:
        self.warmup, self.reps, self.flush_mode = warmup, reps, flush
        self.flush_buf = (torch.zeros(64 << 20, dtype=torch.float32, device=DEVICE)
                          if flush != "off" else None)
        self.can_sleep = hasattr(torch.cuda, "_sleep")
        self.cycles_per_us = self._calibrate() if self.can_sleep else 0.0

    @staticmethod
    def _calibrate() -> float:
        torch.cuda._sleep(100_000)
        torch.cuda.synchronize()
        best = 0.0
        for _ in range(3):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.cuda._sleep(4_000_000)
            e.record()
            torch.cuda.synchronize()
            best = max(best, 4_000_000 / (s.elapsed_time(e) * 1e3))
        return best

    def flush(self) -> None:
        """Evicts L2: a write leaves it dirty, a read (a sum) leaves it clean."""
        if self.flush_buf is None:
            return
        if self.flush_mode == "read":
            self.flush_buf.sum()
        else:
            self.flush_buf.zero_()

    def _spin_cycles(self, fn: Callable[[], Any]) -> int:
        """Warms `fn` up and returns a GPU spin that covers its host cost."""
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(3):
            fn()
        host_us = (time.perf_counter() - t0) / 3 * 1e6
        torch.cuda.synchronize()
        return int(self.cycles_per_us * min(max(2 * host_us + 50, 100), 20000))

    def _timed_run(self, fn: Callable[[], Any], spin: int) -> Tuple[Any, Any]:
        self.flush()
        if self.can_sleep:
            torch.cuda._sleep(spin)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        return start, end

    def time_ms(self, fn: Callable[[], Any]) -> float:
        spin = self._spin_cycles(fn)
        events = [self._timed_run(fn, spin) for _ in range(self.reps)]
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in events)

    def time_pair_ms(self, fa: Callable[[], Any], fb: Callable[[], Any]) -> Tuple[float, float]:
        """Medians of `fa` and `fb` timed in alternation (a b, b a, a b, ...), each
        run after its own flush and spin: a drift of the clocks over the
        measurement falls on both alike, whichever is timed first."""
        spin = max(self._spin_cycles(fa), self._spin_cycles(fb))
        ea: List[Tuple[Any, Any]] = []
        eb: List[Tuple[Any, Any]] = []
        for i in range(self.reps):
            for fn, events in ((fa, ea), (fb, eb)) if i % 2 == 0 else ((fb, eb), (fa, ea)):
                events.append(self._timed_run(fn, spin))
        torch.cuda.synchronize()
        return (statistics.median(s.elapsed_time(e) for s, e in ea),
                statistics.median(s.elapsed_time(e) for s, e in eb))


    def host_us(self, fn: Callable[[], Any], calls: int = 50, rounds: int = 15) -> float:
        """CPU microseconds per call (median of `rounds` runs of `calls` back-to-back calls),
        with the GPU spinning meanwhile so that each call only enqueues its work."""
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        one_us = (time.perf_counter() - t0) * 1e6
        torch.cuda.synchronize()
        spin = int(self.cycles_per_us * min(2 * one_us * calls + 1000, 200_000))
        samples = []
        for _ in range(rounds):
            if self.can_sleep:
                torch.cuda._sleep(spin)
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            samples.append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize()
        return statistics.median(samples)


def reference(q: Any, k: Any, v: Any, causal: bool) -> Any:
    """float32 attention; q [B, T, Hq, D], k/v [B, S, Hkv, D] (any strides); causal is
    bottom-right. Returns float32 [B, T, Hq, D]. One sequence at a time."""
    B, T, Hq, D = q.shape
    S, Hkv = k.shape[1], k.shape[2]
    g = Hq // Hkv
    mask = None
    if causal and T > 1:
        i = torch.arange(T, device=q.device)[:, None]
        j = torch.arange(S, device=q.device)[None, :]
        mask = j <= i + (S - T)
    outs = []
    for b in range(B):
        qb = q[b].float().reshape(T, Hkv, g, D).permute(1, 2, 0, 3)  # Hkv, g, T, D
        kb = k[b].float().transpose(0, 1)  # Hkv, S, D
        vb = v[b].float().transpose(0, 1)
        s = torch.matmul(qb, kb[:, None].transpose(-1, -2)) * (D ** -0.5)  # Hkv, g, T, S
        if mask is not None:
            s.masked_fill_(~mask, float("-inf"))
        o = torch.matmul(torch.softmax(s, dim=-1), vb[:, None])  # Hkv, g, T, D
        outs.append(o.permute(2, 0, 1, 3).reshape(T, Hq, D))
        del s
    return torch.stack(outs)


def rel_err(out: Any, ref: Any) -> float:
    return ((out.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item()


def err_str(e: Optional[float]) -> str:
    if e is None:
        return "n/a"
    return f"{e:.4f}" + (" MISMATCH" if not e <= ERR_LIMIT else "")


def _reason(exc: BaseException, caught: Sequence[Any]) -> str:
    """Why SDPA's cuDNN backend refused: torch warns "cuDNN attention kernel not used
    because:" and gives the cause in the next warning (e.g. "head_dim should be no more
    than 256"); other backends' "runtime disabled" notes say nothing."""
    texts = [re.sub(r"\s*\(Triggered internally at [^)]*\)\.?", "", str(getattr(w, "message", w))).strip()
             for w in caught]
    start = next((i for i, t in enumerate(texts) if "cudnn" in t.lower() and "because" in t), -1)
    for t in texts[start + 1:] if start >= 0 else texts:
        if t and "because" not in t and "runtime disabled" not in t:
            return t.splitlines()[0][:70]
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:70]


def cudnn_peer(qt: Any, kt: Any, vt: Any, attn_mask: Any = None) -> Tuple[Optional[Callable[[], Any]], str]:
    """A zero-argument call of torch SDPA restricted to the cuDNN backend, on q [B, Hq, T, D]
    and k/v [B, Hkv, S, D]. Tries enable_gqa=True first, then K/V repeated per query head
    (made here, outside any timing). Returns (call, note) or (None, why not)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    hq, hkv = qt.shape[1], kt.shape[1]
    attempts: List[Tuple[str, Callable[[], Tuple[Any, Any, bool]]]] = []
    if hq == hkv:
        attempts.append(("", lambda: (kt, vt, False)))
    else:
        attempts.append(("enable_gqa", lambda: (kt, vt, True)))
        g = hq // hkv

        def repeated() -> Tuple[Any, Any, bool]:
            if 2 * kt.numel() * kt.element_size() * g > REPEAT_LIMIT_BYTES:
                raise RuntimeError(f"K/V repeated {g}x would exceed {REPEAT_LIMIT_BYTES >> 30} GiB")
            return kt.repeat_interleave(g, dim=1), vt.repeat_interleave(g, dim=1), False
        attempts.append((f"K/V repeated {g}x (untimed; reads {g}x the bytes)", repeated))
    why = "?"
    for note, make in attempts:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                k_, v_, gqa = make()

                def call(k_=k_, v_=v_, gqa=gqa) -> Any:
                    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                        return F.scaled_dot_product_attention(qt, k_, v_, attn_mask=attn_mask, enable_gqa=gqa)
                call()
                torch.cuda.synchronize()
                return call, note
            except Exception as exc:
                if why == "?":  # the first refusal says most (e.g. head_dim 512)
                    why = _reason(exc, caught)
    return None, why


# ============================================================================
# Sections
# ============================================================================

@dataclass
class Ctx:
    args: argparse.Namespace
    timer: Timer
    mismatches: int = 0
    errors: int = 0
    bar_ok: int = 0
    bar_total: int = 0

    def err(self, e: Optional[float]) -> str:
        if e is not None and not e <= ERR_LIMIT:
            self.mismatches += 1
        return err_str(e)

    def bar(self, mark: str) -> str:
        if mark != "n/a":
            self.bar_total += 1
            self.bar_ok += mark.startswith("ok")
        return mark


def randn(*shape: int) -> Any:
    return torch.randn(shape, dtype=torch.bfloat16, device=DEVICE)


def decode_label(b: int, hq: int, hkv: int, s: int, d: int = HEAD_DIM) -> str:
    return f"B{b} H{hq}/{hkv} S{s}" + (f" d{d}" if d != HEAD_DIM else "")


def make_decode_inputs(ctx: Ctx, b: int, t: int, hq: int, hkv: int, s: int, d: int) -> Dict[str, Any]:
    """q [B, T, Hq, D]; libfmha's cache as [B, S, Hkv, D] tensors, SDPA's as [B, Hkv, S, D],
    same values. Memory layout (--kv-layout): mixed: libfmha's contiguous [B, S, Hkv, D],
    SDPA's a contiguous [B, Hkv, S, D] copy; bshd / bhsd: one buffer in that layout, both
    reading it (one of them through transposed views)."""
    torch.manual_seed(b * 1_000_003 + t * 10_007 + hq * 101 + hkv * 7 + s + d)
    layout = ctx.args.kv_layout
    if layout == "bshd":
        k_cache, v_cache = randn(b, s, hkv, d), randn(b, s, hkv, d)
        k_sdpa, v_sdpa = k_cache.transpose(1, 2), v_cache.transpose(1, 2)
    else:
        k_sdpa, v_sdpa = randn(b, hkv, s, d), randn(b, hkv, s, d)
        if layout == "bhsd":
            k_cache, v_cache = k_sdpa.transpose(1, 2), v_sdpa.transpose(1, 2)
        else:
            k_cache, v_cache = k_sdpa.transpose(1, 2).contiguous(), v_sdpa.transpose(1, 2).contiguous()
    q = randn(b, t, hq, d)
    return {"q": q, "k": k_cache, "v": v_cache, "k_sdpa": k_sdpa, "v_sdpa": v_sdpa,
            "q_sdpa": q.transpose(1, 2).contiguous(),
            "seqlens": torch.full((b,), s, dtype=torch.int32, device=DEVICE)}


def decode_vs_cudnn(ctx: Ctx, b: int, t: int, hq: int, hkv: int, s: int, d: int) -> Dict[str, Any]:
    """Times libfmha (contiguous cache) and cuDNN SDPA on one decode problem."""
    x = make_decode_inputs(ctx, b, t, hq, hkv, s, d)
    causal = t > 1

    def ours() -> Any:
        return fmha_kvcache(x["q"], x["k"], x["v"], x["seqlens"])

    out, kernel = call_and_get_kernel(ours)
    torch.cuda.synchronize()
    ref = reference(x["q"], x["k"], x["v"], causal)
    r: Dict[str, Any] = {"kernel": kernel, "err": rel_err(out, ref)}
    del out
    mask = None
    if causal:
        i = torch.arange(t, device=DEVICE)[:, None]
        j = torch.arange(s, device=DEVICE)[None, :]
        mask = torch.zeros((t, s), dtype=torch.bfloat16, device=DEVICE).masked_fill_(
            ~(j <= i + (s - t)), float("-inf"))
    peer, note = cudnn_peer(x["q_sdpa"], x["k_sdpa"], x["v_sdpa"], mask)
    if peer is not None:
        # The peer's output is checked too: a wrong mask would make its timing meaningless.
        peer_err = rel_err(peer().transpose(1, 2), ref)
        if not peer_err <= ERR_LIMIT:
            note = (note + "; " if note else "") + f"cuDNN err {peer_err:.4f}"
    r["note"] = note
    if peer is None:
        r["ours_ms"], r["peer_ms"] = ctx.timer.time_ms(ours), None
    elif ctx.args.sequential:
        r["ours_ms"], r["peer_ms"] = ctx.timer.time_ms(ours), ctx.timer.time_ms(peer)
    else:
        r["ours_ms"], r["peer_ms"] = ctx.timer.time_pair_ms(ours, peer)
    return r


def section_decode(ctx: Ctx) -> Table:
    tab = Table(f"decode: bf16, T=1, D={HEAD_DIM}, contiguous KV cache; libfmha vs cuDNN SDPA "
                f"(bar: >= {BAR_DECODE_TBPS} TB/s batched, >= {BAR_DECODE_TBPS_B1} at B=1, ratio >= {BAR_DECODE_RATIO})",
                [("problem", 22), ("fmha us", 8), ("fmha TB/s", 9), ("cuDNN us", 8), ("cuDNN TB/s", 10),
                 ("anchor", 6), ("fmha/cuDNN", 10), ("err", 7), ("bar", 8), ("kernel", 30), ("cuDNN note", 10)])
    tab.header()
    for b, hq, hkv, s in decode_rows(ctx.args.quick):
        label = decode_label(b, hq, hkv, s)
        try:
            r = decode_vs_cudnn(ctx, b, 1, hq, hkv, s, HEAD_DIM)
            nbytes = kv_decode_bytes(b, 1, hq, hkv, s, HEAD_DIM)
            bw, pbw = tbps(nbytes, r["ours_ms"]), tbps(nbytes, r["peer_ms"])
            rat = ratio(bw, pbw)
            tab.add([label, fmt(r["ours_ms"] * 1e3, ".1f"), fmt(bw), fmt(r["peer_ms"] and r["peer_ms"] * 1e3, ".1f"),
                     fmt(pbw), fmt(DECODE_ANCHOR_CUDNN.get((b, hq, hkv, s))), fmt(rat, ".3f"), ctx.err(r["err"]),
                     ctx.bar(decode_bar(b, bw, rat)), r["kernel"], r["note"] or "-"])
        except Exception as exc:
            ctx.errors += 1
            tab.error(label, exc)
        torch.cuda.empty_cache()
    tab.note("TB/s = bytes of K, V, Q and O / time; anchor = cuDNN 9.19 on this H200 in shared/notes/anchors.md")
    return tab


# Columns of the T=1 decode tables with no bar (decode-hd, hd512).
DECODE_PEER_COLUMNS = [("problem", 22), ("fmha us", 8), ("fmha TB/s", 9), ("cuDNN us", 8), ("cuDNN TB/s", 10),
                       ("fmha/cuDNN", 10), ("err", 7), ("kernel", 30), ("cuDNN note", 10)]


def add_decode_peer_row(ctx: Ctx, tab: Table, b: int, hq: int, hkv: int, s: int, d: int) -> None:
    """One T=1 decode problem, libfmha against cuDNN, as a DECODE_PEER_COLUMNS row."""
    label = decode_label(b, hq, hkv, s, d)
    try:
        r = decode_vs_cudnn(ctx, b, 1, hq, hkv, s, d)
        nbytes = kv_decode_bytes(b, 1, hq, hkv, s, d)
        bw, pbw = tbps(nbytes, r["ours_ms"]), tbps(nbytes, r["peer_ms"])
        tab.add([label, fmt(r["ours_ms"] * 1e3, ".1f"), fmt(bw), fmt(r["peer_ms"] and r["peer_ms"] * 1e3, ".1f"),
                 fmt(pbw), fmt(ratio(bw, pbw), ".3f"), ctx.err(r["err"]), r["kernel"], r["note"] or "-"])
    except Exception as exc:
        ctx.errors += 1
        tab.error(label, exc)
    torch.cuda.empty_cache()


def section_decode_hd(ctx: Ctx) -> Table:
    tab = Table("decode-hd: bf16, T=1, the decode rows at other head dims, contiguous KV cache; "
                "libfmha vs cuDNN SDPA (reported, no bar)", DECODE_PEER_COLUMNS)
    tab.header()
    for b, hq, hkv, s, d in decode_hd_rows(ctx.args.quick):
        add_decode_peer_row(ctx, tab, b, hq, hkv, s, d)
    tab.note("TB/s = bytes of K, V, Q and O / time")
    return tab


def to_pages(k: Any, v: Any, page: int, seed: int) -> Tuple[Any, Any, Any]:
    """Caches [B, S, Hkv, D] (S a multiple of page) copied into shuffled pages: returns
    (k_pages, v_pages, block_table); logical page i of sequence b (keys i*page ..
    i*page+page-1) lives in page block_table[b][i]."""
    b, s, hkv, d = k.shape
    pps = s // page
    table = torch.tensor(shuffled_block_table(b, pps, seed=seed), dtype=torch.int32, device=DEVICE)
    idx = table.flatten().long()
    k_pages = torch.empty((b * pps, page, hkv, d), dtype=k.dtype, device=DEVICE)
    v_pages = torch.empty_like(k_pages)
    k_pages[idx] = k.reshape(b * pps, page, hkv, d)
    v_pages[idx] = v.reshape(b * pps, page, hkv, d)
    return k_pages, v_pages, table


def paged_row(ctx: Ctx, tab: Table, b: int, hq: int, hkv: int, s: int, t: int = 1) -> None:
    """One decode shape of t query tokens (causal bottom-right): libfmha contiguous, then
    paged with each page size, same values."""
    label = decode_label(b, hq, hkv, s)
    nbytes = kv_decode_bytes(b, t, hq, hkv, s, HEAD_DIM)
    torch.manual_seed(b * 7919 + s + t)
    q = randn(b, t, hq, HEAD_DIM)
    k, v = randn(b, s, hkv, HEAD_DIM), randn(b, s, hkv, HEAD_DIM)
    seqlens = torch.full((b,), s, dtype=torch.int32, device=DEVICE)

    def contig() -> Any:
        return fmha_kvcache(q, k, v, seqlens)
    out_c, kernel_c = call_and_get_kernel(contig)
    ref = reference(q, k, v, t > 1)
    err_c = rel_err(out_c, ref)
    contig_ms = ctx.timer.time_ms(contig)
    for page in PAGE_SIZES:
        try:
            k_pages, v_pages, table = to_pages(k, v, page, seed=b * 31 + s + page)

            def paged(k_pages: Any = k_pages, v_pages: Any = v_pages, table: Any = table) -> Any:
                return fmha_kvcache(q, k_pages, v_pages, seqlens, block_table=table)
            out_p, kernel = call_and_get_kernel(paged)
            diff = rel_err(out_p, out_c.float())
            err = max(err_c, rel_err(out_p, ref))
            out_p = None
            paged_ms = ctx.timer.time_ms(paged)
            paged = None  # type: ignore[assignment]  # drop the pages before the next size
            k_pages = v_pages = None
            bw_c, bw_p = tbps(nbytes, contig_ms), tbps(nbytes, paged_ms)
            rat = ratio(bw_p, bw_c)
            row = [label, str(page), fmt(contig_ms * 1e3, ".1f"), fmt(bw_c), fmt(paged_ms * 1e3, ".1f"),
                   fmt(bw_p), fmt(rat, ".3f"), ctx.err(err), f"{diff:.4f}"]
            # The bar is on T=1; multi-token rows report both kernels instead.
            row += [ctx.bar(ratio_bar(rat, BAR_PAGED_RATIO)), kernel] if t == 1 else [kernel, kernel_c]
            tab.add(row)
        except Exception as exc:
            ctx.errors += 1
            tab.error(f"{label} page {page}", exc)
        torch.cuda.empty_cache()


def section_paged(ctx: Ctx) -> Table:
    tab = Table(f"paged: bf16, T=1, D={HEAD_DIM}, shuffled pages; libfmha paged vs libfmha contiguous "
                f"(bar: paged/contiguous >= {BAR_PAGED_RATIO})",
                [("problem", 22), ("page", 4), ("contig us", 9), ("contig TB/s", 11), ("paged us", 8),
                 ("paged TB/s", 10), ("paged/contig", 12), ("err", 7), ("vs contig", 9), ("bar", 8), ("kernel", 30)])
    tab.header()
    for b, hq, hkv, s in paged_rows(ctx.args.quick):
        try:
            paged_row(ctx, tab, b, hq, hkv, s)
        except Exception as exc:
            ctx.errors += 1
            tab.error(decode_label(b, hq, hkv, s), exc)
        torch.cuda.empty_cache()
    tab.note("err: vs float32 reference (worst of paged and contiguous); vs contig: paged output vs contiguous "
             "output; the contiguous figures repeat on each page size of a row (one measurement)")
    return tab


def section_paged_t(ctx: Ctx) -> Table:
    tab = Table(f"paged-t: bf16, T={PAGED_T} query tokens, causal bottom-right, D={HEAD_DIM}, shuffled pages; "
                "libfmha paged vs libfmha contiguous (reported, no bar)",
                [("problem", 22), ("page", 4), ("contig us", 9), ("contig TB/s", 11), ("paged us", 8),
                 ("paged TB/s", 10), ("paged/contig", 12), ("err", 7), ("vs contig", 9), ("kernel paged", 30),
                 ("kernel contig", 30)])
    tab.header()
    for b, hq, hkv, s in paged_rows(ctx.args.quick):
        try:
            paged_row(ctx, tab, b, hq, hkv, s, PAGED_T)
        except Exception as exc:
            ctx.errors += 1
            tab.error(f"{decode_label(b, hq, hkv, s)} T{PAGED_T}", exc)
        torch.cuda.empty_cache()
    tab.note("TB/s = bytes of K, V, Q and O / time; err: vs float32 reference (worst of paged and contiguous); "
             "vs contig: paged output vs contiguous output")
    return tab


def section_decode_t(ctx: Ctx) -> Table:
    tab = Table(f"decode-t: bf16, T query tokens, causal bottom-right, D={HEAD_DIM}, contiguous KV cache; "
                "libfmha vs cuDNN SDPA with the same mask as a dense additive bias",
                [("problem", 22), ("T", 3), ("fmha us", 8), ("fmha TB/s", 9), ("fmha TFLOP/s", 12),
                 ("cuDNN us", 8), ("cuDNN TB/s", 10), ("cuDNN TFLOP/s", 13), ("fmha/cuDNN", 10), ("err", 7),
                 ("kernel", 30), ("cuDNN note", 10)])
    tab.header()
    for b, hq, hkv, s, t in decode_t_rows(ctx.args.quick):
        label = decode_label(b, hq, hkv, s)
        try:
            r = decode_vs_cudnn(ctx, b, t, hq, hkv, s, HEAD_DIM)
            nbytes = kv_decode_bytes(b, t, hq, hkv, s, HEAD_DIM)
            flops = attention_flops(b, hq, HEAD_DIM, visible_pairs(t, s, "bottom_right"))
            tab.add([label, str(t), fmt(r["ours_ms"] * 1e3, ".1f"), fmt(tbps(nbytes, r["ours_ms"])),
                     fmt(tflops(flops, r["ours_ms"]), ".1f"), fmt(r["peer_ms"] and r["peer_ms"] * 1e3, ".1f"),
                     fmt(tbps(nbytes, r["peer_ms"])), fmt(tflops(flops, r["peer_ms"]), ".1f"),
                     fmt(ratio(r["peer_ms"], r["ours_ms"]), ".3f"), ctx.err(r["err"]), r["kernel"],
                     r["note"] or "-"])
        except Exception as exc:
            ctx.errors += 1
            tab.error(f"{label} T{t}", exc)
        torch.cuda.empty_cache()
    tab.note("torch has no bottom-right causal mask for cuDNN (causal_lower_right materializes one under the cuDNN "
             "backend), so cuDNN gets the [T, S] mask as a bf16 additive bias, built outside the timing; its reads "
             "are not counted in TB/s")
    return tab


def section_hd512(ctx: Ctx) -> Table:
    d = 512
    tab = Table(f"hd512: MQA decode, bf16, head_dim {d}, Hkv=1, T=1, contiguous KV cache; libfmha (cuDNN where it runs)",
                DECODE_PEER_COLUMNS)
    tab.header()
    for b, hq, s in hd512_rows(ctx.args.quick):
        add_decode_peer_row(ctx, tab, b, hq, 1, s, d)
    tab.note("K and V of one KV head: rows with B*S*512*2*2 bytes under the L2 size (B=1, S=4096: 8 MiB) are "
             f"timed after an L2 flush ({ctx.timer.flush_mode})")
    return tab


def section_varlen(ctx: Ctx) -> Table:
    lengths = ragged_lengths(VARLEN_TOTAL, VARLEN_MIN, VARLEN_MAX, VARLEN_SEED)
    n = len(lengths)
    dense_s = round(VARLEN_TOTAL / n)
    tab = Table(f"varlen: bf16 prefill, D={HEAD_DIM}, {VARLEN_TOTAL} tokens in {n} ragged sequences vs dense "
                f"{n} x {dense_s}; TFLOP/s (bar: varlen/dense >= {BAR_VARLEN_RATIO})",
                [("problem", 22), ("varlen ms", 9), ("varlen TFLOP/s", 14), ("dense ms", 8), ("dense TFLOP/s", 13),
                 ("varlen/dense", 12), ("err", 7), ("bar", 8), ("kernel varlen", 30), ("kernel dense", 30)])
    tab.header()
    tab.note(f"lengths (random.Random({VARLEN_SEED}), uniform in [{VARLEN_MIN}, {VARLEN_MAX}], last cut to fit): "
             f"{lengths}")
    cu_list = cumulative(lengths)
    for hq, hkv, causal in varlen_rows(ctx.args.quick):
        label = f"H{hq}/{hkv} {'causal' if causal else 'full'}"
        mask = "top_left" if causal else None
        try:
            torch.manual_seed(hq * 131 + hkv * 17 + causal)
            q, k, v = randn(VARLEN_TOTAL, hq, HEAD_DIM), randn(VARLEN_TOTAL, hkv, HEAD_DIM), randn(VARLEN_TOTAL, hkv, HEAD_DIM)
            cu = torch.tensor(cu_list, dtype=torch.int32, device=DEVICE)
            max_len = max(lengths)

            def ours() -> Any:
                return fmha_varlen(q, k, v, cu, cu, max_len, max_len, causal=causal)
            out, kernel_v = call_and_get_kernel(ours)
            torch.cuda.synchronize()
            err = 0.0
            for a, e in zip(cu_list[:-1], cu_list[1:]):
                ref = reference(q[None, a:e], k[None, a:e], v[None, a:e], causal)
                err = max(err, rel_err(out[None, a:e], ref))
                del ref
            del out
            varlen_ms = ctx.timer.time_ms(ours)
            flops_v = sum(attention_flops(1, hq, HEAD_DIM, visible_pairs(L, L, mask)) for L in lengths)

            qd, kd, vd = randn(n, dense_s, hq, HEAD_DIM), randn(n, dense_s, hkv, HEAD_DIM), randn(n, dense_s, hkv, HEAD_DIM)

            def dense() -> Any:
                return fmha_dense(qd, kd, vd, causal=causal)
            _, kernel_d = call_and_get_kernel(dense)
            dense_ms = ctx.timer.time_ms(dense)
            flops_d = attention_flops(n, hq, HEAD_DIM, visible_pairs(dense_s, dense_s, mask))
            tv, td = tflops(flops_v, varlen_ms), tflops(flops_d, dense_ms)
            rat = ratio(tv, td)
            tab.add([label, fmt(varlen_ms, ".3f"), fmt(tv, ".1f"), fmt(dense_ms, ".3f"), fmt(td, ".1f"),
                     fmt(rat, ".3f"), ctx.err(err), ctx.bar(ratio_bar(rat, BAR_VARLEN_RATIO)), kernel_v, kernel_d])
        except Exception as exc:
            ctx.errors += 1
            tab.error(label, exc)
        torch.cuda.empty_cache()
    tab.note("FLOPs: 4*D*H per visible (query, key) pair, counted per sequence; torch SDPA has no varlen path, "
             "so no peer here")
    return tab


def section_chunked(ctx: Ctx) -> Table:
    lengths = ragged_lengths(VARLEN_TOTAL, VARLEN_MIN, VARLEN_MAX, VARLEN_SEED)
    n, max_len = len(lengths), max(lengths)
    tab = Table(f"chunked: bf16 prefill of {VARLEN_TOTAL} tokens in {n} ragged prompts (varlen Q, the varlen "
                f"lengths) against a KV cache holding them, causal, D={HEAD_DIM}; paged (shuffled) vs contiguous "
                "cache, TFLOP/s (reported, no bar)",
                [("problem", 22), ("page", 4), ("contig ms", 9), ("contig TFLOP/s", 14), ("paged ms", 8),
                 ("paged TFLOP/s", 13), ("paged/contig", 12), ("err", 7), ("vs contig", 9), ("kernel paged", 30),
                 ("kernel contig", 30)])
    tab.header()
    cu_list = cumulative(lengths)
    kw: Dict[str, Any] = {"causal": True}
    if KERNEL != "auto":
        kw["kernel"] = KERNEL
    for hq, hkv, _ in varlen_rows(ctx.args.quick)[::2]:
        label = f"H{hq}/{hkv} causal"
        try:
            torch.manual_seed(hq * 977 + hkv)
            q = randn(VARLEN_TOTAL, hq, HEAD_DIM)
            k, v = randn(VARLEN_TOTAL, hkv, HEAD_DIM), randn(VARLEN_TOTAL, hkv, HEAD_DIM)
            cu = torch.tensor(cu_list, dtype=torch.int32, device=DEVICE)
            seqlens = torch.tensor(lengths, dtype=torch.int32, device=DEVICE)
            cap = (max_len + 255) // 256 * 256  # a whole number of pages of every size
            kc = torch.zeros((n, cap, hkv, HEAD_DIM), dtype=k.dtype, device=DEVICE)
            vc = torch.zeros_like(kc)
            for b, (a, e) in enumerate(zip(cu_list[:-1], cu_list[1:])):
                kc[b, :e - a], vc[b, :e - a] = k[a:e], v[a:e]

            def contig() -> Any:
                return fmha.attention_with_kvcache(q, kc, vc, seqlens, cu_seqlens_q=cu, max_seqlen_q=max_len, **kw)
            out_c, kernel_c = call_and_get_kernel(contig)
            torch.cuda.synchronize()
            err_c = 0.0
            for a, e in zip(cu_list[:-1], cu_list[1:]):
                ref = reference(q[None, a:e], k[None, a:e], v[None, a:e], True)
                err_c = max(err_c, rel_err(out_c[None, a:e], ref))
                del ref
            contig_ms = ctx.timer.time_ms(contig)
            flops = sum(attention_flops(1, hq, HEAD_DIM, visible_pairs(L, L, "top_left")) for L in lengths)
            for page in PAGE_SIZES:
                k_pages, v_pages, table = to_pages(kc, vc, page, seed=hq * 7 + page)

                def paged(k_pages: Any = k_pages, v_pages: Any = v_pages, table: Any = table) -> Any:
                    return fmha.attention_with_kvcache(q, k_pages, v_pages, seqlens, block_table=table,
                                                       cu_seqlens_q=cu, max_seqlen_q=max_len, **kw)
                out_p, kernel_p = call_and_get_kernel(paged)
                diff = rel_err(out_p, out_c.float())
                err = err_c + diff  # the paged output's distance to the reference is at most this
                out_p = None
                paged_ms = ctx.timer.time_ms(paged)
                paged = None  # type: ignore[assignment]
                k_pages = v_pages = None
                tc, tp = tflops(flops, contig_ms), tflops(flops, paged_ms)
                tab.add([label, str(page), fmt(contig_ms, ".3f"), fmt(tc, ".1f"), fmt(paged_ms, ".3f"),
                         fmt(tp, ".1f"), fmt(ratio(tp, tc), ".3f"), ctx.err(err), f"{diff:.4f}", kernel_p, kernel_c])
                torch.cuda.empty_cache()
        except Exception as exc:
            ctx.errors += 1
            tab.error(label, exc)
        torch.cuda.empty_cache()
    tab.note("FLOPs: 4*D*Hq per visible (query, key) pair, causal per prompt; err: contiguous output vs float32 "
             "reference plus paged vs contiguous (an upper bound of the paged error); the contiguous figures "
             "repeat on each page size (one measurement)")
    return tab


# (label, Hq, Hkv, window_left or -1, softcap or 0, sinks, D) of the features section: B=1,
# S=8192, causal (a window's right edge is the diagonal).
FEATURE_ROWS = [("window 1024", 32, 8, 1024, 0.0, False, 128), ("softcap 50", 32, 8, -1, 50.0, False, 128),
                ("window 128 + sinks", 64, 8, 128, 0.0, True, 128),
                ("window 4096 + softcap 30 + sinks", 32, 8, 4096, 30.0, True, 128),
                ("window 256", 32, 8, 256, 0.0, False, 128), ("window 512", 32, 8, 512, 0.0, False, 128),
                ("window 32", 32, 8, 32, 0.0, False, 128), ("window 64 + sinks", 64, 8, 64, 0.0, True, 128),
                ("window 128 + sinks D64", 64, 8, 128, 0.0, True, 64),
                ("window 512 + sinks D64", 64, 8, 512, 0.0, True, 64), ("window 2048 D64", 64, 8, 2048, 0.0, False, 64),
                ("window 4096 + softcap 50", 32, 8, 4096, 50.0, False, 128),
                ("window 1024 + softcap 30 + sinks D256", 16, 4, 1024, 30.0, True, 256),
                ("softcap 30 + sinks D256", 16, 4, -1, 30.0, True, 256),
                ("window 512 + sinks D512", 8, 1, 512, 0.0, True, 512),
                ("window 2048 + softcap 30 + sinks D512", 16, 16, 2048, 30.0, True, 512)]
FEATURE_S = 8192


def causal_window_pairs(s: int, left: int) -> int:
    """(query, key) pairs visible under a causal mask of s x s and a left window."""
    if left < 0:
        return s * (s + 1) // 2
    return sum(min(i + 1, left + 1) for i in range(s))


def feature_reference(q: Any, k: Any, v: Any, left: int, softcap: float, sinks: Any) -> Any:
    """float32 causal attention of q [1, S, Hq, D] with a left window, softcap and sinks
    (a per-head logit joining the denominator), one KV head at a time."""
    _, S, Hq, D = q.shape
    Hkv = k.shape[2]
    g = Hq // Hkv
    i = torch.arange(S, device=q.device)[:, None]
    j = torch.arange(S, device=q.device)[None, :]
    visible = j <= i
    if left >= 0:
        visible &= j >= i - left
    out = torch.empty((S, Hq, D), dtype=torch.float32, device=q.device)
    for h in range(Hkv):
        qh = q[0, :, h * g:(h + 1) * g].float().transpose(0, 1)  # g, S, D
        sc = torch.matmul(qh, k[0, :, h].float().T) * (D ** -0.5)  # g, S, S
        if softcap > 0:
            sc = softcap * torch.tanh(sc / softcap)
        sc.masked_fill_(~visible, float("-inf"))
        if sinks is not None:
            sink = sinks[h * g:(h + 1) * g].float()[:, None, None].expand(g, S, 1)
            p = torch.softmax(torch.cat([sc, sink], dim=-1), dim=-1)[..., :S]
        else:
            p = torch.softmax(sc, dim=-1)
        out[:, h * g:(h + 1) * g] = torch.matmul(p, v[0, :, h].float()).transpose(0, 1)
        del sc, p
    return out[None]


class FlexPeer:
    """torch's FlexAttention (Triton kernels from torch.compile), the peer for windows and
    softcap: SDPA's cuDNN and flash backends take neither. Sinks have no FlexAttention
    form, so rows with sinks show none. The window and the cap are tensors the mask and
    score functions read, so rows of one shape share a compiled kernel."""

    def __init__(self) -> None:
        self.fn: Any = None
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            self.create_block_mask = create_block_mask
            self.fn = torch.compile(flex_attention, dynamic=False)
        except Exception as exc:  # pragma: no cover - depends on the torch build
            print(f"# FlexAttention unavailable: {type(exc).__name__}: {exc}")
            return
        self.left = torch.zeros((), dtype=torch.int32, device=DEVICE)
        self.cap = torch.ones((), dtype=torch.float32, device=DEVICE)

        def visible(b: Any, h: Any, qi: Any, kj: Any) -> Any:
            return (kj <= qi) & (qi - kj <= self.left)

        def capped(score: Any, b: Any, h: Any, qi: Any, kj: Any) -> Any:
            return self.cap * torch.tanh(score / self.cap)
        self.visible, self.capped = visible, capped

    def runner(self, q: Any, k: Any, v: Any, left: int, softcap: float) -> Optional[Callable[[], Any]]:
        """A no-argument callable running FlexAttention on [1, S, H, D] tensors (valid until
        the next runner call), or None."""
        if self.fn is None:
            return None
        s = q.shape[1]
        self.left.fill_(left if left >= 0 else s)
        self.cap.fill_(softcap if softcap > 0 else 1.0)
        block_mask = self.create_block_mask(self.visible, None, None, s, s, device=DEVICE)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # [1, H, S, D] views
        gqa = q.shape[2] != k.shape[2]
        score_mod = self.capped if softcap > 0 else None
        return lambda: self.fn(qt, kt, vt, score_mod=score_mod, block_mask=block_mask, enable_gqa=gqa)


def section_features(ctx: Ctx) -> Table:
    tab = Table(f"features: bf16 causal prefill, B=1, S={FEATURE_S}, D=128 unless named, sliding window / softcap / "
                "sinks; libfmha AUTO, the Hopper and portable kernels forced, torch FlexAttention, and AUTO without the "
                "features (TFLOP/s)",
                [("problem", 34), ("fmha ms", 7), ("fmha TFLOP/s", 12), ("hopper TFLOP/s", 14),
                 ("portable TFLOP/s", 16), ("fmha/portable", 13), ("flex TFLOP/s", 12), ("fmha/flex", 9),
                 ("flex err", 8), ("plain TFLOP/s", 13), ("err", 7), ("kernel", 36)])
    tab.header()
    s = FEATURE_S
    rows = FEATURE_ROWS[::2] if ctx.args.quick else FEATURE_ROWS
    on_hopper = torch.cuda.get_device_capability() == (9, 0)
    flex = FlexPeer()
    for label, hq, hkv, left, softcap, with_sinks, d in rows:
        full = f"H{hq}/{hkv} {label}"
        try:
            torch.manual_seed(hq * 31 + max(left, 0) + int(softcap) + d)
            q, k, v = randn(1, s, hq, d), randn(1, s, hkv, d), randn(1, s, hkv, d)
            sinks = torch.randn(hq, dtype=torch.float32, device=DEVICE) * 2 if with_sinks else None
            kw: Dict[str, Any] = {"causal": "top_left", "window": (left, 0) if left >= 0 else None,
                                  "softcap": softcap or None, "sinks": sinks}

            def ours(kernel: str = "auto") -> Any:
                return fmha.attention(q, k, v, kernel=kernel, **kw)
            out, kernel = call_and_get_kernel(ours)
            reference = feature_reference(q, k, v, left, softcap, sinks)
            err = rel_err(out, reference)
            del out
            flex_ms = flex_err = None
            flex_run = None if with_sinks else flex.runner(q, k, v, left, softcap)
            if flex_run is not None:
                try:
                    flex_err = rel_err(flex_run().transpose(1, 2), reference)
                    flex_ms = ctx.timer.time_ms(flex_run)
                except Exception as exc:  # a peer failure is reported, not fatal
                    print(f"# FlexAttention failed on {full}: {type(exc).__name__}: {str(exc)[:200]}")
            del reference
            ours_ms = ctx.timer.time_ms(ours)
            hopper_ms = ctx.timer.time_ms(lambda: ours("hopper")) if on_hopper else None
            # The portable kernel stops at head_dim 256 (fmha.h): n/a beyond.
            port_ms = ctx.timer.time_ms(lambda: ours("portable")) if d <= 256 else None
            plain_ms = ctx.timer.time_ms(lambda: fmha.attention(q, k, v, causal="top_left"))
            flops = attention_flops(1, hq, d, causal_window_pairs(s, left))
            flops_plain = attention_flops(1, hq, d, causal_window_pairs(s, -1))
            tab.add([full, fmt(ours_ms, ".3f"), fmt(tflops(flops, ours_ms), ".1f"),
                     fmt(tflops(flops, hopper_ms), ".1f"), fmt(tflops(flops, port_ms), ".1f"),
                     fmt(ratio(port_ms, ours_ms), ".2f"), fmt(tflops(flops, flex_ms), ".1f"),
                     fmt(ratio(flex_ms, ours_ms), ".2f"), err_str(flex_err) if flex_err is not None else "n/a",
                     fmt(tflops(flops_plain, plain_ms), ".1f"), ctx.err(err), kernel])
        except Exception as exc:
            ctx.errors += 1
            tab.error(full, exc)
        torch.cuda.empty_cache()
    tab.note("FLOPs: 4*D*Hq per visible (query, key) pair (a window counts only the keys it sees); plain: the same "
             "tensors, causal, no window/softcap/sinks; fmha/portable: AUTO's speed-up over the portable kernel (the "
             "only one with these features before the Hopper kernel had them); hopper: forced (AUTO's choice "
             "unless it shows another kernel); flex: torch.compile(flex_attention) with a block mask for the window and a "
             "score_mod for softcap, n/a with sinks (no FlexAttention form); sinks: float32 randn * 2 per head; err (AUTO) "
             "and flex err vs a float32 reference with the same window, softcap and sinks")
    return tab


def section_host(ctx: Ctx) -> Table:
    tab = Table("host: CPU microseconds per call from Python, T=1 decode rows (bf16, D=128), GPU kept busy so that "
                "calls only enqueue; libfmha's binding vs torch SDPA's cuDNN backend (reported, no bar)",
                [("problem", 22), ("fmha us", 8), ("SDPA cuDNN us", 13), ("fmha/SDPA", 9), ("fmha paged16 us", 15),
                 ("kernel", 30)])
    tab.header()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    for b, hq, hkv, s in decode_rows(ctx.args.quick):
        label = decode_label(b, hq, hkv, s)
        try:
            x = make_decode_inputs(ctx, b, 1, hq, hkv, s, HEAD_DIM)

            # The arguments are built once, as for the peer: only the call is timed.
            attention = fmha.attention_with_kvcache
            args, kwargs = kvcache_args(x["q"], x["k"], x["v"], x["seqlens"])

            def ours(args=args, kwargs=kwargs) -> Any:
                return attention(*args, **kwargs)

            _, kernel = call_and_get_kernel(ours)
            ours_us = ctx.timer.host_us(ours)
            gqa = hq != hkv

            def peer(x=x, gqa=gqa) -> Any:
                return F.scaled_dot_product_attention(x["q_sdpa"], x["k_sdpa"], x["v_sdpa"], enable_gqa=gqa)

            # The backend is chosen once around the calls, so its context manager is not timed.
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                peer_us = ctx.timer.host_us(peer)
            pages = s // 16
            table = torch.arange(b * pages, dtype=torch.int32, device=DEVICE).reshape(b, pages)
            kp = x["k"].reshape(b * pages, 16, hkv, HEAD_DIM)
            vp = x["v"].reshape(b * pages, 16, hkv, HEAD_DIM)

            paged_args, paged_kwargs = kvcache_args(x["q"], kp, vp, x["seqlens"], block_table=table)

            def paged(args=paged_args, kwargs=paged_kwargs) -> Any:
                return attention(*args, **kwargs)

            paged_us = ctx.timer.host_us(paged)
            tab.add([label, fmt(ours_us, ".1f"), fmt(peer_us, ".1f"), fmt(ratio(peer_us, ours_us), ".2f"),
                     fmt(paged_us, ".1f"), kernel])
        except Exception as exc:
            ctx.errors += 1
            tab.error(label, exc)
        torch.cuda.empty_cache()
    tab.note("fmha/SDPA > 1: the binding costs the CPU less per call; both allocate their output per call; the paged "
             "column runs the same cache as pages of 16 in order; the C API alone: build/tests/fmha_bench_host")
    return tab


SECTION_FUNCS = {"decode": section_decode, "decode-hd": section_decode_hd, "paged": section_paged, "paged-t": section_paged_t,
                 "decode-t": section_decode_t, "hd512": section_hd512, "varlen": section_varlen,
                 "chunked": section_chunked, "features": section_features,
                 "host": section_host}


def git_head() -> str:
    # FMHA_COMMIT names the build's commit where the checkout's .git is not it
    # (a copied working tree).
    if os.environ.get("FMHA_COMMIT"):
        return os.environ["FMHA_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=5).stdout.strip() or "?"
    except Exception:
        return "?"


def main() -> int:
    global NUM_SPLITS, KERNEL, PAGE_SIZES
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help=f"comma-separated sections: {','.join(SECTIONS)}")
    ap.add_argument("--quick", action="store_true", help="a reduced set of rows")
    ap.add_argument("--reps", type=int, default=30, help="timed runs per measurement (median)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--num-splits", type=int, default=0, help="libfmha split-KV parts (0: automatic)")
    ap.add_argument("--kernel", default="auto", help="libfmha kernel family: auto, portable, hopper, decode")
    ap.add_argument("--flush", choices=["write", "read", "off"], default="write",
                    help="L2 flush before each timed run: write (dirty lines), read (clean), off")
    ap.add_argument("--no-flush", action="store_true", help="same as --flush off")
    ap.add_argument("--sequential", action="store_true",
                    help="decode rows: time all of libfmha's runs, then all of cuDNN's (default: alternate them)")
    ap.add_argument("--kv-layout", choices=["mixed", "bshd", "bhsd"], default="mixed",
                    help="decode KV memory: mixed (libfmha [B,S,H,D], SDPA a [B,H,S,D] copy) or one shared layout")
    ap.add_argument("--page-sizes", default=",".join(map(str, PAGE_SIZES)),
                    help="rows per page in the paged, paged-t and chunked sections (comma-separated, "
                         "each dividing 256); the bar is stated for 16 and 64")
    ap.add_argument("--markdown", help="append the tables as markdown to this file")
    ap.add_argument("--self-test", action="store_true", help="check the pure-Python parts (no GPU) and exit")
    args = ap.parse_args()
    NUM_SPLITS, KERNEL = args.num_splits, args.kernel
    PAGE_SIZES = parse_page_sizes(args.page_sizes)
    if args.self_test:
        return self_test()
    sections = parse_only(args.only)

    global torch, F, fmha
    import torch as _torch
    import torch.nn.functional as _F
    import fmha as _fmha
    torch, F, fmha = _torch, _F, _fmha
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to benchmark (try --self-test)")
        return 0

    started = time.perf_counter()
    if args.no_flush:
        args.flush = "off"
    timer = Timer(args.warmup, max(1, args.reps), flush=args.flush)
    ctx = Ctx(args, timer)
    dev = torch.cuda.get_device_name()
    head = (f"device: {dev}; torch {torch.__version__}; cuDNN {torch.backends.cudnn.version()}; "
            f"libfmha {fmha.version()}; commit {git_head()}")
    print(head)
    print(f"timing: {args.warmup} warm-ups, median of {args.reps}; L2 flush {args.flush}; decode KV layout {args.kv_layout}; "
          f"vs cuDNN {'sequential' if args.sequential else 'alternated'}; "
          f"spin {'%.0f cycles/us' % timer.cycles_per_us if timer.can_sleep else 'unavailable (host overhead is timed)'}; "
          f"num_splits={args.num_splits}; kernel={args.kernel}; pages {','.join(map(str, PAGE_SIZES))}; sections {','.join(sections)}{' (quick)' if args.quick else ''}")
    tables = []
    for name in sections:
        t0 = time.perf_counter()
        try:
            tables.append(SECTION_FUNCS[name](ctx))
        except Exception as exc:  # a section that cannot even start
            ctx.errors += 1
            print(f"section {name}: ERROR {type(exc).__name__}: {exc}", flush=True)
        print(f"  ({name}: {time.perf_counter() - t0:.1f} s)", flush=True)
        torch.cuda.empty_cache()

    summary = (f"bars met: {ctx.bar_ok}/{ctx.bar_total} rows; mismatches: {ctx.mismatches}; errors: {ctx.errors}; "
               f"total {time.perf_counter() - started:.0f} s")
    print("\n" + summary)
    if args.markdown:
        cmd = "python3 tests/bench/bench_serving.py " + " ".join(sys.argv[1:])
        with open(args.markdown, "a") as f:
            f.write(f"## Serving benchmark, {datetime.date.today().isoformat()}\n\n{head}\n\n"
                    f"Command: `{cmd}`; {args.warmup} warm-ups, median of {args.reps}, "
                    f"L2 flush {args.flush}, decode KV layout {args.kv_layout}.\n\n")
            for t in tables:
                f.write(t.markdown() + "\n")
            f.write(summary + "\n\n")
    return 1 if ctx.mismatches or ctx.errors else 0


if __name__ == "__main__":
    sys.exit(main())
