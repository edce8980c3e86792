"""ModelSpec: every architecture choice of a decoder-only Transformer, validated.

Derived values (head_dim, n_kv_heads, resolved d_ff, the attention and FFN kind
of every layer, the context limit) are resolved here, once; the rest of the
package never re-derives them.  No FLOP or byte arithmetic lives here.

Letters used in comments (scaling-book): D d_model, L n_layers, V vocab_size,
H query heads, K KV heads, F d_ff, E experts.
"""

from __future__ import annotations

from typing import Annotated, Callable, ClassVar, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from archcalc.limits import MAX_CONTEXT
from archcalc.ops.arrays import ceil_div, floor_int, isqrt, lesser

GATED_ACTIVATIONS = ("reglu", "geglu", "swiglu", "relu2glu")
# The nonlinearity inside each activation choice (a gated one applies it to the gate).
BASE_ACTIVATION = {"relu": "relu", "gelu": "gelu", "silu": "silu", "relu2": "relu2", "xielu": "xielu",
                   "reglu": "relu", "geglu": "gelu", "swiglu": "silu", "relu2glu": "relu2"}
# xielu: Apertus' learned activation (Huang 2024, arXiv:2411.13010), two scalar parameters per MLP.
# relu2glu: relu(gate)² ⊙ up (BitNet b1.58's gated squared ReLU)
Activation = Literal["relu", "gelu", "silu", "relu2", "xielu", "reglu", "geglu", "swiglu", "relu2glu"]
LEARNED_ACTIVATION_PARAMS = {"xielu": 2}  # alpha_p and alpha_n, one each per MLP (beta and eps are buffers)
# global: full causal attention; local: a sliding window; chunked: attention within fixed chunks of
# chunk_size tokens (Llama 4's chunked local attention: the query at p sees p - p mod C ... p);
# linear: a linear-attention mixer with a fixed-size state instead of a KV cache (ModelSpec.linear);
# none: no mixer, the layer is its FFN alone (Nemotron-H's blocks are one sublayer each).
LayerKind = Literal["global", "local", "chunked", "linear", "none"]

# Default d_ff ratios when neither d_ff nor d_ff_ratio is given: 4·D for a plain
# MLP; 8/3·D for a gated one, which keeps 3·D·F equal to the plain 2·D·4D.
PLAIN_FF_RATIO = 4.0
GATED_FF_RATIO = 8.0 / 3.0


# Upper bounds far past every released model (d_model 18,432 in PaLM, 126 layers in Llama 3.1 405B,
# 256k vocabularies, 10M-token contexts in Llama 4 Scout, 384 experts in Kimi K2), there so that no
# input makes the arithmetic run away (2**70 layers) while any model anyone trains still fits.
# spec/hf/keys.py bounds config.json keys by the same numbers.
MAX_WIDTH, MAX_FFN, MAX_LAYERS, MAX_HEADS, MAX_EXPERTS, MAX_VOCAB = 2**20, 2**24, 2**14, 2**14, 2**16, 2**24
MAX_POSITIVE = 1e15
Width = Annotated[int, Field(ge=1, le=MAX_WIDTH)]  # d_model, head dims, latent ranks
FFNWidth = Annotated[int, Field(ge=1, le=MAX_FFN)]
Layers = Annotated[int, Field(ge=1, le=MAX_LAYERS)]
Heads = Annotated[int, Field(ge=1, le=MAX_HEADS)]
Tokens = Annotated[int, Field(ge=1, le=MAX_CONTEXT)]  # contexts, windows: the CLI's bound (limits.py)
Experts = Annotated[int, Field(ge=1, le=MAX_EXPERTS)]
Positive = Annotated[float, Field(gt=0, le=MAX_POSITIVE)]  # RoPE bases, soft caps, scaling factors
LayerIndex = Annotated[int, Field(ge=0, lt=MAX_LAYERS)]


class _Frozen(BaseModel):
    # strict: a string or a bool where a number belongs is an error, never coerced ("768", "false");
    # ints are accepted for floats.  No inf or nan anywhere.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)


class NumericRule(NamedTuple):
    """A rule between numeric fields.  `ok` takes the model and gives a bool, or a
    boolean array when its numbers are arrays (a sweep drops the candidates that
    break it, with this same rule); `message` says what is wrong, for one model;
    `what` names the rule in a few words."""

    ok: Callable
    message: Callable
    what: str


def _check_numeric(model, rules: tuple[NumericRule, ...]) -> None:
    for rule in rules:
        if not rule.ok(model):
            raise ValueError(rule.message(model))


def _divisible(field: str, by: str, what: str) -> NumericRule:
    """The rule `field` % `by` == 0 between two integer fields of one model."""
    return NumericRule(lambda m: getattr(m, field) % getattr(m, by) == 0,
                       lambda m: f"{field} ({getattr(m, field)}) must be divisible by {by} ({getattr(m, by)})", what)


class AttentionGroup(NamedTuple):
    """Softmax-attention layers of one shape (ModelSpec.attention_groups): how many of each kind,
    their KV heads, d_k and d_v, whether they reuse earlier layers' K/V, whether their V is their K
    projection.  suffix: what their op names add (".global", ".shared")."""

    suffix: str
    kinds: dict[str, int]
    n_heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    shared: bool
    k_eq_v: bool


class _Ruled(_Frozen):
    """A part of the spec whose only cross-field checks are its NUMERIC_RULES."""

    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = ()

    @model_validator(mode="after")
    def _check_rules(self):
        _check_numeric(self, self.NUMERIC_RULES)
        return self


class IndexerSpec(_Frozen):
    """DeepSeek Sparse Attention's lightning indexer (DeepSeek-V3.2; transformers' DeepseekV32Indexer,
    vLLM's Indexer in models/deepseek_v2.py): per layer, n_heads query heads of head_dim from the query latent
    (q_lora_rank -> n_heads·head_dim), one key of head_dim from the hidden state (D -> head_dim, then a
    LayerNorm with bias), and a per-head weight (D -> n_heads).  Each query scores every earlier key,
    Σ_h w_h · relu(q_h · k), and attends only to the topk best: the indexer keeps a key of head_dim per
    token per layer beside MLA's latent.

    kind "block" (MiniMax-M3's, on GQA attention): queries D -> n_heads·head_dim and one key D -> head_dim, each
    RMS-normed (a weight of head_dim) and rotated; each query scores every earlier key (q·k), the scores are
    max-pooled over blocks of block_size keys, and it keeps the topk best blocks and the local_blocks before
    its own; only `layers` run it (the others attend to everything)."""

    kind: Literal["dsa", "block"] = "dsa"
    n_heads: Heads
    head_dim: Width
    topk: Tokens  # dsa: keys; block: key blocks
    block_size: Tokens | None = None  # block: keys a block
    local_blocks: int = Field(default=0, ge=0, le=2**16)  # block: blocks always kept
    layers: list[LayerIndex] | None = None  # block: the layers with the indexer (absent: every layer)
    # Layers with no indexer of their own (GLM-5's indexer_types "shared", arXiv:2603.12201): each attends
    # to the top-k of the last earlier layer that has one, so it has no indexer weights, key cache or scoring.
    shared_layers: list[LayerIndex] | None = None

    @model_validator(mode="after")
    def _check(self) -> IndexerSpec:
        if self.shared_layers and 0 in self.shared_layers:
            raise ValueError("indexer.shared_layers: layer 0 has no earlier layer whose top-k it could reuse")
        if self.shared_layers and len(set(self.shared_layers)) != len(self.shared_layers):
            raise ValueError("indexer.shared_layers names a layer twice")
        if (self.kind == "block") != (self.block_size is not None) or self.kind == "dsa" and (
                self.local_blocks or self.layers is not None) or self.kind == "block" and self.shared_layers:
            raise ValueError("indexer kind block takes block_size (and local_blocks, layers); kind dsa takes "
                             "shared_layers instead")
        return self


class AttentionExpertsSpec(_Ruled):
    """A mixture of attention heads (JetMoE's MoA, after ModuleFormer): the query and output projections are
    n_experts routed experts, each D -> (n_heads / top_k)·head_dim and back; a router D -> n_experts picks
    top_k a token, whose queries are the heads of its top_k experts.  K and V are projected once, as usual,
    and each expert's query heads read them (the core is GQA of n_heads over n_kv_heads).  An "o" bias is one
    D-vector added after the experts' outputs are combined."""

    n_experts: Experts
    top_k: Experts

    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = (
        NumericRule(lambda e: e.top_k <= e.n_experts,
                    lambda e: f"top_k ({e.top_k}) exceeds n_experts ({e.n_experts})", "top_k at most n_experts"),
    )


class DynamicMaskSpec(_Frozen):
    """Doge's dynamic mask attention: each KV head scores every cached key from its value, dt = exp(A ⊙
    softplus(v W_dt)) (W_dt: K·d_v -> K over all KV heads, A one per head), and past `keep` keys a query attends
    only to the keep best.  transformers applies it as a mask: the scores are computed for every key (counted
    dense), and W_dt runs over every cached key at every step."""

    keep: Tokens  # keep_window_size
    bias: bool = False  # W_dt's bias (Doge's attention_bias)


class RelativeBiasSpec(_Frozen):
    """Inkling's relative logits: a bias on each score from the query's own hidden state.  Each layer projects the
    token to `rank` values a query head (r_proj, D -> H·rank) and mixes them through a learned bank of
    bias-vs-distance profiles (rank × extent, its own in every layer) into one bias for each backward distance
    below `extent`, zero beyond it; a sliding layer's extent is its window."""

    rank: Width  # d_rel
    extent: Tokens  # rel_extent, the global layers' (a sliding layer's is its window)
    # a learned H × rank scale on the projected states, then each head's clipped to an L2 norm (Inkling 2's
    # Inkling2ScaledL2Clip): H·rank parameters a layer
    scale: bool = False


class CCASpec(_Frozen):
    """Compressed convolutional attention's projections as ZAYA1 runs them (Figliolia et al. 2025,
    arXiv:2510.04476; transformers' ZayaCCAProjection): q (D -> H·d) and k (D -> K·d) side by side through a
    depthwise causal conv of `depthwise` taps and then a conv of `grouped` taps within each of the H + K heads
    (d -> d a tap), both with biases, plus a residual of their own: the query's (q + its KV head's k) / 2, the key's
    that mean over the group.  V is two halves of K·d / 2: one from the token, one from the token before (a
    state of K·d / 2 values a sequence); the convs' state is their last (depthwise − 1) + (grouped − 1) inputs."""

    depthwise: Annotated[int, Field(ge=1, le=64)]  # cca_time0
    grouped: Annotated[int, Field(ge=1, le=64)]  # cca_time1

    @property
    def state_inputs(self) -> int:
        """Inputs the two convs in a row need from before the token."""
        return self.depthwise - 1 + self.grouped - 1


# A compressed layer's compressor (DeepSeek-V4's compress_ratios 0 / 4 / 128): none beside the window, CSA
# (overlapping windows of csa_rate tokens, an indexer picking the top-k entries) or HCA (every hca_rate tokens)
CompressorKind = Literal["none", "csa", "hca"]


class CompressedSpec(_Ruled):
    """DeepSeek-V4's attention (transformers' DeepseekV4Attention, arXiv DeepSeek-V4 §2.3), which goes with kind
    mha, ONE KV head and q_lora_rank: queries D -> q_lora_rank (RMS-normed, a weight) -> H·d, each head RMS-normed
    without a weight; one head of d that is both key and value (D -> d, RMS-normed with a weight), so a token costs
    d values, not 2d; partial RoPE on the trailing rotated dims, and its inverse on the output; a sliding window over
    those keys in every layer; the grouped output projection (AttentionSpec.o_groups, o_lora_rank).

    On top of the window, each layer's compressor (`layers`) keeps one entry of d values every `rate` tokens: per
    token the hidden state gives a value and a gate (D -> c·d each, c = 2 for CSA's two overlapping series, 1 for
    HCA) plus a learned position bias (rate × c·d, fp32); an entry is the softmax(gate)-weighted sum over its window,
    RMS-normed (a weight of d) and rotated.  A CSA layer's lightning indexer compresses the same windows at
    index_head_dim (its own value and gate projections, position bias and norm), projects index_heads queries from
    the query latent (q_lora_rank -> index_heads·index_head_dim) and their weights from the hidden state
    (D -> index_heads), scores Σ_h w_h·relu(q_h·k) against every entry the query may see and keeps the index_topk
    best, which the core attends to beside the window.  An HCA layer attends to every entry it may see.

    Cache per sequence and layer: the window's keys (d each), the entries (d each; a CSA layer's indexer keeps
    index_head_dim more per entry), and, as a fixed state, the tokens a compressor has not yet folded into an
    entry (value and gate, up to rate − 1 of them) and CSA's last window's first series (value and gate), which the
    next entry overlaps."""

    layers: list[CompressorKind]  # each layer's compressor
    csa_rate: Tokens = 4  # m: tokens per CSA entry
    hca_rate: Tokens = 128  # m': tokens per HCA entry
    index_heads: Heads
    index_head_dim: Width
    index_topk: Tokens

    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = (
        NumericRule(lambda c: c.csa_rate < c.hca_rate,
                    lambda c: f"csa_rate ({c.csa_rate}) must be below hca_rate ({c.hca_rate})", "csa_rate < hca_rate"),
    )

    def count(self, kind: CompressorKind) -> int:
        return self.layers.count(kind)


