"""Properties over the whole spec space, drawn by hypothesis.

`model_specs()` draws valid ModelSpecs that use every option of the spec: the
attention kinds (MHA, GQA, MQA, MLA with and without a query latent), explicit
head dims, biases, QK-norm, soft-capping, sinks, sliding windows (all layers,
"L:G" ratios, per-layer lists) and global NoPE layers, the seven activations,
d_ff given, by ratio with rounding or by default, FFN biases, MoE (routed,
shared, gated shared, leading dense layers, every n-th layer, explicit
layers, router bias), the norms and their placements, the position kinds
(RoPE plain, partial, scaled, with a local base; learned, sinusoidal, ALiBi,
none), the residual kinds (standard, parallel with one or two norms, static
and dynamic hyper-connections, mHC, full and block AttnRes), tying and the
logit soft-cap.  Each option is a categorical "dimension"; `pinned` fixes
some of them and the strategy draws the rest, always building a valid spec
(no filtering).

PAIRS: `COVERING_ROWS` is a pairwise covering array of those dimensions
(every two values of two dimensions that ModelSpec allows together, e.g.
MLA × a window list, MoE × a parallel block, hyper-connections × post-norm,
AttnRes × MoE with dense layers, appear together in at least one row), and
the reference model is checked on each row.

The properties hold by physics or by definition, never by re-deriving our
formulas: counts are finite non-negative integers, active ≤ total, more
context / batch / layers / vocabulary never costs less, a cached token's
bytes do not depend on the context, the conventions are ordered, the
decode-time closed form equals the step-by-step sum, and the plain-torch
reference model (archcalc.measure.reference) has exactly our parameter count
(numel on meta) and FLOPs (FlopCounterMode, "torch" convention).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace

import pytest
import torch
from hypothesis import given, note, settings
from hypothesis import strategies as st

from archcalc.cost.roofline import decode_time, rate_sets, step
from archcalc.cost.totals import size
from archcalc.hardware.profile import load_hardware
from archcalc.measure.reference import build_reference_model, count_flops
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec

# ---- the option space ------------------------------------------------------------------------

DIMS: dict[str, tuple] = {
    "attention": ("mha", "gqa", "mqa", "mla", "mla_q"),
    "head_dim": ("derived", "explicit"),
    "attn_bias": ("none", "some", "all"),
    "qk_norm": ("none", "head", "full", "l2"),
    "output_gate": (False, True),
    "attn_softcap": (False, True),
    "sinks": (False, True),
    "window": ("none", "all", "ratio", "list", "chunked"),
    "nope": (False, True),
    "activation": ("relu", "gelu", "silu", "relu2", "reglu", "geglu", "swiglu", "relu2glu"),
    "d_ff": ("explicit", "ratio", "default"),
    "ffn_bias": (False, True),
    "moe": ("none", "routed", "shared", "shared_gate", "first_dense", "every", "layers"),
    "norm": ("rmsnorm", "layernorm", "layernorm_bias", "none", "weightless"),
    "embed_norm": (False, True),
    "placement": ("pre", "post", "both"),
    "final_norm": (True, False),
    "position": ("rope", "rope_partial", "rope_scaled", "rope_local", "learned", "sinusoidal", "alibi", "none"),
    "residual": ("standard", "parallel_1", "parallel_2", "hyper_static", "hyper_dynamic", "mhc", "attnres_full",
                 "attnres_block"),
    "tie": (False, True),
    "lm_head_bias": (False, True),
    "embedding": ("plain", "projected"),
    "final_softcap": (False, True),
}
MLA_KINDS = ("mla", "mla_q")
MOE_WITH_DENSE = ("first_dense", "every", "layers")  # these leave some dense layers: d_ff must be given
ROPE_KINDS = ("rope", "rope_partial", "rope_scaled", "rope_local")
QKVO = ("q", "k", "v", "o")


def compatible(a: str, va, b: str, vb) -> bool:
    """Whether two option values may share a spec (ModelSpec's own rules)."""
    pair = {a: va, b: vb}
    if pair.get("attention") in MLA_KINDS and (
            pair.get("head_dim") == "explicit" or pair.get("attn_bias", "none") != "none"
            or pair.get("qk_norm", "none") != "none" or pair.get("output_gate")):
        return False
    if pair.get("nope") and "position" in pair and pair["position"] not in ROPE_KINDS:
        return False
    if pair.get("embed_norm") and pair.get("norm") == "none":
        return False
    if str(pair.get("residual", "")).startswith("parallel") and pair.get("placement", "pre") != "pre":
        return False
    return not (pair.get("moe") in MOE_WITH_DENSE and pair.get("d_ff") == "default")


def skeleton_of(spec: ModelSpec) -> dict:
    """The option values a spec exhibits (the inverse of the strategy's choices)."""
    a, f, n, p, r, moe = spec.attention, spec.ffn, spec.norm, spec.position, spec.residual, spec.ffn.moe
    if a.kind == "mla":
        attention = "mla_q" if a.q_lora_rank else "mla"
    else:
        K = spec.n_kv_heads
        attention = "mha" if K == a.n_heads else "mqa" if K == 1 else "gqa"
    if moe is None:
        moe_kind = "none"
    elif moe.layers is not None:
        moe_kind = "layers"
    elif moe.first_dense_layers:
        moe_kind = "first_dense"
    elif moe.every > 1:
        moe_kind = "every"
    else:
        moe_kind = "shared_gate" if moe.shared_gate else "shared" if moe.d_shared else "routed"
    if p.kind != "rope":
        position = p.kind
    else:
        position = ("rope_scaled" if p.scaling else "rope_local" if p.local_theta
                    else "rope_partial" if p.rotary_fraction < 1 else "rope")
    residual = {"standard": "standard", "mhc": "mhc"}.get(r.kind) or {
        "parallel": f"parallel_{r.parallel_norms}",
        "hyper": "hyper_dynamic" if r.dynamic else "hyper_static",
        "attnres": "attnres_full" if r.blocks is None else "attnres_block",
    }[r.kind]
    window = ("chunked" if a.chunk_size is not None else "none" if a.sliding_window is None
              else "all" if a.layer_types is None else "ratio" if isinstance(a.layer_types, str) else "list")
    return {
        "attention": attention,
        "head_dim": "explicit" if a.head_dim is not None else "derived",
        "attn_bias": "none" if not a.bias else "all" if set(a.bias) == set(QKVO) else "some",
        "qk_norm": a.qk_norm,
        "output_gate": a.output_gate,
        "attn_softcap": a.softcap is not None,
        "sinks": a.sinks,
        "window": window,
        "nope": bool(a.nope_layers),
        "activation": f.activation,
        "d_ff": "explicit" if f.d_ff is not None else "ratio" if f.d_ff_ratio is not None else "default",
        "ffn_bias": f.bias,
        "moe": moe_kind,
        "norm": "weightless" if not n.weight else "layernorm_bias" if n.bias else n.kind,
        "embed_norm": n.embedding,
        "placement": n.placement,
        "final_norm": n.final,
        "position": position,
        "residual": residual,
        "tie": spec.tie_embeddings,
        "lm_head_bias": spec.lm_head_bias,
        "embedding": "projected" if spec.embedding_dim is not None else "plain",
        "final_softcap": spec.final_softcap is not None,
    }


@st.composite
def model_specs(draw, max_layers: int = 4, **pinned) -> ModelSpec:
    """A valid ModelSpec with tiny dims; `pinned` fixes option values (DIMS),
    the others are drawn among those compatible with what is already chosen."""
    sk: dict = {}
    for dim, values in DIMS.items():
        options = [v for v in values if all(compatible(dim, v, d, w) for d, w in sk.items())]
        if dim in pinned:
            assert pinned[dim] in options, (dim, pinned[dim], sk)
            sk[dim] = pinned[dim]
        else:
            sk[dim] = draw(st.sampled_from(options))
    L = draw(st.integers(1, max_layers))
    position = sk["position"]
    rope = position in ROPE_KINDS

    # position (rotary_fraction decides which head dims are valid)
    pos: dict = {"kind": "rope" if rope else position}
    if rope:
        pos["theta"] = draw(st.sampled_from([10000.0, 500000.0]))
        partial = position == "rope_partial" or (position != "rope" and draw(st.booleans()))
        if partial:
            pos["rotary_fraction"] = draw(st.sampled_from([0.25, 0.5, 0.75]))
        if position == "rope_local" or (position == "rope_scaled" and draw(st.booleans())):
            pos["local_theta"] = draw(st.sampled_from([100.0, 10000.0]))
    elif position == "sinusoidal":
        pos["theta"] = draw(st.sampled_from([10000.0, 100.0]))
    max_context: int | None = draw(st.integers(8, 64))
    if position == "rope_scaled":
        kind = draw(st.sampled_from(["linear", "ntk", "dynamic", "yarn", "llama3", "longrope"]))
        scaling = {"type": kind, "factor": draw(st.sampled_from([1.0, 2.0, 4.0, 8.0, 40.0]))}
        if draw(st.booleans()) or kind not in ("llama3", "longrope"):
            scaling["original_context"] = draw(st.integers(4, 32))
        if kind not in ("llama3", "longrope") and draw(st.booleans()):
            max_context = None  # implied: original_context × factor
        pos["scaling"] = scaling

    # attention
    att: dict = {}
    if sk["attention"] in MLA_KINDS:
        att.update(kind="mla", n_heads=draw(st.integers(1, 4)), kv_lora_rank=draw(st.integers(1, 12)),
                   qk_nope_head_dim=draw(st.integers(1, 6)), v_head_dim=draw(st.integers(1, 6)),
                   qk_rope_head_dim=draw(st.sampled_from([2, 4]) if rope else st.integers(1, 5)))
        if sk["attention"] == "mla_q":
            att["q_lora_rank"] = draw(st.integers(1, 12))
        d_model = draw(st.integers(2, 24))
    else:
        if sk["attention"] == "mha":
            H = draw(st.integers(1, 4))
            if draw(st.booleans()):
                att["n_kv_heads"] = H
        elif sk["attention"] == "gqa":
            H, att["n_kv_heads"] = draw(st.sampled_from([(4, 2), (6, 2), (6, 3), (8, 4)]))
        else:
            H, att["n_kv_heads"] = draw(st.integers(2, 4)), 1
        att["n_heads"] = H
        fraction = pos.get("rotary_fraction", 1.0)
        head_dims = [d for d in range(1, 13) if not rope or (int(d * fraction) % 2 == 0 and int(d * fraction) > 0)]
        dk = draw(st.sampled_from(head_dims))
        if sk["head_dim"] == "explicit":
            att["head_dim"] = dk
            d_model = draw(st.integers(2, 24))
        else:
            d_model = H * dk
        if sk["attn_bias"] == "some":
            att["bias"] = draw(st.lists(st.sampled_from(QKVO), min_size=1, max_size=3, unique=True))
        elif sk["attn_bias"] == "all":
            att["bias"] = list(QKVO)
        att["qk_norm"] = sk["qk_norm"]
        att["output_gate"] = sk["output_gate"]
        att["gate_bias"] = sk["output_gate"] and draw(st.booleans())
        if "o" not in att.get("bias", ()) and draw(st.booleans()):  # GPT-NeoX-Japanese: an o bias on some layers
            att["o_bias_layers"] = draw(st.lists(st.integers(0, L - 1), min_size=1, max_size=L, unique=True))
    if sk["attn_softcap"]:
        att["softcap"] = draw(st.sampled_from([5.0, 50.0]))
    att["sinks"] = sk["sinks"]
    if sk["window"] == "none":
        att["layer_types"] = draw(st.sampled_from([None, "0:1", ["global"] * L]))  # all global: no window needed
    elif sk["window"] == "chunked":  # chunked layers (Llama 4), maybe beside sliding and global ones
        att["chunk_size"] = draw(st.integers(1, 10))
        kinds = ["chunked", "global"]
        if draw(st.booleans()):
            att["sliding_window"] = draw(st.integers(1, 10))
            kinds.append("local")
        att["layer_types"] = draw(st.lists(st.sampled_from(kinds), min_size=L, max_size=L))
        att["global_rope"] = draw(st.booleans())
    else:
        att["sliding_window"] = draw(st.integers(1, 10))
        if sk["window"] == "ratio":
            n_local, n_global = draw(st.tuples(st.integers(0, 3), st.integers(0, 3)).filter(lambda t: sum(t)))
            att["layer_types"] = f"{n_local}:{n_global}"
        elif sk["window"] == "list":
            att["layer_types"] = draw(st.lists(st.sampled_from(["local", "global"]), min_size=L, max_size=L))
        att["global_rope"] = draw(st.booleans())

    if sk["nope"]:
        att["nope_layers"] = draw(st.lists(st.integers(0, L - 1), min_size=1, max_size=L, unique=True))

    # feed-forward
    ffn: dict = {"activation": sk["activation"], "bias": sk["ffn_bias"]}
    if sk["d_ff"] == "explicit":
        ffn["d_ff"] = draw(st.integers(1, 40))
    elif sk["d_ff"] == "ratio":
        # int(ratio·D) ≥ 1: ModelSpec accepts a ratio that resolves to d_ff 0 (reported, not drawn)
        ffn["d_ff_ratio"] = draw(st.sampled_from([r for r in (0.5, 1.0, 2.0, 8 / 3, 3.5, 4.0) if int(r * d_model)]))
        ffn["d_ff_multiple_of"] = draw(st.sampled_from([1, 2, 8, 16]))
    moe_kind = sk["moe"]
    if moe_kind != "none":
        E = draw(st.integers(1, 6))
        moe: dict = {"n_experts": E, "top_k": draw(st.integers(1, E)), "d_expert": draw(st.integers(1, 16)),
                     "router_bias": draw(st.booleans())}
        shared = moe_kind in ("shared", "shared_gate") or (moe_kind in MOE_WITH_DENSE and draw(st.booleans()))
        if shared:
            moe["d_shared"] = draw(st.integers(1, 16))
            moe["shared_gate"] = moe_kind == "shared_gate" or (moe_kind in MOE_WITH_DENSE and draw(st.booleans()))
        if moe_kind in ("first_dense", "layers"):
            moe["first_dense_layers"] = draw(st.integers(1 if moe_kind == "first_dense" else 0, L + 1))
        if moe_kind in ("every", "first_dense", "layers"):
            moe["every"] = draw(st.integers(2 if moe_kind == "every" else 1, 3))
        moe["output_bias"] = draw(st.booleans())  # JetMoE: one bias on the combined output
        if moe_kind == "layers":  # a strict subset (possibly empty): some layers stay dense
            moe["layers"] = draw(st.lists(st.integers(0, L - 1), max_size=L - 1, unique=True))
        ffn["moe"] = moe

    # norms and residual stream
    norm = {"kind": "layernorm" if sk["norm"] == "layernorm_bias" else sk["norm"],
            "placement": sk["placement"], "final": sk["final_norm"], "embedding": sk["embed_norm"]}
    if sk["norm"] == "layernorm_bias":
        norm["bias"] = True
    if sk["norm"] == "weightless":
        norm.update(kind=draw(st.sampled_from(["rmsnorm", "layernorm"])), weight=False)
    kind = sk["residual"]
    residual: dict = {"kind": kind.split("_")[0]}
    if kind.startswith("parallel"):
        residual["parallel_norms"] = int(kind[-1])
    elif kind.startswith("hyper"):
        residual.update(streams=draw(st.integers(1, 4)), dynamic=kind == "hyper_dynamic")
    elif kind == "mhc":
        residual.update(streams=draw(st.integers(1, 3)), sinkhorn_iters=draw(st.integers(1, 4)))
    elif kind == "attnres_block":
        residual["blocks"] = draw(st.sampled_from([b for b in range(1, 2 * L + 1) if (2 * L) % b == 0]))
    elif kind == "standard":  # Doge: a learned scale on each skip path
        residual["scales"] = draw(st.booleans())

    data = {
        "name": "drawn", "d_model": d_model, "n_layers": L, "vocab_size": draw(st.integers(2, 48)),
        "tie_embeddings": sk["tie"], "lm_head_bias": sk["lm_head_bias"], "attention": att, "ffn": ffn, "norm": norm,
        "position": pos, "residual": residual,
    }
    if sk["embedding"] == "projected":
        data["embedding_dim"] = draw(st.integers(1, 24))
    if position == "learned" and draw(st.booleans()):
        pos["offset"] = 2  # OPT
    if max_context is not None:
        data["max_context"] = max_context
    if sk["final_softcap"]:
        data["final_softcap"] = draw(st.sampled_from([15.0, 30.0]))
    spec = ModelSpec.model_validate(data)
    note(f"spec: {spec.model_dump(exclude_defaults=True)}")
    return spec


@st.composite
def workloads(draw, max_context: int = 64) -> Workload:
    context = draw(st.integers(1, max_context))
    return Workload(batch=draw(st.integers(1, 4)), new_tokens=draw(st.integers(1, context)), context=context,
                    kv_dtype=draw(st.sampled_from(["bf16", "fp32", "fp8"])),
                    logits=draw(st.sampled_from(["all", "last"])))


conventions = st.sampled_from(sorted(CONVENTIONS))


def sized(spec: ModelSpec, wl: Workload, convention: str = "causal"):
    return size(spec, wl, CONVENTIONS[convention])


def reshaped(spec: ModelSpec, **changes) -> ModelSpec:
    """The spec with top-level fields changed, re-validated.  More layers
    extend a per-layer layer_types list by repeating it."""
    data = spec.model_dump(exclude_defaults=True)
    data.update(changes)
    types = spec.attention.layer_types
    if "n_layers" in changes and isinstance(types, list):
        data["attention"]["layer_types"] = [types[i % len(types)] for i in range(changes["n_layers"])]
    return ModelSpec.model_validate(data)


# ---- pairwise covering array -----------------------------------------------------------------


def _valid_pairs() -> set[tuple]:
    names = list(DIMS)
    return {(a, va, b, vb) for a, b in itertools.combinations(names, 2)
            for va in DIMS[a] for vb in DIMS[b] if compatible(a, va, b, vb)}


def _pairs_of(row: dict) -> set[tuple]:
    names = list(DIMS)
    return {(a, row[a], b, row[b]) for a, b in itertools.combinations(names, 2)}


def covering_rows() -> list[dict]:
    """A deterministic greedy pairwise covering array of DIMS under `compatible`:
    each row starts from the first uncovered pair and gives every other
    dimension the first value that covers the most uncovered pairs."""
    names = list(DIMS)
    rank = {d: i for i, d in enumerate(names)}
    order = {(d, v): i for i, (d, v) in enumerate((d, v) for d in names for v in DIMS[d])}
    uncovered = sorted(_valid_pairs(), key=lambda p: (order[p[:2]], order[p[2:]]))
    left = set(uncovered)
    rows = []
    while left:
        a, va, b, vb = next(p for p in uncovered if p in left)
        row = {a: va, b: vb}
        for dim in names:
            if dim in row:
                continue
            options = [v for v in DIMS[dim] if all(compatible(dim, v, d, w) for d, w in row.items())]
            gains = [sum(((dim, v, d, w) if rank[dim] < rank[d] else (d, w, dim, v)) in left for d, w in row.items())
                     for v in options]
            row[dim] = options[gains.index(max(gains))]
        rows.append({d: row[d] for d in names})
        left -= _pairs_of(rows[-1])
    return rows


COVERING_ROWS = covering_rows()


def test_covering_rows_cover_every_valid_pair_of_options():
    covered = set().union(*(_pairs_of(r) for r in COVERING_ROWS))
    assert _valid_pairs() <= covered
    # and only compatible ones: every row is a spec ModelSpec accepts (checked when drawn below)
    assert all(compatible(a, va, b, vb) for r in COVERING_ROWS for a, va, b, vb in _pairs_of(r))
    # the pairs the module docstring names
    for want in ({"attention": "mla", "window": "list"}, {"moe": "routed", "residual": "parallel_1"},
                 {"residual": "hyper_dynamic", "placement": "post"}, {"residual": "attnres_block", "moe": "every"},
                 {"residual": "mhc", "norm": "none"}, {"position": "alibi", "window": "ratio"}):
        assert any(all(r[k] == v for k, v in want.items()) for r in COVERING_ROWS), want


# ---- the reference model: numel on meta, FlopCounterMode on CPU ----------------------------

BATCH, TOKENS = 2, 5  # max_context ≥ 8 in every drawn spec, so a learned table has the rows
REFERENCE_LAYERS = 3  # enough for "2:1" windows and MoE every 2nd layer; FlopCounterMode's cost grows with L


def assert_matches_reference(spec: ModelSpec) -> None:
    ours = size(spec, Workload.forward(TOKENS, BATCH), CONVENTIONS["torch"])
    assert ours.params.total == sum(p.numel() for p in build_reference_model(spec, "meta").parameters())
    torch.manual_seed(0)
    model = build_reference_model(spec, "cpu")
    tokens = torch.randint(0, spec.vocab_size, (BATCH, TOKENS))
    assert ours.flops.forward == count_flops(model, tokens)


# One spec per row (often hypothesis's smallest: one layer, one expert, width-1
# heads, themselves edge cases); the numeric variety comes from the drawn specs
# below and the analytic properties.
@pytest.mark.parametrize("row", COVERING_ROWS, ids=[f"row{i}" for i in range(len(COVERING_ROWS))])
@settings(max_examples=1)
@given(data=st.data())
def test_each_pair_of_options_matches_the_reference_model(row, data):
    spec = data.draw(model_specs(REFERENCE_LAYERS, **row))
    assert skeleton_of(spec) == row  # the strategy really built the options it was asked for
    assert_matches_reference(spec)


@settings(max_examples=15)
@given(spec=model_specs(REFERENCE_LAYERS))
def test_drawn_specs_match_the_reference_model(spec):
    assert_matches_reference(spec)


# ---- analytic properties ---------------------------------------------------------------------


def _finite_nonneg(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


@given(spec=model_specs(), wl=workloads(), convention=conventions)
def test_every_number_is_finite_non_negative_and_integral_where_counted(spec, wl, convention):
    r = sized(spec, wl, convention)
    p, f, kv = r.params, r.flops, r.kv
    for x in (p.total, p.active, p.embedding, p.non_embedding, p.active_non_embedding, *p.by_component.values(),
              f.matmul, f.attention, f.vector, f.forward, f.train):
        assert isinstance(x, int) and x >= 0, (x, p, f)
    assert 0 < p.active <= p.total and sum(p.by_component.values()) == p.total
    assert p.embedding == spec.vocab_size * spec.embedding_width
    for x in (kv.bytes, kv.bytes_per_token, *r.weight_bytes.values(), r.forward_per_token):
        assert _finite_nonneg(x), (x, kv, r.weight_bytes)
    assert f.forward > 0 and kv.bytes > 0 and kv.bytes_per_token > 0
    for op in r.ops:
        assert isinstance(op.count, int) and op.count >= 1, op
        for x in (op.params, op.active_params, op.bias_params, op.flops, op.vector_flops):
            assert isinstance(x, int) and x >= 0, op
        assert op.bias_params <= op.params and op.active_params <= op.params, op
        assert not getattr(op.dims, "parts", ()) or sum(op.dims.parts) == op.dims.n, op  # fused parts tile n
        for x in (op.weight_bytes, op.act_bytes, op.kv_bytes):
            assert _finite_nonneg(x), op
        for name, x in op.dims.to_dict().items():
            assert x is None or isinstance(x, str) or all(isinstance(v, int) and v >= 0 for v in
                                                             (x if isinstance(x, tuple) else (x,))), (name, op)
    # the JSON document is strict JSON: no NaN or infinity anywhere
    json.dumps(r.to_dict(ops=True), allow_nan=False)


@given(spec=model_specs(), wl=workloads())
def test_parameters_depend_on_the_spec_only(spec, wl):
    base = sized(spec, Workload()).params
    for convention in CONVENTIONS:
        assert sized(spec, wl, convention).params == base


@given(spec=model_specs(), wl=workloads(), convention=conventions)
def test_conventions_are_ordered(spec, wl, convention):
    r = {c: sized(spec, wl, c).flops for c in CONVENTIONS}
    assert len({x.matmul for x in r.values()}) == 1  # conventions only differ in attention and vector work
    # causal pairs ⊆ the rectangle; a capped window ⊆ the uncapped rectangle
    assert r["causal"].attention <= r["full"].attention <= r["torch"].attention
    assert r["detailed"].forward == r["causal"].forward + r["causal"].vector >= r["causal"].forward
    assert r["causal"].forward <= r["full"].forward <= r["torch"].forward


@given(spec=model_specs(), s1=st.integers(1, 80), s2=st.integers(1, 80), batch=st.integers(1, 4),
       convention=conventions)
def test_more_context_never_costs_less(spec, s1, s2, batch, convention):
    short, long = sorted((s1, s2))
    a = sized(spec, Workload.forward(short, batch), convention)
    b = sized(spec, Workload.forward(long, batch), convention)
    assert b.flops.forward >= a.flops.forward and b.flops.attention >= a.flops.attention
    assert b.kv.bytes >= a.kv.bytes
    assert b.kv.bytes_per_token == a.kv.bytes_per_token  # a cached token costs the same at any context
    assert b.params == a.params
    if long > short:
        assert b.flops.forward > a.flops.forward  # more tokens: every projection runs more rows


@given(spec=model_specs(), context=st.integers(1, 80), batch=st.integers(1, 4), convention=conventions)
def test_decode_step_flops_grow_with_context(spec, context, batch, convention):
    a = sized(spec, Workload.decode(context, batch), convention)
    b = sized(spec, Workload.decode(context + 1, batch), convention)
    assert b.kv.bytes >= a.kv.bytes and b.kv.bytes_per_token == a.kv.bytes_per_token
    att = spec.attention
    windows = [{"local": att.sliding_window, "chunked": att.chunk_size}.get(k) for k in spec.layer_attention]
    growing = any(w is None or w > context for w in windows)
    assert (b.kv.bytes > a.kv.bytes) == growing  # the cache is capped by windows and chunks alike
    if "chunked" in spec.layer_attention:  # a new chunk's first query sees only itself: FLOPs may drop
        return
    assert b.flops.forward >= a.flops.forward
    windows = [spec.attention.sliding_window if k == "local" else None for k in spec.layer_attention]
    growing = any(w is None or w > context for w in windows)  # a layer whose cache still takes the new token
    # the cache is window-capped whatever the convention; the torch convention never caps the score pairs
    assert (b.kv.bytes > a.kv.bytes) == growing
    assert (b.flops.attention > a.flops.attention) == (growing or convention == "torch")
    if not growing and convention != "torch":  # every layer is at its window: nothing grows
        assert b.flops.forward == a.flops.forward


@given(spec=model_specs(), wl=workloads(), extra=st.integers(1, 3), convention=conventions)
def test_more_batch_never_less_kv_or_flops(spec, wl, extra, convention):
    bigger = Workload(batch=wl.batch + extra, new_tokens=wl.new_tokens, context=wl.context, kv_dtype=wl.kv_dtype,
                      logits=wl.logits)
    a, b = sized(spec, wl, convention), sized(spec, bigger, convention)
    assert b.kv.bytes > a.kv.bytes and b.flops.forward > a.flops.forward
    assert b.kv.bytes_per_token == a.kv.bytes_per_token
    # batch is B independent sequences: everything but the (shared) weights scales with it
    assert b.kv.bytes * wl.batch == a.kv.bytes * bigger.batch
    assert b.flops.forward * wl.batch == a.flops.forward * bigger.batch


@given(spec=model_specs(), wl=workloads())
def test_kv_cache_is_bytes_per_token_times_tokens_up_to_windows(spec, wl):
    kv = sized(spec, wl).kv
    full = kv.bytes_per_token * wl.context * wl.batch
    assert kv.bytes <= full
    a = spec.attention
    windows = [{"local": a.sliding_window, "chunked": a.chunk_size}[k] for k in spec.layer_attention
               if k in ("local", "chunked")]
    if all(w >= wl.context for w in windows):  # no window cuts this context
        assert kv.bytes == full
    kv_dtype_bytes = {"bf16": 2, "fp32": 4, "fp8": 1}[wl.kv_dtype]
    per_value = kv.bytes_per_token / kv_dtype_bytes
    assert per_value == int(per_value) and per_value % spec.n_layers == 0  # whole values, every layer alike


@given(spec=model_specs(), extra=st.integers(1, 3), wl=workloads(), convention=conventions)
def test_more_layers_never_fewer_parameters_flops_or_kv(spec, extra, wl, convention):
    extra *= spec.residual.blocks or 1  # block AttnRes: blocks must still divide 2L
    deeper = reshaped(spec, n_layers=spec.n_layers + extra)
    a, b = sized(spec, wl, convention), sized(deeper, wl, convention)
    assert b.params.total > a.params.total and b.params.active > a.params.active
    assert b.flops.forward > a.flops.forward
    assert b.kv.bytes_per_token > a.kv.bytes_per_token and b.kv.bytes >= a.kv.bytes


@given(spec=model_specs(), extra=st.integers(1, 100), wl=workloads(), convention=conventions)
def test_a_larger_vocabulary_never_fewer_parameters(spec, extra, wl, convention):
    bigger = reshaped(spec, vocab_size=spec.vocab_size + extra)
    a, b = sized(spec, wl, convention), sized(bigger, wl, convention)
    assert b.params.total > a.params.total and b.params.active > a.params.active
    assert b.params.non_embedding >= a.params.non_embedding
    assert b.flops.forward > a.flops.forward  # the unembedding is wider
    assert b.kv == a.kv


@given(spec=model_specs())
def test_tying_shares_exactly_one_table(spec):
    tied, untied = (sized(reshaped(spec, tie_embeddings=t), Workload()) for t in (True, False))
    assert untied.params.total - tied.params.total == spec.vocab_size * spec.embedding_width  # a head bias stays
    assert tied.flops == untied.flops and tied.kv == untied.kv


@given(spec=model_specs(), wl=workloads())
def test_narrower_weight_formats_never_take_more_bytes(spec, wl):
    r = sized(spec, wl)
    w = r.weight_bytes
    # weights an architecture keeps at one dtype (mHC's fp32 coefficients) are the same in every format
    fixed = sum(op.params * op.count * 4 for op in r.ops if op.stored_dtype == "fp32")
    assert w["fp32"] - fixed == 2 * (w["bf16"] - fixed) and w["bf16"] == w["fp16"]
    assert w["bf16"] >= w["fp8"] == w["int8"] >= w["int4"] > 0


H100 = load_hardware("h100")


@settings(max_examples=40)
@given(spec=model_specs(), prompt=st.integers(1, 40), gen=st.integers(1, 30), batch=st.integers(1, 4))
def test_decode_time_closed_form_equals_the_step_by_step_sum(spec, prompt, gen, batch):
    rates = rate_sets(H100, Workload.decode(prompt + 1, batch))[0]
    steps = [step(spec, Workload.decode(c, batch), rates).time for c in range(prompt + 1, prompt + gen + 1)]
    assert all(math.isfinite(t) and t > 0 for t in steps)
    if "chunked" not in spec.layer_attention:  # a new chunk's first step reads less than the last one did
        assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(steps))  # longer never decodes faster
    assert decode_time(spec, prompt, gen, batch, rates) == pytest.approx(sum(steps), rel=1e-9)


# ---- linear layers (no reference model: transformers pins them, tests/spec/test_hf_oracle.py) ----


@st.composite
def linear_specs(draw) -> ModelSpec:
    """A drawn spec (no windows) with some layers made linear, under one of the three mixers."""
    spec = draw(model_specs(window="none"))
    L = spec.n_layers
    kinds = draw(st.lists(st.sampled_from(["global", "linear"]), min_size=L, max_size=L).filter(
        lambda k: "linear" in k))
    mixer = draw(st.sampled_from([
        {"kind": "gated_deltanet", "n_heads": 4, "n_key_heads": draw(st.sampled_from([1, 2, 4])),
         "key_head_dim": draw(st.integers(1, 8)), "value_head_dim": draw(st.integers(1, 8)),
         "conv_kernel": draw(st.integers(1, 5)), "chunk": draw(st.sampled_from([2, 4, 64]))},
        {"kind": "short_conv", "conv_kernel": draw(st.integers(1, 5)), "bias": draw(st.booleans())},
        {"kind": "mamba", "d_state": draw(st.integers(1, 8)), "d_conv": draw(st.integers(1, 5)),
         "expand": draw(st.integers(1, 3)), "dt_rank": draw(st.integers(1, 4)), "bc_norms": draw(st.booleans())},
        {"kind": "mamba2", "n_heads": 4, "head_dim": draw(st.integers(1, 4)), "d_state": draw(st.integers(1, 8)),
         "n_groups": draw(st.sampled_from([1, 2, 4])), "conv_kernel": draw(st.integers(1, 5)),
         "chunk": draw(st.sampled_from([2, 4, 256])), "norm": draw(st.booleans()),
         "proj_bias": draw(st.booleans()), "out_bias": draw(st.sampled_from([None, True, False])),
         "parallel": draw(st.booleans())},  # parallel: beside attention in every layer (Falcon-H1)
        {"kind": "lightning", "n_heads": draw(st.integers(1, 4)), "head_dim": draw(st.integers(1, 8)),
         "block": draw(st.sampled_from([1, 2, 4, 256]))},  # MiniMax-01's lightning attention
        {"kind": "mlstm", "n_heads": 2, "qk_dim": 2 * draw(st.integers(1, 4)), "v_dim": 2 * draw(st.integers(1, 4)),
         "chunk": draw(st.sampled_from([2, 4, 64])), "fused_projections": draw(st.booleans())},  # xLSTM
        {"kind": "rglru", "width": 2 * draw(st.integers(1, 4)), "n_heads": 2,
         "conv_kernel": draw(st.integers(1, 5))},  # RecurrentGemma's recurrent block
    ]))
    data = spec.model_dump(exclude_defaults=True)
    data["attention"]["layer_types"] = ["global"] * L if mixer.get("parallel") else kinds
    if not mixer.get("parallel") and "o_bias_layers" in data["attention"]:  # only attention layers have an o_proj
        data["attention"]["o_bias_layers"] = [i for i in data["attention"]["o_bias_layers"] if kinds[i] == "global"] or None
    data["linear"] = mixer
    return ModelSpec.model_validate(data)


@given(spec=linear_specs(), wl=workloads(), convention=conventions)
def test_linear_layers_keep_a_fixed_state_and_finite_counts(spec, wl, convention):
    r = sized(spec, wl, convention)
    (linear,) = [k for k in r.kv.by_kind if k.kind == "linear"]
    stateless = spec.linear.kind == "short_conv" and spec.linear.conv_kernel == 1  # a 1-tap conv keeps nothing
    assert linear.bytes_per_token == 0 and (linear.state_bytes > 0) != stateless
    assert linear.bytes == wl.batch * linear.state_bytes  # per sequence, whatever the context
    longer = sized(spec, Workload(batch=wl.batch, new_tokens=wl.new_tokens, context=wl.context + 7,
                                  kv_dtype=wl.kv_dtype), convention)
    assert [k for k in longer.kv.by_kind if k.kind == "linear"][0].bytes == linear.bytes
    for x in (r.params.total, r.flops.forward, r.flops.vector):
        assert isinstance(x, int) and x >= 0
    assert r.params.total > 0 and r.flops.forward > 0
    json.dumps(r.to_dict(ops=True), allow_nan=False)


@given(spec=linear_specs(), context=st.integers(2, 80), convention=conventions)
def test_linear_layers_cost_at_most_linearly_more_with_a_longer_prefill(spec, context, convention):
    """A prefill of more tokens never costs fewer FLOPs; the linear layers' part grows by whole chunks."""
    short, long = (sized(spec, Workload.forward(t), convention) for t in (context, context + 1))
    assert long.flops.forward >= short.flops.forward


@given(spec=model_specs(window="chunked"), context=st.integers(1, 40), batch=st.integers(1, 3))
def test_chunked_decode_is_periodic_in_the_chunk(spec, context, batch):
    """A chunked layer's decode query sees (p mod C) + 1 keys: one chunk later it sees as many, so a
    decode step's causal FLOPs repeat with period C when every layer is chunked (the drawn spec's
    layers all made chunked), and its cache stays capped at C tokens."""
    data = spec.model_dump(exclude_defaults=True)
    data["attention"].update(layer_types=["chunked"] * spec.n_layers)
    data["attention"].pop("sliding_window", None)
    spec = ModelSpec.model_validate(data)
    C = spec.attention.chunk_size
    a, b = (sized(spec, Workload.decode(c, batch), "causal") for c in (context, context + C))
    assert b.flops.attention == a.flops.attention
    if context >= C:
        assert b.kv.bytes == a.kv.bytes


@given(spec=linear_specs(), wl=workloads(), convention=conventions)
def test_a_parallel_mixer_runs_in_every_layer_beside_attention(spec, wl, convention):
    """Falcon-H1's layout: every layer keeps its attention cache and its mixer's state."""
    r = sized(spec, wl, convention)
    kinds = {k.kind: k for k in r.kv.by_kind}
    if getattr(spec.linear, "parallel", False):
        assert kinds["linear"].layers == kinds["global"].layers == spec.n_layers
    else:
        assert kinds["linear"].layers == spec.attention_layers["linear"]


# ---- DeepSeek Sparse Attention (no reference model: transformers pins it) ----------------------


@st.composite
def sparse_specs(draw) -> ModelSpec:
    """A drawn MLA spec with a query latent, given an indexer of a drawn top-k."""
    spec = draw(model_specs(attention="mla_q", window="none"))
    data = spec.model_dump(exclude_defaults=True)
    data["attention"]["indexer"] = {"n_heads": draw(st.integers(1, 4)), "head_dim": draw(st.integers(1, 8)),
                                    "topk": draw(st.integers(1, 40))}
    return ModelSpec.model_validate(data)


@given(spec=sparse_specs(), wl=workloads(), convention=conventions)
def test_sparse_attention_never_costs_more_than_dense_attention(spec, wl, convention):
    """Selecting top-k keys never adds attention FLOPs over the same MLA without it, except under
    `sdpa`: torch's SDPA takes the selection as an explicit mask and computes the whole rectangle,
    where the dense model runs is_causal.  The indexer's cache is head_dim values per token in every
    layer, whatever the context."""
    from archcalc.ops.dtypes import nbytes

    r = sized(spec, wl, convention)
    dense = sized(spec.model_copy(update={"attention": spec.attention.model_copy(update={"indexer": None})}), wl,
                  convention)
    core = next(op for op in r.ops if op.name == "layers.attn.core")
    dense_core = next(op for op in dense.ops if op.name == "layers.attn.core")
    assert 0 < core.flops and core.kv_bytes <= dense_core.kv_bytes
    if convention != "sdpa" or wl.new_tokens == 1:
        assert core.flops <= dense_core.flops
    (index,) = [k for k in r.kv.by_kind if k.kind == "indexer"]
    assert index.bytes_per_token == nbytes(spec.n_layers * spec.attention.indexer.head_dim, wl.kv_dtype)
    assert r.params.total > dense.params.total
    json.dumps(r.to_dict(ops=True), allow_nan=False)


@settings(max_examples=40)
@given(spec=st.one_of(sparse_specs(), st.deferred(lambda: two_geometry_specs())), prompt=st.integers(1, 40),
       gen=st.integers(1, 30), batch=st.integers(1, 3))
def test_sparse_decode_time_closed_form_equals_the_step_by_step_sum(spec, prompt, gen, batch):
    """The closed form cuts where a step's selected keys stop growing (c = topk), and with dots3-note's two MLA
    geometries where each kind's (its window, its top-k) do."""
    rates = rate_sets(H100, Workload.decode(prompt + 1, batch))[0]
    steps = [step(spec, Workload.decode(c, batch), rates).time for c in range(prompt + 1, prompt + gen + 1)]
    assert decode_time(spec, prompt, gen, batch, rates) == pytest.approx(sum(steps), rel=1e-9)


# ---- dots3-note's MLA of two geometries (transformers pins it: tests/spec/test_dots3_note.py) ----------------


@st.composite
def two_geometry_specs(draw, *, same: bool = False) -> ModelSpec:
    """A drawn MLA spec with a query latent and a list of global and sliding layers, given sliding layers of their
    own drawn widths (`same`: every one equal to the global layers'), maybe dots3-note's rope-key norm and per-head
    gate, and maybe an indexer on the global layers."""
    spec = draw(model_specs(max_layers=6, attention="mla_q", window="list", output_gate=False, sinks=False))
    data = spec.model_dump(exclude_defaults=True)
    a = spec.attention
    widths = {"n_heads": st.integers(1, 4), "q_lora_rank": st.integers(1, 12), "kv_lora_rank": st.integers(1, 12),
              "qk_nope_head_dim": st.integers(1, 6), "qk_rope_head_dim": st.sampled_from([2, 4]),
              "v_head_dim": st.integers(1, 6)}
    data["attention"]["local_mla"] = ({k: getattr(a, k) for k in widths} if same else
                                      {k: draw(st.none() | w) for k, w in widths.items()})
    data["attention"] |= {"rope_key_norm": draw(st.booleans()),
                          "head_gate": draw(st.sampled_from([None, "sigmoid"]))}
    if draw(st.booleans()):
        data["attention"]["indexer"] = {"n_heads": draw(st.integers(1, 4)), "head_dim": draw(st.integers(1, 8)),
                                        "topk": draw(st.integers(1, 40))}
    return ModelSpec.model_validate(data)


@given(spec=two_geometry_specs(same=True), wl=workloads(), convention=conventions)
def test_sliding_layers_of_the_global_widths_count_as_one_geometry(spec, wl, convention):
    """local_mla giving the sliding layers the global layers' own widths changes no total: the two-geometry ops
    (each kind's projections, RoPE, core, gate and output apart) add up to the one-geometry ops that
    transformers pins for DeepSeek's MLA, parameters, FLOPs, bytes and cache alike."""
    one = spec.model_copy(update={"attention": spec.attention.model_copy(update={"local_mla": None})})
    r, ref = sized(spec, wl, convention), sized(one, wl, convention)
    assert r.params.total == ref.params.total and r.params.active == ref.params.active
    assert r.flops.forward == ref.flops.forward and r.flops.vector == ref.flops.vector
    assert r.kv.bytes == ref.kv.bytes
    assert sum(op.weight_bytes * op.count for op in r.ops) == sum(op.weight_bytes * op.count for op in ref.ops)
    assert sum(op.act_bytes * op.count for op in r.ops) == sum(op.act_bytes * op.count for op in ref.ops)


INKLING_PARTS = ("relative", "kv_conv", "output_conv", "global_scale", "router_shared")


@st.composite
def conv_specs(draw) -> ModelSpec:
    """A drawn MHA spec (no chunks, the standard residual) given some of Inkling's parts: relative logits, short
    convs on K/V and on each sublayer's output, the global scales, router-scored shared experts."""
    spec = draw(model_specs(attention=draw(st.sampled_from(["mha", "gqa", "mqa"])), residual="standard",
                            window=draw(st.sampled_from(["none", "all", "ratio", "list"]))))
    data = spec.model_dump(exclude_defaults=True)
    att, moe = data["attention"], data.setdefault("ffn", {}).get("moe")
    parts = draw(st.sets(st.sampled_from(INKLING_PARTS), min_size=1))
    if "relative" in parts:
        att["relative"] = {"rank": draw(st.integers(1, 6)), "extent": draw(st.integers(1, 40))}
    if "kv_conv" in parts:
        att["kv_conv"] = draw(st.integers(2, 5))
    if "output_conv" in parts:
        data["residual"] = {"kind": "standard", "output_conv": draw(st.integers(2, 5))}
    routed = "moe" in spec.layer_ffn  # the global scale and the shared experts' scores need routed layers
    if "global_scale" in parts and routed:
        data["ffn"]["global_scale"] = True
    if "router_shared" in parts and routed and moe.get("d_shared"):
        moe["router_shared"] = draw(st.integers(1, 3))
    if not (att.get("relative") or att.get("kv_conv") or data.get("residual", {}).get("output_conv")
            or data["ffn"].get("global_scale") or (moe or {}).get("router_shared")):
        att["kv_conv"] = 2  # none of the drawn parts applies to this model: one that does
    return ModelSpec.model_validate(data)


def _without_inkling(spec: ModelSpec) -> ModelSpec:
    data = spec.model_dump(exclude_defaults=True)
    data["attention"].pop("relative", None), data["attention"].pop("kv_conv", None)
    data.get("residual", {}).pop("output_conv", None), data.get("ffn", {}).pop("global_scale", None)
    if data.get("ffn", {}).get("moe"):
        data["ffn"]["moe"].pop("router_shared", None)
    return ModelSpec.model_validate(data)


@given(spec=conv_specs(), wl=workloads(), convention=conventions, more=st.integers(1, 50))
def test_inkling_s_parts_add_weights_and_work_and_a_state_fixed_in_context(spec, wl, convention, more):
    """Inkling's parts only add: parameters (each part holds some), FLOPs never fewer; the KV per token is the
    model's without them (the convs change what is cached, not its size); their conv state is one per attention
    layer and sequence, the same at any context, and grows with the batch alone."""
    r, base = sized(spec, wl, convention), sized(_without_inkling(spec), wl, convention)
    assert r.params.total > base.params.total and r.flops.forward >= base.flops.forward
    assert r.kv.bytes_per_token == base.kv.bytes_per_token
    states = [k for k in r.kv.by_kind if k.kind == "linear"]
    convs = spec.attention.kv_conv is not None or spec.residual.output_conv is not None
    assert (sum(k.layers for k in states) == spec.n_layers) if convs else not states
    longer = sized(spec, replace(wl, context=wl.context + more), convention)
    assert [k.state_bytes for k in longer.kv.by_kind if k.kind == "linear"] == [k.state_bytes for k in states]
    assert r.kv.bytes == base.kv.bytes + wl.batch * sum(k.state_bytes for k in states)
    json.dumps(r.to_dict(ops=True), allow_nan=False)


INKLING2_PARTS = ("clip", "sink_proj", "relative_scale", "dynamic_kv_conv", "attnres")


@st.composite
def inkling2_specs(draw) -> tuple[ModelSpec, ModelSpec]:
    """A drawn MHA spec of one shape a layer with Inkling's relative logits and K/V convs (no chunks, the standard
    residual), and the same given some of Inkling 2's parts: clipped q/k heads with a query scale and weightless
    value norms, sinks from the input, the relative states' scale, the global layers' per-token conv taps, its
    block attention residuals (blocks of whole layers) with the sublayer output convs."""
    spec = draw(model_specs(attention=draw(st.sampled_from(["mha", "gqa", "mqa"])), residual="standard",
                            window=draw(st.sampled_from(["none", "all", "ratio", "list"])), sinks=False))
    data = spec.model_dump(exclude_defaults=True)
    data["attention"].update(relative={"rank": draw(st.integers(1, 6)), "extent": draw(st.integers(1, 40))},
                             kv_conv=draw(st.integers(2, 5)))
    data["attention"].pop("qk_norm", None), data["attention"].pop("v_norm", None)
    base = ModelSpec.model_validate(data)
    parts = draw(st.sets(st.sampled_from(INKLING2_PARTS), min_size=1))
    att = data["attention"]
    if "clip" in parts:
        att.update(qk_norm="clip", query_scale=True, v_norm=True)
    att["sink_proj"] = "sink_proj" in parts
    att["relative"]["scale"] = "relative_scale" in parts
    att["dynamic_kv_conv"] = "dynamic_kv_conv" in parts
    if "attnres" in parts:
        L = spec.n_layers
        data["residual"] = {"kind": "attnres", "attnres_form": "inkling2", "output_conv": att["kv_conv"],
                            "blocks": draw(st.sampled_from([b for b in range(1, L + 1) if L % b == 0]))}
    return base, ModelSpec.model_validate(data)


@given(pair=inkling2_specs(), wl=workloads(), convention=conventions, more=st.integers(1, 50))
def test_inkling2_s_parts_add_weights_and_work_not_cache(pair, wl, convention, more):
    """Inkling 2's parts only add: parameters never fewer (each holds some but the taps, which the global layers
    alone have), FLOPs never fewer; the KV per token is the model's without them; the conv states stay one per
    layer and sequence, the same at any context."""
    base, spec = pair
    r, b = sized(spec, wl, convention), sized(base, wl, convention)
    a = spec.attention
    assert r.params.total >= b.params.total and r.flops.forward >= b.flops.forward
    if a.qk_norm == "clip" or a.sink_proj or a.relative.scale or spec.residual.kind == "attnres" or (
            a.dynamic_kv_conv and "global" in spec.layer_attention):
        assert r.params.total > b.params.total
    assert r.kv.bytes_per_token == b.kv.bytes_per_token
    states = [k.state_bytes for k in r.kv.by_kind if k.kind == "linear"]
    longer = sized(spec, replace(wl, context=wl.context + more), convention)
    assert [k.state_bytes for k in longer.kv.by_kind if k.kind == "linear"] == states
    json.dumps(r.to_dict(ops=True), allow_nan=False)


ZAYA_PARTS = ("cca", "key_scale", "affine", "router_mlp")


@st.composite
def zaya_specs(draw) -> ModelSpec:
    """A drawn GQA spec (the standard residual, no output gate) given some of ZAYA1's parts: CCA's convs and delayed
    value, a key scale on normed keys, the affine residual, a router MLP where every layer is MoE."""
    spec = draw(model_specs(attention=draw(st.sampled_from(["mha", "gqa", "mqa"])), residual="standard",
                            output_gate=False, window=draw(st.sampled_from(["none", "all", "ratio", "list"]))))
    data = spec.model_dump(exclude_defaults=True)
    att, moe = data["attention"], data.get("ffn", {}).get("moe")
    parts = draw(st.sets(st.sampled_from(ZAYA_PARTS), min_size=1))
    if "cca" in parts and spec.v_head_dim == spec.qk_head_dim and spec.n_kv_heads * spec.qk_head_dim % 2 == 0:
        att["cca"] = {"depthwise": draw(st.integers(1, 4)), "grouped": draw(st.integers(1, 4))}
    if "key_scale" in parts and spec.attention.qk_norm != "none":
        att["key_scale"] = True
    if "router_mlp" in parts and moe and set(spec.layer_ffn) == {"moe"} and not (
            moe.get("router_bias") or moe.get("router_shared")):
        # at least n_experts wide: it then holds more than the D -> n_experts router it replaces
        moe["router_mlp"] = {"width": draw(st.integers(moe["n_experts"], max(12, moe["n_experts"]))),
                             "eda": draw(st.booleans())}
    if "affine" in parts or not (att.get("cca") or att.get("key_scale") or (moe or {}).get("router_mlp")):
        data["residual"] = {"kind": "standard", "affine": True}
    return ModelSpec.model_validate(data)


@given(spec=zaya_specs(), wl=workloads(), convention=conventions, more=st.integers(1, 50))
def test_zaya_s_parts_add_weights_and_a_state_fixed_in_context(spec, wl, convention, more):
    """ZAYA1's parts only add parameters (each holds some); the KV per token is the model's without them; CCA's
    state is one a layer and sequence, the same at any context."""
    data = spec.model_dump(exclude_defaults=True)
    data["attention"].pop("cca", None), data["attention"].pop("key_scale", None), data.pop("residual", None)
    if data.get("ffn", {}).get("moe"):
        data["ffn"]["moe"].pop("router_mlp", None)
    r, base = sized(spec, wl, convention), sized(ModelSpec.model_validate(data), wl, convention)
    assert r.params.total > base.params.total and r.kv.bytes_per_token == base.kv.bytes_per_token
    states = [k for k in r.kv.by_kind if k.kind == "linear"]
    assert (sum(k.layers for k in states) == spec.n_layers) if spec.attention.cca else not states
    longer = sized(spec, replace(wl, context=wl.context + more), convention)
    assert [k.state_bytes for k in longer.kv.by_kind if k.kind == "linear"] == [k.state_bytes for k in states]
    json.dumps(r.to_dict(ops=True), allow_nan=False)


NGPT_PARTS = ("l2", "interpolate", "query_scale", "gate_scale", "scales", "logit_scale")


@st.composite
def recurrent_specs(draw) -> ModelSpec:
    """A drawn dense MHA spec run as a recurrent loop (Dory's): a prelude, a core run 1 to 3 times and a coda, global
    and local layers mixed or not, a cache a run or a core layer; with some of nGPT's parts (L2 norms, the
    interpolating residual, the query, gate, MLP and logit scales)."""
    spec = draw(model_specs(attention=draw(st.sampled_from(["mha", "gqa", "mqa"])), residual="standard", moe="none",
                            window="none", nope=False, sinks=False))
    data = spec.model_dump(exclude_defaults=True)
    prelude, core, coda, passes = (draw(st.integers(0, 2)), draw(st.integers(1, 3)), draw(st.integers(0, 2)),
                                   draw(st.integers(1, 3)))
    kinds = draw(st.lists(st.sampled_from(["global", "local"]), min_size=prelude + core + coda,
                          max_size=prelude + core + coda))
    runs = kinds[:prelude] + kinds[prelude:prelude + core] * passes + kinds[prelude + core:]
    att = {k: v for k, v in data["attention"].items() if k not in ("layer_types", "sliding_window", "o_bias_layers")}
    if "local" in kinds:
        att |= {"sliding_window": draw(st.integers(2, 8)), "layer_types": runs}
    parts = draw(st.sets(st.sampled_from(NGPT_PARTS)))
    norm = {"kind": "l2", "weight": False} if "l2" in parts else {"kind": "rmsnorm"}
    data |= {"n_layers": len(runs), "attention": att, "norm": {**norm, "placement": draw(st.sampled_from(
        ["pre", "post", "both"]))}, "logit_scale": "logit_scale" in parts,
        "loop": {"kind": "recurrent", "stored_layers": len(kinds), "passes": passes, "prelude": prelude, "coda": coda,
                 "cache": draw(st.sampled_from(["per_pass", "last_pass"]))}}
    if "interpolate" in parts:
        data["residual"] = {"kind": "interpolate"}
    att["query_scale"] = "query_scale" in parts
    if "gate_scale" in parts:
        att |= {"output_gate": True, "gate_scale": True, "gate_bias": False}
    if "scales" in parts and spec.ffn.gated:
        data.setdefault("ffn", {})["scales"] = True
    return ModelSpec.model_validate(data)


@given(spec=recurrent_specs(), wl=workloads(), convention=conventions)
def test_a_recurrent_loop_is_its_layers_unrolled_with_weights_stored_once(spec, wl, convention):
    """A recurrent loop holds the weights of its stored layers alone (the model cut to them, unlooped); it computes
    what its layers unrolled compute (each pass's norm and add are elementwise: more under `detailed` only); its
    cache is the unrolled model's, less the core's runs before the last pass under last_pass."""
    lp, kinds = spec.loop, spec.layer_attention

    def unlooped(layer_kinds):
        data = spec.model_dump(exclude_defaults=True)
        data.pop("loop")
        if "layer_types" in data["attention"]:
            local = "local" in layer_kinds
            data["attention"]["layer_types"] = list(layer_kinds) if local else None
            data["attention"]["sliding_window"] = data["attention"]["sliding_window"] if local else None
        return ModelSpec.model_validate({**data, "n_layers": len(layer_kinds)})

    r = sized(spec, wl, convention)
    stored = sized(unlooped(kinds[:lp.prelude + lp.core] + kinds[len(kinds) - lp.coda:]), wl, convention)
    unrolled = sized(unlooped(kinds), wl, convention)
    assert r.params.total == stored.params.total
    assert (r.flops.forward > unrolled.flops.forward if convention == "detailed"
            else r.flops.forward == unrolled.flops.forward)
    unwritten = (lp.passes - 1) * lp.core if lp.cache == "last_pass" else 0
    assert r.kv.bytes_per_token * spec.n_layers == unrolled.kv.bytes_per_token * (spec.n_layers - unwritten)
    json.dumps(r.to_dict(ops=True), allow_nan=False)


# ---- DeepSeek-V4's compressed attention (transformers pins it: tests/spec/test_deepseek_v4.py) ----


@st.composite
def compressed_specs(draw) -> ModelSpec:
    """A drawn MQA spec with a window on every layer, turned into DeepSeek-V4's attention: a query latent, the
    grouped output projection and a compressor a layer (none, CSA or HCA) at drawn rates, with an indexer of a
    drawn top-k."""
    spec = draw(model_specs(max_layers=6, attention="mqa", window="all", qk_norm="none", attn_bias="none",
                            output_gate=False, attn_softcap=False, nope=False,
                            position=draw(st.sampled_from(["rope", "rope_partial"]))))
    data = spec.model_dump(exclude_defaults=True)
    heads = spec.attention.n_heads
    csa = draw(st.integers(2, 6))
    # the attention options DeepSeek-V4's goes with: its heads, the window, sinks
    data["attention"] = {k: v for k, v in data["attention"].items()
                         if k in ("n_heads", "n_kv_heads", "head_dim", "sliding_window", "sinks")}
    data["attention"] |= {
        "q_lora_rank": draw(st.integers(1, 12)), "o_groups": draw(st.sampled_from([g for g in (1, 2, 4) if heads % g == 0])),
        "o_lora_rank": draw(st.integers(1, 8)),
        "compressed": {"layers": draw(st.lists(st.sampled_from(["none", "csa", "hca"]), min_size=spec.n_layers,
                                               max_size=spec.n_layers)),
                       "csa_rate": csa, "hca_rate": draw(st.integers(csa + 1, 20)), "index_heads": draw(st.integers(1, 3)),
                       "index_head_dim": draw(st.integers(1, 8)), "index_topk": draw(st.integers(1, 6))}}
    return ModelSpec.model_validate(data)


@settings(max_examples=60)
@given(spec=st.one_of(model_specs(max_layers=6), linear_specs(), sparse_specs(), conv_specs(), compressed_specs(),
                      two_geometry_specs()), data=st.data())
def test_cutting_the_layers_keeps_every_layer(spec, data):
    """ModelSpec.cut (pipeline stages, an MTP module's layer): cut at any point, the two halves hold
    exactly the model's layer ops (parameters, FLOPs, cache bytes per token), each layer keeping its
    attention kind, RoPE, FFN kind and mixer."""
    from archcalc.ops.layers import model_ops

    if spec.residual.kind == "attnres":  # mixes every layer's output: never cut (parallel/pipeline.py)
        return
    at = data.draw(st.integers(1, spec.n_layers - 1)) if spec.n_layers > 1 else 1
    wl = Workload.forward(7)

    def layers(s):
        return [op for op in model_ops(s, wl) if op.name.startswith("layers.")]

    def totals(ops):
        return (sum(op.params * op.count for op in ops), sum(op.flops * op.count for op in ops),
                sum(op.kv_bytes * op.count for op in ops))

    halves = [spec.cut(0, at)] + ([spec.cut(at, spec.n_layers)] if at < spec.n_layers else [])
    assert [sum(x) for x in zip(*(totals(layers(h)) for h in halves))] == list(totals(layers(spec)))
    assert sum((h.layer_attention for h in halves), ()) == spec.layer_attention
    assert sum((h.layer_ffn for h in halves), ()) == spec.layer_ffn
    assert sum((h.layer_rope for h in halves), ()) == spec.layer_rope


@given(t=st.integers(1, 60), past=st.integers(0, 60), stride=st.integers(2, 9), topk=st.none() | st.integers(1, 8))
def test_entry_pairs_count_what_each_query_sees(t, past, stride, topk):
    """The causal pairs of a compressed layer: the query at position p sees the (p + 1) // stride entries closed by
    then, at most topk; counted one query at a time here."""
    from archcalc.ops.op import entry_pairs

    s = past + t
    seen = sum(min((p + 1) // stride, topk if topk is not None else s) for p in range(past, s))
    assert entry_pairs(t, s, stride, topk, CONVENTIONS["causal"]) == seen
    assert entry_pairs(t, s, stride, topk, CONVENTIONS["torch"]) == t * (s // stride)
    # one decode query's view is its own: every convention that caps windows (and top-k) agrees with causal
    one = entry_pairs(1, s, stride, topk, CONVENTIONS["causal"])
    assert all(entry_pairs(1, s, stride, topk, c) == one for c in CONVENTIONS.values() if c.cap_windows)


@given(spec=compressed_specs(), wl=workloads(), convention=conventions, more=st.integers(1, 50))
def test_compressed_layers_cache_an_entry_per_stride_and_a_fixed_state(spec, wl, convention, more):
    """Each compressed kind caches context // rate entries a layer (its bytes_per_token an entry's share); the
    state is the same at any context; a longer context never caches less or costs fewer matmul and attention FLOPs
    (elementwise ones may fall: a step that closes an entry pools and norms it, the next one does not); and every
    number is finite."""
    r = sized(spec, wl, convention)
    longer = sized(spec, replace(wl, context=wl.context + more), convention)
    c = spec.attention.compressed
    rates = {"csa": c.csa_rate, "indexer": c.csa_rate, "hca": c.hca_rate}
    for k, k2 in zip(r.kv.by_kind, longer.kv.by_kind, strict=True):
        assert (k.kind, k.layers, k.state_bytes) == (k2.kind, k2.layers, k2.state_bytes)
        if k.kind in rates:
            per_entry = k.bytes_per_token * rates[k.kind]
            assert k.bytes == wl.batch * (wl.context // rates[k.kind] * per_entry + k.state_bytes)
            assert k.layers == c.count("csa" if k.kind == "indexer" else k.kind) and k.state_bytes > 0
    assert longer.kv.bytes >= r.kv.bytes
    assert longer.flops.matmul + longer.flops.attention >= r.flops.matmul + r.flops.attention
    json.dumps(r.to_dict(ops=True), allow_nan=False)


@settings(max_examples=30)
@given(spec=compressed_specs(), prompt=st.integers(1, 40), gen=st.integers(1, 30), batch=st.integers(1, 3))
def test_compressed_decode_time_closed_form_equals_the_step_by_step_sum(spec, prompt, gen, batch):
    """The closed form cuts where a compressed layer's entries grow (each closing step a piece of its own); past
    MAX_ENTRY_CUTS cuts it takes chords (tests/cost/test_roofline.py bounds them on DeepSeek-V4-Flash)."""
    rates = rate_sets(H100, Workload.decode(prompt + 1, batch))[0]
    steps = [step(spec, Workload.decode(c, batch), rates).time for c in range(prompt + 1, prompt + gen + 1)]
    assert decode_time(spec, prompt, gen, batch, rates) == pytest.approx(sum(steps), rel=1e-9)
