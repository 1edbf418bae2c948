"""The accelerator catalog: sourced, dense figures, found by any common spelling.

The oracle for the figures is typed here from the vendors' datasheets (dense
TFLOP/s, TB/s, GB; NVIDIA's T4, A100, H100 (SXM5, PCIe and NVL columns), H200,
B200 and L4 datasheets, AMD's MI300X data sheet, Google Cloud's TPU v5e and v5p
pages; for the H800, DeepSeek's papers and notes), not read from the catalog file.
"""

import json
import re
import tomllib
from pathlib import Path
from importlib import resources

import pytest

from roofkit.catalogs import hardware, links, nccl_tuning
from roofkit.perf import nccl
from roofkit.perf.parallel.fabric import links_of
from roofkit.errors import InvalidValue, RoofkitError, UnknownHardware, UnknownPrecision, UnsupportedPrecision

from helpers import scratch_hardware_catalog

DOCUMENT = tomllib.loads(resources.files("roofkit").joinpath("data/hardware.toml").read_text("utf-8"))
CITATIONS = DOCUMENT.pop("sources")
BUILT_IN = list(DOCUMENT)  # the shipped entries, whatever else a test or doctest registered


@pytest.fixture
def scratch_catalog():
    """Let a test register accelerators, then put the module-global catalog back as it was."""
    with scratch_hardware_catalog():
        yield


# --- sources ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", BUILT_IN)
def test_every_figure_has_a_cited_source(key):
    acc = hardware.get(key)
    figures = ["bandwidth", *(f"peak.{p}" for p in acc.peak_flops)]
    figures += [f for f in ("memory_bytes", "l2_bytes", "compute_units") if getattr(acc, f) is not None]
    for figure in figures:
        source = acc.source(figure)
        assert source in CITATIONS.values(), f"{key}: {figure} cites {source!r}, not a known source"
        assert source not in CITATIONS, f"{key}: {figure} is a bare source id"
        assert re.search(r"\s", source), f"{key}: {figure} source {source!r} does not read as a citation"


def test_every_source_id_in_the_file_is_defined():
    for key, table in DOCUMENT.items():
        for source_id in [table["source"], *table.get("sources", {}).values()]:
            assert source_id in CITATIONS, f"{key} uses undefined source {source_id!r}"


def test_figures_from_another_source_say_so():
    h100 = hardware.get("h100")
    assert h100.source("l2_bytes").startswith("NVIDIA H100 Tensor Core GPU Architecture whitepaper")
    assert h100.source("peak.bf16").startswith("NVIDIA H100 Tensor Core GPU datasheet")
    assert "Infinity Cache" in hardware.get("mi300x").source("l2_bytes")


# --- names ------------------------------------------------------------------------------


def test_no_alias_points_at_two_chips():
    for key in BUILT_IN:
        acc = hardware.get(key)
        for spelling in (acc.key, acc.name, *acc.aliases):
            assert hardware.get(spelling).key == key, f"{spelling!r} of {key} resolves elsewhere"


@pytest.mark.parametrize("spelling", ["H100 SXM5", "h100-sxm", "h100", "H100", "h100_sxm5", " H100-SXM5 ",
                                      "NVIDIA H100 SXM5 80GB", "h100sxm"])
def test_lookup_ignores_case_spaces_dashes_and_underscores(spelling):
    assert hardware.get(spelling).key == "h100-sxm"


def test_lookup_tells_the_h100s_apart():
    assert hardware.get("H100 PCIe").key == "h100-pcie"
    assert hardware.get("tpu v5e").key == hardware.get("TPU-v5-lite").key == "tpu-v5e"
    acc = hardware.get("a100")
    assert hardware.get(acc) is acc


def test_unknown_accelerator_suggests_the_closest():
    with pytest.raises(UnknownHardware, match=(
            r"^Unknown accelerator 'h10'\. Did you mean 'h100-sxm' or .*\? Expected one of: a10, a100-sxm4-80gb, "
            r"b200, .*, h100-pcie, h100-sxm, .*tpu-v6e, v100-sxm2\.$")) as caught:
        hardware.get("h10")
    assert isinstance(caught.value, LookupError) and isinstance(caught.value, RoofkitError)
    with pytest.raises(UnknownHardware, match=r"^Unknown accelerator 'mi300'\. Did you mean 'mi300x'"):
        hardware.get("mi300")
    with pytest.raises(UnknownHardware, match=r"^Unknown accelerator 42\."):
        hardware.get(42)


