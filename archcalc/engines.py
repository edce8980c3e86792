"""Serving engines' memory rules: how many KV-cache token slots each layer
gets on one GPU, which KV types an engine accepts, the prefill chunk its
activation peak is taken at, and what it keeps back for itself.

Every KV byte here is `cells × ops.cache_token_bytes(op, …)` summed over the
attention ops of the one op list; the engines differ only in the cells.

Sources (reference/anchors-memory-flops.md §1.4, §1.5, §B.3, §E.1):
- vLLM V1: vllm/v1/core/kv_cache_utils.py and vllm/v1/kv_cache_interface.py
  (FullAttentionSpec / SlidingWindowSpec.max_memory_usage_bytes, the hybrid
  allocator's groups, check_enough_kv_cache_memory, report_kv_cache_config),
  vllm/utils/mem_utils.py (format_gib);
- llama.cpp: src/llama-kv-cache-iswa.cpp (SWA cache size), common/arg.cpp
  (cache types), ggml/src/ggml-common.h (block layouts), tools/llama-fit-params.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .dtypes import BITS, KV_DTYPES
from .errors import InputError
from .ops import Op, cached_tokens

if TYPE_CHECKING:  # fit.Deployment; engines only read its fields
    from .fit import Deployment

GiB, MiB = 2**30, 2**20
LOGIT_BYTES = 4  # engines upcast logits to fp32 before sampling (vLLM's sampler, llama.cpp's output buffer)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def pad(n: int, to: int) -> int:
    return cdiv(n, to) * to


@dataclass(frozen=True)
class AttnKind:
    """One attention op of the op list as one GPU sees it: `layers` layers of
    one kind (global / local) sharing a window, each costing `token_bytes` per
    cached token on this GPU."""

    kind: str
    layers: int
    window: int | None
    token_bytes: float


@dataclass(frozen=True)
class LayerKV:
    """The KV cache one GPU holds for the layers of one kind."""

    kind: str
    layers: int
    charged_layers: int  # layers the engine allocates for (vLLM pads hybrid groups)
    window: int | None
    cells: int  # token slots per layer, all sequences together
    token_bytes: float  # one token slot in one layer

    @property
    def bytes(self) -> float:
        return self.charged_layers * self.cells * self.token_bytes


@dataclass(frozen=True)
class Chunk:
    """The prefill step whose activation peak the plan charges."""

    tokens: int  # rows of every matmul in the step
    logit_tokens: int  # rows of fp32 logits it computes
    act_dtype: str
    description: str


class Engine:
    """Plain accounting; the other engines override what differs."""

    name = "plain"
    kv_types: dict[str, float] = {d: BITS[d] / 8 for d in KV_DTYPES}  # bytes per cached value
    default_kv_dtype = "bf16"
    # A CUDA context plus cuBLAS/attention workspaces: about 0.3-0.6 GiB on
    # current GPUs (vLLM profiles 0.16-0.35 GiB of non-torch memory on 24 GiB
    # cards, vllm#12126, vllm#14447); 512 MiB is the round middle.
    default_reserve = 512 * MiB
    description = ("every layer caches min(context, window) tokens per sequence; the whole batch × context "
                   "prefill runs as one step (flash attention: no S² scores); logits at each sequence's last token")

    def kv_bytes_per_value(self, kv_dtype: str) -> float:
        if kv_dtype not in self.kv_types:
            raise InputError(None, "--kv-dtype", f"{kv_dtype!r} is not a KV-cache type of engine {self.name}; "
                                                 f"valid: {', '.join(self.kv_types)}")
        return self.kv_types[kv_dtype]

    def weight_share(self, op: Op, tp: int, tied: bool) -> float:
        """Share of this op's weights one GPU holds."""
        return op.rank_fraction(tp)

    def kv_share(self, op: Op, tp: int) -> float:
        """Share of an attention op's KV values one GPU caches."""
        return op.kv_heads_per_rank(tp)

    def act_tp(self, tp: int) -> int:
        """Ways each op's activations are split across GPUs."""
        return tp

    def kv_layers(self, kinds: list[AttnKind], context: int, batch: int, dep: Deployment) -> list[LayerKV]:
        return [LayerKV(k.kind, k.layers, k.layers, k.window, batch * cached_tokens(context, k.window), k.token_bytes)
                for k in kinds]

    def chunk(self, context: int, batch: int, dep: Deployment) -> Chunk:
        return Chunk(batch * context, batch, "bf16", f"the whole prefill, {batch:,} × {context:,} tokens in one step")

    def reserve(self, capacity: int, dep: Deployment) -> dict[str, float]:
        return {"runtime (CUDA context, workspaces)": self.default_reserve if dep.reserve is None else dep.reserve}


