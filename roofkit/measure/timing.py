"""Timing on a CPU: the best of several runs, taken in rounds; threads for numpy.

Why the best and not the mean: everything that disturbs a measurement (another
process, an interrupt, a page fault, a cold cache) only makes it slower, so
the fastest run is the closest to what the machine can do. STREAM reports the
best of 10 runs for the same reason.

Why rounds: on a shared machine the disturbance comes and goes. Timing every
kernel once per round, round after round (:func:`best_of_rounds`), gives each
one the same chances of a quiet moment, so that the roofs and the kernels
predicted from them are measured under the same conditions. Timing one kernel
ten times and then the next would let a noisy minute fall on one of them.

A kernel faster than about a millisecond is run several times in a loop and
the loop's time divided: one ``perf_counter`` reading is good to well under a
microsecond, but Python's call overhead (a microsecond or so per numpy call)
is part of what a small kernel costs, and is kept in. That overhead is the
CPU's version of a GPU's kernel-launch overhead.

numpy's elementwise operations use one core. :class:`Pool` splits an array's
rows among threads (numpy releases the GIL inside its loops), the way STREAM's
OpenMP loops split theirs, so that every kernel runs on the same number of
cores as the BLAS library.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

__all__ = ["best_time", "best_of_rounds", "Pool", "MIN_SAMPLE_S", "BLAS_SETTLE_S"]

MIN_SAMPLE_S = 2e-3  # a timed sample lasts at least this long (several calls for a tiny kernel)
BLAS_SETTLE_S = 0.06  # OpenBLAS's idle threads spin for ~40 ms after a call (measured on a 2-core VM)
PARALLEL_MIN_BYTES = 4 * 2**20  # below this, splitting across threads costs more than it saves


def best_time(fn, repeats: int = 5, budget_s: float | None = None, min_sample_s: float = MIN_SAMPLE_S) -> float:
    """The fastest time of one call of ``fn()``, in seconds, over ``repeats`` samples (after a warm-up call)."""
    return best_of_rounds({0: fn}, repeats, budget_s, 2, min_sample_s)[0]


def _calibrate(fn, min_sample_s: float) -> tuple[int, float]:
    """Run ``fn`` once (the warm-up); return (calls per sample, that call's time)."""
    t0 = time.perf_counter()
    fn()
    first = time.perf_counter() - t0
    return (max(1, int(min_sample_s / max(first, 1e-9)) + 1) if first < min_sample_s else 1), first


def best_of_rounds(fns: dict, rounds: int = 5, budget_s: float | None = None, min_rounds: int = 2,
                   min_sample_s: float = MIN_SAMPLE_S, progress=None, settle_s: float = 0.0) -> dict:
    """The fastest time of one call of each function, timing every function once per round.

    ``fns`` maps any key to a function of no arguments. Each is first called
    once to warm up and to size its inner loop. Sampling stops after
    ``rounds`` rounds, or after the round in which ``budget_s`` seconds have
    passed (but not before ``min_rounds``). ``progress`` is called after the
    warm-up and after each round. ``settle_s`` is a pause before each round: BLAS libraries keep
    their threads spinning for tens of milliseconds after a call, and a
    kernel timed meanwhile shares its cores with them. Returns {key: seconds
    per call}.
    """
    start = time.perf_counter()
    calls, best = {}, {}
    for key, fn in fns.items():
        calls[key], first = _calibrate(fn, min_sample_s)
        best[key] = first if calls[key] == 1 else float("inf")
    if progress:
        progress()  # the warm-up counts as a step
    for r in range(rounds):
        if settle_s:
            time.sleep(settle_s)
        for key, fn in fns.items():
            n = calls[key]
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best[key] = min(best[key], (time.perf_counter() - t0) / n)
        if progress:
            progress()
        if budget_s is not None and r + 1 >= min_rounds and time.perf_counter() - start > budget_s:
            break
    return best


class Pool:
    """A fixed pool of ``threads`` threads that runs ``fn(rows)`` on row ranges of an array."""

    def __init__(self, threads: int):
        self.threads = max(1, int(threads))
        self._executor = ThreadPoolExecutor(self.threads) if self.threads > 1 else None

    def parallel(self, fn, rows: int, nbytes: float = float("inf")) -> None:
        """Call ``fn(slice)`` on ``threads`` contiguous slices of range(rows), all at once.

        Small work (under ``PARALLEL_MIN_BYTES``) runs on the calling thread.
        """
        if self._executor is None or rows < self.threads or nbytes < PARALLEL_MIN_BYTES:
            fn(slice(0, rows))
            return
        step = -(-rows // self.threads)
        slices = [slice(i, min(i + step, rows)) for i in range(0, rows, step)]
        for future in [self._executor.submit(fn, s) for s in slices]:
            future.result()

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
