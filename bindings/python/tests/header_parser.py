"""A small parser for include/fmha/fmha.h, used by the ABI drift tests.

It understands exactly the subset of C the header uses (and is meant to
stay that way): integer ``#define``s, ``typedef enum {...} name;`` with
explicit values, ``typedef struct name {...} name;`` with one declarator per
field, and ``FMHA_API ret name(params);`` prototypes. Anything it cannot
parse raises ``HeaderParseError`` rather than being skipped silently.

Struct layouts are computed here independently of ctypes, from the usual
LP64 rules (natural alignment, size rounded to the largest alignment), so
that the tests compare two independent computations.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

__all__ = ["HeaderParseError", "Header", "StructField", "parse_header", "find_header", "PRIMITIVES"]

#: C scalar types used by the header: (size, alignment) on LP64 Linux.
PRIMITIVES: Dict[str, Tuple[int, int]] = {
    "int32_t": (4, 4),
    "uint32_t": (4, 4),
    "int64_t": (8, 8),
    "uint64_t": (8, 8),
    "size_t": (8, 8),
    "float": (4, 4),
    "double": (8, 8),
    "int": (4, 4),
}
POINTER = (8, 8)


class HeaderParseError(ValueError):
    pass


@dataclass
class StructField:
    ctype: str  # normalized, e.g. "int64_t", "const char *", "fmha_strides"
    name: str
    offset: int = -1
    size: int = -1


@dataclass
class Header:
    defines: Dict[str, int] = field(default_factory=dict)
    enums: Dict[str, Dict[str, int]] = field(default_factory=dict)
    structs: Dict[str, List[StructField]] = field(default_factory=dict)
    struct_sizes: Dict[str, Tuple[int, int]] = field(default_factory=dict)  # (size, align)
    functions: Dict[str, Tuple[str, List[str]]] = field(default_factory=dict)
    typedefs: Dict[str, str] = field(default_factory=dict)  # alias -> C type


def find_header() -> Path:
    """``$FMHA_HEADER``, else include/fmha/fmha.h of this repository."""
    env = os.environ.get("FMHA_HEADER")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "include" / "fmha" / "fmha.h"


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def _normalize_type(ctype: str) -> str:
    """``"const  char*"`` -> ``"const char *"``; ``"struct X *"`` kept."""
    ctype = re.sub(r"\s*\*\s*", " * ", ctype)
    ctype = re.sub(r"\s+", " ", ctype).strip()
    return ctype.replace("* *", "**")


def _split_declarator(decl: str) -> Tuple[str, str]:
    """``"const char *kernel_name"`` -> (``"const char *"``, ``"kernel_name"``)."""
    m = re.fullmatch(r"(.*?[\s*])(\w+)", decl.strip(), flags=re.S)
    if not m or not m.group(1).strip():
        raise HeaderParseError(f"cannot split declaration {decl!r}")
    return _normalize_type(m.group(1)), m.group(2)


def _c_int_literal(text: str) -> int:
    if text[:2] in ("0x", "0X"):
        return int(text, 16)
    if len(text) > 1 and text.startswith("0"):
        return int(text, 8)
    return int(text)


def _eval_int(expr: str, known: Dict[str, int]) -> Optional[int]:
    """Value of a constant integer expression, or None if it is not one."""
    # Integer literals to plain decimal (drops u/l suffixes, converts hex).
    expr = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", lambda m: str(_c_int_literal(m.group(1))), expr.strip())
    names = re.findall(r"[A-Za-z_]\w*", expr)
    for name in names:
        if name not in known:
            return None
    for name in sorted(set(names), key=len, reverse=True):
        expr = re.sub(rf"\b{name}\b", str(known[name]), expr)
    if not re.fullmatch(r"[0-9+\-*/() <|&]*", expr) or not expr.strip():
        return None
    try:
        value = eval(expr, {"__builtins__": {}}, {})  # noqa: S307 - digits/operators only
    except Exception:
        return None
    return int(value) if isinstance(value, int) else None


def _parse_defines(code: str, header: Header) -> None:
    joined = code.replace("\\\n", " ")
    for line in joined.splitlines():
        m = re.match(r"\s*#\s*define\s+(\w+)\s*(.*)$", line)
        if not m:
            continue
        name, body = m.group(1), m.group(2).strip()
        value = _eval_int(body, header.defines)
        if value is not None:
            header.defines[name] = value


def _typedef_bodies(code: str, kind: str) -> Iterator[Tuple[str, List[str]]]:
    """``(tag, items)`` of every ``typedef <kind> tag { items } tag;``, the
    body split on ``,`` (enum) or ``;`` (struct), blank items dropped."""
    separator = "," if kind == "enum" else ";"
    for m in re.finditer(rf"typedef\s+{kind}\s+(\w+)\s*\{{(.*?)\}}\s*(\w+)\s*;", code, flags=re.S):
        tag, body, alias = m.groups()
        if tag != alias:
            raise HeaderParseError(f"{kind} tag {tag} differs from typedef {alias}")
        yield tag, [item for item in (i.strip() for i in body.split(separator)) if item]


def _parse_enums(code: str, header: Header) -> None:
    for tag, entries in _typedef_bodies(code, "enum"):
        values: Dict[str, int] = {}
        for entry in entries:
            em = re.fullmatch(r"(\w+)\s*=\s*(.+)", entry, flags=re.S)
            if not em:
                raise HeaderParseError(f"enum {tag}: entry {entry!r} has no explicit value (ABI rule)")
            value = _eval_int(em.group(2), {**header.defines, **values})
            if value is None:
                raise HeaderParseError(f"enum {tag}: cannot evaluate {entry!r}")
            values[em.group(1)] = value
        header.enums[tag] = values


def _parse_structs(code: str, header: Header) -> None:
    for tag, decls in _typedef_bodies(code, "struct"):
        fields = []
        for decl in decls:
            if "," in decl or "[" in decl or "(" in decl or ":" in decl:
                raise HeaderParseError(f"struct {tag}: unsupported declaration {decl!r}")
            ctype, name = _split_declarator(decl)
            fields.append(StructField(ctype, name))
        header.structs[tag] = fields
    # Opaque/pointer typedefs: "typedef struct CUstream_st *fmha_stream;".
    for m in re.finditer(r"typedef\s+(struct\s+\w+\s*\*+)\s*(\w+)\s*;", code):
        header.typedefs[m.group(2)] = _normalize_type(m.group(1))
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s+(\w+)\s*;", code):
        header.typedefs[m.group(2)] = f"struct {m.group(1)}"


def _size_align(ctype: str, header: Header) -> Tuple[int, int]:
    base = ctype.replace("const ", "").strip()
    if base.endswith("*") or base in header.typedefs and header.typedefs[base].endswith("*"):
        return POINTER
    if base in PRIMITIVES:
        return PRIMITIVES[base]
    if base in header.enums:
        return PRIMITIVES["int"]
    if base in header.struct_sizes:
        return header.struct_sizes[base]
    raise HeaderParseError(f"unknown type {ctype!r}")


def _layout_structs(header: Header) -> None:
    pending = dict(header.structs)
    while pending:
        progressed = False
        for tag, fields in list(pending.items()):
            try:
                offset, max_align = 0, 1
                for f in fields:
                    size, align = _size_align(f.ctype, header)
                    offset = (offset + align - 1) // align * align
                    f.offset, f.size = offset, size
                    offset += size
                    max_align = max(max_align, align)
            except HeaderParseError:
                continue  # depends on a struct not laid out yet
            total = (offset + max_align - 1) // max_align * max_align
            header.struct_sizes[tag] = (total, max_align)
            del pending[tag]
            progressed = True
        if not progressed:
            raise HeaderParseError(f"cannot lay out structs {sorted(pending)}")


def _parse_functions(code: str, header: Header) -> None:
    no_pp = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("#"))
    for m in re.finditer(r"\bFMHA_API\s+([^;{}()]*?)\b(\w+)\s*\(([^()]*)\)\s*;", no_pp, flags=re.S):
        ret, name, params = m.groups()
        ret = _normalize_type(ret)
        if not ret:
            raise HeaderParseError(f"function {name}: no return type")
        params = params.strip()
        types: List[str] = []
        if params and params != "void":
            for p in params.split(","):
                ptype, _ = _split_declarator(p)
                types.append(ptype)
        header.functions[name] = (ret, types)
    declared = len(re.findall(r"\bFMHA_API\b", no_pp))
    if declared != len(header.functions):
        raise HeaderParseError(f"{declared} FMHA_API declarations but {len(header.functions)} parsed")


def parse_header(path: Optional[Path] = None) -> Header:
    """Parse the header at ``path`` (default: :func:`find_header`)."""
    path = find_header() if path is None else Path(path)
    raw = path.read_text(encoding="utf-8")
    header = Header()
    code = _strip_comments(raw)
    _parse_defines(code, header)
    _parse_enums(code, header)
    _parse_structs(code, header)
    _layout_structs(header)
    _parse_functions(code, header)
    return header
