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
            hw: HardwareProfile | None = None, prompt: int = 2048, gen: int = 256, tp: int = 1,
            fit_metrics: Callable[[ModelSpec], dict] | None = None,
            measured: Callable[[ModelSpec], tuple[float, float]] | None = None) -> Comparison:
    """`fit_metrics(spec)` adds {key: (label, unit, value)} rows (the fit plan's);
    `measured(spec)` the (prefill, decode step) seconds measured on the local device."""
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
        per_model = [predict(s, hw, prompt=prompt, context=prompt + gen, gen=gen, batch=batch, tp=tp, weight_dtype=dtype,
                             kv_dtype=kv_dtype) for s in specs]
        where = f", TP {tp}" if tp > 1 else ""
        for i, label in enumerate(p.rates.label for p in per_model[0]):
            preds = [ps[i] for ps in per_model]
            key = "" if label == "peak" else f"_{label}"  # the peak rows keep their keys
            rows += [
                (f"ttft_s{key}", f"time to first token ({prompt:,} × {batch}{where}, {label})", "seconds",
                 [p.ttft for p in preds], True),
                (f"tpot_s{key}", f"time per output token at {prompt + gen:,} ({label})", "seconds",
                 [p.tpot for p in preds], True),
                (f"decode_tokens_per_s{key}", f"decode tokens/s (batch {batch}, {label})", "per_s",
                 [p.decode_tokens_per_s for p in preds], False),
            ]
        rows.append(("critical_batch", "critical batch (peak)", "count", [ps[0].critical_batch for ps in per_model],
                     True))
    if measured is not None:
        times = [measured(s) for s in specs]
        rows += [("ttft_s_measured", f"time to first token ({prompt:,} × {batch}, measured)", "seconds",
                  [t[0] for t in times], True),
                 ("tpot_s_measured", f"time per output token at {prompt + gen:,} (measured)", "seconds",
                  [t[1] for t in times], True)]
    if fit_metrics is not None:
        extra = [fit_metrics(s) for s in specs]
        for key, (label, unit, _) in extra[0].items():
            rows.append((key, label, unit, [e[key][2] for e in extra], unit not in ("tokens", "text", "per_s")))
    return Comparison([s.name for s in specs], context, batch, hw.name if hw else None,
                      [Metric(k, label, unit, values, better) for k, label, unit, values, better in rows])
