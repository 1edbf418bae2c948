"""A class with attackers in it: each of the sixteen findings of an adversarial pass on ``roofkit grade``, replayed.

The pass (classes of 3-10 on lesson 00, Linux with Landlock ABI 7) found
sixteen ways a student who wants marks, or wants the class to fail, got
through. Each test below does what that student did and checks that it no
longer works. Most attackers sit in one class graded once (an exercise set
of lesson 00's five questions plus one private question, two workers, short
limits); what needs no kernel is checked on the parts directly.

 1 a formula answer that is always right       9 hidden cases in an exception's name
 2 a formula answer that never finishes         10 /etc/shadow in an exception's text
 3 a lone surrogate in an answer or the watch   11 a kernel rewriting roofkit or its own result
 4 a detached process publishing on the port    12 formulas in the CSV exports
 5 processes that outlive their kernel          13 --merge writing outside --out
 6 a kernel that fails to start or is killed    14 deeply nested notebooks and records
 7 links, FIFOs and devices as submissions      15 what a killed grader leaves behind
 8 feedback that gives a private key away       16 odd file names
"""

import csv
import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import helpers
import nbformat
import pytest

from roofkit import cli
from roofkit.course import quiz
from roofkit.grading import assign, bank, execute, files, grade, jail, probe, report, results, score
from roofkit.grading import shard

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "roofkit-attack-7f3a"  # in the command line of every process an attacker starts: none may outlive grading
LIMITS = execute.Limits(notebook_s=60, cell_s=15, startup_s=60, output_bytes=200_000, message_bytes=1_000_000,
                        disk_bytes=200 * 2**20, memory_bytes=2 * 2**30, case_s=1, processes=128)
pytestmark = pytest.mark.sandbox  # bubblewrap: CI installs it (.ci/run); elsewhere skipped without it (conftest.py)
try:
    PLAN = jail.choose("auto")
except jail.SandboxUnavailable:
    PLAN = None  # every test here is skipped
ALWAYS_RIGHT = "exp(9999)+1e-99*n+1e-98*n**2+1e-97*n**3+1e-96*n**4"
NEVER_ENDS = "((((((n+1)**64)**64)**64)**64)**64)**64"
PRIVATE = "atk.gemm-time"
BANK = '''"""A private question for the attack tests."""

from roofkit import formulas, roofline
from roofkit.quiz import Question, register

register(Question(
    id="atk.gemm-time", lesson="atk", kind="numeric",
    prompt="An {n} x {n} x {n} BF16 GEMM runs on the {hw}. How long does it take on the roofline? Answer with a unit.",
    params={"n": 4096, "hw": "h100"}, key=lambda n, hw: roofline.analyze(formulas.gemm(n, n, n), hw, "bf16").time_s,
    unit="s", hints=("Find which roof limits it.",), points=2))
'''
HONEST = ["honest-a", "honest-b"]
KERNEL_ATTACKERS = ["a-rewriter", "formula", "surrogate", "stall", "daemon", "killed", "snoop"]
REFUSED = ["linker", "zero", "fifo", "nested"]
ROSTER = HONEST + KERNEL_ATTACKERS + REFUSED


