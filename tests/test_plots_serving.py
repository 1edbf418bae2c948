"""The serving figures (roofkit/plots/serving.py): the memory bar as shares of one GPU's memory with its GB in the
title, the latency curve's y scales drawn as artists of their own for the ranges set, and the queue: the capacity by
Little's law, the kept runs, the sweep over request rates, the crossing of a target and its figure."""

import math

import pytest

from roofkit.errors import InvalidValue
from roofkit.perf.inference import latency, memory
from roofkit.plots import serving as plot


def _ax():
    from matplotlib.figure import Figure

    return Figure().add_subplot()


def test_memory_bar_is_shares_of_one_gpu_with_its_gb_in_the_title():
    plan = memory.plan("llama-3-70b", "h100", 8, 8192, 64)
    bar = plot.MemoryBar(_ax(), plan)
    bar.update(plan)
    g = plan.per_gpu
    widths = [p.get_width() for p in bar.parts]
    assert widths[:3] == pytest.approx([g[k] / g["capacity_bytes"] for k in ("reserve_bytes", "weights_bytes",
                                                                             "kv_bytes")])
    assert sum(widths) == pytest.approx(1.0) and bar.ax.get_xlim() == (0, plot.MemoryBar.END)
    assert bar.ax.get_title(loc="left") == "one GPU's memory"
    assert bar.ax.get_title(loc="right") == "85.5 GB per GPU: reserve 8.55 GB, weights 17.6 GB"
    assert bar.total.get_text() == "47.7 GB in use"
    assert plot.MemoryBar.key_of(plan) == (g["capacity_bytes"], g["reserve_bytes"], g["weights_bytes"])


def test_a_bar_that_does_not_fit_says_how_much_it_needs_beside_the_line():
    plan = memory.plan("llama-3.1-405b", "h100", 2, 8192, 64)
    bar = plot.MemoryBar(_ax(), plan)
    bar.update(plan)
    assert bar.total.get_text().startswith("needs ") and bar.total.get_color() == plot.style.LIMIT
    assert 1.0 < bar.total.get_position()[0] < plot.MemoryBar.END and bar.total.get_text().endswith(" GB")


@pytest.mark.parametrize("tpot, rate", [((0.004, 0.9), (200.0, 9000.0)), ((0.01, 0.03), (30.0, 60.0))])
def test_batch_curve_scales_label_ticks_in_range(tpot, rate):
    ax = _ax()
    curve = plot.BatchCurve(ax, tpot, rate)
    drawn = curve.scales()
    for axis, (lo, hi) in zip(curve.axes, ([t * 1e3 for t in tpot], rate)):
        assert axis.get_ylim() == pytest.approx((lo / 1.25, hi * 1.25))
        shown = [t.get_position()[1] for t in drawn if t in axis.texts]
        assert len(shown) >= 2 and shown == sorted(shown) and all(lo / 1.25 <= y <= hi * 1.25 for y in shown)
    assert [t.get_text() for t in ax.texts if t in drawn] == (
        ["$\\mathdefault{10^{1}}$", "$\\mathdefault{10^{2}}$", "$\\mathdefault{10^{3}}$"] if tpot[0] == 0.004 else
        ["$\\mathdefault{10^{1}}$", "$\\mathdefault{2\\times10^{1}}$"])  # 8 to 37.5 ms: 2 and 5 labelled too


# --- the queue: a server under a stream of requests ------------------------------------------------------------------


def test_crossing_reads_between_the_rates_around_the_target():
    sweep = {"rate": [10, 20, 30, 40], "ttft_p99_s": [0.1, 1.0, 3.0, 9.0], "ttft_mean_s": [0.1, 0.2, 0.3, 0.4],
             "slo_ttft_s": 2.0}
    assert plot.crossing(sweep) == pytest.approx(25.0)  # 1.0 s at 20/s, 3.0 s at 30/s: 2 s half-way
    assert plot.crossing(sweep, "ttft_p99_s", 0.55) == pytest.approx(15.0)
    assert plot.crossing(sweep, "ttft_mean_s") is None  # never passes 2 s
    assert plot.crossing(sweep, value=0.05) is None  # passed at the first rate already: no rate below to read from
    with pytest.raises(InvalidValue, match="a sweep has no 'tpot_p95_s'"):
        plot.crossing(sweep, "tpot_p95_s")


def test_capacity_is_littles_law_with_every_place_full():
    from roofkit.perf.inference import workload

    full = workload.steady_state("llama-3-8b", "h100", 1000, 200, batch=256)
    assert plot.capacity("llama-3-8b", "h100", 1000, 200) == pytest.approx(256 / (199 * full.tpot_s))
    # fewer places than the memory holds: the places; more: the memory's batch
    few = workload.steady_state("llama-3-8b", "h100", 1000, 200, batch=64)
    assert plot.capacity("llama-3-8b", "h100", 1000, 200, max_num_seqs=64) == pytest.approx(few.requests_per_s)
    fits = workload.steady_state("llama-3-8b", "h100", 1000, 200)
    assert plot.capacity("llama-3-8b", "h100", 1000, 200, max_num_seqs=10_000) == pytest.approx(fits.requests_per_s)
    with pytest.raises(InvalidValue, match="do not fit"):
        plot.capacity("llama-3-70b", "h100", 1000, 200)


def test_a_run_is_kept_and_a_target_reuses_it():
    a = plot.simulation("llama-3-8b", "h100", 500, 50, 10, requests=200)
    assert plot.simulation("llama-3-8b", "h100", 500, 50, 10.0, requests=200) is a  # 10 and 10.0: one run
    strict = plot.simulation("llama-3-8b", "h100", 500, 50, 10, requests=200, slo_ttft_s=0.02)
    assert strict.ttft_s(99) == a.ttft_s(99) and strict.slo_ttft_s == 0.02 and strict.goodput <= a.goodput
    with pytest.raises(InvalidValue):
        plot.simulation("llama-3-8b", "h100", 500, 50, 0, requests=200)


def test_a_sweep_and_its_figure():
    sweep = plot.queue_sweep("llama-3-8b", "h100", 500, 50, rates=(40, 5, 20), requests=200)
    assert sweep["rate"] == [5.0, 20.0, 40.0] and len(sweep["ttft_p99_s"]) == 3
    assert sweep["lone_ttft_s"] == pytest.approx(latency.ttft("llama-3-8b", "h100", 500))
    assert all(p50 <= p99 for p50, p99 in zip(sweep["ttft_p50_s"], sweep["ttft_p99_s"]))
    assert all(g <= f * (1 + 1e-12) for g, f in zip(sweep["goodput"], sweep["requests_per_s"]))
    default = plot.queue_sweep("llama-3-8b", "h100", 500, 50, requests=200)
    cap = default["capacity"]
    assert default["rate"] == sorted({float(f"{cap * f:.2g}") for f in plot.LOADS})
    fig = plot.plot_queue(sweep)
    top, bottom = fig.axes
    assert top.get_yscale() == "log" and top.get_title().startswith("Llama 3 8B on H100")
    assert any(t.get_text() == "TTFT target 2 s" for t in top.texts)
    assert any(line.get_ydata()[0] == 2.0 for line in top.lines)  # the target as a line
    assert [line.get_label() for line in bottom.lines[:3]] == ["offered (the request rate)", "finished",
                                                               "goodput (TTFT ≤ 2 s, TPOT ≤ 200 ms)"]
