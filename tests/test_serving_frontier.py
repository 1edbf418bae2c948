"""The frontier serving rows, attention data parallelism with expert parallelism, and what an engine pays around
a mixture of experts' GEMMs.

Every expected figure is worked out here from the models' published shapes (DeepSeek-V3 report, arXiv:2412.19437,
section 4.2: d = 7168, 61 layers of which the first 3 dense, 256 routed experts of width 2048, 8 per token, a latent
of 512 + 64 per token; Qwen3-30B-A3B's config.json: 48 layers, d = 2048, 128 experts of width 768, 8 per token),
from the sources the code cites (TensorRT-LLM's DeepSeek-R1 blog03 and blog10, DeepGEMM's README), or from the
published rows themselves: none is read back from the code.
"""

import json
import math
from dataclasses import replace
from importlib import resources

import pytest

from roofkit import comms
from roofkit.catalogs import hardware, links, models
from roofkit.errors import InvalidValue, RoofkitError
from roofkit.perf.inference import engine, latency, memory, published, serving, weights

from helpers import run, run_json

D, LAYERS, DENSE, EXPERTS, WIDTH, TOP_K, LATENT = 7168, 61, 3, 256, 2048, 8, 512 + 64  # DeepSeek-V3


def _op(step, name):
    return next(op for op in step.layer.ops if op.name == name)


# --- the rows -------------------------------------------------------------------------------------------------------


def test_the_frontier_rows_load_with_their_layouts():
    fit, held = published.frontier(), published.frontier_heldout()
    assert (len(fit), len(held)) == (18, 15)
    assert published.runs() != fit and published.SETS["fitting"] is published.runs  # t_step's fit keeps to serving.json
    text = resources.files("roofkit").joinpath("data/published/serving_frontier_heldout.json").read_text("utf-8")
    for row, run_ in zip(json.loads(text), held):
        assert run_.attention_dp == row.get("attention_dp", False) and run_.ep == row.get("ep")
        if "published_tokens_per_s_per_gpu" in row:  # the per-GPU table: published is that times the GPUs
            assert row["published"] == row["published_tokens_per_s_per_gpu"] * row["gpus"], row["case"]
    dep = [r for r in held if "DEP" in r.case]
    assert len(dep) == 8 and all(r.attention_dp and r.ep == r.tp == r.gpus for r in dep)


def test_no_frontier_row_beats_its_bound():
    for run_ in published.frontier() + published.frontier_heldout():
        assert published.speed(run_, published.predict(run_)) >= 1, run_.case


# --- attention data parallelism: memory ----------------------------------------------------------------------------


def test_data_parallel_attention_keeps_one_copy_of_the_cache_and_each_gpu_a_copy_of_all_but_the_experts():
    kw = dict(gpus=8, context=3072, batch=1, weights_dtype="fp4", kv_dtype="fp8", tp=8, engine="tensorrt-llm")
    tp8 = memory.plan("deepseek-v3", "b200", **kw)
    dep8 = memory.plan("deepseek-v3", "b200", ep=8, attention_dp=True, **kw)
    # the routed experts: 58 expert layers x 256 experts x 3 matrices of 7168 x 2048, MXFP4 (0.5 + 1/32 bytes)
    experts = (LAYERS - DENSE) * EXPERTS * 3 * D * WIDTH * (0.5 + 1 / 32)
    everything = weights.weights_bytes("deepseek-v3", "fp4")
    assert memory.routed_bytes("deepseek-v3", "fp4") == pytest.approx(experts)
    assert dep8.weights_bytes == pytest.approx(8 * (everything - experts) + experts)
    # "the duplication factor is equal to the TP group size, thus 8x for TP8" (TensorRT-LLM blog03, ADP)
    assert (tp8.kv_replication, dep8.kv_replication) == (8.0, 1.0)
    capacity = 8 * hardware.get("b200").capacity_bytes
    free = capacity - 0.1 * (capacity - dep8.weights_bytes) - dep8.weights_bytes  # TensorRT-LLM: 90% of what's left
    per_sequence = 3072 * LAYERS * LATENT * 1  # FP8: one byte an element
    assert dep8.max_batch == math.floor(free / per_sequence)
    assert 7 < dep8.max_batch / tp8.max_batch <= 8  # the more copies of the rest cost a little of the 8x
    assert memory.routed_bytes("llama-3-70b") == 0


