"""Finding and loading libfmha.so, and declaring its functions for ctypes.

Lookup order (first success wins):

1. ``$FMHA_LIBRARY``: a full path to the library. When this variable is set
   nothing else is tried, so a typo cannot silently pick up another copy.
2. A ``libfmha.so*`` file next to the package (inside the ``fmha`` package
   directory, then its parent directory).
3. The system loader: ``ctypes.util.find_library("fmha")``, then
   ``libfmha.so.0``, then ``libfmha.so`` (``LD_LIBRARY_PATH``, ld.so.cache).

A candidate that loads but lacks a function, or whose version does not
match the header these bindings mirror (``_abi.FMHA_VERSION_*``: the same
major version, and before 1.0 the same minor version too), is rejected with
that reason, naming both versions, and the search goes on. When every
candidate fails, :class:`LibraryLoadError` lists each one (its path or
name) and why it failed.

The library is loaded lazily, on first use, so ``import fmha`` works on a
machine without it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ._abi import (
    FMHA_VERSION_MAJOR,
    FMHA_VERSION_MINOR,
    FMHA_VERSION_PATCH,
    FmhaDescriptor,
    FmhaMergeDescriptor,
    FmhaPlanInfo,
    FmhaStrides,
    FmhaTensors,
    c_enum,
    fmha_plan_p,
    fmha_stream,
)
from .errors import LibraryLoadError, error_for_status

__all__ = ["ENV_VAR", "PROTOTYPES", "library", "library_path", "load", "call", "last_error_message"]

#: Environment variable naming the library file to load.
ENV_VAR = "FMHA_LIBRARY"

_P = ctypes.POINTER

#: Every function of the header: name -> (restype, argtypes).
PROTOTYPES: Dict[str, Tuple[Any, List[Any]]] = {
    "fmha_version": (ctypes.c_uint32, []),
    "fmha_version_string": (ctypes.c_char_p, []),
    "fmha_status_string": (ctypes.c_char_p, [c_enum]),
    "fmha_last_error_message": (ctypes.c_char_p, []),
    "fmha_last_error_status": (c_enum, []),
    "fmha_clear_last_error": (None, []),
    "fmha_descriptor_init": (c_enum, [_P(FmhaDescriptor), ctypes.c_uint32]),
    "fmha_strides_bshd": (c_enum, [_P(FmhaStrides), ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]),
    "fmha_strides_bhsd": (c_enum, [_P(FmhaStrides), ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]),
    "fmha_check_support": (c_enum, [_P(FmhaDescriptor), ctypes.c_int32]),
    "fmha_create_plan": (c_enum, [_P(fmha_plan_p), _P(FmhaDescriptor)]),
    "fmha_destroy_plan": (None, [fmha_plan_p]),
    "fmha_plan_workspace_size": (c_enum, [fmha_plan_p, _P(ctypes.c_size_t)]),
    "fmha_plan_get_info": (c_enum, [fmha_plan_p, _P(FmhaPlanInfo)]),
    "fmha_plan_info_init": (c_enum, [_P(FmhaPlanInfo), ctypes.c_uint32]),
    "fmha_tensors_init": (c_enum, [_P(FmhaTensors), ctypes.c_uint32]),
    "fmha_run": (c_enum, [fmha_plan_p, _P(FmhaTensors), ctypes.c_void_p, ctypes.c_size_t, fmha_stream]),
    "fmha_check_block_table": (c_enum, [_P(FmhaDescriptor), _P(ctypes.c_int32), _P(ctypes.c_int32)]),
    "fmha_merge_descriptor_init": (c_enum, [_P(FmhaMergeDescriptor), ctypes.c_uint32]),
    "fmha_create_merge_plan": (c_enum, [_P(fmha_plan_p), _P(FmhaMergeDescriptor)]),
    "fmha_run_merge": (
        c_enum,
        [fmha_plan_p, _P(ctypes.c_void_p), _P(_P(ctypes.c_float)), ctypes.c_void_p, _P(ctypes.c_float), fmha_stream],
    ),
    "fmha_embedded_archs": (ctypes.c_int32, [_P(ctypes.c_int32), ctypes.c_int32]),
    "fmha_embedded_ptx_arch": (ctypes.c_int32, []),
    "fmha_driver_version": (c_enum, [_P(ctypes.c_int32)]),
}

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_MIRRORED = f"{FMHA_VERSION_MAJOR}.{FMHA_VERSION_MINOR}.{FMHA_VERSION_PATCH}"

_lock = threading.Lock()
_loaded: Optional[ctypes.CDLL] = None
_loaded_path: Optional[str] = None


def _declare(lib: ctypes.CDLL) -> Optional[str]:
    """Set restype/argtypes of every function; return a reason on failure."""
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            return f"loaded, but has no symbol {name} (older or foreign library?)"
        fn.restype = restype
        fn.argtypes = argtypes
    number = int(lib.fmha_version())
    major, minor = number // 10000, number // 100 % 100
    found = f"libfmha {major}.{minor}.{number % 100}"
    if major != FMHA_VERSION_MAJOR:
        return (
            f"loaded, but it is {found}; these bindings mirror the {_MIRRORED} header and need "
            f"{FMHA_VERSION_MAJOR}.x"
        )
    # Before 1.0 a minor release may change the struct layouts (fmha.h).
    if major == 0 and minor != FMHA_VERSION_MINOR:
        return (
            f"loaded, but it is {found}; these bindings mirror the {_MIRRORED} header and need "
            f"{FMHA_VERSION_MAJOR}.{FMHA_VERSION_MINOR}.x (before 1.0 the minor version must match too)"
        )
    return None


def _try_load(candidate: str, attempts: List[Tuple[str, str]], must_exist: bool) -> Optional[ctypes.CDLL]:
    """dlopen one candidate; record the reason and return None when it fails."""
    if must_exist:
        if not os.path.exists(candidate):
            attempts.append((candidate, "no such file"))
            return None
        if os.path.isdir(candidate):
            attempts.append((candidate, "is a directory, not the library file"))
            return None
    try:
        lib = ctypes.CDLL(candidate)
    except OSError as exc:
        attempts.append((candidate, f"dlopen failed: {exc}"))
        return None
    reason = _declare(lib)
    if reason is not None:
        attempts.append((candidate, reason))
        return None
    return lib


def _package_candidates(package_dir: str) -> List[str]:
    """libfmha.so* files in the package directory, then in its parent."""
    found: List[str] = []
    for directory in (package_dir, os.path.dirname(package_dir)):
        names = sorted(glob.glob(os.path.join(glob.escape(directory), "libfmha.so*")))
        # Prefer the plain name, then the SONAME, then fully versioned files.
        names.sort(key=lambda p: (len(os.path.basename(p)), p))
        found.extend(n for n in names if os.path.isfile(n))
    return found


def load(
    env: Optional[Mapping[str, str]] = None,
    package_dir: Optional[str] = None,
    use_system: bool = True,
    system_names: Sequence[str] = ("libfmha.so.0", "libfmha.so"),
) -> Tuple[ctypes.CDLL, str]:
    """Find and load libfmha without caching; return ``(lib, what_was_loaded)``.

    The parameters exist for tests; :func:`library` calls this with the real
    environment. Raises :class:`LibraryLoadError` listing every attempt.
    """
    env = os.environ if env is None else env
    package_dir = _PACKAGE_DIR if package_dir is None else package_dir
    attempts: List[Tuple[str, str]] = []

    explicit = env.get(ENV_VAR, "")
    if explicit:
        lib = _try_load(explicit, attempts, must_exist=True)
        if lib is not None:
            return lib, explicit
        attempts[-1] = (f"{ENV_VAR}={explicit}", attempts[-1][1])
        raise LibraryLoadError(
            attempts,
            hint=f"{ENV_VAR} is set, so no other location was tried; fix or unset it.",
        )
    attempts.append((f"{ENV_VAR}", "not set"))

    local = _package_candidates(package_dir)
    if not local:
        attempts.append((os.path.join(package_dir, "libfmha.so*"), "no such file"))
        attempts.append((os.path.join(os.path.dirname(package_dir), "libfmha.so*"), "no such file"))
    for candidate in local:
        lib = _try_load(candidate, attempts, must_exist=True)
        if lib is not None:
            return lib, candidate

    if use_system:
        names: List[str] = []
        found = ctypes.util.find_library("fmha")
        if found:
            names.append(found)
        else:
            attempts.append(('ctypes.util.find_library("fmha")', "not found"))
        names.extend(n for n in system_names if n not in names)
        for name in names:
            lib = _try_load(name, attempts, must_exist=False)
            if lib is not None:
                return lib, name

    raise LibraryLoadError(
        attempts,
        hint=f"Set {ENV_VAR} to the full path of libfmha.so (e.g. <build dir>/libfmha.so).",
    )


def library() -> ctypes.CDLL:
    """The loaded libfmha (loaded on first call, then cached)."""
    global _loaded, _loaded_path
    lib = _loaded
    if lib is not None:
        return lib
    with _lock:
        if _loaded is None:
            _loaded, _loaded_path = load()
        return _loaded


def library_path() -> str:
    """What was loaded: a path, or a bare name resolved by the system loader."""
    library()
    assert _loaded_path is not None
    return _loaded_path


def last_error_message(lib: Optional[ctypes.CDLL] = None) -> str:
    """This thread's ``fmha_last_error_message()`` as ``str``."""
    raw = (lib or library()).fmha_last_error_message()
    return raw.decode("utf-8", errors="replace") if raw else ""


