"""Every Op of the list as a real torch kernel, built from the Op's own dims.

`kernel(op, device, dtype)` allocates random inputs of the op's shapes and
returns a Kernel: `run(i)` executes ONE execution of the op on input set i.
Inputs that a real step reads from memory (weights, the KV cache) are
rotated through enough copies to exceed twice the last-level cache, so a
layer's weights are not found in cache as they would not be in a real model.

Kernels: matmuls via F.linear (experts: one grouped_mm over the touched
experts as transformers 5 runs them, else one linear per touched expert as
older eager MoE code does); attention via scaled_dot_product_attention
(is_causal for a whole prefill, a bottom-right causal mask for a chunk,
an explicit mask for a sliding window in prefill, the window's keys only in
decode — the "sdpa" convention the calibrated rates count); soft-capped
attention (no SDPA option) as transformers' explicit eager path; RMSNorm / LayerNorm;
activations (gated: act(gate) × up); RoPE (x·cos + rotate(x)·sin); adds of
the op's inputs; the embedding gather.  Collectives have no kernel here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from math import ceil
from typing import Callable

import torch
import torch.nn.functional as F

from archcalc.errors import InputError
from archcalc.measure.timing import last_level_cache_bytes
from archcalc.ops.op import (
    EAGER_PASSES,
    AttentionDims,
    ContractionDims,
    GatherDims,
    MatmulDims,
    Op,
    RowDims,
    eager_keys,
    expected_experts_touched,
)

ROTATION_BYTES_CAP = 512 * 2**20  # at most this much memory in rotated copies
MAX_COPIES = 4096  # tiny weights need many copies to leave the cache
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu, "relu2": lambda x: F.relu(x).square(), "silu": F.silu,
    "gelu": lambda x: F.gelu(x, approximate="tanh"), "sigmoid": torch.sigmoid,
    # Apertus' xIELU (transformers' XIELUActivation, its torch path): a square on the positive side, expm1
    # on the negative; its learned α and β do not change the kernel's cost
    "xielu": lambda x: torch.where(x > 0, 0.8 * x * x + 0.5 * x,
                                   0.8 * (torch.expm1(torch.clamp(x, max=-1e-6)) - x) + 0.5 * x),
}
SOFTCAP = 30.0  # any cap: the kernel's cost does not depend on it


@dataclass(frozen=True)
class Kernel:
    run: Callable[[int], object]
    rotate: int  # input sets to cycle through
    note: str = ""  # what the kernel does differently from the op, if anything


def cache_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).L2_cache_size
    return last_level_cache_bytes()


def copies(nbytes: float, device: torch.device) -> int:
    """Copies of an input of `nbytes` whose total exceeds twice the cache (within the caps)."""
    if nbytes <= 0:
        return 1
    want = ceil(2 * cache_bytes(device) / nbytes)
    return max(1, min(MAX_COPIES, want, int(ROTATION_BYTES_CAP // nbytes) or 1))


def kernel(op: Op, device: torch.device, dtype: torch.dtype) -> Kernel | None:
    """The op as a kernel, or None for ops without one (collectives)."""
    d = op.dims
    if op.kind == "collective":
        return None
    if op.kind == "attention":
        return _attention(d, device, dtype)
    if isinstance(d, MatmulDims):
        return _experts(d, device, dtype) if d.experts else _linear(d.m, d.k, d.parts or (d.n,),
                                                                          op.bias_params > 0, device, dtype)
    if isinstance(d, ContractionDims):  # a weighted sum over streams / sources: [m, s] · [s] as a matmul
        return _linear(d.m, d.macs_per_token, (1,), False, device, dtype)
    if isinstance(d, GatherDims):
        return _gather(d, device, dtype)
    if isinstance(d, RowDims):
        return _norm(d, device, dtype) if op.kind == "norm" else _elementwise(d, device, dtype)
    raise InputError(op.name, "kind", f"no kernel for op kind {op.kind!r}")


def _rand(*shape: int, device, dtype) -> torch.Tensor:
    return torch.randn(*shape, device=device, dtype=dtype)


def _linear(m: int, k: int, widths: tuple[int, ...], bias: bool, device, dtype) -> Kernel:
    """One F.linear per part (eager code runs q, k, v and gate, up as separate projections)."""
    x = _rand(m, k, device=device, dtype=dtype)
    n_copies = copies(k * sum(widths) * x.element_size(), device)
    weights = [[_rand(n, k, device=device, dtype=dtype) for n in widths] for _ in range(n_copies)]
    biases = [_rand(n, device=device, dtype=dtype) if bias else None for n in widths]
    return Kernel(lambda i: [F.linear(x, w, b) for w, b in zip(weights[i], biases)], n_copies,
                  f"{len(widths)} matmuls" if len(widths) > 1 else "")


@functools.cache
def grouped_mm_works(device_type: str, dtype: torch.dtype) -> bool:
    """Whether torch runs a grouped GEMM here (F.grouped_mm, torch >= 2.9: what transformers 5 runs MoE
    experts with); where it does not, experts run one matmul each, as older eager code does."""
    if not hasattr(F, "grouped_mm"):
        return False
    try:
        x = torch.ones(32, 16, device=device_type, dtype=dtype)
        w = torch.ones(2, 16, 16, device=device_type, dtype=dtype)
        F.grouped_mm(x, w, offs=torch.tensor([16, 32], device=device_type, dtype=torch.int32))
        return True
    except (RuntimeError, NotImplementedError):
        return False


def grouped_kernel(groups: int, rows: int, k: int, n: int, device, dtype) -> Kernel | None:
    """One grouped GEMM over `groups` experts × [rows, k] @ [k, n] (an expert's fused parts, gate and up,
    in one weight, as transformers 5 keeps them), or None where torch's kernel refuses the shape."""
    n_copies = copies(groups * k * n * torch.empty((), dtype=dtype).element_size(), device)
    x = _rand(rows * groups, k, device=device, dtype=dtype)
    offs = torch.arange(1, groups + 1, device=device, dtype=torch.int32) * rows
    stacked = [_rand(groups, k, n, device=device, dtype=dtype) for _ in range(n_copies)]
    grouped = Kernel(lambda i: F.grouped_mm(x, stacked[i], offs=offs), n_copies,
                     f"one grouped GEMM over {groups} touched experts × [{rows}, {k}] @ [{k}, {n}]")
    try:
        grouped.run(0)
    except RuntimeError:  # a shape the grouped kernel refuses (alignment)
        return None
    return grouped


