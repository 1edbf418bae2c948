"""A class with attackers: honest students graded right and on time, attackers earn nothing, nothing leaks.

    python benchmarks/grading_attacks.py [--workers 2] [--repeat 2] [--timeout 900]

A release of lesson 00 plus one private question (an instructor's own, whose
key must not leak) is made for a class of 10. The class is graded twice with
`roofkit grade` as an instructor runs it (default limits, bubblewrap):

1. all 10 students honest (every answer right), the reference time;
2. the same 5 honest students beside 5 attackers, one from each family of the
   adversarial pass on the grader (issue 21):

   judge    answers that fool or stall the formula judge (findings 1, 2): a
            formula that is infinite at every point, one whose exact value has
            68 billion bits; everything else answered right
   bytes    bytes that break reports (3, 12, 14): a lone surrogate in an answer
            and through the watch's pipe, an answer record nested 900 deep, a
            roster name that is a spreadsheet formula
   escape   processes that escape the kernel (4, 5, 6, 10, 11): a detached
            CPU burner holding a deleted file and memory, a fork bomb, a
            process publishing on the kernel's port after it exits, /etc/shadow
            read into an exception, roofkit's files and its own result rewritten
   files    a submission that is not a notebook (7, 16): a symbolic link to a
            classmate's notebook, and a file whose name is not a student id
   leaks    feedback that leaks (8, 9): a code answer whose exception on a hidden
            case is named after the case, a private question answered wrong to
            read the key's size off the feedback

   and three from the second red team's report (issue 31):

   network  MPTCP and UDP to a listener of the machine's (which must receive
            nothing), 2,000 ports held, and an output bomb: 200 MB of messages
            for no running cell (findings 1, 3, 7, 18)
   selfkill a kernel that kills itself before its answers (10-12): graded 0,
            never an `error` that leaves the LMS grade blank
   cells    6,000 one-line cells (9): refused at once, no grading time spent

The two gradings alternate --repeat times (the machine's load changes
meanwhile) and the fastest of each counts. It prints both wall times and
their ratio (target: at most 1.5x), each
student's score against what they deserve (honest: full marks; an attacker:
the points of the answers it got right honestly, and no more), whether each
run ended before --timeout (the grader never hangs), and every feedback page
checked for what must not be on it (a key of a question answered wrong, a
hidden case, another student's answer, /etc/shadow, a flag, the size of a
private question's error). It exits 1 if any of these fails.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the tests' own way to write a right answer and a submission

import helpers  # noqa: E402
BIN = Path(sys.executable).parent
# in alphabetical order (the grader's) honest students and attackers alternate: each attacker runs beside one
HONEST = ["ada", "cy", "eve", "gus", "ivy", "kai", "mo", "pat"]
ATTACKERS = {"judge": "bob", "bytes": "dee", "escape": "fay", "files": "hal", "leaks": "jo", "network": "lu",
             "selfkill": "ned", "cells": "ro"}
PRIVATE = "bench.gemm-time"
BANK = '''"""A private question: its key never reaches a student."""

from roofkit import formulas, roofline
from roofkit.quiz import Question, register

register(Question(
    id="bench.gemm-time", lesson="bench", kind="numeric",
    prompt="An {n} x {n} x {n} BF16 GEMM runs on the {hw}. How long does it take on the roofline? Answer with a unit.",
    params={"n": 4096, "hw": "h100"}, variants={"n": (2048, 8192)},
    key=lambda n, hw: roofline.analyze(formulas.gemm(n, n, n), hw, "bf16").time_s,
    unit="s", hints=("Find which roof limits it.",), points=2))
'''
TOKEN = "roofkit-bench-attack"
LISTENER = socket.socket()  # a service of the machine's: a graded kernel must not reach it (the network attacker)
LISTENER.bind(("127.0.0.1", 0))
LISTENER.listen()
LISTENER.setblocking(False)
UDP = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # ... and its UDP twin on the same port
UDP.bind(("127.0.0.1", LISTENER.getsockname()[1]))
UDP.setblocking(False)


def attackers(release: Path, out: Path, subs: Path) -> dict[str, int]:
    """Write the five attackers' submissions; return the points each deserves."""
    from roofkit.course import quiz

    spawn = (f"import subprocess, sys\ndef spawn(code):\n    subprocess.Popen([sys.executable, '-c', code, {TOKEN!r}], "
             "start_new_session=True, env={}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, "
             "stderr=subprocess.DEVNULL)")
    deserved = {}
    judge, garbled, escaper, linker, leaker = (ATTACKERS[f] for f in ("judge", "bytes", "escape", "files", "leaks"))
    fay = helpers.right_answers(release, judge)  # judge: right everywhere but the formula
    fay["l00.fma-formula"] = ("check('l00.fma-formula', '((((((n+1)**64)**64)**64)**64)**64)**64')\n"
                              "check('l00.fma-formula', 'exp(9999)+1e-99*n+1e-98*n**2+1e-97*n**3+1e-96*n**4')")
    nbformat.write(helpers.submission(release, judge, fay), subs / f"{judge}.ipynb")
    deserved[judge] = 6
    gus = {"l00.work-or-rate": "check('l00.work-or-rate', '\\ud800')"}  # bytes
    nbformat.write(helpers.submission(release, garbled, gus, before=[
        "import fcntl, os\nfor fd in range(3, 64):\n    try:\n"
        "        if os.readlink(f'/proc/self/fd/{fd}').startswith('pipe:') and "
        "fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:\n"
        "            os.write(fd, b'{\"what\": \"\\\\ud800\"}\\n')\n    except OSError:\n        pass",
        "from IPython.display import display\nnested = 1\nfor _ in range(900):\n    nested = [nested]\n"
        "display({'application/vnd.roofkit.answer+json': {'roofkit_answer': 1, 'id': 'l00.fma-flops', "
        "'answer': nested}}, raw=True)"]), subs / f"{garbled}.ipynb")
    deserved[garbled] = 0
    daemon = ("import os, time\nf = open('held', 'wb')\nf.write(b'x' * 50_000_000)\nf.flush()\nos.unlink('held')\n"
              "blob = bytearray(100_000_000)\nwhile True:\n    if os.fork():\n        os._exit(0)\n    os.setsid()\n"
              "    end = time.time() + 0.5\n    while time.time() < end:\n        pass")
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    publisher = ("import json, time, zmq\ninfo = json.load(open('/tmp/sandbox/kernel.json'))\ntime.sleep(1)\n"
                 "s = zmq.Context().socket(zmq.PUB)\ns.bind('tcp://127.0.0.1:%d' % info['iopub_port'])\n"
                 "while True:\n    s.send_multipart([b'status', b'<IDS|MSG>', b'', b'{}', b'{}', b'{}', b'{}'])")
    target = out / "results" / f"{escaper}.json"
    nbformat.write(helpers.submission(release, escaper, {}, before=[
        "import roofkit.quiz\nfor path in (roofkit.quiz.__file__, "
        f"{str(target)!r}):\n    try:\n        open(path, 'w').write('{{}}')\n    except OSError:\n        pass",
        "raise ValueError(open('/etc/shadow').read())",
        spawn + f"\nspawn({daemon!r})\nspawn({publisher!r})\nspawn({bomb!r})\nimport time\ntime.sleep(3)"],
        after=["import os\nos._exit(0)"]), subs / f"{escaper}.ipynb")
    deserved[escaper] = 0
    os.symlink(subs / f"{HONEST[0]}.ipynb", subs / f"{linker}.ipynb")  # files: a link to a classmate's notebook
    right = helpers.right_answers(release, linker)
    nbformat.write(helpers.submission(release, linker, right), subs / f"{linker}!.ipynb")  # an odd name
    deserved[linker] = 0
    jo = helpers.right_answers(release, leaker)  # leaks: a function that names hidden cases; a private key's size, asked for
    jo["l00.code-flops"] = ("def fma_flops(fmas):\n    if fmas in (1, 7, 1000):\n        return 2 * fmas\n"
                            "    raise type('HIDDEN_' + repr(fmas), (Exception,), {})(repr(fmas))\n\n"
                            "check('l00.code-flops', fma_flops)")
    jo[PRIVATE] = f"check({PRIVATE!r}, '1 s')"
    nbformat.write(helpers.submission(release, leaker, jo), subs / f"{leaker}.ipynb")
    code = quiz.get("l00.code-flops")
    deserved[leaker] = 4 + len(code.cases) / (len(code.cases) + len(code.hidden_cases))
    netter, killer, celler = (ATTACKERS[f] for f in ("network", "selfkill", "cells"))
    port = LISTENER.getsockname()[1]
    probe = ("import socket\nfor kind, proto in ((socket.SOCK_STREAM, 262), (socket.SOCK_DGRAM, 0)):\n    try:\n"
             "        s = socket.socket(socket.AF_INET, kind, proto)\n        s.settimeout(2)\n"
             f"        s.connect(('127.0.0.1', {port}))\n        s.send(b'stolen')\n    except OSError:\n        pass\n"
             "held = []\nfor p in range(20000, 22000):\n    try:\n"
             "        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)\n        s.bind(('127.0.0.1', p))\n"
             "        s.listen()\n        held.append(s)\n    except OSError:\n        pass")
    bomb_out = ("k = get_ipython().kernel\nparent = {'header': {'msg_id': 'no-cell', 'msg_type': 'execute_request', "
                "'session': 'x'}}\nblob = {'data': '[0],' * 500_000}\nfor _ in range(100):\n"
                "    k.session.send(k.iopub_socket, 'comm_msg', blob, parent=parent)")
    nbformat.write(helpers.submission(release, netter, helpers.right_answers(release, netter), before=[probe],
                                      after=[bomb_out]), subs / f"{netter}.ipynb")
    deserved[netter] = 7  # its answers are its own; the attacks must earn and cost nothing
    nbformat.write(helpers.submission(release, killer, helpers.right_answers(release, killer), before=[
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"]), subs / f"{killer}.ipynb")
    deserved[killer] = 0
    many = helpers.submission(release, celler, helpers.right_answers(release, celler))
    many.cells += [nbformat.v4.new_code_cell("1") for _ in range(6000)]
    nbformat.write(many, subs / f"{celler}.ipynb")
    deserved[celler] = 0
    return deserved


def grade(folder: Path, subs: Path, release: Path, secret: Path, workers: int, timeout: float) -> tuple[float, bool]:
    command = [str(BIN / "roofkit"), "grade", str(subs), "--assignment", str(release), "--secret-file", str(secret),
               "--out", str(folder), "--workers", str(workers), "--export", "canvas", "--export", "moodle", "--json"]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, False
    if done.returncode != 0:
        raise SystemExit(f"roofkit grade failed: {done.stderr[-2000:]}")
    return time.perf_counter() - start, True


def leaks(grades: Path, release: Path, students: list[str]) -> list[str]:
    """What is on a feedback page that should not be."""
    from roofkit.course import quiz

    found = []
    try:
        shadow = [line for line in Path("/etc/shadow").read_text().splitlines() if line][:3]
    except OSError:
        shadow = []
    results = {s: json.loads((grades / "results" / f"{s}.json").read_text()) for s in students
               if (grades / "results" / f"{s}.json").exists()}
    hidden = [repr(a[0]) for a in quiz.get("l00.code-flops").hidden_cases]
    for student, result in results.items():
        page = (grades / "feedback" / f"{student}.html").read_text(encoding="utf-8")
        bad = [f"HIDDEN_{h}" for h in hidden if f"HIDDEN_{h}" in page] + [s[:12] for s in shadow if s in page]
        bad += [f for f in result.get("flags", []) if f[:40] in page]
        for q in result.get("questions", []):
            if q["verdict"] == "correct" or q["kind"] not in ("numeric",):
                continue
            params = result.get("variant", {}).get(q["id"], {})
            key = quiz.get(q["id"]).with_params(**params).answer_key()
            shown = page.replace(str(q.get("answer")), "")
            bad += [f"key of {q['id']}" for text in {f"{key:.4g}", f"{key:.3e}", repr(key)} if text in shown]
            if q["id"] == PRIVATE and re.search(r"by about|too (large|small)", page):
                bad.append("the size of a private question's error")
        for other, theirs in results.items():
            if other != student and theirs.get("status") == "graded":
                answers = [str(q.get("answer")) for q in theirs["questions"] if q.get("answer") and len(str(
                    q.get("answer"))) > 6 and q["kind"] == "numeric"]
                bad += [f"{other}'s answer" for a in answers if a in page and a not in json.dumps(result)]
        found += [f"{student}: {b}" for b in bad]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=900, help="seconds a grading may take before it counts as hung")
    parser.add_argument("--repeat", type=int, default=2, help="gradings of each class, alternating (the fastest counts)")
    parser.add_argument("--keep", help="a folder to keep everything in (default: a temporary one, removed)")
    args = parser.parse_args()
    from roofkit.grading import assign, bank

    with tempfile.TemporaryDirectory(prefix="roofkit-bench-attacks-") as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        students = HONEST + list(ATTACKERS.values())
        with open(folder / "roster.csv", "w", newline="", encoding="utf-8") as file:
            writer = csv.writer(file)
            writer.writerow(["id", "name", "email"])
            for s in students:
                name = '=HYPERLINK("http://evil.example","grades")' if s == ATTACKERS["bytes"] else s.title()
                writer.writerow([s, name, f"{s}@example.org"])
        (folder / "bank.py").write_text(BANK, encoding="utf-8")
        secret, release = folder / "secret.txt", folder / "release"
        assign.main(["00"], name="hw", out=release, roster=folder / "roster.csv", secret_file=secret, root=ROOT,
                    bank=folder / "bank.py")
        honest_subs, attacked_subs = folder / "honest", folder / "attacked"
        honest_subs.mkdir()
        attacked_subs.mkdir()
        for s in students:
            nb = helpers.submission(release, s, helpers.right_answers(release, s))
            nbformat.write(nb, honest_subs / f"{s}.ipynb")
            if s in HONEST:
                nbformat.write(nb, attacked_subs / f"{s}.ipynb")
        deserved = attackers(release, folder / "graded-attacked", attacked_subs)
        full = 7
        print(f"class of {len(students)} (lesson 00 and one private question, {full} points), {args.workers} workers")

        honest_runs, attacked_runs = [], []
        for attempt in range(args.repeat):
            for runs, subs_, out in ((honest_runs, honest_subs, folder / "graded-honest"),
                                     (attacked_runs, attacked_subs, folder / "graded-attacked")):
                if out.exists():
                    shutil.rmtree(out)
                runs.append(grade(out, subs_, release, secret, args.workers, args.timeout))
        reference_s, reference_ok = min(s for s, _ in honest_runs), all(ok for _, ok in honest_runs)
        attacked_s, attacked_ok = min(s for s, _ in attacked_runs), all(ok for _, ok in attacked_runs)
        print("wall times: honest " + ", ".join(f"{s:.1f} s" for s, _ in honest_runs) + "; attacked "
              + ", ".join(f"{s:.1f} s" for s, _ in attacked_runs))
        ratio = attacked_s / reference_s
        print(f"{len(students)} honest students: {reference_s:.1f} s; {len(HONEST)} honest + {len(ATTACKERS)} "
              f"attackers: {attacked_s:.1f} s -> "
              f"{ratio:.2f}x (target <= 1.5x); finished before {args.timeout:g} s: {reference_ok and attacked_ok}")
        failures = [] if reference_ok and attacked_ok else ["a grading did not finish: the grader hung"]
        if ratio > 1.5:
            failures.append(f"the attacked class took {ratio:.2f}x the honest one")
        book = {r["student"]: r for r in csv.DictReader(
            (folder / "graded-attacked" / "gradebook.csv").read_text(encoding="utf-8").splitlines())}
        honest_book = {r["student"]: r for r in csv.DictReader(
            (folder / "graded-honest" / "gradebook.csv").read_text(encoding="utf-8").splitlines())}
        times = {}
        for name, grades in (("honest", folder / "graded-honest"), ("attacked", folder / "graded-attacked")):
            times[name] = sum(json.loads((grades / "results" / f"{s}.json").read_text())["seconds"] for s in HONEST)
        print(f"the {len(HONEST)} honest students' own grading time: {times['honest']:.1f} s alone, {times['attacked']:.1f} s "
              f"beside the attackers ({times['attacked'] / times['honest']:.2f}x)")
        for s in HONEST:
            row = book[s]
            ok = row["status"] == "graded" and float(row["score"]) == full
            print(f"  {s:4s} honest       {row['status']:<11s} {float(row['score']):g} / {full}  "
                  f"{'ok' if ok else 'WRONG'}")
            if not ok or float(honest_book[s]["score"]) != full:
                failures.append(f"honest {s} got {row['score']}")
        for family, s in ATTACKERS.items():
            row = book.get(s, {"status": "skipped", "score": "0"})
            ok = float(row["score"] or 0) <= deserved[s] + 1e-9
            print(f"  {s:4s} {family:<12s} {row['status']:<11s} {float(row['score'] or 0):g} / {full}  (deserves "
                  f"{deserved[s]:g}) {'ok' if ok else 'UNDESERVED'}  {row['notes'][:90]}")
            if not ok:
                failures.append(f"attacker {s} ({family}) got {row['score']} > {deserved[s]:g}")
        summary = json.loads((folder / "graded-attacked" / "results.json").read_text())
        print(f"sandbox: {'; '.join(summary['sandbox'])}")
        found = leaks(folder / "graded-attacked", release, students)
        print(f"feedback pages checked: {len(list((folder / 'graded-attacked' / 'feedback').iterdir()))}, "
              f"leaks found: {len(found)}" + "".join(f"\n  {f}" for f in found))
        failures += found
        for name in ("canvas.csv", "moodle.csv", "gradebook.csv"):
            cells_ = [c for r in csv.reader((folder / "graded-attacked" / name).read_text().splitlines()) for c in r]
            formulas = [c for c in cells_ if c[:1] in ("=", "+", "@") or (c[:1] == "-" and c != "-" and not
                                                                          re.fullmatch(r"-[\d.]+", c))]
            if formulas:
                failures.append(f"{name} holds a formula: {formulas[0]!r}")
        print(f"exports free of formulas: {not any('holds a formula' in f for f in failures)}")
        reached = False
        for take in (LISTENER.accept, lambda: UDP.recvfrom(100)):
            try:
                take()
                reached = True
            except BlockingIOError:
                pass
        print(f"the machine's service reached from a graded kernel: {reached}")
        if reached:
            failures.append("a graded kernel connected to a service of the machine")
        for s in (ATTACKERS["selfkill"],):
            if book.get(s, {}).get("status") != "graded":
                failures.append(f"{s} (selfkill) is {book.get(s, {}).get('status')!r}, not graded")
        leftovers = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _has_token(p)]
        print(f"attackers' processes left after grading: {len(leftovers)}")
        if leftovers:
            failures.append(f"{len(leftovers)} attacker processes outlived grading")
        bank.forget(folder / "bank.py")
        print("PASS" if not failures else "FAIL:\n  " + "\n  ".join(failures))
        raise SystemExit(1 if failures else 0)


def _has_token(path: Path) -> bool:
    try:
        return TOKEN.encode() in (path / "cmdline").read_bytes()
    except OSError:
        return False


if __name__ == "__main__":
    main()
