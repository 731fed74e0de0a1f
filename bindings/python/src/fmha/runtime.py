"""Version, build and driver introspection."""

from __future__ import annotations

import ctypes
from typing import NamedTuple, Optional, Tuple, Union

from ._abi import Status
from ._lib import call_status, library
from .errors import error_for_status

__all__ = [
    "VersionInfo",
    "version",
    "version_string",
    "driver_version",
    "embedded_archs",
    "embedded_ptx_arch",
    "status_string",
]


class VersionInfo(NamedTuple):
    """Library version; ``str()`` gives ``"MAJOR.MINOR.PATCH"``."""

    major: int
    minor: int
    patch: int

    @property
    def number(self) -> int:
        """``MAJOR*10000 + MINOR*100 + PATCH``, as ``fmha_version()`` returns."""
        return self.major * 10000 + self.minor * 100 + self.patch

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def version() -> VersionInfo:
    """Run-time version of the loaded libfmha (from ``fmha_version()``)."""
    number = int(library().fmha_version())
    return VersionInfo(number // 10000, (number // 100) % 100, number % 100)


def version_string() -> str:
    """``fmha_version_string()``, e.g. ``"0.1.0"``."""
    raw = library().fmha_version_string()
    return raw.decode("utf-8", errors="replace") if raw else ""


def driver_version() -> Optional[int]:
    """CUDA driver version (e.g. ``13000``), or ``None`` when there is no driver.

    ``None`` means the library reported FMHA_STATUS_NO_DRIVER (libcuda.so.1
    missing; ``$FMHA_LIBCUDA`` can name another path). Any other failure
    raises the matching :class:`fmha.FmhaError`.
    """
    out = ctypes.c_int32(0)
    status, message = call_status("fmha_driver_version", ctypes.byref(out))
    if status == Status.NO_DRIVER:
        return None
    if status != Status.SUCCESS:
        raise error_for_status(status, message, "fmha_driver_version")
    return int(out.value)


def embedded_archs() -> Tuple[int, ...]:
    """Architectures (major*10+minor) this build embeds machine code for, ascending."""
    lib = library()
    count = int(lib.fmha_embedded_archs(None, 0))
    if count <= 0:
        return ()
    buf = (ctypes.c_int32 * count)()
    total = int(lib.fmha_embedded_archs(buf, count))
    return tuple(int(buf[i]) for i in range(min(count, total)))


def embedded_ptx_arch() -> Optional[int]:
    """Virtual architecture of the embedded PTX (e.g. 80), or ``None`` if none."""
    arch = int(library().fmha_embedded_ptx_arch())
    return arch if arch > 0 else None


def status_string(status: Union[Status, int]) -> str:
    """``fmha_status_string()``: e.g. ``"FMHA_STATUS_NOT_SUPPORTED"``."""
    raw = library().fmha_status_string(int(status))
    return raw.decode("utf-8", errors="replace") if raw else ""
