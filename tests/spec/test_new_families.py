"""What the released files of GLM-5 (glm_moe_dsa), MiMo-V2-Flash (mimo_v2_flash) and Kimi Linear (kimi_linear) say beyond what
transformers reads, and their bad inputs.  Their counts are pinned on transformers' modules with every
other fixture (tests/spec/test_hf_oracle.py); here: the published totals, the remote-code keys checked
against what transformers builds, and one clear line, exit status 2, for each file that disagrees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from archcalc.cli import cli
from archcalc.spec.catalog import load_model

DATA = Path(__file__).parents[1] / "data" / "hf"


def _raw(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def _write(raw: dict, folder: Path) -> Path:
    """`raw` as the config.json of `folder`."""
    path = folder / "config.json"
    path.write_text(json.dumps(raw))
    return path


def _refused_in_one_line(path: Path, message: str) -> None:
    """`archcalc size` of the file: exit status 2 and one line naming the field, no traceback."""
    r = CliRunner().invoke(cli, ["size", str(path)])
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1


def test_mimo_v2_flash_is_its_published_309b_with_15b_active():
    """Xiaomi's model card: 309B total, 15B active (the MTP blocks, 0.33B each, are not in config.json)."""
    from archcalc.api import size

    result = size(str(DATA / "mimo-v2-flash.json"))
    assert round(result.params.total / 1e9) == 309 and round(result.params.active / 1e9) == 15


def test_kimi_linear_is_its_published_48b():
    """Moonshot's model card: 48B total, 3B active.  transformers' numel (= archcalc's total) is
    49,122,675,072; the checkpoint's 49,122,681,728 adds the routers' e_score_correction_bias buffers
    (256 × 26 MoE layers), which are not parameters.  archcalc's active count includes the embedding and
    head (0.75B): 2.73B without them."""
    from archcalc.api import size

    params = size(str(DATA / "kimi-linear-48b-a3b.json")).params
    assert params.total + 256 * 26 == 49_122_681_728 and round(params.total / 1e9) == 49
    assert round((params.active - params.embedding - params.by_component["lm_head"]) / 1e9) == 3


def test_kimi_linear_layers_from_its_1_indexed_lists():
    """linear_attn_config lists layers from 1: full_attn_layers [4, 8, ..., 27] are layers 3, 7, ..., 26;
    the 20 others run Kimi Delta Attention, whose state replaces a cache: a fixed 32 × 128 × 128 fp32
    state and 3 conv columns of q, k, v per layer and sequence."""
    spec, _ = load_model(str(DATA / "kimi-linear-48b-a3b.json"))
    assert [i for i, k in enumerate(spec.layer_attention) if k == "global"] == [3, 7, 11, 15, 19, 23, 26]
    assert (spec.linear.kind, spec.linear.n_heads, spec.linear.head_dim, spec.position.kind) == ("kda", 32, 128, "none")


def test_mimo_v2_flash_sliding_layers_have_twice_the_kv_heads_and_the_sinks():
    """MiMoV2FlashAttention: a sliding layer has 2 × num_key_value_heads KV heads and a sink per query
    head; a global one neither; values are 128 wide under 192-wide keys; the window is
    sliding_window_size + 1 (the query and 128 before it)."""
    spec, report = load_model(str(DATA / "mimo-v2-flash.json"))
    a = spec.attention
    assert (a.n_kv_heads, a.global_kv_heads, a.head_dim, a.v_head_dim, a.sliding_window) == (8, 4, 192, 128, 129)
    assert a.sinks and not a.global_sinks and spec.rope_dim == 64
    assert spec.layer_attention.count("global") == 9 and report.used["hybrid_layer_pattern"]


