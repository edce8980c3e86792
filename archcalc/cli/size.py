"""`archcalc size`."""

from __future__ import annotations

import click

from archcalc import api
from archcalc.cli.common import (
    MAX_CONTEXT,
    batch_option,
    dtype_option,
    echo_json,
    json_option,
    kv_dtype_option,
    out,
    warn,
)
from archcalc.ops.conventions import CONVENTIONS, DEFAULT_CONVENTION
from archcalc.ops.checkpoints import WEIGHT_FORMATS


@click.command()
@click.argument("model")
@click.option("--context", type=click.IntRange(1, MAX_CONTEXT),
              help="Tokens per sequence S (default: the model's max context).")
@batch_option
@dtype_option
@kv_dtype_option
@click.option("--flops-convention", type=click.Choice(list(CONVENTIONS)), default=DEFAULT_CONVENTION,
              show_default=True, help="How attention and elementwise FLOPs count (README: Conventions).")
@click.option("--layers", is_flag=True, help="Also list every operation of the step.")
@click.option("--weights", type=click.Choice(list(WEIGHT_FORMATS)),
              help="A GGUF checkpoint's mix: the type llama-quantize gives each tensor, and the bytes.")
@json_option
def size(model, context, batch, dtype, kv_dtype, flops_convention, layers, weights, as_json):
    """Parameters, weight memory, FLOPs per token and KV cache of MODEL."""
    result = api.size(model, context=context, batch=batch, dtype=dtype, kv_dtype=kv_dtype,
                      flops_convention=flops_convention, weights=weights)
    warn(result.warnings)
    if as_json:
        return echo_json(result.to_dict(ops=layers))
    from archcalc.report.size import ops_table, size_tables

    console = out()
    console.print(size_tables(result))
    if layers:
        console.print()
        console.print(ops_table(result.ops, result.convention))
