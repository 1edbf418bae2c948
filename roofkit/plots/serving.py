"""The serving figures: latency and throughput against the batch, where the memory goes, the latency-throughput
frontier, a server under a stream of requests, and roofkit's figures against published ones.

    fig = plot_batch("llama-3-70b", "h100", gpus=8, context=8192)    # TPOT and tokens/s, the memory limit marked
    fig = plot_memory(memory.plan("llama-3-70b", "h100", 8, 8192, batch=64))   # one GPU's memory as a bar
    fig = plot_frontier("llama-3-70b", "h100", 1000, 1000, dtype="fp8")      # per user vs per GPU, over batch and GPUs
    fig = plot_queue(queue_sweep("llama-3-8b", "h100", 1000, 200))  # p50/p99 TTFT, throughput, goodput vs the rate
    fig = plot_published(published.compare())                        # predicted against published, both modes

:func:`batch_sweep` and :func:`queue_sweep` compute the curves (no matplotlib); the figures are
matplotlib ``Figure`` objects (not tracked by pyplot: end a notebook cell with
``fig``). The explorer of :mod:`roofkit.explore.serving` draws both, one above
the other, as :class:`MemoryBar` and :class:`BatchCurve`: the same pictures on
fixed axes, drawn once and then moved in place by ``update`` as its sliders move
(the memory as a share of one GPU's, the curves' scales drawn as artists of
their own, once per model, accelerator, count and precisions).
"""

from __future__ import annotations

import dataclasses
import functools
import math

from ..catalogs import hardware, models
from ..errors import InvalidValue
from ..units import positive, whole
from ..perf.inference import latency, memory
from ..perf.inference import simulate as simulator
from ..perf.inference.workload import steady_state
from . import style

__all__ = ["batch_sweep", "plot_batch", "plot_memory", "draw_batch", "draw_memory", "BATCHES", "frontier",
           "plot_frontier", "plot_published", "GPU_COUNTS", "MemoryBar", "BatchCurve", "LOADS", "capacity",
           "simulation", "queue_sweep", "crossing", "draw_queue", "plot_queue"]

BATCHES = tuple(2**e for e in range(11))  # 1 .. 1024
GPU_COUNTS = (1, 2, 4, 8)


def batch_sweep(model, hw, gpus=1, context=8192, batches=BATCHES, dtype="bf16", weights_dtype=None, kv_dtype=None,
                calibrated=False) -> dict:
    """TPOT and throughput at each batch, and what fits: {'batch', 'tpot_s', 'tokens_per_s', 'fits', 'max_batch'}.

    The largest batch that fits is added to ``batches`` (when it is at least 1).
    """
    wd, kd = weights_dtype or dtype, kv_dtype or dtype
    plan = memory.plan(model, hw, gpus, context, 1, wd, kd)
    points = sorted({whole(b, "batch") for b in batches} | ({plan.max_batch} if plan.max_batch else set()))
    steps = [latency.decode_step(model, hw, b, context, gpus, dtype, wd, kd, calibrated) for b in points]
    return {"batch": points, "tpot_s": [s.time_s for s in steps], "tokens_per_s": [s.tokens_per_s for s in steps],
            "fits": [b <= plan.max_batch for b in points], "max_batch": plan.max_batch, "plan": plan}


def draw_batch(ax, sweep: dict, title: str | None = None) -> None:
    """TPOT (left axis, ms) and tokens/s (right axis) against the batch; hollow markers do not fit in memory."""
    x, tpot, rate, fits = sweep["batch"], [t * 1e3 for t in sweep["tpot_s"]], sweep["tokens_per_s"], sweep["fits"]
    right = ax.twinx()
    for axis, y, colour, label in ((ax, tpot, style.PALETTE["blue"], "time per output token (ms)"),
                                   (right, rate, style.PALETTE["red"], "tokens/s (the whole batch)")):
        axis.plot(x, y, color=colour, label=label)
        axis.scatter([a for a, ok in zip(x, fits) if ok], [b for b, ok in zip(y, fits) if ok], color=colour, zorder=3)
        axis.scatter([a for a, ok in zip(x, fits) if not ok], [b for b, ok in zip(y, fits) if not ok],
                     facecolors="white", edgecolors=colour, zorder=3)
        axis.set_yscale("log")
        axis.set_ylabel(label, color=colour)
    limit = sweep["max_batch"]
    if limit >= 1:
        ax.axvline(limit, color="0.3", ls="--")
        ax.annotate(f"memory limit:\nbatch {limit}", (limit, 0.03), xycoords=("data", "axes fraction"),
                    xytext=(6, 0), textcoords="offset points", ha="left", va="bottom", fontsize=style.SIZE["small"],
                    color="0.3")
    else:
        ax.text(0.5, 0.5, "the weights alone do not fit", transform=ax.transAxes, ha="center", color="0.3")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter("{x:g}")
    ax.set_xlabel("batch (sequences decoded together; hollow: does not fit in memory)")
    ax.grid(True, color=style.GRID)
    if title:
        ax.set_title(title, fontsize=style.SIZE["label"])


