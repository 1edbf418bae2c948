"""A decoder layer's time: the roofline sum, and a model calibrated on a real GPU.

Two predictions of one layer of a catalog model (:mod:`roofkit.models`),
``batch`` sequences of ``seq`` new tokens (a causal prefill), or one new token
each against a cache of ``kv_seq`` tokens (a decode step):

* plain (the course's model): the IDEAL kernel list, one kernel per op of
  :func:`roofkit.formulas.transformer_layer_ops`, each at its roofline time
  with the datasheet roofs, summed:

      T = sum_k max(F_k / P, B_k / BW)

* calibrated: the EAGER kernel list (what PyTorch runs, op by op), with the
  ACHIEVABLE roofs (the best measured matmul rate, a measured copy's
  bandwidth, and for the fused attention kernel the best rate measured for
  it) and a floor t0 that every kernel pays whatever its size:

      T = sum_k [ t0 + max(F_k / P_k, B_k / BW_achievable) ]

  with P_k the achievable matmul rate, or for attention its own achievable
  rate: a FlashAttention-style kernel runs a softmax (exponentials on the
  special-function units), masking and synchronization between its two
  matrix products, and does not reach cuBLAS's rate (on the shipped H200,
  PyTorch's SDPA reached 499 TFLOP/s against the matmul's 801; FlashAttention-3,
  Shah et al. 2024, reports FlashAttention-2 at about 35% of an H100's peak).
  Giving attention the matmul's rate made long prefills, where attention's
  FLOPs grow like the square of the sequence, come out too fast.

  t0 is the one fitted parameter: the least-squares fit of the relative
  errors over measured whole layers (:func:`fit_floor`), 5.5 µs on the H200
  dataset shipped with roofkit. It is an average cost per kernel, not a
  latency anyone measured: it absorbs a kernel's start on the SMs, its ramp
  to full bandwidth and its last, partly idle wave of thread blocks (a tiny
  kernel replayed in a CUDA graph takes about 1 µs, one timed alone 14 µs).
  A CUDA graph removes the CPU's launch cost, not this (on that H200 the
  graph-replayed layer is within a few percent of the eager one).

The eager list differs from the ideal one where PyTorch runs more kernels
or moves more bytes than the one-kernel-per-op model: ``F.silu(g) * u`` is two
kernels (SiLU writes its result, the product reads it back: 5 passes over
T x d_ff elements instead of 3), and ``F.rms_norm`` (one fused kernel in recent
PyTorch) also writes its fp32 reciprocal RMS. The difference between the two
lists at the same roofs and floor is what fusion would win (:attr:`LayerTime.fused_s`).

A decode-step GEMM timed alone on that H200 reaches only about 64% of the
copy bandwidth. No bandwidth of its own is needed to explain it in a layer
(:func:`gemm_bandwidth_check`): fitted together with the floor on the whole
layers, such a bandwidth comes out at the copy's (0.98x) and changes no
error. The floor explains most of it (a 100 MB weight read in 23.6 µs plus
5.5 µs reaches 81%); the rest is what timing one op alone adds, about 3.5 µs
per op (the ops of a decode layer timed one by one sum to 33-40 µs more than
the layer).

    >>> t = predict("llama-2-7b", batch=1, seq=1, kv_seq=2048, hw="h200")
    >>> round(t.time_s * 1e6)                            # the roofline sum, datasheet roofs
    91
    >>> c = predict("llama-2-7b", batch=1, seq=1, kv_seq=2048, hw="h200", calibrated=True)
    >>> round(c.time_s * 1e6), c.kernels                 # measured on that H200: 171 µs
    (169, 12)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

from .. import dtypes, formulas
from ..catalogs import hardware, models
from ..errors import InvalidValue
from .roofline import time_bounds

__all__ = ["Kernel", "Calibration", "LayerTime", "OpTime", "kernels", "predict", "predict_case", "calibrate",
           "achievable_bandwidth",
           "default_calibration", "fit_floor", "leave_one_out", "compare", "gemm_bandwidth_check",
           "attention_rate"]

_ROWWISE_STATS = "fp32"  # the reciprocal RMS an eager rms_norm writes beside its output, one per row


@dataclass(frozen=True)
class Kernel:
    """One GPU kernel of a layer: ``op`` is the layer op it belongs to; ``kind`` picks its roofs.

    ``precision``: the precision its math runs in, when a recipe gives it its own
    (an FP8 GEMM beside BF16 norms: :mod:`roofkit.perf.recipe`); None, the roofs'
    own (every kernel in one precision, as here). ``shape``: a GEMM's
    (rows, n, k, count), ``count`` GEMMs of [rows, k] @ [k, n], where the step
    model needs its operands' sizes (their casts to a low precision).
    """

    name: str
    op: str
    flops: float
    bytes: float
    kind: str  # "gemm", "attention", "norm" or "elementwise"
    precision: str | None = None
    shape: tuple | None = None


def _shape(model) -> models.Model:
    return models.get(model)


def kernels(model, batch, seq, kv_seq=None, dtype="bf16", eager=False, weights_dtype=None,
            kv_dtype=None, dense=False, routing="uniform") -> list[Kernel]:
    """The kernels of one decoder layer, in order; ``eager=True`` gives what PyTorch eager runs.

    ``kv_seq=None``: a causal prefill of ``seq`` tokens; else ``seq`` new tokens per
    sequence, each attending to ``kv_seq`` cached ones (decode: ``seq=1``).
    ``weights_dtype``, ``kv_dtype``: the bytes of a weight and of a cached K/V element
    when they differ from ``dtype`` (a precision name, or a number of bytes such as
    int4 with its scales): see :func:`roofkit.formulas.transformer_layer_ops`. ``dense`` and
    ``routing``: a mixture of experts' dense layer, and how its tokens spread over the experts
    (:meth:`roofkit.models.Model.layer_ops`).
    """
    shape = _shape(model)
    ops = shape.layer_ops(batch, seq, kv_seq, dtype, weight_bytes=weights_dtype, kv_bytes=kv_dtype, dense=dense,
                          routing=routing)
    b = dtypes.bytes_per_element(dtype)
    tokens, d_ff = batch * seq, shape.d_ff
    out = []
    for name, cost in ops.items():
        if shape.mla and (name.endswith(".norm") or name.startswith("attn.")):  # latent attention's own kernels
            out.append(_latent_kernel(name, cost))
            continue
        kind = ("attention" if name == "attn" else "norm" if name.startswith("norm")
                else "elementwise" if name.startswith("residual") or name.endswith(".act") or name == "moe.combine"
                else "gemm")
        if eager and kind == "norm":  # one fused kernel that also writes the per-row statistic
            stats = formulas.Cost(0, tokens * dtypes.bytes_per_element(_ROWWISE_STATS))
            out.append(Kernel(name, name, float(cost.flops), float((cost + stats).bytes), kind))
        elif eager and name == "mlp.act" and shape.gated:  # F.silu(g) * u: two kernels
            silu = formulas.elementwise(tokens * d_ff, formulas.SILU_FLOPS_PER_ELEMENT, 1, 1, b)
            mul = formulas.elementwise(tokens * d_ff, 1, 2, 1, b)
            out += [Kernel("mlp.act.silu", name, float(silu.flops), float(silu.bytes), kind),
                    Kernel("mlp.act.mul", name, float(mul.flops), float(mul.bytes), kind)]
        else:
            out.append(Kernel(name, name, float(cost.flops), float(cost.bytes), kind))
    return out


def _latent_kernel(name, cost) -> Kernel:
    """A kernel that only multi-head latent attention runs (DeepSeek-V2, arXiv:2405.04434, section 2.1.2;
    :func:`roofkit.formulas.latent_attention_ops`): the RMSNorm of a latent ('q.norm', 'kv.norm'), or a
    GEMM beside the fused attention kernel that a prefill and a decode step run differently: K and V
    rebuilt from the latent ('attn.kv_up', prefill) or W^UK and W^UV absorbed into the heads
    ('attn.q_absorb', 'attn.v_absorb', decode). Those GEMMs belong to the op 'attn' with the fused
    kernel, so that a step's attention (what each phase does apart) is every kernel of that op."""
    if name.endswith(".norm"):
        return Kernel(name, name, float(cost.flops), float(cost.bytes), "norm")
    return Kernel(name, "attn", float(cost.flops), float(cost.bytes), "gemm")


