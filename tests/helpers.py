"""What several test files do the same way: run the command line in-process, judge a question's answer.

Imported as ``helpers`` (pytest puts tests/ on the path, as for ``fuzz_paths``).
"""

import json

from roofkit import cli, quiz


def run(capsys, *argv):
    """``roofkit ARGV...`` in this process: (exit code, stdout, stderr). Arguments may be numbers."""
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *argv):
    """``roofkit ARGV... --json``, which must succeed: the one object it prints."""
    code, out, err = run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def verdict(qid, answer, **params):
    """The verdict on ``answer`` to question ``qid`` (with the class variant's ``params``, if any)."""
    question = quiz.get(qid)
    return quiz.judge(question.with_params(**params) if params else question, answer)