def plot_batch(model, hw, gpus=1, context=8192, batches=BATCHES, dtype="bf16", weights_dtype=None, kv_dtype=None,
               calibrated=False, title=None):
    """A figure of :func:`draw_batch` for one model, accelerator and context."""
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import


    sweep = batch_sweep(model, hw, gpus, context, batches, dtype, weights_dtype, kv_dtype, calibrated)
    fig = Figure(figsize=(8.5, 4.2))  # fixed margins: a constrained layout doubles the time to draw
    fig.subplots_adjust(left=0.08, right=0.89, top=0.92, bottom=0.12)
    acc = hardware.get(hw)
    default = (f"{models.get(model).name} on {gpus} x {acc.name.removeprefix(acc.vendor + ' ')}, "
               f"{context:,}-token context, decode")
    draw_batch(fig.add_subplot(), sweep, title or default)
    return fig


_PARTS = (("reserve", style.PARTS["reserve"]), ("weights", style.PARTS["weights"]), ("KV cache",
                                                                                     style.PARTS["kv cache"]),
          ("free", style.PARTS["free"]))


def draw_memory(ax, plan: memory.MemoryPlan) -> None:
    """One GPU's memory as a horizontal bar in GB: reserve, weights, the batch's KV cache, what is free."""
    g = plan.per_gpu
    capacity = g["capacity_bytes"] / 1e9
    parts = {"reserve": g["reserve_bytes"] / 1e9, "weights": g["weights_bytes"] / 1e9,
             "KV cache": g["kv_bytes"] / 1e9}
    parts["free"] = max(0.0, capacity - sum(parts.values()))
    left = 0.0
    for name, colour in _PARTS:
        width = parts[name]
        ax.barh(0, width, left=left, height=0.6, color=colour, label=f"{name}: {width:.3g} GB")
        left += width
    ax.set_xlim(0, max(left, capacity) * 1.15)
    style.limit_line(ax, capacity, f"{capacity:.3g} GB per GPU", y=-0.72, ymax=0.66, lw=2, ls="-")  # below the legend
    ax.set_ylim(-0.75, 0.85)
    ax.set_yticks([])
    ax.set_xlabel("GB on one GPU (1 GB = 10^9 bytes)")
    verdict = "fits" if plan.fits else ("the weights do not fit" if not plan.weights_fit else "does not fit")
    ax.set_title(f"batch {plan.batch} x {plan.context:,} tokens: {verdict}", fontsize=style.SIZE["label"])
    ax.legend(loc="upper left", ncol=4, fontsize=style.SIZE["small"], frameon=False, bbox_to_anchor=(0, 1.02))


def plot_memory(plan: memory.MemoryPlan):
    """A figure of :func:`draw_memory`."""
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import

    fig = Figure(figsize=(8.5, 2.2), layout="constrained")
    draw_memory(fig.add_subplot(), plan)
    return fig


def frontier(model, hw, input_tokens, output_tokens, gpu_counts=GPU_COUNTS, batches=BATCHES, dtype="bf16",
             weights_dtype=None, kv_dtype=None, calibrated=False) -> list[dict]:
    """The latency-throughput frontier of a workload: one point per GPU count (one replica, tensor parallel over
    them) and batch that fits, {'gpus', 'batch', 'tpot_s', 'per_user', 'per_gpu', 'tokens_per_s'}.

    Per user is 1 / TPOT (tokens/s one request sees), per GPU the throughput over the GPUs:
    what a token costs. The largest batch that fits ends each curve.
    """

    points = []
    for n in gpu_counts:
        top = steady_state(model, hw, input_tokens, output_tokens, n, None, dtype, weights_dtype, kv_dtype,
                           calibrated)
        if not top.plan.weights_fit:
            continue
        for b in sorted({whole(b, "batch") for b in batches if b <= top.plan.max_batch} | {top.plan.max_batch}):
            s = steady_state(model, hw, input_tokens, output_tokens, n, b, dtype, weights_dtype, kv_dtype,
                             calibrated)
            points.append({"gpus": n, "batch": b, "tpot_s": s.tpot_s, "per_user": 1 / s.tpot_s,
                           "per_gpu": s.tokens_per_s / n, "tokens_per_s": s.tokens_per_s})
    return points