# ---- vLLM ------------------------------------------------------------------------------

VLLM_BLOCK_SIZE = 16  # CacheConfig.block_size default on CUDA
# SchedulerConfig.max_num_batched_tokens: 8192 is the OpenAI-server default on
# devices with ≥ 70 GiB (the LLM class uses 16384 there; smaller GPUs 2048).
VLLM_MAX_NUM_BATCHED_TOKENS = 8192
# max_num_seqs default (256; 1024 on ≥ 70 GiB devices in recent releases): the
# profile run's sampler computes one row of logits per dummy request.
VLLM_MAX_NUM_SEQS = 256
# Non-torch memory vLLM's profiler measures (CUDA context, NCCL, custom
# all-reduce and attention workspaces).  Logged values span 0.16-0.35 GiB on
# 24 GiB cards (vllm#12126, vllm#14447) to 1.79 GiB at TP 1 and 3.58 GiB at
# TP 2 for Llama-3-8B on an H100 (vllm#10511); 1 GiB at TP 1 and 2 GiB with
# NCCL (TP > 1) sit inside that range.  --reserve replaces it.
VLLM_NON_TORCH = {1: 1 * GiB, "tp": 2 * GiB}
# The hybrid allocator groups layers of each kind into groups of one size:
# the smallest kind's count, or the largest when it is < 1.5× the smallest
# (_get_kv_cache_groups_uniform_page_size).
VLLM_GROUP_SLACK = 1.5
VLLM_DOCS = "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
# check_enough_kv_cache_memory's two messages, as current vLLM words them.
VLLM_NO_MEMORY = ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                  "initializing the engine (this flag also controls CPU memory reservation on the CPU backend, "
                  "despite its name). " + VLLM_DOCS)
VLLM_TOO_SMALL = ("To serve at least one request with the model's max seq len ({max_model_len}), ({needed} GiB KV "
                  "cache is needed, which is larger than the available KV cache memory ({available} GiB). "
                  "{estimated}Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU "
                  "backend) or decreasing `max_model_len` when initializing the engine. " + VLLM_DOCS)
VLLM_ESTIMATED = "Based on the available memory, the estimated maximum model length is {n}. "


def format_gib(b: float) -> str:
    """vLLM's format_gib: GiB = 2^30, rounded to 2 decimals ('13.7', '14.23')."""
    return f"{round(b / GiB, 2)}"


def vllm_blocks(window: int | None, max_model_len: int, max_num_batched_tokens: int,
                block_size: int = VLLM_BLOCK_SIZE) -> int:
    """Blocks one layer reserves for one request of max_model_len tokens
    (max_memory_usage_bytes / page).  Full attention: ceil(len / block).
    Sliding window: the window plus one scheduled chunk, + 1 because a window
    need not start on a block boundary."""
    if window is None:
        return cdiv(max_model_len, block_size)
    return cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1


def vllm_groups(kinds: list[AttnKind]) -> tuple[int, dict[str, int]]:
    """(group size, groups per kind) of vLLM's KV-cache groups.  One kind: one
    group of all layers.  Hybrid: every group has `size` layer slots, the last
    group of a kind padded (Gemma-3-27B: 52 local + 10 global layers -> size
    10, 6 + 1 groups, 8 padding layers)."""
    if len(kinds) == 1:
        return kinds[0].layers, {kinds[0].kind: 1}
    counts = [k.layers for k in kinds]
    lo, hi = min(counts), max(counts)
    size = hi if hi < lo * VLLM_GROUP_SLACK else lo
    return size, {k.kind: cdiv(k.layers, size) for k in kinds}


@dataclass(frozen=True)
class VllmReport:
    """What vLLM computes and prints at start-up, on one GPU."""

    max_model_len: int
    available: int  # bytes for the KV cache: requested − weights − activation peak − non-torch
    needed: int  # one request of max_model_len, the groups padded (what the check compares)
    layers_needed: int  # the same without group padding: Σ over layers
    page_bytes: int  # one block of one layer
    group_size: int
    groups: int
    padding_layers: int
    num_blocks: int
    blocks_per_request: int
    estimated_max_model_len: int | None  # the binary search, run only when the check fails
    error: str | None

    @property
    def max_concurrency(self) -> float:
        return self.num_blocks / self.blocks_per_request

    @property
    def kv_tokens(self) -> int:
        """'GPU KV cache size': max concurrency × max_model_len (report_kv_cache_config)."""
        return int(self.max_concurrency * self.max_model_len)

    @property
    def lines(self) -> list[str]:
        out = [f"Available KV cache memory: {format_gib(self.available)} GiB"]
        if self.error:
            return out + [f"ValueError: {self.error}"]
        return out + [f"GPU KV cache size: {self.kv_tokens:,} tokens",
                      f"Maximum concurrency for {self.max_model_len:,} tokens per request: {self.max_concurrency:.2f}x"]


