"""Roofline predictions: each op takes max(FLOPs / peak, bytes / bandwidth).

A step's time is the sum over its ops (no overlap between kernels, which is
how eager and CUDA-graph serving run them).  The op list is the same one
`size` sums; only the rates come from the hardware profile.  Rates:
matmul and attention FLOPs at the dense matrix-unit peak of the compute dtype,
elementwise FLOPs at the fp32 (vector) rate, all bytes at the memory
bandwidth.  Letters: B batch, S context, P peak FLOP/s, W bytes/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import floor

from archcalc.hardware.profile import HardwareProfile
from archcalc.ops.conventions import CONVENTIONS, DEFAULT_CONVENTION
from archcalc.ops.layers import model_ops
from archcalc.ops.op import Op
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec

CONVENTION = CONVENTIONS[DEFAULT_CONVENTION]  # the work kernels really do: causal, windows capped
W8A8_DTYPES = ("fp8", "int8")  # weight formats whose matmuls run on 8-bit units (activations quantized too)


@dataclass(frozen=True)
class Rates:
    label: str  # "peak" or "calibrated"
    matmul: float  # FLOP/s for matmuls and attention
    vector: float  # FLOP/s for elementwise work
    bandwidth: float  # bytes/s

    @property
    def ridge(self) -> float:
        return self.matmul / self.bandwidth


def compute_dtype(wl: Workload, hw: HardwareProfile) -> str:
    """fp8/int8 weights run W8A8 on the 8-bit units where the device has them;
    int4 (weight-only) and 16-bit weights compute in the activation dtype."""
    if wl.weight_dtype in W8A8_DTYPES and wl.weight_dtype in hw.peak_flops:
        return wl.weight_dtype
    return wl.act_dtype


def rate_sets(hw: HardwareProfile, wl: Workload) -> list[Rates]:
    """Peak rates, and the calibrated ones when the profile has a calibration."""
    dtype = compute_dtype(wl, hw)
    peak = Rates("peak", hw.peak(dtype), hw.peak("fp32"), hw.memory_bandwidth)
    cal = hw.calibration
    if not cal:
        return [peak]
    return [peak, Rates("calibrated", cal.flops.get(dtype, peak.matmul), peak.vector,
                        cal.memory_bandwidth or peak.bandwidth)]


@dataclass(frozen=True)
class OpTime:
    op: Op
    flops: float  # per step: × count, tensor + vector
    bytes: float  # per step: weights + activations + KV
    t_math: float
    t_memory: float

    @property
    def time(self) -> float:
        return max(self.t_math, self.t_memory)

    @property
    def bound(self) -> str:
        return "compute" if self.t_math > self.t_memory else "memory"

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")


def time_op(op: Op, rates: Rates) -> OpTime:
    n = op.count
    t_math = n * (op.flops / rates.matmul + op.vector_flops / rates.vector)
    nbytes = n * (op.weight_bytes + op.act_bytes + op.kv_bytes)
    return OpTime(op, n * (op.flops + op.vector_flops), nbytes, t_math, nbytes / rates.bandwidth)


@dataclass(frozen=True)
class Step:
    """One step (a prefill, or one decode token for every sequence)."""

    workload: Workload
    rates: Rates
    ops: list[OpTime]

    @property
    def time(self) -> float:
        return sum(o.time for o in self.ops)

    @property
    def flops(self) -> float:
        return sum(o.flops for o in self.ops)

    @property
    def bytes(self) -> float:
        return sum(o.bytes for o in self.ops)

    @property
    def mfu(self) -> float:
        """Model FLOP utilisation the prediction implies: matmul FLOP/s ÷ peak."""
        tensor = sum(o.op.flops * o.op.count for o in self.ops)
        return tensor / self.time / self.rates.matmul

    @property
    def mbu(self) -> float:
        """Memory-bandwidth utilisation the prediction implies."""
        return self.bytes / self.time / self.rates.bandwidth


def step(spec: ModelSpec, wl: Workload, rates: Rates) -> Step:
    return Step(wl, rates, [time_op(op, rates) for op in model_ops(spec, wl, CONVENTION)])


def prefill_workload(prompt: int, batch: int, **dtypes) -> Workload:
    """Serving prefill: logits only at each sequence's last token."""
    return Workload(batch=batch, new_tokens=prompt, context=prompt, logits="last", **dtypes)


# ---- decode over many tokens, in closed form ----------------------------------------------


