"""The calibrated step model's fitted constants, fitted on published training runs, and how well they generalize.

``--calibrated`` keeps every sourced figure as it is: the achievable matmul
rates (ml-engineering's MAMF tables, roofkit's H200 measurements), the
per-kernel floor fitted on real layers (:mod:`roofkit.layertime`), the
bandwidth nccl-tests measures on each link and NCCL's own latencies
(:mod:`roofkit.nccl`). Two shares, both physical and between 0 and 1, remain:

* ``matmul_efficiency``: the share of the best measured matmul rate that a
  training step's kernels reach. The maximum-achievable figure comes from the
  best shape of a sweep; a training GEMM has its own shape, and the
  communication kernels beside it take some of the SMs. Fitted on the
  dense runs of the fitting set (``data/published/training.json`` and
  ``training_frontier.json``; :func:`dense_fitting_runs`)
  (:mod:`roofkit.parallel.published`).
* ``overlap_efficiency``: the share of the communication that can hide
  behind compute that does hide. It is NOT fitted by default, and stays at 1:
  in the fitting runs the traffic that can hide is under 3% of the step (the
  2021-22 Megatron-LM and BLOOM runs did not overlap it; Llama 3's gathers
  are small), so the data cannot tell 0 from 1 (``fit(free=(...,
  "overlap_efficiency"))`` tries, and ``benchmarks/published_runs.py``
  prints what it finds and how the held-out runs fare with it).

One cost, not a share, is fitted on the mixtures of experts of the fitting set, once the
matmul share is fixed by the dense runs:

* ``moe_expert_s``: the seconds each local expert adds to one MoE layer's forward and
  backward of one micro-batch, past its FLOPs and bytes (:func:`fit_expert_cost`). In
  Megatron-Core with Transformer Engine, the framework of every published run of a
  mixture of experts roofkit ships, the experts are handled one by one: Transformer
  Engine's ``GroupedLinear`` (``transformer_engine/pytorch/module/grouped_linear.py``)
  registers a weight per expert (``weight0``, ``weight1``, ...), quantizes each in a Python
  loop, runs a cuBLAS GEMM per expert (``general_grouped_gemm``), and in the backward
  hands each expert's gradient to Megatron-Core's DDP on its own. Megatron-Core's MoE
  guide names the symptom ("CPU Overhead Bottleneck": gaps between kernels where the CPU
  cannot launch them fast enough; ``megatron/core/transformer/moe/README.md``). The
  published steps grow with the experts each GPU holds, not with the experts' FLOPs.

The fit minimizes the sum of squared log ratios, predicted / published step
time (:func:`fit`); :func:`leave_one_out` refits without each run and predicts
it. The values in use live in ``data/published/calibration.json``, written by
``python benchmarks/published_runs.py --write`` and checked against a refit by
the tests; :class:`Constants` and :func:`constants`, which the step model reads,
are in :mod:`roofkit.parallel.constants` (this module builds on the step model).
"""

from __future__ import annotations

import math
from dataclasses import replace

from ...errors import InvalidValue
from .constants import _CACHE, RANGES, Constants, constants  # noqa: F401 (_CACHE: benchmarks/published_runs.py)
from .published import load, predict, published_step_s

__all__ = ["Constants", "constants", "fit", "leave_one_out", "log_error", "dense_fitting_runs", "RANGES", "FREE",
           "fit_expert_cost", "moe_fitting_runs", "leave_one_out_experts"]

FREE = ("matmul_efficiency",)  # what the default fit frees (see the module's docstring)
SHARES = ("matmul_efficiency", "overlap_efficiency")  # what fit() may free: the shares, fitted on the dense runs


def log_error(runs, k: Constants) -> list[float]:
    """log(predicted / published) step time of each run, calibrated with ``k``."""
    return [math.log(predict(r, calibrated=True, constants=k).step_time_s / published_step_s(r)) for r in runs]


def _loss(runs, k: Constants) -> float:
    return sum(e * e for e in log_error(runs, k))


def _minimize(f, lo: float, hi: float, tol: float = 1e-3) -> float:
    """The x in [lo, hi] that minimizes f (golden-section search; f is unimodal here)."""
    g = (math.sqrt(5) - 1) / 2
    a, b = lo, hi
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    while b - a > tol:
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return (a + b) / 2


