"""The per-element FLOP constants of the `detailed` convention, pinned by
counting the operations of each op's published formula on tiny layers by
hand, and the two byte rules of ops/ (int4 group scales, experts a decode
step touches) pinned to the formats and routing they model.

Sources of the per-element counts (nothing here calls a helper that
computes the expected value):
- LLM-Viewer, model_analyzer.py (hahnyuan/LLM-Viewer @a626bee): softmax
  "# max sub exp sum div" = 5 ops per score; norm "# sum sub pow sum div mul
  add" = 7 ops per element (LayerNorm with weight and bias); residual
  attn_add / mlp_add = 1 op per element.
- LayerNorm without bias: LLM-Viewer's 7 less the final "add" = 6.
- RMSNorm (Zhang & Sennrich 2019, eq. 4: a_i / RMS(a) · g_i) drops
  LayerNorm's re-centering ("sum" for the mean and "sub"): pow, sum, div,
  mul = 4.
- Gemma 2 soft-capping (Gemma 2 report §2: cap · tanh(x / cap)): div, tanh,
  mul = 3.
- RoPE (RoFormer, Su et al., eq. 34: x ⊙ cos + rotate_half(x) ⊙ sin): 2 mul
  + 1 add = 3 per rotated element.
- Activations, one op per arithmetic step of the usual formula: ReLU
  max(0, x) = 1; squared ReLU (Primer, So et al. 2021) relu then square = 2;
  SiLU x / (1 + exp(−x)) = neg, exp, add, div = 4; GELU, tanh form
  (Hendrycks & Gimpel 2016) 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) =
  cube, mul 0.044715, add x, mul √(2/π), tanh, add 1, mul x, mul 0.5 = 8.
- Gated FFN (Shazeer 2020, act(x W) ⊙ (x V)): one more multiply = +1.
- xIELU (Apertus; transformers' XIELUActivation): 11, counted where it is tested.
- MoE combine (transformers' Mixtral block: each expert's output times its
  routing weight, then index_add_ into a zeroed buffer): 1 mul + 1 add per
  value per selected expert = 2k.
"""

from __future__ import annotations

import pytest

from archcalc.cost.totals import flop_counts, weight_bytes
from archcalc.ops import op as ops
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import load_model
from archcalc.spec.model import ModelSpec
from tests.conftest import spec_of

DETAILED, CAUSAL = CONVENTIONS["detailed"], CONVENTIONS["causal"]
# Every tiny case below: one sequence of T = 3 tokens, a full forward (S = 3,
# logits at all 3 positions).  Causal score pairs per head: 1 + 2 + 3 = 6.
T = 3
WL = Workload.forward(T)


def spec(**kw) -> ModelSpec:
    base = {"name": "hand", "d_model": 8, "n_layers": 1, "vocab_size": 10, "max_context": 16}
    return ModelSpec.model_validate({**base, **kw})


def vector_by_op(s: ModelSpec) -> dict[str, int]:
    return {o.name: o.vector_flops * o.count for o in model_ops(s, WL, DETAILED) if o.vector_flops}


# ---- a Llama-style layer: RMSNorm, RoPE, GQA, SwiGLU ------------------------------------------

LLAMA_LIKE = spec(attention={"n_heads": 2, "n_kv_heads": 1, "head_dim": 4}, ffn={"activation": "swiglu", "d_ff": 12})


def test_llama_like_layer_elementwise_flops_by_hand():
    # D = 8, H = 2, K = 1, d_k = 4, F = 12, V = 10, T = 3 rows.
    assert vector_by_op(LLAMA_LIKE) == {
        "layers.attn.norm": 4 * 3 * 8,  # RMSNorm: pow, sum, div, mul = 4 × 3 rows × 8 = 96
        "layers.attn.rope": 3 * 3 * (2 + 1) * 4,  # 3 per rotated value; Q and K heads: 3 × 3 × 12 = 108
        "layers.attn.core": 5 * 6 * 2,  # softmax 5 × 6 causal pairs × 2 heads = 60
        "layers.ffn.norm": 4 * 3 * 8,  # 96
        "layers.ffn.act": (4 + 1) * 3 * 12,  # SiLU 4 + gate product 1, over 3 × F = 180
        "layers.residual.add": 1 * 3 * 8 * 2,  # one add per element, after attention and after the FFN = 48
        "final_norm": 4 * 3 * 8,  # 96
    }


def test_llama_like_layer_detailed_total_by_hand():
    # Matmuls, 2·m·k·n with m = 3:
    #   qkv 2·3·8·(8 + 4 + 4) = 768, o 2·3·8·8 = 384, up 2·3·8·24 = 1152,
    #   down 2·3·12·8 = 576, lm_head 2·3·8·10 = 480          -> 3360
    # Attention: 2 · 6 pairs · 2 heads · (4 + 4)                    -> 192
    # Elementwise (previous test): 96 + 108 + 60 + 96 + 180 + 48 + 96 -> 684
    f = flop_counts(model_ops(LLAMA_LIKE, WL, DETAILED), DETAILED)
    assert (f.matmul, f.attention, f.vector) == (3360, 192, 684)
    assert f.forward == 3360 + 192 + 684 == 4236
    # The default (causal) convention leaves the 684 out of the total.
    assert flop_counts(model_ops(LLAMA_LIKE, WL, CAUSAL), CAUSAL).forward == 3552


# ---- a GPT-2-style layer: LayerNorm with bias, GELU, learned positions --------------------------

