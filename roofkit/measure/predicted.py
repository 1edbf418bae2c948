"""Predicted against measured: roofkit's models held against what a GPU did, as tables and figures.

The data is a layers dataset (:mod:`roofkit.measure.layers`: the H200 one shipped
with roofkit, measured on one card on 2026-11-30 with PyTorch 2.11 and CUDA
events, the L2 flushed before each run; or your own from ``roofkit measure`` on
a GPU), its ``oracle.json`` GEMM sweep, and the ``gpu`` block of a profile.

* :func:`layer_rows`, :func:`op_rows`: each measured layer (each op) beside its
  predictions: the plain roofline sum with the datasheet roofs, the same at the
  achievable roofs, with the per-kernel floor, and the calibrated model;
* :func:`plot_predicted`: measured against predicted on log-log axes, per op
  and per layer, with the y = x line: datasheet roofs against calibrated;
* :func:`gap_bars`: where each layer's gap goes, one bar per case;
* :func:`sweep_rows`, :func:`plot_sweep`: an M x N x K GEMM as M (the batch)
  grows, measured against the roofline, turning compute-bound;
* :func:`gpu_table`, :func:`plot_gpu`: a GPU profile's achievable roofs against
  the datasheet, and its kernels on the roofline.

    >>> rows = layer_rows()
    >>> rows[2]["label"], round(rows[2]["measured_s"] * 1e6), round(rows[2]["plain_s"] * 1e6)
    ('llama-2-7b decode, batch 1, 2048 cached', 171, 91)
"""

from __future__ import annotations

import re

import numpy as np

from .. import formulas
from ..catalogs import hardware
from ..perf import layertime
from ..plots import roofline
from ..errors import InvalidValue
from .kernels import KernelResult
from .layers import load_layers, shipped

__all__ = ["layer_rows", "op_rows", "plot_predicted", "gap_bars", "sweep_rows", "plot_sweep", "gpu_table",
           "plot_gpu", "GAPS"]

# The three gaps between the datasheet roofline sum and a measured layer, in the order they are added.
GAPS = (("plain_s", "datasheet roofline sum"), ("achievable_s", "+ achievable roofs"),
        ("floored_s", "+ a floor t0 per kernel"), ("calibrated_s", "+ the kernels eager PyTorch runs"))


def _setup(dataset, calibration, hw):
    data = load_layers(dataset)
    cal = calibration or layertime.calibrate(data, hw)
    target = hw or cal.catalog
    if target is None:
        raise InvalidValue(f"no catalog entry for {data.device!r}: pass hw= for the datasheet roofs.")
    return data, cal, target


def layer_rows(dataset=None, calibration=None, hw=None) -> list[dict]:
    """One row per measured layer: its case, ``measured_s`` (and ``graph_s``, the same layer replayed as a
    CUDA graph) and the predictions ``plain_s`` (the sum of max(T_math, T_mem), datasheet roofs),
    ``no_overlap_s`` (the sum of T_math + T_mem, datasheet roofs), ``achievable_s``, ``floored_s`` (one
    kernel per op, each with the floor) and ``calibrated_s`` (the kernels eager PyTorch runs), in seconds."""
    data, cal, target = _setup(dataset, calibration, hw)
    acc = hardware.get(target)
    rows = []
    for case, compared in zip(data.cases, layertime.compare(data, cal, target)):
        calibrated = layertime.predict_case(case, target, calibrated=True, calibration=cal)
        ideal = layertime.kernels(case.model, case.batch, case.seq, None if case.causal else case.kv_seq, "bf16")
        no_overlap = sum(roofline.time_bounds(k.flops, k.bytes, acc.peak("bf16"), acc.memory_bandwidth())[1]
                         for k in ideal)
        rows.append({"label": case.label, "model": case.model, "batch": case.batch, "seq": case.seq,
                     "kv_seq": case.kv_seq, "decode": case.decode, "measured_s": case.layer_s,
                     "graph_s": case.layer_graph_s, "plain_s": compared["plain_s"], "no_overlap_s": no_overlap,
                     "achievable_s": compared["achievable_roofline_s"], "floored_s": calibrated.fused_s,
                     "calibrated_s": calibrated.time_s, "kernels": calibrated.kernels})
    return rows


