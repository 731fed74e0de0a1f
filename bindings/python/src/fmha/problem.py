"""Describing an attention problem: building ``fmha_descriptor`` and support queries.

A descriptor always starts from ``fmha_descriptor_init`` (the library's own
defaults); only the fields the caller gives are then set. Problem fields are
passed as keyword arguments everywhere (:func:`make_descriptor`,
:func:`check_support`, :class:`fmha.Plan`):

=================  ==========================================================
``batch``          required, >= 1
``num_q_heads``    required, a multiple of ``num_kv_heads``
``seqlen_q``       required
``head_dim``       required: 64, 96, 128, 256 or 512 (library-dependent)
``num_kv_heads``   default ``num_q_heads`` (MHA)
``seqlen_k``       default ``seqlen_q``
``head_dim_v``     default: the library's (same as ``head_dim``)
``dtype``          ``"bf16"``/``"fp16"``, a :class:`DType`, or a torch dtype;
                   default: the library's
``layout``         ``"bshd"`` (default) or ``"bhsd"``: dense strides for every
                   tensor whose strides are not given
``q_strides`` ...  ``(batch, seq, head)`` or ``(batch, seq, head, dim)``
``o_strides``      element strides, or FmhaStrides, for Q, K, V and O (a
                   3-tuple keeps the library's default ``dim`` stride)
``softmax_scale``  default: the library's (1/sqrt(head_dim))
``mask``           ``None``/``False``/``"none"``, ``"top_left"``,
                   ``"bottom_right"``, a :class:`Mask`, or ``True`` (only
                   when ``seqlen_q == seqlen_k``, where both agree)
``write_lse``      bool, sets FMHA_FLAG_WRITE_LSE
``kernel``         ``"auto"``, ``"portable"``, ``"hopper"``, ``"decode"`` or a
                   :class:`KernelFamily`; default: the library's (AUTO)
``device``         CUDA ordinal used when no context is current; default:
                   the library's (0)
``window``         ``(left, right)`` sliding window; -1 leaves a side unbounded
``softcap``        logit soft-cap (0/None: off)
``sinks``          bool, sets FMHA_FLAG_SINKS
``varlen_q``       bool, FMHA_FLAG_VARLEN_Q: Q/O packed ``[total_q, heads,
                   dim]``, ``cu_seqlens_q`` at run time; ``seqlen_q`` is then
                   the maximum length
``varlen_k``       bool, FMHA_FLAG_VARLEN_K: key counts from ``cu_seqlens_k``
                   (and, unpaged, K/V packed ``[total_k, kv_heads, dim]``)
``seqused_k``      bool, FMHA_FLAG_SEQUSED_K: key counts from ``seqused_k``
``paged_kv``       bool, FMHA_FLAG_PAGED_KV: K/V ``[num_pages, page_size,
                   kv_heads, dim]`` and a ``block_table``
``total_q``        rows of packed Q/O (varlen_q)
``total_k``        rows of packed K/V (varlen_k without paged_kv)
``num_pages``      pages of the K/V caches (paged_kv)
``max_pages_per_seq``  columns of the block table (paged_kv)
``page_size``      key rows per page (paged_kv)
``num_splits``     split-KV parts: 0 automatic (default), 1 off, 2..128
=================  ==========================================================

Default strides (for tensors whose strides are not given) are dense in
``layout`` over the rows as addressed: ``total_q`` rows for packed Q/O,
``page_size`` rows per page for paged K/V, ``total_k`` rows for packed K/V.
"""

from __future__ import annotations

import ctypes
import operator
from typing import Any, NamedTuple, Optional, Sequence, Tuple, Union

from ._abi import (
    FMHA_DESCRIPTOR_VERSION,
    FMHA_FLAG_PAGED_KV,
    FMHA_FLAG_SEQUSED_K,
    FMHA_FLAG_SINKS,
    FMHA_FLAG_VARLEN_K,
    FMHA_FLAG_VARLEN_Q,
    FMHA_FLAG_WRITE_LSE,
    FMHA_MERGE_DESCRIPTOR_VERSION,
    FMHA_SM_ANY,
    DType,
    FmhaDescriptor,
    FmhaMergeDescriptor,
    FmhaStrides,
    KernelFamily,
    Mask,
    Status,
)
from ._lib import call, call_status
from .errors import FmhaError, InvalidArgumentError, error_for_status, to_status

