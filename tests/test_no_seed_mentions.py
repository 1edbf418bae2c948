"""Learner-facing text never cites the private source notes the course was written from.

The curriculum was written from three private documents, known to its authors
as "seed 000", "seed 003" and "seed 004". A learner has never seen them, so
"seed 003's exercise 5" or "as 000 writes" tells a learner nothing: the text
must cite what a learner can look up (a paper, a datasheet, a public book or
guide, by name) or say "a common claim is". This test reads everything a
learner reads: the lessons, the generated notebooks (their outputs too), the
README and docs, roofkit's source (docstrings, comments, the hardware catalog's
notes) and the question bank as it is shown (prompts, hints, choices,
misconception names and feedback), and the static site as built.

A random number generator's seed ("seed every random generator", ``seed=0``)
is not a mention: the patterns below need a document number, the words
"seed notes", or "the seed" used as a source.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A standalone 000/003/004: not part of a longer number ("10,000", "0.003", "2000", "v003").
_DOC = r"(?<![\w.,/\-])00[034](?![\w.,/\-]*\d)"
MENTION = re.compile(
    "|".join([
        r"\bseeds?[\s_\-:#]*(?:no\.?\s*)?00[034](?![\w.,]*\d)",  # seed 003, seed-000, seeds 000 and 003
        r"\bseed[\s_\-]*(?:notes?|documents?|files?|sources?|material)\b",  # seed notes, seed-notes
        r"\bseeds/",                                        # the folder of the notes
        r"\b00[034]_[0-9a-f]{8,}",                          # their file names
        rf"{_DOC}['’]s\b",                                  # 003's exercise, 000's practice problem
        rf"\bthe\s+{_DOC}\b",                               # the 003 GEMV
        rf"{_DOC}\s+(?:says|said|writes|wrote|gives|gave|first|gets|got|calls|puts|quotes|asks|lists|"
        r"concludes|notes|uses|counts|computes|argues|claims|reports|states|has|is|and)\b",   # 000 writes, 003 and 004
        rf"\((?:see\s+)?{_DOC}\)",                          # (004)
        r"\bthe\s+seeds?(?:['’]s)?\s+(?!of\b|=|value|argument|parameter|for\b)\w",  # the seed leaves it, the seed's figure
        r"\bseed(?:['’]s)\s+(?:figure|number|value|list|table|exercise|quiz|claim|formula|example|problem)s?\b",
    ]),
    re.IGNORECASE,
)

LEARNER_FILES = (
    sorted((ROOT / "lessons").glob("*.md"))
    + sorted((ROOT / "docs").rglob("*.md"))
    + [ROOT / "README.md"]
    + sorted(p for p in (ROOT / "roofkit").rglob("*") if p.suffix in {".py", ".toml", ".md", ".txt", ".json"}
             and "__pycache__" not in p.parts)
)
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "solutions").glob("*.ipynb"))


def mentions(text: str) -> list[str]:
    """Each line of ``text`` that mentions the source notes, with its line number."""
    return [f"line {i}: {line.strip()[:160]}" for i, line in enumerate(text.splitlines(), 1) if MENTION.search(line)]


@pytest.mark.parametrize("text", [
    "Seed 003's exercise 5 asks for the bandwidth saved", "as in seed 000's GELU quiz", "(seed 004)",
    "Seed 003 writes 295 and seed 000 writes 296", "while 000 first rounds the peak", "the 003 GEMV \"0.5\"",
    "with the seed's 201 FLOP/byte", "the seed leaves it to judgement", "see /work/shared/seed-notes.md",
    "000's practice problem 1(b)", "004's list of balance-point sizes", "seeds/003_248a6f41bdab53e9.txt",
    "The pattern of seed-000's table", "Seed 003 also says", "the heuristic bands (004)",
])
def test_the_patterns_catch_real_mentions(text):
    assert MENTION.search(text), text


@pytest.mark.parametrize("text", [
    "seed every random generator", "rng = np.random.default_rng(seed=0)", "the generator's seed, not from memory",
    "Seeded, hence reproducible.", "10,000 steps", "an addend of 0.003", "2,000 steps in a row", "1000 updates",
    "the seed of the random generator", "variants drawn from the course secret (a seed per student)",
    "ids 000 to 999 are free", "def example_gradients(n=10_000, seed=0)", "v004 of the API", "1,000,000 tokens",
    "mask regenerated from the RNG seed, not stored", "seed = int(nonnegative(seed, \"seed\"))",
])
def test_the_patterns_leave_random_seeds_and_numbers_alone(text):
    assert not MENTION.search(text), text


@pytest.mark.parametrize("path", LEARNER_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_seed_mention_in_learner_facing_files(path):
    found = mentions(path.read_text(encoding="utf-8", errors="replace"))
    assert not found, f"{path.relative_to(ROOT)} cites the private source notes:\n" + "\n".join(found)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_seed_mention_in_notebooks_or_their_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for index, cell in enumerate(nb["cells"]):
        texts = ["".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]]
        for output in cell.get("outputs", []):
            texts.append("".join(output.get("text", "")))
            texts += ["".join(v) if isinstance(v, list) else str(v) for k, v in output.get("data", {}).items()
                      if k.startswith("text/")]
        found += [f"cell {index}, {line}" for text in texts for line in mentions(text)]
    assert not found, f"{path.relative_to(ROOT)} cites the private source notes:\n" + "\n".join(found)


def _bank_strings():
    from roofkit.course import quiz

    quiz.questions()  # loads the whole bank
    for question in quiz.questions():
        yield question.id, "prompt", question.text()
        yield question.id, "raw prompt", question.prompt
        for i, hint in enumerate(question.hints, 1):
            yield question.id, f"hint {i}", hint
        for choice in question.choices:
            yield question.id, "choice", choice
        for m in question.misconceptions:
            yield question.id, f"misconception {m.name}", f"{m.name}: {m.feedback}"


def test_no_seed_mention_in_the_question_bank():
    found = [f"{qid} {where}: {text[:160]}" for qid, where, text in _bank_strings() if MENTION.search(text)]
    assert not found, "the question bank cites the private source notes:\n" + "\n".join(found)


@pytest.mark.slow  # renders every notebook to HTML
def test_no_seed_mention_on_the_built_site(tmp_path):
    from roofkit.course.site import build_site

    pages = build_site(ROOT, tmp_path / "_site", progress=False)
    found = []
    for page in [*pages, tmp_path / "_site" / "lessons.json"]:
        text = re.sub(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+", "", page.read_text(encoding="utf-8"))  # figures
        found += [f"{page.relative_to(tmp_path)} {line}" for line in mentions(text)]
    assert not found, "the static site cites the private source notes:\n" + "\n".join(found)
