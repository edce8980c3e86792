"""The evidence behind every lint rule, as data.

SOURCES: citation keys -> the paper, config or note.  EVIDENCE: rule id ->
Evidence.  `models` quotes bundled specs (specs/NAME.yaml) by name, and
tests/lint recomputes each value from the spec, so a misquoted config fails a
test; a quantity "hf:KEY" is read from the model's config.json fixture
(tests/data/hf/NAME.json) instead.  `published` holds models that are not
bundled, each with the paper or config that states the number.

The seed notes are the project's reading notes (Chinese) that collected these
conventions: 001 is a transcript of a Stanford CS336 lecture on architectures
and hyperparameters, 000 and 002 are wiki pages on architecture components,
position encoding and normalisation.
"""

from __future__ import annotations

from archcalc.linter.core import Evidence

SOURCES = {
    "seed-001": "seed notes 001: Stanford CS336 lecture on architectures and hyperparameters",
    "seed-000": "seed notes 000: architecture components and training stability (AI-PM Wiki)",
    "seed-002": "seed notes 002: position encoding and normalisation",
    "kaplan2020": "Kaplan et al. 2020, Scaling Laws for Neural Language Models, arXiv:2001.08361 "
                  "(Fig. 5: loss varies only a few percent over a wide range of shapes at fixed N)",
    "shazeer2020": "Shazeer 2020, GLU Variants Improve Transformer, arXiv:2002.05202",
    "narang2021": "Narang et al. 2021, Do Transformer Modifications Transfer Across Implementations "
                  "and Applications?, arXiv:2102.11972",
    "t5": "Raffel et al. 2020 (T5), arXiv:1910.10683",
    "gpt2": "Radford et al. 2019, Language Models are Unsupervised Multitask Learners (GPT-2), §2.3",
    "gpt3": "Brown et al. 2020 (GPT-3), arXiv:2005.14165, Table 2.1 and App. B",
    "palm": "Chowdhery et al. 2022 (PaLM), arXiv:2204.02311",
    "llama": "Touvron et al. 2023 (LLaMA), arXiv:2302.13971",
    "llama2": "Touvron et al. 2023 (Llama 2), arXiv:2307.09288",
    "bhojanapalli2020": "Bhojanapalli et al. 2020, Low-Rank Bottleneck in Multi-head Attention Models, "
                        "arXiv:2002.07028",
    "flash-attn": "FlashAttention-2 (Dao 2023, arXiv:2307.08691): head dimensions up to 256; vLLM's "
                  "FlashAttention backend takes head sizes 32, 64, 96, ..., 256",
    "gqa": "Ainslie et al. 2023, GQA: Training Generalized Multi-Query Transformer Models, arXiv:2305.13245",
    "vllm-tp": "vLLM QKVParallelLinear: TP divides the query heads; KV heads split evenly or are replicated "
               "whole (archcalc.parallel.tensor.tp_shards_heads)",
    "nvidia-gemm": "NVIDIA Matrix Multiplication Background User's Guide: Tensor Cores want dimensions that are "
                   "multiples of 8 in fp16/bf16; tile and wave quantization favour multiples of 64 or 128",
    "nanogpt": "karpathy/nanoGPT model.py: vocab_size 50304, \"GPT-2 vocab_size of 50257, padded up to nearest "
               "multiple of 64 for efficiency\"",
    "megatron-lm": "Megatron-LM --make-vocab-size-divisible-by (default 128)",
    "mobilellm": "Liu et al. 2024 (MobileLLM), arXiv:2402.14905: deep-and-thin shapes at sub-billion scale",
    "vaswani2017": "Vaswani et al. 2017, Attention Is All You Need, arXiv:1706.03762 (§5.3: 4,000 warm-up steps)",
    "xiong2020": "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture, arXiv:2002.04745",
    "olmo2": "Team OLMo 2024, 2 OLMo 2 Furious, arXiv:2501.00656 (norm after each sublayer + QK-norm)",
    "rmsnorm": "Zhang & Sennrich 2019, Root Mean Square Layer Normalization, arXiv:1910.07467",
    "vit22b": "Dehghani et al. 2023 (ViT-22B), arXiv:2302.05442: divergent loss at around 8B parameters from "
              "attention-logit growth, fixed by QK-norm",
    "wortsman2023": "Wortsman et al. 2023, Small-scale proxies for large-scale Transformer training "
                    "instabilities, arXiv:2309.14322 (QK-layernorm, z-loss, warm-up, LR sensitivity)",
    "gemma": "Gemma Team 2024 (Gemma), arXiv:2403.08295",
    "gemma2": "Gemma Team 2024 (Gemma 2), arXiv:2408.00118: attention soft-cap 50, final logit soft-cap 30",
    "gemma3": "Gemma Team 2025 (Gemma 3), arXiv:2503.19786: QK-norm replaces Gemma 2's soft-capping",
    "rope": "Su et al. 2021 (RoFormer), arXiv:2104.09864: theta_i = base^(-2i/d)",
    "abf": "Xiong et al. 2023, Effective Long-Context Scaling of Foundation Models, arXiv:2309.16039",
    "pi": "Chen et al. 2023, Extending Context Window via Positional Interpolation, arXiv:2306.15595",
    "yarn": "Peng et al. 2023 (YaRN), arXiv:2309.00071",
    "nope": "Kazemnejad et al. 2023, The Impact of Positional Encoding on Length Generalization in "
            "Transformers, arXiv:2305.19466",
    "alibi": "Press et al. 2022 (ALiBi), arXiv:2108.12409",
    "neox": "Black et al. 2022 (GPT-NeoX-20B), arXiv:2204.06745",
    "mup": "Yang et al. 2022 (muP, Tensor Programs V), arXiv:2203.03466: Adam LR of hidden weights ~ 1/width",
    "adamw": "Loshchilov & Hutter 2019, Decoupled Weight Decay Regularization, arXiv:1711.05101",
    "wd2023": "Andriushchenko et al. 2023, Why Do We Need Weight Decay in Modern Deep Learning?, "
              "arXiv:2310.04415",
    "chinchilla": "Hoffmann et al. 2022 (Chinchilla), arXiv:2203.15556: about 20 tokens per parameter",
}


