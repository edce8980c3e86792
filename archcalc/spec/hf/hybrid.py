"""Linear-attention and state-space layers beside (or instead of) attention: LFM2's short
convolutions, MiniMax's lightning attention, Mamba and Mamba-2 in Jamba, Nemotron-H, Bamba,
Falcon-H1, Granite 4.0-H, and the pure Mamba models."""

from __future__ import annotations

from archcalc.errors import InputError
from archcalc.limits import MAX_CONTEXT
from archcalc.spec.hf.common import (
    _activation, _built_so, _core, _heads, _ignore_multipliers, _mlp_layer_types, _position, _rope_base,
    _rotary_fraction, _state_dtype, _with_layers,
)
from archcalc.spec.hf.reader import ConfigReader


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


def _kimi_linear(r: ConfigReader) -> dict:
    """Kimi Linear (KimiLinearConfig): Kimi Delta Attention layers (the linear kind) and MLA layers without
    RoPE (KimiLinearAttention rotates nothing: its "rope" key slice is one more shared latent), DeepSeek-V3's
    MoE (a sigmoid router, shared experts) after first_k_dense_replace dense layers.  The checkpoint keeps
    the linear layers' shape in linear_attn_config (1-indexed layer lists), which KimiLinearConfig reads."""
    from archcalc.spec.hf.mla import _derived_qk_head_dim
    from archcalc.spec.hf.moe import _mtp

    spec = _core(r, tie_default=False)
    n = spec["n_layers"]
    linear = r.get("linear_attn_config", default=None) or {}
    where = "linear_attn_config"
    mixer = {"kind": "kda",
             "n_heads": r.nested(linear, "num_heads", where) or r.get("linear_num_heads", default=32),
             "head_dim": r.nested(linear, "head_dim", where) or r.get("linear_head_dim", default=128),
             "conv_kernel": r.nested(linear, "short_conv_kernel_size", where) or r.get("linear_conv_kernel_dim",
                                                                                         default=4)}
    for key in ("linear_num_heads", "linear_head_dim", "linear_conv_kernel_dim"):
        r.ignore(key, "linear_attn_config says it (KimiLinearConfig reads that first)")
    types = r.get("layer_types", default=None)
    if types is None and "full_attn_layers" in linear and "kda_layers" in linear:
        types = [None] * n
        for key, kind in (("full_attn_layers", "full_attention"), ("kda_layers", "linear_attention")):
            for i in r.nested(linear, key, where):
                if not 1 <= i <= n:
                    raise InputError(r.path, f"{r.prefix}{where}.{key}", f"layer {i} of {n} (1-indexed)")
                types[i - 1] = kind
    elif types is None:  # KimiLinearConfig's default: every fourth layer from layer 4 attends
        types = ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n)]
    if len(types) != n or set(types) - {"full_attention", "linear_attention"}:
        raise InputError(r.path, r.prefix + ("layer_types" if r.has("layer_types") else where),
                         f"{n} layers, each full_attention or linear_attention, expected")
    _built_so(r, "Kimi Linear (MLA without RoPE)", mla_use_nope=True)
    if r.get("attention_bias", default=False):
        raise InputError(r.path, r.prefix + "attention_bias", "biases on MLA projections are not supported")
    att = {"kind": "mla", "n_heads": r.get("num_attention_heads"), "q_lora_rank": r.get("q_lora_rank", default=None),
           "kv_lora_rank": r.get("kv_lora_rank", default=512), "qk_nope_head_dim": r.get("qk_nope_head_dim", default=128),
           "qk_rope_head_dim": r.get("qk_rope_head_dim", default=64), "v_head_dim": r.get("v_head_dim", default=128),
           "layer_types": ["global" if t == "full_attention" else "linear" for t in types]}
    _derived_qk_head_dim(r, att["qk_nope_head_dim"] + att["qk_rope_head_dim"])
    r.ignore("num_key_value_heads", "MLA caches one latent per token; the KV head count is meaningless")
    r.ignore("head_dim", "KimiLinearConfig derives it (qk_rope_head_dim)")
    for key in ("rope_theta", "rope_parameters", "rope_scaling"):
        r.ignore(key, "no layer rotates anything (mla_use_nope)")
    mlp = _mlp_layer_types(r, n, 1)
    if r.get("moe_layer_freq", default=1) != 1:
        raise InputError(r.path, r.prefix + "moe_layer_freq", "must be 1: transformers' Kimi Linear does not read it "
                         "(first_k_dense_replace says which layers are dense)")
    for key in ("moe_renormalize", "moe_router_activation_func", "use_grouped_topk", "num_expert_group"):
        r.ignore(key, "routing: no parameter, FLOP or cache byte")
    d_expert = r.get("moe_intermediate_size", default=1024)
    moe = {"n_experts": r.get("num_experts", "num_local_experts", default=256),
           "top_k": r.get("num_experts_per_token", "num_experts_per_tok", default=8), "d_expert": d_expert,
           # KimiLinearMoE's shared experts: one MLP of n_shared × the expert width (always built)
           "d_shared": r.get("num_shared_experts", "n_shared_experts", default=1) * d_expert}
    return {**spec, "max_context": r.get("max_position_embeddings", "model_max_length", default=1048576),
            "attention": att, "linear": mixer, "position": {"kind": "none"}, "mtp": _mtp(r),
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size", default=9216),
                    "moe": _with_layers(moe, [i for i, t in enumerate(mlp) if t == "sparse"], n)}}


