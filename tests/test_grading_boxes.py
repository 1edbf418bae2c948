"""One way to answer: what a release's answer box held when the notebook was saved is what the grader judges.

The box state is made the way JupyterLab saves it: ipywidgets' own serialization of the live widgets
(``Widget.get_manager_state``, the format of a notebook's ``metadata.widgets``), of boxes that ``ask`` made
with the student's numbers. The browser test (tests/browser) does the same through JupyterLab itself.
"""

import html
import json
from pathlib import Path

import ipywidgets
import nbformat
import pytest

from roofkit.course import quiz
from roofkit.grading import assign, boxes, grade, score

import helpers

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fresh_boxes():
    """ask() in this process, as in a kernel; every widget made closed after."""
    quiz._boxes.clear()
    yield
    for widget in list(quiz._boxes.values()):
        quiz._close_all(widget)
    quiz._boxes.clear()
    quiz.use_variant({})


def saved_state() -> dict:
    """The live widgets' state as JupyterLab writes it into a saved notebook's metadata."""
    # this notebook's boxes only (other tests in this process may have made widgets of their own)
    mine = [widget.answer_box for widget in quiz._boxes.values()]
    return json.loads(json.dumps({boxes.STATE_MIME: ipywidgets.Widget.get_manager_state(drop_defaults=True,
                                                                                        widgets=mine)}))


def type_in_box(qid: str, text: str) -> None:
    quiz._boxes[qid].answer_box.value = text


@pytest.fixture(scope="module")
def class_release(tmp_path_factory):
    where = tmp_path_factory.mktemp("boxes")
    (where / "roster.csv").write_text("id\nada\nbob\ncy\ndee\n", encoding="utf-8")
    # a fixed secret: the students' numbers, and so what the tests below meet, are the same on every run
    (where / "secret.txt").write_text("0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a6978\n", encoding="utf-8")
    assign.main(["00"], name="hw1", out=where / "release", roster=where / "roster.csv",
                secret_file=where / "secret.txt", root=ROOT)
    return where


def boxed_submission(where: Path, student: str, answers: dict[str, str], keep_state: bool = True):
    """``student``'s release notebook, its setup run and each ``answers`` question typed into its box only."""
    nb = nbformat.read(where / "release" / "students" / student / "hw1.ipynb", as_version=4)
    setup = next(c for c in nb.cells if "use_release(" in c.source)
    exec(setup.source, {})  # noqa: S102 - the release's own setup cell, as the kernel runs it
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith("ask("):
            qid = cell.source.split('"')[1]
            quiz.ask(qid)
            if qid not in quiz._boxes:  # a code question: no box, its answer is a function in the answer cell
                continue
            cell.outputs = [nbformat.v4.new_output("display_data", data={
                boxes.VIEW_MIME: {"version_major": 2, "version_minor": 0, "model_id": quiz._boxes[qid].model_id}})]
            if qid in answers:
                type_in_box(qid, answers[qid])
    if keep_state:
        nb.metadata["widgets"] = saved_state()
    return nb


def keys_of(where: Path, student: str) -> dict[str, str]:
    return helpers.keys_as_typed(where / "release", where / "secret.txt", student)


def test_a_box_says_in_a_release_that_it_is_handed_in(class_release, fresh_boxes):
    boxed_submission(class_release, "ada", {})
    qid = next(iter(keys_of(class_release, "ada")))
    widget = quiz._boxes[qid]
    assert qid in quiz._handed_in and quiz.BOX_CLASS in widget.answer_box._dom_classes
    type_in_box(qid, keys_of(class_release, "ada")[qid])
    assert "✓ correct" in widget.feedback.value and "Graded: JupyterLab saves this box" in widget.feedback.value
    assert f"check({qid!r}" in html.unescape(widget.feedback.value)  # where the answer goes in an editor that saves no widgets


def test_asking_again_keeps_one_box_per_question(fresh_boxes):
    quiz.ask("l00.fma-flops")
    first = quiz._boxes["l00.fma-flops"].answer_box
    quiz.ask("l00.fma-flops")
    assert quiz._boxes["l00.fma-flops"].answer_box is not first and first.comm is None  # the old one is closed, not saved
    saved = boxes.read({"metadata": {"widgets": saved_state()}, "cells": []})
    type_in_box("l00.fma-flops", "2000")
    saved = boxes.read({"metadata": {"widgets": saved_state()}, "cells": []})
    assert saved.answers == {"l00.fma-flops": "2000"}


