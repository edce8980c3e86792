"""The Llama-shaped families (q/k/v/o, a gated MLP, pre-norm unless said) and their switches."""

from __future__ import annotations

from archcalc.errors import InputError
from archcalc.spec.hf.common import (
    _activation, _built_so, _core, _every_nth_global, _heads, _ignore_multipliers, _multi_head, _position,
    _rope_base, _rope_by_kind, _rotary_fraction, _slide_where_listed, _state_dtype, _window,
)
from archcalc.spec.hf.moe import _moe, _mtp
from archcalc.spec.hf.reader import NO_COST_REASON, ConfigReader


def _llama_like(r: ConfigReader, *, family: str) -> dict:
    """The Llama-shaped families (q/k/v/o, a gated MLP, pre-norm unless said): llama, mistral, mixtral,
    qwen2/3 (+ MoE, Qwen3-Next), gemma 1/2/3, olmo 1/2/3, olmoe, phi3, phimoe, cohere 1/2, granite (+ MoE, + SWA),
    smollm3, stablelm, exaone4, ernie4_5 (+ MoE), seed_oss, glm4 (+ MoE), dots1, hunyuan (+ MoE), apertus,
    ministral, ministral3, vaultgemma, glm, internlm3, solar_open, nanochat, jais2, flex_olmo, cwm,
    hyperclovax (Granite with Peri-LN), kolibri1 (EXAONE 4's attention in GLM-4's sandwich over MoE), flint
    (Qwen3-MoE with sinks, RoPE on its sliding layers only, and an ungated shared expert); each
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
           # (Gemma 3n's intermediate_size may be a list: its reader reads it)
           "d_ff": None if family in MOE_EVERY_LAYER or family in ("aria_text", "gemma3n")
           else r.get("intermediate_size", default=None)}
    if family in MOE_EVERY_LAYER:  # their config classes remove intermediate_size: every layer is MoE
        r.ignore("intermediate_size", f"no dense MLP: transformers' {MOE_EVERY_LAYER[family]} is MoE in every layer")
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
    if family in HEAD_QK_NORM or (family == "glm4_moe" and r.get("use_qk_norm", default=False)):
        att["qk_norm"] = "head"  # one RMSNorm of head_dim for q, one for k
    if gemma:  # Gemma's bidirectional switch (EmbeddingGemma, Gemma 4's "all"): every token attends to every other
        bidirectional = r.cfg.get("use_bidirectional_attention")
        if bidirectional == "vision" and family == "gemma4":
            r.ignore("use_bidirectional_attention", "\"vision\": an image's tokens see each other both ways; text "
                                                    "(all archcalc counts) stays causal")
        elif bidirectional:
            raise InputError(r.path, r.prefix + "use_bidirectional_attention", "bidirectional attention is not "
                             "supported: archcalc models causal decoders")
        else:
            r.ignore("use_bidirectional_attention", "null or false: causal, as every Gemma LM")
    if family in ("gemma2", "gemma3", "gemma3n", "gemma4", "glm4", "afmoe", "kolibri1"):
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
    elif family in ("gemma3n", "gemma4"):  # soft-capped logits (30 in every release), no soft-capped scores
        spec["final_softcap"] = r.get("final_logit_softcapping", default=None)
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
    if family == "afmoe":  # AfmoeAttention: a gate_proj of H·d beside q_proj, sigmoid on the output
        att["output_gate"] = True
        for key in ("route_scale", "mup_enabled"):
            r.ignore(key, "scalings (the routed output, µP's embedding scale): no parameter, FLOP or cache byte")
    if family in ("apertus", "apertus1p5"):
        att["qk_norm"] = "head"  # ApertusAttention's q_norm, k_norm: RMSNorms of head_dim
        _built_so(r, "Apertus", qk_norm=True, post_norm=False)
    if family == "apertus1p5":  # Apertus 1.5: the head pruned to the first output_vocab_size ids (None: unpruned)
        rows = r.get("output_vocab_size", default=None)
        if rows is not None and rows != spec["vocab_size"]:
            spec["head_vocab_size"] = rows
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
    if family in ("granite", "granitemoe", "granitemoeshared", "hyperclovax", *GRANITE_SWA):
        _ignore_multipliers(r)
    if family == "hyperclovax" and r.get("use_post_norm", default=True):
        norm["placement"] = "both"  # Peri-LN: an RMSNorm after each sublayer too (post_norm1, post_norm2)
    if family in GRANITE_SWA:
        _granite_swa(r, att, spec["n_layers"])
    if family == "aria_text":  # AriaExperts are SiLU-gated and bias-free whatever the shared MLP (LlamaMLP) says
        _built_so(r, "Aria (its routed experts: SiLU, no bias)", mlp_bias=False)
        if ffn["activation"] != "swiglu":
            raise InputError(r.path, r.prefix + "hidden_act", "silu expected: Aria's routed experts are SiLU-gated "
                             "whatever it says, and archcalc has one activation for experts and the shared MLP")
    if family == "diffllama":  # DiffLlamaAttention: differential attention, its λ vectors an init's std only
        att["differential"] = True
        r.ignore("lambda_std_dev", "initialisation only")
    if family == "bitnet":  # BitNet b1.58: a norm before o_proj and one before down_proj
        att["sub_norm"], ffn["sub_norm"] = True, True
    if family == "flint":
        att["sinks"] = True  # FlintAttention.sinks: one learned logit per head (its fp32 copy counted at --dtype)
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
    if family in ("gemma3", "gemma3n", "gemma4", "mellum"):
        pos["local_theta"] = _rope_base(r, "sliding_attention")
    if family == "cohere" and r.has("model_max_length"):
        limit = int(r.get("model_max_length"))  # vLLM's Cohere special case
    window = _window(r, spec["n_layers"], pattern_key_default="1:1" if family in ("gemma2", "vaultgemma") else None,
                     default_types=_every_fourth_global(spec["n_layers"]) if family in EVERY_FOURTH_GLOBAL else
                     _every_nth_global(spec["n_layers"], r.get("global_attn_every_n_layers", default=4))
                     if family == "afmoe" else _every_nth_global(spec["n_layers"], 5) if family == "kolibri1" else
                     _flint_types(spec["n_layers"]) if family == "flint" else
                     _every_nth_global(spec["n_layers"], 6, last=True) if family == "gemma4" else
                     _every_nth_global(spec["n_layers"], 5) if family == "gemma3n" else
                     ["full_attention"] * spec["n_layers"] if family == "mellum" else None)
    att.update({k: v for k, v in window.items() if v is not None})
    if family == "afmoe":  # AfmoeAttention rotates its sliding layers only, window or not
        kinds = att.get("layer_types") or ["global"] * spec["n_layers"]
        if "global" in kinds:
            att["nope_layers"] = [i for i, k in enumerate(kinds) if k == "global"]
    if (family in ("exaone4", "exaone_moe", "kolibri1") and window.get("sliding_window")
            or family in ("cohere2", "flint")):
        # RoPE on the sliding layers only (Exaone4Attention, Cohere2Attention, FlintAttention: none without a window)
        att["global_rope"] = False
    moe = _moe(r, family, spec["n_layers"])
    if moe:
        ffn["moe"] = moe
    if family in ("glm4_moe", "dots1", "solar_open"):
        spec["mtp"] = _mtp(r)
    if family == "mellum":  # MellumConfig's MTP keys: modules the checkpoint stores and transformers does not build
        for key in ("num_nextn_predict_layers", "num_mtp_layers", "mtp_layer_types", "mtp_mlp_layer_types"):
            r.ignore(key, "MTP modules (mtp.* in the checkpoint) are not modelled: in no total, and --mtp adds none")
    return {**spec, "max_context": limit, "attention": att, "ffn": ffn, "norm": norm, "position": pos,
            "residual": residual}


GRANITE_SWA = ("granite_swa", "granitemoe_swa")
EVERY_FOURTH_GLOBAL = (*GRANITE_SWA, "cwm")


def _every_fourth_global(n_layers: int) -> list[str]:
    """GraniteSWAConfig's and CwmConfig's layer_types when the config has none: layer i is global iff
    i % 4 == 0."""
    return ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(n_layers)]


def _flint_types(n_layers: int) -> list[str]:
    """FlintConfig's layer_types when absent: layers 0 and 1, every i % 4 == 1 and the last global."""
    return ["full_attention" if i < 2 or i % 4 == 1 or i == n_layers - 1 else "sliding_attention"
            for i in range(n_layers)]


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


