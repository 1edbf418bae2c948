"""``roofkit assign``: lessons (or chosen questions) -> a release with one notebook per student.

    OUT/assignment.json                 what the grader needs besides the secret: questions, points, roster
    OUT/template.ipynb                  the release with the lessons' own numbers (the grader's copy)
    OUT/students/ID/NAME.ipynb          with a roster: each student's notebook, with their numbers
    OUT/NAME.ipynb                      without a roster: the one notebook to hand out

A release notebook starts with a header (questions and points) and a setup
cell that calls :func:`roofkit.grading.release.use_release` with each
question as the student may see it: the prompt as text with their numbers,
never a key. Answer cells are left open; every other cell is locked: marked
read-only for JupyterLab and checksummed (see :mod:`roofkit.grading.cells`).
The same inputs always give the same files, so the grader rebuilds any
student's notebook from the template, the roster and the secret
(:func:`student_notebook`) instead of trusting what comes back.

An instructor's private questions (``bank=``, see :mod:`roofkit.grading.bank`)
get cells of their own: a heading, an ``ask`` cell and an answer cell. Their
keys stay in the bank, which only ``assign`` and ``grade`` read.
"""

from __future__ import annotations

import copy
import fnmatch
import hashlib
import inspect
import json
import os
import pprint
import re
from dataclasses import replace
from pathlib import Path

from ..course import build, quiz
from ..errors import InvalidValue
from . import bank, cells, variants
from . import deadline as deadlines
from . import keys as answer_keys
from . import bank as banks
from .release import public, spec
from .score import LEVELS

__all__ = ["main", "template", "student_notebook", "specs", "numbers", "read_release", "Release", "MANIFEST"]

MANIFEST, TEMPLATE = "assignment.json", "template.ipynb"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_SETUP_IMPORTS = """import roofkit
from roofkit import formulas, roofline, training, precision, fusion
from roofkit.quiz import ask, check, hint

h100 = roofkit.hw("h100")"""


def _lesson_notebooks(root: Path, lessons: list[str]) -> list[tuple[str, object]]:
    paths = build.lesson_paths(root, lessons)  # raises InvalidValue naming the lessons that exist
    return [(path.stem, build.make_notebook(path, "student")) for path in paths]


def _cells_of_lesson(notebook) -> list:
    return [c for c in notebook.cells if "roofkit-generated" not in c.metadata.get("tags", [])]


def _answer_ids(cell_list) -> list[str]:
    ids = []
    for cell in cell_list:
        if cells.is_answer_cell(cell):
            ids += [i for i in cells.checked_ids(cells.source(cell)) if i not in ids]
    return ids


def _private_cells(question) -> list:
    """A private question's cells: a heading, the prompt (``ask``), an answer cell."""
    import nbformat  # deferred: nbformat costs ~1.4 s at import

    qid = question.id
    cell_id = re.sub(r"[^A-Za-z0-9-]", "-", qid)
    heading = nbformat.v4.new_markdown_cell(f"### {qid} ({question.points:g} pt)")
    heading["id"] = f"{cell_id}-heading"
    prompt = nbformat.v4.new_code_cell(f"ask({qid!r})")
    prompt["id"] = f"{cell_id}-ask"
    if question.kind == "code":
        name = re.sub(r"\W", "_", qid.rsplit(".", 1)[-1]).strip("_") or "answer"
        name = name if name[0].isalpha() else f"f_{name}"
        try:
            arguments = ", ".join(inspect.signature(question.key).parameters)
        except (TypeError, ValueError):
            arguments = "*args"
        body = f"def {name}({arguments}):\n    ...  # your code here\n\n\ncheck({qid!r}, {name})"
    else:
        body = f"answer = ...  # your answer here\ncheck({qid!r}, answer)"
    answer = nbformat.v4.new_code_cell(body)
    answer["id"] = f"{cell_id}-answer"
    return [heading, prompt, answer]


