"""`archcalc lint`."""

from __future__ import annotations

import sys

import click

from archcalc import api
from archcalc.cli.common import echo_json, json_option, out, warn
from archcalc.linter import SEVERITIES, at_least, fails

FAIL_ON = (*SEVERITIES, "never")
FAIL_STATUS = 1  # a finding at --fail-on or above; 2 stays bad input


@click.command()
@click.argument("model")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default="error", show_default=True,
              help="Exit with status 1 when a finding is at this severity or above (never: always 0).")
@click.option("--min-severity", type=click.Choice(SEVERITIES), default="info", show_default=True,
              help="Show findings at this severity or above (the counts and --fail-on still see all).")
@json_option
def lint(model, fail_on, min_severity, as_json):
    """Check MODEL against the conventions of published models, with the evidence for each."""
    result = api.lint(model)
    warn(result.warnings)
    spec, findings = result.spec, result.findings
    shown = at_least(findings, min_severity)
    if as_json:
        echo_json(result.to_dict(min_severity))
    else:
        from archcalc.report.lint import lint_table

        out().print(lint_table(spec, findings, shown, min_severity))
    if fails(findings, fail_on):
        sys.exit(FAIL_STATUS)  # not click's Exit: the group runs click in non-standalone mode, which returns it
