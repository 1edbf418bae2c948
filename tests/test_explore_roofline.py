"""The roofline explorer: its state is roofline.analyze's, the bound flips at the ridge, callbacks update it."""

import base64
import html
import re

import pytest

from roofkit import formulas
from roofkit.catalogs import hardware
from roofkit import roofline
from roofkit.errors import InvalidValue, UnknownName, UnsupportedPrecision
from roofkit.course.explore import roofline_explorer
from roofkit.course.explore.roofline import KERNELS, build_explorer, explorer_state, summary


def _text(widget) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", widget.label.value))


def test_state_is_roofline_analyze():
    state = explorer_state("h100", "bf16", "gemm", 4096)
    placed = roofline.analyze(formulas.gemm(4096, 4096, 4096, "bf16"), "h100", "bf16")
    for field in ("flops", "bytes", "intensity", "ridge", "bound", "time_s", "time_upper_s", "t_math_s", "t_mem_s"):
        assert state[field] == getattr(placed, field)
    assert state["accelerator"] == "NVIDIA H100 SXM5 80GB" and state["accelerator_key"] == "h100-sxm"
    assert state["intensity"] == pytest.approx(4096 / 3, abs=0.01)  # 2n^3 / (3 n^2 x 2 bytes)
    assert state["achievable"]["t_mem_s"] == state["bytes"] / hardware.get("h100").memory_bandwidth(achievable=True)
    assert explorer_state("b200", "bf16", "gemm", 4096)["achievable"] is None  # no measured bandwidth for a B200


def test_summary_is_the_starting_text():
    assert summary() == ("H100 SXM5 80GB, bf16, GEMM n=4096: intensity 1365 FLOP/byte, ridge 295 FLOP/byte, "
                         "compute-bound, ≥ 139 µs (datasheet roofs; 169 µs with no overlap); achievable roofs 173 µs "
                         "to 208 µs")


def test_the_sum_at_datasheet_roofs_is_not_called_a_ceiling():
    """A real 4096^3 BF16 GEMM on an H200 took longer than T_math + T_mem at the datasheet roofs
    (roofkit/data/measured/h200-2026-11-30/oracle.json): the explorer must not print that sum as an upper bound."""
    from roofkit.measure.layers import shipped

    measured = next(c["time_s"] for c in shipped("oracle.json")["cases"] if c["label"] == "gemm bf16 4096^3")
    state = explorer_state("h200", "bf16", "gemm", 4096)
    assert state["time_upper_s"] < measured  # the datasheet sum is beaten by a real kernel
    assert state["achievable"]["time_s"] <= measured <= state["achievable"]["time_upper_s"]
    assert "≤" not in state["summary"] and "achievable roofs 172 µs to 195 µs" in state["summary"]
    text = html.unescape(re.sub(r"<[^>]+>", " ", build_explorer("h200", "bf16", "gemm", 4096).label.value))
    assert "not a ceiling" in text and "172 µs (overlap) to 195 µs (no overlap)" in text


def test_achievable_times_use_the_measured_roofs():
    acc = hardware.get("h200")
    state = explorer_state("h200", "fp8", "gemm", 8192)
    cost = formulas.gemm(8192, 8192, 8192, "fp8")
    assert state["achievable"]["t_math_s"] == pytest.approx(cost.flops / acc.peak("fp8", achievable=True))
    assert state["achievable"]["t_mem_s"] == pytest.approx(cost.bytes / acc.memory_bandwidth(achievable=True))
    assert state["achievable"]["time_upper_s"] == pytest.approx(
        state["achievable"]["t_math_s"] + state["achievable"]["t_mem_s"])
    assert explorer_state("b200", "bf16", "gemm", 4096)["achievable"] is None  # a matmul rate, no bandwidth


def test_the_figure_has_the_roofline_and_the_time_bars():
    from roofkit.course.explore.roofline import _Figure

    state = explorer_state("h200", "bf16", "gemm", 4096)
    roof_ax, bars_ax = _Figure(state).live.fig.axes
    assert roof_ax.get_xscale() == "log"
    assert roof_ax.get_title() == "H200 SXM 141GB, BF16: 989 TFLOP/s, 4.8 TB/s; achievable 800.9 TFLOP/s, 4.271 TB/s"
    assert any(line.get_gid() == "custom-roof" for line in roof_ax.lines)  # the achievable roof, dashed
    # T_math and T_mem, datasheet and achievable, to scale: the longest sum (achievable) spans 1
    longest = (state["achievable"]["t_math_s"] + state["achievable"]["t_mem_s"]) * 1e6
    widths = sorted(round(p.get_width() * longest, 1) for p in bars_ax.patches)
    assert widths == [21.0, 23.6, 139.0, 171.6]
    texts = {t.get_text() for t in bars_ax.texts}
    assert {"max 139 µs", "sum 160 µs", "max 172 µs", "sum 195 µs"} <= texts, texts
    one_roof = _Figure(explorer_state("b200", "bf16", "gemm", 4096)).live.fig.axes[1]
    assert len([p for p in one_roof.patches if p.get_visible()]) == 2  # the achievable row stays, empty
    assert "none in the catalog for this chip and precision" in {t.get_text() for t in one_roof.texts}


