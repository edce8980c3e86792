"""How a training run is set up: the parallel layout and the recipe.

Ranks: gpus = tp · pp · cp · dp (Megatron-LM's order: tensor innermost, then
context, data, pipeline).  Expert parallelism carves ep groups out of the
data-parallel ranks (ep divides dp), as Megatron-Core's expert_model_parallel
does: each rank holds E/ep experts.  ZeRO stages (Rajbhandari et al. 2020)
shard over the dp · cp ranks that hold the same weights: 1 the fp32 master
weights and optimizer states (Megatron's distributed optimizer), 2 also the
gradients, 3 also the weights (FSDP).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from archcalc.errors import InputError
from archcalc.parallel.tensor import tp_shards_heads
from archcalc.spec.model import ModelSpec
from archcalc.training.activations import AttentionKernel, Recompute
from archcalc.training.tensors import OPTIMIZERS, Optimizer

Precision = Literal["bf16-mixed", "fp32", "fp8"]
PRECISIONS: tuple[Precision, ...] = ("bf16-mixed", "fp32", "fp8")
RECOMPUTES: tuple[Recompute, ...] = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)
CHINCHILLA_TOKENS_PER_PARAM = 20  # Hoffmann et al. 2022: compute-optimal tokens ≈ 20 × parameters
DEFAULT_SEQ = 4096  # when the spec says nothing of its trained context
DDP_BUCKET_BYTES = 25 * 2**20  # torch DDP's bucket_cap_mb = 25 (MiB); two buckets in flight
TRAIN_RESERVE_BYTES = 2 * 2**30  # CUDA context, cuBLAS/NCCL workspaces, allocator fragmentation


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    ep: int = 1
    zero: int = 1  # Megatron's distributed optimizer (ZeRO-1) is every modern recipe's default
    micro_batch: int = 1  # sequences per micro-batch on one data-parallel rank
    recompute: Recompute = "none"
    sequence_parallel: bool = True  # Megatron's SP: norms and dropout split over the TP ranks too

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def shard_ranks(self) -> int:
        """Ranks ZeRO shards dense state over: the data- and context-parallel ranks."""
        return self.dp * self.cp

    def describe(self) -> str:
        parts = [f"tp {self.tp}", f"pp {self.pp}", f"dp {self.dp}"]
        parts += [f"cp {self.cp}"] if self.cp > 1 else []
        parts += [f"ep {self.ep}"] if self.ep > 1 else []
        return ", ".join(parts) + f", zero {self.zero}, micro-batch {self.micro_batch}, recompute {self.recompute}"


@dataclass(frozen=True)
class Recipe:
    """What is trained, how: everything but the layout."""

    seq: int
    global_batch: int  # sequences per optimizer step
    optimizer: Optimizer = "adamw"
    precision: Precision = "bf16-mixed"
    grad_dtype: str = "fp32"  # Megatron's main_grad and FSDP2's reduce_dtype accumulate in fp32
    attention: AttentionKernel = "flash"
    dropout: float = 0.0
    z_loss: bool = False
    tokens: float | None = None  # the run's budget; None: Chinchilla's 20 per parameter
    price_per_gpu_hour: float | None = None
    reserve: float = TRAIN_RESERVE_BYTES

    @property
    def weight_dtype(self) -> str:
        """The dtype the matmuls read weights in (fp8 recipes keep bf16 weights and cast per step)."""
        return "fp32" if self.precision == "fp32" else "bf16"

    @property
    def act_dtype(self) -> str:
        return "fp32" if self.precision == "fp32" else "bf16"

    @property
    def master(self) -> bool:
        """An fp32 copy of the weights beside the compute copy."""
        return self.precision != "fp32"


def grad_accum(layout: Layout, recipe: Recipe) -> int:
    return recipe.global_batch // (layout.micro_batch * layout.dp)


def check_choices(layout: Layout, recipe: Recipe) -> None:
    """Options that must be one of a list."""
    if recipe.optimizer not in OPTIMIZERS:
        raise InputError(None, "--optimizer", f"{recipe.optimizer!r}; valid: {', '.join(OPTIMIZERS)}")
    if recipe.precision not in PRECISIONS:
        raise InputError(None, "--precision", f"{recipe.precision!r}; valid: {', '.join(PRECISIONS)}")
    if layout.recompute not in RECOMPUTES:
        raise InputError(None, "--recompute", f"{layout.recompute!r}; valid: {', '.join(RECOMPUTES)}")
    if layout.zero not in ZERO_STAGES:
        raise InputError(None, "--zero", f"{layout.zero!r}; valid: 0, 1, 2, 3")


def check_split(spec: ModelSpec, layout: Layout, recipe: Recipe) -> None:
    """How the model itself splits: tp over its heads, pp over its layers, ep over its experts,
    cp over the sequence (whatever the data-parallel size)."""
    a, L = spec.attention, spec.n_layers
    moe = spec.ffn.moe
    if not tp_shards_heads(spec, layout.tp):
        valid = ", ".join(str(t) for t in range(1, a.n_heads + 1) if tp_shards_heads(spec, t))
        raise InputError(None, "--tp", f"{layout.tp} does not split {spec.name}'s {a.n_heads} attention heads and "
                                       f"{spec.n_kv_heads} KV heads evenly; valid: {valid}")
    if L % layout.pp:
        valid = ", ".join(str(p) for p in range(1, L + 1) if L % p == 0)
        raise InputError(None, "--pp", f"{layout.pp} does not divide {spec.name}'s {L} layers; valid: {valid}")
    if layout.ep > 1:
        if moe is None:
            raise InputError(None, "--ep", f"{spec.name} has no experts to split; use --ep 1")
        if moe.n_experts % layout.ep:
            raise InputError(None, "--ep", f"{layout.ep} does not divide {spec.name}'s {moe.n_experts} experts")
    if recipe.seq % layout.cp:
        raise InputError(None, "--cp", f"{layout.cp} does not divide the sequence length {recipe.seq:,}")


def check(spec: ModelSpec, layout: Layout, recipe: Recipe, gpus: int | None = None) -> None:
    """Every impossible layout as one InputError naming the option and what is valid."""
    check_choices(layout, recipe)
    check_split(spec, layout, recipe)
    if layout.ep > 1 and layout.dp % layout.ep:
        raise InputError(None, "--ep", f"{layout.ep} does not divide the data-parallel size {layout.dp} "
                                       "(expert-parallel groups are carved out of the data-parallel ranks)")
    if layout.zero == 3 and layout.shard_ranks == 1:
        raise InputError(None, "--zero", "stage 3 (FSDP) shards the weights over data-parallel ranks, and there is "
                                         "only one; use --dp 2 or more, or --zero 0")
    if gpus is not None and layout.gpus != gpus:
        raise InputError(None, "--gpus", f"{gpus} GPUs do not factor into tp {layout.tp} × pp {layout.pp} × "
                                         f"cp {layout.cp} × dp {layout.dp} = {layout.gpus}")
    per_step = layout.micro_batch * layout.dp
    if recipe.global_batch % per_step:
        raise InputError(None, "--global-batch", f"{recipe.global_batch:,} sequences are not a whole number of "
                                                 f"micro-batches of {layout.micro_batch} × dp {layout.dp} = {per_step}")


def derive_dp(layout: Layout, gpus: int) -> Layout:
    """--dp omitted: what the GPUs leave after tp · pp · cp."""
    model_ranks = layout.tp * layout.pp * layout.cp
    if gpus % model_ranks:
        raise InputError(None, "--gpus", f"{gpus} GPUs are not a whole number of tp {layout.tp} × pp {layout.pp} × "
                                         f"cp {layout.cp} = {model_ranks} model replicas")
    return replace(layout, dp=gpus // model_ranks)
