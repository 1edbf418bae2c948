"""The fence a sandboxed process puts on itself: limits, privileges and the files it may touch.

The sandbox around it (bubblewrap's namespaces, its tmpfs, cgroups) is set up
from outside by :mod:`roofkit.grading.jail`; this is the layer inside, which
also holds on its own where there is no sandbox (``--sandbox none``). A
kernel (or the runner of code-question cases) is started as

    python -I -c "...; from roofkit.grading.sandbox import main; main()" PACKAGE KERNEL-ARGS...

where PACKAGE, put first on the import path, holds the copy of roofkit
without its question bank (:mod:`roofkit.grading.stripped`), and the sandbox
settings are in the environment variable ``ROOFKIT_SANDBOX`` (JSON, removed
before any student code runs). Before handing over to ``ipykernel_launcher``
(or ``roofkit.grading.cases``) this process, in order:

1. sets resource limits: CPU seconds, address space, size of any file written,
   processes of its user (where the jail gave it a user of its own, or a user
   namespace), no core dumps (a segfault stays a short message, not a 1 GB file);
2. when started as root: switches to the user id the jail chose for it (one
   per kernel), or else drops every capability, so that the code is not root
   in any useful sense;
3. on Linux 5.13 and later, restricts itself with Landlock: it may read the
   Python installation, the copy of roofkit and the few files of ``/etc``
   Python needs, read and write its own private folder, and nothing else
   (not the real roofkit package and its
   question bank, not a private bank, not the course secret, not other
   students' notebooks, not the grader's results); from Landlock ABI 4 it may
   bind only the kernel's own TCP ports and connect to none; from ABI 6 it may
   not signal or attach to processes outside the sandbox (the grader, other
   students' kernels);
4. installs the grader's watch on reaches for answer keys
   (:mod:`roofkit.grading.probe`) and makes roofkit a graded one
   (:func:`roofkit.grading.release.arm`).

These restrictions are inherited by every child process and cannot be lifted
from inside. :func:`available` says which layers this machine supports. The
fence itself imports only the standard library, so that a kernel starts fast.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import platform
import resource
import runpy
import signal
import sys

from . import probe

ENV = "ROOFKIT_SANDBOX"

# Landlock (linux/landlock.h). Access rights on files and directories:
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ALL_ABI1 = (1 << 13) - 1  # execute ... make_sym
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every Linux architecture
_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4

# Read-only system folders a Python process needs (shared libraries, /dev/urandom, /proc/self). Of /etc only what
# Python, the dynamic loader and matplotlib read (never shadow, the machine's keys or its configuration).
# Device nodes one by one: a raw disk under /dev would let root (even without capabilities) read any file.
_SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/proc", "/sys",
                "/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/fonts",
                "/dev/urandom", "/dev/random", "/dev/zero", "/dev/full")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPort(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (0: none, or not Linux)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64", "riscv64"):
        return 0
    version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


def available() -> dict:
    """Which isolation layers apply on this machine, for the results and the instructor's guide."""
    return {"landlock_abi": landlock_abi(), "root": os.geteuid() == 0, "rlimits": True}


BOOT = "import sys; sys.path.insert(0, sys.argv.pop(1)); from roofkit.grading.sandbox import main; main()"


def command(package: str, *args: str) -> list[str]:
    """The command that starts a sandboxed process with ``package`` (a folder holding roofkit/) first on its path.

    ``-I`` keeps the environment, the user's site folder and the current folder out of the import path, so the
    roofkit it imports is the one in ``package`` (the copy without the question bank), never the installed one.
    """
    return [sys.executable, "-I", "-c", BOOT, package, *args]


def read_paths(package: str, hidden: tuple[str, ...] | list[str] = ()) -> list[str]:
    """What a sandboxed Python may read: its installation, the import path, ``package``, system folders.

    Nothing inside ``hidden`` (the real roofkit package with its question bank, private banks): a folder that
    holds a hidden path is replaced by its other entries, recursively, since Landlock only grants.
    """
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    paths = prefixes | {package} | set(_SYSTEM_READ)
    # import-path entries inside the installation or a site-packages folder; never the current folder
    paths |= {p for p in sys.path if p and ("site-packages" in p or any(p.startswith(x + os.sep) for x in prefixes))}
    return _excluding(tuple(sorted(p for p in paths if os.path.exists(p))), tuple(hidden))


@functools.lru_cache(maxsize=8)
def _excluding(paths: tuple[str, ...], hidden: tuple[str, ...]) -> list[str]:
    secret = [os.path.realpath(h) for h in hidden]
    out: set[str] = set()

    def add(path: str) -> None:
        real = os.path.realpath(path)
        if any(real == h or real.startswith(h + os.sep) for h in secret):
            return  # hidden, or inside something hidden
        if not any(h.startswith(real.rstrip(os.sep) + os.sep) for h in secret):
            out.add(path)
            return
        try:
            entries = os.listdir(real)
        except OSError:
            return
        for entry in entries:
            add(os.path.join(real, entry))

    for path in paths:
        add(path)
    return sorted(out)


