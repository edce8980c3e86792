"""Per-rank op lists and the collectives tensor parallelism adds (parallel/
collectives.py, parallel/tensor.py: rank_op, ops/op.py: collective), pinned to
sources we did not write:

- Megatron-LM (Shoeybi et al. 2019, arXiv:1909.08053 §3, Figure 4): a
  tensor-parallel transformer layer needs two all-reduces in the forward pass,
  one after the attention block's row-parallel output projection and one after
  the MLP's row-parallel down projection; the vocab-parallel embedding ends in
  an all-reduce and the column-parallel unembedding's logits are gathered.
- nccl-tests doc/PERFORMANCE.md: the bytes a rank moves in a collective of an
  S-byte tensor over n ranks, as its busBw correction factor: all-reduce
  2(n−1)/n · S, all-gather (n−1)/n · S; n−1 additions per element.
- vLLM's QKVParallelLinear (vllm/model_executor/layers/linear.py): a rank
  holds H/t query heads and max(1, K/t) KV heads (K/V replicated when t > K);
  ColumnParallelLinear's output_size_per_partition = n/t, RowParallelLinear's
  input_size_per_partition = k/t.

Dims from the models' config.json (specs/*.yaml): Llama-3.1-8B D 4096, 32
layers, H 32, K 8, d 128, F 14,336, V 128,256.
"""

from __future__ import annotations

import pytest
from conftest import debug_spec, spec_of

from archcalc.ops.layers import model_ops
from archcalc.ops.op import CollectiveDims, collective
from archcalc.ops.dtypes import nbytes
from archcalc.ops.workload import Workload
from archcalc.parallel.collectives import tp_ops
from archcalc.parallel.tensor import rank_op

LLAMA = spec_of("llama-3.1-8b")
EIGHT = Workload.decode(context=1024, batch=8)  # B·T = 8 tokens, logits for the 8 last tokens, bf16


def by_name(ops):
    return {op.name: op for op in ops}


def collectives(ops):
    return [op for op in ops if op.kind == "collective"]


def layer_all_reduces(ops) -> int:
    """All-reduces per step inside the transformer layers, each counted by its layers."""
    return sum(op.count for op in collectives(ops)
               if op.dims.pattern == "all_reduce" and op.name.startswith("layers."))


# ---- where the collectives are: Megatron-LM §3 -------------------------------------------------------


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_llama_8b_has_two_all_reduces_per_layer(tp):
    # Megatron-LM §3: two all-reduces in each layer's forward pass -> 2 × 32 layers = 64,
    # plus the vocab-parallel embedding's all-reduce and the logits' all-gather.
    ops = tp_ops(LLAMA, EIGHT, model_ops(LLAMA, EIGHT), tp)
    assert layer_all_reduces(ops) == 2 * 32 == 64
    names = [op.name for op in ops]
    assert [n for n in names if n.endswith((".all_reduce", ".all_gather"))] == [
        "embedding.all_reduce", "layers.attn.o.all_reduce", "layers.ffn.down.all_reduce", "lm_head.all_gather"]
    # each right after the op it follows
    for name in ("embedding", "layers.attn.o", "layers.ffn.down"):
        assert names[names.index(name) + 1] == f"{name}.all_reduce"
    assert names[names.index("lm_head") + 1] == "lm_head.all_gather"
    # every op of the model is still there, once, in its order
    assert [n for n in names if not n.endswith((".all_reduce", ".all_gather"))] == [
        op.name for op in model_ops(LLAMA, EIGHT)]


def test_tp_1_is_the_model_unchanged():
    ops = model_ops(LLAMA, EIGHT)
    assert tp_ops(LLAMA, EIGHT, ops, 1) == ops
    assert all(rank_op(op, 1) is op for op in ops)
    assert all(op.comm_bytes == 0 for op in ops)  # no existing op sends anything


def test_parallel_residual_shares_one_all_reduce_per_layer():
    # Pythia-6.9B (GPT-NeoX): x + Attn(N1(x)) + MLP(N2(x)), 32 layers.  The
    # all-reduce is a sum, so Σ_i (attn_i + mlp_i) reduced once equals the two
    # partial sums reduced apart: one all-reduce per layer (GPT-J / NeoX /
    # Falcon under Megatron-style TP), 32, not the 64 of a sequential layer.
    spec = spec_of("pythia-6.9b")
    assert spec.residual.kind == "parallel" and spec.n_layers == 32
    ops = tp_ops(spec, EIGHT, model_ops(spec, EIGHT), 2)
    assert layer_all_reduces(ops) == 32
    assert "layers.attn.o.all_reduce" not in by_name(ops)
    assert by_name(ops)["layers.ffn.down.all_reduce"].count == 32


