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
                       Formats MX v1.0): 0.53125 bytes per weight; asked for as "mxfp4" too
    nvfp4              NVIDIA's FP4: one 1-byte (E4M3) scale per block of 16, and one FP32
                       scale per tensor, not counted (NVIDIA's "Introducing NVFP4" and
                       TensorRT Model Optimizer's checkpoints): 0.5625 bytes per weight

Only the decoder layers' matrices take the format (:attr:`roofkit.models.Model.layer_matrix_params`);
the embeddings, the output layer and the norms stay in BF16 (or in the
weights' own format when it is wider), as GPTQ, AWQ and FP8 checkpoints keep them.

A checkpoint may keep some families of matrices in another format (:data:`FAMILIES`), written after
the main one: ``"nvfp4,attention=bf16"`` is NVIDIA's DeepSeek-R1 NVFP4 recipe, its experts and dense
FFNs in FP4 and its "64x Attention Modules" in BF16 (TensorRT-LLM, docs/source/blogs/tech_blog/
blog1_Pushing_Latency_Boundaries_Optimizing_DeepSeek-R1_Performance_on_NVIDIA_B200_GPUs.md, "Precision
Strategy"); ``"nvfp4,attention=bf16,attention.out=nvfp4"`` its v2 checkpoint, which also quantizes W^O. A
family's GEMMs read its format and run at its precision, or the math's when that is wider
(:func:`roofkit.inference.latency.step`).

    >>> weight_format("int4").bytes_per_weight
    0.515625
    >>> round(weights_bytes("llama-3-70b", "bf16") / 1e9, 1)       # 2 bytes x 70.6B parameters
    141.1
    >>> round(weights_bytes("llama-3-70b", "int4") / 1e9, 1)       # INT4 layers, BF16 embeddings
    39.5
    >>> round(weights_bytes("deepseek-v3", "nvfp4,attention=bf16") / 1e9, 1)   # 11.4B attention weights in BF16
    396.7
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ... import dtypes
from ...catalogs import models
from ...errors import InvalidValue

__all__ = ["WeightFormat", "FORMATS", "VARIANTS", "FAMILIES", "FAMILY_OPS", "weight_format", "weights_bytes",
           "other_dtype"]

# families of a layer's matrices a checkpoint may store in a format of their own, and the layer ops that read them
FAMILIES = {
    "attention": ("the attention's projections: W^Q, W^K, W^V, or latent attention's W^DQ, W^UQ, W^DKV, W^UK, W^UV "
                  "(and W^O unless attention.out names its own)"),
    "attention.out": "the attention's output projection W^O",
}
FAMILY_OPS = {"attention": ("qkv", "q.down", "q.up", "kv.down", "attn.q_absorb", "attn.v_absorb", "attn.kv_up"),
              "attention.out": ("out",)}


@dataclass(frozen=True)
class WeightFormat:
    """A stored weight format: ``element_bytes`` per weight plus one ``scale_bytes`` scale per ``group`` weights."""

    name: str
    element_bytes: float
    group: int | None = None  # weights per scale; None: no per-group scale
    scale_bytes: float = 0.0
    convention: str = ""
    families: tuple = ()  # (family, WeightFormat) pairs stored in another format (FAMILIES)

    @property
    def bytes_per_weight(self) -> float:
        """b + s / g: the element and its share of a scale (the main format's, families apart)."""
        return self.element_bytes + (self.scale_bytes / self.group if self.group else 0.0)

    def of(self, family: str) -> "WeightFormat":
        """The format ``family``'s matrices are stored in: its own, else (attention.out) the attention's, else
        the main one."""
        own = dict(self.families)
        if family == "attention.out" and family not in own:
            family = "attention"
        return own.get(family, self.main)

    @property
    def main(self) -> "WeightFormat":
        """The main format alone, without the families stored apart."""
        return replace(self, name=self.name.split(",")[0], families=()) if self.families else self

    def op_format(self, op: str) -> "WeightFormat | None":
        """The format of the layer op ``op``'s weights when a family stores them apart; None: the main one."""
        for family, ops in FAMILY_OPS.items():
            if op in ops:
                fmt = self.of(family)
                return None if fmt == self.main else fmt
        return None

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
# stored formats that share a precision's math but not its scales: asked for by this name, not the precision's
VARIANTS: dict[str, WeightFormat] = {
    "nvfp4": WeightFormat("nvfp4", 0.5, 16, 1, "one E4M3 scale per block of 16 and one FP32 per tensor (NVFP4)"),
}


def weight_format(dtype="bf16", group=None) -> WeightFormat:
    """The format of weights stored in ``dtype``; ``group`` overrides the weights per scale (int8, int4, fp4) of
    the main format. ``dtype`` may name families in formats of their own after it: ``"nvfp4,attention=bf16"``."""
    if isinstance(dtype, WeightFormat):
        fmt = dtype
    elif isinstance(dtype, str) and "," in dtype:
        fmt = _mixed(dtype)
    else:
        fmt = _one(dtype)
    if group is None:
        return fmt
    if isinstance(group, bool) or not isinstance(group, int) or group < 1:
        raise InvalidValue(f"group must be a whole number of weights of at least 1; got {group!r}.")
    if not fmt.group:
        raise InvalidValue(f"{fmt.name} weights have no per-group scales; a group size applies to int8, int4 and fp4.")
    return replace(fmt, group=group)


def _one(name) -> WeightFormat:
    """One stored format by name: a variant (nvfp4) or the format of a precision."""
    key = name.strip().lower() if isinstance(name, str) else name
    return VARIANTS[key] if key in VARIANTS else FORMATS[dtypes.canonical(name)]


def _mixed(spec: str) -> WeightFormat:
    """``"main,family=dtype,..."``: the main format with families of its own (:data:`FAMILIES`)."""
    main, *rest = [part.strip() for part in spec.split(",")]
    base = _one(main)
    families = {}
    for part in rest:
        family, sep, dtype = (x.strip() for x in part.partition("="))
        if not sep or family not in FAMILIES:
            raise InvalidValue(f"weights format {spec!r}: {part!r} is not family=precision with a family of "
                               f"{', '.join(FAMILIES)}.")
        families[family] = _one(dtype)
    name = ",".join([base.name] + [f"{f}={families[f].name}" for f in FAMILIES if f in families])
    return replace(base, name=name, families=tuple((f, families[f]) for f in FAMILIES if f in families))


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
    total = matrices * fmt.bytes_per_weight + rest * dtypes.bytes_per_element(other_dtype(fmt))
    if fmt.families:  # the families' matrices in their own formats
        into, out = m.attention_matrices
        for family, count in (("attention", into), ("attention.out", out)):
            total += m.layers * count * (fmt.of(family).bytes_per_weight - fmt.bytes_per_weight)
    return total
