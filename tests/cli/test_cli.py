"""The command line through click's CliRunner: JSON output and bad inputs.
Every bad input gives exactly one `error:` line on stderr and exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from archcalc.cli import cli

DATA = Path(__file__).parents[1] / "data" / "hf"


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_size_json_schema():
    r = run("size", "llama-3.1-8b", "--context", "8192", "--batch", "2", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "archcalc.size/1"
    assert doc["params"]["total"] == 8_030_261_248 == doc["params"]["active"]
    assert doc["params"]["embedding"] == 128_256 * 4096
    assert sum(doc["params"]["by_component"].values()) == doc["params"]["total"]
    assert doc["kv_cache"]["bytes_per_token"] == 131_072
    assert doc["kv_cache"]["bytes"] == 2 * 2**30  # 8192 tokens × 2 sequences × 128 KiB
    assert doc["kv_cache"]["dtype"] == "bf16"
    fp8 = json.loads(run("size", "llama-3.1-8b", "--kv-dtype", "fp8", "--json").stdout)["kv_cache"]
    assert (fp8["dtype"], fp8["bytes_per_token"]) == ("fp8", 65_536)
    f = doc["flops"]
    assert f["forward_per_token"] == f["forward"] / (8192 * 2)
    assert f["train_per_token"] == 3 * f["forward_per_token"]
    assert f["forward"] == f["matmul"] + f["attention"]  # causal: elementwise not in the total


def test_size_tables_and_layers():
    r = run("size", "gemma-2-9b", "--context", "8192", "--layers")
    assert r.exit_code == 0
    for text in ("Parameters", "Weight memory", "KV cache", "layers.attn.core.local", "lm_head.softcap"):
        assert text in r.stdout


def test_conventions_change_attention_only():
    docs = {c: json.loads(run("size", "mistral-7b-v0.1", "--context", "8192", "--flops-convention", c,
                              "--json").stdout)["flops"] for c in ("causal", "full", "torch", "detailed")}
    assert len({d["matmul"] for d in docs.values()}) == 1
    assert docs["causal"]["attention"] < docs["full"]["attention"] < docs["torch"]["attention"]
    assert docs["detailed"]["forward"] == docs["causal"]["forward"] + docs["causal"]["vector"]


def test_size_of_a_config_json_and_a_folder(tmp_path):
    (tmp_path / "config.json").write_text((DATA / "qwen2.5-0.5b.json").read_text())
    for ref in (str(DATA / "qwen2.5-0.5b.json"), str(tmp_path)):
        doc = json.loads(run("size", ref, "--json", "--context", "16").stdout)
        assert doc["params"]["total"] == 494_032_768


def test_show_and_convert(tmp_path):
    r = run("show", str(DATA / "gemma-3-27b.json"))
    assert r.exit_code == 0 and "defaulted" in r.stdout and "text_config.vocab_size" in r.stdout
    out = tmp_path / "spec.yaml"
    r = run("convert", str(DATA / "gemma-3-27b.json"), "-o", str(out), "--source", "https://example.org/x")
    assert r.exit_code == 0
    doc = json.loads(run("size", str(out), "--json").stdout)
    assert doc["model"]["source"] == "https://example.org/x"
    shown = json.loads(run("show", "gpt2", "--json").stdout)
    assert shown["spec"]["position"]["kind"] == "learned"


def test_list():
    r = run("list", "--json")
    names = {m["name"] for m in json.loads(r.stdout)}
    assert len(names) >= 20 and "deepseek-v3" in names


def test_context_beyond_the_maximum_is_a_warning():
    r = run("size", "gpt2", "--context", "4096", "--json")
    assert r.exit_code == 0 and "warning: context 4,096 exceeds" in r.stderr


def _bad(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("d_model: [1, 2\n")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("d_model: 64\nn_layers: 2\nvocab_size: 10\nmax_context: 8\nattention: {n_heads: 4}\nwidth: 3\n")
    heads = tmp_path / "heads.yaml"
    heads.write_text("d_model: 64\nn_layers: 2\nvocab_size: 10\nmax_context: 8\nattention: {n_heads: 4, n_kv_heads: 3}\n")
    return [
        (["size", str(tmp_path / "missing.yaml")], "missing.yaml: file not found"),
        (["size", str(broken)], "broken.yaml: YAML syntax error: line 2"),
        (["size", str(unknown)], "unknown.yaml: width: unknown key"),
        (["size", str(heads)], "heads.yaml: attention: n_heads (4) must be divisible by n_kv_heads (3)"),
        (["size", "gpt2", "--context", "-5"], "-5 is not in the range 1<=x<="),
        (["size", "gpt2", "--context", "lots"], "'lots' is not a valid integer"),
        (["size", "llama-3.1-8"], "unknown model 'llama-3.1-8'; did you mean 'llama-3.1-8b'?"),
        (["size", "gpt2", "--dtype", "fp6"], "'fp6' is not one of"),
        (["convert", str(unknown)], "expected a config.json"),
        (["size", "nonsense-model-xyz"], "unknown model 'nonsense-model-xyz'"),
    ]


def test_bad_inputs_give_one_line_and_status_2(tmp_path):
    for args, fragment in _bad(tmp_path):
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 2, (args, r.output)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], (args, r.stderr)
        assert r.stdout == "" and "Traceback" not in r.output


def test_convert_writes_nothing_on_error(tmp_path):
    out = tmp_path / "out.yaml"
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    r = CliRunner().invoke(cli, ["convert", str(bad), "-o", str(out)])
    assert r.exit_code == 2 and "num_hidden_layers: required key is missing" in r.stderr
    assert list(tmp_path.iterdir()) == [bad]


@pytest.mark.parametrize("args", [
    ["size", "deepseek-v3", "--json"],
    ["fit", "deepseek-v3", "--gpu", "h200", "--gpus", "8", "--engine", "vllm"],
    ["roofline", "mixtral-8x7b", "--gpu", "h100"],
    ["compare", "gpt2", "llama-3.2-1b", "--gpu", "l4"],
])
def test_analytic_commands_never_import_torch(args):
    code = ("import sys; from archcalc.cli import cli; from click.testing import CliRunner; "
            f"r = CliRunner().invoke(cli, {args!r}); "
            "assert r.exit_code == 0, r.output; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
