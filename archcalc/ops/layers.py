"""model_ops(spec, workload): the one list of operations a model runs in a step.

This is the only architecture-specific code: it decides WHICH ops a spec has
and their dims; op.py holds every formula.  Ops are grouped by concern, not
by layer: the QKV projection of every layer is one Op with count L, while the
attention core is split by layer kind (global / local) because the window
changes its cost.  Letters as in op.py; L layers, U = 2L sublayers
(attention and FFN are one residual unit each), n residual streams.
The spec's numbers may be numpy arrays (a sweep): an op whose count is 0 for
some candidates is built once and adds nothing for them (`nonzero`).
"""

from __future__ import annotations

from dataclasses import replace

from archcalc.ops import op as ops
from archcalc.ops.dtypes import kept_dtype, nbytes
from archcalc.ops.arrays import floor_int, lesser, nonzero
from archcalc.ops.conventions import CONVENTIONS, DEFAULT_CONVENTION, FlopsConvention
from archcalc.ops.op import Op
from archcalc.ops.workload import Workload
from archcalc.spec.model import BASE_ACTIVATION, LEARNED_ACTIVATION_PARAMS, MLAGeometry, ModelSpec


def model_ops(spec: ModelSpec, wl: Workload, convention: FlopsConvention | None = None) -> list[Op]:
    conv = convention or CONVENTIONS[DEFAULT_CONVENTION]
    out = [
        *_embedding_ops(spec, wl),
        *_attention_ops(spec, wl, conv),
        *_ffn_ops(spec, wl),
        *(_per_layer_input_ops(spec, wl) if spec.per_layer_input is not None else ()),
        *_residual_ops(spec, wl),
        *_head_ops(spec, wl),
    ]
    if spec.shared_block is not None:
        out += _shared_block_ops(spec, wl, conv)
    if spec.loop is not None and spec.loop.kind == "message":
        return _message_looped(spec, wl, conv, out)
    return out if spec.loop is None else _looped(spec, wl, out)


def _stored_kinds(spec: ModelSpec) -> list[str]:
    """The stored layers' kinds: the layers run, each looped layer once (its first pass's run)."""
    kinds, lp = list(spec.layer_attention), spec.loop
    if lp is None:
        return kinds
    if lp.kind == "hierarchical":  # the stack of stored layers, run again and again
        return kinds[:lp.stored_layers]
    return kinds[:lp.prelude + lp.core] + kinds[lp.prelude + lp.passes * lp.core:]


def _message_looped(spec: ModelSpec, wl: Workload, conv: FlopsConvention, ops_: list[Op]) -> list[Op]:
    """Inkling 2 Loop (LoopSpec kind message): the core's layers run `passes` times, each pass from the prelude's
    output and block sums, each layer run with caches of its own (the ops count runs).  Layers differ (global and
    local, Inkling 2's parts), so each layer op's stored copies are its count in the stored model, the same ops
    built on the stored layers alone.  In each pass after the first, each core layer's q, k, v and MLP inputs are
    mixed with messages from the previous pass: its 4 learned queries (fp32) over the RMS-normed sources (the
    previous pass's core blocks but its first, and its output: core / layers-a-block of them), an attention as the
    attention residuals'; each message through a gate (both RMS-normed without a weight, 2·D -> rank, rank -> D
    twice in fp32, tanh's, (1 − f)·h + g·m), and the sliding layers' input norm run on the gated q, k and v apart."""
    lp, D, B = spec.loop, spec.d_model, spec.loop.stored_layers // spec.residual.blocks
    stored_spec = ModelSpec.model_validate({
        **spec.model_dump(exclude_defaults=True), "n_layers": lp.stored_layers, "loop": None,
        "attention": {**spec.attention.model_dump(exclude_defaults=True), "layer_types": _stored_kinds(spec)}})
    stored = {op.name: op.count for op in model_ops(stored_spec, wl, conv) if op.name.startswith("layers.")}
    out = [replace(op, stored=stored.get(op.name, 0)) if op.name.startswith("layers.") else op for op in ops_]
    # (with one pass the gates and queries are still built: stored, never run)
    later, sources, rank = (lp.passes - 1) * lp.core, lp.core // B, lp.gate_rank
    gates = 4 * later  # q, k, v and MLP
    sliding = _stored_kinds(spec)[lp.prelude:lp.prelude + lp.core].count("local")
    logits = ops.contraction("loop.message.logits", "residual", wl, 4 * sources * D, sources * D, count=later,
                             params=4 * D, shapes=((4, D),))
    project = ops.matmul("loop.message.gate_proj", "residual", wl, rank, 2 * D, count=gates, weight_dtype="fp32",
                         parts=(D, D), tp="replicated")
    return out + [
        ops.elementwise("loop.message.key_norm", "residual", wl, sources * D, ops.RMSNORM_FLOPS - 1, count=later),
        replace(_fp32(logits), stored=lp.core),
        ops.elementwise("loop.message.softmax", "residual", wl, 4 * sources, ops.SOFTMAX_FLOPS, count=later),
        ops.contraction("loop.message.sum", "residual", wl, 4 * sources * D, (sources + 4) * D, count=later),
        ops.norm("loop.message.gate_norm", wl, D, "rmsnorm", False, weight=False, count=gates, tokens=2 * wl.tokens,
                 component="residual"),
        replace(ops.matmul("loop.message.gate_down", "residual", wl, 2 * D, rank, count=gates, tp="replicated"),
                stored=4 * lp.core),
        replace(project, stored=4 * lp.core),
        ops.elementwise("loop.message.gate", "residual", wl, D, 6, inputs=2, count=gates),  # 2 tanh, (1 − f)·h + g·m
        # the sliding core layers' input norm on the gated k and v inputs too (its weight the layer's)
        replace(ops.norm("loop.message.kv_input_norm", wl, D, spec.norm.kind, False, count=2 * (lp.passes - 1) * sliding,
                         component="norms"), params=0, active_params=0, weight_bytes=0.0),
    ]


def _shared_block_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention) -> list[Op]:
    """Zamba2's shared transformer block (SharedBlockSpec) on its n layers: the block's weights stored `blocks`
    times (Op.stored), its adapters, K/V cache and output projection once a use.  Its attention reads the layer's
    input beside the token embeddings (2D values: the concatenation is a copy); its output and MLP are not
    residual: D -> D, then added to the mixer's input."""
    sb, a, D = spec.shared_block, spec.attention, spec.d_model
    n, E, F = len(sb.layers), 2 * D, sb.d_ff
    H, K, d = a.n_heads, spec.n_kv_heads, spec.qk_head_dim
    widths = (H * d, K * d, K * d)

    def block(op: Op) -> Op:  # the shared weights
        return replace(op, stored=sb.blocks)

    out = [ops.elementwise("layers.shared.concat", "residual", wl, E, 0, count=n),
           *[block(op) for op in _norm(spec, wl, "layers.shared.attn.norm", E, count=n)],
           block(ops.matmul("layers.shared.attn.qkv", "attention", wl, E, sum(widths), count=n, tp="qkv",
                            fused_qkv=(widths[0], widths[1] + widths[2], K), parts=widths))]
    if sb.adapter_rank is not None and sb.attention_adapters:  # q, k, v each E -> r -> its width, per use
        r = sb.adapter_rank
        out += [ops.matmul("layers.shared.attn.adapter_a", "attention", wl, E, 3 * r, count=n, parts=(r,) * 3,
                           tp="replicated"),
                ops.matmul("layers.shared.attn.adapter_b", "attention", wl, r, sum(widths), count=n, parts=widths)]
    if spec.position.kind == "rope":
        out.append(_rope(wl, "layers.shared.attn.rope", (H + K) * spec.rope_dim, n))
    out += _cores(spec, wl, conv, {"global": n}, K, d, d, 2 * K * d)
    out += [block(ops.matmul("layers.shared.attn.o", "attention", wl, H * d, D, count=n, tp="row")),
            *[block(op) for op in _norm(spec, wl, "layers.shared.ffn.norm", D, count=n)]]
    mlp = [block(op) for op in _mlp(spec, wl, "layers.shared.ffn", F, n)]
    if sb.adapter_rank is not None:  # gate_up's adapter, per use: D -> r -> 2F
        r = sb.adapter_rank
        mlp[1:1] = [ops.matmul("layers.shared.ffn.adapter_a", "ffn", wl, D, r, count=n, tp="replicated"),
                    ops.matmul("layers.shared.ffn.adapter_b", "ffn", wl, r, 2 * F, count=n, parts=(F, F))]
    return out + mlp + [ops.matmul("layers.shared.proj", "residual", wl, D, D, count=n, tp="replicated"),
                        ops.elementwise("layers.shared.add", "residual", wl, D, 1, inputs=2, count=n)]


