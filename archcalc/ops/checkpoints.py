"""Checkpoints as they are stored: the type of every tensor, and its bytes (--weights FORMAT).

- gguf:MIX: a GGUF file as llama.cpp's `llama-quantize` writes it (below);
- mxfp4: gpt-oss's release format: the MoE experts' weight matrices in MXFP4
  (32-element blocks of E2M1 values with one E8M0 scale: 4.25 bits), every
  other tensor (biases, attention, embeddings, norms, router) bf16 (the gpt-oss
  model card, arXiv:2508.10925: "MXFP4 ... of the MoE weights");
- awq[:gG], gptq[:gG]: 4-bit group-wise checkpoints as AutoAWQ (GEMM) and
  AutoGPTQ store them, G = 128 unless given.  Per linear layer with K inputs and
  N outputs: the 4-bit weights packed in int32 (K·N / 2 bytes), one fp16 scale
  and one 4-bit zero point (packed N/8 to an int32) per group of G inputs and
  output: ceil(K/G)·N·2.5 bytes; GPTQ adds g_idx, one int32 per input (K·4
  bytes; stored with or without desc_act), and an fp16 bias per output even
  where the model has none (see checkpoint_size).  Sources: AutoAWQ
  awq/modules/linear/gemm.py (qweight (K, N/8), qzeros (K/G, N/8) int32, scales
  (K/G, N) fp16), AutoGPTQ nn_modules/qlinear (qweight (K/8, N), qzeros
  (ceil(K/G), N/8), scales (ceil(K/G), N), g_idx (K,)).  Only the linear layers
  inside the decoder layers are quantized: the embeddings, lm_head, norms,
  biases and MoE routers stay fp16 (AutoAWQ quantizes get_model_layers' linears
  and skips modules_to_not_convert = ["gate"]; AutoGPTQ's outside_layer_modules);
- fp8-block: DeepSeek-V3's format (its README_WEIGHTS.md, also Qwen3's -FP8
  releases): e4m3 weights, one fp32 scale_inv per 128 × 128 block,
  ceil(N/128)·ceil(K/128) of them (inference/model.py); the same linears as
  above, everything else bf16;
- fp8-block-mxfp4: DeepSeek-V4's release format (its config.json's quantization_config: fp8, weight_block_size
  [128, 128], scale_fmt ue8m0, expert_dtype fp4): the routed experts in MXFP4 as above; the other linears e4m3
  with one E8M0 scale (a byte) per 128 × 128 block; what the architecture keeps in fp32 (mHC's coefficients,
  position biases, sinks) fp32; everything else bf16.  The Hub's counts of the release's tensors by type pin it
  (tests/spec/test_deepseek_v4.py);
- nvfp4: NVIDIA ModelOpt's NVFP4 (nvidia/*-FP4 checkpoints): E2M1 values two to a
  byte, an E4M3 scale per 16 inputs of each output, and two fp32 scalars per
  matrix (weight_scale_2, the global scale, and the activation's input_scale):
  N·K/2 + N·K/16 + 8 bytes (K a multiple of 16: vLLM refuses others), as vLLM's ModelOptNvFp4LinearMethod.create_weights
  allocates them (weight uint8 [N, K/2], weight_scale float8_e4m3fn [N, K/16]);
  "only the weights and activations of the linear operators within transformers
  blocks are quantized" (the model cards): embeddings, lm_head, norms and routers
  bf16.  llm-compressor's nvfp4-pack-quantized stores the same bytes under other
  names (weight_packed, weight_global_scale, input_global_scale).

GGUF:

A GGUF "mix" (Q4_K_M, Q5_K_M, ...) is not one number format: llama.cpp picks a
type per tensor (src/llama-quant.cpp, llama_tensor_get_type_impl, read at commit
007dbbf).  This module applies those rules to the tensors the op list implies,
named as llama.cpp names them (blk.N.attn_v.weight, ...), for the llama-style
layout (separate attn_q / attn_k / attn_v, ffn_gate / ffn_up / ffn_down):

- output.weight, and token_embd.weight when it is tied to it: Q6_K (Q8_0 for a
  Q8_0 mix, or when the row does not split into whole blocks);
- attn_v: Q6_K in the layers use_more_bits picks for
  Q4_K_M / Q5_K_M; Q5_K instead of Q4_K in a 70B-class model (80 layers, GQA);
  Q8_0 with 8 experts (Mixtral), attn_k too;
- ffn_down (routed and shared experts too): Q6_K where use_more_bits picks the
  layer, for Q4_K_M / Q5_K_M, n being the layer count (n_layer_all); the layer
  is the ffn_down counter, or with experts the one in the tensor's name;
  Falcon's Q4_K_M: Q6_K in the first sixteenth, Q5_K where use_more_bits picks;
- attn_output: Q5_K with 8 experts (Q4_K_M);
- a row length that is not a multiple of the type's block falls back (Q4_K ->
  Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), to F16 where the fallback's block does not
  divide it either (llama.cpp PR #9074: Mamba's 48-wide dt_proj); a Q4_0 / Q8_0
  row that 32 does not divide is F16 too, as convert_hf_to_gguf --outtype q8_0
  writes it (llama-quantize at 007dbbf stops instead: "no tensor type fallback");
- never quantized: norms and biases (F32, as convert_hf_to_gguf stores every
  1-D tensor), expert routers ffn_gate_inp and position tables (F32: its
  extra_f32 tensors; a StarCoder file's log counts position_embd among them).
The tensors are the checkpoint's: where its attention holds one fused Q/K/V
matrix (FUSED_QKV: Falcon, GPT-2, Bloom, GPT-NeoX, MPT, StarCoder, Phi-3, ...),
one attn_qkv tensor: Q5_K in a Q4_K_M file, Q6_K in a Q5_K_M one; MLA's attn_kv_b
keeps the mix's type: as the released files' logs show (Pythia at b4644, Phi-3,
DeepSeek-Coder-V2-Lite; llama-quant.cpp at 007dbbf folds both into the attn_v rule
instead, category_is_attn_v, which none of these files was made with);
the safetensors formats below store it fused too.  Falcon's output is Q8_0.
Not modelled: imatrix-dependent choices (they touch the IQ and Q2/Q3 mixes, not
these), --pure and --tensor-type overrides.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace

from archcalc.errors import InputError
from archcalc.ops.op import MatmulDims, Op
from archcalc.spec.model import ModelSpec

# ggml-common.h block layouts: elements per block, bytes per block (the scales included).
GGML_TYPES = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2),
    "q8_0": (32, 34),  # fp16 scale + 32 int8
    "q4_0": (32, 18),  # fp16 scale + 32 × 4 bits
    "q4_1": (32, 20),  # fp16 scale and min + 32 × 4 bits
    "q5_0": (32, 22),  # fp16 scale + 32 high bits + 32 × 4 bits
    "q5_1": (32, 24),
    "q4_K": (256, 144),  # fp16 d, dmin + 12 bytes of 6-bit scales/mins + 128 bytes of 4-bit quants
    "q5_K": (256, 176),  # q4_K + 32 bytes of high bits
    "q6_K": (256, 210),  # 128 low + 64 high quant bytes + 16 int8 scales + fp16 d
    "mxfp4": (32, 17),  # an E8M0 scale + 32 × 4-bit E2M1
}
FALLBACK = {"q4_K": "q5_0", "q5_K": "q5_1", "q6_K": "q8_0"}  # tensor_type_fallback, then F16
# llama_ftype -> the type of every tensor the rules leave alone
MIXES = {"Q4_0": "q4_0", "Q8_0": "q8_0", "Q6_K": "q6_K", "Q4_K_M": "q4_K", "Q5_K_M": "q5_K"}


GROUPS = (32, 64, 128)  # AWQ/GPTQ group sizes (128 is both tools' default)
GROUPED = {f"{tool}{'' if g == 128 else f':g{g}'}": (tool, g) for tool in ("awq", "gptq") for g in GROUPS}
FP8_BLOCK = 128  # weight_block_size [128, 128]
NVFP4_GROUP = 16  # inputs per E4M3 scale (ModelOpt's group_size; vLLM: "NVFP4 only supports group_size=16")
# --weights choices
WEIGHT_FORMATS = (*(f"gguf:{m}" for m in MIXES), "mxfp4", *GROUPED, "fp8-block", "fp8-block-mxfp4", "nvfp4")
# HF model_types whose attention stores Q, K and V as one matrix (query_key_value, c_attn, Wqkv,
# qkv_proj): one tensor in their checkpoints and in the GGUF files convert_hf_to_gguf writes
# (attn_qkv).  Pinned on transformers' module tree (tests/spec/test_hf_oracle.py).
FUSED_QKV = frozenset({"falcon", "RefinedWeb", "RefinedWebModel", "gpt2", "gpt_bigcode", "bloom", "gpt_neox",
                       "gpt_neox_japanese", "mpt", "phi3", "codegen", "dbrx", "persimmon", "gpt-sw3", "openai-gpt"})  # gpt-sw3: GPT2LMHeadModel
# ... and whose dense MLP stores gate and up as one matrix (gate_up_proj): llama.cpp's ffn_up of 2F rows
FUSED_GATE_UP = frozenset({"phi3", "glm", "glm4"})
FALCON = frozenset({"falcon", "RefinedWeb", "RefinedWebModel"})  # llama.cpp's LLM_ARCH_FALCON
# A tensor these checkpoints never quantize: llama.cpp's roles for the embeddings, the
# unembedding, 1-D tensors (norms, biases) and routers, and position tables.
UNQUANTIZED_ROLES = ("token_embd", "output", "f32")


def bits_per_weight(ggml_type: str) -> float:
    elems, nbytes = GGML_TYPES[ggml_type]
    return 8 * nbytes / elems


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's layer choice for the extra bits: the first and last eighth, and every third between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


@dataclass(frozen=True)
class Tensor:
    name: str  # as llama.cpp names it: blk.3.attn_v.weight
    elements: int
    # llama.cpp's tensor category (llama-quant.cpp, from the name): token_embd, output, attn_q, attn_k,
    # attn_v, attn_qkv, attn_kv_b, attn_output, ffn_gate, ffn_up, ffn_down, other (quantized at the mix's
    # type unless a rule says otherwise); or f32, never quantized (norms, biases, routers, position tables)
    role: str
    row: int = 0  # ne[0] of a matrix: the row length the blocks divide (its input width); f32 tensors: unused
    layer: int | None = None
    matrices: int = 1  # separate K x N matrices the tensor holds: a 3-D expert tensor holds E
    biased: bool = False  # a matmul's weight whose op has a bias (a tensor of its own in the list)
    op: int = -1  # the index of the op it belongs to in the op list

    @property
    def outputs(self) -> int:
        """N of one matrix: a matmul's output width."""
        return self.elements // (self.row * self.matrices)


