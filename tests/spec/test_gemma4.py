"""Gemma 4 (gemma4_text, and gemma4's text_config) at its released shapes, pinned on transformers'
Gemma4ForCausalLM built on the meta device.  No config.json was read from the Hub: the shapes are the
ones several independent loaders quote from google/gemma-4-E2B, -E4B and -31B (see SHAPES), and each is
counted against what transformers builds from it, so a wrong quote would change the model, not the
agreement.  The shrunken layouts (every switch on and off) are NO_FIXTURE entries in test_hf_oracle.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from torch.utils.flop_counter import FlopCounterMode
from transformers import AutoConfig, AutoModelForCausalLM

from archcalc.cli import cli
from archcalc.cost.totals import size
from archcalc.errors import InputError
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.spec.hf import spec_dict_from_config
from archcalc.spec.model import ModelSpec

DTYPE = torch.bfloat16
SLIDING, FULL = "sliding_attention", "full_attention"
# google/gemma-4-E2B, -E4B and -31B's text_config as quoted alike by the loaders of several unrelated
# projects (Rust, Swift, Zig and JAX ports' test fixtures, found through code search)
SHAPES = {
    "e2b": {"hidden_size": 1536, "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 1,
            "head_dim": 256, "global_head_dim": 512, "intermediate_size": 6144, "num_kv_shared_layers": 20,
            "use_double_wide_mlp": True, "hidden_size_per_layer_input": 256, "sliding_window": 512,
            "final_logit_softcapping": 30.0, "layer_types": ([SLIDING] * 4 + [FULL]) * 7},
    "e4b": {"hidden_size": 2560, "num_hidden_layers": 42, "num_attention_heads": 8, "num_key_value_heads": 2,
            "head_dim": 256, "global_head_dim": 512, "intermediate_size": 10240, "num_kv_shared_layers": 18,
            "hidden_size_per_layer_input": 256, "sliding_window": 512, "final_logit_softcapping": 30.0,
            "layer_types": ([SLIDING] * 5 + [FULL]) * 7},
    "31b": {"hidden_size": 5376, "num_hidden_layers": 60, "num_attention_heads": 32, "num_key_value_heads": 16,
            "num_global_key_value_heads": 4, "head_dim": 256, "global_head_dim": 512, "intermediate_size": 21504,
            "attention_k_eq_v": True, "hidden_size_per_layer_input": 0, "sliding_window": 1024,
            "max_position_embeddings": 262144, "final_logit_softcapping": 30.0,
            "layer_types": ([SLIDING] * 5 + [FULL]) * 10},
    # 26B A4B: 128 experts of 704, top 8, beside every layer's 2,112-wide MLP
    "26b-a4b": {"hidden_size": 2816, "num_hidden_layers": 30, "num_attention_heads": 16, "num_key_value_heads": 8,
                "num_global_key_value_heads": 2, "head_dim": 256, "global_head_dim": 512, "intermediate_size": 2112,
                "enable_moe_block": True, "num_experts": 128, "top_k_experts": 8, "moe_intermediate_size": 704,
                "attention_k_eq_v": True, "hidden_size_per_layer_input": 0, "sliding_window": 1024,
                "max_position_embeddings": 262144, "final_logit_softcapping": 30.0,
                "layer_types": ([SLIDING] * 5 + [FULL]) * 5},
}


def _read(cfg: dict) -> ModelSpec:
    data, report = spec_dict_from_config(cfg, "config.json")
    assert not report.warnings, report.warnings
    return ModelSpec.model_validate({"name": "gemma4", **data})


def _built(name: str):
    config = AutoConfig.for_model("gemma4_text", **SHAPES[name])
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=DTYPE,
                                                 experts_implementation="batched_mm")  # meta cannot run the loop
    return json.loads(config.to_json_string()), model


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_released_shapes_count_what_transformers_builds(name):
    """Parameters = numel of Gemma4ForCausalLM at full size; the forward's FLOPs = FlopCounterMode's;
    the cache per token = what its DynamicCache holds (no entry for the layers that reuse K/V)."""
    raw, model = _built(name)
    spec = _read(raw)
    tokens = 4
    ours = size(spec, Workload.forward(tokens), CONVENTIONS["torch"])
    assert ours.params.total == sum(p.numel() for p in model.parameters())
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        out = model(input_ids=torch.zeros(1, tokens, dtype=torch.long, device="meta"), use_cache=True)
    assert ours.flops.forward == counter.get_total_flops()
    held = [layer for layer in out.cache.layers if getattr(layer, "keys", None) is not None]
    assert len(held) == spec.n_layers - spec.attention.kv_shared_layers
    per_token = sum((layer.keys[0, :, 0].numel() + layer.values[0, :, 0].numel()) * layer.keys.element_size()
                    for layer in held)
    assert per_token == ours.kv.bytes_per_token
    assert sum(k.layers for k in ours.kv.by_kind) == len(held)  # the shared layers have no row of cache


def test_e2b_without_its_per_layer_table_is_the_published_effective_size():
    """Google calls E2B "2.3B effective, 5.1B with embeddings": the per-layer embedding table (262,144 ×
    35·256) is what "effective" leaves out; archcalc reports it apart (params.per_layer_table) and, a lookup
    like the token embedding, leaves it out of non_embedding.  The text model is 4.63B; 5.1B counts the vision and audio towers
    too, which archcalc does not model."""
    raw, model = _built("e2b")
    ours = size(_read(raw), Workload.forward(1), CONVENTIONS["torch"]).params
    table = model.model.embed_tokens_per_layer.weight.numel()
    assert table == 262144 * 35 * 256
    assert ours.per_layer_table == table and round((ours.total - table) / 1e9, 1) == 2.3
    assert ours.by_component["per_layer"] > table  # with the projection, norms and each layer's gate
    assert ours.non_embedding == ours.total - table - 262144 * 1536  # lookups both: not in 6N's N


def test_31b_is_31b():
    assert round(size(_read(_built("31b")[0]), Workload.forward(1), CONVENTIONS["torch"]).params.total / 1e9) == 31


def test_26b_a4b_is_26b_with_3_8b_active():
    """Google's "26B A4B": 3.8B parameters active per token (8 of 128 experts, beside each layer's MLP),
    as archcalc counts them; 25.2B in the language model (26B with the vision tower, not modelled)."""
    params = size(_read(_built("26b-a4b")[0]), Workload.forward(1), CONVENTIONS["torch"]).params
    assert round(params.active / 1e9, 1) == 3.8 and round(params.total / 1e9, 1) == 25.2


# The released files found (tests/data/hf/SOURCES.md): built, like every fixture, as the Gemma4ForCausalLM
# of their text_config (test_hf_oracle.TEXT_CONFIG_ONLY)
FIXTURES = {"26b-a4b": "gemma-4-26b-a4b", "31b": "gemma-4-31b-it"}


def _fixture(name: str):
    raw = json.loads((Path(__file__).parents[1] / "data" / "hf" / f"{name}.json").read_text())
    config = AutoConfig.for_model("gemma4_text", **{k: v for k, v in raw["text_config"].items() if k != "model_type"})
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager", dtype=DTYPE,
                                                 experts_implementation="batched_mm")
    return raw, model


@pytest.mark.parametrize("shape, name", sorted(FIXTURES.items()))
def test_the_released_files_are_the_shapes_tested_here(shape, name):
    """google/gemma-4-26B-A4B's and -31B-it's config.json read to the spec of the shapes above (the
    multimodal wrapper's towers aside), so every test on the shapes holds for the released files."""
    raw, _ = _fixture(name)
    data, report = spec_dict_from_config(raw, f"{name}.json")
    assert [w for w in report.warnings if "vision tower" not in w] == []
    assert ModelSpec.model_validate({"name": "gemma4", **data}) == _read(_hub(shape))


@pytest.mark.parametrize("name", ["e2b", *FIXTURES.values()])
def test_rope_rotates_what_hf_rotates(monkeypatch, name):
    """The values RoPE rotates per token: Gemma4's apply_rotary_pos_emb(x, cos, sin) receives the queries
    of every layer and the keys of the layers that compute them; its proportional RoPE on global layers
    rotates the whole head (the dims past partial_rotary_factor at frequency 0), as archcalc counts it."""
    import transformers.models.gemma4.modeling_gemma4 as modeling

    raw, model = _built(name) if name in SHAPES else _fixture(name)
    seen = []
    original = modeling.apply_rotary_pos_emb
    monkeypatch.setattr(modeling, "apply_rotary_pos_emb",
                        lambda x, *a, **k: seen.append(x.numel()) or original(x, *a, **k))
    tokens = 3
    with torch.no_grad():
        model(input_ids=torch.zeros(1, tokens, dtype=torch.long, device="meta"), use_cache=True)
    ops = model_ops(_read(raw.get("text_config", raw)), Workload.forward(tokens))
    ours = sum(op.dims.width * op.count for op in ops if op.name.startswith("layers.attn.rope"))
    assert ours == sum(seen) // tokens > 0


def test_the_multimodal_config_reads_its_text_config_and_says_what_it_leaves_out():
    """gemma4's config.json nests the language model in text_config beside vision and audio towers that
    archcalc does not model: the same spec as the text_config alone, and a warning for each tower."""
    raw = _built("e2b")[0]
    outer = {"model_type": "gemma4", "text_config": raw, "vision_config": {"model_type": "gemma4_vision"},
             "audio_config": {"model_type": "gemma4_audio"}}
    data, report = spec_dict_from_config(outer, "config.json")
    assert {k: v for k, v in data.items() if k != "architecture"} == \
        {k: v for k, v in spec_dict_from_config(raw, "config.json")[0].items() if k != "architecture"}
    assert sum("vision tower" in w for w in report.warnings) == 1
    assert sum("audio tower" in w for w in report.warnings) == 1


def _hub(name: str) -> dict:
    """The config.json as the Hub's gives the global layers' geometry: global_head_dim and, with
    attention_k_eq_v, num_global_key_value_heads (transformers 5 writes per_layer_config instead)."""
    raw = {k: v for k, v in _built(name)[0].items() if k != "per_layer_config"}
    shape = SHAPES[name]
    return {**raw, **{k: shape[k] for k in ("global_head_dim", "num_global_key_value_heads") if k in shape}}


def test_global_geometry_from_global_head_dim_or_per_layer_config():
    """A Hub config.json gives global_head_dim (and num_global_key_value_heads); transformers 5 writes
    per_layer_config instead, which it reads in their place: both read to the same spec, and a file
    whose two disagree is refused."""
    raw = _built("31b")[0]
    assert raw["per_layer_config"]["05"] == {"head_dim": 512, "num_key_value_heads": 4}  # keys as transformers writes them
    assert _read(_hub("31b")) == _read(raw)
    spec = _read(raw)
    assert (spec.attention.global_head_dim, spec.attention.global_kv_heads, spec.attention.global_k_eq_v) == \
        (512, 4, True)
    with pytest.raises(InputError, match="global_head_dim: disagrees with per_layer_config"):
        spec_dict_from_config({**raw, "global_head_dim": 256}, "config.json")
    with pytest.raises(InputError, match="num_global_key_value_heads: disagrees with per_layer_config"):
        spec_dict_from_config({**raw, "num_global_key_value_heads": 8}, "config.json")
    both = {**raw, "global_head_dim": 512, "num_global_key_value_heads": 4}  # agreeing: the same spec
    assert _read(both) == spec


@pytest.mark.parametrize("change, message", [
    ({"per_layer_config": {"0": {"head_dim": 512}}}, "per_layer_config: supported: the same head_dim"),
    ({"per_layer_config": {"5": {"head_dim": 512, "sliding_window": 8}}}, "per_layer_config.5: expected"),
    ({"per_layer_config": {"5": {"head_dim": "512"}}}, "per_layer_config.5.head_dim: '512' is not valid"),
    ({"layer_types": [FULL] * 59 + [SLIDING]}, "layer_types: the last layer must be full_attention"),
    ({"enable_moe_block": True}, "num_experts"),
    ({"enable_moe_block": True, "num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32,
      "num_kv_shared_layers": 6, "use_double_wide_mlp": True}, "kv_shared_d_ff needs every layer to have a dense FFN"),
    ({"num_kv_shared_layers": "20"}, "num_kv_shared_layers: '20' is not valid"),
    ({"num_kv_shared_layers": 3, "layer_types": [SLIDING] * 57 + [FULL] * 3}, "no layer before layer 57 is global"),
    ({"num_kv_shared_layers": 60}, "leaves no layer of the 60"),
    ({"rope_parameters": {"full_attention": {"rope_type": "proportional", "factor": 8.0}}},
     "proportional RoPE with a factor other than 1"),
])
def test_bad_gemma4_configs_are_one_line(tmp_path, change, message):
    """Each is one line naming the file and the field, exit status 2, no traceback."""
    raw = {**_hub("31b"), **change}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    r = CliRunner().invoke(cli, ["size", str(path)])
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1


def test_what_gemma4_is_not_modelled_in_says_so(tmp_path):
    """archcalc's reference torch model has no Gemma 4 layers (transformers' modules pin them instead),
    and a pipeline split would cut the per-layer table and the K/V sharing apart: both refuse, the CLI
    with one line and exit status 2."""
    from archcalc.measure.reference import build_reference_model

    raw = _hub("e2b")
    with pytest.raises(ValueError, match="Gemma 4"):
        build_reference_model(_read(raw))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    r = CliRunner().invoke(cli, ["fit", str(path), "--gpu", "l4", "--pp", "2"])
    assert r.exit_code == 2 and "not split into stages" in r.output and len(r.output.strip().splitlines()) == 1


def test_fit_caches_only_the_layers_that_compute_k_and_v(tmp_path):
    """The plain engine (a generate() call) caches what transformers' DynamicCache holds per token: the 15
    layers of E2B that compute K and V, none of the 20 that reuse them (vLLM and llama.cpp likewise
    allocate no cache for a layer that reads another's)."""
    from archcalc import api

    raw, model = _built("e2b")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    plan = api.fit(str(path), "h100", engine="plain", context=8).plan
    assert sum(k.layers for k in plan.kv) == 15
    with torch.no_grad():
        out = model(input_ids=torch.zeros(1, 8, dtype=torch.long, device="meta"), use_cache=True)
    held = [layer for layer in out.cache.layers if getattr(layer, "keys", None) is not None]
    assert plan.kv_bytes == sum((layer.keys.numel() + layer.values.numel()) * layer.keys.element_size() for layer in held)


def test_one_residual_add_per_sublayer_and_per_layer_input():
    """A Gemma 4 layer with per-layer embeddings adds to its residual stream three times (attention, MLP,
    the per-layer gate): the aten adds of two [1, T, D] tensors into one in transformers' forward are
    archcalc's residual adds (no other add in Gemma 4 is that shape: norms add eps to [1, T, 1], RoPE
    works on [1, T, heads, d], the per-layer inputs on [1, T, L, width])."""
    from torch.utils._python_dispatch import TorchDispatchMode

    raw, model = _built("e2b")
    tokens, D = 3, SHAPES["e2b"]["hidden_size"]
    stream = (1, tokens, D)

    class Adds(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten.add.Tensor and tuple(out.shape) == stream and all(
                    isinstance(a, torch.Tensor) and tuple(a.shape) == stream for a in args[:2]):
                Adds.n += 1
            return out

    with torch.no_grad(), Adds():
        model(input_ids=torch.zeros(1, tokens, dtype=torch.long, device="meta"), use_cache=True)
    (add,) = [op for op in model_ops(_read(raw), Workload.forward(tokens)) if op.name == "layers.residual.add"]
    assert add.count == Adds.n == 3 * SHAPES["e2b"]["num_hidden_layers"]


def test_a_decode_step_reads_and_writes_the_cache_as_transformers_does(monkeypatch):
    """One decode step through transformers' own cache: every attention layer reads the K and V it
    attends to (eager_attention_forward's key and value, the shared layers' taken from their producer),
    and only the layers that compute K and V write the new token (the cache layers' update).  Their bytes
    are the KV bytes of archcalc's decode step (kv_bytes over its attention ops)."""
    import transformers.cache_utils as cache_utils
    import transformers.models.gemma4.modeling_gemma4 as modeling

    raw, model = _built("e2b")
    prompt = 5
    with torch.no_grad():
        cache = model(input_ids=torch.zeros(1, prompt, dtype=torch.long, device="meta"), use_cache=True).cache
    moved = []
    attend = modeling.eager_attention_forward

    def reading(module, query, key, value, *args, **kwargs):
        moved.append((key.numel() + value.numel()) * key.element_size())
        return attend(module, query, key, value, *args, **kwargs)

    monkeypatch.setattr(modeling, "eager_attention_forward", reading)
    for layer in (cache_utils.DynamicLayer, cache_utils.DynamicSlidingWindowLayer):
        def writing(self, keys, values, *args, _update=layer.update, **kwargs):
            moved.append((keys.numel() + values.numel()) * keys.element_size())
            return _update(self, keys, values, *args, **kwargs)
        monkeypatch.setattr(layer, "update", writing)
    with torch.no_grad():
        model(input_ids=torch.zeros(1, 1, dtype=torch.long, device="meta"), cache=cache, use_cache=True)
    ops = model_ops(_read(raw), Workload.decode(prompt + 1))
    assert sum(op.kv_bytes * op.count for op in ops if op.kind == "attention") == sum(moved) > 0
