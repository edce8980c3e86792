"""Calibrations: what `archcalc calibrate` measured on a device, and where it is kept.

A calibration is every measured point, not a summary: matmul times over a
grid of shapes (the efficiency curve), attention (SDPA) times for prefill and
decode shapes, copy and read-only bandwidth, the cost of a tiny kernel (the
launch overhead) and norm / activation kernels.  cost/rates.py turns it into
a rate set; nothing here imports torch.

Files are YAML (schema archcalc.calibration/1), kept per user in
platformdirs' data directory (`calibrations/<device>.yaml`), or wherever
--out says; ARCHCALC_CALIBRATION_DIR overrides the directory.  Writes are
atomic: a temporary file renamed into place, so nothing is ever half-written.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from archcalc.errors import InputError
from archcalc.files import read_yaml, validation_error, write_atomic
from archcalc.hardware.bounds import MAX_FLOPS, BufferBytes, BytesPerS, Dim, KernelS, LatencyS, Slowdown, Text, Units

SCHEMA = "archcalc.calibration/1"
DIR_ENV = "ARCHCALC_CALIBRATION_DIR"


class _Frozen(BaseModel):
    # strict: a string or a bool where a number belongs is an error (ints pass for floats); ranges: bounds.py
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class DeviceInfo(_Frozen):
    name: Text  # torch's device name (cuda) or the CPU model name
    kind: Literal["cpu", "cuda", "mps"]
    torch: str  # torch.__version__
    threads: Units  # torch.get_num_threads() (CPU math threads)
    date: str  # ISO 8601, UTC
    host: str | None = None  # platform.platform()


class MatmulPoint(_Frozen):
    """y[m, n] = x[m, k] @ W[k, n]: the median seconds of one call."""

    m: Dim
    k: Dim
    n: Dim
    seconds: KernelS

    @model_validator(mode="after")
    def _a_rate_a_device_can_reach(self):
        rate = 2 * self.m * self.k * self.n / self.seconds
        if rate > MAX_FLOPS:
            raise ValueError(f"seconds: {self.seconds:g} s for {self.m}x{self.k}x{self.n} is {rate:.3g} FLOP/s, "
                             f"above any device ({MAX_FLOPS:.0e}); give the time of one call in seconds")
        return self


class GroupedPoint(_Frozen):
    """One grouped GEMM (torch's grouped_mm, as MoE experts run): `groups` experts, each
    y[m, n] = x[m, k] @ W[k, n] over its own m rows; the median seconds of one call."""

    groups: Dim
    m: Dim
    k: Dim
    n: Dim
    seconds: KernelS

    @model_validator(mode="after")
    def _a_rate_a_device_can_reach(self):
        rate = 2 * self.groups * self.m * self.k * self.n / self.seconds
        if rate > MAX_FLOPS:
            raise ValueError(f"seconds: {self.seconds:g} s for {self.groups} x {self.m}x{self.k}x{self.n} is "
                             f"{rate:.3g} FLOP/s, above any device ({MAX_FLOPS:.0e}); give the time of one call in seconds")
        return self


class AttentionPoint(_Frozen):
    """One scaled_dot_product_attention call: B sequences, H query heads over K
    KV heads of head_dim, q_len new queries over kv_len keys; causal, or an
    explicit sliding-window mask (`window`)."""

    batch: Dim
    heads: Dim
    kv_heads: Dim
    head_dim: Dim
    q_len: Dim
    kv_len: Dim
    window: Dim | None = None
    seconds: KernelS


class RowPoint(_Frozen):
    """A row-wise kernel over [rows, width]: a norm, an activation, an add, a gather."""

    kind: Literal["rmsnorm", "layernorm", "activation", "gated_activation", "add", "gather", "rope"]
    rows: Dim
    width: Dim
    seconds: KernelS


class Bandwidth(_Frozen):
    copy_bytes_per_s: BytesPerS  # counting bytes read + written (STREAM copy)
    read_bytes_per_s: BytesPerS  # a read-only reduction over a large buffer
    buffer_bytes: BufferBytes  # size of the buffer measured (well above the last-level cache)


class Calibration(_Frozen):
    schema_: Literal["archcalc.calibration/1"] = Field(SCHEMA, alias="schema")
    device: DeviceInfo
    profile: str | None = None  # the bundled profile it calibrates (matched by name), if any
    dtype: Literal["fp32", "bf16", "fp16"]  # the math and storage dtype every kernel ran in
    notes: list[str] = Field(default_factory=list)  # e.g. why bf16 was replaced by fp32
    launch_s: LatencyS  # median seconds of a tiny elementwise kernel
    # An eager torch model's host time per step beyond its kernels, as step_host_s + dispatch_s × kernels:
    # decode steps of a debug-sized Llama (transformers', else the reference model) at three depths, less their
    # calibrated op times (on an overlapping device, the whole step), fitted to the kernels each launched.
    # dispatch_s is the cost per kernel; step_host_s what a forward call costs whatever its depth (the
    # model's and the cache's Python bookkeeping, the mask, the output object).
    dispatch_s: LatencyS | None = None
    step_host_s: LatencyS | None = None
    dispatch_source: str | None = None  # which model dispatch_s and step_host_s were timed on
    # Share by which the compute kernels of a real-size eager step run slower than alone (caches cooled by
    # the neighbouring kernels, fresh outputs): a decode step of a Llama whose weights are far beyond the
    # cache, less dispatch, over its calibrated kernel time, minus 1 (never below 0).
    step_slowdown: Slowdown | None = None
    step_slowdown_source: str | None = None  # which model step_slowdown was timed on
    # Kernels timed by replaying a CUDA graph of them (their time on the device, without the host's cost of
    # issuing them; dispatch_s then holds that whole host cost per kernel, which overlaps the device's work).
    graphs: bool = False
    # MoE experts ran as one grouped GEMM per expert op (torch's grouped_mm over the fused gate/up weight, then
    # down, as transformers 5 runs them), not one matmul per touched expert and part.
    grouped_experts: bool = False
    bandwidth: Bandwidth
    matmul: list[MatmulPoint] = Field(min_length=1)
    grouped: list[GroupedPoint] = Field(default_factory=list)  # where grouped_experts; none in older files
    attention: list[AttentionPoint] = Field(default_factory=list)
    rows: list[RowPoint] = Field(default_factory=list)

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(by_alias=True, mode="json"), sort_keys=False)


def calibration_dir() -> Path:
    """Where calibrations are kept: $ARCHCALC_CALIBRATION_DIR, else the user data dir."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV])
    from platformdirs import user_data_dir

    return Path(user_data_dir("archcalc")) / "calibrations"


def slug(name: str) -> str:
    """A file name for a device name: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "device"


def is_calibration(data: dict) -> bool:
    return data.get("schema") == SCHEMA


def load_calibration(path: Path) -> Calibration:
    """A calibration file, or one line saying why it is not one."""
    data = read_yaml(path)
    if not is_calibration(data):
        found = data.get("schema")
        raise InputError(str(path), "schema", f"not an archcalc calibration (expected {SCHEMA!r}, found {found!r})")
    try:
        return Calibration.model_validate(data)
    except ValidationError as e:
        raise validation_error(str(path), e) from None


def save_calibration(cal: Calibration, path: Path) -> Path:
    """Write atomically (temp file + rename): an interrupted write leaves no half file."""
    return write_atomic(path, cal.to_yaml(), make_folder=True)


def default_path(cal: Calibration) -> Path:
    return calibration_dir() / f"{cal.device.kind}-{slug(cal.device.name)}.yaml"


def local_calibration() -> tuple[Path, Calibration]:
    """The newest calibration in the calibration directory (`--gpu local`)."""
    folder = calibration_dir()
    files = sorted(folder.glob("*.yaml"), key=lambda p: p.stat().st_mtime, reverse=True) if folder.is_dir() else []
    if not files:
        raise InputError("local", None, f"no calibration in {folder}; run `archcalc calibrate` first")
    return files[0], load_calibration(files[0])
