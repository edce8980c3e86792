"""vision_ops(spec): the image encoder and projector of a multimodal checkpoint, as Ops.

They are weights the serving engine loads (fit counts them), reported apart by
size; they are not in model_ops (the language model's parameters, FLOPs and
cache), and no image's FLOPs are modelled.  SigLIP (transformers'
SiglipVisionTransformer), per encoder layer: LayerNorm, q/k/v/o with biases,
LayerNorm, fc1/fc2 with biases; a Conv2d patch embedding (C·p² -> D, with a
bias) and a learned table of (image_size // patch)² positions; a final
LayerNorm; optionally the attention-pooling head (a probe vector, a
MultiheadAttention, a LayerNorm and an MLP).  Gemma 3's projector: an RMSNorm
over the vision width and a D_v -> d_model matrix without bias.

Llama 4 (transformers' Llama4VisionModel): the same encoder layers (LayerNorms
and q/k/v/o, fc1/fc2 with biases; its 2-D RoPE has no parameters), a patch
embedding as an unfold and a bias-free C·p² -> D matrix, a class embedding
(D), a learned table of (image_size // patch)² + 1 positions, LayerNorms before
and after the encoder, the pixel-shuffle adapter's two bias-free matrices
(d_ff -> projector_input_dim, projector_output_dim -> projector_output_dim), and
the projector, vision_output_dim -> d_model without bias.
"""

from __future__ import annotations

from archcalc.ops import op as ops
from archcalc.ops.op import Op
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec


def vision_ops(spec: ModelSpec, weight_dtype: str = "bf16") -> list[Op]:
    v = spec.vision
    if v is None:
        return []
    wl = Workload(weight_dtype=weight_dtype)  # one token: only parameters and weight bytes are read
    D, F, L = v.d_model, v.d_ff, v.n_layers

    def linear(name: str, d_in: int, d_out: int, count: int = 1, bias: bool = True) -> Op:
        # Vision weights stay 16-bit in 8/4-bit checkpoints, like embeddings (not quantizable).
        return ops.matmul(name, "vision", wl, d_in, d_out, bias_width=d_out if bias else 0, count=count,
                          quantizable=False)

    def layer_norm(name: str, count: int = 1) -> Op:
        return ops.norm(name, wl, D, "layernorm", True, count=count, component="vision")

    llama4 = v.kind == "llama4"
    out = [
        # SigLIP: a Conv2d (kernel = stride = patch) with a bias; Llama 4: an unfold and a bias-free matrix
        linear("vision.patch_embedding", v.channels * v.patch_size**2, D, bias=not llama4),
        ops.gather("vision.position_embedding", "vision", wl, v.patches + int(llama4), D, tp="replicated"),
        layer_norm("vision.layers.norm", 2 * L),
        linear("vision.layers.qkv", D, 3 * D, L),
        linear("vision.layers.o", D, D, L),
        linear("vision.layers.fc1", D, F, L),
        linear("vision.layers.fc2", F, D, L),
        layer_norm("vision.post_norm"),
    ]
    if llama4:  # its class token, the norm before the encoder, the adapter and the projector
        return out + [
            ops.elementwise("vision.class_embedding", "vision", wl, D, 0, params=D),
            layer_norm("vision.pre_norm"),
            linear("vision.adapter.fc1", F, v.projector_input_dim, bias=False),
            linear("vision.adapter.fc2", v.projector_output_dim, v.projector_output_dim, bias=False),
            linear("projector.proj", v.output_dim, spec.d_model, bias=False)]
    if v.head:
        out += [ops.elementwise("vision.head.probe", "vision", wl, D, 0, params=D),
                linear("vision.head.attn.in", D, 3 * D), linear("vision.head.attn.out", D, D),
                ops.norm("vision.head.norm", wl, D, "layernorm", True, component="vision"),
                linear("vision.head.fc1", D, F), linear("vision.head.fc2", F, D)]
    out += [ops.norm("projector.norm", wl, D, "rmsnorm", False, component="vision"),
            linear("projector.proj", D, spec.d_model, bias=False)]
    return out
