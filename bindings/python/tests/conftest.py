"""Shared fixtures for the fmha binding tests.

CPU tests need only libfmha.so (set FMHA_LIBRARY to its path): no GPU, no
driver, no torch. An installed fmha package is tested when there is one,
else the copy in ../src. GPU tests (marker ``gpu``) skip themselves, with the
reason shown by ``-ra``, when torch or a CUDA device is missing.

Random inputs of the GPU tests derive from $FMHA_TEST_SEED (seeds.py); the
base seed is printed in the header and the final summary so a failing run
can be repeated with ``FMHA_TEST_SEED=N``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Tuple

import pytest

_TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(_TESTS))
try:  # an installed fmha wins; otherwise test the source tree
    import fmha  # noqa: F401
except ImportError:
    sys.path.insert(0, str(_TESTS.parent / "src"))

import seeds  # noqa: E402
from header_parser import Header, parse_header  # noqa: E402

_RATIOS = pytest.StashKey[List[Tuple[str, float, float, float]]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs torch and a CUDA device (skipped otherwise)")
    config.stash[_RATIOS] = []


def pytest_report_header(config: pytest.Config) -> str:
    return "libfmha test seed: " + seeds.describe()


@pytest.fixture(autouse=True)
def _seed_torch_rng(request: pytest.FixtureRequest) -> None:
    """GPU tests: torch's global generators (CPU and CUDA) seeded from the
    base seed and the test's name, so inputs drawn without an explicit
    generator are reproducible too."""
    if request.node.get_closest_marker("gpu") is None:
        return
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seeds.seed_for("global-rng", request.node.path.name, request.node.name))


@pytest.fixture(scope="session")
def header() -> Header:
    """The parsed public header (include/fmha/fmha.h, or $FMHA_HEADER)."""
    return parse_header()


@pytest.fixture(scope="session")
def lib():
    """The loaded libfmha. Fails (does not skip) when it cannot be loaded."""
    import fmha

    try:
        return fmha.library()
    except fmha.LibraryLoadError as exc:
        pytest.fail(f"libfmha could not be loaded (set FMHA_LIBRARY):\n{exc}")


@pytest.fixture(scope="session")
def has_driver(lib) -> bool:
    import fmha

    return fmha.driver_version() is not None


@pytest.fixture
def ratio_log(request: pytest.FixtureRequest):
    """Record (error of libfmha) / (error of same-precision torch) for the summary."""

    def log(ratio: float, err_fmha: float, err_torch: float) -> None:
        request.config.stash[_RATIOS].append((request.node.nodeid, ratio, err_fmha, err_torch))

    return log


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    tr = terminalreporter
    if seeds.used():  # the header is not shown with -q: repeat the seed here
        tr.write_line("libfmha test seed: " + seeds.describe())
    ratios = config.stash.get(_RATIOS, [])
    if not ratios:
        return
    tr.section("libfmha accuracy vs fp64 reference (2x rule)")
    ratios = sorted(ratios, key=lambda r: r[1], reverse=True)
    mean = sum(r[1] for r in ratios) / len(ratios)
    tr.write_line(
        f"{len(ratios)} cases; ratio = max|fmha - ref| / max|torch same-precision - ref|; "
        f"max {ratios[0][1]:.3f}, mean {mean:.3f} (limit 2.0 plus an absolute floor)"
    )
    tr.write_line("worst cases:")
    for nodeid, ratio, err_fmha, err_torch in ratios[:10]:
        tr.write_line(f"  {ratio:7.3f}  fmha {err_fmha:.3e}  torch {err_torch:.3e}  {nodeid.split('::')[-1]}")