GPT2_LIKE = spec(tie_embeddings=True, attention={"n_heads": 2, "bias": ["q", "k", "v", "o"]},
                 ffn={"activation": "gelu", "d_ff": 32, "bias": True}, norm={"kind": "layernorm", "bias": True},
                 position={"kind": "learned"})


def test_gpt2_like_layer_elementwise_flops_by_hand():
    assert vector_by_op(GPT2_LIKE) == {
        "position.add": 1 * 3 * 8,  # token + position embedding: 24
        "layers.attn.norm": 7 * 3 * 8,  # LLM-Viewer's "sum sub pow sum div mul add" = 7: 168
        "layers.attn.core": 5 * 6 * 2,  # no RoPE with learned positions: 60
        "layers.ffn.norm": 7 * 3 * 8,  # 168
        "layers.ffn.act": 8 * 3 * 32,  # GELU (tanh form) 8, not gated: 768
        "layers.residual.add": 1 * 3 * 8 * 2,  # 48
        "final_norm": 7 * 3 * 8,  # 168
    }
    assert flop_counts(model_ops(GPT2_LIKE, WL, DETAILED), DETAILED).vector == 1404  # the sum above


# ---- LayerNorm without bias, squared ReLU, parallel residual, both soft-caps -----------------------

CAPPED = spec(final_softcap=30.0, attention={"n_heads": 2, "softcap": 50.0}, ffn={"activation": "relu2", "d_ff": 16},
              norm={"kind": "layernorm"}, residual={"kind": "parallel"})


def test_parallel_softcapped_layer_elementwise_flops_by_hand():
    assert vector_by_op(CAPPED) == {
        "layers.norm": 6 * 3 * 8,  # one shared LayerNorm, no bias ("sum sub pow sum div mul"): 144
        "layers.attn.rope": 3 * 3 * (2 + 2) * 4,  # MHA: 2 query + 2 key heads of 4: 144
        "layers.attn.core": (5 + 3) * 6 * 2,  # softmax 5 + soft-cap 3 (div, tanh, mul) per score: 96
        "layers.ffn.act": 2 * 3 * 16,  # relu then square: 96
        "layers.residual.add": 2 * 3 * 8,  # x + attn + mlp: two adds per element, once per layer: 48
        "final_norm": 6 * 3 * 8,  # 144
        "lm_head.softcap": 3 * 3 * 10,  # every logit of the 3 rows × V = 10: 90
    }


@pytest.mark.parametrize("activation, per_element", [
    ("relu", 1), ("relu2", 2), ("silu", 4), ("gelu", 8),  # plain
    # xIELU as transformers' XIELUActivation._xielu_python computes it: both branches, then where:
    # alpha_p·x·x + beta·x (mul, mul, mul, add) and (expm1(min(x, eps)) − x)·alpha_n + beta·x
    # (min, expm1, sub, mul, mul, add), plus the select.
    ("xielu", 4 + 6 + 1),
    ("reglu", 1 + 1), ("swiglu", 4 + 1), ("geglu", 8 + 1), ("relu2glu", 2 + 1),  # gated: one more multiply
])
def test_each_activation_constant(activation, per_element):
    s = spec(attention={"n_heads": 2}, ffn={"activation": activation, "d_ff": 12})
    (act,) = [o for o in model_ops(s, WL, DETAILED) if o.name == "layers.ffn.act"]
    assert act.vector_flops == per_element * 3 * 12


def test_qk_norm_per_head_counts_every_head_row():
    # Qwen3-style qk-norm: one RMSNorm of d_k = 4 over each (token, head) row:
    # q: 4 × (3 tokens × 2 heads) × 4 = 96; k: 4 × (3 × 1) × 4 = 48.
    s = spec(attention={"n_heads": 2, "n_kv_heads": 1, "head_dim": 4, "qk_norm": "head"}, ffn={"d_ff": 12})
    v = vector_by_op(s)
    assert (v["layers.attn.q_norm"], v["layers.attn.k_norm"]) == (96, 48)


def test_moe_combine_is_a_multiply_and_an_add_per_selected_expert():
    # 4 experts, top-2, D = 8: 2 · 2 × 3 rows × 8 = 96.
    s = spec(attention={"n_heads": 2}, ffn={"moe": {"n_experts": 4, "top_k": 2, "d_expert": 6}})
    assert vector_by_op(s)["layers.moe.combine"] == 96


# ---- bytes: int4 group scales, experts touched in decode ----------------------------------------


def test_int4_group_128_bytes_of_one_projection():
    # A GPTQ/AWQ group-size-128 checkpoint stores a [4096 in, 1024 out] projection
    # (Llama-3-8B's k_proj) as 4-bit codes, 4096·1024 / 2 = 2,097,152 B, plus
    # one fp16 scale per 128 inputs per output: (4096 / 128)·1024·2 = 65,536 B.
    # (GPTQ's packed zero points, 4 bits per group, are not counted: symmetric
    # compressed-tensors W4A16 checkpoints have none.)
    wl = Workload(weight_dtype="int4")
    k_proj = ops.matmul("k", "attention", wl, 4096, 1024)
    assert k_proj.weight_bytes == 2_097_152 + 65_536
    assert weight_bytes([k_proj], "int4") == 2_162_688


