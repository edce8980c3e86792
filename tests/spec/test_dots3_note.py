"""dots3-note (AttentionSpec.local_mla, rope_key_norm) against transformers' own Dots3NoteForCausalLM.

Shrunk configs of Dots3NoteTextConfig (indexed layers beside sliding layers of their own MLA widths, an indexer
that selects fewer keys than there are, a window shorter than the longer prefills) run on the meta device:
parameters against numel(), prefill and decode FLOPs against FlopCounterMode, and the cache each layer holds
against archcalc's.  Both ways a config says the sliding layers' widths are read: the swa_* keys of the released
config.json and the per_layer_config transformers 5 writes.  The released shape (the fixture
tests/data/hf/dots3-note-prev.json and the config class's defaults) is pinned at full size.  Every difference
is HF's and named where it is asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoConfig

from archcalc.cost.totals import size
from archcalc.errors import InputError
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import load_model
from archcalc.spec.hf import spec_dict_from_config
from archcalc.spec.model import ModelSpec
from tests.spec.meta import held_and_step_flops, meta_model, spec_of_config
from tests.spec.test_hf_oracle import _elementwise_stream_reads, assert_params_and_prefill_equal_hf

FIXTURE = Path(__file__).parents[1] / "data" / "hf" / "dots3-note-prev.json"
# Every width of the sliding layers differs from the indexed layers' (heads, both latents, nope and rope dims,
# values), a window of 4, and an indexer keeping 4 keys: prefills of 7 and 11 tokens pass both
SHRUNK = dict(hidden_size=64, q_lora_rank=32, kv_lora_rank=16, num_attention_heads=4, num_key_value_heads=4,
              qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8, intermediate_size=96, moe_intermediate_size=16,
              shared_experts_intermediate_size=24, n_routed_experts=8, num_experts_per_tok=2, vocab_size=100,
              index_n_heads=2, index_head_dim=16, index_topk=4, sliding_window=4, pad_token_id=None,
              bos_token_id=None, eos_token_id=None, swa_num_attention_heads=2, swa_num_key_value_heads=2,
              swa_q_lora_rank=24, swa_kv_lora_rank=24, swa_head_dim=16, swa_qk_nope_head_dim=12,
              swa_qk_rope_head_dim=4, swa_v_head_dim=12)
VARIANTS = {
    # the release's rule (layers 0, 1 and every fourth from 1 indexed, the rest sliding), 2 MoE layers of 6
    "the release's layout": dict(num_hidden_layers=6),
    "a sliding layer first, a dense MLP every layer": dict(
        num_hidden_layers=4, layer_types=["sliding_attention", "indexed_attention", "sliding_attention",
                                          "indexed_attention"], mlp_layer_types=["dense"] * 4),
    "no indexer (use_dsa false)": dict(num_hidden_layers=6, use_dsa=False),
    "no sliding layer": dict(num_hidden_layers=3, use_sliding_window=False),
}


def _config(variant: str, **over):
    return AutoConfig.for_model("dots3_note_text", **{**SHRUNK, **VARIANTS[variant], **over})


def _spec(config) -> ModelSpec:
    return spec_of_config(config, "dots3")


_model = meta_model


def _attention(model) -> list:
    return [m for m in model.modules() if type(m).__name__ == "Dots3NoteTextAttention"]


@pytest.mark.parametrize("tokens", [1, 3, 7, 11])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_params_and_prefill_flops_equal_hf(variant, tokens):
    config = _config(variant)
    assert_params_and_prefill_equal_hf(_spec(config), _model(config), tokens)


def _decode(config, tokens: int) -> tuple[int, int, int]:
    """(archcalc's decode FLOPs at tokens + 1 under the torch convention, FlopCounterMode's of HF's step after a
    prefill of `tokens`, and the sliding cores' FLOPs for the keys past HF's cache).  HF caches MLA's latent and
    runs kv_b_proj again over every token its cache held before the step (expand_kv after cache.update);
    archcalc counts the new token's expansion, as an engine that absorbs kv_b does: 2 · kv_b's weight per
    earlier token, from HF's own modules and cache, is taken from HF's count.  Past the window HF's sliding
    layers hold window − 1 tokens and a step attends to those and its own, while the torch convention does not
    cap windows (ops/conventions.py): 2 · H · (d_qk + d_v) FLOPs a key more for each key past HF's cache."""
    spec, model = _spec(config), _model(config)
    held, step = held_and_step_flops(model, tokens)
    reexpanded = sum(2 * a.kv_b_proj.weight.numel() * n for a, n in zip(_attention(model), held))
    uncapped = sum(2 * a.num_heads * (a.qk_head_dim + a.v_head_dim) * (tokens - n)
                   for a, n in zip(_attention(model), held) if a.sliding_window is not None)
    ours = size(spec, Workload.decode(tokens + 1), CONVENTIONS["torch"]).flops.forward
    return ours - _elementwise_stream_reads(model, 1), step - reexpanded, uncapped


