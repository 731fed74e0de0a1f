#!/usr/bin/env bash
# Builds the Rust and Go bindings' GPU test programs on a machine with the
# toolchains (no GPU needed), for a GPU machine without them:
#
#   FMHA_BUILD_DIR=build FMHA_PREFIX=build/prefix bash .ci/build-binding-gpu-tests.sh OUTDIR
#
# writes OUTDIR/rust_gpu_test and OUTDIR/go_gpu.test; then, on the GPU machine,
#
#   FMHA_RUST_GPU_TEST=OUTDIR/rust_gpu_test FMHA_GO_GPU_TEST=OUTDIR/go_gpu.test \
#       FMHA_BUILD_DIR=build FMHA_CI_STEPS="rust go" .ci/test-gpu.sh
#
# Both programs load libfmha.so.0 (the soname) through LD_LIBRARY_PATH, which
# test-gpu.sh points at its build directory.
set -euo pipefail

out=${1:?usage: build-binding-gpu-tests.sh OUTDIR}
: "${FMHA_BUILD_DIR:?set FMHA_BUILD_DIR to the build directory holding libfmha.so}"
: "${FMHA_PREFIX:?set FMHA_PREFIX to the prefix where cmake --install put libfmha (the Go package builds through its fmha.pc)}"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$FMHA_BUILD_DIR" && pwd)
prefix=$(cd "$FMHA_PREFIX" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

[ -d "${HOME:-/root}/.cargo/bin" ] && export PATH="${HOME:-/root}/.cargo/bin:$PATH"

# Rust: cargo prints the test program's path in its JSON build messages.
cd "$repo/bindings/rust"
rust_bin=$(FMHA_LIB_DIR="$build" FMHA_INCLUDE_DIR="$repo/include" \
    cargo test --offline --locked --test gpu --no-run --message-format=json |
    python3 -c '
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "gpu" and msg.get("executable"):
        print(msg["executable"])')
[ -n "$rust_bin" ] || { echo "build-binding-gpu-tests: cargo built no gpu test program" >&2; exit 1; }
cp "$rust_bin" "$out/rust_gpu_test"

# Go: the same environment as .ci/test-go.sh.
pcdir=
for d in "$prefix/lib" "$prefix/lib64" "$prefix"/lib/*-linux-gnu; do
    if [ -e "$d/pkgconfig/fmha.pc" ]; then pcdir=$d; break; fi
done
[ -n "$pcdir" ] || { echo "build-binding-gpu-tests: no fmha.pc under $prefix/lib*/pkgconfig" >&2; exit 1; }
cd "$repo/bindings/go"
PKG_CONFIG_PATH="$pcdir/pkgconfig" CGO_ENABLED=1 GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local \
    go test -c -o "$out/go_gpu.test" .

echo "build-binding-gpu-tests: $out/rust_gpu_test and $out/go_gpu.test"
