"""Timing kernels properly: the device, warm-up, synchronisation, median of repeats.

- `resolve_device("auto")`: cuda, then mps, then cpu; asking for a device
  that is not there is an InputError (one line, exit 2).
- `time_call(run, device)`: `run(i)` executes the kernel once on input set i
  (callers rotate through copies so caches do not flatter the result).  One
  warm-up call, then samples of `inner` calls each, long enough to dwarf the
  timer's resolution, at least `repeats` of them and together at least
  MIN_SPAN_S long; on CUDA timed with events, elsewhere with perf_counter
  after a synchronisation.  Returns the median seconds of one call.
- On CUDA a sample is a replayed CUDA graph of the `inner` calls where the
  kernel can be captured (`graphs_work`): the device's time alone.  Issued
  eagerly, a kernel shorter than the host's ~5-20 µs to issue it is timed
  at the host's pace (an m = 1 matmul of 4096 × 4096 measured 40 µs on an
  H200 that streams its 34 MB in 8 µs); the host's cost is calibrated apart
  (calibrate's dispatch) and overlaps the device's work in a step.
"""

from __future__ import annotations

import os
import statistics
import time
from math import ceil
from typing import Callable

import torch

from archcalc.errors import InputError

DEVICES = ("auto", "cpu", "cuda", "mps")
MIN_SAMPLE_S = 2e-4  # one sample spans at least this long (perf_counter is ~0.1 µs; a launch ~5 µs)
MAX_INNER = 256
MAX_GRAPH_CALLS = 1024  # calls captured in one CUDA graph at most (a 1 µs kernel: a 1 ms sample)
MIN_SPAN_S = 0.05  # samples of one measurement span at least this long
MAX_SAMPLES = 400


# A CPU whose 1-minute load average is this share of its cores before we start is shared with other
# work: every kernel then gets a fraction of the cores and the caches, and its timings run long (a
# calibration taken beside a test run measured decode attention 3-7x slower than on the idle machine).
BUSY_LOAD_SHARE = 0.5


def busy_note(device: torch.device, load: float | None = None, cores: int | None = None) -> str | None:
    """A note when the CPU is busy with other work (timings from it run long); None on an idle CPU,
    on accelerators, or where the OS gives no load average."""
    if device.type != "cpu":
        return None
    try:
        load = os.getloadavg()[0] if load is None else load
    except (AttributeError, OSError):  # Windows has no load average
        return None
    cores = cores or os.cpu_count() or 1
    if load < BUSY_LOAD_SHARE * cores:
        return None
    return (f"the CPU was busy when timed (1-minute load average {load:.1f} on {cores} cores): other work shares "
            f"the cores and caches, so these timings may run long; time on an idle machine")


def resolve_device(name: str) -> torch.device:
    if name not in DEVICES:
        raise InputError(None, "--device", f"{name!r} is not valid; valid: {', '.join(DEVICES)}")
    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name == "auto":
        return torch.device("cuda" if cuda else "mps" if mps else "cpu")
    if name == "cuda" and not cuda:
        raise InputError(None, "--device", "cuda requested but torch sees no CUDA device (torch.cuda.is_available() "
                                           "is False)")
    if name == "mps" and not mps:
        raise InputError(None, "--device", "mps requested but torch sees no Apple GPU (torch.backends.mps.is_available() "
                                          "is False)")
    return torch.device(name)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def graphs_work(device: torch.device) -> bool:
    """Whether time_call replays CUDA graphs on this device (CUDA only; ARCHCALC_NO_GRAPHS=1 turns it off)."""
    return device.type == "cuda" and os.environ.get("ARCHCALC_NO_GRAPHS") != "1"


def time_call(run: Callable[[int], object], device: torch.device, *, repeats: int = 5, rotate: int = 1) -> float:
    """Median seconds of one call of `run`, cycling i through range(rotate)."""
    with torch.inference_mode():
        run(0)  # warm-up: allocations, kernel selection, lazy init
        synchronize(device)
        t0 = time.perf_counter()
        run(1 % rotate)
        synchronize(device)
        first = time.perf_counter() - t0
        inner = max(1, min(MAX_INNER, int(MIN_SAMPLE_S / max(first, 1e-9))))
        if graphs_work(device):
            seconds = _graph_time(run, device, rotate, repeats)
            if seconds is not None:
                return seconds
        samples, spent = [], 0.0
        # At least `repeats` samples spread over at least MIN_SPAN_S: a stall of the
        # machine (a descheduled thread costs a whole time slice, ~4-16 ms) then hits a
        # minority of the samples and the median ignores it.
        while len(samples) < repeats or (spent < MIN_SPAN_S and len(samples) < MAX_SAMPLES):
            t = _sample(run, device, inner, rotate, len(samples) * inner)
            samples.append(t / inner)
            spent += t
    return statistics.median(samples)


def _capture(run: Callable[[int], object], device: torch.device, calls: int, rotate: int):
    """A CUDA graph of `calls` calls of run (cycling the input sets), or None where a kernel cannot be
    captured (one that synchronises with the host, say): it is then timed as issued."""
    try:
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # warm-up on a side stream, as capture requires (cuBLAS workspaces)
            for i in range(min(3, calls)):
                run(i % rotate)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(calls):
                run(i % rotate)
        graph.replay()  # the first replay uploads the graph
        torch.cuda.synchronize(device)
        return graph
    except Exception:  # noqa: BLE001 - any capture failure (RuntimeError, torch.AcceleratorError, ...)
        torch.cuda.synchronize(device)
        return None


def _graph_time(run: Callable[[int], object], device: torch.device, rotate: int, repeats: int) -> float | None:
    """Median seconds of one call, replayed from a CUDA graph of enough calls that a sample spans at least
    MIN_SAMPLE_S: replaying a graph costs ~10 µs of its own (an H200 timed one add at 17 µs in a graph of
    one call, against ~2 µs in a graph of hundreds), so the calls are sized from a first graph's replay.
    None where the kernel cannot be captured."""
    graph = _capture(run, device, rotate, rotate)
    if graph is None:
        return None
    per_call = _median_replay(graph, rotate, 3)
    calls = rotate * max(1, min(MAX_GRAPH_CALLS // rotate, ceil(MIN_SAMPLE_S / (per_call * rotate))))
    if calls > rotate:
        del graph
        graph = _capture(run, device, calls, rotate)
        if graph is None:
            return None
    return _median_replay(graph, calls, repeats)


def _median_replay(graph, calls: int, repeats: int) -> float:
    """Median seconds of one call over graph replays, each timed with CUDA events, at least `repeats` of
    them spread over MIN_SPAN_S."""
    samples, spent = [], 0.0
    while len(samples) < repeats or (spent < MIN_SPAN_S and len(samples) < MAX_SAMPLES):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        t = start.elapsed_time(end) / 1e3
        samples.append(t / calls)
        spent += t
    return statistics.median(samples)


def _sample(run: Callable[[int], object], device: torch.device, inner: int, rotate: int, offset: int) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(inner):
            run((offset + i) % rotate)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3  # ms -> s
    synchronize(device)
    t0 = time.perf_counter()
    for i in range(inner):
        run((offset + i) % rotate)
    synchronize(device)
    return time.perf_counter() - t0


def last_level_cache_bytes() -> int:
    """The CPU's largest cache (sysfs), or 64 MiB when it cannot be read; inputs
    rotate through enough copies to exceed twice this."""
    from pathlib import Path

    sizes = []
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip().upper()
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        try:
            sizes.append(int(text.rstrip("KMG")) * scale)
        except ValueError:
            continue
    return max(sizes, default=64 * 2**20)