def decode_time(spec: ModelSpec, prompt: int, gen: int, batch: int, rates: Rates, **dtypes) -> float:
    """Seconds to generate `gen` tokens per sequence after a `prompt`-token
    prefill: Σ over contexts c = prompt+1 … prompt+gen of the decode step
    time at c, summed in closed form.

    Each op's FLOPs and bytes are affine in c between breakpoints (a sliding
    window stops growing at c = window), so its time max(f(c)/P, m(c)/W) is a
    max of two affine functions: split where they cross and sum arithmetic
    series.
    """
    lo, hi = prompt + 1, prompt + gen
    windows = {op.dims.window for op in _decode_ops(spec, lo, batch, dtypes) if op.kind == "attention"}
    cuts = sorted({lo, hi + 1} | {w for w in windows if w and lo < w <= hi})
    total = 0.0
    for a, b in zip(cuts, cuts[1:]):  # [a, b): every op affine in c here
        at_a = [time_op(op, rates) for op in _decode_ops(spec, a, batch, dtypes)]
        at_next = [time_op(op, rates) for op in _decode_ops(spec, a + 1, batch, dtypes)]
        for x, y in zip(at_a, at_next):
            total += _sum_max_affine(x.t_math, y.t_math - x.t_math, x.t_memory, y.t_memory - x.t_memory, b - a)
    return total


def _decode_ops(spec: ModelSpec, context: int, batch: int, dtypes: dict) -> list[Op]:
    return model_ops(spec, Workload.decode(context, batch, **dtypes), CONVENTION)


def _sum_affine(x0: float, dx: float, n: int) -> float:
    """Σ_{i=0}^{n-1} (x0 + i·dx)."""
    return n * x0 + dx * n * (n - 1) / 2


def _sum_max_affine(f0: float, df: float, m0: float, dm: float, n: int) -> float:
    """Σ_{i=0}^{n-1} max(f0 + i·df, m0 + i·dm), splitting where the lines cross."""
    if n <= 0:
        return 0.0
    gap0, dgap = f0 - m0, df - dm  # f − m along i
    cross = -gap0 / dgap if dgap else None
    if cross is None or not 0 < cross < n - 1:  # no crossing inside: one line wins throughout
        f_wins = gap0 + dgap * (n - 1) / 2 >= 0  # decided at the midpoint
        return _sum_affine(f0, df, n) if f_wins else _sum_affine(m0, dm, n)
    k = floor(cross) + 1  # first index past the crossing
    return (_sum_max_affine(f0, df, m0, dm, k)
            + _sum_max_affine(f0 + k * df, df, m0 + k * dm, dm, n - k))


# ---- critical batch -------------------------------------------------------------------------


def critical_batch(spec: ModelSpec, context: int, rates: Rates, *, weights_only: bool = True,
                   limit: int = 1 << 20, **dtypes) -> int | None:
    """Smallest batch at which decode turns compute-bound: the weight matmuls
    (weights_only, the classic P/W·bytes-per-weight/2 figure) or the whole
    step.  None when it stays memory-bound up to `limit` (long-context KV
    reads grow with the batch too)."""

    def compute_bound(batch: int) -> bool:
        ops = [time_op(op, rates) for op in _decode_ops(spec, context, batch, dtypes)]
        if weights_only:
            ops = [o for o in ops if o.op.kind == "matmul" and o.op.params]
        return sum(o.t_math for o in ops) >= sum(o.t_memory for o in ops)

    hi = 1
    while not compute_bound(hi):
        if hi >= limit:
            return None
        hi *= 2
    lo = hi // 2  # memory-bound at lo (or lo = 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if compute_bound(mid) else (mid, hi)
    return hi


@dataclass(frozen=True)
class Prediction:
    """What `archcalc roofline` reports for one set of rates."""

    rates: Rates
    prefill: Step
    decode: Step  # one step at the decode context
    decode_total: float  # seconds for all generated tokens
    gen: int
    critical_batch: int | None
    step_critical_batch: int | None

    @property
    def ttft(self) -> float:
        return self.prefill.time

    @property
    def tpot(self) -> float:
        return self.decode.time

    @property
    def decode_tokens_per_s(self) -> float:
        return self.decode.workload.batch / self.decode.time

    @property
    def mean_tpot(self) -> float:
        return self.decode_total / self.gen


@dataclass(frozen=True)
class RooflineResult:
    """What `archcalc roofline` reports: one Prediction per rate set."""

    spec: ModelSpec
    hardware: HardwareProfile
    prompt: int
    context: int  # of the decode step shown
    batch: int
    gen: int
    predictions: list[Prediction]
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """The archcalc.roofline/1 JSON document."""
        from archcalc.report.roofline import roofline_json

        return roofline_json(self)


def predict(spec: ModelSpec, hw: HardwareProfile, *, prompt: int, context: int, gen: int, batch: int,
            **dtypes) -> list[Prediction]:
    out = []
    for rates in rate_sets(hw, Workload(**dtypes)):
        out.append(Prediction(
            rates,
            prefill=step(spec, prefill_workload(prompt, batch, **dtypes), rates),
            decode=step(spec, Workload.decode(context, batch, **dtypes), rates),
            decode_total=decode_time(spec, prompt, gen, batch, rates, **dtypes),
            gen=gen,
            critical_batch=critical_batch(spec, context, rates, **dtypes),
            step_critical_batch=critical_batch(spec, context, rates, weights_only=False, limit=1 << 16, **dtypes),
        ))
    return out


