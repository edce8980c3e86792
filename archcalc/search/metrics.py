"""What a sweep can ask of a candidate: the metrics, each a function of the op lists.

Vector metrics are computed for every candidate at once, from the same
functions `size` and `roofline` use (totals.py, roofline.time_op) over op
lists whose numbers are arrays.  Each op list is built only when a metric
needs it:

    size     one decode step at --context × --batch: parameters, weight bytes, KV cache
    flops    a forward pass of --context tokens × --batch
    decode   the decode step timed with the chosen rate set (--gpu): tpot, tokens/s; with --tp,
             one rank's share of every op and the collectives (parallel/collectives.py)
    prefill  a prefill of --context tokens (logits at the last one) timed: ttft

Per-candidate metrics (fit on the GPU through the serving planner, lint) are
too slow for a million candidates; the sweep evaluates them only on the
candidates that pass every vector constraint, in the order of the objective,
until --top of them pass (search/run.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np
from pydantic import BaseModel

from archcalc.cost.roofline import Step, prefill_workload, time_op
from archcalc.errors import InputError
from archcalc.cost.totals import TRAIN_FLOPS_FACTOR, flop_counts, kv_cache, param_counts, weight_bytes
from archcalc.ops.conventions import CONVENTIONS
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.parallel.collectives import tp_ops

Unit = Literal["count", "bytes", "flops", "seconds", "per_second", "ratio", "bool", "severity"]


@dataclass(frozen=True)
class Metric:
    name: str
    unit: Unit
    better: Literal["lower", "higher"]
    needs: str  # the op list it reads: size, flops, decode, prefill; "spec" (the fields); "candidate" (lazy)
    doc: str
    value: Callable | None = None  # (Evaluation) -> array; None for per-candidate metrics


@dataclass
class Settings:
    context: int
    batch: int = 1
    dtype: str = "bf16"
    kv_dtype: str = "bf16"
    act_dtype: str = "bf16"
    convention: str = "causal"
    rates: object = None  # a cost.rates.Rates (peak or typical) when a --gpu is given
    hardware: object = None
    tp: int = 1  # tensor-parallel ranks: times are one rank's with its collectives; fit uses tp GPUs


class Evaluation:
    """The op lists of one array-valued spec, each built on first use."""

    def __init__(self, spec, settings: Settings):
        # float64 arrays: exact for every integer below 2^53 (parameter counts), and no int64
        # wrap-around in the totals (a prefill's FLOPs or KV bytes at 2^31 tokens × 2^24 sequences)
        self.spec, self.s = _as_float(spec), settings
        self._cache: dict[str, object] = {}

    def _dtypes(self) -> dict:
        return {"weight_dtype": self.s.dtype, "kv_dtype": self.s.kv_dtype, "act_dtype": self.s.act_dtype}

    def ops(self, which: str):
        if which not in self._cache:
            self._cache[which] = self._build(which)
        return self._cache[which]

    def _build(self, which: str):
        s, conv = self.s, CONVENTIONS[self.s.convention]
        if which == "size":
            return model_ops(self.spec, Workload.decode(s.context, s.batch, **self._dtypes()), conv)
        if which == "flops":
            return model_ops(self.spec, Workload.forward(s.context, s.batch, **self._dtypes()), conv)
        # decode / prefill: timed as the rate set counts attention (the size list when that agrees)
        if which == "decode":
            wl = Workload.decode(s.context, s.batch, **self._dtypes())
        else:
            wl = prefill_workload(s.context, s.batch, **self._dtypes())
        same = which == "decode" and s.rates.convention == s.convention
        ops = self.ops("size") if same else model_ops(self.spec, wl, CONVENTIONS[s.rates.convention])
        if s.tp > 1:
            ops = tp_ops(self.spec, wl, ops, s.tp)
        return Step(wl, s.rates, [time_op(op, s.rates) for op in ops])

    def params(self):
        if "params" not in self._cache:
            self._cache["params"] = param_counts(self.ops("size"))
        return self._cache["params"]

    def kv(self):
        if "kv" not in self._cache:
            self._cache["kv"] = kv_cache(self.ops("size"), self.s.context, self.s.batch, self.s.kv_dtype)
        return self._cache["kv"]

    def flops(self):
        if "flop_counts" not in self._cache:
            self._cache["flop_counts"] = flop_counts(self.ops("flops"), CONVENTIONS[self.s.convention])
        return self._cache["flop_counts"]

    @property
    def tokens(self) -> int:
        return self.s.context * self.s.batch


def _as_float(spec):
    """The spec with its array fields as float64."""
    from archcalc.search.space import with_values

    return with_values(spec, {p: v.astype(np.float64) for p, v in _array_fields(spec).items()})


def _array_fields(model, prefix: str = "") -> dict[str, np.ndarray]:
    out = {}
    for name in type(model).model_fields:
        v = getattr(model, name)
        if isinstance(v, np.ndarray):
            out[prefix + name] = v
        elif isinstance(v, BaseModel):
            out.update(_array_fields(v, f"{prefix}{name}."))
    return out


METRICS = {m.name: m for m in (
    Metric("params.total", "count", "lower", "size", "parameters stored (tied weights once)",
           lambda e: e.params().total),
    Metric("params.active", "count", "lower", "size", "parameters one token uses (top-k experts)",
           lambda e: e.params().active),
    Metric("params.embedding", "count", "lower", "size", "the token embedding V·D", lambda e: e.params().embedding),
    Metric("params.non_embedding", "count", "lower", "size", "parameters less the embedding and position tables",
           lambda e: e.params().non_embedding),
    Metric("weights.bytes", "bytes", "lower", "size", "stored parameters at --dtype",
           lambda e: weight_bytes(e.ops("size"), e.s.dtype)),
    Metric("kv_cache.bytes_per_token", "bytes", "lower", "size",
           "KV cache of one token in every layer at --kv-dtype (no window cap)", lambda e: e.kv().bytes_per_token),
    Metric("kv_cache.bytes", "bytes", "lower", "size", "KV cache at --context × --batch, windows capped",
           lambda e: e.kv().bytes),
    Metric("memory.bytes", "bytes", "lower", "size",
           "weights + KV cache at --context × --batch (no activations or runtime reserve: see fit.fits)",
           lambda e: weight_bytes(e.ops("size"), e.s.dtype) + e.kv().bytes),
    Metric("flops.forward_per_token", "flops", "lower", "flops",
           "forward FLOPs per token over --context tokens (the FLOP convention's)",
           lambda e: e.flops().forward / e.tokens),
    Metric("flops.train_per_token", "flops", "lower", "flops", "training FLOPs per token (3 × forward)",
           lambda e: TRAIN_FLOPS_FACTOR * e.flops().forward / e.tokens),
    Metric("tpot", "seconds", "lower", "decode", "one decode step at --context × --batch, with the rate set",
           lambda e: e.ops("decode").time),
    Metric("decode.tokens_per_s", "per_second", "higher", "decode", "batch / tpot",
           lambda e: e.s.batch / e.ops("decode").time),
    Metric("ttft", "seconds", "lower", "prefill", "a prefill of --context tokens × --batch, with the rate set",
           lambda e: e.ops("prefill").time),
    Metric("head_dim", "count", "lower", "spec", "query/key head dim", lambda e: e.spec.qk_head_dim),
    Metric("n_kv_heads", "count", "lower", "spec", "KV heads (1 for MLA's latent)", lambda e: e.spec.n_kv_heads),
    Metric("d_ff", "count", "lower", "spec", "resolved FFN width", lambda e: e.spec.d_ff),
    Metric("ffn_ratio", "ratio", "lower", "spec", "d_ff / d_model", lambda e: e.spec.d_ff / e.spec.d_model),
    Metric("aspect", "ratio", "lower", "spec", "d_model / n_layers", lambda e: e.spec.d_model / e.spec.n_layers),
    Metric("fit.fits", "bool", "higher", "candidate",
           "fits the --gpu at --context × --batch by the serving planner (weights, KV, activations, reserve)"),
    Metric("fit.max_context", "count", "higher", "candidate", "largest context that fits at --batch"),
    Metric("lint", "severity", "lower", "candidate", "worst lint finding: 0 none, 1 info, 2 warn, 3 error"),
)}


def metric_named(name: str, option: str) -> Metric:
    if name not in METRICS:
        import difflib

        close = difflib.get_close_matches(name, METRICS, n=1)
        hint = f" (did you mean {close[0]}?)" if close else f"; metrics: {', '.join(METRICS)}"
        raise InputError(None, option, f"unknown metric {name!r}{hint}")
    return METRICS[name]


def vector_values(ev: Evaluation, names: list[str], n: int) -> dict[str, np.ndarray]:
    """The named vector metrics for all n candidates, each an array of length n."""
    return {name: np.broadcast_to(np.asarray(METRICS[name].value(ev)), (n,)) for name in names}
