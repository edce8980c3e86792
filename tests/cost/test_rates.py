"""The time model's rate sets (cost/rates.py): hand-derived numbers from the
sources the model follows, and the one property every rate set must keep:
peak is a strict lower bound on time."""

from __future__ import annotations

import pytest
from conftest import debug_spec, spec_of, synthetic_calibration

from archcalc.cost.rates import Curve, Rates, calibrated_rates, rate_sets
from archcalc.cost.roofline import predict, ring_steps, step, time_op
from archcalc.hardware.profile import all_hardware, load_hardware
from archcalc.ops import op as ops
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


def test_ring_latency_steps():
    """A ring all-reduce passes partial sums 2(N − 1) times, an all-gather N − 1
    (NVIDIA's TensorRT-LLM MultiShot post; nccl-tests' PERFORMANCE.md): a latency
    measured over 8 GPUs is 14 steps, so TP 2 pays 2/14 of it."""
    wl = Workload()
    ar2 = ops.collective("ar", "attention", wl, 4096, 2, "all_reduce")
    ag4 = ops.collective("ag", "lm_head", wl, 4096, 4, "all_gather")
    assert (ring_steps(ar2), ring_steps(ag4)) == (2, 3)
    r = typical(H100)
    assert time_op(ar2, r).t_fixed == pytest.approx(r.link_latency * 2 / 14)
    assert time_op(ag4, r).t_fixed == pytest.approx(r.link_latency * 3 / 7)


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
