"""Inkling 2 (inkling2_text; AttentionSpec qk_norm clip, sink_proj, dynamic_kv_conv, relative.scale; ResidualSpec
attnres_form inkling2) and Inkling 2 Loop (inkling2_loop_text; LoopSpec kind message) against transformers' own
Inkling2ForCausalLM and Inkling2LoopForCausalLM.

No config.json of a released Inkling 2 was found (tests/data/hf/SOURCES.md): shrunk configs of Inkling2TextConfig
and Inkling2LoopTextConfig, in the layouts they allow (sliding layers with full ones between, a full layer first or
at a block boundary, no sliding layer, blocks of one layer to several; loops of one block or two, one pass to
three, given flat or by loop_config), run on the meta device: parameters against numel(), prefill and decode
FLOPs against FlopCounterMode, the cache each layer run holds and the bytes of each parameter's dtype against
archcalc's.  The config classes' defaults (Inkling-2-Small's and Inkling-2-Mini's shapes) are pinned at full
size.  Every difference is HF's and named where it is subtracted."""

from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig

from archcalc.cost.totals import size
from archcalc.errors import InputError
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload
from archcalc.spec.hf import spec_dict_from_config
from archcalc.spec.model import ModelSpec
from tests.spec.meta import DTYPE, held_and_step_flops, meta_model, spec_of_config

# 4 heads of 16 over 2 KV heads in both kinds of layer (archcalc reads no other), a window of 4 and a relative
# extent of 6 that prefills of 7 and 11 pass, a head of 90 rows beside an embedding of 100
SHRUNK = dict(vocab_size=100, unpadded_vocab_size=90, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
              head_dim=16, swa_num_attention_heads=4, swa_num_key_value_heads=2, swa_head_dim=16,
              sliding_window_size=4, d_rel=4, rel_extent=6, moe_intermediate_size=32, n_routed_experts=4,
              num_experts_per_tok=2, eos_token_id=None)
SLIDING, FULL = "hybrid_sliding", "hybrid"
VARIANTS = {
    # the class's rule (every sixth layer full), two blocks of six layers
    "the release's layout": dict(num_hidden_layers=12),
    "full layers between, blocks of two": dict(num_hidden_layers=6, n_layers_per_attn_res_block=2,
                                               layer_types=[SLIDING, FULL, SLIDING, SLIDING, FULL, FULL]),
    "a full layer first, a block a layer": dict(num_hidden_layers=4, n_layers_per_attn_res_block=1,
                                                layer_types=[FULL, SLIDING] * 2, unpadded_vocab_size=100),
    # the swa_* keys unused: no layer slides
    "no sliding layer": dict(num_hidden_layers=3, n_layers_per_attn_res_block=3, layer_types=[FULL] * 3,
                             swa_num_attention_heads=8, swa_head_dim=8),
}


LOOP = dict(num_hidden_layers=8, n_layers_per_attn_res_block=2, layer_types=[SLIDING, FULL] * 4)
LOOP_VARIANTS = {
    # layers 2 to 5 run three times: two blocks, the gates and message queries run in two passes of the three
    "a loop of two blocks, three passes": dict(**LOOP, loop_layer_index_start=2, loop_layer_index_end=6,
                                               loop_num_passes=3, loop_gate_rank=8),
    # one pass: the gates and queries built, never run
    "a loop of one block, one pass": dict(**LOOP, loop_layer_index_start=4, loop_layer_index_end=6,
                                          loop_num_passes=1, loop_gate_rank=4),
    # loop_config wins over the flat keys (Inkling2LoopTextConfig.__post_init__); every layer full, a coda of none
    "a loop by loop_config, no sliding layer": dict(
        num_hidden_layers=8, n_layers_per_attn_res_block=4, layer_types=[FULL] * 8, loop_layer_index_start=2,
        loop_layer_index_end=6, loop_num_passes=3, loop_gate_rank=8,
        loop_config={"core_start": 4, "core_end": 8, "num_passes": 2, "gate_rank": 4}),
}
ALL = sorted(VARIANTS) + sorted(LOOP_VARIANTS)


def _config(variant: str, **over):
    if variant in LOOP_VARIANTS:
        return AutoConfig.for_model("inkling2_loop_text", **{**SHRUNK, **LOOP_VARIANTS[variant], **over})
    return AutoConfig.for_model("inkling2_text", **{**SHRUNK, **VARIANTS[variant], **over})


