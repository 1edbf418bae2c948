"""The sandbox around a student's code, as the grader sets it up from outside.

:mod:`roofkit.grading.sandbox` is what a sandboxed process does to itself
before any student code runs (resource limits, dropping privileges, Landlock,
the watch); this module is what the grader does around it. One of two plans
applies to a whole grading run (:func:`choose`):

``bubblewrap``
    Each kernel (and each run of a code question's cases) is started with
    bubblewrap (``bwrap``, from the distribution's packages: Debian and Ubuntu
    ``bubblewrap``, Fedora ``bubblewrap``), the sandbox Flatpak uses:

    * its own PID namespace: the process tree ends with the kernel (a detached
      or re-forked process cannot outlive it), and ``/proc`` shows only it;
    * its own IPC and UTS namespaces and a new session (no terminal to inject into);
    * an unprivileged user: with the grader as root, a user id of its own for
      each kernel (so a process limit counts that kernel's processes only);
      otherwise a user namespace where it is ``student``;
    * a private temporary folder, a ``tmpfs`` of ``Limits.disk_bytes`` at
      ``/tmp``: the only place it can write (its notebook's folder, ``HOME``,
      ``TMPDIR`` are in it); files it deletes while holding them open still
      count, and everything goes when the kernel ends;
    * read-only: the Python installation, the copy of roofkit without its
      question bank, the system's libraries; of ``/etc`` only a made-up
      ``passwd`` and ``group``, ``ld.so.cache``, ``localtime`` and ``fonts``;
    * where the grader may create control groups (root, on most Linux
      machines), a cgroup per kernel that caps the memory all its processes
      hold (its temporary files included), their number, and its CPU to one
      core; a kernel the OOM killer stops is reported as such.

    Inside, :mod:`.sandbox` still sets resource limits and Landlock.

``none``
    No sandbox: Landlock where the Linux kernel offers it (the real roofkit
    package, private banks, other students' files and most of ``/etc`` stay
    unreadable), resource limits per process, a user of its own when the
    grader is root and others may run its Python, and a copy of roofkit per
    kernel. Processes that leave the kernel's session are found afterwards
    by their environment or their user id and killed. ``roofkit grade``
    uses it only when the instructor asks for it (``--sandbox none``).

Every result records the plan (:meth:`Plan.describe`), and the reports show
it. :func:`reap` removes what a grader that was killed left: its temporary
folders, processes, control groups.
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import json
import os
import platform
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import InvalidValue
from .sandbox import landlock_abi

__all__ = ["Plan", "choose", "Jail", "reap", "SandboxUnavailable", "PREFIX", "MODES"]

MODES = ("auto", "bubblewrap", "none")
BWRAP_ENV = "ROOFKIT_BWRAP"  # the bwrap to use (default: the one on PATH); the tests point it at nothing
PREFIX = "roofkit-grade"  # temporary folders: PREFIX-<grader pid>-..., cgroups: PREFIX-<grader pid>-<random>-<n>
INNER_FOLDER = "/tmp/sandbox"  # a kernel's folder, inside bubblewrap
INNER_PACKAGE = "/roofkit-graded"  # the copy of roofkit without its bank, inside bubblewrap
INNER_UID = 1000  # the sandbox user's id inside a user namespace (a grader that is not root)
_SLOT_BASE, _SLOTS = 1_100_000_000, 256  # as root: kernel user ids, _SLOTS per grader process
_ETC = ("ld.so.cache", "localtime", "fonts")  # what Python and matplotlib read of /etc, besides passwd and group


class SandboxUnavailable(InvalidValue):
    """No sandbox for student code on this machine, and the instructor did not ask to grade without one."""


@dataclass(frozen=True)
class Plan:
    """How every kernel of one grading run is sandboxed."""

    kind: str  # "bubblewrap" | "none"
    bwrap: str | None = None
    bwrap_version: str | None = None
    tmpfs_size: bool = False  # bwrap can cap its tmpfs (--size, bubblewrap 0.7 and later)
    cgroup: str | None = None  # "v2", "v1" or None: per-kernel limits on memory, processes and CPU
    landlock_abi: int = 0
    root: bool = False
    why_not: str | None = None  # why bubblewrap is not used (kind "none")

    def describe(self) -> str:
        """One line for the reports: what fenced each kernel."""
        landlock = f"Landlock ABI {self.landlock_abi}" if self.landlock_abi else "no Landlock"
        if self.kind == "bubblewrap":
            parts = ["own PID and network namespaces (no network)",
                     "a user id of its own" if self.root else "a user namespace",
                     "private temp folder" + (" (size-limited)" if self.tmpfs_size else " (not size-limited)"),
                     "read-only system, minimal /etc"]
            parts.append(f"cgroup {self.cgroup}: memory, processes, one CPU" if self.cgroup else
                         "no cgroup: per-process limits only")
            return f"bubblewrap {self.bwrap_version or ''}".strip() + f" ({', '.join(parts)}; {landlock}, rlimits)"
        who = "a user id of its own" if self.root and _others_run_python() else (
            "root without capabilities" if self.root else "the grader's own user")
        return (f"none: no sandbox, graded with --sandbox none ({landlock}, rlimits, {who}; processes that leave "
                "the kernel are killed afterwards if they can be found)")

    def to_dict(self) -> dict:
        return {**asdict(self), "description": self.describe()}


# --- choosing ------------------------------------------------------------------------------


def _landlock_abi() -> int:
    return landlock_abi()


@functools.lru_cache(maxsize=None)
def _bubblewrap(path: str) -> tuple[str | None, str | None, bool]:
    """(version, why it cannot be used, supports --size) for the bwrap at ``path``."""
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.split()
        helptext = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"bwrap at {path} does not run ({error})", False
    sized = "--size" in helptext
    probe = [path, *_namespaces(os.geteuid() == 0), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
             *(["--size", "1000000"] if sized else []), "--tmpfs", "/tmp", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as error:
        return None, f"bwrap does not run ({error})", sized
    if done.returncode != 0:
        return None, f"bwrap cannot create its namespaces here ({done.stderr.strip()[:160]})", sized
    return (version[-1] if version else "?"), None, sized


def _namespaces(root: bool) -> list[str]:
    # --unshare-net: a network namespace of its own, with only a loopback: no socket of any protocol (TCP,
    # MPTCP, UDP, SCTP) reaches the machine or beyond, and no port of the machine's is visible. The grader talks
    # to a kernel over Unix sockets in a folder bound in (transport "ipc"), not over the network.
    args = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net",
            "--hostname", "sandbox", "--unshare-cgroup-try"]
    if not root:
        args += ["--unshare-user", "--uid", str(INNER_UID), "--gid", str(INNER_UID)]
    return args


def choose(mode: str = "auto") -> Plan:
    """The plan for this machine: ``auto`` and ``bubblewrap`` need bwrap (else :class:`SandboxUnavailable`);
    ``none`` is the instructor's explicit choice to grade without a sandbox."""
    if mode not in MODES:
        raise InvalidValue(f"unknown --sandbox {mode!r}; expected one of: {', '.join(MODES)}.")
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    abi = _landlock_abi()
    path = os.environ.get(BWRAP_ENV) or shutil.which("bwrap")
    why = None
    if platform.system() != "Linux":
        why = f"bubblewrap needs Linux; this is {platform.system()}"
    elif not path or not os.path.exists(path):
        why = "bubblewrap (bwrap) is not installed"
    if why is None:
        version, why, sized = _bubblewrap(path)
    if mode == "none":
        return Plan("none", landlock_abi=abi, root=root, why_not=why or "the instructor chose --sandbox none")
    if why is not None:
        raise SandboxUnavailable(
            f"no sandbox for student code here: {why}. Install bubblewrap (Debian/Ubuntu: apt-get install "
            "bubblewrap; Fedora: dnf install bubblewrap), or grade with --sandbox none to run each kernel with "
            "Landlock and resource limits only (docs/instructors.md, section 6).")
    return Plan("bubblewrap", bwrap=path, bwrap_version=version, tmpfs_size=sized, cgroup=_cgroups_version(),
                landlock_abi=abi, root=root)


