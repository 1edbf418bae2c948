"""The gradebook and the feedback pages, rebuilt from the per-student result files.

    OUT/results/STUDENT.json    one per submission, written and signed by the grader (the source of truth)
    OUT/gradebook.csv           one row per student: status, score, points per question, flags, sandbox
    OUT/results.json            every result in one file, for scripts
    OUT/feedback/STUDENT.html   what the student may see, at the assignment's feedback level

Everything here is derived from ``results/`` (:mod:`roofkit.grading.results`):
rebuilding after a killed run, or after regrading one student, always gives
one row per student. A roster student without a submission gets a row with
status ``missing``; a result that fails its signature check, one with status
``error``. Flags (a notebook run with another student's numbers, an answer
that is the key of another student's numbers) name other students, so they
appear in the gradebook and ``results.json`` only, never on a feedback page;
nor does any key. Nothing one result holds (odd bytes, deep nesting, a page
that fails to render) stops the rows and pages of the others.

Feedback levels (chosen per assignment, see :data:`roofkit.grading.score.LEVELS`):

    none           the score and each question's points
    verdict        + correct / wrong / not answered, why an answer could not be read, the question's first hint
    misconception  + the misconception a wrong answer matches, a code answer's public cases
    ratio          + how far a number is off (direction and size): the default for the course's questions

Every report says how the kernels were sandboxed.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..errors import InvalidValue
from . import deadline as deadlines
from . import files, ids, results, score

__all__ = ["main", "feedback_page", "read_results"]


def read_results(out: Path, assignment: str | None, signing_key: bytes | None = None) -> dict[str, dict]:
    """student -> result, for the results of ``assignment`` that pass their signature check."""
    return results.read_all(Path(out), signing_key, assignment)[0]


def with_lateness(result: dict) -> dict:
    """The result with its release's late policy applied: ``late`` (when, from where, days, penalty) and the score
    after the penalty (``score_on_time`` keeps the one before). Results of a release with no due date pass as
    they are."""
    policy = deadlines.Policy.from_manifest(result) if isinstance(result.get("deadline"), dict) else None
    if policy is None or result.get("status") not in ("graded",):
        return result
    row = dict(result)
    try:
        submitted = deadlines.parse_time(str(result.get("submitted_at")))
    except InvalidValue:
        row["late"] = {"submitted_at": None, "source": result.get("time_source", "no time found"), "days_late": 0,
                       "penalty_percent": 0.0, "accepted": True}
        row["notes"] = [*row.get("notes", []), "no hand-in time was found: scored as on time"]
        return row
    lateness = policy.judge(submitted, str(result.get("time_source", "")))
    row["late"] = lateness.to_dict()
    row["score_on_time"] = row["score"]
    row["score"] = round(row["score"] * (1 - lateness.penalty_percent / 100), 6)
    if lateness.days_late:
        row["notes"] = [*row.get("notes", []), lateness.describe()]
    return row


def _percent(score_: float, maximum: float) -> float:
    return round(100 * score_ / maximum, 1) if maximum else 0.0


def _sandbox(row: dict) -> str:
    box = (row.get("execution") or {}).get("sandbox") or {}
    return str(box.get("description") or box.get("kind") or "")


def _gradebook(rows: list[dict], question_ids: list[str], lessons: list[str], people: dict | None = None) -> str:
    """One row per student: the roster's name, scores, the hand-in time and lateness (for a release with a due
    date), flags, notes and the sandbox's kind (results.json describes it in full)."""
    lesson_columns = [f"lesson {lesson}" for lesson in lessons] if len(lessons) > 1 else []
    names = {s: str(p.get("name", "")) for s, p in (people or {}).items() if isinstance(p, dict)}
    late_columns = ["submitted", "time source", "days late", "late penalty %"] if any("late" in r for r in rows) else []
    table = [["student", *(["name"] if names else []), "status", "score", "max_score", "percent", *question_ids,
              *lesson_columns, *late_columns, "flags", "notes", "sandbox"]]
    for row in rows:
        try:
            points = {q["id"]: q["points"] for q in row.get("questions", [])}
            by_lesson = row.get("lessons", {})
            late = row.get("late") or {}
            table.append([row["student"], *([names.get(row["student"], "")] if names else []), row["status"],
                          f"{row['score']:g}", f"{row['max_score']:g}", f"{_percent(row['score'], row['max_score']):g}",
                          *(f"{points[q]:g}" if q in points else "" for q in question_ids),
                          *(f"{by_lesson.get(lesson, {}).get('score', 0):g}" for lesson in lessons if lesson_columns),
                          *([str(late.get("submitted_at") or ""), str(late.get("source") or ""),
                             str(late.get("days_late", "")), f"{late['penalty_percent']:g}" if late else ""]
                            if late_columns else []),
                          "; ".join(map(str, row.get("flags", [])))[:4000], "; ".join(map(str, row.get("notes", [])))[:2000],
                          _sandbox_kind(row)])
        except Exception as error:  # noqa: BLE001 - one odd result never costs the others their rows
            table.append([row.get("student", "?"), *([""] if names else []), "error", "", "", "",
                          *([""] * len(question_ids)), *([""] * len(lesson_columns)), *([""] * len(late_columns)),
                          f"its row could not be written ({type(error).__name__})", "", ""])
    return files.csv_text(table)