__all__ = [
    "SupportResult",
    "StridesLike",
    "parse_dtype",
    "parse_mask",
    "parse_kernel",
    "parse_layout",
    "layout_strides",
    "new_descriptor",
    "make_descriptor",
    "copy_descriptor",
    "new_merge_descriptor",
    "make_merge_descriptor",
    "descriptor_key",
    "check_support",
]

StridesLike = Union[FmhaStrides, Sequence[int]]

_DTYPE_NAMES = {
    "bf16": DType.BF16,
    "bfloat16": DType.BF16,
    "fp16": DType.FP16,
    "float16": DType.FP16,
    "half": DType.FP16,
}

_MASK_NAMES = {
    "none": Mask.NONE,
    "top_left": Mask.CAUSAL_TOP_LEFT,
    "causal_top_left": Mask.CAUSAL_TOP_LEFT,
    "bottom_right": Mask.CAUSAL_BOTTOM_RIGHT,
    "causal_bottom_right": Mask.CAUSAL_BOTTOM_RIGHT,
}

_KERNEL_NAMES = {
    "auto": KernelFamily.AUTO,
    "portable": KernelFamily.PORTABLE,
    "hopper": KernelFamily.HOPPER,
    "decode": KernelFamily.DECODE,
}

_LAYOUTS = ("bshd", "bhsd")


def parse_dtype(value: Any) -> DType:
    """Map ``"bf16"``, ``"float16"``, ``torch.bfloat16``, ``DType.FP16``... to :class:`DType`.

    Raises ``TypeError`` for any other element type (libfmha is bf16/fp16 only).
    """
    if isinstance(value, DType):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return DType(value)
        except ValueError:
            pass
    else:
        # str, torch.dtype ("torch.bfloat16"), numpy dtype ("float16").
        name = str(value).lower()
        if name.startswith("torch."):
            name = name[len("torch."):]
        if name in _DTYPE_NAMES:
            return _DTYPE_NAMES[name]
    raise TypeError(f"libfmha supports bfloat16 and float16 only, got dtype {value!r}")


def parse_mask(value: Any, seqlen_q: Optional[int] = None, seqlen_k: Optional[int] = None) -> Mask:
    """Map a mask / ``causal=`` value to :class:`Mask`.

    ``True`` is accepted only when ``seqlen_q == seqlen_k``: there top-left
    (torch SDPA's ``is_causal``) and bottom-right (FlashAttention's
    ``causal``) agree; otherwise the alignment must be named explicitly.
    """
    if value is None or value is False:
        return Mask.NONE
    if isinstance(value, Mask):
        return value
    if value is True:
        if seqlen_q is not None and seqlen_q == seqlen_k:
            return Mask.CAUSAL_TOP_LEFT
        raise ValueError(
            "causal=True is ambiguous when seqlen_q != seqlen_k "
            f"(seqlen_q={seqlen_q}, seqlen_k={seqlen_k}): pass 'top_left' "
            "(torch SDPA's is_causal) or 'bottom_right' (FlashAttention's causal)"
        )
    if isinstance(value, str) and value.lower() in _MASK_NAMES:
        return _MASK_NAMES[value.lower()]
    if isinstance(value, int):
        try:
            return Mask(value)
        except ValueError:
            pass
    raise ValueError(
        f"invalid mask/causal value {value!r}: expected False, 'top_left', "
        "'bottom_right' or an fmha.Mask"
    )


def parse_kernel(value: Any) -> KernelFamily:
    """Map ``"auto"``, ``"portable"``, ``"hopper"``, ``"decode"`` or an int to :class:`KernelFamily`."""
    if isinstance(value, KernelFamily):
        return value
    if isinstance(value, str) and value.lower() in _KERNEL_NAMES:
        return _KERNEL_NAMES[value.lower()]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return KernelFamily(value)
        except ValueError:
            pass
    raise ValueError(
        f"invalid kernel {value!r}: expected 'auto', 'portable', 'hopper', 'decode' or an fmha.KernelFamily"
    )


def parse_layout(value: str) -> str:
    """Validate a layout name (``"bshd"`` or ``"bhsd"``)."""
    if isinstance(value, str) and value.lower() in _LAYOUTS:
        return value.lower()
    raise ValueError(f"invalid layout {value!r}: expected 'bshd' or 'bhsd'")


