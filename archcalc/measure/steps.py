"""`--measure`: run every op of a step as a real kernel on the local device.

The ops are exactly the ones the prediction times (cost.roofline.step_ops,
under the "sdpa" convention the kernels run), each built from its own dims
by measure/kernels.py and timed by measure/timing.py; an op's measured time
is one execution × its count.  Kernels are built one at a time and freed, so
the device only ever holds one op's inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from archcalc.cost.roofline import step_ops
from archcalc.measure.calibrate import TORCH_DTYPES, choose_dtype, device_name
from archcalc.measure.kernels import kernel
from archcalc.measure.timing import busy_note, resolve_device, time_call
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec

MEASURE_CONVENTION = "sdpa"


@dataclass(frozen=True)
class MeasuredOp:
    name: str
    count: int
    seconds: float | None  # all `count` executions; None: no kernel (collectives)
    note: str = ""


@dataclass(frozen=True)
class MeasuredStep:
    phase: str  # prefill / decode
    workload: Workload
    device: str
    dtype: str
    ops: tuple[MeasuredOp, ...]

    @property
    def time(self) -> float:
        return sum(o.seconds for o in self.ops if o.seconds is not None)

    def by_name(self) -> dict[str, MeasuredOp]:
        return {o.name: o for o in self.ops}


@dataclass(frozen=True)
class Session:
    """The device and dtype measurements run in, chosen once."""

    device: torch.device
    dtype: str
    notes: tuple[str, ...]

    @property
    def name(self) -> str:
        return device_name(self.device)


def session(device: str = "auto", dtype: str = "bf16") -> Session:
    dev = resolve_device(device)
    busy = busy_note(dev)  # before our own work raises the load
    chosen, notes = choose_dtype(dtype, dev)
    return Session(dev, chosen, tuple(notes) + (busy,) * bool(busy))


def measure_step(spec: ModelSpec, wl: Workload, phase: str, s: Session, repeats: int = 5) -> MeasuredStep:
    tdtype = TORCH_DTYPES[s.dtype]
    measured = []
    for op in step_ops(spec, wl, MEASURE_CONVENTION):
        k = kernel(op, s.device, tdtype)
        if k is None:
            measured.append(MeasuredOp(op.name, op.count, None, "no kernel: collectives need several devices"))
            continue
        per_call = time_call(k.run, s.device, repeats=repeats, rotate=k.rotate)
        measured.append(MeasuredOp(op.name, op.count, per_call * op.count, k.note))
        del k
    return MeasuredStep(phase, wl, s.name, s.dtype, tuple(measured))
