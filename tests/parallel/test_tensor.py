"""Tensor parallelism (parallel/tensor.py) pinned to Megatron-LM's layout as
vLLM implements it, worked by hand on real models' config.json dims.

Megatron-LM (Shoeybi et al. 2019, §3; megatron/core/tensor_parallel/layers.py),
per rank of t:
- ColumnParallelLinear (QKV, gate/up, lm_head): Y_i = X · A_i.  The input X
  [m, k] is whole on every rank; the output is [m, n/t].
- RowParallelLinear (attention o, down): Y = Σ_i X_i · B_i.  The input X_i is
  [m, k/t]; each rank writes a whole [m, n] partial sum, then all-reduces.
- VocabParallelEmbedding: rows split, every rank ends with the whole [m, D]
  output after the all-reduce.
- Attention heads and the elementwise ops between a column and a row linear
  (RoPE, the activation) act on 1/t of the values; norms and residual adds on
  the whole hidden state on every rank.
vLLM's QKVParallelLinear (vllm/model_executor/layers/linear.py): a rank holds
H/t query heads and max(1, K/t) KV heads, K/V replicated t/K times when t > K.

Every expected value is rows × (input width + output width) × bytes of one op
on one rank, or a sum of parameters, written out from those rules.
"""

from __future__ import annotations

import pytest

from archcalc.hardware.profile import HardwareProfile
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.parallel.tensor import act_bytes_per_rank, kv_share, weight_share
from archcalc.serving.deployment import Deployment
from archcalc.serving.planner import Planner
from archcalc.spec.catalog import load_model
from archcalc.spec.model import ModelSpec

H100 = HardwareProfile(name="H100 SXM", vendor="nvidia", kind="gpu", memory_bytes=80 * 2**30,
                       memory_bandwidth=3.35e12, peak_flops={"fp32": 66.9e12, "bf16": 989.4e12},
                       source="https://www.nvidia.com/en-us/data-center/h100/")

LLAMA_31_8B = ModelSpec.model_validate({  # meta-llama/Llama-3.1-8B config.json
    "name": "llama-3.1-8b", "d_model": 4096, "n_layers": 32, "vocab_size": 128256, "max_context": 131072,
    "attention": {"n_heads": 32, "n_kv_heads": 8}, "ffn": {"d_ff": 14336}})
LLAMA_31_70B = ModelSpec.model_validate({  # meta-llama/Llama-3.1-70B config.json
    "name": "llama-3.1-70b", "d_model": 8192, "n_layers": 80, "vocab_size": 128256, "max_context": 131072,
    "attention": {"n_heads": 64, "n_kv_heads": 8}, "ffn": {"d_ff": 28672}})
QWEN3_30B_A3B = ModelSpec.model_validate({  # Qwen/Qwen3-30B-A3B config.json
    "name": "qwen3-30b-a3b", "d_model": 2048, "n_layers": 48, "vocab_size": 151936, "max_context": 40960,
    "attention": {"n_heads": 32, "n_kv_heads": 4, "head_dim": 128, "qk_norm": "head"},
    "ffn": {"d_ff": 6144, "moe": {"n_experts": 128, "top_k": 8, "d_expert": 768}}})
GEMMA_3_27B = ModelSpec.model_validate({  # google/gemma-3-27b-it config.json (text part)
    "name": "gemma-3-27b", "d_model": 5376, "n_layers": 62, "vocab_size": 262208, "max_context": 131072,
    "tie_embeddings": True, "attention": {"n_heads": 32, "n_kv_heads": 16, "head_dim": 128, "qk_norm": "head",
                                          "sliding_window": 1024, "layer_types": "5:1"},
    "ffn": {"activation": "geglu", "d_ff": 21504}, "norm": {"placement": "both"}})

# vLLM's profile run: one step of max_num_batched_tokens = 8192 tokens, bf16.
CHUNK = Workload(batch=1, new_tokens=8192, context=8192, logits="last")


def op_named(spec: ModelSpec, name: str, wl: Workload = CHUNK):
    (op,) = [o for o in model_ops(spec, wl) if o.name == name]
    return op