def test_decode_touches_top_k_experts_per_token():
    # Qwen3-30B-A3B's up projection: 128 experts, top-8, D = 2048 -> 2·768.
    # One token (decode at batch 1) runs exactly its 8 experts: 8 · 2048 · 1536
    # weights · 2 B = 50,331,648 B.  Two tokens routed uniformly and independently:
    # an expert is missed by one token with probability 1 − 8/128 = 15/16, so
    # E[touched] = 128 · (1 − (15/16)²) = 128 · 31/256 = 15.5 experts.
    one = ops.expert_matmul("up", Workload.decode(4096, 1), 2048, 1536, 128, 8, bias=False)
    assert one.weight_bytes == 50_331_648
    two = ops.expert_matmul("up", Workload.decode(4096, 2), 2048, 1536, 128, 8, bias=False)
    assert two.weight_bytes == 15.5 * 2048 * 1536 * 2 == 97_517_568
    # The stored parameters are all 128 experts whatever the step reads.
    assert one.params == 128 * 2048 * 1536


def test_a_decode_step_reads_the_biases_of_the_experts_it_touches_only():
    """gpt-oss-20b's experts (transformers' GptOssExperts): gate_up_proj [32, 2880, 5760] with
    gate_up_proj_bias [32, 5760], top-4 (config.json: hidden_size 2880, intermediate_size 2880,
    num_local_experts 32, num_experts_per_tok 4).  One token runs its 4 experts: 4 · 2880 · 5760
    weights and 4 · 5760 biases.  In an int4 checkpoint the weights take 4.125 bits, the biases stay
    bf16 (2 bytes): 4 · 16,588,800 · 4.125 / 8 + 4 · 5,760 · 2 = 34,214,400 + 46,080."""
    bf16 = ops.expert_matmul("up", Workload.decode(4096), 2880, 5760, 32, 4, bias=True)
    assert bf16.weight_bytes == 4 * 2880 * 5760 * 2 + 4 * 5760 * 2 == 132_756_480
    assert (bf16.params, bf16.bias_params, bf16.active_params) == (32 * 2880 * 5760 + 32 * 5760, 32 * 5760,
                                                                   4 * 2880 * 5760 + 4 * 5760)
    int4 = ops.expert_matmul("up", Workload.decode(4096, weight_dtype="int4"), 2880, 5760, 32, 4, bias=True)
    assert int4.weight_bytes == 34_214_400 + 46_080


# ---- chunked local attention (Llama 4) -------------------------------------------------------


@pytest.mark.parametrize(("new", "context", "chunk"), [(1, 1, 4), (7, 7, 3), (5, 12, 4), (1, 9, 4), (9, 21, 8),
                                                      (13, 13, 13), (3, 40, 16)])
def test_chunked_causal_pairs_equal_transformers_mask(new, context, chunk):
    """The pairs a causal chunked kernel computes are the True entries of transformers' own
    chunked_causal_mask_function (masking_utils: kv // chunk == q // chunk and kv <= q) for the
    `new` queries at the end of `context` keys."""
    import torch
    from transformers.masking_utils import chunked_causal_mask_function

    allowed = chunked_causal_mask_function(chunk, torch.zeros(1, dtype=torch.long))
    q = torch.arange(context - new, context)[:, None]
    kv = torch.arange(context)[None, :]
    expected = int(allowed(0, 0, q, kv).sum())
    assert ops.score_pairs(new, context, chunk, CONVENTIONS["causal"], chunked=True) == expected


def test_llama4_chunked_prefill_pairs_by_hand():
    """A 20,000-token prefill of one Llama 4 chunked layer (chunk 8,192): two full chunks of
    8,192·8,193/2 = 33,558,528 pairs and a last one of 3,616·3,617/2 = 6,539,536."""
    assert ops.score_pairs(20_000, 20_000, 8192, CONVENTIONS["causal"], chunked=True) == 73_656_592
    # A sliding window of the same size sees more: 8192·8193/2 + (20,000 − 8,192)·8,192.
    assert ops.score_pairs(20_000, 20_000, 8192, CONVENTIONS["causal"]) == 33_558_528 + 11_808 * 8192


def test_chunked_decode_reads_only_its_chunk_so_far():
    """Decoding the token at position 8,199 (context 8,200) in a chunk of 8,192: its chunk began
    at 8,192, so it reads 8 keys (7 cached and its own) and writes 1: 9 tokens of K and V; a sliding
    window of 8,192 would read 8,192."""
    wl = Workload.decode(8200, 1)
    kw = dict(n_heads=40, kv_heads=8, qk_dim=128, v_dim=128, kv_width=2 * 8 * 128, window=8192)
    chunked = ops.attention("a", wl, CONVENTIONS["causal"], layer_kind="chunked", **kw)
    sliding = ops.attention("a", wl, CONVENTIONS["causal"], layer_kind="local", **kw)
    assert chunked.kv_bytes == 9 * 2048 * 2  # bf16
    assert sliding.kv_bytes == (8192 + 1) * 2048 * 2
    assert chunked.flops == 2 * 8 * 40 * 256


# ---- linear layers: the elementwise work FlopCounterMode cannot see, counted by hand ---------


def test_gated_deltanet_decode_step_is_seven_flops_per_state_value():
    """transformers' torch_recurrent_gated_delta_rule, one token, per value head, on S [d_k, d_v]:
    S · exp(g) (1 mul per value); kv_mem = (S · k).sum(-2) (mul, add: 2); S + k ⊗ δ (mul, add: 2);
    (S · q).sum(-2) (mul, add: 2): 7 per state value, all elementwise (no matmul)."""
    wl = Workload.decode(100, 3)
    op = ops.linear_attention("core", wl, n_heads=4, key_heads=2, key_dim=8, value_dim=6, chunk=64, conv_values=0)
    assert (op.flops, op.vector_flops) == (0, 3 * 7 * 4 * 8 * 6)


