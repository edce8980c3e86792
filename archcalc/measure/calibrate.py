"""`archcalc calibrate`: measure what this device really runs at.

Matmul throughput over a grid of shapes (small m as in decode up to large m
as in prefill; square, wide and tall k × n), SDPA attention (causal prefill
at several lengths and head dims, a sliding-window mask, decode over a long
cache), copy bandwidth (bytes read + written) and read-only streaming, the
cost of a tiny elementwise kernel (the launch overhead), and norm /
activation / add / RoPE / gather kernels at a few sizes, and what an eager
step adds to its kernels (a fixed cost per step and dispatch per kernel, fitted
over three depths of a debug-sized Llama; the kernels' slowdown inside a decode
step of a real-width one).  Every point is kept
(hardware/calibration.py); cost/rates.py derives the calibrated rate set.

Every shape is built as an Op by the same constructors the op list uses and
run by measure/kernels.py, so what calibrate measures and what --measure
runs are the same kernels.
"""

from __future__ import annotations

import datetime as dt
import platform
import re
from dataclasses import dataclass
from typing import Callable

import torch

from archcalc.cost.roofline import host_time
from archcalc.errors import InputError
from archcalc.hardware.bounds import MAX_SLOWDOWN
from archcalc.hardware.calibration import (
    AttentionPoint,
    Bandwidth,
    Calibration,
    DeviceInfo,
    GroupedPoint,
    MatmulPoint,
    RowPoint,
)
from archcalc.measure.kernels import cache_bytes, grouped_kernel, grouped_mm_works, kernel
from archcalc.measure.timing import busy_note, graphs_work, resolve_device, time_call
from archcalc.ops import op as ops
from archcalc.ops.workload import Workload

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
BF16_SLOWDOWN_LIMIT = 2.0  # bf16 matmul slower than fp32 by more than this: no native bf16 units


@dataclass(frozen=True)
class Grid:
    """The shapes one calibration measures."""

    matmul_m: tuple[int, ...]
    matmul_kn: tuple[tuple[int, int], ...]
    grouped_m: tuple[int, ...]  # rows per expert of the grouped GEMMs (GROUPS experts each)
    grouped_kn: tuple[tuple[int, int], ...]
    prefill_lengths: tuple[int, ...]
    head_dims: tuple[int, ...]
    decode_contexts: tuple[int, ...]
    row_shapes: tuple[tuple[int, int], ...]
    repeats: int


# --quick stays under a minute on a 2-core CPU; the full grid takes a few minutes there.
# Expert shapes (k, n) of the grouped grid: Qwen1.5-MoE's up (gate and up fused) and down at width 2048
# (2 × 1408 and 1408), and a shrunk MoE's at width 1024 (2 × 512, 512); rows per expert from a decode
# step's one or two to a prefill's hundreds.
QUICK = Grid((1, 4, 16, 64, 256, 1024), ((1024, 32), (512, 512), (1024, 4096), (4096, 4096)),
             (1, 4, 32), ((1024, 1024), (512, 1024)), (256, 1024), (64,),
             (1024, 8192), ((1, 2048), (256, 2048), (2048, 2048)), repeats=3)
FULL = Grid((1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048),
            ((1024, 32), (512, 512), (1024, 1024), (1024, 4096), (4096, 1024), (2048, 5632), (4096, 4096),
             (4096, 14336)),
            (1, 2, 4, 8, 16, 32, 64, 256), ((1024, 1024), (512, 1024), (2048, 2816), (1408, 2048)),
            (128, 512, 1024, 2048, 4096), (64, 128), (512, 2048, 8192, 32768),
            ((1, 1024), (1, 4096), (64, 4096), (512, 4096), (2048, 4096), (8192, 4096)), repeats=5)
# A GPU runs the CPU grid's largest matmul (2048 x 4096 x 14336) in a fraction of a millisecond, and
# Curve is flat beyond its last point, so an accelerator's full grid reaches the shapes of real prefills
# (8 x 2048 tokens; an 8B model's FFN and a 128k-vocabulary head), head_dim 256 (Gemma) and 32k rows.
FULL_ACCELERATOR = Grid(FULL.matmul_m + (4096, 8192, 16384),
                        FULL.matmul_kn + ((2048, 1408), (2048, 8192), (14336, 4096), (4096, 128256)),
                        FULL.grouped_m + (1024, 4096), FULL.grouped_kn,
                        FULL.prefill_lengths + (8192,), (64, 128, 256), FULL.decode_contexts + (131072,),
                        FULL.row_shapes + ((32768, 4096),), repeats=5)
