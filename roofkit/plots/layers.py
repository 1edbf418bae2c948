"""A decoder layer's kernels on a roofline: the op table and the figures of the capstone (lesson 11).

:func:`roofkit.roofline.analyze` places one cost on one roofline; this module
places a whole layer (:func:`place`), prints it one row per kernel
(:func:`table`) and draws it: the kernels on rooflines (:func:`rooflines`),
where a layer's time goes under several designs (:func:`time_bars`), and decode
throughput against the batch (:func:`decode_throughput`).

    >>> from roofkit import layerview, models
    >>> ops = models.get("llama-3-8b").layer_ops(1, 4096)       # a causal prefill of 4096 tokens
    >>> placed = layerview.place(ops, "h100", "bf16")
    >>> placed["mlp.up"].bound, placed["residual1"].bound
    ('compute', 'memory')
    >>> round(layerview.total(placed) * 1e6)                     # the sum of the kernels' max(T_math, T_mem), µs
    2152
    >>> print(layerview.table(placed).splitlines()[0])
    op            GFLOP       MB   FLOP/B  bound        µs  share

The times are the roofline's lower bounds with the catalog's (datasheet) roofs,
each kernel max(F/P, Q/B), summed because the kernels run one after another.
For the same layer held against a real GPU, see :mod:`roofkit.layertime` and
:mod:`roofkit.measure.predicted`.
"""

from __future__ import annotations

from .. import formulas
from ..catalogs import hardware
from . import roofline
from ..errors import InvalidValue
from . import style

__all__ = ["GEMMS", "FAMILY", "place", "total", "table", "dots", "rooflines", "time_bars", "decode_rate",
           "decode_throughput"]

# The weight GEMMs: the ops that hold the layer's matrix parameters (2 FLOPs per weight per token).
GEMMS = ("qkv", "out", "mlp.up", "mlp.gate", "mlp.down")
# How an op is called on a plot; an op not listed is a weight GEMM.
FAMILY = {"norm1": "norms", "norm2": "norms", "residual1": "residuals", "residual2": "residuals",
          "attn": "attention", "attn.qk": "attention", "attn.softmax": "softmax", "attn.pv": "attention",
          "mlp.act": "SwiGLU"}
# The three parts a layer's time is split into by time_bars: (label, which ops)
PARTS = (("weight GEMMs", lambda name: name in GEMMS), ("attention", lambda name: name.startswith("attn")),
         ("memory-bound glue", lambda name: name not in GEMMS and not name.startswith("attn")))


def place(ops, hw="h100", dtype="bf16", peak=None, bandwidth=None) -> dict:
    """Every op of a layer on one roofline: {name: :class:`~roofkit.roofline.Placement`}.

    The roofs are ``hw``'s datasheet figures, unless ``peak`` (FLOP/s in ``dtype``) or
    ``bandwidth`` (bytes/s) replace them: for instance the achievable ones,

        >>> h100 = hardware.get("h100")
        >>> ops = {"gemm": formulas.gemm(4096, 4096, 4096, "bf16")}
        >>> round(total(place(ops, h100, "bf16", peak=h100.peak("bf16", achievable=True))) * 1e6)
        173
    """
    if not isinstance(ops, dict) or not ops:
        raise InvalidValue(f"place() needs the layer's ops as a non-empty dict {{name: cost}}; got {ops!r}.")
    if peak is not None or bandwidth is not None:
        from dataclasses import replace  # cheap, no circle: may move to the top

        from .. import dtypes  # cheap, no circle: may move to the top
        from ..units import positive  # cheap, no circle: may move to the top

        acc = hardware.get(hw)
        key = dtypes.canonical(dtype)
        acc.peak(key)  # the chip must have the precision at all
        hw = replace(acc, peak_flops={**acc.peak_flops, key: float(positive(peak, "peak")) if peak is not None
                                      else acc.peak(key)},
                     bandwidth=float(positive(bandwidth, "bandwidth")) if bandwidth is not None else acc.bandwidth)
    return {name: roofline.analyze(cost, hw, dtype) for name, cost in ops.items()}


