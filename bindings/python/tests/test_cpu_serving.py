"""CPU tests of the serving API (descriptor version 3, merge, block tables)
against the real libfmha: no GPU, no driver, no torch needed. Tensors are
stand-ins (fakes.py) that describe memory the library never touches before
a plan exists."""

from __future__ import annotations

import ctypes

import pytest

import fmha
from fmha.problem import descriptor_key

from fakes import FakeCAI, FakeDLPack

pytestmark = pytest.mark.usefixtures("lib")

# A ragged batch: 3 sequences, GQA 8/2, head_dim 128, fp16 (FakeCAI's default).
B, HQ, HKV, D = 3, 8, 2, 128
TOTAL_Q, TOTAL_K = 50, 300
MAXQ, MAXK = 30, 200


def i32(*shape, **kw):
    return FakeCAI(list(shape), typestr="<i4", **kw)


def f32(*shape, **kw):
    return FakeCAI(list(shape), typestr="<f4", **kw)


def varlen_inputs():
    q = FakeCAI([TOTAL_Q, HQ, D])
    k = FakeCAI([TOTAL_K, HKV, D])
    v = FakeCAI([TOTAL_K, HKV, D])
    o = FakeCAI([TOTAL_Q, HQ, D])
    return q, k, v, o, i32(B + 1, ptr=0x7F0000100000), i32(B + 1, ptr=0x7F0000200000)


# ---------------------------------------------------------------- descriptors
def test_kernel_and_flag_names() -> None:
    assert fmha.KernelFamily.DECODE == 3
    assert fmha.make_descriptor(batch=1, num_q_heads=8, seqlen_q=1, head_dim=128, kernel="decode").kernel == 3
    assert (fmha.FMHA_FLAG_VARLEN_Q, fmha.FMHA_FLAG_VARLEN_K, fmha.FMHA_FLAG_SEQUSED_K, fmha.FMHA_FLAG_PAGED_KV) == (
        4, 8, 16, 32)
    assert fmha.FMHA_MERGE_MAX_PARTS == 64


def test_descriptor_v3_defaults() -> None:
    d = fmha.problem.new_descriptor()
    assert d.version == 3
    assert (d.total_q, d.total_k, d.num_pages, d.max_pages_per_seq, d.page_size, d.num_splits) == (0,) * 6


def test_make_descriptor_varlen_and_paged_strides() -> None:
    d = fmha.make_descriptor(batch=2, num_q_heads=8, num_kv_heads=2, seqlen_q=64, seqlen_k=512, head_dim=128,
                             varlen_q=True, total_q=100, paged_kv=True, seqused_k=True,
                             num_pages=40, page_size=16, max_pages_per_seq=32, num_splits=4)
    assert d.flags == fmha.FMHA_FLAG_VARLEN_Q | fmha.FMHA_FLAG_PAGED_KV | fmha.FMHA_FLAG_SEQUSED_K
    assert d.q_strides.as_tuple() == (100 * 8 * 128, 8 * 128, 128, 1)  # rows as addressed: total_q
    assert d.k_strides.as_tuple() == (16 * 2 * 128, 2 * 128, 128, 1)  # batch stride = page stride
    assert (d.total_q, d.num_pages, d.page_size, d.max_pages_per_seq, d.num_splits) == (100, 40, 16, 32, 4)
    assert fmha.check_support(d).ok
    assert fmha.check_support(d, sm=80).ok


def test_check_support_v3_rules() -> None:
    base = dict(batch=2, num_q_heads=8, num_kv_heads=2, seqlen_q=1, seqlen_k=512, head_dim=128)
    r = fmha.check_support(**base, total_q=10)  # no FMHA_FLAG_VARLEN_Q
    assert r.status == fmha.Status.INVALID_ARGUMENT and "total_q" in r.message
    r = fmha.check_support(**base, num_splits=129)
    assert r.status == fmha.Status.INVALID_ARGUMENT and "num_splits" in r.message
    r = fmha.check_support(**base, paged_kv=True, num_pages=8, page_size=16, max_pages_per_seq=4)  # 64 < 512 keys
    assert r.status == fmha.Status.INVALID_ARGUMENT and "max_pages_per_seq" in r.message
    assert fmha.check_support(**{**base, "head_dim": 512}).ok
    assert fmha.check_support(**base, num_splits=8, kernel="decode").ok


