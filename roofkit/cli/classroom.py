"""roofkit assign | roofkit grade: a release with per-student numbers, then a gradebook.

    roofkit assign 00 --bank my-questions.py --roster roster.csv --secret-file secret.txt --out release/hw1
    roofkit grade submissions/hw1 --assignment release/hw1 --secret-file secret.txt --out grades/hw1
    roofkit grade submissions/hw1 ... --shard 2/4 --out grades/hw1-2        (one of four machines)
    roofkit grade --merge grades/hw1-1 grades/hw1-2 grades/hw1-3 grades/hw1-4 --secret-file secret.txt --out grades/hw1
"""

from __future__ import annotations

from ..errors import InvalidValue
from ._common import emit, number


def _points(specs: list[str] | None) -> dict[str, float]:
    """--points ID=P (repeatable) -> {ID: P}."""
    out = {}
    for spec in specs or []:
        qid, _, value = spec.partition("=")
        try:
            out[qid.strip()] = float(value)
        except ValueError:
            raise InvalidValue(f"--points expects ID=POINTS such as l00.fma-flops=2; got {spec!r}.") from None
    return out


def cmd_assign(args) -> None:
    from ..grading import assign  # deferred: loaded only when this command runs

    from ..grading import deadline  # deferred: loaded only when this command runs

    if args.due is None and any(v is not None for v in (args.grace, args.late_penalty, args.late_until)):
        raise InvalidValue("--grace, --late-penalty and --late-until go with --due (the release's due time).")
    policy = deadline.Policy.make(args.due, args.grace, args.late_penalty, args.late_until) if args.due else None
    summary = assign.main(args.lesson, questions=args.questions or [], name=args.name, out=args.out,
                          roster=args.roster, secret_file=args.secret_file, points=_points(args.points), root=args.root,
                          bank=args.bank, feedback=args.feedback, keys=args.keys, deadline=policy)
    if args.gradescope:
        from ..grading import gradescope  # deferred: loaded only when this option is given

        summary["gradescope"] = str(gradescope.package(args.out, summary["secret_file"], args.bank))
    lines = [f"release {summary['name']}: {len(summary['questions'])} questions, {summary['points_total']:g} points"]
    lines += [f"  {q['id']:<28} {q['kind']:<9} {q['points']:g} pt   "
              + (f"{summary['variants'][q['id']]} variants" if summary["variants"][q["id"]] else "same numbers for all")
              + ("   (private)" if q.get("private") else "")
              for q in summary["questions"]]
    if summary["students"]:
        lines.append(f"{len(summary['students'])} student notebooks in {summary['out']}/students/ID/{summary['name']}.ipynb"
                     f" (secret: {summary['secret_file']}; keep it, the grader needs it)")
    else:
        lines.append(f"hand out {summary['notebooks']['']}")
    if summary["deadline"]:
        lines.append(f"{summary['deadline']} (grade with --times FILE.csv for the LMS's hand-in times; "
                     "else each file's modification time is used)")
    if summary.get("gradescope"):
        lines.append(f"Gradescope autograder: {summary['gradescope']} (upload it as the assignment's autograder; "
                     "it holds the course secret: share it with no one)")
    if summary["keys"]:
        lines.append(f"keys: {summary['keys']} (each student's key per question; for you alone, never hand it out)")
    lines.append(f"grade with: roofkit grade SUBMISSIONS --assignment {summary['out']} --out grades/{summary['name']}"
                 + (f" --secret-file {summary['secret_file']}" if summary["secret_file"] else ""))
    if any(q.get("private") for q in summary["questions"]):
        lines.append(f"the keys of the private questions stay in {args.bank}: no student file holds them; "
                     "keep the bank where `roofkit grade` can read it")
    emit(args, summary, lines)


