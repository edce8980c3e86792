"""Architecture rules: FFN width, heads, shape and vocabulary (norms.py: norms and
biases; positions.py: position encodings; training.py: the training: section).

Each rule is a small function of Facts that returns a Verdict or None; its
evidence record is evidence.EVIDENCE[id].  Every threshold is a named constant
with its source.  Severities: error only where the spec contradicts itself,
warn for a likely mistake, info for a deliberate deviation, named.
"""

from __future__ import annotations

from archcalc.linter.core import Facts, Verdict, and_list, rule, short_count
from archcalc.report.units import si
from archcalc.parallel.tensor import tp_shards_heads
from archcalc.spec.model import GATED_FF_RATIO, PLAIN_FF_RATIO

# ---- FFN ---------------------------------------------------------------------------------------

# seed-001, Kaplan et al. 2020 Fig. 5: the loss is nearly flat for d_ff/d_model between 1 and 10.
FFN_FLAT_BAND = (1.0, 10.0)
# Within 10% of the convention follows it: T5 v1.1's 2.5 is 6% under 8/3.
FFN_TOLERANCE = 0.10


@rule("ffn.ratio", severities=("info", "warn"),
      summary="d_ff / d_model against 8/3 (gated) or 4 (plain); warn outside the flat 1–10 band")
def ffn_ratio(f: Facts):
    s = f.spec
    if not f.dense_layers:  # only routed experts: their width follows the MoE's own granularity
        return None
    ratio = s.d_ff / s.d_model
    convention = ("d_ff / d_model = 8/3 ≈ 2.67 for a gated FFN (its 3·D·F matches the plain 2·D·4D), 4 for a "
                  "plain MLP; the loss is flat for ratios 1–10")
    what = f"d_ff / d_model = {s.d_ff:,} / {s.d_model:,} = {ratio:.3g} ({s.ffn.activation})"
    lo, hi = FFN_FLAT_BAND
    if not lo <= ratio <= hi:
        return Verdict("warn", ratio, f"{what}, outside the flat 1–10 band where the loss starts to rise.",
                       convention)
    conv, name = (GATED_FF_RATIO, "8/3 of a gated FFN") if s.ffn.gated else (PLAIN_FF_RATIO, "4 of a plain MLP")
    off = ratio / conv - 1
    if abs(off) > FFN_TOLERANCE:
        return Verdict("info", ratio, f"{what}: {off:+.0%} from the {name}, inside the flat band.", convention)
    return None


@rule("ffn.gated", summary="a plain (ungated) MLP where GLU variants are the convention")
def ffn_gated(f: Facts):
    act = f.spec.ffn.activation
    if f.spec.ffn.gated:
        return None
    return Verdict("info", act, f"The FFN is a plain {act} MLP, not a gated (GLU) variant.",
                   "SwiGLU or GeGLU: GLU variants reach a lower loss at matched parameters (Shazeer 2020, Narang "
                   "2021); GPT-3, Falcon and Nemotron train well without")


# ---- heads -------------------------------------------------------------------------------------

HEAD_DIM_MIN = 64  # seed-001 and the bundled models: 64 (GPT-2) to 256 (Gemma)
FLASH_MAX_HEAD_DIM = 256  # the largest head dimension FlashAttention-2 has kernels for
HEAD_DIM_MULTIPLE = 8  # FlashAttention pads a head dim to a multiple of 8 (16 bytes in bf16)
TP_DEGREES = (2, 4, 8)  # one node: the tensor-parallel degrees serving engines use
ONE_GPU_BYTES = 80e9  # A100 / H100 80 GB: bf16 weights above this must be split across GPUs
GQA_KV_HEADS = 8  # Llama 2 34B/70B and Llama 3: 8 KV heads, which also shard cleanly up to TP 8


@rule("heads.product", summary="n_heads × head_dim against d_model (MHA/GQA; MLA decouples them)")
def heads_product(f: Facts):
    s, a = f.spec, f.spec.attention
    if a.kind == "mla":
        return None
    width = a.n_heads * s.qk_head_dim
    if width == s.d_model:
        return None
    return Verdict("info", width / s.d_model,
                   f"n_heads × head_dim = {a.n_heads} × {s.qk_head_dim} = {width:,}, not d_model {s.d_model:,} "
                   f"({width / s.d_model:.3g}×).",
                   "n_heads × head_dim = d_model: head_dim stays fixed and heads are added as the model widens "
                   "(GPT-3, Llama 2)")


@rule("heads.dim", severities=("info", "warn"),
      summary="head_dim below 64 (info); above 256 or not a multiple of 8, which FlashAttention-2 lacks (warn)")