def fit(runs=None, free=FREE, rounds: int = 2) -> Constants:
    """The constants in ``free`` that minimize sum(log(predicted / published)^2) over ``runs``.

    ``runs`` defaults to the fitting set. ``free`` names the constants to fit
    (default: ``matmul_efficiency`` alone); the others stay at 1. Coordinate
    descent, a golden-section search per constant, ``rounds`` times.
    """
    runs = dense_fitting_runs() if runs is None else list(runs)
    if not runs:
        raise InvalidValue("fit needs at least one published run.")
    unknown = [f for f in free if f not in SHARES]
    if unknown or not free:
        raise InvalidValue(f"free must name some of {', '.join(SHARES)}; got {free!r} (the cost per expert is "
                           "fitted by fit_expert_cost, on the mixtures of experts).")
    values = {"matmul_efficiency": 1.0, "overlap_efficiency": 1.0}
    for _ in range(rounds if len(free) > 1 else 1):
        for name in free:
            lo, hi = RANGES[name]
            values[name] = _minimize(lambda x: _loss(runs, Constants(**(values | {name: x}))), lo, hi)
    values = {k: round(v, 3) for k, v in values.items()}
    errors = log_error(runs, Constants(**values))
    rms = math.sqrt(sum(e * e for e in errors) / len(errors))
    return Constants(**values, fitted_on=len(runs), rms_log_error=rms,
                     source=f"{', '.join(free)} fitted on {len(runs)} published runs "
                            f"(roofkit/data/published/: {', '.join(sorted({r.file for r in runs}))})")


def fit_expert_cost(base: Constants, runs=None) -> Constants:
    """``base`` with its cost per local expert (:attr:`Constants.moe_expert_s`) fitted on ``runs`` (default: the
    mixtures of experts of the fitting set, :func:`moe_fitting_runs`), every other constant as ``base`` has it.

    Fitted after the matmul share, which the dense runs fix: what a mixture of experts spends past its FLOPs
    and bytes is what is left to explain, and one number per local expert explains most of it.
    """
    runs = moe_fitting_runs() if runs is None else list(runs)
    if not runs:
        raise InvalidValue("fit_expert_cost needs at least one published run of a mixture of experts.")
    lo, hi = RANGES["moe_expert_s"]
    value = round(_minimize(lambda x: _loss(runs, replace(base, moe_expert_s=x)), lo, hi, tol=1e-6), 6)
    return replace(base, moe_expert_s=value, moe_fitted_on=len(runs),
                   source=f"{base.source}; moe_expert_s then fitted on its {len(runs)} mixtures of experts")


def moe_fitting_runs() -> list:
    """The runs the cost per local expert is fitted on: the fitting set's mixtures of experts."""
    return [r for r in load("fitting") if r.model.moe]


def leave_one_out_experts(base: Constants, runs=None, left_out=None) -> list[dict]:
    """Refit the cost per local expert without each mixture of experts in turn (each of ``left_out``, default all
    of ``runs``) and predict it: {case, moe_expert_s, ratio (predicted / published)}."""
    runs = moe_fitting_runs() if runs is None else list(runs)
    rows = []
    for i, run in enumerate(runs):
        if left_out is not None and run not in left_out:
            continue
        k = fit_expert_cost(base, runs[:i] + runs[i + 1:])
        rows.append({"case": run.case, "moe_expert_s": k.moe_expert_s,
                     "ratio": predict(run, calibrated=True, constants=k).step_time_s / published_step_s(run)})
    return rows


def dense_fitting_runs() -> list:
    """The runs the matmul share is fitted on: the fitting set's dense models (BF16 and FP8).

    A mixture of experts adds unknowns of its own (how its grouped GEMMs and token
    permutations run, how balanced its routing is), which would leak into the matmul
    share; its runs are predicted, not fitted on, and reported apart.
    """
    return [r for r in load("fitting") if not r.model.moe]


def leave_one_out(runs=None, free=FREE) -> list[dict]:
    """Refit without each run in turn and predict it: {case, constants, ratio (predicted / published)}."""
    runs = dense_fitting_runs() if runs is None else list(runs)
    rows = []
    for i, run in enumerate(runs):
        k = fit(runs[:i] + runs[i + 1:], free)
        rows.append({"case": run.case, "constants": k.to_dict(),
                     "ratio": predict(run, calibrated=True, constants=k).step_time_s / published_step_s(run)})
    return rows
