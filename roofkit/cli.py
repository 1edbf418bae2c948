"""The ``roofkit`` command: a thin layer over the Python API.

Every command prints a readable answer, or one JSON object with ``--json``.
A user error prints one line naming the bad value and the valid choices and
exits with status 2; there is never a traceback for a mistake in the input.

    roofkit hw list
    roofkit hw show h100 --json
    roofkit cost gemm --m 4096 --n 4096 --k 4096 --dtype bf16 --hw h100
    roofkit cost elementwise --n 1e8 --flops-per-element 8 --reads 1 --writes 1 --dtype fp16 --hw h100
    roofkit train --params 70B --tokens 15T --hw h100 --dtype bf16 --mfu 0.4 --gpus 8192 --usd-per-gpu-hour 2
    roofkit mfu --params 70B --tokens-per-s 3000 --gpus 1 --hw h100 --dtype bf16
    roofkit format bfloat16
    roofkit measure --quick --save my-machine.json
    roofkit assign 00 --name hw1 --roster roster.csv --secret-file course-secret.txt --out release/hw1
    roofkit grade submissions/hw1 --assignment release/hw1 --secret-file course-secret.txt --out grades/hw1
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from .errors import RoofkitError

EXIT_USAGE = 2

_PREFIXES = [(1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]


def human(value: float, unit: str = "") -> str:
    """1.979e15, 'FLOP/s' -> '1.979 PFLOP/s'; small and plain values are printed as they are."""
    if value is None:
        return "-"
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip()
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}".strip()
    if abs(value) < 1e-3 and unit == "s":
        return f"{value * 1e6:.4g} µs"
    if abs(value) < 1 and unit == "s":
        return f"{value * 1e3:.4g} ms"
    return f"{value:.4g} {unit}".strip()


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line and exits 2."""

    def error(self, message):  # noqa: D401 - argparse's hook
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _size(name):
    """An argparse type: '4096', '4e9', '70B' -> a positive number, or our one-line message."""

    def parse(text):
        from .units import size

        try:
            return size(text, name)
        except RoofkitError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return parse


def _number(name):
    """An argparse type: a plain positive number such as 0.4 or 2.5."""

    def parse(text):
        from .units import positive

        try:
            return positive(float(text), name)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a positive number; got {text!r}.") from None

    return parse


def _emit(args, data: dict, lines: list[str]) -> None:
    if args.json:
        print(json.dumps(data, indent=2, sort_keys=False, default=_jsonable))
    else:
        print("\n".join(lines))


def _jsonable(value):
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def _table(rows: list[tuple[str, str]]) -> list[str]:
    width = max(len(k) for k, _ in rows)
    return [f"{k:<{width}}  {v}" for k, v in rows]


# --- commands -----------------------------------------------------------------


def cmd_hw_list(args) -> None:
    from . import hardware

    accs = hardware.catalog()
    data = {"accelerators": [{"name": a.key, "full_name": a.name, "aliases": list(a.aliases)} for a in accs]}
    lines = _table([(a.key, f"{a.name}  (aliases: {', '.join(a.aliases) or '-'})") for a in accs])
    _emit(args, data, lines)


def cmd_hw_show(args) -> None:
    from . import hardware

    acc = hardware.get(args.name)
    data = acc.to_dict()
    data["name"] = acc.name
    rows = [("name", f"{acc.name} ({acc.key})"), ("bandwidth", human(acc.bandwidth, "B/s"))]
    if acc.memory_bytes:
        rows.append(("memory", human(acc.memory_bytes, "B")))
    if acc.l2_bytes:
        rows.append(("L2 / last-level cache", human(acc.l2_bytes, "B")))
    if acc.compute_units:
        rows.append((f"{acc.compute_unit_name}s", str(acc.compute_units)))
    for precision, peak in acc.peak_flops.items():
        rows.append((f"peak {precision} (dense)", f"{human(peak, 'FLOP/s')}   ridge {acc.ridge(precision):.1f} FLOP/byte"))
    lines = _table(rows) + ["", "sources:"]
    by_source: dict[str, list[str]] = {}
    for figure, source in acc.sources.items():
        if figure != "*":
            by_source.setdefault(source, []).append(figure)
    lines += [f"  {', '.join(figures)}: {source}" for source, figures in by_source.items()]
    lines += ["notes:"] * bool(acc.notes) + [f"  - {note}" for note in acc.notes]
    _emit(args, data, lines)


