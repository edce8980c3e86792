"""Hugging Face config.json -> ModelSpec, with a mapping report.

Every key of the config ends up in exactly one list of the report: used (it
shaped the spec), defaulted (absent, so the family's default was taken), or
ignored (it changes no number archcalc computes, with the reason).  A key
nobody recognises is a visible warning; an unknown model_type, or a value
that would change the math in a way archcalc cannot express, is an error.
The traps handled are listed in reference/anchors-memory-flops.md §C.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from archcalc.errors import InputError
from archcalc.files import read_json
from archcalc.limits import MAX_CONTEXT
from archcalc.spec.hf_keys import checked

_MISSING = object()

# Keys that change no parameter, FLOP or cache byte: ids, dtypes of the
# checkpoint, dropout, init, epsilons, training-only losses, routing details
# that do not change how many experts run, and bookkeeping.
NO_COST_KEYS = {
    "architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "_name_or_path",
    "_commit_hash", "auto_map", "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id",
    "use_cache", "initializer_range", "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "norm_eps",
    "norm_epsilon", "attention_dropout", "hidden_dropout", "resid_pdrop", "embd_pdrop", "attn_pdrop",
    "residual_dropout", "resid_dropout", "embedding_dropout", "emb_pdrop", "embed_dropout", "classifier_dropout", "summary_activation", "summary_first_dropout",
    "summary_proj_to_labels", "summary_type", "summary_use_proj", "task_specific_params", "pretraining_tp",
    "router_aux_loss_coef", "output_router_logits", "aux_loss_alpha", "seq_aux", "norm_topk_prob",
    "routed_scaling_factor", "scoring_func", "topk_method", "n_group", "topk_group", "ep_size",
    "query_pre_attn_scalar", "logit_scale", "cache_implementation", "attention_softmax_in_fp32",
    "scale_attention_softmax_in_fp32", "scale_attn_weights", "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn", "use_return_dict", "torchscript", "id2label", "label2id", "max_length",
    "swiglu_limit", "swiglu_alpha", "initial_context_length", "router_jitter_noise", "bos_token", "eos_token",
    "tokenizer_class", "use_flash_attn", "use_memory_efficient_attention", "rope_interleaved",
    "apply_residual_connection_post_layernorm", "is_decoder", "do_sample", "gradient_checkpointing",
    "image_token_index", "boi_token_index", "eoi_token_index", "unk_token_id", "dropout", "activation_dropout",
    "decoder_start_token_id", "tokenizer_name", "_attn_implementation_autoset", "clip_qkv", "num_logits_to_keep",
    "mm_tokens_per_image", "initializer_factor", "attn_implementation", "eod_token_id",
    "use_mrope",  # Qwen2-VL's split of the rotary dims by section: the same rotations
    # PretrainedConfig's own attributes, which nested configs (DBRX's) carry when transformers writes them
    "return_dict", "output_attentions", "output_hidden_states", "chunk_size_feed_forward", "problem_type",
    "is_encoder_decoder",
    # kernels and scheduling: Jamba's scan implementation, Nemotron-H's shared-expert overlap
    "use_associative_scan", "use_mambapy", "moe_shared_expert_overlap",
}

# Values transformers' config classes fill in when a config.json leaves them
# out (multimodal text_config blocks often do).  From Gemma3TextConfig.
FAMILY_DEFAULTS = {
    "gemma3_text": {"vocab_size": 262208, "max_position_embeddings": 131072, "rope_theta": 1_000_000.0,
                    "rope_local_base_freq": 10_000.0, "sliding_window_pattern": 6,
                    "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True},
    # BambaConfig's context default; Bamba-9B's config.json has no max_position_embeddings.
    "bamba": {"max_position_embeddings": 262144},
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
}
NO_COST_REASON = "changes no parameter, FLOP or cache byte"

GELU_NAMES = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python", "gelu_accurate")
ACTIVATIONS = {**{g: "gelu" for g in GELU_NAMES}, "silu": "silu", "swish": "silu", "relu": "relu", "relu2": "relu2",
               "xielu": "xielu"}
GATED_FORM = {"gelu": "geglu", "silu": "swiglu", "relu": "reglu"}


@dataclass
class MappingReport:
    used: dict[str, Any] = field(default_factory=dict)
    defaulted: dict[str, Any] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class ConfigReader:
    """Reads keys from a config dict and records what happened to each."""

    def __init__(self, cfg: dict, path: str, report: MappingReport, prefix: str = "", family_defaults: dict | None = None):
        self.cfg, self.path, self.report, self.prefix = cfg, path, report, prefix
        self.family_defaults = family_defaults or {}

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None or key in self.family_defaults

    def get(self, *keys: str, default: Any = _MISSING) -> Any:
        """The first of `keys` present with a non-null value; else the family's
        default, else `default` (both recorded as defaulted), or an error when
        there is none.  Other aliases present must agree with the one used."""
        for key in keys:
            if self.cfg.get(key) is not None:
                value = checked(self.path, self.prefix + key, key, self.cfg[key])
                self.report.used[self.prefix + key] = value
                self._check_aliases(key, keys)
                return value
        if keys[0] in self.family_defaults:
            default = self.family_defaults[keys[0]]
        if default is _MISSING:
            raise InputError(self.path, self.prefix + keys[0], "required key is missing")
        self.report.defaulted[self.prefix + keys[0]] = default
        return default

    def _check_aliases(self, used: str, keys: tuple[str, ...]) -> None:
        for other in keys:
            if other == used or other not in self.cfg or self.prefix + other in self.report.ignored:
                continue
            if self.cfg[other] in (None, self.cfg[used]):
                self.report.ignored[self.prefix + other] = f"same as {used}"
            else:
                self.report.ignored[self.prefix + other] = f"disagrees with {used}, which is used"
                self.report.warnings.append(
                    f"{self.path}: {self.prefix + other}={self.cfg[other]!r} disagrees with "
                    f"{self.prefix + used}={self.cfg[used]!r}; using {used}")

    def nested(self, table: dict, key: str, where: str, default: Any = None) -> Any:
        """`table[key]` of a nested object (rope_scaling), type-checked like a top-level key."""
        value = table.get(key)
        return default if value is None else checked(self.path, f"{self.prefix}{where}.{key}", key, value)

    def ignore(self, key: str, reason: str) -> None:
        if key in self.cfg:
            self.report.ignored[self.prefix + key] = reason

    def finish(self) -> None:
        """Sort every key not yet seen into ignored (known) or a warning."""
        seen = {k.removeprefix(self.prefix) for k in (*self.report.used, *self.report.defaulted, *self.report.ignored)}
        for key in self.cfg:
            if key in seen:
                continue
            if key in NO_COST_KEYS:
                self.report.ignored[self.prefix + key] = NO_COST_REASON
            else:
                self.report.warnings.append(f"{self.path}: key {self.prefix + key!r} not understood, ignored")


# ---- shared pieces ---------------------------------------------------------------------


def _activation(r: ConfigReader, gated: bool, default: str,
                keys: tuple[str, ...] = ("hidden_activation", "hidden_act", "activation_function")) -> str:
    name = r.get(*keys, default=default)
    if name not in ACTIVATIONS:
        raise InputError(r.path, "hidden_act", f"activation {name!r} is not known; known: {', '.join(ACTIVATIONS)}")
    base = ACTIVATIONS[name]
    if gated:
        if base not in GATED_FORM:
            raise InputError(r.path, "hidden_act", f"no gated form of {name!r}")
        return GATED_FORM[base]
    return base


def _built_so(r: ConfigReader, model: str, **switches: bool) -> None:
    """Config flags the family's transformers model hard-codes: any other value is not that model."""
    for key, needed in switches.items():
        if r.get(key, default=needed) is not needed:
            raise InputError(r.path, key, f"must be {str(needed).lower()}: transformers' {model} is built so")


GRANITE_MULTIPLIERS = ("embedding_multiplier", "residual_multiplier", "attention_multiplier", "logits_scaling")


def _ignore_multipliers(r: ConfigReader) -> None:
    for key in GRANITE_MULTIPLIERS:
        r.ignore(key, "scales activations, scores or logits: no parameter, FLOP or byte changes")


def _rope_scaling(r: ConfigReader) -> dict | None:
    """rope_scaling (transformers < 5) or rope_parameters (>= 5, possibly
    keyed by layer type); returns {type, factor, original_max_position_embeddings}."""
    raw = r.get("rope_scaling", "rope_parameters", default=None)
    if not raw:
        return None
    where = "rope_scaling" if r.cfg.get("rope_scaling") is not None else "rope_parameters"
    if "full_attention" in raw:  # per layer type: the global layers set the context limit
        where += ".full_attention"
        raw = checked(r.path, r.prefix + where, "rope_scaling", raw["full_attention"])
    kind = r.nested(raw, "rope_type", where) or r.nested(raw, "type", where, "default")
    if kind in ("default", None):
        return None
    if kind == "su":  # Phi-3's old name for longrope
        kind = "longrope"
    known = ("linear", "dynamic", "yarn", "llama3", "longrope")
    if kind not in known:
        raise InputError(r.path, "rope_scaling.rope_type", f"{kind!r} is not known; known: {', '.join(known)}")
    original = r.nested(raw, "original_max_position_embeddings", where)
    if original is None and r.has("original_max_position_embeddings"):  # Phi-3 keeps it at the top level
        original = r.get("original_max_position_embeddings")
    return {"type": kind, "factor": float(r.nested(raw, "factor", where, 1.0)), "original": original}


def _rope_base(r: ConfigReader, layer_type: str) -> float:
    """rope_theta at the top level (transformers < 5) or inside rope_parameters, which transformers 5
    writes instead (keyed by layer type where those differ: Gemma 3's sliding_attention base)."""
    top = ("rope_theta", "rotary_emb_base") if layer_type == "full_attention" else ("rope_local_base_freq",)
    if any(r.has(key) for key in top):
        return float(r.get(*top))
    nested, where = r.cfg.get("rope_parameters"), "rope_parameters"
    if isinstance(nested, dict) and isinstance(nested.get(layer_type), dict):
        nested, where = nested[layer_type], f"rope_parameters.{layer_type}"
    if isinstance(nested, dict) and nested.get("rope_theta") is not None:
        return float(r.nested(nested, "rope_theta", where))
    return float(r.get(top[0], default=10000.0))  # the config classes' default


def _position(r: ConfigReader, *, rotary_fraction: float = 1.0, scaled_limit_is_final: bool = False) -> tuple[dict, int]:
    """RoPE settings and the context limit (vLLM's rule, anchors §1.4 / §C.3)."""
    base = r.get("max_position_embeddings", "n_positions", "seq_length", default=2048)
    pos: dict = {"kind": "rope", "theta": _rope_base(r, "full_attention")}
    if rotary_fraction != 1.0:
        pos["rotary_fraction"] = rotary_fraction
    scaling = _rope_scaling(r)
    if not scaling:
        r.ignore("original_max_position_embeddings", "no rope scaling: the limit is max_position_embeddings")
    limit = base
    if scaling:
        pos["scaling"] = {"type": scaling["type"], "factor": scaling["factor"]}
        if scaling["original"]:
            pos["scaling"]["original_context"] = int(scaling["original"])
        if scaled_limit_is_final or scaling["type"] in ("llama3", "longrope"):
            pass  # the config's limit already includes the extension
        elif scaling["type"] == "yarn" and scaling["original"]:
            limit = int(scaling["original"] * scaling["factor"])
        else:
            limit = int(base * scaling["factor"])
    return pos, int(limit)


def _window(r: ConfigReader, n_layers: int, *, pattern_key_default: str | None = None,
            default_types: list[str] | None = None) -> dict:
    """sliding_window with layer_types (default_types: the config class's list when it is absent) /
    sliding_window_pattern / use_sliding_window."""
    names = {"sliding_attention": "local", "full_attention": "global", "linear_attention": "linear"}
    off = r.has("use_sliding_window") and not r.get("use_sliding_window")
    if off:
        for key in ("sliding_window", "max_window_layers", "sliding_window_pattern"):
            r.ignore(key, "use_sliding_window is false: every layer attends to the full context")
        if not r.has("layer_types"):
            return {}
        # layer_types still says which layers are linear (Qwen3-Next as transformers 5 saves it); its
        # sliding entries get no window (Qwen2Config drops sliding_window): they attend to everything
        names["sliding_attention"] = "global"
    window = None if off else r.get("sliding_window", default=None)
    if r.has("sliding_window_size"):
        r.ignore("sliding_window_size", "duplicate of sliding_window")
    layer_types = r.get("layer_types", default=default_types)
    if layer_types:
        unknown = set(layer_types) - set(names)
        if unknown:
            raise InputError(r.path, "layer_types", f"{sorted(unknown)} not supported; known: {', '.join(names)}")
        kinds = [names[t] for t in layer_types]
        for key in ("sliding_window_pattern", "_sliding_window_pattern", "max_window_layers"):
            r.ignore(key, "layer_types takes precedence")
        if "local" not in kinds and not off:
            r.ignore("sliding_window", "no layer_types entry is sliding_attention")
            window = None
        return {"sliding_window": window, "layer_types": kinds} if set(kinds) != {"global"} else {}
    if window is None:
        r.ignore("sliding_window_pattern", "no sliding_window")
        r.ignore("max_window_layers", "no sliding_window")
        return {}
    if r.has("sliding_window_pattern"):  # Gemma 3 / Cohere 2: layer i is global iff (i + 1) % p == 0
        p = int(r.get("sliding_window_pattern"))
        return {"sliding_window": window, "layer_types": f"{p - 1}:1"}
    if pattern_key_default:
        return {"sliding_window": window, "layer_types": pattern_key_default}
    if r.has("max_window_layers"):  # Qwen2: layers from max_window_layers on use the window
        first = int(r.get("max_window_layers"))
        return {"sliding_window": window,
                "layer_types": ["global" if i < first else "local" for i in range(n_layers)]}
    return {"sliding_window": window}


def _core(r: ConfigReader, *, tie_default: bool, layers: bool = True) -> dict:
    """Width, depth (layers=False: the family derives it), vocabulary and tying."""
    return {
        "d_model": r.get("hidden_size", "n_embd", "d_model"),
        **({"n_layers": r.get("num_hidden_layers", "n_layer", "num_layers", "n_layers")} if layers else {}),
        "vocab_size": r.get("vocab_size"),
        "tie_embeddings": bool(r.get("tie_word_embeddings", default=tie_default)),
    }


def _heads(r: ConfigReader, n_heads_key=("num_attention_heads", "n_head")) -> dict:
    n_heads = r.get(*n_heads_key)
    att = {"n_heads": n_heads,
           "n_kv_heads": r.get("num_key_value_heads", "num_kv_heads", "n_head_kv", default=n_heads)}
    head_dim = r.get("head_dim", "kv_channels", "attention_head_dim", default=None)
    if head_dim is not None:
        att["head_dim"] = head_dim
    return att


