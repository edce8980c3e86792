"""Hugging Face's own modules as an independent oracle for every tests/data/hf/*.json.

For each real config.json, transformers builds the model on the meta device
(no memory, no compute) and we compare, against archcalc's numbers for the
same file:

1. parameters: ``sum(p.numel() for p in model.parameters())`` (tied tensors
   counted once) against ``SizeResult.params.total``;
2. KV cache: the per-layer key/value tensors of the cache a ``use_cache=True``
   forward returns, against ``SizeResult.kv`` (per layer kind, per token and
   at the context, windows capped).  Sliding-window models run past their
   window, in HF's dynamic (default) and static caches;
3. FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` over that forward
   against the forward FLOPs under ``CONVENTIONS["torch"]`` (full rectangle,
   matmul + attention only, logits at every position).

Every difference is explained where it is declared and asserted exactly.
None of this uses archcalc code to produce the expected numbers.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache, StaticCache

from archcalc.cost.totals import SizeResult, size
from archcalc.errors import InputError
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import load_model
from archcalc.spec.hf import spec_dict_from_config
from archcalc.spec.model import ModelSpec

DATA = Path(__file__).parents[1] / "data" / "hf"
CONFIGS = sorted(p.stem for p in DATA.glob("*.json"))
SHORT = 8  # tokens of the forward for models without a sliding window
PAST_WINDOW = 3  # sliding-window models run window + 3 tokens instead, so that the window is exceeded
DTYPE = torch.bfloat16  # HF builds and caches in bf16; archcalc's Workload default kv_dtype is bf16 too

# The 2023 remote-code Falcon files (model_type RefinedWeb / RefinedWebModel, keys n_head,
# n_layer, n_head_kv) are not known to transformers' AutoConfig: it raises "Unrecognized model
# identifier" (asserted in test_rw_falcon_configs_need_hf_conversion).  transformers' own
# falcon/convert_custom_code_checkpoint.py (shipped up to 4.x) turns them into the in-library
# Falcon format; _convert_rw_falcon applies exactly that script's config rewrite.
RW_MODEL_TYPES = ("RefinedWebModel", "RefinedWeb")

# Modules HF builds that archcalc leaves out on purpose (README, Conventions: "vision towers are
# not counted").  The adjustment is their parameter count, pinned so that a change is seen.
# gemma-3-27b: the file is Gemma3ForConditionalGeneration, so HF builds the SigLIP vision tower
# and the projector; its total 27,432,406,640 is the published multimodal HF count
# (tests/data/hf/SOURCES.md), and the language model alone is what archcalc counts.
EXCLUDED_MODULES = {
    "gemma-3-27b": (("model.vision_tower", "model.multi_modal_projector"), 423_060_336, 27_432_406_640),
}

# LongCat-Flash: LongcatFlashExperts allocates gate_up_proj for every expert the router scores, the 256 zero
# (identity) experts included, though only the 512 real ones have a down_proj or ever run: a transformers
# quirk, not weights (the released checkpoint holds 560B, as LongCat says).  Pinned: those rows.
ZERO_EXPERT_ROWS = {"longcat-flash-chat": 256 * 2 * 2048 * 6144 * 28}


def _zero_expert_rows(model: torch.nn.Module) -> int:
    """The gate_up_proj rows of experts with no down_proj (LongcatFlashExperts), from HF's own shapes."""
    return sum((m.gate_up_proj.shape[0] - m.down_proj.shape[0]) * m.gate_up_proj[0].numel() for m in model.modules()
               if type(m).__name__ == "LongcatFlashExperts")


# Multi-token-prediction layers: DeepSeek-V3 and GLM-4.5/4.6 say num_nextn_predict_layers 1, but the
# MTP layer lives only in the checkpoint; HF's DeepseekV3ForCausalLM (Glm4MoeForCausalLM) builds num_hidden_layers
# decoder layers and no more, and archcalc does not count it either.  So the adjustment is zero,
# and test_decoder_layers_and_mtp asserts that HF indeed built no extra layer.
MTP_CONFIGS = sorted(n for n in CONFIGS if json.loads((DATA / f"{n}.json").read_text())
                     .get("num_nextn_predict_layers"))

# HF's Falcon with new_decoder_architecture (falcon-40b) broadcasts its K = 8 key/value heads to
# all H = 128 query heads in FalconAttention._split_heads *before* cache.update, so its cache
# stores H heads per layer: H/K = 16 times the K·(d_k + d_v) values the architecture needs (and
# that archcalc, like vLLM and the original RW code, counts).  An HF quirk, not a model property.
KV_STORES_QUERY_HEADS = {"falcon-40b"}


# Phi-3.5-MoE's longrope embedding picks its short or long factors from max(position_ids), and
# InternLM3's dynamic NTK RoPE compares the sequence length with the one its frequencies were
# built for (dynamic_frequency_update): each a .item() that cannot run on meta.  HF builds these
# models with plain RoPE instead: RoPE has no parameters (its frequencies are buffers),
# FlopCounterMode counts none of its work, and the cache does not depend on it, so no number
# compared here changes.
ROPE_NEEDS_DATA = {"phi-3.5-moe", "internlm3-8b-instruct"}


def _convert_rw_falcon(cfg: dict) -> dict:
    """transformers' falcon/convert_custom_code_checkpoint.py, config part, verbatim in effect."""
    text = json.dumps(cfg)
    text = text.replace("RWForCausalLM", "FalconForCausalLM")
    text = text.replace("RefinedWebModel", "falcon")
    text = text.replace("RefinedWeb", "falcon")
    out = json.loads(text)
    del out["auto_map"]
    if "n_head" in out:
        out["num_attention_heads"] = out.pop("n_head")
    if "n_layer" in out:
        out["num_hidden_layers"] = out.pop("n_layer")
    if "n_head_kv" in out:
        out["num_kv_heads"] = out.pop("n_head_kv")
        out["new_decoder_architecture"] = True
    else:
        out["new_decoder_architecture"] = False
    return out


# MiniMax's released files (model_type minimax_text_01 / minimax_m1, remote code) are not known to
# transformers 5.24's AutoConfig either (test_minimax_remote_configs_need_hf_conversion).  Later
# transformers migrates them into its own MiniMax config (MiniMaxVL01TextConfig, whose tests pin
# the rules); _convert_minimax_remote applies those rules: attn_type_list (0 lightning, 1 full) to
# layer_types, the layernorm_*_alpha/beta residual scales to *_alpha/beta_factor, rope_theta and
# rotary_dim to rope_parameters; postnorm (true) and shared_intermediate_size (0) are what
# transformers builds anyway, so they go.  None of the renamed scales changes a count.
MINIMAX_REMOTE_TYPES = ("minimax_text_01", "minimax_m1")


def _convert_minimax_remote(cfg: dict) -> dict:
    out = {k: v for k, v in cfg.items() if k not in ("auto_map", "postnorm", "shared_intermediate_size",
                                                     "shared_moe_mode", "rotary_dim", "rope_theta", "attn_type_list")}
    assert cfg["postnorm"] is True and cfg["shared_intermediate_size"] == 0
    out.update(model_type="minimax", architectures=["MiniMaxForCausalLM"],
               layer_types=["full_attention" if t == 1 else "linear_attention" for t in cfg["attn_type_list"]],
               rope_parameters={"rope_type": "default", "rope_theta": cfg["rope_theta"],
                                "partial_rotary_factor": cfg["rotary_dim"] / cfg["head_dim"]})
    for old, new in (("layernorm_full_attention", "full_attn"), ("layernorm_linear_attention", "linear_attn"),
                     ("layernorm_mlp", "mlp")):
        for part in ("alpha", "beta"):
            out[f"{new}_{part}_factor"] = out.pop(f"{old}_{part}")
    return out


# Gemma 4's multimodal model cannot run a forward on meta (its mask builder, find_packed_sequence_indices,
# calls .item()), and archcalc does not model its vision tower (a warning says so); Apertus 1.5's wraps its
# language model with VQ image and audio tokenizers archcalc does not model either: their files are built
# as what archcalc counts, the causal LM of their text_config.
TEXT_CONFIG_ONLY = ("gemma4", "apertus1p5", "inkling_mm_model")
# Inkling's multimodal file gives its text_config no model_type: InklingConfig's sub-config is inkling_text
TEXT_MODEL_TYPES = {"inkling_mm_model": "inkling_text"}


