"""Every place a user's text or file enters roofkit, as a function of one random input.

Shared by ``tests/test_fuzz.py`` (hypothesis, a few hundred inputs per path)
and ``benchmarks/fuzz.py`` (a hundred thousand and more). A path either
returns or raises :class:`roofkit.errors.RoofkitError`; anything else escaped.
For the command line, "escaped" is a traceback, an exit status other than
0, 1 or 2, or an exit 2 that is not one line on stderr.

Each path has a generator ``make(rng) -> input`` so the benchmark needs no
hypothesis; the tests draw from the same generators through ``st.randoms``.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import string
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from roofkit.errors import RoofkitError

from helpers import scratch_hardware_catalog

# --- pieces random inputs are made of ------------------------------------------------------

NUMBERS = ["0", "1", "2", "-3", "1365", "1,365", "1.37e3", "4096", "1e400", "1e-400", "9" * 40, ".5", "5.",
           "1_000", "0.938", "65504", "2**16", "(2-2**-10)*2**15", "10**10**10", "1/0", "0**-1", "(-8)**0.5",
           "((((((((((((((((((((((1))))))))))))))))))))))", "3 * 4", "2^15", "1e3/s", "nan", "inf", "-0"]
UNITS = ["FLOP", "FLOPs", "flops", "TFLOPS", "FLOP/byte", "flop/B", "FLOPS/byte", "B", "b", "byte", "bytes",
         "GB", "GiB", "Gb", "TB/s", "TBps", "TB/S", "TBytes/s", "s", "ms", "µs", "μs", "us", "h", "day", "days",
         "%", "percent", "x", "k", "M", "B", "T", "million", "billion", "GPU-hours", "GPUs", "1/s", "/s", "per s",
         "s^-1", "s**2", "kB", "KiB", "foo", "S", "m", "e", "ps", "Bps", "", "/", "//", "^", "**"]
NAMES = ["n", "b", "M", "nb", "sqrt", "log", "exp", "sqrt(n)", "x", "__import__", "eval", "os", "lambda", "self",
         "memory", "Compute-bound", "MEMORY bound", "rate", "work"]
# strings that would do something if anything evaluated them; PWNED is replaced by a path the test watches
INJECTIONS = [
    "__import__('pathlib').Path('PWNED').touch()",
    "__import__('os').system('touch PWNED')",
    "open('PWNED', 'w').write('x')",
    "exec(\"open('PWNED','w')\")",
    "eval(\"__import__('os').system('touch PWNED')\")",
    "[c for c in ().__class__.__base__.__subclasses__()]",
    "getattr(__builtins__, 'open')('PWNED', 'w')",
    "(lambda: open('PWNED', 'w'))()",
    "Symbol('x').__class__.__init__.__globals__",
    "1; open('PWNED', 'w')",
    "1 if open('PWNED', 'w') else 2",
    "{{7*7}}",
    "${7*7}",
    "$(touch PWNED)",
    "`touch PWNED`",
    "'; touch PWNED; '",
    "n.__class__.__mro__",
    "sqrt(open('PWNED','w'))",
    "Integer(2).__reduce__()",
]
WEIRD = ["", " ", "\t", "\n", "\x00", "…", "−", "×", "÷", "·", "١٢٣", "１２３", "😀", "\u202e", "'", '"', "\\", ",", ".",
         "...", "*", "(", ")", "[", "]", "{", "}", "#", ";", "=", "==", "+", "-", "--", "e", "E", "_", "%%", "µ"]


def _pick(rng: random.Random, pool):
    return pool[rng.randrange(len(pool))]


def random_text(rng: random.Random, max_tokens: int = 6) -> str:
    """A string built from numbers, operators, units, names, injections and odd characters."""
    kind = rng.random()
    if kind < 0.1:
        return "".join(rng.choice(string.printable + "µμ×−…😀") for _ in range(rng.randrange(0, 30)))
    if kind < 0.15:
        return _pick(rng, INJECTIONS)
    if kind < 0.2:  # a long one
        return _pick(rng, NUMBERS) * rng.randrange(1, 40)
    pools = [NUMBERS, UNITS, NAMES, WEIRD, ["+", "-", "*", "/", "**", "^", "(", ")", " "]]
    parts = [_pick(rng, _pick(rng, pools)) for _ in range(rng.randrange(1, max_tokens + 1))]
    return _pick(rng, ["", " "]).join(parts)


def mutate(rng: random.Random, text: str) -> str:
    """A valid-looking answer with a few characters inserted, deleted or replaced."""
    chars = list(text)
    for _ in range(rng.randrange(1, 4)):
        op, at = rng.random(), rng.randrange(len(chars) + 1)
        if op < 0.4 or not chars:
            chars.insert(at, rng.choice(string.printable + "µ×−"))
        elif op < 0.7:
            del chars[min(at, len(chars) - 1)]
        else:
            chars[min(at, len(chars) - 1)] = rng.choice(string.printable)
    return "".join(chars)


def random_value(rng: random.Random):
    """Something a Python caller might pass as an answer."""
    choice = rng.random()
    if choice < 0.6:
        return random_text(rng) if rng.random() < 0.7 else mutate(rng, _pick(rng, NUMBERS) + " " + _pick(rng, UNITS))
    return _pick(rng, [None, True, False, 0, -1, 1e308, float("nan"), float("inf"), 10**400, 3 + 4j, b"12",
                       [1], {"a": 1}, (2,), Ellipsis, object(), 4096, 1365.3, -0.0, 2**63])


# --- the paths ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Path_:
    name: str
    make: Callable[[random.Random], object]
    run: Callable[[object], object]
    cli: bool = False  # the outcome is an exit status, judged by cli_outcome


def _questions():
    from roofkit.course import quiz

    return [q for q in quiz.questions() if q.kind != "code"]


def _answer_numeric(value):
    from roofkit.course import answers

    text, unit = value
    return answers.read(text, unit)


def _answer_formula(text):
    from roofkit.course import answers

    return answers.expression(text, ("n", "b"))


def _answer_choice(text):
    from roofkit.course import answers

    return answers.choice(text, ("memory", "compute"))


def _judge(value):
    """quiz.judge never raises: a wrong or unreadable answer is a verdict."""
    from roofkit.course import quiz

    question, answer = value
    try:
        return quiz.judge(question, answer)
    except RoofkitError as error:  # judge must not let even these out
        raise AssertionError(f"judge raised {error!r}") from None


def _score(value):
    """The grader's judgement of one record: a Score whatever the record holds."""
    from roofkit.grading import score

    question, answer = value
    try:
        return score.judge_answer(question, answer)
    except RoofkitError as error:
        raise AssertionError(f"judge_answer raised {error!r}") from None


