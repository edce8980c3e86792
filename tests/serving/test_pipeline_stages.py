"""Layer splits across GPUs: vLLM's pipeline stages and llama.cpp's --tensor-split, pinned to the
engines' own logs and code (parallel/pipeline.py cites the rules)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from archcalc.cli import cli
from archcalc.cost.totals import weight_bytes
from archcalc.hardware.profile import load_hardware
from archcalc.ops.checkpoints import checkpoint_size
from archcalc.ops.layers import model_ops
from archcalc.ops.op import cache_token_bytes
from archcalc.ops.workload import Workload
from archcalc.ops.vision import vision_ops
from archcalc.parallel.pipeline import Stage, llamacpp_devices, stage_ops, vllm_partition, vllm_stages
from archcalc.serving.deployment import Deployment
from archcalc.serving.engines.vllm import format_gib
from archcalc.serving.planner import Planner
from archcalc.spec.catalog import load_model

MiB = 2**20
CODER = "tests/data/hf/qwen2.5-coder-32b-instruct.json"  # 64 layers, 8 KV heads × 128


def spec_of(name):
    return load_model(name)[0]


# ---- vLLM ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("layers", "pp", "parts"), [
    # vLLM's docs (distributed serving, VLLM_PP_LAYER_PARTITION): a 61-layer model
    (61, 2, [31, 30]), (61, 4, [15, 15, 16, 15]),
    # get_pp_indices' docstring cases (tests/distributed/test_pipeline_partition.py)
    (22, 4, [5, 6, 6, 5]), (5, 3, [2, 2, 1]), (4, 3, [1, 2, 1]), (3, 2, [2, 1]), (32, 4, [8, 8, 8, 8]),
    # a vLLM log: "Hidden layers were unevenly partitioned: [22,21]" (SystemPanic/vllm-windows#71, 43 layers)
    (43, 2, [22, 21]),
])
def test_vllm_partitions_layers_as_get_pp_indices(layers, pp, parts):
    assert vllm_partition(layers, pp) == parts


def test_deepseek_v3_under_pp_2_as_vllm_ascend_logs_it():
    """DeepSeek-V3 at TP 8 × PP 2: "Hidden layers were unevenly partitioned: [31,30]"; the first stage
    holds the embedding, the last the norm and lm_head."""
    stages = vllm_stages(spec_of("deepseek-v3"), 2)
    assert stages == [Stage(0, 0, 31, True, False), Stage(1, 31, 61, False, True)]


def test_qwen3_32b_under_pp_2_loads_what_vllm_logs():
    """Qwen3-32B, vLLM 0.27.1, --pipeline-parallel-size 2 (kubesimplify's "Running a single LLM across
    two GPUs with vLLM"): "(Worker_PP0) Model loading took 30.52 GiB" and the same for Worker_PP1.
    Stage 0: the embedding (151,936 × 5,120) and layers 0-31; stage 1: layers 32-63, the norm and
    lm_head (untied, the same size): 30.51 GiB of bf16 weights each.  vLLM measures the memory loading
    took, which also holds the RoPE cos/sin cache each worker registers as a buffer
    ([max_position_embeddings, head_dim] = 40,960 × 128 in bf16, 10 MiB): 30.52."""
    spec = spec_of("tests/data/hf/qwen3-32b.json")
    plan = Planner(spec, load_hardware("h100-sxm"), Deployment(gpus=2, pp=2)).plan(32768)
    assert [p.stage.layers for p in plan.stage_plans] == [32, 32]
    rope_cache = 40960 * 128 * 2
    for p in plan.stage_plans:
        assert format_gib(p.weights.bytes) == "30.51"
        assert format_gib(p.weights.bytes + rope_cache) == "30.52"
    # the two stages differ by the final norm (5,120 bf16 values) and nothing else
    assert plan.stage_plans[1].weights.bytes - plan.stage_plans[0].weights.bytes == 5120 * 2


def test_vllm_ties_the_embedding_onto_the_last_stage():
    """LlamaModel builds embed_tokens where `is_first_rank or (tie_word_embeddings and is_last_rank)`:
    Llama-3.2-1B (tied, 128,256 × 2,048) holds it on both ends of PP 2."""
    spec = spec_of("llama-3.2-1b")
    plan = Planner(spec, load_hardware("h100-sxm"), Deployment(gpus=2, pp=2)).plan(8192)
    embedding = 128256 * 2048 * 2
    layers = weight_bytes(model_ops(spec, Workload()), "bf16") - embedding - 2048 * 2  # less the final norm
    first, last = plan.stage_plans
    assert first.weights.bytes == embedding + layers / 2
    assert last.weights.bytes == embedding + layers / 2 + 2048 * 2


def test_vllm_kv_pool_is_the_least_stage_s():
    """get_kv_cache_configs: every worker's num_blocks becomes the smallest among them.  A stage with
    the logits (the last) has less memory left; its concurrency is what vLLM reports and what fits."""
    spec = spec_of("qwen3-8b")
    planner = Planner(spec, load_hardware("h100-sxm"), Deployment(gpus=2, pp=2))
    plan = planner.plan(32768)
    blocks = [p.startup.num_blocks for p in plan.stage_plans]
    assert plan.stage is plan.stage_plans[1].stage and plan.startup.num_blocks == min(blocks) < blocks[0]
    assert planner.max_batch(32768).value == min(p.startup.max_batch() for p in plan.stage_plans)
    # the layers are half the model's on each stage: 18 of 36 layers × 16-token pages of 8 × 128 × 2 × 2 B
    assert plan.startup.page_bytes * plan.startup.group_size == 16 * 8 * 128 * 2 * 2 * 18


# ---- llama.cpp -------------------------------------------------------------------------------


@pytest.mark.parametrize(("split", "context", "layers", "kv_mib"), [
    # ggml-org/llama.cpp#11200: 2 × RTX 3090 Ti, -ts 10,6 -c 32768 -ctk q8_0 -ctv q8_0,
    # "CUDA0 KV buffer size = 2788.00 MiB", "CUDA1 KV buffer size = 1564.00 MiB"
    ((10.0, 6.0), 32768, [41, 23], [2788.00, 1564.00]),
    # ggml-org/llama.cpp#10547: RTX 4090 + RTX 3090, -ts 3,10 -c 32000 q8_0: 996.09 / 3253.91 MiB.
    # Layer 15's slot 15/65 equals the first GPU's share 3/13: upper_bound sends it to the second.
    ((3.0, 10.0), 32000, [15, 49], [996.09, 3253.91]),
])
def test_llama_cpp_tensor_split_as_logged(split, context, layers, kv_mib):
    dep = Deployment(engine="llamacpp", gpus=2, tensor_split=split, kv_dtype="q8_0")
    plan = Planner(spec_of(CODER), load_hardware("h100-sxm"), dep).plan(context)
    assert [p.stage.layers for p in plan.stage_plans] == layers
    assert [round(p.kv_bytes / MiB, 2) for p in plan.stage_plans] == kv_mib
    assert [p.stage.output for p in plan.stage_plans] == [False, True]


def test_llama_cpp_default_split_of_qwen2_5_0_5b():
    """nixiesearch's GPU docs, 2 × RTX 4090, no -ts: "offloaded 25/25 layers", n_ctx = 32768 (4 slots of
    8192), "CUDA0 KV buffer size = 208.00 MiB", "CUDA1 KV buffer size = 176.00 MiB" (f16): 13 and 11 of
    the 24 layers; the output layer (slot 24) on CUDA1."""
    dep = Deployment(engine="llamacpp", gpus=2)
    plan = Planner(spec_of("qwen2.5-0.5b"), load_hardware("rtx-4090"), dep).plan(8192, 4)
    assert [(p.stage.layers, p.stage.output) for p in plan.stage_plans] == [(13, False), (11, True)]
    assert [p.kv_bytes / MiB for p in plan.stage_plans] == [208.0, 176.0]


def test_llama_cpp_split_places_every_layer_once():
    """llama-model.cpp's split for 3 GPUs 1:1:2 over 32 layers: slots il/33 against 0.25, 0.5, 1."""
    devices = llamacpp_devices(32, (1.0, 1.0, 2.0))
    assert [devices.count(g) for g in range(3)] == [9, 8, 16]  # the 33rd slot, the output, on GPU 2
    assert devices[-1] == 2 and devices == sorted(devices)
    assert llamacpp_devices(32, (1.0, 0.0)) == [0] * 33  # a GPU given 0 holds nothing


