"""Memory per rank by hand (training/memory.py): which parameters each pipeline stage holds, expert
parallelism, fp8 weight copies, FSDP's buffers, and the model FLOPs MFU divides by."""

from __future__ import annotations

import pytest

from archcalc import api
from archcalc.errors import InputError

V, D = 128_256, 4096
LLAMA_8B = 8_030_261_248
EMBEDDING = V * D  # 525,336,576: the token table, and as much again in the untied lm_head
NORMS = 2 * 32 * D + D  # two RMSNorm weights per layer and the final norm
LAYERS_8B = LLAMA_8B - 2 * EMBEDDING - D  # everything in the 32 layers


def stages(name, **options):
    return api.train(name, "h100", seq=4096, **options).result.memory.stages


def test_pipeline_stages_hold_their_half_of_the_layers_and_their_end_of_the_model():
    first, last = stages("llama-3.1-8b", gpus=2, pp=2, zero=0)
    assert first.params == EMBEDDING + LAYERS_8B / 2
    assert last.params == LAYERS_8B / 2 + D + EMBEDDING  # final norm and the untied lm_head


def test_the_last_stage_keeps_its_own_copy_of_tied_embeddings():
    """Llama 3.2 1B ties its lm_head to the embedding: one stage has both ends, two stages each keep the
    table (Megatron-LM keeps a copy on the last stage and all-reduces its gradient)."""
    total, table, d = 1_235_814_400, 128_256 * 2048, 2048
    layers = total - table - d
    (whole,) = stages("llama-3.2-1b", gpus=1, zero=0)
    assert whole.params == total
    first, last = stages("llama-3.2-1b", gpus=2, pp=2, zero=0)
    assert (first.params, last.params) == (table + layers / 2, layers / 2 + d + table)


def test_expert_parallel_splits_the_experts_and_zero_shards_them_over_their_own_replicas():
    """Mixtral 8x7B: 32 layers × 8 experts × (gate, up, down) of 4096 × 14336; ep 4 of dp 8 keeps 2 of 8
    experts per rank, and their master weights split over the 8 / 4 = 2 ranks holding the same experts."""
    experts = 32 * 8 * 3 * 4096 * 14336
    dense = 46_702_792_704 - experts
    (stage,) = stages("mixtral-8x7b", gpus=8, ep=4, zero=1)
    assert stage.params == dense + experts / 4
    assert stage.terms["master weights"] == pytest.approx(4 * (dense / 8 + experts / 4 / 2))


def test_fp8_keeps_one_byte_per_matmul_weight():
    (stage,) = stages("llama-3.1-8b", gpus=8, zero=1, precision="fp8")
    assert stage.terms["fp8 weight copies"] == LLAMA_8B - EMBEDDING - NORMS  # every matmul, lm_head included


def test_fsdp_gathers_two_layers_and_reduces_one():
    """ZeRO 3: the running and the prefetched layer in bf16, one layer's gradients in fp32."""
    (stage,) = stages("llama-3.1-8b", gpus=8, zero=3)
    layer = (LAYERS_8B) / 32
    assert stage.terms["communication buffers"] == pytest.approx(2 * 2 * layer + 4 * layer)


def test_context_parallel_ranks_keep_their_share_of_the_sequence():
    one = stages("llama-3.1-8b", gpus=8, zero=1, micro_batch=1)[0].activations
    four = stages("llama-3.1-8b", gpus=8, cp=4, dp=2, zero=1, micro_batch=1)[0].activations
    assert four.layers == pytest.approx(one.layers / 4) and four.loss == pytest.approx(one.loss / 4)


def test_mfu_divides_the_model_flops_of_whole_sequences():
    """3 × the forward FLOPs of each 4,096-token sequence (size's count), whatever cp splits."""
    per_sequence = api.size("llama-3.1-8b", context=4096).flops.forward
    for options in ({"gpus": 8}, {"gpus": 8, "cp": 2, "dp": 4}):
        r = api.train("llama-3.1-8b", "h100", seq=4096, zero=1, **options).result
        s = r.steps[0]
        assert s.model_flops == 3 * per_sequence * r.recipe.global_batch
        assert s.mfu == pytest.approx(s.model_flops / (s.time * s.gpus * 989.4e12), rel=1e-12)


