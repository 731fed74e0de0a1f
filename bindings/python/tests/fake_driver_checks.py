"""Checks run in a subprocess under the fake CUDA driver (fake_libcuda.c).

Usage (test_fake_driver.py does this): with FMHA_LIBCUDA naming the built
fake driver and FMHA_LIBRARY naming libfmha,

    python fake_driver_checks.py CHECK_NAME

Exit status: 0 passed, 3 skipped (the fake driver cannot stand in for the
real one, reason printed), anything else failed. No GPU memory exists: the
"device pointers" below are aligned integers the fake driver never reads.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import types

import fmha

from fakes import FakeCAI, FakeDLPack

PROBLEM = dict(batch=2, num_q_heads=8, num_kv_heads=2, seqlen_q=128, seqlen_k=256, head_dim=128, dtype="bf16")
B, SQ, SK, HQ, HKV, D = 2, 128, 256, 8, 2, 128
BASE = 0x7F0000000000  # fake device addresses, 16-byte aligned
Q_PTR, K_PTR, V_PTR, O_PTR, LSE_PTR, WS_PTR = (BASE + i * 0x10000000 for i in range(6))

_fake = ctypes.CDLL(os.environ["FMHA_LIBCUDA"])
_fake.fake_cuda_launches.restype = ctypes.c_long
_fake.fake_cuda_last_stream.restype = ctypes.c_void_p
_fake.fake_cuda_set_current.argtypes = [ctypes.c_int]


def launches() -> int:
    return int(_fake.fake_cuda_launches())


def last_stream() -> int:
    return int(_fake.fake_cuda_last_stream() or 0)


def expect(exc_type, fn, *args, match: str = "", **kwargs):
    try:
        fn(*args, **kwargs)
    except exc_type as exc:
        assert match in str(exc), f"{exc!r} does not mention {match!r}"
        return exc
    raise AssertionError(f"{exc_type.__name__} not raised")


def workspace_args(plan: fmha.Plan) -> dict:
    return {"workspace": WS_PTR, "workspace_bytes": plan.workspace_size} if plan.workspace_size else {}


# ---------------------------------------------------------------- checks
def check_driver_version() -> None:
    assert fmha.driver_version() == 12080
    assert fmha.check_support(**PROBLEM, sm=fmha.SM_CURRENT_DEVICE).ok


def check_plan_info() -> None:
    with fmha.Plan(**PROBLEM) as plan:
        info = plan.info
        assert info is plan.info  # cached
        assert info.device == 0 and info.device_sm == 80
        # sm_80, so not the Hopper kernel; 128 query positions: the portable
        # kernel, its 16 CTAs unsplit (256 keys are one split's worth; p13).
        assert info.kernel_family == fmha.KernelFamily.PORTABLE, info
        assert info.num_splits == 1, info
        assert info.kernel_name, info
        assert info.image_sm == 80 or info.image_is_ptx, info
        assert info.workspace_bytes == plan.workspace_size >= 0
        assert info.tile_m > 0 and info.tile_n > 0 and info.threads_per_cta > 0, info
        assert "fmha.Plan" in repr(plan)
        desc = plan.descriptor
        assert desc.batch == 2 and desc.num_kv_heads == 2
    assert plan.closed and "closed" in repr(plan)
    expect(ValueError, plan.run, Q_PTR, K_PTR, V_PTR, O_PTR, match="closed")
    plan.close()  # idempotent


def check_plan_device_ordinal() -> None:
    with fmha.Plan(**PROBLEM, device=1) as plan:
        assert plan.info.device == 1
    err = expect(fmha.NoDeviceError, fmha.Plan, **PROBLEM, device=5)
    assert err.status == fmha.Status.NO_DEVICE and "device" in err.message


def check_current_context_wins_over_descriptor_device() -> None:
    _fake.fake_cuda_set_current(1)
    try:
        with fmha.Plan(**PROBLEM, device=0) as plan:
            assert plan.info.device == 1
    finally:
        _fake.fake_cuda_set_current(-1)


def check_plan_run_with_pointers() -> None:
    with fmha.Plan(**PROBLEM, write_lse=True) as plan:
        before = launches()
        plan.run(Q_PTR, K_PTR, V_PTR, O_PTR, lse=LSE_PTR, stream=0x1230, **workspace_args(plan))
        assert launches() > before
        assert last_stream() == 0x1230
        plan.run(Q_PTR, K_PTR, V_PTR, O_PTR, lse=LSE_PTR, stream=ctypes.c_void_p(0x4560), **workspace_args(plan))
        assert last_stream() == 0x4560
        ws = workspace_args(plan)
        expect(fmha.MisalignedError, plan.run, Q_PTR + 2, K_PTR, V_PTR, O_PTR, lse=LSE_PTR, match="tensors.q", **ws)
        expect(fmha.InvalidArgumentError, plan.run, Q_PTR, K_PTR, 0, O_PTR, lse=LSE_PTR, match="tensors.v", **ws)
        expect(ValueError, plan.run, Q_PTR, K_PTR, V_PTR, O_PTR, match="writes LSE")
        if plan.workspace_size:
            expect(fmha.WorkspaceTooSmallError, plan.run, Q_PTR, K_PTR, V_PTR, O_PTR,
                   lse=LSE_PTR, workspace=WS_PTR, workspace_bytes=1)
    with fmha.Plan(**PROBLEM) as plan:
        expect(ValueError, plan.run, Q_PTR, K_PTR, V_PTR, O_PTR, lse=LSE_PTR, match="without write_lse")
        plan.run(FakeCAI([B, SQ, HQ, D], ptr=Q_PTR), FakeCAI([B, SK, HKV, D], ptr=K_PTR),
                 FakeDLPack([B, SK, HKV, D], ptr=V_PTR), O_PTR, **workspace_args(plan))
        assert last_stream() == 0  # no framework stream: the legacy default stream


def check_attention_on_fake_arrays() -> None:
    fmha.clear_plan_cache()
    q = FakeCAI([B, SQ, HQ, D], ptr=Q_PTR, device=0)
    k, v = FakeCAI([B, SK, HKV, D], ptr=K_PTR, device=0), FakeCAI([B, SK, HKV, D], ptr=V_PTR, device=0)
    o = FakeCAI([B, SQ, HQ, D], ptr=O_PTR, device=0)
    before = launches()
    assert fmha.attention(q, k, v, out=o, causal="bottom_right", stream=0x990) is o
    assert launches() > before and last_stream() == 0x990
    fmha.attention(q, k, v, out=o, causal="bottom_right")
    assert last_stream() == 0
    info = fmha.plan_cache_info()
    assert (info.misses, info.hits, info.size) == (1, 1, 1), info
    lse = FakeCAI([B, HQ, SQ], typestr="<f4", ptr=LSE_PTR)
    out, lse_back = fmha.attention(q, k, v, out=o, lse_out=lse, return_lse=True)
    assert out is o and lse_back is lse
    assert fmha.plan_cache_info().misses == 2  # write_lse is part of the key
    misaligned = FakeCAI([B, SQ, HQ, D], ptr=Q_PTR + 8, device=0)
    expect(fmha.MisalignedError, fmha.attention, misaligned, k, v, out=o, match="tensors.q")
    # Arrays that do not tell their device: plans bind to the current context, uncached.
    fmha.clear_plan_cache()
    bare = [FakeCAI(t.shape, ptr=t.ptr) for t in (q, k, v, o)]
    fmha.attention(*bare[:3], out=bare[3])
    assert fmha.plan_cache_info().size == 0


def check_attention_uses_the_arrays_device() -> None:
    fmha.clear_plan_cache()
    arrays = {
        dev: [FakeCAI(shape, ptr=ptr, device=dev) for shape, ptr in
              (([B, SQ, HQ, D], Q_PTR), ([B, SK, HKV, D], K_PTR), ([B, SK, HKV, D], V_PTR), ([B, SQ, HQ, D], O_PTR))]
        for dev in (0, 1)
    }
    for dev, (q, k, v, o) in arrays.items():
        desc = fmha.describe(q, k, v, out=o)
        assert desc.device == dev
        with fmha.Plan(desc) as plan:
            assert plan.info.device == dev
        fmha.attention(q, k, v, out=o)
    assert fmha.plan_cache_info().size == 2  # one plan per device


def check_attention_bhsd_and_views() -> None:
    q = FakeCAI([B, HQ, SQ, D], ptr=Q_PTR)
    k = FakeCAI([B, HKV, SK, D], ptr=K_PTR)
    o = FakeCAI([B, HQ, SQ, D], ptr=O_PTR)
    fmha.attention(q, k, k, out=o, layout="bhsd", causal="top_left", scale=0.125)
    base = FakeCAI([B, SQ + 4, HQ, D + 64], ptr=Q_PTR)
    view = base.view([slice(None), slice(2, 2 + SQ), slice(None), slice(64, 64 + D)])
    fmha.attention(view, k.permute(0, 2, 1, 3), k.permute(0, 2, 1, 3), out=FakeCAI([B, SQ, HQ, D], ptr=O_PTR))


def stream_waits() -> list:
    pairs = (ctypes.c_longlong * 2 * 64)()
    n = _fake.fake_cuda_stream_waits(pairs)
    return [(int(pairs[i][0]), int(pairs[i][1])) for i in range(n)]


def check_attention_waits_for_cai_producer_streams() -> None:
    # __cuda_array_interface__ v3: an array naming the stream its data is
    # produced on must have the run's stream wait for that one first (an
    # event recorded there), unless they are the same stream.
    _fake.fake_cuda_set_current(0)  # what the producer's framework leaves current
    _fake.fake_cuda_live_events.restype = ctypes.c_int
    q = FakeCAI([B, SQ, HQ, D], ptr=Q_PTR, stream=0x7700)
    k, v = FakeCAI([B, SK, HKV, D], ptr=K_PTR), FakeCAI([B, SK, HKV, D], ptr=V_PTR, stream=2)
    o = FakeCAI([B, SQ, HQ, D], ptr=O_PTR, stream=0x990)
    before = launches()
    fmha.attention(q, k, v, out=o, stream=0x990)
    assert launches() > before and last_stream() == 0x990
    assert stream_waits() == [(0x990, 0x7700), (0x990, 2)], stream_waits()  # o's own stream: no wait
    assert _fake.fake_cuda_live_events() == 0
    # Stream 1 (the protocol's legacy default stream) is libfmha's stream 0.
    plain = [FakeCAI(t.shape, ptr=t.ptr) for t in (k, v, o)]
    fmha.attention(FakeCAI([B, SQ, HQ, D], ptr=Q_PTR, stream=1), *plain[:2], out=plain[2])
    assert last_stream() == 0 and len(stream_waits()) == 2, stream_waits()
    expect(ValueError, fmha.attention, FakeCAI([B, SQ, HQ, D], ptr=Q_PTR, stream=0), *plain[:2], out=plain[2],
           match="not a stream handle")


def check_attention_on_dlpack() -> None:
    q = FakeDLPack([B, SQ, HQ, D], ptr=Q_PTR)
    k = FakeDLPack([B, SK, HKV, D], ptr=K_PTR)
    o = FakeDLPack([B, SQ, HQ, D], ptr=O_PTR)
    before = launches()
    fmha.attention(q, k, k, out=o, stream=0x5550)
    assert launches() > before and last_stream() == 0x5550
    assert q.streams[-1] == 0x5550, "the run stream must be handed to the DLPack producer"


def check_concurrent_runs_share_a_plan() -> None:
    errors = []
    with fmha.Plan(**PROBLEM) as plan:
        def worker(i: int) -> None:
            try:
                for _ in range(50):
                    plan.run(Q_PTR, K_PTR, V_PTR, O_PTR, stream=0x1000 + 16 * i, **workspace_args(plan))
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        before = launches()
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert launches() - before >= 200


def check_run_rejects_integers_ctypes_would_truncate() -> None:
    # ctypes wraps ints silently: workspace_bytes=-1 would reach fmha_run as
    # SIZE_MAX (so a too-small workspace passes its check), and addresses past
    # 2**64 as their low 64 bits. Each must raise before anything is enqueued.
    with fmha.Plan(**PROBLEM, num_splits=4) as plan:
        assert plan.workspace_size > 0
        before = launches()
        expect(ValueError, plan.run, Q_PTR, K_PTR, V_PTR, O_PTR, workspace=WS_PTR, workspace_bytes=-1,
               match="workspace_bytes")
        expect(ValueError, plan.run, Q_PTR, K_PTR, V_PTR, O_PTR, workspace=WS_PTR, workspace_bytes=2**64 + 2**40,
               match="workspace_bytes")
        expect(ValueError, plan.run, Q_PTR, K_PTR, V_PTR, O_PTR, workspace=-WS_PTR, match="workspace")
        expect(ValueError, plan.run, Q_PTR, K_PTR, V_PTR, O_PTR, workspace=WS_PTR + 2**64, match="workspace")
        expect(ValueError, plan.run, Q_PTR + 2**64, K_PTR, V_PTR, O_PTR, workspace=WS_PTR, match="q")
        expect(ValueError, plan.run, Q_PTR, K_PTR, V_PTR, O_PTR, workspace=WS_PTR, stream=2**64 + 0x10,
               match="stream")
        assert launches() == before
        plan.run(Q_PTR, K_PTR, V_PTR, O_PTR, workspace=WS_PTR, stream=0x10)
        assert launches() > before and last_stream() == 0x10


class StubTensor:
    """A torch.Tensor stand-in: an address, a contiguous shape, a device."""

    def __init__(self, ptr: int, shape: tuple = (B, SQ, HQ, D)) -> None:
        self.ptr, self.shape = ptr, shape
        self.device = types.SimpleNamespace(index=0)
        self.dtype = "bfloat16"

    def get_device(self) -> int:
        return self.device.index

    def data_ptr(self) -> int:
        return self.ptr

    def stride(self) -> tuple:
        strides, step = [], 1
        for extent in reversed(self.shape):
            strides.append(step)
            step *= extent
        return tuple(reversed(strides))


@contextlib.contextmanager
def torch_stub(**c_functions):
    """A remembered call form only needs torch for streams and allocations;
    this stub stands in (callers pass the stream and out; ``c_functions``
    join ``torch._C``, e.g. a caching allocator's)."""
    stub = types.ModuleType("torch")
    stub.Tensor = StubTensor
    stub._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda index: 0, **c_functions)
    sys.modules["torch"] = stub
    try:
        yield stub
    finally:
        del sys.modules["torch"]


