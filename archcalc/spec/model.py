"""ModelSpec: every architecture choice of a decoder-only Transformer, validated.

Derived values (head_dim, n_kv_heads, resolved d_ff, the attention and FFN kind
of every layer, the context limit) are resolved here, once; the rest of the
package never re-derives them.  No FLOP or byte arithmetic lives here.

Letters used in comments (scaling-book): D d_model, L n_layers, V vocab_size,
H query heads, K KV heads, F d_ff, E experts.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

GATED_ACTIVATIONS = ("reglu", "geglu", "swiglu")
# The nonlinearity inside each activation choice (a gated one applies it to the gate).
BASE_ACTIVATION = {"relu": "relu", "gelu": "gelu", "silu": "silu", "relu2": "relu2",
                   "reglu": "relu", "geglu": "gelu", "swiglu": "silu"}
Activation = Literal["relu", "gelu", "silu", "relu2", "reglu", "geglu", "swiglu"]
LayerKind = Literal["global", "local"]

# Default d_ff ratios when neither d_ff nor d_ff_ratio is given: 4·D for a plain
# MLP; 8/3·D for a gated one, which keeps 3·D·F equal to the plain 2·D·4D.
PLAIN_FF_RATIO = 4.0
GATED_FF_RATIO = 8.0 / 3.0


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AttentionSpec(_Frozen):
    """Self-attention.  kind "mha" covers MHA, GQA and MQA through n_kv_heads."""

    kind: Literal["mha", "mla"] = "mha"
    n_heads: PositiveInt
    n_kv_heads: PositiveInt | None = None  # default n_heads (MHA); 1 is MQA
    head_dim: PositiveInt | None = None  # default d_model // n_heads
    bias: list[Literal["q", "k", "v", "o"]] = Field(default_factory=list)  # projections with a bias
    qk_norm: Literal["none", "head", "full"] = "none"  # head: one norm of head_dim shared by all heads
    softcap: float | None = Field(default=None, gt=0)  # tanh soft-capping of the scores (Gemma 2)
    sinks: bool = False  # one learned sink logit per query head (gpt-oss): H parameters per layer
    sliding_window: PositiveInt | None = None
    # Which layers use the window: "L:G" repeats L local then G global layers
    # from layer 0 ("1:1" alternates, "5:1" is Gemma 3), or one entry per
    # layer.  Absent with a window set means every layer is local (Mistral).
    layer_types: str | list[LayerKind] | None = None
    global_rope: bool = True  # false: global layers use no position encoding (NoPE)
    # Multi-head latent attention (DeepSeek-V2/V3).  The cache holds
    # kv_lora_rank + qk_rope_head_dim values per token per layer.
    q_lora_rank: PositiveInt | None = None  # None: a direct D -> H·(nope+rope) query projection
    kv_lora_rank: PositiveInt | None = None
    qk_nope_head_dim: PositiveInt | None = None
    qk_rope_head_dim: PositiveInt | None = None
    v_head_dim: PositiveInt | None = None

    @model_validator(mode="after")
    def _check(self) -> AttentionSpec:
        kv = self.n_kv_heads or self.n_heads
        if self.n_heads % kv:
            raise ValueError(f"n_heads ({self.n_heads}) must be divisible by n_kv_heads ({kv})")
        mla_fields = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
        if self.kind == "mla":
            missing = [f for f in mla_fields if getattr(self, f) is None]
            if missing:
                raise ValueError(f"kind mla needs {', '.join(missing)}")
            if self.bias:
                raise ValueError("biases on MLA projections are not supported")
            if self.qk_norm != "none":
                raise ValueError("qk_norm does not apply to MLA (its latents have their own norms)")
            if self.n_kv_heads is not None or self.head_dim is not None:
                raise ValueError("kind mla takes qk_nope/qk_rope/v_head_dim, not n_kv_heads or head_dim")
        else:
            extra = [f for f in (*mla_fields, "q_lora_rank") if getattr(self, f) is not None]
            if extra:
                raise ValueError(f"{', '.join(extra)} only apply to kind mla")
        if isinstance(self.layer_types, str) and _parse_ratio(self.layer_types) is None:
            raise ValueError(f"layer_types {self.layer_types!r}: use 'L:G' (e.g. '5:1') or a list")
        return self


class MoESpec(_Frozen):
    """Mixture of experts replacing the dense FFN on some layers."""

    n_experts: PositiveInt
    top_k: PositiveInt
    d_expert: PositiveInt  # F of one routed expert
    d_shared: int = Field(default=0, ge=0)  # total F of the always-on shared expert(s)
    shared_gate: bool = False  # sigmoid gate D -> 1 on the shared expert (Qwen2-MoE)
    router_bias: bool = False
    first_dense_layers: int = Field(default=0, ge=0)  # leading layers keep the dense FFN
    every: PositiveInt = 1  # after those, layer i is MoE when (i + 1) % every == 0
    layers: list[int] | None = None  # explicit MoE layer indices; overrides the two above

    @model_validator(mode="after")
    def _check(self) -> MoESpec:
        if self.top_k > self.n_experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds n_experts ({self.n_experts})")
        if self.shared_gate and not self.d_shared:
            raise ValueError("shared_gate needs a shared expert (d_shared > 0)")
        return self


class FFNSpec(_Frozen):
    activation: Activation = "swiglu"
    d_ff: PositiveInt | None = None
    d_ff_ratio: float | None = Field(default=None, gt=0)  # F = ratio·D, rounded up to d_ff_multiple_of
    d_ff_multiple_of: PositiveInt = 1
    bias: bool = False  # every FFN projection (experts too) has a bias
    moe: MoESpec | None = None

    @model_validator(mode="after")
    def _check(self) -> FFNSpec:
        if self.d_ff is not None and self.d_ff_ratio is not None:
            raise ValueError("give d_ff or d_ff_ratio, not both")
        return self

    @property
    def gated(self) -> bool:
        return self.activation in GATED_ACTIVATIONS


class NormSpec(_Frozen):
    kind: Literal["rmsnorm", "layernorm", "none"] = "rmsnorm"
    bias: bool = False  # LayerNorm only: a bias vector beside the weight
    # pre: x + F(N(x)); post: a norm on each sublayer output (OLMo 2's
    # x + N(F(x)), or the original Transformer's N(x + F(x)): same cost);
    # both: sandwich, a norm before and after each sublayer (Gemma 2/3).
    placement: Literal["pre", "post", "both"] = "pre"
    final: bool = True  # a norm before the unembedding

    @model_validator(mode="after")
    def _check(self) -> NormSpec:
        if self.bias and self.kind != "layernorm":
            raise ValueError(f"bias only applies to layernorm, not {self.kind}")
        return self


class RopeScaling(_Frozen):
    """Context extension of RoPE; original_context × factor is the new limit
    (llama3 and longrope keep the limit the config states)."""

    type: Literal["linear", "ntk", "dynamic", "yarn", "llama3", "longrope"]
    factor: float = Field(gt=0)
    original_context: PositiveInt | None = None


class PositionSpec(_Frozen):
    kind: Literal["rope", "learned", "sinusoidal", "alibi", "none"] = "rope"
    theta: float = Field(default=10000.0, gt=0)
    local_theta: float | None = Field(default=None, gt=0)  # RoPE base of local layers (Gemma 3)
    rotary_fraction: float = Field(default=1.0, gt=0, le=1)  # partial rotary (NeoX 0.25)
    scaling: RopeScaling | None = None

    @model_validator(mode="after")
    def _check(self) -> PositionSpec:
        if self.kind != "rope" and (self.scaling or self.local_theta or self.rotary_fraction != 1.0):
            raise ValueError(f"scaling, local_theta and rotary_fraction only apply to rope, not {self.kind}")
        return self


class ResidualSpec(_Frozen):
    # standard: x + F(x) per sublayer; parallel: x + Attn(N(x)) + MLP(N(x));
    # hyper: hyper-connections (arXiv:2409.19606); mhc: manifold-constrained
    # HC (arXiv:2512.24880); attnres: attention residuals (arXiv:2603.15031).
    kind: Literal["standard", "parallel", "hyper", "mhc", "attnres"] = "standard"
    parallel_norms: Literal[1, 2] = 1  # parallel: one shared norm (GPT-J, Cohere) or two (NeoX, Falcon-40B)
    streams: PositiveInt = 4  # hyper / mhc: n residual streams
    dynamic: bool = True  # hyper: input-dependent coefficients (DHC) or static ones (SHC)
    sinkhorn_iters: PositiveInt = 20  # mhc
    blocks: PositiveInt | None = None  # attnres: N blocks; None = full (one block per sublayer)


class ModelSpec(_Frozen):
    name: str = "model"
    source: str | None = None  # where the numbers come from (a config.json URL)
    notes: str | None = None
    d_model: PositiveInt
    n_layers: PositiveInt
    vocab_size: PositiveInt
    # Longest context the model supports, context extension included.  May be
    # left out when position.scaling gives original_context: then it is
    # original_context × factor (llama3 and longrope need it stated).
    max_context: PositiveInt
    tie_embeddings: bool = False
    final_softcap: float | None = Field(default=None, gt=0)  # tanh soft-capping of the logits
    attention: AttentionSpec
    ffn: FFNSpec = Field(default_factory=FFNSpec)
    norm: NormSpec = Field(default_factory=NormSpec)
    position: PositionSpec = Field(default_factory=PositionSpec)
    residual: ResidualSpec = Field(default_factory=ResidualSpec)

    @model_validator(mode="before")
    @classmethod
    def _context_from_scaling(cls, data):
        if not isinstance(data, dict) or data.get("max_context") is not None:
            return data
        scaling = (data.get("position") or {}).get("scaling") if isinstance(data.get("position"), dict) else None
        if isinstance(scaling, dict) and scaling.get("original_context") and scaling.get("type") not in (
                "llama3", "longrope"):
            return {**data, "max_context": int(scaling["original_context"] * scaling.get("factor", 1))}
        return data

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        a = self.attention
        if a.kind == "mha" and a.head_dim is None and self.d_model % a.n_heads:
            raise ValueError(
                f"d_model ({self.d_model}) is not divisible by n_heads ({a.n_heads}); give attention.head_dim"
            )
        if a.layer_types is not None and a.sliding_window is None and "local" in self.layer_attention:
            raise ValueError("attention.layer_types has local layers but attention.sliding_window is not set")
        if isinstance(a.layer_types, list) and len(a.layer_types) != self.n_layers:
            raise ValueError(f"attention.layer_types lists {len(a.layer_types)} layers, n_layers is {self.n_layers}")
        if self.position.kind == "rope":
            rotary = self.rope_dim
            if rotary % 2 or rotary == 0:
                raise ValueError(f"position.rotary_fraction gives {rotary} rotary dims; it must be even and > 0")
        if self.d_ff < 1:
            raise ValueError(f"ffn.d_ff_ratio {self.ffn.d_ff_ratio} × d_model {self.d_model} rounds down to d_ff 0")
        moe = self.ffn.moe
        if moe and moe.layers and max(moe.layers) >= self.n_layers:
            raise ValueError(f"ffn.moe.layers names layer {max(moe.layers)} of {self.n_layers}")
        if "dense" in self.layer_ffn and self.ffn.d_ff is None and self.ffn.d_ff_ratio is None and moe:
            raise ValueError("the dense FFN layers of this MoE model need ffn.d_ff")
        r = self.residual
        if r.kind == "parallel" and self.norm.placement != "pre":
            raise ValueError("residual kind parallel needs norm.placement pre")
        if r.kind == "attnres" and r.blocks is not None and (2 * self.n_layers) % r.blocks:
            raise ValueError(f"residual.blocks ({r.blocks}) must divide the 2·n_layers = {2 * self.n_layers} sublayers")
        return self

    # ---- derived values, resolved once -------------------------------------

    @property
    def n_kv_heads(self) -> int:
        """K: heads stored in the KV cache (1 for MLA's shared latent)."""
        if self.attention.kind == "mla":
            return 1
        return self.attention.n_kv_heads or self.attention.n_heads

    @property
    def qk_head_dim(self) -> int:
        a = self.attention
        if a.kind == "mla":
            return a.qk_nope_head_dim + a.qk_rope_head_dim
        return a.head_dim or self.d_model // a.n_heads

    @property
    def v_head_dim(self) -> int:
        return self.attention.v_head_dim if self.attention.kind == "mla" else self.qk_head_dim

    @property
    def rope_dim(self) -> int:
        """Rotated dims per head."""
        if self.attention.kind == "mla":
            return self.attention.qk_rope_head_dim
        return int(self.qk_head_dim * self.position.rotary_fraction)

    @property
    def d_ff(self) -> int:
        f = self.ffn
        if f.d_ff is not None:
            return f.d_ff
        ratio = f.d_ff_ratio or (GATED_FF_RATIO if f.gated else PLAIN_FF_RATIO)
        # Llama's rule: int(ratio·D), then up to the next multiple (11008 for D=4096, 8/3, 256).
        return f.d_ff_multiple_of * math.ceil(int(ratio * self.d_model) / f.d_ff_multiple_of)

    @property
    def layer_attention(self) -> tuple[LayerKind, ...]:
        a = self.attention
        if isinstance(a.layer_types, list):
            return tuple(a.layer_types)
        if a.layer_types is None:
            return ("local" if a.sliding_window else "global",) * self.n_layers
        n_local, n_global = _parse_ratio(a.layer_types)
        period = ("local",) * n_local + ("global",) * n_global
        return tuple(period[i % len(period)] for i in range(self.n_layers))

    @property
    def layer_ffn(self) -> tuple[Literal["dense", "moe"], ...]:
        moe = self.ffn.moe
        if moe is None:
            return ("dense",) * self.n_layers
        if moe.layers is not None:
            chosen = set(moe.layers)
            return tuple("moe" if i in chosen else "dense" for i in range(self.n_layers))
        return tuple(
            "moe" if i >= moe.first_dense_layers and (i + 1) % moe.every == 0 else "dense"
            for i in range(self.n_layers)
        )


def _parse_ratio(text: str) -> tuple[int, int] | None:
    parts = text.split(":")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        return None
    n_local, n_global = (int(p) for p in parts)
    return (n_local, n_global) if n_local + n_global > 0 else None


def context_warnings(spec: ModelSpec, *contexts: int) -> list[str]:
    """The one warning every command gives for a context beyond the model's maximum
    (a warning, not an error: people do ask about longer contexts)."""
    longest = max(contexts)
    if longest <= spec.max_context:
        return []
    return [f"context {longest:,} exceeds {spec.name}'s max context {spec.max_context:,}"]
