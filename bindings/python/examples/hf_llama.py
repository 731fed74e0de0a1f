#!/usr/bin/env python3
"""libfmha as the attention implementation of a Hugging Face transformers model.

Registers ``libfmha_attention_forward`` under the name ``"libfmha"`` in
transformers' attention registry (``AttentionInterface``) together with a
mask function (``AttentionMaskInterface``), builds a small Llama model with
random weights (no download) and checks it against the same model running
transformers' own ``"sdpa"`` implementation:

1. prefill logits (batch 2, 256 tokens): relative error ||a - b|| / ||b||
   below ``--rtol`` (2e-2 for bf16);
2. greedy ``generate()`` of 32 new tokens with a KV cache (one prefill, then
   decode steps with seqlen_q = 1 < seqlen_k):
   a. the logits of every decode step against sdpa's logits for the same
      prefix (sdpa teacher-forced along libfmha's tokens): relative error
      below ``--rtol``;
   b. the tokens against those of sdpa's own ``generate()``: all equal, or
      the first divergence is late (at least ``--min-match`` = 16 equal) or
      a bf16 near-tie (sdpa's logits for the two tokens differ by no more
      than the largest logit difference measured in check 1); after a
      near-tie the two greedy paths legitimately part, which is why 2a
      compares along one path;
3. negative controls: the same checks with a deliberately wrong mask (no
   mask in prefill; torch SDPA's top-left ``is_causal`` in decode) must
   fail, which shows that the checks tell a wrong convention apart.

Both configurations are GQA (16 query heads, 4 KV heads), head_dim 64 and
128. Every attention call must have gone to libfmha (no SDPA fallback). The
script prints PASS/FAIL per check and a RESULT line, and exits non-zero on
failure. Random weights are conditioned (see ``build_model``) so that two
correct bf16 kernels agree to ~1e-2 while a wrong mask is off by > 1e-1.

Run on a CUDA machine (transformers >= 5, torch >= 2.5; no network needed)::

    python3 bindings/python/examples/hf_llama.py --library build/libfmha.so

``--dry-run-cpu`` runs the same wiring on CPU (float32 unless ``--dtype``), with the libfmha
call replaced by an emulation built on torch SDPA with an explicit mask of the
requested alignment (registration, shapes, strides, the causal convention and
the generate path are exercised; libfmha's kernels are not). If a libfmha
library can be loaded, it is still asked (``fmha.check_support``, no GPU
needed) whether it accepts every problem the model produced.

How the integration works (transformers 5.x):

* ``AttentionInterface.register("libfmha", fn)`` makes ``"libfmha"`` a valid
  ``attn_implementation``. The model calls ``fn(module, query, key, value,
  attention_mask, dropout=..., scaling=..., **kwargs)`` with q/k/v in
  [batch, heads, seq, head_dim] (KV with fewer heads under GQA: libfmha maps
  query head h to KV head h // (num_q_heads // num_kv_heads), as
  transformers' ``repeat_kv`` does, so K/V are passed as they are) and wants
  back ``(output [batch, seq, heads, head_dim], None)``.
* ``AttentionMaskInterface.register("libfmha", libfmha_mask)`` decides which
  mask the model hands to ``fn``. Without it transformers builds *no* mask
  at all for an unknown implementation, so padding would be silently ignored.
  ``libfmha_mask`` returns ``None`` exactly when the mask is the plain causal
  one, aligned bottom-right (the last query is the newest token and sees
  every key: prefill with seqlen_q == seqlen_k and decode with a KV cache),
  with no padding; ``fn`` then runs libfmha with ``causal="bottom_right"``.
  Any other mask (padding, sliding window, packed sequences, a static cache
  whose unused slots must be masked, bidirectional) is materialized like
  ``"sdpa"`` does it and ``fn`` falls back to transformers' SDPA path:
  libfmha has no arbitrary-mask input, only none / top-left / bottom-right
  causal, so it cannot express per-sequence key padding.
* transformers 4.4x without ``masking_utils`` (< 4.53) always hands custom
  implementations a 4-D mask; there ``fn`` checks whether that mask is the
  plain bottom-right causal pattern (one comparison on the device) and runs
  libfmha if so.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

LIBFMHA_HEAD_DIMS = (64, 96, 128, 256)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--library", metavar="PATH", help="libfmha.so to use (sets FMHA_LIBRARY before importing fmha)")
    p.add_argument("--dry-run-cpu", action="store_true",
                   help="run on CPU (float32 unless --dtype) with the libfmha call emulated by torch SDPA")
    p.add_argument("--config", choices=["all", "gqa-hd64", "gqa-hd128"], default="all",
                   help="which model configuration(s) to test (default: all)")
    p.add_argument("--dtype", choices=["bfloat16", "float16", "float32"],
                   help="model dtype (default: bfloat16 on GPU, float32 with --dry-run-cpu)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=256, help="prompt length")
    p.add_argument("--new-tokens", type=int, default=32, help="max_new_tokens for generate()")
    p.add_argument("--min-match", type=int, default=16,
                   help="tokens that must match if greedy decoding diverges late (bf16 near-ties)")
    p.add_argument("--rtol", type=float, default=2e-2, help="max relative error of the prefill and decode logits")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--qk-gain", type=float, default=2.0,
                   help="scale q_proj/k_proj weights so random-init attention is peaked, not near-uniform "
                        "(a flat softmax would hide mask mistakes)")
    p.add_argument("--embed-std", type=float, default=1.0,
                   help="std of the random token embeddings (transformers' init: 0.02)")
    p.add_argument("--residual-gain", type=float, default=0.5,
                   help="scale of o_proj/down_proj weights (the residual branches' outputs)")
    p.add_argument("--no-controls", action="store_true", help="skip the negative controls")
    return p.parse_args(argv)


ARGS = parse_args()
if ARGS.library:
    os.environ["FMHA_LIBRARY"] = str(Path(ARGS.library).resolve())

try:
    import fmha
except ImportError:  # not installed: use the checkout's bindings/python/src
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import fmha

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.integrations.sdpa_attention import sdpa_attention_forward

try:  # transformers >= 4.50
    from transformers import AttentionInterface
except ImportError:  # 4.48/4.49: a plain dict
    AttentionInterface = None
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as _ATTENTION_DICT

try:  # transformers >= 4.53
    from transformers.masking_utils import AttentionMaskInterface, causal_mask_function, sdpa_mask
except ImportError:
    AttentionMaskInterface = causal_mask_function = sdpa_mask = None

# With a mask interface registered, attention_mask=None means "plain causal,
# bottom-right aligned, no padding" (see libfmha_mask). Without one (old
# transformers) masks arrive materialized and are inspected.
MASKS_VIA_INTERFACE = AttentionMaskInterface is not None


# --------------------------------------------------------------------------
# The integration: what a user copies (less the test hooks Stats, SABOTAGE
# and _record_problem).
# --------------------------------------------------------------------------

class Backend:
    """Runs one attention call; the real one calls libfmha."""

    name = "libfmha"
    dtypes = (torch.bfloat16, torch.float16)

    def device_ok(self, t: torch.Tensor) -> bool:
        return t.is_cuda

    def attention(self, q, k, v, *, causal, scale, out):
        # q, k, v and out are [batch, heads, seq, head_dim] views ("bhsd");
        # out is a view of a [batch, seq, heads, head_dim] contiguous buffer.
        fmha.attention(q, k, v, causal=causal, scale=scale, layout="bhsd", out=out)


class Stats:
    """What the attention function did, to prove libfmha was really used."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.calls = Counter()      # "prefill" (seqlen_q == seqlen_k) / "decode" / "chunk"
        self.fallbacks = Counter()  # reason -> count
        self.problems = {}          # distinct problems sent to the backend (for check_support)

    def summary(self):
        calls = ", ".join(f"{k} {v}" for k, v in sorted(self.calls.items())) or "none"
        fb = sum(self.fallbacks.values())
        reasons = "; ".join(f"{k}: {v}" for k, v in self.fallbacks.items())
        return f"libfmha calls: {calls}; SDPA fallbacks: {fb}" + (f" ({reasons})" if fb else "")


