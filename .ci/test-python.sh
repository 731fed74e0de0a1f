#!/usr/bin/env bash
# Tests the Python bindings (bindings/python) against a built libfmha.
#
#   FMHA_BUILD_DIR=/path/to/cmake/build .ci/test-python.sh [extra pytest args]
#
# With FMHA_PREFIX naming an install prefix (cmake --install), the installed
# libfmha.so and header are tested instead of the build tree's.
#
# Installs the package into a temporary --target directory (so the tests
# import the installed copy, not the source tree), installs pytest there too
# if it is missing, and runs the CPU tests (marker "not gpu"): they need no
# GPU, no CUDA driver and no torch. Then the benchmarks' --self-test (also
# without GPU or torch). Exits non-zero on any failure, including pytest's
# exit code 5 (no test collected).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
: "${FMHA_BUILD_DIR:?set FMHA_BUILD_DIR to the CMake build directory that contains libfmha.so}"
if [[ ! -d "$FMHA_BUILD_DIR" ]]; then
  echo "test-python: FMHA_BUILD_DIR=$FMHA_BUILD_DIR is not a directory" >&2
  exit 1
fi
build_dir="$(cd "$FMHA_BUILD_DIR" && pwd)"
python="${PYTHON:-python3}"

# The library: from an install prefix when FMHA_PREFIX names one (checks the
# install layout too), else from the build directory.
lib=""
if [[ -n "${FMHA_PREFIX:-}" && -d "$FMHA_PREFIX" ]]; then
  lib="$(find "$FMHA_PREFIX" -maxdepth 2 -path '*/lib*/libfmha.so' -print -quit)"
  if [[ -e "$FMHA_PREFIX/include/fmha/fmha.h" ]]; then
    export FMHA_HEADER="$FMHA_PREFIX/include/fmha/fmha.h"  # the ABI tests parse the installed header
  fi
fi
if [[ -z "$lib" ]]; then
  lib="$build_dir/libfmha.so"
  [[ -e "$lib" ]] || lib="$(find "$build_dir" -maxdepth 3 -name 'libfmha.so' -print -quit)"
fi
if [[ -z "$lib" || ! -e "$lib" ]]; then
  echo "test-python: no libfmha.so in $build_dir (build the library first)" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pip=("$python" -m pip --disable-pip-version-check)

pythonpath="$work/site"
if ! "$python" -m pytest --version >/dev/null 2>&1; then
  echo "test-python: pytest is missing; installing it into $work/tools"
  "${pip[@]}" install --quiet --target "$work/tools" "pytest>=7"
  pythonpath="$pythonpath:$work/tools"
fi

echo "test-python: installing bindings/python into $work/site"
if ! "${pip[@]}" install --quiet --no-deps --target "$work/site" "$repo_root/bindings/python"; then
  echo "test-python: isolated build failed; retrying with the local setuptools"
  "${pip[@]}" install --quiet --no-deps --no-build-isolation --target "$work/site" "$repo_root/bindings/python"
fi

export PYTHONPATH="$pythonpath"
export FMHA_LIBRARY="$lib"
export PYTHONDONTWRITEBYTECODE=1

# The tests must exercise the installed package.
"$python" - "$work/site" <<'EOF'
import sys
import fmha
assert fmha.__file__.startswith(sys.argv[1]), f"fmha imported from {fmha.__file__}"
print(f"test-python: fmha {fmha.__version__} from {fmha.__file__}; "
      f"library {fmha.version()} at {fmha.library_path()}; driver {fmha.driver_version()}")
EOF

cd "$work"
set +e
"$python" -m pytest "$repo_root/bindings/python/tests" -m "not gpu" -ra -p no:cacheprovider "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
  echo "test-python: pytest collected no test; treating that as a failure" >&2
  exit 1
fi

# The benchmarks' pure-Python self-tests (no GPU, no torch): their byte and
# FLOP counting, piece plans and exactness bounds, and, for bench_serving,
# that the installed binding accepts every benchmarked problem.
for bench in bench_serving.py bench_read_ceiling.py; do
  echo "test-python: tests/bench/$bench --self-test"
  "$python" "$repo_root/tests/bench/$bench" --self-test || rc=1
done
exit "$rc"