# ---- weights: K/V projections replicated when t > K ------------------------------------------------


def test_llama_70b_qkv_share_replicates_kv_heads_past_tp_8():
    # Whole fused QKV: 8192 · (64 + 2·8) · 128 = 83,886,080 weights.
    # TP 8: 8 query + 2·1 KV heads per rank = 8192 · 10 · 128 = 10,485,760 (exactly 1/8).
    # TP 16: 4 query heads, and still 1 K and 1 V head (8 // 16 = 0 -> max 1):
    #        8192 · (4 + 2) · 128 = 6,291,456 weights, not 83,886,080 / 16 = 5,242,880.
    qkv = op_named(LLAMA_31_70B, "layers.attn.qkv", Workload())
    assert qkv.params == 83_886_080
    assert weight_share(qkv, 8) * qkv.params == 10_485_760
    assert weight_share(qkv, 16) * qkv.params == pytest.approx(6_291_456, rel=1e-15)
    attn = op_named(LLAMA_31_70B, "layers.attn.core", Workload())
    assert kv_share(attn, 16) == 1 / 8  # one of the 8 KV heads' cache on each rank


def test_qwen3_30b_a3b_qkv_share_at_tp_8():
    # K = 4 < 8: 32/8 = 4 query heads + 1 K + 1 V head of 128 per rank:
    # 2048 · 6 · 128 = 1,572,864 of 2048 · 40 · 128 = 10,485,760 weights (0.15, not 0.125).
    qkv = op_named(QWEN3_30B_A3B, "layers.attn.qkv", Workload())
    assert weight_share(qkv, 8) * qkv.params == pytest.approx(1_572_864, rel=1e-15)
    # Its activations in vLLM's 8192-token profile step, one rank: the whole
    # input [8192, 2048] and that rank's (4 + 1 + 1) · 128 = 768 output columns
    # (not 5120 / 8 = 640): 8192 · (2048 + 768) · 2 B = 46,137,344 B.
    assert act_bytes_per_rank(op_named(QWEN3_30B_A3B, "layers.attn.qkv"), 8) == 46_137_344


def test_llama_70b_weights_per_rank_at_tp_16():
    """vLLM, bf16, TP 16, bytes one GPU holds:
      vocab-parallel embedding and lm_head: 128,256 / 16 = 8016 rows · 8192 = 65,667,072 each
      per layer: qkv 6,291,456 (above); o (64/16)·128 = 512 inputs · 8192 = 4,194,304;
                 gate/up + down 3 · 8192 · 28,672 / 16 = 44,040,192  -> 54,525,952 · 80 = 4,362,076,160
      split: (2 · 65,667,072 + 4,362,076,160) · 2 B = 8,986,820,608 B
      replicated RMSNorm weights: (2 · 80 + 1) · 8192 · 2 B = 2,637,824 B."""
    w = Planner(LLAMA_31_70B, H100, Deployment(engine="vllm", gpus=16)).weights
    assert w.split == 8_986_820_608
    assert w.replicated == 2_637_824


# ---- activations per rank, one op at a time -----------------------------------------------------------


