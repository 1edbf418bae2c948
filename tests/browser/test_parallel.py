"""Lesson 14's parallelism explorer responds to a person: moving the TP slider changes the plan, its label and
its bars, in a real JupyterLab."""

from __future__ import annotations

import pytest

from test_lab import ERRORS, STUDENT_NOTEBOOKS, notebook, run_all

expect = pytest.importorskip("playwright.sync_api").expect


def test_parallel_explorer_tp_slider_changes_memory_and_bars(lab, page, shots):
    name = next(n for n in STUDENT_NOTEBOOKS if n.startswith("14-"))
    try:
        run_all(lab, page, f"notebooks/{name}", timeout=180)
        errors = notebook(page).locator(ERRORS)  # measure_comms's processes start from a real kernel too
        assert errors.count() == 0, errors.first.inner_text()[:500]
        explorer = notebook(page).locator(".roofkit-parallel").first
        label = explorer.locator(".roofkit-plan")
        plot = explorer.locator(".roofkit-parallel-plot img").first
        label.scroll_into_view_if_needed()
        expect(label).to_contain_text("TP 8 · PP 4 · DP 32 · ZeRO-1")
        before_text, before_plot = label.inner_text(), plot.get_attribute("src")
        assert "fits" in before_text and "does not fit" not in before_text, before_text
        page.screenshot(path=str(shots / "parallel-explorer-before.png"))
        # the sliders in order: GPUs, TP, PP, ZeRO, batch; TP's handle is the second
        handle = explorer.locator(".widget-slider .noUi-handle").nth(1)
        handle.focus()
        for _ in range(3):  # TP 8 -> 4 -> 2 -> 1: each GPU holds 8x the weights and states
            handle.press("ArrowLeft")
        expect(label).to_contain_text("TP 1 · PP 4 · DP 256", timeout=60_000)
        expect(label).to_contain_text("does not fit")
        expect(plot).not_to_have_attribute("src", before_plot)
        assert label.inner_text() != before_text
        page.screenshot(path=str(shots / "parallel-explorer-after.png"))
    finally:
        lab.shutdown_kernels()
