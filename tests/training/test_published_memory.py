"""Training memory against published tables: the ZeRO paper's model-state
figures, Megatron-LM's bytes per parameter, and Korthikanti et al.'s
activation formulas.  Where a publication and torch disagree, the test says so."""

from __future__ import annotations

import pytest
from conftest import spec_of

from archcalc.hardware.profile import load_hardware
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec
from archcalc.training.activations import activation_memory, dropout_saved
from archcalc.training.layout import Layout, Recipe
from archcalc.training.memory import memory_plan

MODEL_STATES = ("weights", "master weights", "gradients", "optimizer states")


def bytes_per_param(layout: Layout, **recipe) -> float:
    """Model-state bytes per parameter of one rank (a dense model, tp = pp = 1)."""
    spec = spec_of("llama-2-7b")
    plan = memory_plan(spec, load_hardware("h100"), layout, Recipe(seq=4096, global_batch=layout.dp, **recipe))
    stage = plan.worst
    return sum(stage.terms[t] for t in MODEL_STATES) / stage.params


@pytest.mark.parametrize("zero, gb", [(0, 120), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_model_states(zero, gb):
    """Rajbhandari et al. 2020 (ZeRO), Figure 1: a 7.5B-parameter model, Adam (K = 12: fp32 weights,
    momentum, variance), fp16 weights and gradients, N_d = 64: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB."""
    per_param = bytes_per_param(Layout(dp=64, zero=zero), grad_dtype="bf16")
    assert round(per_param * 7.5e9 / 1e9, 1) == gb


@pytest.mark.parametrize("precision, grad, dp, expected", [
    ("bf16-mixed", "fp32", 1, 18), ("bf16-mixed", "fp32", 8, 6 + 12 / 8), ("bf16-mixed", "fp32", 64, 6 + 12 / 64),
    ("fp32", "fp32", 1, 16), ("fp32", "fp32", 8, 8 + 8 / 8),
])
def test_megatron_distributed_optimizer_table(precision, grad, dp, expected):
    """Megatron-LM docs (distrib_optimizer.md): bytes per parameter, d data-parallel ranks:
    bf16 params + fp32 grads 18 (distributed: 6 + 12/d); fp32 params + grads 16 (8 + 8/d)."""
    zero = 1 if dp > 1 else 0
    assert bytes_per_param(Layout(dp=dp, zero=zero), precision=precision, grad_dtype=grad) == pytest.approx(expected)


def test_megatron_fp16_row_keeps_an_fp32_main_gradient_copy():
    """Megatron's fp16-params row reads 20 (4 + 16/d): beside the fp16 gradients it keeps fp32 main
    gradients (4 bytes) that the ZeRO paper's 16 does not count.  archcalc counts what torch's
    autograd allocates (gradients in one dtype), so it reproduces the ZeRO paper and is 4 bytes under."""
    assert bytes_per_param(Layout(), grad_dtype="bf16") == 20 - 4
    assert bytes_per_param(Layout(dp=8, zero=1), grad_dtype="bf16") == pytest.approx(4 + 16 / 8 - 4 / 8)


# GPT-3 175B as Korthikanti et al. 2022 use it: s = 2048, h = 12288, a = 96 heads, t = 8, fp16.
S, H, A, T = 2048, 12288, 96, 8
GPT3 = ModelSpec.model_validate({
    "name": "gpt3-175b", "d_model": H, "n_layers": 96, "vocab_size": 51200, "max_context": S,
    "attention": {"n_heads": A}, "ffn": {"activation": "gelu", "d_ff": 4 * H},
    "norm": {"kind": "layernorm", "bias": True}, "position": {"kind": "learned"}})
STATS = 16 * S  # torch's LayerNorm also keeps mean and rstd (fp32) for each of 2 norms: 16 bytes per token


def per_layer(recompute: str = "none", tp: int = 1, sp: bool = True) -> float:
    wl = Workload.forward(S, 1, weight_dtype="fp16", act_dtype="fp16")
    act = activation_memory(GPT3, model_ops(GPT3, wl), S, "fp16", kernel="eager", recompute=recompute, dropout=True,
                            tp=tp, sequence_parallel=sp)
    # The embedding's dropout mask is not a layer's (full recompute keeps no masks at all).
    embedding_mask = dropout_saved(GPT3, S) / (1 + 2 * GPT3.n_layers) / (tp if sp else 1) if act.dropout else 0
    return (act.layers + act.dropout - embedding_mask) / GPT3.n_layers


@pytest.mark.parametrize("case, ours, paper", [
    ("no parallelism", lambda: per_layer(), S * H * (34 + 5 * A * S / H) + STATS),
    ("tensor parallel", lambda: per_layer(tp=T, sp=False), S * H * (10 + 24 / T + 5 * A * S / (H * T)) + STATS),
    ("tensor + sequence parallel", lambda: per_layer(tp=T), S * H * (34 / T + 5 * A * S / (H * T)) + STATS / T),
    ("tensor parallel + selective", lambda: per_layer("selective", T, False), S * H * (10 + 24 / T) + STATS),
    ("tensor + sequence + selective", lambda: per_layer("selective", T), S * H * 34 / T + STATS / T),
    ("full recompute", lambda: per_layer("full"), 2 * S * H),
])
def test_korthikanti_activation_formulas(case, ours, paper):
    """Korthikanti et al. 2022, Table 2 (b = 1): activation bytes per layer for each parallelism and
    recomputation, plus the LayerNorm statistics the paper leaves out (STATS)."""
    assert ours() == pytest.approx(paper, rel=1e-12), case
