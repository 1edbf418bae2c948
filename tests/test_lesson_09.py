"""Lesson 09 replays the sources' fusion and attention numbers against its keys, and pins its corrections."""

import math

import pytest

from roofkit import formulas
from roofkit import roofline
from roofkit.perf import fusion, layertime
from roofkit.course import quiz
from roofkit.course.quiz import answer_key as key




def misconception(question_id, name):
    question = quiz.get(question_id)
    wrong = next(m for m in question.misconceptions if m.name == name)
    return wrong.value(question)


# --- fusion of elementwise chains ------------------------------------------------------


def test_bias_gelu_fused_moves_two_tensors():
    # the lesson works 8,192 x 32,768 (1.07 GB fused) and asks for 4,096 x 14,336
    assert key("l09.bias-gelu-fused-bytes", tokens=8192, width=32768) == 2 * 8192 * 32768 * 2
    n, b = 4096 * 14336, 2
    assert key("l09.bias-gelu-fused-bytes") == 2 * n * b  # read x, write GELU(x + bias)
    # counting the intermediate as traffic gives the unfused four tensors
    assert misconception("l09.bias-gelu-fused-bytes", "counted-fused-intermediate") == 4 * n * b
    verdict = quiz.judge(quiz.get("l09.bias-gelu-fused-bytes"), 4 * n * b)
    assert verdict.misconception == "counted-fused-intermediate"
    assert quiz.judge(quiz.get("l09.bias-gelu-fused-bytes"), "235 MB").correct  # a unit is accepted
    assert not quiz.judge(quiz.get("l09.bias-gelu-fused-bytes"), "1.07 GB").correct  # the worked example's number


def test_residual_rmsnorm_keeps_the_residual_stream():
    assert key("l09.residual-rmsnorm-ratio") == pytest.approx(5 / 4)  # 5 tensors unfused, 4 fused
    assert misconception("l09.residual-rmsnorm-ratio", "dropped-residual-write") == pytest.approx(5 / 3)
    assert quiz.judge(quiz.get("l09.residual-rmsnorm-ratio"), 5 / 3).misconception == "dropped-residual-write"


def test_fusion_never_changes_flops():
    for ops in (["bias_add", "gelu"], ["residual_add", "rmsnorm"], ["bias_add", "dropout", "residual_add"]):
        c = fusion.chain(ops, n=4096 * 4096)
        assert c.fused.flops == c.unfused.flops
    # the end of GPT-2's MLP: bias, dropout, residual add: 2 + 2 + 3 = 7 tensors unfused, x and r in, y out fused
    assert fusion.chain(["bias_add", "dropout", "residual_add"], n=4096).traffic_ratio == pytest.approx(7 / 3)


def test_unfused_dropout_writes_its_mask_in_training():
    """F09-5: PyTorch's native_dropout returns a 1-byte mask for the backward pass: 7.5 BF16 tensors, ratio 2.5."""
    outputs = _solution_outputs()
    assert "in training, with the unfused dropout's mask: 7.5 tensors of BF16 unfused, ratio 2.5" in outputs
    assert "not from memory" not in _lesson()


def test_fixed_costs_dominate_tiny_tensors_only():
    t0 = layertime.default_calibration().floor_s
    tiny = fusion.chain(["bias_add", "gelu"], n=32768).time("h100", "bf16", kernel_floor_s=t0)
    big = fusion.chain(["bias_add", "gelu"], n=8192 * 32768).time("h100", "bf16", kernel_floor_s=t0)
    # a decode-sized tensor: the memory time is tens of ns, the time is all fixed costs, and fusion halves it
    assert tiny["unfused_gpu_s"] == pytest.approx(2 * t0, rel=0.02) and tiny["speedup"] == pytest.approx(2, rel=1e-3)
    # He's host (3.6 µs per launch) is faster than the GPU's floor; the H200's host (8.3 µs) slower
    assert tiny["unfused_bound"] == "gpu"
    slow = fusion.chain(["bias_add", "gelu"], n=32768).time("h100", "bf16", 8.28e-6, kernel_floor_s=t0)
    assert slow["unfused_bound"] == "cpu" and slow["speedup"] == pytest.approx(2)
    # a prefill-sized tensor: the fixed costs are under 2% of the time
    assert 2 * t0 / big["unfused_s"] < 0.02 and big["unfused_bound"] == "gpu"


