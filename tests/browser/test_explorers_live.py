"""The explorers follow the hand in a real JupyterLab: while a person drags a slider (the mouse button still
down) the figure already shows the new state, and the picture on screen differs from the one before."""

from __future__ import annotations

import io

import pytest

from test_lab import ERRORS, STUDENT_NOTEBOOKS, notebook, run_all

expect = pytest.importorskip("playwright.sync_api").expect


def _pixels(png: bytes):
    from matplotlib.image import imread

    return (imread(io.BytesIO(png), format="png")[..., :3] * 255).round().astype(int)


def _changed(before: bytes, after: bytes) -> int:
    """How many pixels of the figure on screen changed (0 when the two screenshots are the same picture)."""
    a, b = _pixels(before), _pixels(after)
    if a.shape != b.shape:
        return a.shape[0] * a.shape[1]
    return int((abs(a - b).sum(axis=-1) > 30).sum())


def _drag(page, handle, dx: float) -> None:
    """Press the mouse on ``handle`` and move it ``dx`` pixels in small steps, without letting go."""
    handle.scroll_into_view_if_needed()
    handle.hover()
    box = handle.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + dx, y, steps=12)


@pytest.mark.parametrize("lesson, explorer_class, label_class, start", [
    ("03-", ".roofkit-roofline", ".roofkit-bound", "GEMM n=4096"),
    ("13-", ".roofkit-serving-explorer", ".roofkit-serving", "batch 64"),
])
def test_dragging_a_slider_moves_the_figure_before_the_button_is_released(lab, page, shots, lesson, explorer_class,
                                                                           label_class, start):
    name = next(n for n in STUDENT_NOTEBOOKS if n.startswith(lesson))
    try:
        run_all(lab, page, f"notebooks/{name}", timeout=180)
        errors = notebook(page).locator(ERRORS)
        assert errors.count() == 0, f"{name}: {errors.first.inner_text()[:500]}"
        explorer = notebook(page).locator(explorer_class).first
        label = explorer.locator(label_class).first
        image = explorer.locator(".roofkit-plot img").first
        image.scroll_into_view_if_needed()
        expect(label).to_contain_text(start)
        expect(image).to_be_visible()
        before_text, before_src, before = label.inner_text(), image.get_attribute("src"), image.screenshot()
        handle = explorer.locator(".widget-slider .noUi-handle").last  # the size slider; the batch slider
        _drag(page, handle, -120)  # smaller kernels, smaller batches
        try:
            page.screenshot(path=str(shots / f"live-explorer-{lesson[:2]}-dragging.png"))
            # the mouse button is still down: only a slider with continuous_update changes anything yet
            expect(image).not_to_have_attribute("src", before_src, timeout=60_000)
            expect(label).not_to_have_text(before_text, timeout=60_000)
        finally:
            page.mouse.up()
        page.wait_for_timeout(1000)  # the last update of the drag
        after = image.screenshot()
        assert _changed(before, after) > 100, "the figure on screen did not change"
        assert start not in label.inner_text()
        page.screenshot(path=str(shots / f"live-explorer-{lesson[:2]}-after-drag.png"))
    finally:
        lab.shutdown_kernels()
