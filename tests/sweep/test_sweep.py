"""archcalc sweep: the array path agrees with the scalar path, the constraint grammar,
the Pareto front, and bad inputs.

The sweep runs the same op formulas over numpy arrays; each candidate it keeps
is rebuilt here as a validated ModelSpec and priced one at a time by the
functions `size` and `roofline` use (those are pinned to Hugging Face modules
and FlopCounterMode elsewhere), so any formula that is not array-safe, or any
validity rule the sweep applies differently from ModelSpec, fails here.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from collections import Counter

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from archcalc import api
from archcalc.cli import cli
from archcalc.cost.rates import rate_sets
from archcalc.cost.roofline import prefill_workload, step
from archcalc.errors import InputError
from archcalc.hardware.profile import load_hardware
from archcalc.ops import arrays
from archcalc.ops.workload import Workload
from archcalc.serving.deployment import Deployment
from archcalc.serving.planner import Planner, check_deployment
from archcalc.spec.model import ModelSpec
from archcalc.search import space
from archcalc.search.run import pareto_front
from archcalc.search.where import parse_where
from tests.conftest import BUNDLED, sized, spec_of

VECTOR = ("params.total", "params.active", "params.embedding", "params.non_embedding", "weights.bytes",
          "kv_cache.bytes_per_token", "kv_cache.bytes", "memory.bytes", "flops.forward_per_token",
          "flops.train_per_token", "tpot", "decode.tokens_per_s", "ttft", "head_dim", "n_kv_heads", "d_ff")
CONTEXT, BATCH = 3000, 2


def varies_for(spec: ModelSpec) -> list[str]:
    """Fields worth varying in this spec, around its own values."""
    a, D = spec.attention, spec.d_model
    # (DeepSeek-V4's compressor list pins its depth, and its one K=V head)
    depth = f"n_layers={spec.n_layers}" if a.compressed else f"n_layers=1..{spec.n_layers + 3}"
    out = [f"d_model={D // 2}:{2 * D}:{D // 4}", depth, "vocab_size=1000,32000,50257"]
    if not set(spec.layer_attention) - {"linear", "none"}:  # no attention layer (xLSTM): its heads a placeholder
        pass
    elif a.compressed:
        out.append(f"attention.n_heads={a.n_heads // 2},{a.n_heads},{a.n_heads + 3}")
    elif a.kind == "mha":
        out.append(f"attention.n_kv_heads=1,2,{spec.n_kv_heads},{a.n_heads}")
        out.append(f"attention.n_heads={a.n_heads // 2},{a.n_heads},{a.n_heads + 3}")
    else:
        out.append("attention.kv_lora_rank=128,512")
    if spec.ffn.moe:
        out.append(f"ffn.moe.top_k=1,2,{spec.ffn.moe.top_k},{spec.ffn.moe.n_experts + 1}")
        out.append(f"ffn.moe.d_expert=128,{spec.ffn.moe.d_expert}")
        out.append(f"ffn.moe.first_dense_layers=0,1,{spec.n_layers + 1}")
    else:
        out.append("ffn.d_ff_ratio=1:5:0.37")
    if a.sliding_window:
        out.append(f"attention.sliding_window=7,512,{a.sliding_window}")
    if spec.residual.kind in ("hyper", "mhc"):
        out.append("residual.streams=1..5")
    return out


def candidate(name: str, fields: dict) -> ModelSpec:
    data = spec_of(name).model_dump()
    for path, value in fields.items():
        space._set_path(data, path, value)
    return ModelSpec.model_validate(data)


# Bundled specs whose attention differs in shape by layer (Gemma 4, MiMo-V2-Flash): refused by the sweep
GROUPED = [n for n in BUNDLED if spec_of(n).attention.grouped]
# and real configs with parts no bundled spec has: JetMoE's attention experts and MoE output bias, Doge's dynamic
# mask and skip scales, Inkling-Small's relative logits, short convs and router-scored shared experts
FIXTURES = [str(Path(__file__).parents[1] / "data" / "hf" / f"{n}.json")
            for n in ("jetmoe-8b-ultrainteract-sft-v4", "doge-40m", "inkling-small")]
SWEPT = [n for n in BUNDLED if n not in GROUPED] + FIXTURES


@pytest.mark.parametrize("name", GROUPED)
def test_attention_of_per_layer_shapes_is_refused_in_one_line(name):
    with pytest.raises(InputError, match="differs in shape from layer to layer") as e:
        api.sweep(name, ["d_model=1024,2048"])
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", SWEPT)
def test_sweep_agrees_with_the_scalar_path(name):
    result = api.sweep(name, varies_for(spec_of(name)), samples=400, seed=7, top=0, context=CONTEXT, batch=BATCH,
                       gpu="h100", columns=list(VECTOR))
    assert result.feasible == len(result.rows) > 0
    hw = load_hardware("h100")
    typical = next(r for r in rate_sets(hw, Workload()) if r.label == "typical")
    for row in result.rows[:: max(1, len(result.rows) // 12)]:
        spec, m = candidate(name, row.fields), row.metrics
        s = sized(spec, CONTEXT, BATCH)
        assert m["params.total"] == s.params.total and m["params.active"] == s.params.active
        assert m["params.embedding"] == s.params.embedding and m["params.non_embedding"] == s.params.non_embedding
        assert m["weights.bytes"] == s.weight_bytes["bf16"]
        assert m["kv_cache.bytes_per_token"] == s.kv.bytes_per_token and m["kv_cache.bytes"] == s.kv.bytes
        assert m["memory.bytes"] == s.weight_bytes["bf16"] + s.kv.bytes
        # float64 arrays against Python's exact ints: equal to the last bits that 2^53 keeps
        assert m["flops.forward_per_token"] == pytest.approx(s.forward_per_token, rel=1e-15)
        assert m["flops.train_per_token"] == pytest.approx(3 * s.forward_per_token, rel=1e-15)
        assert m["tpot"] == step(spec, Workload.decode(CONTEXT, BATCH), typical).time
        assert m["decode.tokens_per_s"] == BATCH / m["tpot"]
        assert m["ttft"] == step(spec, prefill_workload(CONTEXT, BATCH), typical).time
        assert (m["head_dim"], m["n_kv_heads"], m["d_ff"]) == (spec.qk_head_dim, spec.n_kv_heads, spec.d_ff)


@pytest.mark.parametrize("name", SWEPT)
def test_validity_is_modelspec_validation(name):
    """Every candidate the sweep drops fails ModelSpec validation, and every one it keeps passes."""
    base = spec_of(name)
    varies = [space.parse_vary(v) for v in varies_for(base)]
    dropped = kept = 0
    for g in space.groups(base, varies, samples=300, seed=3):
        ok, _ = space.validity(space.with_values(g.base, g.columns), g.size)
        for i in range(g.size):
            fields = {p: c[i].item() for p, c in g.columns.items()}
            try:
                candidate(name, {**g.choices, **fields})
                valid = True
            except ValidationError:
                valid = False
            assert valid == bool(ok[i]), (fields, g.choices)
            dropped += not valid
            kept += valid
    assert kept > 0


@pytest.mark.parametrize("name", ["llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v2-lite", "gemma-3-27b"])
def test_tensor_parallel_sweep_agrees_with_the_planner_and_roofline(name):
    """--tp 4: a candidate is kept exactly when the serving planner accepts TP 4 for it,
    and its times are roofline's one-rank step with the collectives (peak rates)."""
    base = spec_of(name)
    vary = ["attention.n_heads=2..12", f"n_layers=1..{min(base.n_layers, 6)}"]
    if base.attention.kind == "mha":
        vary.append("attention.n_kv_heads=1,2,3,4,6,8")
    r = api.sweep(name, vary, gpu="h100", rates="peak", tp=4, top=0, context=512, columns=["ttft"],
                  where=["params.total > 0"])
    peak = rate_sets(load_hardware("h100"), Workload())[0]
    kept = {tuple(row.fields.values()) for row in r.rows}
    for values in itertools.product(*(space.parse_vary(v).values for v in vary)):
        fields = dict(zip((v.split("=")[0] for v in vary), values))
        try:
            spec = candidate(name, fields)
            check_deployment(spec, Deployment(gpus=4))
        except (ValidationError, InputError):
            assert values not in kept
            continue
        assert values in kept
    for row in r.rows[::7]:
        spec = candidate(name, row.fields)
        assert row.metrics["tpot"] == step(spec, Workload.decode(512, 1), peak, tp=4).time
        assert row.metrics["ttft"] == step(spec, prefill_workload(512, 1), peak, tp=4).time
    assert any("TP 4" in rule for rule in r.invalid)