# --- calibration -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """Achievable roofs and the per-kernel floor of one GPU, and what they were fitted on."""

    device: str
    peak_flops: dict[str, float]  # precision -> achievable matmul FLOP/s
    bandwidth: float  # achievable (copy) bandwidth, bytes/s
    floor_s: float  # t0, the per-kernel floor
    catalog: str | None = None  # the catalog key of the device, when known
    source: str = ""
    cases: int = 0  # how many measured layers the floor was fitted on
    attention_flops: dict[str, float] = field(default_factory=dict)  # precision -> achievable fused-attention FLOP/s

    def peak(self, dtype) -> float:
        key = dtypes.canonical(dtype)
        if key not in self.peak_flops:
            raise InvalidValue(f"the calibration of {self.device} has no {key} matmul rate; it has: "
                               f"{', '.join(self.peak_flops)}.")
        return self.peak_flops[key]

    def attention_peak(self, dtype) -> float:
        """The fused attention kernel's achievable rate; the matmul's where none was measured (optimistic)."""
        key = dtypes.canonical(dtype)
        return self.attention_flops.get(key) or self.peak(key)

    def to_dict(self) -> dict:
        return asdict(self)


def _roofline_s(ks: list[Kernel], peak: float, bandwidth: float, gemm_bandwidth: float | None = None,
                attention_peak: float | None = None) -> float:
    """Sum of the kernels' roofline times max(F/P, B/BW); ``gemm_bandwidth`` (if given) for the weight GEMMs,
    ``attention_peak`` (if given) for the fused attention kernel."""
    def bw(k):
        return gemm_bandwidth if gemm_bandwidth is not None and k.kind == "gemm" else bandwidth

    def rate(k):
        return attention_peak if attention_peak is not None and k.kind == "attention" else peak
    return sum(time_bounds(k.flops, k.bytes, rate(k), bw(k))[0] for k in ks)


