"""From options to an answer: the layout a user gave (checked), or the one a solver finds.

What `archcalc train` and `archcalc.train()` run: the defaults of the
command line, the recipe from the spec's `training:` section where it has
one (dropout, z-loss, token budget, trained context), and the warnings a
plan carries.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from archcalc.errors import InputError
from archcalc.hardware.profile import HardwareProfile
from archcalc.limits import MAX_CONTEXT
from archcalc.spec.model import ModelSpec
from archcalc.training.layout import DEFAULT_SEQ, Layout, Recipe, check, check_choices, check_split, derive_dp
from archcalc.training.solver import Solved, fastest, fewest_gpus
from archcalc.training.step import TrainResult, train

TRAIN_SCHEMA = "archcalc.train/1"
DEFAULT_BATCH_TOKENS = 2**22  # ~4M tokens per step: Llama 2's and Llama 3's pretraining batch
SOLVE_GOALS = ("auto", "layout", "gpus", "none")


@dataclass(frozen=True)
class TrainPlan:
    result: TrainResult  # the layout given, or the solver's best
    solved: Solved | None = None
    warnings: tuple[str, ...] = ()
    layout_given: bool = True

    def to_dict(self) -> dict:
        from archcalc.report.train import train_json

        return train_json(self)


@dataclass(frozen=True)
class TrainOptions:
    """Everything the command line takes, None where it was not given."""

    gpus: int | None = None
    seq: int | None = None
    global_batch_tokens: int | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    ep: int | None = None
    cp: int = 1
    zero: int | None = None
    fsdp: bool = False
    recompute: str | None = None
    sequence_parallel: bool = True
    optimizer: str = "adamw"
    precision: str = "bf16-mixed"
    grad_dtype: str = "fp32"
    attention: str = "flash"
    tokens: float | None = None
    price_per_gpu_hour: float | None = None
    reserve: float | None = None
    solve: str = "auto"
    top: int = 5

    @property
    def layout_given(self) -> bool:
        return any(v is not None for v in (self.tp, self.pp, self.dp, self.ep, self.zero, self.recompute,
                                           self.micro_batch, self.grad_accum)) or self.fsdp


def recipe_of(spec: ModelSpec, o: TrainOptions) -> Recipe:
    t = spec.training
    seq = o.seq or (t.context if t and t.context else DEFAULT_SEQ)
    if o.global_batch_tokens is not None:
        if o.global_batch_tokens % seq:
            raise InputError(None, "--global-batch", f"{o.global_batch_tokens:,} tokens are not a whole number of "
                                                     f"{seq:,}-token sequences")
        sequences = o.global_batch_tokens // seq
    elif o.grad_accum is not None:
        sequences = (o.micro_batch or 1) * o.grad_accum * (o.dp or 1)
    else:
        sequences = max(1, DEFAULT_BATCH_TOKENS // seq)
    kw = {} if o.reserve is None else {"reserve": o.reserve}
    return Recipe(seq=seq, global_batch=sequences, optimizer=o.optimizer, precision=o.precision,
                  grad_dtype=o.grad_dtype, attention=o.attention, dropout=t.dropout if t else 0.0,
                  z_loss=bool(t and t.z_loss), tokens=o.tokens if o.tokens is not None else (t.tokens if t else None),
                  price_per_gpu_hour=o.price_per_gpu_hour, **kw)


def layout_of(spec: ModelSpec, o: TrainOptions, recipe: Recipe) -> Layout:
    zero = 3 if o.fsdp else o.zero
    if o.fsdp and o.zero not in (None, 3):
        raise InputError(None, "--fsdp", f"FSDP is ZeRO stage 3; drop --zero {o.zero} or --fsdp")
    base = Layout(tp=o.tp or 1, pp=o.pp or 1, dp=o.dp or 1, cp=o.cp, ep=o.ep or 1,
                  zero=1 if zero is None else zero, micro_batch=o.micro_batch or 1,
                  recompute=o.recompute or "none", sequence_parallel=o.sequence_parallel)
    check_choices(base, recipe)
    check_split(spec, base, recipe)  # before dp is derived: a tp that cannot split the heads says so first
    if o.dp is None and o.gpus is not None:
        base = derive_dp(base, o.gpus)
    if zero is None and base.shard_ranks == 1:
        base = replace(base, zero=0)  # nothing to shard over
    return base


def warnings_of(spec: ModelSpec, hw: HardwareProfile, recipe: Recipe, layout: Layout) -> list[str]:
    out = []
    if spec.residual.kind in ("hyper", "mhc", "attnres") and layout.recompute == "full":
        out.append(f"full recomputation under residual {spec.residual.kind}: each layer keeps its residual "
                   "state (n streams; AttnRes also its block sums, not counted), by analogy with a standard "
                   "residual; the reference model does not checkpoint this scheme")
    if recipe.seq > spec.max_context:
        out.append(f"sequence {recipe.seq:,} is beyond {spec.name}'s max context {spec.max_context:,}")
    if layout.gpus > 1 and hw.interconnect is None:
        out.append(f"{hw.name} has no interconnect in its profile: collectives use the network's 50 GB/s")
    if spec.attention.kind == "mla" and recipe.attention == "flash":
        out.append("MLA under flash attention: q/k and v head dims differ; the rule is FlashAttention's "
                   "(q, k, v, output, log-sum-exp), which torch's CPU kernel cannot confirm")
    if recipe.precision == "fp8" and "fp8" not in hw.peak_flops:
        out.append(f"{hw.name} has no fp8 tensor rate: fp8 matmuls are timed at bf16")
    return out


def unplanned(spec: ModelSpec) -> str | None:
    """The first part of the model whose saved tensors no test pins (the reference model lacks it; the forward
    counts are pinned on transformers), which train therefore refuses; None: every part is planned."""
    a, r = spec.attention, spec.residual
    parts = (
        (spec.ffn.activation == "xielu", "xIELU activation"),
        (spec.linear is not None or "none" in spec.layer_attention or spec.ffn.none_layers,
         "linear-attention layers or single-sublayer blocks"),
        (r.kind == "altup" or r.laurel_rank is not None, "AltUp streams and LAuReL branches"),
        (spec.head_transform is not None, "prediction head before the unembedding (ModernBERT)"),
        (spec.loop is not None or spec.shared_block is not None,
         "layers run more than once with the same weights (a loop, a shared block)"),
        (a.differential, "differential attention (two attention calls a layer)"),
        (a.compressed is not None, "compressed sparse attention (DeepSeek-V4's compressors and indexer)"),
        (a.separate_gate or not r.mix or r.head,
         "separate gate projection or hyper-connections without the stream mix or with a learned head (HY-V4)"),
        (a.dynamic_mask is not None, "dynamic mask attention (Doge)"),
        (spec.ffn.product_key is not None, "product-key experts (Doge's cross-domain MoE)"),
        (a.experts is not None, "attention experts (JetMoE)"),
        (a.relative is not None or a.kv_conv is not None or r.output_conv is not None,
         "relative logits and short convolutions (Inkling)"),
        (a.indexer is not None, "sparse-attention indexer (trained on its own detached loss)"),
        (a.local_mla is not None or a.rope_key_norm, "MLA of two geometries and a rope-key norm (dots3-note)"),
        (a.qk_norm == "clip" or a.sink_proj or r.attnres_form != "paper",
         "clipped q/k heads, sinks from the input and block attention residuals of Inkling 2's form (Inkling 2)"),
        (spec.norm.kind == "l2" or r.kind == "interpolate" or a.query_scale or a.gate_scale or spec.ffn.scales
         or spec.logit_scale, "L2 norms, interpolating residual and nGPT scales (Dory)"),
        (a.cca is not None or a.key_scale or r.affine or (spec.ffn.moe is not None and spec.ffn.moe.router_mlp),
         "compressed convolutional attention, router MLP and residual scaling (ZAYA1)"),
    )
    return next((what for hit, what in parts if hit), None)


def plan(spec: ModelSpec, hw: HardwareProfile, o: TrainOptions) -> TrainPlan:
    if o.solve not in SOLVE_GOALS:
        raise InputError(None, "--solve", f"{o.solve!r}; valid: {', '.join(SOLVE_GOALS)}")
    if o.seq is not None and not 1 <= o.seq <= MAX_CONTEXT:
        raise InputError(None, "--seq", f"{o.seq}; give 1 to {MAX_CONTEXT:,}")
    if spec.drafter is not None:
        raise InputError(None, "MODEL", f"{spec.name} is a drafter: it trains on its target model's hidden states and "
                         "cache, which train does not hold (size and roofline describe it)")
    what = unplanned(spec)
    if what is not None:
        raise InputError(None, "MODEL", f"{spec.name}'s {what}: what it keeps for backward is not modelled yet, so "
                         "train cannot plan it (size, fit, roofline and compare can)")
    recipe = recipe_of(spec, o)
    base = layout_of(spec, o, recipe)
    goal = o.solve
    if goal == "auto":
        goal = "none" if o.layout_given else ("layout" if o.gpus else "gpus")
    if goal == "none":
        check(spec, base, recipe, o.gpus)
        result = train(spec, hw, base, recipe)
        return TrainPlan(result, None, tuple(warnings_of(spec, hw, recipe, base)), True)
    check(spec, replace(base, tp=1, pp=1, dp=1, ep=1, zero=0, micro_batch=1), replace(recipe, global_batch=1))
    if goal == "layout":
        if o.gpus is None:
            raise InputError(None, "--gpus", "the fastest layout needs a GPU count; give --gpus N (or --solve gpus)")
        if o.gpus % o.cp:
            raise InputError(None, "--cp", f"{o.cp} does not divide {o.gpus} GPUs")
        solved = fastest(spec, hw, o.gpus, recipe, base, o.top)
    else:
        solved = fewest_gpus(spec, hw, recipe, base, o.top)
    if solved.best is None:
        raise InputError(None, "--gpus", f"no layout of {o.gpus:,} {hw.name} GPUs fits {spec.name} at "
                                         f"{recipe.seq:,} tokens × {recipe.global_batch:,} sequences "
                                         f"({solved.tried:,} tried); try more GPUs or --solve gpus")
    best = solved.best
    return TrainPlan(best.result, solved, tuple(warnings_of(spec, hw, recipe, best.layout)), False)


def compare_rows(hw: HardwareProfile, gpus: int, seq: int | None = None):
    """`compare --train-gpus`: each model's fastest training layout on `gpus` GPUs, as
    {key: (label, unit, value)} rows (cost/compare.py); "does not fit" when none does."""
    def rows(spec: ModelSpec) -> dict:
        try:
            p = plan(spec, hw, TrainOptions(gpus=gpus, seq=seq, solve="layout", top=0))
        except InputError as e:
            p, why = None, e.message
        where = f"on {gpus:,} × {hw.name}"
        if p is None:
            text = "no layout fits" if "no layout" in why else why
            return {"train_layout": (f"training layout {where}", "text", text),
                    "train_memory": ("training memory per GPU", "bytes", None),
                    "train_step_s": ("training step (best rates)", "seconds", None),
                    "train_tokens_per_s": ("training tokens/s", "per_s", None),
                    "train_gpu_hours": ("training GPU-hours (20 tokens/param)", "count", None)}
        r = p.result
        best, run = r.steps[-1], r.runs[-1]
        return {"train_layout": (f"training layout {where}", "text", r.layout.describe()),
                "train_memory": ("training memory per GPU", "bytes", r.memory.total),
                "train_step_s": (f"training step ({best.rates.label}, {r.recipe.global_batch * r.recipe.seq:,} "
                                 "tokens)", "seconds", best.time),
                "train_tokens_per_s": (f"training tokens/s ({best.rates.label})", "per_s", best.tokens_per_s),
                "train_gpu_hours": ("training GPU-hours (the run's tokens)", "count", run.gpu_hours)}
    return rows
