"""`archcalc compare`: every value equals what size/roofline report for that
model alone; the formats carry the same numbers."""

from __future__ import annotations

import csv
import io
import json

from click.testing import CliRunner

from archcalc.cli import cli


def invoke(*args):
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, r.output
    return r


def test_compare_values_are_the_single_model_values():
    doc = json.loads(invoke("compare", "llama-3.1-8b", "mixtral-8x7b", "deepseek-v3", "--context", "4096",
                            "--json").stdout)
    assert doc["schema"] == "archcalc.compare/1" and doc["baseline"] == "llama-3.1-8b"
    metrics = {m["key"]: m["values"] for m in doc["metrics"]}
    for i, name in enumerate(doc["models"]):
        alone = json.loads(invoke("size", name, "--context", "4096", "--json").stdout)
        assert metrics["params_total"][i] == alone["params"]["total"]
        assert metrics["params_active"][i] == alone["params"]["active"]
        assert metrics["kv_bytes"][i] == alone["kv_cache"]["bytes"]
        assert metrics["forward_flops_per_token"][i] == alone["flops"]["forward_per_token"]


def test_compare_with_a_gpu_matches_roofline():
    doc = json.loads(invoke("compare", "gpt2", "qwen2.5-0.5b", "--gpu", "l4", "--context", "1024", "--prompt", "512",
                            "--gen", "64", "--json").stdout)
    tpot = {m["key"]: m["values"] for m in doc["metrics"]}["tpot_s"]
    alone = json.loads(invoke("roofline", "qwen2.5-0.5b", "--gpu", "l4", "--prompt", "512", "--gen", "64",
                              "--json").stdout)
    assert tpot[1] == alone["predictions"][0]["tpot_s"]


def test_compare_speed_rows_per_rate_set_and_tp_match_roofline():
    doc = json.loads(invoke("compare", "llama-3.1-8b", "qwen3-8b", "--gpu", "h100", "--tp", "2", "--prompt", "512",
                            "--gen", "64", "--json").stdout)
    metrics = {m["key"]: m for m in doc["metrics"]}
    assert "(typical)" in metrics["tpot_s_typical"]["label"] and "TP 2" in metrics["ttft_s"]["label"]
    for i, name in enumerate(doc["models"]):
        alone = json.loads(invoke("roofline", name, "--gpu", "h100", "--tp", "2", "--prompt", "512", "--gen", "64",
                                  "--json").stdout)
        by_label = {p["rates"]["label"]: p for p in alone["predictions"]}
        assert metrics["tpot_s"]["values"][i] == by_label["peak"]["tpot_s"]
        assert metrics["tpot_s_typical"]["values"][i] == by_label["typical"]["tpot_s"]
        assert metrics["ttft_s_typical"]["values"][i] == by_label["typical"]["ttft_s"]


def test_compare_tp_that_splits_no_kv_head_is_one_line():
    r = CliRunner().invoke(cli, ["compare", "nemotron-4b", "--gpu", "h100", "--tp", "3"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "--tp" in r.stderr


def test_markdown_and_csv():
    md = invoke("compare", "llama-3.1-8b", "qwen3-8b", "--format", "markdown").stdout
    assert md.splitlines()[0] == "| metric | llama-3.1-8b (baseline) | qwen3-8b |"
    assert "(+2.0%)" in md  # 8,190,735,360 / 8,030,261,248 − 1
    rows = list(csv.reader(io.StringIO(invoke("compare", "llama-3.1-8b", "qwen3-8b", "--format", "csv").stdout)))
    assert rows[0] == ["metric", "unit", "llama-3.1-8b", "qwen3-8b"]
    assert ["params_total", "count", "8030261248", "8190735360"] in rows


def test_compare_bad_model_is_one_line():
    r = CliRunner().invoke(cli, ["compare", "gpt2", "gpt-5"])
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "unknown model 'gpt-5'" in r.stderr


def test_compare_fit_rows_are_the_fit_commands():
    doc = json.loads(invoke("compare", "llama-3.1-8b", "qwen3-8b", "--gpu", "rtx-4090", "--context", "8192",
                            "--json").stdout)
    metrics = {m["key"]: m["values"] for m in doc["metrics"]}
    for i, name in enumerate(doc["models"]):
        alone = json.loads(invoke("fit", name, "--gpu", "rtx-4090", "--context", "8192", "--json").stdout)
        assert metrics["max_context_on_gpu"][i] == alone["solve"]["max_context"]["value"]
        assert metrics["fits"][i] == alone["plan"]["fits"]
        assert metrics["memory_per_gpu"][i] == alone["plan"]["total"]