def _exercise_cells(root: Path, patterns: list[str], private: list[str] = ()) -> tuple[list, list[str]]:
    """An exercise set: each chosen question's ask cell and answer cell, from its lesson (or made, if private)."""
    import nbformat  # deferred: nbformat costs ~1.4 s at import

    bank = [q.id for q in quiz.questions()]
    chosen = []
    for pattern in patterns:
        hits = [i for i in bank if fnmatch.fnmatchcase(i, pattern)]
        if not hits:
            raise InvalidValue(f"no question matches {pattern!r}; see `roofkit quiz list` (e.g. l00.fma-flops, 'l01.ex-*').")
        chosen += [h for h in hits if h not in chosen]
    by_lesson = {}
    out = [nbformat.v4.new_code_cell(_SETUP_IMPORTS)]
    out[0]["id"] = "exercises-imports"
    for qid in chosen:
        question = quiz.get(qid)
        if qid in private:
            out += _private_cells(question)
            continue
        if question.lesson not in by_lesson:
            found = _lesson_notebooks(root, [question.lesson])
            by_lesson[question.lesson] = _cells_of_lesson(found[0][1])
        lesson_cells = by_lesson[question.lesson]
        asks = [c for c in lesson_cells if re.search(rf"\bask\(\s*[\"']{re.escape(qid)}[\"']", cells.source(c))]
        answers = [c for c in lesson_cells if cells.is_answer_cell(c) and qid in cells.checked_ids(cells.source(c))]
        if not answers:
            raise InvalidValue(f"lesson {question.lesson} has no answer cell for {qid}; an exercise set takes each "
                               "question's answer cell from its lesson.")
        heading = nbformat.v4.new_markdown_cell(f"### {qid} ({question.points:g} pt)")
        heading["id"] = f"{qid}-heading".replace(".", "-")
        out += [heading, *(copy.deepcopy(c) for c in asks[:1]), copy.deepcopy(answers[0])]
    return out, chosen


def specs(manifest: dict, params: dict[str, dict]) -> dict[str, dict]:
    """Each question of the release as a student with these numbers sees it (no key): for the setup cell.

    From what the release recorded of each question, so a later change to the bank (a new roofkit, a fixed key)
    does not change the notebooks the grader rebuilds.
    """
    recorded = manifest.get("public") or {}
    return {q["id"]: spec(recorded.get(q["id"]) or quiz.get(q["id"]), q["points"], params.get(q["id"]))
            for q in manifest["questions"]}


def numbers(manifest: dict, secret: bytes | None, student: str | None) -> dict[str, dict]:
    """question id -> the parameters ``student`` was given, for every question that varies.

    Drawn among the combinations the release recorded (a release made before they were recorded: among the
    bank's current ones).
    """
    if secret is None or student is None:
        return {}
    recorded = manifest.get("public") or {}
    out = {}
    for q in manifest["questions"]:
        stored = (recorded.get(q["id"]) or {}).get("combinations")
        drawn = variants.pick(secret, student, q["id"], stored if stored is not None  # drawn by the id handed out
                              else variants.combinations(quiz.get(q["id"])))
        if drawn:
            out[q["id"]] = drawn
    return out


def _setup_source(name: str, student: str | None, questions: dict[str, dict]) -> str:
    who = f" for {student}" if student else ""
    return (f"# Assignment {name}{who}: your questions, with your numbers. Do not edit this cell.\n"
            "from roofkit.grading.release import use_release\n\n"
            f"use_release({pprint.pformat(questions, sort_dicts=True, width=110)})")


def _header(name: str, origin: str, questions: list[dict]) -> str:
    total = sum(q["points"] for q in questions)
    rows = "\n".join(f"| `{q['id']}` | {q['kind']} | {q['points']:g} |" for q in questions)
    return (f"# Assignment {name}\n\n*Made by `roofkit assign` from {origin}.* {len(questions)} questions, "
            f"{total:g} points.\n\nWrite your answers in the cells that say `# your answer here` or "
            "`# your code here`, or type them into a question's answer box: JupyterLab saves the box with the "
            "notebook, and the grader judges what it holds (an answer cell's answer counts first). The other "
            "cells are locked, and the grader reports any change to them. "
            "Your numbers may differ from your classmates': use the ones the prompts show you.\n\n"
            "Before you hand it in, run the whole notebook from the top (**Kernel → Restart Kernel and Run All "
            "Cells**), then save it. The grader runs it again in a fresh kernel and checks each value itself: "
            "what your notebook printed does not count, only what your cells compute and your boxes hold. "
            "A code answer must be a "
            "self-contained function (imports inside it).\n\n| question | kind | points |\n| --- | --- | --- |\n"
            + rows)


def _lock(cell) -> None:
    cell.metadata["editable"] = False
    cell.metadata["deletable"] = False
    cell.metadata["roofkit"] = {"locked": True, "checksum": cells.checksum(cell)}


