"""The Python API: one function per command, with the command line's defaults.

    import archcalc
    r = archcalc.size("llama-3.1-8b", context=8192)
    r.params.total, r.kv.bytes, r.to_dict()          # the `size --json` document
    archcalc.roofline("llama-3.1-8b", "h100", batch=8).predictions[0].tpot
    archcalc.fit("llama-3.1-70b", "h100", gpus=2, engine="vllm").fits
    archcalc.compare(["llama-3.1-8b", "qwen3-8b"], gpu="h100").to_dict()
    archcalc.lint("gemma-7b").findings[0].rule                # "ffn.ratio"
    archcalc.sweep("llama-3.1-8b", ["n_layers=16..48"], where=["params.total <= 8e9"]).rows

MODEL is a bundled name, a YAML spec, a Hugging Face config.json (or a folder
holding one) or a ModelSpec; GPU a bundled name or alias, a profile YAML or a
HardwareProfile.  Every result is typed, carries its `warnings` (a context
beyond the model's maximum, a config key archcalc did not use) and has
`.to_dict()`: the same JSON document the command prints with --json.  Bad
input raises archcalc.InputError with the one line the command would print.
The CLI (archcalc/cli/) is a thin layer over exactly these functions.
"""

from __future__ import annotations

from dataclasses import replace
from os import PathLike
from typing import TYPE_CHECKING, Union

from archcalc.errors import InputError

if TYPE_CHECKING:
    from archcalc.cost.compare import Comparison
    from archcalc.cost.roofline import RooflineResult
    from archcalc.cost.totals import SizeResult
    from archcalc.hardware.profile import HardwareProfile
    from archcalc.linter import LintResult
    from archcalc.serving.planner import FitAllResult, FitResult
    from archcalc.spec.model import ModelSpec
    from archcalc.training.plan import TrainPlan

Model = Union[str, "PathLike[str]", "ModelSpec"]
Gpu = Union[str, "PathLike[str]", "HardwareProfile"]


def load(model: Model) -> tuple[ModelSpec, list[str]]:
    """The spec of MODEL and the warnings of its config.json mapping report."""
    from archcalc.spec.catalog import load_model
    from archcalc.spec.model import ModelSpec

    if isinstance(model, ModelSpec):
        return model, []
    spec, mapping = load_model(str(model))
    return spec, list(mapping.warnings) if mapping else []


def load_gpu(gpu: Gpu) -> HardwareProfile:
    from archcalc.hardware.profile import HardwareProfile, load_hardware

    return gpu if isinstance(gpu, HardwareProfile) else load_hardware(str(gpu))


def size(model: Model, *, context: int | None = None, batch: int = 1, dtype: str = "bf16", kv_dtype: str = "bf16",
         flops_convention: str = "causal", weights: str | None = None) -> SizeResult:
    """Parameters, weight bytes, FLOPs and KV cache at `context` (default: the
    model's max context) × `batch` sequences; `weights` ("gguf:Q4_K_M") adds the
    checkpoint's tensor types and bytes ("mxfp4": gpt-oss's format)."""
    from archcalc.cost.totals import size as compute_size
    from archcalc.ops.conventions import CONVENTIONS
    from archcalc.ops.dtypes import KV_DTYPES, WEIGHT_DTYPES
    from archcalc.ops.workload import Workload
    from archcalc.spec.model import context_warnings

    _choice("--dtype", dtype, WEIGHT_DTYPES)
    _choice("--kv-dtype", kv_dtype, KV_DTYPES)
    _choice("--flops-convention", flops_convention, CONVENTIONS)
    if weights is not None:
        from archcalc.ops.checkpoints import WEIGHT_FORMATS

        _choice("--weights", weights, WEIGHT_FORMATS)
    _positive("--batch", batch, _limits().MAX_BATCH)
    if context is not None:
        _positive("--context", context, _limits().MAX_CONTEXT)
    spec, warnings = load(model)
    context = _context(context, spec)
    wl = Workload.forward(context, batch, weight_dtype=dtype, kv_dtype=kv_dtype)
    result = compute_size(spec, wl, CONVENTIONS[flops_convention])
    if weights is not None:
        from archcalc.ops.checkpoints import checkpoint_size

        result = replace(result, checkpoint=checkpoint_size(spec, result.ops, weights))
    return replace(result, warnings=tuple(warnings + context_warnings(spec, context)))