def _looped(spec: ModelSpec, wl: Workload, ops_: list[Op]) -> list[Op]:
    """A LoopSpec's layers: every layer op runs count times and stores its weights count × stored_layers /
    n_layers times (the layers' weights are alike: ModelSpec._check_loop; the cores, split by kind, have none).
    A recurrent loop: x₀, the prelude's output normed, and each pass's start, the state normed plus x₀.  A
    hierarchical one: each pass's input sum, the weightless norm ending every pass but the last (whose norm is
    the final one) and the learned initial state."""
    lp, D = spec.loop, spec.d_model
    out = [replace(op, stored=op.count * lp.stored_layers // spec.n_layers) if op.name.startswith("layers.") else op
           for op in ops_]
    out.append(ops.elementwise("loop.add", "residual", wl, D, 1, inputs=2, count=lp.passes))
    if lp.kind == "recurrent":
        return out + [ops.norm("loop.norm", wl, D, spec.norm.kind, False, weight=False, count=lp.passes + 1,
                               component="residual")]
    if lp.passes > 1:
        out.append(ops.norm("loop.norm", wl, D, "rmsnorm", False, weight=False, count=lp.passes - 1,
                            component="residual"))
    if lp.init_state:  # z_L_init, broadcast over the tokens: a copy
        out.append(replace(ops.elementwise("loop.init", "residual", wl, D, 0, params=D), shapes=((D,),)))
    return out


def _norm(spec: ModelSpec, wl: Workload, name: str, width: int, **kw) -> list[Op]:
    if spec.norm.kind == "none":
        return []
    return [ops.norm(name, wl, width, spec.norm.kind, spec.norm.bias, weight=spec.norm.weight, **kw)]


def _sublayer_norms(spec: ModelSpec, wl: Workload, prefix: str, where: str) -> list[Op]:
    """Norms around one sublayer, `where` = "before" or "after" it: one per layer that has it."""
    placement = spec.norm.placement
    L = spec.n_layers - (spec.attention_layers["none"] if prefix == "layers.attn" else spec.ffn_layers["none"])
    if not nonzero(L):  # no layer has the sublayer (a pure Mamba's FFN): no norm op, not one run 0 times
        return []
    if spec.residual.kind == "parallel":
        if where == "after":
            return []
        # One norm shared by attention and FFN, or one each, both on the same x.
        if spec.residual.parallel_norms == 1:
            return _norm(spec, wl, "layers.norm", spec.d_model, count=L) if prefix == "layers.attn" else []
    wanted = {"before": ("pre", "both"), "after": ("post", "both")}[where]
    if placement not in wanted:
        return []
    name = f"{prefix}.norm" if where == "before" else f"{prefix}.post_norm"
    if prefix == "layers.attn" and where == "before" and not spec.norm.first_layer:
        L -= 1  # ModernBERT: layer 0's mixer reads the embedding's norm
    gated = spec.ffn_layers["moe"] if prefix == "layers.ffn" else L  # A.X-K2: before attention, before MoE
    return (_norm(spec, wl, name, spec.d_model, count=L) if nonzero(L) else []) + \
        (_norm_gate(spec, wl, name, gated) if spec.norm.gate_rank is not None and nonzero(gated) else [])


def _norm_gate(spec: ModelSpec, wl: Workload, norm: str, count: int) -> list[Op]:
    """A.X-K2's gate on a norm's output y: y ⊙ sigmoid(W₂ silu(W₁ y)), W₁ D -> r and W₂ r -> D bias-free, whole
    on every rank (silu a multiply and a sigmoid, 5 FLOPs a value; the gate's sigmoid and product 5)."""
    D, r = spec.d_model, spec.norm.gate_rank
    return [ops.matmul(f"{norm}_gate.fc1", "norms", wl, D, r, count=count, tp="replicated"),
            ops.elementwise(f"{norm}_gate.act", "norms", wl, r, ops.SIGMOID_GATE_FLOPS, count=count, fn="silu"),
            ops.matmul(f"{norm}_gate.fc2", "norms", wl, r, D, count=count, tp="replicated"),
            ops.elementwise(f"{norm}_gate.gate", "norms", wl, D, ops.SIGMOID_GATE_FLOPS, inputs=2, count=count,
                            fn="sigmoid")]


# ---- embedding -------------------------------------------------------------------


def _embedding_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    D, E = spec.d_model, spec.embedding_width
    out = [ops.gather("embedding", "embedding", wl, spec.vocab_size, E)]
    if spec.drafter is not None:  # the table is never looked up (tied, it is the head); the target's embedding of
        # the token and its last hidden state come in, 2·D_target -> D
        return [replace(out[0], dims=ops.GatherDims(0, spec.vocab_size, E), weight_bytes=0, act_bytes=0),
                ops.matmul("drafter.pre_projection", "projection", wl, 2 * spec.drafter.backbone_d_model, D,
                           tp="replicated")]
    if spec.embedding_dim is not None:  # OPT-350m's project_in: E -> D, no bias
        out.append(ops.matmul("embedding.project_in", "projection", wl, E, D, tp="replicated"))
    if spec.position.kind == "learned":
        # A learned position table is whole on every TP rank (vLLM and Megatron do not split it).
        rows = spec.max_context + spec.position.offset
        out += [ops.gather("position.embedding", "position", wl, rows, D, tp="replicated"),
                ops.elementwise("position.add", "position", wl, D, 1, inputs=2)]
    if spec.norm.embedding:  # BLOOM: a LayerNorm on the embedded tokens, before layer 0
        out += _norm(spec, wl, "embedding.norm", D)
    if spec.residual.affine:  # ZAYA1: (x + c) ⊙ t on the embedded tokens
        out.append(replace(ops.elementwise("embedding.affine", "residual", wl, D, 2, params=2 * D), shapes=((D,),) * 2))
    return out


def _numel(shape: tuple[int, ...]) -> int:
    out = 1
    for dim in shape:
        out *= dim
    return out


# ---- attention -------------------------------------------------------------------


def _attention_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention) -> list[Op]:
    out = _sublayer_norms(spec, wl, "layers.attn", "before")  # every layer's mixer, attention or linear
    kinds = spec.attention_layers
    if nonzero(spec.n_layers - kinds["linear"] - kinds["none"]):
        out += _softmax_attention_ops(spec, wl, conv)
    if spec.linear is not None and nonzero(spec.linear_mixer_layers):
        out += _linear_attention_ops(spec, wl, conv)
    return out + _sublayer_norms(spec, wl, "layers.attn", "after")


def _softmax_attention_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention) -> list[Op]:
    """The L softmax-attention layers (every layer but the linear ones)."""
    a, D = spec.attention, spec.d_model
    L = spec.n_layers - spec.attention_layers["linear"] - spec.attention_layers["none"]
    H, K, dk, dv = a.n_heads, spec.n_kv_heads, spec.qk_head_dim, spec.v_head_dim
    out = []

    if a.compressed is not None:  # DeepSeek-V4's own layout (ops/compressed.py)
        from archcalc.ops.compressed import compressed_attention_ops
        return out + compressed_attention_ops(spec, wl, conv)
    if a.kind == "mla" and a.local_mla is not None:  # dots3-note: two geometries, each with its own ops
        return out + _two_geometry_mla_ops(spec, wl, conv)
    if a.kind == "mla":
        out += _mla_projections(spec, wl, a.mla_geometry(), L, "")
        kv_width = a.kv_lora_rank + a.qk_rope_head_dim
        rotated = (H + 1) * spec.rope_dim  # every query head and the one shared rope key
        if a.indexer is not None:  # on the global layers (every layer but sliding ones, AttentionSpec)
            out += _indexer_ops(spec, wl, conv, spec.attention_layers["global"] - len(a.indexer.shared_layers or ()))
    else:
        if a.grouped:
            return out + _grouped_attention_ops(spec, wl, conv)
        # Q, K and V as one fused projection: D -> (H + 2K)·d_k; biases where listed.  An output
        # gate doubles q_proj: each head's query and its gate (Qwen3-Next).
        if a.experts is not None:
            out += _attention_experts_in(spec, wl, L, H * dk, K * (dk + dv))
        elif a.cca is not None:
            out += _cca_ops(spec, wl, L, H, K, dk)
        else:
            out += _qkv(spec, wl, "layers.attn.qkv", L, H * dk * (2 if a.output_gate and not a.separate_gate else 1),
                        K, dk, dv)
        if a.qk_norm == "head":
            out += _head_norms(spec, wl, "", L, H, K, dk, dv)
        elif a.qk_norm == "full":
            out += _norm(spec, wl, "layers.attn.q_norm", H * dk, count=L)
            out += _norm(spec, wl, "layers.attn.k_norm", K * dk, count=L)
        elif a.qk_norm in ("l2", "clip"):
            # weightless, per head: Llama 4's on the RoPE layers; Inkling 2's L2 clip (a norm, a min and a scale,
            # costed as a weightless RMSNorm's kernel) on every layer, and its values' weightless RMSNorm
            layers = spec.rope_layers if a.qk_norm == "l2" else L
            for name, heads, width in (("q", H, dk), ("k", K, dk), *([("v", K, dv)] if a.v_norm else [])):
                if nonzero(layers):
                    out.append(ops.norm(f"layers.attn.{name}_norm", wl, width, "rmsnorm", False, weight=False,
                                        count=layers, tokens=wl.tokens * heads))
        if a.key_scale:  # ZAYA1's temp: each KV head's keys times its learned scalar
            out.append(replace(_learned_vector("layers.attn.key_scale", "norms", wl, K * dk, L, tp="split"),
                               params=K, active_params=K, shapes=((K,),)))  # a part of the qk norm (ZayaQKNorm)
        kv_width = K * (dk + dv)
        rotated = (H + K) * spec.rope_dim
        attending = {k: n for k, n in spec.attention_layers.items() if k in ("global", "local", "chunked")}
        out += _conv_and_relative_ops(spec, wl, "", attending, H, K, dk, dv)

    if spec.position.kind == "rope":
        rope_layers = spec.rope_layers
        if nonzero(rope_layers):
            out.append(_rope(wl, "layers.attn.rope", rotated, rope_layers))
    if a.query_scale:  # the queries times a learned H·d_k vector (nGPT's s_qk, squared, after RoPE; Inkling 2's)
        out.append(_learned_vector("layers.attn.q_scale", "attention", wl, H * dk, L, tp="split"))
    if a.sink_proj:  # Inkling 2: each head's sink logit a token from the layer's input (the core's sink column)
        out.append(ops.matmul("layers.attn.sink_proj", "attention", wl, D, H, count=L))
    if a.dynamic_mask is not None:
        out += _dynamic_mask_ops(spec, wl, L, K, dv)
    unwritten = _unwritten_runs(spec)
    cores = _cores(spec, wl, conv, {k: n - unwritten.get(k, 0) for k, n in spec.attention_layers.items()}, K, dk, dv,
                   kv_width) + (_cores(spec, wl, conv, unwritten, K, dk, dv, kv_width, shared=True) if unwritten else [])
    out += cores if not a.differential else _differential(spec, wl, cores, L, H, dv)
    if a.separate_gate:  # HY-V4: the gate's own projection
        out.append(ops.matmul("layers.attn.gate_proj", "attention", wl, D, H * dv, count=L))
    if a.output_gate:
        out.append(_output_gate(spec, wl, H, dv, L))
    if a.indexer is not None and a.indexer.kind == "block":
        out += _block_indexer_ops(spec, wl, conv)
    if a.head_gate is not None:
        out += _head_gate(spec, wl, "", H, dv, L)
    if a.sub_norm:  # BitNet: over all heads' output (split with the heads under TP, its statistics all-reduced)
        out += _norm(spec, wl, "layers.attn.sub_norm", H * dv, count=L, tp="split")
    if a.experts is not None:
        return out + _attention_experts_out(spec, wl, L, H * dv)
    out.append(_out_proj(spec, wl, "layers.attn.o", H * dv, L))
    if a.o_bias_layers:  # GPT-NeoX-Japanese: o_proj's bias on some layers only, added after it (whole on every rank)
        out.append(_added_bias("layers.attn.o_bias", "attention", wl, D, len(set(a.o_bias_layers))))
    return out


# dt = exp(A ⊙ softplus(x)): softplus's exp, add and log, the multiply, the exp
DYNAMIC_MASK_FLOPS = 5


def _dynamic_mask_ops(spec: ModelSpec, wl: Workload, L: int, K: int, dv: int) -> list[Op]:
    """Doge's key scores: W_dt (K·d_v -> K) over the values of every key in the context, at every step, as
    transformers runs it after the cache update (B·S rows, not B·T), then exp(A ⊙ softplus(·)) per head.  The
    top-keep selection and the mask are not counted; the cores are counted dense, as computed."""
    m, bias = wl.batch * wl.context, spec.attention.dynamic_mask.bias
    dt = ops.elementwise("layers.attn.dt", "attention", wl, K, DYNAMIC_MASK_FLOPS, count=L, tokens=m, params=K,
                         tp="replicated")
    return [ops.matmul("layers.attn.dt_proj", "attention", wl, K * dv, K, bias_width=K if bias else 0, count=L,
                       tokens=m, tp="replicated"), replace(dt, shapes=((K,),))]


def _added_bias(name: str, component: ops.Component, wl: Workload, width: int, count: int) -> Op:
    """A learned vector of `width` added to an output on its own (not a projection's bias): one FLOP a value,
    whole on every rank."""
    return _learned_vector(name, component, wl, width, count)


