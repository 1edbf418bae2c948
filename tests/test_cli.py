"""The command-line contract in design.md: readable by default, one JSON object with --json, exit 2 on bad input."""

import json
import subprocess
import sys

import pytest

from roofkit.catalogs import hardware

from helpers import run, run_json


def test_hw_list(capsys):
    data = run_json(capsys, "hw", "list")
    names = [a["name"] for a in data["accelerators"]]
    assert names == [a.key for a in hardware.catalog()]
    assert all(isinstance(a["aliases"], list) for a in data["accelerators"])


def test_hw_show(capsys):
    data = run_json(capsys, "hw", "show", "H100 SXM5")
    assert {"name", "bandwidth_bytes_per_s", "peak_flops", "ridge", "sources"} <= set(data)
    h100 = hardware.get("h100")
    assert data["bandwidth_bytes_per_s"] == h100.bandwidth
    assert data["peak_flops"]["bf16"] == h100.peak("bf16")
    assert 295 <= data["ridge"]["bf16"] <= 296 and 590 <= data["ridge"]["fp8"] <= 592


def test_cost_gemm_on_h100(capsys):
    data = run_json(capsys, "cost", "gemm", "--m", "4096", "--n", "4096", "--k", "4096", "--dtype", "bf16", "--hw", "h100")
    assert data["flops"] == 2 * 4096**3
    assert data["intensity"] == pytest.approx(4096 / 3)
    assert data["bound"] == "compute"
    assert data["time_s"] == pytest.approx(data["flops"] / hardware.get("h100").peak("bf16"))
    assert {"ridge", "attainable_flops_per_s"} <= set(data)


def test_cost_gemv_is_memory_bound(capsys):
    data = run_json(capsys, "cost", "gemm", "--m", "1", "--n", "4096", "--k", "4096", "--dtype", "bf16", "--hw", "h100")
    assert data["intensity"] == pytest.approx(1, abs=0.01)
    assert data["bound"] == "memory"


def test_cost_without_hw_has_no_placement(capsys):
    data = run_json(capsys, "cost", "elementwise", "--n", "1e6", "--flops-per-element", "1", "--reads", "2",
                    "--writes", "1", "--dtype", "fp16")
    assert data["intensity"] == pytest.approx(1 / 6)
    assert "bound" not in data


def test_train_70b_15t(capsys):
    data = run_json(capsys, "train", "--params", "70B", "--tokens", "15T", "--hw", "h100", "--dtype", "bf16",
                    "--mfu", "0.4", "--gpus", "8192", "--usd-per-gpu-hour", "2")
    assert data["flops"] == pytest.approx(6.3e24)
    assert data["gpu_hours"] == pytest.approx(4.4e6, rel=0.01)
    assert data["wall_clock_hours"] == pytest.approx(540, rel=0.01)
    assert data["wall_clock_days"] == pytest.approx(22.5, rel=0.01)
    assert data["cost_usd"] == pytest.approx(8.8e6, rel=0.01)


def test_mfu_flags_the_impossible(capsys):
    bad = run_json(capsys, "mfu", "--params", "70B", "--tokens-per-s", "3000", "--gpus", "1", "--hw", "h100", "--dtype", "bf16")
    assert bad["mfu"] == pytest.approx(1.27, abs=0.005) and bad["plausible"] is False and bad["warning"]
    ok = run_json(capsys, "mfu", "--params", "70B", "--tokens-per-s", "900", "--gpus", "1", "--hw", "h100", "--dtype", "bf16")
    assert ok["mfu"] == pytest.approx(0.38, abs=0.005) and ok["plausible"] is True


def test_format(capsys):
    data = run_json(capsys, "format", "bfloat16")
    assert data["exponent_bits"] == 8 and data["mantissa_bits"] == 7 and data["eps"] == 2**-7
    assert {"max", "min_normal", "min_subnormal"} <= set(data)


@pytest.mark.parametrize("argv", [["hw", "show", "h100"], ["hw", "list"], ["format", "e4m3"],
                                  ["cost", "gemm", "--m", "1", "--n", "4096", "--k", "4096", "--hw", "h100"],
                                  ["train", "--params", "7B", "--tokens", "2T"]])