def op_rows(dataset=None, calibration=None, hw=None) -> list[dict]:
    """One row per op of every measured layer: ``measured_s`` (the op timed alone, after its own L2
    flush), ``plain_s`` and ``calibrated_s``."""
    data, cal, target = _setup(dataset, calibration, hw)
    rows = []
    for case in data.cases:
        plain = {op.name: op.time_s for op in layertime.predict_case(case, target, calibrated=False).ops}
        calibrated = {op.name: op.time_s for op in
                      layertime.predict_case(case, target, calibrated=True, calibration=cal).ops}
        for name, seconds in case.ops_s.items():
            if name in plain:
                rows.append({"label": case.label, "op": name, "decode": case.decode, "measured_s": seconds,
                             "plain_s": plain[name], "calibrated_s": calibrated[name]})
    return rows


def _versus(ax, rows, band, title):
    """Measured (x) against predicted (y), µs, log-log: datasheet hollow, calibrated filled."""
    measured = [r["measured_s"] * 1e6 for r in rows]
    predicted = [r[k] * 1e6 for r in rows for k in ("plain_s", "calibrated_s")]
    lo, hi = min(measured) / 1.6, max(measured + predicted) * 1.6
    bottom = min(lo, min(predicted) / 1.6)
    ax.fill_between([lo, hi], [lo * (1 - band), hi * (1 - band)], [lo * (1 + band), hi * (1 + band)],
                    color="0.85", lw=0, label=f"within ±{band:.0%}", gid="band")
    ax.plot([lo, hi], [lo, hi], color="0.3", lw=1, label="y = x: predicted = measured", gid="y=x")
    for decode, marker, phase in ((False, "s", "prefill"), (True, "o", "decode")):
        mine = [r for r in rows if r["decode"] == decode]
        x = [r["measured_s"] * 1e6 for r in mine]
        ax.scatter(x, [r["plain_s"] * 1e6 for r in mine], marker=marker, facecolors="white", edgecolors="C3",
                   s=36, zorder=3, label=f"{phase}, datasheet roofline sum", gid=f"plain-{phase}")
        ax.scatter(x, [r["calibrated_s"] * 1e6 for r in mine], marker=marker, color="C0", s=30, zorder=4,
                   label=f"{phase}, calibrated", gid=f"calibrated-{phase}")
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(bottom, hi), title=title,
           xlabel="measured (µs)", ylabel="predicted (µs)")
    _no_minor_ticks(ax)
    ax.grid(True, which="major", color="0.9")


