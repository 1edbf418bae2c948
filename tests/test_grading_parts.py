"""The grading package piece by piece: variants, locked cells, safe judging, the case runner, the CLI."""

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from roofkit.course import quiz
from roofkit.errors import InvalidValue
from roofkit.grading import cases, cells, execute, jail, sandbox, score, variants

from helpers import run

ROOT = Path(__file__).resolve().parent.parent
SECRET = b"a-secret-for-the-tests-0123456789"


# --- variants ------------------------------------------------------------------------------


def test_variants_are_deterministic_and_secret():
    question = quiz.get("l00.fma-flops")
    drawn = [variants.draw(SECRET, f"s{i:02d}", question) for i in range(40)]
    assert drawn == [variants.draw(SECRET, f"s{i:02d}", question) for i in range(40)]
    assert drawn != [variants.draw(b"another-secret-0123456789", f"s{i:02d}", question) for i in range(40)]
    assert len({d["fmas"] for d in drawn}) > 15  # students get different numbers
    assert variants.fingerprint(SECRET) == variants.fingerprint(SECRET) and SECRET.hex() not in variants.fingerprint(SECRET)


@pytest.mark.parametrize("question", [q for q in quiz.questions() if q.variants], ids=lambda q: q.id)
def test_every_question_with_variants_has_some(question):
    combos = variants.combinations(question)
    assert combos and all(question.with_params(**c).text() for c in combos)


@pytest.mark.parametrize("question", [q for q in quiz.questions("00") if q.variants], ids=lambda q: q.id)
def test_variants_never_give_the_lessons_numbers_and_never_share_a_key(question):
    combos = variants.combinations(question)
    assert combos, f"{question.id}: no usable variant"
    assert dict(question.params) not in [{**question.params, **c} for c in combos]
    if question.kind == "numeric":
        keys = [float(question.with_params(**c).answer_key()) for c in combos] + [float(question.answer_key())]
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                assert abs(a - b) > max(question.rtol, 1e-9) * abs(b), (question.id, a, b)


def test_roster_errors(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\nann,A\nbad id,B\n")
    with pytest.raises(InvalidValue, match=r"bad student id 'bad id'"):
        variants.read_roster(roster)
    roster.write_text("id\nann\nann\n")
    with pytest.raises(InvalidValue, match=r"listed twice: ann"):
        variants.read_roster(roster)
    roster.write_text("student,email\nann,a@x\nbo,b@x\n")
    assert variants.read_roster(roster) == ["ann", "bo"]
    roster.write_text("ann\nbo\n")
    assert variants.read_roster(roster) == ["ann", "bo"]


# --- locked cells --------------------------------------------------------------------------


def _nb(*sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s) if s.startswith("#") else nbformat.v4.new_code_cell(s)
                for s in sources]
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i}"
    return nb


def test_compare_reports_edited_deleted_duplicated_and_moved_cells():
    release = _nb("# one", "x = 1", "# two", "answer = ...  # your answer here\ncheck('q', answer)", "# three", "y = 2")
    locked = cells.locked_cells(release)
    assert [lock.position for lock in locked] == [1, 2, 3, 5, 6]
    same = cells.compare(locked, release.cells)
    assert same.problems() == [] and same.found == 5 and same.verbatim == {0, 1, 2, 4, 5}
    student = _nb("# one", "x = 1   ", "# two", "answer = 3\ncheck('q', answer)", "# three", "y = 2")
    assert cells.compare(locked, student.cells).problems() == []  # trailing spaces are no edit
    changed = nbformat.from_dict(json.loads(json.dumps(release)))
    changed.cells[1].source = "x = 2"  # edited (same id)
    del changed.cells[2]  # deleted
    changed.cells.append(nbformat.from_dict(dict(changed.cells[0], id="copy")))  # duplicated
    changed.cells[3], changed.cells[4] = changed.cells[4], changed.cells[3]  # moved
    report = cells.compare(locked, changed.cells)
    assert report.edited == ["locked cell 2 (code: `x = 1`) was edited".removesuffix(" was edited")]
    assert report.deleted == ["locked cell 3 (markdown: `# two`)"]
    assert report.duplicated == ["locked cell 1 (markdown: `# one`)"]
    assert report.moved and report.changed == {1}