def test_a_dep_step_gives_each_gpu_its_own_sequences_latent_cache():
    B, short, long_ = 64, 1000, 3000
    kw = dict(gpus=8, tp=8, dtype="fp8")

    def per_token(**layout):  # attention's bytes per more cached token, one GPU, one layer
        a, b = (latency.decode_step("deepseek-v3", "h200", B, c, **kw, **layout) for c in (short, long_))
        return (_op(b, "attn").bytes - _op(a, "attn").bytes) / (long_ - short)

    assert per_token() == B * LATENT  # tensor parallelism: every GPU reads every sequence's latent
    assert per_token(ep=8, attention_dp=True) == B / 8 * LATENT  # data-parallel: its own eighth
    # and whole heads: the 128 heads' absorbed decode FLOPs of its 8 sequences (DeepSeek-V2, section 2.1.2)
    dep = latency.decode_step("deepseek-v3", "h200", B, short, ep=8, attention_dp=True, **kw)
    assert _op(dep, "attn").flops == pytest.approx(
        B / 8 * (2 * 128 * 128 * 512 + 128 * short * (2 * LATENT + 5 + 2 * 512) + 2 * 128 * 512 * 128))
    assert dep.attention_dp and dep.ep == 8 and dep.communication_s == 0.0  # the bound: experts local, nothing sent


def test_each_expert_parallel_gpu_does_an_ep_th_of_the_routed_work():
    B, ep = 256, 4
    step = latency.decode_step("deepseek-v3", "b200", B, 2048, gpus=4, tp=4, ep=ep, attention_dp=True,
                               dtype="fp8")
    up = _op(step, "moe.up")
    # the bound: the replica's 256 tokens, each through 8 experts, all routed to the same 8 (the fewest weights);
    # a quarter of the rows' FLOPs and of the bytes on each GPU, FP8 (one byte an element)
    assert up.flops == pytest.approx(2 * B * TOP_K * D * WIDTH / ep)
    assert up.bytes == pytest.approx((B * TOP_K * D + TOP_K * D * WIDTH + B * TOP_K * WIDTH) / ep)
    # attention's projections are the GPU's own 64 sequences' through whole weights: W^DKV and W^KR, 7168 x 576
    assert _op(step, "kv.down").flops == pytest.approx(2 * B / 4 * D * LATENT)


def test_the_estimate_gathers_the_tokens_in_the_experts_format_and_scatters_the_outputs():
    B, t = 512, 8
    step = latency.decode_step("deepseek-v3", "b200", B, 2048, gpus=t, tp=t, ep=t, attention_dp=True,
                               dtype="fp4", kv_dtype="fp8", calibrated=True)
    link = links.scale_up(hardware.get("b200")).key
    # TensorRT-LLM's AllGather + ReduceScatter: every token's d elements in MXFP4 with its 8 int32 ids and FP32
    # weights, all-gathered; the experts' BF16 partial sums reduce-scattered; once per expert layer (58)
    gathered = comms.all_gather(B * (D * (0.5 + 1 / 32) + TOP_K * 8), t, link, calibrated=True).time_s
    scattered = comms.reduce_scatter(B * D * 2, t, link, calibrated=True).time_s
    assert step.communication_s == pytest.approx((LAYERS - DENSE) * (gathered + scattered))


def test_the_estimate_waits_for_the_gpu_with_a_whole_prompt():
    # blog10: "the iteration time is dominated by the slowest rank"; a step carrying half a prompt on average
    # carries a whole one on one of the 4 GPUs every other step: half a prompt's work at the slowest, not an eighth
    B, P, prompts = 128, 1000, 0.5
    kw = dict(gpus=4, tp=4, ep=4, attention_dp=True, dtype="fp8", kv_dtype="fp8")
    # and half the steps carry a prompt, as uneven as TensorRT-LLM measured such steps (round robin: 54.11% of the
    # busiest GPU's tokens on the mean one): the balance moves halfway from 1 to 0.5411
    balance = 1 - (1 - engine.ADP_BALANCE["round-robin"]) * prompts
    for calibrated, own, share in ((False, B / 4, prompts / 4), (True, B / 4 / balance, prompts)):
        step = latency.step("deepseek-v3", "h200", B, 1500, prompts, P, calibrated=calibrated, **kw)
        assert _op(step, "kv.down").flops == pytest.approx(2 * (own + share * P) * D * LATENT), calibrated


