"""Serving engines' KV rules pinned to the engines' own source, worked by hand
with real models' dims at settings where a plausible wrong rule gives a
different number.

- llama.cpp, src/llama-context.cpp: n_ctx = GGML_PAD(n_ctx, 256); with a
  unified cache n_ctx_seq = n_ctx (one pool shared by all sequences).
  src/llama-kv-cache-iswa.cpp: size_swa = GGML_PAD(min(size_base,
  n_swa·(unified ? n_seq_max : 1) + n_ubatch), 256), size_base = n_ctx.
- vLLM V1, vllm/v1/kv_cache_interface.py, SlidingWindowSpec:
  num_tokens = min(sliding_window − 1 + max_num_batched_tokens, max_model_len);
  blocks = cdiv(num_tokens, block_size) + 1 ("+1 here because the sliding
  window may not start from the beginning of the block. For example, if the
  block size is 4 and num_token is 4, we need two blocks [XXCD] [EF]");
  FullAttentionSpec: cdiv(max_model_len, block_size).
"""

from __future__ import annotations

import functools
import math

import pytest

from archcalc.errors import InputError
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.hardware.profile import HardwareProfile
from archcalc.serving.deployment import Deployment
from archcalc.serving.engines.vllm import vllm_blocks
from archcalc.serving.planner import Planner, warnings
from archcalc.spec.model import ModelSpec

H100 = HardwareProfile(name="H100 SXM", vendor="nvidia", kind="gpu", memory_bytes=80 * 2**30,
                       memory_bandwidth=3.35e12, peak_flops={"fp32": 66.9e12, "bf16": 989.4e12},
                       source="https://www.nvidia.com/en-us/data-center/h100/")

# google/gemma-3-27b-it config.json (text part): 62 layers, 5 local : 1 global
# -> 52 sliding layers (window 1024) and 10 global; 16 KV heads of 128.
GEMMA_3_27B = ModelSpec.model_validate({
    "name": "gemma-3-27b", "d_model": 5376, "n_layers": 62, "vocab_size": 262208, "max_context": 131072,
    "tie_embeddings": True, "attention": {"n_heads": 32, "n_kv_heads": 16, "head_dim": 128, "qk_norm": "head",
                                          "sliding_window": 1024, "layer_types": "5:1"},
    "ffn": {"activation": "geglu", "d_ff": 21504}, "norm": {"placement": "both"}})
# One token in one layer: 16 heads · (128 K + 128 V) · 2 B (f16 / bf16) = 8192 B.
TOKEN_LAYER = 16 * 256 * 2


def cells(engine: str, context: int, batch: int, **dep) -> dict[str, int]:
    plan = Planner(GEMMA_3_27B, H100, Deployment(engine=engine, **dep)).plan(context, batch)
    return {k.kind: k.cells for k in plan.kv}


# ---- llama.cpp: one unified pool of n_seq · context, padded once ------------------------------------------


def test_llamacpp_gemma3_three_sequences_of_4000():
    """-c 12000 -np 3 --kv-unified, n_ubatch 512:
      base (global) cells: GGML_PAD(12,000, 256) = 47 · 256 = 12,032
          (padding each sequence, GGML_PAD(4000, 256) · 3 = 12,288, is wrong)
      SWA cells: GGML_PAD(min(12,032, 1024 · 3 + 512 = 3584), 256) = 3584
          (a per-sequence pool, GGML_PAD(1024 + 512, 256) · 3 = 4608, is wrong)
      bytes: (10 · 12,032 + 52 · 3584) · 8192 = 985,661,440 + 1,526,726,656 = 2,512,388,096."""
    plan = Planner(GEMMA_3_27B, H100, Deployment(engine="llamacpp")).plan(4000, 3)
    assert {k.kind: k.cells for k in plan.kv} == {"global": 12_032, "local": 3584}
    assert plan.kv_bytes == 2_512_388_096 == (10 * 12_032 + 52 * 3584) * TOKEN_LAYER


def test_llamacpp_swa_pool_capped_by_n_ctx():
    # -c 900 -np 3: n_ctx = GGML_PAD(900, 256) = 1024 (per sequence: 512 · 3 = 1536);
    # SWA: GGML_PAD(min(1024, 3072 + 512), 256) = 1024.
    assert cells("llamacpp", 300, 3) == {"global": 1024, "local": 1024}


def test_llamacpp_swa_pool_padding_with_an_odd_ubatch():
    # -c 262144 -np 2 -ub 300: n_ctx 262,144 (already a multiple of 256);
    # SWA: GGML_PAD(1024 · 2 + 300 = 2348, 256) = 10 · 256 = 2560
    # (per sequence: GGML_PAD(1324, 256) · 2 = 1536 · 2 = 3072).
    assert cells("llamacpp", 131_072, 2, ubatch=300) == {"global": 262_144, "local": 2560}


# ---- vLLM: the window minus one, plus a chunk, in 16-token blocks, plus one --------------------------------