def test_q4_k_m_layers_land_on_their_gpu():
    """A Q4_K_M file gives the first and last eighth of the layers (use_more_bits) Q6_K attn_v and
    ffn_down: split 1:1, each GPU holds its own layers' tensors, and together the file's bytes."""
    spec = spec_of("llama-3.1-8b")
    ops = model_ops(spec, Workload())
    c = checkpoint_size(spec, ops, "gguf:Q4_K_M")
    plan = Planner(spec, load_hardware("rtx-4090"), Deployment(engine="llamacpp", gpus=2, weights="gguf:Q4_K_M")).plan(4096)
    first, second = (p.weights.bytes for p in plan.stage_plans)
    embedding = c.bytes_by_op[0]  # token_embd stays in host memory
    assert first + second == pytest.approx(c.bytes - embedding, rel=1e-12)
    # layers 0-16 on GPU 0: the layer-by-layer bytes of the file, not 17/32 of the whole
    by_layer = sum(sum(b[:17]) for i, b in c.bytes_by_layer.items() if ops[i].name.startswith("layers."))
    assert first == pytest.approx(by_layer, rel=1e-12)
    assert first != pytest.approx((c.bytes - embedding - c.bytes_by_op[len(ops) - 1]) * 17 / 32, rel=1e-6)


