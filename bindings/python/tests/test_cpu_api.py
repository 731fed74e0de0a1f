"""CPU tests of the Python API against the real libfmha (no GPU, no torch)."""

from __future__ import annotations

import ctypes
import pickle

import pytest

import fmha
from fmha import _cuda, tensors
from fmha.errors import error_for_status
from fmha.plan import PlanCache
from fmha.problem import descriptor_key, new_descriptor

from fakes import KDL_FLOAT, FakeCAI, FakeDLPack
from header_parser import Header

PROBLEM = dict(batch=2, num_q_heads=8, num_kv_heads=2, seqlen_q=128, seqlen_k=256, head_dim=128, dtype="bf16")

pytestmark = pytest.mark.usefixtures("lib")


# ---------------------------------------------------------------- introspection
def test_version_matches_header(header: Header) -> None:
    d = header.defines
    v = fmha.version()
    assert (v.major, v.minor, v.patch) == (d["FMHA_VERSION_MAJOR"], d["FMHA_VERSION_MINOR"], d["FMHA_VERSION_PATCH"])
    assert v.number == d["FMHA_VERSION_NUMBER"]
    assert fmha.version_string() == str(v)


def test_installed_distribution_version(header: Header) -> None:
    from importlib import metadata

    try:
        dist_version = metadata.version("fmha")
    except metadata.PackageNotFoundError:
        pytest.skip("fmha is imported from a source tree, not installed")
    assert dist_version == str(fmha.version())


def test_status_strings() -> None:
    for status in fmha.Status:
        assert fmha.status_string(status) == f"FMHA_STATUS_{status.name}"
    assert fmha.status_string(999) == "FMHA_STATUS_UNKNOWN"


def test_embedded_archs() -> None:
    archs = fmha.embedded_archs()
    assert isinstance(archs, tuple) and archs == tuple(sorted(archs))
    assert all(isinstance(a, int) and a >= 80 for a in archs)
    ptx = fmha.embedded_ptx_arch()
    assert ptx is None or ptx >= 80
    assert archs or ptx, "the build embeds neither cubins nor PTX"


def test_driver_version_is_none_or_positive() -> None:
    v = fmha.driver_version()
    assert v is None or v > 0


# ---------------------------------------------------------------- descriptors
def test_descriptor_init_defaults_documented_in_header() -> None:
    d = new_descriptor()
    assert d.version == fmha.FMHA_DESCRIPTOR_VERSION
    assert d.dtype == fmha.DType.BF16
    assert d.mask == fmha.Mask.NONE and d.kernel == fmha.KernelFamily.AUTO
    assert d.device == 0 and d.head_dim_v == 0 and d.softmax_scale == 0.0 and d.flags == 0
    for name in ("q_strides", "k_strides", "v_strides", "o_strides"):
        assert getattr(d, name).as_tuple() == (0, 0, 0, 1)


def test_make_descriptor_default_strides() -> None:
    d = fmha.make_descriptor(**PROBLEM)
    assert d.q_strides.as_tuple() == (128 * 8 * 128, 8 * 128, 128, 1)
    assert d.k_strides.as_tuple() == (256 * 2 * 128, 2 * 128, 128, 1)
    d = fmha.make_descriptor(**PROBLEM, layout="bhsd")
    assert d.q_strides.as_tuple() == (8 * 128 * 128, 128, 128 * 128, 1)
    assert d.o_strides.as_tuple() == (8 * 128 * 128, 128, 128 * 128, 1)


def test_make_descriptor_fields() -> None:
    d = fmha.make_descriptor(
        **PROBLEM, q_strides=(1, 2, 3), k_strides=(8, 16, 24, 1), softmax_scale=0.5,
        mask="bottom_right", write_lse=True, kernel="portable", device=3,
    )
    assert d.q_strides.as_tuple() == (1, 2, 3, 1)  # dim kept from init
    assert d.k_strides.as_tuple() == (8, 16, 24, 1)
    assert d.softmax_scale == 0.5
    assert d.mask == fmha.Mask.CAUSAL_BOTTOM_RIGHT
    assert d.flags & fmha.FMHA_FLAG_WRITE_LSE
    assert d.kernel == fmha.KernelFamily.PORTABLE and d.device == 3
    assert d.dtype == fmha.DType.BF16
    assert fmha.make_descriptor(**{**PROBLEM, "dtype": "float16"}).dtype == fmha.DType.FP16