def _raw(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def hf_config(name: str):
    cfg = _raw(name)
    if cfg["model_type"] in RW_MODEL_TYPES:
        cfg = _convert_rw_falcon(cfg)
    if cfg["model_type"] in MINIMAX_REMOTE_TYPES:
        cfg = _convert_minimax_remote(cfg)
    if name in ROPE_NEEDS_DATA:
        cfg["rope_scaling"] = None
    if cfg["model_type"] in TEXT_CONFIG_ONLY:
        cfg = {"model_type": TEXT_MODEL_TYPES.get(cfg["model_type"]), **cfg["text_config"]}
    if cfg["model_type"] == "dbrx":  # DBRX's released files write 1; transformers 5's strict DbrxFFNConfig wants 1.0
        cfg["ffn_config"] = {**cfg["ffn_config"], "moe_normalize_expert_weights": 1.0}
    model_type = cfg.pop("model_type")
    return AutoConfig.for_model(model_type, **cfg)


@functools.cache
def hf_model(name: str) -> torch.nn.Module:
    # attn_implementation="eager": attention is two plain matmuls (Q·Kᵀ over all H heads after
    # repeat_kv, then P·V), which FlopCounterMode counts as bmm over the whole T × S rectangle,
    # mask or window notwithstanding: exactly the "torch" convention.  sdpa gives the same counts
    # where it is available, but Gemma 2 (soft-capping) and gpt-oss (sinks) refuse it, so eager is
    # the one choice that works for every fixture.
    # experts_implementation="batched_mm": each token's top-k experts run as one bmm over the
    # gathered expert weights: T·k expert matmuls, independent of the routing, as archcalc counts.
    # The default "grouped_mm" goes through torch._grouped_mm, which FlopCounterMode does not count
    # (Mixtral's forward would lose its experts), and "eager" loops over the experts hit, which
    # needs torch.nonzero on data: impossible on meta.
    # A drafter's centroid head calls .item() (Gemma4AssistantMaskedEmbedder: its mask value), which meta cannot
    # answer: it is built on the CPU (Gemma 4 E2B's is 78M parameters)
    with torch.device("cpu" if name in DRAFTER_CONFIGS else "meta"):
        model = AutoModelForCausalLM.from_config(hf_config(name), attn_implementation="eager",
                                                 experts_implementation="batched_mm", dtype=DTYPE)
    return model.eval()


@functools.cache
def spec_of(name: str) -> ModelSpec:
    return load_model(str(DATA / f"{name}.json"))[0]


def ours(name: str, tokens: int) -> SizeResult:
    return size(spec_of(name), Workload.forward(tokens), CONVENTIONS["torch"])


# Speculative-decoding drafters (Gemma4AssistantForCausalLM): no input ids, no cache of their own.  Their forward
# takes the target's embedding of the token beside its last hidden state (inputs_embeds, 2·backbone_hidden_size)
# and the K/V of the target's last layer of each kind (shared_kv_states), shaped here by the drafter's own
# attention modules (a kind's head_dim and KV heads): a full layer's over all `tokens`, a sliding layer's over
# min(tokens, sliding_window), the slots a target's StaticCache holds there (test_kv_window_cap_equals_hf_static_cache)
DRAFTERS = ("gemma4_assistant", "gemma4_unified_assistant")
DRAFTER_CONFIGS = {n for n in CONFIGS if _raw(n)["model_type"] in DRAFTERS}


def _drafter_inputs(model: torch.nn.Module, tokens: int, context: int | None = None):
    """(inputs_embeds, shared_kv_states) for `tokens` drafted at once over a target that holds `context` tokens
    (default as many)."""
    text, context = model.config.get_text_config(), context or tokens
    shared = {}
    for layer in model.model.layers:  # the last layer of each kind sets its shapes (they are all alike)
        attn = layer.self_attn
        held = min(context, attn.sliding_window) if attn.sliding_window else context
        kv = torch.zeros(1, text.num_attention_heads // attn.num_key_value_groups, held, attn.head_dim, dtype=DTYPE)
        shared[attn.layer_type] = (kv, kv)
    return torch.zeros(1, tokens, 2 * model.config.backbone_hidden_size, dtype=DTYPE), shared


def _drafter_forward(model: torch.nn.Module, tokens: int, context: int | None = None):
    embeds, shared = _drafter_inputs(model, tokens, context)
    # output_hidden_states: transformers 5.24's Gemma4TextModel slices a multi-token input before its KV-shared layers
    # and fails where there are no per-layer inputs (a drafter has none); asking for every hidden state turns that
    # off, and changes no FLOP (generate drafts one token at a time, where nothing is sliced)
    return model(inputs_embeds=embeds, shared_kv_states=shared, output_hidden_states=True)


@functools.cache
def hf_forward(name: str, tokens: int, static: bool = False):
    """One forward of `tokens` tokens with use_cache=True: the FLOPs FlopCounterMode saw (None
    for the static-cache run, which is not counted), and per layer (kind, window, bytes cached
    for the sequence, bytes per cached token) of the cache it returned.  Every meta op runs
    through Python reference kernels (~1 s per forward), so each model runs once per cache."""
    model = hf_model(name)
    ids = torch.zeros(1, tokens, dtype=torch.long, device="meta")
    # RecurrentGemma returns no cache: it is handed one (and its recurrent blocks keep their state in attributes)
    given = DynamicCache(config=model.config) if model.config.model_type == "recurrent_gemma" else None
    if name in DRAFTER_CONFIGS:  # no cache: what it reads is the target's (test_a_drafter_keeps_no_cache)
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            out = _drafter_forward(model, tokens)
        assert getattr(out, "cache", None) is None
        return counter.get_total_flops(), []
    with torch.no_grad():
        if static:
            given = StaticCache(config=model.config, max_cache_len=tokens)
            out, flops = model(input_ids=ids, use_cache=True, cache=given), None
        else:
            with FlopCounterMode(display=False) as counter:
                out = model(input_ids=ids, use_cache=True, **({"cache": given} if given is not None else {}))
            flops = counter.get_total_flops()
    if getattr(out, "state", None) is not None:  # RWKV: five [B, D, L] tensors, the layers' shifts and WKV states
        return flops, [("linear", None, sum(t[:, :, i].numel() * t.element_size() for t in out.state), 0)
                       for i in range(out.state[0].shape[2])]
    if getattr(out, "cache", None) is None:
        out.cache = given
    layers = []
    # A chunked layer is cached like a sliding one (cache_utils: "sliding and chunked are the same
    # in how they should behave, only the mask differs"); the config's layer_types tells them apart.
    if name in NO_HF_CACHE:
        return flops, None
    if hasattr(out.cache, "rnn_state"):  # xLSTMCache: each mLSTM layer's (C, n, m) in a dict, no .layers
        return flops, [("linear", None, sum(t.numel() * t.element_size() for t in state), 0)
                       for state in out.cache.rnn_state.values()]
    types = getattr(model.config, "layer_types", None) or [None] * len(out.cache.layers)
    cached = out.cache.layers
    if hasattr(out.cache, "linear_cache"):  # MiniMaxCache: each lightning layer's state [B, H, d, d] apart
        states = out.cache.linear_cache  # (its .layers has empty DynamicLayers in their places)
        cached = [states[i] if i < len(states) and isinstance(states[i], torch.Tensor) else cached[i]
                  for i in range(len(types))]
    recurrent = iter(m for m in model.modules() if type(m).__name__ == "RecurrentGemmaRecurrentBlock")
    cached = [next(recurrent) if t == "linear_attention" and not hasattr(layer, "keys") else layer
              for layer, t in zip(cached, types)] if model.config.model_type == "recurrent_gemma" else cached
    for layer, layer_type in zip(cached, types):
        if type(layer).__name__ == "RecurrentGemmaRecurrentBlock":  # its RG-LRU's state (fp32) and conv inputs
            held = (layer.rg_lru.recurrent_states, layer.conv1d_state)
            layers.append(("linear", None, sum(t.numel() * t.element_size() for t in held), 0))
            continue
        if isinstance(layer, torch.Tensor):
            layers.append(("linear", None, layer.numel() * layer.element_size(), 0))
            continue
        if type(layer).__name__ == "DummyLayer":  # Nemotron-H's MoE and MLP blocks: no cache
            continue
        if hasattr(layer, "conv_states"):  # a linear layer (GatedDeltaNet, LFM2's conv): a fixed state, no tokens
            state = sum(t.numel() * t.element_size() for d in (layer.conv_states, layer.recurrent_states)
                        for t in d.values() if t is not None)  # LFM2 has no recurrent state
            layers.append(("linear", None, state, 0))
            # Falcon-H1's LinearAttentionAndFullAttentionLayer holds the mixer's state and the
            # attention's K/V of the same layer: the K/V are read below like any attention layer's.
            if getattr(layer, "keys", None) is None:
                continue
        k, v = layer.keys, layer.values
        assert k.shape[0] == v.shape[0] == 1 and k.shape[2] == v.shape[2], (k.shape, v.shape)
        per_token = k.shape[1] * k.shape[3] * k.element_size() + v.shape[1] * v.shape[3] * v.element_size()
        # A dynamic sliding layer keeps its sliding_window; a static one keeps only the slots it
        # allocates, min(max_cache_len, sliding_window), as its max_cache_len.
        window = getattr(layer, "sliding_window", None) if not static else layer.max_cache_len
        kind = "chunked" if layer_type == "chunked_attention" else "local" if layer.is_sliding else "global"
        layers.append((kind, window if layer.is_sliding else None, k.shape[2] * per_token, per_token))
        if getattr(layer, "indexer_keys", None) is not None:  # DeepSeek-V3.2: the indexer's keys [B, S, d]
            ik = layer.indexer_keys
            layers.append(("indexer", None, ik.shape[1] * ik.shape[2] * ik.element_size(), ik.shape[2] * ik.element_size()))
    return flops, layers


# GPT-1's transformers model keeps no cache (OpenAIGPTLMHeadModel recomputes every earlier token at each
# step; its output has no cache): no per-layer cache to compare.  archcalc counts the K and V an engine
# caches, as for GPT-2, whose same attention transformers does cache.
NO_HF_CACHE = {"openai-gpt"}

# DBRX's experts loop (DbrxExperts.forward) picks its experts and their tokens with torch.nonzero and
# indexes with the result, which meta tensors cannot answer: its forward runs on CPU instead, on the
# fixture's architecture shrunk (test_dbrx_forward_on_its_own_routing).
NO_META_FORWARD = {"dbrx-instruct", "longcat-flash-chat",  # (LongCat-Flash's experts loop likewise)
                   "jetmoe-8b-ultrainteract-sft-v4"}  # (JetMoE's gates: expert_size.tolist())


def _mixer_layers(spec: ModelSpec) -> ModelSpec:
    """The spec's layers that have a mixer (the ones whose cache HF keeps): Nemotron-H's FFN-only
    blocks become DummyLayers in HF's cache and "none" layers here; dropping them changes no number
    compared (they hold no cache)."""
    kinds = [k for k in spec.layer_attention if k != "none"]
    if len(kinds) == spec.n_layers:
        return spec
    return ModelSpec.model_validate({**spec.model_dump(exclude_defaults=True), "n_layers": len(kinds),
                                     "attention": {**spec.attention.model_dump(exclude_defaults=True),
                                                   "layer_types": kinds},
                                     "ffn": {"d_ff": 1}})


def _is_sliding(name: str) -> bool:
    """Some layer keeps a bounded cache: a sliding window or a chunk."""
    return bool({"local", "chunked"} & set(spec_of(name).layer_attention))


def _window(name: str, kind: str) -> int | None:
    a = spec_of(name).attention
    return {"local": a.sliding_window, "chunked": a.chunk_size}.get(kind)


SLIDING = [n for n in CONFIGS if _is_sliding(n)]
# GPT-Neo applies its window as a mask buffer (GPTNeoSelfAttention.bias) and its config has no
# sliding_window, so HF's caches, dynamic and static, keep every token in its local layers too
# (test_a_window_applied_as_a_mask_only below); archcalc keeps the window the mask lets a layer see.
MASK_ONLY_WINDOWS = {"gpt-neo-125m"}


def tokens_of(name: str) -> int:
    """The forward's length: past the window for sliding-window models (so that HF's caches
    have to drop tokens), SHORT otherwise.  On meta the length costs nothing."""
    windows = [w for w in (_window(name, "local"), _window(name, "chunked")) if w]
    return max(windows) + PAST_WINDOW if name in SLIDING else SHORT


# ---- 1. parameters ---------------------------------------------------------------------


@pytest.mark.parametrize("name", CONFIGS)
def test_config_json_as_transformers_writes_it(name):
    """The config.json that transformers' own config class writes for each fixture, in full (every
    attribute, under the names it saves: Qwen3-MoE's num_experts is saved as num_local_experts) and
    as save_pretrained's diff (every key at the class's default left out): the same spec as the
    fixture.  A family default archcalc assumes that is not the config class's shows up here."""
    def read(cfg: dict) -> dict:  # the validated spec, its layer pattern and head width spelled out
        spec = ModelSpec.model_validate({"name": name, **spec_dict_from_config(cfg, "config.json")[0]})
        out = spec.model_dump()
        out["attention"] |= {"layer_types": list(spec.layer_attention), "head_dim": spec.qk_head_dim}
        return out

    config = hf_config(name)
    full = json.loads(config.to_json_string(use_diff=False))
    expected = read(full)
    # save_pretrained's file is read without a warning: every key it holds is read or known to cost
    # nothing (the vision and audio towers archcalc does not model say so, as they should)
    saved = spec_dict_from_config(json.loads(config.to_json_string()), "config.json")[1]
    assert [w for w in saved.warnings if "vision tower" not in w and "audio tower" not in w] == []
    assert read({**config.to_diff_dict(), "model_type": full["model_type"]}) == expected
    # The fixture itself (transformers < 5 keys mostly: rope_theta at the top level, not in
    # rope_parameters), where transformers reads it unconverted
    if _raw(name)["model_type"] not in (*RW_MODEL_TYPES, *MINIMAX_REMOTE_TYPES) and name not in ROPE_NEEDS_DATA:
        assert read(_raw(name)) == expected


def test_rw_falcon_configs_need_hf_conversion():
    """The RW-format files really are unknown to transformers as they stand (the reason for
    _convert_rw_falcon); if transformers learns them, this fails and the conversion can go."""
    rw = [n for n in CONFIGS if _raw(n)["model_type"] in RW_MODEL_TYPES]
    assert rw == ["falcon-40b", "falcon-7b"]
    for name in rw:
        cfg = _raw(name)
        with pytest.raises(ValueError, match="Unrecognized model identifier"):
            AutoConfig.for_model(cfg.pop("model_type"), **cfg)


def test_minimax_remote_configs_need_hf_conversion():
    """MiniMax's released remote-code files are unknown to transformers as they stand (the reason
    for _convert_minimax_remote), and archcalc reads them as they are: the converted file (model_type
    minimax, as transformers writes it) maps to the same spec."""
    from archcalc.spec.hf import spec_dict_from_config

    remote = [n for n in CONFIGS if _raw(n)["model_type"] in MINIMAX_REMOTE_TYPES]
    assert remote == ["minimax-m1"]
    for name in remote:
        cfg = _raw(name)
        with pytest.raises(ValueError, match="Unrecognized model identifier"):
            AutoConfig.for_model(cfg.pop("model_type"), **cfg)
        converted = json.loads(hf_config(name).to_json_string())  # the config.json transformers would write
        ours_, _ = spec_dict_from_config(_raw(name), "config.json")
        theirs, _ = spec_dict_from_config(converted, "config.json")
        assert {**theirs, "architecture": "minimax_m1"} == ours_


@pytest.mark.parametrize("name", CONFIGS)
def test_params_equal_hf_numel(name):
    model = hf_model(name)
    hf_total = sum(p.numel() for p in model.parameters())  # parameters() yields a tied tensor once
    ours_total = ours(name, 1).params.total
    if name in EXCLUDED_MODULES:
        paths, pinned_adjustment, pinned_hf_total = EXCLUDED_MODULES[name]
        excluded = {id(p) for path in paths for p in model.get_submodule(path).parameters()}
        adjustment = sum(p.numel() for p in model.parameters() if id(p) in excluded)
        assert (hf_total, adjustment) == (pinned_hf_total, pinned_adjustment)
        hf_total -= adjustment
    assert _zero_expert_rows(model) == ZERO_EXPERT_ROWS.get(name, 0)
    assert ours_total == hf_total - _zero_expert_rows(model)
    assert spec_of(name).attention.v_norm == _has_v_norm(model)


def _has_v_norm(model: torch.nn.Module) -> bool:
    """A weightless norm over each value head (Gemma 3n / 4's v_norm): no parameter, so numel cannot see it."""
    return any(getattr(m, "v_norm", None) is not None for m in model.modules())


@pytest.mark.parametrize("name", sorted(EXCLUDED_MODULES))
def test_the_vision_tower_fit_loads_is_hf_s(name):
    """The modules the language-model count leaves out are what spec.vision counts (ops/vision.py),
    module by module: the SigLIP tower and the projector HF builds from vision_config."""
    from archcalc.cost.totals import param_counts
    from archcalc.ops.vision import vision_ops

    model, spec = hf_model(name), load_model(str(DATA / f"{name}.json"))[0]
    paths = EXCLUDED_MODULES[name][0]
    hf = sum(p.numel() for path in paths for p in model.get_submodule(path).parameters())
    assert param_counts(vision_ops(spec)).total == hf == EXCLUDED_MODULES[name][1]


@pytest.mark.parametrize("name", ["llama-4-scout", "llama-4-maverick"])
def test_the_llama4_vision_tower_fit_loads_is_hf_s(name):
    """Llama 4's checkpoints load Llama4VisionModel and Llama4MultiModalProjector beside the language
    model; transformers' AutoModelForCausalLM builds the language model alone, so these are built here
    from the same config.json, on the meta device, and counted against ops/vision.py."""
    from transformers import Llama4Config
    from transformers.models.llama4.modeling_llama4 import Llama4MultiModalProjector, Llama4VisionModel

    from archcalc.cost.totals import param_counts
    from archcalc.ops.vision import vision_ops

    raw = _raw(name)
    config = Llama4Config(text_config=raw["text_config"], vision_config=raw["vision_config"])
    with torch.device("meta"):
        tower, projector = Llama4VisionModel(config.vision_config), Llama4MultiModalProjector(config)
    hf = sum(p.numel() for m in (tower, projector) for p in m.parameters())
    spec = load_model(str(DATA / f"{name}.json"))[0]
    assert param_counts(vision_ops(spec)).total == hf
    assert sum(p.numel() for p in projector.parameters()) == 4096 * spec.d_model


@pytest.mark.parametrize("head", [False, True])
def test_siglip_towers_of_any_shape(head):
    """transformers' SiglipVisionModel on the meta device, with and without its pooling head,
    against ops/vision.py's tower (the projector, Gemma 3's, is the part left over)."""
    from transformers import SiglipVisionConfig, SiglipVisionModel

    from archcalc.cost.totals import param_counts
    from archcalc.ops.vision import vision_ops
    from archcalc.spec.model import VisionSpec

    shape = {"hidden_size": 96, "intermediate_size": 200, "num_hidden_layers": 3, "num_attention_heads": 4,
             "image_size": 70, "patch_size": 7, "num_channels": 5, "vision_use_head": head}
    with torch.device("meta"):
        tower = SiglipVisionModel(SiglipVisionConfig(**shape))
    vision = VisionSpec(d_model=96, d_ff=200, n_layers=3, n_heads=4, image_size=70, patch_size=7, channels=5, head=head)
    spec = spec_of("gpt2").model_copy(update={"vision": vision})
    ops = vision_ops(spec)
    projector = sum(op.params * op.count for op in ops if op.name.startswith("projector."))
    assert projector == 96 + 96 * spec.d_model  # Gemma3MultiModalProjector: RMSNorm weight, then D_v × D
    assert param_counts(ops).total - projector == sum(p.numel() for p in tower.parameters())


@pytest.mark.parametrize("name", CONFIGS)
def test_decoder_layers_and_mtp(name):
    """HF builds exactly the config's decoder layers: no MTP layer hides in its count.  HRM-Text's layers with
    weights of their own are its two stacks' (LoopSpec.stored_layers), each run several times."""
    model = hf_model(name)
    if spec_of(name).loop is not None:
        stacks = [m for m in model.modules() if type(m).__name__.endswith("Stack")]
        assert sum(len(s.layers) for s in stacks) == spec_of(name).loop.stored_layers == 32 and len(stacks) == 2
        return
    decoder = model.get_decoder()
    if decoder is model:  # Llama4ForCausalLM.get_decoder returns the model itself; its decoder is .model
        decoder = model.model
    # The stacks of blocks (Granite SWA keeps a second ModuleList, its rotary embeddings, one per RoPE base)
    stacks = [m for m in decoder.children() if isinstance(m, torch.nn.ModuleList)
              and not all("RotaryEmbedding" in type(b).__name__ for b in m)]
    spec = spec_of(name)
    # Nemotron-H's blocks are one sublayer each: HF's stack has one block per mixer and per FFN.
    blocks = 2 * spec.n_layers - spec.attention_layers["none"] - spec.ffn_layers["none"]
    # LongCat-Flash's blocks are two layers each (two MLA sublayers, two MLPs and one shortcut MoE)
    blocks = blocks if spec.ffn.none_layers or "none" in spec.layer_attention else \
        spec.n_layers // 2 if spec.architecture == "longcat_flash" else spec.n_layers
    assert len(stacks) == 1 and len(stacks[0]) == blocks
    if name in MTP_CONFIGS:
        assert _raw(name)["num_nextn_predict_layers"] >= 1 and len(stacks[0]) == _raw(name)["num_hidden_layers"]


def test_glm5_is_its_published_744b():
    """GLM-5's model card: "744B parameters (40B active)"; transformers builds 743.9B (its MTP layer apart)."""
    assert round(ours("glm-5", 1).params.total / 1e9) == 744


def test_mtp_and_buffers_are_as_documented():
    assert MTP_CONFIGS == ["deepseek-v3", "deepseek-v3.2", "glm-4.5-air", "glm-4.6", "glm-5"]
    model = hf_model("deepseek-v3")
    buffers = {n.rsplit(".", 1)[-1] for n, _ in model.named_buffers()}
    params = {n.rsplit(".", 1)[-1] for n, _ in model.named_parameters()}
    # README: DeepSeek-V3's e_score_correction_bias is a buffer, never a parameter.
    assert "e_score_correction_bias" in buffers and "e_score_correction_bias" not in params


# ---- 2. KV cache ----------------------------------------------------------------------


def _kv_factor(name: str) -> int:
    """HF cache values per archcalc value; 1 except where KV_STORES_QUERY_HEADS says why."""
    if name not in KV_STORES_QUERY_HEADS:
        return 1
    spec = spec_of(name)
    assert (spec.attention.n_heads, spec.n_kv_heads) == (128, 8)
    return spec.attention.n_heads // spec.n_kv_heads


def _attention_conv_states(name: str, layers: list, result: SizeResult) -> tuple[list, SizeResult]:
    """Inkling's short convs keep a state per sequence in each attention layer (HF: the layer's conv_states beside
    its K/V).  HF keeps each conv's last K inputs in fp32, as its module computes (InklingShortConvolution: x.float());
    archcalc counts the K − 1 a step needs at the cache's dtype, as an engine keeps a conv state (vLLM's
    mamba_cache_dtype "auto": the model's).  Both from HF's own conv modules, layer by layer; then the states are
    set apart, and the K/V are compared as any attention layer's."""
    by_layer: dict[int, list] = {}  # each conv module knows its layer (layer_idx: its cache slot)
    for m in hf_model(name).modules():
        if type(m).__name__ == "InklingShortConvolution":
            by_layer.setdefault(m.layer_idx, []).append(m.conv1d.weight.shape)
    if not by_layer:
        return layers, result
    convs = [by_layer[i] for i in sorted(by_layer)]
    held = [seq for kind, _, seq, _ in layers if kind == "linear"]
    assert held == [sum(c * k * 4 for c, _, k in layer) for layer in convs]
    ours_ = [k for k in result.kv.by_kind if k.kind == "linear"]
    assert sum(k.state_bytes for k in ours_) == sum(c * (k - 1) * DTYPE.itemsize for layer in convs for c, _, k in layer)
    assert sum(k.layers for k in ours_) == len(convs)
    kv = result.kv
    return [layer for layer in layers if layer[0] != "linear"], replace(result, kv=replace(
        kv, bytes=kv.bytes - sum(k.bytes for k in ours_), by_kind=[k for k in kv.by_kind if k.kind != "linear"]))


# DeepSeek-V4's cache layers hold compressed entries and compressor states beside the window (DeepseekV4CSACache,
# DeepseekV4HCACache), which transformers' StaticCache has no layer for: compared layer by layer in
# tests/spec/test_deepseek_v4.py instead
OWN_CACHE_TESTS = {"deepseek-v4-flash"}


@pytest.mark.parametrize("name", [n for n in CONFIGS if n not in MASK_ONLY_WINDOWS | NO_META_FORWARD | NO_HF_CACHE
                                  | DRAFTER_CONFIGS | OWN_CACHE_TESTS])
def test_kv_cache_per_layer_equals_hf_dynamic_cache(name):
    """HF's default DynamicCache after a prefill of `tokens` tokens, layer by layer.

    A full-attention layer holds every token.  A sliding layer holds min(tokens, window − 1):
    DynamicSlidingWindowLayer.update drops the oldest token at once because the next step's own
    token completes the window (cache_utils: "Only cache the last `self.sliding_window - 1`
    tokens").  archcalc allocates min(tokens, window), as HF's StaticCache does (next test),
    so past the window HF's dynamic cache is exactly one token per sliding layer smaller."""
    spec, tokens = spec_of(name), tokens_of(name)
    _, layers = hf_forward(name, tokens)
    layers, result = _attention_conv_states(name, layers, ours(name, tokens))
    factor = _kv_factor(name)
    spec = _mixer_layers(spec)
    state = {k.kind: k for k in result.kv.by_kind}.get("linear")
    index = {k.kind: k for k in result.kv.by_kind}.get("indexer")
    for kind, _, seq_bytes, per_token in layers:
        if kind == "linear":  # the fixed state: HF's conv state holds one column more (see _conv_state_extra)
            assert per_token == 0 and seq_bytes == (state.state_bytes / state.layers * _state_dtype_ratio(name)
                                                    + _conv_state_extra(name))
        if kind == "indexer":  # DeepSeek Sparse Attention's key cache, beside each MLA layer's latent
            ratio = INDEXER_KEY_FP32.get(name, 1)
            assert per_token == ratio * index.bytes_per_token / index.layers and seq_bytes == tokens * per_token
    assert sum(layer[0] == "indexer" for layer in layers) == (index.layers if index else 0)
    layers = [layer for layer in layers if layer[0] not in ("linear", "indexer")]
    if index is not None:
        result = replace(result, kv=replace(result.kv, bytes=result.kv.bytes - index.bytes,
                                            bytes_per_token=result.kv.bytes_per_token - index.bytes_per_token,
                                            by_kind=[k for k in result.kv.by_kind if k.kind != "indexer"]))
    if state is not None:
        result = replace(result, kv=replace(result.kv, bytes=result.kv.bytes - state.bytes,
                                            by_kind=[k for k in result.kv.by_kind if k.kind != "linear"]))
        attending = [kind for kind in spec.layer_attention if kind != "linear"]
        if spec.shared_block is not None:  # Zamba: the shared block's attention, a cache of its own on each use
            attending += ["global"] * len(spec.shared_block.layers)
        spec = spec.model_copy(update={"attention": spec.attention.model_copy(update={"layer_types": attending}),
                                       "n_layers": len(layers), "linear": None, "shared_block": None})
    assert [kind for kind, *_ in layers] == list(spec.layer_attention)
    by_kind = {k.kind: k for k in result.kv.by_kind}
    assert sum(k.layers for k in by_kind.values()) == len(layers) == spec.n_layers
    for kind, window, seq_bytes, per_token in layers:
        k = by_kind[kind]
        assert window == k.window == _window(name, kind)
        assert per_token == factor * k.bytes_per_token / k.layers
        assert seq_bytes == (min(tokens, window - 1) if window else tokens) * per_token
    dropped = 0.0  # bytes archcalc allocates that HF's dynamic cache has already let go
    for kind, k in by_kind.items():
        hf_bytes = sum(b for kd, _, b, _ in layers if kd == kind)
        if k.window and tokens >= k.window:
            assert hf_bytes == factor * (k.bytes - k.bytes_per_token)  # one token fewer in each layer
            dropped += k.bytes_per_token
        else:
            assert hf_bytes == factor * k.bytes
    assert (name in SLIDING) == (dropped > 0)
    assert sum(per_token for *_, per_token in layers) == factor * result.kv.bytes_per_token
    assert sum(seq_bytes for *_, seq_bytes, _ in layers) == factor * (result.kv.bytes - dropped)


# dots3-note's indexer keys are fp32 in transformers' cache: its indexed layers' rotary tables come from
# inputs_embeds.float() and promote the rotated key; archcalc keeps them at the cache dtype, as engines do
INDEXER_KEY_FP32 = {"dots3-note-prev": 2}


@pytest.mark.parametrize("name", [n for n in SLIDING if n not in MASK_ONLY_WINDOWS | DRAFTER_CONFIGS | OWN_CACHE_TESTS])
def test_kv_window_cap_equals_hf_static_cache(name):
    """HF's StaticCache over a prefill past the window allocates min(context, window) slots per
    sliding layer and the whole context per full layer: exactly archcalc's capped bytes."""
    tokens = tokens_of(name)
    _, layers = hf_forward(name, tokens, static=True)
    layers, result = _attention_conv_states(name, layers, ours(name, tokens))
    by_kind = {k.kind: k for k in result.kv.by_kind}
    state = {k.kind: k for k in result.kv.by_kind}.get("linear")
    index = by_kind.pop("indexer", None)  # dots3-note: its indexed layers' keys, every token (the dynamic test)
    assert sum(kind == "indexer" for kind, *_ in layers) == (index.layers if index else 0)
    if index is not None:
        indexed = [b for kind, _, b, _ in layers if kind == "indexer"]
        assert sum(indexed) == INDEXER_KEY_FP32.get(name, 1) * index.bytes
        layers = [layer for layer in layers if layer[0] != "indexer"]
        result = replace(result, kv=replace(result.kv, bytes=result.kv.bytes - index.bytes))
    assert [kind for kind, *_ in layers] == list(spec_of(name).layer_attention)
    for kind, layer_window, seq_bytes, per_token in layers:
        if kind == "linear":  # RecurrentGemma's recurrent blocks: their state, whatever the cache
            assert per_token == 0 and seq_bytes == state.state_bytes / state.layers
            continue
        window = _window(name, kind)
        assert layer_window == window and (window is None or tokens > window)
        assert seq_bytes == (window or tokens) * per_token
    for kind, k in by_kind.items():
        assert sum(b for kd, _, b, _ in layers if kd == kind) == k.bytes
    assert sum(b for _, _, b, _ in layers) == result.kv.bytes


@pytest.mark.parametrize("name", sorted(DRAFTER_CONFIGS))
def test_a_drafter_keeps_no_cache(name):
    """A drafter's forward returns no cache (hf_forward asserts it) and its layers hold no K or V projection: it reads
    the target's.  archcalc's KV cache for it is zero bytes, per token and at any context, and a decode step reads
    the target's cache: each layer's keys held there (a sliding layer's window), K·(d_k + d_v) values each."""
    from archcalc.ops.layers import model_ops

    model = hf_model(name)
    assert not any(n.endswith(("k_proj", "v_proj")) for n, _ in model.named_modules())
    assert hf_forward(name, tokens_of(name))[1] == []
    kv = size(spec_of(name), Workload.decode(4096), CONVENTIONS["torch"]).kv
    assert (kv.bytes_per_token, kv.bytes) == (0, 0)
    read = sum(op.kv_bytes * op.count for op in model_ops(spec_of(name), Workload.decode(4096)) if op.kind == "attention")
    held = {"sliding_attention": min(4096, model.config.text_config.sliding_window), "full_attention": 4096}
    text = model.config.text_config
    assert read == sum(2 * held[layer.self_attn.layer_type] * DTYPE.itemsize * layer.self_attn.head_dim
                       * text.num_attention_heads // layer.self_attn.num_key_value_groups for layer in model.model.layers)


@pytest.mark.parametrize("name", sorted(DRAFTER_CONFIGS))
def test_a_drafter_looks_up_no_token_and_reads_its_top_clusters_rows(name):
    """A drafting step never calls the drafter's embedding (its input is the target's): the table costs no bytes or
    kernel.  Its centroid head gathers top_k clusters of V / C rows of the head's weight for each token: the rows
    Gemma4AssistantMaskedEmbedder's own attributes say, at the weights' 16 bits, are the bytes our lm_head reads."""
    from archcalc.api import load_gpu
    from archcalc.cost.rates import peak_rates
    from archcalc.ops.layers import model_ops

    model, calls = hf_model(name), []
    hook = model.model.embed_tokens.register_forward_hook(lambda *_: calls.append(1))
    try:
        with torch.no_grad():
            _drafter_forward(model, 1, 64)
    finally:
        hook.remove()
    ops_ = {op.name: op for op in model_ops(spec_of(name), Workload.decode(64))}
    table, head, masked = ops_["embedding"], ops_["lm_head"], model.masked_embedding
    assert calls == [] and table.weight_bytes + table.act_bytes == 0 and table.params == model.model.embed_tokens.weight.numel()
    assert peak_rates(load_gpu("h100"), "bf16").kernels(table) == 0
    rows = masked.centroid_intermediate_top_k * masked.vocab_size_per_centroid  # a token's gathered rows
    assert head.weight_bytes == rows * masked.hidden_size * DTYPE.itemsize
    five = {op.name: op for op in model_ops(spec_of(name), Workload(new_tokens=5, context=64))}["lm_head"]
    assert five.weight_bytes == 5 * rows * masked.hidden_size * DTYPE.itemsize  # (5 · 4,096 rows: fewer than V)


@pytest.mark.parametrize("static", [False, True])
@pytest.mark.parametrize("name", sorted(MASK_ONLY_WINDOWS))
def test_a_window_applied_as_a_mask_only(name, static):
    """HF's caches hold every token in every layer: per token they equal ours layer for layer, and
    past the window they hold exactly (tokens − window) tokens more in each local layer than archcalc."""
    tokens, spec = tokens_of(name), spec_of(name)
    result = ours(name, tokens)
    _, layers = hf_forward(name, tokens, static=static)
    assert [(kind, window) for kind, window, *_ in layers] == [("global", None)] * spec.n_layers
    by_kind = {k.kind: k for k in result.kv.by_kind}
    assert [per_token for *_, per_token in layers] == [by_kind[kind].bytes_per_token / by_kind[kind].layers
                                                       for kind in spec.layer_attention]
    assert all(seq_bytes == tokens * per_token for *_, seq_bytes, per_token in layers)
    local, window = by_kind["local"], spec.attention.sliding_window
    assert tokens > window and sum(seq_bytes for *_, seq_bytes, _ in layers) - result.kv.bytes == (
        (tokens - window) * local.bytes_per_token)


@pytest.mark.parametrize("name", sorted(MASK_ONLY_WINDOWS))
def test_the_masked_window_s_pairs_are_the_causal_convention_s(name):
    """GPT-Neo's own mask buffers (built for real, on the CPU, at a short max_position_embeddings):
    the (query, key) pairs they let through, times 4·heads·head_dim FLOPs a pair (QKᵀ and PV), are
    archcalc's attention FLOPs under the causal convention, windows capped."""
    from transformers.models.gpt_neo.modeling_gpt_neo import GPTNeoSelfAttention

    tokens, spec = tokens_of(name), spec_of(name)
    cfg = hf_config(name)
    cfg.max_position_embeddings = tokens
    pairs = sum(int(GPTNeoSelfAttention(cfg, kind, i).bias.sum()) for i, kind in enumerate(spec.layer_attention))
    flops = size(spec, Workload.forward(tokens), CONVENTIONS["causal"]).flops
    assert flops.attention == pairs * 4 * cfg.hidden_size  # heads · head_dim = hidden_size in GPT-Neo


# ---- 3. FLOPs ------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in CONFIGS if n not in NO_META_FORWARD])
def test_forward_flops_equal_flop_counter(name):
    """For sliding-window models the forward runs past the window: under the torch convention
    windows do not cap the T × S rectangle, and neither does HF's eager attention, which masks
    the scores instead of skipping them."""
    tokens = tokens_of(name)
    flops, _ = hf_forward(name, tokens)
    assert (ours(name, tokens).flops.forward + _experts_run_on_every_token(name, tokens)
            + _conv_padding_flops(name) + _cca_recomputed(name, first=True)
            - _elementwise_stream_reads(hf_model(name), tokens)) == flops


def _cca_recomputed(name: str, first: bool) -> int:
    """What ZAYA1's CCA computes beyond the step's tokens, from transformers' own ZayaCCAProjection modules: its
    stack of two convs runs on cached (or zero-padded) inputs, so the depthwise conv makes grouped − 1 outputs more
    than the T the grouped conv reads new (2·C·depthwise FLOPs each); and a first step, with no delayed value yet,
    projects a row of zeros through v_proj_delayed (2·D·K·d/2 FLOPs a sequence).  archcalc counts neither: the
    outputs are recomputations and the zero row's projection is its bias, which an engine would not compute."""
    extra = 0
    for m in hf_model(name).modules():
        if type(m).__name__ == "ZayaCCAProjection":
            depthwise, grouped = m.conv_qk_depthwise.weight, m.conv_qk_grouped.weight
            extra += 2 * depthwise.shape[0] * depthwise.shape[2] * (grouped.shape[2] - 1)
            extra += 2 * m.v_proj_delayed.weight.numel() * first
    return extra


def _linear_convs(name: str) -> list[torch.nn.Conv1d]:
    convs = {"Qwen3NextGatedDeltaNet": "conv1d", "Qwen3_5GatedDeltaNet": "conv1d", "Qwen3_5MoeGatedDeltaNet": "conv1d",
             "Lfm2ShortConv": "conv", "Lfm2MoeShortConv": "conv", "JambaMambaMixer": "conv1d",
             "NemotronHMamba2Mixer": "conv1d", "MambaMixer": "conv1d", "Mamba2Mixer": "conv1d",
             "BambaMixer": "conv1d", "GraniteMoeHybridMambaLayer": "conv1d",
             "FalconMambaMixer": "conv1d", "FalconH1Mixer": "conv1d",
             "KimiLinearDeltaAttention": "conv1d", "RecurrentGemmaRecurrentBlock": "conv_1d",
             "ZambaMambaMixer": "conv1d", "Zamba2MambaMixer": "conv1d",  # each mixer's causal conv
             "InklingShortConvolution": "conv1d"}  # (Inkling's, in its attention layers: _attention_conv_states)
    return [getattr(m, convs[type(m).__name__]) for m in hf_model(name).modules() if type(m).__name__ in convs]


def _conv_padding_flops(name: str) -> int:
    """Qwen3-Next's, LFM2's and Jamba's causal conv runs as nn.Conv1d(padding=K − 1) over a prefill's T tokens:
    T + K − 1 outputs, of which it keeps the first T (causal_conv1d_fn's torch path).  archcalc
    counts the T a causal conv kernel computes; the K − 1 discarded outputs are the difference,
    2 · channels · K FLOPs each, sized from HF's own conv weights [channels, 1, K]."""
    return sum(2 * c.weight.shape[0] * c.weight.shape[2] * (c.weight.shape[2] - 1) for c in _linear_convs(name))


def _conv_state_extra(name: str) -> int:
    """HF's LinearAttentionLayer keeps the last K conv inputs per channel; the next step needs only
    K − 1 of them, which is what vLLM (conv_kernel − 1) and llama.cpp (d_conv − 1) keep and archcalc
    counts: one column of channels values (in the model's dtype) more per layer.  RecurrentGemma's block keeps
    its own conv1d_state of K − 1 inputs: none more."""
    convs = _linear_convs(name)
    return convs[0].weight.shape[0] * DTYPE.itemsize if convs and _raw(name)["model_type"] != "recurrent_gemma" else 0


def _state_dtype_ratio(name: str) -> float:
    """HF's bytes per recurrent-state value over archcalc's fp32 (ops.op.STATE_DTYPE).  1, except for
    MiniMax: MiniMaxLightningAttention allocates its state in the values' dtype (the model's, bf16),
    where MiniMax's released code keeps it in float32 (torch.zeros(...).to(torch.float32)) and
    archcalc counts fp32: HF's state is exactly half.  So for xLSTM: xLSTMCache is allocated in the
    model's dtype, where its step kernel computes in inference_state_dtype (float32, the released file's)."""
    mixers = {type(m).__name__ for m in hf_model(name).modules()}
    return DTYPE.itemsize / 4 if mixers & {"MiniMaxLightningAttention", "xLSTMLayer"} else 1


def _experts_run_on_every_token(name: str, tokens: int) -> int:
    """FLOPs HF's Llama 4 spends on experts a token was not routed to.

    Llama4TextMoe scales every token by its router score (zero off its top-k) and runs ALL E
    experts on it: Llama4TextExperts is two bmm over [E, T, D] (gate_up_proj [E, D, 2F], down_proj
    [E, F, D]).  archcalc's torch convention counts the top-k experts each token is routed to, as
    the other models' batched_mm experts (and every serving engine) run them; the E − k others are
    the difference, sized here from HF's own parameter shapes."""
    model = hf_model(name)
    if model.config.model_type != "llama4_text":
        return 0
    extra = 0
    for layer in model.model.layers:
        if not layer.is_moe_layer:
            continue
        experts = layer.feed_forward.experts
        E, D, F2 = experts.gate_up_proj.shape
        skipped = E - layer.feed_forward.top_k
        extra += 2 * tokens * skipped * (D * F2 + experts.down_proj.shape[1] * experts.down_proj.shape[2])
    return extra


LINEAR = [n for n in CONFIGS if spec_of(n).linear is not None]


# transformers' linear-attention and state-space mixers: every parameter inside one is archcalc's "linear" component
LINEAR_MIXERS = {"RecurrentGemmaRecurrentBlock", "Qwen3NextGatedDeltaNet", "Qwen3_5GatedDeltaNet", "Qwen3_5MoeGatedDeltaNet", "Lfm2ShortConv", "Lfm2MoeShortConv",
                 "JambaMambaMixer", "NemotronHMamba2Mixer", "MambaMixer", "Mamba2Mixer", "BambaMixer",
                 "GraniteMoeHybridMambaLayer", "FalconMambaMixer", "FalconH1Mixer", "MiniMaxLightningAttention",
                 "KimiLinearDeltaAttention", "xLSTMLayer", "Zamba2MambaMixer", "ZambaMambaMixer", "RwkvSelfAttention"}


def _hf_components(model: torch.nn.Module) -> dict[str, int]:
    """Parameters by what HF's module tree says they are: inside a linear mixer; inside an `experts`
    module or a *ParallelExperts one (JetMoE's), outside attention (routed FFN experts); inside an attention
    module (a class named *Attention, or LongcatFlashMLA) but not in a norm or a router (JetMoE's attention
    experts are attention, their *TopKGating a router)."""
    out = {"linear": 0, "attention": 0, "experts": 0}
    for module in model.modules():
        if type(module).__name__ in LINEAR_MIXERS:
            out["linear"] += sum(p.numel() for p in module.parameters())
    for name, p in model.named_parameters():
        parts = name.split(".")
        owners = [type(model.get_submodule(".".join(parts[:i]))).__name__ for i in range(1, len(parts))]
        # (not lightning; LongCat-Flash's attention class is LongcatFlashMLA)
        in_attention = any(o.endswith(("Attention", "FlashMLA")) and o not in LINEAR_MIXERS for o in owners)
        routed = "experts" in parts or owners[-1].endswith("ParallelExperts")
        out["experts"] += p.numel() * (routed and not in_attention)
        router = any(o.endswith("TopKGating") for o in owners)
        out["attention"] += p.numel() * (in_attention and not router and "norm" not in owners[-1].lower())
    return out


@pytest.mark.parametrize("name", LINEAR)
def test_linear_layer_tensors_are_hf_s(name):
    """One linear layer's parameter tensors as archcalc lists them (optimizer state, Muon's matrices
    and FSDP's padding go tensor by tensor: training/tensors.py) are transformers' own, shape for
    shape: Qwen3-Next's fused in_proj_qkvz and in_proj_ba against Qwen3.5's four, Mamba's one
    in_proj of 2E rows, the convs, dt_bias / A_log / D, the norms, out_proj."""
    from archcalc.training.tensors import op_tensors

    layer = next(m for m in hf_model(name).modules() if type(m).__name__ in LINEAR_MIXERS)
    hf_shapes = sorted(tuple(p.shape) for p in layer.parameters())
    ops = [op for op in ours(name, 1).ops if op.name.startswith("layers.linear.")]
    assert sorted(shape for op in ops for shape in op_tensors(op)) == hf_shapes


def test_olmo_hybrid_linear_tensors_are_hf_s():
    """OLMo Hybrid's six input projections (q, k, v, g, a, b apart: GatedDeltaNetSpec.separate_qkv), its conv,
    A_log, dt_bias, gated norm and output, shape for shape, on its config class's model."""
    from archcalc.training.tensors import op_tensors

    config = AutoConfig.for_model("olmo_hybrid", **{**SMALL, **NO_FIXTURE["olmo_hybrid grouped"]})
    spec = ModelSpec.model_validate({"name": "x", **spec_dict_from_config(json.loads(config.to_json_string()),
                                                                           "config.json")[0]})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    layer = next(m for m in model.modules() if type(m).__name__ == "OlmoHybridGatedDeltaNet")
    ops = [op for op in size(spec, Workload.forward(1), CONVENTIONS["torch"]).ops if op.name.startswith("layers.linear.")]
    assert sorted(shape for op in ops for shape in op_tensors(op)) == sorted(tuple(p.shape) for p in layer.parameters())


@pytest.mark.parametrize("name", [n for n in CONFIGS if n not in EXCLUDED_MODULES])
def test_components_equal_hf_modules(name):
    """size's breakdown by component against HF's module tree: the attention projections (norms
    apart), the routed experts and the linear mixers hold exactly what archcalc calls attention,
    experts and linear (a component mislabelled moves parameters between them)."""
    hf = _hf_components(hf_model(name))
    hf["experts"] -= _zero_expert_rows(hf_model(name))
    by = ours(name, 1).params.by_component
    assert {c: by.get(c, 0) for c in hf} == hf


@pytest.mark.parametrize("name", LINEAR)
def test_linear_layer_flops_over_several_chunks(name):
    """A prefill of 2 chunks and 3 tokens (Gated DeltaNet's chunks of 64: the last one padded), so
    that the chunk count, not only the per-chunk work, is what FlopCounterMode checks."""
    assert LINEAR == ["bamba-9b", "falcon-h1-0.5b-instruct", "falcon-mamba-7b", "granite-4.0-h-1b", "granite-4.0-h-tiny",
                      "jamba-1.5-mini", "kimi-linear-48b-a3b", "lfm2-1.2b", "lfm2-8b-a1b", "mamba-130m-hf", "mamba-codestral-7b",
                      "minimax-m1", "nemotron-3-nano-30b-a3b", "qwen3-next-80b-a3b", "qwen3.5-27b", "qwen3.5-35b-a3b",
                      "recurrentgemma-2b-it", "recurrentgemma-9b", "rwkv-4-169m-pile", "xlstm-7b", "zamba-7b-v1-phase1"]
    tokens = 2 * 64 + 3
    flops, _ = hf_forward(name, tokens)
    assert ours(name, tokens).flops.forward + _conv_padding_flops(name) == flops


@pytest.mark.parametrize("name", [n for n in LINEAR if spec_of(n).linear.kind == "lightning"])
def test_lightning_flops_over_several_blocks(name):
    """MiniMax's lightning attention runs a prefill in blocks of block_size (256) tokens: 2 blocks and
    3 tokens, so that the whole blocks, the partial last one and the state passed between them are
    what FlopCounterMode checks."""
    tokens = 2 * spec_of(name).linear.block + 3
    flops, _ = hf_forward(name, tokens)
    assert ours(name, tokens).flops.forward == flops


def test_minimax_on_its_own_config():
    """transformers' own MiniMaxConfig (its default layer_types: full attention on even layers,
    lightning on odd ones), shrunk, with blocks of 4: a prefill of 2 blocks and 3 tokens and a decode
    step after it, the parameters and the cache (K/V per token; the lightning states, bf16 in HF:
    _state_dtype_ratio) against the mapping of the config.json transformers writes."""
    from transformers import MiniMaxConfig

    from archcalc.spec.hf import spec_dict_from_config

    config = MiniMaxConfig(vocab_size=100, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
                           num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, block_size=4)
    data, _ = spec_dict_from_config(json.loads(config.to_json_string()), "config.json")
    spec = ModelSpec.model_validate({"name": "minimax", **data})
    assert spec.layer_attention == ("global", "linear", "global", "linear") and spec.linear.block == 4
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                                 experts_implementation="batched_mm", dtype=DTYPE)
    hf_total = sum(p.numel() for p in model.parameters())
    assert size(spec, Workload.forward(1), CONVENTIONS["torch"]).params.total == hf_total
    prefill, step, cache = _prefill_then_step(model, 11)
    ours_ = size(spec, Workload.forward(11), CONVENTIONS["torch"])
    assert ours_.flops.forward == prefill
    assert size(spec, Workload.decode(12), CONVENTIONS["torch"]).flops.forward == step
    states = [s for s in cache.linear_cache if isinstance(s, torch.Tensor)]
    assert len(states) == 2 and sum(s.numel() * s.element_size() for s in states) == (
        {k.kind: k for k in ours_.kv.by_kind}["linear"].state_bytes * DTYPE.itemsize / 4)
    kv = [layer for layer in cache.layers if layer.keys is not None]
    assert sum(2 * k.keys.shape[1] * k.keys.shape[3] * DTYPE.itemsize for k in kv) == ours_.kv.bytes_per_token


DECODE_CONTEXT = 5  # tokens cached before the decode step


def _prefill_then_step(model: torch.nn.Module, tokens: int) -> tuple[int, int, object]:
    """FlopCounterMode's FLOPs of a prefill of `tokens` tokens and of one decoded token after it, through the cache
    the model's own prefill returned (its keyword: `cache`), and that cache.  RecurrentGemma returns none: it is
    handed one, and told its step's position."""
    ids = torch.zeros(1, tokens, dtype=torch.long, device="meta")
    given, at = None, {}
    if model.config.model_type == "recurrent_gemma":
        given, at = DynamicCache(config=model.config), {"position_ids": torch.full((1, 1), tokens, device="meta")}
    with torch.no_grad():
        with FlopCounterMode(display=False) as prefill:
            out = model(input_ids=ids, use_cache=True, **({"cache": given} if given is not None else {}))
        cache = given if given is not None else getattr(out, "state", None) or out.cache
        with FlopCounterMode(display=False) as step:  # (RWKV's keyword: state)
            model(input_ids=ids[:, :1], use_cache=True, **{"state" if hasattr(out, "state") else "cache": cache}, **at)
    return prefill.get_total_flops(), step.get_total_flops(), cache


def _hf_decode_flops(name: str) -> int:
    """FlopCounterMode's FLOPs of one decoded token after a prefill of DECODE_CONTEXT tokens."""
    return _prefill_then_step(hf_model(name), DECODE_CONTEXT)[1]


@pytest.mark.parametrize("name", [*LINEAR, "llama-3.2-1b", "gemma-3-1b", "hrm-text-1b", "doge-40m", "inkling",
                                  "inkling-small", "zaya1-8b"])
def test_decode_step_flops_equal_flop_counter(name):
    """One decode step: the recurrent update (Mamba's selective scan, Mamba-2's SSD, Gated DeltaNet,
    LFM2's conv) reads the state, not a cache; attention models read the cache (Doge's dt_proj runs over
    every cached key's values again; Inkling's short convs run on their states, its relative logits over the
    extent).  HF's conv keeps K
    inputs where K − 1 suffice (_conv_state_extra), so its decode conv runs over K + 1 inputs and
    computes one output more than the step needs, 2 · channels · K FLOPs per linear layer.  RecurrentGemma's
    decode conv is elementwise (torch.sum of its K inputs times the taps), which FlopCounterMode does not
    count: its 2 · channels · K a layer are missing from HF's count instead."""
    sign = -1 if _raw(name)["model_type"] == "recurrent_gemma" else 1
    extra = sign * sum(2 * c.weight.shape[0] * c.weight.shape[2] for c in _linear_convs(name))
    ours_flops = size(spec_of(name), Workload.decode(DECODE_CONTEXT + 1), CONVENTIONS["torch"]).flops.forward
    assert ours_flops == _hf_decode_flops(name) - extra - _mla_reexpanded(name) - _cca_recomputed(name, first=False)


def test_doge_s_dynamic_mask_is_a_mask():
    """Doge-40M with keep_window_size 4 run on 8 tokens: each query keeps its 4 best keys by dt (a top-k over the
    context, per KV head), as a mask over scores computed for every key: FlopCounterMode's FLOPs are the dense
    count (ours), dt_proj's over all 8 keys included, and the cache holds all 8 tokens."""
    raw = {**_raw("doge-40m"), "keep_window_size": 4}
    spec = ModelSpec.model_validate({"name": "doge", **spec_dict_from_config(raw, "config.json")[0]})
    config = AutoConfig.for_model(raw.pop("model_type"), **raw)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=DTYPE).eval()
    masks = []
    for m in model.modules():
        if hasattr(m, "prepare_dynamic_mask"):
            original = m.prepare_dynamic_mask
            m.prepare_dynamic_mask = lambda *a, _f=original, **k: masks.append(_f(*a, **k)) or masks[-1]
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(input_ids=torch.zeros(1, SHORT, dtype=torch.long, device="meta"), use_cache=True)
    assert len(masks) == spec.n_layers and masks[0].shape[-1] == SHORT > spec.attention.dynamic_mask.keep
    assert size(spec, Workload.forward(SHORT), CONVENTIONS["torch"]).flops.forward == counter.get_total_flops()
    assert all(layer.keys.shape[2] == SHORT for layer in out.cache.layers)


def _mla_reexpanded(name: str) -> int:
    """HF's MLA caches the latent and, each step, runs kv_b_proj over every cached token again (expand_kv
    after cache.update: Kimi Linear's attention layers); archcalc counts the new token's expansion, as an
    engine that keeps the expanded keys or absorbs kv_b does.  The difference, from HF's own kv_b_proj
    shapes: 2 · its weight's size per earlier token per MLA layer."""
    return sum(2 * m.kv_b_proj.weight.numel() * DECODE_CONTEXT for m in hf_model(name).modules()
               if hasattr(m, "kv_b_proj"))


# Families read by the mapping for which no real config.json was found (tests/data/hf/SOURCES.md,
# "Missing"): pinned instead on configs transformers' own config classes build (their defaults,
# shrunk), so that the mapping still meets the modules it describes.
GEMMA4_TYPES = ["sliding_attention", "sliding_attention", "full_attention"] * 2
NO_FIXTURE = {
    "olmo3": {"sliding_window": 4},
    # Gemma 4 (no config.json read from the Hub; tests/spec/test_gemma4.py has the released shapes): E2B's
    # layout (per-layer embeddings, the last layers reusing K/V with a double-wide MLP, global layers of
    # twice the head_dim), 31B's (V from the key projection, fewer KV heads on global layers, soft-capped
    # logits), and the two together
    "gemma4_text": {"head_dim": 16, "global_head_dim": 32, "sliding_window": 4, "hidden_size_per_layer_input": 8,
                    "vocab_size_per_layer_input": 50, "num_kv_shared_layers": 2, "use_double_wide_mlp": True,
                    "num_hidden_layers": 6, "layer_types": GEMMA4_TYPES},
    "gemma4_text k-eq-v": {"head_dim": 16, "global_head_dim": 32, "sliding_window": 4, "hidden_size_per_layer_input": 0,
                           "attention_k_eq_v": True, "num_global_key_value_heads": 1, "final_logit_softcapping": 30.0,
                           "num_hidden_layers": 6, "layer_types": GEMMA4_TYPES},
    "gemma4_text moe": {"head_dim": 16, "global_head_dim": 32, "sliding_window": 4, "hidden_size_per_layer_input": 0,
                        "attention_k_eq_v": True, "num_global_key_value_heads": 1, "enable_moe_block": True,
                        "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32, "num_hidden_layers": 6,
                        "layer_types": GEMMA4_TYPES},
    "gemma4_text shared-k-eq-v": {"head_dim": 16, "sliding_window": 4, "attention_k_eq_v": True,
                                  "num_global_key_value_heads": 1, "hidden_size_per_layer_input": 8,
                                  "vocab_size_per_layer_input": 50, "num_kv_shared_layers": 3,
                                  "num_hidden_layers": 6, "layer_types": GEMMA4_TYPES},
    # Gemma 4 unified (google/gemma-4-12B's text model; no config.json found): Gemma 4's dense layers, no
    # per-layer embeddings, no MoE block
    "gemma4_unified_text": {"head_dim": 16, "sliding_window": 4, "num_hidden_layers": 6, "layer_types": GEMMA4_TYPES,
                            "per_layer_config": {"2": {"head_dim": 32}, "5": {"head_dim": 32}}},
    "granitemoeshared": {"num_local_experts": 4, "num_experts_per_tok": 2, "shared_intermediate_size": 48},
    # Granite 4.0-H with RoPE (the real h-tiny / h-1b files have none: position_embedding_type is not rope)
    "granitemoehybrid rope": {"layer_types": ["mamba", "attention", "mamba", "mamba"], "mamba_n_heads": 8,
                              "mamba_d_state": 16, "mamba_chunk_size": 4, "num_local_experts": 4,
                              "num_experts_per_tok": 2, "shared_intermediate_size": 48,
                              "position_embedding_type": "rope"},
    # Falcon-H1 with a mixer norm and biased projections (falcon-h1-0.5b-instruct.json has neither)
    "falcon_h1 normed": {"mamba_d_ssm": 128, "mamba_n_heads": 8, "mamba_d_head": 16, "mamba_d_state": 16,
                          "mamba_chunk_size": 4, "mamba_rms_norm": True, "mamba_proj_bias": True, "projectors_bias": True,
                          "mamba_n_groups": 2, "attention_bias": True},
    # Ministral: Mistral whose layer_types say which layers slide (the 8B-2410 file says model_type mistral)
    "ministral": {"sliding_window": 4, "head_dim": 16,
                  "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "sliding_attention"]},
    "ministral3": {"head_dim": 16},  # Ministral 3 / Devstral 2's text_config: YaRN and a query scale, no weights
    "vaultgemma": {"head_dim": 16, "sliding_window": 4},  # Gemma 2 without its post-norms
    # GLM-4-9B (glm-4-9b-chat-hf; GlmConfig's defaults): q/k/v biases, fused gate_up, half rotary.
    # glm-edge-1.5b-chat.json has neither the biases nor the half rotary.
    "glm biased": {"head_dim": 16, "pad_token_id": 0},
    "internlm3 biased": {"head_dim": 16, "qkv_bias": True, "bias": True},
    "solar_open": {"head_dim": 16, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                   "n_shared_experts": 2},
    "nanochat": {},  # weightless norms (one after the embedding), l2 q/k norms, ReLU² MLP, soft-capped logits
    "jais2": {},  # LayerNorm, biases everywhere, ReLU² MLP
    "flex_olmo": {"num_experts": 4, "num_experts_per_tok": 2, "pad_token_id": 1, "eos_token_id": 2},  # OLMoE, OLMo 2 post-norms
    "hunyuan_v1_moe": {"head_dim": 16, "num_experts": 4, "moe_topk": 2},
    # Doge with attention_bias (q, k, v, o and dt_proj biased) and mlp_bias, its dynamic mask past 4 keys
    "doge biases": {"attention_bias": True, "mlp_bias": True, "keep_window_size": 4},
    # and its cross-domain MoE: 64 product-key experts (8 keys a half), 8 a token, beside the MLP
    "doge moe": {"is_moe": True, "num_experts": 64, "num_experts_per_tok": 8},
    "glm4_moe_lite": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                      "q_lora_rank": 24, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
                      "v_head_dim": 16, "num_key_value_heads": 4},  # MLA: K = H, as the real config says
    # Biases no real file has: Mamba-2 convs without one (every Mamba-2 fixture has use_conv_bias true),
    # Falcon-H1 with a biased in_proj but not out_proj (mamba_proj_bias vs projectors_bias), LFM2 with
    # biased convs and projections (both lfm2 fixtures have conv_bias false)
    "bamba unbiased-conv": {"attn_layer_indices": [1], "mamba_n_heads": 8, "mamba_d_state": 16,
                            "mamba_chunk_size": 4, "mamba_conv_bias": False},
    "falcon_h1 in-bias": {"mamba_d_ssm": 64, "mamba_n_heads": 8, "mamba_d_head": 8, "mamba_d_state": 16,
                          "mamba_chunk_size": 4, "mamba_proj_bias": True, "projectors_bias": False},
    "lfm2 biased": {"conv_bias": True, "layer_types": ["conv", "full_attention", "conv", "conv"]},
    # Granite SWA with its config class's default layer_types (every 4th layer global), a 4-token window,
    # and layer_rope_theta's 0s (no RoPE) and other bases; GraniteMoeSWA (granite-swash-3b-a600m has no
    # public config.json): GraniteMoeShared's experts and shared MLP under the same attention.
    "granite_swa nope": {"sliding_window": 4, "layer_rope_theta": [10000.0, 0, 500000.0, 0]},
    "granitemoe_swa": {"sliding_window": 4, "num_local_experts": 4, "num_experts_per_tok": 2,
                       "shared_intermediate_size": 48, "layer_rope_theta": [0, 10000.0, 10000.0, 10000.0]},
    # Persimmon without its q/k LayerNorms (persimmon-8b-base.json has them); multi-head, as it is built
    "persimmon plain-qk": {"qk_layernorm": False, "num_key_value_heads": 4},
    # MiniCPM3 (MiniCPM3Config's defaults are openbmb/MiniCPM3-4B's, transformers says; no config.json
    # of it found): MLA with a dense MLP in every layer, tied, v_head_dim = hidden / heads; and with
    # no q LoRA and a biased MLP
    "minicpm3": {"num_key_value_heads": 4, "q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 8,
                 "qk_rope_head_dim": 8},
    "minicpm3 plain-q": {"num_key_value_heads": 4, "q_lora_rank": None, "kv_lora_rank": 16, "qk_nope_head_dim": 8,
                         "qk_rope_head_dim": 8, "v_head_dim": 24, "mlp_bias": True, "tie_word_embeddings": False},
    # Kolibri-1 (Aleph-Alpha/Kolibri-1; no config.json of it found): EXAONE 4's qk-normed attention (RoPE
    # on the sliding layers only, every fifth layer global) in GLM-4's sandwich norms, over DeepSeek-V3's
    # MoE block with a shared expert in every layer
    "kolibri1": {"head_dim": 16, "sliding_window": 4, "num_hidden_layers": 5, "num_experts": 4,
                 "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48},
    # Flint (RecursiveSI/flint; no config.json of it found): Qwen3-MoE's qk-normed attention with a sink
    # per head and RoPE on the sliding layers only, its class's layer_types (layers 0, 1, every i % 4 == 1 and the last global), dense MLPs in
    # layers 0 and 1, then routed experts beside an ungated shared expert
    "flint": {"head_dim": 16, "sliding_window": 4, "num_hidden_layers": 6, "num_experts": 4,
              "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48},
    # Youtu-LLM (tencent/Youtu-LLM-2B; no config.json of it found): DeepSeek-V3's MLA over a dense,
    # bias-free Qwen3 MLP in every layer, tied
    "youtu": {"num_key_value_heads": 4, "q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 8,
              "qk_rope_head_dim": 8, "v_head_dim": 16},
    # EXAONE MoE (K-EXAONE; no public config.json of it found): EXAONE 4's qk-normed attention, RoPE on
    # its sliding layers only, pre-norm blocks, DeepSeek-V3's MoE with a shared expert after one dense layer
    "exaone_moe": {"head_dim": 16, "sliding_window": 4, "num_experts": 4, "num_experts_per_tok": 2,
                   "moe_intermediate_size": 32},
    "exaone_moe listed": {"head_dim": 16, "sliding_window": 4, "num_experts": 4, "num_experts_per_tok": 2,
                          "moe_intermediate_size": 32, "num_shared_experts": 2,
                          "mlp_layer_types": ["dense", "sparse", "dense", "sparse"]},
    # AFMoE (Arcee's Trinity; no public config.json found): gated, qk-normed attention, RoPE on its
    # sliding layers only, sandwich norms, a dense first layer, then shared + routed experts whose
    # expert_bias is a parameter
    "afmoe": {"sliding_window": 4, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
    "afmoe dense2": {"head_dim": 16, "sliding_window": 4, "num_experts": 4, "num_experts_per_tok": 2,
                     "moe_intermediate_size": 32, "num_dense_layers": 2, "num_shared_experts": 1,
                     "global_attn_every_n_layers": 2},
    # Hy3 (HYV3: Tencent's Hy3-preview; no public config.json found): Llama with per-head q/k norms, one
    # dense layer, then 1 shared + routed experts (the router's bias a buffer)
    "hy_v3": {"head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
    # BioGPT and XGLM (fairseq's decoder; microsoft/biogpt's and facebook/xglm-564M's shapes are their
    # config classes' defaults; no config.json of either found): learned positions with 2 spare rows, a
    # sinusoidal table
    "biogpt": {"num_key_value_heads": 4},
    # CTRL (Salesforce/ctrl's shapes are CTRLConfig's defaults): a ReLU MLP, a sinusoidal buffer, a tied head with a bias
    "ctrl": {"n_embd": 64, "n_layer": 4, "n_head": 4, "dff": 96, "num_key_value_heads": 4},
    "xglm": {"d_model": 64, "num_layers": 4, "attention_heads": 4, "ffn_dim": 96, "num_key_value_heads": 4},
    # Qwen1.5-MoE without q/k/v biases (Qwen2MoeConfig.qkv_bias, transformers 5; the real file has them)
    "qwen2_moe unbiased": {"qkv_bias": False, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                           "shared_expert_intermediate_size": 48},
    # Config classes over existing models (no config.json of theirs found): IQuest-Coder (Llama), Sarvam's MLA (DeepSeek-V3) and MoE (GLM-4.5: q/k norms on by default) models
    "iquestcoder": {"head_dim": 16},
    "sarvam_mla": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "q_lora_rank": 24,
                   "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
                   "num_key_value_heads": 4},
    "sarvam_moe": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "head_dim": 16},
    # Cohere2-MoE (no public config.json found): Cohere 2's parallel block over Mixtral-style experts, its
    # class defaults (LayerNorm, every 4th layer global and unrotated); and RMSNorm, a dense prefix of 2
    # rotated global layers of their own width, shared experts
    "cohere2_moe": {"head_dim": 16, "sliding_window": 4, "num_experts": 4, "num_experts_per_tok": 2},
    "cohere2_moe default-head": {"sliding_window": 4, "num_experts": 4, "num_experts_per_tok": 2},  # head_dim 128
    "cohere2_moe prefixed": {"head_dim": 16, "sliding_window": 4, "num_experts": 4, "num_experts_per_tok": 2,
                             "num_shared_experts": 2, "rms_norm_eps": 1e-5, "first_k_dense_replace": 2,
                             "prefix_dense_intermediate_size": 80, "num_hidden_layers": 6},
    # CWM (Meta's Code World Model; facebook/cwm is gated, no config.json of it found): Llama with
    # every fourth layer global and the rest in an 8,192-token window, bias-free attention
    "cwm": {"head_dim": 16, "sliding_window": 4},
    # HyperCLOVA X SEED (naver-hyperclovax; no config.json of it found): Granite with Peri-LN, an RMSNorm
    # after each sublayer too, and without (use_post_norm false: Granite's layers)
    "hyperclovax": {"head_dim": 16},
    "hyperclovax pre-only": {"head_dim": 16, "use_post_norm": False},
    # Mellum 2 (JetBrains; no config.json found): Qwen3-MoE's attention and experts with sliding and dense layers
    # listed, a RoPE base per layer kind; and at its config class's defaults (every layer global and MoE)
    "mellum": {"head_dim": 16, "sliding_window": 4, "num_experts": 4, "num_experts_per_tok": 2,
               "moe_intermediate_size": 32, "layer_types": ["sliding_attention", "full_attention"] * 2,
               "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"], "num_mtp_layers": 1},
    "mellum defaults": {"head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
    # OLMo Hybrid (allenai/Olmo-Hybrid-7B; no config.json found): Gated DeltaNet layers with six projections, OLMo 3's
    # post-norm attention every fourth layer; and with its own linear widths and grouped attention
    "olmo_hybrid": {"pad_token_id": 0, "eos_token_id": 1},
    "olmo_hybrid grouped": {"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
                            "linear_value_head_dim": 16, "attention_bias": True, "pad_token_id": 0, "eos_token_id": 1,
                            "layer_types": ["linear_attention", "full_attention"] * 2},
    # Lara Mini (translated/Lara-4-Mini; no config.json found): Qwen3.5's Gated DeltaNet between Qwen3's
    # attention on rotated sliding layers and unrotated full ones, Flint's experts in every layer
    "lara_mini": {"head_dim": 16, "sliding_window": 4, "num_hidden_layers": 5, "linear_num_key_heads": 2,
                  "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 16, "num_experts": 4,
                  "num_experts_per_tok": 2, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
                  "eos_token_id": 1},
    # Aria's language model (rhymes-ai/Aria; no config.json found): Llama's attention over SiLU-gated experts and
    # a shared MLP of moe_num_shared_experts × their width, in every layer
    "aria_text": {"moe_num_experts": 4, "moe_topk": 2, "moe_num_shared_experts": 2},
    # Laguna at its config class's defaults (every layer full, one head count): the per-head gate without groups
    "laguna": {"head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
               "shared_expert_intermediate_size": 48},
    # Gemma 3n (google/gemma-3n-E2B / E4B; no config.json found, only converters' presets): Gemma 3's layers in
    # AltUp's 4 streams with a LAuReL branch, per-layer embeddings, the last layers reusing K/V
    "gemma3n_text": {"head_dim": 16, "sliding_window": 4, "num_hidden_layers": 10, "hidden_size_per_layer_input": 8,
                     "vocab_size_per_layer_input": 50, "num_kv_shared_layers": 3, "laurel_rank": 4},
    # LFM3 (LiquidAI; no config.json found): LFM2's short convs beside qk-normed attention on sliding and full
    # layers with a sigmoid gate per head, sandwich norms; and without the gate or the sandwich
    "lfm3": {"head_dim": 16, "sliding_window": 4, "num_hidden_layers": 8, "pad_token_id": 0, "bos_token_id": 1,
             "eos_token_id": 2},
    "lfm3 plain": {"head_dim": 16, "sliding_window": 4, "num_hidden_layers": 8, "pad_token_id": 0, "bos_token_id": 1,
                   "eos_token_id": 2, "use_attention_gate": False, "use_sandwich_norm": False, "conv_bias": True},
    # Ling's hybrid (bailing_hybrid, inclusionAI Ling-3.0-Flash; no config.json found): Kimi Delta Attention with
    # full-rank gates, MLA with a sigmoid gate per head every sixth layer, DeepSeek-V3's MoE
    "bailing_hybrid": {"head_dim": 16, "num_hidden_layers": 6, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
                       "qk_nope_head_dim": 8, "v_head_dim": 16, "num_experts": 4, "num_experts_per_token": 2,
                       "moe_intermediate_size": 32, "first_k_dense_replace": 1, "num_key_value_heads": 4,
                       "pad_token_id": 0, "eos_token_id": 1, "n_group": 1, "topk_group": 1},
    # MiniMax-M3's language model (MiniMaxAI/MiniMax-M3; no config.json found): per-head q/k norms, a block indexer
    # on its sparse layers, dense and MoE layers listed, experts beside an ungated shared MLP
    "minimax_m3_vl_text": {"head_dim": 16, "rotary_dim": 8, "num_local_experts": 4, "num_experts_per_tok": 2,
                           "intermediate_size": 32, "shared_intermediate_size": 48, "dense_intermediate_size": 96,
                           "layer_types": ["full_attention", "minimax_m3_sparse"] * 2,
                           "mlp_layer_types": ["dense", "sparse", "sparse", "sparse"], "index_n_heads": 2,
                           "index_head_dim": 16, "index_block_size": 2, "index_topk_blocks": 2, "pad_token_id": 0,
                           "bos_token_id": 1, "eos_token_id": 2},
    # A.X-K1 (skt/A.X-K1; no public config.json): DeepSeek-V3 with a norm on the MoE block's output
    "axk1": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "q_lora_rank": 24,
             "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "num_key_value_heads": 4,
             "n_group": 1, "topk_group": 1},
    # A.X-K2 (axk2): DeepSeek-V3.2's MLA and indexer with q_gate_proj over [norm(q_a), q_a] (each head's query
    # and its output gate), gated norms before attention and before each MoE block; layer 0 dense; and with
    # mlp_layer_types listed (every other layer sparse)
    "axk2": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "q_lora_rank": 24,
             "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "head_dim": 8,
             "index_n_heads": 2, "index_head_dim": 16, "index_topk": 4, "num_key_value_heads": 4, "gated_norm_rank": 4},
    "axk2 listed": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "q_lora_rank": 24,
                    "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "head_dim": 8,
                    "index_n_heads": 2, "index_head_dim": 16, "index_topk": 4, "num_key_value_heads": 4,
                    "gated_norm_rank": 8, "mlp_layer_types": ["sparse", "dense", "sparse", "dense"]},
    # HY-V4 (hy_v4): DeepSeek-V3.2's MLA with sinks and a gate of its own, indexers shared as its class's rule
    # says (layers 0, 1, 5 full), hyper-connections without the stream mix and a learned head; layer 0 dense
    "hy_v4": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "q_lora_rank": 24,
              "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16, "head_dim": 8,
              "index_n_heads": 2, "index_head_dim": 16, "index_topk": 4, "num_key_value_heads": 4, "hc_mult": 3,
              "num_hidden_layers": 6, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2},
    # GLM-5 (glm_moe_dsa): DeepSeek-V3.2's MLA and indexer over DeepSeek-V3's MoE; its class's three
    # leading dense layers; and with indexer sharing (indexer_types "shared": no indexer, the last one's top-k)
    "glm_moe_dsa": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "q_lora_rank": 24,
                    "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
                    "index_n_heads": 2, "index_head_dim": 16, "index_topk": 4, "num_key_value_heads": 4},
    "glm_moe_dsa shared": {"n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                           "q_lora_rank": 24, "kv_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
                           "v_head_dim": 16, "index_n_heads": 2, "index_head_dim": 16, "index_topk": 4,
                           "num_key_value_heads": 4, "first_k_dense_replace": 1, "num_hidden_layers": 6,
                           "indexer_types": ["full", "shared", "shared", "full", "shared", "full"]},
    # MiMo-V2-Flash with q/k/v biases (mimo-v2-flash.json has none), its class's layer pattern over 6 layers
    "mimo_v2_flash biased": {"attention_bias": True, "head_dim": 24, "v_head_dim": 16, "sliding_window": 4,
                             "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                             "num_hidden_layers": 6},
    # Beam (reflection/Beam-1.0-501B-A23B): qk-normed GQA with a biased sigmoid gate per value, RoPE on the sliding
    # layers and NoPE on every sixth and the last, sandwich norms, three dense layers then routed experts; and with
    # RoPE on the full layers only (its own base) and none on the sliding ones
    "beam": {"head_dim": 16, "sliding_window": 4, "num_hidden_layers": 7, "num_experts": 4, "num_experts_per_tok": 2,
             "moe_intermediate_size": 32, "n_group": 2, "topk_group": 1},
    "beam full-rope": {"head_dim": 16, "sliding_window": 4, "num_hidden_layers": 7, "num_experts": 4,
                       "num_experts_per_tok": 2, "moe_intermediate_size": 32, "n_group": 2, "topk_group": 1,
                       "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                           "sliding_attention": None}},
    # Cohere's North (cohere_compass_text; no config.json found): Cohere 2's parallel block on sliding and full
    # layers, RoPE on the sliding ones and none on the full; and RoPE on both, each kind its own base
    "cohere_compass_text": {"sliding_window": 4, "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
                            "eos_token_id": 1, "bos_token_id": 2,
                            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 5e4},
                                                "full_attention": None}},
    "cohere_compass_text rotated": {"sliding_window": 4, "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
                                    "eos_token_id": 1, "bos_token_id": 2, "attention_bias": True,
                                    "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 5e4},
                                                        "full_attention": {"rope_type": "default", "rope_theta": 1e6}}},
    # ModernBERT's decoder (JHU's Ettin decoders; no config.json found): every third layer global, a window of
    # local_attention / 2 on the others, no norm before layer 0's attention, BERT's prediction head; and with every
    # bias ModernBertDecoderConfig can switch on, a SiLU head, no decoder bias
    "modernbert-decoder": {"num_hidden_layers": 5, "local_attention": 8, "num_key_value_heads": 4, "pad_token_id": 0,
                           "eos_token_id": 1, "bos_token_id": 2, "cls_token_id": 2, "sep_token_id": 1},
    "modernbert-decoder biased": {"local_attention": 8, "num_key_value_heads": 4, "norm_bias": True,
                                  "attention_bias": True, "mlp_bias": True, "classifier_bias": True,
                                  "decoder_bias": False, "classifier_activation": "silu", "pad_token_id": 0,
                                  "eos_token_id": 1, "bos_token_id": 2, "cls_token_id": 2, "sep_token_id": 1},
    # Zamba2 (Zyphra/Zamba2-2.7B; no whole config.json found in transformers' format): Mamba-2 layers, a shared
    # transformer block on the hybrid ones (2D-wide attention, gate_up adapters a use); and two blocks in turn with
    # q/k/v adapters and RoPE
    "zamba2": {"num_hidden_layers": 6, "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba"],
               "n_mamba_heads": 4, "mamba_d_state": 16, "adapter_rank": 8, "chunk_size": 4},
    "zamba2 adapters": {"num_hidden_layers": 6, "num_key_value_heads": 4, "n_mamba_heads": 4, "mamba_d_state": 16,
                        "layers_block_type": ["mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba"],
                        "adapter_rank": 8, "chunk_size": 4, "use_shared_attention_adapter": True, "num_mem_blocks": 2,
                        "use_mem_rope": True},
    # Zamba (Zyphra/Zamba-7B-v1): Mamba layers of n_mamba_heads heads, one shared block by ZambaConfig's
    # period/offset rule; and from an explicit layers_block_type with Mamba projection biases and no conv bias
    "zamba": {"num_hidden_layers": 8, "attn_layer_period": 3, "attn_layer_offset": 1, "n_mamba_heads": 2,
              "mamba_d_state": 8, "num_key_value_heads": 4},
    "zamba listed": {"num_hidden_layers": 6, "layers_block_type": ["mamba", "hybrid"] * 3, "n_mamba_heads": 4,
                     "mamba_d_state": 8, "mamba_proj_bias": True, "mamba_conv_bias": False},
    # Nemotron-H with two MLP blocks in a row: the second is a layer with no mixer (attention "none")
    "nemotron_h mlp-only": {"hybrid_override_pattern": "M-*--", "num_hidden_layers": 5, "mamba_num_heads": 8,
                            "mamba_head_dim": 16, "ssm_state_size": 16, "n_groups": 2, "chunk_size": 4},
}
SMALL = {"vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4,
         "num_attention_heads": 4, "num_key_value_heads": 2}


