"""A learner types answers into the answer box: bytes and percent read as typed, slips named, keys accepted.

These are the two units whose bare numbers were once misread (a byte and a
percent are dimensionless to most unit libraries); the keys come from the bank.
"""

from __future__ import annotations

import pytest

from roofkit.course import quiz

from test_lab import notebook, run_all

expect = pytest.importorskip("playwright.sync_api").expect


def _answer(cell, text: str):
    box, check = cell.locator(".roofkit-question input"), cell.get_by_role("button", name="Check")
    box.fill(text)
    check.click()
    return cell.locator(".roofkit-feedback")


def _question_cell(page, question_id: str):
    cell = notebook(page).locator(".jp-CodeCell", has_text=question_id).filter(has=page.locator(".roofkit-question"))
    expect(cell.first).to_be_visible()
    return cell.first


def test_a_byte_question_takes_a_bare_number_and_names_the_bits_slip(lab, page, shots):
    key = quiz.answer_key("l01.gemm-bytes")
    try:
        run_all(lab, page, "notebooks/01-counting-flops-and-bytes.ipynb")
        cell = _question_cell(page, "l01.gemm-bytes")
        feedback = _answer(cell, f"{key * 8:.0f}")
        expect(feedback).to_contain_text("not yet")
        expect(feedback).to_contain_text("bits")
        feedback = _answer(cell, f"{key:.0f}")
        expect(feedback).to_contain_text("✓ correct")
        feedback = _answer(cell, f"{key / 1e6:.4g} MB")
        expect(feedback).to_contain_text("✓ correct")
        page.screenshot(path=str(shots / "answer-box-bytes.png"))
    finally:
        lab.shutdown_kernels()


def test_a_percent_question_takes_93_8_and_names_a_fraction(lab, page, shots):
    key = quiz.answer_key("l03.ex-add-percent")
    try:
        run_all(lab, page, "notebooks/03-the-roofline.ipynb")
        cell = _question_cell(page, "l03.ex-add-percent")
        feedback = _answer(cell, f"{key / 100:.4g}")
        expect(feedback).to_contain_text("not yet")
        expect(feedback).to_contain_text("fraction")
        for typed in (f"{key:.4g}", f"{key:.4g}%", f"{key:.4g} percent"):
            feedback = _answer(cell, typed)
            expect(feedback).to_contain_text("✓ correct")
        page.screenshot(path=str(shots / "answer-box-percent.png"))
    finally:
        lab.shutdown_kernels()