def total(placed, names=None) -> float:
    """Seconds: the sum of the placed ops' lower bounds ``time_s`` (all of them, or those in ``names``)."""
    return float(sum(p.time_s for name, p in placed.items() if names is None or name in names))


def table(placed) -> str:
    """One row per op: GFLOP, MB, FLOP/byte, bound, µs, and its share of the summed lower bounds."""
    whole = total(placed)
    rows = [f"{'op':<10} {'GFLOP':>8} {'MB':>8} {'FLOP/B':>8}  {'bound':<7} {'µs':>8} {'share':>6}"]
    for name, p in placed.items():
        rows.append(f"{name:<10} {p.flops / 1e9:>8.4g} {p.bytes / 1e6:>8.4g} {p.intensity:>8.4g}  "
                    f"{p.bound:<7} {p.time_s * 1e6:>8.4g} {p.time_s / whole:>6.1%}")
    return "\n".join(rows)


def dots(ops, within=1.6) -> list[tuple[str, object]]:
    """(label, cost) per op for :func:`roofkit.roofline.plot`; ops within a factor ``within`` in intensity
    share one label (one of their names per family: "GEMMs", "norms", "attention", ...)."""
    ordered = sorted(ops.items(), key=lambda item: float(item[1].intensity))
    groups = [[ordered[0]]]
    for name, cost in ordered[1:]:
        if float(cost.intensity) > within * float(groups[-1][0][1].intensity):
            groups.append([])
        groups[-1].append((name, cost))
    out = []
    for group in groups:
        names = list(dict.fromkeys(FAMILY.get(name, "GEMMs") for name, _ in group))
        label = " · ".join(names[:2]) + ("\n" + " · ".join(names[2:]) if names[2:] else "")
        out += [(label if i == 0 else "", cost) for i, (_, cost) in enumerate(group)]
    return out


def _spread(kernels, near=6.0):
    """Labels of neighbouring groups alternate above and below their dots, from the right (the
    rightmost above), so that they do not overlap."""
    out, last, above = [], None, True
    for label, cost in sorted(kernels, key=lambda item: -float(item[1].intensity)):
        x = float(cost.intensity)
        if label:
            above = not above if last is not None and x * near > last else True
            last = x
        offset = (-6, 8) if above else (6, -16)
        out.append(roofline.Kernel(label, x, label_offset=offset if label else None))
    return out