#: fmha_run(plan, tensors, workspace, workspace_bytes, stream) with untyped
#: pointers (ints), for the run paths: RawTensors by address.
_RUN_PROTOTYPE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                  ctypes.c_size_t, ctypes.c_void_p)
_run_untyped: Optional[Callable[..., int]] = None


def fmha_run_untyped() -> Callable[..., int]:
    """``fmha_run`` of the loaded library, taking ints for its pointers."""
    global _run_untyped
    if _run_untyped is None:
        _run_untyped = _RUN_PROTOTYPE(("fmha_run", library()))
    return _run_untyped


def call(name: str, *args: Any) -> int:
    """Call ``name(*args)``; raise the matching :class:`FmhaError` unless it succeeds.

    The message is read right after the failing call, on the same thread, as
    the header requires. Returns the status (always 0).
    """
    lib = library()
    fn: Callable[..., int] = getattr(lib, name)
    status = fn(*args)
    if status != 0:
        raise error_for_status(status, last_error_message(lib), name)
    return 0


def call_status(name: str, *args: Any) -> Tuple[int, str]:
    """Call ``name(*args)`` and return ``(status, message)`` without raising."""
    lib = library()
    status = getattr(lib, name)(*args)
    return status, ("" if status == 0 else last_error_message(lib))
