"""ctypes mirror of ``include/fmha/fmha.h``: constants, enums and structs.

Everything here is a literal transcription of the public header, in the same
order and with the same C types. Nothing in this module loads the library.
The test-suite parses the header and checks that these definitions match it
(values, field order, sizes and offsets), so drift is caught in CI.

Struct *defaults* are deliberately absent: structs are filled by the
library's ``*_init`` functions (see :mod:`fmha._lib`), never here.
"""

from __future__ import annotations

import ctypes
import enum
import struct

__all__ = [
    "FMHA_VERSION_MAJOR",
    "FMHA_VERSION_MINOR",
    "FMHA_VERSION_PATCH",
    "FMHA_VERSION_NUMBER",
    "FMHA_FLAG_WRITE_LSE",
    "FMHA_FLAG_SINKS",
    "FMHA_FLAG_VARLEN_Q",
    "FMHA_FLAG_VARLEN_K",
    "FMHA_FLAG_SEQUSED_K",
    "FMHA_FLAG_PAGED_KV",
    "FMHA_DESCRIPTOR_VERSION",
    "FMHA_PLAN_INFO_VERSION",
    "FMHA_TENSORS_VERSION",
    "FMHA_MERGE_DESCRIPTOR_VERSION",
    "FMHA_MERGE_MAX_PARTS",
    "FMHA_SM_ANY",
    "FMHA_SM_CURRENT_DEVICE",
    "Status",
    "DType",
    "Mask",
    "KernelFamily",
    "FmhaStrides",
    "FmhaDescriptor",
    "FmhaPlanInfo",
    "FmhaTensors",
    "FmhaMergeDescriptor",
    "fmha_plan_p",
    "fmha_stream",
    "c_enum",
]

# --------------------------------------------------------------------------
# Version of the header these bindings mirror.
# --------------------------------------------------------------------------
FMHA_VERSION_MAJOR = 0
FMHA_VERSION_MINOR = 1
FMHA_VERSION_PATCH = 0
FMHA_VERSION_NUMBER = FMHA_VERSION_MAJOR * 10000 + FMHA_VERSION_MINOR * 100 + FMHA_VERSION_PATCH

# --------------------------------------------------------------------------
# Other macros.
# --------------------------------------------------------------------------
FMHA_FLAG_WRITE_LSE = 0x1
FMHA_FLAG_SINKS = 0x2
FMHA_FLAG_VARLEN_Q = 0x4
FMHA_FLAG_VARLEN_K = 0x8
FMHA_FLAG_SEQUSED_K = 0x10
FMHA_FLAG_PAGED_KV = 0x20
FMHA_DESCRIPTOR_VERSION = 3
FMHA_PLAN_INFO_VERSION = 2
FMHA_TENSORS_VERSION = 3
FMHA_MERGE_DESCRIPTOR_VERSION = 1
FMHA_MERGE_MAX_PARTS = 64
FMHA_SM_ANY = 0
FMHA_SM_CURRENT_DEVICE = -1

#: C enums (``fmha_status``, ...) are passed and returned as ``int``.
c_enum = ctypes.c_int


# --------------------------------------------------------------------------
# Enums (values are fixed by the header and never renumbered).
# --------------------------------------------------------------------------
class Status(enum.IntEnum):
    """``fmha_status``: result of every function that can fail."""

    SUCCESS = 0
    INVALID_ARGUMENT = 1
    NOT_SUPPORTED = 2
    VERSION_MISMATCH = 3
    NO_DRIVER = 4
    NO_DEVICE = 5
    DRIVER_ERROR = 6
    MISALIGNED = 7
    WORKSPACE_TOO_SMALL = 8
    OUT_OF_MEMORY = 9
    NO_KERNEL_IMAGE = 10
    CONTEXT_MISMATCH = 11
    INTERNAL_ERROR = 12


class DType(enum.IntEnum):
    """``fmha_dtype``: element type of Q, K, V and O."""

    BF16 = 1
    FP16 = 2


class Mask(enum.IntEnum):
    """``fmha_mask``: which keys each query row may see.

    ``CAUSAL_TOP_LEFT``: key ``j`` visible to row ``i`` iff ``j <= i``.
    ``CAUSAL_BOTTOM_RIGHT``: iff ``j <= i + seqlen_k - seqlen_q``.
    A row that sees no key gives O = 0 and LSE = -inf.
    """

    NONE = 0
    CAUSAL_TOP_LEFT = 1
    CAUSAL_BOTTOM_RIGHT = 2


class KernelFamily(enum.IntEnum):
    """``fmha_kernel_family``: which kernel family a plan may pick."""

    AUTO = 0
    PORTABLE = 1
    HOPPER = 2
    DECODE = 3


# --------------------------------------------------------------------------
# Structs (field order and C types exactly as in the header).
# --------------------------------------------------------------------------
class FmhaStrides(ctypes.Structure):
    """``fmha_strides``: element strides of one 4-D tensor.

    Element (b, s, h, d) is at ``base + b*batch + s*seq + h*head + d*dim``;
    ``dim`` must be 1.
    """

    _fields_ = [
        ("batch", ctypes.c_int64),
        ("seq", ctypes.c_int64),
        ("head", ctypes.c_int64),
        ("dim", ctypes.c_int64),
    ]

    def as_tuple(self) -> tuple[int, int, int, int]:
        """``(batch, seq, head, dim)``."""
        return (self.batch, self.seq, self.head, self.dim)

    def __repr__(self) -> str:
        return f"FmhaStrides(batch={self.batch}, seq={self.seq}, head={self.head}, dim={self.dim})"


