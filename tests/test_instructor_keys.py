"""`roofkit assign --keys`: each student's key per question, for the instructor, right as a student would type it."""

import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat

from roofkit.course import quiz
from roofkit.grading import assign, keys, variants

ROOT = Path(__file__).resolve().parent.parent


def roofkit(*argv, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "roofkit", *argv], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


def test_keys_csv_holds_every_students_key_and_each_reads_right_as_typed(tmp_path):
    (tmp_path / "roster.csv").write_text("id,name\nada,Ada L.\nbob,Bob K.\ncy,Cy M.\n", encoding="utf-8")
    done = roofkit("assign", "03", "--root", ROOT, "--name", "hw3", "--roster", "roster.csv", "--secret-file",
                   "secret.txt", "--out", "release", "--keys", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "keys: release/keys.csv" in done.stdout and "--out grades/hw3" in done.stdout
    table = list(csv.DictReader((tmp_path / "release" / "keys.csv").read_text(encoding="utf-8").splitlines()))
    release = assign.read_release(tmp_path / "release")
    secret = variants.read_secret(tmp_path / "secret.txt")
    ids = [q["id"] for q in release.manifest["questions"]]
    assert [(r["student"], r["question"]) for r in table] == [(s, q) for s in ("ada", "bob", "cy") for q in ids]
    varied = 0
    for row in table:
        numbers = assign.numbers(release.manifest, secret, row["student"]).get(row["question"], {})
        question = quiz.get(row["question"]).with_params(**numbers)
        assert row["numbers"] == (variants.describe(numbers) if numbers else "the lesson's own")
        varied += bool(numbers)
        if question.kind == "code":
            continue
        # the key as the instructor reads it, typed back into the answer box, is right for that student alone
        assert quiz.judge(question, row["key"]).correct, row
    assert varied > 10  # lesson 03 varies most of its questions


def test_no_keys_file_unless_asked_and_none_in_a_students_notebook(tmp_path):
    (tmp_path / "roster.csv").write_text("id\nada\n", encoding="utf-8")
    done = roofkit("assign", "00", "--root", ROOT, "--name", "hw1", "--roster", "roster.csv", "--secret-file",
                   "secret.txt", "--out", "release", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "release" / keys.FILE).exists() and "keys:" not in done.stdout
    done = roofkit("assign", "00", "--root", ROOT, "--name", "hw1", "--roster", "roster.csv", "--secret-file",
                   "secret.txt", "--out", "release", "--keys", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    table = list(csv.DictReader((tmp_path / "release" / keys.FILE).read_text(encoding="utf-8").splitlines()))
    notebook = (tmp_path / "release" / "students" / "ada" / "hw1.ipynb").read_text(encoding="utf-8")
    numeric = [r for r in table if quiz.get(r["question"]).kind == "numeric"]
    assert numeric and keys.FILE not in notebook
    nb = nbformat.reads(notebook, as_version=4)
    assert "keys" not in str(nb.metadata.get("roofkit", {})).lower()


def test_expected_text_names_the_unit_and_the_rule():
    ridge = quiz.get("l03.ridge-bf16")
    assert keys.expected(ridge).endswith(" FLOP/byte") and "within" in keys.accepts(ridge)
    factor = quiz.get("l03.more-flops")
    assert keys.expected(factor).endswith("x") and " x" not in keys.expected(factor)
    code = quiz.get("l00.code-flops")
    assert "hidden" in keys.expected(code) and keys.accepts(code) == "all cases pass"
