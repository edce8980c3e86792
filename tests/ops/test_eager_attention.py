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


@pytest.mark.parametrize("softcap", [50.0, None])  # Gemma 2's; none: the eager path every HF model shares
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("heads, kv_heads", [(4, 2), (4, 4)])  # GQA (Gemma-2-9B: 16 / 8) and MHA
# prefills of 6 and 2 tokens, a decode step
@pytest.mark.parametrize("batch, new_tokens, keys", [(2, 6, 6), (1, 2, 2), (3, 1, 9)])
def test_eager_attention_is_transformers_eager_path(softcap, dtype, heads, kv_heads, batch, new_tokens, keys):
    d = 8
    wl = Workload(batch=batch, new_tokens=new_tokens, context=keys, weight_dtype=dtype, act_dtype=dtype,
                  kv_dtype=dtype)
    op = ops.attention("attn", wl, CONVENTIONS["sdpa"], n_heads=heads, kv_heads=kv_heads, qk_dim=d, v_dim=d,
                       kv_width=2 * kv_heads * d, window=None, layer_kind="global", softcap=softcap is not None,
                       eager=True)
    tdtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    q = torch.randn(batch, heads, new_tokens, d, dtype=tdtype)
    k, v = (torch.randn(batch, kv_heads, keys, d, dtype=tdtype) for _ in range(2))
    mask = torch.zeros(batch, 1, new_tokens, keys, dtype=tdtype)
    module = SimpleNamespace(num_key_value_groups=heads // kv_heads, head_dim=d, training=False)
    with Kernels() as run:
        eager_attention_forward(module, q, k, v, mask, scaling=d**-0.5, softcap=softcap)
    with FlopCounterMode(display=False) as flops:
        eager_attention_forward(module, q, k, v, mask, scaling=d**-0.5, softcap=softcap)
    assert op.dims.eager_kernels == len(run.ops)
    appended = op.dims.batch * new_tokens * op.dims.kv_width * tdtype.itemsize  # the cache's write, done before
    assert op.act_bytes + op.kv_bytes - appended == sum(b for _, b in run.ops)
    assert op.flops == flops.get_total_flops()


@pytest.mark.parametrize("softcap", [True, False])
def test_eager_and_sdpa_count_the_same_vector_work_for_the_same_scores(softcap):
    """A decode step's query sees every key whichever kernel runs: softmax (and the soft-cap's three
    elementwise steps) cost the same FLOPs per score eagerly as in SDPA."""
    wl = Workload(batch=2, new_tokens=1, context=40)
    kw = dict(n_heads=4, kv_heads=2, qk_dim=8, v_dim=8, kv_width=32, window=None, layer_kind="global",
              softcap=softcap)
    eager = ops.attention("a", wl, CONVENTIONS["sdpa"], eager=True, **kw)
    fused = ops.attention("a", wl, CONVENTIONS["sdpa"], **kw)
    assert eager.dims.eager_kernels and not fused.dims.eager_kernels
    assert eager.vector_flops == fused.vector_flops == 2 * 4 * 40 * (5 + 3 * softcap)


def test_the_host_counts_eager_attention_as_the_one_call_it_replaces():
    """dispatch_s is an eager Llama's host time per modelled kernel, its module's Python included: Gemma 2's
    eager attention is one function call, like SDPA's, so the host's time is the same either way while its
    kernels (and their launches) are not."""
    from dataclasses import replace

    from conftest import spec_of, synthetic_calibration

    from archcalc.cost.rates import calibrated_rates
    from archcalc.cost.roofline import host_time
    from archcalc.hardware.profile import local_profile
    from archcalc.ops.layers import model_ops

    cal = synthetic_calibration(launch=1e-6, dispatch_s=2e-5, step_host_s=1e-3)
    rates = calibrated_rates(local_profile(cal), cal)
    spec, wl = spec_of("gemma-2-9b"), Workload.decode(100, 1)
    eager = model_ops(spec, wl, CONVENTIONS["sdpa"])
    fused = model_ops(spec, wl, replace(CONVENTIONS["sdpa"], eager_fallback=False))
    assert sum(o.count * rates.kernels(o) for o in eager) > sum(o.count * rates.kernels(o) for o in fused)
    assert host_time(eager, rates) == host_time(fused, rates)


def test_sdpa_runs_where_it_has_the_option_and_other_conventions_never_go_eager():
    """No soft-cap: one SDPA kernel.  The causal convention (peak, typical) counts FlashAttention's work
    whatever the spec, as engines run soft-caps inside their fused kernels."""
    wl = Workload(batch=1, new_tokens=16, context=16)
    kw = dict(n_heads=4, kv_heads=2, qk_dim=8, v_dim=8, kv_width=32, window=None, layer_kind="global")
    assert ops.attention("a", wl, CONVENTIONS["sdpa"], **kw).dims.eager_kernels == 0
    assert ops.attention("a", wl, CONVENTIONS["causal"], softcap=True, eager=True, **kw).dims.eager_kernels == 0


@pytest.mark.parametrize("softcap", [True, False])
@pytest.mark.parametrize("new_tokens, context", [(6, 6), (1, 9)])
def test_measure_runs_the_kernels_the_op_counts(new_tokens, context, softcap):
    """`--measure` times the eager path as the op counts it: the same kernels, launched one by one."""
    from archcalc.measure.kernels import kernel

    wl = Workload(batch=2, new_tokens=new_tokens, context=context)
    op = ops.attention("attn", wl, CONVENTIONS["sdpa"], n_heads=4, kv_heads=2, qk_dim=8, v_dim=8, kv_width=32,
                       window=None, layer_kind="global", softcap=softcap, eager=True)
    k = kernel(op, torch.device("cpu"), torch.bfloat16)
    with Kernels() as run:
        k.run(0)
    assert len(run.ops) == op.dims.eager_kernels


def test_roofline_reports_gemma_2s_eager_attention_under_the_calibrated_rates():
    """`roofline gemma-2-9b --gpu h200` (the shipped H200 calibration): the calibrated column's attention is
    the eager path's whole 1024 × 1024 rectangle per layer (16 heads of 256, 21 global layers: Q Kᵀ and
    P V, softmax and soft-cap per score), the peak column's the causal half FlashAttention computes."""
    import json

    from click.testing import CliRunner

    from archcalc.cli import cli

    r = CliRunner().invoke(cli, ["roofline", "gemma-2-9b", "--gpu", "h200", "--prompt", "1024", "--json"])
    assert r.exit_code == 0, r.output
    by_label = {p["rates"]["label"]: p["prefill"] for p in json.loads(r.stdout)["predictions"]}
    attention = {label: next(o for o in step["ops"] if o["name"] == "layers.attn.core.global")
                 for label, step in by_label.items()}
    rectangle = 1024 * 1024 * 16
    assert attention["calibrated"]["flops"] == 21 * rectangle * (2 * (256 + 256) + 5 + 3)
    causal = (rectangle + 1024 * 16) // 2  # T(T + 1)/2 pairs per head
    assert attention["peak"]["flops"] == 21 * causal * (2 * (256 + 256) + 5 + 3)
    assert 0 < by_label["calibrated"]["mfu"] < by_label["peak"]["mfu"] <= 1


def test_sinks_weights_are_read_by_the_eager_path_too():
    """A sink logit per query head (gpt-oss) is a weight the step reads whatever kernel runs."""
    wl = Workload(batch=1, new_tokens=8, context=8)
    a = ops.attention("a", wl, CONVENTIONS["sdpa"], n_heads=4, kv_heads=2, qk_dim=8, v_dim=8, kv_width=32,
                      window=None, layer_kind="global", softcap=True, eager=True, params=4)
    assert a.dims.eager_kernels and a.weight_bytes == 4 * 2  # four bf16 sink logits