def test_moe_all_reduce_follows_the_expert_down_projection_over_the_layer_output():
    # Qwen3-30B-A3B (config.json): 48 layers, all MoE, D 2048, top-8 of 128 experts.
    # Megatron §3 still gives 2 × 48 = 96 layer all-reduces; the expert one
    # reduces the combined [B·T, D] = [8, 2048] output (8 · 2048 · 2 B = 32,768 B),
    # not the 8 · 8 = 64 routed rows.
    spec = spec_of("qwen3-30b-a3b")
    ops = by_name(tp_ops(spec, EIGHT, model_ops(spec, EIGHT), 4))
    assert layer_all_reduces(ops.values()) == 96
    ar = ops["layers.moe.experts.down.all_reduce"]
    assert (ar.count, ar.dims.m, ar.dims.width) == (48, 8, 2048)
    assert ar.act_bytes == 2 * 32_768  # its input read and its output written once


def test_a_shared_expert_all_reduces_on_its_own():
    # Megatron-Core's SharedExpertMLP is an MLP with its own RowParallelLinear
    # down projection (its own all-reduce).  Qwen1.5-MoE-A2.7B, 24 layers, each
    # with routed experts, a shared expert and attention: 3 × 24 = 72.
    spec = spec_of("qwen1.5-moe-a2.7b")
    ops = tp_ops(spec, EIGHT, model_ops(spec, EIGHT), 2)
    assert layer_all_reduces(ops) == 3 * 24
    assert "layers.moe.shared.down.all_reduce" in by_name(ops)


# ---- how much they send: the nccl-tests bus-bandwidth factors ----------------------------------------


def test_llama_8b_all_reduce_volume_by_hand():
    """Llama-3.1-8B, B·T = 8, D = 4096, bf16, TP 4.
    Tensor: 8 · 4096 · 2 B = 65,536 B.  Ring all-reduce over 4 ranks: the
    tensor in 4 chunks of 16,384 B; reduce-scatter 3 steps of one chunk
    (49,152 B), all-gather 3 more (49,152 B): 98,304 B sent per rank.
    Additions: each rank adds 3 received chunks of 8 · 4096 / 4 = 8192 values: 24,576.
    Per step: 1 embedding + 64 layer all-reduces = 65 × 98,304 = 6,389,760 B."""
    ops = tp_ops(LLAMA, EIGHT, model_ops(LLAMA, EIGHT), 4)
    ar = by_name(ops)["layers.attn.o.all_reduce"]
    assert ar.dims == CollectiveDims(m=8, width=4096, ranks=4, pattern="all_reduce")
    assert ar.comm_bytes == 98_304
    assert ar.act_bytes == 2 * 65_536
    assert ar.vector_flops == 24_576
    assert (ar.flops, ar.params, ar.weight_bytes, ar.kv_bytes, ar.tp) == (0, 0, 0, 0, "replicated")
    sent = sum(op.comm_bytes * op.count for op in ops if op.kind == "collective" and op.dims.pattern == "all_reduce")
    assert sent == 6_389_760


def test_llama_8b_logits_all_gather_by_hand():
    """Logits of the 8 last tokens: 8 · 128,256 · 2 B = 2,052,096 B in all; over
    4 ranks each holds 513,024 B and sends it in 3 ring steps: 1,539,072 B.
    Locally it reads its shard and writes the whole: 2,565,120 B."""
    ag = by_name(tp_ops(LLAMA, EIGHT, model_ops(LLAMA, EIGHT), 4))["lm_head.all_gather"]
    assert ag.dims == CollectiveDims(m=8, width=128_256, ranks=4, pattern="all_gather")
    assert ag.comm_bytes == 1_539_072
    assert ag.act_bytes == 2_052_096 + 513_024
    assert ag.vector_flops == 0


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_volumes_are_the_nccl_tests_bus_bandwidth_factors(n):
    # nccl-tests doc/PERFORMANCE.md: all-reduce busBw = algBw · 2(n−1)/n, all-gather · (n−1)/n.
    S = 8 * 4096 * 2  # [8, 4096] bf16
    ar = collective("x.all_reduce", "attention", EIGHT, 4096, n, "all_reduce")
    ag = collective("x.all_gather", "lm_head", EIGHT, 4096, n, "all_gather")
    assert ar.comm_bytes == pytest.approx(S * 2 * (n - 1) / n, rel=1e-15)
    assert ag.comm_bytes == pytest.approx(S * (n - 1) / n, rel=1e-15)
    # n−1 additions per element, spread over the n ranks
    assert ar.vector_flops * n == pytest.approx((n - 1) * 8 * 4096, rel=1e-15)


