"""The answer box as a learner used it (issue 28, item 2; reviews/2026-12-03, learner-attempts.csv).

Each row is an answer exactly as the learner typed it, with the verdict it must get and what its feedback must
say (or not say). Keys come from the bank; nothing here types one.
"""

from __future__ import annotations

import pytest

from roofkit.course import answers, quiz

RIGHT, WRONG, UNREADABLE = "right", "wrong", "unreadable"

# the question's own phrasing, and natural spellings that were refused
READS_RIGHT = [
    ("l13.cost-per-million", "$0.032 per million tokens"),
    ("l13.cost-per-million", "$0.032 per million"),
    ("l13.cost-per-million", "$0.032/M tokens"),
    ("l13.cost-per-million", "$0.032 per 1M tokens"),
    ("l13.cost-per-million", "0.032 $/Mtok"),
    ("l13.cost-per-million", "3.2 cents"),
    ("l13.cost-per-million", "$0.032"),
    ("l13.cost-per-million", "0.032 USD"),
    ("l13.cost-per-million", "$0.0318"),
    ("l13.cost-per-million", "$32 per billion tokens"),
    ("l13.queue-knee", "37 requests/s"),
    ("l13.queue-knee", "37 req/s"),
    ("l13.queue-knee", "about 37 requests per second"),
    ("l13.queue-capacity", "35.8/s"),
    ("l13.queue-capacity", "36 req/s"),
    ("l13.goodput", "20.7 requests/s"),
    ("l13.goodput", "21 req/s"),
    ("l13.allreduce-floor", "137 us"),
    ("l13.allreduce-floor", "0.14 ms"),
    ("l14.nvlink-vs-nic", "9:1"),
    ("l14.nvlink-vs-nic", "nine"),
    ("l14.nvlink-vs-nic", "9 times"),
    ("l14.fat-tree-leaves", "8 switches"),
    ("l14.fat-tree-leaves", "8 leaves"),
    ("l14.fat-tree-leaves", "8 leaf switches"),
    ("l14.fat-tree-leaves", "eight switches"),
    ("l11.decode-throughput", "13200 tps"),
    ("l11.decode-throughput", "13,200 tok/s"),
    ("l03.more-flops", "no speedup"),
    ("l03.more-flops", "same"),
    ("l03.more-flops", "1x"),
    ("l03.ridge-bf16", "989 TFLOP/s / 3.35 TB/s"),
    ("l03.ridge-bf16", "989e12 FLOP/s / 3.35e12 B/s"),
    ("l03.ridge-fp8", "1979 TF/s / 3.35 TB/s"),
    ("l14.tokens-per-gpu", "1 Ki"),  # a count of a power of two may be written in Ki
    ("l14.fp8-speedup", "1.56x"),
    ("l14.fp8-speedup", "1.56 times"),
    ("l14.nodes-per-token", "5.3 nodes"),
    ("l14.nodes-per-token", "about 5.3"),
    ("l06.loss-scale-normal", "8 Ki"),
    ("l15.train-compute", "3.25e24 FLOPs"),
    ("l15.train-compute", "3.3e24"),
    ("l15.tokens-per-gpu", "1543 tok/s"),
    ("l15.tokens-per-gpu", "1,543 tokens per second"),
    ("l15.tokens-per-gpu", "5.56M tokens/h"),  # a rate per hour, read as one
    ("l15.step-time", "19.9 seconds"),
    ("l15.mfu-peak", "17%"),
    ("l15.mfu-peak", "0.171"),
    ("l15.fp8-where", "Dgrad"),
    ("l15.fp8-where", "the input gradients"),
    ("l15.dispatch-ib-bytes", "23.5 kB"),
    ("l15.dispatch-ib-bytes", "22.9 KiB"),
    ("l15.dispatch-time", "1.92 ms"),
    ("l15.dispatch-time", "1923 us"),
    ("l15.experts-read", "222 experts"),
    ("l15.ex-ramp-bubble", "38%"),
    ("l15.ex-ramp-bubble", "15/39"),
]


@pytest.mark.parametrize("question_id, typed", READS_RIGHT, ids=[f"{q}:{t}" for q, t in READS_RIGHT])
def test_the_spellings_learners_used_read_right(question_id, typed):
    verdict = quiz.judge(quiz.get(question_id), typed)
    assert verdict.correct is True and not verdict.unreadable, (question_id, typed, verdict.feedback)
    assert verdict.feedback == ""


