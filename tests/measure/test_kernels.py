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