# ---- the cut keeps every layer ---------------------------------------------------------------


@settings(max_examples=40, deadline=None, derandomize=True)
@given(name=st.sampled_from(["gemma-3-27b", "deepseek-v3", "qwen3-next-80b-a3b", "llama-4-maverick", "jamba-1.5-mini",
                             "smollm3-3b", "gpt2", "olmoe-1b-7b", "nemotron-3-nano-30b-a3b"]),
       pp=st.integers(1, 9))
def test_stages_add_up_to_the_model(name, pp):
    """Cutting a model into stages loses and duplicates nothing: the stages' weights and KV bytes per
    token sum to the whole model's (whose numbers the HF oracle pins), the tied embedding excepted."""
    spec = spec_of(name)
    wl = Workload()
    whole = model_ops(spec, wl)
    stages = vllm_stages(spec, min(pp, spec.n_layers))
    parts = [stage_ops(spec, s, wl) for s in stages]
    tied = weight_bytes([whole[0]], "bf16") if spec.tie_embeddings and len(stages) > 1 else 0
    assert sum(weight_bytes(p, "bf16") for p in parts) == weight_bytes(whole, "bf16") + tied

    def kv(ops):
        return sum(op.count * cache_token_bytes(op, 2, 1.0) for op in ops if op.kind == "attention")

    assert sum(kv(p) for p in parts) == kv(whole)
    assert sum(s.layers for s in stages) == spec.n_layers