def test_invalid_counts_name_the_rule():
    r = api.sweep("llama-3.1-8b", ["attention.n_kv_heads=1..8", "d_model=4096,4100"], context=16)
    # 4100 is not divisible by 32 heads (8 of 16), and of the rest, n_kv_heads 3, 5, 6 and 7 do not divide 32
    assert r.invalid == {"d_model divisible by n_heads": 8, "n_heads divisible by n_kv_heads": 4}
    assert r.feasible == 4


def test_choice_fields_make_groups_and_bad_combinations_are_counted():
    r = api.sweep("llama-3.2-1b", ["ffn.activation=swiglu,gelu", "norm.placement=pre,post", "n_layers=2,4"],
                  context=64, top=0, columns=["d_ff"])
    assert r.candidates == 8 and r.feasible == 8
    by = {(row.fields["ffn.activation"], row.fields["norm.placement"], row.fields["n_layers"]): row for row in r.rows}
    for (act, place, n), row in by.items():
        assert row.metrics["params.total"] == sized(candidate("llama-3.2-1b", {
            "ffn.activation": act, "norm.placement": place, "n_layers": n})).params.total
    # GPT-J-style parallel blocks need pre-norm: the post-norm group is invalid as a whole
    r = api.sweep("pythia-6.9b", ["norm.placement=pre,post"], context=16)
    assert r.candidates == 2 and r.feasible == 1 and sum(r.invalid.values()) == 1


