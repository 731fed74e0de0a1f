"""Adapting tensors from any framework to (pointer, shape, element strides).

Supported, in this order of preference:

* ``torch.Tensor`` (on a CUDA device),
* any object with ``__cuda_array_interface__`` (CuPy, Numba, ...),
* any object with ``__dlpack__`` on a CUDA device (read with ctypes, so no
  framework is needed).

Strides are always reported in *elements*, exactly as the producer gives
them.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from . import _dlpack
from ._cuda import framework_of, wait_for_stream

__all__ = ["TensorView", "view", "data_pointer", "nbytes", "is_torch_tensor", "wait_for_producers"]

_CAI_TYPES = {
    "f2": "float16",
    "f4": "float32",
    "f8": "float64",
    "i1": "int8",
    "i2": "int16",
    "i4": "int32",
    "i8": "int64",
    "u1": "uint8",
    "u2": "uint16",
    "u4": "uint32",
    "u8": "uint64",
    "b1": "bool",
}


@dataclass(frozen=True)
class TensorView:
    """A framework-neutral description of a device tensor.

    Attributes:
        source: the object it was made from.
        kind: ``"torch"``, ``"cuda_array_interface"`` or ``"dlpack"``.
        ptr: device address of element 0 (offsets applied).
        shape: extents.
        strides: element strides.
        dtype_name: ``"bfloat16"``, ``"float16"``, ``"float32"``, ...
        itemsize: bytes per element.
        device: CUDA ordinal when the object tells it, else None.
        readonly: True when the producer marked the memory read-only.
        keepalive: what must stay referenced while ``ptr`` is used.
        producer_stream: the stream the data is produced on, where a
            ``__cuda_array_interface__`` (v3) names one: a run on another
            stream must wait for it (:func:`wait_for_producers`).
    """

    source: Any
    kind: str
    ptr: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]
    dtype_name: str
    itemsize: int
    device: Optional[int]
    readonly: bool = False
    keepalive: Any = None
    producer_stream: Optional[int] = None

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_contiguous(self) -> bool:
        """Dense row-major (ignoring the strides of size-1 dims)."""
        expected = 1
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent != 1 and stride != expected:
                return False
            expected *= extent
        return True


def is_torch_tensor(obj: Any) -> bool:
    """True for a ``torch.Tensor`` (without importing torch)."""
    return framework_of(obj) == "torch"


def _ordinal(device: Any) -> Optional[int]:
    """CUDA ordinal from ``int``, ``cupy.cuda.Device`` (``.id``) or similar (``.index``)."""
    if device is None:
        return None
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    for attr in ("id", "index"):
        value = getattr(device, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _torch_view(t: Any, name: str) -> TensorView:
    if t.device.type != "cuda":
        raise ValueError(f"{name} must be on a CUDA device, got device {t.device}")
    shape = tuple(int(x) for x in t.shape)
    return TensorView(
        source=t,
        kind="torch",
        ptr=int(t.data_ptr()),
        shape=shape,
        strides=tuple(int(x) for x in t.stride()),
        dtype_name=str(t.dtype).replace("torch.", ""),
        itemsize=int(t.element_size()),
        device=t.device.index if t.device.index is not None else None,
    )


def _cai_view(obj: Any, name: str) -> TensorView:
    iface = obj.__cuda_array_interface__
    if iface.get("mask") is not None:
        raise ValueError(f"{name}: masked arrays (__cuda_array_interface__ 'mask') are not supported")
    producer = iface.get("stream")  # v3: the stream the data is produced on
    if producer is not None and (isinstance(producer, bool) or not isinstance(producer, int)
                                 or not 0 < producer < 2**64):
        raise ValueError(f"{name}: __cuda_array_interface__ stream {producer!r} is not a stream handle "
                         "(the protocol allows None, 1, 2 or a CUstream)")
    typestr = str(iface["typestr"])
    shape = tuple(int(x) for x in iface["shape"])
    if typestr[:1] == ">":
        raise TypeError(f"{name}: big-endian arrays ({typestr!r}) are not supported")
    dtype_name = _CAI_TYPES.get(typestr[1:], f"typestr {typestr!r}")
    try:
        itemsize = int(typestr[2:])
    except ValueError:
        raise TypeError(f"{name}: unrecognised __cuda_array_interface__ typestr {typestr!r}") from None
    ptr, readonly = iface["data"]
    byte_strides = iface.get("strides")
    if byte_strides is None:
        strides = []
        acc = 1
        for extent in reversed(shape):
            strides.append(acc)
            acc *= max(extent, 1)
        elem_strides = tuple(reversed(strides))
    else:
        elem = []
        for s in byte_strides:
            if int(s) % itemsize:
                raise ValueError(f"{name}: byte stride {s} is not a multiple of the element size {itemsize}")
            elem.append(int(s) // itemsize)
        elem_strides = tuple(elem)
    return TensorView(
        source=obj,
        kind="cuda_array_interface",
        ptr=int(ptr or 0),
        shape=shape,
        strides=elem_strides,
        dtype_name=dtype_name,
        itemsize=itemsize,
        device=_ordinal(getattr(obj, "device", None)),
        readonly=bool(readonly),
        producer_stream=producer,
    )


def _dlpack_view(obj: Any, name: str, stream: Optional[int]) -> TensorView:
    dev = _dlpack.device_of(obj)
    if dev is not None and dev[0] not in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
        raise ValueError(f"{name} must be on a CUDA device, got DLPack device type {dev[0]}")
    # DLPack stream convention: 1 = legacy default stream, else the handle.
    dl_stream = None if stream is None else (1 if stream == 0 else stream)
    try:
        capsule = obj.__dlpack__(stream=dl_stream)
    except TypeError:
        capsule = obj.__dlpack__()
    info = _dlpack.read_capsule(capsule)
    if info.device_type not in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
        raise ValueError(f"{name} must be on a CUDA device, got DLPack device type {info.device_type}")
    return TensorView(
        source=obj,
        kind="dlpack",
        ptr=info.ptr,
        shape=info.shape,
        strides=info.strides,
        dtype_name=info.dtype_name,
        itemsize=info.itemsize,
        device=info.device_id,
        readonly=info.readonly,
        keepalive=capsule,
    )


def view(obj: Any, name: str = "tensor", stream: Optional[int] = None) -> TensorView:
    """Describe ``obj`` as a :class:`TensorView`.

    ``stream`` (a CUstream handle, 0 = legacy default) is only used for
    DLPack producers, which make their pending work visible to that stream.
    A ``__cuda_array_interface__`` producer's stream is only recorded
    (``producer_stream``): :func:`wait_for_producers` orders it.
    Raises ``TypeError`` for unsupported objects and ``ValueError`` for
    tensors that are not on a CUDA device.
    """
    if is_torch_tensor(obj):
        return _torch_view(obj, name)
    if hasattr(obj, "__cuda_array_interface__"):
        return _cai_view(obj, name)
    if hasattr(obj, "__dlpack__"):
        return _dlpack_view(obj, name, stream)
    raise TypeError(
        f"{name}: expected a torch.Tensor or an object with __cuda_array_interface__ "
        f"or __dlpack__, got {type(obj).__name__}"
    )


def data_pointer(obj: Any, name: str = "tensor", stream: Optional[int] = None) -> Tuple[int, Any]:
    """``(device address, keepalive)`` of a tensor, or of an ``int`` address as is.

    ``None`` gives address 0.
    """
    if obj is None:
        return 0, None
    if isinstance(obj, int) and not isinstance(obj, bool):
        if obj < 0:
            raise ValueError(f"{name}: negative address {obj}")
        if obj >= 2**64:  # ctypes would silently keep only the low 64 bits
            raise ValueError(f"{name}: address {obj:#x} does not fit in 64 bits")
        return obj, None
    torch = sys.modules.get("torch")
    if torch is not None and type(obj) is torch.Tensor:  # the common case, without a whole view
        if not obj.is_cuda:
            raise ValueError(f"{name} must be on a CUDA device, got device {obj.device}")
        return int(obj.data_ptr()), None
    v = view(obj, name, stream)
    if stream is not None:
        wait_for_producers([v], stream)
    return v.ptr, v.keepalive


def wait_for_producers(views: Any, stream: int) -> None:
    """Have ``stream`` wait for the producer streams the views name (each
    distinct one once; none for torch, DLPack or streams equal to
    ``stream``). Called just before a run is enqueued."""
    waited = set()
    for v in views:
        producer = None if v is None else v.producer_stream
        if producer is not None and producer not in waited:
            waited.add(producer)
            wait_for_stream(producer, stream, "a __cuda_array_interface__ array")


def nbytes(v: TensorView) -> int:
    """Bytes spanned by a view (0 when it has no element)."""
    if any(extent == 0 for extent in v.shape):
        return 0
    span = 1 + sum((extent - 1) * abs(stride) for extent, stride in zip(v.shape, v.strides))
    return span * v.itemsize