def plot_frontier(model, hw, input_tokens, output_tokens, gpu_counts=GPU_COUNTS, batches=BATCHES, dtype="bf16",
                  weights_dtype=None, kv_dtype=None, calibrated=False, title=None):
    """Tokens/s per GPU against tokens/s per user, one curve per GPU count, the batch growing along each."""
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import


    points = frontier(model, hw, input_tokens, output_tokens, gpu_counts, batches, dtype, weights_dtype, kv_dtype,
                      calibrated)
    fig = Figure(figsize=(8.5, 4.6))
    fig.subplots_adjust(left=0.1, right=0.97, top=0.91, bottom=0.12)
    ax = fig.add_subplot()
    for i, n in enumerate(sorted({p["gpus"] for p in points})):
        mine = [p for p in points if p["gpus"] == n]
        ax.plot([p["per_user"] for p in mine], [p["per_gpu"] for p in mine], "o-",
                color=style.CYCLE[i % len(style.CYCLE)], ms=4,
                label=f"{n} GPU" if n == 1 else f"{n} GPUs, tensor parallel")
        last = mine[-1]
        ax.annotate(f"B={last['batch']}", (last["per_user"], last["per_gpu"]), xytext=(4, 5), ha="left",
                    textcoords="offset points", fontsize=style.SIZE["tiny"], color=style.CYCLE[i % len(style.CYCLE)])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tokens/s per user (1 / TPOT): faster to the right")
    ax.set_ylabel("output tokens/s per GPU: cheaper up")
    ax.grid(True, which="both", color=style.GRID)
    ax.legend(fontsize=style.SIZE["small"], frameon=False, loc="lower left")
    acc = hardware.get(hw)
    ax.set_title(title or f"{models.get(model).name} on {acc.name.removeprefix(acc.vendor + ' ')}, "
                          f"{input_tokens:,} in / {output_tokens:,} out, {'calibrated' if calibrated else 'bound'}",
                 fontsize=style.SIZE["label"])
    return fig


# --- a server under a stream of requests ---------------------------------------------------------------------

LOADS = (0.25, 0.5, 0.9, 1.0, 1.05, 1.2, 1.5)  # a sweep's request rates, as shares of the capacity: denser at the knee


def _model_options(model, hw, gpus, dtype, calibrated):
    """The arguments the cached runs are kept by: names, not objects (a catalog model or accelerator by its key)."""
    return (model if isinstance(model, str) else models.get(model).key,
            hw if isinstance(hw, str) else hardware.get(hw).key, whole(gpus, "gpus"), dtype, bool(calibrated))


def capacity(model, hw, input_tokens, output_tokens, gpus=1, dtype="bf16", max_num_seqs=simulator.MAX_NUM_SEQS,
             calibrated=False) -> float:
    """The requests per second a server finishes with every place busy, over all its GPUs (Little's law).

    A stable system holds on average L = λ W requests: λ arrive per second and each stays W seconds. With its
    B places full (``max_num_seqs``, or fewer where the memory holds fewer: the steady state's batch), each
    request holds one for its O - 1 decode steps of T_step
    (:func:`roofkit.inference.workload.steady_state` at that batch), so

        λ_max = B / ((O - 1) T_step)

    Offered more, requests wait for a place and the queue grows without end.

    >>> round(capacity("llama-3-8b", "h100", 1000, 200), 1)       # requests/s: 256 places, each 199 steps of 36 ms
    35.8
    """
    s = steady_state(model, hw, input_tokens, output_tokens, gpus=gpus, dtype=dtype, calibrated=calibrated)
    if not s.plan.weights_fit:
        raise InvalidValue(s.plan.verdict)
    places = min(whole(max_num_seqs, "max_num_seqs"), s.batch)
    if places != s.batch:
        s = steady_state(model, hw, input_tokens, output_tokens, gpus=gpus, dtype=dtype, calibrated=calibrated,
                         batch=places)
    return s.requests_per_s


@functools.lru_cache(maxsize=256)
def _simulation(model, hw, input_tokens, output_tokens, rate, requests, gpus, dtype, max_num_seqs, calibrated, seed):
    return simulator.simulate(model, hw, input_tokens, output_tokens, request_rate=rate, requests=requests, gpus=gpus,
                              dtype=dtype, max_num_seqs=max_num_seqs, calibrated=calibrated, seed=seed)


