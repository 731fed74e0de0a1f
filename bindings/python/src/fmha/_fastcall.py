"""Repeated calls without re-deriving them.

A serving loop calls attention with the same shapes, strides, dtypes and
options on every layer of every step; only the tensors' addresses change.
The first call of a form takes the checked path (views, validation,
descriptor, plan); when it succeeds on torch tensors, what it derived is
remembered under a key made of every argument's shape, strides, dtype and
device and every option's value. A later call with the same key only reads
the tensors' addresses, allocates its outputs and enqueues ``fmha_run``
(which still checks the addresses: a misaligned tensor raises as before).

Only plain ``torch.Tensor`` arguments qualify (anything else, or an option
that cannot be hashed, takes the checked path every time). The remembered
forms hold their plans, so :func:`fmha.clear_plan_cache` forgets them too,
and their number follows :func:`fmha.set_plan_cache_size`.
"""
from __future__ import annotations

import ctypes
import sys
from enum import Enum
from typing import Any, Callable, Optional, Tuple

from . import _lib
from ._abi import (
    RawTensors,
    FMHA_FLAG_PAGED_KV,
    FMHA_FLAG_SEQUSED_K,
    FMHA_FLAG_SINKS,
    FMHA_FLAG_VARLEN_K,
    FMHA_FLAG_VARLEN_Q,
    FMHA_TENSORS_VERSION,
)
from ._cuda import stream_handle
from ._lru import BoundedLru
from .errors import error_for_status
from .tensors import nbytes

__all__ = ["CallCache", "Slots", "arg_key"]


_SCALARS = (int, float, str, bool)


def arg_key(obj: Any, tensor_type: Any) -> Any:
    """What the checked path reads of an argument: (shape, strides, dtype,
    device ordinal) of a plain tensor; the type and value of None, a
    number, a string, an enum member or a tuple of those. Raises TypeError
    for anything else (the call then takes the checked path)."""
    if obj is None:
        return None
    kind = type(obj)
    if kind is tensor_type:
        return (obj.shape, obj.stride(), obj.dtype, obj.get_device())
    if kind in _SCALARS or isinstance(obj, Enum):
        return (kind, obj)
    if kind is tuple:
        return (kind, tuple(arg_key(x, tensor_type) for x in obj))
    raise TypeError(f"no call key for a {kind.__name__}")


