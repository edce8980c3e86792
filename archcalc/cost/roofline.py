"""Time predictions: each op takes fixed + max(FLOPs / compute rate, bytes / memory rate).

This is the one place that turns an Op into time.  A step's time is the sum
over its ops (no overlap between kernels, as eager and CUDA-graph serving run
them); an eager framework's dispatch per kernel adds to that on a CPU and
overlaps it on a GPU, whose host issues kernels ahead of it (step_time).  The op list is the same one `size` sums; the rates come from a rate
set (cost/rates.py: peak, typical, calibrated), which says how fast an op of
a given shape runs, the launch cost per kernel and, for tensor parallelism,
the link.  With tp > 1 every op is one rank's share and the collectives
Megatron-style TP adds are ops of their own (parallel/collectives.py).
Letters: B batch, S context, P FLOP/s, W bytes/s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from math import floor

from archcalc.cost.rates import Rates, rate_sets  # noqa: F401  (Rates re-exported for callers)
from archcalc.cost.solve import false_position, last_true
from archcalc.hardware.profile import HardwareProfile
from archcalc.ops.arrays import greater
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.layers import model_ops
from archcalc.ops.op import Op, eager_traffic
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec


@dataclass(frozen=True)
class OpTime:
    op: Op
    flops: float  # per step: × count, tensor + vector
    bytes: float  # per step: weights + activations + KV
    t_math: float
    t_memory: float
    t_fixed: float = 0.0  # launch costs (link latency for a collective), outside the max
    # The op runs as kernels one after another, some math-bound and some memory-bound (explicit eager
    # attention: two matmuls and passes over the scores), so math and memory add instead of overlapping.
    serial: bool = False

    @property
    def time(self) -> float:
        if self.serial:
            return self.t_fixed + self.t_math + self.t_memory
        return self.t_fixed + greater(self.t_math, self.t_memory)

    @property
    def bound(self) -> str:
        return "compute" if self.t_math > self.t_memory else "memory"

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")


def time_op(op: Op, rates: Rates) -> OpTime:
    """All `count` executions of `op`: fixed + max(math, memory) each.  The op's
    numbers may be arrays (a sweep); then so are the times."""
    n = op.count
    nbytes = n * (op.weight_bytes + op.act_bytes + op.kv_bytes)
    if op.kind == "collective":  # on the link: one latency + bytes sent by one rank
        link = rates.link_bandwidth or float("inf")
        return OpTime(op, n * op.vector_flops, nbytes, 0.0, n * op.comm_bytes / link, n * rates.link_latency)
    t_math = n * (op.flops / rates.compute_rate(op) + op.vector_flops / rates.vector)
    if op.kind == "attention" and op.dims.eager_kernels:
        # explicit eager attention, kernel after kernel: its two matmuls at their measured rate (their
        # traffic within it), then its elementwise kernels' traffic at theirs
        return OpTime(op, n * (op.flops + op.vector_flops), nbytes, t_math,
                      n * eager_traffic(op.dims)[1] / rates.memory_rate(op), n * rates.launch * rates.kernels(op),
                      serial=True)
    return OpTime(op, n * (op.flops + op.vector_flops), nbytes, t_math, nbytes / rates.memory_rate(op),
                  n * rates.launch * rates.kernels(op))


def host_time(ops: Iterable[Op], rates: Rates) -> float:
    """The framework's host time for a step of these ops: a fixed cost per step plus its dispatch per compute
    kernel (a collective is NCCL's, timed on the link).  It depends on which kernels run, not how long."""
    if not rates.dispatch:
        return rates.step_host
    calls = sum(op.count * rates.host_calls(op) for op in ops if op.kind != "collective")
    return rates.step_host + rates.dispatch * calls


def slowdown_scale(op: Op, rates: Rates) -> float:
    """1 + the calibrated share by which a compute kernel runs slower inside a real step than alone."""
    return 1.0 + (rates.step_slowdown if op.kind != "collective" else 0.0)


def step_time(times: list[OpTime], rates: Rates) -> float:
    """A step's time from its kernels' (each run alone): the compute kernels run slower inside a step by the
    calibrated slowdown, and the framework's host time (host_time) adds to them on a synchronous device (a
    CPU) or, on an asynchronous one (a GPU: the host issues kernels ahead of it), overlaps them, so the
    step takes whichever is longer: the device's kernels or the host's issuing."""
    kernels = sum(slowdown_scale(o.op, rates) * o.time for o in times)
    host = host_time((o.op for o in times), rates)
    return greater(kernels, host) if rates.overlap else kernels + host


@dataclass(frozen=True)
class Step:
    """One step (a prefill, or one decode token for every sequence)."""

    workload: Workload
    rates: Rates
    ops: list[OpTime]

    @property
    def time(self) -> float:
        return step_time(self.ops, self.rates)

    @property
    def kernel_time(self) -> float:
        """The ops alone, one after another."""
        return sum(o.time for o in self.ops)

    @property
    def overhead(self) -> float:
        """Framework time beyond the kernels run alone (eager dispatch per kernel launched, and
        kernels running slower inside a step): 0 for engines that replay CUDA graphs;
        calibrated from eager torch models."""
        return self.time - self.kernel_time

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


def step(spec: ModelSpec, wl: Workload, rates: Rates, tp: int = 1) -> Step:
    return Step(wl, rates, [time_op(op, rates) for op in step_ops(spec, wl, rates.convention, tp)])


_OPS_CACHE: dict[tuple, tuple[ModelSpec, tuple[Op, ...]]] = {}


def step_ops(spec: ModelSpec, wl: Workload, convention: str, tp: int = 1) -> tuple[Op, ...]:
    """The ops one rank runs in a step: the model's op list, as the rate set's
    kernels count attention, split over `tp` ranks with its collectives.
    Cached (rate sets and searches ask for the same lists again) by the spec
    object itself: a ModelSpec holds lists, so it cannot be a dict key."""
    key = (id(spec), wl, convention, tp)
    hit = _OPS_CACHE.get(key)
    if hit is not None and hit[0] is spec:
        return hit[1]
    ops = model_ops(spec, wl, CONVENTIONS[convention])
    if tp > 1:
        from archcalc.parallel.collectives import tp_ops

        ops = tp_ops(spec, wl, ops, tp)
    if len(_OPS_CACHE) > 4096:
        _OPS_CACHE.clear()
    _OPS_CACHE[key] = (spec, tuple(ops))
    return _OPS_CACHE[key][1]


def prefill_workload(prompt: int, batch: int, **dtypes) -> Workload:
    """Serving prefill: logits only at each sequence's last token."""
    return Workload(batch=batch, new_tokens=prompt, context=prompt, logits="last", **dtypes)


# ---- decode over many tokens, in closed form ----------------------------------------------


# The most cuts decode_time makes where compressed layers' entries grow (each piece costs two op lists)
MAX_ENTRY_CUTS = 1024


def decode_time(spec: ModelSpec, prompt: int, gen: int, batch: int, rates: Rates, tp: int = 1, **dtypes) -> float:
    """Seconds to generate `gen` tokens per sequence after a `prompt`-token
    prefill: Σ over contexts c = prompt+1 … prompt+gen of the decode step
    time at c, summed in closed form.

    Each op's FLOPs and bytes are affine in c between breakpoints (a sliding
    window, or a sparse attention's topk, stops growing at c = window; a
    chunked layer restarts at every chunk) and its rates do not depend on c (a
    decode step's matmuls keep m = B; decode attention runs at one bandwidth),
    so its time fixed + max(f(c)/P, m(c)/W) is a constant plus a max of two
    affine functions: split where they cross and sum arithmetic series.  Where
    the host's dispatch overlaps the kernels (a GPU), a step is max(kernels,
    host): the host's constant wins on a prefix of each piece, found by bisection.

    One op breaks the first premise: Doge's dt_proj runs over every cached key (AttentionSpec.dynamic_mask), so
    its rows grow with c, and under rates whose matmul efficiency depends on the rows (typical, calibrated) its
    time is not affine: the sum takes the chord between the range's ends (tests/spec/test_new_families.py bounds
    the difference from the step-by-step sum).

    A compressed layer's entries (AttentionDims.stride m: DeepSeek-V4) grow by one at every multiple of m, a
    step, not a line: the range is cut there too (the closing step a piece of its own), exact up to
    MAX_ENTRY_CUTS cuts; past that (a long generation over CSA's 4-token entries) each piece takes its chord
    (tests/properties/test_spec_space.py: exact below the cap; tests/cost/test_roofline.py: within 1e-4 above it
    on DeepSeek-V4-Flash).
    """
    lo, hi = prompt + 1, prompt + gen
    attention = [op for op in _decode_ops(spec, lo, batch, rates, tp, dtypes) if op.kind == "attention"]
    # A window (or a top-k: DeepSeek Sparse Attention's keys, a CSA layer's entries, m tokens each) stops the keys
    # a step reads from growing at c = w.
    windows = {op.dims.window for op in attention} | {op.dims.topk * op.dims.stride for op in attention
                                                       if op.dims.topk}
    # A step at c = k·m closes an entry (its compressor folds a window, its core appends it), the next reads it:
    # a piece of its own, [k·m, k·m + 1).
    entries = {c + closing for m in {op.dims.stride for op in attention if op.dims.stride > 1}
               for c in range(-(-lo // m) * m, hi + 1, m) for closing in (0, 1)}  # from the first at or past lo
    windows |= entries if len(entries) <= MAX_ENTRY_CUTS else set()
    # A chunked layer's step restarts at each chunk: the query at context c sees (c − 1) mod C + 1 keys,
    # affine between c = k·C + 1 and the next chunk's first step.
    chunks = {c for op in attention if op.dims.chunked
              for c in range((lo - 1) // op.dims.window * op.dims.window + 1, hi + 1, op.dims.window) if lo < c}
    cuts = sorted({lo, hi + 1} | {w for w in windows if w and lo < w <= hi} | chunks)
    total = 0.0
    for a, b in zip(cuts, cuts[1:]):  # [a, b): every op affine in c here
        host = host_time(_decode_ops(spec, a, batch, rates, tp, dtypes), rates)
        if not rates.overlap:
            total += (b - a) * host + _kernel_sum(spec, a, b, batch, rates, tp, dtypes)
            continue
        # Overlapped: each step takes max(its kernels, the host's constant issuing).  The kernels' time
        # never falls as c grows inside [a, b), so the host wins on a prefix [a, c*): find c* by bisection.
        def host_bound(c: int) -> bool:
            return step(spec, Workload.decode(c, batch, **dtypes), rates, tp).time <= host

        if not host_bound(a):
            c_star = a
        elif host_bound(b - 1):
            c_star = b
        else:
            c_star = last_true(host_bound, a, b - 1) + 1
        total += (c_star - a) * host + (_kernel_sum(spec, c_star, b, batch, rates, tp, dtypes) if c_star < b else 0.0)
    return total


def _kernel_sum(spec: ModelSpec, a: int, b: int, batch: int, rates: Rates, tp: int, dtypes: dict) -> float:
    """Σ over contexts c in [a, b) of a decode step's kernel time (with the in-step slowdown), every op
    affine in c on the range, in closed form: each line through its ends, c = a and c = b − 1 (the
    last is the decode step `predict` shows at its default context, so its op list is built once)."""
    at_a = [time_op(op, rates) for op in _decode_ops(spec, a, batch, rates, tp, dtypes)]
    steps = b - 1 - a  # from the first context to the last
    at_end = [time_op(op, rates) for op in _decode_ops(spec, b - 1, batch, rates, tp, dtypes)] if steps else at_a

    def slope(first: float, last: float) -> float:  # per context
        return (last - first) / steps if steps else 0.0

    total = 0.0
    for x, y in zip(at_a, at_end):
        if x.serial:
            x_sum, y_sum = x.t_math + x.t_memory, y.t_math + y.t_memory
            varying = _sum_affine(x_sum, slope(x_sum, y_sum), b - a)
        else:
            varying = _sum_max_affine(x.t_math, slope(x.t_math, y.t_math), x.t_memory, slope(x.t_memory, y.t_memory),
                                      b - a)
        total += slowdown_scale(x.op, rates) * ((b - a) * x.t_fixed + varying)
    return total


def _decode_ops(spec: ModelSpec, context: int, batch: int, rates: Rates, tp: int, dtypes: dict) -> tuple[Op, ...]:
    return step_ops(spec, Workload.decode(context, batch, **dtypes), rates.convention, tp)


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


_CRITICAL_CACHE: dict[tuple, tuple[ModelSpec, int | None]] = {}


def critical_batch(spec: ModelSpec, context: int, rates: Rates, *, weights_only: bool = True,
                   limit: int = 1 << 20, tp: int = 1, **dtypes) -> int | None:
    """Smallest batch at which decode turns compute-bound: the weight matmuls
    (weights_only, the classic P/W·bytes-per-weight/2 figure) or the whole
    step.  None when it stays memory-bound up to `limit` (long-context KV
    reads grow with the batch too).  Neither depends on the batch asked about, so the answer is
    cached per spec, rates, dtypes and TP (a sweep over batches searches once), and for the whole
    step per context too; the weight matmuls do not depend on the context."""
    key = (id(spec), rates.value_key(), weights_only, limit, tp, tuple(sorted(dtypes.items())),
           None if weights_only else context)
    hit = _CRITICAL_CACHE.get(key)
    if hit is not None and hit[0] is spec:
        return hit[1]
    if len(_CRITICAL_CACHE) > 4096:
        _CRITICAL_CACHE.clear()
    value = _critical_batch(spec, context, rates, weights_only, limit, tp, dtypes)
    _CRITICAL_CACHE[key] = (spec, value)
    return value


def _critical_batch(spec: ModelSpec, context: int, rates: Rates, weights_only: bool, limit: int, tp: int,
                    dtypes: dict) -> int | None:

    def margin(batch: int) -> float:  # math time − memory time: ≥ 0 once compute-bound
        ops = [time_op(op, rates) for op in _decode_ops(spec, context, batch, rates, tp, dtypes)]
        if weights_only:
            ops = [o for o in ops if o.op.kind == "matmul" and o.op.params]
        return sum(o.t_math for o in ops) - sum(o.t_memory for o in ops)

    # A dense model's decode FLOPs and bytes are affine in B, so the margin is a
    # line through B = 1 and 2 whose root is the answer; MoE expert loads and
    # tile quantization bend it, so the root only starts a bracketed false-position
    # search (Illinois), which needs a handful of evaluations where bisection needs ~20.
    m1, m2 = margin(1), margin(2)
    if m1 >= 0:
        return 1
    if m2 <= m1 and margin(limit) < 0:  # not approaching the ridge: memory-bound up to the limit
        return None
    lo, m_lo = (2, m2) if m2 < 0 else (1, m1)
    hi = min(limit, max(lo + 1, int(1 - m1 / (m2 - m1)) + 1)) if m2 > m1 else min(limit, 2 * lo)
    m_hi = margin(hi)
    while m_hi < 0:  # expand the bracket
        if hi >= limit:
            return None
        lo, m_lo = hi, m_hi
        hi = min(limit, 2 * hi)
        m_hi = margin(hi)
    return false_position(margin, lo, m_lo, hi, m_hi)


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
    tp: int = 1  # tensor-parallel ranks; every step is one rank's
    gpus: int = 1  # GPUs in all: gpus / tp data-parallel replicas
    measured: tuple = ()  # measure.steps.MeasuredStep for prefill and decode, with --measure

    @property
    def replicas(self) -> int:
        return self.gpus // self.tp

    def to_dict(self) -> dict:
        """The archcalc.roofline/1 JSON document."""
        from archcalc.report.roofline import roofline_json

        return roofline_json(self)


def predict(spec: ModelSpec, hw: HardwareProfile, *, prompt: int, context: int, gen: int, batch: int, tp: int = 1,
            **dtypes) -> list[Prediction]:
    """One Prediction per rate set of `hw` (peak, typical, calibrated), for one of `tp` ranks."""
    out = []
    for rates in rate_sets(hw, Workload(**dtypes)):
        # The critical batch is the ridge-point idea: the peak set's.  Under tile
        # quantization the margin is a sawtooth with many crossings; no other set has one.
        peak = rates.label == "peak"
        out.append(Prediction(
            rates,
            prefill=step(spec, prefill_workload(prompt, batch, **dtypes), rates, tp),
            decode=step(spec, Workload.decode(context, batch, **dtypes), rates, tp),
            decode_total=decode_time(spec, prompt, gen, batch, rates, tp, **dtypes),
            gen=gen,
            critical_batch=critical_batch(spec, context, rates, tp=tp, **dtypes) if peak else None,
            step_critical_batch=critical_batch(spec, context, rates, weights_only=False, limit=1 << 16, tp=tp,
                                               **dtypes) if peak else None,
        ))
    return out