def simulation(model, hw, input_tokens, output_tokens, rate, requests=simulator.REQUESTS, gpus=1, dtype="bf16",
               max_num_seqs=simulator.MAX_NUM_SEQS, slo_ttft_s=simulator.SLO_TTFT_S, slo_tpot_s=simulator.SLO_TPOT_S,
               calibrated=False, seed=0) -> simulator.Simulation:
    """:func:`roofkit.inference.simulate.simulate` of ``requests`` requests arriving at ``rate`` per second, each
    run kept per input: a sweep, its figure, a question's key and the explorer ask for the same runs again. The
    targets (``slo_ttft_s``, ``slo_tpot_s``) only judge the requests, so another pair reuses the run. The arrays
    of the result are shared with the cache: read them, do not change them."""
    m, acc, n, key, cal = _model_options(model, hw, gpus, dtype, calibrated)
    run = _simulation(m, acc, whole(input_tokens, "input tokens"), whole(output_tokens, "output tokens"),
                      float(positive(rate, "request rate")), whole(requests, "requests"), n, key,
                      whole(max_num_seqs, "max_num_seqs"), cal, whole(seed, "seed", 0))
    if (run.slo_ttft_s, run.slo_tpot_s) == (slo_ttft_s, slo_tpot_s):
        return run
    return dataclasses.replace(run, slo_ttft_s=float(positive(slo_ttft_s, "slo_ttft_s")),
                               slo_tpot_s=float(positive(slo_tpot_s, "slo_tpot_s")))


_QUEUE_FIGURES = ("ttft_p50_s", "ttft_p99_s", "ttft_mean_s", "tpot_p50_s", "tpot_p99_s", "requests_per_s",
                  "tokens_per_s", "goodput", "good_fraction")


def queue_sweep(model, hw, input_tokens, output_tokens, rates=None, requests=simulator.REQUESTS, gpus=1,
                dtype="bf16", max_num_seqs=simulator.MAX_NUM_SEQS, slo_ttft_s=simulator.SLO_TTFT_S,
                slo_tpot_s=simulator.SLO_TPOT_S, calibrated=False, seed=0) -> dict:
    """The latency-throughput curve of a server under a Poisson stream of requests: one :func:`simulation` per rate.

    ``rates`` (requests per second over all the GPUs) default to :func:`capacity` times :data:`LOADS`, each to
    two significant figures. Returns lists over the rates: ``rate``, TTFT's 50th and 99th percentiles and mean
    (``ttft_p50_s``, ``ttft_p99_s``, ``ttft_mean_s``), TPOT's (``tpot_p50_s``, ``tpot_p99_s``), the requests and
    output tokens finished per second (``requests_per_s``, ``tokens_per_s``), ``goodput`` (requests per second
    that met both targets) and ``good_fraction``; and ``capacity``, ``lone_ttft_s`` (a request alone: its
    prefill), the targets and the inputs.
    """
    cap = capacity(model, hw, input_tokens, output_tokens, gpus, dtype, max_num_seqs, calibrated)
    chosen = sorted({float(f"{cap * f:.2g}") for f in LOADS}) if rates is None else \
        sorted({float(positive(r, "request rate")) for r in rates})
    out = {"rate": chosen, **{k: [] for k in _QUEUE_FIGURES}}
    for rate in chosen:
        s = simulation(model, hw, input_tokens, output_tokens, rate, requests, gpus, dtype, max_num_seqs, slo_ttft_s,
                       slo_tpot_s, calibrated, seed)
        figures = s.to_dict()
        for k in _QUEUE_FIGURES[:-1]:
            out[k].append(math.nan if figures.get(k) is None else figures[k])
        out["good_fraction"].append(float(s.good.mean()))
    lone = latency.ttft(model, hw, input_tokens, gpus=gpus, dtype=dtype, calibrated=calibrated)
    return out | {"capacity": cap, "lone_ttft_s": lone, "max_num_seqs": max_num_seqs, "requests": requests,
                  "slo_ttft_s": slo_ttft_s, "slo_tpot_s": slo_tpot_s, "model": models.get(model).name,
                  "hw": hardware.get(hw).key, "gpus": gpus, "input_tokens": input_tokens,
                  "output_tokens": output_tokens, "calibrated": bool(calibrated)}


def crossing(sweep: dict, figure: str = "ttft_p99_s", value: float | None = None) -> float | None:
    """The request rate at which ``sweep[figure]`` first passes ``value`` (default: the sweep's TTFT target),
    read linearly between the two rates on either side; None where it never does, or does from the first rate.

    >>> crossing({"rate": [10, 20, 30], "ttft_p99_s": [0.1, 1.0, 3.0], "slo_ttft_s": 2.0})
    25.0
    """
    target = sweep["slo_ttft_s"] if value is None else float(value)
    if figure not in sweep:
        raise InvalidValue(f"a sweep has no {figure!r}; it has {', '.join(k for k in _QUEUE_FIGURES if k in sweep)}.")
    xs, ys = sweep["rate"], sweep[figure]
    above = next((i for i, y in enumerate(ys) if y > target), None)
    if not above:  # None, or 0: passed at the first rate already
        return None
    x0, x1, y0, y1 = xs[above - 1], xs[above], ys[above - 1], ys[above]
    return x0 + (target - y0) * (x1 - x0) / (y1 - y0)


