"""The time model's rate sets (cost/rates.py): hand-derived numbers from the
sources the model follows, and the one property every rate set must keep:
peak is a strict lower bound on time."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import debug_spec, spec_of, synthetic_calibration

from archcalc.cost.rates import Curve, Rates, calibrated_rates, rate_sets, touched_experts
from archcalc.cost.roofline import predict, step, time_op
from archcalc.hardware.profile import all_hardware, load_hardware
from archcalc.ops import op as ops
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload

A100 = load_hardware("a100-80gb")
H100 = load_hardware("h100")


def typical(hw=A100):
    r = rate_sets(hw, Workload())[1]
    assert r.label == "typical"
    return r


def matmul(m, k, n):
    return ops.matmul("t", "ffn", Workload(batch=m), k, n)


def test_tile_quantization_of_nvidias_guide():
    """NVIDIA's Matrix Multiplication Background guide ("Tile quantization"):
    with 128-wide tiles, n = 257 needs 3 tiles where 2.008 would do, so the
    GEMM runs at 257 / 384 = 66.9 % of the rate of n = 256."""
    r = Rates("t", 1.0, 1.0, 1.0, quantized_tiles=True)  # no compute units: tiles only
    assert r.compute_rate(matmul(128, 4096, 257)) == pytest.approx(257 / 384)
    assert r.compute_rate(matmul(128, 4096, 256)) == 1.0


def test_wave_quantization_of_nvidias_guide():
    """The same guide ("Wave quantization", A100's 108 SMs): 108 tiles fill one
    wave; 109 tiles need two, the second almost empty: 109 / 216 = 50.5 %."""
    r = typical(A100)
    base = r.matmul * r.gemm_efficiency
    assert r.compute_rate(matmul(128, 256, 108 * 128)) == pytest.approx(base)  # k too short to split
    assert r.compute_rate(matmul(128, 256, 109 * 128)) == pytest.approx(base * 109 / 216)


def test_small_m_pays_a_16_row_tile_and_splits_k():
    """Decode (m = 1) runs on the m16n8k16 MMA: 1/16 of its rows are useful; with
    one 128-wide tile of n the 108 SMs are filled by split-K over k = 8192
    (at most k / 256 = 32 slices): 32 slices of 1 tile in one wave of 108."""
    r = typical(A100)
    base = r.matmul * r.gemm_efficiency
    assert r.compute_rate(matmul(1, 8192, 128)) == pytest.approx(base / 16 * 32 / 108)
    assert r.compute_rate(matmul(9, 8192, 128)) == pytest.approx(base * 9 / 16 * 32 / 108)


def test_a_small_all_reduce_waits_one_latency_at_any_tp():
    """Serving engines all-reduce a decode step's activations with a one-shot kernel (every rank reads
    every peer's buffer at once), not a ring of 2(t − 1) steps: vLLM's custom all-reduce on H100 takes
    8.8, 8.5 and 9.3 µs for 4 KB over 2, 4 and 8 GPUs, and 11.8 µs for 32 KB over 8 (sglang PR 2904's
    table).  The H100's typical rates (one latency of 10 µs + bytes at the link's rate) predict each
    within 20 %, the spread of those four figures about their middle; an all-gather and a send alike."""
    wl = Workload()
    r = typical(H100)
    measured = {(2, 4096): 8.8e-6, (4, 4096): 8.5e-6, (8, 4096): 9.3e-6, (8, 32768): 11.8e-6}
    for (ranks, nbytes), seconds in measured.items():
        ar = ops.collective("ar", "attention", wl, nbytes // 2, ranks, "all_reduce")  # bf16 values
        assert time_op(ar, r).time == pytest.approx(seconds, rel=0.2)
    for pattern in ("all_gather", "send_recv"):
        one = time_op(ops.collective("c", "attention", wl, 4096, 4, pattern), r)
        assert one.t_fixed == r.link_latency


def test_curve_interpolates_in_log_log_and_is_flat_outside():
    c = Curve((1.0, 4.0), (1e9, 4e9))  # a rate proportional to m between the points
    assert c(2.0) == pytest.approx(2e9)
    assert (c(0.5), c(16.0)) == (1e9, 4e9)
    assert Curve.of({2.0: [3.0, 1.0, 2.0]}).ys == (2.0,)  # the median of repeats


def test_calibrated_matmul_rates_reproduce_their_points():
    cal = synthetic_calibration(matmul_rate=5e11, launch=2e-6)
    r = calibrated_rates(A100, cal)
    for p in cal.matmul:
        op = matmul(p.m, p.k, p.n)
        assert r.launch + op.flops / r.compute_rate(op) == pytest.approx(p.seconds, rel=1e-9)


@pytest.mark.parametrize("hw", [h for h in all_hardware() if h.typical], ids=lambda h: h.name)
@pytest.mark.parametrize("name, batch, prompt", [("llama-3.1-8b", 1, 128), ("qwen3-30b-a3b", 32, 2048),
                                                 ("gemma-3-27b", 4, 8192), ("deepseek-v2-lite", 8, 512)])
def test_peak_is_a_lower_bound_on_every_op(hw, name, batch, prompt):
    """Every efficiency is ≤ 1 and every launch ≥ 0, so no op is faster than at peak."""
    spec = spec_of(name)
    peak, typ = rate_sets(hw, Workload())[:2]
    for wl in (Workload(batch=batch, new_tokens=prompt, context=prompt, logits="last"),
               Workload.decode(prompt + 64, batch)):
        fast, slow = step(spec, wl, peak), step(spec, wl, typ)
        assert all(s.time >= f.time for f, s in zip(fast.ops, slow.ops))
        assert slow.time > fast.time


def test_tensor_parallel_splits_the_work_and_adds_the_link():
    """Llama-3.1-70B decode on 1 vs 4 H100s: each rank reads a quarter of the
    weights, so the step is faster but by less than 4× (the all-reduces)."""
    spec = spec_of("llama-3.1-70b")
    one = predict(spec, H100, prompt=128, context=256, gen=16, batch=1)[1]
    four = predict(spec, H100, prompt=128, context=256, gen=16, batch=1, tp=4)[1]
    assert one.tpot / 4 < four.tpot < one.tpot
    names = [o.op.name for o in four.decode.ops if o.op.kind == "collective"]
    assert names == ["embedding.all_reduce", "layers.attn.o.all_reduce", "layers.ffn.down.all_reduce",
                     "lm_head.all_gather"]


def test_debug_spec_step_counts_every_kernel_launch():
    """Typical launch costs 2 µs per kernel: a decode step of the debug spec
    launches one kernel per op execution (Σ counts)."""
    spec = debug_spec()
    r = typical(H100)
    s = step(spec, Workload.decode(64, 1), r)
    assert sum(o.t_fixed for o in s.ops) == pytest.approx(r.launch * sum(o.op.count for o in s.ops))


# ---- calibrated rates from measured points (hand-derived FLOPs and bytes) -----------------------

LAUNCH = 2e-6


def _attention_points():
    from archcalc.hardware.calibration import AttentionPoint

    def point(rate, flops, **shape):
        return AttentionPoint(heads=8, head_dim=64, seconds=LAUNCH + flops / rate, **shape)

    # Causal prefill of 256 tokens: 256·257/2 = 32,896 pairs × 8 heads × 2 × (64 + 64) = 67,371,008 FLOPs.
    # A 256-token window as a mask over 1024 × 1024: the whole rectangle, 2,147,483,648 FLOPs.
    # Decode of 4 sequences over 1024 keys: 4,096 pairs → 8,388,608 FLOPs.
    return [point(50e9, 67_371_008, batch=1, kv_heads=2, q_len=256, kv_len=256),
            point(20e9, 2_147_483_648, batch=1, kv_heads=2, q_len=1024, kv_len=1024, window=256),
            point(5e9, 8_388_608, batch=4, kv_heads=2, q_len=1, kv_len=1024),
            point(7e9, 8_388_608, batch=4, kv_heads=8, q_len=1, kv_len=1024)]


def _attention(batch, t, s, kv_heads, head_dim=64, window=None):
    from archcalc.ops.conventions import CONVENTIONS

    wl = Workload(batch=batch, new_tokens=t, context=s)
    return ops.attention("a", wl, CONVENTIONS["sdpa"], n_heads=8, kv_heads=kv_heads, qk_dim=head_dim, v_dim=head_dim,
                         kv_width=2 * kv_heads * head_dim, window=window, layer_kind="local" if window else "global")


def test_calibrated_attention_rates_by_phase_grouping_and_mask():
    r = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, attention=_attention_points()))
    prefill, masked = _attention(1, 256, 256, 2), _attention(1, 1024, 1024, 2, window=256)
    decode_gqa, decode_mha = _attention(4, 1, 1024, 2), _attention(4, 1, 1024, 8)
    assert (prefill.flops, masked.flops, decode_gqa.flops) == (67_371_008, 2_147_483_648, 8_388_608)
    assert r.compute_rate(prefill) == pytest.approx(50e9)
    assert r.compute_rate(masked) == pytest.approx(20e9)
    assert r.compute_rate(decode_gqa) == pytest.approx(5e9)
    assert r.compute_rate(decode_mha) == pytest.approx(7e9)
    # Unmeasured head dim or grouping: the nearest measured kind of call.
    assert r.compute_rate(_attention(1, 256, 256, 2, head_dim=128)) == pytest.approx(50e9)
    assert r.compute_rate(_attention(1, 256, 256, 8)) == pytest.approx(50e9)
    # softmax's elementwise FLOPs ride on the vector rate
    assert time_op(decode_gqa, r).t_math == pytest.approx(8_388_608 / 5e9 + decode_gqa.vector_flops / r.vector)


def test_calibrated_row_bandwidths_by_kind():
    """A norm of [256, 2048] bf16 reads x and writes y: 2,097,152 bytes; a gated
    activation reads gate and up and writes one: 3,145,728 bytes."""
    from archcalc.hardware.calibration import RowPoint

    rows = [RowPoint(kind="rmsnorm", rows=256, width=2048, seconds=LAUNCH + 2_097_152 / 30e9),
            RowPoint(kind="gated_activation", rows=256, width=2048, seconds=LAUNCH + 3_145_728 / 20e9),
            RowPoint(kind="gather", rows=256, width=2048, seconds=LAUNCH + 2_097_152 / 10e9)]
    r = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, rows=rows))
    wl = Workload(batch=256)
    norm = ops.norm("n", wl, 2048, "rmsnorm", False)
    act = ops.elementwise("layers.ffn.act", "ffn", wl, 2048, 5, inputs=2, fn="silu")
    gather = ops.gather("embedding", "embedding", wl, 32_000, 2048)
    assert r.memory_rate(norm) == pytest.approx(30e9, rel=1e-3)  # + the 4 KiB weight: the curve is flat there
    assert r.memory_rate(act) == pytest.approx(20e9)
    assert r.memory_rate(gather) == pytest.approx(10e9)
    assert r.memory_rate(ops.elementwise("x", "residual", wl, 2048, 1, inputs=2)) == r.bandwidth  # not measured


def test_calibrated_dispatch_is_a_step_overhead_per_kernel():
    """GPT-2's eager decode step launches 149 kernels (tests/cost/test_roofline.py)."""
    r = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, dispatch_s=1e-5))
    s = step(spec_of("gpt2"), Workload.decode(64, 1), r)
    assert r.dispatch == 1e-5 and s.overhead == pytest.approx(149e-5)
    assert s.time == pytest.approx(s.kernel_time + 149e-5)
    assert r.describe()["dispatch_s"] == 1e-5 and r.describe()["convention"] == "sdpa"


