"""High-level attention on framework tensors: :func:`attention`.

Shapes, dtypes and element strides are read from the tensors (torch,
``__cuda_array_interface__`` or ``__dlpack__``), so sliced and transposed
views work as long as the last (head_dim) dimension is contiguous. Plans are
cached (LRU, keyed by every descriptor field, the device included).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ._abi import DType, FmhaDescriptor
from ._cuda import device_guard, framework_of, resolve_stream
from ._fastcall import CallCache
from .plan import CacheInfo, Plan, PlanCache
from .problem import layout_strides, make_descriptor, parse_dtype, parse_layout, parse_mask
from .tensors import TensorView, view, wait_for_producers

__all__ = [
    "attention",
    "describe",
    "last_plan",
    "plan_cache_info",
    "clear_plan_cache",
    "set_plan_cache_size",
]

_PLAN_CACHE = PlanCache(maxsize=128)
# Call forms already checked (see _fastcall): as many as plans, cleared with them.
_CALLS = CallCache(maxsize=128)


# The library wants the batch/seq/head strides to be multiples of 8 elements.
_STRIDE_QUANTUM = 8


@dataclass(frozen=True)
class _Dims:
    """Logical [batch, seq, heads, dim] of one tensor and its element strides."""

    batch: int
    seq: int
    heads: int
    dim: int
    strides: Tuple[int, int, int, int]  # (batch, seq, head, dim), as fmha_strides


def _dims(v: TensorView, layout: str, name: str) -> _Dims:
    """Read a 4-D tensor in ``layout``.

    The stride of a size-1 dimension never affects addressing, but producers
    may report any value there (0, or not a multiple of 8). Such a stride is
    replaced by the tensor's span rounded up to 8 elements, which is valid
    for inputs and outputs alike. The head_dim stride is passed as is: the
    library checks that it is 1.
    """
    if v.ndim != 4:
        order = "[batch, seq, heads, dim]" if layout == "bshd" else "[batch, heads, seq, dim]"
        raise ValueError(f"{name} must be 4-D {order} for layout={layout!r}, got shape {v.shape}")
    span = max((extent * abs(stride) for extent, stride in zip(v.shape, v.strides)), default=1)
    span = -(-max(span, 1) // _STRIDE_QUANTUM) * _STRIDE_QUANTUM
    strides = [
        span if (i < 3 and extent == 1 and (stride == 0 or stride % _STRIDE_QUANTUM)) else stride
        for i, (extent, stride) in enumerate(zip(v.shape, v.strides))
    ]
    if layout == "bshd":
        b, s, h, d = v.shape
        return _Dims(b, s, h, d, (strides[0], strides[1], strides[2], strides[3]))
    b, h, s, d = v.shape
    return _Dims(b, s, h, d, (strides[0], strides[2], strides[1], strides[3]))


def _layout_shape(layout: str, batch: int, seq: int, heads: int, dim: int) -> Tuple[int, int, int, int]:
    return (batch, seq, heads, dim) if layout == "bshd" else (batch, heads, seq, dim)


def _dtype_of(v: TensorView, name: str) -> DType:
    try:
        return parse_dtype(v.dtype_name)
    except TypeError:
        raise TypeError(f"{name} has dtype {v.dtype_name}; libfmha supports bfloat16 and float16 only") from None


@dataclass
class _Call:
    """Everything an entry point (:func:`attention`, the serving forms) derived
    from its arguments."""

    descriptor: FmhaDescriptor
    dtype: DType
    device: Optional[int]
    stream: int
    q: TensorView
    k: TensorView
    v: TensorView
    out: Optional[TensorView]  # None: to be allocated
    lse: Optional[TensorView]  # None: not written, or to be allocated
    write_lse: bool
    out_shape: Tuple[int, ...]
    lse_shape: Tuple[int, ...]
    sinks: Optional[TensorView] = None
    arrays: Dict[str, TensorView] = field(default_factory=dict)  # cu_seqlens_q, ... (serving forms)
    rows_q: int = 1  # query rows in total (0: nothing to compute)


def _check_dtypes(q: TensorView, others: Sequence[Tuple[str, TensorView]]) -> DType:
    dtype = _dtype_of(q, "q")
    for name, t in others:
        if t.dtype_name != q.dtype_name:
            _dtype_of(t, name)
            raise TypeError(f"q, k and v must have one dtype: q is {q.dtype_name}, {name} is {t.dtype_name}")
    return dtype


def _common_device(views: Sequence[Optional[TensorView]], what: str) -> Optional[int]:
    devices = {t.device for t in views if t is not None and t.device is not None}
    if len(devices) > 1:
        raise ValueError(f"{what} are on different devices: {sorted(devices)}")
    return next(iter(devices)) if devices else None


def _check_device(v: Optional[TensorView], name: str, device: Optional[int]) -> None:
    """A buffer the kernel reads or writes must be on q's device: the
    library receives bare addresses and cannot tell."""
    if v is not None and device is not None and v.device is not None and v.device != device:
        raise ValueError(f"{name} is on device {v.device}, q on device {device}")


def _float32_vector(obj: Any, name: str, length: int, stream_ptr: int) -> TensorView:
    sv = view(obj, name, stream_ptr)
    if sv.dtype_name != "float32":
        raise TypeError(f"{name} must be float32, got {sv.dtype_name}")
    if sv.shape != (length,) or not sv.is_contiguous():
        raise ValueError(f"{name} must be a contiguous float32 tensor of shape ({length},), got {sv.shape}")
    return sv


def _shape_text(shape: Tuple[int, ...], what: str) -> str:
    """``shape`` for an error message, followed by what it means when given."""
    return f"{shape} {what}" if what else f"{shape}"


def _out_view(out: Any, q: TensorView, shape: Tuple[int, ...], device: Optional[int], stream_ptr: int,
              what: str = "") -> Optional[TensorView]:
    if out is None:
        if framework_of(q.source) != "torch":
            raise ValueError("out= is required when q is not a torch.Tensor (nothing to allocate it with)")
        return None
    ov = view(out, "out", stream_ptr)
    if ov.dtype_name != q.dtype_name:
        raise TypeError(f"out must have q's dtype {q.dtype_name}, got {ov.dtype_name}")
    if ov.shape != shape:
        raise ValueError(f"out must have shape {_shape_text(shape, what)}, got {ov.shape}")
    _check_device(ov, "out", device)
    if ov.readonly:
        raise ValueError("out is read-only")
    return ov


def _lse_view(lse_out: Any, return_lse: bool, q: TensorView, shape: Tuple[int, ...], device: Optional[int],
              stream_ptr: int, what: str = "") -> Tuple[bool, Optional[TensorView]]:
    write_lse = bool(return_lse) or lse_out is not None
    if lse_out is None:
        if write_lse and framework_of(q.source) != "torch":
            raise ValueError("lse_out= is required for return_lse=True when q is not a torch.Tensor")
        return write_lse, None
    lv = view(lse_out, "lse_out", stream_ptr)
    if lv.dtype_name != "float32":
        raise TypeError(f"lse_out must be float32, got {lv.dtype_name}")
    if lv.shape != shape or not lv.is_contiguous():
        raise ValueError(
            f"lse_out must be a contiguous float32 tensor of shape {_shape_text(shape, what)}, got shape {lv.shape}"
        )
    _check_device(lv, "lse_out", device)
    if lv.readonly:
        raise ValueError("lse_out is read-only")
    return write_lse, lv


def _prepare(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: Any,
    scale: Optional[float],
    return_lse: bool,
    layout: str,
    out: Any,
    lse_out: Any,
    kernel: Any,
    stream: Any,
    window: Optional[Tuple[int, int]] = None,
    softcap: Optional[float] = None,
    sinks: Any = None,
    num_splits: Optional[int] = None,
) -> _Call:
    layout = parse_layout(layout)
    stream_ptr = resolve_stream(stream, q)
    qv, kv, vv = view(q, "q", stream_ptr), view(k, "k", stream_ptr), view(v, "v", stream_ptr)
    dtype = _check_dtypes(qv, [("k", kv), ("v", vv)])
    device = _common_device([qv, kv, vv], "q, k and v")

    dq, dk, dvv = _dims(qv, layout, "q"), _dims(kv, layout, "k"), _dims(vv, layout, "v")
    if not dq.batch == dk.batch == dvv.batch:
        raise ValueError(f"batch sizes differ: q {dq.batch}, k {dk.batch}, v {dvv.batch}")
    if dk.seq != dvv.seq:
        raise ValueError(f"k and v must have the same sequence length, got {dk.seq} and {dvv.seq}")
    if dk.heads != dvv.heads:
        raise ValueError(f"k and v must have the same number of heads, got {dk.heads} and {dvv.heads}")
    if dq.dim != dk.dim:
        raise ValueError(f"q and k must have the same head_dim, got {dq.dim} and {dk.dim}")

    out_shape = _layout_shape(layout, dq.batch, dq.seq, dq.heads, dvv.dim)
    lse_shape = (dq.batch, dq.heads, dq.seq)
    ov = _out_view(out, qv, out_shape, device, stream_ptr, f"for layout={layout!r}")
    if ov is not None:
        o_strides = _dims(ov, layout, "out").strides
    else:  # torch input: out will be allocated dense in layout
        o_strides = layout_strides(layout, dq.seq, dq.heads, dvv.dim).as_tuple()
    write_lse, lv = _lse_view(lse_out, return_lse, qv, lse_shape, device, stream_ptr)
    sv = _float32_vector(sinks, "sinks", dq.heads, stream_ptr) if sinks is not None else None
    _check_device(sv, "sinks", device)

    descriptor = make_descriptor(
        batch=dq.batch,
        num_q_heads=dq.heads,
        num_kv_heads=dk.heads,
        seqlen_q=dq.seq,
        seqlen_k=dk.seq,
        head_dim=dq.dim,
        head_dim_v=None if dvv.dim == dq.dim else dvv.dim,
        dtype=dtype,
        q_strides=dq.strides,
        k_strides=dk.strides,
        v_strides=dvv.strides,
        o_strides=o_strides,
        softmax_scale=scale,
        mask=parse_mask(causal, dq.seq, dk.seq),
        write_lse=write_lse,
        kernel=kernel,
        device=device,
        window=window,
        softcap=softcap,
        sinks=sv is not None,
        num_splits=num_splits,
    )
    return _Call(descriptor, dtype, device, stream_ptr, qv, kv, vv, ov, lv, write_lse, out_shape, lse_shape, sv)


def describe(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: Any = False,
    scale: Optional[float] = None,
    return_lse: bool = False,
    layout: str = "bshd",
    out: Any = None,
    lse_out: Any = None,
    kernel: Any = "auto",
    stream: Any = None,
    window: Optional[Tuple[int, int]] = None,
    softcap: Optional[float] = None,
    sinks: Any = None,
    num_splits: Optional[int] = None,
) -> FmhaDescriptor:
    """The descriptor :func:`attention` would use for these arguments.

    Runs nothing and needs no driver; handy with :func:`fmha.check_support`
    or to create a :class:`fmha.Plan` ahead of time.
    """
    return _prepare(
        q, k, v, causal=causal, scale=scale, return_lse=return_lse, layout=layout,
        out=out, lse_out=lse_out, kernel=kernel, stream=stream,
        window=window, softcap=softcap, sinks=sinks, num_splits=num_splits,
    ).descriptor


def _record_stream(t: Any, stream_ptr: int) -> None:
    """Tell torch's caching allocator that ``t`` is used on ``stream_ptr``."""
    torch = sys.modules["torch"]
    device = t.device
    if stream_ptr == int(torch.cuda.current_stream(device).cuda_stream):
        return
    if stream_ptr == 0:
        s = torch.cuda.default_stream(device)
    else:
        s = torch.cuda.ExternalStream(stream_ptr, device=device)
    t.record_stream(s)


