"""roofkit.plots_training: the figures of lessons 07 and 08 draw the numbers roofkit computes, and nothing else."""

import pytest

from roofkit.plots import training as plots_training
from roofkit.perf import training
from roofkit.errors import InvalidValue


def _texts(fig):
    return " | ".join(t.get_text() for ax in fig.axes for t in ax.texts)


def test_figures_are_not_left_open_in_pyplot():
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    run = training.estimate("70B", "15T", hw="h100", mfu=0.4, gpus=8192, usd_per_gpu_hour=2)
    for fig in (plots_training.mfu_line(70e9), plots_training.padding(), plots_training.cost_chain(run),
                plots_training.attention_undercount({"8B": (8e9, 32, 32, 128)})):
        assert fig.axes
    assert plt.get_fignums() == before


def test_mfu_line_marks_the_cap_and_the_throughputs():
    fig = plots_training.mfu_line("70B", "h100", "bf16", marks=(900, 3000))
    text = _texts(fig)
    cap = 989e12 / (6 * 70e9)  # tokens/s at 100% MFU
    assert f"100% at {cap:,.0f} tokens/s" in text
    assert "3,000 tokens/s: 127%" in text and "900 tokens/s: 38%" in text


def test_cost_chain_shows_every_step_of_the_estimate():
    run = training.estimate("400B", "8T", hw="h100", dtype="fp8", mfu=0.35, gpus=10_695, usd_per_gpu_hour=3)
    text = _texts(plots_training.cost_chain(run))
    for piece in ("400B × 8T", f"{run.flops:.3g} FLOP", f"{run.gpu_hours / 1e6:.3g} million",
                  f"{run.wall_clock_days:.3g} days", "÷ 10,695 GPUs", "× $3 per GPU-hour", "MFU 35%", "1,979 TFLOP/s",
                  "FP8"):
        assert piece in text, piece


def test_cost_chain_needs_every_input():
    with pytest.raises(InvalidValue, match=r"^cost_chain needs an estimate with every step; .* without gpus"):
        plots_training.cost_chain(training.estimate("70B", "15T", hw="h100", usd_per_gpu_hour=2))


def test_attention_undercount_draws_palms_ratio():
    fig = plots_training.attention_undercount({"8B": (8e9, 32, 32, 128)}, seq_range=(1024, 8192))
    x, y = fig.axes[0].lines[0].get_data()
    assert y[-1] == pytest.approx(training.flops_per_token(8e9, 32, 32, 128, x[-1]) / (6 * 8e9))
    causal = plots_training.attention_undercount({"8B": (8e9, 32, 32, 128)}, seq_range=(1024, 8192), causal=True)
    assert causal.axes[0].lines[0].get_data()[1][-1] < y[-1]
