"""Seeds of the GPU tests' random inputs, from the same variable as the C++
tests: ``FMHA_TEST_SEED`` (decimal or 0x hex; default 20240601, the C++
default of tests/support/random.cpp). ``.ci/test-gpu.sh`` picks a fresh one
per run and prints it; conftest.py prints it in the pytest header and the
final summary, so a failing run is reproduced with
``FMHA_TEST_SEED=N python3 -m pytest ...``.

Each test derives its own seed with :func:`seed_for` from the base seed
and a key of its own (its arguments): crc32 of the key's repr, never
``hash()`` (salted per process for strings). No torch needed here.
"""

from __future__ import annotations

import os
import re
import zlib

ENV = "FMHA_TEST_SEED"
DEFAULT_SEED = 20240601
_U64 = (1 << 64) - 1
_used = False  # whether a test derived a seed in this process (see conftest.py)


def _strtoull(text: str) -> int:
    """The value C's ``strtoull(text, NULL, 0)`` gives (how the C++ tests read
    FMHA_TEST_SEED): leading space, optional sign, 0x hex / 0 octal /
    decimal prefix; 0 when nothing parses, ULLONG_MAX on overflow, negative
    values wrapped modulo 2**64."""
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)?", text)
    sign, digits = m.group(1), m.group(2)
    if not digits:
        return 0
    if digits[:2] in ("0x", "0X"):
        value = int(digits[2:], 16)
    elif digits.startswith("0"):
        value = int(digits, 8)
    else:
        value = int(digits, 10)
    if value > _U64:
        return _U64
    return (-value) & _U64 if sign == "-" else value


def base_seed() -> int:
    """The run's base seed: $FMHA_TEST_SEED (read as the C++ tests read it) or
    DEFAULT_SEED when unset or empty."""
    text = os.environ.get(ENV, "")
    if not text:
        return DEFAULT_SEED
    return _strtoull(text)


def describe() -> str:
    """One line naming the base seed and how to rerun with it."""
    where = f"from ${ENV}" if os.environ.get(ENV, "") else "default; set $" + ENV + " to change it"
    return f"{ENV}={base_seed()} ({where}); reproduce: {ENV}={base_seed()} python3 -m pytest ..."


def seed_for(*key) -> int:
    """A 63-bit seed for the inputs of one test (or one part of it): the base
    seed mixed (splitmix64, as case_seed() in tests/support/random.cpp) with
    crc32 of ``repr(key)``. Stable across processes for a given base seed;
    keys made of str, int, float, None and tuples of them have stable reprs."""
    global _used
    _used = True
    z = (base_seed() ^ ((zlib.crc32(repr(key).encode()) * 0x9E3779B97F4A7C15) & _U64) ^ 0xD1B54A32D192ED03) & _U64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _U64
    return (z ^ (z >> 31)) & ((1 << 63) - 1)


def used() -> bool:
    return _used