def cmd_grade(args) -> None:
    from ..grading import execute, grade, shard  # deferred: loaded only when this command runs

    if args.merge:
        if args.submissions or args.assignment or args.shard or args.bank or args.feedback or args.sandbox \
                or args.times:
            raise InvalidValue("--merge takes only the shards' output folders, --out, --secret-file and --export: "
                               "the shards already hold the grading.")
        summary = shard.merge(args.merge, out=args.out, secret_file=args.secret_file)
        if args.export:
            from ..grading import export  # deferred: loaded only when this command runs

            summary["exports"] = export.main(args.out, args.export, assignment=summary["assignment"],
                                             people=summary.pop("people", None), column=args.lms_column,
                                             rows=summary["students"])
        summary.pop("people", None)
        summary.update(graded=0, skipped=0)
        _print_grades(args, summary, f"merged {len(args.merge)} shards; ")
        return
    if not args.submissions:
        raise InvalidValue("name the submissions to grade (notebooks, or folders of them), or --merge shard outputs.")
    given = {"notebook_s": args.timeout, "cell_s": args.cell_timeout, "sandbox": args.sandbox}
    limits = execute.Limits(**{k: v for k, v in given.items() if v is not None})
    summary = grade.main(args.submissions, out=args.out, release=args.assignment, secret_file=args.secret_file,
                         workers=args.workers, limits=limits, regrade=args.regrade,
                         progress=not getattr(args, "json", False), bank=args.bank,
                         shard=shard.parse(args.shard) if args.shard else None, export=args.export or [],
                         column=args.lms_column, feedback=args.feedback, times=args.times)
    where = f"shard {summary['shard'][0]}/{summary['shard'][1]}: " if summary.get("shard") else ""
    _print_grades(args, summary, where)


def _print_grades(args, summary: dict, where: str) -> None:
    lines = [f"sandbox: {line}" for line in summary.get("sandbox") or []]
    lines += [f"{line}" for line in summary.get("skipped_files", [])]
    lines += [f"not trusted: {line}" for line in summary.get("problems", [])]
    lines += [f"cleaned up after a killed run: {line}" for line in summary.get("cleaned", [])]
    for row in summary["students"]:
        status = "" if row["status"] == "graded" else f"  [{row['status']}]"
        flags = f"  ({len(row['flags'])} flag{'s' * (len(row['flags']) > 1)})" if row["flags"] else ""
        late = row.get("late") or {}
        late = (f"  late {late['days_late']} d" + ("" if late.get("accepted", True) else ", not accepted")
                if late.get("days_late") else "")
        lines.append(f"{row['student']:<16} {row['score']:g} / {row['max_score']:g}  ({row['percent']:g}%)"
                     f"{status}{late}{flags}")
        if not summary["assignment"] or len(row["lessons"]) > 1:
            lines += [f"  lesson {k}: {v['score']:g} / {v['max_score']:g}" for k, v in sorted(row["lessons"].items())]
    lines.append(f"{where}graded {summary['graded']}, already graded {summary['skipped']}; "
                 f"gradebook {summary['gradebook']}, feedback pages in {summary['feedback']}/")
    lines += [f"{kind} import file: {path}" for kind, path in summary.get("exports", {}).items()]
    emit(args, summary, lines)


