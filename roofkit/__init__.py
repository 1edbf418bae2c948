"""roofkit: count FLOPs and bytes, place kernels on a roofline, and cost a training run.

The modules, one concept each:

    hardware   the sourced accelerator catalog        roofkit.hardware.get("h100")
    formulas   FLOPs and bytes of kernels (sympy)     roofkit.formulas.gemm(4096, 4096, 4096, "bf16")
    roofline   attainable FLOP/s, ridge, time, plot   roofkit.roofline.analyze(cost, "h100", "bf16")
    precision  number formats and real rounding       roofkit.precision.get("bfloat16")
    training   C = 6ND, MFU/HFU, GPU-hours, cost      roofkit.training.estimate(70e9, 15e12, ...)
    fusion     HBM traffic of op chains; Amdahl       roofkit.fusion.amdahl(0.1, 2)
    models     the sourced catalog of model shapes     roofkit.models.get("llama-3-8b").params
    layertime  a decoder layer's time, calibrated      roofkit.layertime.predict("llama-3-8b", 1, 1, 8192, "h200")
    layerview  a layer's op table and its figures      roofkit.layerview.table(layerview.place(ops, "h100"))
    links      interconnects, per direction, sourced  roofkit.links.get("nvlink4").bandwidth
    comms      collectives, alpha-beta and as NCCL runs them  roofkit.comms.all_reduce(1e9, 8, "hgx-h100")
    nccl       NCCL's algorithms, protocols, latencies roofkit.nccl.protocol_share("LL")
    steptime   a training micro-batch, kernel by kernel roofkit.steptime.microbatch("llama-3-8b", "h100", 1, 8192)
    parallel   DP/ZeRO/TP/PP/CP/EP: step, MFU, memory  roofkit.parallel.plan("llama-3-70b", "h100", ...)
    plots_parallel  collective, step-time, memory plots  roofkit.plots_parallel.step_plot([plan])
    inference  serving: KV cache, memory, TTFT, TPOT  roofkit.inference.serve("llama-3-70b", "h100", 8, 8192)

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

_MODULES = {"hardware", "models", "links", "comms", "nccl", "steptime", "parallel", "plots_parallel", "inference",
            "formulas", "roofline", "layertime", "layerview", "precision", "training", "fusion",
            "dtypes", "units", "errors", "measure", "quiz", "course", "grading", "cli"}

__all__ = [
    "RoofkitError", "InvalidValue", "UnitMismatch", "UnknownName", "UnknownHardware",
    "UnknownPrecision", "UnsupportedPrecision", "hw", "model", *sorted(_MODULES - {"cli"}),
]


def hw(name: str):
    """The catalog's accelerator called ``name``: ``roofkit.hw("H100").peak("bf16")``."""
    from .hardware import get

    return get(name)


def model(name: str):
    """The catalog's model called ``name``: ``roofkit.model("llama-3-8b").params``."""
    from .models import get

    return get(name)


def __getattr__(name: str):
    if name in _MODULES:
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'roofkit' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _MODULES)
