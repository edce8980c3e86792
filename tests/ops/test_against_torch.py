"""The analytic op list against a plain-torch model built from the same spec
(archcalc/measure/reference.py): parameters against numel() on the meta
device, FLOPs against torch.utils.flop_counter.FlopCounterMode."""

from __future__ import annotations

import random

import pytest
import torch  # noqa: E402  (a dev dependency: missing torch is an error, never a skip)
from conftest import BUNDLED, sized, spec_of  # noqa: E402

from archcalc.measure.reference import build_reference_model, count_flops  # noqa: E402
from archcalc.spec.model import ModelSpec  # noqa: E402


def numel(spec: ModelSpec) -> int:
    return sum(p.numel() for p in build_reference_model(spec, "meta").parameters())


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_parameter_count_equals_torch_numel(name):
    spec = spec_of(name)
    assert sized(spec).params.total == numel(spec)


def random_spec(seed: int) -> ModelSpec:
    """A small spec drawing every architecture option at random."""
    rng = random.Random(seed)
    pick = rng.choice
    n_layers = pick([1, 2, 3, 4])
    n_heads = pick([2, 4, 6])
    att: dict = {"n_heads": n_heads}
    mla = rng.random() < 0.2
    if mla:
        att.update(kind="mla", q_lora_rank=pick([None, 12]), kv_lora_rank=pick([8, 16]),
                   qk_nope_head_dim=pick([4, 8]), qk_rope_head_dim=pick([2, 4]), v_head_dim=pick([4, 6]))
        d_model = pick([16, 24])
    else:
        att["n_kv_heads"] = pick([k for k in (1, 2, 3, 6) if n_heads % k == 0])
        head_dim = pick([None, 8, 12])
        d_model = n_heads * pick([4, 8]) if head_dim is None else pick([16, 20, 32])
        if head_dim:
            att["head_dim"] = head_dim
        att["bias"] = rng.sample(["q", "k", "v", "o"], rng.randint(0, 4))
        att["qk_norm"] = pick(["none", "head", "full"])
    if rng.random() < 0.4:
        att["sliding_window"] = pick([2, 3, 5])
        att["layer_types"] = pick([None, "1:1", "2:1", [pick(["local", "global"]) for _ in range(n_layers)]])
    att["softcap"] = pick([None, 30.0])
    att["sinks"] = rng.random() < 0.2
    activation = pick(["relu", "gelu", "silu", "relu2", "reglu", "geglu", "swiglu"])
    ffn: dict = {"activation": activation, "bias": rng.random() < 0.3}
    if rng.random() < 0.5:
        ffn["d_ff"] = pick([24, 40])
    else:
        ffn.update(d_ff_ratio=pick([2.0, 8 / 3, 3.5]), d_ff_multiple_of=pick([1, 8]))
    if rng.random() < 0.35:
        d_shared = pick([0, 16])
        ffn["moe"] = {"n_experts": pick([2, 4]), "top_k": pick([1, 2]), "d_expert": pick([8, 12]),
                      "d_shared": d_shared, "shared_gate": bool(d_shared) and rng.random() < 0.5,
                      "router_bias": rng.random() < 0.5, "first_dense_layers": pick([0, 1])}
    residual = pick(["standard", "parallel", "hyper", "mhc", "attnres"])
    norm = {"kind": pick(["rmsnorm", "layernorm", "none"]), "final": rng.random() < 0.8,
            "placement": "pre" if residual == "parallel" else pick(["pre", "post", "both"])}
    if norm["kind"] == "layernorm":
        norm["bias"] = rng.random() < 0.5
    res: dict = {"kind": residual}
    if residual == "parallel":
        res["parallel_norms"] = pick([1, 2])
    elif residual in ("hyper", "mhc"):
        res.update(streams=pick([1, 2, 3]), dynamic=rng.random() < 0.5, sinkhorn_iters=pick([1, 3]))
    elif residual == "attnres":
        res["blocks"] = pick([None] + [b for b in (1, 2, 4) if (2 * n_layers) % b == 0])
    position = {"kind": pick(["rope", "rope", "learned", "sinusoidal", "alibi", "none"])}
    if position["kind"] == "rope" and not mla:
        position["rotary_fraction"] = pick([1.0, 0.5])
        if att.get("sliding_window") and rng.random() < 0.5:
            position["local_theta"] = 100.0
    return ModelSpec.model_validate({
        "name": f"random-{seed}", "d_model": d_model, "n_layers": n_layers, "vocab_size": pick([31, 64]),
        "max_context": 16, "tie_embeddings": rng.random() < 0.3, "final_softcap": pick([None, 20.0]),
        "attention": att, "ffn": ffn, "norm": norm, "position": position, "residual": res})


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
           for k in ("relu", "gelu", "silu", "relu2", "reglu", "geglu", "swiglu")},
        **{f"qk_norm {k}": any(s.attention.qk_norm == k for s in specs) for k in ("head", "full")},
        "sinks": any(s.attention.sinks for s in specs), "tied": any(s.tie_embeddings for s in specs),
    }
    assert all(seen.values()), [k for k, v in seen.items() if not v]


@pytest.mark.parametrize("name", ["llama-3.2-1b", "gemma-2-9b", "qwen3-30b-a3b", "deepseek-v2-lite", "gpt2"])
def test_real_architectures_flops_equal_torch_at_reduced_width(name):
    """The bundled layouts with their widths shrunk: same op structure, CPU-sized."""
    spec = spec_of(name)
    small = {"d_model": 32, "n_layers": min(spec.n_layers, 4), "vocab_size": 50}
    att = spec.attention.model_dump(exclude_defaults=True)
    if spec.attention.kind == "mla":
        att.update(n_heads=2, q_lora_rank=att.get("q_lora_rank") and 8, kv_lora_rank=8, qk_nope_head_dim=4,
                   qk_rope_head_dim=2, v_head_dim=4)
    else:
        att.update(n_heads=4, n_kv_heads=min(spec.n_kv_heads, 2), head_dim=8,
                   sliding_window=att.get("sliding_window") and 3)
        if isinstance(att.get("layer_types"), list):
            att["layer_types"] = att["layer_types"][:small["n_layers"]]
    ffn = spec.ffn.model_dump(exclude_defaults=True)
    ffn["d_ff"] = 24
    if "moe" in ffn:
        ffn["moe"].update(n_experts=4, top_k=2, d_expert=8, d_shared=8 if ffn["moe"].get("d_shared") else 0,
                          first_dense_layers=min(ffn["moe"].get("first_dense_layers", 0), 1))
    shrunk = spec.model_copy(update=small).model_validate(
        {**spec.model_dump(exclude_defaults=True), **small, "max_context": 16, "attention": att, "ffn": ffn})
    test_model = build_reference_model(shrunk, "cpu")
    tokens = torch.randint(0, 50, (BATCH, TOKENS))
    ours = sized(shrunk, context=TOKENS, batch=BATCH, convention="torch")
    assert ours.params.total == numel(shrunk)
    assert ours.flops.forward == count_flops(test_model, tokens)
