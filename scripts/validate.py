"""Regenerate docs/validation.md: archcalc's predicted times against measurements.

1. On this machine's device (cpu, or cuda where there is one): calibrate,
   then for three real architectures shrunk to fit (Llama-3.2-style GQA,
   Gemma-2-style sliding/global layers, a Qwen-MoE-style mixture of experts)
   and a set of prefill and decode shapes, hold every prediction (peak,
   typical where the device has sourced efficiencies, calibrated) against
   - every op of the list run as a real kernel (`--measure`, per op class),
   - the whole step of archcalc's reference torch model with its KV cache,
   - the whole step of the Hugging Face transformers model built from the
     same config.json (random weights, SDPA, its own cache): an
     implementation we did not write.
2. The typical and peak columns against published measurements
   (docs/data/published_speed.yaml, scripts/published.py).

Run:  python scripts/validate.py [--device auto|cpu|cuda] [--quick] [--calibration FILE] [--runs 3]
                                [--out docs/validation.md]
It prints where it is, writes the page, and keeps the calibration it made
beside the page (docs/calibration-<device>.yaml).  On Linux it re-runs itself
under a reusing allocator (archcalc.measure.endtoend.REUSING_MALLOC) unless
GLIBC_TUNABLES or an LD_PRELOADed jemalloc / TCMalloc already sets one.
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import published  # noqa: E402

from archcalc.cost.totals import size  # noqa: E402
from archcalc.cost.roofline import prefill_workload, rate_sets, step  # noqa: E402
from archcalc.hardware.calibration import load_calibration, save_calibration  # noqa: E402
from archcalc.hardware.profile import calibrated_profile  # noqa: E402
from archcalc.measure.calibrate import TORCH_DTYPES, calibrate  # noqa: E402
from archcalc.measure.endtoend import REUSING_MALLOC, time_hf, time_reference  # noqa: E402
from archcalc.measure.steps import measure_step, session  # noqa: E402
from archcalc.ops.conventions import CONVENTIONS  # noqa: E402
from archcalc.ops.workload import Workload  # noqa: E402
from archcalc.spec.catalog import spec_from_dict  # noqa: E402
from archcalc.spec.hf import spec_dict_from_config  # noqa: E402

HF = ROOT / "tests" / "data" / "hf"

# Real configs shrunk to fit a 2-core CPU in seconds, yet with weights well
# beyond the last-level cache (8-24 MB per layer): every other key as published.
SHRUNK = {
    "llama-3.2-1b (GQA 16/4, SwiGLU, tied)": ("llama-3.2-1b.json", {
        "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 16,
        "num_key_value_heads": 4, "head_dim": 64, "vocab_size": 32000}),
    "gemma-2-9b (sliding 1:1, window 256, softcaps)": ("gemma-2-9b.json", {
        "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 8,
        "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 32000, "sliding_window": 256}),
    "qwen1.5-moe-a2.7b (16 experts top-4, shared expert)": ("qwen1.5-moe-a2.7b.json", {
        "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 16,
        "moe_intermediate_size": 512, "shared_expert_intermediate_size": 2048, "num_experts": 16,
        "num_experts_per_tok": 4, "vocab_size": 32000, "intermediate_size": 2048}),
}
# Full size, for a GPU that holds them (random weights, bf16): every key as published.
REAL = {
    "llama-3.1-8b (GQA 32/8, SwiGLU)": ("llama-3.1-8b.json", {}),
    "gemma-2-9b (sliding 1:1, window 4096, softcaps)": ("gemma-2-9b.json", {}),
    "qwen1.5-moe-a2.7b (60 experts top-4, shared expert)": ("qwen1.5-moe-a2.7b.json", {}),
}
# (phase, batch, prompt or context)
SHAPES = [("prefill", 1, 128), ("prefill", 1, 512), ("prefill", 4, 256), ("decode", 1, 512), ("decode", 4, 512),
          ("decode", 1, 2048)]
REAL_SHAPES = [("prefill", 1, 512), ("prefill", 1, 4096), ("prefill", 8, 1024), ("decode", 1, 2048),
               ("decode", 1, 8192), ("decode", 32, 2048)]
GEN = 8  # decode steps timed end to end (the median step is kept)
OP_CLASSES = ("matmul", "attention", "norm", "elementwise", "gather")
MEASURED = ("kernels", "reference", "hf")


def model_config(name: str, models: dict) -> tuple[dict, object]:
    """The config.json dict of a validation model (with its overrides) and archcalc's spec of it."""
    file, over = models[name]
    cfg = {**json.loads((HF / file).read_text()), **over}
    if over:
        cfg.pop("layer_types", None)  # recomputed by transformers for the new depth
    data, _ = spec_dict_from_config(copy.deepcopy(cfg), file)
    data["name"] = name.split(" ")[0] + ("-shrunk" if over else "")
    return cfg, spec_from_dict(data, file)


