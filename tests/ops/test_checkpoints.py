"""GGUF mixes against what llama.cpp itself reports and writes.

- Ollama's llama3.2 (Llama 3.2 3B, Q4_K_M) logs, through llama.cpp's model loader
  (github.com/rjmalagon/ollama-linux-amd-apu/issues/19): "type f32: 58 tensors,
  type q4_K: 168 tensors, type q6_K: 29 tensors" (the 58th f32 tensor is
  rope_freqs, Llama 3's RoPE scaling factors: a buffer, not a parameter);
- a Q4_K_M Mistral-7B-shaped (4,096 × 14,336, K = 1,024) file's tensor list
  (github.com/mozilla-ai/llamafile/pull/122): blocks 29 and 30;
- a Q5_K_M Mistral 7B (vocabulary 32,000) tensor list
  (github.com/SciSharp/LLamaSharp/issues/35): blocks 29, 30 and output.weight;
- ggml-common.h's block layouts (the sizes below are its static_asserts);
- llama-quant.cpp's use_more_bits, evaluated by hand for 28 and 32 layers;
- llama-quantize's own table of file sizes for Llama-3-8B (tools/quantize/quantize.cpp,
  QUANT_OPTIONS: "Q4_K_M: 4.58G", "Q5_K_M: 5.33G", "Q6_K: 6.14G", "Q8_0: 7.96G", in GiB);
- a Qwen2.5-0.5B-Instruct Q4_K_M file's llama.cpp log (code-search index ids 71481058962 and
  71172331069: n_embd 896, n_layer 24, n_vocab 151936): "type f32: 121 tensors, type q5_0: 133
  tensors, type q8_0: 13 tensors, type q4_K: 12 tensors, type q6_K: 12 tensors", "file size =
  462.96 MiB (6.16 BPW)" (llama_model_loader's n_bytes, the tensors' bytes); 630 M elements at 6.16
  bits, so that file stores output.weight beside token_embd (untied, 136 M elements more);
- llama-quant.cpp never quantizes the position table (`name != LLM_TENSOR_POS_EMBD`): it stays as
  convert_hf_to_gguf wrote it, F16 under --outtype f16;
- bartowski's Llama 3.1 70B files (huggingface.co/bartowski/Meta-Llama-3.1-70B-Instruct-GGUF, its
  README's file table, quoted at ozeki.chat/p_8590-understanding-ai-model-files.html):
  Q4_K_M 42.52GB, Q5_K_M 49.95GB, Q6_K 57.89GB, Q8_0 74.98GB (decimal GB, as the Hub lists them).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from archcalc.cli import cli
from archcalc.errors import InputError
from archcalc.ops.checkpoints import (GGML_TYPES, bits_per_weight, checkpoint_size, checkpoint_types, tensor_bytes,
                                      tensor_types, tensors, use_more_bits)
from archcalc.cost.totals import size
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import load_model
from archcalc.spec.model import ModelSpec
from archcalc.serving.deployment import Deployment
from archcalc.serving.planner import Planner
from archcalc.hardware.profile import load_hardware
from tests.conftest import BUNDLED, spec_of

# meta-llama/Llama-3.2-3B config.json: hidden 3,072, 28 layers, 24 heads, 8 KV heads, FFN 8,192, tied.
LLAMA_32_3B = ModelSpec(name="llama-3.2-3b", d_model=3072, n_layers=28, vocab_size=128256, max_context=131072,
                        tie_embeddings=True, attention={"n_heads": 24, "n_kv_heads": 8}, ffn={"d_ff": 8192},
                        position={"theta": 500000.0})


def types(spec, mix):
    return {t.name: kind for t, kind in tensor_types(spec, model_ops(spec, Workload()), mix)}


def test_the_ollama_llama_3_2_3b_q4_k_m_tensor_counts():
    g = checkpoint_size(LLAMA_32_3B, model_ops(LLAMA_32_3B, Workload()), "gguf:Q4_K_M")
    assert g.tensors_by_type["q4_K"] == 168 and g.tensors_by_type["q6_K"] == 29
    assert g.tensors_by_type["f32"] + 1 == 58  # + rope_freqs


@pytest.mark.parametrize("name, kind", [
    ("blk.29.attn_q.weight", "q4_K"), ("blk.29.attn_k.weight", "q4_K"), ("blk.29.attn_v.weight", "q6_K"),
    ("blk.29.attn_output.weight", "q4_K"), ("blk.29.ffn_gate.weight", "q4_K"), ("blk.29.ffn_up.weight", "q4_K"),
    ("blk.29.ffn_down.weight", "q6_K"), ("blk.30.attn_q.weight", "q4_K"), ("blk.30.attn_k.weight", "q4_K"),
    ("blk.30.attn_v.weight", "q6_K"),
])
def test_a_q4_k_m_tensor_list(name, kind):
    assert types(spec_of("mistral-7b-v0.1"), "Q4_K_M")[name] == kind


@pytest.mark.parametrize("name, kind", [
    ("blk.29.attn_output.weight", "q5_K"), ("blk.29.attn_q.weight", "q5_K"), ("blk.29.attn_v.weight", "q6_K"),
    ("blk.30.ffn_gate.weight", "q5_K"), ("blk.30.ffn_up.weight", "q5_K"), ("blk.30.attn_k.weight", "q5_K"),
    ("blk.30.attn_output.weight", "q5_K"), ("blk.30.attn_q.weight", "q5_K"), ("blk.30.attn_v.weight", "q6_K"),
    ("output.weight", "q6_K"), ("blk.30.ffn_down.weight", "q6_K"), ("blk.30.attn_norm.weight", "f32"),
])
def test_a_q5_k_m_tensor_list(name, kind):
    spec = spec_of("mistral-7b-v0.1")
    kinds = types(spec, "Q5_K_M")
    our = {"blk.30.attn_norm.weight": "blk.30.layers.attn.norm.weight"}.get(name, name)
    assert kinds[our] == kind


def test_block_layouts_of_ggml_common_h():
    # static_assert(sizeof(block_q4_K) == 2*sizeof(ggml_half) + K_SCALE_SIZE + QK_K/2) with K_SCALE_SIZE 12, QK_K 256
    assert GGML_TYPES["q4_K"] == (256, 2 * 2 + 12 + 256 // 2)
    assert GGML_TYPES["q5_K"] == (256, 2 * 2 + 12 + 256 // 2 + 256 // 8)
    assert GGML_TYPES["q6_K"] == (256, 256 // 2 + 256 // 4 + 256 // 16 + 2)
    assert GGML_TYPES["q8_0"] == (32, 2 + 32) and GGML_TYPES["q4_0"] == (32, 2 + 16)
    assert GGML_TYPES["mxfp4"] == (32, 1 + 16)  # one E8M0 scale, 32 E2M1 values
    assert [bits_per_weight(t) for t in ("q4_0", "q8_0", "q4_K", "q5_K", "q6_K")] == [4.5, 8.5, 4.5, 5.5, 6.5625]


def test_use_more_bits_by_hand():
    # n = 28: n/8 = 3, 7n/8 = 24: layers 0-2, 24-27, and 3 + 3j + 2 = 5, 8, ..., 23
    assert [i for i in range(28) if use_more_bits(i, 28)] == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27]
    assert [i for i in range(32) if use_more_bits(i, 32)] == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30,
                                                               31]


def test_rows_that_do_not_split_into_blocks_fall_back():
    """Qwen2.5-0.5B: d_model 896 is 3.5 blocks of 256, so its Q4_K rows become Q5_0 and Q6_K ones Q8_0
    (tensor_type_fallback); ffn_down's rows are d_ff = 4,864 = 19 × 256: they keep the K types."""
    kinds = types(spec_of("qwen2.5-0.5b"), "Q4_K_M")
    assert kinds["blk.3.attn_q.weight"] == "q5_0" and kinds["blk.0.attn_v.weight"] == "q8_0"
    assert kinds["blk.0.ffn_down.weight"] == "q6_K" and kinds["blk.3.ffn_down.weight"] == "q4_K"
    assert kinds["token_embd.weight"] == "q8_0"  # tied: output's Q6_K, which the row cannot hold