def test_gated_deltanet_prefill_counts_whole_chunks():
    """130 tokens in chunks of 64 are 3 chunks (the last padded, as torch_chunk_gated_delta_rule pads);
    per sequence, value head and chunk: 4·64²·d_k + 2·64²·d_v + 6·64·d_k·d_v with d_k = d_v = 2."""
    wl = Workload.forward(130, 2)
    op = ops.linear_attention("core", wl, n_heads=3, key_heads=3, key_dim=2, value_dim=2, chunk=64, conv_values=0)
    per_chunk = 4 * 4096 * 2 + 2 * 4096 * 2 + 6 * 64 * 2 * 2
    assert op.flops == 2 * 3 * 3 * per_chunk


def test_linear_state_is_read_and_written_each_step():
    """A decode step reads and writes each sequence's state: Qwen3-Next's linear layer, batch 2:
    32·128·128 recurrent values in fp32 and 8192·3 conv inputs in bf16, twice (read, write)."""
    wl = Workload.decode(4096, 2)
    op = ops.linear_attention("core", wl, n_heads=32, key_heads=16, key_dim=128, value_dim=128, chunk=64,
                              conv_values=8192 * 3)
    assert op.kv_bytes == 2 * 2 * (32 * 128 * 128 * 4 + 8192 * 3 * 2)
    conv = ops.conv_state("gates", wl, 2048, 2, conv_values=2048 * 2)
    assert conv.kv_bytes == 2 * 2 * 2048 * 2 * 2 and conv.vector_flops == 2 * 2 * 2048  # two products per channel


def test_lightning_attention_blocks_by_hand():
    """MiniMax's lightning attention, 10 tokens in blocks of 4 (4, 4, 2), 2 heads of d = 3: per head
    and block of b, Q Kᵀ and its product with V (2 · 2·d per score: b² scores as FlopCounterMode sees
    them, b(b + 1)/2 causal ones), Q·S and the state update (2 · 2·b·d²).  Elementwise, per head: the
    decay mask on each score, q·λ, k·λ and inter + intra per value (3·T·d), and S·λ^b + update per
    block (2·d²).  A decode step, batch 2: S = λS + kᵀv and q S, 2·d² each per head; λS and the add
    elementwise; the d × d state of each head read and written in fp32."""
    wl = Workload.forward(10)
    rect = ops.lightning_attention("core", wl, CONVENTIONS["torch"], n_heads=2, head_dim=3, block=4)
    causal = ops.lightning_attention("core", wl, CAUSAL, n_heads=2, head_dim=3, block=4)
    assert rect.flops == 2 * (4 * (16 + 16 + 4) * 3 + 4 * 10 * 9) == 1584
    assert causal.flops == 2 * (4 * (10 + 10 + 3) * 3 + 4 * 10 * 9) == 1272
    assert causal.vector_flops == 2 * ((10 + 10 + 3) + 3 * 10 * 3 + 2 * 3 * 9)
    step = ops.lightning_attention("core", Workload.decode(100, 2), CAUSAL, n_heads=2, head_dim=3, block=4)
    assert (step.flops, step.vector_flops, step.kv_bytes) == (2 * 2 * 4 * 9, 2 * 2 * 2 * 9, 2 * 2 * 2 * 9 * 4)
    # a chunk of 3 tokens after a past runs the recurrent form token by token (the cached branch)
    chunk = ops.lightning_attention("core", Workload(batch=2, new_tokens=3, context=103), CAUSAL, n_heads=2,
                                    head_dim=3, block=4)
    assert (chunk.flops, chunk.vector_flops) == (2 * 3 * 2 * 4 * 9, 2 * 3 * 2 * 2 * 9)
    # 8 tokens fill two blocks (no partial one); 9 leave a partial block of one token: 10 + 10 + 1 pairs
    whole = ops.lightning_attention("core", Workload.forward(8), CAUSAL, n_heads=2, head_dim=3, block=4)
    assert whole.vector_flops == 2 * ((10 + 10) + 3 * 8 * 3 + 2 * 2 * 9)
    one_more = ops.lightning_attention("core", Workload.forward(9), CAUSAL, n_heads=2, head_dim=3, block=4)
    assert one_more.vector_flops == 2 * ((10 + 10 + 1) + 3 * 9 * 3 + 2 * 3 * 9)


