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

import builtins
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field, fields
from pathlib import Path
from queue import Empty

__all__ = ["Limits", "Run", "Box", "main", "sandbox_env", "sandbox_settings", "make_folder", "kill_strays",
           "error_name"]

from .. import errors
from . import jail, probe, sandbox, stripped
from .files import clean
from .jail import PREFIX, hold_lock, kill_marked
from .release import KEYS_LOG
from .sandbox import TRUNCATED

RECORD_MIME = "application/vnd.roofkit.answer+json"
MAX_RECORDS, MAX_RECORD_BYTES, MAX_RECORDS_BYTES, MAX_ERRORS = 2000, 200_000, 8_000_000, 50
RECEIVE_QUEUE = 16  # output messages ZeroMQ may hold for the grader at once (each at most Limits.message_bytes)


@dataclass(frozen=True)
class Limits:
    """Time, size and privilege limits for one submission (defaults suit a lesson notebook)."""

    notebook_s: float = 300.0  # wall clock for the whole notebook
    cell_s: float = 60.0  # wall clock for one cell (then the cell is interrupted and the next one runs)
    startup_s: float = 60.0  # for the kernel to answer its first request
    output_bytes: int = 16 * 2**20  # output kept per notebook
    message_bytes: int = 4 * 2**20  # one kernel message larger than this is dropped unread
    memory_bytes: int = 4 * 2**30  # address space of each process (RLIMIT_AS); in a cgroup, all of them together
    file_bytes: int = 64 * 2**20  # largest file the kernel may write (RLIMIT_FSIZE)
    disk_bytes: int = 2**30  # all files it writes together (its tmpfs in a sandbox; else checked every second)
    case_s: float = 2.0  # one call of a student's function on one case
    user: str | None = "auto"  # without a sandbox, as root: "auto" runs each kernel as a user id of its own where
    # other users may run this Python; None keeps root (without capabilities). In bubblewrap always a user of its own
    landlock: bool = True
    processes: int = 256  # processes and threads a kernel may have at once (a fork bomb stops there)
    sandbox: str = "auto"  # "auto"/"bubblewrap": bubblewrap, refused where it is missing; "none": no sandbox


