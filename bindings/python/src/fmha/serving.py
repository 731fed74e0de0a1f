"""Serving forms of attention: variable-length batches, KV caches (contiguous
or paged), split-KV decode, merging partial results, and the block-table
check.

* :func:`attention_varlen` - packed ragged batches (FlashAttention's
  ``flash_attn_varlen_func`` layout): Q ``[total_q, Hq, D]``, K/V
  ``[total_k, Hkv, D]`` and ``cu_seqlens``.
* :func:`attention_with_kvcache` - decode / chunked prefill against a KV
  cache, contiguous ``[B, S_max, Hkv, D]`` or paged ``[num_pages,
  page_size, Hkv, D]`` with a block table.
* :func:`merge` - combine partial results (and their LSE) over disjoint key
  sets, e.g. cascade or context-parallel attention.
* :func:`check_block_table` - the paged-KV block-table contract, checked on
  a host copy.

Tensors are read as in :func:`fmha.attention`: torch, anything with
``__cuda_array_interface__`` (CuPy, Numba) or ``__dlpack__``. Outputs are
allocated with torch for torch inputs and must be passed (``out=``,
``lse_out=``) otherwise. Plans are cached by problem and device (the same
cache as :func:`fmha.attention`); workspace, when a plan needs it (split-KV
keeps its partial results there), is allocated per call through torch's
caching allocator (or CuPy's pool), so runs in flight never share one.
Every call is asynchronous on the stream (default: the current stream of
q's framework).

Index arrays (``cu_seqlens_q``, ``cu_seqlens_k``, ``seqused_k`` /
``cache_seqlens``, ``block_table``) are int32 device tensors, contiguous.
Their values are not read on the host (that would synchronize): the
library's contract applies (``cu_seqlens`` start at 0, are non-decreasing
and stay within the packed rows; block-table entries in use lie in
``[0, num_pages)``, see :func:`check_block_table`).
"""

from __future__ import annotations

import ctypes
import operator
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ._abi import (
    FMHA_FLAG_PAGED_KV,
    FMHA_MERGE_MAX_PARTS,
    FmhaDescriptor,
    Mask,
    Status,
)
from ._cuda import device_guard, resolve_stream
from ._lib import call_status
from .api import (
    _CALLS,
    _PLAN_CACHE,
    _Call,
    _check_dtypes,
    _common_device,
    _dims,
    _dtype_of,
    _float32_vector,
    _lse_view,
    _out_view,
    _outputs,
    _plan_and_workspace,
    _record_stream,
    _remember,
    _run_remembered,
    _views_of,
)
from .plan import MergePlan
from .problem import (
    SupportResult,
    _int32,
    _int64,
    make_descriptor,
    make_merge_descriptor,
    parse_mask,
)
from .errors import to_status
from .tensors import TensorView, view, wait_for_producers

__all__ = [
    "attention_varlen",
    "attention_with_kvcache",
    "describe_varlen",
    "describe_with_kvcache",
    "merge",
    "check_block_table",
]

# ---------------------------------------------------------------- helpers
def _packed(v: TensorView, name: str, order: str = "[total, heads, dim]") -> Tuple[int, int, int, Tuple[int, int, int, int]]:
    """A 3-D packed tensor ``[rows, heads, dim]`` as (rows, heads, dim,
    fmha strides). The batch stride is never followed for packed tensors; it
    is set like the stride of any size-1 dimension (see ``api._dims``)."""
    if v.ndim != 3:
        raise ValueError(f"{name} must be 3-D {order}, got shape {v.shape}")
    as4 = TensorView(v.source, v.kind, v.ptr, (1,) + v.shape, (0,) + v.strides, v.dtype_name, v.itemsize, v.device)
    d = _dims(as4, "bshd", name)
    return d.seq, d.heads, d.dim, d.strides


def _contiguous(like: TensorView, shape: Tuple[int, ...]) -> TensorView:
    """A stand-in view of the contiguous tensor of ``shape`` that will be
    allocated (so its strides are read exactly like a passed one's)."""
    strides, acc = [], 1
    for extent in reversed(shape):
        strides.append(acc)
        acc *= max(extent, 1)
    return TensorView(None, "planned", 0, tuple(shape), tuple(reversed(strides)), like.dtype_name, like.itemsize,
                      like.device)


def _index_array(obj: Any, name: str, shape: Tuple[int, ...], stream_ptr: int) -> TensorView:
    """An int32 device index array of exactly ``shape``, contiguous (``obj``
    may already be a view of it)."""
    iv = obj if isinstance(obj, TensorView) else view(obj, name, stream_ptr)
    if iv.dtype_name != "int32":
        raise TypeError(f"{name} must be int32, got {iv.dtype_name} (torch: pass {name}.int())")
    if iv.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {iv.shape}")
    if not iv.is_contiguous():
        raise ValueError(f"{name} must be contiguous (strides {iv.strides})")
    return iv


def _nonnegative(name: str, value: Any) -> int:
    v = _int64(name, value)
    if v < 0:
        raise ValueError(f"{name} must be >= 0, got {v}")
    return v


def _softcap(value: Optional[float]) -> Optional[float]:
    return None if value is None else float(value)


def _same_address(a: Any, b: Any) -> Optional[bool]:
    """Whether two tensors start at one address (None: not both tensors)."""
    try:
        return bool(a.data_ptr() == b.data_ptr())
    except AttributeError:
        return None