def stats(errors: list[float]) -> str:
    if not errors:
        return "—"
    a = [abs(e) for e in errors]
    return f"{statistics.median(a):.0%} / {max(a):.0%}"


def measure(args) -> dict:
    """Calibrate (or reuse a calibration), then measure every case; the results as one JSON-able dict,
    written to args.json after every case so that a run stopped part-way keeps what it measured."""
    s = session(args.device, "bf16")
    tdtype = TORCH_DTYPES[s.dtype]
    real = args.size == "real" or (args.size == "auto" and s.device.type == "cuda")
    models, shapes = (REAL, REAL_SHAPES) if real else (SHRUNK, SHAPES)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    if args.calibration:
        cal = load_calibration(Path(args.calibration))
    else:
        print("calibrating ...", flush=True)
        cal = calibrate(s.device.type, s.dtype, quick=args.quick)
        save_calibration(cal, ROOT / "docs" / f"calibration-{s.device.type}.yaml")
    t_cal = time.perf_counter() - t0
    hw = calibrated_profile(cal)
    try:
        import transformers
        hf_version = transformers.__version__
    except ImportError:
        hf_version = None
    results = {
        "schema": "archcalc.validation/1",
        "date": f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M}",
        "device": {"name": cal.device.name, "kind": cal.device.kind, "threads": cal.device.threads,
                   "host": platform.platform(), "profile": hw.name},
        "versions": {"torch": torch.__version__, "transformers": hf_version, "python": platform.python_version()},
        "dtype": s.dtype, "notes": list(s.notes), "allocator": allocator(),
        "calibration": {"quick": args.quick, "reused": args.calibration, "seconds": t_cal,
                        "best_matmul_flops": max(2 * p.m * p.k * p.n / p.seconds for p in cal.matmul),
                        "read_bytes_per_s": cal.bandwidth.read_bytes_per_s,
                        "copy_bytes_per_s": cal.bandwidth.copy_bytes_per_s, "launch_s": cal.launch_s,
                        "dispatch_s": cal.dispatch_s, "step_host_s": cal.step_host_s,
                        "step_slowdown": cal.step_slowdown},
        "size": "real" if real else "shrunk", "runs": args.runs, "gen": GEN, "measure_seconds": 0.0,
        "cases": [],
    }
    for name in models:
        if args.models and not any(m in name for m in args.models):
            continue
        cfg, spec = model_config(name, models)
        rates = rate_sets(hw, Workload(weight_dtype=s.dtype, act_dtype=s.dtype, kv_dtype=s.dtype))
        for phase, batch, length in shapes[: args.limit]:
            print(f"{name}: {phase} batch {batch} × {length}", flush=True)
            case = {"model": name, "phase": phase, "batch": batch, "tokens": length}
            try:
                case.update(measure_case(spec, cfg, name, phase, batch, length, rates, s, tdtype, args, results))
            except Exception as e:  # a case that fails is recorded and the run goes on (one GPU lease)
                traceback.print_exc()
                case["error"] = f"{type(e).__name__}: {e}"
            results["cases"].append(case)
            if args.json:
                Path(args.json).write_text(json.dumps(results, indent=1))
            if s.device.type == "cuda":
                torch.cuda.empty_cache()
    return results


def case_workload(phase: str, batch: int, length: int, dtype: str) -> Workload:
    """A prefill of `length` tokens, or the decode step after them, everything in `dtype`."""
    dtypes = {"weight_dtype": dtype, "act_dtype": dtype, "kv_dtype": dtype}
    return prefill_workload(length, batch, **dtypes) if phase == "prefill" else Workload.decode(length + 1, batch,
                                                                                                **dtypes)


