"""Hugging Face config.json import: every collected real config converts,
each bundled spec is exactly its config's conversion, and the traps of
reference/anchors-memory-flops.md §C are handled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import BUNDLED, spec_of

from archcalc.errors import InputError
from archcalc.spec.catalog import load_model
from archcalc.spec.hf import spec_dict_from_config

DATA = Path(__file__).parents[1] / "data" / "hf"
CONFIGS = sorted(p.stem for p in DATA.glob("*.json"))


@pytest.mark.parametrize("name", CONFIGS)
def test_real_config_converts_without_warnings(name):
    """Every key understood; the expected warnings are the vision and audio towers archcalc does not model."""
    spec, report = load_model(str(DATA / f"{name}.json"))
    assert not set(report.used) & set(report.ignored)  # a key read is not also said to be ignored
    unmodelled_vision = [w for w in report.warnings if "vision tower (vision_config) is not modelled" in w
                         or "tokenizers (vision_tokenizer_config" in w]
    unmodelled_audio = [w for w in report.warnings if "audio tower (audio_config) is not modelled" in w]
    assert report.warnings == unmodelled_vision + unmodelled_audio
    assert bool(unmodelled_vision) == (name in ("qwen3.5-27b", "qwen3.5-35b-a3b", "gemma-4-26b-a4b", "gemma-4-31b-it",
                                                "apertus-v1.5-8b", "inkling-small"))
    assert bool(unmodelled_audio) == (name in ("inkling", "inkling-small"))
    assert set(report.used) & {"model_type", "text_config.model_type"}


@pytest.mark.parametrize("name", [n for n in BUNDLED if n in CONFIGS])
def test_bundled_spec_is_its_config_converted(name):
    from_config, _ = load_model(str(DATA / f"{name}.json"))
    bundled = spec_of(name)
    assert bundled.source and bundled.source.startswith("https://")
    assert bundled.model_copy(update={"source": None}) == from_config


def _spec(cfg: dict):
    return spec_dict_from_config(cfg, "config.json")


LLAMA = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100, "max_position_embeddings": 512}


def test_every_key_lands_in_one_list():
    cfg = {**LLAMA, "rms_norm_eps": 1e-5, "bos_token_id": 1, "mystery_knob": 3}
    _, report = _spec(cfg)
    assert "hidden_size" in report.used and "rms_norm_eps" in report.ignored
    assert "tie_word_embeddings" in report.defaulted
    assert report.warnings == ["config.json: key 'mystery_knob' not understood, ignored"]


def test_unknown_model_type_is_an_error():
    with pytest.raises(InputError, match="'bart' is not supported; supported: .*llama"):
        _spec({**LLAMA, "model_type": "bart"})
    with pytest.raises(InputError, match="'blt' is not supported: the Byte Latent Transformer's patcher"):
        _spec({**LLAMA, "model_type": "blt"})


def test_each_refused_model_type_is_one_transformers_builds_as_a_causal_lm():
    """The refusals that say what archcalc lacks name model_types transformers 5.24 builds as causal LMs (or their
    text parts), none of which archcalc reads: the table follows transformers, not a guess."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from archcalc.spec.hf import DRAFTERS, FAMILIES, REFUSED

    assert not set(REFUSED) & set(FAMILIES) and not set(DRAFTERS) & (set(REFUSED) | set(FAMILIES))
    assert all(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[t].endswith("AssistantForCausalLM") for t in DRAFTERS)
    assert all(t in CONFIG_MAPPING and (t in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES or t.endswith("_text"))
               for t in REFUSED), [t for t in REFUSED if t not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES]


def test_qwen2_sliding_window_voided_by_use_sliding_window():
    data, report = _spec({**LLAMA, "model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": False,
                          "max_window_layers": 2})
    assert "sliding_window" not in data["attention"]
    assert "use_sliding_window is false" in report.ignored["sliding_window"]


def test_qwen2_max_window_layers_when_enabled():
    data, _ = _spec({**LLAMA, "model_type": "qwen2", "sliding_window": 32, "use_sliding_window": True,
                     "max_window_layers": 2})
    assert data["attention"]["layer_types"] == ["global", "global", "local", "local"]


