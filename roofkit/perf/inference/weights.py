"""Weights in memory: how many bytes a model takes in BF16, FP8, INT8 or INT4, scales included.

A quantized weight is stored in fewer bits and multiplied, after being
scaled back, in the activations' precision (weight-only quantization: INT4
weights, BF16 activations and BF16 tensor cores). Each group of g weights
shares one scale of s bytes, so a weight costs

    b_w = b + s / g          bytes

The formats (:data:`FORMATS`), each with the convention it follows:

    bf16, fp16, fp32, fp64   no scales
    fp8                one scale per tensor (or per 128 x 128 block, as DeepSeek-V3's
                       released weights): under 0.01% of the bytes, not counted
    int8, int4         one FP16 scale per group of 128 weights, symmetric (no zero point):
                       the group size GPTQ (Frantar et al. 2022, arXiv:2210.17323) and
                       AWQ (Lin et al. 2023, arXiv:2306.00978) use by default;
                       int4: 0.5 + 2/128 = 0.515625 bytes per weight
    fp4                MXFP4: one 1-byte (E8M0) scale per block of 32 (OCP Microscaling
                       Formats MX v1.0): 0.53125 bytes per weight

Only the decoder layers' matrices take the format (:attr:`roofkit.models.Model.layer_matrix_params`);
the embeddings, the output layer and the norms stay in BF16 (or in the
weights' own format when it is wider), as GPTQ, AWQ and FP8 checkpoints keep them.

    >>> weight_format("int4").bytes_per_weight
    0.515625
    >>> round(weights_bytes("llama-3-70b", "bf16") / 1e9, 1)       # 2 bytes x 70.6B parameters
    141.1
    >>> round(weights_bytes("llama-3-70b", "int4") / 1e9, 1)       # INT4 layers, BF16 embeddings
    39.5
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ... import dtypes
from ...catalogs import models
from ...errors import InvalidValue

__all__ = ["WeightFormat", "FORMATS", "weight_format", "weights_bytes", "other_dtype"]


@dataclass(frozen=True)
class WeightFormat:
    """A stored weight format: ``element_bytes`` per weight plus one ``scale_bytes`` scale per ``group`` weights."""

    name: str
    element_bytes: float
    group: int | None = None  # weights per scale; None: no per-group scale
    scale_bytes: float = 0.0
    convention: str = ""

    @property
    def bytes_per_weight(self) -> float:
        """b + s / g: the element and its share of a scale."""
        return self.element_bytes + (self.scale_bytes / self.group if self.group else 0.0)

    def to_dict(self) -> dict:
        return {"name": self.name, "element_bytes": self.element_bytes, "group": self.group,
                "scale_bytes": self.scale_bytes, "bytes_per_weight": self.bytes_per_weight,
                "convention": self.convention}


_GPTQ = "one FP16 scale per group of 128 weights, symmetric (GPTQ, AWQ default group size)"
FORMATS: dict[str, WeightFormat] = {  # one per precision of roofkit.dtypes
    "fp64": WeightFormat("fp64", 8, convention="no scales"),
    "fp32": WeightFormat("fp32", 4, convention="no scales"),
    "tf32": WeightFormat("tf32", 4, convention="no scales (stored in 32 bits)"),
    "fp16": WeightFormat("fp16", 2, convention="no scales"),
    "bf16": WeightFormat("bf16", 2, convention="no scales"),
    "fp8": WeightFormat("fp8", 1, convention="one scale per tensor or per 128 x 128 block: not counted"),
    "int8": WeightFormat("int8", 1, 128, 2, _GPTQ),
    "int4": WeightFormat("int4", 0.5, 128, 2, _GPTQ),
    "fp4": WeightFormat("fp4", 0.5, 32, 1, "one E8M0 scale per block of 32 (MXFP4, OCP MX v1.0)"),
}


def weight_format(dtype="bf16", group=None) -> WeightFormat:
    """The format of weights stored in ``dtype``; ``group`` overrides the weights per scale (int8, int4, fp4)."""
    if isinstance(dtype, WeightFormat):
        fmt = dtype
    else:
        fmt = FORMATS[dtypes.canonical(dtype)]
    if group is None:
        return fmt
    if isinstance(group, bool) or not isinstance(group, int) or group < 1:
        raise InvalidValue(f"group must be a whole number of weights of at least 1; got {group!r}.")
    if not fmt.group:
        raise InvalidValue(f"{fmt.name} weights have no per-group scales; a group size applies to int8, int4 and fp4.")
    return replace(fmt, group=group)


def other_dtype(weights_dtype="bf16") -> str:
    """The precision of what quantization leaves alone (embeddings, output layer, norms): BF16, or the weights' if wider."""
    fmt = weight_format(weights_dtype)
    return fmt.name if fmt.element_bytes >= 2 else "bf16"


def weights_bytes(model, weights_dtype="bf16", group=None) -> float:
    """Bytes of all the model's weights: its layers' matrices in ``weights_dtype`` (scales included), the rest in BF16.

    Every expert of a mixture of experts is counted: all of them must be in memory.
    """
    m = models.get(model)
    fmt = weight_format(weights_dtype, group)
    matrices = m.layer_matrix_params
    rest = m.params - matrices
    return matrices * fmt.bytes_per_weight + rest * dtypes.bytes_per_element(other_dtype(fmt))