# --- judging answers safely ---------------------------------------------------------------


@pytest.mark.parametrize("text", ["3.35 TB/s", "3350 GB/s", "3.35e12", "3350 * 1e9", "(2**40)*3 B/s"])
def test_numbers_as_typed_are_read(text):
    judged = score.judge_answer(quiz.get("l00.bandwidth-units"), text)
    assert judged.verdict in ("correct", "wrong") and "could not read" not in judged.reason


@pytest.mark.parametrize("text", ["__import__('os').system('id')", "10**10**10", "9**99999 GB", "2^2^2^2^2^2",
                                  "x" * 201, "open('/etc/passwd')"])
def test_anything_else_is_refused_unread(text):
    started = time.monotonic()
    judged = score.judge_answer(quiz.get("l00.bandwidth-units"), text)
    assert judged.verdict == "wrong" and "could not read your answer" in judged.reason
    assert time.monotonic() - started < 1


@pytest.mark.parametrize("text, ok", [("2*n", True), ("n + n", True), ("2*n^1", True), ("sqrt(4)*n", True),
                                      ("2n", True), ("n**99999", False), ("__import__('os')", False),
                                      ("n.real", False), ("(lambda: n)()", False), ("m*2", False), ("[n]", False)])
def test_formulas_are_read_by_the_course_reader_never_by_sympify(text, ok):
    started = time.monotonic()
    judged = score.judge_answer(quiz.get("l00.fma-formula"), text)
    assert (judged.verdict == "correct") is ok
    assert time.monotonic() - started < 1


def test_answers_that_are_not_text_or_numbers():
    question = quiz.get("l00.fma-flops")
    assert score.judge_answer(question, None).verdict == "not answered"
    assert score.judge_answer(question, "Ellipsis").verdict == "not answered"
    for odd in ([2000], {"a": 1}, True, float("nan")):
        assert score.judge_answer(question, odd).verdict == "wrong"
    assert score.judge_answer(question, 2000).verdict == "correct"


# --- code questions in a clean process -----------------------------------------------------


def _run_cases(items, tmp_path, case_s=1.0):
    box = execute.Box(execute.Limits(), jail.choose("auto"))
    try:
        return cases.run(items, box=box, case_s=case_s)
    finally:
        box.close()


@pytest.mark.sandbox
def test_functions_run_in_a_separate_process_and_cannot_touch_the_grader(tmp_path):
    sources = {
        "good": "def f(fmas):\n    print('noise')\n    return 2 * fmas",
        "patch": "def f(fmas):\n    import roofkit.quiz as q\n    q._close = lambda *a: True\n    return -1",
        "slow": "def f(fmas):\n    while fmas > 5:\n        pass\n    return 2 * fmas",
        "lambda": "check('l00.code-flops', lambda fmas: fmas + fmas)",
        "broken": "def f(fmas)\n    return 1",
        "uses": "def f(fmas):\n    return formulas.gemm(1, 1, 1).flops * fmas",
    }
    items = [{"q": name, "source": source, "cases": [[1], [7]]} for name, source in sources.items()]
    lines = _run_cases(items, tmp_path)
    assert lines[("good", 0)]["value"] == 2 and lines[("good", 1)]["value"] == 14
    assert lines[("patch", 0)]["value"] == -1 and quiz.close_enough(1, 2, 0.01) is False
    assert lines[("slow", 0)]["value"] == 2 and "took longer than" in lines[("slow", 1)]["error"]
    assert lines[("lambda", 1)]["value"] == 14 and lines[("uses", 1)]["value"] == 14
    assert "could not define the function" in lines[("broken", 0)]["error"]
    question = quiz.get("l00.code-flops")
    public = len(question.cases)
    assert score.score_code(question, {0: {"value": 2}, 1: {"value": 2000}, 2: {"value": 14}, 3: {"value": 0},
                                       4: {"value": 1}}, public).points == pytest.approx(0.8)
    stub = score.score_code(question, {i: {"none": True} for i in range(5)}, public)
    assert stub.verdict == "not answered"


