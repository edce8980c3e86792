"""`archcalc train`."""

from __future__ import annotations

import click

from archcalc import api
from archcalc.cli.common import MAX_BATCH, MAX_CONTEXT, MAX_GPUS, echo_json, json_option, out, warn
from archcalc.errors import InputError
from archcalc.training.layout import PRECISIONS, RECOMPUTES
from archcalc.training.plan import SOLVE_GOALS
from archcalc.training.tensors import OPTIMIZERS

MAX_TOKENS = 10**16  # a run's token budget: 1,000× the largest published pretraining run (~15-36T)
MAX_PRICE = 10**6  # per GPU-hour, in the user's currency


def _positive(value: float | None, name: str, top: float) -> float | None:
    if value is not None and not 0 < value <= top:
        raise InputError(None, name, f"{value:g}; give a number in (0, {top:g}]")
    return value


@click.command("train")
@click.argument("model")
@click.option("--gpu", "gpu", required=True, metavar="NAME", help="Bundled device name or alias, or a profile YAML.")
@click.option("--gpus", type=click.IntRange(1, MAX_GPUS), help="GPUs (default: the fewest that fit).")
@click.option("--seq", type=click.IntRange(1, MAX_CONTEXT),
              help="Tokens per sequence (default: the spec's training.context, else 4096).")
@click.option("--global-batch", "global_batch", type=click.IntRange(1, MAX_CONTEXT * MAX_BATCH),
              help="Tokens per optimizer step (default: about 4M, a whole number of sequences).")
@click.option("--micro-batch", type=click.IntRange(1, MAX_BATCH), help="Sequences per micro-batch on one rank.")
@click.option("--grad-accum", type=click.IntRange(1, MAX_BATCH),
              help="Micro-batches per step (with --micro-batch: sets the global batch).")
@click.option("--tp", type=click.IntRange(1, MAX_GPUS), help="Tensor-parallel ranks.")
@click.option("--pp", type=click.IntRange(1, MAX_GPUS), help="Pipeline stages (1F1B).")
@click.option("--dp", type=click.IntRange(1, MAX_GPUS), help="Data-parallel ranks (default: what --gpus leaves).")
@click.option("--ep", type=click.IntRange(1, MAX_GPUS), help="Expert-parallel ranks (inside dp).")
@click.option("--cp", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True,
              help="Context-parallel ranks (ring attention).")
@click.option("--zero", type=click.IntRange(0, 3), help="ZeRO stage (default 1: Megatron's distributed optimizer).")
@click.option("--fsdp", is_flag=True, help="FSDP2 (ZeRO 3).")
@click.option("--recompute", type=click.Choice(RECOMPUTES), help="Activation recomputation.")
@click.option("--no-sequence-parallel", is_flag=True, help="TP without sequence parallelism (norms replicated).")
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), default="adamw", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default="bf16-mixed", show_default=True)
@click.option("--grad-dtype", type=click.Choice(["fp32", "bf16"]), default="fp32", show_default=True,
              help="Gradient dtype (fp32: Megatron's main_grad, FSDP2's reduce dtype; bf16: the ZeRO paper's).")
@click.option("--attention", type=click.Choice(["flash", "eager"]), default="flash", show_default=True,
              help="flash: no S×S scores kept; eager: HF's explicit softmax(QKᵀ)V.")
@click.option("--tokens", type=float, help="The run's token budget (default: the spec's training.tokens, else 20 "
                                           "per parameter, Chinchilla).")
@click.option("--price-per-gpu-hour", type=float, help="Cost of one GPU-hour, for the run's cost.")
@click.option("--reserve", help="Runtime reserve per GPU, e.g. 4GiB (default 2 GiB).")
@click.option("--solve", type=click.Choice(SOLVE_GOALS), default="auto", show_default=True,
              help="layout: the fastest layout on --gpus; gpus: the fewest GPUs that fit; none: the layout given; "
                   "auto: none when any layout option is given, else layout (with --gpus) or gpus.")
@click.option("--top", type=click.IntRange(0, 100), default=5, show_default=True,
              help="Runners-up the solver lists.")
@json_option
def train(model, gpu, gpus, seq, global_batch, micro_batch, grad_accum, tp, pp, dp, ep, cp, zero, fsdp, recompute,
          no_sequence_parallel, optimizer, precision, grad_dtype, attention, tokens, price_per_gpu_hour, reserve,
          solve, top, as_json):
    """Training MODEL on GPUs: memory per rank and its binding term, the step's
    compute, communication and bubble, MFU, the run's time, GPU-hours, cost and
    energy; the fastest layout (or the fewest GPUs) when no layout is given."""
    if global_batch is not None and grad_accum is not None:
        raise InputError(None, "--grad-accum", "give the global batch once: --global-batch TOKENS, or "
                                               "--micro-batch b with --grad-accum n")
    result = api.train(model, gpu, gpus=gpus, seq=seq, global_batch_tokens=global_batch, micro_batch=micro_batch,
                       grad_accum=grad_accum, tp=tp, pp=pp, dp=dp, ep=ep, cp=cp, zero=zero, fsdp=fsdp,
                       recompute=recompute, sequence_parallel=not no_sequence_parallel, optimizer=optimizer,
                       precision=precision, grad_dtype=grad_dtype, attention=attention,
                       tokens=_positive(tokens, "--tokens", MAX_TOKENS),
                       price_per_gpu_hour=_positive(price_per_gpu_hour, "--price-per-gpu-hour", MAX_PRICE),
                       reserve=reserve, solve=solve, top=top)
    warn(result.warnings)
    if as_json:
        return echo_json(result.to_dict())
    from archcalc.report.train import train_tables

    out().print(train_tables(result))
