"""`archcalc show`, `convert` and `list`: specs themselves."""

from __future__ import annotations

from pathlib import Path

import click

from archcalc import api
from archcalc.cli.common import echo_json, json_option, out, warn
from archcalc.errors import InputError
from archcalc.files import check_output, write_atomic


def _load_with_report(model: str):
    from archcalc.spec.catalog import load_model

    spec, mapping = load_model(model)
    warn(mapping.warnings if mapping else ())
    return spec, mapping


@click.command()
@click.argument("model")
@click.option("--json", "as_json", is_flag=True, help="Print the spec and the mapping report as JSON.")
def show(model, as_json):
    """The normalised spec of MODEL and, for a config.json, the mapping report."""
    from archcalc.spec.catalog import spec_to_yaml

    spec, mapping = _load_with_report(model)
    if as_json:
        doc = {"spec": spec.model_dump(mode="json")}
        if mapping:
            doc["mapping"] = {"used": mapping.used, "defaulted": mapping.defaulted, "ignored": mapping.ignored,
                              "warnings": mapping.warnings}
        return echo_json(doc)
    from archcalc.report.size import mapping_tables

    console = out()
    console.print(spec_to_yaml(spec), markup=False, highlight=False)
    if mapping:
        console.print(mapping_tables(mapping))


@click.command()
@click.argument("config")
@click.option("-o", "--output", help="Write here instead of stdout (atomically; its folder must exist).")
@click.option("--source", help="URL recorded as the spec's source.")
def convert(config, output, source):
    """Write the YAML spec of a Hugging Face CONFIG (config.json or its folder)."""
    from archcalc.spec.catalog import spec_to_yaml

    if not (config.endswith(".json") or Path(config).is_dir()):
        raise InputError(config, None, "expected a config.json file or a folder holding one")
    if output:  # before any work: a folder that exists, not the input itself
        check_output(output, config, Path(config) / "config.json" if Path(config).is_dir() else None)
    spec, _ = _load_with_report(config)
    if source:
        spec = spec.model_copy(update={"source": source})
    text = spec_to_yaml(spec, f"# archcalc spec converted from {Path(config).name}\n")
    if not output:
        click.echo(text, nl=False)
        return
    target = write_atomic(Path(output), text)
    click.echo(f"wrote {target}", err=True)


@click.command("list")
@json_option
def list_models(as_json):
    """The bundled model specs."""
    from archcalc.files import bundled_names

    rows = []
    for name in bundled_names("specs"):
        r = api.size(name, context=1)
        rows.append((name, r.params.total, r.params.active, r.spec.source))
    if as_json:
        return echo_json([{"name": n, "params": t, "active": a, "source": s} for n, t, a, s in rows])
    from archcalc.report.size import model_list

    out().print(model_list(rows))
