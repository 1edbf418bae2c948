"""Figures and tables of many-GPU training: what a collective costs, where a step's time goes, what a GPU holds.

    collective_plot("all-reduce", [("hgx-h100", 8), ("hgx-h100", "ib-ndr", 8, 16)])
    step_plot(plans)         one bar per plan: compute | exposed communication | bubble | optimizer, with its MFU
    memory_plot(plans)       one bar per plan: weights | gradients | optimizer states | activations, and the HBM
    plan_table(plans)        the same numbers as text, one row per plan
    link_table(keys)         links as their sources quote them, and per direction
    published_plot(rows)     predicted against published step time for published runs, bound and calibrated
    published_table(rows)    the same as text
    PlanBars(mem_ax, step_ax, capacity, name)   memory_plot and step_plot of one plan, moved in place (the explorer)

Every number comes from :mod:`roofkit.comms` and :mod:`roofkit.parallel`; this
module only draws. Figures are matplotlib ``Figure`` objects that pyplot does
not track (end a notebook cell with one; nothing is left open), or are drawn
on ``ax=`` when given.

    >>> from roofkit import parallel, plots_parallel
    >>> plan = parallel.plan("llama-3-70b", "h100", 1024, 4 * 2**20, 8192, tp=8, pp=4, zero=1, sequence_parallel=True,
    ...                      calibrated=True)
    >>> print(plots_parallel.plan_table([plan]))
    layout                         GPUs  tok/GPU  GB/GPU  fits  step (s)  compute  comm.  bubble    MFU
    TP 8 · PP 4 · DP 32 · ZeRO-1   1024    4,096    24.0   yes      5.35      67%    17%     16%  34.8%
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import InvalidValue
from . import style

__all__ = ["Curve", "collective_plot", "step_plot", "memory_plot", "plan_table", "link_table", "published_plot",
           "published_table", "STEP_PARTS", "MEMORY_PARTS", "PlanBars"]

# (attribute or memory key, label, colour, hatch)
STEP_PARTS = (("compute_s", "compute", style.BOUND["compute"], ""),
              ("communication_s", "exposed communication", style.BOUND["communication"], ""),
              ("bubble_s", "pipeline bubble", style.PARTS["bubble"], "//"),
              ("optimizer_s", "optimizer", style.PALETTE["olive"], ""),
              ("experts_host_s", "experts one by one (estimate)", style.PALETTE["grey"], ".."))
MEMORY_PARTS = (("weights", "weights", style.PARTS["weights"]), ("grads", "gradients", style.PARTS["gradients"]),
                ("optimizer", "optimizer states", style.PARTS["optimizer"]),
                ("activations", "activations", style.PARTS["activations"]),
                ("gathered", "gathered weights (ZeRO-3)", style.PARTS["gathered"]))


@dataclass(frozen=True)
class Curve:
    """One line of :func:`collective_plot`: ``gpus`` on ``link``, or ``gpus`` x ``nodes`` with ``inter`` between."""

    link: str
    gpus: int
    inter: str | None = None
    nodes: int = 1
    label: str | None = None
    algorithm: str = "ring"  # 'auto' lets NCCL's best algorithm and protocol change with the size
    calibrated: bool = False

    def result(self, collective: str, size: float):
        """The :class:`roofkit.comms.Collective` (or ``Hierarchical``) of ``collective`` on ``size`` bytes."""
        from ..perf import comms  # deferred: only the collectives' figure computes with comms (and its catalogs)

        if self.inter is None or self.nodes == 1:
            algorithm = self.algorithm if comms.canonical(collective) == "all-reduce" else (
                "auto" if self.algorithm == "auto" else "ring")
            return comms.collective(collective, size, self.gpus, self.link, algorithm, calibrated=self.calibrated)
        algorithm = self.algorithm if self.algorithm in ("auto", "ring", "tree") else "auto"
        return comms.hierarchical(collective, size, self.gpus, self.nodes, self.link, self.inter,
                                  algorithm=algorithm, calibrated=self.calibrated)

    def times(self, collective: str, sizes):
        """Seconds at each size (the best protocol, and with 'auto' the best algorithm, at each)."""
        import numpy as np  # deferred: numpy costs ~0.1 s at import

        return np.array([self.result(collective, float(s)).time_s for s in np.asarray(sizes, dtype=float)])

    def _bound(self, collective: str, size: float) -> bool:
        return self.result(collective, size).latency_bound

    def _crossing(self, collective: str, inside: float, outside: float, steps: int = 40) -> float:
        """The last size from ``inside`` toward ``outside`` with the verdict of ``inside`` (bisected, log scale)."""
        verdict = self._bound(collective, inside)
        near, far = math.log(inside), math.log(outside)
        for _ in range(steps):
            if abs(far - near) < 1e-6:  # a relative precision of 0.0001%
                break
            mid = (near + far) / 2
            if self._bound(collective, math.exp(mid)) == verdict:
                near = mid
            else:
                far = mid
        return math.exp(near)

    def latency_bound_ranges(self, collective: str, sizes) -> list:
        """[(from, to)]: the sizes whose latency terms outweigh the transfer, each edge found exactly.

        A curve whose algorithm changes with the size ('auto') may be latency-bound in more than one range:
        NCCL's tree below a megabyte or so, then NVLS, whose switch latency is larger, past its own switch.
        """
        import numpy as np  # deferred: numpy costs ~0.1 s at import

        sizes = [float(s) for s in np.asarray(sizes, dtype=float)]
        flags = [self._bound(collective, s) for s in sizes]
        ranges, start = [], None
        for i, (size, flag) in enumerate(zip(sizes, flags)):
            if flag and start is None:
                start = size if i == 0 else self._crossing(collective, size, sizes[i - 1])
            if flag and (i + 1 == len(sizes) or not flags[i + 1]):
                end = size if i + 1 == len(sizes) else self._crossing(collective, size, sizes[i + 1])
                ranges.append((start, end))
                start = None
        return ranges

    def latency_bound_below(self, collective: str, sizes) -> float:
        """S*: the largest size at which the latency terms still outweigh the transfer (exact, not a grid point)."""
        ranges = self.latency_bound_ranges(collective, sizes)
        return ranges[-1][1] if ranges else float(min(sizes)) / 2

    def title(self) -> str:
        from ..catalogs import links  # deferred: only the link table and the collectives read the link catalog

        if self.label:
            return self.label
        if self.inter is None or self.nodes == 1:
            how = "NCCL's fastest algorithm" if self.algorithm == "auto" else f"one {self.algorithm}"
            return f"{self.gpus} GPUs, {how} over {_short(links.get(self.link).name)}"
        return (f"{self.gpus * self.nodes} GPUs: {self.nodes} nodes of {self.gpus}, "
                f"{_short(links.get(self.inter).name)} between them")


def _short(name: str) -> str:
    """'InfiniBand NDR (400 Gb/s port)' -> 'InfiniBand NDR'."""
    return name.split(" (")[0]


def _curve(item) -> Curve:
    if isinstance(item, Curve):
        return item
    if isinstance(item, dict):
        return Curve(**item)
    if isinstance(item, tuple) and len(item) in (2, 4):
        return Curve(*item) if len(item) == 2 else Curve(item[0], item[2], item[1], item[3])
    if isinstance(item, tuple) and len(item) == 3 and isinstance(item[2], str):  # (link, gpus, algorithm)
        return Curve(item[0], item[1], algorithm=item[2])
    raise InvalidValue(f"a curve is (link, gpus), (intra, inter, gpus_per_node, nodes), a dict or a Curve; "
                       f"got {item!r}.")


def _bytes(x: float) -> str:
    """2160000 -> '2.16 MB'."""
    for scale, unit in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g} B"


def collective_plot(collective="all-reduce", curves=(("hgx-h100", 8),), sizes=(1e3, 1e10), ax=None, title=None):
    """Time of ``collective`` against message size S, one line per curve, its latency-bound part marked.

    Each curve is ``(link, gpus)`` (one NVLink domain, or one network) or
    ``(intra, inter, gpus_per_node, nodes)`` (hierarchical, :func:`roofkit.comms.hierarchical`).
    Where the α terms are the larger part of the time, the line carries a broad band: the
    latency-bound region, its edges found exactly (:meth:`Curve.latency_bound_ranges`). The dot is
    S*, the largest size still latency-bound; below it a curve whose algorithm changes with the size
    ('auto') may leave the band and come back. Log-log axes, S in bytes.
    """
    import numpy as np  # deferred: numpy costs ~0.1 s at import
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import
    from matplotlib.ticker import EngFormatter, NullLocator  # deferred: matplotlib costs ~0.2 s at import

    from ..perf import comms  # deferred: only the collectives' figure computes with comms (and its catalogs)

    name = comms.canonical(collective)
    chosen = [_curve(c) for c in curves]
    if not chosen:
        raise InvalidValue("collective_plot needs at least one curve.")
    lo, hi = sizes
    if not 0 < lo < hi:
        raise InvalidValue(f"sizes must be (smallest, largest) bytes with 0 < smallest < largest; got {sizes!r}.")
    if ax is None:
        ax = Figure(figsize=(8.5, 5), layout="constrained").add_subplot()
    S = np.geomspace(lo, hi, 49)
    for i, curve in enumerate(chosen):
        colour = style.CYCLE[i % len(style.CYCLE)]
        times = curve.times(name, S)
        ranges = curve.latency_bound_ranges(name, S)
        ax.plot(S, times, color=colour, lw=1.6, gid="collective-time", label=curve.title())
        for start, end in ranges:  # each latency-bound range, under a highlighter band
            inside = S[(S > start) & (S < end)]
            edge = np.concatenate([[start], inside, [end]])
            ax.plot(edge, curve.times(name, edge), color=colour, lw=7, alpha=0.18, solid_capstyle="butt",
                    gid="latency-bound region")
        star = ranges[-1][1] if ranges else None
        if star is not None and lo < star < hi:
            t_star = float(curve.times(name, [star])[0])
            ax.plot([star], [t_star], "o", color=colour, ms=6, gid="latency-bound size")
            ax.annotate(f"S* = {_bytes(star)}", (star, t_star), xytext=(-6, 7), textcoords="offset points",
                        ha="right", fontsize=style.SIZE["small"], color=colour)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("message size S")
    ax.set_ylabel("time")
    ax.xaxis.set_major_formatter(EngFormatter(unit="B"))
    ax.yaxis.set_major_formatter(EngFormatter(unit="s"))
    for axis in (ax.xaxis, ax.yaxis):  # decades only: minor ticks of a log axis cost a second to lay out
        axis.set_minor_locator(NullLocator())
    ax.grid(True, which="major", color=style.GRID, lw=0.6)
    ax.set_title(title or f"{name}: T = steps·α + f·S/β, the best protocol at each size")
    ax.legend(loc="upper left", fontsize=style.SIZE["small"], framealpha=0.9,
              title="broad band: latency-bound (the α terms outweigh S/β); dot: S*, the largest such S",
              title_fontsize=style.SIZE["small"])
    return ax.figure


def _labels(plans, labels):
    if labels is None:
        return [p.layout for p in plans]
    labels = list(labels)
    if len(labels) != len(plans):
        raise InvalidValue(f"{len(labels)} labels for {len(plans)} plans; give one label per plan.")
    return labels


def _plans(plans) -> list:
    chosen = [plans] if hasattr(plans, "step_time_s") else list(plans)
    if not chosen:
        raise InvalidValue("at least one plan is needed (roofkit.parallel.plan).")
    return chosen


def _headed_legend(ax, title: str, ncols: int):
    """The legend above the bars with ``title`` as its heading: one block, so neither can cover the other."""
    legend = ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), fontsize=style.SIZE["small"], frameon=False,
                       ncols=ncols, borderaxespad=0.3, title=title, title_fontsize=style.SIZE["label"],
                       alignment="left", borderpad=0.0)
    ax.grid(True, axis="x", color=style.GRID, lw=0.6)
    ax.set_axisbelow(True)
    return legend


def _finish(ax, title: str, ncols: int):
    """A bar chart's light vertical grid, its legend above the bars headed by its title; the figure."""
    _headed_legend(ax, title, ncols)
    return ax.figure


