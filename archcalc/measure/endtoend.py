"""Whole-step wall-clock measurements of real implementations, to validate archcalc's step times.

One run is a prefill (B sequences × `prompt` tokens, logits at each sequence's
last token only, as archcalc's prefill workload and inference engines compute
them) followed by `decode_steps` decode steps (B × 1 token each) through the
model's own KV cache.  Two implementations: archcalc's plain-torch reference
model built from a ModelSpec (`time_reference`; its attention through SDPA, as
the op list's "sdpa" convention times it, unless a layer needs what SDPA lacks:
soft-caps, sinks, ALiBi) and a Hugging Face model built from a config.json dict
(`time_hf`), both with random weights.

On a Linux CPU, glibc's default malloc hands large freed blocks back to the OS
and faults them in again on the next allocation: an eager step then pays page
faults on every activation (a 1 × 512 prefill of the 4-layer Llama in
scripts/validate.py: ~80 ms instead of ~57 ms).  The time model counts kernels,
not page faults, so timings meant to validate it run with a reusing allocator:
REUSING_MALLOC's glibc tunables, or jemalloc / TCMalloc as PyTorch's CPU
performance tuning guide recommends ("Switch Memory allocator").

Timing: one untimed warm-up run, then `repeats` runs; each step is timed
between device synchronisations (so queued GPU work is counted where it
happens) under torch.inference_mode(); the reported times are medians over the
repeats.
"""

from __future__ import annotations

import functools
import inspect
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from archcalc.errors import InputError
from archcalc.measure.reference import AttentionImpl, build_reference_model
from archcalc.measure.timing import synchronize
from archcalc.spec.model import ModelSpec

MISSING_TRANSFORMERS = "timing a Hugging Face model needs transformers: pip install transformers"
# glibc malloc tunables (glibc manual, "Memory Allocation Tunables") under which freed activations are
# reused: never give the heap's top back to the OS (trim_threshold 16 GiB), serve blocks up to glibc's
# largest mmap threshold (32 MiB on 64-bit) from the heap, and grow it 256 MiB at a time.
REUSING_MALLOC = ("glibc.malloc.trim_threshold=17179869184:glibc.malloc.mmap_threshold=33554432:"
                  "glibc.malloc.top_pad=268435456")


def sdpa_attention(spec: ModelSpec) -> AttentionImpl:
    """The reference model's attention for timing: SDPA, unless the spec needs what SDPA has no option
    for (logit soft-caps, attention sinks, ALiBi biases), as Hugging Face runs those models eagerly."""
    a = spec.attention
    return "explicit" if a.softcap is not None or a.sinks or spec.position.kind == "alibi" else "sdpa"


@dataclass(frozen=True)
class StepTimes:
    """Median seconds of one prefill and of one decode step; `context[i]` is the tokens step i attends to."""

    prefill_s: float  # B × prompt tokens, into an empty cache
    decode_step_s: float  # median of decode_steps_s: one step, B × 1 token
    decode_steps_s: tuple[float, ...]  # step i's median over the repeats
    context: tuple[int, ...]  # prompt + 1, ..., prompt + decode_steps
    batch: int
    prompt: int
    peak_bytes: int | None  # CUDA only: max_memory_allocated over the timed runs (weights included)


# A run is prefill() -> state, then decode(state, i) -> state for step i: the state is the model's cache.
Prefill = Callable[[], Any]
Decode = Callable[[Any, int], Any]


def time_reference(
    spec: ModelSpec,
    *,
    prompt: int,
    batch: int,
    decode_steps: int,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    repeats: int = 3,
) -> StepTimes:
    """Prefill and decode-step times of archcalc's reference model of `spec` (random weights; attention
    through SDPA where the spec allows, `sdpa_attention`)."""
    _check(prompt=prompt, batch=batch, decode_steps=decode_steps, repeats=repeats)
    if spec.position.kind == "learned" and prompt + decode_steps > spec.max_context:
        raise InputError(None, "--measure", f"learned positions stop at max_context {spec.max_context}")
    device = torch.device(device)
    torch.manual_seed(0)
    model = build_reference_model(spec, device, dtype, attention=sdpa_attention(spec)).eval()
    tokens = _tokens(spec.vocab_size, batch, prompt + decode_steps, device)

    def prefill():
        cache = model.new_cache()
        model(tokens[:, :prompt], cache, logits="last")
        return cache

    def decode(cache, i):
        model(tokens[:, prompt + i : prompt + i + 1], cache, logits="last")
        return cache

    return _measure(prefill, decode, prompt=prompt, batch=batch, decode_steps=decode_steps, device=device,
                    repeats=repeats)


