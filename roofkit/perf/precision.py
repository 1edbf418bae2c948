"""Number formats from their bit layout, and real rounding into them.

A binary floating-point format with E exponent bits and M mantissa bits stores
a sign s, an exponent field e and a mantissa field m. Its value is

    normal     (e >= 1):  (-1)^s * (1 + m / 2^M) * 2^(e - bias)
    subnormal  (e == 0):  (-1)^s * (    m / 2^M) * 2^(1 - bias)

so the whole range follows from E, M and a few rules about which codes are
kept for infinity and NaN (``kind``):

    ieee   IEEE 754: bias 2^(E-1) - 1; the all-ones exponent is inf (m = 0) or NaN.
           float64, float32, float16, bfloat16, float8_e5m2, and TF32.
    fn     finite, NaN only at S.1111.111 (OCP 8-bit FP spec v1.0, 2023): float8_e4m3fn.
    fnuz   finite, one NaN at the negative-zero code, no -0, bias 2^(E-1)
           (Noune et al., "8-bit Numerical Formats for Deep Neural Networks", 2022).
    e2m1   finite, no NaN at all (OCP Microscaling Formats MX v1.0): float4_e2m1fn.
    int    two's complement integers: int8.

:meth:`Format.derive` does that derivation with sympy, and every float
property (``max``, ``min_normal``, ``eps`` ...) is that derivation evaluated;
the tests check it against ml_dtypes' and numpy's ``finfo``.

:func:`round_to` performs the real cast (numpy for float16/32/64, ml_dtypes
for the rest, bit arithmetic for TF32), :func:`from_bits` reads a bit pattern
back as the value it stores, :func:`spacing` gives the gap between neighbouring
values at a magnitude, and the demos of lesson 06 compute in
the format: :func:`swamping` (a small update vanishes next to a big weight),
:func:`underflow` (FP16 flushes small gradients to zero) and
:func:`loss_scaling` / :func:`dynamic_loss_scale` (the cure).

    >>> from roofkit import precision
    >>> precision.get("e4m3").max
    448.0
    >>> precision.bits(1.0, "fp16")
    '0 01111 0000000000'
    >>> precision.from_bits("1 10001 1010000000", "fp16")
    -6.5
    >>> precision.spacing(3.0, "bf16")   # BF16 values in [2, 4) are 2^-6 apart
    0.015625
    >>> precision.swamping(1.0, 1e-4, "bf16")["update_lost"]
    True
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..errors import InvalidValue, UnknownPrecision
from ..units import nonnegative, positive, size

__all__ = [
    "Format", "get", "formats", "names",
    "round_to", "bits", "decode", "compare", "from_bits", "spacing",
    "swamping", "underflow", "loss_scaling", "dynamic_loss_scale", "example_gradients",
]

_QUANTITIES = ("bias", "max", "min", "min_normal", "min_subnormal", "eps", "decimal_digits")


@functools.lru_cache(maxsize=None)
def _rules(kind: str) -> dict:
    """The kind's rules as sympy expressions in E (exponent bits), M (mantissa bits), N (all bits)."""
    import sympy as sp  # deferred: sympy costs ~0.25 s at import

    E, M, N = sp.symbols("E M N", integer=True, positive=True)
    two = sp.Integer(2)
    digits = (M + 1) * sp.log(2) / sp.log(10)  # significant decimal digits of an (M+1)-bit significand
    if kind == "int":  # N-bit two's complement: steps of 1 from -2^(N-1) to 2^(N-1) - 1
        one = sp.Integer(1)
        return {"bias": sp.Integer(0), "max": two ** (N - 1) - 1, "min": -(two ** (N - 1)),
                "min_normal": one, "min_subnormal": one, "eps": one, "decimal_digits": digits}
    bias = two ** (E - 1) if kind == "fnuz" else two ** (E - 1) - 1
    top_e = two**E - 2 if kind == "ieee" else two**E - 1  # IEEE keeps the all-ones exponent for inf/NaN
    top_m = two**M - 2 if kind == "fn" else two**M - 1  # fn keeps S.1111.111 for NaN
    largest = (1 + top_m / two**M) * two ** (top_e - bias)
    return {"bias": bias, "max": largest, "min": -largest,
            "min_normal": two ** (1 - bias),  # e = 1, m = 0
            "min_subnormal": two ** (1 - bias - M),  # e = 0, m = 1
            "eps": two**-M,  # the gap between 1 and the next value
            "decimal_digits": digits}


