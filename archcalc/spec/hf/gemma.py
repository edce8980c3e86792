"""Gemma 3n (gemma3n_text, and the text_config of gemma3n) and Gemma 4 (gemma4_text, and the text_config of
gemma4): Gemma 3's layers (q/k norms, four norms a layer,
5 sliding : 1 global) with what transformers' Gemma4TextModel adds: a weightless v_norm, global layers of
their own head_dim (and KV heads, with V taken from the key projection), the last layers reusing earlier
layers' K/V with a double-wide MLP, and per-layer embeddings."""

from __future__ import annotations

from archcalc.errors import InputError
from archcalc.spec.hf.llama import _llama_like
from archcalc.spec.hf.reader import ConfigReader
from archcalc.spec.hf.keys import checked

# Gemma4TextConfig's defaults (transformers 5.24), for the keys save_pretrained leaves out.
GEMMA4_DEFAULTS = {"vocab_size": 262144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
                   "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                   "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072,
                   "tie_word_embeddings": True, "sliding_window": 512, "rope_theta": 1_000_000.0,
                   "rope_local_base_freq": 10_000.0, "hidden_size_per_layer_input": 256,
                   "vocab_size_per_layer_input": 262144}
GLOBAL_HEAD_DIM = 512  # Gemma4TextConfig.__post_init__'s default for global_head_dim
# Gemma4UnifiedTextConfig's (Gemma 4 12B unified): its context and window, and no per-layer embeddings
GEMMA4_UNIFIED_DEFAULTS = {**GEMMA4_DEFAULTS, "max_position_embeddings": 262144, "sliding_window": 1024,
                           "hidden_size_per_layer_input": 0}


def _gemma4_unified(r: ConfigReader) -> dict:
    """Gemma 4 unified (gemma4_unified_text, and the text_config of gemma4_unified): Gemma 4's dense layers,
    whose config class removes the per-layer embeddings and the MoE block; a file that asks for either is
    not what transformers builds."""
    for key in ("hidden_size_per_layer_input", "enable_moe_block"):
        if r.cfg.get(key):
            raise InputError(r.path, r.prefix + key, "not read by transformers' Gemma 4 unified (no per-layer "
                             "embeddings, no MoE block)")
    return _gemma4(r)


# Gemma4AssistantConfig's and Gemma4UnifiedAssistantConfig's backbone_hidden_size default: their targets' widths
BACKBONE_DEFAULTS = {"gemma4_assistant": 1536, "gemma4_unified_assistant": 3840}
# text_config values the assistants' validate_architecture requires (what they leave out of Gemma 4)
DRAFTER_TEXT_REQUIRES = {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0,
                         "enable_moe_block": False, "use_double_wide_mlp": False}


def _drafter_text(r: ConfigReader, drafter: str, text_type: str, family: str) -> None:
    """A drafter's text_config, before it is read as its family: that family, and none of what the assistants'
    validate_architecture refuses."""
    if text_type != family:
        raise InputError(r.path, r.prefix + "model_type", f"a {drafter} reads a {family} text_config, not {text_type}")
    for key, value in DRAFTER_TEXT_REQUIRES.items():
        if r.cfg.get(key) not in (None, value):
            raise InputError(r.path, r.prefix + key, f"must be {str(value).lower()} in a Gemma 4 assistant (its config "
                             "class refuses anything else)")


def _gemma4_drafter(outer: ConfigReader, r: ConfigReader, spec: dict, model_type: str) -> dict:
    """Gemma 4's assistant (gemma4_assistant, gemma4_unified_assistant: Gemma4AssistantForCausalLM), a drafter for
    speculative decoding (DrafterSpec): a Gemma 4 text model (text_config, read as such) every layer of which reads
    the target's K/V (the config class sets num_kv_shared_layers to num_hidden_layers where it is 0 or absent), fed
    the target's embedding and hidden state through pre_projection, with post_projection back and, with
    use_ordered_embeddings, a centroid head.  The outer tie_word_embeddings ties lm_head to the embedding."""
    n, att = spec["n_layers"], spec["attention"]
    if att.get("kv_shared_layers", n) != n:
        raise InputError(r.path, r.prefix + "num_kv_shared_layers", f"must be num_hidden_layers ({n}) or 0 in a Gemma 4 "
                         "assistant: every layer reads the target's K/V")
    att["kv_shared_layers"] = n
    att.pop("v_norm")  # no layer computes V (nor K): no value norm either
    spec.pop("final_softcap", None)
    r.overrule("final_logit_softcapping", "the assistant's forward applies no soft-cap to its logits")
    drafter = {"backbone_d_model": outer.get("backbone_hidden_size", default=BACKBONE_DEFAULTS[model_type])}
    if outer.get("use_ordered_embeddings", default=False):
        drafter["centroids"] = outer.get("num_centroids", default=2048)
        drafter["top_k"] = outer.get("centroid_intermediate_top_k", default=32)
    else:
        for key in ("num_centroids", "centroid_intermediate_top_k"):
            outer.ignore(key, "use_ordered_embeddings is false: no centroid head")
    r.overrule("tie_word_embeddings", "the assistant ties lm_head by the outer tie_word_embeddings")
    return {**spec, "drafter": drafter, "tie_embeddings": bool(outer.get("tie_word_embeddings", default=True))}


