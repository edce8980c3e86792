"""The roofline chart: files written, every op shown and named, labels that do not overlap, measured points."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from itertools import combinations
from types import SimpleNamespace

import matplotlib  # noqa: F401  (a dev dependency: missing is an error, never a skip)
import pytest
from matplotlib.text import Text

import archcalc
from archcalc.cost.roofline import predict
from archcalc.errors import InputError
from archcalc.hardware.profile import TypicalRates
from archcalc.report.plot import OP_LABEL, build_figure, check_plot_path, roofline_chart

BOTH = ("prefill", "decode")


@pytest.fixture(scope="module")
def qwen():
    return archcalc.roofline("qwen3-30b-a3b", "h100-sxm", prompt=512, gen=16, batch=4)


@pytest.fixture(scope="module")
def llama():
    return archcalc.roofline("llama-3.1-8b", "h100")


def with_typical(r):
    """The same result with a typical rate set after peak (no bundled profile has one yet)."""
    hw = r.hardware.model_copy(update={"typical": TypicalRates(
        gemm_efficiency=0.7, bandwidth_efficiency=0.85, attention_prefill_efficiency=0.5,
        attention_decode_efficiency=0.8, launch_s=4e-6, compute_units=132)})
    wl = r.predictions[0].decode.workload
    preds = predict(r.spec, hw, prompt=r.prompt, context=r.context, gen=r.gen, batch=r.batch, tp=r.tp,
                    weight_dtype=wl.weight_dtype, act_dtype=wl.act_dtype, kv_dtype=wl.kv_dtype)
    assert [p.rates.label for p in preds] == ["peak", "typical"]
    return replace(r, hardware=hw, predictions=preds)


def fake_measured(r, phases, slowdown=2.0):
    """Stand-ins for measure.steps.MeasuredStep: every op takes `slowdown` × its last-rate-set time."""
    steps = []
    for phase in phases:
        ops = tuple(SimpleNamespace(name=o.op.name, count=o.op.count, seconds=slowdown * o.time, note="")
                    for o in getattr(r.predictions[-1], phase).ops)
        steps.append(SimpleNamespace(phase=phase, ops=ops, device="fake0", dtype="bf16",
                                     by_name=lambda ops=ops: {o.name: o for o in ops}))
    return replace(r, measured=tuple(steps))


def drawn(r, phases):
    fig = build_figure(r, phases)
    fig.canvas.draw()
    return fig


def texts(fig) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_text()]


def op_labels(fig, phase=None) -> list[Text]:
    want = f"{OP_LABEL}:{phase}" if phase else OP_LABEL
    return [t for t in texts(fig) if (t.get_gid() or "").startswith(want)]


def key(fig) -> dict[str, int]:
    """The side panel's key: op name -> label number."""
    out = {}
    for t in texts(fig):
        if t.get_gid() == "op-key":
            number, name = t.get_text().split()
            out[name] = int(number)
    return out


def offsets(fig, gid):
    (coll,) = [c for c in fig.axes[0].collections if c.get_gid() == gid]
    return [tuple(xy) for xy in coll.get_offsets()]


def shown_ops(r, phase):
    return [o for o in getattr(r.predictions[-1], phase).ops if o.flops > 0]


# ---- files -------------------------------------------------------------------------------------