def _toml_value(rng: random.Random) -> str:
    return _pick(rng, ['1', '-1', '0', '1e400', '"x"', '""', 'true', '[]', '[1, 2]', '{ bf16 = 989 }',
                       '{ fp32 = "a" }', '{ nope = 1 }', '{ bf16 = -5 }', '3.35', 'nan', 'inf', '["a", 1]',
                       '"h100"', '{ bf16 = 1e400 }', '{}', '"NVIDIA"'])


def make_catalog(rng: random.Random) -> str:
    fields = ["name", "vendor", "aliases", "source", "sources", "peak_tflops", "bandwidth_tb_s", "memory_gb",
              "memory_gib", "l2_mb", "compute_units", "compute_unit_name", "notes", "bogus"]
    lines = []
    if rng.random() < 0.3:
        lines.append("[sources]\nmine = \"my measurement\"")
    for _ in range(rng.randrange(0, 3)):
        lines.append(f"[{_pick(rng, ['laptop', 'h100', 'x y', 'a.b', 'sources', 'Z'])}]")
        for field in rng.sample(fields, rng.randrange(0, len(fields))):
            lines.append(f"{field} = {_toml_value(rng)}")
    text = "\n".join(lines)
    return mutate(rng, text) if text and rng.random() < 0.2 else text