def roofline(model: Model, gpu: Gpu | None = None, *, prompt: int = 2048, context: int | None = None, batch: int = 1,
             gen: int = 256, dtype: str = "bf16", act_dtype: str = "bf16", kv_dtype: str = "bf16", tp: int = 1,
             gpus: int | None = None, measure: bool = False, device: str = "auto",
             repeats: int = 5) -> RooflineResult:
    """Prefill of `prompt` tokens, one decode step at `context` (default prompt + gen)
    and `gen` decode steps, per rate set of the device (peak, typical, calibrated),
    for one of `tp` tensor-parallel ranks (its share of every op plus the collectives).

    measure: also run every op of the prefill and the decode step as a real
    kernel on the local `device` (needs torch); every dtype is then the one the
    device runs (bf16, or fp32 on a CPU without bf16 units), and `gpu`
    defaults to `local` (this machine's calibration)."""
    from archcalc.cost.roofline import RooflineResult, predict, prefill_workload
    from archcalc.ops.dtypes import ACT_DTYPES, KV_DTYPES, WEIGHT_DTYPES
    from archcalc.ops.workload import Workload
    from archcalc.spec.model import context_warnings

    _choice("--dtype", dtype, WEIGHT_DTYPES)
    _choice("--act-dtype", act_dtype, ACT_DTYPES)
    _choice("--kv-dtype", kv_dtype, KV_DTYPES)
    lim = _limits()
    _counts(("--prompt", prompt, lim.MAX_CONTEXT), ("--batch", batch, lim.MAX_BATCH), ("--gen", gen, lim.MAX_CONTEXT),
            ("--tp", tp, lim.MAX_GPUS), ("--repeats", repeats, lim.MAX_REPEATS))
    _prompt_and_gen(prompt, gen)
    if gpus is not None and _positive("--gpus", gpus, lim.MAX_GPUS) % tp:
        raise InputError(None, "--gpus", f"{gpus} GPUs do not hold whole TP groups of {tp}; give a multiple of --tp")
    context = _decode_context(context, prompt, gen)
    spec, warnings = load(model)
    if tp > 1:
        from archcalc.serving.deployment import Deployment
        from archcalc.serving.planner import check_deployment

        check_deployment(spec, Deployment(gpus=tp, tp=tp))
    session = None
    if measure:
        if tp > 1:
            raise InputError(None, "--measure", "runs on one local device; measure with --tp 1")
        session = _measure_session(device, act_dtype)
        if dtype != session.dtype or act_dtype != session.dtype or kv_dtype != session.dtype:
            warnings.append(f"--measure runs every tensor in {session.dtype} on {session.name}; predictions use "
                            f"{session.dtype} weights, activations and KV cache too")
        dtype = act_dtype = kv_dtype = session.dtype
        warnings += list(session.notes)
    hw = load_gpu(gpu if gpu is not None else "local" if measure else _missing_gpu())
    if hw.calibration is not None and hw.calibration.dtype != act_dtype:
        warnings.append(f"the calibration of {hw.name} ran in {hw.calibration.dtype}, the prediction computes in "
                        f"{act_dtype}: calibrated rates are for {hw.calibration.dtype}")
    dtypes = {"weight_dtype": dtype, "act_dtype": act_dtype, "kv_dtype": kv_dtype}
    warnings += _fit_warnings(spec, hw, tp, max(prompt + gen, context), batch, dtype, kv_dtype)
    preds = predict(spec, hw, prompt=prompt, context=context, gen=gen, batch=batch, tp=tp, **dtypes)
    measured = ()
    if session is not None:
        from archcalc.measure.steps import measure_step

        measured = (measure_step(spec, prefill_workload(prompt, batch, **dtypes), "prefill", session, repeats),
                    measure_step(spec, Workload.decode(context, batch, **dtypes), "decode", session, repeats))
    return RooflineResult(spec, hw, prompt, context, batch, gen, preds,
                          tuple(warnings + context_warnings(spec, prompt + gen, context)), tp=tp,
                          gpus=gpus or tp, measured=measured)


