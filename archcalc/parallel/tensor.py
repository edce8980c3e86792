"""Tensor parallelism over t ranks: the share of an op's parameters, work,
cache and activations one rank holds.

Each Op records how it shards (`Op.tp`, see ops/op.py: Sharding); this module
is the one policy that turns that label into fractions.  Megatron-style
pairing: column-parallel linears ("split") split their output (QKV, up,
lm_head), row-parallel ones ("row") their input (o, down); attention splits
by heads; a vocab-parallel embedding splits its rows and ends in an all-reduce.
rank_op turns a whole Op into the one a rank runs; the collectives that join
the ranks are parallel/collectives.py's.
"""

from __future__ import annotations

from dataclasses import replace

from archcalc.ops.arrays import ceil_div, greater, select
from archcalc.ops.op import AttentionDims, Dims, FusedQKVDims, GatherDims, MatmulDims, Op, RowDims
from archcalc.spec.model import ModelSpec


def weight_share(op: Op, tp: int) -> float:
    """Share of this op's parameters (and work) one of `tp` ranks holds."""
    if op.tp == "replicated" or tp == 1:
        return 1.0
    if op.tp == "qkv":  # fused Q, K, V: H/t query heads, max(1, K/t) KV heads per rank (vLLM replicates K < t)
        d: FusedQKVDims = op.dims
        q, kv, heads = d.q_width, d.kv_width, d.n_kv_heads
        return (q / tp + kv * greater(1, heads // tp) / heads) / (q + kv)
    return 1.0 / tp


def kv_share(op: Op, tp: int) -> float:
    """Share of an attention op's cache one rank holds: max(1, K/t) of K heads.
    MLA's single latent (K = 1) is therefore whole on every rank."""
    heads = op.dims.n_kv_heads
    return greater(1, heads // tp) / heads


def act_bytes_per_rank(op: Op, tp: int) -> float:
    """Activations one of `tp` ranks reads and writes for this op.

    Megatron's pairing: a column-parallel matmul (split) reads its whole
    [m, k] input and writes [m, n/t]; the fused QKV writes its weight_share of
    the output; a row-parallel one (row) reads [m, k/t] and writes the whole
    [m, n] partial sum, whichever side is wider.  An embedding gather ends in
    an all-reduce, so every rank holds the whole [m, D] output.  Other split
    ops (attention heads, activations) shard everything; replicated ops
    nothing."""
    if tp == 1 or op.tp == "replicated" or op.kind == "gather":
        return op.act_bytes
    d = op.dims
    if isinstance(d, MatmulDims):
        k, n = d.k, d.n
        if op.tp == "qkv":
            return op.act_bytes * (k + n * weight_share(op, tp)) / (k + n)
        if op.tp == "row":
            return op.act_bytes * (k / tp + n) / (k + n)
        return op.act_bytes * (k + n / tp) / (k + n)
    return op.act_bytes / tp


def rank_dims(op: Op, tp: int) -> Dims:
    """The shape one of `tp` ranks runs this op at, for a kernel runner.

    column-parallel matmul (split): n/t; row-parallel (row): k/t; fused QKV:
    H/t query heads and max(1, K/t) KV heads (q_width, kv_width, n follow);
    attention: H/t heads, max(1, K/t) KV heads, kv_width of those heads (MLA's
    one latent stays whole); split elementwise ops: width/t; vocab-parallel
    gather: rows/t.  A width t does not divide is rounded up (the widest rank,
    the one the step waits for).  Replicated ops keep their dims."""
    d = op.dims
    if tp == 1 or op.tp == "replicated":
        return d
    if isinstance(d, FusedQKVDims):
        heads = greater(1, d.n_kv_heads // tp)
        q, kv = ceil_div(d.q_width, tp), d.kv_width * heads // d.n_kv_heads
        parts = (q, *(w * heads // d.n_kv_heads for w in d.parts[1:])) if d.parts else ()
        return replace(d, n=q + kv, q_width=q, kv_width=kv, n_kv_heads=heads, parts=parts)
    if isinstance(d, MatmulDims):
        if op.tp == "row":
            return replace(d, k=ceil_div(d.k, tp))
        return replace(d, n=ceil_div(d.n, tp), parts=tuple(ceil_div(w, tp) for w in d.parts))
    if isinstance(d, AttentionDims):
        heads = greater(1, d.n_kv_heads // tp)
        return replace(d, n_heads=ceil_div(d.n_heads, tp), n_kv_heads=heads,
                       kv_width=d.kv_width * heads // d.n_kv_heads)
    if isinstance(d, RowDims):
        return replace(d, width=ceil_div(d.width, tp))
    if isinstance(d, GatherDims):
        return replace(d, rows=ceil_div(d.rows, tp))
    return d


def rank_op(op: Op, tp: int) -> Op:
    """The op one of `tp` ranks runs: its work, weights and cache times this
    module's shares, its activations act_bytes_per_rank, its dims rank_dims.

    flops, vector_flops, weight_bytes and params (active and bias parts too) ×
    weight_share (attention cores: 1/t, split by heads); kv_bytes × kv_share;
    name, count and comm_bytes unchanged.  tp == 1, or a replicated op: the op
    itself.  The collectives joining the ranks are not here
    (parallel/collectives.py: tp_ops)."""
    if tp == 1 or op.tp == "replicated":
        return op
    share = weight_share(op, tp)
    return replace(
        op, dims=rank_dims(op, tp),
        params=op.params * share, active_params=op.active_params * share, bias_params=op.bias_params * share,
        flops=op.flops * share, vector_flops=op.vector_flops * share, weight_bytes=op.weight_bytes * share,
        act_bytes=act_bytes_per_rank(op, tp),
        kv_bytes=op.kv_bytes * kv_share(op, tp) if isinstance(op.dims, AttentionDims) else op.kv_bytes,
    )


def tp_shards_heads(spec: ModelSpec, tp: int) -> bool:
    """vLLM's rule (QKVParallelLinear): TP divides the query heads, and the KV
    heads split evenly (K % t == 0) or are replicated whole (t % K == 0)."""
    kv = spec.n_kv_heads  # may be arrays (a sweep): then so is the answer
    return (spec.attention.n_heads % tp == 0) & select(tp < kv, kv % tp == 0, tp % kv == 0)