def _current_stream_getter(torch: Any) -> Callable[[Any], int]:
    """device -> handle of torch's current stream there. torch's raw-stream
    query (what Triton uses) when it has one: a few microseconds less per
    call than building a torch.cuda.Stream."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return lambda device: raw(device.index)
    return lambda device: torch.cuda.current_stream(device).cuda_stream


class Slots:
    """The tensors of one call by role (any may be None)."""

    __slots__ = ("q", "k", "v", "out", "lse", "sinks", "cu_seqlens_q", "cu_seqlens_k", "seqused_k",
                 "block_table", "workspace")

    def __init__(self, q: Any, k: Any, v: Any, out: Any = None, lse: Any = None, sinks: Any = None,
                 cu_seqlens_q: Any = None, cu_seqlens_k: Any = None, seqused_k: Any = None,
                 block_table: Any = None, workspace: Any = None) -> None:
        self.q, self.k, self.v, self.out, self.lse, self.sinks = q, k, v, out, lse, sinks
        self.cu_seqlens_q, self.cu_seqlens_k = cu_seqlens_q, cu_seqlens_k
        self.seqused_k, self.block_table, self.workspace = seqused_k, block_table, workspace


def _address(t: Any) -> Optional[int]:
    return None if t is None else t.data_ptr()


class _Form:
    """A remembered call: its plan and the shapes of what a run allocates."""

    __slots__ = ("plan", "device", "current_stream", "out_shape", "lse_shape", "allocate_lse",
                 "workspace_size", "workspace_bytes", "flags", "return_lse")

    def __init__(self, plan: Any, device: Any, out_shape: Tuple[int, ...], lse_shape: Tuple[int, ...],
                 allocate_lse: bool, workspace: Any, return_lse: bool) -> None:
        self.plan = plan  # keeps the handle alive
        # q's torch.device: the key pins the device of every tensor.
        self.device = device
        self.current_stream = _current_stream_getter(sys.modules["torch"])
        plan._check_open()
        self.out_shape, self.lse_shape, self.allocate_lse = out_shape, lse_shape, allocate_lse
        self.workspace_size = plan.workspace_size
        # A caller's workspace has the same shape on every call of this form.
        self.workspace_bytes = (self.workspace_size if workspace is None or self.workspace_size == 0
                                else nbytes(workspace))
        self.flags = int(plan.flags)
        self.return_lse = return_lse

    def run(self, s: Slots, stream: Any) -> Any:
        # The plan may have been closed since (e.g. through fmha.last_plan()):
        # fail before allocating. The handle itself is taken just around
        # fmha_run, counted in flight so that a close() on another thread
        # waits instead of freeing it under the call.
        plan = self.plan
        if not plan._handle:
            raise ValueError("plan is closed")
        torch = sys.modules["torch"]
        q = s.q
        device = self.device
        explicit_stream = stream is not None
        stream_ptr = stream_handle(stream) if explicit_stream else self.current_stream(device)
        allocated = []
        out = s.out
        if out is None:
            out = torch.empty(self.out_shape, dtype=q.dtype, device=device)
            allocated.append(out)
        lse = s.lse
        if lse is None and self.allocate_lse:
            lse = torch.empty(self.lse_shape, dtype=torch.float32, device=device)
            allocated.append(lse)
        ws_ptr = None
        if self.workspace_size:
            ws = s.workspace
            if ws is None:
                ws = torch.empty(self.workspace_size, dtype=torch.uint8, device=device)
                allocated.append(ws)
            ws_ptr = ws.data_ptr()
        if explicit_stream and allocated:
            from .api import _record_stream  # noqa: PLC0415 (api imports this module)
            for t in allocated:
                _record_stream(t, stream_ptr)
        flags = self.flags
        raw = RawTensors(
            FMHA_TENSORS_VERSION, 0, q.data_ptr(), s.k.data_ptr(), s.v.data_ptr(), out.data_ptr(),
            _address(lse),
            _address(s.sinks) if flags & FMHA_FLAG_SINKS else None,
            _address(s.cu_seqlens_q) if flags & FMHA_FLAG_VARLEN_Q else None,
            _address(s.cu_seqlens_k) if flags & FMHA_FLAG_VARLEN_K else None,
            _address(s.seqused_k) if flags & FMHA_FLAG_SEQUSED_K else None,
            _address(s.block_table) if flags & FMHA_FLAG_PAGED_KV else None,
        )
        run = _lib.fmha_run_untyped()
        handle = plan._acquire_handle()
        try:
            status = run(handle, ctypes.addressof(raw), ws_ptr, self.workspace_bytes if ws_ptr else 0,
                         stream_ptr or None)
        finally:
            plan._release_handle()
        if status != 0:
            raise error_for_status(status, _lib.last_error_message(), "fmha_run")
        if self.return_lse:
            return out, lse
        return out


class CallCache:
    """Thread-safe LRU of remembered call forms (see the module docstring)."""

    def __init__(self, maxsize: int) -> None:
        self._forms = BoundedLru(maxsize)

    def key(self, name: str, args: Tuple[Any, ...]) -> Any:
        """The key of a call of entry point ``name`` with ``args`` (every
        argument that shapes the call: tensors and options), or None when it
        cannot have one (the call then takes the checked path)."""
        if self._forms.maxsize == 0:
            return None
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        tensor_type = torch.Tensor
        parts = []
        try:
            for a in args:  # arg_key, with its two common cases inline (a serving loop's cost)
                kind = type(a)
                if a is None:
                    parts.append(None)
                elif kind is tensor_type:
                    parts.append((a.shape, a.stride(), a.dtype, a.get_device()))
                else:
                    parts.append(arg_key(a, tensor_type))
            key = (name, tuple(parts))
            hash(key)
        except TypeError:
            return None
        return key

    def get(self, key: Any) -> Optional[_Form]:
        return self._forms.get(key)

    def remember(self, key: Any, plan: Any, device: Any, out_shape: Tuple[int, ...], lse_shape: Tuple[int, ...],
                 allocate_lse: bool, workspace_view: Any, return_lse: bool) -> None:
        """Store the form of a call that just ran on the checked path
        (``device``: q's torch.device)."""
        self._forms.put(key, _Form(plan, device, tuple(out_shape), tuple(lse_shape), allocate_lse,
                                   workspace_view, return_lse))

    def clear(self) -> None:
        self._forms.clear()

    def resize(self, maxsize: int) -> None:
        self._forms.resize(maxsize)

    def __len__(self) -> int:
        return len(self._forms)