def test_reading_boxes_survives_odd_state():
    for junk in (b"", b"[]", b"{", json.dumps({"metadata": {"widgets": {boxes.STATE_MIME: {"state": [1]}}}}).encode(),
                 json.dumps({"metadata": {"widgets": {boxes.STATE_MIME: {"state": {"m": {
                     "model_name": "TextModel", "state": {"_dom_classes": [quiz.BOX_CLASS, 7], "value": ["x"]}}}}}},
                     "cells": [{"cell_type": "code", "source": 3, "outputs": "none"}]}).encode()):
        found = boxes.read(junk)
        assert found.answers == {} and found.unsaved == set()


@pytest.mark.sandbox
def test_a_hand_in_answered_only_in_its_boxes_scores_what_the_boxes_showed(class_release, fresh_boxes, tmp_path):
    keys = keys_of(class_release, "ada")
    wrong = next(q for q in keys if quiz.get(q).kind == "numeric")
    typed = {**keys, wrong: "1"}
    nbformat.write(boxed_submission(class_release, "ada", typed), tmp_path / "ada.ipynb")
    # bob's editor kept no widget state: his boxes show in the outputs, their answers are gone
    nbformat.write(boxed_submission(class_release, "bob", keys_of(class_release, "bob"), keep_state=False),
                   tmp_path / "bob.ipynb")
    # cy hands in the notebook as it was given; dee copies the published solution's keys into her boxes
    nbformat.write(nbformat.read(class_release / "release" / "students" / "cy" / "hw1.ipynb", as_version=4),
                   tmp_path / "cy.ipynb")
    published = {q: str(quiz.get(q).answer_key()) for q in keys}
    nbformat.write(boxed_submission(class_release, "dee", published), tmp_path / "dee.ipynb")
    grade.main([tmp_path / f"{s}.ipynb" for s in ("ada", "bob", "cy", "dee")], out=tmp_path / "grades",
               release=class_release / "release", secret_file=class_release / "secret.txt",
               progress=False)
    results = json.loads((tmp_path / "grades" / "results.json").read_text(encoding="utf-8"))
    ada = next(r for r in results["students"] if r["student"] == "ada")
    rows = {q["id"]: q for q in ada["questions"]}
    for qid in keys:
        # what the box said is what the grade says: right where it showed right, wrong where it showed wrong
        shown = quiz.judge(quiz.get(qid).with_params(**ada["variant"].get(qid, {})), typed[qid]).correct
        assert (rows[qid]["verdict"] == "correct") == shown, rows[qid]
        assert rows[qid]["note"].startswith("answered in the answer box") and rows[qid]["answer"] == typed[qid]
    assert rows[wrong]["verdict"] == "wrong" and rows[wrong]["expected"]
    bob = next(r for r in results["students"] if r["student"] == "bob")
    assert all(q["verdict"] == "not answered" for q in bob["questions"])
    assert any("were not saved with this notebook" in n for n in bob["notes"])
    assert all("kept no answer in it" in q["reason"] for q in bob["questions"] if q["id"] in keys)
    page = (tmp_path / "grades" / "feedback" / "bob.html").read_text(encoding="utf-8")
    assert "write each answer in its answer cell" in page
    cy = next(r for r in results["students"] if r["student"] == "cy")
    assert any(n.startswith("nothing was answered: this is the notebook as it was handed out") for n in cy["notes"])
    assert "as it was handed out" in (tmp_path / "grades" / "feedback" / "cy.html").read_text(encoding="utf-8")
    dee = next(r for r in results["students"] if r["student"] == "dee")
    # her numbers' questions where the published key is plainly wrong: not hers, and not one of the misconceptions
    # the question recognises (the grader names a misconception where the key of other numbers happens to match one;
    # the class secret is fresh each run, so that happens now and then)
    differs = [q for q in keys if quiz.get(q).kind == "numeric" and dee["variant"].get(q)
               and str(quiz.get(q).with_params(**dee["variant"][q]).answer_key()) != published[q]
               and (lambda v: v.verdict == "wrong" and not v.misconception)(
                   score.judge_answer(quiz.get(q).with_params(**dee["variant"][q]), published[q]))]
    assert differs and all(any(f.startswith(f"{q}: the answer is the key of the published solution")
                               for f in dee["flags"]) for q in differs)
    ada_page = (tmp_path / "grades" / "feedback" / "ada.html").read_text(encoding="utf-8")
    assert rows[wrong]["expected"] not in ada_page  # the key is the instructor's, not on a feedback page