def test_linear_mixer_cores_move_their_kernels_tensors():
    """The activations each core reads and writes per token, from the tensors its kernel takes and
    returns (bf16, 2 bytes a value), 3 sequences × 5 tokens:
    - Gated DeltaNet (fla's chunk_gated_delta_rule(q, k, v, g, beta)): q, k of 2 key heads × 8,
      v of 4 value heads × 6 read, the output o (4 × 6) written: 2·16 + 2·24 = 80 values;
    - Mamba-2's SSD (mamba_chunk_scan_combined(x, dt, A, B, C, ...)): x (4 heads × 6) and dt (4) read,
      y (4 × 6) written: 52 values (B and C are the conv's output, counted with it);
    - Mamba's selective scan (mamba_ssm's selective_scan_fn(u, delta, A, B, C, D, z) -> out, shapes
      u, delta, z, out [batch, E, L], B and C [batch, N, L]): 5 channels and 3 state values, u, Δ, z of
      5 and B, C of 3 read, out (5) written: 4·5 + 2·3 = 26 values;
    - MiniMax's lightning attention: q, k, v read and the output written, 4 · H · d values;
    - LFM2's gates (transformers' Lfm2ShortConv: Bx = B * x, then y = C * conv_out), two products of 7
      channels, each reading two tensors and writing one: 42 values (the conv between, its own op,
      reads its 7 inputs and writes 7);
    - a depthwise conv over C channels reads C inputs and writes C outputs a token."""
    wl = Workload.forward(5, 3)
    tokens, value = 15, 2
    gdn = ops.linear_attention("core", wl, n_heads=4, key_heads=2, key_dim=8, value_dim=6, chunk=64, conv_values=0)
    assert gdn.act_bytes == tokens * 80 * value
    ssd = ops.state_space_duality("core", wl, CAUSAL, n_heads=4, head_dim=6, d_state=3, chunk=4, conv_values=0)
    assert ssd.act_bytes == tokens * 52 * value
    scan = ops.selective_scan("core", wl, channels=5, d_state=3, conv_values=0)
    assert scan.act_bytes == tokens * 26 * value
    gates = ops.conv_state("gates", wl, 7, 2, conv_values=7 * 2)
    assert gates.act_bytes == tokens * 42 * value
    # MiniMax's lightning attention (MiniMaxLightningAttention): q, k, v of 4 heads × 6 read, the
    # output (4 × 6) written: 96 values
    lightning = ops.lightning_attention("core", wl, CAUSAL, n_heads=4, head_dim=6, block=4)
    assert lightning.act_bytes == tokens * 96 * value
    spec = spec_of("lfm2-1.2b")
    conv = next(op for op in model_ops(spec, wl) if op.name == "layers.linear.conv")
    assert conv.act_bytes == tokens * 2 * spec.d_model * value
    # Lfm2ShortConv.slow_forward: Bx = B * x, then y = C * conv_out: two products per channel a token
    gates_op = next(op for op in model_ops(spec, wl) if op.name == "layers.linear.gates")
    assert gates_op.vector_flops == tokens * 2 * spec.d_model
    # Qwen3-Next's causal conv1d runs over q, k and v: 16 key heads × 128 × 2 + 32 value heads × 128 =
    # 8,192 channels (linear_num_key_heads, linear_key_head_dim, linear_num_value_heads,
    # linear_value_head_dim); it reads and writes each, 4 taps per channel
    nxt = spec_of("qwen3-next-80b-a3b")
    conv = next(op for op in model_ops(nxt, wl) if op.name == "layers.linear.conv")
    assert (conv.act_bytes, conv.flops) == (tokens * 2 * 8192 * value, 2 * tokens * 8192 * 4)
    # Qwen3NextGatedDeltaNet: core_attn_out.reshape(-1, head_v_dim) before self.norm (RMSNormGated):
    # one row of 128 per value head, 32 a token
    norm = next(op for op in model_ops(nxt, wl) if op.name == "layers.linear.norm")
    assert (norm.dims.m, norm.dims.width) == (tokens * 32, 128)
    # RMSNormGated: the norm (square, sum, 1/rms, weight: 4) and the gate silu(z) (4) and product (1)
    # on every value
    assert norm.vector_flops == tokens * 32 * 128 * (4 + 4 + 1)
    # Nemotron-H's MambaRMSNormGated runs over the whole inner width, 64 heads × 64 = 4,096, a row a token
    nemo = load_model("tests/data/hf/nemotron-3-nano-30b-a3b.json")[0]
    norm = next(op for op in model_ops(nemo, wl) if op.name == "layers.linear.norm")
    assert (norm.dims.m, norm.dims.width, norm.vector_flops) == (tokens, 4096, tokens * 4096 * 9)


@pytest.mark.parametrize(("config", "channels"), [
    ("mamba-130m-hf", 2 * 768),  # MambaMixer: intermediate_size = expand 2 × hidden 768
    ("falcon-h1-0.5b-instruct", 1536 + 2 * 1 * 128),  # mamba_d_ssm + 2 · mamba_n_groups · mamba_d_state
    ("nemotron-3-nano-30b-a3b", 64 * 64 + 2 * 8 * 128),  # mamba_num_heads · mamba_head_dim + 2 · n_groups · ssm_state_size
])
def test_a_mixer_s_depthwise_conv_reads_and_writes_each_channel(config, channels):
    """The causal conv1d of Mamba (over x) and Mamba-2 (over x, B and C: transformers' conv_dim) reads
    each channel's input and writes its output once a token, bf16, 3 sequences × 5 tokens; a step
    reads its weight [channels, 1, 4] and bias [channels] once (each config: a conv of 4 with a bias),
    in bf16 at any checkpoint dtype (no quantizer touches a conv), 4 taps a channel and token."""
    spec = load_model(f"tests/data/hf/{config}.json")[0]
    conv = next(op for op in model_ops(spec, Workload.forward(5, 3)) if op.name == "layers.linear.conv")
    assert conv.act_bytes == 15 * 2 * channels * 2
    assert (conv.params, conv.flops) == (channels * (4 + 1), 2 * 15 * 4 * channels)
    int4 = next(op for op in model_ops(spec, Workload.forward(5, 3, weight_dtype="int4"))
                if op.name == "layers.linear.conv")
    assert conv.weight_bytes == int4.weight_bytes == channels * 5 * 2