@pytest.mark.parametrize("model_type", sorted(NO_FIXTURE))
def test_families_without_a_fixture_equal_hf_on_its_own_config(model_type):
    config = AutoConfig.for_model(model_type.split()[0], **{**SMALL, "vocab_size": 100, **NO_FIXTURE[model_type]})
    _equal_hf_on_its_own_config(config, model_type.split()[0])


# Multimodal wrappers whose causal LM transformers builds from the wrapper's config (Emu3ForCausalLM from
# Emu3Config: its text model), with the towers' warning each must give
WRAPPED = {"emu3": ("the emu3 VQ-VAE image tokenizer (vq_config) is not modelled",)}


@pytest.mark.parametrize("model_type", sorted(WRAPPED))
def test_wrapped_text_models_equal_hf_on_their_own_config(model_type):
    config = AutoConfig.for_model(model_type)
    text = config.text_config.to_dict()
    config = AutoConfig.for_model(model_type, text_config={**text, **SMALL, "pad_token_id": 0, "bos_token_id": 1,
                                                            "eos_token_id": 2})
    _equal_hf_on_its_own_config(config, model_type, warnings=WRAPPED[model_type])


def _equal_hf_on_its_own_config(config, name: str, warnings: tuple[str, ...] = ()) -> None:
    raw = json.loads(config.to_json_string())  # the config.json transformers itself would write
    data, report = spec_dict_from_config(raw, "config.json")
    assert not set(report.used) & set(report.ignored)  # each key in one list
    # every key transformers writes is read or known to cost nothing; towers not modelled say so
    assert [w.split(": ", 1)[1].split(";")[0] for w in report.warnings] == list(warnings)
    spec = ModelSpec.model_validate({"name": name, **data})
    # and as save_pretrained writes it, every key at the config class's default left out: the same spec
    assert spec_dict_from_config({**config.to_diff_dict(), "model_type": raw["model_type"]}, "config.json")[0] == data
    with torch.device("meta"):  # eval: a serving forward (CohereCompass builds its cache only outside training)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                                 experts_implementation="batched_mm", dtype=DTYPE).eval()
    ids = torch.zeros(1, SHORT, dtype=torch.long, device="meta")
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(input_ids=ids, use_cache=True)
    ours_ = size(spec, Workload.forward(SHORT), CONVENTIONS["torch"])
    assert ours_.params.total == sum(p.numel() for p in model.parameters())
    assert spec.attention.v_norm == _has_v_norm(model)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv1d)]  # the padded causal convs' extra outputs
    padding = sum(2 * c.weight.shape[0] * c.weight.shape[2] * (c.weight.shape[2] - 1) for c in convs)
    assert ours_.flops.forward + padding - _elementwise_stream_reads(model, SHORT) == counter.get_total_flops()
    # The cache: per token, the K and V of every attention layer; per sequence, each linear layer's
    # state, less the extra conv column HF keeps (its conv holds K inputs, K − 1 are needed; see
    # _conv_state_extra).  Falcon-H1's layers hold both.
    per_token = state = 0
    for layer in out.cache.layers:
        k, v = getattr(layer, "keys", None), getattr(layer, "values", None)
        if k is not None and k.numel():
            per_token += (k.shape[1] * k.shape[3] + v.shape[1] * v.shape[3]) * k.element_size()
        # an indexer's keys: DeepSeek Sparse Attention's [B, S, d] (none on GLM-5's shared layers), MiniMax-M3's
        # [B, 1, S, d] on its sparse layers
        ik = getattr(layer, "indexer_keys", None)
        ik = ik if ik is not None else getattr(layer, "idx_keys", None)
        if ik is not None and ik.numel():
            per_token += ik.shape[-1] * ik.element_size()
        for states in (getattr(layer, "conv_states", {}), getattr(layer, "recurrent_states", {})):
            state += sum(t.numel() * t.element_size() for t in states.values() if t is not None)
    state -= sum(c.weight.shape[0] * DTYPE.itemsize for c in convs)
    assert per_token == ours_.kv.bytes_per_token
    assert state == sum(k.state_bytes for k in ours_.kv.by_kind)


