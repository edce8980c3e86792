"""Speed of `archcalc sweep`: candidates per second, printed; asserts nothing.

A Llama-style grid of 1,000,000+ candidates (d_model × n_layers × KV heads ×
FFN ratio × vocabulary) with two constraints, evaluated in-process: once for
the size metrics only, once with the decode and prefill times on an H100
(typical rates).  The issue's target: about a second for a million
candidates of a Llama-style spec on this machine (2 cores).

Run: python benchmarks/bench_sweep.py [MODEL]
"""

from __future__ import annotations

import sys

from archcalc import api

MODEL = sys.argv[1] if len(sys.argv) > 1 else "llama-3.1-8b"
VARY = ["d_model=1024:8192:32", "n_layers=8..96", "attention.n_kv_heads=1,2,4,8",
        "ffn.d_ff_ratio=2:4:0.25", "vocab_size=32000,128256"]
WHERE = ["params.total <= 8e9", "kv_cache.bytes <= 4GiB"]
TARGET_PER_S = 1e6


def main() -> None:
    for label, extra in (("size metrics", {}), ("+ tpot, ttft on h100 (typical)",
                                                {"gpu": "h100", "columns": ["ttft"]})):
        r = api.sweep(MODEL, VARY, where=WHERE, minimize="kv_cache.bytes_per_token", context=8192, **extra)
        rate = r.candidates / r.seconds
        print(f"{MODEL} {label}: {r.candidates:,} candidates in {r.seconds:.2f} s = {rate:,.0f}/s "
              f"(target ≈ {TARGET_PER_S:,.0f}/s); {r.invalid_total:,} invalid, {r.feasible:,} feasible")


if __name__ == "__main__":
    main()
