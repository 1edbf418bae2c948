"""A release's due date and late policy, and what it does to a hand-in's score.

``roofkit assign --due 2026-12-10T23:59+01:00 [--grace 15] [--late-penalty 10] [--late-until 3]`` records the
policy in the release's manifest:

* ``due``: the due time, with its time zone (a time without one is refused: "23:59" means a different moment
  on the instructor's laptop and on the grading server);
* ``grace`` minutes after it still count as on time (an upload that took a minute);
* ``late-penalty``: percent of the score taken per day late, each day started counting whole (day 1 is the
  first 24 hours after the grace);
* ``late-until``: the last day late a hand-in is accepted; after it, it scores 0. ``--late-until 0`` takes no late
  hand-in at all. Without it, late hand-ins are taken however late, with the penalty.

When was a notebook handed in? The grader says which source it used, in the gradebook, the exports and the
feedback page: ``roofkit grade --times FILE.csv`` (a column ``id`` or ``student``, and a column ``submitted``:
the timestamp column of an LMS export, or a manifest the instructor keeps), else the file's modification time
as the grader found it (which a copy can change: prefer the LMS's times).
"""

from __future__ import annotations

import csv
import math
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import InvalidValue

__all__ = ["Policy", "parse_time", "read_times", "Lateness", "late_text", "TIME_COLUMNS", "ID_COLUMNS"]

DAY_S = 86_400
ID_COLUMNS = ("id", "student", "username", "sis_login_id", "login")
TIME_COLUMNS = ("submitted", "submitted_at", "submitted at", "timestamp", "submission time", "time")


def parse_time(text: str, what: str = "time") -> datetime:
    """An ISO 8601 time with its zone (``2026-12-10T23:59+01:00``, ``...Z``); anything else is refused by name."""
    try:
        moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        raise InvalidValue(f"bad {what} {text!r}: write it as ISO 8601 with its time zone, "
                           "e.g. 2026-12-10T23:59+01:00 or 2026-12-10T22:59Z.") from None
    if moment.tzinfo is None:
        raise InvalidValue(f"the {what} {text!r} has no time zone: add one (2026-12-10T23:59+01:00, or Z for UTC), "
                           "so it means the same moment wherever it is graded.")
    return moment


@dataclass(frozen=True)
class Lateness:
    submitted_at: str  # ISO 8601, UTC
    source: str  # where the time came from, in words
    days_late: int  # 0: on time (or within the grace)
    penalty_percent: float  # of the score
    accepted: bool

    def describe(self) -> str:
        if not self.days_late:
            return f"handed in on time ({self.submitted_at}, from {self.source})"
        late = f"handed in {self.days_late} day{'s' if self.days_late != 1 else ''} late ({self.submitted_at}, " \
               f"from {self.source})"
        if not self.accepted:
            return f"{late}: past the last day late hand-ins are taken, so it scores 0"
        return f"{late}: {self.penalty_percent:g}% off the score" if self.penalty_percent else late

    def to_dict(self) -> dict:
        return asdict(self)


def late_text(late) -> str:
    """A result's ``late`` record (:meth:`Lateness.to_dict`) in words; "" for none, or for one that is malformed."""
    try:
        return Lateness(**late).describe() if isinstance(late, dict) else ""
    except TypeError:
        return ""


@dataclass(frozen=True)
class Policy:
    due: str  # ISO 8601 with its zone
    grace_minutes: float = 0.0
    penalty_percent_per_day: float = 0.0
    late_until_days: int | None = None  # None: late hand-ins taken however late

    @classmethod
    def make(cls, due: str, grace: float | None = None, penalty: float | None = None,
             until: int | None = None) -> "Policy":
        """A policy from the command line's values, each checked and refused by name."""
        parse_time(due, "--due")
        for name, value, top in (("--grace", grace, None), ("--late-penalty", penalty, 100.0)):
            if value is not None and (not math.isfinite(value) or value < 0 or (top is not None and value > top)):
                raise InvalidValue(f"bad {name} {value!r}: expected a number from 0"
                                   + (f" to {top:g}." if top is not None else " up (minutes)."))
        if until is not None and (isinstance(until, bool) or not isinstance(until, int) or until < 0):
            raise InvalidValue(f"bad --late-until {until!r}: expected a whole number of days, 0 or more.")
        return cls(due=due, grace_minutes=float(grace or 0), penalty_percent_per_day=float(penalty or 0),
                   late_until_days=until)

    @classmethod
    def from_manifest(cls, manifest: dict | None) -> "Policy | None":
        recorded = (manifest or {}).get("deadline")
        return cls(**recorded) if isinstance(recorded, dict) else None

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        late = ("no late hand-ins" if self.late_until_days == 0 else
                f"late hand-ins taken {'up to ' + str(self.late_until_days) + ' days' if self.late_until_days else 'however late'}"
                + (f", {self.penalty_percent_per_day:g}% off per day started" if self.penalty_percent_per_day else
                   ", with no penalty"))
        grace = f", {self.grace_minutes:g} minutes' grace" if self.grace_minutes else ""
        return f"due {self.due}{grace}; {late}"

    def judge(self, submitted: datetime, source: str) -> Lateness:
        late_s = (submitted - parse_time(self.due)).total_seconds() - 60 * self.grace_minutes
        days = max(0, math.ceil(late_s / DAY_S)) if late_s > 0 else 0
        accepted = not days or self.late_until_days is None or days <= self.late_until_days
        penalty = 100.0 if not accepted else min(100.0, days * self.penalty_percent_per_day)
        stamp = submitted.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return Lateness(stamp, source, days, penalty, accepted)


def read_times(path: str | Path) -> dict[str, datetime]:
    """student id -> hand-in time, from a CSV with an id column and a time column (names in any case)."""
    path = Path(path)
    try:
        rows = list(csv.DictReader(path.read_text(encoding="utf-8-sig").splitlines()))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise InvalidValue(f"cannot read --times {str(path)!r}: {error}") from None
    columns = {c.strip().lower(): c for c in (rows[0].keys() if rows else []) if c}
    who = next((columns[c] for c in ID_COLUMNS if c in columns), None)
    when = next((columns[c] for c in TIME_COLUMNS if c in columns), None)
    if who is None or when is None:
        raise InvalidValue(f"--times {str(path)!r} needs an id column ({', '.join(ID_COLUMNS)}) and a time column "
                           f"({', '.join(TIME_COLUMNS)}); it has: {', '.join(columns.values()) or 'no header'}.")
    times = {}
    for number, row in enumerate(rows, start=2):
        student = (row.get(who) or "").strip()
        if student:
            times[student] = parse_time(row.get(when) or "", f"time on line {number} of {path.name}")
    return times
