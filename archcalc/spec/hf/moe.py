"""Mixture-of-experts blocks as each family writes them, and the families whose reader is mostly
about their experts (Cohere2-MoE, Llama 4, gpt-oss)."""

from __future__ import annotations

from typing import Any

from archcalc.errors import InputError
from archcalc.spec.hf.common import (
    _activation, _built_so, _check_mlp_types, _core, _every_nth_global, _full_or_sliding, _heads, _mlp_layer_types,
    _position, _rope_by_kind, _slide_where_listed, _window, _with_layers,
)
from archcalc.spec.hf.keys import checked
from archcalc.spec.hf.reader import ConfigReader, NO_COST_REASON, _MISSING


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
    _check_mlp_types(r, mlp_types, L)
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
    if family == "kolibri1":  # DeepSeek-V3's MoE block in every layer (its router's correction bias a buffer)
        return {"n_experts": r.get("num_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
                "d_expert": r.get("moe_intermediate_size"), "d_shared": r.get("shared_expert_intermediate_size")}
    if family == "afmoe":  # after num_dense_layers dense ones; expert_bias is an nn.Parameter: the router's bias
        d_expert = r.get("moe_intermediate_size")
        moe = {"n_experts": r.get("num_experts"), "top_k": r.get("num_experts_per_tok"), "d_expert": d_expert,
               "d_shared": r.get("num_shared_experts", default=2) * d_expert, "router_bias": True}
        first = r.get("num_dense_layers", default=1)
        return _with_layers(moe, list(range(first, n_layers)), n_layers)
    if family == "aria_text":  # every layer: experts of intermediate_size, the shared MLP of n_shared times that
        d_expert = r.get("intermediate_size")
        return {"n_experts": r.get("moe_num_experts"), "top_k": r.get("moe_topk"), "d_expert": d_expert,
                "d_shared": r.get("moe_num_shared_experts", default=2) * d_expert}
    if family == "mellum":  # Qwen3-MoE's experts on mlp_layer_types' sparse layers (MellumConfig: all, absent)
        types = r.get("mlp_layer_types", default=["sparse"] * n_layers)
        _check_mlp_types(r, types, n_layers)
        moe = {"n_experts": r.get("num_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
               "d_expert": r.get("moe_intermediate_size")}
        return _with_layers(moe, [i for i, t in enumerate(types) if t == "sparse"], n_layers)
    if family in ("exaone_moe", "hy_v3"):  # DeepSeek-V3-style MoE (a sigmoid router, its bias a buffer) on "sparse" layers
        types = _mlp_layer_types(r, n_layers, 1)  # ExaoneMoeConfig's, HYV3Config's rule
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
    if family not in ("qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_5_moe", "flint"):
        return None
    # transformers 5 saves Qwen3-MoE's num_experts as num_local_experts (Qwen3MoeConfig.attribute_map)
    moe = {"n_experts": r.get("num_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
           "d_expert": r.get("moe_intermediate_size")}
    if family in ("qwen2_moe", "qwen3_next", "qwen3_5_moe"):  # a shared expert behind a sigmoid gate
        moe.update(d_shared=r.get("shared_expert_intermediate_size"), shared_gate=True)
    if family == "flint":  # its shared expert is added in full, with no gate (FlintSparseMoeBlock)
        moe["d_shared"] = r.get("shared_expert_intermediate_size")
    step = int(r.get("decoder_sparse_step", default=1))
    dense = set(r.get("mlp_only_layers", default=[]))
    return _with_layers(moe, [i for i in range(n_layers) if i not in dense and (i + 1) % step == 0], n_layers)


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


def _mimo_v2_flash(r: ConfigReader) -> dict:
    """MiMo-V2-Flash (MiMoV2FlashConfig; Xiaomi's file keeps its remote code's keys, which transformers
    reads only through its defaults): sliding layers with twice the KV heads of the global ones and a sink
    per head, d_v 128 under d_k 192, RoPE on 64 dims at a base per kind, routed experts without a shared
    one.  The remote keys that say what transformers hard-codes must agree with it."""
    spec = _core(r, tie_default=False)
    n = spec["n_layers"]
    att = _heads(r)
    att.update(v_head_dim=r.get("v_head_dim", default=128), global_kv_heads=att.pop("n_kv_heads"), sinks=True,
               global_sinks=False)
    att.setdefault("head_dim", 192)
    att["n_kv_heads"] = 2 * att["global_kv_heads"]  # MiMoV2FlashAttention: a sliding layer's KV heads, doubled
    for key, value in (("swa_num_attention_heads", att["n_heads"]), ("swa_num_key_value_heads", att["n_kv_heads"]),
                       ("swa_head_dim", att["head_dim"]), ("swa_v_head_dim", att["v_head_dim"])):
        if r.get(key, default=value) != value:
            raise InputError(r.path, r.prefix + key, f"must be {value}: transformers' MiMo-V2-Flash derives the "
                             "sliding layers' shape from the global ones'")
    _built_so(r, "MiMo-V2-Flash", add_swa_attention_sink_bias=True, add_full_attention_sink_bias=False)
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v"]  # Qwen2Attention's: o_proj has none
    # The window: sliding_window_size previous tokens and the query (MiMoV2FlashConfig: + 1)
    if r.has("sliding_window_size"):
        att["sliding_window"] = r.get("sliding_window_size") + 1
        r.ignore("sliding_window", "sliding_window_size + 1 takes its place, as transformers reads the file")
    else:
        att["sliding_window"] = r.get("sliding_window", default=129)
    r.ignore("attention_chunk_size", "the window's other name in the remote code: no layer is chunked")
    default = ["full_attention" if i == 0 or (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)]
    types = _listed_or_default(r, "layer_types", default, "hybrid_layer_pattern",
                               {0: "full_attention", 1: "sliding_attention"})
    if set(types) - {"full_attention", "sliding_attention"}:
        raise InputError(r.path, r.prefix + "layer_types", "full_attention or sliding_attention, one a layer")
    att["layer_types"] = ["global" if t == "full_attention" else "local" for t in types]
    mlp = _listed_or_default(r, "mlp_layer_types", ["dense"] + ["sparse"] * (n - 1), "moe_layer_freq",
                             {0: "dense", 1: "sparse"})
    if set(mlp) - {"dense", "sparse"}:
        raise InputError(r.path, r.prefix + "mlp_layer_types", "dense or sparse, one a layer")
    if r.get("n_shared_experts", default=None):
        raise InputError(r.path, r.prefix + "n_shared_experts", "transformers' MiMo-V2-Flash has no shared expert")
    r.ignore("n_shared_experts", "null: no shared expert")
    r.ignore("attention_value_scale", "scales the values: no parameter, FLOP or cache byte")
    r.ignore("layernorm_epsilon", "the norms' epsilon (the remote code's name)")
    pos, limit = _mimo_position(r)
    moe = {"n_experts": r.get("n_routed_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
           "d_expert": r.get("moe_intermediate_size")}
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size"),
                    "moe": _with_layers(moe, [i for i, t in enumerate(mlp) if t == "sparse"], n)}}


def _listed_or_default(r: ConfigReader, key: str, default: list, remote: str, names: dict) -> list:
    """`key` as transformers reads it (its config class's `default` when absent), which the remote code's
    list `remote` (names: its entries' meaning) must agree with: transformers never reads `remote`."""
    listed = r.get(key, default=default)
    other = r.cfg.get(remote)
    if not isinstance(other, list):  # absent, or a value of the key's usual kind (an int moe_layer_freq)
        r.get(remote, default=None)
        return listed
    checked(r.path, r.prefix + remote, "hybrid_layer_pattern", other)  # a list of 0s and 1s
    r.report.used[r.prefix + remote] = f"checked against {key}"
    if [names.get(v) for v in other] != listed:
        raise InputError(r.path, r.prefix + remote, f"disagrees with what transformers builds ({key}: "
                         f"{'given' if r.has(key) else 'its default'}), and transformers does not read it")
    return listed


# MiMoV2FlashConfig's rope_parameters when a file has none (Xiaomi's has none: it keeps the remote code's
# rope_theta, swa_rope_theta and partial_rotary_factor, which transformers does not read)
MIMO_ROPE = {"full_attention": {"rope_type": "default", "rope_theta": 5_000_000.0, "partial_rotary_factor": 0.334},
             "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.334}}


def _mimo_position(r: ConfigReader) -> tuple[dict, int]:
    """RoPE as transformers builds it: rope_parameters per layer kind (its defaults when absent), plain
    RoPE on int(head_dim · partial_rotary_factor) dims, the same share on both kinds; the remote keys
    must say the same."""
    params = r.get("rope_parameters", default=None) or MIMO_ROPE
    if set(params) != set(MIMO_ROPE):
        raise InputError(r.path, r.prefix + "rope_parameters", "one entry each for full_attention and "
                         "sliding_attention expected")
    read = {}
    for kind, remote in (("full_attention", "rope_theta"), ("sliding_attention", "swa_rope_theta")):
        where = f"rope_parameters.{kind}"
        entry = checked(r.path, r.prefix + where, "rope_parameters", params[kind])
        if r.nested(entry, "rope_type", where, "default") != "default":
            raise InputError(r.path, r.prefix + where + ".rope_type", "only default RoPE is supported here")
        read[kind] = (float(r.nested(entry, "rope_theta", where, MIMO_ROPE[kind]["rope_theta"])),
                      float(r.nested(entry, "partial_rotary_factor", where, 0.334)))
        if r.has(remote) and float(r.get(remote)) != read[kind][0]:
            raise InputError(r.path, r.prefix + remote, f"disagrees with {where}.rope_theta ({read[kind][0]:g}), "
                             "which transformers reads instead")
    fraction = {f for _, f in read.values()}
    if len(fraction) != 1 or (r.has("partial_rotary_factor") and float(r.get("partial_rotary_factor")) not in fraction):
        raise InputError(r.path, r.prefix + "rope_parameters", "partial_rotary_factor must be one share on both "
                         "kinds (and the top-level key, which transformers does not read, the same)")
    if r.get("rope_scaling", default=None):
        raise InputError(r.path, r.prefix + "rope_scaling", "not read by transformers' MiMo-V2-Flash")
    r.ignore("rope_scaling", "null: no context scaling")
    pos = {"kind": "rope", "theta": read["full_attention"][0], "local_theta": read["sliding_attention"][0],
           "rotary_fraction": fraction.pop()}
    return pos, r.get("max_position_embeddings", default=262144)


# LagunaConfig's rope_parameters when a file has none
LAGUNA_ROPE = {"full_attention": {"rope_theta": 500000.0, "partial_rotary_factor": 0.5},
               "sliding_attention": {"rope_theta": 10000.0, "partial_rotary_factor": 1.0}}


def _laguna(r: ConfigReader) -> dict:
    """Laguna (poolside; LagunaConfig): AfMoE's qk-normed GQA on full and sliding layers, each with its own query
    head count (num_attention_heads_per_layer: one count per kind), every head's output scaled by the softplus of
    a D -> H gate (g_proj; "per-head", as the released files say), RoPE on every layer with its own base and
    share per kind; a dense first layer, then routed experts (a sigmoid router whose correction bias is a
    parameter) beside an ungated shared expert."""
    spec = _core(r, tie_default=False)
    n = spec["n_layers"]
    att = _heads(r)
    att.update(head_dim=r.get("head_dim", default=128), qk_norm="head", head_gate="softplus")
    gating = r.get("gating", default=True)
    if gating is not True and gating != "per-head":
        raise InputError(r.path, r.prefix + "gating", "only the per-head gate (true or \"per-head\") is supported; "
                         "a per-element one is not modelled")
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    kinds = _full_or_sliding(r, att, n, ["full_attention"] * n, 512)
    heads = r.get("num_attention_heads_per_layer", default=[att["n_heads"]] * n)
    per_kind = {k: {h for h, kk in zip(heads, kinds) if kk == k} for k in ("global", "local")}
    if len(heads) != n or any(len(v) > 1 for v in per_kind.values()):
        raise InputError(r.path, r.prefix + "num_attention_heads_per_layer", f"{n} entries, one head count for all "
                         "full_attention layers and one for all sliding_attention ones")
    att["n_heads"] = min(per_kind["global"] or per_kind["local"])  # the global layers' count, else the only one
    if "local" in kinds and per_kind["local"] != {att["n_heads"]}:
        att["local_heads"] = min(per_kind["local"])
    if r.get("use_bidirectional_attention", default=False):
        raise InputError(r.path, r.prefix + "use_bidirectional_attention", "bidirectional attention is not supported")
    _built_so(r, "Laguna", moe_apply_router_weight_on_input=False)
    pos, limit = _position(r)
    rope = r.cfg.get("rope_parameters") or LAGUNA_ROPE
    shares = {}
    for kind in ("full_attention", "sliding_attention"):
        entry = rope.get(kind) if isinstance(rope.get(kind), dict) else {}
        shares[kind] = float(r.nested(entry, "partial_rotary_factor", f"rope_parameters.{kind}",
                                      LAGUNA_ROPE[kind]["partial_rotary_factor"]))
    if r.has("partial_rotary_factor") and float(r.get("partial_rotary_factor")) != shares["full_attention"]:
        raise InputError(r.path, r.prefix + "partial_rotary_factor", "disagrees with rope_parameters.full_attention's, "
                         "which transformers reads")
    pos["local_theta"] = float(r.nested(rope.get("sliding_attention") or {}, "rope_theta",
                                        "rope_parameters.sliding_attention", 10000.0))
    if shares["full_attention"] != 1.0:
        pos["rotary_fraction"] = shares["full_attention"]
    if "local" in kinds and shares["sliding_attention"] != pos.get("rotary_fraction", 1.0):
        pos["local_rotary_fraction"] = shares["sliding_attention"]
    for key in ("moe_routed_scaling_factor", "moe_router_logit_softcapping"):
        r.ignore(key, "scales or caps the router's output: no parameter, FLOP or cache byte")
    mlp = r.get("mlp_layer_types", default=["dense"] + ["sparse"] * (n - 1))
    _check_mlp_types(r, mlp, n)
    moe = {"n_experts": r.get("num_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
           "d_expert": r.get("moe_intermediate_size"), "d_shared": r.get("shared_expert_intermediate_size"),
           "router_bias": True}  # LagunaTopKRouter.e_score_correction_bias: an nn.Parameter
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size"),
                    "moe": _with_layers(moe, [i for i, t in enumerate(mlp) if t == "sparse"], n)}}


def _minimax_m3(r: ConfigReader) -> dict:
    """MiniMax-M3's language model (minimax_m3_vl_text, MiniMaxM3VLTextConfig): MiniMax-M2's GQA with per-head q/k
    norms and RoPE on rotary_dim, a block indexer (IndexerSpec kind block) on its "minimax_m3_sparse" layers; a
    dense MLP (dense_intermediate_size) on "dense" mlp_layer_types, elsewhere routed experts beside an ungated
    shared one (its router's correction bias a buffer).  Its clamped SwiGLU costs what SwiGLU does.  Its
    checkpoint keeps the layout in sparse_attention_config and moe_layer_freq, which the config class reads."""
    spec = _core(r, tie_default=False)
    n = spec["n_layers"]
    att = {**_heads(r), "qk_norm": "head"}
    att.setdefault("head_dim", 128)
    sparse = r.get("sparse_attention_config", default=None) or {}
    where = r.prefix + "sparse_attention_config"
    types = r.get("layer_types", default=None)
    if types is None and "sparse_attention_freq" in sparse:
        types = ["minimax_m3_sparse" if f else "full_attention" for f in sparse["sparse_attention_freq"]]
    types = types or ["full_attention"] * n
    if len(types) != n or set(types) - {"full_attention", "minimax_m3_sparse"}:
        raise InputError(r.path, r.prefix + "layer_types", f"{n} entries of full_attention or minimax_m3_sparse")
    legacy = {"index_n_heads": "sparse_num_index_heads", "index_head_dim": "sparse_index_dim",
              "index_block_size": "sparse_block_size", "index_topk_blocks": "sparse_topk_blocks",
              "index_local_blocks": "sparse_local_block"}
    defaults = {"index_n_heads": 4, "index_head_dim": 128, "index_block_size": 128, "index_topk_blocks": 16,
                "index_local_blocks": 1}
    read = {key: checked(r.path, f"{where}.{old}", key, sparse[old]) if old in sparse else
            r.get(key, default=defaults[key]) for key, old in legacy.items()}
    if sparse:
        r.report.used[where] = "the block indexer's shape and layers"
    layers = [i for i, t in enumerate(types) if t == "minimax_m3_sparse"]
    if layers:
        att["indexer"] = {"kind": "block", "n_heads": read["index_n_heads"], "head_dim": read["index_head_dim"],
                          "topk": read["index_topk_blocks"], "block_size": read["index_block_size"],
                          "local_blocks": read["index_local_blocks"], "layers": layers}
    if r.get("attention_bias", default=False):
        raise InputError(r.path, r.prefix + "attention_bias", "MiniMax-M3's attention has no biases")
    freq = r.cfg.get("moe_layer_freq")
    mlp = r.get("mlp_layer_types", default=None)
    if mlp is None and isinstance(freq, list):
        checked(r.path, r.prefix + "moe_layer_freq", "hybrid_layer_pattern", freq)
        r.report.used[r.prefix + "moe_layer_freq"] = "which layers are MoE"
        mlp = ["sparse" if f else "dense" for f in freq]
    mlp = mlp or ["sparse"] * n
    _check_mlp_types(r, mlp, n)
    for key, why in (("swiglu_alpha", "the clamped SwiGLU's gain: elementwise"), ("swiglu_limit", "its clamp"),
                     ("routed_scaling_factor", "scales the routed output"),
                     ("hidden_act", "MiniMaxM3VLTextConfig sets silu: its MLPs' clamped SwiGLU")):
        r.ignore(key, why)
    head_dim = att["head_dim"]
    pos, limit = _position(r, rotary_fraction=r.get("rotary_dim", default=64) / head_dim)
    moe = {"n_experts": r.get("num_local_experts", "num_experts"), "top_k": r.get("num_experts_per_tok"),
           "d_expert": r.get("intermediate_size"), "d_shared": r.get("shared_intermediate_size", default=3072)}
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": "swiglu", "d_ff": r.get("dense_intermediate_size", default=12288),
                    "moe": _with_layers(moe, [i for i, t in enumerate(mlp) if t == "sparse"], n)}}


