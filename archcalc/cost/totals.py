"""Sums over the op list: parameters, weight bytes, FLOPs, KV cache.

Nothing here knows an architecture; it only adds up Ops.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from archcalc.ops import op as opsmod
from archcalc.ops.arrays import nonzero
from archcalc.ops.conventions import FlopsConvention
from archcalc.ops.dtypes import WEIGHT_DTYPES, stored_bytes
from archcalc.ops.layers import model_ops
from archcalc.ops.mtp import mtp_ops
from archcalc.ops.vision import vision_ops
from archcalc.ops.op import Op
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec

# Training = forward + backward.  Each forward matmul y = xW has two backward
# matmuls of the same size (dL/dx = dL/dy·Wᵀ and dL/dW = xᵀ·dL/dy), so a
# training step costs 3× the forward matmul and attention FLOPs (the "6N" of
# 2N forward + 4N backward).  Activation recomputation would add one forward.
TRAIN_FLOPS_FACTOR = 3
COMPONENTS = ("embedding", "projection", "position", "attention", "linear", "ffn", "experts", "router", "norms",
              "residual", "per_layer", "lm_head")


@dataclass(frozen=True)
class ParamCounts:
    total: int
    active: int  # used by one token: top-k routed experts, everything else in full
    embedding: int  # the input token embedding, V·D (a learned position table is "position")
    by_component: dict[str, int]
    # Other tables a token only looks up (Gemma 4's per-layer embeddings): like the embedding, not in N
    # of the 6N rule, and what Google's "effective" size (E2B: 2.3B) leaves out
    per_layer_table: int = 0

    @property
    def non_embedding(self) -> int:
        return self.total - self._tables

    @property
    def active_non_embedding(self) -> int:
        return self.active - self._tables

    @property
    def _tables(self) -> int:
        return self.embedding + self.by_component.get("position", 0) + self.per_layer_table


def param_counts(ops: list[Op]) -> ParamCounts:
    by = defaultdict(int)
    for op in ops:
        by[op.component] += op.params * op.weight_copies
    return ParamCounts(
        total=sum(by.values()),
        active=sum(op.active_params * op.weight_copies for op in ops),
        embedding=by["embedding"],
        by_component={c: by[c] for c in COMPONENTS if nonzero(by[c])},
        per_layer_table=sum(op.params for op in ops if op.kind == "gather" and op.component == "per_layer"),
    )


def weight_bytes(ops: list[Op], dtype: str) -> float:
    """Bytes of all stored parameters in a `dtype` checkpoint (ops/dtypes.py stored_bytes: below 16
    bits only layer weights are quantized; embeddings, lm_head, norms, routers, biases and weights that are
    not linear layers (Op.quantizable false) stay at 16 bits, as real 8/4-bit checkpoints keep them)."""
    return sum(stored_bytes(op.params, op.bias_params, op.quantizable, dtype, op.stored_dtype) * op.weight_copies
               for op in ops)


@dataclass(frozen=True)
class FlopCounts:
    matmul: int  # projections, FFN, experts, router, lm_head, residual contractions
    attention: int  # QKᵀ and PV
    vector: int  # elementwise work (counted in `forward` only under conventions that say so)
    forward: int  # the total under the convention

    @property
    def train(self) -> int:
        return TRAIN_FLOPS_FACTOR * self.forward


def flop_counts(ops: list[Op], convention: FlopsConvention) -> FlopCounts:
    matmul = sum(op.flops * op.count for op in ops if op.kind != "attention")
    attention = sum(op.flops * op.count for op in ops if op.kind == "attention")
    vector = sum(op.vector_flops * op.count for op in ops)
    return FlopCounts(matmul, attention, vector, sum(op.counted_flops(convention) * op.count for op in ops))


@dataclass(frozen=True)
class KVLayerKind:
    kind: str  # global / local / chunked / linear
    layers: int
    window: int | None
    bytes_per_token: float  # one token, all layers of this kind (0 for linear layers; a compressed entry / stride)
    bytes: float  # at the workload's context × batch, windows capped, fixed states included
    state_bytes: float = 0  # the fixed state of one sequence, all layers of this kind (linear layers)
    stride: int = 1  # tokens a cached entry stands for (a compressed layer's: DeepSeek-V4)


@dataclass(frozen=True)
class KVCache:
    dtype: str
    bytes_per_token: float  # every layer stores the token: no window cap
    bytes: float  # context × batch, windows capped
    by_kind: list[KVLayerKind] = field(default_factory=list)


def kv_cache(ops: list[Op], context: int, batch: int, kv_dtype: str) -> KVCache:
    kinds = []
    for op in ops:
        if op.kind != "attention" or op.dims.shared:  # a shared layer keeps no cache (HF: a DummyLayer)
            continue
        state = opsmod.state_bytes(op, 1, kv_dtype) * op.count
        kinds.append(KVLayerKind(
            op.dims.layer_kind, op.count, op.dims.window,
            # one token, no window capping it (a compressed layer's entry shared by its `stride` tokens)
            bytes_per_token=opsmod.cache_bytes(op, op.dims.stride, 1, kv_dtype) / op.dims.stride * op.count,
            bytes=opsmod.cache_bytes(op, context, batch, kv_dtype) * op.count + batch * state,
            state_bytes=state, stride=op.dims.stride,
        ))
    return KVCache(kv_dtype, sum(k.bytes_per_token for k in kinds), sum(k.bytes for k in kinds), kinds)


@dataclass(frozen=True)
class SizeResult:
    """Everything `archcalc size` reports, for one spec and one workload."""

    spec: ModelSpec
    workload: Workload
    convention: FlopsConvention
    ops: list[Op]
    params: ParamCounts
    weight_bytes: dict[str, float]
    flops: FlopCounts
    kv: KVCache
    warnings: tuple[str, ...] = ()  # e.g. a context beyond the model's maximum
    vision_params: int = 0  # a multimodal checkpoint's image encoder + projector: NOT in params (ops/vision.py)
    mtp_params: int = 0  # the checkpoint's multi-token-prediction modules: NOT in params (ops/mtp.py)
    checkpoint: object = None  # ops.checkpoints.CheckpointSize with --weights: the stored tensor types and bytes

    def to_dict(self, ops: bool = False) -> dict:
        """The archcalc.size/1 JSON document (README: JSON schema); `ops` adds every operation."""
        from archcalc.report.size import size_json

        return size_json(self, ops)

    @property
    def tokens(self) -> int:
        return self.workload.batch * self.workload.context

    @property
    def forward_per_token(self) -> float:
        return self.flops.forward / self.tokens

    @property
    def six_n_per_token(self) -> int:
        """Kaplan's 6N training rule with N = active non-embedding parameters
        (an untied lm_head stays in N, as HF's floating_point_ops counts)."""
        return 6 * self.params.active_non_embedding


def size(spec: ModelSpec, wl: Workload, convention: FlopsConvention) -> SizeResult:
    op_list = model_ops(spec, wl, convention)
    return SizeResult(
        spec, wl, convention, op_list,
        params=param_counts(op_list),
        weight_bytes={d: weight_bytes(op_list, d) for d in WEIGHT_DTYPES},
        flops=flop_counts(op_list, convention),
        kv=kv_cache(op_list, wl.context, wl.batch, wl.kv_dtype),
        vision_params=param_counts(vision_ops(spec)).total,
        mtp_params=param_counts(mtp_ops(spec)).total,
    )
