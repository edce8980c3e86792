"""vLLM V1's memory rules (vllm/v1/core/kv_cache_utils.py, vllm/v1/kv_cache_interface.py,
vllm/utils/mem_utils.py): a paged cache, hybrid layer groups, and the start-up
check it prints or fails with."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from archcalc.cost.solve import last_true
from archcalc.errors import InputError
from archcalc.parallel.pipeline import vllm_partition, vllm_stages
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


# Releases where a rule below changed, each read from that release's source on PyPI
# (vllm/v1/core/kv_cache_utils.py, vllm/model_executor/models/config.py, vllm/platforms/interface.py,
# vllm/config/model.py).  --vllm-version picks the rules of a release; the default is VLLM_CURRENT's.
VLLM_OLDEST = (0, 8, 0)  # V1's kv_cache_utils.py; V0's block manager before it is not modelled
VLLM_CURRENT = (0, 34, 0)  # the newest release read
HYBRID_ALLOCATOR = (0, 9, 1)  # groups of one kind; before, unify_hybrid_kv_cache_specs made sliding layers full
CHUNKED_SPEC = (0, 10, 0)  # ChunkedLocalAttentionSpec; before, chunked layers got a FullAttentionSpec
MAMBA_HYBRIDS = (0, 10, 0)  # HybridAttentionMambaModelConfig: linear layers paged beside attention
TOKENS_FROM_CONCURRENCY = (0, 20, 1)  # "GPU KV cache size" = int(max_concurrency · max_model_len)
MAMBA_CACHE_MODES = (0, 16, 0)  # mamba_cache_mode ("none", "align", "all") for prefix caching of linear layers
ALIGN_TO_BLOCK_SIZE = (0, 24, 0)  # _align_hybrid_block_size: alignment max(the kernel's 16, --block-size)
HYBRID_PREFIX_CACHING = (0, 26, 0)  # is_prefix_caching_supported: hybrid models cache prefixes by default
ALIGN_MODE_ONLY = (0, 28, 0)  # prefix caching takes mamba_cache_mode "align"; 0.26-0.27: "all" for Mamba models
ONE_LINE_LOG = (0, 28, 0)  # the cache size and the concurrency in one log line
# The attention kernel's block alignment for the hybrid block size (FlashAttention: multiples of 16).
KERNEL_BLOCK_ALIGNMENT = 16
# mamba_cache_mode: blocks one request holds in a linear layer (MambaSpec.max_memory_usage_bytes):
# "none" its running state; "align" (prefix caching) that and the last cached block's.
MAMBA_BLOCKS = {"none": 1, "align": 2}
# The mixers vLLM's SupportsMambaPrefixCaching models run (Mamba, Mamba-2: Jamba, Nemotron-H, Granite 4,
# Falcon-H1, Zamba2, Codestral); Gated DeltaNet and LFM2's convolution are not among them.
MAMBA_PREFIX_CACHING_MIXERS = ("mamba", "mamba2")


def version_text(v: tuple[int, int, int]) -> str:
    return ".".join(map(str, v))


@dataclass(frozen=True)
class VllmRules:
    """What a vLLM release does, where releases differ."""

    version: tuple[int, int, int]
    prefix_caching: bool | None  # --enable-prefix-caching; None: the release's default

    def caches_prefixes(self, attention: bool) -> bool:
        """Whether a model with linear layers (and attention layers, or not) runs with prefix caching: by
        default a hybrid one since HYBRID_PREFIX_CACHING, an attention-free one never
        (ModelConfig.is_prefix_caching_supported)."""
        if self.prefix_caching is not None:
            return self.prefix_caching
        return attention and self.version >= HYBRID_PREFIX_CACHING


def vllm_rules(dep) -> VllmRules:
    """The rules of --vllm-version; a release newer than the newest read gets the newest's (a warning says so)."""
    return VllmRules(min(dep.vllm_version or VLLM_CURRENT, VLLM_CURRENT), dep.prefix_caching)


def _paged_kinds(kinds: list[AttnKind], rules: VllmRules, fold: bool = True) -> list[AttnKind]:
    """The kinds as the release pages them: DeepSeek's indexer folded into its MLA layers (unless not
    `fold`); before the hybrid allocator sliding layers as full ones, before ChunkedLocalAttentionSpec
    chunked ones too."""
    kinds = _fold_indexer(kinds) if fold else kinds
    full = {"local", "chunked"} if rules.version < HYBRID_ALLOCATOR else {"chunked"} if rules.version < CHUNKED_SPEC \
        else set()
    out: dict[str, AttnKind] = {}
    for k in kinds:
        if k.kind in full:
            k = replace(k, kind="global", window=None)
        out[k.kind] = replace(out[k.kind], layers=out[k.kind].layers + k.layers) if k.kind in out else k
    return list(out.values())