def _fit_warnings(spec, hw, tp: int, context: int, batch: int, dtype: str, kv_dtype: str) -> list[str]:
    """roofline times a device; it says when the model would not fit there (the fit planner's
    plan, the default engine, at the longest context of the run) and the TP that would."""
    from archcalc.report.units import binary
    from archcalc.serving.deployment import Deployment
    from archcalc.serving.planner import Planner, min_gpus

    if hw.vendor == "local":  # a calibration-only device: its memory is unknown
        return []
    dep = Deployment(gpus=tp, tp=tp, weight_dtype=dtype, kv_dtype=kv_dtype)
    try:
        plan = Planner(spec, hw, dep).plan(context, batch)
    except InputError as e:  # the default engine cannot plan this model: the times stand, the fit is unchecked
        return [f"whether {spec.name} fits {tp} x {hw.name} was not checked ({dep.engine} engine): {e.message}"]
    if plan.fits:
        return []
    best = min_gpus(spec, hw, replace(dep, gpus=1, tp=None), context, batch)
    hint = (f"`archcalc fit` finds it fits with --tp {best.value}" if best.value
            else "it does not fit one node with TP 8 either (archcalc fit --gpus)")
    return [f"{spec.name} does not fit {tp} x {hw.name} at context {context:,} x batch {batch}: it needs "
            f"{binary(plan.total)} per GPU of {binary(plan.capacity)} ({dep.engine} engine); the times assume it fits; "
            f"{hint}"]


def calibrate(*, device: str = "auto", dtype: str = "bf16", quick: bool = False, out: str | PathLike | None = None,
              progress=None):
    """Measure this device (archcalc calibrate) and write the calibration: to
    `out`, else the per-user calibration directory.  Returns (path, Calibration)."""
    from pathlib import Path

    from archcalc.hardware.calibration import default_path, save_calibration

    # the device and dtype are checked before any measurement; nothing is written on error
    cal = _measure_module("archcalc.measure.calibrate").calibrate(device, dtype, quick=quick, progress=progress)
    return save_calibration(cal, Path(out) if out else default_path(cal)), cal


def _measure_session(device: str, dtype: str):
    return _measure_module("archcalc.measure.steps").session(device, dtype)


def _measure_module(name: str):
    """A module of archcalc.measure (the only torch importer), or one line saying what to install."""
    from importlib import import_module

    try:
        return import_module(name)
    except ImportError:
        raise InputError(None, "--measure", "needs torch: pip install 'archcalc[measure]'") from None


def _missing_gpu():
    raise InputError(None, "--gpu", "give a device: a bundled name or alias (archcalc hardware list), a profile or "
                                    "calibration YAML, or `local`")


def fit(model: Model, gpu: Gpu, *, gpus: int = 1, tp: int | None = None, context: int | None = None, batch: int = 1,
        dtype: str = "bf16", kv_dtype: str | None = None, engine: str = "vllm", gpu_memory_utilization: float = 0.9,
        max_num_batched_tokens: int | None = None, ubatch: int | None = None,
        reserve: float | str | None = None, weights: str | None = None, kv_unified: bool = True,
        swa_full: bool = False, block_size: int = 16, kv_dtype_v: str | None = None, mtp: bool = False,
        pp: int = 1, tensor_split: str | tuple[float, ...] | None = None, llamacpp_build: int | None = None,
        flash_attn: bool = True, vllm_version: str | None = None, prefix_caching: bool | None = None) -> FitResult:
    """The memory plan per GPU at `context` (default: the model's max) × `batch`,
    the verdict, and the largest context, largest batch and fewest GPUs.
    weights: a checkpoint format ("gguf:Q4_K_M") for the weights instead of `dtype`.
    mtp: also load the checkpoint's multi-token-prediction modules (for MTP speculative decoding).
    pp: vLLM pipeline stages; tensor_split: llama.cpp's share of the layers per GPU ("3,1");
    llamacpp_build: the llama.cpp build whose rules apply (bN; default the current); flash_attn: llama.cpp -fa;
    vllm_version: the vLLM release whose rules apply ("0.19.0"; default the newest read); prefix_caching:
    vLLM's --enable-prefix-caching (None: the release's default)."""
    from archcalc.serving.planner import solve

    spec, warnings, dep, context = _deployment(model, gpus, tp, context, batch, dtype, kv_dtype, engine,
                                               gpu_memory_utilization, max_num_batched_tokens, ubatch, reserve,
                                               weights, kv_unified, swa_full, block_size, kv_dtype_v, mtp, pp,
                                               tensor_split, llamacpp_build, flash_attn, vllm_version,
                                               prefix_caching)
    result = solve(spec, load_gpu(gpu), dep, context, batch)
    return replace(result, warnings=tuple(warnings) + result.warnings)