def test_make_descriptor_rejects_python_misuse() -> None:
    with pytest.raises(TypeError, match="bfloat16 and float16 only"):
        fmha.make_descriptor(**{**PROBLEM, "dtype": "float32"})
    with pytest.raises(TypeError, match="batch must be an integer"):
        fmha.make_descriptor(**{**PROBLEM, "batch": 2.5})
    with pytest.raises(ValueError, match="ambiguous"):
        fmha.make_descriptor(**PROBLEM, mask=True)  # seqlen_q != seqlen_k
    assert fmha.make_descriptor(**{**PROBLEM, "seqlen_k": 128}, mask=True).mask == fmha.Mask.CAUSAL_TOP_LEFT
    with pytest.raises(ValueError, match="invalid mask"):
        fmha.make_descriptor(**PROBLEM, mask="diagonal")
    with pytest.raises(ValueError, match="softmax_scale=0"):
        fmha.make_descriptor(**PROBLEM, softmax_scale=0.0)
    with pytest.raises(ValueError, match="invalid kernel"):
        fmha.make_descriptor(**PROBLEM, kernel="fast")
    with pytest.raises(TypeError):
        fmha.make_descriptor(**PROBLEM, bogus=1)


def test_descriptor_key_covers_every_field() -> None:
    a = fmha.make_descriptor(**PROBLEM)
    b = fmha.make_descriptor(**PROBLEM)
    assert descriptor_key(a) == descriptor_key(b)
    b.o_strides.dim = 2
    assert descriptor_key(a) != descriptor_key(b)
    b = fmha.make_descriptor(**PROBLEM, device=1)
    assert descriptor_key(a) != descriptor_key(b)


# ---------------------------------------------------------------- check_support
def test_check_support_valid() -> None:
    result = fmha.check_support(**PROBLEM)
    assert result and result.ok and result.status == fmha.Status.SUCCESS and result.message == ""
    ok, status, message = result
    assert ok is True


@pytest.mark.parametrize("head_dim", [64, 96, 128, 256])
def test_check_support_head_dims(head_dim: int) -> None:
    assert fmha.check_support(**{**PROBLEM, "head_dim": head_dim}).ok


@pytest.mark.parametrize("scale", [float("inf"), float("nan"), -1.0])
def test_check_support_returns_the_verdict_on_a_bad_scale(scale: float) -> None:
    # A value the library rejects is its verdict to return, not an exception
    # of the Python side (only softmax_scale=0, which the descriptor cannot
    # express, raises).
    ok, status, message = fmha.check_support(**PROBLEM, softmax_scale=scale)
    assert not ok and status == fmha.Status.INVALID_ARGUMENT
    assert "softmax_scale" in message


def test_check_support_head_dim_80_not_supported() -> None:
    ok, status, message = fmha.check_support(**{**PROBLEM, "head_dim": 80})
    assert not ok
    assert status == fmha.Status.NOT_SUPPORTED
    assert "head_dim" in message


def test_check_support_gqa_ratio_invalid() -> None:
    result = fmha.check_support(**{**PROBLEM, "num_q_heads": 8, "num_kv_heads": 3})
    assert not result
    assert result.status == fmha.Status.INVALID_ARGUMENT
    assert "num_q_heads" in result.message or "num_kv_heads" in result.message


@pytest.mark.parametrize("field", ["batch", "seqlen_q", "seqlen_k", "num_q_heads", "num_kv_heads"])
def test_check_support_nonpositive_extent(field: str) -> None:
    result = fmha.check_support(**{**PROBLEM, field: 0})
    assert result.status == fmha.Status.INVALID_ARGUMENT
    assert field in result.message


