"""GPU tests of the serving API: attention_varlen, attention_with_kvcache
(contiguous and paged caches, decode with split-KV), merge, against a
float64 reference computed here one sequence at a time.

The bound is the one of test_gpu_features.py: |fmha - ref64| <= 2 x the
error of a same-precision twin (the float64 reference with P rounded to the
dtype, then rounded to the dtype), with a floor of 1e-5 * max|ref|. Rows
that see no key must give O = 0 exactly and LSE = -inf (or the head's sink).

Outputs are passed NaN-filled (``poisoned``) with NaN guard bands around
them: torch.empty memory is often zero, so a row a kernel never writes
would pass an O == 0 check; NaN cannot, and the guards catch writes
outside the output.

Inputs derive from $FMHA_TEST_SEED (seeds.py; the pytest header and summary
print it). Run on a GPU machine:
    FMHA_LIBRARY=$PWD/build/libfmha.so python3 -m pytest bindings/python/tests -m gpu -k serving
Skipped, with the reason shown, when torch or a CUDA device is missing.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import pytest
from gpu_support import CAI, DLPack, require_torch_cuda, softmax_times_v, visible_keys
from seeds import seed_for

torch = require_torch_cuda()

import fmha  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("lib")]

DEVICE = torch.device("cuda", torch.cuda.current_device())
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
CAUSAL = [None, "top_left", "bottom_right"]


# ---------------------------------------------------------------- reference
def ref_sequence(q, k, v, *, causal: Optional[str], scale: float, window: Optional[Tuple[int, int]] = None,
                 softcap: float = 0.0, sinks: Optional[torch.Tensor] = None, p_dtype=None):
    """Float64 attention of one sequence: q [sq, hq, d], k/v [sk, hk, d].

    Returns O [sq, hq, dv] and LSE [hq, sq]. Row i sees key j when
    j <= diag(i) (causal), diag(i) - left <= j <= diag(i) + right (window),
    with diag(i) = i (top_left) or i + sk - sq (otherwise). With p_dtype, P
    is rounded to it before P.V (the same-precision twin).
    """
    sq, hq, _ = q.shape
    sk, hk = k.shape[0], k.shape[1]
    qf = q.double().permute(1, 0, 2)
    kf = k.double().permute(1, 0, 2).repeat_interleave(hq // hk, 0)
    vf = v.double().permute(1, 0, 2).repeat_interleave(hq // hk, 0)
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale  # [hq, sq, sk]
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    s = s.masked_fill(~visible_keys(sq, sk, causal, window, q.device), float("-inf"))
    o, lse = softmax_times_v(s, vf, sinks, p_dtype)
    return o.permute(1, 0, 2), lse


def ref_packed(q, k, v, cu_q: List[int], cu_k: List[int], used_k: Optional[List[int]] = None, **kw):
    """Reference over a packed batch: O [total_q, hq, dv] (rows outside every
    sequence left 0) and LSE [hq, total_q] (-inf there)."""
    hq = q.shape[1]
    o = torch.zeros(q.shape[0], hq, v.shape[2], dtype=torch.float64, device=q.device)
    lse = torch.full((hq, q.shape[0]), float("-inf"), dtype=torch.float64, device=q.device)
    for b in range(len(cu_q) - 1):
        q0, q1 = cu_q[b], cu_q[b + 1]
        k0, k1 = cu_k[b], cu_k[b + 1]
        if used_k is not None:
            k1 = k0 + used_k[b]
        ob, lb = ref_sequence(q[q0:q1], k[k0:k1], v[k0:k1], **kw)
        o[q0:q1], lse[:, q0:q1] = ob, lb
    return o, lse


def check(out, lse, ref_o, ref_lse, twin_o, dtype, ratio_log=None, rows=None, what: str = "") -> None:
    """The 2x rule on O, exact zeros / -inf (or sink) on rows that see no
    key, and LSE to 1e-4 relative. ``rows`` (bool over the first dim of O,
    last dim of LSE) restricts the comparison to rows owned by a sequence."""
    if rows is not None:
        out, ref_o, twin_o = out[rows], ref_o[rows], twin_o[rows]
        if lse is not None:
            lse, ref_lse = lse[..., rows], ref_lse[..., rows]
    if out.numel() == 0:
        return
    assert not torch.isnan(out).any(), f"{what}: NaN in O (rows left unwritten?)"
    err = float((out.double() - ref_o).abs().max())
    twin_err = float((twin_o.to(dtype).double() - ref_o).abs().max())
    base = max(twin_err, 1e-5 * float(ref_o.abs().max()), 1e-6)
    if ratio_log is not None:
        ratio_log(err / base, err, twin_err)
    assert err <= 2 * base, f"{what}: O error {err:.3g} > 2 x same-precision {base:.3g}"
    if lse is None:
        return
    assert lse.dtype == torch.float32
    finite = torch.isfinite(ref_lse)
    assert torch.equal(finite, torch.isfinite(lse)), f"{what}: rows with LSE -inf differ"
    if not bool(finite.all()):
        assert bool(torch.isneginf(lse[~finite]).all()), f"{what}: rows that see no key must have LSE -inf"
        # O of those rows: exactly 0 (they are rows x heads; O is rows x heads x dim)
        empty = (~finite).transpose(-1, -2) if lse.dim() == 2 else (~finite).transpose(1, 2)
        assert bool((out[empty] == 0).all()), f"{what}: rows that see no key must give O = 0"
    if bool(finite.any()):
        lerr = float((lse.double() - ref_lse)[finite].abs().max())
        assert lerr <= 1e-4 * (1 + float(ref_lse[finite].abs().max())), f"{what}: LSE error {lerr:.3g}"


def check_reference(reference, args, kw, out, lse, dtype, ratio_log=None, rows=None, what: str = "") -> None:
    """:func:`check` against ``reference(*args, **kw)`` and its same-precision
    twin (the same with P rounded to ``dtype``)."""
    ref_o, ref_lse = reference(*args, **kw)
    twin_o, _ = reference(*args, p_dtype=dtype, **kw)
    check(out, lse, ref_o, ref_lse, twin_o, dtype, ratio_log, rows=rows, what=what)


def cumsum(lengths: Sequence[int]) -> List[int]:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return out


def i32(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32, device=DEVICE)


def randn(*shape, dtype, gen) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, device=DEVICE, dtype=torch.float32).to(dtype)


def gen_for(*key) -> torch.Generator:
    """A device generator seeded from $FMHA_TEST_SEED and ``key`` (see seeds.py)."""
    return torch.Generator(device=DEVICE).manual_seed(seed_for(*key))


GUARD = 64  # NaN elements before and after a poisoned output (keeps it 128-byte aligned)


def poisoned(shape, dtype=torch.float32) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(view, buffer)``: a contiguous NaN-filled tensor of ``shape`` to pass
    as ``out=`` / ``lse_out=``, inside a NaN buffer with GUARD spare
    elements on each side (see :func:`assert_guards`)."""
    n = math.prod(shape)
    buf = torch.full((n + 2 * GUARD,), float("nan"), dtype=dtype, device=DEVICE)
    return buf[GUARD: GUARD + n].view(shape), buf