def _elementwise_stream_reads(model: torch.nn.Module, tokens: int) -> int:
    """HY-V4's and DeepSeek-V4's hyper-connections read their n streams with an elementwise product and a sum
    (HYV4HyperConnection: torch.sum(pre · streams); DeepseekV4HyperConnection: (pre · streams).sum), which
    FlopCounterMode does not see; archcalc counts each module's read as the contraction it is, 2·n·D FLOPs a token
    (layers.hc.read).  From HF's own shapes: its fn has n·D inputs."""
    return sum(2 * tokens * m.fn.shape[1] for m in model.modules()
               if type(m).__name__ in ("HYV4HyperConnection", "DeepseekV4HyperConnection"))


def assert_params_and_prefill_equal_hf(spec: ModelSpec, model: torch.nn.Module, tokens: int) -> None:
    """numel() is archcalc's parameter total, and FlopCounterMode's prefill of `tokens` (HF's own cache built) is
    archcalc's torch-convention forward less the stream reads FlopCounterMode does not see."""
    ours = size(spec, Workload.forward(tokens), CONVENTIONS["torch"])
    assert ours.params.total == sum(p.numel() for p in model.parameters())
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=torch.zeros(1, tokens, dtype=torch.long, device="meta"), use_cache=True)
    assert ours.flops.forward - _elementwise_stream_reads(model, tokens) == counter.get_total_flops()


