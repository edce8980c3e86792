"""Multi-head latent attention (MLA): DeepSeek-V2/V3/V3.2, GLM-5, A.X-K1, MiniCPM3, GLM-4.7-Flash."""

from __future__ import annotations

from archcalc.errors import InputError
from archcalc.spec.hf.keys import checked
from archcalc.spec.hf.common import _activation, _built_so, _check_mlp_types, _core, _position, _rotary_fraction
from archcalc.spec.hf.moe import _deepseek_moe, _mtp
from archcalc.spec.hf.reader import ConfigReader


# Families whose attention always has a query latent: a null (or absent, where the class's default is null)
# q_lora_rank is not the model transformers builds
QUERY_LATENT_REQUIRED = {"axk1": "A.X-K1's attention always has a query latent (AXK1Attention)",
                         "axk2": "A.X-K2's query and output gate come from its query latent (AXK2Attention's "
                                 "q_gate_proj)"}


def _deepseek(r: ConfigReader) -> dict:
    spec = _core(r, tie_default=False)
    n_layers = spec["n_layers"]
    pos, limit = _position(r)
    r.ignore("num_key_value_heads", "MLA caches one latent per token; the KV head count is meaningless")
    for key in ("attention_bias", "mlp_bias"):
        if r.get(key, default=False):
            raise InputError(r.path, key, "biases on MLA projections and MLPs are not supported")
    # every MLA layer attends to the full context (DeepSeek-V3.2's and GLM-5's through the indexer)
    family = r.cfg.get("model_type")
    indexed = family in ("deepseek_v32", "glm_moe_dsa", "axk2", "hy_v4")
    kind = "indexed_attention" if indexed else "full_attention"
    if set(r.get("layer_types", default=None) or [kind]) != {kind}:
        raise InputError(r.path, "layer_types", f"every layer of this MLA model is {kind}")
    att = {"kind": "mla", "n_heads": r.get("num_attention_heads"), "q_lora_rank": r.get("q_lora_rank", default=None),
           "kv_lora_rank": r.get("kv_lora_rank"), "qk_nope_head_dim": r.get("qk_nope_head_dim"),
           "qk_rope_head_dim": r.get("qk_rope_head_dim"), "v_head_dim": r.get("v_head_dim")}
    # What transformers 5 writes beside MLA's widths: head_dim (the rotary width), their sum, the pair order
    _derived_qk_head_dim(r, att["qk_nope_head_dim"] + att["qk_rope_head_dim"])
    r.ignore("head_dim", "MLA: qk_rope_head_dim and qk_nope_head_dim say the widths")
    r.ignore("rope_interleave", "the order of the rotated pairs: the same math")
    r.ignore("indexer_rope_interleave", "the order of the indexer's rotated pairs: the same math")
    if indexed:  # DeepSeek Sparse Attention: the lightning indexer
        att["indexer"] = {"n_heads": r.get("index_n_heads"), "head_dim": r.get("index_head_dim"),
                          "topk": r.get("index_topk")}
        shared = _shared_indexers(r, n_layers)
        if shared:
            att["indexer"]["shared_layers"] = shared
    layers = {"glm4_moe_lite": _glm4_moe_lite, "axk2": _axk2_moe_layers, "hy_v4": _hy_v4_moe_layers}.get(
        family, lambda *_: None)(r, n_layers)
    moe = _deepseek_moe(r, n_layers, layers)
    if family in QUERY_LATENT_REQUIRED and (att["q_lora_rank"] is None or r.cfg.get("q_lora_rank", 0) is None):
        raise InputError(r.path, r.prefix + "q_lora_rank", f"required: {QUERY_LATENT_REQUIRED[family]}")
    if family == "axk1":  # A.X-K1: DeepSeek-V3 with a norm on the MoE block's output
        moe["post_norm"] = True
    norm, residual = {}, {}
    if family == "hy_v4":  # HY-V4: V3.2 with sinks, a gate of its own, and hyper-connections without the mix
        att |= {"sinks": True, "output_gate": True, "separate_gate": True}
        residual = {"kind": "mhc", "streams": r.get("hc_mult", default=4), "mix": False, "head": True}
        for key in ("hc_magnitude", "hc_eps", "learnable_sink_init"):
            r.ignore(key, "a value of the hyper-connections or sinks, not a size: no parameter, FLOP or byte changes")
        r.ignore("swiglu_limit", "a clamp on the SwiGLU's inputs: no parameter, FLOP or byte changes")
    if family == "axk2":  # A.X-K2: V3.2 with a gated query and gated norms
        att |= {"output_gate": True, "q_lora_concat": True}
        norm["gate_rank"] = r.get("gated_norm_rank", default=16)
    return {**spec, "max_context": limit, "attention": att, "position": pos, "mtp": _mtp(r), "norm": norm,
            "residual": residual,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size"), "moe": moe}}


# The MLA widths a config class fills in when a config.json leaves them out: MiniCPM3Config's (openbmb's
# MiniCPM3-4B; v_head_dim None = hidden_size / heads) and YoutuConfig's, DeepseekV3Config's (Youtu-LLM-2B).
MLA_DENSE_DEFAULTS = {
    "minicpm3": {"q_lora_rank": 768, "kv_lora_rank": 256, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
                 "v_head_dim": None},
    "youtu": {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
              "v_head_dim": 128},
}


def _mla_dense(r: ConfigReader) -> dict:
    """MLA (q_a/q_b, kv_a_proj_with_mqa, kv_b) with a dense gated MLP in every layer, tied by default:
    MiniCPM3 (its µP scalings, scale_emb, scale_depth and dim_model_base, multiply activations and change
    no count) and Youtu-LLM (DeepSeek-V3's attention over Qwen3's bias-free MLP)."""
    family = r.cfg.get("model_type")
    defaults = MLA_DENSE_DEFAULTS[family]
    spec = _core(r, tie_default=True)
    pos, limit = _position(r)
    n_heads = r.get("num_attention_heads")
    for key in ("num_key_value_heads", "head_dim"):  # both config classes write head_dim = the rotary width
        r.ignore(key, "MLA: the latent, the rope and nope widths say what is cached and computed")
    for key in ("scale_emb", "scale_depth", "dim_model_base"):
        r.ignore(key, "µP multipliers: no parameter, FLOP or cache byte changes")
    r.ignore("rope_interleave", "the order of the rotated pairs: the same math")
    r.ignore("embedding_initializer_range", "initialisation only")
    if r.get("attention_bias", default=False):
        raise InputError(r.path, r.prefix + "attention_bias", "biases on MLA projections are not supported")
    # q_lora_rank: null is no q LoRA (one q_proj); absent is the config class's
    q_rank = r.get("q_lora_rank", default=None if "q_lora_rank" in r.cfg else defaults["q_lora_rank"])
    att = {"kind": "mla", "n_heads": n_heads, "q_lora_rank": q_rank,
           **{key: r.get(key, default=defaults[key])
              for key in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim")},
           "v_head_dim": r.get("v_head_dim", default=defaults["v_head_dim"] or spec["d_model"] // n_heads)}
    _derived_qk_head_dim(r, att["qk_nope_head_dim"] + att["qk_rope_head_dim"])
    ffn = {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size")}
    if family == "youtu":
        _built_so(r, "Youtu (Qwen3's MLP)", mlp_bias=False)
    elif r.get("mlp_bias", default=False):
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
    _check_mlp_types(r, types, n_layers)
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


def _axk2_moe_layers(r: ConfigReader, n_layers: int) -> list[int]:
    """A.X-K2's MoE layers: mlp_layer_types as listed, else AXK2Config's rule, sparse from first_k_dense_replace
    (default 1) on, on every moe_layer_freq-th layer (default 1); both given, they must agree."""
    first, freq = r.get("first_k_dense_replace", default=1), r.get("moe_layer_freq", default=1)
    rule = [i for i in range(n_layers) if i >= first and i % freq == 0]
    types = r.get("mlp_layer_types", default=None)
    if types is None:
        return rule
    _check_mlp_types(r, types, n_layers)
    layers = [i for i, t in enumerate(types) if t == "sparse"]
    if layers != rule and ("first_k_dense_replace" in r.cfg or "moe_layer_freq" in r.cfg):
        raise InputError(r.path, r.prefix + "mlp_layer_types", "disagrees with first_k_dense_replace and "
                         "moe_layer_freq")
    return layers


def _hy_v4_moe_layers(r: ConfigReader, n_layers: int) -> list[int]:
    """HY-V4's MoE layers: mlp_layer_types as listed, else HYV4Config's rule, layer 0 dense and the rest sparse
    (it reads no first_k_dense_replace)."""
    types = r.get("mlp_layer_types", default=None) or ["dense"] + ["sparse"] * (n_layers - 1)
    _check_mlp_types(r, types, n_layers)
    return [i for i, t in enumerate(types) if t == "sparse"]


def _derived_qk_head_dim(r: ConfigReader, width: int) -> None:
    """qk_head_dim, which transformers writes for MLA configs: it must be qk_nope_head_dim + qk_rope_head_dim."""
    head = r.cfg.get("qk_head_dim")
    if head is not None and head != width:
        raise InputError(r.path, r.prefix + "qk_head_dim", f"{head!r} is not qk_nope_head_dim + qk_rope_head_dim")
    r.ignore("qk_head_dim", "derived: qk_nope_head_dim + qk_rope_head_dim")


def _shared_indexers(r: ConfigReader, n_layers: int) -> list[int]:
    """GLM-5 (glm_moe_dsa): the layers whose indexer_types entry is "shared" reuse the last full layer's
    top-k and build no indexer.  Absent, GlmMoeDsaConfig derives the list from index_topk_pattern ("F"
    full, "S" shared) or else from index_topk_freq and index_skip_topk_offset: layer i is full when
    max(i − offset + 1, 0) is a multiple of freq (freq 1, the default: every layer full)."""
    family = r.cfg.get("model_type")
    if family not in ("glm_moe_dsa", "hy_v4"):
        return []
    where = r.prefix + "indexer_types"
    types = r.get("indexer_types", default=None)
    pattern = None if family == "hy_v4" else r.get("index_topk_pattern", default=None)
    if types is None and family == "hy_v4":  # HYV4Config's rule: layer 0 and every fourth from layer 1 full
        types = ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n_layers)]
    elif types is None and pattern is not None:
        where = r.prefix + "index_topk_pattern"
        letters = {"F": "full", "S": "shared"}
        if isinstance(pattern, str) and set(pattern) - set(letters):
            raise InputError(r.path, where, "a string of F (full) and S (shared), one letter a layer")
        types = [letters[c] for c in pattern] if isinstance(pattern, str) else pattern
    elif types is None:
        freq = max(r.get("index_topk_freq", default=1), 1)
        offset = r.get("index_skip_topk_offset", default=2)
        types = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n_layers)]
    else:
        for key in ("index_topk_pattern", "index_topk_freq", "index_skip_topk_offset"):
            r.ignore(key, "indexer_types says which layers have an indexer (GlmMoeDsaConfig reads it first)")
    if not isinstance(types, list) or len(types) != n_layers or set(types) - {"full", "shared"}:
        raise InputError(r.path, where, f"{n_layers} entries of full or shared expected")
    if types[0] != "full":
        raise InputError(r.path, where, "layer 0 must be full: a shared layer reuses an earlier layer's top-k")
    return [i for i, t in enumerate(types) if t == "shared"]


def _longcat_flash(r: ConfigReader) -> dict:
    """LongCat-Flash (LongcatFlashConfig): each of num_layers blocks holds two MLA sublayers (always with a query
    latent; their LoRA scalings are multipliers), each followed by a dense SwiGLU MLP of ffn_hidden_size, and one
    MoE that reads the first MLP's input and whose output joins after the second ("shortcut").  Read as
    2·num_layers layers: even ones MLA + that MoE beside the MLP (its d_shared: the same input, the same cost),
    odd ones MLA + the MLP.  The router also scores zero_expert_num identity experts (moe.zero_experts)."""
    blocks = r.get("num_layers", default=28)
    n = 2 * blocks
    if r.get("num_hidden_layers", default=n) != n:
        raise InputError(r.path, r.prefix + "num_hidden_layers", f"must be 2 × num_layers ({n}): LongcatFlashConfig "
                         "derives it so")
    spec = {**_core(r, tie_default=False, layers=False), "n_layers": n}
    pos, limit = _position(r)
    if r.get("attention_bias", default=False):
        raise InputError(r.path, r.prefix + "attention_bias", "biases on MLA projections are not supported")
    if r.get("attention_method", default="MLA") != "MLA":
        raise InputError(r.path, r.prefix + "attention_method", "MLA is what transformers' LongCat-Flash builds")
    if "q_lora_rank" in r.cfg and r.cfg["q_lora_rank"] is None:
        raise InputError(r.path, r.prefix + "q_lora_rank", "required: LongCat-Flash's MLA always has a query latent")
    att = {"kind": "mla", "n_heads": r.get("num_attention_heads"), "q_lora_rank": r.get("q_lora_rank", default=1536),
           "kv_lora_rank": r.get("kv_lora_rank", default=512), "qk_nope_head_dim": r.get("qk_nope_head_dim", default=128),
           "qk_rope_head_dim": r.get("qk_rope_head_dim", default=64), "v_head_dim": r.get("v_head_dim", default=128)}
    _derived_qk_head_dim(r, att["qk_nope_head_dim"] + att["qk_rope_head_dim"])
    for key in ("num_key_value_heads", "head_dim"):
        r.ignore(key, "MLA: the latent, the rope and nope widths say what is cached and computed")
    for key in ("mla_scale_q_lora", "mla_scale_kv_lora"):
        r.ignore(key, "a multiplier on the latents: no parameter, FLOP or cache byte")
    if r.get("zero_expert_type", default="identity") != "identity":
        raise InputError(r.path, r.prefix + "zero_expert_type", "identity is what transformers' LongCat-Flash builds")
    d_ff = r.get("ffn_hidden_size", default=12288)
    moe = {"n_experts": r.get("n_routed_experts", default=512), "top_k": r.get("moe_topk", default=12),
           "d_expert": r.get("expert_ffn_hidden_size", default=2048), "d_shared": d_ff,
           "zero_experts": r.get("zero_expert_num", default=256), "router_bias": bool(r.get("router_bias", default=False)),
           "layers": list(range(0, n, 2))}
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": d_ff, "moe": moe}}


# DeepseekV4Config's layer types and its legacy compress_ratios (a rate per layer: 0 none, 4 CSA, 128 HCA,
# _COMPRESS_RATIO_TO_LAYER_TYPE), as the compressor each puts beside the window
V4_LAYER_TYPES = {"sliding_attention": "none", "compressed_sparse_attention": "csa",
                  "heavily_compressed_attention": "hca"}
V4_RATIOS = {0: "none", 4: "csa", 128: "hca"}
V4_MLP_TYPES = ("hash_moe", "moe")


def _v4_layers(r: ConfigReader, n: int) -> list[str]:
    """Each layer's compressor: layer_types, else the legacy compress_ratios (the release's, which lists the MTP
    layer too: the first n entries), else DeepseekV4Config's rule (two HCA layers, then HCA and CSA in turn)."""
    if r.has("layer_types"):
        types = r.get("layer_types")
        bad = [t for t in types if t not in V4_LAYER_TYPES]
        if bad or len(types) != n:
            raise InputError(r.path, r.prefix + "layer_types", f"needs {n} entries of {', '.join(V4_LAYER_TYPES)}")
        r.ignore("compress_ratios", "layer_types says each layer's compressor")
        return [V4_LAYER_TYPES[t] for t in types]
    if r.has("compress_ratios"):
        ratios = r.get("compress_ratios")
        if len(ratios) < n or set(ratios) - set(V4_RATIOS):
            raise InputError(r.path, r.prefix + "compress_ratios", f"needs at least {n} entries, each 0, 4 or 128")
        return [V4_RATIOS[x] for x in ratios[:n]]
    return ["hca"] * min(n, 2) + ["csa" if i % 2 else "hca" for i in range(max(n - 2, 0))]


def _v4_rates(r: ConfigReader) -> tuple[int, int]:
    """(CSA rate, HCA rate): compress_rates by layer type, the legacy compress_rate_csa / _hca over them."""
    given = r.get("compress_rates", default=None) or {}
    rates = []
    for kind, legacy, default in (("compressed_sparse_attention", "compress_rate_csa", 4),
                                  ("heavily_compressed_attention", "compress_rate_hca", 128)):
        value = given.get(kind, default) if not r.has(legacy) else r.get(legacy)
        rates.append(checked(r.path, f"{r.prefix}compress_rates.{kind}", legacy, value))  # a rate's type and range
    return rates[0], rates[1]


def _deepseek_v4(r: ConfigReader) -> dict:
    """DeepSeek-V4 (DeepseekV4Config / DeepseekV4ForCausalLM): one K=V head with a query latent, a window and a sink
    per head in every layer, CSA or HCA compressors beside it (AttentionSpec.compressed), the grouped output
    projection; routed experts with a shared one in every layer (the first num_hash_layers routed by a token-id
    table, the same weights); and mHC over hc_mult streams with a learned head (ResidualSpec)."""
    spec = _core(r, tie_default=False)
    n = spec["n_layers"]
    if r.get("num_key_value_heads", default=1) != 1:
        raise InputError(r.path, r.prefix + "num_key_value_heads", "must be 1: DeepSeek-V4's one head is both key "
                         "and value, whatever this says (DeepseekV4Attention)")
    for key in ("attention_bias", "mlp_bias"):
        if r.get(key, default=False):
            raise InputError(r.path, r.prefix + key, "biases on DeepSeek-V4's projections are not supported")
    head_dim = r.get("head_dim")
    # partial_rotary_factor, else the legacy qk_rope_head_dim / head_dim, else the class's 64 / 512
    rope_dim = r.get("qk_rope_head_dim", default=None)
    fraction = _rotary_fraction(r, rope_dim / head_dim if rope_dim else 64 / 512)
    csa, hca = _v4_rates(r)
    att = {"n_heads": r.get("num_attention_heads"), "n_kv_heads": 1, "head_dim": head_dim,
           "q_lora_rank": r.get("q_lora_rank"), "sinks": True, "sliding_window": r.get("sliding_window"),
           "o_groups": r.get("o_groups"), "o_lora_rank": r.get("o_lora_rank"),
           "compressed": {"layers": _v4_layers(r, n), "csa_rate": csa, "hca_rate": hca,
                          "index_heads": r.get("index_n_heads"), "index_head_dim": r.get("index_head_dim"),
                          "index_topk": r.get("index_topk")}}
    mlp_types = r.get("mlp_layer_types", default=None)
    if mlp_types is not None and (len(mlp_types) != n or set(mlp_types) - set(V4_MLP_TYPES)):
        raise InputError(r.path, r.prefix + "mlp_layer_types", f"needs {n} entries of hash_moe or moe")
    # hash_moe layers pick their experts from a token-id table (tid2eid, a buffer) instead of the scores: the same
    # router weight, experts and FLOPs as the others
    r.ignore("num_hash_layers", "how many layers route by a token-id table: the same weights and FLOPs")
    if r.get("first_k_dense_replace", default=0):
        raise InputError(r.path, r.prefix + "first_k_dense_replace", "must be 0: every DeepSeek-V4 layer is MoE")
    moe = _deepseek_moe(r, n, list(range(n)))
    for key, reason in (
            ("compress_rope_theta", "the compressed layers' RoPE base: no parameter, FLOP or byte changes"),
            ("rope_scaling", "YaRN on the compressed layers' RoPE: no parameter, FLOP or byte changes"),
            ("rope_parameters", "the main and compressed RoPE bases (and YaRN): no parameter, FLOP or byte changes"),
            ("swiglu_limit", "a clamp on the SwiGLU's inputs: no parameter, FLOP or byte changes"),
            ("hc_eps", "a floor in the mHC normalisation: no parameter, FLOP or byte changes"),
            ("scoring_func", "the router's activation: no parameter, FLOP or byte changes"),
            ("topk_method", "how the router picks: no parameter, FLOP or byte changes"),
            ("expert_dtype", "the released experts' storage type (fp4): size it with --weights fp8-block-mxfp4")):
        r.ignore(key, reason)
    # the release's MTP layer (not built by transformers; size reports it apart): compress_ratios' entry after the
    # layers, where the file lists one, says its compressor
    mtp = _mtp(r)
    if mtp is not None:
        ratios = r.cfg.get("compress_ratios") if not r.has("layer_types") else None
        mtp |= {"copies": False, "hc_head": True,
                "compressor": V4_RATIOS[ratios[n]] if ratios is not None and len(ratios) > n else "none"}
    residual = {"kind": "mhc", "streams": r.get("hc_mult"), "sinkhorn_iters": r.get("hc_sinkhorn_iters"),
                "head": True}
    pos = {"kind": "rope", "theta": float(r.get("rope_theta")), "rotary_fraction": fraction}
    return {**spec, "max_context": r.get("max_position_embeddings"), "attention": att, "position": pos,
            "residual": residual, "mtp": mtp, "ffn": {"activation": _activation(r, True, "silu"), "moe": moe}}


# Dots3NoteTextConfig's sliding layers where neither per_layer_config nor swa_* keys say otherwise (the
# swa_* defaults of its __post_init__); swa_qk_rope_head_dim defaults to swa_head_dim − swa_qk_nope_head_dim
DOTS3_SLIDING = {"num_attention_heads": 64, "num_key_value_heads": 64, "q_lora_rank": 1024, "kv_lora_rank": 1024,
                 "head_dim": 256, "qk_nope_head_dim": 192, "v_head_dim": 128}
MLA_WIDTHS = ("num_attention_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
              "v_head_dim")
LOCAL_MLA_FIELDS = dict(zip(MLA_WIDTHS, ("n_heads", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
                                         "qk_rope_head_dim", "v_head_dim")))


def _dots3_layer_types(r: ConfigReader, n_layers: int, listed_sliding: bool) -> list[str]:
    """Each layer's kind as Dots3NoteTextConfig builds it: layer_types as listed, else layers 0, 1 and every
    fourth from 1 full and the rest sliding (all full with use_sliding_window false); use_dsa (default true
    unless per_layer_config is given) renames full_attention to indexed_attention, or false the reverse."""
    use_dsa = r.get("use_dsa", default=None if listed_sliding else True)
    full = "full_attention" if use_dsa is False else "indexed_attention"
    types = r.get("layer_types", default=None)
    if types is None:
        sliding = r.get("use_sliding_window", default=True)
        types = [full if not sliding or i < 2 or i % 4 == 1 else "sliding_attention" for i in range(n_layers)]
    else:
        r.ignore("use_sliding_window", "layer_types lists the layers")
    if use_dsa is not None:
        old, new = ("indexed_attention", "full_attention") if use_dsa is False else ("full_attention",
                                                                                     "indexed_attention")
        types = [new if t == old else t for t in types]
    where = r.prefix + "layer_types"
    if len(types) != n_layers or set(types) - {"full_attention", "indexed_attention", "sliding_attention"}:
        raise InputError(r.path, where, f"{n_layers} entries of full_attention, indexed_attention or "
                                        "sliding_attention expected")
    if {"full_attention", "indexed_attention"} <= set(types):
        raise InputError(r.path, where, "full_attention beside indexed_attention layers (an indexer on some global "
                                        "layers only) is not supported")
    return types


def _dots3_sliding_widths(r: ConfigReader, types: list[str], glob: dict) -> dict:
    """The sliding layers' MLA widths: per_layer_config's entries where the config has it (transformers 5 writes
    one a sliding layer, only the widths that differ), else the swa_* keys with Dots3NoteTextConfig's defaults."""
    table = r.get("per_layer_config", default=None)
    sliding = {i for i, t in enumerate(types) if t == "sliding_attention"}
    if table is None:
        swa = {key: r.get(f"swa_{key}", default=DOTS3_SLIDING[key]) for key in DOTS3_SLIDING}
        widths = {key: swa[key] for key in MLA_WIDTHS if key in swa}
        widths["qk_rope_head_dim"] = r.get("swa_qk_rope_head_dim", default=swa["head_dim"] - swa["qk_nope_head_dim"])
        if swa["head_dim"] != widths["qk_nope_head_dim"] + widths["qk_rope_head_dim"]:
            raise InputError(r.path, r.prefix + "swa_head_dim", "must equal swa_qk_nope_head_dim + "
                                                                "swa_qk_rope_head_dim (Dots3NoteTextConfig)")
        heads, kv = swa["num_attention_heads"], swa["num_key_value_heads"]
        where = r.prefix + "swa_num_key_value_heads"
    else:
        where = r.prefix + "per_layer_config"
        allowed = set(MLA_WIDTHS) | {"num_key_value_heads", "head_dim"}
        entries = {}
        for index, entry in table.items():
            if not (isinstance(index, str) and index.isdigit() and int(index) < len(types)) \
                    or not isinstance(entry, dict) or set(entry) - allowed:
                raise InputError(r.path, f"{where}.{index}", "expected a layer index with MLA widths (" +
                                 ", ".join(sorted(allowed)) + ")")
            entries[int(index)] = tuple(sorted((k, checked(r.path, f"{where}.{index}.{k}", k, v))
                                               for k, v in entry.items()))
        if set(entries) - sliding or len({entries.get(i, ()) for i in sliding}) > 1:
            raise InputError(r.path, where, "supported: the same widths on every sliding_attention layer and no "
                                            "entry for any other layer")
        over = dict(next(iter(entries.values()), ()))
        over.pop("head_dim", None)  # the rotary fraction's denominator: no width of its own under MLA
        for key in (*DOTS3_SLIDING, "qk_rope_head_dim"):
            r.ignore(f"swa_{key}", "per_layer_config gives the sliding layers' widths (transformers reads it instead)")
        widths = {key: over.get(key, glob[key]) for key in MLA_WIDTHS}
        heads, kv = widths["num_attention_heads"], over.get("num_key_value_heads", widths["num_attention_heads"])
    if kv != heads:
        raise InputError(r.path, where, f"the sliding layers' KV heads ({kv}) must equal their heads ({heads}): MLA")
    return widths


def _dots3_note(r: ConfigReader) -> dict:
    """dots3-note (transformers' Dots3NoteTextModel): DeepSeek-V3.2's MLA and MoE with sliding layers of their own
    widths (64 heads over a 1024 latent) between indexed ones, a norm on the shared rope key, a sigmoid gate per
    head (g_proj D -> H) on the output, and latents scaled by sqrt(D / rank) (a multiply: no count changes)."""
    spec = _core(r, tie_default=False)
    n_layers = spec["n_layers"]
    pos, limit = _position(r)
    nested = r.cfg.get("rope_parameters")
    if isinstance(nested, dict) and isinstance(nested.get("indexed_attention"), dict):  # transformers 5's layout
        pos["theta"] = float(r.nested(nested["indexed_attention"], "rope_theta", "rope_parameters.indexed_attention",
                                      pos["theta"]))
    for key in ("attention_bias", "mlp_bias"):
        if r.get(key, default=False):
            raise InputError(r.path, r.prefix + key, "biases on MLA projections and MLPs are not supported")
    glob = {key: r.get(key) for key in MLA_WIDTHS}
    if r.get("num_key_value_heads", default=glob["num_attention_heads"]) != glob["num_attention_heads"]:
        raise InputError(r.path, r.prefix + "num_key_value_heads", "must equal num_attention_heads: MLA")
    r.ignore("head_dim", "MLA: qk_rope_head_dim and qk_nope_head_dim say the widths")
    _derived_qk_head_dim(r, glob["qk_nope_head_dim"] + glob["qk_rope_head_dim"])
    types = _dots3_layer_types(r, n_layers, listed_sliding="per_layer_config" in r.cfg)
    local = _dots3_sliding_widths(r, types, glob) if "sliding_attention" in types else {}
    kinds = {"indexed_attention": "global", "full_attention": "global", "sliding_attention": "local"}
    att = {"kind": "mla", **{LOCAL_MLA_FIELDS[k]: v for k, v in glob.items()}, "head_gate": "sigmoid",
           "rope_key_norm": True, "layer_types": [kinds[t] for t in types]}
    if local:
        att["sliding_window"] = r.get("sliding_window", "sliding_window_size", default=512)
        if any(local[k] != glob[k] for k in MLA_WIDTHS):
            att["local_mla"] = {LOCAL_MLA_FIELDS[k]: v for k, v in local.items() if v != glob[k]}
        theta = r.get("swa_rope_theta", default=50_000.0)  # Dots3NoteTextConfig's default
        if isinstance(nested, dict) and isinstance(nested.get("sliding_attention"), dict):
            theta = r.nested(nested["sliding_attention"], "rope_theta", "rope_parameters.sliding_attention", theta)
        if float(theta) != pos["theta"]:
            pos["local_theta"] = float(theta)
    else:
        for key in ("sliding_window", "sliding_window_size", "per_layer_config", "swa_rope_theta", "swa_head_dim",
                    *(f"swa_{k}" for k in (*MLA_WIDTHS, "num_key_value_heads"))):
            r.ignore(key, "no sliding_attention layer")
    if "indexed_attention" in types:
        att["indexer"] = {"n_heads": r.get("index_n_heads", default=64), "head_dim": r.get("index_head_dim", default=128),
                          "topk": r.get("index_topk", default=2048)}
    for key in ("index_n_heads", "index_head_dim", "index_topk"):
        r.ignore(key, "no indexed_attention layer: no indexer")
    for key in ("attention_gate_type", "swa_attention_gate_type"):  # transformers builds a per-head gate whatever
        if r.get(key, default="headwise") != "headwise":
            raise InputError(r.path, r.prefix + key, "only headwise is supported (transformers' Dots3NoteTextAttention "
                                                     "builds one gate a head)")
    for key in ("k_rope_only_layernorm", "qk_layernorm"):
        if not r.get(key, default=True):
            raise InputError(r.path, r.prefix + key, "false is not supported: transformers' Dots3NoteTextAttention "
                                                     "always has its latent norms and the rope key's")
    r.ignore("apply_mla_qkv_lora_rescale", "the latents times sqrt(hidden_size / rank): no parameter, FLOP or byte "
                                           "changes")
    r.ignore("rope_interleave", "the order of the rotated pairs: the same math")
    for key in ("scoring_func", "topk_method"):
        r.ignore(key, "the router's scoring: the same sigmoid router and weights (Dots3NoteTextTopkRouter)")
    mtp = r.get("num_nextn_predict_layers", default=0)
    if mtp:  # transformers skips layers.46 and mtp.* in the checkpoint; its layout is not in the config class
        r.report.warnings.append(f"{r.path}: dots3-note's {mtp} MTP layer(s) (num_nextn_predict_layers) are in the "
                                 "checkpoint, not in the model transformers builds, and not modelled: sizes are the "
                                 "causal LM's alone")
    for key in ("mtp_use_moe", "mtp_head_sharing", "use_dedicated_mtp_embeddings"):
        r.ignore(key, "the layout of the MTP layer, which is not modelled")
    r.ignore("moe_gating_fp32", "the router's compute dtype: the same weights (transformers keeps them fp32)")
    types_mlp = r.get("mlp_layer_types", default=None)
    if types_mlp is None:  # Dots3NoteTextConfig's rule: sparse from first_k_dense_replace, every moe_layer_freq-th
        first, freq = r.get("first_k_dense_replace", default=1), r.get("moe_layer_freq", default=1)
        types_mlp = ["sparse" if i >= first and i % freq == 0 else "dense" for i in range(n_layers)]
    for key in ("first_k_dense_replace", "moe_layer_freq"):
        r.ignore(key, "mlp_layer_types lists the layers (Dots3NoteTextConfig reads it first)")
    _check_mlp_types(r, types_mlp, n_layers)
    moe = _deepseek_moe(r, n_layers, [i for i, t in enumerate(types_mlp) if t == "sparse"])
    moe["d_shared"] = r.get("n_shared_experts", default=1) * r.get(
        "shared_experts_intermediate_size", "moe_shared_expert_intermediate_size", default=1536)
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size"), "moe": moe}}
