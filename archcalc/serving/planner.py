"""Does it fit: the memory plan of a deployment, per GPU, and the solvers.

plan = weights + KV cache + activation peak + runtime reserve, each a sum over
the one op list (ops.layers.model_ops) with ops/op.py's formulas; engines/ says how
an engine sizes the cache, which chunk it prefills and what it keeps back.

Weights: Σ totals.weight_bytes(op) × the engine's share (parallel/tensor.py
under tensor parallelism).  KV cache: Σ cells × ops.cache_token_bytes.
Activation peak of one prefill chunk (an estimate, stated in the output):
  the residual stream  [chunk tokens × D, × n streams for hyper-connections]
+ the largest transient op's input + output on one GPU (parallel.tensor.act_bytes_per_rank),
  with flash attention (no S × S scores materialised)
+ fp32 logits for the tokens whose logits the chunk computes
(the lm_head's own activations are the logits term).

Solvers: the largest context at a batch and the largest batch at a context
use closed forms where the plan is linear (an engine with `affine` memory:
KV and activations affine in context between window breakpoints and in
batch; an engine whose start-up check has its own concurrency limit) and
binary search on the same plan elsewhere; the fewest GPUs tries TP 1, 2, 4, 8.
No engine is named here: engines/ holds what differs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from archcalc.cost.solve import affine_last, last_true
from archcalc.cost.totals import weight_bytes
from archcalc.errors import InputError
from archcalc.limits import MAX_CONTEXT
from archcalc.hardware.profile import HardwareProfile, all_hardware
from archcalc.ops.dtypes import WEIGHT_DTYPES
from archcalc.ops.layers import model_ops
from archcalc.ops.checkpoints import WEIGHT_FORMATS, checkpoint_size
from archcalc.ops.mtp import mtp_ops
from archcalc.ops.vision import vision_ops
from archcalc.ops.op import Op
from archcalc.ops.workload import Workload
from archcalc.parallel.pipeline import Stage, stage_ops
from archcalc.parallel.tensor import act_bytes_per_rank, tp_shards_heads
from archcalc.serving.deployment import Deployment
from archcalc.serving.engines import ENGINES, AttnKind, Chunk, Engine, LayerKV, engine_named
from archcalc.serving.engines.base import LOGIT_BYTES, StartupCheck
from archcalc.spec.model import ModelSpec, context_warnings

FIT_SCHEMA = "archcalc.fit/2"  # /2: the engine-neutral "startup" replaced "vllm"
TP_CHOICES = (1, 2, 4, 8)  # what the fewest-GPUs solver tries: one node's NVLink domain
MAX_BATCH_SEARCH = 1 << 24  # the batch solvers stop doubling here
MEMORY_CONTEXT_LIMIT = MAX_CONTEXT  # how far "memory alone would allow" looks past a model's max context
TERMS = ("reserve", "weights", "activations", "kv_cache")  # stacking order for the binding term
# Deployment fields only some engines read (Engine.takes), and the option that sets each.
ENGINE_OPTIONS = {"kv_dtype_v": "--kv-dtype-v", "pp": "--pp", "tensor_split": "--tensor-split",
                  "engine_build": "--llamacpp-build", "flash_attn": "--no-flash-attn",
                  "vllm_version": "--vllm-version", "prefix_caching": "--enable-prefix-caching"}
DEFAULT_DEPLOYMENT = Deployment()


@dataclass(frozen=True)
class Weights:
    split: float  # bytes of ops divided among the GPUs, this GPU's part
    replicated: float  # bytes of ops every GPU holds whole (norms, routers, MLA down-projections, ...)
    vision: float = 0.0  # this GPU's part of a multimodal checkpoint's image encoder + projector
    mtp: float = 0.0  # with --mtp, this GPU's part of the multi-token-prediction modules

    @property
    def bytes(self) -> float:
        return self.split + self.replicated + self.vision + self.mtp


@dataclass(frozen=True)
class Activations:
    chunk: Chunk
    residual: float  # the hidden state carried between layers
    largest_op: str
    largest_op_bytes: float  # its input + output on this GPU
    logits: float  # fp32

    @property
    def bytes(self) -> float:
        return self.residual + self.largest_op_bytes + self.logits


@dataclass(frozen=True)
class FitPlan:
    """Memory of one GPU of a deployment at `context` × `batch`."""

    spec: ModelSpec
    hardware: HardwareProfile
    deployment: Deployment
    context: int
    batch: int  # all replicas together
    batch_per_gpu: int  # sequences one TP group serves
    capacity: int
    weights: Weights
    kv: list[LayerKV]
    kv_type: str
    kv_bytes_per_value: float
    activations: Activations
    reserve: dict[str, float]
    startup: StartupCheck | None = None  # the engine's own start-up check, where it has one
    stage: Stage | None = None  # the layers this GPU holds, when the model's layers are split (PP, llama.cpp)
    # With a layer split, every stage's plan (this one, the binding stage, among them); empty otherwise.
    stage_plans: tuple["FitPlan", ...] = ()

    @property
    def engine(self) -> Engine:
        return engine_named(self.deployment.engine)

    @property
    def kv_bytes(self) -> float:
        return sum(k.bytes for k in self.kv)

    @property
    def reserve_bytes(self) -> float:
        return sum(self.reserve.values())

    @property
    def terms(self) -> dict[str, float]:
        return {"reserve": self.reserve_bytes, "weights": self.weights.bytes, "activations": self.activations.bytes,
                "kv_cache": self.kv_bytes}

    @property
    def total(self) -> float:
        return sum(self.terms.values())

    @property
    def headroom(self) -> float:
        return self.capacity - self.total

    @property
    def fits(self) -> bool:
        if self.stage_plans:  # every GPU of the split must fit
            return all(p.fits for p in self.stage_plans)
        if self.startup is not None:  # the engine's own test
            return self.startup.admits(self.batch_per_gpu)
        return self.total <= self.capacity

    @property
    def slack(self) -> float:
        """How far this GPU is from not fitting: the engine's concurrency limit where it has one, else
        the headroom.  The binding stage of a split is the one with the least."""
        if self.startup is not None and self.fits:
            return self.startup.max_batch()
        return self.headroom

    @property
    def binding(self) -> str:
        """The term that overflows the GPU when the terms are stacked reserve ->
        weights -> activations -> KV cache; for a plan that fits, the KV cache,
        the term that grows with context and batch."""
        running = 0.0
        for name in TERMS:
            running += self.terms[name]
            if running > self.capacity:
                return name
        return "kv_cache"


@dataclass(frozen=True)
class Solution:
    value: int | None  # None: no value fits
    binding: str  # what stops value + 1 ("model max context" when capped)
    method: str  # "closed form" | "binary search" | "search over TP"
    capped: bool = False  # max context reached the model's maximum
    detail: dict = field(default_factory=dict)


def check_deployment(spec: ModelSpec, dep: Deployment) -> None:
    """Every bad option as one InputError."""
    engine = engine_named(dep.engine)
    from archcalc.serving.engines.vllm import VLLM_BLOCK_SIZES

    for name, flag in ENGINE_OPTIONS.items():
        if getattr(dep, name) != getattr(DEFAULT_DEPLOYMENT, name) and name not in engine.takes:
            owners = [e.name for e in ENGINES.values() if name in e.takes]
            raise InputError(None, flag, f"engine {dep.engine} does not take it; {' and '.join(owners)} "
                                         f"{'does' if len(owners) == 1 else 'do'} (--engine {owners[0]})")

    if dep.block_size not in VLLM_BLOCK_SIZES:
        raise InputError(None, "--block-size", f"{dep.block_size!r}; vLLM takes {', '.join(map(str, VLLM_BLOCK_SIZES))}")
    if dep.weights is not None and dep.weights not in WEIGHT_FORMATS:
        raise InputError(None, "--weights", f"{dep.weights!r}; valid: {', '.join(WEIGHT_FORMATS)}")
    if dep.weight_dtype not in WEIGHT_DTYPES:
        raise InputError(None, "--dtype", f"{dep.weight_dtype!r}; valid: {', '.join(WEIGHT_DTYPES)}")
    engine.kv_bytes_per_value(dep.kv_dtype or engine.default_kv_dtype)
    if dep.kv_dtype_v is not None:
        engine.kv_bytes_per_value(dep.kv_dtype_v)
    heads, tp = spec.attention.n_heads, dep.tensor_parallel
    if not tp_shards_heads(spec, engine.stage_tp(dep)):  # llama.cpp's GPUs hold whole layers: no heads split
        valid = ", ".join(str(t) for t in range(1, heads + 1) if tp_shards_heads(spec, t))
        raise InputError(None, "--tp", f"{tp} does not split {spec.name}'s {heads} attention heads and "
                                       f"{spec.n_kv_heads} KV heads evenly; valid: {valid}")
    if spec.drafter is not None:
        raise InputError(None, "MODEL", f"{spec.name} is a drafter for speculative decoding: engines run it inside its "
                         "target's deployment (vLLM's speculative_config) on the target's cache, which a plan of the "
                         "drafter alone would leave out; fit the target (size and roofline describe the drafter)")
    engine.check(spec, dep)
    if dep.gpus % (tp * dep.pp):
        group = f"TP {tp} × PP {dep.pp}" if dep.pp > 1 else f"TP groups of {tp}"
        raise InputError(None, "--gpus", f"{dep.gpus} GPUs are not a whole number of {group}")
    if not 0 < dep.gpu_memory_utilization <= 1:
        raise InputError(None, "--gpu-memory-utilization", "must be in (0, 1]")


def warnings(spec: ModelSpec, dep: Deployment, context: int) -> list[str]:
    engine = engine_named(dep.engine)
    window = engine.window_disabled(spec)
    a = spec.attention
    convs = ([f"{spec.name}'s attention layers keep a fixed state per sequence beside their cache (Inkling's short "
              f"convs, ZAYA1's CCA convs and delayed value): planned as {dep.engine} plans a hybrid layer's state "
              "(no engine rule for this model was read)"]
             if a.kv_conv is not None or spec.residual.output_conv is not None or a.cca is not None else [])
    return context_warnings(spec, context) + engine.warnings(dep) + ([window] if window else []) + convs


@dataclass(frozen=True)
class _StageParts:
    """What one GPU of a stage holds whatever the context: its weights and its attention kinds."""

    stage: Stage
    weights: Weights
    kinds: list[AttnKind]


class Planner:
    """Plans of one spec, device and deployment at any context and batch: the
    op lists, the weights and the KV widths of every stage are computed once.
    Without a layer split there is one stage, every layer on every GPU of the TP group."""

    def __init__(self, spec: ModelSpec, hardware: HardwareProfile, dep: Deployment):
        check_deployment(spec, dep)
        self.spec, self.hardware, self.dep = spec, hardware, dep
        self.engine = engine_named(dep.engine)
        self.kv_type = dep.kv_dtype or self.engine.default_kv_dtype
        v_type = dep.kv_dtype_v or self.kv_type
        self.tp = self.engine.stage_tp(dep)
        self.capacity = hardware.capacity
        self._ops_cache: dict[tuple[int | None, int, str], list[Op]] = {}
        self.kv_bytes_per_value = self.engine.kv_bytes_per_value(self.kv_type)
        self._v_bytes = self.engine.kv_bytes_per_value(v_type)
        if v_type != self.kv_type:
            self.kv_type = f"K {self.kv_type}, V {v_type}"
        base = model_ops(spec, Workload(weight_dtype=dep.weight_dtype))
        # --weights: a stored checkpoint (a GGUF file, MXFP4 experts, AWQ): every tensor at its type
        self._stored: dict[str, list[float]] | None = None  # a checkpoint's bytes of each op, layer by layer
        if dep.weights:
            by_layer = checkpoint_size(spec, base, dep.weights).bytes_by_layer
            self._stored = {op.name: by_layer.get(i, []) for i, op in enumerate(base)}
        self._taken: dict[str, int] = {}  # layers of each op the stages so far hold (stages run in layer order)
        self.stages = [self._stage_parts(stage) for stage in self.engine.stages(spec, dep)]
        self.kinds = [k for part in self.stages for k in part.kinds]
        self.vocab = next(op.dims.n for op in base if op.name == "lm_head")
        # the closed forms assume one affine total; a split's binding GPU may change with context
        # (and one without steps: a compressed layer's entries grow by one every `stride` tokens)
        self.affine = self.engine.affine and len(self.stages) == 1 and all(k.stride == 1 for k in self.kinds)
        r = spec.residual
        # Hyper-connections carry n streams; attention residuals keep every
        # block's sum (N blocks + the partial one).
        if r.kind in ("hyper", "mhc", "altup"):
            self.residual_copies = r.streams
        elif r.kind == "attnres":
            self.residual_copies = (r.blocks or 2 * spec.n_layers) + 1
        else:
            self.residual_copies = 1

    def _stage_parts(self, stage: Stage) -> _StageParts:
        spec, dep = self.spec, self.dep
        split = replicated = 0.0
        ops = stage_ops(spec, stage, Workload(weight_dtype=dep.weight_dtype))
        for op in ops:
            share = self.engine.weight_share(op, self.tp)
            if self._stored is None:
                stored = weight_bytes([op], dep.weight_dtype)
            elif op.name.startswith("layers."):  # the checkpoint's tensors of the stage's layers of the op
                first = self._taken.get(op.name, 0)
                stored = sum(self._stored[op.name][first:first + op.count])
                self._taken[op.name] = first + op.count
            else:
                stored = sum(self._stored[op.name])
            if self.tp > 1 and share == 1.0:
                replicated += stored * share
            else:
                split += stored * share
        # A multimodal checkpoint's image encoder and projector load too, split like the other
        # layers under TP (vLLM's SigLIP runs on parallel linear layers), on the first stage (the
        # image embeddings enter before layer 0).
        vision = weight_bytes(vision_ops(spec), dep.weight_dtype) / self.tp if stage.index == 0 else 0.0
        # --mtp: the MTP modules load too, split like the layers (vLLM's MTP drafter runs under the same TP),
        # beside the output layer (they take the last hidden state).
        mtp = weight_bytes(mtp_ops(spec), dep.weight_dtype) / self.tp if dep.mtp and stage.output \
            else 0.0
        full = self.engine.window_disabled(spec) is not None  # the engine runs windowed layers as global
        kinds = [AttnKind("global" if full and op.dims.layer_kind == "local" else op.dims.layer_kind, op.count,
                          None if full and op.dims.layer_kind == "local" else op.dims.window,
                          self.engine.token_bytes(op, self.kv_bytes_per_value, self._v_bytes,
                                                  self.engine.kv_share(op, self.tp)),
                          self.engine.state_bytes(op, self.kv_bytes_per_value, self.engine.kv_share(op, self.tp)),
                          op.dims.stride)
                 for op in ops if op.kind == "attention" and op.count and not op.dims.shared]  # shared: no cache
        return _StageParts(stage, Weights(split, replicated, vision, mtp), kinds)

    def _chunk_ops(self, stage: Stage | None, tokens: int, act_dtype: str) -> list[Op]:
        """The op list of a prefill step of `tokens` tokens, of the whole model or of one stage (cached:
        the solvers ask often)."""
        key = (None if stage is None else stage.index, tokens, act_dtype)
        if key not in self._ops_cache:
            wl = Workload(batch=1, new_tokens=tokens, context=tokens, weight_dtype=self.dep.weight_dtype,
                          act_dtype=act_dtype, logits="last")
            self._ops_cache[key] = model_ops(self.spec, wl) if stage is None else stage_ops(self.spec, stage, wl)
        return self._ops_cache[key]

    def activations(self, context: int, batch: int, stage: Stage) -> Activations:
        """The activation peak of the engine's prefill chunk on one GPU of `stage`."""
        chunk = self.engine.chunk(context, batch, self.dep)
        model = self._chunk_ops(None, chunk.tokens, chunk.act_dtype)
        # the hidden state entering a layer: the embedding's output, on every stage
        residual = next(op.act_bytes for op in model if op.kind == "gather" and op.component == "embedding")
        ops = [op for op in self._chunk_ops(stage, chunk.tokens, chunk.act_dtype) if op.component != "lm_head"]
        def peak(op) -> float:  # an op summing modules of different sizes (count 1) holds its largest one's at once
            return act_bytes_per_rank(op, self.tp) if op.peak_act_bytes is None else op.peak_act_bytes

        largest = max(ops, key=peak, default=None)
        return Activations(chunk, residual * self.residual_copies, largest.name if largest else "none",
                           peak(largest) if largest else 0.0,
                           chunk.logit_tokens * self.vocab * LOGIT_BYTES if stage.output else 0.0)

    @property
    def weights(self) -> Weights:
        """The weights of one GPU of the first stage (the only one without a layer split)."""
        return self.stages[0].weights

    def plan(self, context: int, batch: int = 1) -> FitPlan:
        """Batch counts all replicas; each TP group serves its share."""
        return self.plan_per_gpu(context, math.ceil(batch / self.dep.replicas), batch)

    def plan_per_gpu(self, context: int, batch_per_gpu: int, batch: int | None = None) -> FitPlan:
        """The plan of one GPU; with a layer split, the binding stage's, holding every stage's plan."""
        if context < 1 or batch_per_gpu < 1:
            raise InputError(None, "--context" if context < 1 else "--batch", "must be at least 1")
        batch = batch or batch_per_gpu * self.dep.replicas
        plans = [self._stage_plan(part, context, batch_per_gpu, batch) for part in self.stages]
        if len(plans) == 1:
            return plans[0]
        worst = min(plans, key=lambda p: (p.fits, p.slack, p.headroom))  # a GPU that does not fit, else the least slack
        return replace(worst, stage_plans=tuple(plans))

    def _stage_plan(self, part: _StageParts, context: int, batch_per_gpu: int, batch: int) -> FitPlan:
        kv = self.engine.kv_layers(part.kinds, context, batch_per_gpu, self.dep)
        act = self.activations(context, batch_per_gpu, part.stage)
        reserve = self.engine.reserve(self.capacity, self.dep)
        # What is left for the KV cache, in whole bytes (vLLM: requested = ceil(total × utilization)).
        available = int(self.capacity - sum(reserve.values()) - math.ceil(part.weights.bytes) - math.ceil(act.bytes))
        startup = self.engine.startup(part.kinds, context, available, self.dep)
        return FitPlan(self.spec, self.hardware, self.dep, context, batch, batch_per_gpu, self.capacity, part.weights,
                       kv, self.kv_type, self.kv_bytes_per_value, act, reserve, startup,
                       stage=part.stage if len(self.stages) > 1 else None)

    # ---- solvers -------------------------------------------------------------------

    def max_context(self, batch: int = 1) -> Solution:
        """Largest context (≤ the model's max) at which `batch` sequences fit."""
        b = math.ceil(batch / self.dep.replicas)
        top = self.spec.max_context

        def fits(s: int) -> bool:
            return self.plan_per_gpu(s, b).fits

        first = self.plan_per_gpu(1, b)
        if not first.fits:
            return Solution(0, first.binding, "binary search")
        if fits(top):  # capped: also say how far memory alone would go
            if fits(MEMORY_CONTEXT_LIMIT):
                alone, binding = MEMORY_CONTEXT_LIMIT, "search limit"
            else:
                alone = (self._affine_max_context(b, MEMORY_CONTEXT_LIMIT) if self.affine
                         else last_true(fits, top, MEMORY_CONTEXT_LIMIT))
                binding = self.plan_per_gpu(alone + 1, b).binding
            return Solution(top, "model max context", "model limit", capped=True,
                            detail={"memory_max_context": alone, "memory_binding": binding})
        if self.affine:
            best, method = self._affine_max_context(b, top), "closed form"
        else:
            best, method = last_true(fits, 1, top), "binary search"
        return Solution(best, self.plan_per_gpu(best + 1, b).binding, method)

    def _affine_max_context(self, b: int, top: int) -> int:
        """Total memory is affine in context between the window breakpoints
        (min(S, w) stops growing at S = w): solve each segment in closed form."""
        def total(s: int) -> float:
            return self.plan_per_gpu(s, b).total

        cap = self.capacity
        points = [1, *sorted({k.window for k in self.kinds if k.window and 1 < k.window < top}), top]
        for lo, hi in zip(points, points[1:]):
            if total(hi) <= cap:
                continue
            t_lo = total(lo)
            return affine_last(lambda s: total(s) <= cap, lo, hi - 1, cap - t_lo, total(lo + 1) - t_lo)
        return top

    def max_batch(self, context: int) -> Solution:
        """Largest number of sequences of `context` tokens that fit (all replicas)."""
        first = self.plan_per_gpu(context, 1)
        if not first.fits:
            return Solution(0, first.binding, "closed form" if self.affine or first.startup else "binary search")
        if first.startup is not None:  # the engine's own concurrency limit, the least of every stage's
            best, method = min(p.startup.max_batch() for p in first.stage_plans or (first,)), "closed form"
        elif self.affine:
            # Affine in batch: total(b) = total(1) + (b − 1)·(total(2) − total(1)).
            t1, t2 = first.total, self.plan_per_gpu(context, 2).total
            best = affine_last(lambda b: self.plan_per_gpu(context, b).fits, 1, MAX_BATCH_SEARCH,
                               self.capacity - t1, t2 - t1)
            method = "closed form"
        else:
            hi = 1
            while hi < MAX_BATCH_SEARCH and self.plan_per_gpu(context, hi * 2).fits:
                hi *= 2
            best, method = last_true(lambda b: self.plan_per_gpu(context, b).fits, hi, min(hi * 2, MAX_BATCH_SEARCH)), \
                "binary search"
        return Solution(best * self.dep.replicas, self.plan_per_gpu(context, best + 1).binding, method,
                        detail={"per_tp_group": best, "replicas": self.dep.replicas})


