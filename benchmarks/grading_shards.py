"""Grading in shards: N separate processes, then a merge, against one unsharded run (merging must change no grade).

    python benchmarks/grading_shards.py [--students 1000] [--shards 4] [--workers 1] [--whole-workers W]

A release of lesson 00 is made for a roster of S students, each submission
answered as in benchmarks/grading.py (every fifth one with wrong numbers and a
code answer that fails a hidden case). Then:

1. the class is graded as --shards processes started at once, each
   `roofkit grade ... --shard K/N --workers W`; the wall time of each is
   printed, with the number of students it graded;
2. `roofkit grade --merge` builds one gradebook from the shards (timed);
3. one unsharded `roofkit grade --workers` run (default: N x W workers) grades
   the class again from nothing;
4. the merge must not change a grade: the merged results must be exactly the
   shards' results (the script fails otherwise), and the merged gradebook,
   results and feedback are compared with the unsharded run's. They are
   equal unless a submission met a time limit in one run and not in the
   other (a cell or a code case on a machine too busy to meet its limits);
   each difference is printed with its reason.

On one machine the shards share its cores, so the sharded total is no
faster than one run with as many workers; on N machines each shard takes
about 1/N of the time. The figures show the split is even and the merge cheap.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grading import make_class  # noqa: E402  (benchmarks/grading.py: the same class)

BIN = Path(sys.executable).parent


def grade_command(subs: Path, release: Path, secret: Path, out: Path, *extra: str) -> list[str]:
    return [str(BIN / "roofkit"), "grade", str(subs), "--assignment", str(release), "--secret-file", str(secret),
            "--out", str(out), "--json", *extra]


def without_timing(results: Path) -> dict:
    rows = json.loads(results.read_text(encoding="utf-8"))["students"]
    skip = ("seconds", "graded_at", "execution", "signature")  # the signature covers the timing too
    return {r["student"]: {k: v for k, v in r.items() if k not in skip} for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--workers", type=int, default=1, help="workers in each shard")
    parser.add_argument("--whole-workers", type=int, help="workers of the unsharded run (default: shards x workers)")
    parser.add_argument("--keep", help="a folder to keep everything in (default: a temporary one, removed)")
    args = parser.parse_args()
    whole_workers = args.whole_workers or args.shards * args.workers
    with tempfile.TemporaryDirectory(prefix="roofkit-bench-shards-") as tmp:
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        release, secret, subs = make_class(folder, args.students)
        print(f"class of {args.students} lesson-00 submissions; {args.shards} shards x {args.workers} worker(s), "
              f"unsharded run with {whole_workers} workers")

        started = time.perf_counter()
        running = {}
        for k in range(1, args.shards + 1):
            out = folder / f"shard-{k}"
            command = grade_command(subs, release, secret, out, "--shard", f"{k}/{args.shards}",
                                    "--workers", str(args.workers))
            # output to files, not pipes: a shard's JSON outgrows a pipe's buffer, and a full pipe stalls it
            with open(folder / f"shard-{k}.out", "w") as stdout, open(folder / f"shard-{k}.err", "w") as stderr:
                running[k] = (subprocess.Popen(command, stdout=stdout, stderr=stderr, text=True), time.perf_counter())
        shard_s = {}
        while running:
            for k, (process, began) in list(running.items()):
                if process.poll() is not None:
                    if process.returncode != 0:
                        err = (folder / f"shard-{k}.err").read_text(encoding="utf-8")
                        raise SystemExit(f"shard {k} failed: {err[-2000:]}")
                    out = (folder / f"shard-{k}.out").read_text(encoding="utf-8")
                    shard_s[k] = (time.perf_counter() - began, len(json.loads(out)["students"]))
                    del running[k]
            time.sleep(0.2)
        sharded_s = time.perf_counter() - started
        for k, (seconds, count) in sorted(shard_s.items()):
            print(f"  shard {k}/{args.shards}: {count:4d} students in {seconds:7.1f} s")

        began = time.perf_counter()
        merge = subprocess.run([str(BIN / "roofkit"), "grade", "--merge",
                                *(str(folder / f"shard-{k}") for k in range(1, args.shards + 1)),
                                "--out", str(folder / "merged"), "--secret-file", str(secret), "--json"],
                               capture_output=True, text=True)
        merge_s = time.perf_counter() - began
        if merge.returncode != 0:
            raise SystemExit(f"merge failed: {merge.stderr[-2000:]}")
        print(f"merge: {merge_s:.2f} s; sharded total (shards at once, then the merge): {sharded_s + merge_s:.1f} s")

        began = time.perf_counter()
        subprocess.run(grade_command(subs, release, secret, folder / "whole", "--workers", str(whole_workers)),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        whole_s = time.perf_counter() - began
        print(f"one unsharded run: {whole_s:.1f} s ({whole_s / args.students:.2f} s per submission); "
              f"sharded + merge / unsharded = {(sharded_s + merge_s) / whole_s:.2f}")

        merged, whole = folder / "merged", folder / "whole"
        from_shards = {}
        for k in range(1, args.shards + 1):
            from_shards.update(without_timing(folder / f"shard-{k}" / "results.json"))
        merged_rows = without_timing(merged / "results.json")
        assert merged_rows == from_shards, "merging the shards changed a grade"
        print(f"merged = the shards' own results, all {len(merged_rows)} students: merging changed no grade")
        whole_rows = without_timing(whole / "results.json")
        same_book = (merged / "gradebook.csv").read_text() == (whole / "gradebook.csv").read_text()
        pages = sorted(p.name for p in (whole / "feedback").iterdir())
        same_pages = pages == sorted(p.name for p in (merged / "feedback").iterdir()) and all(
            (merged / "feedback" / p).read_text() == (whole / "feedback" / p).read_text() for p in pages)
        expected = args.students - (args.students + 4) // 5
        for name, rows in (("sharded", merged_rows), ("unsharded", whole_rows)):
            full = sum(1 for r in rows.values() if r["status"] == "graded" and r["score"] == r["max_score"])
            print(f"{name}: {len(rows)} rows, {full} with full marks (expected {expected})")
        print(f"sharded + merge = one unsharded run: gradebook {same_book}, results {merged_rows == whole_rows}, "
              f"feedback pages {same_pages}")
        for student in sorted(s for s in whole_rows if whole_rows[s] != merged_rows.get(s)):
            why = {name: "; ".join(n for n in (rows.get(student) or {}).get("notes", []) if n)[:160] or "no note"
                   for name, rows in (("sharded", merged_rows), ("unsharded", whole_rows))}
            print(f"  {student}: sharded {merged_rows[student]['score']:g} ({why['sharded']}), "
                  f"unsharded {whole_rows[student]['score']:g} ({why['unsharded']})")


if __name__ == "__main__":
    main()