@pytest.mark.parametrize("model_type", ["granite_swa nope", "granitemoe_swa"])
def test_granite_swa_rope_layers_are_the_ones_hf_rotates(model_type):
    """layer_rope_theta's 0s: the layers whose attention HF calls without position_embeddings (no
    RoPE), seen on the module's own forward, are the spec's nope_layers; the sliding layers are the
    ones GraniteSWAAttention gives a sliding_window."""
    from archcalc.spec.hf import spec_dict_from_config

    config = AutoConfig.for_model(model_type.split()[0], **{**SMALL, **NO_FIXTURE[model_type]})
    raw = json.loads(config.to_json_string())  # layer_types as the config class filled them in
    data, _ = spec_dict_from_config(raw, "config.json")
    spec = ModelSpec.model_validate({"name": "granite", **data})
    # A config.json without layer_types (HF fills in its own default): the same layers
    assert spec_dict_from_config({k: v for k, v in raw.items() if k != "layer_types"}, "config.json")[0] == data
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                                 experts_implementation="batched_mm", dtype=DTYPE)
    unrotated = []
    for i, layer in enumerate(model.model.layers):
        layer.self_attn.register_forward_pre_hook(
            lambda m, args, kwargs, i=i: unrotated.append(i) if kwargs["position_embeddings"] is None else None,
            with_kwargs=True)
    with torch.no_grad():
        model(input_ids=torch.zeros(1, SHORT, dtype=torch.long, device="meta"))
    assert unrotated and unrotated == (spec.attention.nope_layers or [])
    assert [i for i, layer in enumerate(model.model.layers) if layer.self_attn.sliding_window] == \
        [i for i, kind in enumerate(spec.layer_attention) if kind == "local"]


def test_dbrx_forward_on_its_own_routing():
    """DBRX's forward, which meta cannot run (NO_META_FORWARD): dbrx-instruct.json shrunk (width 64,
    2 layers, 4 heads over 2 KV heads, 4 experts of 32, top 2, as DbrxConfig nests them), built with
    random weights on CPU and run on 8 tokens: FlopCounterMode sees the router and the k·T expert
    rows the routing picks (whichever experts they are), and DynamicCache holds each layer's K and V
    of the 2 KV heads: both ours."""
    raw = _raw("dbrx-instruct")
    small = {**raw, "d_model": 64, "n_layers": 2, "n_heads": 4, "vocab_size": 100, "max_seq_len": 64,
             "attn_config": {**raw["attn_config"], "kv_n_heads": 2},
             "ffn_config": {**raw["ffn_config"], "ffn_hidden_size": 32, "moe_num_experts": 4, "moe_top_k": 2,
                            "moe_normalize_expert_weights": 1.0}}
    spec = ModelSpec.model_validate({"name": "dbrx", **spec_dict_from_config(small, "config.json")[0]})
    config = AutoConfig.for_model(small.pop("model_type"), **small)
    torch.manual_seed(0)
    # no grad on the weights: FlopCounterMode's module tracker hooks the expert views DbrxExpertGLU is handed
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=DTYPE).eval().requires_grad_(False)
    ids = torch.randint(0, 100, (1, SHORT))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(input_ids=ids, use_cache=True)
    ours_ = size(spec, Workload.forward(SHORT), CONVENTIONS["torch"])
    assert ours_.params.total == sum(p.numel() for p in model.parameters())
    assert ours_.flops.forward == counter.get_total_flops()
    cached = [layer.keys.numel() * layer.keys.element_size() + layer.values.numel() * layer.values.element_size()
              for layer in out.cache.layers]
    assert sum(cached) == ours_.kv.bytes_per_token * SHORT and len(cached) == spec.n_layers


@pytest.mark.parametrize("tokens", [1, SHORT])
def test_jetmoe_forward_on_its_own_routing(tokens):
    """JetMoE's forward, which meta cannot run (NO_META_FORWARD: its top-k gates ask expert_size.tolist()): the
    fixture shrunk (width 64, 2 layers, 2 KV heads of 16, 4 experts of 32, top 2: 4 query heads a token), built
    with random weights on CPU and run on 1 and 8 tokens, then one decode step.  FlopCounterMode sees the two
    routers, the k·T rows through the attention experts' q and o and the FFN experts, kv_proj, the cores over
    the 2·2 query heads and the head; DynamicCache holds the 2 KV heads a layer: all ours."""
    small = {**_raw("jetmoe-8b-ultrainteract-sft-v4"), "hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 100,
             "num_key_value_heads": 2, "kv_channels": 16, "num_local_experts": 4, "intermediate_size": 32}
    for old, new in (("ffn_hidden_size", "intermediate_size"), ("moe_num_experts", "num_local_experts"),
                     ("num_layers", "num_hidden_layers"), ("num_attention_heads", None)):
        small.pop(old) if new is None else small.update({old: small[new]})
    small["num_attention_heads"] = 4
    spec = ModelSpec.model_validate({"name": "jetmoe", **spec_dict_from_config(small, "config.json")[0]})
    config = AutoConfig.for_model(small.pop("model_type"), **small)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=DTYPE).eval().requires_grad_(False)
    assert sum(p.numel() for p in model.parameters()) == size(spec, Workload.forward(1), CONVENTIONS["torch"]).params.total
    ids = torch.randint(0, 100, (1, tokens))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(input_ids=ids, use_cache=True)
    assert size(spec, Workload.forward(tokens), CONVENTIONS["torch"]).flops.forward == counter.get_total_flops()
    cached = [layer.keys.numel() * layer.keys.element_size() + layer.values.numel() * layer.values.element_size()
              for layer in out.cache.layers]
    per_token = size(spec, Workload.forward(tokens), CONVENTIONS["torch"]).kv.bytes_per_token
    assert sum(cached) == per_token * tokens and len(cached) == spec.n_layers
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids[:, :1], cache=out.cache, use_cache=True)
    step = size(spec, Workload.decode(tokens + 1), CONVENTIONS["torch"]).flops.forward
    assert step == counter.get_total_flops()