def test_check_support_strided_last_dim() -> None:
    result = fmha.check_support(**PROBLEM, k_strides=(0, 0, 0, 2))
    assert not result.ok and "k_strides" in result.message


def test_check_support_arch() -> None:
    assert fmha.check_support(**PROBLEM, sm=90).ok
    old = fmha.check_support(**PROBLEM, sm=75)
    assert old.status == fmha.Status.NOT_SUPPORTED


def test_check_support_current_device_without_driver(has_driver: bool) -> None:
    if has_driver:
        pytest.skip("a CUDA driver is present: the no-driver answer cannot be observed")
    result = fmha.check_support(**PROBLEM, sm=fmha.SM_CURRENT_DEVICE)
    assert result.status == fmha.Status.NO_DRIVER and result.message


def test_check_support_with_descriptor() -> None:
    d = fmha.make_descriptor(**PROBLEM)
    assert fmha.check_support(d).ok
    with pytest.raises(TypeError):
        fmha.check_support(d, batch=1)


def test_check_support_version_mismatch() -> None:
    d = fmha.make_descriptor(**PROBLEM)
    d.version = 999
    result = fmha.check_support(d)
    assert result.status == fmha.Status.VERSION_MISMATCH


def test_descriptor_init_unknown_version_raises() -> None:
    with pytest.raises(fmha.VersionMismatchError) as info:
        fmha._lib.call("fmha_descriptor_init", ctypes.byref(fmha.FmhaDescriptor()), 999)
    assert info.value.status == fmha.Status.VERSION_MISMATCH
    assert info.value.function == "fmha_descriptor_init"


# ---------------------------------------------------------------- errors
def test_error_classes_cover_every_status() -> None:
    for status in fmha.Status:
        if status == fmha.Status.SUCCESS:
            continue
        err = error_for_status(int(status), "msg", "fmha_x")
        assert isinstance(err, fmha.FmhaError)
        assert type(err) is not fmha.FmhaError, f"no dedicated class for {status.name}"
        assert err.status is status and err.message == "msg"
        assert str(err) == f"fmha_x: FMHA_STATUS_{status.name}: msg"
    assert isinstance(error_for_status(1, ""), ValueError)
    assert isinstance(error_for_status(9, ""), MemoryError)
    unknown = error_for_status(77, "future")
    assert type(unknown) is fmha.FmhaError and unknown.status == 77


def test_errors_pickle() -> None:
    err = error_for_status(2, "head_dim 80", "fmha_create_plan")
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is fmha.NotSupportedError and copy.message == "head_dim 80" and copy.status == err.status


# ---------------------------------------------------------------- plans without a driver
def test_plan_invalid_problem_raises_with_message() -> None:
    with pytest.raises(fmha.InvalidArgumentError) as info:
        fmha.Plan(**{**PROBLEM, "num_kv_heads": 3})
    assert info.value.status == fmha.Status.INVALID_ARGUMENT
    assert "num_kv_heads" in info.value.message or "num_q_heads" in info.value.message
    with pytest.raises(fmha.NotSupportedError, match="head_dim"):
        fmha.Plan(**{**PROBLEM, "head_dim": 80})


def test_plan_without_driver_raises_no_driver(has_driver: bool) -> None:
    if has_driver:
        pytest.skip("a CUDA driver is present, so NO_DRIVER cannot be observed")
    with pytest.raises(fmha.NoDriverError) as info:
        fmha.Plan(**PROBLEM)
    err = info.value
    assert err.status == fmha.Status.NO_DRIVER
    assert err.function == "fmha_create_plan"
    assert err.message and err.message in str(err)


# ---------------------------------------------------------------- tensor adaptation
B, SQ, SK, HQ, HKV, D = 2, 40, 72, 8, 2, 128