def _allocate_workspace(call: _Call, size: int) -> Any:
    framework = framework_of(call.q.source)
    if framework == "torch":
        torch = sys.modules["torch"]
        ws = torch.empty(size, dtype=torch.uint8, device=call.q.source.device)
        _record_stream(ws, call.stream)
        return ws
    if framework == "cupy":
        cupy = sys.modules["cupy"]
        # CuPy's pool reuses a freed block in the order of the stream it was
        # allocated on: that must be the run's stream, or another allocation
        # could take the workspace while the kernel still uses it.
        with cupy.cuda.ExternalStream(call.stream):
            return cupy.empty((size,), dtype=cupy.uint8)
    raise ValueError(f"this problem needs {size} bytes of device workspace: pass workspace=")


def _outputs(call: _Call, out: Any, lse_out: Any) -> Tuple[Any, int, Any, Optional[int], List[Any]]:
    """``(out, its address, lse, its address, the tensors allocated here)``.

    The caller's buffers when given; else torch allocates them (preparing
    the call checked that q is then a torch.Tensor).
    """
    q = call.q.source
    allocated = []
    if call.out is None:
        torch = sys.modules["torch"]
        out = torch.empty(call.out_shape, dtype=q.dtype, device=q.device)
        allocated.append(out)
        out_ptr = int(out.data_ptr())
    else:
        out_ptr = call.out.ptr
    lse: Any = None
    lse_ptr: Optional[int] = None
    if call.lse is not None:
        lse, lse_ptr = lse_out, call.lse.ptr
    elif call.write_lse:
        torch = sys.modules["torch"]
        lse = torch.empty(call.lse_shape, dtype=torch.float32, device=q.device)
        allocated.append(lse)
        lse_ptr = int(lse.data_ptr())
    return out, out_ptr, lse, lse_ptr, allocated