def test_the_sandbox_reports_what_applies():
    facts = sandbox.available()
    assert set(facts) == {"landlock_abi", "root", "rlimits"}
    paths = execute.sandbox_settings(execute.Limits(), "/nowhere")["read"]
    assert all(not p.startswith(str(ROOT) + "/tests") for p in paths)
    assert str(ROOT) not in paths and str(ROOT / "roofkit") not in paths  # the real package holds the bank


def test_a_hidden_path_inside_a_readable_folder_stays_hidden(tmp_path):
    for name in ("lib/a.py", "lib/pkg/course/keys.py", "lib/pkg/quiz.py", "lib/z/b.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    hidden = str(tmp_path / "lib" / "pkg" / "course")
    paths = sandbox._excluding((str(tmp_path / "lib"),), (hidden,))
    assert sorted(paths) == sorted(str(tmp_path / "lib" / n) for n in ("a.py", "pkg/quiz.py", "z"))
    assert sandbox._excluding((str(tmp_path / "lib" / "z"),), (hidden,)) == [str(tmp_path / "lib" / "z")]
    assert sandbox._excluding((hidden + "/keys.py",), (hidden,)) == []


# --- the command line ----------------------------------------------------------------------


def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path):
    (tmp_path / "roster.csv").write_text("id\nann\n")
    (tmp_path / "empty").mkdir()
    cases_ = [
        (["grade", tmp_path / "nope", "--out", tmp_path / "g"], "no such file or folder"),
        (["grade", tmp_path / "empty", "--out", tmp_path / "g"], "no notebooks found"),
        (["grade", tmp_path / "roster.csv", "--out", tmp_path / "g", "--assignment", tmp_path], "is not a release"),
        (["assign", "77", "--root", ROOT, "--out", tmp_path / "r"], "no lesson ['77']"),
        (["assign", "--root", ROOT, "--out", tmp_path / "r"], "choose lessons"),
        (["assign", "00", "--root", ROOT, "--points", "l00.fma-flops=lots"], "--points expects ID=POINTS"),
        (["assign", "00", "--root", ROOT, "--points", "l09.x=2", "--out", tmp_path / "r"], "not in this assignment"),
        (["assign", "00", "--root", ROOT, "--name", "no spaces", "--out", tmp_path / "r"], "bad assignment name"),
        (["assign", "--questions", "l00.nothing*", "--root", ROOT, "--out", tmp_path / "r"], "no question matches"),
    ]
    for argv, message in cases_:
        code, out, err = run(capsys, *argv)
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (argv, err)


@pytest.mark.sandbox
def test_assign_then_grade_with_the_wrong_secret_or_two_files_for_one_student(capsys, tmp_path):
    (tmp_path / "roster.csv").write_text("id\nann\nbo\n")
    code, out, _ = run(capsys, "assign", "00", "--root", ROOT, "--roster", tmp_path / "roster.csv", "--secret-file",
                       tmp_path / "secret.txt", "--out", tmp_path / "release", "--json")
    data = json.loads(out)
    assert code == 0 and data["students"] == ["ann", "bo"] and data["points_total"] == 5
    assert data["variants"]["l00.fma-flops"] > 10 and (tmp_path / "secret.txt").stat().st_mode & 0o077 == 0
    (tmp_path / "other.txt").write_text("another secret, long enough\n")
    subs = tmp_path / "subs"
    (subs / "ann").mkdir(parents=True)
    shutil.copy(tmp_path / "release" / "students" / "ann" / "00.ipynb", subs / "ann.ipynb")
    code, _, err = run(capsys, "grade", subs, "--out", tmp_path / "g", "--assignment", tmp_path / "release",
                       "--secret-file", tmp_path / "other.txt")
    assert code == 2 and "this secret is not the one release '00' was made with" in err
    shutil.copy(tmp_path / "release" / "students" / "ann" / "00.ipynb", subs / "ann" / "00.ipynb")
    code, out, err = run(capsys, "grade", subs, "--out", tmp_path / "g", "--assignment", tmp_path / "release",
                         "--secret-file", tmp_path / "secret.txt")
    # two hand-ins skip that student (with the reason), never the class (the red team's attack 14)
    assert code == 0 and "skipped student 'ann': 2 submissions" in out, (out, err)