def _learned_vector(name: str, component: ops.Component, wl: Workload, width: int, count: int, *,
                    tp: ops.Sharding = "replicated", tokens: int | None = None, parts: int = 1) -> Op:
    """A learned vector of `width` (`parts` tensors of width / parts) applied to as many values a token, added or
    multiplied (nGPT's scales: the vector's square or |·| is taken over the parameters, not the tokens): one FLOP
    a value."""
    op = ops.elementwise(name, component, wl, width, 1, count=count, params=width, tp=tp, tokens=tokens)
    return replace(op, shapes=((width // parts,),) * parts)


def _unwritten_runs(spec: ModelSpec) -> dict[str, int]:
    """A recurrent loop with cache last_pass: the core layers' runs before the last pass, by kind.  Each reads
    its layer's cache beside its own new keys and writes nothing (Dory's last_loop: DoryAttention's
    shared_kv_states), so its core is counted as a shared layer's."""
    lp = spec.loop
    if lp is None or lp.cache != "last_pass":
        return {}
    runs = spec.layer_attention[lp.prelude:lp.prelude + (lp.passes - 1) * lp.core]
    return {kind: runs.count(kind) for kind in set(runs)}


def _learned_scalar(name: str, component: ops.Component, wl: Workload, width: int, count: int) -> Op:
    """One learned scalar times `width` values (Inkling's global_scale): one parameter, one FLOP a value."""
    return replace(ops.elementwise(name, component, wl, width, 1, count=count, params=1), shapes=((1,),))


def _cca_ops(spec: ModelSpec, wl: Workload, L: int, H: int, K: int, d: int) -> list[Op]:
    """ZAYA1's CCA projections (CCASpec) in L layers: q, k and V's two halves in one fused projection; the
    depthwise conv over the H + K heads' q and k values (C = (H + K)·d channels, `depthwise` taps and a bias each)
    and the grouped conv (each head's d -> d a tap, `grouped` taps, a bias), counted for the T outputs a step needs
    (a stack of two convs run on cached inputs recomputes grouped − 1 depthwise outputs more: transformers does);
    the residual mix ((q + k) / 2, its group mean, each added to the convs' outputs: ~3 FLOPs a value); and the
    state a sequence keeps beside its KV cache: the convs' last inputs and the previous token's delayed V half."""
    cca, C = spec.attention.cca, (H + K) * d
    half = K * d // 2
    qkv = _qkv(spec, wl, "layers.attn.qkv", L, H * d, K, d, d)[0]
    v_bias = ((half,),) * 2 if "v" in spec.attention.bias else ()  # v_proj_current's and v_proj_delayed's
    shapes = ((H * d, spec.d_model), (K * d, spec.d_model), (half, spec.d_model), (half, spec.d_model),
              *[(w,) for p, w in (("q", H * d), ("k", K * d)) if p in spec.attention.bias], *v_bias)
    return [replace(qkv, shapes=shapes),
            ops.contraction("layers.attn.cca.depthwise", "attention", wl, C * cca.depthwise, 2 * C, count=L,
                            params=C * (cca.depthwise + 1), shapes=((C, 1, cca.depthwise), (C,)), tp="split"),
            ops.contraction("layers.attn.cca.grouped", "attention", wl, C * d * cca.grouped, 2 * C, count=L,
                            params=C * (d * cca.grouped + 1), shapes=((C, d, cca.grouped), (C,)), tp="split"),
            ops.elementwise("layers.attn.cca.mix", "attention", wl, C, 3, inputs=2, count=L, tp="split"),
            ops.conv_inputs("layers.attn.cca.state", wl, 2 * K * d, conv_values=C * cca.state_inputs + half, count=L)]


def _attention_experts_in(spec: ModelSpec, wl: Workload, L: int, q_width: int, kv_width: int) -> list[Op]:
    """JetMoE's mixture of attention heads, before the core: a router D -> E (scored in full, top_k kept), each
    token's query from its top_k experts' q projections (D -> q_width / top_k each: all its heads together),
    and K and V from one D -> kv_width projection (transformers' kv_proj, no bias)."""
    e, D = spec.attention.experts, spec.d_model
    return [ops.matmul("layers.attn.router", "router", wl, D, e.n_experts, count=L, quantizable=False,
                       tp="replicated"),
            ops.expert_matmul("layers.attn.q_experts", wl, D, q_width // e.top_k, e.n_experts, e.top_k, bias=False,
                              count=L, component="attention"),
            ops.matmul("layers.attn.kv", "attention", wl, D, kv_width, count=L, parts=(kv_width // 2,) * 2)]


def _attention_experts_out(spec: ModelSpec, wl: Workload, L: int, width: int) -> list[Op]:
    """After the core: each of the top_k experts' o projections over its own heads (width / top_k -> D), their
    outputs weighted and summed (a multiply and an add a value each), and the "o" bias added once."""
    e, D = spec.attention.experts, spec.d_model
    out = [ops.expert_matmul("layers.attn.o_experts", wl, width // e.top_k, D, e.n_experts, e.top_k, bias=False,
                             count=L, tp="row", component="attention"),
           ops.elementwise("layers.attn.combine", "attention", wl, D, 2 * e.top_k, inputs=e.top_k, count=L)]
    return out + ([_added_bias("layers.attn.o_bias", "attention", wl, D, L)] if "o" in spec.attention.bias else [])


def _qkv(spec: ModelSpec, wl: Workload, name: str, L: int, q: int, K: int, dk: int, dv: int, *,
         kv: bool = True, v: bool = True) -> list[Op]:
    """The fused projection of L layers: q query values, then K heads of keys (and of values, unless `v`
    is false: V is the key projection's output) where the layers compute K and V (`kv`)."""
    a, D = spec.attention, spec.d_model
    widths = {"q": q, **({"k": K * dk, **({"v": K * dv} if v else {})} if kv else {})}
    bias = sum(w for p, w in widths.items() if p in a.bias)
    fused = (q, widths.get("k", 0) + widths.get("v", 0), K) if kv else None
    qkv = ops.matmul(name, "attention", wl, D, sum(widths.values()), bias_width=bias, count=L,
                     tp="qkv" if kv else "split", fused_qkv=fused, parts=tuple(widths.values()) if kv else ())
    # One [out, D] weight per projection and a bias on the parts that have one.
    return [replace(qkv, shapes=tuple((w, D) for w in widths.values())
                    + tuple((w,) for p, w in widths.items() if p in a.bias))]


def _head_norms(spec: ModelSpec, wl: Workload, suffix: str, L: int, H: int, K: int, dk: int, dv: int, *,
                kv: bool = True) -> list[Op]:
    """qk_norm "head": one norm of d_k shared by all heads, rows (token, head); v_norm: a weightless
    one over each value head.  Layers that reuse K/V (`kv` false) normalise only their queries."""
    out = _norm(spec, wl, f"layers.attn.q_norm{suffix}", dk, count=L, tokens=wl.tokens * H)
    if kv:
        out += _norm(spec, wl, f"layers.attn.k_norm{suffix}", dk, count=L, tokens=wl.tokens * K)
        if spec.attention.v_norm:
            out.append(ops.norm(f"layers.attn.v_norm{suffix}", wl, dv, "rmsnorm", False, weight=False, count=L,
                                tokens=wl.tokens * K))
    return out


def _rope(wl: Workload, name: str, rotated: int, layers: int, tp: str = "split") -> Op:
    """RoPE over `rotated` values a token (query and key heads' rotated dims) in `layers` layers."""
    return ops.elementwise(name, "position", wl, rotated, ops.ROPE_FLOPS, count=layers, tp=tp, fn="rope")


def _cores(spec: ModelSpec, wl: Workload, conv: FlopsConvention, kinds: dict[str, int], K: int, dk: int, dv: int,
           kv_width: int, shared: bool = False, n_heads: int | None = None) -> list[Op]:
    """The attention core of each kind of layer in `kinds`: named by kind where the model has several
    (core.global, core.local), ".shared" for layers that read earlier layers' K/V."""
    a = spec.attention
    windows = {"global": None, "local": a.sliding_window, "chunked": a.chunk_size}
    several = sum(bool(nonzero(n)) for k, n in spec.attention_layers.items() if k in windows) > 1
    H = n_heads or a.n_heads
    return [ops.attention(
        "layers.attn.core" + f".{kind}" * several + ".shared" * shared, wl, conv,
        n_heads=H, kv_heads=K, qk_dim=dk, v_dim=dv, kv_width=kv_width,
        # (a block indexer's selection is not credited: its layers' cores are counted dense, an upper bound)
        window=windows[kind], layer_kind=kind,
        topk=a.indexer.topk if a.indexer and a.indexer.kind == "dsa" and kind == "global" else None,
        softcap=a.softcap is not None, count=kinds[kind],
        params=H if a.sinks and (kind != "global" or a.global_sinks) else 0,
        eager=a.softcap is not None,  # transformers runs soft-capped attention eagerly (no SDPA option)
        shared=shared, drafted=spec.drafter is not None)
        for kind in windows if nonzero(kinds.get(kind, 0))]


def _fp32(op: Op) -> Op:
    """The op's weights kept in fp32 whatever the model's dtype (Inkling's short convs and router scale: transformers'
    _keep_in_fp32_modules_strict): no checkpoint format quantizes them."""
    return replace(op, stored_dtype="fp32", quantizable=False, weight_bytes=nbytes(op.params, "fp32"))


def _short_conv(name: str, component: ops.Component, wl: Workload, channels: int, kernel: int, count: int,
                tp: ops.Sharding, fp32: bool = True) -> list[Op]:
    """A depthwise causal conv of `kernel` taps over `channels` with its own skip, y = x + conv(x) (Inkling's
    InklingShortConvolution): its taps (fp32, or with `fp32` false at the model's dtype: Inkling 2's dynamic convs'
    static taps, which transformers does not keep in fp32), 2·kernel FLOPs a value, then the add."""
    conv = ops.contraction(name, component, wl, channels * kernel, 2 * channels, count=count, tp=tp,
                           params=channels * kernel, shapes=((channels, 1, kernel),))
    return [_fp32(conv) if fp32 else conv,
            ops.elementwise(name + "_add", component, wl, channels, 1, inputs=2, count=count, tp=tp)]


def _conv_and_relative_ops(spec: ModelSpec, wl: Workload, suffix: str, kinds: dict[str, int], H: int, K: int,
                           dk: int, dv: int) -> list[Op]:
    """Inkling's parts of the attention of the layers in `kinds` (H query heads, K KV heads): the short convs on K
    and V (attention.kv_conv); the relative logits (attention.relative): r_proj D -> H·rank, and each query head's
    rank values times its layer's rank × extent profiles (a sliding layer's extent its window: 2·rank·extent
    FLOPs a head and token, split with the heads under TP; the gathered bias added to the scores is elementwise,
    not counted); and the per-sequence state of every short conv in those layers, kv_conv's and
    residual.output_conv's (their last kernel − 1 inputs: a fixed state beside the KV cache, one layer each)."""
    a, D, L = spec.attention, spec.d_model, sum(kinds.values())
    out = []
    dynamic = kinds.get("global", 0) if a.dynamic_kv_conv else 0
    if a.kv_conv is not None and nonzero(L - dynamic):
        out += _short_conv(f"layers.attn.kv_conv{suffix}", "attention", wl, K * (dk + dv), a.kv_conv, L - dynamic,
                           "split")
    if nonzero(dynamic):
        # Inkling 2's global layers: the static taps plus per-token ones, one set a KV head, from the input of K's
        # projection and of V's (D -> K·kernel each)
        out += _short_conv(f"layers.attn.kv_conv_dynamic{suffix}", "attention", wl, K * (dk + dv), a.kv_conv,
                           dynamic, "split", fp32=False)
        out.append(ops.matmul(f"layers.attn.kv_conv_taps{suffix}", "attention", wl, D, 2 * K * a.kv_conv,
                              count=dynamic, parts=(K * a.kv_conv,) * 2))
    if a.relative is not None:
        rank = a.relative.rank
        out.append(ops.matmul(f"layers.attn.rel_proj{suffix}", "attention", wl, D, H * rank, count=L))
        if a.relative.scale:  # Inkling 2: the projected states times a learned H × rank scale, then an L2 clip
            scale = _learned_vector(f"layers.attn.rel_scale{suffix}", "attention", wl, H * rank, L, tp="split")
            out += [replace(scale, shapes=((H, rank),)),
                    ops.norm(f"layers.attn.rel_clip{suffix}", wl, rank, "rmsnorm", False, weight=False, count=L,
                             tokens=wl.tokens * H, component="attention", tp="split")]
        for kind, n in kinds.items():
            if not nonzero(n):
                continue
            extent = a.sliding_window if kind == "local" else a.relative.extent
            rel = ops.matmul(f"layers.attn.rel.{kind}", "attention", wl, rank, extent, count=n, tokens=wl.tokens * H,
                             quantizable=False)  # a table (an nn.Parameter), not a linear layer: kept at 16 bits
            out.append(replace(rel, shapes=((rank, extent),)))
    if a.kv_conv is not None or spec.residual.output_conv is not None:
        state = (K * (dk + dv) * (a.kv_conv - 1) if a.kv_conv is not None else 0) + (
            2 * D * (spec.residual.output_conv - 1) if spec.residual.output_conv is not None else 0)
        out.append(ops.conv_inputs(f"layers.attn.conv_state{suffix}", wl, K * (dk + dv), conv_values=state, count=L))
    return out


# the gate's activation, once a head: softplus log(1 + exp(g)) (exp, add, log); sigmoid (neg, exp, add, divide)
HEAD_GATE_FLOPS = {"softplus": 3, "sigmoid": 4}


def _head_gate(spec: ModelSpec, wl: Workload, suffix: str, H: int, d: int, L: int) -> list[Op]:
    """A per-head gate (Laguna's softplus, LFM3's sigmoid): g_proj D -> H, its activation once a head, and each
    head's d outputs times it (a product of two tensors, timed as the elementwise kernel of two inputs)."""
    gate = ops.elementwise(f"layers.attn.head_gate{suffix}", "attention", wl, H * d, 1, inputs=2, count=L, tp="split")
    act = HEAD_GATE_FLOPS[spec.attention.head_gate]
    return [ops.matmul(f"layers.attn.gate_proj{suffix}", "attention", wl, spec.d_model, H, count=L),
            replace(gate, vector_flops=gate.vector_flops + act * wl.tokens * H)]


def _output_gate(spec: ModelSpec, wl: Workload, H: int, d: int, L: int) -> Op:
    """sigmoid(gate) ⊙ each head's d outputs (the gate's projection is in q_proj's, Qwen3-Next); with gate_bias,
    one bias a head added first (Beam): H parameters and one more FLOP a value; with gate_scale, the gate times
    a learned H·d vector squared first (Dory's s_gate): H·d parameters and one more FLOP a value."""
    a = spec.attention
    return _sigmoid_gate("layers.attn.gate", "attention", wl, H * d, L,
                         bias=H if a.gate_bias else H * d if a.gate_scale else 0)


def _differential(spec: ModelSpec, wl: Workload, cores: list[Op], L: int, H: int, d: int) -> list[Op]:
    """DiffLlama's differential attention after its cores: each core runs twice (transformers' DiffLlamaAttention
    calls attention once per half of the value heads, scores and all); then out₁ − λ·out₂ over the H/2 pairs of
    heads (a multiply and a subtract per value; the 4 λ vectors of d its parameters) and a weightless RMSNorm
    over each pair's 2·d values, scaled by 1 − λ_init (one more FLOP a value)."""
    twice = [replace(c, flops=2 * c.flops, vector_flops=2 * c.vector_flops, act_bytes=2 * c.act_bytes) for c in cores]
    combine = replace(ops.elementwise("layers.attn.diff", "attention", wl, H * d, 2, inputs=2, count=L, params=4 * d,
                                      tp="split"), shapes=((d,),) * 4)
    norm = ops.norm("layers.attn.diff_norm", wl, 2 * d, "rmsnorm", False, weight=False, count=L,
                    tokens=wl.tokens * H // 2, tp="split")
    return [*twice, combine, replace(norm, vector_flops=norm.vector_flops + wl.tokens * H * d)]


def _out_proj(spec: ModelSpec, wl: Workload, name: str, width: int, L: int) -> Op:
    D = spec.d_model
    return ops.matmul(name, "attention", wl, width, D, bias_width=D if "o" in spec.attention.bias else 0, count=L,
                      tp="row")


def _grouped_attention_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention) -> list[Op]:
    """Attention whose layers differ in shape (AttentionSpec.grouped, Gemma 4): the ops of each
    ModelSpec.attention_groups group, named with its suffix.  Layers that reuse K/V project only queries
    and rotate only them; their cores read the earlier layer's cache and keep none."""
    a = spec.attention
    out = []
    for g in spec.attention_groups:
        L, d, dv, H = sum(g.kinds.values()), g.head_dim, g.v_head_dim, g.n_heads
        kv = not g.shared
        out += _qkv(spec, wl, ("layers.attn.qkv" if kv else "layers.attn.q") + g.suffix, L, H * d, g.kv_heads, d, dv,
                    kv=kv, v=not g.k_eq_v)
        if a.qk_norm == "head":
            out += _head_norms(spec, wl, g.suffix, L, H, g.kv_heads, d, dv, kv=kv)
        out += _conv_and_relative_ops(spec, wl, g.suffix, g.kinds, H, g.kv_heads, d, dv)
        if spec.position.kind == "rope":
            p = spec.position
            local = "local" in g.kinds and p.local_rotary_fraction is not None  # (a group of local layers alone)
            rope_dim = floor_int(d * (p.local_rotary_fraction if local else p.rotary_fraction))
            out.append(_rope(wl, f"layers.attn.rope{g.suffix}", (H + g.kv_heads * kv) * rope_dim, L))
        out += _cores(spec, wl, conv, g.kinds, g.kv_heads, d, dv, g.kv_heads * (d + dv), shared=g.shared, n_heads=H)
        if a.head_gate is not None:
            out += _head_gate(spec, wl, g.suffix, H, dv, L)
        out.append(_out_proj(spec, wl, f"layers.attn.o{g.suffix}", H * dv, L))
    return out


def _mla_projections(spec: ModelSpec, wl: Workload, g: MLAGeometry, L: int, suffix: str) -> list[Op]:
    """MLA's projections and latent norms in `L` layers of geometry `g`.  The latent norms are part of the
    mechanism: RMSNorm whatever norm.kind says (as in HF).  The query: each head's nope + rope dims, and with an
    output gate its d_v gate values (A.X-K2's q_gate_proj)."""
    a, D, H = spec.attention, spec.d_model, g.n_heads
    q_width = H * (g.qk_nope_head_dim + g.qk_rope_head_dim + (g.v_head_dim if a.output_gate and not a.separate_gate
                                                                else 0))
    if g.q_lora_rank is not None:
        q_in = g.q_lora_rank * (2 if a.q_lora_concat else 1)  # A.X-K2: [normed latent, latent]
        out = [ops.matmul(f"layers.attn.q_a{suffix}", "attention", wl, D, g.q_lora_rank, count=L, tp="replicated"),
               ops.norm(f"layers.attn.q_a_norm{suffix}", wl, g.q_lora_rank, "rmsnorm", False, count=L),
               ops.matmul(f"layers.attn.q_b{suffix}", "attention", wl, q_in, q_width, count=L)]
    else:
        out = [ops.matmul(f"layers.attn.q{suffix}", "attention", wl, D, q_width, count=L)]
    out += [
        # One D -> latent + shared rope key projection; the latent is what the cache keeps.
        ops.matmul(f"layers.attn.kv_a{suffix}", "attention", wl, D, g.kv_lora_rank + g.qk_rope_head_dim, count=L,
                   tp="replicated"),
        ops.norm(f"layers.attn.kv_a_norm{suffix}", wl, g.kv_lora_rank, "rmsnorm", False, count=L),
        # Latent -> per-head K (nope part) and V: the non-absorbed form, as HF runs it.
        ops.matmul(f"layers.attn.kv_b{suffix}", "attention", wl, g.kv_lora_rank, H * (g.qk_nope_head_dim + g.v_head_dim),
                   count=L),
    ]
    if a.rope_key_norm:  # dots3-note's k_rope_only_layernorm: over the one shared rope key (replicated, as kv_a)
        out.append(ops.norm(f"layers.attn.k_rope_norm{suffix}", wl, g.qk_rope_head_dim, "rmsnorm", False, count=L))
    return out


def _two_geometry_mla_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention) -> list[Op]:
    """MLA whose sliding layers have widths of their own (AttentionSpec.local_mla, dots3-note): each kind's
    projections, RoPE, core, head gate and output projection, named with its suffix; the indexer on the global
    layers only (transformers' indexed_attention layers)."""
    a, kinds = spec.attention, spec.attention_layers
    out = []
    for kind, suffix in (("global", ".global"), ("local", ".local")):
        L = kinds[kind]
        if not nonzero(L):
            continue
        g = a.mla_geometry(local=kind == "local")
        out += _mla_projections(spec, wl, g, L, suffix)
        if kind == "global" and a.indexer is not None:
            out += _indexer_ops(spec, wl, conv, L - len(a.indexer.shared_layers or ()))
        rotating = sum(r for r, k in zip(spec.layer_rope, spec.layer_attention) if k == kind)  # (NoPE layers apart)
        if rotating:
            out.append(_rope(wl, f"layers.attn.rope{suffix}", (g.n_heads + 1) * g.qk_rope_head_dim, rotating))
        out += _cores(spec, wl, conv, {kind: L}, 1, g.qk_nope_head_dim + g.qk_rope_head_dim, g.v_head_dim,
                      g.kv_lora_rank + g.qk_rope_head_dim, n_heads=g.n_heads)
        if a.head_gate is not None:
            out += _head_gate(spec, wl, suffix, g.n_heads, g.v_head_dim, L)
        out.append(_out_proj(spec, wl, f"layers.attn.o{suffix}", g.n_heads * g.v_head_dim, L))
    return out


def _indexer_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention, L: int) -> list[Op]:
    """DeepSeek Sparse Attention's indexer (IndexerSpec), as transformers' DeepseekV32Indexer runs it.
    Its scoring is an attention over every earlier key: Σ_h w_h · relu(q_h · k) costs 2·head_dim FLOPs
    per head for q·k and 2 per head for the weighted sum, i.e. an attention of n_heads heads over one
    shared key of head_dim with a value of width 1; its cache is that key, head_dim values per token
    (layer kind "indexer": every token kept, as in a global layer).  Its queries' and key's first
    qk_rope_head_dim dims are rotated.  `L` layers have one (not the indexer's shared_layers).
    All four projections are replicated under TP (vLLM: ReplicatedLinear), and so is their RoPE."""
    a, D = spec.attention, spec.d_model
    ix = a.indexer
    rope = [_rope(wl, "layers.attn.rope.indexer", (ix.n_heads + 1) * a.qk_rope_head_dim, L, tp="replicated")]
    return rope * (spec.position.kind == "rope") + [
        ops.matmul("layers.attn.indexer.q", "attention", wl, a.q_lora_rank, ix.n_heads * ix.head_dim, count=L,
                   tp="replicated"),
        ops.matmul("layers.attn.indexer.k", "attention", wl, D, ix.head_dim, count=L, tp="replicated"),
        ops.norm("layers.attn.indexer.k_norm", wl, ix.head_dim, "layernorm", True, count=L),
        ops.matmul("layers.attn.indexer.weights", "attention", wl, D, ix.n_heads, count=L, tp="replicated"),
        ops.attention("layers.attn.indexer.core", wl, conv, n_heads=ix.n_heads, kv_heads=1, qk_dim=ix.head_dim, v_dim=1,
                      kv_width=ix.head_dim, window=None, layer_kind="indexer", count=L),
    ]


def _block_indexer_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention) -> list[Op]:
    """MiniMax-M3's block indexer (IndexerSpec kind block) on its layers, as transformers' MiniMaxM3VLIndexer
    runs it: q D -> n_heads·head_dim and k D -> head_dim, each RMS-normed per head and rotated on the main
    attention's rotary dims; q·k against every earlier key (an attention of n_heads heads over one key with no
    value); the max-pool and top-k elementwise.  Its key is cached (layer kind "indexer").  Replicated under TP."""
    a, D, p = spec.attention, spec.d_model, spec.position
    ix = a.indexer
    L = len(ix.layers) if ix.layers is not None else spec.n_layers
    rope = [_rope(wl, "layers.attn.rope.indexer", (ix.n_heads + 1) * min(spec.rope_dim, ix.head_dim), L,
                  tp="replicated")] * (p.kind == "rope")
    return [
        ops.matmul("layers.attn.indexer.q", "attention", wl, D, ix.n_heads * ix.head_dim, count=L, tp="replicated"),
        ops.matmul("layers.attn.indexer.k", "attention", wl, D, ix.head_dim, count=L, tp="replicated"),
        *_norm(spec, wl, "layers.attn.indexer.q_norm", ix.head_dim, count=L, tokens=wl.tokens * ix.n_heads),
        *_norm(spec, wl, "layers.attn.indexer.k_norm", ix.head_dim, count=L),
        *rope,
        ops.attention("layers.attn.indexer.core", wl, conv, n_heads=ix.n_heads, kv_heads=1, qk_dim=ix.head_dim,
                      v_dim=0, kv_width=ix.head_dim, window=None, layer_kind="indexer", count=L),
    ]


def _linear_attention_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention) -> list[Op]:
    if spec.linear.kind == "short_conv":
        return _short_conv_ops(spec, wl)
    if spec.linear.kind == "mamba":
        return _mamba_ops(spec, wl)
    if spec.linear.kind == "mamba2":
        return _mamba2_ops(spec, wl, conv)
    if spec.linear.kind == "lightning":
        return _lightning_ops(spec, wl, conv)
    if spec.linear.kind == "kda":
        return _kda_ops(spec, wl, conv)
    if spec.linear.kind == "mlstm":
        return _mlstm_ops(spec, wl, conv)
    if spec.linear.kind == "rglru":
        return _rglru_ops(spec, wl)
    if spec.linear.kind == "rwkv4":
        return _rwkv_ops(spec, wl)
    return _gated_deltanet_ops(spec, wl)


def _token_shift(name: str, component: ops.Component, wl: Workload, D: int, mixes: int, count: int) -> Op:
    """RWKV's token shift: `mixes` learned D-vectors each mixing the input with the previous token's
    (x·μ + x₋₁·(1 − μ): 3 FLOPs a value a mix)."""
    shift = ops.elementwise(name, component, wl, D, 3 * mixes, inputs=2, count=count, params=mixes * D, tp="replicated")
    return replace(shift, shapes=((1, 1, D),) * mixes)


def _rwkv_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    """RWKV-4's time mix on the linear layers (RWKVSpec), as transformers' RwkvSelfAttention: the token shift of
    key, value and receptance's inputs, their projections, the WKV, sigmoid(r) ⊙ it, the output."""
    D, n = spec.d_model, spec.linear_mixer_layers
    return [
        _token_shift("layers.linear.shift", "linear", wl, D, 3, n),
        ops.matmul("layers.linear.in_proj", "linear", wl, D, 3 * D, count=n, parts=(D, D, D)),  # key, value, receptance
        replace(ops.rwkv_wkv("layers.linear.core", wl, width=D, conv_values=2 * D, count=n), shapes=((D,), (D,))),
        _sigmoid_gate("layers.linear.gate", "linear", wl, D, n),
        ops.matmul("layers.linear.out_proj", "linear", wl, D, D, count=n, tp="row"),
    ]


def _rglru_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    """Griffin's recurrent block on the linear layers (RGLRUSpec), as transformers' RecurrentGemmaRecurrentBlock:
    x and y from the input (biased), the causal conv on x, the RG-LRU's two block-diagonal gates (a
    batched matmul of H blocks, W/H -> W/H each, biased: counted as a W/H -> 2W matmul, the same FLOPs and
    weights), the scan, GELU(y) ⊙ it, the output."""
    m, D, n = spec.linear, spec.d_model, spec.linear_mixer_layers
    W, H, K = m.width, m.n_heads, m.conv_kernel
    block = W // H
    # Block-diagonal 3-D tensors, not linear layers: fp8 and GPTQ/AWQ checkpoints keep them (not quantizable)
    gates = ops.matmul("layers.linear.lru_gates", "linear", wl, block, 2 * W, bias_width=2 * W, count=n,
                       quantizable=False)
    return [
        ops.matmul("layers.linear.in_proj", "linear", wl, D, 2 * W, bias_width=2 * W, count=n, parts=(W, W)),  # x, y
        ops.contraction("layers.linear.conv", "linear", wl, W * K, 2 * W, count=n, tp="split", params=W * K + W,
                        shapes=((W, 1, K), (W,))),
        replace(gates, shapes=((H, block, block),) * 2 + ((H, block),) * 2),  # input and recurrence gates
        replace(ops.real_gated_lru("layers.linear.core", wl, width=W, conv_values=W * (K - 1), count=n),
                shapes=((W,),)),
        # GELU(y) ⊙ the recurrence: the gated activation's kernel of two inputs
        ops.elementwise("layers.linear.gate", "linear", wl, W, ops.ACTIVATION_FLOPS["gelu"] + ops.GATE_PRODUCT_FLOPS,
                        inputs=2, count=n, tp="split", fn="gelu"),
        ops.matmul("layers.linear.out_proj", "linear", wl, W, D, bias_width=D, count=n, tp="row"),
    ]


def _mlstm_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention) -> list[Op]:
    """xLSTM's mLSTM on the linear layers (MLSTMSpec), as transformers' xLSTMLayer: q, k, v and the output
    gate from x, the input and forget gates (biased; soft-capped, elementwise, in the core), the core, a
    LayerNorm over each head's values (each head its own weight), times sigmoid(output gate), out_proj."""
    m, D, n = spec.linear, spec.d_model, spec.linear_mixer_layers
    H, Kd, Vd = m.n_heads, m.qk_dim, m.v_dim
    norm = ops.norm("layers.linear.norm", wl, m.value_head_dim, "layernorm", False, count=n, tokens=wl.tokens * H,
                    component="linear", tp="split")
    return [
        ops.matmul("layers.linear.in_proj", "linear", wl, D, 2 * Kd + 2 * Vd, count=n,  # q, k, v, the output gate
                   parts=() if m.fused_projections else (Kd, Kd, Vd, Vd)),
        ops.matmul("layers.linear.gates", "linear", wl, D, 2 * H, bias_width=2 * H, count=n,  # input and forget
                   parts=() if m.fused_projections else (H, H)),
        ops.matrix_lstm("layers.linear.core", wl, conv, n_heads=H, key_dim=m.key_head_dim, value_dim=m.value_head_dim,
                        chunk=m.chunk, count=n),
        replace(norm, params=Vd, active_params=Vd, weight_bytes=norm.weight_bytes * H, shapes=((Vd,),)),
        _sigmoid_gate("layers.linear.gate", "linear", wl, Vd, n),
        ops.matmul("layers.linear.out_proj", "linear", wl, Vd, D, count=n, tp="row"),
    ]


def _kda_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention) -> list[Op]:
    """Kimi Delta Attention on the linear layers (KimiDeltaSpec), as transformers'
    KimiLinearDeltaAttention: q, k, v and β from x; the causal conv over q, k, v; the forget gate's and
    the output gate's low-rank projections (their D -> head_dim halves replicated under TP, as vLLM's
    KimiDeltaAttention has them; full-rank D -> I ones without low_rank_gates); the chunked core; the
    sigmoid-gated norm; the output."""
    m, D, n = spec.linear, spec.d_model, spec.linear_mixer_layers
    H, d, I = m.n_heads, m.head_dim, m.inner
    C = 3 * I  # q, k and v go through the conv
    return [
        ops.matmul("layers.linear.in_proj", "linear", wl, D, 3 * I + H, count=n, parts=(I, I, I, H)),  # q, k, v, β
        ops.contraction("layers.linear.conv", "linear", wl, C * m.conv_kernel, 2 * C, count=n, tp="split",
                        params=C * m.conv_kernel, shapes=((C, 1, m.conv_kernel),)),
        *[op for gate in ("forget", "output") for op in ((
            ops.matmul(f"layers.linear.{gate}_gate_a", "linear", wl, D, d, count=n, tp="replicated"),
            ops.matmul(f"layers.linear.{gate}_gate_b", "linear", wl, d, I, count=n)) if m.low_rank_gates else (
            ops.matmul(f"layers.linear.{gate}_gate", "linear", wl, D, I, count=n),))],
        replace(ops.kimi_delta_attention("layers.linear.core", wl, conv, n_heads=H, head_dim=d, chunk=m.chunk,
                                         conv_values=C * (m.conv_kernel - 1), count=n, params=I + H),
                shapes=((I,), (1, 1, H, 1))),  # dt_bias per channel, A_log per head
        _gated_norm(wl, d, n, heads=H, gate="sigmoid"),  # one weight of head_dim shared by the heads
        ops.matmul("layers.linear.out_proj", "linear", wl, I, D, count=n, tp="row"),
    ]