def _plan_and_workspace(call: _Call, workspace: Any, allocated: Sequence[Any]) -> Tuple[Plan, Any]:
    """The plan for ``call`` and the workspace to run it with (None, the
    caller's, or allocated here). Call it under ``device_guard``."""
    # A plan binds to the current context. Without a known device the
    # descriptor does not identify that context, so such plans are not cached.
    plan: Plan = _PLAN_CACHE.get(call.descriptor, cache=call.device is not None)
    size = plan.workspace_size
    if size == 0:
        workspace = None
    elif workspace is None:
        workspace = _allocate_workspace(call, size)
    for t in allocated:
        _record_stream(t, call.stream)
    return plan, workspace


def _views_of(call: _Call) -> List[Optional[TensorView]]:
    """Every buffer of ``call`` the run reads or writes, as given."""
    return [call.q, call.k, call.v, call.out, call.lse, call.sinks, *call.arrays.values()]


def _remember(key: Any, call: _Call, plan: Plan, workspace: Any, lse_out: Any, return_lse: bool) -> None:
    """Keep the form of a call that just ran on the checked path (``key``
    from ``_CALLS.key``; ``workspace`` as the caller passed it)."""
    if key is None or call.device is None:
        return
    ws_view = view(workspace, "workspace") if workspace is not None else None
    _CALLS.remember(key, plan, call.q.source, call.out_shape, call.lse_shape,
                    call.write_lse and lse_out is None, ws_view, return_lse)