def _attacks(release: Path, grades: Path) -> dict[str, object]:
    right = {s: helpers.right_answers(release, s) for s in ROSTER}
    spawn = (f"import subprocess, sys\ndef spawn(code):\n    return subprocess.Popen([sys.executable, '-c', code, "
             f"{TOKEN!r}], start_new_session=True, env={{}}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, "
             "stderr=subprocess.DEVNULL)")
    wrong_formula = {"l00.fma-formula": f"check('l00.fma-formula', {NEVER_ENDS!r})\n"
                                        f"check('l00.fma-formula', {ALWAYS_RIGHT!r})"}
    out = {}
    for student in HONEST:
        out[student] = helpers.submission(release, student, right[student])
    # 11: rewrite the roofkit all kernels import, and this student's own result file; answer nothing
    target = str(grades / "results" / "a-rewriter.json")
    out["a-rewriter"] = helpers.submission(release, "a-rewriter", {}, before=[
        "import os, roofkit, roofkit.quiz, json\nwritten = []\n"
        "for path in [roofkit.quiz.__file__, "
        f"os.path.join(os.path.dirname(roofkit.__file__), 'grading', 'score.py'), {target!r}]:\n"
        "    try:\n        open(path, 'w').write('def judge(*a, **k):\\n    raise SystemExit\\n')\n"
        "        written.append(path)\n    except OSError as error:\n        pass\n"
        f"try:\n    json.dump({{'roofkit_result': 1, 'student': 'a-rewriter', 'score': 7}}, open({target!r}, 'w'))\n"
        "except OSError:\n    pass"])
    # 1, 2: formula answers judged in bounded time; the rest answered honestly
    out["formula"] = helpers.submission(release, "formula", {**right["formula"], **wrong_formula})
    # 3, 14: a lone surrogate in an answer and through every pipe the kernel holds; a record nested 900 deep
    out["surrogate"] = helpers.submission(release, "surrogate", {"l00.work-or-rate": "check('l00.work-or-rate', '\\ud800')"},
                                 before=["import fcntl, os\nfor fd in range(3, 64):  # the watch's pipe, found\n"
                                         "    try:\n        if os.readlink(f'/proc/self/fd/{fd}').startswith('pipe:') and "
                                         "fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:\n"
                                         "            os.write(fd, b'{\"what\": \"\\\\ud800 \\\\udfff\"}\\n' * 3)\n"
                                         "    except OSError:\n        pass",
                                         "from IPython.display import display\nnested = 1\nfor _ in range(900):\n"
                                         "    nested = [nested]\n"
                                         "display({'application/vnd.roofkit.answer+json': {'roofkit_answer': 1, "
                                         "'id': 'l00.fma-flops', 'answer': nested}}, raw=True)"])
    # 4: the kernel exits; a detached process takes over its output port and publishes forever
    out["stall"] = helpers.submission(release, "stall", right["stall"], after=[
        spawn + "\nspawn('import json, os, time, zmq\\n"
        "info = json.load(open(os.environ.get(\"KF\", \"/tmp/sandbox/kernel.json\")))\\n"
        "time.sleep(1)\\nsocket = zmq.Context().socket(zmq.PUB)\\n"
        "socket.bind(\"tcp://127.0.0.1:%d\" % info[\"iopub_port\"])\\n"
        "while True:\\n    socket.send_multipart([b\"status\", b\"<IDS|MSG>\", b\"\", b\"{}\", b\"{}\", b\"{}\", "
        "b\"{}\"])')\nimport os\nos._exit(0)"])
    # 5: processes that outlive the kernel: a new session, an empty environment, re-forking; burning CPU,
    #    holding a deleted file and memory; and a fork bomb
    daemon = ("import os, time\nf = open(os.path.join(os.getcwd(), 'held'), 'wb')\nf.write(b'x' * 50_000_000)\n"
              "f.flush()\nos.unlink(f.name)\nblob = bytearray(100_000_000)\nwhile True:\n"
              "    if os.fork():\n        os._exit(0)\n    os.setsid()\n    end = time.time() + 0.5\n"
              "    while time.time() < end:\n        pass")
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    out["daemon"] = helpers.submission(release, "daemon", {}, before=[spawn + f"\nspawn({daemon!r})\nspawn({bomb!r})\n"
                                                            "import time\ntime.sleep(2)"])
    # 6: the kernel is killed (as the OOM killer would) after two answers
    out["killed"] = helpers.submission(release, "killed", {**right["killed"], "l00.fma-formula": "import os, signal\n"
                                                  "os.kill(os.getpid(), signal.SIGKILL)"})
    # 8, 9, 10: one student snooping three ways: resubmissions that binary-search a private key from the size of
    # the error; a function that raises, on hidden cases, an exception named after the case's arguments; and
    # /etc/shadow read into an answer and an exception's text
    out["snoop"] = helpers.submission(release, "snoop", {
        PRIVATE: f"check({PRIVATE!r}, '1 s')",
        "l00.code-flops": ("def fma_flops(fmas):\n    if fmas in (1, 7, 1000):\n        return 2 * fmas\n"
                           "    raise type('HIDDEN_' + repr(fmas), (Exception,), {})('HIDDEN_TEXT_' + repr(fmas))\n\n"
                           "check('l00.code-flops', fma_flops)"),
        "l00.work-or-rate": ("import os\ntry:\n    seen = open('/etc/shadow').read()\nexcept OSError as error:\n"
                             "    seen = type(error).__name__\nanswer = seen[:150] + ' uid=' + str(os.getuid())\n"
                             "check('l00.work-or-rate', answer)")},
        after=["raise ValueError(open('/etc/shadow').read())"])
    return out


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    base = tmp_path_factory.mktemp("attacks")
    people = {s: {"name": s.title()} for s in ROSTER}
    people["honest-a"] = {"name": '=HYPERLINK("http://evil.example","click")', "email": "@SUM(1+1)*cmd|' /C calc'!A0",
                          "section": "+1+1", "sis_login_id": "-2+3+cmd|' /C calc'!A0"}
    columns = ["id", "name", "email", "section", "sis_login_id"]
    with open(base / "roster.csv", "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(columns)
        for student in ROSTER:
            writer.writerow([student, *(people[student].get(c, "") for c in columns[1:])])
    secret = base / "secret.txt"
    secret.write_text("attack-tests-course-secret-0123456789\n", encoding="utf-8")
    (base / "bank.py").write_text(BANK, encoding="utf-8")
    release, subs, grades = base / "release", base / "subs", base / "grades"
    assign.main(questions=["l00.*", "atk.*"], name="hw", out=release, roster=base / "roster.csv", secret_file=secret,
                root=ROOT, bank=base / "bank.py")
    subs.mkdir()
    notebooks = _attacks(release, grades)
    for student, nb in notebooks.items():
        nbformat.write(nb, subs / f"{student}.ipynb")
    # 7: a link to a classmate's notebook, to /dev/zero, a FIFO (per-student folders)
    for student, make in (("linker", lambda p: p.symlink_to(subs / "honest-a.ipynb")),
                          ("zero", lambda p: p.symlink_to("/dev/zero")), ("fifo", lambda p: os.mkfifo(p))):
        (subs / student).mkdir()
        make(subs / student / "hw.ipynb")
    # 14: a notebook nested deeper than any JSON reader goes
    (subs / "nested.ipynb").write_text('{"cells": [{"cell_type": "code", "source": "1", "metadata": '
                                       + "[" * 100_000 + "]" * 100_000 + "}]}", encoding="utf-8")
    # 16: names that are not student ids
    for odd in ("ｂｏｂ.ipynb", "bob!.ipynb"):
        nbformat.write(notebooks["honest-b"], subs / odd)
    started = time.monotonic()
    summary = grade.main([subs], out=grades, release=release, secret_file=secret, workers=2, limits=LIMITS,
                         progress=False, export=["canvas", "moodle"])
    seconds = time.monotonic() - started
    rows = {r["student"]: json.loads((grades / "results" / f"{r['student']}.json").read_text(encoding="utf-8"))
            for r in summary["students"] if (grades / "results" / f"{r['student']}.json").exists()}
    yield {"base": base, "release": release, "subs": subs, "grades": grades, "secret": secret, "summary": summary,
           "rows": rows, "seconds": seconds}
    bank.forget(base / "bank.py")


def _q(result: dict, qid: str) -> dict:
    return next(q for q in result["questions"] if q["id"] == qid)


def _page(attacked, student: str) -> str:
    return (attacked["grades"] / "feedback" / f"{student}.html").read_text(encoding="utf-8")


def _everything_shown(attacked) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in (attacked["grades"] / "feedback").glob("*.html"))


