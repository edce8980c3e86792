"""Predictions against published end-to-end measurements (docs/data/published_speed.yaml:
engine, version, hardware, dtypes, TP, batch and lengths as each source states
them, with its URL and a verbatim quote).  Peak must be a strict lower bound on
every one; the typical rate set must be far closer than peak.  The bands are
the errors docs/validation.md reports, so a change that worsens them fails."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import published  # noqa: E402

CHECKS = [published.check(e) for e in published.entries()]


def test_enough_measurements_across_engines_and_devices():
    assert len(CHECKS) >= 25
    assert len({c.entry["engine"].split(" ")[0] for c in CHECKS}) >= 4
    assert len({c.entry["hardware"] for c in CHECKS}) >= 5
    assert {c.entry["tp"] for c in CHECKS} >= {1, 2, 4, 8}


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.entry["id"])
def test_peak_is_a_strict_lower_bound(check):
    assert check.predicted_s["peak"] < check.measured_s


def test_typical_is_much_closer_than_peak():
    peak_median, _ = published.summary(CHECKS, "peak")
    typical_median, typical_worst = published.summary(CHECKS, "typical")
    assert typical_median < peak_median / 1.8
    assert typical_median <= 0.21 and typical_worst <= 0.55  # docs/validation.md: today 20 % and 51 %


def test_tensor_parallel_decode_pays_one_latency_per_all_reduce():
    """gpt-fast's batch-1 decode over 4 and 8 A100s (2 all-reduces a layer, each a one-shot kernel):
    the typical rates land within 25 % of every published TP row on NVLink; a ring's 2(t − 1) latency
    steps put the 8-GPU rows 13-51 % slow."""
    rows = [c for c in CHECKS if c.entry["tp"] > 1 and c.entry["engine"] == "gpt-fast"]
    assert len(rows) == 5
    assert all(abs(c.error("typical")) <= 0.25 for c in rows)
