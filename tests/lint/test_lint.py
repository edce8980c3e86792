"""archcalc lint: every rule on constructed specs that break it and on specs that
follow the convention (thresholds probed with the published values the rules
cite, never with the rules' own constants), every bundled spec (no error; the
findings of real models), the evidence recomputed from the bundled specs and
config.json fixtures, the README section, and the command line."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import BUNDLED, sized, spec_of

from archcalc.cli import cli
from archcalc.linter import EVIDENCE, RULES, SEVERITIES, SOURCES, Evidence, Finding, at_least, fails, lint, worst
from archcalc.spec.model import ModelSpec

ROOT = Path(__file__).parents[2]
HF = ROOT / "tests" / "data" / "hf"
DOC = ROOT / "README.md"  # its Lint section lists every rule

# A Llama-shaped 7.5B that follows every convention: D 4,096 = 32 heads × 128, GQA with 8 KV heads,
# SwiGLU d_ff 11,008 (Llama 2's 2.6875), 32 layers (aspect 128), Llama 3's 128,256-token vocabulary,
# pre-norm RMSNorm with a final norm, no biases, RoPE base 500,000 at 8k.
CLEAN = {"name": "clean", "d_model": 4096, "n_layers": 32, "vocab_size": 128256, "max_context": 8192,
         "attention": {"n_heads": 32, "n_kv_heads": 8}, "ffn": {"activation": "swiglu", "d_ff": 11008},
         "position": {"theta": 500000.0}}
# Llama 2 7B's recipe (arXiv:2307.09288) plus PaLM's z-loss.
CLEAN_TRAINING = {"dropout": 0.0, "weight_decay": 0.1, "z_loss": 1e-4, "learning_rate": 3e-4, "warmup_steps": 2000,
                  "tokens": 2e12}


def _merge(base: dict, changes: dict) -> dict:
    for key, value in changes.items():
        if value is None:
            base.pop(key, None)
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def spec(**changes) -> ModelSpec:
    """CLEAN with `changes`: a dict merges into its section, None drops a key."""
    return ModelSpec.model_validate(_merge(copy.deepcopy(CLEAN), changes))


def hits(s: ModelSpec) -> dict[str, str]:
    return {f.rule: f.severity for f in lint(s)}


def test_the_clean_spec_has_no_findings():
    assert lint(spec()) == []
    assert lint(spec(training=CLEAN_TRAINING)) == []


# (rule, severity, changes): a spec that breaks the rule.  Published shapes where there is one.
BREAKS = [
    # T5 11B: d_model 1,024, d_ff 65,536 (arXiv:1910.10683 §3.7)
    ("ffn.ratio", "warn", {"d_model": 1024, "attention": {"n_heads": 8}, "ffn": {"activation": "relu", "d_ff": 65536}}),
    ("ffn.ratio", "warn", {"ffn": {"d_ff": 2048}}),  # 0.5, under the flat band
    ("ffn.ratio", "info", {"ffn": {"d_ff": 14336}}),  # Llama 3 8B: 3.5
    ("ffn.ratio", "info", {"ffn": {"d_ff": 32768}}),  # Gemma 7B's 8
    ("ffn.gated", "info", {"ffn": {"activation": "gelu", "d_ff": 16384}}),  # GPT-3: plain 4·D
    # Gemma 7B: 16 heads × 256 = 4,096 on d_model 3,072
    ("heads.product", "info", {"d_model": 3072, "n_layers": 24, "attention": {"n_heads": 16, "head_dim": 256},
                               "ffn": {"d_ff": 8192}}),
    ("heads.dim", "warn", {"attention": {"n_heads": 8, "head_dim": 512}}),  # Gemma 4's global heads
    ("heads.dim", "warn", {"attention": {"n_heads": 40, "head_dim": 100}}),
    ("heads.dim", "info", {"attention": {"n_heads": 128}}),  # 4,096 / 128 = 32
    ("heads.tp", "info", {"d_model": 3584, "n_layers": 28, "attention": {"n_heads": 28, "n_kv_heads": 4},
                          "ffn": {"d_ff": 9728}}),  # Qwen2.5 7B's heads: no TP 8
    ("heads.tp", "info", {"attention": {"n_kv_heads": 1}}),  # MQA: the cache is replicated at every TP degree
    # A 67B with Falcon 7B's 71 query heads: 134 GB of bf16 weights and no TP degree 2-8 can split it
    ("heads.tp", "warn", {"d_model": 9088, "n_layers": 80, "attention": {"n_heads": 71, "n_kv_heads": 1},
                          "ffn": {"d_ff": 24576}}),
    ("heads.kv_cache", "info", {"attention": {"n_kv_heads": 32}}),  # Llama 2 7B's MHA
    ("heads.window", "info", {"attention": {"sliding_window": 8192}}),  # = max_context
    ("heads.window", "info", {"attention": {"sliding_window": 4096, "layer_types": ["global"] * 32}}),
    ("shape.aspect", "info", {"n_layers": 128}),  # 32
    ("shape.aspect", "info", {"n_layers": 8}),  # 512
    ("shape.aspect", "warn", {"n_layers": 2}),  # 2,048
    ("shape.aspect", "warn", {"d_model": 512, "n_layers": 64, "attention": {"n_heads": 4, "n_kv_heads": 4},
                              "ffn": {"d_ff": 1408}}),  # 8
    ("shape.tiles", "warn", {"d_model": 4100, "attention": {"head_dim": 128}}),
    ("shape.tiles", "info", {"ffn": {"d_ff": 11000}}),
    ("shape.tiles", "info", {"ffn": {"d_ff": 11008, "moe": {"n_experts": 8, "top_k": 2, "d_expert": 1400}}}),
    ("vocab.size", "info", {"vocab_size": 65024}),  # Falcon
    ("vocab.size", "info", {"vocab_size": 8192}),
    ("vocab.size", "info", {"vocab_size": 400000}),
    ("vocab.padding", "info", {"vocab_size": 50257}),  # GPT-2
    # Llama 3.2 1B's shape: 128,256 × 2,048 tied, 16 layers: 21%
    ("vocab.share", "info", {"d_model": 2048, "n_layers": 16, "tie_embeddings": True, "ffn": {"d_ff": 8192}}),
    ("vocab.share", "warn", {"d_model": 512, "n_layers": 8, "vocab_size": 256000, "attention": {"n_heads": 4,
                             "n_kv_heads": 4}, "ffn": {"d_ff": 1408}}),  # 91%
    # Qwen's 151,936 tokens on a 1,024-wide 22-layer model: untied 55% (tied it is 37%, an info)
    ("vocab.share", "warn", {"d_model": 1024, "n_layers": 22, "vocab_size": 151936, "attention": {"n_heads": 16},
                             "ffn": {"d_ff": 2816}}),
    ("vocab.share", "info", {"d_model": 1024, "n_layers": 22, "vocab_size": 151936, "attention": {"n_heads": 16},
                             "ffn": {"d_ff": 2816}, "tie_embeddings": True}),
    ("norm.placement", "warn", {"norm": {"placement": "post"}}),
    ("norm.placement", "warn", {"norm": {"placement": "post"}, "training": {"warmup_steps": 0}}),
    ("norm.placement", "info", {"norm": {"placement": "post"}, "attention": {"qk_norm": "full"}}),  # OLMo 2
    ("norm.placement", "info", {"norm": {"placement": "post"}, "training": {"warmup_steps": 4000}}),  # Transformer
    ("norm.kind", "info", {"norm": {"kind": "layernorm", "bias": True}}),
    ("norm.kind", "warn", {"norm": {"kind": "none"}}),
    ("norm.final", "warn", {"norm": {"final": False}}),
    ("norm.final", "warn", {"norm": {"final": False, "placement": "both"}}),
    # LLaMA 13B's shape (5,120 × 40 layers, d_ff 13,824): 13B parameters, no QK-norm
    ("norm.qk", "info", {"d_model": 5120, "n_layers": 40, "attention": {"n_heads": 40}, "ffn": {"d_ff": 13824}}),
    ("norm.softcap", "info", {"attention": {"softcap": 50.0}}),  # Gemma 2
    ("bias.linear", "info", {"attention": {"bias": ["q", "k", "v"]}}),  # Qwen2.5
    ("bias.linear", "info", {"ffn": {"bias": True}}),
    ("pos.kind", "info", {"position": {"kind": "learned"}}),
    ("pos.kind", "info", {"position": {"kind": "alibi"}}),
    ("pos.kind", "info", {"position": {"kind": "none"}}),
    ("pos.theta", "warn", {"position": {"theta": 10000.0}, "max_context": 131072}),  # Llama 2's base at 128k
    ("pos.theta", "warn", {"attention": {"sliding_window": 4096, "layer_types": "5:1"},
                           "position": {"local_theta": 100.0}}),
    ("pos.extension", "error", {"max_context": 65536, "position": {"scaling": {"type": "yarn", "factor": 4.0,
                                                                                 "original_context": 8192}}}),
    ("pos.extension", "warn", {"max_context": 4096, "position": {"scaling": {"type": "linear", "factor": 0.5,
                                                                               "original_context": 8192}}}),
    # DeepSeek-V3: YaRN ×40 from 4k
    ("pos.extension", "info", {"max_context": 163840, "position": {"scaling": {"type": "yarn", "factor": 40.0,
                                                                                 "original_context": 4096}}}),
    ("pos.extension", "info", {"max_context": 8192, "position": {"scaling": {"type": "yarn", "factor": 4.0,
                                                                               "original_context": 8192}}}),
    ("pos.partial", "info", {"position": {"rotary_fraction": 0.25}}),  # GPT-NeoX
    # Qwen2.5-7B states 131,072 but pretrained at 32,768 (its model card: YaRN for beyond 32k)
    ("pos.trained", "warn", {"max_context": 131072, "training": {"context": 32768}}),
    ("pos.trained", "info", {"max_context": 131072, "training": {"context": 4096}, "position": {
        "scaling": {"type": "llama3", "factor": 8.0, "original_context": 8192}}}),
    ("pos.nope", "info", {"attention": {"sliding_window": 4096, "layer_types": "3:1", "global_rope": False}}),
    ("pos.nope", "warn", {"attention": {"global_rope": False}}),
    ("train.dropout", "info", {"training": {"dropout": 0.1}}),  # GPT-2's config
    ("train.dropout", "warn", {"training": {"dropout": 0.3}}),
    ("train.weight_decay", "warn", {"training": {"weight_decay": 0.0}}),
    ("train.weight_decay", "info", {"training": {"weight_decay": 1e-5}}),
    ("train.weight_decay", "error", {"training": {"weight_decay": 2000.0, "learning_rate": 1e-3}}),
    ("train.z_loss", "info", {"training": {"z_loss": 0.0}}),
    ("train.lr", "error", {"training": {"learning_rate": 3.0}}),  # 3e-4 written as 3
    ("train.lr", "warn", {"training": {"learning_rate": 3e-3}}),  # 10× Llama's 3e-4 at d_model 4,096
    ("train.lr", "info", {"training": {"learning_rate": 3e-3}, "attention": {"qk_norm": "head"}}),
    ("train.lr", "info", {"training": {"learning_rate": 2e-6}}),
    ("train.warmup", "info", {"training": {"warmup_steps": 0}}),
    ("train.tokens", "info", {"training": {"tokens": 20e9}}),  # 2.7 tokens per parameter
]


@pytest.mark.parametrize("rule,severity,changes", BREAKS, ids=[f"{r}-{s}-{i}" for i, (r, s, _) in enumerate(BREAKS)])
def test_each_rule_fires_on_a_spec_that_breaks_it(rule, severity, changes):
    findings = [f for f in lint(spec(**changes)) if f.rule == rule]
    assert [f.severity for f in findings] == [severity]
    f = findings[0]
    assert severity in RULES[rule].severities
    assert f.message.endswith(".") and f.convention and f.evidence is RULES[rule].evidence
    assert isinstance(f.value, (int, float, str))


def test_every_rule_and_every_severity_it_can_give_is_exercised():
    seen = {}
    for rule, severity, _ in BREAKS:
        seen.setdefault(rule, set()).add(severity)
    assert set(seen) == set(RULES)
    for rule, severities in seen.items():
        assert severities == set(RULES[rule].severities), rule


# (rule, changes): specs at the convention's published values, on which `rule` stays quiet.
QUIET = [
    ("ffn.ratio", {"ffn": {"activation": "geglu", "d_ff": 10240}}),  # T5 v1.1 XXL: 2.5
    ("ffn.ratio", {"ffn": {"activation": "gelu", "d_ff": 16384}}),  # GPT-3: plain 4
    ("ffn.ratio", {"ffn": {"d_ff": 11008, "moe": {"n_experts": 8, "top_k": 2, "d_expert": 40960}}}),  # experts only
    ("heads.dim", {"d_model": 4096, "attention": {"n_heads": 16, "head_dim": 256}}),  # Gemma's 256
    ("heads.dim", {"attention": {"n_heads": 64}}),  # GPT-2's 64
    # Llama 3 70B: 64 / 8 heads
    ("heads.tp", {"d_model": 8192, "n_layers": 80, "attention": {"n_heads": 64}, "ffn": {"d_ff": 28672}}),
    ("heads.kv_cache", {"d_model": 768, "n_layers": 12, "attention": {"n_heads": 12, "n_kv_heads": 12},
                        "ffn": {"d_ff": 2048}}),  # GPT-2 small's 12 heads: no GQA-8 to compare with
    ("heads.window", {"attention": {"sliding_window": 4096}, "max_context": 32768}),  # Mistral
    ("shape.aspect", {"d_model": 12288, "n_layers": 96, "attention": {"n_heads": 96}, "ffn": {"d_ff": 32768}}),
    ("shape.tiles", {"d_model": 4544, "attention": {"n_heads": 71, "n_kv_heads": 1}, "ffn": {"d_ff": 12160}}),
    ("vocab.size", {"vocab_size": 32000}), ("vocab.size", {"vocab_size": 50257}),
    ("vocab.size", {"vocab_size": 256000}), ("vocab.size", {"vocab_size": 262144}),
    ("vocab.padding", {"vocab_size": 50304}),  # nanoGPT's padded GPT-2 vocabulary
    ("norm.placement", {"norm": {"placement": "both"}}),  # Gemma 2's sandwich
    ("norm.final", {"norm": {"final": False, "placement": "post"}}),
    ("norm.qk", {"d_model": 5120, "n_layers": 40, "attention": {"n_heads": 40, "qk_norm": "head"},
                 "ffn": {"d_ff": 13824}}),
    ("norm.qk", {"d_model": 5120, "n_layers": 40, "attention": {"n_heads": 40, "softcap": 50.0},
                 "ffn": {"d_ff": 13824}}),
    ("pos.theta", {"position": {"theta": 10000.0}, "max_context": 4096}),  # Llama 2
    # YaRN's Llama 2 128k: base 10,000, ×32 from 4k
    ("pos.theta", {"max_context": 131072, "position": {"theta": 10000.0, "scaling": {
        "type": "yarn", "factor": 32.0, "original_context": 4096}}}),
    ("pos.extension", {"max_context": 131072, "position": {"theta": 10000.0, "scaling": {
        "type": "yarn", "factor": 32.0, "original_context": 4096}}}),
    # Llama 3.1: llama3 ×8 from 8k with a stated 128k limit
    ("pos.extension", {"max_context": 131072, "position": {"scaling": {"type": "llama3", "factor": 8.0,
                                                                         "original_context": 8192}}}),
    ("pos.extension", {"max_context": None, "position": {"scaling": {"type": "linear", "factor": 4.0,
                                                                       "original_context": 8192}}}),
    ("pos.trained", {"max_context": 4096, "training": {"context": 4096}}),  # Llama 2
    ("pos.trained", {"max_context": 131072, "training": {"context": 8192}, "position": {  # Llama 3.1
        "scaling": {"type": "llama3", "factor": 8.0, "original_context": 8192}}}),
    ("pos.trained", {"max_context": 131072, "training": {"context": 2048}, "position": {"kind": "alibi"}}),
    ("train.z_loss", {"final_softcap": 30.0, "training": {"z_loss": 0.0}}),  # Gemma 2 bounds the logits instead
    ("train.warmup", {"norm": {"placement": "post"}, "training": {"warmup_steps": 0}}),  # norm.placement's case
    ("train.tokens", {"training": {"tokens": 2e12}}),  # Llama 2 7B
    ("train.lr", {"training": {"learning_rate": 1.2e-3}}),  # 4× Llama 2 7B's 3e-4: aggressive, not yet a warning
]


@pytest.mark.parametrize("rule,changes", QUIET, ids=[f"{r}-{i}" for i, (r, _) in enumerate(QUIET)])
def test_each_rule_is_quiet_on_a_spec_that_follows_it(rule, changes):
    assert rule not in hits(spec(**changes))


# GPT-3 (arXiv:2005.14165 Table 2.1) and LLaMA (arXiv:2302.13971 Table 2): d_model, peak learning rate.
PUBLISHED_LEARNING_RATES = [(768, 6.0e-4), (1024, 3.0e-4), (1536, 2.5e-4), (2048, 2.0e-4), (2560, 1.6e-4),
                            (4096, 1.2e-4), (12288, 0.6e-4), (4096, 3.0e-4), (5120, 3.0e-4), (6656, 1.5e-4),
                            (8192, 1.5e-4)]


@pytest.mark.parametrize("d_model,lr", PUBLISHED_LEARNING_RATES)
def test_published_learning_rates_pass(d_model, lr):
    s = spec(d_model=d_model, attention={"n_heads": d_model // 64, "n_kv_heads": None},
             training={"learning_rate": lr, "weight_decay": 0.1})
    assert "train.lr" not in hits(s) and "train.weight_decay" not in hits(s)


def test_post_norm_with_no_warmup_is_one_warning_not_two():
    found = hits(spec(norm={"placement": "post"}, training={"warmup_steps": 0}))
    assert found["norm.placement"] == "warn" and "train.warmup" not in found


def test_messages_name_the_numbers():
    by_rule = {f.rule: f for f in lint(spec(vocab_size=50257, ffn={"d_ff": 14336}, max_context=131072,
                                            position={"theta": 10000.0}))}
    assert "50,304" in by_rule["vocab.padding"].message
    assert "14,336 / 4,096 = 3.5" in by_rule["ffn.ratio"].message and by_rule["ffn.ratio"].value == 3.5
    assert "54,410 tokens" in by_rule["pos.theta"].message  # 2π·10,000^(126/128)
    tp = {f.rule: f for f in lint(spec(d_model=9088, n_layers=80, attention={"n_heads": 71, "n_kv_heads": 1},
                                       ffn={"d_ff": 24576}))}["heads.tp"]
    assert "TP 2, 4 and 8 cannot split" in tp.message and "80 GB" in tp.message and tp.value == "71/1"
    mqa = {f.rule: f for f in lint(spec(attention={"n_kv_heads": 1}))}["heads.tp"]
    assert "replicate the KV cache 2×, 4× and 8×" in mqa.message


def test_findings_are_sorted_frozen_and_summarised():
    findings = lint(spec(norm={"kind": "none"}, vocab_size=50257, max_context=65536,
                         position={"scaling": {"type": "yarn", "factor": 4.0, "original_context": 8192}}))
    assert all(isinstance(f, Finding) for f in findings)
    keys = [(-SEVERITIES.index(f.severity), f.rule) for f in findings]
    assert keys == sorted(keys) and findings[0].severity == "error"
    assert worst(findings) == "error" and worst([]) is None
    assert worst([f for f in findings if f.severity == "info"]) == "info"
    assert [f.severity for f in at_least(findings, "warn")] == ["error", "warn"]
    assert fails(findings, "error") and fails(findings, "info") and not fails(findings, "never")
    assert not fails([f for f in findings if f.severity == "info"], "warn")
    with pytest.raises(dataclasses.FrozenInstanceError):
        findings[0].severity = "info"
    assert len(set(findings)) == len(findings)  # hashable
    assert findings[0].family == "pos"


# ---- every bundled spec ---------------------------------------------------------------------------

# (spec, rule) pairs where a real model earns a warning, each with the reason.
REAL_MODEL_WARNINGS: dict[tuple[str, str], str] = {
    # a true warning: transformers runs DeepSeek-V4 eagerly for that reason (DeepseekV4PreTrainedModel: "FlashAttention
    # 2 / 3 cap the head dim at 256; V4's head_dim=512"); DeepSeek serves it on kernels of its own (FlashMLA's d_qk 512)
    ("deepseek-v4-flash", "heads.dim"): "one K=V head of 512, past FlashAttention-2's 256",
}


@pytest.mark.parametrize("name", BUNDLED)
def test_real_models_get_no_error_and_no_unexplained_warning(name):
    for f in lint(spec_of(name)):
        assert f.severity != "error", (name, f)
        if f.severity == "warn":
            assert (name, f.rule) in REAL_MODEL_WARNINGS, (name, f)


EXPECTED = {
    "gemma-7b": {"ffn.ratio": "info", "heads.kv_cache": "info", "heads.product": "info", "norm.qk": "info"},
    "gpt2": {"bias.linear": "info", "ffn.gated": "info", "heads.tp": "info", "norm.kind": "info", "pos.kind": "info",
             "vocab.padding": "info", "vocab.share": "info"},
    "falcon-7b": {"ffn.gated": "info", "heads.tp": "info", "norm.kind": "info", "vocab.size": "info"},
    "llama-2-7b": {"heads.kv_cache": "info"},
    "olmo-2-7b": {"heads.kv_cache": "info", "norm.placement": "info"},
    "llama-3.1-70b": {"ffn.ratio": "info", "norm.qk": "info"},
    "mixtral-8x7b": {"norm.qk": "info"},
    "deepseek-v3": {"heads.tp": "info", "pos.extension": "info"},
    "gemma-2-9b": {"ffn.ratio": "info", "heads.product": "info", "norm.softcap": "info"},
    "qwen2.5-0.5b": {"bias.linear": "info", "ffn.ratio": "info", "heads.tp": "info", "shape.aspect": "info",
                     "vocab.share": "info"},
    "mistral-7b-v0.1": {"ffn.ratio": "info"},
    # (no norm.qk: its queries and its K=V head are RMS-normed, as DeepseekV4Attention's q_b_norm and kv_norm)
    "deepseek-v4-flash": {"heads.dim": "warn", "heads.product": "info", "heads.tp": "info", "pos.partial": "info"},
}


@pytest.mark.parametrize("name", EXPECTED)
def test_the_findings_of_real_models(name):
    assert hits(spec_of(name)) == EXPECTED[name]


def test_real_model_values_and_wording():
    gemma = {f.rule: f for f in lint(spec_of("gemma-7b"))}
    assert gemma["heads.product"].value == 4096 / 3072 and "16 × 256 = 4,096, not d_model 3,072" in \
        gemma["heads.product"].message
    assert gemma["norm.qk"].value == sized(spec_of("gemma-7b")).params.total
    gpt2 = {f.rule: f for f in lint(spec_of("gpt2"))}
    assert "LayerNorm with a bias" in gpt2["norm.kind"].message and gpt2["bias.linear"].value == "q,k,v,o,ffn"
    assert "TP 2, 4 and 8 cannot split" in {f.rule: f for f in lint(spec_of("falcon-7b"))}["heads.tp"].message
    mixtral = {f.rule: f for f in lint(spec_of("mixtral-8x7b"))}["norm.qk"]
    assert "active" in mixtral.message and mixtral.value == sized(spec_of("mixtral-8x7b")).params.active
    olmo = {f.rule: f for f in lint(spec_of("olmo-2-7b"))}["norm.placement"]
    assert "QK-norm" in olmo.message


# ---- evidence --------------------------------------------------------------------------------------


def _hf(key):
    return lambda name: json.loads((HF / f"{name}.json").read_text())[key]


def _tables_share(name):
    s = spec_of(name)
    return s.vocab_size * s.d_model * (1 if s.tie_embeddings else 2) / sized(s).params.total


def _slowest_wavelength(name):
    s = spec_of(name)
    r = s.rope_dim
    slowest = s.position.theta ** (-2 * (r // 2 - 1) / r)  # RoFormer: theta_i = base^(-2i/r), i = 0 .. r/2 - 1
    return 2 * math.pi / slowest


def _biases(name):
    s = spec_of(name)
    return ",".join(list(s.attention.bias) + (["ffn"] if s.ffn.bias else [])) or "none"


# Each quantity an evidence record quotes, computed from the bundled spec in the test's own words.
QUANTITIES = {
    "d_ff / d_model": lambda n: spec_of(n).d_ff / spec_of(n).d_model,
    "ffn.activation": lambda n: spec_of(n).ffn.activation,
    "n_heads · head_dim / d_model":
        lambda n: spec_of(n).attention.n_heads * spec_of(n).qk_head_dim / spec_of(n).d_model,
    "head_dim": lambda n: spec_of(n).qk_head_dim,
    "n_heads / n_kv_heads": lambda n: f"{spec_of(n).attention.n_heads}/{spec_of(n).n_kv_heads}",
    "attention.sliding_window": lambda n: spec_of(n).attention.sliding_window,
    "d_model / n_layers": lambda n: spec_of(n).d_model / spec_of(n).n_layers,
    "d_model": lambda n: spec_of(n).d_model,
    "vocab_size": lambda n: spec_of(n).vocab_size,
    "share of parameters in the embedding and unembedding": _tables_share,
    "norm.placement": lambda n: spec_of(n).norm.placement,
    "norm.kind": lambda n: spec_of(n).norm.kind,
    "norm.final": lambda n: spec_of(n).norm.final,
    "attention.qk_norm": lambda n: spec_of(n).attention.qk_norm,
    "attention.softcap": lambda n: spec_of(n).attention.softcap,
    "projections with a bias": _biases,
    "position.kind": lambda n: spec_of(n).position.kind,
    "slowest RoPE wavelength 2π·theta^((r-2)/r), tokens": _slowest_wavelength,
    "position.scaling.factor": lambda n: spec_of(n).position.scaling.factor,
    "position.scaling.original_context": lambda n: spec_of(n).position.scaling.original_context,
    "position.rotary_fraction": lambda n: spec_of(n).position.rotary_fraction,
    "attention.global_rope": lambda n: spec_of(n).attention.global_rope,
    "hf:resid_pdrop": _hf("resid_pdrop"),
}


def _quoted_as(actual, quoted) -> bool:
    """`quoted` is `actual` exactly, or `actual` rounded to the decimals `quoted` shows with at
    least 3 significant digits (2.6875, 0.302, 117.51; not 2.7 for 2.6875)."""
    if isinstance(quoted, (bool, str)) or actual is None or actual == quoted:
        return actual == quoted
    if isinstance(quoted, int):
        return round(actual) == quoted and abs(quoted) >= 100
    decimals = repr(quoted).split(".")[1]
    significant = repr(quoted).replace(".", "").lstrip("0-")
    return len(significant) >= 3 and round(actual, len(decimals)) == quoted


def misquotes(evidence: Evidence) -> list[str]:
    wrong = []
    for name, quoted in evidence.models:
        if name not in BUNDLED:
            wrong.append(f"{name} is not a bundled spec")
            continue
        actual = QUANTITIES[evidence.quantity](name)
        if not _quoted_as(actual, quoted):
            wrong.append(f"{name}: quoted {quoted!r}, the spec gives {actual!r}")
    return wrong


@pytest.mark.parametrize("rule", sorted(EVIDENCE))
def test_evidence_quotes_the_bundled_specs_exactly(rule):
    ev = EVIDENCE[rule]
    assert ev.sources and all(s in SOURCES for s in ev.sources)
    if ev.models:
        assert ev.quantity in QUANTITIES, f"add a test-side formula for {ev.quantity!r}"
    assert misquotes(ev) == []
    assert all(isinstance(label, str) and text for label, text in ev.published)


def test_a_misquote_is_caught():
    assert misquotes(Evidence(("seed-001",), "d_ff / d_model", (("llama-2-7b", 2.7),)))  # too coarse
    assert misquotes(Evidence(("seed-001",), "d_ff / d_model", (("llama-2-7b", 2.68),)))
    assert misquotes(Evidence(("seed-001",), "vocab_size", (("gpt2", 50304),)))
    assert misquotes(Evidence(("seed-001",), "vocab_size", (("gpt-5", 1),)))
    assert not misquotes(Evidence(("seed-001",), "d_ff / d_model", (("llama-2-7b", 2.69),)))


def test_every_rule_has_evidence_and_every_source_is_cited():
    assert set(EVIDENCE) == set(RULES)
    cited = {s for ev in EVIDENCE.values() for s in ev.sources}
    assert cited == set(SOURCES)
    text = str(EVIDENCE["ffn.ratio"])
    assert "llama-2-7b 2.6875" in text and "T5 11B: 64" in text and "Kaplan" in text


def test_the_readme_section_lists_every_rule():
    text = DOC.read_text().split("## Lint:", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip().strip("`"): line for line in text.splitlines()
            if line.startswith("| `") and "." in line.split("|")[1]}
    assert set(rows) == set(RULES)
    for rule_id, row in rows.items():
        severities = {s for s in SEVERITIES if s in row.split("|")[2]}
        assert severities == set(RULES[rule_id].severities), rule_id
    assert "archcalc.lint/1" in text and "--fail-on" in text and "--min-severity" in text


# ---- speed and imports -----------------------------------------------------------------------------


def test_lint_is_fast():
    specs = [spec_of(n) for n in BUNDLED]
    start = time.perf_counter()
    for _ in range(5):
        for s in specs:
            lint(s)
    per_spec = (time.perf_counter() - start) / (5 * len(specs))
    assert per_spec < 5e-3  # about 0.1 ms here; a sweep lints each candidate


def test_the_library_imports_nothing_heavy():
    code = "import sys, archcalc.linter; print(sorted(m for m in ('rich', 'numpy', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- command line ----------------------------------------------------------------------------------


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _yaml(tmp_path, name, **changes) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(_merge(copy.deepcopy(CLEAN), {"name": name, **changes})))
    return str(path)


def test_lint_json_schema():
    r = run("lint", "gemma-7b", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "archcalc.lint/1" and doc["model"] == "gemma-7b"
    assert doc["counts"] == {"info": 4, "warn": 0, "error": 0} and doc["worst"] == "info"
    assert [f["rule"] for f in doc["findings"]] == ["ffn.ratio", "heads.kv_cache", "heads.product", "norm.qk"]
    first = doc["findings"][0]
    assert set(first) == {"rule", "family", "severity", "value", "message", "convention", "evidence"}
    assert first["value"] == 8.0 and first["family"] == "ffn"
    ev = first["evidence"]
    assert ev["models"]["llama-2-7b"] == 2.6875 and "T5 11B" in ev["published"]
    assert {"key": "kaplan2020", "citation": SOURCES["kaplan2020"]} in ev["sources"]


def test_fail_on_sets_the_exit_status(tmp_path):
    broken = _yaml(tmp_path, "broken", max_context=65536,
                   position={"scaling": {"type": "yarn", "factor": 4.0, "original_context": 8192}})
    risky = _yaml(tmp_path, "risky", norm={"placement": "post"})
    clean = _yaml(tmp_path, "clean")
    cases = [
        ([broken], 1), ([broken, "--fail-on", "never"], 0), ([broken, "--fail-on", "warn"], 1),
        ([risky], 0), ([risky, "--fail-on", "warn"], 1), ([risky, "--fail-on", "error"], 0),
        (["gemma-7b"], 0), (["gemma-7b", "--fail-on", "info"], 1), (["gemma-7b", "--fail-on", "warn"], 0),
        ([clean, "--fail-on", "info"], 0),
    ]
    for args, status in cases:
        for extra in ([], ["--json"]):
            r = CliRunner().invoke(cli, ["lint", *args, *extra])
            assert r.exit_code == status, (args, extra, r.output)
            assert "Traceback" not in r.output and r.stderr == ""


def test_min_severity_filters_the_list_not_the_counts(tmp_path):
    risky = _yaml(tmp_path, "risky", norm={"placement": "post", "kind": "layernorm"})
    doc = json.loads(CliRunner().invoke(cli, ["lint", risky, "--json", "--min-severity", "warn"]).stdout)
    assert [f["rule"] for f in doc["findings"]] == ["norm.placement"]
    assert doc["counts"] == {"info": 1, "warn": 1, "error": 0} and doc["min_severity"] == "warn"
    r = CliRunner().invoke(cli, ["lint", risky, "--min-severity", "error"])
    assert r.exit_code == 0 and "No findings at error or above" in r.stdout and "not shown" in r.stdout


def test_lint_table():
    r = run("lint", "gpt2")
    assert r.exit_code == 0
    for text in ("gpt2", "7 findings", "vocab.padding", "50,304", "Sources", "[nanogpt]", "karpathy/nanoGPT"):
        assert text in r.stdout, text
    clean = run("lint", "llama-2-7b", "--min-severity", "info")
    assert "heads.kv_cache" in clean.stdout


def test_lint_of_a_config_json():
    r = run("lint", str(HF / "qwen2.5-0.5b.json"), "--json")
    assert r.exit_code == 0
    assert {f["rule"] for f in json.loads(r.stdout)["findings"]} == set(EXPECTED["qwen2.5-0.5b"])


def test_bad_inputs_give_one_line_and_status_2(tmp_path):
    heads = tmp_path / "heads.yaml"
    heads.write_text("d_model: 64\nn_layers: 2\nvocab_size: 10\nmax_context: 8\n"
                     "attention: {n_heads: 4, n_kv_heads: 3}\n")
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text(yaml.safe_dump({**CLEAN, "training": {"dropout": 0.0, "optimizer": "adamw"}}))
    bad_dropout = tmp_path / "dropout.yaml"
    bad_dropout.write_text(yaml.safe_dump({**CLEAN, "training": {"dropout": 1.5}}))
    cases = [
        (["lint", "llama-3.1-8"], "unknown model 'llama-3.1-8'; did you mean 'llama-3.1-8b'?"),
        (["lint", str(tmp_path / "missing.yaml")], "missing.yaml: file not found"),
        (["lint", str(heads)], "n_heads (4) must be divisible by n_kv_heads (3)"),
        (["lint", str(unknown)], "training.optimizer: unknown key"),
        (["lint", str(bad_dropout)], "training.dropout"),
        (["lint", "gpt2", "--fail-on", "warning"], "'warning' is not one of 'info', 'warn', 'error', 'never'"),
        (["lint", "gpt2", "--min-severity", "loud"], "'loud' is not one of"),
        (["lint"], "Missing argument 'MODEL'"),
    ]
    for args, fragment in cases:
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 2, (args, r.output)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], (args, r.stderr)
        assert r.stdout == "" and "Traceback" not in r.output


def test_lint_never_imports_torch():
    code = ("import sys; from archcalc.cli import cli; from click.testing import CliRunner; "
            "r = CliRunner().invoke(cli, ['lint', 'deepseek-v3']); "
            "assert r.exit_code == 0, r.output; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_model_without_attention_gets_no_attention_rule():
    """xLSTM 7B: every layer an mLSTM, attention.n_heads a placeholder of 1 (head_dim 4,096): no heads, QK-norm
    or position finding; one global layer in its place and the head rules judge it (head_dim above 256)."""
    from archcalc.linter import ATTENTION_RULES

    spec = spec_of("xlstm-7b")
    assert not [f for f in lint(spec) if f.rule.startswith(ATTENTION_RULES)]
    attending = spec.model_copy(update={"attention": spec.attention.model_copy(
        update={"layer_types": ["global", *spec.layer_attention[1:]]})})
    assert {f.rule for f in lint(attending)} >= {"heads.dim", "pos.kind"}
