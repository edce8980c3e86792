"""Bytes a training forward keeps for the backward pass, per op of the op list.

The rule per op is what torch's autograd keeps for that kernel (each
backward formula in torch's derivatives.yaml names the tensors it needs):
a matmul keeps its input [m, k] (the weight is a parameter, not an
activation); a norm its input and per-row statistics in fp32 (RMSNorm: rstd;
LayerNorm: mean and rstd); SiLU and GELU their input, ReLU its output, a
product both factors; a fused attention kernel (FlashAttention, torch's SDPA)
q, k, v, its output and the log-sum-exp (fp32, one per query and head); an
eager attention core (HF's "eager", the explicit matmuls of Korthikanti et
al. 2022) the scores' softmax [B, H, T, S] as well, and K and V repeated to
every query head.  A tensor two ops keep is counted once, at the op named
first (the FFN up projection of a parallel residual reads the same normed x
that QKV keeps).  Adds, RoPE (its cos/sin tables) and gathers keep nothing
that grows with the batch.  MoE routing, hyper-connections, mHC and attention
residuals keep tensors of their own (_moe_saved, _hyper_saved, _mhc_saved,
the attnres rule).

Tests pin every rule to torch: the reference model's forward under a
tracker of live storages equals the prediction exactly (tests/training/).
Not counted: tensors that do not grow with the batch (RoPE tables, masks,
position indices: at most T·S bytes per layer), and the backward pass's own
transient buffers (the gradient of the logits is counted in memory.py).

Letters: m = B·T rows of an op, D d_model, F d_ff, H / K heads, d_k / d_v
head dims, V vocabulary, S keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from archcalc.ops.dtypes import nbytes
from archcalc.ops.op import AttentionDims, MatmulDims, Op
from archcalc.spec.model import ModelSpec

AttentionKernel = Literal["flash", "eager"]
Recompute = Literal["none", "selective", "full"]
STATS_BYTES = 4  # norm statistics and the log-sum-exp are fp32 whatever the activation dtype
MASK_BYTES = 1  # a dropout mask is a bool tensor
INDEX_BYTES = 8  # routing indices are int64 (torch.topk, torch.where)
LOSS_BYTES = 4  # the loss takes fp32 logits: log_softmax keeps its [m, V] fp32 output

# Values per element an FFN activation op keeps, by activation (its matmul neighbours keep the rest:
# up its input, down the activation's output).  gated: g = gate(x), u = up(x), h = act(g)·u.
ACTIVATION_KEEPS = {
    "silu": 1, "gelu": 1,  # act(u) keeps u; down keeps act(u)
    "relu": 0,  # relu keeps its output, which down keeps anyway
    "relu2": 1,  # relu(u) keeps r, square keeps r; down keeps r²
    "swiglu": 3, "geglu": 3,  # act keeps g; the product keeps act(g) and u
    "reglu": 2,  # relu keeps r = relu(g); the product keeps r and u
    "relu2glu": 3,  # relu keeps r = relu(g), square keeps r; the product keeps r² and u
}


def attention_saved(op: Op, spec: ModelSpec, act_dtype: str, kernel: AttentionKernel, recompute: Recompute,
                    dropout: bool) -> float:
    """Bytes one attention core keeps: q, k, v always; flash adds the output and
    the log-sum-exp; eager adds the [B, H, T, S] probabilities (and their
    soft-capped scores, dropout mask and dropped copy).  selective recompute
    keeps only q, k and v and runs the core again in backward."""
    d: AttentionDims = op.dims
    m, H = d.batch * d.new_tokens, d.n_heads
    pairs = d.batch * H * d.new_tokens * (d.context + (1 if op.params else 0))  # softmax entries (+ a sink: an attention op's only parameters)
    if spec.attention.kind == "mla":
        # MLA's values are a view of kv_b's output [m, H·(d_nope + d_v)], kept whole by whoever keeps
        # them; only eager attention's head-major copy (a repeat over K = H heads) lets it go.
        copied = kernel == "eager" and recompute != "selective"
        k_heads = H
        v_kept = H * d.v_dim if copied else H * (spec.attention.qk_nope_head_dim + d.v_dim)
    else:
        repeated = kernel == "eager" and recompute != "selective"  # eager repeats K and V to H heads
        k_heads = H if repeated else d.n_kv_heads
        v_kept = k_heads * d.v_dim
    kept = nbytes(m * (H * d.qk_dim + k_heads * d.qk_dim + v_kept), act_dtype)
    if recompute == "selective":
        return kept
    if kernel == "flash":
        return kept + nbytes(m * H * d.v_dim, act_dtype) + m * H * STATS_BYTES  # output, log-sum-exp
    square = d.batch * H * d.new_tokens * d.context  # one [B, H, T, S] tensor
    scores = pairs + (square if spec.attention.softcap is not None else 0)  # tanh keeps its output (before sinks)
    if dropout:  # the mask and the dropped probabilities (which the PV matmul keeps)
        return kept + nbytes(scores + square, act_dtype) + square * MASK_BYTES
    return kept + nbytes(scores, act_dtype)


def op_saved(op: Op, spec: ModelSpec, act_dtype: str, *, kernel: AttentionKernel = "flash",
             recompute: Recompute = "none", dropout: bool = False) -> float:
    """Bytes ONE execution of `op` keeps for backward (× op.count for all of them)."""
    name, d = op.name, op.dims
    if op.kind == "attention":
        return attention_saved(op, spec, act_dtype, kernel, recompute, dropout)
    if op.kind == "norm":
        stats = (2 if d.norm == "layernorm" else 1) * d.m * STATS_BYTES
        if _input_kept_elsewhere(op, spec):
            return stats
        width = d.width + spec.attention.qk_rope_head_dim if name == "layers.attn.kv_a_norm" else d.width
        return nbytes(d.m * width, act_dtype) + stats  # kv_a_norm reads a view of [latent | rope key]
    if spec.residual.kind == "hyper" and "hc." in name and name not in ("layers.hc.norm", "layers.hc.proj"):
        return _hyper_saved(op, spec, act_dtype)
    if spec.residual.kind == "mhc" and ("hc." in name or "mhc." in name):
        return _mhc_saved(op, spec, act_dtype)
    if "attnres." in name:
        # Each depth attention stacks its s sources [m, s, D] (kept by its key RMSNorm, with fp32 rstd
        # [m, s], and by the weighted sum), keeps the normed keys [m, s, D] for the logits and the
        # softmax [m, s]; over all units and the output the sources add up to the softmax op's width.
        if name != "attnres.softmax":
            return 0.0
        sources = d.m * d.width
        return nbytes(sources * (2 * spec.d_model + 1), act_dtype) + sources * STATS_BYTES
    if name.startswith("layers.moe."):
        moe = _moe_saved(op, spec, act_dtype)
        if moe is not None:
            return moe
    if op.kind == "matmul" and not isinstance(d, MatmulDims):
        return 0.0  # a residual-stream contraction: its inputs are counted where they are made
    if op.kind == "matmul":
        if _input_kept_elsewhere(op, spec):
            return 0.0
        if name == "layers.attn.o" and kernel == "flash" and recompute != "selective":
            return 0.0  # the attention output, which the fused kernel keeps
        return nbytes(d.m * d.k, act_dtype)
    if op.kind == "elementwise":
        if name.endswith(".act"):
            return nbytes(d.m * d.width * ACTIVATION_KEEPS[spec.ffn.activation], act_dtype)
        if name == "lm_head.softcap":  # tanh keeps its output
            return nbytes(d.m * d.width, act_dtype)
    return 0.0


def _moe_saved(op: Op, spec: ModelSpec, act_dtype: str) -> float | None:
    """Routing's own tensors (None: the op is an ordinary matmul or activation).
    router: its input, the softmax over E [m, E], the top-k indices and the
    renormalised top-k weights [m, k] with their sum [m]; combine: each routed
    row's expert output [D] and weight (their product's factors), the weighted
    row (index_add keeps its source), and the row's token and slot indices;
    shared gate: sigmoid(g) [m] and the shared expert's output [m, D] it scales."""
    k, d = spec.ffn.moe.top_k, op.dims
    if op.name == "layers.moe.router":
        m, width = d.m, 0 if _input_kept_elsewhere(op, spec) else d.k
        return nbytes(m * (width + d.n + k + 1), act_dtype) + m * k * INDEX_BYTES
    if op.name == "layers.moe.combine":
        rows = d.m * k
        return nbytes(rows * (2 * d.width + 1), act_dtype) + 2 * rows * INDEX_BYTES
    if op.name == "layers.moe.shared_gate":
        return nbytes(d.m * (1 + spec.d_model), act_dtype)
    return None