def test_grid_is_the_full_product_in_order():
    r = api.sweep("qwen3-0.6b", ["n_layers=1..3", "vocab_size=1000,2000"], top=0, context=8)
    assert [(row.fields["n_layers"], row.fields["vocab_size"]) for row in r.rows] == [
        (1, 1000), (1, 2000), (2, 1000), (2, 2000), (3, 1000), (3, 2000)]


def test_objective_and_constraints():
    r = api.sweep("llama-3.1-8b", ["n_layers=8..40", "attention.n_kv_heads=1,2,4,8"], context=8192,
                  where=["params.total <= 5e9", "kv_cache.bytes > 100MiB"], minimize="kv_cache.bytes", top=0)
    every = [(n, k) for n in range(8, 41) for k in (1, 2, 4, 8)]
    priced = {(n, k): sized(candidate("llama-3.1-8b", {"n_layers": n, "attention.n_kv_heads": k}), 8192)
              for n, k in every}
    want = [nk for nk in every if priced[nk].params.total <= 5e9 and priced[nk].kv.bytes > 100 * 2**20]
    got = [(row.fields["n_layers"], row.fields["attention.n_kv_heads"]) for row in r.rows]
    assert sorted(got) == sorted(want)
    kv = [row.metrics["kv_cache.bytes"] for row in r.rows]
    assert kv == sorted(kv) and r.infeasible == len(every) - len(want)
    best = api.sweep("llama-3.1-8b", ["n_layers=8..40"], context=8192, maximize="params.total", top=1)
    assert best.rows[0].fields["n_layers"] == 40


def test_fit_is_checked_per_candidate_with_the_planner():
    hw = load_hardware("rtx-4090")
    r = api.sweep("llama-3.1-8b", ["n_layers=8:64:8"], context=32768, gpu=hw, where=["fit.fits"],
                  maximize="params.total", top=3)
    for row in r.rows:
        spec = candidate("llama-3.1-8b", row.fields)
        assert Planner(spec, hw, Deployment()).plan(32768, 1).fits
    bigger = [n for n in range(8, 65, 8) if n > r.rows[0].fields["n_layers"]]
    assert bigger and all(not Planner(candidate("llama-3.1-8b", {"n_layers": n}), hw, Deployment()).plan(32768).fits
                          for n in bigger)
    assert r.lazy_rejected == len(bigger)


