"""The Op record and its constructors: the only place with FLOP and byte formulas.

Every number archcalc prints is a sum or a function over a list of Ops
(layers.model_ops builds it).  An Op describes ONE execution of a kernel;
`count` says how many times it runs per step (the layers that share it).

Units: FLOPs = 2 × multiply-accumulates; bytes are bytes.  Letters: B batch,
T new tokens per sequence, S context (keys after the step), D d_model,
H query heads, K KV heads, d_k / d_v head dims, E experts, k top-k.
Spec dims may be numpy arrays (a sweep, one element per candidate): the
formulas use ops/arrays.py's min/max, never Python's, and test only
workload scalars and None with `if`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Literal, get_args

from archcalc.ops.arrays import ceil_div, greater, lesser
from archcalc.ops.conventions import CONVENTIONS, FlopsConvention
from archcalc.ops.dtypes import kept_dtype, nbytes, stored_bytes
from archcalc.ops.workload import Workload

OpKind = Literal["matmul", "attention", "norm", "elementwise", "gather", "collective"]
# How tensor parallelism (t ranks) places an op's parameters and work (the
# fractions are parallel/tensor.py's): split: 1/t per rank (column-parallel
# linears, whose output is split, vocab-parallel embedding, attention heads,
# experts); row: 1/t per rank, a row-parallel linear (attention o, FFN down):
# its input is split and each rank writes the whole output (partial sums,
# all-reduced); replicated: whole on every rank (norms, routers, MLA's
# down-projections, residual-stream mixing); qkv: query heads split, KV heads
# split but at least one per rank (replicated when t > K, as vLLM does).
Sharding = Literal["split", "row", "replicated", "qkv"]
# projection: OPT-350m's project_in / project_out between the embedding width and d_model.
# vision: a multimodal checkpoint's image encoder (ops/vision.py, not in model_ops).
# linear: the mixers of linear layers (Gated DeltaNet, short conv, Mamba, Mamba-2).
# per_layer: Gemma 3n / 4's per-layer embeddings (PerLayerInputSpec): their table, projection and gates.
Component = Literal["embedding", "projection", "position", "attention", "linear", "ffn", "experts", "router", "norms",
                    "residual", "per_layer", "lm_head", "vision"]


# ---- dims: what a kernel needs to run an op, one record per op kind ---------------


class Dims:
    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class MatmulDims(Dims):
    """y[m, n] = x[m, k] @ W[k, n]; experts: the same shape in each of E experts, top_k per token.
    parts: the output widths of the projections fused into this one matmul (q, k, v; gate, up),
    which an eager implementation runs as separate matmuls; () for a single projection."""

    m: int
    k: int
    n: int
    experts: int | None = None
    top_k: int | None = None
    parts: tuple[int, ...] = ()


@dataclass(frozen=True)
class FusedQKVDims(MatmulDims):
    """The fused QKV projection: n = q_width + kv_width, K = n_kv_heads."""

    q_width: int = 0
    kv_width: int = 0
    n_kv_heads: int = 1


@dataclass(frozen=True)
class ContractionDims(Dims):
    """A weighted sum over residual streams or sources: m rows, macs_per_token MACs each."""

    m: int
    macs_per_token: int


@dataclass(frozen=True)
class AttentionDims(Dims):
    """softmax(Q Kᵀ) V: B sequences, T new queries each, over S keys (window-capped when set)."""

    batch: int
    new_tokens: int
    context: int
    n_heads: int
    n_kv_heads: int
    qk_dim: int
    v_dim: int
    window: int | None  # a sliding window, or a chunked layer's chunk: the tokens a layer keeps at most
    kv_width: int  # values one cached token costs in one layer: K·(d_k + d_v), or MLA's latent + rope key
    layer_kind: str  # global / local / chunked / linear / indexer (DeepSeek Sparse Attention's key cache)
    topk: int | None = None  # DeepSeek Sparse Attention: each query attends to at most topk keys (all are kept)
    # transformers' explicit eager attention, where the convention runs it (eager_fallback: soft-caps): its
    # passes over the scores (EAGER_*) and the bytes of one activation; 0: one fused attention kernel (SDPA,
    # FlashAttention).  eager_kernels and eager_traffic derive the rest.
    eager_passes: int = 0
    eager_width: int = 0
    # A linear layer's fixed state per sequence instead of a per-token cache: its recurrent
    # values (Gated DeltaNet: Hv × d_k × d_v, kept in STATE_DTYPE) and its conv's last inputs.
    state_values: int = 0
    conv_values: int = 0
    state_dtype: str | None = None  # the recurrent state's dtype the model asks engines for (spec StateDtype)
    shared: bool = False  # the layer reads an earlier layer's K/V (AttentionSpec.kv_shared_layers): no cache of its own
    # A compressed layer's entries (DeepSeek-V4's CSA / HCA): one cached entry of kv_width values per `stride` tokens,
    # context // stride of them; the query at position p sees the (p + 1) // stride entries closed by then
    stride: int = 1

    @property
    def chunked(self) -> bool:
        return self.layer_kind == "chunked"

    @property
    def eager_kernels(self) -> int:
        """Kernels of the eager path (0: one fused kernel): K and V repeated per query head (GQA), Q Kᵀ, the
        passes, the copies to fp32 and back (16-bit activations), softmax, P V, and the output's transposed
        copy (none for one query position, already contiguous)."""
        if not self.eager_passes:
            return 0
        cast = self.eager_width != FP32_BYTES
        return 2 * self.gqa + EAGER_MATMULS + self.eager_passes + 2 * cast + 1 + (self.new_tokens > 1)

    @property
    def gqa(self) -> bool:
        return self.n_heads != self.n_kv_heads


@dataclass(frozen=True)
class RowDims(Dims):
    """A row-wise op over [m, width]: norms (norm set), elementwise ops of `inputs` tensors.
    fn: the elementwise function a kernel runs (an activation name, "rope",
    "softcap"; "add" sums the inputs: adds, combines, stream mixes)."""

    m: int
    width: int
    inputs: int = 1
    norm: str | None = None
    fn: str = "add"

    def __post_init__(self):  # a misspelt name would silently run (and count) another kernel
        if self.norm not in NORM_KINDS:
            raise ValueError(f"norm kind {self.norm!r}; valid: {NORM_KINDS}")
        if self.fn not in ROW_FNS:
            raise ValueError(f"row function {self.fn!r}; valid: {sorted(ROW_FNS)}")


@dataclass(frozen=True)
class GatherDims(Dims):
    """m rows looked up in a [rows, width] table."""

    m: int
    rows: int
    width: int


@dataclass(frozen=True)
class CollectiveDims(Dims):
    """A collective over an [m, width] tensor across `ranks` ranks."""

    m: int
    width: int
    ranks: int
    pattern: str  # CollectivePattern


# Elementwise FLOPs per element.  Conventions, not measurements: they follow
# LLM-Viewer's per-element op counts (softmax 5: max, subtract, exp, sum,
# divide) and count each arithmetic step of the usual formula once.
RMSNORM_FLOPS = 4  # square, sum, scale by 1/rms, scale by weight
LAYERNORM_FLOPS = 6  # mean (sum), subtract, square, sum, scale, weight; +1 with bias
SOFTMAX_FLOPS = 5
SOFTCAP_FLOPS = 3  # divide by cap, tanh, multiply by cap
# transformers' eager_attention_forward over the scores, each pass reading and writing them: × scaling and
# + the mask, then / cap, tanh, × cap with a soft-cap (Gemma 2's).
EAGER_PASSES, EAGER_SOFTCAP_PASSES = 2, 3
EAGER_MATMULS = 2  # Q Kᵀ and P V; the eager path's other kernels are elementwise
# softmax(scores, dtype=torch.float32) on 16-bit scores copies them to fp32 first (torch's softmax: only fp16
# on CUDA has a fused half-to-float kernel), softmaxes in fp32, and .to(the query's dtype) copies back.
FP32_BYTES = 4
ROPE_FLOPS = 3  # x·cos + rotate(x)·sin per rotated element
# gelu: tanh approximation.  xielu: both branches and the select, as transformers computes it:
# α_p·x·x + β·x (4), (expm1(min(x, ε)) − x)·α_n + β·x (6), where (1).
ACTIVATION_FLOPS = {"relu": 1, "relu2": 2, "silu": 4, "gelu": 8, "xielu": 11}
GATE_PRODUCT_FLOPS = 1  # act(gate) × up in a gated FFN
NORM_KINDS = (None, "rmsnorm", "layernorm")  # RowDims.norm: None for elementwise rows
# RowDims.fn: an activation (gated when two inputs: act(x0) ⊙ x1), "sigmoid" (its gate: sigmoid(g) ⊙ y),
# "rope", "softcap", or "add" (a sum of the inputs; one input: a copy or a scale)
ROW_FNS = frozenset({*ACTIVATION_FLOPS, "sigmoid", "rope", "softcap", "add"})
_LABELS = {"kind": frozenset(get_args(OpKind)), "component": frozenset(get_args(Component)),
           "tp": frozenset(get_args(Sharding))}
SIGMOID_GATE_FLOPS = 5  # sigmoid(g) ⊙ y: neg, exp, add, div, then the product, per value


@dataclass(frozen=True)
class Op:
    name: str  # dotted like a module path: "layers.attn.qkv"
    kind: OpKind
    component: Component
    dims: Dims  # what a kernel needs to run this op
    count: int = 1  # executions per step
    params: int = 0  # parameters stored (all experts)
    active_params: int = 0  # parameters one token uses (top-k experts)
    bias_params: int = 0  # part of `params` that are biases (kept 16-bit when quantized)
    quantizable: bool = False  # a layer weight that 8/4-bit checkpoints quantize
    stored_dtype: str | None = None  # kept at this dtype whatever the weights' (mHC's fp32 coefficients)
    tp: Sharding = "split"
    flops: int = 0  # matmul / attention-contraction work (tensor cores)
    vector_flops: int = 0  # elementwise work
    weight_bytes: float = 0  # parameters read
    act_bytes: float = 0  # activations read + written
    kv_bytes: float = 0  # KV cache read + written
    comm_bytes: float = 0  # bytes ONE rank sends over the interconnect (collectives), per execution
    # The parameter tensors' shapes where the dims do not say them (training/tensors.py derives the rest)
    shapes: tuple[tuple[int, ...], ...] = ()
    # copies of the parameters the model stores, where fewer than its executions (layers run more than once
    # with the same weights: LoopSpec); None: one a execution
    stored: int | None = None
    # where one op (count 1) sums modules of different sizes (attention residuals: each sees its own sources), the
    # act_bytes of the largest of them, which is what an activation peak holds at once; None: act_bytes'
    peak_act_bytes: float | None = None

    @property
    def weight_copies(self) -> int:
        """How many times the model stores this op's parameters: `count`, unless its layers share weights."""
        return self.count if self.stored is None else self.stored

    def __post_init__(self):  # the labels decide sharding and grouping: a misspelt one must not pass as another
        if self.kind not in _LABELS["kind"] or self.component not in _LABELS["component"] \
                or self.tp not in _LABELS["tp"]:
            field_, valid = next((f, v) for f, v in _LABELS.items() if getattr(self, f) not in v)
            raise ValueError(f"op {self.name}: {field_} {getattr(self, field_)!r}; valid: {sorted(valid)}")

    def counted_flops(self, convention: FlopsConvention) -> int:
        return self.flops + (self.vector_flops if convention.count_vector else 0)


