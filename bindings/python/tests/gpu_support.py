"""Set-up and float64 reference pieces shared by the GPU test modules
(test_gpu_*.py).

Each of those modules starts with ``torch = require_torch_cuda()``, which
skips the whole module (the reason shown by ``-ra``) when torch or a CUDA
device is missing; the other helpers may only be called after that.
"""

from __future__ import annotations

from typing import Optional, Tuple

import pytest

try:
    import torch
except ImportError:  # require_torch_cuda() skips the calling module
    torch = None


def require_torch_cuda():
    """The torch module; skips the calling test module without torch or a CUDA device."""
    __tracebackhide__ = True  # report the skip at the test module's line, not here
    if torch is None:
        pytest.skip("torch is not installed: GPU tests need torch and a CUDA device", allow_module_level=True)
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device: GPU tests skipped", allow_module_level=True)
    return torch


def visible_keys(sq: int, sk: int, causal: Optional[str], window: Optional[Tuple[int, int]], device) -> "torch.Tensor":
    """[sq, sk] bool: may query row i see key j?

    Row i sees key j when j <= diag(i) (causal) and diag(i) - left <= j <=
    diag(i) + right (window; -1 leaves a side unbounded), with diag(i) = i
    (top_left) or i + sk - sq (otherwise).
    """
    i = torch.arange(sq, device=device)[:, None]
    j = torch.arange(sk, device=device)[None, :]
    diag = i if causal == "top_left" else i + (sk - sq)
    ok = torch.ones(sq, sk, dtype=torch.bool, device=device)
    if causal:
        ok &= j <= diag
    if window is not None:
        left, right = window
        if left >= 0:
            ok &= j >= diag - left
        if right >= 0:
            ok &= j <= diag + right
    return ok


def softmax_times_v(s, v, sinks=None, p_dtype=None) -> Tuple["torch.Tensor", "torch.Tensor"]:
    """``(softmax(s) @ v, LSE)`` in float64 for scores ``s [..., heads, sq, sk]``
    (masked keys at -inf) and ``v [..., heads, sk, dv]``.

    ``sinks`` (float32 ``[heads]``) join each row's denominator. Rows that
    see nothing give O = 0 and LSE = -inf. With ``p_dtype``, P is rounded to
    it before P.V (a same-precision twin).
    """
    s_all = s
    if sinks is not None:
        sink = sinks.double()[:, None, None].expand(*s.shape[:-1], 1)
        s_all = torch.cat([s, sink], dim=-1)
    if s_all.shape[-1]:
        lse = torch.logsumexp(s_all, dim=-1)
    else:
        lse = torch.full(s_all.shape[:-1], float("-inf"), dtype=torch.float64, device=s.device)
    p = torch.nan_to_num(torch.exp(s - lse[..., None]), nan=0.0)  # -inf - -inf on rows that see nothing
    if p_dtype is not None:
        p = p.to(p_dtype).double()
    return p @ v, lse


class CAI:
    """A tensor seen only through ``__cuda_array_interface__`` (like CuPy or Numba arrays)."""

    def __init__(self, t):
        self.t = t

    @property
    def __cuda_array_interface__(self):
        return self.t.__cuda_array_interface__


class DLPack:
    """A tensor seen only through ``__dlpack__`` (any DLPack producer)."""

    def __init__(self, t):
        self.t = t

    def __dlpack__(self, stream=None):
        return self.t.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()