def _catalog(text):
    from roofkit.catalogs import hardware

    with tempfile.TemporaryDirectory() as folder, scratch_hardware_catalog():
        path = Path(folder) / "catalog.toml"
        path.write_text(text, encoding="utf-8")
        return hardware.load_file(path, replace=True)


def make_profile(rng: random.Random):
    good = {"roofkit_profile": 1, "host": "laptop", "date": "2026-11-30", "peak_flops_per_s": {"fp64": 1e11},
            "bandwidth_bytes_per_s": 2e10, "kernels": [], "threads": 2}
    data = dict(good)
    for _ in range(rng.randrange(0, 4)):
        key = _pick(rng, list(good) + ["gpu", "cpu", "extra", "caches"])
        data[key] = _pick(rng, [None, -1, 0, "x", [], {}, {"fp64": -1}, {"fp64": "a"}, 1e400, True,
                                {"bf16": 1e12}, [{"name": 1}], 2, "2026", {"peak_flops_per_s": {}}])
    if rng.random() < 0.2:
        data.pop(_pick(rng, list(good)), None)
    if rng.random() < 0.1:
        return _pick(rng, [[], "text", 3, None, {"roofkit_profile": 2}])
    return data


def _profile(data):
    from roofkit import measure

    with tempfile.TemporaryDirectory() as folder, scratch_hardware_catalog():
        if isinstance(data, dict) and len(data) % 2:
            return measure.load_profile(data)
        path = Path(folder) / "profile.json"  # the same data as a file, the way a learner passes it
        path.write_text(json.dumps(data), encoding="utf-8")
        return measure.load_profile(str(path))


PATHS: dict[str, Path_] = {}


def _add(name, make, run, cli=False):
    PATHS[name] = Path_(name, make, run, cli)


_UNITS_OF_THE_BANK = ["FLOP", "byte", "byte/s", "FLOP/s", "TFLOP/s", "FLOP/byte", "s", "ms", "µs", "day", "percent",
                      "1/s", "dimensionless"]
_add("answers: numbers with units", lambda rng: (random_value(rng), _pick(rng, _UNITS_OF_THE_BANK)), _answer_numeric)
_add("answers: formulas", lambda rng: random_value(rng), _answer_formula)
_add("answers: choices", lambda rng: random_value(rng), _answer_choice)
_add("quiz.judge, every question", lambda rng: (_pick(rng, _questions()), random_value(rng)), _judge)
_add("grader: judge_answer", lambda rng: (_pick(rng, _questions()), random_value(rng)), _score)
_add("catalog files (TOML)", make_catalog, _catalog)
_add("measurement profiles (JSON)", make_profile, _profile)


# --- the command line ------------------------------------------------------------------------

# commands that measure, build, write or execute notebooks are fuzzed through their inputs' readers instead
_SLOW = {"measure", "build", "site", "assign", "grade"}
_VALUES = ["4096", "70B", "15T", "4e9", "1,024", "0", "-1", "1e400", "nan", "x", "", "h100", "H100 SXM5", "mi300x",
           "bf16", "fp8", "e4m3", "int4", "nope", "0.4", "1.5", "2", "8", "llama-3-70b", "Llama-2-7B", "ring", "tree",
           "all-reduce", "nvlink4", "ib-ndr", "10%", "😀", "--json", "-", "1/0", "l03.ridge-bf16", "l00.fma-flops"]


def _leaves(parser, prefix=()):
    """(words, subparser) for every runnable command: ('hw', 'show'), ('cost', 'gemm'), ..."""
    import argparse

    found = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found = True
                yield from _leaves(sub, prefix + (name,))
    if not found and prefix:
        yield prefix, parser


def commands():
    from roofkit import cli

    return [(words, sub) for words, sub in _leaves(cli.build_parser()) if words[0] not in _SLOW]


