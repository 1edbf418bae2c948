"""Execute one submission in a fresh, sandboxed kernel and collect its answer records.

Each submission gets a private temporary folder holding only a copy of its
notebook (outputs stripped: stored outputs count for nothing), a clean
environment (no variable of the grader's, no user or IPython start-up files),
and a kernel started through :mod:`roofkit.grading.sandbox`. Cells run one by
one, errors allowed, under a time limit per cell and one for the notebook. The
grader keeps only what it needs from the kernel's messages: the answer records
(``application/vnd.roofkit.answer+json``), the errors, and a count of output
bytes. Output beyond ``Limits.output_bytes`` is not kept (and one message
larger than ``Limits.message_bytes`` is dropped by ZeroMQ before it reaches
memory); a notebook that floods past eight times the cap is stopped.

Whatever happens (an endless loop, ``sys.exit()``, ``os._exit()``, a segfault,
gigabytes of output), :func:`main` returns a :class:`Run`: the records of the
cells that ran, and why execution stopped early, if it did.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from queue import Empty

__all__ = ["Limits", "Run", "main", "sandbox_env", "sandbox_settings", "make_folder", "kill_strays"]

from .sandbox import TRUNCATED

RECORD_MIME = "application/vnd.roofkit.answer+json"
MAX_RECORDS, MAX_RECORD_BYTES, MAX_RECORDS_BYTES, MAX_ERRORS = 2000, 200_000, 8_000_000, 50


@dataclass(frozen=True)
class Limits:
    """Time, size and privilege limits for one submission (defaults suit a lesson notebook)."""

    notebook_s: float = 300.0  # wall clock for the whole notebook
    cell_s: float = 60.0  # wall clock for one cell (then the cell is interrupted and the next one runs)
    startup_s: float = 60.0  # for the kernel to answer its first request
    output_bytes: int = 16 * 2**20  # output kept per notebook
    message_bytes: int = 16 * 2**20  # one kernel message larger than this is dropped unread
    memory_bytes: int = 4 * 2**30  # address space of the kernel (RLIMIT_AS)
    file_bytes: int = 64 * 2**20  # largest file the kernel may write (RLIMIT_FSIZE)
    disk_bytes: int = 2**30  # all files in its folder together (checked every second; then the notebook stops)
    case_s: float = 2.0  # one call of a student's function on one case
    user: str | None = "auto"  # run as this user when the grader is root ("auto": nobody, if it can run Python)
    landlock: bool = True


@dataclass
class Run:
    """What executing a submission produced."""

    records: list[tuple[int, dict]] = field(default_factory=list)  # (cell index, record), in execution order
    errors: list[tuple[int, str]] = field(default_factory=list)  # (cell index, "NameError: ...")
    interrupted: list[int] = field(default_factory=list)  # cells stopped at the per-cell limit
    stopped: str | None = None  # why the notebook did not run to the end
    stopped_at: int | None = None  # the cell it stopped at (cells after it did not run)
    output_bytes: int = 0
    truncated: bool = False
    dropped_messages: int = 0
    dropped_records: int = 0  # answer records too large or too many to keep
    seconds: float = 0.0
    sandbox: dict = field(default_factory=dict)
    probes: list[tuple[int, str]] = field(default_factory=list)  # (cell index, a reach for a key), see .probe

    def notes(self) -> list[str]:
        """Execution events in words, for the feedback page."""
        out = [f"cell {i + 1} raised {text}" for i, text in self.errors[:5]]
        out += [f"cell {i + 1} was stopped at the per-cell time limit; the next cells still ran" for i in self.interrupted]
        if self.truncated:
            out.append("the notebook printed more than the output cap; the rest of its output was dropped")
        if self.dropped_messages:
            out.append("an output larger than the size cap was dropped")
        if self.dropped_records:
            out.append(f"{self.dropped_records} answer record(s) too large or too many were ignored")
        if self.stopped:
            out.append(self.stopped)
        return out

    def to_dict(self) -> dict:
        data = asdict(self)
        data["records"] = len(self.records)
        return data


@lru_cache(maxsize=None)
def _unprivileged(user: str) -> str | None:
    """``user`` if the grader is root and that user can start this Python and roofkit, else None."""
    if os.geteuid() != 0 or not hasattr(os, "setuid"):
        return None
    try:
        import pwd

        pwd.getpwnam(user)
        from . import stripped

        code = f"import sys; sys.path.insert(0, {stripped.package()!r}); import ipykernel, roofkit.quiz"
        probe = subprocess.run([sys.executable, "-I", "-c", code], user=user, cwd="/", capture_output=True,
                               timeout=120, env={"PATH": "/usr/bin:/bin"})
        return user if probe.returncode == 0 else None
    except (KeyError, OSError, subprocess.SubprocessError):
        return None


def sandbox_settings(limits: Limits, folder: str) -> dict:
    """The settings :mod:`roofkit.grading.sandbox` applies, for a kernel working in ``folder``.

    The kernel imports the copy of roofkit without its question bank, may not read the real package or a
    private bank (Landlock), and reports any attempt to (the watch, given the hashes of those paths only).
    """
    from . import probe, sandbox, stripped

    package = stripped.package()
    user = None
    if limits.user:
        user = _unprivileged("nobody" if limits.user == "auto" else limits.user)
    hidden = stripped.hidden()
    tripwire = os.path.join(package, "roofkit", "course")
    watched = [*hidden, tripwire]
    # folders the watch need not check (thousands of imports): the installation, unless a hidden path is in it
    trusted = [p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}
               if not any(os.path.realpath(h).startswith(os.path.realpath(p) + os.sep) for h in hidden)]
    return {"write": [folder], "read": sandbox.read_paths(package, hidden), "landlock": limits.landlock,
            "user": user, "memory_bytes": limits.memory_bytes, "file_bytes": limits.file_bytes,
            "cpu_s": int(2 * limits.notebook_s + 30), "output_chars": limits.output_bytes,
            "package": package, "graded": True, "hidden": [probe.digest(p) for p in watched],
            "quiet": [os.path.join(tripwire, "__init__.py"), os.path.join(tripwire, "__pycache__")],
            "trusted": trusted}


def sandbox_env(folder: str) -> dict:
    """A clean environment: nothing of the grader's, every tool's state inside ``folder``."""
    root = Path(folder)
    home = root / "work"
    return {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home), "TMPDIR": str(root / "tmp"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "IPYTHONDIR": str(root / "ipython"), "MPLCONFIGDIR": str(root / "matplotlib"),
        "JUPYTER_CONFIG_DIR": str(root / "jupyter"), "JUPYTER_DATA_DIR": str(root / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(root / "jupyter"), "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1", "NUMEXPR_MAX_THREADS": "1", "JPY_PARENT_PID": str(os.getpid()),
        "ROOFKIT_SANDBOX_FOLDER": str(root),
    }


def make_folder(notebook, user: str | None) -> str:
    """A private folder holding only ``work/submission.ipynb``; owned by ``user`` when one is set."""
    import nbformat

    folder = tempfile.mkdtemp(prefix="roofkit-grade-")
    for name in ("work", "tmp", "ipython", "matplotlib", "jupyter"):
        os.mkdir(os.path.join(folder, name), 0o700)
    Path(folder, "work", "submission.ipynb").write_text(nbformat.writes(notebook), encoding="utf-8")
    if user:
        import pwd

        entry = pwd.getpwnam(user)
        for path, dirs, files in os.walk(folder):
            for name in [path, *(os.path.join(path, n) for n in dirs + files)]:
                os.chown(name, entry.pw_uid, entry.pw_gid)
    return folder


class _Kernel:
    """A sandboxed IPython kernel and a blocking client on it, started and torn down by hand."""

    def __init__(self, folder: str, limits: Limits, settings: dict, context):
        from jupyter_client import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        from . import probe, sandbox

        self.folder, self.limits = folder, limits
        self.watch = probe.Watch()
        connection, _ = write_connection_file(os.path.join(folder, "kernel.json"), ip="127.0.0.1")
        if settings.get("user"):
            import pwd

            entry = pwd.getpwnam(settings["user"])
            os.chown(connection, entry.pw_uid, entry.pw_gid)
        env = {**sandbox_env(folder), "PYTHONPATH": settings["package"], "ROOFKIT_SANDBOX": json.dumps(
            {**settings, "ports_from_connection_file": True, "probe_fd": self.watch.write_fd})}
        self.log = open(os.path.join(folder, "kernel.log"), "wb")
        try:
            self.process = subprocess.Popen(
                sandbox.command(settings["package"], "-f", connection, "--HistoryManager.enabled=False"),
                cwd=os.path.join(folder, "work"), env=env, stdin=subprocess.DEVNULL, stdout=self.log,
                stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(self.watch.write_fd,))
        finally:
            self.watch.handed_over()
        self.client = BlockingKernelClient(context=context)
        self.client.load_connection_file(connection)
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        self.iopub = self.monitor = None
        self._connect_iopub()

    def _connect_iopub(self) -> None:
        """A fresh subscription to the kernel's outputs, watched for dropped connections."""
        import uuid

        import zmq
        from jupyter_client.channels import ZMQSocketChannel

        if self.iopub is not None:
            self._close_iopub()
        socket = self.client.connect_iopub()
        self.monitor = socket.get_monitor_socket(zmq.EVENT_DISCONNECTED, addr=f"inproc://monitor-{uuid.uuid4().hex}")
        self.iopub = ZMQSocketChannel(socket, self.client.session)

    def _close_iopub(self) -> None:
        try:
            self.iopub.socket.disable_monitor()
        except Exception:  # noqa: BLE001 - best effort while tearing down
            pass
        self.monitor.close(linger=0)
        self.iopub.close()

    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_ready(self, timeout: float) -> bool:
        """True once the kernel answers kernel_info on the shell channel and its status for that request
        arrives on the output channel: a subscription takes effect a little after it is made (ZeroMQ's "slow
        joiner"), and a first cell whose idle status was lost would look as if it never finished.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.alive():
            msg_id = self.client.kernel_info()
            replied = heard = False
            until = time.monotonic() + 1.0
            while time.monotonic() < until and not (replied and heard):
                if not replied:
                    try:
                        replied = self.client.shell_channel.get_msg(timeout=0.05)["parent_header"].get(
                            "msg_id") == msg_id
                    except Empty:
                        if not self.alive():
                            return False
                try:
                    heard = heard or self.iopub.get_msg(timeout=0.05).get("parent_header", {}).get("msg_id") == msg_id
                except Exception:  # noqa: BLE001 - Empty, or an undecodable message
                    pass
            if replied and heard:
                while True:  # the rest of the start-up messages are of no interest
                    try:
                        self.iopub.get_msg(timeout=0.05)
                    except Exception:  # noqa: BLE001 - Empty, or an undecodable message
                        return True
        return False

    def disconnected(self) -> int:
        """How many times ZeroMQ dropped the output connection (a message over the size cap); reconnects.

        ZeroMQ treats an oversized message as a protocol error and does not reconnect by itself.
        """
        import zmq

        count = 0
        while self.monitor.poll(0):
            self.monitor.recv_multipart(zmq.NOBLOCK)
            count += 1
        if count and self.alive():
            self._connect_iopub()
        return count

    def interrupt(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGINT)
        except (ProcessLookupError, PermissionError):
            pass

    def exit_reason(self) -> str:
        code = self.process.poll()
        if code is None:
            return "is still running"
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else f"signal {-code}"
            return f"crashed ({name})"
        return f"exited (status {code})"

    def close(self) -> None:
        self._close_iopub()
        self.client.stop_channels()
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        self.log.close()
        self.watch.close()
        kill_strays(self.folder)

    def disk_used(self) -> int:
        total = 0
        for path, _, files in os.walk(self.folder):
            for name in files:
                try:
                    total += os.lstat(os.path.join(path, name)).st_blocks * 512
                except OSError:
                    pass
        return total


def child_reports(folder: str) -> list[str]:
    """What processes started by the notebook reached for (see roofkit.grading.release.report), at most 20."""
    from .release import KEYS_LOG

    try:
        with open(os.path.join(folder, KEYS_LOG), encoding="utf-8", errors="replace") as file:
            lines = file.read(100_000).splitlines()
    except OSError:
        return []
    return list(dict.fromkeys(line.strip()[:300] for line in lines if line.strip()))[:20]


def kill_strays(folder: str) -> None:
    """Kill processes a submission started in a session of their own (they escape the kernel's process group).

    They are recognised by the sandbox folder in their environment; one that cleared its environment is not
    found, and only its CPU-time limit ends it.
    """
    marker = f"ROOFKIT_SANDBOX_FOLDER={folder}".encode()
    if not os.path.isdir("/proc"):
        return
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as file:
                    if marker in file.read().split(b"\0"):
                        os.kill(int(entry), signal.SIGKILL)
            except OSError:
                continue


def _message_size(content: dict) -> int:
    if "text" in content:
        return len(content["text"])
    data = content.get("data") or {}
    return sum(len(v) if isinstance(v, str) else len(json.dumps(v)) for v in data.values())


class _Executor:
    def __init__(self, kernel: _Kernel, limits: Limits, run: Run):
        self.kernel, self.limits, self.run = kernel, limits, run
        self.disconnects = self.records_bytes = 0
        self.disk_checked = time.monotonic()

    def watch(self, index: int) -> None:
        """Tie what the watch reported since the last look to cell ``index``."""
        watch = self.kernel.watch
        was_open = not watch.closed
        for what in watch.events():
            if len(self.run.probes) < MAX_ERRORS and (index, what) not in self.run.probes:
                self.run.probes.append((index, what))
        if was_open and watch.closed:  # the pipe closed: the kernel exited, or the notebook closed it
            deadline = time.monotonic() + 1.0
            while self.kernel.alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.kernel.alive():
                self.run.probes.append((index, "closed the grader's watch on key lookups"))

    def _handle(self, index: int, msg: dict) -> None:
        kind, content = msg["msg_type"], msg.get("content") or {}
        if kind in ("stream", "display_data", "execute_result", "error"):
            size = _message_size(content) if kind != "error" else len(str(content.get("evalue", "")))
            self.run.output_bytes += size  # nothing but records and error names is kept, so only counted
            if self.run.output_bytes > self.limits.output_bytes:
                self.run.truncated = True
        if kind == "stream" and TRUNCATED in str(content.get("text", ""))[-200:]:
            self.run.truncated = True
        if kind in ("display_data", "execute_result"):
            record = (content.get("data") or {}).get(RECORD_MIME)
            if record is not None:
                size = len(json.dumps(record))
                if (size > MAX_RECORD_BYTES or len(self.run.records) >= MAX_RECORDS
                        or self.records_bytes + size > MAX_RECORDS_BYTES):
                    self.run.dropped_records += 1
                else:
                    self.records_bytes += size
                    self.run.records.append((index, record))
        elif kind == "error" and len(self.run.errors) < MAX_ERRORS:
            text = f"{content.get('ename', 'Error')}: {content.get('evalue', '')}"
            self.run.errors.append((index, text[:300]))

    def cell(self, index: int, code: str, deadline: float) -> str:
        """Run one cell; 'done', 'timeout', 'dead', 'flood' or 'disk'."""
        outcome = self._cell(index, code, deadline)
        self.watch(index)
        if outcome != "dead":  # a dropped connection while the kernel lives: a message over the size cap
            dropped = self.disconnects + self.kernel.disconnected()
            self.run.dropped_messages += dropped
            if dropped and outcome == "done":
                self.resync(deadline)
        self.disconnects = 0
        return outcome

    def resync(self, deadline: float) -> None:
        """After dropped messages, wait until the output channel carries messages again.

        The kernel may still be pushing oversized outputs that ZeroMQ drops, taking the connection down each
        time; a record sent meanwhile would be lost. An empty cell whose idle status arrives proves that what
        follows will be received.
        """
        client = self.kernel.client
        while time.monotonic() < deadline and self.kernel.alive():
            probe = client.execute("", store_history=False, allow_stdin=False)
            until = min(deadline, time.monotonic() + 1.0)
            while time.monotonic() < until:
                try:
                    msg = self.kernel.iopub.get_msg(timeout=0.1)
                except Exception:  # noqa: BLE001 - Empty, or an undecodable message
                    continue
                if (msg.get("parent_header", {}).get("msg_id") == probe and msg["msg_type"] == "status"
                        and msg["content"].get("execution_state") == "idle"):
                    self.kernel.disconnected()
                    return

    def _cell(self, index: int, code: str, deadline: float) -> str:
        client = self.kernel.client
        msg_id = self.msg_id = client.execute(code, store_history=True, allow_stdin=False, stop_on_error=False)
        replied = None
        while True:
            now = time.monotonic()
            if now >= deadline:
                return "done" if replied is not None else "timeout"  # replied: only its idle status was lost
            if now - self.disk_checked > 1.0:
                self.disk_checked = now
                if self.kernel.disk_used() > self.limits.disk_bytes:
                    return "disk"
            if replied is None:
                try:
                    reply = client.shell_channel.get_msg(timeout=0)
                    if reply["parent_header"].get("msg_id") == msg_id:
                        replied = now
                except Empty:
                    pass
                except Exception:  # noqa: BLE001 - an unreadable reply: wait for the status instead
                    pass
            try:
                msg = self.kernel.iopub.get_msg(timeout=min(0.1, max(0.0, deadline - now)))
            except Empty:
                self.watch(index)
                if not self.kernel.alive():  # a dying kernel also drops the connection: that is no oversized output
                    self.drain(index, msg_id)
                    return "dead"
                self.disconnects += self.kernel.disconnected()
                if replied is not None and self.disconnects and time.monotonic() - replied > 1.0:
                    return "done"  # the idle status was lost with a dropped message
                continue
            except Exception:  # noqa: BLE001 - a message that does not decode (e.g. a 5000-digit number)
                self.run.dropped_messages += 1
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                return "done"
            self._handle(index, msg)
            if self.run.output_bytes > 8 * self.limits.output_bytes:
                return "flood"

    def drain(self, index: int, msg_id: str) -> None:
        """Collect what a dying kernel managed to send."""
        while True:
            try:
                msg = self.kernel.iopub.get_msg(timeout=0.2)
            except Exception:  # noqa: BLE001 - Empty, or an undecodable message
                return
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                self._handle(index, msg)

    def interrupt(self, msg_id: str, wait_s: float = 2.0) -> bool:
        """Interrupt the running cell; True if the kernel finished it within ``wait_s``."""
        client = self.kernel.client
        self.kernel.interrupt()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                reply = client.shell_channel.get_msg(timeout=0)
                if reply["parent_header"].get("msg_id") == msg_id:
                    return True
            except Exception:  # noqa: BLE001 - Empty, or an undecodable message
                pass
            try:
                msg = self.kernel.iopub.get_msg(timeout=0.1)
            except Exception:  # noqa: BLE001
                if not self.kernel.alive():
                    return False
                continue
            if (msg.get("parent_header", {}).get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"].get("execution_state") == "idle"):
                return True
        return False


def main(notebook, *, limits: Limits = Limits(), context=None, keep: bool = False, cancel=None,
         preamble: str | None = None) -> Run:
    """Execute ``notebook`` (a path or an nbformat notebook) in a sandboxed kernel; never raises for its content.

    ``cancel``: a ``threading.Event``; when set, execution stops at the next cell (the grader is shutting down).
    ``preamble``: code the grader runs first, as cell -1 (the release's questions, from its own copy).
    """
    import nbformat
    import zmq

    from . import sandbox

    if not isinstance(notebook, nbformat.NotebookNode):
        notebook = nbformat.read(str(notebook), as_version=4)
    for cell in notebook.cells:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    started = time.monotonic()
    settings = sandbox_settings(limits, "")
    folder = make_folder(notebook, settings["user"])
    settings["write"] = [folder]
    run = Run(sandbox={"landlock_abi": sandbox.landlock_abi() if limits.landlock else 0,
                       "user": settings["user"] or ("root without capabilities" if os.geteuid() == 0 else
                                                    "the grader's own user")})
    own_context = context is None
    if own_context:
        context = zmq.Context()
        context.setsockopt(zmq.MAXMSGSIZE, limits.message_bytes)
    kernel = None
    try:
        for attempt in range(3):  # a port taken between choosing and binding it: try again
            kernel = _Kernel(folder, limits, settings, context)
            if kernel.wait_ready(limits.startup_s):
                break
            kernel.close()
            kernel = None
        if kernel is None:
            run.stopped, run.stopped_at = "the kernel did not start", 0
            return run
        executor = _Executor(kernel, limits, run)
        notebook_deadline = started + limits.notebook_s
        if preamble:  # the first run in a fresh kernel may be slow on a busy machine: the start-up time applies
            if executor.cell(-1, preamble, min(time.monotonic() + max(limits.cell_s, limits.startup_s),
                                               notebook_deadline)) == "timeout":
                executor.interrupt(executor.msg_id, wait_s=5.0)
                executor.resync(min(notebook_deadline, time.monotonic() + 10))
        for index, cell in enumerate(notebook.cells):
            code = cell.get("source", "")
            code = "".join(code) if isinstance(code, list) else code
            if cell.get("cell_type") != "code" or not code.strip():
                continue
            if cancel is not None and cancel.is_set():
                run.stopped, run.stopped_at = "grading was cancelled", index
                break
            deadline = min(time.monotonic() + limits.cell_s, notebook_deadline)
            outcome = executor.cell(index, code, deadline)
            if outcome == "timeout":
                if time.monotonic() >= notebook_deadline - 0.05:
                    run.stopped = (f"the notebook ran past its {limits.notebook_s:g} s limit at cell {index + 1}; "
                                   "later cells did not run")
                    run.stopped_at = index
                    break
                if executor.interrupt(executor.msg_id, wait_s=min(5.0, max(2.0, limits.cell_s))):
                    run.interrupted.append(index)
                    executor.resync(min(notebook_deadline, time.monotonic() + 10))
                    continue
                run.stopped = (f"cell {index + 1} ran past the {limits.cell_s:g} s limit and could not be "
                               "interrupted; later cells did not run")
                run.stopped_at = index
                break
            if outcome == "dead":
                run.stopped = f"the kernel {kernel.exit_reason()} at cell {index + 1}; later cells did not run"
                run.stopped_at = index
                break
            if outcome == "disk":
                run.stopped = (f"cell {index + 1} wrote more than {limits.disk_bytes / 2**20:,.0f} MB of files; "
                               "the notebook was stopped there")
                run.stopped_at = index
                break
            if outcome == "flood":
                run.stopped = (f"cell {index + 1} printed more than {8 * limits.output_bytes:,} bytes; "
                               "the notebook was stopped there")
                run.stopped_at = index
                break
        return run
    finally:
        if kernel is not None:
            kernel.close()
        if own_context:
            context.destroy(linger=0)
        run.probes += [(-2, what) for what in child_reports(folder)]
        run.seconds = time.monotonic() - started
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