def test_calibrated_step_slowdown_scales_the_compute_kernels_not_the_collectives():
    """A step's compute kernels run `step_slowdown` longer than alone (dispatch on top); a TP all-reduce
    is NCCL's and keeps its link time.  Without a slowdown in the calibration, none."""
    spec = spec_of("llama-3.1-8b")
    base = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, dispatch_s=1e-5))
    slowed = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, dispatch_s=1e-5, step_slowdown=0.25))
    a, b = step(spec, Workload.decode(64, 1), base, 2), step(spec, Workload.decode(64, 1), slowed, 2)
    collectives = sum(o.time for o in a.ops if o.op.kind == "collective")
    assert collectives > 0 and a.kernel_time == b.kernel_time and base.step_slowdown == 0
    assert b.time == pytest.approx(a.time + 0.25 * (a.kernel_time - collectives), rel=1e-12)
    assert slowed.describe()["step_slowdown"] == 0.25


def test_calibrated_best_matmul_is_the_fastest_point():
    cal = synthetic_calibration(matmul_rate=4e11)
    assert calibrated_rates(A100, cal).matmul == pytest.approx(4e11)


def test_typical_rates_describe_the_profile():
    """h100-sxm.yaml: 80 % GEMM, 90 % bandwidth, 2 µs launch, NVLink 4 900 GB/s
    bidirectional (450 GB/s one way) at 82 %, 10 µs small-message latency."""
    d = typical(H100).describe()
    assert d == {**d, "label": "typical", "matmul_flops_per_s": 989.4e12, "gemm_efficiency": 0.8,
                 "bandwidth_bytes_per_s": pytest.approx(3.35e12 * 0.9), "launch_s": 2e-6, "dispatch_s": 0.0, "step_slowdown": 0.0,
                 "overlap": False, "grouped_experts": False,
                 "link_bandwidth_bytes_per_s": pytest.approx(450e9 * 0.82), "link_latency_s": 1e-5,
                 "convention": "causal", "ridge_flops_per_byte": pytest.approx(989.4e12 * 0.8 / 3.015e12)}
    assert rate_sets(H100, Workload())[0].describe()["link_bandwidth_bytes_per_s"] == 450e9