def test_layer_types_win_over_the_pattern():
    data, report = _spec({**LLAMA, "model_type": "gemma3_text", "head_dim": 16, "sliding_window": 8,
                          "sliding_window_pattern": 6,
                          "layer_types": ["sliding_attention", "full_attention"] * 2})
    assert data["attention"]["layer_types"] == ["local", "global", "local", "global"]
    assert "layer_types takes precedence" in report.ignored["sliding_window_pattern"]


def test_rope_parameters_of_transformers_5_per_layer_type():
    data, _ = _spec({**LLAMA, "rope_parameters": {
        "full_attention": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512},
        "sliding_attention": {"rope_type": "default"}}})
    assert data["max_context"] == 2048
    assert data["position"]["scaling"] == {"type": "yarn", "factor": 4.0, "original_context": 512}


def test_context_limit_rules():
    llama3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}
    assert _spec({**LLAMA, "max_position_embeddings": 131072, "rope_scaling": llama3})[0]["max_context"] == 131072
    linear = {"type": "linear", "factor": 2.0}
    assert _spec({**LLAMA, "rope_scaling": linear})[0]["max_context"] == 1024
    assert spec_of("deepseek-v3").max_context == 4096 * 40  # yarn: original × factor
    assert spec_of("gemma-3-27b").max_context == 131072  # already scaled: not multiplied again
    # Bamba-9B's file gives no context: BambaConfig's default, 262,144, as transformers loads it
    bamba, report = load_model(str(DATA / "bamba-9b.json"))
    assert bamba.max_context == 262144 and report.defaulted["max_position_embeddings"] == 262144


def test_text_config_nesting_reads_the_language_model():
    _, report = load_model(str(DATA / "gemma-3-27b.json"))
    assert report.used["text_config.hidden_size"] == 5376
    assert report.defaulted["text_config.vocab_size"] == 262208  # Gemma3TextConfig default
    # the vision tower is read now (spec.vision: weights fit loads), with SigLIP's defaults where it is silent
    assert report.used["vision_config.hidden_size"] == 1152 and report.used["vision_config.vision_use_head"] is False
    assert report.defaulted["vision_config.num_channels"] == 3 and "vision_config" not in report.ignored


def test_alias_disagreement_is_a_warning():
    _, report = _spec({**LLAMA, "model_type": "gpt_neox", "rotary_pct": 0.25, "partial_rotary_factor": 0.5,
                       "num_attention_heads": 4})
    assert any("disagrees" in w for w in report.warnings)


def test_mla_ignores_the_meaningless_kv_head_count():
    spec, report = load_model(str(DATA / "deepseek-v3.json"))
    assert "meaningless" in report.ignored["num_key_value_heads"]
    # the MTP layer is read into spec.mtp (reported apart, in no total)
    assert report.used["num_nextn_predict_layers"] == 1 and spec.mtp.layers == 1 and spec.mtp.copies


def test_falcon_remote_code_names():
    assert spec_of("falcon-40b").n_kv_heads == 8 and spec_of("falcon-40b").residual.parallel_norms == 2
    assert spec_of("falcon-7b").n_kv_heads == 1 and spec_of("falcon-7b").residual.parallel_norms == 1


def test_cohere_parallel_block_and_model_max_length():
    data, _ = _spec({**LLAMA, "model_type": "cohere", "model_max_length": 131072, "logit_scale": 0.0625,
                     "use_qk_norm": True, "layer_norm_eps": 1e-5})
    assert data["residual"] == {"kind": "parallel", "parallel_norms": 1}
    assert data["norm"] == {"kind": "layernorm", "bias": False}
    assert data["attention"]["qk_norm"] == "full" and data["max_context"] == 131072


def test_bad_json_is_one_clear_error(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_model(str(bad))
    bad.write_text(json.dumps({**LLAMA, "num_attention_heads": 3}))
    with pytest.raises(InputError, match="attention: n_heads \\(3\\) must be divisible by n_kv_heads \\(2\\)"):
        load_model(str(tmp_path))
