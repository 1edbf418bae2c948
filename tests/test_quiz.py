"""The quiz engine: four kinds of question, misconception feedback, hints, records, and no leaked keys."""

import math

import pytest
import sympy

from roofkit import formulas
from roofkit.course import quiz
from roofkit.errors import InvalidValue, UnknownName
from roofkit.course.quiz import Misconception, Question

GEMM = Question(
    id="test.gemm-intensity", lesson="99", kind="numeric",
    prompt="Intensity of a {n}^3 GEMM in {dtype}?", params={"n": 4096, "dtype": "bf16"},
    key=lambda n, dtype: formulas.gemm(n, n, n, dtype).intensity, unit="FLOP/byte", rtol=0.01,
    hints=("FLOPs over bytes.", "2n^3 over 3n^2 b."),
    misconceptions=(
        Misconception("forgot-fma-2", "An FMA is 2 FLOPs.", scale=0.5),
        Misconception("bits-not-bytes", "Bytes, not bits.", scale=1 / 8),
        Misconception("flop-rate", "A rate is not an intensity.", unit="FLOP/s"),
    ),
)
BOUND = Question(id="test.bound", lesson="99", kind="choice", prompt="GEMV: memory or compute?", params={},
                 key=lambda: "memory", choices=("memory", "compute"),
                 misconceptions=(Misconception("more-flops", "More FLOP/s cannot help a memory-bound kernel.",
                                               answer=lambda: "compute"),))
SQUARE = Question(id="test.square", lesson="99", kind="symbolic", prompt="Intensity of a square GEMM in n and b?",
                  key=lambda: formulas.gemm(*sympy.symbols("n n n b", positive=True)).intensity, symbols=("n", "b"),
                  misconceptions=(Misconception("no-output", "The output C is written too.",
                                                answer=lambda: sympy.Symbol("n", positive=True) / sympy.Symbol("b", positive=True)),))
@pytest.fixture(autouse=True)
def forget_test_questions():
    """Questions registered here must not leak into the course's bank checks."""
    yield
    for qid in [q for q in quiz._BANK if q.startswith("test.")]:
        del quiz._BANK[qid]


CODE = Question(id="test.code", lesson="99", kind="code", prompt="Write intensity(flops, nbytes).",
                key=lambda flops, nbytes: flops / nbytes, cases=((10, 5), (1, 4)), hidden_cases=((3, 7),))


def test_numeric_right_with_and_without_units():
    assert quiz.judge(GEMM, 4096 / 3).correct
    assert quiz.judge(GEMM, "1365 FLOP/byte").correct
    assert quiz.judge(GEMM, "1365").correct
    assert quiz.judge(GEMM, 1366).correct  # within 1%


def test_numeric_misconceptions_are_named():
    half = quiz.judge(GEMM, 4096 / 6)
    assert half.correct is False and half.misconception == "forgot-fma-2" and "FMA" in half.feedback
    assert quiz.judge(GEMM, 4096 / 24).misconception == "bits-not-bytes"
    rate = quiz.judge(GEMM, "1365 TFLOPS")
    assert rate.correct is False and rate.misconception == "flop-rate" and "cannot be converted" in rate.feedback


@pytest.mark.parametrize("wrong", [1.5 * 4096 / 3, 1, 1e9, "12 FLOP/byte"])
def test_wrong_answers_never_reveal_the_key(wrong):
    verdict = quiz.judge(GEMM, wrong)
    assert verdict.correct is False
    for shown in ("1365", "1,365", "1.365", "1366", "4096/3"):
        assert shown not in verdict.feedback


def test_not_answered_yet():
    for nothing in (None, ..., "", "  "):
        verdict = quiz.judge(GEMM, nothing)
        assert verdict.correct is None and quiz.NOT_ANSWERED in str(verdict)


def test_unreadable_answer_is_a_verdict_not_a_crash():
    verdict = quiz.judge(GEMM, "lots")
    assert verdict.correct is False and "cannot read 'lots'" in verdict.feedback


def test_choice():
    assert quiz.judge(BOUND, "Memory").correct
    assert quiz.judge(BOUND, "memory-bound").correct
    wrong = quiz.judge(BOUND, "compute")
    assert wrong.misconception == "more-flops"
    assert "not one of the choices: memory, compute" in quiz.judge(BOUND, "both").feedback