def test_the_estimate_gives_the_busiest_gpu_the_measured_share_of_a_mixed_step():
    # TensorRT-LLM's blog10 (DeepSeek-V3, ADP 8, EP 8): avg / max tokens a rank 54.11% with round robin, 84.33% with
    # the context wait; a step that only decodes is even
    B, P, prompts, t = 1024, 1000, 6.0, 4
    kw = dict(gpus=t, tp=t, ep=t, attention_dp=True, dtype="fp8", kv_dtype="fp8", calibrated=True)
    for schedule in ("round-robin", "context-wait", "full"):
        cal = replace(engine.for_engine("tensorrt-llm"), adp_schedule=schedule)
        step = latency.step("deepseek-v3", "h200", B, 1500, prompts, P, calibration=cal, **kw)
        mean = B / t + prompts / t * P
        assert _op(step, "kv.down").flops == pytest.approx(2 * mean / engine.ADP_BALANCE[schedule] * D * LATENT)
        decode = latency.step("deepseek-v3", "h200", B, 1500, calibration=cal, **kw)
        assert _op(decode, "kv.down").flops == pytest.approx(2 * B / t * D * LATENT)
    slow, even = (latency.step("deepseek-v3", "h200", B, 1500, prompts, P, calibration=replace(
        engine.for_engine("tensorrt-llm"), adp_schedule=s), **kw).time_s for s in ("round-robin", "full"))
    assert slow > even
    with pytest.raises(InvalidValue, match="adp_schedule must be one of round-robin, context-wait, full"):
        replace(engine.for_engine("tensorrt-llm"), adp_schedule="fair")
    rows = [r for r in published.frontier_heldout() if r.adp_schedule]  # the rows that set attention_dp_config
    assert rows and all(r.model == "deepseek-v3" and r.adp_schedule == "context-wait" for r in rows)


# --- what the estimate pays around the experts' GEMMs ----------------------------------------------------------------


def test_routing_permutation_and_grouped_gemms_by_hand():
    T, d, E, k, f = 256, 2048, 128, 8, 768  # Qwen3-30B-A3B, a decode step of 256 sequences on one B200
    trt = latency.decode_step("qwen3-30b-a3b", "b200", T, 2048, dtype="fp4", kv_dtype="fp8", calibrated=True,
                              calibration=engine.for_engine("tensorrt-llm"))
    vllm = latency.decode_step("qwen3-30b-a3b", "b200", T, 2048, dtype="fp4", kv_dtype="fp8", calibrated=True,
                               calibration=engine.for_engine("vllm"))
    # top-k of 128 FP32 logits a token, 8 int32 ids and 8 FP32 weights written
    assert _op(trt, "moe.topk").bytes == T * E * 4 + T * k * 8
    # the sort reads every (token, expert) pair and writes their maps; TensorRT-LLM also copies the 2,048 rows
    # (BF16 between kernels in the estimate) into expert order, read and written; vLLM gathers them in its GEMM
    pairs = T * k * 8 + T * k * 8
    assert _op(vllm, "moe.permute").bytes == pairs
    assert _op(trt, "moe.permute").bytes == pairs + T * k * d * 2 * 2
    bound = latency.decode_step("qwen3-30b-a3b", "b200", T, 2048, dtype="fp4", kv_dtype="fp8")
    assert not {"moe.topk", "moe.permute"} & {op.name for op in bound.layer.ops}  # none of it in the bound
    # the grouped GEMM: 256 x 8 rows over the 128 (1 - (1 - 8/128)^256) experts they reach, 16 rows each, below
    # DeepGEMM's smallest published M (256 rows, 4 groups): its share there, the mean of its two shapes' rates over
    # their largest-M ones: (932 / 1346 + 815 / 1214) / 2
    touched = E * (1 - (1 - k / E) ** T)
    assert T * k / touched < 256
    share = (932 / 1346 + 815 / 1214) / 2
    roofs = engine.roofs("b200", "fp4", True, engine.for_engine("tensorrt-llm"))
    up = _op(trt, "moe.up")
    assert up.time_s == pytest.approx(up.flops / (roofs.peak_flops * share) + up.bytes / roofs.bandwidth
                                      + roofs.floor_s)


def test_the_bound_keeps_the_roof_for_grouped_gemms():
    step = latency.decode_step("qwen3-30b-a3b", "b200", 256, 2048, dtype="fp4")
    up = _op(step, "moe.up")
    acc = hardware.get("b200")
    assert up.time_s == pytest.approx(max(up.flops / acc.peak("fp4"), up.bytes / acc.memory_bandwidth()))


