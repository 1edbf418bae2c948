"""`make site`: student pages come from the lessons with their questions' prompts, never from a learner's autosave."""

import shutil
from pathlib import Path

import nbformat
import pytest

from roofkit.course import quiz
from roofkit.course.site import build_site

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow  # renders two lessons with nbconvert


def test_student_pages_show_each_prompt_and_ignore_an_autosave(tmp_path):
    lessons = ["00-start-here", "03-the-roofline"]
    for folder, suffix in (("lessons", ".md"), ("solutions", ".ipynb"), ("notebooks", ".ipynb")):
        (tmp_path / folder).mkdir()
        for name in lessons:
            shutil.copyfile(ROOT / folder / f"{name}{suffix}", tmp_path / folder / f"{name}{suffix}")
    autosaved = tmp_path / "notebooks" / "03-the-roofline.ipynb"  # a learner ran and saved the course's copy
    autosaved.write_text(autosaved.read_text(encoding="utf-8").replace("# your answer here", "MY-AUTOSAVED-ANSWER"),
                         encoding="utf-8")
    build_site(tmp_path, tmp_path / "_site", progress=False)
    page = (tmp_path / "_site" / "notebooks" / "03-the-roofline.html").read_text(encoding="utf-8")
    assert "MY-AUTOSAVED-ANSWER" not in page
    download = (tmp_path / "_site" / "download" / "notebooks" / "03-the-roofline.ipynb").read_text(encoding="utf-8")
    assert download == (ROOT / "notebooks" / "03-the-roofline.ipynb").read_text(encoding="utf-8")
    cells = "".join(c.source for c in nbformat.read(autosaved, as_version=4).cells)
    asked = [q for q in quiz.questions("03") if f'ask("{q.id}")' in cells]
    assert asked
    for question in asked:  # each prompt itself under its ask(...) cell, not the bare call alone
        assert f"Question <code>{question.id}</code>" in page, question.id
