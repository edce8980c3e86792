"""Shared by the tests that build transformers' own models from a config class: the spec archcalc reads from the
config transformers writes, and the model on the meta device."""

from __future__ import annotations

import json

import torch
from transformers import AutoModelForCausalLM

from archcalc.spec.hf import spec_dict_from_config
from archcalc.spec.model import ModelSpec

DTYPE = torch.bfloat16  # HF builds and caches in bf16; archcalc's Workload default kv_dtype is bf16 too


def spec_of_config(config, name: str) -> ModelSpec:
    """The spec of the config.json transformers writes for `config`, read without a warning."""
    data, report = spec_dict_from_config(json.loads(config.to_json_string()), "config.json")
    assert report.warnings == []
    return ModelSpec.model_validate({"name": name, **data})


def meta_model(config) -> torch.nn.Module:
    """transformers' causal LM of `config` on the meta device, in bf16, eager attention, its experts batched."""
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, attn_implementation="eager",
                                                experts_implementation="batched_mm", dtype=DTYPE).eval()


def held_and_step_flops(model: torch.nn.Module, tokens: int) -> tuple[list[int], int]:
    """A prefill of `tokens` through the cache the model's own forward returns, then one token more: the tokens
    each cache layer held before the step, and FlopCounterMode's FLOPs of the step."""
    from torch.utils.flop_counter import FlopCounterMode

    ids = torch.zeros(1, tokens, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).cache
        held = [layer.keys.shape[-2] for layer in cache.layers]
        with FlopCounterMode(display=False) as counter:
            model(input_ids=ids[:, :1], cache=cache, use_cache=True)
    return held, counter.get_total_flops()
