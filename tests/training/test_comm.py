"""The collectives of a training step (training/comm.py) against what torch's
own data- and tensor-parallel code issues, on torch's fake process group
(any world size in one process, no data moved): FSDP2's fully_shard, DTensor
tensor parallelism, DDP.  A dispatch mode records each collective's tensors."""

from __future__ import annotations

from collections import defaultdict

import pytest
import torch
import torch.distributed as dist
from conftest import debug_spec, spec_of
from specgen import shrink
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass_type

from archcalc.measure.reference import build_reference_model
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.training.comm import step_comms
from archcalc.training.layout import Layout, Recipe

BATCH, TOKENS = 2, 8
# Collective ops as they reach the dispatcher: FSDP2 calls c10d directly, DTensor the functional ops.
PATTERNS = {"_allgather_base_": "all_gather", "all_gather_into_tensor": "all_gather",
            "_reduce_scatter_base_": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
            "allreduce_": "all_reduce", "all_reduce": "all_reduce"}


class Collectives(TorchDispatchMode):
    """(pattern, phase) -> [count, elements of the whole tensor, bytes per element] of every collective.
    The whole tensor: an all-gather's output, a reduce-scatter's input, an all-reduce's tensor."""

    def __init__(self):
        super().__init__()
        self.seen = defaultdict(lambda: [0, 0, 0])
        self.phase = "forward"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if any(is_traceable_wrapper_subclass_type(t) for t in types):
            return NotImplemented  # DTensor desugars first; its inner collectives come back here
        out = func(*args, **kwargs)
        name = func._schema.name.split("::")[-1]
        if func.namespace in ("c10d", "_c10d_functional") and name in PATTERNS:
            pattern = PATTERNS[name]
            whole = {"all_gather": args[0] if func.namespace == "c10d" else out,
                     "reduce_scatter": args[1] if func.namespace == "c10d" else args[0],
                     "all_reduce": args[0][0] if func.namespace == "c10d" else args[0]}[pattern]
            entry = self.seen[(pattern, self.phase)]
            entry[0] += 1
            entry[1] += whole.numel()
            entry[2] = whole.element_size()
        return out


@pytest.fixture
def world():
    def start(size: int):
        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=size)
    yield start
    if dist.is_initialized():
        dist.destroy_process_group()


def step(model, spec, record: Collectives) -> None:
    """One forward and backward of random tokens.  (torch's CommDebugMode counts collectives but keeps
    no sizes, and its module tracker fails on the reference model's residual, which calls its units
    as functools.partial objects; the recorder above sees the same c10d and functional ops.)"""
    torch.manual_seed(0)
    ids = torch.randint(0, spec.vocab_size, (BATCH, TOKENS))
    with record:
        loss = model(ids).float().square().mean()
        record.phase = "backward"
        loss.backward()


def predicted(spec, layout: Layout, recipe: Recipe, **kw) -> dict:
    wl = Workload.forward(TOKENS, BATCH, weight_dtype=recipe.weight_dtype, act_dtype=recipe.act_dtype)
    out = defaultdict(lambda: [0, 0, 0])
    for c in step_comms(spec, wl, model_ops(spec, wl), layout, recipe, **kw):
        if c.group != "tp" or c.op.name.startswith("layers."):  # the test parallelizes only the layers
            d = c.op.dims
            entry = out[(d.pattern, c.phase)]
            entry[0] += c.op.count
            entry[1] += c.op.count * d.m * d.width
            entry[2] = c.op.act_bytes / (2 * d.m * d.width) if d.pattern == "all_reduce" else \
                c.op.act_bytes / (d.m * d.width * (1 + 1 / d.ranks))
    return {k: [v[0], v[1], round(v[2])] for k, v in out.items()}