@functools.lru_cache(maxsize=None)
def _others_run_python() -> bool:
    """Whether a user other than the grader can start this Python and roofkit's dependencies (as root only)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    try:
        probe = subprocess.run([sys.executable, "-I", "-c", "import ipykernel, numpy"], user=_SLOT_BASE - 1,
                               group=_SLOT_BASE - 1, extra_groups=[], cwd="/", capture_output=True, timeout=120,
                               env={"PATH": "/usr/bin:/bin"})
        return probe.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


# --- control groups ------------------------------------------------------------------------


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of each cgroup file system."""
    found = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as file:
            for line in file:
                left, _, right = line.partition(" - ")
                fields, tail = left.split(), right.split()
                if len(fields) > 4 and len(tail) > 2 and tail[0] in ("cgroup", "cgroup2"):
                    found.append((fields[4], tail[0], tail[2]))
    except OSError:
        pass
    return found


def _own_cgroups() -> dict[str, str]:
    """controller (or "" for cgroup v2) -> this process's cgroup path."""
    own = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as file:
            for line in file:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else [""]:
                    own[name] = path
    except (OSError, ValueError):
        pass
    return own


def _read_text(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as file:
        return file.read()


def _writable_dir(path: str) -> bool:
    probe = os.path.join(path, f"{PREFIX}-probe-{os.getpid()}")
    try:
        os.mkdir(probe)
        os.rmdir(probe)
        return True
    except OSError:
        return False


@functools.lru_cache(maxsize=None)
def _cgroup_bases() -> tuple[str | None, dict[str, str]]:
    """("v2" or "v1", {controller: the folder new cgroups go in}), or (None, {}) where the grader may not."""
    if platform.system() != "Linux":
        return None, {}
    mounts, own = _mounts(), _own_cgroups()
    for point, kind, _ in mounts:
        if kind != "cgroup2":
            continue
        try:
            enabled = _read_text(os.path.join(point, "cgroup.subtree_control")).split()
        except OSError:
            continue
        if {"memory", "pids"} <= set(enabled) and _writable_dir(point):
            return "v2", {"": point}
    bases = {}
    for name in ("memory", "pids", "cpu"):
        for point, kind, options in mounts:
            if kind == "cgroup" and name in options.split(","):
                base = os.path.join(point, own.get(name, "/").lstrip("/"))
                if _writable_dir(base):
                    bases[name] = base
                break
    if "memory" in bases and "pids" in bases:
        return "v1", bases
    return None, {}


def _cgroups_version() -> str | None:
    return _cgroup_bases()[0]


class _Cgroup:
    """One kernel's control group(s): memory, process and CPU limits that count all of its processes."""

    _count = 0
    _lock = threading.Lock()

    def __init__(self, memory_bytes: int, processes: int, cpus: float):
        version, bases = _cgroup_bases()
        with _Cgroup._lock:
            _Cgroup._count += 1
            # a random part: pids are reused (often: pid_max may be 32768), and a killed grader's cgroups remain
            # until the next grader reaps them
            name = f"{PREFIX}-{os.getpid()}-{os.urandom(4).hex()}-{_Cgroup._count}"
        self.version, self.paths = version, {}
        try:
            for controller, base in bases.items():
                path = os.path.join(base, name)
                os.mkdir(path)
                self.paths[controller] = path
            self._limit(memory_bytes, processes, cpus)
        except OSError:
            self.remove()
            raise

    def _limit(self, memory_bytes: int, processes: int, cpus: float) -> None:
        period = 100_000
        if self.version == "v2":
            self._write("", "memory.max", memory_bytes)
            self._write("", "memory.swap.max", 0, optional=True)
            self._write("", "pids.max", processes)
            self._write("", "cpu.max", f"{int(period * cpus)} {period}", optional=True)
        else:
            self._write("memory", "memory.limit_in_bytes", memory_bytes)
            self._write("memory", "memory.memsw.limit_in_bytes", memory_bytes, optional=True)
            self._write("pids", "pids.max", processes)
            if "cpu" in self.paths:
                self._write("cpu", "cpu.cfs_period_us", period, optional=True)
                self._write("cpu", "cpu.cfs_quota_us", int(period * cpus), optional=True)

    def _write(self, controller: str, name: str, value, optional: bool = False) -> None:
        try:
            with open(os.path.join(self.paths[controller], name), "w", encoding="utf-8") as file:
                file.write(str(value))
        except (OSError, KeyError):
            if not optional:
                raise

    def procs_files(self) -> list[str]:
        return [os.path.join(p, "cgroup.procs") for p in self.paths.values()]

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        path = os.path.join(self.paths["" if self.version == "v2" else "memory"], name)
        try:
            for line in _read_text(path).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def forks_refused(self) -> int:
        """How many times a process of this cgroup could not start another: the process limit was reached."""
        path = os.path.join(self.paths["" if self.version == "v2" else "pids"], "pids.events")
        try:
            for line in _read_text(path).splitlines():
                key, _, value = line.partition(" ")
                if key == "max":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def kill(self) -> None:
        _kill_cgroup(list(self.paths.values()), self.version)

    def remove(self) -> None:
        self.kill()
        for path in self.paths.values():
            _rmdir_cgroup(path)


def _kill_cgroup(paths: list[str], version: str | None) -> None:
    """SIGKILL every process in these cgroups (cgroup.kill where there is one), until none is left."""
    for path in paths:
        try:
            with open(os.path.join(path, "cgroup.kill"), "w") as file:
                file.write("1")
        except OSError:
            pass
    for _ in range(50):
        pids = set()
        for path in paths:
            try:
                pids |= {int(p) for p in _read_text(os.path.join(path, "cgroup.procs")).split()}
            except (OSError, ValueError):
                pass
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def _rmdir_cgroup(path: str) -> None:
    for _ in range(50):  # a cgroup whose last process is still exiting is busy for a moment
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


# --- one sandboxed process -----------------------------------------------------------------


_slots: set[int] = set()
_slots_lock = threading.Lock()


def _slot_uid(slot: int) -> int:
    return _SLOT_BASE + (os.getpid() % 2**20) * _SLOTS + slot


class Jail:
    """The outside of one sandboxed process (a kernel, or a code question's case runner).

    ``host``: its folder on the grader's disk (the connection file, the watch's pipe, a made-up /etc);
    ``folder``: the folder the process sees as its own (inside bubblewrap, a tmpfs; without, ``host``).
    """

    def __init__(self, plan: Plan, limits, host: str):
        self.plan, self.limits, self.host = plan, limits, host
        self.slot = self.uid = self.gid = None
        self.cgroup = None
        self.process = None
        self.sandbox_pid = None
        wants_user = plan.kind == "bubblewrap" or getattr(limits, "user", "auto") is not None
        if plan.root and wants_user and (plan.kind == "bubblewrap" or _others_run_python()):
            with _slots_lock:
                free = next((s for s in range(_SLOTS) if s not in _slots), None)
                if free is None:
                    raise RuntimeError("more sandboxed processes at once than user ids set aside for them")
                _slots.add(free)
            self.slot = free
            self.uid = self.gid = _slot_uid(free)
        self.bubble = plan.kind == "bubblewrap"
        self.folder = INNER_FOLDER if self.bubble else host
        try:
            if self.bubble and plan.cgroup:
                memory = limits.memory_bytes + (limits.disk_bytes if plan.tmpfs_size else 0)
                self.cgroup = _Cgroup(memory, limits.processes, 1.0)
            if self.bubble:
                _made_up_etc(host, self.uid if self.uid is not None else INNER_UID)
        except BaseException:
            self.close()
            raise

    # what the process inside sees

    def package(self, host_package: str) -> str:
        """Where the process imports the copy of roofkit without its bank from."""
        return INNER_PACKAGE if self.bubble else host_package

    def user_note(self) -> str:
        if self.bubble:
            return f"a user id of its own ({self.uid})" if self.uid is not None else "student (a user namespace)"
        if self.uid is not None:
            return f"a user id of its own ({self.uid})"
        return "root without capabilities" if self.plan.root else "the grader's own user"

    def popen(self, argv: list[str], *, read: list[str], host_package: str, binds: dict[str, str] = (), env: dict,
              cwd: str, pass_fds=(), writable: dict[str, str] = (), **kwargs) -> subprocess.Popen:
        """Start ``argv`` (a sandbox.command) in this jail; ``binds``: host file -> path inside (read-only);
        ``writable``: host folder -> path inside, writable (the kernel's Unix sockets)."""
        if not self.bubble:
            self.process = subprocess.Popen(argv, env=env, cwd=cwd, pass_fds=pass_fds, start_new_session=True,
                                            **kwargs)
            return self.process
        info_read, info_write = os.pipe()
        command = [self.plan.bwrap, *_namespaces(self.plan.root), "--info-fd", str(info_write),
                   *self._layout(read, host_package, dict(binds), dict(writable)), "--chdir", cwd, *argv]
        if self.cgroup is not None:
            files = self.cgroup.procs_files()
            script = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(files)))
            command = ["/bin/sh", "-c", f'{script} && shift {len(files)} && exec "$@"', "sh", *files, *command]
        try:
            self.process = subprocess.Popen(command, env=env, pass_fds=(*pass_fds, info_write),
                                            start_new_session=True, **kwargs)
        finally:
            os.close(info_write)
        self._info = info_read
        return self.process

    def _layout(self, read: list[str], host_package: str, binds: dict[str, str],
                writable: dict[str, str] | None = None) -> list[str]:
        args: list[str] = []
        made: set[str] = {"/"}

        def parents(path: str) -> None:
            parent = os.path.dirname(path.rstrip("/"))
            chain = []
            while parent not in made and parent != "/":
                chain.append(parent)
                parent = os.path.dirname(parent)
            for folder in reversed(chain):
                args.extend(["--perms", "0755", "--dir", folder])
                made.add(folder)

        args += ["--perms", "1777", *(["--size", str(self.limits.disk_bytes)] if self.plan.tmpfs_size else []),
                 "--tmpfs", "/tmp"]
        made.add("/tmp")
        for name in ("", "/work", "/tmp", "/ipython", "/matplotlib", "/jupyter", "/cache"):
            args += ["--perms", "0777", "--dir", INNER_FOLDER + name]
            made.add(INNER_FOLDER + name)
        skip = ("/etc", "/proc", "/sys", "/dev", "/tmp", "/run", "/var")
        chosen = sorted(p for p in read if os.path.exists(p) and p != host_package
                        and not any(p == s or p.startswith(s + "/") for s in skip[:4])
                        and not (p == "/tmp" or p == "/run" or p == "/var"))
        kept = [p for p in chosen if not any(p.startswith(q.rstrip("/") + "/") for q in chosen if q != p)]
        for path in kept:
            if os.path.islink(path) and os.path.dirname(path) == "/":  # /lib -> usr/lib on a merged /usr
                args += ["--symlink", os.readlink(path), path]
                made.add(path)
                continue
            parents(path)
            args += ["--ro-bind", path, path]
            made.add(path)
        args += ["--ro-bind", host_package, INNER_PACKAGE, "--proc", "/proc", "--dev", "/dev"]
        args += ["--perms", "0755", "--dir", "/etc",
                 "--ro-bind", os.path.join(self.host, "etc", "passwd"), "/etc/passwd",
                 "--ro-bind", os.path.join(self.host, "etc", "group"), "/etc/group"]
        for name in _ETC:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        for source, target in binds.items():
            args += ["--ro-bind", source, target]
        for source, target in (writable or {}).items():
            args += ["--bind", source, target]
        return args

    def main_pid(self) -> int | None:
        """The host pid of the process started inside (bubblewrap: the child of its PID 1), for signals."""
        if not self.bubble:
            return self.process.pid if self.process else None
        if self.sandbox_pid is None and getattr(self, "_info", None) is not None:
            if select.select([self._info], [], [], 0)[0]:
                try:
                    self.sandbox_pid = json.loads(os.read(self._info, 4096).decode()).get("child-pid")
                except (OSError, ValueError, AttributeError):
                    pass
        if self.sandbox_pid is None:
            return None
        try:
            with open(f"/proc/{self.sandbox_pid}/task/{self.sandbox_pid}/children", encoding="ascii") as file:
                children = file.read().split()
            return int(children[0]) if children else None
        except (OSError, ValueError):
            return None

    def interrupt(self) -> None:
        """SIGINT to the process inside (an interrupted cell), or to its process group without a sandbox."""
        try:
            if self.bubble:
                pid = self.main_pid()
                if pid:
                    os.kill(pid, signal.SIGINT)
            elif self.process is not None:
                os.killpg(self.process.pid, signal.SIGINT)
        except (ProcessLookupError, PermissionError):
            pass

    def oom_killed(self) -> bool:
        return bool(self.cgroup and self.cgroup.oom_kills())

    def process_limit_hit(self) -> bool:
        """The kernel's processes reached their limit (a fork bomb): known where a cgroup counts them."""
        return bool(self.cgroup and self.cgroup.forks_refused())

    def close(self) -> None:
        """Kill everything the process started, wait for it (bounded), and release its user id and cgroup."""
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if self.cgroup is not None:
                self.cgroup.kill()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        if getattr(self, "_info", None) is not None:
            os.close(self._info)
            self._info = None
        if not self.bubble:
            kill_marked(self.host)
            if self.uid is not None:
                kill_user(self.uid)
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        if self.slot is not None:
            with _slots_lock:
                _slots.discard(self.slot)
            self.slot = None


