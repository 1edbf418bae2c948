"""Interactive explorers (ipywidgets) for the lessons, each with a static rendering.

    roofline_explorer()     accelerators, precision, kernel and size sliders: the dot moves, T_math and T_mem bars beside it
    format_explorer()       type a value, see its bits and rounded value in every format
    training_calculator()   N, D, MFU, GPUs, price -> FLOPs, GPU-hours, days, dollars
    parallel_explorer()     model, GPUs, TP/PP/ZeRO sliders -> memory per GPU, step-time bars, MFU
    serving_explorer()      model, GPU, count, dtypes, context, batch -> memory bar, latency/throughput curve
    queue_explorer()        model, GPU, tokens, request rate -> p50/p99 TTFT, TPOT, throughput, goodput

In a live notebook each shows widgets; it also prints a static summary of its
starting state, so a rendered page (or a test) sees the same numbers.
"""

from __future__ import annotations

__all__ = ["roofline_explorer", "format_explorer", "training_calculator", "parallel_explorer", "serving_explorer",
           "queue_explorer"]


def roofline_explorer(*args, **kwargs):
    from .roofline import roofline_explorer as explorer  # deferred: an explorer imports ipywidgets and matplotlib

    return explorer(*args, **kwargs)


def format_explorer(*args, **kwargs):
    from .formats import format_explorer as explorer  # deferred: an explorer imports ipywidgets and matplotlib

    return explorer(*args, **kwargs)


def training_calculator(*args, **kwargs):
    from .training import training_calculator as explorer  # deferred: an explorer imports ipywidgets and matplotlib

    return explorer(*args, **kwargs)


def parallel_explorer(*args, **kwargs):
    from .parallel import parallel_explorer as explorer  # deferred: an explorer imports ipywidgets and matplotlib

    return explorer(*args, **kwargs)


def serving_explorer(*args, **kwargs):
    from .serving import serving_explorer as explorer  # deferred: an explorer imports ipywidgets and matplotlib

    return explorer(*args, **kwargs)


def queue_explorer(*args, **kwargs):
    from .serving import queue_explorer as explorer  # deferred: an explorer imports ipywidgets and matplotlib

    return explorer(*args, **kwargs)