def _case_kernels(case, dtype="bf16") -> list[Kernel]:
    """The eager kernels of a measured case (its model must be in the catalog, with the same shape)."""
    shape = models.get(case.model)
    have = (shape.d_model, shape.heads, shape.kv_heads, shape.d_ff, shape.head_dim)
    if have != (case.d, case.H, case.KV, case.ff, case.head_dim):
        raise InvalidValue(f"the measured {case.model!r} has d, H, KV, ff, head_dim = "
                           f"{(case.d, case.H, case.KV, case.ff, case.head_dim)}; the catalog says {have}.")
    return kernels(shape, case.batch, case.seq, None if case.causal else case.kv_seq, dtype, eager=True)


def fit_floor(cases, peak_flops: float, bandwidth: float, dtype="bf16", gemm_bandwidth: float | None = None,
              attention_flops: float | None = None) -> float:
    """The per-kernel floor t0 that best fits the measured ``layer_s`` of ``cases`` (least squares, relative).

    Each case predicts R_i + n_i t0 (R_i its eager kernels' roofline sum, n_i
    their number); t0 minimizes sum_i ((R_i + n_i t0) / m_i - 1)^2 in closed form:

        t0 = sum_i (n_i / m_i)(1 - R_i / m_i) / sum_i (n_i / m_i)^2      (0 if negative)

    ``gemm_bandwidth``: a separate bandwidth for the weight GEMMs (see :func:`gemm_bandwidth_check`);
    ``attention_flops``: the fused attention kernel's achievable rate (default: ``peak_flops``).
    """
    cases = list(cases)
    if not cases:
        raise InvalidValue("fit_floor needs at least one measured layer.")
    return _fit([_case_kernels(c, dtype) for c in cases], [c.layer_s for c in cases], peak_flops, bandwidth,
                gemm_bandwidth, attention_flops)


