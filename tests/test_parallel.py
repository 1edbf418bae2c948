"""roofkit.parallel: the pipeline bubble against a simulated schedule, ZeRO's memory against the
paper's figure, activations against Korthikanti et al., critical batches against the JAX scaling
book, and the whole step model against Llama 3's reported MFU."""

import json

import pytest
import sympy
from hypothesis import given, settings, strategies as st

from roofkit.perf import comms, parallel, training
from roofkit.catalogs import hardware, links, models
from roofkit.errors import InvalidValue, RoofkitError

from helpers import run


# --- the pipeline bubble ------------------------------------------------------------------------

def simulated_gpipe(p, m, f=1.0, b=2.0):
    """Makespan of a GPipe schedule (all forwards, then all backwards) of m micro-batches on p stages."""
    f_end = [[0.0] * p for _ in range(m)]
    for i in range(m):
        for s in range(p):
            start = max(f_end[i][s - 1] if s else 0.0, f_end[i - 1][s] if i else 0.0)
            f_end[i][s] = start + f
    b_end = [[0.0] * p for _ in range(m)]
    for i in range(m):
        for s in reversed(range(p)):
            start = max(b_end[i][s + 1] if s < p - 1 else f_end[m - 1][s], b_end[i - 1][s] if i else f_end[m - 1][s])
            b_end[i][s] = start + b
    return max(b_end[i][0] for i in range(m))


@pytest.mark.parametrize("p, m", [(2, 1), (4, 8), (16, 16), (16, 32), (8, 3)])
def test_bubble_matches_a_simulated_schedule(p, m):
    makespan = simulated_gpipe(p, m)
    busy = m * 3.0  # each stage computes m forwards (1) and m backwards (2)
    assert parallel.bubble_fraction(p, m) == pytest.approx(1 - busy / makespan)
    assert parallel.bubble_time(busy, p, m) == pytest.approx(makespan - busy)


def test_bubble_formula_in_symbols():
    p, m, v = sympy.symbols("p m v", positive=True)
    assert sympy.simplify(parallel.bubble_fraction(p, m) - (p - 1) / (m + p - 1)) == 0
    assert sympy.simplify(parallel.bubble_fraction(p, m, v) - (p - 1) / (v * m + p - 1)) == 0
    # the idle time is bubble_fraction of compute + idle
    C = sympy.Symbol("C", positive=True)
    idle = parallel.bubble_time(C, p, m, v)
    assert sympy.simplify(idle / (C + idle) - parallel.bubble_fraction(p, m, v)) == 0


# --- memory ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("zero, gb", [(0, 120), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_memory_matches_the_paper(zero, gb):
    # Rajbhandari et al. 2020, Figure 1: 7.5B parameters, 64-way data parallelism, K = 12
    assert parallel.state_bytes(7.5e9, 64, zero)["total"] / 1e9 == pytest.approx(gb, abs=0.05)


def test_zero_shards_what_each_stage_says():
    base, one, two, three = (parallel.state_bytes(1e9, 8, z) for z in range(4))
    assert one["weights"] == base["weights"] and one["grads"] == base["grads"]
    assert one["optimizer"] == base["optimizer"] / 8
    assert two["grads"] == base["grads"] / 8 and two["weights"] == base["weights"]
    assert three["weights"] == base["weights"] / 8
    assert base["total"] == 1e9 * training.adam_memory_per_param()["total"]