def _shaped(base: ModelSpec, **changes) -> ModelSpec:
    return ModelSpec.model_validate({**base.model_dump(), **changes})


def test_a_row_that_no_fallback_divides_is_f16():
    """tensor_type_fallback: Q4_K -> Q5_0, and where 32 does not divide the row either, F16 ("must use
    F16 due to unusual shape", llama.cpp PR #9074 for exactly this tensor: Mamba-130m's dt_proj reads
    dt_rank = 48 inputs); a Q8_0 row 32 does not divide is F16 too, as convert_hf_to_gguf writes it."""
    mamba = load_model("tests/data/hf/mamba-130m-hf.json")[0]
    kinds = types(mamba, "Q4_K_M")
    assert kinds["blk.0.layers.linear.dt_proj.weight"] == types(mamba, "Q8_0")["blk.0.layers.linear.dt_proj.weight"] == "f16"
    assert kinds["blk.0.layers.linear.out_proj.weight"] == kinds["blk.0.layers.linear.x_proj.weight"] == "q4_K"


@pytest.mark.parametrize("kv_heads, attn_v", [(64, "q4_K"), (32, "q5_K"), (8, "q5_K")])
def test_80_layers_are_llama_cpp_s_70b_only_with_gqa(kv_heads, attn_v):
    """llama-model.cpp, LLM_ARCH_LLAMA: 80 layers are LLM_TYPE_65B when n_head == n_head_kv (LLaMA
    65B: 64 heads, 8,192 wide, FFN 22,016) and LLM_TYPE_70B otherwise; in a 70B, a Q4_K attn_v
    becomes Q5_K.  Layer 10 of 80 is not one use_more_bits picks."""
    llama65 = ModelSpec(name="llama-65b", d_model=8192, n_layers=80, vocab_size=32000, max_context=2048,
                        attention={"n_heads": 64, "n_kv_heads": kv_heads}, ffn={"d_ff": 22016})
    assert not use_more_bits(10, 80)
    assert types(llama65, "Q4_K_M")["blk.10.attn_v.weight"] == attn_v


def test_falcon_s_own_rules():
    """llama-quant.cpp for LLM_ARCH_FALCON: output.weight (Falcon-7B ties it: token_embd) Q8_0 whatever
    the mix; Q4_K_M ffn_down Q6_K in the first n/16 layers, Q5_K where use_more_bits picks, Q4_K
    elsewhere (Q5_K_M keeps the common rule).  32 layers: n/16 = 2."""
    falcon = spec_of("falcon-7b")
    q4 = types(falcon, "Q4_K_M")
    assert q4["token_embd.weight"] == types(falcon, "Q5_K_M")["token_embd.weight"] == "q8_0"
    assert [q4[f"blk.{i}.ffn_down.weight"] for i in (0, 1, 2, 3, 4, 6)] == ["q6_K", "q6_K", "q5_K", "q5_K", "q4_K",
                                                                           "q5_K"]
    assert types(falcon, "Q5_K_M")["blk.2.ffn_down.weight"] == "q6_K"
    # the fused attn_qkv is Q5_K in every layer; its 4,544-wide rows are 17.75 blocks of 256: Q5_1
    assert q4["blk.0.attn_qkv.weight"] == q4["blk.4.attn_qkv.weight"] == "q5_1"
    assert "blk.0.attn_v.weight" not in q4


def test_ffn_down_layers_count_the_model_s_layers_not_its_tensors():
    """init_quantize_state_counters: n_ffn_down = n_layer_all.  Qwen1.5-MoE (24 layers, each with routed
    and shared experts: 48 ffn_down tensors): the layer is the tensor's own (n_expert > 1) and n is 24,
    so layers 0-2, 5, 8, ..., 20, 21-23 get Q6_K, the shared expert's ffn_down_shexp with them (its
    rows are 5,632 = 22 × 256 wide; the routed experts' 1,408 are not, so their Q6_K is Q8_0)."""
    kinds = types(spec_of("qwen1.5-moe-a2.7b"), "Q4_K_M")
    more = [i for i in range(24) if kinds[f"blk.{i}.ffn_down_shexp.weight"] == "q6_K"]
    assert more == [0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23]
    assert [i for i in range(24) if kinds[f"blk.{i}.ffn_down_exps.weight"] == "q8_0"] == more


def test_a_dense_model_with_layers_without_an_ffn_counts_its_ffn_downs():
    """Without experts, llama.cpp's layer is its ffn_down counter (i_ffn_down), n still the layer count:
    16 layers of which the first 8 have no FFN: the 8 ffn_downs are counted 0-7 against n = 16, and
    use_more_bits(i, 16) picks i = 0, 1, 4, 7 (n/8 = 2, 7n/8 = 14): layers 8, 9, 12, 15."""
    spec = _shaped(spec_of("debug"), n_layers=16, ffn={"d_ff": 512, "none_layers": list(range(8))},
                   attention={"n_heads": 4, "n_kv_heads": 2})
    kinds = types(spec, "Q4_K_M")
    assert [i for i in range(16) if kinds.get(f"blk.{i}.ffn_down.weight") == "q6_K"] == [8, 9, 12, 15]