def _execute(call: _Call, out: Any, lse_out: Any, workspace: Any, return_lse: bool, key: Any = None) -> Any:
    """Allocate what is missing, get the plan and enqueue the run; remember
    the call's form under ``key`` (see _fastcall) when it ran as is."""
    user_workspace = workspace
    out, out_ptr, lse, lse_ptr, allocated = _outputs(call, out, lse_out)
    if call.rows_q > 0:
        with device_guard(call.q.source, call.device):
            plan, workspace = _plan_and_workspace(call, workspace, allocated)
            k_ptr, v_ptr = call.k.ptr, call.v.ptr
            if (k_ptr == 0 or v_ptr == 0) and call.descriptor.total_k == 0 and not call.descriptor.flags & FMHA_FLAG_PAGED_KV:
                # Packed K/V with no row at all (every sequence has 0 keys):
                # nothing is read from them, but the library wants non-NULL,
                # aligned pointers. q's address is one.
                k_ptr = k_ptr or call.q.ptr
                v_ptr = v_ptr or call.q.ptr
            arrays = {name: av.ptr for name, av in call.arrays.items()}
            wait_for_producers(_views_of(call), call.stream)
            plan.run(call.q.ptr, k_ptr, v_ptr, out_ptr, lse=lse_ptr, workspace=workspace, stream=call.stream,
                     sinks=call.sinks.ptr if call.sinks is not None else None, **arrays)
        # Not when K or V has no row: whether the library got a stand-in
        # address depends on the tensors' addresses, which the key leaves out.
        if 0 not in call.k.shape and 0 not in call.v.shape:
            _remember(key, call, plan, user_workspace, lse_out, return_lse)
    if return_lse:
        return out, lse
    return out


# ---------------------------------------------------------------- varlen
def _varlen_mask(causal: Any, cu_q: TensorView, cu_k: TensorView, seqused: Any) -> Mask:
    if causal is True:
        # top-left and bottom-right agree only where every sequence has as
        # many keys as queries: known here when both come from one array.
        if seqused is None and cu_q.ptr == cu_k.ptr and cu_q.ptr != 0:
            return Mask.CAUSAL_TOP_LEFT
        raise ValueError(
            "causal=True is ambiguous for variable lengths unless cu_seqlens_k is cu_seqlens_q "
            "(and no seqused_k): pass 'top_left' (key j visible to query i iff j <= i) or "
            "'bottom_right' (j <= i + len_k - len_q per sequence, FlashAttention's causal)"
        )
    return parse_mask(causal)


def _prepare_varlen(
    q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: Any, max_seqlen_k: Any, *,
    causal: Any, softmax_scale: Optional[float], window: Optional[Tuple[int, int]], softcap: Optional[float],
    sinks: Any, seqused_k: Any, return_lse: bool, num_splits: int, kernel: Any, out: Any, lse_out: Any,
    stream: Any,
) -> _Call:
    stream_ptr = resolve_stream(stream, q)
    qv, kv, vv = view(q, "q", stream_ptr), view(k, "k", stream_ptr), view(v, "v", stream_ptr)
    dtype = _check_dtypes(qv, [("k", kv), ("v", vv)])
    total_q, hq, d, q_strides = _packed(qv, "q")
    total_k, hk, dk, k_strides = _packed(kv, "k")
    total_v, hv, dv, v_strides = _packed(vv, "v")
    if total_k != total_v or hk != hv:
        raise ValueError(f"k and v must have the same rows and heads, got {kv.shape[:2]} and {vv.shape[:2]}")
    if d != dk:
        raise ValueError(f"q and k must have the same head_dim, got {d} and {dk}")

    cq_view = view(cu_seqlens_q, "cu_seqlens_q", stream_ptr)
    if cq_view.ndim != 1 or cq_view.shape[0] < 2:
        raise ValueError(f"cu_seqlens_q must be 1-D with batch + 1 >= 2 entries, got shape {cq_view.shape}")
    batch = cq_view.shape[0] - 1
    arrays = {
        "cu_seqlens_q": _index_array(cq_view, "cu_seqlens_q", (batch + 1,), stream_ptr),
        "cu_seqlens_k": _index_array(cu_seqlens_k, "cu_seqlens_k", (batch + 1,), stream_ptr),
    }
    if seqused_k is not None:
        arrays["seqused_k"] = _index_array(seqused_k, "seqused_k", (batch,), stream_ptr)
    sv = _float32_vector(sinks, "sinks", hq, stream_ptr) if sinks is not None else None
    device = _common_device([qv, kv, vv, sv, *arrays.values()], "q, k, v and the index arrays")

    out_shape = (total_q, hq, dv)
    lse_shape = (hq, total_q)
    ov = _out_view(out, qv, out_shape, device, stream_ptr)
    o_strides = _packed(ov if ov is not None else _contiguous(qv, out_shape), "out")[3]
    write_lse, lv = _lse_view(lse_out, return_lse, qv, lse_shape, device, stream_ptr, "[num_q_heads, total_q]")

    mask = _varlen_mask(causal, arrays["cu_seqlens_q"], arrays["cu_seqlens_k"], seqused_k)
    descriptor = make_descriptor(
        batch=batch, num_q_heads=hq, num_kv_heads=hk,
        # The library wants maxima >= 1; lengths come from cu_seqlens, so a
        # maximum of 0 (only empty sequences) means the same as 1.
        seqlen_q=max(1, _nonnegative("max_seqlen_q", max_seqlen_q)),
        seqlen_k=max(1, _nonnegative("max_seqlen_k", max_seqlen_k)),
        head_dim=d, head_dim_v=None if dv == d else dv, dtype=dtype,
        q_strides=q_strides, k_strides=k_strides, v_strides=v_strides, o_strides=o_strides,
        softmax_scale=softmax_scale, mask=mask, write_lse=write_lse, kernel=kernel, device=device,
        window=window, softcap=_softcap(softcap), sinks=sv is not None,
        varlen_q=True, varlen_k=True, seqused_k=seqused_k is not None,
        total_q=total_q, total_k=total_k, num_splits=_int32("num_splits", num_splits),
    )
    return _Call(descriptor, dtype, device, stream_ptr, qv, kv, vv, ov, lv, write_lse, out_shape, lse_shape,
                        sv, arrays, rows_q=total_q)


