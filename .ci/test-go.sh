#!/usr/bin/env bash
# Runs the Go binding tests (bindings/go) against an installed libfmha,
# found through pkg-config. Needs no GPU, no libcuda and no module download.
#
#   FMHA_PREFIX=build/prefix [FMHA_BUILD_DIR=build] bash .ci/test-go.sh
# cgo compiles against $FMHA_PREFIX's header and fmha.pc; at run time the
# library is taken from FMHA_BUILD_DIR if it holds libfmha.so, else from
# the prefix.
set -euo pipefail

: "${FMHA_PREFIX:?set FMHA_PREFIX to the prefix where cmake --install put libfmha}"
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix=$(cd "$FMHA_PREFIX" && pwd)

pcdir=
for d in "$prefix/lib" "$prefix/lib64" "$prefix"/lib/*-linux-gnu; do
    if [ -e "$d/pkgconfig/fmha.pc" ]; then pcdir=$d; break; fi
done
if [ -z "$pcdir" ]; then
    echo "test-go: no fmha.pc under $prefix/lib*/pkgconfig" >&2
    exit 1
fi
libdir=$pcdir
if [ -n "${FMHA_BUILD_DIR:-}" ] && [ -e "$FMHA_BUILD_DIR/libfmha.so" ]; then
    libdir=$(cd "$FMHA_BUILD_DIR" && pwd)
fi

if ! command -v go >/dev/null 2>&1; then
    echo "test-go: go not found; installing Debian's golang-go"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y --no-install-recommends golang-go pkg-config
fi

export PKG_CONFIG_PATH="$pcdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$libdir:$pcdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CGO_ENABLED=1
export GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local
cachebase=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}
export GOCACHE="${GOCACHE:-$cachebase/go-build}"
export GOPATH="${GOPATH:-${HOME:-/tmp}/go}"

echo "test-go: $(go version); fmha $(pkg-config --modversion fmha) from $pcdir; runtime lib from $libdir"
cd "$repo/bindings/go"
go vet ./...
# GO_TEST_RUN narrows the run (.ci/test-gpu.sh passes GPU).
go test -count=1 -v ${GO_TEST_RUN:+-run "$GO_TEST_RUN"} ./...
