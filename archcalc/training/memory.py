"""Memory per rank of a training step: a sum over the op list, stage by stage.

Per parameter (Ψ of them on a rank), in the ZeRO paper's terms (Rajbhandari
et al. 2020, §3; Megatron-LM's docs/distrib_optimizer table):
  weights   Ψ × the compute dtype (bf16, or fp32 for --precision fp32),
  master    Ψ × 4: fp32 weights beside bf16 ones (mixed precision),
  gradients Ψ × the gradient dtype (fp32 by default: Megatron's main_grad),
  optimizer the states of tensors.py, fp32;
ZeRO 1 splits master and optimizer over the dp·cp ranks, 2 the gradients as
well, 3 the weights too (then each layer is all-gathered whole before it runs:
two layers' worth of buffers, the running one and the prefetched next, plus
one layer's unsharded gradients before the reduce-scatter).  Expert tensors
split over ep ranks and their ZeRO shards over the dp·cp/ep ranks that hold
the same experts.

Pipeline stages (1F1B, Narayanan et al. 2021): stage s of p holds L/p layers
and keeps p − s micro-batches in flight; the first holds the embedding, the
last the final norm, lm_head and loss (and, when they are tied, its own copy of
the embedding, as Megatron-LM keeps).  The plan is the worst stage's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archcalc.hardware.profile import HardwareProfile
from archcalc.ops.dtypes import nbytes
from archcalc.ops.layers import model_ops
from archcalc.ops.op import Op
from archcalc.ops.workload import Workload
from archcalc.parallel.tensor import weight_share
from archcalc.spec.model import ModelSpec
from archcalc.training.activations import LAYER_PREFIX, ActivationMemory, activation_memory
from archcalc.training.memo import memo
from archcalc.training.layout import DDP_BUCKET_BYTES, Layout, Recipe, grad_accum
from archcalc.training.tensors import op_tensors, state_values

MASTER_BYTES = 4  # fp32 master weights
STATE_BYTES = 4  # optimizer states are fp32
FP8_CACHE_BYTES = 1  # fp8 recipes (Transformer Engine) keep an fp8 copy of each matmul weight per step
LOGIT_GRAD_BYTES = 4  # the loss's gradient w.r.t. the fp32 logits
FSDP_BUFFERS = 2  # FSDP all-gathers the running layer and prefetches the next


def training_workload(layout: Layout, recipe: Recipe) -> Workload:
    """One micro-batch on one rank: b sequences of the rank's seq/cp tokens."""
    return Workload.forward(recipe.seq // layout.cp, layout.micro_batch, weight_dtype=recipe.weight_dtype,
                            act_dtype=recipe.act_dtype, kv_dtype=recipe.act_dtype)


def stage_of(op: Op) -> str:
    """"layers" (split over the stages), "first" (embedding, residual-stream setup) or "last"."""
    if op.name.startswith(LAYER_PREFIX):
        return "layers"
    return "last" if op.name.startswith("lm_head") or op.name == "final_norm" else "first"  # project_out too


@dataclass(frozen=True)
class ParamShare:
    """Parameters one rank holds, and the values of optimizer state they carry."""

    params: float = 0.0
    matmul_params: float = 0.0  # what fp8 caches
    states: float = 0.0
    layer_params: float = 0.0  # one layer's (what FSDP gathers at a time)
    dense_shard: float = 0.0  # params sharded over dp·cp (the rest over dp·cp/ep)


def param_share(spec: ModelSpec, ops: list[Op], layout: Layout, recipe: Recipe, stage: str) -> ParamShare:
    """Parameters on one rank of the first or last pipeline stage (or "all" of one stage).
    They do not depend on the workload `ops` was built at: cached per layout."""
    return memo((spec,), ("share", layout.tp, layout.pp, layout.ep, stage, recipe.optimizer),
                lambda: _param_share(spec, ops, layout, recipe, stage))


