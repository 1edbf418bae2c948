"""`roofkit assign` (and `roofkit build`) run outside a course folder say so in one line, and how to fix it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def roofkit(*argv, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "roofkit.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("argv", [("assign", "00", "--name", "hw1", "--out", "release"), ("build", "00")])
def test_outside_a_course_folder_one_line_says_how_to_fix_it(tmp_path, argv):
    result = roofkit(*argv, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    message = lines[0]
    assert "not a course folder" in message and "lessons/" in message
    assert "--root" in message and "cd " in message
    assert "lessons are: ." not in message
    assert not (tmp_path / "release").exists()


def test_root_points_assign_at_the_course(tmp_path):
    result = roofkit("assign", "00", "--name", "hw1", "--out", str(tmp_path / "release"), "--root", str(ROOT),
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "release").is_dir()