BACKEND = Backend()
STATS = Stats()
# Negative controls only: force a wrong mask to show the checks notice it.
SABOTAGE = {"prefill": None, "decode": None}


def _is_bottom_right_causal(mask: torch.Tensor, q_len: int, k_len: int) -> bool:
    """Is a materialized 4-D mask exactly the causal pattern j <= i + k_len - q_len, with no padding?"""
    if mask.dim() != 4 or mask.shape[-2] != q_len or mask.shape[-1] < k_len:
        return False
    mask = mask[..., :k_len]
    allowed = mask if mask.dtype == torch.bool else (mask == 0)
    expected = torch.ones(q_len, k_len, dtype=torch.bool, device=mask.device).tril(k_len - q_len)
    return bool(torch.equal(allowed, expected.expand_as(allowed)))


def _fallback_reason(module, query, key, value, attention_mask, dropout, kwargs):
    if attention_mask is not None:
        if MASKS_VIA_INTERFACE or not _is_bottom_right_causal(attention_mask, query.shape[2], key.shape[2]):
            return "explicit attention mask (padding or non-causal pattern)"
    if dropout and dropout > 0.0:
        return "attention dropout"
    if torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad):
        return "autograd (libfmha is forward-only)"
    if query.dtype not in BACKEND.dtypes or key.dtype != query.dtype or value.dtype != query.dtype:
        return f"dtype {query.dtype}"
    if not (BACKEND.device_ok(query) and BACKEND.device_ok(key) and BACKEND.device_ok(value)):
        return f"device {query.device}"
    if query.shape[-1] not in LIBFMHA_HEAD_DIMS or value.shape[-1] != query.shape[-1]:
        return f"head_dim {query.shape[-1]}/{value.shape[-1]}"
    if query.shape[1] % key.shape[1]:
        return "num_q_heads not a multiple of num_kv_heads"
    if query.shape[2] > key.shape[2]:
        return "seqlen_q > seqlen_k"
    for name in ("position_bias", "s_aux", "softcap"):  # extras some models add
        if kwargs.get(name) is not None:
            return name
    return None