def test_png_and_svg_are_written(qwen, tmp_path):
    png, svg = tmp_path / "r.png", tmp_path / "r.svg"
    roofline_chart(qwen, BOTH, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    roofline_chart(qwen, ("decode",), str(svg))
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()


@pytest.mark.parametrize("path", ["x.pdf", "x", "x.png.txt", "plot.jpg"])
def test_other_suffixes_are_an_input_error(path, tmp_path):
    with pytest.raises(InputError, match=r"--plot writes \.png or \.svg"):
        check_plot_path(path)
    with pytest.raises(InputError, match=r"--plot writes \.png or \.svg"):
        roofline_chart(None, BOTH, str(tmp_path / path))  # refused before the result is looked at
    assert not (tmp_path / path).exists()


def test_missing_matplotlib_is_an_input_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    with pytest.raises(InputError, match=r"needs matplotlib: pip install 'archcalc\[plot\]'") as e:
        check_plot_path("out.png")
    assert e.value.source == "out.png"


def test_importing_the_module_does_not_import_matplotlib():
    code = "import sys, archcalc.report.plot; assert 'matplotlib' not in sys.modules, 'imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- what the chart shows -------------------------------------------------------------------


@pytest.mark.parametrize("which, phases", [("qwen", BOTH), ("llama", BOTH), ("llama", ("decode",)),
                                           ("qwen", ("prefill",))])
def test_every_op_with_flops_is_a_point_with_its_name_and_number(which, phases, request):
    r = request.getfixturevalue(which)
    fig = drawn(r, phases)
    numbers = key(fig)
    everything = " ".join(t.get_text() for t in texts(fig))
    for phase in phases:
        points = offsets(fig, f"predicted:{phase}")
        ops = shown_ops(r, phase)
        assert len(points) == len(ops) > 5
        labelled = {int(n) for t in op_labels(fig, phase) for n in re.findall(r"\d+", t.get_text())}
        for o, (x, y) in zip(ops, points):
            assert (x, y) == pytest.approx((o.intensity, o.flops / o.time), rel=1e-12)
            assert o.op.name in everything and o.op.name in numbers
            assert numbers[o.op.name] in labelled, (phase, o.op.name)
        assert len(labelled) == len({o.op.name for o in ops})  # no label for an op that is not shown
    shown = {o.op.name for phase in phases for o in shown_ops(r, phase)}
    assert set(numbers) == shown  # ops without FLOPs (the embedding gather) are left out
    assert sorted(numbers.values()) == list(range(1, len(shown) + 1))


def test_ops_without_flops_are_left_out(qwen):
    fig = drawn(qwen, BOTH)
    assert all(o.flops == 0 for o in qwen.predictions[-1].decode.ops if o.op.name == "embedding")
    assert "embedding" not in key(fig)
    assert len(offsets(fig, "predicted:decode")) == len(qwen.predictions[-1].decode.ops) - 1


@pytest.mark.parametrize("which", ["qwen", "llama"])
@pytest.mark.parametrize("measured", [False, True])
def test_no_two_op_labels_overlap(which, measured, request):
    r = request.getfixturevalue(which)
    if measured:
        r = fake_measured(r, BOTH)
    fig = drawn(r, BOTH)
    renderer = fig.canvas.get_renderer()
    labels = op_labels(fig)
    assert len(labels) >= 8
    boxes = [t.get_window_extent(renderer) for t in labels]
    for (a, ta), (b, tb) in combinations(zip(boxes, labels), 2):
        assert not a.overlaps(b), (ta.get_text(), tb.get_text())
    frame = fig.axes[0].get_window_extent(renderer)
    others = [t.get_window_extent(renderer) for t in fig.axes[0].texts if t not in labels]  # the ridge note
    lines = [ln for ln in fig.axes[0].lines if " roof: " in ln.get_label() or " ridge: " in ln.get_label()]
    paths = [ln.get_transform().transform_path(ln.get_path()) for ln in lines]
    assert len(paths) == len(r.predictions) + 1
    for box, t in zip(boxes, labels):
        assert frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1), t.get_text()
        assert not any(box.overlaps(o) for o in others), t.get_text()
        assert not any(p.intersects_bbox(box, filled=False) for p in paths), t.get_text()  # these charts have room


def test_labels_do_not_cover_the_markers(qwen):
    fig = drawn(qwen, BOTH)
    ax, renderer = fig.axes[0], fig.canvas.get_renderer()
    centres = [ax.transData.transform(xy) for phase in BOTH for xy in offsets(fig, f"predicted:{phase}")]
    for t in op_labels(fig):
        box = t.get_window_extent(renderer)
        assert not any(box.contains(x, y) for x, y in centres), t.get_text()


