"""Locked cells and answer cells: checksums, and what a submission did to them.

A release notebook has two kinds of cells. An **answer cell** holds a stub
(``...  # your answer here`` or ``...  # your code here``) and the ``check``
call of one question: the student writes there. Every other cell is
**locked**: its checksum (SHA-256 of its type and its source, trailing spaces
ignored) is stored in the release notebook's metadata, as nbgrader does, and
the grader recomputes it from its own copy of the release; it never trusts the
checksums a submission carries.

:func:`compare` matches a submission's cells to the release's locked cells by
checksum (and by cell id, to tell an edited cell from a deleted one) and
reports locked cells that were edited, deleted, duplicated or moved. Answers
are found by the question id their cell checks, wherever the cell is, so
moving, duplicating or retyping an answer cell does not lose its answer.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from dataclasses import dataclass, field

__all__ = ["source", "checksum", "checked_ids", "is_answer_cell", "locked_cells", "compare", "Integrity"]

_STUB = re.compile(r"#\s*your (answer|code) here")
_CHECK = re.compile(r"\bcheck\(\s*[\"']([^\"']+)[\"']")


def source(cell) -> str:
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else str(text)


def checksum(cell) -> str:
    lines = [line.rstrip() for line in source(cell).strip().splitlines()]
    return hashlib.sha256(f"{cell.get('cell_type', '')}\n{chr(10).join(lines)}".encode()).hexdigest()


def checked_ids(text: str) -> list[str]:
    """Question ids named by ``check("...")`` calls in a cell's source, in order."""
    return list(dict.fromkeys(_CHECK.findall(text)))


def is_answer_cell(cell) -> bool:
    return cell.get("cell_type") == "code" and bool(_STUB.search(source(cell)))


def _preview(cell) -> str:
    first = next((line.strip() for line in source(cell).splitlines() if line.strip()), "")
    return (first[:57] + "...") if len(first) > 60 else first


@dataclass(frozen=True)
class Locked:
    position: int  # 1-based, in the release notebook
    cell_id: str
    checksum: str
    kind: str
    preview: str

    def describe(self) -> str:
        return f"locked cell {self.position} ({self.kind}: `{self.preview}`)"


def locked_cells(notebook) -> list[Locked]:
    """The release notebook's locked cells, in order."""
    return [Locked(i + 1, str(c.get("id", "")), checksum(c), c.get("cell_type", ""), _preview(c))
            for i, c in enumerate(notebook["cells"]) if not is_answer_cell(c)]


@dataclass
class Integrity:
    """What a submission did to the release's locked cells."""

    total: int = 0
    found: int = 0
    edited: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    verbatim: set[int] = field(default_factory=set)  # submission cells that are unchanged locked cells
    changed: set[int] = field(default_factory=set)  # submission cells that are edited locked cells (same id)

    @property
    def share_found(self) -> float:
        return self.found / self.total if self.total else 1.0

    def problems(self) -> list[str]:
        return ([f"{d} was edited" for d in self.edited] + [f"{d} was deleted" for d in self.deleted]
                + [f"{d} was duplicated" for d in self.duplicated] + [f"{d} was moved" for d in self.moved])

    def to_dict(self) -> dict:
        return {"locked_cells": self.total, "found": self.found, "edited": self.edited, "deleted": self.deleted,
                "duplicated": self.duplicated, "moved": self.moved}


def _longest_increasing(sequence: list[int]) -> set[int]:
    """Positions (in ``sequence``) of one longest strictly increasing subsequence."""
    tails: list[int] = []  # tails[k]: index in sequence of the smallest tail of a run of length k+1
    parent = [-1] * len(sequence)
    for i, value in enumerate(sequence):
        k = bisect.bisect_left([sequence[t] for t in tails], value)
        parent[i] = tails[k - 1] if k else -1
        tails[k:k + 1] = [i]
    keep, i = set(), tails[-1] if tails else -1
    while i >= 0:
        keep.add(i)
        i = parent[i]
    return keep


def compare(release_locked: list[Locked], submission_cells: list) -> Integrity:
    """Match the release's locked cells in a submission and report what changed."""
    report = Integrity(total=len(release_locked))
    sums = [checksum(c) for c in submission_cells]
    ids = [str(c.get("id", "")) for c in submission_cells]
    wanted = {lock.checksum for lock in release_locked}
    report.verbatim = {i for i, s in enumerate(sums) if s in wanted}
    unused: dict[str, list[int]] = {}
    for i, s in enumerate(sums):
        unused.setdefault(s, []).append(i)
    matched: list[tuple[int, Locked]] = []  # (submission index, locked cell), in release order
    for lock in release_locked:
        if unused.get(lock.checksum):
            matched.append((unused[lock.checksum].pop(0), lock))
        elif lock.cell_id and lock.cell_id in ids and sums[ids.index(lock.cell_id)] != lock.checksum:
            report.edited.append(lock.describe())
            report.changed.add(ids.index(lock.cell_id))
        else:
            report.deleted.append(lock.describe())
    report.found = len(matched)
    seen = set()
    for lock in release_locked:
        if unused.get(lock.checksum) and lock.checksum not in seen:
            seen.add(lock.checksum)
            report.duplicated.append(lock.describe())
    in_order = _longest_increasing([index for index, _ in matched])
    report.moved = [lock.describe() for k, (_, lock) in enumerate(matched) if k not in in_order]
    return report