def _lightning_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention) -> list[Op]:
    """MiniMax-01's lightning attention on the linear layers (LightningSpec), as transformers'
    MiniMaxLightningAttention: silu(qkv_proj(x)) -> the block-wise core -> RMSNorm over all heads ->
    times sigmoid(output_gate(x)) -> out_proj.  Every projection is bias-free."""
    m, D, n = spec.linear, spec.d_model, spec.linear_mixer_layers
    I = m.inner
    return [
        ops.matmul("layers.linear.qkv_proj", "linear", wl, D, 3 * I, count=n),  # one [3I, D] tensor
        ops.elementwise("layers.linear.act", "linear", wl, 3 * I, ops.ACTIVATION_FLOPS["silu"], count=n, tp="split",
                        fn="silu"),
        ops.lightning_attention("layers.linear.core", wl, conv, n_heads=m.n_heads, head_dim=m.head_dim, block=m.block,
                                count=n),
        # one weight of I, split by rank with the heads (vLLM's MiniMaxText01RMSNormTP)
        ops.norm("layers.linear.norm", wl, I, "rmsnorm", False, count=n, component="linear", tp="split"),
        ops.matmul("layers.linear.output_gate", "linear", wl, D, I, count=n),
        _sigmoid_gate("layers.linear.gate", "linear", wl, I, n),
        ops.matmul("layers.linear.out_proj", "linear", wl, I, D, count=n, tp="row"),
    ]


