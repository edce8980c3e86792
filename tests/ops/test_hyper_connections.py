"""Hyper-connections (Zhu et al., arXiv:2409.19606) and mHC (DeepSeek, arXiv:2512.24880) by the
papers' own statements: n residual streams, one module per sublayer (2L of them), mHC's coefficient
projection in fp32 (§4.3) and its Sinkhorn-Knopp projection of t_max = 20 iterations; every HC
weight is a residual-stream weight: whole on every TP rank (Megatron keeps the hidden state whole
between layers) and never quantized."""

from __future__ import annotations

import pytest

from archcalc.cost.totals import weight_bytes
from archcalc.hardware.profile import load_hardware
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.parallel.tensor import act_bytes_per_rank, weight_share
from archcalc.serving.deployment import Deployment
from archcalc.serving.planner import Planner
from archcalc.spec.catalog import load_model
from archcalc.spec.model import ModelSpec

N, D, L = 4, 2048, 16  # Llama-3.2-1B's width and depth with four streams


def with_residual(**residual) -> ModelSpec:
    spec = load_model("llama-3.2-1b")[0]
    return ModelSpec.model_validate({**spec.model_dump(), "residual": residual})


def ops_of(spec, **wl):
    return {op.name: op for op in model_ops(spec, Workload(**wl))}


def test_mhc_coefficients_are_fp32_and_whole():
    """φ: the flattened n·D state to n² + 2n coefficients with a bias, per sublayer (2L = 32), in fp32
    whatever the weights' dtype; RMS of the n·D state (a square and a sum per value); Sinkhorn over
    the n × n mixing matrix: an exp, then 20 rounds of a row and a column normalisation (a sum and a
    divide per entry each)."""
    spec = with_residual(kind="mhc", streams=N, sinkhorn_iters=20)
    ops = ops_of(spec, weight_dtype="int4")
    coeffs = ops["layers.mhc.coeffs"]
    assert (coeffs.count, coeffs.params) == (2 * L, N * D * (N * N + 2 * N) + N * N + 2 * N)
    assert weight_bytes([coeffs], "int4") == 2 * L * coeffs.params * 4  # fp32 at int4
    assert coeffs.weight_bytes == coeffs.params * 4  # and what a step reads of one sublayer's φ
    assert weight_share(coeffs, 8) == 1.0 and act_bytes_per_rank(coeffs, 8) == coeffs.act_bytes
    tokens = 5
    ops = ops_of(spec, new_tokens=tokens, context=tokens)
    assert ops["layers.mhc.rms"].vector_flops == tokens * N * D * 2
    assert ops["layers.mhc.sinkhorn"].vector_flops == tokens * N * N * (1 + 20 * 4)
    assert ops["layers.mhc.sinkhorn"].params == 3  # α_pre, α_post, α_res
    assert {op.component for op in ops.values() if op.name.startswith("layers.mhc.")} == {"residual"}


@pytest.mark.parametrize("dynamic", [True, False])
def test_hyper_connection_weights_stay_16_bit_and_whole_under_tp(dynamic):
    """HC's own weights (static B, A_m, A_r: n + n + n², the dynamic ones' W_β, W_m, W_r and the two
    scales) sit in the residual stream: bf16 at --dtype int4, and whole on each of 2 GPUs."""
    spec = with_residual(kind="hyper", streams=N, dynamic=dynamic)
    ops = ops_of(spec, weight_dtype="int4")
    hc = [op for name, op in ops.items() if name.startswith(("layers.hc.", "hc."))]
    assert all(weight_share(op, 2) == 1.0 for op in hc)
    assert weight_bytes(hc, "int4") == 2 * sum(op.params * op.count for op in hc)  # 2 bytes each
    static = N + N + N * N + (2 if dynamic else 0)
    assert ops["layers.hc.read"].params == static
    if dynamic:  # a per-stream RMSNorm (D), then each stream's D -> n + 2
        assert ops["layers.hc.norm"].params == D and ops["layers.hc.proj"].params == D * (N + 2)
        assert ops["layers.hc.proj"].dims.m == Workload().tokens * N
    plain = Planner(load_model("llama-3.2-1b")[0], load_hardware("h100"), Deployment(gpus=2, weight_dtype="int4"))
    with_hc = Planner(spec, load_hardware("h100"), Deployment(gpus=2, weight_dtype="int4"))
    assert with_hc.weights.replicated - plain.weights.replicated == weight_bytes(hc, "int4")
    # n streams of D: each read is A_mᵀH (n·D MACs per token), each mix A_rᵀH (n²·D)
    assert ops["layers.hc.read"].flops == 2 * N * D and ops["layers.hc.mix"].flops == 2 * N * N * D


