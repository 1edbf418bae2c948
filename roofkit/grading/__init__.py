"""Assignments, per-student variants and grading that trusts nothing the student's kernel says.

One module per step; each step's ``main`` is both the Python API and what the
``roofkit`` command calls:

    assign    lessons -> a release: a notebook per student, with their numbers   assign.main(["00"], ...)
    variants  each student's numbers, from the course secret and their id (HMAC)  variants.draw(secret, id, q)
    cells     locked-cell checksums; what a submission changed                    cells.compare(...)
    sandbox   the fence around student code: limits, privileges, Landlock
    execute   one submission in a fresh sandboxed kernel -> its answer records   execute.main(path)
    cases     code questions run on public and hidden cases in a clean process
    grade     many submissions, in parallel, resumable -> one result per student grade.main(paths, out=...)
    report    gradebook.csv, results.json and a feedback page per student        report.main(out)

See docs/instructors.md for the workflow.
"""

from __future__ import annotations

import importlib

__all__ = ["assign", "variants", "cells", "sandbox", "execute", "cases", "grade", "report"]


def __getattr__(name: str):
    if name in __all__:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'roofkit.grading' has no attribute {name!r}")
