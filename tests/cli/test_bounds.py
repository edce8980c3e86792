"""Every count a command takes is bounded (archcalc/limits.py MAX_*), a size (--reserve)
too; contradictory options are one error; a group without a subcommand prints
its help; output degrades to ASCII on a terminal that cannot show ×, ≈ or box
drawing.  Bad input: one `error:` line on stderr, exit status 2, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

import archcalc
from archcalc.cli import cli
from archcalc.limits import (
    MAX_BATCH,
    MAX_CONTEXT,
    MAX_GPUS,
    MAX_REPEATS,
    MAX_SAMPLES,
    MAX_SEED,
    MAX_TOKENS_PER_STEP,
)
from archcalc.errors import InputError
from archcalc.serving.deployment import MAX_RESERVE_BYTES, parse_bytes


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def one_line(r, *fragments):
    assert r.exit_code == 2, (r.exit_code, r.output)
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error:"), r.stderr
    assert "Traceback" not in r.output and r.stdout == ""
    for fragment in fragments:
        assert fragment in r.stderr, (fragment, r.stderr)


# ---- every numeric option: junk and out-of-range values ---------------------------------------------

SWEEP = ("sweep", "llama-3.2-1b", "--vary", "n_layers=2..4", "--context", "64")
OPTIONS = [  # (command, option, the largest valid value)
    (("size", "llama-3.2-1b"), "--context", MAX_CONTEXT),
    (("size", "llama-3.2-1b"), "--batch", MAX_BATCH),
    (("roofline", "llama-3.2-1b", "--gpu", "h100"), "--prompt", MAX_CONTEXT),
    (("roofline", "llama-3.2-1b", "--gpu", "h100"), "--context", MAX_CONTEXT),
    (("roofline", "llama-3.2-1b", "--gpu", "h100"), "--batch", MAX_BATCH),
    (("roofline", "llama-3.2-1b", "--gpu", "h100"), "--gen", MAX_CONTEXT),
    (("roofline", "llama-3.2-1b", "--gpu", "h100"), "--tp", MAX_GPUS),
    (("roofline", "llama-3.2-1b", "--gpu", "h100"), "--gpus", MAX_GPUS),
    (("roofline", "llama-3.2-1b", "--gpu", "h100"), "--repeats", MAX_REPEATS),
    (("fit", "llama-3.2-1b", "--gpu", "h100"), "--gpus", MAX_GPUS),
    (("fit", "llama-3.2-1b", "--gpu", "h100"), "--tp", MAX_GPUS),
    (("fit", "llama-3.2-1b", "--gpu", "h100"), "--context", MAX_CONTEXT),
    (("fit", "llama-3.2-1b", "--gpu", "h100"), "--batch", MAX_BATCH),
    (("fit", "llama-3.2-1b", "--gpu", "h100"), "--max-num-batched-tokens", MAX_TOKENS_PER_STEP),
    (("fit", "llama-3.2-1b", "--gpu", "h100"), "--ubatch", MAX_TOKENS_PER_STEP),
    (("compare", "gpt2", "llama-3.2-1b"), "--context", MAX_CONTEXT),
    (("compare", "gpt2", "llama-3.2-1b"), "--batch", MAX_BATCH),
    (("compare", "gpt2", "llama-3.2-1b", "--gpu", "h100"), "--prompt", MAX_CONTEXT),
    (("compare", "gpt2", "llama-3.2-1b", "--gpu", "h100"), "--gen", MAX_CONTEXT),
    (("compare", "gpt2", "llama-3.2-1b", "--gpu", "h100"), "--tp", MAX_GPUS),
    (SWEEP, "--samples", MAX_SAMPLES),
    (SWEEP, "--top", MAX_SAMPLES),
    (SWEEP, "--seed", MAX_SEED),
    (SWEEP, "--batch", MAX_BATCH),
    (SWEEP[:4], "--context", MAX_CONTEXT),
    ((*SWEEP, "--gpu", "h100"), "--tp", MAX_GPUS),
]
JUNK = ["-1", "1e400", str(10**400), "1" * 5000, "abc", "", "1.5", "nan", "inf", "0x10", "true"]


@pytest.mark.parametrize("base, option, most", OPTIONS, ids=[f"{b[0]} {o}" for b, o, _ in OPTIONS])
def test_numeric_options_refuse_junk_and_values_out_of_range(base, option, most):
    for value in [*JUNK, most + 1, 2**64, "0" if option not in ("--top", "--seed") else "-5"]:
        one_line(run(*base, option, value), option)
    r = run(*base, option, most + 1)
    assert f"{most + 1} is not in the range" in r.stderr and f"x<={most}" in r.stderr  # the range, in the message


def test_the_largest_counts_still_compute_finite_numbers():
    r = run("size", "llama-3.2-1b", "--context", MAX_CONTEXT, "--batch", MAX_BATCH, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    assert doc["kv_cache"]["bytes"] == 32_768 * MAX_CONTEXT * MAX_BATCH
    r = run("fit", "llama-3.2-1b", "--gpu", "h100", "--context", MAX_CONTEXT, "--batch", MAX_BATCH, "--gpus", MAX_GPUS,
            "--tp", 8, "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["plan"]["fits"] is False, r.output
    r = run("roofline", "llama-3.2-1b", "--gpu", "h100", "--prompt", MAX_CONTEXT // 2, "--gen", MAX_CONTEXT // 2,
            "--batch", MAX_BATCH, "--json")
    assert r.exit_code == 0, r.output
    json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))


# ---- roofline: the decode context is a step of the decode after the prompt ----------------------------


@pytest.mark.parametrize("prompt, gen, context", [(4096, 256, 100), (4096, 256, 4096), (2048, 256, 2305),
                                                  (2048, 1, 1_000_000)])
def test_roofline_context_outside_the_decode_is_one_error(prompt, gen, context):
    r = run("roofline", "gpt2", "--gpu", "h100", "--prompt", prompt, "--gen", gen, "--context", context)
    one_line(r, "--context", f"{prompt + 1:,} to {prompt + gen:,}")


@pytest.mark.parametrize("context", [2049, 2200, 2304])
def test_roofline_context_inside_the_decode_is_fine(context):
    r = run("roofline", "gpt2", "--gpu", "h100", "--prompt", 2048, "--gen", 256, "--context", context, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["workload"]["context"] == context


def test_prompt_plus_gen_beyond_the_largest_context_is_one_error():
    for command in (("roofline", "gpt2", "--gpu", "h100"), ("compare", "gpt2", "--gpu", "h100")):
        one_line(run(*command, "--prompt", MAX_CONTEXT, "--gen", 1), "--gen", f"at most {MAX_CONTEXT:,}")


# ---- --reserve ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["1" * 400, "9" * 17, "2PiB", "1e3GiB", "-1GiB", "nan", "inf", "1.5XB", "GiB", "",
                                  "1." + "0" * 17, "1 000 MiB", "２GiB", "1" * 100 + "GiB"])
def test_bad_reserve_is_one_line(text):
    one_line(run("fit", "llama-3.2-1b", "--gpu", "h100", "--reserve", text), "--reserve")


def test_parse_bytes():
    assert parse_bytes("2GiB") == 2 * 2**30 and parse_bytes(" 1.5 GB ") == 1.5e9 and parse_bytes("0") == 0
    assert parse_bytes("1PiB") == MAX_RESERVE_BYTES and parse_bytes(".5 kib") == 512
    r = run("fit", "llama-3.2-1b", "--gpu", "h100", "--reserve", "2GiB", "--json")
    assert r.exit_code == 0, r.output


UNITS_HELP = ("give bytes or a number with B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB or PiB (e.g. 2GiB), "
              "at most 1 PiB")


def _reserve_error(text) -> str:
    with pytest.raises(InputError) as e:
        parse_bytes(text)
    return str(e.value)


def test_parse_bytes_reads_at_most_64_characters():
    """Padding counts: 60 spaces and '1GiB' (64 characters) is read, 61 spaces (65) is not, and the
    message shows a long text cut to 30 characters with its length."""
    assert parse_bytes(" " * 60 + "1GiB") == 2**30
    assert _reserve_error(" " * 61 + "1GiB") == (
        f"--reserve: '{' ' * 29}... (65 characters) is not a size; {UNITS_HELP}")
    # repr of 40 characters is shown whole, 41 is cut
    assert _reserve_error("x" * 38) == f"--reserve: '{'x' * 38}' is not a size; {UNITS_HELP}"
    assert _reserve_error("x" * 39) == f"--reserve: '{'x' * 29}... (39 characters) is not a size; {UNITS_HELP}"
    assert _reserve_error(12) == f"--reserve: 12 is not a size; {UNITS_HELP}"  # not a string: no regex
    assert _reserve_error("1.5 PiB") == ("--reserve: '1.5 PiB' is more than 1 PiB; give at most 1 PiB "
                                         f"({MAX_RESERVE_BYTES:,} bytes)")


# ---- the Python API checks the same bounds ---------------------------------------------------------


@pytest.mark.parametrize("call, field", [
    (lambda: archcalc.size("gpt2", context=10**400), "--context"),
    (lambda: archcalc.size("gpt2", context=0), "--context"),  # not "the default"
    (lambda: archcalc.size("gpt2", batch=MAX_BATCH + 1), "--batch"),
    (lambda: archcalc.size("gpt2", batch=8.0), "--batch"),
    (lambda: archcalc.size("gpt2", dtype=["bf16"]), "--dtype"),
    (lambda: archcalc.roofline("gpt2", "h100", repeats=0), "--repeats"),
    (lambda: archcalc.roofline("gpt2", "h100", gpus=10**30), "--gpus"),
    (lambda: archcalc.roofline("gpt2", "h100", prompt=100, context=50), "--context"),
    (lambda: archcalc.fit("gpt2", "h100", reserve=float("inf")), "--reserve"),
    (lambda: archcalc.fit("gpt2", "h100", reserve=-1), "--reserve"),
    (lambda: archcalc.fit("gpt2", "h100", reserve=10**400), "--reserve"),
    (lambda: archcalc.fit("gpt2", "h100", gpu_memory_utilization="0.9"), "--gpu-memory-utilization"),
    (lambda: archcalc.fit("gpt2", "h100", gpu_memory_utilization=float("nan")), "--gpu-memory-utilization"),
    (lambda: archcalc.fit("gpt2", "h100", ubatch=2**40), "--ubatch"),
    (lambda: archcalc.compare(["gpt2"], tp=True), "--tp"),
    (lambda: archcalc.sweep("gpt2", ["n_layers=2..4"], seed=-1), "--seed"),
    (lambda: archcalc.sweep("gpt2", ["n_layers=2..4"], top=True), "--top"),
    (lambda: archcalc.sweep("gpt2", ["n_layers=2..4"], samples=MAX_SAMPLES + 1), "--samples"),
])
def test_the_api_raises_one_input_error(call, field):
    with pytest.raises(InputError) as e:
        call()
    assert e.value.field == field and "\n" not in str(e.value) and len(str(e.value)) < 300, str(e.value)


def test_a_sweep_past_int64_totals_agrees_with_the_exact_scalar_path():
    """8,192 tokens × 2^24 sequences: the prefill's FLOPs pass 2^63, which int64 arrays would wrap;
    the sweep's float64 arrays agree with the scalar path's exact Python ints to rounding."""
    from archcalc import api
    from archcalc.cost.rates import rate_sets
    from archcalc.cost.roofline import prefill_workload, step
    from archcalc.hardware.profile import load_hardware
    from archcalc.ops.workload import Workload
    from archcalc.spec.catalog import load_model

    r = api.sweep("deepseek-v3", ["n_layers=4"], context=8192, batch=MAX_BATCH, gpu="h100", columns=["ttft"])
    spec = load_model("deepseek-v3")[0].model_copy(update={"n_layers": 4})
    typical = next(x for x in rate_sets(load_hardware("h100"), Workload()) if x.label == "typical")
    exact = step(spec, prefill_workload(8192, MAX_BATCH), typical)
    assert sum(o.flops for o in exact.ops) > 2**63
    assert r.rows[0].metrics["ttft"] == pytest.approx(exact.time, rel=1e-12)


# ---- groups without a subcommand: the help, exit 0 -----------------------------------------------------


@pytest.mark.parametrize("args", [[], ["hardware"]])
def test_a_group_without_a_command_prints_its_help(args):
    r = run(*args)
    assert r.exit_code == 0 and r.stderr == "", r.output
    assert r.stdout.startswith("Usage:") and "Commands:" in r.stdout
    assert r.stdout == run(*args, "--help").stdout


# ---- an output encoding that cannot show the characters ---------------------------------------------


@pytest.mark.parametrize("args", [
    ["size", "llama-3.1-8b", "--layers"],
    ["roofline", "llama-3.1-8b", "--gpu", "h100"],
    ["fit", "llama-3.1-8b", "--gpu", "h100"],
    ["lint", "llama-3.1-8b", "--fail-on", "never"],
    ["sweep", "llama-3.2-1b", "--vary", "n_layers=2..4", "--context", "64"],
    ["hardware", "show", "h100"],
    ["size", "gpt2", "--context", "4096"],  # a warning on stderr too
])
def test_ascii_output_degrades_instead_of_crashing(args):
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "COLUMNS": "200"}
    r = subprocess.run([sys.executable, "-m", "archcalc", *args], capture_output=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert b"Traceback" not in r.stderr and r.stdout.strip()
    text = r.stdout.decode("ascii")  # every byte ASCII
    assert "\u00d7" not in text and ("x" in text or "+" in text)
    r.stderr.decode("ascii")


def test_ascii_error_line_is_still_one_line():
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    r = subprocess.run([sys.executable, "-m", "archcalc", "roofline", "gpt2", "--gpu", "h100", "--context", "5"],
                       capture_output=True, env=env, timeout=120)
    assert r.returncode == 2 and r.stderr.decode("ascii").count("\n") == 1 and r.stderr.startswith(b"error:")


def test_check_reserve_bounds_and_messages():
    from archcalc.serving.deployment import check_reserve

    assert check_reserve(None) is None and check_reserve(0) == 0.0 and isinstance(check_reserve(7), float)
    assert check_reserve(MAX_RESERVE_BYTES) == float(MAX_RESERVE_BYTES)
    valid = f"give bytes from 0 to 1 PiB ({MAX_RESERVE_BYTES:,} bytes)"
    for bad, shown in ((True, "True"), (-0.5, "-0.5"), (float("inf"), "inf"), ("5", "'5'"),
                       (MAX_RESERVE_BYTES + 1, str(MAX_RESERVE_BYTES + 1)), (2**70, "a 71-bit integer"),
                       (2**64 - 1, str(2**64 - 1)), ([1], "[1]")):
        with pytest.raises(InputError) as e:
            check_reserve(bad)
        assert str(e.value) == f"--reserve: {shown} is not valid; {valid}", bad
