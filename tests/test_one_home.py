"""One home for every figure: change it there, and everything that uses it moves.

Each case copies the roofkit package, changes one figure in its data file, and
asks every consumer in a fresh process (the catalogs are read once per
process): the catalog objects, the performance models, a question's key, the
command line and a lesson's printed line. Each must move exactly as the figure
did. A figure typed a second time anywhere (an NCCL table in code, a lesson's
constant) would keep a consumer where it was, and the case would fail.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import roofkit_with_data

ROOT = Path(__file__).resolve().parent.parent

# what each consumer reports, printed as JSON by a fresh process
PROBE = r'''
import contextlib, io, json, subprocess, sys
import roofkit
from roofkit import comms, formulas, links, nccl, quiz, roofline
from roofkit.inference import latency

def cli(*argv):
    out = subprocess.run([sys.executable, "-m", "roofkit", *argv, "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)

def lesson_line(lesson, marker):
    """Run the lesson's code cell that contains ``marker`` and return what it printed."""
    text = open(lesson, encoding="utf-8").read()
    cell = next(c for c in text.split("```{code-cell} ipython3\n")[1:] if marker in c).split("```")[0]
    printed = io.StringIO()
    scope = {"roofkit": roofkit, "links": links, "comms": comms, "h100": roofkit.hw("h100")}
    with contextlib.redirect_stdout(printed):
        exec(cell, scope)
    return printed.getvalue()

small = 16384  # bytes: a latency-bound all-reduce
print(json.dumps({
    "link_latency": links.get("hgx-h100").latency,
    "nvlink4_latency": links.get("nvlink4").latency,
    "nccl_latency": nccl.hw_latency("nvlink", "ring", "LL"),
    "all_reduce_s": comms.all_reduce(small, 8, "hgx-h100").time_s,
    "l13_allreduce_floor": quiz.get("l13.allreduce-floor").answer_key(),
    "cli_comm_s": cli("comm", "all-reduce", "--bytes", str(small), "--gpus", "8", "--link", "hgx-h100",
                      "--algorithm", "ring")["time_s"],
    "lesson_13_alpha": lesson_line(%(lesson13)r, "µs per hop"),
    "h100_bandwidth": roofkit.hw("h100").bandwidth,
    "h100_ridge": roofkit.hw("h100").ridge("bf16"),
    "gemv_s": roofline.analyze(formulas.gemm(1, 4096, 4096, "bf16"), "h100", "bf16").time_s,
    "l03_ridge": quiz.get("l03.ridge-bf16").answer_key(),
    "cli_cost_s": cli("cost", "gemm", "--m", "1", "--n", "4096", "--k", "4096", "--dtype", "bf16", "--hw", "h100")["time_s"],
    "tpot_s": latency.tpot("llama-3-8b", "h100", 1, 1024),
    "nvlink4_nccl": links.get("nvlink4").nccl_bandwidth,
    "hgx_h100_nccl": nccl.effective_bandwidth(links.get("hgx-h100")),
    "cli_big_s": cli("comm", "all-reduce", "--bytes", "1GB", "--gpus", "8", "--link", "hgx-h100", "--algorithm", "ring",
                     "--calibrated")["time_s"],
}))
'''


def _probe(tmp_path: Path, edits: dict[str, tuple[str, str]]) -> dict:
    """The consumers' figures with roofkit's data files edited (file -> (old, new), each old found once)."""
    package = roofkit_with_data(tmp_path / "pkg", edits)
    env = {**os.environ, "PYTHONPATH": str(package)}
    code = PROBE % {"lesson13": str(ROOT / "lessons" / "13-serving.md")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


@pytest.fixture(scope="module")
def before(tmp_path_factory):
    return _probe(tmp_path_factory.mktemp("unchanged"), {})


def test_nccl_s_nvlink_latency_has_one_home(tmp_path, before):
    after = _probe(tmp_path, {"nccl.toml": ("[hw_latency_us.nvlink]\nring = { LL = 0.6,",
                                            "[hw_latency_us.nvlink]\nring = { LL = 1.1,")})
    for name in ("link_latency", "nvlink4_latency", "nccl_latency"):
        assert after[name] == pytest.approx(before[name] * 1.1 / 0.6, rel=1e-12), name
    # lesson 13's one-shot floor: 160 all-reduces, each one round of the link's latency (plus its bytes)
    assert after["l13_allreduce_floor"] - before["l13_allreduce_floor"] == pytest.approx(80 * 2 * (1.1 - 0.6) * 1e-6,
                                                                                       rel=1e-9)
    for name in ("all_reduce_s", "cli_comm_s"):  # the α-β model, and NCCL's ring as the bound runs it
        assert after[name] > before[name] * 1.3, name  # latency-bound: most of the time is hops
    assert re.search(r": 0\.6 µs per hop", before["lesson_13_alpha"]) and \
        re.search(r": 1\.1 µs per hop", after["lesson_13_alpha"])
    assert all(after[k] == before[k] for k in ("h100_bandwidth", "gemv_s", "tpot_s"))  # and nothing else moved


def test_the_h100_s_bandwidth_has_one_home(tmp_path, before):
    after = _probe(tmp_path, {"hardware.toml": ("bandwidth_tb_s = 3.35\nmemory_gb = 80\nusable_memory_mib = 81559",
                                                "bandwidth_tb_s = 3.9\nmemory_gb = 80\nusable_memory_mib = 81559")})
    ratio = 3.9 / 3.35
    assert after["h100_bandwidth"] == pytest.approx(before["h100_bandwidth"] * ratio, rel=1e-12)
    for name in ("h100_ridge", "l03_ridge", "gemv_s", "cli_cost_s"):  # memory-bound, or over the bandwidth
        assert after[name] == pytest.approx(before[name] / ratio, rel=1e-9), name
    assert after["tpot_s"] < before["tpot_s"] / ratio * 1.05  # decode at batch 1: mostly the weights' reads
    assert after["link_latency"] == before["link_latency"]


def test_nccl_s_nvlink_bandwidth_per_link_has_one_home(tmp_path, before):
    after = _probe(tmp_path, {"nccl.toml": ("nvlink4 = 20.6", "nvlink4 = 25.0")})
    ratio = 25.0 / 20.6
    for name in ("nvlink4_nccl", "hgx_h100_nccl"):  # the NVSwitch domain is built on NVLink 4
        assert after[name] == pytest.approx(before[name] * ratio, rel=1e-12), name
    assert after["cli_big_s"] < before["cli_big_s"] / ratio * 1.02  # a 1 GB ring: the bandwidth term
    assert after["link_latency"] == before["link_latency"] and after["h100_bandwidth"] == before["h100_bandwidth"]
