"""The `archcalc` command line: a thin layer over archcalc.api.

Each command lives in its own module and is imported only when it runs, so
`archcalc size NAME` never loads the roofline, fit or plotting code (nor
torch).  Bad input, click's or ours, is one `error:` line on stderr and exit
status 2.  A group without a subcommand (`archcalc`, `archcalc hardware`)
prints its help and exits 0.  Output that the terminal's encoding cannot
hold (×, ≈, µ, box drawing under PYTHONIOENCODING=ascii) degrades to ASCII
instead of failing."""

from __future__ import annotations

import codecs
import os
import sys
from importlib import import_module

import click

from archcalc.errors import InputError

USAGE_ERROR = 2

# What the output's characters become on a stream that cannot encode them; anything else: "?".
ASCII_FALLBACK = {"×": "x", "≈": "~", "µ": "u", "μ": "u", "≤": "<=", "≥": ">=", "≠": "!=", "—": "-", "–": "-",
                  "…": "...", "→": "->", "←": "<-", "·": ".", "÷": "/", "±": "+-", "√": "sqrt", "Σ": "sum",
                  "‘": "'", "’": "'", "“": '"', "”": '"', "²": "^2", "³": "^3", "⁻": "^-", "¹": "^1", "✓": "ok",
                  "✗": "x", "•": "*", "▏": "|", "█": "#", "◂": "<", "▸": ">", "ᵀ": "^T", "§": "S",
                  "▲": "^", "▼": "v", "−": "-", "α": "alpha", "β": "beta", "θ": "theta", "π": "pi", "φ": "phi",
                  "⌈": "ceil(", "⌉": ")", "⌊": "floor(", "⌋": ")", "∝": "~"}
FALLBACK_ERRORS = "archcalc-ascii"


def _ascii_fallback(err: UnicodeError):
    if not isinstance(err, UnicodeEncodeError):
        raise err
    return "".join(ASCII_FALLBACK.get(c, "?") for c in err.object[err.start:err.end]), err.end


codecs.register_error(FALLBACK_ERRORS, _ascii_fallback)


def degrade_unencodable_output() -> None:
    """Make stdout and stderr write what their encoding cannot hold as ASCII look-alikes
    (errors="archcalc-ascii"), not raise UnicodeEncodeError; the output stays in its encoding."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and (stream.errors or "strict") == "strict":
            try:
                reconfigure(errors=FALLBACK_ERRORS)
            except (ValueError, OSError):  # a closed or detached stream: leave it
                pass


# command name -> "module:function", loaded on first use
COMMANDS = {
    "size": "archcalc.cli.size:size",
    "show": "archcalc.cli.spec:show",
    "convert": "archcalc.cli.spec:convert",
    "list": "archcalc.cli.spec:list_models",
    "roofline": "archcalc.cli.roofline:roofline",
    "fit": "archcalc.cli.fit:fit",
    "compare": "archcalc.cli.compare:compare",
    "hardware": "archcalc.cli.hardware:hardware",
    "calibrate": "archcalc.cli.calibrate:calibrate",
    "lint": "archcalc.cli.lint:lint",
    "sweep": "archcalc.cli.sweep:sweep",
    "train": "archcalc.cli.train:train",
}


class ArchcalcGroup(click.Group):
    """Loads commands lazily; turns every input error into one line and exit 2."""

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module, attr = COMMANDS[name].split(":")
        return getattr(import_module(module), attr)

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        degrade_unencodable_output()
        try:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as e:  # `archcalc`, `archcalc hardware`: the help, not an error
            click.echo(e.ctx.get_help())
            sys.exit(0)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("aborted", err=True)
            sys.exit(1)
        except click.UsageError as e:
            where = f"{e.ctx.command_path}: " if e.ctx else ""
            click.echo(f"error: {where}{e.format_message()}", err=True)
            sys.exit(USAGE_ERROR)
        except InputError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(USAGE_ERROR)


@click.group(cls=ArchcalcGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="archcalc")
def cli() -> None:
    """Architecture calculator for Transformer language models.

    MODEL is a YAML spec, a Hugging Face config.json (or a folder holding
    one), a bundled name (see `archcalc list`), or a Hugging Face Hub id
    (meta-llama/Llama-3.1-8B).
    """


def main() -> None:
    # pydantic looks for plugins (observability hooks) by scanning every installed distribution's entry
    # points when archcalc's first model class is built: ~100 ms of each command's start in an environment
    # with torch and transformers, for hooks archcalc has no use for.  A user's own setting is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    cli()
