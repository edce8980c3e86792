"""Hand-checkable cases for the formulas in ops.py, each against an
independent computation (brute-force masks, simulation, arithmetic by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from archcalc.ops import op as ops
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload


def mask_pairs(new_tokens: int, context: int, window: int | None) -> int:
    """Count the True entries of an explicit causal (sliding-window) mask."""
    q = np.arange(context - new_tokens, context)[:, None]  # absolute query positions
    k = np.arange(context)[None, :]
    allowed = k <= q
    if window:
        allowed &= k > q - window
    return int(allowed.sum())


@pytest.mark.parametrize("t, s, w", [(1, 1, None), (7, 7, None), (1, 50, None), (5, 40, None), (40, 40, 8),
                                     (3, 40, 8), (1, 40, 8), (10, 12, 11), (9, 9, 100), (16, 16, 1)])
def test_causal_pairs_match_an_explicit_mask(t, s, w):
    assert ops.score_pairs(t, s, w, CONVENTIONS["causal"]) == mask_pairs(t, s, w)


def test_rectangle_conventions():
    assert ops.score_pairs(4, 10, 3, CONVENTIONS["torch"]) == 40  # FlopCounterMode ignores masks
    assert ops.score_pairs(4, 10, 3, CONVENTIONS["full"]) == 12  # vLLM clamps to the window


def test_causal_prefill_closed_form_of_the_design():
    # design.md: T·S − T(T−1)/2 pairs for a causal prefill of T new tokens on S total.
    # T = 100, S = 300: 100 · 300 − 100 · 99 / 2 = 30,000 − 4,950 = 25,050.
    assert ops.score_pairs(100, 300, None, CONVENTIONS["causal"]) == 25_050


def test_matmul_flops_bytes_and_intensity():
    wl = Workload(batch=1, new_tokens=1, context=1)  # one token, bf16
    op = ops.matmul("m", "ffn", wl, 4096, 4096)
    assert op.flops == 33_554_432  # 4096² multiply-adds, 2 FLOPs each
    assert op.weight_bytes == 33_554_432  # 4096² bf16 weights
    # LLM-Viewer's linear layer: load_act = in · 2 B, store_act = out · 2 B = 16,384 B.
    assert op.act_bytes == 16_384
    # scaling book: intensity of [B,D]x[D,F] in bf16 ≈ B for B ≪ D, F; at B = 1:
    # 33,554,432 / (33,554,432 + 16,384) = 0.999512...
    assert op.flops / (op.weight_bytes + op.act_bytes) == pytest.approx(0.999512, abs=1e-6)


def test_decode_attention_intensity_tends_to_q_per_kv():
    """Scaling book: decode attention intensity → H/K (the GQA group), memory bound."""
    wl = Workload.decode(context=32_768, batch=1)
    op = ops.attention("a", wl, CONVENTIONS["causal"], n_heads=32, kv_heads=8, qk_dim=128, v_dim=128,
                       kv_width=8 * 256, window=None, layer_kind="global")
    intensity = op.flops / (op.kv_bytes + op.act_bytes)
    assert intensity == pytest.approx(32 / 8, rel=1e-3)


def test_expected_experts_touched_matches_simulation():
    rng = np.random.default_rng(0)
    E, k, tokens, trials = 64, 6, 16, 4000
    touched = [len(np.unique(np.concatenate([rng.choice(E, k, replace=False) for _ in range(tokens)])))
               for _ in range(trials)]
    assert ops.expected_experts_touched(E, k, tokens) == pytest.approx(np.mean(touched), rel=0.01)


def test_cache_bytes_caps_the_window():
    wl = Workload.forward(10)
    op = ops.attention("a", wl, CONVENTIONS["causal"], n_heads=4, kv_heads=2, qk_dim=8, v_dim=8,
                       kv_width=2 * 16, window=100, layer_kind="local")
    assert ops.cache_bytes(op, 1000, 3, "bf16") == 3 * 100 * 32 * 2
    assert ops.cache_bytes(op, 1000, 3, "fp8") == 3 * 100 * 32
    assert ops.cache_bytes(op, 60, 3, "fp8") == 3 * 60 * 32  # a window longer than the context: all of it


def test_an_op_is_one_occurrence_unless_its_count_says_more():
    """Every builder's op stands for one layer's (one module's) occurrence by default: callers that
    mean L layers say count=L, so a builder must never multiply behind their back."""
    from archcalc.ops.op import collective

    wl, conv = Workload.forward(4), CONVENTIONS["causal"]
    built = [
        ops.matmul("m", "ffn", wl, 8, 16),
        ops.contraction("c", "residual", wl, 8, 16),
        ops.expert_matmul("e", wl, 8, 16, 4, 2, bias=False),
        ops.attention("a", wl, conv, n_heads=2, kv_heads=1, qk_dim=4, v_dim=4, kv_width=8, window=None,
                      layer_kind="global"),
        ops.linear_attention("g", wl, n_heads=2, key_heads=1, key_dim=4, value_dim=4, chunk=4, conv_values=0),
        ops.lightning_attention("l", wl, conv, n_heads=2, head_dim=4, block=4),
        ops.selective_scan("s", wl, channels=4, d_state=2, conv_values=0),
        ops.state_space_duality("d", wl, conv, n_heads=2, head_dim=4, d_state=2, chunk=4, conv_values=0),
        ops.conv_state("v", wl, 8, 2, conv_values=8),
        ops.norm("n", wl, 8, "rmsnorm", False),
        ops.elementwise("x", "ffn", wl, 8, 1),
        ops.gather("t", "embedding", wl, 100, 8),
        collective("r", "attention", wl, 8, 2, "all_reduce"),
    ]
    assert [op.count for op in built] == [1] * len(built)


@pytest.mark.parametrize("build, field", [
    (lambda wl: ops.elementwise("x", "ffn", wl, 8, 1, tp="splti"), "op x: tp 'splti'"),
    (lambda wl: ops.elementwise("x", "fnn", wl, 8, 1), "op x: component 'fnn'"),
    (lambda wl: ops.elementwise("x", "ffn", wl, 8, 1, fn="sigmod"), "row function 'sigmod'"),
    (lambda wl: ops.norm("x", wl, 8, "rms_norm", False), "norm kind 'rms_norm'"),
    (lambda wl: ops.norm("x", wl, 8, None, False), "op x: a norm needs its kind"),
    (lambda wl: ops.norm("x", wl, 8, "rmsnorm", False, tp=None), "op x: tp None"),
])
def test_a_misspelt_label_is_refused_not_read_as_another(build, field):
    """The sharding policy reads every label but "replicated" and "row" alike, the norm FLOPs every
    kind but "rmsnorm" as a LayerNorm's, the kernels every unknown function as a sum: so an op refuses
    a label outside its set, naming it, instead of passing for a neighbour."""
    with pytest.raises(ValueError, match="valid") as e:
        build(Workload())
    assert str(e.value).startswith(field)


def test_a_workload_refuses_a_logits_mode_it_does_not_know():
    """Logits "all" (a training forward: every position) or "last" (an engine's prefill and decode:
    each sequence's last token); any other word would pass for "all" in logit_tokens."""
    assert Workload.decode(64, batch=3).logit_tokens == 3
    assert Workload(batch=3, new_tokens=4, context=4, logits="last").logit_tokens == 3
    assert Workload(batch=3, new_tokens=4, context=4).logit_tokens == 12
    with pytest.raises(ValueError, match="logits 'LAST'; valid: 'all', 'last'"):
        Workload(logits="LAST")


@pytest.mark.parametrize("batch, new_tokens, context", [(0, 1, 1), (1, 0, 4), (2, 5, 4), (-1, 1, 1)])
def test_a_workload_refuses_an_empty_or_impossible_step(batch, new_tokens, context):
    """A step needs a sequence (B ≥ 1) adding a token (T ≥ 1) to a context that holds them (S ≥ T):
    B = 0 would size every op at zero and T > S would attend to keys that do not exist. The line
    names all three (the CLI prints it as the field error)."""
    with pytest.raises(ValueError) as e:
        Workload(batch=batch, new_tokens=new_tokens, context=context)
    assert str(e.value) == f"invalid workload: batch {batch}, new tokens {new_tokens}, context {context}"
    assert Workload(batch=1, new_tokens=4, context=4).tokens == 4  # the edge S = T is a prefill


def test_a_dense_model_s_tokens_use_every_parameter():
    """Without experts every token runs every weight: active parameters equal the total for each dense
    bundled spec, hybrids with convolutions and hyper-connection mixes included."""
    from tests.conftest import BUNDLED, spec_of
    from archcalc.cost.totals import size

    for name in BUNDLED:
        spec = spec_of(name)
        if spec.ffn.moe is None and spec.vision is None:
            p = size(spec, Workload(), CONVENTIONS["causal"]).params
            assert p.active == p.total, name


def test_an_output_gate_reads_gate_and_output_and_writes_their_product():
    """Qwen3-Next's gated attention (Qwen3NextAttention: attn_output * torch.sigmoid(gate)) over
    16 heads × 256 a token: gate and output read, the product written, 3 × 4,096 values a token."""
    from tests.conftest import spec_of
    from archcalc.ops.layers import model_ops

    wl = Workload.forward(5)
    gate = next(op for op in model_ops(spec_of("qwen3-next-80b-a3b"), wl) if op.name == "layers.attn.gate")
    assert (gate.dims.width, gate.act_bytes) == (16 * 256, 5 * 3 * 4096 * 2)
    assert (gate.dims.fn, gate.dims.inputs) == ("sigmoid", 2)  # the kernel calibrate and --measure run for it


def test_round_int_rounds_halves_to_even_for_numbers_and_arrays():
    """Python's round() and numpy's rint agree (halves to even), so the scalar and array paths of the
    touched-expert count give the same integers."""
    from archcalc.ops.arrays import round_int

    xs = [0.5, 1.5, 2.5, 2.4999, 7.6]
    assert [round_int(x) for x in xs] == [0, 2, 2, 2, 8] == list(round_int(np.array(xs)))
    assert round_int(np.array(xs)).dtype.kind == "i"  # integers, as round() returns: counts, not floats


def _every_spec() -> list[str]:
    """Every bundled spec and every real config.json fixture."""
    import glob

    from archcalc.files import bundled_names

    return [*bundled_names("specs"), *sorted(glob.glob("tests/data/hf/*.json"))]


def test_an_op_s_tensor_shapes_hold_exactly_its_parameters(tmp_path):
    """Where an op names its parameter tensors (Op.shapes: convs, scan parameters, hyper-connection
    coefficients; training/tensors.py builds them), their elements sum to its parameter count, for
    every bundled spec and HF fixture and for the conv-bias switches no released config flips (Mamba
    and Bamba convs without a bias, LFM2's convs with one)."""
    import json
    from math import prod

    from archcalc.ops.layers import model_ops
    from archcalc.spec.catalog import load_model

    flipped = []
    for config, key, value in (("mamba-130m-hf", "use_conv_bias", False), ("bamba-9b", "mamba_conv_bias", False),
                               ("lfm2-1.2b", "conv_bias", True)):
        raw = json.loads(open(f"tests/data/hf/{config}.json").read())
        path = tmp_path / f"{config}.json"
        path.write_text(json.dumps({**raw, key: value}))
        flipped.append(str(path))
    checked = 0
    for name in [*_every_spec(), *flipped]:
        for op in model_ops(load_model(name)[0], Workload()):
            if op.shapes:
                checked += 1
                assert sum(prod(s) for s in op.shapes) == op.params, (name, op.name, op.shapes, op.params)
    assert checked > 100


def test_a_linear_layer_s_state_is_one_matrix_per_head():
    """The recurrent state a linear op keeps is one qk_dim × v_dim matrix per head, as transformers'
    caches hold it (Gated DeltaNet [B, Hv, d_k, d_v], Mamba-2 [B, H, P, N], Mamba [B, E, N], MiniMax's
    lightning [B, H, d, d]; xLSTM's mLSTM [B, H, d_k, d_v] beside its normaliser [B, H, d_k] and max [B, H, 1];
    RWKV-4's numerator, denominator and max a channel, a 1 × 3 "matrix" of each of D heads;
    its size is pinned to those caches in tests/spec/test_hf_oracle.py); a layer whose only state is its conv's
    inputs (LFM2, and Inkling's short convs beside its attention) keeps none, its channels as heads of 1 × 1."""
    from archcalc.ops.layers import model_ops
    from archcalc.spec.catalog import load_model

    seen = set()
    for name in _every_spec():
        spec = load_model(name)[0]
        for op in model_ops(spec, Workload()):
            d = op.dims
            if op.kind == "attention" and d.layer_kind == "linear":
                assert all(type(x) is int and x >= 1 for x in (d.n_heads, d.n_kv_heads, d.qk_dim, d.v_dim)), name
                vectors = d.qk_dim + 1 if spec.linear and spec.linear.kind == "mlstm" else 0  # mLSTM's n and m
                if d.state_values:
                    assert d.state_values == d.n_heads * (d.qk_dim * d.v_dim + vectors), name
                else:
                    assert (d.qk_dim, d.v_dim) == (1, 1), name
                seen.add(bool(d.state_values))
    assert seen == {True, False}


def test_every_op_in_every_list_runs_at_least_once():
    """An op of count 0 is a kernel no layer runs: --measure would time it and a calibrated step charge
    its dispatch. Over every bundled spec and HF fixture (pure Mamba models have no FFN and no softmax
    attention; Nemotron-H has FFN-only and mixer-only blocks), each op runs in at least one layer."""
    from pathlib import Path

    from tests.conftest import BUNDLED
    from archcalc.ops.layers import model_ops
    from archcalc.spec.catalog import load_model

    fixtures = sorted(str(p) for p in (Path(__file__).parents[1] / "data" / "hf").glob("*.json"))
    for name in [*BUNDLED, *fixtures]:
        idle = [op.name for op in model_ops(load_model(name)[0], Workload.forward(4)) if op.count < 1]
        assert not idle, (name, idle)


def test_a_norm_without_a_kind_names_the_two_kinds():
    with pytest.raises(ValueError) as e:
        ops.norm("layers.x", Workload(), 8, None, False)
    assert str(e.value) == "op layers.x: a norm needs its kind; valid: ('rmsnorm', 'layernorm')"


def test_an_embedding_looks_up_one_row_per_token():
    """transformers' embed_tokens(input_ids): B × T lookups of one D-wide row each, the rows the
    --measure kernel gathers (GPT-2: 3 sequences of 2 tokens, D = 768)."""
    import torch

    from archcalc.measure.kernels import kernel
    from archcalc.ops.layers import model_ops
    from tests.conftest import spec_of

    (emb,) = [o for o in model_ops(spec_of("gpt2"), Workload(batch=3, new_tokens=2, context=2)) if o.name == "embedding"]
    assert tuple(kernel(emb, torch.device("cpu"), torch.float32).run(0).shape) == (6, 768)