def _runs(config, layer: int) -> int:
    """How many times a stored layer runs: an Inkling 2 Loop's looped layers once a pass."""
    start, end = getattr(config, "loop_layer_index_start", 0), getattr(config, "loop_layer_index_end", 0)
    return config.loop_num_passes if start <= layer < end else 1


def _cache_layers(config) -> list[int]:
    """The stored layer of each of HF's cache layers: every layer, then each later pass's copies of the looped
    ones (Inkling2LoopTextModel appends them)."""
    n = config.num_hidden_layers
    if not hasattr(config, "loop_num_passes"):
        return list(range(n))
    start, end = config.loop_layer_index_start, config.loop_layer_index_end
    return list(range(n)) + list(range(start, end)) * (config.loop_num_passes - 1)


def _named(m) -> str:
    """A module's class without the family's prefix (Inkling2Loop's modules are Inkling 2's, renamed)."""
    return type(m).__name__.removeprefix("Inkling2Loop").removeprefix("Inkling2")


def _spec(config) -> ModelSpec:
    return spec_of_config(config, "inkling2")


_model = meta_model


def _convs(model) -> tuple[list, list]:
    """HF's short convs as (layer, channels, kernel): the static ones (ShortConvolution: the sliding layers' K and V,
    every sublayer's output) and the global layers' dynamic ones (DynamicShortConvolution)."""
    static = [(m.layer_idx, m.conv1d.weight.shape[0], m.conv1d.weight.shape[2]) for m in model.modules()
              if _named(m) == "ShortConvolution"]
    dynamic = [(m.layer_idx, m.static_weight.shape[1], m.static_weight.shape[0]) for m in model.modules()
               if _named(m) == "DynamicShortConvolution"]
    return static, dynamic


def _unseen(model, tokens: int, outputs: int) -> int:
    """FLOPs FlopCounterMode's count and archcalc's differ by, from HF's own conv modules: a static conv runs
    F.conv1d over more outputs than the step keeps (a prefill of T tokens, left-padded by the cache to kernel inputs
    where T is fewer (DynamicCache.update_conv_state), then by kernel − 1 on both sides (causal_conv1d_fn):
    max(T, kernel) − T + kernel − 1 more; a decode step convolves its state of kernel inputs and the new one: 1
    more), 2·channels·kernel FLOPs each,
    which HF counts and archcalc does not; a dynamic conv's taps are applied elementwise ((windows · weights).sum),
    which FlopCounterMode does not see and archcalc counts as the conv it is, 2·channels·kernel a token.  Each
    as many times as its layer runs."""
    static, dynamic = _convs(model)
    return sum(2 * c * k * outputs * _runs(model.config, i) for i, c, k in static) - \
        sum(2 * c * k * tokens * _runs(model.config, i) for i, c, k in dynamic)


@pytest.mark.parametrize("tokens", [1, 3, 7, 11])
@pytest.mark.parametrize("variant", ALL)
def test_params_and_prefill_flops_equal_hf(variant, tokens):
    """numel() is archcalc's parameter total; FlopCounterMode's prefill is archcalc's torch-convention forward
    but for the convs (_unseen).  The attention residuals (Inkling2BlockAttentionResidual, an eager attention of
    its queries over the normed sources) are matmuls FlopCounterMode counts: their sources, three queries on the
    global layers and none on layer 0's attention input are pinned here."""
    config = _config(variant)
    spec, model = _spec(config), _model(config)
    ours = size(spec, Workload.forward(tokens), CONVENTIONS["torch"])
    assert ours.params.total == sum(p.numel() for p in model.parameters())
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=torch.zeros(1, tokens, dtype=torch.long, device="meta"), use_cache=True)
    kernel = config.conv_kernel_size
    assert ours.flops.forward + _unseen(model, tokens, max(tokens, kernel) - tokens + kernel - 1) == \
        counter.get_total_flops()


def _decode(config, tokens: int) -> tuple[int, int, int]:
    """(archcalc's decode FLOPs at tokens + 1 under the torch convention, FlopCounterMode's of HF's step after a
    prefill of `tokens` less the convs' difference (_unseen), and the sliding cores' FLOPs for the keys past HF's
    cache: past the window HF's sliding layers hold window − 1 tokens, while the torch convention does not cap
    windows (ops/conventions.py), 2 · H · (d_k + d_v) FLOPs a key more)."""
    spec, model = _spec(config), _model(config)
    held, step = held_and_step_flops(model, tokens)
    attention = [model.model.layers[i].self_attn for i in _cache_layers(config)]  # a cache layer each run
    uncapped = sum(2 * a.num_heads * 2 * a.head_dim * (tokens - n)
                   for a, n in zip(attention, held, strict=True) if a.sliding_window is not None)
    ours = size(spec, Workload.decode(tokens + 1), CONVENTIONS["torch"]).flops.forward
    return ours, step - _unseen(model, 1, 1), uncapped