# --- the serving API, the command line, and bad input ---------------------------------------------------------------


def test_serve_and_the_command_line_take_the_dep_layout(capsys):
    s = serving.serve("qwen3-235b-a22b", "h200", gpus=8, tp=8, ep=8, attention_dp=True, dtype="fp8",
                      input_tokens=1000, output_tokens=1000, engine="tensorrt-llm")
    assert s.memory.attention_dp and s.memory.ep == 8 and s.memory.kv_replication == 1
    data = run_json(capsys, "serve", "--model", "qwen3-235b-a22b", "--hw", "h200", "--gpus", 8, "--tp", 8, "--ep", 8,
                    "--attention-dp", "--dtype", "fp8", "--input-tokens", 1000, "--output-tokens", 1000,
                    "--engine", "tensorrt-llm")
    assert (data["ep"], data["attention_dp"], data["max_batch"]) == (8, True, s.memory.max_batch)
    assert data["tokens_per_s"] == pytest.approx(s.tokens_per_s)
    code, out, err = run(capsys, "serve", "--model", "qwen3-235b-a22b", "--hw", "h200", "--gpus", 8, "--tp", 8,
                         "--ep", 3, "--context", 4096)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "ep must divide tp = 8" in err and "got 3; choose among 1, 2, 4, 8" in err


@pytest.mark.parametrize("options, message", [
    (dict(model="llama-3-70b", tp=8, attention_dp=True), r"attention_dp spreads a mixture of experts' experts .*"
                                                         r"Llama 3 70B has none"),
    (dict(model="llama-3-70b", tp=8, ep=2), r"ep = 2 spreads .* Llama 3 70B has none"),
    (dict(model="qwen3-235b-a22b", gpus=6, tp=6, ep=6, attention_dp=True), r"ep must divide tp = 6 .* 128 experts "
                                                                            r".* got 6; choose among 1, 2\."),
    (dict(model="qwen3-235b-a22b", tp=4, pp=2, attention_dp=True), r"attention_dp with pp = 2"),
    (dict(model="qwen3-235b-a22b", tp=8, attention_dp="yes"), r"attention_dp must be True or False; got 'yes'"),
])
def test_bad_layouts_name_the_value_and_the_choices(options, message):
    with pytest.raises(InvalidValue, match=message):
        memory.layout(options.pop("model"), "h200", options.pop("gpus", 8), **options)


# --- the engine's host: a step lasts as long as the host's work for its requests ----------------------------------

HOST_S = 45.11e-3 / 1536  # TensorRT-LLM pull request 10273: 45.11 ms a host step for 1,536 requests a rank (GB200)


def test_a_trtllm_step_with_thousands_of_requests_waits_for_its_host():
    kw = dict(dtype="nvfp4", kv_dtype="fp8", calibrated=True)
    trt = engine.for_engine("tensorrt-llm")
    few = latency.step("qwen3-30b-a3b", "b200", 128, 1500, calibration=trt, **kw)
    many = latency.step("qwen3-30b-a3b", "b200", 4096, 1500, calibration=trt, **kw)
    gpu = lambda s: s.layers_s + s.output_s + s.communication_s + s.engine_s  # noqa: E731
    # 128 requests: 3.8 ms of host work under a GPU step of milliseconds more; 4,096: 120 ms, above the GPU's
    assert few.host_s == pytest.approx(128 * HOST_S) and few.time_s == gpu(few) > few.host_s
    assert many.host_s == pytest.approx(4096 * HOST_S) and many.time_s == many.host_s > gpu(many)
    assert any(n.startswith("host-bound") for n in many.notes) and not any("host" in n for n in few.notes)
    # host-bound, tokens per second are one over the host's time a request, whatever the batch
    assert many.tokens_per_s == pytest.approx(1 / HOST_S)
    # an engine without a published host cost, and the bound, pay none
    vllm = latency.step("qwen3-30b-a3b", "b200", 4096, 1500, calibration=engine.for_engine("vllm"), **kw)
    bound = latency.step("qwen3-30b-a3b", "b200", 4096, 1500, dtype="nvfp4", kv_dtype="fp8")
    assert vllm.host_s == bound.host_s == 0 and vllm.time_s == gpu(vllm)