def _cost_output(args, cost) -> None:
    data = {"flops": float(cost.flops), "bytes": float(cost.bytes), "intensity": float(cost.intensity)}
    rows = [("FLOPs", human(data["flops"], "FLOP")), ("bytes moved", human(data["bytes"], "B")),
            ("intensity", f"{data['intensity']:.4g} FLOP/byte")]
    if args.hw:
        from .roofline import analyze

        placed = analyze(cost, args.hw, args.dtype)
        data.update(
            accelerator=placed.accelerator,
            precision=placed.precision,
            ridge=placed.ridge,
            bound=placed.bound,
            attainable_flops_per_s=placed.attainable_flops_per_s,
            time_s=placed.time_s,
            time_upper_s=placed.time_upper_s,
        )
        rows += [
            ("on", f"{placed.accelerator}, {placed.precision}"),
            ("ridge point", f"{placed.ridge:.4g} FLOP/byte"),
            ("bound", f"{placed.bound}-bound"),
            ("attainable", human(placed.attainable_flops_per_s, "FLOP/s")),
            ("time (roofline)", f"{human(placed.time_s, 's')}  (no overlap: {human(placed.time_upper_s, 's')})"),
        ]
    _emit(args, data, _table(rows))


def cmd_cost_gemm(args) -> None:
    from . import formulas

    _cost_output(args, formulas.gemm(args.m, args.n, args.k, args.dtype))


def cmd_cost_elementwise(args) -> None:
    from . import formulas

    cost = formulas.elementwise(args.n, args.flops_per_element, args.reads, args.writes, args.dtype)
    _cost_output(args, cost)


def cmd_train(args) -> None:
    from . import training

    est = training.estimate(args.params, args.tokens, hw=args.hw, dtype=args.dtype, mfu=args.mfu,
                            gpus=args.gpus, usd_per_gpu_hour=args.usd_per_gpu_hour)
    data = est.to_dict()
    rows = [("training FLOPs (6ND)", f"{data['flops']:.3e}")]
    labels = [("gpu_hours", "GPU-hours", lambda v: f"{v:.3e}"),
              ("wall_clock_hours", "wall clock", lambda v: f"{v:,.0f} h ({data['wall_clock_days']:.1f} days)"),
              ("cost_usd", "cost", lambda v: f"${v:,.0f}")]
    rows += [(label, fmt(data[key])) for key, label, fmt in labels if data.get(key) is not None]
    if not args.hw:
        rows.append(("", "add --hw NAME (and --gpus, --usd-per-gpu-hour) for GPU-hours, time and cost"))
    _emit(args, data, _table(rows))


def cmd_mfu(args) -> None:
    from . import training

    report = training.mfu_report(args.params, args.tokens_per_s, args.gpus, args.hw, args.dtype)
    rows = [("MFU", f"{report['mfu']:.1%}"), ("plausible", "yes" if report["plausible"] else "no")]
    if report.get("warning"):
        rows.append(("warning", report["warning"]))
    _emit(args, report, _table(rows))


def cmd_format(args) -> None:
    from . import precision

    fmt = precision.get(args.name)
    data = fmt.to_dict()
    rows = [(k, f"{v:.6g}" if isinstance(v, float) else str(v)) for k, v in data.items()]
    _emit(args, data, _table(rows))


def cmd_measure(args) -> None:
    from pathlib import Path

    from . import measure
    from .errors import InvalidValue

    if args.save and not Path(args.save).resolve().parent.is_dir():  # fail before a minute of measuring
        raise InvalidValue(f"--save: the folder of {args.save!r} does not exist.")
    profile = measure.run(quick=args.quick, threads=args.threads, progress=not args.json)
    lines = [profile.report()]
    if args.save:
        profile.save(args.save)
        lines.append(f"saved to {args.save}; in Python: roofkit.measure.load_profile({args.save!r})")
    _emit(args, profile.to_dict(), lines)