def _gemma4(r: ConfigReader) -> dict:
    spec = _llama_like(r, family="gemma4")
    att, ffn, n = spec["attention"], spec["ffn"], spec["n_layers"]
    kinds = att.setdefault("layer_types", ["global"] * n)  # a list even when every layer is global
    if kinds[-1] != "global":
        raise InputError(r.path, r.prefix + "layer_types", "the last layer must be full_attention (transformers' "
                         "Gemma 4 makes it so, whatever the config says)")
    att["v_norm"] = True  # Gemma4TextAttention.v_norm: RMSNorm(head_dim, with_scale=False)
    if r.get("enable_moe_block", default=False):
        # Gemma4TextDecoderLayer: every layer's MLP runs beside routed experts (the always-on "shared"
        # MLP of archcalc's MoE), with a scaled router and norms of their own
        ffn["moe"] = {"n_experts": r.get("num_experts"), "top_k": r.get("top_k_experts"),
                      "d_expert": r.get("moe_intermediate_size"), "d_shared": ffn["d_ff"], "router_scales": True,
                      "branch_norms": True}
    else:
        for key in ("num_experts", "top_k_experts", "moe_intermediate_size"):
            r.ignore(key, "enable_moe_block is false: no experts")
    if r.cfg.get("expert_intermediate_size") is not None:  # early Gemma 4 files write it, null, beside the rest
        raise InputError(r.path, r.prefix + "expert_intermediate_size", "not read by transformers' Gemma4TextConfig; "
                         "the experts' width is moe_intermediate_size")
    r.ignore("expert_intermediate_size", "null: an early spelling of moe_intermediate_size, read by nothing")
    _global_layers(r, att, kinds, att.get("head_dim") or spec["d_model"] // att["n_heads"])
    shared = int(r.get("num_kv_shared_layers", default=0))
    if shared:
        att["kv_shared_layers"] = shared
    if r.get("use_double_wide_mlp", default=False):
        if shared:  # Gemma4TextMLP: twice intermediate_size on the layers that reuse K/V
            ffn["kv_shared_d_ff"] = 2 * ffn["d_ff"]
        else:
            r.ignore("use_double_wide_mlp", "num_kv_shared_layers is 0: no layer has the double-wide MLP")
    width = int(r.get("hidden_size_per_layer_input", default=0))
    if width:
        spec["per_layer_input"] = {"width": width, "vocab_size": r.get("vocab_size_per_layer_input")}
    else:
        r.ignore("vocab_size_per_layer_input", "hidden_size_per_layer_input is 0: no per-layer embeddings")
    return spec


def _global_layers(r: ConfigReader, att: dict, kinds: list[str], base_dim: int) -> None:
    """The global layers' head_dim and KV heads: per_layer_config where the config has it (transformers 5
    writes it, one entry per full_attention layer), else global_head_dim (default 512) and, with
    attention_k_eq_v, num_global_key_value_heads, as Gemma4TextConfig.__post_init__ builds it."""
    k_eq_v = bool(r.get("attention_k_eq_v", default=False))
    base_kv = att.get("n_kv_heads", att["n_heads"])
    dim = r.get("global_head_dim", default=GLOBAL_HEAD_DIM)
    kv = r.get("num_global_key_value_heads", default=None) if k_eq_v else None
    if not k_eq_v:
        r.ignore("num_global_key_value_heads", "attention_k_eq_v is false: global layers keep num_key_value_heads")
    table = r.get("per_layer_config", default=None)
    if table is not None:
        where = r.prefix + "per_layer_config"
        overrides = {}
        for index, entry in table.items():
            if not (index.isdigit() and int(index) < len(kinds)) or not isinstance(entry, dict) or \
                    set(entry) - {"head_dim", "num_key_value_heads"}:
                raise InputError(r.path, f"{where}.{index}", "expected a layer index with head_dim and/or "
                                 "num_key_value_heads")
            overrides[int(index)] = {k: checked(r.path, f"{where}.{index}.{k}", k, v) for k, v in entry.items()}
        globals_ = {i for i, kind in enumerate(kinds) if kind == "global"}
        if overrides and set(overrides) != globals_ or len({tuple(sorted(e.items())) for e in overrides.values()}) > 1:
            raise InputError(r.path, where, "supported: the same head_dim / num_key_value_heads on every "
                             "full_attention layer and on no other (or no entry: every layer alike)")
        entry = next(iter(overrides.values()), {})
        read = {"head_dim": entry.get("head_dim", base_dim), "num_key_value_heads": entry.get("num_key_value_heads")}
        for key, field, given in (("global_head_dim", "head_dim", dim), ("num_global_key_value_heads",
                                                                          "num_key_value_heads", kv)):
            if r.cfg.get(key) is not None and given is not None and given != (read[field] or base_kv):
                raise InputError(r.path, r.prefix + key, "disagrees with per_layer_config, which transformers "
                                 "reads instead")
        dim, kv = read["head_dim"], read["num_key_value_heads"]
    if "global" not in kinds:
        return
    if dim != base_dim:
        att["global_head_dim"] = dim
    if kv is not None and kv != base_kv:
        att["global_kv_heads"] = kv
    if k_eq_v:
        att["global_k_eq_v"] = True


# Gemma3nTextConfig's defaults (google/gemma-3n-E4B's shapes), for the keys save_pretrained leaves out
GEMMA3N_DEFAULTS = {"vocab_size": 262400, "vocab_size_per_layer_input": 262144, "hidden_size": 2048,
                    "hidden_size_per_layer_input": 256, "intermediate_size": 16384, "num_hidden_layers": 35,
                    "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256, "sliding_window": 512,
                    "max_position_embeddings": 32768, "num_kv_shared_layers": 15, "laurel_rank": 64,
                    "altup_num_inputs": 4, "final_logit_softcapping": 30.0, "tie_word_embeddings": True,
                    "hidden_activation": "gelu_pytorch_tanh"}


def _gemma3n(r: ConfigReader) -> dict:
    """Gemma 3n: Gemma 3's layers (four norms, q/k norms, a weightless v_norm, 4 sliding : 1 global) with
    Gemma 4's per-layer embeddings and K/V sharing (the last num_kv_shared_layers reuse the last earlier K/V of
    their kind), inside AltUp's altup_num_inputs streams (residual kind altup) with a LAuReL branch in every
    layer.  Its activation sparsity (a Gaussian top-k on the first layers' gate) is elementwise work only."""
    spec = _llama_like(r, family="gemma3n")
    att, ffn, n = spec["attention"], spec["ffn"], spec["n_layers"]
    att.setdefault("layer_types", ["global"] * n)
    att["v_norm"] = True  # Gemma3nTextAttention.v_norm: RMSNorm(head_dim, with_scale=False)
    widths = r.cfg.get("intermediate_size", GEMMA3N_DEFAULTS["intermediate_size"] if "intermediate_size" in
                       r.family_defaults else None)
    widths = widths if isinstance(widths, list) else [widths]
    for i, width in enumerate(widths):
        checked(r.path, f"{r.prefix}intermediate_size" + (f"[{i}]" if len(widths) > 1 else ""), "intermediate_size",
                width)
    if len(set(widths)) != 1 or len(widths) not in (1, n):
        raise InputError(r.path, r.prefix + "intermediate_size", f"one width, or {n} equal ones: MLPs of different "
                         "widths per layer are not supported")
    r.report.used[r.prefix + "intermediate_size"] = widths[0]
    ffn["d_ff"] = widths[0]
    shared = int(r.get("num_kv_shared_layers", default=0))
    if shared:
        att["kv_shared_layers"] = shared
    width = int(r.get("hidden_size_per_layer_input"))
    spec["per_layer_input"] = {"width": width, "vocab_size": r.get("vocab_size_per_layer_input")}
    spec["residual"] = {"kind": "altup", "streams": r.get("altup_num_inputs"), "laurel_rank": r.get("laurel_rank")}
    for key, why in (("altup_active_idx", "which stream the layers run on: the same work whichever"),
                     ("altup_coef_clip", "a clip of the coefficients in training"),
                     ("altup_correct_scale", "whether the learned scale multiplies (it exists either way)"),
                     ("activation_sparsity_pattern", "a Gaussian top-k on the gate's output: elementwise work only")):
        r.ignore(key, why)
    return spec