def _seconds(x: float) -> str:
    return f"{x * 1e3:.3g} ms" if x < 1 else f"{x:.3g} s"


def draw_queue(top, bottom, sweep: dict) -> None:
    """TTFT against the request rate on ``top`` (p50 and p99, log scale, the TTFT target and a lone request's
    TTFT marked), the requests finished per second and the goodput on ``bottom`` (the offered rate dotted); both
    with the capacity marked."""
    x, cap = sweep["rate"], sweep["capacity"]
    for key, colour, label in (("ttft_p99_s", style.PALETTE["purple"], "TTFT, 99th percentile"),
                               ("ttft_p50_s", style.PALETTE["cyan"], "TTFT, median")):
        top.plot(x, sweep[key], "o-", color=colour, ms=4, label=label)
    top.axhline(sweep["slo_ttft_s"], color=style.LIMIT, ls="--", lw=1.2)
    top.annotate(f"TTFT target {_seconds(sweep['slo_ttft_s'])}", (0.3, sweep["slo_ttft_s"]),
                 xycoords=("axes fraction", "data"), xytext=(0, 3), textcoords="offset points", va="bottom",
                 color=style.LIMIT, fontsize=style.SIZE["small"])
    top.axhline(sweep["lone_ttft_s"], color=style.INK["faint"], ls=":", lw=1)
    top.annotate(f"a request alone: {_seconds(sweep['lone_ttft_s'])}", (0.99, sweep["lone_ttft_s"]),
                 xycoords=("axes fraction", "data"), xytext=(0, 3), textcoords="offset points", va="bottom",
                 ha="right", color=style.INK["muted"], fontsize=style.SIZE["small"])
    top.set_yscale("log")
    top.set_ylabel("time to first token (s)")
    top.legend(fontsize=style.SIZE["small"], frameon=False, loc="upper left")
    bottom.plot(x, x, ls=":", color=style.INK["faint"], label="offered (the request rate)")
    bottom.plot(x, sweep["requests_per_s"], "o-", color=style.PALETTE["blue"], ms=4, label="finished")
    bottom.plot(x, sweep["goodput"], "s-", color=style.PALETTE["green"], ms=4,
                label=f"goodput (TTFT ≤ {_seconds(sweep['slo_ttft_s'])}, TPOT ≤ {_seconds(sweep['slo_tpot_s'])})")
    bottom.set_ylabel("requests per second")
    bottom.set_ylim(0, max(x) * 1.05)
    bottom.legend(fontsize=style.SIZE["small"], frameon=False, loc="upper left")
    bottom.set_xlabel(f"request rate (Poisson arrivals, requests per second; {sweep['requests']:,} requests a run)")
    for ax in (top, bottom):
        ax.axvline(cap, color=style.INK["rule"], ls="--", lw=1)
        ax.grid(True, which="major", color=style.GRID)
        ax.set_xlim(0, max(x) * 1.04)
    bottom.annotate(f"capacity {cap:.3g}/s:\n{sweep['max_num_seqs']} in flight", (cap, 0.03),
                    xycoords=("data", "axes fraction"), xytext=(-4, 0), textcoords="offset points", ha="right",
                    va="bottom", color=style.INK["muted"], fontsize=style.SIZE["small"])


def plot_queue(sweep: dict, title: str | None = None):
    """A figure of :func:`draw_queue` for a :func:`queue_sweep`."""
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import

    fig = Figure(figsize=(8.5, 6.2))  # fixed margins: a constrained layout doubles the time to draw
    fig.subplots_adjust(left=0.09, right=0.97, top=0.94, bottom=0.08, hspace=0.08)
    top, bottom = fig.subplots(2, 1, sharex=True, height_ratios=(1.2, 1))
    draw_queue(top, bottom, sweep)
    acc = hardware.get(sweep["hw"])
    where = "" if sweep["gpus"] == 1 else f"{sweep['gpus']} x "
    top.set_title(title or f"{sweep['model']} on {where}{acc.name.removeprefix(acc.vendor + ' ')}, "
                           f"{sweep['input_tokens']:,} in / {sweep['output_tokens']:,} out, "
                           f"{'calibrated' if sweep['calibrated'] else 'bound'}", fontsize=style.SIZE["label"])
    return fig