def remembered_form(workspace: bool = True) -> tuple:
    """A plan, a remembered call form of it (fmha._fastcall) and the tensors
    of one call (the caller's workspace unless ``workspace`` is False);
    inside torch_stub()."""
    from fmha import _fastcall

    plan = fmha.Plan(**PROBLEM, num_splits=4)
    form = _fastcall._Form(plan, StubTensor(Q_PTR), (B, SQ, HQ, D), (B, HQ, SQ), False, None, False)
    tensors = _fastcall.call_tensors(StubTensor(Q_PTR), StubTensor(K_PTR), StubTensor(V_PTR), StubTensor(O_PTR),
                                     workspace=StubTensor(WS_PTR) if workspace else None)
    return plan, form, tensors


def check_remembered_call_form_after_close() -> None:
    # A remembered call form (fmha._fastcall) holds its plan, and
    # fmha.last_plan() hands that plan out: once it is closed, the form must
    # raise, not run the freed handle.
    with torch_stub():
        plan, form, tensors = remembered_form()
        before = launches()
        assert form.run(tensors, 0x1230).ptr == O_PTR
        assert launches() > before and last_stream() == 0x1230
        plan.close()
        before = launches()
        expect(ValueError, form.run, tensors, 0x1230, match="closed")
        assert launches() == before


