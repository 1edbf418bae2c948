"""The explorers' figures follow every control in place (explore/_box.py): a moved figure shows what a figure
drawn afresh at the same inputs shows, pixel for pixel, after sliders and after dropdowns and checkboxes (whose
key layer is drawn, or its kept pixels pasted back); no control redraws the axes; the picture a static page keeps
is the starting one; the PNG the frontend receives is a valid PNG of exactly the canvas; states are cached per
input."""

import io

import numpy as np
import pytest
from matplotlib.image import imread

from roofkit.course.explore import _box
from roofkit.course.explore import parallel as parallel_explorer
from roofkit.course.explore import roofline as roofline_explorer
from roofkit.course.explore import serving as serving_explorer


def _pixels(png) -> np.ndarray:
    return (imread(io.BytesIO(bytes(png)), format="png") * 255).round().astype(np.uint8)  # an independent decoder


def test_encode_png_is_the_canvas_exactly():
    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, size=(37, 53, 4), dtype=np.uint8)
    png = _box.encode_png(rgba)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert np.array_equal(_pixels(png), rgba)
    assert _box.encode_png(rgba) == png  # the bytes depend on the pixels only


def _moved_and_fresh(module, start: dict, moves: list[tuple[str, object]]):
    """The explorer's image after ``moves``, and a figure built afresh at the inputs they reach."""
    explorer = module.build_explorer(**start)
    static = explorer._png
    for name, value in moves:
        explorer.inputs[name].value = value
    assert explorer._png == static  # rendered once, when the explorer was built
    fresh = module._Figure(explorer.state).live.frame()
    return _pixels(explorer.image.value), _pixels(fresh)


@pytest.mark.parametrize("module, start, moves", [
    (roofline_explorer, {}, [("size", 512), ("size", 65536), ("kernel", "attention"), ("size", 256)]),
    (roofline_explorer, {"accelerator": "h200"}, [("size", 768), ("precision", "fp8"), ("size", 8192)]),
    (serving_explorer, {}, [("batch", 512), ("context", 131072), ("batch", 2), ("context", 4096)]),
    (serving_explorer, {}, [("model", "deepseek-v3"), ("batch", 8), ("model", "llama-3-8b"), ("gpus", 1)]),
    (parallel_explorer, {}, [("tp", 1), ("gpus", 8), ("gpus", 4096), ("zero", 3), ("global_batch_tokens", 2**19)]),
    (parallel_explorer, {}, [("hw", "b200"), ("pp", 16), ("recompute", True)]),
    # dropdowns and checkboxes: a key layer drawn, then kept pixels pasted back on the way back
    (roofline_explorer, {}, [("accelerator", "t4"), ("accelerator", "b200"), ("precision", "fp4"),
                             ("kernel", "decode"), ("accelerator", "t4"), ("accelerator", "h100-sxm")]),
    (roofline_explorer, {}, [("kernel", "add"), ("accelerator", "mi300x"), ("size", 2**20), ("precision", "fp8"),
                             ("kernel", "gemm"), ("size", 65536)]),
    (serving_explorer, {}, [("hw", "t4"), ("gpus", 1), ("weights_dtype", "int4"), ("kv_dtype", "fp8"),
                            ("hw", "h100-sxm"), ("gpus", 8), ("weights_dtype", "bf16"), ("kv_dtype", "bf16")]),
    (serving_explorer, {}, [("model", "deepseek-v3"), ("model", "llama-2-7b"), ("hw", "a10"), ("model", "deepseek-v3"),
                            ("hw", "h100-sxm"), ("model", "llama-3-70b")]),
    (parallel_explorer, {}, [("calibrated", True), ("hw", "tpu-v5p"), ("model", "llama-3-8b"), ("recompute", True),
                             ("hw", "h100-sxm"), ("calibrated", False)]),
])
def test_a_moved_figure_is_the_figure_drawn_afresh(module, start, moves):
    moved, fresh = _moved_and_fresh(module, start, moves)
    assert moved.shape == fresh.shape
    differ = np.any(moved != fresh, axis=-1)
    assert differ.sum() == 0, f"{differ.sum()} pixels differ"


def test_a_move_changes_the_picture_and_keeps_the_figure():
    explorer = roofline_explorer.build_explorer()
    fig, axes, before = explorer.live.fig, list(explorer.live.fig.axes), _pixels(explorer.image.value)
    explorer.size.value = 512
    after = _pixels(explorer.image.value)
    assert explorer.live.fig is fig and explorer.live.fig.axes == axes  # the same artists, moved
    assert np.any(before != after)


@pytest.mark.parametrize("module, moves", [
    (roofline_explorer, [("accelerator", "t4"), ("precision", "fp32"), ("accelerator", "h200"), ("kernel", "add")]),
    (serving_explorer, [("model", "llama-3-8b"), ("hw", "b200"), ("gpus", 2), ("weights_dtype", "fp8"),
                        ("kv_dtype", "fp8"), ("model", "deepseek-v3")]),
    (parallel_explorer, [("hw", "b200"), ("model", "llama-3-8b"), ("recompute", True), ("calibrated", True)]),
])
def test_no_control_redraws_the_axes(module, moves, monkeypatch):
    """After the first frame, a dropdown or a checkbox draws only the key layer and the moving artists: the
    canvas is never drawn whole again, and no axis lays out its ticks."""
    from matplotlib.axis import Axis

    explorer = module.build_explorer()
    drawn = []
    monkeypatch.setattr(type(explorer.live.canvas), "draw", lambda self, *a, **k: drawn.append("canvas"))
    monkeypatch.setattr(Axis, "draw", lambda self, *a, **k: drawn.append("axis"))
    monkeypatch.setattr(Axis, "_update_ticks", lambda self, *a, **k: drawn.append("ticks") or [])
    for name, value in moves:
        explorer.inputs[name].value = value
    assert drawn == []
    explorer.live.fig.draw(explorer.live.canvas.get_renderer())  # what a full draw would have done
    assert "axis" in drawn  # (ticks are laid out inside Axis.draw, stubbed here; a title above the axes did it too)


def test_kept_pixels_are_the_key_layer_drawn_again():
    """A key whose pixels were dropped (more keys than ``keep``) is drawn again, the same as when it was kept."""
    explorer = roofline_explorer.build_explorer()
    explorer.live.keep = 1  # keep only the current key's pixels
    first = _pixels(explorer.image.value)
    for name, value in (("accelerator", "t4"), ("accelerator", "b200"), ("accelerator", "h100-sxm"),
                        ("precision", "bf16")):  # a T4 has no BF16: the precision went to FP16 on the way
        explorer.inputs[name].value = value
    assert list(explorer.live._layers) == [explorer.live._key]
    assert np.array_equal(_pixels(explorer.image.value), first)


def test_cached_keeps_results_per_input_and_hands_out_copies():
    calls = []

    def state(a, b=1):
        calls.append((a, b))
        return {"a": a, "b": b}

    remembered = _box.cached(state)
    first = remembered(1, b=2)
    first["a"] = "changed"
    assert remembered(1, b=2) == {"a": 1, "b": 2} and calls == [(1, 2)]
    remembered(2)
    assert calls == [(1, 2), (2, 1)]