def _fit(kernel_lists, measured, peak, bandwidth, gemm_bandwidth=None, attention_peak=None) -> float:
    num = den = 0.0
    for ks, m in zip(kernel_lists, measured):
        r, n = _roofline_s(ks, peak, bandwidth, gemm_bandwidth, attention_peak), len(ks)
        num += (n / m) * (1 - r / m)
        den += (n / m) ** 2
    return max(0.0, float(num / den))


def _dataset_roofs(dataset, hw) -> tuple[dict[str, float], float, str | None, str]:
    """The achievable roofs to calibrate with: the dataset's own, else the catalog's for its device."""
    if dataset.roofs:
        return (dict(dataset.roofs["peak_flops_per_s"]), float(dataset.roofs["bandwidth_bytes_per_s"]),
                dataset.catalog, f"roofs measured with the layers ({dataset.source})")
    if hw is None:
        acc = hardware.get(dataset.catalog) if dataset.catalog else hardware.match_device(dataset.device)
        if acc is None:
            raise InvalidValue(f"the layers of {dataset.device!r} come without roofs, and no catalog entry matches "
                               "it; pass hw= an accelerator with achievable figures.")
    else:
        acc = hardware.get(hw)
    bandwidth = acc.memory_bandwidth(achievable=True)
    return dict(acc.achievable_flops), bandwidth, acc.key, f"achievable figures of {acc.name} in the catalog"


def attention_rate(dataset=None, hw=None) -> tuple[dict[str, float], str]:
    """The fused attention kernel's achievable rate for a layers dataset: ({precision: FLOP/s}, where from).

    In order: the large attention kernel ``roofkit measure`` times beside the layers
    (the dataset's ``attention``); else the catalog's achievable attention figure for
    ``hw`` or the dataset's device (the H200's comes from the shipped dataset's
    largest prefill attention, timed alone); else none ({}), and the calibration
    gives attention the matmul's rate, which is optimistic.
    """
    from ..catalogs.measured import load_layers  # deferred: catalogs.measured costs ~7 ms; the bound never reads it

    data = load_layers(dataset)
    measured = data.attention or {}
    if measured.get("flops") and measured.get("time_s"):
        return ({dtypes.canonical(measured.get("dtype", "bf16")): measured["flops"] / measured["time_s"]},
                f"attention: a causal SDPA of {measured.get('label', 'the dataset')} timed alone")
    key = hw or data.catalog
    if key is None:
        found = hardware.match_device(data.device)
        key = found.key if found else None
    acc = hardware.get(key) if key else None
    if acc is not None and acc.achievable_attention_flops:
        return dict(acc.achievable_attention_flops), f"attention: the achievable figure of {acc.name} in the catalog"
    return {}, "attention: no achievable rate measured, the matmul's used (optimistic)"


def calibrate(dataset=None, hw=None, dtype="bf16") -> Calibration:
    """Fit the floor on a layers dataset (default: the H200 one shipped with roofkit).

    ``dataset``: a :class:`~roofkit.measure.layers.LayerDataset`, a path (layers.json,
    its folder, or a profile saved by ``roofkit measure`` on a GPU) or None. The
    roofs are the ones measured with it, else the catalog's achievable figures
    for ``hw`` (or for the dataset's device); attention's rate comes from
    :func:`attention_rate`.
    """
    from ..catalogs.measured import load_layers  # deferred: catalogs.measured costs ~7 ms; the bound never reads it

    data = load_layers(dataset)
    peaks, bandwidth, catalog, roofs_from = _dataset_roofs(data, hw)
    key = dtypes.canonical(dtype)
    peak = peaks.get(key)
    if peak is None:
        raise InvalidValue(f"no achievable {key} matmul rate for {data.device}; "
                           f"there are: {', '.join(peaks)}.")
    attention, attention_from = attention_rate(data, hw or catalog)
    t0 = fit_floor(data.cases, peak, bandwidth, dtype, attention_flops=attention.get(key))
    return Calibration(device=data.device, peak_flops=peaks, bandwidth=bandwidth, floor_s=t0, catalog=catalog,
                       source=f"floor fitted on {len(data.cases)} layers of {data.source}; {roofs_from}; "
                              f"{attention_from}",
                       cases=len(data.cases), attention_flops=attention)


