"""`make site` renders a static course that reads in a browser: an index in order, lessons with their figures."""

from __future__ import annotations

import json

import pytest

expect = pytest.importorskip("playwright.sync_api").expect


@pytest.fixture(scope="module")
def site(built_site):
    return built_site


def test_index_lists_every_lesson_in_order(site, page, shots):
    page.goto((site / "index.html").as_uri())
    lessons = json.loads((site / "lessons.json").read_text())
    links = page.locator("ol.lessons a.lesson")
    assert links.all_inner_texts() == [lesson["title"] for lesson in lessons]
    numbers = [title[:2] for title in links.all_inner_texts()]
    assert numbers == sorted(numbers) and numbers[0] == "00"
    page.screenshot(path=str(shots / "site-index.png"), full_page=True)


def test_a_lesson_page_has_its_title_and_figures(site, page, shots):
    page.goto((site / "index.html").as_uri())
    link = page.locator("ol.lessons a.lesson", has_text="roofline").first
    title = link.inner_text()
    link.click()
    expect(page.locator("h1").first).to_contain_text(title.split("·")[-1].strip())
    figures = page.locator(".jp-RenderedImage img")
    assert figures.count() >= 1
    assert all(figures.nth(i).evaluate("img => img.naturalWidth > 100") for i in range(figures.count()))
    page.screenshot(path=str(shots / "site-lesson.png"), full_page=False)
    page.locator("a", has_text="all lessons").first.click()
    expect(page.locator("h1").first).to_have_text("GPU performance modeling, computed")
