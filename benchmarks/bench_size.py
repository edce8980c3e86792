"""Speed of the analytic path: prints numbers, asserts nothing.

1. Cold start: `archcalc size NAME` as a fresh process (import + load + size +
   render), median of several runs.
2. Per-config evaluation: model_ops + totals on an already-loaded spec.
3. Whether the CLI imported torch (it must not).

Run: python benchmarks/bench_size.py [NAME ...]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from archcalc.cost.totals import size
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import load_model

NAMES = sys.argv[1:] or ["llama-3.1-8b", "deepseek-v3", "gemma-3-27b"]
RUNS = 7


def cold_start(name: str) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "archcalc", "size", name], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def per_config(name: str, repeats: int = 2000) -> float:
    spec, _ = load_model(name)
    wl, conv = Workload.forward(8192), CONVENTIONS["causal"]
    t0 = time.perf_counter()
    for _ in range(repeats):
        size(spec, wl, conv)
    return (time.perf_counter() - t0) / repeats


def imports_torch() -> bool:
    code = ("import sys; from click.testing import CliRunner; from archcalc.cli import cli; "
            "CliRunner().invoke(cli, ['size', 'deepseek-v3']); print('torch' in sys.modules)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "True"


if __name__ == "__main__":
    print(f"{'model':<16} {'cold start (median of ' + str(RUNS) + ')':>28} {'per-config evaluation':>24}")
    for name in NAMES:
        print(f"{name:<16} {cold_start(name) * 1e3:>25.0f} ms {per_config(name) * 1e6:>21.1f} µs")
    print(f"archcalc.cli imports torch: {imports_torch()}")
