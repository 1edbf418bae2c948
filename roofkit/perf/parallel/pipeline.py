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

Memory: which stage holds most. The layers are split as Llama 3 split them
(arXiv:2407.21783, section 3.3.2): the embedding and the output layer each take
the place of a layer, so the first and the last stage carry one layer fewer, and
with one layer a chunk "the first model chunk on the first stage has only the
embedding, and the last model chunk on the last stage has only output
projection and loss calculation" (:func:`chunk_layers`). Each stage runs its
forwards and backwards in Megatron-LM's order (``schedules.py``: p - r - 1 warm-up
forwards on rank r, or 2 (p - r - 1) + (v - 1) p interleaved, then one forward
and one backward in turn), and :func:`layers_in_flight` counts, stage by stage,
the most layer-micro-batches whose activations wait for their backward at once.

    >>> layers_in_flight(126, 16, 32)          # Llama 3 405B, 1F1B: rank 1 (8 layers x 15) holds most
    (1, 120)
    >>> layers_in_flight(126, 16, 32, 8)       # interleaved, one layer a chunk: 2 x 14 + 7 x 16 + 1 chunks
    (1, 141)
"""

from __future__ import annotations

import math
from functools import lru_cache

from ...errors import InvalidValue
from ...units import positive, whole

__all__ = ["SCHEDULES", "schedule", "bubble_fraction", "bubble_time", "microbatches_for_bubble", "in_flight",
           "chunk_layers", "layers_in_flight"]

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


def chunk_layers(layers, stages, virtual_stages=1) -> list[list[int]]:
    """Layers of each chunk, ``[rank][chunk]``, split as Llama 3 split them (module docstring).

    The L layers and two slots, the embedding's at the start and the output
    layer's at the end, are spread as evenly as the p v chunks allow (a slot
    over goes to the last chunks, which hold the fewest micro-batches in
    flight); global chunk c p + r is chunk c of rank r.

    >>> chunk_layers(126, 16)[0], chunk_layers(126, 16)[1]      # 1F1B: the first stage gives up a layer
    ([7], [8])
    >>> chunk_layers(126, 16, 8)[0]                              # its first chunk holds only the embedding
    [0, 1, 1, 1, 1, 1, 1, 1]
    """
    L, p, v = whole(layers, "layers"), whole(stages, "stages"), whole(virtual_stages, "virtual_stages")
    n = p * v
    if n > L + 2:
        raise InvalidValue(f"pp x virtual_stages = {n} chunks for {L} layers, the embedding and the output layer: "
                           f"at most {L + 2}.")
    base, extra = divmod(L + 2, n)
    slots = [base + (1 if g >= n - extra else 0) for g in range(n)]
    slots[0] -= 1  # the embedding's slot
    slots[-1] -= 1  # the output layer's
    return [[slots[c * p + r] for c in range(v)] for r in range(p)]


@lru_cache(maxsize=512)
def _peaks(layers: int, p: int, m: int, v: int) -> tuple:
    import numpy as np  # deferred: numpy costs ~80 ms at import

    groups = [list(range(g, min(g + p, m))) for g in range(0, m, p)]
    forward = [c for group in groups for c in range(v) for _ in group]
    backward = [c for group in groups for c in reversed(range(v)) for _ in group]
    n = len(forward)
    peaks = []
    for r, sizes in enumerate(chunk_layers(layers, p, v)):
        w = np.asarray(sizes, dtype=float)
        f, b = w[forward], -w[backward]
        warm = min(n, (p - r - 1) if v == 1 else 2 * (p - r - 1) + (v - 1) * p)
        steady = np.empty(2 * (n - warm))
        steady[0::2], steady[1::2] = f[warm:], b[:n - warm]
        deltas = np.concatenate([f[:warm], steady, b[n - warm:]])
        peaks.append(int(round(float(np.cumsum(deltas).max()))))
    return tuple(peaks)


def layers_in_flight(layers, stages, microbatches, virtual_stages=1) -> tuple[int, int]:
    """(rank, layer-micro-batches): the pipeline stage that holds most activations at once, and how many.

    Each rank runs Megatron-LM's schedule (module docstring) on its chunks of
    :func:`chunk_layers`; a chunk's forward adds its layers' activations of one
    micro-batch, its backward frees them. Without a pipeline: the layers of one
    micro-batch.
    """
    L, p, v = whole(layers, "layers"), whole(stages, "stages"), whole(virtual_stages, "virtual_stages")
    m = whole(microbatches, "microbatches")
    peaks = _peaks(L, p, m, v)
    rank = max(range(p), key=lambda r: peaks[r])
    return rank, peaks[rank]
