"""The collectives one rank issues in one optimizer step, as collective Ops.

Each is an Op of kind "collective" (ops/op.py: bytes sent per rank by the ring
algorithm), with the group it runs on, the pass it belongs to and what it can
hide behind.  Where each comes from:

- tensor parallel (Megatron-LM, Shoeybi et al. 2019 §3; Korthikanti et al.
  2022 §4.2.2 for sequence parallelism), per micro-batch: the forward
  all-reduces parallel/collectives.py places (row-parallel outputs, the
  vocab-parallel embedding) and, in backward, one all-reduce of the input
  gradient of every column-parallel matmul (the conjugate of the forward's
  identity); Megatron fuses QKV and gate/up, an unfused model (torch DTensor
  TP on separate q, k, v, gate, up linears) all-reduces each part's input
  gradient.  Sequence parallelism turns each all-reduce into a reduce-scatter
  and an all-gather of the same bytes.  The vocab-parallel cross-entropy
  all-reduces three fp32 values per token (max, the target's logit, Σexp).
  Full recomputation runs the forward's collectives again in backward.
- data parallel, once per step: ZeRO 0 all-reduces the gradients (DDP buckets,
  overlapped with backward); ZeRO 1 (Megatron's distributed optimizer)
  reduce-scatters them and all-gathers the updated weights; ZeRO 2
  reduce-scatters each micro-batch's gradients; ZeRO 3 (FSDP2's default
  schedule, probed with torch's fake process group: tests/training) gathers
  each layer before its forward and again before its backward, the rest of
  the model once, and reduce-scatters each group's gradients, every
  micro-batch.  FSDP2 pads each tensor's first dim to a multiple of the ranks.
- expert parallel: an all-to-all of the routed tokens [m·k, D] before and
  after the experts, in forward and backward (Megatron-Core's all-to-all
  token dispatcher).
- context parallel: ring attention passes each rank's K and V around the cp
  ranks once per layer in forward, K, V and their gradients in backward.
- pipeline parallel: each micro-batch's activations [m, D] to the next stage,
  and their gradient back.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import ceil, prod
from typing import Literal

from archcalc.cost.roofline import step_ops
from archcalc.ops.dtypes import nbytes
from archcalc.ops.op import AttentionDims, MatmulDims, Op, collective
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec
from archcalc.training.activations import LAYER_PREFIX
from archcalc.training.layout import DDP_BUCKET_BYTES, Layout, Recipe, grad_accum
from archcalc.training.memory import param_share
from archcalc.training.tensors import Shape, op_tensors

Group = Literal["tp", "dp", "ep", "cp", "pp"]
Pass = Literal["forward", "backward", "step"]
# What a collective can run under: None is on the critical path.
Hides = Literal["backward", "forward", "compute", "attention"] | None
LOSS_REDUCTIONS = 3  # vocab-parallel cross-entropy: max logit, target logit, Σ exp (Megatron-LM, fp32 [m])


@dataclass(frozen=True)
class Comm:
    op: Op  # count: executions per optimizer step
    group: Group
    phase: Pass
    hides: Hides = None


def _tp_comms(spec: ModelSpec, wl: Workload, ops: list[Op], layout: Layout, accum: int,
              fused: bool) -> list[Comm]:
    t = layout.tp
    if t == 1:
        return []
    out = []
    sp = layout.sequence_parallel
    rank_ops = step_ops(spec, wl, "causal", t)
    forward = [op for op in rank_ops if op.kind == "collective" and op.component != "lm_head"]
    repeats = 2 if layout.recompute == "full" else 1  # full recomputation reruns the forward's collectives
    for op in forward:
        n = _on_stage(op, layout) * accum
        if sp:  # all-reduce = reduce-scatter after the row-parallel op + all-gather before the next column op
            out += [Comm(_like(op, wl, "reduce_scatter", n * repeats), "tp", "forward"),
                    Comm(_like(op, wl, "all_gather", n * repeats), "tp", "forward")]
        else:
            out.append(Comm(_like(op, wl, "all_reduce", n * repeats), "tp", "forward"))
    for op in ops:  # backward: the input gradient of every column-parallel matmul (its input is whole)
        if op.kind == "matmul" and op.tp in ("split", "qkv") and isinstance(op.dims, MatmulDims) \
                and op.component != "experts":
            parts = 1 if fused or not op.dims.parts else len(op.dims.parts)
            n, k = _on_stage(op, layout) * parts * accum, op.dims.k
            name = f"{op.name}.input_grad"
            if sp:
                out += [Comm(collective(f"{name}.reduce_scatter", op.component, wl, k, t, "reduce_scatter",
                                        count=n, tokens=op.dims.m), "tp", "backward"),
                        Comm(collective(f"{name}.all_gather", op.component, wl, k, t, "all_gather", count=n,
                                        tokens=op.dims.m), "tp", "backward")]
            else:
                out.append(Comm(collective(f"{name}.all_reduce", op.component, wl, k, t, "all_reduce", count=n,
                                           tokens=op.dims.m), "tp", "backward"))
    out.append(Comm(collective("loss.all_reduce", "lm_head", wl, LOSS_REDUCTIONS, t, "all_reduce", count=accum,
                               dtype="fp32"), "tp", "forward"))
    return out


def _on_stage(op: Op, layout: Layout) -> int:
    """Executions on one pipeline stage: a layer op's count over pp; the embedding's and
    the head's are counted whole (on the first and last stage: the worst stage has one)."""
    return op.count // layout.pp if op.name.startswith(LAYER_PREFIX) else op.count