def test_measured_points_sit_at_the_achieved_flops_joined_to_the_prediction(llama):
    r = fake_measured(llama, BOTH)
    fig = drawn(r, BOTH)
    ax = fig.axes[0]
    for phase in BOTH:
        predicted, measured = offsets(fig, f"predicted:{phase}"), offsets(fig, f"measured:{phase}")
        assert len(measured) == len(predicted) == len(shown_ops(r, phase))
        for (px, py), (mx, my) in zip(predicted, measured):
            assert mx == pytest.approx(px, rel=1e-12) and my == pytest.approx(py / 2, rel=1e-12)
            joined = [ln for ln in ax.lines if list(ln.get_xdata()) == [px, px]
                      and sorted(ln.get_ydata()) == pytest.approx(sorted([py, my]))]
            assert joined, (phase, px)
        (coll,) = [c for c in ax.collections if c.get_gid() == f"measured:{phase}"]
        assert len(coll.get_facecolors()) == 0 or all(c[3] == 0 for c in coll.get_facecolors())  # hollow
        (pred,) = [c for c in ax.collections if c.get_gid() == f"predicted:{phase}"]
        assert tuple(coll.get_edgecolors()[0]) == pytest.approx(tuple(pred.get_facecolors()[0]))
    assert any(f"{phase}, measured (fake0)" in t.get_text() for t in texts(fig) for phase in BOTH)


def test_unmeasured_ops_have_no_measured_point(qwen):
    r = fake_measured(qwen, ("decode",))
    gone = r.measured[0].ops[2].name
    ops = tuple(replace_seconds(o, None) if o.name == gone else o for o in r.measured[0].ops)
    r = replace(r, measured=(SimpleNamespace(phase="decode", ops=ops, by_name=lambda: {o.name: o for o in ops}),))
    fig = drawn(r, BOTH)
    assert len(offsets(fig, "measured:decode")) == len(shown_ops(r, "decode")) - 1
    assert not [c for c in fig.axes[0].collections if c.get_gid() == "measured:prefill"]


def replace_seconds(o, seconds):
    return SimpleNamespace(**{**vars(o), "seconds": seconds})


# ---- roofs, ridge, title ---------------------------------------------------------------------


def test_every_rate_set_has_a_roof_and_points_are_the_last_set(qwen):
    r = with_typical(qwen)
    fig = drawn(r, BOTH)
    ax = fig.axes[0]
    peak, typical = (p.rates for p in r.predictions)
    roofs = {ln.get_label().split()[0]: ln for ln in ax.lines if " roof: " in ln.get_label()}
    assert set(roofs) == {"peak", "typical"}
    assert roofs["peak"].get_linestyle() == "-" and roofs["typical"].get_linestyle() == "--"
    assert max(roofs["peak"].get_ydata()) == pytest.approx(peak.matmul)
    assert max(roofs["typical"].get_ydata()) == pytest.approx(typical.matmul * typical.gemm_efficiency)
    x, y = roofs["typical"].get_xydata()[0]
    assert y / x == pytest.approx(typical.bandwidth)  # the slope is the (achievable) bandwidth
    assert "TFLOP/s" in roofs["typical"].get_label() and "TB/s" in roofs["typical"].get_label()
    ridge = [ln for ln in ax.lines if "ridge" in ln.get_label()]
    assert len(ridge) == 1 and ridge[0].get_xdata()[0] == pytest.approx(peak.ridge)
    labels = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert "prefill, predicted (typical rates)" in labels and "decode, predicted (typical rates)" in labels
    for phase in BOTH:
        ops = shown_ops(r, phase)
        got = [v for xy in offsets(fig, f"predicted:{phase}") for v in xy]
        assert got == pytest.approx([v for o in ops for v in (o.intensity, o.flops / o.time)], rel=1e-12)
        peak_ys = [o.flops / o.time for o in getattr(r.predictions[0], phase).ops if o.flops > 0]
        assert [y for _, y in offsets(fig, f"predicted:{phase}")] != pytest.approx(peak_ys)


def test_title_names_model_hardware_and_workload(qwen):
    title = drawn(qwen, BOTH).axes[0].get_title()
    for part in ("qwen3-30b-a3b", "H100 SXM", "batch 4", "prompt 512", "decode context 528"):
        assert part in title
    assert "TP" not in title
    tp = archcalc.roofline("llama-3.1-8b", "h100", prompt=256, gen=8, tp=2)
    fig = drawn(tp, BOTH)
    assert "TP 2" in fig.axes[0].get_title()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in op_labels(fig)]
    assert not any(a.overlaps(b) for a, b in combinations(boxes, 2))
