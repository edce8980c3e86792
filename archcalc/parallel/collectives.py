"""Tensor parallelism over t ranks: the op list ONE rank runs, with the
collectives that join the ranks, where Megatron-LM puts them.

Megatron-LM (Shoeybi et al. 2019, arXiv:1909.08053 §3; megatron/core/
tensor_parallel/layers.py and mappings.py):
- RowParallelLinear (attention o, FFN and expert down): each rank holds a
  partial sum of the whole [B·T, D] output, all-reduced: two all-reduces in
  the forward pass of each transformer layer (§3, Figure 4).  For MoE experts
  the all-reduce follows the expert down projection over the [B·T, D] layer
  output, not over the routed rows (the k expert outputs are combined before
  the reduction; the combine is linear, so partial sums combine as well).
  A shared expert is an MLP of its own, row-parallel down, and all-reduces on
  its own, as Megatron-Core's SharedExpertMLP does (vLLM sums routed and
  shared partials first and reduces once: one all-reduce fewer per layer).
- Parallel residual (x + Attn(N(x)) + MLP(N(x)): GPT-J, NeoX, Falcon): the
  attention and FFN partial sums are added first and reduced together: ONE
  all-reduce per layer, after the FFN down projection.
- VocabParallelEmbedding: each rank looks up the tokens in its vocabulary
  rows (zeros elsewhere), then an all-reduce of [B·T, D].
- lm_head (column-parallel over the vocabulary): an all-gather of the logits
  [logit_tokens, V] (vLLM's LogitsProcessor gathers them before sampling).
"""

from __future__ import annotations

from archcalc.ops.op import Op, collective
from archcalc.ops.workload import Workload
from archcalc.parallel.tensor import rank_op
from archcalc.spec.model import ModelSpec


def tp_ops(spec: ModelSpec, wl: Workload, ops: list[Op], tp: int) -> list[Op]:
    """Every op of `ops` (a layers.model_ops(spec, wl) list) as rank_op(op, tp),
    each followed by the collective Megatron-LM puts after it:
      "<op>.all_reduce" of [B·T, D] after every row-parallel matmul (count:
          that op's), except attention's o under a parallel residual, whose
          partial sum joins the FFN's all-reduce;
      "embedding.all_reduce" of [B·T, D] after the vocab-parallel embedding;
      "lm_head.all_gather" of [logit_tokens, V] after the unembedding.
    tp == 1: the ops unchanged, no collectives."""
    if tp == 1:
        return list(ops)
    D, parallel = spec.d_model, spec.residual.kind == "parallel"
    out = []
    for op in ops:
        out.append(rank_op(op, tp))
        if op.kind == "gather" and op.component == "embedding":
            out.append(collective(f"{op.name}.all_reduce", op.component, wl, D, tp, "all_reduce"))  # one embedding
        elif op.tp == "row" and not (parallel and op.component == "attention"):
            out.append(collective(f"{op.name}.all_reduce", op.component, wl, D, tp, "all_reduce", count=op.count))
        elif op.component == "lm_head" and op.kind == "matmul":
            out.append(collective(f"{op.name}.all_gather", op.component, wl, spec.head_vocab, tp, "all_gather",
                                  tokens=wl.logit_tokens))  # one lm_head
    return out