# ---------------------------------------------------------------- attention_varlen
def test_describe_varlen() -> None:
    q, k, v, o, cq, ck = varlen_inputs()
    d = fmha.describe_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, causal="bottom_right", softmax_scale=0.1,
                             window=(32, 0), softcap=5.0, num_splits=3, kernel="portable")
    assert (d.batch, d.num_q_heads, d.num_kv_heads, d.head_dim) == (B, HQ, HKV, D)
    assert (d.seqlen_q, d.seqlen_k, d.total_q, d.total_k) == (MAXQ, MAXK, TOTAL_Q, TOTAL_K)
    assert d.flags == fmha.FMHA_FLAG_VARLEN_Q | fmha.FMHA_FLAG_VARLEN_K
    assert d.q_strides.as_tuple()[1:] == (HQ * D, D, 1)
    assert d.k_strides.as_tuple()[1:] == (HKV * D, D, 1)
    assert d.mask == fmha.Mask.CAUSAL_BOTTOM_RIGHT and d.softmax_scale == pytest.approx(0.1)
    assert (d.window_left, d.window_right, d.softcap, d.num_splits) == (32, 0, 5.0, 3)
    assert d.kernel == fmha.KernelFamily.PORTABLE
    assert fmha.check_support(d).ok


def test_describe_varlen_options() -> None:
    q, k, v, o, cq, ck = varlen_inputs()
    lse = f32(HQ, TOTAL_Q)
    d = fmha.describe_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, lse_out=lse, seqused_k=i32(B), sinks=f32(HQ))
    assert d.flags & fmha.FMHA_FLAG_WRITE_LSE and d.flags & fmha.FMHA_FLAG_SEQUSED_K and d.flags & fmha.FMHA_FLAG_SINKS
    # max lengths of 0 (only empty sequences) are read as 1
    d = fmha.describe_varlen(q, k, v, cq, ck, 0, 0, out=o)
    assert (d.seqlen_q, d.seqlen_k) == (1, 1)
    # a strided view of a bigger buffer (e.g. a fused QKV projection)
    qkv = FakeCAI([TOTAL_Q, HQ + 2 * HKV, D])
    qs = qkv.view([slice(None), slice(0, HQ)])
    ks = qkv.view([slice(None), slice(HQ, HQ + HKV)])
    d = fmha.describe_varlen(qs, ks, ks, cq, cq, MAXQ, MAXQ, out=o)
    assert d.q_strides.as_tuple()[1:] == ((HQ + 2 * HKV) * D, D, 1)
    assert d.total_k == TOTAL_Q
    assert fmha.check_support(d).ok


def test_varlen_causal_true_rule() -> None:
    q, k, v, o, cq, ck = varlen_inputs()
    with pytest.raises(ValueError, match="ambiguous"):
        fmha.describe_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, causal=True)
    q2 = FakeCAI([TOTAL_Q, HQ, D])
    kv2 = FakeCAI([TOTAL_Q, HKV, D])
    d = fmha.describe_varlen(q2, kv2, kv2, cq, cq, MAXQ, MAXQ, out=o, causal=True)
    assert d.mask == fmha.Mask.CAUSAL_TOP_LEFT  # same lengths: both alignments agree
    with pytest.raises(ValueError, match="ambiguous"):
        fmha.describe_varlen(q2, kv2, kv2, cq, cq, MAXQ, MAXQ, out=o, causal=True, seqused_k=i32(B))