def libfmha_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,   # [batch, num_q_heads, seqlen_q, head_dim]
    key: torch.Tensor,     # [batch, num_kv_heads, seqlen_k, head_dim]
    value: torch.Tensor,   # [batch, num_kv_heads, seqlen_k, head_dim]
    attention_mask,
    dropout: float = 0.0,
    scaling=None,
    is_causal=None,
    **kwargs,
):
    """transformers attention function (same contract as ``sdpa_attention_forward``)."""
    reason = _fallback_reason(module, query, key, value, attention_mask, dropout, kwargs)
    if reason is not None:
        STATS.fallbacks[reason] += 1
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)

    causal_model = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    q_len, k_len = query.shape[2], key.shape[2]
    # Bottom-right: query i (of q_len) sees keys j <= i + k_len - q_len. In
    # prefill (q_len == k_len) that is ordinary causal attention; in decode
    # with a KV cache the new token(s) see the whole cache. Torch SDPA's
    # is_causal is top-left, which would let a decoded token see key 0 only.
    causal = "bottom_right" if causal_model else False
    kind = "prefill" if q_len == k_len else ("decode" if q_len == 1 else "chunk")
    if SABOTAGE["prefill" if kind == "prefill" else "decode"] is not None:
        causal = SABOTAGE["prefill" if kind == "prefill" else "decode"]

    batch, heads, _, head_dim = query.shape
    # Output buffer in the layout transformers wants back, [batch, seq, heads,
    # dim] contiguous; libfmha writes it through a [batch, heads, seq, dim]
    # view, so no transpose copy is needed afterwards.
    out = torch.empty(batch, q_len, heads, head_dim, dtype=query.dtype, device=query.device)
    BACKEND.attention(query, key, value, causal=causal, scale=scaling, out=out.transpose(1, 2))

    STATS.calls[kind] += 1
    _record_problem(query, key, value, out.transpose(1, 2), causal, scaling)
    return out, None


def libfmha_mask(**kwargs):
    """Mask function for ``AttentionMaskInterface``: None when libfmha's bottom-right causal mask is exact.

    transformers calls this (with keyword arguments, those of ``sdpa_mask``)
    to build the mask handed to the attention function. ``None`` needs all
    of: the plain causal pattern (not sliding window / chunked / packed /
    bidirectional), queries ending where the keys end (q_offset + q_length
    == kv_offset + kv_length; false for a static cache, whose unused future
    slots must be masked) and no padding in the 2-D attention mask over the
    keys. Otherwise the boolean mask SDPA would use is built (never skipped:
    SDPA's own skip means *top-left* causal), and the attention function
    falls back to SDPA.
    """
    if _plain_bottom_right_causal(kwargs):
        return None
    kwargs.update(allow_is_causal_skip=False, allow_is_bidirectional_skip=False)
    return sdpa_mask(**kwargs)


