"""A quiz widget and the roofline explorer respond to a person in a real JupyterLab.

Every notebook a browser test opens is run top to bottom through JupyterLab's
own menu (:func:`run_all`), which fails on any error or stderr output the page
shows: lessons 00, 01, 03, 05, 13 and 14, the lessons with explorers and the
answer box's own tests. Every student notebook's kernel side (each runs top to
bottom without an error) is checked once, by nbval in ``make test``'s first
run: running the other lessons here again would test the same thing twice.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

expect = pytest.importorskip("playwright.sync_api").expect

ROOT = Path(__file__).resolve().parents[2]
STUDENT_NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))

ERRORS = ("[data-mime-type='application/vnd.jupyter.error'], "
          "[data-mime-type='application/vnd.jupyter.stderr']")


def notebook(page):
    """The notebook panel on screen (other tabs, if any, are hidden)."""
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")


def run_all(lab, page, path: str, timeout: float = 120) -> None:
    """Open ``path`` in JupyterLab, run all cells through the menu, and wait until every cell has run."""
    page.goto(lab.url(f"lab/tree/{path}"))
    notebook(page).locator(".jp-CodeCell").first.wait_for()
    lab.wait_for_kernel(path)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        prompts = notebook(page).locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
        if prompts and all(p.strip().startswith("[") and p.strip()[1:-2].isdigit() for p in prompts):
            errors = notebook(page).locator(ERRORS)
            assert errors.count() == 0, f"{path}: {errors.first.inner_text()[:500]}"
            assert notebook(page).locator(".jp-OutputArea-output").count() > 0, f"{path}: no output at all"
            return
        time.sleep(0.5)
    raise TimeoutError(f"{path}: not every cell ran within {timeout} s; prompts: {prompts}")


def reopens_with_its_boxes(lab, page, path: str, shot) -> None:
    """Open a saved notebook with no kernel behind it: its answer boxes show from the saved widget state, not
    "Error displaying widget: model not found"."""
    page.goto(lab.url(f"lab/tree/{path}"))
    notebook(page).locator(".jp-CodeCell").first.wait_for()
    expect(notebook(page).locator(".roofkit-question input").first).to_be_visible(timeout=60_000)
    assert "model not found" not in notebook(page).inner_text()
    page.screenshot(path=str(shot))
    lab.shutdown_kernels()


def test_quiz_widget_names_the_mistake_then_accepts_the_answer(lab, page, shots):
    try:
        run_all(lab, page, "notebooks/00-start-here.ipynb")
        question = notebook(page).locator(".roofkit-question").first
        box, check = question.locator("input"), question.get_by_role("button", name="Check")
        feedback = question.locator(".roofkit-feedback")
        box.fill("1000")
        check.click()
        expect(feedback).to_contain_text("not yet")
        wrong = feedback.inner_text()
        assert "two FLOPs" in wrong and "2000" not in wrong
        page.screenshot(path=str(shots / "quiz-wrong.png"))
        box.fill("2000")
        box.press("Enter")
        check.click()
        expect(feedback).to_contain_text("✓ correct")
        page.screenshot(path=str(shots / "quiz-right.png"))
        question.locator("button", has_text="Hint").click()
        expect(question.locator(".roofkit-hints")).to_contain_text(re.compile(r"hint \d/2"))
        page.screenshot(path=str(shots / "quiz-hint.png"))
    finally:
        lab.shutdown_kernels()


def test_roofline_explorer_slider_moves_the_point(lab, page, shots):
    name = next(n for n in STUDENT_NOTEBOOKS if n.startswith("03-"))
    try:
        run_all(lab, page, f"notebooks/{name}")
        bound = notebook(page).locator(".roofkit-bound").first
        plot = notebook(page).locator(".roofkit-plot img").first
        bound.scroll_into_view_if_needed()
        before_text, before_plot = bound.inner_text(), plot.get_attribute("src")
        page.screenshot(path=str(shots / "explorer-before.png"))
        handle = notebook(page).locator(".widget-slider .noUi-handle").first
        handle.focus()
        for _ in range(12):  # far enough to cross the ridge in either direction
            handle.press("ArrowLeft")
        assert "compute-bound" in before_text, before_text
        expect(bound).to_contain_text("memory-bound", timeout=60_000)  # the point crossed the ridge
        expect(plot).not_to_have_attribute("src", before_plot)
        assert bound.inner_text() != before_text
        page.screenshot(path=str(shots / "explorer-after.png"))
    finally:
        lab.shutdown_kernels()