# ---- options ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "message"), [
    (["--engine", "llamacpp", "--pp", "2"], "--pp: engine llamacpp does not take it; vllm does (--engine vllm)"),
    (["--pp", "2", "--tensor-split", "1,1"], "--tensor-split: engine vllm does not take it; llamacpp does"),
    (["--engine", "llamacpp", "--tensor-split", "1,x"], "--tensor-split: '1,x' is not a split"),
    (["--engine", "llamacpp", "--tensor-split", "0,0"], "at least one must be > 0"),
    (["--engine", "llamacpp", "--gpus", "4", "--tensor-split", "1,1"], "2 proportions for 4 GPUs"),
    (["--pp", "40"], "--pp: 40 pipeline stages for 36 layers"),
    (["--gpus", "3", "--pp", "2"], "3 GPUs are not a whole number of TP 1 × PP 2"),
])
def test_bad_split_options_are_one_line(args, message):
    r = CliRunner().invoke(cli, ["fit", "qwen3-8b", "--gpu", "h100", "--context", "4096", *args])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_an_option_two_engines_take_names_both(monkeypatch):
    """Engines are a registry: a second engine that takes --pp (registered here) joins vLLM in the
    line that refuses --pp to llama.cpp, both named, the first as the one to switch to."""
    from archcalc.errors import InputError
    from archcalc.serving.engines.base import ENGINES, Engine
    from archcalc.serving.planner import check_deployment

    class Other(Engine):
        name = "other"
        takes = frozenset({"pp"})

    monkeypatch.setitem(ENGINES, "other", Other())
    with pytest.raises(InputError) as e:
        check_deployment(load_model("qwen3-8b")[0], Deployment(engine="llamacpp", pp=2))
    assert str(e.value) == "--pp: engine llamacpp does not take it; vllm and other do (--engine vllm)"


def test_fit_json_lists_every_stage():
    r = CliRunner().invoke(cli, ["fit", "qwen2.5-0.5b", "--gpu", "rtx-4090", "--engine", "llamacpp",
                                 "--tensor-split", "3,1", "--context", "8192", "--json"])
    doc = json.loads(r.stdout)
    stages = doc["plan"]["stages"]
    # 25 slots, shares 0.75 and 1: il/25 < 0.75 for il <= 18: 19 layers on GPU 0, 5 and the output on GPU 1
    assert [(s["first_layer"], s["layers"], s["output"]) for s in stages] == [(0, 19, False), (19, 5, True)]
    assert doc["deployment"]["tensor_split"] == [3.0, 1.0] and doc["deployment"]["gpus"] == 2
    assert doc["plan"]["total"] == max(s["total"] for s in stages if s["index"] == doc["plan"]["stage"])
    r = CliRunner().invoke(cli, ["fit", "qwen3-8b", "--gpu", "h100", "--pp", "2", "--context", "4096"])
    assert r.exit_code == 0 and "Per stage" in r.output and "TP 1 × PP 2" in r.output


# ---- the stages themselves: labels, empty GPUs, float32 boundaries ------------------------------------


def test_stage_labels_name_the_layers_and_the_ends():
    """What the 'Per stage' table prints: vLLM PP 2 over Llama-3.1-8B's 32 layers (16 + 16), and a
    llama.cpp split -ts 32,1 whose second GPU gets only the output layer (slot 32 of 33: its share
    32/33 is not above 32/33, so upper_bound passes GPU 0)."""
    spec = spec_of("llama-3.1-8b")
    assert [s.label() for s in vllm_stages(spec, 2)] == ["layers 0-15 + embedding", "layers 16-31 + output"]
    assert Stage(0, 0, 32, True, True).label() == "layers 0-31 + embedding + output"
    dep = Deployment(engine="llamacpp", gpus=2, tensor_split=(32.0, 1.0))
    plan = Planner(spec, load_hardware("h100"), dep).plan(4096)
    assert [p.stage.label() for p in plan.stage_plans] == ["layers 0-31", "no layers + output"]
    assert [(p.stage.index, p.stage.layers, p.stage.output) for p in plan.stage_plans] == [(0, 32, False),
                                                                                        (1, 0, True)]
    # the output GPU holds the final norm and lm_head (4,096 × 128,256 bf16) and no KV cache
    assert plan.stage_plans[1].kv_bytes == 0
    assert plan.stage_plans[1].weights.split == 128256 * 4096 * 2 + 4096 * 2


