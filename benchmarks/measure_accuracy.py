"""How accurate is `roofkit measure`? Its figures against independent references, in one session.

    python benchmarks/measure_accuracy.py [--threads N]

Not a pass/fail test: measurements are machine-specific, and on a shared
machine noisy (best-of-N everywhere). Targets, from the measure issue:

1. STREAM triad: roofkit's triad bandwidth within 10% of a triad written in
   C (compiled here with gcc -O3 -fopenmp, same arrays, same threads). The C
   loop is loaded with ctypes and timed in the same rounds as roofkit's loops,
   so that both see the same moments of the machine. roofkit's memory roof,
   the best of its four STREAM loops, is compared too.
2. GEMM: roofkit's peak FLOP/s (from a default `roofkit measure` run) within
   10% of the best of a wider BLAS sweep timed here with plain perf_counter.
3. The roofline's median prediction error over the kernels well outside the
   caches (working set >= 4x the last-level cache): under 20%.
4. `roofkit measure` under 60 s, `roofkit measure --quick` under 10 s (whole
   processes, 2 cores).
5. Each run's own checks (roofkit.measure.sanity: FP32 at least FP64, no kernel
   above its roof, ...) pass, after the re-measurements they asked for: a run
   that fails them is too noisy for targets 2 and 3 to mean anything.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from roofkit import formulas
from roofkit.measure import Profile, sanity, stream, system, timing

C_TRIAD = r"""
#include <omp.h>
void triad(double *a, const double *b, const double *c, double q, long n) {
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + q * c[i];
}
void set_threads(int t) { omp_set_num_threads(t); }
"""


def verdict(ok: bool) -> str:
    return "ok" if ok else "OFF TARGET"


def compile_triad(folder: Path):
    """The C triad as a shared library (None, with a reason, when gcc is missing or fails)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None, "gcc not found"
    source, library = folder / "triad.c", folder / "libtriad.so"
    source.write_text(C_TRIAD)
    done = subprocess.run([gcc, "-O3", "-fopenmp", "-fPIC", "-shared", str(source), "-o", str(library)],
                          capture_output=True, text=True)
    if done.returncode:
        return None, done.stderr.strip().splitlines()[-1] if done.stderr else "gcc failed"
    lib = ctypes.CDLL(str(library))
    p = ctypes.POINTER(ctypes.c_double)
    lib.triad.argtypes = [p, p, p, ctypes.c_double, ctypes.c_long]
    lib.set_threads.argtypes = [ctypes.c_int]
    return lib, ""


def triad_against_c(threads: int, rounds: int = 20) -> None:
    machine = system.machine()
    n, note = stream.array_elements(machine.llc_bytes, 8, 4, machine.memory_available_bytes)
    print(f"1. STREAM triad: {n:,} doubles per array ({note}), {threads} threads, best of {rounds} rounds")
    with tempfile.TemporaryDirectory() as folder:
        lib, why = compile_triad(Path(folder))
        if lib is None:
            print(f"   skipped: {why}")
            return
        lib.set_threads(threads)
        a, b, c = np.full(n, 1.0), np.full(n, 2.0), np.full(n, 0.5)
        ptr = lambda x: x.ctypes.data_as(ctypes.POINTER(ctypes.c_double))  # noqa: E731
        with system.limit_threads(threads), timing.Pool(threads) as pool:
            ours = stream.Stream(n, pool, system.block_bytes(min(machine.l2_bytes, machine.llc_bytes),
                                                             machine.llc_bytes, threads))
            fns = {("roofkit", k): fn for k, fn in ours.fns().items()}
            fns[("C", "triad")] = lambda: lib.triad(ptr(a), ptr(b), ptr(c), 3.0, n)
            times = timing.best_of_rounds(fns, rounds=rounds, min_sample_s=0)
    results = ours.results({k: t for (who, k), t in times.items() if who == "roofkit"})
    c_bw = stream.stream_bytes("triad", n, 8) / times[("C", "triad")]
    for name, r in results.items():
        print(f"   roofkit {name:12s} {r.arrays:g} arrays {r.bandwidth / 1e9:8.2f} GB/s")
    ratio = results["triad"].bandwidth / c_bw
    roof, which = stream.memory_roof(results)
    print(f"   C triad (gcc -O3 -fopenmp)  3 arrays {c_bw / 1e9:8.2f} GB/s")
    print(f"   roofkit triad / C triad = {ratio:.3f}  (target within 10%: {verdict(abs(ratio - 1) <= 0.10)})")
    print(f"   roofkit memory roof (best loop: {which}) / C triad = {roof / c_bw:.3f}")


