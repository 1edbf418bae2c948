"""One style for the course's figures (roofkit/plots/style.py): no figure module keeps colours or sizes of its own."""

import re
from pathlib import Path

import pytest

from roofkit.plots import style

ROOT = Path(__file__).resolve().parents[1] / "roofkit"
MODULES = sorted([*(ROOT / "plots").glob("*.py"), *(ROOT / "course" / "explore").glob("*.py")])
# a colour written out ('#c44e52', '#b00', matplotlib's 'C3' or 'tab:red') or a font size as a number
OWN = re.compile(r"""["']#[0-9a-fA-F]{3,6}["']|#[0-9a-fA-F]{3,6}'|["']C\d["']|f["']C\{|["']tab:[a-z]+["']|"""
                 r"""fontsize=\d""")


def own_style(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if OWN.search(line)]


@pytest.mark.parametrize("path", [p for p in MODULES if p.name not in ("style.py", "__init__.py")], ids=lambda p: p.name)
def test_figures_take_colours_and_sizes_from_the_style(path):
    assert not own_style(path.read_text(encoding="utf-8")), path


def test_the_check_finds_a_colour_or_a_size_of_its_own():
    assert own_style('ax.plot(x, y, color="#c44e52")\nax.text(0, 0, "a", fontsize=9)\nc = "C3"\n') == [
        'ax.plot(x, y, color="#c44e52")', 'ax.text(0, 0, "a", fontsize=9)', 'c = "C3"']
    assert own_style("f\"<b style='color:#b00'>x</b>\"") and own_style('color="tab:red"')
    assert own_style('ax.plot(x, y, color=style.LIMIT, fontsize=style.SIZE["text"])') == []


def test_a_bound_has_one_colour_and_time_bars_use_it():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.colors import to_hex

    from roofkit import diagrams, formulas
    from roofkit.plots.parallel import STEP_PARTS

    assert len(set(style.BOUND.values())) == len(style.BOUND) == 4
    fig = diagrams.time_bounds(formulas.gemm(4096, 4096, 4096, 2), "h100", "bf16")
    colours = {to_hex(p.get_facecolor()[:3]) for p in fig.axes[0].patches}
    assert {style.BOUND["compute"], style.BOUND["memory"]} <= colours
    assert dict((key, colour) for key, _, colour, _ in STEP_PARTS)["compute_s"] == style.BOUND["compute"]


def test_accelerators_on_a_roofline_take_no_colour_that_means_something_else():
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.colors import to_hex

    from roofkit import roofline

    meaning = {*style.BOUND.values(), style.LIMIT, style.MEASURED} - {style.BOUND["compute"]}
    assert len(set(style.ACCELERATORS)) == len(style.ACCELERATORS) and not meaning & set(style.ACCELERATORS)
    fig = roofline.plot(["h100", "a100", "mi300x"], "bf16")
    drawn = {to_hex(line.get_color()) for line in fig.axes[0].get_lines()}
    assert set(style.ACCELERATORS[:3]) <= drawn and style.BOUND["memory"] not in drawn


def test_a_limit_label_near_the_right_edge_sits_left_of_its_line_and_stays_in_the_figure():
    from matplotlib.figure import Figure

    from roofkit.plots import style as plot_style

    fig = Figure(figsize=(4, 2), dpi=96)
    ax = fig.add_subplot()
    ax.set_xlim(0, 100)
    near, far = plot_style.limit_label(ax, 90, "85.5 GB per GPU"), plot_style.limit_label(ax, 20, "85.5 GB per GPU")
    assert (near.get_ha(), far.get_ha()) == ("right", "left")
    fig.canvas.draw()
    box = near.get_window_extent()
    assert box.x0 >= 0 and box.x1 <= fig.bbox.x1  # nothing clipped by the figure's edge


def test_the_longest_sums_label_stays_in_the_figure():
    from matplotlib.figure import Figure

    from roofkit.plots import diagrams

    fig = Figure(figsize=(2.5, 3), dpi=96)  # a narrow panel whose axes reach the figure's right edge, as in an explorer
    bars = diagrams.TimeBars(fig.add_axes([0.15, 0.25, 0.84, 0.6]), ["datasheet roofs"])
    bars.update([("datasheet roofs", 0.5, 0.217)])
    fig.canvas.draw()
    high_text = bars.rows[0][4]
    assert high_text.get_text() == "sum 717 ms" and high_text.get_window_extent().x1 <= fig.bbox.x1
