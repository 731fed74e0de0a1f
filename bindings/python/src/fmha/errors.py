"""Exceptions raised by the bindings.

Every failing libfmha call raises a subclass of :class:`FmhaError` that
carries the library's status (:class:`fmha.Status`) and its message (from
``fmha_last_error_message()``), e.g.::

    try:
        fmha.Plan(batch=1, num_q_heads=8, seqlen_q=1, head_dim=80)
    except fmha.NotSupportedError as e:
        print(e.status.name, e.message)

Where a Python built-in exception has the same meaning the class also
derives from it (``InvalidArgumentError`` is a ``ValueError``,
``OutOfMemoryError`` a ``MemoryError``), so generic handlers still work.

:class:`LibraryLoadError` is separate: it means libfmha.so itself could not
be found or loaded, and lists every place that was tried.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple, Type, Union

from ._abi import Status

__all__ = [
    "FmhaError",
    "InvalidArgumentError",
    "NotSupportedError",
    "VersionMismatchError",
    "NoDriverError",
    "NoDeviceError",
    "DriverError",
    "MisalignedError",
    "WorkspaceTooSmallError",
    "OutOfMemoryError",
    "NoKernelImageError",
    "ContextMismatchError",
    "InternalError",
    "LibraryLoadError",
    "error_for_status",
]


class FmhaError(Exception):
    """A libfmha call failed.

    Attributes:
        status: the library's status; a :class:`Status` member, or a plain
            ``int`` for a status this version of the bindings does not know.
        message: the library's explanation (names the field, value and rule).
        function: the C function that failed, e.g. ``"fmha_create_plan"``.
    """

    def __init__(self, status: Union[Status, int], message: str, function: Optional[str] = None) -> None:
        self.status = status
        self.message = message
        self.function = function
        super().__init__(status, message, function)

    def __str__(self) -> str:
        if isinstance(self.status, Status):
            text = f"FMHA_STATUS_{self.status.name}"
        else:
            text = f"status {int(self.status)}"
        if self.function:
            text = f"{self.function}: {text}"
        return f"{text}: {self.message}" if self.message else text


class InvalidArgumentError(FmhaError, ValueError):
    """FMHA_STATUS_INVALID_ARGUMENT: a field or argument is invalid."""


class NotSupportedError(FmhaError):
    """FMHA_STATUS_NOT_SUPPORTED: valid problem, but no kernel for it here."""


class VersionMismatchError(FmhaError):
    """FMHA_STATUS_VERSION_MISMATCH: a struct version the library does not know."""


class NoDriverError(FmhaError):
    """FMHA_STATUS_NO_DRIVER: libcuda.so.1 missing or lacking an entry point."""


class NoDeviceError(FmhaError):
    """FMHA_STATUS_NO_DEVICE: no usable CUDA device (or bad ordinal)."""


class DriverError(FmhaError):
    """FMHA_STATUS_DRIVER_ERROR: a CUDA driver call failed."""


class MisalignedError(FmhaError, ValueError):
    """FMHA_STATUS_MISALIGNED: a pointer or stride breaks the kernels' alignment."""


class WorkspaceTooSmallError(FmhaError, ValueError):
    """FMHA_STATUS_WORKSPACE_TOO_SMALL: less workspace than the plan needs."""


class OutOfMemoryError(FmhaError, MemoryError):
    """FMHA_STATUS_OUT_OF_MEMORY: a host allocation failed."""


class NoKernelImageError(FmhaError):
    """FMHA_STATUS_NO_KERNEL_IMAGE: no embedded image runs on this device."""


class ContextMismatchError(FmhaError):
    """FMHA_STATUS_CONTEXT_MISMATCH: stream and plan belong to different contexts."""


class InternalError(FmhaError):
    """FMHA_STATUS_INTERNAL_ERROR: a bug in libfmha; please report it."""


_CLASS_FOR_STATUS: Dict[Status, Type[FmhaError]] = {
    Status.INVALID_ARGUMENT: InvalidArgumentError,
    Status.NOT_SUPPORTED: NotSupportedError,
    Status.VERSION_MISMATCH: VersionMismatchError,
    Status.NO_DRIVER: NoDriverError,
    Status.NO_DEVICE: NoDeviceError,
    Status.DRIVER_ERROR: DriverError,
    Status.MISALIGNED: MisalignedError,
    Status.WORKSPACE_TOO_SMALL: WorkspaceTooSmallError,
    Status.OUT_OF_MEMORY: OutOfMemoryError,
    Status.NO_KERNEL_IMAGE: NoKernelImageError,
    Status.CONTEXT_MISMATCH: ContextMismatchError,
    Status.INTERNAL_ERROR: InternalError,
}


def to_status(value: int) -> Union[Status, int]:
    """``Status(value)`` when known, else the plain ``int``."""
    try:
        return Status(value)
    except ValueError:
        return int(value)


def error_for_status(status: int, message: str, function: Optional[str] = None) -> FmhaError:
    """Build (not raise) the exception matching a non-success ``status``."""
    st = to_status(status)
    cls = _CLASS_FOR_STATUS.get(st, FmhaError) if isinstance(st, Status) else FmhaError
    return cls(st, message, function)


class LibraryLoadError(OSError):
    """libfmha.so could not be loaded from any candidate location.

    Attributes:
        attempts: ``(candidate, reason)`` for every candidate tried, in order.
    """

    def __init__(self, attempts: List[Tuple[str, str]], hint: str = "") -> None:
        self.attempts = list(attempts)
        lines = ["could not load libfmha; tried:"]
        if not self.attempts:
            lines.append("  (no candidate)")
        for candidate, reason in self.attempts:
            lines.append(f"  {candidate}: {reason}")
        if hint:
            lines.append(hint)
        super().__init__("\n".join(lines))