def _leftovers() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and TOKEN.encode() in (entry / "cmdline").read_bytes():
                found.append(entry.name)
        except OSError:
            continue
    return found


def test_honest_students_get_every_point_beside_the_attackers(attacked):
    for student in HONEST:
        row = attacked["rows"][student]
        assert (row["status"], row["score"], row["max_score"]) == ("graded", 7, 7), (student, row["notes"])
    assert attacked["summary"]["sandbox"] and "bubblewrap" in attacked["summary"]["sandbox"][0]


# --- 1, 2: bounded judging ----------------------------------------------------------------------


def test_1_a_formula_that_is_always_right_is_wrong():
    for qid in ("l00.fma-formula", "l02.square-gemm", "l02.ex-batch-limit"):
        assert quiz.judge(quiz.get(qid), ALWAYS_RIGHT).correct is False, qid
    assert quiz.judge(quiz.get("l00.fma-formula"), "2*n + 1e-99*n").correct is False
    assert quiz.judge(quiz.get("l00.fma-formula"), "n + exp(log(n))").correct is True  # equal, through exp and log


@pytest.mark.parametrize("where", ["python", "cli"])
def test_2_a_formula_that_never_finishes_is_judged_at_once(where, capsys):
    started = time.process_time()
    if where == "python":  # what check() runs, in a kernel or on a laptop
        assert quiz.check("l00.fma-formula", NEVER_ENDS).correct is False
    else:
        assert cli.main(["quiz", "check", "l00.fma-formula", NEVER_ENDS]) == 1
        capsys.readouterr()
    assert time.process_time() - started < 2