def _sigmoid_gate(name: str, component: ops.Component, wl: Workload, width: int, count: int, bias: int = 0) -> Op:
    """sigmoid(gate) ⊙ output over `width` values a token (Qwen3-Next's attention gate, MiniMax's
    lightning output gate): reads both, writes one; split with the heads under TP.  `bias`: a learned
    vector of that many values added to (or multiplying) the gate first (one more FLOP a value)."""
    gate = ops.elementwise(name, component, wl, width, ops.SIGMOID_GATE_FLOPS + (1 if bias else 0), inputs=2,
                           count=count, params=bias, tp="split", fn="sigmoid")
    return replace(gate, shapes=((bias,),)) if bias else gate


def _gated_norm(wl: Workload, width: int, count: int, heads: int = 1, tp: ops.Sharding = "replicated",
                gate: str = "silu") -> Op:
    """A linear mixer's RMSNorm(y ⊙ silu(z)) over rows of `width` (`heads` rows a token): the norm
    plus the gate's activation (silu; Kimi's sigmoid) and product on every value.  One weight per head
    shared by all heads is whole on every rank ("replicated"); one over the whole width is split with it."""
    norm = ops.norm("layers.linear.norm", wl, width, "rmsnorm", False, count=count, tokens=wl.tokens * heads,
                    component="linear", tp=tp)
    gating = ops.ACTIVATION_FLOPS["silu"] + 1 if gate == "silu" else ops.SIGMOID_GATE_FLOPS
    return replace(norm, vector_flops=norm.vector_flops + gating * wl.tokens * heads * width)


