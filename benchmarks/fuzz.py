"""Fuzz every input path of roofkit and print how many inputs each took and how many escaped.

    .venv/bin/python benchmarks/fuzz.py            # about 127,000 inputs, 15-30 minutes on 2 cores
    .venv/bin/python benchmarks/fuzz.py --scale 0.1 --seed 7

An input "escapes" when it raises anything but a RoofkitError (for the command
line: a traceback, an unknown exit status, or an exit 2 that is not one line),
or when it takes a second or more. Target: 0 escaped in at least 100,000.
The paths are the ones `tests/test_fuzz.py` checks with hypothesis
(`tests/fuzz_paths.py`); this script runs them at scale with plain `random`.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fuzz_paths  # noqa: E402

from roofkit.errors import RoofkitError  # noqa: E402

# inputs per path at --scale 1 (the slow ones write files or build the parser for every input)
BUDGET = {
    "answers: numbers with units": 30_000,
    "answers: formulas": 15_000,
    "answers: choices": 10_000,
    "quiz.judge, every question": 25_000,
    "grader: judge_answer": 15_000,
    "catalog files (TOML)": 4_000,
    "measurement profiles (JSON)": 4_000,
    "command line: every command and option": 8_000,
    "rosters (CSV)": 4_000,
    "releases: assignment.json": 3_000,
    "submitted notebooks": 3_000,
    "answer records a kernel prints": 6_000,
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every path's number of inputs")
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    import sympy  # noqa: F401 - imported once here, as a notebook has it, not timed as the first formula's cost
    rows, total, escaped_total, examples = [], 0, 0, []
    print(f"{'path':<42} {'inputs':>8} {'result':>8} {'error':>8} {'escaped':>8} {'slowest':>9}")
    for name, path in fuzz_paths.PATHS.items():
        n = max(1, int(BUDGET.get(name, 5_000) * args.scale))
        ok = errors = escaped = 0
        slowest = 0.0
        warm = random.Random(0)  # a path's first calls pay for its imports (sympy: a second or more), not its inputs
        for _ in range(20):
            try:
                path.run(path.make(warm))
            except Exception:  # noqa: BLE001 - counted below, with the seeded inputs
                pass
        for _ in range(n):
            value = path.make(rng)
            started = time.perf_counter()
            try:
                outcome = path.run(value)
                if path.cli and outcome[0] == 2:  # a clean one-line usage error
                    errors += 1
                else:
                    ok += 1
            except RoofkitError:
                errors += 1
            except Exception as error:  # noqa: BLE001 - counting what escapes is the point
                escaped += 1
                if len(examples) < 5:
                    examples.append((name, value, "".join(traceback.format_exception_only(error)).strip()))
            elapsed = time.perf_counter() - started
            slowest = max(slowest, elapsed)
            if elapsed >= 1:
                escaped += 1
                examples.append((name, value, f"took {elapsed:.2f} s"))
        total += n
        escaped_total += escaped
        print(f"{name:<42} {n:>8,} {ok:>8,} {errors:>8,} {escaped:>8,} {slowest * 1e3:>7.1f}ms", flush=True)
        rows.append((name, n, escaped))
    print(f"{'total':<42} {total:>8,} {'':>8} {'':>8} {escaped_total:>8,}")
    for name, value, what in examples:
        print(f"escaped in {name}: {value!r:.120} -> {what}")
    return 1 if escaped_total else 0


if __name__ == "__main__":
    sys.exit(main())
