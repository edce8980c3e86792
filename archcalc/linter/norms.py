"""Norm and bias rules: placement, kind, the final norm, QK-norm, soft-capping, biases."""

from __future__ import annotations

from archcalc.linter.core import Facts, Verdict, rule, short_count

QK_NORM_SCALE = 8e9  # ViT-22B: divergent training at around 8B parameters, cured by QK-norm


@rule("norm.placement", severities=("info", "warn"),
      summary="post-norm: info with QK-norm, soft-capping or a warm-up; warn with none of them")
def norm_placement(f: Facts):
    s = f.spec
    if s.norm.placement != "post" or s.norm.kind == "none":
        return None
    a, t = s.attention, s.training
    warmup = t.warmup_steps if t else None
    devices = [name for name, on in (("QK-norm", a.qk_norm != "none"), ("attention soft-capping", a.softcap),
                                     (f"{warmup or 0:,} warm-up steps", warmup)) if on]
    convention = ("pre-norm, x + F(N(x)), the default since GPT-2; post-norm trains only with a learning-rate "
                  "warm-up or another stability device (Xiong 2020), e.g. OLMo 2's QK-norm")
    if devices:
        return Verdict("info", "post", f"Post-norm (a norm on each sublayer output) with {' and '.join(devices)}.",
                       convention)
    why = "training.warmup_steps is 0" if warmup == 0 else "no training.warmup_steps is given"
    return Verdict("warn", "post", f"Post-norm with no stability device: no QK-norm, no soft-capping, and {why}.",
                   convention)


@rule("norm.kind", severities=("info", "warn"),
      summary="LayerNorm (with or without bias) where RMSNorm is the convention (info); no norm at all (warn)")
def norm_kind(f: Facts):
    n = f.spec.norm
    convention = ("RMSNorm: no mean subtraction and no bias, LayerNorm's quality at less memory traffic (Zhang & "
                  "Sennrich 2019, Narang 2021); Llama, Qwen, Gemma, Mistral")
    if n.kind == "none":
        return Verdict("warn", "none", "No normalisation layers: a deep Transformer without norms needs special "
                                       "initialisation or residual scaling to train.", convention)
    if n.kind == "layernorm":
        return Verdict("info", "layernorm", f"LayerNorm {'with' if n.bias else 'without'} a bias, where RMSNorm is "
                                            "the convention.", convention)
    return None


@rule("norm.final", severities=("warn",), summary="pre-norm or sandwich norms with no final norm before the LM head")
def norm_final(f: Facts):
    n = f.spec.norm
    # A post-norm stack may already end normalised (N(x + F(x))); pre-norm and sandwich never do.
    if n.final or n.kind == "none" or n.placement == "post":
        return None
    return Verdict("warn", False, f"{n.placement}-norm without a final norm: the residual stream reaches the LM "
                                  "head unnormalised.",
                   "a final norm after the last block, which GPT-2 added when it moved to pre-norm")


@rule("norm.qk", summary="no QK-norm (nor attention soft-capping) at 8B+ active parameters")
def norm_qk(f: Facts):
    a = f.spec.attention
    # MLA's latents carry their own norms; DeepSeek-V4's queries and its K=V head are RMS-normed (compressed)
    if a.kind == "mla" or a.compressed is not None or a.qk_norm != "none" or a.softcap:
        return None
    active = f.params.active
    if active < QK_NORM_SCALE:
        return None
    which = " active" if active != f.params.total else ""
    return Verdict("info", active,
                   f"No QK-norm and no attention soft-capping at {short_count(active)}{which} parameters.",
                   "QK-norm bounds the attention logits: ViT-22B diverged without it at around 8B parameters; "
                   "OLMo 2, Qwen3 and Gemma 3 use it, and it tolerates higher learning rates")


@rule("norm.softcap", summary="tanh soft-capping of the attention logits (Gemma 2), since replaced by QK-norm")
def norm_softcap(f: Facts):
    a = f.spec.attention
    if not a.softcap:
        return None
    also = " alongside QK-norm" if a.qk_norm != "none" else ""
    return Verdict("info", a.softcap, f"Attention logits are soft-capped at {a.softcap:g}{also}.",
                   "QK-norm: soft-capping (Gemma 2: 50) bounds the logits but cost perplexity in an NVIDIA ablation "
                   "and needs kernel support; Gemma 3 replaced it with QK-norm")


@rule("bias.linear", summary="biases on the attention or FFN projections")
def bias_linear(f: Facts):
    s = f.spec
    names = list(s.attention.bias) + (["ffn"] if s.ffn.bias else [])
    if not names:
        return None
    return Verdict("info", ",".join(names), f"The {', '.join(names)} projections carry biases.",
                   "no biases in linear layers (Llama, PaLM, Mistral: more stable at scale); Qwen keeps QKV biases "
                   "on purpose")