class LocalMLASpec(_Frozen):
    """The sliding layers' MLA geometry where it differs from the global layers' (dots3-note: 64 heads over a
    latent of 1024 with nope heads of 192 on its sliding layers, 128 heads over 512 and 128 on its indexed ones).
    A field left out is the global layers' value.  The sliding layers have no indexer."""

    n_heads: Heads | None = None
    q_lora_rank: Width | None = None
    kv_lora_rank: Width | None = None
    qk_nope_head_dim: Width | None = None
    qk_rope_head_dim: Width | None = None
    v_head_dim: Width | None = None


class MLAGeometry(NamedTuple):
    """One kind of MLA layer's widths (AttentionSpec.mla_geometry)."""

    n_heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


class AttentionSpec(_Frozen):
    """Self-attention.  kind "mha" covers MHA, GQA and MQA through n_kv_heads."""

    kind: Literal["mha", "mla"] = "mha"
    n_heads: Heads
    n_kv_heads: Heads | None = None  # default n_heads (MHA); 1 is MQA
    head_dim: Width | None = None  # default d_model // n_heads
    bias: list[Literal["q", "k", "v", "o"]] = Field(default_factory=list)  # projections with a bias
    # head: one norm of head_dim shared by all heads; full: over all H·d (K·d) values;
    # l2: a weightless RMS normalisation of each head, on the layers that use RoPE (Llama 4);
    # clip: each query and key head scaled down to a maximum L2 norm, no weight, on every layer (Inkling 2; its
    # queries' learned scale is query_scale).
    qk_norm: Literal["none", "head", "full", "l2", "clip"] = "none"
    softcap: Positive | None = None  # tanh soft-capping of the scores (Gemma 2)
    sinks: bool = False  # one learned sink logit per query head (gpt-oss): H parameters per layer
    # each head's sink logit from the layer's input, a D -> H projection without a bias (Inkling 2's sink_proj):
    # D·H parameters a layer, 2·D·H FLOPs a token
    sink_proj: bool = False
    global_sinks: bool = True  # false: only the sliding layers have sinks (MiMo-V2-Flash)
    sliding_window: Tokens | None = None
    chunk_size: Tokens | None = None  # the chunk of chunked layers (Llama 4: 8,192)
    # Which layers use the window: "L:G" repeats L local then G global layers
    # from layer 0 ("1:1" alternates, "5:1" is Gemma 3), or one entry per
    # layer (which may also name chunked layers).  Absent with a window set means
    # every layer is local (Mistral); with a chunk_size, every layer is chunked.
    layer_types: str | list[LayerKind] | None = None
    output_gate: bool = False  # q_proj also gives a per-head gate, sigmoid(g) ⊙ output (Qwen3-Next): 2·H·d wide
    # the output gate plus one bias per head, broadcast over head_dim: sigmoid(g + b_h) (Beam's gate_bias, H
    # parameters a layer; its gate_proj, D -> H·d without a bias, has output_gate's shape and FLOPs)
    gate_bias: bool = False
    # with output_gate: the gate from its own bias-free projection D -> H·d_v, not from q's (HY-V4's gate_proj)
    separate_gate: bool = False
    # with output_gate: a learned H·d_v vector inside the gate, sigmoid(g ⊙ s²) (Dory's s_gate): H·d_v parameters
    gate_scale: bool = False
    # a learned H·d_k vector scaling the queries: squared, after RoPE (nGPT's s_qk, arXiv:2410.01131; Dory's sqk),
    # or as it is, before qk_norm clip (Inkling 2's query scale): H·d_k parameters a layer
    query_scale: bool = False
    global_rope: bool = True  # false: global layers use no position encoding (NoPE)
    # Layers that skip RoPE whatever their kind (SmolLM3 and Llama 4: every 4th layer), beside
    # global_rope; a NoPE layer has no rotation to compute and nothing else changes.
    nope_layers: list[LayerIndex] | None = None
    # Multi-head latent attention (DeepSeek-V2/V3).  The cache holds
    # kv_lora_rank + qk_rope_head_dim values per token per layer.
    q_lora_rank: Width | None = None  # None: a direct D -> H·(nope+rope) query projection (mha: with compressed)
    kv_lora_rank: Width | None = None
    qk_nope_head_dim: Width | None = None
    qk_rope_head_dim: Width | None = None
    v_head_dim: Width | None = None  # MLA's value heads; with mha, d_v where it is not head_dim (MiMo-V2-Flash)
    indexer: IndexerSpec | None = None  # DeepSeek Sparse Attention (MLA with a query latent only)
    # Global layers with their own geometry (Gemma 4: head_dim 512 on full-attention layers, 256 on
    # sliding ones): d_k = d_v and KV heads there, where they differ from head_dim / n_kv_heads.
    global_head_dim: Width | None = None
    global_kv_heads: Heads | None = None
    global_k_eq_v: bool = False  # global layers' values come from their key projection: no v_proj (Gemma 4)
    v_norm: bool = False  # a weightless RMSNorm over each value head, beside qk_norm "head" (Gemma 4)
    sub_norm: bool = False  # a norm over the heads' output (H·d_v) before o_proj (BitNet's attn_sub_norm)
    # a separate D -> H projection whose activation scales each head's output: softplus (Laguna's per-head
    # g_proj) or sigmoid (LFM3's)
    head_gate: Literal["softplus", "sigmoid"] | None = None
    # layers whose o_proj output gets a bias of D though "o" is not in bias (GPT-NeoX-Japanese: the last layer's)
    o_bias_layers: list[LayerIndex] | None = None
    # sliding layers' query heads where they differ from n_heads (Laguna: 64 beside the global layers' 48)
    local_heads: Heads | None = None
    # Differential attention (DiffLlama, arXiv:2410.05258): (softmax(QKᵀ) V₁ − λ softmax(QKᵀ) V₂), the core run
    # once per half of the value heads; 4 learned λ vectors of head_dim and a weightless RMSNorm over each pair
    # of heads' 2·d outputs per layer.  Needs an even n_kv_heads.
    differential: bool = False
    # The last kv_shared_layers layers compute no K or V: each reuses those of the last earlier layer of
    # its kind (Gemma 3n / 4), so it has no k/v projection, k/v norms or cache of its own.
    kv_shared_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)
    # MLA: q_b reads the query latent normed and as projected, side by side (2·q_lora_rank wide: A.X-K2's
    # q_gate_proj over [q_a_layernorm(q_a), q_a])
    q_lora_concat: bool = False
    experts: AttentionExpertsSpec | None = None  # query and output projections as routed experts (JetMoE)
    dynamic_mask: DynamicMaskSpec | None = None  # Doge's keys kept by a learned score of their values
    relative: RelativeBiasSpec | None = None  # Inkling's relative logits from each query's hidden state
    # a depthwise causal conv of this kernel on the projected K and on V, each with its own skip, y = x + conv(x),
    # weights kept in fp32 (Inkling's k_sconv, v_sconv): K·(d_k + d_v)·kernel parameters a layer, and a state per
    # sequence of its last kernel − 1 inputs (the KV cache keeps the convolved K and V)
    kv_conv: Annotated[int, Field(ge=2, le=64)] | None = None
    # the global layers' kv_conv taps are the static ones plus per-token ones projected from the projection's
    # input, one set a KV head (Inkling 2's Inkling2DynamicShortConvolution): a D -> K·kernel weight_proj for K
    # and one for V, 2·D·K·kernel parameters a global layer; the static taps and the state are kv_conv's
    dynamic_kv_conv: bool = False
    cca: CCASpec | None = None  # ZAYA1's compressed convolutional attention projections
    # a learned scalar for each KV head multiplying its keys after qk_norm (ZAYA1's temp): K parameters a layer
    key_scale: bool = False
    compressed: CompressedSpec | None = None  # DeepSeek-V4's compressed sparse / heavily compressed attention
    # The grouped output projection (DeepSeek-V4): the H·d_v output in o_groups groups of heads, each projected to
    # o_lora_rank (a block-diagonal H·d_v -> o_groups·o_lora_rank), then o_groups·o_lora_rank -> D
    o_groups: Heads | None = None
    o_lora_rank: Width | None = None
    local_mla: LocalMLASpec | None = None  # MLA on the sliding layers with widths of their own (dots3-note)
    # an RMSNorm (weight of qk_rope_head_dim) over MLA's shared rope key before RoPE (dots3-note's
    # k_rope_only_layernorm): qk_rope_head_dim parameters a layer
    rope_key_norm: bool = False

    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = (
        # (no layer pairs n_heads with n_kv_heads where the sliding layers have heads of their own and the global
        # layers KV heads of theirs: Inkling's; the two rules below check each kind)
        NumericRule(lambda a: a.n_kv_heads is None or (a.local_heads is not None and a.global_kv_heads is not None)
                    or a.n_heads % a.n_kv_heads == 0,
                    lambda a: f"n_heads ({a.n_heads}) must be divisible by n_kv_heads ({a.n_kv_heads})",
                    "n_heads divisible by n_kv_heads"),
        NumericRule(lambda a: a.local_heads is None or a.n_kv_heads is None or a.local_heads % a.n_kv_heads == 0,
                    lambda a: f"local_heads ({a.local_heads}) must be divisible by n_kv_heads ({a.n_kv_heads})",
                    "local_heads divisible by n_kv_heads"),
        NumericRule(lambda a: a.experts is None or a.n_heads % a.experts.top_k == 0,
                    lambda a: f"n_heads ({a.n_heads}) must be divisible by experts.top_k ({a.experts.top_k}): "
                              "each routed expert holds n_heads / top_k query heads", "n_heads divisible by top_k"),
        NumericRule(lambda a: a.compressed is None or a.n_kv_heads == 1,
                    lambda a: f"attention.compressed (DeepSeek-V4) has one K=V head: n_kv_heads must be 1, not "
                              f"{a.n_kv_heads}", "one KV head with compressed"),
        NumericRule(lambda a: a.o_groups is None or a.n_heads % a.o_groups == 0,
                    lambda a: f"n_heads ({a.n_heads}) must be divisible by o_groups ({a.o_groups})",
                    "n_heads divisible by o_groups"),
        NumericRule(lambda a: a.global_kv_heads is None or a.n_heads % a.global_kv_heads == 0,
                    lambda a: f"n_heads ({a.n_heads}) must be divisible by global_kv_heads ({a.global_kv_heads})",
                    "n_heads divisible by global_kv_heads"),
    )

    def mla_geometry(self, local: bool = False) -> MLAGeometry:
        """The MLA widths of the global layers, or with `local` of the sliding ones (local_mla's overrides)."""
        over = self.local_mla if local and self.local_mla is not None else LocalMLASpec()
        return MLAGeometry(*(getattr(over, f) if getattr(over, f) is not None else getattr(self, f)
                             for f in MLAGeometry._fields))

    @property
    def grouped(self) -> bool:
        """Layers differ in their attention's shape (global geometry, shared K/V): ops per group."""
        return (self.global_head_dim is not None or self.global_kv_heads is not None or self.global_k_eq_v
                or self.kv_shared_layers > 0 or self.local_heads is not None)

    @model_validator(mode="after")
    def _check(self) -> AttentionSpec:
        _check_numeric(self, self.NUMERIC_RULES)
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
            latent = () if self.compressed is not None else ("q_lora_rank",)  # DeepSeek-V4's query latent: mha
            extra = [f for f in (*mla_fields, *latent) if getattr(self, f) is not None and f != "v_head_dim"]
            if extra:
                raise ValueError(f"{', '.join(extra)} only apply to kind mla")
        if self.indexer is not None and self.indexer.kind == "block" and (self.kind != "mha" or self.grouped):
            raise ValueError("a block indexer (MiniMax-M3) goes with kind mha, layers of one shape")
        if self.indexer is not None and self.indexer.kind == "dsa" and (self.kind != "mla" or self.q_lora_rank is None):
            raise ValueError("indexer (DeepSeek Sparse Attention) needs kind mla with q_lora_rank: its queries "
                             "come from the query latent")
        if self.indexer is not None and (self.chunk_size is not None or self.sliding_window is not None
                                         and not (self.indexer.kind == "dsa" and isinstance(self.layer_types, list))):
            raise ValueError("indexer with chunks, or with a sliding window on every layer, is not supported (a dsa "
                             "indexer beside sliding layers, listed in layer_types, runs on the global layers)")
        if self.indexer is not None and self.sliding_window is not None and self.indexer.shared_layers:
            raise ValueError("indexer.shared_layers beside sliding layers is not supported")
        if self.local_mla is not None and (self.kind != "mla" or self.sliding_window is None
                                           or self.chunk_size is not None or self.output_gate
                                           or self.q_lora_concat or self.sinks or self.o_bias_layers):
            raise ValueError("local_mla (the sliding layers' MLA widths) goes with kind mla, a sliding_window, no "
                             "chunks, and no output gate, q_lora_concat, sinks or o_bias_layers")
        if self.rope_key_norm and self.kind != "mla":
            raise ValueError("rope_key_norm normalises MLA's shared rope key: it needs kind mla")
        if self.sliding_window is not None and self.chunk_size is not None and self.layer_types is None:
            raise ValueError("sliding_window and chunk_size both set: give layer_types to say which layers use which")
        if isinstance(self.layer_types, str) and _parse_ratio(self.layer_types) is None:
            raise ValueError(f"layer_types {self.layer_types!r}: use 'L:G' (e.g. '5:1') or a list")
        if self.grouped and (self.kind == "mla" or self.output_gate or self.qk_norm in ("full", "l2")
                             or self.nope_layers or not self.global_rope):
            raise ValueError("global_head_dim, global_kv_heads, global_k_eq_v and kv_shared_layers go with kind "
                             "mha, qk_norm none or head, no output_gate and RoPE on every layer (Gemma 4)")
        if not self.global_sinks and not (self.sinks and self.sliding_window is not None):
            raise ValueError("global_sinks false says only the sliding layers have sinks: it needs sinks and a "
                             "sliding_window")
        if self.differential and (self.kind != "mha" or self.grouped or self.output_gate or self.sub_norm
                                  or self.n_heads % 2 or (self.n_kv_heads or self.n_heads) % 2):
            raise ValueError("differential attention goes with kind mha, layers of one shape, no output gate or "
                             "sub_norm, and even n_heads and n_kv_heads (DiffLlama)")
        if self.o_bias_layers and ("o" in self.bias or self.grouped):
            raise ValueError("o_bias_layers lists the layers with an o bias: not with \"o\" in bias (every layer), "
                             "and with layers of one shape")
        if self.separate_gate and not self.output_gate:
            raise ValueError("separate_gate says where the output gate comes from: it needs output_gate")
        if self.cca is not None and (self.kind != "mha" or self.grouped or self.experts is not None or self.differential
                                     or self.v_head_dim is not None or self.kv_conv is not None
                                     or self.relative is not None or self.dynamic_mask is not None
                                     or self.output_gate):
            raise ValueError("attention.cca (ZAYA1) goes with kind mha, layers of one shape, d_v = d_k, and no "
                             "experts, differential attention, kv_conv, relative logits, dynamic mask or output gate")
        if self.key_scale and (self.kind != "mha" or self.grouped or self.qk_norm == "none"):
            raise ValueError("key_scale scales the normed keys: it needs kind mha, layers of one shape and a qk_norm")
        if self.gate_scale and (not self.output_gate or self.gate_bias):
            raise ValueError("gate_scale is a scale inside the output gate: it needs output_gate, and no gate_bias")
        if self.query_scale and (self.kind != "mha" or self.grouped or self.experts is not None):
            raise ValueError("query_scale goes with kind mha, layers of one shape and no attention experts")
        if self.gate_bias and not self.output_gate:
            raise ValueError("gate_bias is a bias on the output gate: it needs output_gate")
        if self.head_gate is not None and self.output_gate:
            raise ValueError("head_gate and output_gate are two gates on the same output: give one")
        if self.local_heads is not None and (self.sliding_window is None or self.chunk_size is not None):
            raise ValueError("local_heads needs sliding layers (a sliding_window) and no chunked ones")
        if self.sub_norm and (self.kind != "mha" or self.grouped):
            raise ValueError("sub_norm goes with kind mha and layers of one shape (BitNet)")
        if self.v_norm and self.qk_norm not in ("head", "clip"):
            raise ValueError("v_norm goes with qk_norm head (Gemma 4 normalises q, k and v per head) or clip "
                             "(Inkling 2)")
        if self.qk_norm == "clip" and (self.kind != "mha" or self.grouped or self.experts is not None):
            raise ValueError("qk_norm clip goes with kind mha, layers of one shape and no attention experts")
        if self.sink_proj and (self.sinks or self.kind != "mha" or self.grouped or self.experts is not None
                               or self.compressed is not None):
            raise ValueError("sink_proj (sinks from the input) goes with kind mha, layers of one shape, no learned "
                             "sinks and no attention experts")
        if self.dynamic_kv_conv and self.kv_conv is None:
            raise ValueError("dynamic_kv_conv adds per-token taps to kv_conv: it needs kv_conv")
        if self.relative is not None and self.relative.scale and self.grouped:
            raise ValueError("relative.scale goes with layers of one shape")
        if self.experts is not None and (self.kind != "mha" or self.grouped or set(self.bias) - {"o"}
                                         or self.qk_norm != "none" or self.output_gate or self.head_gate
                                         or self.sub_norm or self.differential or self.o_bias_layers
                                         or self.indexer is not None):
            raise ValueError("attention.experts (JetMoE's mixture of attention heads) goes with kind mha, layers of "
                             "one shape, no qk_norm, gates, sub_norm or indexer, and at most an \"o\" bias")
        if self.q_lora_concat and (self.kind != "mla" or self.q_lora_rank is None):
            raise ValueError("q_lora_concat goes with kind mla and a q_lora_rank (A.X-K2)")
        if self.dynamic_mask is not None and (self.kind != "mha" or self.grouped or self.experts is not None
                                              or self.sliding_window is not None or self.chunk_size is not None):
            raise ValueError("attention.dynamic_mask (Doge) goes with kind mha, layers of one shape, no experts and "
                             "no sliding window or chunks")
        if (self.relative is not None or self.kv_conv is not None) and (
                self.kind != "mha" or self.kv_shared_layers or self.global_k_eq_v or self.experts is not None
                or self.differential or self.dynamic_mask is not None or self.chunk_size is not None):
            raise ValueError("attention.relative and kv_conv (Inkling) go with kind mha, layers computing their own "
                             "K and V, no experts, differential attention, dynamic mask or chunks")
        if (self.o_groups is None) != (self.o_lora_rank is None) or (self.o_groups is not None) != (
                self.compressed is not None):
            raise ValueError("o_groups and o_lora_rank (the grouped output projection) go together, with compressed")
        if self.compressed is not None and (
                self.kind != "mha" or self.q_lora_rank is None or self.sliding_window is None
                or self.layer_types is not None or self.grouped or self.bias or self.qk_norm != "none"
                or self.v_head_dim is not None or self.output_gate or self.head_gate is not None or self.sub_norm
                or self.differential or self.experts is not None or self.cca is not None or self.kv_conv is not None
                or self.relative is not None or self.dynamic_mask is not None or self.indexer is not None
                or self.query_scale or self.key_scale or self.softcap is not None or self.nope_layers
                or self.o_bias_layers):
            raise ValueError("attention.compressed (DeepSeek-V4) goes with kind mha, a q_lora_rank, a "
                             "sliding_window on every layer (no layer_types), and none of the other attention options "
                             "but sinks")
        if self.kv_shared_layers and not isinstance(self.layer_types, list):
            raise ValueError("kv_shared_layers needs layer_types as a list: which earlier layer each shared "
                             "layer reads depends on its kind")
        return self