def min_gpus(spec: ModelSpec, hardware: HardwareProfile, dep: Deployment, context: int, batch: int = 1) -> Solution:
    """Fewest GPUs that fit: one TP group of 1, 2, 4 or 8 dividing the heads per pipeline stage (--pp kept);
    llama.cpp: 1, 2, 4 or 8 GPUs sharing the layers evenly."""
    stopped = "nothing: one GPU fits"  # what made the next smaller TP fail
    for tp in TP_CHOICES:
        trial = replace(dep, gpus=tp * dep.pp, tp=tp, tensor_split=None)
        if engine_named(dep.engine).stage_tp(trial) > 1 and not tp_shards_heads(spec, tp):
            continue
        plan = Planner(spec, hardware, trial).plan(context, batch)
        if plan.fits:
            return Solution(tp * dep.pp, stopped, "search over TP",
                            detail={"tp": tp, "pp": dep.pp, "headroom": plan.headroom})
        stopped = plan.binding
    return Solution(None, stopped, "search over TP")


def fit_all(spec: ModelSpec, dep: Deployment, context: int, batch: int = 1
            ) -> list[tuple[HardwareProfile, FitPlan, Solution]]:
    """Every bundled device: the plan at `context` × `batch` and the largest context."""
    rows = []
    for hw in all_hardware():
        planner = Planner(spec, hw, dep)
        rows.append((hw, planner.plan(context, batch), planner.max_context(batch)))
    return rows