def test_the_axes_stay_put_over_the_whole_catalog():
    """Every roof of every chip and precision, datasheet and achievable, lies inside the fixed axes, so that
    changing the accelerator or the precision never redraws them."""
    from roofkit.course.explore.roofline import XLIM, _Figure, _ylim

    lo, hi = _ylim()
    for acc in hardware.catalog():
        for p in acc.precisions:
            assert lo <= acc.bandwidth * XLIM[0] and acc.peak(p) * 2 <= hi, (acc.key, p)
            if acc.has_achievable(p) and acc.has_achievable("bandwidth"):
                assert lo <= acc.memory_bandwidth(achievable=True) * XLIM[0], (acc.key, p)
    explorer = build_explorer()
    roof_ax = explorer.live.fig.axes[0]
    for acc in ("t4", "b200", "tpu-v5e"):
        explorer.accelerator.value = acc
        assert roof_ax.get_xlim() == XLIM and roof_ax.get_ylim() == (lo, hi)


@pytest.mark.parametrize("kernel, below, above", [
    ("gemm", 512, 1024),          # square GEMM crosses the H100 BF16 ridge at n = 886
    ("decode", 256, 512),         # the decode GEMM crosses at batch 345 (roofline.decode_batch_to_compute_bound)
    ("attention", 256, 1024),     # fused attention: I grows with the sequence
])
def test_size_moves_the_bound_across_the_ridge(kernel, below, above):
    assert explorer_state("h100", "bf16", kernel, below)["bound"] == "memory"
    assert explorer_state("h100", "bf16", kernel, above)["bound"] == "compute"


def test_elementwise_kernels_never_cross():
    for kernel in ("gelu", "add"):
        lo, hi = KERNELS[kernel].exponents
        assert {explorer_state("b200", "bf16", kernel, 2**e)["bound"] for e in (lo, hi)} == {"memory"}
        assert explorer_state("h100", "bf16", kernel, 2**lo)["intensity"] == pytest.approx(
            explorer_state("h100", "bf16", kernel, 2**hi)["intensity"])


def test_every_kernel_on_every_accelerator_and_precision_fits_the_axes():
    from roofkit.course.explore.roofline import XLIM

    for acc in hardware.catalog():
        for p in acc.precisions:
            for name, spec in KERNELS.items():
                for e in spec.exponents:
                    state = explorer_state(acc.key, p, name, 2**e)
                    assert XLIM[0] <= state["intensity"] <= XLIM[1], (acc.key, p, name, e)


def test_starting_call_prints_the_summary(capsys):
    explorer = roofline_explorer("h100", "bf16", "gemm", 4096)
    assert capsys.readouterr().out.strip() == summary("h100", "bf16", "gemm", 4096)
    assert "roofkit-bound" in explorer.label._dom_classes
    assert "roofkit-plot" in explorer.plot._dom_classes and explorer.plot.children == (explorer.image,)
    assert "run the notebook live" in repr(explorer)
    bundle = explorer._repr_mimebundle_()
    assert base64.b64decode(bundle["image/png"]).startswith(b"\x89PNG")  # the static figure
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bytes(explorer.image.value).startswith(b"\x89PNG") and explorer.size.continuous_update


def test_callbacks_update_the_label_and_the_plot():
    explorer = build_explorer("h100", "bf16", "gemm", 4096)
    assert "compute-bound" in _text(explorer)
    first_png, static, fig = explorer.image.value, explorer._png, explorer.live.fig

    explorer.size.value = 512
    assert "memory-bound" in _text(explorer) and "GEMM n=512" in _text(explorer)
    assert "at the best rates measured on this chip" in _text(explorer)  # an H100's achievable roofs
    assert explorer.state["size"] == 512 and explorer.image.value != first_png
    assert explorer._png == static and explorer.live.fig is fig  # moved in place; the static picture kept

    explorer.precision.value = "fp8"  # the ridge moves right
    assert "591 FLOP/byte" in _text(explorer)

    explorer.kernel.value = "decode"  # the slider resets to the kernel's own range and default
    assert explorer.size.value == KERNELS["decode"].default == 1
    assert explorer.size.description == "batch"
    assert "decode GEMM batch=1" in _text(explorer) and "memory-bound" in _text(explorer)

    explorer.accelerator.value = "t4"  # no FP8 on a T4: the precision falls back to FP16
    assert explorer.precision.value == "fp16"
    assert [value for _, value in explorer.precision.options] == hardware.get("t4").precisions
    assert "T4" in _text(explorer) and explorer.state["accelerator_key"] == "t4"

    explorer.accelerator.value = "h200"
    explorer.kernel.value = "gemm"
    explorer.size.value = 768  # memory-bound on an H100, compute-bound on an H200 (lesson 04)
    assert explorer.state["bound"] == "compute"
    explorer.accelerator.value = "h100-sxm"
    assert explorer.state["bound"] == "memory" and explorer.precision.value == "fp16"


def test_bad_starting_values_name_the_choices():
    with pytest.raises(UnknownName, match=r"Unknown kernel 'gemv'\. .*Expected one of: add, attention, decode"):
        explorer_state(kernel="gemv")
    with pytest.raises(UnsupportedPrecision, match=r"NVIDIA T4 has no bf16 peak"):
        explorer_state("t4", "bf16")
    with pytest.raises(InvalidValue, match=r"^size must be"):
        explorer_state(size=0)
    with pytest.raises(InvalidValue, match=r"^size must be a whole number"):
        explorer_state(size=10.5)
    with pytest.raises(UnknownName):
        roofline_explorer(accelerator="h1000")
