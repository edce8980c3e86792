"""MoE experts as transformers 5 runs them: one grouped GEMM per expert op (gate and up fused, then
down) through torch's grouped_mm, not one matmul per touched expert.  Pinned to transformers' own
Qwen2-MoE module: the grouped_mm calls its forward makes, and their weights' shapes."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import synthetic_calibration

from archcalc.cost.rates import calibrated_rates
from archcalc.cost.roofline import step_ops
from archcalc.hardware.profile import local_profile
from archcalc.measure.kernels import grouped_mm_works, kernel
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import spec_from_dict
from archcalc.spec.hf import spec_dict_from_config

transformers = pytest.importorskip("transformers")

CONFIG = {"model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
          "shared_expert_intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 4, "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 128,
          "max_position_embeddings": 256}
TOKENS = 16


@pytest.fixture
def grouped_calls(monkeypatch):
    """Every grouped_mm call's weight shape, while the fixture is live."""
    calls, original = [], F.grouped_mm

    def spy(x, w, *args, **kwargs):
        calls.append(tuple(w.shape))
        return original(x, w, *args, **kwargs)

    monkeypatch.setattr(F, "grouped_mm", spy)
    return calls


def _expert_ops(spec):
    return [op for op in step_ops(spec, Workload(batch=1, new_tokens=TOKENS, context=TOKENS), "sdpa")
            if getattr(op.dims, "experts", None)]


def test_grouped_expert_kernels_are_transformers_grouped_mm_calls(grouped_calls):
    cfg = copy.deepcopy(CONFIG)
    model_type = cfg.pop("model_type")
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(model_type, **cfg))
    assert model.config._experts_implementation == "grouped_mm"
    with torch.no_grad():
        model(torch.randint(0, CONFIG["vocab_size"], (1, TOKENS)))
    spec = spec_from_dict(spec_dict_from_config(copy.deepcopy(CONFIG), "qwen2-moe-tiny")[0], "qwen2-moe-tiny")
    cal = synthetic_calibration(grouped_experts=True)
    rates = calibrated_rates(local_profile(cal), cal)
    ours = [(op.dims.experts, op.dims.k, op.dims.n) for op in _expert_ops(spec) for _ in range(op.count)
            for _ in range(rates.kernels(op))]
    assert sorted(ours) == sorted(grouped_calls)  # [experts, k, n]: gate+up fused (k 64, n 2 × 32), down (32, 64)
    unfused = calibrated_rates(local_profile(synthetic_calibration()), synthetic_calibration())
    assert all(unfused.kernels(op) > 1 for op in _expert_ops(spec))  # a matmul per touched expert and part


@pytest.mark.skipif(not grouped_mm_works("cpu", torch.float32), reason="this torch has no grouped_mm on the CPU")
def test_the_expert_kernel_runs_one_grouped_gemm(grouped_calls):
    spec = spec_from_dict(spec_dict_from_config(copy.deepcopy(CONFIG), "qwen2-moe-tiny")[0], "qwen2-moe-tiny")
    for op in _expert_ops(spec):
        k = kernel(op, torch.device("cpu"), torch.float32)
        grouped_calls.clear()
        out = k.run(0)
        touched = grouped_calls[0][0]
        assert grouped_calls == [(touched, op.dims.k, op.dims.n)] and out.shape[1] == op.dims.n


def test_experts_run_at_the_grouped_gemms_measured_rate():
    """Where calibrate timed grouped GEMMs, an expert op is predicted at their rate, not the plain matmul
    surface's (a CPU's grouped_mm runs far from it): 16 tokens to top-2 of 8 experts touch all 8 with 4
    rows each, so each expert op takes exactly the seconds measured for 8 × [4, k] @ [k, n]."""
    from archcalc.cost.roofline import time_op
    from archcalc.hardware.calibration import GroupedPoint

    spec = spec_from_dict(spec_dict_from_config(copy.deepcopy(CONFIG), "qwen2-moe-tiny")[0], "qwen2-moe-tiny")
    measured = {(64, 64): 3e-4, (32, 64): 2e-4}  # gate+up fused (k 64, n 2 × 32), down (k 32, n 64)
    points = [GroupedPoint(groups=8, m=m, k=k, n=n, seconds=s * m / 4) for (k, n), s in measured.items()
              for m in (1, 4, 16)]
    cal = synthetic_calibration(grouped_experts=True, grouped=points)
    rates = calibrated_rates(local_profile(cal), cal)
    plain = calibrated_rates(local_profile(synthetic_calibration(grouped_experts=True)),
                             synthetic_calibration(grouped_experts=True))
    for op in _expert_ops(spec):
        assert time_op(op, rates).t_math == pytest.approx(op.count * measured[op.dims.k, op.dims.n])
        assert time_op(op, plain).t_math == pytest.approx(op.count * op.flops / 1e12)  # the matmul surface