def test_a_learner_grades_their_own_notebooks(capsys, tmp_path):
    shutil.copy(ROOT / "solutions" / "00-start-here.ipynb", tmp_path / "done.ipynb")
    shutil.copy(ROOT / "notebooks" / "00-start-here.ipynb", tmp_path / "fresh.ipynb")
    code, out, err = run(capsys, "grade", tmp_path / "done.ipynb", tmp_path / "fresh.ipynb", "--out",
                         tmp_path / "mine", "--json")
    assert code == 0, err
    students = {s["student"]: s for s in json.loads(out)["students"]}
    assert students["done"]["lessons"] == {"00": {"score": 5.0, "max_score": 5.0}}
    assert students["fresh"]["score"] == 0
    fresh = json.loads((tmp_path / "mine" / "results" / "fresh.json").read_text())
    assert {q["verdict"] for q in fresh["questions"]} == {"not answered"}
    code, out, _ = run(capsys, "grade", tmp_path / "done.ipynb", "--out", tmp_path / "mine")
    assert code == 0 and "lesson 00: 5 / 5" in out and "already graded 1" in out


@pytest.mark.sandbox
def test_an_exercise_set_without_a_roster(tmp_path):
    from roofkit.grading import assign, grade

    summary = assign.main(questions=["l00.fma-*", "l00.code-flops"], name="ex", out=tmp_path / "release", root=ROOT)
    assert [q["id"] for q in summary["questions"]] == ["l00.fma-flops", "l00.fma-formula", "l00.code-flops"]
    nb = nbformat.read(tmp_path / "release" / "ex.ipynb", as_version=4)
    answers = {"l00.fma-flops": "answer = 2000\ncheck('l00.fma-flops', answer)",
               "l00.fma-formula": "check('l00.fma-formula', '2*n')",
               "l00.code-flops": "def fma_flops(fmas):\n    return 2 * fmas\n\ncheck('l00.code-flops', fma_flops)"}
    for cell in nb.cells:
        if cells.is_answer_cell(cell):
            cell.source = answers[cells.checked_ids(cell.source)[0]]
    nbformat.write(nb, tmp_path / "ann.ipynb")
    result = grade.main([tmp_path / "ann.ipynb"], out=tmp_path / "grades", release=tmp_path / "release",
                        progress=False)["students"]
    assert result == [{"student": "ann", "status": "graded", "score": 3.0, "max_score": 3.0, "percent": 100.0,
                       "lessons": {"00": {"score": 3.0, "max_score": 3.0}}, "flags": []}]
    stored = json.loads((tmp_path / "grades" / "results" / "ann.json").read_text())
    assert stored["notes"] == [] and stored["integrity"]["found"] == stored["integrity"]["locked_cells"]


def test_a_release_of_every_lesson_present(tmp_path):
    """Every lesson written so far can be handed out: its questions, all graded, all open to the student."""
    from roofkit.grading import assign

    lessons = sorted(p.stem[:2] for p in (ROOT / "lessons").glob("[0-9][0-9]-*.md"))
    nb, manifest = assign.template(lessons, name="everything", root=ROOT)
    assert {q["id"] for q in manifest["questions"]} == {q.id for q in quiz.questions() if q.lesson in lessons}
    student = assign.student_notebook(nb, manifest, "ann", SECRET)
    stored = student.metadata["roofkit"]["locked"]
    for cell in student.cells:
        if cells.is_answer_cell(cell):
            assert cell.metadata.get("editable", True) and "checksum" not in cell.metadata["roofkit"]
        else:
            assert cell.metadata["editable"] is False and stored[cell["id"]] == cells.checksum(cell)
    assert len({c["id"] for c in student.cells}) == len(student.cells)


def test_a_release_made_before_prompts_were_stored_is_rebuilt_as_handed_out():
    from roofkit.grading import assign

    nb, manifest = assign.template(["00"], name="old", root=ROOT)
    setup = next(c for c in nb.cells if c["id"] == "assignment-setup")
    assert "use_release(" in setup.source and "fused multiply-adds" in setup.source  # prompts, now
    setup.source = "# Assignment old: the numbers of your questions. Do not edit this cell.\n" \
                   "from roofkit.quiz import use_variant\n\nuse_variant({})"
    student = assign.student_notebook(nb, manifest, "ann", SECRET)
    rebuilt = next(c for c in student.cells if c["id"] == "assignment-setup").source
    assert rebuilt.startswith("# Assignment old for ann:") and "use_variant({\"l00." in rebuilt
    assert "use_release" not in rebuilt


