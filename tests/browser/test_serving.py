"""Lesson 13's serving explorer in a real JupyterLab: moving the batch slider past the memory limit changes the
verdict, the latency figures and the plot."""

from __future__ import annotations

from pathlib import Path

import pytest

expect = pytest.importorskip("playwright.sync_api").expect

from test_lab import ERRORS, STUDENT_NOTEBOOKS, notebook, run_all  # noqa: E402


def test_serving_explorer_batch_slider_crosses_the_memory_limit(lab, page, shots):
    name = next(n for n in STUDENT_NOTEBOOKS if n.startswith("13-"))
    try:
        run_all(lab, page, f"notebooks/{name}")
        errors = notebook(page).locator(ERRORS)
        assert errors.count() == 0, f"{name}: {errors.first.inner_text()[:500]}"
        label = notebook(page).locator(".roofkit-serving").first
        plot = notebook(page).locator(".roofkit-plot img").first
        label.scroll_into_view_if_needed()
        before_text, before_plot = label.inner_text(), plot.get_attribute("src")
        assert "fits" in before_text and "does not fit" not in before_text, before_text
        page.screenshot(path=str(shots / "serving-before.png"))
        handle = notebook(page).locator(".roofkit-batch .noUi-handle").first
        handle.focus()
        for _ in range(3):  # batch 64 -> 512, past the 162 sequences that fit
            handle.press("ArrowRight")
        expect(label).to_contain_text("does not fit", timeout=60_000)
        # each press re-renders; batch 256 already does not fit, so wait for the third press's (a race otherwise)
        expect(label).to_contain_text("batch 512", timeout=60_000)
        expect(plot).not_to_have_attribute("src", before_plot)
        after = label.inner_text()
        assert after != before_text and "batch 512" in after
        page.screenshot(path=str(shots / f"serving-after-{Path(name).stem}.png"))
    finally:
        lab.shutdown_kernels()
