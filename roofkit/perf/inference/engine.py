"""How a serving engine spends a kernel's time: the bound, and the calibrated estimate.

Every step of a server is a list of kernels (:func:`roofkit.layertime.kernels`,
one per op, as an engine with fused kernels runs them), each with its FLOPs F
and HBM bytes Q. Two models of a kernel's time:

* the bound (the default): every cost at its best, the datasheet's roofs, math
  and memory fully overlapped:

      t = max(F / P, Q / BW)

  No real kernel is faster, so no real step is (a published run that beats it is a bug);
* calibrated: the achievable roofs of the catalog (the best measured matmul rate
  and a copy's bandwidth, sourced per accelerator), math and memory not
  overlapped (lesson 03's pessimistic sum, which the achievable roofs make an
  estimate), and a floor t0 that every kernel pays:

      t = F / P_achievable + Q / BW_achievable + t0

  and each step pays the engine once more, t_step: scheduling, sampling, the
  launch of its graph, the host's work between steps.

t0 is lesson 11's per-kernel floor, fitted on measured H200 layers
(:func:`roofkit.layertime.default_calibration`); t_step is the one constant
fitted on the published serving runs shipped with roofkit
(:func:`roofkit.inference.published.fit`, stored in
``data/published/serving_calibration.json``). :func:`default` reads it.

In calibrated mode the activations between kernels are kept in 16 bits when the
math runs in 8 (engines quantize a GEMM's input inside the kernel before it),
so an FP8 engine reads FP8 weights and an FP8 cache but 2-byte activations.

    >>> c = default()
    >>> round(c.floor_s * 1e6, 1), round(c.step_s * 1e3, 2) > 0
    (5.5, True)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from importlib import resources

from ... import dtypes
from ...catalogs import hardware
from .. import comms, layertime
from ...errors import InvalidValue

__all__ = ["ENGINES", "DEFAULT_ENGINE", "canonical", "EngineCalibration", "Roofs", "roofs", "activation_dtype",
           "default", "for_engine", "kernel_time"]

ENGINES = comms.SERVING_ENGINES  # vllm, tensorrt-llm, sglang
DEFAULT_ENGINE = "vllm"  # roofkit's default engine: its memory reserve (memory.RESERVE) and its all-reduce rule


canonical = comms.serving_engine  # 'TensorRT-LLM v0.5' -> 'tensorrt-llm'; InvalidValue naming the choices


@dataclass(frozen=True)
class EngineCalibration:
    """The calibrated model's two constants and where they come from."""

    floor_s: float  # t0: every kernel's floor (lesson 11, measured H200 layers)
    step_s: float  # t_step: the engine's overhead per step, fitted on published runs
    source: str = ""
    runs: int = 0  # how many published runs t_step was fitted on
    engine: str = DEFAULT_ENGINE  # whose rule picks the tensor-parallel all-reduce (roofkit.comms.engine_algorithm)

    def __post_init__(self):
        object.__setattr__(self, "engine", canonical(self.engine))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Roofs:
    """What a step's kernels run at: the roofs, the floor, the overhead per step, and how math and memory add."""

    peak_flops: float
    bandwidth: float
    floor_s: float = 0.0
    step_s: float = 0.0
    overlap: bool = True  # max(F/P, Q/BW) (the bound); False: F/P + Q/BW
    calibrated: bool = False
    engine: str = DEFAULT_ENGINE  # calibrated: whose tensor-parallel all-reduce the step runs (the bound: fastest)

    def time(self, flops: float, nbytes: float) -> float:
        """One kernel's time (see the module's docstring)."""
        return kernel_time(flops, nbytes, self)


def kernel_time(flops: float, nbytes: float, r: Roofs) -> float:
    """t = max(F/P, Q/BW) for the bound; F/P + Q/BW + t0 calibrated."""
    math_s, memory_s = flops / r.peak_flops, nbytes / r.bandwidth
    return (max(math_s, memory_s) if r.overlap else math_s + memory_s) + r.floor_s


def activation_dtype(dtype, calibrated: bool) -> str:
    """The activations' precision between kernels: ``dtype`` for the bound; calibrated, 16 bits at least."""
    key = dtypes.canonical(dtype)
    if calibrated and dtypes.bytes_per_element(key) < 2:
        return "bf16"
    return key


def roofs(hw, dtype="bf16", calibrated=False, calibration: EngineCalibration | None = None) -> Roofs:
    """The roofs of ``hw`` for math in ``dtype``: the datasheet's (bound), or its achievable figures (calibrated).

    Calibrated needs the catalog's achievable matmul rate in ``dtype``
    (:class:`roofkit.hardware.NoAchievableFigure` names what is missing); memory runs at
    :func:`roofkit.layertime.achievable_bandwidth`.
    """
    acc = hardware.get(hw)
    key = dtypes.canonical(dtype)
    if not calibrated:
        if calibration is not None:
            raise InvalidValue("an engine calibration is used only with calibrated=True.")
        return Roofs(acc.peak(key), acc.memory_bandwidth())
    cal = calibration or default()
    return Roofs(acc.peak(key, achievable=True), layertime.achievable_bandwidth(acc)[0], cal.floor_s, cal.step_s,
                 overlap=False, calibrated=True, engine=cal.engine)


_DEFAULT: list[EngineCalibration] = []
CALIBRATION_FILE = "data/published/serving_calibration.json"  # t_step fitted on the published runs


def for_engine(name, calibration: EngineCalibration | None = None) -> EngineCalibration:
    """``calibration`` (default: :func:`default`) for the engine ``name`` ('vllm', 'tensorrt-llm', 'sglang'):
    the same constants, that engine's choice of tensor-parallel all-reduce."""
    return replace(calibration or default(), engine=canonical(name))


def default() -> EngineCalibration:
    """The calibration roofkit ships: t0 from lesson 11's H200 layers, t_step fitted on the published runs.

    t_step is read from ``data/published/serving_calibration.json``, which
    ``python benchmarks/published_serving.py --write`` writes from
    :func:`roofkit.inference.published.fit` (the fit predicts the runs with this
    module, so it is not called from here); a test refits it and compares.
    """
    if not _DEFAULT:
        data = json.loads(resources.files("roofkit").joinpath(CALIBRATION_FILE).read_text(encoding="utf-8"))
        _DEFAULT.append(EngineCalibration(floor_s=layertime.default_calibration().floor_s, step_s=data["step_s"],
                                          source=data["source"], runs=data["runs"]))
    return _DEFAULT[0]
