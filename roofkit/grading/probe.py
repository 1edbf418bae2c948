"""The grader's watch on reaches for answer keys inside a graded kernel.

A graded kernel holds no key (:mod:`roofkit.grading.stripped`), so a lookup
earns nothing; this module makes it *visible* as well. The grader hands the
kernel the write end of a pipe; before any student code runs, the sandbox
installs an audit hook (PEP 578: it cannot be removed from Python) that writes
one line to the pipe for each of these events:

* ``roofkit.keys``: raised by roofkit itself when code asks a released
  question for its key, reads the withheld bank, or imports ``roofkit.course.bank``
  (:mod:`roofkit.grading.release`);
* ``import`` and ``pickle.find_class`` naming the course's bank (``roofkit.course.bank``,
  or a lesson's module by its public name, ``roofkit.course.lesson_00``) or a private bank module;
* ``open``, ``os.listdir`` and ``os.scandir`` of a path inside the real roofkit
  package or a private bank (the hook holds only hashes of those paths).

The grader drains the pipe after each cell, so each event is tied to the cell
that caused it and becomes a flag in the gradebook. Writes never block (a full
pipe drops events, already a flag); a kernel that closes its end of the pipe
while it runs is flagged too. Only the standard library is imported here.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

__all__ = ["install", "Watch", "digest", "BANK_MODULE_PREFIX", "BANK_PACKAGE", "BANK_PUBLIC_PREFIX"]

BANK_MODULE_PREFIX = "roofkit_private_bank"
# the course's question bank (roofkit/course/bank/: keys, hidden cases, misconceptions), and the public names of its
# modules (roofkit.course.lesson_00 is roofkit.course.bank.lesson_00: see roofkit/__init__.py)
BANK_PACKAGE = "roofkit.course.bank"
BANK_PUBLIC_PREFIX = "roofkit.course.lesson_"
_EVENT = "roofkit.keys"
_MAX_EVENTS = 200


def digest(path: str) -> str:
    """How a hidden path is named to the kernel: a hash, so that the kernel never learns the path itself."""
    return hashlib.blake2b(os.path.normpath(path).encode(errors="surrogateescape"), digest_size=16).hexdigest()


def install(fd: int, hidden: list[str], trusted: list[str] = (), quiet: list[str] = ()) -> None:
    """In the kernel: report reaches for keys on ``fd``.

    ``hidden``: digests of the paths it must not read; ``trusted``: folders that hold no hidden path (the
    Python installation, read by thousands of imports: not checked at all), while any other path is checked
    as written and with its symbolic links resolved; ``quiet``: paths whose opening is not worth a line (the
    tripwire's own files, opened when it is imported, which it reports itself).
    """
    os.set_blocking(fd, False)
    os.set_inheritable(fd, False)
    digests = frozenset(hidden)
    trusted = tuple(os.path.join(t, "") for t in trusted)
    quiet = tuple(os.path.normpath(q) for q in quiet)
    sent: set[str] = set()
    busy = []
    package, prefixes = BANK_PACKAGE, (BANK_PACKAGE + ".", BANK_PUBLIC_PREFIX, BANK_MODULE_PREFIX)  # fixed now:
    # student code that rebinds this module's names later changes nothing in the hook

    def bank_module(name) -> bool:
        return isinstance(name, str) and (name == package or name.startswith(prefixes))

    def send(what: str) -> None:
        if what in sent or len(sent) >= _MAX_EVENTS:
            return
        sent.add(what)
        try:
            os.write(fd, (json.dumps({"what": what[:300]}) + "\n").encode())
        except OSError:  # full (dropped), or closed by the notebook (the grader sees that)
            pass

    def secret(path) -> bool:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str) or not path:
            return False
        plain = os.path.abspath(path)
        if plain.startswith(trusted) or plain.startswith(quiet):
            return False
        for candidate in {plain, os.path.realpath(path)}:
            while True:
                if digest(candidate) in digests:
                    return True
                parent = os.path.dirname(candidate)
                if parent == candidate:
                    break
                candidate = parent
        return False

    def hook(event: str, args: tuple) -> None:
        if busy:  # realpath below raises events of its own
            return
        busy.append(1)
        try:
            if event == _EVENT:
                send(str(args[0]) if args else "a key")
            elif event in ("open", "os.listdir", "os.scandir"):
                if args and secret(args[0]):
                    name = os.path.basename(os.fsdecode(args[0])) or "a folder"
                    send(f"read {name} from the question bank's files")
            elif event in ("import", "pickle.find_class"):
                if args and bank_module(args[0]):
                    send(f"{'import' if event == 'import' else 'unpickle'} {args[0]}")
        except Exception:  # noqa: BLE001 - the watch must never break the kernel
            pass
        finally:
            busy.pop()

    sys.addaudithook(hook)


class Watch:
    """The grader's end: a pipe to hand to the kernel, read without blocking."""

    def __init__(self):
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.buffer = b""
        self.closed = False  # the kernel's end closed (it exited, or the notebook closed it)

    def handed_over(self) -> None:
        """Call once the kernel has started: the grader keeps only the read end."""
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def events(self) -> list[str]:
        """What arrived since the last call."""
        out = []
        while not self.closed:
            try:
                chunk = os.read(self.read_fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                self.closed = True
                break
            if not chunk:
                self.closed = True
                break
            self.buffer += chunk
            if len(self.buffer) > 1 << 20:  # a flood: keep what is there, drop the rest
                self.buffer = self.buffer[-(1 << 16):]
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            try:
                what = json.loads(line.decode(errors="replace"))["what"]
            except (ValueError, KeyError, TypeError):
                what = "an unreadable report"
            out.append(str(what)[:300])
        return out

    def close(self) -> None:
        self.handed_over()
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1