def test_a_release_is_rebuilt_as_handed_out_after_the_bank_changes(tmp_path, monkeypatch):
    """A new roofkit may reword a prompt or change a question's variants: the notebooks handed out stay the same."""
    from dataclasses import replace

    from roofkit.grading import assign

    (tmp_path / "roster.csv").write_text("id\nann\nbo\n")
    assign.main(["00"], name="hw", out=tmp_path / "r", roster=tmp_path / "roster.csv",
                secret_file=tmp_path / "secret.txt", root=ROOT)
    release = assign.read_release(tmp_path / "r")
    secret = variants.read_secret(tmp_path / "secret.txt")
    handed = nbformat.read(tmp_path / "r" / "students" / "ann" / "hw.ipynb", as_version=4)
    question = quiz.get("l00.fma-flops")
    changed = replace(question, prompt="Reworded: {fmas} FMAs, how many FLOPs?", hints=("another hint",),
                      variants={"fmas": (3, 5, 7, 11)})
    monkeypatch.setitem(quiz._BANK, question.id, changed)
    rebuilt = assign.student_notebook(release.template, release.manifest, "ann", secret)
    assert [c.source for c in rebuilt.cells] == [c.source for c in handed.cells]
    assert assign.numbers(release.manifest, secret, "ann") == handed.metadata["roofkit"]["variant"]


class _Channel:
    """A channel that returns queued messages (a callable makes them when asked) and raises Empty when dry."""

    def __init__(self):
        self.queue = []

    def get_msg(self, timeout=0):
        from queue import Empty

        if not self.queue:
            time.sleep(min(timeout, 0.01))
            raise Empty
        return self.queue.pop(0)


def test_a_kernel_is_ready_only_once_its_outputs_arrive_too():
    """ZeroMQ's slow joiner: the first kernel_info is answered on the shell channel while its status on the
    output channel is lost (the subscription is not live yet). Declaring the kernel ready then loses the first
    cell's idle status, and that cell waits out the whole time limit; wait_ready must ask again."""
    kernel = execute._Kernel.__new__(execute._Kernel)
    shell, iopub, sent = _Channel(), _Channel(), []

    class Client:
        shell_channel = shell

        def kernel_info(self):
            msg_id = f"info-{len(sent)}"
            sent.append(msg_id)
            shell.queue.append({"parent_header": {"msg_id": msg_id}})
            if len(sent) > 1:  # the subscription is live from the second request on
                iopub.queue += [{"parent_header": {"msg_id": msg_id}, "msg_type": "status"}] * 2
            return msg_id

    kernel.client, kernel.iopub = Client(), iopub
    kernel.alive = lambda: True
    assert kernel.wait_ready(5) is True
    assert len(sent) == 2 and not iopub.queue  # asked again, and the start-up messages were drained
    kernel.client, sent[:] = Client(), []
    kernel.iopub = _Channel()  # outputs never arrive
    assert kernel.wait_ready(2.5) is False and len(sent) >= 2


# --- the shared helpers: ids, files, signed results -----------------------------------------


@pytest.mark.parametrize("text, ok", [("ada", True), ("a.b_c@d+e-f", True), ("x" * 64, True), ("x" * 65, False),
                                      ("bob!", False), ("ｂｏｂ", False), ("../x", False), (".hidden", False),
                                      ("", False), ("bob\n", False), ("-bob", False)])
def test_one_rule_for_student_ids(text, ok):
    from roofkit.grading import ids

    assert (ids.problem(text) is None) is ok


