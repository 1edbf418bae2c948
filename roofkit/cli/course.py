"""roofkit build | roofkit site | roofkit workspace: lessons -> student and solution notebooks -> a static site;
the learner's own copy of the student notebooks."""

from __future__ import annotations

from ._common import emit


def cmd_build(args) -> None:
    from ..course.build import build  # deferred: loaded only when this command runs

    report = build(args.root, check=args.check, only=args.lesson or None, progress=not getattr(args, "json", False),
                   outputs_too=args.check and not args.sources_only, remeasure=args.remeasure)
    data = {"ok": report.ok, "written": report.written, "stale": report.stale, "orphans": report.orphans,
            "reasons": report.reasons}
    if args.check:
        stale = [line for p in report.stale for line in
                 [f"stale: {p}"] + [f"  {reason}" for reason in report.reasons.get(p, [])]]
        lines = ["generated notebooks are up to date"] if report.ok else (
            stale + [f"no lesson source for: {p}" for p in report.orphans]
            + ["run `roofkit build` to regenerate them"])
    else:
        lines = [f"wrote {p}" for p in report.written] or ["nothing changed: every notebook is as its lesson builds it"]
    emit(args, data, lines)
    if not report.ok:
        raise SystemExit(1)


def cmd_site(args) -> None:
    from ..course.site import build_site  # deferred: loaded only when this command runs

    pages = build_site(args.root, args.out, progress=not getattr(args, "json", False))
    emit(args, {"index": str(pages[0]), "pages": [str(p) for p in pages]},
         [f"wrote {len(pages) - 1} lesson pages; open {pages[0]}"])


def cmd_workspace(args) -> None:
    from ..course.workspace import prepare  # deferred: loaded only when this command runs

    prepared = prepare(args.root, args.folder)
    emit(args, prepared.to_dict(), prepared.lines())


def register(sub, common) -> None:
    build = sub.add_parser("build", help="lessons/ -> notebooks/ (student) and solutions/ (executed)", parents=[common])
    build.add_argument("--check", action="store_true",
                       help="write nothing; fail if a generated notebook is stale: its cells, or the outputs a fresh "
                            "run of the solution would store (text and figures)")
    build.add_argument("--sources-only", dest="sources_only", action="store_true",
                       help="with --check: compare cells and sources only, without running the solutions (seconds)")
    build.add_argument("--remeasure", action="store_true",
                       help="store fresh outputs of the cells that measure this machine (# NBVAL_IGNORE_OUTPUT), "
                            "which a build otherwise keeps")
    build.add_argument("--root", default=".", help="the course folder holding lessons/ (default: here)")
    build.add_argument("lesson", nargs="*", help="only these lessons (e.g. 03 or 03-roofline)")
    build.set_defaults(func=cmd_build)

    site = sub.add_parser("site", help="render the course as a static HTML site", parents=[common])
    site.add_argument("--out", default="_site", help="output folder (default _site)")
    site.add_argument("--root", default=".", help="the course folder holding solutions/ and notebooks/")
    site.set_defaults(func=cmd_site)

    workspace = sub.add_parser("workspace", help="your own copy of the lessons in my-notebooks/ (git ignores it; "
                               "`make lab` opens it): copies the lessons you have no copy of, keeps yours",
                               parents=[common])
    workspace.add_argument("--root", default=".", help="the course folder holding notebooks/ (default: here)")
    workspace.add_argument("--folder", default="my-notebooks", help="where your copies live (default my-notebooks)")
    workspace.set_defaults(func=cmd_workspace)
