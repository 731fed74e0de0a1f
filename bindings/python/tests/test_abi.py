"""ABI drift checks: the ctypes mirror must match include/fmha/fmha.h.

These parse the header (see header_parser.py) and compare macros, enum
values, struct field order / types / offsets / sizes and function
prototypes with fmha._abi and fmha._lib. They need neither the library nor
a GPU; the last test also compiles the header with a C compiler if one is
installed, as a third, independent opinion on the layouts.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from typing import Any, Dict, Type

import pytest

import fmha
from fmha import _abi
from fmha._lib import PROTOTYPES

from header_parser import Header, parse_header

# Header name -> Python mirror.
ENUMS: Dict[str, Any] = {
    "fmha_status": (_abi.Status, "FMHA_STATUS_"),
    "fmha_dtype": (_abi.DType, "FMHA_DTYPE_"),
    "fmha_mask": (_abi.Mask, "FMHA_MASK_"),
    "fmha_kernel_family": (_abi.KernelFamily, "FMHA_KERNEL_"),
}
STRUCTS: Dict[str, Type[ctypes.Structure]] = {
    "fmha_strides": _abi.FmhaStrides,
    "fmha_descriptor": _abi.FmhaDescriptor,
    "fmha_plan_info": _abi.FmhaPlanInfo,
    "fmha_tensors": _abi.FmhaTensors,
    "fmha_merge_descriptor": _abi.FmhaMergeDescriptor,
}
# Macros that are not integer constants of the API.
NOT_MIRRORED = {"FMHA_FMHA_H", "FMHA_API"}


def ctype_for(c_type: str, header: Header) -> Any:
    """The ctypes type a header type must be bound as."""
    t = c_type.replace("const ", "").strip()
    scalars = {
        "int32_t": ctypes.c_int32,
        "uint32_t": ctypes.c_uint32,
        "int64_t": ctypes.c_int64,
        "uint64_t": ctypes.c_uint64,
        "size_t": ctypes.c_size_t,
        "float": ctypes.c_float,
        "void": None,
    }
    if t in scalars:
        return scalars[t]
    if t in header.enums:
        return _abi.c_enum
    if t in STRUCTS:
        return STRUCTS[t]
    if t in header.typedefs and header.typedefs[t].endswith("*"):
        return ctypes.c_void_p  # fmha_stream
    if t == "char *":
        return ctypes.c_char_p
    if t == "void *":
        return ctypes.c_void_p
    if t.endswith("**"):
        inner = t[:-2].strip()
        if inner in header.typedefs:  # fmha_plan ** -> POINTER(c_void_p)
            return ctypes.POINTER(ctypes.c_void_p)
        raise AssertionError(f"no mapping for {c_type!r}")
    if t.endswith("*"):
        inner = t[:-1].strip()
        if inner in header.typedefs:  # opaque fmha_plan *
            return ctypes.c_void_p
        return ctypes.POINTER(ctype_for(inner, header))
    raise AssertionError(f"no mapping for header type {c_type!r}")


def test_header_parses_completely(header: Header) -> None:
    assert header.enums.keys() == ENUMS.keys(), "an enum was added or removed: mirror it in fmha/_abi.py"
    assert header.structs.keys() == STRUCTS.keys(), "a struct was added or removed: mirror it in fmha/_abi.py"
    assert len(header.functions) >= 20


def test_version_macros(header: Header) -> None:
    d = header.defines
    assert (_abi.FMHA_VERSION_MAJOR, _abi.FMHA_VERSION_MINOR, _abi.FMHA_VERSION_PATCH) == (
        d["FMHA_VERSION_MAJOR"],
        d["FMHA_VERSION_MINOR"],
        d["FMHA_VERSION_PATCH"],
    )
    assert _abi.FMHA_VERSION_NUMBER == d["FMHA_VERSION_NUMBER"]
    assert fmha.__version__ == "{FMHA_VERSION_MAJOR}.{FMHA_VERSION_MINOR}.{FMHA_VERSION_PATCH}".format(**d)


def test_every_integer_macro_is_mirrored(header: Header) -> None:
    for name, value in header.defines.items():
        if name in NOT_MIRRORED:
            continue
        assert hasattr(_abi, name), f"header macro {name} is not mirrored in fmha/_abi.py"
        assert getattr(_abi, name) == value, f"{name}: header {value}, bindings {getattr(_abi, name)}"
    assert fmha.SM_ANY == header.defines["FMHA_SM_ANY"]
    assert fmha.SM_CURRENT_DEVICE == header.defines["FMHA_SM_CURRENT_DEVICE"]


@pytest.mark.parametrize("c_name", sorted(ENUMS))
def test_enum_values(header: Header, c_name: str) -> None:
    py_enum, prefix = ENUMS[c_name]
    expected = {name[len(prefix):]: value for name, value in header.enums[c_name].items()}
    assert all(name.startswith(prefix) for name in header.enums[c_name])
    actual = {member.name: int(member.value) for member in py_enum}
    assert actual == expected


@pytest.mark.parametrize("c_name", sorted(STRUCTS))
def test_struct_layout(header: Header, c_name: str) -> None:
    py_struct = STRUCTS[c_name]
    fields = header.structs[c_name]
    assert [name for name, _ in py_struct._fields_] == [f.name for f in fields], "field order/names differ"
    for (name, py_type), f in zip(py_struct._fields_, fields):
        assert py_type == ctype_for(f.ctype, header), f"{c_name}.{name}: C type {f.ctype}, ctypes {py_type}"
        descr = getattr(py_struct, name)
        assert (descr.offset, descr.size) == (f.offset, f.size), f"{c_name}.{name} offset/size"
    size, align = header.struct_sizes[c_name]
    assert ctypes.sizeof(py_struct) == size
    assert ctypes.alignment(py_struct) == align


@pytest.mark.parametrize("name", sorted(parse_header().functions))
def test_function_prototype(header: Header, name: str) -> None:
    assert name in PROTOTYPES, f"header function {name} has no ctypes prototype in fmha/_lib.py"
    ret, params = header.functions[name]
    restype, argtypes = PROTOTYPES[name]
    assert restype == ctype_for(ret, header), f"{name} return type {ret}"
    assert len(argtypes) == len(params), f"{name} takes {len(params)} parameters"
    for i, (c_param, py_arg) in enumerate(zip(params, argtypes)):
        assert py_arg == ctype_for(c_param, header), f"{name} parameter {i}: {c_param}"


def test_no_extra_prototypes(header: Header) -> None:
    assert set(PROTOTYPES) == set(header.functions)


def _compiler() -> str:
    for cc in ("cc", "gcc", "clang"):
        path = shutil.which(cc)
        if path:
            return path
    pytest.skip("no C compiler found to cross-check struct layouts")


def test_layouts_match_c_compiler(header: Header, tmp_path) -> None:
    cc = _compiler()
    from header_parser import find_header

    lines = ["#include <stdio.h>", "#include <stddef.h>", f'#include "{find_header()}"', "int main(void) {"]
    for c_name, fields in header.structs.items():
        lines.append(f'  printf("{c_name} %zu %zu\\n", sizeof({c_name}), _Alignof({c_name}));')
        for f in fields:
            lines.append(
                f'  printf("{c_name}.{f.name} %zu %zu\\n", offsetof({c_name}, {f.name}), '
                f"sizeof((({c_name} *)0)->{f.name}));"
            )
    lines += ["  return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-o", str(exe), str(src)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        key, a, b = line.split()
        if "." in key:
            c_name, field = key.split(".")
            descr = getattr(STRUCTS[c_name], field)
            assert (descr.offset, descr.size) == (int(a), int(b)), f"{key}: C says offset {a} size {b}"
        else:
            assert (ctypes.sizeof(STRUCTS[key]), ctypes.alignment(STRUCTS[key])) == (int(a), int(b)), key


def test_raw_tensors_has_fmha_tensors_layout() -> None:
    """The run paths fill RawTensors (every pointer void *) and pass its
    address as fmha_tensors: same size, same field names at the same offsets."""
    raw, typed = _abi.RawTensors, _abi.FmhaTensors
    assert ctypes.sizeof(raw) == ctypes.sizeof(typed)
    assert [f[0] for f in raw._fields_] == [f[0] for f in typed._fields_]
    for name, _ in typed._fields_:
        assert getattr(raw, name).offset == getattr(typed, name).offset, name
        assert getattr(raw, name).size == getattr(typed, name).size, name


def test_raw_tensors_packs_the_current_version_and_addresses_in_field_order() -> None:
    """raw_tensors (both run paths) fills version, reserved0 and the ten
    pointers in fmha_tensors' field order; 0 stays NULL."""
    addresses = [0x1000 * (i + 1) for i in range(10)]
    addresses[4] = 0
    raw = _abi.raw_tensors(*addresses)
    assert (raw.version, raw.reserved0) == (_abi.FMHA_TENSORS_VERSION, 0)
    names = [f[0] for f in _abi.RawTensors._fields_][2:]
    assert [getattr(raw, name) or 0 for name in names] == addresses
    assert raw.lse is None
