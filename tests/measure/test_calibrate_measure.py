"""`archcalc calibrate --quick` and `roofline --measure` for real on this CPU.

Timings are noise; these tests assert only what noise cannot change: every
op has a kernel and a positive time, achieved FLOP/s stay below the
calibrated ceiling by more than noise could explain, the calibration file
round-trips and calibrates predictions, the JSON schema, and the bad inputs
(one line, exit 2, nothing written).  CUDA-only checks are marked `gpu`.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner

from archcalc.cli import cli
from archcalc.cost.rates import calibrated_rates
from archcalc.hardware.calibration import SCHEMA, load_calibration
from archcalc.hardware.profile import load_hardware
from archcalc.measure.calibrate import TORCH_DTYPES, host_fit, in_step_slowdown
from archcalc.measure.kernels import grouped_mm_works

NOISE = 1.5  # a kernel may beat the median of the calibration grid by this much before it is suspicious


def run(*args):
    return CliRunner().invoke(cli, list(args))


@pytest.fixture(scope="module")
def calibration_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cal") / "cpu.yaml"
    r = run("calibrate", "--quick", "--device", "cpu", "--out", str(path), "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == SCHEMA and doc["path"] == str(path)
    return path


def test_calibration_round_trips_and_holds_every_kind_of_point(calibration_file):
    cal = load_calibration(calibration_file)
    assert cal.device.kind == "cpu" and cal.device.threads == torch.get_num_threads()
    assert cal.device.torch == torch.__version__
    assert {p.kind for p in cal.rows} == {"rmsnorm", "layernorm", "activation", "gated_activation", "add", "rope",
                                          "gather"}
    assert any(p.q_len == 1 for p in cal.attention) and any(p.window for p in cal.attention)
    assert all(p.seconds > 0 for p in [*cal.matmul, *cal.attention, *cal.rows])
    assert cal.launch_s > 0 and cal.bandwidth.read_bytes_per_s > 0
    # the eager step's terms: host time fitted over three depths of the debug-sized Llama, the slowdown on the
    # real-width one
    assert cal.dispatch_s is not None and cal.step_host_s is not None
    assert cal.step_slowdown is not None and 0 <= cal.step_slowdown <= 9
    assert "debug size" in cal.dispatch_source and "2, 8, 32 layers" in cal.dispatch_source
    assert "width 1536" in cal.step_slowdown_source
    # a CPU runs kernels as issued (no CUDA graphs); experts grouped where torch has grouped_mm here
    assert not cal.graphs and cal.grouped_experts == grouped_mm_works("cpu", TORCH_DTYPES[cal.dtype])
    # where experts run grouped, the grouped GEMMs' own grid: 8 experts, every (rows, k, n) of --quick's
    assert bool(cal.grouped) == cal.grouped_experts
    assert sorted((p.groups, p.m, p.k, p.n) for p in cal.grouped) == sorted(
        (8, m, k, n) for m in (1, 4, 32) for k, n in ((1024, 1024), (512, 1024))) or not cal.grouped_experts
    assert all(p.seconds > 0 for p in cal.grouped)
    assert load_calibration(calibration_file) == cal  # YAML → model → YAML is lossless
    assert calibration_file.read_text() == cal.to_yaml()


@pytest.mark.parametrize("points, fixed, per", [
    # 31 and 115 kernels (the debug Llama at 2 and 8 layers) on a line of 2 ms + 44 µs a kernel
    ([(31, 2e-3 + 31 * 44e-6), (115, 2e-3 + 115 * 44e-6)], 2e-3, 44e-6),
    # three noisy depths: the least-squares line, not the two ends
    ([(10, 1.0), (20, 3.0), (30, 2.0)], 1.0, 0.05),
    # a slope below 0 is noise, not negative dispatch: a flat line at the mean
    ([(31, 3e-3), (115, 2e-3)], 2.5e-3, 0.0),
    # a line through negative fixed time: refitted through the origin, Σkh / Σk²
    ([(10, 1e-4), (20, 4e-4)], 0.0, (10 * 1e-4 + 20 * 4e-4) / (10**2 + 20**2)),
])
def test_host_time_is_fitted_over_depths(points, fixed, per):
    assert host_fit(points) == pytest.approx((fixed, per), abs=1e-12)


def test_the_in_step_slowdown_is_measured_only_where_the_kernels_show():
    """A CPU adds host and kernels: a 12 ms step of 1 ms host and 10 ms kernels is 10 % slowdown.  A GPU
    overlaps them: kernel-bound, the step over the kernels; host-bound (the H200's width-1536 step: 0.18 ms
    of kernels under 3.1 ms of host issuing), hidden, however far the step strays from the host's time."""
    assert in_step_slowdown(12e-3, 10e-3, 1e-3, overlap=False) == pytest.approx(0.1)
    assert in_step_slowdown(12e-3, 10e-3, 1e-3, overlap=True) == pytest.approx(0.2)
    assert in_step_slowdown(3.5e-3, 0.18e-3, 3.1e-3, overlap=True) is None


