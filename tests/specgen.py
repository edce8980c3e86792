"""Spec generators the torch-pinned tests share: random specs over every
architecture option, and bundled specs shrunk to CPU size."""

from __future__ import annotations

import random

from archcalc.spec.model import ModelSpec


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
    top = {"name": f"random-{seed}", "d_model": d_model, "n_layers": n_layers, "vocab_size": pick([31, 64]),
           "max_context": 16, "tie_embeddings": rng.random() < 0.3, "final_softcap": pick([None, 20.0])}
    # Drawn after everything above, so that a seed keeps the spec it had before these options existed.
    top["lm_head_bias"] = rng.random() < 0.2
    if rng.random() < 0.2:
        top["embedding_dim"] = pick([8, 12])
    if position["kind"] == "learned" and rng.random() < 0.5:
        position["offset"] = 2
    if norm["kind"] != "none":
        norm["embedding"] = rng.random() < 0.2
        if not norm.get("bias") and rng.random() < 0.15:
            norm["weight"] = False
    if position["kind"] == "rope" and rng.random() < 0.3:
        att["nope_layers"] = sorted(rng.sample(range(n_layers), rng.randint(1, n_layers)))
    if rng.random() < 0.25:  # chunked layers (Llama 4), beside any local and global ones
        att["chunk_size"] = pick([2, 3])
        kinds = ["global", "chunked"] + (["local"] if att.get("sliding_window") else [])
        att["layer_types"] = [pick(kinds) for _ in range(n_layers)]
    if not mla and rng.random() < 0.15:
        att["qk_norm"] = "l2"
    if rng.random() < 0.1:  # BitNet's gated squared ReLU and its sub-norms
        ffn["activation"] = "relu2glu"
    if not mla and rng.random() < 0.15:
        att["sub_norm"] = True
    if "moe" not in ffn and rng.random() < 0.15:
        ffn["sub_norm"] = True
    if residual == "standard" and rng.random() < 0.4:  # Doge's learned skip scales
        res["scales"] = True
    if "moe" in ffn and rng.random() < 0.4:  # JetMoE's bias on the combined experts' output
        ffn["moe"]["output_bias"] = True
    return ModelSpec.model_validate({**top, "attention": att, "ffn": ffn, "norm": norm, "position": position,
                                     "residual": res})


def first_layers(spec: ModelSpec, n: int) -> ModelSpec:
    """The spec's first n layers, every per-layer list (layer types, NoPE and MoE layers) cut to match."""
    data = spec.model_dump(exclude_defaults=True)
    data["n_layers"] = min(spec.n_layers, n)
    att = data["attention"]
    if isinstance(att.get("layer_types"), list):
        att["layer_types"] = att["layer_types"][:n]
    if att.get("nope_layers"):
        att["nope_layers"] = [i for i in att["nope_layers"] if i < n]
    moe = data.get("ffn", {}).get("moe") or {}
    if moe.get("layers"):
        moe["layers"] = [i for i in moe["layers"] if i < n]
    return ModelSpec.model_validate(data)


def shrink(spec: ModelSpec) -> ModelSpec:
    """A bundled layout with its widths shrunk: same op structure, CPU-sized
    (D 32, at most 4 layers, 4 heads of 8, d_ff 24, 4 experts, V 50, context 16)."""
    spec = first_layers(spec, 4)
    small = {"d_model": 32, "vocab_size": 50}
    att = spec.attention.model_dump(exclude_defaults=True)
    if spec.attention.kind == "mla":
        att.update(n_heads=2, q_lora_rank=att.get("q_lora_rank") and 8, kv_lora_rank=8, qk_nope_head_dim=4,
                   qk_rope_head_dim=2, v_head_dim=4)
    else:
        rotated = int(8 * spec.position.rotary_fraction)  # head_dim 8 unless its rotary part would be odd (Phi-2's 0.4)
        att.update(n_heads=4, n_kv_heads=min(spec.n_kv_heads, 2), head_dim=8 if rotated and rotated % 2 == 0 else 10,
                   sliding_window=att.get("sliding_window") and 3, chunk_size=att.get("chunk_size") and 3)
    ffn = spec.ffn.model_dump(exclude_defaults=True)
    ffn["d_ff"] = 24
    if "moe" in ffn:
        ffn["moe"].update(n_experts=4, top_k=2, d_expert=8, d_shared=8 if ffn["moe"].get("d_shared") else 0,
                          first_dense_layers=min(ffn["moe"].get("first_dense_layers", 0), 1))
    return spec.model_copy(update=small).model_validate(
        {**spec.model_dump(exclude_defaults=True), **small, "max_context": 16, "attention": att, "ffn": ffn})

