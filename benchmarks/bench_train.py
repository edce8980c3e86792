"""Speed of `archcalc train`: prints numbers, asserts nothing.

1. Cold start: `archcalc train NAME --gpu h100 --gpus 8 --zero 3` (a given
   layout) and `archcalc size NAME` as fresh processes, median of several
   runs, beside the target (0.5 s).
2. The layout solver on 1,024 H100s for Llama 3.1 70B (every tp, pp, dp, ep,
   ZeRO stage, recompute policy and micro-batch), in a warm process and from a
   cold start; the target is under a second.
3. Whether the command imported torch (it must not).

Run: python benchmarks/bench_train.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 5
TARGET_S = 0.5


def cold(args: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "archcalc", *args], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    given = ["train", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8", "--zero", "3", "--json"]
    print(f"cold start, given layout ({' '.join(given[1:])}): {cold(given):.3f} s (target {TARGET_S} s)")
    print(f"cold start, archcalc size llama-3.1-8b (the floor of any command): {cold(['size', 'llama-3.1-8b']):.3f} s")
    solve = ["train", "llama-3.1-70b", "--gpu", "h100", "--gpus", "1024", "--seq", "8192", "--json"]
    print(f"cold start, solver on 1,024 GPUs ({' '.join(solve[1:3])}): {cold(solve):.3f} s")

    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model
    from archcalc.training.layout import Layout, Recipe
    from archcalc.training.memo import _CACHE
    from archcalc.training.solver import fastest

    spec, _ = load_model("llama-3.1-70b")
    hw = load_hardware("h100")
    recipe = Recipe(seq=8192, global_batch=512)
    _CACHE.clear()
    t0 = time.perf_counter()
    solved = fastest(spec, hw, 1024, recipe, Layout())
    took = time.perf_counter() - t0
    print(f"solver, warm process: {solved.tried:,} layouts ({solved.fitting:,} fit) in {took:.3f} s "
          f"({solved.tried / took:,.0f} layouts/s); best: {solved.best.layout.describe()}, "
          f"{solved.best.time:.3f} s per step")
    probe = "import sys, archcalc.cli.train, archcalc.training.solver; print('torch' in sys.modules)"
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip()
    print(f"train imported torch: {imported}")


if __name__ == "__main__":
    main()
