"""Grading a class: one submission file per way a notebook can go wrong, all graded in one run.

The release is made by ``assign`` from lesson 00 with a roster and a secret;
each submission starts from its student's own release notebook, answered
correctly with that student's numbers, and is then broken in one way. One
``grade.main`` run grades them all in parallel; each test checks one row: the
score, and a reason in the feedback. Short time limits keep the run fast.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from roofkit.course import quiz
from roofkit.grading import assign, cells, execute, grade, sandbox, variants

pytestmark = pytest.mark.sandbox  # grades in bubblewrap (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
LIMITS = execute.Limits(notebook_s=60, cell_s=10, startup_s=60, output_bytes=200_000, message_bytes=1_000_000,
                        disk_bytes=100 * 2**20, case_s=1)
STUDENTS = ["good", "loop", "stubborn", "sysexit", "osexit", "segfault", "flood", "disk", "patched", "forged", "deleted",
            "duplicated", "reordered", "retyped", "edited", "malformed", "empty", "broken", "wrong", "reader",
            "copier", "partial", "absent"]
LANDLOCK = sandbox.landlock_abi()
CODE = "def fma_flops(fmas):\n    return 2 * fmas\n\ncheck(\"l00.code-flops\", fma_flops)"


def _secret() -> bytes:
    """A fixed secret under which 'good' and 'copier' have different numbers for both numeric questions."""
    for n in range(100):
        secret = f"test-course-secret-{n:04d}".encode()
        draws = [[variants.draw(secret, s, quiz.get(q)) for s in ("good", "copier")]
                 for q in ("l00.fma-flops", "l00.bandwidth-units")]
        if all(a != b for a, b in draws):
            return secret
    raise AssertionError("no secret separates the two students")


def answer_source(qid: str, params: dict) -> str:
    question = quiz.get(qid).with_params(**params)
    if question.kind == "code":
        return CODE
    key = question.answer_key()
    value = str(key) if question.kind == "symbolic" else key
    return f"answer = {value!r}\ncheck({qid!r}, answer)"


def answered(release: Path, student: str, numbers_of: str | None = None):
    """The student's release notebook, every answer cell answered right (for ``numbers_of``'s numbers)."""
    nb = nbformat.read(release / "students" / student / "hw1.ipynb", as_version=4)
    source_nb = nbformat.read(release / "students" / (numbers_of or student) / "hw1.ipynb", as_version=4)
    params = source_nb.metadata["roofkit"]["variant"]
    for cell in nb.cells:
        if cells.is_answer_cell(cell):
            qid = cells.checked_ids(cell.source)[0]
            cell.source = answer_source(qid, params.get(qid, {}))
    return nb


def index_of(nb, qid: str, kind: str = "answer") -> int:
    for i, cell in enumerate(nb.cells):
        text = cell.source
        if kind == "answer" and cell.cell_type == "code" and re.search(rf"check\(['\"]{re.escape(qid)}['\"], answer\)", text):
            return i
        if kind == "answer" and qid == "l00.code-flops" and "def fma_flops" in text:
            return i
        if kind == "ask" and f'ask("{qid}")' in text:
            return i
        if kind == "demo" and text.strip() == f'check("{qid}", 1000)':
            return i
    raise LookupError(qid)


def code_cell(text: str):
    return nbformat.v4.new_code_cell(text)


def _submissions(release: Path, subs: Path, secret_path: Path, grades: Path, other_release: Path) -> None:
    def save(student, nb):
        nbformat.write(nb, subs / f"{student}.ipynb")

    save("good", answered(release, "good"))

    nb = answered(release, "loop")  # an endless loop that stops at the per-cell limit
    nb.cells.insert(index_of(nb, "l00.fma-flops"), code_cell("while True:\n    pass"))
    save("loop", nb)

    nb = answered(release, "stubborn")  # an endless loop that ignores interrupts, after two answers
    nb.cells.insert(index_of(nb, "l00.bandwidth-units") + 1,
                    code_cell("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"))
    save("stubborn", nb)

    nb = answered(release, "sysexit")
    nb.cells.insert(index_of(nb, "l00.fma-flops") + 1, code_cell("import sys\nsys.exit()"))
    save("sysexit", nb)

    nb = answered(release, "osexit")  # the kernel process ends after three answers
    nb.cells.insert(index_of(nb, "l00.fma-formula") + 1, code_cell("import os\nos._exit(3)"))
    save("osexit", nb)

    nb = answered(release, "segfault")  # the kernel crashes after four answers
    nb.cells.insert(index_of(nb, "l00.work-or-rate") + 1, code_cell("import ctypes\nctypes.string_at(0)"))
    save("segfault", nb)

    nb = answered(release, "flood")  # 1.5 GB printed, then 0.4 GB of displays that bypass the print cap
    nb.cells.insert(index_of(nb, "l00.fma-flops"), code_cell("for _ in range(15):\n    print('x' * 100_000_000)"))
    nb.cells.insert(index_of(nb, "l00.fma-flops"), code_cell(
        "from IPython.display import display\nfor _ in range(8):\n    display({'text/plain': 'y' * 50_000_000}, raw=True)"))
    save("flood", nb)

    nb = answered(release, "disk")  # fills the disk after four answers, and leaves a process behind
    nb.cells.insert(index_of(nb, "l00.work-or-rate") + 1, code_cell(
        "import subprocess\nsubprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        "for i in range(10_000):\n    open(f'junk-{i}', 'wb').write(b'x' * 20_000_000)"))
    save("disk", nb)

    nb = answered(release, "patched")  # the checker told to say "correct"; every answer wrong
    nb.cells.insert(index_of(nb, "l00.fma-flops"), code_cell(
        "import roofkit.quiz as q\nq.judge = lambda question, answer: q.Verdict(question.id, True, 'correct!', answer=answer)"))
    for qid, wrong in [("l00.fma-flops", "answer = 1"), ("l00.bandwidth-units", "answer = '1 GB/s'"),
                       ("l00.fma-formula", "answer = '3*n'"), ("l00.work-or-rate", "answer = 'work'")]:
        nb.cells[index_of(nb, qid)].source = f"{wrong}\ncheck({qid!r}, answer)"
    nb.cells[index_of(nb, "l00.code-flops")].source = CODE.replace("2 * fmas", "-1")
    save("patched", nb)

    nb = nbformat.read(release / "students" / "forged" / "hw1.ipynb", as_version=4)  # stubs left unanswered
    mime = quiz.RECORD_MIME
    key = quiz.get("l00.bandwidth-units").with_params(**nb.metadata["roofkit"]["variant"]["l00.bandwidth-units"])
    stored = nb.cells[index_of(nb, "l00.bandwidth-units")]  # a stored output claiming the right answer
    stored.outputs = [nbformat.v4.new_output("display_data", data={
        mime: {"roofkit_answer": 1, "id": "l00.bandwidth-units", "answer": key.answer_key(), "correct": True}})]
    nb.cells.append(code_cell(
        "from IPython.display import display\n"
        f"for record in [{{'roofkit_answer': 1, 'id': 'l00.fma-flops', 'answer': 7, 'correct': True}},\n"
        "               {'roofkit_answer': 1, 'id': 'l99.fake', 'answer': 1, 'correct': True},\n"
        "               [1, 2, 3],\n"
        "               {'roofkit_answer': 1, 'id': 'l00.code-flops', 'answer': 'f', 'correct': True,\n"
        "                'source': 'import roofkit.quiz as q\\nq._close = lambda *a: True\\ndef f(x):\\n    return -1'},\n"
        "               {'roofkit_answer': 1, 'id': 'l00.work-or-rate', 'answer': 'rate', 'correct': True}]:\n"
        f"    display({{{mime!r}: record}}, raw=True)"))
    save("forged", nb)

    nb = answered(release, "deleted")  # an answer cell and a locked cell deleted
    del nb.cells[index_of(nb, "l00.fma-flops")]
    del nb.cells[5]
    save("deleted", nb)

    nb = answered(release, "duplicated")  # an answer cell duplicated (wrong, then right) and a locked cell twice
    at = index_of(nb, "l00.fma-flops")
    nb.cells.insert(at, code_cell("answer = 1\ncheck('l00.fma-flops', answer)"))
    ask = index_of(nb, "l00.fma-formula", "ask")
    nb.cells.insert(ask, nbformat.from_dict(json.loads(json.dumps(nb.cells[ask]))))
    nb.cells[ask]["id"] = "a-copy"
    save("duplicated", nb)

    nb = answered(release, "reordered")  # answer cells moved to the end, two locked cells swapped
    answers = [c for c in nb.cells if c.metadata.get("roofkit", {}).get("answer")]
    nb.cells = [c for c in nb.cells if c not in answers] + answers
    nb.cells[3], nb.cells[4] = nb.cells[4], nb.cells[3]
    save("reordered", nb)

    nb = answered(release, "retyped")  # answer cells deleted and written again differently; an import cell retyped
    params = nb.metadata["roofkit"]["variant"]
    answers = [c for c in nb.cells if c.metadata.get("roofkit", {}).get("answer")]
    nb.cells = [c for c in nb.cells if c not in answers]
    first_code = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "import roofkit" in c.source)
    nb.cells[first_code] = code_cell(nb.cells[first_code].source)
    fmas = params["l00.fma-flops"]["fmas"]
    nb.cells += [code_cell(f"from roofkit.quiz import check as verify\nverify('l00.fma-flops', 2 * {fmas})"),
                 code_cell(answer_source("l00.bandwidth-units", params["l00.bandwidth-units"])),
                 code_cell("check('l00.fma-formula', 'n + n')"), code_cell("check('l00.work-or-rate', 'Rate')"),
                 code_cell("check('l00.code-flops', lambda fmas: fmas * 2)")]
    save("retyped", nb)

    nb = answered(release, "edited")  # setup cell edited to another student's numbers; an answer in a locked cell
    setup = next(c for c in nb.cells if c.get("id") == "assignment-setup")
    other = nbformat.read(release / "students" / "good" / "hw1.ipynb", as_version=4)
    setup.source = next(c for c in other.cells if c.get("id") == "assignment-setup").source
    own = nb.metadata["roofkit"]["variant"]["l00.fma-flops"]
    nb.cells[index_of(nb, "l00.fma-flops")].source = "answer = ...  # your answer here\ncheck('l00.fma-flops', answer)"
    nb.cells[index_of(nb, "l00.fma-flops", "demo")].source = f'check("l00.fma-flops", {2 * own["fmas"]})'
    save("edited", nb)

    (subs / "malformed.ipynb").write_text('{"cells": [ {"cell_type": "code", "sour', encoding="utf-8")
    (subs / "empty.ipynb").write_bytes(b"")
    (subs / "broken.ipynb").write_text('{"cells": 3, "metadata": {}}', encoding="utf-8")

    nb = nbformat.read(other_release / "other.ipynb", as_version=4)  # another assignment, answered
    for cell in nb.cells:
        if cells.is_answer_cell(cell):
            cell.source = CODE
    save("wrong", nb)

    nb = answered(release, "reader")  # tries to read the secret and other students' files
    targets = [secret_path, subs / "good.ipynb", grades, release / "template.ipynb", "/proc/{os.getppid()}/environ"]
    probe = ["import os", "def attempt(action):", "    try:", "        action()", "        return 'READ'",
             "    except Exception as error:", "        return type(error).__name__", "seen = []"]
    for target in targets:
        reader = f"lambda: os.listdir({str(target)!r})" if Path(str(target)).is_dir() else \
            f"lambda: open(f{str(target)!r}).read()"
        probe.append(f"seen.append(attempt({reader}))")
    probe.append(f"seen.append(attempt(lambda: open({str(grades / 'results' / 'reader.json')!r}, 'w').write('{{}}')))")
    if LANDLOCK >= 6:  # without Landlock's signal scoping the kernel could kill the grader: see docs/instructors.md
        probe.append("import signal\nseen.append(attempt(lambda: os.kill(os.getppid(), signal.SIGKILL)))")
    probe.append("stolen = ' '.join(seen)")
    nb.cells.insert(index_of(nb, "l00.fma-formula"), code_cell("\n".join(probe)))
    nb.cells[index_of(nb, "l00.fma-formula")].source = "answer = stolen\ncheck('l00.fma-formula', answer)"
    save("reader", nb)

    save("copier", answered(release, "copier", numbers_of="good"))  # a classmate's answers for their numbers

    nb = answered(release, "partial")  # right on the public cases; wrong on one hidden case, endless on the other
    nb.cells[index_of(nb, "l00.code-flops")].source = (
        "def fma_flops(fmas):\n    while fmas > 10**6:\n        pass\n    return 2 * fmas if fmas else 1\n\n"
        "check('l00.code-flops', fma_flops)")
    save("partial", nb)


def _grade_the_class(base: Path) -> None:
    (base / "roster.csv").write_text("id,name\n" + "".join(f"{s},{s.title()}\n" for s in STUDENTS), encoding="utf-8")
    secret_path = base / "course-secret.txt"
    secret_path.write_text(_secret().decode() + "\n", encoding="utf-8")
    release, subs, grades = base / "release", base / "submissions", base / "grades"
    assign.main(["00"], name="hw1", out=release, roster=base / "roster.csv", secret_file=secret_path, root=ROOT)
    assign.main(questions=["l00.code-flops"], name="other", out=base / "other", root=ROOT)
    subs.mkdir()
    (grades / "results").mkdir(parents=True)
    _submissions(release, subs, secret_path, grades, base / "other")
    grade.main([subs], out=grades, release=release, secret_file=secret_path, workers=2, limits=LIMITS, progress=False)
    (base / "done").write_text("graded\n")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The class, graded once per test session even when pytest-xdist runs these tests on several workers."""
    import fcntl

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's folder, common to all workers
    base = shared / "grading-class"
    with open(shared / "grading-class.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (base / "done").exists():
            shutil.rmtree(base, ignore_errors=True)
            base.mkdir()
            _grade_the_class(base)
    grades = base / "grades"
    results = {row["student"]: row for row in json.loads((grades / "results.json").read_text())["students"]}
    return {"results": results, "grades": grades, "release": base / "release", "subs": base / "submissions",
            "secret": (base / "course-secret.txt").read_text().strip(), "base": base}


def row(graded, student):
    return graded["results"][student]


def question(graded, student, qid):
    return next(q for q in row(graded, student)["questions"] if q["id"] == qid)


def csv_rows(graded) -> list[dict]:
    import csv

    return list(csv.DictReader((graded["grades"] / "gradebook.csv").read_text(encoding="utf-8").splitlines()))


def feedback(graded, student) -> str:
    return (graded["grades"] / "feedback" / f"{student}.html").read_text(encoding="utf-8")


def test_a_correct_submission_gets_every_point(graded):
    good = row(graded, "good")
    assert (good["status"], good["score"], good["max_score"]) == ("graded", 5, 5)
    assert good["notes"] == [] and good["flags"] == []
    assert good["integrity"]["found"] == good["integrity"]["locked_cells"]
    sandboxed = good["execution"]["sandbox"]
    assert sandboxed["landlock_abi"] == LANDLOCK and sandboxed["kind"] == "bubblewrap"
    assert sandboxed["user"].startswith("a user id of its own" if os.geteuid() == 0 else "student")
    assert "bubblewrap" in next(r for r in csv_rows(graded) if r["student"] == "good")["sandbox"]


def test_an_endless_loop_is_interrupted_and_the_rest_still_counts(graded):
    assert row(graded, "loop")["score"] == 5
    assert any("per-cell time limit" in n for n in row(graded, "loop")["notes"])
    stubborn = row(graded, "stubborn")
    assert stubborn["score"] == 2
    assert "could not be interrupted" in question(graded, "stubborn", "l00.fma-formula")["reason"]
    assert "could not be interrupted" in feedback(graded, "stubborn")


def test_exits_and_crashes_keep_the_answers_before_them(graded):
    assert row(graded, "sysexit")["score"] == 5
    assert any("SystemExit" in n for n in row(graded, "sysexit")["notes"])
    assert row(graded, "osexit")["score"] == 3
    assert "the kernel exited (status 3)" in question(graded, "osexit", "l00.work-or-rate")["reason"]
    assert row(graded, "segfault")["score"] == 4
    assert "crashed (SIGSEGV)" in question(graded, "segfault", "l00.code-flops")["reason"]
    assert "SIGSEGV" in feedback(graded, "segfault")


def test_gigabytes_of_output_are_capped_and_noted(graded):
    flood = row(graded, "flood")
    assert flood["score"] == 5
    assert flood["execution"]["truncated"] and flood["execution"]["output_bytes"] < 10 * LIMITS.output_bytes
    assert any("output cap" in n for n in flood["notes"]) and any("size cap" in n for n in flood["notes"])
    assert os.path.getsize(graded["grades"] / "results" / "flood.json") < 100_000


def test_a_notebook_filling_the_disk_is_stopped_and_its_processes_killed(graded):
    """Its files go to its own tmpfs of LIMITS.disk_bytes: the writes fail there, the next cells still run."""
    disk = row(graded, "disk")
    assert disk["score"] == 5
    assert any("raised OSError" in n for n in disk["notes"]), disk["notes"]
    leftovers = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and b"ROOFKIT_SANDBOX_FOLDER=" in (entry / "environ").read_bytes() \
                    and b"sleep" in (entry / "cmdline").read_bytes():
                leftovers.append(entry.name)
        except OSError:
            continue
    assert not leftovers


def test_a_patched_checker_earns_nothing(graded):
    patched = row(graded, "patched")
    assert patched["score"] == 0
    assert all(q["verdict"] == "wrong" and q["reason"] for q in patched["questions"])


def test_forged_records_count_only_for_what_they_answer(graded):
    forged = row(graded, "forged")
    assert forged["score"] == 1 and question(graded, "forged", "l00.work-or-rate")["verdict"] == "correct"
    assert question(graded, "forged", "l00.fma-flops")["verdict"] == "wrong"
    assert question(graded, "forged", "l00.bandwidth-units")["verdict"] == "not answered"  # stored output ignored
    assert question(graded, "forged", "l00.code-flops")["points"] == 0
    assert any("l99.fake" in n for n in forged["notes"]) and any("malformed" in n for n in forged["notes"])


def test_deleted_cells(graded):
    deleted = row(graded, "deleted")
    assert deleted["score"] == 4
    assert "was its answer cell deleted" in question(graded, "deleted", "l00.fma-flops")["reason"]
    assert any(n.endswith("was deleted") for n in deleted["notes"])


def test_duplicated_cells(graded):
    duplicated = row(graded, "duplicated")
    assert duplicated["score"] == 5
    assert "answered 2 times" in question(graded, "duplicated", "l00.fma-flops")["note"]
    assert any(n.endswith("was duplicated") for n in duplicated["notes"])


def test_reordered_cells(graded):
    reordered = row(graded, "reordered")
    assert reordered["score"] == 5
    assert any(n.endswith("was moved") for n in reordered["notes"])
    assert not any("deleted" in n or "edited" in n for n in reordered["notes"])


def test_retyped_cells_are_found_by_the_question_they_check(graded):
    retyped = row(graded, "retyped")
    assert retyped["score"] == 5
    assert not any("was deleted" in n or "was edited" in n for n in retyped["notes"])


def test_edited_locked_cells_are_reported_and_answers_in_them_do_not_count(graded):
    edited = row(graded, "edited")
    assert edited["score"] == 4
    assert sum(n.endswith("was edited") for n in edited["notes"]) == 2
    assert question(graded, "edited", "l00.fma-flops")["verdict"] == "not answered"
    assert "other numbers than yours" in question(graded, "edited", "l00.bandwidth-units")["note"]
    assert any("numbers of good" in f for f in edited["flags"])
    assert "was edited" in feedback(graded, "edited")


def test_malformed_and_empty_notebooks(graded):
    for student, reason in [("malformed", "not valid JSON"), ("empty", "the file is empty"),
                            ("broken", "no list of cells")]:
        result = row(graded, student)
        assert (result["status"], result["score"]) == ("unreadable", 0)
        assert reason in result["notes"][0] and reason in feedback(graded, student)


def test_the_wrong_assignment(graded):
    wrong = row(graded, "wrong")
    assert (wrong["status"], wrong["score"]) == ("wrong-assignment", 0)
    assert "not assignment hw1" in wrong["notes"][0] and "other" in wrong["notes"][0]


def test_a_submission_cannot_read_the_secret_or_other_students_files(graded):
    reader = row(graded, "reader")
    assert reader["score"] == 4
    everything = (graded["grades"] / "results.json").read_text() + "".join(
        p.read_text() for p in (graded["grades"] / "feedback").glob("*.html"))
    assert graded["secret"] not in everything
    seen = question(graded, "reader", "l00.fma-formula")["answer"].split()
    # not there at all in the sandbox (FileNotFoundError), or refused (PermissionError: Landlock, signals)
    assert "READ" not in seen and len(seen) == 6 + (LANDLOCK >= 6), seen


def test_an_answer_copied_from_another_variant_is_wrong(graded):
    copier = row(graded, "copier")
    assert copier["score"] == 3
    for qid in ("l00.fma-flops", "l00.bandwidth-units"):
        assert "other numbers than yours" in question(graded, "copier", qid)["reason"]
        assert any(f.startswith(qid) and "good" in f for f in copier["flags"])
    assert "good" not in feedback(graded, "copier").replace("good.ipynb", "")


def test_code_answers_get_credit_per_case(graded):
    code = question(graded, "partial", "l00.code-flops")
    assert code["verdict"] == "partial" and code["points"] == pytest.approx(0.6)
    assert [c["passed"] for c in code["cases"]] == [True, True, True, False, False]
    assert code["cases"][4]["detail"] in ("did not finish in time", "did not run")  # the grader's words, never the code's
    assert row(graded, "partial")["score"] == pytest.approx(4.6)


def test_one_row_per_student_and_no_key_in_feedback(graded):
    import csv

    rows = list(csv.DictReader((graded["grades"] / "gradebook.csv").read_text(encoding="utf-8").splitlines()))
    assert sorted(r["student"] for r in rows) == sorted(STUDENTS)
    assert next(r for r in rows if r["student"] == "absent")["status"] == "missing"
    for r in rows:
        assert float(r["score"]) == pytest.approx(row(graded, r["student"])["score"])
    for student, result in graded["results"].items():
        for q in result.get("questions", []):
            if q["verdict"] != "correct" and q["kind"] == "numeric":
                params = result["variant"].get(q["id"], {})
                key = quiz.get(q["id"]).with_params(**params).answer_key()
                for text in {f"{key:.4g}", f"{key:.3e}", f"{key:,.0f}", repr(key)}:
                    assert text not in feedback(graded, student).replace(str(q.get("answer")), ""), (student, q["id"])


def test_grading_again_skips_what_is_done(graded):
    summary = grade.main([graded["subs"]], out=graded["grades"], release=graded["release"],
                         secret_file=graded["base"] / "course-secret.txt", workers=2, limits=LIMITS, progress=False)
    assert summary["graded"] == 0 and summary["skipped"] == len(STUDENTS) - 1


def test_kill_and_resume(graded, tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "grades"
    subs.mkdir()
    for student in ("good", "copier", "edited"):
        nbformat.write(answered(graded["release"], student), subs / f"{student}.ipynb")
    script = (
        "import os, signal, sys\nfrom roofkit.grading import execute, grade\n"
        "def stop(result):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
        f"grade.main([{str(subs)!r}], out={str(out)!r}, release={str(graded['release'])!r}, "
        f"secret_file={str(graded['base'] / 'course-secret.txt')!r}, workers=2, progress=False, "
        f"limits=execute.{LIMITS!r}, on_result=stop)\n")
    (tmp_path / "tmp").mkdir()  # what the killed run leaves behind stays in this test's folder
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120,
                            env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    written = list((out / "results").glob("*.json"))
    assert 1 <= len(written) < 3 and not (out / "gradebook.csv").exists()
    # a result whose run failed (a time limit on a loaded machine) is graded again by design
    done = {p.name: p.stat().st_mtime_ns for p in written
            if json.loads(p.read_text(encoding="utf-8")).get("status") != "error"}
    summary = grade.main([subs], out=out, release=graded["release"], secret_file=graded["base"] / "course-secret.txt",
                         workers=2, limits=LIMITS, progress=False)
    assert summary["skipped"] == len(done) and summary["graded"] == 3 - len(done), (
        {p.name: json.loads(p.read_text(encoding="utf-8")).get("fingerprint") for p in written}, summary)
    assert {p.name: p.stat().st_mtime_ns for p in (out / "results").glob("*.json") if p.name in done} == done
    assert not list((out / "results").glob(".*.tmp"))
    scores = {r["student"]: (r["status"], r["score"]) for r in summary["students"]}
    assert len(summary["students"]) == len(STUDENTS)
    assert scores["good"] == scores["copier"] == ("graded", 5)
    assert scores["edited"] == ("graded", 5)  # answered normally this time