def _ev(sources, quantity=None, models=None, published=None) -> Evidence:
    return Evidence(tuple(sources), quantity, tuple((models or {}).items()), tuple((published or {}).items()))


EVIDENCE: dict[str, Evidence] = {
    # ---- FFN ----------------------------------------------------------------------------------
    "ffn.ratio": _ev(
        ["seed-001", "kaplan2020", "shazeer2020", "t5", "gemma"], "d_ff / d_model",
        {"llama-2-7b": 2.6875, "olmo-2-7b": 2.6875, "qwen3-8b": 3.0, "llama-3.1-8b": 3.5,
         "mistral-7b-v0.1": 3.5, "qwen2.5-7b": 5.2857, "gemma-2-9b": 4.0, "gemma-7b": 8.0, "gpt2": 4.0,
         "falcon-7b": 4.0},
        {"T5 11B": "64 (d_model 1,024, d_ff 65,536, ReLU; arXiv:1910.10683 §3.7)",
         "T5 v1.1 XXL": "2.5 (d_model 4,096, d_ff 10,240, GeGLU; google/t5-v1_1-xxl config.json)",
         "PaLM 540B": "4 (SwiGLU, d_ff = 4·d_model; arXiv:2204.02311 Table 1)",
         "GPT-3 175B": "4 (GELU, d_ff = 4·d_model; arXiv:2005.14165 §2.1)",
         "Gemma 7B report": "49,152 'feedforward hidden dims' counts both GeGLU branches of d_ff 24,576 "
                            "(arXiv:2403.08295 Table 1); d_ff here is one branch"}),
    "ffn.gated": _ev(
        ["seed-001", "shazeer2020", "narang2021"], "ffn.activation",
        {"llama-2-7b": "swiglu", "gemma-7b": "geglu", "gpt2": "gelu", "falcon-7b": "gelu",
         "nemotron-4b": "relu2"},
        {"GPT-3 175B": "GELU, not gated (arXiv:2005.14165)",
         "Nemotron-4 340B": "squared ReLU, not gated (arXiv:2406.11704)"}),
    # ---- heads --------------------------------------------------------------------------------
    "heads.product": _ev(
        ["seed-001", "bhojanapalli2020"], "n_heads · head_dim / d_model",
        {"llama-2-7b": 1.0, "gemma-7b": 1.3333, "gemma-2-9b": 1.1429, "gemma-3-27b": 0.7619,
         "gpt-oss-20b": 1.4222, "qwen3-0.6b": 2.0},
        {"GPT-3 175B": "1 (96 heads × 128 = d_model 12,288; arXiv:2005.14165 Table 2.1)",
         "PaLM 540B": "0.67 (48 heads × 256 = 12,288 vs d_model 18,432; arXiv:2204.02311 Table 1: "
                      "head size always 256)"}),
    "heads.dim": _ev(
        ["flash-attn", "seed-001", "bhojanapalli2020"], "head_dim",
        {"gpt2": 64, "phi-3-mini-4k": 96, "llama-2-7b": 128, "deepseek-v3": 192, "gemma-7b": 256}),
    "heads.tp": _ev(
        ["vllm-tp", "gqa"], "n_heads / n_kv_heads",
        {"llama-3.1-70b": "64/8", "qwen2.5-7b": "28/4", "qwen3-30b-a3b": "32/4", "gemma-2b": "8/1",
         "falcon-7b": "71/1"}),
    "heads.kv_cache": _ev(
        ["gqa", "seed-001"], "n_heads / n_kv_heads",
        {"llama-2-7b": "32/32", "command-r": "64/64", "llama-3.1-8b": "32/8", "mistral-7b-v0.1": "32/8"},
        {"Llama 2": "MHA at 7B and 13B, GQA with 8 KV heads at 34B and 70B (arXiv:2307.09288 §2.2)"}),
    "heads.window": _ev(
        ["seed-001"], "attention.sliding_window",
        {"mistral-7b-v0.1": 4096, "gemma-2-9b": 4096, "phi-3-mini-4k": 2047}),
    # ---- shape --------------------------------------------------------------------------------
    "shape.aspect": _ev(
        ["seed-001", "kaplan2020", "mobilellm"], "d_model / n_layers",
        {"llama-2-7b": 128.0, "mistral-7b-v0.1": 128.0, "llama-3.1-70b": 102.4, "deepseek-v3": 117.51,
         "command-r": 204.8, "gpt2": 64.0, "qwen3-0.6b": 36.571},
        {"GPT-3 175B": "128 (12,288 / 96; arXiv:2005.14165 Table 2.1)",
         "PaLM 540B": "156 (18,432 / 118; arXiv:2204.02311 Table 1)",
         "MobileLLM 125M": "19.2 (576 / 30; arXiv:2402.14905)"}),
    "shape.tiles": _ev(
        ["nvidia-gemm", "nanogpt"], "d_model",
        {"llama-2-7b": 4096, "falcon-7b": 4544, "gpt-oss-20b": 2880, "qwen2.5-0.5b": 896}),
    # ---- vocabulary ---------------------------------------------------------------------------
    "vocab.size": _ev(
        ["seed-001"], "vocab_size",
        {"llama-2-7b": 32000, "gpt2": 50257, "pythia-6.9b": 50432, "falcon-7b": 65024, "olmo-2-7b": 100352,
         "llama-3.1-8b": 128256, "qwen2.5-7b": 152064, "gemma-7b": 256000, "gemma-3-27b": 262208},
        {"PaLM": "256k SentencePiece vocabulary (arXiv:2204.02311)"}),
    "vocab.padding": _ev(
        ["nanogpt", "megatron-lm", "nvidia-gemm"], "vocab_size",
        {"gpt2": 50257, "pythia-6.9b": 50432, "llama-2-7b": 32000, "phi-3-mini-4k": 32064},
        {"nanoGPT GPT-2": "50,304 = 786 × 64 (karpathy/nanoGPT model.py)"}),
    "vocab.share": _ev(
        ["seed-001", "kaplan2020"], "share of parameters in the embedding and unembedding",
        {"gpt2": 0.3102, "qwen2.5-0.5b": 0.2756, "gemma-3-1b": 0.302, "llama-3.2-1b": 0.2125,
         "nemotron-4b": 0.3753, "llama-2-7b": 0.0389, "llama-3.1-70b": 0.0298}),
    # ---- norms and biases ---------------------------------------------------------------------
    "norm.placement": _ev(
        ["seed-001", "xiong2020", "vaswani2017", "olmo2"], "norm.placement",
        {"llama-2-7b": "pre", "olmo-2-7b": "post", "gemma-2-9b": "both", "gemma-3-27b": "both"},
        {"Transformer (2017)": "post-norm with 4,000 warm-up steps (arXiv:1706.03762 §5.3)",
         "BERT": "post-norm with 10,000 warm-up steps (arXiv:1810.04805)"}),
    "norm.kind": _ev(
        ["seed-001", "rmsnorm", "narang2021"], "norm.kind",
        {"llama-2-7b": "rmsnorm", "gemma-7b": "rmsnorm", "gpt2": "layernorm", "falcon-7b": "layernorm",
         "command-r": "layernorm"}),
    "norm.final": _ev(
        ["gpt2", "xiong2020"], "norm.final",
        {"gpt2": True, "llama-2-7b": True},
        {"GPT-2": "added a LayerNorm after the final block when it moved to pre-norm (Radford et al. 2019 §2.3)"}),
    "norm.qk": _ev(
        ["vit22b", "wortsman2023", "seed-001", "olmo2"], "attention.qk_norm",
        {"qwen3-8b": "head", "olmo-2-7b": "full", "gemma-3-27b": "head", "llama-3.1-70b": "none",
         "gemma-2-9b": "none"}),
    "norm.softcap": _ev(
        ["gemma2", "gemma3", "seed-001"], "attention.softcap",
        {"gemma-2-9b": 50.0},
        {"Gemma 3": "no soft-capping; QK-norm instead (arXiv:2503.19786)"}),
    "bias.linear": _ev(
        ["seed-001", "palm"], "projections with a bias",
        {"llama-2-7b": "none", "qwen2.5-7b": "q,k,v", "gpt2": "q,k,v,o,ffn", "starcoder2-7b": "q,k,v,o,ffn",
         "gpt-oss-20b": "q,k,v,o,ffn"},
        {"PaLM": "no biases in dense layers or norms, for stability at scale (arXiv:2204.02311 §2)"}),
    # ---- positions ----------------------------------------------------------------------------
    "pos.kind": _ev(
        ["seed-001", "seed-002", "alibi", "nope"], "position.kind",
        {"llama-2-7b": "rope", "deepseek-v3": "rope", "gpt2": "learned"},
        {"BLOOM 176B": "ALiBi (arXiv:2211.05100)"}),
    "pos.theta": _ev(
        ["rope", "abf", "seed-002"], "slowest RoPE wavelength 2π·theta^((r-2)/r), tokens",
        {"llama-2-7b": 54410, "phi-3-mini-4k": 51862, "gemma-7b": 58470, "llama-3.1-8b": 2559196,
         "qwen2.5-7b": 5063256},
        {"Llama 2 Long": "RoPE base 10,000 -> 500,000 to train at 32k (arXiv:2309.16039)",
         "Code Llama": "RoPE base 1,000,000, trained at 16k (arXiv:2308.12950)"}),
    "pos.extension": _ev(
        ["yarn", "pi", "seed-002", "seed-000"], "position.scaling.factor",
        {"llama-3.1-8b": 8.0, "gemma-3-27b": 8.0, "gpt-oss-20b": 32.0, "llama-3.2-1b": 32.0,
         "deepseek-v3": 40.0},
        {"YaRN on Llama 2": "s = 16 and 32: 4k -> 64k and 128k (arXiv:2309.00071)",
         "PI on LLaMA": "2k -> 32k, 16× (arXiv:2306.15595)"}),
    "pos.trained": _ev(
        ["pi", "yarn", "seed-002"], "position.scaling.original_context",
        {"llama-3.1-8b": 8192, "gpt-oss-20b": 4096, "deepseek-v3": 4096},
        {"Llama 2": "pretrained at 4,096 tokens and released at 4,096 (arXiv:2307.09288 §2.2)",
         "Llama 3.1": "pretrained at 8k, then a long-context stage to 128k (arXiv:2407.21783 §3.4.2)"}),
    "pos.partial": _ev(
        ["rope", "neox"], "position.rotary_fraction",
        {"llama-2-7b": 1.0, "nemotron-4b": 0.5, "pythia-6.9b": 0.25},
        {"GPT-J 6B": "0.25 (rotary_dim 64 of head_dim 256; EleutherAI/gpt-j-6b config.json)",
         "GPT-NeoX-20B": "0.25 (arXiv:2204.06745)"}),
    "pos.nope": _ev(
        ["seed-001", "nope"], "attention.global_rope",
        {"gemma-3-27b": True, "llama-2-7b": True},
        {"Llama 4": "global layers without RoPE interleaved with RoPE layers (iRoPE; Meta, April 2025)"}),
    # ---- training (the optional training: section) --------------------------------------------
    "train.dropout": _ev(
        ["seed-001", "palm"], "hf:resid_pdrop",
        {"gpt2": 0.1, "phi-3-mini-4k": 0.0},
        {"PaLM": "no dropout in pretraining, 0.1 in most fine-tuning (arXiv:2204.02311 §5)"}),
    "train.weight_decay": _ev(
        ["seed-001", "wd2023", "adamw"], None, None,
        {"GPT-3": "0.1 (arXiv:2005.14165 App. B)", "LLaMA, Llama 2": "0.1 (arXiv:2302.13971, arXiv:2307.09288)"}),
    "train.z_loss": _ev(
        ["palm", "wortsman2023", "seed-001"], None, None,
        {"PaLM": "1e-4 · log²Z (arXiv:2204.02311 §5)"}),
    "train.lr": _ev(
        ["gpt3", "llama", "llama2", "mup", "wortsman2023"], None, None,
        {"GPT-3 350M": "3.0e-4 at d_model 1,024 (lr·D 0.31)", "GPT-3 125M": "6.0e-4 at 768 (0.46)",
         "GPT-3 6.7B": "1.2e-4 at 4,096 (0.49)", "GPT-3 175B": "0.6e-4 at 12,288 (0.74)",
         "LLaMA 7B, Llama 2 7B": "3.0e-4 at 4,096 (1.23)", "LLaMA 13B": "3.0e-4 at 5,120 (1.54)",
         "LLaMA 65B, Llama 2 70B": "1.5e-4 at 8,192 (1.23)"}),
    "train.warmup": _ev(
        ["xiong2020", "wortsman2023", "seed-001"], None, None,
        {"GPT-3": "375M tokens (arXiv:2005.14165 App. B)", "LLaMA, Llama 2": "2,000 steps",
         "Transformer (2017)": "4,000 steps"}),
    "train.tokens": _ev(
        ["chinchilla"], None, None,
        {"Chinchilla 70B": "1.4T tokens, 20 per parameter (arXiv:2203.15556)",
         "Llama 2 7B": "2T tokens, about 300 per parameter (arXiv:2307.09288)",
         "GPT-3 175B": "300B tokens, 1.7 per parameter (arXiv:2005.14165)"}),
}