def test_llama_8b_activation_bytes_per_rank_follow_megatron():
    """m = 8192 tokens, bf16 (2 B); D = 4096, H = 32, K = 8, d = 128, F = 14,336."""
    m2 = 8192 * 2
    expected = {
        # rank-independent: whole hidden state on every rank
        "embedding": {t: m2 * 4096 for t in (2, 4, 8)},  # vocab-parallel output all-reduced: 67,108,864
        "layers.attn.norm": {t: m2 * 2 * 4096 for t in (2, 4, 8)},  # in + out: 134,217,728
        "layers.residual.add": {t: m2 * 3 * 4096 for t in (2, 4, 8)},  # x, F(x) in, sum out: 201,326,592
        # column-parallel: input whole, output / t
        "layers.attn.qkv": {2: m2 * (4096 + (16 + 2 * 4) * 128),  # 117,440,512
                            4: m2 * (4096 + (8 + 2 * 2) * 128),  # 92,274,688
                            8: m2 * (4096 + (4 + 2 * 1) * 128)},  # 79,691,776
        # 301,989,888 / 184,549,376 / 125,829,120
        "layers.ffn.up": {t: m2 * (4096 + 2 * 14336 // t) for t in (2, 4, 8)},
        # row-parallel: input / t, output whole
        "layers.attn.o": {t: m2 * (4096 // t + 4096) for t in (2, 4, 8)},  # 100,663,296 / 83,886,080 / 75,497,472
        "layers.ffn.down": {t: m2 * (14336 // t + 4096) for t in (2, 4, 8)},  # 184,549,376 / 125,829,120 / 96,468,992
        # between them, everything / t
        "layers.attn.rope": {t: m2 * 2 * (32 + 8) * 128 // t for t in (2, 4, 8)},  # Q and K heads, in + out
        "layers.attn.core": {t: m2 * 32 // t * (128 + 128) for t in (2, 4, 8)},  # read Q, write O of H/t heads
        "layers.ffn.act": {t: m2 * 3 * 14336 // t for t in (2, 4, 8)},  # gate, up in; product out
    }
    for name, by_tp in expected.items():
        op = op_named(LLAMA_31_8B, name)
        for t, want in by_tp.items():
            assert act_bytes_per_rank(op, t) == want, (name, t)


def test_row_parallel_output_stays_whole_when_it_is_the_wider_side():
    """Gemma-3-27B's o projection reads H·d = 32·128 = 4096 values and writes
    D = 5376: row-parallel, so a rank of TP 2 reads 2048 and writes all 5376:
    8192 · (2048 + 5376) · 2 B = 121,634,816 B (not 8192 · (4096 + 2688) · 2 B)."""
    o = op_named(GEMMA_3_27B, "layers.attn.o")
    assert act_bytes_per_rank(o, 2) == 8192 * (2048 + 5376) * 2 == 121_634_816


def test_moe_expert_projections_split_like_the_dense_ones():
    """Qwen3-30B-A3B under TP (vLLM FusedMoE shards each expert's F = 768):
    8192 tokens · top-8 = 65,536 routed rows.
      up (gate and up, column): input D = 2048 whole, output 2·768 / t
      down (row):                input 768 / t,         output D = 2048 whole"""
    up = op_named(QWEN3_30B_A3B, "layers.moe.experts.up")
    down = op_named(QWEN3_30B_A3B, "layers.moe.experts.down")
    rows2 = 65_536 * 2
    assert act_bytes_per_rank(up, 2) == rows2 * (2048 + 768) == 369_098_752
    assert act_bytes_per_rank(down, 2) == rows2 * (384 + 2048) == 318_767_104
    assert act_bytes_per_rank(up, 8) == rows2 * (2048 + 192) == 293_601_280
    assert act_bytes_per_rank(down, 8) == rows2 * (96 + 2048) == 281_018_368


# ---- the activation peak of a plan: residual + the largest op on one rank + fp32 logits ----------------

# Llama-3.1-8B under vLLM: residual [8192, 4096] bf16 = 67,108,864 B; logits for
# max_num_seqs = 256 rows × V = 128,256 × 4 B = 131,334,144 B.
LLAMA_RESIDUAL, LLAMA_LOGITS = 8192 * 4096 * 2, 256 * 128256 * 4


@pytest.mark.parametrize("tp, largest, largest_bytes", [
    (1, "layers.ffn.act", 3 * 8192 * 14336 * 2),  # 704,643,072 (up: 536,870,912)
    (2, "layers.ffn.act", 3 * 8192 * 14336 * 2 // 2),  # 352,321,536 (up: 301,989,888)
    (4, "layers.residual.add", 3 * 8192 * 4096 * 2),  # 201,326,592 > up 184,549,376 > act 176,160,768
    (8, "layers.residual.add", 3 * 8192 * 4096 * 2),  # 201,326,592 > attn.norm 134,217,728 > up 125,829,120
])
def test_llama_8b_vllm_activation_peak_under_tp(tp, largest, largest_bytes):
    act = Planner(LLAMA_31_8B, H100, Deployment(engine="vllm", gpus=tp)).plan(8192).activations
    assert (act.largest_op, act.largest_op_bytes) == (largest, largest_bytes)
    assert (act.residual, act.logits) == (LLAMA_RESIDUAL, LLAMA_LOGITS)
    assert act.bytes == LLAMA_RESIDUAL + largest_bytes + LLAMA_LOGITS
    # 903,086,080 / 550,764,544 / 399,769,600 / 399,769,600 B


# Qwen3-30B-A3B under vLLM: residual 8192 · 2048 · 2 = 33,554,432 B; logits
# 256 · 151,936 · 4 = 155,570,176 B.  The largest op moves with t: the expert
# up projection (above) until the MoE combine, replicated, (8 + 1) · 8192 · 2048
# · 2 = 301,989,888 B, overtakes it.
@pytest.mark.parametrize("tp, largest, largest_bytes", [
    (2, "layers.moe.experts.up", 65_536 * 2 * (2048 + 768)),  # 369,098,752
    (4, "layers.moe.experts.up", 65_536 * 2 * (2048 + 384)),  # 318,767,104 > combine 301,989,888
    (8, "layers.moe.combine", 9 * 8192 * 2048 * 2),  # 301,989,888 > up 293,601,280
])
def test_qwen3_moe_vllm_activation_peak_under_tp(tp, largest, largest_bytes):
    act = Planner(QWEN3_30B_A3B, H100, Deployment(engine="vllm", gpus=tp)).plan(8192).activations
    assert (act.largest_op, act.largest_op_bytes) == (largest, largest_bytes)
    assert act.bytes == 8192 * 2048 * 2 + largest_bytes + 256 * 151936 * 4


def test_llamacpp_splits_layers_not_tensors():
    """llama.cpp -sm layer: each GPU runs whole layers on the reserved worst-case
    graph of n_ubatch = 512 tokens in f32, logits for all 512:
      residual 512 · 4096 · 4 = 8,388,608; largest: the SwiGLU product,
      3 · 512 · 14,336 · 4 = 88,080,384; logits 512 · 128,256 · 4 = 262,668,288
      -> 359,137,280 B on every GPU, whatever the GPU count."""
    for gpus in (1, 2, 4):
        act = Planner(LLAMA_31_8B, H100, Deployment(engine="llamacpp", gpus=gpus)).plan(8192).activations
        assert (act.largest_op, act.bytes) == ("layers.ffn.act", 359_137_280)


def test_tp_must_split_kv_heads_as_vllm_does():
    # vLLM's QKVParallelLinear: divide(total_num_kv_heads, tp) when tp < K, divide(tp, K) otherwise.
    # Nemotron-4B has 24 query and 8 KV heads: TP 3 divides the queries but would leave 8/3 KV heads a rank.
    from archcalc.errors import InputError
    from archcalc.serving.deployment import Deployment
    from archcalc.serving.planner import check_deployment, tp_shards_heads
    from archcalc.spec.catalog import load_model

    spec = load_model("nemotron-4b")[0]
    assert [t for t in range(1, 25) if tp_shards_heads(spec, t)] == [1, 2, 4, 8, 24]
    with pytest.raises(InputError, match="valid: 1, 2, 4, 8, 24"):
        check_deployment(spec, Deployment(gpus=3))


# ---- the op one rank runs: rank_dims and rank_op --------------------------------------------------
# The shapes vLLM's layers allocate on one rank (output_size_per_partition / input_size_per_partition of
# QKVParallelLinear, MergedColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding; the heads
# Attention sees), written out for Llama-3.1-8B at TP 4 and Llama-3.1-70B at TP 16 (KV replicated).


def _rank_ops(name, tp, wl=None):
    from archcalc.parallel.tensor import rank_op

    spec = load_model(name)[0]
    return {op.name: (op, rank_op(op, tp)) for op in model_ops(spec, wl or Workload.decode(1000, 1))}


def test_llama_8b_shapes_on_one_of_4_ranks():
    ops = _rank_ops("llama-3.1-8b", 4)
    qkv = ops["layers.attn.qkv"][1].dims  # 32/4 = 8 query heads and 8/4 = 2 KV heads of 128
    assert (qkv.m, qkv.k, qkv.n, qkv.q_width, qkv.kv_width, qkv.n_kv_heads, qkv.parts) == (
        1, 4096, 1536, 1024, 512, 2, (1024, 256, 256))
    core = ops["layers.attn.core"][1].dims
    assert (core.n_heads, core.n_kv_heads, core.kv_width, core.qk_dim, core.context) == (8, 2, 512, 128, 1000)
    assert ops["layers.attn.o"][1].dims.k == 1024 and ops["layers.attn.o"][1].dims.n == 4096
    up = ops["layers.ffn.up"][1].dims
    assert (up.k, up.n, up.parts) == (4096, 7168, (3584, 3584))  # gate and up, 14,336/4 each
    assert (ops["layers.ffn.down"][1].dims.k, ops["layers.ffn.down"][1].dims.n) == (3584, 4096)
    assert ops["layers.ffn.act"][1].dims.width == 3584 and ops["layers.attn.rope"][1].dims.width == 1280
    assert ops["embedding"][1].dims.rows == 32064 and ops["lm_head"][1].dims.n == 32064  # 128,256 / 4
    assert ops["layers.attn.norm"][1] is ops["layers.attn.norm"][0]  # replicated: the op itself


def test_llama_70b_on_one_of_16_ranks_keeps_one_kv_head():
    ops = _rank_ops("llama-3.1-70b", 16)
    whole, rank = ops["layers.attn.qkv"]
    d = rank.dims  # 64/16 = 4 query heads; 8 KV heads over 16 ranks: each holds 1 (replicated twice)
    assert (d.n, d.q_width, d.kv_width, d.n_kv_heads, d.parts) == (768, 512, 256, 1, (512, 128, 128))
    assert rank.params == 8192 * 768 == whole.params * 768 // 10240  # 6,291,456 of 83,886,080
    assert rank.active_params == rank.params and rank.flops == 2 * 1 * 8192 * 768
    assert rank.weight_bytes == 8192 * 768 * 2  # bf16
    assert rank.act_bytes == (8192 + 768) * 2  # reads its whole input row, writes its 768 outputs
    assert (rank.name, rank.count, rank.comm_bytes) == (whole.name, whole.count, whole.comm_bytes)
    core_whole, core = ops["layers.attn.core"]
    assert (core.dims.n_heads, core.dims.n_kv_heads, core.dims.kv_width) == (4, 1, 256)
    assert core.kv_bytes == core_whole.kv_bytes / 8  # one of 8 KV heads' cache
    assert core.flops == core_whole.flops / 16 and core.vector_flops == core_whole.vector_flops / 16
    o_whole, o = ops["layers.attn.o"]
    assert o.dims.k == 512 and o.params == 512 * 8192 and o.act_bytes == (512 + 8192) * 2
    assert o.flops == o_whole.flops / 16 and o.bias_params == 0


def test_qwen_biases_split_with_their_outputs():
    """Qwen2.5-7B has q, k, v biases: a rank of TP 2 holds its heads' biases (14 of 28 query heads,
    2 of 4 KV heads: 1,792 + 2·256 = 2,304 of 4,608)."""
    whole, rank = _rank_ops("qwen2.5-7b", 2)["layers.attn.qkv"]
    assert whole.bias_params == 3584 + 2 * 512 and rank.bias_params == 2304
    assert rank.params == 3584 * 2304 + 2304


def test_moe_experts_and_prefill_rows_on_one_of_4_ranks():
    """Qwen3-30B-A3B, a 100-token prefill at TP 4: the routed rows stay (every rank runs its slice of
    every expert), the expert widths split: 768 gate + 768 up -> 384 + 384, down's input 768 -> 192."""
    ops = _rank_ops("qwen3-30b-a3b", 4, Workload.forward(100))
    up = ops["layers.moe.experts.up"][1].dims
    assert (up.m, up.k, up.n, up.experts, up.top_k, up.parts) == (800, 2048, 384, 128, 8, (192, 192))
    down = ops["layers.moe.experts.down"][1].dims
    assert (down.m, down.k, down.n) == (800, 192, 2048)
    assert ops["layers.moe.router"][1] is ops["layers.moe.router"][0]  # replicated


def test_rank_dims_are_whole_numbers_and_leave_whole_ops_alone():
    """A kernel runner allocates these shapes: every dim a whole number (an int, never 2.0), and
    an op that is not split (tp 1, or replicated) keeps its own dims."""
    from dataclasses import fields

    from archcalc.parallel.tensor import rank_dims

    for name, tp in (("llama-3.1-8b", 4), ("llama-3.1-70b", 16), ("qwen3-30b-a3b", 4), ("deepseek-v2-lite", 2),
                     ("gemma-3-27b", 2)):
        for op in model_ops(load_model(name)[0], Workload.forward(100)):
            d = rank_dims(op, tp)
            for f in fields(d):
                v = getattr(d, f.name)
                for x in (v if isinstance(v, tuple) else (v,)):
                    assert x is None or isinstance(x, (int, str)), (name, op.name, f.name, x)
            assert rank_dims(op, 1) is op.dims
            if op.tp == "replicated":
                assert d is op.dims


# Each op's vLLM layer class (vllm/model_executor/models/*.py) and the share of its weight (and work)
# one of 8 ranks holds: ReplicatedLinear (and a plain torch Linear) whole, Column/RowParallelLinear 1/8.
VLLM_LINEAR_CLASSES = {
    # deepseek_v2.py, DeepseekV2Attention: q_a_proj and kv_a_proj_with_mqa ReplicatedLinear (the
    # latent is whole on every rank), q_b_proj / kv_b_proj ColumnParallelLinear, o_proj RowParallelLinear
    "deepseek-v3": {"layers.attn.q_a": 1.0, "layers.attn.kv_a": 1.0, "layers.attn.q_b": 1 / 8,
                    "layers.attn.kv_b": 1 / 8, "layers.attn.o": 1 / 8},
    # without q_lora_rank: q_proj ColumnParallelLinear beside the replicated kv_a_proj_with_mqa
    "deepseek-v2-lite": {"layers.attn.q": 1 / 8, "layers.attn.kv_a": 1.0, "layers.attn.kv_b": 1 / 8},
    # opt.py, OPTDecoder: project_in / project_out ReplicatedLinear (word_embed_proj_dim != hidden_size),
    # "Positional embeddings are replicated (not sharded)"
    "opt-350m": {"embedding.project_in": 1.0, "lm_head.project_out": 1.0, "position.embedding": 1.0,
                 "layers.ffn.up": 1 / 8},
    # qwen2_moe.py, Qwen2MoeSparseMoeBlock: shared_expert_gate a plain torch.nn.Linear(hidden, 1)
    "qwen1.5-moe-a2.7b": {"layers.moe.shared_gate": 1.0, "layers.moe.shared.up": 1 / 8},
    # ParallelLMHead splits the vocabulary; layers/logits_processor.py, LogitsProcessor.forward soft-caps
    # the logits after _get_logits gathers them to one rank: the whole [m, V] there
    "gemma-2-9b": {"lm_head": 1 / 8, "lm_head.softcap": 1.0},
}


@pytest.mark.parametrize("name", sorted(VLLM_LINEAR_CLASSES))
def test_each_projection_shards_as_vllm_s_layer_class(name):
    from pathlib import Path

    path = Path(__file__).parents[1] / "data" / "hf" / f"{name}.json"
    ops = {op.name: op for op in model_ops(load_model(str(path))[0], Workload())}
    assert {n: weight_share(ops[n], 8) for n in VLLM_LINEAR_CLASSES[name]} == VLLM_LINEAR_CLASSES[name]
