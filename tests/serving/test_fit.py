"""`archcalc fit`: engine KV rules, the memory plan, the solvers and the CLI.

Pinned to numbers we did not write: the Gemma-3-27B 128k KV table of
reference/anchors-memory-flops.md §C.4, vLLM's and llama.cpp's published
rules worked by hand on small synthetic specs, vLLM's logged weight sizes
(vllm#10511), DeepSeek-V3's 70,272 B MLA cache per token, and vLLM's error
text as its source spells it."""

from __future__ import annotations

import json
import math
import re

import pytest
from click.testing import CliRunner
from conftest import debug_spec, spec_of

from archcalc.cli import cli
from archcalc.hardware.profile import all_hardware, load_hardware
from archcalc.serving.deployment import Deployment, parse_bytes
from archcalc.serving.engines import ENGINES
from archcalc.serving.engines.vllm import VLLM_TOO_SMALL, format_gib, vllm_blocks
from archcalc.cost.solve import last_true
from archcalc.serving.planner import Planner, min_gpus
from archcalc.errors import InputError

GiB, MiB = 2**30, 2**20
H100 = load_hardware("h100")
G27 = spec_of("gemma-3-27b")
CTX_128K = 131072


def planner(spec, engine="plain", hw=H100, **kw):
    return Planner(spec, hw, Deployment(engine=engine, **kw))


def run(*args):
    return CliRunner().invoke(cli, list(args))


# ---- §C.4: Gemma-3-27B at 128k, bf16, 16 KV heads × 128 = 8 KiB per token and layer ----------


def test_gemma3_27b_kv_table_of_anchors_c4():
    plain = planner(G27).plan(CTX_128K)
    by_kind = {k.kind: k for k in plain.kv}
    assert {k: v.layers for k, v in by_kind.items()} == {"global": 10, "local": 52}
    assert all(k.token_bytes == 8 * 1024 for k in plain.kv)
    # Naive (every layer at full context) 62.0 GiB; full layers only 10.0 GiB.
    assert sum(k.layers * k.token_bytes for k in plain.kv) * CTX_128K == 62 * GiB
    assert by_kind["global"].bytes == 10 * GiB
    # llama.cpp: 52 SWA layers × pad(1024 + 512, 256) = 1536 cells: ≈ 10.6 GiB.
    llama = planner(G27, "llamacpp").plan(CTX_128K)
    assert {k.kind: k.cells for k in llama.kv} == {"global": CTX_128K, "local": 1536}
    assert round(llama.kv_bytes / GiB, 1) == 10.6
    # vLLM: each sliding layer keeps ceil((1024 − 1 + 8192) / 16) + 1 = 577 blocks: ≈ 13.7 GiB over the layers.
    vllm = planner(G27, "vllm").plan(CTX_128K)
    assert round(vllm.startup.layers_needed / GiB, 1) == 13.7
    assert vllm.startup.layers_needed == (10 * 8192 + 52 * 577) * 16 * 8192


def test_vllm_pads_hybrid_groups_as_its_allocator_does():
    # 52 local + 10 global: group size 10 (the smaller kind, 52 ≥ 1.5 × 10),
    # 6 local groups + 1 global = 7 groups, 60 − 52 = 8 padding layers; the check
    # charges 10 × page × (8192 + 6 × 577) blocks.
    r = planner(G27, "vllm").plan(CTX_128K).startup
    assert (r.group_size, r.groups, r.padding_layers) == (10, 7, 8)
    assert r.page_bytes == 16 * 8192
    assert r.needed == 10 * 16 * 8192 * (8192 + 6 * 577)
    assert r.blocks_per_request == 8192 + 6 * 577
    # gpt-oss-20b: 12 + 12 layers, no padding; a uniform model is one group.
    assert planner(spec_of("gpt-oss-20b"), "vllm").plan(8192).startup.padding_layers == 0
    r = planner(spec_of("llama-3.1-8b"), "vllm").plan(8192).startup
    assert (r.group_size, r.groups, r.needed) == (32, 1, r.layers_needed)


# ---- engine rules on small synthetic specs, worked by hand -------------------------------------

# debug_spec(): 2 layers, 4 heads, 2 KV heads of 16 dims: K and V = 64 values per token and layer.
TINY = debug_spec(max_context=100_000)
TINY_SWA = debug_spec(max_context=100_000, attention={"sliding_window": 100})


def test_vllm_rounds_each_layer_to_16_token_blocks():
    p = planner(TINY, "vllm")
    for context, blocks in ((1, 1), (16, 1), (17, 2), (1000, 63)):
        (layer,) = p.plan(context).kv
        assert layer.cells == 16 * blocks
        assert layer.bytes == 2 * 16 * blocks * 64 * 2  # 2 layers, bf16
        assert p.plan(context).startup.needed == layer.bytes
    (plain,) = planner(TINY).plan(17).kv
    assert plain.bytes == 2 * 17 * 128


