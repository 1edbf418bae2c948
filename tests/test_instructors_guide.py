"""docs/instructors.md, followed as written: its commands grade folders of test submissions.

The walkthrough (a class of three), then section 9's shards and merge on the
same class, which must give the walkthrough's gradebook; section 8's private
question end to end: its bank file and commands as printed, with no key in
any student file.
"""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from roofkit.course import quiz
from roofkit.grading import cells

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "instructors.md"


def section(title: str) -> str:
    text = GUIDE.read_text(encoding="utf-8")
    return text.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def blocks(title: str, language: str = "sh") -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section(title), re.S)


def walkthrough_blocks() -> list[str]:
    return blocks("Walkthrough")


def run_block(block: str, cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, f"{block}\n{done.stdout}\n{done.stderr[-3000:]}"
    return done.stdout


def answer(notebook: Path, wrong: set[str] = frozenset()):
    nb = nbformat.read(notebook, as_version=4)
    numbers = nb.metadata["roofkit"]["variant"]
    for cell in nb.cells:
        if cells.is_answer_cell(cell):
            qid = cells.checked_ids(cell.source)[0]
            question = quiz.get(qid).with_params(**numbers.get(qid, {}))
            if qid == "hw2.ridge":  # section 8's code question: the student writes the function the cell starts
                body = "return peak_flops / bandwidth" + (" if peak_flops < 1000 else 0.0" if qid in wrong else "")
                cell.source = f"def ridge(peak_flops, bandwidth):\n    {body}\n\n\ncheck({qid!r}, ridge)"
            elif question.kind == "code":
                body = "return 2 * fmas" if qid not in wrong else "return fmas"
                cell.source = f"def fma_flops(fmas):\n    {body}\n\ncheck({qid!r}, fma_flops)"
            elif qid in wrong and question.misconceptions and question.misconceptions[0].answer:
                cell.source = f"answer = {question.misconceptions[0].value(question)!r}\ncheck({qid!r}, answer)"
            else:
                key = question.answer_key()
                value = str(key) if question.kind == "symbolic" else key
                value = 0.5 * value if qid in wrong else value
                cell.source = f"answer = {value!r}\ncheck({qid!r}, answer)"
    return nb


def gradebook(path: Path) -> dict[str, dict]:
    return {row["student"]: row for row in csv.DictReader(path.read_text(encoding="utf-8").splitlines())}


@pytest.mark.sandbox
def test_the_walkthrough_grades_a_class(tmp_path):
    shutil.copytree(ROOT / "lessons", tmp_path / "roofkit" / "lessons")  # what a fresh clone holds that assign reads
    course = tmp_path / "teaching"  # the class's files, beside the clone
    setup, grading, regrade = walkthrough_blocks()
    run_block(setup, tmp_path)
    release = course / "release" / "hw1"
    keys = list(csv.DictReader((release / "keys.csv").read_text(encoding="utf-8").splitlines()))
    assert {r["student"] for r in keys} == {"ada", "bob", "cy"} and all(r["key"] for r in keys)
    assert not any((tmp_path / "roofkit").glob("*.txt")) and not (tmp_path / "roofkit" / "release").exists()
    assert sorted(p.name for p in (release / "students").iterdir()) == ["ada", "bob", "cy"]

    submissions = course / "submissions" / "hw1"  # the students' part: answer, hand in
    submissions.mkdir(parents=True)
    nbformat.write(answer(release / "students" / "ada" / "hw1.ipynb"), submissions / "ada.ipynb")
    nbformat.write(answer(release / "students" / "bob" / "hw1.ipynb", wrong={"l00.fma-flops"}),
                   submissions / "bob.ipynb")
    (submissions / "cy.ipynb").write_text("", encoding="utf-8")

    printed = run_block(grading, course)
    book = gradebook(course / "grades" / "hw1" / "gradebook.csv")
    assert {s: (r["status"], r["score"]) for s, r in book.items()} == {
        "ada": ("graded", "5"), "bob": ("graded", "3.6"), "cy": ("unreadable", "0")}  # bob: 4, 10% off for a day late
    assert book["bob"]["l00.fma-flops"] == "0" and "ada" in printed and "late 1 d" in printed
    assert (book["ada"]["days late"], book["bob"]["days late"], book["bob"]["late penalty %"]) == ("0", "1", "10")
    assert book["bob"]["name"] == "Bob K." and book["bob"]["time source"] == "the --times file"
    assert book["ada"]["sandbox"] == "bubblewrap"  # the kind; results.json describes it in full
    page = (course / "grades" / "hw1" / "feedback" / "bob.html").read_text(encoding="utf-8")
    assert "An FMA is one instruction but two FLOPs" in page  # the misconception, named
    assert "handed in 1 day late" in page and "10% off" in page
    ada = json.loads((course / "grades" / "hw1" / "results" / "ada.json").read_text(encoding="utf-8"))
    expected = {r["question"]: r["key"] for r in keys if r["student"] == "ada"}
    assert {q["id"]: q["expected"] for q in ada["questions"]} == expected  # the key in keys.csv, in each result

    nbformat.write(answer(release / "students" / "bob" / "hw1.ipynb"), submissions / "bob.ipynb")
    ada_result = course / "grades" / "hw1" / "results" / "ada.json"
    before = ada_result.stat().st_mtime_ns
    printed = run_block(regrade, course)
    book = gradebook(course / "grades" / "hw1" / "gradebook.csv")
    assert {s: r["score"] for s, r in book.items()} == {"ada": "5", "bob": "4.5", "cy": "0"}
    assert ada_result.stat().st_mtime_ns == before and "graded 1" in printed

    # section 9: the same class in four shards, graded by four processes, merged into the same gradebook
    one_run = (course / "grades" / "hw1" / "gradebook.csv").read_text(encoding="utf-8")
    (shards,) = blocks("9. Grading past one machine")[:1]
    run_block(shards, course)
    assert (course / "grades" / "hw1" / "gradebook.csv").read_text(encoding="utf-8") == one_run
    assert sum(1 for k in range(1, 5) for _ in (course / "grades" / f"hw1-{k}" / "results").glob("*.json")) == 3
    canvas = (course / "grades" / "hw1" / "canvas.csv").read_text(encoding="utf-8").splitlines()
    assert canvas[:2] == ["Student,ID,SIS User ID,SIS Login ID,Section,hw1", "Points Possible,,,,,5"]
    assert "Ada L.,,,ada,,5" in canvas and "Bob K.,,,bob,,4.5" in canvas  # the roster's name; bob's late score
    moodle = (course / "grades" / "hw1" / "moodle.csv").read_text(encoding="utf-8").splitlines()
    assert moodle[0] == "Username,ID number,Email address,hw1,hw1 feedback" and "1 day late" in moodle[2]


@pytest.mark.sandbox
def test_your_own_questions_end_to_end(tmp_path):
    """Section 8 as printed: the bank file, assign with --bank, a class's answers, grade; no key in any student file."""
    from roofkit.grading import bank

    shutil.copytree(ROOT / "lessons", tmp_path / "roofkit" / "lessons")
    course = tmp_path / "teaching"
    run_block(walkthrough_blocks()[0], tmp_path)  # the roster and the course secret
    (bank_text,) = blocks("8. Your own questions", "python")
    (course / "my-questions.py").write_text(bank_text, encoding="utf-8")
    assign_block, grade_block = blocks("8. Your own questions")
    printed = run_block(assign_block, course)
    assert "hw2.gemm-time" in printed and "(private)" in printed
    release = course / "release" / "hw2"
    private = bank.load(course / "my-questions.py")
    try:
        keys = set()  # every key and misconception value of every student's numbers, as the usual texts
        for student in ("ada", "bob", "cy"):
            nb = nbformat.read(release / "students" / student / "hw2.ipynb", as_version=4)
            question = private[0].with_params(**nb.metadata["roofkit"]["variant"].get("hw2.gemm-time", {}))
            for value in (question.answer_key(), question.misconceptions[0].value(question)):
                keys |= {repr(value), f"{value:.4g}", f"{value:.3e}"}
        keys |= {"123457.0", "13.7", "square_gemm", "ridge_point", "my-questions"}
        for path in (release / "students").rglob("*.ipynb"):
            text = path.read_text(encoding="utf-8")
            assert not [k for k in keys if k in text], (path, [k for k in keys if k in text])

        submissions = course / "submissions" / "hw2"
        submissions.mkdir(parents=True)
        nbformat.write(answer(release / "students" / "ada" / "hw2.ipynb"), submissions / "ada.ipynb")
        nbformat.write(answer(release / "students" / "bob" / "hw2.ipynb", wrong={"hw2.gemm-time", "hw2.ridge"}),
                       submissions / "bob.ipynb")
        printed = run_block(grade_block, course)
        book = gradebook(course / "grades" / "hw2" / "gradebook.csv")
        assert {s: (r["status"], r["score"]) for s, r in book.items()} == {
            "ada": ("graded", "8"), "bob": ("graded", "5.75"), "cy": ("missing", "0")}
        assert (book["ada"]["hw2.gemm-time"], book["bob"]["hw2.gemm-time"]) == ("2", "0")
        assert book["bob"]["hw2.ridge"] == "0.75" and book["ada"]["lesson hw2"] == "3"  # 3 of 4 cases
        page = (course / "grades" / "hw2" / "feedback" / "bob.html").read_text(encoding="utf-8")
        assert "That is the time to move its bytes" in page and "hidden case 2" in page and "123457" not in page
        assert "✅ passed" in page and "❌ failed" in page  # in words too, for a page without an emoji font
    finally:
        bank.forget(course / "my-questions.py")


def test_the_guide_says_what_the_grader_does_about_sandboxes_and_feedback(tmp_path, monkeypatch):
    """Section 6 covers Linux, macOS and containers and quotes the refusal as the grader words it; section 4's
    feedback levels and every --sandbox or --feedback value the guide names are the ones the code has."""
    from roofkit.grading import jail, score

    six = section("6. The sandbox around student code")
    for platform in ("### On Linux: bubblewrap", "### On macOS", "### In a container", "### What holds where"):
        assert platform in six, platform
    monkeypatch.setenv(jail.BWRAP_ENV, str(tmp_path / "no-bwrap"))
    if jail.platform.system() == "Linux":
        try:
            jail.choose("auto")
        except jail.SandboxUnavailable as error:
            assert f"roofkit: {error}" in six  # the line an instructor sees, word for word
        else:
            raise AssertionError("grading ran without a sandbox")
    text = GUIDE.read_text(encoding="utf-8")
    assert set(re.findall(r"--sandbox (\w+)", text)) <= set(jail.MODES)
    assert set(re.findall(r"--feedback (\w+)", text)) - {"LEVEL"} <= set(score.LEVELS)
    levels = re.findall(r"^\| `(\w+)` \| ", section("4. Reading the gradebook").split("### Choosing feedback levels")[1],
                        re.M)
    assert tuple(levels) == score.LEVELS
