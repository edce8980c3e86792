"""The type and range of every config.json key archcalc reads: nothing is coerced.

transformers' config classes annotate these keys (int, float, bool, str,
list, dict); a config.json that gives `"n_embd": "768"` or
`"tie_word_embeddings": "false"` is refused here rather than turned into a
number or a truth value.  The upper bounds are far past every released model
(the largest: d_model 18,432 (PaLM), 126 layers (Llama 3.1 405B), vocabularies
of 256k (Gemma), 10M-token contexts (Llama 4 Scout), 384 experts (Kimi K2))
and stop the arithmetic before it runs away (2**31 layers would hang).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from archcalc.errors import InputError
from archcalc.limits import MAX_CONTEXT
from archcalc.spec.model import MAX_EXPERTS, MAX_FFN, MAX_HEADS, MAX_LAYERS, MAX_POSITIVE, MAX_VOCAB, MAX_WIDTH


class Kind(NamedTuple):
    types: tuple[type, ...]
    lo: float | None = None
    hi: float | None = None
    what: str = ""
    above: bool = False  # lo itself is excluded

    def describe(self) -> str:
        if self.lo is None and self.hi is None:
            return self.what
        low = f"above {self.lo:g}" if self.above else f"from {self.lo:g}"
        return f"{self.what} {low} to {self.hi:g}"


# The spec's own bounds (spec/model.py), so a config.json value the spec would refuse is refused here first.
WIDTH = Kind((int,), 1, MAX_WIDTH, "an integer")  # d_model, head dims, latent ranks
FFN = Kind((int,), 1, MAX_FFN, "an integer")  # FFN widths
LAYERS = Kind((int,), 1, MAX_LAYERS, "an integer")
HEADS = Kind((int,), 1, MAX_HEADS, "an integer")
TOKENS = Kind((int,), 1, MAX_CONTEXT, "an integer")  # contexts and windows
EXPERTS = Kind((int,), 1, MAX_EXPERTS, "an integer")
LAYER_COUNT = Kind((int,), 0, MAX_LAYERS, "an integer")  # layers that may be none
STEP = Kind((int,), 1, MAX_LAYERS, "an integer")  # every n-th layer
POSITIVE = Kind((int, float), 0, MAX_POSITIVE, "a finite number", above=True)  # RoPE bases, soft caps, factors
FRACTION = Kind((int, float), 0, 1, "a number", above=True)
BOOL = Kind((bool,), what="true or false")
STR = Kind((str,), what="a string")
LIST = Kind((list,), what="a list")
DICT = Kind((dict,), what="a JSON object")

KEYS: dict[str, Kind] = {
    **dict.fromkeys(("hidden_size", "n_embd", "d_model", "head_dim", "kv_channels", "kv_lora_rank", "q_lora_rank",
                     "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "word_embed_proj_dim", "rotary_dim", "index_head_dim",
                     "attention_head_dim", "linear_key_head_dim", "linear_value_head_dim", "block_dim", "conv_dim",
                     "conv_dim_out", "block_multiple_of", "mamba_d_state", "mamba_dt_rank", "mamba_head_dim",
                     "ssm_state_size", "moe_latent_size", "state_size", "time_step_rank", "mamba_d_head",
                     "attn_rotary_emb", "gated_norm_rank"), WIDTH),
    **dict.fromkeys(("intermediate_size", "n_inner", "ffn_hidden_size", "moe_intermediate_size",
                     "shared_expert_intermediate_size", "ffn_dim", "shared_intermediate_size",
                     "intermediate_size_mlp", "block_ff_dim", "moe_shared_expert_intermediate_size", "d_inner",
                     "mamba_d_ssm", "prefix_dense_intermediate_size", "dff"), FFN),
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers", "n_layers"), LAYERS),
    "expansion_ratio": Kind((int, float), 0, 1024, "a number", above=True),
    "vocab_size": Kind((int,), 1, MAX_VOCAB, "an integer"),
    **dict.fromkeys(("num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads", "n_head_kv",
                     "n_heads", "linear_num_value_heads", "linear_num_key_heads", "index_n_heads", "attention_heads"), HEADS),
    **dict.fromkeys(("linear_conv_kernel_dim", "conv_L_cache", "mamba_d_conv", "mamba_expand", "conv_kernel",
                     "expand"), Kind((int,), 1, 64, "an integer")),
    **dict.fromkeys(("mamba_num_heads", "n_groups", "num_heads", "mamba_n_heads", "mamba_n_groups", "kv_n_heads"), HEADS),
    "mamba_chunk_size": TOKENS,
    "chunk_size": TOKENS,
    "block_size": TOKENS,  # MiniMax's lightning-attention blocks
    "postnorm": BOOL,  # MiniMax's remote code: the residual taken after each norm
    "use_post_norm": BOOL,  # HyperCLOVA X: Peri-LN, a norm after each sublayer too
    "hybrid_override_pattern": STR,
    **dict.fromkeys(("attn_layer_period", "expert_layer_period"), STEP),
    **dict.fromkeys(("attn_layer_offset", "expert_layer_offset"), LAYER_COUNT),
    "block_ffn_dim_multiplier": Kind((int, float), 0, 1024, "a number", above=True),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "n_ctx", "seq_length",
                     "original_max_position_embeddings", "model_max_length", "sliding_window",
                     "sliding_window_size", "max_seq_len", "window_size", "attention_chunk_size", "index_topk",
                     "keep_window_size"), TOKENS),
    "num_local_experts": Kind((int,), 0, MAX_EXPERTS, "an integer"),  # Granite 4.0-H-Micro: 0, no MoE
    **dict.fromkeys(("num_experts", "n_routed_experts", "num_experts_per_tok",
                     "experts_per_token", "moe_num_experts", "moe_k", "moe_topk", "moe_top_k"), EXPERTS),
    **dict.fromkeys(("n_shared_experts", "first_k_dense_replace", "max_window_layers", "num_nextn_predict_layers",
                     "moe_num_shared_experts", "moe_layer_start_index", "mtp_num_hidden_layers", "num_dense_layers", "num_mtp_layers",
                     "num_shared_expert", "moe_layer_num_skipped", "num_shared_experts"),
                    LAYER_COUNT),
    "moe_layer_end_index": Kind((int,), -1, MAX_LAYERS, "an integer (-1: the last layer)"),
    "moe_layer_interval": STEP,
    "intermediate_multiple_size": Kind((int,), 1, 64, "an integer (the MLP's width over hidden_size)"),
    **dict.fromkeys(("decoder_sparse_step", "moe_layer_freq", "sliding_window_pattern", "no_rope_layer_interval",
                     "interleave_moe_layer_step", "full_attention_interval", "prefix_dense_sliding_window_pattern",
                     "global_attn_every_n_layers"), STEP),
    "num_ln_in_parallel_attn": Kind((int,), 1, 2, "1 or 2"),
    "hc_mult": Kind((int,), 1, 64, "an integer"),
    # DeepSeek-V4: the grouped output projection, its compressors' rates and the mHC normalisation's iterations
    "o_groups": HEADS, "o_lora_rank": WIDTH, "compress_rate_csa": TOKENS, "compress_rate_hca": TOKENS,
    "compress_rates": DICT, "compress_ratios": LIST, "hc_sinkhorn_iters": Kind((int,), 1, 10**4, "an integer"),  # HY-V4's hyper-connection streams (ResidualSpec.streams' bounds)
    **dict.fromkeys(("rope_theta", "rotary_emb_base", "rope_local_base_freq", "attn_logit_softcapping",
                     "final_logit_softcapping", "factor"), POSITIVE),
    **dict.fromkeys(("partial_rotary_factor", "rotary_pct"), FRACTION),
    **dict.fromkeys(("tie_word_embeddings", "attention_bias", "mlp_bias", "use_qk_norm", "use_sliding_window",
                     "use_parallel_residual", "new_decoder_architecture", "parallel_attn", "multi_query", "alibi",
                     "bias", "use_bias", "qk_layernorm", "use_qkv_bias", "enable_bias", "do_layer_norm_before",
                     "layer_norm_elementwise_affine", "_remove_final_layer_norm", "no_bias", "qk_ln",
                     "attention_out_bias", "lm_head_bias", "use_rotary_pos_emb", "use_cla", "conv_bias",
                     "block_auto_adjust_ff_dim", "block_use_swiglu", "use_pos_enc", "mamba_conv_bias",
                     "mamba_proj_bias", "qk_norm", "post_norm", "use_conv_bias", "rms_norm", "qkv_bias", "use_mixed_mlp_moe",
                     "attn_output_gate", "mtp_use_dedicated_embeddings", "mamba_rms_norm", "projectors_bias",
                     "use_parallel_block", "use_gated_activation", "mamba_use_mlp", "add_cross_attention", "is_moe"),
                    BOOL),
    **dict.fromkeys(("model_type", "hidden_act", "hidden_activation", "activation_function", "mlp_type", "norm_type",
                     "rope_type", "type", "quant_method", "attn_type", "mlp_hidden_act", "mamba_hidden_act", "activation",
                     "position_embedding_type", "qk_norm_type", "mamba_ssm_dtype",
                     "mamba_ssm_cache_dtype", "shared_expert_combination_strategy", "expert_selection_fn",
                     "order_of_interleaved_layers", "name", "afn"), STR),
    **dict.fromkeys(("layer_types", "mlp_only_layers", "no_rope_layers", "moe_layers", "full_attn_idxs",
                     "layers_block_type", "attn_layer_indices", "attn_type_list", "mlp_layer_types",
                     "attention_types", "attention_layers", "layer_rope_theta"), LIST),
    **dict.fromkeys(("rope_scaling", "rope_parameters", "quantization_config", "text_config", "vision_config",
                     "attn_config", "ffn_config", "ffn_act_fn"), DICT),
    # Gemma 4: per-layer embeddings (0: none), global layers' own geometry, K/V sharing, the MoE block
    "hidden_size_per_layer_input": Kind((int,), 0, MAX_WIDTH, "an integer (0: no per-layer embeddings)"),
    "vocab_size_per_layer_input": Kind((int,), 1, MAX_VOCAB, "an integer"),
    "global_head_dim": WIDTH,
    "num_global_key_value_heads": HEADS,
    "num_kv_shared_layers": LAYER_COUNT,
    **dict.fromkeys(("attention_k_eq_v", "use_double_wide_mlp", "enable_moe_block"), BOOL),
    "top_k_experts": EXPERTS,
    # MiMo-V2-Flash's remote-code keys (checked against what transformers builds)
    **dict.fromkeys(("swa_num_attention_heads", "swa_num_key_value_heads"), HEADS),
    **dict.fromkeys(("swa_head_dim", "swa_v_head_dim"), WIDTH),
    **dict.fromkeys(("add_swa_attention_sink_bias", "add_full_attention_sink_bias"), BOOL),
    "swa_rope_theta": POSITIVE,
    # dots3-note's keys: its sliding layers' MLA widths, the DSA switch, its gate and norms, the shared-expert width
    **dict.fromkeys(("swa_q_lora_rank", "swa_kv_lora_rank", "swa_qk_nope_head_dim", "swa_qk_rope_head_dim",
                     "shared_experts_intermediate_size"), WIDTH),
    **dict.fromkeys(("use_dsa", "apply_mla_qkv_lora_rescale", "k_rope_only_layernorm"), BOOL),
    **dict.fromkeys(("attention_gate_type", "swa_attention_gate_type"), STR),
    "hybrid_layer_pattern": LIST,
    # Kimi Linear: its KDA layers' shape (linear_attn_config's num_heads, head_dim, short_conv_kernel_size,
    # full_attn_layers and kda_layers, 1-indexed) and the names KimiLinearConfig writes for them
    "linear_attn_config": DICT,
    **dict.fromkeys(("linear_num_heads",), HEADS),
    **dict.fromkeys(("linear_head_dim",), WIDTH),
    **dict.fromkeys(("linear_conv_kernel_dim", "short_conv_kernel_size"), Kind((int,), 1, 64, "an integer")),
    **dict.fromkeys(("full_attn_layers", "kda_layers"), LIST),
    "num_experts_per_token": EXPERTS,
    "mla_use_nope": BOOL,
    # Laguna
    "gating": Kind((bool, str), what="true, false, \"per-head\" or \"per-element\""),
    "num_attention_heads_per_layer": LIST,
    # Gemma 3n
    "altup_num_inputs": Kind((int,), 1, 64, "an integer"),
    "laurel_rank": WIDTH,
    **dict.fromkeys(("use_attention_gate", "use_sandwich_norm"), BOOL),  # LFM3
    "layer_group_size": STEP,  # Ling's bailing_hybrid
    # MiniMax-M3's block indexer (and its checkpoint's sparse_attention_config names)
    "sparse_attention_config": DICT,
    **dict.fromkeys(("index_block_size",), TOKENS),
    **dict.fromkeys(("index_topk_blocks", "index_local_blocks"), Kind((int,), 0, 2**16, "an integer")),
    "dense_intermediate_size": FFN,
    "output_vocab_size": Kind((int,), 1, MAX_VOCAB, "an integer"),  # Apertus 1.5's pruned head
    "use_bidirectional_attention": Kind((bool, str), what="true, false or a mode (\"vision\", \"all\")"),
    "moe_apply_router_weight_on_input": BOOL,
    # xLSTM (NX-AI's xLSTM 7B; its original code's names beside xLSTMConfig's)
    "embedding_dim": WIDTH, "num_blocks": LAYERS,
    **dict.fromkeys(("qk_dim_factor", "v_dim_factor"), FRACTION),
    "ffn_proj_factor": Kind((int, float), 0, 64, "a number", above=True),
    **dict.fromkeys(("ffn_round_up_to_multiple_of", "mlstm_round_up_to_multiple_of"), Kind((int,), 1, 4096, "an integer")),
    **dict.fromkeys(("add_out_norm", "add_post_blocks_norm", "add_qk_norm", "add_post_norm"), BOOL),
    **dict.fromkeys(("weight_mode", "mode"), STR),
    "output_logit_soft_cap": POSITIVE,
    # Zamba2
    **dict.fromkeys(("adapter_rank", "attention_hidden_size", "attention_head_dim", "mamba_headdim"), WIDTH),
    **dict.fromkeys(("mamba_ngroups", "n_mamba_heads"), HEADS), "num_mem_blocks": LAYERS,
    **dict.fromkeys(("use_shared_attention_adapter", "use_mem_rope", "use_long_context", "add_bias_linear"), BOOL),
    "hidden_mamba_act": STR,  # Zamba
    "context_length": TOKENS, "rescale_every": LAYER_COUNT,  # RWKV
    # ModernBERT's decoder
    "local_attention": TOKENS, **dict.fromkeys(("global_rope_theta", "local_rope_theta"), POSITIVE),
    **dict.fromkeys(("norm_bias", "decoder_bias", "classifier_bias"), BOOL), "classifier_activation": STR,
    # ZAYA1
    **dict.fromkeys(("cca_time0", "cca_time1"), Kind((int,), 1, 64, "an integer")), "router_hidden_size": WIDTH,
    # Dory
    **dict.fromkeys(("n_input_layers", "n_output_layers"), LAYER_COUNT), "n_recurrent_layers": LAYERS,
    "n_recurrent_loops": Kind((int,), 1, 64, "an integer"), "recurrent_kv_cache_mode": STR, "ngpt_alpha_init": POSITIVE,
    # HRM-Text
    **dict.fromkeys(("H_cycles", "L_cycles"), Kind((int,), 1, 64, "an integer")), "num_layers_per_stack": LAYERS,
    # RecurrentGemma
    "lru_width": WIDTH, "attention_window_size": TOKENS, "conv1d_width": Kind((int,), 1, 64, "an integer"),
    "logits_soft_cap": POSITIVE, "block_types": LIST, "_block_types": LIST,
    # LongCat-Flash
    "expert_ffn_hidden_size": FFN,
    "zero_expert_num": Kind((int,), 0, MAX_EXPERTS, "an integer"),
    **dict.fromkeys(("zero_expert_type", "attention_method"), STR),
    **dict.fromkeys(("router_bias", "mla_scale_q_lora", "mla_scale_kv_lora"), BOOL),
    "linear_allow_neg_eigval": BOOL,
    # GLM-5: which layers run DeepSeek Sparse Attention's indexer ("full") or reuse the last one's ("shared")
    "indexer_types": LIST,
    "index_topk_pattern": Kind((str, list), what="a string of F and S, or a list"),
    "index_topk_freq": STEP,
    "index_skip_topk_offset": LAYER_COUNT,
    "per_layer_config": DICT,
    # Gemma 4's assistant (a drafter): the target's width, and the centroid head of its ordered embeddings
    # Inkling: relative logits, short convs, the released file's switches (checked against what transformers builds)
    "d_rel": WIDTH, "rel_extent": TOKENS, "dense_mlp_idx": LAYER_COUNT, "gate_activation": STR, "local_layer_ids": LIST,
    **dict.fromkeys(("conv_kernel_size", "sconv_kernel_size"), Kind((int,), 2, 64, "an integer")),
    **dict.fromkeys(("use_embed_norm", "use_sconv", "use_global_scale", "use_gate_bias", "norm_after_topk",
                     "shared_expert_sink", "q_bias", "o_bias"), BOOL),
    # Inkling 2: the head's rows, the attention residuals' blocks, its router's score function
    "unpadded_vocab_size": Kind((int,), 1, MAX_VOCAB, "an integer"), "n_layers_per_attn_res_block": STEP,
    "scoring_func": STR,
    # Inkling 2 Loop: its looped layers, flat or in loop_config (which wins, as Inkling2LoopTextConfig reads it)
    **dict.fromkeys(("loop_layer_index_start", "loop_layer_index_end", "core_start", "core_end"), LAYER_COUNT),
    **dict.fromkeys(("loop_num_passes", "num_passes"), STEP), **dict.fromkeys(("loop_gate_rank", "gate_rank"), WIDTH),
    "loop_config": DICT,
    "backbone_hidden_size": WIDTH, "use_ordered_embeddings": BOOL,
    **dict.fromkeys(("num_centroids", "centroid_intermediate_top_k"), Kind((int,), 1, MAX_VOCAB, "an integer")),
    "image_size": Kind((int,), 1, 2**16, "an integer"),
    "patch_size": Kind((int,), 1, 1024, "an integer"),
    "num_channels": Kind((int,), 1, 64, "an integer"),
    "vision_use_head": BOOL,
    "multi_modal_projector_bias": BOOL,
    **dict.fromkeys(("projector_input_dim", "projector_output_dim", "vision_output_dim"), WIDTH),
}
# Items of list-valued keys.
ITEMS = {"layer_types": Kind((str,), what="strings"),
         "compress_ratios": Kind((int,), 0, 2**16, "integers"),
         "mlp_only_layers": Kind((int,), 0, MAX_LAYERS - 1, "layer indices"),
         "local_layer_ids": Kind((int,), 0, MAX_LAYERS - 1, "layer indices"),
         "no_rope_layers": Kind((int,), 0, 1, "0 or 1"),
         "moe_layers": Kind((int,), 0, MAX_LAYERS - 1, "layer indices"),
         "full_attn_idxs": Kind((int,), 0, MAX_LAYERS - 1, "layer indices"),
         "attn_type_list": Kind((int,), 0, 1, "0 or 1"),
         "mlp_layer_types": Kind((str,), what="strings"),
         "indexer_types": Kind((str,), what="strings"),
         "hybrid_layer_pattern": Kind((int,), 0, 1, "0 (full) or 1 (sliding)"),
         "num_attention_heads_per_layer": Kind((int,), 1, MAX_HEADS, "head counts"),
         **dict.fromkeys(("full_attn_layers", "kda_layers"), Kind((int,), 1, MAX_LAYERS, "an integer (layers count from 1)")),
         "index_topk_pattern": Kind((str,), what="full or shared"),
         "attention_types": Kind((list,), what="[[kinds...], repeat] pairs"),  # GPT-Neo
         "attention_layers": Kind((str,), what="strings"),
         "layer_rope_theta": Kind((int, float), 0, MAX_POSITIVE, "RoPE bases (0: no RoPE)")}  # Granite SWA


def checked(path: str, field: str, key: str, value: Any) -> Any:
    """`value` of config key `key` (reported as `field`) when it has the key's type and range."""
    kind = KEYS[key]  # a key missing here is a bug: every key read must be typed
    _check(path, field, kind, value)
    if key in ITEMS:
        for i, item in enumerate(value):
            _check(path, f"{field}[{i}]", ITEMS[key], item)
    return value


def _check(path: str, field: str, kind: Kind, value: Any) -> None:
    # bool is an int in Python: a true/false where a number belongs is refused too.
    ok = isinstance(value, kind.types) and not (isinstance(value, bool) and bool not in kind.types)
    if ok and kind.lo is not None:
        ok = math.isfinite(value) and (value > kind.lo if kind.above else value >= kind.lo) and value <= kind.hi
    if not ok:
        raise InputError(path, field, f"{value!r} is not valid; expected {kind.describe()}")