def _qkv(layout: str = "bshd"):
    if layout == "bshd":
        return FakeCAI([B, SQ, HQ, D]), FakeCAI([B, SK, HKV, D]), FakeCAI([B, SK, HKV, D]), FakeCAI([B, SQ, HQ, D])
    return FakeCAI([B, HQ, SQ, D]), FakeCAI([B, HKV, SK, D]), FakeCAI([B, HKV, SK, D]), FakeCAI([B, HQ, SQ, D])


def test_describe_bshd() -> None:
    q, k, v, o = _qkv("bshd")
    d = fmha.describe(q, k, v, out=o, causal="bottom_right", scale=0.25)
    assert (d.batch, d.seqlen_q, d.seqlen_k, d.num_q_heads, d.num_kv_heads, d.head_dim) == (B, SQ, SK, HQ, HKV, D)
    assert d.head_dim_v == 0  # same as head_dim: left at the library default
    assert d.dtype == fmha.DType.FP16
    assert d.q_strides.as_tuple() == (SQ * HQ * D, HQ * D, D, 1)
    assert d.k_strides.as_tuple() == (SK * HKV * D, HKV * D, D, 1)
    assert d.o_strides.as_tuple() == d.q_strides.as_tuple()
    assert d.mask == fmha.Mask.CAUSAL_BOTTOM_RIGHT and d.softmax_scale == 0.25
    assert not d.flags & fmha.FMHA_FLAG_WRITE_LSE
    assert fmha.check_support(d).ok


def test_describe_bhsd() -> None:
    q, k, v, o = _qkv("bhsd")
    d = fmha.describe(q, k, v, out=o, layout="bhsd")
    assert (d.seqlen_q, d.num_q_heads) == (SQ, HQ)
    assert d.q_strides.as_tuple() == (HQ * SQ * D, D, SQ * D, 1)
    assert d.k_strides.as_tuple() == (HKV * SK * D, D, SK * D, 1)
    assert fmha.check_support(d).ok


def test_describe_transposed_view_is_bshd() -> None:
    # A BHSD buffer seen as BSHD through a permutation (what .transpose(1, 2) gives).
    q = FakeCAI([B, HQ, SQ, D]).permute(0, 2, 1, 3)
    k = FakeCAI([B, HKV, SK, D]).permute(0, 2, 1, 3)
    v = FakeCAI([B, HKV, SK, D]).permute(0, 2, 1, 3)
    o = FakeCAI([B, SQ, HQ, D])
    d = fmha.describe(q, k, v, out=o)
    assert d.q_strides.as_tuple() == (HQ * SQ * D, D, SQ * D, 1)


def test_describe_sliced_view() -> None:
    base = FakeCAI([B, SQ + 5, HQ + 3, D + 16])
    q = base.view([slice(None), slice(2, 2 + SQ), slice(1, 1 + HQ), slice(8, 8 + D)])
    k = FakeCAI([B, SK, HKV, D])
    d = fmha.describe(q, k, k, out=FakeCAI([B, SQ, HQ, D]))
    assert d.q_strides.as_tuple() == ((SQ + 5) * (HQ + 3) * (D + 16), (HQ + 3) * (D + 16), D + 16, 1)
    assert q.ptr - base.ptr == 2 * (2 * (HQ + 3) * (D + 16) + (D + 16) + 8)
    assert fmha.check_support(d).ok


def test_describe_size_one_dims_get_valid_strides() -> None:
    # seqlen_q = 1 with a producer-reported stride of 3 for that dim (irrelevant, but odd).
    q = FakeCAI([B, 1, HQ, D], strides=[HQ * D, 3, D, 1])
    k = FakeCAI([B, SK, HKV, D])
    o = FakeCAI([B, 1, HQ, D], strides=[HQ * D, 0, D, 1])
    d = fmha.describe(q, k, k, out=o)
    for s in (d.q_strides, d.o_strides):
        assert s.seq > 0 and s.seq % 8 == 0
    assert fmha.check_support(d).ok