def test_symbolic_equivalence():
    assert quiz.judge(SQUARE, "2*n/(3*b)").correct
    assert quiz.judge(SQUARE, "(n + n)/(b*3)").correct
    n, b = sympy.symbols("n b")
    assert quiz.judge(SQUARE, 2 * n / (3 * b)).correct  # symbols without assumptions match by name
    assert quiz.judge(SQUARE, "n/b").misconception == "no-output"
    assert "'m' is not one of the question's symbols (n, b)" in quiz.judge(SQUARE, "2*m/(3*b)").feedback


def test_code_questions_run_cases():
    assert quiz.judge(CODE, lambda flops, nbytes: flops / nbytes).correct
    wrong = quiz.judge(CODE, lambda flops, nbytes: nbytes / flops)
    assert wrong.correct is False and "2 of 2 cases wrong" in wrong.feedback
    crash = quiz.judge(CODE, lambda flops, nbytes: 1 / 0)
    assert "ZeroDivisionError" in crash.feedback
    assert "expects a function" in quiz.judge(CODE, 3).feedback


def test_variants_change_the_key():
    other = GEMM.with_params(n=1024)
    assert quiz.judge(other, 1024 / 3).correct and not quiz.judge(other, 4096 / 3).correct
    assert "1024^3" in other.text()
    with pytest.raises(InvalidValue, match=r"has no parameter\(s\) \['m'\]"):
        GEMM.with_params(m=3)


def test_hints_one_at_a_time_then_word_that_there_are_no_more():
    quiz.register(GEMM)
    quiz._hints_shown.pop(GEMM.id, None)
    first, second, third, fourth = (quiz.hint(GEMM.id) for _ in range(4))
    assert "hint 1/2: FLOPs over bytes." in first
    assert "hint 2/2" in second and "last hint" in second
    assert "no more hints" in third and "all 2" in third and third == fourth
    assert "2n^3" not in third  # the last hint is not repeated


def test_a_hint_shows_as_text_in_a_notebook():
    from IPython.lib.pretty import pretty

    quiz.register(GEMM)
    quiz._hints_shown.pop(GEMM.id, None)
    shown = quiz.hint(GEMM.id)
    assert isinstance(shown, str) and pretty(shown) == str(shown) and not pretty(shown).startswith("'")


def _widget(question_id, monkeypatch):
    """The answer box ask() shows, caught from IPython's display."""
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objects, **_: shown.extend(objects))
    quiz.ask(question_id)
    return next(o for o in shown if hasattr(o, "check_button"))


def test_the_hint_button_says_when_there_are_no_more_hints(monkeypatch):
    quiz.register(GEMM)
    quiz._hints_shown.pop(GEMM.id, None)
    widget = _widget(GEMM.id, monkeypatch)
    for _ in range(2):
        widget.hint_button.click()
    assert "hint 1/2" in widget.hints.value and "that was the last hint" in widget.hints.value
    assert widget.hint_button.disabled and widget.hint_button.description == "No more hints"
    widget.hint_button.click()  # a disabled button: nothing more, and the last hint is not repeated
    assert widget.hints.value.count("2n^3") == 1


def test_the_hint_button_starts_at_the_first_hint_after_a_lessons_hint_cell(monkeypatch):
    quiz.register(GEMM)
    quiz._hints_shown.pop(GEMM.id, None)
    assert "hint 1/2" in quiz.hint(GEMM.id)  # the lesson's own hint cell, run by Run All
    widget = _widget(GEMM.id, monkeypatch)
    widget.hint_button.click()
    assert "hint 1/2" in widget.hints.value and not widget.hint_button.disabled


def test_quiz_show_prints_the_question_as_the_notebook_asks_it(capsys):
    from helpers import run, run_json

    code, out, _ = run(capsys, "quiz", "show", "l03.ridge-bf16")
    question = quiz.get("l03.ridge-bf16")
    assert code == 0 and question.text() in out and question.unit in out
    shown = run_json(capsys, "quiz", "show", "l00.work-or-rate")
    assert shown["choices"] == list(quiz.get("l00.work-or-rate").choices) and shown["prompt"]
    code, _, err = run(capsys, "quiz", "show", "l03.nope")
    assert code == 2 and "l03.nope" in err and "Traceback" not in err


