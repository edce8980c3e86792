"""DeepSeek-V4's attention (AttentionSpec.compressed, CompressedSpec): its ops, as transformers'
DeepseekV4Attention, DeepseekV4CSACompressor / DeepseekV4HCACompressor and DeepseekV4Indexer run them.

Every layer: a query latent, one head that is both key and value, a sliding window over those keys with a sink
per head, and the grouped output projection.  A CSA or HCA layer adds a compressor, which folds every `rate`
tokens into one cached entry that the queries attend to beside the window (a CSA layer's indexer picks the
index_topk entries each query reads).  Letters as in op.py; m a compressor's rate, c its series (2 for CSA's
overlapping windows, 1 for HCA), d_I the indexer's head_dim, H_I its heads.
"""

from __future__ import annotations

from dataclasses import replace

from archcalc.ops import op as ops
from archcalc.ops.layers import _fp32, _rope
from archcalc.ops.op import Op
from archcalc.ops.workload import Workload
from archcalc.spec.model import ModelSpec

# A window's softmax-weighted sum, per slot and value: the gate's exp, the normalising divide, the product and
# the sum (its max and sum are a pass each over the slots, folded in here)
POOL_FLOPS = 4


def compressed_attention_ops(spec: ModelSpec, wl: Workload, conv: ops.FlopsConvention) -> list[Op]:
    a, D = spec.attention, spec.d_model
    c, L, H, d, r = a.compressed, spec.n_layers, a.n_heads, spec.qk_head_dim, a.q_lora_rank
    out = [
        ops.matmul("layers.attn.q_a", "attention", wl, D, r, count=L, tp="replicated"),
        ops.norm("layers.attn.q_a_norm", wl, r, "rmsnorm", False, count=L),
        ops.matmul("layers.attn.q_b", "attention", wl, r, H * d, count=L),
        # each query head RMS-normed without a weight (q_b_norm), split with the heads
        ops.norm("layers.attn.q_norm", wl, d, "rmsnorm", False, weight=False, count=L, tokens=wl.tokens * H,
                 tp="split"),
        ops.matmul("layers.attn.kv", "attention", wl, D, d, count=L, tp="replicated"),  # the one K=V head
        ops.norm("layers.attn.kv_norm", wl, d, "rmsnorm", False, count=L),
        # the queries, the shared key, and the output's rotation back (its values carry the key's rotation)
        _rope(wl, "layers.attn.rope", (2 * H + 1) * spec.rope_dim, L),
        # (its sinks fp32, as transformers and DeepSeek's release keep them)
        _fp32(ops.attention("layers.attn.core.local", wl, conv, n_heads=H, kv_heads=1, qk_dim=d, v_dim=d,
                            kv_width=d, window=a.sliding_window, layer_kind="local", count=L,
                            params=H if a.sinks else 0)),
    ]
    for kind, rate in (("csa", c.csa_rate), ("hca", c.hca_rate)):
        n = c.count(kind)
        if not n:
            continue
        series = 2 if kind == "csa" else 1
        out += _compressor(spec, wl, f"layers.attn.{kind}", d, rate, series, n, quantizable=kind == "csa")
        core = ops.attention(f"layers.attn.core.{kind}", wl, conv, n_heads=H, kv_heads=1, qk_dim=d, v_dim=d,
                             kv_width=d, window=None, layer_kind=kind, count=n, stride=rate,
                             topk=c.index_topk if kind == "csa" else None)
        out.append(_with_state(core, rate, series, d))
        if kind == "csa":
            out += _indexer_ops(spec, wl, conv, n)
    G, R = a.o_groups, a.o_lora_rank
    # the grouped output projection: o_groups blocks of H·d / G -> R (one bmm: H·d·R MACs a token), then G·R -> D
    o_a = ops.matmul("layers.attn.o_a", "attention", wl, H * d // G, G * R, count=L)
    return out + [replace(o_a, act_bytes=ops.nbytes(wl.tokens * (H * d + G * R), wl.act_dtype)),
                  ops.matmul("layers.attn.o_b", "attention", wl, G * R, D, count=L, tp="row")]


def _closed(wl: Workload, rate: int) -> int:
    """Entries the step closes over the batch: windows of `rate` tokens completed by its T tokens."""
    return wl.batch * ops.entries_closed(wl.new_tokens, wl.context, rate)


def _compressor(spec: ModelSpec, wl: Workload, name: str, width: int, rate: int, series: int, n: int, *,
                quantizable: bool) -> list[Op]:
    """A compressor at `width` (d, or the indexer's d_I) in n layers: each token's value and gate (D -> c·width
    each: one matmul of two parts), a learned position bias (rate × c·width, fp32) added to the gates, the
    softmax-weighted sum of each closed window's c·rate slots, its RMSNorm (a weight of width) and RoPE on its
    trailing rotated dims.  The rest of a window waits in the cache (_with_state).  DeepSeek's release stores the
    CSA compressors' projections in FP8 and the HCA compressors' and the indexer's in BF16 (the Hub's counts by type:
    tests/spec/test_deepseek_v4.py): `quantizable` for the CSA ones only."""
    entries, D = _closed(wl, rate), spec.d_model
    bias = ops.elementwise(f"{name}.position_bias", "attention", wl, series * width, 1, count=n,
                           tokens=entries * rate, params=rate * series * width)
    return [
        ops.matmul(f"{name}.kv_gate", "attention", wl, D, 2 * series * width, count=n, tp="replicated",
                   parts=(series * width, series * width), quantizable=quantizable),
        replace(_fp32(bias), shapes=((rate, series * width),)),
        ops.elementwise(f"{name}.pool", "attention", wl, series * rate * width, POOL_FLOPS, count=n, tokens=entries),
        ops.norm(f"{name}.norm", wl, width, "rmsnorm", False, count=n, tokens=entries),
        ops.elementwise(f"layers.attn.rope.{name.rsplit('.', 1)[1]}_entries", "position", wl, spec.rope_dim,
                        ops.ROPE_FLOPS, count=n, tokens=entries, fn="rope"),
    ]


def _with_state(core: Op, rate: int, series: int, width: int) -> Op:
    """A compressed core with its compressor's fixed state per sequence: the tokens not yet folded into an entry,
    at most rate − 1, each with its value and gate (2·c·width values), and for overlapping windows (c = 2) the
    last window's first series, which the next entry reads: its rate tokens' values and gates (2·rate·width)."""
    held = (rate - 1) * 2 * series * width + (2 * rate * width if series == 2 else 0)
    return replace(core, dims=replace(core.dims, conv_values=held))


def _indexer_ops(spec: ModelSpec, wl: Workload, conv: ops.FlopsConvention, n: int) -> list[Op]:
    """A CSA layer's lightning indexer in n layers: its own compressor at d_I, queries from the query latent
    (q_lora_rank -> H_I·d_I, rotated), their weights (D -> H_I), and the scoring Σ_h w_h·relu(q_h·k) of every
    entry a query may see: an attention of H_I heads over the entries (d_I each, one per csa_rate tokens, cached)
    with no value (the weighted sum over heads is elementwise).  Its selection of index_topk is elementwise."""
    a, D = spec.attention, spec.d_model
    c = a.compressed
    Hi, di, rate = c.index_heads, c.index_head_dim, c.csa_rate
    score = ops.attention("layers.attn.indexer.core", wl, conv, n_heads=Hi, kv_heads=1, qk_dim=di, v_dim=0,
                          kv_width=di, window=None, layer_kind="indexer", count=n, stride=rate)
    return _compressor(spec, wl, "layers.attn.indexer", di, rate, 2, n, quantizable=False) + [
        ops.matmul("layers.attn.indexer.q", "attention", wl, a.q_lora_rank, Hi * di, count=n, tp="replicated",
                   quantizable=False),
        ops.matmul("layers.attn.indexer.weights", "attention", wl, D, Hi, count=n, tp="replicated",
                   quantizable=False),
        _rope(wl, "layers.attn.rope.indexer", Hi * spec.rope_dim, n, tp="replicated"),
        _with_state(score, rate, 2, di),
    ]