def test_describe_head_dim_v() -> None:
    q, k, _, _ = _qkv()
    v = FakeCAI([B, SK, HKV, 64])
    o = FakeCAI([B, SQ, HQ, 64])
    d = fmha.describe(q, k, v, out=o)
    assert d.head_dim == D and d.head_dim_v == 64
    assert d.v_strides.as_tuple() == (SK * HKV * 64, HKV * 64, 64, 1)


def test_describe_with_lse() -> None:
    q, k, v, o = _qkv()
    lse = FakeCAI([B, HQ, SQ], typestr="<f4")
    d = fmha.describe(q, k, v, out=o, lse_out=lse)
    assert d.flags & fmha.FMHA_FLAG_WRITE_LSE


def test_attention_checks_before_calling_the_library() -> None:
    q, k, v, o = _qkv()
    with pytest.raises(TypeError, match="float32"):
        fmha.attention(FakeCAI([B, SQ, HQ, D], typestr="<f4"), k, v, out=o)
    with pytest.raises(TypeError, match="k has dtype float32"):
        fmha.attention(q, FakeCAI([B, SK, HKV, D], typestr="<f4"), v, out=o)
    with pytest.raises(TypeError, match="one dtype"):
        fmha.attention(q, FakeDLPack([B, SK, HKV, D]), v, out=o)  # fp16 q, bf16 k
    with pytest.raises(ValueError, match="out= is required"):
        fmha.attention(q, k, v)
    with pytest.raises(ValueError, match="lse_out= is required"):
        fmha.attention(q, k, v, out=o, return_lse=True)
    with pytest.raises(ValueError, match="batch sizes differ"):
        fmha.attention(q, FakeCAI([B + 1, SK, HKV, D]), v, out=o)
    with pytest.raises(ValueError, match="same sequence length"):
        fmha.attention(q, k, FakeCAI([B, SK + 1, HKV, D]), out=o)
    with pytest.raises(ValueError, match="same head_dim"):
        fmha.attention(q, FakeCAI([B, SK, HKV, 64]), v, out=o)
    with pytest.raises(ValueError, match="must be 4-D"):
        fmha.attention(FakeCAI([B, SQ, HQ * D]), k, v, out=o)
    with pytest.raises(ValueError, match="out must have shape"):
        fmha.attention(q, k, v, out=FakeCAI([B, SQ, HQ, 64]))
    with pytest.raises(ValueError, match="read-only"):
        fmha.attention(q, k, v, out=FakeCAI([B, SQ, HQ, D], readonly=True))
    with pytest.raises(ValueError, match="lse_out must be"):
        fmha.attention(q, k, v, out=o, lse_out=FakeCAI([B, SQ, HQ], typestr="<f4"))
    with pytest.raises(ValueError, match="different devices"):
        fmha.attention(FakeCAI([B, SQ, HQ, D], device=0), FakeCAI([B, SK, HKV, D], device=1), v, out=o)
    # Every buffer the kernel touches must be on q's device: the library
    # gets bare addresses and could not tell.
    on0 = [FakeCAI(t.shape, device=0) for t in (q, k, v, o)]
    with pytest.raises(ValueError, match="lse_out is on device 1, q on device 0"):
        fmha.attention(*on0[:3], out=on0[3], lse_out=FakeCAI([B, HQ, SQ], typestr="<f4", device=1))
    with pytest.raises(ValueError, match="sinks is on device 1, q on device 0"):
        fmha.attention(*on0[:3], out=on0[3], sinks=FakeCAI([HQ], typestr="<f4", device=1))
    with pytest.raises(ValueError, match="invalid layout"):
        fmha.attention(q, k, v, out=o, layout="sbhd")
    with pytest.raises(TypeError, match="expected a torch.Tensor"):
        fmha.attention([1, 2], k, v, out=o)


