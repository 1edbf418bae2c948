"""Grading past one machine: shards graded by separate processes, merged into the gradebook one run gives.

Also the LMS exports: Canvas's gradebook import and Moodle's grade import,
checked against the rules each importer applies to the file (Canvas:
instructure/canvas-lms ``lib/gradebook_importer.rb``; Moodle:
moodle/moodle ``grade/import/csv/classes/load_data.php`` and the Moodle docs'
"Grade import" page).
"""

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from roofkit import cli
from roofkit.course import quiz
from roofkit.grading import assign, cells, execute, grade, shard

pytestmark = pytest.mark.sandbox  # grades in bubblewrap (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
ROOFKIT = [sys.executable, "-m", "roofkit.cli"]
LIMITS = ["--timeout", "60", "--cell-timeout", "20"]
STUDENTS = ["ada", "bob", "cy", "dee", "eve", "fay", "gus", "hal"]


def _answered(release: Path, student: str, wrong: bool):
    nb = nbformat.read(release / "students" / student / "hw.ipynb", as_version=4)
    numbers = nb.metadata["roofkit"]["variant"]
    for cell in nb.cells:
        if cells.is_answer_cell(cell):
            qid = cells.checked_ids(cell.source)[0]
            question = quiz.get(qid).with_params(**numbers.get(qid, {}))
            if question.kind == "code":
                cell.source = "def fma_flops(fmas):\n    return 2 * fmas\n\ncheck('l00.code-flops', fma_flops)"
            else:
                key = question.answer_key()
                value = str(key) if question.kind == "symbolic" else key
                if wrong and question.kind == "numeric":
                    value = value / 2  # the FMA-is-one-FLOP slip, on bandwidth a plain wrong number
                cell.source = f"answer = {value!r}\ncheck({qid!r}, answer)"
    return nb


