"""Figures of training cost and utilization (lessons 07 and 08).

    mfu_line(70e9, "h100", "bf16")          MFU against tokens/s per GPU, with the bands mfu_verdict judges by
    padding(128)                            useful / executed FLOPs of n x n x n products on 128-tiles
    cost_chain(training.estimate(...))      N, D -> C -> GPU-hours -> wall clock and dollars, with the run's numbers
    attention_undercount({...})             (6N + 12·L·H·d_h·s) / 6N against the sequence length s

Every number comes from :mod:`roofkit.training` and :mod:`roofkit.formulas`;
this module only draws. Each function returns a matplotlib ``Figure`` that
pyplot does not track (end a notebook cell with it; nothing is left open), or
draws on ``ax=`` when one is given.

    >>> from roofkit import plots_training, training
    >>> run = training.estimate("70B", "15T", hw="h100", mfu=0.4, gpus=8192, usd_per_gpu_hour=2)
    >>> words = " ".join(t.get_text() for t in plots_training.cost_chain(run).axes[0].texts)
    >>> "4.42 million" in words, "22.5 days" in words, "$8.85M" in words
    (True, True, True)
"""

from __future__ import annotations

import numpy as np

from ..catalogs import hardware
from ..perf import training
from ..errors import InvalidValue
from ..units import size
from . import style

__all__ = ["mfu_line", "padding", "cost_chain", "attention_undercount"]


