"""`archcalc roofline`."""

from __future__ import annotations

import click

from archcalc import api
from archcalc.cli.common import (
    MAX_CONTEXT,
    MAX_GPUS,
    MAX_REPEATS,
    act_dtype_option,
    batch_option,
    dtype_option,
    echo_json,
    json_option,
    kv_dtype_option,
    out,
    warn,
)


@click.command()
@click.argument("model")
@click.option("--gpu", "--hardware", "gpu",
              help="Device: a bundled name or alias, a profile or calibration YAML, or `local` (this machine's "
                   "calibration; the default with --measure).")
@click.option("--phase", type=click.Choice(["prefill", "decode", "both"]), default="both", show_default=True)
@click.option("--prompt", type=click.IntRange(1, MAX_CONTEXT), default=2048, show_default=True, help="Prefill tokens.")
@click.option("--context", type=click.IntRange(1, MAX_CONTEXT),
              help="Context of the decode step shown (default prompt + gen).")
@batch_option
@click.option("--gen", type=click.IntRange(1, MAX_CONTEXT), default=256, show_default=True,
              help="Tokens generated per sequence.")
@dtype_option
@act_dtype_option
@kv_dtype_option
@click.option("--tp", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True,
              help="Tensor-parallel ranks: each op's share on one rank plus the all-reduces and gathers.")
@click.option("--gpus", type=click.IntRange(1, MAX_GPUS),
              help="GPUs in all (default --tp): beyond --tp, data-parallel replicas, each running --batch.")
@click.option("--measure", is_flag=True, help="Also run every op as a real torch kernel on the local device.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda", "mps"]), default="auto", show_default=True,
              help="Where --measure runs (auto: cuda, then mps, then cpu).")
@click.option("--repeats", type=click.IntRange(1, MAX_REPEATS), default=5, show_default=True,
              help="Timed repeats per kernel with --measure (the median is kept).")
@click.option("--plot", "plot_path", help="Write a roofline chart (.png or .svg; needs matplotlib).")
@json_option
def roofline(model, gpu, phase, prompt, context, batch, gen, dtype, act_dtype, kv_dtype, tp, gpus, measure, device,
             repeats, plot_path, as_json):
    """Prefill and decode time of MODEL on a device, op by op."""
    if plot_path:
        from archcalc.report.plot import check_plot_path

        check_plot_path(plot_path)  # before any measurement: a bad path costs nothing
    result = api.roofline(model, gpu, prompt=prompt, context=context, batch=batch, gen=gen, dtype=dtype,
                          act_dtype=act_dtype, kv_dtype=kv_dtype, tp=tp, gpus=gpus, measure=measure, device=device,
                          repeats=repeats)
    warn(result.warnings)
    phases = ("prefill", "decode") if phase == "both" else (phase,)
    if plot_path:
        from archcalc.report.plot import roofline_chart

        roofline_chart(result, phases, plot_path)
    if as_json:
        return echo_json(result.to_dict())
    from archcalc.report.roofline import roofline_view

    out().print(roofline_view(result, phases))
