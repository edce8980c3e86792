"""An op's component (the breakdown by component in `size`, and each op's `component` in its JSON)
agrees with what its name says it is, for every op of every bundled spec, real config, residual
variant and phase: a norm is "norms" wherever it sits (but inside a linear mixer or a
hyper-connection, which own everything they hold), RoPE is "position", shared experts are the "ffn" and routed ones "experts".
The parameter split itself is pinned on Hugging Face's module tree (tests/spec/test_hf_oracle.py,
test_components_equal_hf_modules); this covers the ops without parameters that test cannot see."""

from __future__ import annotations

import glob

import pytest

from archcalc.ops.layers import model_ops
from archcalc.ops.mtp import mtp_ops
from archcalc.ops.vision import vision_ops
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import load_model
from archcalc.spec.model import ModelSpec
from tests.conftest import BUNDLED

# name prefix -> component, the longest prefix deciding
BY_PREFIX = {
    "embedding": "embedding", "embedding.project_in": "projection", "lm_head": "lm_head",
    "lm_head.project_out": "projection", "position": "position", "layers.attn": "attention",
    "layers.attn.rope": "position", "layers.linear": "linear", "layers.ffn": "ffn", "layers.moe.experts": "experts",
    "layers.moe.combine": "experts", "layers.moe.router": "router",
    "layers.moe.router_scale": "router", "layers.moe.router_norm": "router", "layers.moe.shared": "ffn",
    "layers.moe.shared_gate": "ffn", "layers.moe.bias": "ffn", "layers.attn.router": "router",  # (JetMoE)
    "layers.attn.norm_gate": "norms", "layers.ffn.norm_gate": "norms",  # A.X-K2's gated norms
    "layers.ffn.pk": "experts", "layers.ffn.pk.router": "router",  # Doge's product-key experts
    "layers.residual": "residual", "hc": "residual", "layers.hc": "residual",
    "layers.mhc": "residual", "attnres": "residual", "layers.attnres": "residual", "altup": "residual",
    "layers.altup": "residual", "layers.laurel": "residual", "loop": "residual",  # HRM-Text's passes
    # Zamba2's shared block: its attention and MLP (adapters in them), the concatenation, D -> D and the add
    "layers.shared": "residual", "layers.shared.attn": "attention", "layers.shared.attn.rope": "position",
    "layers.shared.ffn": "ffn",
    # a multimodal checkpoint's image encoder and projector (ops/vision.py), norms included
    "vision": "vision", "projector": "vision",
    # multi-token prediction (ops/mtp.py): its own embedding copy, head and 2D -> D projection
    "mtp.embedding": "embedding", "mtp.head": "lm_head", "mtp.eh_proj": "projection",
    # a drafter's way in from its target and back (lm_head.centroids: its head's cluster scores)
    "drafter": "projection",
    "layers.moe.global_scale": "router",  # Inkling's scalar on the routing weights
    "embedding.affine": "residual",  # ZAYA1's residual scaling of the embedded tokens
    "layers.attn.key_scale": "norms",  # ZAYA1's key scale, inside its qk norm (ZayaQKNorm: not attention in HF's tree)
}
# a linear mixer's gated norm, a hyper-connection's norm and Gemma 4's weightless norm on the router's input are theirs
OWN_NORMS = ("linear", "residual", "vision", "router")


def component_of(name: str) -> str:
    if name.startswith("mtp.") and name not in BY_PREFIX:  # an MTP module's layer is a decoder layer
        name = name.removeprefix("mtp.")
    prefix = max((p for p in BY_PREFIX if name == p or name.startswith(p + ".")), key=len, default=None)
    base = [part for part in name.split(".") if part not in ("global", "local", "chunked", "shared")]  # groups' suffixes
    if base[-1].endswith("norm") and BY_PREFIX.get(prefix) not in OWN_NORMS:
        return "norms"
    assert prefix, f"{name}: no component family"
    return BY_PREFIX[prefix]


def _variants() -> list[tuple[str, ModelSpec]]:
    out = [(f, load_model(f)[0]) for f in BUNDLED + sorted(glob.glob("tests/data/hf/*.json"))]
    base = load_model("debug")[0]
    for residual in ({"kind": "hyper", "streams": 4, "dynamic": True}, {"kind": "mhc", "streams": 4},
                     {"kind": "attnres", "blocks": 2}, {"kind": "altup", "streams": 4, "laurel_rank": 8}):
        spec = ModelSpec.model_validate({**base.model_dump(), "residual": residual})
        out.append((residual["kind"], spec))
    zamba2 = {"name": "zamba2", "d_model": 64, "n_layers": 4, "vocab_size": 100, "max_context": 64,
              "attention": {"n_heads": 4, "head_dim": 32, "layer_types": ["linear"] * 4},
              "linear": {"kind": "mamba2", "n_heads": 4, "head_dim": 32, "d_state": 16},
              "ffn": {"activation": "geglu", "none_layers": [0, 1, 2, 3]}, "position": {"kind": "rope"},
              "shared_block": {"layers": [1, 3], "blocks": 2, "d_ff": 96, "adapter_rank": 8}}
    out.append(("shared_block", ModelSpec.model_validate(zamba2)))
    return out


@pytest.mark.parametrize("workload", [Workload.forward(8, 2), Workload.decode(100, 3)], ids=["prefill", "decode"])
def test_every_op_is_in_the_component_its_name_says(workload):
    wrong = [(name, op.name, op.component) for name, spec in _variants() for op in model_ops(spec, workload)
             if op.component != component_of(op.name)]
    assert not wrong


def test_vision_and_mtp_ops_are_in_the_component_their_names_say():
    wrong = [(name, op.name, op.component) for name, spec in _variants() for op in vision_ops(spec) + mtp_ops(spec)
             if op.component != component_of(op.name)]
    assert not wrong
    assert sum(bool(vision_ops(spec)) for _, spec in _variants()) >= 3  # Gemma 3 and Llama 4 (+ fixtures)
    assert sum(bool(mtp_ops(spec)) for _, spec in _variants()) >= 3  # DeepSeek-V3, GLM-4.5, Qwen3-Next
