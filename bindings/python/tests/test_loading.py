"""Finding and loading libfmha.so (CPU only)."""

from __future__ import annotations

import _ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fmha
from fmha import _lib

PACKAGE_PARENT = str(Path(fmha.__file__).resolve().parent.parent)


def _run_python(code: str, **env_overrides: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "FMHA_LIBRARY"}
    env["PYTHONPATH"] = PACKAGE_PARENT
    env.update(env_overrides)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_import_needs_neither_torch_nor_library() -> None:
    proc = _run_python(
        "import sys, fmha\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert 'cupy' not in sys.modules, 'cupy imported'\n"
        "assert fmha._lib._loaded is None, 'library loaded eagerly'\n"
        "print(fmha.Status.NOT_SUPPORTED.value, fmha.DType.BF16.value)\n",
        FMHA_LIBRARY="/nonexistent/libfmha.so",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2", "1"]


def test_loads_from_fmha_library(lib) -> None:
    explicit = os.environ.get("FMHA_LIBRARY")
    if not explicit:
        pytest.skip("FMHA_LIBRARY is not set; the library came from elsewhere")
    assert fmha.library_path() == explicit
    assert fmha.version().number == int(lib.fmha_version())


def test_bad_fmha_library_lists_it_and_stops(tmp_path) -> None:
    missing = str(tmp_path / "nope" / "libfmha.so")
    with pytest.raises(fmha.LibraryLoadError) as info:
        _lib.load(env={"FMHA_LIBRARY": missing}, package_dir=str(tmp_path))
    err = info.value
    assert err.attempts == [(f"FMHA_LIBRARY={missing}", "no such file")]
    assert missing in str(err)
    assert "no other location was tried" in str(err)


def test_directory_in_fmha_library(tmp_path) -> None:
    with pytest.raises(fmha.LibraryLoadError, match="is a directory"):
        _lib.load(env={"FMHA_LIBRARY": str(tmp_path)})


def test_foreign_library_is_rejected() -> None:
    foreign = _ctypes.__file__  # a real shared object without fmha_* symbols
    with pytest.raises(fmha.LibraryLoadError) as info:
        _lib.load(env={"FMHA_LIBRARY": foreign})
    assert "has no symbol fmha_version" in str(info.value)


def test_failure_lists_every_candidate(tmp_path) -> None:
    pkg = tmp_path / "site" / "fmha"
    pkg.mkdir(parents=True)
    (pkg / "libfmha.so").write_text("not an ELF file")
    with pytest.raises(fmha.LibraryLoadError) as info:
        _lib.load(env={}, package_dir=str(pkg), system_names=("libfmha-does-not-exist.so.0",))
    text = str(info.value)
    tried = [candidate for candidate, _ in info.value.attempts]
    assert tried[0] == "FMHA_LIBRARY"
    assert str(pkg / "libfmha.so") in tried
    assert "libfmha-does-not-exist.so.0" in tried
    for candidate, reason in info.value.attempts:
        assert candidate in text and reason in text
    assert "dlopen failed" in text
    assert "FMHA_LIBRARY" in text


def test_end_to_end_failure_message() -> None:
    proc = _run_python("import fmha; fmha.version()", FMHA_LIBRARY="/nonexistent/libfmha.so")
    assert proc.returncode != 0
    assert "LibraryLoadError" in proc.stderr
    assert "/nonexistent/libfmha.so: no such file" in proc.stderr


def _load_copy(tmp_path: Path, copy_name: str):
    """Copy the loaded libfmha to ``tmp_path / copy_name`` and load from a
    package at ``tmp_path / "fmha"`` with the system loader off: returns
    ``(loaded library, where it was found, the copy's path)``."""
    real = fmha.library_path()
    if not os.path.isabs(real):
        pytest.skip("library was found by the system loader; no file to copy")
    pkg = tmp_path / "fmha"
    pkg.mkdir()
    copy = tmp_path / copy_name
    shutil.copy(real, copy)
    loaded, where = _lib.load(env={}, package_dir=str(pkg), use_system=False)
    return loaded, where, copy


def test_library_next_to_package_is_found(lib, tmp_path) -> None:
    loaded, where, copy = _load_copy(tmp_path, "fmha/libfmha.so.0")
    assert where == str(copy)
    assert int(loaded.fmha_version()) == fmha.version().number


def test_library_in_parent_of_package_is_found(lib, tmp_path) -> None:
    _, where, copy = _load_copy(tmp_path, "libfmha.so")
    assert where == str(copy)
