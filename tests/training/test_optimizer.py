"""Parameter tensors and optimizer state (training/tensors.py) against torch:
the reference model's parameters' shapes on the meta device, and the state
torch.optim keeps after one real step on the CPU."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from conftest import REFERENCE_BUNDLED, debug_spec, spec_of
from specgen import random_spec, shrink

from archcalc.measure.reference import build_reference_model
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec
from archcalc.training.tensors import is_hidden_matrix, op_tensors, state_values

WL = Workload.forward(1)


def our_shapes(spec: ModelSpec) -> Counter:
    return Counter(shape for op in model_ops(spec, WL) for shape in op_tensors(op) for _ in range(op.count))


def torch_shapes(model) -> Counter:
    return Counter(tuple(p.shape) for p in model.parameters())


@pytest.mark.parametrize("name", REFERENCE_BUNDLED)
def test_bundled_tensor_shapes_equal_torch(name):
    spec = spec_of(name)
    assert our_shapes(spec) == torch_shapes(build_reference_model(spec, "meta"))


@pytest.mark.parametrize("seed", range(60))
def test_random_spec_tensor_shapes_equal_torch(seed):
    spec = random_spec(seed)
    assert our_shapes(spec) == torch_shapes(build_reference_model(spec, "meta"))


def torch_state_bytes(model, optimizer: str) -> int:
    """Bytes of optimizer state after one step, less the 0-d `step` counters torch keeps on the CPU."""
    params = list(model.parameters())
    if optimizer == "muon":  # Muon on the layers' linear weights, AdamW on the rest (Keller Jordan's recipe)
        hidden = {id(m.weight) for name, m in model.named_modules()
                  if isinstance(m, torch.nn.Linear) and name.startswith("layers.")}
        opts = [torch.optim.Muon([p for p in params if id(p) in hidden]),
                torch.optim.AdamW([p for p in params if id(p) not in hidden])]
    else:
        make = {"adamw": lambda: torch.optim.AdamW(params), "adafactor": lambda: torch.optim.Adafactor(params),
                "sgd": lambda: torch.optim.SGD(params, lr=0.1, momentum=0.9)}[optimizer]
        opts = [make()]
    for p in params:
        p.grad = torch.randn_like(p)
    for opt in opts:
        opt.step()
    return sum(v.numel() * v.element_size() for opt in opts for state in opt.state.values()
               for key, v in state.items() if torch.is_tensor(v) and key != "step")


def our_state_values(spec: ModelSpec, optimizer: str) -> int:
    return sum(op.count * sum(state_values(op, shape, optimizer) for shape in op_tensors(op))
               for op in model_ops(spec, WL))


@pytest.mark.parametrize("optimizer", ["adamw", "sgd", "adafactor", "muon"])
@pytest.mark.parametrize("name", ["debug", "llama-3.2-1b", "qwen3-30b-a3b", "deepseek-v2-lite", "gpt2", "gemma-2-9b"])
def test_state_bytes_equal_torch_optim(name, optimizer):
    spec = shrink(spec_of(name)) if name != "debug" else debug_spec()
    torch.manual_seed(0)
    model = build_reference_model(spec, "cpu")
    assert our_state_values(spec, optimizer) * 4 == torch_state_bytes(model, optimizer)


@pytest.mark.parametrize("optimizer", ["adamw", "adafactor", "muon"])
@pytest.mark.parametrize("seed", [1, 3, 8, 21])  # hyper-connections, MLA, MoE, attention residuals among them
def test_random_spec_state_bytes_equal_torch_optim(seed, optimizer):
    spec = random_spec(seed)
    torch.manual_seed(seed)
    assert our_state_values(spec, optimizer) * 4 == torch_state_bytes(build_reference_model(spec, "cpu"), optimizer)


def test_state_bytes_follow_the_parameter_dtype():
    """bf16 parameters stepped directly keep bf16 states: the states are the stepped weights' dtype
    (archcalc keeps fp32 master weights, so fp32 states)."""
    spec = debug_spec()
    torch.manual_seed(0)
    model = build_reference_model(spec, "cpu", torch.bfloat16)
    assert our_state_values(spec, "adamw") * 2 == torch_state_bytes(model, "adamw")


def test_muon_takes_only_hidden_matrices():
    ops = model_ops(debug_spec(), WL)
    embedding = next(op for op in ops if op.name == "embedding")
    qkv = next(op for op in ops if op.name == "layers.attn.qkv")
    assert not is_hidden_matrix(embedding, op_tensors(embedding)[0]) and is_hidden_matrix(qkv, op_tensors(qkv)[0])