def test_readable_output(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 0 and out.strip() and not err
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["hw", "show", "h10"], r"Unknown accelerator 'h10'\. Did you mean 'h100-sxm'"),
        (["cost", "gemm", "--m", "-5", "--n", "3", "--k", "4"], r"m must be a finite number greater than 0; got -5"),
        (["cost", "gemm", "--m", "abc", "--n", "3", "--k", "4"], r"m must be a number such as 4096"),
        (["cost", "gemm", "--m", "4", "--n", "3", "--k", "4", "--dtype", "bf17"], r"Unknown precision 'bf17'"),
        (["cost", "gemm", "--m", "4", "--n", "3", "--k", "4", "--dtype", "bf16", "--hw", "t4"], r"NVIDIA T4 has no bf16 peak"),
        (["train", "--params", "70B", "--tokens", "15T", "--hw", "h100", "--mfu", "1.5"], r"\(0, 1\]"),
        (["train", "--params", "nan", "--tokens", "15T"], r"params must be"),
        (["mfu", "--params", "70B", "--tokens-per-s", "0", "--gpus", "1", "--hw", "h100"], r"tokens-per-s must be"),
        (["format", "fp9"], r"fp9"),
        (["frobnicate"], r"invalid choice: 'frobnicate'"),
        (["cost", "gemm", "--m", "4"], r"required"),
        # control characters in an echoed argument are written as escapes (found by benchmarks/fuzz.py)
        (["quiz", "hint", "l00.fma-flops", "--json", "b\rW\nc2"], r"unrecognized arguments: b\\rW\\nc2 \(see"),
        (["hw", "show", "x\ny"], r"Unknown accelerator 'x\\ny'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    assert pytest.importorskip("re").search(message, err), err


@pytest.mark.parametrize("module", ["roofkit", "roofkit.cli"])
def test_console_script_runs_as_a_process(module, tmp_path):
    result = subprocess.run([sys.executable, "-m", module, "hw", "show", "a100", "--json"],
                            capture_output=True, text=True, check=True, cwd=tmp_path)
    assert json.loads(result.stdout)["peak_flops"]["bf16"] == hardware.get("a100").peak("bf16")
    bad = subprocess.run([sys.executable, "-m", module, "hw", "show", "nope"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "nope" in bad.stderr


@pytest.mark.parametrize("argv", [["--json", "hw", "show", "h100"], ["hw", "--json", "show", "h100"],
                                  ["hw", "show", "--json", "h100"], ["hw", "show", "h100", "--json"]])
def test_json_is_accepted_anywhere_on_the_line(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    assert json.loads(out)["bandwidth_bytes_per_s"] == hardware.get("h100").bandwidth


def test_without_json_the_answer_is_text(capsys):
    code, out, _ = run(capsys, "hw", "show", "h100")
    assert code == 0 and out.startswith("name")


def test_quiz_check_exit_status_says_right_or_wrong(capsys):
    from roofkit.course import quiz

    key = quiz.answer_key("l03.ridge-bf16")
    assert run(capsys, "quiz", "check", "l03.ridge-bf16", f"{key:.4g}")[0] == 0
    code, out, _ = run(capsys, "quiz", "check", "l03.ridge-bf16", f"{key / 2:.4g}")
    assert code == 1 and "roofkit quiz hint l03.ridge-bf16" in out and "hint('" not in out
    assert run(capsys, "quiz", "check", "l03.ridge-bf16", "not a number")[0] == 2


def test_quiz_hint_gives_each_hint_and_refuses_one_that_does_not_exist(capsys):
    from roofkit.course import quiz

    question = quiz.get("l03.ridge-bf16")
    for n, text in enumerate(question.hints, start=1):
        code, out, _ = run(capsys, "quiz", "hint", question.id, str(n))
        assert code == 0 and text in out
    code, _, err = run(capsys, "quiz", "hint", question.id, str(len(question.hints) + 1))
    assert code == 2 and f"hints 1 to {len(question.hints)}" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "quiz", "hint", question.id, "0")
    assert code == 2 and "at least 1" in err


def test_hw_show_prints_achievable_roofs_per_sm_sizes_and_clocks_from_the_catalog(capsys):
    h100 = hardware.get("h100")
    code, out, _ = run(capsys, "hw", "show", "h100")
    assert code == 0
    share = h100.peak("bf16", achievable=True) / h100.peak("bf16")
    assert f"({share:.0%})" in out and "achievable" in out
    assert f"registers {h100.register_file_bytes / 1024:g} KiB" in out
    assert "tensor" in out and "boost" in out
    code, out, _ = run(capsys, "hw", "show", "t4")
    assert code == 0 and "achievable" not in out and "per SM" not in out