def predict_case(spec, phase: str, batch: int, length: int, rates, dtype: str) -> dict:
    """Every rate set's prediction of one case, whole step and op by op (no measurement yet)."""
    dtypes = {"weight_dtype": dtype, "act_dtype": dtype, "kv_dtype": dtype}
    steps = [step(spec, case_workload(phase, batch, length, dtype), r) for r in rates]
    ops_out = [{"name": o.op.name, "kind": o.op.kind, "count": o.op.count, "flops": o.flops, "measured_s": None,
                "predicted_s": {st.rates.label: st.ops[i].time for st in steps}} for i, o in enumerate(steps[0].ops)]
    # What the HF run holds at its peak, as archcalc sizes it: the weights and the KV cache at the last
    # decode step's context (its activations are the rest of the measured peak).
    sized = size(spec, Workload(batch=batch, new_tokens=1, context=length + GEN, **dtypes), CONVENTIONS["causal"])
    return {
        "predicted_s": {st.rates.label: st.time for st in steps},
        "predicted_kernels_s": {st.rates.label: st.kernel_time for st in steps},
        "measured_s": {}, "flops": steps[0].flops, "ops": ops_out, "hf_peak_bytes": None,
        "weight_bytes": sized.weight_bytes[dtype], "kv_bytes": sized.kv.bytes,
    }


def measure_case(spec, cfg, name, phase, batch, length, rates, s, tdtype, args, results) -> dict:
    case = predict_case(spec, phase, batch, length, rates, s.dtype)
    wl = case_workload(phase, batch, length, s.dtype)
    samples = defaultdict(list)
    for _ in range(args.runs):  # the three measurements interleaved, the median of each kept
        t1 = time.perf_counter()
        m = measure_step(spec, wl, phase, s)
        results["measure_seconds"] += (time.perf_counter() - t1) / args.runs
        samples["kernels"].append(m.time)
        if args.kernels_only:
            continue
        hf = time_hf(cfg, prompt=length, batch=batch, decode_steps=GEN, device=str(s.device), dtype=tdtype,
                     attn_implementation="eager" if "gemma" in name else "sdpa")
        ref = time_reference(spec, prompt=length, batch=batch, decode_steps=GEN, device=str(s.device),
                             dtype=tdtype)
        samples["reference"].append(ref.prefill_s if phase == "prefill" else ref.decode_step_s)
        samples["hf"].append(hf.prefill_s if phase == "prefill" else hf.decode_step_s)
        case["hf_peak_bytes"] = hf.peak_bytes
        # each decode step's median over time_hf's repeats: where the step's median hides a drift
        case.setdefault("hf_decode_steps_s", []).append(list(hf.decode_steps_s))
    measured = m.by_name()
    for o in case["ops"]:
        o["measured_s"] = measured[o["name"]].seconds
    case["measured_s"] = {k: statistics.median(v) for k, v in samples.items()}
    return case