@pytest.mark.parametrize("name, change, message", [
    ("mimo-v2-flash", {"swa_num_key_value_heads": 4}, "swa_num_key_value_heads: must be 8"),
    ("mimo-v2-flash", {"swa_head_dim": 128}, "swa_head_dim: must be 192"),
    ("mimo-v2-flash", {"hybrid_layer_pattern": [1] * 48}, "hybrid_layer_pattern: disagrees with what transformers"),
    ("mimo-v2-flash", {"hybrid_layer_pattern": [2] * 48}, "hybrid_layer_pattern[0]: 2 is not valid"),
    ("mimo-v2-flash", {"moe_layer_freq": [1] * 48}, "moe_layer_freq: disagrees with what transformers"),
    ("mimo-v2-flash", {"swa_rope_theta": 20000}, "swa_rope_theta: disagrees with rope_parameters"),
    ("mimo-v2-flash", {"partial_rotary_factor": 0.5}, "partial_rotary_factor must be one share"),
    ("mimo-v2-flash", {"add_full_attention_sink_bias": True}, "add_full_attention_sink_bias: must be false"),
    ("mimo-v2-flash", {"n_shared_experts": 1}, "n_shared_experts: transformers' MiMo-V2-Flash has no shared"),
    ("mimo-v2-flash", {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling: not read"),
    ("kimi-linear-48b-a3b", {"mla_use_nope": False}, "mla_use_nope: must be true"),
    ("kimi-linear-48b-a3b", {"moe_layer_freq": 2}, "moe_layer_freq: must be 1"),
    ("kimi-linear-48b-a3b", {"linear_attn_config": {"full_attn_layers": [0], "kda_layers": [1]}},
     "linear_attn_config.full_attn_layers[0]: 0 is not valid; expected an integer (layers count from 1) from 1"),
    ("kimi-linear-48b-a3b", {"linear_attn_config": {"full_attn_layers": [28], "kda_layers": [1]}},
     "linear_attn_config.full_attn_layers: layer 28 of 27 (1-indexed)"),
    ("kimi-linear-48b-a3b", {"linear_attn_config": {"full_attn_layers": [4], "kda_layers": [1, 2, 3]}},
     "linear_attn_config: 27 layers, each full_attention or linear_attention"),
    ("kimi-linear-48b-a3b", {"linear_attn_config": {"num_heads": "32"}}, "linear_attn_config.num_heads: '32' is not"),
    ("kimi-linear-48b-a3b", {"attention_bias": True}, "attention_bias: biases on MLA projections"),
    ("glm-5", {"indexer_types": ["shared"] + ["full"] * 77}, "indexer_types: layer 0 must be full"),
    ("glm-5", {"indexer_types": ["full"] * 77}, "indexer_types: 78 entries of full or shared expected"),
    ("glm-5", {"index_topk_pattern": "FSX" + "F" * 75}, "index_topk_pattern: a string of F (full) and S"),
    ("glm-5", {"index_topk_freq": "2"}, "index_topk_freq: '2' is not valid"),
])
def test_bad_configs_are_one_line(tmp_path, name, change, message):
    _refused_in_one_line(_write({**_raw(name), **change}, tmp_path), message)


@pytest.mark.parametrize("change, shared", [
    ({"index_topk_pattern": "FSSF" * 19 + "FS"}, [i for i in range(78) if ("FSSF" * 19 + "FS")[i] == "S"]),
    ({"index_topk_freq": 4, "index_skip_topk_offset": 2},  # GlmMoeDsaConfig: full when max(i - 1, 0) % 4 == 0
     [i for i in range(78) if max(i - 1, 0) % 4]),
    ({"indexer_types": ["full"] * 78, "index_topk_freq": 4}, None),  # the list wins, as in GlmMoeDsaConfig
])
def test_glm5_indexer_sharing_as_glm_moe_dsa_config_derives_it(tmp_path, change, shared):
    from transformers import AutoConfig

    raw = {**_raw("glm-5"), **change}
    config = AutoConfig.for_model("glm_moe_dsa", **{k: v for k, v in raw.items() if k != "model_type"})
    theirs = [i for i, t in enumerate(config.indexer_types) if t == "shared"] or None
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    assert load_model(str(path))[0].attention.indexer.shared_layers == theirs == (shared or None)


def test_gpt1_is_its_published_117m_post_ln_without_a_final_norm():
    """GPT-1 (openai-gpt): "117M parameters"; post-LN blocks, no final norm, learned positions, a tied head."""
    from archcalc.api import size

    spec, _ = load_model(str(DATA / "openai-gpt.json"))
    assert (spec.norm.placement, spec.norm.final, spec.position.kind, spec.tie_embeddings) == ("post", False, "learned", True)
    assert round(size(spec).params.total / 1e6) == 117


def test_bitnet_is_the_dumped_2_412_820_480_with_its_sub_norms():
    """BitNet b1.58 2B4T: a dump of its -bf16 weights counts 2,412,820,480 parameters (tied embedding once);
    its MLP is relu(gate)² ⊙ up with a norm over F before down, its attention a norm over H·d before o_proj,
    and its packed ternary checkpoint is said to be sized at --dtype."""
    from archcalc.api import size

    spec, report = load_model(str(DATA / "bitnet-b1.58-2b-4t.json"))
    assert (spec.ffn.activation, spec.ffn.sub_norm, spec.attention.sub_norm) == ("relu2glu", True, True)
    assert size(spec).params.total == 2_412_820_480
    assert "ternary weights packed" in report.ignored["quantization_config"]


def test_longcat_flash_is_its_published_560b_with_an_upper_bound_on_active():
    """LongCat-Flash: "560B total, 18.6B-31.3B active (about 27B on average)", the active count depending on
    how many of a token's 12 slots go to the 256 zero experts; archcalc counts 12 real experts, an upper bound
    (with the embedding and head it is 32.2B), and reads the 28 blocks as 56 layers, MoE on the even ones."""
    from archcalc.api import size

    spec, _ = load_model(str(DATA / "longcat-flash-chat.json"))
    params = size(spec).params
    assert params.total // 10**9 == 560 and spec.n_layers == 56  # 560.66B, "560B" as the report cuts it and spec.ffn.moe.layers == list(range(0, 56, 2))
    assert spec.ffn.moe.zero_experts == 256 and 31.3e9 < params.active < 33e9


def test_laguna_heads_per_kind_gate_per_head_and_rope_per_kind():
    """Laguna XS.2: 48 query heads on its full layers and 64 on its sliding ones (num_attention_heads_per_layer),
    a softplus gate per head (g_proj, D -> H), RoPE on half the dims of full layers and all of sliding ones; its
    experts' router bias an nn.Parameter.  33,442,617,088 parameters = transformers' numel (test_hf_oracle.py)."""
    spec, _ = load_model(str(DATA / "laguna-xs.2-fp8.json"))
    a, p = spec.attention, spec.position
    assert (a.n_heads, a.local_heads, a.head_gate, p.rotary_fraction, p.local_rotary_fraction) == \
        (48, 64, "softplus", 0.5, 1.0)
    assert {g.suffix: g.n_heads for g in spec.attention_groups} == {"": 64, ".global": 48}


@pytest.mark.parametrize("change, message", [
    ({"gating": "per-element"}, "gating: only the per-head gate"),
    ({"num_attention_heads_per_layer": [48] * 39 + [64]}, "num_attention_heads_per_layer: 40 entries, one head count"),
    ({"moe_apply_router_weight_on_input": True}, "moe_apply_router_weight_on_input: must be false"),
    ({"partial_rotary_factor": 1.0}, "partial_rotary_factor: disagrees with rope_parameters.full_attention"),
    ({"gating": 1}, "gating: 1 is not valid"),
])
def test_bad_laguna_configs_are_one_line(tmp_path, change, message):
    _refused_in_one_line(_write({**_raw("laguna-xs.2-fp8"), **change}, tmp_path), message)


def test_mellum_without_layer_types_is_every_layer_global():
    """MellumConfig fills layer_types with full_attention when a file leaves it out, whatever sliding_window
    says: a Mellum file without the list is every layer global, as transformers builds it."""
    from transformers import AutoConfig

    from archcalc.spec.hf import spec_dict_from_config

    raw = {k: v for k, v in json.loads(AutoConfig.for_model("mellum").to_json_string()).items() if k != "layer_types"}
    config = AutoConfig.for_model("mellum", **{k: v for k, v in raw.items() if k != "model_type"})
    data, _ = spec_dict_from_config(raw, "config.json")
    assert set(config.layer_types) == {"full_attention"} and "sliding_window" not in data["attention"]


@pytest.mark.parametrize("change, message", [
    ({"output_vocab_size": 300000}, "head_vocab_size (300000) must be at most vocab_size (266752)"),
    ({"output_vocab_size": 131072, "tie_word_embeddings": True}, "must be at most vocab_size (266752) and the head untied"),
])
def test_apertus_1p5_pruned_head_bad_configs_are_one_line(tmp_path, change, message):
    """Apertus 1.5's head keeps the first output_vocab_size ids of its 266,752 (131,072 in the 8B file): fewer
    logits than embedding rows, never tied; transformers' numel of the file is archcalc's (test_hf_oracle.py)."""
    raw = _raw("apertus-v1.5-8b")
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**raw, "text_config": {**raw["text_config"], **change}}))
    _refused_in_one_line(path, message)
    spec, _ = load_model(str(DATA / "apertus-v1.5-8b.json"))
    assert (spec.head_vocab, spec.vocab_size) == (131072, 266752)