GROUPS = 8  # experts of a grouped GEMM measured: a top-8 decode step (Qwen3, OLMoE) or a few tokens of top-4
ATTENTION_HEADS = 8  # query heads
ATTENTION_KV_HEADS = (8, 2)  # MHA, and GQA 4:1 (Llama-3, Qwen): SDPA takes different paths for the two
WINDOW = 256  # the sliding window measured (Mistral/Gemma-style masks in prefill)
# Row kernel kinds (cost/rates.py: row_kind) and the elementwise fn each runs; norms are ops.norm.
ROW_KINDS = (("rmsnorm", None), ("layernorm", None), ("activation", "silu"), ("gated_activation", "silu"),
             ("add", "add"), ("rope", "rope"))
GATHER_ROWS = 32_000  # embedding table rows (a Llama-2-sized vocabulary)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return f"Apple GPU ({platform.processor() or platform.machine()})"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def match_profile(name: str) -> str | None:
    """The bundled profile a device name is (its longest alias with a model number,
    as whole words): 'NVIDIA H100 80GB HBM3' -> h100-sxm; 'NVIDIA H100 PCIe' -> h100-pcie."""
    from archcalc.hardware.profile import aliases

    words = re.findall(r"[a-z0-9]+", name.lower())
    text = f" {' '.join(words)} "
    best = None
    for alias, stem in aliases().items():
        tokens = re.findall(r"[a-z0-9]+", alias)
        if not any(c.isdigit() for c in alias):
            continue  # "epyc" or "genoa" name a family, not the device
        if f" {' '.join(tokens)} " in text and (best is None or len(alias) > len(best[0])):
            best = (alias, stem)
    return best[1] if best else None


def choose_dtype(requested: str, device: torch.device) -> tuple[str, list[str]]:
    """The dtype to run in, and why it differs from the one requested: a CPU
    without native bf16/fp16 matmul units runs them ~100× slower than fp32."""
    if requested not in TORCH_DTYPES:
        raise InputError(None, "--dtype", f"{requested!r} is not valid; valid: {', '.join(TORCH_DTYPES)}")
    if requested == "fp32" or device.type != "cpu":
        return requested, []
    seconds = {d: _time_matmul(256, 1024, 1024, TORCH_DTYPES[d], device, 3) for d in ("fp32", requested)}
    ratio = seconds[requested] / seconds["fp32"]
    if ratio > BF16_SLOWDOWN_LIMIT:
        return "fp32", [f"{requested} matmul ran {ratio:.0f}x slower than fp32 on this CPU (no native {requested} "
                        f"units): calibrated in fp32"]
    return requested, []


def _time_matmul(m: int, k: int, n: int, dtype: torch.dtype, device: torch.device, repeats: int) -> float:
    wl = Workload(batch=m)
    return _time_op(ops.matmul("calibrate.matmul", "ffn", wl, k, n), device, dtype, repeats)


def _time_op(op: ops.Op, device: torch.device, dtype: torch.dtype, repeats: int) -> float:
    k = kernel(op, device, dtype)
    return time_call(k.run, device, repeats=repeats, rotate=k.rotate)