def test_llama_cpp_splits_in_float32():
    """llama-model.cpp keeps the splits in a std::vector<float> and compares float(il) / (n_layer + 1)
    with std::upper_bound.  -ts 0.1,0.3,3 over 16 layers: the second split point 0.4f / 3.4f and slot
    2's 2.0f / 17 are the same float (shown below with struct, one float32 rounding per step), so slot
    2 goes to the third GPU: 1, 1 and 14 layers + the output.  In float64 0.1 + 0.3 rounds above 0.4
    and slot 2 would stay on the second GPU (1, 2, 13)."""
    import struct

    def f32(x):
        return struct.unpack("f", struct.pack("f", x))[0]

    point = f32(f32(f32(0.1) + f32(0.3)) / f32(f32(f32(0.1) + f32(0.3)) + f32(3.0)))
    assert point == f32(f32(2.0) / 17) and (0.1 + 0.3) / 3.4 > 2 / 17
    devices = llamacpp_devices(16, (0.1, 0.3, 3.0))
    assert [devices.count(g) for g in range(3)] == [1, 1, 15] and devices[2] == 2
    # The split points too, not only the slots: -ts 0.7,0.4 over 32 layers.  0.7f / (0.7f + 0.4f) is the float
    # 21.0f / 33, so slot 21 leaves GPU 0 (21 layers, then 11 and the output); with the split points in
    # float64 (0.63636363636363624 > 0.63636362f) it would stay (22 and 10)
    point = f32(f32(0.7) / f32(f32(0.7) + f32(0.4)))
    assert point == f32(f32(21.0) / 33) and 0.7 / (0.7 + 0.4) > point
    assert [llamacpp_devices(32, (0.7, 0.4)).count(g) for g in range(2)] == [21, 12]


def test_vision_tower_sits_on_the_first_gpu():
    """A multimodal checkpoint's tower loads with the first stage (vLLM PP rank 0; llama.cpp's mmproj on
    the main GPU) and whole on a single GPU."""
    spec = spec_of("gemma-3-27b")
    vision = weight_bytes(vision_ops(spec), "bf16")
    one = Planner(spec, load_hardware("h200"), Deployment(engine="plain")).plan(4096)
    assert one.weights.vision == vision > 0
    for dep in (Deployment(pp=2, gpus=2), Deployment(engine="llamacpp", gpus=2)):
        plan = Planner(spec, load_hardware("h200"), dep).plan(4096)
        assert [p.weights.vision for p in plan.stage_plans] == [vision, 0.0]


def test_attention_residuals_are_not_split():
    from archcalc.errors import InputError
    from archcalc.parallel.pipeline import stage_spec

    spec = spec_of("llama-3.1-8b")
    attnres = spec.model_copy(update={"residual": spec.residual.model_copy(update={"kind": "attnres"})})
    with pytest.raises(InputError) as e:
        stage_spec(attnres, Stage(0, 0, 16, True, False))
    assert (e.value.field, e.value.message) == ("--pp", "attention residuals mix every layer's output: not split "
                                                        "into stages")
    assert stage_spec(attnres, Stage(0, 0, 32, True, True)) is attnres  # the whole model is no split


@pytest.mark.parametrize("pp", [0, 33])
def test_vllm_partition_refuses_impossible_stages(pp):
    from archcalc.errors import InputError

    with pytest.raises(InputError) as e:
        vllm_partition(32, pp)
    assert e.value.field == "--pp" and str(e.value).endswith(f"{pp} pipeline stages for 32 layers; give 1 to 32")


def test_an_op_outside_every_stage_is_named():
    from dataclasses import replace

    from archcalc.parallel.pipeline import _placement

    stray = replace(model_ops(spec_of("llama-3.1-8b"), Workload())[0], name="stray.op")
    with pytest.raises(AssertionError, match="op stray.op is in no pipeline stage"):
        _placement(stray)


def test_parse_split_bounds_and_messages():
    """At most 16 proportions (llama_max_devices) and 200 characters; refusals name --tensor-split."""
    from archcalc.errors import InputError
    from archcalc.serving.deployment import parse_split

    assert len(parse_split(",".join(["1"] * 16))) == 16
    exact = ",".join(["123456789.12"] * 15 + ["12345"])
    assert len(exact) == 200 and len(parse_split(exact)) == 16
    for bad in (",".join(["1"] * 17), exact + "6", 12, None):
        with pytest.raises(InputError) as e:
            parse_split(bad)
        assert e.value.field == "--tensor-split"
        assert e.value.message == (f"{str(bad)[:40]!r} is not a split; give one proportion per GPU separated by "
                                   f"commas (e.g. 3,1), at most 16")
    with pytest.raises(InputError) as e:
        parse_split(" 0,0 ")
    assert (e.value.field, e.value.message) == ("--tensor-split", "'0,0' gives every GPU 0; at least one must be > 0")


