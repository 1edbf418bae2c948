"""The empirical roofline of the machine it runs on: measure, predict, compare.

    >>> from roofkit import measure
    >>> profile = measure.run(quick=True)            # doctest: +SKIP
    >>> print(profile.report())                      # doctest: +SKIP
    >>> profile.save("my-machine.json")              # doctest: +SKIP
    >>> measure.load_profile("my-machine.json")      # doctest: +SKIP
    >>> roofkit.hw("my-machine").ridge("fp32")       # doctest: +SKIP

One module per concept:

    system   caches, cores, memory; thread limits (threadpoolctl, numexpr)
    timing   the best of several runs, timed in rounds; numpy across threads
    matmul   the compute roof: a numpy/BLAS matmul sweep, FP64 and FP32
    stream   the memory roof: STREAM copy, scale, add, triad, bytes counted
    kernels  add, reduction, GEMV, GEMM, softmax at several sizes; the prediction table
    fused    one elementwise chain unfused (numpy) vs fused (numexpr, cache-sized blocks)
    gpu      the same through PyTorch when it sees a CUDA device
    layers   whole decoder layers timed op by op on the GPU; the H200 dataset shipped with roofkit
    predicted  roofkit's predictions against those measurements: tables and figures
    profile  the result: report, JSON, catalog entry
    sanity   what must hold on any machine (FP32 at least FP64, no kernel above its roof, ...)
    plot     the measured roofline with the kernels on it

:func:`run` sets all of it up, then times it in rounds, with a progress bar.
It then checks the result (:mod:`~roofkit.measure.sanity`); what fails is timed
again, a few rounds more (``Settings.retries`` times at most), keeping every
run's best, and what still fails is reported with the profile.
``quick=True`` takes a few seconds (fewer sizes and rounds: for the lesson);
the default takes under a minute on two cores.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass

from ..units import whole
from . import gpu as _gpu
from . import kernels as _kernels
from . import matmul as _matmul
from . import stream as _stream
from . import sanity, system, timing
from .fused import FusionChain
from .kernels import KernelResult, predict, prediction_error, prediction_table, format_table
from .profile import Profile, load_profile
from .stream import stream_bytes, stream_cost
from .timing import Pool

__all__ = ["run", "until_sane", "sanity", "Profile", "load_profile", "KernelResult", "predict", "prediction_error",
           "prediction_table", "format_table", "stream_bytes", "stream_cost", "gpu_status", "system", "Settings",
           "QUICK", "DEFAULT"]


@dataclass(frozen=True)
class Settings:
    """How much to measure: the matmul sizes, the rounds (and seconds) of timing, the kernels' places."""

    matmul_sizes: tuple[int, ...]
    rounds: int  # every measurement is timed once per round; each keeps its best
    budget_s: float  # no new round once this many seconds of timing have passed (at least 2 rounds)
    places: tuple[str, ...]  # where the kernel set's working sets live: "L2", "LLC", "DRAM"
    max_gemm: int  # the kernel set's largest GEMM
    retries: int = 2  # times the groups of a failed check are timed again (rounds more each), at most


QUICK = Settings((256, 512, 1024), 4, 2.0, ("L2", "LLC", "DRAM"), 1024, 2)
DEFAULT = Settings((256, 512, 1024, 2048, 3072), 10, 30.0, ("L2", "LLC", "DRAM"), 4096, 3)


def gpu_status() -> str:
    """One line: the GPU PyTorch sees, or why none will be measured."""
    return _gpu.status()[1]


def until_sane(fns: dict, times: dict, build, time_again, retries: int):
    """Check what ``build(times)`` gives; time the groups of a failed check again, at most ``retries`` times.

    ``fns`` maps (group, key) to a function; ``times`` holds its best time so far;
    ``build(times)`` makes a :class:`Profile` of them; ``time_again(fns)`` times a
    subset of ``fns`` and returns {(group, key): seconds}. Every run's best is kept:
    disturbance only ever makes a run slower. Returns (the profile, the groups timed
    again, in order).
    """
    times = dict(times)
    profile, remeasured = build(times), []
    for _ in range(retries):
        groups = {g for c in sanity.failed(sanity.check(profile)) for g in c.remeasure}
        if not groups:
            break
        remeasured += [g for g in dict.fromkeys(group for group, _ in fns) if g in groups and g not in remeasured]
        again = time_again({k: fn for k, fn in fns.items() if k[0] in groups})
        times = {k: min(t, again.get(k, t)) for k, t in times.items()}
        profile = build(times)
    return profile, remeasured


