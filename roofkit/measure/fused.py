"""Fusion made visible: one elementwise chain, unfused in numpy, fused in numexpr and in cache-sized blocks.

The chain is y = (x * q + bias) * g + r, four ops of :data:`roofkit.fusion.OPS`
(scale, bias_add, mul, residual_add). Run the way numpy runs it, each op is a
pass over memory that reads its inputs and writes a temporary the size of x:

    t1 = x * q        read x,       write t1
    t2 = t1 + bias    read t1,      write t2
    t3 = t2 * g       read t2, g,   write t3
    y  = t3 + r       read t3, r,   write y          10 arrays of traffic

Fused, the intermediates never leave the chip: read x, g and r, write y, 4
arrays. :func:`roofkit.fusion.chain` predicts the ratio (and, on the measured
roofline, the speed-up); this module measures it two ways:

* numexpr evaluates the expression in blocks of a few thousand elements that
  stay in the cache (its virtual machine also costs some time per element, so
  on a fast memory system it can become compute-bound);
* numpy itself, run block by block (each block small enough to stay in the
  caches), which is what a fused GPU kernel does with registers and shared
  memory, and what roofkit's STREAM triad does too.

The unfused version writes into temporaries allocated beforehand, so that it
moves exactly the modelled bytes. The same chain written as one numpy
expression, ``(x * q + bias) * g + r``, is timed too: its fresh temporaries
also cost the operating system's page faults (new memory is handed out
zeroed, one more pass).
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass

import numpy as np

from ..perf import fusion
from .timing import Pool

__all__ = ["CHAIN", "EXPRESSION", "FusionResult", "FusionChain"]

CHAIN = ("scale", "bias_add", "mul", "residual_add")
EXPRESSION = "(x * q + bias) * g + r"


@dataclass(frozen=True)
class FusionResult:
    ops: tuple[str, ...]
    n: int
    bytes_unfused: float  # fusion.chain(...).unfused.bytes
    bytes_fused: float
    unfused_s: float  # numpy, one preallocated temporary per op
    fused_s: float  # numexpr
    blocked_s: float  # numpy in cache-sized blocks
    expression_s: float  # numpy written as one expression (fresh temporaries)
    predicted_speedup: float  # fusion.chain(...).time(...) on the measured roofs, no launch overhead

    @property
    def traffic_ratio(self) -> float:
        return self.bytes_unfused / self.bytes_fused

    @property
    def speedup(self) -> float:
        """Unfused time over the faster fused time (numexpr or blocks)."""
        return self.unfused_s / min(self.fused_s, self.blocked_s)

    def to_dict(self) -> dict:
        return asdict(self) | {"traffic_ratio": self.traffic_ratio, "speedup": self.speedup,
                               "unfused_bandwidth_bytes_per_s": self.bytes_unfused / self.unfused_s,
                               "fused_bandwidth_bytes_per_s": self.bytes_fused / min(self.fused_s, self.blocked_s)}


class FusionChain:
    """The chain on n FP32 elements, four ways: ``fns()`` to time, ``results(times, accelerator)`` to read.

    ``check()`` verifies that every version computes the same y (a bug, not a
    measurement, if not). ``block_bytes`` sizes the blocked version's temporary.
    """

    def __init__(self, n: int, pool: Pool, block_bytes: int = 2**19):
        import numexpr  # deferred: numexpr costs ~0.12 s at import

        self.n = n = int(n)
        self._np = np
        x = np.linspace(-2, 2, n, dtype=np.float32)  # values that differ, so that a wrong version shows
        g, r, self._y = np.full(n, 0.75, np.float32), np.full(n, 0.25, np.float32), np.empty(n, np.float32)
        y = self._y
        t1, t2, t3 = (np.empty(n, np.float32) for _ in range(3))
        q, bias = np.float32(1.5), np.float32(-0.5)  # FP32 scalars keep numexpr in FP32
        self.model = model = fusion.chain(list(CHAIN), n, "fp32")
        block = max(1024, block_bytes // 4)
        local = threading.local()

        def unfused(s):
            np.multiply(x[s], q, out=t1[s])
            np.add(t1[s], bias, out=t2[s])
            np.multiply(t2[s], g[s], out=t3[s])
            np.add(t3[s], r[s], out=y[s])

        def blocked(s):
            t = getattr(local, "t", None)
            if t is None:
                t = local.t = np.empty(min(block, n), np.float32)
            for i in range(s.start, s.stop, block):
                j = min(i + block, s.stop)
                u = t[: j - i]
                np.multiply(x[i:j], q, out=u)
                np.add(u, bias, out=u)
                np.multiply(u, g[i:j], out=u)
                np.add(u, r[i:j], out=y[i:j])

        def expression(s):
            y[s] = (x[s] * q + bias) * g[s] + r[s]

        def fused():  # numexpr runs on its own threads (limit_threads sets how many)
            numexpr.evaluate(EXPRESSION, local_dict={"x": x, "g": g, "r": r, "q": q, "bias": bias}, out=y)

        self._fns = {
            "unfused": lambda: pool.parallel(unfused, n, model.unfused.bytes),
            "fused": fused,
            "blocked": lambda: pool.parallel(blocked, n, model.fused.bytes),
            "expression": lambda: pool.parallel(expression, n, model.unfused.bytes),
        }

    def fns(self) -> dict:
        return dict(self._fns)

    def check(self) -> None:
        """Run each version once and compare a sample of y; RuntimeError if they disagree."""
        np, y = self._np, self._y
        sample = slice(None, None, max(1, self.n // 4099))  # a few thousand elements catch a bug
        reference = None
        for name, fn in self._fns.items():
            y.fill(np.nan)
            fn()
            if reference is None:
                reference = y[sample].copy()
            elif not np.allclose(y[sample], reference, rtol=1e-5, atol=1e-6):
                raise RuntimeError(f"the fusion chain's {name} version disagrees with the unfused one")

    def results(self, times: dict, accelerator) -> FusionResult:
        """``accelerator`` holds the measured roofs, for the fusion model's predicted speed-up."""
        predicted = self.model.time(accelerator, "fp32", launch_overhead_s=0)["speedup"]
        return FusionResult(CHAIN, self.n, float(self.model.unfused.bytes), float(self.model.fused.bytes),
                            times["unfused"], times["fused"], times["blocked"], times["expression"],
                            float(predicted))
