"""The fit solvers against their definitions, counted out one value at a time.

A solver's answer is the largest batch (or context, or the fewest GPUs) whose plan fits; the closed
forms and binary searches of serving/planner.py must land on exactly what scanning the plans finds,
and each answer must name what stops the next value, how it was found, and its details (the JSON
document's `solutions`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from archcalc.hardware.profile import load_hardware
from archcalc.serving.deployment import Deployment
from archcalc.serving.planner import TP_CHOICES, Planner, min_gpus, solve
from archcalc.spec.catalog import load_model


def scan(fits, start=1, limit=4096):
    """The largest n from `start` with fits(n), fits assumed monotone; start - 1 when none."""
    n = start - 1
    while n < limit and fits(n + 1):
        n += 1
    return n


# engine -> how its max batch is found: plain is affine in batch (closed form), vLLM counts its
# blocks (its own closed form), llama.cpp pads cells to 256 (a search)
METHODS = {"plain": "closed form", "vllm": "closed form", "llamacpp": "binary search"}


@pytest.mark.parametrize("engine", sorted(METHODS))
@pytest.mark.parametrize("name, gpu, context, gpus", [
    ("llama-3.2-1b", "rtx-4090", 4096, 1), ("qwen2.5-7b", "a100-80gb", 16384, 2), ("gemma-3-1b", "l4", 8192, 1)])
def test_max_batch_is_the_last_batch_that_fits(engine, name, gpu, context, gpus):
    spec = load_model(name)[0]
    dep = Deployment(engine=engine, gpus=gpus, tp=1)  # 2 GPUs: two replicas of one GPU each
    planner = Planner(spec, load_hardware(gpu), dep)
    best = scan(lambda b: planner.plan_per_gpu(context, b).fits, limit=2048)
    s = planner.max_batch(context)
    assert best >= 1
    assert (s.value, s.binding, s.method) == (best * gpus, planner.plan_per_gpu(context, best + 1).binding,
                                              METHODS[engine])
    assert s.detail == {"per_tp_group": best, "replicas": gpus}


@pytest.mark.parametrize("engine", sorted(METHODS))
def test_max_batch_when_one_sequence_does_not_fit(engine):
    planner = Planner(load_model("llama-3.1-70b")[0], load_hardware("rtx-4090"), Deployment(engine=engine))
    s = planner.max_batch(4096)
    first = planner.plan_per_gpu(4096, 1)
    assert (s.value, s.binding) == (0, first.binding) and first.binding == "weights"
    assert s.method == ("binary search" if engine == "llamacpp" else "closed form")


@pytest.mark.parametrize("engine", sorted(METHODS))
@pytest.mark.parametrize("name, gpu", [("llama-3.1-8b", "rtx-4090"), ("gemma-2-9b", "rtx-4090"),
                                       ("mistral-7b-v0.1", "l4")])
def test_max_context_is_the_last_context_that_fits(engine, name, gpu):
    """Windowed models (Gemma 2's 4,096, Mistral's 4,096) have a kink where the window stops growing."""
    spec = load_model(name)[0]
    planner = Planner(spec, load_hardware(gpu), Deployment(engine=engine))
    s = planner.max_context(2)
    if s.capped:
        assert s.value == spec.max_context and s.binding == "model max context"
        return
    fits = lambda c: planner.plan_per_gpu(c, 2).fits  # noqa: E731
    assert fits(s.value) and not fits(s.value + 1)  # the boundary, found without scanning 10^5 contexts
    assert s.binding == planner.plan_per_gpu(s.value + 1, 2).binding
    assert s.method == ("closed form" if engine == "plain" else "binary search")


def test_fewest_gpus_is_the_first_tp_that_fits():
    """Llama 3.1 70B at bf16 (141 GB of weights) with 4 sequences of 32k: counted TP by TP."""
    spec = load_model("llama-3.1-70b")[0]
    hw = load_hardware("h100")
    dep = Deployment()
    plans = {tp: Planner(spec, hw, replace(dep, gpus=tp, tp=tp)).plan(32768, 4) for tp in TP_CHOICES}
    first = next(tp for tp in TP_CHOICES if plans[tp].fits)
    s = min_gpus(spec, hw, dep, 32768, 4)
    assert first > 1 and s.value == first
    assert s.binding == plans[TP_CHOICES[TP_CHOICES.index(first) - 1]].binding and s.method == "search over TP"
    assert s.detail == {"tp": first, "pp": 1, "headroom": plans[first].headroom}
    assert min_gpus(spec, hw, dep, 32768, 1).value <= first  # fewer sequences never need more GPUs
    one = min_gpus(load_model("llama-3.2-1b")[0], hw, dep, 4096)
    assert (one.value, one.binding) == (1, "nothing: one GPU fits")
    none = min_gpus(load_model("deepseek-v3")[0], load_hardware("rtx-4090"), dep, 4096)
    assert (none.value, none.binding, none.method) == (None, "weights", "search over TP")


def test_solve_gathers_the_three_solvers_and_the_plan():
    """Llama 3.1 8B, 8 sequences of 128k on A100s: 16 GiB of cache each, so one GPU holds the model but
    not the batch; every solver and the plan see the batch."""
    spec = load_model("llama-3.1-8b")[0]
    hw = load_hardware("a100-80gb")
    r = solve(spec, hw, Deployment(), 131072, 8)
    planner = Planner(spec, hw, Deployment())
    assert r.plan == planner.plan(131072, 8) and not r.plan.fits
    assert r.solutions == {"max_context": planner.max_context(8), "max_batch": planner.max_batch(131072),
                           "min_gpus": min_gpus(spec, hw, Deployment(), 131072, 8)}
    assert r.solutions["min_gpus"].value > min_gpus(spec, hw, Deployment(), 131072, 1).value


def test_fit_all_plans_every_device_at_the_batch():
    from archcalc.hardware.profile import all_hardware
    from archcalc.serving.planner import fit_all

    spec = load_model("qwen2.5-7b")[0]
    rows = fit_all(spec, Deployment(), 16384, 5)
    assert [hw.name for hw, _, _ in rows] == [hw.name for hw in all_hardware()]
    for hw, plan, best in rows:
        planner = Planner(spec, hw, Deployment())
        assert plan == planner.plan(16384, 5) and best == planner.max_context(5)


def test_compare_s_fit_rows():
    from archcalc.serving.planner import compare_rows

    spec = load_model("qwen2.5-7b")[0]
    hw = load_hardware("l4")
    rows = compare_rows(hw, 8192, 3, Deployment())(spec)
    planner = Planner(spec, hw, Deployment())
    plan = planner.plan(8192, 3)
    assert rows == {
        "fits": ("fits one L4 at 8,192 × 3", "text", plan.fits),
        "memory_per_gpu": ("memory on one L4 (weights, KV, activations, reserve)", "bytes", plan.total),
        "max_context_on_gpu": ("largest context on one L4 at batch 3", "tokens", planner.max_context(3).value)}
    assert plan.total != planner.plan(8192, 1).total


@pytest.mark.parametrize("engine", sorted(METHODS))
def test_max_context_when_no_context_fits_and_when_memory_goes_past_the_model(engine):
    """Llama 3.1 70B cannot hold its weights on a 24 GB card: context 0, stopped by the weights.  Llama 3.2
    1B on an H100 reaches its 131,072 (model max) and says how far memory alone would go, found the
    engine's way, and what stops that."""
    dep = Deployment(engine=engine)
    none = Planner(load_model("llama-3.1-70b")[0], load_hardware("rtx-4090"), dep).max_context()
    assert (none.value, none.binding, none.method, none.capped) == (0, "weights", "binary search", False)
    planner = Planner(load_model("llama-3.2-1b")[0], load_hardware("h100"), dep)
    s = planner.max_context(2)
    assert (s.value, s.binding, s.method, s.capped) == (131072, "model max context", "model limit", True)
    alone = s.detail["memory_max_context"]
    fits = lambda c: planner.plan_per_gpu(c, 2).fits  # noqa: E731
    assert alone > 131072 and fits(alone) and not fits(alone + 1)
    assert s.detail == {"memory_max_context": alone, "memory_binding": planner.plan_per_gpu(alone + 1, 2).binding}