@pytest.mark.parametrize("tokens", [1, 3])
@pytest.mark.parametrize("variant", ALL)
def test_decode_step_flops_equal_hf(variant, tokens):
    """A token after a prefill of `tokens` through the cache the prefill returned, inside the window (3 + 1 of 4):
    the convs run on their states, the relative logits over the extent, the attention residuals over the same
    sources as in a prefill; exact but for the convs (_unseen)."""
    ours, hf, uncapped = _decode(_config(variant), tokens)
    assert uncapped == 0 and ours == hf


def test_decode_past_the_window():
    """A token after 9, past the window of 4: HF's sliding layers read their window − 1 cached tokens and the new
    one; archcalc's torch count is HF's but for the sliding keys it does not cap (_decode)."""
    ours, hf, uncapped = _decode(_config("the release's layout"), 9)
    assert uncapped > 0 and ours - uncapped == hf


@pytest.mark.parametrize("tokens", [3, 9])
@pytest.mark.parametrize("variant", ALL)
def test_cache_equals_hf_layer_by_layer(variant, tokens):
    """HF's DynamicCache after a prefill: each layer's K and V (min(tokens, window − 1) tokens on a sliding layer)
    are archcalc's KV per token of its kind; and each layer's four conv states (K's, V's, and the two sublayer
    outputs') are kernel inputs in fp32 (HF convolves x.float() and keeps the last kernel inputs), where archcalc
    counts the kernel − 1 a step needs at the cache's dtype, as an engine keeps a conv state.  Both from HF's own
    conv modules, layer by layer."""
    config = _config(variant)
    spec, model = _spec(config), _model(config)
    with torch.no_grad():
        cache = model(input_ids=torch.zeros(1, tokens, dtype=torch.long, device="meta"), use_cache=True).cache
    ours = size(spec, Workload(new_tokens=tokens, context=tokens), CONVENTIONS["torch"]).kv
    window = config.sliding_window_size
    per_token = {k.kind: k.bytes_per_token / k.layers for k in ours.by_kind if k.kind in ("global", "local")}
    stored = _cache_layers(config)
    for layer, kind in zip(cache.layers, [config.layer_types[i] for i in stored], strict=True):
        held = tokens if kind == FULL else min(tokens, window - 1)
        assert layer.keys.shape[-2] == layer.values.shape[-2] == held
        assert (layer.keys.numel() + layer.values.numel()) * layer.keys.element_size() == held * per_token[
            "global" if kind == FULL else "local"]
    static, dynamic = _convs(model)
    by_layer = {}
    for i, c, k in static + dynamic:
        by_layer.setdefault(i, []).append((c, k))
    assert [sum(s.numel() * s.element_size() for s in layer.conv_states.values()) for layer in cache.layers] == \
        [sum(c * k * 4 for c, k in by_layer[i]) for i in stored]
    assert all(len(convs) == 4 for convs in by_layer.values())
    states = [k for k in ours.by_kind if k.kind == "linear"]
    assert sum(k.layers for k in states) == len(stored)
    assert sum(k.state_bytes for k in states) == sum(c * (k - 1) * DTYPE.itemsize * _runs(config, i)
                                                     for i, c, k in static + dynamic)


def test_the_config_class_s_defaults_at_full_size():
    """A config of its model_type alone reads as Inkling2TextConfig builds it (Inkling-2-Small's shapes: 48 layers
    of 4,608, every sixth full, 384 experts of 2,304, top 8, blocks of 6 layers); numel() of the model transformers
    builds is archcalc's total, 593,718,478,848."""
    config = AutoConfig.for_model("inkling2_text")
    spec = _spec(config)
    assert spec_dict_from_config({"model_type": "inkling2_text"}, "config.json")[0] == \
        spec_dict_from_config(json.loads(config.to_json_string()), "config.json")[0]
    params = size(spec, Workload.forward(1), CONVENTIONS["torch"]).params
    assert params.total == sum(p.numel() for p in _model(config).parameters())
    assert (spec.n_layers, spec.residual.blocks, spec.layer_attention.count("global")) == (48, 8, 8)
    # a release note's "594B model (about 17B active)" (tests/data/hf/SOURCES.md): active without the embedding
    # and the head, which are bf16 tables beside the layers
    head = spec.d_model * spec.head_vocab
    assert (round(params.total / 1e9), round((params.active - params.embedding - head) / 1e9)) == (594, 17)


