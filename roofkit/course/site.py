"""``roofkit site``: the course as static HTML, for reading without Jupyter.

Renders every executed solution notebook, and every lesson's student version
(built from ``lessons/``, never read from ``notebooks/``, where a learner's
autosave could have landed; each question's prompt shown under its ``ask``
cell, as in the solution), with nbconvert's HTML exporter (plots embedded as images), and writes an index with
the lessons in order:

    _site/index.html
    _site/solutions/NN-slug.html     the lesson, worked and executed
    _site/notebooks/NN-slug.html     the student version (questions unanswered)
    _site/download/...               the .ipynb files themselves
    _site/glossary.html              docs/glossary.md, the terms the lessons use
    _site/mathjax/...                MathJax, so formulas render with no network

Interactive widgets cannot run in a static page; their outputs are rendered as
the text each widget leaves behind (the question's prompt stays visible above).

The pages load nothing from outside the site: nbconvert's template would fetch
MathJax, require.js and mermaid from a CDN, so the template here drops
require.js and mermaid (no page uses them) and points MathJax at a copy of the
files that the pinned ``jupyter-server-mathjax`` package ships (MathJax 2.7).
"""

from __future__ import annotations

import copy
import html
import importlib.util
import json
import re
import shutil
from pathlib import Path

from ..errors import InvalidValue
from . import build
from .outputs import static as _static

__all__ = ["build_site"]

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 52rem; margin: 2rem auto;
       padding: 0 1rem; line-height: 1.5; color: #1f2328; }
