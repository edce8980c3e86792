"""Shared helpers: load bundled specs and run the analytic pipeline; under CI,
no test may skip (only tests marked `gpu` may, on a machine without one)."""

from __future__ import annotations

import os

import pytest

from archcalc.cost.totals import size
from archcalc.files import bundled_names
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import load_model
from archcalc.spec.model import ModelSpec

BUNDLED = bundled_names("specs")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device; the only tests that may skip in CI")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    """CI=true: a skipped test that is not marked `gpu` fails the run (a missing
    torch or transformers must not turn the strongest tests into a green skip)."""
    if not os.environ.get("CI"):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = [r for r in (reporter.stats.get("skipped", []) if reporter else []) if "gpu" not in r.keywords]
    if skipped:
        reporter.write_line(f"CI: {len(skipped)} test(s) skipped without the gpu marker: "
                            + ", ".join(r.nodeid for r in skipped[:10]), red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