# ---- families ------------------------------------------------------------------------------


def _llama_like(r: ConfigReader, *, family: str) -> dict:
    """The Llama-shaped families (q/k/v/o, a gated MLP, pre-norm unless said): llama, mistral, mixtral,
    qwen2/3 (+ MoE, Qwen3-Next), gemma 1/2/3, olmo 1/2/3, olmoe, phi3, phimoe, cohere 1/2, granite (+ MoE, + SWA),
    smollm3, stablelm, exaone4, ernie4_5 (+ MoE), seed_oss, glm4 (+ MoE), dots1, hunyuan (+ MoE), apertus,
    ministral, ministral3, vaultgemma, glm, internlm3, solar_open, nanochat, jais2, flex_olmo; each
    family's differences are the branches below."""
    gemma = family.startswith("gemma") or family == "vaultgemma"
    # Cohere2Config ties by default too (command-r7b-12-2024 leaves tie_word_embeddings out).
    spec = _core(r, tie_default=gemma or family in ("cohere", "cohere2", "smollm3", "granite_swa"))
    att = _heads(r)
    if family in NO_ATTENTION_BIAS:  # transformers hard-codes bias-free q/k/v/o whatever the config says
        _built_so(r, NO_ATTENTION_BIAS[family], attention_bias=False)
    if family == "internlm3":  # InternLM3Config maps qkv_bias -> attention_bias, bias -> mlp_bias
        bias = r.get("attention_bias", "qkv_bias", default=False)
        if bool(r.get("mlp_bias", "bias", default=False)) != bool(bias):
            raise InputError(r.path, "bias", "must equal qkv_bias: transformers builds InternLM3 as Llama, with one "
                             "bias switch for q/k/v/o and one for the MLP, and refuses them unequal")
    else:  # (Sarvam-30B's original file says use_qkv_bias, SarvamMoEConfig's alias)
        bias = r.get("attention_bias", *(("use_qkv_bias",) if family == "glm4_moe" else ()),
                     default=family in ("qwen2", "qwen2_moe", "glm", "jais2"))
    if family in ("qwen2", "qwen2_moe"):  # q/k/v biases (Qwen2MoeConfig.qkv_bias, else hard-coded); o has none
        if family == "qwen2" or r.get("qkv_bias", default=True):
            att["bias"] = ["q", "k", "v"]
    elif bias and family in QKV_BIAS_ONLY:
        att["bias"] = ["q", "k", "v"]
    elif bias:
        att["bias"] = ["q", "k", "v", "o"]
    if family == "seed_oss" and r.get("attention_out_bias", default=False):
        att["bias"] = [*att.get("bias", []), "o"]
    # Apertus' MLP is up, xIELU, down; Arcee's (AFM-4.5B), NanoChat's and Jais 2's up, ReLU², down: not gated.
    ffn = {"activation": _activation(r, family not in UNGATED, FAMILY_ACTIVATION.get(family) or
                                     ("gelu_pytorch_tanh" if gemma else "silu")),
           "d_ff": None if family == "solar_open" else r.get("intermediate_size", default=None)}
    if family == "solar_open":  # SolarOpenConfig removes intermediate_size: every layer is MoE
        r.ignore("intermediate_size", "no dense MLP: transformers' Solar Open is MoE in every layer")
    if family in NO_MLP_BIAS:
        _built_so(r, NO_MLP_BIAS[family], mlp_bias=False)
    if r.get(*(("mlp_bias", "bias") if family == "internlm3" else ("mlp_bias",)), default=family == "jais2"):
        ffn["bias"] = True
    if family == "ernie4_5" and r.get("use_bias", default=False):  # one switch for every projection
        att["bias"], ffn["bias"] = ["q", "k", "v", "o"], True
    if family == "ernie4_5_moe" and r.get("use_bias", default=False):
        raise InputError(r.path, "use_bias", "biases in ERNIE 4.5 MoE (attention, dense MLPs, lm_head, not the "
                         "experts) are not supported")
    norm: dict = {}
    residual: dict = {}
    scaled_final = False
    if family in QWEN_HYBRID:
        att["output_gate"] = True  # Qwen3NextAttention's q_proj is 2·H·head_dim: the query and its gate
        if not r.get("attn_output_gate", default=True):  # Qwen3.5 states it; transformers gates regardless
            raise InputError(r.path, r.prefix + "attn_output_gate", "false is not supported: transformers' "
                             "Qwen3.5 attention always gates its output")
        if family != "qwen3_next":  # Qwen3.5's MTP modules (mtp.* in the checkpoint, sharing embedding and head)
            if r.get("mtp_use_dedicated_embeddings", default=False):
                raise InputError(r.path, r.prefix + "mtp_use_dedicated_embeddings",
                                 "true is not supported (an MTP module with its own embedding)")
            n = r.get("mtp_num_hidden_layers", default=0)
            spec["mtp"] = {"layers": n} if n else None

        if family == "qwen3_5":
            r.ignore("mlp_only_layers", "no experts: every layer's MLP is dense")
        spec["linear"] = {"n_heads": r.get("linear_num_value_heads"), "n_key_heads": r.get("linear_num_key_heads"),
                          "key_head_dim": r.get("linear_key_head_dim"),
                          "value_head_dim": r.get("linear_value_head_dim"),
                          "conv_kernel": r.get("linear_conv_kernel_dim", default=4),
                          # Qwen3-Next stores in_proj_qkvz and in_proj_ba; Qwen3.5 in_proj_qkv, _z, _b and _a
                          **({"fused_projections": False} if family != "qwen3_next" else {}),
                          # Qwen3.5 names the recurrent state's dtype for engines (vLLM keeps it so)
                          **({"state_dtype": _state_dtype(r, "mamba_ssm_dtype")} if family != "qwen3_next" else {})}
        if r.has("layer_types"):
            r.ignore("full_attention_interval", "layer_types lists the layers")
        else:  # Qwen3NextConfig: every full_attention_interval-th layer is full attention
            interval = int(r.get("full_attention_interval", default=4))
            att["layer_types"] = ["global" if (i + 1) % interval == 0 else "linear" for i in range(spec["n_layers"])]
    if family in ("qwen3", "qwen3_moe", "gemma3", "hunyuan_v1_dense", "hunyuan_v1_moe", "dots1", *QWEN_HYBRID) or (
            family == "glm4_moe" and r.get("use_qk_norm", default=False)):
        att["qk_norm"] = "head"  # one RMSNorm of head_dim for q, one for k
    if gemma:  # Gemma's bidirectional switch (EmbeddingGemma): every token attends to every other
        if r.cfg.get("use_bidirectional_attention"):
            raise InputError(r.path, r.prefix + "use_bidirectional_attention", "bidirectional attention is not "
                             "supported: archcalc models causal decoders")
        r.ignore("use_bidirectional_attention", "null or false: causal, as every Gemma LM")
    if family in ("gemma2", "gemma3", "glm4", "afmoe"):
        norm["placement"] = "both"  # input, post-attention, pre- and post-feedforward norms
    if family in ("gemma2", "vaultgemma"):  # VaultGemma: Gemma 2 without its post-norms
        att["softcap"] = r.get("attn_logit_softcapping", default=None)
        spec["final_softcap"] = r.get("final_logit_softcapping", default=None)
    if family == "nanochat":
        # Every norm is weightless (NanoChatRMSNorm is Llama 4's L2 norm), one more follows the embedding,
        # q and k are normalised per head after RoPE, and the logits are soft-capped (default 15).
        norm.update(weight=False, embedding=True)
        att["qk_norm"] = "l2"
        spec["final_softcap"] = r.get("final_logit_softcapping", default=15.0)
    if family == "jais2":
        norm.update(kind="layernorm", bias=True)  # nn.LayerNorm with its bias, despite Llama's shape
    if family == "ministral3":
        _ministral3(r)
    elif family == "gemma3":
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            if r.cfg.get(key) is not None:
                raise InputError(r.path, key, "soft-capping is not expected on gemma3; remove it or use gemma2")
            r.ignore(key, "null")
        scaled_final = True  # Gemma 3's max_position_embeddings already includes the linear scaling
    if family in ("olmo2", "olmo3", "olmoe", "flex_olmo"):
        att["qk_norm"] = "full"  # q_norm over H·d, k_norm over K·d
    if family == "olmo":  # OlmoLayerNorm: F.layer_norm with neither weight nor bias
        norm.update(kind="layernorm", weight=False)
    if family == "phimoe":
        norm.update(kind="layernorm", bias=True)  # nn.LayerNorm, despite the rms_norm_eps key
        spec["lm_head_bias"] = bool(r.get("lm_head_bias", default=False))
        r.ignore("input_jitter_noise", "training-time noise")
    if family in ("olmo2", "olmo3", "exaone4", "flex_olmo"):
        norm["placement"] = "post"  # no input norm: x + N(F(x))
    if family in ("exaone4", "exaone_moe", "afmoe", "hy_v3"):
        att["qk_norm"] = "head"
    if family == "afmoe":  # AfmoeAttention: a gate_proj of H·d beside q_proj, sigmoid on the output
        att["output_gate"] = True
        for key in ("route_scale", "mup_enabled"):
            r.ignore(key, "scalings (the routed output, µP's embedding scale): no parameter, FLOP or cache byte")
    if family == "apertus":
        att["qk_norm"] = "head"  # ApertusAttention's q_norm, k_norm: RMSNorms of head_dim
        _built_so(r, "Apertus", qk_norm=True, post_norm=False)
    if family in ("hunyuan_v1_dense", "hunyuan_v1_moe"):
        # Tencent's remote-code switches: transformers' HunYuan always has qk-norm and RoPE and no
        # cross-layer attention, so a config that turns them the other way is not this model.
        _built_so(r, "HunYuan", use_qk_norm=True, use_rotary_pos_emb=True, use_cla=False)
        r.ignore("cla_share_factor", "use_cla is false")
        if r.get("norm_type", default="rms") not in ("rms", "hf_rms"):
            raise InputError(r.path, "norm_type", f"{r.cfg['norm_type']!r} is not supported; HunYuan uses RMSNorm")
        for key in ("add_classification_head", "class_num", "pool_type"):
            r.ignore(key, "a classification head, not part of the causal LM")
        for key in ("dense_list", "org_vocab_size", "im_start_id", "im_end_id", "im_newline_id", "mask_init_id",
                    "pad_id", "text_start_id", "text_end_id"):
            r.ignore(key, "token ids and remote-code bookkeeping")
    if family in ("granite", "granitemoe", "granitemoeshared", *GRANITE_SWA):
        _ignore_multipliers(r)
    if family in GRANITE_SWA:
        _granite_swa(r, att, spec["n_layers"])
    if family == "smollm3":
        # One flag per layer, 1 = RoPE; absent, every no_rope_layer_interval-th layer is NoPE (HF's rule).
        interval = int(r.get("no_rope_layer_interval", default=4))
        flags = r.get("no_rope_layers", default=None)
        if flags is None:
            flags = [int((i + 1) % interval != 0) for i in range(spec["n_layers"])]
        else:
            r.ignore("no_rope_layer_interval", "no_rope_layers lists the layers")
        if len(flags) != spec["n_layers"]:
            raise InputError(r.path, "no_rope_layers", f"lists {len(flags)} layers, num_hidden_layers is {spec['n_layers']}")
        if any(flag not in (0, 1) for flag in flags):
            raise InputError(r.path, "no_rope_layers", "entries must be 1 (RoPE) or 0 (NoPE)")
        att["nope_layers"] = [i for i, flag in enumerate(flags) if not flag]
    if family == "stablelm":
        norm.update(kind="layernorm", bias=True)
        att["bias"] = ["q", "k", "v"] if r.get("use_qkv_bias", default=False) else []
        if r.get("qk_layernorm", default=False):
            raise InputError(r.path, "qk_layernorm", "StableLM's per-head q/k LayerNorms are not supported")
        if r.get("use_parallel_residual", default=False):
            residual = {"kind": "parallel", "parallel_norms": 1}  # input_layernorm feeds both
    if family in ("cohere", "cohere2"):
        norm.update(kind="layernorm", bias=False)  # CohereLayerNorm has no bias
        residual = {"kind": "parallel", "parallel_norms": 1}
        if r.get("use_qk_norm", default=False):
            att["qk_norm"] = "full"  # a LayerNorm weight of [heads, head_dim]: H·d and K·d values
    if family == "cohere2":
        _cohere2_remote_keys(r)
    rotary = _rotary_fraction(r, ROTARY_DEFAULTS.get(family, 1.0))
    if family == "minimax_m2":
        rotary = _minimax_m2(r, att)
    pos, limit = _position(r, rotary_fraction=rotary, scaled_limit_is_final=scaled_final)
    if family == "gemma3":
        pos["local_theta"] = _rope_base(r, "sliding_attention")
    if family == "cohere" and r.has("model_max_length"):
        limit = int(r.get("model_max_length"))  # vLLM's Cohere special case
    window = _window(r, spec["n_layers"], pattern_key_default="1:1" if family in ("gemma2", "vaultgemma") else None,
                     default_types=_granite_swa_types(spec["n_layers"]) if family in GRANITE_SWA else
                     _afmoe_types(r, spec["n_layers"]) if family == "afmoe" else None)
    att.update({k: v for k, v in window.items() if v is not None})
    if family == "afmoe":  # AfmoeAttention rotates its sliding layers only, window or not
        kinds = att.get("layer_types") or ["global"] * spec["n_layers"]
        if "global" in kinds:
            att["nope_layers"] = [i for i, k in enumerate(kinds) if k == "global"]
    if family in ("exaone4", "exaone_moe") and window.get("sliding_window") or family == "cohere2":
        att["global_rope"] = False  # RoPE on the sliding layers only (Exaone4Attention, Cohere2Attention)
    moe = _moe(r, family, spec["n_layers"])
    if moe:
        ffn["moe"] = moe
    if family in ("glm4_moe", "dots1", "solar_open"):
        spec["mtp"] = _mtp(r)
    return {**spec, "max_context": limit, "attention": att, "ffn": ffn, "norm": norm, "position": pos,
            "residual": residual}


GRANITE_SWA = ("granite_swa", "granitemoe_swa")


def _granite_swa_types(n_layers: int) -> list[str]:
    """GraniteSWAConfig's layer_types when the config has none: layer i is global iff i % 4 == 0."""
    return ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(n_layers)]


def _afmoe_types(r: ConfigReader, n_layers: int) -> list[str]:
    """AfmoeConfig's layer_types when absent: every global_attn_every_n_layers-th layer global."""
    every = int(r.get("global_attn_every_n_layers", default=4))
    return ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n_layers)]


