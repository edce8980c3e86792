"""Predictions held against published measurements (docs/data/published_speed.yaml).

Each entry fixes the engine, its version, the hardware, the model, the
dtypes, TP, batch and lengths; archcalc predicts the same metric with every
rate set and the error is that of the TIME the metric implies (a throughput's
error is that of 1 / throughput), signed: negative = predicted faster.

Used by scripts/validate.py (docs/validation.md) and tests/cost/test_published_speed.py.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import yaml

import archcalc

DATA = Path(__file__).resolve().parents[1] / "docs" / "data" / "published_speed.yaml"


@dataclass(frozen=True)
class Check:
    entry: dict
    measured_s: float  # the time the published metric implies
    predicted_s: dict[str, float]  # per rate set label

    def error(self, label: str) -> float:
        return (self.predicted_s[label] - self.measured_s) / self.measured_s


def entries() -> list[dict]:
    """The measurements archcalc can predict: a bundled model and hardware, a time-like metric."""
    out = []
    for e in yaml.safe_load(DATA.read_text()):
        if e.get("matched", True) is False or not e.get("output_len") and e["metric"] != "ttft_s":
            continue
        out.append(e)
    return out


def measured_seconds(e: dict) -> float:
    """The time the metric implies: per output token, per step, or for the request."""
    v, batch, out_len = e["value"], e["batch"], e["output_len"] or 1
    per_gpu = "tok/s/GPU" in (e.get("notes") or "") or "tok/s/GPU" in (e.get("quote") or "")
    return {
        "decode_tokens_per_s_per_seq": lambda: 1 / v,  # seconds per generated token (prefill included)
        "output_tokens_per_s_total": lambda: batch * out_len / (v * (e["tp"] if per_gpu else 1)),  # request time
        "tpot_s": lambda: v,
        "ttft_s": lambda: v,
        "e2e_latency_s": lambda: v,
    }[e["metric"]]()


def predicted_seconds(e: dict, p, prefill_s: float) -> float:
    """The same time from one Prediction: TTFT + the closed-form decode of output_len − 1 tokens."""
    out_len = e["output_len"] or 1
    decode = p.decode_total * (out_len - 1) / p.gen if out_len > 1 else 0.0
    request = prefill_s + decode
    return {
        "decode_tokens_per_s_per_seq": lambda: request / out_len,
        "output_tokens_per_s_total": lambda: request,
        "tpot_s": lambda: p.mean_tpot,
        "ttft_s": lambda: prefill_s,
        "e2e_latency_s": lambda: request,
    }[e["metric"]]()


def check(e: dict) -> Check:
    out_len = e["output_len"] or 1
    kv = e.get("kv_dtype") or "bf16"
    r = archcalc.roofline(e["model"], e["hardware"], prompt=e["input_len"], batch=e["batch"],
                          gen=max(1, out_len - 1), dtype=e["weight_dtype"], kv_dtype=kv if kv != "fp16" else "fp16",
                          act_dtype="fp16" if e["weight_dtype"] == "fp16" else "bf16", tp=e["tp"])
    return Check(e, measured_seconds(e), {p.rates.label: predicted_seconds(e, p, p.ttft) for p in r.predictions})


def summary(checks: list[Check], label: str) -> tuple[float, float]:
    errors = [abs(c.error(label)) for c in checks if label in c.predicted_s]
    return statistics.median(errors), max(errors)


if __name__ == "__main__":
    checks = [check(e) for e in entries()]
    for c in checks:
        print(f"{c.entry['id']:60s} measured {c.measured_s:9.4g} s  " +
              "  ".join(f"{k} {c.error(k):+.0%}" for k in c.predicted_s))
    for label in ("peak", "typical"):
        med, worst = summary(checks, label)
        print(f"{label}: median |error| {med:.1%}, worst {worst:.1%} over {len(checks)} measurements")