def plot_published(rows, title=None):
    """Predicted against published for rows of :func:`roofkit.inference.published.compare`: the bound and the
    calibrated estimate, as a speed ratio per row (above 1: the prediction is faster than the engine was; for a
    time to first token, the published time over the predicted one)."""
    from matplotlib.figure import Figure  # deferred: matplotlib costs ~0.2 s at import

    height = 1.0 + 0.32 * len(rows)
    fig = Figure(figsize=(8.5, height))
    fig.subplots_adjust(left=0.3, right=0.96, top=1 - 0.4 / height, bottom=0.55 / height)
    ax = fig.add_subplot()
    labels = [_label(r) for r in rows]
    y = list(range(len(rows)))[::-1]
    ax.scatter([r["bound_speed"] for r in rows], y, marker="^", color=style.PALETTE["red"],
               label="bound (datasheet roofs)", zorder=3)
    estimated = [(r["calibrated_speed"], yy) for r, yy in zip(rows, y) if r.get("calibrated_speed") is not None]
    if estimated:
        ax.scatter([e for e, _ in estimated], [yy for _, yy in estimated], marker="o", color=style.PALETTE["blue"],
                   label="calibrated",
                   zorder=3)
    ax.axvline(1, color="0.2", lw=1)
    ax.axvspan(1 / 1.2, 1.2, color=style.PALETTE["blue"], alpha=0.08, lw=0)
    ax.set_xscale("log")
    ax.set_xticks([0.8, 1, 1.2, 1.5, 2, 3])
    ax.xaxis.set_major_formatter("{x:g}x")
    ax.xaxis.set_minor_formatter("")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=style.SIZE["tiny"])
    ax.set_xlabel("predicted / published speed (right of 1: faster than published; shaded: within 1.2x)")
    ax.grid(True, axis="x", color=style.GRID)
    ax.legend(fontsize=style.SIZE["small"], frameon=False, loc="lower left", bbox_to_anchor=(0, 1), ncol=2,
              borderaxespad=0.2)
    if title:
        ax.set_title(title, fontsize=style.SIZE["text"], loc="right")
    return fig


def _label(row) -> str:
    if row["kind"] == "ttft":
        return f"{row['model']} {row['hw']} TTFT, {row['isl']:,}-token prompt"
    return f"{row['model']} {row['hw']} x{row['gpus']}, {row['isl']:,} in / {row['osl']:,} out"


class MemoryBar:
    """:func:`draw_memory` on a fixed axis, for a figure that follows the controls: :meth:`update` moves it in place.

    The axis is the share of one GPU's memory, 0 to 130%, whatever the
    model, the accelerator, the GPU count and the precisions, so that it is
    drawn once, with its legend and its title: a batch that does not fit runs
    off the right edge, and the figure written beside the bar says how much it
    needs, in GB. What those choices change is written by :meth:`labels` (a
    figure that keeps its axes draws it once per choice), on the right of the
    title: the GPU's memory, the reserve and the weights per GPU in GB. ``artists`` are what
    :meth:`update` changes (the four parts and the total) and the capacity
    line at 100%, drawn over them.
    """

    END = 1.3  # the axis runs to 130% of the GPU's memory: room for "needs 1,398 GB" right of the line

    def __init__(self, ax, plan: memory.MemoryPlan | None = None, title: str = "one GPU's memory"):
        from matplotlib.ticker import PercentFormatter  # deferred: matplotlib costs ~0.2 s at import

        self.ax = ax
        self.parts = [ax.barh(0, 0.0, height=0.6, color=colour, label=name)[0] for name, colour in _PARTS]
        capacity_line = style.limit_mark(ax, 1.0, ymax=0.66, lw=2, ls="-")  # below the legend
        ax.set_xlim(0, self.END)
        ax.set_ylim(-0.75, 0.85)
        ax.set_yticks([])
        ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_xlabel("share of one GPU's memory (1 GB = 10^9 bytes)")
        ax.legend(loc="upper left", ncol=4, fontsize=style.SIZE["small"], frameon=False, bbox_to_anchor=(0, 1.02))
        ax.set_title(title, loc="left", fontsize=style.SIZE["label"])
        self.total = ax.text(0, 0, "", fontsize=style.SIZE["small"], va="center", zorder=6,
                             bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.85))
        self.artists = [*self.parts, capacity_line, self.total]  # the line over the bar, as draw_memory draws it
        if plan is not None:
            self.labels(plan)

    @staticmethod
    def key_of(plan: memory.MemoryPlan) -> tuple:
        """What :meth:`labels` writes depends on: the GPU's memory, the reserve and the weights per GPU."""
        g = plan.per_gpu
        return g["capacity_bytes"], g["reserve_bytes"], g["weights_bytes"]

    def labels(self, plan: memory.MemoryPlan) -> None:
        """Write what ``plan``'s GPU, reserve and weights are, in GB, on the right of the title."""
        g = plan.per_gpu
        gb = {name: style.gb(g[name + "_bytes"]) for name in ("capacity", "reserve", "weights")}
        self.ax.set_title(f"{gb['capacity']} per GPU: reserve {gb['reserve']}, weights {gb['weights']}", loc="right",
                          fontsize=style.SIZE["small"])

    def update(self, plan: memory.MemoryPlan) -> None:
        g = plan.per_gpu
        capacity = g["capacity_bytes"]
        widths = {"reserve": g["reserve_bytes"] / capacity, "weights": g["weights_bytes"] / capacity,
                  "KV cache": g["kv_bytes"] / capacity}
        widths["free"] = max(0.0, 1.0 - sum(widths.values()))
        left = 0.0
        for bar, (name, _) in zip(self.parts, _PARTS):
            bar.set_x(left)
            bar.set_width(widths[name])
            left += widths[name] if name != "free" else 0.0
        amount, fits = style.gb(left * capacity), left <= 1.0
        self.total.set_text(f"{amount} in use" if fits else f"needs {amount}")
        self.total.set_x((left if fits else 1.0) + self.END * 0.01)  # beside the bar, or right of the line it crosses
        self.total.set_color("0.1" if fits else style.LIMIT)


