"""Training rules: the seeds' pretraining conventions, read from the spec's
optional `training:` section.  A field the section leaves out is not judged."""

from __future__ import annotations

from archcalc.linter.core import Facts, Verdict, rule, short_count

DROPOUT_MAX_SEEN = 0.1  # GPT-2's config (resid/attn/embd_pdrop 0.1) is the most in the evidence; PaLM uses 0
WEIGHT_DECAY_BAND = (0.01, 0.3)  # 0.1 is the convention (GPT-3, LLaMA, Llama 2); 0.01 is PyTorch AdamW's default
# Peak learning rate × d_model across GPT-3 (350M: 3.0e-4 × 1,024 = 0.31) and LLaMA (13B: 3.0e-4 × 5,120 = 1.54).
LR_TIMES_WIDTH = (0.31, 1.54)
LR_MARGIN = 4  # a factor 4 beyond that band (which itself spans a factor 5)
LR_ABSURD = 1.0  # no Adam-family pretraining run uses a peak LR of 1 or more: a unit slip (3e-4 written 3)
TOKENS_PER_PARAM = 20  # Chinchilla's compute-optimal ratio


def _sci(x: float) -> str:
    """2 significant digits, exponent without padding: 7.6e-5."""
    return f"{x:.1e}".replace("e-0", "e-").replace("e+0", "e+")


def _training(f: Facts):
    return f.spec.training


@rule("train.dropout", severities=("info", "warn"), summary="dropout in pretraining (warn above GPT-2's 0.1)")
def train_dropout(f: Facts):
    t = _training(f)
    if t is None or t.dropout == 0:
        return None
    severity = "warn" if t.dropout > DROPOUT_MAX_SEEN else "info"
    return Verdict(severity, t.dropout, f"Dropout {t.dropout:g} in pretraining.",
                   "no dropout in single-epoch pretraining: there is no overfitting to fight and no evidence that it "
                   "lowers the loss (PaLM 0; GPT-2's config 0.1)")


@rule("train.weight_decay", severities=("info", "warn", "error"),
      summary="no weight decay (warn), outside 0.01–0.3 (info), learning_rate × weight_decay ≥ 1 (error)")
def train_weight_decay(f: Facts):
    t = _training(f)
    if t is None or t.weight_decay is None:
        return None
    wd = t.weight_decay
    convention = ("AdamW weight decay 0.1 (GPT-3, LLaMA, Llama 2): in pretraining it does not fight overfitting but "
                  "drives the loss down as the learning rate decays")
    if t.learning_rate and t.learning_rate * wd >= 1:
        return Verdict("error", wd, f"learning_rate × weight_decay = {t.learning_rate * wd:g} ≥ 1: each decoupled "
                                    "decay step multiplies the weights by 1 − lr·wd ≤ 0.", convention)
    if wd == 0:
        return Verdict("warn", wd, "No weight decay (0).", convention)
    lo, hi = WEIGHT_DECAY_BAND
    if not lo <= wd <= hi:
        return Verdict("info", wd, f"Weight decay {wd:g} is outside 0.01–0.3.", convention)
    return None


@rule("train.z_loss", summary="z-loss set to 0 with no final logit soft-capping")
def train_z_loss(f: Facts):
    t = _training(f)
    if t is None or t.z_loss != 0 or f.spec.final_softcap:
        return None
    return Verdict("info", 0.0, "No z-loss and no final logit soft-capping: nothing keeps log Z of the output "
                                "softmax near 0.",
                   "z-loss 1e-4 · log²Z (PaLM; OLMo 2, Qwen 2.5 and DCLM use it) against output-logit "
                   "divergence late in training")


@rule("train.lr", severities=("info", "warn", "error"),
      summary="peak learning rate vs width: lr × d_model against 0.31–1.54 (GPT-3, LLaMA); ≥ 1 is an error")
def train_lr(f: Facts):
    t, s = _training(f), f.spec
    if t is None or t.learning_rate is None:
        return None
    lr = t.learning_rate
    lo, hi = LR_TIMES_WIDTH
    convention = (f"peak LR ∝ 1/width: lr × d_model ≈ {lo}–{hi} (GPT-3 6e-4 at 768 to 0.6e-4 at 12,288; LLaMA "
                  f"3e-4 at 4,096), i.e. {_sci(lo / s.d_model)}–{_sci(hi / s.d_model)} at d_model {s.d_model:,}")
    if lr >= LR_ABSURD:
        return Verdict("error", lr, f"Peak learning rate {lr:g}: no Adam-family run trains at 1 or more.", convention)
    scaled = lr * s.d_model
    if scaled > hi * LR_MARGIN:
        qk = s.attention.qk_norm != "none"
        return Verdict("info" if qk else "warn", lr,
                       f"Peak learning rate {lr:g} at d_model {s.d_model:,} (lr × d_model {scaled:.3g}) is more than "
                       f"{LR_MARGIN}× the convention" + (", with QK-norm to absorb it." if qk else
                                                         " and there is no QK-norm: attention-logit growth is the "
                                                         "classic divergence."), convention)
    if scaled < lo / LR_MARGIN:
        return Verdict("info", lr, f"Peak learning rate {lr:g} at d_model {s.d_model:,} (lr × d_model {scaled:.3g}) "
                                   f"is under 1/{LR_MARGIN} of the convention, more like a fine-tuning rate.",
                       convention)
    return None


@rule("train.warmup", summary="no learning-rate warm-up on a pre-norm model (post-norm: see norm.placement)")
def train_warmup(f: Facts):
    t = _training(f)
    if t is None or t.warmup_steps != 0 or f.spec.norm.placement == "post":
        return None
    return Verdict("info", 0, "No learning-rate warm-up (0 steps).",
                   "a short linear warm-up (LLaMA 2,000 steps, GPT-3 375M tokens): pre-norm makes it optional, but it "
                   "still lowers the sensitivity to the learning rate")


@rule("train.tokens", summary="fewer pretraining tokens than Chinchilla's 20 per (active) parameter")
def train_tokens(f: Facts):
    t = _training(f)
    if t is None or t.tokens is None:
        return None
    active = f.params.active
    per_param = t.tokens / active
    if per_param >= TOKENS_PER_PARAM:
        return None
    return Verdict("info", t.tokens, f"{short_count(t.tokens)} tokens for {short_count(active)} parameters: "
                                     f"{per_param:.3g} per parameter, under the compute-optimal 20.",
                   "about 20 tokens per parameter is compute-optimal (Chinchilla); today's models train far past it "
                   "(Llama 2 7B: 2T tokens)")
