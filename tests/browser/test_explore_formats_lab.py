"""Lesson 05's number-format explorer responds to a person typing in JupyterLab: the table follows
the value typed, and a value it cannot read is explained instead of breaking the widget."""

from __future__ import annotations

import pytest

from test_lab import STUDENT_NOTEBOOKS, notebook, run_all

expect = pytest.importorskip("playwright.sync_api").expect


def test_format_explorer_follows_what_is_typed(lab, page, shots):
    name = next(n for n in STUDENT_NOTEBOOKS if n.startswith("05-"))
    try:
        run_all(lab, page, f"notebooks/{name}")
        table = notebook(page).locator(".roofkit-formats").first
        table.scroll_into_view_if_needed()
        expect(table).to_contain_text("0.1000976562")  # 0.1 in BF16, the starting value
        box = table.locator("xpath=..").locator("input").first
        box.fill("65520")  # just past FP16's largest value: FP16 overflows to inf, BF16 rounds
        expect(table).to_contain_text("overflow: inf", timeout=30_000)
        expect(table).to_contain_text("65536")  # BF16 keeps 8 significant bits
        page.screenshot(path=str(shots / "formats-65520.png"))
        box.fill("1e-")
        message = table.locator("xpath=..").locator(".widget-html").nth(0)
        expect(message).to_contain_text("cannot read", timeout=30_000)
        expect(table).to_contain_text("65536")  # the table keeps the last value it could read
        page.screenshot(path=str(shots / "formats-unreadable.png"))
    finally:
        lab.shutdown_kernels()
