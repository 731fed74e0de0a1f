"""Plans: a validated problem bound to a CUDA context and a kernel.

:class:`Plan` wraps an attention ``fmha_plan``, :class:`MergePlan` a merge
plan (``fmha_create_merge_plan``); :class:`PlanCache` is the LRU cache the
high-level functions (:func:`fmha.attention`, :func:`fmha.merge`, ...) use
so that repeated calls do not re-plan.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Tuple, TypeVar, Union

from ._abi import (
    FMHA_FLAG_PAGED_KV,
    FMHA_FLAG_SEQUSED_K,
    FMHA_FLAG_SINKS,
    FMHA_FLAG_VARLEN_K,
    FMHA_FLAG_VARLEN_Q,
    FMHA_FLAG_WRITE_LSE,
    FMHA_PLAN_INFO_VERSION,
    FmhaDescriptor,
    FmhaMergeDescriptor,
    FmhaPlanInfo,
    KernelFamily,
    fmha_plan_p,
    raw_tensors,
)
from . import _lib
from ._cuda import resolve_stream
from .problem import copy_descriptor, descriptor_key, make_descriptor, make_merge_descriptor
from ._lru import BoundedLru
from .errors import error_for_status
from .tensors import data_pointer, nbytes, view, wait_for_producers

__all__ = ["PlanInfo", "Plan", "MergePlan", "PlanCache", "CacheInfo"]

_FLOAT_P = ctypes.POINTER(ctypes.c_float)

# FMHA_FLAG_* bit -> (fmha_tensors field / Plan.run keyword, flag name).
_INDEX_ARRAYS = (
    (FMHA_FLAG_VARLEN_Q, "cu_seqlens_q", "FMHA_FLAG_VARLEN_Q"),
    (FMHA_FLAG_VARLEN_K, "cu_seqlens_k", "FMHA_FLAG_VARLEN_K"),
    (FMHA_FLAG_SEQUSED_K, "seqused_k", "FMHA_FLAG_SEQUSED_K"),
    (FMHA_FLAG_PAGED_KV, "block_table", "FMHA_FLAG_PAGED_KV"),
)

_PlanT = TypeVar("_PlanT", bound="_PlanHandle")


@dataclass(frozen=True)
class PlanInfo:
    """What a plan chose (``fmha_plan_info``)."""

    kernel_family: Union[KernelFamily, int]
    kernel_name: str
    device: int
    device_sm: int
    image_sm: int
    image_is_ptx: bool
    tile_m: int
    tile_n: int
    threads_per_cta: int
    shared_memory_bytes: int
    workspace_bytes: int
    num_splits: int = 1  #: split-KV parts per (sequence, head); 1 = none


def _plan_info(handle: fmha_plan_p) -> PlanInfo:
    raw = FmhaPlanInfo()
    _lib.call("fmha_plan_info_init", ctypes.byref(raw), FMHA_PLAN_INFO_VERSION)
    _lib.call("fmha_plan_get_info", handle, ctypes.byref(raw))
    try:
        family: Union[KernelFamily, int] = KernelFamily(raw.kernel_family)
    except ValueError:
        family = int(raw.kernel_family)
    return PlanInfo(
        kernel_family=family,
        kernel_name=(raw.kernel_name or b"").decode("utf-8", errors="replace"),
        device=int(raw.device),
        device_sm=int(raw.device_sm),
        image_sm=int(raw.image_sm),
        image_is_ptx=bool(raw.image_is_ptx),
        tile_m=int(raw.tile_m),
        tile_n=int(raw.tile_n),
        threads_per_cta=int(raw.threads_per_cta),
        shared_memory_bytes=int(raw.shared_memory_bytes),
        workspace_bytes=int(raw.workspace_bytes),
        num_splits=int(raw.num_splits),
    )


class _PlanHandle:
    """What attention and merge plans share: the lifetime of their
    ``fmha_plan`` handle (both are released by ``fmha_destroy_plan``) and
    the rule that runs pass ``lse`` exactly when the plan writes it.

    ctypes releases the GIL during a foreign call, so :meth:`close` on one
    thread could free the plan while ``fmha_run`` on another is inside the
    library with it. Every call that passes the handle therefore takes it
    with :meth:`_acquire_handle`, which counts the call in flight, and gives
    it back with :meth:`_release_handle`; close() waits for that count to
    reach zero before destroying the plan. The lock is held only to count,
    never across the foreign call, so runs of one plan stay concurrent.
    """

    _KIND = "plan"  # how error messages name it
    _lib: Any
    _descriptor: Union[FmhaDescriptor, FmhaMergeDescriptor]

    def __init__(self) -> None:
        self._handle: Optional[int] = None
        self._in_flight = 0  # calls between _acquire_handle and _release_handle
        self._lock = threading.Lock()  # guards _handle and _in_flight
        self._idle = threading.Condition(self._lock)  # close() waits here for _in_flight == 0

    def close(self) -> None:
        """Release the plan (idempotent). Waits until calls that other
        threads are making with it have returned; calls that start later
        raise ``ValueError``. Work already enqueued is unaffected."""
        with self._idle:
            handle, self._handle = self._handle, None
            while self._in_flight:
                self._idle.wait()
        if handle:
            self._lib.fmha_destroy_plan(fmha_plan_p(handle))

    def __enter__(self: _PlanT) -> _PlanT:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing sensible to do
            pass

    @property
    def closed(self) -> bool:
        return not self._handle

    @property
    def writes_lse(self) -> bool:
        """True when the plan was created with FMHA_FLAG_WRITE_LSE."""
        return bool(self._descriptor.flags & FMHA_FLAG_WRITE_LSE)

    def _check_open(self) -> None:
        """Raise now if closed, before a run does work it would throw away."""
        if not self._handle:
            raise ValueError(f"{self._KIND} is closed")

    def _acquire_handle(self) -> int:
        """The live handle, counted in flight until :meth:`_release_handle`
        (call that in a ``finally``): close() waits for it."""
        # acquire/release rather than ``with lock:`` (about 100 ns less per
        # run on CPython 3.11); the try still releases it on a signal.
        lock = self._lock
        lock.acquire()
        try:
            handle = self._handle
            if handle:
                self._in_flight += 1
        finally:
            lock.release()
        if not handle:
            raise ValueError(f"{self._KIND} is closed")
        return handle

    def _release_handle(self) -> None:
        lock = self._lock  # also the condition's lock: notify under it
        lock.acquire()
        try:
            self._in_flight -= 1
            if not self._in_flight and self._handle is None:
                self._idle.notify_all()  # the last run a close() waits for
        finally:
            lock.release()

    def _check_lse(self, lse: Any) -> None:
        if self.writes_lse and lse is None:
            raise ValueError(f"this {self._KIND} writes LSE (write_lse=True): pass lse=")
        if not self.writes_lse and lse is not None:
            raise ValueError(f"lse was given but the {self._KIND} was created without write_lse=True")


class Plan(_PlanHandle):
    """An ``fmha_plan``: create once, run many times.

    Create it from problem fields (see :mod:`fmha.problem`) or from a
    descriptor::

        with fmha.Plan(batch=2, num_q_heads=16, num_kv_heads=4, seqlen_q=1024,
                       head_dim=128, dtype="bf16", mask="bottom_right") as plan:
            print(plan.info.kernel_name, plan.workspace_size)
            plan.run(q, k, v, o)

    Creating a plan needs the CUDA driver: without it this raises
    :class:`fmha.NoDriverError`. The plan binds to the CUDA context current
    on the calling thread, or else to the primary context of
    ``descriptor.device``. It is released by :meth:`close`, at the end of a
    ``with`` block, or when garbage-collected. A plan may be run from several
    threads at once, and closed from another: close() waits for runs already
    inside the library, and later runs raise ``ValueError``.
    """

    def __init__(self, descriptor: Optional[FmhaDescriptor] = None, **fields: Any) -> None:
        super().__init__()
        if descriptor is not None and fields:
            raise TypeError("pass either a descriptor or problem fields, not both")
        desc = copy_descriptor(descriptor) if descriptor is not None else make_descriptor(**fields)
        handle = fmha_plan_p()
        _lib.call("fmha_create_plan", ctypes.byref(handle), ctypes.byref(desc))
        self._handle = handle.value
        self._lib = _lib.library()  # keeps the library alive for __del__
        self._descriptor = desc
        size = ctypes.c_size_t(0)
        _lib.call("fmha_plan_workspace_size", fmha_plan_p(self._handle), ctypes.byref(size))
        self._workspace_size = int(size.value)
        self._info: Optional[PlanInfo] = None

    # -- properties -------------------------------------------------------
    @property
    def descriptor(self) -> FmhaDescriptor:
        """A copy of the descriptor the plan was created from."""
        return copy_descriptor(self._descriptor)

    @property
    def uses_sinks(self) -> bool:
        """Whether the plan adds attention sinks (runs then need ``sinks=``)."""
        return bool(self._descriptor.flags & FMHA_FLAG_SINKS)

    @property
    def flags(self) -> int:
        """The descriptor's FMHA_FLAG_* bits."""
        return int(self._descriptor.flags)

    @property
    def workspace_size(self) -> int:
        """Bytes of device workspace :meth:`run` needs (may be 0)."""
        return self._workspace_size

    @property
    def info(self) -> PlanInfo:
        """What the plan chose (``fmha_plan_get_info``), as a dataclass."""
        if self._info is None:
            handle = self._acquire_handle()
            try:
                self._info = _plan_info(fmha_plan_p(handle))
            finally:
                self._release_handle()
        return self._info

    # -- running ----------------------------------------------------------
    def run(
        self,
        q: Any,
        k: Any,
        v: Any,
        o: Any,
        lse: Any = None,
        workspace: Any = None,
        stream: Any = None,
        workspace_bytes: Optional[int] = None,
        sinks: Any = None,
        cu_seqlens_q: Any = None,
        cu_seqlens_k: Any = None,
        seqused_k: Any = None,
        block_table: Any = None,
    ) -> None:
        """Enqueue attention on ``stream``; returns without synchronizing.

        ``q``, ``k``, ``v``, ``o``, ``lse``, ``sinks``, the int32 index arrays
        and ``workspace`` are device tensors (torch,
        ``__cuda_array_interface__``, ``__dlpack__``) or raw ``int``
        addresses. Their shapes are *not* checked here: the plan's
        descriptor describes them (use :func:`fmha.attention` and friends
        for checked calls). ``lse`` is required exactly when the plan writes
        LSE; ``sinks`` with FMHA_FLAG_SINKS; ``cu_seqlens_q`` with
        FMHA_FLAG_VARLEN_Q, ``cu_seqlens_k`` with FMHA_FLAG_VARLEN_K,
        ``seqused_k`` with FMHA_FLAG_SEQUSED_K and ``block_table`` with
        FMHA_FLAG_PAGED_KV (arrays the plan does not use are ignored).
        ``workspace_bytes`` defaults to the size of a workspace tensor, or
        to :attr:`workspace_size` for a raw address. ``stream`` defaults to
        the current stream of the framework owning ``q`` (torch or CuPy),
        else the legacy default stream.
        """
        self._check_open()
        self._check_lse(lse)
        stream_ptr = resolve_stream(stream, q)

        keep = []
        ptrs = []  # fmha_tensors' pointers in field order (raw_tensors: 0 for NULL)
        for field, obj in (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse)):
            ptr, alive = data_pointer(obj, field, stream_ptr)
            keep.append(alive)
            ptrs.append(ptr)
        if self.uses_sinks and sinks is None:
            raise ValueError("this plan has attention sinks (FMHA_FLAG_SINKS): pass sinks=")
        sinks_ptr, alive = data_pointer(sinks, "sinks", stream_ptr)
        keep.append(alive)
        ptrs.append(sinks_ptr)
        arrays = {"cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k,
                  "seqused_k": seqused_k, "block_table": block_table}
        flags = self._descriptor.flags
        for flag, field, flag_name in _INDEX_ARRAYS:
            obj = arrays[field]
            if not flags & flag:
                ptrs.append(0)  # not used by this plan: left NULL
                continue
            if obj is None:
                raise ValueError(f"this plan sets {flag_name}: pass {field}=")
            ptr, alive = data_pointer(obj, field, stream_ptr)
            keep.append(alive)
            ptrs.append(ptr)
        tensors = raw_tensors(*ptrs)

        ws_ptr, ws_bytes = 0, 0
        if workspace is not None:
            if isinstance(workspace, int) and not isinstance(workspace, bool):
                ws_ptr, _ = data_pointer(workspace, "workspace")
                ws_bytes = self._workspace_size if workspace_bytes is None else workspace_bytes
            else:
                ws_view = view(workspace, "workspace", stream_ptr)
                wait_for_producers([ws_view], stream_ptr)
                keep.append(ws_view.keepalive)
                ws_ptr = ws_view.ptr
                ws_bytes = nbytes(ws_view) if workspace_bytes is None else workspace_bytes
            if not 0 <= ws_bytes < 2**64:  # as size_t, -1 would wrap to SIZE_MAX: "big enough"
                raise ValueError(f"workspace_bytes={ws_bytes} is not a size_t value")
        run = _lib.fmha_run_untyped()
        handle = self._acquire_handle()  # a close() on another thread now waits for this call
        try:
            status = run(handle, ctypes.addressof(tensors), ws_ptr or None, ws_bytes, stream_ptr or None)
        finally:
            self._release_handle()
        if status != 0:
            raise error_for_status(status, _lib.last_error_message(), "fmha_run")
        del keep

    def __repr__(self) -> str:
        if self.closed:
            return "<fmha.Plan (closed)>"
        d = self._descriptor
        return (
            f"<fmha.Plan batch={d.batch} heads={d.num_q_heads}/{d.num_kv_heads} "
            f"seqlen={d.seqlen_q}x{d.seqlen_k} head_dim={d.head_dim} "
            f"workspace={self._workspace_size}>"
        )