def _ministral3(r: ConfigReader) -> None:
    """Ministral 3 / Devstral 2 (the text_config of mistral3): Mistral's layers, and a Llama-4-style
    scaling of the queries by position (rope_parameters.llama_4_scaling_beta: an elementwise product,
    no parameter).  Its attention ignores layer_types (transformers warns; every layer uses
    sliding_window when one is set), so only an all-full list reads the same either way."""
    types = r.cfg.get("layer_types")
    if types is not None and (r.cfg.get("sliding_window") is not None or set(types) != {"full_attention"}):
        raise InputError(r.path, r.prefix + "layer_types", "transformers' Ministral3 ignores layer_types (every "
                         "layer uses sliding_window when it is set); per-layer windows are model_type ministral")


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


# Families whose attention_bias puts biases on q, k and v but not on o_proj.
QKV_BIAS_ONLY = ("glm4", "glm4_moe", "seed_oss", "glm", "solar_open")
# Families whose config classes remove intermediate_size: an MoE block in every layer, no dense MLP.
MOE_EVERY_LAYER = {"solar_open": "Solar Open", "kolibri1": "Kolibri-1"}
# Families whose transformers attention is bias-free whatever attention_bias says (MinistralAttention
# rebuilds q/k/v without one; Mistral's o_proj has none; CwmAttention likewise over Qwen2's bias-free
# o_proj): a true value is not that model.
NO_ATTENTION_BIAS = {"ministral": "Ministral", "ministral3": "Ministral3", "cwm": "CWM", "kolibri1": "Kolibri-1"}
# (Flint's attention_bias is Qwen3-MoE's: read as given.)
# Families whose MLP has no bias switch (GlmMLP is Phi-3's fused gate_up, bias-free).
NO_MLP_BIAS = {"glm": "GLM", "ministral": "Ministral", "ministral3": "Ministral3", "solar_open": "Solar Open",
               "bitnet": "BitNet",
               "kolibri1": "Kolibri-1",
               "nanochat": "NanoChat"}
