"""Experts at scale: EP folded over TP x CP x DP with an ETP degree, each GPU dispatching its own tokens, node-limited
two-stage dispatch in FP8, grouped GEMMs at few tokens per expert, interleaved MoE layers and multi-token prediction;
in the step: the grouped GEMMs and the imbalance in the calibrated compute, the experts' gradients and optimizer over
the expert-data-parallel ranks, the MTP module's projection and head pass, an MoE layer's TP traffic, and serving
Llama 4 Maverick's interleaved layers.

Every figure is checked against a published number (DeepSeek-V3's report and README, Llama 4 Maverick's model card,
DeepGEMM's README) or against arithmetic done here, independently of roofkit's formulas (a Monte Carlo of random
routing, a product form of the hypergeometric miss probability).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from roofkit import parallel
from roofkit.catalogs import models
from roofkit.errors import InvalidValue
from roofkit.perf import steptime
from roofkit.perf.parallel import experts
from roofkit.perf.parallel.plan import MFU_CONVENTION

from helpers import run

DEEPSEEK = dict(model="deepseek-v3", hw="h100", gpus=2048, global_batch_tokens=15360 * 4096, seq=4096, tp=1, pp=16,
                ep=64, etp=1, zero=1)  # DeepSeek-V3's report, section 3.2 and 4.2 (H100 for the H800)
QWEN_FOLDED = dict(model="qwen3-235b-a22b", hw="h100", gpus=256, global_batch_tokens=4 * 2**20, seq=4096, tp=4, pp=8,
                   ep=32, etp=1, zero=1, sequence_parallel=True)


def _miss(pool, per, k):
    """P(a group of ``per`` experts gets none of k drawn from ``pool``): a product, not roofkit's binomials."""
    return math.prod((pool - per - i) / (pool - i) for i in range(k))


# --- 1. EP folded over TP x CP x DP, with ETP ------------------------------------------------------------------


def test_the_folded_layout_that_was_refused_now_plans():
    # Qwen3-235B: EP 32 on TP 4 x DP 8 was "ep must divide dp x cp"; Megatron-Core folds EP over DP x CP x TP
    p = parallel.plan(**QWEN_FOLDED)
    assert (p.ep, p.etp, p.expert_dp) == (32, 1, 1)
    # each GPU holds 128 / 32 = 4 whole experts of each of the 94 layers
    _, routed = parallel.layer_params("qwen3-235b-a22b", tp=4, ep=32, etp=1)
    assert routed == 94 * 4 * 3 * 4096 * 1536
    # and DeepSeek-V3 as Megatron-LM's parallelism guide lays it out on 1,024 GPUs: TP 2, PP 16, EP 64 (DP 32)
    q = parallel.plan("deepseek-v3", "h100", 1024, 15360 * 4096, 4096, tp=2, pp=16, ep=64, etp=1, zero=1,
                      sequence_parallel=True)
    assert (q.dp, q.ep, q.expert_dp) == (32, 64, 1)