def _like(op: Op, wl: Workload, pattern: str, count: int) -> Op:
    """The same tensor as a forward collective of tp_ops, under another pattern and count."""
    d = op.dims
    return collective(f"{op.name.rsplit('.', 1)[0]}.{pattern}", op.component, wl, d.width, d.ranks, pattern,
                      count=count, tokens=d.m)


def padded(shape: Shape, ranks: int) -> int:
    """FSDP2's per-rank shard of one tensor: ceil(d0 / ranks) rows of the rest."""
    if not shape:
        return 1  # a 0-d scalar is sharded as one padded element
    return ceil(shape[0] / ranks) * prod(shape[1:])


def _fsdp_values(ops: list[Op], layout: Layout, where: str, rank_values: float) -> float:
    """FSDP2's gathered values of the layers (where="layers") or the rest: Σ over tensors of
    ranks × padded shard, scaled to the `rank_values` one TP/EP/PP rank holds (exact at
    tp = ep = pp = 1)."""
    ranks = layout.shard_ranks
    mine = [op for op in ops if op.params and op.name.startswith(LAYER_PREFIX) == (where == "layers")]
    exact = sum(op.count * sum(padded(shape, ranks) for shape in op_tensors(op)) * ranks for op in mine)
    whole = sum(op.params * op.count for op in mine)
    return exact * (rank_values / whole if whole else 0.0)


