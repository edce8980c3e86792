"""Weight bytes and roofline times pinned to numbers derived by hand from
sources this project did not write: published parameter counts, the real
models' config.json dims, the GPTQ/AWQ group-128 int4 layout, what 8/4-bit
checkpoints keep at 16 bits, and the H100 SXM datasheet.

Specs and the device are written out here (not loaded from specs/ or
hardware/) so that each number below can be checked against the dims it
was derived from.
"""

from __future__ import annotations

import pytest

from archcalc.cost.roofline import prefill_workload, rate_sets, step
from archcalc.cost.totals import param_counts, weight_bytes
from archcalc.hardware.profile import HardwareProfile
from archcalc.ops.layers import model_ops
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec

# NVIDIA H100 Tensor Core GPU Architecture whitepaper v1.03, Table 1 (H100
# SXM5, dense): FP32 66.9 TFLOPS, BF16 989.4, FP8 1,978.9, INT8 1,978.9 TOPS;
# HBM3 3.35 TB/s.
H100 = HardwareProfile(name="H100 SXM (whitepaper)", vendor="nvidia", kind="gpu", memory_bytes=80 * 2**30,
                       memory_bandwidth=3.35e12,
                       peak_flops={"fp32": 66.9e12, "bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12,
                                   "int8": 1978.9e12},
                       source="https://nvdam.widen.net/s/95bdhpsgrs/"
                              "nvidia_h100_tensor_core_gpu_architecture_whitepaper_v1.03")
