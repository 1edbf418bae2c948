"""The calibrated step model's constants: two shares, a cost per expert, and the values in use
(data/published/calibration.json).

:class:`Constants` is what :func:`roofkit.parallel.plan` takes with
``calibrated=True`` (every share at 1 is the bound); :func:`constants` reads the
values fitted on the shipped published runs. How they are fitted and how well
they generalize is :mod:`roofkit.parallel.calibration`, which builds on the step
model; this module is below it, so that the step model can read its constants.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from importlib import resources

__all__ = ["Constants", "constants", "RANGES"]

# the range each constant may take
RANGES = {"matmul_efficiency": (0.3, 1.0), "overlap_efficiency": (0.0, 1.0), "moe_expert_s": (0.0, 5e-3)}


@dataclass(frozen=True)
class Constants:
    """The calibrated model's fitted constants (the bound: every share at 1.0, no cost per expert, every cost at
    its best)."""

    matmul_efficiency: float = 1.0
    overlap_efficiency: float = 1.0
    floor_s: float | None = None  # None: the per-kernel floor fitted on real layers (roofkit.layertime)
    fitted_on: int = 0
    rms_log_error: float | None = None
    source: str = "bound: every share at 1"
    # the busiest expert GPU's tokens over the mean (1.0: perfectly balanced, the bound); calibrated, it scales
    # the experts' all-to-alls and grouped GEMMs (roofkit.parallel.experts, roofkit.steptime); the published
    # fitting runs force a balanced router, so nothing fits it yet and it stays 1.0 unless a run gives its own
    moe_imbalance: float = 1.0
    # seconds each of a GPU's local experts adds to one MoE layer's forward and backward of one micro-batch, past
    # its FLOPs and bytes: the work done expert by expert (Transformer Engine's GroupedLinear keeps a weight and
    # quantizers per expert, loops over them in Python forward and backward, and runs a cuBLAS GEMM per expert;
    # Megatron-Core's DDP runs a gradient hook per expert weight). 0 in the bound; fitted on the mixtures of
    # experts of the fitting set (roofkit.parallel.calibration.fit_expert_cost)
    moe_expert_s: float = 0.0
    moe_fitted_on: int = 0

    @classmethod
    def bound(cls) -> "Constants":
        return cls()

    def to_dict(self) -> dict:
        return asdict(self)


_CACHE: list[Constants] = []


def constants() -> Constants:
    """The constants fitted on the shipped published runs (read from data/published/calibration.json)."""
    if not _CACHE:
        data = json.loads(resources.files("roofkit").joinpath("data/published/calibration.json")
                          .read_text(encoding="utf-8"))
        _CACHE.append(Constants(**{k: data[k] for k in ("matmul_efficiency", "overlap_efficiency", "floor_s",
                                                        "fitted_on", "rms_log_error", "source", "moe_expert_s",
                                                        "moe_fitted_on")}))
    return _CACHE[0]