def plot_predicted(dataset=None, calibration=None, hw=None, band=0.15):
    """Measured against predicted, per op (timed alone) and per layer, for prefill and decode, with the
    datasheet roofline sum and the calibrated model; the y = x line and a band of ±``band``."""
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.4 s at import

    data, cal, target = _setup(dataset, calibration, hw)
    fig = Figure(figsize=(12, 5.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    _versus(left, op_rows(data, cal, target), band, "per op (each timed alone)")
    _versus(right, layer_rows(data, cal, target), band, "per layer (the ops back to back)")
    handles, labels = right.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3, fontsize=8)
    fig.suptitle(f"{data.device}, {data.date}: measured against predicted "
                 f"(below the line: the prediction is too fast)", fontsize=11)
    return fig


def gap_bars(rows, title=None):
    """One bar per layer row (from :func:`layer_rows`): the datasheet roofline sum, then what the
    achievable roofs, the per-kernel floor and the eager kernels add, with the measurement marked;
    each bar as a fraction of its measured time."""
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.4 s at import

    if not rows:
        raise InvalidValue("gap_bars() needs at least one row from layer_rows().")
    fig = Figure(figsize=(10, 1.3 + 0.42 * len(rows)), layout="constrained")
    ax = fig.add_subplot()
    for i, r in enumerate(rows):
        left = 0.0
        for colour, (key, label) in enumerate(GAPS):
            width = r[key] / r["measured_s"] - left
            ax.barh(i, width, left=left, color=f"C{colour}", label=label if i == 0 else None, gid=key)
            left += width
        ax.plot([1, 1], [i - 0.42, i + 0.42], color="black", lw=2, label="measured" if i == 0 else None)
        ax.text(max(left, 1) + 0.02, i, f"{r['measured_s'] * 1e6:.0f} µs measured", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)), [r["label"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.35)
    ax.set_xlabel("predicted time / measured time")
    ax.set_title(title or "Where the gap goes: each correction added to the datasheet roofline sum", fontsize=10)
    fig.legend(loc="outside lower center", ncols=5, fontsize=8)
    return fig


_SWEEP = re.compile(r"M=(\d+) (\d+)x(\d+)")


def _gemm_predictions(m, n, k, acc, floor_s) -> dict:
    """The roofline's times for an m x n x k BF16 GEMM: datasheet, achievable, achievable + floor."""
    cost = formulas.gemm(m, n, k, "bf16")
    F, Q = float(cost.flops), float(cost.bytes)
    achievable = roofline.time_bounds(F, Q, acc.peak("bf16", achievable=True), acc.memory_bandwidth(achievable=True))[0]
    return {"intensity": F / Q, "flops": F,
            "plain_s": roofline.time_bounds(F, Q, acc.peak("bf16"), acc.memory_bandwidth())[0],
            "achievable_s": achievable, "floored_s": achievable + floor_s}


def sweep_rows(oracle=None, hw="h200", calibration=None) -> list[dict]:
    """The oracle's M x N x K BF16 GEMMs (``batch gemm``): ``m``, ``measured_s`` and the predictions
    ``plain_s`` (datasheet roofs), ``achievable_s`` and ``floored_s`` (achievable roofs plus the floor)."""
    data = shipped("oracle.json") if oracle is None else oracle
    acc = hardware.get(hw)
    floor = (calibration or layertime.default_calibration()).floor_s
    rows = []
    for case in data.get("cases", []):
        found = _SWEEP.search(case.get("label", ""))
        if not found:
            continue
        m, n, k = (int(v) for v in found.groups())
        row = {"m": m, "n": n, "k": k, "measured_s": float(case["time_s"])} | _gemm_predictions(m, n, k, acc, floor)
        row["achieved_flops_per_s"] = row["flops"] / row["measured_s"]
        rows.append(row)
    if not rows:
        raise InvalidValue("the oracle holds no 'batch gemm ... M=... NxK' cases to plot.")
    return rows


def plot_sweep(oracle=None, hw="h200", calibration=None):
    """Time of the M x N x K GEMM against M: measured, and the roofline's predictions, with the batch at
    which the roofline says it turns compute-bound (datasheet and achievable ridge)."""
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.4 s at import

    rows = sweep_rows(oracle, hw, calibration)
    acc = hardware.get(hw)
    floor = (calibration or layertime.default_calibration()).floor_s
    n, k = rows[0]["n"], rows[0]["k"]
    grid = np.unique(np.round(np.geomspace(rows[0]["m"], rows[-1]["m"], 97)).astype(int))
    lines = [_gemm_predictions(int(m), n, k, acc, floor) for m in grid]
    fig = Figure(figsize=(8.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    for key, style, label in (("plain_s", dict(color="C3", ls="--"), "roofline, datasheet roofs"),
                              ("achievable_s", dict(color="C1", ls="-."), "roofline, achievable roofs"),
                              ("floored_s", dict(color="C0", ls="-"), "achievable roofs + the floor t0")):
        ax.plot(grid, [p[key] * 1e6 for p in lines], label=label, gid=key, **style)
    ax.scatter([r["m"] for r in rows], [r["measured_s"] * 1e6 for r in rows], color="black", zorder=4,
               label="measured", gid="measured")
    for ridge, style, which in ((acc.ridge("bf16"), ":", "datasheet"),
                                (acc.peak("bf16", achievable=True) / acc.memory_bandwidth(achievable=True), "-.",
                                 "achievable")):
        crossing = roofline.crossing_size(lambda b: formulas.gemm(b, n, k, "bf16").intensity, ridge)
        ax.axvline(crossing, color="0.5", ls=style, lw=1, label=f"turns compute-bound, {which} ridge: M = {crossing}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter("{x:g}")
    ax.yaxis.set_major_formatter("{x:g}")
    ax.yaxis.set_minor_formatter("{x:g}")
    ax.tick_params(axis="y", which="minor", labelsize=8)
    ax.set_xlabel("M, the batch (rows of the activation)")
    ax.set_ylabel("time (µs)")
    ax.set_title(f"An M x {n} x {k} BF16 GEMM on {roofline._short(acc.name)} as M grows", fontsize=10)
    ax.grid(True, which="major", color="0.9")
    ax.legend(fontsize=8)
    return fig


def gpu_table(gpu) -> str:
    """A profile's ``gpu`` block as text: the best matmul per precision and the copy bandwidth,
    each beside the catalog's datasheet figure (when the GPU is in the catalog)."""
    acc = hardware.get(gpu["catalog"]) if gpu.get("catalog") else None
    lines = [f"{gpu['name']}: {'measured' :>12} {'datasheet':>12} {'share':>6}"]
    for precision, rate in gpu["peak_flops_per_s"].items():
        sheet = acc.peak(precision) if acc and precision in acc.peak_flops else None
        lines.append(f"  {precision + ' matmul':<18} {rate / 1e12:>7.4g} TFLOP/s " +
                     (f"{sheet / 1e12:>7.4g} TFLOP/s {rate / sheet:>6.0%}" if sheet else ""))
    bw = gpu["bandwidth_bytes_per_s"]
    lines.append(f"  {'copy':<18} {bw / 1e12:>7.4g} TB/s    " +
                 (f"{acc.bandwidth / 1e12:>7.4g} TB/s    {bw / acc.bandwidth:>6.0%}" if acc else ""))
    return "\n".join(lines)


# where each kernel's label goes, in points from its dot, and its alignment (the kernel set of roofkit measure)
_LABELS = {"add": ((8, -14), "left"), "reduction": ((-8, 8), "right"), "gemv": ((-8, 14), "right"),
           "softmax": ((8, -14), "left"), "gemm": ((0, -16), "center")}


def plot_gpu(gpu, precision="bf16", where=("HBM",)):
    """A profile's GPU kernels (those whose data lived in ``where``) on the catalog's datasheet roofline,
    beside the measured roofs (the best matmul and the copy)."""
    kernels = [k for k in (KernelResult.from_dict(k) for k in gpu.get("kernels", [])) if k.where in where]
    roof = roofline.Roof("measured: best matmul, copy", gpu["peak_flops_per_s"][precision],
                         gpu["bandwidth_bytes_per_s"])
    measured = [roofline.Kernel(k.kernel, k.intensity, k.achieved_flops_per_s,
                                label_offset=_LABELS.get(k.kernel, ((8, -14), ""))[0]) for k in kernels]
    places = " and ".join(where)
    fig = roofline.plot(gpu.get("catalog") or (), precision, measured=measured, roofs=(roof,),
                        title=f"{gpu['name']}: kernels in {places} against the datasheet roofline ({precision.upper()})")
    for text in fig.axes[0].texts:  # align the labels away from their neighbours
        name = text.get_text().split(" (")[0]
        if name in _LABELS:
            text.set_horizontalalignment(_LABELS[name][1])
    _no_minor_ticks(fig.axes[0])
    return fig


def _no_minor_ticks(ax) -> None:
    """Every decade is labelled; unlabelled minor ticks on log axes cost half the drawing time."""
    from matplotlib.ticker import NullLocator  # deferred: matplotlib costs ~0.2 s at import

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_minor_locator(NullLocator())