def template(lessons: list[str] = (), questions: list[str] = (), *, name: str, root: str | Path = ".",
             points: dict[str, float] | None = None, private: list[str] = ()):
    """The release notebook with the lessons' own numbers, and its manifest (a dict).

    ``private``: ids of an instructor's private questions (loaded from their bank); without ``questions``
    they are all added, with ``questions`` those the patterns name.
    """
    import nbformat  # deferred: nbformat costs ~1.4 s at import

    root = Path(root)
    if not lessons and not questions and not private:
        raise InvalidValue("choose lessons (e.g. `roofkit assign 00 01`), questions (--questions 'l01.ex-*') "
                           "or a bank of your own (--bank my-questions.py).")
    body, lesson_names = [], []
    for stem, notebook in _lesson_notebooks(root, list(lessons)) if lessons else []:
        body += _cells_of_lesson(notebook)
        lesson_names.append(stem)
    patterns = list(questions) or list(private)
    if patterns:
        extra, _ = _exercise_cells(root, patterns, list(private))
        body += extra
    ids = _answer_ids(body)
    if not ids:
        raise InvalidValue("the chosen lessons have no answer cells, so nothing to grade.")
    points = dict(points or {})
    unknown = set(points) - set(ids)
    if unknown:
        raise InvalidValue(f"--points names question(s) not in this assignment: {', '.join(sorted(unknown))}; "
                           f"its questions are: {', '.join(ids)}.")
    listed = []
    for qid in ids:
        question = quiz.get(qid)
        value = float(points.get(qid, question.points))
        if not value > 0:
            raise InvalidValue(f"points for {qid} must be positive; got {value:g}.")
        entry = {"id": qid, "lesson": question.lesson, "kind": question.kind, "points": value}
        if qid in private:
            entry["private"] = True
        listed.append(entry)
    origin = ", ".join(f"`lessons/{s}.md`" for s in lesson_names) or "questions of the bank"
    if private and any(q.get("private") for q in listed):
        origin += (", and questions of your instructor's own" if lesson_names or questions else
                   " (your instructor's own questions)")
    header = nbformat.v4.new_markdown_cell(_header(name, origin, listed))
    header["id"] = "assignment-header"

    manifest = {"roofkit_assignment": 1, "name": name, "lessons": lesson_names, "exercises": list(questions),
                "questions": listed, "points_total": sum(q["points"] for q in listed),
                "public": {q["id"]: {**public(quiz.get(q["id"])), "combinations": list(variants.combinations(
                    quiz.get(q["id"])))} for q in listed}}
    setup = nbformat.v4.new_code_cell(_setup_source(name, None, specs(manifest, {})))
    setup["id"] = "assignment-setup"
    nb = nbformat.v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
                   "language_info": {"name": "python"}}
    nb.cells = [header, setup, *copy.deepcopy(body)]
    seen = set()
    for index, cell in enumerate(nb.cells):  # unique ids even when two lessons share one
        if not cell.get("id") or cell["id"] in seen:
            cell["id"] = f"cell-{index:03d}"
        seen.add(cell["id"])
        cell.metadata.pop("roofkit", None)
        if cells.is_answer_cell(cell):
            cell.metadata["roofkit"] = {"answer": cells.checked_ids(cells.source(cell))}
        else:
            _lock(cell)
    return nb, manifest