@pytest.mark.parametrize("answer", ["0.17", "0.2", "1/6", "0.17 FLOP/byte", "0.25", "lots", "17%"])
def test_the_answer_box_gives_the_verdict_check_gives(answer, monkeypatch):
    widget = _widget("l02.vector-add", monkeypatch)
    widget.answer_box.value = answer
    widget.check_button.click()
    expected = str(quiz.judge(quiz.get("l02.vector-add"), answer))
    import html

    assert html.escape(expected) in widget.feedback.value


@pytest.mark.parametrize("text, number", [("0.17", 0.17), ("0.2", 0.2), ("0.18", 0.18), ("0.25", 0.25),
                                          ("1.7e-1", 0.17), ("0.170", 0.17)])
def test_one_answer_one_verdict_and_one_message_as_text_or_a_python_number(text, number):
    question = quiz.get("l02.vector-add")
    by_text, by_number = quiz.judge(question, text), quiz.judge(question, number)
    assert (by_text.correct, by_text.misconception, by_text.feedback) == \
        (by_number.correct, by_number.misconception, by_number.feedback)


def test_two_figures_pass_where_the_prompt_asks_for_two():
    question = quiz.get("l02.vector-add")
    assert question.text().endswith("Two significant figures are enough.")
    assert quiz.judge(question, 0.17).correct and quiz.judge(question, "0.17").correct
    assert "Rounded too much: 1 significant figure" in quiz.judge(question, 0.2).feedback
    bytes_question = quiz.get("l01.gemm-bytes")  # two figures cannot tell GB from GiB: it asks for three
    assert bytes_question.text().endswith("Three significant figures are enough.")
    assert "give 3" in quiz.judge(bytes_question, "1.9e8").feedback


def test_exact_whole_number_is_said_only_where_exactness_matters():
    assert quiz.get("l04.ex-crossover").text().endswith("The answer is an exact whole number.")
    assert "whole number" not in quiz.get("l03.more-flops").text()  # a factor of 1, not a count
    assert quiz.judge(quiz.get("l03.more-flops"), "1.0").correct


def test_close_is_said_only_of_answers_that_are_close():
    key = 4096 / 3  # GEMM's key, 1365.3
    close = quiz.judge(GEMM, f"{key * 0.985:.5g}").feedback
    assert close.startswith("Close, but too small by 1.5%")
    for factor, said in ((0.925, "Off by 7.5% (too small)"), (1.15, "Off by 15% (too large)"), (0.8, "Off by 20%")):
        feedback = quiz.judge(GEMM, f"{key * factor:.5g}").feedback
        assert said in feedback and "Close" not in feedback, (factor, feedback)
    assert "Too small by about 10x" in quiz.judge(GEMM, f"{key / 10:.5g}").feedback


def test_a_bare_number_off_by_a_power_of_ten_says_which_unit_it_was_read_in():
    feedback = quiz.judge(quiz.get("l13.ttft"), "33.6").feedback
    assert feedback.startswith("Read as 33.6 s; did you mean ms?")
    assert "did you mean ms?" in quiz.judge(quiz.get("l03.gemm-time-upper"), "1.467").feedback
    assert "did you mean ns?" in quiz.judge(quiz.get("l03.gemm-time-upper"), "1467e3").feedback
    assert "did you mean GB?" in quiz.judge(quiz.get("l06.ex-adam-70b"), "1120").feedback


def test_count_letters_say_how_they_were_read():
    feedback = quiz.judge(quiz.get("l06.loss-scale-normal"), "8K").feedback
    assert "Read as 8,000: K is 1,000. For 1,024 write Ki" in feedback
    assert quiz.judge(quiz.get("l06.loss-scale-normal"), "8 Ki").correct


def test_flops_and_flop_per_second_are_accepted_as_written_but_said():
    rate = quiz.judge(quiz.get("l01.achieved-rate"), "6.87e14 FLOPs")
    assert rate.correct and "FLOPs with a small s is a count of FLOPs; a rate is FLOP/s" in rate.feedback
    count = quiz.judge(quiz.get("l01.gemm-flops"), "2.4e11 FLOPS")
    assert count.correct and "FLOPS with a capital S usually means FLOP per second" in count.feedback
    assert quiz.judge(quiz.get("l01.achieved-rate"), "687 TFLOPS").feedback == ""  # the datasheet's spelling
    assert quiz.judge(quiz.get("l01.gemm-flops"), "2.4e11 FLOPs").feedback == ""


