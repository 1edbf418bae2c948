"""``roofkit grade``: many submissions, in parallel, resumable, one signed result file per student.

For each submission (a file, or every notebook in a folder; the student id is
the file's name, or its folder's, checked by :mod:`.ids`: a name that is not an
id is reported and skipped):

1. read it once (:func:`roofkit.grading.files.read_submission`): a regular
   file only, at most 64 MB; a link, a FIFO, a device, an empty, malformed,
   oversized or too deeply nested file gets a zero and the reason;
2. rebuild the notebook this student was given, from the release's template,
   the roster and the secret, and compare the locked cells (edited, deleted,
   duplicated, moved are reported; a notebook missing most of them is another
   assignment and gets a zero);
3. execute it in a fresh sandboxed kernel (:mod:`.execute`, :mod:`.jail`) and
   keep, for each question, the last answer record from a cell that is not an
   unchanged locked cell (the lesson's own demonstrations do not count); a
   kernel that does not start or is killed from outside its own code (the OOM
   killer) makes the result ``error``, graded again on the next run;
4. judge every answer against keys computed for this student's numbers
   (:mod:`.score`); run code answers on public and hidden cases in a clean
   sandboxed process (:mod:`.cases`);
5. write ``OUT/results/STUDENT.json`` atomically and signed with the course
   secret (:mod:`.results`).

A result whose submission, release and limits are unchanged (and whose
signature holds) is not graded again, so a run that was killed finishes where
it stopped; a new run first removes what a killed one left (:func:`.jail.reap`).
:mod:`.report` then rebuilds the gradebook and feedback pages from all result
files. Without a release (a learner grading their own notebook) the questions
are those of the notebook's lessons, with the lessons' own numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
import traceback
from datetime import datetime, timezone
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..course import build, quiz
from ..errors import InvalidValue
from . import cases as code_cases
from . import boxes, cells, execute, files, ids, jail, report, results, score, variants
from . import export as exports
from . import deadline as deadlines
from . import keys as answer_keys
from . import shard as shards
from . import release as _release  # noqa: F401 - loaded here, not half-way in a worker thread
from .assign import numbers, read_release, specs, student_notebook
from .execute import Limits, error_name
from .results import RESULTS
from .score import LEVELS, default_level

__all__ = ["main", "collect", "Context", "grade_one", "RESULTS", "load"]

# what a cell that looks for keys tends to say; a graded kernel has none to find (see .stripped, .release), and
# the watch (.probe) reports what actually reached for one, however it was spelled
_KEY_PEEK = re.compile(r"\banswer_key\b|\b_BANK\b|\.key\s*\(|\b_variant\b|\b_load_bank\b|\bcourse\.bank\b"
                       r"|\bcourse\.lesson_\d|\bsys\.modules\b|\bgc\.get_objects\b|\bhidden_cases\b")
GRADER_VERSION = 2
MAX_FILE_BYTES = 64 * 2**20
MAX_CELLS = 5_000


# --- what to grade -----------------------------------------------------------------------


def _lstat_kind(path: Path) -> str | None:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None

    return "file" if stat.S_ISREG(mode) else "dir" if stat.S_ISDIR(mode) else "other"


def _notebooks_in(folder: Path) -> list[Path]:
    """Files named *.ipynb under ``folder`` (regular or not: a link or a FIFO is refused later, with a note),
    without following links to other folders and without checkpoints."""
    found = []
    for path, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        found += [Path(path, n) for n in sorted(names) if n.endswith(".ipynb") and not n.startswith(".")]
    return found


def collect(paths: list[str | Path], roster: list[str] | None = None, notebook_name: str | None = None,
            skipped: list[str] | None = None, owners: dict | None = None) -> list[tuple[str, Path]]:
    """(student id, file) for every submission: named files, and the notebooks in named folders.

    A file or folder whose name is not a student id (:mod:`.ids`) is left out and described in ``skipped``, and
    so is a student with two notebooks (one student, never the class). In a folder per student, the folder's
    name says whose it is. ``owners``: filled with file -> the student's folder it was found in.
    """
    found: list[tuple[str, Path]] = []
    skipped = skipped if skipped is not None else []
    owners = owners if owners is not None else {}

    def add(student: str, path: Path, named: Path) -> None:
        bad = ids.problem(student)
        if bad:
            skipped.append(f"skipped {files.text(str(named))!r}: {bad}")
        else:
            found.append((student, path))

    def add_file(path: Path) -> None:
        stem, parent = path.stem, path.parent.name
        named_for_release = notebook_name and stem == notebook_name
        # `subs/*/*.ipynb` names each file with its folder: the folder (a roster id) says whose it is, whatever
        # the file is called (a file named after a classmate in one's own folder is still one's own)
        if roster and parent in roster or named_for_release and parent not in (".", ""):
            add(parent, path, path.parent)
        else:
            add(stem, path, path)

    for raw in paths:
        path = Path(raw)
        kind = _lstat_kind(path)
        if kind is None:
            raise InvalidValue(f"no such file or folder: {str(path)!r}.")
        if kind == "dir":
            for entry in sorted(p for p in path.iterdir() if not p.name.startswith(".")):
                entry_kind = _lstat_kind(entry)
                if entry.suffix == ".ipynb" and entry_kind != "dir":
                    add_file(entry)  # a link or a FIFO named like a notebook: refused with a note when read
                elif entry_kind == "dir" and entry.name != "__pycache__":
                    inside = _notebooks_in(entry)
                    if notebook_name and len(inside) > 1:
                        inside = [p for p in inside if p.stem == notebook_name] or inside
                    if len(inside) > 1:
                        skipped.append(f"skipped {files.text(str(entry))!r}: it holds {len(inside)} notebooks "
                                       f"({', '.join(files.text(p.name) for p in inside[:3])}); keep one per student")
                        continue
                    if inside:
                        owners[inside[0]] = entry
                        add(entry.name, inside[0], entry)
                elif entry_kind == "other" and entry.is_symlink() and entry.is_dir():
                    add(entry.name, entry, entry)  # a per-student folder that is a link: refused, with a note
        else:
            add_file(path)
    if not found and not skipped:
        raise InvalidValue(f"no notebooks found in {', '.join(map(str, paths))} (expected .ipynb files).")
    by_student: dict[str, list[Path]] = {}
    for student, path in found:
        by_student.setdefault(student, []).append(path)
    twice = {s: p for s, p in by_student.items() if len(p) > 1}
    for student, paths_ in sorted(twice.items()):
        skipped.append(f"skipped student {student!r}: {len(paths_)} submissions "
                       f"({', '.join(files.text(str(p)) for p in paths_[:3])}); keep one per student")
    return sorted((s, p) for s, p in found if s not in twice)


def load(data: bytes | Path):
    """The notebook in ``data`` (bytes read once, or a path), or the reason it cannot be graded."""
    parsed, why = _parse(data)
    return _notebook(parsed) if parsed is not None else (None, why)


def _parse(data: bytes | Path) -> tuple[dict | None, str | None]:
    """The JSON of a notebook (a dict with a list of at most MAX_CELLS cells), or why it is not one."""
    if isinstance(data, (str, Path)):
        read = files.read_submission(data, MAX_FILE_BYTES)
        if read.refused:
            return None, read.refused
        data = read.data
    if not data:
        return None, "the file is empty"
    try:
        parsed = json.loads(data.decode("utf-8", errors="replace"))
    except RecursionError:
        return None, "not a notebook: its JSON is nested too deeply"
    except ValueError as error:
        return None, f"not a notebook: the file is not valid JSON ({files.text(str(error), 120)})"
    if not isinstance(parsed, dict) or not isinstance(parsed.get("cells"), list):
        return None, "not a Jupyter notebook: it has no list of cells"
    if len(parsed["cells"]) > MAX_CELLS:  # every later phase (checks, the kernel's copy, judging) stays bounded
        return None, (f"the notebook has {len(parsed['cells']):,} cells; a notebook may have at most {MAX_CELLS:,} "
                      "(the lessons have a few hundred)")
    return parsed, None


def _notebook(parsed: dict):
    """The notebook the grader runs, made from its parsed JSON: each cell's source and metadata, no outputs."""
    import nbformat  # deferred: nbformat costs ~1.4 s at import

    kept = []
    for index, cell in enumerate(parsed["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            continue
        text = cell.get("source", "")
        if isinstance(text, list):
            text = "".join(t for t in text if isinstance(t, str))
        if not isinstance(text, str):
            continue
        metadata = files.clean(cell.get("metadata")) if isinstance(cell.get("metadata"), dict) else {}
        new = {"cell_type": cell["cell_type"], "source": files.text(text), "metadata": metadata,
               "id": files.text(str(cell.get("id") or f"cell-{index}"), 64)}
        if cell["cell_type"] == "code":
            new.update(outputs=[], execution_count=None)
        kept.append(new)
    metadata = files.clean(parsed.get("metadata")) if isinstance(parsed.get("metadata"), dict) else {}
    try:
        nb = nbformat.from_dict({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": kept})
    except RecursionError:
        return None, "not a notebook: it is nested too deeply"
    return nb, None


# --- the grading context -----------------------------------------------------------------


class Context:
    """Everything that is the same for every student of one grading run."""

    def __init__(self, release=None, secret: bytes | None = None, limits: Limits = Limits(),
                 bank: str | Path | None = None, feedback: str | None = None, plan=None,
                 times: dict | None = None):
        self.release, self.secret, self.limits = release, secret, limits
        self.deadline = deadlines.Policy.from_manifest(release.manifest) if release else None
        self.times = dict(times or {})  # student -> hand-in time (roofkit grade --times), else the file's time
        self.snapshots: dict[str, files.Submission] = {}  # student -> the submission as read (its digest, or why not)
        self.snapshot_paths: dict[str, Path] = {}  # student -> the private copy grading reads
        self.file_times: dict[str, float] = {}  # student -> the file's modification time when it was read
        if feedback is not None and feedback not in LEVELS:
            raise InvalidValue(f"unknown --feedback {feedback!r}; expected one of: {', '.join(LEVELS)}.")
        # how kernels are fenced: grade.main chooses (and refuses where there is no sandbox); anyone else building
        # a context (a script reading a release) gets the best this machine offers, without a refusal
        self.plan = plan if plan is not None else _own_plan(limits.sandbox)
        self.signing_key = results.key(secret)
        self.roster = release.students if release else None
        private = None
        if release:
            release.check_secret(secret)
            private = release.load_bank(bank)  # the instructor's own questions: read here, never in a kernel
            self.questions = [dict(q) for q in release.manifest["questions"]]
            self.name = release.name
        elif bank:
            raise InvalidValue("--bank goes with --assignment: a release made with that bank.")
        else:
            self.questions, self.name = [], None
        self.bank = quiz.by_id()  # a past release's renamed ids too
        self._others: dict[str, dict] = {}
        self._lock = threading.Lock()
        recorded = release.manifest.get("feedback") if release else None
        self.levels = {q["id"]: feedback or recorded or default_level(bool(q.get("private"))) for q in self.questions}
        setup = {"release": release.manifest if release else None, "limits": asdict(limits),
                 "secret": variants.fingerprint(secret) if secret else None, "grader": GRADER_VERSION,
                 "bank": private.manifest()["source_sha256"] if private else None, "sandbox": self.plan.kind,
                 "feedback": self.levels, "times": sorted((k, v.isoformat()) for k, v in self.times.items())}
        self.fingerprint = hashlib.sha256(json.dumps(setup, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def level(self, question_id: str) -> str:
        """The feedback level of one question (a learner's own notebook: everything)."""
        return self.levels.get(question_id, "ratio")

    def preamble(self, student: str, questions: list[dict]) -> str:
        """What the grader runs in the kernel before the notebook: the questions as this student was given them.

        The same as the release's setup cell, but from the grader's own copy: deleting or editing that cell
        changes nothing, and ``ask`` and ``check`` work in a kernel whose roofkit holds no key.
        """
        recorded = self.release.manifest if self.release else {}
        given = specs({**recorded, "questions": questions}, self.numbers(student))
        return ("from roofkit.grading.release import use_release as _roofkit_use_release\n"
                f"_roofkit_use_release({given!r})\ndel _roofkit_use_release")

    def expected(self, student: str):
        """The notebook ``student`` was given, rebuilt (never read from the submission)."""
        known = bool(self.roster) and student in self.roster  # without a roster everyone got the same notebook
        return student_notebook(self.release.template, self.release.manifest, student if known else None,
                                self.secret if known else None)

    def numbers(self, student: str) -> dict[str, dict]:
        if not self.release or not self.roster or student not in self.roster:
            return {}
        return numbers(self.release.manifest, self.secret, student)

    def others(self, question_id: str) -> dict[str, dict]:
        """Every roster student's parameters for one question (copy detection)."""
        with self._lock:
            if question_id not in self._others:
                one = {**self.release.manifest, "questions": [{"id": question_id}]} if self.release else {}
                self._others[question_id] = {s: numbers(one, self.secret, s).get(question_id, {})
                                             for s in self.roster or []} \
                    if self.secret and self.bank[question_id].variants else {}
            return self._others[question_id]


def _own_plan(mode: str = "auto"):
    """Bubblewrap where it works, else no sandbox (said in every report): for a learner's own notebook, whose code
    is their own, and for contexts built outside a grading run."""
    try:
        return jail.choose(mode)
    except jail.SandboxUnavailable:
        return jail.choose("none")


def _self_questions(nb) -> list[dict]:
    """A learner's own notebook: the questions of its lessons (from its metadata, else from its check calls)."""
    meta = nb.metadata.get("roofkit") if isinstance(nb.metadata.get("roofkit"), dict) else {}
    lessons = set()
    origin = str(meta.get("generated_from", ""))
    match = re.search(r"(\d\d)-[^/]*\.md$", origin)
    if match:
        lessons.add(match.group(1))
    ids = [i for c in nb.cells if c.cell_type == "code" for i in cells.checked_ids(c.source)]
    bank = quiz.by_id()
    lessons |= {bank[i].lesson for i in ids if i in bank}
    chosen = [q for q in quiz.questions() if q.lesson in lessons]
    return [{"id": q.id, "lesson": q.lesson, "kind": q.kind, "points": float(q.points)} for q in chosen]


def _reference(nb):
    """A learner's notebook: the course's own student notebook of the same lesson, if roofkit can build it."""
    meta = nb.metadata.get("roofkit") if isinstance(nb.metadata.get("roofkit"), dict) else {}
    origin = str(meta.get("generated_from", ""))
    lesson = Path(build.__file__).resolve().parents[2] / origin  # the checkout: roofkit/course/build.py is two below it
    if not re.fullmatch(r"lessons/\d\d-[\w.-]+\.md", origin) or not lesson.is_file():
        return None
    return build.make_notebook(lesson, "student")


# --- one student -------------------------------------------------------------------------


def _empty(record: dict) -> bool:
    """An answer record with no answer in it (``check(id)`` alone, or ``check(id, ...)``)."""
    return record.get("answer") in (None, "Ellipsis") and not record.get("source")


def _pick(records: list[tuple[int, dict]], locked: set[int], wanted: set[str]):
    """question id -> (cell index, record), answers per question, notes: the last real answer from a student's cell.

    ``locked``: cells whose records do not count (unchanged locked cells: the lesson's own demonstrations;
    in a release also edited locked cells).
    """
    chosen, counts, ignored = {}, {}, []
    for index, record in records:
        if not isinstance(record, dict) or record.get("roofkit_answer") != 1 or not isinstance(record.get("id"), str):
            ignored.append("an output that looks like an answer record but is malformed was ignored")
            continue
        if index in locked:
            continue
        qid = record["id"]
        if qid not in wanted:
            ignored.append(f"an answer to {qid[:40]!r}, which is not in this assignment, was ignored")
            continue
        empty = _empty(record)
        counts[qid] = counts.get(qid, 0) + (not empty)
        if not empty or qid not in chosen:
            chosen[qid] = (index, record)
    return chosen, counts, sorted(set(ignored))


def _why_unanswered(qid: str, nb, run, locked: set[int]) -> str:
    where = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and i not in locked and qid in cells.checked_ids(c.source)]
    if not where:
        return "not answered: no cell checks this question (was its answer cell deleted?)"
    if run and run.stopped_at is not None and all(i >= run.stopped_at for i in where):
        return f"not answered: {run.stopped}"
    errors = [text for i, text in (run.errors if run else []) if i in where]
    if errors:
        return f"not answered: the cell checking it raised {error_name(errors[-1])}"
    return "not answered"


def grade_one(context: Context, student: str, path: Path | files.Submission, cancel: threading.Event | None = None,
              submission: files.Submission | None = None) -> dict | None:
    """The result of one submission (None if cancelled before the end).

    ``submission``: the file as already read (:func:`files.read_submission`); else it is read here, once.
    """
    started = time.monotonic()
    if submission is None:
        submission = files.read_submission(path, MAX_FILE_BYTES)
    result = _new_result(context, student, path, submission)
    parsed, unreadable = _parse(submission.data) if not submission.refused else (None, submission.refused)
    nb, unreadable = _notebook(parsed) if parsed is not None else (None, unreadable)
    questions = context.questions or (_self_questions(nb) if nb is not None else [])
    result["questions"] = _question_rows(context, questions)
    if nb is not None and not questions:
        result["notes"].append("no question of the course was found in this notebook")
    if unreadable:
        return _not_graded(result, started, "unreadable", unreadable, f"not graded: {unreadable}")
    locked, wrong_assignment = _locked_cells(context, student, nb, result)
    if wrong_assignment:
        return _not_graded(result, started, "wrong-assignment", wrong_assignment, f"not graded: {wrong_assignment}")
    _flag_key_peeks(nb, locked, result)
    run = execute.main(nb, limits=context.limits, cancel=cancel, preamble=context.preamble(student, questions),
                       plan=context.plan)
    if cancel is not None and cancel.is_set():
        return None
    result["execution"] = run.to_dict()
    result["notes"] += run.notes()
    result["flags"] += _probe_flags(run.probes)
    if run.killed:  # graded as it stands; the instructor is told, in case the machine itself ran out of memory
        result["flags"].append(f"killed at cell {(run.stopped_at or 0) + 1} (SIGKILL or its memory cap), by its own "
                               "code or, rarely, by the machine running short of memory: the answers before count, "
                               "the rest score 0; regrade if the machine was short of memory")
    if run.failed:  # not the notebook's doing: no grade now, and the next run grades it again
        return _not_graded(result, started, "error", f"not graded: {run.failed}; it is graded again on the next run",
                           "not graded: the grader could not run your notebook fairly; it will be graded again")
    saved = boxes.read(parsed)  # the JSON parsed once, above
    if saved.unsaved:
        result["notes"].append("answers typed in answer boxes were not saved with this notebook (JupyterLab saves "
                               "them; the editor that saved it did not): write each answer in its answer cell")
    code_items, code_rows = _judge_answers(context, student, nb, run, locked, result, saved)
    if code_items:
        _judge_code_answers(context, code_items, code_rows, result)
    if result["questions"] and all(q["verdict"] == "not answered" for q in result["questions"]):
        result["notes"].append(_nothing_answered(context, student, nb, saved))
    return _finish(result, started)


def _nothing_answered(context: Context, student: str, nb, saved: boxes.Boxes) -> str:
    """Why a hand-in scored nothing at all, in one line: untouched as handed out, or answered nowhere."""
    if context.release:
        given = [cells.source(c) for c in context.expected(student).cells if cells.is_answer_cell(c)]
        mine = [cells.source(c) for c in nb.cells if cells.is_answer_cell(c)]
        if mine == given and not saved.answers:
            return ("nothing was answered: this is the notebook as it was handed out, with every answer cell "
                    "untouched and no answer box saved (was the right file handed in, and saved first?)")
    return "no question was answered: write each answer in its answer cell, or in its answer box, and save"


def _new_result(context: Context, student: str, path, submission: files.Submission) -> dict:
    """A result before grading: who, which file, which setup, and this student's numbers."""
    result = {"roofkit_result": 1, "student": student, "assignment": context.name, "fingerprint": context.fingerprint,
              "submission": files.text(str(path)), "submission_sha256": submission.sha256, "status": "graded",
              "notes": [], "flags": [], "integrity": None, "execution": {"sandbox": {**context.plan.to_dict()}},
              "variant": context.numbers(student)}
    if context.roster is not None and student not in context.roster:
        result["flags"].append("not on the roster: graded with the lessons' own numbers")
    if context.deadline is not None:
        result["deadline"] = context.deadline.to_dict()
        result["submitted_at"], result["time_source"] = _handed_in_at(context, student, path)
    return result


def _handed_in_at(context: Context, student: str, path) -> tuple[str | None, str]:
    """When ``student`` handed in (ISO 8601, UTC) and where that time comes from, in words."""
    if student in context.times:
        return context.times[student].astimezone(timezone.utc).isoformat(), "the --times file"
    stamp = context.file_times.get(student)
    try:
        stamp = stamp if stamp is not None else os.stat(path).st_mtime
    except (OSError, TypeError, ValueError):
        return None, "no time found"
    return datetime.fromtimestamp(stamp, timezone.utc).isoformat(), "the file's modification time"


def _question_rows(context: Context, questions: list[dict]) -> list[dict]:
    """One row per question, not answered until judged."""
    return [{"id": q["id"], "lesson": q["lesson"], "kind": q["kind"], "max_points": q["points"],
             "points": 0.0, "verdict": "not answered", "reason": "", "answer": None,
             "feedback": context.level(q["id"])} for q in questions]


def _not_graded(result: dict, started: float, status: str, note: str, reason: str) -> dict:
    """The finished result of a submission that is not graded: its status, the one note why, each question's reason."""
    result["status"], result["notes"] = status, [note]
    for q in result["questions"]:
        q["reason"] = reason
    return _finish(result, started)


def _locked_cells(context: Context, student: str, nb, result: dict) -> tuple[set[int], str | None]:
    """The locked cells whose answers do not count, checked against the notebook this student was given.

    Returns them and, when the notebook is another assignment, why (else None).
    """
    reference = context.expected(student) if context.release else _reference(nb)
    locked: set[int] = set()
    if reference is not None:
        integrity = cells.compare(cells.locked_cells(reference), nb.cells)
        result["integrity"], locked = integrity.to_dict(), set(integrity.verbatim)
        result["notes"] += integrity.problems()
        if context.release and integrity.changed:
            locked |= integrity.changed
            result["notes"].append("answers checked in an edited locked cell do not count: "
                                   "write them in the answer cells, or in new cells")
        if context.release and integrity.share_found < 0.5:
            claims = nb.metadata.get("roofkit", {}) if isinstance(nb.metadata.get("roofkit"), dict) else {}
            said = claims.get("assignment") or claims.get("generated_from")
            why = (f"this notebook is not assignment {context.name}: only {integrity.found} of its "
                   f"{integrity.total} locked cells are in it" + (f" (it says it is {str(said)[:60]!r})" if said else ""))
            return locked, why
    elif not context.release:
        result["notes"].append("no reference notebook found: locked cells were not checked")
    return locked, None


def _flag_key_peeks(nb, locked: set[int], result: dict) -> None:
    """A flag for each student's cell that looks for keys (it finds none)."""
    for index, cell in enumerate(nb.cells):  # a cell that looks for keys: it finds none, and is flagged
        if cell.cell_type == "code" and index not in locked and _KEY_PEEK.search(cell.source):
            result["flags"].append(f"cell {index + 1} looks for roofkit's answer keys "
                                   f"({_KEY_PEEK.search(cell.source)[0]})")


def _judge_answers(context: Context, student: str, nb, run, locked: set[int], result: dict,
                   saved: boxes.Boxes | None = None) -> tuple[list, dict]:
    """Each question's last answer judged into its row; code answers are returned, to run their cases together.

    ``saved``: what the notebook's answer boxes held when it was saved (:mod:`roofkit.grading.boxes`). An answer
    cell's answer counts first; a question answered only in its box is judged from the box's text.
    """
    saved = saved or boxes.Boxes()
    wanted = {q["id"] for q in result["questions"]}
    chosen, counts, ignored = _pick(run.records, locked, wanted)
    result["notes"] += ignored + saved.notes
    numbers = result["variant"]
    code_items, code_rows = [], {}
    for row in result["questions"]:
        qid = row["id"]
        question = context.bank[qid].with_params(**numbers.get(qid, {}))
        question = _with_points(question, row["max_points"])
        row["prompt"] = question.text()
        row["hint"] = question.hints[0] if question.hints else ""
        row["expected"] = answer_keys.expected(question)  # for the instructor: results.json, never a feedback page
        in_cell = qid in chosen and not _empty(chosen[qid][1])
        if not in_cell and qid in saved.answers and question.kind != "code":
            row["note"] = "answered in the answer box (saved with the notebook)"
            _check_numbers(context, student, qid, question, {"params": saved.params.get(qid)}, row, result)
            _judge_answer(context, student, qid, question, saved.answers[qid], row, result)
            continue
        if not in_cell and qid in saved.unsaved:
            row["reason"] = (f"not answered: your notebook shows an answer box for this question, but the editor that "
                             f"saved it kept no answer in it. Write the answer in the answer cell: check({qid!r}, ...)")
            continue
        if qid not in chosen:
            row["reason"] = _why_unanswered(qid, nb, run, locked)
            continue
        index, record = chosen[qid]
        box = saved.answers.get(qid)
        if box is not None and box != score.answer_text(record.get("answer")):
            row["note"] = f"the answer cell's answer counts; the answer box held {score.answer_text(box)!r}"
        row["cell"] = index + 1
        if counts.get(qid, 0) > 1:
            row["note"] = (row["note"] + "; " if row.get("note") else "") + f"answered {counts[qid]} times; the last answer (cell {index + 1}) counts"
        _check_numbers(context, student, qid, question, record, row, result)
        if question.kind == "code":
            source = record.get("source")
            if not isinstance(source, str) or not source.strip() or len(source) > code_cases.MAX_SOURCE:
                row.update(verdict="not answered", reason="not answered: no function source was recorded")
                continue
            row["answer"] = score.answer_text(record.get("answer") or "function")
            code_items.append({"q": qid, "source": source, "public": len(question.cases),
                               "cases": [list(c) for c in (*question.cases, *question.hidden_cases)]})
            code_rows[qid] = (row, question)
            continue
        _judge_answer(context, student, qid, question, record.get("answer"), row, result)
    return code_items, code_rows


def _check_numbers(context: Context, student: str, qid: str, question, record: dict, row: dict, result: dict) -> None:
    """A note when the notebook asked with other numbers than this student's, and a flag naming whose they were."""
    digest_here = record.get("params")
    if digest_here != quiz.params_digest(question.params) and question.params:
        row["note"] = (row.get("note", "") + "; " if row.get("note") else "") + \
            "your notebook asked this question with other numbers than yours"
        other = [s for s, p in context.others(qid).items() if s != student
                 and quiz.params_digest(context.bank[qid].with_params(**p).params) == digest_here]
        if other:
            result["flags"].append(f"{qid}: the notebook ran with the numbers of {', '.join(sorted(other)[:3])}")


def _judge_answer(context: Context, student: str, qid: str, question, answer, row: dict, result: dict) -> None:
    """One answer that is not code judged into its row, and flagged when it is the key of another's numbers."""
    row["answer"] = None if answer is None else score.answer_text(answer)
    judged = score.judge_answer(question, answer)
    row.update(points=judged.points, verdict=judged.verdict, reason=judged.reason,
               misconception=judged.misconception, reason_level=judged.reason_level)
    if judged.verdict == "wrong" and question.kind == "numeric" and not judged.misconception:
        copied = _copied_from(context, student, qid, answer)
        published = context.bank[qid]  # the lesson's own numbers: the published solution's key
        if not copied and question.params != published.params and \
                score.judge_answer(published, answer).verdict == "correct":
            copied = ["the published solution (the lesson's own numbers)"]
        if copied:
            row["reason"] = (row["reason"] + " " if row["reason"] else "") + \
                "This is the answer to this question with other numbers than yours: use the numbers in your prompt."
            whose = copied[0] if copied[0].startswith("the published") else f"{', '.join(copied[:3])}'s numbers"
            result["flags"].append(f"{qid}: the answer is the key of {whose}")


def _judge_code_answers(context: Context, code_items: list, code_rows: dict, result: dict) -> None:
    """The code answers run on their public and hidden cases in one sandboxed process, and judged into their rows."""
    box = execute.Box(context.limits, context.plan)
    reached: list[str] = []
    lines = {}
    try:
        lines = code_cases.run(code_items, box=box, case_s=context.limits.case_s, probes=reached)
        reached += [w for w in box.reports() if w not in reached]
        if reached:
            result["flags"].append(f"a code answer ({', '.join(i['q'] for i in code_items)}) reached for "
                                   f"roofkit's answer keys while its cases ran: {'; '.join(reached[:3])}")
    finally:
        box.close()
    for qid, (row, question) in code_rows.items():
        judged = score.score_code(question, {i: v for (q, i), v in lines.items() if q == qid}, len(question.cases))
        row.update(points=judged.points, verdict=judged.verdict, reason=judged.reason, cases=judged.cases,
                   reason_level=judged.reason_level)


def _probe_flags(probes: list[tuple[int, str]]) -> list[str]:
    """One flag per cell the watch saw reaching for a key (see :mod:`roofkit.grading.probe`)."""
    by_cell: dict[int, list[str]] = {}
    for index, what in probes:
        by_cell.setdefault(index, [])
        if what not in by_cell[index]:
            by_cell[index].append(what)
    flags = []
    for index, whats in sorted(by_cell.items()):
        where = {-1: "before the notebook's cells", -2: "a process the notebook started"}.get(index,
                                                                                              f"cell {index + 1}")
        more = f" and {len(whats) - 3} more" if len(whats) > 3 else ""
        flags.append(f"{where} reached for roofkit's answer keys and got nothing: {'; '.join(whats[:3])}{more}")
    return flags


def _with_points(question, points: float):
    return replace(question, points=points)


def _copied_from(context: Context, student: str, qid: str, answer) -> list[str]:
    """Roster students whose numbers make ``answer`` right (a copied answer), other than ``student``."""
    question = context.bank[qid]
    verdicts: dict[str, bool] = {}  # the same numbers are judged once
    hits = []
    for other, params in sorted(context.others(qid).items()):
        token = json.dumps(params, sort_keys=True)
        if token not in verdicts:
            verdicts[token] = score.judge_answer(question.with_params(**params), answer).verdict == "correct"
        if other != student and verdicts[token]:
            hits.append(other)
    return hits


def _finish(result: dict, started: float) -> dict:
    result["score"] = round(sum(q["points"] for q in result["questions"]), 6)
    result["max_score"] = sum(q["max_points"] for q in result["questions"])
    lessons: dict[str, dict] = {}
    for q in result["questions"]:
        entry = lessons.setdefault(q["lesson"], {"score": 0.0, "max_score": 0.0})
        entry["score"] += q["points"]
        entry["max_score"] += q["max_points"]
    result["lessons"] = lessons
    result["seconds"] = round(time.monotonic() - started, 3)
    result["graded_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    return result


# --- many students -----------------------------------------------------------------------


def _done(out: Path, student: str, digest: str, fingerprint: str, signing_key: bytes | None) -> bool:
    """Already graded: a result for this submission and this setup, whose signature holds and that is no error."""
    stored = results.read(out / RESULTS / f"{student}.json", signing_key)
    old = stored.data
    return (old is not None and old.get("submission_sha256") == digest and old.get("fingerprint") == fingerprint
            and old.get("status") != "error")


def main(submissions: list[str | Path], *, out: str | Path, release: str | Path | None = None,
         secret_file: str | Path | None = None, workers: int | None = None, limits: Limits = Limits(),
         regrade: bool = False, progress: bool = True, on_result=None, bank: str | Path | None = None,
         shard: tuple[int, int] | None = None, export: list[str] = (), column: str | None = None,
         feedback: str | None = None, times: str | Path | None = None) -> dict:
    """Grade ``submissions`` into ``out``; return the summary :func:`roofkit.grading.report.main` builds.

    ``bank``: the private questions of the release (default: where the release says they were).
    ``shard=(k, n)``: grade only the students of shard k of n (:mod:`roofkit.grading.shard`).
    ``export``: also write the gradebook for an LMS ("canvas", "moodle"; :mod:`roofkit.grading.export`),
    with ``column`` as the grade column's title (default: the assignment's name).
    ``feedback``: how much the feedback pages say (:data:`roofkit.grading.score.LEVELS`; default: what the
    release chose, else ``ratio`` for the course's questions and ``misconception`` for private ones).
    ``limits.sandbox``: "auto" (bubblewrap, refused where it is missing) or "none" (the instructor's choice).
    ``times``: a CSV of hand-in times (:func:`roofkit.grading.deadline.read_times`) for a release with a due date;
    without it, each file's modification time is used.
    ``on_result(result)`` is called after each result file is written (the tests use it to stop a run).
    """
    out = Path(out)
    _check_options(workers, export)
    loaded = read_release(release) if release else None
    secret = variants.read_secret(secret_file) if loaded and loaded.manifest.get("secret_fingerprint") else None
    # a class's notebooks run in a sandbox, or with the instructor's explicit --sandbox none; a learner's own
    # notebook (no release) runs only their own code, so it is never refused
    plan = jail.choose(limits.sandbox) if loaded or limits.sandbox != "auto" else _own_plan()
    if times and not (loaded and loaded.manifest.get("deadline")):
        raise InvalidValue("--times goes with a release that has a due date (roofkit assign --due).")
    context = Context(loaded, secret, limits, bank, feedback, plan, deadlines.read_times(times) if times else None)
    skipped_files: list[str] = []
    owners: dict = {}
    found = collect(submissions, context.roster, loaded.name if loaded else None, skipped_files, owners)
    roster = context.roster
    if shard:
        k, n = shard
        found = [(s, p) for s, p in found if shards.owner(s, n) == k]
        roster = [s for s in roster if shards.owner(s, n) == k] if roster is not None else None
    cleaned = jail.reap()  # what a grader that was killed left: temporary folders, processes, cgroups
    _prepare_out(out, context, shard, found, roster)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = max(1, workers or cores)
    counts = {"graded": 0, "skipped": 0}
    job = _Job(context, out, regrade, threading.Event(), counts, threading.Lock())
    snapshot = _snapshot(found, owners, context)  # every submission read now, once, before any kernel runs
    try:
        _run_jobs(job, found, workers, progress, on_result)
    finally:
        shutil.rmtree(snapshot, ignore_errors=True)
    summary = report.main(out, assignment=context.name, roster=roster, questions=context.questions or None,
                          signing_key=context.signing_key, sandbox=context.plan.describe(),
                          people=loaded.manifest.get("people") if loaded else None,
                          fingerprint=context.fingerprint,
                          digests={s: snap.sha256 for s, snap in context.snapshots.items()})
    summary.update(graded=counts["graded"], skipped=counts["skipped"], workers=workers,
                   skipped_files=skipped_files, cleaned=cleaned, sandbox_plan=context.plan.describe())
    if shard:
        summary["shard"] = list(shard)
    if export:
        people = loaded.manifest.get("people") if loaded else None
        summary["exports"] = exports.main(out, list(export), assignment=context.name, people=people, column=column,
                                          rows=summary["students"])
    return summary


def _snapshot(found: list[tuple[str, Path]], owners: dict, context: Context) -> str:
    """Read every submission into a private folder before any kernel runs; return the folder.

    A file is read once, refused if it is not a regular file or, in a folder per student, if a link on its path
    leads out of that student's folder (a classmate's notebook swapped in: the red team's attack 13). Grading
    reads the private copy, so what changes in the submissions' folders afterwards changes nothing. Each file's
    modification time is kept as it was then (the hand-in time, when no --times file says otherwise).
    """
    folder = tempfile.mkdtemp(prefix=f"{jail.PREFIX}-{os.getpid()}-snapshot-")  # 0700; a killed run's is reaped
    for student, path in found:
        owner = owners.get(path)
        if owner is not None and not os.path.islink(path) \
                and not os.path.realpath(path).startswith(os.path.realpath(owner) + os.sep):  # (a link itself: below)
            context.snapshots[student] = files.Submission(
                None, "refused:link-out", f"refused: a link in {files.text(owner.name)!r} leads out of the "
                "student's folder; hand in the notebook itself")
            continue
        try:
            context.file_times[student] = os.lstat(path).st_mtime
        except OSError:
            pass
        submission = files.read_submission(path, MAX_FILE_BYTES)
        if submission.refused:
            context.snapshots[student] = submission
            continue
        copy = Path(folder, f"{len(context.snapshots)}.ipynb")
        copy.write_bytes(submission.data)
        context.snapshots[student] = files.Submission(None, submission.sha256, None)
        context.snapshot_paths[student] = copy
    return folder


def _check_options(workers: int | None, export) -> None:
    """The options that can fail before anything is graded: the workers, the export formats."""
    if workers is not None and workers < 1:
        raise InvalidValue(f"--workers must be at least 1; got {workers}.")
    if export:  # an unknown format fails before grading, not after
        unknown = sorted(set(export) - set(exports.FORMATS))
        if unknown:
            raise InvalidValue(f"unknown --export {unknown[0]!r}; expected one of: {', '.join(exports.FORMATS)}.")


def _prepare_out(out: Path, context: Context, shard, found, roster) -> None:
    """The results folder made, the shard's manifest written, what a killed run half-wrote removed."""
    (out / RESULTS).mkdir(parents=True, exist_ok=True)
    if shard:
        k, n = shard
        students = sorted({s for s, _ in found} | set(roster or []))
        shards.write_manifest(out, shards.manifest(context, k, n, students), context.signing_key)
    for stale in (out / RESULTS).glob(".*.tmp"):  # left by a run that was killed mid-write
        stale.unlink(missing_ok=True)


@dataclass
class _Job:
    """Grading one student in a worker thread, for a run: what every job shares, and the counts they keep."""

    context: Context
    out: Path
    regrade: bool
    cancel: threading.Event
    counts: dict
    counts_lock: threading.Lock

    def __call__(self, student: str, path: Path):
        """The result file written for one submission (None: already graded, cancelled, or not writable)."""
        context, out = self.context, self.out
        snap = context.snapshots.get(student)  # the private copy made before any kernel ran (grade.main)
        if snap is not None and snap.refused:
            submission = snap
        else:
            submission = files.read_submission(context.snapshot_paths.get(student, path), MAX_FILE_BYTES)
        if not self.regrade and _done(out, student, submission.sha256, context.fingerprint, context.signing_key):
            with self.counts_lock:
                self.counts["skipped"] += 1
            return None
        try:
            result = grade_one(context, student, path, self.cancel, submission)
        except Exception as error:  # noqa: BLE001 - one student's problem never stops the class
            result = _finish({"roofkit_result": 1, "student": student, "assignment": context.name,
                              "fingerprint": context.fingerprint, "submission": files.text(str(path)),
                              "submission_sha256": submission.sha256, "status": "error",
                              "notes": ["not graded: the grader failed on this notebook; it is graded again on the "
                                        "next run"],
                              "flags": [f"grader error: {type(error).__name__}: {files.text(str(error), 300)}"],
                              "questions": [], "traceback": traceback.format_exc()[-4000:]}, time.monotonic())
        if result is None:
            return None
        with self.counts_lock:
            self.counts["graded"] += 1
        try:
            return results.write(out, result, context.signing_key)
        except (OSError, ValueError, TypeError, RecursionError) as error:  # a full disk: a rerun retries
            print(f"roofkit: could not write the result of {student}: {error}", file=sys.stderr)
            return None


def _run_jobs(job: _Job, found: list, workers: int, progress: bool, on_result) -> None:
    """Every submission graded in a pool of worker threads, with a progress bar; an interruption cancels the rest."""
    bar = None
    if progress and found:
        from tqdm import tqdm  # deferred: tqdm costs ~50 ms at import

        bar = tqdm(total=len(found), desc="grading", unit="notebook")
    pool = ThreadPoolExecutor(max_workers=min(workers, max(1, len(found))))
    try:
        futures = [pool.submit(job, s, p) for s, p in found]
        for future in as_completed(futures):
            result = future.result()
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(result["student"] if result else "")
            if on_result is not None and result is not None:
                on_result(result)
    except BaseException:
        job.cancel.set()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        if bar is not None:
            bar.close()