def test_collective_rows_and_dtype():
    wl = Workload(batch=3, new_tokens=5, context=5, act_dtype="fp32")
    assert collective("a", "ffn", wl, 64, 2, "all_reduce").comm_bytes == 15 * 64 * 4  # 2·(1/2)·S
    assert collective("a", "ffn", wl, 64, 2, "all_reduce", tokens=3).comm_bytes == 3 * 64 * 4
    assert collective("a", "ffn", wl, 64, 2, "all_reduce", count=7).count == 7
    with pytest.raises(ValueError):
        collective("a", "ffn", wl, 64, 2, "broadcast")


# ---- one rank's share of the work ------------------------------------------------------------------------


@pytest.mark.parametrize("name, tp", [("llama-3.1-8b", 2), ("llama-3.1-8b", 4), ("llama-3.1-8b", 8),
                                      ("qwen2.5-7b", 2), ("qwen2.5-7b", 4)])
def test_dense_per_rank_matmul_flops_times_tp_is_the_whole_model(name, tp):
    # K % t == 0: every matmul (and attention core) splits exactly t ways.
    spec = spec_of(name)
    assert spec.n_kv_heads % tp == 0
    wl = Workload(batch=2, new_tokens=16, context=64)
    whole = model_ops(spec, wl)
    rank = [op for op in tp_ops(spec, wl, whole, tp) if op.kind != "collective"]
    for kind in ("matmul", "attention"):
        total = sum(op.flops * op.count for op in whole if op.kind == kind)
        per_rank = sum(op.flops * op.count for op in rank if op.kind == kind)
        assert per_rank * tp == pytest.approx(total, rel=1e-12), kind


