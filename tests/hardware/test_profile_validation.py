"""Hardware profiles and calibrations are validated (hardware/bounds.py): every
number finite, of its type (strict: no "1e12" strings, no bools) and inside
a range no real device leaves; usable memory within total memory.  A bad
profile or calibration passed with --gpu PATH is one `error:` line naming the
file and the dotted field, exit status 2; never a traceback, a division by
zero or `Infinity` in the JSON."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archcalc.cli import cli
from archcalc.errors import InputError
from archcalc.files import bundled_dir
from archcalc.hardware.bounds import MAX_BANDWIDTH, MAX_FLOPS, MAX_MEMORY_BYTES, MIN_MEMORY_BYTES
from archcalc.hardware.calibration import load_calibration
from archcalc.hardware.profile import all_hardware, load_profile, local_profile
from conftest import synthetic_calibration

BUNDLED = sorted(bundled_dir("hardware").glob("*.yaml"))
H100 = bundled_dir("hardware") / "h100-sxm.yaml"


def _data(path: Path = H100) -> dict:
    return yaml.safe_load(path.read_text())


def _set(data: dict, dotted: str, value) -> dict:
    """`data` with the field at `dotted` (a.b.0.c) set to `value`; the sentinel DROP removes it."""
    *parents, last = dotted.split(".")
    node = data
    for key in parents:
        if isinstance(node, list):  # junk an earlier draw put there: a list, indexed by number only
            if not key.isdigit() or int(key) >= len(node) or not isinstance(node[int(key)], (dict, list)):
                return data  # junk an earlier draw put there has no such item
            node = node[int(key)]
            continue
        if not isinstance(node.get(key), (dict, list)):  # absent, or junk an earlier draw put there
            node[key] = {}
        node = node[key]
    if value is DROP:
        if isinstance(node, dict):
            node.pop(last, None)
    elif isinstance(node, list):
        if last.isdigit() and int(last) < len(node):
            node[int(last)] = value
    else:
        node[last] = value
    return data


DROP = object()


class _Dumper(yaml.SafeDumper):
    """Quotes a string such as "1e12" that archcalc's YAML 1.2 reader would take for a float."""


YAML12_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_FLOAT, list("-+0123456789"))