def fit_all_gpus(model: Model, *, gpus: int = 1, tp: int | None = None, context: int | None = None, batch: int = 1,
                 dtype: str = "bf16", kv_dtype: str | None = None, engine: str = "vllm",
                 gpu_memory_utilization: float = 0.9, max_num_batched_tokens: int | None = None,
                 ubatch: int | None = None, reserve: float | str | None = None,
                 weights: str | None = None, kv_unified: bool = True, swa_full: bool = False,
                 block_size: int = 16, kv_dtype_v: str | None = None, mtp: bool = False, pp: int = 1,
                 tensor_split: str | tuple[float, ...] | None = None, llamacpp_build: int | None = None,
                 flash_attn: bool = True, vllm_version: str | None = None,
                 prefix_caching: bool | None = None) -> FitAllResult:
    """`fit` on every bundled device: the plan and the largest context on each."""
    from archcalc.serving.planner import FitAllResult, fit_all
    from archcalc.serving.planner import warnings as fit_warnings

    spec, warnings, dep, context = _deployment(model, gpus, tp, context, batch, dtype, kv_dtype, engine,
                                               gpu_memory_utilization, max_num_batched_tokens, ubatch, reserve,
                                               weights, kv_unified, swa_full, block_size, kv_dtype_v, mtp, pp,
                                               tensor_split, llamacpp_build, flash_attn, vllm_version,
                                               prefix_caching)
    rows = fit_all(spec, dep, context, batch)
    return FitAllResult(rows, tuple(warnings + fit_warnings(spec, dep, context)))


def train(model: Model, gpu: Gpu, **options) -> TrainPlan:
    """Training MODEL on `gpu`: memory per rank, step time per rate set, the run's
    totals; the layout given (tp, pp, dp, ep, cp, zero / fsdp, recompute,
    micro_batch, grad_accum) or, with none of those, the fastest layout on `gpus`
    (or the fewest GPUs that fit, without `gpus`).  Options as `archcalc train`'s
    (training/plan.py: TrainOptions): seq, global_batch_tokens, optimizer,
    precision, grad_dtype, attention, tokens, price_per_gpu_hour, reserve, solve, top."""
    from archcalc.serving.deployment import parse_bytes
    from archcalc.training.plan import TrainOptions, plan

    spec, warnings = load(model)
    reserve = options.get("reserve")
    if isinstance(reserve, str):
        options["reserve"] = parse_bytes(reserve)
    unknown = set(options) - set(TrainOptions.__dataclass_fields__)
    if unknown:
        raise InputError(None, sorted(unknown)[0], f"not an option of train; valid: "
                                                   f"{', '.join(sorted(TrainOptions.__dataclass_fields__))}")
    result = plan(spec, load_gpu(gpu), TrainOptions(**options))
    return replace(result, warnings=tuple(warnings) + result.warnings)