def test_max_context_counts_the_batch_per_replica():
    """4 sequences over 2 one-GPU replicas: each GPU holds 2."""
    spec = load_model("qwen2.5-7b")[0]
    two = Planner(spec, load_hardware("l4"), Deployment(gpus=2, tp=1)).max_context(4)
    one = Planner(spec, load_hardware("l4"), Deployment()).max_context(2)
    assert two == one and not two.capped


def test_max_context_past_the_search_limit():
    """A model whose cache is tiny beside the device: memory alone passes the largest context archcalc
    searches (MAX_CONTEXT), and says so."""
    from archcalc.limits import MAX_CONTEXT
    from archcalc.spec.model import ModelSpec

    tiny = ModelSpec(name="tiny", d_model=64, n_layers=1, vocab_size=256, max_context=1024,
                     attention={"n_heads": 4, "n_kv_heads": 1, "sliding_window": 16})
    s = Planner(tiny, load_hardware("h200"), Deployment(engine="vllm")).max_context()  # chunked prefill, windowed KV
    assert s.detail == {"memory_max_context": MAX_CONTEXT, "memory_binding": "search limit"}


def test_vllm_estimated_length_is_the_last_length_that_fits():
    """vLLM's own binary search over max_model_len (kv_cache_utils.estimate_max_model_len): the largest n
    whose one-request need fits the bytes; 0 when one token does not.  Gemma 3's sliding layers make the
    need depend on max_num_batched_tokens."""
    from archcalc.serving.engines.base import engine_named

    spec = load_model("gemma-3-1b")[0]
    planner = Planner(spec, load_hardware("l4"), Deployment())
    vllm = engine_named("vllm")
    for available, mnbt in ((50_000_000, 8192), (50_000_000, 512), (3_000_000, 8192)):
        dep = Deployment(max_num_batched_tokens=mnbt)
        n = vllm.estimate_max_model_len(planner.kinds, available, 32768, dep)
        assert vllm.needed(planner.kinds, n, dep) <= available < vllm.needed(planner.kinds, n + 1, dep)
    dep, small = Deployment(), Deployment(max_num_batched_tokens=512)
    exact = vllm.needed(planner.kinds, 1000, dep)
    assert vllm.estimate_max_model_len(planner.kinds, exact, 32768, dep) >= 1000  # equality fits
    assert vllm.estimate_max_model_len(planner.kinds, 1, 32768, dep) == 0
    assert vllm.estimate_max_model_len(planner.kinds, 50_000_000, 8192, small) != \
        vllm.estimate_max_model_len(planner.kinds, 50_000_000, 8192, dep)


