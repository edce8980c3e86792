"""Plain-PyTorch reference model of the decoder-only Transformer a ModelSpec describes.

Ground truth for tests, written from the architectures' own definitions (HF
transformers modules, the papers), never from archcalc's formulas:

- parameters: ``sum(p.numel() for p in model.parameters())`` on the meta device
  (tied weights once, buffers never);
- FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` on a tiny CPU forward and
  backward.  That counter sees only mm/addmm/bmm/baddbmm (and SDPA, unused
  here), so every projection is its own ``nn.Linear``, the attention core is
  two explicit matmuls over the full T×S rectangle, and every contraction over
  residual streams or depth sources is a matmul.  Masks, softmax, norms,
  activations, RoPE, gathers and adds all count 0.

Letters: B batch, T tokens, D d_model, H query heads, K KV heads, F d_ff,
E experts, n residual streams, s depth sources, U = 2L residual units.

Inference: ``model(tokens, cache)`` with ``cache = model.new_cache()`` runs a
prefill and then decode steps (or chunks); with no cache the forward is the
training-style one above, unchanged.  Each attention layer caches what its
architecture keeps per token: K and V after qk-norm and RoPE, or MLA's normed
latent and rotated rope key (re-expanded through kv_b every step: the
non-absorbed form); a sliding-window layer keeps its last `window` tokens.
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

from archcalc.spec.model import GATED_ACTIVATIONS, ModelSpec, NormSpec, RopeScaling

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "silu": F.silu,
    "relu2": lambda x: F.relu(x).square(),
    "reglu": F.relu,  # gated: act(gate(x)) * up(x)
    "relu2glu": lambda x: F.relu(x).square(),
    "geglu": F.gelu,
    "swiglu": F.silu,
}


AttentionImpl = Literal["explicit", "sdpa"]
Recompute = Literal["none", "selective", "full"]


def build_reference_model(
    spec: ModelSpec, device: str | torch.device = "meta", dtype: torch.dtype | None = None, *,
    attention: AttentionImpl = "explicit", dropout: float = 0.0, fused_norms: bool = False,
    recompute: Recompute = "none",
) -> nn.Module:
    """The model `spec` describes; ``forward(tokens [B, T], cache=None) -> logits [B, T, V]``.

    On "meta" (the default) nothing is allocated: use it to count parameters.
    Run forwards on "cpu" with tiny dims.  `dtype` (default: torch's, fp32) is
    the parameters' dtype, set at creation so no fp32 copy is ever allocated;
    RoPE frequencies stay fp32.

    attention: "explicit" (two matmuls over the full T×S rectangle, what
    FlopCounterMode counts and what HF's eager attention keeps for backward) or
    "sdpa" (F.scaled_dot_product_attention: torch's flash kernel, which keeps
    q, k, v, the output and the log-sum-exp; causal, with windows, chunks and a
    cache through SDPA's boolean mask; no soft-caps, sinks or ALiBi).
    dropout: training dropout where Megatron-LM puts it (attention
    probabilities in the explicit core, the embedding, each sublayer's output).
    fused_norms: every RMSNorm runs as torch's fused kernel (FusedRMSNorm), as
    on CUDA; torch's CPU RMSNorm is composite and keeps more for backward.
    recompute: torch.utils.checkpoint around each attention core (selective,
    Korthikanti et al. 2022) or each layer (full; standard and parallel residuals).
    """
    device = torch.device(device)
    with torch.device(device), _default_dtype(dtype), _skip_random_init(device.type == "meta"):
        model = ReferenceModel(spec, attention, dropout)
    for layer in model.layers:
        layer.attn.inner.recompute_core = recompute == "selective"
    if recompute == "full":
        if not isinstance(model.residual, LayerResidual):
            raise ValueError("full recomputation checkpoints whole layers: standard or parallel residuals only")
        model.residual.recompute_layers = True
    if fused_norms:
        for module in model.modules():
            if type(module) is nn.RMSNorm:
                module.__class__ = FusedRMSNorm  # same parameters, torch's fused kernel and its saved set
    return model


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype | None):
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype or saved)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


@contextlib.contextmanager
def _skip_random_init(skip: bool):
    """Meta tensors hold no values: skip nn.init's random fills (as HF's no_init_weights does).

    nn.Linear's kaiming init dominates building a 256-expert model on meta.
    """
    names = ("kaiming_uniform_", "uniform_", "normal_") if skip else ()
    saved = {name: getattr(nn.init, name) for name in names}
    for name in names:
        setattr(nn.init, name, lambda tensor, *args, **kwargs: tensor)
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(nn.init, name, fn)


def count_flops(model: nn.Module, tokens: torch.Tensor, backward: bool = False) -> int:
    """FlopCounterMode's total for one forward (and backward of logits.sum())."""
    with FlopCounterMode(display=False) as counter:
        logits = model(tokens)
        if backward:
            logits.sum().backward()
    return counter.get_total_flops()


# ---- small pieces -----------------------------------------------------------


class _FusedRMSNormFunction(torch.autograd.Function):
    """aten::_fused_rms_norm with the backward torch's derivatives.yaml gives it
    (it keeps input, weight and rstd, result1, for _fused_rms_norm_backward).
    CUDA runs that kernel; on the CPU torch decomposes nn.RMSNorm into ops that
    also keep the normalised input, so this runs the fused op's forward and
    torch's own decomposition of its backward."""

    @staticmethod
    def forward(ctx, x, weight, shape, eps):
        out, rstd = torch.ops.aten._fused_rms_norm(x, shape, weight, eps)
        ctx.save_for_backward(x, weight, rstd)
        ctx.shape = shape
        return out

    @staticmethod
    def backward(ctx, grad):
        from torch._decomp import decomposition_table

        x, weight, rstd = ctx.saved_tensors
        backward = decomposition_table[torch.ops.aten._fused_rms_norm_backward.default]
        grad_x, grad_w = backward(grad, x, ctx.shape, rstd, weight, [True, weight is not None])
        return grad_x, grad_w, None, None


class FusedRMSNorm(nn.RMSNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _FusedRMSNormFunction.apply(x, self.weight, list(self.normalized_shape), self.eps)


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """torch's fused dropout kernel (what F.dropout runs on CUDA: a bool mask kept for backward);
    F.dropout on the CPU keeps a scaled noise tensor of x's dtype instead."""
    return torch.native_dropout(x, p, training)[0] if p and training else x


def make_norm(norm: NormSpec, dim: int) -> nn.Module:
    """The spec's norm over the last `dim` features; identity (no params) for kind none."""
    if norm.kind == "rmsnorm":
        return nn.RMSNorm(dim, eps=1e-6, elementwise_affine=norm.weight)
    if norm.kind == "layernorm":
        return nn.LayerNorm(dim, elementwise_affine=norm.weight, bias=norm.bias)
    return nn.Identity()


def contract(weights: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Σ_s weights[..., s] · values[..., s, :] as a batched matmul (2·s·D FLOPs per row).

    Not einsum: einsum turns a contraction over a size-1 dim (one depth source,
    one stream) into a broadcast multiply, which FlopCounterMode counts as 0.
    Both operands stay ≥ 2-D so this is never `mv` (also uncounted).
    """
    weights = weights.expand(values.shape[:-1])
    return (weights.unsqueeze(-2) @ values).squeeze(-2)


def rope_frequencies(
    dim: int, theta: float, scaling: RopeScaling | None, max_context: int
) -> tuple[torch.Tensor, float]:
    """RoPE inverse frequencies and cos/sin factor (after HF rope_utils); scaling adds no params or FLOPs."""
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    if scaling is None:
        return inv.float(), 1.0
    f, kind = scaling.factor, scaling.type
    original = scaling.original_context or max(1, round(max_context / f))
    if kind in ("ntk", "dynamic"):  # NTK-aware base change (dynamic's length dependence is dropped)
        return rope_frequencies(dim, theta * f ** (dim / max(dim - 2, 1)), None, max_context)
    if kind == "linear":  # position interpolation
        return (inv / f).float(), 1.0
    if kind == "longrope":  # per-dim short/long factors are not in the spec: uniform interpolation
        return (inv / f).float(), math.sqrt(1 + math.log(f) / math.log(original)) if f > 1 and original > 1 else 1.0
    if kind == "llama3":  # low_freq_factor 1, high_freq_factor 4
        old = scaling.original_context or 8192
        wavelen = 2 * math.pi / inv
        smooth = (old / wavelen - 1.0) / (4.0 - 1.0)
        blended = (1 - smooth) * inv / f + smooth * inv
        inv = torch.where(wavelen > old, inv / f, torch.where(wavelen < old / 4.0, inv, blended))
        return inv.float(), 1.0
    # yarn: beta_fast 32, beta_slow 1; interpolate low frequencies, keep high ones
    def correction_dim(rotations: float) -> float:
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(32)), 0)
    high = min(math.ceil(correction_dim(1)), dim - 1)
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / max(high - low, 1e-3)).clamp(0, 1)
    inv = inv / f * ramp + inv * (1 - ramp)
    return inv.float(), (0.1 * math.log(f) + 1.0) if f > 1 else 1.0


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi head slopes (Press et al.; HF build_alibi_tensor for non-powers of 2)."""
    closest = 2 ** math.floor(math.log2(n_heads))
    slopes = [2 ** (-8 * (i + 1) / closest) for i in range(closest)]
    slopes += [2 ** (-4 * (2 * i + 1) / closest) for i in range(n_heads - closest)]
    return torch.tensor(slopes)


def sinusoidal_table(positions: torch.Tensor, dim: int, base: float) -> torch.Tensor:
    """Vaswani et al. absolute positions: sin on even features, cos on odd ones; [T, dim] for positions [T]."""
    pos = positions.to(torch.float32)[:, None]
    freq = base ** (-torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device) / dim)
    table = torch.zeros(len(positions), dim, device=positions.device)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq[: dim // 2])
    return table


class Rotary(nn.Module):
    """RoPE on features [offset, offset + dim) of each head, rotate-half layout; buffers only."""

    def __init__(self, dim: int, offset: int, theta: float, scaling: RopeScaling | None, max_context: int):
        super().__init__()
        inv_freq, self.factor = rope_frequencies(dim, theta, scaling, max_context)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.dim, self.offset = dim, offset

    def rotate(self, part: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """All `dim` features of part [B, T, heads, dim] rotated by positions [T]."""
        angles = positions.to(torch.float32)[:, None] * self.inv_freq
        angles = torch.cat([angles, angles], -1)[:, None, :]  # [T, 1, dim]
        half1, half2 = part.chunk(2, dim=-1)
        rotated = (part * angles.cos() + torch.cat([-half2, half1], -1) * angles.sin()) * self.factor
        return rotated.to(part.dtype)  # angles stay fp32; the result keeps the activations' dtype

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:  # x: [B, T, heads, d]
        start, stop = self.offset, self.offset + self.dim
        return torch.cat([x[..., :start], self.rotate(x[..., start:stop], positions), x[..., stop:]], -1)


# ---- KV cache ---------------------------------------------------------------


class LayerCache:
    """What one attention layer keeps between steps: a tuple of [B, S, ...] tensors (k and v, or MLA's
    latent and rope key) for the S most recent tokens."""

    def __init__(self):
        self.kept: tuple[torch.Tensor, ...] = ()

    def extend(self, new: tuple[torch.Tensor, ...], window: int | None) -> tuple[torch.Tensor, ...]:
        """The kept tensors followed by `new` ([B, T, ...] each) along the tokens: what this step attends to.

        A sliding-window layer then keeps only the last `window` of them (as archcalc allocates; the
        next query needs window - 1 plus itself, the extra one is masked).
        """
        full = tuple(torch.cat([old, n], 1) for old, n in zip(self.kept, new)) if self.kept else new
        self.kept = full if window is None else tuple(t[:, -window:] for t in full)
        return full


class KVCache:
    """A model's cache: one LayerCache per layer and `length`, the tokens each sequence has processed."""

    def __init__(self, n_layers: int):
        self.layers = [LayerCache() for _ in range(n_layers)]
        self.length = 0


# ---- attention --------------------------------------------------------------


class Attention(nn.Module):
    """What both attention kinds share: qk-norm, RoPE, the explicit-matmul core, o_proj.

    Subclasses define `project(x, positions) -> (q [B,T,H,dq], new)`: q ready for the scores, `new`
    what the cache keeps of these T tokens; and, unless `new` is (k, v) itself,
    `keys_values(kept) -> k [B,S,Hk,dq], v [B,S,Hk,dv]` for the S kept tokens.
    """

    def __init__(self, spec: ModelSpec, layer: int, rope_offset: int):
        super().__init__()
        a, pos = spec.attention, spec.position
        self.n_heads, self.qk_dim, self.v_dim = a.n_heads, spec.qk_head_dim, spec.v_head_dim
        self.scale = 1.0 / math.sqrt(self.qk_dim)
        self.softcap = a.softcap
        kind = spec.layer_attention[layer]
        local = kind == "local"
        # A chunked layer keeps its last chunk_size tokens (the current chunk's are among them) and
        # masks keys outside the query's chunk.
        self.chunk = a.chunk_size if kind == "chunked" else None
        self.window = a.sliding_window if local else self.chunk
        # qk-norm, same kind as every other norm: "head" shares one qk_dim norm
        # across heads; "full" spans H·dq for q and K·dq for k (OLMo 2).
        # "l2" (Llama 4): a weightless RMS normalisation of each head, on RoPE layers only.
        l2 = a.qk_norm == "l2" and spec.layer_rope[layer]
        widths = {"none": (None, None), "head": (1, 1), "full": (a.n_heads, spec.n_kv_heads),
                  "l2": (1, 1) if l2 else (None, None)}[a.qk_norm]
        self.qk_norm_widths = tuple(w and w * self.qk_dim for w in widths)
        if a.qk_norm in ("head", "full"):
            self.q_norm = make_norm(spec.norm, self.qk_norm_widths[0])
            self.k_norm = make_norm(spec.norm, self.qk_norm_widths[1])
        elif l2:
            self.q_norm = self.k_norm = nn.RMSNorm(self.qk_dim, eps=1e-6, elementwise_affine=False)
        self.rotary = None
        if spec.layer_rope[layer]:
            own_theta = local and pos.local_theta is not None  # Gemma 3: local layers unscaled, own base
            self.rotary = Rotary(
                spec.rope_dim,
                rope_offset,
                pos.local_theta if own_theta else pos.theta,
                None if own_theta else pos.scaling,
                spec.max_context,
            )
        if pos.kind == "alibi":
            self.register_buffer("alibi_slopes", alibi_slopes(a.n_heads), persistent=False)
        self.sinks = nn.Parameter(torch.zeros(a.n_heads)) if a.sinks else None  # gpt-oss: one logit per head
        # ReferenceModel sets these (build_reference_model)
        self.impl, self.dropout, self.recompute_core = "explicit", 0.0, False
        self.o_proj = nn.Linear(a.n_heads * self.v_dim, spec.d_model,
                                bias="o" in a.bias or layer in (a.o_bias_layers or ()))
        # BitNet: a norm over every head's output before o_proj
        self.sub_norm = make_norm(spec.norm, a.n_heads * self.v_dim) if a.sub_norm else nn.Identity()

    def project(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        raise NotImplementedError

    def keys_values(self, kept: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        return kept  # MHA caches k and v themselves

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x if self.rotary is None else self.rotary(x, positions)

    def normalize_qk(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.qk_norm_widths[0] is None:
            return q, k
        B, T = q.shape[:2]
        q = self.q_norm(q.reshape(B, T, -1, self.qk_norm_widths[0])).reshape(q.shape)
        k = self.k_norm(k.reshape(B, T, -1, self.qk_norm_widths[1])).reshape(k.shape)
        return q, k

    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: LayerCache | None = None) -> torch.Tensor:
        """x [B, T, D] at positions [T]; with a cache, the T tokens follow the ones it keeps."""
        q, new = self.project(x, positions)
        k, v = self.keys_values(new if cache is None else cache.extend(new, self.window))
        if self.recompute_core:  # selective recomputation: keep q, k, v; rebuild the core in backward
            out = checkpoint(self.attend, q, k, v, positions, use_reentrant=False)
        else:
            out = self.attend(q, k, v, positions)
        if getattr(self, "output_gate", False):  # sigmoid(gate) ⊙ each head's output, before o_proj
            out = out * torch.sigmoid(self.gate)
        return self.o_proj(self.sub_norm(out.flatten(2)))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """softmax(q kᵀ) v -> [B, T, H, dv]; the S keys are the S tokens ending at the newest query's."""
        B, T, S = q.shape[0], q.shape[1], k.shape[1]
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # heads first: [B, heads, T or S, d]
        if self.impl == "sdpa":
            return self.attend_sdpa(q, k, v, positions)
        groups = self.n_heads // k.shape[1]
        k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)  # GQA: a copy, no FLOPs
        scores = (q @ k.transpose(-1, -2)) * self.scale  # [B, H, T, S], the full rectangle
        if self.softcap is not None:
            scores = self.softcap * torch.tanh(scores / self.softcap)
        i, j = self.query_key_positions(positions, S)
        if hasattr(self, "alibi_slopes"):
            scores = scores - (self.alibi_slopes[:, None, None] * (i - j)).to(scores.dtype)
        scores = scores.masked_fill(~self.allowed(i, j), float("-inf"))
        if self.sinks is not None:  # an extra softmax column per head, dropped after
            scores = torch.cat([scores, self.sinks.view(1, -1, 1, 1).expand(B, -1, T, 1)], -1)
        probs = scores.softmax(-1)[..., :S]
        probs = dropout(probs, self.dropout, self.training)
        return (probs @ v).transpose(1, 2)  # [B, H, T, dv] -> [B, T, H, dv]

    @staticmethod
    def query_key_positions(positions: torch.Tensor, S: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions of the queries [T, 1] and of the S keys [1, S] (the S tokens ending at the last query)."""
        return positions[:, None], (positions[-1] + 1 - S + torch.arange(S, device=positions.device))[None, :]

    def allowed(self, i: torch.Tensor, j: torch.Tensor) -> torch.Tensor:
        """[T, S] True where query i may attend key j: causal, within the chunk or window."""
        allowed = j <= i
        if self.chunk is not None:
            return allowed & (i // self.chunk == j // self.chunk)
        if self.window is not None:
            return allowed & (i - j < self.window)
        return allowed

    def attend_sdpa(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """torch's fused attention over heads-first q [B,H,T,d], k and v [B,K,S,d], GQA without copying
        K and V.  A whole causal context runs is_causal (the flash kernel); queries after a cache or
        under a window or chunk pass the same boolean mask the explicit core applies, and one decode
        query over unmasked keys needs none.  No caps, sinks or ALiBi (SDPA has no such options)."""
        if self.softcap is not None or self.sinks is not None or hasattr(self, "alibi_slopes"):
            raise ValueError("sdpa attention has no logit soft-cap, sinks or ALiBi")
        T, S = q.shape[2], k.shape[2]
        full = self.chunk is None and self.window is None
        # No dropout_p: FlashAttention drops in-kernel and keeps only an RNG state; torch's CPU
        # kernel would fall back to the math path (and keep the probabilities) instead.
        if full and T in (1, S):  # a whole context (top-left = bottom-right causal), or one query over all keys
            out = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1, scale=self.scale, enable_gqa=True)
        else:
            mask = self.allowed(*self.query_key_positions(positions, S))
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale, enable_gqa=True)
        return out.transpose(1, 2)


class MultiHeadAttention(Attention):
    """MHA / GQA / MQA: separate q, k, v projections (Llama)."""

    def __init__(self, spec: ModelSpec, layer: int):
        super().__init__(spec, layer, rope_offset=0)  # partial rotary rotates the first rope_dim features
        D, a, K = spec.d_model, spec.attention, spec.n_kv_heads
        self.n_kv_heads = K
        # An output gate (Qwen3-Next) doubles q_proj: per head, the query and then its gate.
        self.output_gate = a.output_gate
        self.q_proj = nn.Linear(D, a.n_heads * self.qk_dim * (2 if a.output_gate else 1), bias="q" in a.bias)
        self.k_proj = nn.Linear(D, K * self.qk_dim, bias="k" in a.bias)
        self.v_proj = nn.Linear(D, K * self.v_dim, bias="v" in a.bias)
        # Beam: one bias a head on the gate, broadcast over its head_dim values
        self.gate_bias = nn.Parameter(torch.zeros(a.n_heads)) if a.gate_bias else None

    def project(self, x, positions):
        B, T, _ = x.shape
        q = self.q_proj(x)
        if self.output_gate:  # Qwen3NextAttention: view per head as [query | gate], chunk in two
            q, self.gate = q.view(B, T, self.n_heads, 2 * self.qk_dim).chunk(2, -1)
            if self.gate_bias is not None:
                self.gate = self.gate + self.gate_bias[:, None]
        q = q.reshape(B, T, self.n_heads, self.qk_dim)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.qk_dim)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.v_dim)
        q, k = self.normalize_qk(q, k)
        return self.rotate(q, positions), (self.rotate(k, positions), v)  # the cache keeps k as attended


class LatentAttention(Attention):
    """MLA as HF DeepseekV3Attention runs it (not absorbed): q and kv through low-rank latents."""

    def __init__(self, spec: ModelSpec, layer: int):
        a, D, H = spec.attention, spec.d_model, spec.attention.n_heads
        super().__init__(spec, layer, rope_offset=a.qk_nope_head_dim)  # rope part is the tail of each head
        self.nope, self.rope, self.kv_rank = a.qk_nope_head_dim, a.qk_rope_head_dim, a.kv_lora_rank
        if a.q_lora_rank is None:
            self.q_proj = nn.Linear(D, H * self.qk_dim, bias=False)
        else:
            self.q_a_proj = nn.Linear(D, a.q_lora_rank, bias=False)
            self.q_a_layernorm = nn.RMSNorm(a.q_lora_rank, eps=1e-6)
            self.q_b_proj = nn.Linear(a.q_lora_rank, H * self.qk_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(D, self.kv_rank + self.rope, bias=False)
        self.kv_a_layernorm = nn.RMSNorm(self.kv_rank, eps=1e-6)
        self.kv_b_proj = nn.Linear(self.kv_rank, H * (self.nope + self.v_dim), bias=False)

    def project(self, x, positions):
        B, T, _ = x.shape
        q = self.q_proj(x) if hasattr(self, "q_proj") else self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))
        latent, k_rope = self.kv_a_proj_with_mqa(x).split([self.kv_rank, self.rope], -1)
        k_rope = k_rope[:, :, None, :]  # [B, T, 1, rope]: one rope key shared by all heads
        if self.rotary is not None:
            k_rope = self.rotary.rotate(k_rope, positions)
        q = self.rotate(q.view(B, T, self.n_heads, self.qk_dim), positions)
        return q, (self.kv_a_layernorm(latent), k_rope)  # the cache keeps kv_rank + rope values per token

    def keys_values(self, kept):
        latent, k_rope = kept  # [B, S, kv_rank], [B, S, 1, rope]
        B, S, _ = latent.shape
        H = self.n_heads
        kv = self.kv_b_proj(latent).view(B, S, H, self.nope + self.v_dim)  # every kept token, every step
        k_nope, v = kv.split([self.nope, self.v_dim], -1)
        return torch.cat([k_nope, k_rope.expand(B, S, H, self.rope)], -1), v


# ---- feed-forward -----------------------------------------------------------


class MLP(nn.Module):
    """Dense FFN of width F: down(act(up(x))), or down(act(gate(x)) * up(x)) when gated."""

    def __init__(self, d_model: int, d_ff: int, activation: str, bias: bool, sub_norm: nn.Module | None = None):
        super().__init__()
        self.act = ACTIVATIONS[activation]
        self.sub_norm = sub_norm or nn.Identity()  # BitNet: a norm over F before down_proj
        self.gated = activation in GATED_ACTIVATIONS
        if self.gated:
            self.gate_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        hidden = self.act(self.gate_proj(x)) * self.up_proj(x) if self.gated else self.act(self.up_proj(x))
        return self.down_proj(self.sub_norm(hidden))


class MoE(nn.Module):
    """Top-k routed experts (+ an optional, optionally gated, shared expert).

    Each expert runs only on the tokens routed to it (index, run, index_add),
    so matmul FLOPs are exactly tokens·top_k·(one expert's matmuls).
    """

    def __init__(self, spec: ModelSpec):
        super().__init__()
        moe, ffn, D = spec.ffn.moe, spec.ffn, spec.d_model
        self.top_k = moe.top_k
        self.router = nn.Linear(D, moe.n_experts, bias=moe.router_bias)
        self.experts = nn.ModuleList(MLP(D, moe.d_expert, ffn.activation, ffn.bias) for _ in range(moe.n_experts))
        self.shared_expert = MLP(D, moe.d_shared, ffn.activation, ffn.bias) if moe.d_shared else None
        # the gate belongs to the shared expert: none without one
        self.shared_expert_gate = nn.Linear(D, 1, bias=False) if moe.shared_gate and moe.d_shared else None
        self.bias = nn.Parameter(torch.zeros(D)) if moe.output_bias else None  # JetMoE's, on the combined output

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])  # [B·T, D]
        weights, chosen = self.router(x).softmax(-1).topk(self.top_k, dim=-1)  # [B·T, k]
        weights = weights / weights.sum(-1, keepdim=True)  # renormalised over the chosen (Mixtral)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            if token.numel():
                out = out.index_add(0, token, expert(x[token]) * weights[token, slot, None])
        if self.shared_expert is not None:
            shared = self.shared_expert(x)
            if self.shared_expert_gate is not None:
                shared = torch.sigmoid(self.shared_expert_gate(x)) * shared
            out = out + shared
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(shape)


# ---- layers -----------------------------------------------------------------


class Sublayer(nn.Module):
    """One residual unit's branch with its norms: pre N_in, post N_out, both (sandwich)."""

    def __init__(self, spec: ModelSpec, inner: nn.Module, norm_in: nn.Module | None = None):
        super().__init__()
        placement, D = spec.norm.placement, spec.d_model
        if norm_in is None:
            norm_in = make_norm(spec.norm, D) if placement in ("pre", "both") else nn.Identity()
        self.norm_in = norm_in
        self.inner = inner
        self.norm_out = make_norm(spec.norm, D) if placement in ("post", "both") else nn.Identity()

    dropout = 0.0  # ReferenceModel sets it: Megatron's hidden dropout on the unit's output

    def forward(self, x, **kwargs):  # kwargs: an attention unit's positions and cache
        return dropout(self.norm_out(self.inner(self.norm_in(x), **kwargs)), self.dropout, self.training)


class SharedNorm(nn.Module):
    """One norm whose output two units read (a parallel residual with one norm, GPT-J): run once
    per layer.  The first call (attention) computes N(x) and leaves it for the second (the FFN)."""

    def __init__(self, norm: nn.Module):
        super().__init__()
        self.norm = norm
        self.memo: tuple[torch.Tensor, torch.Tensor] | None = None

    def forward(self, x):
        if self.memo is not None and self.memo[0] is x:
            out, self.memo = self.memo[1], None
            return out
        out = self.norm(x)
        self.memo = (x, out)
        return out


class DecoderLayer(nn.Module):
    """Attention unit and FFN unit of layer i; the residual scheme decides how they combine."""

    def __init__(self, spec: ModelSpec, layer: int):
        super().__init__()
        f = spec.ffn
        attn = LatentAttention(spec, layer) if spec.attention.kind == "mla" else MultiHeadAttention(spec, layer)
        mlp = MoE(spec) if spec.layer_ffn[layer] == "moe" else MLP(
            spec.d_model, spec.d_ff, f.activation, f.bias, make_norm(spec.norm, spec.d_ff) if f.sub_norm else None)
        shared = None  # parallel with one norm: both units read the same N(x) (GPT-J)
        if spec.residual.kind == "parallel" and spec.residual.parallel_norms == 1:
            shared = SharedNorm(make_norm(spec.norm, spec.d_model))
        self.attn = Sublayer(spec, attn, norm_in=shared)
        self.mlp = Sublayer(spec, mlp, norm_in=shared)


# ---- residual schemes: forward(x [B,T,D], units) -> [B,T,D] ------------------


class LayerResidual(nn.Module):
    """A scheme whose layers each map x [B,T,D] to x; recompute_layers checkpoints each layer
    (torch.utils.checkpoint: only its input is kept, the rest is rebuilt in backward)."""

    recompute_layers = False

    def forward(self, x, units):
        for i, (attn, mlp) in enumerate(zip(units[0::2], units[1::2])):
            if self.recompute_layers:
                x = checkpoint(self.layer, x, attn, mlp, i, use_reentrant=False)
            else:
                x = self.layer(x, attn, mlp, i)
        return x


class StandardResidual(LayerResidual):
    def layer(self, x, attn, mlp, i):
        x = x + attn(x)
        return x + mlp(x)


class ScaledResidual(LayerResidual):
    """Doge's: a learned D-vector on the skip path of each unit, w ⊙ x + F(x) (initialised to ones)."""

    def __init__(self, d_model: int, n_units: int):
        super().__init__()
        self.scales = nn.ParameterList(nn.Parameter(torch.ones(d_model)) for _ in range(n_units))

    def layer(self, x, attn, mlp, i):
        x = self.scales[2 * i] * x + attn(x)
        return self.scales[2 * i + 1] * x + mlp(x)


class ParallelResidual(LayerResidual):
    def layer(self, x, attn, mlp, i):
        return x + attn(x) + mlp(x)


class HyperConnection(nn.Module):
    """One hyper-connection module around one unit (arXiv:2409.19606, Eqs. 1-13); H: [B, T, n, D].

    Static: A_m (n), A_r (n×n), B (n).  Dynamic adds a per-stream RMSNorm (D),
    W_beta (D×1), W_m (D×1), W_r (D×n) and the scalars s_alpha, s_beta.
    """

    def __init__(self, d_model: int, n: int, unit_index: int, dynamic: bool):
        super().__init__()
        a_m = torch.zeros(n)
        a_m[unit_index % n] = 1.0  # Eq. 14: A_m = e_{k mod n}, A_r = I, B = 1 reproduce pre-norm
        self.A_m, self.A_r, self.B = nn.Parameter(a_m), nn.Parameter(torch.eye(n)), nn.Parameter(torch.ones(n))
        self.dynamic = dynamic
        if dynamic:  # W zero-initialised, scales 0.01 (Algorithm 2)
            self.norm = nn.RMSNorm(d_model, eps=1e-6)
            self.W_beta = nn.Parameter(torch.zeros(d_model, 1))
            self.W_m = nn.Parameter(torch.zeros(d_model, 1))
            self.W_r = nn.Parameter(torch.zeros(d_model, n))
            self.s_alpha = nn.Parameter(torch.tensor(0.01))
            self.s_beta = nn.Parameter(torch.tensor(0.01))

    def coefficients(self, H):
        if not self.dynamic:
            return self.B, self.A_m, self.A_r
        proj = self.norm(H) @ torch.cat([self.W_beta, self.W_m, self.W_r], 1)  # [B,T,n,n+2]: 2n(n+2)D per token
        b = self.s_beta * torch.tanh(proj[..., 0]) + self.B
        a_m = self.s_alpha * torch.tanh(proj[..., 1]) + self.A_m
        a_r = self.s_alpha * torch.tanh(proj[..., 2:]) + self.A_r  # row j: weights of input stream j
        return b, a_m, a_r

    def forward(self, H, unit):
        b, a_m, a_r = self.coefficients(H)
        n = H.shape[-2]
        h0 = contract(a_m, H)  # A_mᵀH, the unit's input: 2nD per token
        mixed = a_r.expand(*H.shape[:-2], n, n).transpose(-1, -2) @ H  # A_rᵀH: 2n²D per token
        return b.expand(H.shape[:-1])[..., None] * unit(h0)[..., None, :] + mixed  # Bᵀ·T(h0): outer product


def sinkhorn(logits: torch.Tensor, iters: int) -> torch.Tensor:
    """Sinkhorn-Knopp of exp(logits) over the last two dims: alternate column and row normalisation."""
    m = (logits - logits.amax((-2, -1), keepdim=True)).exp()  # the shift cancels in the normalisation
    for _ in range(iters):
        m = m / m.sum(-2, keepdim=True)
        m = m / m.sum(-1, keepdim=True)
    return m


class ManifoldHyperConnection(nn.Module):
    """One mHC module around one unit (arXiv:2512.24880 §4, Eqs. 7-9); H: [B, T, n, D].

    phi (nD × (n²+2n), the RMSNorm weight absorbed), bias b (n²+2n), alpha (3).
    """

    def __init__(self, d_model: int, n: int, sinkhorn_iters: int):
        super().__init__()
        self.n, self.iters = n, sinkhorn_iters
        self.phi = nn.Linear(n * d_model, n * n + 2 * n, bias=False)  # [phi_pre | phi_post | phi_res]
        self.bias = nn.Parameter(torch.zeros(n * n + 2 * n))  # [b_pre | b_post | b_res]
        self.alpha = nn.Parameter(torch.full((3,), 0.01))  # alpha_pre, alpha_post, alpha_res (Table 5)

    def forward(self, H, unit):
        n = self.n
        x = H.flatten(-2)  # x_vec [B, T, nD]
        logits = self.phi(F.rms_norm(x, (x.shape[-1],)))  # 2·nD·(n²+2n) per token
        pre, post, res = logits.split([n, n, n * n], -1)
        b_pre, b_post, b_res = self.bias.split([n, n, n * n])
        h_pre = torch.sigmoid(self.alpha[0] * pre + b_pre)
        h_post = 2 * torch.sigmoid(self.alpha[1] * post + b_post)
        h_res = sinkhorn((self.alpha[2] * res + b_res).unflatten(-1, (n, n)), self.iters)
        y = unit(contract(h_pre, H))  # H_pre·x: 2nD per token
        return h_res @ H + h_post[..., None] * y[..., None, :]  # H_res·x: 2n²D per token; H_postᵀ·F: outer


class StreamResidual(nn.Module):
    """HC / mHC: the embedding copied to n streams, one module per unit, streams summed at the end."""

    def __init__(self, connections: list[nn.Module], n: int):
        super().__init__()
        self.connections = nn.ModuleList(connections)
        self.n = n

    def forward(self, x, units):
        H = x.unsqueeze(-2).expand(*x.shape[:-1], self.n, x.shape[-1])
        for connection, unit in zip(self.connections, units):
            H = connection(H, unit)
        return H.sum(-2)


class DepthAttention(nn.Module):
    """softmax_i(w · RMSNorm(v_i)) weighted sum of sources v_i (arXiv:2603.15031 Eqs. 2-4); no temperature."""

    def __init__(self, d_model: int):
        super().__init__()
        self.key_norm = nn.RMSNorm(d_model, eps=1e-6)
        self.query = nn.Parameter(torch.zeros(d_model))  # zero: uniform weights at init (§5)

    def forward(self, sources: list[torch.Tensor]) -> torch.Tensor:
        values = torch.stack(sources, -2)  # [B, T, s, D]
        logits = (self.key_norm(values) @ self.query[:, None]).squeeze(-1)  # 2sD per token
        return contract(logits.softmax(-1), values)  # 2sD per token


class AttentionResiduals(nn.Module):
    """Block AttnRes (Full when blocks is None): units attend over block sums instead of adding."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        n_units = 2 * spec.n_layers
        self.units_per_block = n_units // (spec.residual.blocks or n_units)
        # one per unit, plus the output's own (it attends over all block representations)
        self.depth = nn.ModuleList(DepthAttention(spec.d_model) for _ in range(n_units + 1))

    def forward(self, x, units):
        S = self.units_per_block
        blocks, partial = [x], None  # b_0 is the embedding
        for u, unit in enumerate(units):
            first = u % S == 0  # unit 1 of its block: no partial sum yet (Eq. 6)
            out = unit(self.depth[u](blocks if first else [*blocks, partial]))
            partial = out if first else partial + out
            if u % S == S - 1:
                blocks.append(partial)
        return self.depth[-1](blocks)


def make_residual(spec: ModelSpec) -> nn.Module:
    r, D, U = spec.residual, spec.d_model, 2 * spec.n_layers
    if r.kind == "parallel":
        return ParallelResidual()
    if r.kind == "hyper":
        return StreamResidual([HyperConnection(D, r.streams, u, r.dynamic) for u in range(U)], r.streams)
    if r.kind == "mhc":
        return StreamResidual([ManifoldHyperConnection(D, r.streams, r.sinkhorn_iters) for _ in range(U)], r.streams)
    if r.kind == "attnres":
        return AttentionResiduals(spec)
    return ScaledResidual(D, U) if r.scales else StandardResidual()


# ---- the model --------------------------------------------------------------


class ReferenceModel(nn.Module):
    """Embeddings, L decoder layers under the spec's residual scheme, final norm, unembedding."""

    def __init__(self, spec: ModelSpec, attention: AttentionImpl = "explicit", dropout: float = 0.0):
        super().__init__()
        if spec.linear is not None or "none" in spec.layer_attention or spec.ffn.none_layers:
            # Linear mixers and single-sublayer blocks are pinned by transformers' own modules
            # (Qwen3-Next, LFM2, Jamba, Nemotron-H, MiniMax's lightning attention: tests/spec/test_hf_oracle.py).
            raise ValueError("the reference model has no linear-attention layer and no layer without a sublayer")
        if spec.residual.kind == "altup" or spec.residual.laurel_rank is not None:  # Gemma 3n: transformers' modules
            raise ValueError("the reference model has no AltUp streams or LAuReL branches (Gemma 3n)")
        if spec.loop is not None or spec.shared_block is not None:  # HRM-Text, Zamba2: pinned by transformers
            raise ValueError("the reference model has no layers run more than once with shared weights (a loop, "
                             "a shared block)")
        if spec.head_transform is not None or not spec.norm.first_layer:  # ModernBERT: transformers' modules pin it
            raise ValueError("the reference model has no prediction head before the unembedding and no layer 0 "
                             "without its norm (ModernBERT's decoder)")
        a = spec.attention
        if a.q_lora_concat or a.kind == "mla" and a.output_gate or spec.norm.gate_rank is not None:
            # A.X-K2: pinned by transformers' own modules (tests/spec/test_hf_oracle.py)
            raise ValueError("the reference model has no MLA output gate, concatenated query latent or gated norms "
                             "(A.X-K2)")
        if a.separate_gate or not spec.residual.mix or spec.residual.head:  # HY-V4: pinned by transformers
            raise ValueError("the reference model has no separate gate projection and no hyper-connections without "
                             "the stream mix or with a learned head (HY-V4)")
        if spec.attention.dynamic_mask is not None or spec.ffn.product_key is not None:  # Doge: pinned by transformers
            raise ValueError("the reference model has no dynamic mask attention and no product-key experts (Doge)")
        if spec.attention.experts is not None:  # JetMoE: pinned by transformers' own modules
            raise ValueError("the reference model has no attention experts (JetMoE)")
        if spec.attention.indexer is not None:  # DeepSeek-V3.2: pinned by transformers' own modules instead
            raise ValueError("the reference model has no DeepSeek Sparse Attention indexer")
        if (a.relative is not None or a.kv_conv is not None or spec.residual.output_conv is not None
                or spec.ffn.global_scale or (spec.ffn.moe is not None and spec.ffn.moe.router_shared)):
            # Inkling: pinned by transformers' own modules (tests/spec/test_hf_oracle.py)
            raise ValueError("the reference model has no relative logits, short convs, global scales or router-scored "
                             "shared experts (Inkling)")
        if (spec.norm.kind == "l2" or spec.residual.kind == "interpolate" or a.query_scale or a.gate_scale
                or spec.ffn.scales or spec.logit_scale):  # Dory's nGPT parts: pinned by transformers' own modules
            raise ValueError("the reference model has no L2 norms, interpolating residual or nGPT scales (Dory)")
        if (a.cca is not None or a.key_scale or spec.residual.affine
                or (spec.ffn.moe is not None and spec.ffn.moe.router_mlp is not None)):  # ZAYA1: transformers pins it
            raise ValueError("the reference model has no compressed convolutional attention, key scales, residual "
                             "scaling or router MLP (ZAYA1)")
        if a.compressed is not None:  # DeepSeek-V4: pinned by transformers' own modules (tests/spec/test_deepseek_v4.py)
            raise ValueError("the reference model has no compressed sparse attention (DeepSeek-V4)")
        if a.qk_norm == "clip" or a.sink_proj or spec.residual.attnres_form != "paper":
            # Inkling 2: pinned by transformers' own modules (tests/spec/test_inkling2.py)
            raise ValueError("the reference model has no clipped q/k heads, sinks from the input or Inkling 2's "
                             "attention residuals (Inkling 2)")
        if a.local_mla is not None or a.rope_key_norm:  # dots3-note: pinned by transformers (tests/spec/test_dots3_note.py)
            raise ValueError("the reference model has no MLA of two geometries and no rope-key norm (dots3-note)")
        if spec.drafter is not None:  # Gemma 4's assistant: pinned by transformers' own modules (test_hf_oracle.py)
            raise ValueError("the reference model has no drafter (a model that reads its target's cache)")
        if spec.attention.grouped or spec.attention.v_norm or spec.per_layer_input is not None:
            # Gemma 4: pinned by transformers' own modules (tests/spec/test_gemma4.py)
            raise ValueError("the reference model has no per-kind attention geometry, K/V sharing, v_norm or "
                             "per-layer embeddings (Gemma 4)")
        self.spec = spec
        self.dropout = dropout
        D, V, E = spec.d_model, spec.vocab_size, spec.embedding_width
        self.embed_tokens = nn.Embedding(V, E)
        # OPT-350m: the embedding and the unembedding are E wide, bias-free projections around the layers.
        self.project_in = nn.Linear(E, D, bias=False) if spec.embedding_dim is not None else nn.Identity()
        self.project_out = nn.Linear(D, E, bias=False) if spec.embedding_dim is not None else nn.Identity()
        if spec.position.kind == "learned":
            # GPT-2's wpe; OPT's table has `offset` more rows, position p reads row p + offset.
            self.embed_positions = nn.Embedding(spec.max_context + spec.position.offset, D)
        self.embed_norm = make_norm(spec.norm, D) if spec.norm.embedding else nn.Identity()  # BLOOM
        self.layers = nn.ModuleList(DecoderLayer(spec, i) for i in range(spec.n_layers))
        for layer in self.layers:
            layer.attn.inner.impl = attention
            layer.attn.inner.dropout = layer.attn.dropout = layer.mlp.dropout = dropout
        self.residual = make_residual(spec)
        self.final_norm = make_norm(spec.norm, D) if spec.norm.final else nn.Identity()
        self.lm_head = nn.Linear(E, spec.head_vocab, bias=spec.lm_head_bias)  # (Apertus 1.5's head: pruned)
        if spec.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def new_cache(self) -> KVCache:
        return KVCache(len(self.layers))

    def forward(
        self, tokens: torch.Tensor, cache: KVCache | None = None, logits: Literal["all", "last"] = "all"
    ) -> torch.Tensor:
        """Logits [B, T, V] of tokens [B, T]; [B, 1, V] (each sequence's last token) for logits="last".

        With a cache the tokens follow the cache.length already processed (positions, causal mask and
        windows offset accordingly) and the cache grows by them.
        """
        T = tokens.shape[1]
        start = 0 if cache is None else cache.length
        positions = torch.arange(start, start + T, device=tokens.device)
        x = self.project_in(self.embed_tokens(tokens))
        kind = self.spec.position.kind
        if kind == "learned":
            x = x + self.embed_positions(positions + self.spec.position.offset)
        elif kind == "sinusoidal":
            x = x + sinusoidal_table(positions, x.shape[-1], self.spec.position.theta).to(x)
        x = dropout(self.embed_norm(x), self.dropout, self.training)
        x = self.residual(x, self.units(positions, cache))
        if cache is not None:
            cache.length += T
        x = self.project_out(self.final_norm(x))  # every position, as transformers' decoders end
        if logits == "last":
            x = x[:, -1:]
        out = self.lm_head(x)
        cap = self.spec.final_softcap
        return out if cap is None else cap * torch.tanh(out / cap)

    def units(self, positions: torch.Tensor, cache: KVCache | None) -> list:
        """The 2L residual units in order, each attention unit bound to the positions and its layer's cache."""
        caches = cache.layers if cache is not None else [None] * len(self.layers)
        return [
            unit
            for layer, layer_cache in zip(self.layers, caches)
            for unit in (functools.partial(layer.attn, positions=positions, cache=layer_cache), layer.mlp)
        ]
