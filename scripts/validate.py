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
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import published  # noqa: E402

from archcalc.cost.roofline import predict, prefill_workload, step  # noqa: E402
from archcalc.hardware.calibration import load_calibration, save_calibration  # noqa: E402
from archcalc.hardware.profile import calibrated_profile  # noqa: E402
from archcalc.measure.calibrate import TORCH_DTYPES, calibrate  # noqa: E402
from archcalc.measure.endtoend import REUSING_MALLOC, time_hf, time_reference  # noqa: E402
from archcalc.measure.steps import measure_step, session  # noqa: E402
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
# (phase, batch, prompt or context)
SHAPES = [("prefill", 1, 128), ("prefill", 1, 512), ("prefill", 4, 256), ("decode", 1, 512), ("decode", 4, 512),
          ("decode", 1, 2048)]
GEN = 8  # decode steps timed end to end (the median step is kept)
OP_CLASSES = ("matmul", "attention", "norm", "elementwise", "gather")


def shrunk(name: str) -> tuple[dict, object]:
    file, over = SHRUNK[name]
    cfg = {**json.loads((HF / file).read_text()), **over}
    cfg.pop("layer_types", None)  # recomputed by transformers for the new depth
    data, _ = spec_dict_from_config(copy.deepcopy(cfg), file)
    data["name"] = name.split(" ")[0] + "-shrunk"
    return cfg, spec_from_dict(data, file)


def stats(errors: list[float]) -> str:
    if not errors:
        return "—"
    a = [abs(e) for e in errors]
    return f"{statistics.median(a):.0%} / {max(a):.0%}"


def run(args) -> str:
    s = session(args.device, "bf16")
    tdtype = TORCH_DTYPES[s.dtype]
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
    labels = None
    step_err: dict[tuple[str, str, str], list[float]] = defaultdict(list)  # (label, phase, what) -> errors
    class_err: dict[tuple[str, str], list[float]] = defaultdict(list)  # (label, class) -> errors
    share: dict[str, list[float]] = defaultdict(list)  # class -> measured time share (prefill)
    flop_share: dict[str, list[float]] = defaultdict(list)
    rows = []
    t_measure = 0.0
    for name in SHRUNK:
        cfg, spec = shrunk(name)
        dtypes = {"weight_dtype": s.dtype, "act_dtype": s.dtype, "kv_dtype": s.dtype}
        preds = predict(spec, hw, prompt=128, context=256, gen=2, batch=1, **dtypes)
        rate_sets = [p.rates for p in preds]
        labels = [r.label for r in rate_sets]
        for phase, batch, length in SHAPES:
            print(f"{name}: {phase} batch {batch} × {length}", flush=True)
            wl = (prefill_workload(length, batch, **dtypes) if phase == "prefill"
                  else Workload.decode(length + 1, batch, **dtypes))
            steps = [step(spec, wl, r) for r in rate_sets]
            samples = defaultdict(list)
            for _ in range(args.runs):  # the three measurements interleaved, the median of each kept
                t1 = time.perf_counter()
                m = measure_step(spec, wl, phase, s)
                t_measure += time.perf_counter() - t1
                hf = time_hf(cfg, prompt=length, batch=batch, decode_steps=GEN, device=str(s.device), dtype=tdtype,
                             attn_implementation="eager" if "gemma" in name else "sdpa")
                ref = time_reference(spec, prompt=length, batch=batch, decode_steps=GEN, device=str(s.device),
                                     dtype=tdtype)
                samples["kernels"].append(m.time)
                samples["reference"].append(ref.prefill_s if phase == "prefill" else ref.decode_step_s)
                samples["hf"].append(hf.prefill_s if phase == "prefill" else hf.decode_step_s)
            whole = {k: statistics.median(v) for k, v in samples.items()}
            for st in steps:
                for what, t in whole.items():  # lone kernels pay no framework overhead between them
                    predicted = st.kernel_time if what == "kernels" else st.time
                    step_err[(st.rates.label, phase, what)].append((predicted - t) / t)
            measured = m.by_name()
            total_f = steps[0].flops or 1
            case_time, case_flops = defaultdict(float), defaultdict(float)
            for i, o in enumerate(steps[0].ops):
                mo = measured[o.op.name]
                if mo.seconds is None:
                    continue
                for st in steps:
                    class_err[(st.rates.label, o.op.kind)].append((st.ops[i].time - mo.seconds) / mo.seconds)
                case_time[o.op.kind] += mo.seconds / m.time
                case_flops[o.op.kind] += o.flops / total_f
            if phase == "prefill":
                for c in OP_CLASSES:
                    share[c].append(case_time[c])
                    flop_share[c].append(case_flops[c])
            rows.append((name, phase, batch, length, [st.time for st in steps], whole))
    return page(s, cal, labels, rows, step_err, class_err, share, flop_share, t_cal, t_measure, args)


