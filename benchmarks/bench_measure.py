"""How long `archcalc calibrate --quick` and `roofline --measure` take: prints numbers, asserts nothing.

Run: python benchmarks/bench_measure.py [--device cpu]
Targets: calibrate --quick under a minute on the 2-core development CPU.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "archcalc", *args], check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    device = ap.parse_args().device
    with tempfile.TemporaryDirectory() as d:
        cal = str(Path(d) / "cal.yaml")
        quick = timed(["calibrate", "--quick", "--device", device, "--out", cal])
        print(f"calibrate --quick on {device}: {quick:.1f} s (target < 60 s)")
        for spec, prompt in (("debug", 64), ("llama-3.2-1b", 128)):
            t = timed(["roofline", spec, "--gpu", cal, "--measure", "--device", device, "--prompt", str(prompt),
                       "--gen", "8", "--json"])
            print(f"roofline {spec} --measure (prefill {prompt} + one decode step): {t:.1f} s")


if __name__ == "__main__":
    main()