def _bars_axes(n: int, ax):
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import

    if ax is None:
        ax = Figure(figsize=(9, 1.2 + 0.55 * n), layout="constrained").add_subplot()
    return ax


def step_plot(plans, labels=None, share=False, ax=None, title=None):
    """One horizontal bar per plan: compute, exposed communication and pipeline bubble, with MFU and step time.

    ``share=True`` draws each bar as parts of its own step (0 to 100%), to
    compare layouts whose steps differ in length.
    """
    chosen = _plans(plans)
    names = _labels(chosen, labels)
    ax = _bars_axes(len(chosen), ax)
    rows = range(len(chosen))[::-1]  # the first plan on top
    for attribute, label, colour, hatch in STEP_PARTS:
        left = [sum(getattr(p, a) for a, *_ in STEP_PARTS[:[x[0] for x in STEP_PARTS].index(attribute)])
                for p in chosen]
        width = [getattr(p, attribute) for p in chosen]
        if share:
            left = [x / p.step_time_s for x, p in zip(left, chosen)]
            width = [x / p.step_time_s for x, p in zip(width, chosen)]
        if attribute == "experts_host_s" and not any(width):  # the estimate's, for mixtures of experts only
            continue
        ax.barh(list(rows), width, left=left, color=colour, hatch=hatch, edgecolor="white", height=0.6,
                label=label, gid=attribute)
    end = max(1.0 if share else p.step_time_s for p in chosen)
    for y, p in zip(rows, chosen):
        x = 1.0 if share else p.step_time_s
        ax.text(x + end * 0.01, y, f"MFU {p.mfu:.0%}, {p.step_time_s:.3g} s", va="center", fontsize=style.SIZE["small"])
    ax.set_yticks(list(rows), names, fontsize=style.SIZE["small"])
    ax.set_xlim(0, end * 1.22)
    if share:
        from matplotlib.ticker import PercentFormatter  # deferred: matplotlib costs ~0.2 s at import

        ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_xlabel("share of the step")
    else:
        ax.set_xlabel("time per step (s)")
    return _finish(ax, title or "Where a training step's time goes", ncols=4)


