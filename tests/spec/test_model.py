"""The spec: validation and the values it resolves."""

from __future__ import annotations

import pytest
from conftest import debug_spec, sized, spec_of
from pydantic import ValidationError

from archcalc.spec.model import ModelSpec


def test_llama_d_ff_rounding_rule_reproduces_llama2():
    # Llama-2-7B's published intermediate_size, from int(8/3·4096) rounded up to 256.
    spec = debug_spec(d_model=4096, attention={"n_heads": 32},
                      ffn={"d_ff": None, "d_ff_ratio": 8 / 3, "d_ff_multiple_of": 256})
    assert spec.d_ff == 11008


def test_default_ratios():
    assert debug_spec(ffn={"activation": "gelu", "d_ff": None}).d_ff == 256  # 4·D
    assert debug_spec(ffn={"activation": "swiglu", "d_ff": None}).d_ff == 170  # int(8/3·64)


def test_layer_patterns_follow_the_hf_rules():
    # Gemma 3: layer i is global iff (i + 1) % 6 == 0 (transformers' sliding_window_pattern rule).
    spec = spec_of("gemma-3-27b")
    assert spec.layer_attention == tuple("global" if (i + 1) % 6 == 0 else "local" for i in range(62))
    # Gemma 2: even layers slide (is_sliding = not layer_idx % 2).
    assert spec_of("gemma-2-9b").layer_attention[:4] == ("local", "global", "local", "global")
    assert set(spec_of("mistral-7b-v0.1").layer_attention) == {"local"}
    assert set(spec_of("qwen2.5-7b").layer_attention) == {"global"}  # use_sliding_window: false


def test_moe_layer_placement():
    v3 = spec_of("deepseek-v3")
    assert v3.layer_ffn[:3] == ("dense",) * 3 and set(v3.layer_ffn[3:]) == {"moe"}


def test_head_dim_is_explicit_when_given():
    assert spec_of("qwen3-0.6b").qk_head_dim == 128  # d/H would be 64
    assert spec_of("gemma-7b").qk_head_dim == 256


# an MLA attention with a query latent (the debug spec's 64 wide, 2 layers)
MLA = {"kind": "mla", "n_heads": 4, "n_kv_heads": None, "q_lora_rank": 16, "kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4,
       "v_head_dim": 8}