def cmd_quiz_list(args) -> None:
    from . import quiz

    items = [q.to_dict() for q in quiz.questions(args.lesson)]
    _emit(args, {"questions": items},
          _table([(q["id"], f"lesson {q['lesson']}, {q['kind']}, {q['points']:g} pt") for q in items]) or ["no questions"])


def cmd_quiz_check(args) -> None:
    from . import quiz

    question = quiz.get(args.id)
    answer = args.answer
    if question.kind == "code":
        from .errors import InvalidValue

        raise InvalidValue(f"{args.id} is a code question: check it from Python, check({args.id!r}, your_function).")
    verdict = quiz.judge(question, answer)
    _emit(args, verdict.to_dict(), [str(verdict)])


def cmd_build(args) -> None:
    from .build import build

    report = build(args.root, check=args.check, only=args.lesson or None, progress=not args.json)
    data = {"ok": report.ok, "written": report.written, "stale": report.stale, "orphans": report.orphans}
    if args.check:
        lines = ["generated notebooks are up to date"] if report.ok else (
            [f"stale: {p}" for p in report.stale] + [f"no lesson source for: {p}" for p in report.orphans]
            + ["run `roofkit build` to regenerate them"])
    else:
        lines = [f"wrote {p}" for p in report.written]
    _emit(args, data, lines)
    if not report.ok:
        raise SystemExit(1)


def _points(specs: list[str] | None) -> dict[str, float]:
    """--points ID=P (repeatable) -> {ID: P}."""
    from .errors import InvalidValue

    out = {}
    for spec in specs or []:
        qid, _, value = spec.partition("=")
        try:
            out[qid.strip()] = float(value)
        except ValueError:
            raise InvalidValue(f"--points expects ID=POINTS such as l00.fma-flops=2; got {spec!r}.") from None
    return out


def cmd_assign(args) -> None:
    from .grading import assign

    summary = assign.main(args.lesson, questions=args.questions or [], name=args.name, out=args.out,
                          roster=args.roster, secret_file=args.secret_file, points=_points(args.points), root=args.root)
    lines = [f"release {summary['name']}: {len(summary['questions'])} questions, {summary['points_total']:g} points"]
    lines += [f"  {q['id']:<28} {q['kind']:<9} {q['points']:g} pt   "
              + (f"{summary['variants'][q['id']]} variants" if summary["variants"][q["id"]] else "same numbers for all")
              for q in summary["questions"]]
    if summary["students"]:
        lines.append(f"{len(summary['students'])} student notebooks in {summary['out']}/students/ID/{summary['name']}.ipynb"
                     f" (secret: {summary['secret_file']}; keep it, the grader needs it)")
    else:
        lines.append(f"hand out {summary['notebooks']['']}")
    lines.append(f"grade with: roofkit grade SUBMISSIONS --assignment {summary['out']} --out grades"
                 + (f" --secret-file {summary['secret_file']}" if summary["secret_file"] else ""))
    _emit(args, summary, lines)


def cmd_grade(args) -> None:
    from .grading import execute, grade

    given = {"notebook_s": args.timeout, "cell_s": args.cell_timeout}
    limits = execute.Limits(**{k: v for k, v in given.items() if v is not None})
    summary = grade.main(args.submissions, out=args.out, release=args.assignment, secret_file=args.secret_file,
                         workers=args.workers, limits=limits, regrade=args.regrade, progress=not args.json)
    lines = []
    for row in summary["students"]:
        status = "" if row["status"] == "graded" else f"  [{row['status']}]"
        flags = f"  ({len(row['flags'])} flag{'s' * (len(row['flags']) > 1)})" if row["flags"] else ""
        lines.append(f"{row['student']:<16} {row['score']:g} / {row['max_score']:g}  ({row['percent']:g}%){status}{flags}")
        if not summary["assignment"] or len(row["lessons"]) > 1:
            lines += [f"  lesson {k}: {v['score']:g} / {v['max_score']:g}" for k, v in sorted(row["lessons"].items())]
    lines.append(f"graded {summary['graded']}, already graded {summary['skipped']}; "
                 f"gradebook {summary['gradebook']}, feedback pages in {summary['feedback']}/")
    _emit(args, summary, lines)