def test_attention_varlen_checks_before_calling_the_library() -> None:
    q, k, v, o, cq, ck = varlen_inputs()
    with pytest.raises(ValueError, match="3-D"):
        fmha.attention_varlen(FakeCAI([1, TOTAL_Q, HQ, D]), k, v, cq, ck, MAXQ, MAXK, out=o)
    with pytest.raises(TypeError, match="int32"):
        fmha.attention_varlen(q, k, v, FakeCAI([B + 1], typestr="<f4"), ck, MAXQ, MAXK, out=o)
    with pytest.raises(ValueError, match="cu_seqlens_k must have shape"):
        fmha.attention_varlen(q, k, v, cq, i32(B + 2), MAXQ, MAXK, out=o)
    with pytest.raises(ValueError, match="batch \\+ 1 >= 2"):
        fmha.attention_varlen(q, k, v, i32(1), i32(1), MAXQ, MAXK, out=o)
    with pytest.raises(ValueError, match="contiguous"):
        fmha.attention_varlen(q, k, v, FakeCAI([B + 1], typestr="<i4", strides=[2]), ck, MAXQ, MAXK, out=o)
    with pytest.raises(ValueError, match="seqused_k must have shape"):
        fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, seqused_k=i32(B + 1))
    with pytest.raises(ValueError, match="same rows and heads"):
        fmha.attention_varlen(q, k, FakeCAI([TOTAL_K - 1, HKV, D]), cq, ck, MAXQ, MAXK, out=o)
    with pytest.raises(ValueError, match="same head_dim"):
        fmha.attention_varlen(q, FakeCAI([TOTAL_K, HKV, 64]), FakeCAI([TOTAL_K, HKV, 64]), cq, ck, MAXQ, MAXK, out=o)
    with pytest.raises(TypeError, match="one dtype"):
        fmha.attention_varlen(q, FakeDLPack([TOTAL_K, HKV, D]), v, cq, ck, MAXQ, MAXK, out=o)
    with pytest.raises(ValueError, match="out= is required"):
        fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK)
    with pytest.raises(ValueError, match="out must have shape"):
        fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=FakeCAI([TOTAL_Q + 1, HQ, D]))
    with pytest.raises(ValueError, match="lse_out= is required"):
        fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, return_lse=True)
    with pytest.raises(ValueError, match=r"\[num_q_heads, total_q\]"):
        fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, lse_out=f32(B, HQ, MAXQ))
    with pytest.raises(ValueError, match="sinks must be"):
        fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, sinks=f32(HKV))
    with pytest.raises(ValueError, match="max_seqlen_q must be >= 0"):
        fmha.attention_varlen(q, k, v, cq, ck, -1, MAXK, out=o)
    with pytest.raises(ValueError, match="different devices"):
        fmha.attention_varlen(q, k, v, i32(B + 1, device=0), i32(B + 1, device=1), MAXQ, MAXK, out=o)
    with pytest.raises(ValueError, match="lse_out is on device 1, q on device 0"):
        fmha.attention_varlen(q, k, v, i32(B + 1, device=0), i32(B + 1, device=0), MAXQ, MAXK, out=o,
                              lse_out=f32(HQ, TOTAL_Q, device=1))
    with pytest.raises(ValueError, match="invalid kernel"):
        fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, kernel="fastest")


def test_attention_varlen_library_errors_carry_the_message() -> None:
    q, k, v, o, cq, ck = varlen_inputs()
    with pytest.raises(fmha.InvalidArgumentError, match="num_splits"):
        fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, num_splits=500)
    with pytest.raises(fmha.NotSupportedError, match="head_dim"):
        fmha.attention_varlen(FakeCAI([TOTAL_Q, HQ, 80]), FakeCAI([TOTAL_K, HKV, 80]), FakeCAI([TOTAL_K, HKV, 80]),
                              cq, ck, MAXQ, MAXK, out=FakeCAI([TOTAL_Q, HQ, 80]))


def test_attention_varlen_without_driver_raises_no_driver(has_driver: bool) -> None:
    if has_driver:
        pytest.skip("a CUDA driver is present, so NO_DRIVER cannot be observed")
    q, k, v, o, cq, ck = varlen_inputs()
    with pytest.raises(fmha.NoDriverError):
        fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, causal="bottom_right")


def test_attention_varlen_without_rows_calls_nothing() -> None:
    # total_q == 0: nothing to compute, so no plan (and no driver) is needed.
    q, o = FakeCAI([0, HQ, D], ptr=0), FakeCAI([0, HQ, D], ptr=0)
    k = FakeCAI([TOTAL_K, HKV, D])
    cq, ck = i32(B + 1), i32(B + 1, ptr=0x7F0000100000)
    assert fmha.attention_varlen(q, k, k, cq, ck, 0, MAXK, out=o) is o


# ---------------------------------------------------------------- attention_with_kvcache
SMAX, T = 256, 1
NUM_PAGES, PAGE, MAXPAGES = 40, 16, 16