# ---- the Pareto front ------------------------------------------------------------------------


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)), min_size=1, max_size=60))
def test_pareto_front_is_the_set_no_point_dominates(points):
    a, b = (np.array(x, dtype=float) for x in zip(*points))
    front = pareto_front(a, b)
    dominated = {i for i in range(len(points)) for j in range(len(points))
                 if a[j] <= a[i] and b[j] <= b[i] and (a[j], b[j]) != (a[i], b[i])}
    want = {(a[i], b[i]) for i in range(len(points)) if i not in dominated}
    assert {(a[i], b[i]) for i in front} == want and len(front) == len(want)
    assert list(a[front]) == sorted(a[front])


def test_pareto_sweep_front_members_are_not_dominated():
    r = api.sweep("llama-3.1-8b", ["n_layers=8..32", "attention.n_kv_heads=1,2,4,8", "ffn.d_ff_ratio=2,3,4"],
                  context=4096, pareto="max:params.total,kv_cache.bytes_per_token", top=0)
    everything = api.sweep("llama-3.1-8b", ["n_layers=8..32", "attention.n_kv_heads=1,2,4,8", "ffn.d_ff_ratio=2,3,4"],
                           context=4096, top=0)
    pts = [(x.metrics["params.total"], x.metrics["kv_cache.bytes_per_token"]) for x in everything.rows]
    for row in r.rows:
        p, kv = row.metrics["params.total"], row.metrics["kv_cache.bytes_per_token"]
        assert not any(q >= p and w <= kv and (q, w) != (p, kv) for q, w in pts)
    assert r.front == len(r.rows) > 1


# ---- the array helpers and closed forms ------------------------------------------------------


