"""The learner's own copy (`make lab`): it opens clean, a lesson run and saved there changes no tracked file,
and reopened it shows its boxes and figures, not "Error displaying widget: model not found"."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from test_lab import notebook, reopens_with_its_boxes, run_all

expect = pytest.importorskip("playwright.sync_api").expect

ROOT = Path(__file__).resolve().parents[2]
PATH = "my-notebooks/00-start-here.ipynb"


def _dirty(page) -> bool:
    return page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current.jp-mod-dirty").count() > 0


def test_the_own_copy_opens_clean_runs_saves_and_reopens(lab, page, shots):
    tracked = {p.name: p.read_bytes() for p in (lab.root / "notebooks").glob("*.ipynb")}
    try:
        page.goto(lab.url(f"lab/tree/{PATH}"))
        notebook(page).locator(".jp-CodeCell").first.wait_for()
        lab.wait_for_kernel(PATH)
        time.sleep(2)  # JupyterLab writes the kernel's metadata once it is connected
        assert not _dirty(page), "a lesson just opened is marked modified"
        run_all(lab, page, PATH)
        notebook(page).locator(".jp-Cell").first.click()
        page.keyboard.press("Control+s")
        expect(page.locator(".lm-TabBar-tab.lm-mod-current.jp-mod-dirty")).to_have_count(0, timeout=30_000)
    finally:
        lab.shutdown_kernels()
    assert {p.name: p.read_bytes() for p in (lab.root / "notebooks").glob("*.ipynb")} == tracked
    saved = (lab.root / PATH).read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget-state+json" in saved  # the boxes' state travels with the copy

    reopens_with_its_boxes(lab, page, PATH, shots / "own-copy-reopened.png")
