"""roofkit.measure: plausible measurements at tiny sizes, STREAM's byte counts, the profile's round trip,
the prediction table's arithmetic, the GPU path's absence, and the CLI's JSON.

Measured figures are machine-specific and noisy (a shared 2-core runner, a
laptop, a server): the tests assert only what must hold everywhere.
"""

import contextlib
import json
import re
import sys
import types

import pytest

from roofkit import cli, formulas, measure
from roofkit import roofline
from roofkit.perf import fusion
from roofkit.catalogs import hardware
from roofkit.errors import InvalidValue

from helpers import scratch_hardware_catalog
from roofkit.measure import gpu, kernels, sanity, stream, system, timing
from roofkit.measure import layers as layers_module

# Every size scaled from a pretend 256 KiB cache: the whole run takes a second or two.
TINY = measure.Settings(matmul_sizes=(64, 128), rounds=2, budget_s=0.5, places=("LLC", "DRAM"), max_gemm=128)
TINY_LLC = 256 * 1024


def tiny_run(**options):
    return measure.run(**{"progress": False, "gpu": False, "llc_bytes": TINY_LLC, "settings": TINY,
                          "threads": 2, **options})


@pytest.fixture(scope="module")
def profile():
    return tiny_run()


@pytest.fixture
def scratch_catalog():
    """Let a test register a profile, then put the module-global catalog back as it was."""
    with scratch_hardware_catalog():
        yield


def synthetic(**changes) -> measure.Profile:
    fields = dict(host="lab-pc", date="2026-11-03", cpu="Example CPU", vendor="Example", threads=4, quick=True,
                  llc_bytes=32 * 2**20, l2_bytes=2**20, cache_source="sysfs",
                  peak_flops_per_s={"fp64": 1e11, "fp32": 2e11}, bandwidth_bytes_per_s=2e10)
    return measure.Profile(**fields | changes)


# --- measurements are plausible ----------------------------------------------------------


def test_quick_measurement_is_plausible(profile):
    for precision in ("fp64", "fp32"):
        assert 1e6 < profile.peak_flops_per_s[precision] < 1e14  # a CPU: above 1 MFLOP/s, below 100 TFLOP/s
    assert 1e7 < profile.bandwidth_bytes_per_s < 1e13
    assert set(profile.stream) == set(stream.KERNELS)
    for row in profile.stream.values():
        assert row["time_s"] > 0 and 1e7 < row["bandwidth_bytes_per_s"] < 1e13
    assert {m["n"] for m in profile.matmul} == set(TINY.matmul_sizes)
    assert {k.kernel for k in profile.kernels} == set(kernels.KERNELS)
    for k in profile.kernels:
        assert k.time_s > 0 and k.predicted_s > 0 and k.flops > 0 and k.bytes_moved >= k.bytes_ideal > 0
        assert k.bound in ("memory", "compute") and -1 < k.error < 1e4
    assert profile.gpu is None and profile.gpu_status.startswith("GPU:")
    assert profile.elapsed_s > 0


def test_profile_roofs_match_its_measurements(profile):
    roof = max(profile.stream[k]["bandwidth_bytes_per_s"] for k in ("copy", "scale", "add", "triad"))
    assert profile.bandwidth_bytes_per_s == roof  # the best of STREAM's own four loops
    assert profile.stream[profile.bandwidth_kernel]["bandwidth_bytes_per_s"] == roof
    for precision in ("fp64", "fp32"):
        best = max(m["flops_per_s"] for m in profile.matmul if m["dtype"] == precision)
        assert profile.peak_flops_per_s[precision] == best
    for m in profile.matmul:
        assert m["flops"] == formulas.gemm(m["n"], m["n"], m["n"]).flops


