"""Hugging Face config.json -> ModelSpec, with a mapping report.

Every key of the config ends up in exactly one list of the report: used (it
shaped the spec), defaulted (absent, so the family's default was taken), or
ignored (it changes no number archcalc computes, with the reason).  A key
nobody recognises is a visible warning; an unknown model_type, or a value
that would change the math in a way archcalc cannot express, is an error.
The traps handled are listed in reference/anchors-memory-flops.md §C.

Here: the table of model_types (FAMILIES) and the entry points.  The readers live by lineage:
reader.py (the report, ConfigReader), keys.py (each key's type and range), common.py (what every
family shares), llama.py, gpt.py, moe.py, mla.py, hybrid.py and vision.py."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from archcalc.errors import InputError
from archcalc.files import read_json
from archcalc.spec.hf.gpt import (
    _bloom, _cohere_compass, _ctrl, _dbrx, _fairseq_decoder, _falcon, _gpt2, _gpt_bigcode, _gpt_neo, _gpt_neox,
    _gpt_neox_japanese, _modernbert_decoder, _mpt, _nemotron, _openai_gpt, _opt, _parallel_gptj, _persimmon,
    _phi, _starcoder2,
)
from archcalc.spec.hf.hybrid import (
    LARA_MINI_DEFAULTS, _bailing_hybrid, _bamba, _falcon_h1, _granitemoehybrid, _jamba, _kimi_linear,
    _lara_mini, _lfm2, _lfm2_moe, _lfm3, _mamba2_lm, _mamba_lm, _minimax, _nemotron_h, _olmo_hybrid,
    _recurrent_gemma, _rwkv, _xlstm, _zamba, _zamba2,
)
from archcalc.spec.hf.llama import _doge, _dory, _hrm_text, _llama_like
from archcalc.spec.hf.mla import _deepseek, _deepseek_v4, _dots3_note, _longcat_flash, _mla_dense
from archcalc.spec.hf.gemma import (
    GEMMA3N_DEFAULTS, GEMMA4_DEFAULTS, GEMMA4_UNIFIED_DEFAULTS, _drafter_text, _gemma3n, _gemma4, _gemma4_drafter, _gemma4_unified,
)
from archcalc.spec.hf.moe import (
    INKLING_DEFAULTS, INKLING2_DEFAULTS, INKLING2_LOOP_DEFAULTS, _beam, _cohere2_moe, _gpt_oss, _inkling, _inkling2,
    _jetmoe, _laguna, _llama4, _mimo_v2_flash, _minimax_m3, _zaya,
)
from archcalc.spec.hf.reader import ConfigReader, MappingReport
from archcalc.spec.hf.vision import VISION_PROJECTORS, VISION_WITHOUT_CONFIG, _vision
from archcalc.spec.hf.keys import checked


# Values transformers' config classes fill in when a config.json leaves them
# out (multimodal text_config blocks often do).  From Gemma3TextConfig.
FAMILY_DEFAULTS = {
    "gemma3_text": {"vocab_size": 262208, "max_position_embeddings": 131072, "rope_theta": 1_000_000.0,
                    "rope_local_base_freq": 10_000.0, "sliding_window_pattern": 6,
                    "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True},
    "gemma4_text": GEMMA4_DEFAULTS, "lara_mini": LARA_MINI_DEFAULTS, "gemma3n_text": GEMMA3N_DEFAULTS, "gemma4_unified_text": GEMMA4_UNIFIED_DEFAULTS,
    # DoryConfig's (nvidia/NVIDIA-Nemotron-Labs-Dory1.0-4B's shapes, in its own layout: layers counted once)
    "dory": {"vocab_size": 131072, "hidden_size": 2560, "intermediate_size": 7168, "num_hidden_layers": 36,
             "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 8192,
             "sliding_window": 1024, "n_input_layers": 8, "n_output_layers": 8, "n_recurrent_loops": 2},
    # ZayaConfig's (Zyphra/ZAYA1-8B's shapes)
    "zaya": {"vocab_size": 262272, "hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 8,
             "num_key_value_heads": 2, "max_position_embeddings": 131072, "moe_intermediate_size": 2048,
             "num_experts": 16},
    # BambaConfig's context default; Bamba-9B's config.json has no max_position_embeddings.
    "bamba": {"max_position_embeddings": 262144},
    # InklingTextConfig's (also inkling_mm_model's text_config, which has no model_type of its own)
    "inkling_text": INKLING_DEFAULTS, "inkling2_text": INKLING2_DEFAULTS, "inkling2_loop_text": INKLING2_LOOP_DEFAULTS,
    # GraniteSWAConfig / GraniteMoeSWAConfig: a 128-token window (their layer_types default is _granite_swa's).
    "granite_swa": {"sliding_window": 128}, "granitemoe_swa": {"sliding_window": 128},
    # ExaoneMoeConfig: a 4096-token window on 3 layers of 4 (its layer_types rule from the int pattern 4)
    "exaone_moe": {"sliding_window": 4096, "sliding_window_pattern": 4},
    # SarvamMoEConfig (Glm4MoeConfig's model): q/k norms, head_dim 64, RoPE base 8e6; IQuestCoderConfig's head_dim
    "sarvam_moe": {"use_qk_norm": True, "head_dim": 64, "rope_theta": 8_000_000.0}, "iquestcoder": {"head_dim": 128},
    # AfmoeConfig: head_dim 128, a 1,024-token window
    "afmoe": {"head_dim": 128, "sliding_window": 1024},
    # Cohere2MoeConfig's head_dim is 128 whatever the width
    "cohere2_moe": {"head_dim": 128},
    "doge": {"vocab_size": 32768, "hidden_size": 1024, "intermediate_size": 2048, "num_hidden_layers": 32,
             "max_position_embeddings": 2048, "num_attention_heads": 8, "keep_window_size": 2048,
             "num_experts": 16384, "num_experts_per_tok": 64},  # DogeConfig's
    # JetMoeConfig's defaults (jetmoe/jetmoe-8b's file names most of these keys as its remote code did)
    "jetmoe": {"vocab_size": 32000, "hidden_size": 2048, "num_hidden_layers": 12, "num_key_value_heads": 16,
               "kv_channels": 128, "intermediate_size": 5632, "max_position_embeddings": 4096,
               "num_local_experts": 8, "num_experts_per_tok": 2},
    # GlmMoeDsaConfig (zai-org/GLM-5's shapes): three dense layers first; the rest are DeepseekV3Config's
    "glm_moe_dsa": {"first_k_dense_replace": 3, "n_shared_experts": 1, "n_routed_experts": 256,
                    "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "q_lora_rank": 2048,
                    "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 192, "v_head_dim": 256,
                    "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 32,
                    "max_position_embeddings": 202752, "vocab_size": 154880},
    # AXK1Config (skt/A.X-K1's shapes: 61 layers, the first dense, 192 experts of 2,048 + 1 shared, top 8)
    "axk1": {"first_k_dense_replace": 1, "n_shared_experts": 1, "n_routed_experts": 192, "num_experts_per_tok": 8,
             "moe_intermediate_size": 2048, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
             "qk_nope_head_dim": 128, "v_head_dim": 128, "max_position_embeddings": 32768, "vocab_size": 163840,
             "hidden_size": 7168, "intermediate_size": 18432, "num_hidden_layers": 61, "num_attention_heads": 64},
    # AXK2Config's (A.X-K2's released shapes: not checked against a released file, none found)
    "axk2": {"vocab_size": 163840, "hidden_size": 2048, "intermediate_size": 5120, "moe_intermediate_size": 512,
             "num_hidden_layers": 48, "num_attention_heads": 32, "n_shared_experts": 1, "n_routed_experts": 128,
             "kv_lora_rank": 128, "q_lora_rank": 384, "qk_rope_head_dim": 32, "v_head_dim": 64,
             "qk_nope_head_dim": 64, "num_experts_per_tok": 8, "max_position_embeddings": 131072,
             "index_topk": 2048, "index_head_dim": 128, "index_n_heads": 16},
    # DeepseekV4Config's: DeepSeek-V4-Flash (its checkpoint, deepseek-ai/DeepSeek-V4-Flash-Base)
    "deepseek_v4": {"vocab_size": 129280, "hidden_size": 4096, "moe_intermediate_size": 2048, "num_hidden_layers": 43,
                    "num_attention_heads": 64, "head_dim": 512, "q_lora_rank": 1024, "num_experts_per_tok": 6,
                    "n_routed_experts": 256, "n_shared_experts": 1, "max_position_embeddings": 1048576,
                    "rope_theta": 10000.0, "sliding_window": 128, "o_groups": 8, "o_lora_rank": 1024,
                    "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512, "hc_mult": 4,
                    "hc_sinkhorn_iters": 20, "num_nextn_predict_layers": 1},
    # Dots3NoteTextConfig's: dots3-note-prev (its docstring's checkpoint); the sliding layers' widths are the
    # swa_* defaults of spec/hf/mla.py's DOTS3_SLIDING
    **dict.fromkeys(("dots3_note", "dots3_note_text"), {
        "vocab_size": 152064, "hidden_size": 5120, "intermediate_size": 13824, "moe_intermediate_size": 1536,
        "num_hidden_layers": 46, "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256,
        "n_shared_experts": 1, "num_experts_per_tok": 8, "kv_lora_rank": 512, "q_lora_rank": 1024,
        "qk_rope_head_dim": 64, "v_head_dim": 128, "qk_nope_head_dim": 128, "max_position_embeddings": 524288,
        "rope_theta": 80_000_000.0, "tie_word_embeddings": False}),
    # HYV4Config's (no released config.json found)
    "hy_v4": {"vocab_size": 120832, "hidden_size": 2816, "intermediate_size": 6912, "moe_intermediate_size": 768,
              "num_hidden_layers": 34, "num_attention_heads": 32, "n_routed_experts": 256, "n_shared_experts": 1,
              "num_experts_per_tok": 8, "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 192,
              "qk_rope_head_dim": 64, "v_head_dim": 256, "max_position_embeddings": 262144, "index_topk": 2048,
              "index_head_dim": 128, "index_n_heads": 16},
    # MellumConfig (JetBrains' Mellum 2): head_dim 128, a 1,024-token window, 64 experts of 896, 131,072 positions
    "mellum": {"head_dim": 128, "sliding_window": 1024, "num_experts": 64, "moe_intermediate_size": 896,
               "max_position_embeddings": 131072},
    # LagunaConfig (poolside's Laguna XS.2 shapes): head_dim 128, a 512-token window, 256 experts of 512 + a shared one
    "laguna": {"head_dim": 128, "sliding_window": 512, "num_experts": 256, "num_experts_per_tok": 8,
               "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_key_value_heads": 8,
               "max_position_embeddings": 131072},
    # FlintConfig (RecursiveSI/flint): head_dim 128, a 513-token window, dense MLPs in layers 0 and 1
    "flint": {"head_dim": 128, "sliding_window": 513, "max_position_embeddings": 262144, "mlp_only_layers": [0, 1]},
    # Kolibri1Config (Aleph-Alpha/Kolibri-1): head_dim 128, a 513-token window, 262,144 positions
    "kolibri1": {"head_dim": 128, "sliding_window": 513, "max_position_embeddings": 262144},
    # CwmConfig (facebook/cwm, CWM 32B): head_dim 128, an 8,192-token window, 131,072 positions from
    # llama3-scaled RoPE at base 10^6 over 8,192 (its layer_types default: _every_fourth_global)
    "cwm": {"head_dim": 128, "sliding_window": 8192, "max_position_embeddings": 131072, "rope_theta": 1_000_000.0,
            "rope_parameters": {"rope_type": "llama3", "rope_theta": 1_000_000.0, "factor": 16.0,
                                "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192}},
}


# model_types transformers builds as causal LMs that archcalc refuses, with what it lacks for them (the others
# outside FAMILIES get the list of those it reads)
REFUSED = {
    **dict.fromkeys(("qwen4_exp", "qwen4_exp_text"), "Qwen4-Exp's QSA indexer and gated residuals are not modelled yet"),
    "blt": "the Byte Latent Transformer's patcher, local encoder and decoder are not modelled yet",
}


# Speculative-decoding drafters (DrafterSpec) by their outer model_type, and the text_config family each reads
DRAFTERS = {"gemma4_assistant": "gemma4_text", "gemma4_unified_assistant": "gemma4_unified_text"}
# The text model a flat config describes where its class nests it in a text_config (Dots3NoteConfig builds its
# text_config from the top-level keys of the released config.json)
FLAT_TEXT_TYPES = {"dots3_note": "dots3_note_text"}
# The model_type of a text_config that has none, by the outer model_type (its config class's sub-config)
TEXT_CONFIG_TYPES = {**DRAFTERS, "inkling_mm_model": "inkling_text"}


FAMILIES: dict[str, Callable[[ConfigReader], dict]] = {
    **{f: (lambda r, f=f: _llama_like(r, family=f)) for f in (
        "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
        "olmo2", "phi3", "cohere", "granite", "smollm3", "stablelm", "exaone4", "olmoe",
        "ernie4_5", "ernie4_5_moe", "cohere2", "seed_oss", "glm4", "glm4_moe", "dots1", "hunyuan_v1_dense", "olmo",
        "olmo3", "phimoe", "granitemoe", "granitemoeshared", "qwen3_next", "exaone", "apertus", "helium", "arcee", "minimax_m2",
        "ministral", "ministral3", "vaultgemma", "glm", "internlm3", "solar_open", "nanochat", "jais2", "flex_olmo",
        "hunyuan_v1_moe", "granite_swa", "granitemoe_swa", "exaone_moe", "afmoe", "hy_v3", "cwm",
        "hyperclovax", "kolibri1", "flint", "mellum", "bitnet", "diffllama", "aria_text")},
    # Qwen3.5 (text_config of qwen3_5 / qwen3_5_moe): Qwen3-Next's layers, a dense MLP or its MoE.
    "apertus1p5_text": lambda r: _llama_like(r, family="apertus1p5"),
    "qwen3_5_text": lambda r: _llama_like(r, family="qwen3_5"), "qwen3_5_moe_text": lambda r: _llama_like(r, family="qwen3_5_moe"),
    "gemma3": lambda r: _llama_like(r, family="gemma3"),
    "gemma3_text": lambda r: _llama_like(r, family="gemma3"),
    "gemma4": _gemma4, "gemma4_text": _gemma4, "gemma3n": _gemma3n, "gemma3n_text": _gemma3n, "gemma4_unified": _gemma4_unified, "gemma4_unified_text": _gemma4_unified,
    "gpt2": _gpt2, "openai-gpt": _openai_gpt, "gpt_neo": _gpt_neo, "gpt_neox": _gpt_neox, "gpt_neox_japanese": _gpt_neox_japanese, "falcon": _falcon, "RefinedWebModel": _falcon, "RefinedWeb": _falcon,
    "starcoder2": _starcoder2, "nemotron": _nemotron, "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "deepseek_v32": _deepseek, "glm_moe_dsa": _deepseek, "axk1": _deepseek, "axk2": _deepseek, "hy_v4": _deepseek, "glm4_moe_lite": _deepseek, "deepseek_v4": _deepseek_v4,
    "dots3_note": _dots3_note, "dots3_note_text": _dots3_note,
    "gpt_oss": _gpt_oss, "gptj": _parallel_gptj, "codegen": _parallel_gptj, "phi": _phi, "bloom": _bloom,
    # Config classes of their own over an existing model (AutoModelForCausalLM builds LlamaForCausalLM,
    # GPT2LMHeadModel, DeepseekV3ForCausalLM, Glm4MoeForCausalLM): their defaults in FAMILY_DEFAULTS
    "iquestcoder": lambda r: _llama_like(r, family="llama"),
    "gpt-sw3": _gpt2, "sarvam_mla": _deepseek,
    "emu3_text_model": lambda r: _llama_like(r, family="llama"),  # Emu3's text model: Llama (images are VQ tokens)
    "sarvam_moe": lambda r: _llama_like(r, family="glm4_moe"),
    "opt": _opt, "gpt_bigcode": _gpt_bigcode, "mpt": _mpt, "llama4_text": _llama4, "lfm2": _lfm2, "lfm2_moe": _lfm2_moe,
    "jamba": _jamba, "nemotron_h": _nemotron_h,
    "persimmon": _persimmon, "dbrx": _dbrx, "ctrl": _ctrl, "minicpm3": _mla_dense, "youtu": _mla_dense,
    "cohere2_moe": _cohere2_moe, "mimo_v2_flash": _mimo_v2_flash, "longcat_flash": _longcat_flash, "laguna": _laguna, "minimax_m3_vl_text": _minimax_m3, "kimi_linear": _kimi_linear, "olmo_hybrid": _olmo_hybrid, "lara_mini": _lara_mini, "lfm3": _lfm3, "bailing_hybrid": _bailing_hybrid,
    "cohere_compass_text": _cohere_compass, "hrm_text": _hrm_text, "zamba2": _zamba2, "zamba": _zamba, "rwkv": _rwkv,
    "modernbert-decoder": _modernbert_decoder,
    "beam": _beam, "xlstm": _xlstm, "jetmoe": _jetmoe, "doge": _doge, "recurrent_gemma": _recurrent_gemma,
    "inkling_text": _inkling, "inkling2_text": _inkling2, "inkling2_loop_text": lambda r: _inkling2(r, loop=True),
    "dory": _dory, "zaya": _zaya,
    "biogpt": lambda r: _fairseq_decoder(r, {"kind": "learned", "offset": 2}),  # BioGptLearnedPositionalEmbedding
    "xglm": lambda r: _fairseq_decoder(r, {"kind": "sinusoidal"}),  # XGLMSinusoidalPositionalEmbedding: a buffer
    "minimax": _minimax, "minimax_text_01": _minimax, "minimax_m1": _minimax,
    "mamba": _mamba_lm, "falcon_mamba": _mamba_lm, "mamba2": _mamba2_lm, "bamba": _bamba, "granitemoehybrid": _granitemoehybrid, "falcon_h1": _falcon_h1,
}


def read_config(path: str | Path) -> dict:
    p = Path(path)
    if p.is_dir():
        if not (p / "config.json").exists():
            raise InputError(str(path), None, "is a folder without a config.json")
        p = p / "config.json"
    return read_json(p, non_finite=True)


def spec_dict_from_config(cfg: dict, path: str) -> tuple[dict, MappingReport]:
    """The ModelSpec fields a config.json describes, and how each key was used."""
    report = MappingReport()
    outer = ConfigReader(cfg, path, report)
    model_type = None
    if cfg.get("model_type") is not None:
        model_type = checked(path, "model_type", "model_type", cfg["model_type"])
    r = outer
    drafter = model_type if model_type in DRAFTERS else None
    if model_type in TEXT_CONFIG_TYPES and not isinstance(cfg.get("text_config"), dict):
        raise InputError(path, "text_config", f"a {model_type} config describes its layers in text_config; none is given")
    if cfg.get("text_config"):
        text = checked(path, "text_config", "text_config", cfg["text_config"])
        report.used["text_config"] = "language-model fields read from here"
        if text.get("model_type") is not None:
            model_type = checked(path, "text_config.model_type", "model_type", text["model_type"])
        elif model_type in TEXT_CONFIG_TYPES:  # the config class's sub-config
            model_type = TEXT_CONFIG_TYPES[model_type]
        r = ConfigReader(text, path, report, prefix="text_config.", family_defaults=FAMILY_DEFAULTS.get(model_type))
        for key in cfg:
            if key not in ("text_config", "model_type", "vision_config", "audio_config"):
                outer.ignore(key, "outside text_config: changes no parameter of the language model")
    if model_type is None:
        raise InputError(path, "model_type", "missing; archcalc needs it to read the config")
    if r is outer and model_type in FAMILY_DEFAULTS:
        r.family_defaults = FAMILY_DEFAULTS[model_type]
    if model_type in REFUSED:
        raise InputError(path, "model_type", f"{model_type!r} is not supported: {REFUSED[model_type]}")
    if model_type not in FAMILIES:
        raise InputError(path, "model_type", f"{model_type!r} is not supported; supported: {', '.join(sorted(FAMILIES))}")
    report.used[r.prefix + "model_type" if "model_type" in r.cfg else "model_type"] = model_type
    if drafter:
        _drafter_text(r, drafter, model_type, DRAFTERS[drafter])
    # a flat config of a multimodal class names the text model it describes as its text_config would
    spec = {**FAMILIES[model_type](r), "architecture": FLAT_TEXT_TYPES.get(model_type, model_type) if r is outer
            else model_type}
    if drafter:
        spec = {**_gemma4_drafter(outer, r, spec, drafter), "architecture": drafter}
    if cfg.get("vision_config") is not None and cfg.get("model_type") not in VISION_PROJECTORS:
        outer.ignore("vision_config", "a vision tower archcalc does not model: not in any total, nor in fit's weights")
        report.warnings.append(f"{path}: the {cfg.get('model_type')} vision tower (vision_config) is not modelled; "
                               "sizes are the language model's alone")
    elif cfg.get("vision_config") is not None:
        spec["vision"] = _vision(outer, cfg, report)
    if "audio_config" in cfg and cfg["audio_config"] is None:  # Gemma 4 26B / 31B: none
        outer.ignore("audio_config", "null: no audio tower")
    elif cfg.get("audio_config") is not None:  # Gemma 4 E2B / E4B
        outer.ignore("audio_config", "an audio tower archcalc does not model: not in any total, nor in fit's weights")
        report.warnings.append(f"{path}: the {cfg.get('model_type')} audio tower (audio_config) is not modelled; "
                               "sizes are the language model's alone")
    if cfg.get("model_type") in VISION_WITHOUT_CONFIG:
        report.warnings.append(f"{path}: {VISION_WITHOUT_CONFIG[cfg['model_type']]} is not modelled; "
                               "sizes are the language model's alone")
    spec = {k: v for k, v in spec.items() if v not in ({}, None)}
    if r.has("quantization_config"):
        q = checked(path, r.prefix + "quantization_config", "quantization_config", r.cfg["quantization_config"])
        method = r.nested(q, "quant_method", "quantization_config", "?")
        fmt = {"awq": "awq", "gptq": "gptq"}.get(method) or ("fp8-block" if method == "fp8" and q.get("weight_block_size")
                                                              == [128, 128] else None)
        if fmt == "fp8-block" and "fp4" in (q.get("expert_dtype"), r.cfg.get("expert_dtype")):
            fmt = "fp8-block-mxfp4"  # DeepSeek-V4's release: FP4 experts beside its FP8 blocks
        if (method == "modelopt" and q.get("quant_algo") == "NVFP4") or \
                (method == "compressed-tensors" and q.get("format") == "nvfp4-pack-quantized"):
            fmt = "nvfp4"
        how = f"--weights {fmt}" if fmt else "--dtype"
        if method == "bitnet":  # BitNet b1.58's ternary weights, packed four to a byte: no --weights format has them
            how = "--dtype (the ternary weights packed 2 bits each are not a --weights format: sizes are at --dtype)"
        r.ignore("quantization_config", f"checkpoint stored as {method}; size it with {how}")
    r.finish()
    if r is not outer:
        outer.finish()
    return spec, report
