"""Remembered call forms (fmha/_fastcall.py) on the GPU.

A call whose arguments have the shapes, strides, dtypes, devices and options
of an earlier successful call skips the checked path and only reads the new
tensors' addresses. Every test here runs a form twice on different data and
compares the second (remembered) result bitwise with the checked path on
that same data (the kernels are deterministic), so a remembered form that
kept an old address or dropped an argument fails.

Run: FMHA_LIBRARY=/path/to/libfmha.so python3 -m pytest bindings/python/tests -v
"""

from __future__ import annotations

import math
from typing import Any, Callable, Tuple

import pytest
from gpu_support import require_torch_cuda
from seeds import seed_for

torch = require_torch_cuda()

import fmha  # noqa: E402
from fmha import api as fmha_api  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("lib")]

DEVICE = torch.device("cuda", torch.cuda.current_device())


def randn(*shape: int, seed: int, dtype=torch.bfloat16) -> torch.Tensor:
    """Random data; ``seed`` mixed with $FMHA_TEST_SEED (seeds.py): distinct seeds, distinct data."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed_for("call-forms", seed))
    return torch.randn(*shape, generator=gen, device=DEVICE, dtype=torch.float32).to(dtype)


def i32(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32, device=DEVICE)


def as_tuple(result: Any) -> Tuple[torch.Tensor, ...]:
    return result if isinstance(result, tuple) else (result,)


def remembered_equals_checked(make_args: Callable[[int], Tuple[tuple, dict]],
                              fn: Callable[..., Any]) -> None:
    """fn on seed 1 (checked, remembered), on seed 2 (remembered form), then
    on seed 2 again after forgetting every form (checked): the last two
    agree bitwise and differ from the first."""
    fmha.clear_plan_cache()
    a1, k1 = make_args(1)
    first = [t.clone() for t in as_tuple(fn(*a1, **k1))]
    assert len(fmha_api._CALLS) == 1, "the first call's form was not remembered"
    a2, k2 = make_args(2)
    hits = fmha.plan_cache_info().hits
    fast = [t.clone() for t in as_tuple(fn(*a2, **k2))]
    assert fmha.plan_cache_info().hits == hits + 1, "the second call did not use the remembered form"
    torch.cuda.synchronize()
    fmha.clear_plan_cache()
    assert len(fmha_api._CALLS) == 0
    checked = [t.clone() for t in as_tuple(fn(*a2, **k2))]
    torch.cuda.synchronize()
    for f, c, o in zip(fast, checked, first):
        assert not torch.isnan(f.float()).any()
        assert torch.equal(f, c), "remembered form and checked path differ on the same inputs"
        assert not torch.equal(f, o), "the remembered form returned the first call's result"


def test_attention_dense_with_lse_window_softcap_sinks() -> None:
    def make(seed: int):
        q, k, v = randn(2, 77, 8, 128, seed=seed), randn(2, 300, 2, 128, seed=seed + 10), randn(2, 300, 2, 128, seed=seed + 20)
        sinks = randn(8, seed=seed + 30, dtype=torch.float32)
        return (q, k, v), dict(causal="bottom_right", return_lse=True, window=(64, 0), softcap=30.0, sinks=sinks)
    remembered_equals_checked(make, fmha.attention)


def test_attention_bhsd_views_and_caller_outputs() -> None:
    def make(seed: int):
        q = randn(1, 4, 200, 64, seed=seed)
        k, v = randn(1, 4, 256, 64, seed=seed + 1), randn(1, 4, 256, 64, seed=seed + 2)
        out = torch.full((1, 4, 200, 64), float("nan"), device=DEVICE, dtype=torch.bfloat16)
        lse = torch.full((1, 4, 200), float("nan"), device=DEVICE)
        return (q, k, v), dict(layout="bhsd", causal="top_left", out=out, lse_out=lse)
    remembered_equals_checked(make, lambda *a, **k: (fmha.attention(*a, **k), k["lse_out"]))


@pytest.mark.parametrize("lengths", ["int", "tensor"])
def test_kvcache_contiguous_split(lengths: str) -> None:
    def make(seed: int):
        q = randn(3, 1, 16, 128, seed=seed)
        kc, vc = randn(3, 2048, 4, 128, seed=seed + 1), randn(3, 2048, 4, 128, seed=seed + 2)
        lens = 1900 if lengths == "int" else i32([1900, 700, 2048])
        return (q, kc, vc, lens), dict(num_splits=4, return_lse=True)
    remembered_equals_checked(make, fmha.attention_with_kvcache)


def test_kvcache_paged_packed_queries_caller_workspace() -> None:
    plan_ws = {}

    def make(seed: int):
        q = randn(7, 8, 64, seed=seed)  # packed rows of 3 sequences: 2, 1, 4
        pool_k, pool_v = randn(40, 16, 2, 64, seed=seed + 1), randn(40, 16, 2, 64, seed=seed + 2)
        gen = torch.Generator().manual_seed(seed_for("call-forms-table", seed))
        table = torch.randperm(40, generator=gen)[:36].reshape(3, 12).to(torch.int32).to(DEVICE)
        if "bytes" not in plan_ws:
            d = fmha.describe_with_kvcache(q, pool_k, pool_v, i32([150, 33, 190]), block_table=table,
                                           cu_seqlens_q=i32([0, 2, 3, 7]), max_seqlen_q=4, num_splits=3)
            plan_ws["bytes"] = fmha.Plan(d).workspace_size
        ws = torch.empty(max(plan_ws["bytes"], 16), dtype=torch.uint8, device=DEVICE)
        return (q, pool_k, pool_v, i32([150, 33, 190])), dict(
            block_table=table, cu_seqlens_q=i32([0, 2, 3, 7]), max_seqlen_q=4, num_splits=3, workspace=ws)
    remembered_equals_checked(make, fmha.attention_with_kvcache)


def test_varlen_causal_same_arrays_then_distinct_arrays() -> None:
    lens = [5, 130, 0, 77]
    cu = [0, 5, 135, 135, 212]

    def make(seed: int):
        q, k, v = randn(212, 8, 128, seed=seed), randn(212, 2, 128, seed=seed + 1), randn(212, 2, 128, seed=seed + 2)
        c = i32(cu)
        return (q, k, v, c, c, max(lens), max(lens)), dict(causal=True)
    remembered_equals_checked(make, fmha.attention_varlen)
    # Equal values in two arrays: causal=True stays ambiguous on a remembered form too.
    (q, k, v, c, _, mq, mk), _ = make(3)
    with pytest.raises(ValueError, match="ambiguous"):
        fmha.attention_varlen(q, k, v, c, i32(cu), mq, mk, causal=True)


def test_tensor_max_seqlen_is_read_by_value() -> None:
    """A 0-d tensor where an option goes (max_seqlen_k from lengths.max())
    gets no remembered form: its value, not its shape, shapes the plan. A
    form keyed by its shape would run the second call with the first call's
    maximum (500) and drop keys 500-899 of sequence 1."""
    fmha.clear_plan_cache()
    q, k, v = randn(2, 8, 64, seed=30), randn(1000, 2, 64, seed=31), randn(1000, 2, 64, seed=32)
    cu_q = i32([0, 1, 2])
    fmha.attention_varlen(q, k, v, cu_q, i32([0, 500, 1000]), 1, torch.tensor(500), causal=False)
    got = fmha.attention_varlen(q, k, v, cu_q, i32([0, 100, 1000]), 1, torch.tensor(900), causal=False)
    assert len(fmha_api._CALLS) == 0
    fmha.clear_plan_cache()
    expected = fmha.attention_varlen(q, k, v, cu_q, i32([0, 100, 1000]), 1, 900, causal=False)
    torch.cuda.synchronize()
    assert torch.equal(got, expected)


def test_new_strides_make_a_new_form() -> None:
    fmha.clear_plan_cache()
    q, k, v = randn(1, 64, 4, 64, seed=1), randn(1, 64, 4, 64, seed=2), randn(1, 64, 4, 64, seed=3)
    fmha.attention(q, k, v)
    # The same shape with other strides (heads-major storage seen as bshd).
    k_t = k.transpose(1, 2).contiguous().transpose(1, 2)
    out = fmha.attention(q, k_t, v)
    assert len(fmha_api._CALLS) == 2
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float()).transpose(1, 2)
    assert (out.float() - ref).abs().max().item() < 2e-2


def test_misaligned_tensor_on_a_remembered_form_raises() -> None:
    fmha.clear_plan_cache()
    buf = randn(1 * 64 * 4 * 64 + 8, seed=4)
    k, v = randn(1, 64, 4, 64, seed=5), randn(1, 64, 4, 64, seed=6)
    fmha.attention(buf[:16384].view(1, 64, 4, 64), k, v)
    with pytest.raises(fmha.MisalignedError, match="tensors.q"):
        fmha.attention(buf[1:16385].view(1, 64, 4, 64), k, v)


def test_explicit_stream_on_a_remembered_form() -> None:
    fmha.clear_plan_cache()
    q, k, v = randn(2, 1, 8, 128, seed=7), randn(2, 512, 2, 128, seed=8), randn(2, 512, 2, 128, seed=9)
    expected = fmha.attention_with_kvcache(q, k, v, 512)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    out = fmha.attention_with_kvcache(q, k, v, 512, stream=side)
    side.synchronize()
    assert torch.equal(out, expected)


def test_last_plan_names_the_kernel_of_checked_and_remembered_calls() -> None:
    """fmha.last_plan() is the plan the latest call ran: on the checked path,
    on a remembered form, and after a call of another form; None once cleared."""
    fmha.clear_plan_cache()
    assert fmha.last_plan() is None
    lens = i32([700, 3])
    q1, k1, v1 = randn(2, 1, 8, 128, seed=20), randn(2, 700, 2, 128, seed=21), randn(2, 700, 2, 128, seed=22)
    q2, k2, v2 = randn(1, 64, 4, 64, seed=23), randn(1, 64, 4, 64, seed=24), randn(1, 64, 4, 64, seed=25)
    fmha.attention_with_kvcache(q1, k1, v1, lens)
    decode_plan = fmha.last_plan()
    assert decode_plan is not None and "decode" in decode_plan.info.kernel_name
    fmha.attention(q2, k2, v2)
    dense_plan = fmha.last_plan()
    assert dense_plan is not decode_plan and dense_plan.descriptor.head_dim == 64
    hits = fmha.plan_cache_info().hits
    fmha.attention_with_kvcache(q1, k1, v1, lens)  # the remembered form
    assert fmha.plan_cache_info().hits == hits + 1
    assert fmha.last_plan() is decode_plan
    torch.cuda.synchronize()
    fmha.clear_plan_cache()
    assert fmha.last_plan() is None


def test_cache_size_zero_remembers_nothing() -> None:
    fmha.clear_plan_cache()
    q, k, v = randn(1, 32, 2, 64, seed=10), randn(1, 32, 2, 64, seed=11), randn(1, 32, 2, 64, seed=12)
    try:
        fmha.set_plan_cache_size(0)
        a = fmha.attention(q, k, v)
        b = fmha.attention(q, k, v)
        assert len(fmha_api._CALLS) == 0
        assert torch.equal(a, b)
    finally:
        fmha.set_plan_cache_size(128)


def test_remembered_call_costs_less_host_time() -> None:
    """The point of remembering: a repeated decode call spends less CPU time
    than the checked path (measured here, not asserted against a fixed
    number: only that it is below the checked path's)."""
    import time

    q, k, v = randn(4, 1, 32, 128, seed=13), randn(4, 1024, 8, 128, seed=14), randn(4, 1024, 8, 128, seed=15)
    lens = i32([1024, 900, 10, 500])

    def per_call(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            fmha.attention_with_kvcache(q, k, v, lens)
        return (time.perf_counter() - t0) / n

    fmha.clear_plan_cache()
    fmha.attention_with_kvcache(q, k, v, lens)
    torch.cuda.synchronize()
    fast = min(per_call(50) for _ in range(3))
    torch.cuda.synchronize()
    forms = fmha_api._CALLS
    try:
        forms.resize(0)  # the plan cache stays: the checked path without creating plans
        slow = min(per_call(50) for _ in range(3))
    finally:
        forms.resize(128)
    torch.cuda.synchronize()
    print(f"host time per call: remembered {fast * 1e6:.1f} us, checked {slow * 1e6:.1f} us")
    assert fast < slow
    assert math.isfinite(fast)