class VllmEngine(Engine):
    name = "vllm"
    kv_types = {**Engine.kv_types, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0}  # --kv-cache-dtype fp8*: one byte per value
    description = (f"paged KV cache of {VLLM_BLOCK_SIZE}-token blocks per layer; sliding layers keep "
                   f"window − 1 + max_num_batched_tokens tokens + 1 block; hybrid models pad layer groups; KV heads "
                   f"replicated when TP > K, MLA's latent on every rank; the start-up check is ONE request of "
                   f"max_model_len against the memory left inside gpu_memory_utilization")

    def kv_layers(self, kinds, context, batch, dep):
        size, groups = vllm_groups(kinds)
        return [LayerKV(k.kind, k.layers, groups[k.kind] * size, k.window,
                        batch * VLLM_BLOCK_SIZE * vllm_blocks(k.window, context, dep.max_num_batched_tokens),
                        k.token_bytes) for k in kinds]

    def chunk(self, context, batch, dep):
        # The profile run: one dummy batch of max_num_batched_tokens (chunked
        # prefill caps every step there), logits for up to max_num_seqs requests.
        tokens = dep.max_num_batched_tokens
        return Chunk(tokens, min(VLLM_MAX_NUM_SEQS, tokens), "bf16",
                     f"vLLM's profile run: max_num_batched_tokens = {tokens:,} tokens, "
                     f"logits for max_num_seqs = {min(VLLM_MAX_NUM_SEQS, tokens)} requests")

    def reserve(self, capacity, dep):
        requested = math.ceil(capacity * dep.gpu_memory_utilization)
        non_torch = dep.reserve if dep.reserve is not None else VLLM_NON_TORCH[1 if dep.tensor_parallel == 1 else "tp"]
        return {f"outside gpu_memory_utilization {dep.gpu_memory_utilization:g}": capacity - requested,
                "non-torch (CUDA context, NCCL, workspaces)": non_torch}

    # The per-layer functions vLLM's check and its binary search run over.

    def page_bytes(self, kinds: list[AttnKind]) -> int:
        # All our layer kinds share one page size (same KV width); vLLM requires it.
        return int(VLLM_BLOCK_SIZE * max(k.token_bytes for k in kinds))

    def blocks_per_request(self, kinds: list[AttnKind], max_model_len: int, mnbt: int) -> int:
        """Σ over groups of one layer's blocks: vLLM's num_block_per_request."""
        _, groups = vllm_groups(kinds)
        return sum(groups[k.kind] * vllm_blocks(k.window, max_model_len, mnbt) for k in kinds)

    def needed(self, kinds: list[AttnKind], max_model_len: int, mnbt: int) -> int:
        """_max_memory_usage_bytes_from_groups: group size × page × Σ_groups blocks."""
        size, _ = vllm_groups(kinds)
        return size * self.page_bytes(kinds) * self.blocks_per_request(kinds, max_model_len, mnbt)

    def layers_needed(self, kinds: list[AttnKind], max_model_len: int, mnbt: int) -> int:
        """Σ over layers of max_memory_usage_bytes, no group padding."""
        return sum(k.layers * self.page_bytes(kinds) * vllm_blocks(k.window, max_model_len, mnbt) for k in kinds)

    def estimate_max_model_len(self, kinds: list[AttnKind], available: int, max_model_len: int, mnbt: int) -> int:
        """vLLM's binary search: the largest length whose `needed` fits; 0 when 1 token does not."""
        def fits(n: int) -> bool:
            return self.needed(kinds, n, mnbt) <= available

        if not fits(1):
            return 0
        result, left, right = 1, 1, max_model_len
        while left <= right:
            mid = (left + right) // 2
            if fits(mid):
                result, left = mid, mid + 1
            else:
                right = mid - 1
        return result

    def report(self, kinds: list[AttnKind], max_model_len: int, available: int, mnbt: int) -> VllmReport:
        size, groups = vllm_groups(kinds)
        page = self.page_bytes(kinds)
        needed = self.needed(kinds, max_model_len, mnbt)
        estimated, error = None, None
        if available <= 0:
            error = VLLM_NO_MEMORY
        elif needed > available:
            estimated = self.estimate_max_model_len(kinds, available, max_model_len, mnbt)
            error = VLLM_TOO_SMALL.format(max_model_len=max_model_len, needed=format_gib(needed),
                                          available=format_gib(available),
                                          estimated=VLLM_ESTIMATED.format(n=estimated) if estimated > 0 else "")
        return VllmReport(
            max_model_len, available, needed, self.layers_needed(kinds, max_model_len, mnbt), page, size,
            sum(groups.values()), sum(groups[k.kind] * size - k.layers for k in kinds),
            num_blocks=max(0, available) // (page * size),
            blocks_per_request=self.blocks_per_request(kinds, max_model_len, mnbt),
            estimated_max_model_len=estimated, error=error)


