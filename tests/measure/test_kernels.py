"""The kernels --measure runs exist for every row function the op list can name."""

from __future__ import annotations

import pytest
import torch

from archcalc.measure.kernels import ACTIVATIONS, kernel
from archcalc.ops import op as ops
from archcalc.ops.workload import Workload


def test_every_row_function_runs_its_own_kernel():
    """ops.ROW_FNS names what a row op computes; each activation among them (gated or not) has a torch
    kernel, so none falls through to the sum or copy that "add" runs."""
    assert ops.ROW_FNS - {"rope", "softcap", "add"} <= set(ACTIVATIONS)
    wl = Workload(batch=4)
    for fn in sorted(ops.ROW_FNS):
        for inputs in (1, 2):
            k = kernel(ops.elementwise("k", "ffn", wl, 64, 1, inputs=inputs, fn=fn), torch.device("cpu"),
                       torch.float32)
            out = k.run(0)
            assert tuple(out.shape) == (4, 64) and torch.isfinite(out).all()


def test_a_weighted_sum_runs_as_a_matmul_of_its_macs():
    """A contraction (a depthwise conv's taps, a hyper-connection mix) runs as [m, macs] @ [macs, 1]:
    Mamba-130M's conv over 1,536 channels of 4 taps, 3 tokens, is a [3, 6,144] · [6,144] product, the
    FLOPs the op counts as torch's FlopCounterMode counts the kernel."""
    from torch.utils.flop_counter import FlopCounterMode

    op = ops.contraction("conv", "linear", Workload(batch=3), 1536 * 4, 2 * 1536, tp="split")
    k = kernel(op, torch.device("cpu"), torch.float32)
    with FlopCounterMode(display=False) as counter:
        out = k.run(0)
    assert [tuple(o.shape) for o in out] == [(3, 1)]
    assert counter.get_total_flops() == op.flops == 2 * 3 * 6144


@pytest.mark.parametrize("q_len, kv_len, window", [(1, 64, 16), (2, 64, 16), (8, 64, 16), (2, 2, 1), (16, 16, 16),
                                                   (2, 16, 16)])
def test_sdpa_flops_are_what_the_kernel_runs(q_len, kv_len, window):
    """The sdpa convention counts what torch's scaled_dot_product_attention runs: a window is a mask
    over the whole T × S rectangle once the step has two queries or more, and a decode query reads
    only its window's keys. FlopCounterMode's count of the kernel --measure runs for the op (4 heads
    over 2 K/V heads of 8) equals the op's FLOPs. The mask is there from S = window on (transformers'
    masking_utils._ignore_causal_mask_sdpa: "kv_length >= local_attention_size" keeps it), so a prefill
    of exactly the window runs the whole rectangle too. (Without a window the fused kernel skips
    the blocks above the diagonal, which the math backend counted here computes: not compared.)"""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    op = ops.sdpa_call("sdpa", batch=1, q_len=q_len, kv_len=kv_len, heads=4, kv_heads=2, head_dim=8, window=window)
    k = kernel(op, torch.device("cpu"), torch.float32)
    # the math backend: the fused CPU kernel is not among FlopCounterMode's registered formulas, and
    # the math one runs the same Q·Kᵀ and P·V products (masked, not skipped) as matmuls it counts
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        k.run(0)
    assert counter.get_total_flops() == op.flops