@given(st.lists(st.integers(1, 1 << 40), min_size=1, max_size=20), st.integers(1, 1 << 20))
def test_array_helpers_equal_the_builtins(xs, y):
    arr = np.array(xs, dtype=np.int64)
    assert list(arrays.pow2_at_least(arr)) == [arrays.pow2_at_least(x) for x in xs] == [
        next(1 << k for k in range(64) if 1 << k >= x) for x in xs]
    assert list(arrays.ceil_div(arr, y)) == [-(-x // y) for x in xs] == [arrays.ceil_div(x, y) for x in xs]
    assert list(arrays.lesser(arr, y)) == [min(x, y) for x in xs]
    assert list(arrays.greater(arr, y)) == [max(x, y) for x in xs]
    assert list(arrays.floor_int(arr / 3)) == [int(x / 3) for x in xs]
    assert list(arrays.isqrt(arr)) == [math.isqrt(x) for x in xs] == [arrays.isqrt(x) for x in xs]
    assert arrays.floor_int(arr / 3).dtype.kind == arrays.pow2_at_least(arr).dtype.kind == "i"  # counts stay ints


@given(st.integers(1, 200), st.sampled_from([None, "1:1", "5:1", "3:2", "0:1", "1:0"]), st.integers(0, 210),
       st.integers(1, 7))
def test_layer_counts_in_closed_form_equal_the_per_layer_lists(n_layers, pattern, first, every):
    attention = {"n_heads": 4, "sliding_window": 64, "layer_types": pattern}
    moe = {"n_experts": 4, "top_k": 1, "d_expert": 8, "first_dense_layers": first, "every": every}
    spec = ModelSpec(d_model=32, n_layers=n_layers, vocab_size=10, max_context=128, attention=attention,
                     ffn={"d_ff": 16, "moe": moe})
    kinds = ("global", "local", "chunked", "linear", "none")
    assert spec.attention_layers == {k: Counter(spec.layer_attention)[k] for k in kinds}
    assert spec.ffn_layers == {k: Counter(spec.layer_ffn)[k] for k in ("dense", "moe", "none")}
    arr = space.with_values(spec, {"n_layers": np.array([n_layers, n_layers + 1])})
    assert [int(v) for v in arr.attention_layers["local"]] == [
        Counter(spec.model_copy(update={"n_layers": n}).layer_attention)["local"] for n in (n_layers, n_layers + 1)]


# ---- values and constraints --------------------------------------------------------------------


def test_value_syntax():
    assert space.parse_vary("d_model=1024:2048:256").values == (1024, 1280, 1536, 1792, 2048)
    assert space.parse_vary("n_layers=3..6").values == (3, 4, 5, 6)
    assert space.parse_vary("d_model=64:1024:*2").values == (64, 128, 256, 512, 1024)
    assert space.parse_vary("vocab_size=32k,50257,1Ki").values == (32000, 50257, 1024)
    assert space.parse_vary("ffn.d_ff_ratio=2:3:0.5").values == (2.0, 2.5, 3.0)
    assert space.parse_vary("ffn.d_ff_ratio=0.1:0.3:0.1").values == pytest.approx((0.1, 0.2, 0.3))
    assert space.parse_vary("tie_embeddings=true,false").values == (True, False)


@pytest.mark.parametrize("text, words", [
    ("d_modle=1,2", "did you mean d_model"),
    ("d_model=", "no values"),
    ("d_model", "FIELD=VALUES"),
    ("d_model=10..2", "empty"),
    ("d_model=1024:512:64", "empty"),
    ("d_model=64:128:0", "step"),
    ("d_model=64:128:*1", "step"),
    ("d_model=1.5", "integers"),
    ("d_model=abc", "not a number"),
    ("d_model=0,64", "greater than or equal to 1"),
    ("attention.n_kv_heads=-1", "greater than or equal to 1"),
    ("ffn.d_ff_ratio=1..3", "integer fields"),
    ("position.rotary_fraction=0.5,1.5", "less than or equal to 1"),
    ("ffn.activation=swiglu,tanh", "not one of"),
    ("name=a,b", "not a number or a choice"),
    ("attention", "FIELD=VALUES"),
])
def test_bad_vary(text, words):
    with pytest.raises(InputError, match=words):
        space.parse_vary(text)


def test_constraint_grammar():
    c = parse_where("kv_cache.bytes <= 20GiB")
    assert (c.op, c.value) == ("<=", 20 * 2**30)
    assert parse_where("tpot<20ms").value == pytest.approx(0.02) and parse_where("ttft >= 1.5 s").value == 1.5
    assert parse_where("params.total <= 8B").value == 8e9 == parse_where("params.total<=8e9").value
    assert parse_where("flops.forward_per_token < 16 GFLOP").value == 16e9
    assert parse_where("kv_cache.bytes < 1.5GB").value == 1.5e9
    assert (parse_where("fit.fits").op, parse_where("fit.fits").value) == ("==", 1.0)
    assert parse_where("fit.fits == false").value == 0.0
    assert parse_where("lint <= info").value == 1.0
    assert list(parse_where("params.total != 5").holds(np.array([4, 5, 6]))) == [True, False, True]


@pytest.mark.parametrize("text, words", [
    ("params.totl <= 8e9", "did you mean params.total"),
    ("params.total <= ", "METRIC OP VALUE"),
    ("params.total =< 8e9", "METRIC OP VALUE"),
    ("kv_cache.bytes <= 20ms", "in bytes"),
    ("tpot <= 20GiB", "in seconds"),
    ("params.total", "is a number"),
    ("fit.fits == maybe", "true or false"),
    ("lint <= bad", "compares with"),
    ("params.total <= eight", "not a number"),
    ("__import__('os') <= 1", "METRIC OP VALUE"),
    ("params.total <= 1e999", "not finite"),
])
def test_bad_constraints(text, words):
    with pytest.raises(InputError, match=words):
        parse_where(text)


# ---- the command --------------------------------------------------------------------------------


def run(*args):
    return CliRunner().invoke(cli, ["sweep", *args], catch_exceptions=False)


def test_cli_json_and_csv(tmp_path):
    args = ("llama-3.2-1b", "--vary", "n_layers=4..8", "--vary", "attention.n_kv_heads=1,2,4,8", "--context", "1024",
            "--where", "kv_cache.bytes_per_token <= 16KiB", "--minimize", "params.total", "--top", "3")
    doc = json.loads(run(*args, "--json").stdout)
    assert doc["schema"] == "archcalc.sweep/1" and doc["counts"]["shown"] == 3
    assert doc["counts"]["candidates"] == 20 and doc["units"]["kv_cache.bytes_per_token"] == "bytes"
    first = doc["results"][0]
    assert first["fields"] == {"n_layers": 4, "attention.n_kv_heads": 1}
    spec = candidate("llama-3.2-1b", first["fields"])
    assert first["metrics"]["params.total"] == sized(spec).params.total
    r = run(*args, "--csv", str(tmp_path / "out.csv"))
    lines = (tmp_path / "out.csv").read_text().splitlines()
    assert lines[0].startswith("n_layers,attention.n_kv_heads,params.total") and len(lines) == 4
    assert r.exit_code == 0 and "sweep of llama-3.2-1b" in r.stdout and "feasible" in r.stdout


def test_cli_plot(tmp_path):
    path = tmp_path / "front.png"
    r = run("llama-3.2-1b", "--vary", "n_layers=4..16", "--vary", "ffn.d_ff_ratio=2:4:0.5", "--context", "1024",
            "--pareto", "params.total,kv_cache.bytes", "--plot", str(path))
    assert r.exit_code == 0 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, words", [
    (("llama-3.2-1b",), "--vary"),
    (("llama-3.2-1b", "--vary", "d_modl=1,2"), "did you mean d_model"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--where", "tpot < 1ms"), "needs a --gpu"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--where", "fit.fits"), "needs a --gpu"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--minimize", "fit.max_context", "--gpu", "h100"), "per candidate"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--minimize", "tpot", "--pareto", "a,b"), "one of"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--pareto", "params.total"), "two different"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--rates", "peak"), "give a --gpu"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--tp", "2"), "give a --gpu"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--gpu", "h1000"), "h100"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--vary", "n_layers=3..4"), "twice"),
    (("llama-3.2-1b", "--vary", "d_model=1..100000", "--vary", "n_layers=1..10000"), "--samples"),
    (("llama-3.2-1b", "--vary", "ffn.moe.top_k=1,2"), "no moe section"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--columns", "nope"), "unknown metric"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--plot", "x.pdf"), ".png or .svg"),
    (("nope-model", "--vary", "n_layers=1..2"), "nope-model"),
    (("llama-3.2-1b", "--vary", "n_layers=1..2", "--top", "-1"), "--top"),
])
def test_cli_bad_input_is_one_line_and_exit_2(args, words, tmp_path):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error:") and words in r.stderr
    assert r.stdout == ""


