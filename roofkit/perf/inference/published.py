"""Published serving runs: what engines measured, what roofkit predicts for them, and the one fitted constant.

Four sets of rows ship with roofkit (``roofkit/data/published/``, each row with its source):

* ``serving.json``, the fitting set: TensorRT-LLM's maximum throughput for Llama 3.1 8B
  on an H100 (four workloads) and its time to first token at batch 1 for Llama 2 7B
  on an H100 and an A100. :func:`fit` fits the engine's overhead per step
  (:mod:`roofkit.inference.engine`) on these rows and nothing else;
* ``serving_heldout.json``, rows never used to fit anything: other models, GPUs,
  tensor-parallel layouts, workloads and engines. They check that the model
  generalizes (``benchmarks/published_serving.py`` prints every set);
* ``serving_frontier.json`` (:func:`frontier`) and ``serving_frontier_heldout.json``
  (:func:`frontier_heldout`): TensorRT-LLM in NVFP4 on B200 and GB200 and in FP8 on Hopper,
  mixtures of experts, DeepSeek-R1 with attention data parallelism and expert parallelism
  (the rows' ``ep`` and ``attention_dp``, :func:`roofkit.inference.memory.layout`). The
  first file is the frontier's fitting split, used to develop the mechanisms of the
  estimate (never to fit a constant: :func:`fit` keeps to ``serving.json``, so the one
  fitted number, t_step, means the same for every set); the second checks them.

:func:`predict` gives roofkit's figure for a row, the bound (default) or
calibrated; :func:`compare` a row per run with the published figure beside it
and ``speed``, how many times faster than published the prediction is (tokens/s
over tokens/s, or seconds over seconds inverted): the bound's is never below 1.

    >>> rows = compare(runs())
    >>> min(r["bound_speed"] for r in rows) >= 1
    True
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from importlib import resources

from ...catalogs.hardware import NoAchievableFigure
from ...errors import InvalidValue
from .. import layertime
from . import engine
from .memory import plan
from .preemption import offline
from .workload import Workload, steady_state

__all__ = ["Run", "runs", "heldout", "frontier", "frontier_heldout", "SETS", "engine_of", "predict", "rounds",
           "preempted", "speed", "compare", "fit", "KINDS"]

KINDS = ("throughput", "ttft")


@dataclass(frozen=True)
class Run:
    """One published figure: tokens/s over all ``gpus`` (``throughput``) or seconds to the first token (``ttft``)."""

    case: str
    kind: str
    model: str
    hw: str
    gpus: int
    tp: int
    isl: int
    osl: int
    dtype: str
    kv_dtype: str
    published: float
    source: str
    batch: int | None = None  # requests in flight when the source fixes them (else: as many as fit)
    engine: str = ""
    requests: int | None = None  # an offline run's requests, all handed over at once
    preemption: str | None = None  # how the engine frees cache when it runs out ("recompute"), None: it never does
    profile_tokens: int = 0  # the profiling pass the engine sizes its cache after (vLLM's max_num_batched_tokens)
    ep: int | None = None  # a mixture's expert-parallel GPUs (trtllm-bench --ep), None: 1
    attention_dp: bool = False  # attention data-parallel over the tp GPUs (TensorRT-LLM's enable_attention_dp)
    adp_schedule: str | None = None  # how its engine hands prompts to those GPUs (engine.ADP_BALANCE; None: default)
    weights_dtype: str | None = None  # its checkpoint's weights when not all in ``dtype`` (weights.weight_format)

    @property
    def weights(self) -> str:
        """The checkpoint's weights format: ``weights_dtype``, else ``dtype``."""
        return self.weights_dtype or self.dtype

    @property
    def layout(self) -> dict:
        """The layout's options for roofkit: gpus, tp, ep, attention_dp."""
        return dict(gpus=self.gpus, tp=self.tp, ep=self.ep, attention_dp=self.attention_dp)

    def to_dict(self) -> dict:
        return asdict(self)


def _load(name: str) -> tuple[Run, ...]:
    text = resources.files("roofkit").joinpath(f"data/published/{name}").read_text(encoding="utf-8")
    out = []
    for row in json.loads(text):
        if row.get("kind") not in KINDS:
            raise InvalidValue(f"{name}: {row.get('case')!r} has kind {row.get('kind')!r}; expected one of {KINDS}.")
        out.append(Run(**{k: row[k] for k in Run.__dataclass_fields__ if k in row}))
    return tuple(out)


@lru_cache(maxsize=1)
def runs() -> tuple[Run, ...]:
    """The fitting set (``serving.json``)."""
    return _load("serving.json")