def test_vllm_docstring_example():
    # block size 4, num_tokens = (window − 1) + max_num_batched_tokens = 2 + 2 = 4:
    # cdiv(4, 4) + 1 = 2 blocks, as the comment's [XXCD] [EF]; counting the whole
    # window (3 + 2 = 5) would give cdiv(5, 4) + 1 = 3.
    assert vllm_blocks(3, 100, 2, block_size=4) == 2


def test_vllm_gemma3_sliding_blocks_where_the_minus_one_matters():
    """--max-num-batched-tokens 8193, max_model_len 32,768:
      sliding: min(1024 − 1 + 8193, 32,768) = 9216 = 576 · 16 -> 576 + 1 = 577 blocks
               (window + 8193 = 9217 would give 577 + 1 = 578)
      global:  32,768 / 16 = 2048 blocks
    The hybrid allocator's groups of 10 layers (52 local -> 6 groups, 10 global
    -> 1): one request needs 10 · (16 · 8192 B) · (2048 + 6 · 577) = 7,222,067,200 B;
    the layers alone (10 · 2048 + 52 · 577) · 16 · 8192 = 6,617,038,848 B."""
    plan = Planner(GEMMA_3_27B, H100, Deployment(engine="vllm", max_num_batched_tokens=8193)).plan(32_768)
    assert {k.kind: k.cells for k in plan.kv} == {"global": 2048 * 16, "local": 577 * 16}
    r = plan.startup
    assert r.blocks_per_request == 2048 + 6 * 577 == 5510
    assert r.needed == 7_222_067_200
    assert r.layers_needed == 6_617_038_848


def test_vllm_gemma3_sliding_blocks_at_the_default_chunk():
    # max_num_batched_tokens 8192, 32,768: min(1023 + 8192, 32,768) = 9215 -> cdiv 576, + 1 = 577;
    # max_model_len 4096 caps it: cdiv(4096, 16) + 1 = 257 blocks, beside 256 for a global layer.
    assert cells("vllm", 32_768, 1) == {"global": 2048 * 16, "local": 577 * 16}
    assert cells("vllm", 4096, 1) == {"global": 256 * 16, "local": 257 * 16}


def test_vllm_full_attention_blocks_per_sequence():
    # Full attention: cdiv(max_model_len, 16) per request; 4 sequences of 1000
    # tokens: cdiv(1000, 16) = 63 blocks each -> 4 · 63 · 16 = 4032 cells.
    # Sliding: cdiv(min(1023 + 8192, 1000), 16) + 1 = 64 blocks -> 4096 cells.
    assert cells("vllm", 1000, 4) == {"global": 4032, "local": 4096}


# ---- llama.cpp slots: --kv-unified, --no-kv-unified, --swa-full ----------------------------------
# src/llama-context.cpp: n_ctx = GGML_PAD(n_ctx, 256); unified: n_ctx_seq = n_ctx; else
# n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256) per stream, n_seq_max streams.  A measured
# llama-server on an RTX 4090 (gpt-oss-20b, q8_0 cache, --ctx-size 131072) logs for the 12
# full-attention layers "llama_kv_cache: size = 1632.00 MiB (16384 cells, 12 layers, 8/8 seqs)"
# at --parallel 8 without --kv-unified, and the same 1,632 MiB unified at --parallel 4, 8, 16.

