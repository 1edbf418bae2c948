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
exactly as one run on one machine would have. With a course secret
(``--secret-file``), every manifest and result file must carry its signature
(:mod:`roofkit.grading.results`): a shard with a changed file is refused. A
result whose student is not a valid id (:mod:`roofkit.grading.ids`) is
reported and left out; nothing is ever written outside ``--out``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict
from pathlib import Path

from ..errors import InvalidValue
from . import files, ids, report, results, variants
from .results import RESULTS

__all__ = ["parse", "owner", "MANIFEST", "manifest", "write_manifest", "merge"]

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
    release = context.release.manifest if context.release else {}
    return {"roofkit_shard": 1, "shard": [k, n], "assignment": context.name, "fingerprint": context.fingerprint,
            "release": {"name": release.get("name"), "template_sha256": release.get("template_sha256"),
                        "secret_fingerprint": release.get("secret_fingerprint"),
                        "bank": (release.get("bank") or {}).get("source_sha256")},
            "limits": asdict(context.limits), "questions": context.questions, "roster": context.roster,
            "people": release.get("people") or {}, "students": students}


def write_manifest(out: Path, data: dict, signing_key: bytes | None) -> None:
    """Write OUT/shard.json, signed like a result."""
    files.write_atomic(Path(out) / MANIFEST, json.dumps(results.sign(data, signing_key), indent=1) + "\n")


def _read(folder: Path) -> dict:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
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


def merge(folders: list[str | Path], *, out: str | Path, secret_file: str | Path | None = None) -> dict:
    """Build OUT's gradebook, results.json and feedback from shard outputs; return the report's summary.

    ``secret_file``: the course secret, needed when the release has one (the shards' files are signed with it).
    """
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
    expected = first["release"].get("secret_fingerprint")
    secret = variants.read_secret(secret_file) if secret_file else None
    if expected and secret is None:
        raise InvalidValue("these shards are signed with the course secret: pass its --secret-file to --merge.")
    if expected and variants.fingerprint(secret) != expected:
        raise InvalidValue(f"this secret is not the one the shards were graded with (fingerprint "
                           f"{variants.fingerprint(secret)}, expected {expected}).")
    signing_key = results.key(secret) if expected else None
    for folder, data in zip(folders, shards):
        if not results.verify(data, signing_key):
            raise InvalidValue(f"{str(folder / MANIFEST)!r} fails its signature check: it was changed after "
                               "grading, or graded with another course secret.")
    merged: dict[str, tuple[Path, str]] = {}
    skipped: list[str] = []
    for folder, data in zip(folders, shards):
        for path in sorted((folder / RESULTS).glob("*.json")):
            if path.name.startswith("."):
                continue
            if path.is_symlink() or not path.is_file():
                skipped.append(f"skipped {files.text(str(path))!r}: not a regular file")
                continue
            bad = ids.problem(path.stem)
            if bad:
                skipped.append(f"skipped {files.text(str(path))!r}: {bad}")
                continue
            stored = results.read(path, signing_key, first["assignment"])
            if stored.data is None:
                if stored.problem and "signature" in stored.problem:
                    raise InvalidValue(f"{str(path)!r}: {stored.problem}: grade shard {data['shard'][0]}/{n} again "
                                       "before merging.")
                if stored.problem:
                    skipped.append(f"skipped {files.text(str(path))!r}: {stored.problem}")
                continue
            result = stored.data
            student = result["student"]
            if result.get("fingerprint") != first["fingerprint"]:
                raise InvalidValue(f"{str(path)!r} was graded with other settings than its shard: grade shard "
                                   f"{data['shard'][0]}/{n} again before merging.")
            if owner(student, n) != data["shard"][0] or student in merged:
                raise InvalidValue(f"{str(path)!r}: student {student!r} belongs to shard {owner(student, n)}/{n}, "
                                   f"not {data['shard'][0]}/{n}.")
            merged[student] = (path, stored.text)
    (out / RESULTS).mkdir(parents=True, exist_ok=True)
    for old in (out / RESULTS).glob("*.json"):  # a merge replaces what an earlier merge wrote
        if old.stem not in merged:
            old.unlink()
    for student, (_, text) in sorted(merged.items()):
        files.write_atomic(out / RESULTS / f"{student}.json", text)
    roster = [s for s in first["roster"] or [] if ids.problem(s) is None] if first["roster"] is not None else None
    summary = report.main(out, assignment=first["assignment"], roster=roster,
                          questions=first["questions"] or None, signing_key=signing_key, people=first["people"])
    files.write_atomic(out / "merged.json", json.dumps(files.clean(
        {"roofkit_merged": 1, "assignment": first["assignment"], "fingerprint": first["fingerprint"], "shards": n,
         "from": [str(f) for f in folders], "people": first["people"], "students": len(merged)}), indent=1) + "\n")
    summary.update(merged=[str(f) for f in folders], people=first["people"], skipped_files=skipped)
    return summary