def test_longcat_flash_forward_on_its_own_routing():
    """LongCat-Flash's forward, which meta cannot run (NO_META_FORWARD: its experts loop): longcat-flash-chat.json
    shrunk (width 64, 2 blocks = 4 layers, 4 heads, 4 experts of 32 and 4 zero experts, top 3, MLPs of 48), built
    with random weights on CPU and run on 8 tokens.  Its cache: each of the 4 MLA sublayers' latent and rope key,
    ours.  Its FLOPs: ours, which count top_k real experts a token (an upper bound), less the expert FLOPs of the
    slots its router gave to zero experts (counted from its own routing)."""
    raw = _raw("longcat-flash-chat")
    small = {**raw, "hidden_size": 64, "num_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
             "q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "head_dim": 8,
             "v_head_dim": 16, "n_routed_experts": 4, "zero_expert_num": 4, "moe_topk": 3, "expert_ffn_hidden_size": 32,
             "ffn_hidden_size": 48}
    spec = ModelSpec.model_validate({"name": "longcat", **spec_dict_from_config(small, "config.json")[0]})
    config = AutoConfig.for_model(small.pop("model_type"), **small)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=DTYPE).eval().requires_grad_(False)
    zero_slots = []  # per router call: the top-k slots on zero experts
    for router in [m for m in model.modules() if type(m).__name__ == "LongcatFlashTopkRouter"]:
        router.register_forward_hook(lambda m, args, out: zero_slots.append(int((out[2] >= 4).sum())))
    ids = torch.randint(0, 100, (1, SHORT))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(input_ids=ids, use_cache=True)
    ours_ = size(spec, Workload.forward(SHORT), CONVENTIONS["torch"])
    assert ours_.params.total == sum(p.numel() for p in model.parameters()) - _zero_expert_rows(model)
    per_slot = 2 * (64 * 2 * 32 + 32 * 64)  # one token through one expert: gate_up and down
    assert len(zero_slots) == 2 and sum(zero_slots) > 0  # this seed routes some slots to zero experts
    assert ours_.flops.forward - sum(zero_slots) * per_slot == counter.get_total_flops()
    cached = [layer.keys.numel() * layer.keys.element_size() + layer.values.numel() * layer.values.element_size()
              for layer in out.cache.layers]
    assert sum(cached) == ours_.kv.bytes_per_token * SHORT and len(cached) == spec.n_layers == 4


def _at_full_size(model_type: str, left_out: tuple[str, ...] = ()) -> tuple[dict, ModelSpec, int]:
    """A config class's defaults at full size: the config.json it writes, less the keys `left_out` (read
    back from the class's defaults), read without a warning; our parameter count of it is what the model
    transformers builds from the class holds.  Returns the config.json, the spec and the count."""
    config = AutoConfig.for_model(model_type)
    raw = {k: v for k, v in json.loads(config.to_json_string()).items() if k not in left_out}
    data, report = spec_dict_from_config(raw, "config.json")
    assert not report.warnings
    spec = ModelSpec.model_validate({"name": model_type, **data})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPE)
    total = size(spec, Workload.forward(1), CONVENTIONS["torch"]).params.total
    assert total == sum(p.numel() for p in model.parameters())
    return raw, spec, total


MLA_WIDTHS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def test_minicpm3_defaults_are_minicpm3_4b():
    """MiniCPM3Config's MLA widths (q_lora_rank 768, kv_lora_rank 256, nope 64, rope 32, v_head_dim
    hidden / heads), which transformers says are openbmb/MiniCPM3-4B's: a config.json without them is
    read with them, and counts what MiniCPM3ForCausalLM built from the class's defaults holds."""
    assert _at_full_size("minicpm3", (*MLA_WIDTHS, "head_dim", "qk_head_dim"))[2] == 4_073_875_968


def test_youtu_defaults_are_youtu_llm_2b():
    """YoutuConfig's defaults ("a Youtu-LLM-2B style configuration", transformers says): DeepseekV3Config's
    MLA widths (q_lora_rank 1536, kv_lora_rank 512, nope 128, rope 64, v 128), width 2048, 32 layers, a
    6,144-wide MLP, tied; a config.json without the MLA widths is read with them and counts what
    YoutuForCausalLM built from the class's defaults holds (1,961,560,064: the "2B" of its name).  Its MLP
    is Qwen3's, bias-free whatever mlp_bias says."""
    raw, _, total = _at_full_size("youtu", MLA_WIDTHS)
    assert total == 1_961_560_064 and round(total / 1e9) == 2
    with pytest.raises(InputError, match="mlp_bias: must be false"):
        spec_dict_from_config({**raw, "mlp_bias": True}, "config.json")


@pytest.mark.parametrize("model_type, published_m", [("biogpt", 347), ("xglm", 564), ("ctrl", None)])
def test_fairseq_decoders_at_full_size(model_type, published_m):
    """BioGptConfig's, XGLMConfig's and CTRLConfig's defaults are microsoft/biogpt's, facebook/xglm-564M's
    and Salesforce/ctrl's shapes: our count of them is the model transformers builds, and rounds to the
    published size (BioGPT's paper, Luo et al. 2022: 347M; XGLM 564M, the model's name; CTRL's paper,
    Keskar et al. 2019, says "1.63 billion", 1,637,964,550 cut, not rounded, so only transformers' count)."""
    total = _at_full_size(model_type)[2]
    assert published_m is None or round(total / 1e6) == published_m


def test_gemma3n_defaults_are_e4b_at_full_size():
    """Gemma3nTextConfig's defaults are google/gemma-3n-E4B's text model: our count of it is transformers'
    (6,835,235,568, the per-layer table 262,144 × 35 · 256 of it; 5 layers of 35 global, the last 15 reusing
    K/V, AltUp's 4 streams made and merged by 3 + 3 projections of 2,048², LAuReL of rank 64 in every layer)."""
    _, spec, total = _at_full_size("gemma3n_text")
    params = size(spec, Workload.forward(1), CONVENTIONS["torch"]).params
    assert total == 6_835_235_568 and params.per_layer_table == 262144 * 35 * 256
    assert (spec.residual.kind, spec.residual.streams, spec.residual.laurel_rank) == ("altup", 4, 64)
    assert spec.attention.kv_shared_layers == 15 and spec.layer_attention.count("global") == 7


def test_axk1_defaults_are_a_x_k1_s_published_519b_33b_active():
    """AXK1Config's defaults are skt/A.X-K1's shapes (its README: 61 layers, 1 dense then 60 MoE, 192 experts
    + 1 shared, 8 active, MLA, vocabulary 163,840; "519B total, 33B active"; its config.json is not public):
    our count is the model transformers builds, and the published two; the norm on each MoE block's output
    (post_mlp_layernorm) is one D-vector on each of the 60 MoE layers, on no dense one."""
    raw, spec, total = _at_full_size("axk1")
    params = size(spec, Workload.forward(1), CONVENTIONS["torch"]).params
    assert (round(total / 1e9), round(params.active / 1e9)) == (519, 33)
    assert spec.ffn.moe.post_norm and spec.ffn_layers == {"dense": 1, "moe": 60, "none": 0}
    no_norm = spec.model_copy(update={"ffn": spec.ffn.model_copy(update={"moe": spec.ffn.moe.model_copy(
        update={"post_norm": False})})})
    assert total - size(no_norm, Workload.forward(1), CONVENTIONS["torch"]).params.total == 60 * 7168
    with pytest.raises(InputError, match="q_lora_rank: required"):
        spec_dict_from_config({**raw, "q_lora_rank": None}, "config.json")


def test_axk2_at_its_config_class_s_full_size():
    """AXK2Config's defaults (no released config.json found): transformers' numel at full size, 20,314,494,976, is
    ours; the gates on the norms are W₁ D -> 16 and W₂ 16 -> D before each of the 48 attentions and the 47 MoE
    blocks (layer 0 is dense), and q_gate_proj reads 2 × 384 values (the query latent normed and not) for each
    head's query (64 + 32) and its gate (64)."""
    raw, spec, total = _at_full_size("axk2")
    result = size(spec, Workload.forward(1), CONVENTIONS["torch"])
    assert result.params.total == total == 20_314_494_976
    gates = sum(op.params * op.count for op in result.ops if "_gate.fc" in op.name)
    assert gates == (48 + 47) * 2 * 2048 * 16 and spec.ffn_layers == {"dense": 1, "moe": 47, "none": 0}
    q_b = next(op for op in result.ops if op.name == "layers.attn.q_b")
    assert (q_b.dims.k, q_b.dims.n) == (2 * 384, 32 * (64 + 32 + 64))
    with pytest.raises(InputError, match="q_lora_rank: required"):
        spec_dict_from_config({**raw, "q_lora_rank": None}, "config.json")


def test_doge_s_cross_domain_moe_at_its_config_class_s_full_size():
    """DogeConfig's defaults with is_moe (no released file of that format found): transformers' numel at full
    size, 1,485,186,304, is ours; 16,384 product-key experts a layer, each a row of D in two tables, 64 a token,
    and the router D -> 2 × 128 keys."""
    config = AutoConfig.for_model("doge", is_moe=True)
    spec = ModelSpec.model_validate({"name": "doge", **spec_dict_from_config(json.loads(config.to_json_string()),
                                                                                "config.json")[0]})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    result = size(spec, Workload.forward(1), CONVENTIONS["torch"])
    assert result.params.total == sum(p.numel() for p in model.parameters()) == 1_485_186_304
    tables = [op for op in result.ops if op.name in ("layers.ffn.pk.down", "layers.ffn.pk.up")]
    assert [(op.params, op.active_params, op.count) for op in tables] == [(16384 * 1024, 64 * 1024, 32)] * 2
    router = next(op for op in result.ops if op.name == "layers.ffn.pk.router")
    assert (router.dims.k, router.dims.n) == (1024, 2 * 128)
    # the tables are nn.Embedding, which transformers' FP8 swap (nn.Linear only) leaves at 16 bits: so does ours
    from archcalc.ops.checkpoints import checkpoint_types

    mlp = model.model.layers[0].mlp
    assert isinstance(mlp.down_embed, torch.nn.Embedding) and isinstance(mlp.up_embed, torch.nn.Embedding)
    kinds = {t.name: kind for t, kind in checkpoint_types(spec, result.ops, "fp8-block") if t.layer == 0}
    assert {kinds[f"blk.0.layers.ffn.pk.{part}.weight"] for part in ("down", "up")} == {"bf16"}
    assert kinds["blk.0.ffn_gate.weight"] == "fp8_b128"  # the MLP beside them is quantized


def test_hy_v4_at_its_config_class_s_full_size():
    """HYV4Config's defaults (no released config.json found): transformers' numel at full size, 58,278,193,133, is
    ours.  Its hyper-connections keep 4 streams: each of the 68 modules maps the 4·2816 state to 8 logits (the 4
    read and 4 write weights, fp32) with 8 biases and 2 scales, and the head maps it to 4 with 4 biases and a
    scale; sinks are one a head; indexers on layers 0, 1, 5, ..., 33 only."""
    raw, spec, total = _at_full_size("hy_v4")
    result = size(spec, Workload.forward(1), CONVENTIONS["torch"])
    assert result.params.total == total == 58_278_193_133
    hc = sum(op.params * op.count for op in result.ops if op.component == "residual")
    assert hc == 68 * (8 * 4 * 2816 + 8 + 2) + (4 * 4 * 2816 + 4 + 1)
    assert spec.attention.indexer.shared_layers == [i for i in range(34) if i > 0 and (i - 1) % 4]


def test_cwm_defaults_are_cwm_32b():
    """CwmConfig's defaults are CWM's (facebook/cwm: "a 32-billion-parameter open-weights LLM", its
    report says; the count cut, as the report states it): our count of them is the model transformers
    builds; its layer_types, when a config leaves them out, are the class's (every fourth layer global,
    the rest in the 8,192-token window, as CwmModel masks them); and attention biases are refused, since
    CwmAttention has none whatever the config says."""
    raw, spec, total = _at_full_size("cwm")
    assert total == 32_581_097_472 and total // 10**9 == 32
    config = AutoConfig.for_model("cwm")
    assert spec.layer_attention == tuple("global" if t == "full_attention" else "local" for t in config.layer_types)
    assert spec.attention.sliding_window == config.sliding_window == 8192 and spec.max_context == 131072
    data = spec_dict_from_config(raw, "config.json")[0]
    assert spec_dict_from_config({k: v for k, v in raw.items() if k != "layer_types"}, "config.json")[0] == data
    with pytest.raises(InputError, match="attention_bias: must be false"):
        spec_dict_from_config({**raw, "attention_bias": True}, "config.json")


def test_gpt_sw3_is_gpt2():
    """model_type gpt-sw3 (AI Sweden's GPT-SW3): transformers' AutoConfig gives GPT2Config and
    AutoModelForCausalLM GPT2LMHeadModel, so the gpt2 fixture under that name is the same spec."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    assert (CONFIG_MAPPING_NAMES["gpt-sw3"], MODEL_FOR_CAUSAL_LM_MAPPING_NAMES["gpt-sw3"]) == ("GPT2Config", "GPT2LMHeadModel")
    as_gpt2 = spec_dict_from_config(_raw("gpt2"), "config.json")[0]
    assert spec_dict_from_config({**_raw("gpt2"), "model_type": "gpt-sw3"}, "config.json")[0] == \
        {**as_gpt2, "architecture": "gpt-sw3"}


def test_fuyu_is_its_persimmon_language_model_and_says_so():
    """Fuyu (text_config: persimmon) has no vision_config, yet its image patches go through a linear
    of its own: the spec counts the language model, transformers' FuyuForCausalLM less that
    projection, and the mapping warns that the projection is left out."""
    from transformers import FuyuConfig

    config = FuyuConfig(text_config={**SMALL, "model_type": "persimmon", "num_key_value_heads": 4})
    data, report = spec_dict_from_config(json.loads(config.to_json_string()), "config.json")
    spec = ModelSpec.model_validate({"name": "fuyu", **data})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPE)
    projection = model.get_submodule("model.vision_embed_tokens")
    assert sum(p.numel() for p in projection.parameters()) > 0
    assert size(spec, Workload.forward(1), CONVENTIONS["torch"]).params.total == \
        sum(p.numel() for p in model.parameters()) - sum(p.numel() for p in projection.parameters())
    assert any("vision_embed_tokens" in w and "not modelled" in w for w in report.warnings)


# ---- 5. Quantized checkpoints ------------------------------------------------------------------

# transformers' fine-grained FP8 (FineGrainedFP8Config: DeepSeek-V3's format, e4m3 weights and an
# fp32 weight_scale_inv per 128 × 128 block) swaps every nn.Linear but lm_head for an FP8Linear and
# every `experts` module for FP8Experts, allocating the quantized tensors at their stored shapes.
# Bytes as the checkpoint stores them: e4m3 1 byte, scale_inv fp32 4, everything else bf16 (HF
# allocates FP8Linear's bias and some routers in fp32 at run time; DeepSeek-V3's files hold bf16).
# What an FP8 release keeps in bf16 beyond what is not an nn.Linear (embeddings, norms, DeepSeek's and
# Qwen3's routers): the head, and the Qwen2-MoE / Qwen3-Next shared-expert gate, an nn.Linear of one
# output that the quantizer's default list (lm_head alone) would convert.  The released FP8 configs
# name their gates in quantization_config.modules_to_not_convert (Qwen3-30B-A3B-FP8: mlp.gate).
FP8_KEPT = ["lm_head", "embed_out", "head", "shared_expert_gate"]  # embed_out, head: GPT-NeoX's and RWKV's lm_head
# ZAYA1's router is an MLP of nn.Linears (ZayaRouter: down_proj, router_mlp.fc1, fc2, out_proj), kept at 16 bits as
# archcalc keeps every router; no FP8 ZAYA1 file was found to say what its quantization_config keeps
FP8_KEPT_BY_NAME = {"zaya1-8b": [r"model\.layers\.\d+\.mlp\.gate"],
                    # DeepSeek-V4's release keeps its HCA compressors' and its indexers' projections bf16 (the Hub's
                    # counts by type: tests/spec/test_deepseek_v4.py); its HCA layers are the odd ones from layer 3
                    "deepseek-v4-flash": [r"model\.layers\.\d*[13579]\.self_attn\.compressor\.(kv|gate)_proj",
                                          r"model\.layers\.\d+\.self_attn\.compressor\.indexer\..*"]}
FP8_REFUSED = {"gpt-oss-20b": "FP8Experts asserts has_bias is False, and gpt-oss's experts have biases",
               "dbrx-instruct": "replace_with_fp8_linear reads num_local_experts or num_experts from the config, "
                                "which DbrxConfig has not (its count is ffn_config.moe_num_experts)",
               "longcat-flash-chat": "FP8Experts would quantise the zero experts' gate_up rows transformers allocates "
                                     "(ZERO_EXPERT_ROWS): not the checkpoint's tensors",
               "jetmoe-8b-ultrainteract-sft-v4": "replace_with_fp8_linear swaps every module named experts for "
                                                 "FP8Experts, a fused FFN experts module, and JetMoE's attention "
                                                 "experts are named so (JetMoeMoA, with its router inside): the swap "
                                                 "fails",
               "zamba-7b-v1-phase1": "replace_with_fp8_linear swaps the shared block's tied Linears for one FP8 module "
                                     "in each of the 13 hybrid layers: 13 copies where the checkpoint stores one",
               "gemma-4-26b-a4b": "its experts are 704 wide, 5.5 blocks: FP8Experts' fused gate_up rounds its 1,408 "
                                  "rows to 11 blocks of scales where archcalc's separate gate and up (as DeepSeek's "
                                  "FP8 files and GGUF store experts) take 12; no FP8 Gemma 4 file says which"}


def _fp8_checkpoint_bytes(name: str) -> int:
    from transformers import FineGrainedFP8Config
    from transformers.integrations.finegrained_fp8 import FP8Experts, replace_with_fp8_linear
    from transformers.pytorch_utils import Conv1D

    model = hf_model.__wrapped__(name)  # a fresh build: the swap below changes the model in place
    for path, module in list(model.named_modules()):
        if isinstance(module, Conv1D):  # GPT-2's transposed linear: the same matrix, as nn.Linear
            with torch.device("meta"):
                model.set_submodule(path, torch.nn.Linear(*module.weight.shape, bias=module.bias is not None))
        elif type(module).__name__ == "FalconLinear":  # nn.Linear with its own forward only
            module.__class__ = torch.nn.Linear
    text = model.config.get_text_config()
    if not hasattr(text, "hidden_act"):  # FP8Experts reads it for its forward; no shape depends on it
        text.hidden_act = "silu"
    # use_experts_implementation wraps FP8Experts.__init__ and .forward in place on every call, so a
    # run over many MoE configs nests them past the recursion limit: each build gets the class as it was
    kept = FP8Experts.__init__, FP8Experts.forward
    try:
        replace_with_fp8_linear(model, modules_to_not_convert=FP8_KEPT + FP8_KEPT_BY_NAME.get(name, []),
                                quantization_config=FineGrainedFP8Config())
    finally:
        FP8Experts.__init__, FP8Experts.forward = kept
    left_out = {id(p) for path in EXCLUDED_MODULES.get(name, ((),))[0] for p in model.get_submodule(path).parameters()}
    stored = {torch.float8_e4m3fn: 1}
    return sum(p.numel() * (4 if n.endswith("scale_inv") else stored.get(p.dtype, 2))
               for n, p in model.named_parameters() if id(p) not in left_out)


@pytest.mark.parametrize("name", [n for n in CONFIGS if n not in FP8_REFUSED])
def test_fp8_block_checkpoint_bytes_equal_hf_fp8_modules(name):
    """--weights fp8-block against transformers' FineGrainedFP8 modules, tensor shapes and all:
    scales rounded up per block (Mamba's dt_proj reads 48 inputs: one block; Falcon-7B's fused
    query_key_value of 4,544 + 64 + 64 rows, 37 blocks where three separate matrices would take 38),
    3-D expert tensors, the norms, routers and embeddings kept bf16, every linear mixer's projections."""
    from archcalc.ops.checkpoints import checkpoint_size
    from archcalc.ops.layers import model_ops

    spec = spec_of(name)
    if spec.ffn.moe and spec.ffn.gated:  # FP8Experts fuses gate and up: its scales are the files' when F fills blocks
        assert spec.ffn.moe.d_expert % 128 == 0
    assert checkpoint_size(spec, model_ops(spec, Workload()), "fp8-block").bytes + _unswapped_shared_experts(name) \
        == _fp8_checkpoint_bytes(name)


