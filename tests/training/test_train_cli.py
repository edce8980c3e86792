"""`archcalc train` end to end: the JSON document, the solvers on cases a
hand can check, the step's arithmetic, and every impossible layout as one
line and exit status 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from archcalc import api
from archcalc.cli import cli
from archcalc.hardware.profile import load_hardware

H100 = load_hardware("h100")


def run(*args):
    return CliRunner().invoke(cli, ["train", *args], catch_exceptions=False)


def doc(*args) -> dict:
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_json_document():
    d = doc("llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--seq", "8192", "--global-batch",
            str(8192 * 64), "--price-per-gpu-hour", "2")
    assert d["schema"] == "archcalc.train/1"
    assert d["model"]["params"] == 8_030_261_248
    assert d["layout"] == {"gpus": 8, "tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "zero": 3, "micro_batch": 1,
                           "recompute": "none", "sequence_parallel": True}
    assert d["recipe"]["global_batch"] == 64 and d["recipe"]["grad_accum"] == 8
    stage = d["memory"]["stages"][0]
    assert stage["total"] == pytest.approx(sum(stage["terms"].values()))
    assert d["memory"]["fits"] == (stage["total"] <= d["memory"]["capacity"])
    peak, typical = d["steps"]
    assert peak["rates"] == "peak" and peak["time"] < typical["time"]  # peak is the lower bound
    run_ = d["run"][1]
    assert run_["tokens"] == 20 * 8_030_261_248  # Chinchilla's 20 tokens per parameter
    assert run_["steps"] == math.ceil(run_["tokens"] / (64 * 8192))
    assert run_["gpu_hours"] == pytest.approx(run_["steps"] * typical["time"] * 8 / 3600)
    assert run_["cost"] == pytest.approx(2 * run_["gpu_hours"])
    assert run_["energy_kwh"] == pytest.approx(8 * 700 * run_["seconds"] / 3.6e6, rel=1e-12)  # H100 SXM: 700 W
    assert {c["group"] for c in d["collectives"]["items"]} == {"dp"}
    assert d["solve"] is None and d["layout_given"]


def test_model_states_per_rank_by_hand():
    """Llama 3.1 8B, 8 GPUs, ZeRO 1: bf16 weights 2 B, fp32 gradients 4 B (unsharded), fp32 master 4 B
    and AdamW 8 B split over 8: (2 + 4) + 12/8 = 7.5 bytes per parameter."""
    d = doc("llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "1")
    t = d["memory"]["stages"][0]["terms"]
    params = 8_030_261_248
    assert t["weights"] == 2 * params and t["gradients"] == 4 * params
    assert t["master weights"] == pytest.approx(4 * params / 8) and t["optimizer states"] == pytest.approx(8 * params / 8)


def test_fewest_gpus_by_hand():
    """Llama 3.1 8B: model states alone are 18 bytes × 8.03 B = 144.5 GB, more than one H100's 84.9 GB, so
    one GPU cannot hold it whatever the layout; on two, ZeRO 3 halves them (72.3 GB) and full
    recomputation keeps the activations small enough."""
    plan = api.train("llama-3.1-8b", "h100", seq=4096, global_batch_tokens=4096 * 64)
    assert plan.solved.goal == "fewest GPUs" and plan.solved.gpus == 2
    assert plan.result.layout.zero == 3 and plan.result.memory.fits
    assert 18 * 8_030_261_248 > H100.capacity


def test_fastest_layout_for_a_small_model_is_pure_data_parallel():
    """A model that fits one GPU gains nothing from TP (exposed all-reduces) or PP (a bubble)."""
    plan = api.train("debug", "h100", gpus=8, seq=128, global_batch_tokens=128 * 256)
    best = plan.result.layout
    assert (best.tp, best.pp, best.dp) == (1, 1, 8)
    assert plan.solved.alternatives and all("+" in why for _, why in plan.solved.alternatives)
    assert all(c.time >= plan.solved.best.time for c, _ in plan.solved.alternatives)


def test_pipeline_bubble_is_p_minus_one_stage_times():
    """1F1B: (m + p − 1) stage times per step, of which p − 1 are the bubble."""
    plan = api.train("llama-3.1-8b", "h100", gpus=4, pp=4, zero=0, micro_batch=1, seq=4096,
                     global_batch_tokens=4096 * 16)
    s = plan.result.steps[0]
    per_mb = (s.time - s.optimizer - s.exposed("dp")) / (s.micro_batches + 3)
    assert s.micro_batches == 16 and s.bubble == pytest.approx(3 * per_mb)


def test_recomputation_trades_memory_for_time():
    common = dict(gpus=8, zero=3, seq=8192, global_batch_tokens=8192 * 64)
    plans = {r: api.train("llama-3.1-8b", "h100", recompute=r, **common).result for r in ("none", "selective", "full")}
    act = {r: p.memory.worst.terms["activations"] for r, p in plans.items()}
    step = {r: p.steps[-1].time for r, p in plans.items()}
    assert act["full"] < act["selective"] < act["none"]
    assert step["none"] < step["selective"] < step["full"]


def test_tensor_parallel_adds_collectives_and_splits_memory():
    one = api.train("llama-3.1-8b", "h100", gpus=8, tp=1, zero=1).result
    two = api.train("llama-3.1-8b", "h100", gpus=8, tp=2, zero=1).result
    assert two.memory.worst.terms["weights"] == pytest.approx(one.memory.worst.terms["weights"] / 2, rel=1e-3)
    assert two.steps[-1].exposed("tp") > 0 == one.steps[-1].exposed("tp")


@pytest.mark.parametrize("args, message", [
    (["--tp", "3"], "--tp: 3 does not split"),
    (["--pp", "5"], "--pp: 5 does not divide"),
    (["--ep", "2"], "--ep: llama-3.1-8b has no experts"),
    (["--gpus", "6", "--tp", "4"], "--gpus: 6 GPUs are not a whole number"),
    (["--gpus", "8", "--tp", "2", "--dp", "2"], "--gpus: 8 GPUs do not factor"),
    (["--gpus", "1", "--zero", "3"], "--zero: stage 3 (FSDP) shards"),
    (["--gpus", "1", "--seq", "4096", "--global-batch", "12288", "--micro-batch", "2"], "--global-batch: 3 sequences"),
    (["--gpus", "1", "--seq", "4096", "--global-batch", "5000"], "--global-batch: 5,000 tokens are not"),
    (["--gpus", "2", "--cp", "2", "--seq", "4097", "--dp", "1"], "--cp: 2 does not divide"),
    (["--fsdp", "--zero", "1", "--gpus", "2"], "--fsdp: FSDP is ZeRO stage 3"),
    (["--solve", "layout"], "--gpus: the fastest layout needs"),
    (["--tokens", "-5"], "--tokens: -5"),
    (["--tokens", "abc"], "'abc' is not a valid float"),
    (["--price-per-gpu-hour", "0"], "--price-per-gpu-hour: 0"),
    (["--seq", "0"], "--seq"),
    (["--reserve", "lots"], "--reserve"),
    (["--global-batch", "8192", "--grad-accum", "2"], "--grad-accum: give the global batch once"),
])
def test_bad_layouts_are_one_line_and_exit_2(args, message):
    r = run("llama-3.1-8b", "--gpu", "h100", *args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines


def test_ep_must_divide_the_experts():
    r = run("mixtral-8x7b", "--gpu", "h100", "--gpus", "16", "--ep", "3", "--dp", "6", "--pp", "1", "--tp", "1")
    assert r.exit_code == 2 and "--ep: 3 does not divide mixtral-8x7b's 8 experts" in r.stderr


def test_unknown_gpu_is_one_line():
    r = run("llama-3.1-8b", "--gpu", "h1000")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "h1000" in r.stderr


def test_tables_render_every_section():
    r = run("mixtral-8x7b", "--gpu", "h100", "--gpus", "64", "--tp", "2", "--pp", "2", "--ep", "4",
            "--recompute", "selective", "--price-per-gpu-hour", "2.5")
    assert r.exit_code == 0, r.output
    for part in ("Memory per GPU", "Step time", "Collectives per step", "The run", "exposed TP comm",
                 "pipeline bubble", "moe.all_to_all", "cost", "MFU"):
        assert part in r.stdout, part


def test_compare_gains_training_rows():
    r = CliRunner().invoke(cli, ["compare", "debug", "gpt2", "--gpu", "h100", "--train-gpus", "8", "--json"])
    assert r.exit_code == 0, r.output
    keys = {m["key"] for m in json.loads(r.stdout)["metrics"]}
    assert {"train_layout", "train_memory", "train_step_s", "train_tokens_per_s", "train_gpu_hours"} <= keys


def _tp_counts(**layout) -> dict:
    r = api.train("llama-3.1-8b", "h100", seq=4096, global_batch_tokens=4096 * 4, **layout).result
    out: dict = {}
    for c in r.steps[0].comms:
        if c.comm.group == "tp":
            key = (c.comm.phase, c.comm.op.dims.pattern)
            out[key] = out.get(key, 0) + c.comm.op.count
    return out


def test_tp_collectives_per_step_by_hand():
    """Llama 3.1 8B, tp 2 without sequence parallelism, 4 micro-batches of 1: forward, an all-reduce after
    o and down in each of 32 layers plus the embedding's (65), and the loss's (1); backward, one per
    column-parallel input (QKV, up: 64; lm_head: 1).  Full recomputation reruns the forward's; pp 2
    halves each stage's layers."""
    base = dict(gpus=2, tp=2, zero=0, micro_batch=1, sequence_parallel=False)
    none = _tp_counts(**base)
    assert none == {("forward", "all_reduce"): 4 * (65 + 1), ("backward", "all_reduce"): 4 * 65}
    full = _tp_counts(**base, recompute="full")
    assert full[("forward", "all_reduce")] == 4 * (2 * 65 + 1) and full[("backward", "all_reduce")] == 4 * 65
    staged = _tp_counts(**{**base, "gpus": 4, "pp": 2})
    assert staged == {("forward", "all_reduce"): 4 * (33 + 1), ("backward", "all_reduce"): 4 * 33}
    sp = _tp_counts(**{**base, "sequence_parallel": True})
    assert sp[("forward", "reduce_scatter")] == sp[("forward", "all_gather")] == 4 * 65


