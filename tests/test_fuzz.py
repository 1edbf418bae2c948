"""Random input at every place a user's text or file enters: a result or one clean RoofkitError, fast.

The paths and their generators live in ``tests/fuzz_paths.py``; ``benchmarks/fuzz.py``
runs the same paths on a hundred thousand inputs and prints how many escaped.
"""

from __future__ import annotations

import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzz_paths
from roofkit.course import quiz
from roofkit.errors import RoofkitError

PATHS = list(fuzz_paths.PATHS.values())


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(rng=st.randoms(use_true_random=False))
def test_random_input_gives_a_result_or_a_roofkit_error(path, rng):
    value = path.make(rng)
    spent = _cpu_seconds(path, value)
    if spent >= 1:  # the first use of a command imports its modules, once; an input that is slow is slow again
        spent = _cpu_seconds(path, value)
    assert spent < 1, f"{path.name} took over a CPU second, twice, on {value!r}"


def _cpu_seconds(path, value) -> float:
    started = time.process_time()  # CPU time: a busy machine slows the wall clock, not the work
    try:
        path.run(value)
    except RoofkitError:
        pass
    return time.process_time() - started


def test_the_command_line_fuzzer_reaches_every_fast_command():
    words = {w for w, _ in fuzz_paths.commands()}
    assert {("hw", "show"), ("cost", "gemm"), ("quiz", "check"), ("quiz", "hint"), ("train",), ("mfu",)} <= words


@pytest.fixture
def watched(tmp_path, monkeypatch):
    """A working folder where an injection would leave a file called PWNED."""
    monkeypatch.chdir(tmp_path)
    return tmp_path / "PWNED"


def _payloads(target):
    return [payload.replace("PWNED", str(target)) for payload in fuzz_paths.INJECTIONS]


def test_injections_never_run_in_check_judge_or_the_grader(watched):
    from roofkit.grading import score

    for question in quiz.questions():
        if question.kind == "code":
            continue
        for payload in _payloads(watched):
            verdict = quiz.judge(question, payload)
            assert verdict.correct is False, (question.id, payload)
            assert score.judge_answer(question, payload).points == 0
            assert not watched.exists(), f"{payload!r} ran through {question.id}"


def test_injections_never_run_from_the_command_line(watched, capsys):
    for question_id in ("l00.fma-formula", "l02.square-gemm", "l03.ridge-bf16", "l00.work-or-rate"):
        for payload in _payloads(watched):
            code, _, err = fuzz_paths.cli_outcome(["quiz", "check", question_id, payload])
            assert code == 2 and "error" in err
            assert not watched.exists()
    for argv in (["hw", "show"], ["cost", "gemm", "--m", "1", "--n", "1", "--k"]):
        for payload in _payloads(watched):
            fuzz_paths.cli_outcome([*argv, payload])
            assert not watched.exists()


def test_check_in_a_notebook_session_is_as_safe(watched, capsys):
    for payload in _payloads(watched):
        verdict = quiz.check("l02.square-gemm", payload)
        assert verdict.correct is False and verdict.unreadable
        assert not watched.exists()
    assert os.listdir(watched.parent) == []


@pytest.mark.parametrize("text", ["10**10**10", "2**2**2**2**2**2", "9" * 199, "(" * 30 + "1" + ")" * 30,
                                  "n**10**10", "exp(exp(exp(1000)))", "(n+1)**64 - n", "1e308*1e308"])
def test_answers_that_used_to_freeze_the_kernel_return_at_once(text):
    started = time.perf_counter()
    for question_id in ("l00.fma-formula", "l00.fma-flops", "l02.square-gemm"):
        quiz.judge(quiz.get(question_id), text)
    assert time.perf_counter() - started < 2
