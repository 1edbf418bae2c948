"""A Gradescope autograder for a release: ``roofkit assign ... --gradescope`` writes ``gradescope.zip``.

Gradescope builds an image from the zip (its ``setup.sh`` runs once, with the network), then for each hand-in
runs ``run_autograder`` with the student's files in ``/autograder/submission/`` and reads
``/autograder/results/results.json`` (Gradescope's "Autograder Specifications": a score, an output, one test
per question). The zip holds, besides those two scripts:

* ``roofkit-src/``: this roofkit, installed by ``setup.sh`` (with its pinned dependencies from PyPI);
* ``release/``: the release's manifest and template (never a student's notebook, never ``keys.csv``);
* ``course-secret.txt`` when students have their own numbers, and the private bank when the release has one.
  The zip is the instructor's: upload it to Gradescope only, and hand it to no one.

``run_autograder`` calls :func:`run`: it finds the notebook handed in, says who handed it in (the roster id that
is Gradescope's student id, ``sid``, or the email, or the email's part before the ``@``), grades it with
``roofkit grade`` (in bubblewrap where the image allows it, else in the container Gradescope gives each hand-in,
and says which), takes the hand-in time from Gradescope (``created_at``) for a release with a due date, and
writes results.json: the score after any late penalty, one test per question, the notes as the output.
"""

from __future__ import annotations

import argparse
import json
import shutil
import stat
import sys
import tempfile
import zipfile
from pathlib import Path

from ..errors import InvalidValue, RoofkitError
from . import deadline as deadlines
from . import grade, jail, report
from .assign import MANIFEST, TEMPLATE, read_release

__all__ = ["package", "run", "results_json", "ZIP", "main"]

ZIP = "gradescope.zip"
SECRET = "course-secret.txt"
SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image.
set -euo pipefail
apt-get update -qq && apt-get install -y -qq python3 python3-venv python3-pip bubblewrap > /dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install --quiet /autograder/source/roofkit-src
"""
RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each hand-in; AUTOGRADER moves it elsewhere (the tests run it in a folder).
set -uo pipefail
root="${AUTOGRADER:-/autograder}"
python="${ROOFKIT_PYTHON:-$root/venv/bin/python}"
cd "$root/source"
exec "$python" -m roofkit.grading.gradescope --release release --submission "$root/submission" \\
    --metadata "$root/submission_metadata.json" --results "$root/results/results.json" %(extra)s
"""
_SOURCE_FILES = ("pyproject.toml", "README.md", "LICENSE")


def _add_executable(archive: zipfile.ZipFile, name: str, text: str) -> None:
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
    info.external_attr = (stat.S_IFREG | 0o755) << 16
    archive.writestr(info, text)


