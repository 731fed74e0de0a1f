"""Repeated calls without re-deriving them.

A serving loop calls attention with the same shapes, strides, dtypes and
options on every layer of every step; only the tensors' addresses change.
The first call of a form takes the checked path (views, validation,
descriptor, plan); when it succeeds on torch tensors, what it derived is
remembered under a key made of every tensor argument's shape, strides,
dtype and device and every option's type and value. A later call with the
same key only reads the tensors' addresses, allocates its outputs (and any
workspace, as a caching-allocator block given back right after the enqueue)
and enqueues ``fmha_run`` (which still checks the addresses: a misaligned
tensor raises as before).

Only plain ``torch.Tensor`` arguments qualify, and options that are None,
numbers, strings, enum members or tuples of those; anything else (a tensor
in an option's place included) takes the checked path every time. The
remembered forms hold their plans, so :func:`fmha.clear_plan_cache` forgets
them too, and their number follows :func:`fmha.set_plan_cache_size`.
"""
from __future__ import annotations

import ctypes
import sys
from enum import Enum
from typing import Any, Callable, Optional, Tuple

from . import _lib
from ._abi import (
    FMHA_FLAG_PAGED_KV,
    FMHA_FLAG_SEQUSED_K,
    FMHA_FLAG_SINKS,
    FMHA_FLAG_VARLEN_K,
    FMHA_FLAG_VARLEN_Q,
    raw_tensors,
)
from ._cuda import stream_handle
from ._lru import SecondChanceMap
from .errors import error_for_status
from .tensors import nbytes

__all__ = ["CallCache", "call_tensors", "option_key", "slot_key"]

# Positions in the tuple of a call's tensors (``call_tensors``): what the key
# reads of them and what a run takes their addresses from.
Q, K, V, OUT, LSE, SINKS, CU_SEQLENS_Q, CU_SEQLENS_K, SEQUSED_K, BLOCK_TABLE, WORKSPACE = range(11)


def call_tensors(q: Any, k: Any, v: Any, out: Any = None, lse: Any = None, sinks: Any = None,
                 cu_seqlens_q: Any = None, cu_seqlens_k: Any = None, seqused_k: Any = None,
                 block_table: Any = None, workspace: Any = None) -> Tuple[Any, ...]:
    """The tensors of one call by role, in the positions above (any may be
    None). The entry points build this tuple inline; this spells it out."""
    return (q, k, v, out, lse, sinks, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, workspace)


_SCALARS = (int, float, str, bool)
# Option types whose value and type are the key as they are.
_PLAIN_OPTION_TYPES = frozenset((type(None), bool, int, float, str))


def option_key(obj: Any) -> Any:
    """What the checked path reads of an option: the type and value of None,
    a number, a string, an enum member or a tuple of those. Raises TypeError
    for anything else, a tensor included: an option is read by value, which
    a key of its shape would not capture (the call then takes the checked
    path)."""
    if obj is None:
        return None
    kind = type(obj)
    if kind in _SCALARS:
        return (kind, obj)
    if isinstance(obj, Enum):
        hash(obj)  # an enum of one's own may be unhashable: TypeError, as for other types
        return (kind, obj)
    if kind is tuple:
        return (kind, tuple(option_key(x) for x in obj))
    raise TypeError(f"no call key for a {kind.__name__}")


def slot_key(obj: Any, tensor_type: Any) -> Any:
    """What the checked path reads of a tensor argument: (shape, strides,
    dtype, device ordinal) of a plain tensor, None, or the value of a
    scalar in its place (``cache_seqlens`` may be an int)."""
    if obj is None:
        return None
    if type(obj) is tensor_type:
        return (obj.shape, obj.stride(), obj.dtype, obj.get_device())
    return option_key(obj)