# NVIDIA A100 datasheet (SXM 80GB): BF16 312 TFLOPS, INT8 624 TOPS, INT4 1,248 TOPS,
# no FP8 units; 2,039 GB/s.
A100 = HardwareProfile(name="A100 SXM 80GB (datasheet)", vendor="nvidia", kind="gpu", memory_bytes=80 * 2**30,
                       memory_bandwidth=2.039e12,
                       peak_flops={"fp32": 19.5e12, "bf16": 312e12, "fp16": 312e12, "int8": 624e12, "int4": 1248e12},
                       source="https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                              "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")

# config.json dims (huggingface.co/<org>/<model>/blob/main/config.json).
QWEN3_30B_A3B = ModelSpec.model_validate({  # Qwen/Qwen3-30B-A3B
    "name": "qwen3-30b-a3b", "d_model": 2048, "n_layers": 48, "vocab_size": 151936, "max_context": 40960,
    "attention": {"n_heads": 32, "n_kv_heads": 4, "head_dim": 128, "qk_norm": "head"},
    "ffn": {"d_ff": 6144, "moe": {"n_experts": 128, "top_k": 8, "d_expert": 768}}})
LLAMA_31_70B = ModelSpec.model_validate({  # meta-llama/Llama-3.1-70B
    "name": "llama-3.1-70b", "d_model": 8192, "n_layers": 80, "vocab_size": 128256, "max_context": 131072,
    "attention": {"n_heads": 64, "n_kv_heads": 8}, "ffn": {"d_ff": 28672}})
LLAMA_31_8B = ModelSpec.model_validate({  # meta-llama/Llama-3.1-8B
    "name": "llama-3.1-8b", "d_model": 4096, "n_layers": 32, "vocab_size": 128256, "max_context": 131072,
    "attention": {"n_heads": 32, "n_kv_heads": 8}, "ffn": {"d_ff": 14336}})
LLAMA_32_1B = ModelSpec.model_validate({  # meta-llama/Llama-3.2-1B (tied embeddings)
    "name": "llama-3.2-1b", "d_model": 2048, "n_layers": 16, "vocab_size": 128256, "max_context": 131072,
    "tie_embeddings": True, "attention": {"n_heads": 32, "n_kv_heads": 8, "head_dim": 64}, "ffn": {"d_ff": 8192}})
QWEN25_7B = ModelSpec.model_validate({  # Qwen/Qwen2.5-7B (q, k, v biases)
    "name": "qwen2.5-7b", "d_model": 3584, "n_layers": 28, "vocab_size": 152064, "max_context": 131072,
    "attention": {"n_heads": 28, "n_kv_heads": 4, "bias": ["q", "k", "v"]}, "ffn": {"d_ff": 18944}})


def weights(spec: ModelSpec, dtype: str) -> float:
    return weight_bytes(model_ops(spec, Workload()), dtype)


def peak(hw: HardwareProfile, **dtypes):
    return rate_sets(hw, Workload(**dtypes))[0]


# ---- MoE decode reads the experts its tokens touch, not all of them ------------------------------


def test_qwen3_30b_a3b_decode_reads_the_active_parameters():
    """Decode at batch 1: one token, so each MoE layer runs exactly top-8 of
    its 128 experts.  The step reads every active weight once, except that the
    embedding table gives up only the token's row.  Qwen3-30B-A3B's published
    active count is 3,353,032,704 ("8 of 128 experts"; tests/data/hf/SOURCES.md),
    V·D = 151,936 · 2048 = 311,164,928 (untied), so in bf16:
        2 · (3,353,032,704 − 311,164,928) + 2 · 2048 = 6,083,739,648 B.
    Per layer that is 113,779,200 B, of which the experts are
        up   8 · 2048 · 1536 · 2 B = 50,331,648
        down 8 ·  768 · 2048 · 2 B = 25,165,824."""
    wl = Workload.decode(1, 1)
    s = step(QWEN3_30B_A3B, wl, peak(H100))
    assert sum(o.op.weight_bytes * o.op.count for o in s.ops) == 6_083_739_648
    by_name = {o.op.name: o.op for o in s.ops}
    assert by_name["layers.moe.experts.up"].weight_bytes == 50_331_648
    assert by_name["layers.moe.experts.down"].weight_bytes == 25_165_824
    # Every op is memory-bound at one token: the time is the bytes over 3.35 TB/s.
    # Activations add < 0.5 % at context 1 (a few hundred KiB per layer).
    assert all(o.bound == "memory" for o in s.ops)
    floor = 6_083_739_648 / 3.35e12  # 1.8160 ms
    assert floor <= s.time <= 1.005 * floor


def test_qwen3_30b_a3b_time_per_token_on_h100_at_4k():
    """The issue's figure: 1.94 ms per token at context 4096, batch 1.  Reading
    all 128 experts instead would be 18.2 ms.
    Weights (above)                                     6,083,739,648 B
    KV: (4096 read + 1 written) · 4 heads · (128 + 128) · 2 B
        = 8,390,656 B per layer, × 48                      402,751,488 B
                                                         6,486,491,136 B -> 1.9363 ms."""
    s = step(QWEN3_30B_A3B, Workload.decode(4096, 1), peak(H100))
    assert sum(o.op.kv_bytes * o.op.count for o in s.ops) == 402_751_488
    floor = 6_486_491_136 / 3.35e12
    assert floor <= s.time <= 1.005 * floor
    assert round(s.time * 1e3, 2) == 1.94


def test_moe_decode_at_batch_2_reads_the_expected_distinct_experts():
    # Two tokens, each choosing 8 of 128 uniformly: E[distinct] = 128 · (1 − (15/16)²) = 15.5.
    # Expert bytes per layer: 15.5 · (2048·1536 + 768·2048) · 2 B = 15.5 · 9,437,184 = 146,276,352.
    s = step(QWEN3_30B_A3B, Workload.decode(1, 2), peak(H100))
    experts = sum(o.op.weight_bytes for o in s.ops if o.op.component == "experts")
    assert experts == 146_276_352


# ---- int4: 4 bits + one fp16 scale per group of 128 --------------------------------------------------


def test_llama_31_70b_int4_weight_bytes():
    """GPTQ/AWQ group size 128: 4 + 16/128 = 4.125 bits per quantized weight.
    The embedding, the untied lm_head and the norms stay bf16.
      quantized, per layer: qkv 8192·(8192 + 2·1024) = 83,886,080
                            o   8192·8192            = 67,108,864
                            up  8192·2·28672         = 469,762,048
                            down 28672·8192          = 234,881,024
                            -> 855,638,016 · 80 layers = 68,451,041,280 weights
        codes  68,451,041,280 · 4 / 8              = 34,225,520,640 B
        scales 68,451,041,280 / 128 · 2 B          =  1,069,547,520 B
      bf16:  embedding + lm_head 2 · 128,256 · 8192 = 2,101,346,304 weights
             norms (2 · 80 + 1) · 8192             =     1,318,912 weights
             -> 2,102,665,216 · 2 B                =  4,205,330,432 B
      total                                         39,500,398,592 B = 36.79 GiB
    (without the scales: 38,430,851,072 B = 35.79 GiB)."""
    ops = model_ops(LLAMA_31_70B, Workload())
    assert param_counts(ops).total == 70_553_706_496  # the published count (HF safetensors)
    assert weight_bytes(ops, "int4") == 39_500_398_592
    assert round(39_500_398_592 / 2**30, 2) == 36.79


def test_tied_llama_32_1b_int4_keeps_one_bf16_embedding():
    """Tied: the one V·D matrix is the embedding and the lm_head, stored once, in bf16.
      quantized: (2048·3072 + 2048·2048 + 3·2048·8192) · 16 = 60,817,408 · 16 = 973,078,528
                 -> 973,078,528 / 128 groups · (64 B codes + 2 B scale) = 501,743,616 B
      bf16: 128,256 · 2048 = 262,668,288 + norms 33 · 2048 = 67,584 -> 525,471,744 B
      total 1,027,215,360 B; the published count is 1,235,814,400 parameters."""
    ops = model_ops(LLAMA_32_1B, Workload())
    assert param_counts(ops).total == 1_235_814_400
    assert weight_bytes(ops, "int4") == 1_027_215_360


def test_int4_decode_reads_the_16_bit_weights_at_16_bits():
    """What a checkpoint keeps at 16 bits is also what a decode step reads at
    16 bits: the roofline's bytes are the stored bytes above, except that the
    input embedding gives up only the token's row (bf16).
      Llama-3.1-70B: 39,500,398,592 − 128,256 · 8192 · 2 + 8192 · 2 = 37,399,068,672 B
      Llama-3.2-1B (tied: lm_head reads the one bf16 matrix, the embedding one row of it):
                     1,027,215,360 + 2048 · 2 = 1,027,219,456 B
    (reading lm_head and the norms at 4.125 bits instead would give 37.4 → 36.2 GB
    and 1.03 → 0.64 GB)."""
    for spec, read in ((LLAMA_31_70B, 37_399_068_672), (LLAMA_32_1B, 1_027_219_456)):
        s = step(spec, Workload.decode(1, 1, weight_dtype="int4"), peak(H100, weight_dtype="int4"))
        assert sum(o.op.weight_bytes * o.op.count for o in s.ops) == read, spec.name


# ---- which weights stay 16-bit in an 8-bit checkpoint ----------------------------------------------


def test_qwen25_7b_fp8_keeps_biases_embeddings_and_norms_in_bf16():
    """FP8 / INT8 checkpoints (vLLM's fp8, compressed-tensors W8A8) quantize the
    linear layers' weight matrices; biases, norms, embeddings and lm_head stay bf16.
      quantized per layer: qkv 3584·4608 = 16,515,072; o 3584² = 12,845,056;
                           mlp 3·3584·18944 = 203,685,888 -> 233,046,016 · 28 = 6,525,288,448 B at 1 B
      bf16: embedding + lm_head 2·152,064·3584 = 1,089,994,752
            norms (2·28 + 1)·3584              =       204,288
            q/k/v biases (3584 + 512 + 512)·28 =       129,024
            -> 1,090,328,064 · 2 B = 2,180,656,128 B
      total 8,705,944,576 B; the parameters sum to the published 7,615,616,512."""
    ops = model_ops(QWEN25_7B, Workload())
    assert param_counts(ops).total == 7_615_616_512
    assert weights(QWEN25_7B, "fp8") == 8_705_944_576
    assert weights(QWEN25_7B, "int8") == 8_705_944_576
    assert weights(QWEN25_7B, "bf16") == 2 * 7_615_616_512


def test_qwen3_30b_a3b_fp8_keeps_the_router_in_bf16():
    """Qwen3-30B-A3B-FP8 lists every layer's mlp.gate (the router) in
    modules_to_not_convert, beside lm_head.
      quantized per layer: qkv 2048·5120 = 10,485,760; o 4096·2048 = 8,388,608;
                           experts 128·(2048·1536 + 768·2048) = 603,979,776
                           -> 622,854,144 · 48 = 29,896,998,912 B at 1 B
      bf16: embedding + lm_head 2·151,936·2048 = 622,329,856
            routers 2048·128·48               =  12,582,912
            q/k norms 2·128·48                 =      12,288
            layer norms 2·2048·48 + final 2048 =     198,656
            -> 635,123,712 · 2 B = 1,270,247,424 B
      total 31,167,246,336 B (30,532,122,624 parameters, published)."""
    ops = model_ops(QWEN3_30B_A3B, Workload())
    assert param_counts(ops).total == 30_532_122_624
    assert weights(QWEN3_30B_A3B, "fp8") == 31_167_246_336


def test_qwen_moe_shared_expert_gate_stays_16_bit():
    """vLLM's Qwen2MoeSparseMoeBlock builds shared_expert_gate as a plain torch.nn.Linear(hidden, 1)
    (qwen2_moe.py): no quant_config reaches it, so an int4 or fp8 checkpoint loads it in 16 bits, like
    the router. Qwen1.5-MoE-A2.7B: D = 2,048, 24 layers: 2,048 · 24 · 2 B whatever the checkpoint."""
    from archcalc.spec.catalog import load_model

    spec = load_model("qwen1.5-moe-a2.7b")[0]
    (gate,) = [o for o in model_ops(spec, Workload()) if o.name == "layers.moe.shared_gate"]
    for dtype in ("int4", "fp8", "bf16"):
        assert weight_bytes([gate], dtype) == 2048 * 24 * 2, dtype


# ---- W8A8: fp8 / int8 weights compute on the 8-bit units ---------------------------------------------


def test_fp8_weights_compute_at_the_fp8_peak():
    """Llama-3.1-8B prefill of 4096 tokens.  One up projection (gate and up
    fused): 2 · 4096 · 4096 · 28,672 = 962,072,674,304 FLOPs; it moves
    4096·28,672 weights + 4096·(4096 + 28,672)·2 B of activations, about
    0.39 GB, 0.12 ms at 3.35 TB/s: compute-bound on every path below, so the
    32 layers take 32 · 962,072,674,304 / peak."""
    flops = 32 * 962_072_674_304

    def up_time(hw, dtype):
        s = step(LLAMA_31_8B, prefill_workload(4096, 1, weight_dtype=dtype), peak(hw, weight_dtype=dtype))
        (up,) = [o for o in s.ops if o.op.name == "layers.ffn.up"]
        assert up.bound == "compute"
        return up.time

    # W8A8 (vLLM's fp8 / int8 w8a8 kernels quantize the activations too): the 8-bit tensor cores.
    assert up_time(H100, "fp8") == pytest.approx(flops / 1978.9e12, rel=1e-12)  # 15.557 ms
    assert up_time(H100, "int8") == pytest.approx(flops / 1978.9e12, rel=1e-12)
    # int4 is weight-only (W4A16, dequantized to bf16) and bf16 is bf16: 989.4 TFLOPS.
    assert up_time(H100, "int4") == pytest.approx(flops / 989.4e12, rel=1e-12)  # 31.116 ms
    assert up_time(H100, "bf16") == pytest.approx(flops / 989.4e12, rel=1e-12)
    # A100 has INT8 tensor cores (624 TOPS) but no FP8: fp8 checkpoints run
    # weight-only (Marlin W8A16) at the bf16 rate, 312 TFLOPS.
    assert up_time(A100, "int8") == pytest.approx(flops / 624e12, rel=1e-12)
    assert up_time(A100, "fp8") == pytest.approx(flops / 312e12, rel=1e-12)
    # GPTQ/AWQ int4 checkpoints are W4A16 even where INT4 tensor cores exist
    # (A100's 1,248 TOPS): the activations stay bf16, so the math runs at 312 TFLOPS.
    assert up_time(A100, "int4") == pytest.approx(flops / 312e12, rel=1e-12)