def assert_guards(*bufs: torch.Tensor, what: str = "") -> None:
    """The guard bands of :func:`poisoned` buffers are still NaN (nothing
    written before or after the output)."""
    for buf in bufs:
        assert bool(torch.isnan(buf[:GUARD]).all()) and bool(torch.isnan(buf[-GUARD:]).all()), \
            f"{what}: wrote outside the output (guard band overwritten)"


# ---------------------------------------------------------------- attention_varlen
# (query lengths, key lengths); None: keys are the queries' (self-attention).
VARLEN = {
    "ragged": ([37, 0, 1, 128, 300, 5], [100, 7, 0, 128, 513, 5]),
    "self": ([64, 0, 1, 200, 17], None),
    "q_longer": ([90, 3, 64], [20, 3, 0]),
}


def varlen_inputs(qlens, klens, hq, hk, d, dtype, gen, pad_q: int = 3, pad_k: int = 5):
    """Packed q, k, v with `pad` unused rows at the end (cu_seqlens end below total)."""
    cu_q = cumsum(qlens)
    cu_k = cumsum(klens)
    q = randn(cu_q[-1] + pad_q, hq, d, dtype=dtype, gen=gen)
    k = randn(cu_k[-1] + pad_k, hk, d, dtype=dtype, gen=gen)
    v = randn(cu_k[-1] + pad_k, hk, d, dtype=dtype, gen=gen)
    return q, k, v, cu_q, cu_k


def owned_rows(cu: List[int], total: int) -> torch.Tensor:
    rows = torch.zeros(total, dtype=torch.bool, device=DEVICE)
    rows[: cu[-1]] = True
    return rows


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("gqa", [1, 4])
@pytest.mark.parametrize("causal", CAUSAL + [True], ids=lambda c: str(c))
@pytest.mark.parametrize("lengths", VARLEN)
def test_varlen_matches_reference(lengths, causal, gqa, d, dtype, ratio_log) -> None:
    qlens, klens = VARLEN[lengths]
    if causal is True and klens is not None:
        pytest.skip("causal=True is only accepted for self-attention (cu_seqlens_k is cu_seqlens_q)")
    self_attn = klens is None
    klens = qlens if self_attn else klens
    hk = 2
    hq = hk * gqa
    dt = DTYPES[dtype]
    gen = gen_for("varlen", lengths, str(causal), gqa, d, dtype)
    # Self-attention: K/V packed exactly like Q, so one cu_seqlens serves both.
    q, k, v, cu_q, cu_k = varlen_inputs(qlens, klens, hq, hk, d, dt, gen, pad_q=3, pad_k=3 if self_attn else 5)
    cu_q_t = i32(cu_q)
    cu_k_t = cu_q_t if self_attn else i32(cu_k)
    out = torch.full((q.shape[0], hq, d), float("nan"), dtype=dt, device=DEVICE)
    res = fmha.attention_varlen(q, k, v, cu_q_t, cu_k_t, max(qlens), max(klens), causal=causal,
                                return_lse=True, out=out)
    assert res[0] is out
    lse = res[1]
    torch.cuda.synchronize()
    assert lse.shape == (hq, q.shape[0]) and lse.dtype == torch.float32 and lse.is_contiguous()
    mode = "top_left" if causal is True else causal
    scale = 1 / math.sqrt(d)
    check_reference(ref_packed, (q, k, v, cu_q, cu_k), dict(causal=mode, scale=scale), out, lse, dt, ratio_log,
                    rows=owned_rows(cu_q, q.shape[0]), what="varlen")


