"""DeepSeek-V4 (AttentionSpec.compressed) against transformers' own DeepseekV4ForCausalLM.

Shrunk configs of DeepseekV4Config (every layer kind, both compressors at rates the test reaches, an
indexer that selects fewer entries than there are) run on the meta device: parameters against numel(),
prefill and decode FLOPs against FlopCounterMode, and the cache each layer holds against
archcalc's.  On the CPU, with real values, HF's own masks and the indexer's own selection say which
compressed entries each query reads: archcalc's causal pairs.  The released shape (the fixture
tests/data/hf/deepseek-v4-flash.json and the config class's defaults) is pinned at full size.
Every difference is HF's and named where it is asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForCausalLM

from archcalc.cost.totals import size
from archcalc.errors import InputError
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import load_model
from archcalc.spec.hf import spec_dict_from_config
from archcalc.spec.model import ModelSpec
from tests.spec.test_hf_oracle import _elementwise_stream_reads, assert_params_and_prefill_equal_hf

DTYPE = torch.bfloat16
FIXTURE = Path(__file__).parents[1] / "data" / "hf" / "deepseek-v4-flash.json"
LAYERS = {"sliding": "sliding_attention", "csa": "compressed_sparse_attention", "hca": "heavily_compressed_attention"}
# A window past every prefill below (decode stays inside it: see test_decode_step), a CSA rate of 4 and an HCA rate
# of 8, and an indexer keeping 3 entries: a prefill of 13 tokens closes 3 CSA entries (so the top 3 of up to 3),
# 21 tokens 5 (the selection bites)
SHRUNK = dict(vocab_size=100, hidden_size=64, moe_intermediate_size=32, num_attention_heads=4, head_dim=32,
              q_lora_rank=24, num_experts_per_tok=2, n_routed_experts=4, n_shared_experts=1, sliding_window=32,
              o_groups=2, o_lora_rank=16, index_n_heads=2, index_head_dim=16, index_topk=3, hc_mult=3,
              partial_rotary_factor=0.25, pad_token_id=0,
              compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8})
VARIANTS = {
    "every kind": ["sliding", "hca", "csa", "csa", "hca", "sliding"],
    "the release's order": ["sliding", "sliding", "csa", "hca", "csa"],
    "hca only": ["hca", "hca", "sliding"],
}


def _config(kinds: list[str], **over):
    return AutoConfig.for_model("deepseek_v4", **{**SHRUNK, "num_hidden_layers": len(kinds),
                                                  "layer_types": [LAYERS[k] for k in kinds], **over})


def _spec(config) -> ModelSpec:
    data, report = spec_dict_from_config(json.loads(config.to_json_string()), "config.json")
    assert report.warnings == []
    return ModelSpec.model_validate({"name": "v4", **data})


def _model(config, device: str = "meta") -> torch.nn.Module:
    with torch.device(device):
        return AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                                experts_implementation="batched_mm", dtype=DTYPE).eval()


@pytest.mark.parametrize("tokens", [1, 5, 13, 21])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_params_and_prefill_flops_equal_hf(variant, tokens):
    config = _config(VARIANTS[variant])
    assert_params_and_prefill_equal_hf(_spec(config), _model(config), tokens)


@pytest.mark.parametrize("tokens", [12, 20])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_decode_step_flops_equal_hf(variant, tokens):
    """A token after a prefill of `tokens`, through the cache the prefill returned: the window's keys, every entry
    held (a step closing a window adds one: 12 → 13 closes none, 20 → 21 none of 8 but one of 4), the indexer over
    all of them.  Inside the window, so HF's window-capped decode keys are the context (the torch convention does
    not cap windows)."""
    config = _config(VARIANTS[variant])
    spec, model = _spec(config), _model(config)
    assert tokens + 1 < config.sliding_window
    ids = torch.zeros(1, tokens, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).cache
        with FlopCounterMode(display=False) as counter:
            model(input_ids=ids[:, :1], cache=cache, use_cache=True)
    ours = size(spec, Workload.decode(tokens + 1), CONVENTIONS["torch"])
    assert ours.flops.forward - _elementwise_stream_reads(model, 1) == counter.get_total_flops()


def _held(t: torch.Tensor | None) -> int:
    return 0 if t is None else t.numel() * t.element_size()


@pytest.mark.parametrize("tokens", [3, 13, 21, 40])
def test_cache_equals_hf_layer_by_layer(tokens):
    """HF's DynamicCache after a prefill, layer by layer, against archcalc's at that context.

    The window: a layer keeps min(tokens, window − 1) keys (DynamicSlidingWindowLayer; archcalc allocates the
    window, as a static cache does: one token more past it), one K=V tensor in a CSA or HCA layer; a layer with no
    compressor goes through the plain sliding layer, which stores the same tensor as its keys and as its values:
    twice what archcalc (and an engine) keeps.  The entries: tokens // rate of d (and of d_I for a CSA layer's
    indexer), at the cache's dtype, exactly archcalc's.  The state: archcalc allocates what a sequence may hold,
    rate − 1 waiting tokens' values and gates and CSA's overlapping window; HF holds the tokens waiting now
    (tokens mod rate) and the overlap once a window has closed, its gate in fp32 (the fp32 position bias is added
    before it is kept)."""
    config = _config(VARIANTS["every kind"])
    spec, model = _spec(config), _model(config)
    window, rates = config.sliding_window, config.compress_rates
    with torch.no_grad():
        cache = model(input_ids=torch.zeros(1, tokens, dtype=torch.long, device="meta"), use_cache=True).cache
    ours = {k.kind: k for k in size(spec, Workload(new_tokens=tokens, context=tokens), CONVENTIONS["torch"]).kv.by_kind}
    d, di = config.head_dim, config.index_head_dim
    kinds = [{"sliding_attention": "none", "compressed_sparse_attention": "csa",
              "heavily_compressed_attention": "hca"}[t] for t in config.layer_types]
    assert [type(layer).__name__ for layer in cache.layers] == [
        {"none": "DynamicSlidingWindowLayer", "csa": "DeepseekV4CSACache", "hca": "DeepseekV4HCACache"}[k]
        for k in kinds]
    kept = min(tokens, window - 1)
    local_per_layer = ours["local"].bytes / ours["local"].layers
    assert local_per_layer == min(tokens, window) * d * DTYPE.itemsize
    for kind, layer in zip(kinds, cache.layers):
        twice = layer.values is not layer.keys
        assert twice == (kind == "none")
        assert _held(layer.keys) * (1 + twice) == kept * d * DTYPE.itemsize * (1 + twice)
        if kind == "none":
            continue
        rate = rates[LAYERS[kind]]
        names = {"compressor": (kind, d), **({"indexer": ("indexer", di)} if kind == "csa" else {})}
        for name, (ours_kind, width) in names.items():
            k = ours[ours_kind]
            assert _held(layer.compressed_kv[name]) == tokens // rate * width * DTYPE.itemsize
            assert (k.bytes - k.state_bytes) / k.layers == tokens // rate * width * DTYPE.itemsize
            series = 2 if kind == "csa" else 1
            waiting = _held(layer.buffer_kv[name]) + _held(layer.buffer_gate[name])
            assert waiting == tokens % rate * 2 * series * width * DTYPE.itemsize
            overlap = (_held(layer.overlap_kv[name]) + _held(layer.overlap_gate[name])) if kind == "csa" else 0
            closed = tokens >= rate and kind == "csa"
            assert overlap == closed * rate * width * (DTYPE.itemsize + 4)  # the gate's fp32
            assert waiting <= (rate - 1) * 2 * series * width * DTYPE.itemsize
            state = ((rate - 1) * 2 * series * width + (kind == "csa") * 2 * rate * width) * DTYPE.itemsize
            assert k.state_bytes / k.layers == state


def _visible_entries(config, tokens: int) -> dict[str, int]:
    """The (query, entry) pairs HF lets through in a CSA and in an HCA layer of a real CPU forward: an HCA layer's
    block_bias (its causal mask over the entries: 0 where a query may read), a CSA layer's indexer's selection (its
    top-k among the entries a query may see; -1 where it has fewer)."""
    torch.manual_seed(0)
    model = _model(config, "cpu")
    seen = {}

    def hca(module, args, out):
        bias = out[1]
        seen["hca"] = int((bias == 0).sum()) if bias is not None else out[0].shape[2]

    def indexer(module, args, out):
        seen["csa"] = int((out >= 0).sum())

    csa_layer = next(m for m in model.modules() if type(m).__name__ == "DeepseekV4CSACompressor")
    hca_layer = next(m for m in model.modules() if type(m).__name__ == "DeepseekV4HCACompressor")
    hooks = [hca_layer.register_forward_hook(hca), csa_layer.indexer.register_forward_hook(indexer)]
    try:
        with torch.no_grad():
            model(input_ids=torch.randint(1, config.vocab_size, (1, tokens)), use_cache=True)
    finally:
        for h in hooks:
            h.remove()
    return seen


@pytest.mark.parametrize("tokens", [13, 21, 40])
def test_causal_entry_pairs_are_hf_s_masks_and_selection(tokens):
    """archcalc's causal convention reads, per query, the entries HF lets it: in an HCA layer the ones whose window
    has closed by its position, in a CSA layer the indexer's top-k of those.  FLOPs a pair: 2·H·(d + d)."""
    config = _config(VARIANTS["every kind"])
    spec = _spec(config)
    seen = _visible_entries(config, tokens)
    ops_ = {op.name: op for op in size(spec, Workload.forward(tokens), CONVENTIONS["causal"]).ops}
    per_pair = 2 * config.num_attention_heads * 2 * config.head_dim
    for kind in ("csa", "hca"):
        op = ops_[f"layers.attn.core.{kind}"]
        assert op.flops == seen[kind] * per_pair


