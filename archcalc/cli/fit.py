"""`archcalc fit`: parse, call fit.py, hand the results to report_fit.py.

Registered on the `archcalc` group in cli.py; bad input raises InputError or
a click error, which the group prints as one `error:` line with exit status 2.
"""

from __future__ import annotations

import json
from dataclasses import replace

import click

from archcalc.cli.common import load as _load
from archcalc.cli.common import out as _out
from archcalc.cli.common import warn as _warn
from archcalc.errors import InputError
from archcalc.fit.deployment import Deployment, parse_bytes
from archcalc.fit.engines import ENGINES
from archcalc.fit.engines.llamacpp import LLAMACPP_UBATCH
from archcalc.fit.engines.vllm import VLLM_MAX_NUM_BATCHED_TOKENS
from archcalc.fit.planner import Planner, check_deployment, fit_all, min_gpus, warnings
from archcalc.hardware.profile import load_hardware
from archcalc.ops.dtypes import WEIGHT_DTYPES
from archcalc.report import fit as report_fit


@click.command("fit")
@click.argument("model")
@click.option("--gpu", "gpu", metavar="NAME", help="Bundled device name or alias (see hardware/), or a profile YAML.")
@click.option("--all-gpus", is_flag=True, help="Table of every bundled device instead of one plan.")
@click.option("--gpus", type=click.IntRange(min=1), default=1, show_default=True, help="GPUs.")
@click.option("--tp", type=click.IntRange(min=1), help="Tensor-parallel degree (default: --gpus); must divide the heads.")
@click.option("--context", type=click.IntRange(min=1), help="Tokens per sequence (vLLM: max_model_len; default: the "
                                                            "model's max context).")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Sequences served at once.")
@click.option("--dtype", type=click.Choice(WEIGHT_DTYPES), default="bf16", show_default=True, help="Weight dtype.")
@click.option("--kv-dtype", help="KV-cache type (default bf16; llamacpp f16). plain: fp32 bf16 fp16 fp8 int8; vllm "
                                 "adds fp8_e4m3 fp8_e5m2; llamacpp: f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1.")
@click.option("--engine", type=click.Choice(list(ENGINES)), default="plain", show_default=True,
              help="Whose memory rules (README: fit).")
@click.option("--gpu-memory-utilization", type=float, default=0.9, show_default=True,
              help="vLLM: the fraction of total memory the instance may use.")
@click.option("--max-num-batched-tokens", type=click.IntRange(min=1), default=VLLM_MAX_NUM_BATCHED_TOKENS,
              show_default=True, help="vLLM: tokens per scheduled step (the prefill chunk; the sliding-window budget).")
@click.option("--ubatch", type=click.IntRange(min=1), default=LLAMACPP_UBATCH, show_default=True,
              help="llama.cpp: n_ubatch (the compute-buffer chunk; the SWA cache size).")
@click.option("--reserve", help="Runtime reserve per GPU, e.g. 2GiB or bytes (default per engine: plain 512 MiB, "
                                "vllm non-torch 1 GiB, 2 GiB with TP; llamacpp 1024 MiB fit margin).")
@click.option("--json", "as_json", is_flag=True, help="Print the archcalc.fit/1 JSON document (README: fit).")
def fit(model, gpu, all_gpus, gpus, tp, context, batch, dtype, kv_dtype, engine, gpu_memory_utilization,
        max_num_batched_tokens, ubatch, reserve, as_json):
    """Does MODEL fit: a memory plan per GPU, a verdict, and the largest
    context, largest batch and fewest GPUs that fit."""
    if bool(gpu) == all_gpus:
        raise InputError(None, "--gpu", "give one device with --gpu NAME, or --all-gpus")
    spec, _ = _load(model)
    dep = Deployment(engine=engine, gpus=gpus, tp=tp, weight_dtype=dtype, kv_dtype=kv_dtype,
                     gpu_memory_utilization=gpu_memory_utilization, max_num_batched_tokens=max_num_batched_tokens,
                     ubatch=ubatch, reserve=parse_bytes(reserve) if reserve is not None else None)
    if tp and tp > gpus and gpus == 1:  # --tp alone: that many GPUs
        dep = replace(dep, gpus=tp)
    check_deployment(spec, dep)
    context = context or spec.max_context
    for w in warnings(spec, dep, context):
        _warn(w)
    if all_gpus:
        rows = fit_all(spec, dep, context, batch)
        plan0 = rows[0][1]
        if as_json:
            click.echo(json.dumps(report_fit.fit_all_json(rows, plan0), indent=2))
        else:
            _out().print(report_fit.fit_all_table(rows, plan0))
        return
    hardware = load_hardware(gpu)
    planner = Planner(spec, hardware, dep)
    plan = planner.plan(context, batch)
    solutions = {"max_context": planner.max_context(batch), "max_batch": planner.max_batch(context),
                 "min_gpus": min_gpus(spec, hardware, dep, context, batch)}
    if as_json:
        click.echo(json.dumps(report_fit.fit_json(plan, solutions, warnings(spec, dep, context)), indent=2))
        return
    _out().print(report_fit.fit_tables(plan, solutions))