def _unswapped_shared_experts(name: str) -> int:
    """Inkling's shared experts are stacked nn.Parameters [S, out, in] (InklingSharedExperts: not nn.Linear, not
    named experts), which transformers' FP8 swap leaves bf16; archcalc stores them as an FP8 checkpoint stores its
    linear layers, a byte a weight and 4 a 128 × 128 block's scale.  The bytes HF keeps more, from its modules."""
    more = 0
    for module in hf_model(name).modules():
        if type(module).__name__ == "InklingSharedExperts":
            for p in module.parameters():
                copies, rows, cols = p.shape
                more += p.numel() - copies * -(-rows // 128) * -(-cols // 128) * 4
    return more


def _out_features(module: torch.nn.Module) -> int | None:
    from transformers.pytorch_utils import Conv1D

    if isinstance(module, torch.nn.Linear):
        return module.out_features
    return module.weight.shape[1] if isinstance(module, Conv1D) else None  # GPT-2's [in, out] weight


@pytest.mark.parametrize("name", CONFIGS)
def test_fused_projections_are_the_checkpoints(name):
    """Which checkpoints store Q, K and V (and gate and up) as one matrix (ops/checkpoints.py,
    FUSED_QKV and FUSED_GATE_UP; the tensors a GGUF or a quantized file holds), from transformers'
    module tree: one linear inside an attention module with all of q + k + v as outputs, one inside
    the MLP with 2F."""
    from archcalc.ops.checkpoints import FUSED_GATE_UP, FUSED_QKV

    spec, model = spec_of(name), hf_model(name)
    widths = {op.name: op.dims.n for op in ours(name, 1).ops if op.name in ("layers.attn.qkv", "layers.ffn.up")
              and op.dims.parts}
    for op_name, owners, table in (("layers.attn.qkv", ("attn", "attention", "self_attn", "self_attention"), FUSED_QKV),
                                   ("layers.ffn.up", ("mlp", "ffn", "feed_forward"), FUSED_GATE_UP)):
        # A query projection may be as wide as the fused Q, K and V of other layers (Gemma 4's global q_proj:
        # twice the head_dim, the width of the sliding layers' q + k + v): not a fused projection
        fused = op_name in widths and any(_out_features(m) == widths[op_name] and set(path.split(".")) & set(owners)
                                          and path.split(".")[-1] not in ("q_proj", "query")
                                          for path, m in model.named_modules())
        assert fused == (op_name in widths and spec.architecture in table), op_name


@pytest.mark.parametrize("name", ["mamba-130m-hf", "mamba-codestral-7b"])
@pytest.mark.parametrize("use_bias, use_conv_bias", [(True, False), (True, True), (False, False)])
def test_mamba_bias_switches_equal_hf_numel(tmp_path, name, use_bias, use_conv_bias):
    """MambaConfig's and Mamba2Config's use_bias (in_proj and out_proj biases) and use_conv_bias (the
    depthwise conv's), which no released Mamba flips from (False, True): our count on a config with
    each switch flipped equals transformers' MambaForCausalLM / Mamba2ForCausalLM built from it."""
    cfg = {**_raw(name), "use_bias": use_bias, "use_conv_bias": use_conv_bias}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg), dtype=DTYPE)
    ours_total = size(load_model(str(path))[0], Workload.forward(1), CONVENTIONS["torch"]).params.total
    assert ours_total == sum(p.numel() for p in model.parameters())


def test_lightning_activation_covers_the_whole_qkv_projection():
    """MiniMaxLightningAttention: qkv_states = self.act_fn(self.qkv_proj(hidden_states)), so the SiLU
    runs over all of qkv_proj's outputs (3 × heads × head_dim) and the output gate is as wide as the
    inner width; read off transformers' module for MiniMax-M1."""
    from archcalc.ops.layers import model_ops

    model = hf_model("minimax-m1")
    attn = next(m for m in model.modules() if type(m).__name__ == "MiniMaxLightningAttention")
    ops_ = {op.name: op for op in model_ops(spec_of("minimax-m1"), Workload.forward(4))}
    assert ops_["layers.linear.act"].dims.width == attn.qkv_proj.out_features
    assert (ops_["layers.linear.act"].dims.fn, type(attn.act_fn).__name__) == ("silu", "SiLUActivation")
    assert ops_["layers.linear.gate"].dims.width == attn.output_gate.out_features


# Where HF's apply_rotary_pos_emb receives more than the rotated values: the whole head when only a
# fraction rotates (NeoX, GLM, Bamba, Qwen3-Next, ... slice inside it), every query head's repeated K
# (Falcon-40B), GPT-J's one-tensor signature (the tensor and its sin table).
ROPE_CALL_DIFFERS = {n for n in CONFIGS if spec_of(n).position.rotary_fraction != 1.0} | \
    KV_STORES_QUERY_HEADS | {"gpt-j-6b", "codegen-350m-mono"} | \
    {n for n in CONFIGS if _raw(n)["model_type"] in ("gemma4", *DRAFTERS)}  # one tensor a call: tests/spec/test_gemma4.py
ROPE_CHECKED = [n for n in CONFIGS if n not in ROPE_CALL_DIFFERS | NO_META_FORWARD and spec_of(n).position.kind == "rope"]


def _rotated_per_token(model: torch.nn.Module, monkeypatch, tokens: int = 5) -> int:
    """The values per token the model's apply_rotary_pos_emb* functions receive as q and k over one
    meta forward (DeepSeek-V2's apply_rotary_emb takes complex frequencies, the others cos and sin)."""
    import sys

    modeling = sys.modules[type(model).__module__]
    seen = []
    for attr in [a for a in vars(modeling) if a.startswith("apply_rotary")]:
        def recording(q, k, *args, _f=getattr(modeling, attr), **kwargs):
            seen.append(q.numel() + k.numel())
            return _f(q, k, *args, **kwargs)
        monkeypatch.setattr(modeling, attr, recording)
    with torch.no_grad():
        model(input_ids=torch.zeros(1, tokens, dtype=torch.long, device="meta"), use_cache=True)
    return sum(seen) // tokens


def _our_rotated(spec: ModelSpec) -> int:
    from archcalc.ops.layers import model_ops

    return sum(op.dims.width * op.count for op in model_ops(spec, Workload.forward(5))
               if op.name.startswith(("layers.attn.rope", "layers.shared.attn.rope")))  # grouped: one a group


@pytest.mark.parametrize("name", ROPE_CHECKED)
def test_rope_rotates_what_hf_rotates(name, monkeypatch):
    """The values RoPE rotates per token, over every layer: each query head's and each cached key
    head's rotary dims on the layers that rotate (NoPE layers, RoPE on sliding layers only, Llama 4's
    global layers), MLA's rope parts (each query head's, the one shared key, DeepSeek-V3.2's indexer),
    against what the model's apply_rotary_pos_emb* receive in one meta forward."""
    assert _our_rotated(spec_of(name)) == _rotated_per_token(hf_model(name), monkeypatch) > 0


@pytest.mark.parametrize("model_type", ["exaone_moe", "granite_swa nope", "cohere2_moe", "cohere2_moe prefixed", "afmoe",
                                        "afmoe dense2", "kolibri1", "flint", "glm_moe_dsa", "glm_moe_dsa shared", "axk2", "hy_v4",
                                        "lara_mini", "beam", "beam full-rope", "cohere_compass_text",
                                        "cohere_compass_text rotated", "zamba2 adapters", "modernbert-decoder"])
def test_rope_rotates_what_hf_rotates_without_a_fixture(model_type, monkeypatch):
    """The same for families pinned on their config class: EXAONE MoE's RoPE on sliding layers only."""
    config = AutoConfig.for_model(model_type.split()[0], **{**SMALL, **NO_FIXTURE[model_type]})
    data, _ = spec_dict_from_config(json.loads(config.to_json_string()), "config.json")
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                                 experts_implementation="batched_mm", dtype=DTYPE).eval()
    rotated = _rotated_per_token(model, monkeypatch)
    assert _our_rotated(ModelSpec.model_validate({"name": "x", **data})) == rotated > 0


@pytest.mark.parametrize("name", ["nemotron-3-nano-30b-a3b", "granite-4.0-h-tiny", "jamba-1.5-mini"])
def test_one_residual_add_per_hf_sublayer(name):
    """NemotronHBlock holds one mixer (Mamba-2, attention, MoE or MLP) and adds one residual;
    Granite-4.0-H's and Jamba's decoder layers hold a mixer and an FFN and add two. Our residual
    adds equal the mixers and FFNs transformers' model holds."""
    from archcalc.ops.layers import model_ops

    model = hf_model(name)
    kinds = [type(m).__name__ for m in model.modules()]
    sublayers = (kinds.count("NemotronHBlock") if "NemotronHBlock" in kinds
                 else 2 * sum(k.endswith("DecoderLayer") for k in kinds))
    (add,) = [op for op in model_ops(spec_of(name), Workload.forward(2)) if op.name == "layers.residual.add"]
    assert add.count == sublayers


@pytest.mark.parametrize("name", ["opt-350m", "gemma-2-9b", "llama-3.2-1b"])
def test_prefill_logits_at_the_last_token_equal_hf_logits_to_keep(name):
    """An engine's prefill computes logits at each sequence's last token only: transformers'
    logits_to_keep=1 (lm_head over hidden_states[:, -1:], and Gemma 2's soft-cap on those rows).
    OPT-350m's project_out is the decoder's last layer, so it runs on every position (as in vLLM's
    OPTDecoder). FlopCounterMode's count of that forward equals ours for Workload(logits="last")."""
    from archcalc.ops.layers import model_ops

    batch, tokens = 2, 6
    model = hf_model(name)
    ids = torch.zeros(batch, tokens, dtype=torch.long, device="meta")
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
    assert out.logits.shape[:2] == (batch, 1)
    wl = Workload(batch=batch, new_tokens=tokens, context=tokens, logits="last")
    assert size(spec_of(name), wl, CONVENTIONS["torch"]).flops.forward == counter.get_total_flops()
    rows = {"lm_head": batch, "lm_head.softcap": batch, "lm_head.project_out": batch * tokens}
    for op in model_ops(spec_of(name), wl):
        if op.name in rows:
            assert op.dims.m == rows[op.name], op.name


def test_attention_sinks_and_learned_activation_scalars_are_read_every_step():
    """gpt-oss's GptOssAttention.sinks (one learned logit per head) and Apertus' XIELUActivation
    alpha_p / alpha_n are parameters every token runs: active like the weights around them, and bytes
    a decode step reads (bf16), as many as transformers' modules hold."""
    from archcalc.ops.layers import model_ops

    for name, module, op_name in (("gpt-oss-20b", "GptOssAttention", "layers.attn.core"),
                                  ("apertus-8b", "XIELUActivation", "layers.ffn.act")):
        held = next(m for m in hf_model(name).modules() if type(m).__name__ == module)
        own = sum(p.numel() for n, p in held.named_parameters(recurse=False))
        ops_ = [o for o in model_ops(spec_of(name), Workload.decode(16)) if o.name.startswith(op_name)]
        assert ops_ and all((o.params, o.active_params, o.weight_bytes) == (own, own, 2 * own) for o in ops_), name


def test_a_dense_fixture_s_tokens_use_every_parameter():
    """Without experts every token runs every weight, learned activation scalars, sinks and
    hyper-connection scalars included: active = total, for every dense fixture."""
    dense = [n for n in CONFIGS if spec_of(n).ffn.moe is None and spec_of(n).vision is None]
    assert len(dense) > 40
    for name in dense:
        p = size(spec_of(name), Workload(), CONVENTIONS["causal"]).params
        assert p.active == p.total, name


@pytest.mark.parametrize("pattern, mixers, ffns", [("EEM*M", 3, 2), ("EMEEM", 2, 3)])
def test_a_nemotron_h_pattern_with_lone_ffn_and_lone_mixer_blocks(tmp_path, pattern, mixers, ffns):
    """No released Nemotron-H starts with an FFN block or runs two FFN blocks in a row, but the
    pattern allows it: "EEM*M" is two MoE blocks without a mixer, then a Mamba-2, an attention and a
    Mamba-2 block without an FFN; "EMEEM" has no attention at all. Our parameters equal transformers'
    numel for each, and we add one residual and one norm per NemotronHBlock (5), plus the final norm,
    and list no op that no layer runs."""
    from archcalc.ops.layers import model_ops

    cfg = {**_raw("nemotron-3-nano-30b-a3b"), "hybrid_override_pattern": pattern, "num_hidden_layers": 5}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**cfg), dtype=DTYPE)
    spec = load_model(str(path))[0]
    assert spec.attention_layers["none"] > 0 and spec.ffn_layers["none"] > 0
    assert size(spec, Workload.forward(1), CONVENTIONS["torch"]).params.total == sum(p.numel() for p in model.parameters())
    ops_ = model_ops(spec, Workload.forward(2))
    blocks = sum(type(m).__name__ == "NemotronHBlock" for m in model.modules())
    assert blocks == 5
    assert sum(o.count for o in ops_ if o.name == "layers.residual.add") == blocks
    norms = {o.name: o.count for o in ops_ if o.name in ("layers.attn.norm", "layers.ffn.norm")}
    assert norms == {"layers.attn.norm": mixers, "layers.ffn.norm": ffns}  # NemotronHBlock.norm of each block
    assert all(o.count >= 1 for o in ops_)


def test_beam_defaults_are_beam_1_501b_a23b():
    """BeamConfig's defaults, which transformers says are reflection/Beam-1.0-501B-A23B's: its name's 501B total
    and 23B active; a config.json without layer_types, mlp_layer_types or rope_parameters is read with the class's
    rules (every sixth layer and the last full and NoPE, three dense layers first)."""
    raw, spec, total = _at_full_size("beam", ("layer_types", "mlp_layer_types", "rope_parameters"))
    assert total == 501_267_599_808
    assert round(size(spec, Workload.forward(1), CONVENTIONS["torch"]).params.active / 1e9) == 23
    assert spec.layer_attention.count("global") == 9 and not spec.attention.global_rope


@pytest.mark.parametrize("weight_mode", ["single", "fused"])
def test_xlstm_on_its_own_config(weight_mode):
    """xLSTMConfig shrunk (chunks of 4), its weights as separate q/k/v/gate tensors or fused (weight_mode): the
    mLSTM layer's tensors shape for shape, the parameters, a prefill of 2 chunks and 3 tokens (the chunked form,
    then the step for the 3 left over) and a decode step through its own cache; the state, bf16 in xLSTMCache
    (_state_dtype_ratio), fp32 here."""
    from archcalc.training.tensors import op_tensors

    config = AutoConfig.for_model("xlstm", vocab_size=100, hidden_size=128, num_hidden_layers=2, num_heads=2,
                                  chunk_size=4, weight_mode=weight_mode)
    data, report = spec_dict_from_config(json.loads(config.to_json_string()), "config.json")
    assert not report.warnings
    spec = ModelSpec.model_validate({"name": "xlstm", **data})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPE)
    layer = next(m for m in model.modules() if type(m).__name__ == "xLSTMLayer")
    ops = [op for op in size(spec, Workload.forward(1), CONVENTIONS["torch"]).ops if op.name.startswith("layers.linear.")]
    assert sorted(s for op in ops for s in op_tensors(op)) == sorted(tuple(p.shape) for p in layer.parameters())
    assert size(spec, Workload.forward(1), CONVENTIONS["torch"]).params.total == sum(p.numel() for p in model.parameters())
    prefill, step, cache = _prefill_then_step(model, 11)
    ours_ = size(spec, Workload.forward(11), CONVENTIONS["torch"])
    assert ours_.flops.forward == prefill
    assert size(spec, Workload.decode(12), CONVENTIONS["torch"]).flops.forward == step
    held = sum(t.numel() * t.element_size() for state in cache.rnn_state.values() for t in state)
    assert held == sum(k.state_bytes for k in ours_.kv.by_kind) * DTYPE.itemsize / 4



def test_zamba2_defaults_at_full_size():
    """Zamba2Config's defaults (Zamba2-2.7B's layout: 54 layers, 9 hybrid, one shared block; its 8 Mamba heads the
    class's, not the 2.7B's 80) at full size: a file without layers_block_type is read with the class's list."""
    raw, spec, total = _at_full_size("zamba2", ("layers_block_type", "hybrid_layer_ids"))
    assert len(spec.shared_block.layers) == 9 and spec.shared_block.layers[-1] == 51 and total > 2.4e9



@pytest.mark.parametrize("variant", ["zamba2", "zamba2 adapters", "zamba", "zamba listed"])
def test_zamba_shared_block_against_its_modules(variant):
    """Zamba's and Zamba2's shared block on their config classes (shrunk): the attention (adapters in it), the
    Mamba mixers (each tensor, shape for shape: Zamba's per-head x_proj, dt_proj, A_log and D) and the rest as
    transformers' module tree holds them; the block's weights stored num_mem_blocks times (tied: one Parameter),
    its adapters and D -> D projections once a hybrid layer; a decode step through its own cache (the K/V of each
    hybrid layer, the Mamba states) = FlopCounterMode's, less the conv's extra output (_conv_state_extra)."""
    from archcalc.training.tensors import op_tensors

    config = AutoConfig.for_model(variant.split()[0], **{**SMALL, **NO_FIXTURE[variant]})
    data, _ = spec_dict_from_config(json.loads(config.to_json_string()), "config.json")
    spec = ModelSpec.model_validate({"name": "zamba2", **data})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=DTYPE).eval()
    hf = _hf_components(model)
    by = size(spec, Workload.forward(1), CONVENTIONS["torch"]).params.by_component
    assert {c: by.get(c, 0) for c in hf} == hf
    shared = [m for m in model.modules() if type(m).__name__.endswith("AttentionDecoderLayer")]  # one a hybrid layer
    assert len(shared) == len(spec.shared_block.layers)  # ... whose weights are the blocks' (tied: one Parameter)
    assert len({id(m.self_attn.q_proj.weight) for m in shared}) == spec.shared_block.blocks == \
        getattr(config, "num_mem_blocks", 1)
    mixer = next(m for m in model.modules() if type(m).__name__ in LINEAR_MIXERS)
    ops = [op for op in size(spec, Workload.forward(1), CONVENTIONS["torch"]).ops if op.name.startswith("layers.linear.")]
    assert sorted(s for op in ops for s in op_tensors(op)) == sorted(tuple(p.shape) for p in mixer.parameters())
    step = _prefill_then_step(model, DECODE_CONTEXT)[1]
    convs = [m.conv1d for m in model.modules() if type(m).__name__ in LINEAR_MIXERS]
    extra = sum(2 * c.weight.shape[0] * c.weight.shape[2] for c in convs)
    ours_ = size(spec, Workload.decode(DECODE_CONTEXT + 1), CONVENTIONS["torch"]).flops.forward
    assert ours_ == step - extra