def _write(tmp_path: Path, data: dict, name: str = "gpu.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.dump(data, Dumper=_Dumper, sort_keys=False))
    return path


def _one_line(r, *fragments):
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error:"), r.stderr
    assert "Traceback" not in r.output and r.stdout == ""
    for fragment in fragments:
        assert fragment in r.stderr, (fragment, r.stderr)


def _finite_json(text: str) -> dict:
    """json.loads that fails on Infinity / NaN instead of reading them."""
    def reject(token):
        raise AssertionError(f"{token} in the JSON")

    return json.loads(text, parse_constant=reject)


# ---- every bundled profile still loads, and prints finite JSON ----------------------------------------


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_every_bundled_profile_loads_and_is_inside_the_bounds(path):
    hw = load_profile(path)
    assert MIN_MEMORY_BYTES <= hw.capacity <= hw.memory_bytes <= MAX_MEMORY_BYTES
    assert 0 < hw.memory_bandwidth <= MAX_BANDWIDTH and "fp32" in hw.peak_flops
    assert all(0 < rate <= MAX_FLOPS for rate in hw.peak_flops.values())
    r = CliRunner().invoke(cli, ["hardware", "show", path.stem, "--json"])
    assert r.exit_code == 0, r.output
    _finite_json(r.stdout)


def test_hardware_list_shows_every_bundled_profile():
    r = CliRunner().invoke(cli, ["hardware", "list", "--json"])
    assert r.exit_code == 0, r.output
    assert len(_finite_json(r.stdout)) == len(BUNDLED) == len(all_hardware())


# ---- bad profiles: one line naming the file and the field -------------------------------------------

BAD_PROFILES = [
    ("memory_bandwidth", float("inf"), "finite number"),
    ("memory_bandwidth", float("nan"), "finite number"),
    ("memory_bandwidth", 0, "greater than or equal to 1000000"),
    ("memory_bandwidth", -3.35e12, "greater than or equal"),
    ("memory_bandwidth", 1e-300, "greater than or equal"),
    ("memory_bandwidth", 1e300, "less than or equal"),
    ("memory_bandwidth", "3.35e12", "valid number"),  # a string is not a number
    ("memory_bandwidth", True, "valid number"),  # nor is a bool
    ("memory_bandwidth", [3.35e12], "valid number"),
    ("memory_bandwidth", None, "valid number"),
    ("memory_bandwidth", DROP, "required field is missing"),
    ("memory_bytes", 0, "greater than or equal"),
    ("memory_bytes", 1000, "greater than or equal to 1048576"),
    ("memory_bytes", 2**60, "less than or equal"),
    ("memory_bytes", 8.0e10, "valid integer"),  # a float where bytes (an int) belong
    ("memory_bytes", "80GiB", "valid integer"),
    ("memory_bytes", 10**400, "less than or equal"),
    ("usable_memory_bytes", 81 * 2**30, "exceeds memory_bytes"),
    ("peak_flops.bf16", float("inf"), "finite number"),
    ("peak_flops.bf16", 1e-300, "greater than or equal"),
    ("peak_flops.bf16", 1e30, "less than or equal"),
    ("peak_flops.bf16", "989e12", "valid number"),
    ("peak_flops.bf61", 1e15, "peak_flops.bf61.[key]"),  # a typo'd dtype is not a rate to ignore
    ("peak_flops.fp32", DROP, "needs an fp32 rate"),
    ("peak_flops", [1e15], "valid dictionary"),
    ("interconnect.bandwidth", float("inf"), "finite number"),
    ("interconnect.bandwidth", 0, "greater than or equal"),
    ("interconnect.speed", 1, "unknown key"),
    ("interconnect", "NVLink", "valid dictionary"),
    ("typical.launch_s", float("inf"), "finite number"),
    ("typical.launch_s", 2.0, "less than 1"),
    ("typical.launch_s", -1e-6, "greater than or equal to 0"),
    ("typical.link_latency_s", float("nan"), "finite number"),
    ("typical.gemm_efficiency", 1.5, "less than or equal to 1"),
    ("typical.gemm_efficiency", 0, "greater than or equal to 0.001"),
    ("typical.bandwidth_efficiency", 5e-324, "greater than or equal to 0.001"),
    ("typical.gemm_efficiency", "0.8", "valid number"),
    ("typical.compute_units", 0, "greater than or equal to 1"),
    ("typical.compute_units", 2**40, "less than or equal"),
    ("typical.compute_units", 132.5, "valid integer"),
    ("typical.compute_units", True, "valid integer"),
    ("tdp_watts", 0, "greater than or equal"),
    ("tdp_watts", float("inf"), "finite number"),
    ("name", 100, "valid string"),
    ("name", "", "at least 1 character"),
    ("kind", "tpu", "'gpu', 'cpu' or 'soc'"),
    ("clock_mhz", 1980, "unknown key"),
    ("aliases", "h100", "valid list"),
]


@pytest.mark.parametrize("field, value, fragment", BAD_PROFILES, ids=[f"{f}={v!r}"[:40] for f, v, _ in BAD_PROFILES])
def test_bad_profile_is_one_line_naming_the_file_and_field(tmp_path, field, value, fragment):
    path = _write(tmp_path, _set(_data(), field, value))
    with pytest.raises(InputError) as e:
        load_profile(path)
    assert str(e.value).startswith(f"{path}: ") and "\n" not in str(e.value)
    assert fragment in str(e.value), str(e.value)
    top = field.split(".")[0]
    assert e.value.field and e.value.field.startswith(top), e.value.field
    for args in (["roofline", "debug", "--gpu", str(path)], ["fit", "debug", "--gpu", str(path)],
                 ["hardware", "show", str(path)]):
        _one_line(CliRunner().invoke(cli, args), str(path), fragment)


def test_usable_memory_equal_to_total_is_fine(tmp_path):
    data = _data()
    path = _write(tmp_path, _set(data, "usable_memory_bytes", data["memory_bytes"]))
    assert load_profile(path).capacity == data["memory_bytes"]


def test_ints_pass_for_floats(tmp_path):
    path = _write(tmp_path, _set(_data(), "memory_bandwidth", 3_350_000_000_000))
    assert load_profile(path).memory_bandwidth == 3.35e12


# ---- calibrations ----------------------------------------------------------------------------------


def _calibration(profile: str | None = None, **extra) -> dict:
    return yaml.safe_load(synthetic_calibration(profile=profile, **extra).to_yaml())


BAD_CALIBRATIONS = [
    ("launch_s", float("inf"), "launch_s", "finite number"),
    ("launch_s", 2.0, "launch_s", "less than 1"),
    ("launch_s", "2e-6", "launch_s", "valid number"),
    ("launch_s", -1.0, "launch_s", "greater than or equal to 0"),
    ("dispatch_s", float("nan"), "dispatch_s", "finite number"),
    ("step_slowdown", -0.1, "step_slowdown", "greater than or equal to 0"),
    ("step_slowdown", 12.0, "step_slowdown", "less than or equal to 9"),
    ("step_slowdown", "0.2", "step_slowdown", "valid number"),
    ("bandwidth.read_bytes_per_s", 0, "bandwidth.read_bytes_per_s", "greater than or equal"),
    ("bandwidth.read_bytes_per_s", float("inf"), "bandwidth.read_bytes_per_s", "finite number"),
    ("bandwidth.copy_bytes_per_s", 1e300, "bandwidth.copy_bytes_per_s", "less than or equal"),
    ("bandwidth.buffer_bytes", 2.5e8, "bandwidth.buffer_bytes", "valid integer"),
    ("bandwidth.buffer_bytes", 2**60, "bandwidth.buffer_bytes", "less than or equal"),
    ("matmul.0.seconds", 0, "matmul.0.seconds", "greater than or equal"),
    ("matmul.0.seconds", float("inf"), "matmul.0.seconds", "finite number"),
    ("matmul.0.seconds", 1e7, "matmul.0.seconds", "less than or equal to 3600"),
    ("matmul.5.seconds", 1e-9, "matmul.5", "above any device"),  # 2mkn / 1 ns: 1e22 FLOP/s
    ("matmul.0.m", True, "matmul.0.m", "valid integer"),
    ("matmul.0.m", 0, "matmul.0.m", "greater than or equal to 1"),
    ("matmul.0.k", 2**40, "matmul.0.k", "less than or equal"),
    ("matmul", [], "matmul", "at least 1 item"),
    ("device.threads", 0, "device.threads", "greater than or equal to 1"),
    ("device.threads", "8", "device.threads", "valid integer"),
    ("device.gpu", "x", "device.gpu", "unknown key"),
    ("dtype", "fp8", "dtype", "'fp32', 'bf16' or 'fp16'"),
    ("rows", [{"kind": "rmsnorm", "rows": 1, "width": 64, "seconds": float("nan")}], "rows.0.seconds", "finite"),
    ("attention", [{"batch": 1, "heads": 8, "kv_heads": 8, "head_dim": 64, "q_len": 1, "kv_len": 1,
                    "seconds": -1}], "attention.0.seconds", "greater than or equal"),
    ("bandwidth", DROP, "bandwidth", "required field is missing"),
]


@pytest.mark.parametrize("field, value, where, fragment", BAD_CALIBRATIONS,
                         ids=[f"{f}={v!r}"[:40] for f, v, _, _ in BAD_CALIBRATIONS])
def test_bad_calibration_is_one_line_naming_the_file_and_field(tmp_path, field, value, where, fragment):
    path = _write(tmp_path, _set(_calibration(dispatch_s=1e-5, step_slowdown=0.1), field, value), "cal.yaml")
    with pytest.raises(InputError) as e:
        load_calibration(path)
    assert str(e.value).startswith(f"{path}: {where}") and fragment in str(e.value), str(e.value)
    _one_line(CliRunner().invoke(cli, ["roofline", "debug", "--gpu", str(path)]), f"{path}: {where}", fragment)


def test_a_good_calibration_file_still_works(tmp_path):
    path = _write(tmp_path, _calibration(), "cal.yaml")
    r = CliRunner().invoke(cli, ["roofline", "debug", "--gpu", str(path), "--prompt", "16", "--gen", "4", "--json"])
    assert r.exit_code == 0, r.output
    doc = _finite_json(r.stdout)
    assert {p["rates"]["label"] for p in doc["predictions"]} == {"peak", "calibrated"}


def test_a_local_profile_too_slow_for_any_device_is_one_input_error():
    # every bf16 matmul at 1.5 MFLOP/s: valid measurements, but the fp32 'peak' a local profile takes from
    # them (half that) is below any device (bounds.py MIN_FLOPS)
    cal = synthetic_calibration(matmul_rate=1.5e6)
    with pytest.raises(InputError, match="calibration of Test Device: peak_flops"):
        local_profile(cal)


def test_a_corrupt_file_in_the_calibration_folder_calibrates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHCALC_CALIBRATION_DIR", str(tmp_path))
    _write(tmp_path, _set(_calibration(profile="h100-sxm"), "launch_s", float("inf")), "bad.yaml")
    r = CliRunner().invoke(cli, ["hardware", "show", "h100", "--json"])
    assert r.exit_code == 0 and _finite_json(r.stdout)["calibration"] is None


# ---- hypothesis: any junk in any field of a bundled profile ------------------------------------------

JUNK = st.one_of(
    st.none(), st.booleans(), st.text(max_size=8), st.sampled_from(["1e12", "inf", "nan", "80GiB", "", "-1"]),
    st.integers(min_value=-(2**70), max_value=2**70), st.sampled_from([0, -1, 1, 10**400, 2**63, 2**64]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e-300, 1e300, -0.0, 5e-324]),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


def _paths(data: dict, prefix: str = "") -> list[str]:
    out = []
    for key, value in data.items():
        out.append(prefix + key)
        if isinstance(value, dict):
            out += _paths(value, f"{prefix}{key}.")
    return out


def _mutate(data, doc: dict, extra_fields: list[str]) -> dict:
    """`doc` with one to three fields (or new keys) set to junk, or removed."""
    for _ in range(data.draw(st.integers(1, 3), label="fields")):
        field = data.draw(st.sampled_from(_paths(doc) + extra_fields), label="field")
        _set(doc, field, data.draw(st.one_of(JUNK, st.just(DROP)), label="value"))
    return doc


def _one_line_or_finite(r, target: Path) -> None:
    if r.exit_code == 0:
        doc = _finite_json(r.stdout)
        assert all(math.isfinite(p["tpot_s"]) and p["tpot_s"] > 0 for p in doc["predictions"])
    else:
        _one_line(r, str(target))


ROOFLINE = ["roofline", "debug", "--prompt", "8", "--gen", "2", "--json", "--gpu"]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_junk_in_a_profile_is_one_line_or_a_finite_prediction(tmp_path, data):
    profile = _data(data.draw(st.sampled_from(BUNDLED), label="profile"))
    target = _write(tmp_path, _mutate(data, profile, ["extra", "typical.extra", "peak_flops.fp4", "interconnect.x"]))
    _one_line_or_finite(CliRunner().invoke(cli, [*ROOFLINE, str(target)]), target)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_junk_in_a_calibration_is_one_line_or_a_finite_prediction(tmp_path, data):
    cal = _calibration(profile=data.draw(st.sampled_from([None, "h100-sxm", "l4"]), label="profile"),
                       dispatch_s=1e-5)
    fields = ["matmul.0.seconds", "matmul.3.m", "matmul.5.n", "extra", "device.extra", "bandwidth.extra"]
    target = _write(tmp_path, _mutate(data, cal, fields), "cal.yaml")
    _one_line_or_finite(CliRunner().invoke(cli, [*ROOFLINE, str(target)]), target)
