"""Attention SDPA has no option for (Gemma 2's soft-caps) runs, under the "sdpa" convention the calibrated
rates use, as transformers' own eager_attention_forward: its kernels, bytes and FLOPs here are pinned to
that function run under torch's dispatcher (every aten op that is not a view is a kernel; the distinct
elements of its tensors in and out are its traffic) and FlopCounterMode."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode
from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward

from archcalc.ops import op as ops
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload

ALIASES = {"aten._unsafe_view.default"}  # not marked a view, yet returns one (matmul's reshape of its result)


def distinct_bytes(x: torch.Tensor) -> int:
    """Bytes of a tensor's distinct elements: a broadcast (stride-0) dimension repeats, not adds, memory."""
    elements = 1
    for size, stride in zip(x.shape, x.stride()):
        elements *= size if stride else 1
    return elements * x.element_size()


class Kernels(TorchDispatchMode):
    """The aten ops a function runs that launch a kernel, with the bytes of their tensors in and out."""

    def __init__(self):
        super().__init__()
        self.ops: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view and str(func) not in ALIASES:
            tensors = [x for x in tree_leaves((args, kwargs, out)) if isinstance(x, torch.Tensor)]
            self.ops.append((str(func), sum(distinct_bytes(x) for x in tensors)))
        return out


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("heads, kv_heads", [(4, 2), (4, 4)])  # GQA (Gemma-2-9B: 16 / 8) and MHA
@pytest.mark.parametrize("batch, new_tokens, keys", [(2, 6, 6), (3, 1, 9)])  # a prefill, a decode step
def test_eager_attention_is_transformers_eager_path(dtype, heads, kv_heads, batch, new_tokens, keys):
    d = 8
    wl = Workload(batch=batch, new_tokens=new_tokens, context=keys, weight_dtype=dtype, act_dtype=dtype,
                  kv_dtype=dtype)
    op = ops.attention("attn", wl, CONVENTIONS["sdpa"], n_heads=heads, kv_heads=kv_heads, qk_dim=d, v_dim=d,
                       kv_width=2 * kv_heads * d, window=None, layer_kind="global", softcap=True, eager=True)
    tdtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    q = torch.randn(batch, heads, new_tokens, d, dtype=tdtype)
    k, v = (torch.randn(batch, kv_heads, keys, d, dtype=tdtype) for _ in range(2))
    mask = torch.zeros(batch, 1, new_tokens, keys, dtype=tdtype)
    module = SimpleNamespace(num_key_value_groups=heads // kv_heads, head_dim=d, training=False)
    with Kernels() as run:
        eager_attention_forward(module, q, k, v, mask, scaling=d**-0.5, softcap=50.0)
    with FlopCounterMode(display=False) as flops:
        eager_attention_forward(module, q, k, v, mask, scaling=d**-0.5, softcap=50.0)
    assert op.dims.eager_kernels == len(run.ops)
    appended = op.dims.batch * new_tokens * op.dims.kv_width * tdtype.itemsize  # the cache's write, done before
    assert op.act_bytes + op.kv_bytes - appended == sum(b for _, b in run.ops)
    assert op.flops == flops.get_total_flops()


def test_sdpa_runs_where_it_has_the_option_and_other_conventions_never_go_eager():
    """No soft-cap: one SDPA kernel.  The causal convention (peak, typical) counts FlashAttention's work
    whatever the spec, as engines run soft-caps inside their fused kernels."""
    wl = Workload(batch=1, new_tokens=16, context=16)
    kw = dict(n_heads=4, kv_heads=2, qk_dim=8, v_dim=8, kv_width=32, window=None, layer_kind="global")
    assert ops.attention("a", wl, CONVENTIONS["sdpa"], **kw).dims.eager_kernels == 0
    assert ops.attention("a", wl, CONVENTIONS["causal"], softcap=True, eager=True, **kw).dims.eager_kernels == 0


@pytest.mark.parametrize("new_tokens, context", [(6, 6), (1, 9)])
def test_measure_runs_the_kernels_the_op_counts(new_tokens, context):
    """`--measure` times the eager path as the op counts it: the same kernels, launched one by one."""
    from archcalc.measure.kernels import kernel

    wl = Workload(batch=2, new_tokens=new_tokens, context=context)
    op = ops.attention("attn", wl, CONVENTIONS["sdpa"], n_heads=4, kv_heads=2, qk_dim=8, v_dim=8, kv_width=32,
                       window=None, layer_kind="global", softcap=True, eager=True)
    k = kernel(op, torch.device("cpu"), torch.bfloat16)
    with Kernels() as run:
        k.run(0)
    assert len(run.ops) == op.dims.eager_kernels