# (question, as typed, verdict, misconception or None, text the feedback includes, text it must not include)
ATTEMPTS = [
    # a question that asks for three figures does not take the slip it is about
    ("l14.ex-critical-batch-nodes", "5625", WRONG, "no-ring-factor", "(m-1)/m", None),
    ("l14.ex-critical-batch-nodes", "5600", WRONG, None, "give 3", None),
    ("l14.ex-critical-batch-nodes", "5.6e3", WRONG, None, "give 3", None),
    ("l14.ex-critical-batch-nodes", "5690", WRONG, None, "Close, but too large", None),
    # Ki is not a count of tokens per second
    ("l11.decode-throughput", "12.9 Ki tok/s", UNREADABLE, None, "counted in thousands", None),
    # a unit's gap only where the question's unit can have it
    ("l11.decode-throughput", "12900 tok/s", WRONG, None, "Close, but too small by 2.2%", "Ki"),
    ("l11.decode-throughput", "12.9k tok/s", WRONG, None, "Close, but too small by 2.2%", "Ki"),
    ("l11.decode-throughput", "10k tok/s", WRONG, None, "Rounded too much", "Ki"),
    ("l11.decode-throughput", "18.6k tok/s", WRONG, None, "Off by 41%", "k is 1,000"),
    ("l13.disagg-ratio", "0.82", WRONG, None, "Close, but too large by 5.1%", "MiB"),
    ("l13.ex-max-context", "17,938", WRONG, None, "Close, but too large by 2.7%", "Ki"),
    ("l14.ex-fit-beta", "47.6 GB/s", WRONG, None, "the gap between a MiB", None),  # bytes: the gap is real
    ("l06.loss-scale-normal", "8K", WRONG, None, "For 1,024 write Ki", None),  # a count of Ki: said
    # the causes the learner hit, named
    ("l13.max-batch", "13", WRONG, "datasheet-memory", "datasheet's memory", "which way you rounded"),
    ("l13.ex-min-gpus", "12", WRONG, "datasheet-memory", "datasheet's memory", "which way you rounded"),
    ("l13.ex-max-context", "15946", WRONG, "datasheet-memory", "datasheet's memory", "TiB"),
    ("l14.a2a-time", "920 us", WRONG, "both-directions", "one byte per value (BF16 takes 2)", None),
    ("l14.a2a-time", "917 us", WRONG, "both-directions", "one byte per value", None),
    ("l14.fp8-speedup", "2x", WRONG, "peak-ratio", "Amdahl", None),
    ("l14.fp8-speedup", "1.6x", WRONG, None, "give 3", None),
    ("l14.nodes-per-token", "8 nodes", WRONG, "one-node-per-expert", "distinct nodes", None),
    ("l11.mfu", "2.56", WRONG, "training-flops", "An MFU above 1 is impossible", None),
    ("l11.mfu", "1.2", WRONG, "above-one", "An MFU above 1 is impossible", None),
    ("l11.mfu", "0.98", WRONG, "whole-model-n", "the whole model's parameters", None),
    ("l11.decode-throughput", "103 tokens/s", WRONG, "one-sequence", "one sequence's rate", None),
    ("l11.decode-fp8-speedup", "1.93", WRONG, "worked-example", "the worked example's figure", None),
    ("l11.memory-fraction", "0.10", WRONG, "bounds-of-the-long-prompt", "4096-token table", None),
    ("l11.memory-fraction", "0.101", WRONG, "bounds-of-the-long-prompt", "4096-token table", None),
    ("l11.memory-fraction", "0.1008", WRONG, "bounds-of-the-long-prompt", "4096-token table", None),
    ("l11.memory-fraction", "0.095", WRONG, "other-prompt", "another prompt length", None),
    ("l13.sequence-intensity", "19", WRONG, "embedding-multiplied", "table lookup", None),
    ("l13.allreduce-floor", "1.34 ms", WRONG, "ring-model", "NCCL's ring", None),
    ("l13.queue-knee", "7400 tokens/s", WRONG, "tokens", "requests per second", None),
    ("l13.queue-capacity", "7150 tokens/s", WRONG, "per-token", "output tokens per second", None),
    ("l13.queue-capacity", "0.028", WRONG, "inverted", "R / W", None),
    ("l13.goodput", "0.61", WRONG, "share", "share of the requests", None),
    ("l13.goodput", "34.2 requests/s", WRONG, "finished", "every finished request", None),
    # what was already right stays right, and the rest stays named
    ("l13.cost-per-million", "114", WRONG, "per-second-price", "3,600", None),
    ("l13.cost-per-million", "$0.03", WRONG, None, "Rounded too much", None),
    ("l14.nvlink-vs-nic", "18x", WRONG, "both-directions", "one direction", None),
    ("l14.fat-tree-leaves", "4 switches", WRONG, "all-ports-down", "spine", None),
    ("l03.more-flops", "2x", WRONG, "flops-help-memory-bound", "memory-bound", None),
    # strict: words that are not numbers stay unreadable
    ("l14.nvlink-vs-nic", "lots", UNREADABLE, None, "cannot read 'lots'", None),
    ("l14.fat-tree-leaves", "same", UNREADABLE, None, "cannot read 'same'", None),  # not a factor question
    ("l14.fat-tree-leaves", "8 foo", UNREADABLE, None, "cannot read 'foo'", None),
    ("l11.decode-throughput", "13200 tqs", UNREADABLE, None, "cannot read 'tqs'", None),
    ("l10.amdahl-step-saving", "nine ms", UNREADABLE, None, "cannot read", None),  # number words: plain numbers
    ("l03.ridge-bf16", "989 TFLOP/s / 3.35 foo", UNREADABLE, None, "cannot read 'foo'", None),
    ("l03.ridge-bf16", "989 TFLOP/s / 3.35 TB", WRONG, "unit", "is a rate (per second)", None),
    ("l13.cost-per-million", "$0.032 per 1M bytes", UNREADABLE, None, "a number under a slash counts things", None),
    ("l13.cost-per-million", "$0.032 per GB", WRONG, "unit", "the question asks for USD per million tokens", None),
    ("l15.train-compute", "5.96e25 FLOP", WRONG, "total-params", "activated parameters", None),
    ("l15.tokens-per-gpu", "5.56e6", WRONG, "per-hour", "3,600 seconds", None),
    ("l15.mfu-peak", "34%", WRONG, "other-peak", "the peak it names", None),
    ("l15.fp8-layer-speedup", "2x", WRONG, "fp8-doubles", "Amdahl", None),
    ("l15.dispatch-ib-bytes", "59.1 kB", WRONG, "every-copy", "once per node", None),
    ("l15.dispatch-time", "0.24 ms", WRONG, "bits-as-bytes", "50 GB/s", None),
    ("l15.experts-read", "512", WRONG, "k-times-b", "Count each expert once", None),
    ("l15.ex-ramp-bubble", "62.5%", WRONG, "over-m", "(m + p - 1)", None),
]