def test_the_solvers_default_to_one_sequence():
    from archcalc.serving.planner import fit_all

    spec, hw = load_model("llama-3.1-8b")[0], load_hardware("l4")
    assert solve(spec, hw, Deployment(), 65536) == solve(spec, hw, Deployment(), 65536, 1)
    assert min_gpus(spec, hw, Deployment(), 131072) == min_gpus(spec, hw, Deployment(), 131072, 1)
    assert min_gpus(spec, hw, Deployment(), 131072, 1).value < min_gpus(spec, hw, Deployment(), 131072, 2).value
    assert fit_all(spec, Deployment(), 65536)[:3] == fit_all(spec, Deployment(), 65536, 1)[:3]
    planner = Planner(spec, hw, Deployment())
    assert planner.max_context() == planner.max_context(1) and planner.plan(4096) == planner.plan(4096, 1)


def test_warnings_are_only_the_ones_that_apply():
    from archcalc.serving.planner import warnings

    spec = load_model("llama-3.1-8b")[0]
    assert warnings(spec, Deployment(engine="llamacpp"), 4096) == []
    assert warnings(spec, Deployment(), 4096) == []


# ---- bad deployments: one line each, saying what is valid -------------------------------------------

@pytest.mark.parametrize("dep, line", [
    (Deployment(block_size=24), "--block-size: 24; vLLM takes 1, 8, 16, 32, 64, 128, 256"),
    (Deployment(weights="awq:g7"), "--weights: 'awq:g7'; valid: gguf:Q4_0, gguf:Q8_0, gguf:Q6_K, gguf:Q4_K_M, "
                                   "gguf:Q5_K_M, mxfp4, awq:g32, awq:g64, awq, gptq:g32, gptq:g64, gptq, fp8-block, "
                                   "fp8-block-mxfp4, nvfp4"),
    (Deployment(weight_dtype="int3"), "--dtype: 'int3'; valid: fp32, bf16, fp16, fp8, int8, int4"),
    (Deployment(kv_dtype_v="q8_0"), "--kv-dtype-v: engine vllm does not take it; llamacpp does (--engine "
                                    "llamacpp)"),
    (Deployment(gpus=6, tp=4), "--gpus: 6 GPUs are not a whole number of TP groups of 4"),
    (Deployment(gpus=3), "--tp: 3 does not split llama-3.2-1b's 32 attention heads and 8 KV heads evenly; "
                         "valid: 1, 2, 4, 8, 16, 32"),
    (Deployment(gpu_memory_utilization=0.0), "--gpu-memory-utilization: must be in (0, 1]"),
    (Deployment(gpu_memory_utilization=1.01), "--gpu-memory-utilization: must be in (0, 1]"),
])
def test_a_bad_deployment_is_one_line_naming_what_is_valid(dep, line):
    from archcalc.errors import InputError
    from archcalc.serving.planner import check_deployment

    with pytest.raises(InputError) as e:
        check_deployment(load_model("llama-3.2-1b")[0], dep)
    assert str(e.value) == line