def test_1f1b_keeps_pp_micro_batches_on_the_first_stage():
    """Narayanan et al. 2021: under 1F1B, stage s of p keeps p − s micro-batches' activations; the first
    stage p of them (fewer when the step has fewer micro-batches), the last one."""
    r = api.train("llama-3.1-8b", "h100", gpus=4, pp=4, zero=0, micro_batch=1, seq=4096,
                  global_batch_tokens=4096 * 16).result
    first, last = r.memory.stages
    assert (first.stage, first.in_flight, last.stage, last.in_flight) == ("first", 4, "last", 1)
    per_mb = first.activations.layers  # one micro-batch of the stage's 8 layers
    assert first.terms["activations"] == pytest.approx(4 * per_mb)
    few = api.train("llama-3.1-8b", "h100", gpus=4, pp=4, zero=0, micro_batch=1, seq=4096,
                    global_batch_tokens=4096 * 2).result
    assert few.memory.stages[0].in_flight == 2


@pytest.mark.parametrize("attention, factor", [("flash", 2.5), ("eager", 2.0)])
def test_backward_costs_twice_the_forward_and_flash_attention_two_and_a_half(attention, factor):
    """Each matmul has two backward matmuls of its size; FlashAttention-2's backward runs five to the
    forward's two (it recomputes the scores); eager attention's four."""
    from archcalc.cost.roofline import step_ops, time_op
    from archcalc.training.memory import training_workload

    r = api.train("llama-3.1-8b", "h100", gpus=8, zero=1, seq=4096, attention=attention).result
    s = r.steps[0]
    wl = training_workload(r.layout, r.recipe)
    core = sum(time_op(op, s.rates).time for op in step_ops(r.spec, wl, "causal") if op.kind == "attention")
    assert s.backward == pytest.approx(2 * s.forward + (factor - 2) * core)