# our op -> (llama.cpp's tensor name, the role its rules see)
NAMES = {"layers.attn.q": ("attn_q", "attn_q"), "layers.attn.q_a": ("attn_q_a", "other"),
         "layers.attn.q_b": ("attn_q_b", "other"), "layers.attn.kv_a": ("attn_kv_a_mqa", "other"),
         "layers.attn.kv_b": ("attn_kv_b", "attn_kv_b"), "layers.attn.o": ("attn_output", "attn_output"),
         "layers.ffn.down": ("ffn_down", "ffn_down"), "layers.moe.experts.down": ("ffn_down_exps", "ffn_down"),
         "layers.moe.shared.down": ("ffn_down_shexp", "ffn_down"), "layers.moe.router": ("ffn_gate_inp", "f32"),
         "layers.moe.shared_gate": ("ffn_gate_inp_shexp", "f32"),
         "layers.linear.lru_gates": ("lru_gates", "other"),  # RecurrentGemma's 3-D gate blocks (not quantizable)
         # outside the blocks: the final norm and BLOOM's norm after the embedding
         "final_norm": ("output_norm", "f32"), "embedding.norm": ("token_embd_norm", "f32")}
UP_SUFFIX = {"layers.ffn.up": "", "layers.moe.experts.up": "_exps", "layers.moe.shared.up": "_shexp"}