def _run_remembered(key: Any, tensors: Tuple[Any, ...], stream: Any) -> Tuple[bool, Any]:
    """``(True, result)`` when ``key``'s form is remembered and has run on
    ``tensors`` (positions as in ``_fastcall.call_tensors``)."""
    form = _CALLS.get(key) if key is not None else None
    if form is None:
        return False, None
    _PLAN_CACHE.count_hit(form.plan)
    return True, form.run(tensors, stream)


def attention(
    q: Any,
    k: Any,
    v: Any,
    *,
    causal: Union[bool, str, Any] = False,
    scale: Optional[float] = None,
    return_lse: bool = False,
    layout: str = "bshd",
    out: Any = None,
    lse_out: Any = None,
    kernel: Any = "auto",
    stream: Any = None,
    workspace: Any = None,
    window: Optional[Tuple[int, int]] = None,
    softcap: Optional[float] = None,
    sinks: Any = None,
    num_splits: Optional[int] = None,
) -> Any:
    """Fused attention ``softmax(scale * Q K^T + mask) V``.

    Args:
        q: ``[batch, seqlen_q, num_q_heads, head_dim]`` (layout ``"bshd"``) or
            ``[batch, num_q_heads, seqlen_q, head_dim]`` (``"bhsd"``, torch
            SDPA's layout); bf16 or fp16. A torch.Tensor, or any object with
            ``__cuda_array_interface__`` (CuPy) or ``__dlpack__``.
        k, v: like ``q`` with ``seqlen_k`` and ``num_kv_heads``; ``num_q_heads``
            must be a multiple of ``num_kv_heads`` (GQA/MQA). ``v`` may have
            its own head_dim (``head_dim_v``) where the library supports it.
        causal: ``False``/``None`` (no mask), ``"top_left"`` (key j visible
            to row i iff j <= i; torch SDPA's ``is_causal``),
            ``"bottom_right"`` (j <= i + seqlen_k - seqlen_q; the decode
            convention), an :class:`fmha.Mask`, or ``True`` when
            ``seqlen_q == seqlen_k`` (where both agree). Rows that see no key
            give O = 0 and LSE = -inf.
        scale: softmax scale; ``None`` means ``1/sqrt(head_dim)``.
        return_lse: also return the float32 ``[batch, num_q_heads, seqlen_q]``
            natural-log log-sum-exp of the scaled scores.
        layout: ``"bshd"`` or ``"bhsd"``; applies to q, k, v and out.
        out: output buffer (q's dtype, shape ``q.shape[:-1] + (head_dim_v,)``
            in ``layout``). Allocated with ``torch.empty`` for torch inputs;
            required for other inputs.
        lse_out: preallocated LSE buffer (contiguous float32
            ``[batch, num_q_heads, seqlen_q]``); implies writing LSE.
            Required with ``return_lse`` for non-torch inputs.
        kernel: ``"auto"``, ``"portable"``, ``"hopper"`` or ``"decode"``.
        stream: stream to run on (int handle, torch/CuPy stream, ...).
            Default: the current stream of q's framework (torch:
            ``torch.cuda.current_stream(q.device)``), else the legacy
            default stream.
        workspace: device buffer for plans that need workspace. Default:
            allocated with torch (torch inputs) or CuPy (CuPy inputs).
        window: ``(left, right)`` sliding window around each row's diagonal
            (bottom-right aligned unless ``causal="top_left"``); -1 leaves a
            side unbounded. ``None``: no window.
        softcap: logit soft-cap: scores become ``softcap * tanh(s / softcap)``.
        sinks: float32 ``[num_q_heads]`` sink logits joining each row's
            softmax denominator (LSE includes them).
        num_splits: split-KV parts per (sequence, head): ``None``/0
            automatic, 1 off, 2..128 exactly that many (every kernel
            family splits).

    Returns:
        ``out``, or ``(out, lse)`` when ``return_lse`` is true.

    The call is asynchronous on the stream, like any CUDA kernel launch.
    Plans are cached per problem and device; for inputs that do not tell
    their device (a bare ``__cuda_array_interface__``) a plan is created per
    call, bound to the current context.

    Raises:
        TypeError: unsupported dtype (only bf16/fp16) or object.
        ValueError: inconsistent shapes, non-contiguous last dimension,
            missing ``out=`` for non-torch inputs.
        fmha.FmhaError: the library rejected the problem (e.g.
            :class:`fmha.NotSupportedError` for head_dim 80), with its message.
    """
    # Tensors in _fastcall.call_tensors' positions (q, k, v, out, lse, sinks, cu_seqlens_q,
    # cu_seqlens_k, seqused_k, block_table, workspace).
    tensors = (q, k, v, out, lse_out, sinks, None, None, None, None, workspace)
    key = _CALLS.key("attention", tensors, (causal, scale, return_lse, layout, kernel, window, softcap, num_splits))
    done, result = _run_remembered(key, tensors, stream)
    if done:
        return result
    call = _prepare(
        q, k, v, causal=causal, scale=scale, return_lse=return_lse, layout=layout,
        out=out, lse_out=lse_out, kernel=kernel, stream=stream,
        window=window, softcap=softcap, sinks=sinks, num_splits=num_splits,
    )
    user_workspace = workspace
    out, out_ptr, lse, lse_ptr, allocated = _outputs(call, out, lse_out)
    with device_guard(q, call.device):
        plan, workspace = _plan_and_workspace(call, workspace, allocated)
        wait_for_producers(_views_of(call), call.stream)
        # Raw addresses: the views (and any DLPack capsules) live in `call`.
        plan.run(call.q.ptr, call.k.ptr, call.v.ptr, out_ptr, lse=lse_ptr, workspace=workspace, stream=call.stream,
                 sinks=call.sinks.ptr if call.sinks is not None else None)
    _remember(key, call, plan, user_workspace, lse_out, return_lse)

    if return_lse:
        return out, lse
    return out


def plan_cache_info() -> CacheInfo:
    """Hits, misses and size of :func:`attention`'s plan cache."""
    return _PLAN_CACHE.info()


def last_plan() -> Optional[Any]:
    """The plan of the most recent call, from any thread, of :func:`attention`,
    the serving functions or :func:`merge`: a :class:`Plan` (or
    :class:`MergePlan`) whose ``info`` names the kernel, its split count and
    workspace, e.g. to log which kernel a server's shapes run. None before
    the first call and after :func:`clear_plan_cache`."""
    return _PLAN_CACHE.last_used()


def clear_plan_cache() -> None:
    """Drop every plan cached by :func:`attention` (and the serving forms),
    with the call forms that hold them."""
    _CALLS.clear()
    _PLAN_CACHE.clear()


def set_plan_cache_size(maxsize: int) -> None:
    """Set how many plans :func:`attention` keeps (default 128; 0 disables),
    and as many remembered call forms."""
    _CALLS.resize(maxsize)
    _PLAN_CACHE.resize(maxsize)