def rooflines(panels, xlim=(0.01, 1e4), ylim=(1e10, 4e15), width=6.5, height=5):
    """Side-by-side rooflines, one per panel ``(hw, dtype, ops, title)``, each op a dot on its roof."""
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.4 s at import

    panels = list(panels)
    if not panels:
        raise InvalidValue("rooflines() needs at least one panel (hw, dtype, ops, title).")
    fig = Figure(figsize=(width * len(panels), height), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    from matplotlib.ticker import NullLocator  # deferred: matplotlib costs ~0.2 s at import

    for ax, (hw, dtype, ops, title) in zip(axes, panels):
        roofline.plot(hw, dtype, kernels=_spread(dots(ops)), ax=ax, xlim=xlim, ylim=ylim, title=title)
        for axis in (ax.xaxis, ax.yaxis):  # every decade is labelled; unlabelled minor ticks cost half the drawing
            axis.set_minor_locator(NullLocator())
    return fig


def time_bars(designs, title=None, unit="µs"):
    """One horizontal bar per design ({name: placed ops}), split into weight GEMMs, attention and the
    memory-bound glue, each part's time written on it and the total at the end."""
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.4 s at import

    if not designs:
        raise InvalidValue("time_bars() needs at least one design {name: placed ops}.")
    scale = {"µs": 1e6, "ms": 1e3, "s": 1.0}[unit]
    fig = Figure(figsize=(9, 0.8 + 0.8 * len(designs)), layout="constrained")
    ax = fig.add_subplot()
    ends = []
    for row, placed in enumerate(designs.values()):
        left = 0.0
        for colour, (part, member) in enumerate(PARTS):
            width = sum(p.time_s for name, p in placed.items() if member(name)) * scale
            ax.barh(row, width, left=left, color=style.CYCLE[colour % len(style.CYCLE)],
                    label=part if row == 0 else None, gid=part)
            if width > 0.04 * total(placed) * scale:
                ax.text(left + width / 2, row, f"{width:.0f}", ha="center", va="center", color="white",
                        fontsize=style.SIZE["text"])
            left += width
        ends.append(left)
    for row, end in enumerate(ends):
        ax.text(end + 0.01 * max(ends), row, f"{end:.0f} {unit}", va="center", fontsize=style.SIZE["text"])
    ax.set_yticks(range(len(designs)), list(designs))
    ax.invert_yaxis()
    ax.set_xlim(0, 1.18 * max(ends))
    ax.set_xlabel(f"predicted time of one layer ({unit}, sum of the kernels' lower bounds)")
    if title:
        ax.set_title(title)
    ax.legend(loc="lower right", fontsize=style.SIZE["small"])
    return fig


def decode_rate(model, batch, context, hw="h100", dtype="bf16", skip=()) -> tuple[float, float]:
    """(tokens/s, bytes of weights + KV cache) of decoding ``batch`` sequences with ``context`` cached tokens.

    One step makes ``batch`` tokens and runs every layer once, each kernel at its roofline
    lower bound (the embedding and output layers left out); ``skip`` leaves ops out of the
    time (``("attn",)``: as if the KV cache cost nothing to read). The memory is the
    model's weights and the cache the attention kernels read, layers x the ``attn`` bytes.
    """
    from .. import dtypes  # cheap, no circle: may move to the top
    from ..catalogs import models  # cheap, no circle: may move to the top

    shape = models.get(model)
    ops = shape.layer_ops(batch, 1, context, dtype)
    seconds = shape.layers * total(place(ops, hw, dtype), [n for n in ops if n not in skip])
    memory = shape.params * dtypes.bytes_per_element(dtype) + shape.layers * float(ops["attn"].bytes)
    return batch / seconds, memory


def decode_throughput(model, batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), contexts=(512, 2048, 8192),
                      hw="h100", dtype="bf16"):
    """Tokens/s against the batch, one line per context; a hollow marker where the weights and the KV
    cache do not fit in ``hw``'s memory; dashed, the weights alone (no cache read); dotted, the batch at
    which a d x d weight GEMM turns compute-bound."""
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.4 s at import

    from ..catalogs import models  # cheap, no circle: may move to the top

    shape, acc = models.get(model), hardware.get(hw)
    fig = Figure(figsize=(8.5, 4.6), layout="constrained")
    ax = fig.add_subplot()
    for colour, context in enumerate(contexts):
        points = [decode_rate(shape, b, context, hw, dtype) for b in batches]
        rate = [r for r, _ in points]
        fits = [m <= acc.capacity_bytes for _, m in points]
        ax.plot(batches, rate, color=style.CYCLE[colour % len(style.CYCLE)], label=f"context {context:,}")
        ax.scatter([b for b, ok in zip(batches, fits) if ok], [r for r, ok in zip(rate, fits) if ok],
                   color=style.CYCLE[colour % len(style.CYCLE)], zorder=3, gid="fits")
        ax.scatter([b for b, ok in zip(batches, fits) if not ok], [r for r, ok in zip(rate, fits) if not ok],
                   facecolors="white", edgecolors=style.CYCLE[colour % len(style.CYCLE)], zorder=3, gid="does-not-fit")
    weights_only = [decode_rate(shape, b, 1, hw, dtype, skip=("attn",))[0] for b in batches]
    ax.plot(batches, weights_only, color="0.4", ls="--", label="weights only (KV cache not read)")
    ax.axvline(roofline.decode_batch_to_compute_bound(shape.d_model, acc, dtype), color="0.5", ls=":",
               label="a d x d weight GEMM turns compute-bound")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter("{x:g}")
    ax.set_xlabel("batch (sequences decoded together)")
    ax.set_ylabel("tokens/s (all sequences)")
    ax.set_title(f"{shape.name} decode on {roofline._short(acc.name)}, {dtype.upper()}, roofline bound "
                 "(hollow: does not fit in memory)", fontsize=style.SIZE["label"])
    ax.grid(True, color=style.GRID)
    ax.legend(fontsize=style.SIZE["small"])
    return fig
