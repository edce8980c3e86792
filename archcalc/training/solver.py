"""Solvers over parallel layouts: the fewest GPUs that fit, and the fastest layout on a given count.

Every layout of a GPU count is tried: tp over the divisors that split the
heads within one node (NODE_GPUS), pp over the divisors of the layers, ep over
the divisors of the experts inside dp (MoE only), cp as given, every ZeRO
stage, recompute policy and power-of-two micro-batch that divides the batch.
A layout that does not fit is out; the rest rank by step time under the
profile's best-informed rate set (calibrated, else typical, else peak).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from archcalc.errors import InputError
from archcalc.hardware.profile import HardwareProfile
from archcalc.parallel.tensor import tp_shards_heads
from archcalc.spec.model import ModelSpec
from archcalc.training.layout import RECOMPUTES, Layout, Recipe
from archcalc.training.step import NODE_GPUS, TrainResult, train

MAX_MICRO_BATCH = 64  # sequences per micro-batch the search tries (powers of two up to this)
MAX_SOLVER_GPUS = 1 << 16  # the fewest-GPUs search stops here


@dataclass(frozen=True)
class Candidate:
    layout: Layout
    result: TrainResult

    @property
    def step(self):
        return self.result.steps[-1]  # the best-informed rate set

    @property
    def time(self) -> float:
        return self.step.time


@dataclass(frozen=True)
class Solved:
    best: Candidate | None
    alternatives: list[tuple[Candidate, str]]  # the runners-up, each with why it loses to the best
    tried: int  # layouts evaluated
    fitting: int  # of which fit
    gpus: int
    goal: str  # "fastest layout" or "fewest GPUs"


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def layouts(spec: ModelSpec, gpus: int, recipe: Recipe, base: Layout) -> list[Layout]:
    """Every layout of `gpus` GPUs the search tries (cp and sequence parallelism as in `base`)."""
    moe = spec.ffn.moe
    out = []
    for tp in divisors(gpus):
        if tp > NODE_GPUS or not tp_shards_heads(spec, tp):
            continue
        for pp in divisors(gpus // tp):
            if spec.n_layers % pp or (gpus // tp // pp) % base.cp:
                continue
            dp = gpus // (tp * pp * base.cp)
            if recipe.global_batch % dp:
                continue
            eps = [e for e in divisors(dp) if moe.n_experts % e == 0] if moe else [1]
            per_rank = recipe.global_batch // dp
            micro = [b for b in (1 << i for i in range(7)) if b <= min(per_rank, MAX_MICRO_BATCH) and per_rank % b == 0]
            for ep in eps:
                for zero in (0, 1, 2, 3) if dp * base.cp > 1 else (0,):
                    for recompute in RECOMPUTES:
                        for b in micro:
                            out.append(replace(base, tp=tp, pp=pp, dp=dp, ep=ep, zero=zero, recompute=recompute,
                                               micro_batch=b))
    return out


def why_slower(candidate: Candidate, best: Candidate) -> str:
    """The term of the step that grew most against the best layout."""
    a, b = candidate.step, best.step
    terms = {
        "compute": (a.forward + a.backward) * a.micro_batches - (b.forward + b.backward) * b.micro_batches,
        "recomputation": a.recompute * a.micro_batches - b.recompute * b.micro_batches,
        "pipeline bubble": a.bubble - b.bubble,
        "optimizer step": a.optimizer - b.optimizer,
        **{f"exposed {g.upper()} communication": a.exposed(g) - b.exposed(g) for g in ("tp", "dp", "ep", "cp", "pp")},
    }
    term = max(terms, key=terms.get)
    return f"+{a.time - b.time:.3g} s per step, mostly {term} (+{terms[term]:.3g} s)"


def fastest(spec: ModelSpec, hw: HardwareProfile, gpus: int, recipe: Recipe, base: Layout, top: int = 5) -> Solved:
    tried = fitting = 0
    ranked: list[Candidate] = []
    for layout in layouts(spec, gpus, recipe, base):
        tried += 1
        result = train(spec, hw, layout, recipe)
        if result.memory.fits:
            fitting += 1
            ranked.append(Candidate(layout, result))
    ranked.sort(key=lambda c: c.time)
    if not ranked:
        return Solved(None, [], tried, 0, gpus, "fastest layout")
    best = ranked[0]
    return Solved(best, [(c, why_slower(c, best)) for c in ranked[1:top + 1]], tried, fitting, gpus, "fastest layout")


def fewest_gpus(spec: ModelSpec, hw: HardwareProfile, recipe: Recipe, base: Layout, top: int = 5) -> Solved:
    """The smallest GPU count with a layout that fits, and its fastest layout."""
    tried = 0
    for gpus in range(base.cp, MAX_SOLVER_GPUS + 1, base.cp):
        solved = fastest(spec, hw, gpus, recipe, base, top)
        tried += solved.tried
        if solved.best is not None:
            return replace(solved, tried=tried, goal="fewest GPUs")
    raise InputError(None, "--gpus", f"no layout of up to {MAX_SOLVER_GPUS:,} {hw.name} GPUs fits {spec.name} at "
                                     f"{recipe.seq:,} tokens and a batch of {recipe.global_batch:,} sequences")