def page(r: dict, args) -> str:
    cases = [c for c in r["cases"] if "error" not in c]
    labels = list(cases[0]["predicted_s"]) if cases else []
    cpu = r["device"]["kind"] == "cpu"
    step_err: dict[tuple[str, str, str], list[float]] = defaultdict(list)  # (label, phase, what) -> errors
    class_err: dict[tuple[str, str], list[float]] = defaultdict(list)  # (label, class) -> errors
    share: dict[str, list[float]] = defaultdict(list)  # class -> measured time share (prefill)
    flop_share: dict[str, list[float]] = defaultdict(list)
    for c in cases:
        for label in labels:
            for what, t in c["measured_s"].items():  # lone kernels pay no framework overhead between them
                predicted = c["predicted_kernels_s"][label] if what == "kernels" else c["predicted_s"][label]
                step_err[(label, c["phase"], what)].append((predicted - t) / t)
        case_time, case_flops = defaultdict(float), defaultdict(float)
        for o in c["ops"]:
            if o["measured_s"] is None:
                continue
            for label in labels:
                class_err[(label, o["kind"])].append((o["predicted_s"][label] - o["measured_s"]) / o["measured_s"])
            case_time[o["kind"]] += o["measured_s"] / c["measured_s"]["kernels"]
            case_flops[o["kind"]] += o["flops"] / (c["flops"] or 1)
        if c["phase"] == "prefill" and "kernels" in c["measured_s"]:
            for k in OP_CLASSES:
                share[k].append(case_time[k])
                flop_share[k].append(case_flops[k])
    cal, dev = r["calibration"], r["device"]
    out = [
        "# Validation: predicted against measured time" + ("" if cpu else f" ({dev['name']})"),
        "",
        f"Generated by `python scripts/validate.py{' --quick' if cal['quick'] else ''}"
        f"{'' if cpu else ' --device cuda'}` on {r['date']} UTC"
        + (f" (this page re-rendered from `{args.from_json}`)" if args.from_json else "") + ".",
        "",
        f"- device: {dev['name']} ({dev['kind']}, profile `{dev['profile']}`), {dev['threads']} CPU threads, "
        f"{dev['host']}",
        f"- torch {r['versions']['torch']}, transformers {r['versions']['transformers']}, "
        f"Python {r['versions']['python']}, dtype {r['dtype']}" + (f" ({'; '.join(r['notes'])})" if r["notes"] else ""),
        f"- models: {'full size, random weights' if r['size'] == 'real' else 'real configs shrunk to fit'}",
        f"- allocator: {r['allocator']}" + (" (freed activations reused, not faulted in again: "
                                            "archcalc.measure.endtoend)" if cpu else ""),
        f"- calibration: {'quick grid' if cal['quick'] else 'full grid'}, {cal['seconds']:.0f} s"
        f"{' (reused ' + cal['reused'] + ')' if cal['reused'] else ''}; "
        f"best matmul {cal['best_matmul_flops'] / 1e9:.0f} GFLOP/s, read {cal['read_bytes_per_s'] / 1e9:.1f} GB/s, "
        f"copy {cal['copy_bytes_per_s'] / 1e9:.1f} GB/s, launch {cal['launch_s'] * 1e6:.2f} µs, "
        f"host {(cal.get('step_host_s') or 0) * 1e6:.0f} µs a step + dispatch {(cal['dispatch_s'] or 0) * 1e6:.1f} µs "
        f"a kernel, in-step slowdown "
        f"{(cal['step_slowdown'] or 0):+.1%}",
        f"- `--measure` of {sum('kernels' in c['measured_s'] for c in r['cases'])} of the {len(r['cases'])} steps: {r['measure_seconds']:.0f} s per pass; every case measured "
        f"{r['runs']} times (interleaved), the median kept",
    ]
    if r.get("whole_from"):
        w = r["whole_from"]
        out.append(f"- the whole steps (`reference`, `hf`, memory) come from an earlier run of the same script on "
                   f"the same machine ({w['date']} UTC, `{w['file']}`, {w['calibration']}); the kernels and "
                   "the calibration from this one")
    if r.get("predicted_with"):
        out.append(f"- every prediction recomputed by archcalc as of this page under `{r['predicted_with']}`")
    failed = [c for c in r["cases"] if "error" in c]
    if failed:
        out.append(f"- {len(failed)} case(s) failed and are left out: "
                   + "; ".join(f"{c['model'].split(' ')[0]} {c['phase']} {c['batch']} × {c['tokens']}: {c['error']}"
                               for c in failed))
    out += [
        "",
        "Errors are (predicted − measured) / measured; a table cell is median |error| / worst |error|. "
        + ("`peak` on a device without a datasheet (this CPU) is the best rate the calibration measured, "
           "so it is not a guaranteed bound here. This CPU has no `typical` column: no bundled profile describes "
           "it and no sourced efficiency exists for it." if cpu else
           "`peak` is the datasheet (a lower bound on time); `typical` the profile's sourced efficiencies "
           "(hardware/SOURCES.md); `calibrated` this run's calibration."),
        "",
        "## Whole steps",
        "",
        "Measured three ways: `kernels` = the sum of every op run alone as a torch kernel (`--measure`); "
        "`reference` = archcalc's plain-torch reference model with its KV cache (attention through SDPA, "
        "explicit for Gemma-2's soft-caps); `hf` = the Hugging Face "
        "transformers model of the same config.json (random weights, SDPA except Gemma-2, which HF runs eagerly; "
        f"its own DynamicCache). A decode step is the median of {r['gen']} steps after the prompt.",
        "",
        "| rates | phase | vs kernels | vs reference | vs hf |",
        "|---|---|---|---|---|",
    ]
    for label in labels:
        for phase in ("prefill", "decode"):
            out.append(f"| {label} | {phase} | " + " | ".join(stats(step_err[(label, phase, w)]) for w in MEASURED)
                       + " |")
    out += ["", "## Per op class (each op against its own kernel)", "",
            "| rates | " + " | ".join(OP_CLASSES) + " |", "|---|" + "---|" * len(OP_CLASSES)]
    for label in labels:
        out.append(f"| {label} | " + " | ".join(stats(class_err[(label, k)]) for k in OP_CLASSES) + " |")
    out += ["", "Prefill: measured share of the step's time beside the share of its FLOPs, by op class "
                "(mean over the cases):", "", "| class | time share | FLOP share |", "|---|---|---|"]
    for k in OP_CLASSES:
        if share[k]:
            out.append(f"| {k} | {statistics.mean(share[k]):.1%} | {statistics.mean(flop_share[k]):.2%} |")
    out += ["", "## Every case (seconds)", "",
            "| model | phase | batch × tokens | " + " | ".join(labels) + " | kernels | reference | hf |",
            "|---|---|---|" + "---|" * (len(labels) + 3)]
    for c in cases:
        out.append(f"| {c['model']} | {c['phase']} | {c['batch']} × {c['tokens']} | "
                   + " | ".join(f"{c['predicted_s'][label]:.4g}" for label in labels)
                   + " | " + " | ".join(f"{c['measured_s'][w]:.4g}" if w in c["measured_s"] else "—"
                                        for w in MEASURED) + " |")
    peaks = [c for c in cases if c.get("hf_peak_bytes")]
    if peaks:
        out += ["", "## Memory (CUDA)", "",
                "The Hugging Face run's peak allocated memory (`torch.cuda.max_memory_allocated`, weights included) "
                f"beside archcalc's weights and KV cache at the last step's context (prompt + {r['gen']}); the "
                "rest is activations, logits and workspace. GiB = 2^30 bytes.", "",
                "| model | phase | batch × tokens | measured peak (GiB) | weights (GiB) | KV cache (GiB) | rest (GiB) |",
                "|---|---|---|---|---|---|---|"]
        for c in peaks:
            g = 2**30
            out.append(f"| {c['model']} | {c['phase']} | {c['batch']} × {c['tokens']} | {c['hf_peak_bytes'] / g:.2f} | "
                       f"{c['weight_bytes'] / g:.2f} | {c['kv_bytes'] / g:.3f} | "
                       f"{(c['hf_peak_bytes'] - c['weight_bytes'] - c['kv_bytes']) / g:.2f} |")
    out += WHY_CPU if cpu else WHY_CUDA
    out += published_section()
    return "\n".join(out) + "\n"


