"""Roofline predictions: hand-checkable rules, the closed-form decode sum
against a step-by-step sum, and the hardware profiles."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner
from conftest import spec_of, synthetic_calibration

from archcalc.cli import cli
from archcalc.cost.roofline import (
    Rates,
    _sum_max_affine,
    critical_batch,
    decode_time,
    predict,
    rate_sets,
    step,
    time_op,
)
from archcalc.hardware.profile import all_hardware, load_hardware
from archcalc.ops import op as ops
from archcalc.ops.workload import Workload

H100 = load_hardware("h100")
PEAK = rate_sets(H100, Workload())[0]


@pytest.mark.parametrize("hw", all_hardware(), ids=lambda hw: hw.name)
def test_every_profile_loads_with_a_source_and_a_ridge(hw):
    assert hw.source.startswith("http") and hw.memory_bytes > 0
    assert hw.ridge("bf16") == hw.peak("bf16") / hw.memory_bandwidth


def test_ridge_points_of_the_references():
    # anchors-analytic.md appendix: H100-SXM 989e12 / 3.35e12 ≈ 295, A100-80GB ≈ 153, A100-40GB ≈ 200.
    assert round(load_hardware("h100").ridge("bf16")) == 295
    assert round(load_hardware("a100-80gb").ridge("bf16")) == 153
    assert 200 <= load_hardware("a100-40gb").ridge("bf16") <= 201


def test_names_resolve_case_insensitively_with_aliases():
    assert load_hardware("H100").name == "H100 SXM" == load_hardware("h100-sxm").name
    with pytest.raises(Exception, match="did you mean 'h100'"):
        load_hardware("h10")


def test_bound_flips_exactly_at_the_ridge():
    rates = Rates("test", matmul=100.0, vector=10.0, bandwidth=10.0)  # ridge 10 FLOP/byte
    below = ops.Op("a", "matmul", "ffn", ops.MatmulDims(1, 1, 1), flops=99, weight_bytes=10)
    above = ops.Op("b", "matmul", "ffn", ops.MatmulDims(1, 1, 1), flops=101, weight_bytes=10)
    assert time_op(below, rates).bound == "memory" and time_op(above, rates).bound == "compute"
    assert time_op(above, rates).time == pytest.approx(1.01)


def test_sum_of_max_of_two_lines_matches_brute_force():
    rng = random.Random(1)
    for _ in range(500):
        f0, df, m0, dm = (rng.uniform(-5, 5) for _ in range(4))
        n = rng.randint(1, 40)
        brute = sum(max(f0 + i * df, m0 + i * dm) for i in range(n))
        assert _sum_max_affine(f0, df, m0, dm, n) == pytest.approx(brute, rel=1e-12, abs=1e-9)


@pytest.mark.parametrize("name, prompt", [("gemma-2-9b", 4000), ("mixtral-8x7b", 100), ("deepseek-v2-lite", 50),
                                          ("gpt2", 10), ("deepseek-v4-flash", 30)])
def test_closed_form_decode_equals_the_step_by_step_sum(name, prompt):
    """Context grows by one each step; gemma-2's 4096 window is crossed mid-way, DeepSeek-V4's of 128 too, and its
    CSA entries (one per 4 tokens) grow 50 times and its HCA entries (one per 128) once."""
    spec, gen, batch = spec_of(name), 200, 3
    brute = sum(step(spec, Workload.decode(c, batch), PEAK).time for c in range(prompt + 1, prompt + gen + 1))
    assert decode_time(spec, prompt, gen, batch, PEAK) == pytest.approx(brute, rel=1e-12)


@pytest.mark.parametrize("batch", [1, 64])
def test_a_long_compressed_decode_takes_chords_close_to_the_steps(batch):
    """Past MAX_ENTRY_CUTS cuts (3,000 tokens over DeepSeek-V4-Flash's 4-token CSA entries: 750 entries, 1,500
    cuts) the closed form takes each piece's chord: within 1e-4 of the step-by-step sum (2e-5 at batch 64)."""
    from archcalc.cost.roofline import MAX_ENTRY_CUTS

    spec, prompt, gen = spec_of("deepseek-v4-flash"), 10_000, 3_000
    assert 2 * gen // spec.attention.compressed.csa_rate > MAX_ENTRY_CUTS
    brute = sum(step(spec, Workload.decode(c, batch), PEAK).time for c in range(prompt + 1, prompt + gen + 1))
    closed = decode_time(spec, prompt, gen, batch, PEAK)
    assert closed == pytest.approx(brute, rel=1e-4) and closed != pytest.approx(brute, rel=1e-12)


def test_decode_is_memory_bound_and_reads_the_weights():
    spec = spec_of("llama-3.1-8b")
    s = step(spec, Workload.decode(4096, 1), PEAK)
    assert all(o.bound == "memory" for o in s.ops if o.op.kind in ("matmul", "attention"))
    # One token: the step reads every weight once in bf16, but only one row of the embedding.
    weights = sum(o.op.count * o.op.weight_bytes for o in s.ops)
    assert weights == 2 * (8_030_261_248 - 128_256 * 4096) + 2 * 4096
    assert s.time == pytest.approx((weights + 4096 * 131_072) / H100.memory_bandwidth, rel=0.01)