class MergePlan(_PlanHandle):
    """A merge plan (``fmha_create_merge_plan``): combines partial attention
    results over disjoint key sets into the exact result over their union.

    Create it from a :class:`fmha.FmhaMergeDescriptor` or from fields (see
    :func:`fmha.make_merge_descriptor`)::

        with fmha.MergePlan(batch=2, seqlen_q=1, num_heads=32, head_dim=128,
                            num_parts=2, dtype="bf16") as mp:
            mp.run([o1, o2], [lse1, lse2], o)

    Like :class:`Plan` it needs the driver, binds to the current CUDA
    context (or the primary context of ``descriptor.device``), may be run
    from several threads at once (and closed from another, which waits for
    runs in progress), and is released by :meth:`close`, a ``with`` block or
    garbage collection. It needs no workspace.
    """

    _KIND = "merge plan"

    def __init__(self, descriptor: Optional[FmhaMergeDescriptor] = None, **fields: Any) -> None:
        super().__init__()
        if descriptor is not None and fields:
            raise TypeError("pass either a merge descriptor or fields, not both")
        if descriptor is not None:
            desc = FmhaMergeDescriptor.from_buffer_copy(descriptor)
        else:
            desc = make_merge_descriptor(**fields)
        handle = fmha_plan_p()
        _lib.call("fmha_create_merge_plan", ctypes.byref(handle), ctypes.byref(desc))
        self._handle = handle.value
        self._lib = _lib.library()
        self._descriptor = desc

    @property
    def descriptor(self) -> FmhaMergeDescriptor:
        """A copy of the merge descriptor the plan was created from."""
        return FmhaMergeDescriptor.from_buffer_copy(self._descriptor)

    @property
    def num_parts(self) -> int:
        return int(self._descriptor.num_parts)

    @property
    def info(self) -> PlanInfo:
        """What the plan loaded (``fmha_plan_get_info``; ``num_splits`` is the part count)."""
        handle = self._acquire_handle()
        try:
            return _plan_info(fmha_plan_p(handle))
        finally:
            self._release_handle()

    def run(self, o_parts: Sequence[Any], lse_parts: Sequence[Any], o: Any, lse: Any = None,
            stream: Any = None) -> None:
        """Enqueue the merge on ``stream``; returns without synchronizing.

        ``o_parts`` and ``lse_parts`` are sequences of exactly
        :attr:`num_parts` device tensors or ``int`` addresses; ``o`` (and
        ``lse``, required exactly when the plan writes LSE) receive the
        result. Shapes are not checked here (use :func:`fmha.merge`).
        ``stream`` defaults to the current stream of the framework owning
        ``o``, else the legacy default stream.
        """
        self._check_open()
        n = self.num_parts
        o_parts, lse_parts = list(o_parts), list(lse_parts)
        if len(o_parts) != n or len(lse_parts) != n:
            raise ValueError(
                f"this merge plan combines {n} parts: got {len(o_parts)} O parts and {len(lse_parts)} LSE parts"
            )
        self._check_lse(lse)
        stream_ptr = resolve_stream(stream, o)
        keep = []
        o_ptrs = (ctypes.c_void_p * max(n, 1))()
        lse_ptrs = (_FLOAT_P * max(n, 1))()
        for i, (op, lp) in enumerate(zip(o_parts, lse_parts)):
            ptr, alive = data_pointer(op, f"o_parts[{i}]", stream_ptr)
            keep.append(alive)
            o_ptrs[i] = ptr or None
            ptr, alive = data_pointer(lp, f"lse_parts[{i}]", stream_ptr)
            keep.append(alive)
            lse_ptrs[i] = ctypes.cast(ctypes.c_void_p(ptr), _FLOAT_P)
        o_ptr, alive = data_pointer(o, "o", stream_ptr)
        keep.append(alive)
        lse_ptr, alive = data_pointer(lse, "lse", stream_ptr)
        keep.append(alive)
        lse_p = ctypes.cast(ctypes.c_void_p(lse_ptr), _FLOAT_P)
        handle = self._acquire_handle()  # a close() on another thread now waits for this call
        try:
            _lib.call("fmha_run_merge", handle, o_ptrs, lse_ptrs, o_ptr or None, lse_p, stream_ptr or None)
        finally:
            self._release_handle()
        del keep

    def __repr__(self) -> str:
        if self.closed:
            return "<fmha.MergePlan (closed)>"
        d = self._descriptor
        return (f"<fmha.MergePlan parts={d.num_parts} batch={d.batch} seqlen_q={d.seqlen_q} "
                f"heads={d.num_heads} head_dim={d.head_dim}>")