def _plain_bottom_right_causal(kw) -> bool:
    if not kw.get("allow_is_causal_skip", True):  # the caller needs a real mask (e.g. to combine it)
        return False
    if kw.get("mask_function", causal_mask_function) is not causal_mask_function or kw.get("local_size") is not None:
        return False
    kv_length, kv_offset = kw["kv_length"], kw.get("kv_offset", 0)
    if "q_length" in kw:  # transformers >= 5
        q_length, q_offset = kw["q_length"], kw.get("q_offset", 0)
    else:  # 4.53 - 4.57 pass the query positions
        cache_position = kw["cache_position"]
        q_length, q_offset = cache_position.shape[0], int(cache_position[0])
    if any(isinstance(x, torch.Tensor) for x in (q_offset, kv_offset, kv_length)):
        return False  # a static cache (compile-friendly tensors): masks unused slots anyway
    if q_offset + q_length != kv_offset + kv_length:
        return False
    padding = kw.get("attention_mask")
    if padding is None:
        return True
    if padding.dim() != 2 or padding.shape[-1] < kv_offset + kv_length:
        return False
    return bool(padding[:, kv_offset:kv_offset + kv_length].all())  # one sync, as SDPA's own check


def register_libfmha(name: str = "libfmha") -> None:
    """Make ``attn_implementation=name`` available to every transformers model."""
    if AttentionInterface is not None:
        AttentionInterface.register(name, libfmha_attention_forward)
    else:
        _ATTENTION_DICT[name] = libfmha_attention_forward
    if AttentionMaskInterface is not None:
        AttentionMaskInterface.register(name, libfmha_mask)


# --------------------------------------------------------------------------
# Dry run: emulate libfmha on CPU; ask the library about each problem.
# --------------------------------------------------------------------------