def _count(x: float) -> str:
    """70e9 -> '70B', 1.75e12 -> '1.75T', 8192 -> '8,192'."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M")):
        if x >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:,.0f}"


def _short(accelerator) -> str:
    head, _, rest = accelerator.name.partition(" ")
    return rest if head in {"NVIDIA", "AMD", "Google", "Intel"} and rest else accelerator.name


def _axes(ax, size):
    if ax is not None:
        return ax
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import

    return Figure(figsize=size, layout="constrained").add_subplot()


def mfu_line(params, hw="h100", dtype="bf16", marks=(900, 3000), tokens_max=None, ax=None):
    """MFU = 6N x tokens/s / peak for one GPU, over a range of throughputs, on the verdict's bands.

    The bands are :data:`roofkit.training.MFU_TYPICAL` (what well-tuned runs
    report), :data:`~roofkit.training.MFU_SUSPICIOUS` to 100% (check the
    inputs) and above 100% (an input is wrong); ``marks`` are throughputs to
    point at; a dotted line marks the throughput of 100% MFU, P / 6N.
    """
    accelerator = hardware.get(hw)
    peak = accelerator.peak(dtype)
    N = float(size(params, "params"))
    cap = peak / training.flops_per_token(N)  # tokens/s at 100% MFU
    top = tokens_max or 1.15 * max(cap, *marks)
    throughput = np.linspace(top / 40, top, 300)
    low, high = training.MFU_TYPICAL
    ymax = max(150, 110 * training.mfu_from_throughput(N, top, peak))

    ax = _axes(ax, (8, 4))
    ax.axhspan(100 * low, 100 * high, color=style.PALETTE["green"], alpha=0.15, label="what well-tuned runs report")
    ax.axhspan(100 * training.MFU_SUSPICIOUS, 100, color=style.PALETTE["orange"], alpha=0.15,
               label="suspicious: check the inputs")
    ax.axhspan(100, ymax, color=style.LIMIT, alpha=0.12, label="impossible: an input is wrong")
    ax.plot(throughput, 100 * training.mfu_from_throughput(N, throughput, peak), color="0.1", lw=2,
            label="MFU = 6N × tokens/s ÷ peak")
    for tps in marks:
        u = training.mfu_from_throughput(N, tps, peak)
        ax.plot([tps], [100 * u], "o", color="0.1")
        ax.annotate(f"{tps:,} tokens/s: {u:.0%}", (tps, 100 * u), xytext=(-10, 8), textcoords="offset points",
                    ha="right")
    ax.axvline(cap, color=style.LIMIT, ls=":", lw=1)
    ax.annotate(f"100% at {cap:,.0f} tokens/s", (cap, 0.05 * ymax), xytext=(5, 0), textcoords="offset points",
                color=style.LIMIT)
    ax.set(xlim=(0, top), ylim=(0, ymax), xlabel="tokens/s per GPU", ylabel="MFU (%)",
           title=f"A {_count(N)} model on one {_short(accelerator)} ({dtype.upper()}): what a throughput implies")
    ax.legend(loc="upper left", fontsize=style.SIZE["small"])
    return ax.figure


def padding(tile=128, n_max=1024, mark=130, ax=None):
    """Useful / executed FLOPs of an n x n x n product run in tile x tile x tile blocks, n = 16 .. n_max."""
    sizes = np.arange(16, int(n_max) + 1)
    ax = _axes(ax, (8, 3.5))
    ax.plot(sizes, 100 * training.padding_efficiency(sizes, sizes, sizes, tile=tile), color=style.PALETTE["blue"],
            lw=1.5)
    if mark is not None:
        at = 100 * training.padding_efficiency(mark, mark, mark, tile=tile)
        ax.plot([mark], [at], "o", color="0.1")
        ax.annotate(f"{mark}: just past a tile edge" if mark % tile and mark % tile < tile / 4 else f"{mark}",
                    (mark, at), xytext=(10, 5), textcoords="offset points")
    ax.set(xlabel="n (an n × n × n product)", ylabel="useful / executed FLOPs (%)", xlim=(0, n_max), ylim=(0, 105),
           title=f"Padding to {tile} × {tile} × {tile} tiles: sizes just past a multiple of {tile} waste most")
    return ax.figure


def _money(x: float) -> str:
    return f"${x / 1e9:.3g}B" if x >= 1e9 else f"${x / 1e6:.3g}M" if x >= 1e6 else f"${x:,.0f}"


def cost_chain(run, ax=None):
    """What a training run costs, step by step: N, D -> C = 6ND -> GPU-hours -> wall clock, and -> dollars.

    ``run`` is a :class:`roofkit.training.TrainingEstimate` with an accelerator,
    a GPU count and a price (``training.estimate(N, D, hw=..., gpus=...,
    usd_per_gpu_hour=...)``). Each box holds a quantity with the run's value;
    each arrow says what the step divides or multiplies by.
    """
    missing = [name for name, value in (("hw", run.gpu_hours), ("gpus", run.wall_clock_days),
                                        ("usd_per_gpu_hour", run.cost_usd)) if value is None]
    if missing:
        raise InvalidValue(f"cost_chain needs an estimate with every step; this one was made without "
                           f"{', '.join(missing)}: give them to training.estimate(...).")
    ax = _axes(ax, (10, 3.6))
    ax.set(xlim=(0, 10), ylim=(0, 3.6))
    ax.axis("off")
    box = dict(boxstyle="round,pad=0.5", fc=style.TINT["compute"], ec=style.PALETTE["blue"], lw=1.2)
    result = dict(box, fc=style.TINT["memory"], ec=style.PALETTE["orange"])
    peak = run.peak_flops / 1e12
    boxes = {  # name: (x, y, text, box style)
        "inputs": (1.0, 1.8, f"N parameters, D tokens\n{_count(run.params)} × {_count(run.tokens)}", box),
        "flops": (3.55, 1.8, f"compute C = 6ND\n{run.flops:.3g} FLOP", box),
        "hours": (6.15, 1.8, f"GPU-hours\n{run.gpu_hours / 1e6:.3g} million", box),
        "days": (8.9, 2.9, f"wall clock\n{run.wall_clock_days:.3g} days", result),
        "cost": (8.9, 0.7, f"cost\n{_money(run.cost_usd)}", result),
    }
    drawn = {name: ax.text(x, y, text, ha="center", va="center", fontsize=style.SIZE["label"], bbox=look,
                           linespacing=1.5)
             for name, (x, y, text, look) in boxes.items()}
    steps = [  # from, to, what the arrow does, where its label goes (x, y)
        ("inputs", "flops", "× 6\n(2 forward + 4 backward\nper parameter per token)", (2.3, 1.05)),
        ("flops", "hours", f"÷ (MFU × P × 3600 s/h)\nMFU {run.mfu:.0%}, P = {peak:,.0f} TFLOP/s\n"
                           f"({run.accelerator.replace('NVIDIA ', '')}, {run.precision.upper()})", (4.85, 1.0)),
        ("hours", "days", f"÷ {run.gpus:,.0f} GPUs\n÷ 24 h/day", (7.25, 2.85)),
        ("hours", "cost", f"× ${run.usd_per_gpu_hour:g} per GPU-hour\n(an assumption)", (7.2, 0.7)),
    ]
    for a, b, label, (x, y) in steps:
        ax.annotate("", xy=(0, 0.5), xycoords=drawn[b], xytext=(1, 0.5), textcoords=drawn[a],
                    arrowprops=dict(arrowstyle="-|>", color="0.35", lw=1.3, shrinkA=8, shrinkB=8))
        ax.text(x, y, label, ha="center", va="center", fontsize=style.SIZE["aside"], color="0.25")
    ax.set_title("From a model and its data to days and dollars", fontsize=style.SIZE["title"])
    return ax.figure


def attention_undercount(shapes, seq_range=(1024, 2**20), marks=(8192, 131_072), causal=False, ax=None):
    """How much 6N under-counts a token's training FLOPs: (6N + 12·L·H·d_h·s) / 6N against s.

    ``shapes`` maps a label to (N, L, H, d_h): parameters, layers, heads, head
    dimension (PaLM's appendix B writes Q for d_h and T for the sequence length s). ``causal=True`` counts only the scores under the causal mask
    (:func:`roofkit.training.flops_per_token`). Vertical lines at ``marks``.
    """
    from matplotlib.ticker import FixedLocator, NullLocator  # deferred: matplotlib costs ~0.2 s at import

    seq = np.logspace(np.log10(seq_range[0]), np.log10(seq_range[1]), 200)
    ax = _axes(ax, (8, 4))
    top = 1.0
    for label, (params, L, H, d_h) in shapes.items():
        ratio = training.flops_per_token(params, L, H, d_h, seq, causal=causal) / training.flops_per_token(params)
        ax.plot(seq, ratio, lw=2, label=label)
        top = max(top, float(ratio.max()))
    for length in marks:
        ax.axvline(length, color="0.6", ls=":", lw=1)
        ax.annotate(f"{length / 1024:g}K", (length, 0.6), xycoords=("data", "axes fraction"), xytext=(4, 0),
                    textcoords="offset points", color="0.4")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(FixedLocator([v for v in (1, 1.5, 2, 3, 5, 10, 20, 30, 50, 100) if v <= 1.5 * top]))
    ax.yaxis.set_major_formatter(lambda v, _: f"{v:g}x")
    ax.yaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(lambda v, _: f"{v / 1024:g}K")
    ax.set(xlabel="sequence length s (tokens)", ylabel="(6N + 12·L·H·d_h·s) / 6N",
           title="How much 6N under-counts a token's training FLOPs (PaLM's count"
                 + (", causal half)" if causal else ", no causal saving)"))
    ax.grid(True, which="major", axis="y", color=style.GRID)
    ax.legend(loc="upper left")
    return ax.figure