def test_describe_kvcache_contiguous() -> None:
    q, o = FakeCAI([B, T, HQ, D]), FakeCAI([B, T, HQ, D])
    kc, vc = FakeCAI([B, SMAX, HKV, D]), FakeCAI([B, SMAX, HKV, D])
    d = fmha.describe_with_kvcache(q, kc, vc, i32(B), out=o)
    assert (d.batch, d.seqlen_q, d.seqlen_k) == (B, T, SMAX)  # the capacity: lengths come from seqused_k
    assert d.flags == fmha.FMHA_FLAG_SEQUSED_K
    assert d.mask == fmha.Mask.CAUSAL_BOTTOM_RIGHT  # causal=True is bottom-right here
    assert d.k_strides.as_tuple() == (SMAX * HKV * D, HKV * D, D, 1)
    assert fmha.check_support(d).ok
    # One int for every sequence: no index array at all.
    d = fmha.describe_with_kvcache(q, kc, vc, 100, out=o, causal=False)
    assert (d.flags, d.seqlen_k, d.mask) == (0, 100, fmha.Mask.NONE)
    # The descriptor does not depend on the current lengths: one plan per decode loop.
    a = fmha.describe_with_kvcache(q, kc, vc, i32(B, ptr=0x7F0000100000), out=o)
    b = fmha.describe_with_kvcache(q, kc, vc, i32(B, ptr=0x7F0000200000), out=o)
    assert descriptor_key(a) == descriptor_key(b)


def test_describe_kvcache_paged() -> None:
    q, o = FakeCAI([B, 4, HQ, D]), FakeCAI([B, 4, HQ, D])
    kc, vc = FakeCAI([NUM_PAGES, PAGE, HKV, D]), FakeCAI([NUM_PAGES, PAGE, HKV, D])
    d = fmha.describe_with_kvcache(q, kc, vc, i32(B), block_table=i32(B, MAXPAGES), out=o, num_splits=2,
                                   return_lse=True, lse_out=f32(B, HQ, 4), kernel="decode")
    assert d.flags == fmha.FMHA_FLAG_PAGED_KV | fmha.FMHA_FLAG_SEQUSED_K | fmha.FMHA_FLAG_WRITE_LSE
    assert (d.num_pages, d.page_size, d.max_pages_per_seq, d.seqlen_k) == (NUM_PAGES, PAGE, MAXPAGES, PAGE * MAXPAGES)
    assert d.k_strides.as_tuple() == (PAGE * HKV * D, HKV * D, D, 1)
    assert (d.num_splits, d.kernel) == (2, fmha.KernelFamily.DECODE)
    assert fmha.check_support(d).ok
    # page size 1
    kc1 = FakeCAI([NUM_PAGES * PAGE, 1, HKV, D])
    d = fmha.describe_with_kvcache(q, kc1, kc1, i32(B), block_table=i32(B, PAGE * MAXPAGES), out=o)
    assert (d.page_size, d.seqlen_k) == (1, PAGE * MAXPAGES)
    assert fmha.check_support(d).ok


def test_describe_kvcache_packed_queries() -> None:
    q, o = FakeCAI([TOTAL_Q, HQ, D]), FakeCAI([TOTAL_Q, HQ, D])
    kc = FakeCAI([NUM_PAGES, PAGE, HKV, D])
    d = fmha.describe_with_kvcache(q, kc, kc, i32(B), block_table=i32(B, MAXPAGES), cu_seqlens_q=i32(B + 1),
                                   max_seqlen_q=MAXQ, out=o, return_lse=True, lse_out=f32(HQ, TOTAL_Q))
    assert d.flags & fmha.FMHA_FLAG_VARLEN_Q and (d.total_q, d.seqlen_q) == (TOTAL_Q, MAXQ)
    assert fmha.check_support(d).ok