@pytest.mark.parametrize("change, message", [
    ({"attention_bias": True}, "attention_bias: true is not modelled"),
    ({"layer_types": ["full_attention"] * 51}, "layer_types: 52 entries of full_attention or sliding_attention"),
    ({"mlp_layer_types": ["moe"] * 52}, "mlp_layer_types: 52 entries of dense or sparse"),
    ({"rope_parameters": {"sliding_attention": {"rope_type": "yarn", "rope_theta": 1e4}, "full_attention": None}},
     "rope_parameters.sliding_attention.rope_type: only default RoPE"),
    ({"rope_parameters": {"sliding_attention": 10000.0, "full_attention": None}},
     "rope_parameters.sliding_attention: an object"),
    ({"num_experts": "256"}, "num_experts: '256' is not"),
])
def test_bad_beam_configs_are_one_line(tmp_path, change, message):
    """Beam (no released config.json found: BeamConfig's defaults, Beam-1.0-501B-A23B's shapes, as the file)."""
    from transformers import AutoConfig

    beam = json.loads(AutoConfig.for_model("beam").to_json_string())
    _refused_in_one_line(_write({**beam, **change}, tmp_path), message)


@pytest.mark.parametrize("change, message", [
    ({"mode": "train"}, "mode: only inference is supported"),
    ({"weight_mode": "split"}, "weight_mode: 'split'; valid: single, fused"),
    ({"qk_dim_factor": 0.3}, "qk_dim_factor: hidden_size × qk_dim_factor = 1228.8"),
    ({"head_dim": 256}, "head_dim: must be the value heads' width"),
    ({"add_qk_norm": True}, "add_qk_norm: must be false"),
    ({"use_bias": True}, "use_bias: must be false"),
    ({"hidden_size": 2048}, "embedding_dim: differs from hidden_size (2048)"),
    ({"add_post_blocks_norm": False}, "add_post_blocks_norm: disagrees with add_out_norm"),
    ({"num_heads": "8"}, "num_heads: '8' is not"),
])
def test_bad_xlstm_configs_are_one_line(tmp_path, change, message):
    _refused_in_one_line(_write({**_raw("xlstm-7b"), **change}, tmp_path), message)


@pytest.mark.parametrize("change, message", [
    ({"_block_types": ["recurrent", "mlp"]}, "_block_types: a non-empty list of recurrent and attention"),
    ({"head_dim": 128}, "head_dim: must be hidden_size / num_attention_heads = 256"),
    ({"num_attention_heads": 7}, "num_attention_heads: must divide hidden_size (2560)"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, "RoPE scaling is not supported for RecurrentGemma"),
    ({"lru_width": 2561}, "width (2561) must be divisible by n_heads (10)"),
    ({"conv1d_width": 0}, "conv1d_width: 0 is not valid"),
])
def test_bad_recurrent_gemma_configs_are_one_line(tmp_path, change, message):
    _refused_in_one_line(_write({**_raw("recurrentgemma-2b-it"), **change}, tmp_path), message)


def test_recurrent_gemma_is_its_published_2_7b_and_keeps_a_fixed_state_beside_its_window():
    """RecurrentGemma 2B: "2.7B parameters" (arXiv:2404.07839, its Table 1: 2.68B); every third layer local MQA in a
    2,048-token window, the others a recurrent block whose state is W fp32 values and the conv's last 3 inputs."""
    spec, _ = load_model(str(DATA / "recurrentgemma-2b-it.json"))
    from archcalc.api import size

    result = size(str(DATA / "recurrentgemma-2b-it.json"), context=1_000_000)
    assert round(result.params.total / 1e8) == 27
    assert spec.layer_attention.count("local") == 8 and spec.attention.sliding_window == 2048
    assert {k.kind: k.state_bytes for k in result.kv.by_kind}["linear"] == 18 * (2560 * 4 + 2560 * 3 * 2)


