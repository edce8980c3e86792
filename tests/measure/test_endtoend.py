"""End-to-end step timing (archcalc.measure.endtoend) and the reference model's KV cache it runs on.

The cache is checked exactly: cached prefill + decode logits = the full forward's,
and what each layer keeps = archcalc's KV accounting.  Timings only get loose
sanity bands (positive, finite, a decode step cheaper than a 4 × 256-token
prefill, which is > 10× its work), nothing a loaded machine could flake.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch  # noqa: E402  (a dev dependency: missing torch is an error, never a skip)
from conftest import debug_spec  # noqa: E402
from test_reference_model import VARIANTS  # noqa: E402

from archcalc.errors import InputError
from archcalc.measure.endtoend import MISSING_TRANSFORMERS, StepTimes, sdpa_attention, time_hf, time_reference
from archcalc.measure.reference import build_reference_model
from archcalc.ops.layers import model_ops
from archcalc.ops.op import cached_tokens
from archcalc.ops.workload import Workload
from archcalc.spec.catalog import spec_from_dict
from archcalc.spec.hf import spec_dict_from_config

HF_DATA = Path(__file__).parents[1] / "data" / "hf"
B = 2
# A prefill, a 3-token chunk (crosses the sliding-window variant's window of 3), then decode steps.
CHUNKS = (5, 3, 1, 1, 1)
# No variant is excluded: every position scheme (RoPE, learned, sinusoidal, ALiBi, none) is offset by
# the tokens already cached, and every residual scheme, norm and FFN acts per token.


def cached_run(model, tokens: torch.Tensor, chunks=CHUNKS):
    """Logits of `tokens` fed chunk by chunk through one cache, and the cache."""
    cache = model.new_cache()
    with torch.inference_mode():
        logits = torch.cat([model(chunk, cache) for chunk in tokens.split(chunks, 1)], 1)
    return logits, cache


def seeded_model(spec, dtype=None):
    torch.manual_seed(0)
    return build_reference_model(spec, "cpu", dtype)


@pytest.mark.parametrize("variant", VARIANTS)
def test_prefill_then_cached_decode_gives_the_full_forward_logits(variant):
    spec = debug_spec(**VARIANTS[variant])
    model = seeded_model(spec)
    tokens = torch.randint(0, spec.vocab_size, (B, sum(CHUNKS)))
    with torch.inference_mode():
        full = model(tokens)
    stepped, cache = cached_run(model, tokens)
    torch.testing.assert_close(stepped, full, rtol=1e-4, atol=1e-4)
    assert cache.length == sum(CHUNKS)


SDPA_VARIANTS = [v for v in VARIANTS if sdpa_attention(debug_spec(**VARIANTS[v])) == "sdpa"]


@pytest.mark.parametrize("variant", SDPA_VARIANTS)
def test_sdpa_through_the_cache_gives_the_explicit_full_forward_logits(variant):
    # torch's SDPA (is_causal for a whole context, the boolean mask after a cache or under a window)
    # against the explicit core's full forward: the timed reference computes the same model
    spec = debug_spec(**VARIANTS[variant])
    torch.manual_seed(0)
    model = build_reference_model(spec, "cpu", attention="sdpa")
    tokens = torch.randint(0, spec.vocab_size, (B, sum(CHUNKS)))
    with torch.inference_mode():
        full = seeded_model(spec)(tokens)
    stepped, _ = cached_run(model, tokens)
    torch.testing.assert_close(stepped, full, rtol=1e-4, atol=1e-4)


def test_timing_uses_sdpa_except_where_it_lacks_an_option():
    assert "sliding-window" in SDPA_VARIANTS and "standard" in SDPA_VARIANTS
    gemma2 = spec_from_dict(spec_dict_from_config(json.loads((HF_DATA / "gemma-2-9b.json").read_text()),
                                                  "gemma-2-9b.json")[0], "gemma-2-9b.json")
    assert sdpa_attention(gemma2) == "explicit"  # soft-capped logits
    assert sdpa_attention(debug_spec(position={"kind": "alibi"})) == "explicit"


@pytest.mark.parametrize("variant", ["standard", "sliding-window", "mla", "mla-q-lora"])
def test_each_layer_keeps_what_archcalc_counts(variant):
    # kv_width values per token (K·(dk + dv), or MLA's latent + rope key) for min(context, window) tokens
    spec = debug_spec(**VARIANTS[variant])
    context = sum(CHUNKS)
    _, cache = cached_run(seeded_model(spec), torch.randint(0, spec.vocab_size, (B, context)))
    cores = {op.dims.layer_kind: op.dims for op in model_ops(spec, Workload.decode(context)) if op.kind == "attention"}
    for kind, layer in zip(spec.layer_attention, cache.layers):
        dims = cores[kind]
        assert {t.shape[:2] for t in layer.kept} == {(B, cached_tokens(context, dims.window))}
        assert sum(t[0, 0].numel() for t in layer.kept) == dims.kv_width


def test_last_logits_are_the_last_position_of_all():
    model = seeded_model(debug_spec())
    tokens = torch.randint(0, model.spec.vocab_size, (B, 7))
    with torch.inference_mode():
        torch.testing.assert_close(model(tokens, logits="last"), model(tokens)[:, -1:])


@pytest.mark.parametrize("variant", ["standard", "mla", "learned-positions", "alibi-sandwich-qknorm",
                                     "sinusoidal-post-fullqknorm", "hyper-dynamic", "moe"])
def test_bf16_model_runs_cached_steps_in_bf16(variant):
    # fp32 position tables, RoPE angles and ALiBi biases must not promote the activations
    model = seeded_model(debug_spec(**VARIANTS[variant]), torch.bfloat16)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    stepped, _ = cached_run(model, torch.randint(0, model.spec.vocab_size, (B, sum(CHUNKS))))
    assert stepped.dtype == torch.bfloat16
    assert torch.isfinite(stepped).all()


# ---- timing -----------------------------------------------------------------


def tiny_llama_config() -> dict:
    """Llama 3.2 1B's config.json shrunk to D 128, 2 layers, GQA 4/2 of 32 dims, F 256, V 512."""
    cfg = json.loads((HF_DATA / "llama-3.2-1b.json").read_text())
    cfg.update(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
               intermediate_size=256, vocab_size=512, bos_token_id=0, eos_token_id=1)
    return cfg


