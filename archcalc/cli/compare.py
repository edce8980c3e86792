"""`archcalc compare`."""

from __future__ import annotations

import click

from archcalc import api
from archcalc.cli.common import (
    MAX_CONTEXT,
    MAX_GPUS,
    batch_option,
    dtype_option,
    echo_json,
    json_option,
    kv_dtype_option,
    out,
    warn,
)


@click.command()
@click.argument("models", nargs=-1, required=True)
@click.option("--context", type=click.IntRange(1, MAX_CONTEXT), default=8192, show_default=True)
@batch_option
@dtype_option
@kv_dtype_option
@click.option("--gpu", help="Add fit and speed rows for this hardware profile.")
@click.option("--prompt", type=click.IntRange(1, MAX_CONTEXT), default=2048, show_default=True,
              help="Prefill tokens (with --gpu).")
@click.option("--gen", type=click.IntRange(1, MAX_CONTEXT), default=256, show_default=True,
              help="Generated tokens (with --gpu).")
@click.option("--tp", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True,
              help="Tensor-parallel ranks for the speed rows (one rank's ops plus the collectives).")
@click.option("--measure", is_flag=True, help="Also measure prefill and decode on the local device (needs torch).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda", "mps"]), default="auto", show_default=True,
              help="Where --measure runs.")
@click.option("--train-gpus", type=click.IntRange(1, MAX_GPUS),
              help="With --gpu: add training rows, each model's fastest layout on this many GPUs (see train).")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv"]), default="table", show_default=True)
@json_option
def compare(models, context, batch, dtype, kv_dtype, gpu, prompt, gen, tp, measure, device, train_gpus, fmt, as_json):
    """MODELS side by side; the first is the baseline the others are compared with."""
    result = api.compare(list(models), context=context, batch=batch, dtype=dtype, kv_dtype=kv_dtype, gpu=gpu,
                         prompt=prompt, gen=gen, tp=tp, measure=measure, device=device, train_gpus=train_gpus)
    warn(result.warnings)
    if as_json:
        return echo_json(result.to_dict())
    from archcalc.report import compare as views

    if fmt == "markdown":
        click.echo(views.compare_markdown(result), nl=False)
    elif fmt == "csv":
        click.echo(views.compare_csv(result), nl=False)
    else:
        out().print(views.compare_table(result))
