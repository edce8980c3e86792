"""The parameter tensors behind each op, and the optimizer state each one carries.

Optimizers keep state per tensor, not per parameter: Adafactor factors a
matrix's second moment into a row and a column vector, Muon takes only
matrices, FSDP pads each tensor's first dim to a multiple of the ranks.  An
op's tensors follow from its dims (a matmul: one [out, in] weight per fused
part, as nn.Linear stores it, and its biases; a norm: weight and bias; a
gather: its table), or from Op.shapes where the dims cannot say them (QKV,
whose parts may be biased one by one; residual-stream mixing).

State bytes, as torch.optim keeps them after the first step, in the dtype of
the parameters it steps (fp32 master weights under mixed precision):
  adamw: exp_avg and exp_avg_sq, 2 values per parameter;
  sgd: the momentum buffer, 1 (momentum > 0, as every LLM recipe sets);
  adafactor: torch.optim.Adafactor (no first moment): a [..., r, c] tensor keeps
      row_var [..., r, 1] and col_var [..., 1, c]; a vector keeps its variance;
  muon: torch.optim.Muon on the 2-D weights of the layers' projections (its
      momentum, 1), AdamW on everything else (embeddings, lm_head, norms,
      biases, residual-stream mixing), as Keller Jordan's recipe prescribes
      ("hidden weight layers" only).
Not counted: Adam/Adafactor's `step`, a 0-d fp32 counter per tensor that torch
keeps on the CPU unless fused or capturable.
"""

from __future__ import annotations

from math import prod
from typing import Literal

from archcalc.ops.op import MatmulDims, Op

Optimizer = Literal["adamw", "sgd", "adafactor", "muon"]
OPTIMIZERS: tuple[Optimizer, ...] = ("adamw", "sgd", "adafactor", "muon")
Shape = tuple[int, ...]


def op_tensors(op: Op) -> list[Shape]:
    """One execution's parameter tensors (the op's `params`, tensor by tensor)."""
    if op.shapes:
        return list(op.shapes)
    if not op.params:
        return []
    d = op.dims
    if op.kind == "matmul" and isinstance(d, MatmulDims):
        parts = d.parts or (d.n,)
        experts = d.experts or 1
        biases = [(p,) for p in parts] if op.bias_params else []  # all parts or none (QKV says its own)
        return ([(p, d.k) for p in parts] + biases) * experts
    if op.kind == "norm":  # weight and bias, either possibly absent
        return [(d.width,)] * (op.params // d.width)
    if op.kind == "gather":
        return [(d.rows, d.width)]
    return [(op.params,)]  # attention sinks (one logit per head), mHC's three scales


def is_hidden_matrix(op: Op, shape: Shape) -> bool:
    """What Muon steps: the 2-D weight of a projection inside the layers (attention, FFN, experts,
    router); not the embedding, the head, or residual-stream mixing (hyper-connections, mHC)."""
    return len(shape) == 2 and op.name.startswith("layers.") and op.component != "residual"


def state_values(op: Op, shape: Shape, optimizer: Optimizer) -> int:
    """Values of optimizer state one tensor of `shape` keeps."""
    n = prod(shape)
    if optimizer == "sgd" or (optimizer == "muon" and is_hidden_matrix(op, shape)):
        return n
    if optimizer == "adafactor":
        if len(shape) < 2:
            return n
        *lead, rows, cols = shape
        return prod(lead) * (rows + cols)
    return 2 * n  # adamw, and muon's AdamW part