class EmulatedBackend(Backend):
    """fmha.attention's semantics (bhsd, GQA, top_left/bottom_right) on torch SDPA, any device/dtype."""

    name = "emulated libfmha (torch SDPA, explicit mask)"
    dtypes = (torch.float32, torch.bfloat16, torch.float16)

    def device_ok(self, t):
        return True

    def attention(self, q, k, v, *, causal, scale, out):
        hq, hk = q.shape[1], k.shape[1]
        assert hq % hk == 0 and out.shape == q.shape[:3] + v.shape[3:], (q.shape, k.shape, out.shape)
        k = k.repeat_interleave(hq // hk, dim=1)  # query head h reads KV head h // (hq // hk)
        v = v.repeat_interleave(hq // hk, dim=1)
        sq, sk = q.shape[2], k.shape[2]
        i = torch.arange(sq, device=q.device)[:, None]
        j = torch.arange(sk, device=q.device)[None, :]
        if causal in (False, None):
            mask = None
        elif causal == "top_left":
            mask = j <= i
        elif causal == "bottom_right":
            mask = j <= i + (sk - sq)
        else:
            raise ValueError(f"unexpected causal={causal!r}")
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)
        if mask is not None:  # libfmha: a row that sees no key gives 0
            o = o.masked_fill(~mask.any(-1)[:, None], 0.0)
        out.copy_(o)


def _fmha_strides(t: torch.Tensor):
    """(batch, seq, head, dim) element strides of a bhsd tensor, as fmha.attention derives them."""
    span = max(1, max(n * abs(s) for n, s in zip(t.shape, t.stride())))
    span = -(-span // 8) * 8
    st = [span if (n == 1 and (s == 0 or s % 8)) else s for n, s in zip(t.shape, t.stride())]
    return (st[0], st[2], st[1], st[3])


def _record_problem(q, k, v, out, causal, scale):
    if not isinstance(BACKEND, EmulatedBackend):
        return
    key = (tuple(q.shape), tuple(k.shape), _fmha_strides(q), _fmha_strides(k), _fmha_strides(v),
           _fmha_strides(out), causal, scale)
    STATS.problems.setdefault(key, dict(
        batch=q.shape[0], num_q_heads=q.shape[1], num_kv_heads=k.shape[1], seqlen_q=q.shape[2],
        seqlen_k=k.shape[2], head_dim=q.shape[3], dtype="bf16", q_strides=_fmha_strides(q),
        k_strides=_fmha_strides(k), v_strides=_fmha_strides(v), o_strides=_fmha_strides(out),
        softmax_scale=scale, mask=causal if causal else None))


def check_problems_with_library(problems):
    """Ask libfmha (no GPU needed) whether it accepts every recorded problem; None if no library."""
    try:
        fmha.library()
    except Exception as exc:  # LibraryLoadError and friends
        return None, f"skipped: no libfmha library could be loaded ({type(exc).__name__})"
    rejected = []
    for fields in problems.values():
        res = fmha.check_support(**fields)
        if not res.ok:
            rejected.append(f"{fields}: {res.message}")
    if not rejected:
        msg = f"fmha.check_support (SM_ANY) accepted all {len(problems)} distinct problems ({fmha.library_path()})"
    else:
        msg = (f"{len(rejected)} of {len(problems)} problems rejected by {fmha.library_path()}, e.g.:\n    "
               + "\n    ".join(rejected[:3]))
    return not rejected, msg


# --------------------------------------------------------------------------
# The test.
# --------------------------------------------------------------------------

CONFIGS = {
    "gqa-hd64": dict(num_attention_heads=16, num_key_value_heads=4, head_dim=64),
    "gqa-hd128": dict(num_attention_heads=16, num_key_value_heads=4, head_dim=128),
}


def build_model(name, device, dtype):
    """A Llama with random weights, conditioned so that bf16 comparisons are meaningful.

    With transformers' default init (all weights N(0, 0.02)) the attention
    and MLP outputs dwarf the token embeddings, attention is nearly uniform,
    and a difference in the last bit of one attention output grows from layer
    to layer: two correct bf16 kernels then disagree by ~4e-2 in the logits.
    Token embeddings N(0, --embed-std=1), residual-branch output projections
    (o_proj, down_proj) scaled by --residual-gain=0.5 and q/k projections by
    --qk-gain=2 keep the network well-conditioned with peaked attention.
    """
    torch.manual_seed(ARGS.seed)
    config = LlamaConfig(
        vocab_size=1000,
        hidden_size=1024,
        intermediate_size=2816,
        num_hidden_layers=8,
        max_position_embeddings=2048,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,  # never stop early: all new tokens are compared
        pad_token_id=None,
        **CONFIGS[name],
    )
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0.0, ARGS.embed_std)
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(ARGS.qk_gain)
            layer.self_attn.k_proj.weight.mul_(ARGS.qk_gain)
            layer.self_attn.o_proj.weight.mul_(ARGS.residual_gain)
            layer.mlp.down_proj.weight.mul_(ARGS.residual_gain)
    return model.to(device=device, dtype=dtype).eval()


def set_attn(model, impl):
    if hasattr(model, "set_attn_implementation"):  # transformers >= 4.54
        model.set_attn_implementation(impl)
    else:
        model.config._attn_implementation = impl
    assert model.config._attn_implementation == impl, (model.config._attn_implementation, impl)


def rel_err(a, b):
    a, b = a.float(), b.float()
    return (torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b)).item()


def generate(model, input_ids):
    """Greedy generate(); returns (new tokens [batch, n], raw logits of each step [batch, n, vocab])."""
    out = model.generate(
        input_ids,
        attention_mask=torch.ones_like(input_ids),
        max_new_tokens=ARGS.new_tokens,
        do_sample=False,
        use_cache=True,
        return_dict_in_generate=True,
        output_logits=True,
    )
    return out.sequences[:, input_ids.shape[1]:], torch.stack(out.logits, dim=1).float()


def teacher_forced_logits(model, input_ids, tokens):
    """Logits the model gives at each step of decoding ``tokens`` (KV cache: one prefill, then 1-token steps).

    Run with the reference implementation along the tokens libfmha chose,
    this gives the reference logits for exactly the prefixes libfmha's
    generate() saw at every step, so the two can be compared step by step
    even after greedy decoding has taken a different branch at a near-tie.
    """
    mask = torch.ones_like(input_ids)
    out = model(input_ids, attention_mask=mask, use_cache=True)
    steps = [out.logits[:, -1].float()]
    for t in range(tokens.shape[1] - 1):
        mask = torch.cat([mask, mask[:, :1]], dim=1)
        out = model(tokens[:, t:t + 1], attention_mask=mask, past_key_values=out.past_key_values, use_cache=True)
        steps.append(out.logits[:, -1].float())
    return torch.stack(steps, dim=1)


