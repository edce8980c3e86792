"""Shared helpers: load bundled specs and run the analytic pipeline; under CI,
no test may skip (only tests marked `gpu` may, on a machine without one)."""

from __future__ import annotations

import os
import sys

import pytest

from archcalc.cost.totals import size
from archcalc.files import bundled_names, read_yaml, resolve_name
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import load_model
from archcalc.spec.model import ModelSpec

BUNDLED = bundled_names("specs")
# The bundled specs the torch reference model can build: all but those with linear-attention
# layers (Qwen3-Next, Kimi Linear), DeepSeek Sparse Attention's indexer (DeepSeek-V3.2, GLM-5),
# attention whose layers differ in shape (Gemma 4, MiMo-V2-Flash) or Inkling's parts, which transformers' own modules pin
# instead (tests/spec/test_hf_oracle.py, tests/spec/test_gemma4.py).  Read from the YAML, not the
# validated spec: mutmut imports this file with every mutated function set to fail, so nothing here may
# call archcalc's formulas at import time.
PER_KIND_GEOMETRY = ("indexer", "global_head_dim", "global_kv_heads", "global_k_eq_v", "kv_shared_layers",
                     "local_heads", "v_norm", "relative", "kv_conv",  # (Inkling's relative logits and convs too)
                     "cca",  # (and ZAYA1's compressed convolutional attention)
                     "compressed",  # (and DeepSeek-V4's compressed sparse attention)
                     "local_mla", "rope_key_norm")  # (and dots3-note's two MLA geometries)
REFERENCE_BUNDLED = [n for n in BUNDLED if "linear" not in (y := read_yaml(resolve_name(n, "specs")))
                     and not set(PER_KIND_GEOMETRY) & set(y["attention"])]


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device; the only tests that may skip in CI")


@pytest.fixture(autouse=True)
def _own_calibration_dir(tmp_path_factory, monkeypatch):
    """No test sees the user's calibrations (hardware/calibration.py: ARCHCALC_CALIBRATION_DIR)."""
    monkeypatch.setenv("ARCHCALC_CALIBRATION_DIR", str(tmp_path_factory.mktemp("calibrations")))


@pytest.fixture(autouse=True)
def _fresh_caches():
    """Each test computes its own numbers: the op-list, critical-batch and training caches start empty
    (a cached value computed by another test, or by mutmut's parent process, would hide a mutant)."""
    for module, name in (("archcalc.cost.roofline", "_OPS_CACHE"), ("archcalc.cost.roofline", "_CRITICAL_CACHE"),
                         ("archcalc.training.memo", "_CACHE")):
        loaded = sys.modules.get(module)
        if loaded is not None:
            getattr(loaded, name).clear()


def pytest_collection_modifyitems(config, items):
    """In mutmut's copy of the project (mutants/, where it keeps mutmut-stats.json): the fastest tests
    first, by the durations mutmut recorded, so that `-x` stops a killed mutant after its quickest
    failing test instead of after whichever slow tests the unordered set it passes came first.  The
    order decides only how soon a run stops, never whether a mutant is killed."""
    import json

    stats, recheck = config.rootpath / "mutmut-stats.json", config.rootpath / "test-durations.json"
    seconds = json.loads(stats.read_text()).get("duration_by_test", {}) if stats.is_file() else {}
    if recheck.is_file():  # scripts/mutation.py --recheck's clean run (a new checkout has no mutmut stats)
        seconds.update(json.loads(recheck.read_text()))
    if seconds:
        items.sort(key=lambda item: seconds.get(item.nodeid, float("inf")))


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


def debug_spec(**overrides) -> ModelSpec:
    """The bundled specs/debug.yaml (D 64, 2 layers, GQA 4/2 of 16 dims, SwiGLU
    d_ff 176, V 256, context 128) with `overrides`.  A dict merges into its
    section (`attention={"sliding_window": 4}` keeps the heads); any other value
    replaces the key; None anywhere drops the key back to its default
    (`ffn={"d_ff": None}` for the default ratio, `max_context=None`)."""
    data = spec_of("debug").model_dump(exclude_defaults=True)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            value = {**data[key], **value}
        data[key] = {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value
    return ModelSpec.model_validate({k: v for k, v in data.items() if v is not None})


@pytest.fixture(params=BUNDLED)
def bundled_spec(request) -> ModelSpec:
    return spec_of(request.param)


# ---- hypothesis profiles (tests/properties) -------------------------------------------------
# "ci" (loaded when CI is set): the same examples on every run, no example
# database, a fixed budget; "dev": fresh random examples each run, and
# hypothesis's database replays any failure it found before.
try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # hypothesis is a dev dependency; only tests/properties needs it
    pass
else:
    _hypothesis_settings.register_profile("ci", derandomize=True, database=None, max_examples=60, deadline=None,
                                          print_blob=True)
    _hypothesis_settings.register_profile("dev", max_examples=60, deadline=None)
    _hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "dev")


def synthetic_calibration(*, matmul_rate: float = 1e12, read: float = 1e11, copy: float = 8e10, launch: float = 0.0,
                          profile: str | None = None, dtype: str = "bf16", **extra):
    """A Calibration whose every matmul point runs at `matmul_rate` FLOP/s (after
    the launch cost), over a small (m, k·n) grid; for tests of the rate set."""
    from archcalc.hardware.calibration import Bandwidth, Calibration, DeviceInfo, MatmulPoint

    points = [MatmulPoint(m=m, k=k, n=n, seconds=launch + 2 * m * k * n / matmul_rate)
              for m in (1, 16, 256) for k, n in ((256, 256), (1024, 4096))]
    return Calibration(device=DeviceInfo(name="Test Device", kind="cpu", torch="0", threads=1, date="2026-01-01"),
                       profile=profile, dtype=dtype, launch_s=launch,
                       bandwidth=Bandwidth(copy_bytes_per_s=copy, read_bytes_per_s=read, buffer_bytes=2**28),
                       matmul=points, **extra)
