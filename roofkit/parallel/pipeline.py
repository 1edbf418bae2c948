"""Pipeline parallelism: schedules and their bubble.

p stages, m micro-batches per step, each stage holding v chunks of layers:

    bubble = (p - 1) / v  x  t_mb          idle time per step, t_mb one micro-batch through one stage
    share of the step = (p - 1) / (v m + p - 1)

* GPipe (Huang et al. 2019, arXiv:1811.06965): all forwards, then all
  backwards; every stage holds the activations of all m micro-batches.
* 1F1B (PipeDream-Flush; Narayanan et al. 2021, arXiv:2104.04473, section
  2.2.1): after p - 1 warm-up forwards each stage alternates one forward and one
  backward. Its bubble is GPipe's; what it changes is memory: a stage holds at
  most p micro-batches' activations in flight, not m.
* interleaved 1F1B (section 2.2.2): v non-adjacent chunks per stage shrink the
  bubble v-fold, for v times the point-to-point sends.
* zero-bubble schedules (Qi et al. 2023, arXiv:2401.10241; DeepSeek-V3's
  DualPipe, arXiv:2412.19437) split the backward into its input-gradient and
  weight-gradient halves and fill the bubble with the latter; they are named
  here, not modelled.
"""

from __future__ import annotations

import math

from ..errors import InvalidValue
from ..units import positive, whole

__all__ = ["SCHEDULES", "schedule", "bubble_fraction", "bubble_time", "microbatches_for_bubble", "in_flight"]

SCHEDULES = {
    "gpipe": "GPipe: all forwards, then all backwards; holds m micro-batches",
    "1f1b": "1F1B: one forward, one backward; holds at most p micro-batches",
    "interleaved": "interleaved 1F1B: v chunks per stage, bubble / v",
    "zero-bubble": "zero-bubble (ZB-H1/ZB-V, DualPipe): the weight gradients fill the bubble (named, not modelled)",
}


def schedule(virtual_stages=1) -> str:
    """'1f1b' or 'interleaved' (v > 1): the schedule roofkit models for a pipeline."""
    return "interleaved" if whole(virtual_stages, "virtual_stages") > 1 else "1f1b"


def bubble_fraction(stages, microbatches, virtual_stages=1):
    """(p - 1) / (v m + p - 1): the share of a pipelined step in which a stage idles.

    p stages, m micro-batches (GPipe, Huang et al. 2019; 1F1B); v > 1 model
    chunks per GPU shrink the bubble v-fold (interleaved 1F1B, Narayanan et al.
    2021, arXiv:2104.04473, section 2.2.2).

    >>> bubble_fraction(16, 16)
    0.4838709677419355
    """
    p, m, v = positive(stages, "stages"), positive(microbatches, "microbatches"), positive(virtual_stages, "v")
    return (p - 1) / (v * m + p - 1)


def bubble_time(compute_s, stages, microbatches, virtual_stages=1):
    """(p - 1)/(v m) x compute: the idle time added to ``compute_s``, bubble_fraction of the sum."""
    p, m, v = positive(stages, "stages"), positive(microbatches, "microbatches"), positive(virtual_stages, "v")
    return positive(compute_s, "compute_s") * (p - 1) / (v * m)


def microbatches_for_bubble(stages, fraction, virtual_stages=1) -> int:
    """The fewest micro-batches m that keep the bubble of ``stages`` stages at most ``fraction`` of the step.

    From (p - 1)/(v m + p - 1) <= x:  m >= (p - 1)(1 - x) / (v x), rounded up.

    >>> microbatches_for_bubble(16, 0.05)
    285
    """
    p, v = whole(stages, "stages"), whole(virtual_stages, "virtual_stages")
    x = float(positive(fraction, "fraction"))
    if x >= 1:
        raise InvalidValue(f"fraction is a share of the step, in (0, 1); got {fraction!r}.")
    m = max(1, math.ceil((p - 1) * (1 - x) / (v * x)))
    while m > 1 and bubble_fraction(p, m - 1, v) <= x:  # guard against rounding in the division
        m -= 1
    while bubble_fraction(p, m, v) > x:
        m += 1
    return m


def in_flight(stages, microbatches, virtual_stages=1) -> float:
    """Micro-batches whose activations the first stage holds at once, in units of its whole share of layers.

    1F1B: min(p, m). Interleaved, (1 + (p - 1)/(p v)) times that (Korthikanti et
    al. 2022, arXiv:2205.05198, section 4.2.3: the first stage runs extra warm-up
    forwards of its other chunks).
    """
    p, m, v = whole(stages, "stages"), positive(microbatches, "microbatches"), whole(virtual_stages, "v")
    base = min(p, m)
    return base * (1 + (p - 1) / (p * v)) if v > 1 and p > 1 else base