def _olmo_hybrid(r: ConfigReader) -> dict:
    """OLMo Hybrid (OlmoHybridConfig): Gated DeltaNet layers (q, k, v, g, a and b projections apart) and, every
    fourth by default, OLMo 3's attention: post-norm, q and k normed over their whole width, RoPE.  Its
    linear layers are pre-norm: the same two norms a layer, the same cost."""
    spec = _core(r, tie_default=False)
    n, D = spec["n_layers"], spec["d_model"]
    H = r.get("num_attention_heads")
    types = r.get("layer_types", default=None)
    if types is None:  # OlmoHybridConfig: every fourth layer attends (the last, if none would)
        types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
        types[-1] = types[-1] if "full_attention" in types else "full_attention"
    if len(types) != n or set(types) - {"full_attention", "linear_attention"} or len(set(types)) != 2:
        raise InputError(r.path, r.prefix + "layer_types", f"{n} layers of full_attention and linear_attention, "
                         "both kinds present (OlmoHybridConfig refuses a model of one kind)")
    att = {"n_heads": H, "n_kv_heads": r.get("num_key_value_heads", default=H), "qk_norm": "full",
           "layer_types": ["global" if t == "full_attention" else "linear" for t in types]}
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    k_heads = r.get("linear_num_key_heads", default=H)
    key_dim = r.get("linear_key_head_dim", default=int(0.75 * D / k_heads))  # OlmoHybridConfig's rule
    linear = {"n_heads": r.get("linear_num_value_heads", default=H), "n_key_heads": k_heads, "key_head_dim": key_dim,
              "value_head_dim": r.get("linear_value_head_dim", default=2 * key_dim),
              "conv_kernel": r.get("linear_conv_kernel_dim", default=4), "fused_projections": False,
              "separate_qkv": True}
    for key in ("linear_a_log_min", "linear_a_log_max", "linear_dt_min", "linear_dt_max", "linear_dt_init_floor"):
        r.ignore(key, "initialisation only")
    r.ignore("linear_allow_neg_eigval", "β scaled by 2: elementwise")
    pos, limit = _position(r)  # (OlmoHybridConfig always gives rope_parameters a base: its model always rotates)
    return {**spec, "max_context": limit, "attention": att, "linear": linear, "position": pos,
            "norm": {"placement": "post"},
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size")}}


# LaraMiniConfig's defaults (translated/Lara-4-Mini's shapes), for the keys save_pretrained leaves out
LARA_MINI_DEFAULTS = {"head_dim": 128, "sliding_window": 512, "num_key_value_heads": 4, "tie_word_embeddings": True,
                      "max_position_embeddings": 131072, "linear_num_key_heads": 8, "linear_num_value_heads": 16,
                      "linear_key_head_dim": 128, "linear_value_head_dim": 128, "num_experts": 128,
                      "num_experts_per_tok": 4, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512}


def _lara_mini(r: ConfigReader) -> dict:
    """Lara Mini (LaraMiniConfig): Qwen3.5's Gated DeltaNet layers (four input projections) between Qwen3's
    attention, with q/k norms and no output gate, on sliding layers (rotated) and full ones (no RoPE), in the
    released period of five; every layer's MLP is routed experts beside an ungated shared expert (Flint's)."""
    spec = _core(r, tie_default=True)
    n = spec["n_layers"]
    pattern = ["linear_attention", "sliding_attention", "linear_attention", "full_attention", "sliding_attention"]
    types = r.get("layer_types", default=[pattern[i % 5] for i in range(n)])
    names = {"linear_attention": "linear", "sliding_attention": "local", "full_attention": "global"}
    if len(types) != n or set(types) - set(names):
        raise InputError(r.path, r.prefix + "layer_types", f"{n} entries of {', '.join(names)} expected")
    att = {**_heads(r), "qk_norm": "head", "layer_types": [names[t] for t in types], "global_rope": False}
    if "local" in att["layer_types"]:
        att["sliding_window"] = r.get("sliding_window")
    else:
        r.ignore("sliding_window", "no layer_types entry is sliding_attention")
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    linear = {"n_heads": r.get("linear_num_value_heads"), "n_key_heads": r.get("linear_num_key_heads"),
              "key_head_dim": r.get("linear_key_head_dim"), "value_head_dim": r.get("linear_value_head_dim"),
              "conv_kernel": r.get("linear_conv_kernel_dim", default=4), "fused_projections": False}
    pos, limit = _position(r, rotary_fraction=_rotary_fraction(r, 1.0))
    r.ignore("attn_output_gate", "LaraMiniAttention is Qwen3's: no output gate whatever this says")
    r.ignore("intermediate_size", "no dense MLP: every layer is MoE (LaraMiniConfig removes the key)")
    moe = {"n_experts": r.get("num_experts", "num_local_experts"), "top_k": r.get("num_experts_per_tok"),
           "d_expert": r.get("moe_intermediate_size"), "d_shared": r.get("shared_expert_intermediate_size")}
    return {**spec, "max_context": limit, "attention": att, "linear": linear, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "moe": moe}}


