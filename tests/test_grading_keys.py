"""Answer keys never reach a graded kernel: every way a student could spell a key lookup earns nothing and is flagged.

A release of lesson 00 goes to one honest student and to one student per
spelling. Everyone answers the other questions right; each spelling student
answers ``l00.fma-flops`` with what their lookup returned (or the name of the
error it raised). The graded kernel's roofkit has no question bank
(``roofkit.grading.stripped``), Landlock keeps the real package out of reach,
and the grader's watch (``roofkit.grading.probe``) reports every reach for a
key: so each spelling gets 0 points for that question and a flag naming its
cell, while the honest student, who computes answers with roofkit's modelling
functions, gets every point and no flag.
"""

import json
from pathlib import Path

import nbformat
import pytest

from roofkit.course import quiz
from roofkit.grading import assign, cells, execute, grade, sandbox

pytestmark = pytest.mark.sandbox  # grades in bubblewrap (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
LANDLOCK = sandbox.landlock_abi()
LIMITS = execute.Limits(notebook_s=60, cell_s=20, startup_s=60, case_s=2)
QID = "l00.fma-flops"
REAL_LESSON = ROOT / "roofkit" / "course" / "bank" / "lesson_00.py"

# each sets `answer` from a key lookup; `params` holds the student's numbers for QID (from the prompt)
SPELLINGS = {
    # the issue's own: importlib and getattr on strings, nothing a text search would find
    "getattr": "answer = getattr(importlib.import_module('roofkit.' + 'quiz'), 'answer' + '_key')(QID, **params)",
    "dunder-import": ("bank = __import__('roofkit.' + 'course', fromlist=['lesson_00'])\n"
                      "answer = getattr(bank, 'lesson_00').FLOPS_PER_FMA * params['fmas']"),
    "import-lesson": ("lesson = importlib.import_module('roofkit.course.lesson_' + '00')\n"
                      "answer = lesson.FLOPS_PER_FMA * params['fmas']"),
    # the same module by the name of its folder (roofkit.course.lesson_00 is roofkit.course.bank.lesson_00)
    "import-bank": ("lesson = importlib.import_module('roofkit.course.ba' + 'nk.lesson_00')\n"
                    "answer = lesson.FLOPS_PER_FMA * params['fmas']"),
    "load-bank": ("q = sys.modules['roofkit.quiz']\ngetattr(q, '_load' + '_bank')()\n"
                  "answer = getattr(q, '_BA' + 'NK')[QID].with_params(**params).answer_key()"),
    "bank-dict": "answer = vars(sys.modules['roofkit.quiz'])['_BA' + 'NK'][QID].with_params(**params).answer_key()",
    "question-key": "answer = getattr(sys.modules['roofkit.quiz'], 'cur' + 'rent')(QID).key(**params)",
    "source-file": (f"import re\nsource = open({str(REAL_LESSON)!r}).read()\n"
                    "answer = int(re.search(r'FLOPS_PER_FMA = (\\d+)', source)[1]) * params['fmas']"),
    "source-beside": ("import os, re\nimport roofkit\n"
                      "source = open(os.path.join(os.path.dirname(roofkit.__file__), 'course', 'bank', 'lesson_00.py'))"
                      ".read()\n"
                      "answer = int(re.search(r'FLOPS_PER_FMA = (\\d+)', source)[1]) * params['fmas']"),
    "inspect": ("import inspect, re\nsource = inspect.getsource(importlib.import_module('roofkit.cour' + 'se.lesson_00'))\n"
                "answer = int(re.search(r'FLOPS_PER_FMA = (\\d+)', source)[1]) * params['fmas']"),
    "pickle": "import pickle\nanswer = pickle.loads(b'croofkit.course.lesson_00\\nFLOPS_PER_FMA\\n.') * params['fmas']",
    "modules-walk": ("found = 'nothing found'\nfor module in list(sys.modules.values()):\n"
                     "    bank = getattr(module, '_BA' + 'NK', None)\n    if bank:\n"
                     "        found = bank[QID].with_params(**params).answer_key()\nanswer = found"),
    "child-process": ("import subprocess\ncode = 'from roofkit import quiz; print(getattr(quiz, \"answer\" + \"_key\")'"
                      " + f'({QID!r}, fmas={params[\"fmas\"]}))'\n"
                      "out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60)\n"
                      "answer = float(out.stdout) if out.returncode == 0 else out.stderr.strip().splitlines()[-1][:60]"),
}
STUDENTS = ["honest", *SPELLINGS]


def _answers(params: dict) -> dict[str, str]:
    """Right answers computed the allowed way: with roofkit's modelling functions and the prompt's numbers."""
    return {
        QID: f"from roofkit import formulas\nanswer = formulas.gemm(1, 1, {params[QID]['fmas']}).flops\n"
             f"check({QID!r}, answer)",
        "l00.bandwidth-units": f"answer = roofkit.hw({params['l00.bandwidth-units']['hw']!r}).bandwidth\n"
                               "check('l00.bandwidth-units', answer)",
        "l00.fma-formula": "check('l00.fma-formula', '2*n')",
        "l00.work-or-rate": "check('l00.work-or-rate', 'rate')",
        "l00.code-flops": ("def fma_flops(fmas):\n    from roofkit import formulas\n"
                           "    return formulas.gemm(1, 1, fmas).flops if fmas else 0\n\n"
                           "check('l00.code-flops', fma_flops)"),
    }