def _llamacpp_kv(slots: int, unified: bool, swa_full: bool = False, context: int | None = None):
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    spec = load_model("gpt-oss-20b")[0]
    dep = Deployment(engine="llamacpp", kv_dtype="q8_0", kv_unified=unified, swa_full=swa_full, weights="mxfp4")
    plan = Planner(spec, load_hardware("rtx-4090"), dep).plan_per_gpu(context or 131072 // slots, slots)
    return {k.kind: k for k in plan.kv}


def test_llama_cpp_slots_share_or_split_the_same_full_attention_cells():
    for slots, unified in ((4, True), (8, True), (16, True), (8, False)):
        full = _llamacpp_kv(slots, unified)["global"]
        assert full.layers == 12 and full.bytes == 1632 * 2**20, (slots, unified)
    assert _llamacpp_kv(8, False)["global"].cells == 8 * 16384


def test_llama_cpp_sliding_window_cache_per_slot_and_full():
    # unified: one pool of pad(min(n_ctx, 128·8 + 512), 256) = 1,536 cells; per slot: 8 × pad(128 + 512) = 8 × 768
    assert _llamacpp_kv(8, True)["local"].cells == 1536
    assert _llamacpp_kv(8, False)["local"].cells == 8 * 768
    assert _llamacpp_kv(8, True, swa_full=True)["local"].cells == 131072  # --swa-full: the whole stream
    assert _llamacpp_kv(8, False, swa_full=True)["local"].cells == 8 * 16384
    # a per-slot context that is not a multiple of 256 pads each stream: 1000 × 3 = 3,000 -> 3,072 / 3 = 1,024
    assert _llamacpp_kv(3, False, context=1000)["global"].cells == 3 * 1024


def test_vllm_block_size_rounds_each_request_up_to_whole_blocks():
    """vLLM's FullAttentionSpec charges cdiv(max_model_len, block_size) blocks; --block-size takes
    vllm/config/cache.py's BlockSize values.  Llama-3.1-8B at 1,000 tokens: 63 blocks of 16 (1,008
    cells), 8 of 128 (1,024), 1,000 of 1."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    spec = load_model("llama-3.1-8b")[0]
    for block, cells in ((16, 1008), (128, 1024), (1, 1000)):
        plan = Planner(spec, load_hardware("h100"), Deployment(block_size=block)).plan(1000)
        assert plan.kv[0].cells == cells
        # a page: one block of one layer, 8 KV heads × 128 × (K, V) × 2 bytes = 4,096 bytes per token
        assert plan.startup.page_bytes == block * 4096
        assert plan.startup.blocks_per_request == -(-1000 // block)  # one group of all 32 layers
    with pytest.raises(InputError, match="block-size"):
        Planner(spec, load_hardware("h100"), Deployment(block_size=24))


def test_llama_cpp_k_and_v_cache_types_apart():
    """-ctk q8_0 -ctv f16 (src/llama-kv-cache.cpp: a K tensor of type_k and a V tensor of type_v per
    layer): Llama-3.1-8B at 8,192 cells, 32 layers of 8 KV heads × 128: K 8,192 × 32 × 1,024 × 34/32 B
    = 272 MiB, V × 2 B = 512 MiB; llama.cpp logs "K (q8_0): 272.00 MiB, V (f16): 512.00 MiB"."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    spec = load_model("llama-3.1-8b")[0]
    dep = Deployment(engine="llamacpp", kv_dtype="q8_0", kv_dtype_v="f16")
    plan = Planner(spec, load_hardware("rtx-4090"), dep).plan(8192)
    assert plan.kv_bytes == (272 + 512) * 2**20 and plan.kv_type == "K q8_0, V f16"
    same = Planner(spec, load_hardware("rtx-4090"), Deployment(engine="llamacpp", kv_dtype="q8_0")).plan(8192)
    assert same.kv_bytes == 2 * 272 * 2**20
    with pytest.raises(InputError, match="llamacpp does"):
        Planner(spec, load_hardware("h100"), Deployment(kv_dtype_v="f16"))


def test_vllm_chunked_local_attention_blocks():
    """vLLM's ChunkedLocalAttentionSpec.max_admission_blocks_per_request
    (vllm/v1/kv_cache_interface.py): cdiv(min(attention_chunk_size + max_num_batched_tokens,
    max_model_len), block_size), with no "- 1" and no extra block (chunks start on a block
    boundary).  Llama 4 Scout, chunk 8,192, max_num_batched_tokens 8,192, max_model_len 131,072:
    16,384 / 16 = 1024 blocks; a sliding window of 8,192 would take (8,191 + 8,192) / 16 -> 1024 + 1."""
    assert vllm_blocks(8192, 131_072, 8192, chunked=True) == 1024
    assert vllm_blocks(8192, 131_072, 8192) == 1025
    assert vllm_blocks(3, 100, 2, block_size=4, chunked=True) == 2  # cdiv(5, 4)
    assert vllm_blocks(8192, 4000, 8192, chunked=True) == 250  # capped at max_model_len: 4000 / 16


# ---- linear-attention state (Qwen3-Next's Gated DeltaNet) ------------------------------------------------

# Qwen/Qwen3-Next-80B-A3B-Instruct config.json: 36 Gated DeltaNet layers with 32 value heads and 16
# key heads of 128, conv kernel 4.  Conv channels: q, k (16 · 128 each) and v (32 · 128) = 8192.
CONV_CHANNELS, RECURRENT = 2 * 16 * 128 + 32 * 128, 32 * 128 * 128


@pytest.mark.parametrize(("engine", "per_layer"), [
    # llama.cpp: llama-memory-recurrent's r (d_conv − 1 conv inputs) and s (the state) tensors, F32.
    ("llamacpp", (CONV_CHANNELS * 3 + RECURRENT) * 4),
    # plain (transformers' own cache): the recurrent state as torch_chunk_gated_delta_rule returns it,
    # float32, and the conv's last K − 1 inputs in the model's dtype.
    ("plain", CONV_CHANNELS * 3 * 2 + RECURRENT * 4),
])
def test_linear_layer_state_per_sequence(engine, per_layer):
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    spec = load_model("qwen3-next-80b-a3b")[0]
    plan = Planner(spec, load_hardware("h100-sxm"), Deployment(engine=engine, gpus=2)).plan(4096, 3)
    if engine == "llamacpp":
        # 2 GPUs split the 48 layers: of the 49 slots (the output layer last) il < 24.5 go to GPU 0, layers
        # 0-24, 19 of them linear (every 4th layer is full attention); each holds its layers' whole state.
        layers, share = 19, 1
        assert [p.stage.layers for p in plan.stage_plans] == [25, 23]
    else:  # 2 GPUs split the heads, so the state, in two
        layers, share = 36, 1 / 2
    (linear,) = [k for k in plan.kv if k.kind == "linear"]
    # 3 sequences; nothing grows with context
    assert (linear.layers, linear.cells, linear.state_bytes) == (layers, 0, 3 * per_layer * share)
    assert linear.bytes == layers * 3 * per_layer * share


def test_vllm_pure_state_space_model_pools_whole_states():
    """mistralai/Mamba-Codestral-7B-v0.1: 64 Mamba-2 layers, no attention.  vLLM's pool is whole
    requests' states: per layer (128 heads · 64 · 128 state + 10,240 conv channels · 3) · 2 B =
    2,158,592 B, 138,149,888 B for the 64 layers, whatever max_model_len is; the concurrency is the
    memory available for the cache over that."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    spec = load_model("tests/data/hf/mamba-codestral-7b.json")[0]
    plan = Planner(spec, load_hardware("h100-sxm"), Deployment(engine="vllm")).plan(1_000_000, 1)
    per_request = 64 * (128 * 64 * 128 + 10_240 * 3) * 2
    assert per_request == 138_149_888 and plan.startup.needed == per_request
    assert plan.startup.max_batch() == plan.startup.available // per_request
    assert [k.kind for k in plan.kv] == ["linear"] and plan.kv[0].bytes == per_request


@pytest.mark.parametrize(("name", "keeps"), [
    # the _iswa graphs (src/models/gemma2-iswa.cpp, gemma3.cpp, openai-moe-iswa.cpp) keep a window cache
    ("gemma-2-9b", True), ("gemma-3-1b", True), ("gemma-3-27b", True), ("gpt-oss-20b", True),
    # the llama graph (a Mistral GGUF's arch is "llama"), starcoder2 and phi3 cache every layer whole
    ("mistral-7b-v0.1", False), ("starcoder2-7b", False), ("phi-3-mini-4k", False),
])
def test_llama_cpp_window_of_every_bundled_windowed_model(name, keeps):
    """Every bundled spec with a sliding window, as llama.cpp builds its cache: a window kept means a
    local layer of pad(window + n_ubatch, 256) = fewer cells than the 32,768 of the context; a window
    dropped means every layer holds all 32,768 (Mistral-7B-v0.1: 32 layers × 8 KV heads × 128 × (K, V)
    × 2 B × 32,768 = 4,096 MiB, not the window's 4,096 + 512 padded cells)."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    spec = load_model(name)[0]
    assert spec.attention.sliding_window
    kv = Planner(spec, load_hardware("h200"), Deployment(engine="llamacpp")).plan(32768).kv
    assert (min(k.cells for k in kv) < 32768) is keeps
    assert (any("every layer caches the whole context" in w for w in warnings(spec, Deployment(engine="llamacpp"),
                                                                             32768))) is not keeps
    if name == "mistral-7b-v0.1":
        assert sum(k.bytes for k in kv) == 4096 * 2**20


def test_llama_cpp_runs_phi_3_without_its_window():
    """src/models/phi3.cpp (load_arch_hparams): a Phi-3 GGUF with a sliding window gets swa_type NONE
    and n_swa 0 ("Phi SWA is currently disabled", ggml-org/llama.cpp#13676).  Ollama's Phi-3-mini
    (3,072 wide, 32 layers, 32 KV heads) logs "llama_kv_cache: size = 12288.00 MiB ( 32768 cells,
    32 layers, 1/1 seqs), K (f16): 6144.00 MiB, V (f16): 6144.00 MiB"; Phi-3-mini-4k (window 2,047,
    read from its config.json) gets the same cells at that context, as llama.cpp runs every Phi-3.
    vLLM and a spec written by hand (no architecture) keep the window."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    spec = load_model("tests/data/hf/phi-3-mini-4k.json")[0]
    assert spec.architecture == "phi3" and spec.attention.sliding_window == 2047
    dep = Deployment(engine="llamacpp")
    planner = Planner(spec, load_hardware("h100"), dep)
    [kv] = planner.plan(32768).kv
    assert (kv.kind, kv.cells, kv.bytes) == ("global", 32768, 12288 * 2**20)
    assert any("Phi SWA is currently disabled" in w for w in warnings(spec, dep, 4096))
    assert Planner(spec, load_hardware("h100"), Deployment(engine="vllm")).plan(32768).kv[0].window == 2047
    unwindowed = spec.model_copy(update={"attention": spec.attention.model_copy(update={"sliding_window": None})})
    assert not any("Phi SWA" in w for w in warnings(unwindowed, dep, 4096))  # nothing to disable
    hand = spec.model_copy(update={"architecture": None})
    assert Planner(hand, load_hardware("h100"), dep).plan(32768).kv[0].cells == 2560  # pad(2,047 + 512, 256)


# ---- llama.cpp: what the fit report and its JSON say -----------------------------------------------

def _llamacpp_plan(name, context=4096, batch=1, **dep):
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    return Planner(load_model(name)[0], load_hardware("rtx-4090"), Deployment(engine="llamacpp", **dep)).plan(
        context, batch)



def test_llama_cpp_duplicates_a_tied_output_onto_the_gpu():
    """src/llama-model.cpp: a model without output.weight creates it from token_embd with
    TENSOR_DUPLICATED: the input copy stays in host memory, the output copy goes to the GPU, so the
    GPU holds every byte of the file.  Untied: everything but token_embd."""
    from archcalc.ops.checkpoints import checkpoint_size

    tied = _llamacpp_plan("llama-3.2-1b", weights="gguf:Q8_0")
    spec = tied.spec
    c = checkpoint_size(spec, model_ops(spec, Workload()), "gguf:Q8_0")
    assert spec.tie_embeddings and tied.weights.bytes == c.bytes
    untied = _llamacpp_plan("llama-3.1-8b", weights="gguf:Q8_0")
    embd = 128256 * 4096 * 34 / 32  # token_embd in q8_0
    assert untied.weights.bytes == checkpoint_size(untied.spec, model_ops(untied.spec, Workload()),
                                                   "gguf:Q8_0").bytes - embd
    # at --dtype: the same rule, token_embd's 128256 × 4096 bf16 stay off the GPU
    assert _llamacpp_plan("llama-3.1-8b").weights.bytes == (8_030_261_248 - 128256 * 4096) * 2
    assert _llamacpp_plan("llama-3.2-1b").weights.bytes == 1_235_814_400 * 2


def test_llama_cpp_settings_warnings_and_notes():
    from archcalc.report.fit import fit_json

    plan = _llamacpp_plan("gemma-3-1b", context=8192, batch=2, kv_unified=False)
    deployment = fit_json(plan, {}, ())["deployment"]
    assert {k: deployment[k] for k in ("ubatch", "pad", "kv_unified", "swa_full")} == {
        "ubatch": 512, "pad": 256, "kv_unified": False, "swa_full": False}
    # two streams of pad(16,384 / 2) = 8,192 cells; each SWA stream pad(min(8,192, 512 + 512), 256) = 1,024
    # (the window once per stream when not unified: 2 × 512 + 512 = 1,536 would be the unified rule's)
    assert {k.kind: (k.cells, k.window) for k in plan.kv} == {"global": (2 * 8192, None), "local": (2 * 1024, 512)}
    assert all(isinstance(k.cells, int) for k in plan.kv)
    assert plan.engine.notes(plan.kv, 2, plan.deployment, True) == [
        "global: 4 layers × 16,384 cells = n_ctx padded to 256",
        "local: 22 layers × 2,048 cells = pad(min(n_ctx, 512·2 + 512), 256)"]
    assert plan.engine.notes(plan.kv, 2, plan.deployment, False)[-1] == "the token embedding stays in host memory"
    assert plan.activations.chunk.description == ("the reserved worst-case graph: n_ubatch = 512 tokens, "
                                                  "f32 activations, logits for every token")
    assert plan.reserve == {"fit margin": 1024 * 2**20}
    assert _llamacpp_plan("gemma-3-1b", reserve=5e8).reserve == {"fit margin": 5e8}
    dep = Deployment(engine="llamacpp", gpus=2)
    assert plan.engine.warnings(dep) == [
        "llama.cpp splits layers across GPUs (-sm layer): --tp 2 is planned as 2 GPUs sharing the layers evenly "
        "(--tensor-split 1,...,1; llama.cpp's own default splits by each GPU's free memory)"]
    assert plan.engine.warnings(Deployment(engine="llamacpp", gpus=2, tensor_split=(3.0, 1.0))) == []
    assert plan.engine.warnings(Deployment(engine="llamacpp")) == []


def test_llama_cpp_notes_a_recurrent_layer_s_state_cells():
    plan = _llamacpp_plan("lfm2-1.2b", batch=3)
    notes = plan.engine.notes(plan.kv, 3, plan.deployment, True)
    assert "linear: 10 layers × one F32 state cell per sequence (3)" in notes


def test_plain_engine_report_pieces():
    """transformers' generate() as `plain` models it: the whole prefill in one step, its window kept."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    spec = load_model("gemma-3-1b")[0]
    plan = Planner(spec, load_hardware("rtx-4090"), Deployment(engine="plain")).plan(2048, 3)
    assert plan.activations.chunk.description == "the whole prefill, 3 × 2,048 tokens in one step"
    assert {k.kind: k.window for k in plan.kv} == {"global": None, "local": 512}
    assert list(plan.reserve) == ["runtime (CUDA context, workspaces)"]
    custom = Planner(spec, load_hardware("rtx-4090"), Deployment(engine="plain", reserve=123.0)).plan(2048)
    assert custom.reserve == {"runtime (CUDA context, workspaces)": 123.0}


def test_vllm_plans_llama4_chunked_layers_and_gemma3_windows_through_the_planner():
    """The block rules as the planner applies them, per layer kind.  Llama 4 Scout at 131,072: 36
    chunked layers of cdiv(8,192 + 8,192, 16) = 1,024 blocks, 12 global of 8,192; one request needs
    both kinds' blocks.  Gemma 3 1B (window 512) with max_num_batched_tokens 514: the sliding layers
    keep cdiv(511 + 514, 16) + 1 = 66 blocks (1,025 tokens: one past a block boundary)."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    scout = Planner(load_model("llama-4-scout")[0], load_hardware("h200"), Deployment(gpus=8, weights="fp8-block"))
    kv = {k.kind: k for k in scout.plan(131072).kv}
    assert (kv["chunked"].layers, kv["chunked"].cells) == (36, 1024 * 16)
    assert (kv["global"].layers, kv["global"].cells) == (12, 8192 * 16)
    assert scout.plan(131072).startup.blocks_per_request == 3 * 1024 + 8192  # groups of 12: 3 chunked, 1 global
    gemma = Planner(load_model("gemma-3-1b")[0], load_hardware("l4"), Deployment(max_num_batched_tokens=514))
    kv = {k.kind: k for k in gemma.plan(32768).kv}
    assert kv["local"].cells == 66 * 16 and kv["global"].cells == 2048 * 16


def test_vllm_hybrid_group_size_and_reserve():
    """vLLM's grouping (kv_cache_utils: the group size is the larger layer count when it is below 1.5 ×
    the smaller, else the smaller): 14 sliding and 10 full layers share groups of 14 (one each, 4
    padding); 52 and 10 use 10.  The memory outside gpu_memory_utilization, and the non-torch allowance:
    1 GiB on one GPU, 2 GiB under TP."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.serving.engines.vllm import vllm_groups
    from archcalc.serving.engines.base import AttnKind

    def kinds(local, full):
        return [AttnKind("local", local, 512, 1.0), AttnKind("global", full, None, 1.0)]

    assert vllm_groups(kinds(14, 10)) == (14, {"local": 1, "global": 1})
    assert vllm_groups(kinds(15, 10)) == (10, {"local": 2, "global": 1})  # 15 = 1.5 × 10: not below
    assert vllm_groups(kinds(52, 10)) == (10, {"local": 6, "global": 1})
    spec = ModelSpec(name="hybrid", d_model=256, n_layers=24, vocab_size=1000, max_context=8192,
                     attention={"n_heads": 4, "sliding_window": 512, "layer_types": ["local"] * 14 + ["global"] * 10})
    report = Planner(spec, load_hardware("l4"), Deployment()).plan(8192).startup
    assert (report.group_size, report.groups, report.padding_layers) == (14, 2, 4)
    h100 = load_hardware("h100")
    one = Planner(spec, h100, Deployment()).plan(4096)
    two = Planner(spec, h100, Deployment(gpus=2)).plan(4096)
    outside = h100.capacity - math.ceil(h100.capacity * 0.9)
    assert one.reserve == {"outside gpu_memory_utilization 0.9": outside,
                           "non-torch (CUDA context, NCCL, workspaces)": 2**30}
    assert two.reserve["non-torch (CUDA context, NCCL, workspaces)"] == 2 * 2**30
    assert one.activations.chunk.description == ("vLLM's profile run: max_num_batched_tokens = 8,192 tokens, "
                                                 "logits for max_num_seqs = 256 requests")


def test_vllm_start_up_check_with_its_own_block_size_and_chunk():
    """Gemma 3 27B at int8 on an A100 40GB with --block-size 128 and max_num_batched_tokens 2,048, at
    131,072: one request needs, per group of 10 layers, 1,024 global blocks and 6 × (cdiv(1,023 + 2,048,
    128) + 1) = 6 × 25 sliding ones, of 128 tokens × 16 KV heads × 128 × (K, V) × 2 B per layer; that is
    more than is left, so vLLM searches the longest length that fits (its binary search over the same
    need, counted here by hand)."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    def cdiv(a, b):
        return -(-a // b)

    page = 128 * 16 * 128 * 2 * 2

    def needed(n):
        return 10 * page * (cdiv(n, 128) + 6 * (cdiv(min(1023 + 2048, n), 128) + 1))

    dep = Deployment(block_size=128, max_num_batched_tokens=2048, weight_dtype="int8")
    report = Planner(load_model("gemma-3-27b")[0], load_hardware("a100-40gb"), dep).plan(131072).startup
    assert report.needed == needed(131072) > report.available > 0
    assert report.layers_needed == page * (10 * cdiv(131072, 128) + 52 * (cdiv(1023 + 2048, 128) + 1))
    n = report.estimated_max_model_len
    assert needed(n) <= report.available < needed(n + 1)
    assert f"the estimated maximum model length is {n}" in report.error


def test_vllm_start_up_check_without_memory_and_with_too_little():
    """No bytes left: vLLM's "No available memory for the cache blocks"; some bytes but not one
    token's blocks: the too-small error without an estimate."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.serving.engines.base import engine_named
    from archcalc.serving.engines.vllm import VLLM_NO_MEMORY
    from archcalc.spec.catalog import load_model

    planner = Planner(load_model("llama-3.1-8b")[0], load_hardware("h100"), Deployment())
    vllm = engine_named("vllm")
    assert vllm.startup(planner.kinds, 8192, 0, Deployment()).error == VLLM_NO_MEMORY
    small = vllm.startup(planner.kinds, 8192, 100, Deployment())
    assert small.estimated_max_model_len == 0 and "estimated maximum model length" not in small.error
    assert small.num_blocks == 0
    one = vllm.startup(planner.kinds, 8192, 1, Deployment())  # one byte: memory, but too little
    assert one.error != VLLM_NO_MEMORY and one.estimated_max_model_len == 0
    need = vllm.needed(planner.kinds, 8192, Deployment())
    assert vllm.startup(planner.kinds, 8192, need, Deployment()).error is None  # exactly enough
    first = vllm.needed(planner.kinds, 1, Deployment())  # one block per layer: lengths 1 to 16
    just = vllm.startup(planner.kinds, 8192, first, Deployment())
    assert just.estimated_max_model_len == 16 and "the estimated maximum model length is 16" in just.error


def test_llama_cpp_split_cache_types_across_gpus():
    """-ctk q8_0 -ctv f16 with the layers split over 2 GPUs: each holds its layers' K (34/32 B a
    value) and V (2 B) of Llama-3.1-8B's 8 KV heads × 128; 33 slots (the output layer last), il < 16.5 on GPU 0."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    dep = Deployment(engine="llamacpp", gpus=2, kv_dtype="q8_0", kv_dtype_v="f16")
    plan = Planner(load_model("llama-3.1-8b")[0], load_hardware("rtx-4090"), dep).plan(8192)
    assert [p.stage.layers for p in plan.stage_plans] == [17, 15]
    for p, layers in zip(plan.stage_plans, (17, 15)):
        [kv] = p.kv
        assert (kv.layers, kv.cells, kv.token_bytes) == (layers, 8192, 8 * 128 * (34 / 32 + 2))


def test_the_lightning_indexer_is_whole_on_every_tp_rank():
    """vLLM's DeepSeek-V3.2 Indexer (models/deepseek_v2.py: "no tensor parallel, just replicated"):
    wq_b, wk and weights_proj are ReplicatedLinear, k_norm a LayerNorm; 1,536 × 64·128 + 7,168 × 128 +
    7,168 × 64 + 2 × 128 = 13,959,424 parameters a layer, 61 layers, bf16, on each of 8 GPUs.  The rest of
    the model is DeepSeek-V3's, so the difference between the two is the indexer alone."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    indexer = 61 * 13_959_424 * 2
    v32, v3 = (Planner(load_model(n)[0], load_hardware("h200"), Deployment(gpus=8)) for n in ("deepseek-v3.2",
                                                                                               "deepseek-v3"))
    assert v32.weights.replicated - v3.weights.replicated == indexer
    assert v32.weights.split == v3.weights.split


@pytest.mark.parametrize(("build", "flash_attn", "unified", "cells"), [
    # llama_kv_cache::get_padding before #16812 (b6969): "flash_attn ? 256u : 32u"; n_ctx = 3 × 900 = 2,700
    (5912, False, True, [2720]),  # GGML_PAD(2700, 32)
    (5912, True, True, [2816]),  # GGML_PAD(2700, 256)
    (None, False, True, [2816]),  # since #17046: GGML_PAD(n_ctx, 256) whatever -fa
    # one stream per slot: before, pad(ceil(n_ctx / n_seq), P) = pad(900, 32); now pad(pad(2700, 256) / 3, 256)
    (5912, False, False, [928] * 3),
    (None, True, False, [1024] * 3),
])
def test_llama_cpp_padding_by_build(build, flash_attn, unified, cells):
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    dep = Deployment(engine="llamacpp", engine_build=build, flash_attn=flash_attn, kv_unified=unified)
    [kv] = Planner(load_model("llama-3.1-8b")[0], load_hardware("rtx-4090"), dep).plan(900, 3).kv
    assert kv.cells == sum(cells)


def test_llama_cpp_swa_cache_padding_by_build():
    """llama-kv-cache-iswa.cpp: before b6969 min(size_base, GGML_PAD(n_swa·n_seq + n_ubatch, n_pad)); since
    #17046 GGML_PAD(min(size_base, n_swa·n_seq + n_ubatch), 256).  Gemma-3-1B (window 512), 2 slots of 700
    tokens, n_ubatch 100: n_ctx = 1,400 (old, 32: 1,408; now 1,536) against 512·2 + 100 = 1,124 cells."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.spec.catalog import load_model

    spec = load_model("gemma-3-1b")[0]

    def local(**kw):
        dep = Deployment(engine="llamacpp", ubatch=100, **kw)
        return next(k.cells for k in Planner(spec, load_hardware("rtx-4090"), dep).plan(700, 2).kv if k.kind == "local")

    assert local(engine_build=5912, flash_attn=False) == 1152  # min(1408, pad(1124, 32))
    assert local(engine_build=5912) == 1280  # min(1536, pad(1124, 256))
    assert local() == 1280  # pad(min(1536, 1124), 256)


def test_llama_cpp_build_options_are_checked():
    from click.testing import CliRunner

    from archcalc.cli import cli

    for args, line in ((["--no-flash-attn", "--kv-dtype", "q8_0"], "--no-flash-attn: llama.cpp refuses a quantized V "
                        "cache without flash attention (\"V cache quantization requires flash_attn\"); use an f16 V cache"),
                       (["--gpus", "4", "--tensor-split", "1,1"],
                        "--tensor-split: 2 proportions for 4 GPUs; give one per GPU of the instance (--gpus 2)"),
                       (["--engine", "vllm", "--llamacpp-build", "5000"],
                        "--llamacpp-build: engine vllm does not take it; llamacpp does (--engine llamacpp)")):
        extra = [] if "--engine" in args else ["--engine", "llamacpp"]
        r = CliRunner().invoke(cli, ["fit", "llama-3.1-8b", "--gpu", "rtx-4090", "--context", "4096", *extra, *args])
        assert r.exit_code == 2 and r.output.strip() == f"error: {line}", r.output


@pytest.mark.parametrize("build, ok", [(0, False), (1, True), (10**6, True), (10**6 + 1, False)])
def test_the_api_checks_a_llama_cpp_build_number(build, ok):
    """The CLI's range (1 to 10^6) holds for Deployment built in Python too: llama.cpp's releases are bN."""
    from archcalc.serving.engines.base import engine_named

    check = functools.partial(engine_named("llamacpp").check, GEMMA_3_27B,
                              Deployment(engine="llamacpp", engine_build=build))
    if ok:
        check()
        return
    with pytest.raises(InputError) as e:
        check()
    assert (e.value.field, e.value.message) == ("--llamacpp-build", f"{build}; give the build number N of a bN release")


def test_llama_cpp_output_names_the_build_whose_rules_apply():
    from archcalc.serving.engines.base import engine_named

    engine = engine_named("llamacpp")
    assert engine.rules(Deployment(engine="llamacpp")).startswith("llama.cpp's current rules")
    assert engine.rules(Deployment(engine="llamacpp", engine_build=5912)).startswith(
        "llama.cpp b5912 (--llamacpp-build; before b6969's padding change): ")
    assert engine.rules(Deployment(engine="llamacpp", engine_build=7000)).startswith("llama.cpp b7000 (--llamacpp-build; from")
    plan = _llamacpp_plan("llama-3.2-1b", engine_build=5912)
    from archcalc.report.fit import assumptions

    assert any("rules from llama.cpp b5912" in line for line in assumptions(plan))


def test_llama_cpp_build_boundary_flash_attn_warning_settings_and_notes():
    """b6968 is the last build of the old padding (32 cells without flash attention), b6969 the first of
    the new (#16812, every cache to 256); --no-flash-attn is told it changes nothing only under the new
    rules; the JSON names the build and the switch; the SWA note gives the old formula (the pad inside
    the min) on old builds.  Every registered engine is an Engine under its own name."""
    from archcalc.hardware.profile import load_hardware
    from archcalc.serving.engines.base import ENGINES, Engine, engine_named
    from archcalc.spec.catalog import load_model

    engine = engine_named("llamacpp")
    assert _llamacpp_plan("llama-3.2-1b", 1100, engine_build=6968, flash_attn=False).kv[0].cells == 1120  # pad 32
    assert _llamacpp_plan("llama-3.2-1b", 1100, engine_build=6969, flash_attn=False).kv[0].cells == 1280  # pad 256
    quiet = "--no-flash-attn changes no cache size since llama.cpp b6969: every cache is padded to 256"
    assert engine.warnings(Deployment(engine="llamacpp", flash_attn=False)) == [quiet]
    assert engine.warnings(Deployment(engine="llamacpp", flash_attn=False, engine_build=6968)) == []
    assert engine.warnings(Deployment(engine="llamacpp", flash_attn=True)) == []
    settings = engine.settings(Deployment(engine="llamacpp", engine_build=5912, flash_attn=False))
    assert (settings["build"], settings["flash_attn"]) == (5912, False)
    gemma = load_model("gemma-3-1b")[0]
    old = Planner(gemma, load_hardware("rtx-4090"), Deployment(engine="llamacpp", engine_build=5912)).plan(4096)
    assert any("= min(n_ctx, pad(512·1 + 512, 256))" in n for n in engine.notes(old.kv, 1, old.deployment, False))
    assert all(isinstance(e, Engine) and e.name == name for name, e in ENGINES.items())


def test_llama_cpp_slot_stream_is_the_padded_context():
    """llama-context.cpp without the unified cache: n_ctx = pad(context × slots, 256), each slot's stream
    pad(n_ctx / slots, 256), which is pad(context, 256) for every context and slot count (checked here
    by brute force against the engine's cells)."""
    def pad(n, to):
        return -(-n // to) * to

    assert all(pad(pad(c * b, 256) // b, 256) == pad(c, 256) for c in range(1, 1200) for b in range(1, 9))
    for context, slots in ((900, 3), (1000, 7), (257, 2)):
        plan = _llamacpp_plan("llama-3.2-1b", context, slots, kv_unified=False)
        assert plan.kv[0].cells == slots * pad(pad(context * slots, 256) // slots, 256)
