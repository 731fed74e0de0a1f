"""Reading a DLPack capsule with ctypes (no framework needed).

Only what the bindings need is read: data pointer, device, dtype, shape and
strides. The capsule is *not* consumed (its name is left as is), so the
producer's capsule destructor releases it when the capsule is collected; the
caller keeps the capsule alive for as long as it uses the pointer.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Optional, Tuple

__all__ = [
    "KDL_CPU",
    "KDL_CUDA",
    "KDL_CUDA_HOST",
    "KDL_CUDA_MANAGED",
    "DLDevice",
    "DLDataType",
    "DLTensor",
    "DLManagedTensor",
    "DLPackVersion",
    "DLManagedTensorVersioned",
    "DLPackInfo",
    "read_capsule",
    "device_of",
]

# DLDeviceType values used here.
KDL_CPU = 1
KDL_CUDA = 2
KDL_CUDA_HOST = 3
KDL_CUDA_MANAGED = 13

# DLDataTypeCode values.
_KDL_INT = 0
_KDL_UINT = 1
_KDL_FLOAT = 2
_KDL_BFLOAT = 4

_FLAG_READ_ONLY = 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


# Private function objects, so that the shared ctypes.pythonapi attributes
# (which other code may configure differently) are left untouched.
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi)
)
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi)
)


@dataclass(frozen=True)
class DLPackInfo:
    """What :func:`read_capsule` found. ``strides`` are in elements."""

    ptr: int
    device_type: int
    device_id: int
    dtype_name: str
    itemsize: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    readonly: bool


def _dtype_name(dt: DLDataType) -> Tuple[str, int]:
    if dt.lanes != 1:
        return f"dlpack(code={dt.code}, bits={dt.bits}, lanes={dt.lanes})", max(1, dt.bits * dt.lanes // 8)
    names = {
        (_KDL_FLOAT, 16): "float16",
        (_KDL_FLOAT, 32): "float32",
        (_KDL_FLOAT, 64): "float64",
        (_KDL_BFLOAT, 16): "bfloat16",
        (_KDL_INT, 8): "int8",
        (_KDL_INT, 32): "int32",
        (_KDL_INT, 64): "int64",
        (_KDL_UINT, 8): "uint8",
    }
    name = names.get((dt.code, dt.bits), f"dlpack(code={dt.code}, bits={dt.bits})")
    return name, max(1, dt.bits // 8)


def read_capsule(capsule: Any) -> DLPackInfo:
    """Read a ``"dltensor"`` or ``"dltensor_versioned"`` capsule without consuming it."""
    readonly = False
    if _capsule_is_valid(capsule, b"dltensor"):
        managed = DLManagedTensor.from_address(_capsule_get_pointer(capsule, b"dltensor"))
        tensor = managed.dl_tensor
    elif _capsule_is_valid(capsule, b"dltensor_versioned"):
        managed_v = DLManagedTensorVersioned.from_address(_capsule_get_pointer(capsule, b"dltensor_versioned"))
        if managed_v.version.major != 1:
            raise BufferError(f"unsupported DLPack major version {managed_v.version.major}")
        tensor = managed_v.dl_tensor
        readonly = bool(managed_v.flags & _FLAG_READ_ONLY)
    else:
        raise BufferError("__dlpack__() did not return an unconsumed 'dltensor' capsule")

    ndim = int(tensor.ndim)
    shape = tuple(int(tensor.shape[i]) for i in range(ndim))
    if tensor.strides:
        strides = tuple(int(tensor.strides[i]) for i in range(ndim))
    else:
        # NULL strides: compact row-major.
        acc = 1
        rev = []
        for extent in reversed(shape):
            rev.append(acc)
            acc *= max(extent, 1)
        strides = tuple(reversed(rev))
    name, itemsize = _dtype_name(tensor.dtype)
    ptr = int(tensor.data or 0) + int(tensor.byte_offset)
    return DLPackInfo(
        ptr=ptr,
        device_type=int(tensor.device.device_type),
        device_id=int(tensor.device.device_id),
        dtype_name=name,
        itemsize=itemsize,
        shape=shape,
        strides=strides,
        readonly=readonly,
    )


def device_of(obj: Any) -> Optional[Tuple[int, int]]:
    """``obj.__dlpack_device__()`` as ``(device_type, device_id)``, or None if absent."""
    fn = getattr(obj, "__dlpack_device__", None)
    if fn is None:
        return None
    dev_type, dev_id = fn()
    return int(dev_type), int(dev_id)