@dataclass
class Run:
    """What executing a submission produced."""

    records: list[tuple[int, dict]] = field(default_factory=list)  # (cell index, record), in execution order
    errors: list[tuple[int, str]] = field(default_factory=list)  # (cell index, "NameError: ...")
    interrupted: list[int] = field(default_factory=list)  # cells stopped at the per-cell limit
    stopped: str | None = None  # why the notebook did not run to the end
    stopped_at: int | None = None  # the cell it stopped at (cells after it did not run)
    failed: str | None = None  # the grader could not run it fairly (the kernel did not start, or was killed): retried
    output_bytes: int = 0
    truncated: bool = False
    dropped_messages: int = 0
    dropped_records: int = 0  # answer records too large or too many to keep
    seconds: float = 0.0
    sandbox: dict = field(default_factory=dict)
    probes: list[tuple[int, str]] = field(default_factory=list)  # (cell index, a reach for a key), see .probe
    killed: bool = False  # the kernel died of SIGKILL or of its memory cap during the notebook's cells

    def notes(self) -> list[str]:
        """Execution events in words, for the feedback page: exception names the notebook made up, and every
        exception's text, stay out (a kernel could put anything it read in them)."""
        out = [f"cell {i + 1} raised {error_name(text)}" for i, text in self.errors[:5]]
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
        """Everything but the records themselves (their number only): what a result file keeps.

        Cells are numbered from 1 here, as in the notes, the gradebook and JupyterLab's status bar."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "records"}
        data["errors"] = [(i + 1, text) for i, text in self.errors]
        data["interrupted"] = [i + 1 for i in self.interrupted]
        data["probes"] = [(i + 1, what) for i, what in self.probes]
        data["stopped_at"] = None if self.stopped_at is None else self.stopped_at + 1
        data = json.loads(json.dumps(data, default=str))
        data["records"] = len(self.records)
        return data


def error_name(text: str) -> str:
    """'ValueError: ...' -> 'ValueError' for Python's own exceptions and roofkit's; anything else is unnamed."""
    name = str(text).split(":", 1)[0].strip()
    known = getattr(builtins, name, None)
    if isinstance(known, type) and issubclass(known, BaseException) or \
            isinstance(getattr(errors, name, None), type) or name in ("KeysWithheld", "UnknownQuestion"):
        return name
    return "an exception of its own (its name and text are not shown)"


def _package_copy(folder: str, uid: int | None) -> str:
    """Without a sandbox: a copy of the bank-less roofkit for this kernel alone, read-only (a kernel that rewrites
    the copy all kernels share would change what its classmates' kernels run)."""
    target = os.path.join(folder, "pkg")
    shutil.copytree(stripped.package(), target)
    for path, dirs, files in os.walk(target):
        os.chmod(path, 0o555)
        for name in files:
            os.chmod(os.path.join(path, name), 0o444)
    return target


def sandbox_settings(limits: Limits, folder: str, jail=None, host_package: str | None = None) -> dict:
    """The settings :mod:`roofkit.grading.sandbox` applies, for a process working in ``folder``.

    The process imports the copy of roofkit without its question bank, may not read the real package or a
    private bank (Landlock), and reports any attempt to (the watch, given the hashes of those paths only).
    ``jail``: the :class:`~roofkit.grading.jail.Jail` it runs in (its user, where it sees the package).
    """
    host_package = host_package or stripped.package()
    package = jail.package(host_package) if jail is not None else host_package
    hidden = stripped.hidden()
    tripwire = os.path.join(package, "roofkit", stripped.BANK)
    watched = [*hidden, tripwire]
    # folders the watch need not check (thousands of imports): the installation, unless a hidden path is in it
    trusted = [p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}
               if not any(os.path.realpath(h).startswith(os.path.realpath(p) + os.sep) for h in hidden)]
    read = sandbox.read_paths(host_package, hidden)
    uid = jail.uid if jail is not None else None
    own_count = jail is not None and (uid is not None or (jail.bubble and not jail.plan.root))
    return {"write": [folder], "read": [package if p == host_package else p for p in read], "host_read": read,
            "landlock": limits.landlock, "uid": uid, "gid": jail.gid if jail is not None else None,
            "memory_bytes": limits.memory_bytes, "file_bytes": limits.file_bytes,
            # where a cgroup counts the processes, the per-user limit is looser, so that the cgroup's (which the
            # grader sees, and stops the notebook at) is the one a fork bomb meets
            "processes": (limits.processes * (2 if jail is not None and jail.cgroup is not None else 1)
                          + (_tasks_of(os.getuid()) if uid is None else 0)) if own_count else None,
            "cpu_s": int(2 * limits.notebook_s + 30), "output_chars": limits.output_bytes,
            "package": package, "host_package": host_package, "graded": True,
            "hidden": [probe.digest(p) for p in watched],
            "quiet": [os.path.join(tripwire, "__init__.py"), os.path.join(tripwire, "__pycache__")],
            "trusted": trusted}


def _tasks_of(uid: int) -> int:
    """Processes and threads of ``uid`` now (a process limit in a user namespace may count them on old kernels)."""
    count = 0
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status", encoding="ascii", errors="replace") as file:
                    text = file.read()
                if f"\nUid:\t{uid}\t" in text:
                    count += int(text.split("\nThreads:\t", 1)[1].split()[0])
            except (OSError, IndexError, ValueError):
                continue
    return count


