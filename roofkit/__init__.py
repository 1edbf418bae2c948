"""roofkit: count FLOPs and bytes, place kernels on a roofline, and cost a training run.

The modules, one concept each, by the names lessons and scripts import them, and their homes:

    hardware   catalogs/hardware    the sourced accelerator catalog         roofkit.hardware.get("h100")
    models     catalogs/models      the sourced catalog of model shapes     roofkit.models.get("llama-3-8b").params
    links      catalogs/links       interconnects, per direction, sourced   roofkit.links.get("nvlink4").bandwidth
    catalog    catalogs/lookup      how a catalog finds an entry by any spelling
    formulas   formulas             FLOPs and bytes of kernels (sympy)      roofkit.formulas.gemm(4096, 4096, 4096)
    routing    routing              a mixture of experts' tokens and MLP    roofkit.routing.experts_touched(64, 128, 8)
    roofline   plots/roofline       the chart, with perf/roofline's model   roofkit.roofline.analyze(cost, "h100")
    precision  perf/precision       number formats and real rounding        roofkit.precision.get("bfloat16")
    training   perf/training        C = 6ND, MFU/HFU, GPU-hours, cost       roofkit.training.estimate(70e9, 15e12, ...)
    fusion     perf/fusion          HBM traffic of op chains; Amdahl        roofkit.fusion.amdahl(0.1, 2)
    layertime  perf/layertime       a decoder layer's time, calibrated      roofkit.layertime.predict("llama-3-8b", ...)
    steptime   perf/steptime        a training micro-batch, kernel by kernel
    recipe     perf/recipe          the precision of each kernel family     roofkit.recipe.get("fp8-blockwise").dgrad
    comms      perf/comms           collectives, alpha-beta and NCCL's way  roofkit.comms.all_reduce(1e9, 8, "hgx-h100")
    nccl       perf/nccl            NCCL's algorithms, protocols, latencies roofkit.nccl.protocol_share("LL")
    parallel   perf/parallel/       DP/ZeRO/TP/PP/CP/EP: step, MFU, memory  roofkit.parallel.plan("llama-3-70b", ...)
    inference  perf/inference/      serving: KV cache, memory, TTFT, TPOT   roofkit.inference.serve("llama-3-70b", ...)
    plots_kernels, plots_training, plots_parallel, layerview, diagrams, inference.plot, measure.plot
               plots/kernels, training, parallel, layers, diagrams, serving, measure: the figures
    quiz, answers, show, explore, build, site
               course/...           the course; the question banks roofkit.course.lesson_NN are course/bank/

Those are public names. The modules live in folders that show the library's
layers (docs/architecture.md): the foundations (``errors``, ``units``,
``quantities``, ``dtypes``, ``formulas``, ``routing``) here, then ``catalogs/``, ``perf/``,
``plots/``, ``measure/``, ``course/``, ``grading/`` and ``cli/``. :data:`PUBLIC`
maps each public name to its module's home, and importing either name gives the
same module object: ``roofkit.hardware is roofkit.catalogs.hardware``, and a child of
a package follows it (``roofkit.inference.kvcache`` is
``roofkit.perf.inference.kvcache``).

Submodules load on first use, so ``import roofkit`` stays fast: sympy and
matplotlib are imported only by the functions that need them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

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

# Public name -> home, both under roofkit. A package's children follow it; an entry for a child overrides that.
PUBLIC = {
    "catalog": "catalogs.lookup", "hardware": "catalogs.hardware", "models": "catalogs.models",
    "links": "catalogs.links",
    "roofline": "plots.roofline", "precision": "perf.precision", "training": "perf.training", "fusion": "perf.fusion",
    "layertime": "perf.layertime", "steptime": "perf.steptime", "recipe": "perf.recipe", "comms": "perf.comms",
    "nccl": "perf.nccl",
    "inference": "perf.inference", "parallel": "perf.parallel",
    "layerview": "plots.layers", "plots_kernels": "plots.kernels", "plots_training": "plots.training",
    "plots_parallel": "plots.parallel", "diagrams": "plots.diagrams", "inference.plot": "plots.serving",
    "measure.plot": "plots.measure",
    "quiz": "course.quiz", "answers": "course.answers", "show": "course.show", "build": "course.build",
    "site": "course.site", "explore": "course.explore",
}
# Public names by prefix: the lessons' question banks, roofkit.course.lesson_NN, are in course/bank/.
PUBLIC_PREFIXES = {"course.lesson_": "course.bank.lesson_"}
# The folders and the foundations, by their own names.
_PACKAGES = {"errors", "units", "quantities", "dtypes", "formulas", "routing", "catalogs", "perf", "plots", "measure",
             "course", "grading", "cli"}
_HOMES = {home: name for name, home in PUBLIC.items() if "." not in name}  # a public package, by its home


def home(name: str) -> str | None:
    """The home of a public name (both relative to roofkit), or None when ``name`` is no public name.

    >>> home("roofline"), home("inference.kvcache"), home("inference.plot"), home("course.lesson_03")
    ('plots.roofline', 'perf.inference.kvcache', 'plots.serving', 'course.bank.lesson_03')
    >>> home("perf.inference.plot")      # `from roofkit.inference import plot` asks by the package's home
    'plots.serving'
    >>> home("perf.roofline") is None
    True
    """
    if name in PUBLIC:
        return PUBLIC[name]
    for prefix, target in PUBLIC_PREFIXES.items():
        if name.startswith(prefix) and len(name) > len(prefix):
            return target + name[len(prefix):]
    head = name.rpartition(".")[0]
    while head:
        child = name[len(head) + 1:]
        if head in PUBLIC:
            return f"{PUBLIC[head]}.{child}"
        if head in _HOMES and f"{_HOMES[head]}.{child}" in PUBLIC:
            return PUBLIC[f"{_HOMES[head]}.{child}"]
        head = head.rpartition(".")[0]
    return None


class _PublicNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a public name as its home's module (first on sys.meta_path, so the home is never loaded twice)."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(__name__ + "."):
            return None
        where = home(fullname[len(__name__) + 1:])
        if where is None:
            return None
        spec = importlib.util.spec_from_loader(fullname, self)
        spec.loader_state = f"{__name__}.{where}"
        return spec

    def create_module(self, spec):
        module = importlib.import_module(spec.loader_state)
        spec.loader_state = module.__spec__  # importlib sets the public name's spec on it next; exec_module undoes that
        return module

    def exec_module(self, module):
        module.__spec__ = module.__spec__.loader_state


if not any(type(f).__name__ == "_PublicNames" and getattr(f, "__module__", "") == __name__ for f in sys.meta_path):
    sys.meta_path.insert(0, _PublicNames())

__all__ = [
    "RoofkitError", "InvalidValue", "UnitMismatch", "UnknownName", "UnknownHardware",
    "UnknownPrecision", "UnsupportedPrecision", "hw", "model",
    *sorted(({n for n in PUBLIC if "." not in n} | _PACKAGES) - {"cli"}),
]


def hw(name: str):
    """The catalog's accelerator called ``name``: ``roofkit.hw("H100").peak("bf16")``."""
    from .catalogs.hardware import get  # deferred: import roofkit loads no submodule

    return get(name)


def model(name: str):
    """The catalog's model called ``name``: ``roofkit.model("llama-3-8b").params``."""
    from .catalogs.models import get  # deferred: import roofkit loads no submodule

    return get(name)


def __getattr__(name: str):
    if name in _PACKAGES or (name in PUBLIC and "." not in name):
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'roofkit' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _PACKAGES | {n for n in PUBLIC if "." not in n})