def compare(models: list[Model], *, context: int = 8192, batch: int = 1, dtype: str = "bf16", kv_dtype: str = "bf16",
            gpu: Gpu | None = None, prompt: int = 2048, gen: int = 256, tp: int = 1, measure: bool = False,
            device: str = "auto", train_gpus: int | None = None) -> Comparison:
    """MODELS side by side, the first the baseline; with `gpu`, speed (per rate set, for
    one of `tp` ranks) and fit rows too; with `measure`, the prefill and decode step
    measured on the local `device` (roofline --measure); with `train_gpus`, each
    model's fastest training layout on that many GPUs (train's solver) and its step."""
    from archcalc.cost.compare import compare as run_compare
    from archcalc.ops.dtypes import KV_DTYPES, WEIGHT_DTYPES
    from archcalc.serving.deployment import Deployment
    from archcalc.serving.planner import compare_rows
    from archcalc.spec.model import context_warnings

    if not models:
        raise InputError(None, "MODELS", "give at least one model")
    _choice("--dtype", dtype, WEIGHT_DTYPES)
    _choice("--kv-dtype", kv_dtype, KV_DTYPES)
    lim = _limits()
    _counts(("--context", context, lim.MAX_CONTEXT), ("--batch", batch, lim.MAX_BATCH),
            ("--prompt", prompt, lim.MAX_CONTEXT), ("--gen", gen, lim.MAX_CONTEXT), ("--tp", tp, lim.MAX_GPUS))
    _prompt_and_gen(prompt, gen)
    loaded = [load(m) for m in models]
    specs = [spec for spec, _ in loaded]
    warnings = [w for spec, ws in loaded for w in ws + context_warnings(spec, context)]
    hw = load_gpu(gpu) if gpu is not None else None
    rows = compare_rows(hw, context, batch, Deployment(weight_dtype=dtype, kv_dtype=kv_dtype)) if hw else None
    if train_gpus is not None:
        from archcalc.training.plan import compare_rows as train_rows

        if hw is None:
            raise InputError(None, "--train-gpus", "training rows need a device: add --gpu NAME")
        _counts(("--train-gpus", train_gpus, lim.MAX_GPUS))
        serving, training = rows, train_rows(hw, train_gpus)
        rows = lambda spec: {**serving(spec), **training(spec)}  # noqa: E731
    if tp > 1:
        from archcalc.serving.planner import check_deployment

        for spec in specs:
            check_deployment(spec, Deployment(gpus=tp, tp=tp))
    measured = None
    if measure:
        def measured(spec):
            r = roofline(spec, gpu if gpu is not None else "local", prompt=prompt, context=prompt + gen,
                         batch=batch, gen=gen, measure=True, device=device)
            warnings.extend(r.warnings)
            return tuple(m.time for m in r.measured)

    result = run_compare(specs, context=context, batch=batch, dtype=dtype, kv_dtype=kv_dtype, hw=hw, prompt=prompt,
                         gen=gen, tp=tp, fit_metrics=rows, measured=measured)
    return replace(result, warnings=tuple(warnings))


def lint(model: Model) -> LintResult:
    """MODEL against the conventions of published models: findings with evidence and severity."""
    from archcalc.linter import LintResult
    from archcalc.linter import lint as lint_spec

    spec, warnings = load(model)
    return LintResult(spec, lint_spec(spec), tuple(warnings))


