"""The GPT-2 lineage and other pre-Llama layouts: learned or partial rotary positions, LayerNorm with
biases, ungated MLPs, fused or multi-query projections, parallel blocks."""

from __future__ import annotations

from archcalc.errors import InputError
from archcalc.spec.hf.common import (
    ACTIVATIONS, GATED_FORM, _activation, _core, _full_or_sliding, _heads, _multi_head, _no_cross_attention,
    _position, _rotary_fraction, _window,
)
from archcalc.spec.hf.reader import ConfigReader


def _gpt2(r: ConfigReader) -> dict:
    spec = _core(r, tie_default=True)
    _no_cross_attention(r)
    d = spec["d_model"]
    inner = r.get("n_inner", default=None)
    return {**spec, "max_context": r.get("n_positions", "n_ctx", "max_position_embeddings"),
            "attention": {"n_heads": r.get("n_head"), "bias": ["q", "k", "v", "o"]},
            "ffn": {"activation": _activation(r, False, "gelu_new"), "d_ff": inner or 4 * d, "bias": True},
            "norm": {"kind": "layernorm", "bias": True}, "position": {"kind": "learned"}}


def _openai_gpt(r: ConfigReader) -> dict:
    """GPT-1 (openai-gpt): GPT-2's Conv1D block, biased everywhere, but post-LN (ln_1(x + attn), then
    ln_2(n + mlp)) and no final norm; learned positions, a 4D MLP of `afn` (gelu is gelu_new), tied head."""
    spec = _core(r, tie_default=True)
    r.ignore("n_special", "not read by transformers' OpenAI GPT: the table has vocab_size rows")
    r.ignore("predict_special_tokens", "not read by transformers' OpenAI GPT")
    return {**spec, "max_context": r.get("n_positions", "n_ctx"),
            "attention": {"n_heads": r.get("n_head"), "bias": ["q", "k", "v", "o"]},
            "ffn": {"activation": _activation(r, False, "gelu", keys=("afn",)), "d_ff": 4 * spec["d_model"],
                    "bias": True},
            "norm": {"kind": "layernorm", "bias": True, "placement": "post", "final": False},
            "position": {"kind": "learned"}}


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


def _gpt_neox_japanese(r: ConfigReader) -> dict:
    """GPT-NeoX-Japanese (abeja; GPTNeoXJapaneseConfig): GPT-NeoX's fused q/k/v without biases in a sequential
    pre-LN block, a bias-free GELU MLP of intermediate_multiple_size × D, and one bias of D after the last layer's
    attention output (its dense_bias: o_bias_layers).  Tied embeddings by the config class's default."""
    spec = _core(r, tie_default=True)
    n, d = spec["n_layers"], spec["d_model"]
    pos, limit = _position(r, rotary_fraction=float(r.get("rotary_pct", "partial_rotary_factor", default=1.0)))
    return {**spec, "max_context": limit,
            "attention": {"n_heads": r.get("num_attention_heads"), "o_bias_layers": [n - 1]},
            "ffn": {"activation": _activation(r, False, "gelu"),
                    "d_ff": int(d * r.get("intermediate_multiple_size", default=4))},
            "norm": {"kind": "layernorm", "bias": True}, "position": pos}


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


def _cohere_compass(r: ConfigReader) -> dict:
    """Cohere's North (cohere_compass_text, CohereCompassTextConfig): Cohere 2's parallel block (one bias-free
    LayerNorm feeding attention and MLP), sliding and full layers by layer_types, RoPE or none per layer kind
    (rope_parameters keyed by layer type; its multimodal M-RoPE sections rotate what plain RoPE does), head_dim
    hidden_size / heads, tied."""
    from archcalc.spec.hf.common import _rope_by_kind

    spec = _core(r, tie_default=True)
    n, d = spec["n_layers"], spec["d_model"]
    att = _heads(r)
    if att.pop("head_dim", d // att["n_heads"]) != d // att["n_heads"]:
        raise InputError(r.path, r.prefix + "head_dim", f"must be hidden_size / num_attention_heads = "
                         f"{d // att['n_heads']}: CohereCompassTextConfig sets it so")
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    kinds = _full_or_sliding(r, att, n, ["full_attention"] * n, 4096)
    pos = _rope_by_kind(r, att, kinds, {}, "CohereCompass")
    for key, why in (("logit_scale", "scales the logits"), ("pooling", "the sequence classifier's pooling")):
        r.ignore(key, why + ": no parameter, FLOP or cache byte")
    return {**spec, "max_context": r.get("max_position_embeddings", default=8192), "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size")},
            "norm": {"kind": "layernorm", "bias": False}, "residual": {"kind": "parallel", "parallel_norms": 1}}


