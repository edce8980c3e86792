"""Time of one optimizer step, and of the whole run, from the roofline.

Compute: every op of one rank's micro-batch timed by cost/roofline.time_op
under a rate set (peak, typical, calibrated), forward once, backward at
BACKWARD_FACTOR × its forward time (recomputation adds forwards again).
Collectives: each Comm timed on its group's link, exposed unless it can
hide: DP gradient reductions behind the last micro-batch's backward, the
next step's weight all-gather behind its forward, FSDP's gathers behind the
micro-batch's compute, ring attention's K/V passes behind attention.  The
pipeline (1F1B) takes (micro-batches + pp − 1) stage times: pp − 1 of them
are the bubble.  The optimizer reads and writes its states, the master
weights and the gradients once (memory-bound).

Peak rates stay a lower bound: every term is at least its datasheet time.
Not modelled: kernel overlap inside a stream, stragglers, data loading,
checkpoint saving, failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from archcalc.cost.rates import Rates, rate_sets
from archcalc.cost.roofline import step_ops, time_op
from archcalc.cost.totals import param_counts
from archcalc.hardware.profile import HardwareProfile
from archcalc.ops.op import Op
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec
from archcalc.training.activations import LAYER_PREFIX
from archcalc.training.comm import Comm, step_comms
from archcalc.training.layout import CHINCHILLA_TOKENS_PER_PARAM, Layout, Recipe, grad_accum
from archcalc.training.memory import MASTER_BYTES, STATE_BYTES, MemoryPlan, ParamShare, memory_plan, param_share, \
    stage_of, training_workload
from archcalc.training.memo import memo

# Backward ÷ forward time per op.  A matmul y = xW has two backward matmuls of its size (dx = dy·Wᵀ,
# dW = xᵀ·dy); a row op reads its input and the output gradient and writes the input gradient (≈ 2×
# its traffic).  FlashAttention's backward runs five matmuls to the forward's two, recomputing the
# scores (Dao 2023, FlashAttention-2 §3.1): 2.5×; the eager core's four are 2×.
BACKWARD_FACTOR = 2.0
FLASH_BACKWARD_FACTOR = 2.5
NODE_GPUS = 8  # GPUs one NVLink domain joins (HGX/DGX H100, H200, B200 baseboards)
# Between nodes each GPU has one 400 Gb/s NIC (DGX H100: 8 × ConnectX-7 400 Gb/s InfiniBand NDR):
# 50 GB/s each way.
INTER_NODE_BANDWIDTH = 50e9
OPTIMIZER_TRAFFIC = 2  # the optimizer reads and writes each state and master weight once


@dataclass(frozen=True)
class CommTime:
    comm: Comm
    seconds: float  # all its executions in the step
    exposed: float  # what the step waits for
    inter_node: bool

    @property
    def bytes_sent(self) -> float:
        return self.comm.op.comm_bytes * self.comm.op.count


@dataclass(frozen=True)
class StepTime:
    rates: Rates
    forward: float  # one micro-batch on the slowest stage
    backward: float
    recompute: float
    micro_batches: int
    pipeline: int
    comms: list[CommTime]
    optimizer: float
    tokens: int  # per optimizer step, all ranks
    model_flops: float  # 3 × forward FLOPs of the step, all ranks (no recomputation: MFU's numerator)
    gpus: int
    peak_flops: float  # per GPU, the compute dtype's datasheet rate

    @property
    def micro_batch_compute(self) -> float:
        return self.forward + self.backward + self.recompute

    def exposed(self, group: str | None = None) -> float:
        return sum(c.exposed for c in self.comms if group is None or c.comm.group == group)

    @property
    def bubble(self) -> float:
        per_mb = self.micro_batch_compute + self._per_mb_exposed
        return (self.pipeline - 1) * per_mb

    @property
    def _per_mb_exposed(self) -> float:
        return sum(c.exposed for c in self.comms if c.comm.phase != "step" and c.comm.group != "dp") \
            / self.micro_batches

    @property
    def time(self) -> float:
        per_mb = self.micro_batch_compute + self._per_mb_exposed
        dp = sum(c.exposed for c in self.comms if c.comm.group == "dp" or c.comm.phase == "step")
        return (self.micro_batches + self.pipeline - 1) * per_mb + dp + self.optimizer

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.time

    @property
    def mfu(self) -> float:
        return self.model_flops / (self.time * self.gpus * self.peak_flops)


@dataclass(frozen=True)
class RunTotals:
    tokens: float
    steps: int
    seconds: float
    gpu_hours: float
    cost: float | None
    energy_kwh: float | None  # the GPUs at TDP: an upper bound for the GPUs alone (no host, network, cooling)


@dataclass(frozen=True)
class TrainResult:
    spec: ModelSpec
    hardware: HardwareProfile
    layout: Layout
    recipe: Recipe
    memory: MemoryPlan
    steps: list[StepTime]  # one per rate set
    runs: list[RunTotals]
    params: int
    notes: list[str] = field(default_factory=list)


def _group_spans_nodes(group: str, layout: Layout) -> bool:
    """Ranks go tp (innermost), cp, dp, pp (Megatron-LM's order); a group whose
    ranks lie further apart than one node's GPUs crosses the network."""
    stride_size = {"tp": (1, layout.tp), "cp": (layout.tp, layout.cp), "dp": (layout.tp * layout.cp, layout.dp),
                   "ep": (layout.tp * layout.cp, layout.ep), "pp": (layout.tp * layout.cp * layout.dp, layout.pp)}
    stride, size = stride_size[group]
    return size > 1 and stride * size > NODE_GPUS


def _link_rates(rates: Rates, inter_node: bool) -> Rates:
    """The group's link: the profile's NVLink inside a node; the NIC across nodes (and on a
    device whose profile names no interconnect)."""
    if inter_node or rates.link_bandwidth is None:
        return replace(rates, link_bandwidth=INTER_NODE_BANDWIDTH)
    return rates


def _stage_times(ops: list[Op], layout: Layout, rates: Rates, recipe: Recipe) -> tuple[float, float, float]:
    """(forward, backward, recompute) seconds of one micro-batch on the slowest pipeline stage."""
    stages = {"first": [0.0, 0.0, 0.0], "last": [0.0, 0.0, 0.0]}
    for op in ops:
        if op.kind == "collective":
            continue
        t = time_op(op, rates).time
        layer = op.name.startswith(LAYER_PREFIX)
        if layer:
            t /= layout.pp
        factor = BACKWARD_FACTOR
        if op.kind == "attention" and recipe.attention == "flash":
            factor = FLASH_BACKWARD_FACTOR
        again = t if layer and (layout.recompute == "full" or (layout.recompute == "selective"
                                                                and op.kind == "attention")) else 0.0
        targets = ("first", "last") if layer else (stage_of(op),)
        for name in (targets if layout.pp > 1 else ("first",)):
            stages[name][0] += t
            stages[name][1] += factor * t
            stages[name][2] += again
    return tuple(max(stages.values(), key=sum))


def step_time(spec: ModelSpec, hw: HardwareProfile, layout: Layout, recipe: Recipe, rates: Rates,
              comms: list[Comm], rank_ops: list[Op], flops_per_step: float, share: ParamShare) -> StepTime:
    """One optimizer step under `rates`; `share`: the parameters on the rank that steps them."""
    wl = training_workload(layout, recipe)
    forward, backward, recompute = memo((spec, rates), ("stage", wl, layout.tp, layout.pp, layout.recompute,
                                                        recipe.attention),
                                        lambda: _stage_times(rank_ops, layout, rates, recipe))
    accum = grad_accum(layout, recipe)
    attention = sum(time_op(op, rates).time for op in rank_ops if op.kind == "attention") / layout.pp
    attention *= 1 + (FLASH_BACKWARD_FACTOR if recipe.attention == "flash" else BACKWARD_FACTOR)
    hide_behind = {"backward": backward, "forward": forward, "compute": (forward + backward + recompute) * accum,
                   "attention": attention * accum, None: 0.0}
    # Collectives that hide behind the same window queue on one link: the window hides their sum.
    links = {inter: _link_rates(rates, inter) for inter in (False, True)}
    seconds = [time_op(c.op, links[_group_spans_nodes(c.group, layout)]).time for c in comms]
    queued: dict = {}
    for c, t in zip(comms, seconds):
        queued[c.hides] = queued.get(c.hides, 0.0) + t
    timed = []
    for c, t in zip(comms, seconds):
        total = queued[c.hides]
        exposed = t if c.hides is None else max(0.0, total - hide_behind[c.hides]) * t / total if total else 0.0
        timed.append(CommTime(c, t, exposed, _group_spans_nodes(c.group, layout)))
    sharded = layout.shard_ranks if layout.zero >= 1 else 1
    opt_bytes = OPTIMIZER_TRAFFIC * (share.states * STATE_BYTES + (share.params * MASTER_BYTES if recipe.master
                                                                     else 0)) / sharded
    peak = _rate_sets(hw, wl)[0].matmul
    return StepTime(rates, forward, backward, recompute, accum, layout.pp, timed, opt_bytes / rates.bandwidth,
                    recipe.global_batch * recipe.seq, flops_per_step, layout.gpus, peak)


def _rate_sets(hw: HardwareProfile, wl: Workload) -> list[Rates]:
    return memo((hw,), ("rates", wl.weight_dtype, wl.act_dtype), lambda: rate_sets(hw, wl))


def train(spec: ModelSpec, hw: HardwareProfile, layout: Layout, recipe: Recipe) -> TrainResult:
    """Memory per rank, step time under every rate set of `hw`, and the run's totals."""
    wl = training_workload(layout, recipe)
    whole = list(step_ops(spec, wl, "causal"))
    rank_ops = memo((spec,), ("rank ops", wl, layout.tp),
                    lambda: [op for op in step_ops(spec, wl, "causal", layout.tp) if op.kind != "collective"])
    comms = step_comms(spec, wl, whole, layout, recipe)
    memory = memory_plan(spec, hw, layout, recipe, whole)
    share = param_share(spec, whole, layout, recipe, "all" if layout.pp == 1 else "last")
    params = param_counts(whole).total
    # Model FLOPs of the step: 3 × the forward of each whole sequence (causal attention over all seq
    # tokens, whatever cp splits), the same for every layout of the run.
    sequence = step_ops(spec, replace(wl, batch=1, new_tokens=recipe.seq, context=recipe.seq), "causal")
    flops = 3 * sum(op.flops * op.count for op in sequence) * recipe.global_batch
    steps = [step_time(spec, hw, layout, recipe, rates, comms, rank_ops, flops, share) for rates in _rate_sets(hw, wl)]
    budget = recipe.tokens if recipe.tokens is not None else CHINCHILLA_TOKENS_PER_PARAM * params
    runs = [run_totals(s, hw, budget, recipe) for s in steps]
    return TrainResult(spec, hw, layout, recipe, memory, steps, runs, params)


def run_totals(step: StepTime, hw: HardwareProfile, tokens: float, recipe: Recipe) -> RunTotals:
    n = -(-int(tokens) // step.tokens)  # whole steps
    seconds = n * step.time
    hours = seconds * step.gpus / 3600
    cost = hours * recipe.price_per_gpu_hour if recipe.price_per_gpu_hour is not None else None
    energy = step.gpus * hw.tdp_watts * seconds / 3.6e6 if hw.tdp_watts else None
    return RunTotals(tokens, n, seconds, hours, cost, energy)