@dataclass(frozen=True)
class CacheInfo:
    """Plan-cache statistics."""

    hits: int
    misses: int
    size: int
    maxsize: int


class PlanCache:
    """Thread-safe LRU cache of plans keyed by every descriptor field.

    Holds attention plans (:class:`Plan`, for an ``FmhaDescriptor``) and
    merge plans (:class:`MergePlan`, for an ``FmhaMergeDescriptor``). An
    evicted plan is not destroyed explicitly: it is released when the last
    reference (possibly a run in progress on another thread) drops.
    """

    def __init__(self, maxsize: int = 128) -> None:
        self._plans = BoundedLru(maxsize)
        self._hits = 0
        self._misses = 0
        self._last: Any = None  # the plan most recently served, any thread

    def get(self, descriptor: Union[FmhaDescriptor, FmhaMergeDescriptor], cache: bool = True) -> Any:
        """The cached plan for ``descriptor``, creating it on a miss. With
        ``cache=False`` (a descriptor that does not identify the CUDA context:
        no device known) a new plan every time, neither kept nor counted."""
        if not cache:
            plan = self._create(descriptor)
            with self._plans.lock:
                self._last = plan
            return plan
        key = descriptor_key(descriptor)
        with self._plans.lock:
            plan = self._plans.get_locked(key)
            if plan is not None:
                self._hits += 1
                self._last = plan
                return plan
            self._misses += 1
        # Create outside the lock: planning may load a module (slow-ish).
        created = self._create(descriptor)
        with self._plans.lock:
            plan = self._plans.put_locked(key, created)  # another thread's plan if it won the race
            self._last = plan
        return plan

    @staticmethod
    def _create(descriptor: Union[FmhaDescriptor, FmhaMergeDescriptor]) -> Any:
        return MergePlan(descriptor) if isinstance(descriptor, FmhaMergeDescriptor) else Plan(descriptor)

    def count_hit(self, plan: Any) -> None:
        """Count a hit served without a lookup: a remembered call form holds
        ``plan``. (Its place in the LRU order is left as it was: finding it
        would hash the whole descriptor on every call.)"""
        with self._plans.lock:
            self._hits += 1
            self._last = plan

    def last_used(self) -> Any:
        """The plan most recently served (looked up, created, uncached, or
        held by a remembered call form), from any thread; None before the
        first or after :meth:`clear`."""
        with self._plans.lock:
            return self._last

    def clear(self) -> None:
        """Drop every cached plan and reset the statistics."""
        with self._plans.lock:
            self._hits = 0
            self._misses = 0
            self._last = None
        self._plans.clear()

    def resize(self, maxsize: int) -> None:
        """Change the capacity (0 disables caching), evicting the oldest."""
        self._plans.resize(maxsize)

    def info(self) -> CacheInfo:
        with self._plans.lock:
            hits, misses = self._hits, self._misses
        return CacheInfo(hits, misses, len(self._plans), self._plans.maxsize)

    def __len__(self) -> int:
        return len(self._plans)