@functools.lru_cache(maxsize=None)
def _derived(kind: str, E: int, M: int, N: int) -> dict:
    import sympy as sp  # deferred: sympy costs ~0.25 s at import

    values = dict(zip(sp.symbols("E M N", integer=True, positive=True), (E, M, N)))
    return {k: v.subs(values) for k, v in _rules(kind).items()}


@functools.lru_cache(maxsize=None)
def _numbers(kind: str, E: int, M: int, N: int) -> dict:
    return {k: float(v) for k, v in _derived(kind, E, M, N).items()}


@dataclass(frozen=True)
class Format:
    """A number format: ``bits`` = 1 sign + ``exponent_bits`` + ``mantissa_bits``.

    Every range property comes from :meth:`derive` (exact sympy numbers,
    evaluated once); nothing is looked up. For int8, ``mantissa_bits`` = 7 are
    the value bits next to the sign, ``max``/``min`` = 127/-128, and ``eps``,
    ``min_normal`` and ``min_subnormal`` are all 1 (the step between integers).
    TF32 has 19 bits of layout but ``storage_bytes`` = 4: its values live in
    FP32 registers and memory (NVIDIA A100 whitepaper, 2020).
    """

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int
    kind: str  # 'ieee', 'fn', 'fnuz', 'e2m1' or 'int' (see the module docstring)

    def derive(self, symbolic: bool = False) -> dict:
        """bias, max, min, min_normal, min_subnormal, eps, decimal_digits as exact sympy numbers.

        ``symbolic=True`` gives the general rule of this kind in E, M (and N
        for integers) instead, for a lesson to display: for IEEE formats
        max = (2 - 2^-M) * 2^bias with bias = 2^(E-1) - 1.
        """
        if symbolic:
            return dict(_rules(self.kind))
        return dict(_derived(self.kind, self.exponent_bits, self.mantissa_bits, self.bits))

    def _number(self, key: str) -> float:
        return _numbers(self.kind, self.exponent_bits, self.mantissa_bits, self.bits)[key]

    bias = property(lambda self: int(self._number("bias")), doc="exponent bias (0 for int)")
    max = property(lambda self: self._number("max"), doc="largest finite value")
    min = property(lambda self: self._number("min"), doc="most negative finite value")
    min_normal = property(lambda self: self._number("min_normal"), doc="2^(1-bias)")
    min_subnormal = property(lambda self: self._number("min_subnormal"), doc="2^(1-bias-M)")
    eps = property(lambda self: self._number("eps"), doc="2^-M, the gap between 1 and the next value")
    decimal_digits = property(lambda self: self._number("decimal_digits"), doc="(M+1) log10 2")
    has_inf = property(lambda self: self.kind == "ieee")
    has_nan = property(lambda self: self.kind in ("ieee", "fn", "fnuz"))
    has_negative_zero = property(lambda self: self.kind in ("ieee", "fn", "e2m1"))

    @property
    def storage_bytes(self) -> float:
        """Bytes per element in memory (roofkit.dtypes): 4 for TF32, 0.5 for packed FP4."""
        return dtypes.bytes_per_element(self.name)

    @property
    def aliases(self) -> list[str]:
        return sorted(a for a, n in _ALIASES.items() if n == self.name)

    def to_dict(self) -> dict:
        data = {k: getattr(self, k) for k in ("name", "bits", "exponent_bits", "mantissa_bits", "kind")}
        data |= {k: getattr(self, k) for k in _QUANTITIES}
        data |= {k: getattr(self, k) for k in ("storage_bytes", "has_inf", "has_nan", "has_negative_zero")}
        return data | {"aliases": self.aliases}


