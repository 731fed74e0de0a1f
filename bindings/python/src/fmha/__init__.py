"""Python bindings for libfmha, fused multi-head attention for NVIDIA GPUs.

The library (libfmha.so) is loaded lazily with ctypes on first use; see
:mod:`fmha._lib` for where it is looked for (``$FMHA_LIBRARY`` first).
torch and CuPy are optional and never imported by this package itself.

Main entry points:

* :func:`attention` - attention on torch / CuPy / DLPack tensors.
* :func:`attention_varlen` - packed variable-length batches (cu_seqlens).
* :func:`attention_with_kvcache` - decode against a contiguous or paged KV cache.
* :func:`merge` - exact merge of partial results over disjoint key sets.
* :func:`check_block_table` - the paged-KV block-table contract, on the host.
* :class:`Plan` - explicit plans for the C-style create-once, run-many use.
* :func:`check_support` - is a problem valid and supported? (no driver needed)
* :func:`version`, :func:`driver_version`, :func:`embedded_archs`.
"""

from __future__ import annotations

from ._abi import (
    FMHA_DESCRIPTOR_VERSION,
    FMHA_FLAG_PAGED_KV,
    FMHA_FLAG_SEQUSED_K,
    FMHA_FLAG_SINKS,
    FMHA_FLAG_VARLEN_K,
    FMHA_FLAG_VARLEN_Q,
    FMHA_FLAG_WRITE_LSE,
    FMHA_MERGE_DESCRIPTOR_VERSION,
    FMHA_MERGE_MAX_PARTS,
    FMHA_PLAN_INFO_VERSION,
    FMHA_SM_ANY as SM_ANY,
    FMHA_SM_CURRENT_DEVICE as SM_CURRENT_DEVICE,
    FMHA_TENSORS_VERSION,
    FMHA_VERSION_MAJOR,
    FMHA_VERSION_MINOR,
    FMHA_VERSION_NUMBER,
    FMHA_VERSION_PATCH,
    DType,
    FmhaDescriptor,
    FmhaMergeDescriptor,
    FmhaPlanInfo,
    FmhaStrides,
    FmhaTensors,
    KernelFamily,
    Mask,
    Status,
)
from ._lib import library, library_path
from .api import attention, clear_plan_cache, describe, last_plan, plan_cache_info, set_plan_cache_size
from .errors import (
    ContextMismatchError,
    DriverError,
    FmhaError,
    InternalError,
    InvalidArgumentError,
    LibraryLoadError,
    MisalignedError,
    NoDeviceError,
    NoDriverError,
    NoKernelImageError,
    NotSupportedError,
    OutOfMemoryError,
    VersionMismatchError,
    WorkspaceTooSmallError,
)
from .plan import CacheInfo, MergePlan, Plan, PlanCache, PlanInfo
from .problem import SupportResult, check_support, layout_strides, make_descriptor, make_merge_descriptor
from .serving import (
    attention_varlen,
    attention_with_kvcache,
    check_block_table,
    describe_varlen,
    describe_with_kvcache,
    merge,
)
from .runtime import (
    VersionInfo,
    driver_version,
    embedded_archs,
    embedded_ptx_arch,
    status_string,
    version,
    version_string,
)

__version__ = "0.1.0"

__all__ = [
    # high level
    "attention",
    "attention_varlen",
    "attention_with_kvcache",
    "merge",
    "describe",
    "describe_varlen",
    "describe_with_kvcache",
    "check_block_table",
    "plan_cache_info",
    "last_plan",
    "clear_plan_cache",
    "set_plan_cache_size",
    "CacheInfo",
    # plans and problems
    "Plan",
    "MergePlan",
    "PlanInfo",
    "PlanCache",
    "check_support",
    "SupportResult",
    "make_descriptor",
    "make_merge_descriptor",
    "layout_strides",
    # introspection
    "version",
    "version_string",
    "VersionInfo",
    "driver_version",
    "embedded_archs",
    "embedded_ptx_arch",
    "status_string",
    "library",
    "library_path",
    # enums, structs, constants
    "Status",
    "DType",
    "Mask",
    "KernelFamily",
    "FmhaDescriptor",
    "FmhaMergeDescriptor",
    "FmhaStrides",
    "FmhaTensors",
    "FmhaPlanInfo",
    "SM_ANY",
    "SM_CURRENT_DEVICE",
    "FMHA_VERSION_MAJOR",
    "FMHA_VERSION_MINOR",
    "FMHA_VERSION_PATCH",
    "FMHA_VERSION_NUMBER",
    "FMHA_DESCRIPTOR_VERSION",
    "FMHA_TENSORS_VERSION",
    "FMHA_PLAN_INFO_VERSION",
    "FMHA_MERGE_DESCRIPTOR_VERSION",
    "FMHA_MERGE_MAX_PARTS",
    "FMHA_FLAG_SINKS",
    "FMHA_FLAG_WRITE_LSE",
    "FMHA_FLAG_VARLEN_Q",
    "FMHA_FLAG_VARLEN_K",
    "FMHA_FLAG_SEQUSED_K",
    "FMHA_FLAG_PAGED_KV",
    # errors
    "FmhaError",
    "InvalidArgumentError",
    "NotSupportedError",
    "VersionMismatchError",
    "NoDriverError",
    "NoDeviceError",
    "DriverError",
    "MisalignedError",
    "WorkspaceTooSmallError",
    "OutOfMemoryError",
    "NoKernelImageError",
    "ContextMismatchError",
    "InternalError",
    "LibraryLoadError",
]
