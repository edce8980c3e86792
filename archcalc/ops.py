"""The Op record and its constructors: the only place with FLOP and byte formulas.

Every number archcalc prints is a sum or a function over a list of Ops
(layers.model_ops builds it).  An Op describes ONE execution of a kernel;
`count` says how many times it runs per step (the layers that share it).

Units: FLOPs = 2 × multiply-accumulates; bytes are bytes.  Letters: B batch,
T new tokens per sequence, S context (keys after the step), D d_model,
H query heads, K KV heads, d_k / d_v head dims, E experts, k top-k.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .conventions import FlopsConvention
from .dtypes import nbytes
from .workload import Workload

OpKind = Literal["matmul", "attention", "norm", "elementwise", "gather"]
# How tensor parallelism (t ranks) places an op's parameters and work:
# split: 1/t per rank (column/row-parallel linears, vocab-parallel embedding,
# attention heads, experts); replicated: whole on every rank (norms, routers,
# MLA's down-projections, residual-stream mixing); qkv: query heads split,
# KV heads split but at least one per rank (replicated when t > K, as vLLM does).
Sharding = Literal["split", "replicated", "qkv"]
Component = Literal["embedding", "position", "attention", "ffn", "experts", "router", "norms", "residual", "lm_head"]

# Elementwise FLOPs per element.  Conventions, not measurements: they follow
# LLM-Viewer's per-element op counts (softmax 5: max, subtract, exp, sum,
# divide) and count each arithmetic step of the usual formula once.
RMSNORM_FLOPS = 4  # square, sum, scale by 1/rms, scale by weight
LAYERNORM_FLOPS = 6  # mean (sum), subtract, square, sum, scale, weight; +1 with bias
SOFTMAX_FLOPS = 5
SOFTCAP_FLOPS = 3  # divide by cap, tanh, multiply by cap
ROPE_FLOPS = 3  # x·cos + rotate(x)·sin per rotated element
ACTIVATION_FLOPS = {"relu": 1, "relu2": 2, "silu": 4, "gelu": 8}  # gelu: tanh approximation
GATE_PRODUCT_FLOPS = 1  # act(gate) × up in a gated FFN


@dataclass(frozen=True)
class Op:
    name: str  # dotted like a module path: "layers.attn.qkv"
    kind: OpKind
    component: Component
    dims: dict = field(default_factory=dict, hash=False)  # what a kernel needs to run this op
    count: int = 1  # executions per step
    params: int = 0  # parameters stored (all experts)
    active_params: int = 0  # parameters one token uses (top-k experts)
    bias_params: int = 0  # part of `params` that are biases (kept 16-bit when quantized)
    quantizable: bool = False  # a layer weight that 8/4-bit checkpoints quantize
    tp: Sharding = "split"
    flops: int = 0  # matmul / attention-contraction work (tensor cores)
    vector_flops: int = 0  # elementwise work
    weight_bytes: float = 0  # parameters read
    act_bytes: float = 0  # activations read + written
    kv_bytes: float = 0  # KV cache read + written

    def counted_flops(self, convention: FlopsConvention) -> int:
        return self.flops + (self.vector_flops if convention.count_vector else 0)

    def rank_fraction(self, tp: int) -> float:
        """Share of this op's parameters (and work) one of `tp` ranks holds."""
        if self.tp == "replicated" or tp == 1:
            return 1.0
        if self.tp == "qkv":  # fused Q, K, V: H/t query heads, max(1, K/t) KV heads per rank
            q, kv, heads = self.dims["q_width"], self.dims["kv_width"], self.dims["kv_heads"]
            return (q / tp + kv * max(1, heads // tp) / heads) / (q + kv)
        return 1.0 / tp

    def kv_heads_per_rank(self, tp: int) -> float:
        """Share of an attention op's cache one rank holds: max(1, K/t) of K
        heads; MLA's single latent is replicated on every rank."""
        heads = self.dims["K"]
        return max(1, heads // tp) / heads

    def rank_act_bytes(self, tp: int) -> float:
        """Activations one of `tp` ranks reads and writes for this op.

        A split matmul shards its wider side, as Megatron pairs them (column-
        parallel when the output is wider: QKV, up, lm_head; row-parallel when
        the input is: o, down); the fused QKV shards its output by
        rank_fraction.  An embedding gather ends in an all-reduce, so every rank
        holds the whole [m, D] output.  Other split ops (attention heads,
        activations) shard everything; replicated ops nothing."""
        if tp == 1 or self.tp == "replicated" or self.kind == "gather":
            return self.act_bytes
        d = self.dims
        if self.kind == "matmul" and "k" in d and "n" in d:
            k, n = d["k"], d["n"]
            if self.tp == "qkv":
                return self.act_bytes * (k + n * self.rank_fraction(tp)) / (k + n)
            return self.act_bytes * (min(k, n) + max(k, n) / tp) / (k + n)
        return self.act_bytes / tp


# ---- matmuls -----------------------------------------------------------------


def matmul(name: str, component: Component, wl: Workload, d_in: int, d_out: int, *, bias_width: int = 0,
           count: int = 1, tokens: int | None = None, quantizable: bool = True, weight_dtype: str | None = None,
           tp: Sharding = "split", extra_dims: dict | None = None) -> Op:
    """y[m, d_out] = x[m, d_in] @ W[d_in, d_out] (+ b), m = tokens (default B·T).

    bias_width: how many of the d_out outputs have a bias (a fused QKV
    projection may bias only some of its parts)."""
    m = wl.tokens if tokens is None else tokens
    bias_params = bias_width
    params = d_in * d_out + bias_params
    return Op(
        name, "matmul", component, {"m": m, "k": d_in, "n": d_out, **(extra_dims or {})}, count,
        params=params, active_params=params, bias_params=bias_params, quantizable=quantizable, tp=tp,
        flops=2 * m * d_in * d_out,
        weight_bytes=nbytes(params, weight_dtype or wl.weight_dtype),
        act_bytes=nbytes(m * (d_in + d_out), wl.act_dtype),
    )


def contraction(name: str, component: Component, wl: Workload, macs_per_token: int, width: int, *,
                count: int = 1, params: int = 0) -> Op:
    """A weighted sum over streams or sources (hyper-connections, attention
    residuals): no weight matrix, `macs_per_token` MACs, reads and writes
    `width` activations per token."""
    return Op(name, "matmul", component, {"m": wl.tokens, "macs_per_token": macs_per_token}, count,
              tp="replicated", params=params, active_params=params, flops=2 * wl.tokens * macs_per_token,
              weight_bytes=nbytes(params, wl.weight_dtype), act_bytes=nbytes(wl.tokens * width, wl.act_dtype))


def expected_experts_touched(n_experts: int, top_k: int, tokens: int) -> float:
    """Distinct experts a step loads under uniform routing: E·(1 − (1 − k/E)^tokens)."""
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** tokens)


def expert_matmul(name: str, wl: Workload, d_in: int, d_out: int, n_experts: int, top_k: int, *,
                  bias: bool, count: int = 1) -> Op:
    """The same matmul in each of E experts; each token runs k of them."""
    per_expert = d_in * d_out + (d_out if bias else 0)
    routed = wl.tokens * top_k  # token-expert pairs
    touched = expected_experts_touched(n_experts, top_k, wl.tokens)
    return Op(
        name, "matmul", "experts",
        {"m": routed, "k": d_in, "n": d_out, "experts": n_experts, "top_k": top_k}, count,
        params=n_experts * per_expert, active_params=top_k * per_expert,
        bias_params=n_experts * d_out if bias else 0, quantizable=True,
        flops=2 * routed * d_in * d_out,
        weight_bytes=nbytes(touched * per_expert, wl.weight_dtype),
        act_bytes=nbytes(routed * (d_in + d_out), wl.act_dtype),
    )


# ---- attention core ------------------------------------------------------------


def score_pairs(new_tokens: int, context: int, window: int | None, convention: FlopsConvention) -> int:
    """Query-key pairs one sequence computes: T queries at the end of S keys.

    Causal: the query at position p sees min(p + 1, window) keys, summed over
    p = S−T … S−1 (T·S − T(T−1)/2 without a window).  Rectangle: T × S, or
    T × min(S, window) when windows are capped.
    """
    t, s = new_tokens, context
    w = window if (window and convention.cap_windows) else None
    if convention.pairs == "rectangle":
        return t * (min(s, w) if w else s)
    lo, hi = s - t + 1, s  # keys seen by the first and last query, before the window
    if w is None or w >= hi:
        return (lo + hi) * t // 2
    below = max(0, w - lo)  # queries whose view is not yet cut by the window
    return (lo + lo + below - 1) * below // 2 + (t - below) * w


def attention(name: str, wl: Workload, convention: FlopsConvention, *, n_heads: int, kv_heads: int,
              qk_dim: int, v_dim: int, kv_width: int, window: int | None, layer_kind: str,
              softcap: bool = False, count: int = 1, params: int = 0) -> Op:
    """softmax(Q Kᵀ) V for one layer: H heads of qk_dim, values of v_dim.

    kv_width is the cache's values per token (K·(d_k + d_v), or MLA's
    latent + rope part).  FLOPs: 2 per pair per dim, for QKᵀ and for PV.
    """
    b, t, s = wl.batch, wl.new_tokens, wl.context
    pairs = b * score_pairs(t, s, window, convention)
    keys_read = min(s, window + t - 1) if window else s  # keys any query of the step needs
    vector = pairs * n_heads * (SOFTMAX_FLOPS + (SOFTCAP_FLOPS if softcap else 0))
    return Op(
        name, "attention", "attention",
        {"B": b, "T": t, "S": s, "H": n_heads, "K": kv_heads, "d_k": qk_dim, "d_v": v_dim,
         "window": window, "kv_width": kv_width, "layer_kind": layer_kind}, count,
        params=params, active_params=params,
        flops=2 * pairs * n_heads * (qk_dim + v_dim),
        vector_flops=vector,
        weight_bytes=nbytes(params, wl.weight_dtype),
        act_bytes=nbytes(wl.tokens * n_heads * (qk_dim + v_dim), wl.act_dtype),  # read Q, write O
        kv_bytes=nbytes(b * (keys_read + t) * kv_width, wl.kv_dtype),  # read the cache, append T tokens
    )


def cached_tokens(context: int, window: int | None) -> int:
    """Tokens one sequence keeps in a layer: a sliding-window layer stops at the window."""
    return min(context, window) if window else context


def cache_bytes(op: Op, context: int, batch: int, kv_dtype: str, *, cap_window: bool = True) -> float:
    """KV cache one attention op keeps for `batch` sequences of `context` tokens."""
    tokens = cached_tokens(context, op.dims["window"] if cap_window else None)
    return nbytes(batch * tokens * op.dims["kv_width"], kv_dtype)


def cache_token_bytes(op: Op, bytes_per_value: float, share: float = 1.0) -> float:
    """KV-cache bytes one cached token costs in ONE layer of an attention op:
    kv_width values (K·(d_k + d_v), or MLA's latent + shared rope key) at
    `bytes_per_value`, times the `share` of them one GPU keeps (for example
    Op.kv_heads_per_rank under tensor parallelism)."""
    return op.dims["kv_width"] * share * bytes_per_value


# ---- elementwise, norms, gathers -------------------------------------------------


def norm(name: str, wl: Workload, width: int, kind: str, bias: bool, *, count: int = 1,
         tokens: int | None = None, component: Component = "norms") -> Op:
    m = wl.tokens if tokens is None else tokens
    params = width * (2 if bias else 1)
    per_element = RMSNORM_FLOPS if kind == "rmsnorm" else LAYERNORM_FLOPS + (1 if bias else 0)
    return Op(name, "norm", component, {"m": m, "width": width, "norm": kind}, count, tp="replicated",
              params=params, active_params=params, bias_params=width if bias else 0,
              vector_flops=per_element * m * width,
              weight_bytes=nbytes(params, wl.weight_dtype), act_bytes=nbytes(2 * m * width, wl.act_dtype))


def elementwise(name: str, component: Component, wl: Workload, width: int, flops_per_element: int, *,
                inputs: int = 1, count: int = 1, params: int = 0, tokens: int | None = None,
                tp: Sharding = "replicated") -> Op:
    """`inputs` tensors of [m, width] in, one out."""
    m = wl.tokens if tokens is None else tokens
    return Op(name, "elementwise", component, {"m": m, "width": width, "inputs": inputs}, count, tp=tp,
              params=params, active_params=params, vector_flops=flops_per_element * m * width,
              weight_bytes=nbytes(params, wl.weight_dtype),
              act_bytes=nbytes((inputs + 1) * m * width, wl.act_dtype))


def gather(name: str, component: Component, wl: Workload, rows: int, width: int) -> Op:
    """Embedding lookup: B·T rows of a [rows, width] table; no FLOPs."""
    m = wl.tokens
    return Op(name, "gather", component, {"m": m, "rows": rows, "width": width}, 1,
              params=rows * width, active_params=rows * width,
              weight_bytes=nbytes(min(m, rows) * width, wl.weight_dtype),  # only the rows looked up
              act_bytes=nbytes(m * width, wl.act_dtype))