# ---- matmuls -----------------------------------------------------------------


def matmul(name: str, component: Component, wl: Workload, d_in: int, d_out: int, *, bias_width: int = 0,
           count: int = 1, tokens: int | None = None, quantizable: bool = True, weight_dtype: str | None = None,
           tp: Sharding = "split", fused_qkv: tuple[int, int, int] | None = None, parts: tuple[int, ...] = ()) -> Op:
    """y[m, d_out] = x[m, d_in] @ W[d_in, d_out] (+ b), m = tokens (default B·T).

    bias_width: how many of the d_out outputs have a bias (a fused QKV
    projection may bias only some of its parts).  fused_qkv: (q_width,
    kv_width, n_kv_heads) of a fused QKV projection, which shards by heads.  weight_dtype: the one
    dtype the architecture stores this weight in (mHC's fp32 coefficients), which no checkpoint
    quantizes."""
    m = wl.tokens if tokens is None else tokens
    quantizable = quantizable and weight_dtype is None
    bias_params = bias_width
    params = d_in * d_out + bias_params
    return Op(
        name, "matmul", component,
        FusedQKVDims(m, d_in, d_out, parts=parts, q_width=fused_qkv[0], kv_width=fused_qkv[1],
                     n_kv_heads=fused_qkv[2])
        if fused_qkv else MatmulDims(m, d_in, d_out, parts=parts), count,
        params=params, active_params=params, bias_params=bias_params, quantizable=quantizable, tp=tp,
        stored_dtype=weight_dtype, flops=2 * m * d_in * d_out,
        weight_bytes=stored_bytes(params, bias_params, quantizable, wl.weight_dtype, weight_dtype),
        act_bytes=nbytes(m * (d_in + d_out), wl.act_dtype),
    )