def test_stream_arrays_are_four_times_the_cache(profile):
    n = next(iter(profile.stream.values()))["n"]
    assert n * 8 >= 4 * TINY_LLC
    assert stream.array_elements(32 * 2**20) == (4 * 32 * 2**20 // 8, "4x the last-level cache")
    n, note = stream.array_elements(32 * 2**20, memory_available=64 * 2**20)  # too little memory: capped
    assert n * 8 * 4 <= 64 * 2**20 / 4 and "capped" in note


def test_dram_kernels_are_outside_the_caches(profile):
    outside = profile.outside_caches()
    assert outside and all(k.working_set >= 4 * TINY_LLC and k.where == "DRAM" for k in outside)
    assert profile.median_error() >= 0


def test_fusion_is_measured_against_the_fusion_model(profile):
    f = profile.fusion
    chain = fusion.chain(list(f["ops"]), f["n"], "fp32")
    assert f["bytes_unfused"] == chain.unfused.bytes and f["bytes_fused"] == chain.fused.bytes
    assert f["traffic_ratio"] == pytest.approx(10 / 4)  # 2 + 2 + 3 + 3 arrays unfused; x, g, r in and y out fused
    assert 1 < f["predicted_speedup"] <= f["traffic_ratio"] + 1e-9
    assert min(f["unfused_s"], f["fused_s"], f["blocked_s"], f["expression_s"]) > 0


def test_threads_must_be_a_positive_whole_number():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(InvalidValue, match="threads must be a whole number"):
            tiny_run(threads=bad)


# --- STREAM's byte counting ------------------------------------------------------------------


@pytest.mark.parametrize("kernel, arrays", [("copy", 2), ("scale", 2), ("add", 3), ("triad", 3), ("triad_numpy", 5)])
def test_stream_byte_counts(kernel, arrays):
    # STREAM counts 2, 2, 3, 3 arrays (McCalpin); numpy's triad adds its temporary, written once and read once
    for n, b in ((1000, 8), (2**20, 4)):
        assert stream.stream_bytes(kernel, n, b) == arrays * n * b


def test_triad_is_the_fused_chain_and_numpy_the_unfused_one():
    chain = fusion.chain(["scale", "residual_add"], 1000, 8)
    assert stream.stream_cost("triad", 1000) == chain.fused
    assert stream.stream_cost("triad_numpy", 1000) == chain.unfused
    assert stream.stream_cost("triad", 1000).flops == 2 * 1000  # a multiply and an add per element


def test_unknown_stream_kernel_names_the_choices():
    with pytest.raises(InvalidValue, match=r"Unknown STREAM kernel 'trial'\. Expected one of: copy, scale"):
        stream.stream_bytes("trial", 10)


def test_numpy_softmax_moves_four_times_the_ideal_bytes():
    cost = kernels.softmax_numpy_cost(4096, 1024)
    ideal = formulas.softmax(4096, 1024, 4)
    assert cost.flops == ideal.flops and cost.bytes == 4 * ideal.bytes == 8 * 4096 * 1024 * 4


def test_shapes_reach_their_working_set():
    target = 4 * 32 * 2**20
    assert formulas.elementwise(kernels.shapes("add", target)[0], 1, 2, 1, 4).bytes >= target
    assert formulas.reduction(*kernels.shapes("reduction", target), 4).bytes >= target
    assert formulas.gemv(*kernels.shapes("gemv", target), 4).bytes >= target
    assert kernels.where(target, 2**20, 32 * 2**20) == "DRAM" and kernels.where(2**19, 2**20, 32 * 2**20) == "L2"


# --- the prediction table's arithmetic -----------------------------------------------------------


def result(flops, nbytes, measured_s, peak=1e11, bandwidth=1e10):
    return kernels.KernelResult("k", "DRAM", (1,), "fp32", flops, nbytes, nbytes, nbytes, measured_s,
                                measure.predict(flops, nbytes, peak, bandwidth),
                                roofline.bound(flops / nbytes, peak, bandwidth))


def test_prediction_is_the_roofline_time_and_error_is_relative():
    compute = result(2e9, 1e6, measured_s=0.025)  # 2e9 FLOP / 1e11 FLOP/s = 20 ms; 1e6 B / 1e10 B/s = 0.1 ms
    assert compute.predicted_s == pytest.approx(0.02) and compute.bound == "compute"
    assert compute.error == pytest.approx(0.25)
    memory = result(1e6, 1e9, measured_s=0.05)  # 1e9 B / 1e10 B/s = 100 ms; the FLOPs take 10 µs
    assert memory.predicted_s == pytest.approx(0.1) and memory.bound == "memory"
    assert memory.error == pytest.approx(-0.5)
    assert measure.prediction_error(3.0, 2.0) == pytest.approx(0.5)
    rows = measure.prediction_table([compute, memory])
    assert [r["error"] for r in rows] == [compute.error, memory.error]
    assert rows[0]["predicted_s"] == compute.predicted_s and rows[1]["measured_s"] == 0.05
    text = measure.format_table(rows)
    assert "+25%" in text and "-50%" in text and "20 ms" in text


def test_median_error_uses_only_kernels_outside_the_caches():
    p = synthetic(kernels=[result(1e6, 1e9, 0.05), result(1e6, 1e9, 0.13), result(1e6, 1e9, 0.11),
                           result(1e6, 1e3, 1.0)])  # the last one's working set is 1 kB: in the caches
    assert p.median_error() == pytest.approx(0.3)  # |errors| 0.5, 0.3, 0.1
    assert synthetic().median_error() is None


# --- sanity: what must hold on any machine, and measuring again when it does not -----------------------


def dram(kernel, rate_bytes_per_s, nbytes=1e9, flops=1e8, where="DRAM"):
    """A kernel whose data came from memory, moving ``nbytes`` at ``rate_bytes_per_s``."""
    t = nbytes / rate_bytes_per_s
    return kernels.KernelResult(kernel, where, (1,), "fp32", flops, nbytes, nbytes, nbytes, t, t, "memory")


def failing(p):
    return [c.name for c in sanity.check(p) if not c.ok]


def test_the_shipped_lesson_s_insane_numbers_fail_their_checks():
    # issue 18: FP32 17.9 GFLOP/s below FP64's 50.6; a memory roof of 6.86 GB/s that the same run's add beat at 25
    bad = synthetic(peak_flops_per_s={"fp64": 50.6e9, "fp32": 17.9e9}, bandwidth_bytes_per_s=6.86e9,
                    kernels=[dram("add", 25e9)])
    assert failing(bad) == ["fp32-below-fp64", "above-roof"]
    checks = {c.name: c for c in sanity.check(bad)}
    assert checks["fp32-below-fp64"].remeasure == ("matmul",)
    assert set(checks["above-roof"].remeasure) == {"stream", "kernels"}
    assert "add (DRAM) moved 25 GB/s, 3.6x the memory roof of 6.86 GB/s" in checks["above-roof"].message
    assert not bad.sane and "checks: FAILED" in sanity.report(sanity.check(bad))
    # a sane run on the same kind of machine (issue 18): FP32 194, FP64 98 GFLOP/s, STREAM 27-35 GB/s
    good = synthetic(peak_flops_per_s={"fp64": 98e9, "fp32": 194e9}, bandwidth_bytes_per_s=35e9,
                     kernels=[dram("add", 33e9), dram("softmax", 20e9)])
    assert failing(good) == [] and good.sane and sanity.report(sanity.check(good)).startswith("checks: all passed")


def test_a_kernel_may_beat_the_roof_only_where_physics_allows():
    B = 20e9
    p = synthetic(bandwidth_bytes_per_s=B, kernels=[dram("add", 1.19 * B), dram("add", 50 * B, where="L2")])
    assert failing(p) == []  # within 1.2x from memory; anything from a cache
    assert failing(synthetic(bandwidth_bytes_per_s=B, kernels=[dram("add", 1.25 * B)])) == ["above-roof"]
    # a kernel that only reads skips the write-allocate traffic STREAM's loops pay and do not count: up to 4/3 more
    assert failing(synthetic(bandwidth_bytes_per_s=B, kernels=[dram("reduction", 1.5 * B)])) == []
    assert failing(synthetic(bandwidth_bytes_per_s=B, kernels=[dram("reduction", 1.7 * B)])) == ["above-roof"]
    # no kernel, cached or not, above the matmul peak
    fast = dram("gemm", 1e9, nbytes=1e6, flops=2 * 2e11 * 1e-3, where="L2")  # 400 GFLOP/s against 200
    assert failing(synthetic(kernels=[fast])) == ["above-roof"]


def test_a_compute_bound_kernel_above_the_sweeps_best_is_noise():
    # issue 18's audit: the stored run's gemm (LLC), n = 1024, at 115% of the FP32 roof that the sweep's own
    # n = 1024 product set: the same BLAS call timed twice, and no cache raises a compute roof
    P = 42.9e9
    n = 1024
    flops = 2 * n**3

    def gemm(rate, where="LLC"):
        t = flops / rate
        return kernels.KernelResult("gemm", where, (n,), "fp32", flops, 12 * n * n, 12 * n * n, 12 * n * n, t,
                                    flops / P, "compute")

    roofs = dict(peak_flops_per_s={"fp64": 18.5e9, "fp32": P}, bandwidth_bytes_per_s=10.9e9)
    assert failing(synthetic(**roofs, kernels=[gemm(1.15 * P)])) == ["above-roof"]
    assert failing(synthetic(**roofs, kernels=[gemm(1.15 * P, where="L2")])) == ["above-roof"]
    assert failing(synthetic(**roofs, kernels=[gemm(1.04 * P)])) == []  # within timing noise of the same call
    message = {c.name: c for c in sanity.check(synthetic(**roofs, kernels=[gemm(1.15 * P)]))}["above-roof"].message
    assert "gemm (LLC)" in message and "1.1x the FP32 matmul peak" in message


def test_kernels_far_below_their_prediction_say_the_run_was_noisy():
    # issue 18's audit: gemv (LLC) at +900%, softmax (DRAM) at +226%, median error 133%, and every check passed
    B = 10.9e9

    def slow(kernel, where, error, nbytes=1e9):
        predicted = nbytes / B
        return kernels.KernelResult(kernel, where, (1,), "fp32", 1e6, nbytes, nbytes, nbytes,
                                    predicted * (1 + error), predicted, "memory")

    roofs = dict(bandwidth_bytes_per_s=B)
    stored = [slow("add", "DRAM", 0.46), slow("reduction", "DRAM", 1.10), slow("gemv", "DRAM", 1.56),
              slow("softmax", "DRAM", 2.26), slow("gemv", "LLC", 9.0, nbytes=16e6)]
    p = synthetic(**roofs, kernels=stored)
    assert p.median_error() == pytest.approx(1.33)
    assert failing(p) == ["far-below", "median-error"]
    checks = {c.name: c for c in sanity.check(p)}
    assert "gemv (LLC) took 10x its prediction" in checks["far-below"].message
    assert checks["far-below"].remeasure == ("kernels",) and set(checks["median-error"].remeasure) == {"stream", "kernels"}
    assert "133% from their predictions at the median" in checks["median-error"].message
    # a quiet run: the kernels from memory within a few tens of percent, a small L2 kernel slow from its call overhead
    quiet = [slow("add", "DRAM", 0.05), slow("reduction", "DRAM", -0.15), slow("gemv", "DRAM", 0.30),
             slow("softmax", "DRAM", 0.45), slow("add", "L2", 20.0, nbytes=2e5), slow("gemv", "LLC", 3.0, nbytes=16e6)]
    assert failing(synthetic(**roofs, kernels=quiet)) == []


def test_stream_loops_and_the_fusion_chain_are_checked_too():
    stream_rows = {k: {"bandwidth_bytes_per_s": v} for k, v in
                   {"copy": 4.27e9, "scale": 6.86e9, "add": 6.31e9, "triad": 4.96e9}.items()}
    assert failing(synthetic(stream=stream_rows)) == []
    stream_rows["copy"]["bandwidth_bytes_per_s"] = 3e9
    assert failing(synthetic(stream=stream_rows)) == ["stream-spread"]
    fused = {"unfused_s": 0.0739, "blocked_s": 0.0458, "traffic_ratio": 2.5}
    assert failing(synthetic(fusion=fused)) == []
    assert failing(synthetic(fusion=fused | {"blocked_s": 0.08})) == ["fusion-slower"]


class Noisy:
    """A pretend machine: FP64 runs at 100 GFLOP/s and FP32 at 200, unless a noisy moment slows a timing down.

    ``noise[i]`` multiplies the FP32 matmul times of the i-th timing pass (the first pass is run()'s own).
    """

    FNS = {("stream", "add"): None, ("matmul", ("fp64", 256)): None, ("matmul", ("fp32", 256)): None}

    def __init__(self, *noise):
        self.noise, self.passes = list(noise), []

    def time(self, fns):
        factor = self.noise[len(self.passes)] if len(self.passes) < len(self.noise) else 1
        self.passes.append(sorted({k[0] for k in fns}))
        flops = 2 * 256**3
        times = {("stream", "add"): 1e-3, ("matmul", ("fp64", 256)): flops / 1e11,
                 ("matmul", ("fp32", 256)): factor * flops / 2e11}
        return {k: times[k] for k in fns}

    @staticmethod
    def build(times):
        flops = 2 * 256**3
        return synthetic(peak_flops_per_s={p: flops / times[("matmul", (p, 256))] for p in ("fp64", "fp32")})


def test_a_disturbed_run_is_measured_again_and_comes_out_sane():
    machine = Noisy(100)  # the first pass sees the FP32 sweep 100x too slow; the next pass is quiet
    first = machine.time(Noisy.FNS)
    assert not Noisy.build(first).sane
    profile, again = measure.until_sane(Noisy.FNS, first, Noisy.build, machine.time, retries=2)
    assert again == ["matmul"] and machine.passes[1] == ["matmul"]  # only the suspects are timed again
    assert profile.sane and profile.peak_flops_per_s["fp32"] == pytest.approx(2e11)


def test_a_run_that_stays_disturbed_is_retried_then_reported():
    machine = Noisy(100, 100, 100, 100)
    profile, again = measure.until_sane(Noisy.FNS, machine.time(Noisy.FNS), Noisy.build, machine.time, retries=2)
    assert len(machine.passes) == 3 and again == ["matmul"]  # two retries, then it stops
    assert not profile.sane
    profile.remeasured = again
    text = profile.report()
    assert "checks: FAILED" in text and "FAIL FP32 matmul peak" in text
    assert "re-measured after a failed check: matmul" in text
    data = profile.to_dict()
    assert data["sane"] is False and any(c["name"] == "fp32-below-fp64" and not c["ok"] for c in data["checks"])
    # the best run is kept: a quiet pass after noisy ones wins, a noisy one after a quiet one changes nothing
    quiet_then_noisy = Noisy(1, 100)
    profile, again = measure.until_sane(Noisy.FNS, quiet_then_noisy.time(Noisy.FNS), Noisy.build,
                                        quiet_then_noisy.time, retries=2)
    assert again == [] and len(quiet_then_noisy.passes) == 1


def test_a_real_run_reports_its_checks(profile):
    names = {c.name for c in sanity.check(profile)}
    assert names == {"fp32-below-fp64", "above-roof", "far-below", "median-error", "stream-spread", "fusion-slower"}
    assert "checks: " in profile.report()
    assert set(profile.remeasured) <= {"matmul", "stream", "kernels", "fusion"}
    assert {c["name"] for c in profile.to_dict()["checks"]} == names


# --- the profile: JSON, catalog entry, round trip ------------------------------------------------------


def test_profile_entry_is_a_catalog_table():
    entry = synthetic().entry()
    assert entry["source"] == "measured on lab-pc 2026-11-03 by roofkit measure"
    assert entry["peak_tflops"] == {"fp64": 0.1, "fp32": 0.2} and entry["bandwidth_tb_s"] == 0.02
    with pytest.raises(InvalidValue, match="no GPU measurement"):
        synthetic().entry("gpu")
    with pytest.raises(InvalidValue, match="Unknown device 'tpu'"):
        synthetic().entry("tpu")


def test_profile_round_trip(tmp_path, profile, scratch_catalog):
    path = profile.save(tmp_path / "mine.json")
    data = json.loads(path.read_text())
    assert {"peak_flops_per_s", "bandwidth_bytes_per_s", "kernels", "stream", "fusion", "catalog_entry"} <= set(data)
    acc = measure.load_profile(path)
    assert hardware.get("my-machine") is acc
    assert re.fullmatch(r"measured on .+ \d{4}-\d\d-\d\d by roofkit measure", acc.source("bandwidth"))
    assert acc.bandwidth == pytest.approx(profile.bandwidth_bytes_per_s)
    assert acc.ridge("fp32") == pytest.approx(profile.peak_flops_per_s["fp32"] / profile.bandwidth_bytes_per_s)
    again = measure.Profile.from_dict(data)
    assert again.kernels == profile.kernels and again.peak_flops_per_s == profile.peak_flops_per_s
    assert measure.load_profile(path).key == "my-machine"  # a new measurement replaces the old one


def test_loaded_profile_sits_beside_the_h100(scratch_catalog):
    measure.load_profile(synthetic(), key="lab")
    lab, h100 = hardware.get("lab"), hardware.get("h100")
    assert lab.ridge("fp32") == pytest.approx(10.0)
    fig = roofline.plot(accelerators=("lab", "h100"), precisions=("fp32",))
    assert fig.axes[0].get_title().startswith("Rooflines")
    assert h100.peak("fp32") / lab.peak("fp32") > 1


def test_profile_plot_draws_the_kernels(profile):
    fig = profile.plot(beside=("h100",))
    dots = [line for line in fig.axes[0].lines if line.get_gid() == "measured"]
    assert len(dots) == len(profile.kernels)


def test_load_profile_errors(tmp_path):
    with pytest.raises(InvalidValue, match="No profile at"):
        measure.load_profile(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(InvalidValue, match="is not valid JSON"):
        measure.load_profile(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"name": "x"}')
    with pytest.raises(InvalidValue, match="not a roofkit profile"):
        measure.load_profile(tmp_path / "other.json")


# --- the machine ---------------------------------------------------------------------------------


def test_cache_sizes_are_read_or_defaulted():
    assert system.parse_size("32768K") == system.parse_size("32 MiB (1 instance)") == 32 * 2**20
    assert system.parse_size("1024 KiB") == 2**20
    with pytest.raises(InvalidValue, match="cannot read a cache size"):
        system.parse_size("big")
    m = system.machine()
    assert m.llc_bytes > 0 and m.l2_bytes > 0 and m.cores >= 1
    assert m.cache_source in ("sysfs", "lscpu", "sysctl", "default")


# --- the GPU path: never run here, its absence reported in one line -------------------------------------


def one_line(text):
    return text.startswith("GPU:") and "\n" not in text and len(text) < 200


def test_gpu_absent_without_torch(monkeypatch):
    real = gpu.importlib.util.find_spec
    monkeypatch.setattr(gpu.importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    monkeypatch.setitem(sys.modules, "torch", None)  # another test may have imported it already
    ok, line = gpu.status()
    assert not ok and one_line(line) and "PyTorch is not installed" in line


def test_gpu_absent_without_a_driver(monkeypatch):
    monkeypatch.setattr(gpu, "_driver_present", lambda: False)
    ok, line = gpu.status()
    assert not ok and one_line(line)


def test_gpu_absent_when_torch_sees_no_cuda(monkeypatch):
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False))
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.setattr(gpu.importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(gpu, "_driver_present", lambda: True)
    ok, line = gpu.status()
    assert not ok and one_line(line) and "no CUDA device" in line
    assert measure.gpu_status() == line


def test_run_reports_the_absence_and_never_enters_the_gpu_path(monkeypatch):
    monkeypatch.setattr(gpu, "status", lambda: (False, "GPU: none found (test)."))

    def forbidden(*args, **kwargs):
        raise AssertionError("the GPU path ran without a GPU")

    monkeypatch.setattr(gpu, "measure_gpu", forbidden)
    p = tiny_run(gpu=True)
    assert p.gpu is None and p.gpu_status == "GPU: none found (test)."
    assert p.report().count("GPU:") == 1


@pytest.mark.parametrize("device, key", [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA H200", "h200"),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"), ("Tesla T4", "t4"), ("NVIDIA L40S", "l40s"),
    ("AMD Instinct MI300X", "mi300x"), ("NVIDIA L40", None), ("NVIDIA GeForce RTX 4090", None),
])
def test_device_names_match_catalog_entries(device, key):
    acc = gpu.match_catalog(device)
    assert (acc.key if acc else None) == key


# --- the command line -------------------------------------------------------------------------------


@pytest.fixture
def tiny_cli(monkeypatch):
    """`roofkit measure` with every size scaled down (the real run takes seconds to a minute)."""
    real = measure.run
    monkeypatch.setattr(measure, "run", lambda **kw: real(**kw | {"llc_bytes": TINY_LLC, "settings": TINY,
                                                                 "gpu": False}))


def test_cli_measure_json(capsys, tiny_cli, tmp_path, scratch_catalog):
    path = tmp_path / "p.json"
    code = cli.main(["measure", "--quick", "--json", "--threads", "1", "--save", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    assert {"peak_flops_per_s", "bandwidth_bytes_per_s", "kernels"} <= set(data)
    assert set(data["peak_flops_per_s"]) == {"fp64", "fp32"} and data["threads"] == 1 and data["quick"] is True
    assert {"label", "predicted_s", "time_s", "error", "intensity"} <= set(data["kernels"][0])
    assert measure.load_profile(path).bandwidth == pytest.approx(data["bandwidth_bytes_per_s"])


def test_cli_measure_text(capsys, tiny_cli):
    assert cli.main(["measure", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "prediction table" in out and "triad" in out and "GPU:" in out


@pytest.mark.parametrize("argv, message", [
    (["--threads", "0"], "threads must be a whole number"),
    (["--threads", "two"], "invalid int value"),
    (["--save", "/no/such/folder/p.json"], "does not exist"),
])
def test_cli_measure_user_errors(capsys, tiny_cli, argv, message):
    code = cli.main(["measure", "--quick", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


# --- the GPU path on a fake CUDA device: a PyTorch stand-in whose clock follows a known cost model ------------


class FakeGPU:
    """What the fake device is: each kernel takes FLOOR + max(F/PEAK, bytes/BANDWIDTH) on its clock."""

    FLOOR, PEAK, BANDWIDTH = 4e-6, 500e12, 3e12
    NAME, FREE = "NVIDIA H200", 24e9  # 24 GB free: the largest layer of the set does not fit

    def __init__(self):
        self.clock = 0.0
        self.kernels = 0

    def kernel(self, flops, nbytes):
        self.clock += self.FLOOR + max(flops / self.PEAK, nbytes / self.BANDWIDTH)
        self.kernels += 1


class FakeDtype:
    def __init__(self, name, size):
        self.name, self.itemsize = name, size

    def __repr__(self):
        return f"torch.{self.name}"


class FakeTensor:
    """Shapes and dtypes only: every operation is a kernel on the fake GPU's clock, and returns a new shape."""

    def __init__(self, gpu, shape, dtype):
        self.gpu, self.shape, self.dtype = gpu, tuple(int(n) for n in shape), dtype

    @property
    def nbytes(self):
        n = 1
        for s in self.shape:
            n *= s
        return n * self.dtype.itemsize

    def _new(self, shape, dtype=None):
        return FakeTensor(self.gpu, shape, dtype or self.dtype)

    def _elementwise(self, *others, flops_per_element=1):
        out = self._new(self.shape)
        self.gpu.kernel(flops_per_element * out.nbytes / out.dtype.itemsize,
                        sum(t.nbytes for t in (self, *others) if isinstance(t, FakeTensor)) + out.nbytes)
        return out

    def __matmul__(self, other):
        *batch, m, k = self.shape
        n = other.shape[-1]
        out = self._new((*batch, m, n))
        rows = out.nbytes / out.dtype.itemsize / n
        self.gpu.kernel(2 * rows * n * k, self.nbytes + other.nbytes + out.nbytes)
        return out

    def __add__(self, other):
        return self._elementwise(other)

    __mul__ = __rmul__ = __add__

    def add_(self, value):
        self.gpu.kernel(self.nbytes // self.dtype.itemsize, 2 * self.nbytes)
        return self

    def zero_(self):
        self.gpu.kernel(0, self.nbytes)
        return self

    def fill_(self, value):
        return self.zero_()

    def copy_(self, other):
        self.gpu.kernel(0, 2 * self.nbytes)
        return self

    def to(self, dtype):
        return self._new(self.shape, dtype)

    def t(self):
        return self._new(self.shape[::-1])


class FakeTorch(types.ModuleType):
    """Just enough of ``torch`` for roofkit.measure.gpu: tensors, CUDA events, streams and graphs."""

    def __init__(self, gpu: FakeGPU):
        super().__init__("torch")
        self.__version__ = "0.0-fake"
        self.gpu = gpu
        for name, size in (("bfloat16", 2), ("float16", 2), ("float32", 4), ("int8", 1), ("uint8", 1)):
            setattr(self, name, FakeDtype(name, size))
        fake = self

        class Event:
            def __init__(self, enable_timing=False):
                self.t = None

            def record(self):
                self.t = gpu.clock

            def elapsed_time(self, end):
                return (end.t - self.t) * 1e3  # ms

        class Graph:
            def replay(self):
                self.fn()

        class GraphContext:
            def __init__(self, graph):
                self.graph = graph

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

        class Stream:
            def wait_stream(self, other):
                pass

        def graph(g):
            # the capture runs the function once; remember the caller's function for replay
            import inspect

            frame = inspect.currentframe().f_back
            g.fn = frame.f_locals["fn"]
            return GraphContext(g)

        props = types.SimpleNamespace(name=gpu.NAME, L2_cache_size=60 * 2**20)
        self.cuda = types.SimpleNamespace(
            is_available=lambda: True, get_device_name=lambda device=0: gpu.NAME, set_device=lambda d: None,
            get_device_properties=lambda d: props, mem_get_info=lambda d=0: (gpu.FREE, 2 * gpu.FREE),
            synchronize=lambda: None, empty_cache=lambda: None, Event=Event, CUDAGraph=Graph, graph=graph,
            Stream=Stream, current_stream=lambda: Stream(), stream=lambda s: GraphContext(None))
        F = types.SimpleNamespace(
            rms_norm=lambda x, shape, w: x._elementwise(w, flops_per_element=4),
            silu=lambda x: x._elementwise(flops_per_element=4),
            scaled_dot_product_attention=lambda q, k, v, is_causal=False, enable_gqa=False: fake._sdpa(q, k, v))
        self.nn = types.SimpleNamespace(functional=F)

    def _sdpa(self, q, k, v):
        B, H, s, d = q.shape
        t = k.shape[2]
        out = q._new(q.shape)
        self.gpu.kernel(4 * B * H * s * t * d, q.nbytes + k.nbytes + v.nbytes + out.nbytes)
        return out

    def _make(self, size, dtype):
        shape = size[0] if len(size) == 1 and isinstance(size[0], tuple) else size
        return FakeTensor(self.gpu, shape, dtype or self.float32)

    def device(self, kind, index=0):
        return f"{kind}:{index}"

    def randn(self, *size, device=None, dtype=None):
        return self._make(size, dtype)

    empty = zeros = ones = randn

    def tensor(self, value, device=None):
        return self._make((1,), self.float32)

    def matmul(self, a, b, out=None):
        return a @ b

    def add(self, x, y, out=None):
        return x + y

    def sum(self, x, dim):
        out = x._new(x.shape[:dim])
        self.gpu.kernel(x.nbytes / x.dtype.itemsize, x.nbytes + out.nbytes)
        return out

    def softmax(self, x, dim):
        return x._elementwise(flops_per_element=5)

    def mv(self, W, x):
        return (x._new((1, x.shape[0])) @ W.t())

    def no_grad(self):
        return contextlib.nullcontext()


@pytest.fixture
def fake_cuda(monkeypatch):
    """A fake CUDA device behind ``import torch``: status() finds it, measure_gpu() measures it."""
    device = FakeGPU()
    monkeypatch.setitem(sys.modules, "torch", FakeTorch(device))
    monkeypatch.setattr(gpu.importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(gpu, "_driver_present", lambda: True)
    return device


def test_fake_gpu_is_found_and_measured(fake_cuda):
    ok, line = gpu.status()
    assert ok and line == "GPU: NVIDIA H200"
    result = gpu.measure_gpu(quick=True)
    assert result.catalog == "h200"
    assert set(result.peak_flops_per_s) == {"bf16", "fp16"}  # no torch._scaled_mm: no fp8, and a note says so
    assert any(n.startswith("fp8: not measured") for n in result.notes)
    # the achievable matmul rate of the biggest square (8192^3) and the copy, from the fake's own cost model
    flops = formulas.gemm(8192, 8192, 8192).flops
    assert result.peak_flops_per_s["bf16"] == pytest.approx(flops / (FakeGPU.FLOOR + flops / FakeGPU.PEAK))
    assert result.bandwidth_bytes_per_s < FakeGPU.BANDWIDTH


def test_fake_gpu_layers_have_the_dataset_s_format(fake_cuda):
    from roofkit.measure import layers

    result = gpu.measure_gpu(quick=True)
    data = result.layers
    shipped = layers.shipped("layers.json")
    assert set(shipped) <= set(data) and data["catalog"] == "h200"
    assert set(data["launch"]) == set(shipped["launch"])
    assert set(data["cases"][0]) == set(shipped["cases"][0])
    assert list(data["cases"][0]["ops_s"]) == list(shipped["cases"][0]["ops_s"]) == list(layers.OPS)
    assert len(data["cases"]) == len(layers.LAYER_SET_QUICK)
    # a tiny kernel costs the floor, on its own, in a stream and in a graph
    for figure in ("gpu_stream_per_kernel_s", "single_kernel_event_s", "graph_per_kernel_s"):
        assert data["launch"][figure] == pytest.approx(FakeGPU.FLOOR, rel=1e-6)
    dataset = layers.load_layers(result.to_dict() | {"roofkit_profile": 1, "gpu": result.to_dict()})
    assert dataset.roofs["bandwidth_bytes_per_s"] == result.bandwidth_bytes_per_s


def test_measured_layers_calibrate_the_layer_model(fake_cuda, tmp_path, scratch_catalog):
    """On the fake GPU every kernel costs FLOOR + its roofline time: the fit must find that floor."""
    from roofkit.perf import layertime

    profile = tiny_run(gpu=True, quick=True)
    assert profile.gpu and profile.gpu["layers"]["cases"]
    path = profile.save(tmp_path / "mine.json")
    cal = layertime.calibrate(path)
    assert cal.device == "NVIDIA H200" and cal.catalog == "h200" and cal.cases == len(profile.gpu["layers"]["cases"])
    # attention's own rate, from the large causal attention timed alone on this (fake) GPU, not the catalog's H200
    attention = profile.gpu["layers"]["attention"]
    assert attention["flops"] == formulas.attention_fused(*layers_module.ATTENTION_SHAPE, 2, causal=True).flops
    assert cal.attention_peak("bf16") == pytest.approx(attention["flops"] / attention["time_s"])
    assert cal.attention_peak("bf16") != hardware.get("h200").attention_peak("bf16")
    assert cal.floor_s == pytest.approx(FakeGPU.FLOOR, rel=0.05)
    for case in layertime.compare(path):
        assert case["calibrated_ratio"] == pytest.approx(1, abs=0.03), case["label"]
    # and the command line takes the profile
    code = cli.main(["layer", "--model", "llama-3-8b", "--batch", "1", "--seq", "1", "--kv-seq", "8192",
                     "--hw", "h200", "--calibrated", "--profile", str(path), "--json"])
    assert code == 0


def test_cases_too_big_for_the_gpu_are_skipped_with_a_note(fake_cuda):
    from roofkit.measure import gpu as g, layers

    timer = g._Timer(sys.modules["torch"], None)
    data, notes = layers.measure_layers(sys.modules["torch"], timer, "cuda:0", quick=False,
                                        free_bytes=FakeGPU.FREE)
    measured = {(c["model"], c["batch"], c["seq"], c["kv_seq"]) for c in data["cases"]}
    assert ("llama-2-7b", 256, 1, 4096) not in measured and len(measured) == len(layers.LAYER_SET) - 1
    assert any("batch 256" in n and "skipped" in n for n in notes)
