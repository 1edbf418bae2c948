"""roofkit.layerview: a layer's op table and figures agree with roofline.analyze and with hand counts.

Oracles: roofline.analyze op by op; hand-derived byte counts of a decode step (weights and KV cache);
the figures' own artists (bars, markers, lines) read back and compared with the numbers they draw.
"""

import pytest
from matplotlib.figure import Figure

import roofkit
from roofkit.plots import layers as layerview
from roofkit import roofline
from roofkit.errors import InvalidValue

LLAMA3 = roofkit.model("llama-3-8b")
PREFILL = LLAMA3.layer_ops(1, 4096)


def test_place_is_analyze_op_by_op_and_total_adds_the_lower_bounds():
    placed = layerview.place(PREFILL, "h100", "bf16")
    assert list(placed) == list(PREFILL)
    for name, cost in PREFILL.items():
        assert placed[name] == roofline.analyze(cost, "h100", "bf16")
    assert layerview.total(placed) == pytest.approx(sum(p.time_s for p in placed.values()))
    assert layerview.total(placed, layerview.GEMMS) == pytest.approx(sum(placed[n].time_s for n in layerview.GEMMS))
    assert layerview.total(placed, ()) == 0


def test_place_at_other_roofs_is_analyze_on_those_roofs():
    h100 = roofkit.hw("h100")
    achievable = h100.peak("bf16", achievable=True)
    placed = layerview.place(PREFILL, "h100", "bf16", peak=achievable)
    for name, cost in PREFILL.items():
        by_hand = roofline.time_bounds(cost.flops, cost.bytes, achievable, h100.bandwidth)[0]
        assert placed[name].time_s == pytest.approx(by_hand, rel=1e-12)
    # the compute-bound GEMMs slow down by the peaks' ratio, the memory-bound ops not at all
    datasheet = layerview.place(PREFILL, "h100", "bf16")
    assert placed["mlp.up"].time_s / datasheet["mlp.up"].time_s == pytest.approx(h100.peak("bf16") / achievable)
    assert placed["residual1"].time_s == datasheet["residual1"].time_s
    slow = layerview.place(PREFILL, "h100", "bf16", bandwidth=h100.bandwidth / 2)
    assert slow["residual1"].time_s == pytest.approx(2 * datasheet["residual1"].time_s)
    assert roofkit.hw("h100").peak("bf16") == 989e12  # the catalog entry is left as it was
    with pytest.raises(InvalidValue, match="peak must be"):
        layerview.place(PREFILL, "h100", "bf16", peak=0)


def test_table_has_one_row_per_op_and_shares_that_add_to_one():
    placed = layerview.place(PREFILL, "h100", "bf16")
    rows = layerview.table(placed).splitlines()
    assert rows[0].split() == ["op", "GFLOP", "MB", "FLOP/B", "bound", "µs", "share"]
    assert [r.split()[0] for r in rows[1:]] == list(PREFILL)
    shares = [float(r.split()[-1].rstrip("%")) for r in rows[1:]]
    assert sum(shares) == pytest.approx(100, abs=0.6)
    qkv = next(r for r in rows if r.startswith("qkv")).split()
    assert qkv[4] == "compute" and float(qkv[5]) == pytest.approx(placed["qkv"].time_s * 1e6, rel=1e-3)


@pytest.mark.parametrize("bad", [{}, None, [("qkv", 1)]])
def test_place_rejects_what_is_not_a_layer(bad):
    with pytest.raises(InvalidValue, match="place"):
        layerview.place(bad, "h100", "bf16")


def test_dots_group_close_intensities_under_one_label():
    dots = layerview.dots(PREFILL)
    assert len(dots) == len(PREFILL)
    labels = [label for label, _ in dots if label]
    assert "residuals" in labels and any("norms" in label for label in labels)
    assert any("GEMMs" in label for label in labels)
    intensities = [float(c.intensity) for _, c in dots]
    assert intensities == sorted(intensities)


def test_rooflines_draw_one_panel_per_workload_with_every_op_on_it():
    decode = LLAMA3.layer_ops(1, 1, 4096)
    fig = layerview.rooflines([("h100", "bf16", PREFILL, "prefill"), ("a100", "bf16", decode, "decode")])
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    assert [ax.get_title() for ax in fig.axes] == ["prefill", "decode"]
    for ax in fig.axes:
        assert len([c for c in ax.collections if c.get_gid() == "kernel"]) == len(PREFILL)
    with pytest.raises(InvalidValue):
        layerview.rooflines([])


def test_time_bars_parts_add_up_to_each_designs_total():
    placed = layerview.place(PREFILL, "h100", "bf16")
    unfused = layerview.place(LLAMA3.layer_ops(1, 4096, fused_attention=False), "h100", "bf16")
    fig = layerview.time_bars({"unfused": unfused, "fused": placed})
    ax = fig.axes[0]
    for row, design in enumerate((unfused, placed)):
        widths = [p.get_width() for p in ax.patches if round(p.get_y() + p.get_height() / 2) == row]
        assert sum(widths) == pytest.approx(layerview.total(design) * 1e6)
    gemm_bar = next(p for p in ax.patches if p.get_gid() == "weight GEMMs")
    assert gemm_bar.get_width() == pytest.approx(layerview.total(unfused, layerview.GEMMS) * 1e6)
    with pytest.raises(InvalidValue):
        layerview.time_bars({})


def test_decode_rate_reads_the_weights_and_the_cache():
    rate, memory = layerview.decode_rate(LLAMA3, 8, 2048, "h100", "bf16")
    ops = LLAMA3.layer_ops(8, 1, 2048)
    step = 32 * sum(roofline.analyze(c, "h100", "bf16").time_s for c in ops.values())
    assert rate == pytest.approx(8 / step)
    kv = 8 * 2048 * 2 * 32 * 8 * 128 * 2  # sequences x tokens x (K and V) x layers x KV heads x head size x bytes
    assert memory == pytest.approx(LLAMA3.params * 2 + kv, rel=1e-3)  # plus each sequence's Q and O, tiny
    no_cache = layerview.decode_rate(LLAMA3, 8, 2048, "h100", "bf16", skip=("attn",))[0]
    assert no_cache > rate


def test_decode_throughput_marks_what_does_not_fit_and_the_crossing():
    fig = layerview.decode_throughput(LLAMA3, batches=(1, 64, 512), contexts=(512, 8192), hw="h100")
    ax = fig.axes[0]
    hollow = [c for c in ax.collections if c.get_gid() == "does-not-fit"]
    assert sum(len(c.get_offsets()) for c in hollow) >= 1  # 512 sequences of 8192 tokens do not fit in 80 GB
    assert 512 in [x for c in hollow for x, _ in c.get_offsets()]
    crossing = [line for line in ax.lines if line.get_label().startswith("a d x d")]
    assert crossing[0].get_xdata()[0] == roofline.decode_batch_to_compute_bound(4096, "h100", "bf16") == 345