# The dtype a model's config asks serving engines to keep the recurrent state in (Qwen3.5's
# mamba_ssm_dtype, Nemotron-H's mamba_ssm_cache_dtype; vLLM honours it); None: each engine's own rule.
# The op list's state stays fp32, as transformers keeps it.
StateDtype = Literal["fp32", "bf16", "fp16"] | None


class GatedDeltaNetSpec(_Ruled):
    """A `linear` layers' mixer: Gated DeltaNet (Yang et al. 2024, arXiv:2412.06464), as
    Qwen3-Next runs it.  Per layer: one D -> 2·Kd + 2·Vd + 2·Hv projection (q, k, v, the output
    gate z, and the per-head β and α), a depthwise causal conv of conv_kernel taps over q, k and v,
    per-head dt_bias and A_log, a gated RMSNorm of value_head_dim, and Vd -> D.  Its state per
    sequence: Hv × d_k × d_v values (fp32) and the conv's last conv_kernel − 1 inputs."""

    kind: Literal["gated_deltanet"] = "gated_deltanet"
    n_heads: Heads  # value heads Hv
    n_key_heads: Heads  # query/key heads, each serving n_heads / n_key_heads value heads
    key_head_dim: Width
    value_head_dim: Width
    conv_kernel: int = Field(default=4, ge=1, le=64)
    chunk: Tokens = 64  # the chunk of the chunked form (transformers and flash-linear-attention: 64)
    # The input projection as tensors: fused, in_proj_qkvz and in_proj_ba (Qwen3-Next); or four,
    # in_proj_qkv, in_proj_z, in_proj_b and in_proj_a (Qwen3.5).  The same parameters; the tensors
    # matter to what goes tensor by tensor (Muon's matrices, FSDP's padding).
    fused_projections: bool = True
    # ... or six, q_proj, k_proj, v_proj, g_proj (z), b_proj and a_proj (OLMo Hybrid), with fused_projections false
    separate_qkv: bool = False
    state_dtype: StateDtype = None

    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = (
        _divisible("n_heads", "n_key_heads", "linear n_heads divisible by n_key_heads"),
        NumericRule(lambda g: not (g.separate_qkv and g.fused_projections),
                    lambda g: "separate_qkv needs fused_projections false", "separate_qkv with unfused projections"))

    @property
    def key_width(self) -> int:
        return self.n_key_heads * self.key_head_dim

    @property
    def value_width(self) -> int:
        return self.n_heads * self.value_head_dim

    @property
    def conv_channels(self) -> int:
        """q, k and v go through the conv: 2·Kd + Vd channels."""
        return 2 * self.key_width + self.value_width


class ShortConvSpec(_Frozen):
    """A `linear` layers' mixer: LFM2's gated short convolution.  Per layer: D -> 3D (B, C, x),
    B ⊙ x through a depthwise causal conv of conv_kernel taps, C ⊙ that, D -> D.  Its state per
    sequence: the conv's last conv_kernel − 1 inputs (D each)."""

    kind: Literal["short_conv"]
    conv_kernel: int = Field(default=3, ge=1, le=64)  # LFM2's conv_L_cache
    bias: bool = False  # on the projections and the conv


class MambaSpec(_Frozen):
    """A `linear` layers' mixer: Mamba's selective state space (Gu & Dao 2023, arXiv:2312.00752), as
    Jamba runs it.  Per layer, with E = expand · D inner channels and N = d_state: D -> 2E (x and the
    gate z), a depthwise causal conv of d_conv taps on x, E -> dt_rank + 2N (Δ, B, C), dt_rank -> E
    (with a bias), A_log [E, N] and D [E], E -> D.  Jamba adds RMSNorms on Δ, B and C.  Its state per
    sequence: E × N values (fp32) and the conv's last d_conv − 1 inputs (E each)."""

    kind: Literal["mamba"]
    d_state: Width = 16  # N
    d_conv: int = Field(default=4, ge=1, le=64)
    expand: int = Field(default=2, ge=1, le=64)
    dt_rank: Width  # Mamba's "auto" is ceil(D / 16): give it
    conv_bias: bool = True
    proj_bias: bool = False  # on in_proj and out_proj
    bc_norms: bool = False  # Jamba's dt_layernorm, b_layernorm, c_layernorm
    bc_norm_weight: bool = True  # false: those norms have no weight (Falcon-Mamba)
    # Zamba's mixer: E split into n_heads heads, each with its own x_proj (E/H -> dt_rank + 2N), dt_proj, A_log and
    # D: the same parameters and FLOPs as one head, in 3-D tensors [H, ...]
    n_heads: Heads = 1


