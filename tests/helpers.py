"""What several test files do the same way: run the command line in-process, judge a question's answer.

Imported as ``helpers`` (pytest puts tests/ on the path, as for ``fuzz_paths``).
"""

import contextlib
import json
import shutil
from pathlib import Path

import nbformat

from roofkit import cli
from roofkit.catalogs import hardware
from roofkit.course import quiz
from roofkit.grading import cells


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


def roofkit_with_data(where: Path, edits: dict[str, tuple[str, str]]) -> Path:
    """A copy of the roofkit package under ``where`` whose data files are edited (file in roofkit/data ->
    (old, new), each ``old`` found exactly once); put the returned folder first on PYTHONPATH to use it."""
    package = Path(where)
    shutil.copytree(Path(__file__).resolve().parent.parent / "roofkit", package / "roofkit",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name, (old, new) in edits.items():
        path = package / "roofkit" / "data" / name
        text = path.read_text(encoding="utf-8")
        assert text.count(old) == 1, (name, old)
        path.write_text(text.replace(old, new), encoding="utf-8")
    return package


def keys_as_typed(release: Path, secret_file: Path, student: str) -> dict[str, str]:
    """``student``'s key of every question of a release that is not code, as the text a student types."""
    from roofkit.grading import assign, variants

    manifest = assign.read_release(release).manifest
    numbers = assign.numbers(manifest, variants.read_secret(secret_file), student)
    out = {}
    for q in manifest["questions"]:
        question = quiz.get(q["id"]).with_params(**numbers.get(q["id"], {}))
        if question.kind != "code":
            out[q["id"]] = str(question.answer_key())
    return out


def right_answers(release: Path, student: str, name: str = "hw") -> dict[str, str]:
    """Right answers to ``student``'s notebook ``name`` in a release, as the cell sources a student would write."""
    nb = nbformat.read(release / "students" / student / f"{name}.ipynb", as_version=4)
    variant = nb.metadata["roofkit"]["variant"]
    out = {}
    for cell in nb.cells:
        if cells.is_answer_cell(cell):
            qid = cells.checked_ids(cell.source)[0]
            question = quiz.get(qid).with_params(**variant.get(qid, {}))
            if question.kind == "code":
                out[qid] = "def fma_flops(fmas):\n    return 2 * fmas\n\ncheck('l00.code-flops', fma_flops)"
            else:
                key = question.answer_key()
                out[qid] = f"answer = {str(key) if question.kind == 'symbolic' else key!r}\ncheck({qid!r}, answer)"
    return out


def submission(release: Path, student: str, sources: dict[str, str], before=(), after=(), name: str = "hw"):
    """``student``'s notebook ``name`` with these answer-cell ``sources`` (by question id), and cells of code added
    ``before`` the first answer and ``after`` the last cell."""
    nb = nbformat.read(release / "students" / student / f"{name}.ipynb", as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if cells.is_answer_cell(c))
    for cell in nb.cells:
        if cells.is_answer_cell(cell):
            qid = cells.checked_ids(cell.source)[0]
            if qid in sources:
                cell.source = sources[qid]
    nb.cells[first:first] = [nbformat.v4.new_code_cell(code) for code in before]
    nb.cells += [nbformat.v4.new_code_cell(code) for code in after]
    return nb