def _current_stream_getter(torch: Any) -> Callable[[Any], int]:
    """device -> handle of torch's current stream there. torch's raw-stream
    query (what Triton uses) when it has one: a few microseconds less per
    call than building a torch.cuda.Stream."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return lambda device: raw(device.index)
    return lambda device: torch.cuda.current_stream(device).cuda_stream


def _address(t: Any) -> int:
    return 0 if t is None else t.data_ptr()


def _contiguous_strides(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    strides, step = [], 1
    for extent in reversed(shape):
        strides.append(step)
        step *= max(extent, 1)
    return tuple(reversed(strides))


def _raw_allocator(torch: Any) -> Optional[Tuple[Callable[..., int], Callable[[int], None], Callable[[], int]]]:
    """(alloc(bytes, stream) -> address, free(address), current device) of
    torch's caching allocator, or None where this torch lacks them. A
    workspace block taken and given back around one enqueue, as a tensor
    dropped after its last use is: the allocator hands it out again only in
    that stream's order (or, under graph capture, from the graph's pool).
    0.7-1.5 us per call where a torch.empty tensor took 2.2-4.1 (H200 host)."""
    c = torch._C
    alloc = getattr(c, "_cuda_cudaCachingAllocator_raw_alloc", None)
    free = getattr(c, "_cuda_cudaCachingAllocator_raw_delete", None)
    current = getattr(c, "_cuda_getDevice", None)
    if alloc is None or free is None or current is None:
        return None
    return alloc, free, current


class _Form:
    """A remembered call: its plan and the shapes of what a run allocates."""

    __slots__ = ("plan", "device", "device_index", "current_stream", "out_shape", "out_like_q", "lse_shape",
                 "allocate_lse", "workspace_size", "workspace_bytes", "flags", "return_lse", "raw_allocator")

    def __init__(self, plan: Any, q: Any, out_shape: Tuple[int, ...], lse_shape: Tuple[int, ...],
                 allocate_lse: bool, workspace: Any, return_lse: bool) -> None:
        self.plan = plan  # keeps the handle alive
        torch = sys.modules["torch"]
        # q's torch.device: the key pins the device of every tensor.
        self.device = q.device
        self.device_index = self.device.index
        self.current_stream = _current_stream_getter(torch)
        plan._check_open()
        self.out_shape, self.lse_shape, self.allocate_lse = out_shape, lse_shape, allocate_lse
        # The key pins q's shape and strides: when q is laid out as the
        # checked path's out is (contiguous, same shape), torch.empty_like(q)
        # makes that out with the least argument parsing.
        self.out_like_q = tuple(q.shape) == out_shape and tuple(q.stride()) == _contiguous_strides(out_shape)
        self.workspace_size = plan.workspace_size
        # A caller's workspace has the same shape on every call of this form.
        self.workspace_bytes = (self.workspace_size if workspace is None or self.workspace_size == 0
                                else nbytes(workspace))
        self.flags = int(plan.flags)
        self.return_lse = return_lse
        self.raw_allocator = _raw_allocator(torch) if self.workspace_size and self.device_index is not None else None

    def run(self, tensors: Tuple[Any, ...], stream: Any) -> Any:
        """Enqueue the plan on ``tensors`` (positions as in call_tensors)."""
        # The plan may have been closed since (e.g. through fmha.last_plan()):
        # fail before allocating. The handle itself is taken just around
        # fmha_run, counted in flight so that a close() on another thread
        # waits instead of freeing it under the call.
        plan = self.plan
        if not plan._handle:
            raise ValueError("plan is closed")
        torch = sys.modules["torch"]
        q = tensors[Q]
        device = self.device
        explicit_stream = stream is not None
        stream_ptr = stream_handle(stream) if explicit_stream else self.current_stream(device)
        allocated = []
        out = tensors[OUT]
        if out is None:
            out = (torch.empty_like(q) if self.out_like_q
                   else torch.empty(self.out_shape, dtype=q.dtype, device=device))
            allocated.append(out)
        lse = tensors[LSE]
        if lse is None and self.allocate_lse:
            lse = torch.empty(self.lse_shape, dtype=torch.float32, device=device)
            allocated.append(lse)
        ws_ptr = None
        block = None  # a caching-allocator block given back after the enqueue
        if self.workspace_size:
            ws = tensors[WORKSPACE]
            raw_allocator = self.raw_allocator
            if ws is not None:
                ws_ptr = ws.data_ptr()
            elif raw_allocator is not None and raw_allocator[2]() == self.device_index:
                block = ws_ptr = raw_allocator[0](self.workspace_size, stream_ptr)
            else:
                ws = torch.empty(self.workspace_size, dtype=torch.uint8, device=device)
                allocated.append(ws)
                ws_ptr = ws.data_ptr()
        try:
            if explicit_stream and allocated:
                from .api import _record_stream  # noqa: PLC0415 (api imports this module)
                for t in allocated:
                    _record_stream(t, stream_ptr)
            flags = self.flags
            raw = raw_tensors(
                q.data_ptr(), tensors[K].data_ptr(), tensors[V].data_ptr(), out.data_ptr(),
                _address(lse),
                _address(tensors[SINKS]) if flags & FMHA_FLAG_SINKS else 0,
                _address(tensors[CU_SEQLENS_Q]) if flags & FMHA_FLAG_VARLEN_Q else 0,
                _address(tensors[CU_SEQLENS_K]) if flags & FMHA_FLAG_VARLEN_K else 0,
                _address(tensors[SEQUSED_K]) if flags & FMHA_FLAG_SEQUSED_K else 0,
                _address(tensors[BLOCK_TABLE]) if flags & FMHA_FLAG_PAGED_KV else 0,
            )
            run = _lib.fmha_run_untyped()
            handle = plan._acquire_handle()
            try:
                status = run(handle, ctypes.addressof(raw), ws_ptr, self.workspace_bytes if ws_ptr else 0,
                             stream_ptr or None)
            finally:
                plan._release_handle()
        finally:
            if block is not None:
                self.raw_allocator[1](block)
        if status != 0:
            raise error_for_status(status, _lib.last_error_message(), "fmha_run")
        if self.return_lse:
            return out, lse
        return out


class CallCache:
    """Thread-safe store of remembered call forms (see the module docstring):
    a read is a dict lookup; eviction is SecondChanceMap's, close to LRU."""

    def __init__(self, maxsize: int) -> None:
        self._forms = SecondChanceMap(maxsize)
        # The lookup every remembered call makes, without a method in between.
        self.get: Callable[[Any], Optional[_Form]] = self._forms.get

    def key(self, name: str, tensors: Tuple[Any, ...], options: Tuple[Any, ...]) -> Any:
        """The key of a call of entry point ``name`` with ``tensors`` (as in
        call_tensors) and ``options`` (every other argument that shapes the
        call), or None when it cannot have one (the call then takes the
        checked path)."""
        if self._forms.maxsize == 0:
            return None
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        tensor_type = torch.Tensor
        workspace = tensors[WORKSPACE]
        if workspace is not None and type(workspace) is not tensor_type:
            return None  # an address (int) or another framework's buffer: a run reads it as a tensor
        try:
            # slot_key and option_key with their common cases inline: this
            # runs on every call of a serving loop.
            sigs = tuple([None if a is None
                          else (a.shape, a.stride(), a.dtype, a.get_device()) if type(a) is tensor_type
                          else slot_key(a, tensor_type)
                          for a in tensors])
            types = tuple(map(type, options))
            if _PLAIN_OPTION_TYPES.issuperset(types):
                # The types keep True, 1 and 1.0 apart (they hash alike).
                return (name, sigs, options, types)
            return (name, sigs, tuple([option_key(o) for o in options]))
        except TypeError:
            return None

    def remember(self, key: Any, plan: Any, q: Any, out_shape: Tuple[int, ...], lse_shape: Tuple[int, ...],
                 allocate_lse: bool, workspace_view: Any, return_lse: bool) -> None:
        """Store the form of a call that just ran on the checked path (``q``:
        its query tensor)."""
        self._forms.put(key, _Form(plan, q, tuple(out_shape), tuple(lse_shape), allocate_lse,
                                   workspace_view, return_lse))

    def clear(self) -> None:
        self._forms.clear()

    def resize(self, maxsize: int) -> None:
        self._forms.resize(maxsize)

    def __len__(self) -> int:
        return len(self._forms)
