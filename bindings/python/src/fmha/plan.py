"""Plans: a validated problem bound to a CUDA context and a kernel.

:class:`Plan` wraps ``fmha_plan``; :class:`PlanCache` is the LRU cache the
high-level :func:`fmha.attention` uses so that repeated calls do not re-plan.
"""

from __future__ import annotations

import ctypes
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

from ._abi import (
    FMHA_FLAG_SINKS,
    FMHA_FLAG_WRITE_LSE,
    FMHA_PLAN_INFO_VERSION,
    FMHA_TENSORS_VERSION,
    FmhaDescriptor,
    FmhaPlanInfo,
    FmhaTensors,
    KernelFamily,
    fmha_plan_p,
)
from . import _lib
from ._cuda import resolve_stream
from .problem import copy_descriptor, descriptor_key, make_descriptor
from .tensors import data_pointer, nbytes, view

__all__ = ["PlanInfo", "Plan", "PlanCache", "CacheInfo"]


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


class Plan:
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
    threads at once.
    """

    def __init__(self, descriptor: Optional[FmhaDescriptor] = None, **fields: Any) -> None:
        self._handle: Optional[int] = None
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

    # -- lifetime ---------------------------------------------------------
    def close(self) -> None:
        """Release the plan (idempotent). Runs already enqueued are unaffected."""
        handle, self._handle = self._handle, None
        if handle:
            self._lib.fmha_destroy_plan(fmha_plan_p(handle))

    def __enter__(self) -> "Plan":
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

    def _live_handle(self) -> fmha_plan_p:
        if not self._handle:
            raise ValueError("plan is closed")
        return fmha_plan_p(self._handle)

    # -- properties -------------------------------------------------------
    @property
    def descriptor(self) -> FmhaDescriptor:
        """A copy of the descriptor the plan was created from."""
        return copy_descriptor(self._descriptor)

    @property
    def writes_lse(self) -> bool:
        """True when the plan was created with FMHA_FLAG_WRITE_LSE."""
        return bool(self._descriptor.flags & FMHA_FLAG_WRITE_LSE)

    @property
    def uses_sinks(self) -> bool:
        """Whether the plan adds attention sinks (runs then need ``sinks=``)."""
        return bool(self._descriptor.flags & FMHA_FLAG_SINKS)

    @property
    def workspace_size(self) -> int:
        """Bytes of device workspace :meth:`run` needs (may be 0)."""
        return self._workspace_size

    @property
    def info(self) -> PlanInfo:
        """What the plan chose (``fmha_plan_get_info``), as a dataclass."""
        if self._info is None:
            raw = FmhaPlanInfo()
            _lib.call("fmha_plan_info_init", ctypes.byref(raw), FMHA_PLAN_INFO_VERSION)
            _lib.call("fmha_plan_get_info", self._live_handle(), ctypes.byref(raw))
            try:
                family: Union[KernelFamily, int] = KernelFamily(raw.kernel_family)
            except ValueError:
                family = int(raw.kernel_family)
            self._info = PlanInfo(
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
            )
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
    ) -> None:
        """Enqueue attention on ``stream``; returns without synchronizing.

        ``q``, ``k``, ``v``, ``o``, ``lse`` and ``workspace`` are device
        tensors (torch, ``__cuda_array_interface__``, ``__dlpack__``) or raw
        ``int`` addresses. Their shapes are *not* checked here: the plan's
        descriptor describes them (use :func:`fmha.attention` for checked
        calls). ``lse`` is required exactly when the plan writes LSE.
        ``workspace_bytes`` defaults to the size of a workspace tensor, or
        to :attr:`workspace_size` for a raw address. ``stream`` defaults to
        the current stream of the framework owning ``q`` (torch or CuPy),
        else the legacy default stream.
        """
        handle = self._live_handle()
        if self.writes_lse and lse is None:
            raise ValueError("this plan writes LSE (write_lse=True): pass lse=")
        if not self.writes_lse and lse is not None:
            raise ValueError("lse was given but the plan was created without write_lse=True")
        stream_ptr = resolve_stream(stream, q)

        keep = []
        tensors = FmhaTensors()
        _lib.call("fmha_tensors_init", ctypes.byref(tensors), FMHA_TENSORS_VERSION)
        for field, obj in (("q", q), ("k", k), ("v", v), ("o", o)):
            ptr, alive = data_pointer(obj, field, stream_ptr)
            keep.append(alive)
            setattr(tensors, field, ptr)
        lse_ptr, alive = data_pointer(lse, "lse", stream_ptr)
        keep.append(alive)
        tensors.lse = ctypes.cast(ctypes.c_void_p(lse_ptr), ctypes.POINTER(ctypes.c_float))
        if self.uses_sinks and sinks is None:
            raise ValueError("this plan has attention sinks (FMHA_FLAG_SINKS): pass sinks=")
        sinks_ptr, alive = data_pointer(sinks, "sinks", stream_ptr)
        keep.append(alive)
        tensors.sinks = ctypes.cast(ctypes.c_void_p(sinks_ptr), ctypes.POINTER(ctypes.c_float))

        ws_ptr, ws_bytes = 0, 0
        if workspace is not None:
            if isinstance(workspace, int) and not isinstance(workspace, bool):
                ws_ptr = workspace
                ws_bytes = self._workspace_size if workspace_bytes is None else workspace_bytes
            else:
                ws_view = view(workspace, "workspace", stream_ptr)
                keep.append(ws_view.keepalive)
                ws_ptr = ws_view.ptr
                ws_bytes = nbytes(ws_view) if workspace_bytes is None else workspace_bytes
        _lib.call("fmha_run", handle, ctypes.byref(tensors), ws_ptr or None, ws_bytes, stream_ptr or None)
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


@dataclass(frozen=True)
class CacheInfo:
    """Plan-cache statistics."""

    hits: int
    misses: int
    size: int
    maxsize: int


class PlanCache:
    """Thread-safe LRU cache of plans keyed by every descriptor field.

    An evicted plan is not destroyed explicitly: it is released when the
    last reference (possibly a run in progress on another thread) drops.
    """

    def __init__(self, maxsize: int = 128) -> None:
        self._maxsize = max(0, int(maxsize))
        self._plans: "OrderedDict[Tuple[Any, ...], Plan]" = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def get(self, descriptor: FmhaDescriptor) -> Plan:
        """The cached plan for ``descriptor``, creating it on a miss."""
        key = descriptor_key(descriptor)
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
                self._hits += 1
                return plan
            self._misses += 1
        # Create outside the lock: planning may load a module (slow-ish).
        plan = Plan(descriptor)
        with self._lock:
            existing = self._plans.get(key)
            if existing is not None:  # another thread won the race
                self._plans.move_to_end(key)
                return existing
            if self._maxsize > 0:
                self._plans[key] = plan
                while len(self._plans) > self._maxsize:
                    self._plans.popitem(last=False)
        return plan

    def clear(self) -> None:
        """Drop every cached plan and reset the statistics."""
        with self._lock:
            self._plans.clear()
            self._hits = 0
            self._misses = 0

    def resize(self, maxsize: int) -> None:
        """Change the capacity (0 disables caching), evicting the oldest."""
        with self._lock:
            self._maxsize = max(0, int(maxsize))
            while len(self._plans) > self._maxsize:
                self._plans.popitem(last=False)

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self._plans), self._maxsize)

    def __len__(self) -> int:
        with self._lock:
            return len(self._plans)
