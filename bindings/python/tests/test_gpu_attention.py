"""GPU accuracy tests: fmha.attention against a float64 reference.

The "2x rule": for each case, the max abs error of libfmha (bf16/fp16) vs a
float64 reference computed from the same (upcast) inputs must be at most
twice the error of torch's own same-precision SDPA vs that reference, plus
a small absolute floor (1e-5 * max|ref|). The ratios are summarized at the
end of the run (see conftest.py).

Inputs derive from $FMHA_TEST_SEED (seeds.py; the pytest header and summary
print it, so FMHA_TEST_SEED=N repeats a run).

Run: FMHA_LIBRARY=/path/to/libfmha.so python3 -m pytest bindings/python/tests -v
Skipped, with the reason shown, when torch or a CUDA device is missing.
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Optional, Tuple

import pytest
from gpu_support import CAI, DLPack, require_torch_cuda
from seeds import seed_for

torch = require_torch_cuda()

import torch.nn.functional as F  # noqa: E402

import fmha  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("lib")]

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
HEAD_DIMS = [64, 128, 256]
CAUSAL = ["none", "top_left", "bottom_right"]
GQA = [1, 4]
LENGTHS = [(1, 1), (17, 33), (128, 128), (1000, 517), (300, 1000)]
LAYOUTS = ["bshd", "bhsd", "sliced"]
BATCH = 2
KV_HEADS = 2
DEVICE = torch.device("cuda", torch.cuda.current_device())


# ---------------------------------------------------------------- references
def visible(sq: int, sk: int, causal: str) -> Optional[torch.Tensor]:
    """[sq, sk] bool: may query row i see key j? None for no mask."""
    if causal == "none":
        return None
    i = torch.arange(sq, device=DEVICE)[:, None]
    j = torch.arange(sk, device=DEVICE)[None, :]
    if causal == "top_left":
        return j <= i
    return j <= i + (sk - sq)


def empty_rows(sq: int, sk: int, causal: str) -> torch.Tensor:
    """[sq] bool: rows that see no key at all."""
    vis = visible(sq, sk, causal)
    if vis is None:
        return torch.zeros(sq, dtype=torch.bool, device=DEVICE)
    return ~vis.any(dim=1)


def expand_kv(t: torch.Tensor, num_q_heads: int) -> torch.Tensor:
    """[b, hkv, s, d] -> [b, hq, s, d]: q head h uses kv head h // (hq / hkv)."""
    return t.repeat_interleave(num_q_heads // t.shape[1], dim=1)


def reference(q, k, v, causal: str, scale: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """Float64 attention on BHSD inputs. Rows that see no key: O = 0, LSE = -inf."""
    hq = q.shape[1]
    q64, k64, v64 = q.double(), expand_kv(k.double(), hq), expand_kv(v.double(), hq)
    scores = torch.matmul(q64, k64.transpose(-1, -2)) * scale
    vis = visible(q.shape[2], k.shape[2], causal)
    if vis is not None:
        scores = scores.masked_fill(~vis, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    p = torch.exp(scores - lse.unsqueeze(-1))
    p = torch.nan_to_num(p, nan=0.0)  # -inf - -inf on rows with no key
    return torch.matmul(p, v64), lse


def _lowp_backends():
    from torch.nn.attention import SDPBackend

    names = ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION"]
    return [getattr(SDPBackend, n) for n in names if hasattr(SDPBackend, n)]


def torch_same_precision(q, k, v, causal: str, scale: float) -> torch.Tensor:
    """torch SDPA in the inputs' precision (BHSD), as float64; NaN rows -> 0.

    The fused backends (flash / memory-efficient / cuDNN) are preferred: like
    libfmha they round P to the input precision, so they are the fair
    "same precision" yardstick. The math backend (which upcasts) is only used
    when none of them applies.
    """
    hq = q.shape[1]
    k, v = expand_kv(k, hq), expand_kv(v, hq)
    with warnings.catch_warnings():
        # causal_lower_right warns that rows see nothing when seqlen_q > seqlen_k.
        warnings.simplefilter("ignore")
        kwargs = {"scale": scale}
        if causal == "top_left":
            kwargs["is_causal"] = True  # torch's is_causal is top-left aligned
        elif causal == "bottom_right":
            try:
                from torch.nn.attention.bias import causal_lower_right

                kwargs["attn_mask"] = causal_lower_right(q.shape[2], k.shape[2])
            except ImportError:
                kwargs["attn_mask"] = visible(q.shape[2], k.shape[2], causal)
        try:
            from torch.nn.attention import sdpa_kernel

            with sdpa_kernel(_lowp_backends()):
                out = F.scaled_dot_product_attention(q, k, v, **kwargs)
        except Exception:  # no fused backend for this case: let torch choose
            out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    return torch.nan_to_num(out.double(), nan=0.0)


# ---------------------------------------------------------------- inputs
def make(layout: str, seqlen: int, heads: int, dim: int, dtype, gen, fill: Optional[float] = None):
    """(tensor passed to fmha, its BHSD view, the allocation holding it)."""
    def alloc(*shape):
        if fill is None:
            return torch.randn(*shape, generator=gen, device=DEVICE, dtype=torch.float32).to(dtype)
        return torch.full(shape, fill, device=DEVICE, dtype=dtype)

    if layout == "bshd":
        t = alloc(BATCH, seqlen, heads, dim)
        return t, t.transpose(1, 2), t
    if layout == "bhsd":
        t = alloc(BATCH, heads, seqlen, dim)
        return t, t, t
    base = alloc(BATCH, seqlen + 5, heads + 3, dim + 16)
    t = base[:, 2 : 2 + seqlen, 1 : 1 + heads, 8 : 8 + dim]
    return t, t.transpose(1, 2), base


def fmha_layout(layout: str) -> str:
    return "bhsd" if layout == "bhsd" else "bshd"


def max_err(x: torch.Tensor, ref: torch.Tensor, rows: torch.Tensor) -> float:
    """Max |x - ref| over query rows `rows` ([sq] bool) of BHSD tensors."""
    if not bool(rows.any()):
        return 0.0
    return float((x.double() - ref)[:, :, rows, :].abs().max())


CASES = list(itertools.product(DTYPES, HEAD_DIMS, CAUSAL, GQA, LENGTHS, LAYOUTS))


def case_id(case) -> str:
    dtype, d, causal, gqa, (sq, sk), layout = case
    return f"{dtype}-d{d}-{causal}-gqa{gqa}-{sq}x{sk}-{layout}"


def run_case(dtype_name, d, causal, gqa, sq, sk, layout, ratio_log, kernel="auto", seed=0):
    dtype = DTYPES[dtype_name]
    hq = KV_HEADS * gqa
    gen = torch.Generator(device=DEVICE).manual_seed(
        seed_for("run_case", dtype_name, d, causal, gqa, sq, sk, layout, kernel, seed))
    q, q4, _ = make(layout, sq, hq, d, dtype, gen)
    k, k4, _ = make(layout, sk, KV_HEADS, d, dtype, gen)
    v, v4, _ = make(layout, sk, KV_HEADS, d, dtype, gen)
    out, out4, out_base = make(layout, sq, hq, d, dtype, gen, fill=float("nan"))

    result = fmha.attention(
        q, k, v, causal=False if causal == "none" else causal, return_lse=True,
        layout=fmha_layout(layout), out=out, kernel=kernel,
    )
    assert result[0] is out
    lse = result[1]
    torch.cuda.synchronize()

    scale = 1.0 / math.sqrt(d)
    ref_o, ref_lse = reference(q4, k4, v4, causal, scale)
    low = torch_same_precision(q4, k4, v4, causal, scale)
    empty = empty_rows(sq, sk, causal)
    full = ~empty

    assert not torch.isnan(out4[:, :, full, :]).any(), "output has NaN (rows left unwritten?)"
    err_fmha = max_err(out4, ref_o, full)
    err_torch = max_err(low, ref_o, full)
    floor = 1e-5 * float(ref_o.abs().max())
    ratio = err_fmha / max(err_torch, floor, 1e-30)
    ratio_log(ratio, err_fmha, err_torch)
    print(f"ratio {ratio:.3f}: fmha {err_fmha:.3e}, torch {err_torch:.3e}")
    assert err_fmha <= 2.0 * err_torch + floor, f"2x rule broken: fmha {err_fmha:.3e} vs torch {err_torch:.3e}"

    # Rows that see no key: O == 0 and LSE == -inf exactly.
    if bool(empty.any()):
        assert bool((out4[:, :, empty, :] == 0).all()), "rows with no visible key must be 0"
        assert bool(torch.isneginf(lse[:, :, empty]).all()), "rows with no visible key must have LSE -inf"

    # LSE: float32 [batch, num_q_heads, seqlen_q], contiguous.
    assert lse.dtype == torch.float32 and lse.shape == (BATCH, hq, sq) and lse.is_contiguous()
    lse_err = (lse.double() - ref_lse)[:, :, full].abs()
    tol = 1e-4 * ref_lse[:, :, full].abs().clamp_min(1.0)
    assert bool((lse_err <= tol).all()), f"LSE error {float(lse_err.max()):.3e}"

    if layout == "sliced":  # nothing written outside the view
        outside = torch.ones_like(out_base, dtype=torch.bool)
        outside[:, 2 : 2 + sq, 1 : 1 + hq, 8 : 8 + d] = False
        assert bool(torch.isnan(out_base[outside]).all()), "wrote outside the output view"


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_attention_matches_reference(case, ratio_log) -> None:
    dtype, d, causal, gqa, (sq, sk), layout = case
    run_case(dtype, d, causal, gqa, sq, sk, layout, ratio_log)


KERNEL_CASES = list(
    itertools.product(["portable", "hopper"], DTYPES, [64, 96, 128, 256], CAUSAL, [(17, 33), (1000, 517), (300, 1000)])
)


@pytest.mark.parametrize(
    "case", KERNEL_CASES, ids=[f"{k}-{dt}-d{d}-{c}-{sq}x{sk}" for k, dt, d, c, (sq, sk) in KERNEL_CASES]
)
def test_each_kernel_family(case, ratio_log) -> None:
    kernel, dtype, d, causal, (sq, sk) = case
    desc = fmha.make_descriptor(
        batch=BATCH, num_q_heads=KV_HEADS * 4, num_kv_heads=KV_HEADS, seqlen_q=sq, seqlen_k=sk,
        head_dim=d, dtype=dtype, kernel=kernel,
    )
    sm = torch.cuda.get_device_capability(DEVICE)
    support = fmha.check_support(desc, sm=sm[0] * 10 + sm[1])
    if not support and support.status in (fmha.Status.NOT_SUPPORTED, fmha.Status.NO_KERNEL_IMAGE):
        pytest.skip(f"{kernel} kernel not available here: {support.message}")
    run_case(dtype, d, causal, 4, sq, sk, "bshd", ratio_log, kernel=kernel, seed=1)


# ---------------------------------------------------------------- API behaviour on GPU
def _qkv(dtype=torch.bfloat16, sq=64, sk=96, hq=8, hkv=2, d=128, seed=3):
    gen = torch.Generator(device=DEVICE).manual_seed(seed_for("qkv", str(dtype), sq, sk, hq, hkv, d, seed))
    mk = lambda *s: torch.randn(*s, generator=gen, device=DEVICE, dtype=torch.float32).to(dtype)  # noqa: E731
    return mk(2, sq, hq, d), mk(2, sk, hkv, d), mk(2, sk, hkv, d)


def test_allocates_output_and_lse() -> None:
    q, k, v = _qkv()
    out = fmha.attention(q, k, v)
    assert out.shape == q.shape and out.dtype == q.dtype and out.device == q.device
    out2, lse = fmha.attention(q, k, v, return_lse=True)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, out2)
    assert lse.shape == (2, 8, 64) and lse.dtype == torch.float32


def test_bhsd_equals_bshd_on_same_data() -> None:
    q, k, v = _qkv()
    a = fmha.attention(q, k, v, causal="bottom_right")
    b = fmha.attention(
        q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous(), v.transpose(1, 2).contiguous(),
        causal="bottom_right", layout="bhsd",
    )
    c = fmha.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal="bottom_right", layout="bhsd")
    torch.cuda.synchronize()
    # Same data, different strides: the same math (a different kernel may be
    # picked for other strides, hence dtype tolerances rather than equality).
    torch.testing.assert_close(a, b.transpose(1, 2))
    torch.testing.assert_close(a, c.transpose(1, 2))


def test_explicit_scale() -> None:
    q, k, v = _qkv(sq=33, sk=33)
    out, lse = fmha.attention(q, k, v, scale=0.3, causal=True, return_lse=True)
    torch.cuda.synchronize()
    ref_o, ref_lse = reference(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), "top_left", 0.3)
    low = torch_same_precision(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), "top_left", 0.3)
    rows = torch.ones(33, dtype=torch.bool, device=DEVICE)
    err, err_t = max_err(out.transpose(1, 2), ref_o, rows), max_err(low, ref_o, rows)
    assert err <= 2 * err_t + 1e-5 * float(ref_o.abs().max())
    torch.testing.assert_close(lse.double(), ref_lse, rtol=1e-4, atol=1e-4)