def time_hf(
    config: dict,
    *,
    prompt: int,
    batch: int,
    decode_steps: int,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    repeats: int = 3,
    attn_implementation: str = "sdpa",
) -> StepTimes:
    """Prefill and decode-step times of the Hugging Face model a config.json dict describes (random
    weights, its default DynamicCache).  `attn_implementation="eager"` for the models HF refuses SDPA
    for (Gemma 2, gpt-oss)."""
    _check(prompt=prompt, batch=batch, decode_steps=decode_steps, repeats=repeats)
    device = torch.device(device)
    torch.manual_seed(0)
    model = _hf_model(config, device, dtype, attn_implementation)
    tokens = _tokens(model.config.get_text_config().vocab_size, batch, prompt + decode_steps, device)

    # `cache` is the name later transformers 5 releases give past_key_values (the old one still works there,
    # with a warning); earlier releases know only past_key_values.
    key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def prefill():
        return _cache_of(model(input_ids=tokens[:, :prompt], use_cache=True, logits_to_keep=1))

    def decode(cache, i):
        return _cache_of(model(input_ids=tokens[:, prompt + i : prompt + i + 1], use_cache=True,
                               logits_to_keep=1, **{key: cache}))

    return _measure(prefill, decode, prompt=prompt, batch=batch, decode_steps=decode_steps, device=device,
                    repeats=repeats)


def _cache_of(output) -> Any:
    """The cache a Hugging Face forward returns, under either of transformers 5's names for it."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _hf_model(config: dict, device: torch.device, dtype: torch.dtype, attn_implementation: str) -> torch.nn.Module:
    try:
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError:
        raise InputError(None, "--measure", MISSING_TRANSFORMERS) from None
    fields = dict(config)
    model_type = fields.pop("model_type", None)
    if model_type is None:
        raise InputError(None, "model_type", "config.json needs a model_type to build a Hugging Face model")
    with torch.device(device):  # weights created on the device, in dtype: no CPU or fp32 copy
        model = AutoModelForCausalLM.from_config(
            AutoConfig.for_model(model_type, **fields), attn_implementation=attn_implementation, dtype=dtype
        )
    return model.eval()


def _check(**counts: int) -> None:
    for name, value in counts.items():
        if value < 1:
            raise InputError(None, "--measure", f"{name} must be at least 1, got {value}")


def _tokens(vocab: int, batch: int, length: int, device: torch.device) -> torch.Tensor:
    """Random token ids [B, length]: the prompt, then one per decode step (fed, not sampled)."""
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (batch, length), generator=generator).to(device)


def _measure(prefill: Prefill, decode: Decode, *, prompt: int, batch: int, decode_steps: int,
             device: torch.device, repeats: int) -> StepTimes:
    """A warm-up run, then `repeats` timed runs; medians per step."""
    with torch.inference_mode():
        _run(prefill, decode, decode_steps, device)  # warm-up: kernels picked, allocator grown
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        runs = [_run(prefill, decode, decode_steps, device) for _ in range(repeats)]
    steps = tuple(statistics.median(run[i] for run in runs) for i in range(1, decode_steps + 1))
    return StepTimes(
        prefill_s=statistics.median(run[0] for run in runs),
        decode_step_s=statistics.median(steps),
        decode_steps_s=steps,
        context=tuple(range(prompt + 1, prompt + decode_steps + 1)),
        batch=batch,
        prompt=prompt,
        peak_bytes=torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
    )


def _run(prefill: Prefill, decode: Decode, decode_steps: int, device: torch.device) -> list[float]:
    """Seconds of the prefill, then of each decode step."""
    elapsed, state = _timed(prefill, device)
    times = [elapsed]
    for i in range(decode_steps):
        elapsed, state = _timed(functools.partial(decode, state, i), device)
        times.append(elapsed)
    return times


def _timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, Any]:
    """Seconds of fn() and its result; synchronised on both sides so the step's queued kernels count."""
    synchronize(device)
    start = time.perf_counter()
    out = fn()
    synchronize(device)
    return time.perf_counter() - start, out
