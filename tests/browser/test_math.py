"""Formulas read like math: typeset by MathJax in JupyterLab and on the static site, with nothing fetched from outside.

JupyterLab 4 ships its own MathJax 3 (``mjx-container`` elements). The static
site ships MathJax 2 from the pinned jupyter-server-mathjax package in
``_site/mathjax/`` (``.MathJax`` / ``.MathJax_Display`` elements); a page that
tried to load MathJax from a CDN would show raw ``$T_\\text{math}$`` here,
because the browser below may not leave the machine.
"""

from __future__ import annotations

import re
import time

import pytest

expect = pytest.importorskip("playwright.sync_api").expect

LESSON = "03-the-roofline.ipynb"
# MathJax 2 is done when its queue is empty and at least one formula was typeset
_SITE_TYPESET = """() => window.MathJax && MathJax.Hub && MathJax.Hub.queue && MathJax.Hub.queue.pending === 0
                   && document.querySelectorAll('.MathJax, .MathJax_Display').length > 0"""


def _offline(page, requests: list[str]):
    """Record every request; refuse (and so expose) anything that is not a local file or inline data."""
    def route(r):
        requests.append(r.request.url)
        if r.request.url.startswith(("file://", "data:")):
            r.continue_()
        else:
            r.abort()
    page.route("**/*", route)


def notebook(page):
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")


def test_math_renders_in_jupyterlab_markdown_and_outputs(lab, page, shots):
    try:
        page.goto(lab.url(f"lab/tree/solutions/{LESSON}"))
        panel = notebook(page)
        panel.locator(".jp-MarkdownCell").first.wait_for()
        # the prose formulas ($T_\text{math} = F / P$ ...) of a markdown cell
        markdown_math = panel.locator(".jp-MarkdownCell .jp-RenderedMarkdown mjx-container")
        expect(markdown_math.first).to_be_attached(timeout=60_000)
        assert markdown_math.count() >= 5
        # a sympy result shown with roofkit.show.math: a text/latex output, typeset
        output_math = panel.locator(".jp-OutputArea-output.jp-RenderedLatex mjx-container")
        expect(output_math.first).to_be_attached(timeout=60_000)
        rendered = panel.locator(".jp-RenderedMarkdown").all_inner_texts()
        assert not any("T_\\text{math}" in text for text in rendered), "a formula was left as raw TeX"
        markdown_math.first.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "math-jupyterlab.png"))
    finally:
        lab.shutdown_kernels()


def test_make_lab_opens_the_first_notebook_with_no_news_toast(lab, page, shots):
    lab.forget_workspaces()  # a first start: no tabs saved by the tests before this one
    page.goto(f"{lab.base}/?token={lab.token}")  # where `make lab` sends the browser
    expect(notebook(page).locator(".jp-CodeCell").first).to_be_visible(timeout=60_000)
    expect(page).to_have_title(re.compile(r"^00-start-her"))  # JupyterLab shortens long names
    assert "notebooks/00-start-here.ipynb" in page.url
    time.sleep(5)  # JupyterLab asks about news a moment after it starts
    toasts = page.locator(".Toastify__toast, .jp-toast-message")
    texts = toasts.all_inner_texts()
    page.screenshot(path=str(shots / "lab-start.png"))
    assert not any("news" in text.lower() for text in texts), texts
    lab.shutdown_kernels()


def test_math_renders_on_the_static_site_offline(built_site, browser, shots):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page, requests = context.new_page(), []
    _offline(page, requests)
    try:
        for name in (f"solutions/{LESSON.replace('.ipynb', '.html')}", "glossary.html"):
            requests.clear()
            page.goto((built_site / name).as_uri())
            page.wait_for_function(_SITE_TYPESET, timeout=60_000)
            assert page.locator(".MathJax_Error, merror").count() == 0
            outside = [url for url in requests if not url.startswith(("file://", "data:"))]
            assert not outside, f"{name} asked for {outside}"
            assert any("/mathjax/" in url for url in requests), "MathJax did not come from the site's own copy"
        page.goto((built_site / "solutions" / LESSON.replace(".ipynb", ".html")).as_uri())
        page.wait_for_function(_SITE_TYPESET, timeout=60_000)
        assert page.locator(".jp-RenderedMarkdown .MathJax, .jp-RenderedMarkdown .MathJax_Display").count() >= 5
        assert page.locator(".jp-RenderedLatex .MathJax_Display, .jp-RenderedLatex .MathJax").count() >= 1
        page.locator(".jp-RenderedLatex").first.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "math-site.png"))
    finally:
        context.close()


def test_the_site_index_links_the_glossary(built_site, page):
    page.goto((built_site / "index.html").as_uri())
    page.locator("a.glossary").click()
    expect(page.locator("h1").first).to_contain_text("Glossary")
    assert page.locator("h3").count() >= 40
