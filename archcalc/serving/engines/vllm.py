"""vLLM V1's memory rules (vllm/v1/core/kv_cache_utils.py, vllm/v1/kv_cache_interface.py,
vllm/utils/mem_utils.py): a paged cache, hybrid layer groups, and the start-up
check it prints or fails with."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from archcalc.cost.solve import last_true
from archcalc.parallel.pipeline import vllm_stages
from archcalc.report.units import binary
from archcalc.serving.engines.base import (
    AttnKind,
    Chunk,
    Engine,
    GiB,
    LayerKV,
    cdiv,
    register,
)

VLLM_BLOCK_SIZE = 16  # CacheConfig.block_size default on CUDA
VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)  # vllm/config/cache.py: BlockSize = Literal[...]
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
                block_size: int = VLLM_BLOCK_SIZE, chunked: bool = False) -> int:
    """Blocks one layer reserves for one request of max_model_len tokens
    (max_memory_usage_bytes / page).  Full attention: ceil(len / block).
    Sliding window: the window plus one scheduled chunk, + 1 because a window
    need not start on a block boundary.  Chunked local attention (`window` is the
    chunk; ChunkedLocalAttentionSpec): the chunk plus one scheduled chunk; chunks
    start on block boundaries, so no extra block."""
    if window is None:
        return cdiv(max_model_len, block_size)
    if chunked:
        return cdiv(min(window + max_num_batched_tokens, max_model_len), block_size)
    return cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1


def _split(kinds: list[AttnKind]) -> tuple[list[AttnKind], float]:
    """The attention kinds vLLM pages, and the bytes of one request's state in the linear layers.
    Not modelled: vLLM's hybrid allocator also raises the attention block size until one page
    holds a linear layer's state (a model-dependent rounding of the attention page)."""
    return (_fold_indexer([k for k in kinds if k.kind != "linear"]),
            int(sum(k.layers * k.state_bytes for k in kinds if k.kind == "linear")))


def _fold_indexer(kinds: list[AttnKind]) -> list[AttnKind]:
    """DeepSeek Sparse Attention's indexer caches (DeepseekV32IndexerCache) are full-attention layers
    of their own page size beside MLA's: vLLM's UniformTypeKVCacheSpecs puts every layer in one group
    and a block's bytes are the sum of the layers' pages, so an MLA layer and its indexer count here
    as one layer of both token sizes."""
    index = [k for k in kinds if k.kind == "indexer"]
    if not index:
        return kinds
    # A spec with an indexer has global layers only (spec validation: no windows, no chunks).
    extra = sum(k.token_bytes for k in index)
    return [replace(k, token_bytes=k.token_bytes + extra) for k in kinds if k.kind != "indexer"]