@pytest.mark.parametrize("d", [96, 256, 512])
def test_varlen_head_dims(d, ratio_log) -> None:
    qlens, klens = [33, 0, 70], [50, 9, 130]
    dt = torch.bfloat16
    gen = gen_for("varlen-hd", d)
    q, k, v, cu_q, cu_k = varlen_inputs(qlens, klens, 8, 2, d, dt, gen)
    out, out_buf = poisoned((q.shape[0], 8, d), dt)
    lse, lse_buf = poisoned((8, q.shape[0]))
    fmha.attention_varlen(q, k, v, i32(cu_q), i32(cu_k), max(qlens), max(klens), causal="bottom_right",
                          return_lse=True, out=out, lse_out=lse)
    torch.cuda.synchronize()
    assert_guards(out_buf, lse_buf, what=f"hd{d}")
    kw = dict(causal="bottom_right", scale=1 / math.sqrt(d))
    check_reference(ref_packed, (q, k, v, cu_q, cu_k), kw, out, lse, dt, ratio_log,
                    rows=owned_rows(cu_q, q.shape[0]), what=f"hd{d}")


VARLEN_FEATURES = [
    dict(seqused=True),
    dict(window=(40, -1), causal="bottom_right"),
    dict(window=(16, 16)),
    dict(softcap=15.0, causal="top_left"),
    dict(sinks=True, causal="bottom_right"),
    dict(sinks=True, window=(8, 0), softcap=30.0, seqused=True, causal="bottom_right"),
    dict(num_splits=3, causal="bottom_right"),
    dict(num_splits=2, sinks=True, seqused=True),
    dict(softmax_scale=0.05),
]


