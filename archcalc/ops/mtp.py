"""mtp_ops(spec): the multi-token-prediction modules a checkpoint stores beside the model.

DeepSeek-V3, GLM-4.5/4.6 and Qwen3-Next ship MTP modules that the causal LM transformers builds
leaves out (it builds num_hidden_layers decoder layers and no more); serving engines load them
only for MTP speculative decoding.  size reports them apart, never in the totals.  Each module
(DeepSeek-V3 §2.2; Qwen3-Next's `mtp.*` tensors): RMSNorms of the token's embedding and of the
previous hidden state (enorm, hnorm), a bias-free 2D -> D projection of their concatenation
(eh_proj, Qwen3-Next's fc), one decoder layer of the kind of the model's last layer, and a final
norm; DeepSeek's and GLM's checkpoints also store each module's own copy of the embedding and of
the output head.  DeepSeek-V4's (its inference/model.py, MTPBlock) project the two with e_proj and h_proj, D -> D
each (eh_proj's parameters and FLOPs), run a layer with the compressor MTPSpec.compressor names, and merge the
mHC streams by a head of their own (MTPSpec.hc_head); the embedding and head are the model's.
"""

from __future__ import annotations

from dataclasses import replace

from archcalc.ops import op as ops
from archcalc.ops.layers import model_ops
from archcalc.ops.op import Op
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec


def mtp_ops(spec: ModelSpec) -> list[Op]:
    m = spec.mtp
    if m is None:
        return []
    wl = Workload()  # one token: only the parameters are read (weight bytes at any dtype: totals.weight_bytes)
    D, V = spec.d_model, spec.vocab_size
    last = spec.cut(spec.n_layers - 1, spec.n_layers)  # one layer of the kind of the model's last
    if m.compressor is not None:  # DeepSeek-V4: the compressor its own
        c = last.attention.compressed.model_copy(update={"layers": [m.compressor]})
        last = last.model_copy(update={"attention": last.attention.model_copy(update={"compressed": c})})
    layer = [op for op in model_ops(last, wl) if op.name.startswith(("layers.", "hc.head") if m.hc_head else "layers.")]
    out = [replace(op, name=f"mtp.{op.name}") for op in layer]
    out += [ops.norm(f"mtp.{name}", wl, D, spec.norm.kind, spec.norm.bias, weight=spec.norm.weight)
            for name in ("enorm", "hnorm", "final_norm")]
    out.append(ops.matmul("mtp.eh_proj", "projection", wl, 2 * D, D))
    if m.copies:
        out += [ops.gather("mtp.embedding", "embedding", wl, V, D),
                ops.matmul("mtp.head", "lm_head", wl, D, spec.head_vocab, quantizable=False)]
    return [replace(op, count=op.count * m.layers) for op in out]
