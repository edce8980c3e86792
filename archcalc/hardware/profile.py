"""HardwareProfile: what a device can hold and how fast it computes and moves data.

Memory in bytes, bandwidth in bytes/s, dense peak FLOP/s per dtype (absent
where the device has no such unit).  `calibration` holds measured rates
written by `archcalc calibrate`; predictions use peaks and, when present,
the calibrated rates as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from archcalc.errors import InputError
from archcalc.files import bundled_dir, read_yaml, resolve_name, validation_error


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Interconnect(_Frozen):
    name: str
    bandwidth: PositiveFloat | None = None  # bytes/s per device, total bidirectional as the datasheet states it


class Calibration(_Frozen):
    """Rates measured on this device (archcalc calibrate)."""

    flops: dict[str, PositiveFloat] = Field(default_factory=dict)  # achieved matmul FLOP/s per dtype
    memory_bandwidth: PositiveFloat | None = None  # achieved bytes/s (streaming copy)
    measured: str | None = None  # when and with what (device name, torch version)


class HardwareProfile(_Frozen):
    name: str
    aliases: list[str] = Field(default_factory=list)
    vendor: str
    kind: Literal["gpu", "cpu", "soc"]
    memory_bytes: PositiveInt  # datasheet capacity
    usable_memory_bytes: PositiveInt | None = None  # what the driver reports, where a public log shows it
    memory_bandwidth: PositiveFloat  # bytes/s
    peak_flops: dict[str, PositiveFloat]  # dense FLOP/s per dtype
    interconnect: Interconnect | None = None
    tdp_watts: PositiveFloat | None = None
    source: str
    sources: list[str] = Field(default_factory=list)
    notes: str | None = None
    calibration: Calibration | None = None

    @property
    def capacity(self) -> int:
        """Bytes a runtime can allocate: the driver's total where known."""
        return self.usable_memory_bytes or self.memory_bytes

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for math in `dtype`.  fp16 and bf16 stand in for
        each other where only one is listed; without a matrix unit for the
        dtype, the fp32 rate applies (a CPU's bf16 GEMM runs near it)."""
        for d in (dtype, {"bf16": "fp16", "fp16": "bf16"}.get(dtype), "fp32"):
            if d in self.peak_flops:
                return self.peak_flops[d]
        raise InputError(self.name, "peak_flops", f"no rate for {dtype} and no fp32 rate")

    def ridge(self, dtype: str) -> float:
        """FLOPs per byte where compute and bandwidth take equal time."""
        return self.peak(dtype) / self.memory_bandwidth


def _profiles() -> dict[str, Path]:
    return {p.stem: p for p in sorted(bundled_dir("hardware").glob("*.yaml"))}


def aliases() -> dict[str, str]:
    """alias -> file stem, for every bundled profile."""
    table = {}
    for stem, path in _profiles().items():
        for alias in read_yaml(path).get("aliases", []):
            table[str(alias).lower()] = stem
    return table


def load_profile(path: Path, label: str | None = None) -> HardwareProfile:
    try:
        return HardwareProfile.model_validate(read_yaml(path))
    except Exception as e:  # pydantic.ValidationError
        if hasattr(e, "errors"):
            raise validation_error(label or str(path), e) from None
        raise


def load_hardware(ref: str) -> HardwareProfile:
    """A YAML path, or a bundled name or alias (case-insensitive)."""
    path = Path(ref)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return load_profile(path)
    return load_profile(resolve_name(ref, "hardware", aliases()), ref)


def all_hardware() -> list[HardwareProfile]:
    return [load_profile(p) for p in _profiles().values()]