def _beam(r: ConfigReader) -> dict:
    """Beam (Reflection AI; BeamConfig): qk-normed GQA on sliding and full layers, every head's output times
    sigmoid(gate_proj(x) + a bias per head) (AttentionSpec.gate_bias), RoPE where rope_parameters gives the layer
    kind one (the sliding layers; the full ones are NoPE, their queries scaled by position: no parameter, no
    matmul); Gemma 2's sandwich norms around depth-scaled residual adds (two constants a layer); dense MLPs on
    "dense" mlp_layer_types, elsewhere DeepSeek-V3's grouped sigmoid router (its correction bias a buffer) over
    routed experts alone.  The router's fp32 weight is counted at --dtype."""
    spec = _core(r, tie_default=False)
    n = spec["n_layers"]
    att = {**_heads(r), "qk_norm": "head", "output_gate": True, "gate_bias": True}
    att.setdefault("head_dim", 128)
    if r.get("attention_bias", default=False):
        raise InputError(r.path, r.prefix + "attention_bias", "true is not modelled: a bias on q_proj beside Beam's "
                         "separate, bias-free gate projection (Beam-1.0 has none)")
    kinds = _full_or_sliding(r, att, n, _every_nth_global(n, 6, last=True), 512)
    pos = _rope_by_kind(r, att, kinds, {"sliding_attention": {"rope_theta": 10000.0}, "full_attention": None}, "Beam")
    mlp = r.get("mlp_layer_types", default=["dense" if i < 3 else "sparse" for i in range(n)])
    _check_mlp_types(r, mlp, n)
    spec["final_softcap"] = r.get("final_logit_softcapping", default=30.0)
    moe = {"n_experts": r.get("num_experts", default=256), "top_k": r.get("num_experts_per_tok", default=8),
           "d_expert": r.get("moe_intermediate_size", default=2560)}
    return {**spec, "max_context": r.get("max_position_embeddings", default=8192), "attention": att, "position": pos,
            "norm": {"placement": "both"},
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size"),
                    "moe": _with_layers(moe, [i for i, t in enumerate(mlp) if t == "sparse"], n)}}


