"""The analytic op list against a plain-torch model built from the same spec
(archcalc/measure/reference.py): parameters against numel() on the meta
device, FLOPs against torch.utils.flop_counter.FlopCounterMode."""

from __future__ import annotations

import pytest
import torch  # noqa: E402  (a dev dependency: missing torch is an error, never a skip)
from conftest import REFERENCE_BUNDLED, sized, spec_of  # noqa: E402
from specgen import random_spec, shrink  # noqa: E402

from archcalc.measure.reference import build_reference_model, count_flops  # noqa: E402
from archcalc.spec.model import ModelSpec  # noqa: E402


def numel(spec: ModelSpec) -> int:
    return sum(p.numel() for p in build_reference_model(spec, "meta").parameters())


@pytest.mark.parametrize("name", REFERENCE_BUNDLED)
def test_bundled_parameter_count_equals_torch_numel(name):
    spec = spec_of(name)
    assert sized(spec).params.total == numel(spec)


SEEDS = range(60)
BATCH, TOKENS = 2, 7


@pytest.mark.parametrize("seed", SEEDS)
def test_random_spec_parameters_and_flops_equal_torch(seed):
    spec = random_spec(seed)
    ours = sized(spec, context=TOKENS, batch=BATCH, convention="torch")
    assert ours.params.total == numel(spec), spec
    torch.manual_seed(seed)
    model = build_reference_model(spec, "cpu")
    tokens = torch.randint(0, spec.vocab_size, (BATCH, TOKENS))
    forward = count_flops(model, tokens)
    assert ours.flops.forward == forward, spec
    # Backward: each matmul's two gradient matmuls -> training = 3 × forward.
    assert ours.flops.train == count_flops(model, tokens, backward=True)


def test_every_option_is_drawn():
    """The random specs above really cover the option space."""
    specs = [random_spec(s) for s in SEEDS]
    seen = {
        "mla": any(s.attention.kind == "mla" for s in specs),
        "moe": any(s.ffn.moe for s in specs),
        "window": any(s.attention.sliding_window for s in specs),
        **{f"residual {k}": any(s.residual.kind == k for s in specs)
           for k in ("standard", "parallel", "hyper", "mhc", "attnres")},
        **{f"norm {k}": any(s.norm.kind == k for s in specs) for k in ("rmsnorm", "layernorm", "none")},
        **{f"placement {k}": any(s.norm.placement == k for s in specs) for k in ("pre", "post", "both")},
        **{f"position {k}": any(s.position.kind == k for s in specs)
           for k in ("rope", "learned", "sinusoidal", "alibi", "none")},
        **{f"activation {k}": any(s.ffn.activation == k for s in specs)
           for k in ("relu", "gelu", "silu", "relu2", "reglu", "geglu", "swiglu", "relu2glu")},
        **{f"qk_norm {k}": any(s.attention.qk_norm == k for s in specs) for k in ("head", "full")},
        "sinks": any(s.attention.sinks for s in specs), "tied": any(s.tie_embeddings for s in specs),
        "attention sub_norm": any(s.attention.sub_norm for s in specs), "ffn sub_norm": any(s.ffn.sub_norm for s in specs),
        "lm_head bias": any(s.lm_head_bias for s in specs),
        "tied lm_head bias": any(s.lm_head_bias and s.tie_embeddings for s in specs),
        "embedding_dim": any(s.embedding_dim for s in specs),
        "position offset": any(s.position.offset for s in specs),
        "embedding norm": any(s.norm.embedding for s in specs),
        "norm without weight": any(not s.norm.weight for s in specs),
        "nope_layers": any(s.attention.nope_layers for s in specs),
        "chunked layers": any("chunked" in s.layer_attention for s in specs),
        "chunked beside local": any({"chunked", "local"} <= set(s.layer_attention) for s in specs),
        "qk_norm l2": any(s.attention.qk_norm == "l2" for s in specs),
    }
    assert all(seen.values()), [k for k, v in seen.items() if not v]


@pytest.mark.parametrize("name", ["llama-3.2-1b", "gemma-2-9b", "qwen3-30b-a3b", "deepseek-v2-lite", "gpt2"])
def test_real_architectures_flops_equal_torch_at_reduced_width(name):
    """The bundled layouts with their widths shrunk: same op structure, CPU-sized."""
    spec = spec_of(name)
    shrunk = shrink(spec)
    test_model = build_reference_model(shrunk, "cpu")
    tokens = torch.randint(0, 50, (BATCH, TOKENS))
    ours = sized(shrunk, context=TOKENS, batch=BATCH, convention="torch")
    assert ours.params.total == numel(shrunk)
    assert ours.flops.forward == count_flops(test_model, tokens)
