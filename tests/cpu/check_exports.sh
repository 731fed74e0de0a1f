#!/bin/sh
# Checks the dynamic symbol table and the dependencies of libfmha.so:
#  - every exported symbol starts with fmha_ (version nodes aside),
#  - every function declared FMHA_API in the public header is exported,
#  - nothing is exported that the header does not declare,
#  - no DT_NEEDED entry names libcuda or libcudart (the driver is dlopen'ed).
# Usage: check_exports.sh NM READELF LIBRARY HEADER
set -eu
nm_tool=${1:-nm}
readelf_tool=${2:-readelf}
lib=$3
header=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# Defined dynamic symbols, without @VERSION suffixes; type A entries are the
# version nodes of the linker script (e.g. FMHA_0), not code or data.
"$nm_tool" -D --defined-only -P "$lib" | awk '$2 != "A" { sub(/@.*/, "", $1); print $1 }' |
    sort -u >"$tmp/exported"
# Functions declared in the header: "FMHA_API <type> fmha_name(".
grep -E '^FMHA_API' "$header" | sed -E 's/.*[ *](fmha_[a-z0-9_]+)\(.*/\1/' | sort -u >"$tmp/declared"

echo "exported: $(wc -l <"$tmp/exported") symbols; declared in the header: $(wc -l <"$tmp/declared") functions"
if [ ! -s "$tmp/declared" ]; then
    echo "FAIL: found no FMHA_API declarations in $header"
    fail=1
fi
bad_prefix=$(grep -v '^fmha_' "$tmp/exported" || true)
if [ -n "$bad_prefix" ]; then
    echo "FAIL: exported symbols without the fmha_ prefix:"
    echo "$bad_prefix" | sed 's/^/  /'
    fail=1
fi
missing=$(comm -23 "$tmp/declared" "$tmp/exported")
if [ -n "$missing" ]; then
    echo "FAIL: declared in the header but not exported:"
    echo "$missing" | sed 's/^/  /'
    fail=1
fi
extra=$(comm -13 "$tmp/declared" "$tmp/exported")
if [ -n "$extra" ]; then
    echo "FAIL: exported but not declared in the header:"
    echo "$extra" | sed 's/^/  /'
    fail=1
fi

"$readelf_tool" -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' >"$tmp/needed"
echo "DT_NEEDED: $(tr '\n' ' ' <"$tmp/needed")"
if grep -E '^libcuda(rt)?([._-]|$)' "$tmp/needed" >/dev/null; then
    echo "FAIL: libfmha links the CUDA driver or runtime (must dlopen libcuda.so.1 instead)"
    fail=1
fi

[ "$fail" -eq 0 ] && echo "PASS"
exit "$fail"