class FmhaDescriptor(ctypes.Structure):
    """``fmha_descriptor``: the attention problem. Fill with ``fmha_descriptor_init``."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("dtype", ctypes.c_int32),
        ("batch", ctypes.c_int64),
        ("num_q_heads", ctypes.c_int64),
        ("num_kv_heads", ctypes.c_int64),
        ("seqlen_q", ctypes.c_int64),
        ("seqlen_k", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("head_dim_v", ctypes.c_int64),
        ("q_strides", FmhaStrides),
        ("k_strides", FmhaStrides),
        ("v_strides", FmhaStrides),
        ("o_strides", FmhaStrides),
        ("softmax_scale", ctypes.c_float),
        ("mask", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
        ("kernel", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
        # version 2
        ("window_left", ctypes.c_int32),
        ("window_right", ctypes.c_int32),
        ("softcap", ctypes.c_float),
        ("reserved1", ctypes.c_int32),
        # version 3
        ("total_q", ctypes.c_int64),
        ("total_k", ctypes.c_int64),
        ("num_pages", ctypes.c_int64),
        ("max_pages_per_seq", ctypes.c_int64),
        ("page_size", ctypes.c_int32),
        ("num_splits", ctypes.c_int32),
    ]

    def __repr__(self) -> str:
        parts = []
        for field in self._fields_:
            parts.append(f"{field[0]}={getattr(self, field[0])!r}")
        return "FmhaDescriptor(" + ", ".join(parts) + ")"


class FmhaPlanInfo(ctypes.Structure):
    """``fmha_plan_info``: what a plan chose. Fill with ``fmha_plan_info_init``."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("kernel_family", ctypes.c_int32),
        ("kernel_name", ctypes.c_char_p),
        ("device", ctypes.c_int32),
        ("device_sm", ctypes.c_int32),
        ("image_sm", ctypes.c_int32),
        ("image_is_ptx", ctypes.c_int32),
        ("tile_m", ctypes.c_int32),
        ("tile_n", ctypes.c_int32),
        ("threads_per_cta", ctypes.c_int32),
        ("shared_memory_bytes", ctypes.c_int32),
        ("workspace_bytes", ctypes.c_uint64),
        # version 2
        ("num_splits", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
    ]


class FmhaTensors(ctypes.Structure):
    """``fmha_tensors``: device pointers for one run. Fill with ``fmha_tensors_init``."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("reserved0", ctypes.c_uint32),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("o", ctypes.c_void_p),
        ("lse", ctypes.POINTER(ctypes.c_float)),
        # version 2
        ("sinks", ctypes.POINTER(ctypes.c_float)),
        # version 3: int32 device arrays
        ("cu_seqlens_q", ctypes.POINTER(ctypes.c_int32)),
        ("cu_seqlens_k", ctypes.POINTER(ctypes.c_int32)),
        ("seqused_k", ctypes.POINTER(ctypes.c_int32)),
        ("block_table", ctypes.POINTER(ctypes.c_int32)),
    ]


class RawTensors(ctypes.Structure):
    """``fmha_tensors`` with every pointer as ``void *``: the same layout as
    :class:`FmhaTensors`, filled from ints in one constructor call (the
    run paths use it; no pointer casts per call)."""

    _fields_ = [("version", ctypes.c_uint32), ("reserved0", ctypes.c_uint32)] + [
        (name, ctypes.c_void_p)
        for name in ("q", "k", "v", "o", "lse", "sinks", "cu_seqlens_q", "cu_seqlens_k", "seqused_k",
                     "block_table")
    ]


_RAW_TENSORS_PACKING = struct.Struct("=II10Q")  # version, reserved0, the ten addresses
assert _RAW_TENSORS_PACKING.size == ctypes.sizeof(RawTensors)


def raw_tensors(*addresses: int) -> RawTensors:
    """``fmha_tensors`` of the current version from its ten addresses as
    ints, in field order (0 for an absent pointer). Packing them and copying
    the bytes in costs half what RawTensors' constructor does with its
    per-field conversions (every run path, once per call)."""
    return RawTensors.from_buffer_copy(_RAW_TENSORS_PACKING.pack(FMHA_TENSORS_VERSION, 0, *addresses))


class FmhaMergeDescriptor(ctypes.Structure):
    """``fmha_merge_descriptor``: a merge of partial results. Fill with
    ``fmha_merge_descriptor_init``."""

    _fields_ = [
        ("version", ctypes.c_uint32),
        ("dtype", ctypes.c_int32),
        ("batch", ctypes.c_int64),
        ("seqlen_q", ctypes.c_int64),
        ("num_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("part_strides", FmhaStrides),
        ("o_strides", FmhaStrides),
        ("num_parts", ctypes.c_int32),
        ("flags", ctypes.c_uint32),
        ("device", ctypes.c_int32),
        ("reserved0", ctypes.c_int32),
    ]

    def __repr__(self) -> str:
        parts = [f"{field[0]}={getattr(self, field[0])!r}" for field in self._fields_]
        return "FmhaMergeDescriptor(" + ", ".join(parts) + ")"


#: ``fmha_plan *`` (opaque).
fmha_plan_p = ctypes.c_void_p
#: ``fmha_stream`` (``struct CUstream_st *``); ``None``/0 is the legacy default stream.
fmha_stream = ctypes.c_void_p