@pytest.mark.parametrize("tokens", [2, 3])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_decode_step_flops_equal_hf(variant, tokens):
    """A token after a prefill of `tokens`, through the cache the prefill returned, inside the window (3 + 1
    tokens of 4): exact, but for HF's re-expansion of its cached latents (_decode)."""
    ours, hf, uncapped = _decode(_config(variant), tokens)
    assert uncapped == 0 and ours == hf


def test_decode_past_the_window():
    """A token after 9, past the window of 4: HF's sliding layers read their window − 1 cached tokens and the new
    one, the indexed layers score every key of the context (HF's eager core, the top-k a mask); archcalc's torch
    count is HF's but for the sliding keys it does not cap (_decode)."""
    ours, hf, uncapped = _decode(_config("the release's layout"), 9)
    assert uncapped > 0 and ours - uncapped == hf


def _held(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


@pytest.mark.parametrize("tokens", [3, 9])
def test_cache_equals_hf_layer_by_layer(tokens):
    """HF's DynamicCache after a prefill, layer by layer, against archcalc's at that context: an indexed layer
    keeps its latent and its rope key for every token (DynamicIndexedLayer), exactly archcalc's global kind, and
    its indexer's key (in fp32: half of it is archcalc's indexer kind at bf16); a sliding layer keeps its own wider latent and rope key for min(tokens, window − 1)
    tokens (DynamicSlidingWindowLayer), where archcalc allocates the window, as a static cache does: one token
    more once the context passes it."""
    config = _config("the release's layout")
    spec, model = _spec(config), _model(config)
    with torch.no_grad():
        cache = model(input_ids=torch.zeros(1, tokens, dtype=torch.long, device="meta"), use_cache=True).cache
    ours = {k.kind: k for k in size(spec, Workload(new_tokens=tokens, context=tokens), CONVENTIONS["torch"]).kv.by_kind}
    window = config.sliding_window
    indexed = [layer for layer, t in zip(cache.layers, config.layer_types) if t == "indexed_attention"]
    sliding = [layer for layer, t in zip(cache.layers, config.layer_types) if t == "sliding_attention"]
    assert {type(layer).__name__ for layer in indexed} == {"DynamicIndexedLayer"}
    assert {type(layer).__name__ for layer in sliding} == {"DynamicSlidingWindowLayer"}
    assert (ours["global"].layers, ours["indexer"].layers, ours["local"].layers) == (len(indexed),) * 2 + (
        len(sliding),)
    assert ours["global"].bytes == sum(_held(layer.keys) + _held(layer.values) for layer in indexed)
    # HF's indexer key is fp32: its indexed layers' rotary tables are computed from inputs_embeds.float(), and
    # the rotated key is promoted; archcalc keeps it at the cache dtype (bf16 here), as engines keep it (or fp8)
    assert {layer.indexer_keys.dtype for layer in indexed} == {torch.float32}
    assert ours["indexer"].bytes == sum(_held(layer.indexer_keys) for layer in indexed) // 2
    kept = sum(_held(layer.keys) + _held(layer.values) for layer in sliding)
    assert ours["local"].bytes == kept * min(tokens, window) // min(tokens, window - 1)


def test_saved_and_released_configs_read_alike():
    """The released config.json names the sliding layers' widths swa_*, with full_attention layers that use_dsa
    (default true) makes indexed; transformers 5 writes per_layer_config and indexed_attention instead: one spec."""
    released = {**SHRUNK, "model_type": "dots3_note", "num_hidden_layers": 6,
                "layer_types": ["full_attention" if i < 2 or i % 4 == 1 else "sliding_attention" for i in range(6)]}
    saved = json.loads(_config("the release's layout").to_json_string())
    assert "per_layer_config" in saved and "swa_kv_lora_rank" not in saved
    ours = [spec_dict_from_config(c, "config.json")[0] for c in (released, saved)]
    assert ours[0]["attention"] == ours[1]["attention"]
    assert ours[0]["attention"]["local_mla"] == {"n_heads": 2, "q_lora_rank": 24, "kv_lora_rank": 24,
                                                 "qk_nope_head_dim": 12, "qk_rope_head_dim": 4, "v_head_dim": 12}


@pytest.mark.parametrize("change, field", [
    ({"per_layer_config": {"2": {"kv_lora_rank": 32}, "3": {"kv_lora_rank": 16}}}, "per_layer_config"),
    ({"per_layer_config": {"0": {"kv_lora_rank": 32}}}, "per_layer_config"),
    ({"per_layer_config": {"2": {"intermediate_size": 32}}}, "per_layer_config.2"),
    ({"layer_types": ["full_attention", "indexed_attention", "sliding_attention"], "num_hidden_layers": 3,
      "per_layer_config": {}}, "layer_types"),
    ({"attention_gate_type": "elementwise"}, "attention_gate_type"),
    ({"swa_num_key_value_heads": 1}, "swa_num_key_value_heads"),
    ({"swa_head_dim": 40}, "swa_head_dim"),
    ({"swa_kv_lora_rank": "1024"}, "swa_kv_lora_rank"),
])
def test_what_transformers_would_not_build_is_refused(change, field):
    raw = {**SHRUNK, "model_type": "dots3_note", "num_hidden_layers": 6, **change}
    with pytest.raises(InputError) as e:
        spec_dict_from_config(raw, "config.json")
    assert e.value.field == field


def test_an_mtp_layer_transformers_does_not_build_is_said_not_counted():
    """The release's MTP layer (vLLM's Dots3NoteConfig: num_nextn_predict_layers 1; transformers ignores layers.46
    and mtp.* when it loads): one warning, and the same spec as without it."""
    raw = {**SHRUNK, "model_type": "dots3_note", "num_hidden_layers": 6}
    spec, report = spec_dict_from_config({**raw, "num_nextn_predict_layers": 1, "mtp_use_moe": False}, "config.json")
    assert spec == spec_dict_from_config(raw, "config.json")[0]
    assert report.warnings == ["config.json: dots3-note's 1 MTP layer(s) (num_nextn_predict_layers) are in the "
                               "checkpoint, not in the model transformers builds, and not modelled: sizes are the "
                               "causal LM's alone"]


def test_the_release_is_280b_with_16b_active():
    """The fixture (dots3-note-prev's config.json, reconstructed: tests/data/hf/SOURCES.md) and the config class's
    own defaults (the same release) at full size on the meta device: numel() is archcalc's total, 13 indexed
    layers of 128 heads and 33 sliding ones of 64."""
    spec = load_model(str(FIXTURE))[0]
    raw = json.loads(FIXTURE.read_text())
    config = AutoConfig.for_model("dots3_note_text", **{k: v for k, v in raw.items() if k != "model_type"})
    default = AutoConfig.for_model("dots3_note_text")
    p = size(spec, Workload.forward(1), CONVENTIONS["torch"]).params
    for c in (config, default):
        assert p.total == sum(t.numel() for t in _model(c).parameters())
    assert spec.attention_layers["global"] == 13 and spec.attention_layers["local"] == 33
    assert (spec.attention.n_heads, spec.attention.local_mla.n_heads) == (128, 64)
    assert round(p.total / 1e9) == 280 and round(p.active / 1e9) == 16


def test_a_decode_step_reads_the_window_in_sliding_layers_and_the_top_k_in_indexed_ones():
    """Past a window of 8 with an indexer keeping 4: each sliding layer's step reads the window (HF's
    DynamicSlidingWindowLayer: the window − 1 tokens it keeps and the new one), latent and rope key of
    its own widths; each indexed layer's reads its top 4 of the latents it holds (HF's indexer picks them; its
    eager core then scores every key, a serving engine reads the 4) and its indexer scores every key it holds."""
    from archcalc.ops.layers import model_ops

    config = _config("the release's layout", sliding_window=8)
    spec, model = _spec(config), _model(config)
    tokens = 12
    ids = torch.zeros(1, tokens, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).cache
        model(input_ids=ids[:, :1], cache=cache, use_cache=True)
    ops_ = {op.name: op for op in model_ops(spec, Workload.decode(tokens + 1))}
    sliding = [layer for layer, t in zip(cache.layers, config.layer_types) if t == "sliding_attention"]
    indexed = [layer for layer, t in zip(cache.layers, config.layer_types) if t == "indexed_attention"]
    assert {layer.keys.shape[-2] for layer in sliding} == {config.sliding_window - 1}  # kept for the next step
    local_token = (_held(sliding[0].keys) + _held(sliding[0].values)) // (config.sliding_window - 1)
    # kv_bytes: what a step reads, and the new token it writes
    assert ops_["layers.attn.core.local"].kv_bytes == (config.sliding_window + 1) * local_token
    per_token = (_held(indexed[0].keys) + _held(indexed[0].values)) // (tokens + 1)
    assert ops_["layers.attn.core.global"].kv_bytes == (config.index_topk + 1) * per_token
    index_token = _held(indexed[0].indexer_keys) // 2 // (tokens + 1)  # (HF's keys are fp32)
    assert ops_["layers.attn.indexer.core"].kv_bytes == (tokens + 2) * index_token


def test_the_config_class_defaults_are_read_from_nothing():
    """A config that gives only its model_type (save_pretrained's diff of the release itself: every value the class's
    default) reads as transformers builds it: the class's own defaults (46 layers, the swa_* widths, a window of 512)
    at full size = numel(), the fixture's spec but for the window (513 there)."""
    default = AutoConfig.for_model("dots3_note_text")
    for model_type in ("dots3_note", "dots3_note_text"):
        data, report = spec_dict_from_config({"model_type": model_type}, "config.json")
        spec = ModelSpec.model_validate({"name": "dots3", **data})
        assert size(spec, Workload.forward(1), CONVENTIONS["torch"]).params.total == sum(
            t.numel() for t in _model(default).parameters())
        fixture = load_model(str(FIXTURE))[0]
        assert spec.attention.model_copy(update={"sliding_window": 513}) == fixture.attention
        assert spec.position == fixture.position and spec.ffn == fixture.ffn
        assert spec.attention.sliding_window == default.sliding_window == 512