def test_falcon_h1_without_its_gated_norm_gates_by_silu():
    """Falcon-H1-0.5B's config.json sets mamba_rms_norm false: FalconH1Mixer.torch_forward then
    multiplies the scan output by act(gate) (SiLU) over mamba_d_ssm = 1,536 channels: y and z read,
    the product written (3 values), silu (4) and the product (1) a channel, split by rank as the
    channels are."""
    spec = load_model("tests/data/hf/falcon-h1-0.5b-instruct.json")[0]
    gate = next(op for op in model_ops(spec, Workload.forward(5, 3)) if op.name == "layers.linear.gate")
    assert (gate.act_bytes, gate.vector_flops, gate.dims.inputs, gate.tp) == (15 * 3 * 1536 * 2, 15 * 5 * 1536, 2,
                                                                              "split")


def test_mamba_scan_elementwise_work_by_hand():
    """transformers' mamba_selective_scan, per token: per state value, Δ·A, exp (discrete A), Δ·B,
    times x (deltaB_u), Ā·S + B̄x (mul, add): 6; the readout S·C is a matmul (2 per state value);
    per channel, + x·D (mul, add: 2) and · silu(z) (silu 4, mul 1): 7."""
    wl = Workload.forward(5, 1)
    op = ops.selective_scan("core", wl, channels=6, d_state=4, conv_values=0)
    assert op.flops == 5 * 2 * 6 * 4
    assert op.vector_flops == 5 * (6 * 6 * 4 + 7 * 6)
    assert op.params == 6 * 4 + 6  # A_log [E, N] and D [E]


def test_mamba2_ssd_elementwise_work_by_hand():
    """Mamba-2's SSD (transformers' Mamba2Mixer.torch_forward) over 2 sequences of 10 tokens, 3 heads
    of 4 channels, 5 state values, chunks of 4 (c = 3 chunks, the last padded): per channel and token
    the skip D·x (mul, add: 2); the chunk states passed along as one einsum over (c + 1)² pairs of
    states, tensor work (2 · 16 · 4 · 5 per head and sequence) under the rectangle conventions and
    nothing elementwise; a causal kernel passes them in sequence instead, c · 2 · P · N elementwise per
    head and sequence."""
    wl = Workload.forward(10, 2)
    kw = dict(n_heads=3, head_dim=4, d_state=5, chunk=4, conv_values=0)
    torch_ = ops.state_space_duality("core", wl, CONVENTIONS["torch"], **kw)
    causal = ops.state_space_duality("core", wl, CAUSAL, **kw)
    skip = 2 * 20 * 3 * 4
    assert torch_.vector_flops == skip
    assert causal.vector_flops == skip + 2 * 3 * 3 * 2 * 4 * 5
    assert torch_.flops - causal.flops == 2 * 3 * 16 * 2 * 4 * 5
    # its parameters, dt_bias, A_log and D of 3 heads, are read once a step in bf16 whatever the
    # checkpoint's dtype (they are no matmul's)
    int4 = ops.state_space_duality("core", Workload.forward(10, 2, weight_dtype="int4"), CAUSAL, **kw)
    assert (causal.params, causal.active_params, causal.weight_bytes, int4.weight_bytes) == (9, 9, 18, 18)


def test_gated_deltanet_chunked_form_counts_no_elementwise_work():
    """The chunked gated delta rule (T > 1) counts its matmuls only: the decays, β scaling and the
    two triangular solves of transformers' torch_chunk_gated_delta_rule have no published count, and
    FlopCounterMode sees none of them (documented in ops/op.py: linear_attention).  One token (the
    recurrent step) is all elementwise: 7 per state value."""
    kw = dict(n_heads=4, key_heads=2, key_dim=8, value_dim=6, chunk=4, conv_values=0)
    prefill = ops.linear_attention("core", Workload.forward(10, 2), **kw)
    step = ops.linear_attention("core", Workload.decode(10, 2), **kw)
    assert (prefill.vector_flops, step.flops, step.vector_flops) == (0, 0, 2 * 7 * 4 * 8 * 6)


# ---- DeepSeek Sparse Attention (DeepSeek-V3.2) --------------------------------------------------
# deepseek-ai/DeepSeek-V3.2 config.json: 128 heads of qk 192 (128 nope + 64 rope) and v 128, index_n_heads
# 64, index_head_dim 128, index_topk 2048.  transformers' DeepseekV32Indexer scores each query against
# every earlier key, Σ_h w_h · relu(q_h · k); the main attention then sees only the top 2,048 keys.

def _v32():
    from archcalc.spec.catalog import load_model

    return load_model("tests/data/hf/deepseek-v3.2.json")[0]


def _core_ops(wl, convention="causal"):
    return {op.name: op for op in model_ops(_v32(), wl, CONVENTIONS[convention]) if op.kind == "attention"}


def test_sparse_attention_prefill_pairs_by_hand():
    """A 4,096-token prefill: the main attention's query at p sees min(p + 1, 2,048) keys,
    Σ = 2,048·2,049/2 + 2,048·2,048 = 6,292,480 pairs; the indexer sees all p + 1: 4,096·4,097/2 =
    8,390,656 pairs at 2·64·(128 + 1) FLOPs each."""
    core = _core_ops(Workload.forward(4096, 1))
    assert core["layers.attn.core"].flops == 2 * 6_292_480 * 128 * (192 + 128)
    assert core["layers.attn.indexer.core"].flops == 2 * 8_390_656 * 64 * (128 + 1)
    # the whole rectangle where no mask is skipped (transformers' eager masks the unselected keys)
    torch_core = _core_ops(Workload.forward(4096, 1), "torch")
    assert torch_core["layers.attn.core"].flops == 2 * 4096 * 4096 * 128 * 320


