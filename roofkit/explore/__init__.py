"""Interactive explorers (ipywidgets) for the lessons, each with a static rendering.

    roofline_explorer()     accelerators, precision, kernel and size sliders: the dot moves
    format_explorer()       type a value, see its bits and rounded value in every format
    training_calculator()   N, D, MFU, GPUs, price -> FLOPs, GPU-hours, days, dollars

In a live notebook each shows widgets; it also prints a static summary of its
starting state, so a rendered page (or a test) sees the same numbers.
"""

from __future__ import annotations

__all__ = ["roofline_explorer", "format_explorer", "training_calculator"]


def roofline_explorer(*args, **kwargs):
    from .roofline import roofline_explorer as explorer

    return explorer(*args, **kwargs)


def format_explorer(*args, **kwargs):
    from .formats import format_explorer as explorer

    return explorer(*args, **kwargs)


def training_calculator(*args, **kwargs):
    from .training import training_calculator as explorer

    return explorer(*args, **kwargs)