def _fold_indexer(kinds: list[AttnKind]) -> list[AttnKind]:
    """DeepSeek Sparse Attention's indexer caches (DeepseekV32IndexerCache) are full-attention layers
    of their own page size beside MLA's: vLLM's UniformTypeKVCacheSpecs puts every layer in one group
    and a block's bytes are the sum of the layers' pages, so an MLA layer and its indexer count here
    as one layer of both token sizes."""
    index = [k for k in kinds if k.kind == "indexer"]
    if not index:
        return kinds
    # A spec with an indexer has global layers only (spec validation: no windows, no chunks).
    if sum(k.layers for k in index) != sum(k.layers for k in kinds if k.kind == "global"):
        raise InputError(None, "MODEL", "vLLM's paging of an indexer cache that only some layers hold (GLM-5's "
                                        "\"shared\" indexer_types, MiniMax-M3's block indexer) is not modelled; "
                                        "use --engine plain")
    extra = sum(k.token_bytes for k in index)
    return [replace(k, token_bytes=k.token_bytes + extra) for k in kinds if k.kind != "indexer"]


def vllm_groups(kinds: list[AttnKind]) -> tuple[int, dict[str, int]]:
    """(group size, groups per kind) of vLLM's KV-cache groups.  One kind: one
    group of all layers.  Hybrid: every group has `size` layer slots, the last
    group of a kind padded (Gemma-3-27B: 52 local + 10 global layers -> size
    10, 6 + 1 groups, 8 padding layers)."""
    if not kinds:
        return 0, {}
    if len(kinds) == 1:
        return kinds[0].layers, {kinds[0].kind: 1}
    counts = [k.layers for k in kinds]
    lo, hi = min(counts), max(counts)
    size = hi if hi < lo * VLLM_GROUP_SLACK else lo
    return size, {k.kind: cdiv(k.layers, size) for k in kinds}


@dataclass(frozen=True)
class VllmLayout:
    """How vLLM pages one GPU's layers for requests of max_model_len: every layer's cache is blocks
    of one page in one pool; a linear layer's state is one page (padded to it), a hybrid model's
    attention block raised until a page holds that state (HybridAttentionMambaModelConfig)."""

    kinds: list[AttnKind]
    block_size: int  # the attention block, after the hybrid raise
    page: int  # bytes of one block of one layer
    group_size: int
    groups: dict[str, int]  # groups per kind
    blocks: dict[str, int]  # blocks one request holds in one layer of each kind
    min_block: int  # the smallest block size among the groups (a linear group's is mamba_block_size)
    raised_from: int | None = None  # --block-size when the hybrid raise replaced it
    mamba_mode: str = "none"
    # before 0.9.1 the check ran on the layers' own specs (sliding ones windowed) before they were made full
    checked: int | None = None

    @property
    def blocks_per_request(self) -> int:
        """Σ over groups of one layer's blocks: vLLM's num_blocks_per_request."""
        return sum(self.groups[k.kind] * self.blocks[k.kind] for k in self.kinds)

    @property
    def needed(self) -> int:
        """_max_memory_usage_bytes_from_groups: group size × page × Σ_groups blocks."""
        return self.group_size * self.page * self.blocks_per_request if self.checked is None else self.checked

    @property
    def layers_needed(self) -> int:
        """Σ over layers of max_memory_usage_bytes, no group padding."""
        return sum(k.layers * self.page * self.blocks[k.kind] for k in self.kinds)