@lru_cache(maxsize=1)
def heldout() -> tuple[Run, ...]:
    """Rows never fitted on (``serving_heldout.json``)."""
    return _load("serving_heldout.json")


@lru_cache(maxsize=1)
def frontier() -> tuple[Run, ...]:
    """The frontier's fitting split (``serving_frontier.json``): TensorRT-LLM's FP4 Blackwell columns, v1.0 era.
    Not what :func:`fit` fits t_step on (see the module's docstring)."""
    return _load("serving_frontier.json")


@lru_cache(maxsize=1)
def frontier_heldout() -> tuple[Run, ...]:
    """The frontier's held-out rows (``serving_frontier_heldout.json``): a later release's DEP layouts and
    per-GPU figures, DeepSeek-R1, Hopper FP8 mixtures of experts, fixed concurrencies."""
    return _load("serving_frontier_heldout.json")


SETS = {"fitting": runs, "heldout": heldout, "frontier": frontier, "frontier_heldout": frontier_heldout}


def engine_of(run: Run) -> str:
    """The row's engine as roofkit names it ('vllm', 'tensorrt-llm', 'sglang'): its ``engine``, else the first word
    of its ``case`` (every fitting row is TensorRT-LLM's and says so there)."""
    return engine.canonical(run.engine or run.case)


def predict(run: Run, calibrated=False, calibration: engine.EngineCalibration | None = None):
    """roofkit's figure for ``run``: the steady state's tokens/s, or the time to first token at batch 1.

    The row's engine (:func:`engine_of`) sets the memory reserve and, calibrated, the tensor-parallel
    all-reduce. Calibrated, a run whose engine preempts (``preemption``) also pays for what it recomputes
    (:func:`roofkit.inference.preemption.offline`), and an offline run of more requests than its engine
    holds at once runs in rounds (:func:`rounds`); the bound does neither: an engine with room to spare,
    or a better schedule, would not.
    """
    name = engine_of(run)
    if calibrated:
        calibration = _calibration(run, calibration)
    options = dict(**run.layout, dtype=run.dtype, weights_dtype=run.weights, kv_dtype=run.kv_dtype,
                   calibrated=calibrated, calibration=calibration, engine=name)
    if run.kind == "ttft":
        return steady_state(run.model, run.hw, run.isl, 1, batch=1, **options).ttft_s
    if calibrated and run.preemption is not None:
        return preempted(run, calibration).tokens_per_s
    if calibrated and run.requests is not None and _batch(run) is not None and run.requests > _batch(run):
        return rounds(run, calibration)
    return steady_state(run.model, run.hw, run.isl, run.osl, batch=_batch(run), **options).tokens_per_s


def rounds(run: Run, calibration: engine.EngineCalibration | None = None) -> float:
    """Calibrated tokens/s of an offline run of n = ``requests`` requests of fixed lengths on an engine that holds
    at most B = :func:`_batch` of them and never preempts (TensorRT-LLM's ``GUARANTEED_NO_EVICT``).

    The requests move in lock step (the same I and O, all handed over at once), so they run in
    floor(n / B) full rounds of B and a last round of the n mod B left, each round the steady state
    at its own batch: the last one reads the weights as often as a full one for fewer tokens. With
    1,000 requests and an engine of 896, 104 run alone at the end (``trtllm-bench`` times the lot).
    """
    B, n = _batch(run), run.requests
    name = engine_of(run)
    options = dict(**run.layout, dtype=run.dtype, weights_dtype=run.weights, kv_dtype=run.kv_dtype, calibrated=True,
                   calibration=_calibration(run, calibration), engine=name)
    full, rest = divmod(n, B)
    seconds = 0.0
    for batch, count in ((B, full), (rest, 1 if rest else 0)):
        if count:
            s = steady_state(run.model, run.hw, run.isl, run.osl, batch=batch, **options)
            seconds += count * batch * s.replicas * run.osl / s.tokens_per_s
    return n * run.osl / seconds * _replicas(run)


def _calibration(run: Run, calibration: engine.EngineCalibration | None) -> engine.EngineCalibration:
    """``calibration`` (default: roofkit's) for the row's engine, with the row's data-parallel attention schedule."""
    cal = engine.for_engine(engine_of(run), calibration)
    return replace(cal, adp_schedule=run.adp_schedule) if run.adp_schedule else cal


def _replicas(run: Run) -> int:
    return plan(run.model, run.hw, run.gpus, 1, 1, run.weights, run.kv_dtype, tp=run.tp, ep=run.ep,
                attention_dp=run.attention_dp).replicas