def test_gpt_neox_japanese_biases_the_last_layer_s_attention_output_only():
    """GPTNeoXJapaneseAttention(use_bias=layer_number == num_hidden_layers - 1): the one dense_bias, on the last
    layer, as transformers builds the released file; a pipeline stage holds it only if it holds that layer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    raw = _raw("gpt-neox-japanese-2.7b")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**raw))
    biased = [i for i, layer in enumerate(model.gpt_neox_japanese.layers) if layer.attention.dense_bias is not None]
    spec, _ = load_model(str(DATA / "gpt-neox-japanese-2.7b.json"))
    assert spec.attention.o_bias_layers == biased == [31]
    assert spec.cut(0, 16).attention.o_bias_layers is None and spec.cut(16, 32).attention.o_bias_layers == [15]


NORTH = {"model_type": "cohere_compass_text", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4,
         "num_attention_heads": 4, "vocab_size": 100, "sliding_window": 4,
         "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
         "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 5e4}, "full_attention": None}}


@pytest.mark.parametrize("change, message", [
    ({"rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 5e4}}},
     "rope_parameters: no entry for full_attention"),
    ({"rope_parameters": {}}, "rope_parameters: no entry for"),
    ({"head_dim": 32}, "head_dim: must be hidden_size / num_attention_heads = 16"),
    ({"layer_types": ["chunked_attention"] * 4}, "layer_types: 4 entries of full_attention or sliding_attention"),
])
def test_bad_north_configs_are_one_line(tmp_path, change, message):
    """Cohere's North (no released config.json found): CohereCompassTextConfig cannot build a model without a
    rope_parameters entry per layer type, so neither does archcalc read one."""
    _refused_in_one_line(_write({**NORTH, **change}, tmp_path), message)


@pytest.mark.parametrize("change, message", [
    ({"num_layers_per_stack": 16}, "num_hidden_layers: must be num_layers_per_stack × H_cycles × (L_cycles + 1) = 128"),
    ({"num_key_value_heads": 4}, "num_key_value_heads: must equal the head count (12)"),
    ({"H_cycles": 0}, "H_cycles: 0 is not valid"),
    ({"L_cycles": "3"}, "L_cycles: '3' is not"),
])
def test_bad_hrm_text_configs_are_one_line(tmp_path, change, message):
    _refused_in_one_line(_write({**_raw("hrm-text-1b"), **change}, tmp_path), message)


@pytest.mark.parametrize("args, message", [
    (["train", "hrm-text-1b", "--gpu", "h100", "--gpus", "8"], "layers run more than once with the same weights"),
    (["sweep", "hrm-text-1b", "--vary", "d_model=1024,1536"], "not swept"),
    (["fit", "hrm-text-1b", "--gpu", "h100", "--engine", "vllm", "--pp", "2"], "are not split into stages"),
])
def test_a_loop_is_refused_where_it_is_not_modelled(args, message):
    """HRM-Text's shared-weight stacks: training (what its truncated backward keeps), the sweep's array path and
    pipeline stages are not modelled; each says so in one line."""
    args = [str(DATA / "hrm-text-1b.json") if a == "hrm-text-1b" else a for a in args]
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


# DoryConfig's file layout, shrunk: 4 layers listed as (attention, mlp) blocks, every count doubled
DORY = {"model_type": "dory", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 8,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 8,
        "n_input_layers": 2, "n_recurrent_layers": 4, "n_output_layers": 2, "n_recurrent_loops": 2,
        "layer_types": ["sliding_attention", "mlp", "sliding_attention", "mlp", "full_attention", "mlp",
                        "sliding_attention", "mlp"]}


@pytest.mark.parametrize("change, message", [
    ({"n_recurrent_layers": 6}, "n_recurrent_layers: the prelude (1), core (3) and coda (1) must be"),
    ({"n_input_layers": 4, "n_output_layers": 4, "n_recurrent_layers": None}, "the core at least one"),
    ({"n_recurrent_loops": 0}, "n_recurrent_loops: 0 is not valid"),
    ({"n_recurrent_loops": "2"}, "n_recurrent_loops: '2' is not"),
    ({"recurrent_kv_cache_mode": "loop1"}, "recurrent_kv_cache_mode: 'loop1'; valid: per_loop, last_loop"),
    ({"layer_types": ["sliding_attention", "mlp"] * 3 + ["mlp", "full_attention"]}, "attention and mlp alternate"),
    ({"num_hidden_layers": 7}, "layer_types: with mlp blocks listed"),
    ({"layer_types": ["sliding_attention", "full_attention", "linear_attention", "full_attention"],
      "num_hidden_layers": 4, "n_input_layers": 1, "n_recurrent_layers": 2, "n_output_layers": 1},
     "layer_types: 4 entries of sliding_attention or full_attention expected"),
])
def test_bad_dory_configs_are_one_line(tmp_path, change, message):
    _refused_in_one_line(_write({k: v for k, v in {**DORY, **change}.items() if v is not None}, tmp_path), message)


def test_dory_s_layers_run_and_cache(tmp_path):
    """Dory's loop in the commands: size counts the 4 stored layers' weights and the 6 run (1 + 2·2 + 1); the cache
    holds a slot a run with per_loop, a slot a layer with last_loop (the first pass's core layers reading the last
    pass's cache), and fit plans each; train and pipeline stages refuse the loop in one line."""
    from archcalc.api import size

    per_pass = size(str(_write(DORY, tmp_path)), context=4096)
    qkv = next(op for op in per_pass.ops if op.name == "layers.attn.qkv")
    assert (qkv.count, qkv.weight_copies) == (6, 4)
    last = tmp_path / "last"
    last.mkdir()
    last_pass = size(str(_write({**DORY, "recurrent_kv_cache_mode": "last_loop"}, last)), context=4096)
    assert per_pass.kv.bytes_per_token == 6 * 2 * 2 * 16 * 2 and last_pass.kv.bytes_per_token == 4 * 2 * 2 * 16 * 2
    assert per_pass.flops.forward == last_pass.flops.forward
    for folder in (tmp_path, last):
        r = CliRunner().invoke(cli, ["fit", str(folder / "config.json"), "--gpu", "h100", "--engine", "vllm"])
        assert r.exit_code == 0, r.output
    for args, message in ((["train", "--gpu", "h100", "--gpus", "8"], "layers run more than once with the same weights"),
                          (["fit", "--gpu", "h100", "--engine", "vllm", "--pp", "2"], "are not split into stages")):
        r = CliRunner().invoke(cli, [args[0], str(tmp_path / "config.json"), *args[1:]])
        assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output, r.output


def test_zaya1_8b_is_its_published_8_3b_and_760m_active():
    """ZAYA1-8B (zaya1-8b.json; 8,840,488,784 = transformers' numel, test_hf_oracle.py): Zyphra's announcement of
    ZAYA1-base, "760M active and 8.3B total params", counts without the tied embedding: ours 8.30B non-embedding,
    and 753.6M active (one expert of 16 a token, as every token is counted through one: the skip expert's share is
    the data's), within 1 % of 760M.  Its fixed state a sequence: the CCA convs' last 2 inputs of (8 + 2) · 128
    channels and the delayed value half, 2 · 128 / 2, in each of the 40 layers."""
    from archcalc.api import size

    result = size(str(DATA / "zaya1-8b.json"), context=4096)
    p = result.params
    assert round(p.non_embedding / 1e8) == 83 and abs(p.active - p.embedding - 760e6) < 0.01 * 760e6
    (state,) = [k for k in result.kv.by_kind if k.kind == "linear"]
    assert (state.layers, state.state_bytes) == (40, 40 * ((8 + 2) * 128 * 2 + 128) * 2)
    assert result.kv.bytes_per_token == 40 * 2 * 2 * 128 * 2


@pytest.mark.parametrize("change, message", [
    ({"num_experts_per_tok": 2}, "num_experts_per_tok: must be 1"),
    ({"layer_types": ["hybrid"] * 39 + ["full_attention"]}, "layer_types: 40 entries of hybrid or hybrid_sliding"),
    ({"layer_types": ["hybrid_sliding", "hybrid"] * 20}, "sliding_window"),
    ({"cca_time0": "2"}, "cca_time0: '2' is not"),
    ({"cca_time1": 0}, "cca_time1: 0 is not valid"),
    ({"router_hidden_size": 0}, "router_hidden_size: 0 is not valid"),
    ({"partial_rotary_factor": 0.25}, "one partial_rotary_factor for every layer type"),
    ({"rope_parameters": {"hybrid": {"rope_theta": 1e6, "rope_type": "yarn"}}}, "only default RoPE"),
])
def test_bad_zaya_configs_are_one_line(tmp_path, change, message):
    _refused_in_one_line(_write({**_raw("zaya1-8b"), **change}, tmp_path), message)


def test_zaya_s_state_is_planned_and_its_router_refuses_stages():
    """ZAYA1's CCA state beside each layer's cache: fit plans it as the engine plans a hybrid layer's state and says
    so; roofline times it; pipeline stages refuse the router state EDA carries from layer to layer, in one line."""
    path = str(DATA / "zaya1-8b.json")
    r = CliRunner().invoke(cli, ["fit", path, "--gpu", "h100"])
    assert r.exit_code == 0 and "ZAYA1's CCA convs and delayed value" in " ".join(r.output.split()), r.output
    assert CliRunner().invoke(cli, ["roofline", path, "--gpu", "h100"]).exit_code == 0
    r = CliRunner().invoke(cli, ["fit", path, "--gpu", "h100", "--gpus", "2", "--pp", "2"])
    assert r.exit_code == 2 and "ZAYA1's EDA" in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_hrm_text_stores_its_two_stacks_once_and_runs_them_eight_times():
    """HRM-Text-1B: 32 layers stored, 128 run a token (H_cycles 2 × (L_cycles 3 + 1) passes of 16): the weights
    (= transformers' numel, test_hf_oracle.py) are the 32's; the FLOPs, the cache (one slot a layer run: HF's 128)
    and the weight reads of a step are the 128's."""
    from archcalc.api import size
    from archcalc.cost.totals import weight_bytes

    spec, _ = load_model(str(DATA / "hrm-text-1b.json"))
    result = size(str(DATA / "hrm-text-1b.json"), context=4096)
    layer = [op for op in result.ops if op.name == "layers.attn.qkv"][0]
    assert (spec.n_layers, spec.loop.stored_layers, layer.count, layer.weight_copies) == (128, 32, 128, 32)
    assert result.params.active == result.params.total  # dense: every stored weight is used, once counted
    assert result.kv.bytes_per_token == 128 * 2 * 12 * 128 * 2
    layers = [op for op in result.ops if op.name.startswith("layers.")]
    read = sum(op.weight_bytes * op.count for op in layers)  # every layer run reads its weights again
    assert read == 4 * weight_bytes(layers, "bf16") > 0


@pytest.mark.parametrize("model_type, rope", [
    ("cohere_compass_text", {"sliding_attention": {"rope_type": "default", "rope_theta": 5e4},
                             "full_attention": {"rope_type": "default", "rope_theta": 1e6}}),
    ("cohere_compass_text", {"sliding_attention": {"rope_type": "default", "rope_theta": 5e4}, "full_attention": None}),
    ("beam", {"sliding_attention": {"rope_type": "default", "rope_theta": 2e4}, "full_attention": None}),
    ("beam", {"sliding_attention": None, "full_attention": {"rope_type": "default", "rope_theta": 3e5}}),
    ("dory", {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},  # DoryConfig's defaults
              "full_attention": {"rope_type": "default", "rope_theta": 1e7}}),
    ("dory", {"sliding_attention": {"rope_type": "default", "rope_theta": 3e5},
              "full_attention": {"rope_type": "default", "rope_theta": 2e4}}),
])
def test_rope_bases_per_layer_kind_are_the_model_s(model_type, rope):
    """rope_parameters keyed by layer type: the base archcalc reads for each kind's layers is the one whose
    frequencies the model's rotary embedding holds for that kind (built small, on the CPU); a kind without one
    has none, and its layers rotate nothing in archcalc either."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from archcalc.spec.hf import spec_dict_from_config
    from archcalc.spec.model import ModelSpec

    config = AutoConfig.for_model(model_type, vocab_size=100, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                                  num_attention_heads=4, num_key_value_heads=2, sliding_window=4, rope_parameters=rope,
                                  layer_types=["sliding_attention"] * 3 + ["full_attention"], eos_token_id=1,
                                  bos_token_id=2, **({"head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2,
                                                      "moe_intermediate_size": 8, "n_group": 2, "topk_group": 1}
                                                     if model_type == "beam" else {}),
                                  **({"head_dim": 16, "n_input_layers": 1, "n_output_layers": 1}
                                     if model_type == "dory" else {}))
    spec = ModelSpec.model_validate({"name": "x", **spec_dict_from_config(json.loads(config.to_json_string()),
                                                                           "config.json")[0]})
    rotary = AutoModelForCausalLM.from_config(config).model.rotary_emb
    p, d = spec.position, spec.rope_dim
    for layer_type, kind in (("sliding_attention", "local"), ("full_attention", "global")):
        rotates = spec.layer_rope[spec.layer_attention.index(kind)]
        assert rotates == (rope[layer_type] is not None)
        if rotates:
            theta = p.local_theta if kind == "local" and p.local_theta is not None else p.theta
            ours = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float) / d))
            assert torch.allclose(getattr(rotary, f"{layer_type}_inv_freq"), ours)


ZAMBA2 = {"model_type": "zamba2", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4,
          "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba"], "n_mamba_heads": 4,
          "mamba_d_state": 16, "adapter_rank": 8, "intermediate_size": 96}


@pytest.mark.parametrize("change, message", [
    ({"use_shared_attention_adapter": True, "num_key_value_heads": 2}, "num_key_value_heads: must equal"),
    ({"layers_block_type": ["mamba", "attention"] * 3}, "layers_block_type: 6 entries of mamba"),
    ({"num_attention_heads": 5}, "num_attention_heads: must divide 2 × hidden_size (128)"),
    ({"attention_head_dim": 16}, "attention_head_dim: must be 32"),
    ({"add_bias_linear": True}, "add_bias_linear: must be false"),
    ({"ffn_hidden_size": 128}, "ffn_hidden_size: differs from intermediate_size (96)"),
    ({"num_mem_blocks": 4}, "shared_block.layers: distinct layers of 6, at least `blocks` (4)"),
])
def test_bad_zamba2_configs_are_one_line(tmp_path, change, message):
    """Zamba2 (no whole released config.json in transformers' format found; Zamba2Config's shape as the file)."""
    _refused_in_one_line(_write({**ZAMBA2, **change}, tmp_path), message)


MODERNBERT = {"model_type": "modernbert-decoder", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
              "num_hidden_layers": 4, "num_attention_heads": 4, "local_attention": 8, "pad_token_id": 0}


@pytest.mark.parametrize("change, message", [
    ({"sliding_window": 8}, "sliding_window: must be local_attention / 2 = 4"),
    ({"layer_types": ["full_attention"] * 3}, "layer_types: 4 entries of full_attention or sliding_attention"),
    ({"rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 2.0}}},
     "rope_parameters.full_attention.rope_type: only default RoPE"),
    ({"classifier_activation": "tanh"}, "activation 'tanh' is not known"),
    ({"global_rope_theta": "1e5"}, "global_rope_theta: '1e5' is not"),
])
def test_bad_modernbert_decoder_configs_are_one_line(tmp_path, change, message):
    _refused_in_one_line(_write({**MODERNBERT, **change}, tmp_path), message)


def test_modernbert_decoder_s_prediction_head_is_not_trained(tmp_path):
    r = CliRunner().invoke(cli, ["train", str(_write(MODERNBERT, tmp_path)), "--gpu", "h100", "--gpus", "8"])
    assert r.exit_code == 2 and "prediction head before the unembedding" in r.output and "Traceback" not in r.output


def test_modernbert_decoder_s_missing_first_norm_stays_with_layer_0(tmp_path):
    """ModernBertDecoderLayer(0) has no norm before its attention (nn.Identity; the embedding's LayerNorm serves):
    a pipeline stage from layer 2 on has one before each of its layers."""
    from archcalc.ops.layers import model_ops
    from archcalc.ops.workload import Workload

    spec, _ = load_model(str(_write(MODERNBERT, tmp_path)))
    norms = {s: next(op.count for op in model_ops(c, Workload()) if op.name == "layers.attn.norm")
             for s, c in (("whole", spec), ("tail", spec.cut(2, 4)))}
    assert norms == {"whole": 3, "tail": 2}


@pytest.mark.parametrize("change, message", [
    ({"sliding_window": 4096}, "sliding_window: must be null"),
    ({"hidden_mamba_act": "gelu"}, "hidden_mamba_act: only silu"),
    ({"n_mamba_heads": 3}, "n_mamba_heads: must divide mamba_expand × hidden_size (7424)"),
    ({"attention_head_dim": 128}, "attention_hidden_size: the shared block reads 2 × hidden_size = 7424 values"),
    ({"layers_block_type": ["mamba"] * 75}, "layers_block_type: 76 entries of mamba"),
])
def test_bad_zamba_configs_are_one_line(tmp_path, change, message):
    _refused_in_one_line(_write({**_raw("zamba-7b-v1-phase1"), **change}, tmp_path), message)


@pytest.mark.parametrize("change, message", [
    ({"attention_hidden_size": 512}, "attention_hidden_size: must equal hidden_size (768)"),
    ({"context_length": 0}, "context_length: 0 is not valid"),
    ({"intermediate_size": "3072"}, "intermediate_size: '3072' is not"),
])
def test_bad_rwkv_configs_are_one_line(tmp_path, change, message):
    _refused_in_one_line(_write({**_raw("rwkv-4-169m-pile"), **change}, tmp_path), message)


JETMOE = "jetmoe-8b-ultrainteract-sft-v4"


@pytest.mark.parametrize("change, message", [
    ({"ffn_hidden_size": 4096}, "ffn_hidden_size: 4096 differs from intermediate_size (5632), which transformers reads"),
    ({"moe_top_k": 4, "num_experts_per_tok": 2}, "moe_top_k: 4 differs from num_experts_per_tok (2)"),
    ({"num_experts_per_tok": 9, "moe_top_k": 9}, "top_k (9) exceeds n_experts (8)"),
    ({"num_local_experts": "8"}, "num_local_experts: '8' is not"),
    ({"kv_channels": 0}, "kv_channels: 0 is not"),
])
def test_bad_jetmoe_configs_are_one_line(tmp_path, change, message):
    """JetMoE's released files name some keys as its remote code did (ffn_hidden_size, moe_top_k, ...), which
    transformers' JetMoeConfig does not read: where one disagrees with the key transformers builds from, the file
    describes a model transformers would not build."""
    _refused_in_one_line(_write({**_raw(JETMOE), **change}, tmp_path), message)


def test_jetmoe_reports_what_its_remote_code_keys_are():
    """The fixture's remote-code keys agree with what transformers reads, and are reported so; a head count that
    is not num_key_value_heads × num_experts_per_tok (the query heads a token has) is a warning."""
    from archcalc.spec.hf import spec_dict_from_config

    raw = _raw(JETMOE)
    _, report = spec_dict_from_config(raw, "config.json")
    assert report.warnings == [] and "the remote code's name for intermediate_size" in report.ignored["ffn_hidden_size"]
    _, report = spec_dict_from_config({**raw, "num_attention_heads": 16}, "config.json")
    assert report.warnings == ["config.json: num_attention_heads=16 is not num_key_value_heads × num_experts_per_tok "
                               "= 32, the query heads each token has"]


def test_jetmoe_train_is_refused_in_one_line():
    r = CliRunner().invoke(cli, ["train", str(DATA / f"{JETMOE}.json"), "--gpu", "h100", "--gpus", "8"])
    assert r.exit_code == 2 and "attention experts (JetMoE)" in r.output and "Traceback" not in r.output, r.output


def test_jetmoe_decode_reads_the_experts_its_token_runs():
    """JetMoE-8B (8.52B = transformers' numel, test_hf_oracle.py): 2 of 8 attention experts and 2 of 8 FFN experts
    a token, so a one-token decode step reads a quarter of each layer's expert weights, and the cache holds the 16
    K/V heads of 128 a layer (the 32 query heads are the two experts' 16 each)."""
    from archcalc.api import size

    result = size(str(DATA / f"{JETMOE}.json"), context=4096)
    assert result.kv.bytes_per_token == 24 * 2 * 16 * 128 * 2
    q = [op for op in result.ops if op.name == "layers.attn.q_experts"][0]
    assert (q.params, q.active_params, q.component) == (8 * 2048 * 2048, 2 * 2048 * 2048, "attention")


@pytest.mark.parametrize("change, message", [
    ({"is_moe": True, "num_experts": 10, "num_experts_per_tok": 10}, "top_k (10) exceeds the ⌊√n_experts⌋² = 9"),
    ({"is_moe": True, "num_experts": "64"}, "num_experts: '64' is not"),
    ({"is_moe": "false"}, "is_moe: 'false' is not"),
    ({"sliding_window": 1024}, "sliding_window: must be null"),
    ({"keep_window_size": "4096"}, "keep_window_size: '4096' is not"),
    ({"keep_window_size": 0}, "keep_window_size: 0 is not"),
    ({"num_key_value_heads": 3}, "n_heads (2) must be divisible by n_kv_heads (3)"),
])
def test_bad_doge_configs_are_one_line(tmp_path, change, message):
    _refused_in_one_line(_write({**_raw("doge-40m"), **change}, tmp_path), message)


def test_doge_40m_keeps_every_key_and_scores_them_all_each_step():
    """Doge-40M (40,709,384 = transformers' numel, test_hf_oracle.py, the name's 40M): its dynamic mask keeps
    4,096 keys a query, a mask over a full cache (1 KV head of 128, 8 layers); transformers' dt_proj scores every
    cached key's values at every step, so a decode step's dt_proj rows grow with the context."""
    from archcalc.api import size

    from archcalc.ops.layers import model_ops
    from archcalc.ops.workload import Workload

    result = size(str(DATA / "doge-40m.json"), context=4096)
    assert result.kv.bytes_per_token == 8 * 2 * 1 * 128 * 2 and result.params.total == 40_709_384
    step = {op.name: op for op in model_ops(load_model(str(DATA / "doge-40m.json"))[0], Workload.decode(4096))}
    dt, qkv = step["layers.attn.dt_proj"], step["layers.attn.qkv"]
    assert (dt.dims.m, dt.dims.k, dt.dims.n, qkv.dims.m) == (4096, 128, 1, 1)
    r = CliRunner().invoke(cli, ["train", str(DATA / "doge-40m.json"), "--gpu", "h100", "--gpus", "1"])
    assert r.exit_code == 2 and "dynamic mask attention (Doge)" in r.output and "Traceback" not in r.output


AXK2 = {"model_type": "axk2", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
        "vocab_size": 100, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "q_lora_rank": 24, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16}


@pytest.mark.parametrize("change, message", [
    ({"gated_norm_rank": "16"}, "gated_norm_rank: '16' is not"),
    ({"gated_norm_rank": 0}, "gated_norm_rank: 0 is not"),
    ({"q_lora_rank": None}, "q_lora_rank: required"),
    ({"mlp_layer_types": ["dense", "sparse", "sparse", "sparse"], "first_k_dense_replace": 2},
     "mlp_layer_types: disagrees with first_k_dense_replace"),
    ({"mlp_layer_types": ["dense", "sparse"]}, "mlp_layer_types: 4 entries of dense or sparse expected"),
])
def test_bad_axk2_configs_are_one_line(tmp_path, change, message):
    """A.X-K2 (no released config.json found; its config class's shapes are pinned in test_hf_oracle.py)."""
    _refused_in_one_line(_write({**AXK2, **change}, tmp_path), message)


HY_V4 = {**{k: v for k, v in AXK2.items() if k != "model_type"}, "model_type": "hy_v4", "num_hidden_layers": 6}


@pytest.mark.parametrize("change, message", [
    ({"hc_mult": "4"}, "hc_mult: '4' is not"),
    ({"hc_mult": 0}, "hc_mult: 0 is not"),
    ({"indexer_types": ["full", "shared"]}, "indexer_types: 6 entries of full or shared expected"),
    ({"indexer_types": ["shared"] + ["full"] * 5}, "indexer_types: layer 0 must be full"),
    ({"mlp_layer_types": ["dense"] * 5}, "mlp_layer_types: 6 entries of dense or sparse expected"),
    ({"layer_types": ["full_attention"] * 6}, "layer_types: every layer of this MLA model is indexed_attention"),
])
def test_bad_hy_v4_configs_are_one_line(tmp_path, change, message):
    """HY-V4 (no released config.json found; its config class's shapes are pinned in test_hf_oracle.py)."""
    _refused_in_one_line(_write({**HY_V4, **change}, tmp_path), message)


def test_hy_v4_roofline_and_stages(tmp_path):
    """A model whose indexers are shared by some layers (HY-V4, GLM-5): roofline times it and says the default
    engine (vLLM) could not check the fit, rather than refusing; pipeline stages are refused in one line (a
    stage's first layer may reuse a top-k the stage before computed)."""
    path = str(_write(HY_V4, tmp_path))
    r = CliRunner().invoke(cli, ["roofline", path, "--gpu", "h200"])
    assert r.exit_code == 0 and "was not checked (vllm engine)" in r.output, r.output
    r = CliRunner().invoke(cli, ["fit", path, "--gpu", "h100", "--gpus", "2", "--engine", "vllm", "--pp", "2"])
    assert r.exit_code == 2 and "--pp: indexers on some layers only" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(cli, ["train", path, "--gpu", "h100", "--gpus", "8"])
    assert r.exit_code == 2 and "(HY-V4)" in r.output and "Traceback" not in r.output, r.output


@pytest.mark.parametrize("layers", [2, 6, 13])
def test_hy_v4_s_default_indexer_and_mlp_layers_are_its_config_class_s(layers):
    """A file without indexer_types or mlp_layer_types: the shared indexers and the dense layers HYV4Config
    derives (layer 0 and every fourth from layer 1 with an indexer; layer 0 dense)."""
    from transformers import AutoConfig

    from archcalc.spec.hf import spec_dict_from_config
    from archcalc.spec.model import ModelSpec

    spec = ModelSpec.model_validate({"name": "hy", **spec_dict_from_config(
        {**HY_V4, "num_hidden_layers": layers}, "config.json")[0]})
    hf = AutoConfig.for_model("hy_v4", **{**{k: v for k, v in HY_V4.items() if k != "model_type"},
                                          "num_hidden_layers": layers})
    assert (spec.attention.indexer.shared_layers or []) == [i for i, t in enumerate(hf.indexer_types) if t == "shared"]
    assert [k == "moe" for k in spec.layer_ffn] == [t == "sparse" for t in hf.mlp_layer_types]


@pytest.mark.parametrize("prompt, gen, batch", [(10, 40, 2), (100, 300, 1), (2000, 500, 8)])
def test_doge_decode_time_in_closed_form_is_within_a_chord_of_the_steps(prompt, gen, batch):
    """Doge's dt_proj rows grow with the context, so under the typical rates (efficiency by rows) its decode time
    between two contexts is not affine and the closed form takes the chord: within 0.5 % of summing every step
    (0.13 % in the worst of these); at peak rates it is exact."""
    from archcalc.cost.rates import rate_sets
    from archcalc.cost.roofline import decode_time, step
    from archcalc.hardware.profile import load_hardware
    from archcalc.ops.workload import Workload

    spec = load_model(str(DATA / "doge-40m.json"))[0]
    peak, typical = rate_sets(load_hardware("h100"), Workload.decode(prompt + 1, batch))[:2]
    for rates, tolerance in ((peak, 1e-9), (typical, 5e-3)):
        steps = sum(step(spec, Workload.decode(c, batch), rates).time for c in range(prompt + 1, prompt + gen + 1))
        assert decode_time(spec, prompt, gen, batch, rates) == pytest.approx(steps, rel=tolerance)


DRAFTER = "gemma-4-e2b-it-assistant"


@pytest.mark.parametrize("change, message", [
    ({"text_config": None}, "text_config: a gemma4_assistant config describes its layers in text_config"),
    ({"text_config": {"model_type": "llama"}}, "text_config.model_type: a gemma4_assistant reads a gemma4_text"),
    ({"backbone_hidden_size": "1536"}, "backbone_hidden_size: '1536' is not"),
    ({"use_ordered_embeddings": "true"}, "use_ordered_embeddings: 'true' is not"),
    ({"num_centroids": 0}, "num_centroids: 0 is not"),
    ({"num_centroids": 3000}, "drafter.centroids (3000) must divide vocab_size (262144)"),
    ({"centroid_intermediate_top_k": 4096}, "and be at least drafter.top_k (4096)"),
    ({"text": {"num_kv_shared_layers": 2}}, "text_config.num_kv_shared_layers: must be num_hidden_layers (4) or 0"),
    ({"text": {"hidden_size_per_layer_input": 256}}, "text_config.hidden_size_per_layer_input: must be 0"),
    ({"text": {"use_double_wide_mlp": True}}, "text_config.use_double_wide_mlp: must be false"),
    ({"text": {"enable_moe_block": True}}, "text_config.enable_moe_block: must be false"),
])
def test_bad_drafter_configs_are_one_line(tmp_path, change, message):
    """Gemma 4's assistant (a drafter for speculative decoding, DrafterSpec): each bad file one line, exit status 2."""
    raw = _raw(DRAFTER)
    text = change.pop("text", None)
    raw = {**raw, **change}
    if text is not None:
        raw["text_config"] = {**raw["text_config"], **text}
    _refused_in_one_line(_write(raw, tmp_path), message)


def test_a_drafter_is_sized_and_timed_but_not_planned():
    """size and roofline describe the drafter alone (no cache of its own: it reads its target's); fit and train
    refuse it in one line, since a plan of the drafter alone would leave out its target and the target's cache."""
    path = str(DATA / f"{DRAFTER}.json")
    r = CliRunner().invoke(cli, ["size", path])
    assert r.exit_code == 0 and "target's: a drafter's 4 layers read the K and V" in r.output, r.output
    r = CliRunner().invoke(cli, ["roofline", path, "--gpu", "h100"])
    assert r.exit_code == 0 and "is a drafter for speculative decoding" in r.output, r.output
    for command in (["fit", path, "--gpu", "h100"], ["train", path, "--gpu", "h100", "--gpus", "8"]):
        r = CliRunner().invoke(cli, command)
        assert r.exit_code == 2 and "is a drafter" in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_a_drafter_reads_no_lm_head_of_its_own_when_tied():
    """The released file ties lm_head to the embedding by the outer tie_word_embeddings (Gemma4AssistantConfig's;
    text_config's says nothing then): untied, the head is a V × D weight of its own, whose rows only the top_k
    clusters' tokens are read."""
    from archcalc.api import size

    tied = size(str(DATA / f"{DRAFTER}.json")).params
    raw = {**_raw(DRAFTER), "tie_word_embeddings": False}
    raw["text_config"] = {**raw["text_config"], "tie_word_embeddings": True}
    spec = load_model_from(raw)
    from archcalc.cost.totals import size as size_of
    from archcalc.ops.conventions import CONVENTIONS
    from archcalc.ops.workload import Workload

    untied = size_of(spec, Workload.forward(8), CONVENTIONS["causal"]).params
    assert untied.total - tied.total == 262144 * 256 == untied.by_component["lm_head"] - tied.by_component["lm_head"]


def load_model_from(raw: dict):
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        return load_model(str(_write(raw, Path(folder))))[0]


def test_inkling_is_its_published_41b_active():
    """transformers' Inkling docs (model_doc/inkling.md): 41B active of 975B (the total with its vision and audio
    towers and MTP layers, which the released text_config does not describe; the language model transformers builds
    is 947,025,547,842 = numel, tests/spec/test_hf_oracle.py); 6 of 256 routed experts and 2 shared a token, 66 layers."""
    from archcalc.api import size

    result = size(str(DATA / "inkling.json"))
    spec, params = result.spec, result.params
    assert round(params.active / 1e9) == 41 and params.total == 947_025_547_842
    assert (spec.n_layers, spec.ffn.moe.n_experts, spec.ffn.moe.top_k, spec.ffn.moe.router_shared) == (66, 256, 6, 2)


INKLING = {"model_type": "inkling_text", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 6,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "swa_num_attention_heads": 4,
           "swa_num_key_value_heads": 4, "swa_head_dim": 16, "sliding_window_size": 8, "d_rel": 4, "rel_extent": 12,
           "intermediate_size": 96, "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2,
           "n_shared_experts": 2, "dense_mlp_idx": 1}


@pytest.mark.parametrize("change, message", [
    ({"use_sconv": False}, "use_sconv: must be true: transformers' Inkling is built so"),
    ({"q_bias": True}, "q_bias: must be false"),
    ({"shared_expert_sink": False}, "shared_expert_sink: must be true"),
    ({"gate_activation": "softmax"}, "gate_activation: must be sigmoid"),
    ({"final_logit_softcapping": 30.0}, "final_logit_softcapping: must be null"),
    ({"d_rel": "4"}, "d_rel: '4' is not"),
    ({"rel_extent": 0}, "rel_extent: 0 is not"),
    ({"sconv_kernel_size": 1}, "sconv_kernel_size: 1 is not"),
    ({"local_layer_ids": [0, "1"]}, "local_layer_ids[1]: '1' is not"),
    ({"layer_types": ["hybrid"] * 5}, "layer_types: 6 entries of hybrid or hybrid_sliding expected"),
    ({"layer_types": ["full_attention"] * 6}, "layer_types: 6 entries of hybrid or hybrid_sliding expected"),
    ({"mlp_layer_types": ["dense"] * 3}, "mlp_layer_types: 6 entries of dense or sparse expected"),
    ({"swa_num_key_value_heads": 3}, "n_heads (4) must be divisible by n_kv_heads (3)"),
])
def test_bad_inkling_configs_are_one_line(tmp_path, change, message):
    """Inkling (InklingTextConfig's keys; the released files' own switches checked against what transformers
    builds): each bad file one line, exit status 2."""
    _refused_in_one_line(_write({**INKLING, **change}, tmp_path), message)


def test_inkling_roofline_and_refusals(tmp_path):
    """Inkling's short-conv states sit beside each attention layer's cache: fit plans them as the engine plans a
    hybrid layer's state and says so; roofline times it; train refuses it in one line (what the convs and relative
    logits keep for backward is not pinned)."""
    path = str(_write(INKLING, tmp_path))
    r = CliRunner().invoke(cli, ["fit", path, "--gpu", "h100"])
    assert r.exit_code == 0 and "keep a fixed state per sequence beside their cache" in r.output, r.output
    assert CliRunner().invoke(cli, ["roofline", path, "--gpu", "h100"]).exit_code == 0
    r = CliRunner().invoke(cli, ["train", path, "--gpu", "h100", "--gpus", "8"])
    assert r.exit_code == 2 and "(Inkling)" in r.output and len(r.output.strip().splitlines()) == 1, r.output
