"""The parallelism explorer: its state is parallel.plan's, its sliders recompute it, bad layouts show roofkit's
message instead of raising, and a page without a live kernel still shows the numbers and the bars."""

import base64
import html
import re

import pytest

from roofkit.catalogs import hardware, links
from roofkit.perf import parallel
from roofkit.errors import InvalidValue, UnknownHardware
from roofkit.course.explore import parallel_explorer
from roofkit.course.explore.parallel import BATCHES, DEGREES, GPU_COUNTS, build_explorer, explorer_state, summary


def _text(explorer) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", explorer.label.value))


def test_state_is_the_plan():
    state = explorer_state("llama-3-70b", "h100", 1024, 8, 4, 1, 4 * 2**20, 8192)
    plan = parallel.plan("llama-3-70b", "h100", 1024, 4 * 2**20, 8192, tp=8, pp=4, zero=1, sequence_parallel=True)
    for field in ("step_time_s", "compute_s", "communication_s", "bubble_s", "mfu", "memory_per_gpu_bytes", "fits",
                  "dp", "layout"):
        assert state[field] == getattr(plan, field), field
    assert state["memory_gb"]["total"] == pytest.approx(plan.memory_per_gpu_bytes / 1e9)
    assert state["capacity_bytes"] == hardware.get("h100").capacity_bytes
    assert state["dp"] == 1024 // (8 * 4)


def test_summary_is_the_starting_text():
    plan = parallel.plan("llama-3-70b", "h100", 1024, 4 * 2**20, 8192, tp=8, pp=4, zero=1, sequence_parallel=True)
    assert summary() == ("Llama 3 70B on 1,024 H100 SXM5 80GB, TP 8 · PP 4 · DP 32 · ZeRO-1, 4M-token batch: "
                         f"{plan.memory_per_gpu_bytes / 1e9:.1f} GB per GPU (fits); step {plan.step_time_s:.3g} s (compute {plan.compute_s / plan.step_time_s:.0%}"
                         f", communication {plan.communication_s / plan.step_time_s:.0%}, bubble "
                         f"{plan.bubble_s / plan.step_time_s:.0%}); MFU {plan.mfu:.1%} (bound)")
    calibrated = parallel.plan("llama-3-70b", "h100", 1024, 4 * 2**20, 8192, tp=8, pp=4, zero=1,
                               sequence_parallel=True, calibrated=True)
    assert summary(calibrated=True).endswith(f"MFU {calibrated.mfu:.1%} (estimate)")


@pytest.mark.parametrize("args, message", [
    (dict(gpus=8, tp=8, pp=4), "not a multiple of tp x cp x pp = 32"),
    (dict(gpus=16384, tp=1, pp=1, global_batch_tokens=2**19), "needs at least"),
    (dict(model="llama-3-8b", gpus=64, tp=1, pp=64), "at most one stage per layer"),
])
def test_a_layout_roofkit_cannot_plan_gives_its_message(args, message):
    state = explorer_state(**args)
    assert message in state["error"] and state["plan"] is None
    assert "cannot plan" in state["summary"]


def test_starting_call_prints_the_summary_and_carries_a_png(capsys):
    explorer = parallel_explorer()
    assert capsys.readouterr().out.strip() == summary()
    assert "roofkit-plan" in explorer.label._dom_classes and "roofkit-parallel-plot" in explorer.plot._dom_classes
    assert "run the notebook live" in repr(explorer)
    bundle = explorer._repr_mimebundle_()
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert explorer.plot.children == (explorer.image,) and bytes(explorer.image.value).startswith(b"\x89PNG")
    assert all(explorer.inputs[k].continuous_update for k in ("gpus", "tp", "pp", "zero", "global_batch_tokens"))