def test_plan_cache_hits() -> None:
    fmha.clear_plan_cache()
    q, k, v = _qkv()
    fmha.attention(q, k, v)
    fmha.attention(q, k, v)
    fmha.attention(q, k, v, causal="top_left")
    info = fmha.plan_cache_info()
    assert (info.misses, info.hits, info.size) == (2, 1, 2)


def test_plan_object() -> None:
    q, k, v = _qkv()
    # NaN-filled: a run that writes nothing must not pass on a reused block
    # that happens to hold an earlier test's output.
    o = torch.full_like(q, float("nan"))
    lse = torch.full((2, 8, 64), float("nan"), device=DEVICE, dtype=torch.float32)
    with fmha.Plan(fmha.describe(q, k, v, out=o, return_lse=True)) as plan:
        info = plan.info
        major, minor = torch.cuda.get_device_capability(DEVICE)
        assert info.device_sm == major * 10 + minor
        assert info.device == DEVICE.index
        assert info.kernel_name and isinstance(info.kernel_family, fmha.KernelFamily)
        assert info.kernel_family != fmha.KernelFamily.AUTO
        assert info.workspace_bytes == plan.workspace_size
        assert info.tile_m > 0 and info.tile_n > 0 and info.threads_per_cta > 0
        ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device=DEVICE)
        plan.run(q, k, v, o, lse=lse, workspace=ws)
        with pytest.raises(ValueError, match="writes LSE"):
            plan.run(q, k, v, o)
        torch.cuda.synchronize()
    assert plan.closed
    with pytest.raises(ValueError, match="closed"):
        plan.run(q, k, v, o, lse=lse)
    expected, expected_lse = fmha.attention(q, k, v, return_lse=True)
    torch.cuda.synchronize()
    torch.testing.assert_close(o, expected)
    torch.testing.assert_close(lse, expected_lse)