def test_layouts_describe_themselves():
    from archcalc.training.layout import Layout

    assert Layout().describe() == "tp 1, pp 1, dp 1, zero 1, micro-batch 1, recompute none"
    assert Layout(tp=2, pp=4, dp=8, cp=2, ep=4, zero=3, micro_batch=2, recompute="full").describe() == \
        "tp 2, pp 4, dp 8, cp 2, ep 4, zero 3, micro-batch 2, recompute full"


@pytest.mark.parametrize("options, line", [
    ({"optimizer": "adam"}, "--optimizer: 'adam'; valid: adamw, sgd, adafactor, muon"),
    ({"precision": "fp16"}, "--precision: 'fp16'; valid: bf16-mixed, fp32, fp8"),
    ({"recompute": "some"}, "--recompute: 'some'; valid: none, selective, full"),
    ({"zero": 5}, "--zero: 5; valid: 0, 1, 2, 3"),
    ({"tp": 3}, "--tp: 3 does not split llama-3.1-8b's 32 attention heads and 8 KV heads evenly; "
                "valid: 1, 2, 4, 8, 16, 32"),
    ({"pp": 5}, "--pp: 5 does not divide llama-3.1-8b's 32 layers; valid: 1, 2, 4, 8, 16, 32"),
    ({"solve": "best"}, "--solve: 'best'; valid: auto, layout, gpus, none"),
    ({"adam_beta": 0.9}, "adam_beta: not an option of train"),
])
def test_api_errors_name_the_option_and_what_is_valid(options, line):
    from archcalc.errors import InputError

    with pytest.raises(InputError) as e:
        api.train("llama-3.1-8b", "h100", gpus=8, **options)
    assert str(e.value).startswith(line), str(e.value)