def contraction(name: str, component: Component, wl: Workload, macs_per_token: int, width: int, *,
                count: int = 1, params: int = 0, shapes: tuple[tuple[int, ...], ...] = (),
                tp: Sharding = "replicated") -> Op:
    """A weighted sum over streams or sources (hyper-connections, attention
    residuals; replicated on every rank) or a depthwise conv's taps (split by
    channels): no weight matrix, `macs_per_token` MACs, reads and writes
    `width` activations per token."""
    return Op(name, "matmul", component, ContractionDims(wl.tokens, macs_per_token), count,
              tp=tp, params=params, shapes=shapes, active_params=params, flops=2 * wl.tokens * macs_per_token,
              weight_bytes=nbytes(params, kept_dtype(wl.weight_dtype)),
              act_bytes=nbytes(wl.tokens * width, wl.act_dtype))


def expected_experts_touched(n_experts: int, top_k: int, tokens: int) -> float:
    """Distinct experts a step loads under uniform routing: E·(1 − (1 − k/E)^tokens)."""
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** tokens)


def expert_matmul(name: str, wl: Workload, d_in: int, d_out: int, n_experts: int, top_k: int, *,
                  bias: bool, count: int = 1, tp: Sharding = "split", parts: tuple[int, ...] = (),
                  component: Component = "experts", quantizable: bool = True) -> Op:
    """The same matmul in each of E experts; each token runs k of them (FFN experts, or JetMoE's attention
    experts: `component` attention).  quantizable false: tables no checkpoint format quantizes (Doge's
    product-key experts are embedding tables), kept at 16 bits."""
    per_expert = d_in * d_out + (d_out if bias else 0)
    routed = wl.tokens * top_k  # token-expert pairs
    touched = expected_experts_touched(n_experts, top_k, wl.tokens)
    return Op(
        name, "matmul", component,
        MatmulDims(routed, d_in, d_out, n_experts, top_k, parts), count,
        params=n_experts * per_expert, active_params=top_k * per_expert,
        bias_params=n_experts * d_out if bias else 0, quantizable=quantizable, tp=tp,
        flops=2 * routed * d_in * d_out,
        weight_bytes=nbytes(touched * d_in * d_out, wl.weight_dtype if quantizable else kept_dtype(wl.weight_dtype))
        + nbytes(touched * d_out if bias else 0, kept_dtype(wl.weight_dtype)),
        act_bytes=nbytes(routed * (d_in + d_out), wl.act_dtype),
    )


# ---- attention core ------------------------------------------------------------


def _chunk_prefix_pairs(n: int, chunk: int) -> int:
    """Σ over p < n of (p mod C) + 1: the causal pairs of n tokens attending within chunks of C."""
    r = n % chunk
    return n // chunk * (chunk * (chunk + 1) // 2) + r * (r + 1) // 2


def score_pairs(new_tokens: int, context: int, window: int | None, convention: FlopsConvention,
                chunked: bool = False) -> int:
    """Query-key pairs one sequence computes: T queries at the end of S keys.

    Causal: the query at position p sees min(p + 1, window) keys, summed over
    p = S−T … S−1 (T·S − T(T−1)/2 without a window); in a chunked layer it sees
    (p mod chunk) + 1.  Rectangle: T × S, or T × min(S, window) when windows (and
    chunks) are capped.  A window applied as a mask (masked_windows) costs the whole
    T × S rectangle once the context reaches the window (transformers' sdpa path builds the mask
    whenever kv_length >= sliding_window: masking_utils._ignore_causal_mask_sdpa).
    """
    t, s = new_tokens, context
    if convention.masked_windows and window is not None and t > 1 and window <= s:
        return t * s  # a prefill chunk under a mask; one decode query reads just the window's keys
    w = window if convention.cap_windows else None
    if convention.pairs == "rectangle":
        return t * (lesser(s, w) if w is not None else s)
    if chunked and w is not None:
        return _chunk_prefix_pairs(s, w) - _chunk_prefix_pairs(s - t, w)
    lo, hi = s - t + 1, s  # keys seen by the first and last query, before the window
    if w is None:
        return (lo + hi) * t // 2
    # Queries whose view the window does not cut yet (all T once w ≥ S) see lo, lo + 1, … keys;
    # the rest see w each.
    below = lesser(greater(w - lo, 0), t)
    return (lo + lo + below - 1) * below // 2 + (t - below) * w


def _closed_entries(n: int, stride: int, topk: int | None) -> int:
    """Σ over positions j = 1 … n of min(j // stride, topk): the compressed entries queries at positions 0 … n − 1
    see (topk caps each, a CSA indexer's selection).  Without the cap, with q = n // stride and r = n mod stride:
    stride · q(q − 1)/2 + q(r + 1); past j = topk · stride every query sees topk."""
    if topk is not None:
        cut = topk * stride - 1  # the last position whose entries stay below topk
        return _closed_entries(lesser(n, cut), stride, None) + topk * greater(n - cut, 0)
    q, r = n // stride, n % stride
    return stride * q * (q - 1) // 2 + q * (r + 1)


def entries_closed(new_tokens: int, context: int, stride: int) -> int:
    """Compressed entries (one per `stride` tokens) a step of T new tokens completes, ending at `context`."""
    return context // stride - (context - new_tokens) // stride


def entry_pairs(new_tokens: int, context: int, stride: int, topk: int | None, convention: FlopsConvention) -> int:
    """Query-entry pairs of one sequence in a compressed layer (AttentionDims.stride): causal, the entries each of
    the T queries may see (at most topk where an indexer selects); rectangle, all T × context // stride entries
    held, as an eager step scores them before the mask (topk caps them where windows are capped)."""
    t, s = new_tokens, context
    if convention.pairs == "rectangle" or convention.masked_windows and t > 1:
        held = s // stride
        return t * (lesser(held, topk) if topk is not None and convention.cap_windows else held)
    return _closed_entries(s, stride, topk) - _closed_entries(s - t, stride, topk)


