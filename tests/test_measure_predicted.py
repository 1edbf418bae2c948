"""roofkit.measure.predicted: the tables and figures that hold roofkit's predictions against a GPU's measurements.

Oracles: the H200 dataset shipped with roofkit (one card, 2026-11-30, PyTorch 2.11, CUDA events, L2 flushed),
read directly from its JSON files; roofkit.layertime's own comparison; hand-derived GEMM bytes; the figures'
artists read back.
"""

import json
from importlib import resources

import pytest

import roofkit
from roofkit.perf import layertime
from roofkit.errors import InvalidValue
from roofkit.measure import layers, predicted

DATA = layers.load_layers()
FOLDER = resources.files("roofkit").joinpath("data", "measured", layers.SHIPPED)


def test_layer_rows_hold_the_measurement_and_each_prediction():
    rows = predicted.layer_rows()
    raw = json.loads(FOLDER.joinpath("layers.json").read_text())["cases"]
    assert [r["measured_s"] for r in rows] == [c["layer_s"] for c in raw]
    for row, compared in zip(rows, layertime.compare()):
        assert row["plain_s"] == compared["plain_s"] and row["calibrated_s"] == pytest.approx(compared["calibrated_s"])
        # each correction adds time: datasheet < achievable < + floor < + eager kernels
        assert row["plain_s"] < row["achievable_s"] < row["floored_s"] < row["calibrated_s"]
        assert row["plain_s"] < row["no_overlap_s"]  # T_math + T_mem per kernel is the larger sum


def test_op_rows_cover_every_timed_op():
    rows = predicted.op_rows()
    assert len(rows) == sum(len(c.ops_s) for c in DATA.cases)
    norm = next(r for r in rows if r["op"] == "norm1" and r["label"] == DATA.cases[2].label)  # a decode step
    assert norm["plain_s"] < 1e-7 < 5e-6 < norm["measured_s"]  # nanoseconds predicted, microseconds measured
    assert norm["calibrated_s"] > layertime.default_calibration().floor_s


def test_plot_predicted_draws_every_point_and_the_line():
    fig = predicted.plot_predicted()
    ops_ax, layers_ax = fig.axes
    for ax, count in ((ops_ax, len(predicted.op_rows())), (layers_ax, len(DATA.cases))):
        plain = [c for c in ax.collections if c.get_gid() and c.get_gid().startswith("plain")]
        calibrated = [c for c in ax.collections if c.get_gid() and c.get_gid().startswith("calibrated")]
        assert sum(len(c.get_offsets()) for c in plain) == count == sum(len(c.get_offsets()) for c in calibrated)
        line = next(line for line in ax.lines if line.get_gid() == "y=x")
        assert list(line.get_xdata()) == list(line.get_ydata())
        assert ax.get_xscale() == ax.get_yscale() == "log"


def test_gap_bars_end_at_the_calibrated_prediction():
    rows = predicted.layer_rows()
    fig = predicted.gap_bars(rows)
    ax = fig.axes[0]
    for i, row in enumerate(rows):
        bars = [p for p in ax.patches if abs(p.get_y() + p.get_height() / 2 - i) < 1e-9]
        assert len(bars) == len(predicted.GAPS)
        assert sum(b.get_width() for b in bars) == pytest.approx(row["calibrated_s"] / row["measured_s"])
    with pytest.raises(InvalidValue):
        predicted.gap_bars([])


def test_sweep_rows_parse_the_oracle_and_predict_by_hand():
    rows = predicted.sweep_rows()
    assert [r["m"] for r in rows] == [1, 16, 64, 128, 256, 384, 512, 1024, 4096]
    h200 = roofkit.hw("h200")
    one = rows[0]
    weight_bytes = (8192 * 8192 + 2 * 8192) * 2  # the weights, one row in and one row out, BF16
    assert one["plain_s"] == pytest.approx(weight_bytes / h200.bandwidth)
    assert one["floored_s"] == pytest.approx(weight_bytes / h200.memory_bandwidth(True)
                                             + layertime.default_calibration().floor_s)
    big = rows[-1]
    assert big["plain_s"] == pytest.approx(2 * 4096 * 8192 * 8192 / h200.peak("bf16"))
    with pytest.raises(InvalidValue, match="batch gemm"):
        predicted.sweep_rows({"cases": [{"label": "gemm bf16 4096^3", "time_s": 1e-3}]})


def test_plot_sweep_marks_both_crossings():
    fig = predicted.plot_sweep()
    labels = [line.get_label() for line in fig.axes[0].lines]
    assert any(label.endswith("M = 217") for label in labels)  # datasheet ridge
    assert any(label.endswith("M = 197") for label in labels)  # achievable ridge
    measured = next(c for c in fig.axes[0].collections if c.get_gid() == "measured")
    assert len(measured.get_offsets()) == 9


def test_gpu_table_and_plot_from_the_shipped_profile():
    gpu = layers.shipped("measure.json")["gpu"]
    text = predicted.gpu_table(gpu)
    assert "NVIDIA H200" in text and "800.9 TFLOP/s" in text and "81%" in text and "4.271 TB/s" in text
    fig = predicted.plot_gpu(gpu)
    measured = [c for c in fig.axes[0].collections if c.get_gid() == "measured"]
    assert len(measured) == sum(k["where"] == "HBM" for k in gpu["kernels"])
    no_catalog = dict(gpu, catalog=None)  # a GPU the catalog does not know: its measured roofs only
    assert "%" not in predicted.gpu_table(no_catalog).splitlines()[1]
    assert predicted.plot_gpu(no_catalog).axes
