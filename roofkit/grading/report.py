"""The gradebook and the feedback pages, rebuilt from the per-student result files.

    OUT/results/STUDENT.json    one per submission, written by the grader (the source of truth)
    OUT/gradebook.csv           one row per student: status, score, points per question, flags
    OUT/results.json            every result in one file, for scripts
    OUT/feedback/STUDENT.html   what the student may see: each question, their answer, what was wrong, a hint

Everything here is derived from ``results/``: rebuilding after a killed run,
or after regrading one student, always gives one row per student. A roster
student without a submission gets a row with status ``missing``. Flags (a
notebook run with another student's numbers, an answer that is the key of
another student's numbers) name other students, so they appear in the
gradebook and ``results.json`` only, never on a feedback page; nor does any
key.
"""

from __future__ import annotations

import csv
import html
import io
import json
from pathlib import Path

__all__ = ["main", "feedback_page", "read_results"]


def read_results(out: Path, assignment: str | None) -> dict[str, dict]:
    results = {}
    for path in sorted((out / "results").glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("roofkit_result") == 1 and data.get("assignment") == assignment:
            results[data["student"]] = data
    return results


def _percent(score: float, maximum: float) -> float:
    return round(100 * score / maximum, 1) if maximum else 0.0


def _gradebook(rows: list[dict], question_ids: list[str], lessons: list[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    lesson_columns = [f"lesson {lesson}" for lesson in lessons] if len(lessons) > 1 else []
    writer.writerow(["student", "status", "score", "max_score", "percent", *question_ids, *lesson_columns,
                     "flags", "notes"])
    for row in rows:
        points = {q["id"]: q["points"] for q in row.get("questions", [])}
        by_lesson = row.get("lessons", {})
        writer.writerow([row["student"], row["status"], f"{row['score']:g}", f"{row['max_score']:g}",
                         f"{_percent(row['score'], row['max_score']):g}",
                         *(f"{points[q]:g}" if q in points else "" for q in question_ids),
                         *(f"{by_lesson.get(lesson, {}).get('score', 0):g}" for lesson in lessons if lesson_columns),
                         "; ".join(row.get("flags", [])), "; ".join(row.get("notes", []))[:2000]])
    return buffer.getvalue()


_STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ccc;padding:.4rem;vertical-align:top;text-align:left}
.correct{color:#176c2f}.wrong,.unreadable,.wrong-assignment,.error{color:#a11}.partial{color:#8a5a00}
.muted{color:#666}code{background:#f4f4f4;padding:0 .2rem}"""


def feedback_page(result: dict) -> str:
    """One student's feedback page: questions, answers, reasons and hints; never a key, never another student."""
    e = html.escape
    title = f"Assignment {result['assignment']}" if result.get("assignment") else "Your notebook"
    lines = [f"<!doctype html><meta charset='utf-8'><title>{e(title)}: {e(result['student'])}</title>",
             f"<style>{_STYLE}</style>", f"<h1>{e(title)}: {e(result['student'])}</h1>",
             f"<p><b>Score: {result['score']:g} / {result['max_score']:g}</b> "
             f"({_percent(result['score'], result['max_score']):g}%)"
             + (f" · <span class='{e(result['status'])}'>{e(result['status'])}</span>"
                if result["status"] != "graded" else "") + "</p>"]
    lessons = result.get("lessons") or {}
    if len(lessons) > 1:
        lines.append("<p>" + " · ".join(f"lesson {e(k)}: {v['score']:g} / {v['max_score']:g}"
                                        for k, v in sorted(lessons.items())) + "</p>")
    lines.append("<table><tr><th>question</th><th>your answer</th><th>points</th><th>verdict</th>"
                 "<th>what to look at</th></tr>")
    for q in result.get("questions", []):
        advice = e(q.get("reason") or "")
        if q.get("note"):
            advice += f"<br><span class='muted'>{e(q['note'])}</span>"
        if q["verdict"] != "correct" and q.get("hint"):
            advice += f"<br><i>Hint:</i> {e(q['hint'])}"
        for case in q.get("cases", []):
            mark = "✅" if case["passed"] else "❌"
            advice += f"<br>{mark} {e(case['case'])}{(': ' + e(case['detail'])) if case['detail'] else ''}"
        prompt = f"<br><span class='muted'>{e(q['prompt'])}</span>" if q.get("prompt") else ""
        answer = "" if q.get("answer") is None else f"<code>{e(str(q['answer']))}</code>"
        lines.append(f"<tr><td><code>{e(q['id'])}</code>{prompt}</td><td>{answer}</td>"
                     f"<td>{q['points']:g} / {q['max_points']:g}</td>"
                     f"<td class='{e(q['verdict'].replace(' ', '-'))}'>{e(q['verdict'])}</td><td>{advice}</td></tr>")
    lines.append("</table>")
    if result.get("notes"):
        lines.append("<h2>About your notebook</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in result["notes"]) + "</ul>")
    lines.append("<p class='muted'>Graded by running your notebook afresh; the verdicts it printed did not count.</p>")
    return "\n".join(lines) + "\n"


def main(out: str | Path, *, assignment: str | None = None, roster: list[str] | None = None,
         questions: list[dict] | None = None) -> dict:
    """Rebuild gradebook.csv, results.json and feedback/ from OUT/results; return a summary."""
    from .grade import write_atomic

    out = Path(out)
    results = read_results(out, assignment)
    students = sorted(set(results) | set(roster or []))
    if questions:
        question_ids = [q["id"] for q in questions]
    else:
        question_ids = list(dict.fromkeys(q["id"] for r in results.values() for q in r.get("questions", [])))
    lessons = sorted({q["lesson"] for r in results.values() for q in r.get("questions", [])}
                     | {q["lesson"] for q in questions or []})
    maximum = sum(q["points"] for q in questions) if questions else 0.0
    rows = []
    for student in students:
        if student in results:
            rows.append(results[student])
        else:
            rows.append({"student": student, "status": "missing", "score": 0.0, "max_score": maximum,
                         "questions": [], "flags": [], "notes": ["no submission"]})
    write_atomic(out / "gradebook.csv", _gradebook(rows, question_ids, lessons))
    write_atomic(out / "results.json", json.dumps({"assignment": assignment, "students": rows}, indent=1, default=str))
    for row in rows:
        if row["status"] != "missing":
            write_atomic(out / "feedback" / f"{row['student']}.html", feedback_page(row))
    return {
        "out": str(out), "assignment": assignment, "gradebook": str(out / "gradebook.csv"),
        "results": str(out / "results.json"), "feedback": str(out / "feedback"),
        "students": [{"student": r["student"], "status": r["status"], "score": r["score"],
                      "max_score": r["max_score"], "percent": _percent(r["score"], r["max_score"]),
                      "lessons": r.get("lessons", {}), "flags": r.get("flags", [])} for r in rows],
    }