class CachingAllocatorStub:
    """torch._C's caching-allocator entry points, logging each use with the
    number of launches so far (what was enqueued before the block came back)."""

    def __init__(self, device: int = 0) -> None:
        self.device, self.log = device, []

    def functions(self) -> dict:
        return dict(_cuda_cudaCachingAllocator_raw_alloc=self.alloc, _cuda_cudaCachingAllocator_raw_delete=self.free,
                    _cuda_getDevice=lambda: self.device)

    def alloc(self, size: int, stream: int) -> int:
        self.log.append(("alloc", size, stream, launches()))
        return WS_PTR

    def free(self, ptr: int) -> None:
        self.log.append(("free", ptr, launches()))


def check_remembered_form_workspace_block() -> None:
    # Without a caller's workspace, a remembered form takes a block from
    # torch's caching allocator on the run's stream and gives it back after
    # fmha_run has enqueued the kernels that use it, also when fmha_run fails.
    allocator = CachingAllocatorStub()
    with torch_stub(**allocator.functions()):
        plan, form, tensors = remembered_form(workspace=False)
        size = plan.workspace_size
        assert size > 0
        before = launches()
        assert form.run(tensors, 0x1230).ptr == O_PTR
        after = launches()
        assert after > before and last_stream() == 0x1230
        assert allocator.log == [("alloc", size, 0x1230, before), ("free", WS_PTR, after)], allocator.log
        # A misaligned q: fmha_run refuses it, and the block still comes back.
        allocator.log.clear()
        bad = (StubTensor(Q_PTR + 2),) + tensors[1:]
        expect(fmha.FmhaError, form.run, bad, 0x1230, match="q")
        assert launches() == after
        assert [entry[0] for entry in allocator.log] == ["alloc", "free"], allocator.log
        plan.close()