@pytest.mark.parametrize("question_id, answer, name", [
    ("l02.mlp-gemm", "7282", "elements-not-bytes"),  # the twin of l02.gemm-4096's diagnosis
    ("l04.ex-h100-peak", "646", "datasheet-over-max-boost"),  # 756 x 1.5 / 1.755 on the H100 PCIe
    ("l06.ex-fp8-scale", "2^18", "power-of-two-up"),
    ("l14.dp-critical-batch", "1923", "worked-example-h100"),
    ("l05.bf16-accumulator", "256", "worked-example"),
    ("l10.rank-first", "attention", "worked-example"),
    ("l08.gpus-for-deadline", "9358", "practice-deadline"),
    ("l12.prediction-error", "1.25", "ratio-not-error"),
    ("l10.ex-rank-next-saving", "0.1125", "worked-step-time"),
    ("l14.ex-layout", "D", "does-not-fit"),
])
def test_the_learners_slips_are_named(question_id, answer, name):
    verdict = quiz.judge(quiz.get(question_id), answer)
    assert verdict.correct is False and verdict.misconception == name, verdict.feedback


def test_twin_questions_have_twin_diagnoses():
    from roofkit.perf.inference import serving

    worked = quiz.get("l13.worked-throughput")
    p = worked.params
    node = serving.serve(p["model"], p["hw"], gpus=p["gpus"], tp=p["tp"], input_tokens=p["input_tokens"],
                         output_tokens=p["output_tokens"], dtype=p["dtype"])
    assert quiz.judge(worked, 1 / node.tpot_s).misconception == "per-user"  # as on l13.throughput
    assert "batch" not in " ".join(m.feedback for m in quiz.get("l13.attention-intensity").misconceptions)
    for qid in ("l02.gemm-4096", "l02.mlp-gemm"):
        assert "elements-not-bytes" in {m.name for m in quiz.get(qid).misconceptions}


def test_an_exact_integer_question_says_more_than_too_small():
    question = quiz.get("l04.ex-crossover")  # 886
    assert "One too few" in quiz.judge(question, 885).feedback
    assert "Off by 10% (too small)" in quiz.judge(question, 797).feedback
    assert "Too small by about 2x" in quiz.judge(question, 443).feedback or \
        quiz.judge(question, 443).misconception is not None


def test_a_formula_says_how_it_was_read():
    verdict = quiz.judge(SQUARE, "2n/3b")
    assert verdict.correct is False
    assert "'2n/3b' was read as (2*n/3)*b" in verdict.feedback and "If you meant 2*n/(3*b)" in verdict.feedback
    assert quiz.judge(SQUARE, "2n/(3b)").correct
    assert "was read as" not in quiz.judge(SQUARE, "n/b").feedback  # nothing ambiguous to say


def test_a_choice_takes_the_lessons_terms_and_says_why_a_choice_is_wrong():
    assert quiz.judge(quiz.get("l06.why-master-weights"), "update swamping").correct
    assert quiz.judge(quiz.get("l12.ex-where"), "> LLC").correct
    assert quiz.judge(BOUND, "bandwidth-bound").correct
    wrong = quiz.judge(quiz.get("l14.ex-layout"), "D")
    assert "does not fit" in wrong.feedback
    plain = Question(id="test.plain", lesson="99", kind="choice", prompt="x or y?", key=lambda: "x", choices=("x", "y"))
    assert quiz.judge(plain, "y").feedback.startswith("Not y: reread the question")


def test_renamed_ids_still_read_and_grade():
    for old, new in quiz.RENAMED.items():
        assert quiz.get(old) is quiz.get(new)
        assert quiz.by_id()[old] is quiz.get(new)
        with pytest.raises(InvalidValue, match="is the old id of"):
            quiz.register(Question(id=old, lesson="99", kind="choice", prompt="?", key=lambda: "a", choices=("a",)))
    key = quiz.get("l08.gpus-for-deadline").answer_key()
    assert quiz.check("l08.gpus-30-days", key).correct is True