def test_under_data_parallel_attention_each_gpus_host_serves_its_own_requests():
    kw = dict(gpus=4, tp=4, ep=4, attention_dp=True, dtype="nvfp4", kv_dtype="fp8", calibrated=True,
              calibration=engine.for_engine("tensorrt-llm"))
    s = latency.step("qwen3-235b-a22b", "b200", 4000, 1500, 4.0, 1000, **kw)
    # 1,000 sequences a GPU and the busiest GPU's prompt (a whole one: 4 prompts over 4 GPUs, round robin)
    assert s.host_s == pytest.approx((4000 / 4 + 1) * HOST_S)


def test_the_host_brings_qwen3_30b_on_one_b200_to_its_published_throughput():
    # TensorRT-LLM's 1,000 / 1,000 and 1,024 / 1,024 rows of Qwen3-30B-A3B on one B200 hold ~2,100 requests: 62 ms
    # of host work a step against 46 ms of GPU; the estimate was 1.7-1.8x the published figure without the host
    rows = [r for r in published.frontier() + published.frontier_heldout()
            if r.model == "qwen3-30b-a3b" and r.hw == "b200" and r.isl in (1000, 1024)]
    assert len(rows) == 2
    for run_ in rows:
        speed = published.speed(run_, published.predict(run_, True))
        assert 1 <= speed < 1.35, (run_.case, speed)
        assert published.speed(run_, published.predict(run_)) > 3  # the bound pays no host


def test_the_command_line_takes_the_schedule_of_data_parallel_attention(capsys):
    base = ("serve", "--model", "deepseek-v3", "--hw", "b200", "--gpus", 4, "--tp", 4, "--ep", 4, "--attention-dp",
            "--input-tokens", 1000, "--output-tokens", 1000, "--dtype", "nvfp4", "--kv-dtype", "fp8",
            "--engine", "tensorrt-llm", "--calibrated")
    default = run_json(capsys, *base)["tokens_per_s"]
    assert run_json(capsys, *base, "--adp-schedule", "round-robin")["tokens_per_s"] == default
    balanced = run_json(capsys, *base, "--adp-schedule", "full")["tokens_per_s"]
    assert balanced > default * 1.1  # the busiest GPU carries 1 / 0.877 of the mean, not 1 / 0.5411
    code, out, err = run(capsys, *base[:12], "--input-tokens", 1000, "--output-tokens", 1000, "--adp-schedule", "full")
    assert code == 2 and err.count("roofkit: error:") == 1 and "--attention-dp and --calibrated" in err
    code, out, err = run(capsys, *base, "--adp-schedule", "even")
    assert code == 2 and "round-robin" in err and "Traceback" not in err


# --- what a published offline run holds in flight, and how its MoE columns were laid out ------------------------------


def _rows(name):
    return json.loads(resources.files("roofkit").joinpath(f"data/published/{name}").read_text("utf-8"))


def test_every_perf_overview_row_says_how_many_requests_it_ran():
    # trtllm-bench queues every request of its dataset at once: the page's table of $num_requests per ISL/OSL is the
    # most a run ever holds in flight. The same release's rows in two files must read the same table.
    rows = [r for name in ("serving_heldout.json", "serving_frontier.json", "serving_frontier_heldout.json")
            for r in _rows(name)
            if r["kind"] == "throughput" and ("00f37686" in r["source"] or "03e27c7d" in r["source"])]
    assert len(rows) == 91 + 18 + 12
    table = {}
    for r in rows:
        assert r.get("requests") or r.get("batch"), r["case"]
        if r.get("requests") and "00f37686" in r["source"]:
            assert table.setdefault((r["isl"], r["osl"]), r["requests"]) == r["requests"], r["case"]
    assert table[(1000, 1000)] == 3000 and table[(128, 128)] == 30000 and table[(20000, 2000)] == 1000
    for r in rows:  # the later release's 1000/1000 rows take the earlier table's count, and say so
        if "03e27c7d" in r["source"] and (r["isl"], r["osl"]) == (1000, 1000) and not r.get("batch"):
            assert r["requests"] == table[(1000, 1000)] and "00f37686" in r["requests_source"], r["case"]