def test_attention_with_kvcache_checks() -> None:
    q, o = FakeCAI([B, T, HQ, D]), FakeCAI([B, T, HQ, D])
    kc = FakeCAI([B, SMAX, HKV, D])
    pages = FakeCAI([NUM_PAGES, PAGE, HKV, D])
    with pytest.raises(ValueError, match="k_cache holds 2 sequences"):
        fmha.attention_with_kvcache(q, FakeCAI([2, SMAX, HKV, D]), FakeCAI([2, SMAX, HKV, D]), i32(B), out=o)
    with pytest.raises(ValueError, match="block_table must be 2-D"):
        fmha.attention_with_kvcache(q, pages, pages, i32(B), block_table=i32(B + 1, MAXPAGES), out=o)
    with pytest.raises(ValueError, match="block_table must be contiguous"):
        fmha.attention_with_kvcache(q, pages, pages, i32(B), out=o,
                                    block_table=FakeCAI([B, MAXPAGES], typestr="<i4", strides=[2 * MAXPAGES, 1]))
    with pytest.raises(TypeError, match="cache_seqlens must be int32"):
        fmha.attention_with_kvcache(q, kc, kc, FakeCAI([B], typestr="<f4"), out=o)
    with pytest.raises(ValueError, match="cache_seqlens must have shape"):
        fmha.attention_with_kvcache(q, kc, kc, i32(B + 1), out=o)
    with pytest.raises(ValueError, match=r"cache_seqlens=0 must be in \[1, 256\]"):
        fmha.attention_with_kvcache(q, kc, kc, 0, out=o)
    with pytest.raises(ValueError, match="max_seqlen_q is required"):
        fmha.attention_with_kvcache(FakeCAI([TOTAL_Q, HQ, D]), kc, kc, i32(B), cu_seqlens_q=i32(B + 1),
                                    out=FakeCAI([TOTAL_Q, HQ, D]))
    with pytest.raises(ValueError, match="only used with cu_seqlens_q"):
        fmha.attention_with_kvcache(q, kc, kc, i32(B), max_seqlen_q=4, out=o)
    with pytest.raises(ValueError, match="must be 4-D"):
        fmha.attention_with_kvcache(q, FakeCAI([B, SMAX, HKV * D]), FakeCAI([B, SMAX, HKV * D]), i32(B), out=o)
    with pytest.raises(ValueError, match="must agree"):
        fmha.attention_with_kvcache(q, kc, FakeCAI([B, SMAX - 1, HKV, D]), i32(B), out=o)
    with pytest.raises(ValueError, match="out= is required"):
        fmha.attention_with_kvcache(q, kc, kc, i32(B))
    with pytest.raises(ValueError, match=r"\[batch, num_q_heads, seqlen_q\]"):
        fmha.attention_with_kvcache(q, kc, kc, i32(B), out=o, lse_out=f32(HQ, B))


def test_attention_with_kvcache_library_errors() -> None:
    q, o = FakeCAI([B, T, HQ, D]), FakeCAI([B, T, HQ, D])
    # A page stride that is not a multiple of 8 elements.
    pages = FakeCAI([NUM_PAGES, PAGE, HKV, D], strides=[PAGE * HKV * D + 4, HKV * D, D, 1])
    with pytest.raises(fmha.MisalignedError, match="k_strides"):
        fmha.attention_with_kvcache(q, pages, pages, i32(B), block_table=i32(B, MAXPAGES), out=o)


# ---------------------------------------------------------------- merge
def test_merge_checks_before_calling_the_library() -> None:
    o1, o2 = FakeCAI([B, MAXQ, HQ, D]), FakeCAI([B, MAXQ, HQ, D], ptr=0x7F0000100000)
    l1, l2 = f32(B, HQ, MAXQ), f32(B, HQ, MAXQ)
    out = FakeCAI([B, MAXQ, HQ, D])
    with pytest.raises(ValueError, match="1 to 64 parts"):
        fmha.merge([], [], out=out)
    with pytest.raises(ValueError, match="1 to 64 parts"):
        fmha.merge([o1] * 65, [l1] * 65, out=out)
    with pytest.raises(ValueError, match="2 O parts but 1 LSE"):
        fmha.merge([o1, o2], [l1], out=out)
    with pytest.raises(ValueError, match="one shape"):
        fmha.merge([o1, FakeCAI([B, MAXQ + 1, HQ, D])], [l1, l2], out=out)
    with pytest.raises(ValueError, match="same strides"):
        fmha.merge([o1, FakeCAI([B, HQ, MAXQ, D]).permute(0, 2, 1, 3)], [l1, l2], out=out)
    with pytest.raises(TypeError, match="one dtype"):
        fmha.merge([o1, FakeDLPack([B, MAXQ, HQ, D])], [l1, l2], out=out)
    with pytest.raises(TypeError, match="float32"):
        fmha.merge([o1, o2], [l1, FakeCAI([B, HQ, MAXQ])], out=out)
    with pytest.raises(ValueError, match="lse_parts\\[1\\] must be a contiguous"):
        fmha.merge([o1, o2], [l1, f32(B, MAXQ, HQ)], out=out)
    with pytest.raises(ValueError, match="out= is required"):
        fmha.merge([o1, o2], [l1, l2])
    with pytest.raises(ValueError, match="lse_out= is required"):
        fmha.merge([o1, o2], [l1, l2], out=out, return_lse=True)
    with pytest.raises(TypeError, match="bfloat16 and float16 only"):
        fmha.merge([f32(B, MAXQ, HQ, D)], [l1], out=out)


