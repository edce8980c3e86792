"""mtp_ops(spec): the multi-token-prediction modules a checkpoint stores beside the model.

DeepSeek-V3, GLM-4.5/4.6 and Qwen3-Next ship MTP modules that the causal LM transformers builds
leaves out (it builds num_hidden_layers decoder layers and no more); serving engines load them
only for MTP speculative decoding.  size reports them apart, never in the totals.  Each module
(DeepSeek-V3 §2.2; Qwen3-Next's `mtp.*` tensors): RMSNorms of the token's embedding and of the
previous hidden state (enorm, hnorm), a bias-free 2D -> D projection of their concatenation
(eh_proj, Qwen3-Next's fc), one decoder layer of the kind of the model's last layer, and a final
norm; DeepSeek's and GLM's checkpoints also store each module's own copy of the embedding and of
the output head.
"""

from __future__ import annotations

from dataclasses import replace

from archcalc.ops import op as ops
from archcalc.ops.layers import model_ops
from archcalc.ops.op import Op
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec


def _last_layer(spec: ModelSpec) -> ModelSpec:
    """A one-layer spec whose layer is the model's last: its mixer and FFN kind, its MoE."""
    last = spec.n_layers - 1
    data = spec.model_dump(exclude_defaults=True)
    data.update(n_layers=1, mtp=None)
    att = data["attention"]
    if isinstance(att.get("layer_types"), list):
        att["layer_types"] = [att["layer_types"][last]]
    if spec.layer_attention[last] != "linear" and not spec.parallel_linear:
        data.pop("linear", None)
    att.pop("nope_layers", None)
    if last in (spec.attention.nope_layers or ()):
        att["nope_layers"] = [0]
    ffn = data.setdefault("ffn", {})
    ffn.pop("none_layers", None)
    if spec.ffn.moe is not None:
        ffn["moe"] = {**ffn["moe"], "first_dense_layers": 0, "every": 1,
                      "layers": [0] if spec.layer_ffn[last] == "moe" else []}
    return ModelSpec.model_validate(data)


def mtp_ops(spec: ModelSpec, weight_dtype: str = "bf16") -> list[Op]:
    m = spec.mtp
    if m is None:
        return []
    wl = Workload(weight_dtype=weight_dtype)  # one token: only parameters and weight bytes are read
    D, V = spec.d_model, spec.vocab_size
    layer = [op for op in model_ops(_last_layer(spec), wl) if op.name.startswith("layers.")]
    out = [replace(op, name=f"mtp.{op.name}") for op in layer]
    out += [ops.norm(f"mtp.{name}", wl, D, spec.norm.kind, spec.norm.bias, weight=spec.norm.weight)
            for name in ("enorm", "hnorm", "final_norm")]
    out.append(ops.matmul("mtp.eh_proj", "projection", wl, 2 * D, D))
    if m.copies:
        out += [ops.gather("mtp.embedding", "embedding", wl, V, D),
                ops.matmul("mtp.head", "lm_head", wl, D, V, quantizable=False)]
    return [replace(op, count=op.count * m.layers) for op in out]