def _granite_swa(r: ConfigReader, att: dict, n_layers: int) -> None:
    """Granite SWA: a learned sink per head (GraniteSWAAttention.sinks, [num_attention_heads]) and
    layer_rope_theta, one RoPE base per layer where 0 means the layer has no RoPE."""
    att["sinks"] = True
    thetas = r.get("layer_rope_theta", default=None)  # absent: every layer at rope_theta
    if thetas is None:
        return
    if len(thetas) != n_layers:
        raise InputError(r.path, r.prefix + "layer_rope_theta", f"lists {len(thetas)} layers, "
                         f"num_hidden_layers is {n_layers}")
    nope = [i for i, theta in enumerate(thetas) if theta == 0]
    if nope:
        att["nope_layers"] = nope
    # The other bases change which frequencies rotate, not how many values: no count changes.


def _cohere2_remote_keys(r: ConfigReader) -> None:
    """The switches of Cohere's own code that command-r7b-12-2024's config.json still carries;
    Cohere2Config does not read them, so each must describe what transformers' Cohere2 builds."""
    # Cohere2DecoderLayer: attention and a gated (SwiGLU) MLP in parallel off one LayerNorm.
    _built_so(r, "Cohere2", use_parallel_block=True, use_gated_activation=True)
    if r.get("rotary_pct", default=1.0) != 1.0:  # Cohere2's RoPE turns every dim of the head
        raise InputError(r.path, "rotary_pct", "must be 1.0: transformers' Cohere2 rotates whole heads")
    # (i + 1) % sliding_window_pattern: three sliding layers, then the global one.
    if r.get("order_of_interleaved_layers", default="local_attn_first") != "local_attn_first":
        raise InputError(r.path, "order_of_interleaved_layers",
                         "must be local_attn_first: transformers' Cohere2 puts the global layer last")
    r.ignore("layer_switch", "the remote code's name for sliding_window_pattern, which is read")
    r.ignore("position_embedding_type", "rope_gptj: the interleaved rotation Cohere2 applies; no parameter or count")
    r.ignore("use_embedding_sharing", "tie_word_embeddings decides the tying transformers builds")
    r.ignore("use_parallel_embedding", "a tensor-parallel layout of the same embedding")


def _cohere2_moe(r: ConfigReader) -> dict:
    """Cohere2-MoE: Cohere 2's parallel block (one norm: RMSNorm when rms_norm_eps is set, else Cohere's
    bias-free LayerNorm), windows on layer_types' sliding layers; mlp_layer_types' dense prefix of
    prefix_dense_intermediate_size, then Mixtral-style experts of intermediate_size with optional shared
    experts.  RoPE on the sliding layers, and on every dense layer when prefix_dense_sliding_window_pattern
    is 1 (Cohere2MoeAttention.force_rope)."""
    spec = _core(r, tie_default=True)
    L = spec["n_layers"]
    att = _heads(r)
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    first_dense = r.get("first_k_dense_replace", default=0)
    prefix_pattern = r.get("prefix_dense_sliding_window_pattern", default=1)
    pattern = r.get("sliding_window_pattern", default=4)
    types = r.get("layer_types", default=None)
    if types is None:  # Cohere2MoeConfig's rule: the prefix has its own pattern, the rest theirs from 0
        types = [("sliding_attention" if (i + 1) % prefix_pattern else "full_attention") for i in range(first_dense)] + \
                [("sliding_attention" if (i + 1) % pattern else "full_attention") for i in range(L - first_dense)]
    else:
        r.ignore("sliding_window_pattern", "layer_types lists the layers")
    mlp_types = r.get("mlp_layer_types", default=None) or ["dense" if i < first_dense else "sparse" for i in range(L)]
    if len(types) != L or set(types) - {"sliding_attention", "full_attention"}:
        raise InputError(r.path, r.prefix + "layer_types", f"{L} entries of sliding_attention or full_attention expected")
    if len(mlp_types) != L or set(mlp_types) - {"dense", "sparse"}:
        raise InputError(r.path, r.prefix + "mlp_layer_types", f"{L} entries of dense or sparse expected")
    window = r.get("sliding_window", default=4096)
    if window is not None and "sliding_attention" in types:
        att |= {"sliding_window": window, "layer_types": ["local" if t == "sliding_attention" else "global" for t in types]}
    rotated = [t == "sliding_attention" and window is not None or (m == "dense" and prefix_pattern == 1)
               for t, m in zip(types, mlp_types)]
    if not all(rotated):
        att["nope_layers"] = [i for i, rot in enumerate(rotated) if not rot]
    d_expert = r.get("intermediate_size")
    moe = {"n_experts": r.get("num_experts", default=8), "top_k": r.get("num_experts_per_tok", default=2),
           "d_expert": d_expert, "d_shared": r.get("num_shared_experts", default=0) * d_expert}
    for key, reason in (("shared_expert_combination_strategy", "sum or average of the shared and routed outputs: "
                         "one elementwise op, not counted"), ("expert_selection_fn", "the router's score function: "
                         "the same experts run"), ("logit_scale", NO_COST_REASON)):
        r.ignore(key, reason)
    dense_ff = r.get("prefix_dense_intermediate_size", default=None) if "dense" in mlp_types else None
    if "dense" not in mlp_types:
        r.ignore("prefix_dense_intermediate_size", "no dense layer")
    rms = r.cfg.get("rms_norm_eps") is not None
    pos, limit = _position(r)
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": dense_ff or d_expert,
                    "moe": _with_layers(moe, [i for i, m in enumerate(mlp_types) if m == "sparse"], L)},
            "norm": {"kind": "rmsnorm"} if rms else {"kind": "layernorm", "bias": False},
            "residual": {"kind": "parallel", "parallel_norms": 1}}


def _ministral3(r: ConfigReader) -> None:
    """Ministral 3 / Devstral 2 (the text_config of mistral3): Mistral's layers, and a Llama-4-style
    scaling of the queries by position (rope_parameters.llama_4_scaling_beta: an elementwise product,
    no parameter).  Its attention ignores layer_types (transformers warns; every layer uses
    sliding_window when one is set), so only an all-full list reads the same either way."""
    types = r.cfg.get("layer_types")
    if types is not None and (r.cfg.get("sliding_window") is not None or set(types) != {"full_attention"}):
        raise InputError(r.path, r.prefix + "layer_types", "transformers' Ministral3 ignores layer_types (every "
                         "layer uses sliding_window when it is set); per-layer windows are model_type ministral")


def _uniform(r: ConfigReader, key: str, default: Any = _MISSING) -> Any:
    """An integer, or one per layer all equal (HunYuan-A13B's num_experts, moe_topk, ...)."""
    raw = r.cfg.get(key)
    if not isinstance(raw, list):
        return r.get(key) if default is _MISSING else r.get(key, default=default)
    for i, item in enumerate(raw):
        checked(r.path, f"{r.prefix}{key}[{i}]", key, item)
    if len(set(raw)) != 1:
        raise InputError(r.path, r.prefix + key, "differs between layers; archcalc's MoE has one value for "
                                                 "every MoE layer")
    r.report.used[r.prefix + key] = raw
    return raw[0]


def _hunyuan_moe(r: ConfigReader) -> dict:
    """HunYuan-A13B (hunyuan_v1_moe): in every layer, routed experts and one shared MLP beside them,
    all intermediate_size wide (HunYuanMoEV1Moe), a bias-free softmax router; Tencent's per-layer
    lists must be uniform, and its remote-code widths must be the ones transformers builds."""
    d = r.get("intermediate_size")
    for key, needed in (("moe_intermediate_size", d), ("num_shared_expert", 1)):
        if r.cfg.get(key) is not None and _uniform(r, key) != needed:
            raise InputError(r.path, r.prefix + key, f"must be {needed}: transformers' HunYuan MoE builds its "
                             "experts and one shared MLP, all intermediate_size wide")
    _built_so(r, "HunYuan MoE", use_mixed_mlp_moe=True)
    if r.get("moe_layer_num_skipped", default=0) != 0:
        raise InputError(r.path, r.prefix + "moe_layer_num_skipped", "must be 0: transformers' HunYuan MoE is MoE "
                                                                     "in every layer")
    for key in ("capacity_factor", "moe_drop_tokens", "moe_random_routing_dropped_token", "group_limited_greedy"):
        r.ignore(key, "routing details: the same experts run per token")
    return {"n_experts": _uniform(r, "num_experts", 1), "top_k": _uniform(r, "moe_topk", 1), "d_expert": d,
            "d_shared": d}


def _minimax_m2(r: ConfigReader, att: dict) -> float:
    """MiniMax-M2: full attention in every layer (attn_type_list all 1; 0 would be MiniMax-Text-01's
    lightning attention), q_norm / k_norm over all heads (qk_norm_type per_layer), RoPE on
    rotary_dim of each head; returns the rotary fraction."""
    if any(t != 1 for t in r.get("attn_type_list", default=[])):
        raise InputError(r.path, "attn_type_list", "a 0 is a lightning-attention layer, not supported; "
                                                   "MiniMax-M2 lists 1 (full attention) for every layer")
    if r.get("use_qk_norm", default=True):
        if r.get("qk_norm_type", default="per_layer") != "per_layer":
            raise InputError(r.path, "qk_norm_type", "per_layer (one norm over all heads) is what transformers builds")
        att["qk_norm"] = "full"  # MiniMaxM2Attention: RMSNorms of H·d and K·d
    for key, why in (("scoring_func", "the router's score function: no parameter changes"),
                     ("use_routing_bias", "e_score_correction_bias is a buffer, not a parameter"),
                     ("use_mtp", "MTP modules (num_mtp_modules) are not modelled: in no total, and --mtp adds none"),
                     ("num_mtp_modules", "MTP modules are not modelled"),
                     ("mtp_transformer_layers", "MTP modules are not modelled")):
        r.ignore(key, why)
    shared = r.cfg.get("shared_intermediate_size")
    if not (shared is None or (type(shared) is int and shared == 0)):
        raise InputError(r.path, "shared_intermediate_size", f"{shared!r}: transformers' MiniMax-M2 builds no shared "
                                                             "expert; 0 expected")
    r.ignore("shared_intermediate_size", "0: no shared expert")
    head_dim = att.get("head_dim") or r.get("hidden_size") // att["n_heads"]
    return r.get("rotary_dim", default=head_dim) / head_dim


