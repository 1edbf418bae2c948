"""Published training runs against roofkit parallel: the bound is never beaten, the calibrated estimate lands near
every run it was fitted on and near runs it never saw, its one fitted constant is what a refit gives, and the
data keeps its provenance. The figures themselves are printed by benchmarks/published_runs.py."""

import json
import math
from importlib import resources

import pytest

from roofkit.perf.parallel import calibration, published

FITTING, HELD_OUT = published.load("fitting"), published.load("held-out")


def test_the_shipped_runs_are_the_shared_data_with_provenance():
    assert len(FITTING) == 14 and len(HELD_OUT) == 32
    for run in FITTING + HELD_OUT:
        assert run.source and run.published and published.published_step_s(run) > 0
        for key, why in run.assumed.get("why", {}).items():
            assert key in run.assumed or key in run.flags or key in ("recompute", "tokens"), (run.case, key)
            assert len(why) > 20
    readme = resources.files("roofkit").joinpath("data/published/README.md").read_text(encoding="utf-8")
    assert "training.json" in readme and "training_heldout.json" in readme and "calibration.json" in readme


def test_published_step_times_follow_the_sources_counts():
    one_t = next(r for r in FITTING if "1008.0B" in r.case)
    # Narayanan et al. eq. 3: 96 B s l h^2 (1 + s/6h + V/16lh) / (163 TFLOP/s x 3072 GPUs)
    B, s, l, h, V = 3072, 2048, 128, 25600, 51200
    flops = 96 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))
    assert published.published_step_s(one_t) == pytest.approx(flops / (163e12 * 3072), rel=1e-3)
    mtnlg = next(r for r in HELD_OUT if r.case.startswith("MT-NLG"))
    assert published.published_step_s(mtnlg) == pytest.approx(1920 * 2048 / 65.43e3, rel=1e-3)  # PaLM Table 3


@pytest.mark.parametrize("run", FITTING + HELD_OUT, ids=lambda r: r.case)
def test_no_published_run_beats_its_bound(run):
    assert published.predict(run).step_time_s <= published.published_step_s(run)


@pytest.mark.parametrize("run", FITTING, ids=lambda r: r.case)
def test_calibrated_lands_within_1_2x_of_every_fitting_run(run):
    ratio = published.predict(run, calibrated=True).step_time_s / published.published_step_s(run)
    assert 1 / 1.2 <= ratio <= 1.2


def test_held_out_runs_most_within_1_25x_all_modelled_within_1_5x():
    ratios = {r.case: published.predict(r, calibrated=True).step_time_s / published.published_step_s(r)
              for r in HELD_OUT}
    modelled = {k: v for k, v in ratios.items() if "ZeRO-3" not in k}
    assert all(1 / 1.5 <= v <= 1.5 for v in modelled.values()), modelled
    assert sum(1 / 1.25 <= v <= 1.25 for v in modelled.values()) >= 0.9 * len(modelled)
    # DeepSpeed's ZeRO-3 of Narayanan et al.'s Table 2 ran slower than roofkit's collectives at 768 GPUs and more:
    # the estimate is too fast there, and the benchmark says so
    zero3 = [v for k, v in ratios.items() if "ZeRO-3" in k]
    assert len(zero3) == 6 and all(v < 1 for v in zero3)


def test_deepspeed_zero3_rows_need_one_nic_per_gpu_and_run_as_deepspeed_0_3_did():
    # DeepSpeed 0.3 launched each parameter's all-gather after a torch.cuda.synchronize(): nothing hid (the rows say
    # so, with the source); the published steps of Narayanan et al.'s Table 2 are as long as each GPU's step traffic
    # (3 weight gathers, 1 gradient reduce-scatter) through one HDR NIC: about 24 GB/s whatever the GPU count
    from roofkit.perf import comms
    from roofkit.catalogs import links

    nic = links.get("ib-hdr").nccl_bandwidth
    rows = [r for r in HELD_OUT if "ZeRO-3" in r.case]
    for run in rows:
        assert run.assumed["overlap"] is False and "torch.cuda.synchronize()" in run.assumed["why"]["overlap"]
        plan = published.predict(run, calibrated=True)
        assert plan.communication["zero"]["calls"] == 3 and plan.communication["dp"]["calls"] == 1
        moved = sum(c["calls"] * c["bytes_per_call"] * comms.volume(c["collective"], c["group"])
                    for kind, c in plan.communication.items() if kind in ("dp", "zero"))
        assert moved == pytest.approx(4 * 2 * run.model.params, rel=0.01)
        assert 0.65 * nic < moved / published.published_step_s(run) < 1.05 * nic, run.case


def test_the_shipped_constant_is_what_a_refit_gives():
    shipped = calibration.constants()
    refit = calibration.fit(FITTING)
    assert refit.matmul_efficiency == pytest.approx(shipped.matmul_efficiency, abs=0.005)
    assert 0.5 < shipped.matmul_efficiency < 0.9 and shipped.overlap_efficiency == 1.0
    data = json.loads(resources.files("roofkit").joinpath("data/published/calibration.json").read_text())
    assert data["fitted_on"] == len(FITTING)


def test_leave_one_out_generalizes_on_a_sample():
    rows = calibration.leave_one_out(FITTING[::5])  # a sample: the benchmark runs all 14
    assert all(1 / 1.2 <= r["ratio"] <= 1.2 for r in rows)
    assert all(0.5 < r["constants"]["matmul_efficiency"] < 0.9 for r in rows)


def test_fit_rejects_what_it_cannot_fit():
    with pytest.raises(Exception, match="at least one published run"):
        calibration.fit([])
    with pytest.raises(Exception, match="free must name"):
        calibration.fit(FITTING[:1], free=("floor",))
    errors = calibration.log_error(FITTING[:2], calibration.constants())
    assert all(abs(e) < math.log(1.2) for e in errors)