def test_launches_hide_behind_a_decode_layer_on_the_h200():
    """Lesson 09, section 4: the stream model against the measured H200 layer (wall clock and CUDA graph).

    F09-3: the check uses layer_wall_s (wall clock over layers back to back, synchronized); layer_s is timed
    with CUDA events behind an L2 flush, so it cannot show whether the launches hide."""
    from roofkit.catalogs import models
    from roofkit.measure import layers

    data = layers.load_layers()
    case = next(c for c in data.cases if c.decode and c.batch == 1 and c.model == "llama-2-7b")
    gpu = layertime.predict(case.model, 1, 1, case.kv_seq, "h200", calibrated=True)
    c = data.launch["host_per_launch_s"]
    layer = fusion.stream_time(gpu.kernels, gpu.time_s, c)
    assert layer["bound"] == "gpu" and layer["cpu_s"] < 0.7 * layer["gpu_s"]
    per_kernel = [op.time_s / op.kernels for op in gpu.ops for _ in range(op.kernels)]
    assert sum(per_kernel) == pytest.approx(gpu.time_s)
    n = models.get(case.model).layers
    step = fusion.stream_critical_path(per_kernel * n, c)
    assert step["time_s"] / n == pytest.approx(case.layer_wall_s, rel=0.02)  # 169 µs a layer, measured 169
    assert step["time_s"] / n == pytest.approx(layer["time_s"], rel=0.01)  # a long mixed stream: close to the max
    assert case.layer_graph_s == pytest.approx(case.layer_wall_s, rel=0.05)  # this minimal layer: a graph gains nothing
    assert step["sum_s"] / n / case.layer_wall_s > 1.4  # the additive model: far too slow


def _solution_outputs():
    import json
    from pathlib import Path

    path = next((Path(__file__).resolve().parent.parent / "solutions").glob("09-*.ipynb"))
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join("".join(o.get("text", "")) for o in c.get("outputs", []))
                     for c in cells if c["cell_type"] == "code")


def _lesson():
    from pathlib import Path

    return (Path(__file__).resolve().parent.parent / "lessons" / "09-fusion-and-flashattention.md").read_text("utf-8")


def test_the_critical_path_of_tiny_kernels_then_a_long_one():
    """F09-1: the max of the CPU's and the GPU's times is not the rule; the critical path is. 100 tiny kernels then
    one of 500 µs, on the measured H200 host: 1,336 µs (the review's 1,338 rounds the launch to 8.3 µs and the tiny
    kernel to 1 µs), not the max model's 836 nor the sum's 1,434; the reverse order takes 837."""
    from roofkit.measure import layers

    launch = layers.load_layers().launch
    c, tiny = launch["host_per_launch_s"], launch["graph_per_kernel_s"]
    path = fusion.stream_critical_path([tiny] * 100 + [500e-6], c)
    assert path["time_s"] == pytest.approx(101 * c + 500e-6)
    assert path["time_s"] * 1e6 == pytest.approx(1336, abs=1)
    assert path["max_s"] * 1e6 == pytest.approx(836, abs=1) and path["sum_s"] * 1e6 == pytest.approx(1434, abs=1)
    assert fusion.stream_critical_path([1e-6] * 100 + [500e-6], 8.3e-6)["time_s"] * 1e6 == pytest.approx(1338.3)
    reverse = fusion.stream_critical_path([500e-6] + [tiny] * 100, c)
    assert reverse["time_s"] * 1e6 == pytest.approx(837, abs=1)
    # the lesson prints both orders
    outputs = _solution_outputs()
    assert "100 tiny kernels, then the long one: 1,336 µs (the max model 836, the sum 1,434)" in outputs
    assert "the long one, then 100 tiny kernels: 837 µs" in outputs
    # the old rule, stated as general, is gone from the lesson and from the exercise's feedback
    assert "a stream takes the larger of the two, not their sum" not in _lesson()
    added = next(m for m in quiz.get("l09.ex-decoder-launch-time").misconceptions if m.name == "launches-added")
    assert "long stream" in added.feedback