def check_remembered_form_workspace_on_another_current_device() -> None:
    # The raw allocator serves the current device only: with another device
    # current, the form falls back to a torch.empty tensor on its own device.
    allocator = CachingAllocatorStub(device=1)
    with torch_stub(**allocator.functions()) as torch:
        made = []

        def empty(size, dtype=None, device=None):
            made.append((size, device.index))
            return StubTensor(WS_PTR, (size,))

        torch.empty, torch.uint8 = empty, "uint8"
        plan, form, tensors = remembered_form(workspace=False)
        assert form.run(tensors, None).ptr == O_PTR
        assert allocator.log == [] and made == [(plan.workspace_size, 0)], (allocator.log, made)
        plan.close()


def check_call_key_reads_options_by_value() -> None:
    # An option is keyed by its type and value; a tensor in an option's
    # place (a 0-d max_seqlen) cannot be keyed by its shape, so such a call
    # gets no key and takes the checked path every time.
    from fmha._fastcall import CallCache

    with torch_stub():
        cache = CallCache(8)
        q = StubTensor(Q_PTR)
        tensors = (q, q, q) + (None,) * 8

        def key(*options):
            return cache.key("kvcache", tensors, options)

        assert key(5, True, None) == key(5, True, None)
        assert key(5, True, None) != key(6, True, None)
        assert len({key(1, None), key(True, None), key(1.0, None)}) == 3
        assert key((0, 4), fmha.Mask.CAUSAL_BOTTOM_RIGHT) != key((0, 4.0), fmha.Mask.CAUSAL_BOTTOM_RIGHT)
        assert key(fmha.Mask.CAUSAL_BOTTOM_RIGHT) != key(int(fmha.Mask.CAUSAL_BOTTOM_RIGHT))
        assert key(StubTensor(0x1000, ())) is None
        assert key([1, 2]) is None
        assert cache.key("kvcache", (q, q, q, [1]) + (None,) * 7, ()) is None
        # A workspace given as an address: a remembered form would read it as
        # a tensor, so the call takes the checked path every time.
        assert cache.key("attention", (q, q, q) + (None,) * 7 + (WS_PTR,), ()) is None
        assert cache.key("attention", (q, q, q) + (None,) * 7 + (StubTensor(WS_PTR, (64,)),), ()) is not None


