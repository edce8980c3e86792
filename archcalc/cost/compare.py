"""Side-by-side comparison of several models: one value per model per metric,
every value taken from the same functions `size`, `roofline` and `fit` use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

from archcalc.cost.roofline import predict
from archcalc.cost.totals import size
from archcalc.hardware.profile import HardwareProfile
from archcalc.ops.conventions import CONVENTIONS, DEFAULT_CONVENTION
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec

Unit = Literal["count", "bytes", "flops", "seconds", "per_s", "tokens", "text"]


@dataclass(frozen=True)
class Metric:
    key: str  # JSON key
    label: str
    unit: Unit
    values: list  # one per model, in the order given
    lower_is_better: bool = True


@dataclass(frozen=True)
class Comparison:
    names: list[str]
    context: int
    batch: int
    hardware: str | None
    metrics: list[Metric]
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """The archcalc.compare/1 JSON document."""
        from archcalc.report.compare import compare_json

        return compare_json(self)


def compare(specs: list[ModelSpec], *, context: int, batch: int, dtype: str, kv_dtype: str,
            hw: HardwareProfile | None = None, prompt: int = 2048, gen: int = 256,
            fit_metrics: Callable[[ModelSpec], dict] | None = None) -> Comparison:
    """`fit_metrics(spec)` adds {key: (label, unit, value)} rows (the fit plan's)."""
    conv = CONVENTIONS[DEFAULT_CONVENTION]
    sized = [size(s, Workload.forward(context, batch, weight_dtype=dtype, kv_dtype=kv_dtype), conv) for s in specs]
    rows: list[tuple[str, str, Unit, list, bool]] = [
        ("params_total", "parameters", "count", [r.params.total for r in sized], True),
        ("params_active", "active parameters per token", "count", [r.params.active for r in sized], True),
        ("weight_bytes", f"weights ({dtype})", "bytes", [r.weight_bytes[dtype] for r in sized], True),
        ("forward_flops_per_token", f"forward FLOPs per token at {context:,}", "flops",
         [r.forward_per_token for r in sized], True),
        ("kv_bytes_per_token", f"KV cache per token ({kv_dtype})", "bytes", [r.kv.bytes_per_token for r in sized], True),
        ("kv_bytes", f"KV cache at {context:,} × {batch}", "bytes", [r.kv.bytes for r in sized], True),
        ("max_context", "max context of the model", "tokens", [s.max_context for s in specs], False),
    ]
    if hw is not None:
        preds = [predict(s, hw, prompt=prompt, context=prompt + gen, gen=gen, batch=batch, weight_dtype=dtype,
                         kv_dtype=kv_dtype)[0] for s in specs]
        rows += [
            ("ttft_s", f"time to first token ({prompt:,} × {batch}, peak)", "seconds", [p.ttft for p in preds], True),
            ("tpot_s", f"time per output token at {prompt + gen:,} (peak)", "seconds", [p.tpot for p in preds], True),
            ("decode_tokens_per_s", f"decode tokens/s (batch {batch}, peak)", "per_s",
             [p.decode_tokens_per_s for p in preds], False),
            ("critical_batch", "critical batch", "count", [p.critical_batch for p in preds], True),
        ]
    if fit_metrics is not None:
        extra = [fit_metrics(s) for s in specs]
        for key, (label, unit, _) in extra[0].items():
            rows.append((key, label, unit, [e[key][2] for e in extra], unit not in ("tokens", "text")))
    return Comparison([s.name for s in specs], context, batch, hw.name if hw else None,
                      [Metric(k, label, unit, values, better) for k, label, unit, values, better in rows])