def test_the_multimodal_config_reads_its_text_config():
    """Inkling2Config (model_type inkling2) nests the text model in text_config beside a vision tower: the text
    model is read, the tower named in a warning and left out of every total."""
    outer = AutoConfig.for_model("inkling2", text_config={**SHRUNK, **VARIANTS["the release's layout"]},
                                 vision_config={"text_hidden_size": 64})
    data, report = spec_dict_from_config(json.loads(outer.to_json_string()), "config.json")
    text = json.loads(_config("the release's layout").to_json_string())
    assert data == spec_dict_from_config(text, "config.json")[0] and data["architecture"] == "inkling2_text"
    assert any("vision" in w for w in report.warnings)


@pytest.mark.parametrize("over, key", [
    (dict(swa_num_attention_heads=8), "swa_num_attention_heads"),  # the sliding layers' own heads
    (dict(swa_head_dim=8), "swa_head_dim"),
    (dict(n_layers_per_attn_res_block=5), "n_layers_per_attn_res_block"),  # blocks of unequal size
    (dict(layer_types=[SLIDING] * 11), "layer_types"),
])
def test_what_archcalc_does_not_model_is_refused_in_one_line(over, key):
    raw = {**json.loads(_config("the release's layout").to_json_string()), **over}
    with pytest.raises(InputError) as e:
        spec_dict_from_config(raw, "config.json")
    assert e.value.field.endswith(key) and "\n" not in str(e.value)


@pytest.mark.parametrize("over", [dict(loop_layer_index_start=3), dict(loop_layer_index_end=7),
                                  dict(loop_layer_index_start=0), dict(loop_config={"core_start": 6, "core_end": 4})])
def test_a_loop_of_part_blocks_is_refused_in_one_line(over):
    """Looped layers that are not whole attention-residual blocks after the first (transformers' own rule), or that
    run backwards: one line naming the key."""
    raw = {**json.loads(_config("a loop of two blocks, three passes").to_json_string()), "loop_config": None, **over}
    with pytest.raises(InputError) as e:
        spec_dict_from_config(raw, "config.json")
    assert e.value.field == "loop_layer_index_start" and "whole attention-residual blocks" in str(e.value)


def test_the_loop_config_class_s_defaults_at_full_size():
    """A config of inkling2_loop_text alone reads as Inkling2LoopTextConfig builds it (Inkling-2-Mini's shapes: 24
    layers of 2,304, layers 6 to 17 run three times, 128 experts of 1,152, gates of rank 64): 48 layer runs, and
    numel() of the model transformers builds is archcalc's total."""
    config = AutoConfig.for_model("inkling2_loop_text")
    spec = _spec(config)
    assert spec_dict_from_config({"model_type": "inkling2_loop_text"}, "config.json")[0] == \
        spec_dict_from_config(json.loads(config.to_json_string()), "config.json")[0]
    assert (spec.n_layers, spec.loop.stored_layers, spec.loop.passes, spec.residual.blocks) == (48, 24, 3, 4)
    assert size(spec, Workload.forward(1), CONVENTIONS["torch"]).params.total == \
        sum(p.numel() for p in _model(config).parameters())


@pytest.mark.parametrize("part", [{"attention": {"n_heads": 4, "n_kv_heads": 2, "sink_proj": True}},
                                  {"attention": {"n_heads": 4, "n_kv_heads": 2, "qk_norm": "clip"}},
                                  {"residual": {"kind": "attnres", "blocks": 2, "attnres_form": "inkling2"}}])
