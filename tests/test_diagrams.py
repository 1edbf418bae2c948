"""Teaching figures (roofkit.diagrams) and the roofline plot's arrows: sizes from the catalog, times from costs.

Oracles: NVIDIA's H100 whitepaper (132 SMs; per SM a 256 KB register file and 256 KB of
combined L1 data cache and shared memory; 50 MB L2), the H100 datasheet (80 GB HBM3,
3.35 TB/s), and jax-ml/scaling-book's GPU chapter (quiz 1, question 5: "about 33MB
(132 * 256kB)" of SMEM and of registers on an H100).
"""

import pytest

from roofkit.plots import diagrams
from roofkit import formulas
from roofkit.catalogs import hardware
from roofkit import roofline
from roofkit.errors import InvalidValue


def test_memory_levels_come_from_the_catalog():
    levels = {level.name: level for level in diagrams.memory_levels("h100")}
    assert list(levels) == ["registers", "L1 / shared memory", "L2 cache", "HBM"]
    assert levels["registers"].size_bytes == 256 * 1024 and levels["registers"].count == 132
    assert levels["L1 / shared memory"].total_bytes == 132 * 256 * 1024  # scaling-book: about 33 MB
    assert levels["L2 cache"].size_bytes == 50e6 and levels["HBM"].size_bytes == 80e9
    text = diagrams.memory_table("h100")
    assert "33 MiB" in text and "3.35 TB/s" in text


def test_per_sm_sizes_are_cited():
    citations = set()
    for key in ("v100", "a100", "h100", "h100 pcie", "h200", "b200"):
        acc = hardware.get(key)
        assert acc.register_file_bytes == 256 * 1024, key  # 64K 32-bit registers in every generation
        citations |= {acc.source("register_file_bytes"), acc.source("l1_shared_bytes")}
    assert hardware.get("a100").l1_shared_bytes == 192 * 1024 and hardware.get("v100").l1_shared_bytes == 128 * 1024
    assert all("whitepaper" in c or "scaling-book" in c for c in citations)


def test_a_chip_without_the_figures_leaves_them_out():
    levels = [level.name for level in diagrams.memory_levels("t4")]
    assert "registers" not in levels and levels[-1] == "memory"  # the catalog does not say HBM or GDDR
    assert "memory bandwidth" in diagrams.memory_table("t4")


@pytest.mark.parametrize("key", [a.key for a in hardware.catalog()])
def test_every_accelerator_draws(key):
    fig = diagrams.chip(key, reads=[("x", 2e6)], writes=["y"], on_chip=["h"])
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "x (read)" in texts and "y (write)" in texts and "h" in texts
    assert diagrams.memory_table(key).startswith(hardware.get(key).name)


def test_chip_labels_carry_the_catalog_sizes():
    texts = " ".join(t.get_text() for t in diagrams.chip("h100").axes[0].texts)
    for figure in ("× 132", "registers 256 KiB", "L1 / shared memory 256 KiB", "L2 cache 50 MB", "80 GB",
                   "3.35 TB/s", "4 tensor cores"):
        assert figure in texts, figure
    with pytest.raises(InvalidValue, match="a flow is a name or a"):
        diagrams.chip("h100", reads=[("x", 1, 2)])


def test_time_bounds_bars_are_the_roofline_times():
    cost = formulas.gemm(4096, 4096, 4096, "bf16")
    h200 = hardware.get("h200")
    fig = diagrams.time_bounds(cost, "h200", "bf16", measured_s=176e-6)
    widths = sorted(p.get_width() for p in fig.axes[0].patches)  # µs
    assert widths == pytest.approx(sorted([cost.flops / h200.peak("bf16") * 1e6, cost.bytes / h200.bandwidth * 1e6,
                                           cost.flops / h200.peak("bf16", achievable=True) * 1e6,
                                           cost.bytes / h200.memory_bandwidth(achievable=True) * 1e6]))
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "sum 160" in texts and "sum 195" in texts and "measured 176 µs" in texts
    assert len(diagrams.time_bounds(cost, "b200", "bf16").axes[0].patches) == 2  # no achievable bandwidth
    with pytest.raises(InvalidValue):
        diagrams.time_bars([])


def test_curves_draw_one_line_per_series():
    fig = diagrams.curves([16, 256, 4096], [("a", [1, 2, 3]), ("flat", 5, {"ls": "--"})], "n", "I",
                          hline=(295, "ridge"), span=(256, 1, 5, "gap"))
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()][:2] == ["a", "flat"]
    assert list(ax.get_lines()[1].get_ydata()) == [5, 5, 5]


def test_curves_span_text_halfway_or_where_asked():
    """The span's text sits halfway up the arrow on the log axis, or at the fraction given (lesson 01 lowers it
    off the GEMM line that crosses the middle)."""
    middle = [t for t in diagrams.curves([1, 10], [("a", [1, 2])], "n", "y", span=(5, 1, 100, "gap")).axes[0].texts
              if t.get_text() == "gap"][0]
    assert middle.get_position()[1] == pytest.approx(10)
    low = [t for t in diagrams.curves([1, 10], [("a", [1, 2])], "n", "y", span=(5, 1, 100, "gap", 0.25)).axes[0].texts
           if t.get_text() == "gap"][0]
    assert low.get_position()[1] == pytest.approx(100**0.25)


def test_roofline_arrows_join_kernels_by_label():
    decode = {b: formulas.gemm(b, 4096, 4096, "bf16") for b in (1, 64)}
    fig = roofline.plot("h100", "bf16", kernels=[("b1", decode[1]), ("b64", decode[64])],
                        measured=[("slow", decode[64].intensity, 1e13)],
                        arrows=[("b1", "b64", "batching"), ("slow", (decode[64].intensity, 2e14), "tuning")])
    ax = fig.axes[0]
    arrows = [t for t in ax.texts if t.get_gid() == "arrow"]
    assert len(arrows) == 2
    assert arrows[0].xy == pytest.approx((decode[64].intensity, roofline.attainable(decode[64].intensity,
                                                                                  989e12, 3.35e12)))
    assert {"batching", "tuning"} <= {t.get_text() for t in ax.texts}
    with pytest.raises(InvalidValue, match="not on the plot"):
        roofline.plot("h100", "bf16", kernels=[("b1", decode[1])], arrows=[("b1", "nope", "x")])
    with pytest.raises(InvalidValue, match=r"\(start, end, text\)"):
        roofline.plot("h100", "bf16", kernels=[("b1", decode[1])], arrows=[("b1",)])