def student_notebook(template_nb, manifest: dict, student: str | None, secret: bytes | None):
    """The notebook ``student`` was given: the template with their numbers in the setup cell."""
    nb = copy.deepcopy(template_nb)
    params = numbers(manifest, secret, student)
    setup = next(c for c in nb.cells if c.get("id") == "assignment-setup")
    if "use_release(" in cells.source(setup):
        setup.source = _setup_source(manifest["name"], student, specs(manifest, params))
    else:  # a release made before prompts were stored in it: its students hold this setup cell
        who = f" for {student}" if student else ""
        setup.source = (f"# Assignment {manifest['name']}{who}: the numbers of your questions. Do not edit this cell.\n"
                        f"from roofkit.quiz import use_variant\n\nuse_variant({json.dumps(params, sort_keys=True)})")
    _lock(setup)
    nb.metadata["roofkit"] = {
        "assignment": manifest["name"], "student": student, "variant": params,
        "locked": {str(c["id"]): c.metadata["roofkit"]["checksum"] for c in nb.cells if not cells.is_answer_cell(c)},
    }
    return nb


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _check_manifest(manifest, path: Path) -> None:
    """A manifest as `roofkit assign` writes it, or one clear error: an instructor may have edited it by hand."""
    def bad(what: str):
        return InvalidValue(f"{str(path)!r} is not a manifest `roofkit assign` wrote: {what}. "
                            "Make the release again with `roofkit assign`.")

    if not isinstance(manifest, dict):
        raise bad("it is not a JSON object")
    if not isinstance(manifest.get("name"), str) or not manifest["name"]:
        raise bad("'name' must be the assignment's name")
    questions = manifest.get("questions")
    if not isinstance(questions, list) or not questions:
        raise bad("'questions' must be a list of questions")
    for q in questions:
        if not (isinstance(q, dict) and isinstance(q.get("id"), str) and isinstance(q.get("lesson"), str)
                and q.get("kind") in quiz.KINDS and isinstance(q.get("points"), (int, float))
                and not isinstance(q.get("points"), bool) and q["points"] >= 0):
            raise bad(f"each question needs an id, a lesson, a kind ({', '.join(quiz.KINDS)}) and points; "
                      f"got {str(q)[:80]}")
    students = manifest.get("students")
    if students is not None and not (isinstance(students, list) and all(isinstance(x, str) for x in students)):
        raise bad("'students' must be a list of student ids")
    if manifest.get("deadline") is not None:
        try:
            deadlines.Policy.from_manifest(manifest).describe()
            deadlines.parse_time(manifest["deadline"]["due"], "due time")
        except (TypeError, KeyError, InvalidValue) as error:
            raise bad(f"'deadline' must be what --due and the late options record ({error})") from None
    if manifest.get("feedback") is not None and manifest["feedback"] not in ("none", "verdict", "misconception", "ratio"):
        raise bad("'feedback' must be none, verdict, misconception or ratio")
    for key, kind in (("people", dict), ("public", dict), ("bank", dict), ("secret_fingerprint", str)):
        if manifest.get(key) is not None and not isinstance(manifest[key], kind):
            raise bad(f"'{key}' must be a {'JSON object' if kind is dict else 'text'}")
    bank = manifest.get("bank") or {}
    private = set(bank.get("questions") or []) if isinstance(bank.get("questions"), list) else set()
    if bank and (not isinstance(bank.get("questions"), list) or not isinstance(bank.get("path"), (str, type(None)))):
        raise bad("'bank' must name its questions and the bank's path")
    known = set(quiz.by_id())  # a past release may name a question by an id it has since been renamed from
    for q in questions:
        if q["id"] not in known and q["id"] not in private:
            raise bad(f"question {q['id'][:40]!r} is neither in the course nor in the release's private bank")
    for qid, entry in (manifest.get("public") or {}).items():
        ok = (isinstance(entry, dict) and isinstance(entry.get("prompt"), str) and isinstance(entry.get("params"), dict)
              and isinstance(entry.get("points", 0), (int, float))
              and isinstance(entry.get("combinations", []), list)
              and all(isinstance(c, dict) for c in entry.get("combinations", []))
              and all(isinstance(h, str) for h in (entry.get("hints") or [])))
        if ok:
            try:
                entry["prompt"].format(**entry["params"])
            except (KeyError, IndexError, ValueError, AttributeError, TypeError):
                ok = False
        if not ok:
            raise bad(f"what it records of {str(qid)[:40]!r} (prompt, numbers, variants, hints) is malformed")


class Release:
    """A release folder as the grader reads it: manifest, template, roster."""

    def __init__(self, folder: str | Path):
        import nbformat  # deferred: nbformat costs ~1.4 s at import

        self.folder = Path(folder)
        try:
            self.manifest = json.loads((self.folder / MANIFEST).read_text(encoding="utf-8"))
            self.template = nbformat.reads((self.folder / TEMPLATE).read_text(encoding="utf-8"), as_version=4)
        except (OSError, ValueError) as error:
            raise InvalidValue(f"{str(self.folder)!r} is not a release made by `roofkit assign` "
                               f"({MANIFEST} and {TEMPLATE} are needed): {error}") from None
        _check_manifest(self.manifest, self.folder / MANIFEST)
        self.name = self.manifest["name"]
        self.students = self.manifest.get("students")

    def load_bank(self, path: str | Path | None = None):
        """The private questions of this release, loaded and checked (None when it has none)."""
        recorded = self.manifest.get("bank")
        if not recorded:
            if path:
                raise InvalidValue(f"release {self.name!r} has no private questions: it needs no --bank.")
            return None
        where = path or recorded.get("path")
        if not path and not Path(where or "").exists():
            raise InvalidValue(f"release {self.name!r} has private questions ({', '.join(recorded['questions'])}), "
                               f"whose bank is no longer at {where!r}: pass it with --bank.")
        loaded = bank.Bank(where)
        loaded.check(recorded, self.name)
        return loaded

    def check_secret(self, secret: bytes | None) -> None:
        expected = self.manifest.get("secret_fingerprint")
        if expected and secret is None:
            raise InvalidValue(f"release {self.name!r} has per-student numbers: pass its --secret-file.")
        if expected and variants.fingerprint(secret) != expected:
            raise InvalidValue(f"this secret is not the one release {self.name!r} was made with "
                               f"(fingerprint {variants.fingerprint(secret)}, expected {expected}).")