def _experts(d: MatmulDims, device, dtype) -> Kernel:
    """The routed rows split evenly over the experts a step touches (uniform routing, op.py's count):
    one grouped GEMM over the fused parts where torch has one, else one matmul per expert and part."""
    touched = max(1, round(expected_experts_touched(d.experts, d.top_k, d.m // d.top_k)))
    rows = ceil(d.m / touched)
    grouped = grouped_kernel(touched, rows, d.k, d.n, device, dtype) if grouped_mm_works(device.type, dtype) else None
    if grouped is not None:
        return grouped
    widths = d.parts or (d.n,)
    n_copies = copies(touched * d.k * d.n * torch.empty((), dtype=dtype).element_size(), device)
    x = _rand(rows, d.k, device=device, dtype=dtype)
    weights = [[_rand(n, d.k, device=device, dtype=dtype) for _ in range(touched) for n in widths]
               for _ in range(n_copies)]
    return Kernel(lambda i: [F.linear(x, w) for w in weights[i]], n_copies,
                  f"{touched} touched experts × {len(widths)} × [{rows}, {d.k}] @ [{d.k}, {d.n // len(widths)}]")


def _attention(d: AttentionDims, device, dtype) -> Kernel:
    if d.eager_kernels:
        return _eager_attention(d, device, dtype)
    b, h, t, s = d.batch, d.n_heads, d.new_tokens, d.context
    kv_heads = d.n_kv_heads if h % d.n_kv_heads == 0 else h  # MLA runs expanded heads (HF's non-absorbed form)
    mask, causal, keys = None, False, s
    if t == 1:
        keys = min(s, d.window) if d.window else s  # decode: the window's keys only, no mask
    elif d.window and d.window <= s:  # prefill under a sliding window: an explicit mask over T × S (as
        # transformers passes one from S = window on, even where it cuts no key)
        q_pos = torch.arange(s - t, s, device=device)[:, None]
        k_pos = torch.arange(s, device=device)[None, :]
        mask = (k_pos <= q_pos) & (k_pos > q_pos - d.window)
    elif t == s:
        causal = True
    else:  # a chunk after cached tokens: bottom-right causal
        mask = torch.arange(s, device=device)[None, :] <= torch.arange(s - t, s, device=device)[:, None]
    q = _rand(b, h, t, d.qk_dim, device=device, dtype=dtype)
    kv_bytes = b * kv_heads * keys * (d.qk_dim + d.v_dim) * q.element_size()
    n_copies = copies(kv_bytes, device)
    kvs = [(_rand(b, kv_heads, keys, d.qk_dim, device=device, dtype=dtype),
            _rand(b, kv_heads, keys, d.v_dim, device=device, dtype=dtype)) for _ in range(n_copies)]
    gqa = kv_heads != h

    def run(i: int):
        k, v = kvs[i]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=gqa)

    return Kernel(run, n_copies)


SOFTCAP_VALUE = 50.0  # Gemma 2's attn_logit_softcapping; the value does not change the kernels' time


def _eager_attention(d: AttentionDims, device, dtype) -> Kernel:
    """transformers' eager_attention_forward, as Gemma 2 runs it: K and V repeated to every query head, Q Kᵀ
    over every key the step holds, × scaling, the soft-cap where counted (/ cap, tanh, × cap), + the mask,
    softmax into fp32 and back, P V, the output transposed and copied (ops.op._eager_attention counts
    the same kernels)."""
    b, h, t, keys = d.batch, d.n_heads, d.new_tokens, eager_keys(d)
    rep = h // d.n_kv_heads if h % d.n_kv_heads == 0 else 1
    softcap = d.eager_passes > EAGER_PASSES  # the ops counted as passes beyond × scaling and + mask
    q = _rand(b, h, t, d.qk_dim, device=device, dtype=dtype)
    mask = torch.zeros(b, 1, t, keys, device=device, dtype=dtype)
    n_copies = copies(b * d.n_kv_heads * keys * (d.qk_dim + d.v_dim) * q.element_size(), device)
    kvs = [(_rand(b, h // rep, keys, d.qk_dim, device=device, dtype=dtype),
            _rand(b, h // rep, keys, d.v_dim, device=device, dtype=dtype)) for _ in range(n_copies)]

    def repeat(x: torch.Tensor) -> torch.Tensor:
        if rep == 1:
            return x
        return x[:, :, None].expand(b, x.shape[1], rep, keys, x.shape[-1]).reshape(b, h, keys, x.shape[-1])

    def run(i: int):
        k, v = (repeat(x) for x in kvs[i])
        w = torch.matmul(q, k.transpose(2, 3)) * d.qk_dim**-0.5
        if softcap:
            w = torch.tanh(w / SOFTCAP_VALUE) * SOFTCAP_VALUE
        w = torch.softmax(w + mask, dim=-1, dtype=torch.float32).to(dtype)
        return torch.matmul(w, v).transpose(1, 2).contiguous()

    return Kernel(run, n_copies)


def _norm(d: RowDims, device, dtype) -> Kernel:
    x = _rand(d.m, d.width, device=device, dtype=dtype)
    w = torch.ones(d.width, device=device, dtype=dtype)
    if d.norm == "layernorm":
        bias = torch.zeros(d.width, device=device, dtype=dtype)
        return Kernel(lambda i: F.layer_norm(x, (d.width,), w, bias), 1)
    return Kernel(lambda i: F.rms_norm(x, (d.width,), w, eps=1e-6), 1)


def _elementwise(d: RowDims, device, dtype) -> Kernel:
    xs = [_rand(d.m, d.width, device=device, dtype=dtype) for _ in range(max(1, d.inputs))]
    if d.fn in ACTIVATIONS:
        act = ACTIVATIONS[d.fn]
        if len(xs) > 1:  # gated: act(gate) × up
            return Kernel(lambda i: act(xs[0]) * xs[1], 1)
        return Kernel(lambda i: act(xs[0]), 1)
    if d.fn == "rope":
        half = d.width // 2
        cos, sin = _rand(1, d.width, device=device, dtype=dtype), _rand(1, d.width, device=device, dtype=dtype)

        def rope(i: int):
            x = xs[0]
            rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
            return x * cos + rotated * sin

        return Kernel(rope, 1)
    if d.fn == "softcap":
        return Kernel(lambda i: torch.tanh(xs[0] / SOFTCAP) * SOFTCAP, 1)
    if len(xs) == 1:  # a copy (stream expansion) or a scale
        return Kernel(lambda i: xs[0] * 1.0, 1)
    return Kernel(lambda i: sum(xs[1:], xs[0]), 1)


def _gather(d: GatherDims, device, dtype) -> Kernel:
    table = _rand(d.rows, d.width, device=device, dtype=dtype)
    idx = torch.randint(0, d.rows, (d.m,), device=device)
    return Kernel(lambda i: F.embedding(idx, table), 1)