@pytest.mark.parametrize("case", VARLEN_FEATURES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_varlen_features(case, ratio_log) -> None:
    qlens, klens = [1, 45, 0, 200, 4], [300, 60, 12, 200, 0]
    hq, hk, d, dt = 8, 2, 128, torch.float16
    gen = gen_for("varlen-feat", str(case))
    q, k, v, cu_q, cu_k = varlen_inputs(qlens, klens, hq, hk, d, dt, gen)
    used = [min(n, u) for n, u in zip(klens, [250, 31, 12, 7, 0])] if case.get("seqused") else None
    sinks = torch.randn(hq, generator=gen, device=DEVICE) * 2 if case.get("sinks") else None
    out, out_buf = poisoned((q.shape[0], hq, d), dt)
    lse, lse_buf = poisoned((hq, q.shape[0]))
    fmha.attention_varlen(
        q, k, v, i32(cu_q), i32(cu_k), max(qlens), max(klens), causal=case.get("causal", False),
        softmax_scale=case.get("softmax_scale"), window=case.get("window"), softcap=case.get("softcap", 0.0),
        sinks=sinks, seqused_k=i32(used) if used is not None else None, num_splits=case.get("num_splits", 0),
        return_lse=True, out=out, lse_out=lse,
    )
    torch.cuda.synchronize()
    assert_guards(out_buf, lse_buf, what=str(case))
    kw = dict(causal=case.get("causal"), scale=case.get("softmax_scale") or 1 / math.sqrt(d),
              window=case.get("window"), softcap=case.get("softcap", 0.0), sinks=sinks)
    check_reference(ref_packed, (q, k, v, cu_q, cu_k, used), kw, out, lse, dt, ratio_log,
                    rows=owned_rows(cu_q, q.shape[0]), what=str(case))


def test_varlen_all_sequences_without_keys() -> None:
    q = torch.randn(10, 4, 64, device=DEVICE).to(torch.bfloat16)
    empty = torch.empty(0, 2, 64, device=DEVICE, dtype=torch.bfloat16)
    out, out_buf = poisoned((10, 4, 64), torch.bfloat16)
    lse, lse_buf = poisoned((4, 10))
    fmha.attention_varlen(q, empty, empty, i32([0, 4, 10]), i32([0, 0, 0]), 6, 0, return_lse=True,
                          out=out, lse_out=lse)
    torch.cuda.synchronize()
    assert bool((out == 0).all()) and bool(torch.isneginf(lse).all())  # NaN (unwritten) fails both
    assert_guards(out_buf, lse_buf, what="no keys")


def test_varlen_equals_dense_attention() -> None:
    # Equal lengths: the packed batch is a dense one.
    b, s, hq, hk, d = 3, 77, 8, 2, 128
    q = torch.randn(b, s, hq, d, device=DEVICE).to(torch.bfloat16)
    k = torch.randn(b, s, hk, d, device=DEVICE).to(torch.bfloat16)
    v = torch.randn(b, s, hk, d, device=DEVICE).to(torch.bfloat16)
    cu = i32(cumsum([s] * b))
    dense, dense_lse = fmha.attention(q, k, v, causal="bottom_right", return_lse=True)
    packed, packed_lse = fmha.attention_varlen(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu, cu, s, s,
                                               causal=True, return_lse=True)
    torch.cuda.synchronize()
    # Possibly different kernels (dense: Hopper on sm_90): equal up to rounding.
    torch.testing.assert_close(packed.view(b, s, hq, d), dense, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(packed_lse.view(hq, b, s).transpose(0, 1), dense_lse, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- KV caches
def paged_cache(seqs_k: List[torch.Tensor], seqs_v: List[torch.Tensor], page_size: int, gen: torch.Generator,
                spare_pages: int = 3):
    """Scatter per-sequence K/V [len, hk, d] into shuffled pages.

    Returns k_cache, v_cache [num_pages, page_size, hk, d] (other rows
    random), block_table int32 [b, max_pages_per_seq] on the device (unused
    entries point far out of range: they must not be read)."""
    hk, d, dt = seqs_k[0].shape[1], seqs_k[0].shape[2], seqs_k[0].dtype
    pages_per = [-(-t.shape[0] // page_size) for t in seqs_k]
    max_pages = max(max(pages_per), 1) + 1
    num_pages = sum(pages_per) + spare_pages
    cpu_gen = torch.Generator().manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen, device=DEVICE)))
    perm = torch.randperm(num_pages, generator=cpu_gen)
    table = torch.full((len(seqs_k), max_pages), num_pages + 1000, dtype=torch.int32)
    k_cache = randn(num_pages, page_size, hk, d, dtype=dt, gen=gen)
    v_cache = randn(num_pages, page_size, hk, d, dtype=dt, gen=gen)
    used = 0
    for b, (ks, vs) in enumerate(zip(seqs_k, seqs_v)):
        n = pages_per[b]
        table[b, :n] = perm[used: used + n].to(torch.int32)
        used += n
        j = torch.arange(ks.shape[0])
        pages = table[b, j // page_size].long().to(DEVICE)
        rows = (j % page_size).to(DEVICE)
        k_cache[pages, rows] = ks
        v_cache[pages, rows] = vs
    return k_cache, v_cache, table.to(DEVICE)


def kv_sequences(lens: List[int], hk: int, d: int, dt, gen):
    return ([randn(n, hk, d, dtype=dt, gen=gen) for n in lens], [randn(n, hk, d, dtype=dt, gen=gen) for n in lens])


def ref_decode(q, seqs_k, seqs_v, *, p_dtype=None, **kw):
    """q [b, t, hq, d] against per-sequence keys: O [b, t, hq, d], LSE [b, hq, t]."""
    outs, lses = [], []
    for b in range(q.shape[0]):
        o, lse = ref_sequence(q[b], seqs_k[b], seqs_v[b], p_dtype=p_dtype, **kw)
        outs.append(o)
        lses.append(lse)
    return torch.stack(outs), torch.stack(lses)


PAGED_LENS = [1, 77, 0, 513, 16, 200]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("seqlen_q", [1, 4])
@pytest.mark.parametrize("page_size", [1, 16, 64])
def test_paged_kv_shuffled_pages(page_size, seqlen_q, dtype, ratio_log) -> None:
    hq, hk, d = 16, 4, 128
    dt = DTYPES[dtype]
    gen = gen_for("paged", page_size, seqlen_q, dtype)
    lens = PAGED_LENS
    seqs_k, seqs_v = kv_sequences(lens, hk, d, dt, gen)
    k_cache, v_cache, table = paged_cache(seqs_k, seqs_v, page_size, gen)
    q = randn(len(lens), seqlen_q, hq, d, dtype=dt, gen=gen)
    assert fmha.check_block_table(table.cpu(), [int(n) for n in lens], num_pages=k_cache.shape[0],
                                  page_size=page_size), "test setup: the block table breaks the contract"
    out, out_buf = poisoned(q.shape, dt)
    lse, lse_buf = poisoned((len(lens), hq, seqlen_q))
    res = fmha.attention_with_kvcache(q, k_cache, v_cache, i32(lens), block_table=table, return_lse=True,
                                      out=out, lse_out=lse)
    torch.cuda.synchronize()
    assert res[0] is out and res[1] is lse
    assert out.shape == q.shape and lse.shape == (len(lens), hq, seqlen_q)
    assert_guards(out_buf, lse_buf, what=f"paged ps={page_size}")
    kw = dict(causal="bottom_right", scale=1 / math.sqrt(d))
    check_reference(ref_decode, (q, seqs_k, seqs_v), kw, out, lse, dt, ratio_log, what=f"paged ps={page_size}")


def test_paged_kv_packed_queries(ratio_log) -> None:
    # Chunked prefill against a paged cache: packed queries, ragged lengths.
    hq, hk, d, dt = 8, 2, 64, torch.bfloat16
    gen = gen_for("paged-packed")
    klens = [40, 300, 17, 64]
    qlens = [40, 5, 0, 64]  # the last qlens keys of each sequence are the new tokens
    seqs_k, seqs_v = kv_sequences(klens, hk, d, dt, gen)
    k_cache, v_cache, table = paged_cache(seqs_k, seqs_v, 16, gen)
    cu_q = cumsum(qlens)
    q = randn(cu_q[-1], hq, d, dtype=dt, gen=gen)
    out, out_buf = poisoned(q.shape, dt)
    lse, lse_buf = poisoned((hq, cu_q[-1]))
    res = fmha.attention_with_kvcache(q, k_cache, v_cache, i32(klens), block_table=table,
                                      cu_seqlens_q=i32(cu_q), max_seqlen_q=max(qlens), return_lse=True,
                                      out=out, lse_out=lse)
    torch.cuda.synchronize()
    assert res[0] is out and res[1] is lse
    assert out.shape == q.shape and lse.shape == (hq, cu_q[-1])
    assert_guards(out_buf, lse_buf, what="paged packed")
    kk = torch.cat(seqs_k)
    vv = torch.cat(seqs_v)
    kw = dict(causal="bottom_right", scale=1 / math.sqrt(d))
    check_reference(ref_packed, (q, kk, vv, cu_q, cumsum(klens)), kw, out, lse, dt, ratio_log, what="paged packed")


DECODE_HEADS = [(8, 8), (32, 8), (16, 2), (8, 1)]  # MHA, GQA 4, GQA 8, MQA


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("num_splits", [0, 1, 3, 8])
@pytest.mark.parametrize("heads", DECODE_HEADS, ids=lambda h: f"{h[0]}q{h[1]}kv")
@pytest.mark.parametrize("seqlen_q", [1, 4])
def test_decode_contiguous_cache(seqlen_q, heads, num_splits, dtype, ratio_log) -> None:
    hq, hk = heads
    d, smax = 128, 2048
    dt = DTYPES[dtype]
    gen = gen_for("decode", seqlen_q, heads, num_splits, dtype)
    lens = [2048, 1, 700, 1500]
    k_cache = randn(len(lens), smax, hk, d, dtype=dt, gen=gen)
    v_cache = randn(len(lens), smax, hk, d, dtype=dt, gen=gen)
    q = randn(len(lens), seqlen_q, hq, d, dtype=dt, gen=gen)
    out, out_buf = poisoned(q.shape, dt)
    lse, lse_buf = poisoned((len(lens), hq, seqlen_q))
    fmha.attention_with_kvcache(q, k_cache, v_cache, i32(lens), num_splits=num_splits, return_lse=True,
                                out=out, lse_out=lse)
    torch.cuda.synchronize()
    assert_guards(out_buf, lse_buf, what=f"decode splits={num_splits}")
    seqs_k = [k_cache[b, :n] for b, n in enumerate(lens)]
    seqs_v = [v_cache[b, :n] for b, n in enumerate(lens)]
    kw = dict(causal="bottom_right", scale=1 / math.sqrt(d))
    check_reference(ref_decode, (q, seqs_k, seqs_v), kw, out, lse, dt, ratio_log, what=f"decode splits={num_splits}")


@pytest.mark.parametrize("num_splits", [2, 5, 16])
def test_split_count_is_honoured(num_splits) -> None:
    q = torch.randn(2, 1, 32, 128, device=DEVICE).to(torch.bfloat16)
    cache = torch.randn(2, 4096, 8, 128, device=DEVICE).to(torch.bfloat16)
    desc = fmha.describe_with_kvcache(q, cache, cache, i32([4096, 100]), num_splits=num_splits)
    with fmha.Plan(desc) as plan:
        assert plan.info.num_splits == num_splits, plan.info
        assert plan.info.kernel_family == fmha.KernelFamily.DECODE
        # The partials live in the workspace, except where two splits run as
        # clusters of two CTAs that merge in shared memory (sm_90).
        assert (plan.workspace_size > 0) != ("_cluster" in plan.info.kernel_name), plan.info
    auto = fmha.describe_with_kvcache(q, cache, cache, i32([4096, 100]))
    with fmha.Plan(auto) as plan:
        assert 1 <= plan.info.num_splits <= 128


@pytest.mark.parametrize("seqlen_q", [1, 4])
@pytest.mark.parametrize("num_splits", [0, 4])
def test_decode_head_dim_512(seqlen_q, num_splits, ratio_log) -> None:
    hq, hk, d, dt = 16, 2, 512, torch.bfloat16
    gen = gen_for("hd512", seqlen_q, num_splits)
    lens = [1000, 3, 511]
    seqs_k, seqs_v = kv_sequences(lens, hk, d, dt, gen)
    k_cache, v_cache, table = paged_cache(seqs_k, seqs_v, 32, gen)
    q = randn(len(lens), seqlen_q, hq, d, dtype=dt, gen=gen)
    out, out_buf = poisoned(q.shape, dt)
    lse, lse_buf = poisoned((len(lens), hq, seqlen_q))
    fmha.attention_with_kvcache(q, k_cache, v_cache, i32(lens), block_table=table, num_splits=num_splits,
                                return_lse=True, out=out, lse_out=lse)
    torch.cuda.synchronize()
    assert_guards(out_buf, lse_buf, what="hd512")
    kw = dict(causal="bottom_right", scale=1 / math.sqrt(d))
    check_reference(ref_decode, (q, seqs_k, seqs_v), kw, out, lse, dt, ratio_log, what="hd512")


def test_decode_features(ratio_log) -> None:
    hq, hk, d, dt = 32, 8, 128, torch.float16
    gen = gen_for("decode-features")
    lens = [900, 5, 333]
    seqs_k, seqs_v = kv_sequences(lens, hk, d, dt, gen)
    k_cache, v_cache, table = paged_cache(seqs_k, seqs_v, 16, gen)
    q = randn(len(lens), 4, hq, d, dtype=dt, gen=gen)
    sinks = torch.randn(hq, generator=gen, device=DEVICE) * 2
    for num_splits in (1, 4):
        out, out_buf = poisoned(q.shape, dt)
        lse, lse_buf = poisoned((len(lens), hq, 4))
        fmha.attention_with_kvcache(q, k_cache, v_cache, i32(lens), block_table=table, window=(128, -1),
                                    softcap=25.0, sinks=sinks, num_splits=num_splits, return_lse=True,
                                    out=out, lse_out=lse)
        torch.cuda.synchronize()
        assert_guards(out_buf, lse_buf, what=f"features splits={num_splits}")
        kw = dict(causal="bottom_right", scale=1 / math.sqrt(d), window=(128, -1), softcap=25.0, sinks=sinks)
        check_reference(ref_decode, (q, seqs_k, seqs_v), kw, out, lse, dt, ratio_log,
                        what=f"features splits={num_splits}")


def test_kvcache_single_length_and_no_mask(ratio_log) -> None:
    hq, hk, d, dt = 8, 2, 64, torch.bfloat16
    gen = gen_for("single-length")
    cache_k = randn(3, 512, hk, d, dtype=dt, gen=gen)
    cache_v = randn(3, 512, hk, d, dtype=dt, gen=gen)
    q = randn(3, 2, hq, d, dtype=dt, gen=gen)
    out, out_buf = poisoned(q.shape, dt)
    fmha.attention_with_kvcache(q, cache_k, cache_v, 300, causal=False, out=out)
    torch.cuda.synchronize()
    assert_guards(out_buf, what="single length")
    kw = dict(causal=None, scale=1 / math.sqrt(d))
    seqs_k, seqs_v = [cache_k[b, :300] for b in range(3)], [cache_v[b, :300] for b in range(3)]
    check_reference(ref_decode, (q, seqs_k, seqs_v), kw, out, None, dt, ratio_log, what="single length")


def test_decode_loop_reuses_one_plan_and_graph_replay() -> None:
    fmha.clear_plan_cache()
    hq, hk, d, dt = 16, 4, 128, torch.bfloat16
    gen = gen_for("loop")
    k_cache = randn(2, 1024, hk, d, dtype=dt, gen=gen)
    v_cache = randn(2, 1024, hk, d, dtype=dt, gen=gen)
    q = randn(2, 1, hq, d, dtype=dt, gen=gen)
    lens = i32([10, 500])
    out = torch.empty_like(q)
    for step in range(3):
        lens += 1
        fmha.attention_with_kvcache(q, k_cache, v_cache, lens, num_splits=4, out=out)
    info = fmha.plan_cache_info()
    assert (info.misses, info.hits) == (1, 2), info

    # Graph capture: the lengths are read on the device at replay.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fmha.attention_with_kvcache(q, k_cache, v_cache, lens, num_splits=4, out=out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fmha.attention_with_kvcache(q, k_cache, v_cache, lens, num_splits=4, out=out)
    lens.copy_(i32([700, 1024]))
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    seqs_k, seqs_v = [k_cache[0, :700], k_cache[1]], [v_cache[0, :700], v_cache[1]]
    kw = dict(causal="bottom_right", scale=1 / math.sqrt(d))
    check_reference(ref_decode, (q, seqs_k, seqs_v), kw, out, None, dt, what="graph replay")


def test_kvcache_side_stream() -> None:
    """A split decode enqueued on a side stream (its workspace used there) is
    right, and equals the same call on the default stream."""
    dt, d = torch.bfloat16, 128
    gen = gen_for("side_stream")
    q = randn(2, 1, 8, d, dtype=dt, gen=gen)
    cache = randn(2, 3000, 2, d, dtype=dt, gen=gen)
    lens = i32([3000, 17])
    expected, exp_buf = poisoned(q.shape, dt)
    fmha.attention_with_kvcache(q, cache, cache, lens, num_splits=6, out=expected)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got, got_buf = poisoned(q.shape, dt)  # poisoned on the side stream, before the call
        fmha.attention_with_kvcache(q, cache, cache, lens, num_splits=6, out=got)  # workspace on the side stream
    side.synchronize()
    torch.cuda.synchronize()
    seqs = [cache[0, :3000], cache[1, :17]]
    kw = dict(causal="bottom_right", scale=1 / math.sqrt(d))
    check_reference(ref_decode, (q, seqs, seqs), kw, got, None, dt, what="side stream")
    check_reference(ref_decode, (q, seqs, seqs), kw, expected, None, dt, what="default stream")
    assert_guards(exp_buf, got_buf, what="side stream")
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


# ---------------------------------------------------------------- merge
def merge64(parts: List[torch.Tensor], lses: List[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    """Exact merge in float64 of O [b, s, h, d] parts and LSE [b, h, s]."""
    lse = torch.logsumexp(torch.stack([x.double() for x in lses]), dim=0)
    o = torch.zeros_like(parts[0], dtype=torch.float64)
    for p, x in zip(parts, lses):
        w = torch.nan_to_num(torch.exp(x.double() - lse), nan=0.0).transpose(1, 2)[..., None]  # [b, s, h, 1]
        o += w * p.double()
    return o, lse


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("cuts", [(0,), (0, 500), (0, 1, 100, 101, 700), tuple(range(0, 1000, 100))],
                         ids=lambda c: f"{len(c)}parts")
def test_merge_equals_full_attention(cuts, dtype, ratio_log) -> None:
    b, s, hq, hk, d, sk = 2, 33, 8, 2, 128, 1000
    dt = DTYPES[dtype]
    gen = gen_for("merge", cuts, dtype)
    q = randn(b, s, hq, d, dtype=dt, gen=gen)
    k = randn(b, sk, hk, d, dtype=dt, gen=gen)
    v = randn(b, sk, hk, d, dtype=dt, gen=gen)
    bounds = list(cuts) + [sk]
    parts, lses = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        o, lse = fmha.attention(q, k[:, lo:hi], v[:, lo:hi], return_lse=True)
        parts.append(o)
        lses.append(lse)
    out, out_buf = poisoned(q.shape, dt)
    lse, lse_buf = poisoned((b, hq, s))
    res = fmha.merge(parts, lses, return_lse=True, out=out, lse_out=lse)
    torch.cuda.synchronize()
    assert res[0] is out and res[1] is lse
    assert out.shape == q.shape and lse.shape == (b, hq, s)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any(), "merge left output unwritten"
    assert_guards(out_buf, lse_buf, what="merge")
    # 1. The merge itself: against an exact merge of the same parts.
    exact_o, exact_lse = merge64(parts, lses)
    eps = torch.finfo(dt).eps
    merr = float((out.double() - exact_o).abs().max())
    assert merr <= eps * float(exact_o.abs().max()) + 1e-6, f"merge error {merr:.3g}"
    assert float((lse.double() - exact_lse).abs().max()) <= 1e-5 * (1 + float(exact_lse.abs().max()))
    # 2. End to end: against full attention (the parts' rounding adds about one ulp).
    kw = dict(causal=None, scale=1 / math.sqrt(d))
    ref_o, ref_lse = ref_decode(q, list(k), list(v), **kw)
    twin_o, _ = ref_decode(q, list(k), list(v), p_dtype=dt, **kw)
    err = float((out.double() - ref_o).abs().max())
    base = max(float((twin_o.to(dt).double() - ref_o).abs().max()), 1e-6)
    ratio_log(err / base, err, base)
    assert err <= 2 * base + eps * float(ref_o.abs().max()), f"merged O error {err:.3g}, same precision {base:.3g}"
    torch.testing.assert_close(lse.double(), ref_lse, rtol=1e-4, atol=1e-4)


def test_merge_parts_without_keys_and_aliasing() -> None:
    b, s, h, d = 2, 5, 4, 64
    gen = gen_for("merge-empty")
    parts = [randn(b, s, h, d, dtype=torch.bfloat16, gen=gen) for _ in range(3)]
    lses = [torch.randn(b, h, s, generator=gen, device=DEVICE) for _ in range(3)]
    lses[1].fill_(float("-inf"))  # part 1 saw no key: contributes nothing, whatever its O
    lses[0][:, :, 2] = float("-inf")
    lses[2][:, :, 2] = float("-inf")  # query row 2: no part saw a key, except part 1 which saw none
    exact_o, exact_lse = merge64(parts, lses)
    out, out_buf = poisoned((b, s, h, d), torch.bfloat16)
    lse, lse_buf = poisoned((b, h, s))
    fmha.merge(parts, lses, return_lse=True, out=out, lse_out=lse)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any() and not torch.isnan(lse).any(), "merge left output unwritten"
    assert bool((out[:, 2] == 0).all()) and bool(torch.isneginf(lse[:, :, 2]).all())
    assert_guards(out_buf, lse_buf, what="merge without keys")
    eps = torch.finfo(torch.bfloat16).eps
    assert float((out.double() - exact_o).abs().max()) <= eps * float(exact_o.abs().max())
    fin = torch.isfinite(exact_lse)
    assert torch.equal(fin, torch.isfinite(lse))
    assert float((lse.double() - exact_lse)[fin].abs().max()) <= 1e-5 * (1 + float(exact_lse[fin].abs().max()))
    # The output may be the first part itself.
    first = parts[0].clone()
    ret = fmha.merge([first, parts[1], parts[2]], lses, out=first)
    torch.cuda.synchronize()
    assert ret is first
    torch.testing.assert_close(first, out)
    # One part: a copy.
    one, one_buf = poisoned((b, s, h, d), torch.bfloat16)
    fmha.merge([parts[2]], [lses[2]], out=one)
    torch.cuda.synchronize()
    assert not torch.isnan(one).any(), "one-part merge left output unwritten"
    assert_guards(one_buf, what="one-part merge")
    torch.testing.assert_close(one[:, [0, 1, 3, 4]], parts[2][:, [0, 1, 3, 4]])


def test_merge_strided_parts() -> None:
    # Parts written as views of one [b, h, s, d] buffer each (BHSD memory), output BSHD.
    b, s, h, d = 2, 40, 8, 128
    gen = gen_for("merge-strided")
    parts = [randn(b, h, s, d, dtype=torch.float16, gen=gen).transpose(1, 2) for _ in range(2)]
    lses = [torch.randn(b, h, s, generator=gen, device=DEVICE) for _ in range(2)]
    out, out_buf = poisoned((b, s, h, d), torch.float16)  # BSHD, unlike the parts
    fmha.merge(parts, lses, out=out)
    torch.cuda.synchronize()
    assert not torch.isnan(out).any(), "merge left output unwritten"
    assert_guards(out_buf, what="strided merge")
    exact_o, _ = merge64(parts, lses)
    assert float((out.double() - exact_o).abs().max()) <= torch.finfo(torch.float16).eps * float(exact_o.abs().max())


def test_merge_varlen_parts(ratio_log) -> None:
    # Keys of each sequence split in two halves; merge the packed results.
    hq, hk, d, dt = 8, 2, 128, torch.bfloat16
    gen = gen_for("merge-varlen")
    qlens, klens = [20, 0, 64, 7], [100, 30, 1, 257]
    cut = [37, 0, 1, 128]  # keys [0, cut) in part A, [cut, len) in part B
    q, k, v, cu_q, cu_k = varlen_inputs(qlens, klens, hq, hk, d, dt, gen, pad_q=0, pad_k=0)
    idx_a = torch.cat([torch.arange(cu_k[i], cu_k[i] + cut[i]) for i in range(len(klens))]).to(DEVICE)
    idx_b = torch.cat([torch.arange(cu_k[i] + cut[i], cu_k[i + 1]) for i in range(len(klens))]).to(DEVICE)
    lens_a = cut
    lens_b = [n - c for n, c in zip(klens, cut)]
    oa, la = fmha.attention_varlen(q, k[idx_a], v[idx_a], i32(cu_q), i32(cumsum(lens_a)), max(qlens), max(lens_a),
                                   return_lse=True)
    ob, lb = fmha.attention_varlen(q, k[idx_b], v[idx_b], i32(cu_q), i32(cumsum(lens_b)), max(qlens), max(lens_b),
                                   return_lse=True)
    out, out_buf = poisoned(q.shape, dt)
    lse, lse_buf = poisoned((hq, q.shape[0]))
    fmha.merge([oa, ob], [la, lb], return_lse=True, out=out, lse_out=lse)
    torch.cuda.synchronize()
    assert out.shape == q.shape and lse.shape == (hq, q.shape[0])
    assert not torch.isnan(out).any() and not torch.isnan(lse).any(), "merge left output unwritten"
    assert_guards(out_buf, lse_buf, what="varlen merge")
    kw = dict(causal=None, scale=1 / math.sqrt(d))
    ref_o, ref_lse = ref_packed(q, k, v, cu_q, cu_k, **kw)
    twin_o, _ = ref_packed(q, k, v, cu_q, cu_k, p_dtype=dt, **kw)
    err = float((out.double() - ref_o).abs().max())
    base = max(float((twin_o.to(dt).double() - ref_o).abs().max()), 1e-6)
    ratio_log(err / base, err, base)
    assert err <= 2 * base + torch.finfo(dt).eps * float(ref_o.abs().max())
    fin = torch.isfinite(ref_lse)
    assert torch.equal(fin, torch.isfinite(lse))
    torch.testing.assert_close(lse.double()[fin], ref_lse[fin], rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- other producers
def test_varlen_cuda_array_interface_inputs() -> None:
    qlens, klens = [30, 0, 99], [64, 5, 200]
    gen = gen_for("cai")
    q, k, v, cu_q, cu_k = varlen_inputs(qlens, klens, 8, 2, 128, torch.float16, gen)
    cq, ck = i32(cu_q), i32(cu_k)
    # num_splits=1: no workspace (nothing to allocate one with for bare CAI arrays).
    expected, expected_lse = fmha.attention_varlen(q, k, v, cq, ck, 99, 200, causal="bottom_right", return_lse=True,
                                                   num_splits=1)
    out = torch.full_like(q, float("nan"))
    lse = torch.empty_like(expected_lse)
    ret = fmha.attention_varlen(CAI(q), CAI(k), CAI(v), CAI(cq), CAI(ck), 99, 200, causal="bottom_right",
                                out=CAI(out), lse_out=CAI(lse), return_lse=True, num_splits=1)
    torch.cuda.synchronize()
    assert ret[0].t is out and ret[1].t is lse
    rows = owned_rows(cu_q, q.shape[0])
    torch.testing.assert_close(out[rows], expected[rows])
    torch.testing.assert_close(lse[:, rows], expected_lse[:, rows])


def test_paged_dlpack_inputs_and_workspace() -> None:
    gen = gen_for("dlpack")
    seqs_k, seqs_v = kv_sequences([700, 3], 2, 128, torch.bfloat16, gen)
    k_cache, v_cache, table = paged_cache(seqs_k, seqs_v, 16, gen)
    q = randn(2, 1, 8, 128, dtype=torch.bfloat16, gen=gen)
    lens = i32([700, 3])
    expected = fmha.attention_with_kvcache(q, k_cache, v_cache, lens, block_table=table, num_splits=4)
    out = torch.full_like(q, float("nan"))
    desc = fmha.describe_with_kvcache(q, k_cache, v_cache, lens, block_table=table, num_splits=4)
    with fmha.Plan(desc) as plan:
        ws = torch.empty(plan.workspace_size, dtype=torch.uint8, device=DEVICE)
    fmha.attention_with_kvcache(DLPack(q), DLPack(k_cache), DLPack(v_cache), DLPack(lens),
                                block_table=DLPack(table), num_splits=4, out=DLPack(out), workspace=ws)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected)


def test_cupy_arrays() -> None:
    cupy = pytest.importorskip("cupy")
    gen = gen_for("cupy")
    qlens, klens = [12, 40], [12, 300]
    q, k, v, cu_q, cu_k = varlen_inputs(qlens, klens, 8, 2, 64, torch.float16, gen, pad_q=0)
    expected = fmha.attention_varlen(q, k, v, i32(cu_q), i32(cu_k), 40, 300, causal="bottom_right", num_splits=3)
    torch.cuda.synchronize()
    cq, ck = cupy.asarray(i32(cu_q)), cupy.asarray(i32(cu_k))
    out = cupy.empty(q.shape, dtype=cupy.float16)
    fmha.attention_varlen(cupy.asarray(q), cupy.asarray(k), cupy.asarray(v), cq, ck, 40, 300,
                          causal="bottom_right", num_splits=3, out=out)  # workspace from CuPy's pool
    cupy.cuda.get_current_stream().synchronize()
    torch.testing.assert_close(torch.as_tensor(out, device=DEVICE), expected)