def test_a_submission_is_a_regular_file_read_once(tmp_path):
    from roofkit.grading import files

    (tmp_path / "a.ipynb").write_bytes(b"{}")
    read = files.read_submission(tmp_path / "a.ipynb", 10)
    assert read.data == b"{}" and read.refused is None and len(read.sha256) == 64
    assert "over the" in files.read_submission(tmp_path / "a.ipynb", 1).refused
    (tmp_path / "link.ipynb").symlink_to(tmp_path / "a.ipynb")
    os.mkfifo(tmp_path / "fifo.ipynb")
    (tmp_path / "zero.ipynb").symlink_to("/dev/zero")
    for name, kind in (("link", "symbolic link"), ("fifo", "FIFO"), ("zero", "symbolic link")):
        refused = files.read_submission(tmp_path / f"{name}.ipynb", 10)
        assert refused.data is None and kind in refused.refused and refused.sha256


@pytest.mark.parametrize("cell, shown", [("=1+1", "'=1+1"), ("+cmd", "'+cmd"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"),
                                         ("\tx", "'\tx"), ("-", "-"), ("-1.5", "-1.5"), ("4.75", "4.75"), ("ann", "ann"),
                                         ("\ud800", "\ufffd\ufffd\ufffd")])
def test_csv_cells_a_spreadsheet_would_run_are_neutralised(cell, shown):
    from roofkit.grading import files

    assert files.csv_cell(cell) == shown


def test_results_are_signed_and_checked(tmp_path):
    from roofkit.grading import results

    key = results.key(b"a-course-secret-of-some-length")
    written = results.write(tmp_path, {"roofkit_result": 1, "student": "ann", "assignment": "hw", "score": 1.0}, key)
    assert results.read(tmp_path / "results" / "ann.json", key).data == written
    assert results.read(tmp_path / "results" / "ann.json", results.key(b"another-secret-entirely")).data is None
    path = tmp_path / "results" / "ann.json"
    path.write_text(path.read_text().replace('"score": 1.0', '"score": 9.0'))
    stored = results.read(path, key)
    assert stored.data is None and "signature" in stored.problem
    assert results.read(path, None).data["score"] == 9.0  # without a secret, results are not signed


def test_a_result_numbers_cells_from_1_as_its_notes_do():
    run = execute.Run(errors=[(0, "NameError: x")], interrupted=[2], stopped="stopped", stopped_at=3,
                      probes=[(4, "answer_key")])
    data = run.to_dict()
    assert data["errors"] == [[1, "NameError: x"]] and data["interrupted"] == [3] and data["stopped_at"] == 4
    assert data["probes"] == [[5, "answer_key"]] and run.notes()[0] == "cell 1 raised NameError"


@pytest.mark.sandbox
def test_a_function_never_sees_a_case_it_was_not_asked_and_public_results_carry_no_hidden_case(tmp_path):
    """The red team's frame walk (#5, #6): the runner once held every case, hidden ones included, in a local a
    student's function could read up the stack and return on a public case, for the feedback page to show."""
    spy = ("def f(x):\n    import sys, gc, re\n    seen = []\n    frame = sys._getframe(1)\n    while frame:\n"
           "        seen.append(repr(frame.f_locals)[:100000])\n        frame = frame.f_back\n"
           "    seen += [repr(o)[:1000] for o in gc.get_objects() if isinstance(o, (list, dict, bytes, bytearray))]\n"
           "    return ' '.join(sorted(set(re.findall(r'\\d{6}\\.0', ' '.join(seen)))))")
    hidden = [[123457.0], [424242.0]]
    other_hidden = [[987654.0]]
    items = [{"q": "spy", "source": spy, "public": 1, "cases": [[1.0], *hidden]},
             {"q": "second", "source": spy, "public": 1, "cases": [[2.0], *other_hidden]}]
    lines = _run_cases(items, tmp_path)
    public_text = " ".join(str(lines[(q, 0)].get("repr", lines[(q, 0)])) for q in ("spy", "second"))
    for secret in ("123457", "424242", "987654"):
        assert secret not in public_text, secret
    assert set(lines) == {("spy", 0), ("spy", 1), ("spy", 2), ("second", 0), ("second", 1)}


@pytest.mark.sandbox
def test_submissions_are_read_before_grading_and_a_link_out_of_ones_folder_is_refused(tmp_path, capsys, monkeypatch):
    """The red team's attacks 13 (a subfolder swapped for a link to a classmate's after the listing), 15 (a
    file named after a classmate in one's own folder) and 16 (an older signed result put back)."""
    from roofkit.grading import grade, report

    (tmp_path / "roster.csv").write_text("id\nann\nbo\nzed\n", encoding="utf-8")
    code, _, _ = run(capsys, "assign", "00", "--root", ROOT, "--roster", tmp_path / "roster.csv", "--secret-file",
                     tmp_path / "secret.txt", "--out", tmp_path / "release")
    assert code == 0
    subs = tmp_path / "subs"
    for student in ("ann", "bo", "zed"):
        (subs / student / "work").mkdir(parents=True)
        shutil.copy(tmp_path / "release" / "students" / student / "00.ipynb", subs / student / "work" / "00.ipynb")
    (subs / "ann" / "work" / "00.ipynb").rename(subs / "ann" / "work" / "bo.ipynb")  # named after a classmate
    listed = grade.collect

    def collect_then_swap(*args, **kwargs):  # zed swaps a subfolder for a link to bo's once the listing is done
        found = listed(*args, **kwargs)
        shutil.rmtree(subs / "zed" / "work")
        os.symlink(subs / "bo" / "work", subs / "zed" / "work")
        return found

    monkeypatch.setattr(grade, "collect", collect_then_swap)
    limits = execute.Limits(notebook_s=60, cell_s=20, startup_s=60)
    summary = grade.main([subs], out=tmp_path / "g", release=tmp_path / "release", secret_file=tmp_path / "secret.txt",
                         progress=False, limits=limits)
    rows = {r["student"]: r for r in summary["students"]}
    assert rows["ann"]["status"] == "graded" and rows["bo"]["status"] == "graded"  # ann's file is ann's
    ann = json.loads((tmp_path / "g" / "results" / "ann.json").read_text(encoding="utf-8"))
    assert ann["submission"].endswith("ann/work/bo.ipynb")
    zed = json.loads((tmp_path / "g" / "results" / "zed.json").read_text(encoding="utf-8"))
    assert zed["status"] == "unreadable" and "leads out of the student's folder" in zed["notes"][0], zed["notes"]
    # a signed result whose submission is not the one handed in is not believed by the report
    bo = json.loads((tmp_path / "g" / "results" / "bo.json").read_text(encoding="utf-8"))
    checked = report.main(tmp_path / "g", assignment="00", roster=["ann", "bo", "zed"],
                          signing_key=grade.results.key(grade.variants.read_secret(tmp_path / "secret.txt")),
                          fingerprint=bo["fingerprint"], digests={"bo": "0" * 64})
    assert {r["student"]: r["status"] for r in checked["students"]}["bo"] == "error"


def test_a_notebook_of_too_many_cells_is_refused_at_once():
    """The red team's attack 9: 780,000 one-line cells cost 614 s outside every deadline."""
    from roofkit.grading import grade

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1") for _ in range(grade.MAX_CELLS + 1)])
    started = time.monotonic()
    loaded, why = grade.load(nbformat.writes(nb).encode())
    assert loaded is None and f"{grade.MAX_CELLS + 1:,} cells" in why and time.monotonic() - started < 5
    fine, why = grade.load(nbformat.writes(nbformat.v4.new_notebook(cells=nb.cells[:100])).encode())
    assert fine is not None and why is None


@pytest.mark.sandbox
@pytest.mark.parametrize("ending", ["import os\nos._exit(137)", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"])
def test_a_kernel_that_ends_itself_is_its_own_result_not_the_graders_failure(ending):
    """The red team's attacks 10 and 11: exit status 137 and a self-sent SIGKILL once made `error` (ungraded,
    retried on every run, a blank LMS grade)."""
    record = ('from IPython.display import display\n'
              'display({"application/vnd.roofkit.answer+json": {"roofkit_answer": 1, "id": "q", "answer": 7}}, '
              'raw=True)')
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(record), nbformat.v4.new_code_cell(ending)])
    run = execute.main(nb, limits=execute.Limits(notebook_s=60, cell_s=20, startup_s=60), plan=jail.choose("auto"))
    assert run.failed is None and run.killed and run.stopped_at == 1
    assert [r["id"] for _, r in run.records] == ["q"]  # the answer before it stands
    assert not any(Path(tempfile.gettempdir()).glob("roofkit-grade-*/kernel.log"))  # its output was no file