def test_output_paths_are_checked_before_the_sweep(tmp_path):
    args = ("llama-3.2-1b", "--vary", "n_layers=1..2", "--context", "64")
    for option, target, words in (("--csv", tmp_path / "missing" / "out.csv", "does not exist"),
                                  ("--csv", tmp_path, "is a folder"),
                                  ("--plot", tmp_path / "missing" / "front.png", "does not exist")):
        r = run(*args, option, str(target))
        assert r.exit_code == 2 and words in r.stderr and r.stderr.count("\n") == 1 and r.stdout == "", r.output
    assert list(tmp_path.iterdir()) == []
    r = run(*args, "--csv", str(tmp_path / "out.csv"))
    assert r.exit_code == 0 and [p.name for p in tmp_path.iterdir()] == ["out.csv"]  # no temporary file left


# ---- fuzz: any field, any values -----------------------------------------------------------------

LEAVES = sorted(space._leaves(ModelSpec))
VALUE_TEXT = st.one_of(st.integers(-2, 70000).map(str), st.floats(0, 9, allow_nan=False).map(lambda f: f"{f:.3g}"),
                       st.sampled_from(["swiglu", "gelu", "pre", "post", "true", "false", "rmsnorm", "local", "x"]))


@given(st.sampled_from(BUNDLED), st.lists(st.tuples(st.sampled_from(LEAVES), st.lists(VALUE_TEXT, min_size=1,
                                                                                      max_size=4)),
                                          min_size=1, max_size=3, unique_by=lambda t: t[0]))
