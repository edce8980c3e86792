"""Bytes kept for backward (training/activations.py) against what torch keeps:
the reference model's forward under a tracker of live storages
(torch_probe.py), per extra sequence, must equal the prediction exactly."""

from __future__ import annotations

import pytest
import torch
from conftest import REFERENCE_BUNDLED, debug_spec, spec_of
from specgen import first_layers, random_spec, shrink
from torch_probe import per_sequence_bytes

from archcalc.measure.reference import build_reference_model
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec
from archcalc.training.activations import activation_memory

TOKENS = 8
DTYPES = {torch.float32: "fp32", torch.bfloat16: "bf16"}


def predicted(spec: ModelSpec, batch: int, dtype: str, **kw) -> float:
    wl = Workload.forward(TOKENS, batch, weight_dtype=dtype, act_dtype=dtype)
    return activation_memory(spec, model_ops(spec, wl), batch * TOKENS, dtype, **kw).stored


def check(spec: ModelSpec, *, kernel="flash", recompute="none", dropout=0.0, z_loss=False, dtype=torch.float32):
    model = build_reference_model(spec, "cpu", dtype, attention="sdpa" if kernel == "flash" else "explicit",
                                  fused_norms=True, recompute=recompute, dropout=dropout)
    kw = dict(kernel=kernel, recompute=recompute, dropout=dropout > 0, z_loss=z_loss)
    ours = predicted(spec, 2, DTYPES[dtype], **kw) - predicted(spec, 1, DTYPES[dtype], **kw)
    assert ours == per_sequence_bytes(model, TOKENS, z_loss=z_loss), (spec.name, kw)


def flash_runs(spec: ModelSpec) -> bool:
    """torch's CPU flash kernel: causal, whole context, q/k head dim = v head dim; anything else
    falls back to the math path, which keeps the probabilities (not FlashAttention's rule)."""
    a = spec.attention
    return (a.sliding_window is None and a.chunk_size is None and a.softcap is None and not a.sinks
            and spec.position.kind != "alibi" and spec.qk_head_dim == spec.v_head_dim)


SHRUNK = {name: shrink(spec_of(name)) for name in REFERENCE_BUNDLED}


@pytest.mark.parametrize("name", REFERENCE_BUNDLED)
def test_bundled_specs_shrunk_keep_what_torch_keeps(name):
    spec = SHRUNK[name]
    check(spec, kernel="eager")
    check(spec, kernel="eager", recompute="selective")
    if flash_runs(spec):
        check(spec)
        check(spec, recompute="full")


def test_most_bundled_specs_are_pinned_at_full_width():
    assert len(DENSE_FIRST) >= 25


def test_most_bundled_specs_run_the_flash_kernel():
    """The flash rule is pinned on most bundled layouts, not on a handful."""
    assert sum(flash_runs(s) for s in SHRUNK.values()) >= 20


RANDOM = [random_spec(seed) for seed in range(90)]


@pytest.mark.parametrize("spec", RANDOM, ids=lambda s: s.name)
def test_random_specs_keep_what_torch_keeps(spec):
    check(spec, kernel="eager")
    if flash_runs(spec):
        check(spec)
        check(spec, recompute="selective")
    if spec.residual.kind in ("standard", "parallel"):
        check(spec, kernel="eager", recompute="full")


def test_random_specs_cover_the_options():
    assert len(RANDOM) == 90
    assert sum(flash_runs(s) for s in RANDOM) >= 8
    assert any(s.ffn.moe for s in RANDOM) and any(s.attention.kind == "mla" for s in RANDOM)
    assert any(s.residual.kind == "hyper" and s.residual.dynamic for s in RANDOM)
    assert any(s.residual.kind == "hyper" and not s.residual.dynamic for s in RANDOM)
    assert {"mhc", "attnres", "parallel", "standard"} <= {s.residual.kind for s in RANDOM}
    assert any(s.residual.scales for s in RANDOM) and any(s.ffn.moe and s.ffn.moe.output_bias for s in RANDOM)


