"""Pipeline stages: which decoder layers each GPU (or TP group) of a
layer-split deployment holds, and the op list of one stage.

Two engines split layers, each by its own rule:

- vLLM's pipeline parallelism (--pipeline-parallel-size P;
  vllm/distributed/utils.py, get_pp_indices): L // P layers a stage, and the
  L mod P left over go one each to the stages before the last, from the
  second-to-last backwards (61 layers: PP 2 -> [31, 30], PP 4 -> [15, 15, 16,
  15]).  The first stage holds the token embedding, the last the final norm
  and lm_head, and also the embedding when the two are tied
  (LlamaModel: `is_first_rank or (tie_word_embeddings and is_last_rank)`).
- llama.cpp's layer split (-sm layer, --tensor-split; src/llama-model.cpp,
  load_tensors): n_layer + 1 slots, the last being the output layer; slot il
  goes to the first GPU whose cumulative share of the splits (normalised to
  1, in float) exceeds il / (n_layer + 1).  The input layer (the token
  embedding) stays in host memory; a tied output matrix is duplicated onto
  the output layer's GPU.

A stage's op list is the model's own: model_ops of the same spec cut to the
stage's layers (each layer keeps its kind: attention, window, MoE or dense,
RoPE or not), plus the input and output ops the stage holds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from archcalc.errors import InputError
from archcalc.ops.layers import model_ops
from archcalc.ops.op import Op
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec

# Ops outside the layers, by name: the input layer (before layer 0) and the output layer (after the last).
# per_layer: Gemma 4's table, for every layer; drafter.pre/post_projection: a drafter's way in from its target and out
INPUT_OPS = ("embedding", "position.", "hc.expand", "per_layer.", "drafter.pre_projection")
OUTPUT_OPS = ("final_norm", "lm_head", "hc.merge", "hc.head", "drafter.post_projection")  # hc.head: HY-V4's learned merge


@dataclass(frozen=True)
class Stage:
    """One GPU (or TP group) of a layer split: decoder layers [first, last), and whether it holds the
    input layer (the token embedding) and the output layer (final norm, lm_head)."""

    index: int
    first: int
    last: int
    input: bool
    output: bool

    @property
    def layers(self) -> int:
        return self.last - self.first

    def label(self) -> str:
        held = [part for part, on in (("embedding", self.input), ("output", self.output)) if on]
        span = f"layers {self.first}-{self.last - 1}" if self.layers else "no layers"
        return span + "".join(f" + {part}" for part in held)


def whole(spec: ModelSpec, *, input: bool = True) -> list[Stage]:
    """Every layer on one GPU (or one TP group)."""
    return [Stage(0, 0, spec.n_layers, input, True)]


def vllm_partition(n_layers: int, pp: int) -> list[int]:
    """Layers per stage, as vLLM's get_pp_indices splits them (no VLLM_PP_LAYER_PARTITION)."""
    if not 1 <= pp <= n_layers:
        raise InputError(None, "--pp", f"{pp} pipeline stages for {n_layers} layers; give 1 to {n_layers}")
    parts = [n_layers // pp] * pp
    for i in range(2, n_layers % pp + 2):
        parts[-i] += 1
    return parts


def vllm_stages(spec: ModelSpec, pp: int) -> list[Stage]:
    parts = vllm_partition(spec.n_layers, pp)
    starts = np.cumsum([0, *parts]).tolist()
    return [Stage(i, starts[i], starts[i + 1], i == 0, i == pp - 1) for i in range(pp)]


def llamacpp_devices(n_layers: int, split: tuple[float, ...]) -> list[int]:
    """The GPU of each of the n_layer + 1 slots (the last is the output layer), every layer offloaded:
    std::upper_bound over the cumulative, normalised splits, in float32 as llama.cpp computes it."""
    shares = np.cumsum(split, dtype=np.float32)  # each split and every partial sum a float
    shares = shares / shares[-1]
    slots = np.arange(n_layers + 1, dtype=np.float32) / np.float32(n_layers + 1)
    return np.searchsorted(shares, slots, side="right").tolist()


def llamacpp_stages(spec: ModelSpec, split: tuple[float, ...]) -> list[Stage]:
    devices = llamacpp_devices(spec.n_layers, split)
    layers = devices[:-1]
    stages = []
    for gpu in range(len(split)):
        mine = [i for i, d in enumerate(layers) if d == gpu]
        first = mine[0] if mine else 0
        stages.append(Stage(gpu, first, first + len(mine), False, devices[-1] == gpu))
    return stages


def stage_spec(spec: ModelSpec, stage: Stage) -> ModelSpec:
    """The spec cut to the stage's layers (ModelSpec.cut); a stage without layers gets layer 0's,
    whose ops it then does not hold, for its input and output ops."""
    if stage.first == 0 and stage.last == spec.n_layers:
        return spec  # model_ops never holds MTP modules or a vision tower
    if spec.residual.kind == "attnres":
        raise InputError(None, "--pp", "attention residuals mix every layer's output: not split into stages")
    if spec.loop is not None or spec.shared_block is not None:
        raise InputError(None, "--pp", "layers run more than once with the same weights (HRM-Text's loop, Zamba's "
                         "shared block) are not split into stages")
    indexer = spec.attention.indexer
    if indexer is not None and (indexer.shared_layers or indexer.layers is not None):
        raise InputError(None, "--pp", "indexers on some layers only (GLM-5's and HY-V4's shared top-k, MiniMax-M3's "
                         "block indexer) are not split into stages")
    if spec.ffn.moe is not None and spec.ffn.moe.router_mlp is not None and spec.ffn.moe.router_mlp.eda:
        raise InputError(None, "--pp", "a router whose state passes from each MoE layer to the next (ZAYA1's EDA) "
                         "is not split into stages")
    if spec.attention.kv_shared_layers or spec.per_layer_input is not None:
        raise InputError(None, "--pp", "layers that reuse earlier layers' K/V, and per-layer embeddings computed "
                         "for every layer at the input (Gemma 4), are not split into stages")
    return spec.cut(stage.first, stage.last) if stage.layers else spec.cut(0, 1)


def _placement(op: Op) -> str:
    if op.name.startswith(("layers.", "attnres.", "loop.")):  # attention residuals mix the layers (never split: stage_spec)
        return "layers"
    if op.name.startswith(INPUT_OPS):
        return "input"
    if op.name.startswith(OUTPUT_OPS):
        return "output"
    raise AssertionError(f"op {op.name} is in no pipeline stage")  # a new op outside the layers: name it above


def stage_ops(spec: ModelSpec, stage: Stage, wl: Workload) -> list[Op]:
    """The ops one stage runs and holds.  A stage with no layers (a llama.cpp split of 0) runs none."""
    ops = model_ops(stage_spec(spec, stage), wl)
    tied_head = stage.output and not stage.input and spec.tie_embeddings
    out = []
    for op in ops:
        where = _placement(op)
        if (where == "layers" and stage.layers) or (where == "input" and stage.input) or \
                (where == "output" and stage.output):
            out.append(op)
        elif tied_head and op.kind == "gather" and op.component == "embedding":
            out.append(op)  # the output matrix is the embedding's: held here too
    return out
