"""An instructor's private questions: a Python file, or a folder of them, read by ``assign`` and ``grade`` only.

A bank file is written like a lesson's bank in ``roofkit/course/``, with the
same API::

    from roofkit import hardware
    from roofkit.quiz import Misconception, Question, register

    register(Question(id="hw1.decode-time", lesson="hw1", kind="numeric", unit="s",
                      prompt="...{hw}...", params={"hw": "h100"}, variants={"hw": ("a100", "h200")},
                      key=lambda hw: ...,  # a computation through roofkit
                      hints=(...,), misconceptions=(...,)))

:func:`load` runs the files in the grader's process (never in a student's
kernel), registers their questions beside the course's, and tells the sandbox
to keep the files out of every graded kernel's reach
(:func:`roofkit.grading.stripped.hide`). A release made with a bank stores
what students see of its questions (prompts, numbers, hints) and two digests:
:func:`public_digest` (what students see: ``grade`` refuses a bank where that
changed, since the notebooks handed out would no longer match) and
:func:`source_digest` (the files: a fixed key means a new grading).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
import threading
from pathlib import Path

from ..course import quiz
from ..errors import InvalidValue, RoofkitError
from . import probe, stripped, variants
from .release import spec

__all__ = ["load", "forget", "files", "public_digest", "source_digest", "Bank"]

_lock = threading.Lock()
_loaded: dict[str, tuple[str, list[str]]] = {}  # file -> (sha256 of its text, question ids)


def files(path: str | Path) -> list[Path]:
    """The bank's files: the file itself, or the ``*.py`` files of a folder (not those starting with _ or .)."""
    path = Path(path)
    if path.is_file():
        if path.suffix != ".py":
            raise InvalidValue(f"a question bank is a Python file (.py) or a folder of them; got {str(path)!r}.")
        return [path.resolve()]
    if path.is_dir():
        found = sorted(p.resolve() for p in path.glob("*.py") if not p.name.startswith(("_", ".")))
        if not found:
            raise InvalidValue(f"the folder {str(path)!r} holds no question bank (.py files).")
        return found
    raise InvalidValue(f"no such question bank: {str(path)!r} (a .py file, or a folder of them).")


def _run(path: Path, text: str) -> list[str]:
    """Execute one bank file; the ids of the questions it registered."""
    before = {q.id for q in quiz.questions()}
    name = f"{probe.BANK_MODULE_PREFIX}_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        exec(compile(text, str(path), "exec"), module.__dict__)  # noqa: S102 - the instructor's own file
    except Exception as error:  # noqa: BLE001 - any mistake in the instructor's file, in one line
        for qid in {q.id for q in quiz.questions()} - before:  # what it registered before failing
            quiz._BANK.pop(qid, None)
        sys.modules.pop(name, None)
        if isinstance(error, RoofkitError):
            raise InvalidValue(f"question bank {str(path)!r}: {error}") from None
        line = getattr(error, "lineno", None) or _line_of(error, path)
        where = f" (line {line})" if line else ""
        raise InvalidValue(f"question bank {str(path)!r} failed to load{where}: {type(error).__name__}: {error}") \
            from None
    new = [q.id for q in quiz.questions() if q.id not in before]
    variants._combinations.cache_clear()  # a reloaded bank may give other keys for the same ids
    return new


def _line_of(error: BaseException, path: Path) -> int | None:
    tb = error.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == str(path):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def load(path: str | Path) -> list:
    """Register the private questions of ``path`` (a file or folder) in this process; return them."""
    ids: list[str] = []
    for file in files(path):
        text = file.read_text(encoding="utf-8")
        digest = hashlib.sha256(text.encode()).hexdigest()
        with _lock:
            known = _loaded.get(str(file))
            if known and known[0] == digest:
                ids += known[1]
                continue
            if known:  # the file changed since this process loaded it: its questions are replaced
                for qid in known[1]:
                    quiz._BANK.pop(qid, None)
            course = {q.id for q in quiz.questions()}
            try:
                new = _run(file, text)
            except InvalidValue as error:
                if "two questions share the id" in str(error):
                    clash = str(error).split("id ", 1)[-1].rstrip(".")
                    where = "a question of the course" if clash.strip("'") in course else "another bank's"
                    raise InvalidValue(f"question bank {str(file)!r}: the id {clash} is already {where}; "
                                       "give private questions ids of their own (e.g. 'hw1.decode-time').") from None
                raise
            if not new:
                raise InvalidValue(f"question bank {str(file)!r} registers no question: call "
                                   "roofkit.quiz.register(Question(...)) in it.")
            _loaded[str(file)] = (digest, new)
        stripped.hide(file)
        ids += new
    stripped.hide(Path(path))
    return [quiz.get(i) for i in ids]


def forget(path: str | Path) -> None:
    """Unregister the questions of a bank this process loaded (a long-lived session, the tests)."""
    with _lock:
        for file in files(path):
            _, ids = _loaded.pop(str(file), (None, []))
            for qid in ids:
                quiz._BANK.pop(qid, None)


def source_digest(path: str | Path) -> str:
    """The bank's files as written (keys included): a change means a new grading."""
    h = hashlib.sha256()
    for file in files(path):
        h.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def public_digest(questions) -> str:
    """What students see of these questions (prompts, numbers, choices, hints, points), never their keys."""
    seen = [{"id": q.id, "spec": spec(q), "variants": {k: [str(v) for v in vs] for k, vs in sorted(q.variants.items())}}
            for q in sorted(questions, key=lambda q: q.id)]
    return hashlib.sha256(json.dumps(seen, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Bank:
    """A bank as a release records it, and as the grader checks it."""

    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()
        self.questions = load(self.path)
        self.ids = [q.id for q in self.questions]

    def manifest(self) -> dict:
        return {"path": str(self.path), "questions": self.ids, "public_sha256": public_digest(self.questions),
                "source_sha256": source_digest(self.path)}

    def check(self, recorded: dict, name: str) -> None:
        """Refuse a bank that is not the one release ``name`` was made with (what students see changed)."""
        missing = sorted(set(recorded.get("questions", [])) - set(self.ids))
        if missing:
            raise InvalidValue(f"the bank {str(self.path)!r} has no question {', '.join(missing)}, which release "
                               f"{name!r} hands out: pass the bank it was made with (--bank).")
        mine = [q for q in self.questions if q.id in set(recorded.get("questions", []))]
        if public_digest(mine) != recorded.get("public_sha256"):
            raise InvalidValue(f"the bank {str(self.path)!r} does not ask what release {name!r} handed out (a prompt, "
                               "its numbers, choices, hints or points changed): grade with the bank the release was "
                               "made with, or make a new release. Fixing a key alone is fine.")
