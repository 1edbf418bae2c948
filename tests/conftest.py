"""What the whole suite shares: tests that grade in a real sandbox need bubblewrap.

``roofkit grade`` runs every student's kernel in bubblewrap and refuses to run
without a sandbox (docs/instructors.md, section 6). Tests marked ``sandbox``
grade real notebooks that way: on a machine without ``bwrap`` (macOS, a laptop
without the package) they are skipped with the reason and the install command;
in CI (``CI=true``), where ``.ci/run`` installs it, a missing bwrap is a failure.
"""

from __future__ import annotations

import os

import pytest


def sandbox_missing() -> str | None:
    """Why no sandbox can run here, or None when bubblewrap works."""
    from roofkit.grading import jail

    try:
        jail.choose("auto")
    except jail.SandboxUnavailable as error:
        return str(error)
    return None


def pytest_collection_modifyitems(config, items):
    needing = [item for item in items if item.get_closest_marker("sandbox")]
    if not needing:
        return
    reason = sandbox_missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        raise pytest.UsageError(f"the grading tests cannot run in CI: {reason}")
    for item in needing:
        item.add_marker(pytest.mark.skip(reason=reason))  # it says how to install bubblewrap
