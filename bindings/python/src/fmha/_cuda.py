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

__all__ = ["framework_of", "stream_handle", "resolve_stream", "device_guard"]


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
