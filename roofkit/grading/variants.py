"""Per-student variants: each student's numbers, drawn from the course secret and their id.

A question lists, in ``variants``, the values each parameter may take. The
combinations are enumerated in a fixed order and kept only if the key computes
and differs from the lesson's own numbers (whose answers are in ``solutions/``)
and, for a numeric key, from every combination kept before it (so that two
students with different numbers never share a key; a key that does not depend
on the parameters at all still gets other numbers in its prompt). A student's
combination is

    index = HMAC-SHA256(secret, "roofkit-variant" | student | question) mod count

so anyone holding the secret and the roster can recompute every student's
numbers, and nobody else can. The grader does exactly that; it never reads the
numbers from a notebook.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import itertools
import math
import os
import secrets
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..course import quiz
from ..errors import InvalidValue
from .ids import RULE as _ID_RULE
from .ids import STUDENT_ID

__all__ = ["read_roster", "read_people", "read_secret", "fingerprint", "combinations", "draw", "pick", "variant",
           "STUDENT_ID"]

MAX_COMBINATIONS = 4096


def read_roster(path: str | Path) -> list[str]:
    """Student ids from a CSV file: the column ``id`` (or ``student``), else the first column."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as error:
        raise InvalidValue(f"cannot read the roster {str(path)!r}: {error.strerror or error}.") from None
    rows = [row for row in csv.reader(text.splitlines()) if any(cell.strip() for cell in row)]
    if not rows:
        raise InvalidValue(f"the roster {str(path)!r} is empty; expected a CSV file with a column 'id'.")
    header = [cell.strip().lower() for cell in rows[0]]
    column = next((header.index(name) for name in ("id", "student", "student_id") if name in header), None)
    body = rows[1:] if column is not None else rows
    ids = [row[column or 0].strip() for row in body if len(row) > (column or 0)]
    for student in ids:
        if not STUDENT_ID.fullmatch(student):
            raise InvalidValue(f"roster {str(path)!r}: bad student id {student!r}; {_ID_RULE}.")
    duplicates = sorted({s for s in ids if ids.count(s) > 1})
    if duplicates:
        raise InvalidValue(f"roster {str(path)!r}: student id(s) listed twice: {', '.join(duplicates)}.")
    if not ids:
        raise InvalidValue(f"the roster {str(path)!r} lists no students.")
    return ids


PEOPLE_COLUMNS = ("name", "email", "section", "canvas_id", "sis_user_id", "sis_login_id", "username", "idnumber")


def read_people(path: str | Path) -> dict[str, dict[str, str]]:
    """What a roster says about each student besides the id, for an LMS export: the columns in PEOPLE_COLUMNS."""
    ids = read_roster(path)  # the same checks, the same order
    rows = [row for row in csv.reader(Path(path).read_text(encoding="utf-8-sig").splitlines())
            if any(cell.strip() for cell in row)]
    header = [cell.strip().lower().replace(" ", "_") for cell in rows[0]]
    column = next((header.index(n) for n in ("id", "student", "student_id") if n in header), None)
    if column is None:
        return {}
    wanted = {i: name for i, name in enumerate(header) if name in PEOPLE_COLUMNS}
    people = {}
    for row in rows[1:]:
        if len(row) > column and row[column].strip() in ids:
            info = {name: row[i].strip() for i, name in wanted.items() if i < len(row) and row[i].strip()}
            if info:
                people[row[column].strip()] = info
    return people


def read_secret(path: str | Path | None, create: bool = False) -> bytes:
    """The course secret from a file (created with 256 random bits when ``create`` and missing)."""
    if path is None:
        value = os.environ.get("ROOFKIT_SECRET", "")
        if not value:
            raise InvalidValue("a course secret is needed: pass --secret-file FILE (or set ROOFKIT_SECRET).")
        return value.encode()
    path = Path(path)
    if not path.exists() and create:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(32) + "\n")
    try:
        value = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise InvalidValue(f"cannot read the secret file {str(path)!r}: {error.strerror or error}.") from None
    if len(value) < 16:
        raise InvalidValue(f"the secret in {str(path)!r} is too short ({len(value)} characters; at least 16).")
    return value.encode()


def fingerprint(secret: bytes) -> str:
    """Names a secret without revealing it (stored in the release, checked by the grader)."""
    return hmac.new(secret, b"roofkit-fingerprint", hashlib.sha256).hexdigest()[:16]


def _same(a, b, rtol: float) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=max(rtol, 1e-9))
    except (TypeError, ValueError):
        return a == b


@lru_cache(maxsize=None)
def _combinations(question_id: str, spec: tuple) -> tuple[dict, ...]:
    question = quiz.get(question_id)
    names = sorted(question.variants)
    total = math.prod(len(question.variants[n]) for n in names)
    if total > MAX_COMBINATIONS:
        raise InvalidValue(f"question {question_id!r} has {total} variant combinations; at most {MAX_COMBINATIONS}.")
    default_key = question.answer_key()
    kept: list[dict] = []
    keys: list[Any] = []
    other_numbers: list[dict] = []  # for a key that does not depend on the parameters: other prompts at least
    for values in itertools.product(*(question.variants[n] for n in names)):
        params = dict(zip(names, values))
        try:
            asked = question.with_params(**params)
            key = asked.answer_key()
            asked.text()
        except Exception:  # a combination the key cannot compute (a GPU without that precision): skip it
            continue
        if all(question.params.get(n) == v for n, v in params.items()):
            continue  # the lesson's own numbers: their answer is printed in solutions/
        other_numbers.append(params)
        if question.kind == "numeric":
            if not math.isfinite(float(key)) or any(_same(key, k, question.rtol) for k in [default_key, *keys]):
                continue
        kept.append(params)
        keys.append(key)
    return tuple(kept or other_numbers)


def combinations(question) -> tuple[dict, ...]:
    """Every usable variant of a question, in a fixed order (empty if it has none)."""
    if not question.variants:
        return ()
    spec = tuple(sorted((k, tuple(v)) for k, v in question.variants.items()))
    return _combinations(question.id, spec)


def draw(secret: bytes, student: str, question) -> dict:
    """The parameters ``student`` gets for ``question`` (empty: the lesson's numbers)."""
    return pick(secret, student, question.id, combinations(question))


def pick(secret: bytes, student: str, question_id: str, choices) -> dict:
    """The one of ``choices`` (a question's combinations, as a release recorded them) that ``student`` gets."""
    if not choices:
        return {}
    message = b"roofkit-variant\x00" + student.encode() + b"\x00" + question_id.encode()
    digest = hmac.new(secret, message, hashlib.sha256).digest()
    return dict(choices[int.from_bytes(digest[:8], "big") % len(choices)])


def variant(secret: bytes | None, student: str | None, questions: Iterable) -> dict[str, dict]:
    """question id -> parameters for every question that varies (no secret or student: none vary)."""
    if secret is None or student is None:
        return {}
    drawn = {q.id: draw(secret, student, q) for q in questions}
    return {k: v for k, v in drawn.items() if v}


def describe(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
