"""Grading speed: one submission against `jupyter execute`, and a class of 100 (targets: <= 1.3x; < 5 min on 2 cores).

    python benchmarks/grading.py [--students 100] [--workers 2] [--repeat 3] [--sandbox bubblewrap|none]

A release of lesson 00 is made for a roster of N students; each submission is
that student's notebook answered (every fifth one with a wrong answer and a
code answer that fails a hidden case, so both paths are timed). Then:

1. one submission, executed by `jupyter execute` and graded by `roofkit grade`
   (both as commands, so both pay their start-up; best of --repeat);
2. the whole class graded by `roofkit grade --workers W`, from nothing.

``--sandbox none`` grades without bubblewrap, to see what the sandbox costs.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def make_class(folder: Path, students: int) -> tuple[Path, Path, Path]:
    from roofkit.course import quiz
    from roofkit.grading import assign, cells

    roster = folder / "roster.csv"
    roster.write_text("id\n" + "".join(f"s{i:03d}\n" for i in range(students)), encoding="utf-8")
    secret, release, subs = folder / "secret.txt", folder / "release", folder / "submissions"
    assign.main(["00"], name="hw", roster=roster, secret_file=secret, out=release, root=ROOT)
    subs.mkdir()
    for i in range(students):
        student = f"s{i:03d}"
        nb = nbformat.read(release / "students" / student / "hw.ipynb", as_version=4)
        numbers = nb.metadata["roofkit"]["variant"]
        for cell in nb.cells:
            if not cells.is_answer_cell(cell):
                continue
            qid = cells.checked_ids(cell.source)[0]
            question = quiz.get(qid).with_params(**numbers.get(qid, {}))
            if question.kind == "code":
                body = "return 2 * fmas if fmas else 1" if i % 5 == 0 else "return 2 * fmas"
                cell.source = f"def fma_flops(fmas):\n    {body}\n\ncheck({qid!r}, fma_flops)"
            else:
                key = question.answer_key()
                value = str(key) if question.kind == "symbolic" else key
                if i % 5 == 0 and question.kind == "numeric":
                    value = value / 2
                cell.source = f"answer = {value!r}\ncheck({qid!r}, answer)"
        nbformat.write(nb, subs / f"{student}.ipynb")
    return release, secret, subs


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sandbox", choices=("bubblewrap", "none"), default="bubblewrap")
    args = parser.parse_args()
    sandbox = ["--sandbox", args.sandbox]
    with tempfile.TemporaryDirectory(prefix="roofkit-bench-") as tmp:
        folder = Path(tmp)
        release, secret, subs = make_class(folder, args.students)
        one = subs / "s001.ipynb"
        execute_s = min(timed([str(BIN / "jupyter"), "execute", str(one)], folder) for _ in range(args.repeat))
        grade_s = []
        for attempt in range(args.repeat):
            out = folder / f"one-{attempt}"
            grade_s.append(timed([str(BIN / "roofkit"), "grade", str(one), "--assignment", str(release),
                                  "--secret-file", str(secret), "--out", str(out), "--workers", "1", *sandbox],
                                 folder))
        ratio = min(grade_s) / execute_s
        print(f"sandbox: {args.sandbox}")
        print(f"one submission: jupyter execute {execute_s:.2f} s, roofkit grade {min(grade_s):.2f} s "
              f"-> {ratio:.2f}x  (target <= 1.3x)")
        start = time.perf_counter()
        subprocess.run([str(BIN / "roofkit"), "grade", str(subs), "--assignment", str(release), "--secret-file",
                        str(secret), "--out", str(folder / "class"), "--workers", str(args.workers), *sandbox],
                       cwd=folder,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        class_s = time.perf_counter() - start
        book = (folder / "class" / "gradebook.csv").read_text(encoding="utf-8").splitlines()
        full = sum(1 for line in book[1:] if ",graded,5,5," in line)
        print(f"class of {args.students}: {class_s:.1f} s with {args.workers} workers "
              f"({class_s / args.students:.2f} s per submission; target < 300 s); "
              f"{len(book) - 1} rows, {full} with full marks (expected {args.students - (args.students + 4) // 5})")
        import csv
        import json

        for row in csv.DictReader(book):  # a submission answered right that lost points: why
            if int(row["student"][1:]) % 5 and (row["status"], row["score"]) != ("graded", "5"):
                result = json.loads((folder / "class" / "results" / f"{row['student']}.json").read_text())
                print(f"  {row['student']}: {row['status']} {row['score']}: {'; '.join(result['notes'])[:200]}")
        shutil.rmtree(folder / "class", ignore_errors=True)


if __name__ == "__main__":
    main()