# The names jetmoe/jetmoe-8b's config.json (written for its remote code) gives some of JetMoeConfig's keys.
# transformers' JetMoeConfig reads none of them: it builds from the keys on the right, or their defaults.
JETMOE_REMOTE_KEYS = {"ffn_hidden_size": "intermediate_size", "moe_num_experts": "num_local_experts",
                      "moe_top_k": "num_experts_per_tok", "n_embd": "hidden_size", "n_layer": "num_hidden_layers",
                      "num_layers": "num_hidden_layers", "n_positions": "max_position_embeddings"}


def _jetmoe(r: ConfigReader) -> dict:
    """JetMoE: every layer a mixture of attention heads (num_local_experts query/output experts of
    num_key_value_heads heads of kv_channels, top num_experts_per_tok a token, K/V projected once) and a
    mixture of GLU experts of intermediate_size, each block with one output bias; no shared expert, bias-free
    projections, RMSNorm, RoPE.  transformers sets num_attention_heads to num_key_value_heads × top_k."""
    spec = {"d_model": r.get("hidden_size"), "n_layers": r.get("num_hidden_layers"), "vocab_size": r.get("vocab_size"),
            "tie_embeddings": bool(r.get("tie_word_embeddings", default=True))}
    E, k = r.get("num_local_experts"), r.get("num_experts_per_tok")
    kv_heads = r.get("num_key_value_heads")
    for old, new in JETMOE_REMOTE_KEYS.items():
        if old in r.cfg and r.cfg[old] != r.get(new):
            raise InputError(r.path, old, f"{r.cfg[old]!r} differs from {new} ({r.get(new)}), which transformers "
                             f"reads (JetMoeConfig has no {old}): give {new}")
        r.ignore(old, f"the remote code's name for {new}: the same value")
    heads = kv_heads * k
    if r.cfg.get("num_attention_heads") not in (None, heads):
        r.report.warnings.append(f"{r.path}: num_attention_heads={r.cfg['num_attention_heads']!r} is not "
                                 f"num_key_value_heads × num_experts_per_tok = {heads}, the query heads each token has")
    r.ignore("num_attention_heads", "transformers' JetMoE has num_key_value_heads × num_experts_per_tok query heads")
    for key in ("bias", "glu"):
        r.ignore(key, "the remote code's switch; transformers' JetMoE always has the output biases and GLU experts")
    r.ignore("rotary_percent", "the remote code's; transformers' JetMoE rotates every dimension")
    r.ignore("aux_loss_coef", NO_COST_REASON)
    pos, limit = _position(r)
    return {**spec, "max_context": limit, "position": pos,
            "attention": {"n_heads": heads, "n_kv_heads": kv_heads, "head_dim": r.get("kv_channels"), "bias": ["o"],
                          "experts": {"n_experts": E, "top_k": k}},
            "ffn": {"activation": _activation(r, True, "silu"),
                    "moe": {"n_experts": E, "top_k": k, "d_expert": r.get("intermediate_size"), "output_bias": True}}}


