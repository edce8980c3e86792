"""Position rules: the encoding, RoPE's base against the context, context extension,
partial rotary and NoPE layers."""

from __future__ import annotations

import math

from archcalc.linter.core import Facts, Verdict, rule

# The largest factors each method's paper trained: YaRN s = 32 (Llama 2 4k -> 128k), PI 16× (2k -> 32k).
EVALUATED_FACTOR = {"yarn": 32.0, "linear": 16.0}
# Static rescalings whose reach is original_context × factor (dynamic NTK rescales with the length;
# llama3 and longrope state their own limit).
BOUNDED_SCALINGS = ("linear", "ntk", "yarn")

_POSITION_KINDS = {
    "learned": "Learned absolute positions: a table of max_context rows that cannot extrapolate past it.",
    "sinusoidal": "Sinusoidal absolute positions, as in the original Transformer.",
    "alibi": "ALiBi linear attention biases (BLOOM, MPT): they extrapolate, but RoPE is the common choice.",
    "none": "No position encoding (NoPE): order comes from the causal mask alone.",
}


def rope_wavelength(theta: float, rope_dim: int) -> float:
    """Tokens per turn of the slowest rotary pair: frequencies theta^(-2i/r), i = r/2 - 1."""
    return 2 * math.pi * theta ** ((rope_dim - 2) / rope_dim)


def trained_context(spec) -> int:
    """The context before extension: training.context when the spec states it, else
    original_context, else max_context / factor (the spec's own rule)."""
    sc = spec.position.scaling
    if spec.training is not None and spec.training.context is not None:
        return spec.training.context
    if sc is None:
        return spec.max_context
    return sc.original_context or round(spec.max_context / sc.factor)


@rule("pos.kind", summary="a position encoding other than RoPE (learned, sinusoidal, ALiBi, none)")
def pos_kind(f: Facts):
    kind = f.spec.position.kind
    if kind == "rope":
        return None
    return Verdict("info", kind, _POSITION_KINDS[kind],
                   "RoPE on queries and keys: nearly every model since 2023 (Llama, Qwen, Mistral, DeepSeek)")


@rule("pos.theta", severities=("warn",),
      summary="a RoPE base whose slowest wavelength is shorter than the context its layers see")
def pos_theta(f: Facts):
    s, p, a = f.spec, f.spec.position, f.spec.attention
    if p.kind != "rope":
        return None
    context = trained_context(s)
    seen = []
    if a.global_rope and set(s.layer_attention) - {"local", "linear", "none"}:  # attention past the window
        seen.append(("", p.theta, context))
    if f.local_layers:
        seen.append((" of the local layers", p.local_theta or p.theta, min(a.sliding_window, context)))
    for which, theta, tokens in seen:
        wavelength = rope_wavelength(theta, s.rope_dim)
        if tokens > wavelength:
            return Verdict("warn", theta,
                           f"RoPE base {theta:,.0f}{which} turns its slowest pair every {wavelength:,.0f} tokens, "
                           f"less than the {tokens:,} tokens it must tell apart.",
                           "a base whose slowest wavelength 2π·θ^((r-2)/r) exceeds the trained context (Llama 2: "
                           "10,000 gives 54k tokens for 4k; Llama 3: 500,000 for 128k), or PI/NTK/YaRN scaling")
    return None


@rule("pos.extension", severities=("info", "warn", "error"),
      summary="RoPE scaling: max_context past what it reaches (error), a factor < 1 (warn), factors past their "
              "paper's, or a no-op (info)")
def pos_extension(f: Facts):
    s, sc = f.spec, f.spec.position.scaling
    if sc is None:
        return None
    convention = ("extend RoPE to original_context × factor with PI, NTK or YaRN, then continue training at the "
                  "new length; YaRN was trained to 32× (4k -> 128k), PI to 16×")
    name = f"{sc.type} scaling ×{sc.factor:g}"
    if sc.original_context and sc.type in BOUNDED_SCALINGS:
        reach = sc.original_context * sc.factor
        if s.max_context > reach:
            return Verdict("error", s.max_context,
                           f"max_context {s.max_context:,} is past the {reach:,.0f} tokens {name} from "
                           f"{sc.original_context:,} reaches: the last positions are untrained extrapolation.",
                           convention)
    if sc.factor < 1:
        return Verdict("warn", sc.factor, f"{name}: a factor below 1 shrinks the context instead of extending it.",
                       convention)
    if sc.factor == 1 or (sc.original_context and s.max_context <= sc.original_context):
        return Verdict("info", sc.factor, f"{name} is declared but extends nothing (max_context "
                                          f"{s.max_context:,}).", convention)
    evaluated = EVALUATED_FACTOR.get(sc.type)
    if evaluated and sc.factor > evaluated:
        return Verdict("info", sc.factor, f"{name} goes past the {evaluated:g}× its paper trained.", convention)
    return None


@rule("pos.trained", severities=("info", "warn"),
      summary="max_context past the pretraining context (training.context) with no RoPE scaling (warn), or a "
              "scaling from another original_context (info)")
def pos_trained(f: Facts):
    s, t, sc = f.spec, f.spec.training, f.spec.position.scaling
    if t is None or t.context is None:
        return None
    convention = ("serve up to the trained context, or extend it with PI, NTK or YaRN from original_context = the "
                  "trained context and train briefly at the new length (Llama 3.1: 8k -> 128k)")
    if sc is None and s.max_context > t.context and s.position.kind in ("rope", "learned", "sinusoidal"):
        return Verdict("warn", s.max_context,
                       f"max_context {s.max_context:,} is {s.max_context / t.context:.3g}× the {t.context:,} tokens "
                       f"of pretraining, with no RoPE scaling: the positions past it were never trained.", convention)
    if sc is not None and sc.original_context and sc.original_context != t.context:
        return Verdict("info", sc.original_context,
                       f"{sc.type} scaling extends from original_context {sc.original_context:,}, not the "
                       f"{t.context:,} tokens of pretraining.", convention)
    return None


@rule("pos.partial", summary="partial rotary embeddings (rotary_fraction < 1)")
def pos_partial(f: Facts):
    s, p = f.spec, f.spec.position
    if p.kind != "rope" or p.rotary_fraction == 1 or s.attention.kind == "mla":
        return None
    return Verdict("info", p.rotary_fraction,
                   f"RoPE rotates {s.rope_dim} of {s.qk_head_dim} dims per head (rotary_fraction "
                   f"{p.rotary_fraction:g}); the others carry no position.",
                   "full rotary embeddings (Llama, Qwen, Mistral); a quarter is the GPT-J / GPT-NeoX choice")


@rule("pos.nope", severities=("info", "warn"),
      summary="global layers without RoPE: info beside local RoPE layers, warn when no layer is left with RoPE")
def pos_nope(f: Facts):
    s, a = f.spec, f.spec.attention
    n_global = s.n_layers - f.local_layers
    if s.position.kind != "rope" or a.global_rope or not n_global:
        return None
    convention = ("RoPE in every layer; global NoPE layers between local RoPE layers (Llama 4) let the global "
                  "layers extrapolate")
    if not f.local_layers:
        return Verdict("warn", False, "attention.global_rope is false and every layer is global: no layer applies "
                                      "the RoPE the spec sets.", convention)
    return Verdict("info", False, f"{n_global} global layers use no position encoding; the {f.local_layers} local "
                                  "layers use RoPE.", convention)