@dataclass(frozen=True)
class FitResult:
    """What `archcalc fit --gpu` reports: the plan and the three solvers."""

    plan: FitPlan
    solutions: dict[str, Solution]  # max_context, max_batch, min_gpus
    warnings: tuple[str, ...] = ()

    @property
    def fits(self) -> bool:
        return self.plan.fits

    def to_dict(self) -> dict:
        """The archcalc.fit/2 JSON document."""
        from archcalc.report.fit import fit_json

        return fit_json(self.plan, self.solutions, self.warnings)


@dataclass(frozen=True)
class FitAllResult:
    """What `archcalc fit --all-gpus` reports: per device, the plan and the largest context."""

    rows: list[tuple[HardwareProfile, FitPlan, Solution]]
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        from archcalc.report.fit import fit_all_json

        return fit_all_json(self.rows)


def solve(spec: ModelSpec, hardware: HardwareProfile, dep: Deployment, context: int, batch: int = 1) -> FitResult:
    """The plan at context × batch and the largest context, largest batch and fewest GPUs."""
    planner = Planner(spec, hardware, dep)
    solutions = {"max_context": planner.max_context(batch), "max_batch": planner.max_batch(context),
                 "min_gpus": min_gpus(spec, hardware, dep, context, batch)}
    return FitResult(planner.plan(context, batch), solutions, tuple(warnings(spec, dep, context)))


def compare_rows(hardware: HardwareProfile, context: int, batch: int, dep: Deployment):
    """compare's fit rows for one spec: {key: (label, unit, value)} of a single-GPU plan."""
    def rows(spec: ModelSpec) -> dict:
        planner = Planner(spec, hardware, dep)
        plan = planner.plan(context, batch)
        return {"fits": (f"fits one {hardware.name} at {context:,} × {batch}", "text", plan.fits),
                "memory_per_gpu": (f"memory on one {hardware.name} (weights, KV, activations, reserve)", "bytes",
                                   plan.total),
                "max_context_on_gpu": (f"largest context on one {hardware.name} at batch {batch}", "tokens",
                                       planner.max_context(batch).value)}

    return rows