# Llama-shaped families whose MLP is up, activation, down (no gate).
UNGATED = ("apertus", "apertus1p5", "arcee", "nanochat", "jais2")
# hidden_act when a config leaves it out, where the config class's default is not silu.
FAMILY_ACTIVATION = {"nanochat": "relu2", "jais2": "relu2", "bitnet": "relu2", "apertus1p5": "xielu"}
# partial_rotary_factor when a config leaves it out (the config classes' defaults).
ROTARY_DEFAULTS = {"stablelm": 0.25, "glm4": 0.5, "glm4_moe": 0.5, "glm": 0.5,
                   **{f: 0.25 for f in ("qwen3_next", "qwen3_5", "qwen3_5_moe")}}
# Qwen3-Next and Qwen3.5: Gated DeltaNet layers between gated full-attention ones.
QWEN_HYBRID = ("qwen3_next", "qwen3_5", "qwen3_5_moe")
# Families whose attention normalises q and k per head (one RMSNorm of head_dim each).
HEAD_QK_NORM = ("qwen3", "qwen3_moe", "gemma3", "gemma3n", "gemma4", "hunyuan_v1_dense", "hunyuan_v1_moe", "dots1", "exaone4", "exaone_moe",
                "afmoe", "hy_v3", "kolibri1", "flint", "mellum", *QWEN_HYBRID)


