"""The serving explorer: its state is roofkit.inference.serve's, callbacks update it, bad choices do not break it."""

import base64
import html
import re

import pytest

from roofkit.errors import InvalidValue, UnknownName
from roofkit.course.explore import serving_explorer
from roofkit.course.explore.serving import BATCHES, CONTEXTS, build_explorer, explorer_state, summary
from roofkit.plots import serving as plot
from roofkit.perf.inference import serve


def _text(explorer) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", explorer.label.value))


def test_state_is_the_serving_estimate():
    state = explorer_state("llama-3-70b", "h100", 8, "bf16", "bf16", 8192, 64)
    s = serve("llama-3-70b", "h100", 8, 8192, batch=64)
    for key, value in s.to_dict().items():
        if key not in ("accelerator",):
            assert state[key] == value, key
    assert state["max_batch"] == 176 and state["fits"] is True


def test_summary_is_the_starting_text(capsys):
    explorer = serving_explorer()
    assert capsys.readouterr().out.strip() == summary()
    assert summary().startswith("Llama 3 70B on 8 x H100 SXM5 80GB, bf16 weights, bf16 cache, 8,192 tokens, batch 64: "
                                "fits (largest batch 176)")
    assert "roofkit-serving" in explorer.label._dom_classes and "roofkit-plot" in explorer.plot._dom_classes
    assert "roofkit-batch" in explorer.inputs["batch"]._dom_classes
    bundle = explorer._repr_mimebundle_()
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")
    assert "run the notebook live" in repr(explorer)


def test_callbacks_update_the_label_and_the_plot():
    explorer = build_explorer()
    first, static = explorer.image.value, explorer._png
    assert "fits" in _text(explorer) and "does not fit" not in _text(explorer)
    assert explorer.inputs["batch"].continuous_update and explorer.inputs["context"].continuous_update

    explorer.inputs["batch"].value = 512  # beyond the memory limit
    assert "does not fit" in _text(explorer) and explorer.image.value != first and explorer._png == static
    assert explorer.state["batch"] == 512 and explorer.state["fits"] is False

    explorer.inputs["weights_dtype"].value = "int4"  # less memory for the weights, more for the cache
    int4 = explorer.state["max_batch"]
    assert int4 > 176

    explorer.inputs["kv_dtype"].value = "fp8"  # half the cache per token: about twice the batch
    assert explorer.state["kv_bytes_per_token"] == 2 * 80 * 8 * 128
    assert explorer.state["max_batch"] == pytest.approx(2 * int4, abs=1)

    explorer.inputs["context"].value = 131072
    assert explorer.state["context"] == 131072 and explorer.state["max_batch"] < int4

    explorer.inputs["gpus"].value = 1
    explorer.inputs["weights_dtype"].value = "bf16"
    assert "need 2 GPUs at least" in _text(explorer)


def test_choices_roofkit_cannot_serve_show_a_message():
    explorer = build_explorer()
    explorer.inputs["model"].value = "deepseek-v3"  # latent attention: timed now (tests/test_mla_serving.py)
    assert "latency not modelled" not in _text(explorer) and explorer.state["tpot_s"] > 0
    explorer.inputs["model"].value = "llama-3-8b"
    explorer.inputs["hw"].value = "t4"  # FP16 math: no BF16 on a T4
    assert explorer.state["dtype"] == "fp16" and explorer.state["tpot_s"] > 0
    explorer.inputs["weights_dtype"].value = "fp8"
    explorer.inputs["hw"].value = "a100-sxm4-80gb"  # FP8 weights multiplied in BF16: fine on an A100
    assert explorer.state["tpot_s"] > 0


def test_bad_starting_values_name_the_choices():
    with pytest.raises(InvalidValue, match=r"batch must be one of 1, 2, 4"):
        build_explorer(batch=3)
    with pytest.raises(InvalidValue, match="context must be one of 512"):
        build_explorer(context=1000)
    with pytest.raises(UnknownName):
        build_explorer(model="llama-9")


def test_the_curve_marks_the_memory_limit():
    sweep = plot.batch_sweep("llama-3-70b", "h100", 8, 8192, BATCHES)
    assert 176 in sweep["batch"] and sweep["max_batch"] == 176
    assert [b <= 176 for b in sweep["batch"]] == sweep["fits"]
    assert sweep["tpot_s"] == sorted(sweep["tpot_s"]) and sweep["tokens_per_s"] == sorted(sweep["tokens_per_s"])
    assert set(CONTEXTS) >= {4096, 8192, 32768}


