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
    # one model is a comparison too (a table of one column): the same rows
    one = json.loads(invoke("compare", "qwen3-8b", "--gpu", "rtx-4090", "--context", "8192", "--json").stdout)
    assert {m["key"]: m["values"][0] for m in one["metrics"]} == {k: v[1] for k, v in metrics.items()}


def test_compare_rows_their_labels_units_and_which_way_is_better():
    """The archcalc.compare/1 rows in order, with --gpu (peak and typical speed rows), measured times and
    fit rows; each value is the single-model function's (checked above), each row says its unit and
    whether lower is better (tokens, text and rates: higher)."""
    from archcalc.cost.compare import compare
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    specs = [load_model(n)[0] for n in ("llama-3.2-1b", "qwen3-0.6b")]
    fit = {"fits": ("fits one H100", "text", True), "max_ctx": ("largest context", "tokens", 1000),
           "mem": ("memory", "bytes", 5), "rate": ("a rate", "per_s", 2.0)}
    c = compare(specs, context=4096, batch=2, dtype="bf16", kv_dtype="fp8", hw=load_hardware("h100"), prompt=512,
                gen=64, tp=2, fit_metrics=lambda s: fit, measured=lambda s: (0.5, 0.01))
    assert (c.names, c.context, c.batch, c.hardware) == (["llama-3.2-1b", "qwen3-0.6b"], 4096, 2, "H100 SXM")
    rows = [(m.key, m.label, m.unit, m.lower_is_better) for m in c.metrics]
    assert rows == [
        ("params_total", "parameters", "count", True),
        ("params_active", "active parameters per token", "count", True),
        ("weight_bytes", "weights (bf16)", "bytes", True),
        ("forward_flops_per_token", "forward FLOPs per token at 4,096", "flops", True),
        ("kv_bytes_per_token", "KV cache per token (fp8)", "bytes", True),
        ("kv_bytes", "KV cache at 4,096 × 2", "bytes", True),
        ("max_context", "max context of the model", "tokens", False),
        ("ttft_s", "time to first token (512 × 2, TP 2, peak)", "seconds", True),
        ("tpot_s", "time per output token at 576 (peak)", "seconds", True),
        ("decode_tokens_per_s", "decode tokens/s (batch 2, peak)", "per_s", False),
        ("ttft_s_typical", "time to first token (512 × 2, TP 2, typical)", "seconds", True),
        ("tpot_s_typical", "time per output token at 576 (typical)", "seconds", True),
        ("decode_tokens_per_s_typical", "decode tokens/s (batch 2, typical)", "per_s", False),
        ("critical_batch", "critical batch (peak)", "count", True),
        ("ttft_s_measured", "time to first token (512 × 2, measured)", "seconds", True),
        ("tpot_s_measured", "time per output token at 576 (measured)", "seconds", True),
        ("fits", "fits one H100", "text", False), ("max_ctx", "largest context", "tokens", False),
        ("mem", "memory", "bytes", True), ("rate", "a rate", "per_s", False)]
    values = {m.key: m.values for m in c.metrics}
    assert values["max_context"] == [131072, 40960] and values["weight_bytes"] == [2 * 1_235_814_400, 2 * 596_049_920]
    assert values["ttft_s_measured"] == [0.5, 0.5] and values["tpot_s_measured"] == [0.01, 0.01]
    assert values["fits"] == [True, True] and values["mem"] == [5, 5]
    assert values["decode_tokens_per_s"][0] == 2 / values["tpot_s"][0]
    one = compare(specs[:1], context=128, batch=1, dtype="bf16", kv_dtype="bf16", hw=load_hardware("h100"))
    assert [m.label for m in one.metrics if m.key == "ttft_s"] == ["time to first token (2,048 × 1, peak)"]
    assert compare(specs, context=128, batch=1, dtype="fp8", kv_dtype="bf16").metrics[-1].key == "max_context"


def test_compare_values_take_the_batch_dtypes_and_each_model_s_own_times():
    from archcalc.cost.compare import compare
    from archcalc.cost.roofline import predict
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    specs = [load_model(n)[0] for n in ("llama-3.2-1b", "qwen3-0.6b")]
    h100 = load_hardware("h100")
    c = compare(specs, context=1024, batch=3, dtype="fp8", kv_dtype="fp8", hw=h100, prompt=256,
                measured=lambda s: (len(s.name), 0.001 * len(s.name)))
    v = {m.key: m.values for m in c.metrics}
    alone = [predict(s, h100, prompt=256, context=256 + 256, gen=256, batch=3, weight_dtype="fp8", kv_dtype="fp8")
             for s in specs]  # gen: compare's default, 256
    assert v["tpot_s"] == [p[0].tpot for p in alone] and v["ttft_s_typical"] == [p[1].ttft for p in alone]
    assert v["critical_batch"] == [p[0].critical_batch for p in alone] and None not in v["critical_batch"]
    # llama-3.2-1b: 16 layers × 8 KV heads × 64 × (K, V) at 1 byte, for 3 sequences of 1,024
    assert v["kv_bytes"][0] == 3 * 1024 * 16 * 8 * 64 * 2 and v["kv_bytes_per_token"][0] == 16 * 8 * 64 * 2
    assert v["weight_bytes"][0] < 2 * 1_235_814_400  # fp8 weights (embeddings kept at 16 bits)
    assert v["ttft_s_measured"] == [12, 10] and v["tpot_s_measured"] == [0.012, 0.010]
    assert [m.label for m in c.metrics if m.key == "tpot_s"] == ["time per output token at 512 (peak)"]
