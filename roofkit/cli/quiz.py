"""roofkit quiz list | show | check | hint: the course's self-checking questions from a terminal.

``quiz check`` exits 0 when the answer is right, 1 when it is wrong (or not
answered), and 2 when the answer cannot be read at all.
"""

from __future__ import annotations

from ..errors import InvalidValue
from ._common import Parser, count, emit, table

EXIT_WRONG = 1


def cmd_list(args) -> None:
    from ..course import quiz  # deferred: loaded only when this command runs

    items = [q.to_dict() for q in quiz.questions(args.lesson)]
    emit(args, {"questions": items},
         table([(q["id"], f"lesson {q['lesson']}, {q['kind']}, {q['points']:g} pt") for q in items]) or ["no questions"])


def cmd_show(args) -> None:
    from ..course import quiz  # deferred: loaded only when this command runs

    question = quiz.get(args.id)
    how = quiz.how_to_answer(question)
    data = {**question.to_dict(), "prompt": question.text(), "unit": question.unit, "choices": list(question.choices),
            "how_to_answer": how, "hints": len(question.hints)}
    lines = [f"{question.id} (lesson {question.lesson}, {question.kind}, {question.points:g} pt)", question.text()]
    lines += [f"choices: {', '.join(question.choices)}"] if question.choices else []
    lines += [how] if how else []
    lines.append(f"answer with: roofkit quiz check {question.id} \"your answer\"" if question.kind != "code" else
                 f"answer from Python: check({question.id!r}, your_function)")
    emit(args, data, lines)


def cmd_check(args) -> None:
    from ..course import quiz  # deferred: loaded only when this command runs

    question = quiz.get(args.id)
    if question.kind == "code":
        raise InvalidValue(f"{args.id} is a code question: check it from Python, check({args.id!r}, your_function).")
    verdict = quiz.judge(question, args.answer, where="cli")
    if verdict.unreadable:  # one line on stderr and exit 2, as for any input error; --json also gets the verdict
        if getattr(args, "json", False):
            emit(args, verdict.to_dict(), [])
        raise InvalidValue(f"{question.id}: {verdict.feedback}")
    emit(args, verdict.to_dict(), [str(verdict)])
    if verdict.correct is not True:
        raise SystemExit(EXIT_WRONG)


def cmd_hint(args) -> None:
    from ..course import quiz  # deferred: loaded only when this command runs

    question = quiz.get(args.id)
    text = quiz.hint_text(question, args.n)
    last = " (that was the last hint)" if question.hints and args.n == len(question.hints) else ""
    emit(args, {"id": question.id, "hint": args.n, "hints": len(question.hints), "text": text},
         [f"[{question.id}] hint {args.n}/{len(question.hints)}: {text}{last}" if question.hints else text])


def register(sub, common) -> None:
    quiz = sub.add_parser("quiz", help="the course's self-checking questions", parents=[common])
    quiz_sub = quiz.add_subparsers(dest="quiz_command", metavar="{list,show,check,hint}", parser_class=Parser)
    quiz_sub.required = True
    qlist = quiz_sub.add_parser("list", help="every question: id, lesson, kind, points", parents=[common])
    qlist.add_argument("--lesson", help="only this lesson's questions, e.g. 03")
    qlist.set_defaults(func=cmd_list)
    qshow = quiz_sub.add_parser("show", help="a question's text as the lesson asks it: quiz show l03.ridge-bf16",
                                parents=[common])
    qshow.add_argument("id", help="question id (see quiz list)")
    qshow.set_defaults(func=cmd_show)
    qcheck = quiz_sub.add_parser(
        "check", help="check an answer, e.g. quiz check l02.gemm-4096 1365 (exit 0 right, 1 wrong, 2 unreadable)",
        parents=[common])
    qcheck.add_argument("id", help="question id (see quiz list)")
    qcheck.add_argument("answer", help="your answer: a number, a number with a unit ('296 FLOP/byte'), an expression or a choice")
    qcheck.set_defaults(func=cmd_check)
    qhint = quiz_sub.add_parser("hint", help="a question's hints, one at a time: quiz hint l03.ridge-bf16 2",
                                parents=[common])
    qhint.add_argument("id", help="question id (see quiz list)")
    qhint.add_argument("n", nargs="?", type=count("hint number"), default=1, help="which hint (default 1)")
    qhint.set_defaults(func=cmd_hint)
