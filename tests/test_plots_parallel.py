"""roofkit.plots_parallel draws what comms and parallel compute: the lines, dots and bars are read back
from the figures and compared with the numbers they stand for; bad input is one clear error."""

import numpy as np
import pytest

from roofkit.perf import comms, parallel
from roofkit.catalogs import links
from roofkit.plots import parallel as pp
from roofkit.errors import InvalidValue

PLAN_ARGS = dict(model="llama-3-70b", hw="h100", gpus=1024, global_batch_tokens=4 * 2**20, seq=8192,
                 sequence_parallel=True)


@pytest.fixture(scope="module")
def plans():
    return [parallel.plan(**PLAN_ARGS, tp=8, zero=z) for z in (0, 1, 3)] + [parallel.plan(**PLAN_ARGS, tp=8, pp=4,
                                                                                          zero=1)]


def _by_gid(ax, gid):
    return [artist for artist in ax.get_children() if artist.get_gid() == gid]


def _bars(ax, gid):
    """The bars of one part, one per plan, in the order of the plans."""
    return [patch for patch in ax.patches if patch.get_gid() == gid]


# --- collective time against message size -------------------------------------------------------

def test_collective_lines_are_the_alpha_beta_model():
    curves = [("hgx-h100", 8), ("hgx-h100", "ib-ndr", 8, 16)]
    fig = pp.collective_plot("all-reduce", curves, sizes=(1e3, 1e10))
    ax = fig.axes[0]
    lines = _by_gid(ax, "collective-time")
    assert len(lines) == 2
    flat, two_level = (line.get_data() for line in lines)
    for S, t in zip(*flat):
        assert t == pytest.approx(comms.all_reduce(S, 8, "hgx-h100").time_s, rel=1e-9)
    for S, t in list(zip(*two_level))[::10]:
        assert t == pytest.approx(comms.hierarchical("all-reduce", S, 8, 16, "hgx-h100", "ib-ndr",
                                                     algorithm="ring").time_s, rel=1e-9)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlim() == pytest.approx((1e3, 1e10))


def test_the_latency_bound_dot_sits_where_the_latency_stops_outweighing_the_transfer():
    fig = pp.collective_plot("all-reduce", [("hgx-h100", 8)])
    (dot,) = _by_gid(fig.axes[0], "latency-bound size")
    (S,), (t,) = dot.get_data()
    # the dot is the exact crossing, not the last grid point before it (the learner's report compared 8.66 MB on
    # the plot with n α β: a grid point stands for nothing)
    assert comms.all_reduce(S * (1 - 1e-5), 8, "hgx-h100").latency_bound
    assert not comms.all_reduce(S * (1 + 1e-5), 8, "hgx-h100").latency_bound
    assert t == pytest.approx(comms.all_reduce(S, 8, "hgx-h100").time_s)
    # with Simple's latency per step and all the bandwidth, the crossing is between n α β (LL's) and n α_Simple β
    node = links.get("hgx-h100")
    assert 8 * node.latency * node.bandwidth < S < 8 * 3.4e-6 * node.bandwidth


def test_the_bands_cover_exactly_the_latency_bound_sizes():
    # a protocol or algorithm switch trades latency for bandwidth: the band has gaps, and each band is latency-bound
    fig = pp.collective_plot("all-reduce", [("hgx-h100", 8, "auto")])
    bands = _by_gid(fig.axes[0], "latency-bound region")
    ranges = pp.Curve("hgx-h100", 8, algorithm="auto").latency_bound_ranges("all-reduce", np.geomspace(1e3, 1e10, 49))
    assert len(bands) == len(ranges) > 1
    for band, (start, end) in zip(bands, ranges):
        sizes = band.get_xdata()
        assert sizes[0] == pytest.approx(start) and sizes[-1] == pytest.approx(end)
        assert all(comms.all_reduce(x, 8, "hgx-h100", "auto").latency_bound for x in sizes[1:-1])
    for (_, end), (start, _) in zip(ranges, ranges[1:]):  # between two bands: not latency-bound
        middle = (end * start) ** 0.5
        assert not comms.all_reduce(middle, 8, "hgx-h100", "auto").latency_bound
    (dot,) = _by_gid(fig.axes[0], "latency-bound size")
    nvls = comms.all_reduce(1e9, 8, "hgx-h100", "nvls")  # the largest latency-bound size: NVLS's own crossing
    assert dot.get_xdata()[0] == pytest.approx(nvls.latency_bound_below_bytes, rel=1e-4)


