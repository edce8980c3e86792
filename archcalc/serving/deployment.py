"""Deployment: how a model is served (engine, GPUs, tensor parallelism, dtypes,
engine options); context and batch are given to each plan."""

from __future__ import annotations

import re
from dataclasses import dataclass

from archcalc.errors import InputError


@dataclass(frozen=True)
class Deployment:
    """How the model is served; context and batch are given to each plan."""

    engine: str = "vllm"  # the engine most GPU deployments run (serving/engines/base.py DEFAULT_ENGINE)
    gpus: int = 1
    tp: int | None = None  # tensor parallel degree; default: all GPUs of one pipeline
    pp: int = 1  # vLLM --pipeline-parallel-size: stages of consecutive layers, each a TP group
    tensor_split: tuple[float, ...] | None = None  # llama.cpp --tensor-split: each GPU's share of the layers
    weight_dtype: str = "bf16"
    kv_dtype: str | None = None  # default: the engine's
    kv_dtype_v: str | None = None  # llama.cpp -ctv: the V cache's type when it differs from kv_dtype (-ctk)
    gpu_memory_utilization: float = 0.9  # vLLM
    max_num_batched_tokens: int = 8192  # vLLM (engines/vllm.py: VLLM_MAX_NUM_BATCHED_TOKENS)
    ubatch: int = 512  # llama.cpp n_ubatch (engines/llamacpp.py: LLAMACPP_UBATCH)
    reserve: float | None = None  # bytes; default: the engine's
    block_size: int = 16  # vLLM --block-size: tokens per KV block (CacheConfig; 16 on CUDA)
    kv_unified: bool = True  # llama.cpp --kv-unified: one cache for every slot (False: one stream per slot)
    swa_full: bool = False  # llama.cpp --swa-full: sliding-window layers cache the whole context
    weights: str | None = None  # a checkpoint format ("gguf:Q4_K_M", ops/checkpoints.py) instead of --dtype for the weights
    mtp: bool = False  # --mtp: also load the checkpoint's multi-token-prediction modules (MTP speculative decoding)
    engine_build: int | None = None  # llama.cpp --llamacpp-build: the build whose rules apply (None: the current)
    flash_attn: bool = True  # llama.cpp -fa: before b6969 the cache was padded to 256 cells with it, 32 without
    vllm_version: tuple[int, int, int] | None = None  # vLLM --vllm-version: the release whose rules apply (None: the newest read)
    prefix_caching: bool | None = None  # vLLM --enable-prefix-caching (None: the release's default)

    @property
    def tensor_parallel(self) -> int:
        return self.tp or max(1, self.gpus // self.pp)

    @property
    def instance_gpus(self) -> int:
        """GPUs of one copy of the model: TP × PP."""
        return self.tensor_parallel * self.pp

    @property
    def replicas(self) -> int:
        """GPUs beyond one copy (TP × PP) serve whole copies (data parallel)."""
        return self.gpus // self.instance_gpus


# llama_max_devices(): llama.cpp takes at most 16 GPUs, and its -ts parser refuses more entries (common/arg.cpp)
MAX_SPLIT_DEVICES = 16
_SPLIT_ENTRY = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,9})?|\.[0-9]{1,9}")


def parse_split(text: str) -> tuple[float, ...]:
    """llama.cpp's --tensor-split: proportions separated by ',' or '/' ("3,1"), one per GPU, at least one > 0."""
    parts = re.split(r"[,/]+", text.strip()) if isinstance(text, str) and len(text) <= 200 else []
    if not parts or not all(_SPLIT_ENTRY.fullmatch(p) for p in parts) or len(parts) > MAX_SPLIT_DEVICES:
        raise InputError(None, "--tensor-split", f"{str(text)[:40]!r} is not a split; give one proportion per GPU "
                                                 f"separated by commas (e.g. 3,1), at most {MAX_SPLIT_DEVICES}")
    split = tuple(float(p) for p in parts)
    if not any(split):
        raise InputError(None, "--tensor-split", f"{text.strip()!r} gives every GPU 0; at least one must be > 0")
    return split


_VERSION = re.compile(r"v?([0-9]{1,3})\.([0-9]{1,3})(?:\.([0-9]{1,3}))?(?:[.+-][0-9A-Za-z.+-]{0,40})?")


def parse_version(text: str, option: str = "--vllm-version") -> tuple[int, int, int]:
    """A release as MAJOR.MINOR[.PATCH] ("0.19.0", "v0.10.1.1", "0.11.0rc1" read as 0.11.0)."""
    m = _VERSION.fullmatch(text.strip()) if isinstance(text, str) else None  # the pattern bounds the length
    if not m:
        raise InputError(None, option, f"{str(text)[:40]!r} is not a release; give MAJOR.MINOR.PATCH (e.g. 0.19.0)")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


MAX_RESERVE_BYTES = 2**50  # 1 PiB: above any device's memory (hardware/bounds.py MAX_MEMORY_BYTES)
_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "pb": 1e15,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50}
# at most 16 digits before and after the point: 1 PiB in bytes has 16; more is a typo, and a 400-digit
# number would otherwise become inf
_SIZE = re.compile(r"\s*([0-9]{1,16}(?:\.[0-9]{1,16})?|\.[0-9]{1,16})\s*([a-zA-Z]{0,3})\s*")


def parse_bytes(text: str) -> float:
    """'24GiB', '1024 MiB', '1.5GB', '512MB' or plain bytes: from 0 to 1 PiB."""
    m = _SIZE.fullmatch(text) if isinstance(text, str) and len(text) <= 64 else None
    if not m or m.group(2).lower() not in _UNITS:
        shown = repr(text) if len(repr(text)) <= 40 else f"{repr(text)[:30]}... ({len(str(text))} characters)"
        raise InputError(None, "--reserve", f"{shown} is not a size; give bytes or a number with B, KB, MB, GB, "
                                            "TB, PB, KiB, MiB, GiB, TiB or PiB (e.g. 2GiB), at most 1 PiB")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if value > MAX_RESERVE_BYTES:
        raise InputError(None, "--reserve", f"{text.strip()!r} is more than 1 PiB; give at most 1 PiB "
                                            f"({MAX_RESERVE_BYTES:,} bytes)")
    return value


def check_reserve(value: float | None) -> float | None:
    """A reserve in bytes: None (the engine's default) or a finite number from 0 to 1 PiB."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_RESERVE_BYTES:
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
            shown = f"a {value.bit_length()}-bit integer"
        else:
            shown = repr(value)[:40]
        raise InputError(None, "--reserve", f"{shown} is not valid; give bytes from 0 to 1 PiB "
                                            f"({MAX_RESERVE_BYTES:,} bytes)")
    return float(value)