_DEFAULT: list[Calibration] = []


def default_calibration() -> Calibration:
    """The calibration fitted on the H200 dataset shipped with roofkit (bf16 layers), computed once."""
    if not _DEFAULT:
        _DEFAULT.append(calibrate())
    return _DEFAULT[0]


def achievable_bandwidth(acc) -> tuple[float, str]:
    """The bandwidth an estimate reads memory at on ``acc`` (bytes/s), and where it comes from.

    The catalog's achievable (measured) copy bandwidth where one is published; else the
    datasheet's times the share a copy reaches on the H200 measured with roofkit
    (:func:`default_calibration`): HBM parts reach a similar share of their datasheet rate.
    """
    if acc.has_achievable("bandwidth"):
        return acc.memory_bandwidth(achievable=True), "its achievable bandwidth"
    cal = default_calibration()
    measured = hardware.get(cal.catalog)
    share = cal.bandwidth / measured.memory_bandwidth()
    return (acc.memory_bandwidth() * share,
            f"its datasheet bandwidth x {share:.2f} (a copy's share on the measured {measured.name})")


# --- predictions --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpTime:
    """One op of the layer: its FLOPs and bytes (summed over its kernels), time and what bounds it."""

    name: str
    flops: float
    bytes: float
    time_s: float
    bound: str  # "compute", "memory", or "floor" (calibrated: the kernels' floors outweigh their roofline time)
    kernels: int = 1

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LayerTime:
    """A layer's predicted time, op by op."""

    model: str
    batch: int
    seq: int
    kv_seq: int | None
    dtype: str
    accelerator: str
    calibrated: bool
    time_s: float
    ops: list[OpTime]
    peak_flops: float
    bandwidth: float
    floor_s: float = 0.0
    kernels: int = 0
    fused_s: float | None = None  # calibrated: the same layer as one kernel per op (what fusion would win)
    roofs: str = "datasheet"  # or "achievable"
    notes: list[str] = field(default_factory=list)
    attention_flops: float | None = None  # the fused attention kernel's rate (None: the peak above)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["ops"] = [op.to_dict() for op in self.ops]
        return data


def _op_times(ks: list[Kernel], peak: float, bandwidth: float, floor: float,
              attention_peak: float | None = None) -> list[OpTime]:
    ops: dict[str, list[Kernel]] = {}
    for k in ks:
        ops.setdefault(k.op, []).append(k)
    out = []
    for name, group in ops.items():
        math_s = sum(k.flops / (attention_peak if attention_peak and k.kind == "attention" else peak) for k in group)
        memory_s = sum(k.bytes / bandwidth for k in group)
        roof_s = _roofline_s(group, peak, bandwidth, attention_peak=attention_peak)
        floors = floor * len(group)
        bound = "floor" if floors > roof_s else ("compute" if math_s > memory_s else "memory")
        out.append(OpTime(name, sum(k.flops for k in group), sum(k.bytes for k in group), roof_s + floors, bound,
                          len(group)))
    return out