def test_attention_library_errors_carry_the_message() -> None:
    q = FakeCAI([B, SQ, HQ, 80])
    k = FakeCAI([B, SK, HKV, 80])
    with pytest.raises(fmha.NotSupportedError, match="head_dim"):
        fmha.attention(q, k, k, out=FakeCAI([B, SQ, HQ, 80]))
    q, k, v, o = _qkv()
    strided = FakeCAI([B, SK, HKV, D], strides=[SK * HKV * D * 2, HKV * D * 2, D * 2, 2])
    with pytest.raises(fmha.FmhaError, match="k_strides"):
        fmha.attention(q, strided, v, out=o)


def test_attention_without_driver_raises_no_driver(has_driver: bool) -> None:
    if has_driver:
        pytest.skip("a CUDA driver is present, so NO_DRIVER cannot be observed")
    q, k, v, o = _qkv()
    with pytest.raises(fmha.NoDriverError):
        fmha.attention(q, k, v, out=o, causal="top_left")


def test_dlpack_view() -> None:
    t = FakeDLPack([2, 3, 4, 64], strides=[3 * 4 * 128, 4 * 128, 128, 1], byte_offset=256)
    view = tensors.view(t, "q", stream=0)
    assert view.kind == "dlpack"
    assert view.dtype_name == "bfloat16" and view.itemsize == 2
    assert view.shape == (2, 3, 4, 64) and view.strides == (1536, 512, 128, 1)
    assert view.ptr == t.ptr + 256 and view.device == 0
    assert t.streams == [1], "legacy default stream must be passed to DLPack as 1"
    tensors.view(t, "q", stream=0x1234)
    assert t.streams[-1] == 0x1234


def test_dlpack_compact_strides_and_describe() -> None:
    q = FakeDLPack([B, SQ, HQ, D])  # NULL strides: compact row-major
    k = FakeDLPack([B, SK, HKV, D])
    o = FakeDLPack([B, SQ, HQ, D])
    d = fmha.describe(q, k, k, out=o)
    assert d.dtype == fmha.DType.BF16
    assert d.q_strides.as_tuple() == (SQ * HQ * D, HQ * D, D, 1)


def test_dlpack_rejects_cpu_and_other_dtypes() -> None:
    with pytest.raises(ValueError, match="CUDA device"):
        tensors.view(FakeDLPack([1, 1, 1, 64], device=(1, 0)), "q")
    q = FakeDLPack([B, SQ, HQ, D], code=KDL_FLOAT, bits=32)
    with pytest.raises(TypeError, match="float32"):
        fmha.attention(q, q, q, out=q)


def test_numpy_array_is_rejected_clearly() -> None:
    np = pytest.importorskip("numpy")
    a = np.zeros((1, 1, 1, 64), dtype=np.float16)
    with pytest.raises((TypeError, ValueError)):
        fmha.attention(a, a, a, out=a)


def test_cai_view_strides_and_pointer() -> None:
    base = FakeCAI([4, 8, 16, 64])
    v = tensors.view(base.view([slice(1, 3), slice(2, 6)]), "q")
    assert v.shape == (2, 4, 16, 64) and v.strides == (8 * 16 * 64, 16 * 64, 64, 1)
    assert v.ptr == base.ptr + 2 * (1 * 8 * 16 * 64 + 2 * 16 * 64)
    assert tensors.nbytes(v) == 2 * (1 + 1 * 8192 + 3 * 1024 + 15 * 64 + 63)


def test_data_pointer() -> None:
    assert tensors.data_pointer(None) == (0, None)
    assert tensors.data_pointer(4096) == (4096, None)
    assert tensors.data_pointer(FakeCAI([1], ptr=0x1000))[0] == 0x1000
    with pytest.raises(ValueError):
        tensors.data_pointer(-1)


def test_data_pointer_rejects_addresses_beyond_64_bits() -> None:
    # ctypes keeps only the low 64 bits of an int: 2**64 + 0x1000 would reach
    # the library as the valid-looking address 0x1000.
    assert tensors.data_pointer(2**64 - 16) == (2**64 - 16, None)
    with pytest.raises(ValueError, match="64 bits"):
        tensors.data_pointer(2**64 + 0x1000, "q")


