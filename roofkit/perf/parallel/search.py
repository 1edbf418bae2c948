"""The fastest layouts of a grid: every TP x PP x EP x ETP x ZeRO x recomputation that plans (and fits), fastest
first."""

from __future__ import annotations

import itertools

from ...errors import InvalidValue, RoofkitError

from .plan import plan

__all__ = ["search"]


def search(model, hw, gpus, global_batch_tokens, seq, tp=(1, 2, 4, 8), pp=(1, 2, 4, 8, 16), zero=(0, 1, 2, 3),
           recompute=("none", "full"), fits_only=True, memory="bound", ep=(1,), etp=(None,), **options) -> list:
    """Every layout of the grid that :func:`roofkit.parallel.plan` accepts (and, with ``fits_only``, that fits),
    fastest first.

    The grid is every combination of ``tp``, ``pp``, ``zero``, ``recompute``, and
    for a mixture of experts ``ep`` and ``etp`` (None: the TP degree; the experts
    fold over each stage's TP x CP x DP GPUs, :mod:`roofkit.parallel.experts`)
    (DP takes the remaining GPUs); ``options`` go to :func:`~roofkit.parallel.plan`
    as they are (``cp``, ``inter``, ``calibrated``, ...). Layouts roofkit cannot
    plan (TP x PP not dividing the GPUs, a batch too small for DP) are skipped.
    Ties in step time go to the layout with less memory per GPU. ``memory``:
    what "fits" means, 'bound' (the least a layout must hold: no layout left out
    could fit) or 'estimate' (activations as eager layers keep them: what fits
    without memory work).
    """
    if memory not in ("bound", "estimate"):
        raise InvalidValue(f"memory must be 'bound' or 'estimate'; got {memory!r}.")

    found, seen = [], set()
    for t, p, e, x, z, r in itertools.product(tp, pp, ep, etp, zero, recompute):
        if (t, p, e, t if x is None else x, z, r) in seen:  # etp=None is etp=tp
            continue
        seen.add((t, p, e, t if x is None else x, z, r))
        try:
            found.append(plan(model, hw, gpus, global_batch_tokens, seq, tp=t, pp=p, ep=e, etp=x, zero=z,
                              recompute=r, **options))
        except RoofkitError:
            continue
    if fits_only:
        found = [x for x in found if x.fits is not False and (memory == "bound" or x.memory_capacity_bytes is None
                                                              or x.memory_estimate_bytes <= x.memory_capacity_bytes)]
    return sorted(found, key=lambda x: (x.step_time_s, x.memory_per_gpu_bytes))