def _mamba2_ops(spec: ModelSpec, wl: Workload, conv: FlopsConvention) -> list[Op]:
    """Mamba-2 on the linear layers (Mamba2Spec), as Nemotron-H's NemotronHMamba2Mixer."""
    m, D, n = spec.linear, spec.d_model, spec.linear_mixer_layers
    H, I, C = m.n_heads, m.inner, m.conv_channels
    in_width = I + C + H  # the gate z; x, B, C; Δ
    return [
        ops.matmul("layers.linear.in_proj", "linear", wl, D, in_width, bias_width=in_width if m.proj_bias else 0,
                   count=n),
        ops.contraction("layers.linear.conv", "linear", wl, C * m.conv_kernel, 2 * C, count=n, tp="split",
                        params=C * m.conv_kernel + (C if m.conv_bias else 0),
                        shapes=((C, 1, m.conv_kernel),) + (((C,),) if m.conv_bias else ())),
        replace(ops.state_space_duality("layers.linear.core", wl, conv, n_heads=H, head_dim=m.head_dim,
                                        d_state=m.d_state, chunk=m.chunk, conv_values=C * (m.conv_kernel - 1),
                                        count=n, state_dtype=m.state_dtype), shapes=((H,),) * 3),  # dt_bias, A_log, D
        # over I, in n_groups groups: one weight of I, split by rank as vLLM's Mixer2RMSNormGated splits
        # it; or no norm, y ⊙ silu(z): silu and the product
        _gated_norm(wl, I, n, tp="split") if m.norm else ops.elementwise("layers.linear.gate", "linear", wl, I,
                                                           ops.ACTIVATION_FLOPS["silu"] + 1, inputs=2, count=n, tp="split"),
        ops.matmul("layers.linear.out_proj", "linear", wl, I, D,
                   bias_width=D if (m.proj_bias if m.out_bias is None else m.out_bias) else 0, count=n, tp="row"),
    ]


