"""roofkit serve: the contract of issues 12 and 20 (its JSON keys, its defaults, one line and exit 2 on bad input).

Numbers are checked by hand (Llama 3 70B in BF16 on 8 x H100 at 8,192 tokens) and against the
library's own functions, which tests/test_inference.py checks against published figures.
"""

import json
import math
import subprocess
import sys

import pytest

from roofkit.catalogs import hardware, models
from roofkit.perf.inference import latency

from helpers import run, run_json

CONTRACT = {"weights_bytes", "kv_bytes_per_token", "kv_bytes_per_sequence", "max_batch", "fits", "tpot_s",
            "ttft_s", "tokens_per_s", "reserve_bytes", "batch", "capacity_bytes"}


def test_llama_3_70b_on_an_8_gpu_h100_node(capsys):
    data = run_json(capsys, "serve", "--model", "llama-3-70b", "--hw", "h100", "--gpus", "8", "--context", "8192")
    assert CONTRACT <= set(data)
    params = models.get("llama-3-70b").params
    assert data["weights_bytes"] == 2 * params  # BF16 by default
    assert data["kv_bytes_per_token"] == 2 * 80 * 8 * 128 * 2  # every layer, K and V, 8 KV heads of 128
    assert data["kv_bytes_per_sequence"] == 327_680 * 8192
    capacity = hardware.get("h100").capacity_bytes
    assert capacity == 81559 * 2**20  # what nvidia-smi reports, not the datasheet's 80 GB
    reserve = 0.1 * 8 * capacity
    assert data["reserve_bytes"] == pytest.approx(reserve)
    assert data["max_batch"] == math.floor((8 * capacity - reserve - 2 * params) / (327_680 * 8192)) == 176
    assert data["fits"] is True and data["batch"] == 1 and data["prompt"] == 8192  # defaults: batch 1, prompt = C
    assert data["tpot_s"] == latency.tpot("llama-3-70b", "h100", 1, 8192, gpus=8)
    assert data["ttft_s"] == latency.ttft("llama-3-70b", "h100", 8192, gpus=8)
    assert data["tokens_per_s"] == pytest.approx(1 / data["tpot_s"])


def test_weights_that_do_not_fit(capsys):
    data = run_json(capsys, "serve", "--model", "llama-3-70b", "--hw", "h100", "--context", "8192")
    assert data["max_batch"] == 0 and data["fits"] is False and data["weights_fit"] is False
    assert data["min_gpus"] == 2 and "2 GPUs at least" in data["verdict"]


def test_batch_prompt_and_dtypes(capsys):
    data = run_json(capsys, "serve", "--model", "llama-3-70b", "--hw", "h100", "--gpus", "8", "--context", "4096",
                    "--prompt", "1024", "--batch", "64", "--weights-dtype", "int4", "--kv-dtype", "fp8")
    assert (data["batch"], data["prompt"], data["weights_dtype"], data["kv_dtype"], data["dtype"]) == \
        (64, 1024, "int4", "fp8", "bf16")
    assert data["kv_bytes_per_token"] == 2 * 80 * 8 * 128 * 1
    assert data["tokens_per_s"] == pytest.approx(64 / data["tpot_s"])
    assert data["tpot_s"] == latency.tpot("llama-3-70b", "h100", 64, 4096, gpus=8, weights_dtype="int4",
                                          kv_dtype="fp8")
    assert data["ttft_s"] == latency.ttft("llama-3-70b", "h100", 1024, gpus=8, weights_dtype="int4", kv_dtype="fp8")
    batch_512 = run_json(capsys, "serve", "--model", "llama-3-70b", "--hw", "h100", "--gpus", "8", "--context",
                         "4096", "--batch", "512")
    assert batch_512["fits"] is False  # 512 x 1.34 GB of cache does not fit next to 141 GB of weights


