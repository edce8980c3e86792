"""What every serving engine's memory rules answer, the plain accounting
that answers it by default, and the registry of engines.

An engine says how many KV-cache token slots each layer gets on one GPU,
which KV types it accepts, the prefill chunk its activation peak is taken at,
what it keeps back for itself, how it splits layers across GPUs (stages), which
engine-only options it takes (`takes`; the planner refuses the others) with its
own refusals (`check`), and (optionally) the start-up check it runs.
A new engine is a subclass in a module of this package, decorated with
@register: neither the planner nor the fit report names an engine.

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

from dataclasses import dataclass
from typing import Protocol

from archcalc.errors import InputError
from archcalc.ops.dtypes import BITS, KV_DTYPES
from archcalc.ops.op import Op, cache_token_bytes, cached_tokens
from archcalc.parallel.pipeline import Stage, whole
from archcalc.parallel.tensor import kv_share, weight_share
from archcalc.serving.deployment import Deployment

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
    state_bytes: float = 0  # a linear layer's fixed state for one sequence on this GPU
    stride: int = 1  # a compressed layer (DeepSeek-V4): one cell per `stride` tokens, token_bytes a cell


@dataclass(frozen=True)
class LayerKV:
    """The KV cache (or, for linear layers, the fixed state) one GPU holds for the layers of one kind."""

    kind: str
    layers: int
    charged_layers: int  # layers the engine allocates for (vLLM pads hybrid groups)
    window: int | None
    cells: int  # token slots per layer, all sequences together
    token_bytes: float  # one token slot in one layer
    state_bytes: float = 0  # one layer's fixed state, all sequences together
    stride: int = 1  # tokens a cell stands for (a compressed layer's entry: DeepSeek-V4)

    @property
    def bytes(self) -> float:
        return self.charged_layers * (self.cells * self.token_bytes + self.state_bytes)


@dataclass(frozen=True)
class Chunk:
    """The prefill step whose activation peak the plan charges."""

    tokens: int  # rows of every matmul in the step
    logit_tokens: int  # rows of fp32 logits it computes
    act_dtype: str
    description: str


class StartupCheck(Protocol):
    """What an engine computes and prints when it starts (vLLM's KV check)."""

    title: str
    lines: list[str]  # the engine's own log lines, verbatim
    note: str  # how the figures arise

    def admits(self, batch_per_gpu: int) -> bool: ...  # the engine would start and serve the batch
    def max_batch(self) -> int: ...  # the engine's own concurrency limit (closed form)
    def to_dict(self) -> dict: ...


ENGINES: dict[str, "Engine"] = {}


def register(cls: type["Engine"]) -> type["Engine"]:
    """Class decorator: make an engine available to `fit --engine NAME`."""
    ENGINES[cls.name] = cls()
    return cls


def engine_named(name: str) -> "Engine":
    if name not in ENGINES:
        raise InputError(None, "--engine", f"unknown engine {name!r}; valid: {', '.join(ENGINES)}")
    return ENGINES[name]


@register
class Engine:
    """Plain accounting; the other engines override what differs."""

    name = "plain"
    # Memory is affine in context (between window breakpoints) and in batch:
    # the planner's solvers may use closed forms instead of searching.
    affine = True
    kv_types: dict[str, float] = {d: BITS[d] / 8 for d in KV_DTYPES}  # bytes per cached value
    default_kv_dtype = "bf16"
    # A CUDA context plus cuBLAS/attention workspaces: about 0.3-0.6 GiB on
    # current GPUs (vLLM profiles 0.16-0.35 GiB of non-torch memory on 24 GiB
    # cards, vllm#12126, vllm#14447); 512 MiB is the round middle.
    default_reserve = 512 * MiB
    rules_from = "archcalc's own accounting (no engine's code)"  # the engine code (and version) the rules follow
    description = ("a whole-batch prefill, as a Hugging Face generate() call runs it: every layer caches "
                   "min(context, window) tokens per sequence; the whole batch × context prefill runs as one step "
                   "(no paging, no chunking; flash attention: no S² scores); logits at each sequence's last token")

    def rules(self, dep: Deployment) -> str:
        """Whose rules a plan follows, the engine release included where the deployment picks one."""
        return self.rules_from

    def kv_bytes_per_value(self, kv_dtype: str) -> float:
        if kv_dtype not in self.kv_types:
            raise InputError(None, "--kv-dtype", f"{kv_dtype!r} is not a KV-cache type of engine {self.name}; "
                                                 f"valid: {', '.join(self.kv_types)}")
        return self.kv_types[kv_dtype]

    def weight_share(self, op: Op, tp: int) -> float:
        """Share of this op's weights one GPU holds."""
        return weight_share(op, tp)

    def token_bytes(self, op: Op, k_bytes: float, v_bytes: float, share: float) -> float:
        """Bytes one cached token costs in one layer of `op` on one GPU, K values at k_bytes and V
        values at v_bytes each (the same unless an engine takes two cache types)."""
        if k_bytes == v_bytes or op.dims.kv_width != op.dims.n_kv_heads * (op.dims.qk_dim + op.dims.v_dim):
            return cache_token_bytes(op, k_bytes, share)  # one type, or MLA's latent: all at K's type
        d = op.dims
        return d.n_kv_heads * (d.qk_dim * k_bytes + d.v_dim * v_bytes) * share

    # A linear layer's state as this engine keeps it, bytes per value (None: the cache type's):
    # the recurrent part in fp32 (transformers returns it in float32), the conv's last kernel − 1
    # inputs at the cache type.
    recurrent_state_bytes: float | None = 4.0
    conv_state_bytes: float | None = None
    # True: the recurrent part at the dtype the model's config names (op.dims.state_dtype) where it names one
    honours_state_dtype = False

    def state_bytes(self, op: Op, kv_bytes: float, share: float) -> float:
        """Bytes of one sequence's fixed state in one linear layer of `op` on one GPU (0 otherwise)."""
        d = op.dims
        recurrent, conv = (kv_bytes if b is None else b for b in (self.recurrent_state_bytes, self.conv_state_bytes))
        if self.honours_state_dtype and d.state_dtype:
            recurrent = BITS[d.state_dtype] / 8
        return (d.state_values * recurrent + d.conv_values * conv) * share

    def kv_share(self, op: Op, tp: int) -> float:
        """Share of an attention op's KV values one GPU caches."""
        return kv_share(op, tp)

    def stage_tp(self, dep: Deployment) -> int:
        """Ways each stage's ops split across GPUs (tensor parallelism within a stage)."""
        return dep.tensor_parallel

    # The engine-specific Deployment fields this engine reads (planner.ENGINE_OPTIONS: a field set on
    # an engine that does not read it is an error naming the engines that do).
    takes: frozenset[str] = frozenset()

    def check(self, spec, dep: Deployment) -> None:
        """This engine's own refusals of a deployment (an InputError); none by default."""

    def stages(self, spec, dep: Deployment) -> list[Stage]:
        """The layer split of one copy of the model: one stage per GPU (or TP group) that holds layers."""
        return whole(spec)

    def window_disabled(self, spec) -> str | None:
        """Why this engine runs the spec's sliding-window layers as full attention; None: it keeps the window."""
        return None

    def kv_layers(self, kinds: list[AttnKind], context: int, batch: int, dep: Deployment) -> list[LayerKV]:
        return [LayerKV(k.kind, k.layers, k.layers, k.window,
                        0 if k.kind == "linear" else batch * cached_tokens(context, k.window, k.stride),
                        k.token_bytes, batch * k.state_bytes, k.stride) for k in kinds]

    def chunk(self, context: int, batch: int, dep: Deployment) -> Chunk:
        return Chunk(batch * context, batch, "bf16", f"the whole prefill, {batch:,} × {context:,} tokens in one step")

    def reserve(self, capacity: int, dep: Deployment) -> dict[str, float]:
        return {"runtime (CUDA context, workspaces)": self.default_reserve if dep.reserve is None else dep.reserve}

    def settings(self, dep: Deployment) -> dict:
        """The deployment options this engine reads, beyond the common ones."""
        return {}

    def startup(self, kinds: list[AttnKind], context: int, available: int, dep: Deployment) -> StartupCheck | None:
        """The engine's start-up check given `available` bytes for the KV
        cache after weights, activation peak and reserve; None: no such check."""
        return None

    def notes(self, kv: list[LayerKV], batch_per_gpu: int, dep: Deployment, tied: bool) -> list[str]:
        """Lines that explain this engine's figures in the fit report."""
        return []

    def warnings(self, dep: Deployment) -> list[str]:
        """How this engine reads options it treats differently."""
        return []