def page(s, cal, labels, rows, step_err, class_err, share, flop_share, t_cal, t_measure, args) -> str:
    out = [
        "# Validation: predicted against measured time",
        "",
        f"Generated by `python scripts/validate.py{' --quick' if args.quick else ''}` on "
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC.",
        "",
        f"- device: {cal.device.name} ({cal.device.kind}), {cal.device.threads} threads, {platform.platform()}",
        f"- torch {torch.__version__}, Python {platform.python_version()}, dtype {s.dtype}"
        + (f" ({'; '.join(s.notes)})" if s.notes else ""),
        f"- allocator: {allocator()} (freed activations reused, not faulted in again: "
        "archcalc.measure.endtoend)",
        f"- calibration: {'quick grid' if args.quick else 'full grid'}, {t_cal:.0f} s"
        f"{' (reused ' + args.calibration + ')' if args.calibration else ''}; "
        f"best matmul {max(2 * p.m * p.k * p.n / p.seconds for p in cal.matmul) / 1e9:.0f} GFLOP/s, "
        f"read {cal.bandwidth.read_bytes_per_s / 1e9:.1f} GB/s, copy {cal.bandwidth.copy_bytes_per_s / 1e9:.1f} GB/s, "
        f"launch {cal.launch_s * 1e6:.2f} µs",
        f"- `--measure` of all {len(rows)} steps: {t_measure / args.runs:.0f} s per pass; every case measured "
        f"{args.runs} times (interleaved), the median kept",
        "",
        "Errors are (predicted − measured) / measured; a table cell is median |error| / worst |error|. "
        "`peak` on a device without a datasheet (this CPU) is the best rate the calibration measured, "
        "so it is not a guaranteed bound here. This CPU has no `typical` column: no bundled profile describes it "
        "and no sourced efficiency exists for it.",
        "",
        "## Whole steps",
        "",
        "Measured three ways: `kernels` = the sum of every op run alone as a torch kernel (`--measure`); "
        "`reference` = archcalc's plain-torch reference model with its KV cache (attention through SDPA, "
        "explicit for Gemma-2's soft-caps); `hf` = the Hugging Face "
        "transformers model of the same config.json (random weights, SDPA except Gemma-2, which HF runs eagerly; "
        "its own DynamicCache).",
        "",
        "| rates | phase | vs kernels | vs reference | vs hf |",
        "|---|---|---|---|---|",
    ]
    for label in labels:
        for phase in ("prefill", "decode"):
            out.append(f"| {label} | {phase} | " + " | ".join(stats(step_err[(label, phase, w)])
                                                            for w in ("kernels", "reference", "hf")) + " |")
    out += ["", "## Per op class (each op against its own kernel)", "",
            "| rates | " + " | ".join(OP_CLASSES) + " |", "|---|" + "---|" * len(OP_CLASSES)]
    for label in labels:
        out.append(f"| {label} | " + " | ".join(stats(class_err[(label, c)]) for c in OP_CLASSES) + " |")
    out += ["", "Prefill: measured share of the step's time beside the share of its FLOPs, by op class "
                "(mean over the cases):", "", "| class | time share | FLOP share |", "|---|---|---|"]
    for c in OP_CLASSES:
        if share[c]:
            out.append(f"| {c} | {statistics.mean(share[c]):.1%} | {statistics.mean(flop_share[c]):.2%} |")
    out += ["", "## Every case (seconds)", "",
            "| model | phase | batch × tokens | " + " | ".join(labels) + " | kernels | reference | hf |",
            "|---|---|---|" + "---|" * (len(labels) + 3)]
    for name, phase, batch, length, predicted, whole in rows:
        out.append(f"| {name} | {phase} | {batch} × {length} | " + " | ".join(f"{t:.4g}" for t in predicted)
                   + " | " + " | ".join(f"{whole[w]:.4g}" for w in ("kernels", "reference", "hf")) + " |")
    out += WHY
    out += published_section()
    return "\n".join(out) + "\n"