def test_1_2_in_the_grader(attacked):
    formula = attacked["rows"]["formula"]
    assert _q(formula, "l00.fma-formula")["points"] == 0 and formula["score"] == 6  # the six honest points only


# --- 3: bytes that are not UTF-8 ----------------------------------------------------------------


def test_3_a_lone_surrogate_stops_no_report(attacked, tmp_path):
    row = attacked["rows"]["surrogate"]
    assert row["status"] == "graded" and _q(row, "l00.work-or-rate")["points"] == 0
    for path in [attacked["grades"] / "gradebook.csv", attacked["grades"] / "results.json", *(
            attacked["grades"] / "feedback").glob("*.html")]:
        path.read_bytes().decode("utf-8")  # strict: every report is valid UTF-8
    watch = probe.Watch()  # the watch reads a surrogate without failing
    os.write(watch.write_fd, b'{"what": "\\ud800"}\n')
    assert watch.events() == ["\ud800"]
    watch.close()
    out = tmp_path / "out"
    results.write(out, {"roofkit_result": 1, "student": "ann", "assignment": "hw", "status": "graded", "score": 0.0,
                        "max_score": 1.0, "notes": ["\udfff"], "flags": [], "questions": [{
                            "id": "q", "lesson": "00", "kind": "numeric", "points": 0.0, "max_points": 1.0,
                            "verdict": "wrong", "answer": "\ud800", "reason": ""}]}, None)
    summary = report.main(out, assignment="hw")
    assert summary["students"][0]["status"] == "graded"
    assert "\ufffd" in (out / "feedback" / "ann.html").read_text(encoding="utf-8")


# --- 4: a stall -----------------------------------------------------------------------------------


def test_4_a_detached_process_on_the_output_port_stalls_nothing(attacked):
    row = attacked["rows"]["stall"]
    assert row["status"] == "graded" and row["score"] == 7  # every answer came before the kernel exited
    assert row["execution"]["seconds"] < LIMITS.notebook_s
    assert any("exited (status 0)" in n for n in row["notes"])


def test_4_draining_a_dead_kernel_has_a_deadline():
    class Flood:  # a kernel that sends, without end, messages for another cell (dropped unparsed: None)
        received_bytes = 0

        def next_message(self, timeout=0, parent=None):
            return None

    executor = execute._Executor.__new__(execute._Executor)
    executor.kernel, executor.limits = Flood(), LIMITS
    started = time.monotonic()
    executor.drain(0, "mine", wait_s=0.5)
    assert time.monotonic() - started < 2


# --- 5: processes that outlive their kernel --------------------------------------------------------


def test_5_nothing_outlives_its_kernel(attacked):
    assert _leftovers() == []
    daemon = attacked["rows"]["daemon"]
    assert daemon["score"] == 0 and daemon["status"] == "graded"
    if PLAN.cgroup:  # the fork bomb hit the process limit: the notebook stopped there, not at its time limit
        assert any("processes and threads" in n for n in daemon["notes"]), daemon["notes"]
    for student in HONEST:  # the fork bomb and the burner took nothing from them
        assert attacked["rows"][student]["score"] == 7
    import tempfile

    assert not list(Path(tempfile.gettempdir()).glob(f"{jail.PREFIX}-{os.getpid()}-*"))


# --- 6: kernels that fail to start or are killed -------------------------------------------------


def test_6_a_kernel_that_kills_itself_is_graded_as_it_stands_flagged_and_exported_as_a_number(attacked):
    """A self-kill (os.kill SIGKILL; os._exit(137) and a self-OOM end the same way) once made the result `error`:
    a blank LMS grade and a regrade on every run, so a student could choose to stay ungraded. It is the
    student's result now: the answers before it count, the rest 0, the same on every run, and a flag."""
    killed = attacked["rows"]["killed"]
    assert killed["status"] == "graded" and any("SIGKILL" in n for n in killed["notes"]), killed["notes"]
    assert 0 < killed["score"] < 7 and any("SIGKILL" in f for f in killed["flags"]), killed
    moodle = {r[0]: r[-1] for r in csv.reader((attacked["grades"] / "moodle.csv").read_text().splitlines())}
    assert moodle["killed"] == f"{killed['score']:g}"
    again = grade.main([attacked["subs"] / "killed.ipynb"], out=attacked["grades"], release=attacked["release"],
                       secret_file=attacked["secret"], workers=1, limits=LIMITS, progress=False)
    assert again["graded"] == 0  # done: not graded again on every run


