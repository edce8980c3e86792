"""Shared helpers: load bundled specs and run the analytic pipeline."""

from __future__ import annotations

import pytest

from archcalc.cost.totals import size
from archcalc.files import bundled_names
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import load_model
from archcalc.spec.model import ModelSpec

BUNDLED = bundled_names("specs")


def spec_of(name: str) -> ModelSpec:
    return load_model(name)[0]


def sized(spec: ModelSpec, context: int = 1, batch: int = 1, convention: str = "causal", **dtypes):
    return size(spec, Workload.forward(context, batch, **dtypes), CONVENTIONS[convention])


def tiny(**overrides) -> ModelSpec:
    """A small llama-like spec; nested dicts in `overrides` replace whole sections."""
    base = {"name": "tiny", "d_model": 64, "n_layers": 2, "vocab_size": 97, "max_context": 64,
            "attention": {"n_heads": 4, "n_kv_heads": 2}, "ffn": {"d_ff": 96}}
    return ModelSpec.model_validate({**base, **overrides})


@pytest.fixture(params=BUNDLED)
def bundled_spec(request) -> ModelSpec:
    return spec_of(request.param)
