"""Training speed against published measurements: torchtitan's FSDP2 runs of
Llama 3 on 64 A100 80GB GPUs (pytorch/torchtitan docs/performance.md, at
commit 0413364: tokens per second per GPU, local batch size, activation
checkpointing; sequence length 8,192 for Llama 3).

Peak rates must predict more tokens/s than any measurement (peak is a lower
bound on time).  The typical rates are inference-derived efficiencies; for
training they are optimistic, and the band below is what they reach today
(README: Train, How good)."""

from __future__ import annotations

import pytest

from archcalc import api

# (model, local batch, torchtitan's checkpointing as archcalc's recompute, measured tokens/s per GPU)
TORCHTITAN_A100 = [
    ("llama-3.1-8b", 1, "selective", 2973),  # "selective op" AC, MFU 58.2%
    ("llama-3.1-70b", 1, "full", 331),  # full AC, MFU 51.7%
]
TYPICAL_BAND = (0.9, 1.6)  # predicted ÷ measured tokens/s that the typical rates stay inside


@pytest.mark.parametrize("name, local_batch, recompute, measured", TORCHTITAN_A100)
def test_torchtitan_fsdp2_on_64_a100(name, local_batch, recompute, measured):
    plan = api.train(name, "a100-80gb", gpus=64, fsdp=True, micro_batch=local_batch, recompute=recompute,
                     seq=8192, global_batch_tokens=8192 * local_batch * 64)
    r = plan.result
    assert r.memory.fits  # torchtitan ran it
    peak, typical = (s.tokens_per_s / 64 for s in r.steps)
    assert peak > measured  # a lower bound on time is an upper bound on throughput
    assert TYPICAL_BAND[0] < typical / measured < TYPICAL_BAND[1], typical / measured