def make_argv(rng: random.Random) -> list[str]:
    words, parser = _pick(rng, commands())
    argv = list(words)
    for action in parser._actions:
        if action.option_strings and action.dest not in ("help", "json"):
            if action.required or rng.random() < 0.5:
                argv.append(action.option_strings[-1])
                if action.nargs != 0:
                    argv.append(_pick(rng, _VALUES) if rng.random() < 0.8 else random_text(rng, 3))
        elif not action.option_strings and action.dest not in ("help",) and action.nargs != 0:
            if rng.random() < 0.95:
                argv.append(_pick(rng, _VALUES) if rng.random() < 0.7 else random_text(rng, 3))
    if rng.random() < 0.3:
        argv.insert(rng.randrange(len(argv) + 1), "--json")
    if rng.random() < 0.1:
        argv.insert(rng.randrange(len(argv) + 1), _pick(rng, _VALUES + ["--bogus"]))
    return argv


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    from roofkit import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def cli_outcome(argv: list[str]) -> tuple[int, str, str]:
    """Run the command; raise AssertionError when it escaped the contract."""
    code, out, err = run_cli(argv)
    if code not in (0, 1, 2):
        raise AssertionError(f"exit status {code}")
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        if len(lines) != 1 or "error" not in lines[0] or "Traceback" in err:
            raise AssertionError(f"exit 2 without one clean line: {err!r}")
    return code, out, err


_add("command line: every command and option", make_argv, cli_outcome, cli=True)


# --- the classroom's inputs: rosters, releases, submitted notebooks, answer records ----------------

_ROSTER_CELLS = ["id", "student", "name", "email", "s1", "s2", "ada", "a@b.c", "", " ", "x" * 70, "-bad", "é", "1,2",
                 '"quoted"', "s1", "section", "canvas_id", "\x00", "../etc", "α"]


def make_roster(rng: random.Random) -> str:
    rows = []
    for _ in range(rng.randrange(0, 6)):
        rows.append(",".join(_pick(rng, _ROSTER_CELLS) for _ in range(rng.randrange(1, 4))))
    text = "\n".join(rows)
    return mutate(rng, text) if text and rng.random() < 0.2 else text


def _roster(text):
    from roofkit.grading import variants

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "roster.csv"
        path.write_text(text, encoding="utf-8")
        return variants.read_roster(path), variants.read_people(path)


_RELEASE: dict[str, object] = {}


def _release_folder() -> Path:
    """One real release of lesson 00 for two students, made once per process."""
    if "folder" not in _RELEASE:
        from roofkit.grading import assign

        folder = Path(tempfile.mkdtemp(prefix="roofkit-fuzz-"))
        (folder / "roster.csv").write_text("id\ns1\ns2\n", encoding="utf-8")
        root = Path(__file__).resolve().parent.parent
        with contextlib.redirect_stdout(io.StringIO()):
            assign.main(["00"], name="fuzz", out=folder / "release", roster=folder / "roster.csv",
                        secret_file=folder / "secret.txt", root=root)
        _RELEASE["folder"] = folder
        _RELEASE["manifest"] = json.loads((folder / "release" / "assignment.json").read_text(encoding="utf-8"))
    return _RELEASE["folder"]


def _junk(rng: random.Random):
    return _pick(rng, [None, 0, -1, "x", "", [], {}, [1, "a"], {"id": 3}, True, 1e308, "../../etc/passwd",
                       [{"id": "l00.fma-flops"}], [{"id": "nope", "points": "x"}], {"path": 5}])


def make_manifest(rng: random.Random):
    _release_folder()
    data = json.loads(json.dumps(_RELEASE["manifest"]))
    for _ in range(rng.randrange(1, 4)):
        target = data
        if isinstance(data.get("questions"), list) and data["questions"] and rng.random() < 0.5:
            target = _pick(rng, data["questions"])
            if not isinstance(target, dict):
                continue
        if not target:
            continue
        key = _pick(rng, list(target) + ["bank", "extra"])
        if rng.random() < 0.3:
            target.pop(key, None)
        else:
            target[key] = _junk(rng)
    return data if rng.random() > 0.05 else _junk(rng)