def _lfm3(r: ConfigReader) -> dict:
    """LFM3 (Lfm3Config): LFM2's gated short convolutions (conv_L_cache taps) beside Qwen3's qk-normed attention
    on sliding and full layers (by default layer i % 4 == 2 full, i % 4 == 0 sliding, the rest conv), each head's
    output scaled by a sigmoid of a D -> H gate (use_attention_gate); sandwich norms (use_sandwich_norm); a SwiGLU
    MLP of intermediate_size as given; RoPE per kind (proportional on full layers: the whole head rotated, the
    dims past partial_rotary_factor at frequency 0, as archcalc counts Gemma 4's)."""
    spec = _core(r, tie_default=True)
    n = spec["n_layers"]
    default = ["full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i > 0 else "conv"
               for i in range(n)]
    names = {"conv": "linear", "sliding_attention": "local", "full_attention": "global"}
    types = r.get("layer_types", default=default)
    if len(types) != n or set(types) - set(names):
        raise InputError(r.path, r.prefix + "layer_types", f"{n} entries of {', '.join(names)} expected")
    att = {**_heads(r), "qk_norm": "head", "layer_types": [names[t] for t in types]}
    if "local" in att["layer_types"]:
        att["sliding_window"] = r.get("sliding_window", default=256)
    else:
        r.ignore("sliding_window", "no layer_types entry is sliding_attention")
    if r.get("use_attention_gate", default=True):
        att["head_gate"] = "sigmoid"  # Lfm3Attention.g_proj: D -> H
    if r.get("attention_bias", default=False):
        att["bias"] = ["q", "k", "v", "o"]
    pos, limit = _position(r)
    pos["local_theta"] = _rope_base(r, "sliding_attention")
    return {**spec, "max_context": limit, "attention": att, "position": pos,
            "linear": {"kind": "short_conv", "conv_kernel": r.get("conv_L_cache", default=7),
                       "bias": bool(r.get("conv_bias", default=False))},
            "norm": {"placement": "both" if r.get("use_sandwich_norm", default=True) else "pre"},
            "ffn": {"activation": "swiglu", "d_ff": r.get("intermediate_size")}}


