"""Lesson 03 replays published roofline numbers against its question keys.

Oracles: jax-ml/scaling-book's GPU chapter (quiz 1: the H100's peak fp16 matmul
intensity 990e12 / 3.35e12 = 295 and 590 in FP8; question 7, c = a + b over 2^30
FP32 elements on an H100: about 3.84 ms predicted, 4.1 ms measured; "H100s and B200s
can usually only achieve around 80-85% of the claimed peak FLOPs", All About
Rooflines), NVIDIA's H100 datasheet (989 dense BF16, 3.35 TB/s; the headline 1,979 is
2:4 sparse), and the H200 measurements shipped with roofkit
(roofkit/data/measured/h200-2026-11-30/oracle.json: real GEMMs that take longer than
T_math + T_mem at the datasheet roofs).
"""

import pytest

from roofkit import formulas
from roofkit import roofline
from roofkit.perf import fusion
from roofkit.catalogs import hardware
from roofkit.course import quiz
from roofkit.course.quiz import answer_key as key

H100 = hardware.get("h100")




def test_ridges_match_the_published_ones():
    assert key("l03.ridge-bf16") == pytest.approx(295, abs=1)  # scaling-book: 990e12 / 3.35e12 = 295
    assert key("l03.ridge-fp8") == pytest.approx(590, abs=1)  # scaling-book: 590
    # rounding the peak to 9.9e14 before dividing gives 295.5, which some write as 296
    assert roofline.ridge_point(9.9e14, 3.35e12) == pytest.approx(295.5, abs=0.05)
    assert quiz.judge(quiz.get("l03.ridge-bf16"), 296).correct
    assert quiz.judge(quiz.get("l03.ridge-bf16"), "296 FLOP/byte").correct
    assert quiz.judge(quiz.get("l03.ridge-fp8"), 591).correct


def test_the_sparse_peak_gives_a_ridge_twice_too_large():
    sparse = roofline.ridge_point(1979e12, 3.35e12)  # NVIDIA's headline "BF16" figure
    verdict = quiz.judge(quiz.get("l03.ridge-bf16"), sparse)
    assert not verdict.correct and verdict.misconception == "sparse-peak"
    verdict = quiz.judge(quiz.get("l03.ridge-fp8"), roofline.ridge_point(3958e12, 3.35e12))
    assert not verdict.correct and verdict.misconception == "sparse-peak"
    assert quiz.judge(quiz.get("l03.ridge-fp8"), 295).misconception == "same-as-bf16"
    assert quiz.judge(quiz.get("l03.ridge-bf16"), "295 TFLOP/s").misconception == "unit"


def test_the_classic_quiz_gemm_compute_bound_gemv_memory_bound():
    big = roofline.analyze(formulas.gemm(4096, 4096, 4096, "bf16"), "h100", "bf16")
    assert big.intensity == pytest.approx(1365, abs=1) and big.bound == "compute"
    assert big.time_s == pytest.approx(139e-6, rel=0.01) and big.time_upper_s == pytest.approx(169e-6, rel=0.01)
    gemv = roofline.analyze(formulas.gemm(1, 4096, 4096, "bf16"), "h100", "bf16")
    assert gemv.intensity == pytest.approx(1, rel=1e-3) and gemv.bound == "memory"


def _measured(label):
    from roofkit.measure.layers import shipped

    return next(c["time_s"] for c in shipped("oracle.json")["cases"] if c["label"] == label)


def test_real_gemms_take_longer_than_the_datasheet_sum():
    """Issue 10: T_math + T_mem at the datasheet roofs is not a ceiling; at the achievable roofs it brackets."""
    h200 = hardware.get("h200")
    for n in (4096, 8192):
        cost = formulas.gemm(n, n, n, "bf16")
        measured = _measured(f"gemm bf16 {n}^3")
        low, high = roofline.time_bounds(cost.flops, cost.bytes, h200.peak("bf16"), h200.bandwidth)
        assert low < measured and high < measured  # the max holds; the datasheet sum is beaten
        low, high = roofline.time_bounds(cost.flops, cost.bytes, h200.peak("bf16", achievable=True),
                                         h200.memory_bandwidth(achievable=True))
        assert low <= measured <= high
    # the 4096^3 GEMM ran at about 79% of the datasheet peak: within scaling-book's "80-85%" band, give or take
    assert 0.75 < formulas.gemm(4096, 4096, 4096).flops / _measured("gemm bf16 4096^3") / h200.peak("bf16") < 0.85


