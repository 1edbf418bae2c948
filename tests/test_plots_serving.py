"""The serving explorer's figures (roofkit/plots/serving.py): the memory bar as shares of one GPU's memory with
its GB in the title, and the latency curve's y scales drawn as artists of their own for the ranges set."""

import math

import pytest

from roofkit.perf.inference import memory
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