def vllm_groups(kinds: list[AttnKind]) -> tuple[int, dict[str, int]]:
    """(group size, groups per kind) of vLLM's KV-cache groups.  One kind: one
    group of all layers.  Hybrid: every group has `size` layer slots, the last
    group of a kind padded (Gemma-3-27B: 52 local + 10 global layers -> size
    10, 6 + 1 groups, 8 padding layers)."""
    if not kinds:  # no attention layer at all (a pure state-space model)
        return 0, {}
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
    state_bytes: int = 0  # one request's fixed state in the linear layers (taken before the block pool)

    @property
    def max_concurrency(self) -> float:
        return self.num_blocks / self.blocks_per_request

    @property
    def kv_tokens(self) -> int:
        """'GPU KV cache size': max concurrency × max_model_len (report_kv_cache_config)."""
        return int(self.max_concurrency * self.max_model_len)

    title = "What vLLM would report:"

    @property
    def note(self) -> str:
        if not self.groups:
            return f"One request of {self.max_model_len:,} holds the linear layers' states: {binary(self.needed)}."
        groups = f"{self.groups} group{'s' * (self.groups > 1)} of {self.group_size} layers"
        padding = f" ({self.padding_layers} of them padding)" if self.padding_layers else ""
        return (f"KV for one request of {self.max_model_len:,}: the layers need {binary(self.layers_needed)}; "
                f"vLLM allocates {groups}{padding}: {binary(self.needed)}.")

    def _blocks(self, batch: int) -> int:
        """Blocks left for attention once `batch` requests hold their linear states."""
        return max(0, self.available - batch * self.state_bytes) // (self.page_bytes * self.group_size)

    def admits(self, batch_per_gpu: int) -> bool:
        """vLLM's own integer test: the start-up check, then blocks for the batch."""
        return self.error is None and batch_per_gpu * self.blocks_per_request <= self._blocks(batch_per_gpu)

    def max_batch(self) -> int:
        """The floor of vLLM's max concurrency (with linear states, the largest batch admitted)."""
        if not self.state_bytes:
            return self.num_blocks // self.blocks_per_request
        # admitted(b) is monotone in the batch and true at 0
        return last_true(lambda b: b * self.blocks_per_request <= self._blocks(b), 0,
                         self.num_blocks // self.blocks_per_request)

    def to_dict(self) -> dict:
        return {"available_kv_bytes": self.available, "needed_kv_bytes": self.needed,
                "layers_kv_bytes": self.layers_needed, "page_bytes": self.page_bytes,
                "group_size": self.group_size, "groups": self.groups, "padding_layers": self.padding_layers,
                "num_blocks": self.num_blocks, "blocks_per_request": self.blocks_per_request,
                "max_concurrency": self.max_concurrency, "kv_cache_tokens": self.kv_tokens,
                "estimated_max_model_len": self.estimated_max_model_len, "error": self.error, "log": self.lines}

    @property
    def lines(self) -> list[str]:
        out = [f"Available KV cache memory: {format_gib(self.available)} GiB"]
        if self.error:
            return out + [f"ValueError: {self.error}"]
        return out + [f"GPU KV cache size: {self.kv_tokens:,} tokens",
                      f"Maximum concurrency for {self.max_model_len:,} tokens per request: {self.max_concurrency:.2f}x"]


@register
class VllmEngine(Engine):
    name = "vllm"
    rules_from = ("vLLM V1: vllm/v1/core/kv_cache_utils.py, vllm/v1/kv_cache_interface.py, vllm/config/cache.py "
                  "(the V1 engine's allocator; V0's block manager differed)")
    affine = False  # whole blocks
    kv_types = {**Engine.kv_types, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0}  # --kv-cache-dtype fp8*: one byte per value
    description = (f"paged KV cache of --block-size ({VLLM_BLOCK_SIZE})-token blocks per layer; sliding layers keep "
                   f"window − 1 + max_num_batched_tokens tokens + 1 block; hybrid models pad layer groups; KV heads "
                   f"replicated when TP > K, chunked layers keep chunk + max_num_batched_tokens tokens, MLA's latent on every rank; the start-up check is ONE request of "
                   f"max_model_len against the memory left inside gpu_memory_utilization")

    # A linear layer's state (MambaSpec: conv_kernel − 1 conv inputs and the recurrent state) in the
    # mamba cache dtype, "auto": the model's dtype, bf16 (MambaStateDtypeCalculator.gated_delta_net_state_dtype).
    recurrent_state_bytes = conv_state_bytes = 2.0

    # The indexer's key cache (models/deepseek_v2.py, Indexer): uint8, head_dim fp8 values and one
    # 4-byte UE8M0 scale per 128 of them (head_dim + head_dim // 128 · 4 bytes), whatever --kv-cache-dtype.
    INDEXER_QUANT_BLOCK = 128

    def token_bytes(self, op, k_bytes, v_bytes, share):
        if op.dims.layer_kind == "indexer":  # one key, on every TP rank (its wk is a ReplicatedLinear)
            d = op.dims.kv_width
            return d + d // self.INDEXER_QUANT_BLOCK * 4
        return super().token_bytes(op, k_bytes, v_bytes, share)

    def kv_layers(self, kinds, context, batch, dep):
        attention, _ = _split(kinds)
        size, groups = vllm_groups(attention)
        groups = {**groups, "indexer": groups.get("global", 0)}  # an indexer layer rides on its MLA layer's group
        # Linear layers: one state per request (no prefix caching), outside the attention groups.
        return [LayerKV(k.kind, k.layers, k.layers, None, 0, 0, batch * k.state_bytes) for k in kinds
                if k.kind == "linear"] + [
            LayerKV(k.kind, k.layers, groups[k.kind] * size, k.window,
                    batch * dep.block_size * vllm_blocks(k.window, context, dep.max_num_batched_tokens,
                                                         dep.block_size, k.kind == "chunked"),
                    k.token_bytes) for k in kinds if k.kind != "linear"]

    takes = frozenset({"pp"})  # --pipeline-parallel-size

    def stages(self, spec, dep):
        return vllm_stages(spec, dep.pp)

    def chunk(self, context, batch, dep):
        # The profile run: one dummy batch of max_num_batched_tokens (chunked
        # prefill caps every step there), logits for up to max_num_seqs requests.
        tokens = dep.max_num_batched_tokens
        return Chunk(tokens, min(VLLM_MAX_NUM_SEQS, tokens), "bf16",
                     f"vLLM's profile run: max_num_batched_tokens = {tokens:,} tokens, "
                     f"logits for max_num_seqs = {min(VLLM_MAX_NUM_SEQS, tokens)} requests")

    def reserve(self, capacity, dep):
        requested = math.ceil(capacity * dep.gpu_memory_utilization)
        # NCCL's buffers come with any second GPU of the instance, TP or PP
        non_torch = dep.reserve if dep.reserve is not None else VLLM_NON_TORCH[1 if dep.instance_gpus == 1 else "tp"]
        return {f"outside gpu_memory_utilization {dep.gpu_memory_utilization:g}": capacity - requested,
                "non-torch (CUDA context, NCCL, workspaces)": non_torch}

    def settings(self, dep):
        return {"gpu_memory_utilization": dep.gpu_memory_utilization,
                "max_num_batched_tokens": dep.max_num_batched_tokens, "block_size": dep.block_size}

    # The per-layer functions vLLM's check and its binary search run over.

    def page_bytes(self, kinds: list[AttnKind], block: int = VLLM_BLOCK_SIZE) -> int:
        # All our layer kinds share one page size (same KV width); vLLM requires it.
        return int(block * max((k.token_bytes for k in kinds), default=0))

    def blocks_per_request(self, kinds: list[AttnKind], max_model_len: int, mnbt: int,
                           block: int = VLLM_BLOCK_SIZE) -> int:
        """Σ over groups of one layer's blocks: vLLM's num_block_per_request."""
        _, groups = vllm_groups(kinds)
        return sum(groups[k.kind] * vllm_blocks(k.window, max_model_len, mnbt, block, k.kind == "chunked")
                   for k in kinds)

    def needed(self, kinds: list[AttnKind], max_model_len: int, mnbt: int, block: int = VLLM_BLOCK_SIZE) -> int:
        """_max_memory_usage_bytes_from_groups: group size × page × Σ_groups blocks (attention layers),
        plus one request's state in each linear layer."""
        attention, states = _split(kinds)
        size, _ = vllm_groups(attention)
        return size * self.page_bytes(attention, block) * self.blocks_per_request(attention, max_model_len, mnbt,
                                                                                  block) + states

    def layers_needed(self, kinds: list[AttnKind], max_model_len: int, mnbt: int, block: int = VLLM_BLOCK_SIZE) -> int:
        """Σ over layers of max_memory_usage_bytes, no group padding."""
        attention, states = _split(kinds)
        return sum(k.layers * self.page_bytes(attention, block)
                   * vllm_blocks(k.window, max_model_len, mnbt, block, k.kind == "chunked") for k in attention) + states

    def estimate_max_model_len(self, kinds: list[AttnKind], available: int, max_model_len: int, mnbt: int,
                               block: int = VLLM_BLOCK_SIZE) -> int:
        """vLLM's binary search: the largest length whose `needed` fits; 0 when 1 token does not."""
        def fits(n: int) -> bool:
            return self.needed(kinds, n, mnbt, block) <= available

        return last_true(fits, 1, max_model_len) if fits(1) else 0

    def startup(self, kinds: list[AttnKind], max_model_len: int, available: int, dep) -> VllmReport:
        """check_enough_kv_cache_memory and report_kv_cache_config for one GPU."""
        mnbt, block = dep.max_num_batched_tokens, dep.block_size
        needed = self.needed(kinds, max_model_len, mnbt, block)
        full = kinds
        kinds, states = _split(kinds)  # the block pool serves the attention layers; states come off it first
        available_blocks = available - states
        size, groups = vllm_groups(kinds)
        page = self.page_bytes(kinds, block)
        blocks_per_request = self.blocks_per_request(kinds, max_model_len, mnbt, block)
        if not kinds:  # every layer linear: the pool is whole requests' states, one "block" each
            page, size, blocks_per_request, available_blocks, states = states, 1, 1, available, 0
        estimated, error = None, None
        if available <= 0:
            error = VLLM_NO_MEMORY
        elif needed > available:
            estimated = self.estimate_max_model_len(full, available, max_model_len, mnbt, block)
            error = VLLM_TOO_SMALL.format(max_model_len=max_model_len, needed=format_gib(needed),
                                          available=format_gib(available),
                                          estimated=VLLM_ESTIMATED.format(n=estimated) if estimated > 0 else "")
        return VllmReport(
            max_model_len, available, needed, self.layers_needed(full, max_model_len, mnbt, block), page, size,
            sum(groups.values()), sum(groups[k.kind] * size - k.layers for k in kinds),
            num_blocks=max(0, available_blocks) // (page * size),
            blocks_per_request=blocks_per_request, estimated_max_model_len=estimated, error=error, state_bytes=states)