def predict(model, batch, seq, kv_seq=None, hw="h100", dtype="bf16", calibrated=False,
            calibration: Calibration | None = None, weights_dtype=None, kv_dtype=None) -> LayerTime:
    """Predict one decoder layer's time on ``hw``; see the module's docstring for the two models.

    ``calibrated=True`` uses ``calibration`` (default: fitted on the shipped H200
    dataset) for the floor. Its roofs are used when it was measured on ``hw``
    (or says nothing of its device); otherwise ``hw``'s achievable figures in the
    catalog (NoAchievableFigure where none are published). Attention runs at its
    own achievable rate where one is known, else at the matmul's (a note says so).

    ``dtype`` sets the activations and the peak; ``weights_dtype`` and ``kv_dtype``
    (default: ``dtype``) the bytes of the weights and of the KV cache read
    (weight-only quantization: int4 weights, BF16 activations, BF16 peak).
    """
    shape = _shape(model)
    acc = hardware.get(hw)
    key = dtypes.canonical(dtype)
    if not isinstance(calibrated, bool):
        raise InvalidValue(f"calibrated must be True or False; got {calibrated!r}.")
    notes = []
    attention = None
    if not calibrated:
        if calibration is not None:
            raise InvalidValue("a calibration is used only with calibrated=True.")
        ks = kernels(shape, batch, seq, kv_seq, key, weights_dtype=weights_dtype, kv_dtype=kv_dtype)
        peak, bandwidth, floor, roofs = acc.peak(key), acc.memory_bandwidth(), 0.0, "datasheet"
        fused = None
    else:
        cal = calibration or default_calibration()
        if cal.catalog is not None and cal.catalog != acc.key:
            peak, bandwidth = acc.peak(key, achievable=True), acc.memory_bandwidth(achievable=True)
            notes.append(f"per-kernel floor measured on {cal.device}; roofs: achievable figures of {acc.name}")
            attention = acc.achievable_attention_flops.get(key)
        else:
            peak, bandwidth = cal.peak(key), cal.bandwidth
            attention = cal.attention_flops.get(key)
        floor, roofs = cal.floor_s, "achievable"
        ks = kernels(shape, batch, seq, kv_seq, key, eager=True, weights_dtype=weights_dtype, kv_dtype=kv_dtype)
        if attention is None and any(k.kind == "attention" and k.flops / peak > k.bytes / bandwidth for k in ks):
            notes.append(f"no achievable {key} attention rate for {acc.name}: the compute-bound attention kernel "
                         "runs at the matmul's achievable rate here, which it does not reach (optimistic)")
        fused = sum(t.time_s for t in _op_times(kernels(shape, batch, seq, kv_seq, key, weights_dtype=weights_dtype,
                                                        kv_dtype=kv_dtype), peak, bandwidth, floor, attention))
    ops = _op_times(ks, peak, bandwidth, floor, attention)
    return LayerTime(model=shape.key, batch=int(batch), seq=int(seq), kv_seq=None if kv_seq is None else int(kv_seq),
                     dtype=key, accelerator=acc.key, calibrated=calibrated, time_s=sum(op.time_s for op in ops),
                     ops=ops, peak_flops=peak, bandwidth=bandwidth, floor_s=floor, kernels=len(ks), fused_s=fused,
                     roofs=roofs, notes=notes, attention_flops=attention)


def predict_case(case, hw="h200", calibrated=True, calibration: Calibration | None = None) -> LayerTime:
    """Predict a measured case (a :class:`~roofkit.measure.layers.LayerCase`) of the dataset."""
    _case_kernels(case)  # its shape must be the catalog's
    return predict(case.model, case.batch, case.seq, None if case.causal else case.kv_seq, hw, "bf16",
                   calibrated, calibration)


def _ideal_achievable_s(case, calibration: Calibration) -> float:
    ks = kernels(case.model, case.batch, case.seq, None if case.causal else case.kv_seq, "bf16")
    return _roofline_s(ks, calibration.peak("bf16"), calibration.bandwidth,
                       attention_peak=calibration.attention_peak("bf16"))


def compare(dataset=None, calibration: Calibration | None = None, hw=None) -> list[dict]:
    """One row per measured case: measured, the plain roofline sum, the roofline sum at achievable roofs,
    the calibrated prediction, and their ratios (prediction / measurement)."""
    from ..catalogs.measured import load_layers  # deferred: catalogs.measured costs ~7 ms; the bound never reads it

    data = load_layers(dataset)
    cal = calibration or calibrate(data, hw)
    target = hw or cal.catalog
    if target is None:
        raise InvalidValue(f"no catalog entry for {data.device!r}: pass hw= for the datasheet roofs.")
    rows = []
    for case in data.cases:
        plain = predict_case(case, target, calibrated=False).time_s
        calibrated = predict_case(case, target, calibrated=True, calibration=cal).time_s
        achievable = _ideal_achievable_s(case, cal)
        rows.append({"label": case.label, "measured_s": case.layer_s, "plain_s": plain,
                     "achievable_roofline_s": achievable, "calibrated_s": calibrated,
                     "plain_ratio": plain / case.layer_s, "achievable_ratio": achievable / case.layer_s,
                     "calibrated_ratio": calibrated / case.layer_s})
    return rows


