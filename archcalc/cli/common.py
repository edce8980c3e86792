"""What every command shares: the output console, warnings, loading MODEL."""

from __future__ import annotations

import click
from rich.console import Console

from archcalc.spec.catalog import load_model


def out() -> Console:
    """Terminal width on a terminal; 160 columns into a pipe or a file."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def load(model: str):
    """MODEL with the mapping report's warnings printed on stderr."""
    spec, mapping = load_model(model)
    for w in mapping.warnings if mapping else ():
        warn(w)
    return spec, mapping