def tensors(spec: ModelSpec, ops: list[Op]) -> list[Tensor]:
    """The GGUF tensors of the op list (weights only), layer by layer, each with its op's index."""
    layer_of = {"moe": [i for i, k in enumerate(spec.layer_ffn) if k == "moe"],
                "ffn": [i for i, k in enumerate(spec.layer_ffn) if k == "dense"]}
    fused = {"layers.attn.qkv": spec.architecture in FUSED_QKV, "layers.ffn.up": spec.architecture in FUSED_GATE_UP}
    return [replace(t, op=index) for index, op in enumerate(ops) if op.params for t in _op_tensors(op, layer_of, fused)]


def _op_tensors(op: Op, layer_of: dict[str, list[int]], fused: dict[str, bool]) -> list[Tensor]:
    d = op.dims
    if op.name == "embedding":
        return [Tensor("token_embd.weight", op.params, "token_embd", d.width)]
    if op.name == "lm_head":
        return [Tensor("output.weight", op.params, "output", d.k)]
    if op.kind == "gather":  # a learned position table
        return [Tensor("position_embd.weight", op.params, "f32")]
    if not isinstance(d, MatmulDims):  # norms, sinks, convs and contractions, hyper-connection scalars: 1-D
        # a LayerNorm's weight and bias are two tensors (attn_norm.weight, attn_norm.bias)
        parts = [(suffix, n) for suffix, n in (("weight", op.params - op.bias_params), ("bias", op.bias_params)) if n]
        name = NAMES.get(op.name, (op.name,))[0]
        return [Tensor(f"{_block(i)}{name}.{suffix}", n, "f32", layer=i) for i in _layers(op, {})
                for suffix, n in parts]
    return [t for i in _layers(op, layer_of) for t in _matmul_tensors(op, i, fused.get(op.name, False))]