WHY_CPU = """
## Why the misses

- **Since the last page** (an AMD EPYC VM, 2026-12-04, whose bf16 matmuls peaked at ~430 GFLOP/s;
  this one is an Intel Xeon VM at ~2,600): `calibrate` now times torch's grouped GEMM at expert
  shapes (8 experts, 1-256 rows each) and experts are predicted at that rate, not the plain matmul
  surface's. Qwen-MoE's decode against HF: -18 % to +6 % (the EPYC page: -16 % to -36 %); its
  experts' GEMMs run alone within 3 % in prefill and 21-26 % fast in decode at 4 x 512.
- **Llama is predicted 5-15 % fast in every case: short-k GEMVs.** At m = 1 this CPU streams a
  weight of k = 1024 at 14-16 GB/s and one of k >= 2048 at 21-23 GB/s (calibration: 1024 x 4096 in
  0.61 ms, 4096 x 1024 in 0.40 ms). The matmul surface is keyed by k·n and cannot tell the two
  apart, so the shrunk models' ffn.up (1024 x 8192) and lm_head (1024 x 32000) are predicted
  25-35 % fast in decode; the shrunk width (1024) makes this weigh more than at real widths.
- **MoE runs kernels the op list has not**: HF's router top-k, sort and scatter around the grouped
  GEMM (4 x 512 decode: 29.0 ms in HF for 21.5 ms of modelled kernels), and the reference model's
  one expert at a time with its index and index_add (1-26 % slower than HF), which is why the
  reference column's worst cases are the MoE's.
- **Eager attention's decode is predicted 37-56 % slow.** Its two matmuls are timed at the matmul
  surface and its passes at the calibrated elementwise bandwidth, but over a shrunk model's cache
  (a few MB, in the CPU's cache) they run faster than either; prefill attention is within -4 % to
  +21 %. On the H200 the same model is fast instead (docs/validation-h200.md).
- **Kernels Hugging Face runs that the op list has not.** RMSNorm upcast to fp32 (five kernels
  for one), rotate_half RoPE (a cat and two products), the DynamicCache's concatenation:
  elementwise passes over the activations, a few percent of a step.
- **matmul (worst)**: the thinnest projections (a MoE router of n = 16, a shared-expert gate of
  n = 1) sit below the grid's smallest shape (1024 x 32), where a matmul's fixed cost dominates.
- **norm, elementwise (worst)**: row kernels of one token are a microsecond or two, their launch;
  a microsecond of jitter is 100 %.
- **A busy machine inflates every timing**: `calibrate` and `--measure` note a CPU whose load
  average is half its cores or more when they start; this page was run on an idle machine (18 min
  for calibration, kernels, reference and HF), and the VM's memory bandwidth still drifts 10-20 %
  between runs.
- **Peak on this CPU** is the best rate the calibration measured, not a datasheet, so it is far
  from a bound here; on bundled GPUs peak is the datasheet and a strict lower bound (below).
""".splitlines()


