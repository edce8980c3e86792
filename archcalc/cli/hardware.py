"""`archcalc hardware list` and `hardware show`."""

from __future__ import annotations

import click

from archcalc.cli.common import echo_json, json_option, out


@click.group()
def hardware():
    """Bundled hardware profiles."""


@hardware.command("list")
@json_option
def hardware_list(as_json):
    """Every bundled device with its memory, bandwidth and peaks."""
    from archcalc.hardware.profile import all_hardware
    from archcalc.report.roofline import hardware_list as table

    profiles = all_hardware()
    if as_json:
        return echo_json([hw.model_dump(mode="json") for hw in profiles])
    out().print(table(profiles))


@hardware.command("show")
@click.argument("name")
@json_option
def hardware_show(name, as_json):
    """One device: every number and its source."""
    from archcalc.api import load_gpu
    from archcalc.report.roofline import hardware_detail

    hw = load_gpu(name)
    if as_json:
        return echo_json(hw.model_dump(mode="json"))
    out().print(hardware_detail(hw))