def test_the_critical_path_question():
    t = key("l09.stream-critical-path")
    assert t == pytest.approx(51 * 10e-6 + 400e-6)  # 51 launches, then the long kernel: 910 µs
    assert quiz.judge(quiz.get("l09.stream-critical-path"), "910 us").correct
    assert wrong_name("l09.stream-critical-path", 510e-6) == "max-model"  # max(51 c, 50 x 2 + 400 µs)
    assert wrong_name("l09.stream-critical-path", 1010e-6) == "sum-model"
    # a variant where the GPU side is the larger: the last launch is another slip
    assert wrong_name("l09.stream-critical-path", 31 * 6e-6, cpu_us=6.0, tiny=30) == "launches-only"
    # never section 4's measured example
    assert not quiz.judge(quiz.get("l09.stream-critical-path"), "1336 us").correct


def test_ordinary_eager_decode_is_launch_bound():
    """F09-2: the measured layer is minimal (12 kernels); Hugging Face's eager Llama layer, kernel by kernel,
    launches 40, and at the H200 host's launch cost the CPU sets the pace even when each extra kernel is charged
    the full floor t0 on the GPU."""
    from roofkit.measure import layers

    data = layers.load_layers()
    c, tiny = data.launch["host_per_launch_s"], data.launch["graph_per_kernel_s"]
    case = next(x for x in data.cases if x.decode and x.batch == 1 and x.model == "llama-2-7b")
    gpu = layertime.predict(case.model, 1, 1, case.kv_seq, "h200", calibrated=True)
    assert gpu.kernels == 12
    per_kernel = [op.time_s / op.kernels for op in gpu.ops for _ in range(op.kernels)]
    for extra_s in (tiny, gpu.floor_s):
        step = fusion.stream_critical_path((per_kernel + [extra_s] * (40 - 12)) * 32, c)
        assert step["cpu_s"] > step["gpu_s"] and step["gpu_idle_s"] > 0
    outputs = _solution_outputs()
    assert "Hugging Face's eager layer : 40 kernels, CPU 331 µs, GPU 196 µs" in outputs
    lesson = _lesson()
    assert "gains nothing" not in lesson.split("That layer is a minimal one")[1].split("## 5.")[0]
    assert "reduce-overhead" in lesson and "heavily CPU overhead" in lesson


def test_the_measured_layer_is_quoted_by_its_wall_clock():
    """F09-3: the lesson prints layer_wall_s, not the event-timed layer_s that sits behind the L2 flush."""
    outputs = _solution_outputs()
    assert "measured: 169 µs a layer (wall clock, layers back to back), 176 µs replayed as a CUDA graph" in outputs
    assert "launched from the CPU" not in outputs
    assert "within a percent of the model" not in _lesson()


# --- seed 003: exercise 3 (decoder layer) and exercise 5 (fused MLP) ---------------------


def test_decoder_layer_kernel_counts():
    # seed 003 says "10 ops -> 3-4 kernels"; the explicit Llama-style list gives 17 -> 5
    assert len(fusion.DECODER_LAYER_KERNELS) == 17
    assert len(fusion.FUSED_DECODER_LAYER_KERNELS) == 5
    replaced = [k for group in fusion.fusion_groups().values() for k in group]
    assert sorted(replaced) == sorted(fusion.DECODER_LAYER_KERNELS)  # every kernel fused exactly once


