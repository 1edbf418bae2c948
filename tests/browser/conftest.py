"""A real JupyterLab, started the way `make lab` starts it, driven by Playwright in Debian's Chromium.

The server runs headless on 127.0.0.1 with a token, over a temporary copy of
the course (so running notebooks in the browser never touches the repository),
with the Makefile's own LAB_FLAGS (the course's JupyterLab settings, the first
notebook as the landing page), and is stopped whatever happens. Screenshots go
to artifacts/browser/.

Without Chromium or Playwright these tests skip with a one-line reason, except
in CI (CI=true), where a missing browser is a failure.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "browser"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _missing_browser() -> str | None:
    if not Path(CHROMIUM).exists():
        return "Chromium is not installed (Debian: apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Python's playwright is not installed"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _missing_browser()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError(f"browser tests cannot run in CI: {reason}")
    for item in items:
        if "browser" in str(item.fspath):
            item.add_marker(pytest.mark.skip(reason=reason))


def make_lab_flags() -> list[str]:
    """The flags `make lab` gives JupyterLab (LAB_FLAGS in the Makefile), with $(CURDIR) resolved."""
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^LAB_FLAGS\s*:=\s*((?:.*\\\n)*.*)$", makefile, re.M)
    return shlex.split(match.group(1).replace("\\\n", " ").replace("$(CURDIR)", str(ROOT)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


class Lab:
    def __init__(self, base: str, token: str, root: Path, workspaces: Path | None = None):
        self.base, self.token, self.root, self.workspaces = base, token, root, workspaces

    def forget_workspaces(self) -> None:
        """Delete the tabs JupyterLab saved for earlier tests, as on a learner's first `make lab`."""
        for saved in self.workspaces.glob("*") if self.workspaces else ():
            saved.unlink()

    def url(self, path: str) -> str:
        # `reset` starts from an empty workspace: no tabs restored from the previous test
        return f"{self.base}/{path}?reset&token={self.token}"

    def api(self, path: str):
        return _get(f"{self.base}/api/{path}?token={self.token}")

    def wait_for_kernel(self, path: str, timeout: float = 90) -> None:
        """Until the kernel of ``path``'s session is idle with a connection.

        Clicking "Run All" earlier can silently do nothing; and the kernel of the
        previous notebook must not be mistaken for this one's.
        """
        deadline, seen = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            try:  # the endpoints can answer 500 for a moment while a kernel starts
                sessions = {s["path"]: s["kernel"]["id"] for s in self.api("sessions") if s.get("kernel")}
                kernels = {k["id"]: k for k in self.api("kernels")}
            except Exception:
                sessions, kernels = {}, {}
            seen = kernels.get(sessions.get(path, ""), {})
            if seen.get("execution_state") == "idle" and seen.get("connections", 0) >= 1:
                return
            time.sleep(0.5)
        raise TimeoutError(f"the kernel of {path} was not idle and connected after {timeout} s: {seen}")

    def shutdown_kernels(self) -> None:
        for session in self.api("sessions"):
            request = urllib.request.Request(f"{self.base}/api/sessions/{session['id']}?token={self.token}",
                                             method="DELETE")
            try:
                urllib.request.urlopen(request, timeout=10).close()
            except Exception:
                pass
        for kernel in self.api("kernels"):
            request = urllib.request.Request(f"{self.base}/api/kernels/{kernel['id']}?token={self.token}",
                                             method="DELETE")
            try:
                urllib.request.urlopen(request, timeout=10).close()
            except Exception:
                pass


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("course")
    for folder in ("notebooks", "solutions"):
        shutil.copytree(ROOT / folder, root / folder)
    from roofkit.course import workspace

    workspace.prepare(root)  # as `make lab` does before it starts JupyterLab: the learner's own copy
    # a learner's own settings start empty: the "no news" answer must come from the course (make lab's flags)
    settings = tmp_path_factory.mktemp("lab-settings")
    notebook = settings / "@jupyterlab" / "notebook-extension"
    notebook.mkdir(parents=True)
    # render every cell, so the test can see all outputs (JupyterLab 4 virtualises long notebooks)
    (notebook / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    token, port = secrets.token_hex(16), _free_port()
    workspaces = tmp_path_factory.mktemp("workspaces")
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(workspaces)}
    log = open(tmp_path_factory.mktemp("log") / "lab.log", "w")
    # the same server `make lab` starts, made headless, over the copy of the course
    flags = [f for f in make_lab_flags() if not f.startswith("--ServerApp.root_dir=")]
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", *flags, f"--ServerApp.port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         *(["--allow-root"] if os.geteuid() == 0 else [])],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                _get(f"{base}/api/status?token={token}", timeout=2)
                break
            except Exception:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise RuntimeError("JupyterLab did not start:\n" + Path(log.name).read_text()[-3000:])
                time.sleep(0.5)
        yield Lab(base, token, root, workspaces)
    finally:
        _stop(server)
        log.close()


def _stop(server: subprocess.Popen) -> None:
    """Stop the server and every process it started (kernels included), whatever state it is in."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 5)):
        try:
            os.killpg(server.pid, sig)
            server.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    yield page
    context.close()


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The static site, built once for every test that reads it (as `make site` builds it)."""
    from roofkit.course.site import build_site

    out = tmp_path_factory.mktemp("site") / "_site"
    build_site(ROOT, out, progress=False)
    return out


@pytest.fixture(scope="session")
def shots() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