def _made_up_etc(host: str, uid: int) -> None:
    """passwd and group naming the sandbox's one user (``student``, home in its folder), nothing else."""
    etc = os.path.join(host, "etc")
    os.makedirs(etc, exist_ok=True)
    Path(etc, "passwd").write_text(f"student:x:{uid}:{uid}:student:{INNER_FOLDER}/work:/bin/sh\n", encoding="utf-8")
    Path(etc, "group").write_text(f"student:x:{uid}:\n", encoding="utf-8")
    for name in ("passwd", "group"):
        os.chmod(os.path.join(etc, name), 0o644)
    os.chmod(etc, 0o755)


# --- what processes leave behind -----------------------------------------------------------


def kill_marked(folder: str) -> None:
    """Kill processes whose environment names ``folder`` as their sandbox (started without a PID namespace)."""
    marker = f"ROOFKIT_SANDBOX_FOLDER={folder}".encode()

    def marked(pid: int) -> bool:
        with open(f"/proc/{pid}/environ", "rb") as file:
            return marker in file.read().split(b"\0")

    _kill_all(marked)


def kill_user(uid: int, last: int | None = None) -> None:
    """Kill every process running as a user id from ``uid`` to ``last`` (kernels' own ids: nothing else runs as
    them)."""
    last = uid if last is None else last

    def owned(pid: int) -> bool:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as file:
            uids = next((line.split()[1:] for line in file if line.startswith("Uid:")), [])
        return any(u.isdigit() and uid <= int(u) <= last for u in uids)

    _kill_all(owned)