def test_false_position_finds_the_first_non_negative_integer():
    import random

    from archcalc.cost.solve import false_position

    rng = random.Random(7)
    for _ in range(300):
        root = rng.uniform(1.5, 5000)
        power = rng.choice([0.3, 1.0, 2.0])
        f = lambda x, root=root, power=power: x ** power - root ** power  # noqa: E731
        hi = 1
        while f(hi) < 0:
            hi *= 2
        expected = next(x for x in range(1, hi + 1) if f(x) >= 0)
        assert false_position(f, 1, f(1), hi, f(hi)) == expected


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "mixtral-8x7b", "llama-3.1-8b"])
def test_critical_batch_equals_a_bisection_over_the_definition(name):
    """The smallest B at which the decode step's weight matmuls take as long in
    math as in memory, by plain bisection over step() (MoE bends the line)."""
    from archcalc.cost.roofline import critical_batch

    spec, peak = spec_of(name), rate_sets(H100, Workload())[0]

    def compute_bound(b):
        mm = [o for o in step(spec, Workload.decode(2048, b), peak).ops if o.op.kind == "matmul" and o.op.params]
        return sum(o.t_math for o in mm) >= sum(o.t_memory for o in mm)

    lo, hi = 0, 1 << 16
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if compute_bound(mid) else (mid, hi)
    assert critical_batch(spec, 2048, peak) == hi


def test_prefill_computes_logits_for_the_last_token_only():
    from archcalc.cost.roofline import prefill_workload

    assert prefill_workload(512, 4, kv_dtype="fp8") == Workload(batch=4, new_tokens=512, context=512, logits="last",
                                                                kv_dtype="fp8")


def test_eager_kernel_counts_of_experts_and_sums():
    """Debug MoE (4 experts, top-2, gated) decoding one token: it touches
    4·(1 − (1 − 2/4)¹) = 2 experts, so eager code runs 2 × (gate, up) = 4
    matmuls for the up projection, 2 for the down one, and its combine of 2
    expert outputs is 1 add; engines (typical) run each op as one kernel."""
    spec = debug_spec(ffn={"moe": {"n_experts": 4, "top_k": 2, "d_expert": 8}})
    eager = calibrated_rates(A100, synthetic_calibration())
    by_name = {o.name: o for o in model_ops(spec, Workload.decode(16, 1))}
    counts = {n: eager.kernels(by_name[n]) for n in ("layers.moe.experts.up", "layers.moe.experts.down",
                                                     "layers.moe.combine", "layers.attn.qkv", "layers.attn.o")}
    assert counts == {"layers.moe.experts.up": 4, "layers.moe.experts.down": 2, "layers.moe.combine": 1,
                      "layers.attn.qkv": 3, "layers.attn.o": 1}
    assert {typical(H100).kernels(o) for o in by_name.values()} == {1}


def test_curve_ends_and_log_log_midpoints():
    """Between (2, 8) and (32, 128) the curve is y = 4x in log-log: at 8, f = log 4 / log 16 = 1/2 and
    y = 8^(1/2) · 128^(1/2) = 32; at an end it is that end's value exactly; a median of 4 repeats is the
    upper middle one (sorted index 2)."""
    c = Curve((2.0, 32.0), (8.0, 128.0))
    assert c(8.0) == pytest.approx(32.0) and c(4.0) == pytest.approx(16.0)
    assert (c(2.0), c(32.0)) == (8.0, 128.0)
    assert Curve.of({1.0: [4.0, 1.0, 3.0, 2.0]}).ys == (3.0,)


def _power_law_calibration():
    """Matmul points running at 1e6 · m^0.5 · (k·n)^0.25 FLOP/s: the log-log surface is exact inside the
    grid (m 1…1024, k·n 2^16…2^26)."""
    from archcalc.hardware.calibration import MatmulPoint

    points = [MatmulPoint(m=m, k=k, n=n, seconds=2 * m * k * n / (1e6 * m ** 0.5 * (k * n) ** 0.25))
              for m in (1, 16, 1024) for k, n in ((256, 256), (1024, 4096), (8192, 8192))]
    return synthetic_calibration().model_copy(update={"matmul": points})


def test_eager_matmuls_run_each_part_and_expert_on_its_own_rows():
    """measure/kernels.py runs q, k and v as three matmuls and each touched expert on its rows: the
    op's rate is its FLOPs over the parts' times.  Llama-3.1-8B's qkv over 64 tokens: parts 4,096,
    1,024, 1,024 of k 4,096, each at 64 rows; Qwen3-30B-A3B's expert gate/up (768 + 768 of k 2,048) over
    64 tokens × top 8 = 512 routed rows: 128·(1 − (120/128)^64) ≈ 126 experts touched, 512/126 → 5 rows."""
    r = calibrated_rates(A100, _power_law_calibration())

    def rate(m, k, n):
        return 1e6 * m ** 0.5 * (k * n) ** 0.25

    def op_of(name, op_name):
        return next(o for o in model_ops(spec_of(name), Workload(batch=1, new_tokens=64, context=64))
                    if o.name == op_name)

    qkv = op_of("llama-3.1-8b", "layers.attn.qkv")
    expected = 6144 / sum(w / rate(64, 4096, w) for w in (4096, 1024, 1024))
    assert r.compute_rate(qkv) == pytest.approx(expected, rel=1e-9)
    up = op_of("qwen3-30b-a3b", "layers.moe.experts.up")
    assert r.kernels(up) == 126 * 2
    assert r.compute_rate(up) == pytest.approx(1536 / sum(768 / rate(5, 2048, 768) for _ in range(2)), rel=1e-9)