def test_train_and_the_reference_model_refuse_inkling2_s_parts(part, tmp_path):
    """Each of Inkling 2's parts that needs no Inkling part alone (a debug model given it): train refuses it in one
    line, as the torch reference model, which would keep other tensors for backward, has none of them; size takes
    it."""
    from click.testing import CliRunner

    from archcalc.cli import cli
    from archcalc.measure.reference import ReferenceModel
    from tests.conftest import debug_spec

    spec = debug_spec(**part)
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec.model_dump(exclude_defaults=True)))
    r = CliRunner().invoke(cli, ["train", str(path), "--gpu", "h100", "--gpus", "8"])
    assert r.exit_code == 2 and "(Inkling 2)" in r.output and len(r.output.strip().splitlines()) == 1, r.output
    with pytest.raises(ValueError, match=r"\(Inkling 2\)"):
        ReferenceModel(spec)
    assert CliRunner().invoke(cli, ["size", str(path)]).exit_code == 0


@pytest.mark.parametrize("variant", ALL)
def test_the_attention_residuals_peak_is_their_largest_module_s(variant):
    """The attention residuals are one op each over all their modules (count 1), each module seeing its own
    sources; an activation peak holds one module's at once: the most sources any module normalises, as HF's own
    forward stacks them (Inkling2BlockAttentionResidual's normed block states, (B, T, sources, D)), read and
    written by the key norm, read by the logits."""
    config = _config(variant)
    spec, model = _spec(config), _model(config)
    stacked = []
    for m in model.modules():
        if _named(m) == "BlockAttentionResidual":
            m.norm.register_forward_hook(lambda mod, args, out: stacked.append(args[0].numel()))
    with torch.no_grad():
        model(input_ids=torch.zeros(1, 5, dtype=torch.long, device="meta"))
    from archcalc.ops.layers import model_ops

    ops = {op.name: op for op in model_ops(spec, Workload.forward(5), CONVENTIONS["torch"])}
    assert ops["attnres.key_norm"].peak_act_bytes == 2 * max(stacked) * DTYPE.itemsize
    assert ops["attnres.logits"].peak_act_bytes == max(stacked) * DTYPE.itemsize
    assert ops["attnres.key_norm"].act_bytes == 2 * sum(stacked) * DTYPE.itemsize  # all of them, for the roofline


@pytest.mark.parametrize("variant", ALL)
def test_weight_bytes_are_hf_s_but_for_its_fp32_router(variant):
    """A bf16 checkpoint's bytes: HF's parameters at the dtypes it builds them in (its _keep_in_fp32_modules_strict:
    the attention residuals' queries, the static convs' taps, the router), but for the router, which archcalc counts
    at the checkpoint's dtype as every router (README): 2 bytes a router weight more in HF.  The dynamic convs'
    static taps are not kept in fp32, and are not counted so."""
    from archcalc.cost.totals import weight_bytes

    config = _config(variant)
    spec, model = _spec(config), _model(config)
    routers = sum(m.weight.numel() for m in model.modules() if _named(m) == "TopKRouter")
    hf = sum(p.numel() * p.element_size() for p in model.parameters())
    assert weight_bytes(size(spec, Workload.forward(1), CONVENTIONS["torch"]).ops, "bf16") == hf - 2 * routers


@settings(max_examples=40, deadline=None)
@given(passes=st.integers(1, 5), start=st.sampled_from([2, 4]), blocks=st.integers(1, 2), tokens=st.integers(1, 40))
def test_more_passes_run_more_and_store_nothing_more(passes, start, blocks, tokens):
    """An Inkling 2 Loop read with one pass more: the same parameters (the loop's layers, gates and queries are
    stored once), more FLOPs, and each looped layer's K/V and conv states once more (a cache of its own a pass)."""
    def read(p: int) -> ModelSpec:
        raw = {**SHRUNK, **LOOP, "model_type": "inkling2_loop_text", "loop_layer_index_start": start,
               "loop_layer_index_end": start + 2 * blocks, "loop_num_passes": p, "loop_gate_rank": 4}
        return ModelSpec.model_validate({"name": "loop", **spec_dict_from_config(raw, "config.json")[0]})

    one, more = (size(read(p), Workload.forward(tokens), CONVENTIONS["torch"]) for p in (passes, passes + 1))
    assert more.params.total == one.params.total and more.flops.forward > one.flops.forward
    looped = 2 * blocks  # layers, half of them sliding (LOOP's layer_types alternate)
    assert more.kv.bytes_per_token - one.kv.bytes_per_token == \
        looped * (one.kv.bytes_per_token / read(passes).n_layers)
    states = [sum(k.state_bytes for k in r.kv.by_kind if k.kind == "linear") for r in (one, more)]
    assert states[1] - states[0] == looped * states[0] / read(passes).n_layers