def test_bad_precision_and_synonyms_are_refused():
    with pytest.raises(InvalidValue, match="figures must be"):
        Question(id="x", lesson="99", kind="numeric", prompt="", key=lambda: 1, figures=0)
    with pytest.raises(InvalidValue, match="synonyms for \\['z'\\]"):
        Question(id="x", lesson="99", kind="choice", prompt="", key=lambda: "a", choices=("a",), synonyms={"z": ("b",)})


def test_quiz_hint_from_the_command_line_ends_its_line(capsys):
    from helpers import run

    for argv in (["quiz", "hint", "l02.gemm-4096"], ["quiz", "hint", "l02.gemm-4096", "2"],
                 ["quiz", "hint", "l02.gemm-4096", "--json"]):
        code, out, _ = run(capsys, *argv)
        assert code == 0 and out.endswith("\n") and not out.endswith("\n\n"), (argv, out)
    code, out, _ = run(capsys, "quiz", "hint", "l02.gemm-4096", "2")
    assert "that was the last hint" in out


def test_record_for_the_grader(capsys):
    quiz.register(GEMM)
    verdict = quiz.check(GEMM.id, 1365)
    record = verdict.record(GEMM.params)
    assert record["id"] == GEMM.id and record["correct"] is True and record["answer"] == 1365
    assert record["params"] == quiz.params_digest(GEMM.params) != quiz.params_digest({"n": 1024, "dtype": "bf16"})
    assert "✓ correct" in capsys.readouterr().out


def test_unknown_question():
    with pytest.raises(UnknownName, match=r"Unknown question 'nope'"):
        quiz.get("nope")


def test_bad_question_definitions():
    with pytest.raises(InvalidValue, match="unknown kind 'essay'"):
        Question(id="x", lesson="99", kind="essay", prompt="", key=lambda: 1)
    with pytest.raises(InvalidValue, match="needs choices"):
        Question(id="x", lesson="99", kind="choice", prompt="", key=lambda: 1)
    assert math.isfinite(GEMM.answer_key())


def test_a_past_release_naming_an_old_id_still_grades(tmp_path):
    """A release handed out before l08.gpus-30-days was renamed: its records keep the old id, and still grade."""
    import json
    from pathlib import Path

    import nbformat

    from roofkit.grading import assign, cells, grade

    old, new = "l08.gpus-30-days", quiz.RENAMED["l08.gpus-30-days"]
    root = Path(__file__).resolve().parent.parent
    assign.main(questions=[new], name="old", out=tmp_path / "release", root=root)
    for name in ("assignment.json", "template.ipynb", "old.ipynb"):  # as the release was written then
        path = tmp_path / "release" / name
        path.write_text(path.read_text(encoding="utf-8").replace(new, old), encoding="utf-8")
    nb = nbformat.read(tmp_path / "release" / "old.ipynb", as_version=4)
    key = quiz.get(new).answer_key()
    for cell in nb.cells:
        if cells.is_answer_cell(cell):
            cell.source = f"check({old!r}, {key!r})"
    nbformat.write(nb, tmp_path / "ann.ipynb")
    result = grade.main([tmp_path / "ann.ipynb"], out=tmp_path / "grades", release=tmp_path / "release",
                        progress=False)["students"]
    assert result[0]["status"] == "graded" and result[0]["score"] == result[0]["max_score"] > 0, result
    stored = json.loads((tmp_path / "grades" / "results" / "ann.json").read_text())
    assert [(q["id"], q["verdict"]) for q in stored["questions"]] == [(old, "correct")]


def test_a_hint_in_the_middle_of_a_cell_is_shown(monkeypatch):
    """The learner's hint('id') mid-cell printed nothing: only a cell's last value is shown. hint() shows itself."""
    import IPython
    import IPython.display

    shown = []
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append(obj))
    quiz.register(GEMM)
    quiz._hints_shown.pop(GEMM.id, None)
    text = quiz.hint(GEMM.id)
    assert shown == [{"text/plain": str(text)}] and "hint 1/2" in text
    assert text._ipython_display_() is None  # as a cell's last value, it is not shown a second time
