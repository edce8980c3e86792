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
