"""roofkit.plots_parallel draws what comms and parallel compute: the lines, dots and bars are read back
from the figures and compared with the numbers they stand for; bad input is one clear error."""

import pytest

from roofkit import comms, links, parallel, plots_parallel as pp
from roofkit.errors import InvalidValue

PLAN_ARGS = dict(model="llama-3-70b", hw="h100", gpus=1024, global_batch_tokens=4 * 2**20, seq=8192)


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
    for S, t in list(zip(*two_level))[::20]:
        assert t == pytest.approx(comms.hierarchical("all-reduce", S, 8, 16, "hgx-h100", "ib-ndr").time_s, rel=1e-9)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlim() == pytest.approx((1e3, 1e10))


def test_the_latency_bound_dot_sits_at_s_star_where_the_two_terms_are_equal():
    fig = pp.collective_plot("all-reduce", [("hgx-h100", 8)])
    (dot,) = _by_gid(fig.axes[0], "latency-bound size")
    (S,), (t,) = dot.get_data()
    node = links.get("hgx-h100")
    assert S == pytest.approx(8 * node.latency * node.bandwidth)  # S* = n α β for a ring all-reduce
    assert t == pytest.approx(2 * comms.latency_term("all-reduce", 8, node.latency))  # α terms = transfer
    band = _by_gid(fig.axes[0], "latency-bound region")[0]
    assert max(band.get_xdata()) <= S  # the band covers only the latency-bound sizes
    assert "S* = 2.16 MB" in [t.get_text() for t in fig.axes[0].texts]


def test_hierarchical_curves_have_their_own_s_star():
    curve = pp.Curve("hgx-h100", 8, "ib-ndr", 16)
    r = comms.hierarchical("all-reduce", 1e9, 8, 16, "hgx-h100", "ib-ndr")
    star = r.latency_bound_below_bytes
    at_star = comms.hierarchical("all-reduce", star, 8, 16, "hgx-h100", "ib-ndr")
    assert at_star.latency_s == pytest.approx(at_star.transfer_s)
    assert curve.times("all-reduce", [star, 1e9]) == pytest.approx([at_star.time_s, r.time_s])
    assert "16 nodes of 8" in curve.title() and "InfiniBand NDR" in curve.title()


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
        # the first plan is drawn on top: bars go bottom-up, plans top-down
        assert [b.get_width() for b in bars] == pytest.approx([getattr(p, attribute) for p in plans])
    ends = [b.get_x() + b.get_width() for b in _bars(ax, "bubble_s")]
    assert ends == pytest.approx([p.step_time_s for p in plans])
    labels = [t.get_text() for t in ax.texts]
    assert f"MFU {plans[0].mfu:.0%}, {plans[0].step_time_s:.3g} s" in labels
    where = dict(zip([t.get_text() for t in ax.get_yticklabels()], ax.get_yticks()))
    assert list(where) == [p.layout for p in plans] and where[plans[0].layout] == max(where.values())  # first on top


def test_step_bars_as_shares_add_up_to_one(plans):
    ax = pp.step_plot(plans, share=True).axes[0]
    ends = [b.get_x() + b.get_width() for b in _bars(ax, "bubble_s")]
    assert ends == pytest.approx([1.0] * len(plans))
    pipelined = _bars(ax, "bubble_s")[3].get_width()
    assert pipelined == pytest.approx(plans[3].bubble_s / plans[3].step_time_s) and pipelined > 0


def test_memory_bars_are_the_plans_memory(plans):
    ax = pp.memory_plot(plans, labels=["a", "b", "c", "d"]).axes[0]
    for key, *_ in pp.MEMORY_PARTS:
        widths = [b.get_width() for b in _bars(ax, key)]
        assert widths == pytest.approx([p.memory[key] / 1e9 for p in plans])
    (line,) = _by_gid(ax, "capacity")
    assert line.get_xdata()[0] == pytest.approx(80)  # the H100's memory, from the catalog, in GB
    texts = [t.get_text() for t in ax.texts]
    assert f"{plans[0].memory_per_gpu_bytes / 1e9:.3g} GB does not fit" in texts
    assert f"{plans[1].memory_per_gpu_bytes / 1e9:.3g} GB fits" in texts


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