def _landlock(write: list[str], read: list[str], ports: list[int]) -> int:
    abi = landlock_abi()
    if abi < 1:
        return 0
    libc = _libc()
    handled = _FS_ALL_ABI1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0) \
        | (_FS_IOCTL_DEV if abi >= 5 else 0)
    attr = _RulesetAttr(handled, (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0,
                        (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    reading = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
    rules = [(p, reading) for p in read] + [(p, handled) for p in write] + [("/dev/null", reading | _FS_WRITE_FILE)]
    for path, access in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue
        if not os.path.isdir(path):
            access &= _FS_FILE_RIGHTS & handled
        rule = _PathBeneath(access, fd)
        done = libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0))
        os.close(fd)
        if done < 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
    if abi >= 4:
        for port in ports:
            rule = _NetPort(_NET_BIND_TCP, port)
            if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_NET_PORT, ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for port {port}")
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS) failed")
    if libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(ruleset)
    return abi


def _drop_capabilities() -> None:
    """Root without capabilities: cannot bypass file permissions, kill others' processes, mount, ..."""
    libc = _libc()
    for cap in range(64):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)  # fails quietly past the last capability
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3, all zero
    if libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _switch_user(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def confine(settings: dict) -> dict:
    """Apply the limits, privilege drop and Landlock described in ``settings``; return what applied."""
    applied = {}
    limits = {"cpu_s": resource.RLIMIT_CPU, "memory_bytes": resource.RLIMIT_AS, "file_bytes": resource.RLIMIT_FSIZE,
              "processes": getattr(resource, "RLIMIT_NPROC", None)}
    for key, which in [*limits.items(), ("core_bytes", resource.RLIMIT_CORE)]:
        value = settings.get(key, 0) if key == "core_bytes" else settings.get(key)
        if which is None or value is None or (not value and key != "core_bytes"):
            continue
        try:  # macOS refuses some limits (RLIMIT_AS); the others still apply
            resource.setrlimit(which, (int(value), int(value)))
            applied[key] = int(value)
        except (ValueError, OSError):
            pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file past the cap: the write fails, the process lives
    if os.geteuid() == 0 and platform.system() == "Linux":
        if settings.get("uid") is not None:  # a user id of its own (the grader's jail chose it)
            _switch_user(int(settings["uid"]), int(settings.get("gid", settings["uid"])))
            applied["user"] = int(settings["uid"])
        else:
            _drop_capabilities()
            applied["user"] = "root without capabilities"
    if settings.get("landlock", True):
        applied["landlock_abi"] = _landlock(settings.get("write", []), settings.get("read", []),
                                            settings.get("ports", []))
    return applied


TRUNCATED = "[roofkit grader: output past the size cap was dropped]"


def cap_output(limit: int) -> None:
    """Make the kernel drop printed text past ``limit`` characters (a runaway print loop stays cheap).

    Student code could undo this; then ZeroMQ's message-size cap on the grader's side still protects it.
    """
    from ipykernel import iostream  # deferred: ipykernel costs ~0.1 s at import

    write, state = iostream.OutStream.write, {"n": 0}

    def capped(self, string):
        if not isinstance(string, str):
            return write(self, string)  # the TypeError ipykernel gives
        state["n"] += len(string)
        room = limit - (state["n"] - len(string))
        if room >= len(string):
            return write(self, string)
        if room > 0 or state["n"] - len(string) <= limit:
            write(self, string[:max(room, 0)] + "\n" + TRUNCATED + "\n")
        return len(string)

    iostream.OutStream.write = capped


def main(argv: list[str] | None = None) -> None:
    """Confine this process, then run ``ipykernel_launcher`` (or the module or script named by ``--module``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    settings = json.loads(os.environ.pop(ENV, "{}"))
    if settings.get("ports_from_connection_file") and "-f" in argv:
        with open(argv[argv.index("-f") + 1], encoding="utf-8") as file:
            info = json.load(file)
        # over Unix sockets ("ipc"), the kernel needs no TCP port at all: Landlock then refuses every bind
        settings["ports"] = [] if info.get("transport") == "ipc" else \
            [info[k] for k in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
    module = "ipykernel_launcher"
    if argv[:1] == ["--module"]:
        module, argv = argv[1], argv[2:]
    confine(settings)
    if settings.get("probe_fd") is not None:  # the grader's watch on reaches for keys (an audit hook)
        probe.install(int(settings["probe_fd"]), settings.get("hidden", []), settings.get("trusted", []),
                      settings.get("quiet", []))
    if settings.get("graded"):  # no bank in this roofkit: every question released, key lookups refused
        from . import release  # deferred: only once confined and watched, in the sandbox

        release.arm()
    if module == "ipykernel_launcher" and settings.get("output_chars"):
        cap_output(int(settings["output_chars"]))

    sys.argv = [module, *argv]
    if module.endswith(".py"):  # a script (the tests use this)
        runpy.run_path(module, run_name="__main__")
    else:
        runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
