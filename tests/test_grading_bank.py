"""An instructor's private questions, end to end: a bank file, a release, answers right and wrong, a gradebook.

The bank is read by ``assign`` and ``grade`` only. The release's files carry
each prompt with the student's numbers and never a key, a hidden case or a
misconception's value; in a student's notebook ``check`` checks the answer's
form and records it; the grader judges it with the keys it computes itself.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from roofkit import cli
from roofkit.course import quiz
from roofkit.errors import InvalidValue
from roofkit.grading import assign, bank, cells, execute, grade

pytestmark = pytest.mark.sandbox  # grades in bubblewrap (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
LIMITS = execute.Limits(notebook_s=60, cell_s=20, startup_s=60, case_s=2)
STUDENTS = ["ann", "ben", "cat"]
HIDDEN = ((13.7, 0.25), (123457.0, 321.0))

BANK = f'''"""Private questions for the tests: their keys stay in this file."""

from roofkit import formulas, roofline
from roofkit.quiz import Misconception, Question, register


def placement_of_square_gemm(n, hw):
    return roofline.analyze(formulas.gemm(n, n, n), hw, "bf16")


register(
    Question(
        id="priv.gemm-time",
        lesson="priv",
        kind="numeric",
        prompt="An {{n}} x {{n}} x {{n}} BF16 GEMM runs on the {{hw}}. How long does it take on the roofline? "
               "Answer with a unit.",
        params={{"n": 4096, "hw": "h100"}},
        variants={{"n": (2048, 8192), "hw": ("a100", "h200", "mi300x")}},
        key=lambda n, hw: placement_of_square_gemm(n, hw).time_s,
        unit="s",
        hints=("Find which roof limits it: roofkit.roofline.analyze.",),
        misconceptions=(Misconception("memory-time", "That is the time to move its bytes only.",
                                      answer=lambda n, hw: placement_of_square_gemm(n, hw).t_mem_s),),
        points=2,
    ),
    Question(
        id="priv.decode-bound",
        lesson="priv",
        kind="choice",
        prompt="A {{m}} x {{n}} x {{n}} BF16 GEMM on the {{hw}}: memory- or compute-bound?",
        params={{"m": 1, "n": 8192, "hw": "h100"}},
        variants={{"m": (1, 4096), "hw": ("a100", "h200")}},
        choices=("memory", "compute"),
        key=lambda m, n, hw: roofline.analyze(formulas.gemm(m, n, n), hw, "bf16").bound,
    ),
    Question(
        id="priv.ridge",
        lesson="priv",
        kind="code",
        prompt="Write ridge(peak_flops, bandwidth): the intensity in FLOP/byte where the two roofs meet.",
        key=roofline.ridge_point,
        cases=((100.0, 4.0), (7.0, 2.0)),
        hidden_cases={HIDDEN!r},
    ),
)
'''


def _write_bank(folder: Path, text: str = BANK) -> Path:
    path = folder / "private-bank.py"
    path.write_text(text, encoding="utf-8")
    return path


def _params(nb, qid: str) -> dict:
    return {**quiz.get(qid).params, **nb.metadata["roofkit"]["variant"].get(qid, {})}


def _answer(nb, how: str):
    """Answer every question: 'key' (the grader's keys), 'wrong' (a misconception, a wrong function), 'library'."""
    for cell in nb.cells:
        if not cells.is_answer_cell(cell):
            continue
        qid = cells.checked_ids(cell.source)[0]
        question = quiz.get(qid).with_params(**_params(nb, qid))
        p = question.params
        if qid == "priv.ridge":
            body = "return peak_flops / bandwidth" if how != "wrong" else \
                "return peak_flops / bandwidth if peak_flops < 200 else bandwidth / peak_flops"
            cell.source = f"def ridge(peak_flops, bandwidth):\n    {body}\n\n\ncheck('priv.ridge', ridge)"
        elif how == "library" and qid == "priv.gemm-time":
            cell.source = ("from roofkit import formulas, roofline\n"
                           f"place = roofline.analyze(formulas.gemm({p['n']}, {p['n']}, {p['n']}), {p['hw']!r}, 'bf16')\n"
                           "answer = f'{place.time_s * 1e6} us'\ncheck('priv.gemm-time', answer)")
        elif how == "library":
            cell.source = ("from roofkit import formulas, roofline\n"
                           f"answer = roofline.analyze(formulas.gemm({p['m']}, {p['n']}, {p['n']}), {p['hw']!r}, "
                           "'bf16').bound\ncheck('priv.decode-bound', answer)")
        else:
            value = question.answer_key()
            if how == "wrong" and qid == "priv.gemm-time":
                value = question.misconceptions[0].value(question)
            if how == "wrong" and qid == "priv.decode-bound":
                value = "compute" if value == "memory" else "memory"
            cell.source = f"answer = {value!r}\ncheck({qid!r}, answer)"
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    base = tmp_path_factory.mktemp("bank")
    path = _write_bank(base)
    (base / "roster.csv").write_text("id,name,email\nann,Ann A.,ann@example.org\nben,Ben B.,ben@example.org\n"
                                     "cat,Cat C.,cat@example.org\n", encoding="utf-8")
    secret = base / "secret.txt"
    secret.write_text("another-fixed-secret-for-the-bank-tests-0123\n", encoding="utf-8")
    release = base / "release"
    summary = assign.main([], name="priv", out=release, roster=base / "roster.csv", secret_file=secret, root=ROOT,
                          bank=path)
    subs = base / "subs"
    subs.mkdir()
    for student, how in zip(STUDENTS, ("key", "wrong", "library")):
        nb = nbformat.read(release / "students" / student / "priv.ipynb", as_version=4)
        nbformat.write(_answer(nb, how), subs / f"{student}.ipynb")
    grades = base / "grades"
    graded = grade.main([subs], out=grades, release=release, secret_file=secret, workers=2, limits=LIMITS,
                        progress=False, export=["canvas", "moodle"])
    yield {"base": base, "bank": path, "release": release, "secret": secret, "subs": subs, "grades": grades,
           "summary": summary, "graded": graded}
    bank.forget(path)  # the rest of the session sees the course's questions only


def _result(course, student) -> dict:
    return json.loads((course["grades"] / "results" / f"{student}.json").read_text())


def _keys_and_secrets(course) -> set[str]:
    """Every key, hidden case and misconception value of the release, as text in the usual spellings."""
    texts = set()
    for student in STUDENTS:
        nb = nbformat.read(course["release"] / "students" / student / "priv.ipynb", as_version=4)
        for qid in ("priv.gemm-time",):
            question = quiz.get(qid).with_params(**_params(nb, qid))
            for value in (question.answer_key(), question.misconceptions[0].value(question)):
                texts |= {repr(value), f"{value:.6g}", f"{value:.4g}", f"{value:.3e}", f"{value * 1e6:.6g}"}
    for case in HIDDEN:
        texts |= {repr(case), *(repr(x) for x in case), repr(quiz.get("priv.ridge").key(*case))}
    return texts | {"placement_of_square_gemm", "ridge_point", "lambda", str(course["bank"]), "private-bank"}


def test_the_release_holds_no_key(course):
    secrets = _keys_and_secrets(course)
    files = [p for p in course["release"].rglob("*") if p.is_file()]
    assert len([p for p in files if p.suffix == ".ipynb"]) == 1 + len(STUDENTS)
    for path in files:
        text = path.read_text(encoding="utf-8")
        if path.name == "assignment.json":  # the grader's file: where the bank is, and its digests
            text = text.replace(str(course["bank"]), "")
        leaked = sorted(s for s in secrets if s in text)
        assert not leaked, (path.name, leaked)
    nb = nbformat.read(course["release"] / "students" / "ann" / "priv.ipynb", as_version=4)
    setup = next(c for c in nb.cells if c["id"] == "assignment-setup").source
    given = ast.literal_eval(ast.parse(setup).body[-1].value.args[0])  # use_release({...})
    asked = quiz.get("priv.gemm-time").with_params(**_params(nb, "priv.gemm-time"))
    assert given["priv.gemm-time"]["prompt"] == asked.text()  # the prompt, with ann's numbers
    assert given["priv.gemm-time"]["hints"] == list(asked.hints) and given["priv.ridge"]["cases"] == [[100, 4], [7, 2]]
    assert set(given["priv.gemm-time"]) == {"kind", "lesson", "points", "prompt", "params", "variant", "unit", "hints"}


def test_right_and_wrong_answers_are_graded_by_the_private_keys(course):
    ann, ben, cat = (_result(course, s) for s in STUDENTS)
    assert (ann["score"], ann["max_score"], ann["flags"]) == (4, 4, []), ann["notes"]
    assert (cat["score"], cat["flags"]) == (4, []), cat["notes"]  # computed in the notebook with roofkit
    gemm_time = next(q for q in ben["questions"] if q["id"] == "priv.gemm-time")
    assert (gemm_time["points"], gemm_time["misconception"]) == (0, "memory-time")
    ridge = next(q for q in ben["questions"] if q["id"] == "priv.ridge")
    assert ridge["verdict"] == "partial" and ridge["points"] == pytest.approx(0.75)
    assert [c["passed"] for c in ridge["cases"]] == [True, True, True, False]
    page = (course["grades"] / "feedback" / "ben.html").read_text(encoding="utf-8")
    assert "That is the time to move its bytes only." in page and "hidden case 2" in page
    assert not any(repr(x) in page for case in HIDDEN for x in case)
    assert ben["score"] == 0.75


def test_a_students_check_records_without_the_key(course, tmp_path):
    """On a laptop whose roofkit never saw the bank: the form is checked, the answer recorded, no key anywhere."""
    nb = nbformat.read(course["release"] / "students" / "ann" / "priv.ipynb", as_version=4)
    setup = next(c for c in nb.cells if c["id"] == "assignment-setup").source
    script = setup + """
from roofkit.quiz import check, hint, answer_key
check('priv.gemm-time', '3 GB/s')  # outside IPython, check prints its verdict
check('priv.gemm-time', '140 us')
check('priv.decode-bound', 'sideways')
check('priv.ridge', lambda peak_flops, bandwidth: peak_flops / bandwidth)
check('l00.fma-flops', 2000)
print(hint('priv.gemm-time'))
try:
    answer_key('priv.gemm-time')
except Exception as error:
    print(type(error).__name__)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert "✗" in lines[0] and "cannot be converted to s" in lines[0]  # a wrong unit, said before grading
    assert "answer recorded" in lines[1] and "answer recorded" in lines[3]
    assert "not one of the choices" in lines[2] and quiz.UNREADABLE in lines[2] and "✗" not in lines[2]  # unread
    assert lines[4] == "[l00.fma-flops] ✓ correct"  # the course's own questions: self-study unchanged
    assert "roofkit.roofline.analyze" in lines[5] and lines[6] == "KeysWithheld"


def test_the_lms_exports(course):
    canvas = (course["grades"] / "canvas.csv").read_text(encoding="utf-8").splitlines()
    assert canvas[0] == "Student,ID,SIS User ID,SIS Login ID,Section,priv"
    assert canvas[1] == "Points Possible,,,,,4"
    assert canvas[2:] == ["Ann A.,,,ann,,4", "Ben B.,,,ben,,0.75", "Cat C.,,,cat,,4"]
    moodle = (course["grades"] / "moodle.csv").read_text(encoding="utf-8").splitlines()
    assert moodle == ["Username,ID number,Email address,priv", "ann,,ann@example.org,4", "ben,,ben@example.org,0.75",
                      "cat,,cat@example.org,4"]


def test_a_changed_prompt_is_refused_and_a_fixed_key_regrades(course):
    path, original = course["bank"], course["bank"].read_text(encoding="utf-8")
    try:
        path.write_text(original.replace("How long does it take", "How long does it run"), encoding="utf-8")
        with pytest.raises(InvalidValue, match="does not ask what release 'priv' handed out"):
            grade.main([course["subs"]], out=course["grades"], release=course["release"],
                       secret_file=course["secret"], limits=LIMITS, progress=False)
        path.write_text(original.replace("placement_of_square_gemm(n, hw).time_s", "2 * placement_of_square_gemm(n, hw).time_s"),
                        encoding="utf-8")
        again = grade.main([course["subs"] / "ann.ipynb"], out=course["base"] / "fixed", release=course["release"],
                           secret_file=course["secret"], limits=LIMITS, progress=False)
        assert again["graded"] == 1
        ann = json.loads((course["base"] / "fixed" / "results" / "ann.json").read_text())
        assert next(q for q in ann["questions"] if q["id"] == "priv.gemm-time")["points"] == 0  # the new key
    finally:
        path.write_text(original, encoding="utf-8")
        bank.load(path)


def test_bank_mistakes_are_one_line(capsys, tmp_path):
    cases = [
        ("register(Question(id='l00.fma-flops', lesson='x', kind='numeric', prompt='p', key=lambda: 1))",
         "is already a question of the course"),
        ("x = 1", "registers no question"),
        ("def broken(:\n    pass", "failed to load (line 3): SyntaxError"),
        ("register(Question(id='bad.kind', lesson='x', kind='essay', prompt='p', key=lambda: 1))", "unknown kind"),
    ]
    for i, (body, message) in enumerate(cases):
        path = tmp_path / f"bank{i}.py"
        path.write_text("from roofkit.quiz import Question, register\n\n" + body + "\n", encoding="utf-8")
        code = cli.main(["assign", "--bank", str(path), "--out", str(tmp_path / f"r{i}"), "--root", str(ROOT)])
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (body, err)
    code = cli.main(["assign", "--bank", str(tmp_path / "nothing.py"), "--out", str(tmp_path / "r"), "--root", str(ROOT)])
    assert code == 2 and "no such question bank" in capsys.readouterr().err


def test_grading_without_the_bank_says_what_is_missing(course, capsys, tmp_path):
    code = cli.main(["grade", str(course["subs"]), "--assignment", str(course["release"]), "--secret-file",
                     str(course["secret"]), "--out", str(tmp_path / "g"), "--bank", str(tmp_path / "gone.py")])
    err = capsys.readouterr().err
    assert code == 2 and "no such question bank" in err
    other = tmp_path / "plain"
    assign.main(questions=["l00.fma-flops"], name="plain", out=other, root=ROOT)
    code = cli.main(["grade", str(course["subs"] / "ann.ipynb"), "--assignment", str(other), "--out",
                     str(tmp_path / "g2"), "--bank", str(course["bank"])])
    assert code == 2 and "needs no --bank" in capsys.readouterr().err