def _int64(name: str, value: Any) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}") from None
    if not -(2**63) <= v < 2**63:
        raise OverflowError(f"{name}={v} does not fit in int64")
    return v


def _int32(name: str, value: Any) -> int:
    v = _int64(name, value)
    if not -(2**31) <= v < 2**31:
        raise OverflowError(f"{name}={v} does not fit in int32")
    return v


def layout_strides(layout: str, seqlen: int, num_heads: int, head_dim: int) -> FmhaStrides:
    """Dense strides of a ``layout`` tensor, from ``fmha_strides_bshd/bhsd``."""
    out = FmhaStrides()
    fn = "fmha_strides_bshd" if parse_layout(layout) == "bshd" else "fmha_strides_bhsd"
    call(fn, ctypes.byref(out), _int64("seqlen", seqlen), _int64("num_heads", num_heads), _int64("head_dim", head_dim))
    return out


def _to_strides(name: str, value: StridesLike, base: FmhaStrides) -> FmhaStrides:
    """``value`` as FmhaStrides; a 3-tuple keeps ``base.dim`` (the init default)."""
    if isinstance(value, FmhaStrides):
        return FmhaStrides.from_buffer_copy(value)
    items = tuple(value)
    if len(items) not in (3, 4):
        raise ValueError(f"{name} must be (batch, seq, head[, dim]) element strides, got {value!r}")
    out = FmhaStrides.from_buffer_copy(base)
    for i, field in enumerate(FmhaStrides._fields_[: len(items)]):
        setattr(out, field[0], _int64(f"{name}[{i}]", items[i]))
    return out


def new_descriptor() -> FmhaDescriptor:
    """A descriptor filled by ``fmha_descriptor_init(FMHA_DESCRIPTOR_VERSION)``."""
    desc = FmhaDescriptor()
    call("fmha_descriptor_init", ctypes.byref(desc), FMHA_DESCRIPTOR_VERSION)
    return desc