def first_divergence(got, ref):
    n = ref.shape[1]
    firsts = []
    for r in range(ref.shape[0]):
        diff = (got[r] != ref[r]).nonzero()
        firsts.append(int(diff[0]) if len(diff) else n)
    return firsts


class Report:
    def __init__(self):
        self.rows = []

    def check(self, label, ok, detail):
        self.rows.append((label, ok))
        print(f"  [{'PASS' if ok else 'FAIL'}] {label}: {detail}")
        return ok


def run_config(name, device, dtype, report):
    layers = 8
    print(f"\n== {name}: {CONFIGS[name]}, hidden 1024, {layers} layers, vocab 1000, {dtype}, {device}")
    model = build_model(name, device, dtype)
    torch.manual_seed(ARGS.seed + 1)
    input_ids = torch.randint(0, model.config.vocab_size, (ARGS.batch, ARGS.seq), device=device)
    # An all-ones attention_mask, as a tokenizer gives for unpadded text (without
    # one, transformers 4.53-4.57 treat position_ids as possibly packed
    # sequences and build an explicit mask).
    ones = torch.ones_like(input_ids)
    n = ARGS.new_tokens

    with torch.inference_mode():
        # (1) prefill logits
        set_attn(model, "sdpa")
        ref_logits = model(input_ids, attention_mask=ones, use_cache=False).logits
        set_attn(model, "libfmha")
        STATS.reset()
        logits = model(input_ids, attention_mask=ones, use_cache=False).logits
        prefill_stats = STATS.summary()
        problems = dict(STATS.problems)
        err = rel_err(logits, ref_logits)
        noise = (logits.float() - ref_logits.float()).abs().max().item()  # logit noise between the two
        detail = f"rel err {err:.3e} (max abs diff {noise:.3e}, |ref| max {ref_logits.abs().max().item():.2f})"
        if device.type == "cuda":  # how far each is from a float32 model (information only)
            m32 = copy.deepcopy(model).float()
            set_attn(m32, "sdpa")
            ref32 = m32(input_ids, attention_mask=ones, use_cache=False).logits
            del m32
            detail += f"; vs float32 model: libfmha {rel_err(logits, ref32):.3e}, sdpa {rel_err(ref_logits, ref32):.3e}"
        report.check(f"{name} prefill logits vs sdpa (rtol {ARGS.rtol:g})", err < ARGS.rtol, detail)
        report.check(f"{name} prefill ran on libfmha",
                     STATS.calls["prefill"] == layers and not STATS.fallbacks, prefill_stats)

        # (2) greedy generate() with a KV cache, both implementations
        set_attn(model, "sdpa")
        ref_tokens, ref_steps = generate(model, input_ids)
        set_attn(model, "libfmha")
        STATS.reset()
        tokens, steps = generate(model, input_ids)
        gen_stats, gen_ok = STATS.summary(), (
            STATS.calls["prefill"] == layers and STATS.calls["decode"] == layers * (n - 1) and not STATS.fallbacks)
        problems.update(STATS.problems)

        # (2a) decode-step logits: libfmha's generate() vs sdpa on the same prefixes
        set_attn(model, "sdpa")
        tf = teacher_forced_logits(model, input_ids, tokens)
        dec_err = rel_err(steps, tf)
        agree = int((steps.argmax(-1) == tf.argmax(-1)).sum())
        report.check(f"{name} decode logits vs sdpa, {n} steps (rtol {ARGS.rtol:g})", dec_err < ARGS.rtol,
                     f"rel err {dec_err:.3e} (max abs diff {(steps - tf).abs().max().item():.3e}); "
                     f"greedy choice agrees at {agree}/{tf.shape[0] * n} steps")

        # (2b) the tokens themselves
        firsts = first_divergence(tokens, ref_tokens)
        matched = int((tokens == ref_tokens).sum())
        detail = f"{matched}/{tokens.numel()} tokens equal, first divergence per row {firsts} (of {n})"
        ok = all(f == n for f in firsts)
        if not ok:
            # At the first divergence both runs had the same prefix. It is a bf16
            # near-tie if sdpa's logits for its own token and for libfmha's differ
            # by no more than the largest logit difference the prefill check saw.
            # A late divergence (>= --min-match tokens equal) is accepted too.
            notes, ok = [], True
            for r, f in enumerate(firsts):
                if f == n:
                    continue
                margin = (ref_steps[r, f, ref_tokens[r, f]] - ref_steps[r, f, tokens[r, f]]).item()
                tie, late = margin <= noise, f >= min(ARGS.min_match, n)
                ok = ok and (tie or late)
                notes.append(f"row {r} step {f}: sdpa margin {margin:.3g} "
                             f"({'a near-tie' if tie else 'not a near-tie'}: max prefill diff {noise:.3g})"
                             + (", late" if late else ""))
            detail += "; " + "; ".join(notes)
            if ok:
                detail += " -> accepted as bf16 rounding (the decode logits are checked above)"
        report.check(f"{name} greedy generate() tokens vs sdpa", ok, detail)
        print(f"         libfmha tokens row 0: {tokens[0, :16].tolist()} ...")
        report.check(f"{name} generate ran on libfmha (prefill + decode)", gen_ok, gen_stats)

        # (3) negative controls: wrong masks must be caught by the same checks
        if not ARGS.no_controls:
            set_attn(model, "libfmha")
            SABOTAGE.update(prefill=False, decode=None)  # prefill without the causal mask
            bad = model(input_ids, attention_mask=ones, use_cache=False).logits
            SABOTAGE.update(prefill=None, decode="top_left")  # torch SDPA's is_causal convention in decode
            bad_tokens, bad_steps = generate(model, input_ids)
            SABOTAGE.update(prefill=None, decode=None)
            set_attn(model, "sdpa")
            bad_tf = teacher_forced_logits(model, input_ids, bad_tokens)
            bad_err = rel_err(bad, ref_logits)
            report.check(f"{name} control: prefill without causal mask is caught", bad_err >= ARGS.rtol,
                         f"prefill logits rel err {bad_err:.3e}")
            bad_dec = rel_err(bad_steps, bad_tf)
            report.check(f"{name} control: top-left (SDPA is_causal) mask in decode is caught",
                         bad_dec >= ARGS.rtol,
                         f"decode logits rel err {bad_dec:.3e}; first token divergence per row "
                         f"{first_divergence(bad_tokens, ref_tokens)}")

    if isinstance(BACKEND, EmulatedBackend):
        ok, msg = check_problems_with_library(problems)
        if ok is None:
            print(f"  [info] library check {msg}")
        else:
            report.check(f"{name} libfmha accepts the model's problems", ok, msg)