def run(quick: bool = False, threads: int | None = None, progress: bool = True, gpu: bool = True,
        llc_bytes: int | None = None, settings: Settings | None = None) -> Profile:
    """Measure this machine and return its :class:`Profile`.

    ``threads``: cores to use (default: all this process may run on).
    ``llc_bytes`` overrides the detected last-level cache, which sets every
    array size (tests pass a small one). ``gpu=False`` skips the GPU path.

    Everything is set up first (arrays filled), then timed in rounds: the
    matmul sweep, STREAM, the kernel set and the fusion chain each once per
    round, so that a noisy moment on a shared machine touches the roofs and the
    kernels alike (:func:`~roofkit.measure.timing.best_of_rounds`).
    """
    started = time.perf_counter()
    machine = system.machine()
    if threads is None:
        threads = machine.cores
    threads = whole(threads, "threads", integer_only=True)
    s = settings or (QUICK if quick else DEFAULT)
    llc = int(llc_bytes or machine.llc_bytes)
    l2 = min(machine.l2_bytes, llc)
    block = system.block_bytes(l2, llc, threads)
    n, note = _stream.array_elements(llc, 8, 4, machine.memory_available_bytes)
    places = {k: v for k, v in _kernels.places(l2, llc).items() if k in s.places}
    gpu_ok, gpu_line = _gpu.status() if gpu else (False, "GPU: not measured (skipped).")

    from tqdm.auto import tqdm  # deferred: tqdm costs ~50 ms at import

    # steps: setting up, the warm-up, each round (and the GPU's); a re-measurement adds its own
    bar = tqdm(total=2 + s.rounds + (_gpu.steps(quick) if gpu_ok else 0), desc="roofkit measure", unit="step",
               disable=not progress, leave=False)
    try:
        with system.limit_threads(threads), Pool(threads) as pool:
            bar.set_postfix_str("setting up")
            benches = {"matmul": _matmul.MatmulSweep(s.matmul_sizes, ("fp64", "fp32")),
                       "stream": _stream.Stream(n, pool, block),
                       "kernels": _kernels.KernelSet(places, pool, l2, llc, _kernels.KERNELS, s.max_gemm),
                       "fusion": FusionChain(_kernels.shapes("add", 4 * llc)[0], pool, block)}
            benches["fusion"].check()
            bar.update(1)
            bar.set_postfix_str("timing in rounds")
            # memory-bound work first in each round, BLAS last, and a pause before the next round:
            # BLAS threads spin for a while after a call and would share the cores with the next kernel
            order = [("stream", benches["stream"].fns()), ("kernels", benches["kernels"].fns(blas=False)),
                     ("fusion", benches["fusion"].fns()), ("kernels", benches["kernels"].fns(blas=True)),
                     ("matmul", benches["matmul"].fns())]
            fns = {(name, key): fn for name, group in order for key, fn in group.items()}
            times = timing.best_of_rounds(fns, s.rounds, s.budget_s, progress=lambda: bar.update(1),
                                          settle_s=timing.BLAS_SETTLE_S)

            def build(times) -> Profile:
                mine = {name: {key: t for (owner, key), t in times.items() if owner == name} for name in benches}
                matmul = benches["matmul"].results(mine["matmul"])
                stream = benches["stream"].results(mine["stream"])
                peaks = {p: _matmul.peak(matmul, p) for p in ("fp64", "fp32")}
                bandwidth, roof_kernel = _stream.memory_roof(stream)
                built = Profile(
                    host=machine.host, date=datetime.date.today().isoformat(), cpu=machine.cpu,
                    vendor=machine.vendor, threads=threads, quick=bool(quick), llc_bytes=llc, l2_bytes=l2,
                    cache_source="given" if llc_bytes else machine.cache_source,
                    peak_flops_per_s=peaks, bandwidth_bytes_per_s=bandwidth, bandwidth_kernel=roof_kernel,
                    array_note=note, stream={k: v.to_dict() for k, v in stream.items()},
                    matmul=[m.to_dict() for m in matmul],
                    kernels=benches["kernels"].results(mine["kernels"], peaks["fp32"], bandwidth), gpu_status=gpu_line)
                built.fusion = benches["fusion"].results(mine["fusion"], built.accelerator()).to_dict()
                return built

            def timed_again(subset):
                bar.total += s.rounds + 1
                bar.set_postfix_str("timing again: " + ", ".join(sorted({k[0] for k in subset})))
                return timing.best_of_rounds(subset, s.rounds, s.budget_s, progress=lambda: bar.update(1),
                                             settle_s=timing.BLAS_SETTLE_S)

            profile, remeasured = until_sane(fns, times, build, timed_again, s.retries)
        profile.remeasured = remeasured
        del benches, fns  # free the arrays before the GPU's turn
        if gpu_ok:
            bar.set_postfix_str("GPU")
            try:
                profile.gpu = _gpu.measure_gpu(quick, lambda: bar.update(1)).to_dict()
            except Exception as error:  # noqa: BLE001 - a GPU failure must not lose the CPU profile
                detail = str(error).splitlines()[0][:160] if str(error) else ""
                profile.gpu_status = f"{gpu_line}: measurement failed ({type(error).__name__}: {detail})."
    finally:
        bar.close()
    profile.elapsed_s = time.perf_counter() - started
    return profile