def memory_plot(plans, labels=None, ax=None, title=None):
    """One horizontal bar per plan: weights, gradients, optimizer states and activations per GPU, in GB.

    The bars are the bound (the least the layout must hold, on the pipeline stage
    that holds most); a black tick marks the estimate, activations as eager layers
    keep them. A dashed line marks the accelerator's memory (the first plan's); a
    bound above it is labelled "does not fit".
    """
    chosen = _plans(plans)
    names = _labels(chosen, labels)
    ax = _bars_axes(len(chosen), ax)
    rows = range(len(chosen))[::-1]
    left = [0.0] * len(chosen)
    for key, label, colour in MEMORY_PARTS:
        width = [p.memory.get(key, 0.0) / 1e9 for p in chosen]
        if key == "gathered" and not any(width):
            continue
        ax.barh(list(rows), width, left=left, color=colour, edgecolor="white", height=0.6, label=label, gid=key)
        left = [a + b for a, b in zip(left, width)]
    estimates = [p.memory_estimate_bytes / 1e9 for p in chosen]
    marked = [(y, e) for y, e, total in zip(rows, estimates, left) if e > total * 1.001]
    if marked:
        ax.plot([e for _, e in marked], [y for y, _ in marked], ls="none", marker="|", ms=18, mew=2.2,
                color="black", label="estimate: every op's inputs kept", gid="estimate")
    capacity = chosen[0].memory_capacity_bytes
    end = max(left + [e for _, e in marked] + ([capacity / 1e9] if capacity else []))
    ax.set_xlim(0, end * (1.4 if marked else 1.25))  # before the limit's label, which reads it
    if capacity:
        from ..catalogs import hardware  # deferred: the hardware catalog imports numpy at its top

        acc = hardware.get(chosen[0].accelerator)
        reported = acc.usable_memory_bytes is not None and abs(capacity - acc.usable_memory_bytes) < 1
        label = (f"{capacity / 1e9:.3g} GB per GPU, as the card reports it" if reported
                 else f"{capacity / 1e9:.3g} GB per GPU (datasheet)")
        style.limit_line(ax, capacity / 1e9, f"{acc.name.removeprefix(acc.vendor + ' ')}: {label}",
                         y=len(chosen) - 0.45, gid="capacity")
    for y, p, total, estimate in zip(rows, chosen, left, estimates):
        verdict = "" if p.fits is None else (" fits" if p.fits else " does not fit")
        more = f"; estimate {estimate:.3g}" if estimate > total * 1.001 else ""
        ax.text(max(total, estimate) + end * 0.01, y, f"{total:.3g} GB{verdict}{more}", va="center",
                fontsize=style.SIZE["small"],
                color=style.LIMIT if p.fits is False else "black",
                bbox=dict(facecolor="white", edgecolor="none", pad=1, alpha=0.85))
    ax.set_yticks(list(rows), names, fontsize=style.SIZE["small"])
    ax.set_ylim(-0.6, len(chosen) - 0.1)
    ax.set_xlabel("memory per GPU (GB)")
    parts = len(ax.get_legend_handles_labels()[1])
    return _finish(ax, title or "What each GPU holds", ncols=2 if parts <= 4 else 3)


