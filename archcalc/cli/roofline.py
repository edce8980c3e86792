"""`archcalc roofline`."""

from __future__ import annotations

import click

from archcalc import api
from archcalc.cli.common import (
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
@click.option("--gpu", required=True, help="Hardware profile: a bundled name or alias, or a YAML file.")
@click.option("--phase", type=click.Choice(["prefill", "decode", "both"]), default="both", show_default=True)
@click.option("--prompt", type=click.IntRange(min=1), default=2048, show_default=True, help="Prefill tokens.")
@click.option("--context", type=click.IntRange(min=1), help="Context of the decode step shown (default prompt + gen).")
@batch_option
@click.option("--gen", type=click.IntRange(min=1), default=256, show_default=True, help="Tokens generated per sequence.")
@dtype_option
@act_dtype_option
@kv_dtype_option
@click.option("--plot", "plot_path", help="Write a roofline chart (.png or .svg; needs matplotlib).")
@json_option
def roofline(model, gpu, phase, prompt, context, batch, gen, dtype, act_dtype, kv_dtype, plot_path, as_json):
    """Prefill and decode time of MODEL on a device, op by op."""
    result = api.roofline(model, gpu, prompt=prompt, context=context, batch=batch, gen=gen, dtype=dtype,
                          act_dtype=act_dtype, kv_dtype=kv_dtype)
    warn(result.warnings)
    first, spec, hw = result.predictions[0], result.spec, result.hardware
    if plot_path:
        from archcalc.report.plot import roofline_chart

        steps = {"prefill": first.prefill, "decode": first.decode}
        roofline_chart({k: v for k, v in steps.items() if phase in (k, "both")}, plot_path,
                       f"{spec.name} on {hw.name} (batch {batch}, prompt {prompt:,}, decode at {result.context:,})")
    if as_json:
        return echo_json(result.to_dict())
    from archcalc.report.roofline import roofline_view

    phases = ("prefill", "decode") if phase == "both" else (phase,)
    out().print(roofline_view(result.predictions, hw, phases, prompt, result.context, batch))