class BatchCurve:
    """:func:`draw_batch` on fixed axes, for a figure that follows the controls: :meth:`update` moves it in place.

    ``tpot_range`` and ``rate_range`` (seconds, tokens/s) set the two log
    axes' limits (:meth:`set_ranges`), so a sweep at another context moves the
    curves, not the axes; ``marked`` is a batch drawn as a green band (the
    explorer's chosen batch). The two y axes' ticks, their labels and the
    grid along them are artists of their own, drawn by :meth:`scales` for the
    ranges set: a figure whose ranges change with a choice (the model, the
    GPUs) draws them once per choice instead of redrawing the axes, whose
    tick labels, frame, x axis and titles are drawn once. ``artists`` are what
    :meth:`update` changes.
    """

    LABEL_OFFSET = 0.085  # the y axes' labels, this share of the axes' width outside them: clear of any tick label

    def __init__(self, ax, tpot_range=None, rate_range=None, title: str | None = None):
        from matplotlib.ticker import NullLocator  # deferred: matplotlib costs ~0.2 s at import

        self.ax, right = ax, ax.twinx()
        self.axes, self.curves = (ax, right), []
        for axis, colour, label in ((ax, style.PALETTE["blue"], "time per output token (ms)"),
                                    (right, style.PALETTE["red"], "tokens/s (the whole batch)")):
            line = axis.plot([], [], color=colour, label=label)[0]
            full = axis.plot([], [], ls="none", marker="o", ms=6, color=colour, zorder=3)[0]
            hollow = axis.plot([], [], ls="none", marker="o", ms=6, mfc="white", mec=colour, zorder=3)[0]
            axis.set_yscale("log")
            axis.yaxis.set_major_locator(NullLocator())  # drawn by scales()
            axis.yaxis.set_minor_locator(NullLocator())
            axis.set_ylabel(label, color=colour)
            self.curves.append((line, full, hollow))
        ax.yaxis.set_label_coords(-self.LABEL_OFFSET, 0.5)
        right.yaxis.set_label_coords(1 + self.LABEL_OFFSET, 0.5)
        self.limit = ax.axvline(1, color="0.3", ls="--")
        self.limit_text = ax.annotate("", (1, 0.03), xycoords=("data", "axes fraction"), xytext=(6, 0),
                                      textcoords="offset points", ha="left", va="bottom", fontsize=style.SIZE["small"],
                                      color="0.3")
        self.no_fit = ax.text(0.5, 0.5, "the weights alone do not fit", transform=ax.transAxes, ha="center",
                              color="0.3", bbox=style.LABEL_BOX)
        self.band = ax.axvline(1, color=style.PALETTE["green"], lw=6, alpha=0.25)
        self.band_text = ax.annotate("", (1, 0.97), xycoords=("data", "axes fraction"), xytext=(5, 0),
                                     textcoords="offset points", va="top", fontsize=style.SIZE["small"],
                                     color=style.PALETTE["green"])
        ax.set_xscale("log", base=2)
        ax.set_xlim(BATCHES[0] / 1.4, BATCHES[-1] * 1.4)
        ax.xaxis.set_major_formatter("{x:g}")
        ax.set_xlabel("batch (sequences decoded together; hollow: does not fit in memory)")
        ax.grid(True, axis="x", color=style.GRID)
        if title:
            ax.set_title(title, fontsize=style.SIZE["label"])
        self.artists = [a for trio in self.curves for a in trio] + [self.limit, self.limit_text, self.no_fit,
                                                                    self.band, self.band_text]
        if tpot_range is not None and rate_range is not None:
            self.set_ranges(tpot_range, rate_range)
            self.scales()

    def set_ranges(self, tpot_range, rate_range) -> None:
        """Fix the two y axes over ``tpot_range`` (seconds) and ``rate_range`` (tokens/s), with a margin."""
        for axis, (lo, hi) in zip(self.axes, ([t * 1e3 for t in tpot_range], rate_range)):
            axis.set_ylim(lo / 1.25, hi * 1.25)

    def scales(self) -> list:
        """The y axes' ticks, tick labels and (left) grid for the ranges set, as new artists."""
        left, right = self.axes
        return _log_scale(left, "left", grid=True) + _log_scale(right, "right", grid=False)

    def hide(self) -> None:
        """Draw nothing (a model whose latency roofkit does not model)."""
        for artist in self.artists:
            artist.set_visible(False)

    def update(self, sweep: dict, marked: int | None = None) -> None:
        x, fits = sweep["batch"], sweep["fits"]
        for (line, full, hollow), y in zip(self.curves, ([t * 1e3 for t in sweep["tpot_s"]], sweep["tokens_per_s"])):
            line.set_data(x, y)
            full.set_data([a for a, ok in zip(x, fits) if ok], [b for b, ok in zip(y, fits) if ok])
            hollow.set_data([a for a, ok in zip(x, fits) if not ok], [b for b, ok in zip(y, fits) if not ok])
            for artist in (line, full, hollow):
                artist.set_visible(True)
        limit = sweep["max_batch"]
        for artist in (self.limit, self.limit_text):
            artist.set_visible(limit >= 1)
        self.no_fit.set_visible(limit < 1)
        if limit >= 1:
            self.limit.set_xdata([limit, limit])
            self.limit_text.xy = (limit, 0.03)
            self.limit_text.set_text(f"memory limit: {limit}")
        for artist in (self.band, self.band_text):
            artist.set_visible(marked is not None)
        if marked is not None:
            self.band.set_xdata([marked, marked])
            self.band_text.xy = (marked, 0.97)
            self.band_text.set_text(f"batch {marked}")