def _dp_comms(spec: ModelSpec, ops: list[Op], layout: Layout, recipe: Recipe, accum: int) -> list[Comm]:
    ranks = layout.shard_ranks
    if ranks == 1:
        return []
    wdt, gdt = recipe.weight_dtype, recipe.grad_dtype
    # The parameters of the rank memory.py plans (the last stage's under pp: its layers, final norm, head).
    share = param_share(spec, ops, layout, recipe, "all" if layout.pp == 1 else "last")
    layers = share.layer_params * spec.n_layers / layout.pp
    experts = share.params - share.dense_shard
    if layout.zero == 3:
        per_layer = _fsdp_values(ops, layout, "layers", layers) / (spec.n_layers / layout.pp)
        root = _fsdp_values(ops, layout, "rest", share.params - layers)
        L = spec.n_layers // layout.pp
        return [
            Comm(_flat("fsdp.layers.all_gather", per_layer, wdt, ranks, "all_gather", L * accum), "dp", "forward",
                 "compute"),
            Comm(_flat("fsdp.root.all_gather", root, wdt, ranks, "all_gather", accum), "dp", "forward", "compute"),
            Comm(_flat("fsdp.layers.all_gather", per_layer, wdt, ranks, "all_gather", L * accum), "dp", "backward",
                 "compute"),
            Comm(_flat("fsdp.layers.reduce_scatter", per_layer, gdt, ranks, "reduce_scatter", L * accum), "dp",
                 "backward", "compute"),
            Comm(_flat("fsdp.root.reduce_scatter", root, gdt, ranks, "reduce_scatter", accum), "dp", "backward",
                 "compute"),
        ]
    groups = [("dp", share.dense_shard, ranks)] + ([("expert", experts, max(1, ranks // layout.ep))] if experts
                                                    else [])
    out = []
    for label, values, n_ranks in groups:
        if n_ranks == 1 or not values:
            continue
        if layout.zero == 0:
            buckets = max(1, ceil(nbytes(values, gdt) / DDP_BUCKET_BYTES))
            out.append(Comm(_flat(f"{label}.grads.all_reduce", values / buckets, gdt, n_ranks, "all_reduce", buckets),
                            "dp", "backward", "backward"))
            continue
        reductions = accum if layout.zero == 2 else 1  # ZeRO 2 keeps no whole gradients between micro-batches
        out += [Comm(_flat(f"{label}.grads.reduce_scatter", values, gdt, n_ranks, "reduce_scatter", reductions),
                     "dp", "backward", "backward"),
                Comm(_flat(f"{label}.weights.all_gather", values, wdt, n_ranks, "all_gather", 1), "dp", "step",
                     "forward")]
    return out


_ONE = Workload(batch=1, new_tokens=1, context=1)  # a flat buffer is one row of `values` elements


def _flat(name: str, values: float, dtype: str, ranks: int, pattern: str, count: int) -> Op:
    """A collective over one flat buffer of `values` elements (gradients, weights).  Its component
    names where most of those parameters live: the FFN in a layer, the embedding in FSDP's root."""
    return collective(name, "embedding" if name.startswith("fsdp.root") else "ffn", _ONE, values, ranks, pattern,
                      count=count, tokens=1, dtype=dtype)


def _ep_comms(spec: ModelSpec, wl: Workload, ops: list[Op], layout: Layout, accum: int) -> list[Comm]:
    if layout.ep == 1 or spec.ffn.moe is None:
        return []
    up = next(op for op in ops if op.name == "layers.moe.experts.up")
    rows = up.dims.m / (layout.tp if layout.sequence_parallel else 1)  # routed token-expert pairs on this rank
    n = _on_stage(up, layout) * accum * 2  # dispatch and combine
    op = collective("moe.all_to_all", "experts", wl, spec.d_model, layout.ep, "all_to_all", count=n, tokens=rows)
    return [Comm(op, "ep", "forward"), Comm(op, "ep", "backward")]


def _cp_comms(wl: Workload, ops: list[Op], layout: Layout, accum: int) -> list[Comm]:
    if layout.cp == 1:
        return []
    out = []
    for op in ops:
        if op.kind == "attention":
            d: AttentionDims = op.dims
            hops = (layout.cp - 1) * _on_stage(op, layout) * accum
            kv = collective(f"{op.name}.kv_ring", "attention", wl, d.kv_width, layout.cp, "send_recv",
                            count=hops, tokens=d.batch * d.new_tokens)
            grads = collective(f"{op.name}.kv_ring", "attention", wl, 2 * d.kv_width, layout.cp, "send_recv",
                               count=hops, tokens=d.batch * d.new_tokens)  # K, V and dK, dV
            out += [Comm(kv, "cp", "forward", "attention"), Comm(grads, "cp", "backward", "attention")]
    return out


def _pp_comms(spec: ModelSpec, wl: Workload, layout: Layout, accum: int) -> list[Comm]:
    if layout.pp == 1:
        return []
    rows = wl.tokens / (layout.tp if layout.sequence_parallel else 1)
    op = collective("pipeline.send", "residual", wl, spec.d_model, 2, "send_recv", count=accum, tokens=rows)
    return [Comm(op, "pp", "forward"), Comm(op, "pp", "backward")]


def step_comms(spec: ModelSpec, wl: Workload, ops: list[Op], layout: Layout, recipe: Recipe, *,
               fused: bool = True) -> list[Comm]:
    """Every collective of one optimizer step on one rank.  `ops`: the whole model's
    op list at one micro-batch (`wl`); fused=False: each fused projection part is
    its own linear (torch DTensor TP on a model with separate q, k, v, gate, up)."""
    accum = grad_accum(layout, recipe)
    return (_tp_comms(spec, wl, ops, layout, accum, fused) + _dp_comms(spec, ops, layout, recipe, accum)
            + _ep_comms(spec, wl, ops, layout, accum) + _cp_comms(wl, ops, layout, accum)
            + _pp_comms(spec, wl, layout, accum))
