"""A rebuild changes nothing that did not change, and a change to what a lesson shows is seen.

The solution notebooks are stored with their outputs. Building an unchanged
course must leave them byte for byte (``roofkit build`` keeps a cell's stored
bytes when its fresh outputs compare equal), and whatever moves an output, a
printed number or a figure's pixels, must be caught twice: by ``roofkit build
--check`` and by nbval, whose comparison the repository's conftest.py extends to
figures. These tests run a lesson for real (a few seconds each): they belong to
``make test``, not to ``make check``.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from roofkit.course import build, outputs
from roofkit.course.explore._box import encode_png

from helpers import roofkit_with_data

pytestmark = pytest.mark.slow  # each runs a lesson in a kernel

ROOT = Path(__file__).resolve().parent.parent
LESSON = "03-the-roofline"  # draws the H100's roofline and prints its ridge: both move with the catalog


def _course(tmp_path: Path, lesson: str = LESSON) -> Path:
    """A course folder with one lesson, its two notebooks and the sanitizing patterns."""
    course = tmp_path / "course"
    for folder, suffix in (("lessons", ".md"), ("notebooks", ".ipynb"), ("solutions", ".ipynb")):
        (course / folder).mkdir(parents=True)
        shutil.copy(ROOT / folder / f"{lesson}{suffix}", course / folder)
    shutil.copy(ROOT / build.SANITIZE, course)
    return course


def _cli(*argv, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "roofkit", *argv], capture_output=True, text=True, cwd=cwd,
                          env=env)


def test_an_unchanged_lesson_rebuilds_to_the_same_bytes_and_passes_the_check(tmp_path):
    course = _course(tmp_path)
    before = {p: p.read_bytes() for p in course.rglob("*.ipynb")}
    report = build.build(course, only=["03"], progress=False)
    assert report.written == []
    assert {p: p.read_bytes() for p in course.rglob("*.ipynb")} == before
    checked = _cli("build", "--check", "03", cwd=course)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "up to date" in checked.stdout


def test_a_changed_catalog_figure_makes_the_check_fail_and_names_what_moves(tmp_path):
    course = _course(tmp_path)
    changed = roofkit_with_data(tmp_path / "pkg", {"hardware.toml": (
        "bandwidth_tb_s = 3.35\nmemory_gb = 80\nusable_memory_mib = 81559",
        "bandwidth_tb_s = 3.9\nmemory_gb = 80\nusable_memory_mib = 81559")})
    env = {**__import__("os").environ, "PYTHONPATH": str(changed)}
    checked = _cli("build", "--check", "--json", "03", cwd=course, env=env)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    data = json.loads(checked.stdout)
    assert data["stale"] == [f"solutions/{LESSON}.ipynb"]
    reasons = " ".join(data["reasons"][f"solutions/{LESSON}.ipynb"])
    assert "stream stdout" in reasons and "image/png" in reasons, reasons
    assert _cli("build", "--check", "--sources-only", "03", cwd=course, env=env).returncode == 0  # sources: same


def test_nbval_fails_on_a_figure_that_is_not_the_one_the_code_draws(tmp_path):
    nb = nbformat.read(ROOT / "solutions" / "00-start-here.ipynb", as_version=4)
    figures = [o for c in nb.cells if c.cell_type == "code" and not outputs.measured(c)
               for o in c.outputs if "image/png" in o.get("data", {})]
    assert figures, "lesson 00 draws no figure any more: pick a lesson that does"
    figures[0]["data"]["image/png"] = base64.b64encode(encode_png(np.full((4, 4, 4), 255, np.uint8))).decode()
    nbformat.write(nb, tmp_path / "00.ipynb")
    for name in ("conftest.py", build.SANITIZE, "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path)
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "--nbval-sanitize-with", build.SANITIZE,
                          "--nbval-current-env", "-p", "no:cacheprovider", "-q", "00.ipynb"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1, run.stdout[-2000:]
    assert "1 failed" in run.stdout and "image/png" in run.stdout, run.stdout[-2000:]


def test_static_outputs_keep_the_fallbacks_and_drop_what_changes_every_run():
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {"state": {}}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    cell = nbformat.v4.new_code_cell("x")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        outputs.WIDGET_MIME: {"model_id": "0f" * 16}, "text/plain": "explorer", "image/png": "iVBOR"})]
    nb.cells = [cell]
    kept = outputs.static(nb)
    assert "widgets" not in kept.metadata and kept.metadata["language_info"] == {"name": "python"}
    assert set(kept.cells[0].outputs[0]["data"]) == {"text/plain", "image/png"}
    assert outputs.WIDGET_MIME in nb.cells[0].outputs[0]["data"]  # a copy: the notebook given is unchanged


def test_measured_cells_are_never_compared_and_other_changes_are_named():
    stored, fresh = nbformat.v4.new_notebook(), nbformat.v4.new_notebook()
    for nb, value in ((stored, "1"), (fresh, "2")):
        measured = nbformat.v4.new_code_cell("# NBVAL_IGNORE_OUTPUT\nmeasure()", id="a")
        tagged = nbformat.v4.new_code_cell("fig", id="b", metadata={"tags": ["nbval-ignore-output"]})
        plain = nbformat.v4.new_code_cell("print(x)", id="c")
        for cell in (measured, tagged, plain):
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=value)]
        nb.cells = [measured, tagged, plain]
    assert outputs.differences(stored, fresh) == ["cell 2 (c): stream stdout"]
