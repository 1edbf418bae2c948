"""An offline run of n requests at once on an engine that preempts: the closed form against a simulation and sympy."""

import math

import pytest
import sympy

from roofkit.errors import InvalidValue
from roofkit.perf.inference import kvcache, memory, preemption, published, workload


def simulate(n, I, O, K):
    """Step by step, as vLLM V0 schedules: admit waiting requests in order while their cache fits, preempt the
    last admitted when the running ones cannot grow, recompute a preempted request's I + g tokens on readmission."""
    waiting = [(0, False) for _ in range(n)]  # (tokens generated, preempted before)
    running, recomputed = [], 0
    while waiting or running:
        while waiting and sum(I + g for g, _ in running) + I + waiting[0][0] <= K:
            g, again = waiting.pop(0)
            recomputed += (I + g) if again else 0
            running.append((g, again))
        while sum(I + g + 1 for g, _ in running) > K:  # every running request needs one more slot
            g, _ = running.pop()
            waiting.insert(0, (g, True))
        running = [(g + 1, again) for g, again in running if g + 1 < O]
    return recomputed


@pytest.mark.parametrize("n, I, O, K", [(100, 200, 200, 25_000), (300, 64, 512, 120_000), (200, 1000, 200, 220_000)])
def test_recompute_tokens_match_a_step_by_step_simulation(n, I, O, K):
    closed, simulated = preemption.recompute_tokens(n, I, O, K), simulate(n, I, O, K)
    assert simulated > 0
    assert closed == pytest.approx(simulated, rel=0.03)


def test_recompute_integral_is_sympys():
    I, O, K, N0, s = sympy.symbols("I O K N_0 s", positive=True)
    running = K / (I + s)  # requests still running at step s once the cache is full
    recomputed = sympy.integrate((I + s) * -sympy.diff(running, s), (s, K / N0 - I, O))
    assert sympy.simplify(sympy.expand_log(recomputed - K * sympy.log(N0 * (I + O) / K), force=True)) == 0
    value = {I: 2048, O: 2048, K: 3_000_000, N0: 1000}
    assert float(recomputed.subs(value)) == pytest.approx(preemption.recompute_tokens(1000, 2048, 2048, 3_000_000))


def test_nothing_is_recomputed_when_every_request_fits_at_its_full_length():
    assert preemption.recompute_tokens(1000, 128, 1024, 1000 * 1152) == 0
    assert simulate(100, 128, 64, 100 * 192) == 0


def test_a_cache_smaller_than_one_request_is_one_clear_error():
    with pytest.raises(InvalidValue, match="cannot hold one request of 4,096 tokens"):
        preemption.recompute_tokens(10, 2048, 2048, 4095)


def test_the_profiling_pass_peak_by_hand():
    # Llama 3.1 8B: d = 4,096, d_ff = 14,336; 16-bit activations; 131,072 tokens (vLLM's max_num_batched_tokens)
    assert preemption.activation_peak_bytes("llama-3-8b", 131072) == 131072 * (4096 + 3 * 14336) * 2
    assert preemption.activation_peak_bytes("llama-3-405b", 1000, tp=8) == 1000 * (16384 + 3 * 53248 / 8) * 2


def test_cache_tokens_is_the_plans_free_memory_less_the_profiling_peak():
    plan = memory.plan("llama-3-8b", "mi300x", 1, 1, 1, "fp8", "fp8")
    per_token = kvcache.bytes_per_token("llama-3-8b", "fp8")
    assert preemption.cache_tokens("llama-3-8b", "mi300x", 1, 1, None, "fp8", "fp8") == plan.free_bytes // per_token
    peak = preemption.activation_peak_bytes("llama-3-8b", 131072)
    assert preemption.cache_tokens("llama-3-8b", "mi300x", 1, 1, None, "fp8", "fp8", profile_tokens=131072) == \
        math.floor((plan.free_bytes - peak) / per_token)


def test_offline_adds_the_recomputation_to_the_steady_states_time():
    kw = dict(gpus=1, tp=1, dtype="fp8", kv_dtype="fp8", calibrated=True)
    run = preemption.offline("llama-3-8b", "mi300x", 1000, 2048, 2048, profile_tokens=131072, **kw)
    steady = workload.steady_state("llama-3-8b", "mi300x", 2048, 2048, **kw)
    assert run.recompute_tokens > 0 and run.recompute_s > 0
    assert run.time_s == pytest.approx(1000 * 2048 / steady.tokens_per_s + run.recompute_s)
    assert run.tokens_per_s < steady.tokens_per_s
    fits = preemption.offline("llama-3-8b", "mi300x", 1000, 128, 1024, profile_tokens=131072, **kw)
    assert fits.recompute_tokens == 0 and fits.tokens_per_s == pytest.approx(fits.steady.tokens_per_s)
    with pytest.raises(InvalidValue, match="preemption must be one of recompute; got 'swap'"):
        preemption.offline("llama-3-8b", "mi300x", 10, 128, 128, preemption="swap", **kw)


def test_published_rows_that_preempt_pay_for_it_calibrated_and_not_in_the_bound():
    rows = [r for r in published.heldout() if r.preemption is not None]
    assert len(rows) == 18 and all(r.preemption in preemption.PREEMPTION and r.requests and r.profile_tokens
                                   for r in rows)
    long = next(r for r in rows if r.model == "llama-3-8b" and r.isl == 2048 and r.osl == 2048)
    steady = workload.steady_state(long.model, long.hw, long.isl, long.osl, gpus=long.gpus, tp=long.tp,
                                   batch=published._batch(long), dtype=long.dtype, kv_dtype=long.kv_dtype)
    assert published.predict(long) == pytest.approx(steady.tokens_per_s)  # the bound: no preemption
    cal = workload.steady_state(long.model, long.hw, long.isl, long.osl, gpus=long.gpus, tp=long.tp,
                                batch=published._batch(long), dtype=long.dtype, kv_dtype=long.kv_dtype, calibrated=True)
    assert published.predict(long, calibrated=True) < 0.95 * cal.tokens_per_s