def _decode_layer_s(kv_seq, hw="h100", achievable=True):
    from roofkit.catalogs import hardware

    acc = hardware.get(hw)
    peak, bandwidth = acc.peak("bf16", achievable=achievable), acc.memory_bandwidth(achievable=achievable)
    ops = formulas.transformer_layer_ops(1, 1, 4096, 32, 11008, "bf16", gated=True, kv_seq=kv_seq)
    return sum(roofline.time_bounds(cost.flops, cost.bytes, peak, bandwidth)[0] for cost in ops.values())


def test_what_fusion_saves_a_decode_step():
    t0 = layertime.default_calibration().floor_s
    R, c = _decode_layer_s(8192), 20e-6
    # computed by hand: 17 launches of 20 µs (340 µs) outrun the eager GPU work (17 t0 + R);
    # 5 launches (100 µs) hide behind the fused layer's 5 t0 + R
    assert 17 * c > 17 * t0 + R and 5 * c < 5 * t0 + R
    assert key("l09.ex-decoder-launch-time") == pytest.approx(32 * (17 * c - (5 * t0 + R)))
    # with He's 3.6 µs per launch both layers are GPU-bound, and fusion saves 12 floors per layer
    assert key("l09.ex-decoder-launch-time", cpu_us=3.0) == pytest.approx(32 * 12 * t0)
    ms = key("l09.ex-decoder-launch-time") * 1e3
    assert quiz.judge(quiz.get("l09.ex-decoder-launch-time"), f"{ms:.3g} ms").correct
    # the additive model's answers, the old key among them, are named
    assert wrong_name("l09.ex-decoder-launch-time", 32 * 12 * c) == "launches-only"
    assert wrong_name("l09.ex-decoder-launch-time", 32 * 12 * (c + t0)) == "launches-added"
    assert wrong_name("l09.ex-decoder-launch-time", 32 * 12 * t0) == "floors-only"
    assert wrong_name("l09.ex-decoder-launch-time", ms / 32 * 1e-3) == "one-layer-only"
    # section 4 prints one layer at 4,096 cached tokens with He's launch cost: not this question's numbers
    assert key("l09.ex-decoder-launch-time") != pytest.approx(12 * t0, rel=0.5)


def test_the_floor_goes_with_the_achievable_roofs():
    """F09-8: t0 was fitted with achievable roofs (layertime.calibrate), so the layer's roofline time takes them too,
    on every GPU of the exercise's variants; the datasheet-roofs answer is named."""
    t0 = layertime.default_calibration().floor_s
    R_datasheet, R = _decode_layer_s(8192, achievable=False), _decode_layer_s(8192)
    assert R > 1.1 * R_datasheet  # the datasheet roofs make the layer over 10% too fast
    c = 20e-6
    old = 32 * (17 * c - (5 * t0 + R_datasheet))
    assert not math.isclose(key("l09.ex-decoder-launch-time"), old, rel_tol=0.02)
    assert wrong_name("l09.ex-decoder-launch-time", old) == "datasheet-roofs"
    for hw in ("h200", "a100"):
        R_hw = _decode_layer_s(8192, hw)
        eager, fused = max(17 * c, 17 * t0 + R_hw), max(5 * c, 5 * t0 + R_hw)
        assert key("l09.ex-decoder-launch-time", hw=hw) == pytest.approx(32 * (eager - fused))
    # section 4's table is at the H100's achievable roofs, with the H200 host's launches
    outputs = _solution_outputs()
    assert "the layer's roofline time at the H100's achievable roofs: 163 µs" in outputs
    assert "17 kernels: CPU 141 µs, GPU 256 µs -> 256 µs (gpu-bound)" in outputs


def wrong_name(question_id, answer, **params):
    verdict = quiz.judge(quiz.get(question_id).with_params(**params), answer)
    assert verdict.correct is False
    return verdict.misconception


