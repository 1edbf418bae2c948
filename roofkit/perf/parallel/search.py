"""The fastest layouts of a grid: every TP x PP x ZeRO x recomputation that plans (and fits), fastest first."""

from __future__ import annotations

from ...errors import InvalidValue, RoofkitError

from .plan import plan

__all__ = ["search"]


def search(model, hw, gpus, global_batch_tokens, seq, tp=(1, 2, 4, 8), pp=(1, 2, 4, 8, 16), zero=(0, 1, 2, 3),
           recompute=("none", "full"), fits_only=True, memory="bound", **options) -> list:
    """Every layout of the grid that :func:`roofkit.parallel.plan` accepts (and, with ``fits_only``, that fits),
    fastest first.

    The grid is every combination of ``tp``, ``pp``, ``zero`` and ``recompute``
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

    found = []
    for t in tp:
        for p in pp:
            for z in zero:
                for r in recompute:
                    try:
                        found.append(plan(model, hw, gpus, global_batch_tokens, seq, tp=t, pp=p, zero=z,
                                          recompute=r, **options))
                    except RoofkitError:
                        continue
    if fits_only:
        found = [x for x in found if x.fits is not False and (memory == "bound" or x.memory_capacity_bytes is None
                                                              or x.memory_estimate_bytes <= x.memory_capacity_bytes)]
    return sorted(found, key=lambda x: (x.step_time_s, x.memory_per_gpu_bytes))
