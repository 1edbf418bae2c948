"""`roofkit assign --gradescope`: the zip Gradescope runs, unpacked and run as Gradescope runs it.

Gradescope extracts the zip into /autograder/source, puts the hand-in in /autograder/submission and
/autograder/submission_metadata.json, runs /autograder/run_autograder and reads /autograder/results/results.json
("Autograder Specifications", gradescope-autograders.readthedocs.io). Here /autograder is a temporary folder
(``AUTOGRADER``) and the Python is this one (``ROOFKIT_PYTHON``, in place of the venv setup.sh makes).
"""

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import nbformat
import pytest

from roofkit.grading import assign, variants

import helpers

ROOT = Path(__file__).resolve().parent.parent

# results.json as Gradescope's specification describes it (the fields roofkit writes, with their types)
SCHEMA = {
    "type": "object", "required": ["score", "tests"],
    "properties": {
        "score": {"type": "number"}, "output": {"type": "string"},
        "output_format": {"enum": ["text", "html", "simple_format", "md", "ansi"]},
        "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "stdout_visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "tests": {"type": "array", "items": {
            "type": "object", "required": ["score", "max_score", "name"],
            "properties": {"score": {"type": "number"}, "max_score": {"type": "number"}, "name": {"type": "string"},
                           "number": {"type": "string"}, "output": {"type": "string"},
                           "status": {"enum": ["passed", "failed"]},
                           "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]}},
            "additionalProperties": False}},
    },
    "additionalProperties": False,
}


def roofkit(*argv, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "roofkit", *map(str, argv)], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    where = tmp_path_factory.mktemp("gradescope")
    (where / "roster.csv").write_text("id,name\nada,Ada L.\nbob,Bob K.\n", encoding="utf-8")
    done = roofkit("assign", "00", "--root", ROOT, "--name", "hw1", "--roster", "roster.csv", "--secret-file",
                   "secret.txt", "--out", "release", "--gradescope", "--due", "2026-12-10T23:59Z",
                   "--late-penalty", "20", cwd=where)
    assert done.returncode == 0, done.stderr
    assert "Gradescope autograder: release/gradescope.zip" in done.stdout
    return where


def test_the_zip_holds_the_scripts_the_release_and_no_student_file(autograder):
    with zipfile.ZipFile(autograder / "release" / "gradescope.zip") as archive:
        names = archive.namelist()
        modes = {i.filename: i.external_attr >> 16 for i in archive.infolist()}
    assert {"setup.sh", "run_autograder", "release/assignment.json", "release/template.ipynb",
            "course-secret.txt", "roofkit-src/pyproject.toml", "roofkit-src/roofkit/__init__.py"} <= set(names)
    assert all(modes[s] & stat.S_IXUSR for s in ("setup.sh", "run_autograder"))
    assert not [n for n in names if "students/" in n or n.endswith("keys.csv") or "__pycache__" in n]


def _hand_in(autograder, root: Path, student: str, sid: str, created_at: str, wrong: str | None = None):
    """Gradescope's /autograder for one hand-in: the source unpacked, the notebook, the metadata."""
    with zipfile.ZipFile(autograder / "release" / "gradescope.zip") as archive:
        archive.extractall(root / "source")
    release = autograder / "release"
    answers = helpers.right_answers(release, student, "hw1")
    if wrong:
        answers[wrong] = f"check({wrong!r}, '1')"
    nb = helpers.submission(release, student, answers, name="hw1")
    (root / "submission").mkdir(parents=True)
    nbformat.write(nb, root / "submission" / "hw1.ipynb")
    (root / "submission_metadata.json").write_text(json.dumps({
        "id": 1, "created_at": created_at, "assignment": {"title": "hw1"},
        "users": [{"email": f"{sid}@example.edu", "id": 99, "name": student, "sid": sid}]}), encoding="utf-8")
    env = {**os.environ, "AUTOGRADER": str(root), "ROOFKIT_PYTHON": sys.executable,
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    jsonschema.validate(results, SCHEMA)
    return results


@pytest.mark.sandbox
def test_a_hand_in_is_graded_with_its_students_numbers_and_the_late_policy(autograder, tmp_path):
    ada = _hand_in(autograder, tmp_path / "ada", "ada", "ada", "2026-12-10T22:00:00.000000+00:00")
    assert ada["score"] == 5.0 and all(t["status"] == "passed" for t in ada["tests"])
    assert "on time" in ada["output"] and "graded by running your notebook afresh" in ada["output"]
    # bob, a day late (20% off), one answer wrong: 4 of 5 before the penalty, 3.2 after it
    wrong = "l00.fma-flops"
    bob = _hand_in(autograder, tmp_path / "bob", "bob", "bob", "2026-12-11T10:00:00+00:00", wrong=wrong)
    tests = {t["name"]: t for t in bob["tests"]}
    assert tests[wrong]["score"] == 0 and tests[wrong]["status"] == "failed" and "your answer: 1" in tests[wrong]["output"]
    assert bob["score"] == pytest.approx(3.2) and "1 day late" in bob["output"]
    numbers = assign.numbers(assign.read_release(autograder / "release").manifest,
                             variants.read_secret(autograder / "secret.txt"), "bob")
    assert numbers  # bob has numbers of his own, and was graded with them (else his keys would have scored 0)


def test_a_hand_in_without_a_notebook_gets_a_zero_and_the_reason(autograder, tmp_path):
    root = tmp_path / "empty"
    with zipfile.ZipFile(autograder / "release" / "gradescope.zip") as archive:
        archive.extractall(root / "source")
    (root / "submission").mkdir(parents=True)
    (root / "submission" / "notes.txt").write_text("oops", encoding="utf-8")
    env = {**os.environ, "AUTOGRADER": str(root), "ROOFKIT_PYTHON": sys.executable,
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    jsonschema.validate(results, SCHEMA)
    assert results["score"] == 0 and "no notebook" in results["output"]