# --- precisions and dense peaks ---------------------------------------------------------


def test_t4_has_no_bf16():
    t4 = hardware.get("t4")
    with pytest.raises(UnsupportedPrecision, match=(
            r"^NVIDIA T4 has no bf16 peak in the catalog\. Available precisions: fp32, fp16, int8\.$")):
        t4.peak("bfloat16")
    with pytest.raises(UnsupportedPrecision, match=r"^NVIDIA T4 has no bf16 peak"):
        t4.ridge("bf16")
    with pytest.raises(UnknownPrecision, match=r"^Unknown precision 'bf61'"):
        t4.peak("bf61")


def test_dense_not_sparse():
    h100 = hardware.get("h100")
    assert h100.peak("bf16") == 989e12
    assert h100.peak("fp16") == 989e12  # not the sparse 1,979: the classic mistake
    assert h100.peak("fp8") == 1979e12
    assert h100.peak("e4m3") == h100.peak("FP8")


@pytest.mark.parametrize("key", [k for k in BUILT_IN if DOCUMENT[k]["vendor"] in ("NVIDIA", "AMD")])
def test_gpu_peaks_keep_the_precision_ladder(key):
    # dense FP8 is twice dense BF16; a ratio far above 2 means a sparse figure slipped in
    acc = hardware.get(key)
    if "fp8" in acc.peak_flops:
        assert acc.peak("fp8") <= 2.1 * acc.peak("bf16")
    if "fp16" in acc.peak_flops and "bf16" in acc.peak_flops:
        assert acc.peak("fp16") == acc.peak("bf16")
    if "tf32" in acc.peak_flops:
        assert acc.peak("tf32") <= 0.55 * acc.peak("fp16")


# chip: dense TFLOP/s per precision, TB/s, memory in bytes, L2 in bytes, SMs/CUs (the vendors' datasheets)
DATASHEETS = {
    "t4": ({"fp32": 8.1, "fp16": 65, "int8": 130}, 0.32, 16e9, 4e6, 40),
    "a100": ({"fp32": 19.5, "tf32": 156, "bf16": 312, "int8": 624}, 2.039, 80e9, 40e6, 108),
    "h100 sxm5": ({"fp32": 67, "tf32": 494.5, "bf16": 989, "fp8": 1979}, 3.35, 80e9, 50e6, 132),
    "h100 pcie": ({"fp32": 51, "tf32": 378, "bf16": 756, "fp8": 1513}, 2.0, 80e9, None, 114),
    # the H100 NVL column: 835 TF32, 1,671 BF16 and 3,341 FP8 are sparse; 60 FP32 is not; 94 GB, 3.9 TB/s
    "h100 nvl": ({"fp32": 60, "tf32": 835 / 2, "bf16": 1671 / 2, "fp8": 3341 / 2}, 3.9, 94e9, None, 132),
    # DeepSeek: 3.35 TB/s and 989 TFLOP/s dense BF16 (FlashMLA notes), 132 SMs (V3 report, 3.5.1), else the SXM5's
    "h800": ({"fp32": 67, "tf32": 494.5, "bf16": 989, "fp8": 1979}, 3.35, 80e9, None, 132),
    "h200": ({"bf16": 989, "fp8": 1979}, 4.8, 141e9, 50e6, 132),
    "b200": ({"fp32": 80, "tf32": 1125, "bf16": 2250, "fp8": 4500, "fp4": 9000}, 8.0, 180e9, 126e6, 148),
    "l4": ({"fp32": 30.3, "bf16": 121, "fp8": 242}, 0.3, 24e9, 48e6, 58),
    "mi300x": ({"fp32": 163.4, "bf16": 1307.4, "fp8": 2614.9}, 5.3, 192e9, 256e6, 304),
    "tpu v5e": ({"bf16": 197, "int8": 393}, 0.819, 16e9, None, None),
    "tpu v5p": ({"bf16": 459, "int8": 918}, 2.765, 95e9, None, None),
}


