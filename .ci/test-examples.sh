#!/usr/bin/env bash
# Builds examples/c against an installed libfmha, once with CMake
# (find_package(fmha) + fmha::fmha) and once with pkg-config (Makefile),
# and runs both binaries. Needs no GPU: without a driver the example stops
# after fmha_check_support and exits 0.
#
#   FMHA_PREFIX=/path/to/install/prefix bash .ci/test-examples.sh
set -euo pipefail

: "${FMHA_PREFIX:?set FMHA_PREFIX to the prefix where cmake --install put libfmha}"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=$(cd "$FMHA_PREFIX" && pwd)

libdir=
for d in "$prefix/lib" "$prefix/lib64" "$prefix"/lib/*-linux-gnu; do
    if [ -e "$d/libfmha.so" ]; then libdir=$d; break; fi
done
if [ -z "$libdir" ]; then
    echo "test-examples: no libfmha.so under $prefix/lib*" >&2
    exit 1
fi
export PKG_CONFIG_PATH="$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

work=$(mktemp -d "${TMPDIR:-/tmp}/fmha-examples.XXXXXX")
trap 'rm -rf "$work"' EXIT
warn="-Wall -Wextra -pedantic -Werror"
passed=0
failed=0

run_example() { # name binary
    local name=$1 bin=$2 out rc=0
    echo "--- running $name: $bin"
    out=$("$bin" 2>&1) || rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "$out"
        if grep -q '^check_support(any sm): FMHA_STATUS_SUCCESS$' <<<"$out"; then
            echo "PASS $name"; passed=$((passed + 1)); return
        fi
        echo "FAIL $name: no successful check_support line" >&2
    else
        echo "$out"
        echo "FAIL $name: exit status $rc" >&2
    fi
    failed=$((failed + 1))
}

echo "=== CMake: find_package(fmha) + fmha::fmha"
if cmake -S "$repo/examples/c" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_C_FLAGS="$warn" -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" 2>&1 &&
   cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1; then
    run_example cmake "$work/cmake/fmha_example"
else
    cat "$work/cmake.log" >&2
    echo "FAIL cmake: build failed" >&2
    failed=$((failed + 1))
fi

echo "=== Makefile: pkg-config --cflags --libs fmha ($(pkg-config --modversion fmha 2>&1))"
mkdir -p "$work/make"
if make -f "$repo/examples/c/Makefile" -C "$work/make" CFLAGS="-O2 $warn"; then
    run_example pkg-config "$work/make/fmha_example"
else
    echo "FAIL pkg-config: build failed" >&2
    failed=$((failed + 1))
fi

echo "examples: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