_FORMATS = {f.name: f for f in [
    Format("float64", 64, 11, 52, "ieee"),
    Format("float32", 32, 8, 23, "ieee"),
    Format("tensorfloat32", 19, 8, 10, "ieee"),
    Format("float16", 16, 5, 10, "ieee"),
    Format("bfloat16", 16, 8, 7, "ieee"),
    Format("float8_e4m3fn", 8, 4, 3, "fn"),
    Format("float8_e5m2", 8, 5, 2, "ieee"),
    Format("float8_e4m3fnuz", 8, 4, 3, "fnuz"),
    Format("float8_e5m2fnuz", 8, 5, 2, "fnuz"),
    Format("float4_e2m1fn", 4, 2, 1, "e2m1"),
    Format("int8", 8, 0, 7, "int"),
]}

_ALIASES = {
    "fp64": "float64", "double": "float64", "f64": "float64",
    "fp32": "float32", "single": "float32", "f32": "float32", "float": "float32",
    "tf32": "tensorfloat32",
    "fp16": "float16", "half": "float16", "f16": "float16",
    "bf16": "bfloat16",
    "e4m3": "float8_e4m3fn", "e4m3fn": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn",
    "e5m2": "float8_e5m2", "fp8_e5m2": "float8_e5m2",
    "e4m3fnuz": "float8_e4m3fnuz", "e5m2fnuz": "float8_e5m2fnuz",
    "fp4": "float4_e2m1fn", "e2m1": "float4_e2m1fn", "float4": "float4_e2m1fn",
    "i8": "int8",
}
_AMBIGUOUS = {"fp8", "float8", "f8"}


def _norm(name: str) -> str:
    return "".join(c for c in name.lower() if c not in " _-\t")


_INDEX = {_norm(k): v for k, v in (_ALIASES | {n: n for n in _FORMATS}).items()}


def get(name) -> Format:
    """The format called ``name`` (case-insensitive; aliases such as 'bf16', 'e4m3', 'fp4').

    Also takes a Format, or a numpy / ml_dtypes type such as ``np.float16``.
    """
    if isinstance(name, Format):
        return name
    if not isinstance(name, str) and (isinstance(name, (type, np.dtype))):
        try:
            name = np.dtype(name).name
        except TypeError:
            pass
    if isinstance(name, str):
        if _norm(name) in _AMBIGUOUS:
            raise InvalidValue(f"{name.strip()} is ambiguous: choose float8_e4m3fn (E4M3) or float8_e5m2 (E5M2).")
        if _norm(name) in _INDEX:
            return _FORMATS[_INDEX[_norm(name)]]
    raise UnknownPrecision(name, _FORMATS, _ALIASES)


def formats() -> list[Format]:
    """Every format, widest first."""
    return list(_FORMATS.values())


def names() -> list[str]:
    return list(_FORMATS)


# --- real rounding ---------------------------------------------------------------------------

def _dtype(fmt: Format) -> np.dtype:
    """The numpy dtype that holds the format's values (float32 for TF32)."""
    if fmt.name == "tensorfloat32":
        return np.dtype(np.float32)
    if fmt.name in ("float64", "float32", "float16", "int8"):
        return np.dtype(fmt.name)
    import ml_dtypes  # deferred: ml_dtypes costs ~0.14 s at import

    return np.dtype(getattr(ml_dtypes, fmt.name))


