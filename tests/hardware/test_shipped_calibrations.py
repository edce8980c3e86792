"""Calibrations shipped with bundled profiles (hardware/calibrations/<profile>.yaml): each measured on
the device its profile describes, used when the user has made none for it, and overridden by one."""

from __future__ import annotations

import pytest
from conftest import synthetic_calibration

from archcalc.hardware.calibration import calibration_dir, load_calibration, save_calibration
from archcalc.hardware.profile import load_hardware, shipped_calibrations


@pytest.mark.parametrize("stem", sorted(shipped_calibrations()))
def test_each_shipped_calibration_was_measured_on_its_device(stem):
    cal = load_calibration(shipped_calibrations()[stem])
    hw = load_hardware(stem)
    assert cal.profile == stem and hw.calibration == cal
    assert cal.device.kind == "cuda" and cal.graphs  # kernels timed from CUDA graphs: the device's own time
    best = max(2 * p.m * p.k * p.n / p.seconds for p in cal.matmul)
    assert best < hw.peak(cal.dtype) and cal.bandwidth.copy_bytes_per_s < hw.memory_bandwidth  # below datasheet


def test_the_h200_ships_one_and_an_h100_none():
    assert load_hardware("h200").calibration.device.name == "NVIDIA H200"
    assert load_hardware("h100-sxm").calibration is None


def test_a_users_calibration_wins_over_the_shipped_one():
    save_calibration(synthetic_calibration(profile="h200"), calibration_dir() / "mine.yaml")
    assert load_hardware("h200").calibration.device.name == "Test Device"
