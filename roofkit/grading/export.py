"""The gradebook as a learning-management system imports it: Canvas and Moodle.

One grade column: the student's score (total points) for the assignment.

**Canvas** (Grades > Import, a CSV file). The layout is Canvas's own gradebook
export: the columns ``Student, ID, SIS User ID, SIS Login ID, Section``, then
one column per assignment, and a second row starting ``Points Possible`` with
the assignment's maximum. Canvas finds each student by ``ID`` (its user id),
else ``SIS User ID``, else ``SIS Login ID``, else the name; an assignment
column titled ``Name (123)`` updates the assignment with id 123, any other
title creates a new assignment (Canvas's importer: instructure/canvas-lms,
``lib/gradebook_importer.rb``; Instructure's guide "How do I import grades in
the Gradebook?"). A blank grade leaves Canvas's grade as it is.

**Moodle** (Gradebook setup > Import > CSV file). A header row, then a row per
student; on import, one column is mapped to a user field (``Map from`` ->
``Map to``: username, ID number or email address) and the grade column to a
new or existing grade item. A grade is a number; ``-`` means no grade (Moodle
docs, "Grade import"; moodle/moodle ``grade/import/csv/classes/load_data.php``).

The student's roofkit id goes where the roster says nothing more: Canvas's
``SIS Login ID`` and Moodle's ``Username``. A roster may add the columns
``name``, ``canvas_id``, ``sis_user_id``, ``sis_login_id``, ``section``
(Canvas) and ``username``, ``idnumber``, ``email`` (Moodle). A student the
grader itself failed on (status ``error``) gets a blank grade (Moodle: ``-``),
so an import never overwrites a grade with a failure of the grader's; every
other row carries the gradebook's score (0 for a missing or unreadable
notebook).

Every cell a spreadsheet would run as a formula (a roster name such as
``=HYPERLINK(...)``, an email starting with ``@`` or ``-``) is neutralised by
OWASP's rule (:func:`roofkit.grading.files.csv_cell`); the grade cells are
numbers, and Moodle's ``-``, as they are. Rows whose student is not a valid id
(:mod:`roofkit.grading.ids`) are left out.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import InvalidValue
from . import deadline as deadlines
from . import files, ids

__all__ = ["FORMATS", "canvas", "moodle", "main", "CANVAS_COLUMNS", "MOODLE_COLUMNS"]

CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_COLUMNS = ("Username", "ID number", "Email address")


def _grade(row: dict, blank: str = "") -> str:
    try:
        return blank if row.get("status") == "error" else f"{float(row.get('score', 0)):g}"
    except (TypeError, ValueError):
        return blank


def canvas(rows: list[dict], *, column: str, points: float, people: dict | None = None) -> str:
    """Canvas's gradebook import CSV: the student columns, a Points Possible row, one row per student."""
    people = people or {}
    table = [[*CANVAS_COLUMNS, column], ["Points Possible", "", "", "", "", f"{points:g}"]]
    for row in _valid(rows):
        who = _who(people, row["student"])
        table.append([who.get("name", row["student"]), who.get("canvas_id", ""), who.get("sis_user_id", ""),
                      who.get("sis_login_id", row["student"]), who.get("section", ""), _grade(row)])
    return files.csv_text(table)


def moodle(rows: list[dict], *, column: str, people: dict | None = None) -> str:
    """A Moodle grade import CSV: user fields to map from, one grade column."""
    people = people or {}
    late = any(isinstance(r, dict) and r.get("late") for r in rows)
    table = [[*MOODLE_COLUMNS, column, *([f"{column} feedback"] if late else [])]]
    for row in _valid(rows):
        who = _who(people, row["student"])
        table.append([who.get("username", row["student"]), who.get("idnumber", ""), who.get("email", ""),
                      _grade(row, "-"), *([deadlines.late_text(row.get("late"))] if late else [])])
    return files.csv_text(table)


def _valid(rows: list[dict]) -> list[dict]:
    return [row for row in rows if isinstance(row, dict) and ids.problem(row.get("student")) is None]


def _who(people: dict, student: str) -> dict:
    who = people.get(student) if isinstance(people, dict) else None
    return {str(k): str(v) for k, v in who.items()} if isinstance(who, dict) else {}


FORMATS = {"canvas": "canvas.csv", "moodle": "moodle.csv"}


def main(out: str | Path, formats: list[str], *, assignment: str | None, people: dict | None = None,
         column: str | None = None, rows: list[dict] | None = None) -> dict[str, str]:
    """Write OUT/canvas.csv and/or OUT/moodle.csv; return {format: path}.

    ``rows``: the students' rows (a report's summary); default: those of OUT/results.json.
    """
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise InvalidValue(f"unknown export format {unknown[0]!r}; expected one of: {', '.join(FORMATS)}.")
    out = Path(out)
    if rows is None:
        rows = json.loads((out / "results.json").read_text(encoding="utf-8", errors="replace"))["students"]
    title = column or assignment or "roofkit"
    points = max((float(r.get("max_score") or 0) for r in rows), default=0.0)
    written = {}
    for kind in dict.fromkeys(formats):
        text = canvas(rows, column=title, points=points, people=people) if kind == "canvas" else \
            moodle(rows, column=title, people=people)
        files.write_atomic(out / FORMATS[kind], text)
        written[kind] = str(out / FORMATS[kind])
    return written