def test_gguf_tensor_names_are_convert_hf_to_gguf_s():
    """llama.cpp's names: DeepSeek-V3's first 3 layers are dense (first_k_dense_replace 3), so blk.0-2
    hold ffn_down and blk.3-60 ffn_down_exps and ffn_down_shexp; a plain (ungated) FFN is ffn_up and
    ffn_down, no ffn_gate (GPT-J); Phi-3 fuses q/k/v into attn_qkv and gate/up into ffn_up."""
    ds = {t.name for t in checkpoint_types(spec_of("deepseek-v3"), model_ops(spec_of("deepseek-v3"), Workload()),
                                          "gguf:Q4_K_M")[0:0]} | set(types(spec_of("deepseek-v3"), "Q4_K_M"))
    assert {"blk.0.ffn_down.weight", "blk.2.ffn_down.weight", "blk.3.ffn_down_exps.weight",
            "blk.60.ffn_down_exps.weight", "blk.60.ffn_down_shexp.weight"} <= ds
    assert not {"blk.3.ffn_down.weight", "blk.2.ffn_down_exps.weight", "blk.61.ffn_down_exps.weight"} & ds
    gptj = types(spec_of("gpt-j-6b"), "Q4_K_M")
    assert {"blk.0.ffn_up.weight", "blk.0.ffn_down.weight"} <= set(gptj) and "blk.0.ffn_gate.weight" not in gptj
    phi3 = types(spec_of("phi-3-mini-4k"), "Q4_K_M")
    assert {"blk.0.attn_qkv.weight", "blk.0.ffn_up.weight"} <= set(phi3)
    assert not {"blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.0.ffn_gate.weight"} & set(phi3)


def test_mixtral_keeps_attention_at_q8_0_and_q5_k():
    kinds = types(spec_of("mixtral-8x7b"), "Q4_K_M")
    assert kinds["blk.0.attn_v.weight"] == kinds["blk.0.attn_k.weight"] == "q8_0"
    assert kinds["blk.0.attn_output.weight"] == "q5_K" and kinds["blk.0.ffn_gate_inp.weight"] == "f32"
    assert kinds["blk.0.ffn_down_exps.weight"] == "q6_K" and kinds["blk.0.ffn_up_exps.weight"] == "q4_K"


def test_fit_and_size_use_the_file_s_bytes():
    spec = spec_of("llama-3.1-8b")
    g = checkpoint_size(spec, model_ops(spec, Workload()), "gguf:Q4_K_M")
    assert 4.89 < g.bits_per_weight < 4.90  # llama.cpp logs "4.89 BPW" for an 8B Llama 3 Q4_K_M
    plan = Planner(spec, load_hardware("rtx-3090"), Deployment(weights="gguf:Q4_K_M")).plan(8192)
    assert plan.weights.bytes == g.bytes  # vLLM loads every tensor onto the GPU
    r = CliRunner().invoke(cli, ["size", "llama-3.1-8b", "--weights", "gguf:Q4_K_M", "--json"])
    assert r.exit_code == 0 and '"format": "gguf:Q4_K_M"' in r.stdout
    bad = CliRunner().invoke(cli, ["fit", "llama-3.1-8b", "--gpu", "h100", "--weights", "gguf:Q3_K_X"])
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1


@pytest.mark.parametrize("mix, gib", [("Q4_K_M", 4.58), ("Q5_K_M", 5.33), ("Q6_K", 6.14), ("Q8_0", 7.96)])
def test_llama_quantize_s_own_file_sizes_for_llama_3_8b(mix, gib):
    """Within 0.015 GiB: the table rounds to 0.01 GiB and its files add the tokenizer's metadata
    (a few MB) to the tensors counted here."""
    spec = spec_of("llama-3.1-8b")  # Llama 3 8B's shape: the same tensors
    g = checkpoint_size(spec, model_ops(spec, Workload()), f"gguf:{mix}")
    assert abs(g.bytes / 2**30 - gib) < 0.015


def test_a_qwen2_5_0_5b_q4_k_m_file_as_llama_cpp_logs_it():
    """Every count of the log: 24 layers × (2 norms + the q, k and v biases, each its own F32 tensor) +
    output_norm = 121 F32; the 896-wide rows do not split into 256-blocks, so Q4_K -> Q5_0 (132 + the
    untied token_embd) and Q6_K -> Q8_0 (output and 12 attn_v); only ffn_down's 4,864-wide rows keep
    Q4_K / Q6_K (12 each)."""
    spec = spec_of("qwen2.5-0.5b").model_copy(update={"tie_embeddings": False})  # the file is untied
    g = checkpoint_size(spec, model_ops(spec, Workload()), "gguf:Q4_K_M")
    assert g.tensors_by_type == {"f32": 121, "q5_0": 133, "q8_0": 13, "q4_K": 12, "q6_K": 12}
    assert round(g.bytes / 2**20, 2) == 462.96 and round(g.bits_per_weight, 2) == 6.16
    kinds = types(spec, "Q4_K_M")
    assert kinds["blk.0.attn_q.bias"] == kinds["blk.0.attn_k.bias"] == kinds["blk.0.attn_v.bias"] == "f32"
    assert sum(g.bytes_by_op.values()) == g.bytes
    assert sum(sum(layers) for layers in g.bytes_by_layer.values()) == g.bytes


def test_the_position_table_stays_f32():
    """llama-quantize never quantizes position_embd, and convert_hf_to_gguf writes it F32 (the
    StarCoder log below counts it with the 322 norms and biases: 323 f32 tensors)."""
    spec = spec_of("gpt2")  # GPT-2's wpe: 1,024 positions × 768
    kinds = {t.name: (kind, t.elements) for t, kind in tensor_types(spec, model_ops(spec, Workload()), "Q4_K_M")}
    assert kinds["position_embd.weight"] == ("f32", 1024 * 768)
    g = checkpoint_size(spec, model_ops(spec, Workload()), "gguf:Q4_K_M")
    assert "f16" not in g.bytes_by_type and g.tensors_by_type["f32"] == 12 * 8 + 2 + 1  # + ln_f and wpe


@pytest.mark.parametrize("mix, gb", [("Q4_K_M", 42.52), ("Q5_K_M", 49.95), ("Q6_K", 57.89), ("Q8_0", 74.98)])
def test_bartowski_s_llama_3_1_70b_files(mix, gb):
    """Llama 3.1 70B is llama.cpp's LLM_TYPE_70B (80 layers, GQA): attn_v gets Q5_K where Q4_K_M would give
    Q4_K, 41 MB more than without the rule.  The file = the tensors + its metadata (the 128k-token
    tokenizer with its merges: about 10 MB, the same in every file), listed to 0.01 GB: the gap is
    between -5 MB (rounding) and 20 MB in all four."""
    spec = spec_of("llama-3.1-70b")
    g = checkpoint_size(spec, model_ops(spec, Workload()), f"gguf:{mix}")
    assert -5e6 < gb * 1e9 - g.bytes < 20e6


def test_gpt_oss_20b_as_released():
    """gpt-oss-20b's checkpoint: MXFP4 experts, the rest bf16: 12.8 GiB (the gpt-oss model card,
    arXiv:2508.10925, Table 1 "Checkpoint size")."""
    spec = spec_of("gpt-oss-20b")
    c = checkpoint_size(spec, model_ops(spec, Workload()), "mxfp4")
    assert round(c.bytes / 2**30, 1) == 12.8
    assert c.tensors_by_type["mxfp4"] == 3 * spec.n_layers  # expert gate, up and down per layer (GGUF names)
    plan = Planner(spec, load_hardware("rtx-4090"), Deployment(weights="mxfp4")).plan(8192)
    assert plan.weights.bytes == c.bytes and plan.fits  # "runs within 16 GB of memory"