def describe_varlen(
    q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, max_seqlen_q: int, max_seqlen_k: int, *,
    causal: Any = False, softmax_scale: Optional[float] = None, window: Optional[Tuple[int, int]] = None,
    softcap: Optional[float] = 0.0, sinks: Any = None, seqused_k: Any = None, return_lse: bool = False,
    num_splits: int = 0, kernel: Any = "auto", out: Any = None, lse_out: Any = None, stream: Any = None,
) -> FmhaDescriptor:
    """The descriptor :func:`attention_varlen` would use for these arguments
    (runs nothing, needs no driver): for :func:`fmha.check_support` or to
    make a :class:`fmha.Plan` ahead of time."""
    return _prepare_varlen(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
        softmax_scale=softmax_scale, window=window, softcap=softcap, sinks=sinks, seqused_k=seqused_k,
        return_lse=return_lse, num_splits=num_splits, kernel=kernel, out=out, lse_out=lse_out, stream=stream,
    ).descriptor


def attention_varlen(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    max_seqlen_q: int,
    max_seqlen_k: int,
    *,
    causal: Union[bool, str, Mask] = False,
    softmax_scale: Optional[float] = None,
    window: Optional[Tuple[int, int]] = None,
    softcap: Optional[float] = 0.0,
    sinks: Any = None,
    seqused_k: Any = None,
    return_lse: bool = False,
    num_splits: int = 0,
    kernel: Any = "auto",
    out: Any = None,
    lse_out: Any = None,
    stream: Any = None,
    workspace: Any = None,
) -> Any:
    """Attention over a packed batch of variable-length sequences.

    Sequence ``b`` owns query rows ``cu_seqlens_q[b] .. cu_seqlens_q[b+1]-1``
    of ``q`` and key rows ``cu_seqlens_k[b] .. cu_seqlens_k[b+1]-1`` of
    ``k``/``v`` (FlashAttention's varlen layout). Sequences may be empty.

    Args:
        q: ``[total_q, num_q_heads, head_dim]``, bf16 or fp16 (any strides
            with a contiguous last dimension).
        k, v: ``[total_k, num_kv_heads, head_dim]``; ``num_q_heads`` a
            multiple of ``num_kv_heads`` (GQA/MQA).
        cu_seqlens_q, cu_seqlens_k: int32 ``[batch + 1]`` device tensors,
            starting at 0, non-decreasing, ending at most at total_q /
            total_k (not checked on the host: that would synchronize).
        max_seqlen_q, max_seqlen_k: the longest query / key sequence (a
            longer sequence is cut to it). 0 is read as 1.
        causal: ``False`` (no mask), ``"top_left"`` (key j visible to query
            i iff j <= i), ``"bottom_right"`` (j <= i + len_k - len_q of
            the sequence; FlashAttention's ``causal``), an
            :class:`fmha.Mask`, or ``True`` only when ``cu_seqlens_k`` is
            ``cu_seqlens_q`` (same lengths, where both agree).
        softmax_scale: ``None`` means ``1/sqrt(head_dim)``.
        window: ``(left, right)`` sliding window around each row's diagonal
            (-1: unbounded side); ``None``: none.
        softcap: logit soft-cap (0: off).
        sinks: float32 ``[num_q_heads]`` sink logits.
        seqused_k: int32 ``[batch]``: keys sequence b actually uses (at most
            its length from cu_seqlens_k).
        return_lse: also return the float32 LSE ``[num_q_heads, total_q]``.
        num_splits: split-KV parts: 0 automatic, 1 off, 2..128 exactly.
        kernel: ``"auto"``, ``"portable"``, ``"hopper"`` or ``"decode"``.
        out, lse_out: preallocated outputs (``[total_q, num_q_heads,
            head_dim]`` in q's dtype; contiguous float32 ``[num_q_heads,
            total_q]``); required for non-torch inputs.
        stream: stream to run on; default: the current stream of q's
            framework.
        workspace: device buffer for plans that need one; default:
            allocated per call (torch / CuPy).

    Returns:
        ``out``, or ``(out, lse)`` with ``return_lse``.

    Raises:
        TypeError: a dtype other than bf16/fp16 (index arrays: int32).
        ValueError: inconsistent shapes, non-contiguous index arrays,
            ``causal=True`` with distinct cu_seqlens, missing ``out=``.
        fmha.FmhaError: the library rejected the problem (with its message).
    """
    # Tensors in _fastcall.call_tensors' positions.
    tensors = (q, k, v, out, lse_out, sinks, cu_seqlens_q, cu_seqlens_k, seqused_k, None, workspace)
    key = _CALLS.key("varlen", tensors, (max_seqlen_q, max_seqlen_k, causal, softmax_scale, window, softcap,
                                         return_lse, num_splits, kernel))
    if key is not None:
        # causal=True is checked against this (see _varlen_mask).
        key = (key, _same_address(cu_seqlens_q, cu_seqlens_k))
        done, result = _run_remembered(key, tensors, stream)
        if done:
            return result
    call = _prepare_varlen(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=causal,
        softmax_scale=softmax_scale, window=window, softcap=softcap, sinks=sinks, seqused_k=seqused_k,
        return_lse=return_lse, num_splits=num_splits, kernel=kernel, out=out, lse_out=lse_out, stream=stream,
    )
    return _execute(call, out, lse_out, workspace, return_lse, key)