@pytest.mark.parametrize("name", DATASHEETS)
def test_figures_match_the_datasheets(name):
    peaks, tb_s, memory, l2, units = DATASHEETS[name]
    acc = hardware.get(name)
    for precision, tflops in peaks.items():
        assert acc.peak(precision) == pytest.approx(tflops * 1e12, rel=1e-12), precision
    assert acc.bandwidth == pytest.approx(tb_s * 1e12, rel=1e-12)
    assert acc.memory_bytes == pytest.approx(memory, rel=1e-12)
    assert acc.l2_bytes == (pytest.approx(l2, rel=1e-12) if l2 else None)
    assert acc.compute_units == units


def test_tpu_v4_memory_is_32_gib():
    assert hardware.get("tpu v4").memory_bytes == 32 * 2**30
    assert hardware.get("tpu v4").bandwidth == pytest.approx(1.2e12)


def test_ridge_is_peak_over_bandwidth():
    # seed 004: the T4's FP16 balance point, 65 TFLOP/s / 320 GB/s = 203 (the seed quotes "about 201")
    assert hardware.get("t4").ridge("fp16") == pytest.approx(203.125)
    assert hardware.get("a100").ridge("bf16") == pytest.approx(312 / 2.039)


@pytest.mark.parametrize("key, words", [
    ("b200", ["192", "7.7", "75", "1,100"]),
    ("h100-sxm", ["sparse", "3.072", "2.4", "3.4e12"]),
    ("mi300x", ["1,336", "2,610"]),
    ("tpu-v5e", ["800 GiB/s"]),
    ("t4", ["201", "203"]),
    ("h100-nvl", ["835e12", "1,978.8", "95,830"]),
    ("h800", ["160 GB/s", "200 GB/s", "1,550", "1,600 MHz"]),
])
def test_disagreements_between_sources_stay_visible(key, words):
    notes = " ".join(hardware.get(key).notes)
    for word in words:
        assert word in notes, f"{key} notes do not mention {word!r}"


# --- user entries ------------------------------------------------------------------------


LAPTOP = {"name": "My Laptop", "vendor": "Apple", "source": "measured with roofkit measure, 2026-11",
          "peak_tflops": {"fp32": 0.5, "bfloat16": 1.0}, "bandwidth_tb_s": 0.1, "memory_gib": 16,
          "aliases": ["mbp"]}


def test_register_a_dict(scratch_catalog):
    acc = hardware.register(dict(LAPTOP))
    assert acc.key == "mylaptop"
    assert hardware.get("my-laptop") is acc and hardware.get("MBP") is acc
    assert acc.peak("bf16") == 1e12 and acc.ridge("fp32") == pytest.approx(5.0)
    assert acc.memory_bytes == 16 * 2**30
    assert acc.source("bandwidth") == "measured with roofkit measure, 2026-11"
    assert hardware.names()[-1] == "mylaptop" and hardware.catalog()[-1] is acc


def test_registered_entries_do_not_leak_between_tests():
    with pytest.raises(UnknownHardware):
        hardware.get("mbp")


@pytest.mark.parametrize("missing, message", [
    ("peak_tflops", r"^accelerator 'mylaptop': needs peak_tflops, e\.g\. \{ bf16 = 989 \}\.$"),
    ("bandwidth_tb_s", r"^accelerator 'mylaptop': needs bandwidth_tb_s \(memory bandwidth in TB/s\)\.$"),
    ("source", r"^accelerator 'mylaptop': needs a source \(every figure must say where it comes from\)\.$"),
])
def test_register_refuses_an_entry_without_a_required_field(scratch_catalog, missing, message):
    entry = {k: v for k, v in LAPTOP.items() if k != missing}
    with pytest.raises(InvalidValue, match=message):
        hardware.register(entry)


def test_register_refuses_bad_figures(scratch_catalog):
    with pytest.raises(InvalidValue, match=r"^accelerator 'x': bandwidth_tb_s must be a finite number greater than 0"):
        hardware.register({**LAPTOP, "bandwidth_tb_s": -1}, key="x")
    with pytest.raises(InvalidValue, match=r"^accelerator 'x': unknown field\(s\) \['peak_tflop'\]"):
        hardware.register({**LAPTOP, "peak_tflop": {}}, key="x")
    with pytest.raises(UnknownPrecision):
        hardware.register({**LAPTOP, "peak_tflops": {"fp7": 1}}, key="x")
    with pytest.raises(InvalidValue, match=r"^register\(\) takes an Accelerator or a dict; got str\.$"):
        hardware.register("laptop")


