"""roofkit: count FLOPs and bytes, place kernels on a roofline, and cost a training run.

The modules, one concept each:

    hardware   the sourced accelerator catalog        roofkit.hardware.get("h100")
    formulas   FLOPs and bytes of kernels (sympy)     roofkit.formulas.gemm(4096, 4096, 4096, "bf16")
    roofline   attainable FLOP/s, ridge, time, plot   roofkit.roofline.analyze(cost, "h100", "bf16")
    precision  number formats and real rounding       roofkit.precision.get("bfloat16")
    training   C = 6ND, MFU/HFU, GPU-hours, cost      roofkit.training.estimate(70e9, 15e12, ...)
    fusion     HBM traffic of op chains; Amdahl       roofkit.fusion.amdahl(0.1, 2)

Submodules load on first use, so ``import roofkit`` stays fast: sympy and
matplotlib are imported only by the functions that need them.
"""

from __future__ import annotations

import importlib

from .errors import (
    InvalidValue,
    RoofkitError,
    UnitMismatch,
    UnknownHardware,
    UnknownName,
    UnknownPrecision,
    UnsupportedPrecision,
)

__version__ = "0.1.0"

_MODULES = {"hardware", "formulas", "roofline", "precision", "training", "fusion",
            "dtypes", "units", "errors", "measure", "quiz", "course", "grading", "cli"}

__all__ = [
    "RoofkitError", "InvalidValue", "UnitMismatch", "UnknownName", "UnknownHardware",
    "UnknownPrecision", "UnsupportedPrecision", "hw", *sorted(_MODULES - {"cli"}),
]


def hw(name: str):
    """The catalog's accelerator called ``name``: ``roofkit.hw("H100").peak("bf16")``."""
    from .hardware import get

    return get(name)


def __getattr__(name: str):
    if name in _MODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'roofkit' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _MODULES)
