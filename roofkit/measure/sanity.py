"""Is a measurement believable? Checks a profile against what must hold on any machine.

A busy machine (another program, a shared server, a virtual machine whose
cores are lent to others) disturbs a measurement at random moments. Best-of-
several runs removes much of that, not all: a roof measured in a noisy moment
comes out too low, and then a kernel timed in a quiet one "beats" it. These
checks catch the results that cannot be right:

* ``fp32-below-fp64``: a CPU's vector units do at least as many FP32 operations
  per cycle as FP64 ones (twice as many on every x86 and Arm core with SIMD),
  so the FP32 matmul peak cannot be below the FP64 one;
* ``above-roof``: no kernel can run much faster than the roofs measured on the
  same cores. A compute-bound kernel (the GEMM) is the same BLAS product as the
  matmul sweep, and no cache raises the compute roof: its FLOP rate stays
  within 1.05x of the sweep's best. Any other kernel's FLOP rate stays within
  1.2x of it; a kernel whose data came from memory (at least 4x the last-level
  cache) moves its bytes at most 1.2x as fast as the best STREAM loop, or
  1.2 x 4/3 as fast if it only reads: STREAM counts a written array once, while
  a cache that allocates on write reads it first, so a loop that writes moves
  up to 4/3 of what is counted (add and triad; 3/2 for copy and scale) and a
  read-only kernel may show that much more;
* ``far-below``: a kernel too large for one core's L2 (its working set in the
  last-level cache or in memory) takes less than 5x its prediction: per-call
  overhead is negligible at that size, and the roofs were measured on the same
  cores, so a kernel that much slower was timed in a noisy moment;
* ``median-error``: the kernels from memory land, at the median, within 50% of
  their prediction (on a quiet machine they come within a few tens of percent);
  a larger median says the run was noisy, or that the model does not describe
  this machine, and either way the table is not to be read as the roofline's
  verdict;
* ``stream-spread``: STREAM's four loops measure the same memory; the slowest
  is at least half as fast as the fastest;
* ``fusion-slower``: the chain run in cache-sized blocks moves 2.5x fewer bytes
  than the unfused one; it cannot take longer.

Each failed check names what to time again (``remeasure``); :func:`roofkit.measure.run`
does so, a few rounds more, and keeps every run's best. What still fails after
that is reported with the profile: those numbers are not to be trusted.

    >>> from roofkit.measure.profile import Profile
    >>> p = Profile(host="lab-pc", date="2026-11-03", cpu="Example CPU", vendor="Example", threads=2,
    ...             quick=True, llc_bytes=32 * 2**20, l2_bytes=2**20, cache_source="sysfs",
    ...             peak_flops_per_s={"fp64": 50.6e9, "fp32": 17.9e9}, bandwidth_bytes_per_s=6.86e9)
    >>> [c.name for c in check(p) if not c.ok]
    ['fp32-below-fp64']
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["Check", "check", "failed", "report", "ROOF_TOLERANCE", "COMPUTE_TOLERANCE", "WRITE_ALLOCATE", "READ_ONLY",
           "STREAM_SPREAD", "FAR_BELOW", "MEDIAN_ERROR"]

ROOF_TOLERANCE = 1.2  # a kernel may beat a roof by this much before the roof is suspect
COMPUTE_TOLERANCE = 1.05  # a compute-bound kernel (the sweep's own BLAS product) over the sweep's best
FAR_BELOW = 5.0  # a kernel outside one core's L2 may take at most this many times its prediction
MEDIAN_ERROR = 0.5  # the median |error| of the kernels from memory, at most
WRITE_ALLOCATE = 4 / 3  # STREAM's add and triad count 3 arrays; a write-allocate cache moves 4
READ_ONLY = ("reduction", "gemv")  # kernels that read their arrays and write (almost) nothing
STREAM_SPREAD = 0.5  # the slowest of STREAM's four loops over the fastest, at least


@dataclass(frozen=True)
class Check:
    """One check of a profile: its ``name``, whether it passed, what it found, and what to time again."""

    name: str
    ok: bool
    message: str
    remeasure: tuple[str, ...] = ()  # benchmark groups: "matmul", "stream", "kernels", "fusion"

    def to_dict(self) -> dict:
        return asdict(self) | {"remeasure": list(self.remeasure)}


def _g(value: float, unit: str) -> str:
    return f"{value / 1e9:.3g} G{unit}"


def check(profile) -> list[Check]:
    """Every check, passed or not, of a :class:`~roofkit.measure.profile.Profile`."""
    out = []
    peaks, B = profile.peak_flops_per_s, profile.bandwidth_bytes_per_s
    if "fp32" in peaks and "fp64" in peaks:
        ok = peaks["fp32"] >= peaks["fp64"]
        out.append(Check("fp32-below-fp64", ok,
                         f"FP32 matmul peak {_g(peaks['fp32'], 'FLOP/s')} at least FP64's {_g(peaks['fp64'], 'FLOP/s')}"
                         if ok else
                         f"FP32 matmul peak {_g(peaks['fp32'], 'FLOP/s')} below FP64's {_g(peaks['fp64'], 'FLOP/s')}: "
                         "a CPU does at least as many FP32 operations per cycle, so the sweep was disturbed",
                         () if ok else ("matmul",)))
    P = peaks.get("fp32")
    above = []
    for k in profile.kernels:
        limit = COMPUTE_TOLERANCE if k.bound == "compute" else ROOF_TOLERANCE
        if P and k.achieved_flops_per_s > limit * P:
            above.append((k, f"{k.label} at {_g(k.achieved_flops_per_s, 'FLOP/s')}, "
                             f"{k.achieved_flops_per_s / P:.2g}x the FP32 matmul peak", ("matmul", "kernels")))
        if k.where == "DRAM":
            rate = k.bytes_moved / k.time_s
            limit = ROOF_TOLERANCE * B * (WRITE_ALLOCATE if k.kernel in READ_ONLY else 1)
            if rate > limit:
                above.append((k, f"{k.label} moved {_g(rate, 'B/s')}, {rate / B:.2g}x the memory roof of "
                                 f"{_g(B, 'B/s')}", ("stream", "kernels")))
    out.append(Check("above-roof", not above,
                     "no kernel above its roof (beyond 1.05x for a compute-bound one, 1.2x otherwise, or 1.2 x 4/3 "
                     "for one that only reads from memory)"
                     if not above else
                     "; ".join(text for _, text, _ in above) + ": a roof or a kernel was timed in a noisy moment",
                     tuple(dict.fromkeys(g for *_, groups in above for g in groups))))
    slow = [k for k in profile.kernels if k.where != "L2" and k.time_s > FAR_BELOW * k.predicted_s]
    out.append(Check("far-below", not slow,
                     f"no kernel outside a core's L2 slower than {FAR_BELOW:g}x its prediction" if not slow else
                     "; ".join(f"{k.label} took {k.time_s / k.predicted_s:.2g}x its prediction" for k in slow)
                     + ": per-call overhead is negligible at that size, so the kernel was timed in a noisy moment",
                     () if not slow else ("kernels",)))
    median = profile.median_error() if profile.kernels else None
    if median is not None:
        ok = median <= MEDIAN_ERROR
        out.append(Check("median-error", ok,
                         f"the kernels from memory within {median:.0%} of their predictions, at the median"
                         if ok else
                         f"the kernels from memory {median:.0%} from their predictions at the median, over "
                         f"{MEDIAN_ERROR:.0%}: the run was noisy (or the roofline does not describe this machine)",
                         () if ok else ("stream", "kernels")))
    loops = {k: v["bandwidth_bytes_per_s"] for k, v in profile.stream.items() if k in ("copy", "scale", "add", "triad")}
    if loops:
        slow, fast = min(loops, key=loops.get), max(loops, key=loops.get)
        ok = loops[slow] >= STREAM_SPREAD * loops[fast]
        out.append(Check("stream-spread", ok,
                         f"STREAM's loops within {loops[fast] / loops[slow]:.2g}x of each other"
                         if ok else
                         f"STREAM's {slow} at {_g(loops[slow], 'B/s')}, under half its {fast} "
                         f"({_g(loops[fast], 'B/s')}): the same memory, so some runs were disturbed",
                         () if ok else ("stream",)))
    f = profile.fusion
    if f:
        ok = f["blocked_s"] <= f["unfused_s"]
        out.append(Check("fusion-slower", ok,
                         "the fused chain (in cache-sized blocks) faster than the unfused one" if ok else
                         f"the fused chain, {f['traffic_ratio']:.2g}x fewer bytes, took longer than the unfused one: "
                         "the run was disturbed", () if ok else ("fusion",)))
    return out


def failed(checks) -> list[Check]:
    return [c for c in checks if not c.ok]


def report(checks, remeasured=()) -> str:
    """The checks as text: one line each, then what was timed again."""
    lines = [f"  {'ok  ' if c.ok else 'FAIL'} {c.message}" for c in checks]
    head = "checks: all passed" if not failed(checks) else \
        "checks: FAILED, do not trust the numbers that fail; rerun on a quieter machine"
    tail = [f"  re-measured after a failed check: {', '.join(remeasured)}"] if remeasured else []
    return "\n".join([head, *lines, *tail])
