"""roofkit.layertime: a decoder layer's time, plain and calibrated, held against a real H200.

The oracles: the measurements shipped in roofkit/data/measured/h200-2026-11-30
(one card, one day; layers.json for the fit, compiled.json's eager layers as
cases the fit never saw), roofkit.roofline for the plain sum, a brute-force
minimization for the fitted floor, and hand-derived byte counts.
"""

import dataclasses
import json
import re

import numpy as np
import pytest

from roofkit import formulas
from roofkit.catalogs import hardware, models
from roofkit import roofline
from roofkit.perf import layertime
from roofkit.errors import InvalidValue, RoofkitError, UnknownName
from roofkit.catalogs.hardware import NoAchievableFigure
from roofkit.measure import layers

from helpers import run

TARGET = 0.15  # issue 11: every case of the dataset within 15%
DATA = layers.load_layers()


@pytest.fixture(scope="module")
def calibration():
    return layertime.calibrate()


# --- the dataset, replayed --------------------------------------------------------------------------


@pytest.mark.parametrize("case", DATA.cases, ids=[c.label for c in DATA.cases])
def test_calibrated_prediction_of_every_measured_layer_is_within_15_percent(case, calibration):
    predicted = layertime.predict_case(case, "h200", calibration=calibration)
    assert abs(predicted.time_s / case.layer_s - 1) < TARGET, (case.label, predicted.time_s, case.layer_s)
    # the graph-replayed layer too: the floor is not the CPU's launch cost
    assert abs(predicted.time_s / case.layer_graph_s - 1) < TARGET


def test_the_plain_roofline_misses_by_far_more():
    rows = layertime.compare()
    worst_plain = max(abs(r["plain_ratio"] - 1) for r in rows)
    worst_calibrated = max(abs(r["calibrated_ratio"] - 1) for r in rows)
    assert worst_plain > 0.4 and worst_calibrated < TARGET
    assert all(r["plain_s"] < r["measured_s"] for r in rows)  # datasheet roofs: always optimistic here
    assert all(r["plain_s"] < r["achievable_roofline_s"] < r["calibrated_s"] for r in rows)


def test_leave_one_out_generalizes():
    rows = layertime.leave_one_out()
    assert len(rows) == len(DATA.cases)
    for row in rows:
        assert abs(row["ratio"] - 1) < TARGET, row["label"]
    floors = [row["floor_s"] for row in rows]
    assert max(floors) / min(floors) < 1.1  # one parameter, and no case moves it much


def test_eager_layers_the_fit_never_saw():
    # compiled.json: the Llama 3 8B layer as one eager function, at shapes layers.json does not hold
    for case in layers.shipped("compiled.json")["cases"]:
        kv_seq = None if case["seq"] > 1 else case["kv_seq"]
        t = layertime.predict(case["model"], case["batch"], case["seq"], kv_seq, "h200", calibrated=True)
        assert abs(t.time_s / case["eager_s"] - 1) < TARGET
        assert t.fused_s < t.time_s


def test_the_floor_is_the_least_squares_fit(calibration):
    peak, bw, attention = calibration.peak("bf16"), calibration.bandwidth, calibration.attention_peak("bf16")

    def rate(k):
        return attention if k.kind == "attention" else peak

    cases = [layertime._case_kernels(c) for c in DATA.cases]
    roof = np.array([sum(roofline.time_bounds(k.flops, k.bytes, rate(k), bw)[0] for k in ks) for ks in cases])
    count = np.array([len(ks) for ks in cases])
    measured = np.array([c.layer_s for c in DATA.cases])
    grid = np.linspace(0, 20e-6, 20001)[:, None]  # 1 ns steps
    squares = np.sum(np.square((roof + count * grid) / measured - 1), axis=1)
    best = grid[np.argmin(squares), 0]
    assert calibration.floor_s == pytest.approx(best, abs=2e-9)
    # between a tiny kernel replayed in a CUDA graph and one timed alone between two events
    assert DATA.launch["graph_per_kernel_s"] < calibration.floor_s < DATA.launch["single_kernel_event_s"]


