"""Streams and current device, as seen by the framework that owns the tensors.

No framework is imported here unless the caller's objects already come from
it (then it is already in ``sys.modules``).
"""

from __future__ import annotations

import contextlib
import ctypes
import operator
import sys
from typing import Any, ContextManager, Optional, cast

__all__ = ["framework_of", "stream_handle", "resolve_stream", "device_guard", "wait_for_stream"]


def framework_of(obj: Any) -> Optional[str]:
    """``"torch"`` for a torch.Tensor, ``"cupy"`` for a CuPy array, else None."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        return "torch"
    module = type(obj).__module__ or ""
    if module == "cupy" or module.startswith("cupy."):
        return "cupy"
    return None


def stream_handle(stream: Any) -> int:
    """The ``CUstream`` value of ``stream`` as an int (0 = legacy default stream).

    Accepts an int, a ``ctypes.c_void_p``, an object with ``__cuda_stream__``
    (CUDA stream protocol), ``.cuda_stream`` (torch.cuda.Stream) or ``.ptr``
    (cupy.cuda.Stream), or anything ``int()`` converts (cuda-python's CUstream).
    """
    if stream is None:
        return 0
    if isinstance(stream, bool):
        raise TypeError("stream must be a CUDA stream, not a bool")
    if isinstance(stream, int):
        handle = stream
    elif isinstance(stream, ctypes.c_void_p):
        handle = stream.value or 0
    elif hasattr(stream, "__cuda_stream__"):
        handle = int(stream.__cuda_stream__()[1])
    elif hasattr(stream, "cuda_stream"):
        handle = int(stream.cuda_stream)
    elif hasattr(stream, "ptr"):
        handle = int(stream.ptr)
    else:
        try:
            handle = operator.index(stream)
        except TypeError:
            try:
                handle = int(stream)
            except (TypeError, ValueError):
                raise TypeError(f"cannot get a CUDA stream handle from {type(stream).__name__}") from None
    if not 0 <= handle < 2**64:  # ctypes would wrap it into another handle
        raise ValueError(f"invalid stream handle {handle}")
    return handle


def resolve_stream(stream: Any, like: Any) -> int:
    """The stream to run on: ``stream`` when given, else the current stream of
    the framework that owns ``like`` (torch: of ``like``'s device; CuPy),
    else 0 (the legacy default stream)."""
    if stream is not None:
        return stream_handle(stream)
    framework = framework_of(like)
    if framework == "torch" and like.device.type == "cuda":
        torch = sys.modules["torch"]
        return int(torch.cuda.current_stream(like.device).cuda_stream)
    if framework == "cupy":
        cupy = sys.modules["cupy"]
        return int(cupy.cuda.get_current_stream().ptr)
    return 0


def device_guard(like: Any, device: Optional[int]) -> ContextManager[Any]:
    """Make ``device`` current in the framework owning ``like`` (so its
    context is current on this thread) for the duration of a ``with``."""
    if device is None:
        return contextlib.nullcontext()
    framework = framework_of(like)
    if framework == "torch":
        return cast(ContextManager[Any], sys.modules["torch"].cuda.device(device))
    if framework == "cupy":
        return cast(ContextManager[Any], sys.modules["cupy"].cuda.Device(device))
    return contextlib.nullcontext()


# CUstream handles the driver reads as the default streams (and the
# __cuda_array_interface__ v3 "stream" values for them).
_STREAM_LEGACY, _STREAM_PER_THREAD = 1, 2
_CU_EVENT_DISABLE_TIMING = 2


class _EventApi:
    """The four driver entry points ``wait_for_stream`` needs, from the
    driver libfmha opens ($FMHA_LIBCUDA, else libcuda.so.1); loaded on first
    use, which only arrays that name a producer stream reach."""

    def __init__(self) -> None:
        import os  # noqa: PLC0415

        lib = ctypes.CDLL(os.environ.get("FMHA_LIBCUDA") or "libcuda.so.1")
        vp, u32 = ctypes.c_void_p, ctypes.c_uint
        self.create = self._entry(lib, "cuEventCreate", [ctypes.POINTER(vp), u32])
        self.record = self._entry(lib, "cuEventRecord", [vp, vp])
        self.wait = self._entry(lib, "cuStreamWaitEvent", [vp, vp, u32])
        self.destroy = self._entry(lib, "cuEventDestroy_v2", [vp])

    @staticmethod
    def _entry(lib: Any, name: str, argtypes: Any) -> Any:
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int
        return fn


_event_api: Optional[_EventApi] = None


def _same_stream(a: int, b: int) -> bool:
    legacy = (0, _STREAM_LEGACY)  # libfmha reads 0 as the legacy default stream
    return a == b or (a in legacy and b in legacy)


def wait_for_stream(producer: int, consumer: int, what: str) -> None:
    """Make ``consumer`` wait for the work enqueued so far on ``producer``
    (both CUstream handles), as the __cuda_array_interface__ v3 protocol asks
    of a consumer whose array names a producer stream: an event recorded on
    the producer and waited for on the consumer. Needs a current context (the
    producer's framework made one current when it made the array)."""
    global _event_api
    if _same_stream(producer, consumer):
        return
    if _event_api is None:
        try:
            _event_api = _EventApi()
        except (OSError, AttributeError) as exc:
            raise RuntimeError(f"{what} names producer stream {producer:#x}, and the CUDA driver's event "
                               f"functions to wait for it could not be loaded: {exc}") from None
    api = _event_api
    event = ctypes.c_void_p()
    status = api.create(ctypes.byref(event), _CU_EVENT_DISABLE_TIMING)
    if status == 0:
        status = api.record(event, producer) or api.wait(consumer or None, event, 0)
        api.destroy(event)  # released once the wait is done with it
    if status != 0:
        raise RuntimeError(f"{what} names producer stream {producer:#x}: waiting for it on stream "
                           f"{consumer:#x} failed with CUresult {status}")