def test_fuzzed_sweeps_never_crash_and_keep_only_valid_candidates(name, picks):
    """Any field of the schema with any values: an InputError (one line), or a result whose
    every kept candidate is a valid ModelSpec priced as the scalar path prices it."""
    varies = [f"{path}={','.join(values)}" for path, values in picks]
    try:
        r = api.sweep(name, varies, samples=30, seed=1, top=0, context=256)
    except InputError as e:
        assert "\n" not in str(e)
        return
    assert r.candidates == 30 == r.invalid_total + r.infeasible + r.feasible and r.infeasible == 0
    for row in r.rows[:5]:
        assert row.metrics["params.total"] == sized(candidate(name, row.fields), 256).params.total


def test_lint_filter_keeps_exactly_the_candidates_lint_passes():
    from archcalc.linter import SEVERITIES, lint, worst

    r = api.sweep("llama-3.1-8b", ["ffn.d_ff=14000:14400:4"], context=4096, where=["lint <= info"], top=0,
                  columns=["lint"])
    levels = {}
    for d_ff in range(14000, 14401, 4):
        w = worst(lint(candidate("llama-3.1-8b", {"ffn.d_ff": d_ff})))
        levels[d_ff] = 0 if w is None else SEVERITIES.index(w) + 1
    assert {row.fields["ffn.d_ff"] for row in r.rows} == {d for d, level in levels.items() if level <= 1}
    assert 0 < len(r.rows) < len(levels) and r.lazy_rejected == len(levels) - len(r.rows)
    assert all(row.metrics["lint"] == levels[row.fields["ffn.d_ff"]] for row in r.rows)


@pytest.mark.parametrize("args, words", [
    (("--where", "params.total < 0"), "satisfies 'params.total < 0', even alone"),
    (("--where", "params.total < 7.7e9", "--where", "params.total > 7.9e9"), "every --where together"),
    (("--vary", "attention.n_kv_heads=3,5"), "all 6 candidates are invalid: n_heads divisible by n_kv_heads (6)"),
    (("--where", "fit.fits", "--gpu", "rtx-4090", "--context", "131072", "--batch", "64"),
     "checked one by one fail 'fit.fits'"),
])
def test_impossible_constraints_are_one_line_and_exit_2(args, words):
    r = run("llama-3.1-8b", "--vary", "n_layers=30..32", *args)
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and words in r.stderr, r.stderr


@pytest.mark.parametrize("fixture, change, vary", [
    ("doge-40m", {"ffn": {"product_key": {"n_experts": 64, "top_k": 8}}},
     ["ffn.product_key.n_experts=10,64,100", "ffn.product_key.top_k=8,64,81"]),
    ("jetmoe-8b-ultrainteract-sft-v4", {}, ["attention.experts.top_k=1..9", "attention.experts.n_experts=2,8"]),
])
def test_validity_checks_the_rules_of_every_sub_spec(fixture, change, vary):
    """The rules of sub-specs found anywhere in the spec (Doge's product keys, JetMoE's attention experts), not
    only those of a fixed list: the sweep drops exactly the candidates ModelSpec refuses, and drops some."""
    data = spec_of(str(Path(__file__).parents[1] / "data" / "hf" / f"{fixture}.json")).model_dump()
    for key, value in change.items():
        data[key] = {**data[key], **value}
    base = ModelSpec.model_validate(data)
    dropped = kept = 0
    for g in space.groups(base, [space.parse_vary(v) for v in vary]):
        ok, _ = space.validity(space.with_values(g.base, g.columns), g.size)
        for i in range(g.size):
            candidate_data = base.model_dump()
            for path, col in g.columns.items():
                space._set_path(candidate_data, path, col[i].item())
            try:
                ModelSpec.model_validate(candidate_data)
                valid = True
            except ValidationError:
                valid = False
            assert valid == bool(ok[i])
            dropped, kept = dropped + (not valid), kept + valid
    assert dropped and kept