def _run(*argv, **kwargs):
    return subprocess.Popen([*ROOFKIT, *map(str, argv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    base = tmp_path_factory.mktemp("shards")
    (base / "roster.csv").write_text("id,name,email,section\n" + "".join(
        f"{s},{s.title()} Q.,{s}@example.org,S{i % 2 + 1}\n" for i, s in enumerate(STUDENTS)), encoding="utf-8")
    release, subs, secret = base / "release", base / "subs", base / "secret.txt"
    assign.main(["00"], name="hw", out=release, roster=base / "roster.csv", secret_file=secret, root=ROOT)
    subs.mkdir()
    for i, student in enumerate(STUDENTS[:-1]):  # hal hands in nothing
        nbformat.write(_answered(release, student, wrong=i % 3 == 1), subs / f"{student}.ipynb")
    (subs / "gus.ipynb").write_text("{not a notebook", encoding="utf-8")
    common = ["--assignment", release, "--secret-file", secret, *LIMITS]
    shards = [_run("grade", subs, *common, "--shard", f"{k}/3", "--out", base / f"shard-{k}", "--workers", "1",
                   "--json") for k in (1, 2, 3)]
    done = [p.communicate(timeout=600) for p in shards]
    for process, (out, err) in zip(shards, done):
        assert process.returncode == 0, err[-3000:]
    whole = _run("grade", subs, *common, "--out", base / "whole", "--workers", "2", "--export", "canvas",
                 "--export", "moodle")
    out, err = whole.communicate(timeout=600)
    assert whole.returncode == 0, err[-3000:]
    return {"base": base, "release": release, "subs": subs, "secret": secret,
            "shards": [json.loads(out) for out, _ in done]}


def _merge(capsys, *argv):
    code = cli.main(["grade", "--merge", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _merge_signed(capsys, course, *argv):
    code = cli.main(["grade", "--merge", *map(str, argv), "--secret-file", str(course["secret"])])
    out, err = capsys.readouterr()
    return code, out, err


def test_each_student_is_graded_by_exactly_one_shard(course):
    graded = [{s["student"] for s in summary["students"]} for summary in course["shards"]]
    assert sum(len(g) for g in graded) == len(STUDENTS) and set().union(*graded) == set(STUDENTS)
    for k, students in enumerate(graded, start=1):
        assert all(shard.owner(s, 3) == k for s in students)
        manifest = json.loads((course["base"] / f"shard-{k}" / "shard.json").read_text())
        assert manifest["shard"] == [k, 3] and sorted(manifest["students"]) == sorted(students)


def test_the_split_is_stable_and_even():
    ids = [f"s{i:04d}" for i in range(2000)]
    here = [shard.owner(s, 4) for s in ids]
    there = subprocess.run([sys.executable, "-c", "import json, sys\nfrom roofkit.grading import shard\n"
                            "print(json.dumps([shard.owner(s, 4) for s in json.load(sys.stdin)]))"],
                           input=json.dumps(ids), capture_output=True, text=True, check=True)
    assert json.loads(there.stdout) == here  # another process, another hash seed: the same split
    counts = [here.count(k) for k in (1, 2, 3, 4)]
    assert all(430 < c < 570 for c in counts), counts
    assert [shard.owner(s, 1) for s in ids[:50]] == [1] * 50
    for bad in ("0/4", "5/4", "2", "a/b", "1/0"):
        with pytest.raises(Exception, match="--shard expects K/N"):
            shard.parse(bad)


def test_merging_gives_the_gradebook_of_one_run(course, capsys):
    base = course["base"]
    code, out, err = _merge(capsys, base / "shard-1", base / "shard-2", base / "shard-3", "--out", base / "merged",
                            "--secret-file", course["secret"], "--export", "canvas", "--export", "moodle")
    assert code == 0, err
    whole, merged = base / "whole", base / "merged"
    for name in ("gradebook.csv", "canvas.csv", "moodle.csv"):
        assert (merged / name).read_text() == (whole / name).read_text(), name
    assert sorted(p.name for p in (merged / "feedback").iterdir()) == sorted(p.name for p in (whole / "feedback").iterdir())
    for page in (whole / "feedback").iterdir():
        assert (merged / "feedback" / page.name).read_text() == page.read_text(), page.name
    timing = {"seconds", "graded_at", "execution", "signature"}  # the signature covers the timing too
    rows = [{r["student"]: {k: v for k, v in r.items() if k not in timing}
             for r in json.loads((folder / "results.json").read_text())["students"]} for folder in (whole, merged)]
    assert rows[0] == rows[1]
    book = list(csv.DictReader((merged / "gradebook.csv").read_text().splitlines()))
    assert {r["student"]: r["status"] for r in book}["hal"] == "missing"
    assert {r["student"]: r["status"] for r in book}["gus"] == "unreadable"
    assert {r["student"]: r["score"] for r in book}["ada"] == "5"


def test_merge_refuses_what_does_not_belong_together(course, capsys, tmp_path):
    base = course["base"]
    shards = [base / f"shard-{k}" for k in (1, 2, 3)]
    code, _, err = _merge(capsys, *shards[:2], "--out", tmp_path / "m")
    assert code == 2 and "shard(s) 3/3 missing" in err
    code, _, err = _merge(capsys, shards[0], shards[0], shards[1], "--out", tmp_path / "m")
    assert code == 2 and "given twice" in err
    code, _, err = _merge(capsys, *shards, "--out", shards[0])
    assert code == 2 and "is one of the shards" in err
    other_limits = tmp_path / "slow-1"  # shard 1 again (one of its students), with another cell limit
    first = next(s for s in STUDENTS[:-1] if shard.owner(s, 3) == 1)
    grade.main([course["subs"] / f"{first}.ipynb"], out=other_limits, release=course["release"],
               secret_file=course["secret"], limits=execute.Limits(notebook_s=60, cell_s=25), progress=False,
               shard=(1, 3))
    code, _, err = _merge(capsys, other_limits, *shards[1:], "--out", tmp_path / "m")
    assert code == 2 and "other limits" in err and "cell_s" in err
    other = tmp_path / "other-release"  # a shard of another release
    assign.main(questions=["l00.fma-flops"], name="hw", out=other, root=ROOT)
    nbformat.write(nbformat.read(other / "hw.ipynb", as_version=4), tmp_path / "ada.ipynb")
    grade.main([tmp_path / "ada.ipynb"], out=tmp_path / "foreign-1", release=other, progress=False, shard=(1, 3),
               limits=execute.Limits(notebook_s=60, cell_s=20))
    code, _, err = _merge(capsys, tmp_path / "foreign-1", *shards[1:], "--out", tmp_path / "m")
    assert code == 2 and "another release" in err
    code, _, err = _merge(capsys, tmp_path, "--out", tmp_path / "m")
    assert code == 2 and "not the output of a sharded grading" in err


def _canvas_accepts(rows: list[list[str]]) -> dict[str, str]:
    """Canvas's importer rules for the header and the student rows (lib/gradebook_importer.rb), as a checker.

    Header: column 0 names the student, column 1 the Canvas ID, then 'SIS User ID' and 'SIS Login ID', and the
    student columns end with 'Section'; every later column is an assignment. A row whose first cell is
    'Points Possible' gives the assignments' points. Returns {SIS Login ID: grade}.
    """
    header = rows[0]
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1]
    assert re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3])
    student_columns = 5
    assert "Section" in header[student_columns - 1]
    assignments = header[student_columns:]
    assert assignments and not any(a in ("Current Score", "Final Score") for a in assignments)
    points = [r for r in rows[1:] if "Points Possible" in r[0]]
    assert len(points) == 1 and float(points[0][student_columns])
    grades = {}
    for row in rows[1:]:
        if "Points Possible" in row[0]:
            continue
        assert len(row) == len(header) and (row[1] or row[2] or row[3] or row[0])  # a way to find the student
        value = row[student_columns].strip()
        assert value == "" or float(value) >= 0
        grades[row[3]] = value
    return grades


def _moodle_accepts(rows: list[list[str]], identifier: str) -> dict[str, str]:
    """Moodle's CSV import (load_data.php): a header row; one column mapped to a user field; grades numeric or '-'."""
    header = rows[0]
    assert identifier in header and len(header) >= 2
    column = header.index(identifier)
    grades = {}
    for row in rows[1:]:
        assert len(row) == len(header) and len(row) > 1 and row[column]
        value = row[-1].strip()
        assert value == "-" or float(value) >= 0
        grades[row[column]] = value
    return grades


def test_the_exports_hold_their_formats(course):
    whole = course["base"] / "whole"
    book = {r["student"]: r for r in csv.DictReader((whole / "gradebook.csv").read_text().splitlines())}
    canvas = list(csv.reader((whole / "canvas.csv").read_text().splitlines()))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "hw"]
    assert canvas[1][0] == "Points Possible" and canvas[1][-1] == "5"
    assert _canvas_accepts(canvas) == {s: r["score"] for s, r in book.items()}
    assert canvas[2][0] == "Ada Q." and canvas[2][4] == "S1"  # from the roster's name and section columns
    moodle = list(csv.reader((whole / "moodle.csv").read_text().splitlines()))
    assert moodle[0] == ["Username", "ID number", "Email address", "hw"]
    assert _moodle_accepts(moodle, "Username") == {s: r["score"] for s, r in book.items()}
    assert _moodle_accepts(moodle, "Email address")["bob@example.org"] == book["bob"]["score"]


def test_an_error_row_leaves_the_lms_grade_alone():
    from roofkit.grading import export

    rows = [{"student": "ada", "status": "graded", "score": 4.5, "max_score": 5},
            {"student": "bob", "status": "error", "score": 0.0, "max_score": 5}]
    canvas = list(csv.reader(export.canvas(rows, column="hw (12)", points=5).splitlines()))
    assert canvas[0][-1] == "hw (12)" and [r[-1] for r in canvas[2:]] == ["4.5", ""]
    moodle = list(csv.reader(export.moodle(rows, column="hw").splitlines()))
    assert [r[-1] for r in moodle[1:]] == ["4.5", "-"]
    assert _canvas_accepts(canvas) == {"ada": "4.5", "bob": ""}