def _hrm_text(r: ConfigReader) -> dict:
    """HRM-Text (sapientinc; HrmTextConfig): two stacks of num_layers_per_stack layers, the low-level one run
    L_cycles times and then the high-level one, H_cycles times over (LoopSpec: H_cycles · (L_cycles + 1) passes,
    each a stack's layers and a weightless RMSNorm); per layer MHA whose output is gated by sigmoid(gate_proj(x))
    (output_gate; with attention_bias the gate's bias too, as q_proj's fused gate would have it), a SwiGLU MLP,
    weightless RMSNorms.  transformers' config rewrites num_hidden_layers to the layers run (one cache slot
    each); the released file's is the stack's."""
    H, L = r.get("H_cycles", default=2), r.get("L_cycles", default=3)
    passes = H * (L + 1)
    if r.has("num_layers_per_stack"):
        stack = r.get("num_layers_per_stack")
        if r.get("num_hidden_layers") != stack * passes:
            raise InputError(r.path, r.prefix + "num_hidden_layers", f"must be num_layers_per_stack × H_cycles × "
                             f"(L_cycles + 1) = {stack * passes}: the layers run, as HrmTextConfig writes it")
    else:  # the released file: num_hidden_layers is one stack's
        stack = r.get("num_hidden_layers")
    spec = {**_core(r, tie_default=False, layers=False), "n_layers": stack * passes}
    heads = r.get("num_attention_heads")
    att = {"n_heads": _multi_head(r, heads, "HrmText"), "head_dim": r.get("head_dim", default=128),
           "output_gate": True}
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    for key, why in (("embedding_scale", "scales the embedding: no parameter"),
                     ("L_bp_cycles", "which inner cycles keep gradients in training (train refuses a loop)"),
                     ("prefix_lm", "a bidirectional prefix where token_type_ids mark one; the causal mask counted")):
        r.ignore(key, why)
    pos, limit = _position(r)
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size"),
                    "bias": bool(r.get("mlp_bias", default=False))},
            "norm": {"weight": False}, "loop": {"stored_layers": 2 * stack, "passes": passes, "init_state": True}}