def _log_scale(ax, side: str, grid: bool) -> list:
    """Ticks (decades, with minor ticks between), their labels (as a log axis writes them) and, with ``grid``,
    grid lines at the labelled ticks, for ``ax``'s y limits on its ``side`` ("left" or "right"): a handful of artists,
    drawn a hundred times faster than a log axis lays out its ticks."""
    import matplotlib as mpl  # deferred: matplotlib costs ~0.2 s at import
    from matplotlib import markers  # deferred: matplotlib costs ~0.2 s at import
    from matplotlib.ticker import LogFormatterSciNotation  # deferred: matplotlib costs ~0.2 s at import
    from matplotlib.transforms import ScaledTranslation, blended_transform_factory  # deferred: matplotlib, ~0.2 s

    lo, hi = ax.get_ylim()
    decades = [10.0 ** e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)]
    for labelled in ((1,), (1, 2, 5), range(1, 10)):  # decades; on a short range, 2 and 5 or every digit too
        major = [m * y for y in decades for m in labelled if lo <= m * y <= hi]
        if len(major) >= 2:
            break
    minor = [m * y for y in decades for m in range(2, 10) if lo <= m * y <= hi and m * y not in major]
    x, outward = (0.0, markers.TICKLEFT) if side == "left" else (1.0, markers.TICKRIGHT)
    on_edge = blended_transform_factory(ax.transAxes, ax.transData)
    rc, drawn = mpl.rcParams, []
    for ys, size, width in ((major, rc["ytick.major.size"], rc["ytick.major.width"]),
                            (minor, rc["ytick.minor.size"], rc["ytick.minor.width"])):
        drawn += ax.plot([x] * len(ys), ys, ls="none", marker=outward, ms=size, mew=width, color=rc["ytick.color"],
                         transform=on_edge, clip_on=False)
    if grid and major:
        drawn += ax.plot([v for _ in major for v in (0, 1, math.nan)], [v for y in major for v in (y, y, y)],
                         color=style.GRID, lw=rc["grid.linewidth"], transform=on_edge, zorder=0.5)
    formatter = LogFormatterSciNotation(labelOnlyBase=False)
    gap = (rc["ytick.major.size"] + rc["ytick.major.pad"]) / 72 * (-1 if side == "left" else 1)
    beside = on_edge + ScaledTranslation(gap, 0, ax.figure.dpi_scale_trans)
    drawn += [ax.text(x, y, formatter(y), transform=beside, ha="right" if side == "left" else "left",
                      va="center_baseline", fontsize=rc["ytick.labelsize"], clip_on=False) for y in major]
    return drawn
