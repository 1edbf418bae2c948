"""`make lab` opens the course on its first notebook, with the course's JupyterLab settings and no news prompt.

JupyterLab 4 asks on first start whether to fetch "official Jupyter news" (a toast
over the notebook). The course ships `jupyterlab-settings/overrides.json`, which
answers "never" for every learner; the Makefile points JupyterLab at it with
`--LabApp.app_settings_dir`. The last test starts that server and asks its
settings API, so a wrong path, a wrong key or a value the schema rejects fails.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OVERRIDES = ROOT / "jupyterlab-settings" / "overrides.json"
NOTIFICATION = "@jupyterlab/apputils-extension:notification"
WIDGETS = "@jupyter-widgets/jupyterlab-manager:plugin"


def lab_flags() -> list[str]:
    """The flags `make lab` passes to JupyterLab, with $(CURDIR) resolved."""
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^LAB_FLAGS\s*:=\s*((?:.*\\\n)*.*)$", makefile, re.M)
    assert match, "the Makefile defines no LAB_FLAGS"
    text = match.group(1).replace("\\\n", " ").replace("$(CURDIR)", str(ROOT))
    assert "$(" not in text, f"LAB_FLAGS uses a variable this test cannot resolve: {text}"
    return shlex.split(text)


def test_make_lab_uses_the_flags():
    recipe = re.search(r"^lab:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M)
    assert recipe and "jupyter lab $(LAB_FLAGS)" in recipe.group(1), recipe and recipe.group(1)


def test_make_lab_opens_the_first_notebook_in_the_learners_own_copy(tmp_path):
    flags = dict(f.split("=", 1) for f in lab_flags() if "=" in f)
    url = flags["--LabApp.default_url"]
    assert url == "/lab/tree/my-notebooks/00-start-here.ipynb"
    recipe = re.search(r"^lab:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert recipe.index("roofkit workspace") < recipe.index("jupyter lab")  # the copy is made first
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    from roofkit.course import workspace

    workspace.prepare(tmp_path)
    assert (tmp_path / url.removeprefix("/lab/tree/")).exists()
    assert "/my-notebooks/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_overrides_turn_the_news_off_with_values_the_schema_accepts():
    overrides = json.loads(OVERRIDES.read_text())
    notification = overrides[NOTIFICATION]
    assert notification["fetchNews"] == "false"  # "Never" (a string in the schema, not a boolean)
    schema_file = (Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas" / "@jupyterlab" / "apputils-extension"
                   / "notification.json")
    schema = json.loads(schema_file.read_text())["properties"]
    for key, value in notification.items():
        assert key in schema, f"{key} is not a setting of {NOTIFICATION}"
        allowed = [choice["const"] for choice in schema[key].get("oneOf", [])]
        assert not allowed or value in allowed, f"{key}={value!r}; the schema allows {allowed}"
    flags = dict(f.split("=", 1) for f in lab_flags() if "=" in f)
    assert Path(flags["--LabApp.app_settings_dir"]) == OVERRIDES.parent


def test_the_overrides_save_the_answer_boxes_with_the_notebook():
    """What a release's answer box holds is graded from the saved notebook (roofkit.grading.boxes): JupyterLab
    writes it there only with the widget manager's saveState on."""
    widgets = json.loads(OVERRIDES.read_text())[WIDGETS]
    schema_file = (Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "@jupyter-widgets" / "jupyterlab-manager"
                   / "schemas" / "@jupyter-widgets" / "jupyterlab-manager" / "plugin.json")
    schema = json.loads(schema_file.read_text())["properties"]
    assert widgets == {"saveState": True} and schema["saveState"]["type"] == "boolean"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # starts a JupyterLab server
def test_jupyterlab_started_like_make_lab_serves_the_overrides(tmp_path):
    port, token = _free_port(), "roofkit-settings-test"
    flags = [f for f in lab_flags() if not f.startswith("--ServerApp.root_dir")]
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "user-settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", *flags, f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        url = f"http://127.0.0.1:{port}/lab/api/settings/{NOTIFICATION}?token={token}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    settings = json.loads(response.read())
                break
            except Exception:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start with the Makefile's flags")
                time.sleep(0.5)
        # an override becomes the schema's default, which is what a learner with no settings of their own gets
        assert settings["schema"]["properties"]["fetchNews"]["default"] == "false"
        assert settings["schema"]["properties"]["checkForUpdates"]["default"] is False
        widgets_url = f"http://127.0.0.1:{port}/lab/api/settings/{WIDGETS}?token={token}"
        with urllib.request.urlopen(widgets_url, timeout=10) as response:
            widgets = json.loads(response.read())
        assert widgets["schema"]["properties"]["saveState"]["default"] is True
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_the_first_make_lab_says_what_it_is_doing_before_the_long_install():
    recipe = re.search(r"^\$\(STAMP\):.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    lines = recipe.splitlines()
    said = next(i for i, line in enumerate(lines) if "echo" in line and "first time" in line)
    assert said < next(i for i, line in enumerate(lines) if "pip install" in line)