def test_vllm_sliding_window_budget():
    # (ceil(min(window − 1 + max_num_batched_tokens, max_model_len) / 16) + 1) blocks.
    assert vllm_blocks(100, 1000, 64) == math.ceil(163 / 16) + 1 == 12
    assert vllm_blocks(100, 50, 64) == math.ceil(50 / 16) + 1 == 5
    assert vllm_blocks(4096, 32768, 8192) == 769  # Mistral-7B at its 32k limit
    assert vllm_blocks(None, 32768, 8192) == 2048
    p = planner(TINY_SWA, "vllm", max_num_batched_tokens=64)
    (layer,) = p.plan(1000).kv
    assert layer.cells == 12 * 16 and layer.window == 100
    # max_num_batched_tokens moves the budget, not the full layers.
    (wide,) = planner(TINY_SWA, "vllm", max_num_batched_tokens=512).plan(1000).kv
    assert wide.cells == (math.ceil(611 / 16) + 1) * 16


def test_llamacpp_pads_cells_and_sizes_the_swa_cache():
    p = planner(TINY_SWA, "llamacpp")
    (layer,) = p.plan(1000).kv
    assert layer.cells == min(1024, 768)  # n_ctx 1000 -> 1024; SWA pad(100 + 512, 256) = 768
    (layer,) = p.plan(300).kv
    assert layer.cells == 512  # n_ctx pad(300) = 512 < 768
    (layer,) = p.plan(1000, batch=4).kv  # unified cache: n_swa · n_seq + n_ubatch = 912 -> 1024
    assert layer.cells == 1024
    (full,) = planner(TINY, "llamacpp").plan(1000).kv
    assert full.cells == 1024


def test_llamacpp_cache_types_in_blocks_of_32():
    # 64 values per token and layer = 2 blocks: q8_0 2 × 34 B, q4_0 2 × 18 B, f16 128 B.
    for kv, per_token in (("f16", 128), ("q8_0", 68), ("q4_0", 36), ("q4_1", 40), ("q5_0", 44), ("q5_1", 48),
                          ("iq4_nl", 36), ("f32", 256)):
        (layer,) = planner(TINY, "llamacpp", kv_dtype=kv).plan(256).kv
        assert layer.token_bytes == per_token and layer.bytes == 2 * 256 * per_token, kv
    assert set(ENGINES["llamacpp"].kv_types) == {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}


def test_vllm_fp8_kv_is_one_byte():
    for kv in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        (layer,) = planner(TINY, "vllm", kv_dtype=kv).plan(16).kv
        assert layer.token_bytes == 64


# ---- tensor parallelism ----------------------------------------------------------------------------


def test_kv_heads_are_replicated_when_tp_exceeds_k():
    # Llama-3.1-70B: K = 8 heads of 128, 80 layers.  TP 8: one head per rank;
    # TP 16: still one (replicated), not half.
    spec = spec_of("llama-3.1-70b")
    per_token = {tp: planner(spec, "vllm", gpus=tp).plan(CTX_128K).kv[0].token_bytes for tp in (1, 4, 8, 16)}
    assert per_token == {1: 8 * 256 * 2, 4: 2 * 256 * 2, 8: 256 * 2, 16: 256 * 2}
    kv8, kv16 = (planner(spec, "vllm", gpus=tp).plan(CTX_128K).kv_bytes for tp in (8, 16))
    assert kv8 == kv16 == 80 * CTX_128K * 512


def test_mla_latent_is_on_every_rank():
    # DeepSeek-V3: 512 latent + 64 rope = 576 values, one "head": 1,152 B per token per layer on each rank.
    spec = spec_of("deepseek-v3")
    for tp in (1, 8):
        plan = planner(spec, "vllm", gpus=tp).plan(4096)
        assert [k.token_bytes for k in plan.kv] == [576 * 2]
        assert sum(k.layers * k.token_bytes for k in plan.kv) == 61 * 576 * 2 == 70_272  # §C.4
    # The MLA down-projections and norms stay whole on every rank.
    assert planner(spec, "vllm", gpus=8).plan(4096).weights.replicated > 0


def test_weights_per_rank_match_vllms_log():
    # vllm#10511: Llama-3-8B "model weights take 14.96GiB" at TP 1 and 7.48GiB at TP 2.
    spec = spec_of("llama-3.1-8b")
    assert round(planner(spec, "vllm").plan(8192).weights.bytes / GiB, 2) == 14.96
    w2 = planner(spec, "vllm", gpus=2).plan(8192).weights
    assert round(w2.bytes / GiB, 2) == 7.48
    assert w2.replicated == (2 * 32 + 1) * 4096 * 2  # the RMSNorm weights, whole on both ranks