def vllm_layout(kinds: list[AttnKind], max_model_len: int, dep) -> VllmLayout:
    rules, own = vllm_rules(dep), _fold_indexer(kinds)
    kinds = _paged_kinds(kinds, rules)
    attention = [k for k in kinds if k.kind != "linear"]
    state = max((k.state_bytes for k in kinds if k.kind == "linear"), default=0)
    token = max((k.token_bytes for k in attention), default=0)  # all our attention kinds share one width
    # under prefix caching mamba_cache_mode "align" (Engine.check refuses the releases and models that
    # take another mode)
    mode = "align" if state and rules.caches_prefixes(bool(attention)) else "none"
    block, raised = dep.block_size, None
    if attention and state:
        align = max(KERNEL_BLOCK_ALIGNMENT, block) if rules.version >= ALIGN_TO_BLOCK_SIZE else KERNEL_BLOCK_ALIGNMENT
        least = align * cdiv(int(state), int(align * token))
        if block < least:  # "Setting attention block size to N tokens" (even over an explicit --block-size)
            block, raised = least, block
    page = int(block * token) if attention else int(state)
    size, groups = vllm_groups(kinds)
    blocks = {k.kind: MAMBA_BLOCKS[mode] if k.kind == "linear" else
              vllm_blocks(k.window, max_model_len, dep.max_num_batched_tokens, block, k.kind == "chunked")
              for k in kinds}
    # a linear group's block size is mamba_block_size: max_model_len, or the attention block under prefix caching
    min_block = min([block] * bool(attention) + [block if mode == "align" else max_model_len] * bool(state))
    checked = None
    if rules.version < HYBRID_ALLOCATOR:
        checked = sum(k.layers * page * vllm_blocks(k.window, max_model_len, dep.max_num_batched_tokens, block)
                      for k in own)
    return VllmLayout(kinds, block, page, size, groups, blocks, min_block, raised, mode, checked)


@dataclass(frozen=True)
class VllmReport:
    """What vLLM computes and prints at start-up, on one GPU."""

    max_model_len: int
    available: int  # bytes for the KV cache: requested − weights − activation peak − non-torch
    layout: VllmLayout
    num_blocks: int
    estimated_max_model_len: int | None  # the binary search, run only when the check fails
    error: str | None
    version: tuple[int, int, int] = VLLM_CURRENT

    # the layout's figures, under the names the report and its JSON give them
    page_bytes = property(lambda self: self.layout.page)
    group_size = property(lambda self: self.layout.group_size)
    block_size = property(lambda self: self.layout.block_size)
    blocks_per_request = property(lambda self: self.layout.blocks_per_request)
    needed = property(lambda self: self.layout.needed)  # one request of max_model_len (what the check compares)
    layers_needed = property(lambda self: self.layout.layers_needed)

    @property
    def groups(self) -> int:
        return sum(self.layout.groups.values())

    @property
    def padding_layers(self) -> int:
        return sum(self.layout.groups[k.kind] * self.group_size - k.layers for k in self.layout.kinds)

    @property
    def max_concurrency(self) -> float:
        if self.version < HYBRID_ALLOCATOR:  # the token count over max_model_len
            return self.kv_tokens / self.max_model_len
        return self.num_blocks / self.blocks_per_request

    @property
    def kv_tokens(self) -> int:
        """'GPU KV cache size' as the release computes it: num_blocks × block_size (one group, before
        0.9.1); num_blocks // groups × the smallest block size (0.9.1-0.20.0, vllm#40691: too low for
        hybrid models); max concurrency × max_model_len (since 0.20.1)."""
        if self.version < HYBRID_ALLOCATOR:
            return self.num_blocks * self.block_size
        if self.version < TOKENS_FROM_CONCURRENCY:
            return self.num_blocks // self.groups * self.layout.min_block
        return int(self.max_concurrency * self.max_model_len)

    title = "What vLLM would report:"

    @property
    def note(self) -> str:
        lay = self.layout
        out = f"vLLM {version_text(self.version)}'s rules: "
        if not any(k.kind != "linear" for k in lay.kinds):
            return out + f"one request of {self.max_model_len:,} holds the linear layers' states: {binary(self.needed)}."
        groups = f"{self.groups} group{'s' * (self.groups > 1)} of {self.group_size} layers"
        padding = f" ({self.padding_layers} of them padding)" if self.padding_layers else ""
        out += (f"KV for one request of {self.max_model_len:,}: the layers need {binary(self.layers_needed)}; "
                f"vLLM allocates {groups}{padding}: {binary(self.needed)}.")
        if lay.raised_from is not None:
            out += (f" The attention block is raised from {lay.raised_from} to {lay.block_size} tokens so that one "
                    f"page ({binary(lay.page)}) holds a linear layer's state, padded to it")
        if "linear" in lay.blocks:
            out += (f"; each request holds {lay.blocks['linear']} page{'s' * (lay.blocks['linear'] > 1)} per linear "
                    f"layer (mamba_cache_mode {lay.mamba_mode}).")
        return out

    def admits(self, batch_per_gpu: int) -> bool:
        """vLLM's own integer test: the start-up check, then blocks for the batch."""
        return self.error is None and batch_per_gpu * self.blocks_per_request <= self.num_blocks

    def max_batch(self) -> int:
        """The floor of vLLM's max concurrency."""
        return self.num_blocks // self.blocks_per_request

    def to_dict(self) -> dict:
        return {"vllm_version": version_text(self.version), "available_kv_bytes": self.available,
                "needed_kv_bytes": self.needed, "layers_kv_bytes": self.layers_needed,
                "block_size": self.block_size, "page_bytes": self.page_bytes, "group_size": self.group_size,
                "groups": self.groups, "padding_layers": self.padding_layers,
                "mamba_cache_mode": self.layout.mamba_mode if "linear" in self.layout.blocks else None,
                "num_blocks": self.num_blocks, "blocks_per_request": self.blocks_per_request,
                "max_concurrency": self.max_concurrency, "kv_cache_tokens": self.kv_tokens,
                "estimated_max_model_len": self.estimated_max_model_len, "error": self.error, "log": self.lines}

    @property
    def lines(self) -> list[str]:
        out = [f"Available KV cache memory: {format_gib(self.available)} GiB"]
        if self.error:
            return out + [f"ValueError: {self.error}"]
        size = f"GPU KV cache size: {self.kv_tokens:,} tokens"
        concurrency = f"Maximum concurrency for {self.max_model_len:,} tokens per request: {self.max_concurrency:.2f}x"
        return out + ([f"{size}, {concurrency}"] if self.version >= ONE_LINE_LOG else [size, concurrency])