def test_merge_without_driver_raises_no_driver(has_driver: bool) -> None:
    if has_driver:
        pytest.skip("a CUDA driver is present, so NO_DRIVER cannot be observed")
    o1, o2 = FakeCAI([B, MAXQ, HQ, D]), FakeCAI([B, MAXQ, HQ, D], ptr=0x7F0000100000)
    with pytest.raises(fmha.NoDriverError):
        fmha.merge([o1, o2], [f32(B, HQ, MAXQ), f32(B, HQ, MAXQ)], out=FakeCAI([B, MAXQ, HQ, D]))


def test_merge_descriptor() -> None:
    d = fmha.make_merge_descriptor(batch=2, seqlen_q=5, num_heads=8, head_dim=64, num_parts=3, dtype="fp16",
                                   write_lse=True, device=1)
    assert (d.version, d.batch, d.seqlen_q, d.num_heads, d.head_dim, d.num_parts) == (1, 2, 5, 8, 64, 3)
    assert d.dtype == fmha.DType.FP16 and d.flags == fmha.FMHA_FLAG_WRITE_LSE and d.device == 1
    assert d.part_strides.as_tuple() == d.o_strides.as_tuple() == (5 * 8 * 64, 8 * 64, 64, 1)
    raw = fmha.FmhaMergeDescriptor()
    fmha._lib.call("fmha_merge_descriptor_init", ctypes.byref(raw), 1)
    assert raw.dtype == fmha.DType.BF16 and raw.part_strides.dim == 1 and raw.o_strides.dim == 1
    assert descriptor_key(d) != descriptor_key(fmha.make_descriptor(batch=2, num_q_heads=8, seqlen_q=5, head_dim=64))
    with pytest.raises(fmha.VersionMismatchError):
        fmha._lib.call("fmha_merge_descriptor_init", ctypes.byref(raw), 2)


@pytest.mark.parametrize(
    "fields, status, word",
    [
        (dict(num_parts=0), fmha.Status.INVALID_ARGUMENT, "num_parts"),
        (dict(num_parts=65), fmha.Status.INVALID_ARGUMENT, "num_parts"),
        (dict(head_dim=12), fmha.Status.NOT_SUPPORTED, "head_dim"),
        (dict(o_strides=(0, 64, 4, 1)), fmha.Status.MISALIGNED, "o_strides"),
    ],
)
def test_merge_plan_validation(fields, status, word) -> None:
    args = dict(batch=2, seqlen_q=5, num_heads=8, head_dim=64, num_parts=2)
    args.update(fields)
    with pytest.raises(fmha.FmhaError) as info:
        fmha.MergePlan(**args)
    assert info.value.status == status and word in info.value.message
    assert info.value.function == "fmha_create_merge_plan"


# ---------------------------------------------------------------- block tables
def test_check_block_table_lists() -> None:
    table = [[3, 1, 0, -1], [2, 7, 5, 4]]
    assert fmha.check_block_table(table, num_pages=8, page_size=16)[0] is False  # -1 used for 64 keys
    r = fmha.check_block_table(table, [33, 64], num_pages=8, page_size=16)  # seq 0 uses 3 pages
    assert r and r.status == fmha.Status.SUCCESS and r.message == ""
    r = fmha.check_block_table(table, [49, 64], num_pages=8, page_size=16)  # 49 keys: 4 pages
    assert not r and r.status == fmha.Status.INVALID_ARGUMENT
    assert "block_table[0][3]" in r.message
    r = fmha.check_block_table(table, [0, 64], num_pages=7, page_size=16)  # page 7 is out of range
    assert "block_table[1][1]" in r.message
    with pytest.raises(fmha.InvalidArgumentError, match="block_table\\[1\\]\\[1\\]"):
        r.raise_if_failed()
    r = fmha.check_block_table(table, [65, 1], num_pages=8, page_size=16)  # more keys than the table covers
    assert r.status == fmha.Status.INVALID_ARGUMENT and "seqlens_k" in r.message
    fmha.check_block_table(table, [48, 64], num_pages=8, page_size=16, seqlen_k=64).raise_if_failed()


