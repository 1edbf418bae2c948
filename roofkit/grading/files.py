"""What the grader reads from and writes to disk, whatever a submission holds.

* :func:`read_submission`: a submission is read once, as a regular file only
  (never a symbolic link, a FIFO, a device or a folder), opened without
  following links and without blocking, and at most ``limit`` bytes; the
  digest the resumption check uses comes from those same bytes.
* :func:`write_atomic`: a reader sees the old file or the new one, never a
  part. Text that is not valid UTF-8 (a lone surrogate a kernel sent) is
  written with U+FFFD in its place, never refused.
* :func:`clean`: JSON-like data made safe to write: strings valid UTF-8,
  nesting bounded, sizes bounded.
* :func:`csv_cell` and :func:`csv_text`: a cell a spreadsheet would run as a
  formula is neutralised, by OWASP's rule for CSV injection: a cell that
  begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return gets a
  single quote in front (a number such as ``-1.5``, and Moodle's ``-`` for
  "no grade", are left as they are).

Only the standard library is imported here.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Submission", "read_submission", "kind_of", "write_atomic", "clean", "text", "csv_cell", "csv_text",
           "MAX_DEPTH"]

MAX_DEPTH = 24  # nesting kept in what the grader stores: deeper values become a short text
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")


@dataclass
class Submission:
    """A submission as read: its bytes and their SHA-256, or why it was refused (then ``data`` is None)."""

    data: bytes | None
    sha256: str
    refused: str | None = None


def kind_of(mode: int) -> str:
    """'a regular file', 'a symbolic link', 'a FIFO', ... for an lstat mode."""
    for test, name in ((stat.S_ISREG, "a regular file"), (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_submission(path: str | Path, limit: int) -> Submission:
    """Read ``path`` once: a regular file of at most ``limit`` bytes, else the reason it is refused."""
    path = str(path)
    try:
        mode = os.lstat(path).st_mode
    except OSError as error:
        return Submission(None, "", f"the file cannot be read ({error.strerror or error})")
    if not stat.S_ISREG(mode):
        return Submission(None, _name_digest(path, mode),
                          f"refused: it is {kind_of(mode)}, not a regular file; hand in the notebook itself")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        return Submission(None, _name_digest(path, mode), f"the file cannot be read ({error.strerror or error})")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # replaced between the two looks
            return Submission(None, _name_digest(path, info.st_mode),
                              f"refused: it is {kind_of(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            return Submission(None, f"size:{info.st_size}",
                              f"the file is {info.st_size / 2**20:.0f} MB, over the {limit // 2**20} MB limit: clear "
                              "the outputs (Edit > Clear Outputs of All Cells), save, and hand it in again")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as error:
        return Submission(None, _name_digest(path, mode), f"the file cannot be read ({error.strerror or error})")
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        return Submission(None, f"size:{len(data)}", f"the file grew past the {limit // 2**20} MB limit while it "
                          "was read")
    return Submission(data, hashlib.sha256(data).hexdigest())


def _name_digest(path: str, mode: int) -> str:
    """A stand-in digest for what was refused (so a rerun sees the same refusal as done)."""
    return "refused:" + hashlib.sha256(f"{kind_of(mode)}|{path}".encode("utf-8", "replace")).hexdigest()[:32]


def text(value: str, limit: int | None = None) -> str:
    """``value`` as valid UTF-8 text (lone surrogates become U+FFFD), cut at ``limit`` characters."""
    value = value if isinstance(value, str) else str(value)
    if limit is not None and len(value) > limit:
        value = value[:limit]
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def clean(value, depth: int = 0):
    """JSON-like ``value`` with valid UTF-8 strings and at most :data:`MAX_DEPTH` levels of nesting."""
    if isinstance(value, str):
        return text(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth >= MAX_DEPTH:
        return "(nested too deeply to keep)"
    if isinstance(value, dict):
        return {text(str(k)): clean(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v, depth + 1) for v in value]
    try:
        return text(str(value), 2000)
    except Exception:  # noqa: BLE001 - a str() that fails: keep its type only
        return f"({type(value).__name__})"


def write_atomic(path: str | Path, content: str) -> None:
    """Write ``content`` to ``path`` so that a reader sees the old file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8", errors="replace") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def csv_cell(value) -> str:
    """One CSV cell a spreadsheet shows as text: OWASP's rule against formula injection."""
    value = text("" if value is None else str(value))
    if value.startswith(_FORMULA_START) and not _NUMBER.fullmatch(value) and value != "-":
        return "'" + value
    return value


def csv_text(rows: list[list]) -> str:
    """CSV (comma-separated, quoted where needed, one line per row) with every cell neutralised."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for row in rows:
        writer.writerow([csv_cell(cell) for cell in row])
    return buffer.getvalue()