def test_check_reserve_shows_what_it_refuses():
    from archcalc.errors import InputError
    from archcalc.serving.deployment import check_reserve

    tail = "is not valid; give bytes from 0 to 1 PiB (1,125,899,906,842,624 bytes)"
    for value, shown in ((2**64, "a 65-bit integer"), (2**63, repr(2**63)), (-1, "-1"), ("x" * 50, repr("x" * 50)[:40]),
                         (True, "True"), (float("inf"), "inf")):
        with pytest.raises(InputError) as e:
            check_reserve(value)
        assert (e.value.field, e.value.message) == ("--reserve", f"{shown} {tail}")
    assert check_reserve(None) is None and check_reserve(2**30) == float(2**30)


def _every_architecture():
    """Every bundled spec, every real config.json fixture and the reference model's variants."""
    from tests.conftest import BUNDLED, debug_spec
    from tests.measure.test_reference_model import VARIANTS

    from archcalc.spec.catalog import spec_from_dict
    from archcalc.spec.hf import spec_dict_from_config

    hf = sorted(p for p in (Path(__file__).parents[1] / "data" / "hf").glob("*.json"))
    yield from ((f"spec:{n}", lambda n=n: spec_of(n)) for n in BUNDLED)
    yield from ((f"hf:{p.stem}", lambda p=p: spec_from_dict(spec_dict_from_config(json.loads(p.read_text()),
                                                                                 p.name)[0], p.name)) for p in hf)
    yield from ((f"debug:{v}", lambda v=v: debug_spec(**VARIANTS[v])) for v in VARIANTS if "attnres" not in v)


ARCHITECTURES = dict(_every_architecture())


@pytest.mark.parametrize("name", sorted(ARCHITECTURES))
def test_two_stages_hold_every_op_of_the_model(name):
    """A pipeline stage takes an op by its name (layers.*, the input's, the output's; an unknown name is an
    error): two vLLM stages together run every op of the whole model, the layer ops split between them.
    (A stage whose layers are all of one attention kind names its core without the kind.)"""
    spec = ARCHITECTURES[name]()
    if spec.n_layers < 2:
        pytest.fail(f"{name} has one layer")
    wl = Workload.decode(64)
    # HRM-Text, Zamba: every stage needs shared weights; a drafter's layers read K/V no stage of its own computes;
    # ZAYA1's router carries a state from each MoE layer to the next
    moe = spec.ffn.moe
    if (spec.loop is not None or spec.shared_block is not None or spec.attention.kv_shared_layers
            or (moe is not None and moe.router_mlp is not None and moe.router_mlp.eda)):
        from archcalc.errors import InputError

        with pytest.raises(InputError, match="(are|is) not split into stages"):
            [stage_ops(spec, stage, wl) for stage in vllm_stages(spec, 2)]
        return
    whole = model_ops(spec, wl)
    counts: dict[str, int] = {}
    for stage in vllm_stages(spec, 2):
        for op in stage_ops(spec, stage, wl):
            counts[_kindless(op.name)] = counts.get(_kindless(op.name), 0) + op.count
    tied_copy = {op.name for op in whole if op.kind == "gather" and op.component == "embedding"} \
        if spec.tie_embeddings else set()
    assert {n: c for n, c in counts.items() if n not in tied_copy and c} == \
        dict(Counter(_kindless(op.name) for op in whole for _ in range(op.count) if op.name not in tied_copy))


def _kindless(name: str) -> str:
    return name.removesuffix(".global").removesuffix(".local").removesuffix(".chunked")
