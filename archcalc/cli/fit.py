"""`archcalc fit`."""

from __future__ import annotations

import click

from archcalc import api
from archcalc.cli.common import (
    MAX_CONTEXT,
    MAX_GPUS,
    MAX_TOKENS_PER_STEP,
    batch_option,
    dtype_option,
    echo_json,
    json_option,
    out,
    warn,
)
from archcalc.errors import InputError
from archcalc.ops.checkpoints import WEIGHT_FORMATS
from archcalc.serving.engines import ENGINES
from archcalc.serving.engines.llamacpp import LLAMACPP_UBATCH
from archcalc.serving.engines.vllm import VLLM_MAX_NUM_BATCHED_TOKENS


@click.command("fit")
@click.argument("model")
@click.option("--gpu", "gpu", metavar="NAME", help="Bundled device name or alias (see hardware/), or a profile YAML.")
@click.option("--all-gpus", is_flag=True, help="Table of every bundled device instead of one plan.")
@click.option("--gpus", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True, help="GPUs.")
@click.option("--tp", type=click.IntRange(1, MAX_GPUS),
              help="Tensor-parallel degree (default: --gpus / --pp); must divide the heads.")
@click.option("--pp", type=click.IntRange(1, MAX_GPUS), default=1, show_default=True,
              help="vLLM: pipeline stages (--pipeline-parallel-size), each a TP group holding consecutive layers.")
@click.option("--tensor-split", metavar="P0,P1,...",
              help="llama.cpp: each GPU's proportion of the layers (-ts 3,1); default: even.")
@click.option("--context", type=click.IntRange(1, MAX_CONTEXT),
              help="Tokens per sequence (vLLM: max_model_len; default: the model's max context).")
@batch_option
@dtype_option
@click.option("--kv-dtype", help="KV-cache type (default bf16; llamacpp f16). plain: fp32 bf16 fp16 fp8 int8; vllm "
                                 "adds fp8_e4m3 fp8_e5m2; llamacpp: f32 f16 bf16 q8_0 q4_0 q4_1 iq4_nl q5_0 q5_1.")
@click.option("--engine", type=click.Choice(list(ENGINES)), default="vllm", show_default=True,
              help="Whose memory rules (README: fit).")
@click.option("--gpu-memory-utilization", type=float, default=0.9, show_default=True,
              help="vLLM: the fraction of total memory the instance may use.")
@click.option("--max-num-batched-tokens", type=click.IntRange(1, MAX_TOKENS_PER_STEP),
              default=VLLM_MAX_NUM_BATCHED_TOKENS, show_default=True,
              help="vLLM: tokens per scheduled step (the prefill chunk; the sliding-window budget).")
@click.option("--ubatch", type=click.IntRange(1, MAX_TOKENS_PER_STEP), default=LLAMACPP_UBATCH, show_default=True,
              help="llama.cpp: n_ubatch (the compute-buffer chunk; the SWA cache size).")
@click.option("--kv-dtype-v", help="llama.cpp: the V cache's type (-ctv) when it differs from --kv-dtype (-ctk).")
@click.option("--block-size", type=click.Choice(["1", "8", "16", "32", "64", "128", "256"]), default="16",
              show_default=True, help="vLLM: tokens per KV-cache block.")
@click.option("--kv-unified/--no-kv-unified", default=True, show_default=True,
              help="llama.cpp: one KV cache for every slot, or one stream per slot (each context / batch cells).")
@click.option("--swa-full", is_flag=True, help="llama.cpp: sliding-window layers cache the whole context.")
@click.option("--llamacpp-build", type=click.IntRange(1, 10**6), metavar="N",
              help="llama.cpp: the build (bN) whose cache rules apply; before 6969 the padding followed -fa. "
                   "Default: the current rules.")
@click.option("--flash-attn/--no-flash-attn", default=True, show_default=True,
              help="llama.cpp -fa: before b6969 the cache was padded to 256 cells with it, 32 without.")
@click.option("--vllm-version", metavar="X.Y.Z",
              help="vLLM: the release whose rules apply (0.8.0 on; the KV-token count, hybrid paging and prefix "
                   "caching changed between releases). Default: the newest read (README: fit).")
@click.option("--enable-prefix-caching/--no-enable-prefix-caching", "prefix_caching", default=None,
              help="vLLM: prefix caching; with linear layers each request holds 2 state pages, not 1. Default: the "
                   "release's (on for hybrid models since 0.26.0).")
@click.option("--weights", type=click.Choice(list(WEIGHT_FORMATS)),
              help="A GGUF checkpoint's mix instead of --dtype for the weights (llama.cpp's per-tensor types).")
@click.option("--mtp", is_flag=True, help="Also load the checkpoint's multi-token-prediction modules (MTP speculative "
                                         "decoding); size reports them apart.")
@click.option("--reserve", help="Runtime reserve per GPU, e.g. 2GiB or bytes (default per engine: plain 512 MiB, "
                                "vllm non-torch 1 GiB, 2 GiB with TP; llamacpp 1024 MiB fit margin).")
@json_option
def fit(model, gpu, all_gpus, gpus, tp, pp, tensor_split, context, batch, dtype, kv_dtype, engine, gpu_memory_utilization,
        max_num_batched_tokens, ubatch, kv_dtype_v, block_size, kv_unified, swa_full, llamacpp_build, flash_attn,
        vllm_version, prefix_caching, weights, mtp, reserve, as_json):
    """Does MODEL fit: a memory plan per GPU, a verdict, and the largest
    context, largest batch and fewest GPUs that fit."""
    if bool(gpu) == all_gpus:
        raise InputError(None, "--gpu", "give one device with --gpu NAME, or --all-gpus")
    options = dict(gpus=gpus, tp=tp, context=context, batch=batch, dtype=dtype, kv_dtype=kv_dtype, engine=engine,
                   gpu_memory_utilization=gpu_memory_utilization, max_num_batched_tokens=max_num_batched_tokens,
                   ubatch=ubatch, reserve=reserve, weights=weights, kv_unified=kv_unified, swa_full=swa_full,
                   block_size=int(block_size), kv_dtype_v=kv_dtype_v, mtp=mtp, pp=pp, tensor_split=tensor_split,
                   llamacpp_build=llamacpp_build, flash_attn=flash_attn, vllm_version=vllm_version,
                   prefix_caching=prefix_caching)
    from archcalc.report import fit as views

    if all_gpus:
        result = api.fit_all_gpus(model, **options)
        warn(result.warnings)
        if as_json:
            return echo_json(result.to_dict())
        return out().print(views.fit_all_table(result.rows))
    result = api.fit(model, gpu, **options)
    warn(result.warnings)
    if as_json:
        return echo_json(result.to_dict())
    out().print(views.fit_tables(result.plan, result.solutions))