# ---- AWQ / GPTQ / fp8-block ------------------------------------------------------------------
# Llama-2 and CodeLlama shapes from their config.json (hidden, layers, heads, KV heads, intermediate;
# vocabulary 32,000, untied).
def _llama(name, d, layers, heads, kv, d_ff):
    return ModelSpec(name=name, d_model=d, n_layers=layers, vocab_size=32000, max_context=4096,
                     attention={"n_heads": heads, "n_kv_heads": kv}, ffn={"d_ff": d_ff})


LLAMA_SHAPES = {
    "llama-2-7b": spec_of("llama-2-7b"), "mistral-7b": spec_of("mistral-7b-v0.1"),
    "tinyllama-1.1b": _llama("tinyllama-1.1b", 2048, 22, 32, 4, 5632),
    "llama-2-13b": _llama("llama-2-13b", 5120, 40, 40, 40, 13824),
    "codellama-34b": _llama("codellama-34b", 8192, 48, 64, 8, 22016),
    "llama-2-70b": _llama("llama-2-70b", 8192, 80, 64, 8, 28672),
}


def _gb(shape, fmt):
    spec = LLAMA_SHAPES[shape]
    return checkpoint_size(spec, model_ops(spec, Workload()), fmt).bytes / 1e9


@pytest.mark.parametrize("shape, gb, repo", [
    ("llama-2-7b", 3.89, "TheBloke/LlamaGuard-7B-AWQ"),
    ("mistral-7b", 4.15, "TheBloke/Mistral-7B-Instruct-v0.2-AWQ"),
    ("tinyllama-1.1b", 0.77, "TheBloke/TinyLlama-1.1B-Chat-v1.0-AWQ"),
    ("llama-2-13b", 7.25, "TheBloke/LLaMA2-13B-Tiefighter-AWQ"),
    ("llama-2-70b", 36.61, "TheBloke/Upstage-Llama-2-70B-instruct-v2-AWQ"),
])
def test_awq_files_as_their_model_cards_list_them(shape, gb, repo):
    """The "Provided files" table of each repo's README (AutoAWQ, 4 bits, GS 128, GEMM): the size in GB
    (10^9) to two decimals.  Dropping the zero points (0.03 bits per weight) moves every row."""
    assert round(_gb(shape, "awq"), 2) == gb


@pytest.mark.parametrize("shape, fmt, gb, repo", [
    ("llama-2-7b", "gptq", 3.90, "TheBloke/Llama-2-7b-Chat-GPTQ main (4 bits, GS 128, act order no and yes)"),
    ("llama-2-7b", "gptq:g64", 4.02, "TheBloke/Llama-2-7b-Chat-GPTQ gptq-4bit-64g-actorder_True"),
    ("llama-2-7b", "gptq:g32", 4.28, "TheBloke/Llama-2-7b-Chat-GPTQ gptq-4bit-32g-actorder_True"),
    ("llama-2-13b", "gptq", 7.26, "TheBloke/wizard-vicuna-13B-GPTQ main"),
    ("codellama-34b", "gptq", 18.33, "TheBloke/CodeLlama-34B-Instruct-GPTQ main"),
    ("codellama-34b", "gptq:g32", 20.28, "TheBloke/CodeLlama-34B-Instruct-GPTQ gptq-4bit-32g-actorder_True"),
    ("llama-2-70b", "gptq", 36.65, "TheBloke/StableBeluga2-70B-GPTQ gptq-4bit-128g-actorder_False"),
])
def test_gptq_files_as_their_model_cards_list_them(shape, fmt, gb, repo):
    """The same tables for AutoGPTQ files: AWQ's bytes plus g_idx (an int32 per input) and the fp16
    bias AutoGPTQ's make_quant gives every QuantLinear (bias=True); without that bias four of the seven
    rows round 0.01 GB low."""
    assert round(_gb(shape, fmt), 2) == gb


def _mixtral(name, d, layers, heads, kv, d_ff, experts, vocab):
    return ModelSpec(name=name, d_model=d, n_layers=layers, vocab_size=vocab, max_context=4096,
                     attention={"n_heads": heads, "n_kv_heads": kv},
                     ffn={"d_ff": d_ff, "moe": {"n_experts": experts, "top_k": 2, "d_expert": d_ff}})


@pytest.mark.parametrize("make, fmt, total, repo", [
    (lambda: load_model("tests/data/hf/deepseek-v2-lite.json")[0], "awq:g64", 9_084_701_696,
     "TechxGenus/DeepSeek-V2-Lite-AWQ @f96b1c6 (q_group_size 64): MLA projections and every expert quantized"),
    (lambda: _mixtral("fusionnet-34bx2", 7168, 60, 56, 8, 20480, 2, 64000), "awq", 32_955_611_136,
     "TheBloke/FusionNet_34Bx2_MoE-AWQ (Yi-34B layers, two experts, GS 128)"),
    (lambda: _mixtral("kilo-2x8b", 4096, 32, 32, 8, 14336, 2, 128256), "awq", 8_657_051_648,
     "solidrust/Kilo-2x8B-AWQ (Llama-3-8B layers, two experts, GS 128)"),
])
def test_awq_moe_checkpoints_to_the_byte(make, fmt, total, repo):
    """metadata.total_size of each repo's model.safetensors.index.json (the tensor bytes transformers
    writes when it shards a checkpoint, headers excluded): every expert's linears quantized in groups,
    the routers ("gate", AutoAWQ's modules_to_not_convert), the embeddings, lm_head and norms fp16.
    Quantizing the router, or leaving MLA's low-rank projections fp16, moves every total."""
    spec = make()
    assert checkpoint_size(spec, model_ops(spec, Workload()), fmt).bytes == total


def test_a_gptq_file_holds_g_idx_and_a_bias_per_quantized_linear():
    """AutoGPTQ's QuantLinear registers qweight, qzeros, scales, g_idx and (make_quant's bias=True) a
    bias for each of Llama-2-7B's 7 linears in 32 layers: 224 g_idx tensors of K int32 and 224 fp16
    biases of N; the bytes of every op and of every layer add up to the file's."""
    spec = spec_of("llama-2-7b")
    g = checkpoint_size(spec, model_ops(spec, Workload()), "gptq")
    assert g.tensors_by_type["g_idx_i32"] == g.tensors_by_type["zero_bias_f16"] == 7 * 32
    D, F = 4096, 11008  # inputs: q, k, v, o, gate, up read D; down reads F.  Outputs: 4 × D, 2 × F, D
    assert g.bytes_by_type["g_idx_i32"] == 32 * 4 * (6 * D + F)
    assert g.bytes_by_type["zero_bias_f16"] == 32 * 2 * (5 * D + 2 * F)
    assert sum(g.bytes_by_op.values()) == pytest.approx(g.bytes, rel=1e-15)
    assert sum(sum(layers) for layers in g.bytes_by_layer.values()) == pytest.approx(g.bytes, rel=1e-15)


