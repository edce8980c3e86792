"""Smoke tests of the torch reference model (archcalc.measure.reference).

Parameter-count and FLOP equalities against the analytic model live elsewhere;
these only check that every spec option builds and runs.
"""

from __future__ import annotations

import pytest
import torch  # noqa: E402  (a dev dependency: missing torch is an error, never a skip)
from conftest import debug_spec  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from archcalc.measure.reference import build_reference_model, contract, count_flops  # noqa: E402

B, T = 2, 6
V = debug_spec().vocab_size


MLA = {
    "kind": "mla",
    "n_heads": 4,
    "n_kv_heads": None,  # drops the debug spec's GQA value
    "kv_lora_rank": 6,
    "qk_nope_head_dim": 4,
    "qk_rope_head_dim": 2,
    "v_head_dim": 3,
}

VARIANTS = {
    "standard": {},
    "parallel-1-norm": {"residual": {"kind": "parallel", "parallel_norms": 1}},
    "parallel-2-norms": {"residual": {"kind": "parallel", "parallel_norms": 2}},
    "hyper-static": {"residual": {"kind": "hyper", "streams": 3, "dynamic": False}},
    "hyper-dynamic": {"residual": {"kind": "hyper", "streams": 3}},
    "mhc": {"residual": {"kind": "mhc", "streams": 3, "sinkhorn_iters": 4}},
    "attnres-full": {"residual": {"kind": "attnres"}},
    "attnres-block": {"residual": {"kind": "attnres", "blocks": 2}},
    "mla": {"attention": MLA},
    "mla-q-lora": {"attention": {**MLA, "q_lora_rank": 8}},
    "moe": {"ffn": {"moe": {"n_experts": 4, "top_k": 2, "d_expert": 8, "d_shared": 8, "shared_gate": True}}},
    "moe-first-dense": {"ffn": {"moe": {"n_experts": 4, "top_k": 1, "d_expert": 8, "first_dense_layers": 1}}},
    "sliding-window": {"attention": {"sliding_window": 3, "layer_types": "1:1", "global_rope": False}},
    "sinks-softcaps": {"attention": {"sinks": True, "softcap": 20.0}, "final_softcap": 15.0},
    "learned-positions": {
        "position": {"kind": "learned"},
        "norm": {"kind": "layernorm", "bias": True},
        "ffn": {"activation": "gelu", "bias": True},
        "attention": {"bias": ["q", "k", "v", "o"]},
        "tie_embeddings": True,
    },
    "alibi-sandwich-qknorm": {
        "position": {"kind": "alibi"},
        "norm": {"placement": "both"},
        "attention": {"qk_norm": "head"},
    },
    "sinusoidal-post-fullqknorm": {
        "position": {"kind": "sinusoidal"},
        "norm": {"placement": "post"},
        "attention": {"qk_norm": "full"},
    },
    "rope-yarn-partial": {"position": {"rotary_fraction": 0.5, "scaling": {"type": "yarn", "factor": 4}}},
    "nope-relu2": {"position": {"kind": "none"}, "ffn": {"activation": "relu2"}},
}


def test_llama_like_builds_on_meta_and_counts_flops_on_cpu():
    spec = debug_spec()
    meta = build_reference_model(spec)
    assert all(p.device.type == "meta" for p in meta.parameters())
    assert sum(p.numel() for p in meta.parameters()) > 0

    torch.manual_seed(0)
    model = build_reference_model(spec, device="cpu")
    tokens = torch.randint(0, V, (B, T))
    forward = count_flops(model, tokens)
    training = count_flops(model, tokens, backward=True)
    assert forward > 0
    assert training > forward
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_runs_a_forward(variant):
    spec = debug_spec(**VARIANTS[variant])
    torch.manual_seed(0)
    model = build_reference_model(spec, device="cpu")
    logits = model(torch.randint(0, V, (B, T)))
    assert logits.shape == (B, T, V)
    assert torch.isfinite(logits).all()


def test_one_source_contraction_is_still_counted():
    # einsum would lower a size-1 contraction to a multiply that FlopCounterMode
    # counts as 0 (Full AttnRes's first unit has a single source).
    weights, values = torch.rand(B, T, 1), torch.rand(B, T, 1, 16)
    with FlopCounterMode(display=False) as counter:
        out = contract(weights, values)
    assert out.shape == (B, T, 16)
    assert counter.get_total_flops() == 2 * B * T * 1 * 16


DORY = r"nGPT scales \(Dory\)"
ZAYA = r"residual scaling or router MLP \(ZAYA1\)"


@pytest.mark.parametrize("change, message", [
    ({"norm": {"kind": "l2", "weight": False}}, DORY), ({"residual": {"kind": "interpolate"}}, DORY),
    ({"attention": {"query_scale": True}}, DORY), ({"attention": {"output_gate": True, "gate_scale": True}}, DORY),
    ({"ffn": {"scales": True}}, DORY), ({"logit_scale": True}, DORY),
    ({"attention": {"cca": {"depthwise": 2, "grouped": 2}}}, ZAYA), ({"residual": {"affine": True}}, ZAYA),
    ({"attention": {"qk_norm": "head", "key_scale": True}}, ZAYA),
    ({"ffn": {"moe": {"n_experts": 4, "top_k": 1, "d_expert": 8, "router_mlp": {"width": 8}}}}, ZAYA),
])
def test_the_reference_model_refuses_dory_s_and_zaya_s_parts(change, message):
    """nGPT's parts (Dory) and ZAYA1's are pinned by transformers' own modules, not by the reference model: it
    refuses them rather than build a model without them (an L2 norm is not nn.Identity), and train with it."""
    from archcalc.training.plan import unplanned

    spec = debug_spec(**change)
    with pytest.raises(ValueError, match=message):
        build_reference_model(spec)
    assert unplanned(spec).endswith("(Dory)" if message == DORY else "(ZAYA1)")