def test_the_190_us_gemm_is_strong_and_above_the_datasheet_sum():
    """The lesson's 190 µs H100 GEMM: 73% of the roof (strong), yet longer than T_math + T_mem at the
    datasheet roofs (169 µs); no contradiction once the sum is not called a ceiling."""
    big = roofline.analyze(formulas.gemm(4096, 4096, 4096, "bf16"), "h100", "bf16")
    pct = roofline.percent_of_roofline(big.flops / 190e-6, big.intensity, H100.peak("bf16"), H100.bandwidth)
    assert 70 < pct < 75 and big.time_upper_s < 190e-6
    assert big.flops / 190e-6 / H100.peak("bf16", achievable=True) == pytest.approx(0.91, abs=0.01)


def test_achievable_sum_and_its_misconceptions():
    h200, n = hardware.get("h200"), 8192
    cost = formulas.gemm(n, n, n, "bf16")
    t_math, t_mem = cost.flops / 800.9e12, cost.bytes / 4.271e12  # the H200's measured figures (oracle)
    assert key("l03.gemm-time-upper") == pytest.approx((t_math + t_mem) * 1e6, rel=1e-9)
    # 2 * 8192^3 / 800.9e12 = 1372.8 µs of math, 3 * 8192^2 * 2 / 4.271e12 = 94.3 µs of memory
    assert key("l03.gemm-time-upper") == pytest.approx(1372.8 + 94.3, rel=1e-3)
    assert _measured("gemm bf16 8192^3") * 1e6 < key("l03.gemm-time-upper")  # the real kernel beat it
    question = quiz.get("l03.gemm-time-upper")
    assert quiz.judge(question, "1.467 ms").correct
    assert quiz.judge(question, t_math * 1e6).misconception == "optimistic-bound"
    assert quiz.judge(question, t_mem * 1e6).misconception == "memory-time-only"
    datasheet = roofline.analyze(cost, "h200", "bf16").time_upper_s * 1e6
    assert quiz.judge(question, datasheet).misconception == "datasheet-roofs"
    assert h200.has_achievable("bandwidth") and h200.has_achievable("fp8")  # every variant has its roofs


def test_more_flops_do_not_speed_up_a_memory_bound_kernel():
    # batch 256 through a 4096 x 4096 weight: 2 x 256 x 4096^2 FLOPs over (2 x 256 x 4096 + 4096^2) x 2 bytes
    intensity = 2 * 256 * 4096**2 / ((2 * 256 * 4096 + 4096**2) * 2)
    assert intensity == pytest.approx(227.6, abs=0.1) and intensity < H100.ridge("bf16")
    assert key("l03.more-flops") == pytest.approx(1.0, abs=1e-9)
    assert key("l03.more-flops", factor=10) == pytest.approx(1.0, abs=1e-9)
    assert key("l03.more-flops", batch=1) == pytest.approx(1.0, abs=1e-9)
    # past the ridge the faster math does help, until the memory roof takes over: I / I* = 409.6 / 295.2
    assert key("l03.more-flops", batch=512) == pytest.approx(409.6 / H100.ridge("bf16"), rel=1e-3)
    verdict = quiz.judge(quiz.get("l03.more-flops"), 2)
    assert not verdict.correct and verdict.misconception == "flops-help-memory-bound"
    # the H200 has the H100's compute and more bandwidth: the GEMV does get faster there
    gemv = formulas.gemv(4096, 4096, "bf16")
    ratio = roofline.analyze(gemv, "h100", "bf16").time_s / roofline.analyze(gemv, "h200", "bf16").time_s
    assert ratio == pytest.approx(4.8 / 3.35, rel=1e-3)