def test_plan_run_with_raw_pointers() -> None:
    q, k, v = _qkv()
    o = torch.full_like(q, float("nan"))
    with fmha.Plan(fmha.describe(q, k, v, out=o)) as plan:
        ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device=DEVICE)
        plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), workspace=ws.data_ptr(),
                 stream=torch.cuda.current_stream().cuda_stream)
    expected = fmha.attention(q, k, v)
    torch.cuda.synchronize()
    torch.testing.assert_close(o, expected)


def test_side_stream() -> None:
    q, k, v = _qkv()
    expected = fmha.attention(q, k, v)
    out = torch.full_like(q, float("nan"))
    out2 = torch.full_like(q, float("nan"))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())  # inputs and NaN fills are ready
    with torch.cuda.stream(side):
        fmha.attention(q, k, v, out=out)  # torch's current stream = side
    fmha.attention(q, k, v, out=out2, stream=side)
    side.synchronize()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(out2, expected)


def test_cuda_graph_capture() -> None:
    q, k, v = _qkv()
    out = torch.empty_like(q)
    expected = fmha.attention(q, k, v)  # also creates (and caches) the plan
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fmha.attention(q, k, v, out=out)  # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fmha.attention(q, k, v, out=out)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected)


def test_cuda_array_interface_inputs() -> None:
    q, k, v = _qkv(dtype=torch.float16)
    expected, expected_lse = fmha.attention(q, k, v, causal="bottom_right", return_lse=True)
    out = torch.full_like(q, float("nan"))
    lse = torch.empty_like(expected_lse)
    ret = fmha.attention(
        CAI(q), CAI(k), CAI(v), causal="bottom_right", out=CAI(out), lse_out=CAI(lse), return_lse=True
    )
    torch.cuda.synchronize()
    assert ret[0].t is out and ret[1].t is lse
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(lse, expected_lse)