# ---------------------------------------------------------------- KV cache
def _kvcache_mask(causal: Any) -> Mask:
    if causal is True:
        return Mask.CAUSAL_BOTTOM_RIGHT  # the decode convention: the last query sees the whole cache
    return parse_mask(causal)


def _prepare_kvcache(
    q: Any, k_cache: Any, v_cache: Any, cache_seqlens: Any, *, block_table: Any, cu_seqlens_q: Any,
    max_seqlen_q: Any, causal: Any, softmax_scale: Optional[float], window: Optional[Tuple[int, int]],
    softcap: Optional[float], sinks: Any, num_splits: int, return_lse: bool, kernel: Any, out: Any,
    lse_out: Any, stream: Any,
) -> _Call:
    stream_ptr = resolve_stream(stream, q)
    qv = view(q, "q", stream_ptr)
    kv, vv = view(k_cache, "k_cache", stream_ptr), view(v_cache, "v_cache", stream_ptr)
    dtype = _check_dtypes(qv, [("k_cache", kv), ("v_cache", vv)])
    arrays: Dict[str, TensorView] = {}

    # Queries: dense [B, T, Hq, D], or packed [total_q, Hq, D] with cu_seqlens_q.
    if cu_seqlens_q is None:
        if max_seqlen_q is not None:
            raise ValueError("max_seqlen_q is only used with cu_seqlens_q")
        if qv.ndim != 4:
            raise ValueError(
                f"q must be 4-D [batch, seqlen_q, heads, dim] (or packed [total_q, heads, dim] with "
                f"cu_seqlens_q), got shape {qv.shape}"
            )
        dq = _dims(qv, "bshd", "q")
        batch, seqlen_q, hq, d, q_strides = dq.batch, dq.seq, dq.heads, dq.dim, dq.strides
        rows_q = batch * seqlen_q
        varlen_q = False
    else:
        if max_seqlen_q is None:
            raise ValueError("max_seqlen_q is required with cu_seqlens_q")
        rows_q, hq, d, q_strides = _packed(qv, "q", "[total_q, heads, dim] (with cu_seqlens_q)")
        cq = view(cu_seqlens_q, "cu_seqlens_q", stream_ptr)
        if cq.ndim != 1 or cq.shape[0] < 2:
            raise ValueError(f"cu_seqlens_q must be 1-D with batch + 1 >= 2 entries, got shape {cq.shape}")
        batch = cq.shape[0] - 1
        arrays["cu_seqlens_q"] = _index_array(cq, "cu_seqlens_q", (batch + 1,), stream_ptr)
        seqlen_q = max(1, _nonnegative("max_seqlen_q", max_seqlen_q))
        varlen_q = True

    # Keys: [B, S_max, Hkv, D] or pages [num_pages, page_size, Hkv, D].
    for name, t in (("k_cache", kv), ("v_cache", vv)):
        if t.ndim != 4:
            kind = "[num_pages, page_size, kv_heads, dim]" if block_table is not None else "[batch, seqlen, kv_heads, dim]"
            raise ValueError(f"{name} must be 4-D {kind}, got shape {t.shape}")
    dk, dvv = _dims(kv, "bshd", "k_cache"), _dims(vv, "bshd", "v_cache")
    if (dk.batch, dk.seq, dk.heads) != (dvv.batch, dvv.seq, dvv.heads):
        raise ValueError(f"k_cache and v_cache must agree in all but head_dim, got {kv.shape} and {vv.shape}")
    if dk.dim != d:
        raise ValueError(f"q and k_cache must have the same head_dim, got {d} and {dk.dim}")
    paged: Dict[str, int] = {}
    if block_table is not None:
        bt = view(block_table, "block_table", stream_ptr)
        if bt.ndim != 2 or bt.shape[0] != batch:
            raise ValueError(f"block_table must be 2-D [batch={batch}, max_pages_per_seq], got shape {bt.shape}")
        arrays["block_table"] = _index_array(bt, "block_table", bt.shape, stream_ptr)
        paged = dict(num_pages=dk.batch, page_size=dk.seq, max_pages_per_seq=bt.shape[1])
        capacity = dk.seq * bt.shape[1]
    else:
        if dk.batch != batch:
            raise ValueError(f"k_cache holds {dk.batch} sequences, q {batch} (pass block_table= for a paged cache)")
        capacity = dk.seq

    # Key counts: one int for every sequence, or int32 [B] (seqused_k).
    if isinstance(cache_seqlens, int) and not isinstance(cache_seqlens, bool):
        seqlen_k = cache_seqlens
        if not 1 <= seqlen_k <= capacity:
            raise ValueError(f"cache_seqlens={seqlen_k} must be in [1, {capacity}] (the cache's capacity)")
        used = False
    else:
        arrays["seqused_k"] = _index_array(cache_seqlens, "cache_seqlens", (batch,), stream_ptr)
        # The capacity keeps the descriptor (and so the plan) the same from
        # one decode step to the next; seqused_k gives the lengths.
        seqlen_k = capacity
        used = True
    sv = _float32_vector(sinks, "sinks", hq, stream_ptr) if sinks is not None else None
    device = _common_device([qv, kv, vv, sv, *arrays.values()], "q, the caches and the index arrays")

    out_shape = qv.shape[:-1] + (dvv.dim,)
    if varlen_q:
        lse_shape: Tuple[int, ...] = (hq, rows_q)
        lse_what = "[num_q_heads, total_q]"
    else:
        lse_shape = (batch, hq, seqlen_q)
        lse_what = "[batch, num_q_heads, seqlen_q]"
    ov = _out_view(out, qv, out_shape, device, stream_ptr)
    ov_or_new = ov if ov is not None else _contiguous(qv, out_shape)
    o_strides = _packed(ov_or_new, "out")[3] if varlen_q else _dims(ov_or_new, "bshd", "out").strides
    write_lse, lv = _lse_view(lse_out, return_lse, qv, lse_shape, device, stream_ptr, lse_what)

    descriptor = make_descriptor(
        batch=batch, num_q_heads=hq, num_kv_heads=dk.heads, seqlen_q=seqlen_q, seqlen_k=seqlen_k,
        head_dim=d, head_dim_v=None if dvv.dim == d else dvv.dim, dtype=dtype,
        q_strides=q_strides, k_strides=dk.strides, v_strides=dvv.strides, o_strides=o_strides,
        softmax_scale=softmax_scale, mask=_kvcache_mask(causal), write_lse=write_lse, kernel=kernel,
        device=device, window=window, softcap=_softcap(softcap), sinks=sv is not None,
        varlen_q=varlen_q, seqused_k=used, paged_kv=bool(paged),
        total_q=rows_q if varlen_q else None, num_splits=_int32("num_splits", num_splits), **paged,
    )
    return _Call(descriptor, dtype, device, stream_ptr, qv, kv, vv, ov, lv, write_lse, out_shape, lse_shape,
                        sv, arrays, rows_q=rows_q)