def test_sliders_recompute_the_label_and_the_plot():
    explorer = build_explorer()
    first_text, first_png, static = _text(explorer), explorer.image.value, explorer._png
    held = explorer.state["memory_per_gpu_bytes"] / 1e9
    assert f"{held:.1f} GB fits" in first_text and "DP = GPUs / (TP · PP) = 1,024 / 32" in first_text

    explorer.inputs["tp"].value = 2  # less tensor parallelism: more memory per GPU
    assert explorer.state["tp"] == 2 and explorer.state["fits"] is False
    assert "does not fit" in _text(explorer) and explorer.image.value != first_png and explorer._png == static
    assert explorer.state["summary"] == summary(tp=2)

    explorer.inputs["tp"].value = 16  # across two nodes: the plan warns
    assert "spans 2 nodes" in _text(explorer)

    explorer.inputs["zero"].value = 3
    explorer.inputs["recompute"].value = True
    explorer.inputs["global_batch_tokens"].value = 16 * 2**20
    assert explorer.state["summary"] == summary(tp=16, zero=3, recompute=True, global_batch_tokens=16 * 2**20)

    explorer.inputs["gpus"].value = 8  # TP x PP = 64 > 8 GPUs: roofkit's message, no exception
    assert "cannot plan this layout" in _text(explorer) and "not a multiple" in _text(explorer)
    explorer.inputs["gpus"].value = 2048
    assert "cannot plan" not in _text(explorer)


def test_model_and_accelerator_dropdowns():
    explorer = build_explorer()
    explorer.inputs["model"].value = "llama-3.1-405b"
    assert "Llama 3.1 405B" in _text(explorer)
    explorer.inputs["hw"].value = "b200"
    assert explorer.state["accelerator"] == "b200" and "B200" in _text(explorer)
    keys = [key for _, key in explorer.inputs["hw"].options]
    assert "h100-sxm" in keys and "gb200" in keys and "t4" not in keys  # only accelerators with a link domain
    assert all(any(x.gpus for x in links.for_accelerator(k)) for k in keys)


def test_sliders_offer_the_documented_values():
    explorer = build_explorer()
    assert [v for _, v in explorer.inputs["gpus"].options] == list(GPU_COUNTS)
    assert list(explorer.inputs["tp"].options) == list(DEGREES) == list(explorer.inputs["pp"].options)
    assert [v for _, v in explorer.inputs["global_batch_tokens"].options] == list(BATCHES)


@pytest.mark.parametrize("args, error, message", [
    (dict(hw="t4"), InvalidValue, "has no NVLink domain or pod"),
    (dict(hw="h1000"), UnknownHardware, "h1000"),
    (dict(gpus=1000), InvalidValue, "gpus = 1000 is not on the explorer's slider"),
    (dict(tp=3), InvalidValue, "tp = 3"),
    (dict(zero=4), InvalidValue, "zero = 4"),
])
def test_a_bad_start_raises_at_once(args, error, message):
    with pytest.raises(error, match=re.escape(message)):
        build_explorer(**args)


def test_the_static_picture_heads_each_legend_with_its_title_and_nothing_overlaps():
    # learner report: in the static picture of lesson 14's explorer the legends sat over the subplot titles. Each
    # heading is now its legend's title, one block above the bars, so neither can cover the other, and no text of
    # the figure overlaps another
    explorer = build_explorer()
    fig = explorer.live.fig
    renderer = explorer.live.canvas.get_renderer()
    headings = []
    for ax in fig.axes:
        legend = ax.get_legend()
        headings.append(legend.get_title().get_text())
        assert not any(t.get_text() for t in (ax.title, ax._left_title, ax._right_title))  # no title to cover
        box = legend.get_window_extent(renderer)
        assert box.y0 >= ax.get_window_extent(renderer).y1 - 1  # above the bars
        assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1)  # not cut off
    assert headings == ["memory per GPU", "where a step's time goes"]
    texts = [t for ax in fig.axes for t in [*ax.get_legend().get_texts(), ax.get_legend().get_title(), ax.xaxis.label,
                                            *ax.get_xticklabels()] if t.get_text()]
    boxes = [t.get_window_extent(renderer) for t in texts]
    for i, a in enumerate(boxes):
        for j in range(i + 1, len(boxes)):
            assert not a.overlaps(boxes[j]), (texts[i].get_text(), texts[j].get_text())