def test_llama_8b_per_rank_shapes_at_tp_4():
    # vLLM: column n/t, row k/t; QKV (32/4 + 2·8/4)·128 = (8 + 4)·128 = 1536 outputs.
    ops = by_name(tp_ops(LLAMA, EIGHT, model_ops(LLAMA, EIGHT), 4))
    qkv, o, up, down = (ops[n].dims for n in ("layers.attn.qkv", "layers.attn.o", "layers.ffn.up", "layers.ffn.down"))
    assert (qkv.k, qkv.n, qkv.q_width, qkv.kv_width, qkv.n_kv_heads) == (4096, 1536, 1024, 512, 2)
    assert (o.k, o.n) == (1024, 4096)
    assert (up.k, up.n) == (4096, 2 * 14336 // 4)
    assert (down.k, down.n) == (14336 // 4, 4096)
    core = ops["layers.attn.core"].dims
    assert (core.n_heads, core.n_kv_heads, core.kv_width) == (8, 2, 2 * 256)
    # a kernel run at the per-rank shape does the per-rank FLOPs: 2·m·k·n
    for name in ("layers.attn.qkv", "layers.attn.o", "layers.ffn.up", "layers.ffn.down", "lm_head"):
        d = ops[name].dims
        assert ops[name].flops == 2 * d.m * d.k * d.n, name
    assert ops["lm_head"].dims.n == 128_256 // 4


def test_kv_heads_replicate_past_tp_k():
    """Llama-3.1-8B at TP 16 (K = 8): a rank holds 32/16 = 2 query heads and,
    as vLLM replicates, 1 K and 1 V head, not half of one.
    QKV per rank, m = 8: 2 · 8 · 4096 · (2 + 1 + 1) · 128 = 33,554,432 FLOPs."""
    ops = by_name(tp_ops(LLAMA, EIGHT, model_ops(LLAMA, EIGHT), 16))
    qkv = ops["layers.attn.qkv"]
    assert qkv.flops == pytest.approx(33_554_432, rel=1e-15)
    assert (qkv.dims.n, qkv.dims.n_kv_heads) == (512, 1)
    # the cache: each rank reads and appends one KV head's keys and values (1 of K = 8)
    whole = by_name(model_ops(LLAMA, EIGHT))["layers.attn.core"]
    core = ops["layers.attn.core"]
    assert core.kv_bytes == pytest.approx(whole.kv_bytes / 8, rel=1e-15)  # 1 of 8 heads, not 1/16
    assert core.flops == pytest.approx(whole.flops / 16, rel=1e-15)  # 2 of 32 query heads


def test_debug_spec_kv_projection_is_one_head_per_rank_at_tp_4():
    """debug spec: D 64, H 4, K 2, d 16.  TP 4: 1 query head, and 1 K + 1 V
    head (2 // 4 = 0 -> 1, replicated): per rank 64 → (1 + 1 + 1) · 16 = 48
    outputs; m = 8: 2 · 8 · 64 · 48 = 49,152 FLOPs (whole: 2 · 8 · 64 · 128 = 131,072)."""
    spec = debug_spec()
    qkv = by_name(tp_ops(spec, EIGHT, model_ops(spec, EIGHT), 4))["layers.attn.qkv"]
    assert qkv.flops == pytest.approx(49_152, rel=1e-15)
    assert qkv.dims.n == 48
    assert qkv.params == pytest.approx(64 * 48, rel=1e-15)


def test_replicated_ops_are_whole_on_every_rank():
    ops = model_ops(LLAMA, EIGHT)
    rank = by_name(tp_ops(LLAMA, EIGHT, ops, 4))
    for op in ops:
        if op.tp == "replicated":
            assert rank[op.name] is op


def test_learned_positions_need_no_collective_and_collectives_keep_their_component():
    """GPT-2 at TP 2 (vLLM keeps its learned position table whole on every rank):
    one embedding all-reduce for the vocab-parallel token table, none for the
    position table; each collective is charged to the component it joins."""
    spec = spec_of("gpt2")
    wl = Workload(batch=2, new_tokens=16, context=16, logits="last")
    ops = tp_ops(spec, wl, model_ops(spec, wl), 2)
    comps = {o.name: o.component for o in ops if o.kind == "collective"}
    assert comps == {"embedding.all_reduce": "embedding", "layers.attn.o.all_reduce": "attention",
                     "layers.ffn.down.all_reduce": "ffn", "lm_head.all_gather": "lm_head"}


def test_prefill_gathers_only_the_last_tokens_logits():
    """Serving prefill computes logits at each sequence's last token: the all-gather
    moves [B, V], not [B·T, V] (vLLM's LogitsProcessor gathers what lm_head produced)."""
    spec = spec_of("llama-3.1-8b")
    wl = Workload(batch=4, new_tokens=512, context=512, logits="last")
    gather = next(o for o in tp_ops(spec, wl, model_ops(spec, wl), 2) if o.name == "lm_head.all_gather")
    assert gather.dims.m == 4 and gather.comm_bytes == 4 * 128_256 * 2 / 2  # (t − 1)/t of 4 × V bf16 values


def test_learned_position_table_is_whole_on_every_rank():
    """vLLM's GPT-2 builds wte as a VocabParallelEmbedding but wpe as a plain
    nn.Embedding: each of 2 ranks keeps all 1024 × 768 position rows, and half
    of the 50,257 × 768 token rows."""
    spec = spec_of("gpt2")
    wl = Workload(batch=1, new_tokens=8, context=8)
    ops = {o.name: o for o in model_ops(spec, wl)}
    assert rank_op(ops["position.embedding"], 2).params == 1024 * 768
    assert rank_op(ops["embedding"], 2).params == 50_257 * 768 / 2


@pytest.mark.parametrize(("pattern", "sent", "adds", "local"), [
    # N = 8 tokens × 1,024 values × 2 B = 16,384 B over t = 4 ranks (nccl-tests doc/PERFORMANCE.md: the ring
    # moves 2(t−1)/t·N for an all-reduce, (t−1)/t·N for the others; each rank adds (t−1)/t of the values)
    ("all_reduce", 2 * 3 / 4 * 16384, 3 / 4 * 8192, 2 * 16384),
    ("all_gather", 3 / 4 * 16384, 0, 16384 + 16384 / 4),
    ("reduce_scatter", 3 / 4 * 16384, 3 / 4 * 8192, 16384 + 16384 / 4),
    ("all_to_all", 3 / 4 * 16384, 0, 2 * 16384),
    ("send_recv", 16384, 0, 2 * 16384),  # a pipeline stage's send: the whole tensor, nothing added
])
def test_each_ring_collective_by_hand(pattern, sent, adds, local):
    from archcalc.ops.op import collective
    from archcalc.ops.workload import Workload

    op = collective("c", "residual", Workload(new_tokens=8, context=8), 1024, 4, pattern)
    assert (op.comm_bytes, op.vector_flops, op.act_bytes) == (sent, adds, local)
    with pytest.raises(ValueError, match="unknown collective pattern"):
        collective("c", "residual", Workload(), 1024, 4, "broadcast")


# vLLM's linear mixers under TP (vllm/model_executor/layers/mamba/mamba_mixer.py, mamba_mixer2.py,
# short_conv.py; models/qwen3_next.py): in_proj column-parallel, the depthwise conv1d a
# ColumnParallelLinear over its channels, A / D / dt_bias sharded by heads, out_proj
# RowParallelLinear (one all-reduce of [B·T, D] per mixer); Mamba's x_proj is RowParallelLinear too
# (reduce_results: an all-reduce of [B·T, dt_rank + 2N] before dt_proj); Mamba-2's gated norm
# (Mixer2RMSNormGated) is split with its channels; what vLLM keeps whole on every rank: Jamba's
# dt / B / C RMSNorms (after x_proj's all-reduce) and Gated DeltaNet's RMSNormGated(head_v_dim), one
# weight every value head shares.
MIXERS = {"jamba-1.5-mini": ("x_proj", "out_proj"), "nemotron-3-nano-30b-a3b": ("out_proj",),
          "lfm2-1.2b": ("out_proj",), "qwen3-next-80b-a3b": ("out_proj",), "minimax-m1": ("out_proj",)}
WHOLE = {"layers.linear.dt_norm", "layers.linear.b_norm", "layers.linear.c_norm"}


@pytest.mark.parametrize("name", sorted(MIXERS))
def test_linear_mixers_shard_and_reduce_as_vllm_runs_them(name):
    spec = spec_of(name)
    ops = model_ops(spec, EIGHT)
    ranked = tp_ops(spec, EIGHT, ops, 2)
    reduces = {op.name: op.count for op in ranked if op.kind == "collective" and op.name.startswith("layers.linear")}
    assert reduces == {f"layers.linear.{p}.all_reduce": spec.linear_mixer_layers for p in MIXERS[name]}
    mixer = [op for op in ops if op.component == "linear"]
    whole = sum(op.params for op in mixer if op.name in WHOLE or
                (op.name == "layers.linear.norm" and spec.linear.kind == "gated_deltanet"))
    per_rank = sum(rank_op(op, 2).params for op in mixer)
    assert per_rank == (sum(op.params for op in mixer) - whole) / 2 + whole


def test_lightning_mixer_halves_its_work_on_one_of_2_ranks():
    """vLLM's MiniMaxText01LinearAttention: qkv_proj and output_gate ColumnParallelLinear, the silu,
    the core and the sigmoid gate on the rank's own heads, MiniMaxText01RMSNormTP over their width,
    out_proj RowParallelLinear.  So every op of the mixer does half its work and moves half its
    bytes on one of 2 ranks, but for the [B·T, D] side of each projection: the input a column-parallel
    matmul reads whole, the output (a partial sum, all-reduced) a row-parallel one writes whole."""
    spec = spec_of("minimax-m1")
    mixer = [op for op in model_ops(spec, EIGHT) if op.component == "linear"]
    assert [op.name.removeprefix("layers.linear.") for op in mixer] == [
        "qkv_proj", "act", "core", "norm", "output_gate", "gate", "out_proj"]
    for op in mixer:
        ranked = rank_op(op, 2)
        whole = nbytes(EIGHT.tokens * spec.d_model, EIGHT.act_dtype) if op.kind == "matmul" else 0
        assert (ranked.params, ranked.flops, ranked.vector_flops, ranked.act_bytes) == (
            op.params / 2, op.flops / 2, op.vector_flops / 2, (op.act_bytes - whole) / 2 + whole), op.name