def test_critical_batch_is_near_the_ridge_for_bf16_weights():
    """Weight matmul intensity ≈ B (2 FLOPs per 2-byte weight per token), so
    decode turns compute-bound near B = ridge; activation traffic pushes it up a little.
    By hand for Llama-3.1-70B on the H100 (P = 989.4e12, W = 3.35e12, r = P/W = 295.343):
      N = weights of the matmuls = 80 · 855,638,016 + lm_head 1,050,673,152 = 69,501,714,432
      A = their input + output widths = 80 · (18,432 + 16,384 + 65,536 + 36,864)
          + (8192 + 128,256) = 11,113,728 values per token
    compute-bound when 2·B·N / P ≥ (weight bytes + 2·B·A) / W, i.e.
      B ≥ weight bytes / (2N/r − 2A).
      bf16: 2N / (2N/r − 2A) = 309.98 -> 310
      int4 (W4A16, bf16 math; lm_head stays bf16):
        68,451,041,280 · 4.125/8 + 1,050,673,152 · 2 = 37,396,414,464 B -> 83.40 -> 84"""
    assert critical_batch(spec_of("llama-3.1-70b"), 4096, PEAK) == 310
    assert critical_batch(spec_of("llama-3.1-70b"), 4096, PEAK, weight_dtype="int4") == 84
    # searched no further than `limit`: still memory-bound at 309 is None, and the answer itself is found
    assert critical_batch(spec_of("llama-3.1-70b"), 4096, PEAK, limit=309) is None
    assert critical_batch(spec_of("llama-3.1-70b"), 4096, PEAK, limit=310) == 310


def test_norms_are_a_sliver_of_flops_and_a_real_part_of_time():
    """The seeds' point: in prefill, norms, activations and adds are <0.1% of FLOPs but several % of time."""
    s = step(spec_of("llama-3.1-8b"), Workload(batch=8, new_tokens=2048, context=2048, logits="last"), PEAK)
    small = [o for o in s.ops if o.op.kind in ("norm", "elementwise")]
    assert sum(o.flops for o in small) / s.flops < 0.001
    assert sum(o.time for o in small) / s.time > 0.05


def test_calibrated_rates_are_shown_beside_peak_and_typical():
    cal = synthetic_calibration(matmul_rate=700e12, read=2.9e12, launch=3e-6, profile="h100-sxm")
    hw = H100.model_copy(update={"calibration": cal})
    preds = predict(spec_of("gpt2"), hw, prompt=64, context=128, gen=8, batch=1)
    assert [p.rates.label for p in preds] == ["peak", "typical", "calibrated"]
    # GPT-2 decode at batch 1 is memory-bound in every op, so each op's calibrated
    # time is the launch plus its bytes at the calibrated read bandwidth: the peak
    # time per token × 3.35 / 2.9 (the two bandwidths) + 3 µs per kernel launched.
    # Eager GPT-2 launches, per layer: ln_1, q, k and v, attention, o, ln_2, up,
    # GELU, down and two residual adds (12); then the token and position gathers,
    # their add, ln_f and lm_head: 12 × 12 + 5 = 149 kernels.
    assert all(o.bound == "memory" for o in preds[0].decode.ops)
    assert preds[2].tpot == pytest.approx(preds[0].tpot * 3.35 / 2.9 + 149 * 3e-6, rel=1e-9)


def test_roofline_cli_json_and_plot(tmp_path):
    import matplotlib  # noqa: F401  (a dev dependency: missing is an error, never a skip)
    png, svg = tmp_path / "r.png", tmp_path / "r.svg"
    r = CliRunner().invoke(cli, ["roofline", "qwen3-30b-a3b", "--gpu", "h200", "--prompt", "512", "--gen", "16",
                                 "--batch", "4", "--json", "--plot", str(png)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "archcalc.roofline/2" and doc["hardware"] == "H200 SXM"
    p = doc["predictions"][0]
    assert p["decode_tokens_per_s"] == pytest.approx(4 / p["tpot_s"])
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    r = CliRunner().invoke(cli, ["roofline", "gpt2", "--gpu", "l4", "--prompt", "64", "--plot", str(svg)])
    assert r.exit_code == 0 and svg.read_text().lstrip().startswith("<?xml")


def test_hardware_commands_and_bad_names():
    r = CliRunner().invoke(cli, ["hardware", "list", "--json"])
    assert len(json.loads(r.stdout)) >= 14
    r = CliRunner().invoke(cli, ["hardware", "show", "MI300X", "--json"])
    assert json.loads(r.stdout)["memory_bytes"] == 192 * 2**30
    r = CliRunner().invoke(cli, ["roofline", "gpt2", "--gpu", "h1000"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "did you mean" in r.stderr
    r = CliRunner().invoke(cli, ["roofline", "gpt2", "--gpu", "h100", "--plot", "x.pdf"])
    assert r.exit_code == 2 and "--plot writes .png or .svg" in r.stderr