def sandbox_env(folder: str) -> dict:
    """A clean environment: nothing of the grader's, every tool's state inside ``folder``."""
    root = Path(folder)
    home = root / "work"
    return {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home), "TMPDIR": str(root / "tmp"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
        "IPYTHONDIR": str(root / "ipython"), "MPLCONFIGDIR": str(root / "matplotlib"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "JUPYTER_CONFIG_DIR": str(root / "jupyter"), "JUPYTER_DATA_DIR": str(root / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(root / "jupyter"), "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1",
        "PYDEVD_DISABLE_FILE_VALIDATION": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1", "NUMEXPR_MAX_THREADS": "1", "JPY_PARENT_PID": str(os.getpid()),
        "ROOFKIT_SANDBOX_FOLDER": str(root),
    }


def make_folder(notebook, uid: int | None = None) -> str:
    """A private folder holding only ``work/submission.ipynb``; owned by ``uid`` when one is set.

    Named after this grader's process id, so that a later grader can tell one a killed run left (:func:`jail.reap`).
    """
    hold_lock()
    folder = tempfile.mkdtemp(prefix=f"{PREFIX}-{os.getpid()}-")
    for name in ("work", "tmp", "ipython", "matplotlib", "jupyter", "cache"):
        os.mkdir(os.path.join(folder, name), 0o700)
    # plain JSON: nbformat.writes validates the whole notebook first, which took minutes on a crafted one
    Path(folder, "work", "submission.ipynb").write_text(json.dumps(notebook, default=str), encoding="utf-8",
                                                         errors="replace")
    if uid is not None:
        for path, dirs, files in os.walk(folder):
            for name in [path, *(os.path.join(path, n) for n in dirs + files)]:
                os.chown(name, uid, uid)
    return folder


class Box:
    """A sandboxed process's outside: its private folder, its jail, its settings and environment, its reports.

    Used for a kernel and for the process that runs a code question's cases.
    """

    def __init__(self, limits: Limits, plan, notebook=None):
        import nbformat  # deferred: nbformat costs ~1.4 s at import

        self.limits, self.plan = limits, plan
        self.jail = None
        self.host = make_folder(notebook if notebook is not None else nbformat.v4.new_notebook())
        self.keys_fd = None
        try:
            self.jail = jail.Jail(plan, limits, self.host)
            host_package = None if self.jail.bubble else _package_copy(self.host, self.jail.uid)
            self.settings = sandbox_settings(limits, self.jail.folder, self.jail, host_package)
            self.env = {**sandbox_env(self.jail.folder), "PYTHONPATH": self.settings["package"]}
            if self.jail.bubble:  # its parent is PID 1 of its namespace: ipykernel must not watch for the grader
                self.env.pop("JPY_PARENT_PID")
            self.binds = {}
            if self.jail.bubble:  # reports of child processes arrive through a pipe: nothing of the disk is writable
                fifo = os.path.join(self.host, "keys.fifo")
                os.mkfifo(fifo, 0o622)
                self.keys_fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
                self.binds[fifo] = os.path.join(self.jail.folder, KEYS_LOG)
            if self.jail.uid is not None:
                for path, dirs, files in os.walk(self.host):
                    if os.path.basename(path) == "pkg" or "/pkg/" in path + "/":
                        continue
                    for name in [path, *(os.path.join(path, n) for n in dirs + files)]:
                        os.chown(name, self.jail.uid, self.jail.gid)
        except BaseException:
            self.close()
            raise

    def describe(self) -> dict:
        return {**self.plan.to_dict(), "user": self.jail.user_note()}

    def popen(self, args: list[str], *, pass_fds=(), binds: dict[str, str] | None = None,
              writable: dict[str, str] | None = None, extra_settings: dict | None = None, **kwargs):
        """Start ``python -I -c BOOT PACKAGE ARGS`` in the jail, with the settings in its environment."""
        settings = {k: v for k, v in self.settings.items() if k not in ("host_read", "host_package")}
        settings.update(extra_settings or {})
        return self.jail.popen(sandbox.command(self.settings["package"], *args), read=self.settings["host_read"],
                               host_package=self.settings["host_package"], binds={**self.binds, **(binds or {})},
                               writable=writable or {},
                               env={**self.env, "ROOFKIT_SANDBOX": json.dumps(settings)},
                               cwd=os.path.join(self.jail.folder, "work"), pass_fds=pass_fds, **kwargs)

    def reports(self) -> list[str]:
        """What processes started by the notebook reached for (see roofkit.grading.release.report), at most 20."""
        if self.keys_fd is not None:
            data = b""
            while len(data) < 100_000:
                try:
                    chunk = os.read(self.keys_fd, 65536)
                except (BlockingIOError, OSError):
                    break
                if not chunk:
                    break
                data += chunk
            self._keys = getattr(self, "_keys", b"") + data
            lines = self._keys[:100_000].decode("utf-8", errors="replace").splitlines()
            return list(dict.fromkeys(line.strip()[:300] for line in lines if line.strip()))[:20]
        return child_reports(self.host)

    def close(self) -> None:
        if self.jail is not None:
            self.jail.close()
        if self.keys_fd is not None:
            os.close(self.keys_fd)
            self.keys_fd = None
        shutil.rmtree(self.host, ignore_errors=True)


class _Kernel:
    """A sandboxed IPython kernel and a blocking client on it, started and torn down by hand."""

    def __init__(self, box: Box, limits: Limits, context):
        from jupyter_client import BlockingKernelClient  # deferred: jupyter_client costs ~0.12 s at import
        from jupyter_client.connect import write_connection_file  # deferred: jupyter_client costs ~0.12 s at import

        self.box, self.folder, self.limits = box, box.host, limits
        self.watch = probe.Watch()
        self.log = self.process = self.iopub = self.monitor = self.client = None
        self.received_bytes = 0
        # the channels are Unix sockets in a folder of this kernel's (jupyter_client's "ipc" transport), never
        # network ports: a kernel in bubblewrap has a network namespace of its own, with nothing in it to reach
        # a short path: a Unix socket's path is at most 107 bytes, and TMPDIR can be long (pytest's is)
        sockets = self.sockets = tempfile.mkdtemp(prefix=f"{PREFIX}-{os.getpid()}-ipc-", dir=jail.short_temp())
        if box.jail.uid is not None:
            os.chown(sockets, box.jail.uid, box.jail.gid)
        sockets_inside = os.path.join(box.jail.folder, "ipc") if box.jail.bubble else sockets
        connection, _ = write_connection_file(os.path.join(box.host, "kernel.json"), transport="ipc",
                                              ip=os.path.join(sockets, "k"))
        inside = os.path.join(box.jail.folder, "kernel.json")
        binds = {}
        if box.jail.bubble:  # the same sockets, by the path the kernel sees them at
            with open(connection, encoding="utf-8") as file:
                info = json.load(file)
            seen = os.path.join(box.host, "kernel-inside.json")
            with open(seen, "w", encoding="utf-8") as file:
                json.dump({**info, "ip": os.path.join(sockets_inside, "k")}, file)
            binds = {seen: inside}
            connection_for_kernel = seen
        else:
            connection_for_kernel = connection
        if box.jail.uid is not None:
            os.chown(connection_for_kernel, box.jail.uid, box.jail.gid)
        # its own stdout and stderr go nowhere: a file of the grader's would be a place outside its tmpfs it could
        # fill (its outputs travel as messages, counted and capped)
        self.log = open(os.devnull, "wb")
        settings = {"ports_from_connection_file": True, "probe_fd": self.watch.write_fd}
        if not box.jail.bubble:  # the sockets' folder is outside its own: Landlock must let it make them there
            settings["write"] = [*box.settings["write"], sockets]
        try:
            self.process = box.popen(["-f", inside, "--HistoryManager.enabled=False"], pass_fds=(self.watch.write_fd,),
                                     binds=binds, writable={sockets: sockets_inside} if box.jail.bubble else {},
                                     extra_settings=settings, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        finally:
            self.watch.handed_over()
        self.client = BlockingKernelClient(context=context)
        self.client.load_connection_file(connection)
        self.client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        self._connect_iopub()

    def _connect_iopub(self) -> None:
        """A fresh subscription to the kernel's outputs, watched for dropped connections."""
        import zmq  # deferred: zmq costs ~20 ms at import
        from jupyter_client.channels import ZMQSocketChannel  # deferred: jupyter_client costs ~0.12 s at import

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

    def next_message(self, timeout: float, parent: str | None = None):
        """The kernel's next output message (:class:`Empty` when none comes within ``timeout`` s).

        Every byte received counts in ``received_bytes``, whatever the message; one from another ``parent`` (not
        the running cell's) is checked for its signature and dropped with its content unparsed (None), so a kernel
        cannot make the grader parse megabytes it never counts. ZeroMQ keeps at most :data:`RECEIVE_QUEUE` messages
        of at most ``Limits.message_bytes`` each waiting.
        """
        socket = self.iopub.socket
        if not socket.poll(max(0, int(timeout * 1000))):
            raise Empty
        frames = socket.recv_multipart()
        self.received_bytes += sum(len(frame) for frame in frames)
        session = self.client.session
        _, parts = session.feed_identities(frames)
        msg = session.deserialize(parts, content=False)
        if parent is not None and (msg.get("parent_header") or {}).get("msg_id") != parent:
            return None
        msg["content"] = session.unpack(msg["content"])
        return msg

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
                until = min(deadline, time.monotonic() + 5.0)
                while time.monotonic() < until:  # the rest of the start-up messages are of no interest
                    try:
                        self.iopub.get_msg(timeout=0.05)
                    except Exception:  # noqa: BLE001 - Empty, or an undecodable message
                        return True
                return True
        return False

    def disconnected(self) -> int:
        """How many times ZeroMQ dropped the output connection (a message over the size cap); reconnects.

        ZeroMQ treats an oversized message as a protocol error and does not reconnect by itself.
        """
        import zmq  # deferred: zmq costs ~20 ms at import

        count = 0
        while self.monitor.poll(0):
            self.monitor.recv_multipart(zmq.NOBLOCK)
            count += 1
        if count and self.alive():
            self._connect_iopub()
        return count

    def interrupt(self) -> None:
        self.box.jail.interrupt()

    def exit_reason(self) -> str:
        code = self.process.poll()
        if code is None:
            return "is still running"
        if self.box.jail.oom_killed():
            return f"was killed for using more than its {self.limits.memory_bytes / 2**30:g} GB of memory"
        if self.box.jail.bubble and code > 128:  # bubblewrap exits with 128 + the signal that ended the kernel
            code = -(code - 128)
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else f"signal {-code}"
            return f"crashed ({name})"
        return f"exited (status {code})"

    def killed(self) -> bool:
        """Ended by the OOM killer or a SIGKILL (its own, or the machine's: the grader sends none while a cell
        runs)."""
        code = self.process.poll()
        if code is None:
            return False
        return self.box.jail.oom_killed() or code == -signal.SIGKILL or (self.box.jail.bubble and code == 128 + 9)

    def close(self) -> None:
        if self.iopub is not None:
            self._close_iopub()
        if self.client is not None:
            self.client.stop_channels()
        self.box.jail.close()
        if getattr(self, "sockets", None):
            shutil.rmtree(self.sockets, ignore_errors=True)
        if self.log is not None:
            self.log.close()
        self.watch.close()

    def disk_used(self) -> int:
        if self.box.jail.bubble:  # its files are in its own size-limited tmpfs
            return 0
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
    try:
        with open(os.path.join(folder, KEYS_LOG), encoding="utf-8", errors="replace") as file:
            lines = file.read(100_000).splitlines()
    except OSError:
        return []
    return list(dict.fromkeys(line.strip()[:300] for line in lines if line.strip()))[:20]


def kill_strays(folder: str) -> None:
    """Kill processes a submission started in a session of their own (see :func:`roofkit.grading.jail.kill_marked`)."""
    kill_marked(folder)


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
                try:
                    size = len(json.dumps(record))
                except (TypeError, ValueError, RecursionError):  # nested past what JSON writes: not an answer
                    self.run.dropped_records += 1
                    return
                if (size > MAX_RECORD_BYTES or len(self.run.records) >= MAX_RECORDS
                        or self.records_bytes + size > MAX_RECORDS_BYTES):
                    self.run.dropped_records += 1
                else:
                    self.records_bytes += size
                    self.run.records.append((index, clean(record)))  # nesting cut short: nothing reads deeper
        elif kind == "error" and len(self.run.errors) < MAX_ERRORS:
            text = f"{str(content.get('ename', 'Error'))[:100]}: {str(content.get('evalue', ''))[:200]}"
            self.run.errors.append((index, text[:300]))

    def cell(self, index: int, code: str, deadline: float) -> str:
        """Run one cell; 'done', 'timeout', 'dead', 'flood', 'disk' or 'processes'."""
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
                try:  # counted and bounded like every other message (another cell's dropped unparsed)
                    msg = self.kernel.next_message(0.1, parent=probe)
                except Exception:  # noqa: BLE001 - Empty, or an undecodable message
                    continue
                if msg is not None and msg["msg_type"] == "status" and \
                        msg["content"].get("execution_state") == "idle":
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
                if self.kernel.box.jail.process_limit_hit():
                    return "processes"
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
                msg = self.kernel.next_message(min(0.1, max(0.0, deadline - now)), parent=msg_id)
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
                msg = None
            if self.kernel.received_bytes > 8 * self.limits.output_bytes:
                return "flood"  # every byte counts, of any message, of any parent
            if msg is None:  # another cell's (or no cell's) message: dropped unparsed
                continue
            if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                return "done"
            self._handle(index, msg)
            if self.run.output_bytes > 8 * self.limits.output_bytes:
                return "flood"

    def drain(self, index: int, msg_id: str, wait_s: float = 2.0) -> None:
        """Collect what a dying kernel managed to send (for ``wait_s`` at most: something else may hold its port)."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and self.kernel.received_bytes <= 8 * self.limits.output_bytes:
            try:
                msg = self.kernel.next_message(0.2, parent=msg_id)
            except Exception:  # noqa: BLE001 - Empty, or an undecodable message
                return
            if msg is not None:
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


def main(notebook, *, limits: Limits = Limits(), context=None, cancel=None, preamble: str | None = None,
         plan=None) -> Run:
    """Execute ``notebook`` (a path or an nbformat notebook) in a sandboxed kernel; never raises for its content.

    ``cancel``: a ``threading.Event``; when set, execution stops at the next cell (the grader is shutting down).
    ``preamble``: code the grader runs first, as cell -1 (the release's questions, from its own copy).
    ``plan``: how kernels are sandboxed (:func:`roofkit.grading.jail.choose`; default: from ``limits.sandbox``).
    A kernel that does not start, or is killed from outside its own code (the OOM killer), sets ``Run.failed``.
    """
    import zmq  # deferred: zmq costs ~20 ms at import

    notebook = _fresh(notebook)
    started = time.monotonic()
    plan = plan or jail.choose(limits.sandbox)
    run = Run(sandbox=plan.to_dict())
    own_context = context is None
    if own_context:
        context = zmq.Context()
        context.setsockopt(zmq.MAXMSGSIZE, limits.message_bytes)
        context.setsockopt(zmq.RCVHWM, RECEIVE_QUEUE)  # messages waiting in the grader: a few, not ZeroMQ's 1,000
    kernel = box = None
    try:
        kernel, box = _start_kernel(notebook, limits, context, plan, run)
        if kernel is None:
            run.stopped, run.stopped_at = run.failed or "the kernel did not start", 0
            return run
        run.failed = None
        executor = _Executor(kernel, limits, run)
        notebook_deadline = started + limits.notebook_s
        if preamble:
            _run_preamble(executor, preamble, limits, notebook_deadline)
        _run_cells(executor, kernel, notebook, limits, run, cancel, notebook_deadline)
        return run
    finally:
        _close(kernel, box, run)
        if own_context:
            context.destroy(linger=0)
        run.seconds = time.monotonic() - started


def _fresh(notebook):
    """The notebook (read, if a path) with its code cells' outputs and execution counts cleared."""
    import nbformat  # deferred: nbformat costs ~1.4 s at import

    if not isinstance(notebook, nbformat.NotebookNode):
        notebook = nbformat.read(str(notebook), as_version=4)
    for cell in notebook.cells:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return notebook


def _start_kernel(notebook, limits: Limits, context, plan, run: Run):
    """A kernel in its sandbox, ready: (kernel, box), or (None, None) with ``run.failed`` saying why it did not start.

    A port taken between choosing and binding it: up to three tries. What an interruption leaves is closed.
    """
    kernel = box = None
    try:
        for attempt in range(3):  # a port taken between choosing and binding it: try again
            box = Box(limits, plan, notebook)
            run.sandbox = box.describe()
            try:
                kernel = _Kernel(box, limits, context)
            except OSError as error:  # the sandbox itself could not start (a missing bwrap, no memory left)
                box.close()
                box = None
                run.failed = f"the kernel's sandbox did not start ({type(error).__name__}: {error})"[:300]
                continue
            if kernel.wait_ready(limits.startup_s):
                break
            why = kernel.exit_reason()
            kernel.close()
            box.close()
            kernel = box = None
            run.failed = f"the kernel did not start within {limits.startup_s:g} s (it {why})"
    except BaseException:
        _close(kernel, box, run)
        raise
    return kernel, box


def _close(kernel, box, run: Run) -> None:
    """Close the kernel, then its sandbox, keeping what the sandbox's probes reported in ``run``."""
    if box is not None:
        run.probes += [(-2, what) for what in box.reports()]
    if kernel is not None:
        kernel.close()
    if box is not None:
        box.close()


def _run_preamble(executor: _Executor, preamble: str, limits: Limits, notebook_deadline: float) -> None:
    """The grader's own code, as cell -1; a fresh kernel's first run may be slow, so the start-up time applies."""
    if executor.cell(-1, preamble, min(time.monotonic() + max(limits.cell_s, limits.startup_s),
                                       notebook_deadline)) == "timeout":
        executor.interrupt(executor.msg_id, wait_s=5.0)
        executor.resync(min(notebook_deadline, time.monotonic() + 10))


def _run_cells(executor: _Executor, kernel, notebook, limits: Limits, run: Run, cancel, notebook_deadline) -> None:
    """The notebook's code cells in order, until one stops it; ``run.stopped`` says where and why."""
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
            try:
                kernel.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            run.stopped = f"the kernel {kernel.exit_reason()} at cell {index + 1}; later cells did not run"
            run.stopped_at = index
            # the notebook's own doing (os.kill, os._exit(137), memory past its cap), and so its result: the
            # answers recorded before stand, the rest score 0, the same on every run. Never an `error` that a
            # student could pick to stay ungraded (a blank grade in the LMS).
            run.killed = kernel.killed()
            break
        if outcome == "disk":
            run.stopped = (f"cell {index + 1} wrote more than {limits.disk_bytes / 2**20:,.0f} MB of files; "
                           "the notebook was stopped there")
            run.stopped_at = index
            break
        if outcome == "processes":
            run.stopped = (f"cell {index + 1} started more than {limits.processes} processes and threads at "
                           "once; the notebook was stopped there")
            run.stopped_at = index
            break
        if outcome == "flood":
            run.stopped = (f"cell {index + 1} printed more than {8 * limits.output_bytes:,} bytes; "
                           "the notebook was stopped there")
            run.stopped_at = index
            break
