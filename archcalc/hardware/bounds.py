"""The ranges a hardware profile's or a calibration's numbers must lie in.

Every number is finite, of its type (a string "1e12" or a bool is not a
number: pydantic strict mode, with ints accepted for floats) and inside a
range no real device leaves in either direction, so a typo (an exponent
too many or too few, a unit mixed up) is one error line, never a prediction
of zero seconds, infinite tokens/s or a division by zero.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

KiB, MiB, PiB = 2**10, 2**20, 2**50

# Device memory: 1 MiB is below any accelerator or CPU memory worth modelling an LM on (a Raspberry Pi
# has 512 MiB); 1 PiB is over a thousand times the largest single device (MI325X: 256 GiB).
MIN_MEMORY_BYTES, MAX_MEMORY_BYTES = MiB, PiB
# Memory and link bandwidth: 1 MB/s is slower than a floppy-era disk; 1e17 B/s (100 PB/s) is above the fastest
# memory of any device, on-wafer SRAM (Cerebras WSE-3: 21 PB/s); HBM3e tops out near 8 TB/s.
MIN_BANDWIDTH, MAX_BANDWIDTH = 1e6, 1e17
# Dense FLOP/s: 1 MFLOP/s is a 1990 PC; 1e18 (an exaFLOP/s on one device) is above Cerebras WSE-3's
# 125 PFLOP/s and B200's ~9 PFLOP/s dense fp4.
MIN_FLOPS, MAX_FLOPS = 1e6, 1e18
# Fixed seconds (a kernel launch, a small collective, framework dispatch): real ones are microseconds;
# a second is a hang, not a latency.
MAX_LATENCY_S = 1.0
# One timed calibration call: 1 ns is below any timer's resolution (CUDA events: ~0.5 us); an hour is far
# beyond any kernel of a calibration grid, even on a slow CPU.
MIN_KERNEL_S, MAX_KERNEL_S = 1e-9, 3600.0
# A tensor dimension (m, k, n, rows, heads, tokens): 2^31 is the int32 index limit of the kernels measured.
MAX_DIM = 2**31
# Compute units (SMs / CUs / cores) and CPU threads: the largest GPU has 304 CUs (MI300X), the largest CPU
# socket a few hundred threads; 2^16 leaves room for any of them.
MAX_UNITS = 2**16
# Board power: 1 mW is a microcontroller; 1 MW is far above a wafer-scale system (~25 kW) or one GPU (~1 kW).
MIN_WATTS, MAX_WATTS = 1e-3, 1e6
# A fraction of the datasheet a kernel reaches (typical rates): real ones are 0.3-0.95; one under 0.1% is a
# measurement gone wrong, not a typical rate (and 5e-324 would make every time infinite).
MIN_FRACTION = 1e-3
# A calibration's bandwidth buffer: at least 1 KiB, at most device memory.
MIN_BUFFER_BYTES = KiB

Bytes = Annotated[int, Field(ge=MIN_MEMORY_BYTES, le=MAX_MEMORY_BYTES)]
BufferBytes = Annotated[int, Field(ge=MIN_BUFFER_BYTES, le=MAX_MEMORY_BYTES)]
BytesPerS = Annotated[float, Field(ge=MIN_BANDWIDTH, le=MAX_BANDWIDTH, allow_inf_nan=False)]
FlopsPerS = Annotated[float, Field(ge=MIN_FLOPS, le=MAX_FLOPS, allow_inf_nan=False)]
LatencyS = Annotated[float, Field(ge=0, lt=MAX_LATENCY_S, allow_inf_nan=False)]
KernelS = Annotated[float, Field(ge=MIN_KERNEL_S, le=MAX_KERNEL_S, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=MIN_FRACTION, le=1, allow_inf_nan=False)]
# A step's kernels running slower than alone: 0 (none) up to MAX_SLOWDOWN (10x slower: a broken measurement).
MAX_SLOWDOWN = 9.0
Slowdown = Annotated[float, Field(ge=0, le=MAX_SLOWDOWN, allow_inf_nan=False)]
Dim = Annotated[int, Field(ge=1, le=MAX_DIM)]
Units = Annotated[int, Field(ge=1, le=MAX_UNITS)]
Watts = Annotated[float, Field(ge=MIN_WATTS, le=MAX_WATTS, allow_inf_nan=False)]
Text = Annotated[str, Field(min_length=1)]