def test_calibration_roofs_are_the_catalog_s_achievable_h200(calibration):
    h200 = hardware.get("h200")
    assert calibration.catalog == "h200" and calibration.cases == len(DATA.cases)
    for precision, rate in calibration.peak_flops.items():
        assert h200.peak(precision, achievable=True) == pytest.approx(rate, rel=1e-3)
    assert h200.memory_bandwidth(achievable=True) == pytest.approx(calibration.bandwidth, rel=1e-3)
    assert "h200-2026-11-30" in h200.source("achievable.bf16")


# --- attention at its own achievable rate ---------------------------------------------------------------


def _largest_prefill_attention():
    case = max((c for c in DATA.cases if c.causal), key=lambda c: c.batch * c.seq * c.seq)
    attn = next(k for k in layertime._case_kernels(case) if k.kind == "attention")
    return case, attn


def test_the_catalog_s_attention_rate_is_the_shipped_h200_s_largest_attention():
    case, attn = _largest_prefill_attention()
    assert (case.model, case.batch, case.seq) == ("llama-2-7b", 8, 2048)
    assert (case.batch, case.H, case.seq, case.head_dim) == layers.ATTENTION_SHAPE  # what roofkit measure times
    measured = attn.flops / case.ops_s["attn"]
    h200 = hardware.get("h200")
    assert h200.attention_peak("bf16") == pytest.approx(measured, rel=1e-3)
    assert "layers.json" in h200.source("achievable_attention.bf16")
    # FlashAttention-3 (Shah et al. 2024): FlashAttention-2 at about 35% of an H100's 16-bit peak, FlashAttention-3
    # up to 75%; PyTorch's SDPA on the H200 lies between, and well below the best matmul
    assert 0.35 * h200.peak("bf16") < measured < 0.75 * h200.peak("bf16")
    assert measured < 0.7 * h200.peak("bf16", achievable=True)
    with pytest.raises(NoAchievableFigure, match="no achievable bf16 attention FLOP/s"):
        hardware.get("h100").attention_peak("bf16")


def test_the_calibration_gives_attention_its_own_rate(calibration):
    assert calibration.attention_peak("bf16") == hardware.get("h200").attention_peak("bf16")
    # FP8: derived in the catalog from the measured BF16 rate and FlashAttention-3's FP8 over FP16 forward gain on
    # an H100 (arXiv:2407.08608: 740 TFLOP/s FP16, close to 1.2 PFLOP/s FP8), below the FP8 matmul's rate
    assert calibration.attention_peak("fp8") == hardware.get("h200").attention_peak("fp8")
    assert calibration.attention_peak("fp8") == pytest.approx(calibration.attention_peak("bf16") * 1200 / 740, rel=1e-4)
    assert calibration.attention_peak("fp8") < calibration.peak("fp8")
    assert "attention" in calibration.source
    t = layertime.predict("llama-2-7b", 8, 2048, hw="h200", calibrated=True)
    attn = next(op for op in t.ops if op.name == "attn")
    assert attn.bound == "compute" and t.attention_flops == calibration.attention_peak("bf16")
    assert attn.time_s == pytest.approx(calibration.floor_s + attn.flops / t.attention_flops, rel=1e-12)
    assert not t.notes


def test_long_prefills_are_no_longer_too_fast(calibration):
    """Attention at the matmul's rate made the longest prefill 13% too fast; its own rate closes part of it."""
    matmul_only = dataclasses.replace(calibration, attention_flops={})
    matmul_only = dataclasses.replace(matmul_only, floor_s=layertime.fit_floor(
        DATA.cases, calibration.peak("bf16"), calibration.bandwidth))
    case, _ = _largest_prefill_attention()
    before = layertime.predict_case(case, "h200", calibration=matmul_only).time_s / case.layer_s
    after = layertime.predict_case(case, "h200", calibration=calibration).time_s / case.layer_s
    assert before < 0.87 < after < 1
    # the longer the prompt, the larger attention's share, and the more its own rate adds
    gains = [layertime.predict("llama-3-8b", 1, s, hw="h200", calibrated=True, calibration=calibration).time_s
             / layertime.predict("llama-3-8b", 1, s, hw="h200", calibrated=True, calibration=matmul_only).time_s
             for s in (512, 2048, 8192, 32768)]
    assert gains == sorted(gains) and gains[0] < 1.01 and gains[-1] > 1.2