@pytest.mark.parametrize("question_id, typed, verdict, name, says, never", ATTEMPTS,
                         ids=[f"{a[0]}:{a[1]}" for a in ATTEMPTS])
def test_each_attempt_gets_its_verdict_and_its_message(question_id, typed, verdict, name, says, never):
    question = quiz.get(question_id)
    judged = quiz.judge(question, typed)
    got = UNREADABLE if judged.unreadable else RIGHT if judged.correct else WRONG
    assert got == verdict, (question_id, typed, judged.feedback)
    if verdict == WRONG:
        assert judged.misconception == name, (question_id, typed, judged.misconception, judged.feedback)
    assert says in judged.feedback, (question_id, typed, judged.feedback)
    if never:
        assert never not in judged.feedback, (question_id, typed, judged.feedback)
    key = float(question.answer_key())
    for shown in (f"{key:.4g}", f"{key:.3g}"):
        if (answers.significant_digits(shown) or 0) >= 3:
            assert shown not in judged.feedback  # the key is never shown


def test_an_unreadable_answer_is_shown_as_unreadable_and_not_recorded_as_wrong(capsys):
    verdict = quiz.check("l14.nvlink-vs-nic", "lots")
    assert verdict.unreadable
    shown = capsys.readouterr().out
    assert quiz.UNREADABLE in shown and "✗ not yet" not in shown and "cannot read 'lots'" in shown
    record = verdict.record({})
    assert record["correct"] is None and record["unreadable"] is True
    wrong = quiz.check("l14.nvlink-vs-nic", "2.25")
    assert "✗ not yet" in capsys.readouterr().out and wrong.record({})["correct"] is False
    assert "unreadable" not in wrong.record({})


def test_a_number_word_or_a_ratio_is_exact_and_only_where_a_plain_number_is_asked():
    assert answers.read("nine", "dimensionless").digits is None  # a word has no figures to round at
    assert answers.number("9:1", "dimensionless") == 9 and answers.number("1:4", "dimensionless") == 0.25
    for typed, unit in (("nine", "s"), ("9:1", "byte"), ("no speedup", "dimensionless"), ("same", "1/s")):
        with pytest.raises(Exception):
            answers.read(typed, unit)


def test_a_factor_question_says_so_in_its_box_and_its_messages():
    question = quiz.get("l03.more-flops")
    assert question.unit == answers.FACTOR_UNIT
    assert "has a unit (byte), but the question asks for a factor" in quiz.judge(question, "1 byte").feedback


def test_the_sequence_intensity_prompt_says_which_parameters_count():
    text = quiz.get("l13.sequence-intensity").text()
    assert "not the input embedding" in text and "output layer" in text


def test_the_three_figures_question_takes_only_three_figures_in_every_variant():
    from roofkit.grading import variants

    question = quiz.get("l14.ex-critical-batch-nodes")
    for params in [{}, *variants.combinations(question)]:
        asked = question.with_params(**params)
        key = float(asked.answer_key())
        assert quiz.judge(asked, f"{key:.3g}").correct is True
        slip = next(m for m in asked.misconceptions if m.name == "no-ring-factor").value(asked)
        for figures in (3, 4):
            verdict = quiz.judge(asked, f"{slip:.{figures - 1}e}")
            assert verdict.correct is False and verdict.misconception == "no-ring-factor", (params, verdict.feedback)
