"""GPU tests of the descriptor-v2 features through fmha.attention: sliding
windows, logit soft-capping and attention sinks, against a float64
reference built here (torch SDPA has no sinks or softcap to compare with).

Same-precision baseline: the float64 reference's own result rounded to the
dtype, so the bound is |fmha - ref64| <= 2 * |round(ref64) - ref64| + the
error of rounding P to 16 bits (measured by a float32 twin that rounds P).
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import pytest
from gpu_support import require_torch_cuda, softmax_times_v, visible_keys
from seeds import seed_for

torch = require_torch_cuda()

import fmha  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.usefixtures("lib")]


def reference(q, k, v, *, causal: Optional[str], window: Optional[Tuple[int, int]],
              softcap: Optional[float], sinks: Optional[torch.Tensor], p_dtype=None):
    """O [B, Sq, Hq, D] and LSE [B, Hq, Sq] in float64 (BSHD inputs). With
    p_dtype, P is rounded to it before P.V (a same-precision twin)."""
    b, sq, hq, d = q.shape
    sk, hk = k.shape[1], k.shape[2]
    qf = q.double().transpose(1, 2)
    kf = k.double().transpose(1, 2).repeat_interleave(hq // hk, 1)
    vf = v.double().transpose(1, 2).repeat_interleave(hq // hk, 1)
    s = qf @ kf.transpose(-1, -2) / math.sqrt(d)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    s = s.masked_fill(~visible_keys(sq, sk, causal, window, q.device), float("-inf"))
    o, lse = softmax_times_v(s, vf, sinks, p_dtype)
    return o.transpose(1, 2), lse


CASES = [
    dict(causal="bottom_right", window=(100, -1)),
    dict(causal=None, window=(37, 50)),
    dict(causal=None, window=(0, 0)),
    dict(causal=None, softcap=30.0),
    dict(causal="top_left", softcap=2.0),
    dict(causal=None, sinks=True),
    dict(causal="bottom_right", sinks=True),
    dict(causal="bottom_right", window=(64, -1), softcap=20.0, sinks=True),
]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("lengths", [(300, 1000), (1000, 300), (257, 257)], ids=lambda x: f"{x[0]}x{x[1]}")
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_features_match_reference(dtype, lengths, case) -> None:
    torch.manual_seed(seed_for("features", str(dtype), lengths, str(case)))  # $FMHA_TEST_SEED, see seeds.py
    sq, sk = lengths
    b, hq, hk, d = 2, 8, 2, 128
    q = torch.randn(b, sq, hq, d, dtype=dtype, device="cuda")
    k = torch.randn(b, sk, hk, d, dtype=dtype, device="cuda")
    v = torch.randn(b, sk, hk, d, dtype=dtype, device="cuda")
    sinks = torch.randn(hq, dtype=torch.float32, device="cuda") * 2 if case.get("sinks") else None
    out = torch.full_like(q, float("nan"))
    o, lse = fmha.attention(q, k, v, causal=case.get("causal"), window=case.get("window"),
                            softcap=case.get("softcap"), sinks=sinks, out=out, return_lse=True)
    torch.cuda.synchronize()
    ref_o, ref_lse = reference(q, k, v, causal=case.get("causal"), window=case.get("window"),
                               softcap=case.get("softcap"), sinks=sinks)
    twin_o, _ = reference(q, k, v, causal=case.get("causal"), window=case.get("window"),
                          softcap=case.get("softcap"), sinks=sinks, p_dtype=dtype)
    assert not torch.isnan(o).any(), "unwritten or NaN output"
    err = (o.double() - ref_o).abs().max().item()
    base = max((twin_o.to(dtype).double() - ref_o).abs().max().item(), 1e-5 * ref_o.abs().max().item(), 1e-6)
    assert err <= 2 * base, f"O error {err:.3g} > 2 x same-precision {base:.3g}"
    finite = torch.isfinite(ref_lse)
    assert torch.equal(finite, torch.isfinite(lse)), "LSE -inf rows differ"
    lerr = (lse.double() - ref_lse)[finite].abs().max().item() if finite.any() else 0.0
    assert lerr <= 1e-4 * (1 + ref_lse[finite].abs().max().item()), f"LSE error {lerr:.3g}"


def test_sinks_are_required_when_planned() -> None:
    q = torch.randn(1, 16, 2, 64, dtype=torch.bfloat16, device="cuda")
    desc = fmha.describe(q, q, q, sinks=torch.zeros(2, device="cuda"))
    with fmha.Plan(desc) as plan:
        with pytest.raises(ValueError, match="sinks"):
            plan.run(q, q, q, torch.empty_like(q))
