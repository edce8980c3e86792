"""The `archcalc` command line: parse options, call the library, hand the
results to report.  Bad input is one `error:` line on stderr and exit status 2."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import click

from archcalc.cli.common import load as _load
from archcalc.cli.common import out as _out
from archcalc.cli.common import warn as _warn
from archcalc.cli.fit import fit as fit_command
from archcalc.cost.totals import size as compute_size
from archcalc.errors import InputError
from archcalc.files import bundled_names
from archcalc.ops.conventions import CONVENTIONS, DEFAULT_CONVENTION
from archcalc.ops.dtypes import KV_DTYPES, WEIGHT_DTYPES
from archcalc.ops.workload import Workload
from archcalc.report import size as report
from archcalc.spec.catalog import load_model, spec_to_yaml

USAGE_ERROR = 2


class ArchcalcGroup(click.Group):
    """Turns every input error (click's or ours) into one line and exit 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
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
    one), or a bundled name (see `archcalc list`).
    """


@cli.command()
@click.argument("model")
@click.option("--context", type=click.IntRange(min=1), help="Tokens per sequence S (default: the model's max context).")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Sequences B.")
@click.option("--dtype", type=click.Choice(WEIGHT_DTYPES), default="bf16", show_default=True, help="Weight dtype.")
@click.option("--kv-dtype", type=click.Choice(KV_DTYPES), default="bf16", show_default=True, help="KV-cache dtype.")
@click.option("--flops-convention", type=click.Choice(list(CONVENTIONS)), default=DEFAULT_CONVENTION,
              show_default=True, help="How attention and elementwise FLOPs count (README: Conventions).")
@click.option("--layers", is_flag=True, help="Also list every operation of the step.")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document (README: JSON schema).")
def size(model, context, batch, dtype, kv_dtype, flops_convention, layers, as_json):
    """Parameters, weight memory, FLOPs per token and KV cache of MODEL."""
    spec, _ = _load(model)
    context = context or spec.max_context
    if context > spec.max_context:
        _warn(f"context {context:,} exceeds {spec.name}'s max context {spec.max_context:,}")
    wl = Workload.forward(context, batch, weight_dtype=dtype, kv_dtype=kv_dtype)
    convention = CONVENTIONS[flops_convention]
    result = compute_size(spec, wl, convention)
    if as_json:
        doc = report.size_json(result)
        if layers:
            doc["ops"] = [_op_json(op) for op in result.ops]
        click.echo(json.dumps(doc, indent=2))
        return
    out = _out()
    out.print(report.size_tables(result))
    if layers:
        out.print()
        out.print(report.ops_table(result.ops, convention))


def _op_json(op) -> dict:
    return {"name": op.name, "kind": op.kind, "component": op.component, "count": op.count, "dims": op.dims.to_dict(),
            "params": op.params, "flops": op.flops, "vector_flops": op.vector_flops, "weight_bytes": op.weight_bytes,
            "act_bytes": op.act_bytes, "kv_bytes": op.kv_bytes}


@cli.command()
@click.argument("model")
@click.option("--json", "as_json", is_flag=True, help="Print the spec and the mapping report as JSON.")
def show(model, as_json):
    """The normalised spec of MODEL and, for a config.json, the mapping report."""
    spec, mapping = _load(model)
    if as_json:
        doc = {"spec": spec.model_dump(mode="json")}
        if mapping:
            doc["mapping"] = {"used": mapping.used, "defaulted": mapping.defaulted, "ignored": mapping.ignored,
                              "warnings": mapping.warnings}
        click.echo(json.dumps(doc, indent=2, default=str))
        return
    out = _out()
    out.print(spec_to_yaml(spec), markup=False, highlight=False)
    if mapping:
        out.print(report.mapping_tables(mapping))


@cli.command()
@click.argument("config")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="Write here instead of stdout.")
@click.option("--source", help="URL recorded as the spec's source.")
def convert(config, output, source):
    """Write the YAML spec of a Hugging Face CONFIG (config.json or its folder)."""
    if not (config.endswith(".json") or Path(config).is_dir()):
        raise InputError(config, None, "expected a config.json file or a folder holding one")
    spec, mapping = _load(config)
    if source:
        spec = spec.model_copy(update={"source": source})
    header = f"# archcalc spec converted from {Path(config).name}\n"
    text = spec_to_yaml(spec, header)
    if not output:
        click.echo(text, nl=False)
        return
    # Write beside the target and rename, so a failure leaves nothing half-written.
    target = Path(output)
    fd, tmp = tempfile.mkstemp(dir=target.parent if str(target.parent) else ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, target)
    click.echo(f"wrote {target}", err=True)


@cli.command("list")
@click.option("--json", "as_json", is_flag=True)
def list_models(as_json):
    """The bundled model specs."""
    rows = []
    for name in bundled_names("specs"):
        spec, _ = load_model(name)
        r = compute_size(spec, Workload.forward(1), CONVENTIONS[DEFAULT_CONVENTION])
        rows.append((name, r.params.total, r.params.active, spec.source))
    if as_json:
        click.echo(json.dumps([{"name": n, "params": t, "active": a, "source": s} for n, t, a, s in rows], indent=2))
        return
    _out().print(report.model_list(rows))


@cli.group()
def hardware():
    """Bundled hardware profiles."""


@hardware.command("list")
@click.option("--json", "as_json", is_flag=True)
def hardware_list(as_json):
    """Every bundled device with its memory, bandwidth and peaks."""
    from archcalc.hardware.profile import all_hardware
    from archcalc.report.roofline import hardware_list as table

    profiles = all_hardware()
    if as_json:
        click.echo(json.dumps([hw.model_dump(mode="json") for hw in profiles], indent=2))
        return
    _out().print(table(profiles))


@hardware.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
def hardware_show(name, as_json):
    """One device: every number and its source."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.report.roofline import hardware_detail

    hw = load_hardware(name)
    if as_json:
        click.echo(json.dumps(hw.model_dump(mode="json"), indent=2))
        return
    _out().print(hardware_detail(hw))