def sweep(model: Model, vary: list[str], *, where: list[str] = (), minimize: str | None = None,
          maximize: str | None = None, pareto: str | None = None, top: int = 20, samples: int | None = None,
          seed: int = 0, context: int | None = None, batch: int = 1, dtype: str = "bf16", kv_dtype: str = "bf16",
          flops_convention: str = "causal", gpu: Gpu | None = None, rates: str | None = None,
          tp: int = 1, columns: list[str] = (), progress=None):
    """Candidates of MODEL with `vary` fields over their values ("d_model=1024:8192:128"),
    kept by `where` constraints ("params.total <= 8e9"), ordered by an objective or
    the Pareto front of two metrics ("params.active,kv_cache.bytes_per_token").
    Times use the GPU's `rates` set: "typical" where its profile has one, else "peak",
    for one of `tp` tensor-parallel ranks."""
    from archcalc.cost.rates import rate_sets
    from archcalc.ops.conventions import CONVENTIONS
    from archcalc.ops.dtypes import KV_DTYPES, WEIGHT_DTYPES
    from archcalc.ops.workload import Workload
    from archcalc.search import run, space
    from archcalc.search.metrics import Settings, metric_named
    from archcalc.search.where import parse_where

    _choice("--dtype", dtype, WEIGHT_DTYPES)
    _choice("--kv-dtype", kv_dtype, KV_DTYPES)
    _choice("--flops-convention", flops_convention, CONVENTIONS)
    if not vary:
        raise InputError(None, "--vary", "give at least one FIELD=VALUES")
    if sum(x is not None for x in (minimize, maximize, pareto)) > 1:
        raise InputError(None, "--minimize", "give one of --minimize, --maximize and --pareto")
    lim = _limits()
    _whole("--top", top, 0, lim.MAX_SAMPLES, " (0: every feasible one)")
    _whole("--seed", seed, 0, lim.MAX_SEED)
    if samples is not None:
        _positive("--samples", samples, lim.MAX_SAMPLES)
    _counts(("--batch", batch, lim.MAX_BATCH), ("--tp", tp, lim.MAX_GPUS))
    if context is not None:
        _positive("--context", context, lim.MAX_CONTEXT)
    spec, _ = load(model)
    if spec.attention.grouped:  # their ops are built group by group over the layer list, not over arrays
        raise InputError(None, "MODEL", f"{spec.name}'s attention differs in shape from layer to layer (per-kind "
                         "heads or head_dim, K/V sharing): not swept; size, fit and roofline read it")
    if spec.loop is not None or spec.shared_block is not None:  # the array path: one set of weights a layer run
        raise InputError(None, "MODEL", f"{spec.name} runs its layers more than once with the same weights (a loop): "
                         "not swept; size, fit and roofline read it")
    settings = Settings(context=_context(context, spec), batch=batch, dtype=dtype, kv_dtype=kv_dtype,
                        convention=flops_convention, tp=tp)
    if gpu is not None:
        hw = load_gpu(gpu)
        sets = {r.label: r for r in rate_sets(hw, Workload(weight_dtype=dtype, kv_dtype=kv_dtype))}
        label = rates or ("typical" if "typical" in sets else "peak")
        _choice("--rates", label, [k for k in sets if k != "calibrated"])
        settings.rates, settings.hardware = sets[label], hw
    elif rates is not None or tp != 1:
        raise InputError(None, "--rates" if rates is not None else "--tp", "applies to times and fit: give a --gpu")
    objective = None
    if minimize or maximize:
        objective = run.Objective(metric_named(minimize or maximize, "--minimize" if minimize else "--maximize"),
                                  "min" if minimize else "max")
    front = None
    if pareto is not None:
        front = tuple(run.pareto_axis(n.strip()) for n in pareto.split(","))
        if len(front) != 2 or front[0].metric == front[1].metric:
            raise InputError(None, "--pareto", f"{pareto!r}: name two different metrics, A,B")
    for name in columns:
        metric_named(name, "--columns")
    req = run.Request(spec, [space.parse_vary(v) for v in vary], settings, [parse_where(w) for w in where],
                      objective, front, top, samples, seed, tuple(columns))
    result = run.run(req, progress)
    if not result.rows:
        raise InputError(None, "--where" if result.candidates > result.invalid_total else "--vary", result.why_empty())
    return result


# ---- shared checks ---------------------------------------------------------------------------


def _choice(option: str, value: str, valid) -> None:
    if not isinstance(value, str) or value not in valid:
        raise InputError(None, option, f"{_shown(value)} is not valid; valid: {', '.join(valid)}")


def _counts(*checks: tuple[str, object, int]) -> None:
    """(option, value, most) triples: each a whole number from 1 to most."""
    for name, value, most in checks:
        _positive(name, value, most)


def _limits():
    """The bounds of every count (limits.py: MAX_CONTEXT, MAX_BATCH, MAX_GPUS, ...)."""
    from archcalc import limits

    return limits


def _whole(option: str, value, least: int, most: int, note: str = "") -> int:
    # bool is an int in Python; a flag where a count belongs is a mistake, as is "8" or 8.0.
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise InputError(None, option, f"{_shown(value)} is not valid; give a whole number from {least:,} to "
                                       f"{most:,}{note}")
    return value


def _shown(value) -> str:
    """repr for an error line: short, and never a 4,300-digit int (whose str raises)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"a {value.bit_length()}-bit integer"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _positive(option: str, value, most: int) -> int:
    return _whole(option, value, 1, most)


def _context(context: int | None, spec) -> int:
    """`context` (checked by the caller), else the model's max context."""
    if context is not None:
        return context
    return _whole("--context", spec.max_context, 1, _limits().MAX_CONTEXT,
                  f" (the default, {spec.name}'s max_context, is out of range: give --context)")


def _prompt_and_gen(prompt: int, gen: int) -> None:
    """The last decode step attends to prompt + gen tokens: a context, so at most MAX_CONTEXT."""
    most = _limits().MAX_CONTEXT
    if prompt + gen > most:
        raise InputError(None, "--gen", f"--prompt {prompt:,} + --gen {gen:,} = {prompt + gen:,} tokens of context; "
                                        f"at most {most:,} in all")