def _param_share(spec: ModelSpec, ops: list[Op], layout: Layout, recipe: Recipe, stage: str) -> ParamShare:
    params = matmul = states = layer = dense = 0.0
    tied_copy = spec.tie_embeddings and layout.pp > 1 and stage == "last"
    for op in ops:
        where = stage_of(op)
        on_stage = where == "layers" or where == stage or layout.pp == 1
        if tied_copy and op.component == "embedding" and op.kind == "gather":
            on_stage = True
        if not on_stage or not op.params:
            continue
        share = weight_share(op, layout.tp) * (1 / layout.ep if op.component == "experts" else 1)
        share *= op.count / layout.pp if where == "layers" else op.count
        n = op.params * share
        params += n
        matmul += n if op.kind == "matmul" else 0
        states += share * sum(state_values(op, shape, recipe.optimizer) for shape in op_tensors(op))
        dense += n if op.component != "experts" else 0
        if where == "layers":
            layer += n * layout.pp / spec.n_layers
    return ParamShare(params, matmul, states, layer, dense)


@dataclass(frozen=True)
class StagePlan:
    stage: str  # "first" or "last" (one stage: "all")
    terms: dict[str, float]  # bytes, in a fixed order
    activations: ActivationMemory
    in_flight: int  # micro-batches whose activations this stage keeps at once
    params: float  # parameters on this rank

    @property
    def total(self) -> float:
        return sum(self.terms.values())


@dataclass(frozen=True)
class MemoryPlan:
    stages: list[StagePlan]
    capacity: float  # bytes the device offers (HardwareProfile.capacity)
    notes: list[str] = field(default_factory=list)

    @property
    def worst(self) -> StagePlan:
        return max(self.stages, key=lambda s: s.total)

    @property
    def total(self) -> float:
        return self.worst.total

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    @property
    def binding(self) -> str:
        """The largest term of the worst stage: what to shrink first."""
        terms = self.worst.terms
        return max(terms, key=terms.get)


def stage_plan(spec: ModelSpec, ops: list[Op], layout: Layout, recipe: Recipe, stage: str) -> StagePlan:
    share = param_share(spec, ops, layout, recipe, stage)
    shard = layout.shard_ranks
    expert_shard = max(1, shard // layout.ep)

    def sharded(values: float, stage_min: int) -> float:  # values split over the ZeRO ranks from `stage_min` on
        if layout.zero < stage_min:
            return values
        dense = values * (share.dense_shard / share.params if share.params else 1.0)
        return dense / shard + (values - dense) / expert_shard

    terms = {
        "weights": nbytes(sharded(share.params, 3), recipe.weight_dtype),
        "master weights": sharded(share.params, 1) * MASTER_BYTES if recipe.master else 0.0,
        "gradients": nbytes(sharded(share.params, 2), recipe.grad_dtype),
        "optimizer states": sharded(share.states, 1) * STATE_BYTES,
    }
    if recipe.precision == "fp8":
        terms["fp8 weight copies"] = share.matmul_params * FP8_CACHE_BYTES
    wl = training_workload(layout, recipe)
    stages, index = layout.pp, (0 if stage in ("first", "all") else layout.pp - 1)
    in_flight = min(stages - index, grad_accum(layout, recipe))
    act = activation_memory(spec, ops, wl.tokens, recipe.act_dtype, kernel=recipe.attention,
                            recompute=layout.recompute, dropout=recipe.dropout > 0, z_loss=recipe.z_loss,
                            layer_share=1 / stages, tp=layout.tp, sequence_parallel=layout.sequence_parallel)
    last = stage in ("last", "all")
    terms["activations"] = in_flight * (act.layers + act.dropout) + act.recompute_peak
    # The last stage also keeps the head's inputs, the loss's log-probabilities and, in backward, the
    # fp32 gradient of the logits [m, V/t].
    terms["logits and loss"] = act.head + act.loss + wl.tokens * spec.head_vocab * LOGIT_GRAD_BYTES / layout.tp \
        if last else 0.0
    if layout.zero == 3:
        terms["communication buffers"] = (FSDP_BUFFERS * nbytes(share.layer_params, recipe.weight_dtype)
                                          + nbytes(share.layer_params, recipe.grad_dtype))
    elif shard > 1:
        terms["communication buffers"] = 2 * DDP_BUCKET_BYTES
    terms["runtime reserve"] = recipe.reserve
    return StagePlan(stage, terms, act, in_flight, share.params)


def memory_plan(spec: ModelSpec, hw: HardwareProfile, layout: Layout, recipe: Recipe,
                ops: list[Op] | None = None) -> MemoryPlan:
    ops = ops if ops is not None else model_ops(spec, training_workload(layout, recipe))
    names = ("first", "last") if layout.pp > 1 else ("all",)
    return MemoryPlan([stage_plan(spec, ops, layout, recipe, s) for s in names], hw.capacity)