def test_dlpack_inputs() -> None:
    q, k, v = _qkv(dtype=torch.bfloat16)
    expected = fmha.attention(q, k, v, causal="top_left")
    out = torch.full_like(q, float("nan"))
    fmha.attention(DLPack(q), DLPack(k), DLPack(v), causal="top_left", out=DLPack(out))
    torch.cuda.synchronize()
    torch.testing.assert_close(out, expected)


def test_rejects_bad_tensors() -> None:
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="bfloat16 and float16 only"):
        fmha.attention(q.float(), k.float(), v.float())
    with pytest.raises(ValueError, match="CUDA device"):
        fmha.attention(q.cpu(), k.cpu(), v.cpu())
    base = torch.randn(2, 64, 8, 136, device=DEVICE).to(torch.bfloat16)
    with pytest.raises(fmha.MisalignedError):
        fmha.attention(base[..., 1:129], k, v)  # pointer 2 bytes off 16-byte alignment
    base = torch.randn(2, 64, 8, 132, device=DEVICE).to(torch.bfloat16)
    with pytest.raises(fmha.MisalignedError, match="q_strides"):
        fmha.attention(base[..., :128], k, v)  # head stride 132 is not a multiple of 8
    with pytest.raises(fmha.FmhaError, match="q_strides.dim"):
        fmha.attention(torch.randn(2, 64, 8, 256, device=DEVICE).to(torch.bfloat16)[..., ::2], k, v)
    with pytest.raises(fmha.NotSupportedError, match="head_dim"):
        fmha.attention(*_qkv(d=80))
    with pytest.raises(fmha.InvalidArgumentError, match="num_q_heads|num_kv_heads"):
        fmha.attention(*_qkv(hq=6, hkv=4))