def _bailing_hybrid(r: ConfigReader) -> dict:
    """Ling's hybrid (bailing_hybrid, BailingHybridConfig): Kimi Delta Attention layers with full-rank forget and
    output gates (f_proj, g_proj: D -> I) and num_attention_heads heads of head_dim, and, every layer_group_size-th
    layer, MLA whose heads are each scaled by a sigmoid of a D -> H gate; DeepSeek-V3's MoE (a shared expert)
    after first_k_dense_replace dense layers.  Its MTP module is in the checkpoint only, not modelled."""
    from archcalc.spec.hf.mla import _derived_qk_head_dim

    spec = _core(r, tie_default=False)
    n = spec["n_layers"]
    group = r.get("layer_group_size", default=6)
    types = r.get("layer_types", default=["full_attention" if (i + 1) % group == 0 else "linear_attention"
                                          for i in range(n)])
    if len(types) != n or set(types) - {"full_attention", "linear_attention"}:
        raise InputError(r.path, r.prefix + "layer_types", f"{n} entries of full_attention or linear_attention")
    if r.get("attention_bias", default=False):
        raise InputError(r.path, r.prefix + "attention_bias", "biases on MLA projections are not supported")
    H = r.get("num_attention_heads")
    att = {"kind": "mla", "n_heads": H, "q_lora_rank": r.get("q_lora_rank", default=None),
           "kv_lora_rank": r.get("kv_lora_rank", default=512), "qk_nope_head_dim": r.get("qk_nope_head_dim", default=128),
           "qk_rope_head_dim": r.get("qk_rope_head_dim", default=64), "v_head_dim": r.get("v_head_dim", default=128),
           "head_gate": "sigmoid", "layer_types": ["global" if t == "full_attention" else "linear" for t in types]}
    _derived_qk_head_dim(r, att["qk_nope_head_dim"] + att["qk_rope_head_dim"])
    r.ignore("num_key_value_heads", "MLA caches one latent per token; the KV head count is meaningless")
    # BailingHybridConfig derives the linear layers' shape from head_dim, num_attention_heads and
    # short_conv_kernel_size, and writes it as linear_* (its head_dim it then sets to the MLA rope width)
    linear = {"kind": "kda", "n_heads": r.get("linear_num_heads", default=H),
              "head_dim": r.get("linear_head_dim") if r.has("linear_head_dim") else r.get("head_dim", default=128),
              "conv_kernel": r.get("linear_conv_kernel_dim", "short_conv_kernel_size", default=4),
              "low_rank_gates": False}
    r.ignore("head_dim", "linear_head_dim says the linear heads' width; MLA's are its qk and v widths")
    for key, why in (("kda_safe_gate", "the forget gate's form: elementwise"), ("kda_lower_bound", "its bound"),
                     ("mtp_loss_scaling_factor", "training only"),
                     ("num_nextn_predict_layers", "an MTP module in the checkpoint only: not modelled, in no total"),
                     ("num_mtp_layers", "an MTP module in the checkpoint only: not modelled, in no total")):
        r.ignore(key, why)
    pos, _ = _position(r)
    limit = r.get("max_position_embeddings", "model_max_length", default=262144)  # (BailingHybridConfig's alias)
    mlp = _mlp_layer_types(r, n, 2)
    d_expert = r.get("moe_intermediate_size", default=768)
    moe = {"n_experts": r.get("num_experts", "num_local_experts", default=512),
           "top_k": r.get("num_experts_per_token", "num_experts_per_tok", default=8), "d_expert": d_expert,
           "d_shared": r.get("num_shared_experts", "n_shared_experts", default=1) * d_expert}
    for key in ("moe_renormalize", "num_expert_group", "topk_group", "routed_scaling_factor"):
        r.ignore(key, "routing: no parameter, FLOP or cache byte")
    return {**spec, "max_context": limit, "attention": att, "linear": linear, "position": pos,
            "ffn": {"activation": _activation(r, True, "silu"), "d_ff": r.get("intermediate_size", default=6144),
                    "moe": _with_layers(moe, [i for i, t in enumerate(mlp) if t == "sparse"], n)}}


XLSTM_KERNEL_KEYS = ("chunkwise_kernel", "sequence_kernel", "step_kernel", "forward_backend_name", "step_backend_name",
                     "autocast_kernel_dtype", "inference_state_dtype", "norm_reduction_force_float32", "eps",
                     "cell_norm_eps", "norm_eps", "return_last_states", "max_inference_chunksize",
                     "add_forward_backend_padding", "add_embedding_dropout", "igate_bias_init_range",
                     "force_bos_token_insert", "gate_soft_cap")