def test_the_attention_op_the_rate_was_not_taken_from():
    # the batch-1 prefill of 2,048 tokens: its attention, timed alone, against t0 + F / the rate of the 8 x 2,048 one
    case = next(c for c in DATA.cases if c.causal and c.batch == 1 and c.seq == 2048)
    t = layertime.predict_case(case, "h200")
    attn = next(op for op in t.ops if op.name == "attn")
    assert abs(attn.time_s / case.ops_s["attn"] - 1) < TARGET


def test_a_gpu_without_an_attention_rate_says_so_only_where_it_matters():
    other = layertime.Calibration("Another GPU", {"bf16": 1e15}, 1e12, 1e-6, catalog="b200")
    prefill = layertime.predict("llama-3-8b", 1, 8192, hw="b200", calibrated=True, calibration=other)
    assert prefill.attention_flops is None and any("no achievable bf16 attention rate" in n for n in prefill.notes)
    decode = layertime.predict("llama-3-8b", 1, 1, 4096, hw="b200", calibrated=True, calibration=other)
    assert not any("attention rate" in n for n in decode.notes)  # memory-bound: its rate does not matter


def test_a_catalog_entry_may_publish_an_attention_rate():
    from helpers import scratch_hardware_catalog

    entry = {"name": "Lab GPU", "source": "datasheet", "peak_tflops": {"bf16": 100}, "bandwidth_tb_s": 1,
             "achievable_tflops": {"bf16": 80}, "achievable_bandwidth_tb_s": 0.9, "achievable_source": "sweep",
             "achievable_attention_tflops": {"bf16": 50}, "achievable_attention_source": "an SDPA timed alone"}
    with scratch_hardware_catalog():
        lab = hardware.register(entry, key="lab-gpu")
        assert lab.attention_peak("bf16") == 50e12 and lab.has_achievable("attention.bf16")
        assert lab.source("achievable_attention.bf16") == "an SDPA timed alone"
        assert lab.to_dict()["achievable_attention_flops"] == {"bf16": 50e12}
        t = layertime.predict("llama-3-8b", 1, 4096, hw="lab-gpu", calibrated=True)
        assert t.attention_flops == 50e12 and not any("attention rate" in n for n in t.notes)
        for bad in ({"achievable_attention_tflops": 50}, {"achievable_attention_tflops": {"bf16": -1}}):
            with pytest.raises(InvalidValue, match="achievable_attention_tflops"):
                hardware.register(entry | bad, key="bad-gpu")


def test_a_dataset_brings_its_own_attention_rate():
    doc = layers.shipped("layers.json") | {"attention": {"label": "x", "dtype": "bf16", "flops": 4e11,
                                                          "time_s": 1e-3}}
    rate, where = layertime.attention_rate(doc)
    assert rate == {"bf16": pytest.approx(4e14)} and "timed alone" in where
    assert layertime.calibrate(doc).attention_peak("bf16") == pytest.approx(4e14)
    with pytest.raises(InvalidValue, match="attention must hold flops and time_s"):
        layers.load_layers(doc | {"attention": {"flops": 4e11, "time_s": 0}})
    bare = layers.shipped("layers.json") | {"device": "Some GPU"}
    assert layertime.attention_rate(bare, hw="b200")[0] == {}  # nothing measured, nothing published


def test_decode_gemms_need_no_bandwidth_of_their_own():
    check = layertime.gemm_bandwidth_check()
    assert 0.55 < check["measured_fraction"] < 0.7  # timed alone, a decode GEMM reaches ~64% of the copy
    assert check["measured_fraction"] < check["floor_predicted_fraction"] < 1  # the floor explains much of it
    assert 0.9 < check["factor"] < 1.15  # fitted on whole layers, the GEMMs stream at the copy bandwidth
    assert check["rms_error"] == pytest.approx(check["floor_only_rms_error"], abs=0.005)
    assert 2e-6 < check["alone_extra_s"] < 5e-6  # an op timed alone costs a few µs more than in the layer


# --- the kernel lists ------------------------------------------------------------------------------------


