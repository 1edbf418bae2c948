"""Lesson 00 tells learners how answers are read and how the terminal commands behave: hold it to that.

Every rule the lesson states (a bare number is in the question's unit; units as
people write them; arithmetic parsed, never run; `roofkit quiz check` exits 0, 1 or 2;
`roofkit quiz hint ID N` prints hint N) is replayed here against roofkit itself,
and its questions against their keys (the catalog's A100 bandwidth is NVIDIA's
datasheet 2.039 TB/s for the 80 GB part).
"""

from pathlib import Path

import pytest

from roofkit.course import answers, quiz
from roofkit import cli
from roofkit.catalogs import hardware
from roofkit.errors import InvalidValue

LESSON = (Path(__file__).resolve().parent.parent / "lessons" / "00-start-here.md").read_text("utf-8")
Q = quiz.get


def test_keys():
    assert Q("l00.fma-flops").answer_key() == 2000
    assert Q("l00.bandwidth-units").answer_key() == pytest.approx(2.039e12)  # NVIDIA A100 80GB datasheet
    assert Q("l00.bandwidth-units").params["hw"] == "A100"
    assert hardware.get("A100").key == "a100-sxm4-80gb"
    assert all(hardware.get(hw) for hw in Q("l00.bandwidth-units").variants["hw"])  # every variant resolves


def test_the_lesson_states_the_reading_rules():
    for phrase in ("A bare number is in the question's unit", "Units are written as people write them",
                   "Arithmetic is parsed, not run", "(2-2**-10)*2**15", "roofkit quiz check l00.fma-flops 2000",
                   "status 0", "1 when it is wrong", "2 when it cannot be", "roofkit quiz hint l00.fma-flops 2"):
        assert phrase in LESSON, phrase


@pytest.mark.parametrize("text, unit, value", [
    ("2000 GB/s", "byte/s", 2e12), ("2 TB/s", "byte/s", 2e12), ("2e12", "byte/s", 2e12),
    ("2000", "FLOP", 2000), ("93.8", "percent", 93.8), ("93.8%", "percent", 93.8),
    ("1.4k", "dimensionless", 1400), ("3.9 million", "dimensionless", 3.9e6),
    ("139 us", "µs", 139), ("139 µs", "µs", 139), ("2*1000", "FLOP", 2000),
    ("(2-2**-10)*2**15", "dimensionless", 65504),
])
def test_the_rules_hold(text, unit, value):
    assert answers.number(text, unit) == pytest.approx(value)


def test_arithmetic_is_parsed_not_run():
    for text in ("__import__('os').getcwd()", "open('x')", "2; 3"):
        with pytest.raises(InvalidValue):
            answers.number(text, "FLOP")


def test_the_tebibyte_slip_is_named():
    verdict = quiz.judge(Q("l00.bandwidth-units"), "2.039 TiB/s")
    assert not verdict.correct and verdict.misconception == "tb-vs-tib"
    assert not quiz.judge(Q("l00.bandwidth-units"), 2039).correct  # a bare number is 2039 bytes/s


def test_the_terminal_commands_do_what_the_lesson_says(capsys):
    assert cli.main(["quiz", "check", "l00.fma-flops", "2000"]) == 0
    assert cli.main(["quiz", "check", "l00.fma-flops", "1000"]) == 1
    assert cli.main(["quiz", "check", "l00.fma-flop", "2000"]) == 2  # a misspelt id
    assert cli.main(["quiz", "check", "l00.fma-flops", "two thousand"]) == 2  # not a number
    capsys.readouterr()
    assert cli.main(["quiz", "hint", "l00.fma-flops", "2"]) == 0
    assert Q("l00.fma-flops").hints[1] in capsys.readouterr().out


def test_hints_never_give_the_lookup_call():
    for question in quiz.questions("00"):
        for hint in question.hints:
            assert ".bandwidth" not in hint and "roofkit.hw(" not in hint, (question.id, hint)