def _layers(op: Op, layer_of: dict[str, list[int]]) -> list[int | None]:
    """The layers an op's occurrences sit in: an FFN matmul's, its FFN kind's layers (layer_of); any
    other op's, the first `count` layers; none for a tensor outside the blocks (the final norm, OPT's
    projections)."""
    if not op.name.startswith("layers."):
        return [None]
    group = op.name.split(".")[1]
    layers = layer_of[group] if group in layer_of else list(range(op.count))
    return layers[:op.weight_copies]  # layers run more than once hold their weights once (LoopSpec)


def _block(layer: int | None) -> str:
    return "" if layer is None else f"blk.{layer}."


def _matmul_tensors(op: Op, i: int | None, fused: bool) -> list[Tensor]:
    """The weight tensors of matmul `op` in layer i and, where the op has a bias, an F32 bias beside
    each: separate attn_q / attn_k / attn_v and ffn_gate / ffn_up, as convert_hf_to_gguf writes them,
    and any other fused projection as the separate matrices its checkpoint stores."""
    d = op.dims
    per = d.experts or 1  # a 3-D expert tensor holds all E
    if op.name == "layers.attn.qkv" and fused:
        parts = [("attn_qkv", "attn_qkv", d.n, 1)]
    elif op.name == "layers.attn.qkv":
        parts = [(f"attn_{part}", f"attn_{part}", w, 1) for part, w in zip("qkv", d.parts)]
    elif op.name in UP_SUFFIX and fused:  # one ffn_up of 2F rows
        parts = [("ffn_up", "ffn_up", d.n, per)]
    elif op.name in UP_SUFFIX:
        roles = ("ffn_gate", "ffn_up") if d.parts else ("ffn_up",)
        parts = [(f"{role}{UP_SUFFIX[op.name]}", role, w, per) for role, w in zip(roles, d.parts or (d.n,))]
    else:  # one tensor per fused part (Qwen3-Next's in_proj_qkvz and in_proj_ba; Qwen3.5's four)
        name, role = NAMES.get(op.name, (op.name, "other"))
        widths = d.parts or (d.n,)
        parts = [(f"{name}.{j}" if len(widths) > 1 else name, role, w, per) for j, w in enumerate(widths)]
    biased = bool(op.bias_params)
    weights = [Tensor(f"{_block(i)}{name}.weight", matrices * d.k * width, role, d.k, i, matrices, biased)
               for name, role, width, matrices in parts]
    biases = [Tensor(f"{_block(i)}{name}.bias", op.bias_params * width // d.n, "f32", layer=i)
              for name, _, width, _ in parts] if biased else []
    return weights + biases


def tensor_types(spec: ModelSpec, ops: list[Op], mix: str) -> list[tuple[Tensor, str]]:
    """Every tensor with the type llama-quantize gives it under `mix`."""
    base = MIXES[mix]
    ts = tensors(spec, ops)
    n_expert = spec.ffn.moe.n_experts if spec.ffn.moe else 1
    # llama.cpp's LLM_TYPE_70B: 80 layers with GQA (80 layers of MHA are LLaMA's 65B)
    seventy = spec.n_layers == 80 and spec.n_kv_heads < spec.attention.n_heads
    falcon = spec.architecture in FALCON
    n_v = sum(t.role == "attn_v" for t in ts)
    n_down = spec.n_layers  # init_quantize_state_counters: n_ffn_down = n_layer_all, not a tensor count
    i_v = i_down = 0
    out = []
    for t in ts:
        if t.role == "f32":
            out.append((t, "f32"))
            continue
        new = base
        if t.role == "output" or (t.role == "token_embd" and spec.tie_embeddings):
            new = "q8_0" if base == "q8_0" or falcon or t.row % GGML_TYPES[base][0] else "q6_K"
        elif t.role == "attn_v":
            if mix in ("Q4_K_M", "Q5_K_M") and use_more_bits(i_v, n_v):
                new = "q6_K"
            if seventy and new == "q4_K":
                new = "q5_K"
            if n_expert == 8:
                new = "q8_0"
            i_v += 1
        elif t.role == "attn_qkv":
            new = {"Q4_K_M": "q5_K", "Q5_K_M": "q6_K"}.get(mix, base)
        elif t.role == "attn_k" and n_expert == 8:
            new = "q8_0"
        elif t.role == "ffn_down":
            i_layer = t.layer if n_expert > 1 else i_down
            if mix == "Q4_K_M" and falcon:
                new = "q6_K" if i_layer < n_down // 16 else "q5_K" if use_more_bits(i_layer, n_down) else base
            elif mix in ("Q4_K_M", "Q5_K_M") and use_more_bits(i_layer, n_down):
                new = "q6_K"
            i_down += 1
        elif t.role == "attn_output" and n_expert == 8 and mix == "Q4_K_M":
            new = "q5_K"
        if t.row % GGML_TYPES[new][0]:
            new = FALLBACK.get(new, "f16")
            new = "f16" if t.row % GGML_TYPES[new][0] else new
        out.append((t, new))
    return out


@dataclass(frozen=True)
class CheckpointSize:
    format: str  # a WEIGHT_FORMATS name
    bytes: float  # the tensor data; a file adds its metadata (a GGUF's tokenizer: a few MB)
    elements: int
    tensors_by_type: dict[str, int]
    bytes_by_type: dict[str, float]
    bytes_by_op: dict[int, float]  # by the index of the op in the op list: what an engine places op by op
    # the same, layer by layer: each op's bytes per occurrence in layer order (a Q4_K_M file gives the
    # first and last eighth of the layers more bits), what a layer split places GPU by GPU
    bytes_by_layer: dict[int, list[float]] = field(default_factory=dict)

    @property
    def bits_per_weight(self) -> float:
        """What llama.cpp logs as BPW: tensor bits over tensor elements."""
        return 8 * self.bytes / self.elements


def checkpoint_types(spec: ModelSpec, ops: list[Op], fmt: str) -> list[tuple[Tensor, str]]:
    """Every weight tensor of the checkpoint with the type `fmt` stores it in."""
    if fmt == "mxfp4":
        return [(t, "mxfp4" if t.name.endswith("_exps.weight") else "bf16") for t in tensors(spec, ops)]
    if fmt == "fp8-block-mxfp4":
        def kind(t: Tensor) -> str:
            op = ops[t.op]
            if t.name.endswith("_exps.weight"):
                return "mxfp4"
            if t.role not in UNQUANTIZED_ROLES and op.quantizable:
                return "fp8_b128_e8m0"
            return "f32" if op.stored_dtype == "fp32" else "bf16"
        return [(t, kind(t)) for t in tensors(spec, ops)]
    if fmt in GROUPED or fmt in ("fp8-block", "nvfp4"):
        quantized, kept = (f"int4_g{GROUPED[fmt][1]}", "f16") if fmt in GROUPED else \
            ({"fp8-block": "fp8_b128", "nvfp4": "nvfp4_g16"}[fmt], "bf16")
        # The formats that quantize linear layers (fp8-block, nvfp4, GPTQ/AWQ: transformers' replace_with_fp8_linear
        # and its kin swap nn.Linear modules) keep what the op list marks not quantizable at 16 bits: routers,
        # parameters of their own (RecurrentGemma's block-diagonal gates, Doge's product-key tables), fp32 mixers;
        # llama-quantize goes by the tensor's shape instead.
        out = [(t, kept if t.role in UNQUANTIZED_ROLES or not ops[t.op].quantizable else quantized)
               for t in tensors(spec, ops)]
        # vLLM's ModelOptNvFp4LinearMethod.create_weights: "Unsupported model when in features size is
        # not multiple of 16"
        odd = next((t for t, kind in out if kind == "nvfp4_g16" and t.row % NVFP4_GROUP), None)
        if odd is not None:
            raise InputError(spec.name, "--weights", f"nvfp4 needs inputs in multiples of {NVFP4_GROUP}; "
                             f"{odd.name} reads {odd.row:,}")
        return out
    return tensor_types(spec, ops, fmt.removeprefix("gguf:"))


def tensor_bytes(t: Tensor, kind: str) -> float:
    """Bytes of `t` stored as `kind`, its scales and zero points included."""
    if kind.startswith("int4_g"):  # 4-bit values + per (group, output): fp16 scale, 4-bit zero
        return t.elements / 2 + -(-t.row // int(kind[6:])) * t.outputs * t.matrices * 2.5
    if kind == "fp8_b128":  # 1-byte values + an fp32 scale per 128 x 128 block
        return t.elements + -(-t.row // FP8_BLOCK) * -(-t.outputs // FP8_BLOCK) * t.matrices * 4
    if kind == "fp8_b128_e8m0":  # 1-byte values + an E8M0 (one-byte) scale per 128 x 128 block
        return t.elements + -(-t.row // FP8_BLOCK) * -(-t.outputs // FP8_BLOCK) * t.matrices
    if kind == "nvfp4_g16":  # two E2M1 values a byte + an E4M3 scale per 16 inputs + two fp32 scalars a matrix
        return t.elements / 2 + t.row // NVFP4_GROUP * t.outputs * t.matrices + 8 * t.matrices
    per_block, size = GGML_TYPES[kind]
    return t.elements // per_block * size


def checkpoint_size(spec: ModelSpec, ops: list[Op], fmt: str) -> CheckpointSize:
    count, nbytes, by_op, elements = defaultdict(int), defaultdict(float), defaultdict(float), 0
    by_layer: dict[int, dict[int | None, float]] = defaultdict(lambda: defaultdict(float))
    for t, kind in checkpoint_types(spec, ops, fmt):
        count[kind] += 1
        nbytes[kind] += tensor_bytes(t, kind)
        by_op[t.op] += tensor_bytes(t, kind)
        by_layer[t.op][t.layer] += tensor_bytes(t, kind)  # None: outside the blocks, the op's only key
        elements += t.elements
        if fmt.startswith("gptq") and kind.startswith("int4"):
            # g_idx, an int32 per input of each matrix; and a bias: AutoGPTQ's make_quant builds every
            # QuantLinear with bias=True (auto_gptq/modeling/_utils.py, the releases behind TheBloke's
            # GPTQ files), so a bias-free linear stores N fp16 zeros. (Later AutoGPTQ and GPTQModel store
            # a bias only where the model has one: 2·N bytes less per matrix, 0.07 % of a Llama 2 7B.)
            extra = {"g_idx_i32": 4 * t.row * t.matrices, "zero_bias_f16": 0 if t.biased else 2 * t.outputs * t.matrices}
            for name, b in extra.items():
                count[name] += b > 0
                nbytes[name] += b
                by_op[t.op] += b
                by_layer[t.op][t.layer] += b
    return CheckpointSize(fmt, sum(nbytes.values()), elements, dict(count), dict(nbytes), dict(by_op),
                          {op: [layers[i] for i in sorted(layers)] for op, layers in by_layer.items()})
