"""The roofline chart in pieces (roofkit/plots/roofline.py): plot() is frame() + draw_roofs() + kernels + legend,
so the explorer that draws the pieces one at a time shows the roofs plot() shows, on axes that hold any chip."""

import pytest

from roofkit import roofline
from roofkit.catalogs import hardware


def _lines(ax) -> dict:
    return {(line.get_gid(), line.get_label()): [list(map(float, xy)) for xy in line.get_data()]
            for line in ax.get_lines()}


@pytest.mark.parametrize("accelerator, precision", [("h100", "bf16"), ("t4", "fp16"), ("b200", "fp4")])
def test_draw_roofs_draws_the_roofs_plot_draws(accelerator, precision):
    from matplotlib.figure import Figure

    xlim = (1e-2, 1e5)
    whole = roofline.plot(accelerator, precision, xlim=xlim).axes[0]
    ax = Figure().add_subplot()
    roofline.frame(ax, xlim, whole.get_ylim())
    roofline.draw_roofs(ax, [accelerator], [precision], xlim=xlim, ylim=whole.get_ylim())
    assert _lines(ax) == _lines(whole)
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_xlim() == xlim
    assert [t.get_text() for t in ax.texts] == [t.get_text() for t in whole.texts]


def test_span_is_the_range_plot_gives():
    acc = hardware.get("h100")
    fig = roofline.plot("h100", "bf16", xlim=(1e-2, 1e5))
    assert fig.axes[0].get_ylim() == pytest.approx(roofline.span([(acc.peak("bf16"), acc.bandwidth)], (1e-2, 1e5)))


def test_kinds_legend_names_the_marks_without_figures():
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    legend = roofline.kinds_legend(ax)
    assert [t.get_text() for t in legend.get_texts()] == [
        "datasheet roofs (memory, then compute)", "achievable roofs (measured)", "predicted (on the roof)"]
    assert roofline.roof_figures(989e12, 3.35e12) == "989 TFLOP/s, 3.35 TB/s"


def test_kernel_marks_are_empty_until_moved():
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    dot, label = roofline.kernel_marks(ax)
    assert list(dot.get_xdata()) == [] and label.get_text() == "" and label.get_gid() == "kernel-label"


def test_a_label_placed_far_from_its_dot_gets_a_line_to_it():
    """A predicted kernel's label more than 25 points from its dot is joined to it by a thin line (lesson 03's
    'GEMM 4096³', placed under the ridges' labels); a label at the usual offset is not."""
    fig = roofline.plot("h100", "bf16", kernels=[roofline.Kernel("far", 1365, label_offset=(6, -26)),
                                                 roofline.Kernel("near", 1.0),
                                                 roofline.Kernel("placed", 10.0, label_offset=(10, -22))])
    labels = {t.get_text(): t for t in fig.axes[0].texts if t.get_gid() == "kernel-label"}
    assert labels["far"].arrow_patch is not None
    assert labels["near"].arrow_patch is None and labels["placed"].arrow_patch is None
    assert labels["far"].get_zorder() < min(t.get_zorder() for t in fig.axes[0].texts if t.get_gid() != "kernel-label")