def test_calibrated_rate_set_names_its_device_and_keeps_the_profile_s_link_and_vector_rate():
    from archcalc.hardware.calibration import DeviceInfo

    cal = synthetic_calibration().model_copy(update={"device": DeviceInfo(
        name="Test GPU", kind="cuda", torch="2.13.0", threads=16, date="2026-12-02T05:00:00Z")})
    r = calibrated_rates(A100, cal)
    assert r.source == "calibrated on Test GPU (bf16, 16 threads, 2026-12-02)"
    assert r.link_bandwidth == A100.interconnect.bandwidth / 2  # one direction of NVLink's total
    assert r.vector == A100.peak("fp32")


def test_a_windowed_decode_is_not_a_masked_call():
    """One query over a window reads the window's keys (sdpa with no mask, kv sliced); from two
    queries on, sdpa runs an explicit mask over the whole rectangle.  Each is timed as its own kind."""
    from archcalc.hardware.calibration import AttentionPoint

    def point(rate, flops, **shape):
        return AttentionPoint(heads=8, head_dim=64, batch=4, kv_heads=2, kv_len=1024,
                              seconds=LAUNCH + flops / rate, **shape)

    plain, windowed, two = _attention(4, 1, 1024, 2), _attention(4, 1, 1024, 2, window=256), \
        _attention(4, 2, 1024, 2, window=256)
    r = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, attention=[
        point(5e9, plain.flops, q_len=1), point(3e9, windowed.flops, q_len=1, window=256),
        point(9e9, two.flops, q_len=2, window=256)]))
    assert windowed.flops < plain.flops  # 256 keys instead of 1,024
    assert r.compute_rate(windowed) == pytest.approx(3e9) and r.compute_rate(plain) == pytest.approx(5e9)
    assert r.compute_rate(two) == pytest.approx(9e9)


def test_peak_rates_describe_the_datasheet():
    """NVIDIA's H100 SXM datasheet: 989.4 TFLOP/s dense BF16, 66.9 TFLOP/s FP32, 3.35 TB/s HBM3, NVLink
    900 GB/s (both directions); peak has no fixed costs and full efficiency."""
    from archcalc.cost.rates import peak_rates

    assert peak_rates(H100, "bf16").describe() == {
        "label": "peak", "source": "H100 SXM datasheet", "matmul_flops_per_s": 989.4e12, "vector_flops_per_s": 66.9e12,
        "bandwidth_bytes_per_s": 3.35e12, "ridge_flops_per_byte": 989.4e12 / 3.35e12, "launch_s": 0.0,
        "dispatch_s": 0.0, "step_host_s": 0.0, "step_slowdown": 0.0, "overlap": False, "grouped_experts": False,
        "convention": "causal", "gemm_efficiency": 1.0,
        "link_bandwidth_bytes_per_s": 450e9,
        "link_latency_s": 0.0}


def test_only_the_peak_prediction_carries_critical_batches():
    """The critical batch is the ridge-point idea, the peak set's (roofline's docstring); the typical
    set's tile-quantized margin has many crossings, so its prediction has none."""
    preds = predict(spec_of("llama-3.1-8b"), H100, prompt=128, context=256, gen=8, batch=1)
    assert [p.rates.label for p in preds] == ["peak", "typical"]
    assert preds[0].critical_batch is not None and preds[0].step_critical_batch is not None
    assert preds[1].critical_batch is None and preds[1].step_critical_batch is None


@pytest.mark.parametrize("name, hw, weights_only, evaluations", [
    ("llama-3.1-8b", "h100", True, 4), ("gpt2", "a100-80gb", True, 4), ("llama-3.1-70b", "a100-80gb", False, 4),
    ("llama-3.1-8b", "h100", False, 3), ("qwen3-30b-a3b", "h100", True, 18), ("deepseek-v3", "a100-80gb", False, 17),
])
def test_critical_batch_search_is_exact_and_short(monkeypatch, name, hw, weights_only, evaluations):
    """The answer is the first batch whose margin (math − memory time, of the weight matmuls or of the
    whole step) is ≥ 0, checked on both sides; and it is found in a few evaluations of the margin: a
    dense model's margin is affine in B, so the line through B = 1 and 2 lands on it (4 evaluations);
    one that never turns compute-bound is told by 3; MoE bends the line and regula falsi takes over."""
    from archcalc.cost import roofline

    spec, peak = spec_of(name), rate_sets(load_hardware(hw), Workload())[0]
    calls = []
    counting = roofline._decode_ops

    def decode_ops(spec_, context, batch, *args):
        calls.append(batch)
        return counting(spec_, context, batch, *args)

    monkeypatch.setattr(roofline, "_decode_ops", decode_ops)
    value = roofline.critical_batch(spec, 2048, peak, weights_only=weights_only, limit=1 << 16)
    assert len(calls) <= evaluations
    monkeypatch.setattr(roofline, "_decode_ops", counting)

    def margin(b):
        ops = step(spec, Workload.decode(2048, b), peak).ops
        if weights_only:
            ops = [o for o in ops if o.op.kind == "matmul" and o.op.params]
        return sum(o.t_math for o in ops) - sum(o.t_memory for o in ops)

    if value is None:
        assert margin(1 << 16) < 0
    else:
        assert margin(value) >= 0 and (value == 1 or margin(value - 1) < 0)
    # the weight matmuls' answer holds at any context (cached per spec); another spec is not served it; equal
    # rates built by another call are served it, with no search
    again = 4096 if weights_only else 2048
    calls.clear()
    monkeypatch.setattr(roofline, "_decode_ops", decode_ops)
    rebuilt = rate_sets(load_hardware(hw), Workload())[0]
    assert rebuilt is not peak
    assert roofline.critical_batch(spec, again, rebuilt, weights_only=weights_only, limit=1 << 16) == value
    assert calls == []
    monkeypatch.setattr(roofline, "_decode_ops", counting)
    if weights_only:
        other = spec_of("qwen2.5-0.5b")
        assert roofline.critical_batch(other, 2048, peak, limit=1 << 16) != value
        # the whole step's answer is not the weight matmuls' (both cached, for the same spec and rates)
        assert roofline.critical_batch(spec, 2048, peak, weights_only=False, limit=1 << 16) != value