WHY_CUDA = """
## Why the misses

- **The kernels are predicted well; eager steps are the host's.** Against the ops run alone, the
  calibrated kernel time is within 0-5 % for Llama-3.1-8B (decode 5.8 ms predicted, 5.6 ms
  measured) and 5-16 % for Gemma 2's prefills. A Hugging Face decode step took 23-31 ms (Llama)
  and 52-98 ms (Gemma 2) for 6-15 ms of GPU work (Gemma at batch 32: 76 ms): an eager step is bound
  by the host issuing ~450-680 kernels, one Python module at a time, while the device runs ahead
  (cost/roofline.step_time: max(kernels, host)).
- **The host's pace is the machine's, and it drifts.** `calibrate` fits the host's time per step
  over decode steps of a debug-sized Llama at several depths (fixed + per kernel × kernels). In this
  run's lease the fit (676 µs a step + 39 µs a kernel) predicts Llama-3.1-8B's decode step at
  18.2 ms, while HF's own step took 23.0, 31.2 and 29.8 ms in three cases of the same lease
  (-21 to -42 %). In the lease before (run 4, `docs/data/validation-h200-run4.json`) the same step
  took 44 ms and that lease's fit (39 µs + 99 µs a kernel) predicted 44.8 ms (0-3 %). A host-bound
  eager step on this shared VM moves by up to 2x between leases and 35 % within one, so no
  calibration predicts it better than the machine repeats it; those runs fitted two depths (2 and
  8 layers), and `calibrate` now fits three (2, 8, 32) so that a real model's depth is not an
  extrapolation.
- **Gemma 2 runs eagerly in HF** (its soft-caps have no SDPA option), and the time model now counts
  what that runs (ops.op._eager_attention, pinned to transformers' own eager_attention_forward: 13
  kernels, 44 bytes a score in bf16, Q Kᵀ over the whole rectangle): the 4096-token prefill's ops
  run alone took 303 ms (145 ms when attention was timed as SDPA, run 4) against HF's 345 ms, and
  are predicted at 253 ms: the fp32 softmax and the casts run at ~2.8 TB/s, not the ~3.7 TB/s of
  the calibrated elementwise kernels. Its decode attention is predicted ~50 % fast (batched
  matrix-vector products and repeat_kv's strided copies run below the calibrated matmul and
  elementwise rates); on the CPU the same model is slow instead (docs/validation.md).
- **MoE runs kernels the op list has not**: the router's sort, gather and scatter around the grouped
  GEMMs (HF 1 x 4096 prefill: 72 ms against 48 ms of modelled kernels); its host time per modelled
  kernel is also higher than a Llama's, from which dispatch is calibrated.
- **Timing kernels alone on a GPU needs CUDA graphs.** Issued eagerly, a kernel shorter than the
  host's ~15 µs to issue it is timed at the host's pace (an m = 1 matmul of 4096 x 4096: 40 µs
  where the 34 MB stream in ~8 µs); `calibrate` and `--measure` replay CUDA graphs sized so a
  replay's own ~10 µs is negligible (the tiny kernel: 1.8 µs replayed).
- **The in-step slowdown is hidden on a GPU**: the width-1536 step's kernels (~0.2 ms) are far
  shorter than its host time (~3 ms), so it cannot be measured (0); `in_step_slowdown` measures it
  only where the kernels outlast the host (run 4 recorded +900 % under an earlier rule that read
  host noise as slowdown).
- **Elementwise work is 13 % of a prefill's time for 0.04 % of its FLOPs** (RoPE's cat and
  products, SwiGLU's product, the residual adds) and norms 2 % for 0.01 %: the seeds' point that
  memory movement, not FLOPs, decides the time of everything but the matmuls.
- **Peak is a lower bound on every case**, as it must be; typical is 16-24 % under Llama's kernels,
  the datasheet-fraction model's error on a real H200 with torch's kernels (torch's streaming read
  reached 72 % of the datasheet's 4.8 TB/s here), and 30 % / 41 % (prefill / decode median) over all
  cases: peak and typical count FlashAttention, as engines run soft-caps, not Gemma 2's eager path.
""".splitlines()


