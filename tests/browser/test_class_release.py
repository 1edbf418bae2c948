"""A class release in JupyterLab: a student answers in the boxes only, saves, hands in, and is graded on them.

The release is made with `roofkit assign` for one student; JupyterLab runs it top to bottom, the student types
their keys into the answer boxes (one of them wrong on purpose) and saves with Ctrl+S. The saved file is then
graded as an instructor would grade it. Reopened after its kernel is gone, the notebook shows its boxes from
the saved state, not "Error displaying widget: model not found".
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from roofkit.course import quiz
from roofkit.grading import assign, boxes, grade

import helpers

from test_lab import notebook, reopens_with_its_boxes, run_all

expect = pytest.importorskip("playwright.sync_api").expect

ROOT = Path(__file__).resolve().parents[2]


def test_answers_typed_in_the_boxes_are_saved_and_graded(lab, page, shots, tmp_path):
    (tmp_path / "roster.csv").write_text("id\nada\n", encoding="utf-8")
    release, secret = lab.root / "release", tmp_path / "secret.txt"
    assign.main(["00"], name="hw1", out=release, roster=tmp_path / "roster.csv", secret_file=secret, root=ROOT)
    keys = helpers.keys_as_typed(release, secret, "ada")
    wrong = next(q for q in keys if quiz.get(q).kind == "numeric")
    typed = {**keys, wrong: "1"}
    path = "release/students/ada/hw1.ipynb"
    try:
        run_all(lab, page, path)
        for qid, text in typed.items():
            cell = notebook(page).locator(".jp-CodeCell", has_text=qid).filter(has=page.locator(".roofkit-question"))
            if quiz.get(qid).kind == "choice":
                cell.first.locator(".roofkit-question select").select_option(text)
            else:
                box = cell.first.locator(".roofkit-question input")
                box.fill(text)
                box.press("Enter")
            expect(cell.first.locator(".roofkit-feedback")).to_contain_text(
                "not yet" if qid == wrong else "✓ correct")
            expect(cell.first.locator(".roofkit-feedback")).to_contain_text("Graded: JupyterLab saves this box")
        page.screenshot(path=str(shots / "release-boxes.png"))
        notebook(page).locator(".jp-Cell").first.click()
        page.keyboard.press("Control+s")
        file = lab.root / path
        deadline = time.monotonic() + 30
        while boxes.read(file.read_bytes()).answers != typed and time.monotonic() < deadline:
            time.sleep(0.5)
        saved = json.loads(file.read_bytes())
        assert boxes.read(file.read_bytes()).answers == typed, list(saved["metadata"])
    finally:
        lab.shutdown_kernels()

    reopens_with_its_boxes(lab, page, path, shots / "release-reopened.png")

    # the instructor grades what was handed in: the boxes' answers, judged
    submitted = tmp_path / "ada.ipynb"
    submitted.write_bytes(file.read_bytes())
    grade.main([submitted], out=tmp_path / "grades", release=release, secret_file=secret, progress=False)
    result = json.loads((tmp_path / "grades" / "results" / "ada.json").read_text(encoding="utf-8"))
    rows = {q["id"]: q for q in result["questions"]}
    assert {q: rows[q]["verdict"] for q in typed} == {q: "wrong" if q == wrong else "correct" for q in typed}