def test_predict_passes_tp_and_dtypes_to_every_part():
    """Each part of a prediction is the same function called alone with the same TP and dtypes."""
    from archcalc.cost.roofline import critical_batch, decode_time, prefill_workload

    spec = spec_of("llama-3.1-8b")
    dtypes = {"weight_dtype": "fp8", "kv_dtype": "fp8"}
    peak, typ = predict(spec, H100, prompt=512, context=640, gen=128, batch=4, tp=2, **dtypes)
    for p in (peak, typ):
        r = p.rates
        assert p.prefill == step(spec, prefill_workload(512, 4, **dtypes), r, 2)
        assert p.decode == step(spec, Workload.decode(640, 4, **dtypes), r, 2)
        assert p.decode_total == decode_time(spec, 512, 128, 4, r, 2, **dtypes)
    assert peak.critical_batch == critical_batch(spec, 640, peak.rates, tp=2, **dtypes)
    assert peak.step_critical_batch == critical_batch(spec, 640, peak.rates, weights_only=False, limit=1 << 16,
                                                      tp=2, **dtypes)
    assert peak.critical_batch != critical_batch(spec, 640, peak.rates)  # fp8 weights, TP 2: another ridge
    assert peak.decode_total != decode_time(spec, 512, 128, 4, peak.rates)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "gemma-3-1b", "llama-4-scout"])
def test_decode_time_closed_form_with_fixed_costs_and_dispatch(name):
    """With a launch cost per kernel (typical rates) and a framework dispatch per kernel (a calibration),
    the closed form still equals the step-by-step sum: both fixed terms count once per step.  Llama 4's
    chunked layers restart at every 8,192 tokens, so the steps cross a chunk boundary."""
    from archcalc.cost.roofline import decode_time

    spec = spec_of(name)
    cal = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, dispatch_s=1e-5))
    slowed = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, dispatch_s=1e-5, step_slowdown=0.25))
    prompt, gen = (8100, 200) if name == "llama-4-scout" else (500, 90)
    for rates in (typical(H100), cal, slowed):
        steps = [step(spec, Workload.decode(c, 2), rates) for c in range(prompt + 1, prompt + gen + 1)]
        assert decode_time(spec, prompt, gen, 2, rates) == pytest.approx(sum(s.time for s in steps), rel=1e-9)
    assert any(s.overhead > 0 for s in steps)


@pytest.mark.parametrize("name, model, kind", [
    ("layers.attn.norm", "gpt2", "layernorm"), ("layers.attn.norm", "llama-3.1-8b", "rmsnorm"),
    ("embedding", "llama-3.1-8b", "gather"), ("layers.ffn.act", "llama-3.1-8b", "gated_activation"),
    ("layers.ffn.act", "gpt2", "activation"), ("layers.ffn.act", "nemotron-4b", "activation"),
    ("layers.attn.rope", "llama-3.1-8b", "rope"),
    ("layers.residual.add", "llama-3.1-8b", "add"), ("lm_head.softcap", "gemma-2-9b", "activation"),
    ("layers.ffn.act", "phi-2", "activation"), ("layers.moe.experts.act", "mixtral-8x7b", "gated_activation"),
])
def test_each_row_op_is_timed_as_the_kernel_it_resembles(name, model, kind):
    """measure/kernels.py times norms, activations (plain or gated), adds, gathers and RoPE apart; every
    row op of the op list takes the calibrated bandwidth of its own kind (relu², GELU and soft-capping's
    tanh are activations)."""
    from archcalc.cost.rates import row_kind

    ops_ = {op.name: op for op in model_ops(spec_of(model), Workload(batch=1, new_tokens=8, context=8))}
    assert row_kind(ops_[name]) == kind


def test_the_datasheet_sets_keep_the_vector_rate_and_typical_names_its_sources():
    from archcalc.cost.rates import peak_rates, typical_rates

    t = typical_rates(H100, "bf16", H100.typical)
    assert peak_rates(H100, "fp8").vector == t.vector == H100.peak("fp32")
    assert t.source == "H100 SXM datasheet × sourced efficiencies (hardware/SOURCES.md)"
    assert (t.attention_prefill_efficiency, t.attention_decode_efficiency) == (
        H100.typical.attention_prefill_efficiency, H100.typical.attention_decode_efficiency)
    assert t.attention_prefill_efficiency < 1


def test_dispatch_counts_kernels_not_collectives_and_decode_time_keeps_tp():
    """The framework's per-kernel dispatch applies to compute kernels; a TP all-reduce is NCCL's, timed
    by the link.  The decode sum runs at the TP it is given."""
    from archcalc.cost.roofline import decode_time

    spec = spec_of("llama-3.1-8b")
    r = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, dispatch_s=1e-5))
    s = step(spec, Workload.decode(64, 1), r, 2)
    kernels = sum(o.op.count * r.kernels(o.op) for o in s.ops if o.op.kind != "collective")
    assert any(o.op.kind == "collective" for o in s.ops) and s.overhead == pytest.approx(1e-5 * kernels)
    steps = [step(spec, Workload.decode(c, 1), typical(H100), 2).time for c in range(65, 75)]
    assert decode_time(spec, 64, 10, 1, typical(H100), 2) == pytest.approx(sum(steps), rel=1e-9)


def test_typical_attention_efficiencies_apply_where_they_belong():
    """hardware/h100-sxm.yaml: FlashAttention prefill runs at its sourced fraction of the tensor rate;
    a decode step's attention streams the cache at the decode fraction of the bandwidth; prefill
    attention is not bandwidth-derated, decode not compute-derated."""
    r = typical(H100)
    t = H100.typical
    prefill, decode = _attention(1, 256, 256, 2), _attention(4, 1, 1024, 2)
    assert r.compute_rate(prefill) == pytest.approx(r.matmul * t.attention_prefill_efficiency)
    assert r.compute_rate(decode) == pytest.approx(r.matmul)
    assert r.memory_rate(decode) == pytest.approx(r.bandwidth * t.attention_decode_efficiency)
    assert r.memory_rate(prefill) == pytest.approx(r.bandwidth)
    assert t.attention_decode_efficiency != 1 and t.attention_prefill_efficiency != 1