def attention(name: str, wl: Workload, convention: FlopsConvention, *, n_heads: int, kv_heads: int,
              qk_dim: int, v_dim: int, kv_width: int, window: int | None, layer_kind: str,
              softcap: bool = False, count: int = 1, params: int = 0, topk: int | None = None,
              eager: bool = False, shared: bool = False, drafted: bool = False, stride: int = 1) -> Op:
    """softmax(Q Kᵀ) V for one layer: H heads of qk_dim, values of v_dim.

    kv_width is the cache's values per token (K·(d_k + d_v), or MLA's
    latent + rope part).  FLOPs: 2 per pair per dim, for QKᵀ and for PV.
    topk (DeepSeek Sparse Attention): each query attends to its topk selected
    keys, so its pairs are counted as a window of topk's (min(p + 1, topk)
    causal; the whole rectangle where windows are masks or not capped), while
    the cache keeps every token; a decode step reads topk keys.
    eager: the model runs this attention through transformers' explicit
    eager_attention_forward (SDPA has no soft-cap option): under a convention
    with eager_fallback it is counted so (_eager_attention).
    shared: the layer reads an earlier layer's cache and appends nothing (Gemma 4's KV sharing).
    drafted: a drafter's layer (DrafterSpec): each of the T queries reads all the keys the target holds in
    the layer it shares, S (a window's: min(S, window)), unmasked among them: T × that many pairs.
    stride: a compressed layer's entries, one per `stride` tokens (entry_pairs); a decode step reads the topk
    selected (every entry without an indexer), and the step appends the entries it closes.
    """
    b, t, s = wl.batch, wl.new_tokens, wl.context
    chunked = layer_kind == "chunked"
    if drafted:
        held = lesser(s, window) if window is not None else s
        pairs = b * t * held
    elif stride > 1:
        pairs = b * entry_pairs(t, s, stride, topk, convention)
    else:
        pairs = b * score_pairs(t, s, window if topk is None else topk, convention, chunked)
    masked = convention.masked_windows and t > 1  # a masked kernel reads every key
    # Keys any query of the step needs: the window before the first query, or its chunk so far.
    if drafted:
        keys_read = held
    elif stride > 1:
        keys_read = lesser(s // stride, topk) if t == 1 and topk is not None else s // stride
    elif topk is not None:
        keys_read = lesser(s, topk) if t == 1 else s  # a prefill's queries select among all keys
    elif window is None or masked:
        keys_read = s
    elif chunked:
        keys_read = lesser(s, (s - t) % window + t)
    else:
        keys_read = lesser(s, window + t - 1)
    dims = AttentionDims(b, t, s, n_heads, kv_heads, qk_dim, v_dim, window, kv_width, layer_kind, topk,
                         shared=shared, stride=stride)
    appended = entries_closed(t, s, stride) if stride > 1 else t * (not shared)  # entries (tokens) the step adds
    if eager and convention.eager_fallback and topk is None and not drafted:
        return _eager_attention(name, wl, dims, softcap, count, params)
    vector = pairs * n_heads * (SOFTMAX_FLOPS + (SOFTCAP_FLOPS if softcap else 0))
    return Op(
        name, "attention", "attention", dims, count,
        params=params, active_params=params,
        flops=2 * pairs * n_heads * (qk_dim + v_dim),
        vector_flops=vector,
        weight_bytes=nbytes(params, kept_dtype(wl.weight_dtype)),
        act_bytes=nbytes(wl.tokens * n_heads * (qk_dim + v_dim), wl.act_dtype),  # read Q, write O
        # read the cache, append T tokens (a shared layer's producer appended them)
        kv_bytes=nbytes(b * (keys_read + appended) * kv_width, wl.kv_dtype),
    )


def eager_keys(d: AttentionDims) -> int:
    """Keys an eager step's Q Kᵀ spans: every key held, the mask making it causal or windowed (a sliding
    layer's decode cache holds the window)."""
    return lesser(d.context, d.window) if d.new_tokens == 1 and d.window else d.context


def eager_traffic(d: AttentionDims) -> tuple[float, float]:
    """(bytes the two matmuls move, bytes the elementwise kernels move) in transformers' eager attention of
    `d` (eager_passes > 0), from its shape alone, so a tensor-parallel rank's share follows its heads.
    Per score (B·H·T × keys of them): Q Kᵀ writes it and P V reads it; each pass reads and writes it,
    the casts read and write it at both widths, softmax reads and writes it in fp32.  Beside the scores:
    repeat_kv reads the cache's K and V and writes them for every query head, which the matmuls read
    (without GQA they read the cache's); the mask (B·T × keys) is read once, broadcast over heads; Q is
    read and O written; the output is transposed and copied."""
    b, t, h, p, keys = d.batch, d.new_tokens, d.n_heads, d.eager_width, eager_keys(d)
    scores = b * h * t * keys
    cast = p != FP32_BYTES
    cache = b * d.n_kv_heads * keys * (d.qk_dim + d.v_dim) * p
    expanded = b * h * keys * (d.qk_dim + d.v_dim) * p
    matmuls = scores * 2 * p + b * t * h * (d.qk_dim + d.v_dim) * p + expanded  # without GQA: the cache's
    passes = (scores * (2 * p * d.eager_passes + 2 * cast * (p + FP32_BYTES) + 2 * FP32_BYTES)
              + d.gqa * (cache + expanded) + b * t * keys * p + (t > 1) * 2 * b * t * h * d.v_dim * p)
    return matmuls, passes


def _eager_attention(name: str, wl: Workload, dims: AttentionDims, softcap: bool, count: int, params: int) -> Op:
    """transformers' eager_attention_forward for one layer (eager_traffic, AttentionDims.eager_kernels),
    its activations at the activation dtype; the cache's K and V are the op's kv_bytes, read once."""
    passes = EAGER_PASSES + (EAGER_SOFTCAP_PASSES if softcap else 0)
    dims = replace(dims, eager_passes=passes, eager_width=round(nbytes(1, wl.act_dtype)))
    keys = eager_keys(dims)
    scores = dims.batch * dims.n_heads * dims.new_tokens * keys
    matmuls, passes_bytes = eager_traffic(dims)
    cache = dims.batch * dims.n_kv_heads * keys * (dims.qk_dim + dims.v_dim) * dims.eager_width
    return Op(
        name, "attention", "attention", dims, count,
        params=params, active_params=params,
        flops=2 * scores * (dims.qk_dim + dims.v_dim),
        vector_flops=scores * (SOFTMAX_FLOPS + (SOFTCAP_FLOPS if softcap else 0)),
        weight_bytes=nbytes(params, kept_dtype(wl.weight_dtype)),
        act_bytes=matmuls + passes_bytes - cache,
        kv_bytes=nbytes(dims.batch * (keys + dims.new_tokens * (not dims.shared)) * dims.kv_width, wl.kv_dtype),
    )


def sdpa_call(name: str, *, batch: int, q_len: int, kv_len: int, heads: int, kv_heads: int, head_dim: int,
              window: int | None, dtype: str = "bf16") -> Op:
    """One torch scaled_dot_product_attention call as `calibrate` times it and the rate set reads it back:
    q_len queries over kv_len keys (the causal tail), heads query heads over kv_heads K/V heads of
    head_dim, a sliding window where given, in the sdpa convention (a window is a mask in prefill)."""
    wl = Workload(batch=batch, new_tokens=q_len, context=kv_len, weight_dtype=dtype, act_dtype=dtype, kv_dtype=dtype)
    return attention(name, wl, CONVENTIONS["sdpa"], n_heads=heads, kv_heads=kv_heads, qk_dim=head_dim,
                     v_dim=head_dim, kv_width=2 * kv_heads * head_dim, window=window,
                     layer_kind="local" if window else "global")


# The recurrent state of a linear layer is kept in fp32: transformers' torch_chunk_gated_delta_rule
# computes and returns it in float32, and flash-linear-attention's kernels accumulate it in fp32.
STATE_DTYPE = "fp32"
# Gated DeltaNet's recurrent step, per value head and token, on the d_k × d_v state S (all elementwise,
# as transformers' torch_recurrent_gated_delta_rule runs it): decay S (1), read Sᵀk (mul, sum: 2),
# write k ⊗ δ (mul, add: 2), read Sᵀq (2).
DELTA_STEP_FLOPS = 7


def _sequence_state_bytes(state_values: int, conv_values: int, kv_dtype: str) -> float:
    """One sequence's fixed state in one linear layer: recurrent values in STATE_DTYPE, conv inputs at the cache type."""
    return nbytes(state_values, STATE_DTYPE) + nbytes(conv_values, kv_dtype)


def _linear_op(name: str, wl: Workload, count: int, *, heads: int, kv_heads: int, qk_dim: int, v_dim: int,
               state_values: int, conv_values: int, act_values: int, vector_flops: int, flops: int = 0,
               params: int = 0, state_dtype: str | None = None) -> Op:
    """The core of a linear layer, an attention-kind op so that its fixed state is cached like a KV
    cache: "heads" are what tensor parallelism splits (and the state with them); each step reads
    and writes the state of each of the B sequences."""
    b = wl.batch
    return Op(
        name, "attention", "linear",
        AttentionDims(b, wl.new_tokens, wl.context, heads, kv_heads, qk_dim, v_dim, None, 0, "linear",
                      state_values=state_values, conv_values=conv_values, state_dtype=state_dtype), count,
        params=params, active_params=params, flops=flops, vector_flops=vector_flops,
        weight_bytes=nbytes(params, kept_dtype(wl.weight_dtype)), act_bytes=nbytes(act_values, wl.act_dtype),
        kv_bytes=2 * b * _sequence_state_bytes(state_values, conv_values, wl.kv_dtype),
    )


def linear_attention(name: str, wl: Workload, *, n_heads: int, key_heads: int, key_dim: int, value_dim: int,
                     chunk: int, conv_values: int, count: int = 1, params: int = 0,
                     state_dtype: str | None = None) -> Op:
    """The gated delta rule (Yang et al. 2024) of one linear layer over B sequences of T new tokens.

    T > 1: the chunked form as transformers' torch_chunk_gated_delta_rule computes it, per
    sequence, value head and chunk of C tokens (the T tokens padded up to whole chunks): k_β Kᵀ
    and Q Kᵀ within the chunk (2 · 2C²d_k), the values against the state (K_cum S, Q S: 2 · 2C·d_k·d_v),
    the intra-chunk output (2C²d_v) and the state update (2C·d_k·d_v); its two triangular solves are
    not counted (FlopCounterMode counts no triangular_solve).  T = 1: the recurrent step,
    elementwise (DELTA_STEP_FLOPS per state value)."""
    b, t = wl.batch, wl.new_tokens
    dk, dv, c = key_dim, value_dim, chunk
    state = n_heads * dk * dv
    if t == 1:
        flops, vector = 0, b * DELTA_STEP_FLOPS * state
    else:
        flops, vector = b * n_heads * ceil_div(t, c) * (4 * c * c * dk + 2 * c * c * dv + 6 * c * dk * dv), 0
    return _linear_op(name, wl, count, heads=n_heads, kv_heads=key_heads, qk_dim=dk, v_dim=dv, state_values=state,
                      conv_values=conv_values, flops=flops, vector_flops=vector, params=params, state_dtype=state_dtype,
                      act_values=wl.tokens * (2 * key_heads * dk + 2 * n_heads * dv))  # read q, k, v; write out


def kimi_delta_attention(name: str, wl: Workload, convention: FlopsConvention, *, n_heads: int, head_dim: int,
                         chunk: int, conv_values: int, count: int = 1, params: int = 0) -> Op:
    """Kimi Delta Attention (KimiDeltaSpec) of one linear layer over B sequences of T new tokens: the
    gated delta rule with a decay per channel, H heads of d_k = d_v = d.

    T > 1: the chunked form as transformers' chunk_kimi_delta_attention computes it, per sequence, head
    and chunk of C tokens (the T tokens padded up to whole chunks): the solved C × C matrix times v_β and
    times k_β·exp(g) (2C²d each), the queries and the decayed keys against the state (2 · 2C·d²), the
    intra-chunk output (2C²d) and the state update (2C·d²).  Its two decayed C × C products, q·k and
    k_β·k, weigh each channel by its own decay, so transformers forms them elementwise (C·C·d products
    summed: FlopCounterMode sees none, and the "torch" convention counts them as vector FLOPs) where
    flash-linear-attention's chunk_kda runs them as matmuls (2 · 2C²d, counted by the other conventions).
    T = 1: the recurrent step, elementwise (DELTA_STEP_FLOPS per state value)."""
    b, t = wl.batch, wl.new_tokens
    d, c = head_dim, chunk
    state = n_heads * d * d
    if t == 1:
        flops, vector = 0, b * DELTA_STEP_FLOPS * state
    else:
        chunks = b * n_heads * ceil_div(t, c)
        flops, decayed = chunks * (6 * c * c * d + 6 * c * d * d), chunks * 4 * c * c * d
        flops, vector = (flops, decayed) if convention.counter_view else (flops + decayed, 0)
    return _linear_op(name, wl, count, heads=n_heads, kv_heads=n_heads, qk_dim=d, v_dim=d, state_values=state,
                      conv_values=conv_values, flops=flops, vector_flops=vector, params=params,
                      act_values=wl.tokens * 4 * n_heads * d)  # read q, k, v; write out


def matrix_lstm(name: str, wl: Workload, convention: FlopsConvention, *, n_heads: int, key_dim: int, value_dim: int,
                chunk: int, count: int = 1) -> Op:
    """xLSTM's mLSTM (MLSTMSpec) of one linear layer over B sequences of T new tokens, H heads with a d_k × d_v
    matrix memory C, a normaliser n and a max m each.

    As transformers' xLSTMBackend runs it in inference mode: T > 1 takes the floor(T / L) whole chunks of L
    tokens in the chunked form (per chunk and head: C's update Kᵀ V, 2L·d_k·d_v; Q Kᵀ, 2L²d_k; the queries
    against the chunk's start state, Q C, 2L·d_k·d_v, and Q n, 2L·d_k; the gated scores times V, 2L²d_v), then
    the T mod L tokens left, and a lone token (T = 1), by the recurrent step (per token and head: the update's
    outer product k vᵀ, 2·d_k·d_v; q C, 2·d_k·d_v; q n, 2·d_k; all bmm's, which FlopCounterMode counts).  The
    rectangle conventions count each chunk's whole L × L scores (what FlopCounterMode sees); the causal ones
    its L(L + 1)/2 pairs.  Elementwise (an estimate, in no total): the gates' decay matrix and its product
    with the scores (5 per pair), C's and n's decay and update, the division by the normaliser.  Its
    parameters: none (the gates' projections are matmuls)."""
    b, t = wl.batch, wl.new_tokens
    dk, dv, c = key_dim, value_dim, chunk
    chunks, steps = (t // c, t % c) if t > 1 else (0, 1)
    square = c * c if convention.pairs == "rectangle" else c * (c + 1) // 2
    per_chunk = 4 * c * dk * dv + 2 * square * (dk + dv) + 2 * c * dk
    per_step = 4 * dk * dv + 2 * dk
    flops = b * n_heads * (chunks * per_chunk + steps * per_step)
    vector = b * n_heads * (chunks * (5 * c * c + 2 * dk * dv + c * (2 * dk + dv)) + steps * (3 * dk * dv + 3 * dk + dv))
    return _linear_op(name, wl, count, heads=n_heads, kv_heads=n_heads, qk_dim=dk, v_dim=dv,
                      state_values=n_heads * (dk * dv + dk + 1), conv_values=0, flops=flops, vector_flops=vector,
                      act_values=wl.tokens * 2 * n_heads * (dk + dv))  # read q, k, v; write the output


# The RG-LRU per channel and token, beside its gates' matmuls: the gates' sigmoids (2 × 4), the decay
# a = exp(-8·r·softplus(Λ)) and a² (6), √(1 − a²) times the gated input (4), the update h = a·h + x (2).
RGLRU_CHANNEL_FLOPS = 20


def real_gated_lru(name: str, wl: Workload, *, width: int, conv_values: int, count: int = 1) -> Op:
    """Griffin's RG-LRU scan (RGLRUSpec) of one layer over B sequences of T new tokens: a diagonal linear
    recurrence over W channels, all elementwise (transformers' _rnn_scan loops over the tokens), RGLRU_CHANNEL_FLOPS
    a channel and token.  Its state: one value a channel (fp32).  Its parameter: the decay Λ, one a channel."""
    m = wl.tokens
    return _linear_op(name, wl, count, heads=width, kv_heads=width, qk_dim=1, v_dim=1, state_values=width,
                      conv_values=conv_values, vector_flops=RGLRU_CHANNEL_FLOPS * m * width, params=width,
                      act_values=m * 4 * width)  # x and the two gates in, h out


# RWKV-4's WKV per channel and token: e^(u+k) and e^k (with their max-subtraction), the numerator and denominator
# updates and the decay, the division: 14 operations, elementwise
WKV_CHANNEL_FLOPS = 14


def rwkv_wkv(name: str, wl: Workload, *, width: int, conv_values: int, count: int = 1) -> Op:
    """RWKV-4's WKV recurrence (RWKVSpec) of one layer over B sequences of T new tokens: a decay and a bonus a
    channel, all elementwise (transformers' CPU path loops over the tokens).  Its state: numerator, denominator
    and max a channel (fp32); its parameters: the decay and the bonus."""
    m = wl.tokens
    return _linear_op(name, wl, count, heads=width, kv_heads=width, qk_dim=1, v_dim=3, state_values=3 * width,
                      conv_values=conv_values, vector_flops=WKV_CHANNEL_FLOPS * m * width, params=2 * width,
                      act_values=m * 4 * width)  # k, v and the state in, wkv out


def lightning_attention(name: str, wl: Workload, convention: FlopsConvention, *, n_heads: int, head_dim: int,
                        block: int, count: int = 1) -> Op:
    """MiniMax-01's lightning attention (arXiv:2501.08313) of one layer over B sequences of T new
    tokens, H heads of d: no softmax, a per-head decay λ, and a d × d state S = Σ λ^(t−s) kᵀv.

    A prefill (no past: T = S) as transformers' MiniMaxLightningAttention runs it, in blocks of
    `block` tokens, the last one partial (b tokens): within the block, Q Kᵀ and its product with
    V (2 · 2·b²·d, the decay a mask on the b × b scores); against the past, (Q·λ) S (2·b·d²); the
    state update S·λ^b + (K·λ)ᵀ V (2·b·d²).  The rectangle conventions count the whole b × b block
    (what FlopCounterMode sees); the causal ones its b(b + 1)/2 pairs, what a causal kernel computes.
    A step after a past (decode, or a chunk): the recurrent form, per token S = λS + kᵀv and
    q S (2·d² each).  The decay products are elementwise.  Its parameters: none (λ is a buffer)."""
    b, t = wl.batch, wl.new_tokens
    d, state = head_dim, n_heads * head_dim * head_dim
    if wl.context > t:  # a cached state: token by token
        flops, vector = 4 * b * t * state, 2 * b * t * state  # decay and add on S
    else:
        full, last = t // block, t % block  # whole blocks, then the partial one
        square = full * block * block + last * last  # Σ b² over the blocks
        pairs = square if convention.pairs == "rectangle" else (square + t) // 2  # Σ b(b + 1)/2
        blocks = full + (last > 0)
        flops = b * n_heads * (4 * pairs * d + 4 * t * d * d)
        # the b × b decay mask, q·λ and k·λ, inter + intra, and S·λ^b + update once a block
        vector = b * n_heads * (pairs + 3 * t * d + 2 * blocks * d * d)
    return _linear_op(name, wl, count, heads=n_heads, kv_heads=n_heads, qk_dim=d, v_dim=d, state_values=state,
                      conv_values=0, flops=flops, vector_flops=vector,
                      act_values=wl.tokens * 4 * n_heads * d)  # read q, k, v; write the output


# Mamba's selective scan per channel, state value and token, besides the readout y = S·C: discretise
# (Δ·A, exp; Δ·B, times x: 4), update S = Ā·S + B̄x (2); per channel, D·x skip (2) and the gate
# y·silu(z) (ACTIVATION_FLOPS["silu"] + 1).
SCAN_STATE_FLOPS = 6
SCAN_CHANNEL_FLOPS = 2 + 5


def selective_scan(name: str, wl: Workload, *, channels: int, d_state: int, conv_values: int, count: int = 1) -> Op:
    """Mamba's selective scan over E channels with N state values each, for B sequences of T new
    tokens.  The readout y_t = S_t · C_t is a [E, N] × [N] product per token (2·E·N FLOPs, a matmul
    in transformers' mamba_selective_scan and in its decode step); the rest is elementwise.  Its
    parameters: A_log [E, N] and D [E]; channels are the "heads"."""
    m, state = wl.tokens, channels * d_state
    return _linear_op(name, wl, count, heads=channels, kv_heads=channels, qk_dim=d_state, v_dim=1, state_values=state,
                      conv_values=conv_values, flops=2 * m * state,
                      vector_flops=m * (SCAN_STATE_FLOPS * state + SCAN_CHANNEL_FLOPS * channels),
                      params=state + channels, act_values=m * (4 * channels + 2 * d_state))  # x, Δ, z, B, C in; y out


def state_space_duality(name: str, wl: Workload, convention: FlopsConvention, *, n_heads: int, head_dim: int,
                        d_state: int, chunk: int, conv_values: int, count: int = 1,
                        state_dtype: str | None = None) -> Op:
    """Mamba-2's SSD scan (Dao & Gu 2024) of one layer over B sequences of T new tokens, H heads of
    P channels with N state values (B and C repeated from their groups to every head).

    T > 1: the chunked form of transformers' mamba2_chunk_scan, per sequence and head, over c
    chunks of L tokens (the T tokens padded to whole chunks): C·Bᵀ within each chunk (2L²N), its
    product with x (2L²P), each chunk's state (2L·P·N) and its read by C (2L·P·N); then the chunk
    states are passed along: transformers does it as one einsum over every pair of the c + 1 chunk
    states (2(c + 1)²·P·N, what FlopCounterMode sees: counted under the rectangle conventions),
    a kernel as a sequential pass (c·2·P·N elementwise: the causal ones).  T = 1: the recurrent step,
    its readout S·C a bmm (2·P·N per head), the rest elementwise.  Parameters: dt_bias, A_log and D
    per head.  Besides, D·x per channel (mul, add); the gate silu(z) sits in the gated norm after it."""
    b, t, m = wl.batch, wl.new_tokens, wl.tokens
    P, N, L = head_dim, d_state, chunk
    state = n_heads * P * N
    if t == 1:
        flops, vector = 2 * b * state, b * SCAN_STATE_FLOPS * state
    else:
        c = ceil_div(t, L)
        flops = b * n_heads * c * (2 * L * L * N + 2 * L * L * P + 4 * L * P * N)
        passing = 2 * P * N * n_heads * b
        if convention.pairs == "rectangle":
            flops, vector = flops + passing * (c + 1) * (c + 1), 0
        else:
            vector = passing * c
    return _linear_op(name, wl, count, heads=n_heads, kv_heads=n_heads, qk_dim=N, v_dim=P, state_values=state,
                      conv_values=conv_values, flops=flops, vector_flops=vector + 2 * m * n_heads * P,
                      params=3 * n_heads, act_values=m * (2 * n_heads * P + n_heads),  # x and Δ in, y out
                      state_dtype=state_dtype)


def conv_state(name: str, wl: Workload, width: int, flops_per_element: int, *, conv_values: int,
               count: int = 1) -> Op:
    """A linear layer whose only state is its conv's last inputs (LFM2's short conv): elementwise
    gating over `width` channels (the "heads")."""
    return _linear_op(name, wl, count, heads=width, kv_heads=width, qk_dim=1, v_dim=1, state_values=0,
                      conv_values=conv_values, vector_flops=flops_per_element * wl.tokens * width,
                      act_values=6 * wl.tokens * width)  # B ⊙ x: B, x in, Bx out; C ⊙ conv: C, conv in, y out


def conv_inputs(name: str, wl: Workload, channels: int, *, conv_values: int, count: int = 1) -> Op:
    """The state of short convs inside attention layers (Inkling's): each layer's last conv inputs for every
    sequence, a fixed state beside its KV cache that each step reads and writes; the convs' work is their own
    ops.  Split under TP like `channels` (the layer's K·(d_k + d_v))."""
    op = _linear_op(name, wl, count, heads=channels, kv_heads=channels, qk_dim=1, v_dim=1, state_values=0,
                    conv_values=conv_values, vector_flops=0, act_values=0)
    return replace(op, component="attention")  # the attention layer's own state (no parameters)


def state_bytes(op: Op, batch: int, kv_dtype: str) -> float:
    """The fixed state a linear layer keeps for `batch` sequences (0 for attention layers)."""
    return batch * _sequence_state_bytes(op.dims.state_values, op.dims.conv_values, kv_dtype)


def cached_tokens(context: int, window: int | None, stride: int = 1) -> int:
    """Tokens (a compressed layer's entries) one sequence keeps in a layer: a sliding-window layer stops at the
    window; a compressed one keeps an entry per `stride` tokens."""
    return (lesser(context, window) if window is not None else context) // stride


def cache_bytes(op: Op, context: int, batch: int, kv_dtype: str) -> float:
    """KV cache one attention op keeps for `batch` sequences of `context` tokens (none where its layers
    read an earlier layer's)."""
    if op.dims.shared:
        return 0
    tokens = cached_tokens(context, op.dims.window, op.dims.stride)
    return nbytes(batch * tokens * op.dims.kv_width, kv_dtype)


def cache_token_bytes(op: Op, bytes_per_value: float, share: float) -> float:
    """KV-cache bytes one cached token costs in ONE layer of an attention op:
    kv_width values (K·(d_k + d_v), or MLA's latent + shared rope key) at
    `bytes_per_value`, times the `share` of them one GPU keeps (for example
    Op.kv_heads_per_rank under tensor parallelism); a compressed layer's, one entry (of `stride` tokens)."""
    return op.dims.kv_width * share * bytes_per_value


# ---- elementwise, norms, gathers -------------------------------------------------


def norm(name: str, wl: Workload, width: int, kind: str, bias: bool, *, weight: bool = True, count: int = 1,
         tokens: int | None = None, component: Component = "norms", tp: Sharding = "replicated") -> Op:
    """A norm over rows of `width`: whole on every rank ("replicated", the residual stream's norms), or
    split with the channels it normalises (a linear mixer's norm over its sharded inner width)."""
    if kind is None:
        raise ValueError(f"op {name}: a norm needs its kind; valid: {NORM_KINDS[1:]}")
    if kind == "l2":  # x·rsqrt(Σx² + ε), no scale (nGPT): a weightless RMSNorm's kernel and cost
        kind, weight = "rmsnorm", False
    m = wl.tokens if tokens is None else tokens
    params = width * (int(weight) + int(bias))
    # Without a weight the final scale is not done: one FLOP less per element.
    per_element = (RMSNORM_FLOPS if kind == "rmsnorm" else LAYERNORM_FLOPS + int(bias)) - int(not weight)
    return Op(name, "norm", component, RowDims(m, width, norm=kind), count, tp=tp,
              params=params, active_params=params, bias_params=width if bias else 0,
              vector_flops=per_element * m * width,
              weight_bytes=nbytes(params, kept_dtype(wl.weight_dtype)), act_bytes=nbytes(2 * m * width, wl.act_dtype))


def elementwise(name: str, component: Component, wl: Workload, width: int, flops_per_element: int, *,
                inputs: int = 1, count: int = 1, params: int = 0, tokens: int | None = None,
                tp: Sharding = "replicated", fn: str = "add") -> Op:
    """`inputs` tensors of [m, width] in, one out."""
    m = wl.tokens if tokens is None else tokens
    return Op(name, "elementwise", component, RowDims(m, width, inputs, fn=fn), count, tp=tp,
              params=params, active_params=params, vector_flops=flops_per_element * m * width,
              weight_bytes=nbytes(params, kept_dtype(wl.weight_dtype)),
              act_bytes=nbytes((inputs + 1) * m * width, wl.act_dtype))


def gather(name: str, component: Component, wl: Workload, rows: int, width: int, *,
           tp: Sharding = "split") -> Op:
    """Embedding lookup: B·T rows of a [rows, width] table; no FLOPs.  Under TP a
    token table is vocab-parallel (split rows, then an all-reduce)."""
    m = wl.tokens
    return Op(name, "gather", component, GatherDims(m, rows, width), 1, tp=tp,
              params=rows * width, active_params=rows * width,
              weight_bytes=nbytes(lesser(m, rows) * width, kept_dtype(wl.weight_dtype)),  # only the rows looked up
              act_bytes=nbytes(m * width, wl.act_dtype))


# ---- collectives ---------------------------------------------------------------------

CollectivePattern = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"]


def collective(name: str, component: Component, wl: Workload, width: int, ranks: int,
               pattern: CollectivePattern, *, count: int = 1, tokens: int | None = None,
               dtype: str | None = None) -> Op:
    """A ring collective over an [m, width] tensor (m = tokens, default B·T; dtype
    default the activations') across `ranks` ranks.

    Bytes one rank sends, t = ranks, N = the whole tensor's bytes (NCCL's
    ring algorithms; the nccl-tests "Performance" notes, doc/PERFORMANCE.md,
    define the bus bandwidth from the same volumes: all-reduce busBw = algBw ×
    2(n−1)/n, all-gather and reduce-scatter busBw = algBw × (n−1)/n):
      all_reduce: reduce-scatter then all-gather, each t−1 steps of an N/t
                  chunk: 2(t−1)/t × N;
      all_gather: t−1 steps of an N/t shard: (t−1)/t × N (N: the gathered output);
      reduce_scatter: t−1 steps of an N/t chunk: (t−1)/t × N (N: the whole input);
      all_to_all: every rank keeps 1/t of its N and sends the rest: (t−1)/t × N;
      send_recv: a point-to-point send of the whole N (pipeline stages, rings).
    vector_flops: the reduction's additions, n−1 per element (same page)
    spread over the t ranks (each adds t−1 received chunks of m·width/t
    values into its own chunk in the reduce-scatter): (t−1)/t × m·width.
    act_bytes (local memory): what a rank reads from its own buffer and writes
    to it once: an all-reduce reads its whole [m, width] input and writes the
    whole result (2N); an all-gather reads its own [m, width/t] shard and
    writes the whole [m, width] output ((1 + 1/t)·N), a reduce-scatter the
    reverse; an all-to-all and a send read and write N.  The chunks passing
    through the ring are counted in comm_bytes, not here."""
    m = wl.tokens if tokens is None else tokens
    tensor = nbytes(m * width, dtype or wl.act_dtype)
    rest = (ranks - 1) / ranks  # the share of a tensor that leaves the rank
    if pattern == "all_reduce":
        sent, adds, local = 2 * rest * tensor, rest * m * width, 2 * tensor
    elif pattern in ("all_gather", "reduce_scatter"):
        sent, local = rest * tensor, tensor + tensor / ranks
        adds = rest * m * width if pattern == "reduce_scatter" else 0
    elif pattern == "all_to_all":
        sent, adds, local = rest * tensor, 0, 2 * tensor
    elif pattern == "send_recv":
        sent, adds, local = tensor, 0, 2 * tensor
    else:
        raise ValueError(f"unknown collective pattern {pattern!r}")
    return Op(name, "collective", component, CollectiveDims(m, width, ranks, pattern), count, tp="replicated",
              vector_flops=adds, act_bytes=local, comm_bytes=sent)