def _attack(spelling: str, params: dict) -> str:
    return ("import importlib, sys\n"
            f"QID, params = {QID!r}, {params!r}\n"
            "try:\n" + "".join(f"    {line}\n" for line in SPELLINGS[spelling].splitlines())
            + "except Exception as error:\n    answer = type(error).__name__\n"
            f"check({QID!r}, answer)")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("keys")
    (base / "roster.csv").write_text("id\n" + "".join(f"{s}\n" for s in STUDENTS), encoding="utf-8")
    secret = base / "secret.txt"
    secret.write_text("a-fixed-secret-for-the-key-tests-0123456789\n", encoding="utf-8")
    release, subs = base / "release", base / "subs"
    assign.main(["00"], name="hw", out=release, roster=base / "roster.csv", secret_file=secret, root=ROOT)
    subs.mkdir()
    attack_cells = {}
    for student in STUDENTS:
        nb = nbformat.read(release / "students" / student / "hw.ipynb", as_version=4)
        numbers = nb.metadata["roofkit"]["variant"]
        params = {q: {**quiz.get(q).params, **numbers.get(q, {})} for q in (QID, "l00.bandwidth-units")}
        right = _answers(params)
        for index, cell in enumerate(nb.cells):
            if cells.is_answer_cell(cell):
                qid = cells.checked_ids(cell.source)[0]
                cell.source = _attack(student, params[QID]) if student != "honest" and qid == QID else right[qid]
                if qid == QID:
                    attack_cells[student] = index + 1
        nbformat.write(nb, subs / f"{student}.ipynb")
    grades = base / "grades"
    summary = grade.main([subs], out=grades, release=release, secret_file=secret, workers=2, limits=LIMITS,
                         progress=False)
    results = {r["student"]: json.loads((grades / "results" / f"{r['student']}.json").read_text())
               for r in summary["students"]}
    return {"results": results, "cells": attack_cells, "base": base}


def _question(result: dict, qid: str) -> dict:
    return next(q for q in result["questions"] if q["id"] == qid)


def test_the_library_works_in_a_graded_kernel_and_raises_no_flag(graded):
    honest = graded["results"]["honest"]
    assert (honest["status"], honest["score"], honest["max_score"]) == ("graded", 5, 5), honest["notes"]
    assert honest["flags"] == [] and honest["execution"]["probes"] == []


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_a_key_lookup_earns_nothing_and_is_flagged(graded, spelling):
    result = graded["results"][spelling]
    looked_up = _question(result, QID)
    if spelling == "source-file" and not LANDLOCK:
        pytest.skip("without Landlock a kernel can read the course's files: see docs/instructors.md, section 6")
    assert looked_up["points"] == 0 and looked_up["verdict"] != "correct", (spelling, looked_up)
    assert result["score"] == 4, (spelling, result["notes"])  # everything else still counts
    where = "a process the notebook started" if spelling == "child-process" else f"cell {graded['cells'][spelling]}"
    assert any(flag.startswith(where) and "answer keys" in flag for flag in result["flags"]), (spelling, result["flags"])
    # what the lookup got: an error from the fence, or nothing at all
    got = str(looked_up.get("answer"))
    # in bubblewrap the real package is not there at all; under Landlock alone it is there and refused
    refused = "FileNotFoundError" if result["execution"]["sandbox"]["kind"] == "bubblewrap" else "PermissionError"
    expected = {"source-file": refused, "source-beside": "FileNotFoundError", "bank-dict": "KeyError",
                "modules-walk": "nothing found", "child-process": "KeysWithheld"}.get(spelling, "KeysWithheld")
    assert expected in got, (spelling, got)


def test_feedback_never_shows_a_flag(graded):
    grades = graded["base"] / "grades" / "feedback"
    for spelling in SPELLINGS:
        page = (grades / f"{spelling}.html").read_text(encoding="utf-8")
        assert "answer keys and got nothing" not in page and "looks for roofkit" not in page


def test_a_graded_kernel_cannot_read_the_real_package(tmp_path):
    """The fence itself, without a notebook: the settings every graded kernel runs with."""
    settings = execute.sandbox_settings(LIMITS, str(tmp_path))
    real = str((ROOT / "roofkit").resolve())
    assert not any(p == real or real.startswith(p.rstrip("/") + "/") for p in settings["read"])
    assert settings["package"] in settings["read"] and settings["graded"]
    package = Path(settings["package"]) / "roofkit"
    # the copy is the real package less exactly the question bank (course/bank/), whose __init__ is a tripwire
    def files(root):
        return {p.relative_to(root).as_posix() for p in root.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith(".")}
    real_files = files(ROOT / "roofkit")
    bank = {f for f in real_files if f.startswith("course/bank/")}
    assert "course/bank/lesson_00.py" in bank and "course/quiz.py" in real_files
    assert files(package) == real_files - bank | {"course/bank/__init__.py"}
    assert "withheld" in (package / "course/bank/__init__.py").read_text(encoding="utf-8")
    assert not list(package.rglob("lesson_*.py"))


def test_self_study_still_checks_against_the_key():
    assert quiz.check(QID, 2000).correct is True and quiz.check(QID, 1000).correct is False