def blas_sweep(precision: str, sizes, repeats: int = 5, budget_s: float = 8.0) -> tuple[float, int]:
    """Best FLOP/s of a square matmul over ``sizes``, timed here with perf_counter (best of ``repeats``)."""
    dtype = {"fp64": np.float64, "fp32": np.float32}[precision]
    rng = np.random.default_rng(1)
    best, best_n = 0.0, 0
    for n in sizes:
        a, b = rng.random((n, n), dtype=dtype), rng.random((n, n), dtype=dtype)
        out = np.empty((n, n), dtype)
        np.matmul(a, b, out=out)  # warm-up
        start, fastest = time.perf_counter(), float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            np.matmul(a, b, out=out)
            fastest = min(fastest, time.perf_counter() - t0)
            if time.perf_counter() - start > budget_s:
                break
        rate = formulas.gemm(n, n, n).flops / fastest
        if rate > best:
            best, best_n = rate, n
    return best, best_n


def run_cli(*flags: str) -> tuple[float, dict]:
    """Wall time and JSON of a whole `roofkit measure` process."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "roofkit.cli", "measure", "--json", *flags],
                          capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=system.default_threads())
    args = parser.parse_args()
    machine = system.machine()
    print(f"{machine.host}: {machine.cpu}, {machine.cores} cores, last-level cache "
          f"{machine.llc_bytes / 2**20:g} MiB ({machine.cache_source}); threads {args.threads}\n")

    triad_against_c(args.threads)

    print("\n4. whole `roofkit measure` processes (also the profile for 2 and 3)")
    quick_s, quick = run_cli("--quick", "--threads", str(args.threads))
    default_s, data = run_cli("--threads", str(args.threads))
    print(f"   --quick  {quick_s:6.1f} s  (target < 10 s: {verdict(quick_s < 10)})")
    print(f"   default  {default_s:6.1f} s  (target < 60 s: {verdict(default_s < 60)})")
    profile = Profile.from_dict(data)

    print("\n5. each run's own checks")
    for label, run in (("--quick", Profile.from_dict(quick)), ("default", profile)):
        report = sanity.report(run.sanity(), run.remeasured).replace("\n", "\n   ")
        print(f"   {label}: {report}  ({verdict(run.sane)})")

    print("\n2. GEMM: roofkit's peak against the best of a wider BLAS sweep (perf_counter, best of 5)")
    sizes = (256, 512, 768, 1024, 1536, 2048, 2560, 3072, 4096)
    with system.limit_threads(args.threads):
        for precision in ("fp64", "fp32"):
            best, n = blas_sweep(precision, sizes)
            ours = profile.peak_flops_per_s[precision]
            ratio = ours / best
            print(f"   {precision}: roofkit {ours / 1e9:7.1f} GFLOP/s, sweep best {best / 1e9:7.1f} GFLOP/s "
                  f"(n = {n}); ratio {ratio:.3f} (target within 10%: {verdict(abs(ratio - 1) <= 0.10)})")
    gemm = [k for k in profile.kernels if k.kernel == "gemm"]
    if gemm:
        k = max(gemm, key=lambda k: k.shape[0])
        print(f"   the kernel set's largest GEMM (n = {k.shape[0]}, FP32): {k.achieved_flops_per_s / 1e9:.1f} GFLOP/s")

    print("\n3. the roofline's predictions for the kernels well outside the caches")
    outside = profile.outside_caches()
    for k in outside:
        print(f"   {k.label:18s} predicted {k.predicted_s * 1e3:8.3g} ms, measured {k.time_s * 1e3:8.3g} ms, "
              f"error {k.error:+.0%}")
    median = profile.median_error()
    if median is not None:
        print(f"   median |error| {median:.0%} over {len(outside)} kernels (target < 20%: {verdict(median < 0.20)})")
    spread = statistics.median(abs(k.error) for k in profile.kernels)
    print(f"   (all kernels, caches included: median |error| {spread:.0%})")


if __name__ == "__main__":
    main()
