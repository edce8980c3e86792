"""`archcalc sweep`."""

from __future__ import annotations

import time
from pathlib import Path

import click

from archcalc import api
from archcalc.cli.common import (
    MAX_CONTEXT,
    MAX_GPUS,
    MAX_SAMPLES,
    MAX_SEED,
    batch_option,
    dtype_option,
    echo_json,
    json_option,
    kv_dtype_option,
    out,
)
from archcalc.ops.conventions import CONVENTIONS, DEFAULT_CONVENTION

PROGRESS_AFTER_S = 0.3  # a sweep still running after this long gets a bar (on a terminal)


@click.command()
@click.argument("model")
@click.option("--vary", multiple=True, metavar="FIELD=VALUES",
              help="A spec field and its values: 1024:8192:128, 8..96, 64:4096:*2, 1,2,4,8 or swiglu,gelu. Repeat.")
@click.option("--samples", type=click.IntRange(1, MAX_SAMPLES),
              help="Draw this many candidates at random instead of the grid.")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True, help="Seed of --samples.")
@click.option("--where", multiple=True, metavar="EXPR",
              help='A constraint: "params.total <= 8e9", "kv_cache.bytes <= 20GiB", "tpot < 20ms", "fit.fits", '
                   '"lint <= info". Repeat (all must hold).')
@click.option("--minimize", metavar="METRIC", help="Order by this metric, smallest first.")
@click.option("--maximize", metavar="METRIC", help="Order by this metric, largest first.")
@click.option("--pareto", metavar="A,B", help="Show the Pareto front of two metrics, each towards its better side or "
                   "max:METRIC / min:METRIC (e.g. max:params.total,kv_cache.bytes_per_token).")
@click.option("--top", type=click.IntRange(0, MAX_SAMPLES), default=20, show_default=True, help="Rows shown (0: all).")
@click.option("--columns", metavar="METRIC,...", help="More metrics to show.")
@click.option("--context", type=click.IntRange(1, MAX_CONTEXT),
              help="Tokens per sequence S (default: the model's max context).")
@batch_option
@dtype_option
@kv_dtype_option
@click.option("--flops-convention", type=click.Choice(list(CONVENTIONS)), default=DEFAULT_CONVENTION,
              show_default=True)
@click.option("--gpu", help="Device for tpot, ttft, decode.tokens_per_s and fit.*: a bundled name or a profile YAML.")
@click.option("--rates", type=click.Choice(["peak", "typical"]),
              help="Rate set of the times (default: typical where the profile has one, else peak).")
@click.option("--tp", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True,
              help="Tensor-parallel ranks of the times (one rank's ops and the collectives) and of fit.*.")
@click.option("--csv", "csv_path", metavar="FILE", help="Write the shown rows as CSV (- for standard output).")
@click.option("--plot", "plot_path", metavar="FILE", help="Scatter of the feasible candidates and the front (.png/.svg).")
@json_option
def sweep(model, vary, samples, seed, where, minimize, maximize, pareto, top, columns, context, batch, dtype, kv_dtype,
          flops_convention, gpu, rates, tp, csv_path, plot_path, as_json):
    """Search candidate shapes of MODEL under constraints, over numpy arrays."""
    from archcalc.files import check_output, write_atomic
    from archcalc.report import sweep as view

    if plot_path:  # every output checked before any work
        from archcalc.report.plot import check_plot_path

        check_plot_path(plot_path)
    if csv_path and csv_path != "-":
        check_output(csv_path, option="--csv")
    with _progress() as progress:
        result = api.sweep(model, list(vary), where=list(where), minimize=minimize, maximize=maximize, pareto=pareto,
                           top=top, samples=samples, seed=seed, context=context, batch=batch, dtype=dtype,
                           kv_dtype=kv_dtype, flops_convention=flops_convention, gpu=gpu, rates=rates, tp=tp,
                           columns=[c.strip() for c in columns.split(",")] if columns else [], progress=progress)
    if plot_path:
        write_atomic(Path(plot_path), view.sweep_plot(result, plot_path))
        click.echo(f"wrote {plot_path}", err=True)
    if csv_path == "-":
        return click.echo(view.sweep_csv(result), nl=False)
    if csv_path:
        write_atomic(Path(csv_path), view.sweep_csv(result))
        click.echo(f"wrote {csv_path}", err=True)
    if as_json:
        return echo_json(result.to_dict())
    console = out()
    console.print(view.sweep_table(result))
    for line in view.summary(result):
        console.print(line, highlight=False, soft_wrap=True)


class _progress:
    """A rich progress bar on standard error once a sweep has run PROGRESS_AFTER_S seconds
    with candidates left (on a terminal; elsewhere nothing)."""

    def __enter__(self):
        self.bar = self.task = None
        self.off = False  # not a terminal: no bar
        self.start = time.perf_counter()
        return self.update

    def update(self, done: int, total: int) -> None:
        late = time.perf_counter() - self.start > PROGRESS_AFTER_S
        if self.bar is None and not self.off and late and done < total:
            from rich.console import Console
            from rich.progress import Progress

            console = Console(stderr=True)
            if not console.is_terminal:
                self.off = True
                return
            self.bar = Progress(console=console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("sweep", total=total)
        if self.bar is not None:
            self.bar.update(self.task, completed=done)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False