def _kill_all(matches) -> None:
    """SIGKILL every process ``matches(pid)`` accepts, until none is left (bounded): a killed process keeps its
    environment and ids until it has exited, and one may fork while the others die."""
    for _ in range(20):
        found = False
        for pid in _pids():
            try:
                if matches(pid):
                    found = True
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                continue
        if not found:
            return
        time.sleep(0.05)


def _pids() -> list[int]:
    if not os.path.isdir("/proc"):
        return []
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]


_LOCK = {"file": None}
_LOCK_GUARD = threading.Lock()


def hold_lock() -> None:
    """Mark this grader alive (a lock held until it ends) so that a later one knows what is not stale."""
    with _LOCK_GUARD:
        if _LOCK["file"] is not None:
            return
        path = os.path.join(tempfile.gettempdir(), f"{PREFIX}-{os.getpid()}.lock")
        handle = open(path, "w")
        fcntl.flock(handle, fcntl.LOCK_EX)
        _LOCK["file"] = handle

        atexit.register(_drop_lock, path, handle)


def _drop_lock(path: str, handle) -> None:
    try:
        os.unlink(path)
        handle.close()
    except OSError:
        pass


def short_temp() -> str:
    """A folder for Unix sockets: /tmp where it is writable (its paths stay short), else the temporary folder."""
    return "/tmp" if os.path.isdir("/tmp") and os.access("/tmp", os.W_OK | os.X_OK) else tempfile.gettempdir()