def test_calibrated_on_the_h200(capsys):
    plain = run_json(capsys, "serve", "--model", "llama-3-8b", "--hw", "h200", "--context", "4096")
    calibrated = run_json(capsys, "serve", "--model", "llama-3-8b", "--hw", "h200", "--context", "4096", "--calibrated")
    assert calibrated["calibrated"] is True and calibrated["tpot_s"] > plain["tpot_s"]


def test_a_workload_is_continuous_batching(capsys):
    # TensorRT-LLM published 3,450 output tokens/s for this workload on one H100 (perf-overview.md): the bound is
    # above it, the calibrated estimate near it
    argv = ["serve", "--model", "llama-3-8b", "--hw", "h100", "--input-tokens", "2048", "--output-tokens", "128",
            "--dtype", "fp8", "--kv-dtype", "fp8", "--usd-per-gpu-hour", "2.5"]
    bound = run_json(capsys, *argv)
    calibrated = run_json(capsys, *argv, "--calibrated")
    assert CONTRACT | {"usd_per_million_tokens"} <= set(bound)
    assert bound["batch"] == bound["max_batch"] == 490 and bound["fits"] is True  # 2,112-token footprints
    assert bound["capacity_bytes"] == 81559 * 2**20 and (bound["input_tokens"], bound["output_tokens"]) == (2048, 128)
    assert bound["tokens_per_s"] > 3450 and 3450 / 1.2 < calibrated["tokens_per_s"] < 3450 * 1.2
    assert calibrated["ttft_s"] > bound["ttft_s"] and calibrated["tpot_s"] > bound["tpot_s"]
    assert bound["usd_per_million_tokens"] == pytest.approx(2.5 / (3600 * bound["tokens_per_s"]) * 1e6)
    assert bound["tokens_per_s"] == pytest.approx(490 * 128 / 127 / bound["tpot_s"])


def test_replicas_and_tokens_over_all_gpus(capsys):
    one = run_json(capsys, "serve", "--model", "llama-3-8b", "--hw", "h100", "--input-tokens", "1000",
                   "--output-tokens", "1000")
    eight = run_json(capsys, "serve", "--model", "llama-3-8b", "--hw", "h100", "--gpus", "8", "--tp", "1",
                     "--input-tokens", "1000", "--output-tokens", "1000")
    assert (eight["replicas"], eight["tp"], eight["gpus"]) == (8, 1, 8)
    assert eight["tokens_per_s"] == pytest.approx(8 * one["tokens_per_s"]) and eight["batch"] == one["batch"]
    assert eight["tokens_per_s_per_gpu"] == pytest.approx(one["tokens_per_s"])
    two = run_json(capsys, "serve", "--model", "llama-3-70b", "--hw", "h100", "--gpus", "8", "--tp", "2", "--pp", "2",
                   "--context", "4096", "--batch", "16")
    assert (two["replicas"], two["gpus_per_replica"], two["pp"]) == (2, 4, 2)
    assert two["tokens_per_s"] == pytest.approx(2 * 16 / two["tpot_s"])


def test_a_latent_attention_model_gets_its_memory_and_its_times(capsys):
    data = run_json(capsys, "serve", "--model", "deepseek-v3", "--hw", "h200", "--gpus", "8", "--context", "4096",
                    "--weights-dtype", "fp8")
    assert data["kv_bytes_per_token"] == 61 * (512 + 64) * 2  # the latent and the RoPE key, every layer, BF16
    assert data["tpot_s"] > 0 and data["max_batch"] > 0


def test_text_output(capsys):
    code, out, _ = run(capsys, "serve", "--model", "llama-3-8b", "--hw", "h100", "--context", "4096", "--batch", "8")
    assert code == 0
    for words in ("Llama 3 8B on 1 x NVIDIA H100", "KV cache per token", "largest batch", "time to first token",
                  "time per output token", "per user"):
        assert words in out


def test_json_anywhere_on_the_line(capsys):
    code, out, _ = run(capsys, "--json", "serve", "--model", "llama-3-8b", "--hw", "h100", "--context", "2048")
    assert code == 0 and CONTRACT <= set(json.loads(out))


