"""How well does the α-β model describe real messages on this machine? `roofkit measure --comms`'s fit.

    python benchmarks/comms.py [--processes N] [--backend auto|socket|gloo|nccl] [--plot comms.png]

Not a pass/fail test: the figures are machine-specific and, on a shared
machine, noisy (every point is the best of several runs). It prints, for a
point-to-point ping-pong and a ring all-reduce between local processes:

1. the fitted α (latency per message, or per ring step) and β (bandwidth per
   direction), for the default run and the --quick one;
2. the fit error, point by point and its median, as (model - measured) / measured;
3. the wall-clock time of `roofkit measure --comms --quick` as a whole process
   (target: a few seconds).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from roofkit.measure import comms as mc


def table(fit) -> str:
    rows = [f"    {'size':>10}  {'measured':>11}  {'model':>11}  {'error':>7}"]
    for s, t, p, e in zip(fit.sizes, fit.times, fit.predicted, fit.errors):
        rows.append(f"    {int(s):>10}  {t * 1e6:>9.1f}us  {p * 1e6:>9.1f}us  {e:>+7.1%}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--backend", default="auto", choices=mc.BACKENDS)
    parser.add_argument("--plot", help="save the default run's plot here")
    args = parser.parse_args()

    for quick in (False, True):
        profile = mc.measure_comms(quick=quick, processes=args.processes, backend=args.backend)
        print(f"== {'quick' if quick else 'default'} run, {profile.elapsed_s:.1f} s ==")
        print(profile.report())
        for label, fit in (("point-to-point", profile.p2p), ("all-reduce", profile.all_reduce)):
            print(f"  {label}: alpha = {fit.alpha_s * 1e6:.2f} us, beta = {fit.bandwidth_bytes_per_s / 1e9:.3f} GB/s, "
                  f"median |error| = {fit.median_error:.1%}, max = {fit.max_error:.1%}")
            if not quick:
                print(table(fit))
        if args.plot and not quick:
            profile.plot(args.plot)
            print(f"  plot: {args.plot}")

    roofkit = Path(sys.executable).with_name("roofkit")
    started = time.perf_counter()
    subprocess.run([str(roofkit), "measure", "--comms", "--quick", "--json"], check=True, capture_output=True)
    print(f"== `roofkit measure --comms --quick` as a process: {time.perf_counter() - started:.1f} s ==")


if __name__ == "__main__":
    main()
