"""The training bound is a bound: never below its busiest link or its compute, never an MFU above 1.

A bound step hides each link's traffic behind compute and the pipeline's idle bubble, but
never behind communication itself; and model FLOPs count what the kernels must execute
(attention under the causal mask, no embedding lookup), so the bound's MFU stays below 1.
"""

import pytest

from roofkit import parallel
from roofkit.catalogs import models

LAYOUTS = [
    # (model, hw, gpus, batch tokens, seq, options): dense and MoE, TP inside and across nodes, long sequences
    ("deepseek-v3", "h100", 2048, 15360 * 4096, 4096, dict(tp=1, pp=16, ep=64, zero=1)),
    ("llama-3-70b", "h100", 1024, 16 * 2**20, 8192, dict(tp=32, pp=4, sequence_parallel=True)),
    ("llama-3-70b", "h100", 1024, 4 * 2**20, 8192, dict(tp=8, pp=4, zero=1, virtual_stages=5)),
    ("llama-3.1-405b", "h100", 16384, 16 * 2**20, 131072, dict(tp=8, cp=16, pp=16, zero=1)),
    ("llama-3-8b", "h100", 64, 4 * 2**20, 8192, dict(tp=1, pp=1, zero=3)),
    ("gpt-3-175b", "a100", 1024, 1536 * 2048, 2048, dict(tp=8, pp=16, virtual_stages=3, recompute="full")),
    ("llama-3-8b", "h100", 8, 2**20, 131072, dict(tp=8, sequence_parallel=True)),
    # experts at scale: DeepSeek-V3 as its report trained it (FP8 blockwise, MTP, node-limited FP8 dispatch), Qwen3
    # with TP 2 and whole experts (ETP 1), Llama 4 Maverick's shared experts under TP
    ("deepseek-v3", "h800", 2048, 15360 * 4096, 4096, dict(pp=16, ep=64, etp=1, zero=1, recipe="fp8-blockwise",
                                                           max_nodes_per_token=4, dispatch_dtype="fp8")),
    ("qwen3-235b-a22b", "h100", 256, 8388608, 4096, dict(tp=2, pp=8, ep=32, etp=1, zero=1, microbatches=128,
                                                         virtual_stages=4, sequence_parallel=True, dtype="fp8")),
    ("llama-4-maverick", "h100", 256, 512 * 8192, 8192, dict(tp=4, pp=4, ep=16, etp=1, zero=1,
                                                             sequence_parallel=True)),
]


def _busiest_link_s(plan) -> float:
    busy = {}
    for c in plan.communication.values():
        busy[c["level"]] = busy.get(c["level"], 0.0) + c["time_s"]
    return max(busy.values(), default=0.0)


@pytest.mark.parametrize("model, hw, gpus, tokens, seq, options", LAYOUTS, ids=lambda x: str(x)[:20])
def test_a_bound_step_is_never_below_its_busiest_link_nor_its_compute(model, hw, gpus, tokens, seq, options):
    p = parallel.plan(model, hw, gpus, tokens, seq, **options)
    assert p.step_time_s >= _busiest_link_s(p) * (1 - 1e-12)
    assert p.step_time_s >= p.compute_s
    # and the bubble of the bound holds no communication: (p - 1)/v of one micro-batch's compute per stage
    if p.pp > 1:
        assert p.bubble_s == pytest.approx((p.pp - 1) / p.virtual_stages * p.compute_s / p.microbatches)


@pytest.mark.parametrize("model, hw, gpus, tokens, seq, options", LAYOUTS, ids=lambda x: str(x)[:20])
def test_the_bound_never_prints_an_mfu_above_one(model, hw, gpus, tokens, seq, options):
    p = parallel.plan(model, hw, gpus, tokens, seq, **options)
    assert 0 < p.mfu <= 1
    assert p.model_flops <= p.hardware_flops  # the kernels execute at least what the model counts
    assert p.hfu <= 1


def test_tensor_parallelism_across_nodes_waits_for_its_network():
    """TP 32 spans four nodes: each GPU's NIC carries more than the compute window, so the step is the link's."""
    p = parallel.plan("llama-3-70b", "h100", 1024, 16 * 2**20, 8192, tp=32, pp=4, sequence_parallel=True)
    link = _busiest_link_s(p)
    assert link > p.compute_s + p.bubble_s  # the case a window made partly of traffic got wrong
    assert p.step_time_s == pytest.approx(link + p.optimizer_s)


def test_model_flops_count_attention_under_the_causal_mask():
    """At 128K tokens the causal count is about half PaLM's attention term: independent arithmetic."""
    m = models.get("llama-3-8b")
    p = parallel.plan("llama-3-8b", "h100", 8, 2**20, 131072, tp=8, sequence_parallel=True)
    T = 131072
    dense = 6 * m.active_params
    attention = 12 * m.layers * m.heads * m.head_dim * (T + 1) / 2  # 12 L H Q, over T(T+1)/2 pairs per T tokens
    assert p.model_flops == pytest.approx((dense + attention) * 2**20, rel=1e-12)
    assert "causal" in p.to_dict()["mfu_convention"]