def make_descriptor(
    *,
    batch: int,
    num_q_heads: int,
    seqlen_q: int,
    head_dim: int,
    num_kv_heads: Optional[int] = None,
    seqlen_k: Optional[int] = None,
    head_dim_v: Optional[int] = None,
    dtype: Any = None,
    layout: str = "bshd",
    q_strides: Optional[StridesLike] = None,
    k_strides: Optional[StridesLike] = None,
    v_strides: Optional[StridesLike] = None,
    o_strides: Optional[StridesLike] = None,
    softmax_scale: Optional[float] = None,
    mask: Any = None,
    write_lse: bool = False,
    kernel: Any = None,
    device: Optional[int] = None,
    window: Optional[Tuple[int, int]] = None,
    softcap: Optional[float] = None,
    sinks: bool = False,
    varlen_q: bool = False,
    varlen_k: bool = False,
    seqused_k: bool = False,
    paged_kv: bool = False,
    total_q: Optional[int] = None,
    total_k: Optional[int] = None,
    num_pages: Optional[int] = None,
    max_pages_per_seq: Optional[int] = None,
    page_size: Optional[int] = None,
    num_splits: Optional[int] = None,
) -> FmhaDescriptor:
    """Build a descriptor: library defaults first, then the given fields.

    ``window=(left, right)`` is the sliding window (-1: unbounded side),
    ``softcap`` the logit soft-cap (None/0: off), ``sinks=True`` sets
    FMHA_FLAG_SINKS (the run then needs a sinks tensor). ``varlen_q``,
    ``varlen_k``, ``seqused_k`` and ``paged_kv`` set the descriptor-version-3
    flags (the run then needs the matching index arrays); ``total_q``,
    ``total_k``, ``num_pages``, ``max_pages_per_seq``, ``page_size`` and
    ``num_splits`` are copied as given (the library checks that a field
    whose flag is missing stays 0).

    Values are only converted here, not range-checked: the library validates
    them (and its error names the field). See the module docstring for the
    meaning of each field.
    """
    desc = new_descriptor()
    num_kv_heads = num_q_heads if num_kv_heads is None else num_kv_heads
    seqlen_k = seqlen_q if seqlen_k is None else seqlen_k

    desc.batch = _int64("batch", batch)
    desc.num_q_heads = _int64("num_q_heads", num_q_heads)
    desc.num_kv_heads = _int64("num_kv_heads", num_kv_heads)
    desc.seqlen_q = _int64("seqlen_q", seqlen_q)
    desc.seqlen_k = _int64("seqlen_k", seqlen_k)
    desc.head_dim = _int64("head_dim", head_dim)
    for field, value in (("total_q", total_q), ("total_k", total_k), ("num_pages", num_pages),
                         ("max_pages_per_seq", max_pages_per_seq)):
        if value is not None:
            setattr(desc, field, _int64(field, value))
    for field, value in (("page_size", page_size), ("num_splits", num_splits)):
        if value is not None:
            setattr(desc, field, _int32(field, value))
    if head_dim_v is not None:
        desc.head_dim_v = _int64("head_dim_v", head_dim_v)
    if dtype is not None:
        desc.dtype = parse_dtype(dtype)

    dv = desc.head_dim_v if desc.head_dim_v != 0 else desc.head_dim
    layout = parse_layout(layout)
    # Rows per "batch" entry as the library addresses them: packed Q/O have
    # total_q rows (no batch dim), paged K/V page_size rows per page.
    q_rows = desc.total_q if varlen_q else desc.seqlen_q
    k_rows = desc.page_size if paged_kv else (desc.total_k if varlen_k else desc.seqlen_k)
    shapes = {
        "q_strides": (q_rows, desc.num_q_heads, desc.head_dim),
        "k_strides": (k_rows, desc.num_kv_heads, desc.head_dim),
        "v_strides": (k_rows, desc.num_kv_heads, dv),
        "o_strides": (q_rows, desc.num_q_heads, dv),
    }
    given = {"q_strides": q_strides, "k_strides": k_strides, "v_strides": v_strides, "o_strides": o_strides}
    for field, value in given.items():
        if value is not None:
            setattr(desc, field, _to_strides(field, value, getattr(desc, field)))
            continue
        try:
            setattr(desc, field, layout_strides(layout, *shapes[field]))
        except InvalidArgumentError:
            # A bad extent (e.g. seqlen_q=0): keep the init strides; the
            # library's descriptor validation then names the actual field.
            pass

    if softmax_scale is not None:
        scale = float(softmax_scale)
        if scale == 0.0:
            raise ValueError(
                "softmax_scale=0 cannot be expressed (the library reads 0 as 1/sqrt(head_dim)); pass None for that"
            )
        desc.softmax_scale = scale  # NaN, inf and negative scales: the library says why not
    if mask is not None:
        desc.mask = parse_mask(mask, desc.seqlen_q, desc.seqlen_k)
    if write_lse:
        desc.flags |= FMHA_FLAG_WRITE_LSE
    if kernel is not None:
        desc.kernel = parse_kernel(kernel)
    if device is not None:
        desc.device = _int32("device", device)
    if window is not None:
        left, right = window
        desc.window_left = _int32("window left", -1 if left is None else left)
        desc.window_right = _int32("window right", -1 if right is None else right)
    if softcap is not None:
        desc.softcap = float(softcap)
    if sinks:
        desc.flags |= FMHA_FLAG_SINKS
    for on, flag in ((varlen_q, FMHA_FLAG_VARLEN_Q), (varlen_k, FMHA_FLAG_VARLEN_K),
                     (seqused_k, FMHA_FLAG_SEQUSED_K), (paged_kv, FMHA_FLAG_PAGED_KV)):
        if on:
            desc.flags |= flag
    return desc


def copy_descriptor(desc: FmhaDescriptor) -> FmhaDescriptor:
    """An independent copy of ``desc``."""
    return FmhaDescriptor.from_buffer_copy(desc)


def new_merge_descriptor() -> FmhaMergeDescriptor:
    """A merge descriptor filled by ``fmha_merge_descriptor_init(FMHA_MERGE_DESCRIPTOR_VERSION)``."""
    desc = FmhaMergeDescriptor()
    call("fmha_merge_descriptor_init", ctypes.byref(desc), FMHA_MERGE_DESCRIPTOR_VERSION)
    return desc