def _sandbox_kind(row: dict) -> str:
    box = (row.get("execution") or {}).get("sandbox") or {}
    return str(box.get("kind") or "")


_STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:.4rem;vertical-align:top;text-align:left}
.correct{color:#176c2f}.wrong,.unreadable,.wrong-assignment,.error{color:#a11}.partial{color:#8a5a00}
.muted{color:#666}code{background:#f4f4f4;padding:0 .2rem}"""

_GENERIC = {"wrong": "not the expected answer", "partial": "some cases fail", "not answered": "not answered"}


def advice_lines(q: dict, level: str) -> list[str]:
    """What feedback at ``level`` says about one graded answer, as lines of plain text (a page, Gradescope)."""
    rank = score.LEVELS.index
    if level == "none":
        return []
    verdict = q.get("verdict", "")
    reason_level = q.get("reason_level") or ("misconception" if q.get("misconception") else "ratio")
    if q.get("reason") and rank(level) >= rank(reason_level if reason_level in score.LEVELS else "ratio"):
        lines = [q["reason"]]
    else:
        lines = [_GENERIC.get(verdict, "")]
        if q.get("kind") == "code" and q.get("cases"):
            passed = sum(bool(c.get("passed")) for c in q["cases"])
            lines = [f"{passed} of {len(q['cases'])} cases passed"]
    if q.get("note"):
        lines.append(q["note"])
    if verdict != "correct" and q.get("hint"):
        lines.append(f"Hint: {q['hint']}")
    if rank(level) >= rank("misconception"):
        for case in q.get("cases", []):
            mark = "✅ passed" if case.get("passed") else "❌ failed"  # words too: not every font has the emoji
            detail = case.get("detail") if not case.get("hidden") or case.get("detail") in score.HIDDEN_DETAILS else \
                ("" if case.get("passed") else "wrong")
            lines.append(f"{mark} {case.get('case')}{(': ' + str(detail)) if detail else ''}")
    return [line for line in lines if line]


def _advice(q: dict, level: str) -> str:
    """What the page says about one answer at feedback ``level``: :func:`advice_lines`, one per line."""
    return "<br>".join(html.escape(str(line)) for line in advice_lines(q, level))


def feedback_page(result: dict, level: str | None = None) -> str:
    """One student's page: questions, answers, reasons and hints as far as the feedback level allows; never a key,
    never another student, never a flag."""
    e = html.escape
    title = f"Assignment {result['assignment']}" if result.get("assignment") else "Your notebook"
    lines = [f"<!doctype html><meta charset='utf-8'><title>{e(title)}: {e(result['student'])}</title>",
             f"<style>{_STYLE}</style>", f"<h1>{e(title)}: {e(result['student'])}</h1>",
             f"<p><b>Score: {result['score']:g} / {result['max_score']:g}</b> "
             f"({_percent(result['score'], result['max_score']):g}%)"
             + (f" · <span class='{e(result['status'])}'>{e(result['status'])}</span>"
                if result["status"] != "graded" else "") + "</p>"]
    late, said = result.get("late"), deadlines.late_text(result.get("late"))
    if said:
        lines.append(f"<p>{e(said)}"
                     + (f" · score before the penalty: {result['score_on_time']:g}" if late.get("days_late") and
                        "score_on_time" in result else "") + "</p>")
    lessons = result.get("lessons") or {}
    if len(lessons) > 1:
        lines.append("<p>" + " · ".join(f"lesson {e(k)}: {v['score']:g} / {v['max_score']:g}"
                                        for k, v in sorted(lessons.items())) + "</p>")
    lines.append("<table><tr><th>question</th><th>your answer</th><th>points</th><th>verdict</th>"
                 "<th>what to look at</th></tr>")
    for q in result.get("questions", []):
        mine = level or q.get("feedback") or "ratio"
        mine = mine if mine in score.LEVELS else "verdict"
        prompt = f"<br><span class='muted'>{e(q['prompt'])}</span>" if q.get("prompt") else ""
        answer = "" if q.get("answer") is None else f"<code>{e(str(q['answer']))}</code>"
        verdict = q["verdict"] if mine != "none" else ""
        lines.append(f"<tr><td><code>{e(q['id'])}</code>{prompt}</td><td>{answer}</td>"
                     f"<td>{q['points']:g} / {q['max_points']:g}</td>"
                     f"<td class='{e(verdict.replace(' ', '-'))}'>{e(verdict)}</td><td>{_advice(q, mine)}</td></tr>")
    lines.append("</table>")
    if result.get("notes"):
        lines.append("<h2>About your notebook</h2><ul>" + "".join(f"<li>{e(str(n))}</li>" for n in result["notes"])
                     + "</ul>")
    kind = ((result.get("execution") or {}).get("sandbox") or {}).get("kind")
    where = {"bubblewrap": "in a fresh kernel, in a sandbox", "none": "in a fresh kernel"}.get(kind, "in a fresh kernel")
    lines.append(f"<p class='muted'>Graded by running your notebook afresh {where}; the verdicts it printed did not "
                 "count.</p>")
    return "\n".join(lines) + "\n"


def _error_page(student: str, assignment: str | None, why: str) -> str:
    e = html.escape
    return (f"<!doctype html><meta charset='utf-8'><title>{e(str(assignment or ''))}: {e(student)}</title>\n"
            f"<h1>{e(str(assignment or 'Your notebook'))}: {e(student)}</h1>\n<p>{e(why)}</p>\n")


def main(out: str | Path, *, assignment: str | None = None, roster: list[str] | None = None,
         questions: list[dict] | None = None, signing_key: bytes | None = None, sandbox: str | None = None,
         people: dict | None = None, fingerprint: str | None = None, digests: dict[str, str] | None = None) -> dict:
    """Rebuild gradebook.csv, results.json and feedback/ from OUT/results; return a summary.

    ``signing_key``: results must carry its signature (:func:`roofkit.grading.results.key`); ``sandbox``: how
    this run's kernels were sandboxed, in words (each result also records its own).
    """
    out = Path(out)
    found, problems = results.read_all(out, signing_key, assignment)
    for student, result in list(found.items()):  # a signed result of other settings, or of another submission
        why = None
        if fingerprint and result.get("fingerprint") != fingerprint:
            why = "its result was made with other settings than this run's; it is graded again on the next run"
        elif digests and student in digests and result.get("submission_sha256") != digests[student]:
            why = "its result is of another submission than the one handed in; it is graded again on the next run"
        if why:
            problems[student] = why
            del found[student]
    students = sorted(set(found) | set(roster or []) | {s for s in problems if ids.problem(s) is None})
    if questions:
        question_ids = [q["id"] for q in questions]
    else:
        question_ids = list(dict.fromkeys(q["id"] for r in found.values() for q in r.get("questions", [])))
    lessons = sorted({q["lesson"] for r in found.values() for q in r.get("questions", [])}
                     | {q["lesson"] for q in questions or []})
    maximum = sum(q["points"] for q in questions) if questions else 0.0
    rows = []
    for student in students:
        if student in found:
            rows.append(with_lateness(found[student]))
        elif student in problems:
            rows.append({"student": student, "status": "error", "score": 0.0, "max_score": maximum,
                         "questions": [], "flags": [problems[student]],
                         "notes": ["this result could not be trusted; the next grading run grades it again"]})
        else:
            rows.append({"student": student, "status": "missing", "score": 0.0, "max_score": maximum,
                         "questions": [], "flags": [], "notes": ["no submission"]})
    files.write_atomic(out / "gradebook.csv", _gradebook(rows, question_ids, lessons, people))
    sandboxes = sorted({_sandbox(r) for r in rows if _sandbox(r)} | ({sandbox} if sandbox else set()))
    files.write_atomic(out / "results.json", json.dumps(files.clean(
        {"assignment": assignment, "sandbox": sandboxes, "students": rows}), indent=1, default=str))
    for row in rows:
        if row["status"] == "missing":
            continue
        try:
            page = feedback_page(row)
        except Exception:  # noqa: BLE001 - a page that cannot be rendered is replaced, never fatal
            page = _error_page(row.get("student", "?"), assignment, "Your feedback page could not be made; "
                               "ask your instructor.")
        files.write_atomic(out / "feedback" / f"{row['student']}.html", page)
    return {
        "out": str(out), "assignment": assignment, "gradebook": str(out / "gradebook.csv"),
        "results": str(out / "results.json"), "feedback": str(out / "feedback"), "sandbox": sandboxes,
        "problems": [f"{name}: {why}" for name, why in sorted(problems.items())],
        "students": [{"student": r["student"], "status": r["status"], "score": r["score"],
                      **({"late": r["late"]} if r.get("late") else {}),
                      "max_score": r["max_score"], "percent": _percent(r["score"], r["max_score"]),
                      "lessons": r.get("lessons", {}), "flags": r.get("flags", [])} for r in rows],
    }
