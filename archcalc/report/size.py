"""The `size`, `show` and `list` views: rich tables and the archcalc.size/1 JSON document."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from archcalc.cost.totals import TRAIN_FLOPS_FACTOR, SizeResult
from archcalc.ops.dtypes import BITS, INT4_GROUP, WEIGHT_DTYPES
from archcalc.ops.op import Op
from archcalc.report.units import count, nbytes, si

if TYPE_CHECKING:
    from archcalc.spec.hf import MappingReport

SIZE_SCHEMA = "archcalc.size/1"


# ---- size ----------------------------------------------------------------------------


def size_json(r: SizeResult, ops: bool = False) -> dict:
    """The stable `archcalc size --json` document (README: JSON schema)."""
    wl, spec, p, f, kv = r.workload, r.spec, r.params, r.flops, r.kv
    return {
        "schema": SIZE_SCHEMA,
        "model": {"name": spec.name, "source": spec.source},
        "workload": {"context": wl.context, "batch": wl.batch, "dtype": wl.weight_dtype, "kv_dtype": wl.kv_dtype,
                     "flops_convention": r.convention.name},
        "params": {
            "total": p.total, "active": p.active, "embedding": p.embedding, "non_embedding": p.non_embedding,
            "per_layer_table": p.per_layer_table,
            "tied_embeddings": spec.tie_embeddings, "by_component": p.by_component,
            "vision": r.vision_params,  # the checkpoint's image encoder + projector, not in total
            "mtp": r.mtp_params,  # the checkpoint's multi-token-prediction modules, not in total
        },
        "weights": {
            "bytes": r.weight_bytes[wl.weight_dtype] if wl.weight_dtype in r.weight_bytes else None,
            "bytes_by_dtype": r.weight_bytes,
            "bits_per_weight": {d: BITS[d] for d in WEIGHT_DTYPES},
            "checkpoint": None if r.checkpoint is None else {
                "format": r.checkpoint.format, "bytes": r.checkpoint.bytes,
                "bits_per_weight": r.checkpoint.bits_per_weight, "tensors_by_type": r.checkpoint.tensors_by_type,
                "bytes_by_type": r.checkpoint.bytes_by_type},
        },
        "flops": {
            "convention": r.convention.name,
            "convention_description": r.convention.description,
            "forward": f.forward,
            "forward_per_token": r.forward_per_token,
            "matmul": f.matmul, "attention": f.attention, "vector": f.vector,
            "train_per_token": TRAIN_FLOPS_FACTOR * r.forward_per_token,
            "six_n_per_token": r.six_n_per_token,
            "macs_per_token": r.forward_per_token / 2,
        },
        "kv_cache": {
            "dtype": kv.dtype,
            "bytes_per_token": kv.bytes_per_token,
            "bytes": kv.bytes,
            "kv_shared_layers": r.spec.attention.kv_shared_layers,  # layers with no cache: they reuse K/V
            "by_layer_kind": [{"kind": k.kind, "layers": k.layers, "window": k.window,
                               "bytes_per_token": k.bytes_per_token, "bytes": k.bytes,
                               "state_bytes_per_sequence": k.state_bytes, "tokens_per_entry": k.stride}
                              for k in kv.by_kind],
        },
        "warnings": list(r.warnings),
        **({"ops": [op_json(op) for op in r.ops]} if ops else {}),
    }


def op_json(op: Op) -> dict:
    return {"name": op.name, "kind": op.kind, "component": op.component, "count": op.count, "dims": op.dims.to_dict(),
            "params": op.params, "flops": op.flops, "vector_flops": op.vector_flops, "weight_bytes": op.weight_bytes,
            "act_bytes": op.act_bytes, "kv_bytes": op.kv_bytes}


def size_tables(r: SizeResult) -> Group:
    wl, spec, p, f, kv = r.workload, r.spec, r.params, r.flops, r.kv
    title = Text.assemble((spec.name, "bold"), f"  context {wl.context:,} × batch {wl.batch:,}, "
                          f"weights {wl.weight_dtype}, KV cache {wl.kv_dtype}")
    params = Table(title="Parameters", title_justify="left", show_edge=False)
    params.add_column("")
    params.add_column("count", justify="right")
    params.add_column("share", justify="right")
    params.add_row("total" + (" (tied embeddings counted once)" if spec.tie_embeddings else ""), count(p.total), "100%")
    if p.active != p.total:
        params.add_row("active per token", count(p.active), f"{p.active / p.total:.1%}")
    params.add_row("non-embedding", count(p.non_embedding), f"{p.non_embedding / p.total:.1%}")
    if p.per_layer_table:
        params.add_row("per-layer embedding table (a lookup: not in non-embedding)", count(p.per_layer_table),
                       f"{p.per_layer_table / p.total:.1%}")
    for component, n in p.by_component.items():
        params.add_row(f"  {component}", count(n), f"{n / p.total:.1%}")
    if r.mtp_params:
        params.add_row("multi-token-prediction modules (checkpoint only; not in the total)", count(r.mtp_params),
                       f"+{r.mtp_params / p.total:.1%}")
    if r.vision_params:
        params.add_row("vision tower + projector (not in the total; fit loads them)", count(r.vision_params),
                       f"+{r.vision_params / p.total:.1%}")

    weights = Table(title="Weight memory", title_justify="left", show_edge=False)
    c = r.checkpoint
    if c is not None:  # the stored checkpoint, type by type
        weights.title = f"Weight memory (checkpoint {c.format}: {nbytes(c.bytes)} of tensors, " \
                        f"{c.bits_per_weight:.2f} bits per weight; " + ", ".join(
                            f"{k} {n} tensors" for k, n in sorted(c.tensors_by_type.items())) + ")"
    for col in ("dtype", "bits/weight", "bytes"):
        weights.add_column(col, justify="right" if col != "dtype" else "left")
    for d, b in r.weight_bytes.items():
        weights.add_row(d + (" ◂" if d == wl.weight_dtype else ""), f"{BITS[d]:g}", nbytes(b))
    weights_note = (f"int4: 4 bits + one fp16 scale per {INT4_GROUP} weights. fp8/int8/int4 quantize layer "
                       "weights only; embeddings, lm_head, norms, routers, biases and weights that are not linear "
                       "layers stay bf16.")

    flops = Table(title=f"FLOPs (convention {r.convention.name}: {r.convention.description})",
                  title_justify="left", show_edge=False)
    flops.add_column("")
    flops.add_column("per token", justify="right")
    flops.add_column("whole forward", justify="right")
    tok = r.tokens
    flops.add_row("forward", si(r.forward_per_token, "FLOP"), si(f.forward, "FLOP"))
    flops.add_row("  matmul", si(f.matmul / tok, "FLOP"), si(f.matmul, "FLOP"))
    core = "attention (QKᵀ, PV) and linear cores (scans)" if spec.linear is not None else "attention (QKᵀ, PV)"
    flops.add_row(f"  {core}", si(f.attention / tok, "FLOP"), si(f.attention, "FLOP"))
    vector_note = "" if r.convention.count_vector else " (not in total)"
    flops.add_row(f"  elementwise{vector_note}", si(f.vector / tok, "FLOP"), si(f.vector, "FLOP"))
    flops.add_row(f"training (forward + backward = {TRAIN_FLOPS_FACTOR}× forward)",
                  si(TRAIN_FLOPS_FACTOR * r.forward_per_token, "FLOP"), si(f.train, "FLOP"))
    flops.add_row("6N rule (N = active non-embedding params)", si(r.six_n_per_token, "FLOP"), "")
    flops_note = ("FLOPs = 2 × multiply-accumulates. Per token = whole forward / (context × batch); "
                     "logits at every position, as a training forward computes them.")
    if spec.drafter is not None:
        flops_note += (" A drafter: each of its queries reads every key its target holds (no causal mask among them), "
                       "so per token is one drafted token's cost at this context.")

    cache = Table(title=f"KV cache ({kv.dtype})", title_justify="left", show_edge=False)
    for col in ("layers", "kind", "window / chunk", "per token", f"at {wl.context:,} × {wl.batch:,}"):
        cache.add_column(col, justify="right" if col not in ("kind",) else "left")
    for k in kv.by_kind:
        cache.add_row(str(k.layers), k.kind, f"{k.window:,}" if k.window else "—", nbytes(k.bytes_per_token),
                      nbytes(k.bytes))
    shared, c = spec.attention.kv_shared_layers, spec.attention.compressed
    if shared:  # they read the K/V of the last earlier layer of their kind (a drafter: its target's) and keep none
        cache.add_row(str(shared), "target's" if spec.drafter else "shared", "", nbytes(0), nbytes(0))
    if len(kv.by_kind) > 1 or shared:
        cache.add_row(str(spec.n_layers), "all", "", nbytes(kv.bytes_per_token), nbytes(kv.bytes), style="bold")
    cache_note = ("Per token: every layer stores the token (no window cap). GiB = 2^30 bytes, GB = 10^9 bytes."
                  + (" MLA: one compressed latent + the shared rope key per token per layer." if spec.attention.kind
                     == "mla" else "")
                  + (f" linear: no per-token cache, a fixed state of {nbytes(_state(kv))} per sequence (the fp32 "
                     f"recurrent state and the conv's last inputs, all linear layers)." if _state(kv) and not c else "")
                  + (f" csa / hca: one compressed entry per {c.csa_rate} / {c.hca_rate} tokens (indexer: a CSA "
                     f"layer's entries for its top-{c.index_topk} selection), per token its share; a fixed state of "
                     f"{nbytes(_state(kv))} per sequence (the tokens each compressor has not yet folded into an entry, "
                     f"and CSA's overlapping window)." if c else "")
                  + (f" shared: the last {shared} layers reuse the K and V of the last earlier layer of their kind "
                     "and cache none." if shared and not spec.drafter else "")
                  + (f" target's: a drafter's {shared} layers read the K and V of its target model's last layer of "
                     "their kind and cache none; the target's cache is the target's to size." if spec.drafter else ""))
    return Group(title, params, Text(""), weights, _note(weights_note), flops, _note(flops_note), cache,
                 _note(cache_note))


def _state(kv) -> float:
    return sum(k.state_bytes for k in kv.by_kind)


def _note(text: str) -> Text:
    return Text(text + "\n", style="dim")


def ops_table(ops: list[Op], convention) -> Table:
    """`size --layers`: every op of the step with its dims and share."""
    table = Table(title="Operations (per execution; × count per step)", title_justify="left", show_edge=False)
    for col in ("op", "kind", "count", "dims", "params", "FLOPs", "share"):
        table.add_column(col, justify="right" if col in ("count", "params", "FLOPs", "share") else "left",
                         no_wrap=col != "dims")
    total = sum(op.counted_flops(convention) * op.count for op in ops) or 1
    for op in ops:
        dims = " ".join(f"{k}={v}" for k, v in op.dims.to_dict().items() if v is not None)
        flops = op.counted_flops(convention)
        table.add_row(op.name, op.kind, str(op.count), dims, f"{op.params:,}", si(flops, "FLOP") if flops else "0",
                      f"{flops * op.count / total:.1%}")
    return table


# ---- show / list --------------------------------------------------------------------------


def mapping_tables(report: MappingReport) -> Group:
    parts = []
    for title, rows in (("used", report.used), ("defaulted (absent from config.json)", report.defaulted),
                        ("ignored", report.ignored)):
        table = Table(title=f"config.json keys {title}", title_justify="left", show_edge=False)
        table.add_column("key")
        table.add_column("value" if title != "ignored" else "why")
        for key, value in rows.items():
            table.add_row(key, _short(value))
        parts += [table, Text("")]
    return Group(*parts)


def _short(value) -> str:
    text = str(value)
    return text if len(text) <= 70 else text[:67] + "..."


def model_list(rows: list[tuple[str, int, int, str]]) -> Table:
    table = Table(title="Bundled models", title_justify="left", show_edge=False)
    for col in ("name", "params", "active", "source"):
        table.add_column(col, justify="right" if col in ("params", "active") else "left")
    for name, total, active, source in rows:
        table.add_row(name, si(total).replace(" G", " B"), si(active).replace(" G", " B"), source or "")
    return table