def _hyper_saved(op: Op, spec: ModelSpec, act_dtype: str) -> float:
    """Hyper-connections (their ops are named hc.*), per unit: the n streams H [m, n·D] that the read
    and mix contractions keep (a dynamic connection's RMSNorm keeps them already), and the unit's
    output [m, D] that Bᵀ·F(h0) keeps; a dynamic connection also keeps its coefficients B [m, n],
    A_m [m, n], A_r [m, n, n] and the tanh outputs they are built from.  The first unit's streams
    are views of the embedding output (a [m, D] tensor, not [m, n·D]): hc.expand takes the
    difference back.  The norm and the projection of a dynamic connection follow the usual rules."""
    n, D, r = spec.residual.streams, spec.d_model, spec.residual
    if op.name == "layers.hc.read":
        return 0.0 if r.dynamic else nbytes(op.dims.m * n * D, act_dtype)
    if op.name == "layers.hc.write":
        coefficients = 2 * (2 * n + n * n) if r.dynamic else 0
        return nbytes(op.dims.m * (D + coefficients), act_dtype)
    if op.name == "hc.expand":
        return -nbytes(op.dims.m * (n - 1) * D, act_dtype)
    return 0.0  # mixing and merging keep nothing of their own


def _mhc_saved(op: Op, spec: ModelSpec, act_dtype: str) -> float:
    """mHC, per unit: the n streams H [m, n·D] (kept by the contractions and by the RMS norm, whose
    fp32 statistics [m] it adds; below fp32 torch's composite rms_norm keeps an fp32 copy as well),
    the normed state phi reads, the coefficient logits [m, n² + 2n], the sigmoid and Sinkhorn-Knopp
    intermediates (sigmoid(pre), sigmoid(post), 2·sigmoid(post) [m, n] each; the shifted logits
    [m, n²] and their max [m]; exp [m, n²]; per iteration the column and row sums [m, n] and the
    two normalised matrices [m, n²]), and the unit's output [m, D].  The first unit's n > 1 streams
    are a view of the embedding output, which its contraction keeps beside the copy its flatten
    makes: hc.expand adds the embedding output (and, below fp32, takes back the copy, which only
    its fp32 upcast outlives)."""
    n, D, iters, m = spec.residual.streams, spec.d_model, spec.residual.sinkhorn_iters, op.dims.m
    if op.name == "layers.hc.read":
        return nbytes(m * n * D, act_dtype)
    if op.name == "layers.mhc.rms":
        upcast = m * n * D * STATS_BYTES if act_dtype != "fp32" else 0
        return m * STATS_BYTES + upcast
    if op.name == "layers.mhc.coeffs":
        return nbytes(m * (op.dims.k + op.dims.n), act_dtype)  # its input and its output logits
    if op.name == "layers.mhc.sinkhorn":
        return nbytes(m * (3 * n + 2 * n * n + 1 + iters * (2 * n + 2 * n * n)), act_dtype)
    if op.name == "layers.hc.write":
        return nbytes(m * D, act_dtype)
    if op.name == "hc.expand":
        # One stream is x itself.  n > 1 streams are a view of x (which the first contraction keeps) that
        # flatten copies for the RMS norm; below fp32 the norm keeps its fp32 upcast instead of that copy.
        if n == 1:
            return 0.0
        return nbytes(m * D, act_dtype) - (nbytes(m * n * D, act_dtype) if act_dtype != "fp32" else 0.0)
    return 0.0  # mixing and merging keep nothing of their own


