"""Serving under a stream of requests (roofkit.inference.simulate, `roofkit serve --request-rate`, `--static`).

The figures are checked against roofkit's own step model (latency.prefill, latency.decode_step,
latency.step) and against what must hold whatever the numbers: a lone request is a prefill and
batch-1 decode, queues grow with the load, a stream never beats the same requests all at once,
every output token is made once.
"""

import math
import time

import numpy as np
import pytest

from roofkit.perf.inference import latency, simulate

from helpers import run, run_json

MODEL, HW, I, O = "llama-3-8b", "h100", 1000, 200


def test_a_lone_request_is_a_prefill_then_batch_1_decode():
    s = simulate.simulate(MODEL, HW, I, O, request_rate=0.02, requests=40, seed=1)
    assert s.peak_running == 1  # at 50 s between requests each finds the engine idle
    assert s.ttft_s(50) == pytest.approx(latency.prefill(MODEL, HW, I).time_s, rel=1e-9)
    # decode steps at I + 1 ... I + O - 1 tokens cached, batch 1: their mean is the step at I + O/2
    assert s.tpot_s(50) == pytest.approx(latency.decode_step(MODEL, HW, 1, I + O // 2).time_s, rel=1e-9)
    assert s.itl_s(50) == pytest.approx(latency.decode_step(MODEL, HW, 1, I + O // 2).time_s, rel=0.01)
    assert np.allclose(s.e2e, s.ttft + (O - 1) * s.tpot)
    assert s.preemptions.sum() == 0


def test_the_step_cost_is_roofkits_step_at_any_context():
    cost = simulate.StepCost(MODEL, HW, dtype="bf16")
    for batch, context, prefill in [(1, 1000.0, 0), (37, 1234.5, 0), (200, 3000.0, 1000), (5, 700.0, 4096)]:
        share = prefill / I if prefill else 0.0
        want = latency.step(MODEL, HW, batch, context, share, I if prefill else None).time_s
        assert cost.time(batch, context, prefill, I if prefill else None) == pytest.approx(want, rel=1e-9)
    assert cost.time(0, 0.0, 3000, 3000) == pytest.approx(latency.prefill(MODEL, HW, 3000).time_s, rel=1e-12)


def test_ttft_p99_grows_with_the_request_rate():
    p99 = [simulate.simulate(MODEL, HW, I, O, request_rate=r, requests=600, seed=3).ttft_s(99) for r in (2, 15, 30)]
    assert p99[0] < p99[1] < p99[2]


def test_a_stream_never_beats_the_same_requests_all_at_once():
    at_once = simulate.simulate(MODEL, HW, I, O, request_rate=math.inf, requests=800)
    assert np.all(at_once.arrival_s == 0) and at_once.peak_running == simulate.MAX_NUM_SEQS
    for r in (5, 20, 40, 60, 200):  # within the steps' granularity: the mix of prompts and decode differs a little
        s = simulate.simulate(MODEL, HW, I, O, request_rate=r, requests=800, seed=0)
        assert s.tokens_per_s <= at_once.tokens_per_s * 1.01, r
        assert s.tokens_per_s <= 800 * O / s.arrival_s[-1]  # nor the requests' own rate
    low = simulate.simulate(MODEL, HW, I, O, request_rate=5, requests=800, seed=4)
    assert low.tokens_per_s == pytest.approx(5 * O, rel=0.1)  # under capacity it serves what comes


def test_every_token_is_made_once_through_preemption():
    s = simulate.simulate(MODEL, HW, I, 4000, request_rate=math.inf, requests=300, max_num_seqs=1024)
    assert s.preemptions.sum() > 0  # 300 x 5,000 tokens do not fit in the cache
    assert not np.isnan(s.finish_s).any()
    made = s.step_decoders.sum() + len(s.resume_gaps_s) + len(s.first_token_s)
    assert made == 300 * 4000
    hit = s.preemptions > 0
    assert np.all(s.itl_max_s[hit] > s.tpot[hit])  # a preempted request waited longer than its mean gap


def test_the_engine_limits_hold():
    s = simulate.simulate(MODEL, HW, I, O, request_rate=math.inf, requests=300, max_num_seqs=64,
                          max_num_batched_tokens=2048)
    assert s.peak_running == 64
    assert s.to_dict()["max_num_batched_tokens"] == 2048
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        simulate.simulate(MODEL, HW, I, O, max_num_seqs=256, max_num_batched_tokens=128)
    with pytest.raises(ValueError, match="does not fit in the KV cache"):
        simulate.simulate(MODEL, HW, 400_000, 100_000, requests=1)


def test_goodput_counts_the_requests_that_meet_both_targets():
    loose = simulate.simulate(MODEL, HW, I, O, request_rate=10, requests=300, slo_ttft_s=100, slo_tpot_s=1)
    assert loose.goodput == pytest.approx(loose.requests_per_s)
    first = latency.prefill(MODEL, HW, I).time_s
    strict = simulate.simulate(MODEL, HW, I, O, request_rate=10, requests=300, slo_ttft_s=first / 2)
    assert strict.goodput == 0
    assert simulate.SLO_TTFT_S == 2.0 and simulate.SLO_TPOT_S == 0.2  # the defaults the CLI's help states


def test_a_run_is_reproducible_with_its_seed():
    a = simulate.simulate(MODEL, HW, I, O, request_rate=12, requests=300, seed=7)
    b = simulate.simulate(MODEL, HW, I, O, request_rate=12, requests=300, seed=7)
    c = simulate.simulate(MODEL, HW, I, O, request_rate=12, requests=300, seed=8)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.finish_s, b.finish_s)
    assert a.to_dict() == b.to_dict()
    assert not np.array_equal(a.arrival_s, c.arrival_s)
    assert a.arrival_s.mean() * 2 == pytest.approx(300 / 12, rel=0.15)  # Poisson at 12/s: the mean arrival


def test_calibrated_figures_are_slower_than_the_bound():
    bound = simulate.simulate(MODEL, HW, I, O, request_rate=5, requests=200)
    est = simulate.simulate(MODEL, HW, I, O, request_rate=5, requests=200, calibrated=True)
    assert est.tpot_s(50) > bound.tpot_s(50) and est.ttft_s(50) > bound.ttft_s(50)
    assert est.to_dict()["figures"] == "calibrated" and bound.to_dict()["figures"] == "bound"


def test_replicas_split_the_stream():
    s = simulate.simulate(MODEL, HW, I, O, request_rate=40, requests=400, gpus=4, tp=1)
    one = simulate.simulate(MODEL, HW, I, O, request_rate=10, requests=100)
    assert (s.replicas, s.requests) == (4, 100)
    assert s.tokens_per_s == pytest.approx(4 * one.tokens_per_s)  # same draws: one replica, four times


def test_a_static_batch_is_a_prefill_and_decode_steps_at_its_batch():
    for B in (1, 64):
        s = simulate.static(MODEL, HW, I, O, batch=B)
        assert s.ttft_s == pytest.approx(latency.prefill(MODEL, HW, I, batch=B).time_s, rel=1e-12)
        assert s.tpot_s == pytest.approx(latency.decode_step(MODEL, HW, B, I + O // 2).time_s, rel=1e-9)
        assert s.e2e_s == pytest.approx(s.ttft_s + (O - 1) * s.tpot_s)
        assert s.tokens_per_s == pytest.approx(B * O / s.e2e_s)
    full = simulate.static(MODEL, HW, I, O)
    assert full.batch == full.max_batch and full.fits
    assert not simulate.static(MODEL, HW, I, O, batch=full.max_batch + 1).fits


def test_ten_thousand_requests_simulate_in_under_two_seconds():
    start = time.perf_counter()
    s = simulate.simulate(MODEL, HW, I, O, request_rate=10, requests=10_000)
    assert time.perf_counter() - start < 2.0
    assert len(s.finish_s) == 10_000 and not np.isnan(s.finish_s).any()


COMMAND = ("serve", "--model", MODEL, "--hw", HW, "--input-tokens", I, "--output-tokens", O, "--request-rate", 10,
           "--requests", 2000)


def test_the_cli_prints_the_fields(capsys):
    start = time.perf_counter()
    data = run_json(capsys, *COMMAND)
    assert time.perf_counter() - start < 2.0
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tokens_per_s", "goodput"):
        assert isinstance(data[key], float) and data[key] > 0, key
    assert data["ttft_p50_s"] <= data["ttft_p99_s"]
    assert data["figures"] == "bound" and data["requests"] == 2000 and data["seed"] == 0
    code, out, _ = run(capsys, *COMMAND)
    assert code == 0 and "TTFT" in out and "goodput" in out and "a bound" in out


def test_the_cli_static_batch(capsys):
    data = run_json(capsys, "serve", "--model", MODEL, "--hw", HW, "--input-tokens", I, "--output-tokens", O,
                    "--static", "--batch", 8)
    assert data["batch"] == 8
    assert data["tpot_s"] == pytest.approx(latency.decode_step(MODEL, HW, 8, I + O // 2).time_s, rel=1e-9)
    assert {"e2e_s", "ttft_s", "tokens_per_s"} <= set(data)


def test_without_the_new_flags_serve_is_unchanged(capsys):
    data = run_json(capsys, "serve", "--model", MODEL, "--hw", HW, "--input-tokens", I, "--output-tokens", O)
    assert "ttft_p50_s" not in data and "goodput" not in data and "batch" in data


@pytest.mark.parametrize("extra, named", [
    (("--request-rate", "fast"), "'fast'"),
    (("--request-rate", "-3"), "'-3'"),
    (("--request-rate", "10", "--slo-ttft", "soon"), "'soon'"),
    (("--request-rate", "10", "--seed", "-1"), "'-1'"),
    (("--request-rate", "10", "--requests", "0"), "'0'"),
    (("--request-rate", "10", "--max-num-seqs", "512", "--max-num-batched-tokens", "256"), "max_num_seqs"),
    (("--max-num-seqs", "64",), "--request-rate"),
    (("--static", "--request-rate", "5"), "--static"),
    (("--request-rate", "5", "--batch", "8"), "--max-num-seqs"),
    (("--max-concurrency", "0"), "'0'"),
    (("--max-concurrency", "many"), "'many'"),
    (("--static", "--max-concurrency", "4"), "--static"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, extra, named):
    code, out, err = run(capsys, "serve", "--model", MODEL, "--hw", HW, "--input-tokens", I, "--output-tokens", O,
                         *extra)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err and named in err


def test_a_context_is_no_workload_for_a_stream(capsys):
    code, _, err = run(capsys, "serve", "--model", MODEL, "--hw", HW, "--context", 4096, "--request-rate", 5)
    assert code == 2 and err.count("\n") == 1 and "--input-tokens" in err


# --- a client that holds at most N requests outstanding (vLLM benchmark_serving's --max-concurrency) ----------------


def test_one_user_sends_each_request_when_the_last_one_finishes():
    s = simulate.simulate(MODEL, HW, I, O, requests=5, max_concurrency=1)
    assert s.peak_running == 1 and s.max_concurrency == 1
    assert s.arrival_s[0] == 0 and np.array_equal(s.arrival_s[1:], s.finish_s[:-1])  # a closed loop
    # each request finds the engine idle: a lone prefill, then batch-1 decode steps
    assert np.allclose(s.ttft, latency.prefill(MODEL, HW, I).time_s, rtol=1e-9)
    assert s.tokens_per_s == pytest.approx(O / s.e2e.mean(), rel=1e-9)


def test_n_users_keep_n_requests_in_flight_and_wait_for_each_other():
    n = 8
    s = simulate.simulate(MODEL, HW, I, O, requests=64, max_concurrency=n)
    assert s.peak_running == n
    # a request is sent only when one of the n before it has finished
    order = np.sort(s.finish_s)
    assert np.all(s.arrival_s[n:] >= order[:-n] - 1e-12)
    assert np.all(s.arrival_s[n:] == order[: len(order) - n])  # all due at once: sent the moment a slot frees
    alone = simulate.simulate(MODEL, HW, I, O, requests=64, max_concurrency=1)
    assert s.ttft_s(50) > alone.ttft_s(50) and s.tokens_per_s > alone.tokens_per_s


def test_a_limit_above_the_requests_changes_nothing():
    for rate in (math.inf, 20.0):
        free = simulate.simulate(MODEL, HW, I, O, request_rate=rate, requests=300, seed=3)
        capped = simulate.simulate(MODEL, HW, I, O, request_rate=rate, requests=300, seed=3, max_concurrency=300)
        assert np.array_equal(free.first_token_s, capped.first_token_s)
        assert np.array_equal(free.finish_s, capped.finish_s) and np.array_equal(free.arrival_s, capped.arrival_s)


def test_a_poisson_stream_under_a_limit_is_sent_no_earlier_than_due():
    due = simulate.simulate(MODEL, HW, I, O, request_rate=50, requests=400, seed=2)
    held = simulate.simulate(MODEL, HW, I, O, request_rate=50, requests=400, seed=2, max_concurrency=16)
    assert np.all(held.arrival_s >= due.arrival_s) and held.peak_running <= 16
    assert np.any(held.arrival_s > due.arrival_s)  # at 50 requests/s some wait for a slot


def test_the_cli_runs_concurrent_users(capsys):
    base = ("serve", "--model", MODEL, "--hw", HW, "--input-tokens", I, "--output-tokens", O, "--requests", 200)
    data = run_json(capsys, *base, "--max-concurrency", 16)
    assert data["max_concurrency"] == 16 and data["peak_running"] == 16 and data["request_rate"] == math.inf
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tokens_per_s", "goodput"):
        assert data[key] > 0, key
    code, out, _ = run(capsys, *base, "--max-concurrency", 16)
    assert code == 0 and "16 concurrent users" in out
    code, out, _ = run(capsys, *base, "--max-concurrency", 16, "--request-rate", 5)
    assert code == 0 and "at most 16 outstanding" in out
