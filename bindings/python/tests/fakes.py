"""Stand-in device tensors for CPU tests: they describe memory, own none.

The library never dereferences pointers before a plan exists, and creating
a plan needs the driver, so on a machine without one these exercise the
whole Python path (shape/stride derivation, checks, descriptor) safely.
"""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence, Tuple

from fmha import _dlpack

ITEMSIZE = {"<f2": 2, "<f4": 4, "<f8": 8, "<i4": 4}


def dense_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    out, acc = [], 1
    for extent in reversed(shape):
        out.append(acc)
        acc *= extent
    return tuple(reversed(out))


class FakeCAI:
    """An object exposing ``__cuda_array_interface__`` (v3)."""

    def __init__(
        self,
        shape: Sequence[int],
        strides: Optional[Sequence[int]] = None,  # elements; None = C-contiguous
        typestr: str = "<f2",
        ptr: int = 0x7F0000000000,
        readonly: bool = False,
        device: Optional[int] = None,
        stream: Optional[int] = None,  # v3 "stream": where the data is produced
    ) -> None:
        self.shape = tuple(shape)
        self.stream = stream
        self.strides = None if strides is None else tuple(strides)
        self.typestr = typestr
        self.ptr = ptr
        self.readonly = readonly
        if device is not None:
            self.device = type("Device", (), {"id": device})()

    @property
    def __cuda_array_interface__(self) -> dict:
        itemsize = ITEMSIZE[self.typestr]
        return {
            "shape": self.shape,
            "typestr": self.typestr,
            "data": (self.ptr, self.readonly),
            "strides": None if self.strides is None else tuple(s * itemsize for s in self.strides),
            "version": 3,
            "stream": self.stream,
        }

    def view(self, index: Sequence[slice]) -> "FakeCAI":
        """Basic slicing (start:stop per dim, step 1), like a framework view."""
        shape, offset = [], 0
        strides = self.strides or dense_strides(self.shape)
        for dim, sl in enumerate(index):
            start, stop, step = sl.indices(self.shape[dim])
            assert step == 1
            shape.append(stop - start)
            offset += start * strides[dim]
        shape.extend(self.shape[len(index):])
        return FakeCAI(shape, strides, self.typestr, self.ptr + offset * ITEMSIZE[self.typestr], self.readonly)

    def permute(self, *dims: int) -> "FakeCAI":
        strides = self.strides or dense_strides(self.shape)
        return FakeCAI(
            [self.shape[d] for d in dims], [strides[d] for d in dims], self.typestr, self.ptr, self.readonly
        )


_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi)
)

KDL_FLOAT, KDL_BFLOAT = 2, 4


class FakeDLPack:
    """An object exposing ``__dlpack__`` / ``__dlpack_device__`` over fake memory."""

    def __init__(
        self,
        shape: Sequence[int],
        strides: Optional[Sequence[int]] = None,  # None: NULL strides (compact)
        code: int = KDL_BFLOAT,
        bits: int = 16,
        ptr: int = 0x7F0000000000,
        byte_offset: int = 0,
        device: Tuple[int, int] = (_dlpack.KDL_CUDA, 0),
    ) -> None:
        self.shape, self.strides = tuple(shape), strides
        self.code, self.bits, self.ptr, self.byte_offset = code, bits, ptr, byte_offset
        self.device = device
        self.streams: list = []
        self._keep: list = []

    def __dlpack_device__(self) -> Tuple[int, int]:
        return self.device

    def __dlpack__(self, stream: Any = None) -> Any:
        self.streams.append(stream)
        ndim = len(self.shape)
        c_shape = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        managed = _dlpack.DLManagedTensor()
        t = managed.dl_tensor
        t.data = self.ptr
        t.device = _dlpack.DLDevice(*self.device)
        t.ndim = ndim
        t.dtype = _dlpack.DLDataType(self.code, self.bits, 1)
        t.shape = ctypes.cast(c_shape, ctypes.POINTER(ctypes.c_int64))
        if self.strides is not None:
            c_strides = (ctypes.c_int64 * max(ndim, 1))(*self.strides)
            t.strides = ctypes.cast(c_strides, ctypes.POINTER(ctypes.c_int64))
            self._keep.append(c_strides)
        t.byte_offset = self.byte_offset
        self._keep += [managed, c_shape]
        # No destructor: the memory above is owned by this object.
        return _capsule_new(ctypes.addressof(managed), b"dltensor", None)
