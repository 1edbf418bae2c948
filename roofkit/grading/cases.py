"""Code questions: run a student's function on the public and hidden cases, in a clean process.

The answer record of a code question carries the function's source. The grader
never runs it in its own process: :func:`run` starts a fresh, sandboxed Python
(:mod:`roofkit.grading.sandbox`) that defines the function from its source
alone and calls it on each case, under a time limit per case and for the whole
run, and sends back only the values it returned. The grader compares those
values with the keys it computes itself, so nothing the student's code does in
that process (patching roofkit, printing fake results) changes a verdict.

The function sees the names a lesson imports (``roofkit``, ``formulas``,
``math``, ``np``, ...) and nothing from the student's notebook: a helper it
needs must be defined or imported inside it.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import json
import math
import os
import select
import signal
import subprocess
import sys
import time

import roofkit

from . import probe

__all__ = ["run", "child"]

MAX_SOURCE = 100_000
MAX_OUTPUT = 4_000_000  # bytes read back from the case runner, at most
_PRELUDE = {"math": "math", "np": "numpy", "numpy": "numpy", "sympy": "sympy", "roofkit": "roofkit",
            "formulas": "roofkit.formulas", "roofline": "roofkit.roofline", "training": "roofkit.training",
            "precision": "roofkit.precision", "fusion": "roofkit.fusion", "hardware": "roofkit.hardware",
            "dtypes": "roofkit.dtypes"}


class _Namespace(dict):
    """Globals of the student's function: the lesson's usual imports, loaded when first used."""

    def __missing__(self, name):
        if name == "h100":
            self[name] = roofkit.hw("h100")
            return self[name]
        if name in _PRELUDE:
            self[name] = importlib.import_module(_PRELUDE[name])
            return self[name]
        raise KeyError(name)


class _CaseTimeout(Exception):
    pass


def _function(source: str):
    """The function defined by ``source``: its first ``def``, or a lambda found in it."""
    tree = ast.parse(source)
    defs = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    namespace = _Namespace(__builtins__=__builtins__, __name__="__student__")
    if defs:
        module = ast.Module(body=[n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))] + defs[:1],
                            type_ignores=[])
        exec(compile(module, "<your function>", "exec"), namespace)
        return namespace[defs[0].name]
    lambdas = [node for node in ast.walk(tree) if isinstance(node, ast.Lambda)]
    if lambdas:
        return eval(compile(ast.Expression(lambdas[0]), "<your function>", "eval"), namespace)
    raise ValueError("no function definition found in the recorded source")


def _value(result):
    if result is None:
        return {"none": True}
    try:
        number = float(result)
    except (TypeError, ValueError, OverflowError):
        return {"repr": repr(result)[:200]}
    return {"value": number if math.isfinite(number) else repr(number)}


def _error_text(error: BaseException) -> str:
    """'ValueError: text' for an exception of Python's own; a class the student's code made is not named (its name
    and text could carry anything the code read or computed, a hidden case's arguments for one)."""
    kind = type(error)
    if getattr(builtins, kind.__name__, None) is kind:
        try:
            return f"{kind.__name__}: {str(error)[:200]}"
        except Exception:  # noqa: BLE001 - a str() that raises
            return kind.__name__
    return "an exception of its own"


def child() -> None:
    """Runs in the sandbox. Reads one line naming the functions (question -> source), then one case at a time
    (a line ``{"q", "i", "args"}``), writing one JSON line of result for each to the saved stdout.

    The cases arrive one by one, each after the last one's result went out, public cases first: the process
    never holds a case it has not been asked, so a function cannot read hidden cases from the runner's frames,
    and no public case's result (which a feedback page may show) can carry one.
    """
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # what the student's code reads gets nothing; what it prints goes nowhere
        os.dup2(devnull, fd)
    sys.stdin = sys.stdout = sys.stderr = open(os.devnull, "r+")

    def alarm(signum, frame):
        raise _CaseTimeout()

    def read_line() -> dict | None:
        line = bytearray()
        while not line.endswith(b"\n"):
            byte = stdin.read(1)  # byte by byte: nothing past this line is taken from the pipe
            if not byte:
                return None
            line += byte
        return json.loads(line)

    signal.signal(signal.SIGALRM, alarm)
    header = read_line() or {}
    functions, errors = {}, {}
    for q, source in header.get("functions", {}).items():
        try:
            functions[q] = _function(source)
        except BaseException as error:  # a syntax error, or code at the top of the source that raises
            errors[q] = f"could not define the function: {_error_text(error)}"
    out.write(json.dumps({"ready": True}) + "\n")
    while True:
        case = read_line()
        if case is None:
            return
        q, i = case["q"], case["i"]
        if q in errors:
            out.write(json.dumps({"q": q, "i": i, "error": errors[q]}) + "\n")
            continue
        signal.setitimer(signal.ITIMER_REAL, header["case_s"])
        try:
            line = {"q": q, "i": i, **_value(functions[q](*case["args"]))}
        except _CaseTimeout:
            line = {"q": q, "i": i, "error": f"took longer than {header['case_s']:g} s"}
        except BaseException as error:  # the student's code may raise anything, SystemExit included
            line = {"q": q, "i": i, "error": _error_text(error)}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        del case
        try:
            out.write(json.dumps(line) + "\n")
        except (TypeError, ValueError, RecursionError):
            out.write(json.dumps({"q": q, "i": i, "error": "a result that cannot be sent"}) + "\n")


def _order(items: list[dict]) -> list[tuple[str, int, list]]:
    """(question, case index, arguments): every item's public cases first, then the hidden ones."""
    public = [(item["q"], i, args) for item in items for i, args in enumerate(item["cases"])
              if i < item.get("public", len(item["cases"]))]
    hidden = [(item["q"], i, args) for item in items for i, args in enumerate(item["cases"])
              if i >= item.get("public", len(item["cases"]))]
    return public + hidden


class _Lines:
    """Lines read from a child's stdout, each under a deadline, at most MAX_OUTPUT bytes in all."""

    def __init__(self, stream):
        self.fd, self.buffer, self.total = stream.fileno(), bytearray(), 0

    def next(self, deadline: float) -> bytes | None:
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or self.total >= MAX_OUTPUT:
                return None
            ready, _, _ = select.select([self.fd], [], [], left)
            chunk = os.read(self.fd, 65536) if ready else b""
            if ready and not chunk:
                return None  # the child ended
            self.buffer += chunk
            self.total += len(chunk)
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line


def run(items: list[dict], *, box, case_s: float = 2.0, startup_s: float = 30.0,
        probes: list[str] | None = None) -> dict[tuple[str, int], dict]:
    """Run ``items`` ({q, source, cases, public}) in a sandboxed process; (question, case index) -> result line.

    ``public``: how many of an item's cases (the first ones) are public; the others are hidden. The cases go to
    the process one at a time (:func:`child`). ``box``: the :class:`roofkit.grading.execute.Box` to run in (its
    folder, jail and settings). Cases with no line (the process was killed at its time limit, or crashed) are
    absent. The process imports the copy of roofkit without its question bank; what the grader's watch reports
    from it (:mod:`roofkit.grading.probe`) is appended to ``probes``.
    """
    if not items:
        return {}
    cases = _order(items)
    deadline = time.monotonic() + startup_s + (case_s + 0.5) * len(cases) + 2
    watch = probe.Watch()
    try:
        process = box.popen(["--module", "roofkit.grading.cases"], pass_fds=(watch.write_fd,),
                            extra_settings={"probe_fd": watch.write_fd}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    finally:
        watch.handed_over()
    results = {}
    lines = _Lines(process.stdout)
    try:
        process.stdin.write(json.dumps({"case_s": case_s, "functions": {i["q"]: i["source"] for i in items}})
                            .encode() + b"\n")
        process.stdin.flush()
        if lines.next(min(deadline, time.monotonic() + startup_s)) is not None:
            for q, i, args in cases:
                process.stdin.write(json.dumps({"q": q, "i": i, "args": args}).encode() + b"\n")
                process.stdin.flush()
                line = lines.next(min(deadline, time.monotonic() + case_s + 2))
                if line is None:
                    break  # killed at its time limit, or crashed: this case and the rest have no line
                try:
                    data = json.loads(line.decode(errors="replace"))
                    if (str(data["q"]), int(data["i"])) == (q, i):
                        results[(q, i)] = data
                except (ValueError, KeyError, TypeError, RecursionError):
                    continue
    except (BrokenPipeError, OSError):
        pass  # the child died early; what it wrote still counts
    finally:
        box.jail.close()
        for stream in (process.stdin, process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if probes is not None:
            probes += [what for what in watch.events() if what not in probes]
        watch.close()
    return results


if __name__ == "__main__":
    child()