def package(release: str | Path, secret_file: str | Path | None = None, bank: str | Path | None = None) -> Path:
    """Write ``release/gradescope.zip``; return its path."""
    release = Path(release)
    manifest = json.loads((release / MANIFEST).read_text(encoding="utf-8"))
    if manifest.get("secret_fingerprint") and not secret_file:
        raise InvalidValue("this release gives students their own numbers: the autograder needs its --secret-file.")
    source = Path(__file__).resolve().parents[2]  # the checkout roofkit runs from: pyproject.toml is there
    if not (source / "pyproject.toml").exists():
        raise InvalidValue(f"roofkit runs from {source}, which is not a checkout of the course (no pyproject.toml): "
                           "make the Gradescope zip from the clone.")
    extra = f"--secret-file {SECRET}" if manifest.get("secret_fingerprint") else ""
    bank_path = bank or (manifest.get("bank") or {}).get("path")
    if bank_path:
        extra += f" --bank {Path(bank_path).name}"
    out = release / ZIP
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        _add_executable(archive, "setup.sh", SETUP_SH)
        _add_executable(archive, "run_autograder", RUN_AUTOGRADER % {"extra": extra.strip()})
        for name in (MANIFEST, TEMPLATE):
            archive.write(release / name, f"release/{name}")
        if manifest.get("secret_fingerprint"):
            archive.write(secret_file, SECRET)
        if bank_path:
            archive.write(bank_path, Path(bank_path).name)
        for name in _SOURCE_FILES:
            if (source / name).exists():
                archive.write(source / name, f"roofkit-src/{name}")
        for path in sorted((source / "roofkit").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                archive.write(path, f"roofkit-src/{path.relative_to(source).as_posix()}")
    return out


# --- in the autograder, per hand-in -----------------------------------------------------------------------


def _student(metadata: dict, roster: list[str] | None) -> str:
    """The roster id of who handed in: Gradescope's sid, the email, or the email's part before the @."""
    users = metadata.get("users") if isinstance(metadata.get("users"), list) else []
    user = users[0] if users and isinstance(users[0], dict) else {}
    email = str(user.get("email") or "")
    candidates = [str(user.get("sid") or ""), email, email.split("@")[0], str(user.get("id") or "")]
    for candidate in candidates:
        if candidate and roster and candidate in roster:
            return candidate
    chosen = next((c for c in candidates[1:] if c), "student")
    return "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in chosen.split("@")[0])[:64] or "student"


def _notebook(folder: Path, name: str) -> Path:
    found = sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    if not found:
        raise InvalidValue("no notebook (.ipynb) was handed in: upload the assignment's notebook.")
    named = [p for p in found if p.name == f"{name}.ipynb"]
    return (named or found)[0]


def results_json(result: dict, sandbox: str) -> dict:
    """Gradescope's results.json for one graded result: the score, one test per question, notes as the output."""
    tests = []
    for number, q in enumerate(result.get("questions", []), start=1):
        said = report.advice_lines(q, q.get("feedback") or "ratio")
        answer = [] if q.get("answer") is None else [f"your answer: {q['answer']}"]
        tests.append({"name": q["id"], "number": str(number), "score": float(q["points"]),
                      "max_score": float(q["max_points"]), "status": "passed" if q["verdict"] == "correct" else "failed",
                      "output": "\n".join([*answer, q["verdict"], *said]), "visibility": "visible"})
    notes = list(result.get("notes", []))
    late, said = result.get("late"), deadlines.late_text(result.get("late"))
    if said:
        notes.insert(0, said)
    notes.append(f"graded by running your notebook afresh ({sandbox}); the verdicts it printed did not count")
    out = {"score": float(result.get("score", 0.0)), "output": "\n".join(str(n) for n in notes),
           "output_format": "text", "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}
    if late and late.get("days_late"):  # the per-question points are before the penalty: say the total after it
        out["output"] = f"score {out['score']:g} after the late penalty\n" + out["output"]
    return out


def run(*, release: str | Path, submission: str | Path, metadata: str | Path, results: str | Path,
        secret_file: str | Path | None = None, bank: str | Path | None = None) -> dict:
    """Grade the hand-in in ``submission`` and write Gradescope's ``results``; return what was written."""
    loaded = read_release(release)
    meta = json.loads(Path(metadata).read_text(encoding="utf-8")) if Path(metadata).exists() else {}
    student = _student(meta, loaded.students)
    notebook = _notebook(Path(submission), loaded.name)
    try:
        jail.choose("auto")
        sandbox = "auto"
    except RoofkitError:  # Gradescope's container has no user namespaces: it is the fence, one per hand-in
        sandbox = "none"
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        (work / "in").mkdir()
        shutil.copyfile(notebook, work / "in" / f"{student}.ipynb")
        times = None
        if loaded.manifest.get("deadline") and meta.get("created_at"):
            times = work / "times.csv"
            times.write_text(f"id,submitted\n{student},{meta['created_at']}\n", encoding="utf-8")
        limits = grade.Limits(sandbox=sandbox)
        grade.main([work / "in"], out=work / "out", release=release, secret_file=secret_file, limits=limits,
                   progress=False, bank=bank, times=times)
        graded = json.loads((work / "out" / "results.json").read_text(encoding="utf-8"))["students"]
        row = next(r for r in graded if r["student"] == student)
    where = "in bubblewrap" if sandbox == "auto" else "in the container Gradescope gives each hand-in"
    written = results_json(row, where)
    Path(results).parent.mkdir(parents=True, exist_ok=True)
    Path(results).write_text(json.dumps(written, indent=1) + "\n", encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m roofkit.grading.gradescope``: what ``run_autograder`` calls. Always writes results.json: a
    hand-in that cannot be graded gets a score of 0 and the reason, never a silent failure."""
    parser = argparse.ArgumentParser(prog="python -m roofkit.grading.gradescope")
    for name in ("--release", "--submission", "--metadata", "--results"):
        parser.add_argument(name, required=True)
    parser.add_argument("--secret-file")
    parser.add_argument("--bank")
    args = parser.parse_args(argv)
    try:
        run(release=args.release, submission=args.submission, metadata=args.metadata, results=args.results,
            secret_file=args.secret_file, bank=args.bank)
    except RoofkitError as error:
        Path(args.results).parent.mkdir(parents=True, exist_ok=True)
        Path(args.results).write_text(json.dumps({"score": 0.0, "output": f"not graded: {error}",
                                                  "output_format": "text", "tests": []}) + "\n", encoding="utf-8")
        print(f"not graded: {error}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