def test_activation_estimate_is_near_vllms_profile():
    # vllm#10511: Llama-3-8B "PyTorch activation peak memory 1.26GiB" at 8192
    # batched tokens.  Ours, by hand, for that profile step (bf16):
    #   residual [8192, 4096]                          67,108,864
    #   largest op: SwiGLU product, gate + up in, out:
    #     3 · 8192 · 14,336 · 2                        704,643,072
    #   fp32 logits, max_num_seqs = 256 rows · 128,256 · 4  131,334,144
    #                                                  903,086,080 B = 0.84 GiB
    # It leaves out every other live tensor, so it can only fall short of the
    # allocator's measured peak: 0.67 of it, the same order.
    act = planner(spec_of("llama-3.1-8b"), "vllm").plan(8192).activations
    assert (act.largest_op, act.bytes) == ("layers.ffn.act", 903_086_080)
    assert 0.5 * 1.26 * GiB <= act.bytes <= 1.26 * GiB
    assert act.chunk.tokens == 8192 and act.logits == 256 * 128256 * 4


def test_tp_must_divide_the_heads():
    with pytest.raises(Exception, match="does not split"):
        planner(G27, gpus=3)


def test_data_parallel_replicas_split_the_batch():
    p = planner(spec_of("llama-3.1-8b"), "plain", gpus=4, tp=2)
    plan = p.plan(4096, batch=5)
    assert (plan.batch, plan.batch_per_gpu, plan.deployment.replicas) == (5, 3, 2)


# ---- vLLM's start-up report ------------------------------------------------------------------------