def test_hierarchical_curves_have_their_own_s_star():
    curve = pp.Curve("hgx-h100", 8, "ib-ndr", 16)
    sizes = [1e3 * 10 ** (k / 4) for k in range(29)]
    star = curve.latency_bound_below("all-reduce", sizes)
    hierarchical = lambda S: comms.hierarchical("all-reduce", S, 8, 16, "hgx-h100", "ib-ndr", algorithm="ring")  # noqa
    assert hierarchical(star * (1 - 1e-5)).latency_bound and not hierarchical(star * (1 + 1e-5)).latency_bound
    assert curve.times("all-reduce", [star, 1e9]) == pytest.approx([hierarchical(star).time_s, hierarchical(1e9).time_s])
    assert "16 nodes of 8" in curve.title() and "InfiniBand NDR" in curve.title()
    assert "NCCL's fastest" in pp.Curve("hgx-h100", 8, algorithm="auto").title()


def test_curves_are_given_many_ways():
    assert pp._curve(("ib-ndr", 64)) == pp.Curve("ib-ndr", 64)
    assert pp._curve(("hgx-h100", "ib-ndr", 8, 4)) == pp.Curve("hgx-h100", 8, "ib-ndr", 4)
    assert pp._curve({"link": "nvlink4", "gpus": 2, "label": "two"}).title() == "two"
    with pytest.raises(InvalidValue, match="a curve is"):
        pp.collective_plot("all-reduce", [("hgx-h100",)])
    with pytest.raises(InvalidValue, match="at least one curve"):
        pp.collective_plot("all-reduce", [])
    with pytest.raises(InvalidValue, match="sizes must be"):
        pp.collective_plot("all-reduce", [("hgx-h100", 8)], sizes=(1e6, 1e3))
    with pytest.raises(comms.UnknownCollective):
        pp.collective_plot("all-reduse", [("hgx-h100", 8)])
    with pytest.raises(InvalidValue, match="connects at most 8 GPUs"):
        pp.collective_plot("all-reduce", [("hgx-h100", 16)])


# --- step-time and memory bars -----------------------------------------------------------------------

def test_step_bars_are_compute_communication_and_bubble(plans):
    fig = pp.step_plot(plans)
    ax = fig.axes[0]
    for attribute, *_ in pp.STEP_PARTS:
        bars = _bars(ax, attribute)
        if attribute == "experts_host_s":  # the estimate's cost per expert: no bar, no legend without experts
            assert not bars and all(p.experts_host_s == 0 for p in plans)
            assert "experts one by one (estimate)" not in [t.get_text() for t in ax.get_legend().get_texts()]
            continue
        # the first plan is drawn on top: bars go bottom-up, plans top-down
        assert [b.get_width() for b in bars] == pytest.approx([getattr(p, attribute) for p in plans])
    ends = [b.get_x() + b.get_width() for b in _bars(ax, "optimizer_s")]
    assert ends == pytest.approx([p.step_time_s for p in plans])
    labels = [t.get_text() for t in ax.texts]
    assert f"MFU {plans[0].mfu:.0%}, {plans[0].step_time_s:.3g} s" in labels
    where = dict(zip([t.get_text() for t in ax.get_yticklabels()], ax.get_yticks()))
    assert list(where) == [p.layout for p in plans] and where[plans[0].layout] == max(where.values())  # first on top


def test_step_bars_of_a_calibrated_mixture_of_experts_show_its_experts_one_by_one():
    from roofkit import parallel

    moe = parallel.plan("qwen3-30b-a3b", "h100", 8, 64 * 4096, 4096, ep=8, zero=1, calibrated=True)
    ax = pp.step_plot([moe]).axes[0]
    (bar,) = _bars(ax, "experts_host_s")
    assert bar.get_width() == pytest.approx(moe.experts_host_s) and moe.experts_host_s > 0
    assert bar.get_x() + bar.get_width() == pytest.approx(moe.step_time_s)
    assert "experts one by one (estimate)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_step_bars_as_shares_add_up_to_one(plans):
    ax = pp.step_plot(plans, share=True).axes[0]
    ends = [b.get_x() + b.get_width() for b in _bars(ax, "optimizer_s")]
    assert ends == pytest.approx([1.0] * len(plans))
    pipelined = _bars(ax, "bubble_s")[3].get_width()
    assert pipelined == pytest.approx(plans[3].bubble_s / plans[3].step_time_s) and pipelined > 0


def test_memory_bars_are_the_plans_memory(plans):
    ax = pp.memory_plot(plans, labels=["a", "b", "c", "d"]).axes[0]
    for key, *_ in pp.MEMORY_PARTS:
        widths = [b.get_width() for b in _bars(ax, key)]
        expected = [p.memory.get(key, 0.0) / 1e9 for p in plans]
        assert widths == pytest.approx(expected) or (not widths and not any(expected))  # ZeRO-3's part, if any
    (line,) = _by_gid(ax, "capacity")
    from roofkit.catalogs import hardware

    assert line.get_xdata()[0] == pytest.approx(hardware.get("h100").capacity_bytes / 1e9)  # as the card reports
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith(f"{plans[0].memory_per_gpu_bytes / 1e9:.3g} GB does not fit") for t in texts), texts
    assert any(t.startswith(f"{plans[1].memory_per_gpu_bytes / 1e9:.3g} GB fits") for t in texts), texts
    # the line is the memory the card reports, and says so (not the datasheet's name for the card alone)
    usable = f"{hardware.get('h100').capacity_bytes / 1e9:.3g} GB per GPU, as the card reports it"
    assert any(usable in t for t in texts), texts