def test_sparse_attention_decode_reads_topk_latents_and_every_index_key():
    """One decode step at 100,000 tokens: the attention reads 2,048 latents of 576 values, the indexer
    all 100,000 keys of 128 (bf16), and each appends its token."""
    core = _core_ops(Workload.decode(100_000, 1))
    assert core["layers.attn.core"].dims.topk == 2048
    assert core["layers.attn.core"].kv_bytes == (2048 + 1) * 576 * 2
    assert core["layers.attn.indexer.core"].kv_bytes == (100_000 + 1) * 128 * 2
    assert core["layers.attn.core"].flops == 2 * 2048 * 128 * 320


def test_sparse_attention_parameters_and_caches():
    """Per layer the indexer adds wq_b 1,536 × 8,192, wk 7,168 × 128, k_norm's weight and bias (2 × 128)
    and weights_proj 7,168 × 64: 13,959,424, over 61 layers 851,524,864 on top of DeepSeek-V3's layers.
    vLLM keeps its key cache as head_dim fp8 bytes plus one 4-byte scale per 128 (132 B per token per
    layer, DeepseekV32IndexerCache(head_dim=idx_dim + idx_dim // 128 * 4, dtype=uint8)), beside MLA's
    576-value latent; transformers keeps it in the model dtype."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.serving.deployment import Deployment
    from archcalc.serving.planner import Planner

    ops_ = [op for op in model_ops(_v32(), Workload()) if op.name.startswith("layers.attn.indexer.")]
    assert sum(op.params * op.count for op in ops_) == 61 * (1536 * 8192 + 7168 * 128 + 2 * 128 + 7168 * 64) \
        == 851_524_864
    plan = Planner(_v32(), load_hardware("h200"), Deployment(gpus=8, weights="fp8-block")).plan(32768)
    kv = {k.kind: k for k in plan.kv}
    assert kv["indexer"].token_bytes == 132 and kv["global"].token_bytes == 576 * 2
    assert kv["indexer"].charged_layers == kv["global"].charged_layers == 61 and kv["indexer"].cells == 32768
    # vLLM's one group of 61 layers (UniformTypeKVCacheSpecs): a block holds both pages
    assert plan.startup.page_bytes == 16 * (576 * 2 + 132) and plan.startup.groups == 1
    assert plan.startup.needed == 61 * 16 * (576 * 2 + 132) * (32768 // 16)
    plain = Planner(_v32(), load_hardware("h200"), Deployment(engine="plain", gpus=8)).plan(32768)
    assert {k.kind: k.token_bytes for k in plain.kv} == {"global": 576 * 2, "indexer": 128 * 2}
    # an index key of 192 (a hypothetical shape): one scale per whole 128 values, 192 + 4 bytes; the
    # same on each of 8 TP ranks
    a = _v32().attention
    wide = _v32().model_copy(update={"attention": a.model_copy(update={"indexer": a.indexer.model_copy(
        update={"head_dim": 192})})})
    kv = {k.kind: k for k in Planner(wide, load_hardware("h200"), Deployment(gpus=8)).plan(4096).kv}
    assert kv["indexer"].token_bytes == 196


def test_an_mtp_module_keeps_a_parallel_mixer():
    """An MTP module is one decoder layer of the model's last kind, plus enorm, hnorm, a final norm
    (D each) and eh_proj (2D × D): with Falcon-H1's layout that layer runs its Mamba-2 mixer too."""
    from transformers import FalconH1Config

    from archcalc.cost.totals import param_counts
    from archcalc.ops.mtp import mtp_ops
    from archcalc.spec.hf import spec_dict_from_config

    import json

    data, _ = spec_dict_from_config(json.loads(FalconH1Config(num_hidden_layers=2).to_json_string()), "config.json")
    one = ModelSpec.model_validate({**data, "name": "h1", "n_layers": 1})
    layer = sum(op.params * op.count for op in model_ops(one, Workload()) if op.name.startswith("layers."))
    assert any(op.name.startswith("layers.linear.") for op in model_ops(one, Workload()))
    spec = ModelSpec.model_validate({**data, "name": "h1", "mtp": {"layers": 1}})
    assert param_counts(mtp_ops(spec)).total == layer + 3 * 4096 + 2 * 4096 * 4096


def test_mtp_modules_follow_the_model_s_norms_and_their_count():
    """Two MTP modules (num_nextn_predict_layers 2) with their own embedding and head copies on
    OLMo-1B, whose LayerNorms have no parameters: each module is one of transformers' OlmoDecoderLayer
    (its numel, built on meta), eh_proj (2D × D), the embedding and head copies (V × D each), and
    three norms that, as OLMo's own, hold nothing.  In an int4 checkpoint the copies stay bf16, as
    the model's embedding and lm_head do (quantizers leave lm_head out: AutoAWQ's and GPTQ's defaults)."""
    import json
    from pathlib import Path

    import torch
    from transformers import AutoConfig
    from transformers.models.olmo.modeling_olmo import OlmoDecoderLayer

    from archcalc.cost.totals import param_counts
    from archcalc.ops.mtp import mtp_ops
    from archcalc.spec.hf import spec_dict_from_config
    from archcalc.spec.model import MTPSpec

    raw = json.loads((Path(__file__).parents[1] / "data" / "hf" / "olmo-1b-hf.json").read_text())
    with torch.device("meta"):
        hf_layer = sum(p.numel() for p in OlmoDecoderLayer(AutoConfig.for_model(**raw), 0).parameters())
    D, V = 2048, 50304
    data, _ = spec_dict_from_config(raw, "config.json")
    olmo = ModelSpec.model_validate({**data, "name": "olmo-1b", "mtp": MTPSpec(layers=2, copies=True).model_dump()})
    assert not olmo.norm.weight
    ops_ = mtp_ops(olmo)
    assert param_counts(ops_).total == 2 * (hf_layer + 2 * D * D + 2 * V * D)
    copies = [op for op in ops_ if op.name in ("mtp.embedding", "mtp.head")]
    assert weight_bytes(copies, "int4") == 2 * 2 * V * D * 2