def test_6_a_kernel_the_oom_killer_stopped_is_said_so():
    kernel = execute._Kernel.__new__(execute._Kernel)
    kernel.limits = LIMITS
    kernel.process = type("P", (), {"poll": lambda self: 128 + signal.SIGKILL})()
    kernel.box = type("B", (), {"jail": type("J", (), {"bubble": True, "oom_killed": lambda self: True})()})()
    assert kernel.killed() and kernel.exit_reason() == "was killed for using more than its 2 GB of memory"
    kernel.box.jail.oom_killed = lambda: False
    assert kernel.killed() and kernel.exit_reason() == "crashed (SIGKILL)"
    kernel.process = type("P", (), {"poll": lambda self: 128 + signal.SIGSEGV})()
    assert not kernel.killed() and kernel.exit_reason() == "crashed (SIGSEGV)"  # its own doing: graded


def test_6_a_kernel_that_does_not_start_is_an_error(tmp_path, monkeypatch):
    broken = jail.Plan("bubblewrap", bwrap="/bin/false", bwrap_version="broken", landlock_abi=0, root=PLAN.root)
    run = execute.main(nbformat.v4.new_notebook(), limits=LIMITS, plan=broken)
    assert run.failed and "did not start" in run.failed
    monkeypatch.setattr(jail, "choose", lambda mode="auto": broken)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("check('l00.fma-flops', 2000)")]
    nbformat.write(nb, tmp_path / "ann.ipynb")
    summary = grade.main([tmp_path / "ann.ipynb"], out=tmp_path / "g", limits=LIMITS, progress=False)
    assert summary["students"][0]["status"] == "error"


# --- 7: links and special files -------------------------------------------------------------------


def test_7_links_fifos_and_devices_are_refused_with_a_note(attacked):
    for student, kind in (("linker", "symbolic link"), ("zero", "symbolic link"), ("fifo", "FIFO")):
        row = attacked["rows"][student]
        assert (row["status"], row["score"]) == ("unreadable", 0) and kind in row["notes"][0], row["notes"]
    honest = attacked["rows"]["honest-a"]
    assert not any(str(_q(honest, q)["answer"]) in _page(attacked, "linker") for q in ("l00.fma-flops",))


# --- 8: feedback levels ---------------------------------------------------------------------------


def test_8_a_private_question_gives_no_ratio(attacked):
    row = attacked["rows"]["snoop"]
    private = _q(row, PRIVATE)
    assert private["feedback"] == "misconception" and _q(row, "l00.fma-flops")["feedback"] == "ratio"
    assert _says_ratio(private["reason"])  # the instructor sees it in results.json
    page = _page(attacked, "snoop")
    assert not _says_ratio(page) and "too large" not in page.lower() and "too small" not in page.lower()
    assert "not the expected answer" in page


def _says_ratio(text: str) -> bool:
    """Whether feedback gives a wrong number's size: 'by about 3x', 'by more than 1,000x', 'Off by 7%'."""
    return re.search(r"by about|by more than|off by \d", text, re.IGNORECASE) is not None


@pytest.mark.parametrize("level", score.LEVELS)
def test_8_each_feedback_level_says_what_it_promises(level):
    question = quiz.get("l00.bandwidth-units")
    judged = score.judge_answer(question, "9000 PB/s")
    row = {"student": "ann", "assignment": "hw", "status": "graded", "score": 0.0, "max_score": 1.0, "notes": [],
           "questions": [{"id": question.id, "lesson": "00", "kind": "numeric", "points": 0.0, "max_points": 1.0,
                          "verdict": judged.verdict, "reason": judged.reason, "reason_level": judged.reason_level,
                          "answer": "9000 PB/s", "hint": "Count the FLOPs.", "feedback": level}]}
    page = report.feedback_page(row)
    assert _says_ratio(page) == (level == "ratio")
    assert ("Count the FLOPs." in page) == (level != "none")
    assert (">wrong<" in page) == (level != "none")