def _input_kept_elsewhere(op: Op, spec: ModelSpec) -> bool:
    """The op reads a tensor an earlier op of the same layer already keeps."""
    parallel = spec.residual.kind == "parallel"
    if op.name in ("layers.ffn.up", "layers.moe.router") and parallel and (spec.residual.parallel_norms == 1 or spec.norm.kind == "none"):
        return True  # one N(x) (or x itself) feeds QKV and the FFN
    if op.name == "layers.ffn.norm" and parallel:
        return True  # both norms read the same x
    if op.name == "layers.moe.shared.up":
        return True  # the router keeps the FFN's input
    return op.name == "layers.attn.kv_a"  # MLA: q (or q_a) keeps x


def dropout_saved(spec: ModelSpec, tokens: int) -> float:
    """Dropout masks Megatron-LM keeps outside attention: the embedding's output
    and each residual unit's output (hidden dropout), one bool per value."""
    return tokens * spec.d_model * (1 + 2 * spec.n_layers) * MASK_BYTES


def loss_saved(spec: ModelSpec, tokens: int, z_loss: bool) -> float:
    """The cross-entropy keeps its fp32 log-probabilities [m, V]; a z-loss
    (log Z)² keeps the fp32 logits and log Z as well (logsumexp's input and output)."""
    V = spec.head_vocab
    return tokens * V * LOSS_BYTES + (tokens * (V + 1) * LOSS_BYTES if z_loss else 0)


