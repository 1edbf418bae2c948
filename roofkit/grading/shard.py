"""Grading past one machine: shard K of N, then one gradebook from all the shards.

``roofkit grade SUBMISSIONS ... --shard K/N --out OUT-K`` grades the students
whose id falls in shard K, a split that depends on the id alone

    shard = SHA-256("roofkit-shard" | id) mod N, + 1

so every machine, run and batch system splits a class the same way without
talking to the others. Each shard writes the usual ``results/``,
gradebook and feedback for its students, and ``shard.json``: what it graded
and with what (release, secret and bank fingerprints, limits, grader version).

``roofkit grade --merge OUT-1 ... OUT-N --out OUT`` checks that the shards are
all N shards of one grading (same release, same limits, each shard once) and
builds one gradebook, results file and feedback set from their result files,
exactly as one run on one machine would have.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from ..errors import InvalidValue

__all__ = ["parse", "owner", "MANIFEST", "manifest", "merge"]

MANIFEST = "shard.json"
_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


def parse(text: str) -> tuple[int, int]:
    """'2/8' -> (2, 8): shard 2 of 8, counted from 1."""
    match = _SPEC.fullmatch(str(text))
    k, n = (int(match[1]), int(match[2])) if match else (0, 0)
    if not match or n < 1 or not 1 <= k <= n:
        raise InvalidValue(f"--shard expects K/N with 1 <= K <= N, such as 1/4 or 4/4; got {text!r}.")
    return k, n


def owner(student: str, n: int) -> int:
    """The shard (1..n) that grades ``student``."""
    digest = hashlib.sha256(b"roofkit-shard\x00" + student.encode()).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def manifest(context, k: int, n: int, students: list[str]) -> dict:
    """What a shard records about itself, for :func:`merge`."""
    from dataclasses import asdict

    release = context.release.manifest if context.release else {}
    return {"roofkit_shard": 1, "shard": [k, n], "assignment": context.name, "fingerprint": context.fingerprint,
            "release": {"name": release.get("name"), "template_sha256": release.get("template_sha256"),
                        "secret_fingerprint": release.get("secret_fingerprint"),
                        "bank": (release.get("bank") or {}).get("source_sha256")},
            "limits": asdict(context.limits), "questions": context.questions, "roster": context.roster,
            "people": release.get("people") or {}, "students": students}


def _read(folder: Path) -> dict:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise InvalidValue(f"{str(folder)!r} is not the output of a sharded grading (no {MANIFEST}): grade with "
                           "--shard K/N --out FOLDER first.") from None
    if not isinstance(data, dict) or data.get("roofkit_shard") != 1:
        raise InvalidValue(f"{str(folder / MANIFEST)!r} is not a shard manifest written by roofkit grade.")
    return data


def _same(first: dict, other: dict, where: str, first_where: str) -> None:
    a, b = first["release"], other["release"]
    if (first["assignment"], a) != (other["assignment"], b):
        what = [k for k in a if a.get(k) != b.get(k)] or ["name"]
        raise InvalidValue(f"{where} is a grading of another release than {first_where} (they differ in "
                           f"{', '.join(what)}): merge the shards of one release.")
    if first["limits"] != other["limits"]:
        diff = ", ".join(f"{k} {other['limits'].get(k)} vs {v}" for k, v in first["limits"].items()
                         if other["limits"].get(k) != v)
        raise InvalidValue(f"{where} was graded with other limits than {first_where} ({diff}): grade every "
                           "shard with the same --timeout and --cell-timeout.")
    if first["fingerprint"] != other["fingerprint"]:
        raise InvalidValue(f"{where} was graded with other settings than {first_where} (another roofkit "
                           "version, or another bank): grade every shard the same way.")
    if first["shard"][1] != other["shard"][1]:
        raise InvalidValue(f"{where} is shard {other['shard'][0]}/{other['shard'][1]}, {first_where} is "
                           f"{first['shard'][0]}/{first['shard'][1]}: merge shards of one split.")


def merge(folders: list[str | Path], *, out: str | Path) -> dict:
    """Build OUT's gradebook, results.json and feedback from shard outputs; return the report's summary."""
    from . import report
    from .grade import RESULTS, write_atomic

    folders = [Path(f) for f in folders]
    out = Path(out)
    if not folders:
        raise InvalidValue("--merge needs the output folders of the shards.")
    if any(f.resolve() == out.resolve() for f in folders):
        raise InvalidValue(f"--out {str(out)!r} is one of the shards: merge into a folder of its own.")
    shards = [_read(f) for f in folders]
    first = shards[0]
    for folder, data in zip(folders[1:], shards[1:]):
        _same(first, data, repr(str(folder)), repr(str(folders[0])))
    n = first["shard"][1]
    seen: dict[int, Path] = {}
    for folder, data in zip(folders, shards):
        k = data["shard"][0]
        if k in seen:
            raise InvalidValue(f"shard {k}/{n} is given twice ({str(seen[k])!r} and {str(folder)!r}).")
        seen[k] = folder
    missing = sorted(set(range(1, n + 1)) - set(seen))
    if missing:
        raise InvalidValue(f"shard(s) {', '.join(f'{k}/{n}' for k in missing)} missing: merge all {n} shards, "
                           "or the students they hold would be listed as missing.")
    results: dict[str, tuple[Path, str]] = {}
    for folder, data in zip(folders, shards):
        for path in sorted((folder / RESULTS).glob("*.json")):
            if path.name.startswith("."):
                continue
            try:
                result = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(result, dict) or result.get("roofkit_result") != 1 \
                    or result.get("assignment") != first["assignment"]:
                continue
            student = str(result.get("student"))
            if result.get("fingerprint") != first["fingerprint"]:
                raise InvalidValue(f"{str(path)!r} was graded with other settings than its shard: grade shard "
                                   f"{data['shard'][0]}/{n} again before merging.")
            if owner(student, n) != data["shard"][0] or student in results:
                raise InvalidValue(f"{str(path)!r}: student {student!r} belongs to shard {owner(student, n)}/{n}, "
                                   f"not {data['shard'][0]}/{n}.")
            results[student] = (path, path.read_text(encoding="utf-8"))
    (out / RESULTS).mkdir(parents=True, exist_ok=True)
    for old in (out / RESULTS).glob("*.json"):  # a merge replaces what an earlier merge wrote
        if old.stem not in results:
            old.unlink()
    for student, (_, text) in sorted(results.items()):
        write_atomic(out / RESULTS / f"{student}.json", text)
    summary = report.main(out, assignment=first["assignment"], roster=first["roster"],
                          questions=first["questions"] or None)
    write_atomic(out / "merged.json", json.dumps({"roofkit_merged": 1, "assignment": first["assignment"],
                                                  "fingerprint": first["fingerprint"], "shards": n,
                                                  "from": [str(f) for f in folders], "people": first["people"],
                                                  "students": len(results)}, indent=1) + "\n")
    summary.update(merged=[str(f) for f in folders], people=first["people"])
    return summary
