"""Speed targets of the roofkit issue, measured (not pass/fail tests: this machine is shared and noisy).

    python benchmarks/speed.py

Targets: `import roofkit` < 0.3 s; `roofkit hw show h100 --json` < 1 s as a whole
process; the numeric roofline over 1e6 intensities < 50 ms. Each figure is the
best of several runs, which is the fairest estimate of the cost itself.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time


def best_of(fn, runs=7):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def process(*argv):
    return lambda: subprocess.run([sys.executable, *argv], check=True, capture_output=True)


def main() -> None:
    rows = []
    baseline, _ = best_of(process("-c", "pass"))
    best, median = best_of(process("-c", "import roofkit"))
    rows.append(("import roofkit (minus bare interpreter start)", best - baseline, median - baseline, 0.3))
    best, median = best_of(process("-c", "import roofkit, roofkit.hardware, roofkit.roofline, roofkit.formulas"))
    rows.append(("import roofkit + hardware, roofline, formulas (minus start)", best - baseline, median - baseline, None))
    best, median = best_of(process("-m", "roofkit.cli", "hw", "show", "h100", "--json"))
    rows.append(("roofkit hw show h100 --json (whole process)", best, median, 1.0))

    import numpy as np

    from roofkit.catalogs import hardware
    from roofkit import roofline

    h100 = hardware.get("h100")
    intensities = np.logspace(-2, 4, 1_000_000)
    peak, bandwidth = h100.peak("bf16"), h100.bandwidth
    best, median = best_of(lambda: roofline.attainable(intensities, peak, bandwidth), runs=20)
    rows.append(("numeric roofline over 1e6 intensities", best, median, 0.05))

    print(f"{'measurement':<62} {'best':>9} {'median':>9} {'target':>8}  verdict")
    for name, best, median, target in rows:
        verdict = "" if target is None else ("ok" if best < target else "OVER TARGET")
        target_text = "-" if target is None else f"{target * 1e3:.0f} ms"
        print(f"{name:<62} {best * 1e3:7.1f}ms {median * 1e3:7.1f}ms {target_text:>8}  {verdict}")


if __name__ == "__main__":
    main()