def describe_with_kvcache(
    q: Any, k_cache: Any, v_cache: Any, cache_seqlens: Any, *, block_table: Any = None,
    cu_seqlens_q: Any = None, max_seqlen_q: Optional[int] = None, causal: Any = True,
    softmax_scale: Optional[float] = None, window: Optional[Tuple[int, int]] = None,
    softcap: Optional[float] = 0.0, sinks: Any = None, num_splits: int = 0, return_lse: bool = False,
    kernel: Any = "auto", out: Any = None, lse_out: Any = None, stream: Any = None,
) -> FmhaDescriptor:
    """The descriptor :func:`attention_with_kvcache` would use (runs nothing,
    needs no driver)."""
    return _prepare_kvcache(
        q, k_cache, v_cache, cache_seqlens, block_table=block_table, cu_seqlens_q=cu_seqlens_q,
        max_seqlen_q=max_seqlen_q, causal=causal, softmax_scale=softmax_scale, window=window, softcap=softcap,
        sinks=sinks, num_splits=num_splits, return_lse=return_lse, kernel=kernel, out=out, lse_out=lse_out,
        stream=stream,
    ).descriptor


def attention_with_kvcache(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    cache_seqlens: Any,
    *,
    block_table: Any = None,
    cu_seqlens_q: Any = None,
    max_seqlen_q: Optional[int] = None,
    causal: Union[bool, str, Mask] = True,
    softmax_scale: Optional[float] = None,
    window: Optional[Tuple[int, int]] = None,
    softcap: Optional[float] = 0.0,
    sinks: Any = None,
    num_splits: int = 0,
    return_lse: bool = False,
    kernel: Any = "auto",
    out: Any = None,
    lse_out: Any = None,
    stream: Any = None,
    workspace: Any = None,
) -> Any:
    """Attention of new queries against a KV cache (decode, chunked prefill).

    The new tokens' keys and values must already be in the cache (this
    function does not append). Sequence b attends to its first
    ``cache_seqlens[b]`` cached keys.

    Args:
        q: ``[batch, seqlen_q, num_q_heads, head_dim]`` (seqlen_q = 1 for
            plain decode, a few for speculative decoding), or, with
            ``cu_seqlens_q``, packed ``[total_q, num_q_heads, head_dim]``.
        k_cache, v_cache: contiguous cache ``[batch, max_seqlen,
            num_kv_heads, head_dim]``, or, with ``block_table``, a paged
            cache ``[num_pages, page_size, num_kv_heads, head_dim]`` (any
            page size). Any strides with a contiguous last dimension: a
            ``[num_pages, num_kv_heads, page_size, head_dim]`` pool (HND)
            goes in as ``pool.transpose(1, 2)``, no copy.
        cache_seqlens: int32 ``[batch]`` device tensor of key counts, or a
            single ``int`` used for every sequence (1 to the capacity); see
            below for what each means for plans and CUDA graphs.
        block_table: int32 ``[batch, max_pages_per_seq]`` (row-major,
            contiguous): key j of sequence b is row ``j % page_size`` of
            page ``block_table[b, j // page_size]``. Entries in use must lie
            in ``[0, num_pages)`` (see :func:`check_block_table`).
        cu_seqlens_q: int32 ``[batch + 1]`` for packed queries; then
            ``max_seqlen_q`` (the longest) is required.
        causal: ``True`` (default) or ``"bottom_right"``: query i of a
            sequence with len_q queries and len_k keys sees keys
            ``j <= i + len_k - len_q`` (the last query sees the whole
            cache); ``"top_left"``; ``False`` for no mask.
        softmax_scale, window, softcap, sinks: as in :func:`attention_varlen`.
        num_splits: split-KV parts: 0 automatic, 1 off, 2..128 exactly
            (the decode kernel, and on sm_90 the Hopper kernel for queries
            of up to 256 tokens, split long caches across SMs).
        return_lse: also return the float32 LSE, ``[batch, num_q_heads,
            seqlen_q]`` (packed queries: ``[num_q_heads, total_q]``).
        kernel: ``"auto"``, ``"portable"``, ``"hopper"`` or ``"decode"``.
        out, lse_out, stream, workspace: as in :func:`attention_varlen`;
            ``out`` has q's shape.

    Returns:
        ``out``, or ``(out, lse)`` with ``return_lse``.

    With a tensor ``cache_seqlens`` (passed as ``seqused_k``, with
    ``seqlen_k`` the cache's capacity) the descriptor does not depend on the
    current lengths, so a decode loop reuses one cached plan and a captured
    CUDA graph reads the lengths from the tensor at each replay. An ``int``
    becomes ``seqlen_k`` itself: each new length makes a new plan, and a
    captured graph keeps the length it was captured with.
    """
    # Tensors in _fastcall.call_tensors' positions (cache_seqlens may be an int there).
    tensors = (q, k_cache, v_cache, out, lse_out, sinks, cu_seqlens_q, None, cache_seqlens, block_table, workspace)
    key = _CALLS.key("kvcache", tensors, (max_seqlen_q, causal, softmax_scale, window, softcap, num_splits,
                                          return_lse, kernel))
    done, result = _run_remembered(key, tensors, stream)
    if done:
        return result
    call = _prepare_kvcache(
        q, k_cache, v_cache, cache_seqlens, block_table=block_table, cu_seqlens_q=cu_seqlens_q,
        max_seqlen_q=max_seqlen_q, causal=causal, softmax_scale=softmax_scale, window=window, softcap=softcap,
        sinks=sinks, num_splits=num_splits, return_lse=return_lse, kernel=kernel, out=out, lse_out=lse_out,
        stream=stream,
    )
    return _execute(call, out, lse_out, workspace, return_lse, key)