def test_a_calibration_is_a_device_for_predictions(calibration_file):
    hw = load_hardware(str(calibration_file))
    assert hw.name.startswith("local: ") and hw.calibration is not None
    r = run("roofline", "debug", "--gpu", str(calibration_file), "--prompt", "32", "--gen", "4", "--json")
    assert r.exit_code == 0, r.output
    labels = [p["rates"]["label"] for p in json.loads(r.stdout)["predictions"]]
    assert labels == ["peak", "calibrated"]


def test_measure_runs_every_op_and_stays_under_the_ceilings(calibration_file):
    r = run("roofline", "debug", "--gpu", str(calibration_file), "--measure", "--device", "cpu", "--prompt", "32",
            "--gen", "4", "--repeats", "3", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "archcalc.roofline/2"
    m = doc["measured"]
    rates = calibrated_rates(load_hardware(str(calibration_file)), load_calibration(calibration_file))
    for phase in ("prefill", "decode"):
        predicted = {o["name"]: o for o in doc["predictions"][0][phase]["ops"]}
        measured = m[phase]["ops"]
        assert [o["name"] for o in measured] == list(predicted)  # the same op list, in order
        assert all(o["time_s"] > 0 for o in measured)
        assert m[phase]["time_s"] == pytest.approx(sum(o["time_s"] for o in measured))
        for o in measured:
            flops = predicted[o["name"]]["flops"]
            assert flops / o["time_s"] <= NOISE * rates.matmul, o["name"]
        assert set(m[phase]["error"]) == {"peak", "calibrated"}
        # Peak is a lower bound on time: no measured step beats it.
        assert m[phase]["error"]["peak"] < 0


def test_measure_table_shows_measured_beside_predicted(calibration_file):
    r = run("roofline", "debug", "--gpu", str(calibration_file), "--measure", "--device", "cpu", "--prompt", "16",
            "--gen", "2", "--repeats", "1", "--phase", "decode")
    assert r.exit_code == 0, r.output
    for text in ("measured", "calibrated vs measured", "FLOP/s", "layers.attn.norm", "time %", "FLOP %"):
        assert text in r.stdout


def test_bad_devices_and_files_are_one_line(tmp_path, calibration_file):
    out = tmp_path / "never.yaml"
    cases = [
        (["calibrate", "--device", "tpu"], "--device"),
        (["roofline", "debug", "--gpu", str(calibration_file), "--measure", "--device", "tpu"], "--device"),
    ]
    if not torch.cuda.is_available():
        cases.append((["calibrate", "--device", "cuda", "--out", str(out)], "cuda requested"))
        cases.append((["roofline", "debug", "--measure", "--device", "cuda", "--gpu", str(calibration_file)],
                      "cuda requested"))
    corrupt = tmp_path / "corrupt.yaml"
    corrupt.write_text(calibration_file.read_text()[:-200] + "\n  - {m: [1, 2")
    foreign = tmp_path / "foreign.yaml"
    foreign.write_text(calibration_file.read_text().replace("archcalc.calibration/1", "someone.else/3"))
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(calibration_file.read_text().replace("launch_s:", "launch_s: fast\nold_launch_s:"))
    cases += [(["roofline", "debug", "--gpu", str(corrupt)], "YAML syntax error"),
              (["roofline", "debug", "--gpu", str(foreign)], "not an archcalc calibration"),
              (["roofline", "debug", "--gpu", str(wrong)], "launch_s"),
              (["calibrate", "--out", str(tmp_path), "--quick"], "--out")]
    for args, needle in cases:
        r = run(*args)
        assert r.exit_code == 2, (args, r.output)
        assert r.stderr.count("\n") == 1 and needle in r.stderr, (args, r.stderr)
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))


def test_local_is_the_newest_calibration(tmp_path, monkeypatch, calibration_file):
    monkeypatch.setenv("ARCHCALC_CALIBRATION_DIR", str(tmp_path))
    r = run("roofline", "debug", "--gpu", "local")
    assert r.exit_code == 2 and "run `archcalc calibrate` first" in r.stderr
    (tmp_path / "cpu-x.yaml").write_text(calibration_file.read_text())
    assert load_hardware("local").calibration == load_calibration(calibration_file)


def test_without_torch_measure_and_calibrate_say_what_to_install():
    """torch hidden from the import system: one line naming the extra, exit 2."""
    code = ("import sys; sys.modules['torch'] = None; from archcalc.cli import main; "
            "sys.argv = ['archcalc'] + sys.argv[1:]; main()")
    for args in (["calibrate", "--quick"], ["roofline", "debug", "--gpu", "h100", "--measure"]):
        p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
        assert p.returncode == 2, p.stderr
        assert p.stderr.count("\n") == 1 and "pip install 'archcalc[measure]'" in p.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_calibration_matches_a_bundled_profile(tmp_path):
    path = tmp_path / "gpu.yaml"
    r = run("calibrate", "--quick", "--device", "cuda", "--out", str(path))
    assert r.exit_code == 0, r.output
    cal = load_calibration(path)
    assert cal.device.kind == "cuda" and cal.profile is not None and cal.graphs
    # replayed from a CUDA graph, a tiny kernel costs the device a few µs, not the host's ~15 µs to issue it
    assert cal.launch_s < 8e-6