def plan_table(plans, labels=None) -> str:
    """One line per plan: layout, GPUs, tokens per GPU, memory per GPU, fits, step time, its three parts, MFU."""
    chosen = _plans(plans)
    names = _labels(chosen, labels)
    width = max(28, *(len(n) for n in names))
    lines = [f"{'layout':<{width}}  {'GPUs':>5}  {'tok/GPU':>7}  {'GB/GPU':>6}  {'fits':>4}  {'step (s)':>8}  "
             f"{'compute':>7}  {'comm.':>5}  {'bubble':>6}  {'MFU':>5}"]
    for name, p in zip(names, chosen):
        fits = "-" if p.fits is None else ("yes" if p.fits else "no")
        lines.append(f"{name:<{width}}  {p.gpus:>5}  {p.tokens_per_gpu:>7,.0f}  {p.memory_per_gpu_bytes / 1e9:>6.1f}  "
                     f"{fits:>4}  "
                     f"{p.step_time_s:>8.3g}  {p.compute_s / p.step_time_s:>7.0%}  "
                     f"{p.communication_s / p.step_time_s:>5.0%}  {p.bubble_s / p.step_time_s:>6.0%}  {p.mfu:>5.1%}")
    return "\n".join(lines)


def link_table(keys=None) -> str:
    """Links as their sources quote them, and the bandwidth per direction for one GPU that roofkit uses."""
    from ..catalogs import links  # deferred: only the link table and the collectives read the link catalog

    rows = links.table(keys)
    width = max(len(r["name"]) for r in rows)
    quoted = max(len(r["quoted"]) for r in rows)
    lines = [f"{'link':<{width}}  {'as quoted':<{quoted}}  {'per direction, one GPU':>22}  {'α':>6}"]
    for r in rows:
        lines.append(f"{r['name']:<{width}}  {r['quoted']:<{quoted}}  {r['per_direction_gb_s']:>17.4g} GB/s  "
                     f"{r['latency_us']:>4.2g} µs")
    return "\n".join(lines)