# ---------------------------------------------------------------- close() during runs
class BlockingCall:
    """Stands in for a foreign function: each call says it is inside, waits
    until released, then calls the real function and logs its return."""

    def __init__(self, real, log: list) -> None:
        self.real, self.log = real, log
        self.inside = threading.Semaphore(0)
        self.released = threading.Event()

    def __call__(self, *args):
        self.inside.release()
        if not self.released.wait(60):
            raise RuntimeError("the test never released this call")
        status = self.real(*args)
        self.log.append("call returned")
        return status


@contextlib.contextmanager
def blocking(owner, name: str, log: list):
    """Replace ``owner.name`` (a foreign function) by a BlockingCall."""
    real = getattr(owner, name)
    call = BlockingCall(real, log)
    setattr(owner, name, call)
    try:
        yield call
    finally:
        setattr(owner, name, real)


class DestroySpy:
    """A plan's ``_lib`` that logs fmha_destroy_plan before forwarding it."""

    def __init__(self, lib, log: list) -> None:
        self.lib, self.log = lib, log

    def fmha_destroy_plan(self, handle) -> None:
        self.log.append("destroyed")
        self.lib.fmha_destroy_plan(handle)


def close_waits_for_runs(plan, run, call: BlockingCall) -> None:
    """Two runs of ``plan`` on two threads block inside the library at once;
    close() on a third must neither return nor destroy the plan before both
    have returned, and a run that starts in the meantime must raise."""
    log = call.log
    plan._lib = DestroySpy(plan._lib, log)
    errors = []

    def runner() -> None:
        try:
            run()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    runners = [threading.Thread(target=runner, daemon=True) for _ in range(2)]
    for t in runners:
        t.start()
    for _ in runners:  # both inside together: runs of one plan stay concurrent
        assert call.inside.acquire(timeout=30), "the two runs were not inside the library together"
    closer = threading.Thread(target=plan.close, daemon=True)
    closer.start()
    closer.join(0.5)
    assert closer.is_alive(), f"close() returned while two runs were inside the library (log {log})"
    assert log == [] and plan.closed, log
    expect(ValueError, run, match="closed")  # never reaches the library: it would block

    before = launches()
    call.released.set()
    for t in runners + [closer]:
        t.join(30)
        assert not t.is_alive()
    assert not errors, errors
    assert log == ["call returned", "call returned", "destroyed"], log
    assert launches() >= before + 2
    expect(ValueError, run, match="closed")