def test_a_decode_step_reads_the_entries_hf_s_indexer_selects():
    """A decode step after 21 tokens (5 CSA entries, 2 HCA ones; the step closes none): the CSA core reads the
    entries its indexer picks (-1 where there are fewer than index_topk: here 3 of 5), an HCA core every entry
    held (HF's compressor hands them all over), d values each at the cache's dtype."""
    config = _config(VARIANTS["every kind"])
    torch.manual_seed(0)
    model, picked = _model(config, "cpu"), []
    csa = next(m for m in model.modules() if type(m).__name__ == "DeepseekV4CSACompressor")
    hca = next(m for m in model.modules() if type(m).__name__ == "DeepseekV4HCACompressor")
    held = []
    hooks = [csa.indexer.register_forward_hook(lambda m, a, out: picked.append(int((out >= 0).sum()))),
             hca.register_forward_hook(lambda m, a, out: held.append(out[0].shape[2]))]
    try:
        with torch.no_grad():
            cache = model(input_ids=torch.randint(1, 100, (1, 21)), use_cache=True).cache
            model(input_ids=torch.randint(1, 100, (1, 1)), cache=cache, use_cache=True)
    finally:
        for h in hooks:
            h.remove()
    ops_ = {op.name: op for op in size(_spec(config), Workload.decode(22), CONVENTIONS["causal"]).ops}
    entry = config.head_dim * DTYPE.itemsize
    assert (picked[-1], held[-1]) == (config.index_topk, 22 // 8)
    assert ops_["layers.attn.core.csa"].kv_bytes == picked[-1] * entry
    assert ops_["layers.attn.core.hca"].kv_bytes == held[-1] * entry


def test_the_release_is_284b_with_13b_active():
    """The fixture (DeepSeek-V4-Flash's config.json, slimmed; tests/data/hf/SOURCES.md) at full size on the meta
    device: numel() is archcalc's total, and DeepSeek's model card says 284B total, 13B activated (the layers'
    active parameters: without the embedding and the output head)."""
    spec = load_model(str(FIXTURE))[0]
    raw = json.loads(FIXTURE.read_text())
    config = AutoConfig.for_model(raw.pop("model_type"), **raw)
    model = _model(config)
    p = size(spec, Workload.forward(1), CONVENTIONS["torch"]).params
    assert p.total == sum(t.numel() for t in model.parameters())
    assert round(p.total / 1e9) == 284
    assert round((p.active - p.by_component["embedding"] - p.by_component["lm_head"]) / 1e9) == 13


# DeepSeek-V4-Flash's release as the Hub's safetensors metadata counts its stored elements by type (a model
# index's test quotes the Hub API's answer: index id 56130355447).  Its F32 tensors are not in that answer.
HUB_BY_TYPE = {"BF16": 1_415_259_264, "F8_E8M0": 8_858_737_664, "F8_E4M3": 6_023_020_544, "I8": 141_733_920_768}
# What DeepSeek stores in FP8 (E4M3, an E8M0 scale per 128 × 128 block) and in F32 (its inference/model.py builds
# the mHC parameters, the position biases and the sinks in fp32), by archcalc's op names (mtp.*: the MTP layer's)
RELEASE_FP8 = ("layers.attn.q_a", "layers.attn.q_b", "layers.attn.kv", "layers.attn.o_a", "layers.attn.o_b",
               "layers.moe.shared.up", "layers.moe.shared.down", "layers.attn.csa.kv_gate", "eh_proj")
RELEASE_F32 = ("layers.mhc.coeffs", "layers.mhc.sinkhorn", "hc.head", "hc.head_gates", "layers.attn.core.local",
               "layers.attn.csa.position_bias", "layers.attn.hca.position_bias", "layers.attn.indexer.position_bias")


def test_the_release_s_stored_tensors_are_ours_type_by_type():
    """Every stored element of DeepSeek-V4-Flash's release (the 43 layers and the MTP layer, its embedding and head)
    by type, from archcalc's ops: the routed experts in FP4 (MXFP4: I8 bytes of two values, an E8M0 scale per 32),
    the attention's projections, the shared experts, the CSA compressors and the MTP projection in FP8 (an E8M0
    scale per 128 × 128 block of each matrix), the rest BF16 but what DeepSeek keeps in F32.  Four counts, each
    exact: the I8 pins the experts, the E4M3 and the scales which matrices are FP8 and their shapes, the BF16
    everything else."""
    import math

    from archcalc.ops.layers import model_ops
    from archcalc.ops.mtp import mtp_ops

    spec = load_model(str(FIXTURE))[0]
    ops_ = model_ops(spec, Workload.forward(1)) + mtp_ops(spec)

    def named(op, names):
        return op.name.removeprefix("mtp.") in names

    def blocks(op):  # 128 × 128 blocks of each stored matrix (a fused op's parts are matrices of their own)
        return sum(math.ceil(n / 128) * math.ceil(op.dims.k / 128) for n in (op.dims.parts or (op.dims.n,)))

    experts = sum(op.params * op.count for op in ops_ if op.component == "experts")
    fp8 = [op for op in ops_ if named(op, RELEASE_FP8)]
    # each in the layers and the MTP layer, but the CSA compressor (the MTP layer has none) and eh_proj (MTP's own)
    assert len(fp8) == 2 * (len(RELEASE_FP8) - 2) + 2
    f32 = sum(op.params * op.count for op in ops_ if named(op, RELEASE_F32))
    total = sum(op.params * op.count for op in ops_)
    assert experts % 2 == 0 and experts // 2 == HUB_BY_TYPE["I8"]
    assert sum(op.params * op.count for op in fp8) == HUB_BY_TYPE["F8_E4M3"]
    assert experts // 32 + sum(blocks(op) * op.count for op in fp8) == HUB_BY_TYPE["F8_E8M0"]
    assert total - experts - HUB_BY_TYPE["F8_E4M3"] - f32 == HUB_BY_TYPE["BF16"]


def test_the_release_format_stores_what_the_hub_counts():
    """--weights fp8-block-mxfp4, the release's format, on the model and its MTP layer: its MXFP4 experts (16 bytes
    of values and a scale a 32) and FP8 linears (a byte a value and a scale a block) are the Hub's I8, F8_E4M3 and
    F8_E8M0 bytes together, its BF16 tensors the Hub's BF16, to the byte; what it keeps in fp32 (mHC's
    coefficients and scales, the position biases, the sinks) is the rest, which the Hub's answer does not list."""
    from archcalc.ops.checkpoints import checkpoint_size
    from archcalc.ops.layers import model_ops
    from archcalc.ops.mtp import mtp_ops

    from dataclasses import replace

    spec = load_model(str(FIXTURE))[0]
    by_type: dict[str, float] = {}
    mtp = [replace(op, name=op.name.removeprefix("mtp.")) for op in mtp_ops(spec)]  # a decoder layer's tensors
    for ops_ in (model_ops(spec, Workload()), mtp):
        for kind, n in checkpoint_size(spec, ops_, "fp8-block-mxfp4").bytes_by_type.items():
            by_type[kind] = by_type.get(kind, 0) + n
    assert set(by_type) == {"mxfp4", "fp8_b128_e8m0", "bf16", "f32"}
    assert by_type["mxfp4"] + by_type["fp8_b128_e8m0"] == sum(HUB_BY_TYPE[t] for t in ("I8", "F8_E4M3", "F8_E8M0"))
    assert by_type["bf16"] == 2 * HUB_BY_TYPE["BF16"]


def test_at_1m_tokens_the_cache_and_a_step_are_near_the_card_s_share_of_v3_2_s():
    """DeepSeek's card: at a 1M-token context V4-Flash needs 7% of DeepSeek-V3.2's KV cache and 10% of its
    single-token FLOPs.  archcalc, both caches at one dtype (bf16) and the causal convention: 8.0% and 12.4%.  The
    card's caches keep their values at precisions of their own (not in either config.json), which archcalc does not
    assume; the shares agree to within those."""
    wl = Workload.decode(1_000_000)
    v4, v32 = (size(load_model(n)[0], wl, CONVENTIONS["causal"]) for n in ("deepseek-v4-flash", "deepseek-v3.2"))
    assert 0.06 < v4.kv.bytes / v32.kv.bytes < 0.09
    assert 0.08 < v4.flops.forward / v32.flops.forward < 0.14


def test_the_config_class_defaults_are_the_release_but_its_layer_order():
    """DeepseekV4Config's defaults (its checkpoint: DeepSeek-V4-Flash-Base) read as the fixture, but for the order
    of the layers: the class starts with three HCA layers and then alternates, the release with two sliding ones;
    a config.json that names no layer types gets the class's (archcalc's own rule for them)."""
    default = _spec(AutoConfig.for_model("deepseek_v4"))
    fixture = load_model(str(FIXTURE))[0]
    c = fixture.attention.compressed
    assert c.layers[:4] == ["none", "none", "csa", "hca"]
    assert default.attention.compressed.layers[:5] == ["hca", "hca", "hca", "csa", "hca"]
    bare = ModelSpec.model_validate({"name": "v4", **spec_dict_from_config({"model_type": "deepseek_v4"}, "c.json")[0]})
    assert bare.attention.compressed == default.attention.compressed
    same = {"name", "attention"}
    assert default.model_dump(exclude=same) == fixture.model_dump(exclude=same | {"max_context"}) | {
        "max_context": default.max_context}
    assert default.attention.model_dump(exclude={"compressed"}) == fixture.attention.model_dump(exclude={"compressed"})


def test_legacy_keys_read_as_their_modern_names():
    """compress_ratios (the release's rate per layer, its MTP layer's last) and compress_rate_csa / _hca say what
    layer_types and compress_rates say."""
    modern = _spec(_config(VARIANTS["every kind"]))
    raw = json.loads(_config(VARIANTS["every kind"]).to_json_string())
    legacy = {k: v for k, v in raw.items() if k not in ("layer_types", "compress_rates")}
    legacy |= {"compress_ratios": [{"sliding": 0, "csa": 4, "hca": 128}[k] for k in VARIANTS["every kind"]] + [0],
               "compress_rate_csa": 4, "compress_rate_hca": 8}
    assert ModelSpec.model_validate({"name": "v4", **spec_dict_from_config(legacy, "config.json")[0]}) == modern


@pytest.mark.parametrize("change, field", [
    ({"num_key_value_heads": 2}, "num_key_value_heads"),
    ({"compress_ratios": [0, 4, 7]}, "compress_ratios"),
    ({"layer_types": ["sliding_attention"]}, "layer_types"),
    ({"compress_rates": {"compressed_sparse_attention": "4"}}, "compress_rates.compressed_sparse_attention"),
    ({"o_groups": 3}, "o_groups"),
    ({"first_k_dense_replace": 1}, "first_k_dense_replace"),
    ({"mlp_layer_types": ["moe", "dense", "moe"]}, "mlp_layer_types"),
])
def test_bad_configs_say_which_key(tmp_path, change, field):
    raw = {"model_type": "deepseek_v4", **json.loads(_config(["sliding", "csa", "hca"]).to_json_string()), **change}
    if "compress_ratios" in change:
        del raw["layer_types"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=field):
        load_model(str(path))


@pytest.mark.parametrize("where", ["top level", "quantization_config"])
def test_the_release_s_quantization_config_names_its_format(where):
    """DeepSeek-V4's file says fp8 blocks with FP4 experts (expert_dtype at the top level; V4.1 moved it into
    quantization_config): the report says to size it with --weights fp8-block-mxfp4."""
    q = {"quant_method": "fp8", "weight_block_size": [128, 128], "scale_fmt": "ue8m0"}
    raw = {**json.loads(FIXTURE.read_text()), "quantization_config": q}
    if where == "top level":
        raw["expert_dtype"] = "fp4"
    else:
        q["expert_dtype"] = "fp4"
    report = spec_dict_from_config(raw, "config.json")[1]
    assert report.warnings == []
    assert report.ignored["quantization_config"].endswith("--weights fp8-block-mxfp4")