# InklingTextConfig's defaults (Inkling's released shapes), for the keys a file leaves out
INKLING_DEFAULTS = {"vocab_size": 201024, "hidden_size": 6144, "num_hidden_layers": 66, "num_attention_heads": 64,
                    "num_key_value_heads": 8, "head_dim": 128, "swa_num_attention_heads": 64,
                    "swa_num_key_value_heads": 16, "swa_head_dim": 128, "sliding_window_size": 512, "d_rel": 16,
                    "rel_extent": 1024, "max_position_embeddings": 131072, "conv_kernel_size": 4,
                    "intermediate_size": 24576, "moe_intermediate_size": 3072, "n_routed_experts": 256,
                    "num_experts_per_tok": 6, "n_shared_experts": 2}
# Inkling2TextConfig's (thinkingmachines/Inkling-2-Small-MXFP8's shapes, the checkpoint its docstring names)
INKLING2_DEFAULTS = {"vocab_size": 201024, "unpadded_vocab_size": 200058, "hidden_size": 4608, "num_hidden_layers": 48,
                     "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128, "swa_num_attention_heads": 48,
                     "swa_num_key_value_heads": 8, "swa_head_dim": 128, "sliding_window_size": 1024, "d_rel": 16,
                     "rel_extent": 1024, "max_position_embeddings": 1048576, "conv_kernel_size": 4,
                     "moe_intermediate_size": 2304, "n_routed_experts": 384, "num_experts_per_tok": 8,
                     "n_layers_per_attn_res_block": 6, "final_logit_softcapping": 30.0}