def test_derived_data_parallel_is_a_whole_number():
    d = doc("llama-3.1-8b", "--gpu", "h100", "--gpus", "16", "--tp", "2", "--pp", "2")
    assert d["layout"]["dp"] == 4 and type(d["layout"]["dp"]) is int


@pytest.mark.parametrize("fixture, what", [
    ("apertus-8b", "xIELU activation"),
    ("qwen3-next-80b-a3b", "linear-attention layers or single-sublayer blocks"),
    ("hrm-text-1b", "layers run more than once with the same weights"),
    ("diffllama-0.3b-handcut", "differential attention"),
    ("doge-40m", "dynamic mask attention (Doge)"),
    ("jetmoe-8b-ultrainteract-sft-v4", "attention experts (JetMoE)"),
    ("deepseek-v3.2", "sparse-attention indexer"),
    ("zaya1-8b", "compressed convolutional attention, router MLP and residual scaling (ZAYA1)"),
])
def test_parts_whose_saved_tensors_are_not_pinned_are_refused(fixture, what):
    """train refuses, in one line, a model with a part the reference model lacks (what it keeps for backward is
    pinned nowhere); size, fit, roofline and compare still take it."""
    path = str(Path(__file__).parents[1] / "data" / "hf" / f"{fixture}.json")
    r = CliRunner().invoke(cli, ["train", path, "--gpu", "h100", "--gpus", "8"])
    assert r.exit_code == 2 and what in r.output and "train cannot plan it" in r.output, r.output
    assert len(r.output.strip().splitlines()) == 1
    assert CliRunner().invoke(cli, ["size", path]).exit_code == 0