class Mamba2Spec(_Ruled):
    """A `linear` layers' mixer: Mamba-2's state-space duality (Dao & Gu 2024, arXiv:2405.21060), as
    Nemotron-H runs it.  Per layer, with I = n_heads · head_dim inner channels and G groups of B and C
    of d_state each: D -> 2I + 2·G·N + H (the gate z; x, B, C; Δ per head), a depthwise causal conv of
    conv_kernel taps over x, B, C (I + 2GN channels), dt_bias, A_log and D per head, a gated RMSNorm
    of I and I -> D.  Its state per sequence: H × head_dim × N values (fp32) and the conv's last
    conv_kernel − 1 inputs."""

    kind: Literal["mamba2"]
    n_heads: Heads
    head_dim: Width
    d_state: Width
    n_groups: Heads = 1
    conv_kernel: int = Field(default=4, ge=1, le=64)
    chunk: Tokens = 256  # the chunk of the SSD's chunked form (config chunk_size)
    conv_bias: bool = True
    proj_bias: bool = False  # in_proj's bias (and out_proj's unless out_bias says otherwise)
    out_bias: bool | None = None  # out_proj's bias when it differs from in_proj's (Falcon-H1's projectors_bias)
    # false: no gated RMSNorm, the output is y ⊙ silu(z) (Falcon-H1 with mamba_rms_norm false)
    norm: bool = True
    # true: the mixer runs beside attention in every layer, on the same normed input, the two outputs
    # summed (Falcon-H1); false: it is the mixer of the `linear` layers of layer_types
    parallel: bool = False
    state_dtype: StateDtype = None

    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = (
        _divisible("n_heads", "n_groups", "mamba2 n_heads divisible by n_groups"),)

    @property
    def inner(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def conv_channels(self) -> int:
        """x, B and C go through the conv: I + 2·G·N channels."""
        return self.inner + 2 * self.n_groups * self.d_state


class LightningSpec(_Frozen):
    """A `linear` layers' mixer: MiniMax-01's lightning attention (arXiv:2501.08313), as transformers'
    MiniMaxLightningAttention runs it.  Per layer, with I = n_heads · head_dim: one D -> 3I projection
    (q, k and v through a SiLU), an output gate D -> I (a sigmoid), an RMSNorm of I, I -> D.  No
    conv and no learned decay: each head's decay rate is a buffer.  Its state per sequence: H × d × d
    values (Σ kᵀv, decayed), no conv inputs."""

    kind: Literal["lightning"]
    n_heads: Heads
    head_dim: Width
    block: Tokens = 256  # the prefill's blocks of tokens (config block_size; the remote code's BLOCK)

    @property
    def inner(self) -> int:
        return self.n_heads * self.head_dim


class KimiDeltaSpec(_Frozen):
    """A `linear` layers' mixer: Kimi Delta Attention (Kimi Linear, arXiv:2510.26692), as transformers'
    KimiLinearDeltaAttention runs it: the gated delta rule with a decay per channel rather than per head.
    Per layer, with I = n_heads · head_dim: q, k and v projections D -> I each and β's D -> H, a depthwise
    causal conv of conv_kernel taps over q, k and v (3I channels, no bias), the forget gate's low-rank
    D -> head_dim -> I with dt_bias [I] and A_log [H], the output gate's D -> head_dim -> I, an RMSNorm of
    head_dim times sigmoid(gate), I -> D.  Its state per sequence: H × d × d values (fp32) and the conv's
    last conv_kernel − 1 inputs."""

    kind: Literal["kda"]
    n_heads: Heads
    head_dim: Width
    conv_kernel: int = Field(default=4, ge=1, le=64)
    chunk: Tokens = 64  # the chunk of the chunked form (transformers and flash-linear-attention: 64)
    low_rank_gates: bool = True  # false: the forget and output gates are D -> I directly (Ling's bailing_hybrid)

    @property
    def inner(self) -> int:
        return self.n_heads * self.head_dim


class MLSTMSpec(_Ruled):
    """A `linear` layers' mixer: xLSTM's mLSTM (Beck et al. 2024, arXiv:2405.04517; xLSTM 7B, arXiv:2503.13427),
    as transformers' xLSTMLayer runs it: a matrix memory per head with exponential input and sigmoid forget
    gates.  Per layer, H heads: q and k D -> Kd each, v and the output gate D -> Vd each, the input and forget
    gates D -> H each (with a bias), a LayerNorm over each head's d_v values (one weight of Vd), Vd -> D; no
    other bias (xLSTM's use_bias false: with it, its block's RMSNorms carry biases archcalc has no norm for).  No conv.  Its state per sequence: per head a d_k × d_v matrix C, a normaliser n of d_k and a max m
    (H·(d_k·d_v + d_k + 1) values, fp32)."""

    kind: Literal["mlstm"]
    n_heads: Heads
    qk_dim: Width  # Kd, all heads' query (and key) width: xLSTM 7B's D/2
    v_dim: Width  # Vd, all heads' value width
    chunk: Tokens = 64  # the chunk of the chunked (parallel) form: transformers' xLSTMConfig.chunk_size
    # weight_mode "fused": q, k, v and the output gate as one tensor, the two gates as another (same parameters)
    fused_projections: bool = False

    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = (
        _divisible("qk_dim", "n_heads", "mlstm qk_dim divisible by n_heads"),
        _divisible("v_dim", "n_heads", "mlstm v_dim divisible by n_heads"))

    @property
    def key_head_dim(self) -> int:
        return self.qk_dim // self.n_heads

    @property
    def value_head_dim(self) -> int:
        return self.v_dim // self.n_heads


class RGLRUSpec(_Ruled):
    """A `linear` layers' mixer: Griffin's recurrent block with its Real-Gated Linear Recurrent Unit (De et al.
    2024, arXiv:2402.19427), as transformers' RecurrentGemmaRecurrentBlock runs it.  Per layer, with W = width:
    two D -> W projections with biases (x, and y through a GELU), a depthwise causal conv of conv_kernel taps on
    x (with a bias), the RG-LRU (its input and recurrence gates block-diagonal, n_heads blocks of W/H × W/H
    with biases, and a decay parameter of W), y ⊙ the recurrence, W -> D with a bias.  Its state per sequence:
    W values (fp32) and the conv's last conv_kernel − 1 inputs."""

    kind: Literal["rglru"]
    width: Width  # W, lru_width
    n_heads: Heads  # the gates' diagonal blocks
    conv_kernel: int = Field(default=4, ge=1, le=64)

    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = (_divisible("width", "n_heads", "rglru width divisible by n_heads"),)


class RWKVSpec(_Frozen):
    """A `linear` layers' mixer: RWKV-4's time mixing (Peng et al. 2023, arXiv:2305.13048), as transformers'
    RwkvSelfAttention: its input mixed with the previous token's (three learned D-vectors, the token shift), key,
    value and receptance D -> D, the WKV recurrence (a decay and a bonus a channel; elementwise), sigmoid(r) ⊙ it,
    D -> D.  Its state per sequence: the WKV's numerator, denominator and running max (3·D values, fp32), and the
    previous token's input of the time mix and of the channel mix (FFNSpec.receptance): 2·D, as conv inputs."""

    kind: Literal["rwkv4"]


def _mixer_kind(value: object) -> str:
    """The `kind` that picks a linear mixer's schema: gated_deltanet when a spec leaves it out."""
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return "gated_deltanet" if kind is None else kind


# The mixer of the `linear` layers, told apart by `kind` (gated_deltanet when absent): a bad field names
# the mixer it belongs to, not every schema of the union.
LinearMixer = Annotated[
    Annotated[GatedDeltaNetSpec, Tag("gated_deltanet")] | Annotated[ShortConvSpec, Tag("short_conv")]
    | Annotated[MambaSpec, Tag("mamba")] | Annotated[Mamba2Spec, Tag("mamba2")]
    | Annotated[LightningSpec, Tag("lightning")] | Annotated[KimiDeltaSpec, Tag("kda")]
    | Annotated[MLSTMSpec, Tag("mlstm")] | Annotated[RGLRUSpec, Tag("rglru")] | Annotated[RWKVSpec, Tag("rwkv4")],
    Discriminator(_mixer_kind)]


class RouterMLPSpec(_Frozen):
    """ZAYA1's router: D -> width (a bias), plus the previous MoE layer's value of it times a learned width-vector
    in every MoE layer but the first (`eda`), then an RMSNorm, two width -> width layers with biases and GELU, and
    width -> the experts' logits (no bias)."""

    width: Width  # router_hidden_size
    eda: bool = True


class MoESpec(_Ruled):
    """Mixture of experts replacing the dense FFN on some layers."""

    n_experts: Experts
    top_k: Experts
    d_expert: FFNWidth  # F of one routed expert
    d_shared: int = Field(default=0, ge=0, le=MAX_FFN)  # total F of the always-on shared expert(s)
    shared_gate: bool = False  # sigmoid gate D -> 1 on the shared expert (Qwen2-MoE)
    router_bias: bool = False
    first_dense_layers: int = Field(default=0, ge=0, le=MAX_LAYERS)  # leading layers keep the dense FFN
    every: Layers = 1  # after those, layer i is MoE when (i + 1) % every == 0
    layers: list[LayerIndex] | None = None  # explicit MoE layer indices; overrides the two above
    # Gemma 4 26B A4B: the router's input RMS-normed (no weight) and scaled by a learned D-vector, its
    # top-k weights by a learned scale per expert (D + E parameters a layer) ...
    router_scales: bool = False
    # ... and the always-on MLP (d_shared) and the routed experts each with their own norms: one before
    # the experts, one after each branch (3 more norms of D a layer)
    branch_norms: bool = False
    # a norm of D on the whole MoE block's output (routed + shared) before the residual add (A.X-K1's
    # post_mlp_layernorm; its dense layers have none)
    post_norm: bool = False
    # Zero-computation experts (LongCat-Flash's identity experts): the router scores n_experts + zero_experts
    # and a token's top_k may land on them, which costs nothing.  How many do is the data's: archcalc counts
    # top_k real experts a token, an upper bound on the FLOPs and the active parameters.
    zero_experts: int = Field(default=0, ge=0, le=MAX_EXPERTS)
    # one D-vector added to the combined experts' output (JetMoE's JetMoeMoE.bias; its experts have none)
    output_bias: bool = False
    # shared experts the router scores beside the routed ones (Inkling's shared_expert_sink): its weight is
    # D -> n_experts + router_shared, and their weights are those scores (the shared experts: d_shared in all)
    router_shared: int = Field(default=0, ge=0, le=MAX_EXPERTS)
    router_mlp: RouterMLPSpec | None = None  # the router an MLP (ZAYA1), not one D -> n_experts layer

    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = (
        NumericRule(lambda m: m.top_k <= m.n_experts, lambda m: f"top_k ({m.top_k}) exceeds n_experts ({m.n_experts})",
                    "top_k at most n_experts"),
        NumericRule(lambda m: not m.shared_gate or m.d_shared > 0,
                    lambda m: "shared_gate needs a shared expert (d_shared > 0)", "a shared expert for shared_gate"),
        NumericRule(lambda m: m.router_mlp is None or ((m.router_shared == 0) & (not (m.router_bias or m.router_scales))),
                    lambda m: "router_mlp is the whole router: no router_bias, router_scales or router_shared",
                    "a router MLP alone"),
        NumericRule(lambda m: not m.branch_norms or m.d_shared > 0,
                    lambda m: "branch_norms needs a shared expert (d_shared > 0)", "a shared expert for branch_norms"),
        NumericRule(lambda m: (m.router_shared == 0) | (m.d_shared > 0),
                    lambda m: "router_shared needs shared experts (d_shared > 0)", "shared experts for router_shared"),
    )


class ProductKeySpec(_Ruled):
    """Doge's cross-domain MoE beside the dense MLP (PEER-style product keys): n_experts single-neuron experts held
    as two tables of E × D (down, up); a router D -> 2·⌊√E⌋ scores two halves of the keys, and the top_k of the
    ⌊√E⌋² sums pick a token's experts, act(x · down_e) · weight_e summed over up_e.  The selection (top-ks and
    sums) is not counted."""

    n_experts: Experts
    top_k: Experts

    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = (
        NumericRule(lambda p: p.top_k <= isqrt(p.n_experts) ** 2,
                    lambda p: f"top_k ({p.top_k}) exceeds the ⌊√n_experts⌋² = {isqrt(p.n_experts) ** 2} "
                              "product keys", "top_k at most ⌊√n_experts⌋²"),
    )

    @property
    def keys(self) -> int:
        """⌊√E⌋: the keys of each half (transformers' DogeCDMoE.num_keys)."""
        return isqrt(self.n_experts)


class FFNSpec(_Frozen):
    activation: Activation = "swiglu"
    d_ff: FFNWidth | None = None
    d_ff_ratio: float | None = Field(default=None, gt=0, le=1024)  # F = ratio·D, rounded up to d_ff_multiple_of
    d_ff_multiple_of: Width = 1
    bias: bool = False  # every FFN projection (experts too) has a bias
    moe: MoESpec | None = None
    none_layers: list[LayerIndex] | None = None  # layers with no FFN (Nemotron-H's blocks without one)
    kv_shared_d_ff: FFNWidth | None = None  # F of the layers that reuse K/V (Gemma 4's double-wide MLP: 2·d_ff)
    sub_norm: bool = False  # a norm over the activation's output (F) before the down projection (BitNet's ffn_sub_norm)
    # RWKV-4's channel mix: the input mixed with the previous token's (two learned D-vectors), the MLP's output times
    # sigmoid(x W_r) with W_r D -> D (its previous-token state is the rwkv4 mixer's)
    receptance: bool = False
    product_key: ProductKeySpec | None = None  # Doge's product-key experts beside the dense MLP (its is_moe)
    # a learned scalar on each dense MLP's output and on each MoE router's weights (Inkling's global_scale): one
    # parameter a layer (the router's in fp32)
    global_scale: bool = False
    # two learned F-vectors scaling the gate's and the up projection's outputs of each dense gated MLP (nGPT's s_u
    # and s_v, arXiv:2410.01131; Dory's suv_gate, suv_up): 2·F parameters a layer, one FLOP a value each
    scales: bool = False

    @model_validator(mode="after")
    def _check(self) -> FFNSpec:
        if self.scales and (self.moe is not None or not self.gated or self.product_key is not None
                            or self.kv_shared_d_ff is not None):
            raise ValueError("ffn.scales (nGPT's s_u, s_v) goes with a dense gated MLP of one width in every layer")
        if self.product_key is not None and (self.moe is not None or self.receptance or self.sub_norm
                                             or self.none_layers or self.kv_shared_d_ff is not None):
            raise ValueError("ffn.product_key goes beside a dense MLP in every layer: no moe, receptance, sub_norm, "
                             "none_layers or kv_shared_d_ff")
        if self.d_ff is not None and self.d_ff_ratio is not None:
            raise ValueError("give d_ff or d_ff_ratio, not both")
        if self.receptance and (self.moe is not None or self.gated or self.bias):
            raise ValueError("ffn.receptance (RWKV-4's channel mix) goes with a plain bias-free MLP, no MoE")
        if self.sub_norm and self.moe is not None:
            raise ValueError("ffn.sub_norm with MoE experts is not supported (no model has it)")
        if self.activation in LEARNED_ACTIVATION_PARAMS and self.moe is not None:
            raise ValueError(f"activation {self.activation} with MoE experts is not supported (no model has it)")
        return self

    @property
    def gated(self) -> bool:
        return self.activation in GATED_ACTIVATIONS


class NormSpec(_Frozen):
    # l2: x / ‖x‖ with no learned scale (nGPT, arXiv:2410.01131: hidden states on the unit sphere); it costs what
    # a weightless RMSNorm costs (Σx² where RMSNorm takes the mean) and asks for weight: false
    kind: Literal["rmsnorm", "layernorm", "l2", "none"] = "rmsnorm"
    bias: bool = False  # LayerNorm only: a bias vector beside the weight
    # pre: x + F(N(x)); post: a norm on each sublayer output (OLMo 2's
    # x + N(F(x)), or the original Transformer's N(x + F(x)): same cost);
    # both: sandwich, a norm before and after each sublayer (Gemma 2/3).
    placement: Literal["pre", "post", "both"] = "pre"
    final: bool = True  # a norm before the unembedding
    embedding: bool = False  # a norm right after the embedding (BLOOM's word_embeddings_layernorm)
    weight: bool = True  # false: no learned scale (OLMo 1's non-parametric LayerNorm)
    first_layer: bool = True  # false: layer 0 has no norm before its mixer, the embedding's serves (ModernBERT)
    # the norm before each attention and before each MoE block gated: y ⊙ sigmoid(W₂ silu(W₁ y)), W₁ D -> rank,
    # W₂ rank -> D (A.X-K2's GatedRMSNorm; its dense layers' FFN norm is plain)
    gate_rank: Width | None = None

    @model_validator(mode="after")
    def _check(self) -> NormSpec:
        if self.bias and self.kind != "layernorm":
            raise ValueError(f"bias only applies to layernorm, not {self.kind}")
        if self.kind == "l2" and (self.weight or self.embedding or self.gate_rank is not None):
            raise ValueError("kind l2 (x / ‖x‖) has no learned scale: it needs weight: false, and no embedding norm "
                             "or gate_rank")
        if self.kind == "none" and (self.embedding or not self.weight):
            raise ValueError("embedding and weight describe a norm; kind none has none")
        if self.bias and not self.weight:
            raise ValueError("a norm bias needs the weight (weight: false is a norm without either)")
        if not self.first_layer and not (self.embedding and self.placement == "pre"):
            raise ValueError("first_layer false (no norm before layer 0's mixer) needs the embedding's norm "
                             "(embedding: true) and placement pre")
        if self.gate_rank is not None and (self.kind == "none" or self.placement != "pre"):
            raise ValueError("gate_rank gates the norms before each sublayer: it needs a norm and placement pre")
        return self


class RopeScaling(_Frozen):
    """Context extension of RoPE; original_context × factor is the new limit
    (llama3 and longrope keep the limit the config states)."""

    type: Literal["linear", "ntk", "dynamic", "yarn", "llama3", "longrope"]
    factor: float = Field(gt=0, le=1e4)
    original_context: Tokens | None = None


class PositionSpec(_Ruled):
    kind: Literal["rope", "learned", "sinusoidal", "alibi", "none"] = "rope"
    theta: Positive = 10000.0
    local_theta: Positive | None = None  # RoPE base of local layers (Gemma 3)
    # the share local layers rotate where it differs from rotary_fraction (Laguna: 1.0 beside its global 0.5)
    local_rotary_fraction: float | None = Field(default=None, gt=0, le=1)
    rotary_fraction: float = Field(default=1.0, gt=0, le=1)  # partial rotary (NeoX 0.25)
    scaling: RopeScaling | None = None
    # learned: rows of the table beyond max_context (OPT's positions start at row 2).
    offset: int = Field(default=0, ge=0, le=2**10)

    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = (
        NumericRule(lambda p: p.kind == "rope" or p.scaling is None and p.local_theta is None
                    and p.rotary_fraction == 1.0 and p.local_rotary_fraction is None,
                    lambda p: f"scaling, local_theta and rotary_fraction only apply to rope, not {p.kind}",
                    "rope settings only with rope"),
        NumericRule(lambda p: (p.kind == "learned") | (p.offset == 0),
                    lambda p: f"offset only applies to learned positions, not {p.kind}",
                    "offset only with learned positions"),
    )


class ResidualSpec(_Frozen):
    # standard: x + F(x) per sublayer; parallel: x + Attn(N(x)) + MLP(N(x));
    # hyper: hyper-connections (arXiv:2409.19606); mhc: manifold-constrained
    # HC (arXiv:2512.24880); attnres: attention residuals (arXiv:2603.15031);
    # altup: alternating updates (Gemma 3n; NeurIPS 2023): n streams, each layer runs on one, a learned
    # prediction before it and correction after it; the streams made from the embedding by n − 1 D × D
    # projections and merged by n − 1 more before the final norm.
    # interpolate: nGPT's step towards each sublayer's output, x ← x + |α| ⊙ (F − x) (arXiv:2410.01131, eq. 10-11;
    # Dory's lambda_1, lambda_2): a learned D-vector α a sublayer, a subtract, multiply and add a value
    kind: Literal["standard", "parallel", "hyper", "mhc", "attnres", "altup", "interpolate"] = "standard"
    parallel_norms: int = Field(default=1, ge=1, le=2)  # strict int: a bool is not a count; parallel: one shared norm (GPT-J, Cohere) or two (NeoX, Falcon-40B)
    streams: int = Field(default=4, ge=1, le=64)  # hyper / mhc: n residual streams
    dynamic: bool = True  # hyper: input-dependent coefficients (DHC) or static ones (SHC)
    sinkhorn_iters: int = Field(default=20, ge=1, le=10**4)  # mhc
    blocks: Layers | None = None  # attnres: N blocks; None = full (one block per sublayer)
    # attnres as written: "paper" (one pseudo-query and one weighted key RMSNorm a unit); "inkling2" (transformers'
    # Inkling2BlockAttentionResidual): blocks of whole layers, weightless key norms, no module on layer 0's attention
    # input (it sees the embedding alone), and on the global layers three queries, the mixes that feed q, k and v,
    # each with its own RMSNorm of D before its projection; each query a D-vector kept in fp32
    attnres_form: Literal["paper", "inkling2"] = "paper"
    # LAuReL (Gemma 3n): per layer a low-rank D -> r -> D branch of the attention's normed input, RMS-normed and
    # added to the stream after attention (its sum scaled by 1/√2)
    laurel_rank: Width | None = None
    # mhc without stream mixing (HY-V4's hyper-connections): each module's coefficients are the n read and the n
    # write weights (2n logits from the n·D state, a bias each, two learned scales), no n × n mix, no Sinkhorn
    mix: bool = True
    # hyper / mhc: the streams merged before the final norm by learned weights (n·D -> n logits, a bias each, one
    # scale; HY-V4's hc_head), not summed
    head: bool = False
    # standard: a learned D-vector scaling the skip path of each sublayer, x <- w ⊙ x + F(x) (Doge's
    # input_residual and post_attention_residual): D parameters a sublayer and one more FLOP a value
    scales: bool = False
    # standard: a depthwise causal conv of this kernel on each sublayer's output, with its own skip, before the
    # residual add, x <- x + (y + conv(y)), weights in fp32 (Inkling's attn_sconv, mlp_sconv): 2·D·kernel
    # parameters a layer and a state per sequence of the last kernel − 1 outputs of each sublayer
    output_conv: Annotated[int, Field(ge=2, le=64)] | None = None
    # standard: each sublayer's output and the skip path each given a learned bias and scale before the add,
    # (F + b) ⊙ s + (x + c) ⊙ t, and the embedding's output likewise, (x + c) ⊙ t (ZAYA1's ZayaResidualScaling and
    # input_hidden_states_scale/bias): 4·D parameters a sublayer, 2·D more, 4 more FLOPs a value
    affine: bool = False

    @model_validator(mode="after")
    def _check(self) -> ResidualSpec:
        if self.affine and (self.kind != "standard" or self.laurel_rank is not None or self.scales
                            or self.output_conv is not None):
            raise ValueError("affine goes with residual kind standard, no laurel_rank, scales or output_conv")
        if self.laurel_rank is not None and self.kind not in ("standard", "altup"):
            raise ValueError("laurel_rank goes with residual kind standard or altup")
        if not self.mix and self.kind != "mhc" or self.head and self.kind not in ("hyper", "mhc"):
            raise ValueError("mix false goes with residual kind mhc; head with hyper or mhc")
        if self.scales and (self.kind != "standard" or self.laurel_rank is not None):
            raise ValueError("scales goes with residual kind standard and no laurel_rank")
        if self.output_conv is not None and (self.kind not in ("standard", "attnres") or self.laurel_rank is not None
                                             or self.scales):
            raise ValueError("output_conv goes with residual kind standard or attnres, no laurel_rank or scales")
        if self.attnres_form != "paper" and (self.kind != "attnres" or self.blocks is None):
            raise ValueError("attnres_form inkling2 goes with residual kind attnres and its blocks")
        return self


class TrainingSpec(_Frozen):
    """How the model is (or will be) trained: optional, and read only by `archcalc lint`
    (the seeds' training conventions); no parameter, FLOP or byte depends on it."""

    dropout: float = Field(default=0.0, ge=0, lt=1)  # residual / attention dropout in pretraining
    weight_decay: float | None = Field(default=None, ge=0, le=1e6)  # decoupled (AdamW) coefficient
    z_loss: float | None = Field(default=None, ge=0, le=1e6)  # coefficient of log²Z on the output softmax (PaLM: 1e-4)
    learning_rate: float | None = Field(default=None, gt=0, le=1e3)  # peak learning rate
    warmup_steps: int | None = Field(default=None, ge=0, le=10**12)
    tokens: float | None = Field(default=None, gt=0, le=1e18)  # pretraining tokens
    context: Tokens | None = None  # sequence length of pretraining (before any long-context stage)


class VisionSpec(_Frozen):
    """The image encoder a multimodal checkpoint loads beside the language model (SigLIP, as in
    Gemma 3) and the projector into the language model's width.  Its parameters are weights that
    `fit` loads; `size` reports them apart: they are not in the language model's totals or FLOPs."""

    # siglip: SiglipVisionTransformer (Gemma 3); llama4: Llama4VisionModel (see ops/vision.py)
    kind: Literal["siglip", "llama4"] = "siglip"
    d_model: Width
    d_ff: FFNWidth
    n_layers: Layers
    n_heads: Heads
    patch_size: int = Field(ge=1, le=1024)
    image_size: int = Field(ge=1, le=2**16)
    channels: int = Field(default=3, ge=1, le=64)
    head: bool = False  # SigLIP's attention-pooling head (Gemma 3 builds none)
    # gemma3: RMSNorm over the vision width, then D_v -> d_model; llama4: output_dim -> d_model, no bias
    projector: Literal["gemma3", "llama4"] = "gemma3"
    # Llama 4's pixel-shuffle adapter: fc1 d_ff -> projector_input_dim, fc2 projector_output_dim squared, and
    # the width the projector reads (vision_output_dim)
    projector_input_dim: Width | None = None
    projector_output_dim: Width | None = None
    output_dim: Width | None = None

    @model_validator(mode="after")
    def _check_kind(self) -> VisionSpec:
        llama4 = (self.projector_input_dim, self.projector_output_dim, self.output_dim)
        if (self.kind == "llama4") != all(d is not None for d in llama4) or (
                self.kind != "llama4" and any(d is not None for d in llama4)):
            raise ValueError("kind llama4 takes projector_input_dim, projector_output_dim and output_dim; "
                             "siglip takes none of them")
        if (self.kind == "llama4") != (self.projector == "llama4"):
            raise ValueError("the llama4 tower goes with the llama4 projector, siglip with gemma3")
        return self

    @property
    def patches(self) -> int:
        """Position-embedding rows: (image_size // patch_size)², as SigLIP builds them."""
        return (self.image_size // self.patch_size) ** 2


class PerLayerInputSpec(_Frozen):
    """Per-layer embeddings (Gemma 3n / 4's "PLE"): each layer gets a vector of `width` per token, the sum
    of a second token table (vocab_size rows of n_layers·width) and a projection of the embedded token
    (D -> n_layers·width, an RMSNorm over each layer's width, one weight of width).  After its FFN each
    layer gates it in: act(x W_gate) (D -> width) times the vector, W_proj (width -> D), an RMSNorm of D,
    added to the residual stream."""

    width: Width
    vocab_size: Annotated[int, Field(ge=1, le=MAX_VOCAB)]


class LoopSpec(_Frozen):
    """Layers a token runs through more than once with the same weights.  n_layers counts the layers run
    (transformers' cache slots: one a run); `stored_layers` the layers with weights of their own.  Every
    layer's weights alike (one shape; global and local layers differ only in their window).

    kind hierarchical: HRM-Text's recurrence (Wang et al. 2025, arXiv:2506.21734; sapientinc/HRM-Text-1B), two
    stacks of layers of which the low-level one runs L_cycles times and the high-level one once, H_cycles
    times over: each layer run n_layers / stored_layers times.  Each of the `passes` stack passes starts from a
    sum of the two states (an add) and ends in a weightless RMSNorm (the last pass's is the final norm);
    `init_state`: a learned D-vector starts the low-level state (HRM's z_L_init).

    kind recurrent: a prelude of `prelude` layers run once, a core of stored_layers − prelude − coda layers run
    `passes` times, a coda of `coda` layers run once (Dory, nvidia/NVIDIA-Nemotron-Labs-Dory1.0-4B; Huginn's
    prelude/core/coda, arXiv:2502.05171).  The prelude's output normed is x₀; each pass starts from the state
    normed plus x₀ (a norm and an add; the norm.kind's, weightless).  `cache` per_pass: each run of a core layer
    keeps a cache of its own; last_pass: one a core layer, written by the last pass, the earlier passes reading
    it beside their own new keys (Dory's recurrent_kv_cache_mode last_loop)."""

    kind: Literal["hierarchical", "recurrent", "message"] = "hierarchical"
    stored_layers: Layers
    passes: int = Field(ge=1, le=MAX_LAYERS)
    init_state: bool = False
    prelude: int = Field(default=0, ge=0, le=MAX_LAYERS)
    coda: int = Field(default=0, ge=0, le=MAX_LAYERS)
    cache: Literal["per_pass", "last_pass"] = "per_pass"
    gate_rank: Width | None = None  # message: the rank of each message gate (loop_gate_rank)

    @model_validator(mode="after")
    def _check(self) -> LoopSpec:
        if self.kind == "hierarchical" and (self.prelude or self.coda or self.cache != "per_pass"):
            raise ValueError("prelude, coda and cache last_pass go with loop kind recurrent")
        if self.kind != "hierarchical" and (self.init_state or self.prelude + self.coda >= self.stored_layers):
            raise ValueError(f"loop kind {self.kind}: prelude ({self.prelude}) + coda ({self.coda}) must leave a core "
                             f"of stored_layers ({self.stored_layers}), and no init_state")
        if (self.kind == "message") != (self.gate_rank is not None) or self.kind == "message" and (
                self.cache != "per_pass" or not self.prelude):
            raise ValueError("loop kind message (Inkling 2 Loop) needs a gate_rank (and only it has one), a prelude "
                             "and cache per_pass")
        return self

    @property
    def core(self) -> int:
        """The layers a recurrent loop runs `passes` times."""
        return self.stored_layers - self.prelude - self.coda

    def runs_layers(self, n_layers: int) -> bool:
        """n_layers (the layers run) is what the loop runs."""
        if self.kind != "hierarchical":
            return n_layers == self.prelude + self.passes * self.core + self.coda
        return not (n_layers % self.stored_layers or self.stored_layers > n_layers or n_layers % self.passes)


class SharedBlockSpec(_Frozen):
    """A transformer block whose weights several layers share (Zamba2, arXiv:2411.15242), run on each of `layers`
    before its mixer: its input is the layer's input beside the token embeddings (2D values), through an RMSNorm
    of 2D, attention as `attention` says it but reading 2D (q, k and v 2D -> heads; o heads -> D), an RMSNorm of
    D, a gated MLP of d_ff (ffn.activation); then each layer's own D -> D projection, and the result is added to
    the mixer's input.  `blocks` sets of those weights, used in turn; with an adapter_rank, each use adds LoRA
    adapters of its own on q, k and v (2D -> r -> each) and on gate_up (D -> r -> 2·d_ff).  Each use keeps its
    own K/V cache."""

    layers: list[LayerIndex]
    blocks: int = Field(default=1, ge=1, le=MAX_LAYERS)
    d_ff: FFNWidth
    adapter_rank: Width | None = None
    attention_adapters: bool = True  # false: the adapters on gate_up only (use_shared_attention_adapter false)


class HeadTransformSpec(_Frozen):
    """BERT's prediction head before the unembedding (ModernBERT's decoder): a D -> D dense layer (with a bias
    where `bias`), an activation and a norm of norm.kind, on the positions whose logits are computed."""

    activation: Literal["relu", "gelu", "silu"] = "gelu"
    bias: bool = False


class MTPSpec(_Frozen):
    """Multi-token-prediction modules the checkpoint stores (ops/mtp.py): not part of the model
    transformers builds, so in no total; `size` reports them apart."""

    layers: Layers = 1
    copies: bool = False  # each module stores its own embedding and head (DeepSeek-V3, GLM-4.5)
    # DeepSeek-V4's modules: the compressor of their layer (the release's last compress_ratios entry: none), and a
    # head of their own merging the mHC streams (hc_head_fn, hc_head_base, hc_head_scale: n·(n·D) + n + 1)
    compressor: CompressorKind | None = None
    hc_head: bool = False


class DrafterSpec(_Frozen):
    """A drafter for speculative decoding (Gemma 4's assistant: Gemma4AssistantForCausalLM).  It keeps no cache:
    every layer reads the target model's K/V, those of the target's last layer of its kind (attention.kv_shared_layers
    = n_layers), and each of its queries sees all the keys the target holds there (no causal mask among them: the
    drafted tokens are not in the target's cache).  Its input is the target's embedding of the token beside the
    target's last hidden state, 2·backbone_d_model values projected to d_model (pre_projection); its output the
    logits and a projection back to backbone_d_model (post_projection).  Its own embedding table is never looked
    up: tied, it is the head's weight.  With `centroids`, the head scores that many clusters of the vocabulary
    (D -> C) and computes the logits of the top_k clusters' vocab_size / C tokens only (use_ordered_embeddings)."""

    backbone_d_model: Width
    centroids: Annotated[int, Field(ge=1, le=MAX_VOCAB)] | None = None
    top_k: Annotated[int, Field(ge=1, le=MAX_VOCAB)] = 32  # centroid_intermediate_top_k


class ModelSpec(_Frozen):
    name: str = "model"
    source: str | None = None  # where the numbers come from (a config.json URL)
    # The Hugging Face model_type the spec was read from, for engines whose rules depend on the
    # architecture (llama.cpp runs Phi-3 without its sliding window); None for a hand-written spec.
    architecture: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    notes: str | None = None
    d_model: Width
    n_layers: Layers
    vocab_size: Annotated[int, Field(ge=1, le=MAX_VOCAB)]
    # Longest context the model supports, context extension included.  May be
    # left out when position.scaling gives original_context: then it is
    # original_context × factor (llama3 and longrope need it stated).
    max_context: Tokens
    tie_embeddings: bool = False
    lm_head_bias: bool = False  # a bias on the unembedding (GPT-J, CodeGen, Phi-2): V parameters, never tied
    # rows of the unembedding where it is pruned to the first ids of the vocabulary (Apertus 1.5's
    # output_vocab_size: the embedding keeps vocab_size rows, the head fewer); never tied then
    head_vocab_size: Annotated[int, Field(ge=1, le=MAX_VOCAB)] | None = None
    # Width of the token embedding and the unembedding when it is not d_model (OPT-350m: 512);
    # project_in (E -> D) and project_out (D -> E), bias-free, connect them.
    embedding_dim: Width | None = None
    final_softcap: Positive | None = None  # tanh soft-capping of the logits
    # a learned V-vector scaling the logits, in fp32 (nGPT's s_z, arXiv:2410.01131; Dory's logit_scale)
    logit_scale: bool = False
    attention: AttentionSpec
    linear: LinearMixer | None = None  # the mixer of layer_types' "linear" layers
    ffn: FFNSpec = Field(default_factory=FFNSpec)
    norm: NormSpec = Field(default_factory=NormSpec)
    position: PositionSpec = Field(default_factory=PositionSpec)
    residual: ResidualSpec = Field(default_factory=ResidualSpec)
    training: TrainingSpec | None = None
    vision: VisionSpec | None = None
    mtp: MTPSpec | None = None
    per_layer_input: PerLayerInputSpec | None = None
    loop: LoopSpec | None = None  # layers run more than once with shared weights (HRM-Text)
    shared_block: SharedBlockSpec | None = None  # a transformer block some layers share (Zamba2)
    head_transform: HeadTransformSpec | None = None  # dense, activation, norm before the unembedding (ModernBERT)
    drafter: DrafterSpec | None = None  # a speculative-decoding drafter that reads its target's cache (Gemma 4)

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

    # Rules between numbers (the sweep applies the same ones to arrays of candidates).
    NUMERIC_RULES: ClassVar[tuple[NumericRule, ...]] = (
        NumericRule(lambda s: s.attention.kind != "mha" or s.attention.head_dim is not None
                    or s.d_model % s.attention.n_heads == 0,
                    lambda s: f"d_model ({s.d_model}) is not divisible by n_heads ({s.attention.n_heads}); "
                              "give attention.head_dim",
                    "d_model divisible by n_heads"),
        NumericRule(lambda s: not isinstance(s.attention.layer_types, list)
                    or len(s.attention.layer_types) == s.n_layers,
                    lambda s: f"attention.layer_types lists {len(s.attention.layer_types)} layers, "
                              f"n_layers is {s.n_layers}",
                    "one layer_types entry per layer"),
        NumericRule(lambda s: s.position.kind != "rope" or (s.rope_dim % 2 == 0) & (s.rope_dim > 0),
                    lambda s: f"position.rotary_fraction gives {s.rope_dim} rotary dims; it must be even and > 0",
                    "an even number of rotary dims"),
        NumericRule(lambda s: s.d_ff >= 1,
                    lambda s: f"ffn.d_ff_ratio {s.ffn.d_ff_ratio} × d_model {s.d_model} rounds down to d_ff 0",
                    "d_ff at least 1"),
        NumericRule(lambda s: not s.ffn.none_layers or max(s.ffn.none_layers) < s.n_layers,
                    lambda s: f"ffn.none_layers names layer {max(s.ffn.none_layers)} of {s.n_layers}",
                    "ffn.none_layers within n_layers"),
        NumericRule(lambda s: s.attention.compressed is None or len(s.attention.compressed.layers) == s.n_layers,
                    lambda s: f"attention.compressed.layers lists {len(s.attention.compressed.layers)} layers, "
                              f"n_layers is {s.n_layers}",
                    "one compressed.layers entry per layer"),
        NumericRule(lambda s: s.attention.indexer is None or not s.attention.indexer.layers
                    or max(s.attention.indexer.layers) < s.n_layers,
                    lambda s: f"attention.indexer.layers names layer {max(s.attention.indexer.layers)} of {s.n_layers}",
                    "indexer.layers within n_layers"),
        NumericRule(lambda s: s.attention.indexer is None or not s.attention.indexer.shared_layers
                    or max(s.attention.indexer.shared_layers) < s.n_layers,
                    lambda s: f"attention.indexer.shared_layers names layer {max(s.attention.indexer.shared_layers)} "
                              f"of {s.n_layers}",
                    "indexer.shared_layers within n_layers"),
        NumericRule(lambda s: all(s.layer_attention[i] not in ("linear", "none")
                                  for i in s.attention.o_bias_layers or () if i < s.n_layers)
                    and all(i < s.n_layers for i in s.attention.o_bias_layers or ()),
                    lambda s: f"attention.o_bias_layers {s.attention.o_bias_layers}: each an attention layer of "
                              f"{s.n_layers}", "o_bias_layers name attention layers"),
        NumericRule(lambda s: not s.attention.nope_layers or max(s.attention.nope_layers) < s.n_layers,
                    lambda s: f"attention.nope_layers names layer {max(s.attention.nope_layers)} of {s.n_layers}",
                    "nope_layers within n_layers"),
        NumericRule(lambda s: s.ffn.moe is None or not s.ffn.moe.layers or max(s.ffn.moe.layers) < s.n_layers,
                    lambda s: f"ffn.moe.layers names layer {max(s.ffn.moe.layers)} of {s.n_layers}",
                    "moe.layers within n_layers"),
        NumericRule(lambda s: s.residual.kind != "attnres" or s.residual.blocks is None
                    or (2 * s.stored_layers) % s.residual.blocks == 0,
                    lambda s: f"residual.blocks ({s.residual.blocks}) must divide the 2·n_layers = "
                              f"{2 * s.stored_layers} sublayers (of the stored layers, in a loop)",
                    "residual.blocks dividing 2·n_layers"),
        NumericRule(lambda s: s.residual.attnres_form != "inkling2" or s.stored_layers % s.residual.blocks == 0,
                    lambda s: f"residual.blocks ({s.residual.blocks}) must divide n_layers ({s.stored_layers}, of the "
                              "stored layers in a loop): attnres_form inkling2's blocks are of whole layers",
                    "inkling2 blocks of whole layers"),
        NumericRule(lambda s: s.ffn.moe is None or s.ffn.d_ff is not None or s.ffn.d_ff_ratio is not None
                    or s.ffn_layers["dense"] == 0,
                    lambda s: "the dense FFN layers of this MoE model need ffn.d_ff",
                    "a d_ff for the dense layers of an MoE model"),
    )

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        a = self.attention
        if self.mtp is not None and ((self.mtp.compressor is not None) != (a.compressed is not None)
                                     or self.mtp.hc_head and not self.residual.head):
            raise ValueError("mtp.compressor goes with attention.compressed, mtp.hc_head with residual.head "
                             "(DeepSeek-V4)")
        if a.compressed is not None and self.position.kind != "rope":
            raise ValueError("attention.compressed (DeepSeek-V4) rotates its keys and entries: position.kind rope")
        if a.layer_types is not None and a.sliding_window is None and "local" in self.layer_attention:
            raise ValueError("attention.layer_types has local layers but attention.sliding_window is not set")
        if a.layer_types is not None and a.chunk_size is None and "chunked" in self.layer_attention:
            raise ValueError("attention.layer_types has chunked layers but attention.chunk_size is not set")
        parallel = self.parallel_linear
        if parallel and "linear" in self.layer_attention:
            raise ValueError("a parallel linear mixer runs beside attention in every layer: layer_types has no "
                             "linear layers then")
        if not parallel and ("linear" in self.layer_attention) != (self.linear is not None):
            raise ValueError("attention.layer_types names linear layers exactly when `linear` describes their mixer")
        no_ffn = set(self.ffn.none_layers or ())
        if "none" in self.layer_attention or no_ffn:
            if self.residual.kind != "standard":
                raise ValueError("layers without a mixer or an FFN need residual kind standard")
            empty = [i for i, k in enumerate(self.layer_attention) if k == "none" and i in no_ffn]
            if empty:
                raise ValueError(f"layer {empty[0]} has neither a mixer nor an FFN")
            if no_ffn & {i for i, k in enumerate(self._routed_ffn()) if k == "moe"}:
                raise ValueError("ffn.none_layers names an MoE layer")
        moe = self.ffn.moe
        if moe is not None and moe.router_mlp is not None and "dense" in self._routed_ffn():
            raise ValueError("ffn.moe.router_mlp (ZAYA1's router) goes with an MoE block in every layer")
        _check_numeric(self, self.NUMERIC_RULES)
        r = self.residual
        if r.kind == "parallel" and self.norm.placement != "pre":
            raise ValueError("residual kind parallel needs norm.placement pre")
        if a.kv_shared_layers:
            self._check_kv_sharing()
        elif self.ffn.kv_shared_d_ff is not None:
            raise ValueError("ffn.kv_shared_d_ff needs attention.kv_shared_layers")
        if self.drafter is not None:
            self._check_drafter()
        if r.output_conv is not None and not {"global", "local"}.issuperset(self.layer_attention):
            raise ValueError("residual.output_conv (Inkling) needs every layer an attention layer, global or local: "
                             "its state is kept beside each layer's cache")
        if self.position.local_rotary_fraction is not None and not (
                a.grouped and all(set(g.kinds) <= {"local"} or "local" not in g.kinds for g in self.attention_groups)):
            raise ValueError("position.local_rotary_fraction needs the local layers in groups of their own: attention "
                             "with global_head_dim, global_kv_heads or local_heads")
        if self.head_vocab_size is not None and (self.head_vocab_size > self.vocab_size or self.tie_embeddings):
            raise ValueError(f"head_vocab_size ({self.head_vocab_size}) must be at most vocab_size "
                             f"({self.vocab_size}) and the head untied: it is the embedding's first rows, pruned")
        if self.per_layer_input is not None and r.kind not in ("standard", "altup"):
            raise ValueError("per_layer_input needs residual kind standard or altup")
        if r.kind == "altup" and ("none" in self.layer_attention or self.ffn.none_layers):
            raise ValueError("residual kind altup needs every layer to have a mixer and an FFN")
        if self.loop is not None:
            self._check_loop()
        if (self.linear is not None and self.linear.kind == "rwkv4") != self.ffn.receptance or (
                self.ffn.receptance and (set(self.layer_attention) != {"linear"} or self.ffn.none_layers)):
            raise ValueError("linear kind rwkv4 and ffn.receptance go together: RWKV-4's time and channel mix, in "
                             "every layer")
        sb = self.shared_block
        if sb is not None and (not sb.layers or max(sb.layers) >= self.n_layers or len(set(sb.layers)) < len(sb.layers)
                               or sb.blocks > len(sb.layers)):
            raise ValueError(f"shared_block.layers: distinct layers of {self.n_layers}, at least `blocks` ({sb.blocks})")
        if sb is not None and (set(self.layer_attention) != {"linear"} or a.kind != "mha" or a.grouped or a.bias
                               or a.qk_norm != "none" or a.output_gate or a.sinks or self.ffn.bias
                               or self.residual.kind != "standard" or self.loop is not None or self.ffn.moe):
            raise ValueError("shared_block goes with every layer linear (its attention is the block's: kind mha, "
                             "one shape, no biases, norms, gates or sinks), a dense bias-free MLP and the standard "
                             "residual (Zamba2)")
        return self

    def _check_loop(self) -> None:
        """Layers that share weights are alike: their ops are one group whose weights are stored the fewer times
        (global and local layers of a recurrent loop too: a window has no weights; each pass's core layers of the
        first pass's kinds).  A message loop's layers need not be alike: each op's stored copies are counted from the
        stored layers themselves (ops/layers.py)."""
        lp, a, kinds = self.loop, self.attention, self.layer_attention
        if not lp.runs_layers(self.n_layers):
            need = ("loop.prelude + loop.passes × core + loop.coda" if lp.kind != "hierarchical" else
                    "a multiple of loop.stored_layers and of loop.passes")
            raise ValueError(f"loop: n_layers ({self.n_layers}), the layers run, must be {need} "
                             f"(stored_layers {lp.stored_layers}, passes {lp.passes})")
        core = kinds[lp.prelude:lp.prelude + lp.core]
        if lp.kind != "hierarchical" and any(kinds[lp.prelude + p * lp.core:lp.prelude + (p + 1) * lp.core] != core
                                             for p in range(lp.passes)):
            raise ValueError("loop: each pass runs the core's layers, of the first pass's kinds: "
                             "attention.layer_types must repeat them")
        if lp.kind == "message":
            per_block = lp.stored_layers // (self.residual.blocks or 1)
            if self.residual.attnres_form != "inkling2" or lp.prelude % per_block or lp.core % per_block or (
                    set(kinds) - {"global", "local"}) or self.mtp is not None or self.per_layer_input is not None \
                    or self.vision is not None:
                raise ValueError("loop kind message (Inkling 2 Loop) goes with residual attnres_form inkling2, a "
                                 "prelude and a core of whole blocks, global and local layers, and no MTP, vision "
                                 "tower or per-layer inputs")
            return
        mixed = lp.kind == "recurrent" and set(kinds) <= {"global", "local"} and not (
            a.sinks or a.local_heads is not None or a.relative is not None)
        if ((len(set(kinds)) > 1 and not mixed) or set(kinds) & {"linear", "none", "chunked"} or self.ffn.moe
                or self.ffn.none_layers or len(set(self.layer_rope)) > 1 or a.grouped
                or a.o_bias_layers or self.residual.kind not in ("standard", "interpolate") or self.mtp is not None
                or self.per_layer_input is not None or self.vision is not None):
            raise ValueError("loop needs every layer alike (one attention kind, or global and local layers of one "
                             "shape in a recurrent loop; RoPE on all or none, a dense FFN, the standard or "
                             "interpolate residual) and no MTP, vision tower or per-layer inputs")
        if lp.kind == "recurrent" and self.norm.kind == "none":
            raise ValueError("a recurrent loop norms each pass's start with norm.kind's norm: kind none has none")

    def _check_drafter(self) -> None:
        """A drafter (Gemma 4's assistant): every layer on the target's K/V, a centroid head that splits the
        vocabulary evenly, and none of what Gemma4AssistantConfig refuses or its forward does not run."""
        dr = self.drafter
        if self.attention.kv_shared_layers != self.n_layers or not {"global", "local"}.issuperset(self.layer_attention):
            raise ValueError("a drafter's layers all read the target's cache: attention.kv_shared_layers must be "
                             f"n_layers ({self.n_layers}), each layer global or local")
        if dr.centroids is not None and (self.vocab_size % dr.centroids or dr.top_k > dr.centroids):
            raise ValueError(f"drafter.centroids ({dr.centroids}) must divide vocab_size ({self.vocab_size}) "
                             f"and be at least drafter.top_k ({dr.top_k})")
        if (self.ffn.moe is not None or self.per_layer_input is not None or self.mtp or self.loop or self.vision
                or self.embedding_dim or self.head_vocab_size or self.head_transform or self.linear is not None
                or self.lm_head_bias or self.final_softcap is not None or self.logit_scale
                or self.residual.kind != "standard"):
            raise ValueError("a drafter (Gemma 4's assistant) has dense FFNs, the standard residual and no MoE, "
                             "per-layer inputs, MTP, loop, vision tower, linear mixer, head bias, logit soft-cap or "
                             "scale, or head of another width")

    def _check_kv_sharing(self) -> None:
        """Each shared layer needs an earlier layer of its kind to read (transformers raises otherwise)."""
        a, first = self.attention, self.n_layers - self.attention.kv_shared_layers
        kinds = self.layer_attention
        if self.drafter is not None:  # its layers read the target's cache (_check_drafter)
            return
        if first < 1:
            raise ValueError(f"attention.kv_shared_layers ({a.kv_shared_layers}) leaves no layer of the "
                             f"{self.n_layers} to compute K and V")
        missing = sorted(set(kinds[first:]) - set(kinds[:first]))
        if missing:
            raise ValueError(f"attention.kv_shared_layers: no layer before layer {first} is {missing[0]}, so a "
                             f"shared {missing[0]} layer has no K and V to reuse")
        if not {"global", "local", "chunked"}.issuperset(kinds[first:]):
            raise ValueError("attention.kv_shared_layers: the shared layers must all be attention layers")
        if self.ffn.kv_shared_d_ff is not None and (self.ffn.moe is not None or self.ffn.none_layers):
            raise ValueError("ffn.kv_shared_d_ff needs every layer to have a dense FFN")

    # ---- derived values, resolved once -------------------------------------
    # Written so that numeric fields may also be numpy arrays, one element per
    # candidate (search/: specs built with model_construct): `is not None`
    # rather than `or`, ops.arrays for min / int / ceil.

    @property
    def n_kv_heads(self) -> int:
        """K: heads stored in the KV cache (1 for MLA's shared latent)."""
        if self.attention.kind == "mla":
            return 1
        a = self.attention
        return a.n_kv_heads if a.n_kv_heads is not None else a.n_heads

    @property
    def qk_head_dim(self) -> int:
        a = self.attention
        if a.kind == "mla":
            return a.qk_nope_head_dim + a.qk_rope_head_dim
        return a.head_dim if a.head_dim is not None else self.d_model // a.n_heads

    @property
    def v_head_dim(self) -> int:
        return self.attention.v_head_dim if self.attention.v_head_dim is not None else self.qk_head_dim

    @property
    def rope_dim(self) -> int:
        """Rotated dims per head."""
        if self.attention.kind == "mla":
            return self.attention.qk_rope_head_dim
        return floor_int(self.qk_head_dim * self.position.rotary_fraction)

    @property
    def d_ff(self) -> int:
        f = self.ffn
        if f.d_ff is not None:
            return f.d_ff
        ratio = f.d_ff_ratio if f.d_ff_ratio is not None else (GATED_FF_RATIO if f.gated else PLAIN_FF_RATIO)
        # Llama's rule: int(ratio·D), then up to the next multiple (11008 for D=4096, 8/3, 256).
        return f.d_ff_multiple_of * ceil_div(floor_int(ratio * self.d_model), f.d_ff_multiple_of)

    @property
    def layer_attention(self) -> tuple[LayerKind, ...]:
        a = self.attention
        if isinstance(a.layer_types, list):
            return tuple(a.layer_types)  # its length is checked against n_layers by a NUMERIC_RULE
        return tuple(self._kind_at(i) for i in range(self.n_layers))

    @property
    def layer_rope(self) -> tuple[bool, ...]:
        """Whether each layer rotates q and k (RoPE models; all False otherwise)."""
        a = self.attention
        nope = set(a.nope_layers or ())
        return tuple(self.position.kind == "rope" and i not in nope and kind not in ("linear", "none")
                     and (kind != "global" or a.global_rope) for i, kind in enumerate(self.layer_attention))

    @property
    def rope_layers(self) -> int:
        """Layers that rotate q and k: layer_rope's count in closed form (n_layers may be an array)."""
        if self.position.kind != "rope":
            return 0
        a = self.attention
        kinds = self.attention_layers
        rotating = kinds["local"] + kinds["chunked"] + (kinds["global"] if a.global_rope else 0)
        for i in set(a.nope_layers or ()):  # each NoPE layer that exists and would otherwise rotate
            kind = self._kind_at(i)
            rotating = rotating - (self.n_layers > i) * (kind not in ("linear", "none")
                                                         and (a.global_rope or kind != "global"))
        return rotating

    @property
    def attention_groups(self) -> list[AttentionGroup]:
        """The softmax-attention layers by shape, for a grouped attention (AttentionSpec.grouped): global
        layers apart where they have their own geometry, and the layers that reuse K/V apart."""
        a = self.attention
        own = a.global_head_dim is not None or a.global_kv_heads is not None or a.global_k_eq_v or a.local_heads is not None
        first_shared = self.n_layers - a.kv_shared_layers
        groups: dict[tuple[bool, bool], dict[str, int]] = {}
        for i, kind in enumerate(self.layer_attention):
            if kind in ("linear", "none"):
                continue
            kinds = groups.setdefault((own and kind == "global", i >= first_shared), {})
            kinds[kind] = kinds.get(kind, 0) + 1
        out = []
        for (wide, shared), kinds in sorted(groups.items()):
            # Gemma 4's global_head_dim is d_k and d_v both
            dk, dv = (a.global_head_dim,) * 2 if wide and a.global_head_dim else (self.qk_head_dim, self.v_head_dim)
            heads = a.n_heads if wide else a.local_heads or a.n_heads  # (local_heads: no chunked layers)
            out.append(AttentionGroup(".global" * wide + ".shared" * shared, kinds, heads,
                                      (a.global_kv_heads or self.n_kv_heads) if wide else self.n_kv_heads,
                                      dk, dv, shared, wide and a.global_k_eq_v))
        return out

    def _kind_at(self, i: int) -> LayerKind:
        """layer_attention[i] without building the tuple (n_layers may be an array)."""
        a = self.attention
        if isinstance(a.layer_types, list):
            return a.layer_types[i]
        if a.layer_types is None:
            return "local" if a.sliding_window else "chunked" if a.chunk_size else "global"
        n_local, n_global = _parse_ratio(a.layer_types)
        return "local" if i % (n_local + n_global) < n_local else "global"

    @property
    def stored_layers(self) -> int:
        """The layers with weights of their own: n_layers, or a loop's stored_layers (n_layers counting its runs)."""
        return self.loop.stored_layers if self.loop is not None else self.n_layers

    @property
    def head_vocab(self) -> int:
        """Rows of the unembedding: the logits a token gets (head_vocab_size where pruned)."""
        return self.head_vocab_size if self.head_vocab_size is not None else self.vocab_size

    @property
    def embedding_width(self) -> int:
        """E: the width of the token embedding and of the unembedding's input."""
        return self.embedding_dim if self.embedding_dim is not None else self.d_model

    @property
    def parallel_linear(self) -> bool:
        """The `linear` mixer runs beside attention in every layer (Falcon-H1; Mamba2Spec.parallel)."""
        return bool(getattr(self.linear, "parallel", False))  # only Mamba-2 mixers have the switch

    @property
    def linear_mixer_layers(self) -> int:
        """Layers that run the `linear` mixer: its linear layers, or every layer when it runs in parallel."""
        if self.linear is None:
            return 0
        return self.n_layers if self.parallel_linear else self.attention_layers["linear"]

    @property
    def attention_layers(self) -> dict[str, int]:
        """Layers of each attention kind, {"global": n, "local": n, "chunked": n, "linear": n}: the counts of
        layer_attention in closed form (n_layers may be an array)."""
        a, L = self.attention, self.n_layers
        chunked = linear = none = 0
        if isinstance(a.layer_types, list):
            local, chunked, linear, none = (a.layer_types.count(k) for k in ("local", "chunked", "linear", "none"))
        elif a.layer_types is None:
            local = L if a.sliding_window is not None else 0
            chunked = L if a.sliding_window is None and a.chunk_size is not None else 0
        else:
            n_local, n_global = _parse_ratio(a.layer_types)
            period = n_local + n_global  # whole periods, then the first layers of the next
            local = L // period * n_local + lesser(L % period, n_local)
        return {"global": L - local - chunked - linear - none, "local": local, "chunked": chunked, "linear": linear,
                "none": none}

    @property
    def ffn_layers(self) -> dict[str, int]:
        """Layers of each FFN kind, {"dense": n, "moe": n, "none": n}: the counts of layer_ffn in closed
        form (ffn.none_layers are never MoE layers: a rule of the spec)."""
        moe, L = self.ffn.moe, self.n_layers
        if moe is None:
            n_moe = 0
        elif moe.layers is not None:
            n_moe = len(set(moe.layers))
        else:  # layers i ≥ first with (i + 1) % every == 0: multiples of `every` in (first, L]
            n_moe = L // moe.every - lesser(moe.first_dense_layers, L) // moe.every
        n_none = len(set(self.ffn.none_layers or ()))
        return {"dense": L - n_moe - n_none, "moe": n_moe, "none": n_none}

    @property
    def layer_ffn(self) -> tuple[Literal["dense", "moe", "none"], ...]:
        none = set(self.ffn.none_layers or ())
        return tuple("none" if i in none else kind for i, kind in enumerate(self._routed_ffn()))

    def _routed_ffn(self) -> tuple[Literal["dense", "moe"], ...]:
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

    def cut(self, first: int, last: int) -> ModelSpec:
        """The same model with only layers [first, last) (a pipeline stage; an MTP module's copy of
        the last layer): each keeps its attention kind, RoPE, FFN kind (dense, MoE, none) and
        mixer.  MTP modules and a vision tower are not layers: the cut has neither."""
        kinds, rope, ffn = (list(t[first:last]) for t in (self.layer_attention, self.layer_rope, self.layer_ffn))
        data = self.model_dump(exclude_defaults=True)
        data.update(n_layers=last - first, mtp=None, vision=None)
        att, f = data["attention"], data.setdefault("ffn", {})
        att["layer_types"] = kinds
        if self.attention.compressed is not None:  # every layer local (no layer_types); its compressors cut with it
            att.pop("layer_types")
            att["compressed"]["layers"] = self.attention.compressed.layers[first:last]
        att.pop("nope_layers", None)
        if first > 0 and not self.norm.first_layer:  # only layer 0 goes without its norm
            data["norm"]["first_layer"] = True
        if self.attention.o_bias_layers:
            att["o_bias_layers"] = [i - first for i in self.attention.o_bias_layers if first <= i < last] or None
        if self.position.kind == "rope":  # every layer that would rotate by its kind but does not
            nope = [i for i, k in enumerate(kinds) if not rope[i] and k not in ("linear", "none")
                    and (k != "global" or self.attention.global_rope)]
            att["nope_layers"] = nope or None
        if "linear" not in kinds and not self.parallel_linear:
            data.pop("linear", None)
        f["none_layers"] = [i for i, k in enumerate(ffn) if k == "none"] or None
        if self.ffn.moe is not None:
            moe = [i for i, k in enumerate(ffn) if k == "moe"]
            f["moe"] = {**f["moe"], "layers": moe, "first_dense_layers": 0, "every": 1} if moe else None
        return ModelSpec.model_validate(data)


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