def check_close_waits_for_plan_runs_in_flight() -> None:
    plan = fmha.Plan(**PROBLEM)
    ws = workspace_args(plan)
    log: list = []
    fmha._lib.fmha_run_untyped()  # resolve it, so that the stand-in replaces it
    with blocking(fmha._lib, "_run_untyped", log) as call:
        close_waits_for_runs(plan, lambda: plan.run(Q_PTR, K_PTR, V_PTR, O_PTR, stream=0x10, **ws), call)


def check_close_waits_for_remembered_form_runs_in_flight() -> None:
    with torch_stub():
        plan, form, tensors = remembered_form()
        log: list = []
        fmha._lib.fmha_run_untyped()
        with blocking(fmha._lib, "_run_untyped", log) as call:
            close_waits_for_runs(plan, lambda: form.run(tensors, 0x1230), call)


def check_close_waits_for_merge_plan_runs_in_flight() -> None:
    mp = fmha.MergePlan(batch=B, seqlen_q=5, num_heads=HQ, head_dim=D, num_parts=2)
    log: list = []
    with blocking(fmha.library(), "fmha_run_merge", log) as call:
        close_waits_for_runs(mp, lambda: mp.run([Q_PTR, K_PTR], [LSE_PTR, LSE_PTR + 4], O_PTR, stream=0x990), call)


# ---------------------------------------------------------------- serving (descriptor v3, merge)
CU_Q_PTR, CU_K_PTR, USED_PTR, TABLE_PTR = (BASE + 0x40000000 + i * 0x1000000 for i in range(4))
TQ, TK, MAXQ, MAXK = 50, 300, 30, 200


def _i32(shape, ptr, device=0):
    return FakeCAI(shape, typestr="<i4", ptr=ptr, device=device)