def test_vllm_error_text_and_estimated_length():
    # Llama-3.1-8B at 128k on one L4: 131,072 tokens × 128 KiB = 16 GiB of KV cannot fit.
    spec, l4 = spec_of("llama-3.1-8b"), load_hardware("l4")
    p = planner(spec, "vllm", hw=l4)
    r = p.plan(CTX_128K).startup
    assert r.needed == 16 * GiB and format_gib(r.needed) == "16.0"
    n = r.estimated_max_model_len
    # One 16-token block of all 32 layers is 16 × 128 KiB = 2 MiB: n = 16 × floor(available / 2 MiB).
    assert n == 16 * (r.available // (2 * MiB))
    dep = Deployment()
    assert ENGINES["vllm"].needed(p.kinds, n, dep) <= r.available < ENGINES["vllm"].needed(p.kinds, n + 1, dep)
    assert n == p.max_context(1).value  # the same per-layer functions as the solver
    # The message exactly as vllm/v1/core/kv_cache_utils.py words it today.
    expected = (f"To serve at least one request with the model's max seq len (131072), (16.0 GiB KV cache is "
                f"needed, which is larger than the available KV cache memory ({format_gib(r.available)} GiB). "
                f"Based on the available memory, the estimated maximum model length is {n}. Try increasing "
                f"`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing "
                f"`max_model_len` when initializing the engine. See "
                f"https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")
    assert r.error == expected
    assert r.lines[-1] == "ValueError: " + expected
    # The pattern users grep vLLM logs with matches it too.
    assert re.search(r"max seq len \((\d+)\), \(([\d.]+) GiB KV cache is needed, which is larger than the available "
                     r"KV cache memory \(([\d.]+) GiB\)\. Based on the available memory, the estimated maximum model "
                     r"length is (\d+)\.", r.error)
    assert "{estimated}" in VLLM_TOO_SMALL


def test_format_gib_is_vllms():
    assert (format_gib(16 * GiB), format_gib(13.6626 * GiB), format_gib(0.714 * GiB)) == ("16.0", "13.66", "0.71")


def test_vllm_log_lines_when_it_fits():
    """Since 0.28.0 (update_kv_cache_capacity) the size and the concurrency share one line; 0.20.1-0.27
    logged them on two (report_kv_cache_config)."""
    r = planner(G27, "vllm").plan(CTX_128K).startup
    assert r.error is None
    assert r.lines[0] == f"Available KV cache memory: {format_gib(r.available)} GiB"
    assert r.num_blocks == r.available // (16 * 8192 * 10)  # pools of group size 10
    size = f"GPU KV cache size: {int(r.num_blocks / r.blocks_per_request * CTX_128K):,} tokens"
    concurrency = f"Maximum concurrency for 131,072 tokens per request: {r.num_blocks / r.blocks_per_request:.2f}x"
    assert r.lines[1:] == [f"{size}, {concurrency}"]
    old = planner(G27, "vllm", vllm_version=(0, 27, 0)).plan(CTX_128K).startup
    assert old.lines[1:] == [size, concurrency]


def test_no_memory_for_the_cache():
    r = planner(spec_of("llama-3.1-70b"), "vllm").plan(8192).startup  # 141 GB of bf16 weights on one H100
    assert r.available <= 0 and r.error.startswith("No available memory for the cache blocks.")


# ---- solvers -------------------------------------------------------------------------------------------

# Each answer lies inside (1, max context) for at least one of the two batches.
CASES = [("gemma-3-27b", "plain", "a100-40gb", {"weight_dtype": "int4"}),
         ("gemma-3-27b", "llamacpp", "rtx-4090", {"weight_dtype": "int4", "kv_dtype": "q8_0"}),
         ("gemma-3-27b", "vllm", "l40s", {"weight_dtype": "fp8"}),
         ("llama-3.1-70b", "vllm", "h100", {"gpus": 2, "kv_dtype": "fp8"}),
         ("mistral-7b-v0.1", "plain", "l4", {}), ("qwen2.5-7b", "vllm", "l4", {}),
         ("deepseek-v2-lite", "llamacpp", "rtx-3090", {"weight_dtype": "int8"}),
         ("llama-3.1-8b", "llamacpp", "l4", {}), ("gpt-oss-20b", "vllm", "l4", {"weight_dtype": "int4"})]


@pytest.mark.parametrize("name,engine,gpu,kw", CASES)
def test_solvers_are_consistent(name, engine, gpu, kw):
    p = planner(spec_of(name), engine, hw=load_hardware(gpu), **kw)
    interior = 0
    for batch in (1, 3):
        s = p.max_context(batch)
        assert p.plan(s.value, batch).fits
        if not s.capped:
            interior += 1
            assert not p.plan(s.value + 1, batch).fits, (batch, s)
            assert s.binding == p.plan(s.value + 1, batch).binding
    assert interior
    b = p.max_batch(4096)
    assert b.value > 0 and p.plan(4096, b.value).fits and not p.plan(4096, b.value + 1).fits


def test_closed_forms_equal_binary_search():
    # Gemma-2-9B (window 4096 on half the layers) at batch 8 on an L4: the
    # answer lies past the window breakpoint; Gemma-3-27B at int4 on a 4090.
    for name, gpu, batch in (("gemma-2-9b", "l4", 8), ("gemma-3-27b", "rtx-4090", 1)):
        p = planner(spec_of(name), hw=load_hardware(gpu), weight_dtype="int4")
        s = p.max_context(batch)
        assert s.method == "closed form" and not s.capped
        assert s.value == last_true(lambda c: p.plan(c, batch).fits, 1, p.spec.max_context)
    assert planner(spec_of("gemma-2-9b"), hw=load_hardware("l4"), weight_dtype="int4").max_context(8).value > 4096
    p = planner(spec_of("mistral-7b-v0.1"), hw=load_hardware("rtx-4090"), weight_dtype="int4")
    b = p.max_batch(8192)
    assert b.value == last_true(lambda n: p.plan(8192, n).fits, 1, 4096)
    v = planner(spec_of("qwen2.5-7b"), "vllm")
    assert v.max_batch(32768).value == last_true(lambda n: v.plan(32768, n).fits, 1, 4096)


def test_min_gpus():
    spec = spec_of("llama-3.1-70b")
    s = min_gpus(spec, H100, Deployment(engine="vllm"), CTX_128K)
    assert s.value == 4  # bf16 weights 131 GiB need 4 × 80 GiB with a 40 GiB KV cache at 128k
    assert Planner(spec, H100, Deployment(engine="vllm", gpus=4)).plan(CTX_128K).fits
    assert not Planner(spec, H100, Deployment(engine="vllm", gpus=2)).plan(CTX_128K).fits
    assert min_gpus(spec_of("llama-3.2-1b"), H100, Deployment(), 8192).value == 1


def test_parse_bytes():
    assert parse_bytes("1024MiB") == GiB and parse_bytes("2GB") == 2e9 and parse_bytes("512") == 512
    assert parse_bytes("1.5 GiB") == 1.5 * GiB
    with pytest.raises(Exception, match="--reserve"):
        parse_bytes("lots")


def test_reserve_override():
    base = planner(G27, "vllm").plan(CTX_128K)
    more = planner(G27, "vllm", reserve=4 * GiB).plan(CTX_128K)
    assert more.startup.available == base.startup.available - 3 * GiB  # replaces the 1 GiB non-torch allowance
    assert planner(G27, "llamacpp").plan(8192).reserve == {"fit margin": 1024 * MiB}


# ---- the command line -------------------------------------------------------------------------------


def test_fit_json_document():
    r = run("fit", "gemma-3-27b", "--gpu", "h100", "--context", "131072", "--engine", "vllm", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "archcalc.fit/2"
    plan = doc["plan"]
    assert plan["total"] == pytest.approx(plan["weights"]["bytes"] + plan["kv_cache"]["bytes"]
                                          + plan["activations"]["bytes"] + plan["reserve"]["bytes"])
    assert plan["kv_cache"]["bytes"] == sum(k["bytes"] for k in plan["kv_cache"]["by_layer_kind"])
    assert plan["capacity"] == H100.capacity and plan["fits"] is True and plan["binding"] == "kv_cache"
    d = doc["deployment"]
    assert (d["engine"], d["tp"], d["context"], d["kv_dtype"], d["block_size"]) == ("vllm", 1, 131072, "bf16", 16)
    assert (d["gpu_memory_utilization"], d["max_num_batched_tokens"]) == (0.9, 8192)
    v = doc["startup"]
    assert v["needed_kv_bytes"] == 10 * 16 * 8192 * (8192 + 6 * 577) and v["padding_layers"] == 8
    assert v["log"][0].startswith("Available KV cache memory: ")
    # 62 layers: 10 global + 52 sliding, in 7 groups of 10 (8 padding); a page is 16 tokens of 16 KV
    # heads × 128 × (K, V) × 2 B; a request holds cdiv(131,072, 16) global blocks and 577 per sliding group
    assert (v["group_size"], v["groups"], v["page_bytes"]) == (10, 7, 16 * 8192)
    assert v["layers_kv_bytes"] == 16 * 8192 * (10 * 8192 + 52 * 577)
    assert v["blocks_per_request"] == 8192 + 6 * 577
    assert v["num_blocks"] == v["available_kv_bytes"] // (v["page_bytes"] * v["group_size"])
    assert v["max_concurrency"] == v["num_blocks"] / v["blocks_per_request"]
    assert v["kv_cache_tokens"] == int(v["max_concurrency"] * 131072)
    assert (v["estimated_max_model_len"], v["error"]) == (None, None) and v["log"][1:] == [
        f"GPU KV cache size: {v['kv_cache_tokens']:,} tokens, "
        f"Maximum concurrency for 131,072 tokens per request: {v['max_concurrency']:.2f}x"]
    assert (v["vllm_version"], v["block_size"], v["mamba_cache_mode"]) == ("0.34.0", 16, None)
    assert (d["vllm_version"], d["prefix_caching"]) == ("0.34.0", None)
    assert set(doc["solve"]) == {"max_context", "max_batch", "min_gpus"}
    assert doc["solve"]["max_context"]["capped"] is True


def test_fit_tables():
    r = run("fit", "llama-3.1-70b", "--gpu", "h100", "--gpus", "2", "--context", "131072", "--engine", "vllm",
            "--kv-dtype", "fp8")
    assert r.exit_code == 0
    for text in ("Memory per GPU", "DOES NOT FIT", "What vLLM would report", "ValueError: To serve at least one",
                 "Solvers", "fewest GPUs"):
        assert text in r.stdout, text
    r = run("fit", "gemma-3-27b", "--gpu", "rtx-4090", "--engine", "llamacpp", "--dtype", "int4", "--context", "32768")
    assert r.exit_code == 0 and "n_ctx padded to 256" in r.stdout and "FITS" in r.stdout


def test_fit_all_gpus():
    r = run("fit", "llama-3.1-8b", "--all-gpus", "--context", "32768", "--json")
    assert r.exit_code == 0
    devices = json.loads(r.stdout)["devices"]
    assert len(devices) == len(all_hardware())
    for d in devices:
        assert d["fits"] == (d["max_context"] >= 32768)
    r = run("fit", "llama-3.1-8b", "--all-gpus", "--engine", "vllm")
    assert r.exit_code == 0 and "H100 SXM" in r.stdout and "binding term" in r.stdout


def test_context_beyond_the_maximum_warns():
    r = run("fit", "gpt2", "--gpu", "l4", "--context", "4096", "--json")
    assert r.exit_code == 0 and "warning: context 4,096 exceeds" in r.stderr
    assert json.loads(r.stdout)["warnings"]


@pytest.mark.parametrize("args,fragment", [
    (["--gpu", "h1000"], "unknown hardware 'h1000'; did you mean 'h100'?"),
    (["--gpu", "h100", "--tp", "3"], "--tp: 3 does not split gemma-3-27b's 32 attention heads"),
    (["--gpu", "h100", "--engine", "vllm", "--kv-dtype", "q8_0"], "--kv-dtype: 'q8_0' is not a KV-cache type of engine vllm"),
    (["--gpu", "h100", "--engine", "llamacpp", "--kv-dtype", "fp8"], "'fp8' is not a KV-cache type of engine llamacpp"),
    (["--gpu", "h100", "--kv-dtype", "q4_0"], "'q4_0' is not a KV-cache type of engine vllm"),
    (["--gpu", "h100", "--engine", "sglang"], "'sglang' is not one of"),
    (["--gpu", "h100", "--reserve", "much"], "--reserve: 'much' is not a size"),
    (["--gpu", "h100", "--gpus", "4", "--tp", "8"], "--gpus"),
    ([], "--gpu"),
])
def test_bad_fit_inputs_give_one_line_and_status_2(args, fragment):
    r = CliRunner().invoke(cli, ["fit", "gemma-3-27b", *args])
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], r.stderr
    assert r.stdout == "" and "Traceback" not in r.output


def test_every_bundled_spec_and_device_plans_without_error():
    from archcalc.files import bundled_names

    for name in bundled_names("specs"):
        spec = spec_of(name)
        for engine in ENGINES:
            if spec.attention.compressed is not None and engine != "plain":  # DeepSeek-V4: refused in one line
                with pytest.raises(InputError, match="use --engine plain"):
                    Planner(spec, H100, Deployment(engine=engine))
                continue
            p = Planner(spec, H100, Deployment(engine=engine))
            plan = p.plan(min(8192, spec.max_context), 2)
            assert plan.total > 0 and plan.binding in ("reserve", "weights", "activations", "kv_cache")
    for hw in all_hardware():
        for engine in ENGINES:
            assert Planner(G27, hw, Deployment(engine=engine)).plan(4096).capacity == hw.capacity


def test_plain_plan_kv_is_what_size_reports():
    """fit's plain engine and size share the cache rule: the same bytes."""
    from conftest import sized

    for name, ctx, batch in (("gemma-3-27b", CTX_128K, 1), ("mistral-7b-v0.1", 32_768, 3), ("deepseek-v3", 4096, 2),
                             ("deepseek-v4-flash", 100_001, 3)):
        spec = spec_of(name)
        assert planner(spec).plan(ctx, batch).kv_bytes == sized(spec, context=ctx, batch=batch).kv.bytes


@pytest.mark.parametrize("engine", ["plain", "vllm", "llamacpp"])
def test_a_capped_max_context_also_says_what_memory_alone_allows(engine):
    """Capped at the model's maximum, the answer still says how far memory would go: the
    largest context that fits, found by the same plans (past it, the next token does not)."""
    from archcalc.serving.planner import Planner

    spec = spec_of("llama-3.1-8b")
    planner = Planner(spec, load_hardware("h100"), Deployment(engine=engine))
    s = planner.max_context(1)
    alone = s.detail["memory_max_context"]
    assert s.capped and s.value == spec.max_context < alone
    assert planner.plan(alone, 1).fits and not planner.plan(alone + 1, 1).fits


def test_a_multimodal_checkpoint_loads_its_vision_tower_as_weights():
    """gemma-3-27b-it: HF builds a 423,060,336-parameter SigLIP tower and projector beside the
    language model (tests/spec/test_hf_oracle.py); fit loads them in bf16, split over TP like the rest."""
    from archcalc.serving.planner import Planner

    spec = spec_of("gemma-3-27b")
    text_only = spec.model_copy(update={"vision": None})
    for tp in (1, 2):
        with_tower = Planner(spec, load_hardware("h100"), Deployment(gpus=tp)).plan(8192)
        without = Planner(text_only, load_hardware("h100"), Deployment(gpus=tp)).plan(8192)
        assert with_tower.weights.vision == 423_060_336 * 2 / tp
        assert with_tower.weights.bytes - without.weights.bytes == with_tower.weights.vision
    # an int4 checkpoint keeps the tower 16-bit (llm-compressor's and AutoAWQ's Gemma 3 recipes skip
    # vision_tower and multi_modal_projector), so it is the same 2 bytes a parameter
    int4 = Planner(spec, load_hardware("h100"), Deployment(weight_dtype="int4")).plan(8192)
    assert int4.weights.vision == 423_060_336 * 2
    # under PP archcalc places the tower on the first stage, where image embeddings enter (stated in the output)
    first, last = Planner(spec, load_hardware("h100"), Deployment(gpus=2, pp=2)).plan(8192).stage_plans
    assert (first.weights.vision, last.weights.vision) == (423_060_336 * 2, 0)
    r = CliRunner().invoke(cli, ["size", "gemma-3-27b", "--json"])
    assert json.loads(r.stdout)["params"]["vision"] == 423_060_336


def test_the_default_engine_is_vllm_and_says_so():
    """Most GPU deployments run vLLM: its chunked prefill holds one 8,192-token chunk of activations,
    where `plain` (a whole-batch prefill, as HF generate() runs it) holds all of them."""
    def max_batch(*engine):
        r = CliRunner().invoke(cli, ["fit", "llama-3.1-8b", "--gpu", "a100-80gb-sxm", "--context", "4096", *engine,
                                     "--json"])
        return json.loads(r.stdout)["solve"]["max_batch"]["value"]

    assert max_batch() == max_batch("--engine", "vllm") > max_batch("--engine", "plain")
    r = CliRunner().invoke(cli, ["fit", "llama-3.1-8b", "--gpu", "a100-80gb-sxm", "--context", "4096"])
    assert "engine vllm" in r.stdout.splitlines()[0]
    assert Deployment().engine == "vllm"


@pytest.mark.parametrize("engine, words", [("vllm", "vllm/v1/"), ("llamacpp", "llama-kv-cache-iswa.cpp"),
                                           ("plain", "no engine's code")])
def test_the_output_names_the_engine_code_its_rules_follow(engine, words):
    r = CliRunner().invoke(cli, ["fit", "llama-3.1-8b", "--gpu", "h100", "--context", "8192", "--engine", engine,
                                 "--json"])
    assert words in json.loads(r.stdout)["deployment"]["engine_rules_from"]
    text = CliRunner().invoke(cli, ["fit", "llama-3.1-8b", "--gpu", "h100", "--context", "8192", "--engine", engine])
    assert "rules from" in " ".join(text.stdout.split())  # rich wraps the assumption lines


def test_mtp_flag_loads_the_checkpoints_mtp_modules():
    """--mtp (MTP speculative decoding) loads GLM-4.5-Air's MTP layer too: 3,616,573,440 parameters
    (tests/cost/test_published.py: the HF safetensors total less the model and its router buffers)
    in bf16, split over TP 4; without it the weights are the model's alone."""
    import archcalc

    with_mtp, without = (archcalc.fit("glm-4.5-air", "h200", gpus=4, context=4096, mtp=m) for m in (True, False))
    w, w0 = with_mtp.plan.weights, without.plan.weights
    assert w0.mtp == 0 and w.mtp == 3_616_573_440 * 2 / 4
    assert w.bytes - w0.bytes == w.mtp


def test_fit_json_carries_vllm_s_start_up_error():
    r = run("fit", "llama-3.1-70b", "--gpu", "h100", "--gpus", "2", "--context", "131072", "--engine", "vllm",
            "--kv-dtype", "fp8", "--json")
    v = json.loads(r.stdout)["startup"]
    assert v["error"].startswith("To serve at least one request with the model's max seq len (131072)")
    assert 0 < v["estimated_max_model_len"] < 131072
    assert f"the estimated maximum model length is {v['estimated_max_model_len']}" in v["error"]
    assert v["log"] == [v["log"][0], f"ValueError: {v['error']}"]


def test_min_gpus_keeps_the_pipeline_stages():
    """--pp 2 on H200s (141 GB, 0.9 of it vLLM's): Llama-3.1-70B's 141 GB of bf16 weights fit no
    single GPU, and half of them (70.6 GB) one stage of TP 1: 2 GPUs in all, TP 1 × PP 2."""
    h200 = load_hardware("h200")
    spec = spec_of("llama-3.1-70b")
    assert min_gpus(spec, h200, Deployment(engine="vllm"), 8192).value == 2  # TP 2 without stages
    s = min_gpus(spec, h200, Deployment(engine="vllm", gpus=2, pp=2), 8192)
    assert (s.value, s.detail["tp"], s.detail["pp"]) == (2, 1, 2)


def test_the_largest_context_can_be_one_token():
    """vLLM with --block-size 1 and a reserve that leaves room for one token's KV (Llama-3.2-1B:
    32 KiB a token), found by bisection on the reserve: one token fits, two do not, so the largest
    context is 1 and the largest batch at one token is 1; "kv_cache" is what binds."""
    hw, spec = load_hardware("rtx-4090"), spec_of("llama-3.2-1b")

    def planner(reserve):
        return Planner(spec, hw, Deployment(engine="vllm", block_size=1, reserve=reserve))

    lo, hi = 0.0, hw.memory_bytes
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if planner(mid).plan(2).fits else (lo, mid)
    p = planner(hi)
    assert p.plan(1).fits and not p.plan(2).fits
    assert (p.max_context(1).value, p.max_context(1).binding) == (1, "kv_cache")
    assert p.max_batch(1).value == 1


def test_the_largest_batch_stops_at_the_search_limit():
    """llama.cpp has no concurrency limit of its own, and the debug model keeps 256 bytes a cell (2 layers
    × K and V of 2 heads × 16 at 2 bytes): 2^24 sequences of 16 tokens are 2^28 cells, 64 GiB, which an
    H200 holds.  So every batch up to the search limit fits, and the doubling search answers the limit
    itself, never a batch past it."""
    from archcalc.serving.planner import MAX_BATCH_SEARCH

    p = Planner(spec_of("debug"), load_hardware("h200"), Deployment(engine="llamacpp"))
    assert MAX_BATCH_SEARCH == 2 ** 24 and p.plan(16, MAX_BATCH_SEARCH).fits
    assert p.max_batch(16).value == MAX_BATCH_SEARCH


def test_a_batch_below_one_is_named_as_the_batch():
    p = Planner(spec_of("debug"), load_hardware("rtx-4090"), Deployment())
    for context, batch, flag in ((1, 0, "--batch"), (0, 1, "--context"), (2, 0, "--batch")):
        with pytest.raises(InputError, match=f"^{flag}: must be at least 1$"):
            p.plan_per_gpu(context, batch)


def test_only_the_last_pipeline_stage_holds_logits_and_an_empty_stage_no_activations():
    """vLLM computes logits on the last pipeline rank only (its LogitsProcessor runs on the stage that
    holds lm_head): with --pp 2 the first stage's activation peak has no logits, the last one's has the
    fp32 logits of its chunk.  llama.cpp with --tensor-split 1,0,1 leaves the middle GPU no layers: no
    op, so no activation peak there."""
    p = Planner(spec_of("llama-3.1-8b"), load_hardware("h100-sxm"), Deployment(engine="vllm", gpus=2, pp=2))
    first, last = p.plan(4096).stage_plans
    assert first.activations.logits == 0.0 and last.activations.logits > 0
    p = Planner(spec_of("llama-3.2-1b"), load_hardware("rtx-4090"),
                Deployment(engine="llamacpp", gpus=3, tensor_split=(1.0, 0.0, 1.0)))
    middle = p.plan(4096).stage_plans[1].activations
    assert (middle.largest_op, middle.largest_op_bytes, middle.logits) == ("none", 0.0, 0.0)
    assert p.plan(4096).stage_plans[0].activations.largest_op != "none"


def _reserve_where(make, fits):
    """The smallest reserve (bytes) at which `fits(planner)` stops holding, by bisection."""
    lo, hi = 0.0, 2.0 ** 40
    for _ in range(90):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if fits(make(mid)) else (lo, mid)
    return hi


@pytest.mark.parametrize("engine", ["plain", "llamacpp"])
def test_solvers_at_the_edges_of_the_range(engine):
    """With a reserve that leaves room for exactly one more step of memory, each solver's answer sits
    at the edge of its range: the plain engine's closed forms (memory affine in context) answer 1 when
    one token fits and two do not, and the model's max context − 1 when that fits and the max does not;
    llama.cpp's searches (its cells padded to 256) answer batch 1 when one sequence of 256 fits and two
    do not."""
    hw = load_hardware("rtx-4090")
    spec = spec_of("llama-3.2-1b")

    def make(reserve):
        return Planner(spec, hw, Deployment(engine=engine, reserve=reserve))

    if engine == "plain":
        p = make(_reserve_where(make, lambda q: q.plan(2).fits))
        assert p.plan(1).fits and not p.plan(2).fits and p.max_context(1).value == 1
        top = spec.max_context
        p = make(_reserve_where(make, lambda q: q.plan(top).fits))
        assert p.plan(top - 1).fits and not p.plan(top).fits and p.max_context(1).value == top - 1
    else:
        p = make(_reserve_where(make, lambda q: q.plan(256, 2).fits))
        assert p.plan(256, 1).fits and not p.plan(256, 2).fits and p.max_batch(256).value == 1


def test_min_gpus_skips_a_tp_that_cannot_split_the_kv_heads():
    """48 query heads over 3 K/V heads: TP 2, 4 or 8 divides neither the K/V heads nor is divided by them
    (vLLM's rule), so a model too large for one RTX 4090 (about 23 B parameters, 46 GB in bf16) has no
    TP layout at all: no answer, and no error (a planner asked for TP 2 itself refuses it)."""
    from archcalc.spec.model import ModelSpec

    spec = ModelSpec(name="odd-kv", d_model=6144, n_layers=60, vocab_size=32000, max_context=4096,
                     attention={"n_heads": 48, "n_kv_heads": 3}, ffn={"d_ff": 16384})
    s = min_gpus(spec, load_hardware("rtx-4090"), Deployment(engine="vllm"), 4096)
    assert s.value is None


def test_each_pipeline_stage_peaks_on_its_own_layers():
    """DeepSeek-V2-Lite's only dense layer is layer 0 (first_k_dense_replace 1), whose SwiGLU FFN is
    10,944 wide, wider than anything in the MoE layers.  Split in two vLLM stages (layers 0-13 and
    14-26), the first stage's activation peak is that FFN; the second holds no dense layer, so its peak
    is an expert op: each stage is sized by the ops it runs, not by the whole model's."""
    p = Planner(spec_of("deepseek-v2-lite"), load_hardware("h200"), Deployment(engine="vllm", gpus=2, pp=2))
    first, second = p.plan(8192).stage_plans
    assert (first.stage.first, second.stage.first) == (0, 14)
    assert first.activations.largest_op == "layers.ffn.act"
    assert second.activations.largest_op.startswith("layers.moe.")
    assert second.activations.largest_op_bytes < first.activations.largest_op_bytes


def test_unknown_engine_and_cache_type_lines_list_what_is_valid():
    from archcalc.serving.engines import engine_named

    with pytest.raises(InputError) as e:
        engine_named("tgi")
    assert str(e.value) == "--engine: unknown engine 'tgi'; valid: " + ", ".join(ENGINES)
    assert ", ".join(ENGINES) == "plain, llamacpp, vllm"
    # vLLM's --kv-cache-dtype choices (CacheDType: auto, fp8, fp8_e4m3, fp8_e5m2, ...) as archcalc names them
    with pytest.raises(InputError) as e:
        engine_named("vllm").kv_bytes_per_value("nf4")
    assert str(e.value) == ("--kv-dtype: 'nf4' is not a KV-cache type of engine vllm; "
                            "valid: fp32, bf16, fp16, fp8, int8, fp8_e4m3, fp8_e5m2")


def test_a_fresh_interpreter_registers_each_engine_as_an_instance():
    """@register runs when the engines' modules are imported: in a new interpreter (the working
    directory's archcalc first, as `python -c` puts it on sys.path) every name `fit --engine` takes
    maps to an Engine of that name. (A test process that has imported the package already holds the
    registry its import built, so this one asks a new interpreter.)"""
    import subprocess
    import sys

    code = ("from archcalc.serving.engines import ENGINES; from archcalc.serving.engines.base import Engine; "
            "print(sorted(n for n, e in ENGINES.items() if isinstance(e, Engine) and e.name == n))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(sorted(ENGINES))