def reap() -> list[str]:
    """Remove what graders that were killed left: temporary folders, their processes and cgroups.

    A grader holds ``PREFIX-<pid>.lock`` locked while it runs; a lock nobody holds belongs to a dead one.
    Returns what was cleaned, in words.
    """
    hold_lock()  # this grader's own lock first: it is alive, whatever a reaper running beside it concludes
    cleaned = []
    temp = tempfile.gettempdir()
    dead = set()
    try:
        entries = os.listdir(temp)
    except OSError:
        return cleaned
    for entry in entries:
        if not (entry.startswith(PREFIX + "-") and entry.endswith(".lock")):
            continue
        pid = entry[len(PREFIX) + 1:-len(".lock")]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(os.path.join(temp, entry), "r+") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                dead.add(int(pid))
        except OSError:
            continue
    sockets_dir = short_temp()
    try:  # a killed grader's socket folders are in short_temp(), which may not be the temporary folder
        socket_entries = os.listdir(sockets_dir) if sockets_dir != temp else []
    except OSError:
        socket_entries = []
    for pid in sorted(dead):
        prefixes = (f"{PREFIX}-{pid}-", f"roofkit-graded-{pid}-")
        for where, listed in ((temp, entries), (sockets_dir, socket_entries)):
            for entry in listed:
                if entry.startswith(prefixes):
                    folder = os.path.join(where, entry)
                    kill_marked(folder)
                    shutil.rmtree(folder, ignore_errors=True)
                    cleaned.append(f"removed {folder}")
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            first = _SLOT_BASE + (pid % 2**20) * _SLOTS
            kill_user(first, first + _SLOTS - 1)
        try:
            os.unlink(os.path.join(temp, f"{PREFIX}-{pid}.lock"))
        except OSError:
            pass
    _, bases = _cgroup_bases()
    version = _cgroup_bases()[0]
    for base in set(bases.values()):
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            parts = name.split("-")
            if not name.startswith(PREFIX + "-") or len(parts) < 4 or not parts[2].isdigit():
                continue
            owner = int(parts[2])
            if owner == os.getpid() or (owner not in dead and os.path.exists(f"/proc/{owner}")):
                continue
            path = os.path.join(base, name)
            _kill_cgroup([path], version)
            _rmdir_cgroup(path)
            cleaned.append(f"removed cgroup {path}")
    return cleaned