def read_release(folder: str | Path) -> Release:
    return Release(folder)


def main(lessons: list[str] = (), *, questions: list[str] = (), name: str | None = None, out: str | Path = "release",
         roster: str | Path | None = None, secret_file: str | Path | None = None,
         points: dict[str, float] | None = None, root: str | Path = ".", bank: str | Path | None = None,
         feedback: str | None = None, keys: bool = False, deadline: "deadlines.Policy | None" = None) -> dict:
    """Write a release; return a summary (the CLI prints it).

    ``deadline``: the due date and late policy (:mod:`roofkit.grading.deadline`), recorded in the manifest.
    ``keys``: also write ``keys.csv`` (:mod:`roofkit.grading.keys`), each student's key per question, for the
    instructor only.

    ``bank``: a Python file or folder of the instructor's private questions (:mod:`roofkit.grading.bank`).
    ``feedback``: how much the feedback pages say about each graded answer (:data:`roofkit.grading.score.LEVELS`;
    default: ``ratio`` for the course's questions, ``misconception`` for private ones).
    """
    import nbformat  # deferred: nbformat costs ~1.4 s at import

    if feedback is not None and feedback not in LEVELS:
        raise InvalidValue(f"unknown --feedback {feedback!r}; expected one of: {', '.join(LEVELS)}.")
    name = name or ("-".join(lessons) if lessons else "exercises")
    if not _NAME.fullmatch(name):
        raise InvalidValue(f"bad assignment name {name!r}: use letters, digits and . _ - (up to 64 characters).")
    students = variants.read_roster(roster) if roster else None
    private = banks.Bank(bank) if bank else None
    secret = variants.read_secret(secret_file, create=True) if students else None
    nb, manifest = template(list(lessons), list(questions), name=name, root=root, points=points,
                            private=private.ids if private else ())
    manifest["students"] = students
    manifest["people"] = variants.read_people(roster) if roster else {}
    manifest["secret_fingerprint"] = variants.fingerprint(secret) if secret else None
    if feedback:
        manifest["feedback"] = feedback
    if deadline is not None:
        manifest["deadline"] = deadline.to_dict()
    if private:
        handed = [q["id"] for q in manifest["questions"] if q.get("private")]
        manifest["bank"] = {**private.manifest(), "questions": handed,
                            "public_sha256": banks.public_digest([q for q in private.questions if q.id in handed])}
    out = Path(out)
    text = nbformat.writes(nb) + "\n"
    manifest["template_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    _write(out / TEMPLATE, text)
    written = {}
    for student in students or [None]:
        mine = student_notebook(nb, manifest, student, secret)
        path = out / "students" / student / f"{name}.ipynb" if student else out / f"{name}.ipynb"
        _write(path, nbformat.writes(mine) + "\n")
        written[student or ""] = str(path)
    _write(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    keys_file = _write_keys(out, manifest, secret, private) if keys else None
    counts = {q["id"]: len(manifest["public"][q["id"]]["combinations"]) for q in manifest["questions"]}
    return {"name": name, "out": str(out), "questions": manifest["questions"], "points_total": manifest["points_total"],
            "students": students or [], "notebooks": written, "variants": counts,
            "secret_file": str(secret_file) if secret else None, "keys": keys_file,
            "deadline": deadline.describe() if deadline else None}


def _write_keys(out: Path, manifest: dict, secret: bytes | None, private) -> str:
    """``keys.csv`` beside the manifest: every student's key for every question of the release."""
    questions = [replace(q, points=m["points"]) for q, m in
                 zip(answer_keys.bank_questions([m["id"] for m in manifest["questions"]], private),
                     manifest["questions"])]
    students = manifest.get("students") or [None]
    table = answer_keys.rows(questions, {s: numbers(manifest, secret, s) for s in students})
    path = out / answer_keys.FILE
    _write(path, answer_keys.csv_text(table))
    return str(path)
