"""Our counts against numbers this project did not write: published parameter
counts and KV-cache sizes (reference/anchors-memory-flops.md §C.4, and the
sources listed in tests/data/hf/SOURCES.md)."""

from __future__ import annotations

import pytest
from conftest import sized, spec_of

GiB = 2**30

# name: total parameters as HF counts them (tied weights once, buffers never).
PUBLISHED_PARAMS = {
    "gpt2": 124_439_808,  # anchors §C.4
    "gpt-neo-125m": 125_198_592,  # model loaded with AutoModelForCausalLM, in third-party logs (SOURCES.md)
    "llama-2-7b": 6_738_415_616,  # anchors §C.4
    "llama-3.1-8b": 8_030_261_248,  # anchors §C.4 (Llama-3-8B, same shapes)
    "llama-3.1-70b": 70_553_706_496,  # HF safetensors total (SOURCES.md)
    "llama-3.2-1b": 1_235_814_400,  # GPTQModel test constant (SOURCES.md)
    "mistral-7b-v0.1": 7_241_732_096,  # anchors §C.4; GGUF general.parameter_count
    "mixtral-8x7b": 46_702_792_704,  # anchors §C.4
    "qwen2.5-0.5b": 494_032_768,  # anchors §C.4
    "qwen2.5-7b": 7_615_616_512,  # anchors §C.4
    "qwen3-0.6b": 596_049_920,  # anchors §C.4
    "qwen3-8b": 8_190_735_360,  # HF safetensors total (SOURCES.md)
    "qwen3-30b-a3b": 30_532_122_624,  # safetensors shapes summed (SOURCES.md)
    "gemma-7b": 8_537_680_896,  # keras-hub preset (SOURCES.md)
    "gemma-2-9b": 9_241_705_984,  # anchors §C.4
    "phi-3-mini-4k": 3_821_079_552,  # HF API test (SOURCES.md)
    "olmo-2-7b": 7_298_617_344,  # HF API fixture (SOURCES.md)
    "pythia-6.9b": 6_857_302_016,  # printed GPTNeoXForCausalLM size (SOURCES.md)
    "gpt-oss-20b": 20_914_757_184,  # ollama GGUF count (SOURCES.md)
    "deepseek-v2-lite": 15_706_484_224,  # runtime banner (SOURCES.md)
    # transformers' DeepSeek-V3 keeps e_score_correction_bias as a buffer; the
    # MTP layer is not part of the HF model (anchors §C.2).
    "deepseek-v3": 671_026_404_352,
}


@pytest.mark.parametrize("name, expected", PUBLISHED_PARAMS.items())
def test_published_parameter_count(name, expected):
    assert sized(spec_of(name)).params.total == expected


def test_active_parameters_of_moe_models():
    assert sized(spec_of("qwen3-30b-a3b")).params.active == 3_353_032_704  # SOURCES.md
    # Mixtral "12.9B active": the published 46,702,792,704 less the 6 unused of 8
    # experts, 6 · 3 · 4096 · 14,336 · 32 layers = 33,822,867,456 -> 12,879,925,248.
    assert sized(spec_of("mixtral-8x7b")).params.active == 12_879_925_248
    assert round(sized(spec_of("deepseek-v3")).params.active / 1e9, 2) == 37.55  # anchors §C.2
    # DBRX's model card (databricks/dbrx-instruct, quoted by NVIDIA's NIM card): "132B total parameters
    # of which 36B parameters are active on any input" (tests/data/hf/SOURCES.md)
    dbrx = sized(spec_of("dbrx-instruct")).params
    assert (round(dbrx.total / 1e9), round(dbrx.active / 1e9)) == (132, 36)


def test_checkpoints_that_store_the_tied_head_twice():
    """The 2023 Falcon checkpoints store lm_head beside the embedding: their
    published stored totals are our count plus one more V·D."""
    for name, stored in (("falcon-7b", 7_217_189_760), ("falcon-40b", 41_835_970_560)):
        spec = spec_of(name)
        assert sized(spec).params.total + spec.vocab_size * spec.d_model == stored


def test_gemma3_text_count_with_the_tokenizer_vocabulary():
    """keras-hub's gemma3_27b_text (27,009,002,240) uses the 262,144-token
    vocabulary; the HF config pads it to 262,208."""
    spec = spec_of("gemma-3-27b").model_copy(update={"vocab_size": 262_144})
    assert sized(spec).params.total == 27_009_002_240


# name: KV-cache bytes per token in bf16 over all layers, no window cap (anchors §C.4).
PUBLISHED_KV = {
    "gpt2": 36_864, "llama-2-7b": 524_288, "llama-3.1-8b": 131_072, "mistral-7b-v0.1": 131_072,
    "qwen2.5-0.5b": 12_288, "qwen2.5-7b": 57_344, "qwen3-0.6b": 114_688, "gemma-2-9b": 344_064,
    "mixtral-8x7b": 131_072,
    "deepseek-v3": 70_272,  # MLA: 61 · (512 + 64) · 2
}


@pytest.mark.parametrize("name, expected", PUBLISHED_KV.items())
def test_published_kv_bytes_per_token(name, expected):
    assert sized(spec_of(name)).kv.bytes_per_token == expected


def test_kv_at_context_caps_windows():
    assert sized(spec_of("llama-3.1-8b"), context=8192).kv.bytes == GiB  # "8 k ctx ⇒ 1 GiB"
    kv = sized(spec_of("gemma-3-27b"), context=131_072).kv
    assert kv.bytes_per_token * 131_072 / GiB == pytest.approx(62.0)  # naive: all layers full
    by_kind = {k.kind: k for k in kv.by_kind}
    assert by_kind["global"].bytes / GiB == pytest.approx(10.0)  # the 10 global layers
    assert by_kind["local"].bytes == 52 * 1024 * 8 * 1024  # 52 local layers × 1024-token window × 8 KiB
    mistral = sized(spec_of("mistral-7b-v0.1"), context=32_768).kv
    assert mistral.bytes == 4096 * 131_072  # every layer capped at the 4096 window


def test_kv_dtype_scales_bytes():
    assert sized(spec_of("llama-3.1-8b"), kv_dtype="fp8").kv.bytes_per_token == 65_536


def test_multi_token_prediction_modules_as_checkpoints_store_them():
    """The MTP modules, reported apart from the totals (ops/mtp.py), against two stored counts.
    Qwen3-Next-80B-A3B: the `mtp.*` tensors of its 41 safetensors shards sum to 1,650,471,424 (the
    checkpoint's 81,324,862,720 less the model's 79,674,391,296; index id 62751147890); its
    config.json states no MTP key, so the module is given here.  GLM-4.5-Air: llmfit's HF
    safetensors total 110,468,824,832 (AlexsJones/llmfit at a3e0eb2) less our 106,852,245,504 and
    the 46 MoE layers' 128-value e_score_correction_bias buffers is 3,616,573,440 for the MTP layer
    (num_nextn_predict_layers 1) with its own embedding and head copies."""
    from archcalc.spec.model import MTPSpec

    qwen = spec_of("qwen3-next-80b-a3b").model_copy(update={"mtp": MTPSpec(layers=1)})
    assert sized(qwen).mtp_params == 81_324_862_720 - 79_674_391_296 == 1_650_471_424
    glm = sized(spec_of("glm-4.5-air"))
    assert glm.mtp_params == 110_468_824_832 - 106_852_245_504 - 46 * 128 == 3_616_573_440
    assert glm.params.total == 106_852_245_504  # never in the total