def test_the_edges_of_a_good_deployment():
    from archcalc.serving.planner import check_deployment

    spec = load_model("llama-3.2-1b")[0]
    for dep in (Deployment(gpu_memory_utilization=1.0), Deployment(gpus=32), Deployment(engine="llamacpp",
                kv_dtype="q8_0", kv_dtype_v="f16"), Deployment(weights="gptq:g32"), Deployment(block_size=256)):
        check_deployment(spec, dep)  # nothing raised


def test_the_residual_stream_activation_counts_every_copy_a_layer_keeps():
    """Hyper-connections keep n streams of the residual and attention residuals every block's sum plus
    the partial one, so the fit's residual-stream term is that many copies of the plain one."""
    spec = load_model("llama-3.2-1b")[0]
    hw = load_hardware("h100")

    def residual(**r):
        s = spec if not r else spec.model_copy(update={"residual": spec.residual.model_copy(update=r)})
        return Planner(s, hw, Deployment()).plan(4096).activations.residual

    plain = residual()
    assert residual(kind="hyper", streams=4) == 4 * plain and residual(kind="mhc", streams=2) == 2 * plain
    assert residual(kind="attnres") == (2 * 16 + 1) * plain and residual(kind="attnres", blocks=4) == 5 * plain


def test_one_gpu_replicates_nothing():
    one = Planner(load_model("llama-3.1-8b")[0], load_hardware("h100"), Deployment()).plan(4096)
    assert one.weights.replicated == 0.0 and one.weights.split == 2 * 8_030_261_248


def test_a_plan_needs_a_context_and_a_batch_and_counts_every_replica():
    from archcalc.errors import InputError

    planner = Planner(load_model("llama-3.2-1b")[0], load_hardware("l4"), Deployment(gpus=2, tp=1))
    for context, batch, line in ((0, 1, "--context: must be at least 1"), (5, 0, "--batch: must be at least 1"),
                                 (0, 0, "--context: must be at least 1")):
        with pytest.raises(InputError) as e:
            planner.plan_per_gpu(context, batch)
        assert str(e.value) == line
    plan = planner.plan_per_gpu(1, 3)
    assert (plan.context, plan.batch, plan.batch_per_gpu) == (1, 6, 3)  # 2 replicas of one GPU each