# ---------------------------------------------------------------- merge
def merge(
    o_parts: Sequence[Any],
    lse_parts: Sequence[Any],
    *,
    return_lse: bool = False,
    out: Any = None,
    lse_out: Any = None,
    stream: Any = None,
) -> Any:
    """Combine partial attention results over disjoint key sets exactly.

    ``O = sum_p exp(LSE_p - LSE) O_p`` with ``LSE = log sum_p exp(LSE_p)``;
    a part whose LSE is -inf (it saw no key) contributes nothing, and a row
    no part saw gives O = 0, LSE = -inf.

    Args:
        o_parts: 1 to ``FMHA_MERGE_MAX_PARTS`` (64) tensors ``[batch,
            seqlen_q, num_heads, head_dim]`` of one dtype (bf16/fp16), one
            shape and the same strides (any, last dimension contiguous), as
            :func:`fmha.attention` returns them. Packed ``[total_q,
            num_heads, head_dim]`` parts (:func:`attention_varlen`) work
            too.
        lse_parts: their float32 LSE, contiguous ``[batch, num_heads,
            seqlen_q]`` (packed: ``[num_heads, total_q]``), as returned with
            ``return_lse=True``.
        return_lse: also return the merged LSE.
        out: output (the parts' shape and dtype; may be ``o_parts[0]``
            itself); allocated contiguous with torch for torch inputs.
        lse_out: preallocated merged LSE (implies writing it).
        stream: default: the current stream of the parts' framework.

    Returns:
        ``out``, or ``(out, lse)`` with ``return_lse``.
    """
    o_parts, lse_parts = list(o_parts), list(lse_parts)
    n = len(o_parts)
    if not 1 <= n <= FMHA_MERGE_MAX_PARTS:
        raise ValueError(f"merge takes 1 to {FMHA_MERGE_MAX_PARTS} parts (FMHA_MERGE_MAX_PARTS), got {n}")
    if len(lse_parts) != n:
        raise ValueError(f"{n} O parts but {len(lse_parts)} LSE parts")
    first = o_parts[0]
    stream_ptr = resolve_stream(stream, first)
    ovs = [view(p, f"o_parts[{i}]", stream_ptr) for i, p in enumerate(o_parts)]
    lvs = [view(p, f"lse_parts[{i}]", stream_ptr) for i, p in enumerate(lse_parts)]
    o0 = ovs[0]
    dtype = _dtype_of(o0, "o_parts[0]")
    packed = o0.ndim == 3
    if o0.ndim not in (3, 4):
        raise ValueError(f"o_parts must be 4-D [batch, seqlen_q, heads, dim] or 3-D [total_q, heads, dim], got {o0.shape}")

    def dims(v: TensorView, name: str) -> Tuple[int, int, int, int, Tuple[int, int, int, int]]:
        if packed:
            rows, h, dd, st = _packed(v, name)
            return 1, rows, h, dd, st
        dm = _dims(v, "bshd", name)
        return dm.batch, dm.seq, dm.heads, dm.dim, dm.strides

    batch, seqlen, heads, hd, part_strides = dims(o0, "o_parts[0]")
    lse_shape = (heads, seqlen) if packed else (batch, heads, seqlen)
    for i, (ov_, lv_) in enumerate(zip(ovs, lvs)):
        if ov_.dtype_name != o0.dtype_name:
            raise TypeError(f"o_parts must have one dtype: o_parts[0] is {o0.dtype_name}, o_parts[{i}] is {ov_.dtype_name}")
        if ov_.shape != o0.shape:
            raise ValueError(f"o_parts must have one shape: o_parts[0] is {o0.shape}, o_parts[{i}] is {ov_.shape}")
        if dims(ov_, f"o_parts[{i}]")[4] != part_strides:
            raise ValueError(f"o_parts must have the same strides: o_parts[0] has {o0.strides}, o_parts[{i}] {ov_.strides}")
        if lv_.dtype_name != "float32":
            raise TypeError(f"lse_parts[{i}] must be float32, got {lv_.dtype_name}")
        if lv_.shape != lse_shape or not lv_.is_contiguous():
            raise ValueError(f"lse_parts[{i}] must be a contiguous float32 tensor of shape {lse_shape}, got {lv_.shape}")
    device = _common_device(ovs + lvs, "o_parts and lse_parts")

    ov = _out_view(out, o0, o0.shape, device, stream_ptr)
    o_strides = dims(ov if ov is not None else _contiguous(o0, o0.shape), "out")[4]
    write_lse, lv = _lse_view(lse_out, return_lse, o0, lse_shape, device, stream_ptr,
                              "[num_heads, total_q]" if packed else "[batch, num_heads, seqlen_q]")
    descriptor = make_merge_descriptor(
        batch=batch, seqlen_q=seqlen, num_heads=heads, head_dim=hd, num_parts=n, dtype=dtype,
        part_strides=part_strides, o_strides=o_strides, write_lse=write_lse, device=device,
    )

    allocated = []
    torch = sys.modules.get("torch")
    if ov is None:
        out = torch.empty(o0.shape, dtype=first.dtype, device=first.device)
        allocated.append(out)
        out_ptr = int(out.data_ptr())
    else:
        out_ptr = ov.ptr
    lse: Any = None
    lse_ptr: Optional[int] = None
    if lv is not None:
        lse, lse_ptr = lse_out, lv.ptr
    elif write_lse:
        lse = torch.empty(lse_shape, dtype=torch.float32, device=first.device)
        allocated.append(lse)
        lse_ptr = int(lse.data_ptr())
    if batch * seqlen * heads == 0:
        return (out, lse) if return_lse else out
    with device_guard(first, device):
        plan: MergePlan = _PLAN_CACHE.get(descriptor, cache=device is not None)
        for t in allocated:
            _record_stream(t, stream_ptr)
        wait_for_producers([*ovs, *lvs, ov, lv], stream_ptr)
        plan.run([v.ptr for v in ovs], [v.ptr for v in lvs], out_ptr, lse=lse_ptr, stream=stream_ptr)
    if return_lse:
        return out, lse
    return out