def test_awq_tensor_shapes_of_a_real_checkpoint():
    """TheBloke/Llama-2-7B-AWQ, model.layers.0.mlp.down_proj (AutoAWQ issue #566): qweight [11008, 512]
    I32, qzeros [86, 512] I32, scales [86, 4096] F16; the same for GPTQ plus g_idx [11008] I32 and the
    bias [4096] F16 (AutoGPTQ's QuantLinear buffers)."""
    spec = LLAMA_SHAPES["llama-2-7b"]
    ops = model_ops(spec, Workload())
    awq = {t.name: tensor_bytes(t, kind) for t, kind in checkpoint_types(spec, ops, "awq")}
    assert awq["blk.0.ffn_down.weight"] == 11008 * 512 * 4 + 86 * 512 * 4 + 86 * 4096 * 2
    assert awq["token_embd.weight"] == awq["output.weight"] == 32000 * 4096 * 2  # fp16, not quantized
    gptq, awq_total = (checkpoint_size(spec, ops, f) for f in ("gptq", "awq"))
    per_layer_inputs = 4 * 4096 + 2 * 4096 + 11008  # q, k, v, o, gate, up read 4096; down 11008
    per_layer_outputs = 4 * 4096 + 2 * 11008 + 4096
    assert gptq.bytes - awq_total.bytes == 32 * (4 * per_layer_inputs + 2 * per_layer_outputs)


def test_fp8_block_scales_round_up_per_128_block():
    """DeepSeek-V3 (README_WEIGHTS.md: e4m3, weight_block_size [128, 128], an fp32 weight_scale_inv per
    block; inference/model.py: ceil(out/128) x ceil(in/128) scales).  kv_a_proj_with_mqa is 576 x 7,168:
    5 x 56 scales, since 576 = 4.5 blocks; the router and the embeddings stay bf16."""
    spec = spec_of("deepseek-v3")
    kinds = {t.name: (t, kind) for t, kind in checkpoint_types(spec, model_ops(spec, Workload()), "fp8-block")}
    t, kind = kinds["blk.0.attn_kv_a_mqa.weight"]
    assert kind == "fp8_b128" and tensor_bytes(t, kind) == 576 * 7168 + 5 * 56 * 4
    t, kind = kinds["blk.3.ffn_down_exps.weight"]  # 256 experts of 7,168 x 2,048: 56 x 16 blocks each
    assert tensor_bytes(t, kind) == 256 * (7168 * 2048 + 56 * 16 * 4)
    assert kinds["blk.3.ffn_gate_inp.weight"][1] == kinds["token_embd.weight"][1] == "bf16"


def test_nvfp4_tensors_as_vllm_allocates_them():
    """ModelOpt NVFP4 (vLLM's ModelOptNvFp4LinearMethod.create_weights): weight uint8 [N, K/2],
    weight_scale float8_e4m3fn [N, K/16], weight_scale_2 and input_scale fp32 scalars.  Llama-3.1-8B's
    q_proj (4,096 × 4,096): 8,388,608 + 1,048,576 + 8 bytes; the model cards: "only the weights and
    activations of the linear operators within transformers blocks are quantized", so 7 × 32 = 224
    NVFP4 tensors and 67 bf16 ones (token_embd, output, 65 norms): 6,027,749,120 bytes."""
    spec = spec_of("llama-3.1-8b")
    c = checkpoint_size(spec, model_ops(spec, Workload()), "nvfp4")
    kinds = {t.name: (t, kind) for t, kind in checkpoint_types(spec, model_ops(spec, Workload()), "nvfp4")}
    t, kind = kinds["blk.0.attn_q.weight"]
    assert kind == "nvfp4_g16" and tensor_bytes(t, kind) == 4096 * 4096 // 2 + 4096 * 4096 // 16 + 8
    assert c.tensors_by_type == {"nvfp4_g16": 224, "bf16": 67}
    layers = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    assert c.bytes == layers // 2 + layers // 16 + 224 * 8 + 2 * 128256 * 4096 * 2 + 65 * 4096 * 2 == 6_027_749_120
    moe = spec_of("qwen3-30b-a3b")  # the routers (TensorRT-LLM's NVFP4 default exclude: '*.mlp.gate') stay bf16
    kinds = {t.name: kind for t, kind in checkpoint_types(moe, model_ops(moe, Workload()), "nvfp4")}
    assert kinds["blk.0.ffn_gate_inp.weight"] == "bf16" and kinds["blk.0.ffn_down_exps.weight"] == "nvfp4_g16"


def test_a_quantization_config_names_its_weights_format():
    """config.json's quantization_config is not read into the sizes; the mapping names the --weights
    that sizes the checkpoint: ModelOpt's {"quant_method": "modelopt", "quant_algo": "NVFP4"} and
    llm-compressor's compressed-tensors "nvfp4-pack-quantized" -> nvfp4."""
    import json
    from pathlib import Path

    from archcalc.spec.hf import spec_dict_from_config

    base = json.loads((Path(__file__).parents[1] / "data" / "hf" / "llama-3.1-8b.json").read_text())
    for q in ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16},
              {"quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized"}):
        _, report = spec_dict_from_config({**base, "quantization_config": q}, "c.json")
        assert any("--weights nvfp4" in why for why in report.ignored.values()), report.ignored


@pytest.mark.parametrize("fmt", ["awq", "gptq:g32", "fp8-block", "nvfp4"])
def test_fit_loads_the_grouped_formats(fmt):
    spec = spec_of("llama-3.1-8b")
    c = checkpoint_size(spec, model_ops(spec, Workload()), fmt)
    plan = Planner(spec, load_hardware("rtx-4090"), Deployment(weights=fmt)).plan(8192)
    assert plan.weights.bytes == c.bytes
    r = CliRunner().invoke(cli, ["size", "llama-3.1-8b", "--weights", fmt, "--json"])
    assert r.exit_code == 0 and f'"format": "{fmt}"' in r.stdout


def test_llama_cpp_keeps_the_token_embedding_of_a_gguf_on_the_host():
    """Ollama's Phi-3-mini Q4_0 (llama.cpp's loader, offloading 33/33 layers; 3,072 wide, 32 layers,
    FFN 8,192, vocabulary 32,064): "type f32: 67 tensors, type q4_0: 129 tensors, type q6_K: 1
    tensors", "CPU_Mapped model buffer size = 52.84 MiB" (token_embd, q4_0: 32,064 × 3,072 × 18/32 B)
    and "Metal_Mapped model buffer size = 2021.82 MiB" (everything else).  The GGUF fuses q/k/v and
    gate/up as Phi-3's checkpoint does (129 = 4 per layer + token_embd).  f32: 65 here, the file's 2
    more are rope_factors_long/short (LongRoPE buffers)."""
    spec = spec_of("phi-3-mini-4k")  # the 128k model's tensors are the same
    c = checkpoint_size(spec, model_ops(spec, Workload()), "gguf:Q4_0")
    assert c.tensors_by_type == {"q4_0": 129, "q6_K": 1, "f32": 65}
    plan = Planner(spec, load_hardware("rtx-4090"), Deployment(engine="llamacpp", weights="gguf:Q4_0")).plan(4096)
    assert round(plan.weights.bytes / 2**20, 2) == 2021.82
    assert round((c.bytes - plan.weights.bytes) / 2**20, 2) == 52.84
    # two GPUs (-sm layer): 33 slots, il < 16.5 on GPU 0 (17 layers); the other 15, the output and its
    # norm on GPU 1; every layer of the file is the same size
    two = Planner(spec, load_hardware("rtx-4090"), Deployment(engine="llamacpp", weights="gguf:Q4_0", gpus=2))
    head = c.bytes_by_op[len(model_ops(spec, Workload())) - 1] + 3072 * 4  # output (q6_K) + output_norm (f32)
    layer = (plan.weights.bytes - head) / 32
    assert [p.weights.bytes for p in two.stages] == pytest.approx([17 * layer, 15 * layer + head], rel=1e-12)