def test_check_block_table_arrays() -> None:
    np = pytest.importorskip("numpy")
    table = np.arange(12, dtype=np.int64).reshape(3, 4)[:, ::-1]  # strided, int64: copied to int32
    assert fmha.check_block_table(table, num_pages=12, page_size=1)
    r = fmha.check_block_table(table, np.array([4, 4, 4]), num_pages=11, page_size=1)
    assert not r and "block_table[2][0] is 11" in r.message
    with pytest.raises(TypeError, match="integers"):
        fmha.check_block_table(table.astype(np.float32), num_pages=12, page_size=1)
    with pytest.raises(OverflowError):
        fmha.check_block_table(np.full((1, 1), 2**40), num_pages=12, page_size=1)


def test_check_block_table_torch_cpu() -> None:
    torch = pytest.importorskip("torch")
    table = torch.randperm(64).reshape(4, 16)
    assert fmha.check_block_table(table, torch.tensor([256, 0, 17, 1]), num_pages=64, page_size=16)
    table[2, 1] = 64
    r = fmha.check_block_table(table, torch.tensor([256, 0, 17, 1]), num_pages=64, page_size=16)
    assert not r and "block_table[2][1] is 64" in r.message


def test_check_block_table_with_descriptor() -> None:
    q = FakeCAI([2, 1, HQ, D])
    pages = FakeCAI([8, 16, HKV, D])
    desc = fmha.describe_with_kvcache(q, pages, pages, i32(2), block_table=i32(2, 4), out=q)
    assert fmha.check_block_table([[0, 1, 2, 3], [4, 5, 6, 7]], descriptor=desc)
    assert not fmha.check_block_table([[0, 1, 2, 3], [4, 5, 6, 8]], descriptor=desc)
    with pytest.raises(ValueError, match="the descriptor wants"):
        fmha.check_block_table([[0, 1, 2]], descriptor=desc)
    with pytest.raises(TypeError, match="not both"):
        fmha.check_block_table([[0, 1, 2, 3], [4, 5, 6, 7]], descriptor=desc, num_pages=8)
    dense = fmha.make_descriptor(batch=2, num_q_heads=8, seqlen_q=1, head_dim=128)
    r = fmha.check_block_table([[0]], descriptor=dense)
    assert r.status == fmha.Status.INVALID_ARGUMENT and "FMHA_FLAG_PAGED_KV" in r.message


def test_check_block_table_misuse() -> None:
    with pytest.raises(TypeError, match="num_pages= and page_size="):
        fmha.check_block_table([[0]])
    with pytest.raises(TypeError, match="host"):
        fmha.check_block_table(i32(2, 4), num_pages=8, page_size=16)
    with pytest.raises(ValueError, match="ragged"):
        fmha.check_block_table([[0, 1], [2]], num_pages=8, page_size=16)
    with pytest.raises(ValueError, match="seqlens_k must have shape"):
        fmha.check_block_table([[0, 1]], [1, 2], num_pages=8, page_size=16)
    with pytest.raises(TypeError, match="integers"):
        fmha.check_block_table([[0.5]], num_pages=8, page_size=16)
    with pytest.raises(OverflowError):
        fmha.check_block_table([[2**31]], num_pages=8, page_size=16)


# ---------------------------------------------------------------- attention() and plans
def test_attention_num_splits_in_descriptor() -> None:
    q, k = FakeCAI([B, 1, HQ, D]), FakeCAI([B, 4096, HKV, D])
    d = fmha.describe(q, k, k, out=q, num_splits=16, causal="bottom_right")
    assert d.num_splits == 16
    assert fmha.check_support(d).ok


def test_plan_info_has_num_splits() -> None:
    assert fmha.PlanInfo("k", "n", 0, 80, 80, False, 64, 64, 128, 0, 0).num_splits == 1
    assert [f[0] for f in fmha.FmhaPlanInfo._fields_][-2:] == ["num_splits", "reserved0"]