def test_a_calibrated_row_kernel_moves_its_activations_and_its_weight():
    """A norm's measured bandwidth is looked up at the bytes it moves: rows in and out plus its
    weight; on a curve that is not flat the weight's bytes show."""
    from archcalc.hardware.calibration import RowPoint

    rows = [RowPoint(kind="rmsnorm", rows=r, width=2048, seconds=LAUNCH + (r * 2048 * 4) / (r * 1e8))
            for r in (1, 4096)]  # 1e8·r B/s: the rate grows with the rows
    r = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, rows=rows))
    norm = ops.norm("n", Workload(batch=16), 2048, "rmsnorm", False)
    curve = r.row_bandwidth["rmsnorm"]
    assert r.memory_rate(norm) == pytest.approx(curve(norm.act_bytes + norm.weight_bytes))
    assert curve(norm.act_bytes + norm.weight_bytes) != pytest.approx(curve(norm.act_bytes))


def test_eager_sums_launch_one_kernel_per_extra_input():
    r = calibrated_rates(A100, synthetic_calibration())
    wl = Workload()
    assert r.kernels(ops.elementwise("sum", "residual", wl, 64, 1, inputs=4)) == 3
    assert r.kernels(ops.elementwise("gate", "ffn", wl, 64, 5, inputs=2, fn="silu")) == 1


def test_the_nearest_attention_curve_keeps_the_kind_of_call_first():
    """An unmeasured head dim takes the same kind of call (phase, grouping, mask) at the nearest head
    dim, before a closer head dim of another kind."""
    from archcalc.hardware.calibration import AttentionPoint

    def point(rate, head_dim, window=None):
        a = _attention(1, 256, 256, 2, head_dim=head_dim, window=window)
        return AttentionPoint(heads=8, head_dim=head_dim, batch=1, kv_heads=2, q_len=256, kv_len=256, window=window,
                              seconds=LAUNCH + a.flops / rate)

    r = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, attention=[
        point(50e9, 64), point(40e9, 256), point(20e9, 128, window=64)]))
    assert r.compute_rate(_attention(1, 256, 256, 2, head_dim=128)) == pytest.approx(50e9)  # 64: nearer than 256
    assert r.compute_rate(_attention(1, 256, 256, 2, head_dim=200)) == pytest.approx(40e9)


def test_an_op_time_reports_its_tensor_and_vector_flops_and_a_link_free_collective():
    spec = spec_of("llama-3.1-8b")
    s = step(spec, Workload.decode(64, 1), typical(H100), 2)
    for o in s.ops:
        if o.op.kind != "collective":
            assert o.flops == o.op.count * (o.op.flops + o.op.vector_flops)
    from dataclasses import replace

    peak = replace(rate_sets(H100, Workload())[0], link_bandwidth=None)  # a profile that states no link
    ar = ops.collective("ar", "attention", Workload(), 4096, 2, "all_reduce")
    assert time_op(ar, peak).t_memory == 0.0


def test_calibrated_rates_keep_the_datasheet_vector_rate():
    """A calibration measures matmuls, attention, bandwidth and row kernels, not scalar FLOP/s: the
    vector rate stays the profile's non-tensor FP32 datasheet figure (A100: 19.5 TFLOP/s), whatever the
    calibrated dtype."""
    for dtype in ("bf16", "fp32"):
        assert calibrated_rates(A100, synthetic_calibration(dtype=dtype)).vector == 19.5e12


def test_the_calibrated_attention_call_is_the_layer_s_own():
    """The SDPA call calibrate times is the op the op list builds for a layer of that shape: Mistral-7B's
    attention (32 heads over 8 K/V heads of 128, a 4,096 window) over a 512-token prompt and a 1-token
    decode step at 8,192, in the sdpa convention; same dims, FLOPs, softmax work and bytes."""
    from archcalc.ops.conventions import CONVENTIONS

    spec = spec_of("mistral-7b-v0.1")
    for wl in (Workload(batch=1, new_tokens=512, context=512), Workload(batch=4, new_tokens=1, context=8192)):
        layer = next(o for o in model_ops(spec, wl, CONVENTIONS["sdpa"]) if o.kind == "attention")
        call = ops.sdpa_call("x", batch=wl.batch, q_len=wl.new_tokens, kv_len=wl.context, heads=32, kv_heads=8,
                             head_dim=128, window=4096)
        assert (call.dims, call.flops, call.vector_flops, call.act_bytes, call.kv_bytes, call.shapes) == \
            (layer.dims, layer.flops, layer.vector_flops, layer.act_bytes, layer.kv_bytes, layer.shapes)
        # an fp32 calibration moves 4-byte activations and cache: twice the bytes, the same work
        wide = ops.sdpa_call("x", batch=wl.batch, q_len=wl.new_tokens, kv_len=wl.context, heads=32, kv_heads=8,
                             head_dim=128, window=4096, dtype="fp32")
        assert (wide.act_bytes, wide.kv_bytes, wide.flops) == (2 * call.act_bytes, 2 * call.kv_bytes, call.flops)


def test_a_device_slower_at_math_than_at_memory_is_compute_bound_from_batch_one():
    """Below a ridge of one FLOP per weight byte read (here 1 GFLOP/s against the H100's 3.35 TB/s),
    a bf16 decode step (2 FLOPs per 2-byte weight at batch 1) is compute-bound already: the critical
    batch is 1, weights alone or the whole step."""
    from dataclasses import replace

    from archcalc.cost.roofline import critical_batch

    slow = replace(rate_sets(H100, Workload())[0], matmul=1e9, vector=1e9)
    for weights_only in (True, False):
        assert critical_batch(spec_of("llama-3.1-8b"), 4096, slow, weights_only=weights_only) == 1