def cmd_site(args) -> None:
    from .site import build_site

    pages = build_site(args.root, args.out, progress=not args.json)
    _emit(args, {"index": str(pages[0]), "pages": [str(p) for p in pages]},
          [f"wrote {len(pages) - 1} lesson pages; open {pages[0]}"])


# --- parser ----------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON object instead of text")

    parser = _Parser(prog="roofkit", description="Performance modeling for GPUs: FLOPs, bytes, rooflines, "
                     "precision, MFU and training cost.", parents=[common])
    from . import __version__

    parser.add_argument("--version", action="version", version=f"roofkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    hw = sub.add_parser("hw", help="the accelerator catalog", parents=[common])
    hw_sub = hw.add_subparsers(dest="hw_command", metavar="{list,show}", parser_class=_Parser)
    hw_sub.required = True
    hw_sub.add_parser("list", help="every accelerator and its aliases", parents=[common]).set_defaults(func=cmd_hw_list)
    show = hw_sub.add_parser("show", help="one accelerator's figures, ridge points and sources", parents=[common])
    show.add_argument("name", help="accelerator name or alias, e.g. h100, 'H100 SXM5', mi300x")
    show.set_defaults(func=cmd_hw_show)

    cost = sub.add_parser("cost", help="FLOPs, bytes and intensity of a kernel", parents=[common])
    cost_sub = cost.add_subparsers(dest="cost_command", metavar="{gemm,elementwise}", parser_class=_Parser)
    cost_sub.required = True
    placement = argparse.ArgumentParser(add_help=False)
    placement.add_argument("--dtype", default="bf16", help="precision: fp64 fp32 tf32 fp16 bf16 fp8 int8 fp4 (default bf16)")
    placement.add_argument("--hw", help="place the kernel on this accelerator's roofline")
    gemm = cost_sub.add_parser("gemm", help="C[m,n] = A[m,k] @ B[k,n]", parents=[common, placement])
    for dim in "mnk":
        gemm.add_argument(f"--{dim}", required=True, type=_size(dim), help=f"size {dim.upper()} (4096, 4e9, 70B ...)")
    gemm.set_defaults(func=cmd_cost_gemm)
    elem = cost_sub.add_parser("elementwise", help="an elementwise op over n elements", parents=[common, placement])
    elem.add_argument("--n", required=True, type=_size("n"), help="number of elements")
    elem.add_argument("--flops-per-element", type=_number("flops-per-element"), default=1.0)
    elem.add_argument("--reads", type=_number("reads"), default=1.0, help="tensors read (default 1)")
    elem.add_argument("--writes", type=_number("writes"), default=1.0, help="tensors written (default 1)")
    elem.set_defaults(func=cmd_cost_elementwise)

    train = sub.add_parser("train", help="training compute (6ND), GPU-hours, time and cost", parents=[common])
    train.add_argument("--params", required=True, type=_size("params"), help="parameters N, e.g. 70B")
    train.add_argument("--tokens", required=True, type=_size("tokens"), help="training tokens D, e.g. 15T")
    train.add_argument("--hw", help="accelerator name, e.g. h100")
    train.add_argument("--dtype", default="bf16", help="training precision (default bf16)")
    train.add_argument("--mfu", type=_number("mfu"), default=0.4, help="assumed MFU as a fraction (default 0.4)")
    train.add_argument("--gpus", type=_size("gpus"), help="number of accelerators")
    train.add_argument("--usd-per-gpu-hour", type=_number("usd-per-gpu-hour"), help="price per GPU-hour in USD")
    train.set_defaults(func=cmd_train)

    mfu = sub.add_parser("mfu", help="model FLOPs utilization from a training throughput", parents=[common])
    mfu.add_argument("--params", required=True, type=_size("params"), help="parameters N, e.g. 70B")
    mfu.add_argument("--tokens-per-s", required=True, type=_size("tokens-per-s"), help="tokens/s across all GPUs")
    mfu.add_argument("--gpus", required=True, type=_size("gpus"))
    mfu.add_argument("--hw", required=True, help="accelerator name, e.g. h100")
    mfu.add_argument("--dtype", default="bf16", help="training precision (default bf16)")
    mfu.set_defaults(func=cmd_mfu)

    fmt = sub.add_parser("format", help="a number format's layout, range and epsilon", parents=[common])
    fmt.add_argument("name", help="bfloat16, float16, float8_e4m3fn, e5m2, fp4, int8 ...")
    fmt.set_defaults(func=cmd_format)

    measure = sub.add_parser("measure", help="measure this machine's roofline, kernels and prediction errors",
                             parents=[common])
    measure.add_argument("--quick", action="store_true", help="fewer sizes and runs: seconds instead of a minute")
    measure.add_argument("--save", metavar="PATH", help="write the profile as JSON (load it with measure.load_profile)")
    measure.add_argument("--threads", type=int, help="CPU threads to use (default: all available)")
    measure.set_defaults(func=cmd_measure)
    quiz = sub.add_parser("quiz", help="the course's self-checking questions", parents=[common])
    quiz_sub = quiz.add_subparsers(dest="quiz_command", metavar="{list,check}", parser_class=_Parser)
    quiz_sub.required = True
    qlist = quiz_sub.add_parser("list", help="every question: id, lesson, kind, points", parents=[common])
    qlist.add_argument("--lesson", help="only this lesson's questions, e.g. 03")
    qlist.set_defaults(func=cmd_quiz_list)
    qcheck = quiz_sub.add_parser("check", help="check an answer, e.g. quiz check l02.gemm-4096 1365", parents=[common])
    qcheck.add_argument("id", help="question id (see quiz list)")
    qcheck.add_argument("answer", help="your answer: a number, a number with a unit ('296 FLOP/byte'), an expression or a choice")
    qcheck.set_defaults(func=cmd_quiz_check)

    build = sub.add_parser("build", help="lessons/ -> notebooks/ (student) and solutions/ (executed)", parents=[common])
    build.add_argument("--check", action="store_true", help="write nothing; fail if a generated notebook is stale")
    build.add_argument("--root", default=".", help="the course folder holding lessons/ (default: here)")
    build.add_argument("lesson", nargs="*", help="only these lessons (e.g. 03 or 03-roofline)")
    build.set_defaults(func=cmd_build)

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
    assign.set_defaults(func=cmd_assign)

    grade = sub.add_parser("grade", help="run and grade submissions: gradebook, results and feedback pages",
                           parents=[common])
    grade.add_argument("submissions", nargs="+", help="notebooks, or folders of them (one per student)")
    grade.add_argument("--out", required=True, help="folder for gradebook.csv, results.json, feedback/ and results/")
    grade.add_argument("--assignment", help="the release folder made by `roofkit assign` (without it: grade a "
                       "notebook of the course with the lessons' own numbers)")
    grade.add_argument("--secret-file", help="the course secret the release was made with")
    grade.add_argument("--workers", type=int, help="notebooks graded at once (default: the number of cores)")
    grade.add_argument("--timeout", type=_number("timeout"), help="seconds per notebook (default 300)")
    grade.add_argument("--cell-timeout", type=_number("cell-timeout"), help="seconds per cell (default 60)")
    grade.add_argument("--regrade", action="store_true", help="grade again even what is already graded")
    grade.set_defaults(func=cmd_grade)

    site = sub.add_parser("site", help="render the course as a static HTML site", parents=[common])
    site.add_argument("--out", default="_site", help="output folder (default _site)")
    site.add_argument("--root", default=".", help="the course folder holding solutions/ and notebooks/")
    site.set_defaults(func=cmd_site)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version, or a usage error already printed in one line
        return stop.code if isinstance(stop.code, int) else EXIT_USAGE
    try:
        args.func(args)
    except RoofkitError as error:
        print(f"roofkit: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as stop:  # a command's own failure status (build --check)
        return stop.code if isinstance(stop.code, int) else 1
    except BrokenPipeError:  # `roofkit hw list | head`
        return 0
    except KeyboardInterrupt:
        print("roofkit: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