MODERNBERT_THETAS = {"full_attention": ("global_rope_theta", 160_000.0), "sliding_attention": ("local_rope_theta", 10_000.0)}


def _modernbert_decoder(r: ConfigReader) -> dict:
    """ModernBERT's decoder (modernbert-decoder, JHU's Ettin decoders; ModernBertDecoderConfig): LayerNorms (biased
    with norm_bias) after the embedding and before each sublayer but layer 0's attention, MHA with every
    global_attn_every_n_layers-th layer global and the others in a window of local_attention / 2, RoPE on all of
    them with a base per kind, a GeGLU MLP, BERT's prediction head (dense, activation, norm) before a tied
    unembedding with a bias."""
    spec = _core(r, tie_default=True)
    n = spec["n_layers"]
    att = {"n_heads": _multi_head(r, r.get("num_attention_heads", default=12), "ModernBertDecoder"),
           "bias": ["q", "k", "v", "o"] if r.get("attention_bias", default=False) else []}
    every = r.get("global_attn_every_n_layers", default=3)
    if r.has("layer_types"):
        r.ignore("global_attn_every_n_layers", "layer_types lists the layers")
    window = r.get("local_attention", default=128) // 2  # "only half of it", as ModernBertDecoderConfig says
    if r.has("sliding_window") and r.get("sliding_window") != window:
        raise InputError(r.path, r.prefix + "sliding_window", f"must be local_attention / 2 = {window}: "
                         "ModernBertDecoderConfig derives it so")
    kinds = _full_or_sliding(r, att, n, ["full_attention" if i % every == 0 else "sliding_attention" for i in range(n)],
                             window)
    rope = r.get("rope_parameters", default=None) or {}
    theta = {}
    for name, (legacy, default) in MODERNBERT_THETAS.items():
        entry = rope.get(name) or {}
        if r.nested(entry, "rope_type", f"rope_parameters.{name}", "default") != "default":
            raise InputError(r.path, r.prefix + f"rope_parameters.{name}.rope_type", "only default RoPE is supported "
                             "for ModernBERT's decoder")
        theta[name] = float(r.nested(entry, "rope_theta", f"rope_parameters.{name}", None)
                            or r.get(legacy, default=default))
    pos = {"kind": "rope", "theta": theta["full_attention"]}
    if "local" in kinds and theta["sliding_attention"] != theta["full_attention"]:
        pos["local_theta"] = theta["sliding_attention"]
    act = _activation(r, False, "gelu", ("classifier_activation",))
    for key in ("classifier_dropout", "cls_token_id", "sep_token_id", "initializer_cutoff_factor",
                "norm_eps", "embedding_dropout", "mlp_dropout"):
        r.ignore(key, "a classifier's dropout, a token id, an initialisation or a dropout: no parameter or FLOP of the LM")
    norm_bias = bool(r.get("norm_bias", default=False))
    return {**spec, "max_context": r.get("max_position_embeddings", default=8192), "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "gelu"), "d_ff": r.get("intermediate_size"),
                    "bias": bool(r.get("mlp_bias", default=False))},
            "norm": {"kind": "layernorm", "bias": norm_bias, "embedding": True, "first_layer": False},
            "lm_head_bias": bool(r.get("decoder_bias", default=True)),
            "head_transform": {"activation": act, "bias": bool(r.get("classifier_bias", default=False))}}