@pytest.mark.parametrize("dynamic", [False, True])
def test_hyper_connection_values_moved_and_elementwise_work_by_hand(dynamic):
    """Per token, from the papers' equations over the n × D stream matrix H (bf16, 2 bytes a value):
    h0 = A_mᵀH reads H and writes one stream (n + 1)·D; A_rᵀH reads H and writes n streams (2n·D);
    H' = Bᵀ·F(h0) + A_rᵀH reads two n × D terms, writes one, a multiply and an add per value;
    the embedding is copied into n streams (D read, n·D written, no arithmetic); the final merge
    sums the n streams (n − 1 adds per value, n·D read, D written)."""
    tokens, value = 3, 2
    ops = ops_of(with_residual(kind="hyper", streams=N, dynamic=dynamic), new_tokens=tokens, context=tokens)
    moved = {name: ops[name].act_bytes / (tokens * value * D) for name in
             ("layers.hc.read", "layers.hc.mix", "layers.hc.write", "hc.expand", "hc.merge")}
    assert moved == {"layers.hc.read": N + 1, "layers.hc.mix": 2 * N, "layers.hc.write": 3 * N,
                     "hc.expand": N + 1, "hc.merge": N + 1}
    assert ops["layers.hc.write"].vector_flops == tokens * N * D * 2
    assert ops["hc.expand"].vector_flops == 0 and ops["hc.merge"].vector_flops == tokens * (N - 1) * D
    assert ops["layers.hc.mix"].flops == tokens * 2 * N * N * D  # n² · D multiply-adds
    assert all(ops[name].component == "residual" for name in moved)
    if dynamic:  # an RMSNorm of each stream: n rows of D a token
        assert ops["layers.hc.norm"].dims.m == tokens * N and ops["layers.hc.norm"].params == D  # one weight, every stream


def test_attention_residual_key_norms_move_every_source_they_norm():
    """AttnRes (arXiv:2603.15031), full form (a block per sublayer): a unit RMS-normalises each source it
    attends over with its own weight, so its key norms read and write every source's D values; the
    softmax-weighted sum reads the sources and writes one D.  Llama-3.2-1B's 16 layers: U = 32 units;
    unit i sees i sources (the embedding and every earlier output) and the output aggregation all 33:
    Σ_{i=1..32} i + 33 = 561 sources a token."""
    spec = with_residual(kind="attnres")
    ops = ops_of(spec, new_tokens=1, context=1)
    sources = sum(range(1, 33)) + 33
    assert sources == 561
    assert ops["attnres.key_norm"].act_bytes == 2 * sources * D * 2
    assert ops["attnres.sum"].act_bytes == (sources + 1) * D * 2
    assert ops["attnres.softmax"].act_bytes == 2 * sources * 2
    # the logits: one query · key dot product of D per source (2·D FLOPs each), reading every source
    assert ops["attnres.logits"].flops == 2 * sources * D
    assert ops["attnres.logits"].act_bytes == sources * D * 2  # it reads every source's D values
    # each unit's block sum b_n += f(h): one add per value, reading b_n and f(h) and writing b_n
    block = ops["layers.attnres.block_sum"]
    assert (block.count, block.vector_flops, block.act_bytes) == (32, D, 3 * D * 2)