def main():
    global BACKEND
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, fmha bindings from "
          f"{Path(fmha.__file__).parent}")
    if ARGS.dry_run_cpu:
        BACKEND = EmulatedBackend()
        device, dtype = torch.device("cpu"), getattr(torch, ARGS.dtype or "float32")
        print(f"DRY RUN on CPU, {dtype}: libfmha calls are emulated with torch SDPA + explicit masks")
    else:
        if not torch.cuda.is_available():
            sys.exit("no CUDA device: run on a GPU machine, or pass --dry-run-cpu")
        device, dtype = torch.device("cuda"), getattr(torch, ARGS.dtype or "bfloat16")
        print(f"libfmha {fmha.version()} from {fmha.library_path()}, {torch.cuda.get_device_name()}")
    print(f"attention backend: {BACKEND.name}; mask handling: "
          f"{'AttentionMaskInterface' if MASKS_VIA_INTERFACE else 'inspect materialized 4-D masks'}")
    transformers.logging.set_verbosity_error()
    register_libfmha("libfmha")

    report = Report()
    t0 = time.time()
    for name in (CONFIGS if ARGS.config == "all" else [ARGS.config]):
        try:
            run_config(name, device, dtype, report)
        except Exception:  # report, go on with the next configuration
            traceback.print_exc()
            report.check(f"{name} ran to the end", False, "exception above")
        finally:
            SABOTAGE.update(prefill=None, decode=None)

    failed = [label for label, ok in report.rows if not ok]
    print(f"\n{len(report.rows) - len(failed)}/{len(report.rows)} checks passed in {time.time() - t0:.1f} s"
          + (" (DRY RUN: libfmha emulated on CPU)" if ARGS.dry_run_cpu else ""))
    print("RESULT:", "PASS" if not failed else "FAIL: " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
