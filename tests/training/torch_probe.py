"""What torch itself keeps and communicates, measured on the CPU.

live_bytes: the bytes of every storage a forward (and its loss) allocated that
are still alive when it returns: what autograd keeps for backward, whatever
kept it (saved tensors, checkpoint inputs, views).  Parameters and buffers are
the model's own, not the forward's, and are left out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveStorages(TorchDispatchMode):
    """Records a weak reference to the storage of every tensor an op returns."""

    def __init__(self):
        super().__init__()
        self.storages: dict[int, tuple[StorageWeakRef, int]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                self.storages.setdefault(storage._cdata, (StorageWeakRef(storage), storage.nbytes()))
        return out

    def alive(self, exclude: set[int]) -> int:
        return sum(n for key, (ref, n) in self.storages.items() if key not in exclude and not ref.expired())


def live_bytes(model: torch.nn.Module, batch: int, tokens: int, *, z_loss: bool = False, seed: int = 0) -> int:
    """Bytes the forward of `batch` random sequences of `tokens` and its fp32
    cross-entropy (+ z-loss (log Z)²) keep until backward, less the loss itself."""
    torch.manual_seed(seed)
    V = model.spec.vocab_size
    ids = torch.randint(0, V, (batch, tokens))
    targets = torch.randint(0, V, (batch * tokens,))
    own = {t.untyped_storage()._cdata for t in [*model.parameters(), *model.buffers()]}
    mode = LiveStorages()
    with mode:
        logits = model(ids).reshape(batch * tokens, V).float()
        loss = F.cross_entropy(logits, targets)
        if z_loss:
            loss = loss + 1e-4 * torch.logsumexp(logits, -1).square().mean()
        del logits
        kept = mode.alive(own | {loss.untyped_storage()._cdata})
    loss.backward()  # the graph is whole: what it kept suffices
    return kept


def per_sequence_bytes(model: torch.nn.Module, tokens: int, **kw) -> int:
    """live_bytes(2 sequences) − live_bytes(1): what one more sequence adds.
    Tables the batch shares (RoPE cos/sin, masks, position ids) cancel."""
    return live_bytes(model, 2, tokens, **kw) - live_bytes(model, 1, tokens, **kw)


def fake_per_sequence_bytes(spec, tokens: int, dtype, **build) -> int:
    """per_sequence_bytes at full size: the reference model and its inputs under torch's
    FakeTensorMode (CPU kernels chosen, nothing allocated), so the widths are the real ones."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from archcalc.measure.reference import build_reference_model

    fake = FakeTensorMode()
    with fake:
        model = build_reference_model(spec, "cpu", dtype, **build)

    def kept(batch: int) -> int:
        with fake:
            ids = torch.randint(0, spec.vocab_size, (batch, tokens))
            targets = torch.randint(0, spec.vocab_size, (batch * tokens,))
        own = {t.untyped_storage()._cdata for t in [*model.parameters(), *model.buffers()]}
        mode = LiveStorages()
        with fake, mode:
            loss = F.cross_entropy(model(ids).reshape(batch * tokens, -1).float(), targets)
            return mode.alive(own | {loss.untyped_storage()._cdata})

    return kept(2) - kept(1)