def test_mlp_fusion_saving_depends_on_tokens():
    t, d, f, b = 4096, 4096, 11008, 2
    # the activation round trips: norm output (t d), up output (t f), SiLU output read and written (t f)... :
    # 2 t d + 4 t f elements
    assert key("l09.ex-mlp-saved-bytes") == (2 * t * d + 4 * t * f) * b
    decode = fusion.mlp_block(1, d, f, b)
    assert decode["traffic_ratio"] < 1.001  # weights dominate at decode
    assert fusion.mlp_block(t, d, f, b)["traffic_ratio"] > 2.5  # activations dominate at prefill
    # section 6's table is Llama 2 7B's gated MLP (three matrices, 270 MB of weights): another answer
    gated = fusion.mlp_block(t, d, f, b, gated=True)
    assert gated["weight_bytes"] == pytest.approx(3 * d * f * b, rel=1e-3)
    assert gated["bytes_saved"] == pytest.approx(822.1e6, rel=1e-3)
    assert wrong_name("l09.ex-mlp-saved-bytes", gated["bytes_saved"]) == "gated-mlp"
    assert not math.isclose(key("l09.ex-mlp-saved-bytes"), gated["bytes_saved"], rel_tol=0.2)


# --- seed 000, practice problem 1 -----------------------------------------------------------


def test_pp1a_mlp_gemm_is_about_3600_and_compute_bound():
    p = roofline.analyze(formulas.gemm(8192, 4 * 8192, 8192, "bf16"), "h100", "bf16")
    assert p.intensity == pytest.approx(3600, rel=0.02)  # the seed's "~3600"
    assert p.bound == "compute"


def test_pp1b_naive_attention_counted_per_kernel():
    s = d = 8192
    kernels = formulas.attention_naive_kernels(1, 1, s, d, "bf16")
    assert kernels["softmax"].intensity == pytest.approx(1.25)
    assert roofline.analyze(kernels["softmax"], "h100", "bf16").bound == "memory"
    naive = formulas.attention_naive(1, 1, s, d, "bf16")
    assert naive.intensity == pytest.approx(2048, rel=0.001)
    # the seed's score traffic 3 s^2 b forgets P: S written, read; P written, read = 4 s^2 b
    score_bytes = naive.bytes - 4 * s * d * 2
    assert score_bytes == 4 * s * s * 2
    # the seed's "I ~ 5500?" (2.2e12 / 4.0e8) is not the count
    assert not math.isclose(naive.intensity, 5500, rel_tol=0.2)
    # at real head sizes, naive attention tends to (4 d_h + 5) / (4 b) ~ 65: memory-bound
    assert formulas.attention_naive(1, 1, 2**20, 128, "bf16").intensity == pytest.approx(64.6, rel=0.01)


def test_pp1c_flash_intensity_corrected():
    assert key("l09.pp1-flash-intensity") == pytest.approx(4.1e3, rel=0.01)
    fused = formulas.attention_fused(1, 1, 8192, 8192, "bf16")
    assert fused.bytes == pytest.approx(5.37e8, rel=0.001)  # 4 s d b, not the seed's 1.1e8
    assert not math.isclose(fused.bytes, 1.1e8, rel_tol=0.5)
    assert not math.isclose(fused.intensity, 2e4, rel_tol=0.5)  # the seed's "~2e4"
    assert fused.intensity > 10 * roofline.analyze(fused, "h100", "bf16").ridge  # still far above the ridge
    # the seed's 2e4 comes from dividing by one tensor's bytes instead of four
    assert misconception("l09.pp1-flash-intensity", "one-tensor-of-traffic") == pytest.approx(2e4, rel=0.25)
    # in the ideal count the fused intensity grows with s
    assert formulas.attention_fused(1, 1, 32768, 128).intensity > formulas.attention_fused(1, 1, 8192, 128).intensity


# --- FlashAttention's tiles (Dao et al. 2022, Theorem 2) -------------------------------------