def check_varlen_on_fake_arrays() -> None:
    fmha.clear_plan_cache()
    q = FakeCAI([TQ, HQ, D], ptr=Q_PTR, device=0)
    k, v = FakeCAI([TK, HKV, D], ptr=K_PTR, device=0), FakeCAI([TK, HKV, D], ptr=V_PTR, device=0)
    o = FakeCAI([TQ, HQ, D], ptr=O_PTR, device=0)
    cq, ck = _i32([B + 1], CU_Q_PTR), _i32([B + 1], CU_K_PTR)
    before = launches()
    assert fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, causal="bottom_right", stream=0x770) is o
    assert launches() > before and last_stream() == 0x770
    fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, causal="bottom_right")
    info = fmha.plan_cache_info()
    assert (info.misses, info.hits) == (1, 1), info
    lse = FakeCAI([HQ, TQ], typestr="<f4", ptr=LSE_PTR, device=0)
    out, lse_back = fmha.attention_varlen(q, k, v, cq, ck, MAXQ, MAXK, out=o, lse_out=lse, return_lse=True,
                                          seqused_k=_i32([B], USED_PTR))
    assert out is o and lse_back is lse
    expect(fmha.MisalignedError, fmha.attention_varlen, q, k, v, _i32([B + 1], CU_Q_PTR + 2), ck, MAXQ, MAXK,
           out=o, match="tensors.cu_seqlens_q")
    # Every sequence without keys: K/V may have no rows at all (NULL data).
    empty = FakeCAI([0, HKV, D], ptr=0, device=0)
    fmha.attention_varlen(q, empty, empty, cq, ck, MAXQ, 0, out=o)


def check_plan_run_requires_index_arrays() -> None:
    q = FakeCAI([TQ, HQ, D], ptr=Q_PTR)
    k = FakeCAI([TK, HKV, D], ptr=K_PTR)
    cq, ck = _i32([B + 1], CU_Q_PTR), _i32([B + 1], CU_K_PTR)
    with fmha.Plan(fmha.describe_varlen(q, k, k, cq, ck, MAXQ, MAXK, out=q)) as plan:
        assert plan.flags == fmha.FMHA_FLAG_VARLEN_Q | fmha.FMHA_FLAG_VARLEN_K
        ws = workspace_args(plan)
        expect(ValueError, plan.run, Q_PTR, K_PTR, V_PTR, O_PTR, cu_seqlens_q=CU_Q_PTR, match="cu_seqlens_k=", **ws)
        before = launches()
        plan.run(Q_PTR, K_PTR, V_PTR, O_PTR, cu_seqlens_q=cq, cu_seqlens_k=CU_K_PTR, block_table=TABLE_PTR, **ws)
        assert launches() > before  # block_table: not used by this plan, ignored
    with fmha.Plan(**PROBLEM) as plan:  # a dense plan ignores index arrays
        plan.run(Q_PTR, K_PTR, V_PTR, O_PTR, cu_seqlens_q=CU_Q_PTR, **workspace_args(plan))


def check_kvcache_paged_and_split() -> None:
    fmha.clear_plan_cache()
    q = FakeCAI([B, 1, HQ, D], ptr=Q_PTR, device=0)
    pages = FakeCAI([40, 16, HKV, D], ptr=K_PTR, device=0)
    o = FakeCAI([B, 1, HQ, D], ptr=O_PTR, device=0)
    table = _i32([B, 16], TABLE_PTR)
    before = launches()
    fmha.attention_with_kvcache(q, pages, pages, _i32([B], USED_PTR), block_table=table, out=o, num_splits=1)
    assert launches() > before
    # The plan depends on the cache's geometry, not on the lengths: a decode loop hits the cache.
    fmha.attention_with_kvcache(q, pages, pages, _i32([B], USED_PTR + 64), block_table=table, out=o, num_splits=1)
    assert fmha.plan_cache_info().hits == 1
    desc = fmha.describe_with_kvcache(q, pages, pages, _i32([B], USED_PTR), block_table=table, out=o, num_splits=4)
    with fmha.Plan(desc) as plan:
        assert plan.info.num_splits == 4, plan.info
        assert plan.workspace_size > 0  # split-KV partial results live in the workspace
        expect(fmha.WorkspaceTooSmallError, plan.run, Q_PTR, K_PTR, K_PTR, O_PTR, seqused_k=USED_PTR,
               block_table=TABLE_PTR, workspace=WS_PTR, workspace_bytes=16)
        expect(ValueError, plan.run, Q_PTR, K_PTR, K_PTR, O_PTR, seqused_k=USED_PTR, match="block_table=")
    # Fake arrays give nothing to allocate workspace with: it must be passed.
    expect(ValueError, fmha.attention_with_kvcache, q, pages, pages, _i32([B], USED_PTR), block_table=table, out=o,
           num_splits=4, match="workspace=")
    fmha.attention_with_kvcache(q, pages, pages, _i32([B], USED_PTR), block_table=table, out=o, num_splits=4,
                                workspace=WS_PTR)
    # Contiguous cache, one length for all, packed queries.
    cache = FakeCAI([B, 256, HKV, D], ptr=K_PTR, device=0)
    fmha.attention_with_kvcache(q, cache, cache, 100, out=o)
    qp = FakeCAI([TQ, HQ, D], ptr=Q_PTR, device=0)
    fmha.attention_with_kvcache(qp, pages, pages, _i32([B], USED_PTR), block_table=table,
                                cu_seqlens_q=_i32([B + 1], CU_Q_PTR), max_seqlen_q=MAXQ,
                                out=FakeCAI([TQ, HQ, D], ptr=O_PTR, device=0))