# ---------------------------------------------------------------- block tables
def _host_int32(obj: Any, name: str, ndim: int) -> Tuple[Any, Tuple[int, ...]]:
    """A host copy of ``obj`` as a ctypes int32 array and its shape.

    Takes a CPU torch tensor, a NumPy array (or anything with
    ``__array_interface__``), or nested Python sequences of ints. Values
    outside int32 raise ``OverflowError``; device tensors ``TypeError``.
    """
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.device.type != "cpu":
            raise TypeError(f"{name} is on {obj.device}: pass a host copy ({name}.cpu())")
        if obj.dtype.is_floating_point or obj.dtype.is_complex or obj.dtype == torch.bool:
            raise TypeError(f"{name} must hold integers, got {obj.dtype}")
        t = obj.detach()
        if t.dim() != ndim:
            raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(t.shape)}")
        if t.numel() and (int(t.min()) < -(2**31) or int(t.max()) >= 2**31):
            raise OverflowError(f"{name} has values outside int32")
        t = t.to(torch.int32).contiguous()
        shape = tuple(int(x) for x in t.shape)
        buf = (ctypes.c_int32 * max(t.numel(), 1))()
        if t.numel():
            ctypes.memmove(buf, t.data_ptr(), t.numel() * 4)
        return buf, shape
    if hasattr(obj, "__cuda_array_interface__") or (hasattr(obj, "__dlpack__") and not hasattr(obj, "__array_interface__")):
        raise TypeError(f"{name} must be a host array (CPU tensor, NumPy array or list), not a device array")
    if hasattr(obj, "__array_interface__"):
        import numpy as np  # only reached for NumPy-like inputs

        a = np.asarray(obj)
        if a.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
        if a.ndim != ndim:
            raise ValueError(f"{name} must be {ndim}-D, got shape {a.shape}")
        if a.size and (int(a.min()) < -(2**31) or int(a.max()) >= 2**31):
            raise OverflowError(f"{name} has values outside int32")
        a = np.ascontiguousarray(a, dtype=np.int32)
        buf = (ctypes.c_int32 * max(a.size, 1))()
        if a.size:
            ctypes.memmove(buf, a.ctypes.data, a.size * 4)
        return buf, tuple(int(x) for x in a.shape)
    # Nested sequences.
    def flatten(x: Any, depth: int) -> Tuple[List[int], Tuple[int, ...]]:
        if depth == 0:
            try:
                value = operator.index(x)
            except TypeError:
                raise TypeError(f"{name} must hold integers, got {type(x).__name__}") from None
            if not -(2**31) <= value < 2**31:
                raise OverflowError(f"{name} value {value} does not fit in int32")
            return [value], ()
        try:
            items = list(x)
        except TypeError:
            raise TypeError(f"{name} must be a {ndim}-D array of integers") from None
        flat: List[int] = []
        inner: Optional[Tuple[int, ...]] = None
        for item in items:
            values, shape = flatten(item, depth - 1)
            if inner is None:
                inner = shape
            elif shape != inner:
                raise ValueError(f"{name} is ragged: rows of shapes {inner} and {shape}")
            flat.extend(values)
        return flat, (len(items),) + (inner if inner is not None else (0,) * (depth - 1))

    flat, shape = flatten(obj, ndim)
    buf = (ctypes.c_int32 * max(len(flat), 1))(*flat)
    return buf, shape