def test_a_run_never_holds_more_requests_than_it_has():
    run_ = next(r for r in published.frontier_heldout() if "deepseek-v3 h200 DEP8" in r.case)
    assert run_.requests == 3000 and run_.batch is None
    fits = memory.plan(run_.model, run_.hw, run_.gpus, published.Workload(run_.isl, run_.osl).footprint, 1,
                       run_.dtype, run_.kv_dtype, tp=run_.tp, ep=run_.ep, attention_dp=True,
                       engine="tensorrt-llm").max_batch
    assert fits > 2 * run_.requests  # an FP8 latent cache holds far more than the run brings
    assert published._batch(run_) == run_.requests
    held = published.predict(run_, True)
    unbounded = published.predict(replace(run_, requests=None), True)  # as many as fit: the old reading
    assert unbounded > 1.2 * held  # thousands more in flight would have made it much faster
    assert published.speed(run_, published.predict(run_)) >= 1  # the bound at that batch is still a bound


def test_the_perf_overview_moe_columns_labelled_tp_are_tensor_parallel_with_experts_over_tp():
    rows = [r for name in ("serving_heldout.json", "serving_frontier.json") for r in _rows(name)
            if "00f37686" in r["source"] and r["model"] in ("qwen3-235b-a22b", "llama-4-scout")]
    assert len(rows) == 35 + 2
    for r in rows:
        assert f" TP{r['tp']} " in r["case"] and r["ep"] == r["tp"] and not r.get("attention_dp"), r["case"]
        assert "StrictBaseModel" in r["layout_source"], r["case"]


# --- attention computes in its own precision -------------------------------------------------------------------------


@pytest.mark.parametrize("hw, dtype, kv, expected", [
    ("b200", "nvfp4", "fp8", "fp8"),   # 4-bit weights, an FP8 cache: FP8 attention
    ("b200", "nvfp4", "bf16", "bf16"),  # a 16-bit cache: 16-bit attention
    ("h200", "fp8", None, "fp8"),
    ("h200", "bf16", "fp8", "bf16"),  # 16-bit math keeps its precision
    ("a100", "int8", "int8", "bf16"),  # no FP8 tensor cores, and no 8-bit cache format it attends in
])
def test_attention_computes_in_the_caches_precision_never_in_four_bits(hw, dtype, kv, expected):
    assert engine.attention_precision(hw, dtype, kv) == expected


def test_a_four_bit_model_attends_at_the_fp8_rate():
    b200 = hardware.get("b200")
    for calibrated in (False, True):
        r = engine.roofs("b200", "nvfp4", calibrated, kv_dtype="fp8")
        assert r.peak_flops == b200.peak("fp4", achievable=calibrated)
        assert r.attention_flops == b200.peak("fp8", achievable=calibrated) < r.peak_flops
    # a prompt of 8,192 tokens of Llama 3 70B in NVFP4: its fused attention kernel is compute-bound even at the FP8
    # rate, so its time is the FP8 rate's, not the FP4 one's
    step = latency.step("llama-3-70b", "b200", prompts=1, prompt=8192, dtype="nvfp4", kv_dtype="fp8")
    fused = [k for k in latency.layertime.kernels("llama-3-70b", 1, 8192, None, "nvfp4", kv_dtype="fp8")
             if k.kind == "attention"]
    flops, nbytes = sum(k.flops for k in fused), sum(k.bytes for k in fused)
    assert flops / b200.peak("fp8") > nbytes / b200.memory_bandwidth()
    assert _op(step, "attn").time_s == pytest.approx(flops / b200.peak("fp8"))
    # the H200's measured BF16 attention rate is what a calibrated 16-bit cache attends at
    h200 = engine.roofs("h200", "fp8", True, kv_dtype="bf16")
    assert h200.attention_flops == hardware.get("h200").attention_peak("bf16")


# --- a checkpoint that keeps some matrices in a format of their own ---------------------------------------------------


def test_a_weights_format_names_its_families_and_refuses_others():
    fmt = weights.weight_format("nvfp4, attention=bf16, attention.out=nvfp4")
    assert fmt.name == "nvfp4,attention=bf16,attention.out=nvfp4"
    assert fmt.bytes_per_weight == 0.5 + 1 / 16  # NVFP4: an E4M3 scale per 16 weights
    assert (fmt.of("attention").name, fmt.of("attention.out").name, fmt.of("experts").name) == ("bf16", "nvfp4", "nvfp4")
    assert weights.weight_format("fp4,attention=bf16").of("attention.out").name == "bf16"  # W^O goes with attention
    for bad, named in (("fp4,attn=bf16", "attention, attention.out"), ("fp4,attention=bf17", "bf16"),
                       ("fp4,attention", "family=precision")):
        with pytest.raises(RoofkitError, match=named):
            weights.weight_format(bad)


