"""vLLM's rules by release (--vllm-version) and its paging of linear layers beside attention, pinned
to vLLM's own logs and to its source on PyPI (each release's vllm/v1/core/kv_cache_utils.py,
vllm/model_executor/models/config.py, vllm/platforms/interface.py, vllm/config/model.py)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from archcalc.cli import cli
from archcalc.errors import InputError
from archcalc.hardware.profile import load_hardware
from archcalc.serving.deployment import Deployment, parse_version
from archcalc.serving.engines.base import engine_named
from archcalc.serving.engines.vllm import vllm_layout
from archcalc.serving.planner import Planner, check_deployment
from archcalc.spec.catalog import load_model

GiB = 2**30
VLLM = engine_named("vllm")


def kinds_of(model: str, dep: Deployment):
    return Planner(load_model(model)[0], load_hardware("h200"), dep).kinds


def test_a_mamba2_state_takes_the_config_s_ssm_cache_dtype():
    """Nemotron-3-Nano-30B-A3B's config.json names mamba_ssm_cache_dtype float32, which vLLM's
    MambaStateDtypeCalculator gives the temporal (SSD) state; the conv state stays at the model's
    bf16.  vLLM's MambaStateShapeCalculator.mamba2_state_shape at TP 1: conv (conv_kernel − 1,
    mamba_num_heads · mamba_head_dim + 2 · n_groups · ssm_state_size) = (3, 4,096 + 2,048) and
    temporal (64 heads, 64, 128): 3 · 6,144 · 2 + 64 · 64 · 128 · 4 = 2,134,016 B per sequence."""
    (linear,) = [k for k in kinds_of("tests/data/hf/nemotron-3-nano-30b-a3b.json", Deployment()) if k.kind == "linear"]
    assert linear.state_bytes == 3 * 6144 * 2 + 64 * 64 * 128 * 4 == 2_134_016


def test_qwen3_5_27b_block_size_and_log_on_0_19_0():
    """vllm-project/vllm#40691 (vLLM 0.19.0, Qwen3.5-27B, --max-model-len 32768
    --max-num-batched-tokens 16384): "GPU KV cache size: 290,864 tokens", "Maximum concurrency for
    32,768 tokens per request: 33.04x".  A Gated DeltaNet layer's state: the conv's 3 last inputs of
    2·16·128 + 48·128 = 10,240 channels in bf16 and 48·128·128 values in fp32 (the config's
    mamba_ssm_dtype, which vLLM's Qwen3.5 config rule makes mamba_ssm_cache_dtype): 3,207,168 B.  An
    attention token is 4 KV heads × 256 × (K, V) × 2 B = 4,096 B, so the block becomes
    16·ceil(3,207,168 / (16·4,096)) = 784 tokens; 16 attention + 48 linear layers make 1 + 3 groups of
    16; a request holds ceil(32,768 / 784) = 42 attention blocks and 1 per linear group: 45.  The two
    logged numbers then pin the pool: 1,487 blocks (33.04 × 45 = 1,486.8; 1,487 // 4 × 784 = 290,864,
    0.9.1-0.20.0's num_blocks // groups × min block size)."""
    dep = Deployment(max_num_batched_tokens=16384, vllm_version=parse_version("0.19.0"))
    kinds = kinds_of("tests/data/hf/qwen3.5-27b.json", dep)
    (linear,) = [k for k in kinds if k.kind == "linear"]
    assert linear.state_bytes == 10_240 * 3 * 2 + 48 * 128 * 128 * 4 == 3_207_168
    lay = vllm_layout(kinds, 32768, dep)
    assert (lay.block_size, lay.raised_from, lay.page) == (784, 16, 784 * 4096)
    assert (lay.group_size, lay.groups, lay.blocks) == (16, {"global": 1, "linear": 3}, {"global": 42, "linear": 1})
    assert lay.blocks_per_request == 45 and lay.mamba_mode == "none"  # 0.19: no prefix caching for hybrids
    pool = 1487 * lay.page * lay.group_size
    report = VLLM.startup(kinds, 32768, pool, dep)
    assert report.num_blocks == 1487
    assert report.lines[1:] == ["GPU KV cache size: 290,864 tokens",
                                "Maximum concurrency for 32,768 tokens per request: 33.04x"]
    # 0.20.1 on: the size is max concurrency × max_model_len (the fix), 0.28 on in one line
    later = VLLM.startup(kinds, 32768, pool, Deployment(max_num_batched_tokens=16384,
                                                       prefix_caching=False))
    assert later.kv_tokens == int(1487 / 45 * 32768) == 1_082_800
    assert later.lines[1] == ("GPU KV cache size: 1,082,800 tokens, "
                              "Maximum concurrency for 32,768 tokens per request: 33.04x")


def test_qwen3_6_35b_a3b_with_prefix_caching_on_0_24_0():
    """noonghunna/club-3090#612 (vLLM 0.24.0, Qwen3.6-35B-A3B NVFP4 on an RTX 5090, kv_cache_dtype
    fp8, enable_prefix_caching True, max_model_len 131072): "Available KV cache memory: 5.98 GiB",
    "GPU KV cache size: 567,978 tokens", "Maximum concurrency for 131,072 tokens per request: 4.33x".
    Qwen3.6-35B-A3B has Qwen3.5-35B-A3B's text layers (qwen3_5_moe: 30 Gated DeltaNet + 10 attention
    layers, 2 KV heads of 256).  State: 8,192 conv channels × 3 × 2 B + 32·128·128 × 4 B = 2,146,304
    B; an fp8 token 2 × 256 × 2 × 1 B = 1,024 B: the block is 16·ceil(2,146,304 / 16,384) = 2,096 tokens
    (exactly one state).  Prefix caching puts Qwen3.5 in mamba_cache_mode "align": 2 pages per linear
    layer (MambaSpec.max_memory_usage_bytes).  A request: ceil(131,072 / 2,096) = 63 + 3 × 2 = 69
    blocks; 5.98 GiB holds 299 blocks of 10 pages; 299 / 69 = 4.33, × 131,072 = 567,978."""
    dep = Deployment(kv_dtype="fp8_e4m3", vllm_version=(0, 24, 0), prefix_caching=True)
    kinds = kinds_of("tests/data/hf/qwen3.5-35b-a3b.json", dep)
    lay = vllm_layout(kinds, 131072, dep)
    assert (lay.block_size, lay.page, lay.group_size) == (2096, 2_146_304, 10)
    assert (lay.mamba_mode, lay.blocks, lay.blocks_per_request) == ("align", {"global": 63, "linear": 2}, 69)
    report = VLLM.startup(kinds, 131072, round(5.98 * GiB), dep)
    assert report.num_blocks == 299
    assert report.lines == ["Available KV cache memory: 5.98 GiB", "GPU KV cache size: 567,978 tokens",
                            "Maximum concurrency for 131,072 tokens per request: 4.33x"]
    # without prefix caching (0.24's default for hybrid models) a request holds 63 + 3 blocks
    assert vllm_layout(kinds, 131072, Deployment(kv_dtype="fp8_e4m3", vllm_version=(0, 24, 0))).blocks_per_request \
        == 66


def test_the_raise_follows_block_size_since_0_24_0():
    """Before 0.24.0 the hybrid block is a multiple of 16 (HybridAttentionMambaModelConfig); since,
    of max(the kernel's 16, --block-size) (_align_hybrid_block_size).  Qwen3.5-27B (3,207,168 B of
    state, 4,096 B a token) at --block-size 32: 784 on 0.19.0, 32·ceil(3,207,168 / 131,072) = 800 on
    0.24.0; at --block-size 256, 256·ceil(3,207,168 / 1,048,576) = 1,024."""
    for version, block in (((0, 19, 0), 784), ((0, 24, 0), 800)):
        dep = Deployment(block_size=32, vllm_version=version, prefix_caching=False)
        lay = vllm_layout(kinds_of("tests/data/hf/qwen3.5-27b.json", dep), 32768, dep)
        assert (lay.block_size, lay.raised_from) == (block, 32)
    dep = Deployment(block_size=256, prefix_caching=False)
    kinds = kinds_of("tests/data/hf/qwen3.5-27b.json", dep)
    assert vllm_layout(kinds, 32768, dep).block_size == 1024


def test_linear_state_pages_are_charged_per_request():
    """Each request holds one padded page per linear layer (two under prefix caching) and its
    attention blocks of block_size tokens: the fit's cache is what the pool gives the batch."""
    dep = Deployment(prefix_caching=False)
    plan = Planner(load_model("tests/data/hf/qwen3.5-27b.json")[0], load_hardware("h200"), dep).plan(32768, 3)
    kv = {k.kind: k for k in plan.kv}
    page = 784 * 4096
    assert (kv["linear"].charged_layers, kv["linear"].state_bytes, kv["linear"].bytes) == (48, 3 * page, 48 * 3 * page)
    assert (kv["linear"].cells, kv["linear"].token_bytes) == (0, 0)
    assert (kv["global"].charged_layers, kv["global"].cells) == (16, 3 * 42 * 784)
    cached = Planner(load_model("tests/data/hf/qwen3.5-27b.json")[0], load_hardware("h200"), Deployment()).plan(32768, 3)
    assert {k.kind: k for k in cached.kv}["linear"].state_bytes == 3 * 2 * page  # 0.34 caches prefixes: 2 pages
    assert plan.startup.max_batch() == plan.startup.num_blocks // 45


def test_token_count_and_concurrency_by_release():
    """Llama-3.1-8B (one group of 32 layers, 128 KiB a token) at max_model_len 1,000, not a multiple of
    16: 63 blocks a request.  Before 0.9.1 vLLM logged num_blocks × 16 tokens and that over
    max_model_len as the concurrency; 0.9.1-0.20.0 num_blocks // 1 groups × 16 and num_blocks / 63;
    since 0.20.1 int(num_blocks / 63 × 1,000)."""
    dep = Deployment()
    kinds = kinds_of("llama-3.1-8b", dep)
    pool = 6300 * 32 * 16 * 4096  # 6,300 blocks of 32 pages of 16 tokens of 8 KV heads × 128 × (K, V) × 2 B
    by = {v: VLLM.startup(kinds, 1000, pool, Deployment(vllm_version=v)) for v in ((0, 8, 5), (0, 19, 0), (0, 21, 0))}
    assert {v: r.num_blocks for v, r in by.items()} == dict.fromkeys(by, 6300)
    assert by[(0, 8, 5)].lines[1:] == ["GPU KV cache size: 100,800 tokens",
                                       "Maximum concurrency for 1,000 tokens per request: 100.80x"]
    assert by[(0, 19, 0)].lines[1:] == ["GPU KV cache size: 100,800 tokens",
                                        "Maximum concurrency for 1,000 tokens per request: 100.00x"]
    assert by[(0, 21, 0)].lines[1:] == ["GPU KV cache size: 100,000 tokens",
                                        "Maximum concurrency for 1,000 tokens per request: 100.00x"]


def test_sliding_layers_are_full_before_the_hybrid_allocator():
    """vLLM 0.8.x-0.9.0 (unify_hybrid_kv_cache_specs): with full and sliding layers, every sliding
    layer becomes full attention, after the start-up check ran on the layers' own specs.  Gemma-3-27B
    at 32,768: 62 layers × 2,048 blocks of 16 tokens; the check still asks for 10 × 2,048 + 52 × 577."""
    dep = Deployment(vllm_version=(0, 9, 0))
    kinds = kinds_of("gemma-3-27b", dep)
    lay = vllm_layout(kinds, 32768, dep)
    page = 16 * 16 * 128 * 2 * 2
    assert (lay.group_size, lay.groups, lay.blocks) == (62, {"global": 1}, {"global": 2048})
    assert lay.needed == page * (10 * 2048 + 52 * (-(-(1023 + 8192) // 16) + 1))
    assert vllm_layout(kinds, 32768, Deployment()).groups == {"local": 6, "global": 1}


def test_chunked_layers_are_full_before_chunked_local_attention_spec():
    """Before 0.10.0 a chunked layer had a FullAttentionSpec: Llama 4's 36 chunked + 12 global layers
    page as 48 full ones, one group (0.9.1 already grouped, but there was one kind)."""
    dep = Deployment(vllm_version=(0, 9, 2))
    kinds = kinds_of("llama-4-scout", dep)
    assert vllm_layout(kinds, 65536, dep).groups == {"global": 1}
    assert set(vllm_layout(kinds, 65536, Deployment()).groups) == {"global", "chunked"}


@pytest.mark.parametrize(("options", "field", "says"), [
    (dict(vllm_version=(0, 7, 3)), "--vllm-version", "V0 engine"),
    (dict(vllm_version=(0, 9, 2)), "--vllm-version", "since 0.10.0"),
])
def test_releases_that_are_not_modelled(options, field, says):
    with pytest.raises(InputError) as e:
        check_deployment(load_model("tests/data/hf/qwen3.5-27b.json")[0], Deployment(**options))
    assert e.value.field == field and says in str(e.value)


def test_mamba_all_mode_is_refused_and_named():
    """0.26.0-0.27.x cache a Mamba-2 hybrid's prefixes in mamba_cache_mode "all" (a state per block):
    refused with the way out; Qwen3.5 (Gated DeltaNet) takes "align" there."""
    nemotron = load_model("tests/data/hf/nemotron-3-nano-30b-a3b.json")[0]
    with pytest.raises(InputError) as e:
        check_deployment(nemotron, Deployment(vllm_version=(0, 26, 0)))
    assert e.value.field == "--enable-prefix-caching" and "--no-enable-prefix-caching" in str(e.value)
    check_deployment(nemotron, Deployment(vllm_version=(0, 26, 0), prefix_caching=False))
    check_deployment(nemotron, Deployment(vllm_version=(0, 28, 0)))
    check_deployment(load_model("tests/data/hf/qwen3.5-27b.json")[0], Deployment(vllm_version=(0, 26, 0)))


@pytest.mark.parametrize(("text", "version"), [
    ("0.19.0", (0, 19, 0)), ("v0.19.0", (0, 19, 0)), ("0.19", (0, 19, 0)), ("0.10.1.1", (0, 10, 1)),
    ("0.11.0rc1", (0, 11, 0)), (" 0.19.2 ", (0, 19, 2)), ("0.9.0.post1", (0, 9, 0))])
def test_parse_version_reads_releases(text, version):
    assert parse_version(text) == version


@pytest.mark.parametrize(("text", "shown"), [
    ("", "''"), ("latest", "'latest'"), ("19", "'19'"), ("0.x.1", "'0.x.1'"), ("1e3.0", "'1e3.0'"),
    ("0.19.0" * 20, repr(("0.19.0" * 20)[:40])), (19, "'19'"), (None, "'None'")])
def test_parse_version_refuses_the_rest(text, shown):
    with pytest.raises(InputError) as e:
        parse_version(text)
    assert (e.value.field, e.value.message) == ("--vllm-version",
                                                f"{shown} is not a release; give MAJOR.MINOR.PATCH (e.g. 0.19.0)")


def test_cli_options_reach_the_plan_and_are_checked():
    run = CliRunner().invoke
    r = run(cli, ["fit", "tests/data/hf/qwen3.5-27b.json", "--gpu", "h200", "--context", "32768",
                  "--vllm-version", "0.19.0", "--max-num-batched-tokens", "16384", "--json"])
    assert r.exit_code == 0, r.output
    import json

    doc = json.loads(r.stdout)
    assert doc["startup"]["vllm_version"] == "0.19.0" and doc["startup"]["block_size"] == 784
    assert doc["startup"]["mamba_cache_mode"] == "none"
    assert json.loads(run(cli, ["fit", "llama-3.1-8b", "--gpu", "h100", "--json"]).stdout)["startup"][
        "mamba_cache_mode"] is None
    assert doc["deployment"]["engine_rules_from"].startswith("vLLM 0.19.0 (--vllm-version): ")
    text = run(cli, ["fit", "tests/data/hf/qwen3.5-27b.json", "--gpu", "h200", "--no-enable-prefix-caching"]).output
    assert "raised from 16 to 784 tokens" in " ".join(text.split())
    for args, says in ((["--vllm-version", "banana"], "is not a release"),
                       (["--engine", "llamacpp", "--vllm-version", "0.19.0"], "engine llamacpp does not take it"),
                       (["--engine", "plain", "--no-enable-prefix-caching"], "engine plain does not take it")):
        r = run(cli, ["fit", "llama-3.1-8b", "--gpu", "h100", *args])
        assert r.exit_code == 2 and says in r.output and "Traceback" not in r.output, r.output


def test_a_newer_release_is_planned_by_the_newest_read_and_says_so():
    from archcalc.serving.planner import warnings

    dep = Deployment(vllm_version=(0, 40, 1))
    spec = load_model("llama-3.1-8b")[0]
    assert any("vLLM 0.40.1 is newer than 0.34.0" in w for w in warnings(spec, dep, 4096))
    plan = Planner(spec, load_hardware("h100"), dep).plan(4096)
    assert plan.startup.version == (0, 34, 0) and not warnings(spec, Deployment(), 4096)


# ---- each release boundary, on both sides -------------------------------------------------------------

def startup(model, context, **dep):
    return Planner(load_model(model)[0], load_hardware("h200"), Deployment(**dep)).plan(context).startup


@pytest.mark.parametrize(("before", "at"), [((0, 9, 0), (0, 9, 1))])
def test_hybrid_allocator_boundary(before, at):
    """Gemma-3-27B: one group of 62 full layers before 0.9.1; 6 local + 1 global groups of 10 from it."""
    assert startup("gemma-3-27b", 32768, vllm_version=before).groups == 1
    assert startup("gemma-3-27b", 32768, vllm_version=at).groups == 7


def test_chunked_spec_boundary():
    """Llama 4 Scout: chunked layers paged as full before 0.10.0 (before 0.9.1 too), as chunks from it."""
    assert startup("llama-4-scout", 65536, vllm_version=(0, 9, 0), gpus=8).layout.groups == {"global": 1}
    assert startup("llama-4-scout", 65536, vllm_version=(0, 9, 2), gpus=8).layout.groups == {"global": 1}
    assert set(startup("llama-4-scout", 65536, vllm_version=(0, 10, 0), gpus=8).layout.groups) == {"global",
                                                                                                  "chunked"}


def test_token_line_boundary():
    """0.20.0 still logs num_blocks // groups × the smallest block; 0.20.1 the concurrency × max_model_len."""
    old = startup("gemma-3-27b", 32768, vllm_version=(0, 20, 0))
    new = startup("gemma-3-27b", 32768, vllm_version=(0, 20, 1))
    assert old.num_blocks == new.num_blocks and old.groups == 7
    assert old.kv_tokens == old.num_blocks // 7 * 16
    assert new.kv_tokens == int(new.num_blocks / new.blocks_per_request * 32768) != old.kv_tokens


def test_alignment_boundary():
    """Qwen3.5-27B at --block-size 32: a multiple of 16 (784) on 0.23.x, of 32 (800) from 0.24.0."""
    blocks = [vllm_layout(kinds_of("tests/data/hf/qwen3.5-27b.json", d), 32768, d).block_size
              for d in (Deployment(block_size=32, vllm_version=v) for v in ((0, 23, 9), (0, 24, 0)))]
    assert blocks == [784, 800]


def test_prefix_caching_default_boundary():
    """Hybrid models cache prefixes by default from 0.26.0 (two state pages a request), not on 0.25.x;
    an attention-free model never by default, but when told to."""
    modes = [startup("tests/data/hf/qwen3.5-27b.json", 32768, vllm_version=v).layout.mamba_mode
             for v in ((0, 25, 1), (0, 26, 0))]
    assert modes == ["none", "align"]
    codestral = "tests/data/hf/mamba-codestral-7b.json"
    assert startup(codestral, 4096).layout.blocks == {"linear": 1}
    assert startup(codestral, 4096, prefix_caching=True).layout.blocks == {"linear": 2}


def test_log_line_boundary():
    two = startup("llama-3.1-8b", 8192, vllm_version=(0, 27, 1)).lines
    one = startup("llama-3.1-8b", 8192, vllm_version=(0, 28, 0)).lines
    assert len(two) == 3 and len(one) == 2 and one[1] == f"{two[1]}, {two[2]}"


def test_oldest_release_boundary():
    check_deployment(load_model("llama-3.1-8b")[0], Deployment(vllm_version=(0, 8, 0)))
    with pytest.raises(InputError):
        check_deployment(load_model("llama-3.1-8b")[0], Deployment(vllm_version=(0, 7, 9)))


@pytest.mark.parametrize(("model", "dep", "field", "says"), [
    # linear layers from 0.10.0 on
    ("tests/data/hf/qwen3.5-27b.json", dict(vllm_version=(0, 9, 2)), "--vllm-version", "since 0.10.0"),
    # prefix caching of linear layers before mamba_cache_mode (0.16.0)
    ("tests/data/hf/qwen3.5-27b.json", dict(vllm_version=(0, 15, 1), prefix_caching=True), "--enable-prefix-caching",
     "before mamba_cache_mode, 0.16.0"),
    # Falcon-H1 runs attention in every layer beside its Mamba-2 mixer: a hybrid, "all" on 0.27
    ("falcon_h1", dict(vllm_version=(0, 27, 0)), "--enable-prefix-caching", "mamba_cache_mode 'all'"),
    # an attention-free Mamba-2 model told to cache prefixes on 0.27
    ("tests/data/hf/mamba-codestral-7b.json", dict(vllm_version=(0, 27, 0), prefix_caching=True),
     "--enable-prefix-caching", "mamba_cache_mode 'all'"),
    ("llama-3.1-8b", dict(mtp=True, pp=2, gpus=2), "--mtp",
     "MTP modules under pipeline parallelism are not modelled; use --pp 1"),
])
def test_refusals_name_the_option(model, dep, field, says):
    if model == "falcon_h1":
        import json

        from transformers import AutoConfig

        from archcalc.spec.hf import spec_dict_from_config
        from archcalc.spec.model import ModelSpec

        cfg = AutoConfig.for_model("falcon_h1", num_hidden_layers=2, vocab_size=100, mamba_d_ssm=64,
                                   mamba_n_heads=8, mamba_d_head=8, mamba_d_state=16, mamba_chunk_size=4)
        data, _ = spec_dict_from_config(json.loads(cfg.to_json_string()), "config.json")
        spec = ModelSpec.model_validate({"name": "falcon_h1", **data})
        assert spec.parallel_linear
    else:
        spec = load_model(model)[0]
    with pytest.raises(InputError) as e:
        check_deployment(spec, Deployment(**dep))
    assert e.value.field == field and says in e.value.message
    if field == "--mtp":
        assert e.value.message == says


def test_prefix_caching_is_accepted_where_modelled():
    nemotron = load_model("tests/data/hf/nemotron-3-nano-30b-a3b.json")[0]
    for dep in (Deployment(vllm_version=(0, 27, 0), prefix_caching=False), Deployment(vllm_version=(0, 28, 0)),
                Deployment(vllm_version=(0, 15, 0)), Deployment(vllm_version=(0, 25, 0))):
        check_deployment(nemotron, dep)
    check_deployment(load_model("llama-3.1-8b")[0], Deployment(mtp=False, pp=2, gpus=2))
    qwen = load_model("tests/data/hf/qwen3.5-27b.json")[0]
    check_deployment(qwen, Deployment(vllm_version=(0, 10, 0)))  # the first release that pages linear layers
    check_deployment(qwen, Deployment(vllm_version=(0, 16, 0), prefix_caching=True))  # the first with align


def test_a_full_layer_first_or_second_becomes_one_full_kind():
    """Before 0.9.1 the sliding layers become full ones whatever order the kinds come in: no window
    survives the merge (Gemma-3-27B's counts, local first)."""
    from archcalc.serving.engines.base import AttnKind

    kinds = [AttnKind("local", 52, 1024, 8192.0), AttnKind("global", 10, None, 8192.0)]
    lay = vllm_layout(kinds, 32768, Deployment(vllm_version=(0, 9, 0)))
    assert [(k.kind, k.layers, k.window) for k in lay.kinds] == [("global", 62, None)]
    assert lay.blocks == {"global": 2048}


def test_the_check_before_0_9_1_uses_each_layer_s_own_blocks():
    """0.9.0's check sums every layer's own max memory (sliding layers windowed) at the block size in
    use; 0.9.1's is the padded groups'.  Gemma-3-27B at 32,768 with --block-size 32."""
    page = 32 * 16 * 128 * 2 * 2
    dep = Deployment(vllm_version=(0, 9, 0), block_size=32)
    kinds = kinds_of("gemma-3-27b", dep)
    assert vllm_layout(kinds, 32768, dep).needed == page * (10 * 1024 + 52 * (-(-(1023 + 8192) // 32) + 1))
    at = vllm_layout(kinds, 32768, Deployment(vllm_version=(0, 9, 1)))
    assert at.needed == at.group_size * at.page * at.blocks_per_request > at.layers_needed


def test_a_small_state_leaves_the_block_alone():
    """LFM2-1.2B: a short conv's state (2,048 channels × 2 inputs × 2 B = 8 KiB) fits one 16-token page
    (8 KV heads × 64 × 2 × 2 B = 2 KiB a token): no raise, and the note says none."""
    dep = Deployment(prefix_caching=False)
    kinds = kinds_of("lfm2-1.2b", dep)
    assert max(k.state_bytes for k in kinds) == 2048 * 2 * 2
    lay = vllm_layout(kinds, 4096, dep)
    assert (lay.block_size, lay.raised_from, lay.page) == (16, None, 16 * 2048)


def test_the_smallest_block_counts_mamba_block_size():
    """0.9.1-0.20.0 log num_blocks // groups × the smallest block size; a linear group's block is
    mamba_block_size: max_model_len without prefix caching, the attention block with it.  Qwen3.5-27B at
    max_model_len 512 on 0.19.0: min(784, 512) = 512 without, 784 with."""
    pool = 100 * 784 * 4096 * 16
    tokens = {}
    for cached in (False, True):
        dep = Deployment(vllm_version=(0, 19, 0), prefix_caching=cached)
        kinds = kinds_of("tests/data/hf/qwen3.5-27b.json", dep)
        tokens[cached] = VLLM.startup(kinds, 512, pool, dep).kv_tokens
    assert tokens == {False: 100 // 4 * 512, True: 100 // 4 * 784}


def test_tensor_parallel_halves_each_linear_state():
    """At TP 2 each rank holds half of every head-sharded state (vLLM shards the GDN heads): 3,207,168 / 2."""
    kinds = Planner(load_model("tests/data/hf/qwen3.5-27b.json")[0], load_hardware("h200"),
                    Deployment(tp=2, gpus=2)).kinds
    assert max(k.state_bytes for k in kinds) == 3_207_168 / 2


def test_estimates_and_errors_at_one_token_blocks():
    """--block-size 1: one token's cache fits, two do not: vLLM estimates 1 and says so; with no token
    at all the estimate sentence is left out."""
    dep = Deployment(block_size=1)
    kinds = kinds_of("llama-3.1-8b", dep)
    one = VLLM.needed(kinds, 1, dep)
    report = VLLM.startup(kinds, 8192, one, dep)
    assert report.estimated_max_model_len == 1 and "the estimated maximum model length is 1. " in report.error
    none = VLLM.startup(kinds, 8192, one - 1, dep)
    assert none.estimated_max_model_len == 0
    assert none.error == ("To serve at least one request with the model's max seq len (8192), (1.0 GiB KV cache is "
                          "needed, which is larger than the available KV cache memory (0.0 GiB). Try increasing "
                          "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
                          "decreasing `max_model_len` when initializing the engine. See "
                          "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")