def test_expert_optimizer_states_shard_over_the_expert_data_parallel_ranks():
    # DeepSeek-V3 on 2,048 GPUs: DP 128, but the 64 EP ranks leave 2 that hold the same experts (EDP = 128 / 64)
    p = parallel.plan(**DEEPSEEK)
    m = models.get("deepseek-v3")
    routed = (58 + 1) * 256 * 3 * 7168 * 2048  # 58 MoE layers and the MTP module's
    dense = m.params + m.mtp_params - routed
    adam = 4 + 4 + 4  # FP32 master weight and two moments, sharded by ZeRO-1
    expected = adam * (dense / 16 / 128 + routed / 64 / 16 / 2)
    assert p.expert_dp == 2
    assert p.memory["optimizer"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("options, message", [
    (dict(QWEN_FOLDED, etp=4), "ep x etp = 32 x 4 = 128 must divide tp x cp x dp = 4 x 1 x 8 = 32"),
    (dict(QWEN_FOLDED, etp=4), "with etp = 4 choose ep among 1, 2, 4, 8 (etp = 1"),
    (dict(QWEN_FOLDED, sequence_parallel=False), "tp = 4 without sequence parallelism"),
    (dict(QWEN_FOLDED, ep=3), "ep = 3 does not divide"),
    (dict(DEEPSEEK, moe_imbalance=1.2), "pass calibrated=True"),
    (dict(DEEPSEEK, max_nodes_per_token=0), "max_nodes_per_token must be a whole number"),
    (dict(DEEPSEEK, dispatch_dtype="fp4"), "dispatch_dtype must be one of bf16, fp8"),
    (dict(DEEPSEEK, node_gpus=1, max_nodes_per_token=1), "1 nodes of 4 experts cannot hold a token's 8"),
])
def test_a_bad_expert_layout_is_one_clear_error(options, message):
    with pytest.raises(InvalidValue) as error:
        parallel.plan(**options)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_cli_refuses_a_bad_etp_in_one_line(capsys):
    code, out, err = run(capsys, "parallel", "--model", "qwen3-235b-a22b", "--hw", "h100", "--gpus", 256, "--tp", 4,
                         "--pp", 8, "--ep", 32, "--etp", 4, "--sequence-parallel", "--global-batch-tokens", "4M",
                         "--seq", 4096)
    assert code == 2 and "choose ep among 1, 2, 4, 8" in err and err.count("\n") == 1


# --- 2. each GPU dispatches its own tokens ----------------------------------------------------------------------


def test_dispatch_bytes_per_gpu_fall_by_tp_under_sequence_parallelism():
    # Qwen3-30B on one node: 8 EP ranks of whole experts; TP 4 with SP leaves each GPU 1/4 of a sequence's tokens
    base = dict(model="qwen3-30b-a3b", hw="h100", gpus=8, global_batch_tokens=64 * 4096, seq=4096, ep=8, etp=1,
                calibrated=True, sequence_parallel=True)
    one, four = parallel.plan(**base, tp=1), parallel.plan(**base, tp=4)
    assert one.communication["ep"]["bytes_per_call"] / four.communication["ep"]["bytes_per_call"] == pytest.approx(4)
    # NCCL's all-to-all: 1,024 tokens x 8 rows x 2,048 x 2 bytes, 7/8 of them to the other GPUs of the node
    assert four.communication["ep"]["bytes_per_call"] == pytest.approx(4096 / 4 * 8 * 2048 * 2 * 7 / 8)


def test_an_etp_group_gathers_what_its_experts_received():
    # ETP = TP = 4 (the default): the rows are all-gathered over the 4 ranks and reduce-scattered after
    p = parallel.plan(**dict(QWEN_FOLDED, ep=8, etp=None, calibrated=True))
    etp = p.communication["etp"]
    assert p.etp == 4 and etp["group"] == 4
    assert etp["bytes_per_call"] == pytest.approx(4 * 4096 / 4 * 8 * 4096 * 2)  # 4 ranks' 1,024 tokens x 8 rows
    assert "etp" not in parallel.plan(**QWEN_FOLDED, calibrated=True).communication


def test_moe_layers_count_interleaved_layers_and_the_mtp_module():
    # Llama 4 Maverick alternates dense and MoE layers: 4 all-to-alls on each of its 24 MoE layers a micro-batch
    p = parallel.plan("llama-4-maverick", "h100", 256, 256 * 8192, 8192, tp=1, pp=8, ep=8, zero=1)
    assert p.communication["ep"]["calls"] == pytest.approx(4 * 24 / 8 * p.microbatches)
    # DeepSeek-V3's MTP module is one more MoE layer: 58 + 1, its weights in memory (mtp_params)
    q = parallel.plan(**DEEPSEEK)
    assert q.communication["ep"]["calls"] == pytest.approx(4 * 59 / 16 * q.microbatches)
    dense, routed = parallel.layer_params("deepseek-v3")
    m = models.get("deepseek-v3")
    assert dense + routed == m.params + m.mtp_params


# --- 3. node-limited routing, two stages, FP8 -------------------------------------------------------------------


def test_expected_distinct_nodes_against_random_routing():
    rng = np.random.default_rng(20261203)
    for k, experts_, per in ((8, 256, 32), (8, 128, 32), (2, 8, 1), (8, 128, 4)):
        tokens = 20000
        picks = np.argsort(rng.random((tokens, experts_)), axis=1)[:, :k]  # k distinct experts, uniformly
        hits = np.array([len(set(row)) for row in picks // per]).mean()
        assert experts.expected_hits(k, experts_, per) == pytest.approx(hits, rel=0.01), (k, experts_, per)
        assert experts.expected_hits(k, experts_, per) == pytest.approx(experts_ / per * (1 - _miss(experts_, per, k)))


def test_node_limited_routing_lowers_the_network_bytes_by_the_expected_factor():
    # DeepSeek-V3: EP 64 over 8 nodes of 32 experts, k = 8; limited to 4 nodes (section 2.1.2)
    args = dict(DEEPSEEK, calibrated=True, dispatcher="deepep", dispatch_dtype="fp8")
    free = parallel.plan(**args).communication["ep"]
    limited = parallel.plan(**args, max_nodes_per_token=4).communication["ep"]
    unlimited_nodes = 8 * (1 - _miss(256, 32, 8))  # about 5.3 of the 8 nodes
    limited_nodes = 4 * (1 - _miss(128, 32, 8))  # about 3.6 of the 4 chosen
    ratio = limited["network_bytes_per_dispatch"] / free["network_bytes_per_dispatch"]
    assert ratio == pytest.approx(limited_nodes / unlimited_nodes)
    # each copy: 4,096 tokens x 7,168 elements in FP8 with an FP32 scale per 128; 7/8 of the nodes are others'
    assert limited["network_bytes_per_dispatch"] == pytest.approx(4096 * limited_nodes * 7 / 8 * 7168 * (1 + 4 / 128))
    assert min(8, 4, 8 - 1) >= limited_nodes * 7 / 8  # never more copies than k, the limit, or the other nodes


def test_fp8_dispatch_halves_the_dispatch_and_keeps_the_combine():
    args = dict(DEEPSEEK, calibrated=True, dispatcher="deepep", max_nodes_per_token=4)
    bf16 = parallel.plan(**args).communication["ep"]
    fp8 = parallel.plan(**args, dispatch_dtype="fp8").communication["ep"]
    assert bf16["network_bytes_per_dispatch"] / fp8["network_bytes_per_dispatch"] == pytest.approx(2 / (1 + 4 / 128))
    assert fp8["time_s"] > bf16["time_s"] / 2  # the combine stays BF16


def test_the_bound_sends_the_least_a_router_could():
    # 32 experts a node hold a token's 8: its own GPU's 4 and one more GPU of its node, nothing over the network
    p = parallel.plan(**DEEPSEEK)
    c = p.communication["ep"]["experts"]["copies_per_token"]
    assert (c["network"], c["nvlink"]) == (0, 1)
    # one GPU per node (EP over 64 nodes at ETP 8): 4 experts a GPU, so 8 experts need one other node
    assert experts.least_copies(8, 4, 1, 64) == (1, 0)


@pytest.mark.parametrize("options", [
    DEEPSEEK, dict(DEEPSEEK, max_nodes_per_token=4, dispatch_dtype="fp8"), QWEN_FOLDED, dict(QWEN_FOLDED, ep=8, etp=4),
    dict(model="qwen3-30b-a3b", hw="h100", gpus=64, global_batch_tokens=2**20, seq=4096, ep=16, etp=1, zero=1),
])
@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_the_bound_never_charges_more_than_the_estimate(options, dispatcher):
    bound, estimate = parallel.plan(**options), parallel.plan(**options, calibrated=True, dispatcher=dispatcher)
    for kind in ("ep", "etp"):
        if kind in bound.communication:
            assert bound.communication[kind]["time_s"] <= estimate.communication[kind]["time_s"]
    assert bound.step_time_s <= estimate.step_time_s


def test_imbalance_scales_the_estimate_s_expert_traffic():
    even = parallel.plan(**DEEPSEEK, calibrated=True)
    busy = parallel.plan(**DEEPSEEK, calibrated=True, moe_imbalance=1.5)
    assert busy.communication["ep"]["time_s"] == pytest.approx(1.5 * even.communication["ep"]["time_s"])
    assert busy.constants["moe_imbalance"] == 1.5 and parallel.plan(**DEEPSEEK).constants["moe_imbalance"] == 1.0


# --- 4. grouped GEMMs at few tokens per expert ------------------------------------------------------------------


def test_the_grouped_gemm_share_follows_deepgemm_s_published_rates():
    # DeepGEMM README (commit 327ec92), H800, N x K = 4096 x 7168 and 7168 x 2048: 1346 and 1214 TFLOPS at
    # M = 4096 and 8192, 1233 / 925 at 1024, 1040 / 916 at 512, 932 / 815 at 256
    assert experts.grouped_gemm_share(8192) == experts.grouped_gemm_share(4096) == 1.0
    assert experts.grouped_gemm_share(1024) == pytest.approx((1233 / 1346 + 925 / 1214) / 2)
    assert experts.grouped_gemm_share(256) == pytest.approx((932 / 1346 + 815 / 1214) / 2)
    assert experts.grouped_gemm_share(16) == experts.grouped_gemm_share(256)  # held below the smallest point
    shares = [experts.grouped_gemm_share(m) for m in (256, 384, 512, 768, 1024, 2048, 4096)]
    assert shares == sorted(shares)
    source, _ = experts.grouped_gemm_points()
    assert "DeepGEMM" in source["source"] and "H800" in source["measured_on"]


def test_expert_gemms_run_slower_with_few_tokens_per_expert_in_the_estimate_only():
    m = models.get("qwen3-30b-a3b")
    fwd = steptime.layer_kernels(m, 1, 1024, ep=1, moe=True)  # 1,024 x 8 rows over 128 experts: 64 an expert
    ks = [k for k in fwd + steptime.backward_kernels(fwd) if k.op == "experts" and k.kind == "gemm"]
    assert all(steptime.grouped_gemm_rows(k) == pytest.approx(1024 * 8 / 128) for k in ks)
    bound, cal = steptime.roofs("h100"), steptime.roofs("h100", calibrated=True)
    share = experts.grouped_gemm_share(64)
    for k in ks:
        assert steptime.grouped_gemm_time(k, bound) == steptime.kernel_time(k, bound)
        compute = k.flops / (cal.peak_flops * share)
        assert steptime.grouped_gemm_time(k, cal) == pytest.approx(cal.floor_s + max(compute, k.bytes / cal.bandwidth))
        assert steptime.grouped_gemm_time(k, cal) >= steptime.kernel_time(k, cal)


# --- 6. the models ----------------------------------------------------------------------------------------------


def test_llama_4_maverick_against_its_model_card():
    # meta-llama/Llama-4-Maverick-17B-128E: 400B total, 17B activated (the vision encoder is not in roofkit's count)
    m = models.get("llama-4-maverick")
    assert m.params == pytest.approx(400e9, rel=0.01)
    assert abs(m.active_params + m.vocab * m.d_model - 17e9) < 0.5e9  # the card counts the embedding table too
    assert m.moe_layers == 24 and [m.is_moe_layer(i) for i in range(4)] == [False, True, False, True]


def test_deepseek_v3_with_its_multi_token_prediction_module():
    # deepseek-ai/DeepSeek-V3 README: "685B, which includes 671B of the Main Model weights and 14B of the
    # Multi-Token Prediction (MTP) Module weights"; the checkpoint's MTP layer holds its own copy of the embedding
    # and the output head, which training shares with the main model (report, section 2.2)
    m = models.get("deepseek-v3")
    copies = 2 * m.vocab * m.d_model
    assert round(m.params / 1e9) == 671
    assert (m.params + m.mtp_params + copies) == pytest.approx(685e9, rel=2e-3)
    assert abs((m.mtp_params + copies) - 14e9) <= 1e9  # 685 - 671, each rounded to the nearest billion
    assert models.get("llama-3-8b").mtp_params == 0


def test_the_step_includes_the_mtp_module():
    m = models.get("deepseek-v3")
    without = models.from_table({**{f: getattr(m, f) for f in (
        "layers", "d_model", "heads", "kv_heads", "head_dim", "d_ff", "vocab", "q_lora_rank", "kv_lora_rank",
        "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "experts", "experts_per_token", "shared_experts",
        "moe_d_ff", "dense_layers")}, "mtp_layers": 0})
    with_mtp, plain = parallel.plan(**DEEPSEEK), parallel.plan(**dict(DEEPSEEK, model=without))
    assert with_mtp.compute_s > plain.compute_s
    routed = 256 * 3 * 7168 * 2048  # the module's routed experts, 1/64 of them on each GPU
    here = (m.mtp_params - routed + routed / 64) / 16  # spread over the 16 stages, as every layer's weights
    assert with_mtp.memory["weights"] - plain.memory["weights"] == pytest.approx(2 * here)


# --- 7. the command line ----------------------------------------------------------------------------------------


def test_deepseek_v3_as_its_report_lays_it_out_from_the_command_line(capsys):
    argv = ["parallel", "--model", "deepseek-v3", "--hw", "h100", "--gpus", 2048, "--pp", 16, "--ep", 64, "--etp", 1,
            "--zero", 1, "--global-batch-tokens", 15360 * 4096, "--seq", 4096, "--max-nodes-per-token", 4,
            "--dispatch-dtype", "fp8"]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert "EP 64 x ETP 1 x EDP 2" in out and "at most 4 nodes" in out and "ep (all-to-all" in out
    code, out, err = run(capsys, *argv, "--calibrated", "--dispatcher", "deepep", "--moe-imbalance", 1.1, "--json")
    data = json.loads(out)
    assert code == 0 and (data["ep"], data["etp"], data["expert_dp"]) == (64, 1, 2)
    assert (data["max_nodes_per_token"], data["dispatch_dtype"], data["dispatcher"]) == (4, "fp8", "deepep")
    assert data["constants"]["moe_imbalance"] == 1.1 and "experts" in data["communication"]["ep"]


# --- 8. the grouped GEMMs and the imbalance in the calibrated compute -------------------------------------------


def test_the_calibrated_compute_runs_the_expert_gemms_as_grouped_gemms_on_the_busiest_gpu():
    # Qwen3-30B-A3B on one node, one 1,024-token sequence a GPU, EP 8: 1,024 x 8 rows over 16 local experts, 512 an
    # expert, where DeepGEMM's grouped GEMMs reach about 80% of their large-M rate
    base = dict(model="qwen3-30b-a3b", hw="h100", gpus=8, global_batch_tokens=8 * 1024, seq=1024, ep=8, etp=1,
                zero=1, calibrated=True)
    even, busy = parallel.plan(**base), parallel.plan(**base, moe_imbalance=1.5)
    r = steptime.Roofs(**even.roofs)
    fwd = steptime.layer_kernels("qwen3-30b-a3b", 1, 1024, ep=8, moe=True)
    gemms = [k for k in fwd + steptime.backward_kernels(fwd) if k.op == "experts" and k.kind == "gemm"]
    share = (1040 / 1346 + 916 / 1214) / 2  # DeepGEMM README at M = 512, each shape over its own best
    assert experts.grouped_gemm_share(512) == pytest.approx(share)
    work = sum(max(k.flops / (r.peak_flops * share), k.bytes / r.bandwidth) for k in gemms)
    assert work > sum(max(k.flops / r.peak_flops, k.bytes / r.bandwidth) for k in gemms)  # compute-bound: slower
    # the busiest GPU does 1.5 x the mean's work on each of the 48 MoE layers, forward and backward
    assert busy.compute_s - even.compute_s == pytest.approx(0.5 * work * 48 * even.microbatches)
    # the bound: the datasheet roof and a perfect balance, whatever the imbalance given to steptime
    bound = steptime.roofs("h100")
    t = steptime.microbatch("qwen3-30b-a3b", "h100", 1, 1024, ep=8, imbalance=1.5)
    assert t.moe_forward_s == pytest.approx(steptime.kernels_time(fwd, bound))
    with pytest.raises(InvalidValue, match="imbalance is the busiest expert GPU's tokens over the mean, at least 1"):
        steptime.microbatch("qwen3-30b-a3b", "h100", 1, 1024, ep=8, calibrated=True, imbalance=0.8)


def test_recomputed_expert_gemms_run_as_grouped_gemms_too():
    args = ("qwen3-30b-a3b", "h100", 1, 1024)
    even = steptime.microbatch(*args, ep=8, calibrated=True, recompute="full")
    busy = steptime.microbatch(*args, ep=8, calibrated=True, recompute="full", imbalance=2.0)
    r = even.roofs
    fwd = steptime.layer_kernels("qwen3-30b-a3b", 1, 1024, ep=8, moe=True)
    share = experts.grouped_gemm_share(512)
    work = sum(max(k.flops / (r.peak_flops * share), k.bytes / r.bandwidth) for k in fwd
               if k.op == "experts" and k.kind == "gemm")
    assert busy.moe_recompute_s - even.moe_recompute_s == pytest.approx(work)


# --- 9. the experts' gradients and optimizer over the expert-data-parallel ranks --------------------------------


def test_expert_gradients_reduce_over_the_expert_data_parallel_group():
    # DeepSeek-V3 on 2,048 GPUs: each stage's 128 DP ranks reduce the dense gradients; the routed experts' only
    # over EDP = 128 / 64 = 2 ranks, 64 apart (one in each of two nodes), as Megatron-Core's expert buffers do
    p = parallel.plan(**DEEPSEEK)
    m = models.get("deepseek-v3")
    routed = (58 + 1) * 256 * 3 * 7168 * 2048
    dense = m.params + m.mtp_params - routed
    dp, edp = p.communication["dp"], p.communication["expert-dp"]
    assert (dp["group"], edp["group"]) == (128, 2)
    assert dp["bytes_per_call"] == pytest.approx(2 * dense / 16)
    assert edp["bytes_per_call"] == pytest.approx(2 * routed / 64 / 16)
    assert edp["level"] == "inter" and p.communication["expert-zero"]["group"] == 2
    # Adam (30 bytes a parameter) over this GPU's shard: the dense weights' 1/128, the experts' 1/2
    bandwidth = steptime.roofs("h100").bandwidth
    expected = (dense / 16 / 128 + routed / 64 / 16 / 2) * 30 / bandwidth
    assert p.optimizer_s == pytest.approx(expected)
    # the same shards as the memory's optimizer states (12 bytes a parameter: master weight and two moments)
    assert p.optimizer_s * bandwidth / 30 == pytest.approx(p.memory["optimizer"] / 12)


def test_experts_held_by_one_rank_need_no_gradient_reduction():
    # Qwen3-235B on 256 H100 (Megatron-Bridge's layout): TP 2 x DP 16 = 32 GPUs a stage, EP 32 x ETP 1: EDP 1
    q = parallel.plan("qwen3-235b-a22b", "h100", 256, 8388608, 4096, tp=2, pp=8, ep=32, etp=1, zero=1,
                      microbatches=128, sequence_parallel=True)
    assert q.expert_dp == 1 and "expert-dp" not in q.communication and q.communication["dp"]["group"] == 16
    dense, routed = parallel.layer_params("qwen3-235b-a22b", tp=2, ep=32, etp=1)
    assert q.optimizer_s == pytest.approx((dense / 8 / 16 + routed / 8) * 30 / steptime.roofs("h100").bandwidth)


# --- 10. the multi-token prediction module in the step ----------------------------------------------------------


def _without_mtp(m):
    return models.from_table({**{f: getattr(m, f) for f in (
        "layers", "d_model", "heads", "kv_heads", "head_dim", "d_ff", "vocab", "q_lora_rank", "kv_lora_rank",
        "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "experts", "experts_per_token", "shared_experts",
        "moe_d_ff", "dense_layers")}, "mtp_layers": 0})


def test_mtp_counts_in_the_model_flops_as_megatron_core_counts_it():
    # Megatron-Core's num_floating_point_operations adds, per token and MTP layer, 3 x 2 x (3 h + 2 h^2) for the
    # norms and the projection, 3 x 2 x h V for the second logits, and one more layer (here an MoE one)
    m = models.get("deepseek-v3")
    h, V, S, tokens = 7168, 129280, 4096, 15360 * 4096
    with_mtp, plain = parallel.plan(**DEEPSEEK), parallel.plan(**dict(DEEPSEEK, model=_without_mtp(m)))
    # the block, from the report's shapes (section 2.1 and 4.2): latent attention (query rank 1,536, KV rank 512,
    # 128 heads of 128 + 64 for the queries and keys, 128 for the values), 8 routed and 1 shared expert 2,048 wide,
    # the router's 256 rows, the norms
    mla = h * 1536 + 1536 * 128 * 192 + h * (512 + 64) + 512 * 128 * 256 + 128 * 128 * h
    block = mla + (8 + 1) * 3 * h * 2048 + 256 * h + 2 * h + 1536 + 512
    attention = 12 * 128 * (192 + 128) / 2 * (S + 1) / 2  # QK^T and PV, forward and backward, under the mask
    per_token = 6 * (3 * h + 2 * h * h) + 6 * h * V + 6 * block + attention
    assert with_mtp.model_flops - plain.model_flops == pytest.approx(per_token * tokens, rel=1e-9)
    assert "multi-token prediction" in MFU_CONVENTION


def test_mtp_adds_its_projection_and_a_second_head_pass_to_the_compute():
    m = models.get("deepseek-v3")
    ks = steptime.mtp_kernels(m, 1, 4096)
    gemm = {k.name: k.flops for k in ks if k.kind == "gemm"}
    assert gemm == {"mtp.proj": pytest.approx(2 * 4096 * 2 * 7168 * 7168),  # [T, 2d] x [2d, d]
                    "lm_head": pytest.approx(2 * 4096 * 7168 * 129280)}  # the shared head, again
    p = parallel.plan(**DEEPSEEK)
    t = steptime.microbatch(m, "h100", 1, 4096, ep=64, sequence_parallel=False)  # the plan's micro-batch
    assert t.mtp_forward_s == pytest.approx(steptime.kernels_time(ks, steptime.roofs("h100")))
    assert t.mtp_backward_s > 2 * t.head_forward_s  # the head's backward is twice its GEMM, and more
    plain = parallel.plan(**dict(DEEPSEEK, model=_without_mtp(m)))
    # one more MoE layer and the module's projection and head pass, per micro-batch, on 1/16 of the stages' time
    per_mb = t.moe_layer_s + t.mtp_s
    assert p.compute_s - plain.compute_s == pytest.approx(per_mb * p.microbatches / 16, rel=1e-9)
    assert p.hardware_flops > plain.hardware_flops and p.model_flops <= p.hardware_flops


# --- 11. TP traffic of MoE layers --------------------------------------------------------------------------------


def test_an_moe_layer_pays_attention_s_tp_pair_only():
    # Qwen3-235B, TP 4 with SP: every layer is an MoE layer; the MLP's all-gather and reduce-scatter are the
    # dispatcher's (none with ETP 1; over ETP with ETP 4, charged as 'etp'), so TP carries attention's pair:
    # forward and backward, 94 layers over 8 stages
    whole_experts = parallel.plan(**QWEN_FOLDED)
    tp = whole_experts.communication["tp"]
    assert tp["calls"] == pytest.approx(2 * 94 / 8 * whole_experts.microbatches)
    assert tp["bytes_per_call"] == pytest.approx(4 * 4096 * 4096 * 2 / 4)  # a micro-batch's [b s, d] in BF16
    split = parallel.plan(**dict(QWEN_FOLDED, ep=8, etp=4))
    assert split.communication["tp"]["calls"] == tp["calls"] and "etp" in split.communication
    # a dense model keeps two pairs a layer
    dense = parallel.plan("llama-3-70b", "h100", 64, 2**20, 8192, tp=4, pp=2, sequence_parallel=True)
    assert dense.communication["tp"]["calls"] == pytest.approx(2 * 2 * 80 / 2 * dense.microbatches)


def test_shared_experts_add_their_tp_pair_in_the_estimate_only():
    # Llama 4 Maverick: 24 dense and 24 MoE layers with a shared expert, which Megatron-Core runs as a TP-split MLP
    args = dict(model="llama-4-maverick", hw="h100", gpus=256, global_batch_tokens=512 * 8192, seq=8192, tp=4, pp=4,
                ep=16, etp=1, zero=1, sequence_parallel=True)
    bound, estimate = parallel.plan(**args), parallel.plan(**args, calibrated=True)
    m = bound.microbatches
    assert bound.communication["tp"]["calls"] == pytest.approx((2 * 24 + 1 * 24) * 2 / 4 * m)
    assert estimate.communication["tp"]["calls"] == pytest.approx((2 * 24 + 2 * 24) * 2 / 4 * m)


# --- 12. serving an interleaved mixture -------------------------------------------------------------------------


@pytest.mark.parametrize("calibrated", [False, True])
def test_maverick_serves_24_dense_and_24_moe_layers(calibrated):
    import dataclasses

    from roofkit.perf.inference import latency

    m = models.get("llama-4-maverick")
    assert (m.layers, m.moe_layers) == (48, 24)
    args = dict(batch=64, context=4096, gpus=8, calibrated=calibrated)
    step = latency.decode_step(m, "h100", **args)
    # the same shapes with every layer dense (d_ff 16,384), or every layer a mixture (128 experts + 1 shared)
    dense = dataclasses.replace(m, experts=0, experts_per_token=0, shared_experts=0, moe_d_ff=None, moe_layer_freq=1)
    mixture = dataclasses.replace(m, moe_layer_freq=1)
    dense_s = latency.decode_step(dense, "h100", **args).layers_s / 48
    moe_s = latency.decode_step(mixture, "h100", **args).layers_s / 48
    assert step.layer.time_s == pytest.approx(moe_s)
    assert step.layers_s == pytest.approx(24 * dense_s + 24 * moe_s)
    if calibrated:  # a balanced router reads many experts' weights: the MoE layers cost more than the dense ones
        assert moe_s > dense_s


# --- the alltoall dispatcher's permutations (Megatron-Core's token_dispatcher.py and moe_utils.py) ---------------


def test_permutation_bytes_count_the_dispatcher_s_row_copies_by_hand():
    T, d, k = 4096, 2048, 8  # Qwen3-30B-A3B: 4,096 tokens a GPU, 16 local experts at EP 8
    rows = T * k * d * 2
    b = experts.permutation_bytes(T, d, k, 16)
    # permute (T tokens read, T k rows written) + sort_chunks_by_idxs (T k rows read and written); the combine the
    # mirror: sort_chunks back, then unpermute (T k rows read, T tokens written)
    assert b["dispatch"] == (T * d * 2 + rows + 2 * rows, 2)
    assert b["combine"] == b["dispatch"]
    one = experts.permutation_bytes(T, d, k, 1)  # one local expert: no "Permutation 2"
    assert one["dispatch"] == (T * d * 2 + rows, 1)
    fp8 = experts.permutation_bytes(T, d, k, 16, dispatch_bytes=1)
    assert fp8["dispatch"][0] == b["dispatch"][0] / 2 and fp8["combine"] == b["combine"]


def test_permutation_time_is_the_floor_per_kernel_plus_the_bytes_at_hbm_rate():
    assert experts.permutation_time(7e9, 2, (7e12, 5e-6)) == pytest.approx(2 * 5e-6 + 1e-3)
    with pytest.raises(InvalidValue):
        experts.permutation_time(1e9, 1, (0, 5e-6))


QWEN30 = dict(model="qwen3-30b-a3b", hw="b200", gpus=8, global_batch_tokens=512 * 4096, seq=4096, tp=1, pp=1,
              ep=8, etp=1, zero=1, microbatches=64, recipe="mxfp8")  # Megatron-Bridge 25.11's DGX-B200 row


def test_the_estimate_charges_the_alltoall_dispatcher_s_permutations_and_the_bound_does_not():
    est = parallel.plan(**QWEN30, calibrated=True)
    ep = est.communication["ep"]
    roofs = est.roofs
    b = experts.permutation_bytes(4096, 2048, 8, 16)
    per_layer = sum(experts.permutation_time(*b[x], (roofs["bandwidth"], roofs["floor_s"])) for x in b)
    ops = 2 * 48 * 64  # dispatch + combine pairs: forward and backward, 48 MoE layers, 64 micro-batches
    assert ep["permute_s"] == pytest.approx(per_layer * ops)
    assert 0 < ep["permute_s"] < ep["time_s"]
    bound = parallel.plan(**QWEN30)
    assert "permute_s" not in bound.communication["ep"] or bound.communication["ep"]["permute_s"] == 0
    assert bound.step_time_s <= est.step_time_s
    hybrid = parallel.plan(**QWEN30, calibrated=True, dispatcher="deepep")  # DeepEP/HybridEP: not charged here
    assert hybrid.communication["ep"]["permute_s"] == 0


def test_the_estimate_pays_each_local_expert_and_the_bound_none():
    # Constants.moe_expert_s: seconds per local expert, MoE layer and micro-batch (forward and backward)
    from dataclasses import replace

    from roofkit.perf.parallel import calibration

    k = calibration.constants()
    base = dict(model="qwen3-30b-a3b", hw="h100", gpus=8, global_batch_tokens=64 * 4096, seq=4096, ep=8,
                microbatches=8, zero=1)
    bound, est = parallel.plan(**base), parallel.plan(**base, calibrated=True)
    assert bound.experts_host_s == 0.0 and "experts one by one" not in bound.breakdown
    M = models.get("qwen3-30b-a3b")
    expected = k.moe_expert_s * (M.experts / 8) * M.moe_layers * 8  # 16 experts a GPU, 48 layers, 8 micro-batches
    assert est.experts_host_s == pytest.approx(expected) and est.breakdown["experts one by one"] == expected
    assert est.step_time_s == pytest.approx(est.compute_s + est.communication_s + est.bubble_s + est.optimizer_s
                                            + expected)
    fewer = parallel.plan(**(base | {"ep": 4, "gpus": 8}), calibrated=True)  # twice the experts on each GPU
    assert fewer.experts_host_s == pytest.approx(2 * expected)
    staged = parallel.plan(**(base | {"pp": 2, "ep": 4}), calibrated=True)  # half the layers a stage
    assert staged.experts_host_s == pytest.approx(fewer.experts_host_s / 2)
    unpaid = parallel.plan(**(base | {"pp": 2, "ep": 4}), calibrated=True,
                           constants=replace(k, moe_expert_s=0.0))
    fill = (staged.pp - 1) / staged.virtual_stages * staged.experts_host_s / staged.microbatches
    assert staged.bubble_s == pytest.approx(unpaid.bubble_s + fill)  # the pipeline's fill and drain pay it too
    dense = parallel.plan(model="llama-3-8b", hw="h100", gpus=8, global_batch_tokens=64 * 4096, seq=4096,
                          calibrated=True)
    assert dense.experts_host_s == 0.0
    assert json.loads(json.dumps(est.to_dict()))["experts_host_s"] == pytest.approx(expected)


def test_a_run_with_one_fused_grouped_gemm_sets_the_cost_per_expert_to_zero(capsys):
    from roofkit.perf.parallel import calibration

    base = dict(model="qwen3-30b-a3b", hw="h100", gpus=8, global_batch_tokens=64 * 4096, seq=4096, ep=8, zero=1,
                calibrated=True)
    fitted, fused = parallel.plan(**base), parallel.plan(**base, moe_expert_s=0.0)
    assert fused.experts_host_s == 0.0 and fused.constants["moe_expert_s"] == 0.0
    assert fitted.step_time_s - fused.step_time_s == pytest.approx(fitted.experts_host_s)
    assert fitted.constants["moe_expert_s"] == calibration.constants().moe_expert_s
    doubled = parallel.plan(**base, moe_expert_s=2 * calibration.constants().moe_expert_s)
    assert doubled.experts_host_s == pytest.approx(2 * fitted.experts_host_s)
    for bad, match in ((dict(moe_expert_s=-1e-3), "from 0"), (dict(moe_expert_s=True), "from 0"),
                       (dict(moe_expert_s=1e-3, calibrated=False), "pass calibrated=True")):
        with pytest.raises(InvalidValue, match=match):
            parallel.plan(**(base | bad))
    with pytest.raises(InvalidValue, match="has no experts"):
        parallel.plan("llama-3-8b", "h100", 8, 64 * 4096, 4096, calibrated=True, moe_expert_s=0.0)
    argv = ["parallel", "--model", "qwen3-30b-a3b", "--hw", "h100", "--gpus", 8, "--global-batch-tokens", 64 * 4096,
            "--seq", 4096, "--ep", 8, "--zero", 1, "--calibrated"]
    data = json.loads(run(capsys, *argv, "--moe-expert-s", 0, "--json")[1])
    assert data["experts_host_s"] == 0.0 and data["step_time_s"] == pytest.approx(fused.step_time_s)
    code, out, err = run(capsys, *argv, "--moe-expert-s", -1)
    assert code == 2 and out == "" and "moe-expert-s must be a number, 0 or more" in err