def check_merge_on_fake_arrays() -> None:
    fmha.clear_plan_cache()
    parts = [FakeCAI([B, 5, HQ, D], ptr=BASE + i * 0x1000000, device=0) for i in range(3)]
    lses = [FakeCAI([B, HQ, 5], typestr="<f4", ptr=BASE + 0x8000000 + i * 0x100000, device=0) for i in range(3)]
    out = FakeCAI([B, 5, HQ, D], ptr=O_PTR, device=0)
    before = launches()
    assert fmha.merge(parts, lses, out=out, stream=0x880) is out
    assert launches() == before + 1 and last_stream() == 0x880
    lse = FakeCAI([B, HQ, 5], typestr="<f4", ptr=LSE_PTR, device=0)
    assert fmha.merge(parts, lses, out=parts[0], lse_out=lse, return_lse=True) == (parts[0], lse)
    fmha.merge(parts, lses, out=out)
    info = fmha.plan_cache_info()
    assert (info.misses, info.hits) == (2, 1), info
    # packed parts, as attention_varlen returns them
    packed = [FakeCAI([TQ, HQ, D], ptr=BASE + i * 0x1000000, device=0) for i in range(2)]
    plse = [FakeCAI([HQ, TQ], typestr="<f4", ptr=BASE + 0x8000000 + i * 0x100000, device=0) for i in range(2)]
    fmha.merge(packed, plse, out=FakeCAI([TQ, HQ, D], ptr=O_PTR, device=0))
    with fmha.MergePlan(batch=B, seqlen_q=5, num_heads=HQ, head_dim=D, num_parts=2, write_lse=True) as mp:
        assert mp.info.num_splits == 2 and "MergePlan parts=2" in repr(mp)
        expect(ValueError, mp.run, [O_PTR], [LSE_PTR], O_PTR, lse=LSE_PTR, match="combines 2 parts")
        expect(ValueError, mp.run, [Q_PTR, K_PTR], [LSE_PTR, LSE_PTR], O_PTR, match="writes LSE")
        expect(fmha.MisalignedError, mp.run, [Q_PTR, K_PTR + 8], [LSE_PTR, LSE_PTR], O_PTR, lse=LSE_PTR,
               match="o_parts[1]")
        mp.run([Q_PTR, K_PTR], [LSE_PTR, LSE_PTR + 4], O_PTR, lse=WS_PTR, stream=0x990)
        assert last_stream() == 0x990
    assert mp.closed
    expect(ValueError, mp.run, [Q_PTR, K_PTR], [LSE_PTR, LSE_PTR], O_PTR, match="closed")
    # An attention plan is not a merge plan.
    with fmha.Plan(**PROBLEM) as plan:
        arr = (ctypes.c_void_p * 1)(Q_PTR)
        lse_arr = (ctypes.POINTER(ctypes.c_float) * 1)(ctypes.cast(ctypes.c_void_p(LSE_PTR), ctypes.POINTER(ctypes.c_float)))
        expect(fmha.InvalidArgumentError, fmha._lib.call, "fmha_run_merge", ctypes.c_void_p(plan._handle), arr,
               lse_arr, O_PTR, None, None, match="attention plan")


def main() -> int:
    name = sys.argv[1]
    if fmha.driver_version() is None:
        reason = fmha.check_support(**PROBLEM, sm=fmha.SM_CURRENT_DEVICE).message
        print(f"the fake driver cannot stand in for libcuda: {reason}")
        return 3
    globals()[f"check_{name}"]()
    print(f"{name}: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