# The tensors each elementwise line of transformers' modeling code reads (one [m, width] tensor
# each) and writes (one): act_bytes = (read + written) × m × width × 2 B in bf16.
ELEMENTWISE_TRAFFIC = [
    # GPT2Model.forward: hidden_states = inputs_embeds + position_embeds
    ("gpt2", "position.add", 2 + 1),
    # LlamaDecoderLayer.forward: hidden_states = residual + hidden_states
    ("llama-3.1-8b", "layers.residual.add", 2 + 1),
    # GPTJBlock.forward: hidden_states = attn_output + feed_forward_hidden_states + residual
    ("gpt-j-6b", "layers.residual.add", 3 + 1),
    # MixtralExperts: act_fn(gate) * up over each routed token's gate and up halves
    ("mixtral-8x7b", "layers.moe.experts.act", 2 + 1),
    # LlamaMLP: act_fn(gate_proj(x)) * up_proj(x)
    ("llama-3.1-8b", "layers.ffn.act", 2 + 1),
]


@pytest.mark.parametrize("name, op_name, tensors", ELEMENTWISE_TRAFFIC)
def test_an_elementwise_op_moves_the_tensors_its_hf_line_reads_and_writes(name, op_name, tensors):
    wl = Workload(batch=2, new_tokens=3, context=3)
    (op,) = [o for o in model_ops(spec_of(name), wl) if o.name == op_name]
    assert op.act_bytes == tensors * op.dims.m * op.dims.width * 2


def test_a_norm_without_a_weight_skips_the_final_scale():
    """RMSNorm is pow, sum, div, mul by g (4 per element) and LayerNorm with neither weight nor bias
    LLM-Viewer's 7 less the bias add and the weight mul (5): OLMo-1B's non-parametric LayerNorm
    (transformers' OlmoLayerNorm: F.layer_norm with no weight, no bias) and Llama 4's weightless L2
    q/k norm (Llama4TextL2Norm: x · rsqrt(mean(x²) + eps)), per element, in the detailed convention."""
    wl = Workload(batch=1, new_tokens=3, context=3)
    olmo = {o.name: o for o in model_ops(load_model("tests/data/hf/olmo-1b-hf.json")[0], wl, DETAILED)}
    norm = olmo["layers.attn.norm"]
    assert (norm.params, norm.vector_flops) == (0, 5 * 3 * 2048)
    scout = {o.name: o for o in model_ops(spec_of("llama-4-scout"), wl, DETAILED)}
    q = scout["layers.attn.q_norm"]
    assert (q.params, q.vector_flops) == (0, 3 * 3 * 40 * 128)  # 40 query heads of 128, rows (token, head)


def test_a_masked_window_reads_every_key_and_a_decode_query_its_window():
    """K/V bytes an attention step moves: the keys it reads plus the T tokens it appends. Under SDPA a
    sliding window in prefill is a mask over every key (transformers hands SDPA the whole K/V with a
    window mask), where a kernel that skips (the causal convention: FlashAttention's window_size) reads
    the window before the first query and the chunk itself; a decode query reads only its window's
    keys. 4 heads over 2 K/V heads of 8 (kv_width 2·2·8 = 32 values), bf16."""
    sdpa, causal = CONVENTIONS["sdpa"], CONVENTIONS["causal"]

    def kv_bytes(convention, t, s):
        wl = Workload(batch=1, new_tokens=t, context=s)
        return ops.attention("a", wl, convention, n_heads=4, kv_heads=2, qk_dim=8, v_dim=8, kv_width=32,
                             window=16, layer_kind="local").kv_bytes

    assert kv_bytes(sdpa, 8, 64) == (64 + 8) * 32 * 2
    assert kv_bytes(sdpa, 2, 64) == (64 + 2) * 32 * 2
    assert kv_bytes(causal, 8, 64) == (16 + 8 - 1 + 8) * 32 * 2
    assert kv_bytes(sdpa, 1, 64) == kv_bytes(causal, 1, 64) == (16 + 1) * 32 * 2


def test_sparse_attention_prefill_reads_every_key_and_decode_its_top_k():
    """DeepSeek-V3.2's queries each pick their top 2,048 keys (the indexer's topk): a decode query reads
    2,048 cached latents, a prefill's queries pick among all S, so the step reads every key. The
    latent is 512 + 64 values (kv_lora_rank + qk_rope_head_dim), bf16, plus the T appended."""
    core = {}
    for t, s in ((1, 8192), (4096, 8192)):
        wl = Workload(batch=1, new_tokens=t, context=s)
        core[t] = next(o for o in model_ops(spec_of("deepseek-v3.2"), wl) if o.name == "layers.attn.core")
    assert core[1].kv_bytes == (2048 + 1) * 576 * 2
    assert core[4096].kv_bytes == (8192 + 4096) * 576 * 2