@pytest.mark.parametrize("bad, fragment", [
    ({"attention": {"n_heads": 6, "n_kv_heads": 4}}, "divisible by n_kv_heads"),
    ({"attention": {"n_heads": 5, "n_kv_heads": None}}, "not divisible by n_heads"),
    ({"attention": {"n_heads": 4, "kind": "mla"}}, "kind mla needs"),
    ({"attention": {"n_heads": 4, "layer_types": "x"}}, "use 'L:G'"),
    ({"attention": {"n_heads": 4, "layer_types": "1:1"}}, "sliding_window is not set"),
    ({"ffn": {"d_ff": 8, "d_ff_ratio": 2}}, "not both"),
    ({"ffn": {"moe": {"n_experts": 2, "top_k": 3, "d_expert": 8}}}, "exceeds n_experts"),
    ({"norm": {"kind": "rmsnorm", "bias": True}}, "only applies to layernorm"),
    ({"position": {"kind": "alibi", "rotary_fraction": 0.5}}, "only apply to rope"),
    ({"residual": {"kind": "parallel"}, "norm": {"placement": "post"}}, "placement pre"),
    ({"residual": {"kind": "attnres", "blocks": 3}}, "must divide"),
    ({"n_layers": 0}, "greater than or equal to 1"),
    ({"bogus": 1}, "Extra inputs"),
    # Dory's parts: an L2 norm has no weight; s_gate is inside a gate; s_u, s_v scale a gated MLP's two halves
    ({"norm": {"kind": "l2"}}, "kind l2 .* needs weight: false"),
    ({"attention": {"gate_scale": True}}, "it needs output_gate"),
    ({"attention": {"output_gate": True, "gate_scale": True, "gate_bias": True}}, "and no gate_bias"),
    ({"ffn": {"activation": "gelu", "scales": True}}, "dense gated MLP"),
    # a recurrent loop: 2 stored layers, a core of 1 run 3 times between a prelude of 1 (5 run, not 2)
    ({"loop": {"kind": "recurrent", "stored_layers": 2, "passes": 3, "prelude": 1}},
     "must be loop.prelude \\+ loop.passes × core \\+ loop.coda"),
    ({"loop": {"kind": "recurrent", "stored_layers": 2, "passes": 3, "prelude": 1, "coda": 1}}, "must leave a core"),
    ({"loop": {"stored_layers": 1, "passes": 2, "coda": 1}}, "go with loop kind recurrent"),
    ({"n_layers": 4, "loop": {"kind": "recurrent", "stored_layers": 3, "passes": 2, "prelude": 1, "coda": 1},
      "attention": {"sliding_window": 4, "layer_types": ["local", "global", "local", "local"]}},
     "must repeat them"),
    ({"n_layers": 4, "loop": {"kind": "recurrent", "stored_layers": 3, "passes": 2, "prelude": 1, "coda": 1},
      "norm": {"kind": "none"}}, "kind none has none"),
    # ZAYA1's parts: CCA on plain GQA projections; a key scale on normed keys; a router MLP alone, in every layer
    ({"attention": {"cca": {"depthwise": 2, "grouped": 2}, "output_gate": True}}, "attention.cca \\(ZAYA1\\)"),
    ({"attention": {"cca": {"depthwise": 0, "grouped": 2}}}, "greater than or equal to 1"),
    ({"attention": {"key_scale": True}}, "key_scale scales the normed keys"),
    ({"ffn": {"moe": {"n_experts": 4, "top_k": 1, "d_expert": 8, "router_mlp": {"width": 8}, "router_bias": True}}},
     "router_mlp is the whole router"),
    ({"ffn": {"moe": {"n_experts": 4, "top_k": 1, "d_expert": 8, "router_mlp": {"width": 8}, "first_dense_layers": 1}}},
     "an MoE block in every layer"),
    ({"residual": {"affine": True, "scales": True}}, "affine goes with residual kind standard"),
    # dots3-note's parts: the sliding layers' own MLA widths, the rope key's norm, an indexer beside sliding layers
    ({"attention": {"n_heads": 4, "sliding_window": 8, "local_mla": {"n_heads": 2}}}, "local_mla .* goes with kind mla"),
    ({"attention": {**MLA, "local_mla": {"n_heads": 2}}}, "local_mla .* goes with kind mla, a sliding_window"),
    ({"attention": {**MLA, "sliding_window": 8, "layer_types": ["local", "global"], "sinks": True,
                    "local_mla": {"n_heads": 2}}}, "q_lora_concat, sinks or o_bias_layers"),
    ({"attention": {"n_heads": 4, "rope_key_norm": True}}, "rope_key_norm .* needs kind mla"),
    ({"attention": {**MLA, "sliding_window": 8, "indexer": {"n_heads": 2, "head_dim": 8, "topk": 4}}},
     "with a sliding window on every layer, is not supported"),
    ({"attention": {**MLA, "sliding_window": 8, "layer_types": ["global", "local"],
                    "indexer": {"n_heads": 2, "head_dim": 8, "topk": 4, "shared_layers": [1]}}},
     "shared_layers beside sliding layers"),
    # Inkling 2's parts: clipped q/k heads, sinks from the input, per-token conv taps, its attention residuals
    ({"attention": {**MLA, "qk_norm": "clip"}}, "qk_norm does not apply to MLA"),
    ({"attention": {"n_heads": 4, "sliding_window": 8, "layer_types": ["local", "global"], "local_heads": 2,
                    "qk_norm": "clip"}}, "qk_norm clip goes with kind mha, layers of one shape"),
    ({"attention": {"n_heads": 4, "v_norm": True, "qk_norm": "l2"}}, "v_norm goes with qk_norm head .* or clip"),
    ({"attention": {"n_heads": 4, "sinks": True, "sink_proj": True}}, "sink_proj .* no learned sinks"),
    ({"attention": {**MLA, "sink_proj": True}}, "sink_proj .* goes with kind mha"),
    ({"attention": {"n_heads": 4, "dynamic_kv_conv": True}}, "dynamic_kv_conv .* needs kv_conv"),
    ({"attention": {"n_heads": 4, "sliding_window": 8, "layer_types": ["local", "global"], "local_heads": 2,
                    "relative": {"rank": 2, "extent": 4, "scale": True}}}, "relative.scale goes with layers of one"),
    ({"residual": {"kind": "attnres", "attnres_form": "inkling2"}}, "attnres_form inkling2 goes with .* its blocks"),
    ({"residual": {"kind": "standard", "blocks": 1, "attnres_form": "inkling2"}}, "goes with residual kind attnres"),
    ({"residual": {"kind": "attnres", "blocks": 4, "attnres_form": "inkling2"}}, "must divide n_layers \\(2, of the stored"),
    ({"residual": {"kind": "hyper", "output_conv": 4}}, "output_conv goes with residual kind standard or attnres"),
    # Inkling 2 Loop's loop: messages between passes need its gates' rank, per-pass caches, its attention residuals
    ({"n_layers": 4, "loop": {"kind": "message", "stored_layers": 3, "passes": 2, "prelude": 1, "coda": 1}},
     "needs a gate_rank"),
    ({"n_layers": 4, "loop": {"kind": "recurrent", "stored_layers": 3, "passes": 2, "prelude": 1, "coda": 1,
                              "gate_rank": 4}}, "only it has one"),
    ({"n_layers": 4, "loop": {"kind": "message", "stored_layers": 3, "passes": 2, "prelude": 1, "coda": 1,
                              "gate_rank": 4, "cache": "last_pass"}}, "and cache per_pass"),
    ({"n_layers": 4, "loop": {"kind": "message", "stored_layers": 3, "passes": 2, "prelude": 1, "coda": 1,
                              "gate_rank": 4}}, "goes with residual attnres_form inkling2"),
    ({"n_layers": 6, "residual": {"kind": "attnres", "blocks": 2, "attnres_form": "inkling2"},
      "loop": {"kind": "message", "stored_layers": 4, "passes": 2, "prelude": 1, "coda": 1, "gate_rank": 4}},
     "a prelude and a core of whole blocks"),
])
def test_invalid_specs_are_rejected(bad, fragment):
    with pytest.raises(ValidationError, match=fragment):
        debug_spec(**bad)


