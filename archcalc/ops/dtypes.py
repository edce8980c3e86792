"""Bytes per element of the number formats archcalc knows.

int4 weights carry one fp16 scale per group of 128 (GPTQ/AWQ group-wise
quantization): 4 + 16/128 = 4.125 bits per weight.  The other formats are
taken with a per-tensor or per-channel scale, which is negligible and left out.
"""

from __future__ import annotations

INT4_GROUP = 128  # weights sharing one scale
INT4_SCALE_BITS = 16  # one fp16 scale per group

BITS = {
    "fp32": 32.0,
    "tf32": 32.0,  # stored as fp32; tf32 is a math mode
    "fp16": 16.0,
    "bf16": 16.0,
    "fp8": 8.0,
    "int8": 8.0,
    "int4": 4.0 + INT4_SCALE_BITS / INT4_GROUP,
}
DTYPES = tuple(BITS)
WEIGHT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
KV_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8")
ACT_DTYPES = ("bf16", "fp16", "fp32")  # activations and the math of non-W8A8 matmuls
# Checkpoints quantized to 8 or 4 bits keep embeddings, the unembedding, norms
# and routers at 16 bits (as vLLM's fp8 and GPTQ/AWQ checkpoints do).
HIGH_PRECISION = "bf16"


def kept_dtype(dtype: str) -> str:
    """The format of parameters a `dtype` checkpoint does not quantize
    (embeddings, lm_head, norms, routers, biases): HIGH_PRECISION below 16 bits."""
    return dtype if BITS[dtype] >= 16 else HIGH_PRECISION


def nbytes(elements: float, dtype: str) -> float:
    """Bytes of `elements` values stored as `dtype` (fractional for int4)."""
    return elements * BITS[dtype] / 8


def stored_bytes(params: float, bias_params: float, quantizable: bool, dtype: str, stored_dtype: str | None = None) -> float:
    """Bytes of a tensor group of `params` parameters in a `dtype` checkpoint: below 16 bits only a
    quantizable weight matrix is quantized, its biases and everything else stay at kept_dtype(dtype);
    a stored_dtype (a weight its architecture keeps at one dtype) overrides both."""
    if stored_dtype is not None:
        return nbytes(params, stored_dtype)
    quantized = params - bias_params if quantizable else 0
    return nbytes(quantized, dtype) + nbytes(params - quantized, kept_dtype(dtype))
