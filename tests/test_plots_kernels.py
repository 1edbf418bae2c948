"""roofkit.plots_kernels: the figures and tables of lessons 09 and 10 show what roofkit computes."""

import math

import pytest

from roofkit import formulas
from roofkit import roofline
from roofkit.perf import fusion
from roofkit.plots import kernels as plots_kernels
from roofkit.errors import InvalidValue


@pytest.mark.parametrize("pct, name", [(95, "essentially optimal"), (90, "very strong"), (73, "very strong"),
                                       (70, "common"), (50, "acceptable"), (31, "acceptable"), (20, "weak"),
                                       (10, "investigate"), (0, "investigate")])
def test_bands_of_lesson_03(pct, name):
    assert plots_kernels.band(pct) == name


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf])
def test_band_bad_input(bad):
    with pytest.raises(InvalidValue, match="percent of roofline must be"):
        plots_kernels.band(bad)


def test_profile_rows_are_predicted_over_measured():
    ops = formulas.transformer_layer_ops(1, 4096, 4096, 32, 11008, "bf16", gated=True, fused_attention=False)
    rows = plots_kernels.profile(ops, {"attn.softmax": 820, "qkv": 520}, "h100", "bf16")
    for row in rows:
        predicted = roofline.analyze(ops[row.name], "h100", "bf16").time_s
        assert row.percent_of_roofline == pytest.approx(100 * predicted / row.measured_s)
        assert row.band == plots_kernels.band(row.percent_of_roofline)
        assert row.point() == (row.name, row.intensity, row.achieved_flops_per_s)
    table = plots_kernels.profile_table(rows)
    assert table.splitlines()[0].startswith("kernel") and "attn.softmax" in table
    with pytest.raises(InvalidValue, match=r"^profile: no kernel named 'nope'; the kernels are: norm1"):
        plots_kernels.profile(ops, {"nope": 1}, "h100")


def test_figures_are_not_left_open_in_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    figures = [plots_kernels.launch_overhead(), plots_kernels.flash_tiles(), plots_kernels.amdahl(),
               plots_kernels.flash_intensity(on_chip={"128 rows": formulas.attention_tile_bytes(128, 128, 2)})]
    assert all(fig.axes for fig in figures)
    assert plt.get_fignums() == before


def test_flash_intensity_draws_the_ideal_and_the_tiled_counts():
    M = formulas.attention_tile_bytes(128, 128, "bf16")
    fig = plots_kernels.flash_intensity("h100", "bf16", 128, {"128 rows": M}, seq_range=(1024, 2**16))
    (ideal_x, ideal_y), (x, y) = (line.get_data() for line in fig.axes[0].lines[:2])
    assert ideal_y[-1] == pytest.approx(formulas.attention_fused(1, 1, ideal_x[-1], 128, "bf16").intensity)
    assert y[-1] == pytest.approx(formulas.attention_fused(1, 1, x[-1], 128, "bf16", on_chip_bytes=M).intensity)
    assert y[-1] < 1.1 * y[len(y) // 2]  # levelled off


def test_flash_tiles_shows_the_online_softmax_state():
    fig = plots_kernels.flash_tiles(tiles=4, causal=True, row_tile=2, scores_per_block=5, seed=1)
    labels = [t.get_text() for t in fig.axes[1].texts]
    assert len(labels) == 3  # row 2 of a causal 4 x 4: three blocks
    with pytest.raises(InvalidValue, match="flash_tiles draws 2 to 12 tiles"):
        plots_kernels.flash_tiles(tiles=1)
    with pytest.raises(InvalidValue, match="flash_tiles draws 2 to 12 tiles"):
        plots_kernels.flash_tiles(tiles=4, row_tile=4)


def test_flash_tiles_draws_the_row_it_is_given():
    # lesson 09 prints the online softmax of a row and draws the same row: the labels are its running state
    import numpy as np

    scores = np.random.default_rng(0).normal(0, 3, 24)
    state = fusion.online_softmax(scores, 6)
    fig = plots_kernels.flash_tiles(tiles=6, causal=True, row_tile=3, scores_per_block=6, scores=scores)
    heights = [bar.get_height() for bar in fig.axes[1].patches]
    assert heights == pytest.approx(list(scores))
    labels = [t.get_text() for t in fig.axes[1].texts]
    assert labels == [f"m = {m:.2f}\nℓ = {l:.3g}" for m, l in zip(state.maxima, state.sums)]
    with pytest.raises(InvalidValue, match=r"scores must be one row of 4 blocks x 6 = 24 scores"):
        plots_kernels.flash_tiles(tiles=6, causal=True, row_tile=3, scores_per_block=6, scores=scores[:20])


def test_launch_overhead_draws_the_max_of_cpu_and_gpu():
    fig = plots_kernels.launch_overhead(["bias_add", "gelu"], "h100", "bf16", sizes=(1e2, 1e10),
                                        launch_overhead_s=4e-6, kernel_floor_s=6e-6)
    (x, unfused), (_, fused) = (line.get_data() for line in fig.axes[0].lines[:2])
    assert unfused[0] == pytest.approx(2 * 6e-6, rel=1e-3)  # a tiny tensor: two floors, the CPU hidden
    assert fused[0] == pytest.approx(6e-6, rel=1e-3)
    chain = fusion.chain(["bias_add", "gelu"], n=x[-1], bytes_per_element="bf16")
    assert unfused[-1] == pytest.approx(chain.time("h100", "bf16", 4e-6, 6e-6)["unfused_s"])


def test_amdahl_marks_the_example():
    fig = plots_kernels.amdahl(shares=(0.1,), mark=(0.1, 2))
    x, y = fig.axes[0].lines[-1].get_data()
    assert (x[0], y[0]) == (2, pytest.approx(fusion.amdahl(0.1, 2)))