# DoryConfig's recurrent_kv_cache_mode, as LoopSpec.cache names it
DORY_CACHE = {"per_loop": "per_pass", "last_loop": "last_pass"}
DORY_KINDS = {"sliding_attention": "local", "full_attention": "global"}
# DoryConfig's rope_parameters when a file has none: a base per layer type
DORY_ROPE = {"full_attention": {"rope_type": "default", "rope_theta": 10_000_000.0},
             "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0}}


def _dory(r: ConfigReader) -> dict:
    """Dory (NVIDIA Nemotron-Labs; DoryConfig): nGPT's normalised layers (arXiv:2410.01131) in a prelude of
    n_input_layers run once, a core run n_recurrent_loops times and a coda of n_output_layers (LoopSpec kind
    recurrent).  Every norm an L2 norm without weights: around each sublayer (a sandwich), on each head's q and k,
    over the attention's and the MLP's inner outputs (sub-norms), at each pass's start and at the end; the residual
    steps towards each sublayer's output at a learned rate (interpolate); GQA with a separate output gate scaled
    inside (s_gate), queries scaled after RoPE (sqk), a SwiGLU MLP with its gate and up outputs scaled (suv), and
    a learned scale on the logits.  The released files list each layer as an attention and an mlp block
    (layer_types with "mlp" entries, every layer count doubled), as DoryConfig reads and writes them."""
    n, n_in, n_out = r.get("num_hidden_layers"), r.get("n_input_layers"), r.get("n_output_layers")
    n_rec = r.get("n_recurrent_layers", default=None)
    types = r.get("layer_types", default=None)
    if types is not None and "mlp" in types:  # the released layout: (attention, mlp) blocks, each pair a layer
        counts = [c for c in (n, n_in, n_out, n_rec) if c is not None]
        if types[1::2] != ["mlp"] * (len(types) // 2) or "mlp" in types[::2] or any(c % 2 for c in counts):
            raise InputError(r.path, r.prefix + "layer_types", "with mlp blocks listed: attention and mlp alternate, "
                             "and num_hidden_layers, n_input_layers, n_output_layers (n_recurrent_layers) are even")
        types, n, n_in, n_out = types[::2], n // 2, n_in // 2, n_out // 2
        n_rec = None if n_rec is None else n_rec // 2
    n_rec = n - n_in - n_out if n_rec is None else n_rec
    if n_rec < 1 or n_in + n_rec + n_out != n:
        raise InputError(r.path, r.prefix + "n_recurrent_layers", f"the prelude ({n_in}), core ({n_rec}) and coda "
                         f"({n_out}) must be num_hidden_layers ({n}) layers, the core at least one")
    if types is None:  # DoryConfig's rule: every fourth layer full
        types = ["full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(n)]
    if len(types) != n or set(types) - set(DORY_KINDS):
        raise InputError(r.path, r.prefix + "layer_types", f"{n} entries of {' or '.join(DORY_KINDS)} expected")
    loops = r.get("n_recurrent_loops")
    mode = r.get("recurrent_kv_cache_mode", default="per_loop")
    if mode not in DORY_CACHE:
        raise InputError(r.path, r.prefix + "recurrent_kv_cache_mode", f"{mode!r}; valid: {', '.join(DORY_CACHE)}")
    kinds = [DORY_KINDS[t] for t in types]
    runs = kinds[:n_in] + kinds[n_in:n_in + n_rec] * loops + kinds[n_in + n_rec:]
    att = {**_heads(r), "qk_norm": "l2", "output_gate": True, "separate_gate": True, "gate_scale": True,
           "query_scale": True, "sub_norm": True}
    _slide_where_listed(r, att, kinds, runs, "sliding_attention")
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    for key, why in (("ngpt_alpha_init", "the interpolation rates' initial value: no parameter"),
                     ("initializer_range", "initialisation, and the stored scale of nGPT's parameters: no count")):
        r.ignore(key, why)
    pos = _rope_by_kind(r, att, kinds, DORY_ROPE, "Dory")
    return {**_core(r, tie_default=False, layers=False), "n_layers": len(runs),
            "max_context": r.get("max_position_embeddings"),
            "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size"),
                    "bias": bool(r.get("mlp_bias", default=False)), "sub_norm": True, "scales": True},
            "norm": {"kind": "l2", "weight": False, "placement": "both"}, "residual": {"kind": "interpolate"},
            "logit_scale": True,
            "loop": {"kind": "recurrent", "stored_layers": n, "passes": loops, "prelude": n_in, "coda": n_out,
                     "cache": DORY_CACHE[mode]}}


def _doge(r: ConfigReader) -> dict:
    """Doge (SmallDoge): Llama's q/k/v/o with qk-norm per head and dynamic mask attention (keep_window_size
    keys a query, scored by dt_proj over each key's values), a SwiGLU MLP, and a learned D-vector on the skip
    path of both sublayers; with is_moe, product-key experts beside the MLP (ffn.product_key).  attention_bias
    puts a bias on q, k, v, o and dt_proj.  A sliding window is refused."""
    if r.get("sliding_window", default=None) is not None:
        raise InputError(r.path, "sliding_window", "must be null: a window over Doge's dynamic mask is not modelled")
    pk = None
    if r.get("is_moe", default=False):  # the cross-domain MoE: product-key experts beside the MLP
        pk = {"n_experts": r.get("num_experts"), "top_k": r.get("num_experts_per_tok")}
        r.ignore("norm_topk_prob", NO_COST_REASON)
    else:
        for key in ("num_experts", "num_experts_per_tok", "norm_topk_prob"):
            r.ignore(key, "is_moe is false: the MLP is dense")
    spec = _core(r, tie_default=False)
    att = {**_heads(r), "qk_norm": "head",
           "dynamic_mask": {"keep": r.get("keep_window_size")}}
    if r.get("attention_bias", default=False):
        att |= {"bias": ["q", "k", "v", "o"], "dynamic_mask": {**att["dynamic_mask"], "bias": True}}
    pos, limit = _position(r)
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size"),
                    "bias": bool(r.get("mlp_bias", default=False)), "product_key": pk},
            "residual": {"scales": True}}