def test_tiled_flash_intensity_levels_off():
    d, b, r, s = 128, 2, 128, 4096
    tiles = s // r
    expected = s * s * (4 * d + 5) / ((2 * s * d + 2 * tiles * s * d) * b)  # Q, O once; K, V once per tile
    assert key("l09.flash-tiled-intensity") == pytest.approx(expected)
    plateau = (4 * d + 5) * r / (2 * d * b)  # ~ 2r/b, the limit as s grows
    assert key("l09.flash-tiled-intensity", seq=32768) == pytest.approx(plateau, rel=0.01)
    # twice the sequence, (almost) the same intensity once levelled off; the ideal count would double
    assert key("l09.flash-tiled-intensity", seq=65536) == pytest.approx(key("l09.flash-tiled-intensity", seq=32768),
                                                                      rel=0.01)
    # the lesson prints 128 (d_h, the tile's rows) everywhere: at 4,096 tokens the key is not within 2% of it
    assert not quiz.judge(quiz.get("l09.flash-tiled-intensity"), 128).correct
    assert misconception("l09.flash-tiled-intensity", "ideal-count") == pytest.approx(s * (4 * d + 5) / (4 * d * b))
    assert quiz.judge(quiz.get("l09.flash-tiled-intensity"), 2068).misconception == "ideal-count"
    naive = formulas.attention_naive(1, 1, s, d, "bf16").intensity
    assert quiz.judge(quiz.get("l09.flash-tiled-intensity"), naive).misconception == "naive-traffic"


def test_the_h100_verdict_at_8192_and_why():
    h100 = roofline.analyze(formulas.gemm(1, 1, 1), "h100", "bf16")  # for the ridge
    tile = formulas.attention_tile_bytes(128, 128, "bf16")
    assert tile == 128 * 1024
    # every re-read from HBM: 128-row tiles level off below the H100's ridge, capping it near 43% of peak ...
    tiled = formulas.attention_fused(1, 1, 16384, 128, "bf16", on_chip_bytes=tile)
    assert tiled.intensity < h100.ridge
    assert roofline.attainable(tiled.intensity, 989e12, 3.35e12) / 989e12 == pytest.approx(0.434, abs=0.005)
    # ... which FlashAttention-3's measured 75% of peak (Shah et al. 2024) beats: re-reads come from the L2.
    # One head's K and V at s = 8192 (4 MiB) fit the H100's 50 MB L2; with M = L2 the count is the ideal one
    from roofkit.catalogs import hardware

    l2 = hardware.get("h100").l2_bytes
    assert 2 * 8192 * 128 * 2 < l2
    ideal = formulas.attention_fused(1, 64, 8192, 128, "bf16")
    assert formulas.attention_fused(1, 64, 8192, 128, "bf16", on_chip_bytes=l2) == ideal
    assert roofline.analyze(ideal, "h100", "bf16").bound == "compute"  # the verdict of section 8 stands


def test_flashattention_keeps_the_flops():
    assert key("l09.flash-flops") == "same FLOPs but fewer bytes"
    verdict = quiz.judge(quiz.get("l09.flash-flops"), "fewer FLOPs and fewer bytes")
    assert verdict.misconception == "flash-reduces-flops"


def test_flash_speedup_is_time_not_traffic():
    speedup = key("l09.ex-flash-speedup")
    assert 4 < speedup < 5.5
    assert misconception("l09.ex-flash-speedup", "traffic-ratio") == pytest.approx(65, rel=0.01)


def test_the_memory_bound_half_is_mostly_naive_attention():
    # section 7: Llama 2 7B at prefill (s = 4096) with naive attention on the H100; the 41.6 and 5.7 points
    ops = formulas.transformer_layer_ops(1, 4096, 4096, 32, 11008, "bf16", gated=True, fused_attention=False)
    placed = {name: roofline.analyze(cost, "h100", "bf16") for name, cost in ops.items()}
    total = sum(p.time_s for p in placed.values())
    memory = {n: p.time_s / total for n, p in placed.items() if p.bound == "memory"}
    attention = sum(v for n, v in memory.items() if n.startswith("attn."))
    assert sum(memory.values()) == pytest.approx(0.473, abs=0.001)
    assert attention == pytest.approx(0.416, abs=0.001)
    assert sum(memory.values()) - attention == pytest.approx(0.057, abs=0.001)
    assert sorted(memory) == sorted(["norm1", "attn.qk", "attn.softmax", "attn.pv", "residual1", "norm2", "mlp.act",
                                     "residual2"])


