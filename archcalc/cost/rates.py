"""Rate sets: how fast a device runs each kind of op, the parameters of the time model.

cost/roofline.py turns an Op into time with ONE rule for every rate set:

    t = fixed + max(FLOPs / compute rate, bytes / memory rate)

where `fixed` is the launch cost of a kernel (the link latency for a
collective).  A rate set says what those rates are for an op of a given
shape.  Four kinds, each labelled in every output:

- peak: the datasheet: dense matrix-unit FLOP/s, fp32 vector FLOP/s, memory
  bandwidth, no launch cost.  A strict lower bound on time.
- typical: the datasheet scaled by sourced public figures (the profile's
  `typical` section, hardware/SOURCES.md): large-GEMM efficiency with tile and
  wave quantization, achievable bandwidth, attention efficiency by phase, a
  launch cost per kernel, link efficiency and latency.
- calibrated: what `archcalc calibrate` measured on the device: matmul
  FLOP/s interpolated over the measured (m, k·n) grid, SDPA rates for
  prefill and decode, copy / read bandwidth, row-kernel bandwidth by kind,
  the measured launch cost, and an eager step's overhead (dispatch per
  kernel, the kernels' slowdown inside a real-size step).  Its attention work is what SDPA runs (the
  "sdpa" convention: an explicit window mask computes the whole rectangle).
- measured (measure/, not here): each op run as a real kernel.

Nothing here imports torch.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from math import ceil, log

from archcalc.ops.arrays import ceil_div, greater, lesser, pow2_at_least, round_int

from archcalc.hardware.calibration import Calibration
from archcalc.hardware.profile import HardwareProfile, TypicalRates
from archcalc.ops import op as ops
from archcalc.ops.dtypes import nbytes
from archcalc.ops.op import AttentionDims, GatherDims, MatmulDims, Op, RowDims
from archcalc.ops.workload import Workload

W8A8_DTYPES = ("fp8", "int8")  # weight formats whose matmuls run on 8-bit units (activations quantized too)
TILE = 128  # cuBLAS/hipBLASLt output tile edge used for tile and wave quantization
SPLIT_K_MIN = 256  # smallest k slice of a split-K GEMM (the k-tile depth × a few stages)
MIN_TILE_M = 16  # rows of the smallest tensor-core MMA (mma.m16n8k16): fewer rows still cost 16


# ---- interpolation over measured points ---------------------------------------------------


@dataclass(frozen=True)
class Curve:
    """y(x), piecewise linear in (log x, log y) through measured points, flat beyond the ends."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]

    @classmethod
    def of(cls, points: dict[float, list[float]]) -> Curve:
        """Points {x: [y, ...]}: the median y at each x."""
        xs = sorted(points)
        return cls(tuple(xs), tuple(sorted(points[x])[len(points[x]) // 2] for x in xs))

    def __call__(self, x: float) -> float:
        xs, ys = self.xs, self.ys
        if x <= xs[0]:
            return ys[0]
        if x >= xs[-1]:
            return ys[-1]
        i = bisect_left(xs, x)
        f = (log(x) - log(xs[i - 1])) / (log(xs[i]) - log(xs[i - 1]))
        return ys[i - 1] ** (1 - f) * ys[i] ** f


@dataclass(frozen=True)
class Surface:
    """y(m, size): a Curve in m for each measured size, interpolated between sizes in log-log."""

    sizes: tuple[float, ...]
    curves: tuple[Curve, ...]

    def __call__(self, m: float, size: float) -> float:
        return Curve(self.sizes, tuple(c(m) for c in self.curves))(size)


# ---- the rate set ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Rates:
    label: str  # "peak", "typical" or "calibrated"
    matmul: float  # FLOP/s of large matmuls (and attention) in the compute dtype
    vector: float  # FLOP/s for elementwise work
    bandwidth: float  # bytes/s for memory traffic
    source: str = "datasheet"  # where the numbers come from, printed with them
    convention: str = "causal"  # the attention work the kernels run (ops/conventions.py)
    launch: float = 0.0  # seconds of fixed cost per kernel
    dispatch: float = 0.0  # seconds of framework overhead per kernel between kernels (Step.overhead)
    step_host: float = 0.0  # seconds of framework overhead per step, whatever its kernels (Step.overhead)
    step_slowdown: float = 0.0  # share by which compute kernels run slower inside an eager step (Step.overhead)
    link_bandwidth: float | None = None  # bytes/s one rank sends over the interconnect
    link_latency: float = 0.0  # seconds per collective
    # typical: fractions of the datasheet
    gemm_efficiency: float = 1.0
    quantized_tiles: bool = False  # charge partial output tiles and the last wave as whole ones
    compute_units: int | None = None  # SMs / CUs, for wave quantization
    attention_prefill_efficiency: float = 1.0
    attention_decode_efficiency: float = 1.0  # of the bandwidth, for decode KV reads
    # calibrated: measured curves
    matmul_surface: Surface | None = None  # effective FLOP/s over (m, k·n)
    # experts' grouped GEMMs (where grouped_experts), FLOP/s over (rows per expert, k·n); else matmul_surface
    grouped_surface: Surface | None = None
    # (phase, grouped-query?, masked?, head dim) -> SDPA FLOP/s over the FLOPs of the call.  FLOPs, not
    # bytes, in decode too: torch's CPU kernel takes as long for 2 KV heads as for 8 (it works per query head).
    attention: dict[tuple[str, bool, bool, int], Curve] = field(default_factory=dict)
    # Engines run an op as one kernel (grouped-GEMM experts, fused sums); torch eager (fused=False) runs
    # fused projections part by part, a sum of n tensors as n − 1 adds, and experts as one matmul per
    # touched expert and part, or as one grouped GEMM where the calibration ran torch's grouped_mm.
    fused: bool = True
    grouped_experts: bool = False  # unfused, yet an expert op runs as one grouped GEMM (transformers 5)
    # The host issues kernels ahead of an asynchronous device (CUDA, MPS): a step's dispatch overlaps its
    # kernels instead of adding to them (Step.time).
    overlap: bool = False
    row_bandwidth: dict[str, Curve] = field(default_factory=dict)  # row kernel kind -> bytes/s over bytes

    def value_key(self) -> tuple:
        """Every field by value, hashable (its dicts as sorted items): equal for rate sets that time every op
        alike, whichever call built them (a cache key)."""
        return tuple(tuple(sorted(v.items())) if isinstance(v, dict) else v for v in vars(self).values())

    @property
    def ridge(self) -> float:
        """FLOPs per byte where large matmuls take as long in math as in memory."""
        return self.matmul * self.gemm_efficiency / self.bandwidth

    # What roofline.time_op asks, per op.

    def compute_rate(self, op: Op) -> float:
        """FLOP/s this op's matmul / attention FLOPs run at."""
        d = op.dims
        if op.kind == "attention":
            return self._attention_rate(op)
        if isinstance(d, MatmulDims):
            if self.matmul_surface is not None:
                return self._surface_rate(op)
            return self.matmul * self.gemm_efficiency * (self._quantization(d) if self.quantized_tiles else 1.0)
        return self.matmul * self.gemm_efficiency

    def memory_rate(self, op: Op) -> float:
        """bytes/s this op's traffic moves at."""
        if op.kind == "attention" and op.dims.eager_kernels:  # its elementwise kernels (roofline.time_op)
            curve = self.row_bandwidth.get("activation")
            kernels = op.dims.eager_kernels - ops.EAGER_MATMULS
            return curve(ops.eager_traffic(op.dims)[1] / kernels) if curve is not None else self.bandwidth
        if op.kind == "attention" and op.dims.new_tokens == 1:
            return self.bandwidth * self.attention_decode_efficiency
        if isinstance(op.dims, RowDims) or op.kind == "gather":
            curve = self.row_bandwidth.get(row_kind(op))
            if curve is not None:
                return curve(op.act_bytes + op.weight_bytes)
        return self.bandwidth

    def _attention_rate(self, op: Op) -> float:
        d: AttentionDims = op.dims
        if d.eager_kernels and self.matmul_surface is not None:
            # explicit Q Kᵀ and P V: batched over B·H heads of T rows by keys, which one batched GEMM tiles
            # together, as one matmul of T rows over the B·H heads' keys
            return self.matmul_surface(d.new_tokens, op.flops / (2 * d.new_tokens))
        curve = _nearest(self.attention, attention_kind(d))
        if curve is not None:
            return curve(op.flops)
        eff = self.attention_prefill_efficiency if d.new_tokens > 1 else 1.0
        return self.matmul * eff

    def _surface_rate(self, op: Op) -> float:
        """Measured FLOP/s of the matmul as the kernels run it: eager code runs each
        fused part (q, k, v; gate, up) as its own matmul, and experts one at a time or in one grouped
        GEMM (its parts fused; at the grouped GEMMs' own rates where calibrate measured them), either
        way each over its share of the routed rows."""
        d: MatmulDims = op.dims
        grouped = d.experts and self.grouped_experts
        widths = d.parts if d.parts and not self.fused and not grouped else (d.n,)
        m = ceil(d.m / touched_experts(d))  # a grouped GEMM, like one matmul per expert, tiles each apart
        surface = self.grouped_surface if grouped and self.grouped_surface is not None else self.matmul_surface
        seconds = sum(w / surface(m, d.k * w) for w in widths)  # per unit of 2·m·k
        return d.n / seconds

    def kernels(self, op: Op) -> int:
        """Kernels one execution of the op launches: one when fused; else one per fused
        part and touched expert (each over its share of the routed rows), n − 1 for a
        sum of n tensors; none for a table no token looks up (a drafter's embedding, DrafterSpec)."""
        d = op.dims
        if isinstance(d, GatherDims) and d.m == 0:
            return 0
        if self.fused:
            return 1
        if isinstance(d, MatmulDims):
            if d.experts and self.grouped_experts:
                return 1  # one grouped GEMM over every touched expert, fused parts and all
            return touched_experts(d) * max(1, len(d.parts))
        if isinstance(d, RowDims) and op.kind == "elementwise" and d.fn == "add":
            return max(1, d.inputs - 1)
        if isinstance(d, AttentionDims) and d.eager_kernels:
            return d.eager_kernels
        return 1

    def host_calls(self, op: Op) -> int:
        """The op's calls in the units the host's dispatch is calibrated in (calibrate: an eager Llama's host
        time per modelled kernel, its module's Python included): its kernels, except explicit eager
        attention, one function call like the SDPA call it stands in for."""
        return 1 if op.kind == "attention" and op.dims.eager_kernels else self.kernels(op)

    def _quantization(self, d: MatmulDims) -> float:
        """Tile and wave quantization (NVIDIA's Matrix Multiplication Background guide):
        the output is cut into tiles; a partial tile costs a whole one, and the
        last wave of tiles over the compute units runs part-empty.  Tiles are
        TILE wide in n; in m the library picks the smallest power of two that
        holds the rows, down to MIN_TILE_M (the m16n8k16 tensor-core MMA), as
        small-batch GEMM kernels do."""
        groups = touched_experts(d)  # a grouped GEMM tiles each touched expert's rows apart
        rows = ceil_div(d.m, groups)
        tile_m = lesser(TILE, greater(MIN_TILE_M, pow2_at_least(rows)))
        tiles_m, tiles_n = ceil_div(rows, tile_m), ceil_div(d.n, TILE)
        useful = rows * d.n / (tiles_m * tiles_n * tile_m * TILE)
        if not self.compute_units:
            return useful
        tiles = tiles_m * tiles_n * groups
        # Too few tiles to fill the device: split-K (cuBLAS) cuts k into slices of at least
        # SPLIT_K_MIN so that tiles × slices covers the compute units, as small-m kernels do.
        tiles = tiles * greater(1, lesser(self.compute_units // tiles, d.k // SPLIT_K_MIN))
        waves = ceil_div(tiles, self.compute_units)
        return useful * tiles / (waves * self.compute_units)

    def describe(self) -> dict:
        """The rates as printed and in JSON."""
        return {"label": self.label, "source": self.source, "matmul_flops_per_s": self.matmul,
                "vector_flops_per_s": self.vector, "bandwidth_bytes_per_s": self.bandwidth,
                "ridge_flops_per_byte": self.ridge, "launch_s": self.launch, "dispatch_s": self.dispatch,
                "step_host_s": self.step_host,
                "step_slowdown": self.step_slowdown, "overlap": self.overlap,
                "grouped_experts": self.grouped_experts, "convention": self.convention,
                "gemm_efficiency": self.gemm_efficiency, "link_bandwidth_bytes_per_s": self.link_bandwidth,
                "link_latency_s": self.link_latency}


def touched_experts(d: MatmulDims):
    """Experts a step's routed rows reach under uniform routing (1 without experts): the matrices an
    eager step runs one by one and a grouped GEMM tiles apart, each over its share of the rows (an int,
    or an array of them on the sweep's array path)."""
    if not d.experts:
        return 1
    return greater(1, round_int(ops.expected_experts_touched(d.experts, d.top_k, d.m // d.top_k)))


def attention_kind(d: AttentionDims) -> tuple[str, bool, bool, int]:
    """The kind of SDPA call a rate is measured for: (phase, grouped-query?, masked?, head dim).  Masked
    as measure/kernels.py runs it: a prefill under a window shorter than its keys takes an explicit mask;
    a decode step reads the window's keys and needs none."""
    masked = d.new_tokens > 1 and d.window is not None and d.window < d.context
    return phase(d), d.n_kv_heads < d.n_heads, masked, d.qk_dim


def phase(d: AttentionDims) -> str:
    return "decode" if d.new_tokens == 1 else "prefill"


def _nearest(curves: dict, key: tuple[str, bool, bool, int]) -> Curve | None:
    """The curve measured closest to `key` = (phase, grouped-query?, masked?, head dim):
    the same kind of call where there is one, at the nearest head dim (log scale)."""
    for width in (3, 2, 1):
        same = [k for k in curves if k[:width] == key[:width]]
        if same:
            return curves[min(same, key=lambda k: abs(log(k[3] / key[3])))]
    return None


def row_kind(op: Op) -> str:
    """Which calibrated row kernel an op resembles (measure/kernels.py runs the same kinds)."""
    if op.kind == "gather":
        return "gather"
    d: RowDims = op.dims
    if op.kind == "norm":
        return "layernorm" if d.norm == "layernorm" else "rmsnorm"
    if d.fn in ("rope", "add"):
        return d.fn
    # an activation (ops.ROW_FNS), a sigmoid gate, or softcap's tanh: costed as an activation
    return "gated_activation" if d.inputs > 1 else "activation"


# ---- building the sets ----------------------------------------------------------------------


def compute_dtype(weight_dtype: str, act_dtype: str, hw: HardwareProfile) -> str:
    """fp8/int8 weights run W8A8 on the 8-bit units where the device has them;
    int4 (weight-only) and 16-bit weights compute in the activation dtype."""
    if weight_dtype in W8A8_DTYPES and weight_dtype in hw.peak_flops:
        return weight_dtype
    return act_dtype


def peak_rates(hw: HardwareProfile, dtype: str) -> Rates:
    return Rates("peak", hw.peak(dtype), hw.peak("fp32"), hw.memory_bandwidth, source=f"{hw.name} datasheet",
                 link_bandwidth=_link(hw))


def typical_rates(hw: HardwareProfile, dtype: str, t: TypicalRates) -> Rates:
    link = _link(hw)
    return Rates("typical", hw.peak(dtype), hw.peak("fp32"), hw.memory_bandwidth * t.bandwidth_efficiency,
                 source=f"{hw.name} datasheet × sourced efficiencies (hardware/SOURCES.md)",
                 launch=t.launch_s, link_bandwidth=link * t.link_efficiency if link else None,
                 link_latency=t.link_latency_s, gemm_efficiency=t.gemm_efficiency, quantized_tiles=True,
                 compute_units=t.compute_units,
                 attention_prefill_efficiency=t.attention_prefill_efficiency,
                 attention_decode_efficiency=t.attention_decode_efficiency)


def calibrated_rates(hw: HardwareProfile, cal: Calibration) -> Rates:
    """A rate set from a Calibration (hardware/calibration.py)."""
    launch = cal.launch_s

    def busy(seconds: float) -> float:  # a kernel's time past the launch cost (kept positive under noise)
        return max(seconds - launch, seconds * 1e-6)

    def surface(points: list[tuple[int, int, int, int, float]]) -> Surface:
        """Effective FLOP/s over (rows m, k·n), once the launch cost is taken out, from (groups, m, k, n,
        seconds): a matmul is one group."""
        by_size: dict[int, dict[float, list[float]]] = {}
        for groups, m, k, n, secs in points:
            by_size.setdefault(k * n, {}).setdefault(m, []).append(2 * groups * m * k * n / busy(secs))
        sizes = sorted(by_size)
        return Surface(tuple(sizes), tuple(Curve.of(by_size[s]) for s in sizes))

    best = max(2 * p.m * p.k * p.n / p.seconds for p in cal.matmul)

    attention: dict[tuple[str, bool, bool, int], dict[float, list[float]]] = {}
    for p in cal.attention:  # the FLOPs of the call calibrate timed, by the constructor it timed
        op = ops.sdpa_call("calibration", batch=p.batch, q_len=p.q_len, kv_len=p.kv_len, heads=p.heads,
                           kv_heads=p.kv_heads, head_dim=p.head_dim, window=p.window, dtype=cal.dtype)
        attention.setdefault(attention_kind(op.dims), {}).setdefault(op.flops, []).append(op.flops / busy(p.seconds))
    rows: dict[str, dict[float, list[float]]] = {}
    for p in cal.rows:
        moved = nbytes(p.rows * p.width * ROW_TENSORS[p.kind], cal.dtype)
        rows.setdefault(p.kind, {}).setdefault(moved, []).append(moved / busy(p.seconds))
    return Rates(
        "calibrated", best, hw.peak("fp32"), cal.bandwidth.read_bytes_per_s,
        source=f"calibrated on {cal.device.name} ({cal.dtype}, {cal.device.threads} threads, {cal.device.date[:10]})",
        convention="sdpa", launch=launch, dispatch=cal.dispatch_s or 0.0,
        step_host=cal.step_host_s or 0.0, step_slowdown=cal.step_slowdown or 0.0,
        link_bandwidth=_link(hw),
        matmul_surface=surface([(1, p.m, p.k, p.n, p.seconds) for p in cal.matmul]),
        grouped_surface=surface([(p.groups, p.m, p.k, p.n, p.seconds) for p in cal.grouped]) if cal.grouped else None,
        attention={key: Curve.of(pts) for key, pts in attention.items()},
        fused=False,  # torch eager, as measure/kernels.py runs the ops
        grouped_experts=cal.grouped_experts, overlap=cal.device.kind != "cpu",
        row_bandwidth={kind: Curve.of(pts) for kind, pts in rows.items()},
    )


# Tensors of [rows, width] a row kernel reads + writes (measure/kernels.py's kernels, the op list's act_bytes):
# a norm reads x and writes y; an activation likewise; a gated one reads gate and up; an add reads two;
# a gather writes the rows it reads; RoPE reads x (cos/sin are small) and writes the result.
ROW_TENSORS = {"rmsnorm": 2, "layernorm": 2, "activation": 2, "gated_activation": 3, "add": 3, "gather": 2, "rope": 2}


def _link(hw: HardwareProfile) -> float | None:
    """Bytes/s one rank sends: half the datasheet's total bidirectional figure."""
    bw = hw.interconnect.bandwidth if hw.interconnect else None
    return bw / 2 if bw else None


def rate_sets(hw: HardwareProfile, wl: Workload) -> list[Rates]:
    """Peak, typical (when the profile has sourced efficiencies) and calibrated
    (when the profile carries a calibration), in that order."""
    dtype = compute_dtype(wl.weight_dtype, wl.act_dtype, hw)
    out = [peak_rates(hw, dtype)]
    if hw.typical is not None:
        out.append(typical_rates(hw, dtype, hw.typical))
    if hw.calibration is not None:
        out.append(calibrated_rates(hw, hw.calibration))
    return out