def _xlstm(r: ConfigReader) -> dict:
    """xLSTM (NX-AI's xLSTM 7B; xLSTMConfig): a stack of blocks, each x + mLSTM(RMSNorm(x)) then x +
    SwiGLU(RMSNorm(x)), every layer linear (MLSTMSpec), no attention and no position encoding; the FFN
    ffn_proj_factor × D rounded up to ffn_round_up_to_multiple_of; logits soft-capped.  The released file
    keeps its original code's names (embedding_dim, num_blocks), which xLSTMConfig reads as well."""
    d = r.get("hidden_size", "embedding_dim")
    if r.has("hidden_size") and r.has("embedding_dim") and r.get("embedding_dim") != d:
        raise InputError(r.path, r.prefix + "embedding_dim", f"differs from hidden_size ({d}): xLSTM has one width")
    n = r.get("num_hidden_layers", "num_blocks")
    if r.has("num_hidden_layers") and r.has("num_blocks") and r.get("num_blocks") != n:
        raise InputError(r.path, r.prefix + "num_blocks", f"differs from num_hidden_layers ({n})")
    heads = r.get("num_heads", default=8)
    widths = {}
    for key, default in (("qk_dim_factor", 0.5), ("v_dim_factor", 1.0)):
        width = int(d * r.get(key, default=default))  # xLSTMLayer's int(); xLSTMCache rounds up to 64
        if width <= 0 or width % 64 or width % heads:
            raise InputError(r.path, r.prefix + key, f"hidden_size × {key} = {d * r.get(key, default=default)}: "
                             f"transformers builds it only as a multiple of 64 and of num_heads ({heads})")
        widths[key] = width
    if r.has("head_dim") and r.get("head_dim") != widths["v_dim_factor"] // heads:  # the original code's key
        raise InputError(r.path, r.prefix + "head_dim", f"must be the value heads' width, hidden_size × v_dim_factor / "
                         f"num_heads = {widths['v_dim_factor'] // heads}: transformers derives it so")
    if r.get("mlstm_round_up_to_multiple_of", default=64) != 64:
        raise InputError(r.path, r.prefix + "mlstm_round_up_to_multiple_of", "must be 64: xLSTMConfig rounds so")
    _built_so(r, "xLSTM", use_bias=False, add_qk_norm=False, add_post_norm=False)
    final = r.get("add_out_norm", default=True)
    if r.has("add_post_blocks_norm") and r.get("add_post_blocks_norm") != final:
        raise InputError(r.path, r.prefix + "add_post_blocks_norm", "disagrees with add_out_norm, which transformers reads")
    mode = r.get("weight_mode", default="single")
    if mode not in ("single", "fused"):
        raise InputError(r.path, r.prefix + "weight_mode", f"{mode!r}; valid: single, fused")
    if r.get("mode", default="inference") != "inference":
        raise InputError(r.path, r.prefix + "mode", "only inference is supported: the train modes run every token "
                         "through the chunked form (padded, or an error when T is not whole chunks)")
    for key in XLSTM_KERNEL_KEYS:
        r.ignore(key, "a kernel, dtype, epsilon or initialisation choice: no parameter or FLOP (the state counted fp32)")
    multiple = r.get("ffn_round_up_to_multiple_of", default=64)
    d_ff = -(-d * r.get("ffn_proj_factor", default=2.667) // multiple) * multiple
    return {"d_model": d, "n_layers": n, "vocab_size": r.get("vocab_size"),
            "tie_embeddings": bool(r.get("tie_word_embeddings", default=False)),
            "max_context": r.get("max_position_embeddings", default=MAX_CONTEXT),
            "attention": {"n_heads": 1, "layer_types": ["linear"] * n},
            "linear": {"kind": "mlstm", "n_heads": heads, "qk_dim": widths["qk_dim_factor"],
                       "v_dim": widths["v_dim_factor"], "chunk": r.get("chunk_size", default=64),
                       "fused_projections": mode == "fused"},
            "ffn": {"activation": "swiglu", "d_ff": int(d_ff)}, "norm": {"final": bool(final)},
            "position": {"kind": "none"}, "final_softcap": r.get("output_logit_soft_cap", default=30.0)}


def _recurrent_gemma(r: ConfigReader) -> dict:
    """RecurrentGemma (Griffin; RecurrentGemmaConfig): block_types repeated over the layers, "recurrent" a
    Griffin recurrent block (RGLRUSpec) and "attention" local MQA/GQA in an attention_window_size window with RoPE
    on half of each head; every layer then a GeGLU MLP of intermediate_size / 2 with biases; Gemma's RMSNorms, the
    embedding scaled by √D, tied, logits soft-capped."""
    spec = _core(r, tie_default=True)
    n, d = spec["n_layers"], spec["d_model"]
    heads = r.get("num_attention_heads", default=10)
    if d % heads:
        raise InputError(r.path, r.prefix + "num_attention_heads", f"must divide hidden_size ({d}): RecurrentGemma's "
                         "head_dim is hidden_size / num_attention_heads")
    if r.has("head_dim") and r.get("head_dim") != d // heads:
        raise InputError(r.path, r.prefix + "head_dim", f"must be hidden_size / num_attention_heads = {d // heads}: "
                         "transformers derives it so")
    key = "_block_types" if r.has("_block_types") and not r.has("block_types") else "block_types"  # its 2024 name
    blocks = r.get(key, default=["recurrent", "recurrent", "attention"])
    if key == "block_types":
        r.ignore("_block_types", "its 2024 name: block_types, which transformers reads, says the layers")
    if not blocks or set(blocks) - {"recurrent", "attention"}:
        raise InputError(r.path, r.prefix + key, "a non-empty list of recurrent and attention")
    kinds = [("linear" if blocks[i % len(blocks)] == "recurrent" else "local") for i in range(n)]
    att = {"n_heads": heads, "n_kv_heads": r.get("num_key_value_heads", default=heads), "head_dim": d // heads,
           "bias": ["q", "k", "v", "o"] if r.get("attention_bias", default=False) else ["o"],  # o_proj: always
           "sliding_window": r.get("attention_window_size", "sliding_window", default=2048), "layer_types": kinds}
    for key in ("w_init_variance_scale", "final_w_init_variance_scale", "embeddings_scale_by_sqrt_dim"):
        r.ignore(key, "initialisation, or the embedding's √D scale transformers always applies: no parameter or FLOP")
    from archcalc.spec.hf.common import _rope_base, _rope_scaling

    if _rope_scaling(r):
        raise InputError(r.path, r.prefix + "rope_parameters", "RoPE scaling is not supported for RecurrentGemma "
                         "(its local attention and recurrence bound no context)")
    pos = {"kind": "rope", "theta": _rope_base(r, "full_attention"), "rotary_fraction": _rotary_fraction(r, 0.5)}
    d_ff = r.get("intermediate_size", default=3 * d)
    return {**spec, "max_context": MAX_CONTEXT, "attention": att, "position": pos,
            "linear": {"kind": "rglru", "width": r.get("lru_width", default=d), "n_heads": heads,
                       "conv_kernel": r.get("conv1d_width", default=4)},
            "ffn": {"activation": _activation(r, True, "gelu_pytorch_tanh"), "d_ff": d_ff // 2, "bias": True},
            "final_softcap": r.get("logits_soft_cap", default=30.0)}


ZAMBA2_IGNORED = ("time_step_min", "time_step_max", "time_step_floor", "use_mamba_kernels", "use_mem_eff_path",
                  "num_logits_to_keep", "initializer_range", "rms_norm_eps")


def _zamba2(r: ConfigReader) -> dict:
    """Zamba2 (Zyphra; Zamba2Config): every layer Mamba-2 without an FFN; on its "hybrid" layers a transformer
    block shared by all of them (SharedBlockSpec: num_mem_blocks sets of weights used in turn) runs first on the
    layer's input beside the token embeddings (attention over 2D values, head_dim 2D / heads), with LoRA adapters
    of its own a use (adapter_rank: on gate_up, and on q, k and v with use_shared_attention_adapter), then a D -> D
    projection a layer, added to the Mamba-2 input.  RoPE on the block's attention with use_mem_rope."""
    spec = _core(r, tie_default=True)
    n, d = spec["n_layers"], spec["d_model"]
    types = r.get("layers_block_type", "layer_types", default=None)
    if types is None:  # Zamba2Config's default (its 2.7B's 54 layers)
        types = (["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"] + ["mamba"] * 3 + ["hybrid"]
                 + ["mamba"] * 2)
    if len(types) != n or set(types) - {"mamba", "linear_attention", "hybrid"}:
        raise InputError(r.path, r.prefix + "layers_block_type", f"{n} entries of mamba (linear_attention) or hybrid")
    hybrid = [i for i, t in enumerate(types) if t == "hybrid"]
    r.ignore("hybrid_layer_ids", "layers_block_type lists the hybrid layers")
    _built_so(r, "Zamba2", add_bias_linear=False)
    heads = r.get("num_attention_heads", default=32)
    if (2 * d) % heads:
        raise InputError(r.path, r.prefix + "num_attention_heads", f"must divide 2 × hidden_size ({2 * d}): the shared "
                         "block's heads read the layer's input beside the embeddings")
    for key, value in (("attention_hidden_size", 2 * d), ("attention_head_dim", 2 * d // heads)):
        if r.has(key) and r.get(key) != value:
            raise InputError(r.path, r.prefix + key, f"must be {value}: Zamba2Config derives it so")
    expand, mamba_heads = r.get("mamba_expand", default=2), r.get("n_mamba_heads", default=8)
    if (expand * d) % mamba_heads or (r.has("mamba_headdim") and r.get("mamba_headdim") != expand * d // mamba_heads):
        raise InputError(r.path, r.prefix + "n_mamba_heads", f"mamba_expand × hidden_size ({expand * d}) split into "
                         f"n_mamba_heads heads, mamba_headdim the quotient, as Zamba2Config derives it")
    for key in ZAMBA2_IGNORED:
        r.ignore(key, "initialisation, a kernel choice or an epsilon: no parameter, FLOP or state byte")
    for key in ("kv_channels", "num_query_groups"):
        r.ignore(key, "derived by Zamba2Config from hidden_size and the heads; read by no module")
    long = r.get("use_long_context", default=False)
    limit = 16384 if long else r.get("max_position_embeddings", default=4096)  # Zamba2Config's long-context limit
    pos = {"kind": "none"}
    if r.get("use_mem_rope", default=False):
        from archcalc.spec.hf.common import _rope_scaling

        if _rope_scaling(r):
            raise InputError(r.path, r.prefix + "rope_parameters", "RoPE scaling is not supported for Zamba2")
        pos = {"kind": "rope", "theta": _rope_base(r, "full_attention")}  # (use_long_context rescales it: no count)
    else:
        for key in ("rope_theta", "rope_parameters"):
            r.ignore(key, "use_mem_rope is false: no layer rotates")
    adapters = r.get("adapter_rank", default=128)
    d_ff = r.get("intermediate_size", default=4 * d)
    if r.has("ffn_hidden_size") and r.get("ffn_hidden_size") != d_ff:  # the released files carry both
        raise InputError(r.path, r.prefix + "ffn_hidden_size", f"differs from intermediate_size ({d_ff}), which "
                         "transformers reads")
    kv_heads = r.get("num_key_value_heads", default=heads)
    if r.get("use_shared_attention_adapter", default=False) and kv_heads != heads:
        raise InputError(r.path, r.prefix + "num_key_value_heads", f"must equal num_attention_heads ({heads}) with "
                         "use_shared_attention_adapter: transformers' k and v adapters are 2 × hidden_size wide")
    return {**spec, "max_context": limit, "position": pos,
            "attention": {"n_heads": heads, "n_kv_heads": kv_heads, "head_dim": 2 * d // heads,
                          "layer_types": ["linear"] * n},
            "linear": {"kind": "mamba2", "n_heads": mamba_heads, "head_dim": expand * d // mamba_heads,
                       "d_state": r.get("mamba_d_state", default=64), "n_groups": r.get("mamba_ngroups", default=1),
                       "conv_kernel": r.get("mamba_d_conv", default=4), "chunk": r.get("chunk_size", default=256),
                       "conv_bias": bool(r.get("use_conv_bias", default=True))},
            "ffn": {"activation": _activation(r, True, "gelu"), "none_layers": list(range(n))},
            "shared_block": {"layers": hybrid, "blocks": r.get("num_mem_blocks", default=1),
                             "d_ff": d_ff,
                             "adapter_rank": adapters,
                             "attention_adapters": bool(r.get("use_shared_attention_adapter", default=False))}}


def _zamba(r: ConfigReader) -> dict:
    """Zamba (Zyphra's Zamba-7B; ZambaConfig): every layer Mamba (its mixer in n_mamba_heads heads, MambaSpec.n_heads)
    without an FFN; on its "hybrid" layers (attn_layer_period / attn_layer_offset, or layers_block_type) one shared
    transformer block (SharedBlockSpec, no adapters, no position encoding) runs first on the layer's input beside
    the token embeddings, then a D -> D projection a layer, added to the Mamba input."""
    spec = _core(r, tie_default=True)
    n, d = spec["n_layers"], spec["d_model"]
    period, offset = r.get("attn_layer_period", default=6), r.get("attn_layer_offset", default=4)
    types = r.get("layers_block_type", "layer_types", default=None)
    if types is None:  # ZambaConfig's rule
        types = ["mamba", "mamba", "hybrid"] + ["hybrid" if i % period == offset else "mamba" for i in range(n - 3)]
    else:
        for key in ("attn_layer_period", "attn_layer_offset"):
            r.ignore(key, "layers_block_type lists the layers")
    if len(types) != n or set(types) - {"mamba", "linear_attention", "hybrid"}:
        raise InputError(r.path, r.prefix + "layers_block_type", f"{n} entries of mamba (linear_attention) or hybrid")
    heads = r.get("num_attention_heads", default=16)
    head_dim = r.get("attention_head_dim", default=2 * d // heads)
    if r.get("attention_hidden_size", default=2 * d) != 2 * d or head_dim * heads != 2 * d:
        raise InputError(r.path, r.prefix + "attention_hidden_size", f"the shared block reads 2 × hidden_size = "
                         f"{2 * d} values, attention_head_dim × num_attention_heads of them")
    if r.get("hidden_mamba_act", default="silu") != "silu":
        raise InputError(r.path, r.prefix + "hidden_mamba_act", "only silu (the conv's activation) is supported")
    mamba_heads, expand = r.get("n_mamba_heads", default=2), r.get("mamba_expand", default=2)
    if (expand * d) % mamba_heads:
        raise InputError(r.path, r.prefix + "n_mamba_heads", f"must divide mamba_expand × hidden_size ({expand * d})")
    for key in ("time_step_min", "time_step_max", "time_step_floor", "use_mamba_kernels", "use_associative_scan",
                "num_logits_to_keep", "initializer_range", "rms_norm_eps"):
        r.ignore(key, "initialisation, a kernel choice or an epsilon: no parameter, FLOP or state byte")
    # Zyphra's 2024 files carry these; ZambaConfig reads neither (ZambaAttention rotates nothing, attends to all)
    r.ignore("rope_theta", "ZambaAttention has no position encoding: no layer rotates")
    if r.cfg.get("sliding_window") is not None:
        raise InputError(r.path, r.prefix + "sliding_window", "must be null: transformers' Zamba attends to every "
                         "token (no window)")
    r.ignore("sliding_window", "null: no window")
    return {**spec, "max_context": r.get("max_position_embeddings", default=4096), "position": {"kind": "none"},
            "attention": {"n_heads": heads, "n_kv_heads": r.get("num_key_value_heads", default=heads),
                          "head_dim": head_dim, "layer_types": ["linear"] * n},
            "linear": {"kind": "mamba", "d_state": r.get("mamba_d_state", default=16),
                       "d_conv": r.get("mamba_d_conv", default=4), "expand": expand,
                       "dt_rank": _dt_rank(r, d), "conv_bias": bool(r.get("mamba_conv_bias", default=True)),
                       "proj_bias": bool(r.get("mamba_proj_bias", default=False)), "n_heads": mamba_heads},
            "ffn": {"activation": _activation(r, True, "gelu"), "none_layers": list(range(n))},
            "shared_block": {"layers": [i for i, t in enumerate(types) if t == "hybrid"],
                             "d_ff": r.get("intermediate_size", default=4 * d)}}


def _rwkv(r: ConfigReader) -> dict:
    """RWKV-4 (RwkvConfig): every layer x + TimeMix(LayerNorm(x)), then x + ChannelMix(LayerNorm(x)) (RWKVSpec and
    FFNSpec.receptance: a squared-ReLU MLP of intermediate_size gated by sigmoid(x W_r)); a LayerNorm after the
    embedding (block 0's pre_ln) and before the head; no position encoding; context_length the trained length."""
    spec = _core(r, tie_default=False)
    d = spec["d_model"]
    if r.get("attention_hidden_size", default=d) != d:
        raise InputError(r.path, r.prefix + "attention_hidden_size", f"must equal hidden_size ({d}): transformers' "
                         "RWKV state is hidden_size wide")
    for key, why in (("rescale_every", "halves weights every few layers for fp16 inference: no count"),
                     ("layer_norm_epsilon", "an epsilon")):
        r.ignore(key, why)
    n = spec["n_layers"]
    return {**spec, "max_context": r.get("context_length", "max_position_embeddings", default=1024),
            "attention": {"n_heads": 1, "layer_types": ["linear"] * n}, "linear": {"kind": "rwkv4"},
            "ffn": {"activation": "relu2", "d_ff": r.get("intermediate_size", default=4 * d), "receptance": True},
            "norm": {"kind": "layernorm", "bias": True, "embedding": True}, "position": {"kind": "none"}}