ACT_DTYPES = ("bf16", "fp16", "fp32")


@cli.command()
@click.argument("model")
@click.option("--gpu", required=True, help="Hardware profile: a bundled name or alias, or a YAML file.")
@click.option("--phase", type=click.Choice(["prefill", "decode", "both"]), default="both", show_default=True)
@click.option("--prompt", type=click.IntRange(min=1), default=2048, show_default=True, help="Prefill tokens.")
@click.option("--context", type=click.IntRange(min=1), help="Context of the decode step shown (default prompt + gen).")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--gen", type=click.IntRange(min=1), default=256, show_default=True, help="Tokens generated per sequence.")
@click.option("--dtype", type=click.Choice(WEIGHT_DTYPES), default="bf16", show_default=True, help="Weight dtype.")
@click.option("--act-dtype", type=click.Choice(ACT_DTYPES), default="bf16", show_default=True)
@click.option("--kv-dtype", type=click.Choice(KV_DTYPES), default="bf16", show_default=True)
@click.option("--plot", "plot_path", help="Write a roofline chart (.png or .svg; needs matplotlib).")
@click.option("--json", "as_json", is_flag=True)
def roofline(model, gpu, phase, prompt, context, batch, gen, dtype, act_dtype, kv_dtype, plot_path, as_json):
    """Prefill and decode time of MODEL on a device, op by op."""
    from archcalc.cost.roofline import predict
    from archcalc.hardware.profile import load_hardware
    from archcalc.report.roofline import roofline_json, roofline_view

    spec, _ = _load(model)
    hw = load_hardware(gpu)
    context = context or prompt + gen
    if max(prompt + gen, context) > spec.max_context:
        _warn(f"context {max(prompt + gen, context):,} exceeds {spec.name}'s max context {spec.max_context:,}")
    dtypes = {"weight_dtype": dtype, "act_dtype": act_dtype, "kv_dtype": kv_dtype}
    preds = predict(spec, hw, prompt=prompt, context=context, gen=gen, batch=batch, **dtypes)
    if plot_path:
        from archcalc.report.plot import roofline_chart

        steps = {"prefill": preds[0].prefill, "decode": preds[0].decode}
        roofline_chart({k: v for k, v in steps.items() if phase in (k, "both")}, plot_path,
                       f"{spec.name} on {hw.name} (batch {batch}, prompt {prompt:,}, decode at {context:,})")
    if as_json:
        click.echo(json.dumps(roofline_json(preds, spec.name, hw, prompt, context, batch, gen), indent=2))
        return
    phases = ("prefill", "decode") if phase == "both" else (phase,)
    _out().print(roofline_view(preds, hw, phases, prompt, context, batch))