# ---- llama.cpp's own logs and the files' own sizes ------------------------------------------------
# Each log's "- type X: N tensors" lines and its "file size" / "model size" line (llama.cpp prints
# MiB below 1 GiB, GiB above, 2 decimals; ik_llama.cpp 3), read from the code-search index (ids):
# - Pythia-1.4B and 2.8B (gptneox, fused attn_qkv), ggml-org/ci, build 4644 (b004e0bc):
#   pythia_1_4b-tg-q4_k.log 25152821665, -q5_k 25960412243, pythia_1_4b.log (Q8_0) 25388200082,
#   README (Q4_0) 25774940549; pythia_2_8b-tg-q4_k.log 25508097008, -q5_k 25429690300, Q8_0
#   26065487907, Q4_0 25373395677;
# - microsoft's Phi-3-mini-4k-instruct-q4.gguf (Q4_K_M): three logs (40036224939, 68635202314,
#   55054072975);
# - DeepSeek-Coder-V2-Lite-Instruct Q4_K_M (deepseek2, DeepSeek-V2-Lite's shapes): 35807442239, and
#   ik_llama.cpp issue #230 (17381435761): "model size = 9.649 GiB (5.277 BPW)";
# - unsloth's Qwen3-30B-A3B Q4_K_M (an imatrix file; imatrix moves no type of this mix): 17521272204;
# - TheBloke's Llama-2-7B Q4_K_M (10256536219); Q4_0 and Q8_0 (danbev/learning-ai,
#   fundamentals/llama.cpp/README.md); Mistral-7B-Instruct-v0.1 Q4_K_M (llama.cpp's SYCL README,
#   6459856004); Ollama's Llama-3.1-8B-Instruct Q4_K_M (48629668660; its 66th f32 is rope_freqs);
# - a StarCoder 15B Q5_K_M (osukhoroslov-hw/starcoder-Q5_K_M-GGUF, build 3892, 14594768867): 40
#   layers, 6,144 wide, MQA, an untied head (15.82 B parameters), the position table F32.
def _pythia(d_model: int, n_layers: int, heads: int) -> ModelSpec:
    base = spec_of("pythia-6.9b")  # EleutherAI's config.json files: vocabulary 50,304, FFN 4·D
    return _shaped(base, d_model=d_model, n_layers=n_layers, vocab_size=50304,
                   ffn={**base.ffn.model_dump(), "d_ff": 4 * d_model},
                   attention={**base.attention.model_dump(), "n_heads": heads, "n_kv_heads": heads})


def _starcoder_15b() -> ModelSpec:
    base = load_model("tests/data/hf/gpt_bigcode-santacoder.json")[0]  # bigcode/starcoder's config.json shape
    return _shaped(base, d_model=6144, n_layers=40, vocab_size=49152, max_context=8192, tie_embeddings=False,
                   ffn={**base.ffn.model_dump(), "d_ff": 24576},
                   attention={**base.attention.model_dump(), "n_heads": 48, "n_kv_heads": 1})


LOGS = {
    "pythia-1.4b Q4_K_M": (lambda: _pythia(2048, 24, 16), {"f32": 194, "q4_K": 61, "q5_K": 24, "q6_K": 13},
                           "871.81 MiB (5.17 BPW)"),
    "pythia-1.4b Q5_K_M": (lambda: _pythia(2048, 24, 16), {"f32": 194, "q5_K": 61, "q6_K": 37}, "1006.35 MiB (5.97 BPW)"),
    "pythia-1.4b Q8_0": (lambda: _pythia(2048, 24, 16), {"f32": 194, "q8_0": 98}, "1.40 GiB (8.51 BPW)"),
    "pythia-1.4b Q4_0": (lambda: _pythia(2048, 24, 16), {"f32": 194, "q4_0": 97, "q6_K": 1}, "786.31 MiB (4.66 BPW)"),
    "pythia-2.8b Q4_K_M": (lambda: _pythia(2560, 32, 32), {"f32": 258, "q4_K": 81, "q5_K": 32, "q6_K": 17},
                           "1.66 GiB (5.14 BPW)"),
    "pythia-2.8b Q5_K_M": (lambda: _pythia(2560, 32, 32), {"f32": 258, "q5_K": 81, "q6_K": 49}, "1.93 GiB (5.96 BPW)"),
    "pythia-2.8b Q8_0": (lambda: _pythia(2560, 32, 32), {"f32": 258, "q8_0": 130}, "2.75 GiB (8.51 BPW)"),
    "pythia-2.8b Q4_0": (lambda: _pythia(2560, 32, 32), {"f32": 258, "q4_0": 129, "q6_K": 1}, "1.49 GiB (4.61 BPW)"),
    "phi-3-mini-4k Q4_K_M": (lambda: spec_of("phi-3-mini-4k"), {"f32": 65, "q4_K": 81, "q5_K": 32, "q6_K": 17},
                             "2.23 GiB (5.01 BPW)"),
    "deepseek-v2-lite Q4_K_M": (lambda: load_model("tests/data/hf/deepseek-v2-lite.json")[0],
                                {"f32": 108, "q5_0": 14, "q8_0": 13, "q4_K": 229, "q6_K": 13}, "9.65 GiB (5.28 BPW)"),
    "qwen3-30b-a3b Q4_K_M": (lambda: spec_of("qwen3-30b-a3b"), {"f32": 241, "q4_K": 289, "q6_K": 49},
                             "17.28 GiB (4.86 BPW)"),
    "llama-2-7b Q4_K_M": (lambda: spec_of("llama-2-7b"), {"f32": 65, "q4_K": 193, "q6_K": 33}, "3.80 GiB (4.84 BPW)"),
    "llama-2-7b Q4_0": (lambda: spec_of("llama-2-7b"), {"f32": 65, "q4_0": 225, "q6_K": 1}, "3.56 GiB (4.54 BPW)"),
    "llama-2-7b Q8_0": (lambda: spec_of("llama-2-7b"), {"f32": 65, "q8_0": 226}, "6.67 GiB (8.50 BPW)"),
    "mistral-7b Q4_K_M": (lambda: spec_of("mistral-7b-v0.1"), {"f32": 65, "q4_K": 193, "q6_K": 33},
                          "4.07 GiB (4.83 BPW)"),
    "llama-3.1-8b Q4_K_M": (lambda: spec_of("llama-3.1-8b"), {"f32": 66 - 1, "q4_K": 193, "q6_K": 33},
                            "4.58 GiB (4.89 BPW)"),
    "starcoder-15b Q5_K_M": (_starcoder_15b, {"f32": 323, "q5_K": 101, "q6_K": 61}, "10.90 GiB (5.92 BPW)"),
}