def check_block_table(
    block_table: Any,
    seqlens_k: Any = None,
    *,
    num_pages: Optional[int] = None,
    page_size: Optional[int] = None,
    seqlen_k: Optional[int] = None,
    descriptor: Optional[FmhaDescriptor] = None,
) -> SupportResult:
    """Check a host copy of a paged-KV block table (``fmha_check_block_table``).

    Every entry a sequence's keys use (the first ``ceil(len / page_size)``
    of its row) must lie in ``[0, num_pages)``; the kernels would clamp a
    bad entry (no fault, but a wrong result). Pure host code: no driver.

    Args:
        block_table: ``[batch, max_pages_per_seq]`` integers: a CPU torch
            tensor, a NumPy array or nested lists.
        seqlens_k: ``[batch]`` key counts (host), or ``None`` for
            ``seqlen_k`` keys in every sequence.
        num_pages, page_size: the paged cache's geometry (required without
            ``descriptor``).
        seqlen_k: the maximum key count; default ``max_pages_per_seq *
            page_size``.
        descriptor: check against this (paged) descriptor instead, e.g.
            one from :func:`fmha.describe_with_kvcache`; the table's shape
            must then be ``(batch, max_pages_per_seq)`` of it.

    Returns:
        ``SupportResult(ok, status, message)``; the message names the first
        bad entry as ``block_table[b][i]``. ``result.raise_if_failed()``
        raises it as :class:`fmha.InvalidArgumentError`.

    Raises (misuse of this function only): ``TypeError`` for device or
    non-integer arrays, ``ValueError`` for shapes that do not match.
    """
    table, shape = _host_int32(block_table, "block_table", 2)
    if descriptor is None:
        if num_pages is None or page_size is None:
            raise TypeError("check_block_table needs num_pages= and page_size= (or descriptor=)")
        batch, max_pages = shape
        if batch < 1:
            raise ValueError(f"block_table has no row (shape {shape})")
        desc = make_descriptor(
            batch=batch, num_q_heads=1, num_kv_heads=1, seqlen_q=1,
            seqlen_k=seqlen_k if seqlen_k is not None else max(1, max_pages * _int64("page_size", page_size)),
            head_dim=64, paged_kv=True, num_pages=num_pages, page_size=page_size, max_pages_per_seq=max_pages,
        )
    else:
        if num_pages is not None or page_size is not None or seqlen_k is not None:
            raise TypeError("pass either descriptor= or num_pages/page_size/seqlen_k, not both")
        desc = descriptor
        if desc.flags & FMHA_FLAG_PAGED_KV and shape != (desc.batch, desc.max_pages_per_seq):
            raise ValueError(
                f"block_table has shape {shape}, the descriptor wants ({desc.batch}, {desc.max_pages_per_seq})"
            )
    lens_arg = None
    if seqlens_k is not None:
        lens, lens_shape = _host_int32(seqlens_k, "seqlens_k", 1)
        if lens_shape != (desc.batch,):
            raise ValueError(f"seqlens_k must have shape ({desc.batch},), got {lens_shape}")
        lens_arg = lens
    if not desc.flags & FMHA_FLAG_PAGED_KV:
        table, lens_arg = None, None  # the library says why before reading anything
    status, message = call_status("fmha_check_block_table", ctypes.byref(desc), table, lens_arg)
    return SupportResult(status == Status.SUCCESS, to_status(status), message)