def calibrate(device: str = "auto", dtype: str = "bf16", quick: bool = False,
              progress: Callable[[str], None] | None = None) -> Calibration:
    dev = resolve_device(device)
    say = progress or (lambda _msg: None)
    busy = busy_note(dev)  # before our own work raises the load
    chosen, notes = choose_dtype(dtype, dev)
    notes = notes + [busy] * bool(busy)
    tdtype, grid = TORCH_DTYPES[chosen], QUICK if quick else FULL if dev.type == "cpu" else FULL_ACCELERATOR

    say("launch overhead and bandwidth")
    tiny = ops.elementwise("calibrate.tiny", "residual", Workload(), 64, 1, inputs=2)
    launch = _time_op(tiny, dev, tdtype, grid.repeats + 4)
    bandwidth = _bandwidth(dev, tdtype, grid.repeats)

    say("matmuls")
    matmul = [MatmulPoint(m=m, k=k, n=n, seconds=_time_matmul(m, k, n, tdtype, dev, grid.repeats))
              for k, n in grid.matmul_kn for m in grid.matmul_m]

    grouped_experts = grouped_mm_works(dev.type, tdtype)
    grouped = []
    if grouped_experts:
        say("grouped GEMMs (MoE experts)")
        for k, n in grid.grouped_kn:
            for m in grid.grouped_m:
                call = grouped_kernel(GROUPS, m, k, n, dev, tdtype)
                if call is not None:  # a shape torch's grouped kernel takes
                    grouped.append(GroupedPoint(groups=GROUPS, m=m, k=k, n=n, seconds=time_call(
                        call.run, dev, repeats=grid.repeats, rotate=call.rotate)))

    say("attention")
    shapes = [(1, length, length, None, hd, kv) for length in grid.prefill_lengths for hd in grid.head_dims
              for kv in ATTENTION_KV_HEADS]
    shapes += [(1, max(grid.prefill_lengths), max(grid.prefill_lengths), WINDOW, grid.head_dims[0], kv)
               for kv in ATTENTION_KV_HEADS]
    shapes += [(b, 1, s, None, hd, kv) for s in grid.decode_contexts for hd in grid.head_dims for b in (1, 4)
               for kv in ATTENTION_KV_HEADS]
    attention = []
    for batch, q_len, kv_len, window, hd, kv_heads in shapes:
        op = ops.sdpa_call("calibrate.attention", batch=batch, q_len=q_len, kv_len=kv_len, heads=ATTENTION_HEADS,
                           kv_heads=kv_heads, head_dim=hd, window=window, dtype=chosen)
        attention.append(AttentionPoint(batch=batch, heads=ATTENTION_HEADS, kv_heads=kv_heads, head_dim=hd,
                                        q_len=q_len, kv_len=kv_len, window=window,
                                        seconds=_time_op(op, dev, tdtype, grid.repeats)))

    say("row kernels")
    rows = []
    for rows_, width in grid.row_shapes:
        wl = Workload(batch=rows_)
        for kind, fn in ROW_KINDS:
            if fn is None:
                op = ops.norm("calibrate.norm", wl, width, kind, kind == "layernorm")
            else:
                op = ops.elementwise("calibrate.row", "ffn", wl, width, 1, fn=fn,
                                     inputs=2 if kind in ("gated_activation", "add") else 1)
            rows.append(RowPoint(kind=kind, rows=rows_, width=width, seconds=_time_op(op, dev, tdtype, grid.repeats)))
        gather = ops.gather("calibrate.gather", "embedding", wl, GATHER_ROWS, width)
        rows.append(RowPoint(kind="gather", rows=rows_, width=width, seconds=_time_op(gather, dev, tdtype,
                                                                                   grid.repeats)))
    name = device_name(dev)
    say("framework overhead")
    info = DeviceInfo(name=name, kind=dev.type, torch=torch.__version__, threads=torch.get_num_threads(),
                      date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), host=platform.platform())
    cal = Calibration(device=info, profile=match_profile(name) if dev.type != "cpu" else None, dtype=chosen,
                      notes=notes, launch_s=launch, bandwidth=bandwidth, matmul=matmul, attention=attention, rows=rows,
                      graphs=graphs_work(dev), grouped_experts=grouped_experts, grouped=grouped)
    overlap = dev.type != "cpu"  # the host issues kernels ahead of the device (cost/roofline.step_time)
    # The host's time per step, fixed + dispatch × kernels, fitted over three depths of a debug-sized Llama
    # whose kernels are all tiny: beyond its kernels on a CPU; the whole step on an asynchronous device,
    # whose tiny kernels finish long before the host has issued the next.
    points, source = [], ""
    for layers in DEBUG_DEPTHS:
        measured, predicted, rates, source = _eager_step(cal, {**DEBUG_LLAMA, "num_hidden_layers": layers}, dev,
                                                         tdtype, "debug size", 5)
        kernels = sum(o.op.count * rates.host_calls(o.op) for o in predicted.ops)
        points.append((kernels, measured if overlap else measured - predicted.kernel_time))
    fixed, per_kernel = host_fit(points)
    cal = cal.model_copy(update={"dispatch_s": per_kernel, "step_host_s": fixed,
                                 "dispatch_source": f"{source}, {', '.join(map(str, DEBUG_DEPTHS))} layers"})
    measured, predicted, rates, source = _eager_step(cal, STEP_LLAMA, dev, tdtype, "width 1536, 2 layers",
                                                     grid.repeats)
    host = host_time((o.op for o in predicted.ops), rates)
    slowdown = in_step_slowdown(measured, predicted.kernel_time, host, overlap)
    if slowdown is None:
        slowdown, source = 0.0, f"{source}: host-bound, the kernels' slowdown hidden (0)"
    return cal.model_copy(update={"step_slowdown": min(MAX_SLOWDOWN, max(0.0, slowdown)),
                                  "step_slowdown_source": source})


