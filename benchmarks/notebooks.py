"""Execution time of every solution notebook (target: each under 10 s, all under 90 s on 2 cores).

    python benchmarks/notebooks.py [--repeat 3]

Each notebook is executed in a fresh kernel, as nbval does; the time includes
the kernel's start. With --repeat, the outputs of the runs are also compared as
the build and nbval compare them (roofkit.course.outputs: streams joined, figures
by their hash, measured cells left out): they must be identical, since the
lessons are deterministic.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from roofkit.course import outputs

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = outputs.read_sanitize(ROOT / "nbval_sanitize.cfg")


def run(path: Path) -> tuple[float, list]:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    elapsed = time.perf_counter() - start
    return elapsed, [outputs.comparable(c.outputs, PATTERNS) for c in nb.cells
                     if c.cell_type == "code" and not outputs.measured(c)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    total, worst = 0.0, 0.0
    differ = []
    print(f"{'notebook':<40} {'seconds':>8}")
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        times, first = [], None
        for _ in range(args.repeat):
            elapsed, outputs = run(path)
            times.append(elapsed)
            text = json.dumps(outputs, sort_keys=True)
            if first is None:
                first = text
            elif text != first:
                differ.append(path.name)
        best = min(times)
        total, worst = total + best, max(worst, best)
        flag = "" if best < 15 else "  OVER 15 s"
        print(f"{path.name:<40} {best:8.2f}{flag}")
    print(f"{'all solution notebooks':<40} {total:8.2f}  (target < 90 s; slowest {worst:.2f} s, target < 10 s)")
    if args.repeat > 1:
        print("outputs identical across runs" if not differ else f"outputs DIFFER across runs: {sorted(set(differ))}")


if __name__ == "__main__":
    main()
