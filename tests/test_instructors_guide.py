"""docs/instructors.md, followed as written: its walkthrough's commands grade a folder of test submissions."""

import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from roofkit import quiz
from roofkit.grading import cells

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "instructors.md"


def walkthrough_blocks() -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## Walkthrough", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


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
            if question.kind == "code":
                body = "return 2 * fmas" if qid not in wrong else "return fmas"
                cell.source = f"def fma_flops(fmas):\n    {body}\n\ncheck({qid!r}, fma_flops)"
            else:
                key = question.answer_key()
                value = str(key) if question.kind == "symbolic" else key
                value = 0.5 * value if qid in wrong else value
                cell.source = f"answer = {value!r}\ncheck({qid!r}, answer)"
    return nb


def gradebook(path: Path) -> dict[str, dict]:
    return {row["student"]: row for row in csv.DictReader(path.read_text(encoding="utf-8").splitlines())}


def test_the_walkthrough_grades_a_class(tmp_path):
    course = tmp_path / "course"  # what a fresh clone holds that assign reads
    shutil.copytree(ROOT / "lessons", course / "lessons")
    setup, grading, regrade = walkthrough_blocks()
    run_block(setup, course)
    release = course / "release" / "hw1"
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
        "ada": ("graded", "5"), "bob": ("graded", "4"), "cy": ("unreadable", "0")}
    assert book["bob"]["l00.fma-flops"] == "0" and "ada" in printed
    page = (course / "grades" / "hw1" / "feedback" / "bob.html").read_text(encoding="utf-8")
    assert "An FMA is one instruction but two FLOPs" in page  # the misconception, named

    nbformat.write(answer(release / "students" / "bob" / "hw1.ipynb"), submissions / "bob.ipynb")
    ada_result = course / "grades" / "hw1" / "results" / "ada.json"
    before = ada_result.stat().st_mtime_ns
    printed = run_block(regrade, course)
    book = gradebook(course / "grades" / "hw1" / "gradebook.csv")
    assert {s: r["score"] for s, r in book.items()} == {"ada": "5", "bob": "5", "cy": "0"}
    assert ada_result.stat().st_mtime_ns == before and "graded 1" in printed