def test_load_file(scratch_catalog, tmp_path):
    path = tmp_path / "lab.toml"
    path.write_text(
        '[sources]\nbench = "Our lab benchmark, 2026-11"\n\n'
        '[lab-gpu]\nname = "Lab GPU"\nsource = "bench"\naliases = ["lab"]\n'
        'peak_tflops = { bf16 = 200, fp8 = 400 }\nbandwidth_tb_s = 2\nmemory_gb = 48\n',
        encoding="utf-8",
    )
    (acc,) = hardware.load_file(path)
    assert hardware.get("LAB") is acc and acc.key == "lab-gpu"
    assert acc.ridge("fp8") == pytest.approx(200.0)
    assert acc.source("peak.fp8") == "Our lab benchmark, 2026-11"
    assert acc.memory_bytes == 48e9


def test_load_file_errors(scratch_catalog, tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(InvalidValue, match=r"^No catalog file at " + re.escape(repr(str(missing))) + r"\.$"):
        hardware.load_file(missing)
    broken = tmp_path / "broken.toml"
    broken.write_text("[x\nname = 1", encoding="utf-8")
    with pytest.raises(InvalidValue, match=r"is not valid TOML"):
        hardware.load_file(broken)
    partial = tmp_path / "partial.toml"
    partial.write_text('[lab]\nsource = "bench"\npeak_tflops = { bf16 = 200 }\n', encoding="utf-8")
    with pytest.raises(InvalidValue, match=r"^accelerator 'lab': needs bandwidth_tb_s"):
        hardware.load_file(partial)


# --- what the CLI prints ---------------------------------------------------------------------


@pytest.mark.parametrize("key", BUILT_IN)
def test_to_dict_has_the_cli_keys_and_is_json(key):
    acc = hardware.get(key)
    data = acc.to_dict()
    assert {"name", "bandwidth_bytes_per_s", "peak_flops", "ridge", "sources"} <= set(data)
    assert data["bandwidth_bytes_per_s"] == acc.bandwidth
    assert set(data["ridge"]) == set(data["peak_flops"]) == set(acc.precisions)
    for precision, ridge in data["ridge"].items():
        assert ridge == pytest.approx(data["peak_flops"][precision] / data["bandwidth_bytes_per_s"])
    assert json.loads(json.dumps(data)) == data


# --- achievable figures beside the datasheet ones ---------------------------------------------------

# stas00/ml-engineering, compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison
# table" (commit 744d01e, 2026-08-22): MAMF in TFLOP/s, BF16 and FP8, typed here from that table.
MAMF = {"a100-sxm4-80gb": {"bf16": 271.2}, "h100-sxm": {"bf16": 794.5, "fp8": 1402.6},
        "b200": {"bf16": 1745.0, "fp8": 3432.5}, "gb200": {"bf16": 1822.0, "fp8": 3615.6},
        "mi300x": {"bf16": 668.4}, "mi325x": {"bf16": 784.9}}


def _h200_measured():
    from roofkit.measure.layers import shipped

    return shipped("measure.json")["gpu"]


@pytest.mark.parametrize("key", BUILT_IN)
def test_achievable_figures_are_sourced_and_below_the_datasheet(key):
    acc = hardware.get(key)
    for precision, rate in acc.achievable_flops.items():
        assert 0.3 * acc.peak(precision) < rate < acc.peak(precision)
        assert acc.peak(precision, achievable=True) == rate
        assert acc.source(f"achievable.{precision}") in CITATIONS.values()
    if acc.achievable_bandwidth is not None:
        assert 0.5 * acc.bandwidth < acc.memory_bandwidth(achievable=True) < acc.bandwidth
        assert acc.source("achievable_bandwidth") in CITATIONS.values()


@pytest.mark.parametrize("key", list(MAMF))
def test_achievable_matmul_rates_are_ml_engineering_s(key):
    acc = hardware.get(key)
    assert {p: acc.achievable_flops[p] / 1e12 for p in MAMF[key]} == pytest.approx(MAMF[key])
    assert acc.source(f"achievable.{next(iter(MAMF[key]))}").startswith("stas00/ml-engineering")
    # ml-engineering publishes no bandwidth: one in the catalog comes from another source, else it is absent
    assert not acc.has_achievable("bandwidth") or not acc.source("achievable_bandwidth").startswith("stas00")


# Achievable rates from other published benchmarks, typed from each: DeepGEMM's README (commit 327ec92, H800 SXM5,
# NVCC 12.8, FP8 with fine-grained scaling, 4096x7168x16384) and pytorch/ao pull request 2427 (B200, NVFP4 through
# torch._scaled_mm, 6144^3).
ELSEWHERE = {"h800": ({"fp8": 1520}, "deepseek-ai/DeepGEMM"), "b200": ({"fp4": 5500}, "pytorch/ao")}


@pytest.mark.parametrize("key", list(ELSEWHERE))
def test_achievable_rates_from_other_benchmarks(key):
    rates, source = ELSEWHERE[key]
    acc = hardware.get(key)
    for precision, tflops in rates.items():
        assert acc.peak(precision, achievable=True) == tflops * 1e12
        assert acc.source(f"achievable.{precision}").startswith(source)


@pytest.mark.parametrize("key", [k for k in BUILT_IN if hardware.get(k).achievable_flops])
def test_every_achievable_rate_names_the_software_it_ran_on(key):
    # a measured rate belongs to a library version as much as to a chip
    acc = hardware.get(key)
    for precision in acc.achievable_flops:
        source = acc.source(f"achievable.{precision}")
        assert re.search(r"PyTorch|torch\.|cuBLAS|hipBLASLt|NVCC|CUDA", source), (key, precision, source)


def test_h200_achievable_figures_are_the_shipped_measurement():
    gpu = _h200_measured()
    h200 = hardware.get("h200")
    assert gpu["catalog"] == "h200"
    for precision, rate in gpu["peak_flops_per_s"].items():
        assert h200.peak(precision, achievable=True) == pytest.approx(rate, rel=1e-3)
    assert h200.memory_bandwidth(achievable=True) == pytest.approx(gpu["bandwidth_bytes_per_s"], rel=1e-3)
    assert h200.ridge("bf16", achievable=True) == pytest.approx(
        gpu["peak_flops_per_s"]["bf16"] / gpu["bandwidth_bytes_per_s"], rel=2e-3)
    assert "2026-11-30" in h200.source("achievable_bandwidth")


def test_datasheet_stays_the_default_and_missing_figures_raise():
    h100, t4 = hardware.get("h100"), hardware.get("t4")
    assert h100.peak("bf16") == 989e12 and h100.memory_bandwidth() == h100.bandwidth == 3.35e12
    with pytest.raises(hardware.NoAchievableFigure, match=(
            r"^NVIDIA B200 has no achievable memory bandwidth in the catalog \(none is published\)\. "
            r"It has achievable figures for: bf16 matmul FLOP/s, fp8 matmul FLOP/s, fp4 matmul FLOP/s\.")):
        hardware.get("b200").memory_bandwidth(achievable=True)
    with pytest.raises(hardware.NoAchievableFigure, match="no achievable fp16 matmul FLOP/s"):
        h100.peak("fp16", achievable=True)
    with pytest.raises(hardware.NoAchievableFigure, match="It has no achievable figures at all"):
        t4.ridge("fp16", achievable=True)
    with pytest.raises(UnsupportedPrecision):
        t4.peak("bf16", achievable=True)  # no such precision at all comes first
    with pytest.raises(InvalidValue, match="achievable must be True or False"):
        h100.peak("bf16", achievable="yes")
    assert isinstance(hardware.NoAchievableFigure("x", "y", []), (LookupError, RoofkitError))


def test_to_dict_carries_the_achievable_figures():
    data = hardware.get("h200").to_dict()
    assert data["achievable_flops"]["bf16"] == 800.9e12 and data["achievable_bandwidth_bytes_per_s"] == 4.271e12
    assert data["achievable_ridge"]["bf16"] == pytest.approx(800.9 / 4.271)
    assert hardware.get("b200").to_dict()["achievable_ridge"] == {}


@pytest.mark.parametrize("change, message", [
    ({"achievable_tflops": {"bf16": 50}}, "achievable figures need an achievable_source"),
    ({"achievable_tflops": {"fp8": 50}, "achievable_source": "me"}, "achievable_tflops.fp8 has no datasheet"),
    ({"achievable_bandwidth_tb_s": -1, "achievable_source": "me"}, "achievable_bandwidth_tb_s must be"),
])
def test_register_refuses_bad_achievable_figures(scratch_catalog, change, message):
    entry = {"name": "Lab GPU", "source": "my notes", "peak_tflops": {"bf16": 100}, "bandwidth_tb_s": 1}
    with pytest.raises(InvalidValue, match=message):
        hardware.register(entry | change, key="lab")
    lab = hardware.register(entry | {"achievable_tflops": {"bf16": 80}, "achievable_bandwidth_tb_s": 0.9,
                                     "achievable_source": "measured in my lab"}, key="lab")
    assert lab.ridge("bf16", achievable=True) == pytest.approx(80 / 0.9)
    assert lab.source("achievable.bf16") == "measured in my lab"


def test_memory_plans_use_what_the_card_reports():
    """The datasheet's GB stays; the card's own total (nvidia-smi's MiB) is what a plan may fill."""
    h100, h200, mi300x = hardware.get("h100"), hardware.get("h200"), hardware.get("mi300x")
    assert h100.memory_bytes == 80e9 and h100.usable_memory_bytes == 81_559 * 2**20 == h100.capacity_bytes
    assert h200.memory_bytes == 141e9 and h200.capacity_bytes == 143_771 * 2**20
    assert "nvidia-smi" in h100.capacity_source and "smi.txt" in h200.capacity_source
    # the H200's figure is our own card's: the shipped nvidia-smi output says so
    smi = (Path(hardware.__file__).parents[1] / "data/measured/h200-2026-11-30/smi.txt").read_text()  # roofkit/
    assert "143771 MiB" in smi
    assert mi300x.capacity_bytes == 206_141_652_992 and "rocm-smi" in mi300x.capacity_source
    v5e = hardware.get("tpu v5e")  # none published: plans use the datasheet's
    assert v5e.usable_memory_bytes is None and v5e.capacity_bytes == v5e.memory_bytes
    for acc in hardware.catalog():  # a card reports within 10% of its datasheet
        if acc.usable_memory_bytes:
            assert 0.9 < acc.usable_memory_bytes / acc.memory_bytes < 1.1, acc.key


def test_hw_show_prints_both_memories(capsys):
    from roofkit.cli import main

    main(["hw", "show", "h100"])
    out = capsys.readouterr().out
    assert "memory (datasheet)               80 GB HBM3" in out and "81,559 MiB; memory plans use this" in out
    main(["hw", "show", "h100", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["memory_bytes"] == 80e9 and data["capacity_bytes"] == data["usable_memory_bytes"] == 81_559 * 2**20


# --- the H100's variants: H800 (DeepSeek-V3's GPU) and H100 NVL ---------------------------------------------


@pytest.mark.parametrize("spelling, key", [
    ("H800", "h800"), ("h800 sxm", "h800"), ("H800-SXM5", "h800"), ("h800_80gb", "h800"),
    ("NVIDIA H800 SXM5 80GB", "h800"), ("H100 NVL", "h100-nvl"), ("h100-nvl", "h100-nvl"), ("h100nvl", "h100-nvl"),
    ("H100_NVL_94GB", "h100-nvl"), ("H100 PCIe 94GB", "h100-nvl"), ("NVIDIA H100 NVL 94GB", "h100-nvl")])
def test_the_variants_answer_to_the_names_people_type(spelling, key):
    assert hardware.get(spelling).key == key


def test_the_variants_are_told_apart_from_the_h100s_by_device_name():
    # torch.cuda.get_device_name / nvidia-smi names: 'NVIDIA H800' (h800-smi), 'NVIDIA H100 NVL' (h100-nvl-smi)
    assert hardware.match_device("NVIDIA H800").key == "h800"
    assert hardware.match_device("NVIDIA H100 NVL").key == "h100-nvl"
    assert hardware.match_device("NVIDIA H100 80GB HBM3").key == "h100-sxm"
    assert hardware.match_device("NVIDIA H100 PCIe").key == "h100-pcie"


def test_the_h800_has_the_h100_sxm5_s_math_and_memory():
    # DeepSeek's hardware paper (arXiv:2505.09343, section 4.1): Hopper like the H100, with only FP64 and NVLink cut
    h800, sxm = hardware.get("h800"), hardware.get("h100-sxm")
    assert set(h800.peak_flops) == set(sxm.peak_flops) - {"fp64"}  # reduced, and no figure is sourced
    for precision in h800.peak_flops:
        assert h800.peak(precision) == sxm.peak(precision), precision
    with pytest.raises(UnsupportedPrecision):
        h800.peak("fp64")
    assert h800.bandwidth == sxm.bandwidth and h800.memory_bytes == sxm.memory_bytes
    assert h800.capacity_bytes == sxm.capacity_bytes == 81_559 * 2**20  # nvidia-smi on each
    # FlashMLA's notes: 989 TFLOP/s = 132 SMs x 4096 FLOPs per SM per clock x 1,830 MHz, on the H800
    assert h800.compute_units == 132 and h800.peak_from_parts("bf16") == pytest.approx(989e12, rel=1e-3)
    assert h800.clock("tensor") == sxm.clock("tensor") and h800.clock("boost") == sxm.clock("boost")
    assert "DeepSeek" in h800.source("peak.fp8") and "FlashMLA" in h800.source("bandwidth")


def test_the_h800_s_nvlink_is_8_of_the_h100_s_18_links():
    node, nvlink = links.scale_up("h800"), links.get("nvlink4-h800")
    assert node.key == "hgx-h800" and node.over == nvlink.key and node.gpus == 8  # V3 report, section 3.1
    assert nvlink.links == 8 and links.get("nvlink4").links == 18  # nvidia-smi: NV8 against NV18
    # DeepSeek: 'reduced from 900 GB/s to 400 GB/s', both directions; DeepEP: 'a nominal bandwidth of 200GB/s'
    assert nvlink.both_directions == 400e9 and nvlink.bandwidth == node.bandwidth == 8 * 25e9
    assert node.bandwidth < links.scale_up("h100").bandwidth == 450e9
    # measured: about 160 GB/s one way (V3 report, 3.2.2; DeepEP issue 16); NCCL's own 20.6 GB/s a link x 8 agrees
    assert nccl.effective_bandwidth(node) == nccl.effective_bandwidth(nvlink) == 160e9
    assert 8 * nccl_tuning.nvlink_bw_gb_s("nvlink4") * 1e9 == pytest.approx(160e9, rel=0.03)
    # the fabric a layout runs on: 8 GPUs a node, then one 400 Gb/s NIC a GPU (50 GB/s): only 4x slower
    intra, inter, gpus = links_of("h800")
    assert (intra.key, inter.key, gpus) == ("hgx-h800", "ib-ndr", 8)
    assert intra.bandwidth / inter.bandwidth == 4.0 < links_of("h100")[0].bandwidth / links_of("h100")[1].bandwidth
    assert not node.nvls  # no NVLS measurement on H800 is sourced


def test_the_h100_nvl_is_a_bridged_pcie_pair_with_more_memory():
    nvl, sxm, pcie = hardware.get("h100 nvl"), hardware.get("h100-sxm"), hardware.get("h100-pcie")
    assert nvl.memory_bytes == 94e9 and nvl.capacity_bytes == 95_830 * 2**20  # datasheet; nvidia-smi
    assert nvl.memory_bytes > sxm.memory_bytes and nvl.bandwidth > sxm.bandwidth
    assert pcie.peak("bf16") < nvl.peak("bf16") < sxm.peak("bf16")
    assert nvl.ridge("bf16") < sxm.ridge("bf16") < pcie.ridge("bf16")  # less math over more bandwidth
    # 3,341 / 1,671 / 835: NVIDIA rounds each sparse figure on its own, so the ladder holds to 0.1%
    assert nvl.peak("fp8") == pytest.approx(2 * nvl.peak("bf16"), rel=1e-3)
    assert nvl.peak("tf32") == pytest.approx(nvl.peak("bf16") / 2, rel=1e-3)
    intra, inter, gpus = links_of("h100-nvl")
    assert (intra.key, gpus) == ("h100-nvl-bridge", 2) and inter.key == "ib-ndr"
    assert intra.both_directions == 600e9 and intra.bandwidth < links.get("nvlink4").bandwidth  # NVIDIA: 600 GB/s


def test_the_96gb_h100_sxm5_is_not_in_the_catalog():
    # PCI ID 2338 'H100 SXM5 96GB' exists, but no NVIDIA datasheet for it was found: its name must not resolve to
    # another H100's figures
    for name in ("H100 SXM5 96GB", "h100 96gb"):
        with pytest.raises(UnknownHardware):
            hardware.get(name)