h1 { margin-bottom: 0.2rem; } .lead { color: #59636e; margin-top: 0; }
ol.lessons { padding-left: 0; list-style: none; counter-reset: none; }
ol.lessons li { display: flex; justify-content: space-between; align-items: baseline; gap: 1rem;
                border-bottom: 1px solid #d1d9e0; padding: 0.6rem 0; }
ol.lessons a.lesson { font-weight: 600; text-decoration: none; color: #0969da; }
ol.lessons .other { font-size: 0.9rem; white-space: nowrap; }
ol.lessons .other a { color: #59636e; margin-left: 0.8rem; }
footer { margin-top: 2rem; color: #59636e; font-size: 0.85rem; }
"""


def _title(nb) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return "untitled"


MATHJAX_DIR = "mathjax"
# MathJax 2's combined TeX input + HTML/MathML output; the package ships only the STIX-Web fonts.
_MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full,Safe"

# nbconvert's lab template, with every script that would leave the site replaced or removed.
_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
MathJax.Hub.Config({
  tex2jax: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
            processEscapes: true, processEnvironments: true},
  "HTML-CSS": {availableFonts: [], imageFont: null, preferredFont: null, webFont: "STIX-Web",
               linebreaks: {automatic: true}},
  SVG: {font: "STIX-Web"},
  displayAlign: "center",
  messageStyle: "none",
  menuSettings: {zoom: "None"},
});
</script>
<script src="{{ resources.mathjax_url }}"></script>
{%- endblock html_head_js_mathjax -%}
"""


def mathjax_source() -> Path:
    """The folder of MathJax's files inside the installed ``jupyter-server-mathjax`` package."""
    spec = importlib.util.find_spec("jupyter_server_mathjax")
    folder = Path(next(iter(spec.submodule_search_locations))) / "static" if spec else None
    if folder is None or not (folder / "MathJax.js").exists():
        raise InvalidValue("MathJax is missing: the site needs the package jupyter-server-mathjax "
                           "(pip install -e . installs it).")
    return folder


def _copy_mathjax(out: Path) -> None:
    # every language but English is left out: the pages are in English and MathJax loads none of them
    ignore = shutil.ignore_patterns("*.md", "*.json")

    def skip(folder, names):
        extra = [n for n in names if Path(folder).name == "localization" and n != "en"]
        return set(ignore(folder, names)) | set(extra)

    shutil.copytree(mathjax_source(), out / MATHJAX_DIR, ignore=skip)


def _render(nb, title: str, up: str = "../") -> str:
    """The notebook as one HTML page; ``up`` leads from the page back to the site's root."""
    import jinja2  # deferred: jinja2 costs ~30 ms at import
    from nbconvert import HTMLExporter  # deferred: nbconvert costs ~1.4 s at import

    exporter = HTMLExporter(template_name="lab", extra_loaders=[jinja2.DictLoader({"roofkit.html.j2": _TEMPLATE})],
                            template_file="roofkit.html.j2",
                            mathjax_url=f"{up}{MATHJAX_DIR}/MathJax.js?config={_MATHJAX_CONFIG}")
    body, _ = exporter.from_notebook_node(_static(nb), resources={"metadata": {"name": title}})
    back = f'<p style="margin:1rem 2rem"><a href="{up}index.html">← all lessons</a> · <a href="{up}glossary.html">glossary</a></p>'
    body = re.sub(r'href="(?:\.\./)?docs/glossary\.md(#[^"]*)?"', lambda m: f'href="{up}glossary.html{m.group(1) or ""}"', body)
    return re.sub(r"(<body[^>]*>)", lambda m: m.group(1) + back, body, count=1)


def _glossary(root: Path, out: Path) -> Path | None:
    """docs/glossary.md as a page of the site, typeset like the lessons."""
    import nbformat  # deferred: nbformat costs ~1.4 s at import

    source = root / "docs" / "glossary.md"
    if not source.exists():
        return None
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(source.read_text(encoding="utf-8"))])
    page = out / "glossary.html"
    page.write_text(_render(nb, "Glossary", up=""), encoding="utf-8")
    return page


def _with_prompts(student, solution):
    """The student version with each question's prompt as the solution shows it under its ``ask(...)`` cell: a
    page cannot run the cell."""
    student = copy.deepcopy(student)
    asked = {c.source: c.outputs for c in solution.cells if c.cell_type == "code" and c.source.startswith("ask(")}
    for cell in student.cells:
        if cell.cell_type == "code" and cell.source in asked:
            cell.outputs = asked[cell.source]
    return student


def build_site(root: str | Path = ".", out: str | Path = "_site", progress: bool = True) -> list[Path]:
    """Write the static site; returns the pages written."""
    import nbformat  # deferred: nbformat costs ~1.4 s at import

    root, out = Path(root), Path(out)
    if not out.is_absolute():
        out = root / out
    solutions = sorted((root / "solutions").glob("[0-9][0-9]-*.ipynb"))
    if not solutions:
        raise InvalidValue(f"no solution notebooks in {root / 'solutions'}; run `roofkit build` first.")
    if out.exists():
        shutil.rmtree(out)
    pages, rows = [], []
    items = solutions
    if progress:
        from tqdm import tqdm  # deferred: tqdm costs ~50 ms at import

        items = tqdm(solutions, desc="rendering lessons", unit="lesson")
    for solution in items:
        nb = nbformat.read(solution, as_version=4)  # solutions/ is written by `roofkit build` alone
        title = _title(nb)
        links = {}
        lesson = root / build.LESSONS_DIR / f"{solution.stem}.md"
        student = build.make_notebook(lesson, "student") if lesson.exists() else None
        for folder, notebook in (("solutions", nb), ("notebooks", student)):
            if notebook is None:
                continue
            page = out / folder / f"{solution.stem}.html"
            page.parent.mkdir(parents=True, exist_ok=True)
            shown = notebook if folder == "solutions" else _with_prompts(notebook, nb)
            page.write_text(_render(shown, title), encoding="utf-8")
            download = out / "download" / folder / solution.name
            download.parent.mkdir(parents=True, exist_ok=True)
            download.write_text(build.notebook_text(notebook), encoding="utf-8")
            pages.append(page)
            links[folder] = (page.relative_to(out).as_posix(), download.relative_to(out).as_posix())
        rows.append((title, links))
    _copy_mathjax(out)
    glossary = _glossary(root, out)
    if glossary is not None:
        pages.append(glossary)
    index = out / "index.html"
    index.write_text(_index(rows, glossary is not None), encoding="utf-8")
    (out / "lessons.json").write_text(json.dumps(
        [{"title": t, "page": l["solutions"][0]} for t, l in rows if "solutions" in l], indent=1), encoding="utf-8")
    return [index, *pages]


def _index(rows, glossary: bool = False) -> str:
    items = []
    for title, links in rows:
        page, notebook = links["solutions"]
        other = [f'<a href="{html.escape(notebook)}">solution .ipynb</a>']
        if "notebooks" in links:
            student_page, student_nb = links["notebooks"]
            other = [f'<a href="{html.escape(student_page)}">student version</a>',
                     f'<a href="{html.escape(student_nb)}">student .ipynb</a>', *other]
        items.append(f'<li><a class="lesson" href="{html.escape(page)}">{html.escape(title)}</a>'
                     f'<span class="other">{"".join(other)}</span></li>')
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>GPU performance modeling, computed</title><style>{_STYLE}</style></head>
<body>
<h1>GPU performance modeling, computed</h1>
<p class="lead">Count FLOPs and bytes, place kernels on a roofline, choose a precision, judge MFU,
cost a training run, decide what to fuse and spread a run over many GPUs. Every number below was computed by <code>roofkit</code>
when this page was built.</p>
<p>Each lesson is shown worked and executed. To answer the questions yourself, run the course:
<code>make lab</code>.</p>
{'<p>New to a word? The <a class="glossary" href="glossary.html">glossary</a> defines every term the lessons use.</p>' if glossary else ''}
<ol class="lessons">
{chr(10).join(items)}
</ol>
<footer>Generated by <code>roofkit site</code> from the notebooks in <code>solutions/</code> and <code>notebooks/</code>.</footer>
</body></html>
"""