def register(sub, common) -> None:
    assign = sub.add_parser("assign", help="lessons -> a release: one notebook per student, with their own numbers",
                            parents=[common])
    assign.add_argument("lesson", nargs="*", help="lessons to hand out (e.g. 00 01, or 03-roofline)")
    assign.add_argument("--questions", nargs="+", metavar="ID", help="an exercise set: these questions ('l01.ex-*')")
    assign.add_argument("--name", help="the assignment's name (default: from the lessons)")
    assign.add_argument("--out", default="release", help="folder for the release (default: release)")
    assign.add_argument("--roster", help="CSV of student ids (column 'id'): one notebook per student, each with a variant")
    assign.add_argument("--secret-file", help="the course secret (created if missing; needed again to grade)")
    assign.add_argument("--points", action="append", metavar="ID=P", help="points of a question (repeatable)")
    assign.add_argument("--root", default=".", help="the course folder holding lessons/ (default: here)")
    assign.add_argument("--bank", metavar="PATH", help="your own questions: a Python file or a folder of them, "
                        "written with roofkit.quiz.Question (their keys never reach a student)")
    assign.add_argument("--feedback", choices=("none", "verdict", "misconception", "ratio"),
                        help="how much a feedback page says about each graded answer (default: ratio for the course's "
                        "questions, misconception for your own, whose keys a ratio would give away)")
    assign.add_argument("--keys", action="store_true", help="also write keys.csv into the release: each student's "
                        "numbers and key per question, for you alone (never hand it out)")
    assign.add_argument("--gradescope", action="store_true", help="also write gradescope.zip into the release: "
                        "a Gradescope autograder that grades each hand-in with roofkit (docs/instructors.md)")
    assign.add_argument("--due", metavar="TIME", help="the due time, ISO 8601 with its time zone "
                        "(2026-12-10T23:59+01:00); late hand-ins are marked and scored by the options below")
    assign.add_argument("--grace", type=number("grace"), metavar="MINUTES", help="minutes after --due that still "
                        "count as on time (default 0)")
    assign.add_argument("--late-penalty", type=number("late-penalty"), metavar="PERCENT",
                        help="percent of the score taken per day late, each day started counting whole (default 0)")
    assign.add_argument("--late-until", type=int, metavar="DAYS", help="the last day late a hand-in is taken; after "
                        "it, it scores 0 (0: no late hand-ins; default: taken however late)")
    assign.set_defaults(func=cmd_assign)

    grade = sub.add_parser("grade", help="run and grade submissions: gradebook, results and feedback pages",
                           parents=[common])
    grade.add_argument("submissions", nargs="*", help="notebooks, or folders of them (one per student)")
    grade.add_argument("--out", required=True, help="folder for gradebook.csv, results.json, feedback/ and results/")
    grade.add_argument("--assignment", help="the release folder made by `roofkit assign` (without it: grade a "
                       "notebook of the course with the lessons' own numbers)")
    grade.add_argument("--secret-file", help="the course secret the release was made with (also for --merge: "
                       "results are signed with it)")
    grade.add_argument("--workers", type=int, help="notebooks graded at once (default: the number of cores)")
    grade.add_argument("--timeout", type=number("timeout"), help="seconds per notebook (default 300)")
    grade.add_argument("--cell-timeout", type=number("cell-timeout"), help="seconds per cell (default 60)")
    grade.add_argument("--regrade", action="store_true", help="grade again even what is already graded")
    grade.add_argument("--bank", metavar="PATH", help="the private questions the release was made with "
                       "(default: where `roofkit assign --bank` read them)")
    grade.add_argument("--shard", metavar="K/N", help="grade only shard K of N (a stable split by student id), "
                       "e.g. one task of a Slurm array; then --merge the N outputs")
    grade.add_argument("--merge", nargs="+", metavar="OUT", help="build one gradebook in --out from the output "
                       "folders of all N shards (refuses shards of other releases or limits)")
    grade.add_argument("--export", action="append", choices=("canvas", "moodle"),
                       help="also write OUT/canvas.csv (Canvas gradebook import) or OUT/moodle.csv (Moodle grade "
                       "import); repeatable")
    grade.add_argument("--sandbox", choices=("auto", "bubblewrap", "none"),
                       help="how each kernel is fenced: bubblewrap (the default, required with --assignment), or none: "
                       "Landlock and resource limits only, for a machine without bubblewrap (docs/instructors.md §6)")
    grade.add_argument("--feedback", choices=("none", "verdict", "misconception", "ratio"),
                       help="how much the feedback pages say (default: what `roofkit assign --feedback` chose)")
    grade.add_argument("--times", metavar="FILE.csv", help="hand-in times for a release with --due: a CSV with an "
                       "id column (id, student, username) and a time column (submitted, submitted_at, timestamp), "
                       "e.g. the LMS's export; default: each file's modification time")
    grade.add_argument("--lms-column", metavar="TITLE", help="the grade column's title in the export (default: the "
                       "assignment's name; for Canvas, 'Title (id)' updates that assignment)")
    grade.set_defaults(func=cmd_grade)