def published_section() -> list[str]:
    checks = [published.check(e) for e in published.entries()]
    out = ["", "## Typical and peak rates against published measurements", "",
           f"{len(checks)} measurements from `docs/data/published_speed.yaml` (engine, version, hardware, dtypes, "
           "TP, batch and lengths as published, each with its source and quote); the error is that of the time "
           "the published metric implies.", ""]
    for label in ("peak", "typical"):
        med, worst = published.summary(checks, label)
        out.append(f"- **{label}**: median |error| {med:.1%}, worst {worst:.1%}"
                   + ("; every measurement is slower than peak (a lower bound)"
                      if all(c.error("peak") < 0 for c in checks) and label == "peak" else ""))
    out += ["", "| measurement | engine | measured (s) | peak | typical |", "|---|---|---|---|---|"]
    for c in checks:
        e = c.entry
        out.append(f"| {e['id']} | {e['engine']} {e.get('engine_version') or ''} | {c.measured_s:.4g} | "
                   f"{c.error('peak'):+.0%} | {c.error('typical'):+.0%} |")
    return out


def with_whole_steps(results: dict, path: Path) -> dict:
    """`results` with each case's whole-step measurements (reference, hf, the HF peak memory) taken from the
    same case of an earlier --json file: kernels and calibration re-measured, eager steps kept.  A case this
    run did not reach joins with its kernels unmeasured and no prediction yet (repredict gives it one)."""
    earlier = json.loads(path.read_text())
    key = ("model", "phase", "batch", "tokens")
    have = {tuple(c[k] for k in key) for c in results["cases"]}
    results["cases"] += [{k: e[k] for k in key} | {"measured_s": {}, "ops": []} for e in earlier["cases"]
                         if "error" not in e and tuple(e[k] for k in key) not in have]
    old = {tuple(c[k] for k in key): c for c in earlier["cases"] if "error" not in c}
    for c in results["cases"]:
        e = old.get(tuple(c[k] for k in key))
        if e is None or "error" in c:
            continue
        c["measured_s"].update({w: e["measured_s"][w] for w in ("reference", "hf") if w in e["measured_s"]})
        c["hf_peak_bytes"] = e.get("hf_peak_bytes")
    cal = earlier["calibration"]
    results["whole_from"] = {"file": path.name, "date": earlier["date"],
                             "calibration": f"launch {cal['launch_s'] * 1e6:.1f} µs, dispatch "
                                            f"{(cal['dispatch_s'] or 0) * 1e6:.1f} µs"}
    return results


