"""Plans and runs without a GPU, through a fake CUDA driver (CPU only).

libfmha opens the driver named by $FMHA_LIBCUDA; tests/fake_libcuda.c is a
stand-in that answers every entry point with plausible values and records
kernel launches instead of running them. Each check in
fake_driver_checks.py runs in its own subprocess, since libfmha loads the
driver once per process. Needs a C compiler (skipped otherwise).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fmha

HERE = Path(__file__).resolve().parent
CHECKS = re.findall(r"^def check_(\w+)\(", (HERE / "fake_driver_checks.py").read_text(), flags=re.M)

pytestmark = pytest.mark.usefixtures("lib")


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory) -> str:
    cc = next((shutil.which(c) for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if cc is None:
        pytest.skip("no C compiler to build the fake CUDA driver")
    out = tmp_path_factory.mktemp("fakecuda") / "libcuda_fake.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(HERE / "fake_libcuda.c")],
        check=True, capture_output=True, text=True,
    )
    return str(out)


def test_checks_were_found() -> None:
    assert len(CHECKS) >= 5


@pytest.mark.parametrize("name", CHECKS)
def test_under_fake_driver(fake_libcuda: str, name: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_CUDA_")}
    env["FMHA_LIBCUDA"] = fake_libcuda
    where = fmha.library_path()
    env["FMHA_LIBRARY"] = os.path.abspath(where) if os.path.exists(where) else where
    env.pop("FMHA_FORCE_KERNEL", None)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(fmha.__file__).resolve().parent.parent), str(HERE)])
    proc = subprocess.run(
        [sys.executable, str(HERE / "fake_driver_checks.py"), name],
        env=env, capture_output=True, text=True, timeout=120,
    )
    if proc.returncode == 3:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
