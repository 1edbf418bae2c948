"""The per-student result files, signed with the course secret.

    OUT/results/STUDENT.json    one per submission: the source of truth for the gradebook

A result is written atomically (:func:`roofkit.grading.files.write_atomic`)
and, when the release has a course secret, signed: an HMAC-SHA256 of its
canonical JSON under a key derived from the secret. Every reader checks it:
the grader before it skips a student as already graded, the report before
it builds a row, ``--merge`` before it takes a shard's file. A result that
fails the check (edited by hand, rewritten by a process that outlived its
kernel, copied from another course) is never trusted: the report shows the
student as ``error`` and the next grading run grades them again; a merge
refuses the shard. Without a secret (a learner's own notebook, an exercise
set without a roster) results are unsigned and read as they are.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from . import files, ids

__all__ = ["RESULTS", "key", "sign", "verify", "write", "read", "read_all", "Stored"]

RESULTS = "results"
FIELD = "signature"


def key(secret: bytes | None) -> bytes | None:
    """The signing key for results of a release with this course secret (None: results are not signed)."""
    return hmac.new(secret, b"roofkit results v1", hashlib.sha256).digest() if secret else None


def _canonical(data: dict) -> bytes:
    body = {k: v for k, v in data.items() if k != FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode()


def sign(data: dict, signing_key: bytes | None) -> dict:
    """``data`` made safe to write (:func:`files.clean`), with its signature when there is a key."""
    data = json.loads(json.dumps(files.clean(data), default=str))
    data.pop(FIELD, None)
    if signing_key:
        data[FIELD] = hmac.new(signing_key, _canonical(data), hashlib.sha256).hexdigest()
    return data


def verify(data: dict, signing_key: bytes | None) -> bool:
    """True when ``data`` carries this key's signature (always, without a key)."""
    if not signing_key:
        return True
    given = data.get(FIELD)
    expected = hmac.new(signing_key, _canonical(data), hashlib.sha256).hexdigest()
    return isinstance(given, str) and hmac.compare_digest(given, expected)


def write(out: Path, data: dict, signing_key: bytes | None) -> dict:
    """Sign and write one student's result; return what was written."""
    signed = sign(data, signing_key)
    files.write_atomic(Path(out) / RESULTS / f"{signed['student']}.json", json.dumps(signed, indent=1) + "\n")
    return signed


class Stored:
    """One result file as read: the data, or why it cannot be used."""

    def __init__(self, path: Path, data: dict | None, problem: str | None, text: str | None = None):
        self.path, self.data, self.problem, self.text = path, data, problem, text


def read(path: Path, signing_key: bytes | None, assignment=...) -> Stored:
    """Read and check one result file (``assignment``: the assignment it must belong to, if given)."""
    try:
        raw = path.read_bytes()
        if len(raw) > 64 * 2**20:
            return Stored(path, None, f"{path.name} is too large to be a result")
        text = raw.decode("utf-8", errors="replace")
        data = json.loads(text)
    except (OSError, ValueError, RecursionError) as error:
        return Stored(path, None, f"{path.name} cannot be read ({type(error).__name__})")
    if not isinstance(data, dict) or data.get("roofkit_result") != 1:
        return Stored(path, None, f"{path.name} is not a result roofkit wrote")
    if assignment is not ... and data.get("assignment") != assignment:
        return Stored(path, None, None)  # another assignment's: not this gradebook's business
    bad = ids.problem(data.get("student"))
    if bad or path.stem != data.get("student"):
        return Stored(path, None, f"{path.name}: {bad or 'the student it names is not its file name'}")
    if not verify(data, signing_key):
        return Stored(path, None, f"{path.name} fails its signature check: it was changed after grading, or "
                                  "graded with another course secret")
    return Stored(path, data, None, text)


def read_all(out: Path, signing_key: bytes | None, assignment) -> tuple[dict[str, dict], dict[str, str]]:
    """(student -> result, student or file -> problem) for every result file in OUT/results."""
    results, problems = {}, {}
    folder = Path(out) / RESULTS
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.name.startswith(".") or not path.is_file() or path.is_symlink():
            continue
        stored = read(path, signing_key, assignment)
        if stored.data is not None:
            results[stored.data["student"]] = stored.data
        elif stored.problem:
            problems[path.stem if not ids.problem(path.stem) else path.name] = stored.problem
    return results, problems
