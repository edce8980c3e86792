"""What every command shares: the output console, warnings, JSON output and
the options several commands take."""

from __future__ import annotations

import json

import click

from archcalc.ops.dtypes import ACT_DTYPES, KV_DTYPES, WEIGHT_DTYPES

# The upper bounds of every count live in archcalc/limits.py (the API checks the same ones).
from archcalc.limits import (  # noqa: E402,F401  (re-exported for the option definitions)
    MAX_BATCH,
    MAX_CONTEXT,
    MAX_GPUS,
    MAX_REPEATS,
    MAX_SAMPLES,
    MAX_SEED,
    MAX_TOKENS_PER_STEP,
)


def out():
    """A rich Console: terminal width on a terminal; 160 columns into a pipe or a file."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=160)


def warn(warnings) -> None:
    for message in warnings:
        click.echo(f"warning: {message}", err=True)


def echo_json(doc) -> None:
    click.echo(json.dumps(doc, indent=2, default=str))


def options(*decorators):
    """Several click options as one decorator."""
    def apply(f):
        for d in reversed(decorators):
            f = d(f)
        return f

    return apply


dtype_option = click.option("--dtype", type=click.Choice(WEIGHT_DTYPES), default="bf16", show_default=True,
                            help="Weight dtype.")
kv_dtype_option = click.option("--kv-dtype", type=click.Choice(KV_DTYPES), default="bf16", show_default=True,
                               help="KV-cache dtype.")
act_dtype_option = click.option("--act-dtype", type=click.Choice(ACT_DTYPES), default="bf16", show_default=True,
                                help="Activation dtype.")
batch_option = click.option("--batch", type=click.IntRange(1, MAX_BATCH), default=1, show_default=True,
                            help="Sequences B.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print the JSON document (README: JSON schema).")