def test_the_step_critical_batch_is_for_the_step_predicted():
    """roofline's step critical batch is the one of the step it prints: on the same ranks (TP 2 adds
    an all-reduce per block, so more rows are needed to reach the ridge) and the same dtypes (int4
    weights reach it sooner); by the definition, the smallest B whose step is compute-bound, searched
    here by the solver with those options."""
    from archcalc.cost.roofline import critical_batch, predict

    spec = spec_of("llama-3.1-8b")
    peak = rate_sets(H100, Workload())[0]
    for tp, dtypes in ((1, {}), (2, {}), (1, {"weight_dtype": "int4"})):
        p = predict(spec, H100, prompt=32, context=64, gen=32, batch=1, tp=tp, **dtypes)[0]
        assert p.step_critical_batch == critical_batch(spec, 64, peak, weights_only=False, limit=1 << 16, tp=tp,
                                                       **dtypes)
    assert len({predict(spec, H100, prompt=32, context=64, gen=32, batch=1, tp=tp, **d)[0].step_critical_batch
                for tp, d in ((1, {}), (2, {}), (1, {"weight_dtype": "int4"}))}) == 3
    # and at the context predicted (the answer is cached per context): each sequence of a longer one reads
    # more KV per row of math, so more rows are needed, as an uncached search finds
    from archcalc.cost.roofline import _critical_batch

    short, long = (predict(spec, H100, prompt=32, context=c, gen=32, batch=1)[0].step_critical_batch
                   for c in (64, 256))
    assert short == _critical_batch(spec, 64, peak, False, 1 << 16, 1, {})
    assert long == _critical_batch(spec, 256, peak, False, 1 << 16, 1, {}) and long > short


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen3-30b-a3b"])
@pytest.mark.parametrize("weights_only", [True, False])
def test_critical_batch_is_the_first_compute_bound_batch_of_a_scan_at_any_ridge(name, weights_only):
    """Whatever the ridge (rates from 0.4 to 300 FLOPs per byte: a batch-1 answer, a batch-2 answer, the
    bracket's first guess too small or too large, and none under the limit), the search ends on the first
    B of a plain scan whose decode step (its weight matmuls, or all of it) takes as long in math as in
    memory, or None when no B up to the limit does."""
    from dataclasses import replace

    from archcalc.cost.roofline import critical_batch

    spec, base, limit = spec_of(name), rate_sets(H100, Workload())[0], 1024

    def compute_bound(b, rates):
        ops_ = step(spec, Workload.decode(64, b), rates).ops
        ops_ = [o for o in ops_ if o.op.kind == "matmul" and o.op.params] if weights_only else ops_
        return sum(o.t_math for o in ops_) >= sum(o.t_memory for o in ops_)

    answers = set()
    for ridge in (0.4, 1.5, 2.5, 7.3, 40.0, 300.0, 5000.0):
        rates = replace(base, matmul=ridge * base.bandwidth, vector=ridge * base.bandwidth)
        scan = next((b for b in range(1, limit + 1) if compute_bound(b, rates)), None)
        assert critical_batch(spec, 64, rates, weights_only=weights_only, limit=limit) == scan, ridge
        answers.add(scan)
    assert {1, None} <= answers and len(answers) >= 5 and (2 in answers or spec.ffn.moe)


@pytest.mark.parametrize("prompt, gen", [(8190, 3), (8189, 3), (8192, 1), (8191, 1)])
def test_decode_time_at_a_chunk_edge_and_under_tp(prompt, gen):
    """The closed form against the step-by-step sum where Llama 4's chunk restart (context 8,193) is the
    last step, the one before it, the only one, or just past; and with TP 2 under a calibrated in-step
    slowdown, which scales the compute kernels but not the all-reduces."""
    from archcalc.cost.roofline import decode_time

    spec = spec_of("llama-4-scout")
    slowed = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, dispatch_s=1e-5, step_slowdown=0.25))
    for rates, tp in ((typical(H100), 1), (slowed, 2)):
        steps = [step(spec, Workload.decode(c, 2), rates, tp) for c in range(prompt + 1, prompt + gen + 1)]
        assert decode_time(spec, prompt, gen, 2, rates, tp) == pytest.approx(sum(s.time for s in steps), rel=1e-12)


def test_row_kernels_are_calibrated_by_what_they_run():
    """OPT's ReLU, Apertus' xIELU and a sigmoid output gate are activations (one and two inputs), RoPE
    its own kernel, a residual add an add, a norm its kind: the calibrated row bandwidth they take."""
    from archcalc.cost.rates import row_kind

    wl = Workload(batch=4)
    cases = {ops.elementwise("a", "ffn", wl, 8, 1, fn="relu"): "activation",
             ops.elementwise("a", "ffn", wl, 8, 11, fn="xielu"): "activation",
             ops.elementwise("a", "ffn", wl, 8, 5, inputs=2, fn="sigmoid"): "gated_activation",
             ops.elementwise("a", "ffn", wl, 8, 4, inputs=2, fn="silu"): "gated_activation",
             ops.elementwise("a", "lm_head", wl, 8, 1, fn="softcap"): "activation",
             ops.elementwise("a", "attention", wl, 8, 3, fn="rope"): "rope",
             ops.elementwise("a", "residual", wl, 8, 1, inputs=2): "add",
             ops.norm("n", wl, 8, "layernorm", True): "layernorm", ops.norm("n", wl, 8, "rmsnorm", False): "rmsnorm"}
    assert {op.dims.fn if op.kind != "norm" else op.dims.norm: row_kind(op) for op in cases} == \
        {op.dims.fn if op.kind != "norm" else op.dims.norm: kind for op, kind in cases.items()}


def test_typical_rates_for_work_outside_the_gemm_shapes():
    """Typical rates (sourced fractions of the datasheet): a contraction (a depthwise conv's taps, a
    hyper-connection mix) runs at the GEMM efficiency; attention with more than one query (a 2-token
    speculative step too) at the prefill efficiency, one query reads at the decode bandwidth; a profile
    without an interconnect has no link rate."""
    from archcalc.cost.rates import typical_rates

    r = typical(H100)
    conv = ops.contraction("c", "linear", Workload(batch=8), 4096 * 4, 2 * 4096, tp="split")
    assert r.compute_rate(conv) == r.matmul * r.gemm_efficiency < r.matmul
    two = next(o for o in model_ops(spec_of("llama-3.1-8b"), Workload(batch=1, new_tokens=2, context=100))
               if o.kind == "attention")
    assert r.compute_rate(two) == r.matmul * r.attention_prefill_efficiency < r.matmul
    alone = H100.model_copy(update={"interconnect": None})
    assert typical_rates(alone, "bf16", alone.typical).link_bandwidth is None


def test_split_k_slices_are_whole():
    """cuBLAS splits k into whole slices of at least 256 and no more than fill the 108 SMs: m = 1,
    n = 3 tiles of 128, k = 1,000 (3 slices of 333, not 3.9) → 3 tiles × 3 slices = 9 of 108; with
    n = 5 tiles, 108 // 5 = 21 slices wanted, k = 8,192 allows 32: 5 × 21 = 105 in one wave."""
    r = typical(A100)
    base = r.matmul * r.gemm_efficiency
    assert r.compute_rate(matmul(1, 1000, 3 * 128)) == pytest.approx(base / 16 * 9 / 108)
    assert r.compute_rate(matmul(1, 8192, 5 * 128)) == pytest.approx(base / 16 * 105 / 108)