# --- 9, 10: what a student's code builds never reaches a page --------------------------------------


def test_9_no_hidden_case_in_an_exception_name(attacked):
    row = attacked["rows"]["snoop"]
    code = _q(row, "l00.code-flops")
    assert code["points"] == pytest.approx(0.6)
    shown = _everything_shown(attacked) + (attacked["grades"] / "gradebook.csv").read_text()
    assert "HIDDEN_" not in shown
    hidden = quiz.get("l00.code-flops").hidden_cases
    assert hidden and not any(f"HIDDEN_{args[0]!r}" in json.dumps(row) for args in hidden)


def test_10_the_kernel_reads_no_secret_of_the_machine(attacked):
    row = attacked["rows"]["snoop"]
    answer = _q(row, "l00.work-or-rate")["answer"]
    assert answer.startswith(("FileNotFoundError", "PermissionError")) and "uid=0" not in answer, answer
    page = _page(attacked, "snoop")
    assert "raised FileNotFoundError" in page and "root:" not in page  # /etc/shadow is not in the sandbox
    try:
        first = Path("/etc/shadow").read_text().splitlines()[0]
    except (OSError, IndexError):
        first = None
    if first:
        assert first not in _everything_shown(attacked) and first not in json.dumps(row)


# --- 11: rewriting what others use ---------------------------------------------------------------


def test_11_a_kernel_cannot_rewrite_roofkit_or_its_result(attacked):
    rewriter = attacked["rows"]["a-rewriter"]
    assert rewriter["status"] == "graded" and rewriter["score"] == 0
    assert results.verify(rewriter, results.key(attacked["secret"].read_text().strip().encode()))
    for student in HONEST + ["formula"]:  # graded after it, with the same roofkit copy
        assert attacked["rows"][student]["score"] >= 6


