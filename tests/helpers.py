"""What several test files do the same way: run the command line in-process, judge a question's answer.

Imported as ``helpers`` (pytest puts tests/ on the path, as for ``fuzz_paths``).
"""

import contextlib
import json

from roofkit import cli
from roofkit.catalogs import hardware
from roofkit.course import quiz


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


@contextlib.contextmanager
def scratch_hardware_catalog():
    """Let the block register accelerators, then put the module-global catalog back as it was."""
    saved = hardware.CATALOG.snapshot()
    try:
        yield
    finally:
        hardware.CATALOG.restore(saved)
