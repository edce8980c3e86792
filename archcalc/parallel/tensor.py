"""Tensor parallelism over t ranks: the share of an op's parameters, work,
cache and activations one rank holds.

Each Op records how it shards (`Op.tp`, see ops/op.py: Sharding); this module
is the one policy that turns that label into fractions.  Megatron-style
pairing: column-parallel linears ("split") split their output (QKV, up,
lm_head), row-parallel ones ("row") their input (o, down); attention splits
by heads; a vocab-parallel embedding splits its rows and ends in an all-reduce.
"""

from __future__ import annotations

from archcalc.ops.op import FusedQKVDims, MatmulDims, Op


def weight_share(op: Op, tp: int) -> float:
    """Share of this op's parameters (and work) one of `tp` ranks holds."""
    if op.tp == "replicated" or tp == 1:
        return 1.0
    if op.tp == "qkv":  # fused Q, K, V: H/t query heads, max(1, K/t) KV heads per rank (vLLM replicates K < t)
        d: FusedQKVDims = op.dims
        q, kv, heads = d.q_width, d.kv_width, d.n_kv_heads
        return (q / tp + kv * max(1, heads // tp) / heads) / (q + kv)
    return 1.0 / tp


def kv_share(op: Op, tp: int) -> float:
    """Share of an attention op's cache one rank holds: max(1, K/t) of K heads.
    MLA's single latent (K = 1) is therefore whole on every rank."""
    heads = op.dims.n_kv_heads
    return max(1, heads // tp) / heads


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