@register
class VllmEngine(Engine):
    name = "vllm"
    rules_from = ("vllm/v1/core/kv_cache_utils.py, vllm/v1/kv_cache_interface.py, vllm/config/cache.py and "
                  f"vllm/platforms/interface.py of the V1 releases {version_text(VLLM_OLDEST)} to "
                  f"{version_text(VLLM_CURRENT)} (V0's block manager is not modelled)")
    affine = False  # whole blocks
    kv_types = {**Engine.kv_types, "fp8_e4m3": 1.0, "fp8_e5m2": 1.0}  # --kv-cache-dtype fp8*: one byte per value
    description = (f"paged KV cache of --block-size ({VLLM_BLOCK_SIZE})-token blocks per layer; sliding layers keep "
                   f"window − 1 + max_num_batched_tokens tokens + 1 block; hybrid models pad layer groups; KV heads "
                   f"replicated when TP > K, chunked layers keep chunk + max_num_batched_tokens tokens, MLA's latent "
                   f"on every rank; a linear layer's state is one page of the same pool; the start-up check is ONE "
                   f"request of max_model_len against the memory left inside gpu_memory_utilization")

    def rules(self, dep) -> str:
        return f"vLLM {version_text(vllm_rules(dep).version)} (--vllm-version): " + self.rules_from

    # A linear layer's state (MambaSpec): conv_kernel − 1 conv inputs at mamba_cache_dtype "auto", the
    # model's dtype (bf16); the recurrent state at mamba_ssm_cache_dtype, "auto" the same, unless the
    # model's config names one (Qwen3.5's mamba_ssm_dtype, Nemotron-H's mamba_ssm_cache_dtype; vllm
    # model_executor/models/config.py): MambaStateDtypeCalculator.
    recurrent_state_bytes = conv_state_bytes = 2.0
    honours_state_dtype = True

    # The indexer's key cache (models/deepseek_v2.py, Indexer): uint8, head_dim fp8 values and one
    # 4-byte UE8M0 scale per 128 of them (head_dim + head_dim // 128 · 4 bytes), whatever --kv-cache-dtype.
    INDEXER_QUANT_BLOCK = 128

    def token_bytes(self, op, k_bytes, v_bytes, share):
        if op.dims.layer_kind == "indexer":  # one key, on every TP rank (its wk is a ReplicatedLinear)
            d = op.dims.kv_width
            return d + d // self.INDEXER_QUANT_BLOCK * 4
        return super().token_bytes(op, k_bytes, v_bytes, share)

    def kv_layers(self, kinds, context, batch, dep):
        lay = vllm_layout(kinds, context, dep)
        out = []
        for k in _paged_kinds(kinds, vllm_rules(dep), fold=False):  # an indexer apart, in its MLA layer's group
            charged = lay.groups["global" if k.kind == "indexer" else k.kind] * lay.group_size
            blocks = lay.blocks["global" if k.kind == "indexer" else k.kind]
            if k.kind == "linear":  # whole pages: the state padded to the attention page
                out.append(LayerKV(k.kind, k.layers, charged, None, 0, 0, batch * blocks * lay.page))
            else:
                out.append(LayerKV(k.kind, k.layers, charged, k.window, batch * lay.block_size * blocks, k.token_bytes))
        return out

    takes = frozenset({"pp", "vllm_version", "prefix_caching"})  # --pipeline-parallel-size, the release

    def check(self, spec, dep):
        vllm_partition(spec.n_layers, dep.pp)  # --pp within 1 to the layers
        if spec.attention.compressed is not None:
            raise InputError(None, "--engine", "vLLM's paging of DeepSeek-V4's compressed caches (its compressor "
                                               "states and entry pools) is not modelled; use --engine plain")
        if dep.mtp and dep.pp > 1:
            raise InputError(None, "--mtp", "MTP modules under pipeline parallelism are not modelled; use --pp 1")
        rules = vllm_rules(dep)
        if not VLLM_OLDEST <= rules.version:
            raise InputError(None, "--vllm-version", f"{version_text(rules.version)}: before "
                             f"{version_text(VLLM_OLDEST)} vLLM ran the V0 engine, whose block manager is not "
                             f"modelled; give {version_text(VLLM_OLDEST)} or later")
        if not spec.linear_mixer_layers:
            return
        if rules.version < MAMBA_HYBRIDS:
            raise InputError(None, "--vllm-version", f"{version_text(rules.version)}: vLLM's V1 engine pages "
                             f"linear-attention and state-space layers since {version_text(MAMBA_HYBRIDS)}; "
                             f"give {version_text(MAMBA_HYBRIDS)} or later")
        if not rules.caches_prefixes(any(spec.attention_layers[k] for k in ("global", "local", "chunked"))):
            return
        if rules.version < MAMBA_CACHE_MODES:
            raise InputError(None, "--enable-prefix-caching", f"vLLM {version_text(rules.version)} caching the "
                             f"prefixes of linear layers (before mamba_cache_mode, {version_text(MAMBA_CACHE_MODES)}) "
                             f"is not modelled; add --no-enable-prefix-caching")
        if spec.linear.kind in MAMBA_PREFIX_CACHING_MIXERS and rules.version < ALIGN_MODE_ONLY:
            raise InputError(None, "--enable-prefix-caching", f"vLLM {version_text(rules.version)} caches a "
                             f"{spec.linear.kind} model's prefixes with mamba_cache_mode 'all' (a state per "
                             f"block), which archcalc does not model; add --no-enable-prefix-caching or give "
                             f"--vllm-version {version_text(ALIGN_MODE_ONLY)} or later")

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
                "max_num_batched_tokens": dep.max_num_batched_tokens, "block_size": dep.block_size,
                "vllm_version": version_text(vllm_rules(dep).version), "prefix_caching": dep.prefix_caching}

    def warnings(self, dep):
        version = dep.vllm_version or VLLM_CURRENT
        if version > VLLM_CURRENT:
            return [f"vLLM {version_text(version)} is newer than {version_text(VLLM_CURRENT)}, the newest release "
                    f"whose rules archcalc read: planned by {version_text(VLLM_CURRENT)}'s"]
        return []

    def needed(self, kinds: list[AttnKind], max_model_len: int, dep) -> int:
        return vllm_layout(kinds, max_model_len, dep).needed

    def estimate_max_model_len(self, kinds: list[AttnKind], available: int, max_model_len: int, dep) -> int:
        """vLLM's binary search: the largest length whose `needed` fits; 0 when 1 token does not."""
        def fits(n: int) -> bool:
            return self.needed(kinds, n, dep) <= available

        return last_true(fits, 1, max_model_len) if fits(1) else 0

    def startup(self, kinds: list[AttnKind], max_model_len: int, available: int, dep) -> VllmReport:
        """check_enough_kv_cache_memory and the KV-cache size report for one GPU."""
        lay = vllm_layout(kinds, max_model_len, dep)
        estimated, error = None, None
        if available <= 0:
            error = VLLM_NO_MEMORY
        elif lay.needed > available:
            estimated = self.estimate_max_model_len(kinds, available, max_model_len, dep)
            error = VLLM_TOO_SMALL.format(max_model_len=max_model_len, needed=format_gib(lay.needed),
                                          available=format_gib(available),
                                          estimated=VLLM_ESTIMATED.format(n=estimated) if estimated > 0 else "")
        return VllmReport(max_model_len, available, lay, max(0, available) // (lay.page * lay.group_size),
                          estimated, error, vllm_rules(dep).version)
