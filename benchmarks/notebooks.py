"""Execution time of every solution notebook (target: each under 10 s, all under 90 s on 2 cores).

    python benchmarks/notebooks.py [--repeat 3]

Each notebook is executed in a fresh kernel, as nbval does; the time includes
the kernel's start. With --repeat, the outputs of the runs are also compared as
nbval compares them (streams joined, images and NBVAL_IGNORE_OUTPUT cells left
out): they must be identical, since the lessons are deterministic.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def run(path: Path) -> tuple[float, list]:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    elapsed = time.perf_counter() - start
    return elapsed, [_compared(c.outputs) for c in nb.cells
                     if c.cell_type == "code" and not c.source.startswith("# NBVAL_IGNORE_OUTPUT")]


def _compared(outputs: list) -> list:
    """What nbval compares: streams joined per name, no images, no widget model ids."""
    streams, rest = {}, []
    for output in copy.deepcopy(outputs):
        if output.get("output_type") == "stream":
            streams[output["name"]] = streams.get(output["name"], "") + output["text"]
            continue
        data = output.get("data", {})
        for mime in [m for m in data if m.startswith("image/") or m.endswith("widget-view+json")]:
            del data[mime]
        rest.append(output)
    return [streams, rest]


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