# ---------------------------------------------------------------- streams
def test_stream_handles() -> None:
    class TorchLike:
        cuda_stream = 0xABC

    class CupyLike:
        ptr = 0xDEF

    class Protocol:
        def __cuda_stream__(self):
            return (0, 0x123)

    assert _cuda.stream_handle(None) == 0
    assert _cuda.stream_handle(7) == 7
    assert _cuda.stream_handle(ctypes.c_void_p(0x55)) == 0x55
    assert _cuda.stream_handle(ctypes.c_void_p()) == 0
    assert _cuda.stream_handle(TorchLike()) == 0xABC
    assert _cuda.stream_handle(CupyLike()) == 0xDEF
    assert _cuda.stream_handle(Protocol()) == 0x123
    with pytest.raises(TypeError):
        _cuda.stream_handle(True)
    with pytest.raises(TypeError):
        _cuda.stream_handle("stream")
    assert _cuda.resolve_stream(None, FakeCAI([1])) == 0
    assert _cuda.resolve_stream(5, FakeCAI([1])) == 5


def test_stream_handle_rejects_values_beyond_64_bits() -> None:
    # A CUstream is a pointer: ctypes would pass 2**64 + 0x10 on as stream 0x10.
    assert _cuda.stream_handle(2**64 - 1) == 2**64 - 1
    with pytest.raises(ValueError, match="stream"):
        _cuda.stream_handle(2**64 + 0x10)


# ---------------------------------------------------------------- plan cache
class _FakePlan:
    created = 0

    def __init__(self, descriptor) -> None:
        type(self).created += 1
        self.descriptor = descriptor


def test_plan_cache_lru(monkeypatch) -> None:
    import fmha.plan as plan_mod

    monkeypatch.setattr(plan_mod, "Plan", _FakePlan)
    cache = PlanCache(maxsize=2)
    d1 = fmha.make_descriptor(**PROBLEM)
    d2 = fmha.make_descriptor(**PROBLEM, mask="top_left")
    d3 = fmha.make_descriptor(**PROBLEM, device=1)
    p1 = cache.get(d1)
    assert cache.get(fmha.make_descriptor(**PROBLEM)) is p1
    p2 = cache.get(d2)
    cache.get(d1)  # d1 becomes most recent
    cache.get(d3)  # evicts d2
    assert cache.info().size == 2
    assert cache.get(d1) is p1
    assert cache.get(d2) is not p2
    info = cache.info()
    assert (info.hits, info.misses) == (3, 4)
    cache.resize(0)
    assert len(cache) == 0
    assert cache.get(d1) is not cache.get(d1)  # caching disabled
    cache.clear()
    assert cache.info() == fmha.CacheInfo(0, 0, 0, 0)


def test_plan_cache_last_used(monkeypatch) -> None:
    """last_used() follows lookups, creations, remembered-form hits and
    uncached plans; clear() forgets it (fmha.last_plan() reads it)."""
    import fmha.plan as plan_mod

    monkeypatch.setattr(plan_mod, "Plan", _FakePlan)
    cache = PlanCache(maxsize=4)
    assert cache.last_used() is None
    p1 = cache.get(fmha.make_descriptor(**PROBLEM))
    assert cache.last_used() is p1
    p2 = cache.get(fmha.make_descriptor(**PROBLEM, mask="top_left"))
    assert cache.last_used() is p2
    assert cache.get(fmha.make_descriptor(**PROBLEM)) is p1 and cache.last_used() is p1
    cache.count_hit(p2)  # a remembered call form holding p2
    assert cache.last_used() is p2 and cache.info().hits == 2
    uncached = cache.get(fmha.make_descriptor(**PROBLEM), cache=False)
    assert uncached is not p1 and cache.last_used() is uncached
    assert cache.info().hits == 2 and cache.info().size == 2  # neither counted nor kept
    cache.resize(0)
    p3 = cache.get(fmha.make_descriptor(**PROBLEM, device=1))  # not kept, still the last served
    assert cache.last_used() is p3
    cache.clear()
    assert cache.last_used() is None