def test_attention_weights_in_bf16_cost_their_bytes_and_the_bf16_rate():
    ds = models.get("deepseek-v3")
    # DeepSeek-V3's attention per layer (report, section 2.1.1; d_c' = 1536, d_c = 512, 128 heads of 128 + 64, W^O)
    proj = D * 1536 + 1536 * 128 * (128 + 64) + D * (512 + 64) + 512 * 128 * (128 + 128)
    out = 128 * 128 * D
    assert ds.attention_matrices == (proj, out)
    fp4, bf16 = weights.FORMATS["fp4"].bytes_per_weight, 2
    assert weights.weights_bytes(ds, "fp4,attention=bf16") - weights.weights_bytes(ds, "fp4") == pytest.approx(
        LAYERS * (proj + out) * (bf16 - fp4))
    assert weights.weights_bytes(ds, "fp4,attention=bf16,attention.out=fp4") - weights.weights_bytes(ds, "fp4") == \
        pytest.approx(LAYERS * proj * (bf16 - fp4))
    # a prompt of 8,192 tokens: the latent's up-projection of the queries, compute-bound, runs at the BF16 rate
    b200 = hardware.get("b200")
    kw = dict(prompts=1, prompt=8192, dtype="nvfp4", kv_dtype="fp8")
    mixed = latency.step("deepseek-v3", "b200", weights_dtype="nvfp4,attention=bf16", **kw)
    plain = latency.step("deepseek-v3", "b200", **kw)
    flops = 2 * 8192 * 1536 * 128 * (128 + 64)
    assert _op(mixed, "q.up").time_s == pytest.approx(flops / b200.peak("bf16"))
    assert _op(plain, "q.up").time_s == pytest.approx(flops / b200.peak("fp4"))
    assert _op(mixed, "moe.up").time_s == _op(plain, "moe.up").time_s  # the experts keep FP4
    held = [r for r in published.frontier_heldout() if r.model == "deepseek-v3" and r.dtype == "nvfp4"]
    assert len(held) == 5 and all(r.weights.startswith("nvfp4,attention=bf16") for r in held)
    assert all(published.speed(r, published.predict(r)) >= 1 for r in held)


def test_the_command_line_takes_a_mixed_weights_format(capsys):
    base = ("serve", "--model", "deepseek-v3", "--hw", "b200", "--gpus", 4, "--tp", 4, "--ep", 4, "--attention-dp",
            "--input-tokens", 1000, "--output-tokens", 1000, "--dtype", "nvfp4", "--kv-dtype", "fp8")
    plain = run_json(capsys, *base)
    mixed = run_json(capsys, *base, "--weights-dtype", "nvfp4,attention=bf16")
    assert mixed["weights_dtype"] == "nvfp4,attention=bf16"
    assert mixed["weights_bytes"] > plain["weights_bytes"] and mixed["tokens_per_s"] < plain["tokens_per_s"]
    code, out, err = run(capsys, *base, "--weights-dtype", "nvfp4,attn=bf16")
    assert code == 2 and err.count("roofkit: error:") == 1 and "attention.out" in err and "Traceback" not in err


def test_nvfp4_and_mxfp4_weights_carry_their_own_scales():
    # NVFP4: an E4M3 scale per 16 elements; MXFP4 (OCP MX v1.0): an E8M0 scale per 32
    assert weights.weight_format("nvfp4").bytes_per_weight == 0.5 + 1 / 16
    assert weights.weight_format("mxfp4").bytes_per_weight == weights.weight_format("fp4").bytes_per_weight == 0.5 + 1 / 32
    m = models.get("llama-3-70b")
    extra = weights.weights_bytes(m, "nvfp4") - weights.weights_bytes(m, "mxfp4")
    assert extra == pytest.approx(m.layer_matrix_params * (1 / 16 - 1 / 32))
    plan = memory.plan(m, "b200", weights_dtype="nvfp4", kv_dtype="fp8")
    assert plan.weights_dtype == "nvfp4" and latency.decode_step(m, "b200", 8, 2048, dtype="nvfp4").time_s > \
        latency.decode_step(m, "b200", 8, 2048, dtype="nvfp4", weights_dtype="mxfp4").time_s