@cli.command()
@click.argument("models", nargs=-1, required=True)
@click.option("--context", type=click.IntRange(min=1), default=8192, show_default=True)
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--dtype", type=click.Choice(WEIGHT_DTYPES), default="bf16", show_default=True, help="Weight dtype.")
@click.option("--kv-dtype", type=click.Choice(KV_DTYPES), default="bf16", show_default=True)
@click.option("--gpu", help="Add fit and speed rows for this hardware profile.")
@click.option("--prompt", type=click.IntRange(min=1), default=2048, show_default=True, help="Prefill tokens (with --gpu).")
@click.option("--gen", type=click.IntRange(min=1), default=256, show_default=True, help="Generated tokens (with --gpu).")
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "csv"]), default="table", show_default=True)
@click.option("--json", "as_json", is_flag=True)
def compare(models, context, batch, dtype, kv_dtype, gpu, prompt, gen, fmt, as_json):
    """MODELS side by side; the first is the baseline the others are compared with."""
    from archcalc.cost.compare import compare as run_compare
    from archcalc.report import compare as report_compare

    specs = [_load(m)[0] for m in models]
    for spec in specs:
        if context > spec.max_context:
            _warn(f"context {context:,} exceeds {spec.name}'s max context {spec.max_context:,}")
    hw = None
    fit_rows = None
    if gpu:
        from archcalc.hardware.profile import load_hardware

        hw = load_hardware(gpu)
        fit_rows = _fit_rows(hw, context, batch, dtype, kv_dtype)
    result = run_compare(specs, context=context, batch=batch, dtype=dtype, kv_dtype=kv_dtype, hw=hw, prompt=prompt,
                         gen=gen, fit_metrics=fit_rows)
    if as_json:
        click.echo(json.dumps(report_compare.compare_json(result), indent=2))
    elif fmt == "markdown":
        click.echo(report_compare.compare_markdown(result), nl=False)
    elif fmt == "csv":
        click.echo(report_compare.compare_csv(result), nl=False)
    else:
        _out().print(report_compare.compare_table(result))


def _fit_rows(hw, context, batch, dtype, kv_dtype):
    """compare's fit rows: a plain single-GPU plan (the fit command has the engines)."""
    from archcalc.fit.deployment import Deployment
    from archcalc.fit.planner import Planner

    def rows(spec):
        planner = Planner(spec, hw, Deployment(weight_dtype=dtype, kv_dtype=kv_dtype))
        plan = planner.plan(context, batch)
        return {"fits": (f"fits one {hw.name} at {context:,} × {batch}", "text", plan.fits),
                "memory_per_gpu": (f"memory on one {hw.name} (weights, KV, activations, reserve)", "bytes", plan.total),
                "max_context_on_gpu": (f"largest context on one {hw.name} at batch {batch}", "tokens",
                                       planner.max_context(batch).value)}

    return rows


cli.add_command(fit_command)  # `archcalc fit` lives in cli_fit.py


def main() -> None:
    cli()
