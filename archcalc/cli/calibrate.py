"""`archcalc calibrate`."""

from __future__ import annotations

import click

from archcalc import api
from archcalc.cli.common import echo_json, json_option, out, warn


@click.command()
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda", "mps"]), default="auto", show_default=True,
              help="Where to measure (auto: cuda, then mps, then cpu).")
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32"]), default="bf16", show_default=True,
              help="Math dtype (a CPU without native bf16/fp16 units is measured in fp32, and says so).")
@click.option("--quick", is_flag=True, help="A small grid: under a minute on a 2-core CPU.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help="Write the calibration here (default: the per-user calibration directory).")
@json_option
def calibrate(device, dtype, quick, out_path, as_json):
    """Measure matmul, attention, bandwidth, launch and row-kernel rates on this device."""
    progress = None if as_json else (lambda msg: click.echo(f"measuring {msg} ...", err=True))
    path, cal = api.calibrate(device=device, dtype=dtype, quick=quick, out=out_path, progress=progress)
    warn(cal.notes)
    if as_json:
        return echo_json({"path": str(path), **cal.model_dump(by_alias=True, mode="json")})
    from archcalc.hardware.profile import calibrated_profile
    from archcalc.report.calibrate import calibration_view

    out().print(calibration_view(cal, calibrated_profile(cal), path))