@pytest.mark.parametrize("model, hw, gpus, weights, cache", [
    ("llama-3-70b", "h100", 8, "bf16", "bf16"), ("llama-2-7b", "a10", 2, "int4", "bf16"),
    ("llama-3-8b", "t4", 1, "bf16", "bf16"), ("mistral-7b", "gb200", 16, "bf16", "fp8"),
    ("qwen3-30b-a3b", "mi325x", 4, "fp8", "fp8"), ("llama-3.1-405b", "b200", 8, "int4", "fp8"),
])
def test_the_curves_axes_hold_every_context_and_batch(model, hw, gpus, weights, cache):
    """The curves' ranges come from the corners (shortest and longest context, smallest and largest batch): every
    point the sliders can reach lies inside them, so the axes stay put as the context and the batch move."""
    from roofkit.catalogs import hardware
    from roofkit.course.explore.serving import _math, _ranges, _sweep

    dtype = _math(hardware.get(hw))
    (t_lo, t_hi), (r_lo, r_hi) = _ranges(model, hw, gpus, dtype, weights, cache)
    for context in CONTEXTS:
        sweep = _sweep(model, hw, gpus, context, dtype, weights, cache)
        assert all(t_lo * (1 - 1e-9) <= t <= t_hi * (1 + 1e-9) for t in sweep["tpot_s"]), context
        assert all(r_lo * (1 - 1e-9) <= r <= r_hi * (1 + 1e-9) for r in sweep["tokens_per_s"]), context


def test_the_memory_bar_is_a_share_of_one_gpu():
    from roofkit.course.explore.serving import _Figure

    state = explorer_state("llama-3-70b", "h100", 8, "bf16", "bf16", 8192, 64)
    top = _Figure(state).live.fig.axes[0]
    assert top.get_xlim() == (0, plot.MemoryBar.END)
    assert top.get_title(loc="right") == "85.5 GB per GPU: reserve 8.55 GB, weights 17.6 GB"
    g = state["plan"].per_gpu
    assert [round(bar.get_width(), 4) for bar in top.patches[:3]] == [
        round(g[k] / g["capacity_bytes"], 4) for k in ("reserve_bytes", "weights_bytes", "kv_bytes")]
    assert any(t.get_text() == "47.7 GB in use" for t in top.texts)


# --- the queue explorer --------------------------------------------------------------------------------------------


def test_queue_state_is_the_simulation():
    from roofkit.course.explore.serving import queue_state

    state = queue_state("llama-3-8b", "h100", 1000, 200, 32.0, requests=2000)
    run = plot.simulation("llama-3-8b", "h100", 1000, 200, 32.0, requests=2000)
    for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p99_s", "requests_per_s", "tokens_per_s", "goodput"):
        assert state[k] == run.to_dict()[k], k
    assert state["capacity"] == plot.capacity("llama-3-8b", "h100", 1000, 200)
    assert state["load"] == pytest.approx(32 / state["capacity"]) and state["meets"] is True
    assert state["lone_ttft_s"] < state["ttft_p50_s"] < state["ttft_p99_s"] < state["slo_ttft_s"]


def test_queue_summary_is_the_starting_text(capsys):
    from roofkit.course.explore.serving import queue_explorer, queue_summary

    explorer = queue_explorer(requests=2000)
    assert capsys.readouterr().out.strip() == queue_summary(rate=32.0, requests=2000)
    assert queue_summary(requests=2000).startswith("Llama 3 8B on 1 x H100 SXM5 80GB, 1,000 in / 200 out, "
                                                   "32 requests/s (90% of its capacity, 35.8/s): TTFT median")
    assert repr(explorer) == "queue explorer (widgets: run the notebook live to move the request rate)"
    assert "roofkit-queue" in explorer.label._dom_classes and "roofkit-rate" in explorer.inputs["rate"]._dom_classes


def test_queue_callbacks_move_the_rate_and_keep_its_share():
    from roofkit.course.explore.serving import QUEUE_LOADS, build_queue_explorer

    explorer = build_queue_explorer(requests=2000)
    rate = explorer.inputs["rate"]
    assert rate.value == 32.0 and QUEUE_LOADS[rate.index] == 0.9 and "p99" in _text(explorer)
    rate.value = rate.options[-1][1]  # 150% of the capacity: the queue grows, the target is missed
    assert explorer.state["rate"] == rate.value and explorer.state["meets"] is False
    assert explorer.state["ttft_p99_s"] > explorer.state["slo_ttft_s"]
    assert explorer.state["goodput"] < explorer.state["requests_per_s"]
    explorer.inputs["hw"].value = "h200"  # a faster server: the same share of a larger capacity
    assert QUEUE_LOADS[rate.index] == 1.5 and explorer.state["hw"] == "h200"
    assert explorer.state["capacity"] > plot.capacity("llama-3-8b", "h100", 1000, 200)
    explorer.inputs["model"].value = "llama-3-70b"  # 140 GB of BF16 weights on one H200: roofkit says so
    assert explorer.state["error"] and "do not fit" in _text(explorer)
    explorer.inputs["gpus"].value = 2
    assert explorer.state["error"] is None and explorer.state["gpus"] == 2 and "goodput" in _text(explorer)


def test_queue_bad_starting_values_name_the_choices():
    from roofkit.course.explore.serving import build_queue_explorer

    with pytest.raises(InvalidValue, match=r"load must be one of 0.1, 0.25"):
        build_queue_explorer(load=0.8)
    with pytest.raises(InvalidValue, match=r"input_tokens must be one of 128, 256"):
        build_queue_explorer(input_tokens=1024)
    with pytest.raises(UnknownName):
        build_queue_explorer(model="llama-9")