def in_step_slowdown(measured: float, kernels: float, host: float, overlap: bool) -> float | None:
    """The share by which a real-width step's kernels ran slower than alone: the step less its host time,
    over its kernels' time, minus 1.  Overlapped, the step is max(kernels × (1 + slowdown), host), so the
    slowdown shows only where the kernels outlast the host; where the host's issuing is the longer (a 2-layer
    model on a GPU), a step a little over the host's predicted time is the host's noise, not the kernels'
    slowdown: None (hidden)."""
    if not overlap:
        return (measured - host) / kernels - 1
    return measured / kernels - 1 if kernels > host else None


def host_fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(fixed seconds per step, seconds per kernel) of the least-squares line host = fixed + per × kernels
    through (kernels, host seconds) points at two or more depths, neither below 0: a noisy slope below 0
    is no dispatch, and a line through negative fixed time is refitted through the origin."""
    n = len(points)
    mean_k = sum(k for k, _ in points) / n
    mean_h = sum(h for _, h in points) / n
    spread = sum((k - mean_k) ** 2 for k, _ in points)
    per = max(0.0, sum((k - mean_k) * (h - mean_h) for k, h in points) / spread)
    fixed = mean_h - per * mean_k
    if fixed < 0:  # through the origin: Σkh / Σk²
        return 0.0, max(0.0, sum(k * h for k, h in points) / sum(k * k for k, _ in points))
    return fixed, per


# A debug-sized Llama (specs/debug.yaml's shape) as a Hugging Face config: its kernels are all tiny, so a
# decode step's time is the framework's, not the math's.  Timed at DEBUG_DEPTHS layers, whose slope is the
# host's time per layer (so per kernel), and the rest what a step costs whatever its depth.
DEBUG_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 256, "max_position_embeddings": 128,
               "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
DEBUG_DEPTHS = (2, 8, 32)  # 32: as deep as the models people run, so the fit is not stretched to reach them
# A Llama of real width (GQA 24/6, 4x FFN, 32k vocabulary): 117 M parameters, 235 MB in bf16, far beyond a
# CPU's or a GPU's last-level cache, so its kernels stream their weights as a real model's do.  Two layers
# keep it quick; scripts/validate.py validates on other widths, depths and architectures.
STEP_LLAMA = {**DEBUG_LLAMA, "hidden_size": 1536, "intermediate_size": 6144, "num_attention_heads": 24,
              "num_key_value_heads": 6, "vocab_size": 32000}


def _eager_step(cal: Calibration, config: dict, device: torch.device, dtype: torch.dtype, size: str,
                repeats: int):
    """A decode step of `config`'s Llama, measured and predicted with `cal`'s rates: (measured seconds,
    the predicted Step, the rates, what was timed).  Timed on Hugging Face transformers' own model where
    transformers is installed (the eager implementation people run), else on archcalc's reference model."""
    from archcalc.cost.rates import calibrated_rates
    from archcalc.cost.roofline import step
    from archcalc.hardware.profile import local_profile
    from archcalc.measure import endtoend
    from archcalc.spec.catalog import spec_from_dict
    from archcalc.spec.hf import spec_dict_from_config

    name = f"llama-{size}"
    spec = spec_from_dict(spec_dict_from_config(dict(config), name)[0], name)
    prompt, steps = 16, 8
    timing = {"prompt": prompt, "batch": 1, "decode_steps": steps, "device": device, "dtype": dtype,
              "repeats": repeats}
    try:
        import transformers

        measured = endtoend.time_hf(dict(config), **timing).decode_step_s
        source = f"transformers {transformers.__version__} LlamaForCausalLM ({size}), decode step"
    except ImportError:
        measured = endtoend.time_reference(spec, **timing).decode_step_s
        source = f"archcalc reference model ({size}), decode step"
    rates = calibrated_rates(local_profile(cal), cal)
    predicted = step(spec, Workload.decode(prompt + steps // 2, 1, weight_dtype=cal.dtype, act_dtype=cal.dtype,
                                           kv_dtype=cal.dtype), rates)
    return measured, predicted, rates, source


def _bandwidth(device: torch.device, dtype: torch.dtype, repeats: int) -> Bandwidth:
    """STREAM-style copy (bytes read + written) and a read-only sum, over a buffer
    of 4 × the last-level cache (at least 256 MiB) so neither fits in cache."""
    nbytes = max(4 * cache_bytes(device), 256 * 2**20)
    x = torch.randn(nbytes // 4, device=device, dtype=torch.float32).to(dtype)
    y = torch.empty_like(x)
    size = x.numel() * x.element_size()
    copy = time_call(lambda i: y.copy_(x), device, repeats=repeats)
    read = time_call(lambda i: x.sum(), device, repeats=repeats)
    return Bandwidth(copy_bytes_per_s=2 * size / copy, read_bytes_per_s=size / read, buffer_bytes=size)