def _manifest(data):
    from roofkit.grading import assign, grade, variants

    folder = _release_folder()
    with tempfile.TemporaryDirectory() as scratch:
        release = Path(scratch) / "release"
        release.mkdir()
        (release / "template.ipynb").write_bytes((folder / "release" / "template.ipynb").read_bytes())
        (release / "assignment.json").write_text(json.dumps(data), encoding="utf-8")
        context = grade.Context(assign.read_release(release), variants.read_secret(folder / "secret.txt"))
        return context.numbers("s1"), context.preamble("s1", context.questions)


def make_submission(rng: random.Random) -> bytes:
    folder = _release_folder()
    student = folder / "release" / "students" / "s1"
    notebook = next(student.glob("*.ipynb")).read_text(encoding="utf-8") if student.is_dir() else "{}"
    choice = rng.random()
    if choice < 0.1:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
    if choice < 0.3:
        return mutate(rng, notebook[: rng.randrange(1, len(notebook) + 1)]).encode("utf-8", "replace")
    data = json.loads(notebook)
    cells_ = data.get("cells", [])
    for _ in range(rng.randrange(1, 5)):
        op = rng.random()
        if op < 0.25 and cells_:
            del cells_[rng.randrange(len(cells_))]
        elif op < 0.5 and cells_:
            cells_.insert(rng.randrange(len(cells_) + 1), dict(_pick(rng, cells_)))
        elif op < 0.75 and cells_:
            cell = _pick(rng, cells_)
            cell[_pick(rng, ["source", "cell_type", "metadata", "id", "outputs"])] = _junk(rng)
        else:
            data[_pick(rng, ["cells", "metadata", "nbformat"])] = _junk(rng)
    return json.dumps(data).encode("utf-8")


def _context():
    if "context" not in _RELEASE:
        from roofkit.grading import assign, grade, variants

        folder = _release_folder()
        _RELEASE["context"] = grade.Context(assign.read_release(folder / "release"),
                                            variants.read_secret(folder / "secret.txt"))
        _RELEASE["expected"] = _RELEASE["context"].expected("s1")
    return _RELEASE["context"]


def _submission(raw: bytes):
    """A handed-in file, read and compared with the notebook the student was given, as the grader does."""
    from roofkit.grading import cells, grade

    _context()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "s1.ipynb"
        path.write_bytes(raw)
        nb, why = grade.load(path)
        if nb is None:
            return why
        grade._self_questions(nb)
        grade._reference(nb)
        integrity = cells.compare(cells.locked_cells(_RELEASE["expected"]), nb.cells)
        return integrity.to_dict(), integrity.problems()


def make_records(rng: random.Random):
    ids = [q.id for q in _questions()]
    records = []
    for index in range(rng.randrange(0, 6)):
        record = {"roofkit_answer": _pick(rng, [1, 1, 1, 2, "1", None]), "id": _pick(rng, ids + ["nope", 3, None]),
                  "answer": random_value(rng), "params": _pick(rng, ["", "abc", None, 3])}
        if rng.random() < 0.2:
            record.pop(_pick(rng, list(record)))
        if rng.random() < 0.1:
            record["source"] = _pick(rng, ["def f(x):\n    return x", 3, None, "import os"])
        records.append((index, record if rng.random() > 0.05 else _junk(rng)))
    return records, set(rng.sample(ids, min(len(ids), rng.randrange(0, 20))))


def _records(value):
    """What a kernel printed as answer records, picked and judged the way the grader does."""
    from roofkit.course import quiz
    from roofkit.grading import grade, score

    records, wanted = value
    chosen, _, _ = grade._pick(records, set(), wanted)
    for qid, (_, record) in chosen.items():
        question = quiz.get(qid)
        if question.kind != "code":
            score.judge_answer(question, record.get("answer"))
    return chosen


_add("rosters (CSV)", make_roster, _roster)
_add("releases: assignment.json", make_manifest, _manifest)
_add("submitted notebooks", make_submission, _submission)
_add("answer records a kernel prints", make_records, _records)
