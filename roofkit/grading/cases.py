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
    """Runs in the sandbox: read items from stdin, write one JSON line per case to the saved stdout."""
    request = json.loads(sys.stdin.read())
    out = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # what the student's code prints goes nowhere
    os.dup2(devnull, 2)
    sys.stdout = sys.stderr = open(os.devnull, "w")

    def alarm(signum, frame):
        raise _CaseTimeout()

    signal.signal(signal.SIGALRM, alarm)
    for item in request["items"]:
        try:
            function = _function(item["source"])
        except BaseException as error:  # a syntax error, or code at the top of the source that raises
            for i in range(len(item["cases"])):
                out.write(json.dumps({"q": item["q"], "i": i, "error": f"could not define the function: "
                                      f"{_error_text(error)}"}) + "\n")
            continue
        for i, args in enumerate(item["cases"]):
            signal.setitimer(signal.ITIMER_REAL, request["case_s"])
            try:
                line = {"q": item["q"], "i": i, **_value(function(*args))}
            except _CaseTimeout:
                line = {"q": item["q"], "i": i, "error": f"took longer than {request['case_s']:g} s"}
            except BaseException as error:  # the student's code may raise anything, SystemExit included
                line = {"q": item["q"], "i": i, "error": _error_text(error)}
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            try:
                out.write(json.dumps(line) + "\n")
            except (TypeError, ValueError, RecursionError):
                out.write(json.dumps({"q": item["q"], "i": i, "error": "a result that cannot be sent"}) + "\n")


def run(items: list[dict], *, box, case_s: float = 2.0, startup_s: float = 30.0,
        probes: list[str] | None = None) -> dict[tuple[str, int], dict]:
    """Run ``items`` ({q, source, cases}) in a sandboxed process; (question, case index) -> result line.

    ``box``: the :class:`roofkit.grading.execute.Box` to run in (its folder, jail and settings). Cases with no
    line (the process was killed at its time limit, or crashed) are absent. The process imports the copy of
    roofkit without its question bank; what the grader's watch reports from it (:mod:`roofkit.grading.probe`)
    is appended to ``probes``.
    """
    if not items:
        return {}
    budget = startup_s + case_s * sum(len(item["cases"]) for item in items) + 2
    request = json.dumps({"items": items, "case_s": case_s}).encode()
    watch = probe.Watch()
    try:
        process = box.popen(["--module", "roofkit.grading.cases"], pass_fds=(watch.write_fd,),
                            extra_settings={"probe_fd": watch.write_fd}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    finally:
        watch.handed_over()
    output = bytearray()
    try:
        process.stdin.write(request)  # the child reads all of it before it writes anything
        process.stdin.close()
        deadline = time.monotonic() + budget
        while len(output) < MAX_OUTPUT and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(process.stdout.fileno(), 65536) if ready else b""
            if ready and not chunk:
                break  # end of output: the child is done
            output += chunk
    except (BrokenPipeError, OSError):
        pass  # the child died early; what it wrote still counts
    finally:
        box.jail.close()
        process.stdout.close()
        if probes is not None:
            probes += [what for what in watch.events() if what not in probes]
        watch.close()
    results = {}
    for line in bytes(output[:MAX_OUTPUT]).decode(errors="replace").splitlines():
        try:
            data = json.loads(line)
            key = (str(data["q"]), int(data["i"]))
        except (ValueError, KeyError, TypeError, RecursionError):
            continue
        results.setdefault(key, data)  # the first line for a case counts
    return results


if __name__ == "__main__":
    child()