def repredict(results: dict, calibration, path: str) -> dict:
    """Every case's predictions recomputed by this code under `calibration` (the measurements kept), so a
    page rendered from an older run shows the time model as it is now."""
    models = REAL if results["size"] == "real" else SHRUNK
    dtype = results["dtype"]
    rates = rate_sets(calibrated_profile(calibration), Workload(weight_dtype=dtype, act_dtype=dtype, kv_dtype=dtype))
    for c in results["cases"]:
        if "error" in c:
            continue
        _, spec = model_config(c["model"], models)
        fresh = predict_case(spec, c["phase"], c["batch"], c["tokens"], rates, dtype)
        measured = {o["name"]: o["measured_s"] for o in c["ops"]}
        for o in fresh["ops"]:
            o["measured_s"] = measured.get(o["name"])
        c.update({k: v for k, v in fresh.items() if k not in ("measured_s", "hf_peak_bytes")})
    results["predicted_with"] = path
    # the page's summary of the eager-step terms states the ones the predictions used
    results["calibration"].update({"dispatch_s": calibration.dispatch_s, "step_host_s": calibration.step_host_s,
                                   "step_slowdown": calibration.step_slowdown})
    return results


def allocator() -> str:
    """The allocator this process runs under, as the page states it."""
    preload = os.environ.get("LD_PRELOAD", "")
    for name in ("jemalloc", "tcmalloc"):
        if name in preload:
            return f"{name} (LD_PRELOAD)"
    tunables = os.environ.get("GLIBC_TUNABLES")
    return f"glibc malloc, GLIBC_TUNABLES={tunables}" if tunables else "glibc malloc, default settings"


def reexec_with_reusing_malloc() -> None:
    """glibc reads its tunables at start-up: run this script again with them set (Linux only)."""
    if platform.system() != "Linux" or "GLIBC_TUNABLES" in os.environ or any(
            name in os.environ.get("LD_PRELOAD", "") for name in ("jemalloc", "tcmalloc")):
        return
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "GLIBC_TUNABLES": REUSING_MALLOC})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"])
    ap.add_argument("--quick", action="store_true", help="calibrate on the quick grid")
    ap.add_argument("--calibration", help="reuse this calibration instead of measuring one (with --from-json: "
                                          "recompute every prediction under it)")
    ap.add_argument("--runs", type=int, default=3, help="measure every case this many times (median)")
    ap.add_argument("--size", default="auto", choices=["auto", "shrunk", "real"],
                    help="shrunk configs, or full-size ones (auto: full size on cuda)")
    ap.add_argument("--models", nargs="*", help="only the models whose label contains one of these")
    ap.add_argument("--limit", type=int, help="only the first N shapes of each model")
    ap.add_argument("--json", help="keep every measured and predicted figure in this file (rewritten per case)")
    ap.add_argument("--from-json", help="render the page from a --json file instead of measuring")
    ap.add_argument("--kernels-only", action="store_true",
                    help="measure the ops as kernels only (no whole-step timing of the reference or HF model)")
    ap.add_argument("--whole-from", help="take the whole-step measurements (reference, hf, memory) of each case "
                                         "from this earlier --json file")
    ap.add_argument("--out", default=str(ROOT / "docs" / "validation.md"))
    args = ap.parse_args()
    if args.from_json:
        results = json.loads(Path(args.from_json).read_text())
    else:
        reexec_with_reusing_malloc()
        results = measure(args)
    if args.whole_from:
        results = with_whole_steps(results, Path(args.whole_from))
    if args.from_json and args.calibration:
        results = repredict(results, load_calibration(Path(args.calibration)), args.calibration)
    if any("predicted_s" not in c for c in results["cases"] if "error" not in c):
        raise SystemExit("some cases have no prediction: give --calibration to predict them")
    if args.json and (args.whole_from or args.from_json):
        Path(args.json).write_text(json.dumps(results, indent=1))
    text = page(results, args)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