def test_a_token_budget_replaces_chinchilla():
    r = api.train("llama-3.1-8b", "h100", gpus=8, zero=1, seq=4096, tokens=1e12).result
    assert r.runs[0].tokens == 1e12 and r.runs[0].steps == -(-10**12 // (4096 * 1024))


@pytest.mark.parametrize("name, options, line", [
    ("llama-3.1-8b", {"gpus": 4, "dp": 2, "tp": 2, "micro_batch": 2, "global_batch_tokens": 4096 * 6},
     "--global-batch: 6 sequences are not a whole number of micro-batches of 2 × dp 2 = 4"),
    ("mixtral-8x7b", {"gpus": 3, "dp": 3, "ep": 2},
     "--ep: 2 does not divide the data-parallel size 3 (expert-parallel groups are carved out of the "
     "data-parallel ranks)"),
    ("llama-3.1-8b", {"gpus": 1, "zero": 3},
     "--zero: stage 3 (FSDP) shards the weights over data-parallel ranks, and there is only one; use --dp 2 "
     "or more, or --zero 0"),
])
def test_layout_errors_in_full(name, options, line):
    with pytest.raises(InputError) as e:
        api.train(name, "h100", seq=4096, **options)
    assert str(e.value) == line


def test_every_term_of_a_stage_by_its_rule():
    """Llama 3.1 8B, tp 2 × dp 2, ZeRO 1: the terms, named as the JSON names them, each by its rule."""
    from archcalc.ops.layers import model_ops
    from archcalc.training.activations import activation_memory
    from archcalc.training.layout import DDP_BUCKET_BYTES, TRAIN_RESERVE_BYTES
    from archcalc.training.memory import training_workload

    plan = api.train("llama-3.1-8b", "h100", seq=4096, gpus=4, tp=2, zero=1, micro_batch=1)
    r = plan.result
    (stage,) = r.memory.stages
    assert list(stage.terms) == ["weights", "master weights", "gradients", "optimizer states", "activations",
                                 "logits and loss", "communication buffers", "runtime reserve"]
    wl = training_workload(r.layout, r.recipe)
    act = activation_memory(r.spec, model_ops(r.spec, wl), 4096, "bf16", tp=2)
    assert stage.activations == act
    assert stage.terms["activations"] == act.layers  # one stage, one micro-batch in flight, no dropout
    assert stage.terms["logits and loss"] == act.head + act.loss + 4096 * V * 4 / 2  # + the fp32 logit gradient
    assert stage.terms["communication buffers"] == 2 * DDP_BUCKET_BYTES
    assert stage.terms["runtime reserve"] == TRAIN_RESERVE_BYTES
    no_sp = api.train("llama-3.1-8b", "h100", seq=4096, gpus=4, tp=2, zero=1, micro_batch=1,
                      sequence_parallel=False).result.memory.stages[0]
    assert no_sp.terms["activations"] > stage.terms["activations"]  # norms and column inputs stay whole
    alone = api.train("llama-3.1-8b", "h100", seq=4096, gpus=1, zero=0).result.memory.stages[0]
    assert "communication buffers" not in alone.terms  # one rank: nothing to reduce


def test_the_spec_training_section_brings_dropout_and_z_loss():
    from conftest import debug_spec

    from archcalc.training.activations import dropout_saved, loss_saved

    spec = debug_spec(training={"dropout": 0.1, "z_loss": 1e-4})
    (stage,) = api.train(spec, "h100", seq=128, gpus=1, zero=0, micro_batch=2,
                         global_batch_tokens=256).result.memory.stages
    assert stage.activations.dropout == dropout_saved(spec, 256)
    assert stage.activations.loss == loss_saved(spec, 256, z_loss=True)


def test_gradient_reductions_carry_the_rank_s_dense_and_expert_parameters():
    """Mixtral 8x7B on 16 GPUs, pp 2 × dp 8, ep 4, ZeRO 1, on the last stage (the one memory plans):
    the dense gradients (half the layers' dense weights, the final norm and lm_head) reduce-scatter over
    the 8 dp ranks in fp32; the expert gradients (8 experts / ep 4 of half the layers) over the 8 / 4 = 2 ranks
    that hold the same experts; the updated bf16 weights all-gather the same way."""
    experts = 32 * 8 * 3 * 4096 * 14336
    head = 32000 * 4096 + 4096  # lm_head and the final norm; the embedding is the first stage's
    dense_layers = 46_702_792_704 - experts - head - 32000 * 4096
    r = api.train("mixtral-8x7b", "h100", seq=4096, gpus=16, pp=2, ep=4, zero=1).result
    comms = {c.comm.op.name: c.comm.op for c in r.steps[0].comms if c.comm.group == "dp"}
    dense, expert = dense_layers / 2 + head, experts / 4 / 2
    assert (comms["dp.grads.reduce_scatter"].dims.width, comms["dp.grads.reduce_scatter"].dims.ranks) == (dense, 8)
    assert (comms["expert.grads.reduce_scatter"].dims.width, comms["expert.grads.reduce_scatter"].dims.ranks) == \
        (expert, 2)
    assert comms["dp.grads.reduce_scatter"].comm_bytes == pytest.approx(7 / 8 * 4 * dense)  # fp32, ring RS
    assert comms["expert.weights.all_gather"].comm_bytes == pytest.approx(1 / 2 * 2 * expert)  # bf16, ring AG