def test_attention_kinds_follow_the_kernels():
    """measure/kernels.py: a prefill under a window shorter than its keys takes an explicit mask; a
    window as long as the keys is plain causal; a decode step reads the window's keys with no mask."""
    from archcalc.cost.rates import attention_kind

    assert attention_kind(_attention(1, 2, 1024, 2, window=256).dims) == ("prefill", True, True, 64)
    assert attention_kind(_attention(1, 256, 256, 8, window=256).dims) == ("prefill", False, False, 64)
    assert attention_kind(_attention(4, 1, 1024, 2, window=256).dims) == ("decode", True, False, 64)


def test_an_unmeasured_kind_takes_the_same_grouping_before_another_head_dim():
    """A masked GQA prefill where only unmasked ones were measured: the nearest is the unmasked GQA
    curve (same phase and grouping) even at another head dim, not an MHA one at the same head dim."""
    from archcalc.hardware.calibration import AttentionPoint

    def point(rate, kv_heads, head_dim):
        a = _attention(1, 256, 256, kv_heads, head_dim=head_dim)
        return AttentionPoint(heads=8, head_dim=head_dim, batch=1, kv_heads=kv_heads, q_len=256, kv_len=256,
                              seconds=LAUNCH + a.flops / rate)

    r = calibrated_rates(A100, synthetic_calibration(launch=LAUNCH, attention=[point(50e9, 2, 128),
                                                                               point(20e9, 8, 64)]))
    assert r.compute_rate(_attention(1, 256, 1024, 2, head_dim=64, window=128)) == pytest.approx(50e9)


def test_expert_matmuls_are_tiled_expert_by_expert():
    """vLLM's fused MoE kernel sorts the routed rows by expert and pads each expert's rows to whole
    blocks (moe_align_block_size), so every touched expert is a matrix of its own.  Mixtral's w1 (4,096
    → 14,336; 8 experts, top 2) on A100 (108 SMs): a 512-token prefill reaches all 8 experts with 128
    rows each, one 128-row tile × 112 in n apiece, 896 tiles in 9 waves (896 / 972); one decode token
    reaches 2 experts with 1 row each, a 16-row MMA tile (1/16 useful), 224 tiles in 3 waves."""
    r = typical(A100)
    base = r.matmul * r.gemm_efficiency
    prefill = ops.expert_matmul("e", Workload(batch=1, new_tokens=512, context=512), 4096, 14336, 8, 2, bias=False)
    decode = ops.expert_matmul("e", Workload(batch=1), 4096, 14336, 8, 2, bias=False)
    assert r.compute_rate(prefill) == pytest.approx(base * 896 / 972)
    assert r.compute_rate(decode) == pytest.approx(base / 16 * 224 / 324)
    # Llama 4 Scout routes each token to 1 of 16 experts (num_experts_per_tok 1): one decode token
    # touches exactly one expert, one matrix; two tokens 16 · (1 − (15/16)²) = 1.94, so 2
    scout = [ops.expert_matmul("e", Workload(batch=b), 5120, 16384, 16, 1, bias=False) for b in (1, 2)]
    assert [touched_experts(op.dims) for op in scout] == [1, 2]
    assert [replace(r, fused=False).kernels(op) for op in scout] == [1, 2]


def test_a_calibrated_step_counts_attention_as_sdpa_runs_it():
    """Calibrated rates time the kernels torch runs, so a step predicted with them counts attention in
    the sdpa convention: Mistral-7B's 4,096-token window over an 8,192-token prompt is an explicit
    mask to SDPA, which computes the whole 8,192 × 8,192 rectangle (2 · 8,192² · 32 heads · (128 + 128)
    FLOPs a layer); the peak rate set counts the causal pairs the window leaves."""
    spec, wl = spec_of("mistral-7b-v0.1"), Workload(batch=1, new_tokens=8192, context=8192, logits="last")
    cal = calibrated_rates(A100, synthetic_calibration())
    peak = rate_sets(A100, wl)[0]
    assert (cal.convention, peak.convention) == ("sdpa", "causal")
    timed = next(t.op for t in step(spec, wl, cal).ops if t.op.kind == "attention")
    assert timed.flops == 2 * 8192 * 8192 * 32 * 256
    causal_pairs = 4096 * 4097 // 2 + (8192 - 4096) * 4096  # min(p + 1, 4096) keys for query p
    assert next(t.op for t in step(spec, wl, peak).ops if t.op.kind == "attention").flops == \
        2 * causal_pairs * 32 * 256


def test_the_step_critical_batch_is_searched_up_to_65536_sequences():
    """roofline's step critical batch (the whole decode step, attention included) is searched up to
    2^16 sequences; past it the answer is None, where critical_batch's own default reaches 2^20. On an
    H100 with 2.5588× less bandwidth Llama-3.1-8B's step at context 64 first turns compute-bound at
    90,886 sequences (the activations' bytes, which grow with the batch like the FLOPs, keep it
    memory-bound almost to the ridge): None in the prediction."""
    from archcalc.cost.roofline import critical_batch

    spec = spec_of("llama-3.1-8b")
    slow = H100.model_copy(update={"memory_bandwidth": H100.memory_bandwidth / 2.5587711334228516})
    p = predict(spec, slow, prompt=32, context=64, gen=32, batch=1)[0]
    assert critical_batch(spec, 64, p.rates, weights_only=False) == 90_886
    assert p.step_critical_batch is None


@pytest.mark.parametrize("margin, answer", [
    (lambda b: b - 1, 1),  # batch 1 exactly at the ridge: math time = memory time counts as compute-bound
    (lambda b: b - 2, 2),  # batch 2 exactly at it, batch 1 below
    (lambda b: 0 if b >= 64 else -1, 64),  # flat below the ridge, reached exactly at the limit
    (lambda b: -1, None),  # never
])
def test_the_critical_batch_at_an_exact_ridge(monkeypatch, margin, answer):
    """The critical batch is the smallest B whose decode math time is at least its memory time (≥, as
    the scan above counts it), up to the limit: on margins (math − memory, seconds) that hit 0.0 exactly,
    where the search's comparisons decide. The step's ops are replaced by one whose math time is the
    margin."""
    from types import SimpleNamespace

    from archcalc.cost import roofline

    monkeypatch.setattr(roofline, "_decode_ops", lambda spec, context, batch, rates, tp, dtypes: [batch])
    monkeypatch.setattr(roofline, "time_op", lambda b, rates: SimpleNamespace(t_math=float(margin(b)), t_memory=0.0))
    peak = rate_sets(H100, Workload())[0]
    assert roofline._critical_batch(spec_of("debug"), 64, peak, False, 64, 1, {}) == answer