def published_table(rows) -> str:
    """One line per published run: published step time, predicted / published for the bound and calibrated.

    ``rows`` as :func:`roofkit.parallel.published.compare` returns them.
    """
    width = max(len(r["case"]) for r in rows)
    lines = [f"{'run':<{width}}  {'set':<8}  {'published':>9}  {'bound':>6}  {'calibrated':>10}"]
    for r in rows:
        lines.append(f"{r['case']:<{width}}  {r['set']:<8}  {r['published_s']:>8.3g}s  {r['bound_ratio']:>6.2f}  "
                     f"{r['calibrated_ratio']:>10.2f}")
    return "\n".join(lines)


def published_plot(rows, ax=None, title=None, ring=None):
    """Predicted against published step time, log-log: one hollow marker per run for the bound, one filled for
    the calibrated estimate, the fitting set and the held-out set in two colours.

    On the diagonal a prediction is exact; the band is within 1.2x. A bound must
    lie on or below the diagonal (no run is faster than its bound). ``ring``:
    (label, cases), a ring around the calibrated marker of each run named in
    ``cases`` (a kind of run to tell apart, e.g. the mixtures of experts).
    """
    import numpy as np  # deferred: numpy costs ~0.1 s at import
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import

    if not rows:
        raise InvalidValue("published_plot needs at least one run (roofkit.parallel.published.compare).")
    if ax is None:
        ax = Figure(figsize=(7.5, 6), layout="constrained").add_subplot()
    pub = np.array([r["published_s"] for r in rows])
    lo, hi = pub.min() / 2, pub.max() * 2
    grid = np.geomspace(lo, hi, 50)
    ax.fill_between(grid, grid / 1.2, grid * 1.2, color="0.92", lw=0, gid="band", label="within 1.2x")
    ax.plot(grid, grid, color="0.4", lw=1, gid="diagonal", label="predicted = published")
    for which, colour in (("fitting", style.PALETTE["blue"]), ("held-out", style.PALETTE["orange"])):
        chosen = [r for r in rows if r["set"] == which]
        if not chosen:
            continue
        x = [r["published_s"] for r in chosen]
        ax.scatter(x, [r["bound_ratio"] * r["published_s"] for r in chosen], marker="v", facecolors="none",
                   edgecolors=colour, s=30, lw=1, gid=f"bound-{which}", label=f"bound, {which} runs")
        ax.scatter(x, [r["calibrated_ratio"] * r["published_s"] for r in chosen], marker="o", color=colour, s=22,
                   gid=f"calibrated-{which}", label=f"calibrated, {which} runs")
    if ring is not None:
        label, cases = ring
        marked = [r for r in rows if r["case"] in set(cases)]
        if marked:
            ax.scatter([r["published_s"] for r in marked], [r["calibrated_ratio"] * r["published_s"] for r in marked],
                       marker="o", facecolors="none", edgecolors="0.15", s=70, lw=1, gid="ring",
                       label=f"calibrated, {label}")
    from matplotlib.ticker import NullLocator  # deferred: matplotlib costs ~0.2 s at import

    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo / 4, hi)
    for axis in (ax.xaxis, ax.yaxis):  # decades only: minor ticks of a log axis cost a second to lay out
        axis.set_minor_locator(NullLocator())
    ax.set_xlabel("published step time (s)")
    ax.set_ylabel("roofkit's step time (s)")
    ax.grid(True, which="major", color=style.GRID, lw=0.6)
    ax.legend(loc="upper left", fontsize=style.SIZE["small"], framealpha=0.9)
    ax.set_title(title or "Published training runs: the bound below the diagonal, the estimate on it",
                 fontsize=style.SIZE["label"])
    return ax.figure