def leave_one_out(dataset=None, hw=None) -> list[dict]:
    """Refit the floor without each case in turn and predict that case: does the fit generalize?

    One row per case: ``label``, ``measured_s``, ``floor_s`` (fitted on the others),
    ``predicted_s`` and ``ratio`` (predicted / measured).
    """
    from ..catalogs.measured import load_layers  # deferred: catalogs.measured costs ~7 ms; the bound never reads it

    data = load_layers(dataset)
    full = calibrate(data, hw)
    peak, attention = full.peak("bf16"), full.attention_peak("bf16")
    rows = []
    for i, case in enumerate(data.cases):
        others = data.cases[:i] + data.cases[i + 1:]
        t0 = fit_floor(others, peak, full.bandwidth, attention_flops=attention) if others else full.floor_s
        cal = replace(full, floor_s=t0, cases=len(others))
        ks = _case_kernels(case)
        predicted = _roofline_s(ks, peak, full.bandwidth, attention_peak=attention) + t0 * len(ks)
        rows.append({"label": case.label, "measured_s": case.layer_s, "floor_s": cal.floor_s,
                     "predicted_s": predicted, "ratio": predicted / case.layer_s})
    return rows


def gemm_bandwidth_check(dataset=None, hw=None) -> dict:
    """Why does a decode GEMM (M = 1) timed alone reach only about 64% of the copy bandwidth?

    Two candidate explanations, checked against the measurements:

    * the per-kernel floor: a kernel that moves B bytes takes t0 + B/BW, so its
      apparent bandwidth B / (t0 + B/BW) is below BW, the more so the smaller it is;
    * a bandwidth of its own for the weight GEMMs: fitted with the floor on the
      whole layers (factor x the copy bandwidth, 0.5 to 1.5).

    Returns the measured fraction (median over the decode GEMM ops timed alone),
    the fraction the floor alone predicts for the same ops, ``alone_extra_s``
    (median over the decode cases of: the sum of the ops timed alone, minus the
    layer, per op), and the joint fit: ``factor``, ``floor_s``, and the RMS and
    largest relative error of the whole layers with that factor and with the
    floor alone (``factor`` = 1).
    """
    from ..catalogs.measured import load_layers  # deferred: catalogs.measured costs ~7 ms; the bound never reads it

    data = load_layers(dataset)
    cal = calibrate(data, hw)
    peak, bw, attention = cal.peak("bf16"), cal.bandwidth, cal.attention_peak("bf16")
    measured, floor_only, alone = [], [], []
    for case in data.cases:
        if case.decode:
            alone.append((sum(case.ops_s.values()) - case.layer_s) / len(case.ops_s))
        if not case.decode or case.batch > 1:
            continue
        for k in _case_kernels(case):
            if k.kind == "gemm":
                measured.append(k.bytes / case.ops_s[k.op] / bw)
                floor_only.append(k.bytes / (cal.floor_s + k.bytes / bw) / bw)

    lists, measured_s = [_case_kernels(c) for c in data.cases], [c.layer_s for c in data.cases]

    def worst(factor):
        t0 = _fit(lists, measured_s, peak, bw, factor * bw, attention)
        errors = [(_roofline_s(ks, peak, bw, factor * bw, attention) + t0 * len(ks)) / m - 1
                  for ks, m in zip(lists, measured_s)]
        return t0, float(np.sqrt(np.mean(np.square(errors)))), float(max(map(abs, errors)))

    factors = np.round(np.arange(0.5, 1.5001, 0.01), 2)
    fits = {float(f): worst(f) for f in factors}
    best = min(fits, key=lambda f: fits[f][1])
    return {"measured_fraction": float(np.median(measured)), "floor_predicted_fraction": float(np.median(floor_only)),
            "alone_extra_s": float(np.median(alone)),
            "factor": best, "floor_s": fits[best][0], "rms_error": fits[best][1], "max_error": fits[best][2],
            "floor_only_rms_error": fits[1.0][1], "floor_only_max_error": fits[1.0][2]}