def layer_input_bytes(spec: ModelSpec, tokens: int, act_dtype: str) -> float:
    """What full recomputation keeps of one layer: its input, the residual stream (n streams
    under hyper-connections and mHC)."""
    streams = spec.residual.streams if spec.residual.kind in ("hyper", "mhc", "altup") else 1
    return nbytes(tokens * spec.d_model * streams, act_dtype)


LAYER_PREFIX = "layers."


@dataclass(frozen=True)
class ActivationMemory:
    """What one micro-batch's forward keeps until its backward, on one rank."""

    layers: float  # all layers this rank runs (full recompute: their inputs only)
    head: float  # final norm, lm_head, soft-capping
    loss: float  # log-probabilities (and the z-loss's logits)
    dropout: float  # hidden-dropout masks
    recompute_peak: float  # full recompute: one layer's activations, rebuilt during its backward

    @property
    def stored(self) -> float:
        """Kept from the end of the forward to the backward (what tests pin)."""
        return self.layers + self.head + self.loss + self.dropout


def saved_share(op: Op, tp: int, sequence_parallel: bool) -> float:
    """Share of an op's saved tensors one of `tp` ranks keeps.  With sequence
    parallelism (Korthikanti et al. §4.2.2) every tensor is split, by heads,
    width or sequence: 1/t.  Without it the ops outside the TP region keep
    theirs whole (norms; a column-parallel matmul's input is the whole
    replicated x), which is the paper's 10·sbh that does not shrink with t."""
    if tp == 1 or sequence_parallel:
        return 1.0 / tp
    if op.tp == "replicated" or (op.kind == "matmul" and op.tp in ("split", "qkv")):
        return 1.0
    return 1.0 / tp


def activation_memory(spec: ModelSpec, ops: list[Op], tokens: int, act_dtype: str, *,
                      kernel: AttentionKernel = "flash", recompute: Recompute = "none", dropout: bool = False,
                      z_loss: bool = False, layer_share: float = 1.0, tp: int = 1,
                      sequence_parallel: bool = True) -> ActivationMemory:
    """Sums op_saved over a training op list (the whole model's, at one rank's
    `tokens` rows: a micro-batch, its context-parallel share) on one of `tp` ranks.
    layer_share: the fraction of the layers this rank runs (a pipeline stage's)."""
    per_op = "none" if recompute == "full" else recompute
    layers = head = 0.0
    for op in ops:
        saved = op_saved(op, spec, act_dtype, kernel=kernel, recompute=per_op, dropout=dropout) * op.count
        saved *= saved_share(op, tp, sequence_parallel)
        if op.name.startswith(LAYER_PREFIX):
            layers += saved
        else:
            head += saved
    layers *= layer_share
    replicated = 1.0 / tp if sequence_parallel else 1.0  # the residual stream and its dropout masks
    peak, masks = 0.0, 0.0
    if recompute == "full":
        peak = layers / (spec.n_layers * layer_share)  # the mean layer, rebuilt one at a time
        layers = layer_input_bytes(spec, tokens, act_dtype) * spec.n_layers * layer_share * replicated
    elif dropout:
        masks = dropout_saved(spec, tokens) * layer_share * replicated
    loss = loss_saved(spec, tokens, z_loss) / tp  # vocab-parallel: each rank keeps V/t of the logits
    return ActivationMemory(layers, head, loss, masks, peak)
