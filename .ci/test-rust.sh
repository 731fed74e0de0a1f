#!/usr/bin/env bash
# Runs the Rust binding tests (bindings/rust) against a built libfmha.
# Needs no GPU and no libcuda; the crate has no dependencies (--offline).
#
#   FMHA_BUILD_DIR=build FMHA_PREFIX=build/prefix bash .ci/test-rust.sh
# Either variable is enough: the library is taken from FMHA_BUILD_DIR if it
# holds libfmha.so, else from FMHA_PREFIX/lib*.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

libdir=
if [ -n "${FMHA_BUILD_DIR:-}" ] && [ -e "$FMHA_BUILD_DIR/libfmha.so" ]; then
    libdir=$(cd "$FMHA_BUILD_DIR" && pwd)
elif [ -n "${FMHA_PREFIX:-}" ]; then
    for d in "$FMHA_PREFIX/lib" "$FMHA_PREFIX/lib64" "$FMHA_PREFIX"/lib/*-linux-gnu; do
        if [ -e "$d/libfmha.so" ]; then libdir=$(cd "$d" && pwd); break; fi
    done
fi
if [ -z "$libdir" ]; then
    echo "test-rust: set FMHA_BUILD_DIR (holding libfmha.so) or FMHA_PREFIX" >&2
    exit 1
fi

if ! command -v cargo >/dev/null 2>&1 && [ -x "${HOME:-/root}/.cargo/bin/cargo" ]; then
    export PATH="${HOME:-/root}/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "test-rust: cargo not found (Rust >= 1.77 needed for core::mem::offset_of!)" >&2
    exit 1
fi

export FMHA_LIB_DIR="$libdir"
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The ABI test compiles a C probe against the repository's header.
export FMHA_INCLUDE_DIR="$repo/include"

echo "test-rust: libfmha from $libdir; $(cargo --version)"
cd "$repo/bindings/rust"
cargo test --offline --locked
