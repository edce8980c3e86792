"""HardwareProfile: what a device can hold and how fast it computes and moves data.

Memory in bytes, bandwidth in bytes/s, dense peak FLOP/s per dtype (absent
where the device has no such unit).  `typical` holds sourced efficiencies
(what real kernels reach: hardware/SOURCES.md); `calibration` what
`archcalc calibrate` measured.  Predictions use the peaks and, where present,
the typical and calibrated rate sets as well (cost/rates.py).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from archcalc.errors import InputError
from archcalc.files import bundled_dir, read_yaml, resolve_name, validation_error
from archcalc.hardware.bounds import (
    MIN_MEMORY_BYTES,
    Bytes,
    BytesPerS,
    FlopsPerS,
    Fraction,
    LatencyS,
    Text,
    Units,
    Watts,
)
from archcalc.hardware.calibration import Calibration

# The dtypes a datasheet states a dense rate for; any other key is a typo, not a rate to ignore.
PEAK_DTYPES = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]


class _Frozen(BaseModel):
    # strict: "1e12" (a string) or true where a number belongs is an error, not a number (ints pass for floats)
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class Interconnect(_Frozen):
    name: Text
    bandwidth: BytesPerS | None = None  # bytes/s per device, total bidirectional as the datasheet states it


class TypicalRates(_Frozen):
    """What real kernels reach on this device, as fractions of the datasheet,
    each from a public measurement named in hardware/SOURCES.md."""

    gemm_efficiency: Fraction  # large dense GEMM (cuBLAS / hipBLASLt) FLOP/s ÷ dense peak
    bandwidth_efficiency: Fraction  # achievable memory bandwidth (copy / stream) ÷ datasheet
    attention_prefill_efficiency: Fraction  # FlashAttention forward FLOP/s ÷ dense peak
    attention_decode_efficiency: Fraction  # decode attention KV-read bytes/s ÷ datasheet bandwidth
    launch_s: LatencyS  # fixed seconds per kernel (launch + tail)
    compute_units: Units | None = None  # SMs / CUs (vendor), for wave quantization
    link_efficiency: Fraction = 1.0  # achieved collective bus bandwidth ÷ link datasheet
    link_latency_s: LatencyS = 0.0  # seconds per small collective
    sources: list[str] = Field(default_factory=list)  # where each fraction comes from


class HardwareProfile(_Frozen):
    name: Text
    aliases: list[Text] = Field(default_factory=list)
    vendor: Text
    kind: Literal["gpu", "cpu", "soc"]
    memory_bytes: Bytes  # datasheet capacity
    usable_memory_bytes: Bytes | None = None  # what the driver reports, where a public log shows it
    memory_bandwidth: BytesPerS  # bytes/s
    peak_flops: dict[PEAK_DTYPES, FlopsPerS]  # dense FLOP/s per dtype; fp32 required (the vector rate)
    interconnect: Interconnect | None = None
    tdp_watts: Watts | None = None
    source: str
    sources: list[str] = Field(default_factory=list)
    notes: str | None = None
    typical: TypicalRates | None = None
    calibration: Calibration | None = None

    @field_validator("usable_memory_bytes")
    @classmethod
    def _usable_within_total(cls, v: int | None, info: ValidationInfo) -> int | None:
        total = info.data.get("memory_bytes")
        if v is not None and total is not None and v > total:
            raise ValueError(f"{v} exceeds memory_bytes {total}: the driver cannot report more than the device has")
        return v

    @field_validator("peak_flops")
    @classmethod
    def _has_fp32(cls, v: dict[str, float]) -> dict[str, float]:
        if "fp32" not in v:
            raise ValueError("needs an fp32 rate: the vector (non-matrix) math of every prediction runs at it")
        return v

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


@lru_cache(maxsize=1)
def _profiles() -> dict[str, Path]:
    return {p.stem: p for p in sorted(bundled_dir("hardware").glob("*.yaml"))}


@lru_cache(maxsize=1)
def aliases() -> dict[str, str]:
    """alias -> file stem, for every bundled profile (read once per process)."""
    table = {}
    for stem, path in _profiles().items():
        for alias in read_yaml(path).get("aliases", []):
            table[str(alias).lower()] = stem
    return table


def load_profile(path: Path, label: str | None = None) -> HardwareProfile:
    try:
        return HardwareProfile.model_validate(read_yaml(path))
    except ValidationError as e:
        raise validation_error(label or str(path), e) from None


def load_hardware(ref: str) -> HardwareProfile:
    """A bundled name or alias (case-insensitive), a profile YAML, a calibration
    file, or `local`: the newest calibration of this machine.  A calibration of a
    bundled device (its `profile`) calibrates that profile; any other makes a
    profile of its own (local_profile)."""
    from archcalc.hardware.calibration import load_calibration, local_calibration

    if ref.lower() == "local":
        return calibrated_profile(local_calibration()[1])
    path = Path(ref)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if "schema" in read_yaml(path):  # profiles have none; a calibration, or a foreign document
            return calibrated_profile(load_calibration(path))
        return load_profile(path)
    stem = resolve_name(ref, "hardware", aliases()).stem
    return _with_local_calibration(stem, load_profile(_profiles()[stem], ref))


def calibrated_profile(cal: Calibration) -> HardwareProfile:
    if cal.profile and cal.profile in _profiles():
        return load_profile(_profiles()[cal.profile]).model_copy(update={"calibration": cal})
    return local_profile(cal)


def local_profile(cal: Calibration) -> HardwareProfile:
    """A profile for a device no bundled profile describes: its 'peaks' are the
    best rates the calibration measured (not a datasheet), and it says so."""
    best = max(2 * p.m * p.k * p.n / p.seconds for p in cal.matmul)
    bandwidth = max(cal.bandwidth.read_bytes_per_s, cal.bandwidth.copy_bytes_per_s)
    try:
        return HardwareProfile(
            name=f"local: {cal.device.name}", vendor="local", kind="gpu" if cal.device.kind != "cpu" else "cpu",
            # memory unknown: the smallest valid capacity, so nothing claims to fit on it
            memory_bytes=MIN_MEMORY_BYTES, memory_bandwidth=bandwidth,
            peak_flops={cal.dtype: best, "fp32": best if cal.dtype == "fp32" else best / 2},
            source="archcalc calibrate", calibration=cal,
            notes="No datasheet: the 'peak' rates are the best this calibration measured "
                  f"({best / 1e9:.1f} GFLOP/s {cal.dtype} matmul, {bandwidth / 1e9:.1f} GB/s), not vendor figures.")
    except ValidationError as e:  # a calibration whose best rates no device has (bounds.py)
        raise validation_error(f"calibration of {cal.device.name}", e) from None


def _with_local_calibration(stem: str, hw: HardwareProfile) -> HardwareProfile:
    """The newest user calibration made for this bundled profile, else the one shipped with it
    (hardware/calibrations/<stem>.yaml, measured on such a device), if any."""
    from archcalc.hardware.calibration import calibration_dir, load_calibration

    folder = calibration_dir()
    user = sorted(folder.glob("*.yaml"), key=lambda p: p.stat().st_mtime, reverse=True) if folder.is_dir() else []
    for path in user:
        try:
            cal = load_calibration(path)
        except InputError:
            continue  # a foreign or corrupt file in the folder calibrates nothing; `--gpu FILE` reports it
        if cal.profile == stem:
            return hw.model_copy(update={"calibration": cal})
    shipped = shipped_calibrations().get(stem)
    return hw.model_copy(update={"calibration": load_calibration(shipped)}) if shipped else hw


@lru_cache(maxsize=1)
def shipped_calibrations() -> dict[str, Path]:
    """profile stem -> the calibration shipped for it (hardware/calibrations/<stem>.yaml)."""
    return {p.stem: p for p in sorted((bundled_dir("hardware") / "calibrations").glob("*.yaml"))}


def all_hardware() -> list[HardwareProfile]:
    return [load_profile(p) for p in _profiles().values()]