# No MoE here: the fake group moves no data, so a gathered router routes arbitrarily, and an expert with no
# tokens has no gradient for FSDP2 to reduce.
@pytest.mark.parametrize("name", ["debug", "llama-3.2-1b", "gpt2", "gemma-2-9b", "phi-3-mini-4k"])
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("mixed", [False, True])
def test_fsdp2_gathers_and_reduce_scatters(world, name, ranks, mixed):
    """ZeRO 3 = FSDP2's default schedule: each layer all-gathered before its forward and again before its
    backward, the root (embedding, final norm, head) once; every group's gradients reduce-scattered;
    each tensor padded to a multiple of the ranks on dim 0; bf16 gathers and fp32 reductions when mixed."""
    spec = debug_spec() if name == "debug" else shrink(spec_of(name))
    world(ranks)
    model = build_reference_model(spec, "cpu")
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed else None
    for layer in model.layers:  # one group per layer: its two units are what the residual calls
        fully_shard([layer.attn, layer.mlp], **({"mp_policy": mp} if mp else {}))
    fully_shard(model, **({"mp_policy": mp} if mp else {}))
    record = Collectives()
    step(model, spec, record)
    assert [n for n, p in model.named_parameters() if p.grad is None] == []  # else FSDP2 leaves it out
    recipe = Recipe(seq=TOKENS, global_batch=BATCH * ranks, precision="bf16-mixed" if mixed else "fp32")
    ours = predicted(spec, Layout(dp=ranks, zero=3, micro_batch=BATCH), recipe)
    assert ours == {k: v for k, v in record.seen.items()}


@pytest.mark.parametrize("name", ["debug", "llama-3.2-1b", "gpt2", "qwen3-8b"])
@pytest.mark.parametrize("tp", [2, 4])
def test_dtensor_tensor_parallel_all_reduces(world, name, tp):
    """Megatron-style TP with torch's DTensor: column-parallel q, k, v, gate, up; row-parallel o, down.
    Forward: one all-reduce of [B·T, D] after each row-parallel linear; backward: one per column-parallel
    linear's input gradient (five per gated layer: DTensor runs q, k, v, gate, up as separate linears)."""
    spec = debug_spec() if name == "debug" else shrink(spec_of(name))
    if spec.attention.n_heads % tp or spec.n_kv_heads % tp:
        spec = spec.model_validate({**spec.model_dump(exclude_defaults=True),
                                    "attention": {**spec.attention.model_dump(exclude_defaults=True),
                                                  "n_heads": 4, "n_kv_heads": 4}})
    world(tp)
    mesh = init_device_mesh("cpu", (tp,))
    model = build_reference_model(spec, "cpu")
    plan = {"attn.inner.q_proj": ColwiseParallel(), "attn.inner.k_proj": ColwiseParallel(),
            "attn.inner.v_proj": ColwiseParallel(), "attn.inner.o_proj": RowwiseParallel(),
            "mlp.inner.up_proj": ColwiseParallel(), "mlp.inner.down_proj": RowwiseParallel()}
    if spec.ffn.gated:
        plan["mlp.inner.gate_proj"] = ColwiseParallel()
    for layer in model.layers:
        parallelize_module(layer, mesh, plan)
        layer.attn.inner.n_heads //= tp  # each rank runs its heads
        layer.attn.inner.n_kv_heads //= tp
    record = Collectives()
    step(model, spec, record)
    recipe = Recipe(seq=TOKENS, global_batch=BATCH, precision="fp32")
    ours = predicted(spec, Layout(tp=tp, zero=0, micro_batch=BATCH, sequence_parallel=False), recipe, fused=False)
    assert ours == {k: v for k, v in record.seen.items()}


def test_ddp_all_reduces_every_gradient_once(world):
    """ZeRO 0 = DDP: the gradients all-reduced once per step (one 25 MiB bucket here).  DDP's built-in
    hook fails on the fake group (its futures hold None), so a hook issues the same all-reduce."""
    from torch.nn.parallel import DistributedDataParallel

    spec = debug_spec()
    world(4)
    ddp = DistributedDataParallel(build_reference_model(spec, "cpu"))

    def hook(state, bucket):
        dist.all_reduce(bucket.buffer())
        done = torch.futures.Future()
        done.set_result(bucket.buffer())
        return done

    ddp.register_comm_hook(None, hook)
    ddp.module.spec = spec
    record = Collectives()
    step(ddp, spec, record)
    ours = predicted(spec, Layout(dp=4, zero=0, micro_batch=BATCH), Recipe(seq=TOKENS, global_batch=4 * BATCH,
                                                                          precision="fp32"))
    assert ours == {k: v for k, v in record.seen.items()}