def test_one_plan_alone_and_on_a_given_axes():
    from matplotlib.figure import Figure

    plan = parallel.plan(**PLAN_ARGS, tp=8, pp=4, zero=1)
    fig = Figure()
    left, right = fig.subplots(1, 2)
    assert pp.memory_plot(plan, ax=left) is fig and pp.step_plot(plan, ax=right) is fig


def test_bad_bars_input(plans):
    with pytest.raises(InvalidValue, match="2 labels for 4 plans"):
        pp.step_plot(plans, labels=["x", "y"])
    with pytest.raises(InvalidValue, match="at least one plan"):
        pp.memory_plot([])


# --- text tables ----------------------------------------------------------------------------------------

def test_plan_table_has_one_row_per_plan_with_its_numbers(plans):
    lines = pp.plan_table(plans).splitlines()
    assert len(lines) == 1 + len(plans)
    assert lines[0].split()[:3] == ["layout", "GPUs", "tok/GPU"]
    first = lines[1]
    assert first.startswith(plans[0].layout) and "no" in first.split()
    assert f"{plans[0].mfu:.1%}" in first and f"{plans[0].step_time_s:.3g}" in first
    assert f"{plans[0].tokens_per_gpu:,.0f}" in first


def test_link_table_shows_the_quote_and_the_direction():
    lines = pp.link_table(["nvlink4", "ib-ndr"]).splitlines()
    assert "900 GB/s, both directions, per GPU" in lines[1] and "450 GB/s" in lines[1]
    assert "400 Gb/s, per direction, per port" in lines[2] and "50 GB/s" in lines[2]
    assert len(pp.link_table().splitlines()) == 1 + len(links.catalog())


def test_figures_are_not_left_open():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    pp.collective_plot("all-gather", [("nvlink4", 2)])
    assert plt.get_fignums() == before


# --- published runs against roofkit ------------------------------------------------------------------------

def test_published_plot_puts_bounds_under_the_diagonal():
    rows = [{"case": "a", "set": "fitting", "published_s": 10.0, "bound_ratio": 0.6, "calibrated_ratio": 1.05},
            {"case": "b", "set": "held-out", "published_s": 2.0, "bound_ratio": 0.5, "calibrated_ratio": 0.9}]
    ax = pp.published_plot(rows).axes[0]
    bound = _by_gid(ax, "bound-fitting")[0].get_offsets()
    assert list(bound[0]) == pytest.approx([10.0, 6.0])
    estimate = _by_gid(ax, "calibrated-held-out")[0].get_offsets()
    assert list(estimate[0]) == pytest.approx([2.0, 1.8])
    assert ax.get_xscale() == ax.get_yscale() == "log"
    text = pp.published_table(rows)
    assert "0.60" in text and "1.05" in text and text.count("\n") == 2
    with pytest.raises(InvalidValue, match="at least one run"):
        pp.published_plot([])


def test_published_plot_rings_the_runs_it_is_told_to():
    rows = [{"case": "a", "set": "fitting", "published_s": 10.0, "bound_ratio": 0.6, "calibrated_ratio": 0.5},
            {"case": "b", "set": "held-out", "published_s": 2.0, "bound_ratio": 0.5, "calibrated_ratio": 0.9}]
    ax = pp.published_plot(rows, ring=("mixtures of experts", {"a"})).axes[0]
    ringed = _by_gid(ax, "ring")[0].get_offsets()
    assert [list(x) for x in ringed] == [pytest.approx([10.0, 5.0])]
    assert "calibrated, mixtures of experts" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert not _by_gid(pp.published_plot(rows).axes[0], "ring")  # none unless asked


def test_plan_bars_draw_memory_as_shares_of_the_accelerators(plans):
    from matplotlib.figure import Figure

    from roofkit.catalogs import hardware

    memory_ax, step_ax = Figure().subplots(1, 2)
    capacity = hardware.get("h100").capacity_bytes
    bars = pp.PlanBars(memory_ax, step_ax, capacity, "H100")
    bars.update(plans[0])
    assert memory_ax.get_xlim() == (0, pp.PlanBars.END)
    held = sum(bar.get_width() for bar in bars.memory)
    assert held == pytest.approx(plans[0].memory_per_gpu_bytes / capacity)
    assert bars.total.get_text().startswith(f"{plans[0].memory_per_gpu_bytes / 1e9:.3g} GB")
    assert any(t.get_text() == f" H100: {capacity / 1e9:.3g} GB" for t in memory_ax.texts)
    assert sum(bar.get_width() for bar in bars.step) == pytest.approx(1.0)