def _as_float64(value, name: str = "value") -> np.ndarray:
    """Any real number or array of them as a float64 array; anything else is an InvalidValue."""
    bad = InvalidValue(f"{name} must be a real number or an array of real numbers; got {value!r}.")
    if value is None or isinstance(value, (str, bytes, bool, np.bool_)):
        raise bad
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise bad from None
    if array.dtype.kind not in "iuf" and array.dtype.type.__module__ != "ml_dtypes":
        raise bad
    with np.errstate(all="ignore"):
        return array.astype(np.float64)


def _float32_sticky(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd: exact values stay, inexact ones get their last bit set.

    A second round-to-nearest from there into any format of at most 22 bits of
    precision is then correctly rounded (Boldo & Melquiond, "Emulation of FMA
    and correctly rounded sums: proved algorithms using rounding to odd", IEEE
    TC 2008). ml_dtypes rounds float64 -> float32 -> target to nearest twice,
    which can be off by one step (jax-ml/ml_dtypes PR #401).
    """
    with np.errstate(all="ignore"):
        f = x.astype(np.float32)
        finite = np.isfinite(x)
        f = np.where(finite & np.isinf(f), np.copysign(np.finfo(np.float32).max, x), f).astype(np.float32)
        inexact = finite & (f.astype(np.float64) != x)
        f = np.where(inexact & (np.abs(f.astype(np.float64)) > np.abs(x)), np.nextafter(f, np.float32(0)), f)
        return (f.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32)


def _tf32(f: np.ndarray) -> np.ndarray:
    """Round float32 values to TF32 (10 mantissa bits), to nearest even, on their bit patterns."""
    u = f.view(np.uint32)
    lsb = (u >> np.uint32(13)) & np.uint32(1)
    rounded = (u + np.uint32(0x0FFF) + lsb) & np.uint32(0xFFFFE000)  # add half an ulp (- 1 on even), cut 13 bits
    special = (u & np.uint32(0x7F800000)) == np.uint32(0x7F800000)  # inf and NaN stay; NaN made quiet
    out = np.where(special, np.where(np.isnan(f), u | np.uint32(0x7FC00000), u), rounded)
    return out.astype(np.uint32).view(np.float32)


def _cast(x: np.ndarray, fmt: Format) -> np.ndarray:
    """x (float64, any shape) stored in fmt: an array of the format's dtype."""
    flat = x.reshape(-1)  # 1-d, so that the bit arithmetic wraps silently instead of warning
    with np.errstate(all="ignore"):
        if fmt.kind == "int":
            if np.isnan(flat).any():
                raise InvalidValue(f"{fmt.name} has no NaN: cannot round {float(flat[np.isnan(flat)][0])}.")
            out = np.clip(np.rint(flat), fmt.min, fmt.max).astype(np.int8)  # nearest, ties to even; saturate
        elif fmt.name in ("float64", "float32", "float16"):
            out = flat.astype(fmt.name)  # numpy rounds float64 -> these directly, to nearest even
        elif fmt.name == "tensorfloat32":
            out = _tf32(_float32_sticky(flat))
        else:
            out = _float32_sticky(flat).astype(_dtype(fmt))
    return out.reshape(x.shape)


def round_to(value, fmt="bfloat16"):
    """``value`` after a real cast to ``fmt``: a float for a number, a float64 array for an array.

    Round to nearest, ties to even. Overflow gives what the hardware type
    gives: inf (IEEE kinds), NaN (float8_e4m3fn and the fnuz formats:
    ``round_to(1e9, "e4m3")`` is nan), or the largest value (float4_e2m1fn,
    which has neither, and int8, which saturates to [-128, 127] with no scale).
    NaN stays NaN, except in float4_e2m1fn, where ml_dtypes turns it into -0.0
    (the format has no NaN), and in int8, which raises InvalidValue.

    TF32 keeps 10 of float32's 23 mantissa bits, ties to even as PTX's
    ``cvt.rn.tf32.f32`` (Ampere's ``cvt.rna`` sends ties away from zero);
    subnormals are kept. A float32 input is rounded once, as a tensor core
    rounds its FP32 operands; a float64 input is rounded correctly, not twice.
    """
    fmt = get(fmt)
    x = _as_float64(value)
    out = _cast(x, fmt).astype(np.float64)
    return float(out) if out.ndim == 0 else out


def _code(stored: np.ndarray, fmt: Format) -> int:
    """The format's bit pattern of one stored value, as an integer."""
    word = stored.reshape(-1).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[stored.itemsize])
    code = int(word[0])
    if fmt.name == "tensorfloat32":
        return code >> 13  # the low 13 float32 mantissa bits are zero
    return code & ((1 << fmt.bits) - 1)  # float4 sits in the low 4 bits of its byte


def _scalar(value, name: str) -> float:
    x = _as_float64(value, name)
    if x.ndim != 0:
        raise InvalidValue(f"{name} must be one number here; got an array of shape {x.shape} (use round_to for arrays).")
    return float(x)


def decode(value, fmt="bfloat16") -> dict:
    """Round ``value`` to ``fmt`` and take the result apart into its bit fields.

    Returns sign, exponent_bits and mantissa_bits (strings of 0/1), the
    unbiased exponent and the significand (1.m, or 0.m for subnormals) with
    value = (-1)^sign * significand * 2^exponent, the rounded value, the
    relative error |rounded - value| / |value| (nan for an inf or NaN input),
    and whether the result is zero, subnormal, inf or NaN.
    """
    fmt = get(fmt)
    x = _scalar(value, "value")
    stored = _cast(np.array(x), fmt)
    r = float(stored)
    code, E, M = _code(stored, fmt), fmt.exponent_bits, fmt.mantissa_bits
    s, e, m = code >> (fmt.bits - 1), (code >> M) & ((1 << E) - 1), code & ((1 << M) - 1)
    fields = [str(s), f"{e:0{E}b}" if E else "", f"{m:0{M}b}"]
    special = math.isnan(r) or math.isinf(r)
    if fmt.kind == "int" or special:
        exponent = significand = None
    else:
        exponent, significand = (e - fmt.bias, 1 + m / 2**M) if e else (1 - fmt.bias, m / 2**M)
    if not math.isfinite(x):
        error = math.nan
    else:
        error = abs(r - x) / abs(x) if x else (0.0 if r == 0 else math.inf)
    return {
        "format": fmt.name, "input": x, "value": r, "bits": " ".join(f for f in fields if f),
        "sign": s, "exponent_bits": fields[1], "mantissa_bits": fields[2],
        "exponent": exponent, "significand": significand, "relative_error": error,
        "zero": r == 0, "subnormal": fmt.kind != "int" and e == 0 and m != 0,
        "inf": math.isinf(r), "nan": math.isnan(r),
    }


def bits(value, fmt="bfloat16") -> str:
    """The bit pattern of ``value`` rounded to ``fmt``: sign, exponent and mantissa, e.g. '0 01111 0000000000'.

    int8 shows the sign bit and the 7 other bits of its two's complement.
    """
    return decode(value, fmt)["bits"]


def from_bits(pattern, fmt="bfloat16") -> float:
    """The value a bit pattern stores in ``fmt``: the inverse of :func:`bits`.

    ``pattern`` is a string of 0 and 1, sign bit first, as many bits as the
    format has (16 for BF16, 19 for TF32, 8 for E4M3); spaces, underscores and
    a leading '0b' are ignored, so '1 10001 1010000000' and '0b1100011010000000'
    are the same FP16 code. The value comes from the hardware type itself
    (numpy's or ml_dtypes' view of the code), never from the formula, so it is
    the oracle the formula is checked against: NaN and inf codes give nan and inf.
    """
    fmt = get(fmt)
    if not isinstance(pattern, str):
        raise InvalidValue(f"pattern must be a string of 0s and 1s such as '0 01111 0000000000'; got {pattern!r}.")
    text = pattern.strip().replace(" ", "").replace("_", "")
    text = text[2:] if text[:2].lower() == "0b" else text
    if not text or set(text) - {"0", "1"} or len(text) != fmt.bits:
        raise InvalidValue(f"{fmt.name} codes are {fmt.bits} bits of 0 and 1 (sign, {fmt.exponent_bits} exponent, "
                           f"{fmt.mantissa_bits} mantissa); got {pattern!r}.")
    code = int(text, 2)
    if fmt.kind == "int":
        return float(code - (1 << fmt.bits) if code >> (fmt.bits - 1) else code)
    if fmt.name == "tensorfloat32":  # the 19 bits are the top of a float32 word, the low 13 bits zero
        return float(np.array([code << 13], np.uint32).view(np.float32)[0])
    word = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[_dtype(fmt).itemsize]
    return float(np.array([code], word).view(_dtype(fmt))[0])


def spacing(value, fmt="bfloat16") -> float:
    """The gap between neighbouring values of ``fmt`` at ``value``'s magnitude.

    ``value`` is first stored in ``fmt``; the result is the distance from that
    stored magnitude to the next larger one: 2^(k - M) for a normal value in
    [2^k, 2^(k+1)) with M mantissa bits (eps = 2^-M at 1), min_subnormal among
    the subnormals, and 1 for int8. Adding anything smaller than half of it
    to a value of that size rounds back to the same value.
    """
    fmt = get(fmt)
    stored = abs(round_to(_scalar(value, "value"), fmt))
    if not math.isfinite(stored):
        raise InvalidValue(f"{value!r} is not a finite {fmt.name} value: it has no neighbours.")
    return 1.0 if fmt.kind == "int" else _spacing(stored, fmt)


def compare(value, formats=None) -> list[dict]:
    """One row per format (all by default): the rounded value, its bits, the relative error."""
    x = _scalar(value, "value")
    rows = []
    for fmt in [get(f) for f in (names() if formats is None else formats)]:
        try:
            d = decode(x, fmt)
        except InvalidValue as error:  # int8 and NaN
            rows.append({"format": fmt.name, "value": None, "bits": None, "relative_error": None,
                         "subnormal": None, "note": str(error)})
            continue
        rows.append({k: d[k] for k in ("format", "value", "bits", "relative_error", "subnormal")} | {"note": ""})
    return rows


# --- mixed precision demos ---------------------------------------------------------------------

def _float_format(fmt) -> Format:
    fmt = get(fmt)
    if fmt.kind == "int":
        raise InvalidValue(f"{fmt.name} is an integer format; this demo needs a floating-point one, e.g. bfloat16.")
    return fmt


def _add(a: np.ndarray, b: np.ndarray, fmt: Format) -> np.ndarray:
    """a + b computed in fmt (ml_dtypes adds in float32 and rounds, which is exact rounding here)."""
    with np.errstate(all="ignore"):
        if fmt.name == "tensorfloat32":
            return _tf32((a + b).astype(np.float32))
        return a + b


def _spacing(w: float, fmt: Format) -> float:
    """The gap from |w| to the next larger value of fmt: 2^(exponent - M), at least min_subnormal."""
    exponent = math.frexp(w)[1] - 1 if w else 1 - fmt.bias
    return 2.0 ** (max(exponent, 1 - fmt.bias) - fmt.mantissa_bits)


def _overflows(x: np.ndarray, fmt: Format) -> np.ndarray:
    """True where x is too big for fmt: the cast gave inf/NaN, or (E2M1, int8, which saturate
    instead) |x| is at or past the midpoint between max and the next value the format lacks."""
    with np.errstate(all="ignore"):
        if fmt.kind in ("e2m1", "int"):
            return np.abs(x) >= fmt.max + (0.5 if fmt.kind == "int" else _spacing(fmt.max, fmt) / 2)
        return ~np.isfinite(_cast(x, fmt).astype(np.float64)) & np.isfinite(x)


def swamping(weight=1.0, update=1e-4, fmt="bfloat16") -> dict:
    """weight + update computed in ``fmt``: does the update survive?

    The sum rounds back to the weight whenever update < spacing(weight) / 2,
    about eps/2 * weight: in BF16 (eps = 2^-7) an update of 1e-4 to a weight
    of 1 is lost, in FP32 (eps = 2^-23) it is kept. That is why mixed
    precision keeps an FP32 master copy of the weights (Micikevicius et al.,
    "Mixed Precision Training", ICLR 2018). ``smallest_update_that_survives``
    is the smallest positive value of ``fmt`` that changes the weight (None
    when none does: E2M1 saturates at its max).
    """
    fmt = _float_format(fmt)
    w = np.array([nonnegative(weight, "weight")], np.float64)
    W, U = _cast(w, fmt), _cast(np.array([positive(update, "update")], np.float64), fmt)
    if not np.isfinite(W.astype(np.float64)).all() or _overflows(w, fmt).any():
        raise InvalidValue(f"weight {weight!r} does not fit in {fmt.name} (max {fmt.max:g}).")
    result = _add(W, U, fmt)
    w0, gap = float(W[0]), _spacing(float(W[0]), fmt)
    smallest, v = None, max(gap / 2, fmt.min_subnormal)  # a power of two: a value of fmt
    while v <= gap:  # gap/2 itself is a tie (lost when w is even), then the values just above it
        if float(_add(W, _cast(np.array([v]), fmt), fmt)[0]) != w0:
            smallest = v
            break
        v += _spacing(v, fmt)
    return {
        "format": fmt.name, "weight": w0, "update": float(U[0]), "result": float(result[0]),
        "update_lost": float(result[0]) == w0, "eps": fmt.eps, "smallest_update_that_survives": smallest,
    }


def _gradients(gradients) -> np.ndarray:
    g = _as_float64(gradients, "gradients").reshape(-1)
    if g.size == 0 or not np.isfinite(g).all():
        raise InvalidValue(f"gradients must be a non-empty array of finite numbers; got {gradients!r}.")
    if not (g != 0).any():
        raise InvalidValue("gradients are all zero: nothing can underflow.")
    return g


def underflow(gradients, fmt="float16") -> dict:
    """What casting ``gradients`` to ``fmt`` does to the small ones.

    Fractions are of the nonzero gradients: ``underflow_fraction`` become 0
    (|g| below min_subnormal / 2), ``subnormal_fraction`` keep only a few bits
    (|g| below min_normal). FP16's min_subnormal is 2^-24 (about 6e-8), so
    gradients of 1e-8 vanish; BF16 shares FP32's range and keeps them.
    """
    fmt, g = get(fmt), _gradients(gradients)
    c = _cast(g, fmt).astype(np.float64)
    nonzero = g != 0
    n = int(nonzero.sum())
    return {
        "format": fmt.name, "count": n,
        "underflow_fraction": float(((c == 0) & nonzero).sum() / n),
        "subnormal_fraction": float((nonzero & (c != 0) & (np.abs(c) < fmt.min_normal)).sum() / n),
        "min_normal": fmt.min_normal, "min_subnormal": fmt.min_subnormal,
    }


def loss_scaling(gradients, scale, fmt="float16") -> dict:
    """Cast ``gradients * scale`` to ``fmt``, then unscale in FP32: how many survive?

    Multiplying the loss by S multiplies every gradient by S (chain rule), which
    lifts small gradients out of FP16's underflow zone; the optimizer divides
    by S in FP32 (Micikevicius et al. 2018, section 3.2). Too large an S
    overflows: ``overflow_count`` gradients became inf/NaN (or saturated).
    ``lost_before`` / ``lost_after``: fraction of nonzero gradients that became
    0 without / with scaling. The median relative errors count a lost
    gradient as 1 and an overflowed one as inf.
    """
    fmt, g = get(fmt), _gradients(gradients)
    S = positive(scale, "scale")
    nonzero = g != 0
    n = int(nonzero.sum())
    scaled = g * S
    with np.errstate(all="ignore"):
        before = _cast(g, fmt).astype(np.float64)
        after = (_cast(scaled, fmt).astype(np.float64) / S).astype(np.float32).astype(np.float64)
        overflow = _overflows(scaled, fmt) & nonzero
        error_before = np.abs(before - g)[nonzero] / np.abs(g[nonzero])
        error_after = np.where(overflow, np.inf, np.abs(after - g))[nonzero] / np.abs(g[nonzero])
    return {
        "format": fmt.name, "scale": float(S), "count": n,
        "lost_before": float(((before == 0) & nonzero).sum() / n),
        "lost_after": float(((after == 0) & nonzero & ~overflow).sum() / n),
        "overflow_count": int(overflow.sum()), "overflow": bool(overflow.any()),
        "median_relative_error_before": float(np.median(error_before)),
        "median_relative_error_after": float(np.median(error_after)),
    }


def dynamic_loss_scale(gradient_maxima, fmt="float16", initial_scale=2.0**16,
                       growth_interval=2000, growth_factor=2.0, backoff_factor=0.5) -> list[dict]:
    """Simulate dynamic loss scaling over steps whose largest |gradient| is given.

    The rule of torch.amp.GradScaler (whose defaults these are): a step whose
    scaled gradients overflow ``fmt`` is skipped and the scale multiplied by
    ``backoff_factor``; after ``growth_interval`` good steps in a row the scale
    is multiplied by ``growth_factor``. Each step may be a number or an array
    of gradients (its largest magnitude is used). One row per step: step,
    scale used, max_gradient, overflow, skipped, and the scale for the next step.
    """
    fmt = get(fmt)
    scale = positive(initial_scale, "initial_scale")
    interval = int(size(growth_interval, "growth_interval"))
    growth = positive(growth_factor, "growth_factor")
    backoff = positive(backoff_factor, "backoff_factor")
    if growth <= 1 or backoff >= 1:
        raise InvalidValue(f"need growth_factor > 1 and backoff_factor < 1; got {growth_factor!r} and {backoff_factor!r}.")
    if isinstance(gradient_maxima, (str, bytes)) or not hasattr(gradient_maxima, "__iter__"):
        raise InvalidValue(f"gradient_maxima must be a list of steps; got {gradient_maxima!r}.")
    history, good = [], 0
    for step, gradients in enumerate(gradient_maxima):
        g = _as_float64(gradients, f"step {step}")
        m = float(np.max(np.abs(g))) if g.size else math.nan
        nonnegative(m, f"the largest gradient of step {step}")
        overflow = bool(_overflows(np.array([m * scale]), fmt)[0])
        used = scale
        if overflow:
            scale, good = scale * backoff, 0
        else:
            good += 1
            if good == interval:
                scale, good = scale * growth, 0
        history.append({"step": step, "scale": used, "max_gradient": m, "overflow": overflow,
                        "skipped": overflow, "next_scale": scale})
    return history


def example_gradients(n=10_000, seed=0) -> np.ndarray:
    """``n`` FP32 gradients with random signs and log-normal magnitudes, 10^N(-7.5, 0.75).

    Most lie between 1e-9 and 1e-6, so about half underflow in FP16: the
    situation loss scaling was invented for. Seeded, hence reproducible.
    """
    n = int(size(n, "n"))
    seed = int(nonnegative(seed, "seed"))
    rng = np.random.default_rng(seed)
    magnitude = 10.0 ** rng.normal(-7.5, 0.75, n)
    return (rng.choice([-1.0, 1.0], n) * magnitude).astype(np.float32)