def _mamba_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    """Mamba's selective scan on the linear layers (MambaSpec), as Jamba's JambaMambaMixer (Zamba's with n_heads:
    every head its own x_proj, dt_proj, A_log and D over its E/H channels, in 3-D tensors)."""
    m, D, n = spec.linear, spec.d_model, spec.linear_mixer_layers
    E, N, R, K, H = m.expand * D, m.d_state, m.dt_rank, m.d_conv, m.n_heads

    def headed(op: Op, *shapes: tuple[int, ...]) -> Op:
        return replace(op, shapes=shapes) if H > 1 else op

    out = [
        # x and the gate z: one nn.Linear of 2E rows (one tensor)
        ops.matmul("layers.linear.in_proj", "linear", wl, D, 2 * E, bias_width=2 * E if m.proj_bias else 0, count=n),
        ops.contraction("layers.linear.conv", "linear", wl, E * K, 2 * E, count=n, tp="split",
                        params=E * K + (E if m.conv_bias else 0),
                        shapes=((E, 1, K),) + (((E,),) if m.conv_bias else ())),
        headed(ops.matmul("layers.linear.x_proj", "linear", wl, E, R + 2 * N, count=n, tp="row"),
               (H, R + 2 * N, E // H)),
    ]
    if m.bc_norms:  # Jamba: RMSNorms of Δ (dt_rank), B and C (d_state each), whatever norm.kind says
        out += [ops.norm(f"layers.linear.{x}_norm", wl, w, "rmsnorm", False, weight=m.bc_norm_weight, count=n,
                         component="linear") for x, w in (("dt", R), ("b", N), ("c", N))]
    core = ops.selective_scan("layers.linear.core", wl, channels=E, d_state=N, conv_values=E * (K - 1), count=n)
    return out + [
        headed(ops.matmul("layers.linear.dt_proj", "linear", wl, R, E, bias_width=E, count=n),
               (H, E // H, R), (H, E // H)),
        replace(core, shapes=((H, E // H, N), (H, E // H)) if H > 1 else ((E, N), (E,))),  # A_log and D
        ops.matmul("layers.linear.out_proj", "linear", wl, E, D, bias_width=D if m.proj_bias else 0, count=n,
                   tp="row"),
    ]


def _short_conv_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    """LFM2's gated short convolution on the linear layers (ShortConvSpec)."""
    c, D, n = spec.linear, spec.d_model, spec.linear_mixer_layers
    bias = D if c.bias else 0
    return [
        ops.matmul("layers.linear.in_proj", "linear", wl, D, 3 * D, bias_width=3 * bias, count=n),
        # B ⊙ x, then C ⊙ conv(B ⊙ x): two products per channel; the state is the conv's last inputs.
        ops.conv_state("layers.linear.gates", wl, D, 2, conv_values=D * (c.conv_kernel - 1), count=n),
        ops.contraction("layers.linear.conv", "linear", wl, D * c.conv_kernel, 2 * D, count=n, tp="split",
                        params=D * c.conv_kernel + bias,
                        shapes=((D, 1, c.conv_kernel),) + (((D,),) if c.bias else ())),
        ops.matmul("layers.linear.out_proj", "linear", wl, D, D, bias_width=bias, count=n, tp="row"),
    ]


def _gated_deltanet_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    """Gated DeltaNet on the linear layers (GatedDeltaNetSpec): projections, the causal conv, the
    chunked delta-rule core (its state in place of a KV cache), the gated norm, the output."""
    g, D, n = spec.linear, spec.d_model, spec.linear_mixer_layers
    Hv, Kd, Vd, C = g.n_heads, g.key_width, g.value_width, g.conv_channels
    qkvz, ba = 2 * Kd + 2 * Vd, 2 * Hv  # q, k, v and the gate z; β and α per value head
    parts = (qkvz, ba) if g.fused_projections else (Kd, Kd, Vd, Vd, Hv, Hv) if g.separate_qkv else \
        (2 * Kd + Vd, Vd, Hv, Hv)  # (q, k, v,) z, b, a
    proj = ops.matmul("layers.linear.in_proj", "linear", wl, D, qkvz + ba, count=n, parts=parts)
    return [
        proj,
        # Depthwise causal conv over q, k, v: conv_kernel MACs per channel per token (no bias).
        ops.contraction("layers.linear.conv", "linear", wl, C * g.conv_kernel, 2 * C, count=n, tp="split",
                        params=C * g.conv_kernel, shapes=((C, 1, g.conv_kernel),)),
        replace(ops.linear_attention("layers.linear.core", wl, n_heads=Hv, key_heads=g.n_key_heads,
                                     key_dim=g.key_head_dim, value_dim=g.value_head_dim, chunk=g.chunk,
                                     conv_values=C * (g.conv_kernel - 1), count=n, params=2 * Hv,
                                     state_dtype=g.state_dtype),
                shapes=((Hv,), (Hv,))),  # dt_bias and A_log, one each per value head
        _gated_norm(wl, g.value_head_dim, n, heads=Hv),  # each value head: one weight of value_head_dim
        ops.matmul("layers.linear.out_proj", "linear", wl, Vd, D, count=n, tp="row"),
    ]


# ---- feed-forward ------------------------------------------------------------------


def _mlp(spec: ModelSpec, wl: Workload, prefix: str, width: int, count: int, *, experts: tuple[int, int] | None = None,
         component: str = "ffn") -> list[Op]:
    """up (gate and up fused for gated FFNs), activation, down."""
    f, D = spec.ffn, spec.d_model
    up_width = 2 * width if f.gated else width
    parts = (width, width) if f.gated else ()  # gate and up: one matmul here, two in eager code
    per_element = ops.ACTIVATION_FLOPS[BASE_ACTIVATION[f.activation]] + (ops.GATE_PRODUCT_FLOPS if f.gated else 0)
    inputs = 2 if f.gated else 1
    act = BASE_ACTIVATION[f.activation]
    learned = LEARNED_ACTIVATION_PARAMS.get(act, 0)  # xIELU's scalars: (1,) each, one activation per MLP
    if experts:
        E, k = experts
        routed = wl.tokens * k
        return [ops.expert_matmul(f"{prefix}.up", wl, D, up_width, E, k, bias=f.bias, count=count, parts=parts),
                ops.elementwise(f"{prefix}.act", "experts", wl, width, per_element, inputs=inputs, count=count,
                                tokens=routed, tp="split", fn=act),
                ops.expert_matmul(f"{prefix}.down", wl, width, D, E, k, bias=f.bias, count=count, tp="row")]
    return [ops.matmul(f"{prefix}.up", component, wl, D, up_width, bias_width=up_width if f.bias else 0, count=count,
                       parts=parts),
            replace(ops.elementwise(f"{prefix}.act", component, wl, width, per_element, inputs=inputs, count=count,
                                    tp="split", fn=act, params=learned), shapes=((1,),) * learned),
            # BitNet: a norm over F before down (split with F under TP, its statistics all-reduced)
            *(_norm(spec, wl, f"{prefix}.sub_norm", width, count=count, tp="split") if f.sub_norm else []),
            ops.matmul(f"{prefix}.down", component, wl, width, D, bias_width=D if f.bias else 0, count=count,
                       tp="row")]


def _ffn_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    kinds = spec.ffn_layers
    out = _sublayer_norms(spec, wl, "layers.ffn", "before")
    wide = spec.ffn.kv_shared_d_ff  # the layers that reuse K/V have an FFN of their own width (Gemma 4)
    n_wide = spec.attention.kv_shared_layers if wide is not None else 0
    if nonzero(kinds["dense"] - n_wide):
        mlp = _mlp(spec, wl, "layers.ffn", spec.d_ff, kinds["dense"] - n_wide)
        if spec.ffn.scales:  # nGPT's s_u, s_v: the gate's and the up projection's outputs, each times a learned F-vector
            mlp.insert(1, _learned_vector("layers.ffn.scales", "ffn", wl, 2 * spec.d_ff, kinds["dense"], tp="split",
                                          parts=2))
        out += mlp
        if spec.ffn.global_scale:  # Inkling: one learned scalar times the MLP's output
            out.append(_learned_scalar("layers.ffn.global_scale", "ffn", wl, spec.d_model, kinds["dense"]))
    if spec.ffn.receptance:  # RWKV-4's channel mix: its token shift, sigmoid(x W_r) ⊙ the MLP's output
        D, n = spec.d_model, kinds["dense"]
        out += [_token_shift("layers.ffn.shift", "ffn", wl, D, 2, n),
                ops.matmul("layers.ffn.receptance", "ffn", wl, D, D, count=n),
                _sigmoid_gate("layers.ffn.gate", "ffn", wl, D, n)]
    if n_wide:
        out += _mlp(spec, wl, "layers.ffn.wide", wide, n_wide)
    if spec.ffn.product_key is not None:
        out += _product_key_ops(spec, wl, kinds["dense"])
    moe, n_moe, D = spec.ffn.moe, kinds["moe"], spec.d_model
    if nonzero(n_moe):
        logits = moe.n_experts + moe.zero_experts + moe.router_shared  # (zero-computation experts are scored too)
        out += [
            *(_router_mlp(spec, wl, logits, n_moe) if moe.router_mlp is not None else [
                ops.matmul("layers.moe.router", "router", wl, D, logits,
                           bias_width=moe.n_experts + moe.zero_experts if moe.router_bias else 0, count=n_moe,
                           quantizable=False, tp="replicated")]),
            *_mlp(spec, wl, "layers.moe.experts", moe.d_expert, n_moe, experts=(moe.n_experts, moe.top_k)),
            # Weighted sum of the k expert outputs: a multiply and an add per value.
            ops.elementwise("layers.moe.combine", "experts", wl, D, 2 * moe.top_k, inputs=moe.top_k, count=n_moe),
        ]
        if moe.output_bias:  # JetMoE: one D-vector on the combined output
            out.append(_added_bias("layers.moe.bias", "ffn", wl, D, n_moe))
        if spec.ffn.global_scale:  # Inkling: one fp32 scalar times the routing weights (top_k and the shared experts')
            out.append(_fp32(_learned_scalar("layers.moe.global_scale", "router", wl, moe.top_k + moe.router_shared,
                                             n_moe)))
        if moe.router_scales:  # Gemma 4: rms(x) · scale · D^-1/2 into the router; per-expert scales on its weights
            E = moe.n_experts
            out += [ops.norm("layers.moe.router_norm", wl, D, "rmsnorm", False, weight=False, count=n_moe,
                             component="router"),
                    replace(ops.elementwise("layers.moe.router_scale", "router", wl, D, 2, count=n_moe,
                                            params=D + E), shapes=((D,), (E,)))]
        if moe.branch_norms:  # Gemma 4: before the experts, after them, after the always-on MLP
            for name in ("layers.moe.experts.norm", "layers.moe.experts.post_norm", "layers.moe.shared.post_norm"):
                out += _norm(spec, wl, name, D, count=n_moe)
        if nonzero(moe.d_shared):
            out += _mlp(spec, wl, "layers.moe.shared", moe.d_shared, n_moe)
        if moe.shared_gate:
            out.append(ops.matmul("layers.moe.shared_gate", "ffn", wl, D, 1, count=n_moe, quantizable=False,
                                  tp="replicated"))
        if moe.post_norm:  # A.X-K1: on the block's output, MoE layers only
            out += _norm(spec, wl, "layers.moe.post_norm", D, count=n_moe)
    return out + _sublayer_norms(spec, wl, "layers.ffn", "after")


def _router_mlp(spec: ModelSpec, wl: Workload, logits: int, count: int) -> list[Op]:
    """ZAYA1's router (RouterMLPSpec) in `count` MoE layers, whole on every rank: D -> R with a bias; with eda, the
    previous MoE layer's R values times a learned R-vector added (a multiply and an add a value; every MoE layer
    but the first); an RMSNorm of R; R -> R, GELU, R -> R, GELU (biases); R -> the logits."""
    R, D = spec.ffn.moe.router_mlp.width, spec.d_model

    def layer(name: str, d_in: int, d_out: int, bias: bool) -> Op:
        return ops.matmul(f"layers.moe.router{name}", "router", wl, d_in, d_out, bias_width=d_out if bias else 0,
                          count=count, quantizable=False, tp="replicated")

    out = [layer(".down", D, R, True)]
    if spec.ffn.moe.router_mlp.eda and nonzero(count - 1):
        eda = ops.elementwise("layers.moe.router.eda", "router", wl, R, 2, inputs=2, count=count - 1, params=R)
        out.append(replace(eda, shapes=((R,),)))
    out.append(ops.norm("layers.moe.router.norm", wl, R, "rmsnorm", False, count=count, component="router"))
    for i in (1, 2):
        out += [layer(f".fc{i}", R, R, True),
                ops.elementwise(f"layers.moe.router.act{i}", "router", wl, R, ops.ACTIVATION_FLOPS["gelu"], count=count,
                                fn="gelu")]
    return out + [layer("", R, logits, False)]


def _product_key_ops(spec: ModelSpec, wl: Workload, count: int) -> list[Op]:
    """Doge's cross-domain experts (ProductKeySpec) beside each layer's MLP, as transformers' DogeCDMoE runs them:
    the router D -> 2·⌊√E⌋; each token's k experts' down rows against x (a batched [k, D] · [D, 1]: one expert
    matmul of D -> 1), the activation times the routing weight (k values), the weighted sum of their up rows
    ([1, k] · [k, D]: 1 -> D), added to the MLP's output.  The tables are nn.Embedding: no checkpoint quantizes
    them; every rank holds them whole."""
    pk, D = spec.ffn.product_key, spec.d_model
    E, k = pk.n_experts, pk.top_k
    act = spec.ffn.activation
    act = BASE_ACTIVATION.get(act, act)
    return [ops.matmul("layers.ffn.pk.router", "router", wl, D, 2 * pk.keys, count=count, quantizable=False,
                       tp="replicated"),
            ops.expert_matmul("layers.ffn.pk.down", wl, D, 1, E, k, bias=False, count=count, quantizable=False,
                              tp="replicated"),
            ops.elementwise("layers.ffn.pk.act", "experts", wl, k, ops.ACTIVATION_FLOPS[act] + 1, count=count,
                            fn=act),
            ops.expert_matmul("layers.ffn.pk.up", wl, 1, D, E, k, bias=False, count=count, quantizable=False,
                              tp="replicated"),
            ops.elementwise("layers.ffn.pk.add", "experts", wl, D, 1, inputs=2, count=count)]


# ---- per-layer embeddings ------------------------------------------------------------


def _per_layer_input_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    """Gemma 3n / 4's per-layer embeddings (PerLayerInputSpec), as transformers' Gemma4TextModel runs
    them: the packed table and the projection of the embedded token, each layer's slice RMS-normed and
    the two summed and scaled once for all layers; then in each layer, after the FFN, the gate
    (act(x W_gate) ⊙ slice), W_proj and an RMSNorm (its residual add is _residual_ops')."""
    p, D, L = spec.per_layer_input, spec.d_model, spec.n_layers
    act = BASE_ACTIVATION[spec.ffn.activation]
    # Under TP (vLLM's Gemma 3n / 4): the table vocab-parallel, the projection column-parallel (its output
    # gathered), each layer's gate and projection replicated (its slice of the table is not split).
    return [
        ops.gather("per_layer.embedding", "per_layer", wl, p.vocab_size, L * p.width),
        ops.matmul("per_layer.project", "per_layer", wl, D, L * p.width),
        ops.norm("per_layer.norm", wl, p.width, "rmsnorm", False, tokens=wl.tokens * L, component="per_layer"),
        ops.elementwise("per_layer.combine", "per_layer", wl, L * p.width, 2, inputs=2),  # (a + b) · 2^-1/2
        ops.matmul("layers.per_layer.gate", "per_layer", wl, D, p.width, count=L, tp="replicated"),
        ops.elementwise("layers.per_layer.act", "per_layer", wl, p.width,
                        ops.ACTIVATION_FLOPS[act] + ops.GATE_PRODUCT_FLOPS, inputs=2, count=L, fn=act),
        ops.matmul("layers.per_layer.proj", "per_layer", wl, p.width, D, count=L, tp="replicated"),
        ops.norm("layers.per_layer.norm", wl, D, "rmsnorm", False, count=L, component="per_layer"),
    ]


# ---- residual stream -----------------------------------------------------------------


def _residual_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    r, D, L = spec.residual, spec.d_model, spec.n_layers
    U = 2 * L
    # branches beside the skip: LAuReL's, or each sublayer's output through its short conv (Inkling: its state is
    # kept with the attention's)
    branches = _laurel_ops(spec, wl) if r.laurel_rank is not None else []
    if r.kind == "altup":
        return branches + _altup_ops(spec, wl)
    if r.output_conv is not None:
        branches += _short_conv("layers.residual.conv", "residual", wl, D, r.output_conv, U, "replicated")
    if r.kind == "standard":  # x + F(x) after each sublayer that is there; w ⊙ x + F(x) with scales (Doge)
        units = U - spec.attention_layers["none"] - spec.ffn_layers["none"] + L * (spec.per_layer_input is not None)
        vectors = 4 if r.affine else int(r.scales)  # Doge's skip scale; ZAYA1's two biases and two scales
        add = ops.elementwise("layers.residual.add", "residual", wl, D, 1 + vectors, inputs=2, count=units,
                              params=vectors * D)
        return branches + [replace(add, shapes=((D,),) * vectors) if vectors else add]
    if r.kind == "interpolate":  # nGPT: x + |α| ⊙ (F − x), α a learned D-vector a sublayer
        step = ops.elementwise("layers.residual.interpolate", "residual", wl, D, 3, inputs=2, count=U, params=D)
        return branches + [replace(step, shapes=((D,),))]
    if r.kind == "parallel":  # x + attn + ffn: two adds, once per layer
        return [ops.elementwise("layers.residual.add", "residual", wl, D, 2, inputs=3, count=L)]
    if r.kind in ("hyper", "mhc"):
        return _hyper_ops(spec, wl)
    return branches + _attnres_ops(spec, wl)


def _hyper_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    """Hyper-connections (arXiv:2409.19606) and mHC (arXiv:2512.24880): n
    streams of width D, one module per sublayer (count U = 2L)."""
    r, D, U = spec.residual, spec.d_model, 2 * spec.n_layers
    n, m = r.streams, wl.tokens
    if r.kind == "mhc":
        # φ: the flattened n·D state -> n² + 2n coefficient logits (2n without the mix: HY-V4), with a bias
        # b; kept in fp32 (paper §4.3), as are the scales α (transformers' HY-V4 and DeepSeek-V4 modules: float32).
        # Its RMS norm has no weight (absorbed in φ).
        coeffs = n * n * r.mix + 2 * n
        mixing = [_stream_logits("layers.mhc.coeffs", wl, n * D, coeffs, U),
                  ops.elementwise("layers.mhc.rms", "residual", wl, n * D, 2, count=U)]  # square, sum
        if r.mix:  # exp, then t × (column + row normalisation: a sum and a divide each); α_pre, α_post, α_res
            mixing.append(_fp32(ops.elementwise("layers.mhc.sinkhorn", "residual", wl, n * n,
                                                4 * r.sinkhorn_iters + 1, count=U, params=3)))
        else:  # the read and write weights: sigmoid(scale · logit + b) (+ ε; the write's times a magnitude)
            mixing.append(_fp32(ops.elementwise("layers.mhc.gates", "residual", wl, 2 * n, 7, count=U, params=2)))
        static = ()
    elif r.dynamic:
        # A per-stream RMSNorm (part of the mechanism, whatever norm.kind says),
        # then each stream's D -> (n + 2): W_β (1), W_m (1), W_r (n).
        proj = ops.matmul("layers.hc.proj", "residual", wl, D, n + 2, count=U, tokens=m * n, quantizable=False,
                          tp="replicated")
        mixing = [ops.norm("layers.hc.norm", wl, D, "rmsnorm", False, count=U, tokens=m * n, component="residual"),
                  replace(proj, shapes=((D, 1), (D, 1), (D, n)))]  # W_β, W_m, W_r: three tensors
        static = ((n,), (n,), (n, n), (), ())  # static B, A_m, A_r, plus the scales s_α, s_β
    else:
        mixing, static = [], ((n,), (n,), (n, n))  # B (n), A_m (n), A_r (n × n)
    static_params = sum(_numel(shape) for shape in static)
    out = mixing + [
        ops.contraction("layers.hc.read", "residual", wl, n * D, (n + 1) * D, count=U, params=static_params,
                        shapes=static),  # h0 = A_mᵀH
        *([ops.contraction("layers.hc.mix", "residual", wl, n * n * D, 2 * n * D, count=U)] if r.mix else []),  # A_rᵀH
        ops.elementwise("layers.hc.write", "residual", wl, n * D, 2, inputs=2, count=U),  # Bᵀ·F(h0) + A_rᵀH
        # the embedding copied to n streams: D values read, n·D written
        replace(ops.elementwise("hc.expand", "residual", wl, n * D, 0), act_bytes=nbytes((n + 1) * m * D, wl.act_dtype)),
    ]
    if not r.head:
        return out + [ops.elementwise("hc.merge", "residual", wl, D, n - 1, inputs=n)]  # streams summed
    # HY-V4's hc_head: n weights from the RMS-normed n·D state (fp32, a bias each, one scale), the weighted sum
    return out + [_stream_logits("hc.head", wl, n * D, n, 1),
                  ops.elementwise("hc.head_rms", "residual", wl, n * D, 2),
                  _fp32(ops.elementwise("hc.head_gates", "residual", wl, n, 6, params=1)),
                  ops.elementwise("hc.merge", "residual", wl, D, 2 * n - 1, inputs=n)]


def _stream_logits(name: str, wl: Workload, width: int, logits: int, count: int) -> Op:
    """An mHC coefficient projection: the flattened n·D streams -> logits, with a bias, kept in fp32 (its
    stored_dtype overrides any checkpoint dtype: not quantizable), whole on every rank."""
    return ops.matmul(name, "residual", wl, width, logits, bias_width=logits, count=count, weight_dtype="fp32",
                      tp="replicated")


def _laurel_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    """LAuReL (ResidualSpec.laurel_rank, Gemma 3n's Gemma3nTextLaurelBlock): per layer, the attention's normed
    input through D -> r -> D and an RMSNorm of D, added to the stream after attention, the sum scaled by
    1/√2 (an add and a multiply a value).  Whole on every TP rank, as the residual stream is."""
    D, L, rank = spec.d_model, spec.n_layers, spec.residual.laurel_rank
    return [ops.matmul("layers.laurel.left", "residual", wl, D, rank, count=L, tp="replicated"),
            ops.matmul("layers.laurel.right", "residual", wl, rank, D, count=L, tp="replicated"),
            ops.norm("layers.laurel.norm", wl, D, "rmsnorm", False, count=L, component="residual"),
            ops.elementwise("layers.laurel.add", "residual", wl, D, 2, inputs=2, count=L)]


def _altup_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    """AltUp (ResidualSpec kind altup) as transformers' Gemma3nTextAltUp runs it, n streams of D, each layer on
    one.  Per layer: the router (an RMSNorm of D, a D -> n projection, tanh), run twice, on the active stream
    before the layer and on its output after; the prediction's coefficients n -> n² and the prediction, each
    stream a mix of all n ([D, n] × [n, n] a token: a matmul transformers runs) plus itself; the correction's
    coefficients n -> n, each stream plus its coefficient times the innovation; the corrected active stream
    scaled by a learned D-vector; the layer's own two residual adds on the active stream and, with per-layer
    embeddings, their branch added to the n − 1 others.  Around the layers: n − 1 D × D projections of the
    embedded token make the other streams and n − 1 more undo them before the streams are averaged, each
    rescaled to the first stream's RMS."""
    D, L, n, m = spec.d_model, spec.n_layers, spec.residual.streams, wl.tokens
    ple = spec.per_layer_input is not None
    rescale = ops.RMSNORM_FLOPS + 2  # each projected stream's RMS, then times target / new
    return [
        ops.norm("layers.altup.router_norm", wl, D, "rmsnorm", False, count=L, tokens=2 * m, component="residual"),
        ops.matmul("layers.altup.router", "residual", wl, D, n, count=L, tokens=2 * m, tp="replicated",
                   quantizable=False),
        ops.matmul("layers.altup.predict_coefs", "residual", wl, n, n * n, count=L, tp="replicated", quantizable=False),
        ops.contraction("layers.altup.predict", "residual", wl, D * n * n, 2 * n * D, count=L),
        ops.matmul("layers.altup.correct_coefs", "residual", wl, n, n, count=L, tp="replicated", quantizable=False),
        ops.elementwise("layers.altup.correct", "residual", wl, n * D, 3, inputs=2, count=L),  # (a − p)·c + p
        replace(ops.elementwise("layers.altup.scale", "residual", wl, D, 1, count=L, params=D), shapes=((D,),)),
        ops.elementwise("layers.residual.add", "residual", wl, D, 1, inputs=2, count=2 * L),
        *([ops.elementwise("layers.altup.per_layer_add", "residual", wl, (n - 1) * D, 1, inputs=2, count=L)]
          if ple else []),
        replace(ops.matmul("altup.project", "residual", wl, D, D, count=n - 1, tp="replicated"),
                vector_flops=(n - 1) * rescale * m * D),
        replace(ops.matmul("altup.unembed", "residual", wl, D, D, count=n - 1, tp="replicated"),
                vector_flops=(n - 1) * rescale * m * D + n * m * D),  # and the mean of the n streams
    ]


def _attnres_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    """Attention residuals (arXiv:2603.15031): each sublayer's input is a softmax-weighted sum of earlier block
    representations and the block's partial sum, its scores from learned pseudo-queries against the RMS-normed
    sources.  Units differ in how many sources they see, so each op here covers all of them (count 1).
    attnres_form inkling2 (transformers' Inkling2BlockAttentionResidual): no module on layer 0's attention input,
    weightless key norms, three queries (q, k and v's inputs) on each global layer's attention input, and an
    RMSNorm of D for the k and v inputs beside the layer's input norm.  In a message loop (Inkling 2 Loop) each pass
    starts from the prelude's block sums: a core layer's modules see the same sources every pass, and run each."""
    r, D = spec.residual, spec.d_model
    lp = spec.loop if spec.loop is not None and spec.loop.kind == "message" else None
    kinds = _stored_kinds(spec)
    U = 2 * len(kinds)
    N = r.blocks if r.blocks is not None else U  # blocks; N = U is Full AttnRes
    S = U // N  # sublayers per block
    inkling = r.attnres_form == "inkling2"

    def runs(j: int) -> int:  # how many times unit j runs: a message loop's core units once a pass
        return lp.passes if lp is not None and lp.prelude <= j // 2 < lp.prelude + lp.core else 1

    # (sources, queries, runs) of each module: unit j of block n (from 1) sees the n blocks before it (the
    # embedding first) and, past the block's first unit, the block's partial sum; the output aggregation all N + 1
    modules = [(j // S + 1 + (j % S > 0), 3 if inkling and j % 2 == 0 and kinds[j // 2] == "global" else 1, runs(j))
               for j in range(U) if not (inkling and j == 0)] + [(N + 1, 1, 1)]
    rows = sum(n * k for n, _, k in modules)  # normed source rows: one norm a module run, over all its queries
    scores = sum(n * q * k for n, q, k in modules)
    queries = sum(q for _, q, _ in modules)  # stored once
    weights = 0 if inkling else len(modules)  # the paper's key norms each have a D weight
    most, most_q, _ = max(modules)  # the module with the most sources (and queries): the activation peak's

    def peak(op: Op, largest: Op) -> Op:  # the op over all modules, its peak the largest module's
        return replace(op, peak_act_bytes=largest.act_bytes)

    norm = ops.elementwise("attnres.key_norm", "residual", wl, rows * D, ops.RMSNORM_FLOPS - inkling,
                           params=D * weights)
    logits = ops.contraction("attnres.logits", "residual", wl, scores * D, rows * D, params=D * queries,
                             shapes=((D,),) * queries)
    out = [peak(replace(norm, shapes=((D,),) * weights),
                ops.elementwise("attnres.key_norm", "residual", wl, most * D, ops.RMSNORM_FLOPS)),
           peak(_fp32(logits) if inkling else logits,
                ops.contraction("attnres.logits", "residual", wl, most * most_q * D, most * D)),
           peak(ops.elementwise("attnres.softmax", "residual", wl, scores, ops.SOFTMAX_FLOPS),
                ops.elementwise("attnres.softmax", "residual", wl, most * most_q, ops.SOFTMAX_FLOPS)),
           peak(ops.contraction("attnres.sum", "residual", wl, scores * D, (rows + 1) * D),
                ops.contraction("attnres.sum", "residual", wl, most * most_q * D, (most + most_q) * D)),
           # b_n += f(h): inkling2 starts each block's partial sum from its first unit's output (no add)
           ops.elementwise("layers.attnres.block_sum", "residual", wl, D, 1, inputs=2,
                           count=sum(runs(j) for j in range(U) if not (inkling and j % S == 0)))]
    if inkling:  # the global layers' k and v inputs' RMSNorms (q's is the layer's attention-input norm)
        out += _norm(spec, wl, "layers.attnres.kv_input_norm", D, count=2 * spec.attention_layers["global"])
    return out


# ---- head ------------------------------------------------------------------------------


def _head_ops(spec: ModelSpec, wl: Workload) -> list[Op]:
    D, E, V = spec.d_model, spec.embedding_width, spec.head_vocab
    out = _norm(spec, wl, "final_norm", D) if spec.norm.final else []
    if spec.embedding_dim is not None:  # OPT-350m's project_out: D -> E, no bias, at every position (the
        # decoder's last step in transformers' and vLLM's OPTDecoder, before the logit rows are picked)
        out.append(ops.matmul("lm_head.project_out", "projection", wl, D, E, tp="replicated"))
    if spec.head_transform is not None:  # ModernBERT's prediction head, on the logit positions only
        t, m = spec.head_transform, wl.logit_tokens
        out += [ops.matmul("lm_head.transform", "lm_head", wl, D, D, bias_width=D if t.bias else 0, tokens=m,
                           tp="replicated"),
                ops.elementwise("lm_head.transform.act", "lm_head", wl, D, ops.ACTIVATION_FLOPS[t.activation], tokens=m,
                                fn=t.activation),
                *_norm(spec, wl, "lm_head.transform.norm", D, tokens=m)]
    if spec.drafter is not None:
        drafted, head = _drafter_head_ops(spec, wl)
        out += drafted
    else:
        head = ops.matmul("lm_head", "lm_head", wl, E, V, bias_width=V if spec.lm_head_bias else 0,
                          tokens=wl.logit_tokens, quantizable=False)
    if spec.tie_embeddings:  # the embedding's weight, counted there; still read here (a bias is the head's own)
        head = replace(head, params=head.bias_params, active_params=head.bias_params,
                       shapes=((V,),) if spec.lm_head_bias else ())
    out.append(head)
    if spec.logit_scale:  # nGPT's s_z: the logits times a learned V-vector, in fp32 (whole on the sampling rank)
        out.append(_learned_vector("lm_head.scale", "lm_head", wl, V, 1, tokens=wl.logit_tokens))
    if spec.final_softcap is not None:  # whole on the sampling rank: vLLM's LogitsProcessor soft-caps
        # after gathering the vocab-parallel logits
        out.append(ops.elementwise("lm_head.softcap", "lm_head", wl, V, ops.SOFTCAP_FLOPS,
                                   tokens=wl.logit_tokens, fn="softcap"))
    return out


def _drafter_head_ops(spec: ModelSpec, wl: Workload) -> tuple[list[Op], Op]:
    """A drafter's outputs (DrafterSpec), at every position transformers' Gemma4AssistantForCausalLM computes them
    (it keeps no logits_to_keep): the hidden state projected back to the target's width (D -> D_target), and the
    logits, all V, or with centroids the C cluster scores (D -> C) and the logits of the top_k clusters' V / C
    tokens, whose rows of the table are all the head reads.  (The ops before the head, the head untied.)"""
    dr, D, V, m = spec.drafter, spec.d_model, spec.vocab_size, wl.tokens
    out = [ops.matmul("drafter.post_projection", "projection", wl, D, dr.backbone_d_model, tp="replicated")]
    if dr.centroids is None:
        head = ops.matmul("lm_head", "lm_head", wl, D, V, quantizable=False)
    else:
        rows = dr.top_k * (V // dr.centroids)
        out.append(ops.matmul("lm_head.centroids", "lm_head", wl, D, dr.centroids, tp="replicated"))
        head = ops.matmul("lm_head", "lm_head", wl, D, rows, quantizable=False, tp="replicated")
        head = replace(head, params=V * D, active_params=V * D, shapes=((V, D),),
                       weight_bytes=nbytes(lesser(m * rows, V) * D, kept_dtype(wl.weight_dtype)))
    return out, head