def make_merge_descriptor(
    *,
    batch: int,
    seqlen_q: int,
    num_heads: int,
    head_dim: int,
    num_parts: int,
    dtype: Any = None,
    layout: str = "bshd",
    part_strides: Optional[StridesLike] = None,
    o_strides: Optional[StridesLike] = None,
    write_lse: bool = False,
    device: Optional[int] = None,
) -> FmhaMergeDescriptor:
    """Build an ``fmha_merge_descriptor``: library defaults, then the given fields.

    ``num_parts`` partial O tensors ``[batch, seqlen_q, num_heads, head_dim]``
    (all with ``part_strides``) and their float32 LSE ``[batch, num_heads,
    seqlen_q]`` merge into one O (``o_strides``) and, with ``write_lse``, its
    LSE. Strides not given are dense in ``layout``. The library validates
    the values (1 <= num_parts <= FMHA_MERGE_MAX_PARTS, head_dim a multiple
    of 8 up to 512, ...).
    """
    desc = new_merge_descriptor()
    desc.batch = _int64("batch", batch)
    desc.seqlen_q = _int64("seqlen_q", seqlen_q)
    desc.num_heads = _int64("num_heads", num_heads)
    desc.head_dim = _int64("head_dim", head_dim)
    desc.num_parts = _int32("num_parts", num_parts)
    if dtype is not None:
        desc.dtype = parse_dtype(dtype)
    layout = parse_layout(layout)
    for field, value in (("part_strides", part_strides), ("o_strides", o_strides)):
        if value is not None:
            setattr(desc, field, _to_strides(field, value, getattr(desc, field)))
            continue
        try:
            setattr(desc, field, layout_strides(layout, desc.seqlen_q, desc.num_heads, desc.head_dim))
        except InvalidArgumentError:
            pass  # a bad extent: the library names the field when the plan is made
    if write_lse:
        desc.flags |= FMHA_FLAG_WRITE_LSE
    if device is not None:
        desc.device = _int32("device", device)
    return desc


def _flatten(struct: ctypes.Structure) -> Tuple[Any, ...]:
    values = []
    for field in struct._fields_:
        value = getattr(struct, field[0])
        values.append(_flatten(value) if isinstance(value, ctypes.Structure) else value)
    return tuple(values)


def descriptor_key(desc: Union[FmhaDescriptor, FmhaMergeDescriptor]) -> Tuple[Any, ...]:
    """Hashable key made of every descriptor field (nested strides included).

    Keys of attention and merge descriptors never collide (a merge key
    starts with a marker).
    """
    if isinstance(desc, FmhaMergeDescriptor):
        return ("merge",) + _flatten(desc)
    return _flatten(desc)


class SupportResult(NamedTuple):
    """Answer of :func:`check_support`; unpacks as ``(ok, status, message)``.

    Truthy exactly when ``ok`` is true, so ``if fmha.check_support(...):``
    reads naturally.
    """

    ok: bool
    status: Union[Status, int]
    message: str

    def __bool__(self) -> bool:
        return bool(self.ok)

    def raise_if_failed(self, function: Optional[str] = None) -> None:
        """Raise the :class:`fmha.FmhaError` subclass of ``status`` unless ``ok``."""
        if not self.ok:
            raise error_for_status(int(self.status), self.message, function)


def check_support(
    descriptor: Optional[FmhaDescriptor] = None, *, sm: int = FMHA_SM_ANY, **fields: Any
) -> SupportResult:
    """Ask the library whether a problem is valid and supported (no side effects).

    Pass either a descriptor or the problem fields as keyword arguments (see
    :func:`make_descriptor`). ``sm`` is a compute capability such as 80 or
    90, ``fmha.SM_ANY`` (default: skip device-dependent checks; needs no
    driver) or ``fmha.SM_CURRENT_DEVICE`` (needs the driver).

    Design: the library's verdict is *returned*, never raised: a
    ``SupportResult(ok, status, message)`` where ``message`` is the
    library's explanation (names the offending field). That includes a
    failure of the library while filling in default strides. Only misuse of
    this Python function itself (unknown keyword, non-integer value, unknown
    mask name, both a descriptor and fields) raises, as does
    :class:`fmha.LibraryLoadError`.
    """
    if descriptor is not None and fields:
        raise TypeError("pass either a descriptor or problem fields, not both")
    if descriptor is not None:
        desc = descriptor
    else:
        try:
            desc = make_descriptor(**fields)
        except FmhaError as exc:
            return SupportResult(False, exc.status, exc.message)
    status, message = call_status("fmha_check_support", ctypes.byref(desc), _int32("sm", sm))
    return SupportResult(status == Status.SUCCESS, to_status(status), message)
