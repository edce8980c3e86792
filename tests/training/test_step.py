"""The step's composition rules (training/step.py), each from its documented rule and the op list's
own times (cost/roofline.time_op, pinned elsewhere): which ops each pipeline stage runs, what
recomputation adds, which link a group uses, what hides behind what, what the optimizer moves."""

from __future__ import annotations

import pytest

from archcalc import api
from archcalc.cost.roofline import step_ops, time_op
from archcalc.hardware.profile import load_hardware
from archcalc.training.layout import Layout
from archcalc.training.memory import training_workload
from archcalc.training.step import FLASH_BACKWARD_FACTOR, INTER_NODE_BANDWIDTH, _group_spans_nodes

H100 = load_hardware("h100")


def plan(name="llama-3.1-8b", **options):
    return api.train(name, "h100", seq=4096, **options).result


def forward_times(r, rates):
    """Forward seconds of one micro-batch by kind of op: layers (all of them), embedding side, head side."""
    wl = training_workload(r.layout, r.recipe)
    out = {"layers": 0.0, "attention": 0.0, "first": 0.0, "last": 0.0}
    for op in step_ops(r.spec, wl, "causal", r.layout.tp):
        if op.kind == "collective":
            continue
        t = time_op(op, rates).time
        if op.name.startswith("layers."):
            out["layers"] += t
            out["attention"] += t if op.kind == "attention" else 0.0
        elif op.component == "lm_head" or op.name == "final_norm":
            out["last"] += t
        else:
            out["first"] += t
    return out


def test_pipeline_stages_run_their_layers_and_the_slowest_stage_sets_the_pace():
    """pp 2: each stage runs half the layers; the last adds the final norm and the 128k-vocabulary head,
    the first the embedding; the last is slower, and its forward is the step's."""
    r = plan(gpus=2, pp=2, zero=0)
    s = r.steps[0]
    t = forward_times(r, s.rates)
    assert t["last"] > t["first"]
    assert s.forward == pytest.approx(t["layers"] / 2 + t["last"])
    one = plan(gpus=1, zero=0)
    t1 = forward_times(one, one.steps[0].rates)
    assert one.steps[0].forward == pytest.approx(t1["layers"] + t1["first"] + t1["last"])


@pytest.mark.parametrize("recompute, rebuilt", [("none", None), ("selective", "attention"), ("full", "layers")])
def test_recomputation_reruns_the_attention_cores_or_the_layers(recompute, rebuilt):
    r = plan(gpus=8, zero=1, recompute=recompute)
    s = r.steps[0]
    t = forward_times(r, s.rates)
    assert s.recompute == pytest.approx(t[rebuilt] if rebuilt else 0.0)


@pytest.mark.parametrize("layout, crosses", [
    (Layout(tp=8, dp=2), {"tp": False, "dp": True}),
    (Layout(tp=2, dp=4), {"tp": False, "dp": False}),
    (Layout(tp=4, cp=4), {"tp": False, "cp": True}),
    (Layout(tp=8, pp=2), {"tp": False, "pp": True}),
    (Layout(tp=2, dp=8, ep=8), {"ep": True, "dp": True}),
    (Layout(tp=2, dp=4, ep=4), {"ep": False, "dp": False}),
    (Layout(tp=16), {"tp": True, "dp": False}),  # a group of one rank crosses nothing
    (Layout(tp=2, dp=2, pp=4), {"dp": False, "pp": True}),  # pp ranks 4 apart
    (Layout(tp=4, cp=2, dp=2), {"cp": False, "dp": True}),  # dp ranks 8 apart
    (Layout(tp=4, cp=2, dp=4, ep=2), {"ep": True}),
    (Layout(dp=1, pp=1), {"dp": False, "pp": False}),
])
def test_groups_cross_nodes_when_their_ranks_span_more_than_8_gpus(layout, crosses):
    """Megatron's rank order (tp innermost, cp, dp, pp): a group of `size` ranks at `stride` apart spans
    stride × size GPUs, beyond one 8-GPU node when that is more than 8."""
    assert {g: _group_spans_nodes(g, layout) for g in crosses} == crosses


def test_collective_links_nvlink_inside_a_node_the_nic_across():
    """Peak rates (no latency): a collective takes bytes ÷ the link: H100's NVLink, 900 GB/s both ways,
    450 GB/s each way; across nodes, one 400 Gb/s NIC per GPU, 50 GB/s."""
    inside = plan(gpus=8, zero=0).steps[0].comms
    across = plan(gpus=16, zero=0).steps[0].comms
    for comms, link in ((inside, 450e9), (across, INTER_NODE_BANDWIDTH)):
        for c in comms:
            assert c.seconds == pytest.approx(c.bytes_sent / link)
    assert not inside[0].inter_node and across[0].inter_node


def test_gradient_reduction_hides_behind_the_backward():
    s = plan(gpus=16, zero=0).steps[0]
    dp = sum(c.seconds for c in s.comms if c.comm.group == "dp")
    assert s.exposed("dp") == pytest.approx(max(0.0, dp - s.backward))
    assert s.exposed("dp") > 0  # 16 GB of fp32 gradients over the network outlast one backward


def test_fsdp_traffic_hides_behind_the_whole_compute():
    s = plan(gpus=16, zero=3, micro_batch=1, recompute="full", global_batch_tokens=4096 * 64).steps[0]
    fsdp = sum(c.seconds for c in s.comms if c.comm.group == "dp")
    window = (s.forward + s.backward + s.recompute) * s.micro_batches
    assert s.exposed("dp") == pytest.approx(max(0.0, fsdp - window))


def test_ring_attention_hides_behind_the_attention():
    r = plan(gpus=16, cp=16, dp=1, zero=0, global_batch_tokens=4096 * 2, micro_batch=1)
    s = r.steps[0]
    ring = sum(c.seconds for c in s.comms if c.comm.group == "cp")
    attention = forward_times(r, s.rates)["attention"] * (1 + FLASH_BACKWARD_FACTOR) * s.micro_batches
    assert s.exposed("cp") == pytest.approx(max(0.0, ring - attention))
    assert all(c.inter_node for c in s.comms if c.comm.group == "cp")


def test_tp_traffic_is_exposed_whole():
    s = plan(gpus=8, tp=8, zero=0).steps[0]
    assert s.exposed("tp") == pytest.approx(sum(c.seconds for c in s.comms if c.comm.group == "tp"))


@pytest.mark.parametrize("zero, gpus", [(0, 1), (1, 8), (3, 8)])
def test_the_optimizer_reads_and_writes_its_states_and_master_weights_once(zero, gpus):
    """AdamW under bf16-mixed: 8 bytes of states and 4 of master weights per parameter, read and
    written, over the ZeRO ranks from stage 1 on, at the rate set's bandwidth."""
    r = plan(gpus=gpus, zero=zero)
    s = r.steps[0]
    shards = gpus if zero >= 1 else 1
    assert s.optimizer == pytest.approx(2 * 12 * r.params / shards / s.rates.bandwidth)


def test_a_single_gpu_step_is_its_micro_batches_and_the_optimizer():
    s = plan(gpus=1, zero=0, micro_batch=1, global_batch_tokens=4096 * 4).steps[0]
    assert s.micro_batches == 4 and not s.comms
    assert s.time == pytest.approx(4 * (s.forward + s.backward) + s.optimizer)
