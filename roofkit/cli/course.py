"""roofkit build | roofkit site: lessons -> student and solution notebooks -> a static site."""

from __future__ import annotations

from ._common import emit


def cmd_build(args) -> None:
    from ..course.build import build

    report = build(args.root, check=args.check, only=args.lesson or None, progress=not getattr(args, "json", False))
    data = {"ok": report.ok, "written": report.written, "stale": report.stale, "orphans": report.orphans}
    if args.check:
        lines = ["generated notebooks are up to date"] if report.ok else (
            [f"stale: {p}" for p in report.stale] + [f"no lesson source for: {p}" for p in report.orphans]
            + ["run `roofkit build` to regenerate them"])
    else:
        lines = [f"wrote {p}" for p in report.written]
    emit(args, data, lines)
    if not report.ok:
        raise SystemExit(1)


def cmd_site(args) -> None:
    from ..course.site import build_site

    pages = build_site(args.root, args.out, progress=not getattr(args, "json", False))
    emit(args, {"index": str(pages[0]), "pages": [str(p) for p in pages]},
         [f"wrote {len(pages) - 1} lesson pages; open {pages[0]}"])


def register(sub, common) -> None:
    build = sub.add_parser("build", help="lessons/ -> notebooks/ (student) and solutions/ (executed)", parents=[common])
    build.add_argument("--check", action="store_true", help="write nothing; fail if a generated notebook is stale")
    build.add_argument("--root", default=".", help="the course folder holding lessons/ (default: here)")
    build.add_argument("lesson", nargs="*", help="only these lessons (e.g. 03 or 03-roofline)")
    build.set_defaults(func=cmd_build)

    site = sub.add_parser("site", help="render the course as a static HTML site", parents=[common])
    site.add_argument("--out", default="_site", help="output folder (default _site)")
    site.add_argument("--root", default=".", help="the course folder holding solutions/ and notebooks/")
    site.set_defaults(func=cmd_site)
