"""Speed of the analytic path: prints numbers, asserts nothing.

1. Cold start: `archcalc size NAME` as a fresh process (import + load + size +
   render), median of several runs, beside the target (0.3 s on the 2-core
   development machine) and the floor: a process that only imports click,
   pydantic, rich and yaml.
2. Per-config evaluation: model_ops + totals on an already-loaded spec.
3. Whether the CLI imported torch (it must not).

Run: python benchmarks/bench_size.py [NAME ...]
"""

from __future__ import annotations

import compileall
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
TARGET_S = 0.3


def cold_start(name: str) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "archcalc", "size", name], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def floor() -> float:
    """Python plus the four libraries every analytic command needs."""
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import click, pydantic, rich.console, rich.table, yaml"], check=True)
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
    # As an installed wheel runs: its modules byte-compiled (pip compiles at install; an editable checkout
    # under PYTHONDONTWRITEBYTECODE=1 would otherwise compile archcalc from source on every start).
    import archcalc

    compileall.compile_dir(archcalc.__path__[0], quiet=1)
    print(f"floor (python + click, pydantic, rich, yaml): {floor() * 1e3:.0f} ms; target for archcalc size: "
          f"{TARGET_S * 1e3:.0f} ms")
    print(f"{'model':<16} {'cold start (median of ' + str(RUNS) + ')':>28} {'per-config evaluation':>24}")
    for name in NAMES:
        t = cold_start(name)
        verdict = "within target" if t <= TARGET_S else "OVER target"
        print(f"{name:<16} {t * 1e3:>25.0f} ms {per_config(name) * 1e6:>21.1f} µs   {verdict}")
    print(f"archcalc.cli imports torch: {imports_torch()}")