def test_batching_moves_the_point_horizontally():
    """Asked before the lesson prints the batched intensities or draws the arrow."""
    assert key("l03.batch-move") == "horizontal"
    assert key("l03.batch-move", batch=1) == "vertical"  # no batching, no move along the intensity axis
    assert quiz.judge(quiz.get("l03.batch-move"), "vertical").misconception == "batching-is-vertical"
    # fusion and lower-precision storage are horizontal moves too
    chain = fusion.chain(["bias_add", "gelu"], n=2**20)
    assert chain.fused.intensity == pytest.approx(2 * chain.unfused.intensity)
    assert formulas.gemv(4096, 4096, "fp8").intensity == pytest.approx(2 * formulas.gemv(4096, 4096, "bf16").intensity)


def test_exercise_1_batch_320_is_still_memory_bound():
    """'Intensity ~ batch' says 320 > 295: compute-bound. Counted, I = 320 x 4096 / (2 x 320 + 4096) = 276.8 at
    2 bytes, short of the H100's BF16 ridge; the crossing is at batch 345 (lesson 10 quotes it)."""
    assert key("l03.ex-decode-batch-bound") == "memory"
    exact = 320 * 4096 / (2 * 320 + 4096)
    assert formulas.gemm(320, 4096, 4096, "bf16").intensity == pytest.approx(exact, rel=1e-12)
    assert exact == pytest.approx(276.8, abs=0.05)
    assert exact < H100.ridge("bf16") < 320
    crossing = next(b for b in range(1, 4096) if formulas.gemm(b, 4096, 4096, "bf16").intensity >= H100.ridge("bf16"))
    assert crossing == 345
    assert key("l03.ex-decode-batch-bound", batch=344) == "memory" and key("l03.ex-decode-batch-bound", batch=345) == "compute"
    assert key("l03.ex-decode-batch-bound", batch=1) == "memory"  # batch 1, about 1 FLOP/byte: memory-bound everywhere
    assert key("l03.ex-decode-batch-bound", hw="A100") == "compute"  # the A100's ridge is about 153
    verdict = quiz.judge(quiz.get("l03.ex-decode-batch-bound"), "compute")
    assert not verdict.correct and verdict.misconception == "rule-of-thumb"
    verdict = quiz.judge(quiz.get("l03.ex-decode-batch-bound").with_params(hw="A100"), "memory")
    assert not verdict.correct and verdict.misconception == "rule-of-thumb"


