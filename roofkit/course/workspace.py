"""The learner's own copy of the lessons: ``my-notebooks/``, made from ``notebooks/`` and never tracked by git.

``make lab`` calls :func:`prepare` (``roofkit workspace``) before it opens JupyterLab on the copy. So a learner's
answers, outputs and saved answer boxes live in a folder git ignores: ``git pull`` brings course updates
without a conflict, and running a lesson changes nothing git tracks.

* A lesson the learner has no copy of yet is copied (a new lesson after a ``git pull`` too).
* A copy the learner has is never overwritten. When the course's notebook changed since it was copied, the
  report says so: the new version is in ``notebooks/``; rename your copy to get the new one next time.
* Each copy's ``language_info`` is filled in as this Python's kernel reports it, so JupyterLab opens the
  notebook clean: it writes that metadata when the kernel starts, and a notebook that already has it exactly
  is not marked modified.
"""

from __future__ import annotations

import json
import platform
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidValue

__all__ = ["prepare", "Prepared", "FOLDER", "language_info"]

FOLDER = "my-notebooks"
SOURCE = "notebooks"


def language_info() -> dict:
    """The ``language_info`` this interpreter's IPython kernel reports (ipykernel's, with this Python's version)."""
    try:
        from ipykernel.ipkernel import IPythonKernel  # deferred: ipykernel is heavy and only this needs it
    except ImportError:  # pragma: no cover - ipykernel comes with the course
        return {"name": "python", "version": platform.python_version()}
    info = dict(IPythonKernel.language_info)
    info["version"] = platform.python_version()
    return info


@dataclass
class Prepared:
    folder: str
    copied: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    changed_upstream: list[str] = field(default_factory=list)  # kept copies whose lesson changed in the course

    def lines(self) -> list[str]:
        out = [f"copied {name} into {self.folder}/" for name in self.copied]
        if self.kept and not self.copied:
            out.append(f"your {len(self.kept)} notebooks in {self.folder}/ are kept as they are")
        out += [f"{name}: the course's version changed since you copied it; yours is kept, the new one is "
                f"{SOURCE}/{name} (rename your copy to get the new one next time)" for name in self.changed_upstream]
        return out

    def to_dict(self) -> dict:
        return {"folder": self.folder, "copied": self.copied, "kept": self.kept,
                "changed_upstream": self.changed_upstream}


def _lesson_hash(notebook: dict) -> str | None:
    meta = notebook.get("metadata", {}).get("roofkit", {})
    return meta.get("source_sha256") if isinstance(meta, dict) else None


def prepare(root: str | Path = ".", folder: str = FOLDER) -> Prepared:
    """Copy into ``root/folder`` every lesson notebook of ``root/notebooks`` that is not there yet."""
    root = Path(root)
    source = root / SOURCE
    if not source.is_dir():
        raise InvalidValue(f"{root.resolve()} is not a course folder (it has no {SOURCE}/ folder): run this in the "
                           "clone of the course.")
    target = root / folder
    target.mkdir(exist_ok=True)
    prepared = Prepared(folder=folder)
    info = language_info()
    for path in sorted(source.glob("[0-9][0-9]-*.ipynb")):
        mine = target / path.name
        course = json.loads(path.read_text(encoding="utf-8"))
        if mine.exists():
            prepared.kept.append(path.name)
            try:
                copied_from = json.loads(mine.read_text(encoding="utf-8")).get("metadata", {}).get("roofkit", {})
                copied_from = copied_from.get("copied_from_sha256") if isinstance(copied_from, dict) else None
            except (OSError, ValueError):
                copied_from = None
            if copied_from and copied_from != _lesson_hash(course):
                prepared.changed_upstream.append(path.name)
            continue
        course.setdefault("metadata", {})["language_info"] = info
        roofkit_meta = course["metadata"].setdefault("roofkit", {})
        roofkit_meta["copied_from_sha256"] = _lesson_hash(course)
        temporary = mine.with_suffix(".ipynb.tmp")
        temporary.write_text(json.dumps(course, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        shutil.move(temporary, mine)
        prepared.copied.append(path.name)
    return prepared