WHY = """
## Why the misses

- **Since the last page.** Whole steps are timed under a reusing allocator (glibc's default
  returns freed activations to the OS and faults them in again: the 1 × 512 Llama prefill ran
  ~80 ms with it, ~57 ms without); the reference model attends through SDPA as the op list's
  "sdpa" convention does (before: explicit matmuls, up to 9x slower in decode); and the
  calibration measures an in-step slowdown (a width-1536 Llama's decode step, less dispatch, over
  its calibrated kernels: +9.5 % here) beside the per-kernel dispatch (21 µs). Against the
  Hugging Face model the calibrated error went from 25 % / 46 % (prefill) and 22 % / 41 %
  (decode) to the table's.
- **Gemma 2 is the worst case.** Its soft-capped logits keep Hugging Face on eager attention
  (explicit matmuls, tanh, the mask and softmax in fp32 over the whole rectangle) while the time
  model counts what SDPA runs: its prefill steps are 18-36 % slower than predicted, the Llama
  ones 8-16 %. The op list has no "eager attention" kernel to time instead.
- **Kernels Hugging Face runs that the op list has not.** RMSNorm upcast to fp32 (five kernels
  for one), rotate_half RoPE (a cat and two products), the MoE router's sort, gather and
  index_add, the DynamicCache's concatenation: elementwise passes over the activations, a few
  percent of a decode step and up to ~27 % of a MoE prefill.
- **A step is still slower than its kernels alone** by more than the calibrated slowdown on some
  shapes (Gemma 2 decode: 21-33 % slower than predicted); the slowdown is one number for every kernel,
  measured on one model, and the VM's memory bandwidth drifts 10-20 % between runs.
- **matmul (worst)**: the thinnest projections (a MoE router of n = 16, a shared-expert gate of
  n = 1) sit below the grid's smallest shape (1024 × 32), where a matmul's fixed cost dominates.
- **norm, elementwise (worst)**: row kernels of one token are a microsecond or two, their launch;
  a microsecond of jitter is 100 %.
- **A busy machine inflates every timing**: `calibrate` and `--measure` note a CPU whose load
  average is half its cores or more when they start; this page was run on an idle machine.
- **Peak on this CPU** is the best rate the calibration measured, not a datasheet, so it is far
  from a bound here; on bundled GPUs peak is the datasheet and a strict lower bound (below).
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
    reexec_with_reusing_malloc()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"])
    ap.add_argument("--quick", action="store_true", help="calibrate on the quick grid")
    ap.add_argument("--calibration", help="reuse this calibration instead of measuring one")
    ap.add_argument("--runs", type=int, default=3, help="measure every case this many times (median)")
    ap.add_argument("--out", default=str(ROOT / "docs" / "validation.md"))
    args = ap.parse_args()
    text = run(args)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
