"""How well do roofkit's collectives describe real ones? Published nccl-tests results, and this machine's messages.

    python benchmarks/comms.py [--published-only] [--processes N] [--backend auto|socket|gloo|nccl] [--plot comms.png]

First, roofkit's NCCL model (roofkit.comms, roofkit.nccl) against published
nccl-tests bus bandwidths: the bound (line rate, NCCL's per-step latency) must
never fall below a published figure; the calibrated estimate (NCCL's latencies,
the bandwidth nccl-tests measures on the link) should land near it. Then (unless
--published-only) `roofkit measure --comms`'s fit on this machine.

Not a pass/fail test: the local figures are machine-specific and, on a shared
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

from roofkit.perf import comms
from roofkit.measure import comms as mc

# published nccl-tests results: (label, collective, bytes, gpus per node, nodes, link, algorithm, busbw GB/s, source)
PUBLISHED = [
    ("8 x H100, ring", "all-reduce", 8e9, 8, 1, "hgx-h100", "ring", 370, "scaling book, gpus.md"),
    ("8 x H100, NVLS", "all-reduce", 8e9, 8, 1, "hgx-h100", "auto", 480, "scaling book, gpus.md"),
    ("8 x H100, NVLS", "all-reduce", 8e9, 8, 1, "hgx-h100", "auto", 476, "NVIDIA/nccl-tests issue 290"),
    ("8 x A100, ring", "all-reduce", 8e9, 8, 1, "hgx-a100", "ring", 235, "ml-engineering, network/README.md"),
    ("one NDR NIC", "all-reduce", 8e9, 1, 2, "ib-ndr", "ring", 47, "NVIDIA/nccl-tests issue 290: 46-48 per NIC"),
    ("one HDR NIC", "all-reduce", 8e9, 1, 2, "ib-hdr", "ring", 24, "NVIDIA/nccl-tests issue 119: about 24 per NIC"),
]


def published() -> None:
    print("== roofkit's collectives against published nccl-tests results (bus bandwidth, GB/s) ==")
    print(f"  {'run':<26} {'published':>9} {'bound':>7} {'calibrated':>10}  source")
    for label, c, size, k, m, link, algorithm, busbw, source in PUBLISHED:
        if m == 1:
            b, e = (comms.collective(c, size, k, link, algorithm, calibrated=cal) for cal in (False, True))
        else:  # one GPU per node: the NIC's own ring
            b, e = (comms.collective(c, size, m, link, algorithm, calibrated=cal) for cal in (False, True))
        print(f"  {label:<26} {busbw:>9} {b.busbw / 1e9:>7.0f} {e.busbw / 1e9:>10.0f}  {source}")
    ring = comms.all_reduce(8e9, 8, "hgx-h100", "ring", calibrated=True)
    auto = comms.all_reduce(8e9, 8, "hgx-h100", "auto", calibrated=True)
    print(f"  roofkit comm all-reduce --bytes 8GB --gpus 8 --link hgx-h100 --calibrated: ring {ring.busbw / 1e9:.0f} "
          f"GB/s busbw, auto ({auto.algorithm}) {auto.busbw / 1e9:.0f} GB/s")


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
    parser.add_argument("--published-only", action="store_true", help="only the published nccl-tests comparison")
    args = parser.parse_args()
    published()
    if args.published_only:
        return

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