def test_ideal_list_is_one_kernel_per_op_of_the_formulas():
    ks = layertime.kernels("llama-3-8b", 2, 128)
    ops = formulas.transformer_layer_ops(2, 128, 4096, 32, 14336, "bf16", gated=True, kv_heads=8, causal=True)
    assert [k.name for k in ks] == list(ops) == list(layers.OPS)
    for k in ks:
        assert (k.flops, k.bytes) == (ops[k.name].flops, ops[k.name].bytes)


def test_eager_list_runs_silu_and_mul_apart_and_writes_the_norm_statistic():
    T, ff = 4 * 2048, 11008
    ideal = {k.name: k for k in layertime.kernels("llama-2-7b", 4, 2048)}
    eager = {k.name: k for k in layertime.kernels("llama-2-7b", 4, 2048, eager=True)}
    assert len(eager) == len(ideal) + 1
    assert eager["mlp.act.silu"].bytes == 2 * T * ff * 2  # read gate, write silu(gate)
    assert eager["mlp.act.mul"].bytes == 3 * T * ff * 2  # read silu(gate) and up, write the product
    assert ideal["mlp.act"].bytes == 3 * T * ff * 2  # fused: read gate and up, write the product
    assert eager["mlp.act.silu"].flops + eager["mlp.act.mul"].flops == ideal["mlp.act"].flops
    assert eager["norm1"].bytes - ideal["norm1"].bytes == 4 * T  # one fp32 value per row
    gpt3 = layertime.kernels("gpt-3", 1, 16, eager=True)
    assert [k.name for k in gpt3 if k.op == "mlp.act"] == ["mlp.act"]  # GELU is one kernel


def test_gqa_decode_attention_reads_the_kv_heads_cache():
    # Llama 3 8B, 8 KV heads of 128, bf16: K and V of 8192 cached tokens are 2 x 8 x 128 x 2 bytes per token
    attn = {k.name: k for k in layertime.kernels("llama-3-8b", 4, 1, kv_seq=8192)}["attn"]
    cache = 4 * 8192 * 2 * 8 * 128 * 2
    q_and_o = 4 * 2 * 32 * 128 * 2
    assert attn.bytes == cache + q_and_o
    mha = {k.name: k for k in layertime.kernels("llama-2-7b", 4, 1, kv_seq=8192)}["attn"]
    assert mha.bytes - q_and_o == 4 * cache  # 32 KV heads instead of 8


def test_plain_prediction_is_the_roofline_sum_of_the_ideal_list():
    t = layertime.predict("mistral-7b", 8, 1, kv_seq=4096, hw="h100")
    by_hand = sum(roofline.analyze(k, "h100", "bf16").time_s for k in layertime.kernels("mistral-7b", 8, 1, 4096))
    assert t.time_s == pytest.approx(by_hand, rel=1e-12)
    assert (t.peak_flops, t.bandwidth, t.floor_s, t.roofs) == (989e12, 3.35e12, 0.0, "datasheet")
    assert t.kernels == 11 and t.fused_s is None


def test_calibrated_prediction_adds_the_floor_to_every_eager_kernel(calibration):
    t = layertime.predict("llama-2-7b", 1, 1, kv_seq=2048, hw="h200", calibrated=True)
    ks = layertime.kernels("llama-2-7b", 1, 1, 2048, eager=True)
    expected = sum(calibration.floor_s + max(k.flops / calibration.peak("bf16"), k.bytes / calibration.bandwidth)
                   for k in ks)
    assert t.time_s == pytest.approx(expected, rel=1e-12) and t.kernels == 12
    # fusing silu * up saves one floor and two passes over T x d_ff
    saved = calibration.floor_s + 2 * 11008 * 2 / calibration.bandwidth + 2 * 4 / calibration.bandwidth
    assert t.time_s - t.fused_s == pytest.approx(saved, rel=1e-9)
    bounds = {op.name: op.bound for op in t.ops}
    assert bounds["residual1"] == "floor" and bounds["qkv"] == "memory"
    assert layertime.predict("llama-2-7b", 8, 2048, hw="h200", calibrated=True).ops[1].bound == "compute"


