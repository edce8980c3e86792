"""Properties of training plans over bundled specs and every layout the solver tries
(hypothesis draws them): memory never negative, ZeRO and recomputation never add memory,
peak rates a lower bound on time (MFU at most 1 under them)."""

from __future__ import annotations

from dataclasses import replace

from conftest import BUNDLED, spec_of
from hypothesis import given
from hypothesis import strategies as st

from archcalc.hardware.profile import load_hardware
from archcalc.training.layout import Layout, Recipe
from archcalc.training.solver import layouts
from archcalc.training.step import train

H100 = load_hardware("h100")
STATES = ("weights", "master weights", "gradients", "optimizer states")


@st.composite
def plans(draw):
    spec = spec_of(draw(st.sampled_from([n for n in BUNDLED if n != "debug"])))
    gpus = draw(st.sampled_from([8, 16, 64]))
    recipe = Recipe(seq=draw(st.sampled_from([1024, 4096])), global_batch=256,
                    optimizer=draw(st.sampled_from(["adamw", "sgd", "adafactor", "muon"])))
    options = layouts(spec, gpus, recipe, Layout())
    return spec, draw(st.sampled_from(options)), recipe


@given(plans())
def test_memory_terms_are_never_negative(plan):
    spec, layout, recipe = plan
    r = train(spec, H100, layout, recipe)
    for stage in r.memory.stages:
        assert all(v >= 0 for v in stage.terms.values()), stage.terms
    assert r.memory.total == max(s.total for s in r.memory.stages)


@given(plans())
def test_peak_rates_bound_every_step(plan):
    spec, layout, recipe = plan
    steps = train(spec, H100, layout, recipe).steps
    assert steps[0].rates.label == "peak"
    assert all(steps[0].time <= s.time for s in steps)
    assert 0 < steps[0].mfu <= 1


@given(plans())
def test_zero_stages_and_recomputation_never_add_memory(plan):
    spec, layout, recipe = plan
    if layout.shard_ranks == 1:
        return
    states = [sum(train(spec, H100, replace(layout, zero=z), recipe).memory.worst.terms[t] for t in STATES)
              for z in (0, 1, 2, 3)]
    assert states == sorted(states, reverse=True)
    plans_ = [train(spec, H100, replace(layout, recompute=c), recipe).memory.worst for c in ("none", "selective",
                                                                                           "full")]
    act = [p.terms["activations"] for p in plans_]
    assert act[1] <= act[0]
    # Full recomputation keeps each layer's input and rebuilds one layer at a time: it saves memory once
    # a stage holds two or more (layer, micro-batch) pairs; with one it only adds the input.
    if spec.n_layers // layout.pp * plans_[0].in_flight >= 2:
        assert act[2] <= act[0]
