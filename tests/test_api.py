"""The Python API (archcalc/api.py): the commands as functions, with the CLI's
defaults, typed results and .to_dict() equal to what `--json` prints."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

import archcalc
from archcalc.cli import cli
from archcalc.errors import InputError


def cli_json(*args: str) -> dict:
    r = CliRunner().invoke(cli, [*args, "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def as_json(doc: dict) -> dict:
    """The document as the CLI serialises it (tuples become lists, and so on)."""
    return json.loads(json.dumps(doc, default=str))


def test_size_matches_the_published_count_and_the_cli():
    r = archcalc.size("llama-3.1-8b", context=8192)
    # Meta's model card and HF's safetensors index: 8,030,261,248 parameters.
    assert r.params.total == 8_030_261_248
    # 32 layers × 8 KV heads × 128 dims × (K and V) × 2 bytes = 131,072 bytes per token.
    assert r.kv.bytes_per_token == 131_072 and r.kv.bytes == 131_072 * 8192
    assert as_json(r.to_dict()) == cli_json("size", "llama-3.1-8b", "--context", "8192")
    assert as_json(r.to_dict(ops=True))["ops"] == cli_json("size", "llama-3.1-8b", "--context", "8192",
                                                            "--layers")["ops"]


def test_defaults_are_the_cli_defaults():
    r = archcalc.size("qwen3-0.6b")
    assert r.workload.context == r.spec.max_context == 40_960
    assert (r.workload.batch, r.workload.weight_dtype, r.workload.kv_dtype, r.convention.name) == (1, "bf16", "bf16",
                                                                                                   "causal")
    assert as_json(r.to_dict()) == cli_json("size", "qwen3-0.6b")


def test_roofline_fit_compare_match_their_commands():
    roof = archcalc.roofline("llama-3.1-8b", "h100", batch=8)
    assert as_json(roof.to_dict()) == cli_json("roofline", "llama-3.1-8b", "--gpu", "h100", "--batch", "8")
    assert roof.context == 2048 + 256 and roof.predictions[0].rates.label == "peak"
    fit = archcalc.fit("llama-3.1-70b", "h100", gpus=2, context=131072, kv_dtype="fp8", engine="vllm")
    assert as_json(fit.to_dict()) == cli_json("fit", "llama-3.1-70b", "--gpu", "h100", "--gpus", "2", "--context",
                                              "131072", "--kv-dtype", "fp8", "--engine", "vllm")
    assert fit.fits is False and fit.solutions["min_gpus"].value == 4
    everywhere = archcalc.fit_all_gpus("llama-3.1-8b", context=8192)
    assert as_json(everywhere.to_dict()) == cli_json("fit", "llama-3.1-8b", "--all-gpus", "--context", "8192")
    cmp = archcalc.compare(["llama-3.1-8b", "qwen3-8b"], gpu="h100")
    assert as_json(cmp.to_dict()) == cli_json("compare", "llama-3.1-8b", "qwen3-8b", "--gpu", "h100")


def test_lint_and_sweep_match_their_commands():
    r = archcalc.lint("gemma-7b")
    assert as_json(r.to_dict()) == cli_json("lint", "gemma-7b")
    assert r.worst == "info" and "heads.product" in {f.rule for f in r.findings}
    vary = ["n_layers=8..16", "attention.n_kv_heads=1,2,4"]
    sw = archcalc.sweep("llama-3.1-8b", vary, where=["params.total <= 3e9"], minimize="kv_cache.bytes", context=4096,
                        gpu="h100")
    doc = cli_json("sweep", "llama-3.1-8b", "--vary", vary[0], "--vary", vary[1], "--where", "params.total <= 3e9",
                   "--minimize", "kv_cache.bytes", "--context", "4096", "--gpu", "h100")
    mine = as_json(sw.to_dict())
    assert mine.pop("seconds") > 0 and doc.pop("seconds") > 0  # the time of the run itself
    assert mine == doc and doc["counts"]["shown"] == doc["counts"]["feasible"] > 1


def test_train_matches_its_command():
    given = archcalc.train("llama-3.1-8b", "h100", gpus=8, zero=3, recompute="selective")
    assert as_json(given.to_dict()) == cli_json("train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3",
                                                "--recompute", "selective")
    solved = archcalc.train("debug", "h100", gpus=4)
    assert as_json(solved.to_dict()) == cli_json("train", "debug", "--gpu", "h100", "--gpus", "4")
    __import__("archcalc.training.step")  # loading the package must not shadow the function
    assert callable(archcalc.train) and archcalc.train.__module__ == "archcalc.api"


def test_a_spec_object_and_a_path_work_like_a_name(tmp_path):
    spec = archcalc.load("gpt2")[0]
    assert archcalc.size(spec).params.total == archcalc.size("gpt2").params.total == 124_439_808
    path = tmp_path / "model.yaml"
    path.write_text(f"name: mine\nd_model: {spec.d_model}\nn_layers: 2\nvocab_size: 1000\nmax_context: 128\n"
                    "attention: {n_heads: 12}\nffn: {d_ff: 3072, activation: gelu}\n")
    assert archcalc.size(path).spec.name == "mine"


def test_warnings_travel_with_the_result():
    r = archcalc.size("gpt2", context=4096)
    assert r.warnings == ("context 4,096 exceeds gpt2's max context 1,024",)
    assert r.to_dict()["warnings"] == list(r.warnings)
    assert archcalc.size("gpt2").warnings == ()
    roof = archcalc.roofline("gpt2", "h100", prompt=1000, gen=100)
    assert roof.warnings == ("context 1,100 exceeds gpt2's max context 1,024",)


@pytest.mark.parametrize("call, field", [
    (lambda: archcalc.size("gpt2", context="8"), "--context"),  # a string is not a number
    (lambda: archcalc.size("gpt2", batch=True), "--batch"),  # nor is a flag
    (lambda: archcalc.size("gpt2", batch=0), "--batch"),
    (lambda: archcalc.size("gpt2", dtype="fp4"), "--dtype"),
    (lambda: archcalc.size("gpt2", flops_convention="kaplan"), "--flops-convention"),
    (lambda: archcalc.roofline("gpt2", "h100", gen=-1), "--gen"),
    (lambda: archcalc.fit("gpt2", "h100", engine="tgi"), "--engine"),
    (lambda: archcalc.fit("gpt2", "h100", tp=5), "--tp"),
    (lambda: archcalc.compare([]), "MODELS"),
])
def test_bad_input_raises_one_input_error(call, field):
    with pytest.raises(InputError) as e:
        call()
    assert e.value.field == field and "\n" not in str(e.value)


def test_unknown_names_raise_input_error_with_a_suggestion():
    with pytest.raises(InputError, match="did you mean 'llama-3.1-8b'"):
        archcalc.size("llama-3.1-8")
    with pytest.raises(InputError, match="unknown hardware"):
        archcalc.roofline("gpt2", "h1000000")


def test_fit_is_the_function_even_after_the_serving_package_loads():
    import archcalc.serving.planner  # noqa: F401

    assert callable(archcalc.fit) and archcalc.fit.__module__ == "archcalc.api"


def test_importing_archcalc_is_lazy():
    code = "import sys, archcalc; print(sorted(m for m in ('torch', 'pydantic', 'rich') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_roofline_says_when_the_model_does_not_fit_the_device_it_times():
    from archcalc.hardware.profile import load_hardware
    from archcalc.serving.deployment import Deployment
    from archcalc.serving.planner import Planner, min_gpus

    r = archcalc.roofline("llama-3.1-70b", "a100-80gb-sxm")
    spec, hw = archcalc.load("llama-3.1-70b")[0], load_hardware("a100-80gb-sxm")
    assert not Planner(spec, hw, Deployment()).plan(2304, 1).fits  # 141 GB of bf16 weights on 80 GB
    assert min_gpus(spec, hw, Deployment(), 2304, 1).value == 2
    [w] = [w for w in r.warnings if "does not fit" in w]
    assert "1 x A100 80GB SXM" in w and "--tp 2" in w
    assert not [w for w in archcalc.roofline("llama-3.1-8b", "h100").warnings if "does not fit" in w]
    assert not [w for w in archcalc.roofline("llama-3.1-70b", "a100-80gb-sxm", tp=2).warnings if "does not fit" in w]


@pytest.mark.parametrize(("option", "value"), [("kv_unified", "false"), ("mtp", 1), ("flash_attn", "no"),
                                               ("prefix_caching", "false"), ("swa_full", None)])
def test_fit_switches_are_booleans_not_truth_values(option, value):
    """A string or number where a switch belongs is refused, not read as True ("false" would be)."""
    from archcalc.errors import InputError

    with pytest.raises(InputError) as e:
        archcalc.fit("llama-3.1-8b", "h100", **{option: value})
    assert "give True or False" in e.value.message
    assert archcalc.fit("llama-3.1-8b", "h100", prefix_caching=None, context=4096).plan is not None