# Inkling2LoopTextConfig's (thinkingmachines/Inkling-2-Mini's shapes): Inkling 2's but where it says otherwise
INKLING2_LOOP_DEFAULTS = {**INKLING2_DEFAULTS, "hidden_size": 2304, "num_hidden_layers": 24, "num_attention_heads": 24,
                          "swa_num_attention_heads": 24, "moe_intermediate_size": 1152, "n_routed_experts": 128,
                          "loop_layer_index_start": 6, "loop_layer_index_end": 18, "loop_num_passes": 3,
                          "loop_gate_rank": 64}
# The released file's switches (its original code's), which transformers' Inkling does not read: it builds each
# as the value here, so a file that says otherwise is another model
INKLING_BUILT = {"use_embed_norm": True, "use_sconv": True, "use_global_scale": True, "use_gate_bias": True,
                 "norm_after_topk": True, "shared_expert_sink": True, "q_bias": False, "o_bias": False}


def _inkling2(r: ConfigReader, loop: bool = False) -> dict:
    """Inkling 2 (Thinking Machines; inkling2_text, and the text_config of inkling2; Inkling2TextConfig): Inkling's
    relative logits and short convs without a position encoding, reworked.  Every layer: queries times a learned
    H × d scale, q and k heads L2-clipped, values RMS-normed without a weight (qk_norm clip, query_scale, v_norm);
    the relative states likewise scaled and clipped (relative.scale); each head's sink logit projected from the
    input (sink_proj); the output gated by sigmoid of its own D -> H·d projection (output_gate, separate_gate).
    The global layers' K and V convs add per-token taps from their inputs (dynamic_kv_conv).  Block attention
    residuals over blocks of n_layers_per_attn_res_block layers (residual attnres, attnres_form inkling2), each
    sublayer's output through a short conv (residual.output_conv); an RMSNorm after the embedding; every MLP
    top-k of sigmoid-scored experts, no shared expert; a head of unpadded_vocab_size rows, soft-capped logits.
    inkling2_loop_text (Inkling 2 Loop, `loop`): the layers from loop_layer_index_start to loop_layer_index_end run
    loop_num_passes times (LoopSpec kind message)."""
    n, D = r.get("num_hidden_layers"), r.get("hidden_size")
    vocab, head = r.get("vocab_size"), r.get("unpadded_vocab_size")
    types = r.get("layer_types") if r.has("layer_types") else ["hybrid" if (i + 1) % 6 == 0 else "hybrid_sliding"
                                                               for i in range(n)]
    if len(types) != n or set(types) - {"hybrid", "hybrid_sliding"}:
        raise InputError(r.path, r.prefix + "layer_types", f"{n} entries of hybrid or hybrid_sliding expected")
    kinds = ["local" if t == "hybrid_sliding" else "global" for t in types]
    kernel = r.get("conv_kernel_size", "sconv_kernel_size")
    geometry = {"n_heads": ("num_attention_heads", "swa_num_attention_heads"),
                "n_kv_heads": ("num_key_value_heads", "swa_num_key_value_heads"), "head_dim": ("head_dim", "swa_head_dim")}
    att = {field: r.get(key) for field, (key, _) in geometry.items()}
    att.update(qk_norm="clip", query_scale=True, v_norm=True, sink_proj=True, output_gate=True, separate_gate=True,
               kv_conv=kernel, dynamic_kv_conv=True,
               relative={"rank": r.get("d_rel"), "extent": r.get("rel_extent"), "scale": True})
    if "local" in kinds:
        for field, (key, swa) in geometry.items():
            if r.get(swa) != att[field]:
                raise InputError(r.path, r.prefix + swa, f"must equal {key} ({att[field]}): archcalc models Inkling "
                                 "2's sliding layers with the global layers' heads and head_dim")
        att.update(layer_types=kinds, sliding_window=r.get("sliding_window_size", "sliding_window"))
    else:
        for key in ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim", "sliding_window_size"):
            r.ignore(key, "no layer is hybrid_sliding")
    per_block = r.get("n_layers_per_attn_res_block")
    if n % per_block:
        raise InputError(r.path, r.prefix + "n_layers_per_attn_res_block", f"must divide num_hidden_layers ({n}): "
                         "archcalc models attention-residual blocks of equal size")
    r.ignore("tie_word_embeddings", "Inkling2ForCausalLM ties nothing (no _tied_weights_keys)")
    r.ignore("hidden_act", "the experts' soft-capped SwiGLU is built whatever hidden_act says")
    for key in ("mlp_gate_softcap", "mlp_up_softcap"):
        r.ignore(key, "soft-caps the experts' gate and up values: a few elementwise FLOPs a value, not counted")
    for key in ("log_scaling_n_floor", "log_scaling_alpha", "qk_l2_clip_threshold", "rel_l2_clip_threshold"):
        r.ignore(key, "a threshold or scale of the global layers' elementwise steps: no parameter, no matmul FLOP")
    for key in ("route_scale", "scoring_func"):
        r.ignore(key, "how the router's scores become weights: elementwise, no count changes")
    r.ignore("number_of_conv_states", "4, the convs a layer keeps a state for (k, v, attention and MLP outputs): "
                                      "counted from the spec")
    moe = {"n_experts": r.get("n_routed_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
           "d_expert": r.get("moe_intermediate_size", "intermediate_size")}
    cap = r.get("final_logit_softcapping")
    runs = {"n_layers": n}
    if loop:
        runs = _inkling2_loop(r, att, n, per_block)
    return {"d_model": D, **runs, "vocab_size": vocab, "tie_embeddings": False,
            **({"head_vocab_size": head} if head != vocab else {}),
            "max_context": r.get("max_position_embeddings", "model_max_length"), "attention": att,
            "position": {"kind": "none"}, "norm": {"embedding": True},
            "ffn": {"activation": "swiglu", "moe": moe},
            "residual": {"kind": "attnres", "blocks": n // per_block, "attnres_form": "inkling2",
                         "output_conv": kernel},
            **({"final_softcap": cap} if cap is not None else {})}


def _inkling2_loop(r: ConfigReader, att: dict, n: int, per_block: int) -> dict:
    """Inkling 2 Loop's looped layers (Inkling2LoopTextConfig: loop_layer_index_start / _end, loop_num_passes,
    loop_gate_rank, each given by loop_config's core_start, core_end, num_passes, gate_rank where it has them):
    n_layers the layers run, the attention's layer_types per run, the loop.  Also sets att's layer_types."""
    nested = r.get("loop_config", default=None) or {}

    def value(flat: str, key: str):
        if nested.get(key) is None:
            return r.get(flat)
        r.ignore(flat, f"loop_config.{key} gives it (Inkling2LoopTextConfig reads that)")
        return r.nested(nested, key, "loop_config")

    start, end = value("loop_layer_index_start", "core_start"), value("loop_layer_index_end", "core_end")
    passes, rank = value("loop_num_passes", "num_passes"), value("loop_gate_rank", "gate_rank")
    if not 0 < start < end <= n or start % per_block or end % per_block:
        raise InputError(r.path, r.prefix + "loop_layer_index_start", f"the looped layers {start} to {end} must be "
                         f"whole attention-residual blocks of {per_block} layers within {n}, after the first block")
    kinds = att.get("layer_types", ["global"] * n)
    att["layer_types"] = kinds[:start] + kinds[start:end] * passes + kinds[end:]
    if set(att["layer_types"]) == {"global"}:
        att.pop("layer_types")
    return {"n_layers": start + passes * (end - start) + n - end,
            "loop": {"kind": "message", "stored_layers": n, "passes": passes, "prelude": start, "coda": n - end,
                     "gate_rank": rank}}


# ZayaConfig's rope_parameters when a file has none
ZAYA_ROPE = {"hybrid": {"rope_type": "default", "rope_theta": 5_000_000.0, "partial_rotary_factor": 0.5},
             "hybrid_sliding": {"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.5}}


def _zaya(r: ConfigReader) -> dict:
    """ZAYA1 (Zyphra; ZayaConfig): CCA attention (attention.cca: q and k through two short convs with residuals of
    their own, V half from the token before; L2-normed q and k, the keys times a learned scalar a KV head), partial
    RoPE with a base per layer kind; an MoE block in every layer, top-1 among num_experts and a skip expert
    (zero_experts 1), routed by an MLP (moe.router_mlp, EDA from layer 1); each sublayer's output and skip path
    given a bias and a scale, the embedding's output too (residual.affine); RMSNorms; tied by default."""
    if r.get("num_experts_per_tok", default=1) != 1:
        raise InputError(r.path, r.prefix + "num_experts_per_tok", "must be 1: transformers' ZAYA routes each token "
                         "to one expert or none")
    n = r.get("num_hidden_layers")
    types = r.get("layer_types", default=["hybrid"] * n)
    if len(types) != n or set(types) - {"hybrid", "hybrid_sliding"}:
        raise InputError(r.path, r.prefix + "layer_types", f"{n} entries of hybrid or hybrid_sliding expected")
    kinds = ["local" if t == "hybrid_sliding" else "global" for t in types]
    att = {**_heads(r), "qk_norm": "l2", "key_scale": True,
           "cca": {"depthwise": r.get("cca_time0", default=2), "grouped": r.get("cca_time1", default=2)}}
    att["head_dim"] = r.get("head_dim", default=128)
    _slide_where_listed(r, att, kinds, kinds, "hybrid_sliding")
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    pos = _rope_by_kind(r, att, kinds, ZAYA_ROPE, "ZAYA", names=("hybrid", "hybrid_sliding"))
    rope = r.get("rope_parameters", default=None) or ZAYA_ROPE
    fractions = {float(r.nested(rope[t], "partial_rotary_factor", f"rope_parameters.{t}", 1.0)) for t in set(types)}
    if len(fractions) > 1 or r.get("partial_rotary_factor", default=min(fractions)) not in fractions:
        raise InputError(r.path, r.prefix + "rope_parameters", "one partial_rotary_factor for every layer type (and "
                         "the top-level one, where given, the same): transformers' ZAYA rotates each kind by its own")
    if fractions != {1.0}:
        pos["rotary_fraction"] = fractions.pop()
    r.ignore("output_router_logits", "returns the router logits: no count changes")
    return {**_core(r, tie_default=True), "max_context": r.get("max_position_embeddings"),
            "lm_head_bias": bool(r.get("lm_head_bias", default=False)), "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"),
                    "moe": {"n_experts": r.get("num_experts"), "top_k": 1, "d_expert": r.get("moe_intermediate_size"),
                            "zero_experts": 1,
                            "router_mlp": {"width": r.get("router_hidden_size", default=256), "eda": True}}},
            "residual": {"affine": True}}


def _inkling(r: ConfigReader) -> dict:
    """Inkling (Thinking Machines; inkling_text, and the text_config of inkling_mm_model): attention with no
    position encoding but relative logits (attention.relative: r_proj and a rank × extent profile bank a layer, a
    sliding layer's extent its window), short convs on K and V and on each sublayer's output (attention.kv_conv,
    residual.output_conv: fp32 taps, a state per sequence beside the cache), per-head q/k RMSNorms, sliding layers
    with heads of their own (swa_*), an RMSNorm after the embedding; dense SwiGLU MLPs (dense_mlp_idx first) then
    sigmoid-routed experts beside shared experts the router also scores (moe.router_shared), a learned scalar on
    each MLP and router (ffn.global_scale); untied head of vocab_size rows.  With dense_intermediate_size (the
    released files), intermediate_size is the experts' width, as InklingTextConfig reads it."""
    for key, value in INKLING_BUILT.items():
        if r.get(key, default=value) is not value:
            raise InputError(r.path, r.prefix + key, f"must be {str(value).lower()}: transformers' Inkling is built so")
    if r.get("gate_activation", default="sigmoid") != "sigmoid":
        raise InputError(r.path, r.prefix + "gate_activation", "must be sigmoid: transformers' Inkling routes so")
    n = r.get("num_hidden_layers")
    spec = {"d_model": r.get("hidden_size"), "n_layers": n, "vocab_size": r.get("vocab_size"), "tie_embeddings": False}
    r.ignore("tie_word_embeddings", "InklingForCausalLM ties nothing (no _tied_weights_keys)")
    if r.has("layer_types"):
        types = r.get("layer_types")
        r.ignore("local_layer_ids", "layer_types lists the layers")
    else:
        local = set(r.get("local_layer_ids", default=[i for i in range(n) if (i + 1) % 6]))
        types = ["hybrid_sliding" if i in local else "hybrid" for i in range(n)]
    if len(types) != n or set(types) - {"hybrid", "hybrid_sliding"}:
        raise InputError(r.path, r.prefix + "layer_types", f"{n} entries of hybrid or hybrid_sliding expected")
    kinds = ["local" if t == "hybrid_sliding" else "global" for t in types]
    H, K, d = r.get("num_attention_heads"), r.get("num_key_value_heads"), r.get("head_dim")
    sH, sK, sd = r.get("swa_num_attention_heads"), r.get("swa_num_key_value_heads"), r.get("swa_head_dim")
    kernel = r.get("conv_kernel_size", "sconv_kernel_size")
    att = {"n_heads": H, "qk_norm": "head", "kv_conv": kernel,
           "relative": {"rank": r.get("d_rel"), "extent": r.get("rel_extent")}}
    if "local" in kinds:  # the sliding layers' geometry is the base; the global layers' where it differs
        att.update(n_kv_heads=sK, head_dim=sd, layer_types=kinds,
                   sliding_window=r.get("sliding_window_size", "sliding_window"))
        if sH != H:
            att["local_heads"] = sH
        if d != sd:
            att["global_head_dim"] = d
        if K != sK:
            att["global_kv_heads"] = K
    else:
        att.update(n_kv_heads=K, head_dim=d)
        for key in ("swa_num_attention_heads", "swa_num_key_value_heads", "swa_head_dim", "sliding_window_size"):
            r.ignore(key, "no layer is hybrid_sliding")
    if r.get("final_logit_softcapping", default=None) is not None:
        raise InputError(r.path, r.prefix + "final_logit_softcapping", "must be null: transformers' Inkling soft-caps "
                         "no logits")
    for key in ("log_scaling_n_floor", "log_scaling_alpha"):
        r.ignore(key, "scales the full layers' queries and bias elementwise: no parameter, no matmul FLOP")
    for key in ("logits_mup_width_multiplier", "route_scale", "rms_norm_eps_moe_gate", "unpadded_vocab_size"):
        r.ignore(key, "no count changes (unpadded_vocab_size drops logits after the head of vocab_size rows)")
    r.ignore("number_of_conv_states", "4, the convs a layer keeps a state for (k, v, attention and MLP outputs): "
                                      "what InklingTextConfig writes, counted from the spec")
    for key in ("num_mtp_layers", "chain_hidden_post_norm", "mtp_hidden_states_first", "mtp_local_layer_ids"):
        r.ignore(key, "multi-token-prediction layers: not built by transformers' Inkling (its checkpoint's model.mtp.* "
                      "is not loaded), not counted")
    types = r.get("mlp_layer_types", default=None)
    if types is None:
        first = r.get("dense_mlp_idx", default=0)
        types = ["dense" if i < first else "sparse" for i in range(n)]
    else:
        r.ignore("dense_mlp_idx", "mlp_layer_types lists the layers")
    _check_mlp_types(r, types, n)
    if r.has("dense_intermediate_size"):  # the released files: intermediate_size is the experts' (InklingTextConfig)
        expert, dense_key = r.get("intermediate_size"), "dense_intermediate_size"
        r.ignore("moe_intermediate_size", "dense_intermediate_size given: intermediate_size is the experts' width")
    else:
        expert, dense_key = r.get("moe_intermediate_size"), "intermediate_size"
    dense = r.get(dense_key) if "dense" in types else None
    if dense is None:
        r.ignore(dense_key, "no layer is dense")
    shared = r.get("n_shared_experts")
    moe = _with_layers({"n_experts": r.get("n_routed_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
                        "d_expert": expert, "d_shared": shared * expert, "router_shared": shared},
                       [i for i, t in enumerate(types) if t == "sparse"], n)
    return {**spec, "max_context": r.get("max_position_embeddings", "model_max_length"), "attention": att,
            "position": {"kind": "none"}, "norm": {"embedding": True},
            "ffn": {"activation": _activation(r, True, "silu"), **({"d_ff": dense} if dense else {}),
                    "moe": moe, "global_scale": True},
            "residual": {"output_conv": kernel}}