@pytest.mark.parametrize("kernel", ["flash", "eager"])
@pytest.mark.parametrize("recompute", ["none", "selective"])
def test_dropout_masks(kernel, recompute):
    """Megatron's hidden dropout (embedding, each unit's output) and, in the eager core, the attention
    probabilities' mask and dropped copy: torch's fused dropout keeps a bool mask."""
    check(debug_spec(), kernel=kernel, recompute=recompute, dropout=0.1)


@pytest.mark.parametrize("kernel", ["flash", "eager"])
def test_z_loss_keeps_the_fp32_logits(kernel):
    check(debug_spec(), kernel=kernel, z_loss=True)


@pytest.mark.parametrize("overrides", [{}, {"attention": {"qk_norm": "head"}}, {"ffn": {"activation": "geglu"}},
                                       {"final_softcap": 30.0}, {"residual": {"kind": "hyper", "streams": 3}},
                                       {"residual": {"kind": "mhc", "streams": 2}},
                                       {"residual": {"kind": "attnres", "blocks": 2}}])
def test_bf16_activations(overrides):
    """bf16 activations: bf16 tensors, fp32 norm statistics and log-sum-exp, fp32 log-probabilities."""
    check(debug_spec(**overrides), dtype=torch.bfloat16)


def test_full_recompute_keeps_each_layer_input_only():
    """Full recomputation: each layer keeps its [B·T, D] input; the head and loss keep theirs."""
    spec = debug_spec()
    none = predicted(spec, 1, "fp32")
    full = activation_memory(spec, model_ops(spec, Workload.forward(TOKENS, 1, act_dtype="fp32")), TOKENS, "fp32",
                             recompute="full")
    assert full.layers == spec.n_layers * TOKENS * spec.d_model * 4
    assert full.stored < none and full.recompute_peak > 0


FULL_TOKENS = 2048


# Routing picks rows by value (torch.where), which fake tensors cannot do: MoE layers are pinned at
# CPU size above, and the full-width test takes every bundled model whose first two layers are dense.
DENSE_FIRST = [name for name in REFERENCE_BUNDLED if "moe" not in first_layers(spec_of(name), 2).layer_ffn]


@pytest.mark.parametrize("name", DENSE_FIRST)
def test_bundled_specs_at_full_width_under_fake_tensors(name):
    """The real widths (two layers of each bundled model, 2,048 tokens): torch's FakeTensorMode runs the
    CPU kernels' shapes without allocating, and what the forward keeps equals the prediction exactly."""
    spec = first_layers(spec_of(name), 2)
    kernel = "flash" if flash_runs(spec) else "eager"
    dtype = torch.float32 if spec.norm.kind == "layernorm" else torch.bfloat16  # CPU LayerNorm stats: input dtype
    from torch_probe import fake_per_sequence_bytes

    torch_bytes = fake_per_sequence_bytes(spec, FULL_TOKENS, dtype, attention="sdpa" if kernel == "flash" else
                                          "explicit", fused_norms=True)
    wl = lambda b: Workload.forward(FULL_TOKENS, b, weight_dtype=DTYPES[dtype], act_dtype=DTYPES[dtype])  # noqa: E731
    ours = [activation_memory(spec, model_ops(spec, wl(b)), b * FULL_TOKENS, DTYPES[dtype], kernel=kernel).stored
            for b in (1, 2)]
    assert ours[1] - ours[0] == torch_bytes


@pytest.mark.parametrize("spec", RANDOM[:40], ids=lambda s: s.name)
def test_everything_counted_grows_with_the_batch(spec):
    """What the prediction counts is per sequence (batch-shared tables are not counted), so two sequences
    keep exactly twice one sequence's bytes: no op may add a constant the per-sequence pins cannot see."""
    for kernel in ("flash", "eager"):
        assert predicted(spec, 2, "fp32", kernel=kernel) == 2 * predicted(spec, 1, "fp32", kernel=kernel)
