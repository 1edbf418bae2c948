"""The roofkit a graded kernel imports: the whole package except its question bank.

The grader runs each submission (and each code answer's cases) with a copy of
roofkit put first on the kernel's import path: every module (hardware,
formulas, roofline, training, quiz, ...) is there, so answers computed with
the library work as on a laptop, but ``roofkit/course/bank/`` (the question bank:
keys, hidden cases, misconceptions; :data:`BANK`) is replaced by a tripwire
package whose import is reported and refused (:func:`roofkit.grading.release.withheld`). The
copy is made once per grading process in a temporary folder and removed when
the process ends.

:func:`hidden` lists what a graded kernel must never read: the real package
(whose ``course/`` holds the keys) and every private bank loaded by the grader.
:mod:`roofkit.grading.sandbox` leaves them out of what Landlock lets the kernel
read, and :mod:`roofkit.grading.probe` reports any attempt to open them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path

from .probe import BANK_PACKAGE

__all__ = ["package", "hidden", "hide", "BANK"]

BANK = Path(*BANK_PACKAGE.split(".")[1:])  # course/bank: the folder of the question bank, inside roofkit/
_TRIPWIRE = f'''"""Not here: a graded kernel's roofkit holds no question bank. The keys stay with the grader."""

from {"." * len(BANK.parts)}.grading.release import withheld

withheld("import {BANK_PACKAGE}")
'''

_lock = threading.Lock()
_built: dict[str, str] = {}
_hidden: list[str] = []


def _source() -> Path:
    return Path(__file__).resolve().parents[1]  # roofkit/ (this is roofkit/grading/stripped.py)


def _ignore(folder: str, names: list[str]) -> set[str]:
    """What the copy leaves out: caches, hidden files, and the bank (only the bank: course/ keeps the quiz)."""
    skipped = set(shutil.ignore_patterns("__pycache__", "*.pyc", ".*")(folder, names))
    if Path(folder).resolve() == (_source() / BANK).parent:
        skipped.add(BANK.name)
    return skipped


def package() -> str:
    """The folder to put first on a graded kernel's import path (it holds ``roofkit/``, without the bank)."""
    with _lock:
        if "root" in _built:
            return _built["root"]
        root = tempfile.mkdtemp(prefix=f"roofkit-graded-{os.getpid()}-")  # the pid: a later grader may reap it
        atexit.register(shutil.rmtree, root, True)
        target = Path(root) / "roofkit"
        shutil.copytree(_source(), target, ignore=_ignore)
        (target / BANK).mkdir()
        (target / BANK / "__init__.py").write_text(_TRIPWIRE, encoding="utf-8")
        for path, dirs, files in os.walk(root):  # readable by an unprivileged kernel user (nobody), writable by none
            os.chmod(path, 0o755)
            for name in files:
                os.chmod(os.path.join(path, name), 0o644)
        _built["root"] = root
        return root


def hide(path: str | os.PathLike) -> None:
    """Add a file or folder a graded kernel must never read (a private question bank)."""
    resolved = str(Path(path).resolve())
    with _lock:
        if resolved not in _hidden:
            _hidden.append(resolved)


def hidden() -> list[str]:
    """What a graded kernel must never read: the real roofkit package and the private banks loaded here."""
    with _lock:
        extra = list(_hidden)
    return [str(_source()), *extra]
