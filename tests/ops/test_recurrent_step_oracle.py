"""Mamba-2's recurrent decode step (T = 1) against the function transformers runs for it,
`mamba2_selective_state_update`, called on real tensors of 2 sequences: its readout's FLOPs by
torch's FlopCounterMode, its elementwise work by the aten ops TorchDispatchMode sees."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode
from transformers.models.mamba2.modeling_mamba2 import mamba2_selective_state_update

from archcalc.ops import op as ops
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload

ARITHMETIC = {"mul", "add", "sub", "div", "exp"}  # the aten ops that compute (casts and copies move only)


class Elementwise(TorchDispatchMode):
    """Output elements of every arithmetic aten op, by the op's output shape."""

    def __init__(self):
        super().__init__()
        self.by_shape: dict[tuple, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.__name__.split(".")[0] in ARITHMETIC:
            shape = tuple(out.shape)
            self.by_shape[shape] = self.by_shape.get(shape, 0) + out.numel()
        return out


def test_mamba2_decode_step_equals_transformers_selective_state_update():
    b, heads, p, n, groups = 2, 3, 4, 5, 1
    g = torch.Generator().manual_seed(0)
    # the shapes Mamba2Mixer.torch_forward hands over in its recurrent branch
    state = torch.randn(b, heads, p, n, generator=g)
    x = torch.randn(b, heads, p, generator=g)
    dt = torch.randn(b, heads, 1, generator=g).expand(-1, -1, p)
    a = -torch.rand(heads, generator=g)[:, None, None].expand(-1, p, n)
    bc = [torch.randn(b, groups, n, generator=g) for _ in range(2)]
    d = torch.randn(heads, generator=g)[:, None].expand(-1, p)
    dt_bias = torch.randn(heads, generator=g)[:, None].expand(-1, p)
    counted, flops = Elementwise(), FlopCounterMode(display=False)
    with flops, counted:
        mamba2_selective_state_update(state, x, dt, a, *bc, d, z=None, dt_bias=dt_bias, dt_softplus=True)

    op = ops.state_space_duality("core", Workload.decode(9, b), CONVENTIONS["torch"], n_heads=heads, head_dim=p,
                                 d_state=n, chunk=4, conv_values=0)
    assert op.flops == flops.get_total_flops() == 2 * b * heads * p * n  # the readout S·C, a bmm
    # per state value: dt·A, exp, dt·B, ·x, S·dA, + dBx; per channel the skip x·D and its add.  dt's
    # bias add (per channel here, per head in the chunked form) and softplus archcalc leaves out.
    per_state = counted.by_shape[(b, heads, p, n)]
    per_channel = counted.by_shape[(b, heads, p)] - b * heads * p  # less dt + dt_bias
    assert per_state == 6 * b * heads * p * n
    assert op.vector_flops == per_state + per_channel