def preempted(run: Run, calibration: engine.EngineCalibration | None = None):
    """The calibrated offline run of a throughput row whose engine preempts (:func:`roofkit.inference.preemption.offline`:
    its cache, the tokens it recomputes, the time they cost); None for any other row."""
    if run.kind != "throughput" or run.preemption is None:
        return None
    name = engine_of(run)
    return offline(run.model, run.hw, run.requests, run.isl, run.osl, gpus=run.gpus, tp=run.tp, batch=_batch(run),
                   dtype=run.dtype, weights_dtype=run.weights, kv_dtype=run.kv_dtype, calibrated=True,
                   calibration=_calibration(run, calibration), profile_tokens=run.profile_tokens,
                   preemption=run.preemption, engine=name)


def _batch(run: Run) -> int | None:
    """The requests in flight: never more than the source caps them at (its ``batch``), nor than the run has (an
    offline run's ``requests``, all handed over at once), nor than fit (the row's engine's reserve); None where
    the source caps neither (as many as fit)."""
    caps = [cap for cap in (run.batch, run.requests) if cap is not None]
    if not caps:
        return None
    fits = plan(run.model, run.hw, run.gpus, Workload(run.isl, run.osl).footprint, 1, run.weights, run.kv_dtype,
                tp=run.tp, engine=engine_of(run), ep=run.ep, attention_dp=run.attention_dp).max_batch
    return max(1, min(*caps, fits))


def speed(run: Run, predicted: float) -> float:
    """How many times faster than published ``predicted`` is: above 1, the model is the faster."""
    return predicted / run.published if run.kind == "throughput" else run.published / predicted


def compare(rows=None, calibration: engine.EngineCalibration | None = None, calibrated=True) -> list[dict]:
    """One dict per run: the published figure, the bound's and (``calibrated``) the estimate's, and their speeds
    (the estimate's None where the catalog has no achievable roofs for the accelerator)."""
    out = []
    for run in runs() if rows is None else rows:
        bound = predict(run)
        row = run.to_dict() | {"bound": bound, "bound_speed": speed(run, bound)}
        if calibrated:
            try:
                estimate = predict(run, True, calibration)
            except NoAchievableFigure:  # no achievable roofs for that accelerator: the bound only
                row |= {"calibrated": None, "calibrated_speed": None}
            else:
                row |= {"calibrated": estimate, "calibrated_speed": speed(run, estimate)}
        out.append(row)
    return out


def fit(rows=None, floor_s: float | None = None) -> engine.EngineCalibration:
    """Fit t_step, the engine's overhead per step, on the published runs (default: the fitting set).

    t0 is lesson 11's per-kernel floor (``floor_s``, default: fitted on the measured
    H200 layers). Each run's figure depends on t_step in closed form: a throughput
    is a / (T + n t_step), a time k (T + t_step); two predictions per run give its
    constants, and t_step >= 0 minimizes the squared log-ratios of predicted to
    published, sum_i log(speed_i)^2 (golden-section search).
    """
    t0 = layertime.default_calibration().floor_s if floor_s is None else float(floor_s)
    chosen = tuple(runs() if rows is None else rows)
    if not chosen:
        raise InvalidValue("fit needs at least one published run.")
    delta = 1e-3
    at = [(predict(r, True, engine.EngineCalibration(t0, 0.0)), predict(r, True, engine.EngineCalibration(t0, delta)))
          for r in chosen]

    def figure(run, zero, shifted, t_step):
        # throughput: a / (T + t): 1/y is linear in t; a time: linear in t
        if run.kind == "throughput":
            inv0, inv1 = 1 / zero, 1 / shifted
            return 1 / (inv0 + (inv1 - inv0) * t_step / delta)
        return zero + (shifted - zero) * t_step / delta

    def loss(t_step):
        return sum(math.log(speed(r, figure(r, z, s, t_step))) ** 2 for r, (z, s) in zip(chosen, at))

    low, high = 0.0, 0.02  # seconds: an engine's step overhead is milliseconds at most
    golden = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = high - golden * (high - low), low + golden * (high - low)
        if loss(a) <= loss(b):
            high = b
        else:
            low = a
    t_step = (low + high) / 2
    return engine.EngineCalibration(floor_s=t0, step_s=t_step, runs=len(chosen),
                                    source=f"t0 from lesson 11's measured H200 layers; t_step fitted on {len(chosen)} "
                                           "published runs (roofkit/data/published/serving.json)")