def test_calibrated_needs_achievable_roofs():
    with pytest.raises(NoAchievableFigure, match="NVIDIA B200 has no achievable memory bandwidth"):
        layertime.predict("llama-3-8b", 1, 1, 4096, hw="b200", calibrated=True)
    with pytest.raises(InvalidValue, match="calibrated must be True or False"):
        layertime.predict("llama-3-8b", 1, 1, 4096, hw="h200", calibrated="yes")
    with pytest.raises(UnknownName, match="Unknown model"):
        layertime.predict("llama-4", 1, 1, hw="h200")
    with pytest.raises(InvalidValue, match="^batch must be"):
        layertime.predict("llama-3-8b", 0, 1, hw="h200")


def test_a_calibration_measured_elsewhere_brings_only_its_floor():
    other = layertime.Calibration("Another GPU", {"bf16": 1e15}, 1e12, 1e-6, catalog="b200")
    t = layertime.predict("llama-3-8b", 1, 1, 4096, hw="h200", calibrated=True, calibration=other)
    assert t.peak_flops == hardware.get("h200").peak("bf16", achievable=True)  # h200's own achievable roofs
    assert t.floor_s == 1e-6 and "floor measured on Another GPU" in t.notes[0]


# --- the datasets ---------------------------------------------------------------------------------------


def test_shipped_dataset_and_its_provenance():
    assert DATA.device == "NVIDIA H200" and DATA.torch.startswith("2.11") and DATA.date == "2026-11-30"
    assert DATA.roofs["peak_flops_per_s"]["bf16"] == pytest.approx(800.9e12, rel=1e-4)
    readme = layers.shipped("README.md")
    for fact in ("one card, one driver, one day", "PyTorch 2.11", "CUDA events", "512 MiB", "median of\n  15"):
        assert fact in readme
    with pytest.raises(InvalidValue, match="has no file 'nope.json'; it has: README.md, compiled.json"):
        layers.shipped("nope.json")


def test_load_layers_from_files_folders_and_profiles(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "layers.json").write_text(json.dumps(layers.shipped("layers.json")))
    (folder / "measure.json").write_text(json.dumps(layers.shipped("measure.json")))
    from_folder = layers.load_layers(folder)
    assert from_folder.roofs == DATA.roofs and from_folder.catalog == "h200" and len(from_folder.cases) == 9
    bare = layers.load_layers(folder / "layers.json")
    assert bare.roofs is None  # then calibrate() takes the catalog's achievable figures for the device
    assert layertime.calibrate(bare).floor_s == pytest.approx(layertime.calibrate().floor_s, rel=1e-3)
    profile = {"roofkit_profile": 1, "gpu": {"peak_flops_per_s": {"bf16": 1e15}, "bandwidth_bytes_per_s": 4e12,
                                              "catalog": "h200", "layers": layers.shipped("layers.json")}}
    (tmp_path / "p.json").write_text(json.dumps(profile))
    assert layers.load_layers(tmp_path / "p.json").roofs["bandwidth_bytes_per_s"] == 4e12
    again = layers.LayerDataset(**{k: getattr(DATA, k) for k in ("device", "cases", "launch", "torch", "date",
                                                                  "method", "roofs", "catalog")})
    assert layers.load_layers(json.loads(json.dumps(again.to_dict()))).cases == DATA.cases


@pytest.mark.parametrize("content, message", [
    (None, "No layers dataset at"),
    ("{nope", "is not valid JSON"),
    ('{"cases": []}', "is not a layers dataset"),
    ('{"roofkit_profile": 1, "gpu": null}', "a roofkit profile without measured layers"),
    ('{"cases": [{"model": "llama-2-7b"}]}', "case 0 lacks d, H, KV"),
])
def test_load_layers_errors(tmp_path, content, message):
    path = tmp_path / "l.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InvalidValue, match=message):
        layers.load_layers(path)


def test_a_case_whose_shape_is_not_the_catalog_s_is_refused():
    doc = layers.shipped("layers.json")
    doc["cases"][0]["ff"] = 11000
    with pytest.raises(InvalidValue, match="the catalog says"):
        layertime.calibrate(doc)


# --- the command line -----------------------------------------------------------------------------------------


DECODE = ["layer", "--model", "llama-2-7b", "--batch", "1", "--seq", "1", "--kv-seq", "2048", "--hw", "h200",
          "--dtype", "bf16"]


