"""Deployment: how a model is served (engine, GPUs, tensor parallelism, dtypes,
engine options); context and batch are given to each plan."""

from __future__ import annotations

import re
from dataclasses import dataclass

from archcalc.errors import InputError


@dataclass(frozen=True)
class Deployment:
    """How the model is served; context and batch are given to each plan."""

    engine: str = "plain"
    gpus: int = 1
    tp: int | None = None  # tensor parallel degree; default: all GPUs
    weight_dtype: str = "bf16"
    kv_dtype: str | None = None  # default: the engine's
    gpu_memory_utilization: float = 0.9  # vLLM
    max_num_batched_tokens: int = 8192  # vLLM (engines/vllm.py: VLLM_MAX_NUM_BATCHED_TOKENS)
    ubatch: int = 512  # llama.cpp n_ubatch (engines/llamacpp.py: LLAMACPP_UBATCH)
    reserve: float | None = None  # bytes; default: the engine's

    @property
    def tensor_parallel(self) -> int:
        return self.tp or self.gpus

    @property
    def replicas(self) -> int:
        """GPUs beyond one TP group serve whole copies (data parallel)."""
        return self.gpus // self.tensor_parallel


def parse_bytes(text: str) -> float:
    """'24GiB', '1024 MiB', '1.5GB', '512MB' or plain bytes."""
    units = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
             "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in units:
        raise InputError(None, "--reserve", f"{text!r} is not a size; give bytes or a number with B, KB, MB, GB, "
                                            "KiB, MiB or GiB (e.g. 2GiB)")
    return float(m.group(1)) * units[m.group(2).lower()]