def test_activations_of_a_gpt3_layer_match_korthikanti():
    # arXiv:2205.05198, section 4: s b h (34 + 5 a s / h) bytes per layer; fused attention drops the 5as/h
    s, b, h, a = 2048, 1, 12288, 96
    per_layer = parallel.activation_bytes(s * b, h, a, a, h // a, 4 * h, gated=False, dropout=True)
    assert per_layer == 34 * s * b * h
    # without FlashAttention the scores add 5 a s / h (their equation 1); selective recomputation drops them
    unfused = dict(gated=False, dropout=True, seq=s, attention="unfused")
    assert parallel.activation_bytes(s * b, h, a, a, h // a, 4 * h, **unfused) == s * b * h * (34 + 5 * a * s / h)
    assert parallel.activation_bytes(s * b, h, a, a, h // a, 4 * h, **unfused, recompute="selective") == 34 * s * b * h
    # tensor parallelism alone leaves 10 s b h whole on every rank (equation 2); with sequence parallelism all of
    # it is divided by t (equation 4); full recomputation keeps 2 s b h / t
    assert parallel.activation_bytes(s * b, h, a, a, h // a, 4 * h, False, tp=8, dropout=True) == \
        s * b * h * (10 + 24 / 8)
    assert parallel.activation_bytes(s * b, h, a, a, h // a, 4 * h, False, tp=8, dropout=True,
                                     sequence_parallel=True) == 34 * s * b * h / 8
    assert parallel.activation_bytes(s * b, h, a, a, h // a, 4 * h, False, tp=8, recompute=True,
                                     sequence_parallel=True) == 2 * s * b * h / 8


def test_memory_formulas_in_symbols():
    # the same functions give the papers' closed forms: 34 s b h / t (Korthikanti) and 16 Psi / N_d (ZeRO-3)
    T, h, a, t, Psi, Nd = sympy.symbols("T h a t Psi N_d", positive=True)
    assert sympy.simplify(parallel.activation_bytes(T, h, a, a, h / a, 4 * h, gated=False, tp=t, dropout=True,
                                                    sequence_parallel=True) - 34 * T * h / t) == 0
    assert parallel.state_bytes(Psi, Nd, 3)["total"] == 16 * Psi / Nd
    assert parallel.state_bytes(Psi, Nd, 1)["total"] == 4 * Psi + 12 * Psi / Nd


def test_gqa_and_swiglu_change_the_count():
    m = models.get("llama-3-70b")
    gqa = parallel.activation_bytes(8192, m.d_model, m.heads, m.kv_heads, m.head_dim, m.d_ff, m.gated)
    mha = parallel.activation_bytes(8192, m.d_model, m.heads, m.heads, m.head_dim, m.d_ff, m.gated)
    assert gqa < mha
    assert mha - gqa == 8192 * 2 * (m.heads - m.kv_heads) * m.head_dim * 2


# --- critical batch: the scaling book, gpus.md -----------------------------------------------------

def test_dp_critical_batch_inside_an_h100_node():
    # "the per-GPU token batch size > 990e12 / 450e9 = 2200" (for many GPUs; 2(n-1)/n -> 2)
    h100 = hardware.get("h100")
    assert parallel.dp_critical_batch(10**6, h100.peak("bf16"), links.get("nvlink4").bandwidth) == \
        pytest.approx(2200, rel=0.005)


def test_dp_critical_batch_in_symbols():
    n, C, W = sympy.symbols("n C W", positive=True)
    assert sympy.limit(parallel.dp_critical_batch(n, C, W), n, sympy.oo) == C / W
    assert float(parallel.dp_critical_batch(n, C, W).subs({n: 16, C: 1e15, W: 4e11})) == pytest.approx(
        parallel.dp_critical_batch(16, 1e15, 4e11))


@pytest.mark.parametrize("hw, book", [("h100", 990e12 / 400e9), ("b200", 2250e12 / 400e9)])
def test_dp_critical_batch_across_nodes(hw, book):
    # "Within an SU or at the spine level, BS > 990e12 / 400e9 = 2475"; B200 (quiz 5): 2250e12 / 400e9 = 5625
    nodes = 128
    per_node = links.get(links.scale_up(hw).key).gpus * links.get("ib-ndr").bandwidth  # 8 NICs x 50 GB/s
    # the book leaves the ring's (n-1)/n out and rounds the H100's 989 TFLOP/s to 990
    assert parallel.dp_critical_batch(nodes, hardware.get(hw).peak("bf16"), per_node) == \
        pytest.approx(book * (nodes - 1) / nodes, rel=0.002)
    # a plan's critical batch counts its real backward (attention, norms, the head) and NCCL's best algorithm
    plan = parallel.plan("llama-3-8b", hw, 8 * nodes, 8 * nodes * 8192 * 4, 8192, zero=0, calibrated=True)
    assert 0.3 * book < plan.critical_batch_tokens_per_gpu < 1.5 * book


def test_model_parallelism_lowers_the_critical_batch():
    # "The 16-way PP reduces the cost of the data parallel AllReduce by 16x" (Llama 3 on 16K H100s)
    args = dict(model="llama-3.1-405b", hw="h100", gpus=16384, global_batch_tokens=16 * 2**20, seq=8192)
    dp_only = parallel.plan(**args, tp=8)
    piped = parallel.plan(**args, tp=8, pp=16)
    assert piped.critical_batch_tokens_per_gpu == pytest.approx(dp_only.critical_batch_tokens_per_gpu / 16, rel=0.02)


# --- the step model -------------------------------------------------------------------------------

# Llama 3 paper (arXiv:2407.21783), Table 4: GPUs, TP, CP, PP, DP, sequence length, BF16 MFU;
# 16M tokens per batch, 400 Gb/s RoCE between GPUs (section 3.3.1), ZeRO-1 data parallelism
# (scaling book, gpus.md, "What does LLaMA-3 do?").
LLAMA3 = [(8192, 8, 1, 16, 64, 8192, 0.43), (16384, 8, 1, 16, 128, 8192, 0.41), (16384, 8, 16, 16, 8, 131072, 0.38)]


@pytest.mark.parametrize("gpus, tp, cp, pp, dp, seq, reported", LLAMA3)
def test_llama3_405b_mfu_is_plausible(gpus, tp, cp, pp, dp, seq, reported):
    args = dict(model="llama-3.1-405b", hw="h100", gpus=gpus, global_batch_tokens=16 * 2**20, seq=seq, tp=tp,
                cp=cp, pp=pp, dp=dp, zero=3, policy="per-step", virtual_stages=7, sequence_parallel=True,
                inter="ethernet-400g")
    bound = parallel.plan(**args)  # every cost at its best: an upper bound on MFU
    estimate = parallel.plan(**args, calibrated=True)
    assert bound.microbatches == 16 * 2**20 // (seq * dp)  # one sequence per micro-batch
    assert bound.mfu > reported and bound.step_time_s < estimate.step_time_s
    # MFU in roofkit's count (PaLM's, attention in full): at 131K tokens far above Meta's causal count
    assert estimate.mfu == pytest.approx(reported, abs=0.05 if seq == 8192 else 0.2)


def test_llama3_mfu_falls_from_8k_to_16k_gpus():
    # 430 -> 400 TFLOP/s per GPU with the batch fixed: half the micro-batches, a bigger bubble
    small, large = (parallel.plan("llama-3.1-405b", "h100", g, 16 * 2**20, 8192, tp=8, pp=16, zero=1,
                                  calibrated=True) for g in (8192, 16384))
    assert small.mfu > large.mfu and large.bubble_s / large.step_time_s > small.bubble_s / small.step_time_s


def test_step_time_adds_compute_exposed_communication_and_bubble():
    for calibrated in (False, True):
        plan = parallel.plan("llama-3-70b", "h100", 1024, 4 * 2**20, 8192, tp=8, pp=4, zero=1, calibrated=calibrated)
        assert plan.step_time_s == pytest.approx(plan.compute_s + plan.communication_s + plan.bubble_s
                                                 + plan.optimizer_s)
        assert plan.communication_s == pytest.approx(sum(c["exposed_s"] for c in plan.communication.values()))
        assert set(plan.communication) == {"tp", "pp", "dp", "zero"}
        # MFU counts the model's FLOPs (training.flops_per_token, never retyped); HFU the kernels'
        m = models.get("llama-3-70b")
        assert plan.model_flops == training.flops_per_token(m.active_params, m.layers, m.heads, m.head_dim, 8192,
                                                            causal=True) * 4 * 2**20
        peak = hardware.get("h100").peak("bf16")
        assert plan.hfu == pytest.approx(plan.hardware_flops / (plan.step_time_s * 1024 * peak))
        # every kernel takes at least its FLOPs at the peak: the compute is never shorter than that
        assert plan.compute_s * 1024 * peak >= plan.hardware_flops * (1 - 1e-9)
    # the bound's matmuls run at the datasheet peak; the norms and residual adds run at HBM speed, on every TP
    # rank unless sequence parallelism splits them: the compute is the FLOPs at the peak and a little more
    peak = hardware.get("h100").peak("bf16")
    gaps = [(p := parallel.plan("llama-3-70b", "h100", 1024, 4 * 2**20, 8192, tp=8, pp=4, zero=1,
                                sequence_parallel=sp)).compute_s / (p.hardware_flops / (1024 * peak))
            for sp in (False, True)]
    assert 1 < gaps[1] < gaps[0] < 1.3 and gaps[1] < 1.1


def test_tensor_parallel_traffic_is_four_all_reduces_a_layer():
    plan = parallel.plan("llama-3-8b", "h100", 8, 8192, 8192, tp=8)  # one sequence, one micro-batch
    m = models.get("llama-3-8b")
    tp = plan.communication["tp"]
    assert tp["calls"] == 4 * m.layers and tp["bytes_per_call"] == 8192 * m.d_model * 2
    assert tp["time_s"] == pytest.approx(4 * m.layers * comms.all_reduce(8192 * m.d_model * 2, 8, "hgx-h100",
                                                                         "auto").time_s)
    recomputed = parallel.plan("llama-3-8b", "h100", 8, 8192, 8192, tp=8, recompute=True)
    assert recomputed.communication["tp"]["calls"] == 6 * m.layers


def test_recomputation_trades_memory_for_compute():
    args = dict(model="llama-3-70b", hw="h100", gpus=64, global_batch_tokens=2**20, seq=8192, tp=8, pp=8)
    keep, redo = parallel.plan(**args), parallel.plan(**args, recompute=True)
    # without sequence parallelism a layer's input is d per token: 5x less than every op's inputs (the estimate),
    # 3x less than the least a backward must read (the bound)
    assert redo.memory_estimate["activations"] < keep.memory_estimate["activations"] / 5
    assert redo.memory["activations"] < keep.memory["activations"] / 3
    assert redo.compute_s == pytest.approx(keep.compute_s * 8 / 6, rel=0.03)  # 8ND for 6ND, kernel by kernel
    assert redo.mfu < keep.mfu


def test_zero_stages_trade_memory_for_traffic():
    plans = [parallel.plan("llama-3-8b", "h100", 64, 64 * 8192, 8192, zero=z) for z in range(4)]
    memory = [p.memory_per_gpu_bytes for p in plans]
    assert memory == sorted(memory, reverse=True) and memory[3] < memory[0] / 4
    traffic = [sum(c["time_s"] for c in p.communication.values()) for p in plans]
    # stages 1 and 2 send what stage 0 sends (a reduce-scatter and an all-gather are an all-reduce; the bound's
    # all-reduce may also reduce in the network's switches, which the two halves cannot); stage 3 sends more
    assert traffic[1] == pytest.approx(traffic[0], rel=0.2) and traffic[3] > 1.4 * traffic[0]


def test_overlap_hides_gradient_traffic():
    args = dict(model="llama-3-8b", hw="h100", gpus=64, global_batch_tokens=64 * 8192 * 2, seq=8192)
    hidden, shown = parallel.plan(**args), parallel.plan(**args, overlap=False)
    assert hidden.communication["dp"]["time_s"] == shown.communication["dp"]["time_s"]
    assert shown.communication["dp"]["exposed_s"] == shown.communication["dp"]["time_s"]
    assert hidden.communication_s < shown.communication_s


def test_memory_per_gpu_is_the_plans():
    plan = parallel.plan("llama-3-70b", "h100", 512, 2**21, 4096, tp=8, pp=4, cp=2, zero=2, recompute=True)
    assert plan.memory == parallel.memory_per_gpu("llama-3-70b", plan.microbatch_tokens / 2, tp=8, pp=4, shards=16,
                                                  zero=2, microbatches=plan.microbatches, recompute=True)


def test_the_least_a_layer_keeps_for_its_backward():
    # every op's inputs (Korthikanti et al.) without dropout: 32 T h / t with sequence parallelism; what the backward
    # must read, each tensor once and nothing but elementwise ops redone: one tensor per norm (2 h, not 4 h), Q K V O
    # (8 h) and the MLP's pre-activation (8 h, not 16 h): 20 T h / t
    T, h, a, t = sympy.symbols("T h a t", positive=True)
    shape = dict(gated=False, tp=t, sequence_parallel=True)
    assert sympy.simplify(parallel.activation_bytes(T, h, a, a, h / a, 4 * h, **shape) - 32 * T * h / t) == 0
    assert sympy.simplify(parallel.activation_bytes(T, h, a, a, h / a, 4 * h, **shape, tensors="least")
                          - 20 * T * h / t) == 0
    with pytest.raises(InvalidValue, match="tensors must be one of least, megatron"):
        parallel.activation_bytes(8192, 4096, 32, 8, 128, 14336, tensors="all")


def test_the_stages_are_split_as_llama3_split_them():
    # arXiv:2407.21783, section 3.3.2: one layer fewer on the first and the last stage; with one layer a chunk the
    # first chunk holds only the embedding and the last only the output layer
    split = parallel.chunk_layers(126, 16)
    assert [sum(r) for r in split] == [7] + [8] * 14 + [7]
    fine = parallel.chunk_layers(126, 16, 8)
    assert fine[0][0] == 0 and fine[-1][-1] == 0 and sum(map(sum, fine)) == 126
    assert all(x == 1 for r in fine for x in r if x) and parallel.chunk_layers(80, 1) == [[80]]
    with pytest.raises(InvalidValue, match="at most 128"):
        parallel.chunk_layers(126, 16, 9)


def test_the_stage_that_holds_most():
    # 1F1B: rank r runs p - r - 1 warm-up forwards, so holds min(m, p - r) micro-batches of its layers: with the first
    # stage one layer short, rank 1 holds most (15 x 8 > 16 x 7); interleaved (Megatron-LM): 2 (p - r - 1) + (v - 1) p
    # warm-up chunks and one more, here one layer each; all of them when the batch is no longer than that
    assert parallel.layers_in_flight(126, 16, 32) == (1, 15 * 8)
    assert parallel.layers_in_flight(126, 16, 32, 8) == (1, 2 * 14 + 7 * 16 + 1)
    assert parallel.layers_in_flight(126, 16, 16, 8) == (1, 16 * 8)
    assert parallel.layers_in_flight(80, 1, 4) == (0, 80)  # no pipeline: one micro-batch at a time
    assert parallel.layers_in_flight(6, 2, 4) == (0, 2 * 3)  # 8 slots, 3 layers a stage; the first holds 2


def test_meta_s_405b_layouts_fit_an_h100():
    from roofkit.perf.parallel import published

    for run in (r for r in published.load("fitting") if r.case.startswith("Llama 3")):
        plan = published.predict(run)
        assert plan.fits, run.case  # Meta trained them, at 8K tokens without activation checkpointing
        assert plan.recompute == "none" and plan.memory_per_gpu_bytes < plan.memory_estimate_bytes
        assert plan.memory_stage == 1  # the first stage gave a layer to the embedding


def test_memory_of_a_70b_run_does_not_fit_one_node():
    plan = parallel.plan("llama-3-70b", "h100", 8, 8 * 8192, 8192, tp=8)
    assert plan.fits is False and plan.memory["weights"] + plan.memory["grads"] + plan.memory["optimizer"] == \
        pytest.approx(16 * models.get("llama-3-70b").params / 8)
    assert any("does not fit" in w for w in plan.warnings)


def test_tpus_run_inside_their_pod():
    plan = parallel.plan("llama-3-8b", "tpu v5p", 256, 256 * 8192, 8192, tp=4)
    assert plan.intra == "ici-v5p" and plan.inter is None and plan.node_gpus == 8960
    with pytest.raises(InvalidValue, match="no scale-out link"):
        parallel.plan("llama-3-8b", "tpu v5e", 512, 512 * 8192, 8192, tp=2)


# --- bad layouts ----------------------------------------------------------------------------------

def test_bad_layouts_name_the_values():
    base = dict(model="llama-3-70b", hw="h100", gpus=1024, global_batch_tokens=4 * 2**20, seq=8192)
    with pytest.raises(InvalidValue) as error:
        parallel.plan(**base, tp=8, pp=4, dp=3)
    assert str(error.value) == ("tp x cp x pp x dp = 8 x 1 x 4 x 3 = 96, not gpus = 1024; "
                                "with tp=8, cp=1, pp=4 choose dp = gpus / 32 = 32.")
    with pytest.raises(InvalidValue, match="not a multiple of tp x cp x pp = 24"):
        parallel.plan(**base, tp=8, pp=3)
    with pytest.raises(InvalidValue, match="zero must be one of 0, 1, 2, 3; got 4"):
        parallel.plan(**base, tp=8, zero=4)
    with pytest.raises(links.MissingLink, match="has no link 'ici-v5p'"):
        parallel.plan(**base, tp=8, inter="ici-v5p")
    with pytest.raises(InvalidValue, match="only 16 sequences of 8192 tokens: choose at most 16"):
        parallel.plan(**base, tp=8, pp=4, microbatches=17)
    with pytest.raises(InvalidValue, match="needs at least 262144 tokens"):
        parallel.plan(**(base | {"global_batch_tokens": 1e5}), tp=8, pp=4)
    with pytest.raises(models.UnknownModel):
        parallel.plan(**(base | {"model": "llama-4"}), tp=8)


@settings(max_examples=40, deadline=None)
@given(gpus=st.sampled_from([8, 16, 64, 512, 4096]), tp=st.sampled_from([1, 2, 4, 8, 16, 3]),
       pp=st.sampled_from([1, 2, 4, 8, 100]), zero=st.integers(0, 4), cp=st.sampled_from([1, 2]),
       tokens=st.sampled_from([1e5, 2**20, 4 * 2**20, 3e7]), seq=st.sampled_from([2048, 8192]),
       model=st.sampled_from(["llama-3-8b", "llama-3-70b", "gpt-3-175b"]),
       hw=st.sampled_from(["h100", "b200", "gb200", "a100", "l4", "tpu v5p"]), recompute=st.booleans())
def test_random_layouts_give_a_plan_or_a_roofkit_error(gpus, tp, pp, zero, cp, tokens, seq, model, hw, recompute):
    try:
        plan = parallel.plan(model, hw, gpus, tokens, seq, tp=tp, pp=pp, cp=cp, zero=zero, recompute=recompute)
    except RoofkitError:
        return
    # HFU counts what the kernels execute, so the bound keeps it at most 1; MFU counts attention in full (PaLM's
    # convention) while causal kernels execute half of it, so a small model at long sequences can pass 1
    assert 0 < plan.hfu <= 1 + 1e-9 and 0 < plan.mfu and plan.step_time_s >= plan.compute_s > 0
    assert plan.memory_per_gpu_bytes > 0 and all(c["exposed_s"] <= c["time_s"] + 1e-12 or c["collective"] == "p2p"
                                                 for c in plan.communication.values())


# --- expert parallelism -----------------------------------------------------------------------------

def test_expert_all_to_all():
    # four all-to-alls a MoE layer (dispatch and combine, forward and backward), each of tokens x k x d x 2 bytes
    t = parallel.expert_all_to_all(4096, 7168, 8, 8, "hgx-h100")
    assert t == pytest.approx(4 * comms.all_to_all(4096 * 8 * 7168 * 2, 8, "hgx-h100").time_s)


# --- the command line --------------------------------------------------------------------------------


def test_cli_parallel_json(capsys):
    argv = ["parallel", "--model", "llama-3-70b", "--hw", "h100", "--gpus", "1024", "--tp", "8", "--pp", "4",
            "--zero", "1", "--global-batch-tokens", "4M", "--seq", "8192", "--json"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    data = json.loads(out)
    assert {"step_time_s", "mfu", "memory_per_gpu_bytes", "fits", "compute_s", "communication_s", "bubble_s",
            "communication"} <= set(data)
    assert set(data["communication"]) == {"tp", "pp", "dp", "zero"}
    plan = parallel.plan("llama-3-70b", "h100", 1024, 4 * 2**20, 8192, tp=8, pp=4, zero=1)  # 4M = 4 x 2^20 tokens
    assert data["mfu"] == pytest.approx(plan.mfu) and data["fits"] is True
    code, out, _ = run(capsys, *argv[:-1])
    assert code == 0 and "MFU" in out and "pipeline bubble" in out


def test_a_batch_of_tokens_counts_in_powers_of_two_and_whole_sequences(capsys):
    """C-2: '4M' was read as 4e6, which gave each of 32 replicas 15.26 sequences of 8,192 tokens."""
    from roofkit.units import tokens

    assert tokens("4M") == 4 * 2**20 and tokens("512k") == 512 * 2**10 and tokens("4194304") == 4 * 2**20
    with pytest.raises(InvalidValue, match="not a whole number"):
        parallel.plan("llama-3-70b", "h100", 1024, 4e6, 8192, tp=8, pp=4, zero=1)
    code, _, err = run(capsys, "parallel", "--model", "llama-3-70b", "--hw", "h100", "--gpus", "1024", "--tp", "8",
                       "--pp", "4", "--global-batch-tokens", "4000000", "--seq", "8192")
    assert code == 2 and "4,194,304" not in err and "not a whole number" in err and len(err.strip().splitlines()) == 1


def test_cli_parallel_gather_api_list(capsys):
    argv = ["parallel", "--model", "gpt-3-175b", "--hw", "a100", "--gpus", "384", "--zero", "3",
            "--global-batch-tokens", "3145728", "--seq", "2048", "--recompute", "--no-overlap", "--calibrated",
            "--gather-api", "list", "--json"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    data = json.loads(out)
    plan = parallel.plan("gpt-3-175b", "a100", 384, 3145728, 2048, zero=3, recompute="full", overlap=False,
                         gather_api="list", calibrated=True)
    assert data["gather_api"] == "list" and data["step_time_s"] == pytest.approx(plan.step_time_s)
    assert data["communication"]["slices"]["calls"] == plan.communication["slices"]["calls"] > 0
    code, out, _ = run(capsys, *argv[:-1])
    assert code == 0 and "slices (per-rank slices)" in out


@pytest.mark.parametrize("extra, message", [
    (["--dp", "3"], "tp x cp x pp x dp = 8 x 1 x 4 x 3 = 96, not gpus = 1024"),
    (["--inter", "ici-v5p"], "has no link 'ici-v5p'. Its links: hgx-h100"),
    (["--zero", "5"], "invalid choice: 5"),
    (["--gather-api", "lists"], "invalid choice: 'lists' (choose from 'flat', 'list')"),
    (["--zero", "1", "--gather-api", "list"], "zero = 1 gathers its buckets once a step"),
])
def test_cli_parallel_bad_input_is_one_line_and_exit_2(capsys, extra, message):
    argv = ["parallel", "--model", "llama-3-70b", "--hw", "h100", "--gpus", "1024", "--tp", "8", "--pp", "4",
            "--global-batch-tokens", "4M", "--seq", "8192", *extra]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_cli_comm_json(capsys):
    code, out, err = run(capsys, "comm", "all-reduce", "--bytes", "1GB", "--gpus", "8", "--link", "hgx-h100", "--json")
    assert code == 0, err
    data = json.loads(out)
    r = comms.all_reduce(1e9, 8, "hgx-h100", "auto")  # the command's default: NCCL's fastest
    assert data["algorithm"] == r.algorithm == "nvls" and data["protocol"] == "Simple"
    assert data["time_s"] == r.time_s and data["algbw_bytes_per_s"] == r.algbw and data["busbw_bytes_per_s"] == r.busbw
    assert data["link"]["key"] == "hgx-h100" and data["link"]["bandwidth_used_bytes_per_s"] == 450e9
    assert data["link"]["quoted"] == 7.2 and data["link"]["direction"] == "both directions"
    code, out, _ = run(capsys, "comm", "all-gather", "--bytes", "1GiB", "--gpus", "16", "--link", "hgx-h100",
                       "--inter", "ib-ndr", "--json")
    data = json.loads(out)
    assert code == 0 and data["bytes"] == 2**30 and data["nodes"] == 2 and {"time_s", "busbw_bytes_per_s"} <= set(data)


@pytest.mark.parametrize("argv, message", [
    (["comm", "allreduc", "--bytes", "1e9", "--gpus", "8", "--link", "nvlink4"], "Unknown collective 'allreduc'"),
    (["comm", "all-reduce", "--bytes", "1e9", "--gpus", "8", "--link", "nvlnk"], "Unknown link 'nvlnk'"),
    (["comm", "all-reduce", "--bytes", "1e9", "--gpus", "9", "--link", "hgx-h100"], "connects at most 8 GPUs"),
    (["comm", "all-reduce", "--bytes", "-1", "--gpus", "8", "--link", "nvlink4"], "bytes must be a size"),
    (["comm", "all-reduce", "--bytes", "1e9", "--gpus", "8", "--link", "nvlink4", "--algorithm", "star"],
     "invalid choice: 'star'"),
])
def test_cli_comm_bad_input(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


# --- helpers the lessons use: ZeRO's collectives, the bubble's micro-batches, TP's limit, the search ----------------

def test_zero_collectives_are_what_the_plan_sends():
    for zero in parallel.ZERO_STAGES:
        plan = parallel.plan("llama-3-8b", "h100", 64, 64 * 8192 * 4, 8192, zero=zero)  # 4 micro-batches
        sent = {kind: (c["collective"], c["calls"]) for kind, c in plan.communication.items()}
        assert sent == parallel.zero_collectives(zero, plan.microbatches)
    with pytest.raises(InvalidValue, match="zero must be one of"):
        parallel.zero_collectives(5)


def test_list_collectives_handle_every_rank_s_slice_of_every_tensor():
    # DeepSpeed's ZeRO-3 of 2021: a tensor of 100,000 elements or more is gathered as the policy says and
    # reduce-scattered each micro-batch; a smaller one stays gathered, is reduce-scattered and regathered after the step
    tensors = [10**6, 10**6, 99_999]
    assert parallel.list_slices(tensors, 64, recompute="full", gather_api="list") == 64 * (2 * 4 + 2)
    assert parallel.list_slices(tensors, 64, microbatches=2, gather_api="list") == 64 * (2 * 6 + 3)
    assert parallel.list_slices(tensors, 64, policy="per-step", gather_api="list") == 64 * (2 * 2 + 2)
    assert parallel.list_slices(tensors, 64, recompute="full") == 0  # one flat buffer a call: nothing per rank
    with pytest.raises(InvalidValue, match="gather_api must be one of flat, list; got 'lists'"):
        parallel.list_slices(tensors, 64, gather_api="lists")


def test_list_collectives_cost_the_estimate_not_the_bound():
    args = dict(model="llama-3-8b", hw="h100", gpus=256, global_batch_tokens=256 * 8192, seq=8192, zero=3)
    for calibrated in (False, True):
        flat = parallel.plan(**args, calibrated=calibrated)
        lists = parallel.plan(**args, gather_api="list", calibrated=calibrated)
        slices = lists.communication["slices"]
        # 4 matrices a layer and the two vocabulary tables: 2 gathers, 1 reduce-scatter; the norms: 2 calls
        assert slices["calls"] == 256 * (3 * (32 * 4 + 2) + 2 * (32 * 2 + 1))
        assert "slices" not in flat.communication and lists.gather_api == "list"
        extra = lists.step_time_s - flat.step_time_s
        assert extra == (pytest.approx(slices["calls"] * 2 * lists.roofs["floor_s"]) if calibrated else 0.0)
    with pytest.raises(InvalidValue, match="zero = 1 gathers its buckets once a step"):
        parallel.plan(**(args | {"zero": 1}), gather_api="list")
    with pytest.raises(InvalidValue, match="gather_api must be one of flat, list; got 'nccl'"):
        parallel.plan(**args, gather_api="nccl")


@pytest.mark.parametrize("n", [2, 8, 64, 1024])
def test_sync_volume_counts_ring_bytes(n):
    # Rajbhandari et al. 2020, section 7: stages 1 and 2 move what data parallelism moves (2 Psi), stage 3 1.5x;
    # the scaling book's table (training.md): DP 8DF per layer, FSDP 4DF + 8DF
    ring = (n - 1) / n
    assert parallel.sync_volume(0, n) == pytest.approx(2 * ring)
    assert parallel.sync_volume(1, n) == parallel.sync_volume(2, n) == pytest.approx(parallel.sync_volume(0, n))
    assert parallel.sync_volume(3, n) / parallel.sync_volume(0, n) == pytest.approx(12 / 8)
    assert parallel.sync_volume(3, n, microbatches=4) == pytest.approx(4 * parallel.sync_volume(3, n))


@settings(max_examples=60, deadline=None)
@given(p=st.integers(2, 64), x=st.floats(0.005, 0.9), v=st.sampled_from([1, 2, 4]))
def test_microbatches_for_bubble_is_the_smallest(p, x, v):
    m = parallel.microbatches_for_bubble(p, x, v)
    assert parallel.bubble_fraction(p, m, v) <= x
    assert m == 1 or parallel.bubble_fraction(p, m - 1, v) > x


def test_microbatches_for_bubble_by_hand_and_bad_input():
    assert parallel.microbatches_for_bubble(16, 0.05) == 285  # 15 x 0.95 / 0.05
    assert parallel.microbatches_for_bubble(1, 0.01) == 1  # no pipeline, no bubble
    with pytest.raises(InvalidValue, match="fraction is a share of the step"):
        parallel.microbatches_for_bubble(8, 1.5)
    with pytest.raises(InvalidValue, match="stages must be a whole number"):
        parallel.microbatches_for_bubble(2.5, 0.1)


def test_tp_critical_degree_matches_the_scaling_book():
    # gpus.md, "Tensor Parallelism": Y < F W / C, "about F / 2200" inside an H100 node (990e12 / 450e9)
    h100, nvlink = hardware.get("h100"), links.get("nvlink4")
    assert parallel.tp_critical_degree(28672, h100.peak("bf16"), nvlink.bandwidth) == pytest.approx(28672 / 2200,
                                                                                                  rel=0.01)
    # quiz 5: B200 "the critical intensity goes up to 2250e12 / 900e9 = 2500"
    b200 = hardware.get("b200")
    assert parallel.tp_critical_degree(2500, b200.peak("bf16"), links.get("nvlink5").bandwidth) == pytest.approx(1)
    F, C, W = sympy.symbols("F C W", positive=True)
    assert parallel.tp_critical_degree(F, C, W) == F * W / C


def test_tp_past_the_critical_degree_spends_more_on_communication():
    args = dict(model="llama-3-70b", hw="h100", gpus=1024, global_batch_tokens=4 * 2**20, seq=8192, pp=4, zero=1)
    share = {t: (p := parallel.plan(**args, tp=t)).communication["tp"]["time_s"] / p.compute_s for t in (4, 8, 16)}
    # the traffic per GPU per all-reduce stays, the compute per GPU halves: the ratio about doubles with t,
    # and more past the node, where the all-reduce leaves NVLink SHARP for a two-level ring
    assert share[8] == pytest.approx(2 * share[4], rel=0.3) and share[16] > 2 * share[8]


def test_search_returns_fitting_layouts_fastest_first():
    found = parallel.search("llama-3-70b", "h100", 256, 2 * 2**20, 8192, tp=(4, 8), pp=(1, 4), zero=(0, 1, 3),
                            recompute=(False,))
    assert found and all(p.fits for p in found)
    assert [p.step_time_s for p in found] == sorted(p.step_time_s for p in found)
    assert not any(p.zero == 0 and p.pp == 1 for p in found)  # plain DP with TP 4 or 8 holds >80 GB
    everything = parallel.search("llama-3-70b", "h100", 256, 2 * 2**20, 8192, tp=(4, 8), pp=(1, 4), zero=(0, 1, 3),
                                 recompute=(False,), fits_only=False)
    assert len(everything) == 12 and len(found) < 12
    # a grid point roofkit cannot plan is skipped: TP 3 does not divide 256
    assert parallel.search("llama-3-70b", "h100", 256, 2 * 2**20, 8192, tp=(3,), pp=(1,)) == []
    best = found[0]
    assert best == min(found, key=lambda p: p.step_time_s)


def test_layout_names_the_split():
    plan = parallel.plan("llama-3-70b", "h100", 512, 2**21, 4096, tp=8, pp=4, cp=2, zero=2, recompute=True)
    assert plan.layout == "TP 8 · CP 2 · PP 4 · DP 8 · ZeRO-2 + recompute"
    assert parallel.plan("llama-3-8b", "h100", 64, 64 * 8192, 8192).layout == "TP 1 · PP 1 · DP 64"
