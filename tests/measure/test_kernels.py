"""The kernels --measure runs exist for every row function the op list can name."""

from __future__ import annotations

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