def _decode_context(context: int | None, prompt: int, gen: int) -> int:
    """The context of the decode step shown: one of the `gen` steps after the `prompt`, so prompt+1 … prompt+gen
    (each step's new token attends to the prompt and every token before it); default the last, prompt + gen."""
    if context is None:
        return prompt + gen
    _positive("--context", context, _limits().MAX_CONTEXT)
    if not prompt < context <= prompt + gen:
        raise InputError(None, "--context", f"{context:,} is not a decode step of this run: after a {prompt:,}-token "
                                            f"prompt the {gen:,} generated tokens attend to {prompt + 1:,} to "
                                            f"{prompt + gen:,} tokens; give --context in that range, or change "
                                            "--prompt or --gen")
    return context


def _fraction(option: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise InputError(None, option, f"{_shown(value)} is not valid; give a number in (0, 1]")
    return float(value)


def _flag(option: str, value, unset_ok: bool = False) -> bool | None:
    """A switch given to the API: True or False (None too where it means the engine's default); never a
    string or number read as a truth value ("false" would be True)."""
    if (value is None and unset_ok) or isinstance(value, bool):
        return value
    raise InputError(None, option, f"{_shown(value)} is not valid; give True or False"
                     + (" (or None: the default)" if unset_ok else ""))


def _deployment(model, gpus, tp, context, batch, dtype, kv_dtype, engine, gpu_memory_utilization,
                max_num_batched_tokens, ubatch, reserve, weights=None, kv_unified=True, swa_full=False,
                block_size=16, kv_dtype_v=None, mtp=False, pp=1, tensor_split=None, llamacpp_build=None,
                flash_attn=True, vllm_version=None, prefix_caching=None):
    """The spec, its load warnings, a checked Deployment and the context (default: the model's max)."""
    from archcalc.serving.deployment import Deployment, check_reserve, parse_bytes, parse_split, parse_version
    from archcalc.serving.planner import check_deployment

    lim = _limits()
    _positive("--gpus", gpus, lim.MAX_GPUS)
    _positive("--batch", batch, lim.MAX_BATCH)
    _positive("--pp", pp, lim.MAX_GPUS)
    if llamacpp_build is not None:
        _positive("--llamacpp-build", llamacpp_build, 10**6)
    if context is not None:
        _positive("--context", context, lim.MAX_CONTEXT)
    if tensor_split is not None:
        if isinstance(tensor_split, (tuple, list)):  # the API's (3, 1): read as the CLI's "3,1"
            tensor_split = ",".join(map(str, tensor_split))
        tensor_split = parse_split(tensor_split)
        if gpus == 1 and tp is None:  # --tensor-split alone: one GPU per proportion
            gpus = len(tensor_split)
    if tp is not None:
        _positive("--tp", tp, lim.MAX_GPUS)
    if gpus == 1 and (tp or 1) * pp > 1:  # --tp / --pp alone: that many GPUs
        gpus = (tp or 1) * pp
    options = {"max_num_batched_tokens": max_num_batched_tokens, "ubatch": ubatch}
    options = {k: _positive(f"--{k.replace('_', '-')}", v, lim.MAX_TOKENS_PER_STEP)
               for k, v in options.items() if v is not None}
    reserve = parse_bytes(reserve) if isinstance(reserve, str) else check_reserve(reserve)
    spec, warnings = load(model)
    dep = Deployment(engine=engine, gpus=gpus, tp=tp, weight_dtype=dtype, kv_dtype=kv_dtype, weights=weights,
                     kv_unified=_flag("--kv-unified", kv_unified), swa_full=_flag("--swa-full", swa_full),
                     block_size=block_size, kv_dtype_v=kv_dtype_v, mtp=_flag("--mtp", mtp), pp=pp,
                     tensor_split=tensor_split, engine_build=llamacpp_build,
                     flash_attn=_flag("--flash-attn", flash_attn),
                     vllm_version=None if vllm_version is None else parse_version(vllm_version),
                     prefix_caching=_flag("--enable-prefix-caching", prefix_caching, unset_ok=True),
                     gpu_memory_utilization=_fraction("--gpu-memory-utilization", gpu_memory_utilization),
                     reserve=reserve, **options)
    check_deployment(spec, dep)
    return spec, warnings, dep, _context(context, spec)