@pytest.mark.parametrize("argv, words", [
    (["--model", "llama-9", "--hw", "h100", "--context", "4096"], "Unknown model 'llama-9'"),
    (["--model", "llama-3-8b", "--hw", "h1000", "--context", "4096"], "Unknown accelerator 'h1000'"),
    (["--model", "llama-3-8b", "--hw", "h100", "--context", "0"], "context must be"),
    (["--model", "llama-3-8b", "--hw", "h100", "--context", "10.5"], "whole number of tokens"),
    (["--model", "llama-3-8b", "--hw", "h100", "--context", "4096", "--gpus", "0"], "gpus must be"),
    (["--model", "llama-3-8b", "--hw", "h100", "--context", "4096", "--batch", "-3"], "batch must be"),
    (["--model", "llama-3-8b", "--hw", "h100", "--context", "4096", "--weights-dtype", "int3"], "Unknown precision"),
    (["--model", "llama-3-8b", "--hw", "h100", "--context", "4096", "--weights-dtype", "int8", "--dtype", "int4"],
     "no int4 peak"),
    (["--model", "llama-3-8b", "--hw", "t4", "--context", "4096"], "no bf16 peak"),
    (["--model", "llama-3-8b", "--hw", "l4", "--context", "4096", "--calibrated"], "no achievable bf16 matmul"),
    (["--model", "llama-3-8b", "--hw", "h100"], "--context"),
    (["--model", "llama-3-8b", "--hw", "h100", "--input-tokens", "128"], "--input-tokens needs --output-tokens"),
    (["--model", "llama-3-8b", "--hw", "h100", "--output-tokens", "128", "--context", "4096"],
     "--output-tokens needs --input-tokens"),
    (["--model", "llama-3-8b", "--hw", "h100", "--input-tokens", "128", "--context", "4096"], "not allowed with"),
    (["--model", "llama-3-8b", "--hw", "h100", "--input-tokens", "128", "--output-tokens", "8", "--prompt", "64"],
     "--prompt goes with --context"),
    (["--model", "llama-3-8b", "--hw", "h100", "--input-tokens", "128", "--output-tokens", "0"], "output tokens must"),
    (["--model", "llama-3-70b", "--hw", "h100", "--gpus", "8", "--tp", "3", "--context", "4096"],
     "must be a multiple of tp x pp"),
    (["--model", "llama-3-70b", "--hw", "h100", "--gpus", "16", "--tp", "16", "--context", "4096"],
     "spans more than one scale-up domain"),
    (["--model", "llama-3-8b", "--hw", "h100", "--context", "4096", "--usd-per-gpu-hour", "-2"],
     "usd-per-gpu-hour must be a positive number"),
    (["--model", "llama-3-8b", "--hw", "h100", "--context", "4096", "--prompt", "8192"], "must not exceed context"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, words):
    code, out, err = run(capsys, "serve", *argv)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and out == "" and len(lines) == 1 and "error" in lines[0] and words in lines[0], err


def test_the_console_script():
    done = subprocess.run([sys.executable, "-m", "roofkit.cli", "serve", "--model", "mistral-7b", "--hw", "a100",
                           "--context", "8192", "--json"], capture_output=True, text=True, check=True)
    assert CONTRACT <= set(json.loads(done.stdout))


def test_workload_text_output(capsys):
    code, out, _ = run(capsys, "serve", "--model", "llama-3-70b", "--hw", "h100", "--gpus", "8", "--tp", "2",
                       "--input-tokens", "1000", "--output-tokens", "1000", "--dtype", "fp8", "--usd-per-gpu-hour", "2")
    assert code == 0
    for words in ("4 replicas of 2 GPUs", "requests in flight", "time to first token", "a bound", "output tokens/s on "
                  "the 8 GPUs", "per million output tokens at $2 per GPU-hour", "memory (one replica)"):
        assert words in out, words
