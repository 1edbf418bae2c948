"""Compute precisions: their canonical names, aliases and bytes per element.

These are the keys of the hardware catalog's peaks (``fp64 fp32 tf32 fp16
bf16 fp8 int8 fp4``) and the storage sizes the byte counts use. The bit
layouts of the formats themselves live in :mod:`roofkit.precision`.

TF32 is a tensor-core *input* format: its values sit in 32-bit registers and
32-bit memory, so it moves 4 bytes per element even though only 19 bits carry
information. FP4 packs two values per byte, and so does INT4, a storage format
for quantized weights (no accelerator in the catalog has an INT4 peak; its
weights are multiplied in BF16 or FP8, see :mod:`roofkit.inference.weights`).
"""

from __future__ import annotations

from .errors import UnknownPrecision
from .units import positive

__all__ = ["PRECISIONS", "canonical", "bytes_per_element", "aliases"]

# canonical name -> bytes per element in memory
PRECISIONS: dict[str, float] = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "int8": 1,
    "fp4": 0.5,
    "int4": 0.5,
}

_ALIASES: dict[str, str] = {
    "float64": "fp64", "double": "fp64", "f64": "fp64",
    "float32": "fp32", "single": "fp32", "f32": "fp32", "float": "fp32",
    "tensorfloat32": "tf32", "tensorfloat-32": "tf32",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8", "e4m3": "fp8", "e5m2": "fp8", "fp8e4m3": "fp8", "fp8e5m2": "fp8",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8", "float8_e5m2fnuz": "fp8",
    "i8": "int8", "i4": "int4", "uint4": "int4",
    "float4": "fp4", "e2m1": "fp4", "float4_e2m1fn": "fp4", "nvfp4": "fp4", "mxfp4": "fp4",
}


def canonical(name: str) -> str:
    """'bfloat16', 'BF16', 'e4m3' -> 'bf16', 'bf16', 'fp8'; unknown names raise UnknownPrecision."""
    if isinstance(name, str):
        key = name.strip().lower().replace(" ", "")
        for candidate in (key, key.replace("-", ""), key.replace("-", "").replace("_", "")):
            if candidate in PRECISIONS:
                return candidate
            if candidate in _ALIASES:
                return _ALIASES[candidate]
    raise UnknownPrecision(name, PRECISIONS)


def bytes_per_element(precision) -> float:
    """Bytes one element occupies: a precision name, or a positive number passed through."""
    if isinstance(precision, str):
        return PRECISIONS[canonical(precision)]

    return positive(precision, "bytes_per_element")


def aliases(name: str) -> list[str]:
    """Every alias that resolves to the canonical precision ``name``."""
    target = canonical(name)
    return sorted(a for a, c in _ALIASES.items() if c == target)