def tiny_llama_spec():
    data, _ = spec_dict_from_config(tiny_llama_config(), "tiny-llama")
    return spec_from_dict({"name": "tiny-llama", **data}, "tiny-llama")


# The same model timed both ways.
TIMERS = {
    "reference": lambda **kw: time_reference(tiny_llama_spec(), **kw),
    "hf": lambda **kw: time_hf(tiny_llama_config(), **kw),
}
PROMPT, BATCH, STEPS = 256, 4, 4


@pytest.mark.parametrize("timer", TIMERS)
def test_step_times_are_positive_and_a_decode_step_is_cheaper_than_the_prefill(timer):
    times = TIMERS[timer](prompt=PROMPT, batch=BATCH, decode_steps=STEPS, repeats=5)
    assert isinstance(times, StepTimes)
    seconds = [times.prefill_s, times.decode_step_s, *times.decode_steps_s]
    assert all(math.isfinite(s) and s > 0 for s in seconds)
    assert len(times.decode_steps_s) == STEPS
    assert min(times.decode_steps_s) <= times.decode_step_s <= max(times.decode_steps_s)
    assert times.context == tuple(range(PROMPT + 1, PROMPT + STEPS + 1))
    assert (times.batch, times.prompt, times.peak_bytes) == (BATCH, PROMPT, None)
    assert times.decode_step_s < times.prefill_s


def test_bf16_reference_timing_runs_on_cpu():
    times = time_reference(debug_spec(), prompt=8, batch=1, decode_steps=2, dtype=torch.bfloat16, repeats=1)
    assert times.prefill_s > 0 and times.decode_step_s > 0


@pytest.mark.parametrize("field", ["prompt", "batch", "decode_steps", "repeats"])
def test_counts_below_one_are_input_errors(field):
    counts = {"prompt": 8, "batch": 1, "decode_steps": 1, "repeats": 1, field: 0}
    with pytest.raises(InputError, match=f"{field} must be at least 1"):
        time_reference(debug_spec(), **counts)


def test_learned_positions_past_max_context_are_an_input_error():
    spec = debug_spec(**VARIANTS["learned-positions"])
    with pytest.raises(InputError, match="max_context 128"):
        time_reference(spec, prompt=128, batch=1, decode_steps=1)


def test_time_hf_without_transformers_is_an_input_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` raise ImportError
    with pytest.raises(InputError) as err:
        time_hf(tiny_llama_config(), prompt=8, batch=1, decode_steps=1)
    assert str(err.value) == f"--measure: {MISSING_TRANSFORMERS}"
    assert MISSING_TRANSFORMERS == "timing a Hugging Face model needs transformers: pip install transformers"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("timer", TIMERS)
def test_cuda_timing_reports_peak_memory(timer):
    times = TIMERS[timer](prompt=PROMPT, batch=BATCH, decode_steps=STEPS, device="cuda", dtype=torch.bfloat16)
    weight_bytes = 2 * sum(p.numel() for p in build_reference_model(tiny_llama_spec()).parameters())
    assert times.peak_bytes is not None and times.peak_bytes > weight_bytes  # weights + cache + activations
    assert 0 < times.decode_step_s < times.prefill_s
