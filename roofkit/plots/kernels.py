"""Figures and tables of kernels: fusion, FlashAttention's tiles, measured against predicted, Amdahl (lessons 09, 10).

    launch_overhead(["bias_add", "gelu"])      a chain's time unfused and fused against its size: launches vs bytes
    flash_tiles()                              FlashAttention's tiles over the score matrix, and the online softmax
    flash_intensity("h100", "bf16", 128, ...)  FlashAttention's intensity against the sequence, ideal and tiled
    amdahl([0.1, 0.3, 0.5, 0.9])               the whole's speed-up against a part's, for parts of several shares
    profile(ops, measured_us, "h100")          kernels measured against their roofline: rows with a verdict band
    profile_table(rows)                        the same rows as text

Every number comes from :mod:`roofkit.formulas`, :mod:`roofkit.fusion` and
:mod:`roofkit.roofline`; this module only draws and tabulates. Figures are
matplotlib ``Figure`` objects that pyplot does not track (end a notebook cell
with one; nothing is left open), or are drawn on ``ax=`` when one is given.

    >>> from roofkit import plots_kernels
    >>> plots_kernels.band(73)
    'very strong'
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import formulas
from ..perf import fusion
from . import roofline
from ..catalogs import hardware
from ..errors import InvalidValue
from .roofline import _short
from . import style

__all__ = ["BANDS", "band", "ProfileRow", "profile", "profile_table", "launch_overhead", "flash_tiles",
           "flash_intensity", "amdahl"]

# The bands in which lesson 03 reads a kernel's % of roofline: (above this %, the band). A practitioners' rule of
# thumb, not a published standard: over 90, 70-90, 50-70, 30-50, 10-30, and 10 or less.
BANDS = ((90, "essentially optimal"), (70, "very strong"), (50, "common"), (30, "acceptable"), (10, "weak"),
         (0, "investigate"))


def _axes(ax, size):
    if ax is not None:
        return ax
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import

    return Figure(figsize=size, layout="constrained").add_subplot()


def band(percent) -> str:
    """The band of a kernel's % of roofline: over 90 'essentially optimal', over 70 up to 90 'very strong', then
    'common', 'acceptable', 'weak' (over 10 up to 30), and 10 or less 'investigate'."""
    pct = float(percent)
    if not math.isfinite(pct) or pct < 0:
        raise InvalidValue(f"percent of roofline must be a finite number >= 0; got {percent!r}.")
    return next(name for floor, name in BANDS if pct > floor or floor == 0)


@dataclass(frozen=True)
class ProfileRow:
    """One kernel held against its roofline: predicted and measured time, achieved FLOP/s, % of roofline."""

    name: str
    intensity: float
    bound: str
    predicted_s: float
    measured_s: float
    achieved_flops_per_s: float
    percent_of_roofline: float
    band: str

    def point(self):
        """(label, intensity, achieved FLOP/s): what ``roofline.plot(measured=[...])`` takes."""
        return (self.name, self.intensity, self.achieved_flops_per_s)


def profile(ops: dict, measured_us: dict, hw, dtype="bf16") -> list[ProfileRow]:
    """Each kernel of ``measured_us`` (name -> µs, names of ``ops``) against its roofline prediction."""
    accelerator = hardware.get(hw)
    unknown = sorted(set(measured_us) - set(ops))
    if unknown:
        raise InvalidValue(f"profile: no kernel named {', '.join(map(repr, unknown))}; the kernels are: "
                           f"{', '.join(ops)}.")
    rows = []
    for name, us in measured_us.items():
        placed = roofline.analyze(ops[name], accelerator, dtype)
        seconds = us * 1e-6
        achieved = placed.flops / seconds
        pct = roofline.percent_of_roofline(achieved, placed.intensity, accelerator.peak(dtype), accelerator.bandwidth)
        rows.append(ProfileRow(name, placed.intensity, placed.bound, placed.time_s, seconds, achieved, pct, band(pct)))
    return rows


def profile_table(rows: list[ProfileRow]) -> str:
    """The rows of :func:`profile` as a text table."""
    lines = [f"{'kernel':13s} {'FLOP/B':>8s} {'bound':>8s} {'predicted µs':>13s} {'measured µs':>12s} "
             f"{'% of roof':>10s}  band"]
    for r in rows:
        lines.append(f"{r.name:13s} {r.intensity:8.4g} {r.bound:>8s} {r.predicted_s * 1e6:13.1f} "
                     f"{r.measured_s * 1e6:12.0f} {r.percent_of_roofline:9.0f}%  {r.band}")
    return "\n".join(lines)


def launch_overhead(ops=("bias_add", "gelu"), hw="h100", dtype="bf16", sizes=(1e2, 1e10),
                    launch_overhead_s=fusion.DEFAULT_LAUNCH_OVERHEAD_S, kernel_floor_s=0.0, ax=None):
    """Predicted time of a chain of ops unfused and fused against its size n, with the fixed costs per kernel.

    Each version takes max(CPU issue time, GPU time) (:meth:`roofkit.fusion.ChainCost.time`): the CPU
    spends ``launch_overhead_s`` per launch, the GPU ``kernel_floor_s`` per kernel plus its roofline
    time. Horizontal lines mark the fixed costs; a vertical line the size at which the unfused chain's
    memory time equals them.
    """
    accelerator = hardware.get(hw)
    n = np.logspace(np.log10(sizes[0]), np.log10(sizes[1]), 33)
    chains = [fusion.chain(list(ops), n=k, bytes_per_element=dtype) for k in n]
    times = [c.time(accelerator, dtype, launch_overhead_s, kernel_floor_s) for c in chains]
    one = chains[0]
    seconds_per_element = one.unfused.bytes / one.n / accelerator.bandwidth  # memory time, unfused chain
    fixed = max(launch_overhead_s, kernel_floor_s)  # the larger fixed cost per kernel sets the floor
    crossing = one.launches_unfused * fixed / seconds_per_element

    ax = _axes(ax, (8, 4.5))
    names = " + ".join(ops)
    k = one.launches_unfused
    ax.loglog(n, [t["unfused_s"] for t in times], color=style.PALETTE["blue"], lw=2, label=f"{names}, {k} kernels")
    ax.loglog(n, [t["fused_s"] for t in times], color=style.PALETTE["orange"], lw=2, label="fused, 1 kernel")
    us = 1e6
    for count, color in ((k, style.PALETTE["blue"]), (1, style.PALETTE["orange"])):
        ax.axhline(count * launch_overhead_s, color=color, ls="--", lw=1,
                   label=f"CPU issuing {count} launch{'es' if count > 1 else ''} "
                         f"({count} x {launch_overhead_s * us:.2g} µs)")
        if kernel_floor_s > 0:
            ax.axhline(count * kernel_floor_s, color=color, ls=":", lw=1.2,
                       label=f"GPU floor of {count} kernel{'s' if count > 1 else ''} "
                             f"({count} x {kernel_floor_s * us:.2g} µs)")
    ax.axvline(crossing, color="0.7", lw=1)
    ax.text(crossing / 1.3, 1e-3, "memory time =\nfixed costs", color="0.4", fontsize=style.SIZE["text"], ha="right")
    ax.set(xlabel=f"elements n ({dtype.upper()})", ylabel=f"predicted time on the {_short(accelerator.name)} (s)",
           title="Small tensors pay a fixed cost per kernel, large ones for their bytes")
    ax.legend(loc="upper left", fontsize=style.SIZE["small"])
    return ax.figure


def flash_tiles(tiles=6, causal=True, row_tile=3, scores_per_block=6, seed=0, scores=None):
    """FlashAttention's work as a picture: the tiles of the score matrix, and the online softmax of one row.

    Left: the s x s_kv scores cut into ``tiles`` query tiles (rows) and as many
    K/V blocks (columns); one query tile stays on chip while the K and V
    blocks stream past it; with ``causal`` the tiles above the diagonal are
    skipped. Right: one row of scores taken block by block, with the running
    maximum and running sum that :func:`roofkit.fusion.online_softmax` keeps.
    ``scores`` is that row (as many scores as the highlighted tile's blocks hold,
    ``scores_per_block`` each); without it, a random row drawn with ``seed``.
    """
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import
    from matplotlib.patches import FancyArrowPatch, Rectangle  # deferred: matplotlib costs ~0.2 s at import

    if not (isinstance(tiles, int) and 2 <= tiles <= 12 and isinstance(row_tile, int) and 0 <= row_tile < tiles):
        raise InvalidValue(f"flash_tiles draws 2 to 12 tiles and highlights one of them; got tiles={tiles!r}, "
                           f"row_tile={row_tile!r}.")
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    left, right = fig.subplots(1, 2, width_ratios=(1, 1.25))

    # --- the tiles ---
    left.set(xlim=(-1.6, tiles + 0.2), ylim=(tiles + 1.5, -0.9), aspect="equal")
    left.axis("off")
    for i in range(tiles):
        for j in range(tiles):
            skipped = causal and j > i
            active = i == row_tile and not skipped
            left.add_patch(Rectangle((j, i), 1, 1,
                                     fc=style.BOUND["memory"] if active else "0.97" if skipped else style.TINT["compute strong"],
                                     ec="white" if not skipped else "0.85", lw=1.5, hatch="//" if skipped else None))
    left.add_patch(Rectangle((0, row_tile), tiles, 1, fill=False, ec=style.ON_CHIP, lw=2))
    left.text(-0.15, row_tile + 0.5, "Q tile i\n(on chip)", ha="right", va="center", fontsize=style.SIZE["text"],
              color=style.ON_CHIP)
    left.text(tiles / 2, -0.2, "K and V blocks j, read from HBM in turn →", ha="center", va="bottom",
              fontsize=style.SIZE["text"])
    left.text(-0.15, tiles / 2 + (1.3 if row_tile < tiles / 2 else -1.3), "query tiles ↓", ha="right", va="center",
              fontsize=style.SIZE["text"])
    last = row_tile if causal else tiles - 1
    left.add_patch(FancyArrowPatch((0.5, row_tile + 0.5), (last + 0.5, row_tile + 0.5), arrowstyle="-|>",
                                   mutation_scale=12, color="0.15", lw=1.2))
    note = ("each tile: S = Q K^T and P = softmax on chip,\nO += P V; S and P never reach HBM."
            + ("\nHatched: above the causal diagonal, skipped." if causal else ""))
    left.text(tiles / 2, tiles + 0.25, note, ha="center", va="top", fontsize=style.SIZE["aside"], color="0.25")
    left.set_title("Tiles: K and V are read once per query tile", fontsize=style.SIZE["label"])

    # --- the online softmax of one row ---
    blocks = (row_tile + 1) if causal else tiles
    if scores is None:
        rng = np.random.default_rng(seed)
        x = np.round(rng.normal(0, 1.5, blocks * scores_per_block) + np.linspace(0, 2.5, blocks * scores_per_block), 2)
    else:
        x = np.asarray(scores, dtype=float)
        if x.ndim != 1 or x.size != blocks * scores_per_block:
            raise InvalidValue(f"flash_tiles: scores must be one row of {blocks} blocks x {scores_per_block} = "
                               f"{blocks * scores_per_block} scores (the highlighted tile's blocks); got "
                               f"{x.size if x.ndim == 1 else x.shape}.")
    state = fusion.online_softmax(x, scores_per_block)
    positions = np.arange(x.size)
    colors = [(style.TINT["memory strong"], style.BOUND["memory"])[(k // scores_per_block) % 2] for k in positions]
    right.bar(positions, x, color=colors, width=0.85)
    for j, (m, l) in enumerate(zip(state.maxima, state.sums)):
        a, b = j * scores_per_block - 0.5, (j + 1) * scores_per_block - 0.5
        right.plot([a, b], [m, m], color=style.ON_CHIP, lw=2, label="running max m" if j == 0 else None)
        right.text((a + b) / 2, m + 0.35, f"m = {m:.2f}\nℓ = {l:.3g}", ha="center", va="bottom",
                   fontsize=style.SIZE["small"],
                    color=style.ON_CHIP)
        if j:
            right.axvline(a, color="0.8", lw=0.8)
    right.set(xlabel=f"the scores of one query row, {blocks} blocks of {scores_per_block}", ylabel="score z",
              ylim=(min(0.0, x.min()) - 0.5, x.max() + 2.2))
    right.set_title("Online softmax: per block, update the running max m and sum ℓ\n"
                    "ℓ ← ℓ·e^(m_old − m) + Σ e^(z − m); at the end p = e^(z − m) / ℓ", fontsize=style.SIZE["label"])
    right.legend(loc="upper left", fontsize=style.SIZE["small"])
    return fig


def flash_intensity(hw="h100", dtype="bf16", head_dim=128, on_chip=(), seq_range=(512, 2**20), heads=1, ax=None):
    """FlashAttention's arithmetic intensity against the sequence length: ideal, and tiled.

    The ideal count reads Q, K and V and writes O once: its intensity grows
    like s/b. ``on_chip`` maps a label to an on-chip memory size M in bytes
    (:func:`roofkit.formulas.attention_fused` with ``on_chip_bytes``): K and V
    are re-read once per query tile and the intensity levels off. The
    accelerator's ridge is drawn for comparison.
    """
    accelerator = hardware.get(hw)
    seq = np.unique(np.logspace(np.log10(seq_range[0]), np.log10(seq_range[1]), 120).round())
    ax = _axes(ax, (8, 4.5))
    ideal = formulas.attention_fused(1, heads, seq, head_dim, dtype).intensity
    ax.loglog(seq, ideal, color="0.15", lw=2, label="ideal: Q, K, V and O cross HBM once")
    for i, (label, M) in enumerate(dict(on_chip).items()):
        tiled = formulas.attention_fused(1, heads, seq, head_dim, dtype, on_chip_bytes=M).intensity
        ax.loglog(seq, tiled, color=style.CYCLE[i % len(style.CYCLE)], lw=2, label=label)
        ax.annotate(f"{tiled[-1]:,.0f}", (seq[-1], tiled[-1]), xytext=(4, 0), textcoords="offset points",
                    va="center", fontsize=style.SIZE["small"], color=style.CYCLE[i % len(style.CYCLE)])
    ridge = accelerator.ridge(dtype)
    ax.axhline(ridge, color=style.LIMIT, ls=":", lw=1.2)
    ax.annotate(f"{_short(accelerator.name)} {dtype.upper()} ridge: {ridge:.0f} FLOP/byte", (seq[-1], ridge),
                xytext=(-2, 4), textcoords="offset points", color=style.LIMIT, fontsize=style.SIZE["text"], ha="right")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(lambda v, _: f"{v / 1024:g}K" if v >= 1024 else f"{v:g}")
    ax.set(xlabel="sequence length s (queries = keys)", ylabel="arithmetic intensity (FLOP/byte)",
           title=f"FlashAttention, d_h = {head_dim}, {dtype.upper()}: tiles make the intensity level off")
    ax.legend(loc="upper left", fontsize=style.SIZE["small"])
    return ax.figure


def amdahl(shares=(0.1, 0.3, 0.5, 0.9), mark=(0.1, 2), speedups=(1, 100), ax=None):
    """Amdahl's law: the whole's speed-up S against the part's s, one curve per share p, each flattening at 1/(1-p).

    ``mark`` = (p, s) puts a point on the curve of p at s.
    """
    from matplotlib.ticker import FuncFormatter, NullFormatter  # deferred: matplotlib costs ~0.2 s at import

    s = np.logspace(np.log10(speedups[0]), np.log10(speedups[1]), 101)
    ax = _axes(ax, (8, 4.5))
    for i, p in enumerate(shares):
        ax.loglog(s, [fusion.amdahl(p, x) for x in s], color=style.CYCLE[i % len(style.CYCLE)],
                  label=f"part = {p:.0%} of the time")
        ax.axhline(fusion.amdahl(p, math.inf), color=style.CYCLE[i % len(style.CYCLE)], ls=":", lw=1)
    if mark is not None:
        p, x = mark
        ax.plot([x], [fusion.amdahl(p, x)], "ko", ms=5)
        ax.annotate(f"{p:.0%} part, {x:g}x faster", xy=(x, fusion.amdahl(p, x)), xytext=(x * 1.3, 1.2),
                    fontsize=style.SIZE["text"],
                    arrowprops=dict(arrowstyle="-", color="0.4"))
    ticks = [1] + [fusion.amdahl(p, math.inf) for p in shares]
    ax.set_yticks(ticks, [f"{t:.3g}" for t in ticks], minor=False)
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set(xlabel="speed-up of the part, s", ylabel="speed-up of the whole, S (dotted: 1 / (1 - p))",
           title="Amdahl's law: however fast the part gets, the whole gains at most 1 / (1 - p)")
    ax.legend(loc="upper left")
    return ax.figure