def test_each_choice_changes_only_what_it_changes():
    spec = debug_spec()
    base = sized(spec, context=16)
    # A bigger KV-head count changes parameters and KV, not the attention-core FLOPs.
    mha = sized(debug_spec(attention={"n_kv_heads": 4}), context=16)
    assert mha.params.total > base.params.total and mha.kv.bytes_per_token == 2 * base.kv.bytes_per_token
    assert mha.flops.attention == base.flops.attention
    # Tying removes V·D parameters and nothing from the FLOPs.
    tied = sized(debug_spec(tie_embeddings=True), context=16)
    assert base.params.total - tied.params.total == spec.vocab_size * spec.d_model
    assert tied.flops.forward == base.flops.forward
    # A sliding window changes attention FLOPs and the capped KV only.
    local = sized(debug_spec(attention={"sliding_window": 4}), context=16)
    assert local.params.total == base.params.total and local.kv.bytes_per_token == base.kv.bytes_per_token
    assert local.flops.attention < base.flops.attention and local.kv.bytes < base.kv.bytes
    # RoPE scaling changes nothing but the context limit.
    scaled = sized(debug_spec(position={"scaling": {"type": "yarn", "factor": 4, "original_context": 16}}), context=16)
    assert scaled.params.total == base.params.total and scaled.flops.forward == base.flops.forward


def test_max_context_follows_the_extension_when_left_out():
    spec = debug_spec(max_context=None, position={"scaling": {"type": "yarn", "factor": 40, "original_context": 4096}})
    assert spec.max_context == 163_840  # DeepSeek-V3's 4096 × 40
    with pytest.raises(ValidationError, match="max_context"):
        debug_spec(max_context=None, position={"scaling": {"type": "llama3", "factor": 8, "original_context": 8192}})


def test_a_ratio_that_rounds_d_ff_to_zero_is_an_error():
    # int(0.5 × 1) = 0 under Llama's rounding: a zero-width FFN (found by the property tests).
    with pytest.raises(ValidationError, match="rounds down to d_ff 0"):
        ModelSpec.model_validate(dict(name="x", d_model=1, n_layers=1, vocab_size=2, max_context=8,
                                      attention=dict(n_heads=1), position=dict(kind="none"),
                                      ffn=dict(d_ff_ratio=0.5)))
