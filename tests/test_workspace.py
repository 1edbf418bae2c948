"""`roofkit workspace` (make lab): the learner's own copy is made once, kept, and told about course updates."""

import json
import platform
import shutil
from pathlib import Path

from roofkit.course import workspace

from helpers import run_json

ROOT = Path(__file__).resolve().parent.parent


def test_copies_once_keeps_the_learners_work_and_names_a_changed_lesson(tmp_path, capsys):
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    first = run_json(capsys, "workspace", "--root", tmp_path)
    lessons = sorted(p.name for p in (tmp_path / "notebooks").glob("[0-9][0-9]-*.ipynb"))
    assert first["copied"] == lessons and first["kept"] == []
    mine = tmp_path / "my-notebooks" / lessons[0]
    copy = json.loads(mine.read_text(encoding="utf-8"))
    assert copy["metadata"]["language_info"]["version"] == platform.python_version()
    assert copy["cells"] == json.loads((tmp_path / "notebooks" / lessons[0]).read_text(encoding="utf-8"))["cells"]

    mine.write_text(mine.read_text(encoding="utf-8").replace("# your answer here", "# my answer"), encoding="utf-8")
    course = tmp_path / "notebooks" / lessons[0]
    changed = json.loads(course.read_text(encoding="utf-8"))
    changed["metadata"]["roofkit"]["source_sha256"] = "0" * 64  # the course updated this lesson (a git pull)
    course.write_text(json.dumps(changed), encoding="utf-8")
    (tmp_path / "my-notebooks" / lessons[1]).unlink()  # ... and a lesson the learner has no copy of
    second = run_json(capsys, "workspace", "--root", tmp_path)
    assert second["copied"] == [lessons[1]] and second["changed_upstream"] == [lessons[0]]
    assert "# my answer" in mine.read_text(encoding="utf-8")  # never overwritten


def test_outside_a_course_one_line_says_so(tmp_path, capsys):
    from helpers import run

    code, out, err = run(capsys, "workspace", "--root", tmp_path)
    assert code == 2 and "not a course folder" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_language_info_is_what_ipykernel_reports():
    from ipykernel.ipkernel import IPythonKernel

    info = workspace.language_info()
    assert {k: v for k, v in info.items() if k != "version"} == \
        {k: v for k, v in IPythonKernel.language_info.items() if k != "version"}