def test_questions_rewritten_so_that_no_printed_number_answers_them():
    """Issue 18: the batched decode of l03.more-flops and l03.ex-decode-batch-bound is printed nowhere before it is
    asked, and l03.batch-move comes before the arrows and numbers that show the move."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "lessons" / "03-the-roofline.md").read_text("utf-8")
    assert text.index('ask("l03.batch-move")') < text.index("horizontal: batching")
    assert text.index('ask("l03.batch-move")') < text.index("batching 1 -> 64")
    assert text.index('ask("l03.more-flops")') < text.index("batch_256 =")
    assert text.index('ask("l03.ex-decode-batch-bound")') < text.index("for batch in (64, 256, 320, 384, 1024)")
    assert "More FLOP/s does not help" not in text.split('ask("l03.more-flops")')[0]


def test_the_ridge_from_each_way_of_writing_the_peak():
    """Issue 18: the catalog's 989 is the datasheet's 1,979 / 2 = 989.5 rounded; the whitepaper gives 989.4.
    989 / 3.35 = 295.2, 989.4 / 3.35 = 295.3, 989.5 / 3.35 = 295.4, 990 / 3.35 = 295.5."""
    assert H100.peak("bf16") == 989e12
    assert H100.peak_from_parts("bf16") / 1e12 == pytest.approx(989.4, abs=0.05)
    assert any("1,979 BF16" in note for note in H100.notes)
    for peak, ridge in ((989e12, 295.2), (989.4e12, 295.3), (989.5e12, 295.4), (990e12, 295.5)):
        assert round(roofline.ridge_point(peak, 3.35e12), 1) == ridge
    assert quiz.judge(quiz.get("l03.ridge-bf16"), 295.4).correct


def test_the_lesson_no_longer_repeats_the_half_and_calls_no_datasheet_sum_a_ceiling():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "lessons" / "03-the-roofline.md").read_text("utf-8")
    assert "4096 / (1 + 4096 + 4096)" not in text  # lesson 02 corrects it; 03 no longer repeats it
    assert "should not take more than" not in text and "means something is wrong" not in text
    assert "not a bound" in text and "achievable" in text


def test_scaling_book_fp32_add_predicted_and_measured():
    add = formulas.elementwise(2**30, 1, 2, 1, "fp32")
    placed = roofline.analyze(add, "h100", "fp32")
    assert placed.bound == "memory"
    assert placed.time_s == pytest.approx(3.84e-3, rel=2e-3)  # scaling-book: "about 3.84ms"
    percent = key("l03.ex-add-percent")
    assert percent == pytest.approx(100 * placed.time_s / 4.1e-3, rel=1e-9)
    assert 90 < percent < 95  # the top band of the rule of thumb: essentially optimal
    question = quiz.get("l03.ex-add-percent")
    assert quiz.judge(question, "93.8 %").correct
    assert quiz.judge(question, 0.938).misconception == "fraction-not-percent"
    assert quiz.judge(question, 106.6).misconception == "inverted"
    assert quiz.judge(question, 100).misconception == "roof-is-achieved"  # the roof is an asymptote


def test_the_lesson_uses_the_explorer():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "lessons" / "03-the-roofline.md").read_text("utf-8")
    assert "roofline_explorer(" in text


def test_no_hint_gives_the_library_call_that_computes_the_key():
    calls = ("roofline.", "formulas.", "acc.", "hardware.", ".bandwidth", "sympy.", "roofkit.")
    for question in quiz.questions("03"):
        for hint in question.hints:
            assert not any(call in hint for call in calls), (question.id, hint)
            assert "{" not in hint, (question.id, hint)  # hints are not templates: no unfilled names


def _lesson() -> str:
    from pathlib import Path

    return (Path(__file__).resolve().parent.parent / "lessons" / "03-the-roofline.md").read_text("utf-8")


def test_the_add_exercise_shows_no_prediction_before_it_asks():
    """Learner report 2026-12-03, l03.ex-add-percent: 'predicted: 3.846 ms' was printed right above and 4.1 ms was in
    the prompt. The learner now predicts the time; the prediction and the band are printed after the check."""
    text = _lesson()
    before, after = text.split('ask("l03.ex-add-percent")', 1)
    exercise = before[before.index("**Exercise 2**"):]
    assert "3.84" not in exercise and "predicted" not in exercise and "time_s" not in exercise
    assert "roofline.analyze(vector_add" in after and "plots_kernels.band(on_h100)" in after
    assert "Predict its time from the roofline" in quiz.get("l03.ex-add-percent").text()
    # the band the lesson prints after the check is the top one, and the prediction is the scaling book's
    from roofkit.plots import kernels as plots_kernels

    assert plots_kernels.band(key("l03.ex-add-percent")) == "essentially optimal"


def test_the_add_beats_the_catalogs_achievable_h100_bandwidth():
    """The lesson says so after exercise 2: achievable roofs are the best published measurements, not a wall."""
    add = formulas.elementwise(2**30, 1, 2, 1, "fp32")
    achieved = add.bytes / 4.1e-3
    assert H100.memory_bandwidth(achievable=True) < achieved < H100.bandwidth


def test_the_band_table_says_each_band_plainly_and_agrees_with_band():
    """Learner report 2026-12-03: the table listed 'above 10%: weak', then said the rule of thumb names no band
    between 10% and 30% and cited an internal function for it. Each row now gives its range and its band, the one
    roofkit.plots.kernels.band returns inside that range."""
    import re

    from roofkit.plots import kernels as plots_kernels

    text = _lesson()
    assert "names no band" not in text and "roofkit calls it" not in text
    rows = re.findall(r"^\| (over 90%|\d+% to \d+%|10% or less) \| ([a-z ]+) \|", text, re.M)
    assert [band for _, band in rows] == [name for _, name in plots_kernels.BANDS]
    for span, band in rows:
        numbers = [int(n) for n in re.findall(r"\d+", span)]
        inside = 95 if span.startswith("over") else 5 if span.endswith("less") else sum(numbers) / 2
        assert plots_kernels.band(inside) == band, span
        if "to" in span:  # the top of each range belongs to it, the bottom to the band below
            assert plots_kernels.band(numbers[1]) == band and plots_kernels.band(numbers[0]) != band
    assert "No paper or vendor defines a scale" in text


def test_section_1_keeps_what_the_lesson_uses():
    """Learner report 2026-12-03: warpgroups, TMA, warp specialization and producer/consumer warpgroups were used
    nowhere later; the aside about the letter B confused. What is left: overlap, which section 2's max needs."""
    text = _lesson()
    for word in ("warpgroup", "TMA", "warp specialization", "producer", "keeps the letter"):
        assert word not in text, word
    assert "**overlap**" in text.split("## 2.")[0]