# ---- llama.cpp ---------------------------------------------------------------------------

LLAMACPP_PAD = 256  # n_ctx and the SWA cache are padded to 256 cells
LLAMACPP_UBATCH = 512  # -ub / n_ubatch default: the largest physical batch, the compute-buffer size
LLAMACPP_FIT_MARGIN = 1024 * MiB  # --fit-target / llama-fit-params: memory left free per device by default
GGML_BLOCK = 32  # values per block of every cache quant type (QK8_0 = QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK4_NL = 32)
# -ctk / -ctv accept exactly these (common/arg.cpp); bytes per block of 32 values (ggml-common.h):
LLAMACPP_BLOCK_BYTES = {
    "q8_0": 34,  # fp16 scale + 32 int8
    "q4_0": 18,  # fp16 scale + 16 bytes of nibbles
    "q4_1": 20,  # fp16 scale + fp16 min + 16 bytes
    "iq4_nl": 18,  # fp16 scale + 16 bytes of non-linear 4-bit indices
    "q5_0": 22,  # fp16 scale + 4 bytes of high bits + 16 bytes
    "q5_1": 24,  # fp16 scale + fp16 min + 4 + 16 bytes
}


class LlamaCppEngine(Engine):
    name = "llamacpp"
    kv_types = {"f32": 4.0, "f16": 2.0, "bf16": 2.0,
                **{t: b / GGML_BLOCK for t, b in LLAMACPP_BLOCK_BYTES.items()}}
    default_kv_dtype = "f16"
    default_reserve = LLAMACPP_FIT_MARGIN
    description = (f"n_ctx = context × batch cells padded to {LLAMACPP_PAD}; SWA layers "
                   f"min(n_ctx, pad(n_swa·n_seq + n_ubatch, {LLAMACPP_PAD})) cells (unified cache); quantized cache "
                   f"types in blocks of {GGML_BLOCK} (flash attention assumed); the token embedding stays in host "
                   f"memory; several GPUs split the layers (-sm layer); activations in f32")

    def weight_share(self, op, tp, tied):
        if op.kind == "gather":
            # token_embd and a learned position table are the input layer, kept
            # on the CPU; a tied output matrix is duplicated onto the GPU.
            return 1.0 if (op.component == "embedding" and tied) else 0.0
        # -sm layer: each GPU holds 1/N of the layers; the output layer and
        # final norm sit whole on the last GPU, the one planned here.
        return 1.0 / tp if op.name.startswith("layers.") else 1.0

    def kv_share(self, op, tp):
        return 1.0 / tp  # a layer's cache lives with the layer

    def act_tp(self, tp):
        return 1  # every GPU runs whole layers

    def n_ctx(self, context: int, batch: int) -> int:
        return pad(context * batch, LLAMACPP_PAD)

    def kv_layers(self, kinds, context, batch, dep):
        n_ctx = self.n_ctx(context, batch)
        return [LayerKV(k.kind, k.layers, k.layers, k.window,
                        min(n_ctx, pad(k.window * batch + dep.ubatch, LLAMACPP_PAD)) if k.window else n_ctx,
                        k.token_bytes) for k in kinds]

    def chunk(self, context, batch, dep):
        # The worst-case graph reserved at start-up: min(n_ctx, n_ubatch)
        # tokens, every one an output.
        tokens = min(self.n_ctx(context, batch), dep.ubatch)
        return Chunk(tokens, tokens, "fp32", f"the reserved worst-case graph: n_ubatch = {tokens:,} tokens, "
                                             f"f32 activations, logits for every token")

    def reserve(self, capacity, dep):
        return {"fit margin": self.default_reserve if dep.reserve is None else dep.reserve}


ENGINES: dict[str, Engine] = {e.name: e for e in (Engine(), VllmEngine(), LlamaCppEngine())}