def test_modernbert_decoder_defaults_at_full_size():
    """ModernBertDecoderConfig's defaults (ModernBERT-base's shapes: 22 layers × 768) at full size: 149,655,232, the
    size JHU's Ettin decoder named 150m has by its name (its file not found); a file without layer_types or
    rope_parameters is read with the class's rules (every third layer global; bases 160,000 and 10,000)."""
    raw, spec, total = _at_full_size("modernbert-decoder", ("layer_types", "rope_parameters", "sliding_window"))
    assert total == 149_655_232
    assert spec.layer_attention.count("global") == 8 and (spec.position.theta, spec.position.local_theta) == (16e4, 1e4)


def test_the_unified_drafter_at_its_config_class_s_full_size():
    """Gemma4UnifiedAssistantConfig's defaults (a 30-layer, 2,304-wide drafter for a 3,840-wide target; no released
    file found whole): transformers' numel on meta is our total."""
    config = AutoConfig.for_model("gemma4_unified_assistant")
    data, _ = spec_dict_from_config(json.loads(config.to_json_string()), "config.json")
    spec = ModelSpec.model_validate({"name": "drafter", **data})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPE)
    assert size(spec, Workload.forward(1), CONVENTIONS["torch"]).params.total == sum(
        p.numel() for p in model.parameters()) == 2_872_140_800


@pytest.mark.parametrize("model_type", DRAFTERS)
@pytest.mark.parametrize("ordered", [False, True])
@pytest.mark.parametrize("tokens, context", [(1, 40), (1, 7), (5, 40)])
def test_drafters_on_their_config_class_flops(model_type, ordered, tokens, context):
    """Each assistant shrunk (a 2-layer text_config: a sliding layer of window 16 and a global one; with and
    without the centroid head) and run on the CPU, drafting `tokens` over a target holding `context`: FlopCounterMode
    counts our forward under the torch convention (every query over every key the target holds in the layer, a
    sliding one's window), and transformers' numel is our total."""
    text = {"model_type": DRAFTERS_TEXT[model_type], "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "global_head_dim": 32, "vocab_size": 256, "sliding_window": 16,
            "layer_types": ["sliding_attention", "full_attention"], "hidden_size_per_layer_input": 0,
            "vocab_size_per_layer_input": 0, "enable_moe_block": False}
    if model_type == "gemma4_unified_assistant":
        text = {k: v for k, v in text.items() if k not in ("hidden_size_per_layer_input", "vocab_size_per_layer_input",
                                                              "enable_moe_block")}
    config = AutoConfig.for_model(model_type, text_config=text, backbone_hidden_size=48,
                                  use_ordered_embeddings=ordered, num_centroids=16, centroid_intermediate_top_k=4)
    data, _ = spec_dict_from_config(json.loads(config.to_json_string()), "config.json")
    spec = ModelSpec.model_validate({"name": "drafter", **data})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=DTYPE).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        _drafter_forward(model, tokens, context)
    wl = Workload(new_tokens=tokens, context=context)
    ours_ = size(spec, wl, CONVENTIONS["torch"])
    assert ours_.flops.forward == counter.get_total_flops()
    assert ours_.params.total == sum(p.numel() for p in model.parameters())
    # the pairs the drafter's own masks let through (none: every pair), 2·H·(d_k + d_v) FLOPs each, are our attention
    # FLOPs under the causal convention: no causal mask among a drafter's queries and the target's keys
    embeds, shared = _drafter_inputs(model, tokens, context)
    masks = model.create_attention_masks(embeds, None, shared)
    pairs = {kind: tokens * kv.shape[2] if masks[kind] is None else int((masks[kind] == 0).sum())
             for kind, (kv, _) in shared.items()}
    expected = sum(pairs[layer.self_attn.layer_type] * 4 * text["num_attention_heads"] * layer.self_attn.head_dim
                   for layer in model.model.layers)
    assert size(spec, wl, CONVENTIONS["causal"]).flops.attention == expected


DRAFTERS_TEXT = {"gemma4_assistant": "gemma4_text", "gemma4_unified_assistant": "gemma4_unified_text"}


INKLING_SMALL = {"vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
                 "num_key_value_heads": 2, "head_dim": 16, "swa_num_attention_heads": 8, "swa_num_key_value_heads": 4,
                 "swa_head_dim": 8, "sliding_window_size": 8, "d_rel": 4, "rel_extent": 12, "intermediate_size": 96,
                 "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1}


@pytest.mark.parametrize("variant", [
    {"layer_types": ["hybrid"] * 4},  # every layer global: the swa_* keys unused; every MLP sparse (the class default)
    {"layer_types": ["hybrid_sliding", "hybrid", "hybrid_sliding", "hybrid"], "mlp_layer_types": ["dense", "sparse"] * 2},
    {"local_layer_ids": [1, 2], "dense_intermediate_size": 80, "dense_mlp_idx": 2},  # the released files' spelling
    # 6 sliding heads over 3 KV heads beside the global layers' 4 over 2: no layer pairs 4 heads with 3 KV heads
    {"swa_num_attention_heads": 6, "swa_num_key_value_heads": 3, "layer_types": ["hybrid_sliding", "hybrid"] * 2},
])
def test_inkling_on_its_config_class(variant):
    """InklingTextConfig shrunk, sliding layers of their own heads and head_dim (8 heads of 8 beside the global
    layers' 4 of 16), as transformers writes it: numel, FlopCounterMode's forward (less the padded convs' extra
    outputs) and the K/V per token of the cache its forward returns; its conv states as _attention_conv_states pins
    them."""
    config = AutoConfig.for_model("inkling_text", **{**INKLING_SMALL, **variant})
    raw = json.loads(config.to_json_string())
    data, report = spec_dict_from_config(raw, "config.json")
    assert not report.warnings, report.warnings
    spec = ModelSpec.model_validate({"name": "inkling", **data})
    assert spec_dict_from_config({**config.to_diff_dict(), "model_type": "inkling_text"}, "config.json")[0] == data
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                                 experts_implementation="batched_mm", dtype=DTYPE).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(input_ids=torch.zeros(1, 12, dtype=torch.long, device="meta"), use_cache=True)
    ours_ = size(spec, Workload.forward(12), CONVENTIONS["torch"])
    convs = [m.conv1d.weight.shape for m in model.modules() if type(m).__name__ == "InklingShortConvolution"]
    assert ours_.params.total == sum(p.numel() for p in model.parameters())
    assert ours_.flops.forward + sum(2 * c * k * (k - 1) for c, _, k in convs) == counter.get_total_flops()
    per_token = sum((layer.keys.shape[1] * layer.keys.shape[3] + layer.values.shape[1] * layer.values.shape[3])
                    * layer.keys.element_size() for layer in out.cache.layers)
    assert per_token == ours_.kv.bytes_per_token
    assert sum(k.state_bytes for k in ours_.kv.by_kind) == sum(c * (k - 1) * DTYPE.itemsize for c, _, k in convs)


@pytest.mark.parametrize("layers", [4, 7, 13])
def test_inkling_s_default_layers_are_its_config_class_s(layers):
    """A file without layer_types or local_layer_ids (transformers always writes layer_types): the sliding and full
    layers InklingTextConfig derives, every layer sliding but each sixth."""
    raw = {**INKLING_SMALL, "model_type": "inkling_text", "num_hidden_layers": layers}
    spec = ModelSpec.model_validate({"name": "inkling", **spec_dict_from_config(raw, "config.json")[0]})
    hf = AutoConfig.for_model("inkling_text", **{k: v for k, v in raw.items() if k != "model_type"})
    assert list(spec.layer_attention) == ["local" if t == "hybrid_sliding" else "global" for t in hf.layer_types]


ZAYA_SMALL = {"vocab_size": 100, "hidden_size": 64, "moe_intermediate_size": 32, "num_hidden_layers": 4,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "num_experts": 4,
              "router_hidden_size": 16, "eos_token_id": 1}


@pytest.mark.parametrize("variant", [
    {"cca_time0": 3, "cca_time1": 2},
    # ZAYA1-74B-preview's layout: sliding and full layers alternate, a RoPE base each; biases on q, k, v, o
    {"layer_types": ["hybrid_sliding", "hybrid"] * 2, "sliding_window": 4, "attention_bias": True, "cca_time1": 3},
    {"cca_time0": 1, "cca_time1": 1, "lm_head_bias": True, "tie_word_embeddings": False},  # convs of one tap: no state
])
def test_zaya_on_its_config_class(variant):
    """ZayaConfig shrunk: numel; FlopCounterMode's prefill past the window and a decode step, less what its CCA
    recomputes (_cca_recomputed); the K/V, conv inputs and delayed value its cache holds; the rotary dims, twice
    its rotary embedding's frequencies for each kind of layer."""
    config = AutoConfig.for_model("zaya", **{**ZAYA_SMALL, **variant})
    data, report = spec_dict_from_config(json.loads(config.to_json_string()), "config.json")
    assert not report.warnings, report.warnings
    spec = ModelSpec.model_validate({"name": "zaya", **data})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, experts_implementation="batched_mm", dtype=DTYPE).eval()
    cca = [m for m in model.modules() if type(m).__name__ == "ZayaCCAProjection"]
    recomputed = {first: sum(2 * m.conv_qk_depthwise.weight.shape[0] * m.conv_qk_depthwise.weight.shape[2]
                             * (m.conv_qk_grouped.weight.shape[2] - 1) + 2 * m.v_proj_delayed.weight.numel() * first
                             for m in cca) for first in (True, False)}
    tokens = 7
    hf_prefill, _, cache = _prefill_then_step(model, tokens)
    ours_ = size(spec, Workload.forward(tokens), CONVENTIONS["torch"])
    assert ours_.params.total == sum(p.numel() for p in model.parameters())
    assert ours_.flops.forward == hf_prefill - recomputed[True]
    _, hf_step, _ = _prefill_then_step(model, 2)  # a step within the window (torch counts every cached key)
    assert size(spec, Workload.decode(3), CONVENTIONS["torch"]).flops.forward == hf_step - recomputed[False]
    held = [(layer.keys.shape[1] * layer.keys.shape[3] + layer.values.shape[1] * layer.values.shape[3])
            * layer.keys.element_size() for layer in cache.layers]
    assert sum(held) == ours_.kv.bytes_per_token
    w = spec.attention.sliding_window  # tokens each layer holds after the step: a sliding one its window − 1 (HF)
    assert [layer.keys.shape[2] for layer in cache.layers] == [
        min(tokens + 1, w - 1) if kind == "local" else tokens + 1 for kind in spec.layer_attention]
    states = sum(t.numel() * t.element_size() for layer in cache.layers
                 for t in (*layer.conv_states.values(), *layer.recurrent_states.values()) if t is not None)
    assert states == sum(k.state_bytes for k in ours_.kv.by_kind)
    rotary = {t: getattr(model.model.rotary_emb, f"{t}_inv_freq").numel() * 2 for t in set(config.layer_types)}
    assert set(rotary.values()) == {spec.rope_dim}


def test_dory_at_its_config_class_s_full_size():
    """DoryConfig's defaults (nvidia/NVIDIA-Nemotron-Labs-Dory1.0-4B's shapes; its config.json was not found):
    transformers' numel at full size, 3,975,229,440 (the "4B"), is ours, read from the file the class writes (its
    layers listed as attention and mlp blocks, every count doubled).  36 layers stored, 56 run: 8 in the prelude,
    the 20 of the core twice, 8 in the coda; the nGPT vectors are 2 of D a layer (the interpolation rates), 2 of
    H·d (sqk, s_gate), 2 of F (suv) and one of V on the logits; the norms have no weight."""
    raw, spec, total = _at_full_size("dory")
    result = size(spec, Workload.forward(1), CONVENTIONS["torch"])
    assert result.params.total == total == 3_975_229_440 and round(total / 1e9) == 4
    assert (spec.n_layers, spec.loop.stored_layers, spec.loop.core) == (56, 36, 20)
    assert raw["num_hidden_layers"] == 72 and raw["layer_types"][1] == "mlp"
    vectors = {op.name: op.params * (op.stored or op.count) for op in result.ops
               if op.name in ("layers.residual.interpolate", "layers.attn.q_scale", "layers.attn.gate",
                              "layers.ffn.scales", "lm_head.scale")}
    assert vectors == {"layers.residual.interpolate": 36 * 2 * 2560, "layers.attn.q_scale": 36 * 16 * 256,
                       "layers.attn.gate": 36 * 16 * 256, "layers.ffn.scales": 36 * 2 * 7168, "lm_head.scale": 131072}
    assert not any(op.params for op in result.ops if op.kind == "norm")


DORY_SMALL = {"vocab_size": 100, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 7,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "sliding_window": 8,
              "n_input_layers": 2, "n_output_layers": 2, "n_recurrent_loops": 3}


@pytest.mark.parametrize("mode", ["per_loop", "last_loop"])
@pytest.mark.parametrize("variant", [
    {},  # DoryConfig's layer rule: layer 3, the core's second, full; the rest sliding in an 8-token window
    {"layer_types": ["full_attention"] * 7},  # no sliding layer
    # one pass, no prelude; biases on q, k, v, o (not the gate's projection) and on the MLP
    {"n_recurrent_loops": 1, "n_input_layers": 0, "n_output_layers": 3, "attention_bias": True, "mlp_bias": True},
])
def test_dory_on_its_config_class(mode, variant):
    """DoryConfig shrunk, a core of 3 layers run 3 times between a prelude and a coda of 2: numel; FlopCounterMode's
    prefill past the window and decode step; and the cache its forward returns: with per_loop a cache a layer run
    (2 + 3·3 + 2 = 13), with last_loop one a layer (7), the earlier passes reading it and writing nothing.  The
    file as the class writes it (attention and mlp blocks, counts doubled) and as its layers give it read alike."""
    config = AutoConfig.for_model("dory", **{**DORY_SMALL, **variant, "recurrent_kv_cache_mode": mode})
    raw = json.loads(config.to_json_string())
    data, report = spec_dict_from_config(raw, "config.json")
    assert not report.warnings, report.warnings
    layers = {**DORY_SMALL, **variant, "layer_types": config.layer_types, "recurrent_kv_cache_mode": mode}
    assert spec_dict_from_config({**layers, "model_type": "dory"}, "config.json")[0] == data
    spec = ModelSpec.model_validate({"name": "dory", **data})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPE).eval()
    tokens = DORY_SMALL["sliding_window"] + PAST_WINDOW
    hf_prefill, hf_step, cache = _prefill_then_step(model, tokens)
    ours_ = size(spec, Workload.forward(tokens), CONVENTIONS["torch"])
    assert ours_.params.total == sum(p.numel() for p in model.parameters())
    assert ours_.flops.forward == hf_prefill
    per_token = sum((layer.keys.shape[1] * layer.keys.shape[3] + layer.values.shape[1] * layer.values.shape[3])
                    * layer.keys.element_size() for layer in cache.layers)
    assert per_token == ours_.kv.bytes_per_token
    held = sum(op.count for op in ours_.ops if op.kind == "attention" and not op.dims.shared)
    assert held == len(cache.layers) == (spec.n_layers if mode == "per_loop" else config.num_hidden_layers)
    # the step after a prefill of `tokens` within the window: _prefill_then_step's decode of one token
    _, hf_step, _ = _prefill_then_step(model, DECODE_CONTEXT)
    assert size(spec, Workload.decode(DECODE_CONTEXT + 1), CONVENTIONS["torch"]).flops.forward == hf_step


def test_dory_s_norms_are_the_l2_norms_its_forward_calls():
    """Every value Dory normalises: the values its DoryL2Norm modules receive in a forward (hooked; the norm at each
    pass's start and the final one are one module, called passes + 2 times) are our norm ops' rows × width, the
    loop's and the final norm included; none has a weight."""
    config = AutoConfig.for_model("dory", **DORY_SMALL)
    spec = ModelSpec.model_validate({"name": "dory", **spec_dict_from_config(json.loads(config.to_json_string()),
                                                                            "config.json")[0]})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=DTYPE).eval()
    seen = []
    for m in model.modules():
        if type(m).__name__ == "DoryL2Norm":
            m.register_forward_hook(lambda mod, args, out: seen.append(args[0].numel()))
    with torch.no_grad():
        model(input_ids=torch.zeros(1, SHORT, dtype=torch.long, device="meta"))
    norms = [op for op in size(spec, Workload.forward(SHORT), CONVENTIONS["torch"]).ops if op.kind == "norm"]
    assert sum(op.dims.m * op.dims.width * op.count for op in norms) == sum(seen)
    assert not any(op.params for op in norms) and not any(p.numel() for m in model.modules()
                                                         if type(m).__name__ == "DoryL2Norm" for p in m.parameters())


@pytest.mark.parametrize("layers", [5, 8, 13])
def test_dory_s_default_layers_are_its_config_class_s(layers):
    """A file without layer_types (transformers always writes them): the kinds DoryConfig derives, every fourth
    layer full, each run of a core layer of its layer's kind."""
    raw = {**DORY_SMALL, "model_type": "dory", "num_hidden_layers": layers}
    spec = ModelSpec.model_validate({"name": "dory", **spec_dict_from_config(raw, "config.json")[0]})
    hf = AutoConfig.for_model("dory", **{k: v for k, v in raw.items() if k != "model_type"})
    kinds = ["local" if t == "sliding_attention" else "global" for t in hf.layer_types]
    start, end = hf.n_input_layers, hf.n_input_layers + hf.n_recurrent_layers
    assert list(spec.layer_attention) == kinds[:start] + kinds[start:end] * hf.n_recurrent_loops + kinds[end:]


# Fixtures whose transformers model holds more bytes at bf16 than archcalc's weights at --dtype bf16: their
# routers (and LongCat-Flash's zero experts' rows, ZERO_EXPERT_ROWS; Zamba's shared block and Nemotron-H's and
# Kimi Linear's gates likewise; DeepSeek-V4's norms, which its release stores bf16: the Hub's counts by type,
# tests/spec/test_deepseek_v4.py) are built in fp32 by transformers, where archcalc counts every weight but those
# the architecture itself keeps in fp32 (mHC's, Inkling's convs) at --dtype.  Which dtype the checkpoints and the
# engines keep those routers in is not checked here; the list is asserted whole, so that a new difference shows.
FP32_IN_TRANSFORMERS = {"deepseek-v2-lite", "deepseek-v3", "deepseek-v3.2", "deepseek-v4-flash", "dots-llm1", "ernie-4.5-21b-a3b", "glm-4.5-air",
                        "glm-4.6", "glm-4.7-flash", "glm-5", "kimi-linear-48b-a3b", "longcat-flash-chat", "mimo-v2-flash",
                        "nemotron-3-nano-30b-a3b", "zamba-7b-v1-phase1", "dots3-note-prev"}


def test_weights_at_bf16_are_the_bytes_transformers_holds():
    """Every fixture built at bf16: the bytes of its parameters, each at the dtype transformers keeps it in (Inkling's
    short convs and router scale in fp32, _keep_in_fp32_modules_strict), are archcalc's weights at --dtype bf16, but
    for the models listed in FP32_IN_TRANSFORMERS, where transformers holds more."""
    more = set()
    for name in CONFIGS:
        model = hf_model(name)
        left_out = {id(p) for path in EXCLUDED_MODULES.get(name, ((),))[0] for p in model.get_submodule(path).parameters()}
        held = sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in left_out)
        ours_ = ours(name, 1).weight_bytes["bf16"]
        assert held >= ours_, name
        if held > ours_:
            more.add(name)
    assert more == FP32_IN_TRANSFORMERS