def test_fully_masked_rows_decode_shape() -> None:
    # Bottom-right with seqlen_q > seqlen_k: the first rows see nothing.
    q, k, v = _qkv(sq=40, sk=8)
    # NaN-filled outputs (torch.empty memory is often zero: unwritten rows
    # would pass the == 0 check), inside NaN guard bands of 64 elements.
    guard = 64
    out_buf = torch.full((q.numel() + 2 * guard,), float("nan"), dtype=q.dtype, device=DEVICE)
    lse_buf = torch.full((2 * 8 * 40 + 2 * guard,), float("nan"), dtype=torch.float32, device=DEVICE)
    out = out_buf[guard:-guard].view(q.shape)
    lse = lse_buf[guard:-guard].view(2, 8, 40)
    res = fmha.attention(q, k, v, causal="bottom_right", return_lse=True, out=out, lse_out=lse)
    torch.cuda.synchronize()
    assert res[0] is out and res[1] is lse
    assert bool((out[:, :32] == 0).all()) and bool(torch.isneginf(lse[:, :, :32]).all())
    assert bool(torch.isfinite(lse[:, :, 32:]).all())
    assert not torch.isnan(out).any(), "output rows left unwritten"
    for buf in (out_buf, lse_buf):
        assert bool(torch.isnan(buf[:guard]).all()) and bool(torch.isnan(buf[-guard:]).all()), "wrote outside the output"