def test_naive_attention_is_said_to_be_the_minimal_form():
    """F09-4: the three naive kernels leave out the scale and the mask; an eager path such as Hugging Face's
    LlamaAttention moves about 24 bytes per score in BF16 (S written 2, scaled 2 + 2, masked 2 + 2, softmax read 2
    and P written in FP32 4, cast 4 + 2, read by PV 2) against the minimal form's 8, so the lesson's shares are
    lower bounds."""
    s, d, b = 4096, 128, 2
    kernels = formulas.attention_naive_kernels(1, 1, s, d, "bf16")
    minimal_per_score = (sum(k.bytes for k in kernels.values()) - 4 * s * d * b) / s**2
    assert minimal_per_score == pytest.approx(4 * b)
    eager_per_score = b + 2 * b + 2 * b + (b + 4) + (4 + b) + b
    assert eager_per_score / minimal_per_score == pytest.approx(3)
    lesson = _lesson()
    assert "leaves out the scale and the mask" in lesson and "are lower bounds" in lesson
    assert "in its minimal form, runs as three kernels" in lesson


def test_the_tile_size_is_called_a_model():
    """F09-6: FlashAttention-1's Algorithm 1 sets B_c = ceil(M/4d), B_r = min(ceil(M/4d), d), M in elements; the
    lesson's B_r = floor(M / (4 d_h b)) is its own model, and a real tile holds FP32 accumulators."""
    lesson = _lesson()
    assert "(Dao et al. size their blocks as $M/4d_h$)" not in lesson
    assert r"$B_r = \min(\lceil M/4d \rceil, d)$" in lesson and "This is a model of the tile" in lesson
    assert "fills M = 128 KiB in this model" in _solution_outputs()


def test_the_l2_is_printed_in_the_catalog_s_own_unit():
    """U4: the catalog stores NVIDIA's "50 MB" as 50e6 bytes; printed in MiB it read "48 MiB", a size no source
    gives (CUDA reports the H100's L2 as 50 MiB). The lesson prints the catalog's MB."""
    outputs = _solution_outputs()
    assert "the H100's L2: 50 MB" in outputs and "48 MiB" not in outputs


def test_he_s_figure_is_dispatch_not_a_cuda_launch():
    """U1: He's 280 thousand ops/s is PyTorch's dispatch on tiny tensors, compared with plain Python; the lesson
    says so and gives the H200 host's measured CUDA launch beside it."""
    from roofkit.measure import layers

    assert layers.load_layers().launch["host_per_launch_s"] > 2 * fusion.DEFAULT_LAUNCH_OVERHEAD_S
    assert "That is PyTorch's own dispatch" in _lesson()


def test_the_floor_saving_is_called_an_estimate_and_measured():
    """U2: "twelve kernels' floors" assumes one t0 for every kernel, an average the whole-layer fit cannot split
    between small kernels and GEMMs; the lesson says so and prints the H200's torch.compile measurement (the
    Llama 3 8B decode layer, 177 µs eager, 159 µs with the norms and SiLU-product fused). U3: a CUDA graph is no
    longer said to leave the GPU's side untouched in every case."""
    from roofkit.measure import layers

    case = next(c for c in layers.shipped("compiled.json")["cases"] if c["seq"] == 1 and c["batch"] == 1)
    assert case["compiled_default_s"] < case["eager_s"]
    assert "eager 177 µs, torch.compile 159 µs" in _solution_outputs()
    lesson = _lesson()
    assert "in this model,\ntwelve kernels' floors" in lesson and "take the saving as an estimate" in lesson
    assert "It may trim the GPU's gap between kernels a little too" in lesson