@pytest.mark.parametrize("bend", [1, -1])
def test_the_closed_form_context_walks_to_the_exact_boundary_when_memory_bends(monkeypatch, bend):
    """The closed form solves each affine segment from two plans; where the real total is not quite
    affine (rounding, padding), it walks from its guess to the exact last context that fits, up or
    down.  Here the total gains (or loses) a step every 97 tokens, so the guess misses by several."""
    from types import SimpleNamespace

    planner = Planner(load_model("gemma-2-9b")[0], load_hardware("l4"), Deployment(engine="plain"))
    windows = sorted({k.window for k in planner.kinds if k.window})

    def total(s):
        return 1000.0 + 3.0 * s + bend * 40.0 * (s // 97) + 2.0 * sum(min(s, w) for w in windows)

    monkeypatch.setattr(planner, "capacity", 60_000.0)
    monkeypatch.setattr(planner, "plan_per_gpu", lambda s, b: SimpleNamespace(total=total(s)))
    expected = scan(lambda s: total(s) <= planner.capacity, limit=40_000)
    assert planner._affine_max_context(1, 40_000) == expected
    assert planner._affine_max_context(1, expected) == expected  # the top fits: it is the answer


def _exactly_affine(monkeypatch, planner, per_token: float, per_sequence: float, windows=()):
    """Make the planner's plans exactly affine (the closed forms' premise) and record each one asked for."""
    from types import SimpleNamespace

    asked = []

    def plan(s, b):
        asked.append((s, b))
        total = 1000.0 + b * (per_sequence + per_token * s + 2.0 * sum(min(s, w) for w in windows))
        return SimpleNamespace(total=total, fits=total <= planner.capacity, binding="memory", startup=None,
                               stage_plans=None)

    monkeypatch.setattr(planner, "capacity", 60_000.0)
    monkeypatch.setattr(planner, "plan_per_gpu", plan)
    return asked


def test_the_closed_form_batch_needs_no_search_when_memory_is_affine(monkeypatch):
    """total(b) = total(1) + (b − 1)·(total(2) − total(1)) exactly: the answer comes from the plans of
    batch 1 and 2, and is confirmed by its own plan and the next one's (which also names the binding
    constraint): five plans, no walking.  (1000 + b·(50 + 3·500) ≤ 60,000: b = 38.)"""
    planner = Planner(load_model("llama-3.1-8b")[0], load_hardware("l4"), Deployment(engine="plain"))
    asked = _exactly_affine(monkeypatch, planner, per_token=3.0, per_sequence=50.0)
    solution = planner.max_batch(500)
    assert solution.value == scan(lambda b: 1000.0 + b * (50.0 + 1500.0) <= 60_000.0) == 38
    assert [b for _, b in asked] == [1, 2, 38, 39, 39]


def test_the_closed_form_context_needs_no_walk_when_memory_is_affine(monkeypatch):
    """Each segment between window breakpoints is affine: the segments that fit cost one plan each (their
    end), the binding one its two first plans, then the answer and the one past it.  Gemma 2's window
    of 4,096: total(s) = 1000 + 50 + 3s + 2·min(s, 4096) ≤ 60,000 up to s = 16,919, past the window."""
    planner = Planner(load_model("gemma-2-9b")[0], load_hardware("l4"), Deployment(engine="plain"))
    windows = sorted({k.window for k in planner.kinds if k.window})
    assert windows == [4096]
    asked = _exactly_affine(monkeypatch, planner, per_token=3.0, per_sequence=50.0, windows=windows)
    expected = scan(lambda s: 1000.0 + 50.0 + 3.0 * s + 2.0 * min(s, 4096) <= 60_000.0, limit=40_000)
    assert planner._affine_max_context(1, 40_000) == expected == 16_919
    assert [s for s, _ in asked] == [4096, 40_000, 4096, 4097, expected, expected + 1]
