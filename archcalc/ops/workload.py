"""Workload: what one step of the model processes.

Prefill, decode and training share one op list; they differ only here.
A step runs `batch` sequences (B), each adding `new_tokens` (T) to a context
that holds `context` (S) tokens once the step is done (S ≥ T).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Workload:
    batch: int = 1
    new_tokens: int = 1
    context: int = 1
    weight_dtype: str = "bf16"
    act_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    # "all": logits at every position (a training forward); "last": only at
    # each sequence's last token (what inference engines compute in prefill).
    logits: Literal["all", "last"] = "all"

    def __post_init__(self) -> None:
        if min(self.batch, self.new_tokens, self.context) < 1 or self.new_tokens > self.context:
            raise ValueError(f"invalid workload: batch {self.batch}, new tokens {self.new_tokens}, context {self.context}")
        if self.logits not in ("all", "last"):  # any other word would silently count logits at every position
            raise ValueError(f"invalid workload: logits {self.logits!r}; valid: 'all', 'last'")

    @property
    def tokens(self) -> int:
        """B·T: rows of every matmul in the step."""
        return self.batch * self.new_tokens

    @property
    def logit_tokens(self) -> int:
        return self.tokens if self.logits == "all" else self.batch

    @classmethod
    def forward(cls, seq_len: int, batch: int = 1, **dtypes) -> Workload:
        """A full forward pass over `batch` sequences of `seq_len` tokens."""
        return cls(batch=batch, new_tokens=seq_len, context=seq_len, **dtypes)

    @classmethod
    def decode(cls, context: int, batch: int = 1, **dtypes) -> Workload:
        """One generated token per sequence, attending to `context` tokens."""
        return cls(batch=batch, new_tokens=1, context=context, logits="last", **dtypes)