def test_cli_json_contract(capsys):
    code, out, err = run(capsys, *DECODE, "--calibrated", "--json")
    assert code == 0, err
    data = json.loads(out)
    measured = DATA.cases[2]
    assert (measured.batch, measured.seq, measured.kv_seq) == (1, 1, 2048)
    assert abs(data["time_s"] / measured.layer_s - 1) < TARGET
    assert [op["name"] for op in data["ops"]] == list(layers.OPS)
    for op in data["ops"]:
        assert {"name", "flops", "bytes", "time_s", "bound"} <= set(op)
        assert op["bound"] in ("compute", "memory", "floor")
    assert data["time_s"] == pytest.approx(sum(op["time_s"] for op in data["ops"]))
    assert data["calibrated"] is True and data["kernels"] == 12


def test_cli_prefill_without_kv_seq_is_causal(capsys):
    code, out, _ = run(capsys, "--json", "layer", "--model", "llama-3-8b", "--batch", "2", "--seq", "1024",
                       "--hw", "h100")
    data = json.loads(out)
    attn = next(op for op in data["ops"] if op["name"] == "attn")
    assert code == 0 and data["kv_seq"] is None and data["calibrated"] is False
    assert attn["flops"] == formulas.attention_fused(2, 32, 1024, 128, kv_heads=8, causal=True).flops


def test_cli_text_is_a_table(capsys):
    code, out, _ = run(capsys, *DECODE, "--calibrated")
    assert code == 0
    assert "decode step, batch 1, 2048 cached tokens, on NVIDIA H200" in out
    assert re.search(r"a floor of 5\.\d+ µs per kernel", out) and "fusing would save" in out
    lines = out.splitlines()
    assert any(line.startswith("mlp.act") and "floor (2 kernels)" in line for line in lines)
    assert lines[-2].startswith("layer") or lines[-1].startswith("one kernel per op")


def test_cli_profile(capsys, tmp_path):
    doc = layers.shipped("layers.json")
    for case in doc["cases"]:
        case["layer_s"] *= 1.5  # a slower GPU: a larger floor
    path = tmp_path / "slow.json"
    path.write_text(json.dumps(doc))
    code, out, err = run(capsys, *DECODE, "--calibrated", "--profile", str(path), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["floor_s"] > 1.5 * layertime.calibrate().floor_s
    assert data["calibration"]["cases"] == 9


@pytest.mark.parametrize("argv, message", [
    (["--model", "llama-2-8b"], "Unknown model 'llama-2-8b'. Did you mean 'llama-3-8b'"),
    (["--batch", "0"], "batch must be a whole number of at least 1"),
    (["--kv-seq", "x"], "kv-seq must be a whole number"),
    (["--hw", "h1000"], "Unknown accelerator 'h1000'"),
    (["--hw", "b200", "--calibrated"], "no achievable memory bandwidth"),
    (["--dtype", "fp7"], "Unknown precision 'fp7'"),
    (["--dtype", "fp64"], "has no fp64 peak"),
    (["--profile", "p.json"], "use it with --calibrated"),
    (["--calibrated", "--profile", "/no/such.json"], "No layers dataset at"),
])
def test_cli_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    flags = [a for a in argv if a == "--calibrated"]
    rest = [a for a in argv if a != "--calibrated"]
    options = dict(zip(DECODE[1::2], DECODE[2::2])) | dict(zip(rest[0::2], rest[1::2]))  # argv's values win
    line = ["layer", *[x for pair in options.items() for x in pair], *flags]
    code, out, err = run(capsys, *line)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


def test_cli_missing_arguments(capsys):
    code, _, err = run(capsys, "layer", "--model", "llama-2-7b", "--batch", "1", "--seq", "1")
    assert code == 2 and "--hw" in err and len(err.strip().splitlines()) == 1


def test_errors_are_roofkit_errors():
    for bad in (lambda: layertime.predict("x", 1, 1, hw="h200"), lambda: layers.load_layers("/no/file.json")):
        with pytest.raises(RoofkitError):
            bad()
    assert models.get("llama-2-7b").layer_ops(1, 1, 16)["attn"].bytes > 0