def heads_dim(f: Facts):
    s = f.spec
    dims = sorted({s.qk_head_dim, s.v_head_dim})
    convention = ("head_dim 64–256, a multiple of 8 (GPT-2 64, Llama 128, Gemma 256); FlashAttention-2 has kernels "
                  "up to 256")
    if dims[-1] > FLASH_MAX_HEAD_DIM:
        return Verdict("warn", dims[-1], f"head_dim {dims[-1]} is above 256, the largest FlashAttention-2 kernel: "
                                         "attention falls back to a slower one.", convention)
    odd = [d for d in dims if d % HEAD_DIM_MULTIPLE]
    if odd:
        return Verdict("warn", odd[0], f"head_dim {odd[0]} is not a multiple of 8: attention kernels pad it.",
                       convention)
    if dims[0] < HEAD_DIM_MIN:
        return Verdict("info", dims[0], f"head_dim {dims[0]} is below 64: many narrow heads risk a low-rank "
                                        "bottleneck in each head's attention.", convention)
    return None


@rule("heads.tp", severities=("info", "warn"),
      summary="KV heads vs TP 2/4/8: a degree that cannot split the heads, or that replicates the KV cache")
def heads_tp(f: Facts):
    s = f.spec
    heads, kv = s.attention.n_heads, s.n_kv_heads
    bad = [t for t in TP_DEGREES if not tp_shards_heads(s, t)]
    replicated = [t for t in TP_DEGREES if t not in bad and kv < t]
    if not bad and not replicated:
        return None
    what = f"{heads} query heads and one shared MLA latent" if s.attention.kind == "mla" else \
        f"{heads} query / {kv} KV heads"
    parts = []
    if bad:
        parts.append(f"TP {and_list(bad)} cannot split them evenly")
    if replicated:
        parts.append(f"TP {and_list(replicated)} replicate{'s' * (len(replicated) == 1)} the KV cache "
                     f"{and_list([f'{t // kv}×' for t in replicated])}")
    message = f"{what}: " + "; ".join(parts) + "."
    severity = "info"
    if len(bad) == len(TP_DEGREES) and f.bf16_weight_bytes > ONE_GPU_BYTES:
        severity = "warn"
        message += f" Its bf16 weights ({si(f.bf16_weight_bytes, 'B')}) need more than one 80 GB GPU."
    return Verdict(severity, f"{heads}/{kv}", message,
                   "n_heads divisible by the TP degree and n_kv_heads a multiple of it (8 KV heads shard up to TP "
                   "8); with fewer KV heads than ranks each rank holds a whole copy")


@rule("heads.kv_cache", summary="full MHA on a multiple of 8 heads (16+): a KV cache GQA-8 would cut")
def heads_kv_cache(f: Facts):
    s, a = f.spec, f.spec.attention
    if a.kind == "mla" or s.n_kv_heads != a.n_heads or a.n_heads <= GQA_KV_HEADS or a.n_heads % GQA_KV_HEADS:
        return None
    return Verdict("info", f"{a.n_heads}/{s.n_kv_heads}",
                   f"Full multi-head attention: {a.n_heads} KV heads cache {a.n_heads / GQA_KV_HEADS:.3g}× the keys "
                   "and values of GQA with 8.",
                   "GQA (8 KV heads) or MQA for inference: a smaller KV cache and decode traffic at little quality "
                   "cost; Llama 2 kept MHA only at 7B and 13B")


@rule("heads.window", summary="a sliding window that never binds (≥ max_context) or that no layer uses")
def heads_window(f: Facts):
    s = f.spec
    window = s.attention.sliding_window
    if window is None:
        return None
    convention = "a window well below the context: Mistral 4,096 of 32,768, Gemma 2 4,096 of 8,192"
    if not f.local_layers:
        return Verdict("info", window, f"sliding_window {window:,} is set but no layer is local.", convention)
    if window >= s.max_context:
        return Verdict("info", window, f"sliding_window {window:,} ≥ max_context {s.max_context:,}: the window "
                                       "never limits attention.", convention)
    return None


# ---- shape -------------------------------------------------------------------------------------

# seed-001: GPT-3 and Llama converge on d_model / n_layers ≈ 128; a factor 2 either side holds
# every bundled dense model of 7B parameters or more (86 to 205).
ASPECT_BAND = (64.0, 256.0)
# A factor 10 off 128 (12.8, 1,280) is beyond any model in the evidence (MobileLLM's 19.2 to 205).
ASPECT_LIMITS = (12.8, 1280.0)
TENSOR_CORE_MULTIPLE = 8  # bf16 Tensor Cores need matmul dims that are multiples of 8 (16 bytes)
TILE_MULTIPLE = 64  # GEMM tiles are 64 or 128 wide; nanoGPT pads to 64, Megatron-LM to 128


@rule("shape.aspect", severities=("info", "warn"),
      summary="d_model / n_layers against ≈128 (info outside 64–256, warn beyond a factor 10)")
def shape_aspect(f: Facts):
    s = f.spec
    aspect = s.d_model / s.n_layers
    lo, hi = ASPECT_BAND
    if lo <= aspect <= hi:
        return None
    what = f"d_model / n_layers = {s.d_model:,} / {s.n_layers} = {aspect:.3g}"
    side = "deeper and narrower" if aspect < lo else "wider and shallower"
    convention = ("d_model / n_layers ≈ 128 (GPT-3 175B, Llama 2 7B); bundled models span 37 (small, deep-and-thin) "
                  "to 205 (Command R); at fixed N the loss depends only weakly on shape")
    if not ASPECT_LIMITS[0] <= aspect <= ASPECT_LIMITS[1]:
        return Verdict("warn", aspect, f"{what}: more than 10× {side} than the convention, beyond every published "
                                       "shape (a mistyped n_layers?).", convention)
    return Verdict("info", aspect, f"{what}: {side} than the ≈128 convention.", convention)