def _llama_cpp_size(c) -> str:
    gib = c.bytes / 2**30
    return f"{c.bytes / 2**20:.2f} MiB ({c.bits_per_weight:.2f} BPW)" if gib < 1 else f"{gib:.2f} GiB ({c.bits_per_weight:.2f} BPW)"


@pytest.mark.parametrize("name", sorted(LOGS))
def test_llama_cpp_logs_tensor_types_and_file_size(name):
    make, counts, line = LOGS[name]
    spec = make()
    c = checkpoint_size(spec, model_ops(spec, Workload()), f"gguf:{name.rsplit(' ', 1)[1]}")
    assert (c.tensors_by_type, _llama_cpp_size(c)) == (counts, line)


def test_ik_llama_cpp_s_three_decimals_of_deepseek_v2_lite():
    spec = load_model("tests/data/hf/deepseek-v2-lite.json")[0]
    c = checkpoint_size(spec, model_ops(spec, Workload()), "gguf:Q4_K_M")
    assert (f"{c.bytes / 2**30:.3f}", f"{c.bits_per_weight:.3f}", f"{c.elements / 1e9:.3f}") == ("9.649", "5.277", "15.706")


# Whole files' byte sizes (samyfodil/jitllm internal/testmodels/fetch.sh, id 70908152962: each
# download sha256-checked): a GGUF is its tensors plus a metadata header, mostly the tokenizer's
# vocabulary and merges (0.7 to 4.1 MB here), so each file exceeds its tensors by under 5 MB.
FILES = {
    "tiiuae falcon-mamba-7B-Q4_K_M": (lambda: load_model("tests/data/hf/falcon-mamba-7b.json")[0], "Q4_K_M", 4204230432),
    "mamba-codestral-7b-v0.1-q4_k_m": (lambda: load_model("tests/data/hf/mamba-codestral-7b.json")[0], "Q4_K_M",
                                       4147481568),
    "allenai olmoe-1b-7b-0924-instruct-q4_k_m": (lambda: spec_of("olmoe-1b-7b"), "Q4_K_M", 4213512672),
    "mradermacher DeepSeek-V2-Lite.Q4_K_M": (lambda: load_model("tests/data/hf/deepseek-v2-lite.json")[0], "Q4_K_M",
                                             10364416736),
    # falcon-7b-instruct's checkpoint stores lm_head beside the tied embedding: the file has both
    "mradermacher falcon-7b-instruct.Q4_K_M": (lambda: _shaped(spec_of("falcon-7b"), tie_embeddings=False), "Q4_K_M",
                                               4975127552),
    "bartowski Mistral-7B-Instruct-v0.3-Q4_K_M": (lambda: _shaped(spec_of("mistral-7b-v0.1"), vocab_size=32768),
                                                  "Q4_K_M", 4372812000),
    "Phi-3.5-mini-instruct-Q4_K_M": (lambda: spec_of("phi-3-mini-4k"), "Q4_K_M", 2393232672),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_gguf_files_are_their_tensors_plus_a_few_mb_of_metadata(name):
    make, mix, file_bytes = FILES[name]
    spec = make()
    c = checkpoint_size(spec, model_ops(spec, Workload()), f"gguf:{mix}")
    assert 0 < file_bytes - c.bytes < 5e6



# ---- every architecture's tensor list, against llama.cpp's and the tools' conventions ---------------------

HF_CONFIGS = sorted(p.name for p in Path("tests/data/hf").glob("*.json"))


def _all_tensors(source):
    spec = spec_of(source) if not source.endswith(".json") else load_model(f"tests/data/hf/{source}")[0]
    return spec, tensors(spec, model_ops(spec, Workload()))


def _llama_cpp_category(name: str) -> str:
    """llama-quant.cpp's choice of rule by tensor name (llama_tensor_get_type_impl's name.find checks,
    read at commit 007dbbf): output, token_embd, then the substrings below, in this order; anything
    else is "other".  ffn_gate_inp (the router) is never quantized (`quantize &= name.find(
    "ffn_gate_inp.weight") == npos`), and 1-D tensors stay F32, so neither reaches the rules."""
    for sub, category in (("attn_qkv.weight", "attn_qkv"), ("attn_kv_b.weight", "attn_kv_b"),
                          ("attn_v.weight", "attn_v"), ("attn_k.weight", "attn_k"), ("attn_q.weight", "attn_q"),
                          ("attn_output.weight", "attn_output"), ("ffn_down", "ffn_down"),
                          ("ffn_gate", "ffn_gate"), ("ffn_up", "ffn_up")):
        if sub in name:
            return category
    return {"output.weight": "output", "token_embd.weight": "token_embd"}.get(name, "other")


@pytest.mark.parametrize("source", [*BUNDLED, *HF_CONFIGS])
def test_every_tensor_is_named_and_ruled_as_llama_cpp_and_gguf_do(source):
    """For every bundled spec and real config: the rule a tensor gets is the one llama.cpp picks from
    its name (F32 exactly for the 1-D tensors and the routers); names are unique (gguf-py's
    GGUFWriter.add_tensor_info raises "Duplicated tensor name"); every name ends in .weight or .bias
    and every bias sits beside the weight of the same stem (gguf's "{name}.weight" / "{name}.bias");
    the tensors hold every parameter (torch's numel of the model: the `size` total, pinned against
    transformers in tests/spec)."""
    spec, ts = _all_tensors(source)
    for t in ts:
        is_router = "ffn_gate_inp" in t.name
        assert (t.role == "f32") == (t.row == 0 or is_router), t
        if t.role != "f32":
            assert t.role == _llama_cpp_category(t.name), t
    names = [t.name for t in ts]
    assert len(names) == len(set(names))
    # blk.N. names the block a tensor sits in, and only a block's tensors have one (llama.cpp's
    # LLM_TENSOR_OUTPUT_NORM is "output_norm", BLOOM's embedding norm "token_embd_norm")
    assert all(t.name.startswith(f"blk.{t.layer}.") if t.layer is not None else not t.name.startswith("blk.")
               for t in ts)
    assert "output_norm.weight" in names or not (spec.norm.final and spec.norm.weight)  # OLMo-1B: no weight
    assert all(n.endswith((".weight", ".bias")) for n in names)
    assert {n.removesuffix(".bias") for n in names if n.endswith(".bias")} <= {n.removesuffix(".weight") for n in names}
    assert all(type(t.elements) is int for t in ts), [t for t in ts if type(t.elements) is not int][:3]  # a count
    assert sum(t.elements for t in ts) == size(spec, Workload(), CONVENTIONS["causal"]).params.total \
        == checkpoint_size(spec, model_ops(spec, Workload()), "gguf:Q8_0").elements


def test_gptq_biases_only_where_the_model_has_none():
    """Qwen2.5-0.5B's q/k/v projections carry biases (config: attention bias on q, k, v): AutoGPTQ's
    QuantLinear keeps those, and gives the other 4 linears of each of the 24 layers a zero fp16 bias
    of N: 4 × 24 zero biases beside 7 × 24 g_idx."""
    spec = spec_of("qwen2.5-0.5b")
    g = checkpoint_size(spec, model_ops(spec, Workload()), "gptq")
    assert g.tensors_by_type["g_idx_i32"] == 7 * 24 and g.tensors_by_type["zero_bias_f16"] == 4 * 24
    D, F = 896, 4864  # zero biases: o (D), gate and up (F), down (D)
    assert g.bytes_by_type["zero_bias_f16"] == 24 * 2 * (2 * D + 2 * F)


def test_gptq_extras_per_expert_matrix():
    """An MoE GPTQ file (AutoGPTQ's Mixtral support quantizes every expert's w1/w2/w3 as its own
    QuantLinear): g_idx of K int32 and a zero bias of N fp16 per expert matrix, none for the router.
    Llama-3-8B layers with two experts: per layer 4 attention matrices + 2 × 3 expert ones."""
    spec = _mixtral("kilo-2x8b", 4096, 32, 32, 8, 14336, 2, 128256)
    g = checkpoint_size(spec, model_ops(spec, Workload()), "gptq")
    D, F, kv = 4096, 14336, 1024
    assert g.tensors_by_type["g_idx_i32"] == g.tensors_by_type["zero_bias_f16"] == 32 * (4 + 3)  # a 3-D tensor each
    assert g.bytes_by_type["g_idx_i32"] == 32 * 4 * (4 * D + 2 * (2 * D + F))
    assert g.bytes_by_type["zero_bias_f16"] == 32 * 2 * (2 * D + 2 * kv + 2 * (2 * F + D))


def test_gptq_scale_rows_round_up_when_the_group_does_not_divide_the_inputs():
    """AutoGPTQ's QuantLinear: scales (math.ceil(infeatures / group_size), outfeatures) fp16 and qzeros
    (ceil(K/G), N/8) int32.  Falcon-7B's 4,544-wide inputs are 35.5 groups of 128: 36 scale rows.  Its
    query_key_value (4,544 → 4,672): 4,544 × 4,672 / 2 + 36 × 4,672 × 2.5 bytes, then g_idx and the
    bias AutoGPTQ adds (Falcon-7B's linears have none)."""
    spec = spec_of("falcon-7b")
    qkv = next(t for t, kind in checkpoint_types(spec, model_ops(spec, Workload()), "gptq")
               if t.name == "blk.0.attn_qkv.weight")
    assert tensor_bytes(qkv, "int4_g128") == 4544 * 4672 // 2 + 36 * 4672 * 2.5


def test_nvfp4_experts_carry_two_scalars_each():
    """vLLM's ModelOptNvFp4FusedMoE.create_weights: w13_weight [E, 2I, D/2] uint8, w13_weight_scale
    [E, 2I, D/16] e4m3, w13_weight_scale_2 and w13_input_scale [E, 2] fp32 (one per expert and
    matrix), w2 alike with [E] scalars.  Qwen3-30B-A3B's ffn_down_exps: 128 experts of 768 → 2,048."""
    spec = spec_of("qwen3-30b-a3b")
    down = next(t for t, kind in checkpoint_types(spec, model_ops(spec, Workload()), "nvfp4")
                if t.name == "blk.0.ffn_down_exps.weight")
    assert tensor_bytes(down, "nvfp4_g16") == 128 * (2048 * 768 // 2 + 2048 * 768 // 16 + 2 * 4)


def test_llama_cpp_s_rules_see_experts_only_through_n_expert_above_one():
    """In llama_tensor_get_type_impl the layer of an ffn_down is the name's when n_expert > 1 and a
    counter of ffn_down tensors otherwise; nothing else reads the expert count except the n_expert ==
    8 rules.  So a DeepSeek-V2-Lite with 2 routed experts quantizes every ffn_down as the released
    64-expert file does (pinned by its llama.cpp log above), though its counter runs ahead of the
    layer (layer 0's dense ffn_down, then each layer's routed and shared ones)."""
    real = load_model("tests/data/hf/deepseek-v2-lite.json")[0]
    two = _shaped(real, ffn={**real.ffn.model_dump(), "moe": {**real.ffn.moe.model_dump(), "n_experts": 2, "top_k": 2}})
    assert {n: k for n, k in types(two, "Q4_K_M").items() if "ffn_down" in n} == \
        {n: k for n, k in types(real, "Q4_K_M").items() if "ffn_down" in n}


def test_falcon_40b_divides_its_layers_as_c_does():
    """Falcon-40B (60 layers): llama.cpp's i_layer < n_layer/16 is integer division, 60/16 = 3, so
    layers 0-2 get Q6_K and layer 3 the use_more_bits Q5_K (3 < 60/8); its output (tied: token_embd,
    8,192 wide, rows that Q6_K divides) is Q8_0 all the same, Falcon's own rule."""
    kinds = types(spec_of("falcon-40b"), "Q4_K_M")
    assert [kinds[f"blk.{i}.ffn_down.weight"] for i in range(5)] == ["q6_K", "q6_K", "q6_K", "q5_K", "q5_K"]
    assert kinds["token_embd.weight"] == "q8_0" and "output.weight" not in kinds


def test_nvfp4_refuses_inputs_that_are_not_whole_groups(tmp_path):
    """vLLM's ModelOptNvFp4LinearMethod.create_weights raises "Unsupported model when in features size
    is not multiple of 16": a debug model with d_ff 180 (its down projection reads 180 = 11.25 groups)
    gets one line naming the tensor, exit 2, through `size` too; 176 is whole groups."""
    import yaml

    ok = spec_of("debug")
    checkpoint_size(ok, model_ops(ok, Workload()), "nvfp4")
    odd = _shaped(ok, ffn={**ok.ffn.model_dump(), "d_ff": 180})
    with pytest.raises(InputError, match=r"^debug: --weights: nvfp4 needs inputs in multiples of 16; "
                                         r"blk\.0\.ffn_down\.weight reads 180$"):
        checkpoint_size(odd, model_ops(odd, Workload()), "nvfp4")
    path = tmp_path / "odd.yaml"
    path.write_text(yaml.safe_dump({**yaml.safe_load(open("specs/debug.yaml")), "ffn": {"activation": "swiglu",
                                                                                       "d_ff": 180}}))
    r = CliRunner().invoke(cli, ["size", str(path), "--weights", "nvfp4"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1 and "multiples of 16" in r.output
