"""FLOP-counting conventions.  FLOPs = 2 × multiply-accumulates throughout.

Tools disagree on three things (reference/anchors-memory-flops.md §B.1):
which attention score pairs count, whether a sliding window caps them, and
whether elementwise work (norms, softmax, activations, RoPE, adds) counts.
Each preset fixes those three, so any tool's number can be reproduced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class FlopsConvention:
    name: str
    # "causal": the T·S − T(T−1)/2 pairs a causal kernel computes;
    # "rectangle": all T × S pairs, as if no mask existed.
    pairs: Literal["causal", "rectangle"]
    cap_windows: bool  # sliding-window layers see at most `window` keys
    count_vector: bool  # add elementwise FLOPs to the total
    description: str
    # A sliding window given as an explicit mask: the kernel computes every T × S pair and masks them
    # (torch's scaled_dot_product_attention takes a window only as attn_mask, and skips no block of it).
    masked_windows: bool = False
    # Soft-capped attention (no SDPA option) runs as transformers' eager_attention_forward: explicit matmuls
    # over every key and passes over the scores (ops.op.attention).
    eager_fallback: bool = False
    # Only what FlopCounterMode sees of transformers' torch fallbacks: Kimi Delta Attention's intra-chunk
    # q·k and k·k products, elementwise there and matmuls in flash-linear-attention's kernel.
    counter_view: bool = False


CONVENTIONS = {
    c.name: c
    for c in (
        # Default: the work a causal, window-aware kernel (FlashAttention) does.
        FlopsConvention("causal", "causal", True, False, "causal attention pairs, windows capped, matmul + attention only"),
        # As torch.utils.flop_counter.FlopCounterMode counts: mm/bmm/SDPA only,
        # the full rectangle ("NB: We aren't accounting for causal attention").
        FlopsConvention("torch", "rectangle", False, False, "FlopCounterMode: full T×S rectangle, no window cap, matmul + attention only",
                        counter_view=True),
        # vLLM's perf.py and older Megatron: no causal halving, windows clamp context.
        FlopsConvention("full", "rectangle", True, False, "full T×S rectangle, windows capped (vLLM MFU metrics)"),
        # calflops / DeepSpeed style: elementwise ops counted on top of causal.
        FlopsConvention("detailed", "causal", True, True, "causal pairs, windows capped, plus norms, softmax, activations, RoPE and adds"),
        # What torch eager runs (measure/, calibrated rates): SDPA, is_causal for global layers and
        # sliding-window layers through an explicit mask, so the whole T × S rectangle; soft-capped attention
        # (no SDPA option) as transformers' explicit eager attention.
        FlopsConvention("sdpa", "causal", True, False, "torch SDPA: causal pairs, sliding windows as a mask over the full T×S rectangle; "
                        "soft-capped attention as HF's explicit eager path over the rectangle",
                        masked_windows=True, eager_fallback=True),
    )
}
DEFAULT_CONVENTION = "causal"