@rule("shape.tiles", severities=("info", "warn"),
      summary="d_model / d_ff / expert widths not multiples of 64 (info) or of 8 (warn: Tensor Cores)")
def shape_tiles(f: Facts):
    s = f.spec
    dims = {"d_model": s.d_model}
    if f.dense_layers:
        dims["d_ff"] = s.d_ff
    moe = s.ffn.moe
    if moe:
        dims["d_expert"] = moe.d_expert
        if moe.d_shared:
            dims["d_shared"] = moe.d_shared
    convention = "matmul dims in multiples of 64 or 128 (GEMM tiles); at the very least 8 for bf16 Tensor Cores"
    for multiple, severity in ((TENSOR_CORE_MULTIPLE, "warn"), (TILE_MULTIPLE, "info")):
        off = [f"{k} {v:,}" for k, v in dims.items() if v % multiple]
        if off:
            return Verdict(severity, off[0], f"{', '.join(off)} {'is' if len(off) == 1 else 'are'} not a multiple of "
                                             f"{multiple}: matmuls run on partly empty tiles.", convention)
    return None


# ---- vocabulary --------------------------------------------------------------------------------

VOCAB_OLDER = (30_000, 50_000)  # seed-001: early models used 30k–50k tokens
VOCAB_MULTILINGUAL = (100_000, 250_000)  # seed-001: multilingual production models, 100k–250k
# The seed's bands are round numbers: ±5% admits the padded sizes real tokenizers use
# (GPT-2's 50,257, Pythia's 50,432, Gemma 3's 262,144).
VOCAB_SLACK = 0.05
VOCAB_MULTIPLE = 64  # nanoGPT pads 50,257 to 50,304 = 786 × 64; Megatron-LM pads to 128
# The tables hold < 15% of the parameters at 7B and above (Llama 3.1 8B 13%, Qwen2.5 7B 14%); a
# fifth is the small-model regime; more than half leaves the Transformer itself starved.
VOCAB_SHARE_INFO, VOCAB_SHARE_WARN = 0.20, 0.50


@rule("vocab.size", summary="vocab_size against the 30–50k (older) and 100–250k (multilingual) conventions")
def vocab_size(f: Facts):
    v = f.spec.vocab_size
    bands = (VOCAB_OLDER, VOCAB_MULTILINGUAL)
    if any(lo * (1 - VOCAB_SLACK) <= v <= hi * (1 + VOCAB_SLACK) for lo, hi in bands):
        return None
    where = ("below the 30k–50k of older models" if v < VOCAB_OLDER[0] else
             "between the older 30k–50k and the multilingual 100k–250k" if v < VOCAB_MULTILINGUAL[0] else
             "above the 100k–250k of multilingual models")
    return Verdict("info", v, f"vocab_size {v:,} is {where}.",
                   "30k–50k tokens (GPT-2, Llama 2) or, for multilingual production models, 100k–250k (Llama 3, "
                   "Qwen, Gemma): fewer tokens per text, cheaper inference in low-resource languages")


@rule("vocab.padding", summary="vocab_size not a multiple of 64 (the embedding and LM head matmul)")
def vocab_padding(f: Facts):
    v = f.spec.vocab_size
    if v % VOCAB_MULTIPLE == 0:
        return None
    padded = -(-v // VOCAB_MULTIPLE) * VOCAB_MULTIPLE
    return Verdict("info", v, f"vocab_size {v:,} is not a multiple of 64; padding the tables to {padded:,} rows "
                              "keeps the LM-head matmul on full tiles.",
                   "pad the embedding to a multiple of 64 or 128 (nanoGPT: 50,257 -> 50,304; Megatron-LM pads to 128)")


@rule("vocab.share", severities=("info", "warn"),
      summary="the embedding + unembedding share of all parameters (info above 20%, warn above 50%)")
def vocab_share(f: Facts):
    s, p = f.spec, f.params
    tables = p.by_component.get("embedding", 0) + p.by_component.get("lm_head", 0)
    share = tables / p.total
    if share <= VOCAB_SHARE_INFO:
        return None
    shape = f"{s.vocab_size:,} × {s.d_model:,}" + (", tied" if s.tie_embeddings else " × 2, untied")
    message = f"The vocabulary tables ({shape}) hold {share:.0%} of the {short_count(p.total)} parameters."
    convention = ("at 7B and above the tables are a few percent of the parameters (Llama 2 7B 4%, Llama 3.1 70B 3%); "
                  "small models with 100k+ vocabularies spend a fifth or more on them")
    severity = "warn" if share > VOCAB_SHARE_WARN else "info"
    return Verdict(severity, share, message, convention)