def _moe(r: ConfigReader, family: str, n_layers: int) -> dict | None:
    if family in ("mixtral", "minimax_m2"):  # num_local_experts experts of intermediate_size
        return {"n_experts": r.get("num_local_experts"), "top_k": r.get("num_experts_per_tok"),
                "d_expert": r.get("intermediate_size")}
    if family == "hunyuan_v1_moe":
        return _hunyuan_moe(r)
    if family == "solar_open":  # Glm4MoeMoE in every layer: routed experts and the shared ones
        for key in ("first_k_dense_replace", "moe_layer_freq"):
            if r.cfg.get(key) not in (None, 0 if key == "first_k_dense_replace" else 1):
                raise InputError(r.path, key, f"{r.cfg[key]!r}: transformers' Solar Open is MoE in every layer")
            r.ignore(key, "MoE in every layer, as transformers builds Solar Open")
        d_expert = r.get("moe_intermediate_size")
        return {"n_experts": r.get("n_routed_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
                "d_expert": d_expert, "d_shared": r.get("n_shared_experts", default=1) * d_expert}
    if family in ("olmoe", "phimoe", "granitemoe", "granitemoeshared", "granitemoe_swa", "flex_olmo"):  # every layer, no shared expert but
        moe = {"n_experts": r.get("num_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
               "d_expert": r.get("intermediate_size")}
        if family in ("granitemoeshared", "granitemoe_swa"):  # Granite's gated shared MLP of shared_intermediate_size
            moe["d_shared"] = r.get("shared_intermediate_size", default=0)
        return moe
    if family in ("dots1", "glm4_moe"):
        return _deepseek_moe(r, n_layers)
    if family == "afmoe":  # after num_dense_layers dense ones; expert_bias is an nn.Parameter: the router's bias
        d_expert = r.get("moe_intermediate_size")
        moe = {"n_experts": r.get("num_experts"), "top_k": r.get("num_experts_per_tok"), "d_expert": d_expert,
               "d_shared": r.get("num_shared_experts", default=2) * d_expert, "router_bias": True}
        first = r.get("num_dense_layers", default=1)
        return _with_layers(moe, list(range(first, n_layers)), n_layers)
    if family in ("exaone_moe", "hy_v3"):  # DeepSeek-V3-style MoE (a sigmoid router, its bias a buffer) on "sparse" layers
        n_dense = r.get("first_k_dense_replace", default=1)
        types = r.get("mlp_layer_types", default=None)
        if types is None:
            types = ["dense" if i < n_dense else "sparse" for i in range(n_layers)]  # ExaoneMoeConfig's, HYV3Config's rule
        else:
            r.ignore("first_k_dense_replace", "mlp_layer_types lists the layers")
        if len(types) != n_layers or set(types) - {"dense", "sparse"}:
            raise InputError(r.path, r.prefix + "mlp_layer_types", f"{n_layers} entries of dense or sparse expected")
        d_expert = r.get("moe_intermediate_size")
        moe = {"n_experts": r.get("num_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
               "d_expert": d_expert, "d_shared": r.get("num_shared_experts", default=1) * d_expert}
        for key in ("router_scaling_factor", "enable_moe_fp32_combine"):
            r.ignore(key, "the routed output's scale and the dtype it is summed in: the same experts run")
        return _with_layers(moe, [i for i, t in enumerate(types) if t == "sparse"], n_layers)
    if family == "ernie4_5_moe":
        # MoE on layer i when (i + 1) % interval == 0 and start <= i <= end (end -1: the last layer);
        # e_score_correction_bias is an nn.Parameter here ([1, E]): counted as the router's bias.
        start, end = r.get("moe_layer_start_index", default=1), r.get("moe_layer_end_index", default=-1)
        interval = r.get("moe_layer_interval", default=1)
        end = n_layers - 1 if end == -1 else end
        d_expert = r.get("moe_intermediate_size")
        moe = {"n_experts": r.get("moe_num_experts"), "top_k": r.get("moe_k"), "d_expert": d_expert,
               "d_shared": r.get("moe_num_shared_experts", default=0) * d_expert, "router_bias": True}
        r.ignore("moe_norm_min", "an epsilon")
        return _with_layers(moe, [i for i in range(n_layers) if (i + 1) % interval == 0 and start <= i <= end],
                            n_layers)
    if family not in ("qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_5_moe"):
        return None
    # transformers 5 saves Qwen3-MoE's num_experts as num_local_experts (Qwen3MoeConfig.attribute_map)
    moe = {"n_experts": r.get("num_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
           "d_expert": r.get("moe_intermediate_size")}
    if family in ("qwen2_moe", "qwen3_next", "qwen3_5_moe"):  # a shared expert behind a sigmoid gate
        moe.update(d_shared=r.get("shared_expert_intermediate_size"), shared_gate=True)
    step = int(r.get("decoder_sparse_step", default=1))
    dense = set(r.get("mlp_only_layers", default=[]))
    return _with_layers(moe, [i for i in range(n_layers) if i not in dense and (i + 1) % step == 0], n_layers)


# Families whose attention_bias puts biases on q, k and v but not on o_proj.
QKV_BIAS_ONLY = ("glm4", "glm4_moe", "seed_oss", "glm", "solar_open")
# Families whose transformers attention is bias-free whatever attention_bias says (MinistralAttention
# rebuilds q/k/v without one; Mistral's o_proj has none): a true value is not that model.
NO_ATTENTION_BIAS = {"ministral": "Ministral", "ministral3": "Ministral3"}
# Families whose MLP has no bias switch (GlmMLP is Phi-3's fused gate_up, bias-free).
NO_MLP_BIAS = {"glm": "GLM", "ministral": "Ministral", "ministral3": "Ministral3", "solar_open": "Solar Open",
               "nanochat": "NanoChat"}
# Llama-shaped families whose MLP is up, activation, down (no gate).
UNGATED = ("apertus", "arcee", "nanochat", "jais2")
# hidden_act when a config leaves it out, where the config class's default is not silu.
FAMILY_ACTIVATION = {"nanochat": "relu2", "jais2": "relu2"}
# partial_rotary_factor when a config leaves it out (the config classes' defaults).
ROTARY_DEFAULTS = {"stablelm": 0.25, "glm4": 0.5, "glm4_moe": 0.5, "glm": 0.5,
                   **{f: 0.25 for f in ("qwen3_next", "qwen3_5", "qwen3_5_moe")}}
# Qwen3-Next and Qwen3.5: Gated DeltaNet layers between gated full-attention ones.
QWEN_HYBRID = ("qwen3_next", "qwen3_5", "qwen3_5_moe")


def _rotary_fraction(r: ConfigReader, default: float) -> float:
    """partial_rotary_factor at the top level, or inside transformers 5's rope_parameters."""
    if r.has("partial_rotary_factor"):
        return float(r.get("partial_rotary_factor"))
    nested = r.cfg.get("rope_parameters")
    if isinstance(nested, dict) and nested.get("partial_rotary_factor") is not None:
        return float(r.nested(nested, "partial_rotary_factor", "rope_parameters"))
    return default


def _with_layers(moe: dict, layers: list[int], n_layers: int) -> dict:
    """Which layers are MoE, as first_dense_layers when that says it, else a list."""
    first = n_layers - len(layers)
    if layers != list(range(first, n_layers)):
        return {**moe, "layers": layers}
    return {**moe, "first_dense_layers": first} if first else moe


def _no_cross_attention(r: ConfigReader) -> None:
    """add_cross_attention (GPT-2, XGLM, BioGPT's configs): layers that attend to an encoder's states."""
    if r.get("add_cross_attention", default=False):
        raise InputError(r.path, r.prefix + "add_cross_attention", "true is not supported: cross-attention to an "
                         "encoder is not a decoder-only model")


def _gpt2(r: ConfigReader) -> dict:
    spec = _core(r, tie_default=True)
    _no_cross_attention(r)
    d = spec["d_model"]
    inner = r.get("n_inner", default=None)
    return {**spec, "max_context": r.get("n_positions", "n_ctx", "max_position_embeddings"),
            "attention": {"n_heads": r.get("n_head"), "bias": ["q", "k", "v", "o"]},
            "ffn": {"activation": _activation(r, False, "gelu_new"), "d_ff": inner or 4 * d, "bias": True},
            "norm": {"kind": "layernorm", "bias": True}, "position": {"kind": "learned"}}


def _gpt_neo(r: ConfigReader) -> dict:
    """GPT-Neo: GPT-2's block with bias-free q/k/v (out_proj biased) and, per attention_types, layers
    that attend to the last window_size tokens (GPTNeoSelfAttention's local mask keeps keys j with
    i - window < j <= i, the sliding-window convention) beside global ones."""
    spec = _core(r, tie_default=True)
    d, n_layers = spec["d_model"], spec["n_layers"]
    if not r.has("attention_types") and n_layers != 24:
        raise InputError(r.path, "attention_types", "required key is missing: transformers' default, "
                         f"[[['global', 'local'], 12]], is 24 layers and num_layers is {n_layers}")
    groups = r.get("attention_types", default=[[["global", "local"], 12]])  # GPTNeoConfig's default
    kinds: list[str] = []
    for i, group in enumerate(groups):
        pattern, repeat = group if len(group) == 2 else (None, None)
        if not (isinstance(pattern, list) and all(k in ("global", "local") for k in pattern) and isinstance(repeat, int)
                and not isinstance(repeat, bool) and 0 < repeat * len(pattern) <= n_layers):
            raise InputError(r.path, f"attention_types[{i}]", "must be [[kinds...], repeat]: kinds 'global' or "
                             f"'local', repeat a positive integer, {n_layers} layers (num_layers) at most")
        kinds += pattern * repeat
    if len(kinds) != n_layers:
        raise InputError(r.path, "attention_types", f"expands to {len(kinds)} layers; num_layers is {n_layers}")
    if r.get("attention_layers", default=kinds) != kinds:
        raise InputError(r.path, "attention_layers", "disagrees with attention_types, which it expands")
    att = {"n_heads": r.get("num_heads"), "bias": ["o"]}
    if "local" in kinds:
        att |= {"sliding_window": r.get("window_size", default=256), "layer_types": kinds}
    else:
        r.ignore("window_size", "no layer of attention_types is local")
    return {**spec, "max_context": r.get("max_position_embeddings"), "attention": att,
            "ffn": {"activation": _activation(r, False, "gelu_new"),
                    "d_ff": r.get("intermediate_size", default=None) or 4 * d, "bias": True},
            "norm": {"kind": "layernorm", "bias": True}, "position": {"kind": "learned"}}


def _gpt_neox(r: ConfigReader) -> dict:
    spec = _core(r, tie_default=False)
    fraction = float(r.get("rotary_pct", "partial_rotary_factor", default=0.25))
    pos, limit = _position(r, rotary_fraction=fraction)
    bias = ["q", "k", "v", "o"] if r.get("attention_bias", default=True) else []
    parallel = r.get("use_parallel_residual", default=True)
    return {**spec, "max_context": limit, "attention": {"n_heads": r.get("num_attention_heads"), "bias": bias},
            "ffn": {"activation": _activation(r, False, "gelu"), "d_ff": r.get("intermediate_size"), "bias": True},
            "norm": {"kind": "layernorm", "bias": True}, "position": pos,
            "residual": {"kind": "parallel", "parallel_norms": 2} if parallel else {}}


def _falcon(r: ConfigReader) -> dict:
    spec = _core(r, tie_default=True)
    d = spec["d_model"]
    n_heads = r.get("num_attention_heads", "n_head")
    # The 2023 remote-code configs say "RefinedWeb" for the 40B/180B layout.
    new_arch = r.get("new_decoder_architecture", default=r.cfg.get("model_type") == "RefinedWeb")
    if new_arch:  # grouped KV heads and two LayerNorms (ln_attn, ln_mlp)
        n_kv = r.get("num_kv_heads", "n_head_kv", default=n_heads)
        r.ignore("multi_query", "new_decoder_architecture uses num_kv_heads")
        n_norms = r.get("num_ln_in_parallel_attn", default=2)
    else:
        n_kv = 1 if r.get("multi_query", default=True) else n_heads
        n_norms = 1
        for key in ("num_kv_heads", "num_ln_in_parallel_attn"):
            r.ignore(key, "read by new_decoder_architecture only (multi_query sets the KV heads here)")
    parallel = r.get("parallel_attn", default=True)
    if not parallel and new_arch:
        raise InputError(r.path, "parallel_attn", "new_decoder_architecture with parallel_attn false is not supported")
    if r.get("alibi", default=False):
        pos, limit = {"kind": "alibi"}, r.get("max_position_embeddings", default=2048)
    else:
        pos, limit = _position(r)
    bias = r.get("bias", default=False)
    return {**spec, "max_context": limit,
            "attention": {"n_heads": n_heads, "n_kv_heads": n_kv, "bias": ["q", "k", "v", "o"] if bias else []},
            "ffn": {"activation": _activation(r, False, "gelu", ("activation", "hidden_act")),
                    "d_ff": r.get("ffn_hidden_size", default=4 * d),
                    "bias": bias},
            "norm": {"kind": "layernorm", "bias": True}, "position": pos,
            "residual": {"kind": "parallel", "parallel_norms": n_norms} if parallel else {}}


def _parallel_gptj(r: ConfigReader) -> dict:
    """GPT-J and CodeGen: one LayerNorm feeding attention and MLP in parallel, bias-free q/k/v/out
    (CodeGen fuses them into qkv_proj: the same weights), rotary on the first rotary_dim dims of each
    head, a biased MLP and a biased, untied lm_head."""
    spec = _core(r, tie_default=False)
    d, n_heads = spec["d_model"], r.get("n_head", "num_attention_heads")
    rotary_dim = r.get("rotary_dim", default=None)  # None: HF rotates every dim
    pos, limit = _position(r, rotary_fraction=rotary_dim / (d // n_heads) if rotary_dim else 1.0)
    r.ignore("n_ctx", "duplicate of n_positions, which sets the context")
    r.ignore("mp_num", "CodeGen's qkv_proj layout across its original TPU shards: same weights")
    r.ignore("rotary", "GPT-J's old switch; rotary_dim says what is rotated")
    return {**spec, "max_context": limit, "lm_head_bias": True, "attention": {"n_heads": n_heads},
            "ffn": {"activation": _activation(r, False, "gelu_new"), "d_ff": r.get("n_inner", default=None) or 4 * d,
                    "bias": True},
            "norm": {"kind": "layernorm", "bias": True}, "position": pos,
            "residual": {"kind": "parallel", "parallel_norms": 1}}


def _phi(r: ConfigReader) -> dict:
    """Phi-1/1.5/2: GPT-J's parallel block with biased q/k/v/dense projections and partial rotary."""
    spec = _core(r, tie_default=False)
    att = {**_heads(r), "bias": ["q", "k", "v", "o"]}
    if r.get("qk_layernorm", default=False):
        att["qk_norm"] = "head"  # one LayerNorm of head_dim (with its bias) on q, one on k
    pos, limit = _position(r, rotary_fraction=_rotary_fraction(r, 0.5))
    return {**spec, "max_context": limit, "lm_head_bias": True, "attention": att,
            "ffn": {"activation": _activation(r, False, "gelu_new"), "d_ff": r.get("intermediate_size"), "bias": True},
            "norm": {"kind": "layernorm", "bias": True}, "position": pos,
            "residual": {"kind": "parallel", "parallel_norms": 1}}


def _multi_head(r: ConfigReader, n_heads: int, model: str) -> int:
    """n_heads, for a family whose attention is multi-head whatever num_key_value_heads says (its
    modules never read the key): a different value there is not that model."""
    if r.get("num_key_value_heads", default=n_heads) != n_heads:
        raise InputError(r.path, r.prefix + "num_key_value_heads", f"must equal the head count ({n_heads}): "
                         f"transformers' {model} is multi-head attention")
    return n_heads


def _ctrl(r: ConfigReader) -> dict:
    """CTRL (Salesforce): pre-LayerNorms with biases and a final one, biased Wq/Wk/Wv/dense, a ReLU MLP
    of dff, a fixed sinusoidal table (a buffer), and a tied head that keeps its own bias."""
    spec = _core(r, tie_default=True)
    n_heads = _multi_head(r, r.get("n_head", "num_attention_heads"), "CTRL")
    return {**spec, "max_context": r.get("n_positions"), "lm_head_bias": True,
            "attention": {"n_heads": n_heads, "bias": ["q", "k", "v", "o"]},
            "ffn": {"activation": "relu", "d_ff": r.get("dff", "intermediate_size"), "bias": True},  # CTRLMLP reads dff
            "norm": {"kind": "layernorm", "bias": True}, "position": {"kind": "sinusoidal"}}


def _persimmon(r: ConfigReader) -> dict:
    """Persimmon (Adept; Fuyu's language model): multi-head attention through one biased
    query_key_value, LayerNorms of head_dim on q and k (qk_layernorm), RoPE on half of each head,
    a biased up, ReLU², down MLP, LayerNorms with biases, an untied head without one."""
    spec = _core(r, tie_default=False)
    n_heads = _multi_head(r, r.get("num_attention_heads"), "Persimmon")
    att = {"n_heads": n_heads, "bias": ["q", "k", "v", "o"]}
    if r.get("qk_layernorm", default=True):
        att["qk_norm"] = "head"  # nn.LayerNorm(head_dim) on q, one on k, weight and bias
    pos, limit = _position(r, rotary_fraction=_rotary_fraction(r, 0.5))  # PersimmonConfig's default 0.5
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, False, "relu2"), "d_ff": r.get("intermediate_size"), "bias": True},
            "norm": {"kind": "layernorm", "bias": True}}


def _fairseq_decoder(r: ConfigReader, position: dict) -> dict:
    """BioGPT and XGLM, fairseq's decoder: pre-LayerNorms with biases and a final one, biased q/k/v/out
    and fc1, fc2, tied; BioGPT learns its positions (2 spare rows), XGLM adds a sinusoidal table (no
    parameters).  scale_embedding multiplies the embedding by sqrt(D): no count changes."""
    spec = _core(r, tie_default=True)
    _no_cross_attention(r)
    r.ignore("scale_embedding", "multiplies the embedding by sqrt(d_model): no parameter, FLOP or cache byte")
    for key in ("layerdrop", "init_std", "hidden_dropout_prob", "attention_probs_dropout_prob"):
        r.ignore(key, "training-time dropout and initialisation")
    n_heads = _multi_head(r, r.get("num_attention_heads", "attention_heads"), "BioGPT / XGLM")
    return {**spec, "max_context": r.get("max_position_embeddings"),
            "attention": {"n_heads": n_heads, "bias": ["q", "k", "v", "o"]},
            "ffn": {"activation": _activation(r, False, "gelu"), "d_ff": r.get("intermediate_size", "ffn_dim"),
                    "bias": True},
            "norm": {"kind": "layernorm", "bias": True}, "position": position}


def _bloom(r: ConfigReader) -> dict:
    """BLOOM: ALiBi, a LayerNorm after the embedding, biases everywhere, a 4·D GELU MLP, tied."""
    spec = _core(r, tie_default=True)
    r.ignore("n_inner", "BloomMLP is 4·hidden_size whatever n_inner says")
    for key in ("offset_alibi", "skip_bias_add", "skip_bias_add_qkv", "bias_dropout_fusion", "masked_softmax_fusion",
                "slow_but_exact"):
        r.ignore(key, "Megatron-DeepSpeed kernel switches: the same math")
    # BLOOM's config states no context; it was trained on 2,048 tokens (ALiBi has no table to bound it).
    limit = r.get("seq_length", "max_position_embeddings", default=2048)
    return {**spec, "max_context": limit,
            "attention": {"n_heads": r.get("n_head", "num_attention_heads"), "bias": ["q", "k", "v", "o"]},
            "ffn": {"activation": "gelu", "d_ff": 4 * spec["d_model"], "bias": True},
            "norm": {"kind": "layernorm", "bias": True, "embedding": True}, "position": {"kind": "alibi"}}


def _opt(r: ConfigReader) -> dict:
    """OPT: learned positions with 2 spare rows, ReLU MLP, biases (enable_bias), pre- or post-norm
    (do_layer_norm_before), and in OPT-350m a narrower embedding with bias-free projections."""
    spec = _core(r, tie_default=True)
    width = r.get("word_embed_proj_dim", default=spec["d_model"])
    if width != spec["d_model"]:
        spec["embedding_dim"] = width
    bias = r.get("enable_bias", default=True)
    pre = r.get("do_layer_norm_before", default=True)
    affine = r.get("layer_norm_elementwise_affine", default=True)
    removed = r.get("_remove_final_layer_norm", default=False)
    final = pre and not removed  # OPTDecoder's rule
    r.ignore("layerdrop", "training-time layer dropout")
    r.ignore("init_std", "initialisation")
    r.ignore("prefix", "tokenizer detail")
    return {**spec, "max_context": r.get("max_position_embeddings"),
            "attention": {"n_heads": r.get("num_attention_heads"), "bias": ["q", "k", "v", "o"] if bias else []},
            "ffn": {"activation": _activation(r, False, "relu"), "d_ff": r.get("ffn_dim"), "bias": bias},
            "norm": {"kind": "layernorm", "bias": affine, "weight": affine, "placement": "pre" if pre else "post",
                     "final": final},
            "position": {"kind": "learned", "offset": 2}}  # OPTLearnedPositionalEmbedding: num_embeddings + 2


def _gpt_bigcode(r: ConfigReader) -> dict:
    """SantaCoder / StarCoder 1: GPT-2 with multi-query attention (one K/V head in the fused c_attn)."""
    spec = _core(r, tie_default=True)
    _no_cross_attention(r)
    n_heads = r.get("n_head", "num_attention_heads")
    n_kv = 1 if r.get("multi_query", default=True) else n_heads
    if r.get("num_key_value_heads", default=n_kv) != n_kv:  # GPTBigCodeConfig derives it from multi_query
        raise InputError(r.path, r.prefix + "num_key_value_heads", f"must be {n_kv}, as multi_query says")
    r.ignore("n_ctx", "duplicate of n_positions, which sets the context")
    for key in ("inference_runner", "max_batch_size", "max_sequence_length", "pad_key_length",
                "pre_allocate_kv_cache", "validate_runner_input", "runner_max_sequence_length"):
        r.ignore(key, "options of an old inference runner: no parameter")
    return {**spec, "max_context": r.get("n_positions", "max_position_embeddings"),
            "attention": {"n_heads": n_heads, "n_kv_heads": n_kv,
                          "bias": ["q", "k", "v", "o"]},
            "ffn": {"activation": _activation(r, False, "gelu_pytorch_tanh"),
                    "d_ff": r.get("n_inner", default=None) or 4 * spec["d_model"], "bias": True},
            "norm": {"kind": "layernorm", "bias": True}, "position": {"kind": "learned"}}


def _mpt(r: ConfigReader) -> dict:
    """MPT: ALiBi, no biases at all (bias-free LayerNorms too), fused Wqkv, a 4·D GELU MLP, tied."""
    spec = _core(r, tie_default=True)
    attn = r.get("attn_config", default={})
    if r.nested(attn, "attn_type", "attn_config", "multihead_attention") != "multihead_attention":
        raise InputError(r.path, "attn_config.attn_type", f"{attn['attn_type']!r} is not supported; "
                         "transformers' MPT is multihead_attention only")
    if r.nested(attn, "qk_ln", "attn_config", False):
        raise InputError(r.path, "attn_config.qk_ln", "q/k LayerNorms are not supported for MPT")
    if not r.nested(attn, "alibi", "attn_config", True):
        raise InputError(r.path, "attn_config.alibi", "transformers' MPT has no position encoding but ALiBi")
    if r.get("no_bias", default=True) is not True or r.get("expansion_ratio", default=4) != 4:
        raise InputError(r.path, "no_bias" if r.cfg.get("no_bias") is False else "expansion_ratio",
                         "transformers' MPT is bias-free with a 4·d_model MLP; other values are not supported")
    r.ignore("learned_pos_emb", "unused with ALiBi (transformers' MPT builds no position table)")
    for key in ("logit_scale", "embedding_fraction", "norm_type", "init_device", "init_config", "emb_pdrop",
                "verbose", "fc_type", "use_pad_tok_in_ffn", "ffn_config", "resid_pdrop"):
        r.ignore(key, "training or kernel options: no parameter, FLOP or byte changes")
    return {**spec, "max_context": r.get("max_seq_len"), "attention": {"n_heads": r.get("n_heads")},
            "ffn": {"activation": "gelu", "d_ff": 4 * spec["d_model"]},
            "norm": {"kind": "layernorm", "bias": False}, "position": {"kind": "alibi"}}


def _dbrx(r: ConfigReader) -> dict:
    """DBRX: GQA through one bias-free Wqkv, bias-free LayerNorms (norm_1, norm_2, norm_f), RoPE, and
    in every layer an MoE of moe_num_experts GLU experts (w1, v1, w2, each [E·F, D]) with a bias-free
    router, top moe_top_k; untied.  Attention and FFN settings sit in the nested attn_config and
    ffn_config (DbrxAttentionConfig, DbrxFFNConfig), read with their own reports."""
    spec = _core(r, tie_default=False)
    attn = ConfigReader(r.get("attn_config", default={}), r.path, r.report, prefix=r.prefix + "attn_config.")
    ffn = ConfigReader(r.get("ffn_config", default={}), r.path, r.report, prefix=r.prefix + "ffn_config.")
    att = {"n_heads": r.get("n_heads", "num_attention_heads"), "n_kv_heads": attn.get("kv_n_heads", default=1)}
    r.ignore("num_key_value_heads", "same as attn_config.kv_n_heads")
    attn.ignore("clip_qkv", "clamps Wqkv's output: an elementwise pass in place, not counted")
    params = r.get("rope_parameters", default=None) or {}  # transformers 5 writes the RoPE base here
    if r.nested(params, "rope_type", "rope_parameters", "default") != "default":
        raise InputError(r.path, r.prefix + "rope_parameters.rope_type", "only default RoPE is supported for DBRX")
    theta = float(attn.get("rope_theta", default=r.nested(params, "rope_theta", "rope_parameters", 10000.0)))
    act = ffn.get("ffn_act_fn", default={"name": "silu"})
    name = ffn.nested(act, "name", "ffn_act_fn", "silu")
    if ACTIVATIONS.get(name) not in GATED_FORM:
        raise InputError(r.path, r.prefix + "ffn_config.ffn_act_fn.name", f"{name!r} has no gated form; DBRX's experts "
                         f"are GLUs of one of: {', '.join(n for n, a in ACTIVATIONS.items() if a in GATED_FORM)}")
    d_expert = ffn.get("ffn_hidden_size", default=3584)  # DbrxFFNConfig's defaults
    moe = {"n_experts": ffn.get("moe_num_experts", default=4), "top_k": ffn.get("moe_top_k", default=1),
           "d_expert": d_expert}
    if ffn.get("hidden_size", default=spec["d_model"]) != spec["d_model"]:
        raise InputError(r.path, r.prefix + "ffn_config.hidden_size", f"must equal d_model ({spec['d_model']}): "
                         "DbrxConfig mirrors it")
    for key in ("moe_normalize_expert_weights", "moe_jitter_eps", "moe_loss_weight", "uniform_expert_assignment"):
        ffn.ignore(key, "routing weights, training noise and losses: the same experts run")
    for reader in (attn, ffn):
        reader.ignore("model_type", "the nested config's own (empty) type")
        reader.finish()
    return {**spec, "max_context": r.get("max_seq_len", "max_position_embeddings", default=2048),
            "attention": att, "position": {"kind": "rope", "theta": theta},
            "ffn": {"activation": GATED_FORM[ACTIVATIONS[name]], "d_ff": d_expert, "moe": moe},
            "norm": {"kind": "layernorm", "bias": False}}


def _llama4(r: ConfigReader) -> dict:
    """Llama 4 (text): chunked local attention with RoPE on 3 of 4 layers, the 4th global and NoPE;
    a weightless L2 qk-norm on the RoPE layers; MoE of top-1 routed experts plus one shared expert
    (both intermediate_size wide) on every layer (Scout) or every other one (Maverick), whose dense
    layers are intermediate_size_mlp wide."""
    spec = _core(r, tie_default=False)
    L = spec["n_layers"]
    att = _heads(r)
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    # One flag per layer, 1 = RoPE.  An absent or EMPTY list means the default (Llama4TextConfig
    # tests truthiness): every no_rope_layer_interval-th layer is NoPE.
    flags = r.get("no_rope_layers", default=None)
    interval = int(r.get("no_rope_layer_interval", default=4))
    if not flags:
        flags = [int((i + 1) % interval != 0) for i in range(L)]
    elif len(flags) != L:
        raise InputError(r.path, "no_rope_layers", f"lists {len(flags)} layers, num_hidden_layers is {L}")
    chunk = r.get("attention_chunk_size", default=None)
    types = r.get("layer_types", default=None)
    if types is None:  # the config class's rule: RoPE layers are chunked when there is a chunk size
        types = ["chunked_attention" if flag and chunk is not None else "full_attention" for flag in flags]
    kinds = {"chunked_attention": "chunked", "full_attention": "global"}
    if set(types) - set(kinds) or len(types) != L:
        raise InputError(r.path, "layer_types", f"{L} entries of chunked_attention or full_attention expected")
    att["layer_types"] = [kinds[t] for t in types]
    if "chunked" in att["layer_types"]:
        att["chunk_size"] = chunk
    att["nope_layers"] = [i for i, flag in enumerate(flags) if not flag]
    if r.get("use_qk_norm", default=True):
        att["qk_norm"] = "l2"  # Llama4TextL2Norm: no weight, on the RoPE layers only
    for key in ("attn_temperature_tuning", "floor_scale", "attn_scale"):
        r.ignore(key, "scales the NoPE layers' queries by position: no parameter, and not a matmul")
    r.ignore("for_llm_compressor", "a conversion switch")
    pos, limit = _position(r)
    moe = {"n_experts": r.get("num_local_experts"), "top_k": r.get("num_experts_per_tok"),
           "d_expert": r.get("intermediate_size"), "d_shared": r.get("intermediate_size")}
    step = int(r.get("interleave_moe_layer_step", default=1))
    layers = r.get("moe_layers", default=None)
    if layers is None:
        layers = list(range(step - 1, L, step))
    else:
        r.ignore("interleave_moe_layer_step", "moe_layers lists the MoE layers")
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size_mlp", default=16384),
                    "moe": _with_layers(moe, sorted(set(layers)), L)}}


def _lfm2_moe(r: ConfigReader) -> dict:
    """LFM2-MoE (LFM2-8B-A1B): LFM2's conv and attention layers; the first num_dense_layers keep a
    SwiGLU MLP of intermediate_size (Lfm2MoeMLP, no width adjustment), the others an MoE of
    num_experts SwiGLU experts with a bias-free router; use_expert_bias adds a routing buffer,
    expert_bias (nn.Buffer: not a parameter)."""
    spec = _lfm2(r, adjust_ff=False)
    for key, why in (("norm_topk_prob", "renormalises the top-k weights"),
                     ("routed_scaling_factor", "scales the routed output"),
                     ("use_expert_bias", "a routing buffer (expert_bias), not a parameter")):
        r.ignore(key, why)
    spec["ffn"]["moe"] = {"n_experts": r.get("num_experts"), "top_k": r.get("num_experts_per_tok"),
                          "d_expert": r.get("moe_intermediate_size"),
                          "first_dense_layers": r.get("num_dense_layers", default=2)}
    return spec


def _lfm2(r: ConfigReader, adjust_ff: bool = True) -> dict:
    """LFM2: gated short-conv layers (the linear kind) and GQA layers with per-head q/k norms, each
    followed by a SwiGLU MLP whose width Lfm2MLP derives from block_ff_dim."""
    spec = _core(r, tie_default=True)
    L, D = spec["n_layers"], spec["d_model"]
    if r.has("layer_types"):
        r.ignore("full_attn_idxs", "layer_types lists the layers")
        names = {"conv": "linear", "full_attention": "global"}
        types = r.get("layer_types")
        if set(types) - set(names) or len(types) != L:
            raise InputError(r.path, "layer_types", f"{L} entries of conv or full_attention expected")
        kinds = [names[t] for t in types]
    else:  # Lfm2Config: the layers in full_attn_idxs attend, the others are conv (absent: all attend)
        idxs = set(r.get("full_attn_idxs", default=list(range(L))))
        kinds = ["global" if i in idxs else "linear" for i in range(L)]
    _built_so(r, "LFM2", block_use_swiglu=True, use_pos_enc=True)
    for key in ("block_dim", "conv_dim", "conv_dim_out"):
        if r.get(key, default=D) != D:
            raise InputError(r.path, key, f"{r.cfg[key]} differs from hidden_size {D}; transformers' LFM2 uses hidden_size")
    for key in ("block_mlp_init_scale", "block_out_init_scale", "block_use_xavier_init", "conv_use_xavier_init",
                "block_norm_eps"):
        r.ignore(key, "initialisation or an epsilon")
    r.ignore("num_heads", "same as num_attention_heads")
    # Lfm2MLP: with block_auto_adjust_ff_dim, F = int(2/3 · block_ff_dim), times the multiplier,
    # rounded up to block_multiple_of (LFM2-1.2B: 12,288 -> 8,192).
    d_ff = int(r.get("intermediate_size", "block_ff_dim", default=12288))
    if adjust_ff and r.get("block_auto_adjust_ff_dim", default=True):
        d_ff = int(2 * d_ff / 3)
        multiplier = r.get("block_ffn_dim_multiplier", default=1.0)
        if multiplier is not None:
            step = int(r.get("block_multiple_of", default=256))
            d_ff = step * -(-int(multiplier * d_ff) // step)
    else:
        r.ignore("block_ffn_dim_multiplier", "the MLP is intermediate_size wide")
        r.ignore("block_multiple_of", "the MLP is intermediate_size wide")
    pos, limit = _position(r)
    att = {**_heads(r), "qk_norm": "head"}  # q_layernorm, k_layernorm: RMSNorms of head_dim
    if "linear" in kinds:
        att["layer_types"] = kinds
        spec["linear"] = {"kind": "short_conv", "conv_kernel": r.get("conv_L_cache", default=3),
                          "bias": bool(r.get("conv_bias", default=False))}
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": "swiglu", "d_ff": d_ff}}


def _minimax(r: ConfigReader) -> dict:
    """MiniMax-01 (MiniMax-Text-01, MiniMax-M1): lightning-attention layers (the linear kind) and GQA
    layers, an MoE FFN (num_local_experts experts, no shared one) in every layer.  transformers' format
    (model_type minimax: layer_types, *_alpha_factor) or the released remote-code one (minimax_text_01,
    minimax_m1: attn_type_list with 0 = lightning and 1 = full attention, layernorm_*_alpha,
    rotary_dim), read as transformers migrates the latter."""
    spec = _core(r, tie_default=False)
    L = spec["n_layers"]
    att = _heads(r)
    if r.has("attn_type_list"):
        codes = r.get("attn_type_list")
        if len(codes) != L or set(codes) - {0, 1}:
            raise InputError(r.path, "attn_type_list", f"{L} entries of 0 (lightning) or 1 (full attention) expected")
        kinds = ["global" if c == 1 else "linear" for c in codes]
        r.ignore("layer_types", "attn_type_list lists the layers")
    elif r.has("layer_types"):
        names = {"full_attention": "global", "linear_attention": "linear"}
        types = r.get("layer_types")
        if len(types) != L or set(types) - set(names):
            raise InputError(r.path, "layer_types", f"{L} entries of full_attention or linear_attention expected")
        kinds = [names[t] for t in types]
    else:  # MiniMaxConfig's default: full attention on even layers, lightning on odd ones
        kinds = ["global" if i % 2 == 0 else "linear" for i in range(L)]
    if r.cfg.get("sliding_window") is not None:
        raise InputError(r.path, "sliding_window", "MiniMax with a sliding window is not supported")
    r.ignore("sliding_window", "null")
    if r.get("hidden_act", default="silu") != "silu":  # the experts' gate and the lightning q/k/v
        raise InputError(r.path, "hidden_act", "only silu is supported (the experts and lightning attention use it)")
    _built_so(r, "MiniMax", postnorm=True)  # the residual taken after each norm: the same ops
    shared = r.cfg.get("shared_intermediate_size")  # the remote code's shared expert; 0 (or [0]) builds none
    if not (shared is None or (type(shared) is int and shared == 0) or shared == [0]):
        raise InputError(r.path, "shared_intermediate_size", f"{shared!r}: transformers' MiniMax builds no shared "
                                                             "expert; 0 expected")
    r.ignore("shared_intermediate_size", "0: no shared expert")
    r.ignore("shared_moe_mode", "no shared expert")
    for old, new in (("layernorm_full_attention", "full_attn"), ("layernorm_linear_attention", "linear_attn"),
                     ("layernorm_mlp", "mlp")):
        for part in ("alpha", "beta"):
            r.ignore(f"{old}_{part}", "scales the residual stream: no parameter, FLOP or cache byte")
            r.ignore(f"{new}_{part}_factor", "scales the residual stream: no parameter, FLOP or cache byte")
    head_dim = att.get("head_dim") or spec["d_model"] // att["n_heads"]
    if "linear" in kinds:  # MiniMaxLightningAttention: the attention's heads and head_dim
        att["layer_types"] = kinds
        spec["linear"] = {"kind": "lightning", "n_heads": att["n_heads"], "head_dim": head_dim,
                          "block": r.get("block_size", default=256)}
    else:
        r.ignore("block_size", "no lightning-attention layer")
    # RoPE on rotary_dim of each head (the remote code; transformers: partial_rotary_factor)
    rotary = r.get("rotary_dim") / head_dim if r.has("rotary_dim") else _rotary_fraction(r, 1.0)
    pos, limit = _position(r, rotary_fraction=rotary)
    nested = r.cfg.get("rope_parameters")
    if not r.has("rope_theta") and isinstance(nested, dict) and nested.get("rope_theta") is not None:
        pos["theta"] = float(r.nested(nested, "rope_theta", "rope_parameters"))  # transformers 5's place for it
    d = r.get("intermediate_size")
    moe = {"n_experts": r.get("num_local_experts", "num_experts"), "top_k": r.get("num_experts_per_tok"),
           "d_expert": d}
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": "swiglu", "d_ff": d, "moe": moe}}


def _jamba(r: ConfigReader) -> dict:
    """Jamba: Mamba layers (the linear kind) with an attention layer every attn_layer_period from
    attn_layer_offset, and an MoE FFN every expert_layer_period from expert_layer_offset; no
    position encoding anywhere (its attention has no RoPE)."""
    spec = _core(r, tie_default=False)
    L = spec["n_layers"]
    period, offset = r.get("attn_layer_period", default=8), r.get("attn_layer_offset", default=4)
    kinds = ["global" if i % period == offset else "linear" for i in range(L)]
    att = _heads(r)
    if "linear" in kinds:
        att["layer_types"] = kinds
        spec["linear"] = {"kind": "mamba", "d_state": r.get("mamba_d_state", default=16),
                          "d_conv": r.get("mamba_d_conv", default=4), "expand": r.get("mamba_expand", default=2),
                          "dt_rank": _dt_rank(r, spec["d_model"]), "conv_bias": r.get("mamba_conv_bias", default=True),
                          "proj_bias": r.get("mamba_proj_bias", default=False), "bc_norms": True}
    for key in ("use_mamba_kernels", "num_logits_to_keep"):
        r.ignore(key, "a kernel or generation switch: the same math")
    if r.cfg.get("sliding_window") is not None:
        raise InputError(r.path, "sliding_window", "Jamba with a sliding window is not supported")
    r.ignore("sliding_window", "null")
    e_period, e_offset = r.get("expert_layer_period", default=2), r.get("expert_layer_offset", default=1)
    ffn: dict = {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size")}
    n_experts = r.get("num_experts", default=16)
    if n_experts > 1:
        moe = {"n_experts": n_experts, "top_k": r.get("num_experts_per_tok", default=2),
               "d_expert": r.get("intermediate_size")}
        ffn["moe"] = _with_layers(moe, [i for i in range(L) if i % e_period == e_offset], L)
    return {**spec, "max_context": r.get("max_position_embeddings", default=262144), "attention": att,
            "position": {"kind": "none"}, "ffn": ffn}


def _nemotron_h(r: ConfigReader) -> dict:
    """Nemotron-H: a stack of single-sublayer blocks (hybrid_override_pattern / layers_block_type:
    M Mamba-2, * attention, E MoE, - MLP), each x + mixer(RMSNorm(x)).  archcalc pairs them into
    layers of a mixer and the FFN block right after it; a mixer followed by another mixer is a layer
    without an FFN, an FFN block after an FFN block a layer without a mixer.  No position encoding;
    relu2 MLPs and experts (up, down), the MoE with a shared expert and a sigmoid router whose
    e_score_correction_bias is a buffer (not counted)."""
    # transformers 5 writes layers_block_type and no num_hidden_layers: the blocks are the depth
    spec = _core(r, tie_default=False, layers=False)
    if r.has("layers_block_type"):
        r.ignore("hybrid_override_pattern", "layers_block_type lists the blocks")
        blocks = r.get("layers_block_type")
    else:
        chars = {"M": "linear_attention", "*": "full_attention", "E": "moe", "-": "mlp"}
        pattern = r.get("hybrid_override_pattern")
        if set(pattern) - set(chars):
            raise InputError(r.path, "hybrid_override_pattern", f"{pattern!r}: blocks are M, *, E or -")
        blocks = [chars[ch] for ch in pattern]
    r.ignore("num_hidden_layers", "the blocks listed are the layers transformers builds")
    r.ignore("mtp_layers_block_type", "the MTP module's blocks (num_nextn_predict_layers): in no total")
    mixers, ffns = {"linear_attention": "linear", "full_attention": "global"}, {"moe": "moe", "mlp": "dense"}
    if set(blocks) - set(mixers) - set(ffns):
        raise InputError(r.path, "layers_block_type", "blocks are linear_attention, full_attention, moe or mlp")
    layers: list[list] = []  # [mixer kind or "none", FFN kind or "none"]
    for block in blocks:
        if block in mixers:
            layers.append([mixers[block], "none"])
        elif layers and layers[-1][1] == "none" and layers[-1][0] != "none":
            layers[-1][1] = ffns[block]
        else:
            layers.append(["none", ffns[block]])
    L = len(layers)
    spec["n_layers"] = L
    att = _heads(r)
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    att["layer_types"] = [mixer for mixer, _ in layers]
    spec["linear"] = {"kind": "mamba2", "n_heads": r.get("mamba_num_heads"), "head_dim": r.get("mamba_head_dim"),
                      "d_state": r.get("ssm_state_size"), "n_groups": r.get("n_groups", default=1),
                      "conv_kernel": r.get("conv_kernel", default=4), "chunk": r.get("chunk_size", default=256),
                      "conv_bias": bool(r.get("use_conv_bias", default=True)),
                      "proj_bias": bool(r.get("use_bias", default=False))}
    if r.get("mamba_hidden_act", default="silu") != "silu":
        raise InputError(r.path, "mamba_hidden_act", "only silu (the conv's activation) is supported")
    if r.get("moe_latent_size", default=None) is not None:
        raise InputError(r.path, "moe_latent_size", "Nemotron-H's latent MoE projections are not supported")
    spec["linear"]["state_dtype"] = _state_dtype(r, "mamba_ssm_cache_dtype")  # vLLM's default for Nemotron-H: fp16
    for key in ("time_step_min", "time_step_max", "time_step_floor", "time_step_limit",
                "rescale_prenorm_residual", "residual_in_fp32", "use_mamba_kernels", "num_logits_to_keep",
                "mtp_layers_block_type", "mtp_hybrid_override_pattern", "num_nextn_predict_layers"):
        r.ignore(key, "a kernel, initialisation, cache-dtype or multi-token-prediction setting: no parameter of the "
                 "model transformers builds")
    r.ignore("expand", "transformers' Mamba-2 mixer is mamba_num_heads × mamba_head_dim wide, whatever expand says")
    r.ignore("mamba_proj_bias", "transformers' NemotronH biases in_proj and out_proj by use_bias")
    if r.get("mlp_bias", default=False):
        raise InputError(r.path, "mlp_bias", "Nemotron-H with MLP biases (its experts have none) is not supported")
    r.ignore("partial_rotary_factor", "Nemotron-H's attention has no position encoding")
    r.ignore("rope_theta", "Nemotron-H's attention has no position encoding")
    r.ignore("sliding_window", "null")
    ffn: dict = {"activation": _activation(r, False, "relu2", keys=("mlp_hidden_act",)),
                 "d_ff": r.get("intermediate_size")}
    none = [i for i, (_, f) in enumerate(layers) if f == "none"]
    if none:
        ffn["none_layers"] = none
    moe_layers = [i for i, (_, f) in enumerate(layers) if f == "moe"]
    if moe_layers:
        d_expert = r.get("moe_intermediate_size")
        moe = {"n_experts": r.get("n_routed_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
               "d_expert": d_expert, "d_shared": r.get("moe_shared_expert_intermediate_size", default=0)
               * r.get("n_shared_experts", default=1)}
        ffn["moe"] = {**moe, "layers": moe_layers}
    else:
        for key in ("moe_intermediate_size", "n_routed_experts", "num_local_experts", "num_experts_per_tok",
                    "moe_shared_expert_intermediate_size", "n_shared_experts", "moe_shared_expert_overlap"):
            r.ignore(key, "no MoE block (E) in the pattern")
    return {**spec, "max_context": r.get("max_position_embeddings"), "attention": att,
            "position": {"kind": "none"}, "ffn": ffn}


def _mamba2_mixer(r: ConfigReader, d_model: int) -> dict:
    """The mamba_* keys of Bamba and Granite 4.0-H: a Mamba-2 mixer (mamba_d_head "auto": expand · D / heads)."""
    heads = r.get("mamba_n_heads", default=128)
    head_dim = r.cfg.get("mamba_d_head", "auto")
    if head_dim == "auto":
        r.report.used[r.prefix + "mamba_d_head"] = "auto"
        head_dim = r.get("mamba_expand", default=2) * d_model // heads
    else:
        head_dim = r.get("mamba_d_head")
        r.ignore("mamba_expand", "mamba_d_head is given")
    for key in ("time_step_limit", "z_loss_coefficient", "num_logits_to_keep"):
        r.ignore(key, "a scan clamp, a training loss or a generation switch: no parameter, FLOP or state byte")
    return {"kind": "mamba2", "n_heads": heads, "head_dim": head_dim, "d_state": r.get("mamba_d_state", default=256),
            "n_groups": r.get("mamba_n_groups", default=1), "conv_kernel": r.get("mamba_d_conv", default=4),
            "chunk": r.get("mamba_chunk_size", default=256), "conv_bias": bool(r.get("mamba_conv_bias", default=True)),
            "proj_bias": bool(r.get("mamba_proj_bias", default=False))}


TORCH_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def _state_dtype(r: ConfigReader, key: str) -> str | None:
    """A recurrent-state dtype key ("float32") as a spec dtype; None when absent."""
    value = r.get(key, default=None)
    if value is not None and value not in TORCH_DTYPES:
        raise InputError(r.path, r.prefix + key, f"{value!r}; valid: {', '.join(TORCH_DTYPES)}")
    return TORCH_DTYPES.get(value)


HYBRID_BLOCKS = {"mamba": "linear", "linear_attention": "linear", "attention": "global", "full_attention": "global"}


def _hybrid_kinds(r: ConfigReader, n_layers: int, default: str) -> list[str]:
    """Each layer's mixer from layer_types / layers_block_type, else attn_layer_indices (the rest Mamba)."""
    types = r.get("layer_types", "layers_block_type", default=None)
    if types is None:
        idxs = set(r.get("attn_layer_indices", default=[]) or [])
        return ["global" if i in idxs else default for i in range(n_layers)]
    r.ignore("attn_layer_indices", "layer_types lists the layers")
    if set(types) - set(HYBRID_BLOCKS) or len(types) != n_layers:
        raise InputError(r.path, "layer_types", f"{n_layers} entries of {', '.join(HYBRID_BLOCKS)} expected")
    return [HYBRID_BLOCKS[t] for t in types]


def _bamba(r: ConfigReader) -> dict:
    """Bamba: Mamba-2 layers and attention layers (RoPE on half of each head, hard-coded in
    BambaConfig), each followed by a SwiGLU MLP."""
    spec = _core(r, tie_default=False)
    kinds = _hybrid_kinds(r, spec["n_layers"], "linear")
    att = {**_heads(r), "layer_types": kinds}
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    r.ignore("partial_rotary_factor", "BambaConfig hard-codes 0.5")
    # Bamba-9B's file still names the rotary width of its original code; BambaConfig ignores it, so it
    # must be the half of each head that transformers rotates.
    rotated = r.get("attn_rotary_emb", default=None)
    if rotated is not None and rotated * 2 != spec["d_model"] // att["n_heads"]:
        raise InputError(r.path, "attn_rotary_emb", "must be half of head_dim: BambaConfig hard-codes "
                         "partial_rotary_factor 0.5")
    r.ignore("mamba_dt_rank", "Mamba-1's dt projection rank; a Mamba-2 mixer has one dt per head")
    r.ignore("use_mamba_kernels", "a kernel choice: the same weights")
    pos, limit = _position(r, rotary_fraction=0.5)
    out = {**spec, "max_context": limit, "attention": att, "position": pos,
           "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size"),
                   "bias": bool(r.get("mlp_bias", default=False))}}
    if "linear" in kinds:
        out["linear"] = _mamba2_mixer(r, spec["d_model"])
    return out


# Falcon-H1's µP multipliers: scalars on activations, scores and logits (the mup_vector they build is a buffer).
FALCON_H1_MULTIPLIERS = ("lm_head_multiplier", "embedding_multiplier", "mlp_multipliers", "key_multiplier",
                         "attention_out_multiplier", "attention_in_multiplier", "ssm_multipliers",
                         "ssm_in_multiplier", "ssm_out_multiplier")


def _falcon_h1(r: ConfigReader) -> dict:
    """Falcon-H1: every layer runs attention and a Mamba-2 mixer side by side on the same normed
    input (FalconH1DecoderLayer), then a SwiGLU MLP.  The mixer is mamba_d_ssm wide (else
    mamba_expand · D), its in_proj biased by mamba_proj_bias and its out_proj by projectors_bias,
    and its gated RMSNorm present only with mamba_rms_norm (else y ⊙ silu(z))."""
    spec = _core(r, tie_default=False)
    att = _heads(r)
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    pos, limit = _position(r)
    for key in FALCON_H1_MULTIPLIERS:
        r.ignore(key, "scales activations, scores or logits: no parameter, FLOP or byte changes")
    linear = _mamba2_mixer(r, spec["d_model"])
    heads, head_dim = linear["n_heads"], linear["head_dim"]
    width = r.get("mamba_d_ssm", default=None) or r.get("mamba_expand", default=2) * spec["d_model"]
    if width != heads * head_dim:
        raise InputError(r.path, "mamba_d_ssm", f"{width} is not mamba_n_heads × mamba_d_head = {heads * head_dim}, "
                         "the width FalconH1Mixer's heads read")
    # Keys of TII's original code in the released files; FalconH1Config does not read them.
    _built_so(r, "FalconH1", mamba_use_mlp=True)  # FalconH1DecoderLayer always has its MLP
    if r.get("attn_layer_indices", default=None) is not None:
        raise InputError(r.path, "attn_layer_indices", "must be null: every Falcon-H1 layer has attention")
    r.ignore("mlp_expansion_factor", "intermediate_size gives the MLP width transformers builds")
    norm = bool(r.get("mamba_rms_norm", default=False))
    r.ignore("mamba_norm_before_gate", "the norm's order around the gate changes no count" if norm
             else "no mixer norm (mamba_rms_norm false)")
    linear.update(out_bias=bool(r.get("projectors_bias", default=False)), norm=norm, parallel=True)
    return {**spec, "max_context": limit, "attention": att, "position": pos, "linear": linear,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size"),
                    "bias": bool(r.get("mlp_bias", default=False))}}


def _granitemoehybrid(r: ConfigReader) -> dict:
    """Granite 4.0-H: Mamba-2 and attention layers, each followed by a shared SwiGLU MLP
    (shared_intermediate_size) beside, when num_local_experts > 0, an MoE of intermediate_size
    experts; Granite's multipliers; RoPE only with position_embedding_type "rope"."""
    spec = _core(r, tie_default=False)
    kinds = _hybrid_kinds(r, spec["n_layers"], "linear")
    att = {**_heads(r), "layer_types": kinds}
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    _ignore_multipliers(r)
    if r.get("position_embedding_type", default=None) == "rope":
        pos, limit = _position(r)
    else:
        for key in ("rope_theta", "rope_parameters"):
            r.ignore(key, "no position encoding (position_embedding_type is not rope)")
        pos, limit = {"kind": "none"}, r.get("max_position_embeddings", default=2048)
    shared = r.get("shared_intermediate_size", default=1024)
    experts = r.get("num_local_experts", default=8)
    ffn: dict = {"activation": _activation(r, True, "silu")}
    if experts:
        ffn["moe"] = {"n_experts": experts, "top_k": r.get("num_experts_per_tok", default=2),
                      "d_expert": r.get("intermediate_size"), "d_shared": shared}
    else:
        ffn["d_ff"] = shared
        r.ignore("intermediate_size", "no experts: the shared MLP is the FFN")
        r.ignore("num_experts_per_tok", "no experts to route to")  # Granite 4.0-H-1B: 0
    out = {**spec, "max_context": limit, "attention": att, "position": pos, "ffn": ffn}
    if "linear" in kinds:
        out["linear"] = _mamba2_mixer(r, spec["d_model"])
    return out


def _pure_ssm(r: ConfigReader, mixer: dict) -> dict:
    """A stack of Mamba blocks, each x + mixer(RMSNorm(x)) with no attention and no FFN: every layer
    linear, none with an FFN.  attention.n_heads is a placeholder the schema needs; no layer uses it."""
    spec = _core(r, tie_default=r.cfg.get("model_type") in ("mamba", "falcon_mamba"))
    L = spec["n_layers"]
    for key in ("residual_in_fp32", "rescale_prenorm_residual", "time_step_min", "time_step_max", "time_step_floor",
                "time_step_limit", "time_step_init_scheme", "time_step_scale", "use_mambapy", "use_cache",
                "layer_norm_epsilon", "num_logits_to_keep"):
        r.ignore(key, "initialisation, precision or kernel choice: no parameter, FLOP or state byte")
    if r.get("hidden_act", default="silu") != "silu":
        raise InputError(r.path, "hidden_act", "only silu (the conv's activation) is supported")
    # transformers always builds RMSNorms: these legacy mamba_ssm keys change nothing it builds.
    _built_so(r, "Mamba", rms_norm=True)  # RMSNorms always
    for key in ("fused_add_norm", "norm_before_gate", "ssm_cfg"):
        r.ignore(key, "a mamba_ssm kernel or layout option: the same weights")
    r.ignore("pad_vocab_size_multiple", "vocab_size is already the padded size")
    return {**spec, "max_context": r.get("max_position_embeddings", default=MAX_CONTEXT),
            "attention": {"n_heads": 1, "layer_types": ["linear"] * L}, "linear": mixer,
            "ffn": {"none_layers": list(range(L))}, "position": {"kind": "none"}}


def _mamba_lm(r: ConfigReader) -> dict:
    """Mamba-1 (state-spaces/mamba-*-hf) and Falcon-Mamba: MambaMixer blocks of E inner channels:
    intermediate_size when the config gives it (transformers' config keeps it over expand: Falcon-
    Mamba-7B says expand 16 and builds 8,192 = 2 · 4,096), else expand · D.  Falcon-Mamba adds
    weightless RMSNorms on Δ, B and C."""
    d = r.get("hidden_size", "d_model")
    inner = r.get("intermediate_size", "d_inner", default=None)
    if inner is None:
        inner = r.get("expand", default=2) * d
    else:
        r.ignore("expand", "intermediate_size gives the mixer's width")
    if inner % d:
        raise InputError(r.path, "intermediate_size", f"{inner} is not a multiple of hidden_size {d}")
    falcon = r.cfg.get("model_type") == "falcon_mamba"
    for key in ("use_falcon_mambapy", "use_associative_scan", "mixer_rms_eps"):
        r.ignore(key, "a scan implementation or an epsilon: the same math")
    return _pure_ssm(r, {"kind": "mamba", "d_state": r.get("state_size", default=16),
                         "d_conv": r.get("conv_kernel", default=4), "expand": inner // d,
                         "dt_rank": _dt_rank(r, d, key="time_step_rank"),
                         "conv_bias": bool(r.get("use_conv_bias", default=True)),
                         "proj_bias": bool(r.get("use_bias", default=False)),
                         "bc_norms": falcon, "bc_norm_weight": not falcon})


def _mamba2_lm(r: ConfigReader) -> dict:
    """Mamba-2 (Mamba-Codestral, mamba2-*-hf): Mamba2Mixer blocks."""
    heads, head_dim, d = r.get("num_heads", default=128), r.get("head_dim", default=64), r.get("hidden_size")
    if r.get("expand", default=2) * d != heads * head_dim:
        raise InputError(r.path, "expand", f"expand × hidden_size must be num_heads × head_dim ({heads * head_dim})")
    if r.cfg.get("intermediate_size") is not None and r.get("intermediate_size") != heads * head_dim:
        raise InputError(r.path, "intermediate_size", f"{r.cfg['intermediate_size']} differs from num_heads × "
                         f"head_dim = {heads * head_dim}, which transformers builds")
    r.ignore("time_step_rank", "Mamba-2 has one Δ per head, no time-step projection")
    return _pure_ssm(r, {"kind": "mamba2", "n_heads": heads, "head_dim": head_dim,
                         "d_state": r.get("state_size", default=128), "n_groups": r.get("n_groups", default=8),
                         "conv_kernel": r.get("conv_kernel", default=4), "chunk": r.get("chunk_size", default=256),
                         "conv_bias": bool(r.get("use_conv_bias", default=True)),
                         "proj_bias": bool(r.get("use_bias", default=False))})


def _dt_rank(r: ConfigReader, d_model: int, key: str = "mamba_dt_rank") -> int:
    """The time-step rank, or Mamba's "auto": ceil(d_model / 16)."""
    rank = r.cfg.get(key, "auto")
    if rank == "auto":
        r.report.used[r.prefix + key] = "auto"
        return -(-d_model // 16)
    return r.get(key)


def _starcoder2(r: ConfigReader) -> dict:
    spec = _core(r, tie_default=True)
    pos, limit = _position(r)
    att = _heads(r)
    bias = r.get("use_bias", default=True)
    if bias:
        att["bias"] = ["q", "k", "v", "o"]
    att.update(_window(r, spec["n_layers"]))
    r.ignore("activation_function", "legacy key; hidden_act is the one Starcoder2 uses")
    if r.get("mlp_type", default="default") != "default":
        raise InputError(r.path, "mlp_type", f"{r.cfg['mlp_type']!r} is not supported; only 'default' (c_fc, c_proj)")
    r.ignore("mlp_type", "'default': the plain two-matrix MLP")
    norm_type = r.get("norm_type", default="layer_norm")
    return {**spec, "max_context": limit, "attention": att,
            "ffn": {"activation": _activation(r, False, "gelu_pytorch_tanh", keys=("hidden_act",)),
                    "d_ff": r.get("intermediate_size"), "bias": bias},
            "norm": {"kind": "layernorm", "bias": True} if norm_type == "layer_norm" else {}, "position": pos}


def _nemotron(r: ConfigReader) -> dict:
    spec = _core(r, tie_default=False)
    pos, limit = _position(r, rotary_fraction=_rotary_fraction(r, 0.5))
    att = _heads(r)
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    return {**spec, "max_context": limit, "attention": att,
            "ffn": {"activation": _activation(r, False, "relu2"), "d_ff": r.get("intermediate_size"),
                    "bias": bool(r.get("mlp_bias", default=False))},
            "norm": {"kind": "layernorm", "bias": True},  # LayerNorm1P: weight and bias
            "position": pos}


def _deepseek(r: ConfigReader) -> dict:
    spec = _core(r, tie_default=False)
    n_layers = spec["n_layers"]
    pos, limit = _position(r)
    r.ignore("num_key_value_heads", "MLA caches one latent per token; the KV head count is meaningless")
    for key in ("attention_bias", "mlp_bias"):
        if r.get(key, default=False):
            raise InputError(r.path, key, "biases on MLA projections and MLPs are not supported")
    # every MLA layer attends to the full context (DeepSeek-V3.2's through its indexer: indexed_attention)
    kind = "indexed_attention" if r.cfg.get("model_type") == "deepseek_v32" else "full_attention"
    if set(r.get("layer_types", default=None) or [kind]) != {kind}:
        raise InputError(r.path, "layer_types", f"every layer of this MLA model is {kind}")
    att = {"kind": "mla", "n_heads": r.get("num_attention_heads"), "q_lora_rank": r.get("q_lora_rank", default=None),
           "kv_lora_rank": r.get("kv_lora_rank"), "qk_nope_head_dim": r.get("qk_nope_head_dim"),
           "qk_rope_head_dim": r.get("qk_rope_head_dim"), "v_head_dim": r.get("v_head_dim")}
    # What transformers 5 writes beside MLA's widths: head_dim (the rotary width), their sum, the pair order
    _derived_qk_head_dim(r, att["qk_nope_head_dim"] + att["qk_rope_head_dim"])
    r.ignore("head_dim", "MLA: qk_rope_head_dim and qk_nope_head_dim say the widths")
    r.ignore("rope_interleave", "the order of the rotated pairs: the same math")
    if r.cfg.get("model_type") == "deepseek_v32":  # DeepSeek Sparse Attention: the lightning indexer
        att["indexer"] = {"n_heads": r.get("index_n_heads"), "head_dim": r.get("index_head_dim"),
                          "topk": r.get("index_topk")}
    layers = _glm4_moe_lite(r, n_layers) if r.cfg.get("model_type") == "glm4_moe_lite" else None
    return {**spec, "max_context": limit, "attention": att, "position": pos, "mtp": _mtp(r),
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size"),
                    "moe": _deepseek_moe(r, n_layers, layers)}}


def _minicpm3(r: ConfigReader) -> dict:
    """MiniCPM3: DeepSeek-V2's MLA (q_a/q_b, kv_a_proj_with_mqa, kv_b) with a dense gated MLP in every
    layer, tied by default, v_head_dim hidden_size / heads unless given; its µP scalings (scale_emb,
    scale_depth, dim_model_base) multiply activations and change no count."""
    spec = _core(r, tie_default=True)
    pos, limit = _position(r)
    n_heads = r.get("num_attention_heads")
    for key in ("num_key_value_heads", "head_dim"):  # MiniCPM3Config writes head_dim = the rotary width
        r.ignore(key, "MLA: the latent, the rope and nope widths say what is cached and computed")
    for key in ("scale_emb", "scale_depth", "dim_model_base"):
        r.ignore(key, "µP multipliers: no parameter, FLOP or cache byte changes")
    if r.get("attention_bias", default=False):
        raise InputError(r.path, r.prefix + "attention_bias", "biases on MLA projections are not supported")
    # q_lora_rank: null is no q LoRA (one q_proj); absent is MiniCPM3Config's 768
    q_rank = r.get("q_lora_rank", default=None if "q_lora_rank" in r.cfg else 768)
    att = {"kind": "mla", "n_heads": n_heads, "q_lora_rank": q_rank,
           "kv_lora_rank": r.get("kv_lora_rank", default=256), "qk_nope_head_dim": r.get("qk_nope_head_dim", default=64),
           "qk_rope_head_dim": r.get("qk_rope_head_dim", default=32),
           "v_head_dim": r.get("v_head_dim", default=spec["d_model"] // n_heads)}
    _derived_qk_head_dim(r, att["qk_nope_head_dim"] + att["qk_rope_head_dim"])
    ffn = {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size")}
    if r.get("mlp_bias", default=False):
        ffn["bias"] = True
    return {**spec, "max_context": limit, "attention": att, "position": pos, "ffn": ffn}


def _glm4_moe_lite(r: ConfigReader, n_layers: int) -> list[int]:
    """GLM-4.7-Flash (glm4_moe_lite): DeepSeek-V3's MLA on GLM-4.5's MoE.  Its config class takes the MoE
    layers from mlp_layer_types alone (absent: layer 0 dense, the rest sparse) and has no
    first_k_dense_replace, so a first_k_dense_replace that says otherwise is not what transformers
    builds.  Returns the MoE layers."""
    types = r.get("mlp_layer_types", default=None)
    if types is None:
        types = ["dense"] + ["sparse"] * (n_layers - 1)
    if len(types) != n_layers or set(types) - {"dense", "sparse"}:
        raise InputError(r.path, r.prefix + "mlp_layer_types", f"{n_layers} entries of dense or sparse expected")
    layers = [i for i, t in enumerate(types) if t == "sparse"]
    first, freq = r.cfg.get("first_k_dense_replace"), r.cfg.get("moe_layer_freq")
    if first is not None or freq is not None:
        first, freq = r.get("first_k_dense_replace", default=0), r.get("moe_layer_freq", default=1)
        if layers != [i for i in range(n_layers) if i >= first and i % freq == 0]:
            raise InputError(r.path, r.prefix + "first_k_dense_replace", "disagrees with mlp_layer_types (absent: "
                             "layer 0 dense), from which transformers' GLM-4.7-Flash takes its dense layers")
    if _rotary_fraction(r, 1.0) != 1.0:
        raise InputError(r.path, r.prefix + "partial_rotary_factor", "only 1.0 is supported with MLA (the rotary "
                                                                     "part is qk_rope_head_dim)")
    r.ignore("rope_interleave", "the order of the rotated pairs: the same math")
    _derived_qk_head_dim(r, r.cfg.get("qk_nope_head_dim", 0) + r.cfg.get("qk_rope_head_dim", 0))
    return layers


def _derived_qk_head_dim(r: ConfigReader, width: int) -> None:
    """qk_head_dim, which transformers writes for MLA configs: it must be qk_nope_head_dim + qk_rope_head_dim."""
    head = r.cfg.get("qk_head_dim")
    if head is not None and head != width:
        raise InputError(r.path, r.prefix + "qk_head_dim", f"{head!r} is not qk_nope_head_dim + qk_rope_head_dim")
    r.ignore("qk_head_dim", "derived: qk_nope_head_dim + qk_rope_head_dim")


def _mtp(r: ConfigReader) -> dict | None:
    """num_nextn_predict_layers (DeepSeek-V3, GLM-4.5): MTP modules with their own embedding and
    head copies, in the checkpoint only (spec.mtp: reported apart, in no total)."""
    n = r.get("num_nextn_predict_layers", "num_mtp_layers", default=0)  # the configs' attribute_map alias
    return {"layers": n, "copies": True} if n else None


def _deepseek_moe(r: ConfigReader, n_layers: int, layers: list[int] | None = None) -> dict:
    """DeepSeek's MoE keys (also dots1, GLM-4.5, GLM-4.7-Flash): routed experts after first_k_dense_replace
    dense layers (or on `layers`), shared experts as one MLP, a sigmoid router whose e_score_correction_bias
    is a buffer (stored in the checkpoint, not a parameter: not counted; README, Conventions)."""
    d_expert = r.get("moe_intermediate_size")
    if layers is None:
        first_dense, freq = r.get("first_k_dense_replace", default=0), r.get("moe_layer_freq", default=1)
        layers = [i for i in range(n_layers) if i >= first_dense and i % freq == 0]
        listed = r.get("mlp_layer_types", default=None)  # transformers 5 writes the list these keys imply
        if listed is not None and [i for i, t in enumerate(listed) if t == "sparse"] != layers:
            raise InputError(r.path, r.prefix + "mlp_layer_types", "disagrees with first_k_dense_replace and "
                             "moe_layer_freq")
    # The aliases are the config classes' attribute_map (DeepseekV3Config, Glm4MoeConfig: num_local_experts;
    # Sarvam's original files: num_experts, num_shared_experts)
    moe = {"n_experts": r.get("n_routed_experts", "num_local_experts", "num_experts"),
           "top_k": r.get("num_experts_per_tok"), "d_expert": d_expert,
           # The shared experts run as one MLP of n_shared × the expert width.
           "d_shared": r.get("n_shared_experts", "num_shared_experts", default=0) * d_expert}
    return _with_layers(moe, layers, n_layers)


def _gpt_oss(r: ConfigReader) -> dict:
    spec = _core(r, tie_default=False)
    pos, limit = _position(r)
    att = _heads(r)
    att["sinks"] = True  # one learned sink logit per head per layer
    if r.get("attention_bias", default=True):
        att["bias"] = ["q", "k", "v", "o"]
    att.update({k: v for k, v in _window(r, spec["n_layers"]).items() if v is not None})
    r.ignore("experts_per_token", "same as num_experts_per_tok")
    moe = {"n_experts": r.get("num_local_experts"), "top_k": r.get("num_experts_per_tok", "experts_per_token"),
           "d_expert": r.get("intermediate_size"), "router_bias": True}
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            # Experts carry biases; the clamped SwiGLU (swiglu_limit) costs the same as SwiGLU.
            "ffn": {"activation": _activation(r, True, "silu"), "bias": True, "moe": moe}}


FAMILIES: dict[str, Callable[[ConfigReader], dict]] = {
    **{f: (lambda r, f=f: _llama_like(r, family=f)) for f in (
        "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma", "gemma2",
        "olmo2", "phi3", "cohere", "granite", "smollm3", "stablelm", "exaone4", "olmoe",
        "ernie4_5", "ernie4_5_moe", "cohere2", "seed_oss", "glm4", "glm4_moe", "dots1", "hunyuan_v1_dense", "olmo",
        "olmo3", "phimoe", "granitemoe", "granitemoeshared", "qwen3_next", "exaone", "apertus", "helium", "arcee", "minimax_m2",
        "ministral", "ministral3", "vaultgemma", "glm", "internlm3", "solar_open", "nanochat", "jais2", "flex_olmo",
        "hunyuan_v1_moe", "granite_swa", "granitemoe_swa", "exaone_moe", "afmoe", "hy_v3")},
    # Qwen3.5 (text_config of qwen3_5 / qwen3_5_moe): Qwen3-Next's layers, a dense MLP or its MoE.
    "qwen3_5_text": lambda r: _llama_like(r, family="qwen3_5"), "qwen3_5_moe_text": lambda r: _llama_like(r, family="qwen3_5_moe"),
    "gemma3": lambda r: _llama_like(r, family="gemma3"),
    "gemma3_text": lambda r: _llama_like(r, family="gemma3"),
    "gpt2": _gpt2, "gpt_neo": _gpt_neo, "gpt_neox": _gpt_neox, "falcon": _falcon, "RefinedWebModel": _falcon, "RefinedWeb": _falcon,
    "starcoder2": _starcoder2, "nemotron": _nemotron, "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "deepseek_v32": _deepseek, "glm4_moe_lite": _deepseek,
    "gpt_oss": _gpt_oss, "gptj": _parallel_gptj, "codegen": _parallel_gptj, "phi": _phi, "bloom": _bloom,
    # Config classes of their own over an existing model (AutoModelForCausalLM builds LlamaForCausalLM,
    # GPT2LMHeadModel, DeepseekV3ForCausalLM, Glm4MoeForCausalLM): their defaults in FAMILY_DEFAULTS
    "iquestcoder": lambda r: _llama_like(r, family="llama"), "gpt-sw3": _gpt2, "sarvam_mla": _deepseek,
    "sarvam_moe": lambda r: _llama_like(r, family="glm4_moe"),
    "opt": _opt, "gpt_bigcode": _gpt_bigcode, "mpt": _mpt, "llama4_text": _llama4, "lfm2": _lfm2, "lfm2_moe": _lfm2_moe,
    "jamba": _jamba, "nemotron_h": _nemotron_h,
    "persimmon": _persimmon, "dbrx": _dbrx, "ctrl": _ctrl, "minicpm3": _minicpm3, "cohere2_moe": _cohere2_moe,
    "biogpt": lambda r: _fairseq_decoder(r, {"kind": "learned", "offset": 2}),  # BioGptLearnedPositionalEmbedding
    "xglm": lambda r: _fairseq_decoder(r, {"kind": "sinusoidal"}),  # XGLMSinusoidalPositionalEmbedding: a buffer
    "minimax": _minimax, "minimax_text_01": _minimax, "minimax_m1": _minimax,
    "mamba": _mamba_lm, "falcon_mamba": _mamba_lm, "mamba2": _mamba2_lm, "bamba": _bamba, "granitemoehybrid": _granitemoehybrid, "falcon_h1": _falcon_h1,
}
# Multimodal checkpoints whose image input has weights but no vision_config to read it from.
VISION_WITHOUT_CONFIG = {"fuyu": "the fuyu image-patch projection (vision_embed_tokens)"}
# Multimodal checkpoints keep the language model under text_config.
TEXT_CONFIG_KEYS = ("text_config",)


# transformers' SiglipVisionConfig defaults (models/siglip/configuration_siglip.py), for keys a
# vision_config leaves out.
SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
                   "num_channels": 3, "image_size": 224, "patch_size": 16, "vision_use_head": True}
# outer model_type -> (its vision_config's model_type, the tower and projector it builds)
VISION_PROJECTORS = {"gemma3": ("siglip_vision_model", "gemma3"), "llama4": ("llama4_vision_model", "llama4")}


def _vision(outer: ConfigReader, cfg: dict, report: MappingReport) -> dict:
    """vision_config -> VisionSpec fields: the SigLIP tower and the projector a multimodal checkpoint loads."""
    raw = checked(outer.path, "vision_config", "vision_config", cfg["vision_config"])
    kind = raw.get("model_type")
    tower, projector = VISION_PROJECTORS.get(cfg.get("model_type"), (None, None))
    if kind != tower:
        raise InputError(outer.path, "vision_config.model_type",
                         f"{kind!r} under {cfg.get('model_type')!r} is not supported; known: "
                         + ", ".join(f"{t} under {o}" for o, (t, _) in VISION_PROJECTORS.items()))
    report.used["vision_config"] = "the vision tower and projector: spec.vision (weights fit loads)"
    llama4 = projector == "llama4"
    v = ConfigReader(raw, outer.path, report, prefix="vision_config.",
                     family_defaults=None if llama4 else SIGLIP_DEFAULTS)
    v.get("model_type")
    out = {"d_model": v.get("hidden_size"), "d_ff": v.get("intermediate_size"), "n_layers": v.get("num_hidden_layers"),
           "n_heads": v.get("num_attention_heads"), "patch_size": v.get("patch_size"),
           "image_size": v.get("image_size"), "channels": v.get("num_channels"), "projector": projector}
    if llama4:
        if v.get("multi_modal_projector_bias", default=False):
            raise InputError(outer.path, "vision_config.multi_modal_projector_bias", "true is not supported")
        out.update(kind="llama4", projector_input_dim=v.get("projector_input_dim"),
                   projector_output_dim=v.get("projector_output_dim"), output_dim=v.get("vision_output_dim"))
        for key in ("pixel_shuffle_ratio", "rope_theta", "rope_parameters", "norm_eps", "hidden_act", "vision_feature_layer",
                    "vision_feature_select_strategy", "attention_dropout", "projector_dropout", "initializer_range"):
            v.ignore(key, "no parameter: the adapter's widths are given, its 2-D RoPE has no weights")
    else:
        out["head"] = v.get("vision_use_head")
        v.ignore("hidden_act", "SigLIP's activation: the same MLP widths")
    for key in ("mm_tokens_per_image", "boi_token_index", "eoi_token_index", "image_token_index"):
        outer.ignore(key, "image tokens: no parameter (the projector's pooling has none)")
    v.finish()
    return out


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
    if cfg.get("text_config"):
        text = checked(path, "text_config", "text_config", cfg["text_config"])
        report.used["text_config"] = "language-model fields read from here"
        if text.get("model_type") is not None:
            model_type = checked(path, "text_config.model_type", "model_type", text["model_type"])
        r = ConfigReader(text, path, report, prefix="text_config.", family_defaults=FAMILY_DEFAULTS.get(model_type))
        for key in cfg:
            if key not in ("text_config", "model_type", "vision_config"):
                outer.ignore(key, "outside text_config: changes no parameter of the language model")
    if model_type is None:
        raise InputError(path, "model_type", "missing; archcalc needs it to read the config")
    if r is outer and model_type in FAMILY_DEFAULTS:
        r.family_defaults = FAMILY_DEFAULTS[model_type]
    if model_type not in FAMILIES:
        raise InputError(path, "model_type", f"{model_type!r} is not supported; supported: {', '.join(sorted(FAMILIES))}")
    report.used[r.prefix + "model_type" if "model_type" in r.cfg else "model_type"] = model_type
    spec = {**FAMILIES[model_type](r), "architecture": model_type}
    if cfg.get("vision_config") is not None and cfg.get("model_type") not in VISION_PROJECTORS:
        outer.ignore("vision_config", "a vision tower archcalc does not model: not in any total, nor in fit's weights")
        report.warnings.append(f"{path}: the {cfg.get('model_type')} vision tower (vision_config) is not modelled; "
                               "sizes are the language model's alone")
    elif cfg.get("vision_config") is not None:
        spec["vision"] = _vision(outer, cfg, report)
    if cfg.get("model_type") in VISION_WITHOUT_CONFIG:
        report.warnings.append(f"{path}: {VISION_WITHOUT_CONFIG[cfg['model_type']]} is not modelled; "
                               "sizes are the language model's alone")
    spec = {k: v for k, v in spec.items() if v not in ({}, None)}
    if r.has("quantization_config"):
        q = checked(path, r.prefix + "quantization_config", "quantization_config", r.cfg["quantization_config"])
        method = r.nested(q, "quant_method", "quantization_config", "?")
        fmt = {"awq": "awq", "gptq": "gptq"}.get(method) or ("fp8-block" if method == "fp8" and q.get("weight_block_size")
                                                              == [128, 128] else None)
        if (method == "modelopt" and q.get("quant_algo") == "NVFP4") or \
                (method == "compressed-tensors" and q.get("format") == "nvfp4-pack-quantized"):
            fmt = "nvfp4"
        how = f"--weights {fmt}" if fmt else "--dtype"
        r.ignore("quantization_config", f"checkpoint stored as {method}; size it with {how}")
    r.finish()
    if r is not outer:
        outer.finish()
    return spec, report