class PlanBars:
    """:func:`memory_plot` and :func:`step_plot` of one plan, for a figure that follows sliders.

    Drawn once on fixed axes, then moved in place by :meth:`update`: memory
    per GPU as a share of the accelerator's memory, 0 to 200% (a plan that
    needs more runs off the right edge; its total is written in GB at the
    end), and the step as shares of itself (compute, exposed communication,
    bubble: 0 to 100%) with its length and the MFU written beside it, so that
    the axes stay put whatever the layout and the accelerator.
    :meth:`label` writes the accelerator's name and memory beside its line (a
    figure that keeps its axes draws it once per accelerator). ``artists`` are
    what :meth:`update` changes; axes, legends and titles are drawn once.
    """

    END = 2.0  # the memory axis runs to twice the accelerator's memory

    def __init__(self, memory_ax, step_ax, capacity_bytes: float | None = None, accelerator: str = ""):
        from matplotlib.ticker import PercentFormatter  # deferred: matplotlib costs ~0.2 s at import

        self.memory = [memory_ax.barh([0], [0.0], color=colour, edgecolor="white", height=0.6, label=label,
                                      gid=key)[0] for key, label, colour in MEMORY_PARTS]
        # the accelerator's memory, drawn over the bars, as memory_plot draws it
        self.artists = [*self.memory, style.limit_mark(memory_ax, 1.0, gid="capacity")]
        self.total = memory_ax.text(0, 0, "", va="center", fontsize=style.SIZE["small"],
                                    bbox=dict(facecolor="white", edgecolor="none", pad=1, alpha=0.85))
        memory_ax.set_yticks([0], [""])
        memory_ax.set_xlim(0, self.END)
        memory_ax.set_ylim(-0.6, 0.9)
        memory_ax.set_xticks([0, 0.5, 1.0, 1.5, 2.0])
        memory_ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        memory_ax.set_xlabel("memory per GPU (share of the accelerator's)")
        _headed_legend(memory_ax, "memory per GPU", ncols=3)
        self.step = [step_ax.barh([0], [0.0], color=colour, hatch=hatch, edgecolor="white", height=0.6, label=label,
                                  gid=attribute)[0] for attribute, label, colour, hatch in STEP_PARTS]
        self.step_text = step_ax.text(1.01, 0, "", va="center", fontsize=style.SIZE["small"])
        step_ax.set_yticks([0], [""])
        step_ax.set_xlim(0, 1.45)  # room for "MFU 86%, 2.36 s" right of the bar
        step_ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        step_ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        step_ax.set_xlabel("share of the step")
        _headed_legend(step_ax, "where a step's time goes", ncols=2)
        self.artists += [*self.step, self.total, self.step_text]
        self.memory_ax, self.step_ax = memory_ax, step_ax
        if capacity_bytes:
            self.label(capacity_bytes, accelerator)

    def label(self, capacity_bytes: float, accelerator: str = ""):
        """Write ``accelerator`` and its memory, ``capacity_bytes``, beside the line at 100%."""
        name = f"{accelerator}: " if accelerator else ""
        return style.limit_label(self.memory_ax, 1.0, f"{name}{style.gb(capacity_bytes)}", y=0.55)

    def update(self, plan) -> None:
        if not plan.memory_capacity_bytes:
            raise InvalidValue("PlanBars draws memory as a share of the accelerator's; this plan's has none.")
        capacity, left = plan.memory_capacity_bytes / 1e9, 0.0
        for bar, (key, *_) in zip(self.memory, MEMORY_PARTS):
            bar.set_x(left / capacity)
            bar.set_width(plan.memory.get(key, 0.0) / 1e9 / capacity)
            left += plan.memory.get(key, 0.0) / 1e9
        verdict = "" if plan.fits is None else (" fits" if plan.fits else " does not fit")
        self.total.set_text(f"{style.gb(left * 1e9)}{verdict}")
        self.total.set_color(style.LIMIT if plan.fits is False else "black")
        share = left / capacity
        inside = share + self.END * 0.01 < self.END * 0.8
        self.total.set_x(share + self.END * 0.01 if inside else self.END * 0.99)
        self.total.set_horizontalalignment("left" if inside else "right")
        start = 0.0
        for bar, (attribute, *_) in zip(self.step, STEP_PARTS):
            share = getattr(plan, attribute) / plan.step_time_s
            bar.set_x(start)
            bar.set_width(share)
            start += share
        self.step_text.set_text(f"MFU {plan.mfu:.0%}, {plan.step_time_s:.3g} s")