def test_the_fp32_peak_says_why_it_counts_an_fma():
    text = _lesson()
    assert "fused multiply-add" in text.split("## 5.")[0]
    assert "That peak counts an FMA as two FLOPs, and an add cannot use one" not in text


def test_the_rule_of_thumb_feedback_names_its_bytes_per_element():
    """Learner report 2026-12-03: the feedback wrote '(2 x batch x d + d^2) x b bytes', b undefined and B the
    bandwidth in this lesson."""
    feedback = quiz.judge(quiz.get("l03.ex-decode-batch-bound"), "compute").feedback
    assert "bytes per element" in feedback and "x b bytes" not in feedback


def test_the_gemm_label_sits_by_its_dot_clear_of_the_ridge_labels():
    """Learner report 2026-12-03: the 'GEMM 4096³' label sat far from its dot. It now sits under the ridges' labels,
    overlapping no other text, with a line to its dot."""
    import re

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    text = _lesson()
    dx, dy = map(float, re.search(r'label_offset=\((-?\d+), (-?\d+)\) if name == "GEMM 4096³"', text).groups())
    kernels = {"GEMM 4096³": formulas.gemm(4096, 4096, 4096, "bf16"), "decode GEMV": formulas.gemv(4096, 4096, "bf16"),
               "GELU": formulas.elementwise(2**24, formulas.GELU_FLOPS_PER_ELEMENT, 1, 1, "bf16"),
               "FP32 add": formulas.elementwise(2**30, 1, 2, 1, "fp32")}
    fig = roofline.plot("h100", ["bf16", "fp8"], kernels=[
        roofline.Kernel(name, cost.intensity, label_offset=(dx, dy) if name == "GEMM 4096³" else None)
        for name, cost in kernels.items()])
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    gemm = next(t for t in ax.texts if t.get_text() == "GEMM 4096³")
    assert gemm.arrow_patch is not None  # a line to its dot
    from matplotlib.text import Text

    box = Text.get_window_extent(gemm, renderer)  # the text alone, without its line
    dot = ax.transData.transform((kernels["GEMM 4096³"].intensity, H100.peak("bf16")))
    # pixels at the figure's 100 dpi: the label starts just right of its dot, its top under 30 px below it (at
    # (8, -30) points it was 32 px, with no line)
    assert 0 < box.x0 - dot[0] < 15 and 0 < dot[1] - box.y1 < 30
    for other in ax.texts:
        if other is not gemm and other.get_text():
            assert not box.overlaps(other.get_window_extent(renderer)), other.get_text()