def test_11_without_a_sandbox_the_damage_stays_with_the_attacker(attacked, tmp_path):
    """--sandbox none (and no Landlock, as on macOS): each kernel has its own copy of roofkit, and a result a
    process rewrites fails its signature check."""
    subs = tmp_path / "subs"
    subs.mkdir()
    target = tmp_path / "g" / "results" / "a-rewriter.json"
    forger = ("import json, os, sys, time\nif os.fork():\n    sys.exit(0)\nos.setsid()\ntime.sleep(6)\n"
              f"json.dump({{'roofkit_result': 1, 'student': 'a-rewriter', 'assignment': 'hw', 'status': 'graded', "
              f"'score': 7.0, 'max_score': 7.0, 'questions': [], 'notes': [], 'flags': []}}, open({str(target)!r}, 'w'))")
    nb = helpers.submission(attacked["release"], "a-rewriter", {}, before=[
        "import roofkit, roofkit.quiz\nfor path in (roofkit.quiz.__file__, roofkit.__file__):\n    try:\n"
        "        open(path, 'w').write('raise SystemExit')\n"
        "    except OSError:\n        pass",
        f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', {forger!r}, {TOKEN!r}], env={{}})"])
    nbformat.write(nb, subs / "a-rewriter.ipynb")
    nbformat.write(nbformat.read(attacked["subs"] / "honest-a.ipynb", as_version=4), subs / "honest-a.ipynb")
    open_limits = execute.Limits(**{**LIMITS.__dict__, "sandbox": "none", "landlock": False})
    summary = grade.main([subs], out=tmp_path / "g", release=attacked["release"], secret_file=attacked["secret"],
                         workers=1, limits=open_limits, progress=False)
    scores = {r["student"]: (r["status"], r["score"]) for r in summary["students"]}
    assert scores["honest-a"] == ("graded", 7) and scores["a-rewriter"][1] == 0  # "error" once the forger wrote
    assert "none" in summary["sandbox"][0] and "--sandbox none" in summary["sandbox"][0]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and _leftovers():
        time.sleep(0.5)
    again = report.main(tmp_path / "g", assignment="hw", signing_key=results.key(
        attacked["secret"].read_text().strip().encode()))
    assert {r["student"]: r["score"] for r in again["students"]}.get("a-rewriter", 0) == 0


def test_11_grading_without_a_sandbox_needs_the_instructors_word(attacked, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(jail.BWRAP_ENV, str(tmp_path / "no-bwrap-here"))
    code = cli.main(["grade", str(attacked["subs"] / "honest-a.ipynb"), "--assignment", str(attacked["release"]),
                     "--secret-file", str(attacked["secret"]), "--out", str(tmp_path / "g")])
    err = capsys.readouterr().err
    assert code == 2 and "no sandbox" in err and "--sandbox none" in err and len(err.strip().splitlines()) == 1


# --- 12: exports -------------------------------------------------------------------------------


def _no_formula(path: Path) -> list[list[str]]:
    rows = list(csv.reader(path.read_text(encoding="utf-8").splitlines()))
    for row in rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "@", "\t", "\r")), (path.name, cell)
            assert not cell.startswith("-") or cell == "-" or files._NUMBER.fullmatch(cell), (path.name, cell)
    return rows


def test_12_exports_neutralise_formulas_and_still_import(attacked):
    from test_grading_shards import _canvas_accepts, _moodle_accepts

    grades = attacked["grades"]
    canvas = _no_formula(grades / "canvas.csv")
    moodle = _no_formula(grades / "moodle.csv")
    _no_formula(grades / "gradebook.csv")
    assert any(r[0] == "'=HYPERLINK(\"http://evil.example\",\"click\")" for r in canvas)
    canvas_grades = _canvas_accepts(canvas)
    assert canvas_grades["'-2+3+cmd|' /C calc'!A0"] == "7"  # the login id, neutralised, still carries the grade
    assert _moodle_accepts(moodle, "Username")["honest-b"] == "7"
    with_email = [moodle[0], *(r for r in moodle[1:] if r[2])]  # mapped by email: the rows that have one
    assert _moodle_accepts(with_email, "Email address") == {"'@SUM(1+1)*cmd|' /C calc'!A0": "7"}
    rows = [{"student": "ann", "status": "graded", "score": 1.0, "max_score": 1, "notes": ["=1+1"],
             "flags": ["@cmd"], "questions": []}]
    table = list(csv.reader(report._gradebook(rows, [], []).splitlines()))
    assert table[1][5:7] == ["'@cmd", "'=1+1"]


# --- 13: merge ----------------------------------------------------------------------------------


def test_13_merge_writes_nothing_outside_out(tmp_path, capsys):
    manifest = {"roofkit_shard": 1, "shard": [1, 1], "assignment": "hw", "fingerprint": "f",
                "release": {"name": "hw"}, "limits": {}, "questions": [], "roster": None, "people": {},
                "students": []}
    folder = tmp_path / "shard-1"
    shard.write_manifest(folder, manifest, None)
    evil = {"roofkit_result": 1, "student": "../../../pwned", "assignment": "hw", "fingerprint": "f",
            "status": "graded", "score": 9.0, "max_score": 1.0, "questions": [], "notes": [], "flags": []}
    (folder / "results").mkdir(parents=True)
    (folder / "results" / "evil.json").write_text(json.dumps(evil), encoding="utf-8")
    (folder / "results" / "ann.json").write_text(json.dumps({**evil, "student": "ann", "score": 1.0}), encoding="utf-8")
    out = tmp_path / "a" / "b" / "merged"
    summary = shard.merge([folder], out=out)
    assert [r["student"] for r in summary["students"]] == ["ann"]
    assert any("evil.json" in line for line in summary["skipped_files"])
    assert not (tmp_path / "pwned.json").exists() and not list(tmp_path.rglob("pwned*"))


def test_13_merge_refuses_a_changed_result(attacked, tmp_path, capsys):
    signing_key = results.key(attacked["secret"].read_text().strip().encode())
    graded = json.loads((attacked["grades"] / "results" / "honest-b.json").read_text(encoding="utf-8"))
    release = json.loads((attacked["release"] / "assignment.json").read_text(encoding="utf-8"))
    folder = tmp_path / "shard-1"
    shard.write_manifest(folder, {"roofkit_shard": 1, "shard": [1, 1], "assignment": "hw",
                                  "fingerprint": graded["fingerprint"], "limits": {}, "questions": [], "roster": None,
                                  "people": {}, "students": ["honest-b"], "release": {
                                      "name": "hw", "secret_fingerprint": release["secret_fingerprint"]}}, signing_key)
    (folder / "results").mkdir()
    text = (attacked["grades"] / "results" / "honest-b.json").read_text(encoding="utf-8")
    (folder / "results" / "honest-b.json").write_text(text, encoding="utf-8")
    merge = ["grade", "--merge", str(folder), "--out", str(tmp_path / "m"), "--secret-file", str(attacked["secret"])]
    assert cli.main(merge) == 0  # as graded: taken
    capsys.readouterr()
    (folder / "results" / "honest-b.json").write_text(text.replace('"score": 7', '"score": 70'), encoding="utf-8")
    assert cli.main(merge) == 2 and "signature" in capsys.readouterr().err


# --- 14: nesting -------------------------------------------------------------------------------


def test_14_deep_nesting_is_no_error(attacked):
    nested = attacked["rows"]["nested"]
    assert (nested["status"], nested["score"]) == ("unreadable", 0) and "nested too deeply" in nested["notes"][0]
    surrogate = attacked["rows"]["surrogate"]  # its nested answer record: read, judged wrong, kept short
    assert surrogate["status"] == "graded" and _q(surrogate, "l00.fma-flops")["points"] == 0
    assert len(json.dumps(surrogate)) < 200_000


# --- 15: a restart cleans up ------------------------------------------------------------------


def test_15_a_restart_cleans_up_what_a_killed_grader_left(attacked, tmp_path):
    subs, out, temp = tmp_path / "subs", tmp_path / "g", tmp_path / "tmp"
    subs.mkdir()
    temp.mkdir()
    def sleeper(student):
        return (f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', "
                f"{TOKEN + ':' + student!r}])")

    for student, extra in (("honest-a", []), ("honest-b", ["import time\ntime.sleep(20)"])):
        nb = nbformat.read(attacked["subs"] / f"{student}.ipynb", as_version=4)
        nb.cells[2:2] = [nbformat.v4.new_code_cell(sleeper(student)), *map(nbformat.v4.new_code_cell, extra)]
        nbformat.write(nb, subs / f"{student}.ipynb")
    # the grader is killed once the first result is written (honest-a's, whose sleeper ended with its kernel) and
    # honest-b's sleeper runs (on a loaded machine its kernel may start late)
    script = ("import os, signal, time\nfrom pathlib import Path\nfrom roofkit.grading import execute, grade\n"
              "def sleepers():\n    n = 0\n    for e in Path('/proc').iterdir():\n        try:\n"
              f"            n += e.name.isdigit() and {(TOKEN + ':honest-b').encode()!r} in "
              "(e / 'cmdline').read_bytes()\n"
              "        except OSError:\n            pass\n    return n\n"
              "def stop(result):\n    end = time.monotonic() + 60\n"
              "    while sleepers() < 1 and time.monotonic() < end:\n        time.sleep(0.1)\n"
              "    os.kill(os.getpid(), signal.SIGKILL)\n"
              f"grade.main([{str(subs)!r}], out={str(out)!r}, release={str(attacked['release'])!r}, "
              f"secret_file={str(attacked['secret'])!r}, workers=2, progress=False, on_result=stop, "
              f"limits=execute.Limits(**{{**{LIMITS.__dict__!r}, 'sandbox': 'none'}}))\n")
    env = {**os.environ, "TMPDIR": str(temp)}
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=180, env=env)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    left = sorted(p.name for p in temp.iterdir())
    assert any(n.startswith(jail.PREFIX) for n in left) and _leftovers(), left  # what the finding saw
    resume = ("import json\nfrom roofkit.grading import execute, grade\n"
              f"s = grade.main([{str(subs / 'honest-a.ipynb')!r}], out={str(out)!r}, release={str(attacked['release'])!r}, "
              f"secret_file={str(attacked['secret'])!r}, workers=2, progress=False, "
              f"limits=execute.Limits(**{{**{LIMITS.__dict__!r}, 'sandbox': 'none'}}))\n"
              "print(json.dumps({'cleaned': s['cleaned'], 'scores': {r['student']: r['score'] "
              "for r in s['students']}}))")
    done = subprocess.run([sys.executable, "-c", resume], capture_output=True, timeout=180, env=env, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["cleaned"] and summary["scores"]["honest-a"] == 7
    assert _leftovers() == []
    assert [p.name for p in temp.iterdir() if p.name.startswith("roofkit-")] == []


# --- 16: names -----------------------------------------------------------------------------------


def test_16_odd_names_are_reported_and_skipped(attacked):
    skipped = attacked["summary"]["skipped_files"]
    assert len(skipped) == 2 and all("is not a student id" in line for line in skipped), skipped
    assert "bob" not in attacked["rows"] and len(attacked["rows"]) == len(ROSTER)
