"""Assignments, per-student variants and grading that trusts nothing the student's kernel says.

One module per step; each step's ``main`` is both the Python API and what the
``roofkit`` command calls:

    assign    lessons -> a release: a notebook per student, with their numbers   assign.main(["00"], ...)
    bank      an instructor's private questions, read by assign and grade only   assign.main(..., bank="q.py")
    release   questions as a release hands them out: prompts, never keys         release.use_release(...)
    variants  each student's numbers, from the course secret and their id (HMAC)  variants.draw(secret, id, q)
    cells     locked-cell checksums; what a submission changed                    cells.compare(...)
    stripped  the roofkit a graded kernel imports: the package without its bank  stripped.package()
    jail      the sandbox around a kernel, from outside: bubblewrap, cgroups     jail.choose("auto")
    sandbox   the fence a sandboxed process puts on itself: limits, user, Landlock
    probe     the grader's watch on reaches for keys inside a graded kernel
    execute   one submission in a fresh sandboxed kernel -> its answer records   execute.main(path)
    cases     code questions run on public and hidden cases in a clean process
    ids       student ids, checked once the same way everywhere                ids.problem("bob!")
    files     reading submissions once, writing atomically, safe CSV cells       files.read_submission(p, cap)
    score     one answer's points, and the feedback levels                       score.judge_answer(q, "2n")
    results   the per-student result files, signed with the course secret      results.write(out, r, key)
    grade     many submissions, in parallel, resumable -> one result per student grade.main(paths, out=...)
    report    gradebook.csv, results.json and a feedback page per student        report.main(out)
    shard     one N-th of a class per machine, then one gradebook (--merge)      shard.merge(outs, out=...)
    export    the gradebook as Canvas and Moodle import it                      export.main(out, ["canvas"])

See docs/instructors.md for the workflow.
"""

from __future__ import annotations

import importlib

__all__ = ["assign", "bank", "release", "variants", "cells", "stripped", "jail", "sandbox", "probe", "execute", "cases",
           "ids", "files", "score", "results", "grade", "report", "shard", "export"]


def __getattr__(name: str):
    if name in __all__:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'roofkit.grading' has no attribute {name!r}")
