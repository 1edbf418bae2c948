"""A release's due date and late policy: refused by name when malformed, applied as the instructor set it."""

from datetime import datetime, timedelta, timezone

import pytest

from roofkit.errors import InvalidValue
from roofkit.grading import deadline, export, report

DUE = "2026-12-10T23:59+01:00"


def at(**delta) -> datetime:
    return deadline.parse_time(DUE) + timedelta(**delta)


@pytest.mark.parametrize("text", ["2026-12-10 23:59", "2026-12-10", "tomorrow", "2026-13-01T00:00Z"])
def test_a_due_time_without_a_zone_or_unreadable_is_refused_by_name(text):
    with pytest.raises(InvalidValue) as error:
        deadline.Policy.make(text)
    assert repr(text) in str(error.value) and "+01:00" in str(error.value)


@pytest.mark.parametrize("options", [{"grace": -1}, {"penalty": 101}, {"penalty": float("nan")}, {"until": -2},
                                     {"until": 1.5}])
def test_bad_late_options_are_refused_by_name(options):
    with pytest.raises(InvalidValue) as error:
        deadline.Policy.make(DUE, **options)
    assert "--" in str(error.value)


def test_days_late_count_each_day_started_after_the_grace():
    policy = deadline.Policy.make(DUE, grace=15, penalty=10, until=3)
    judged = {label: policy.judge(moment, "the --times file") for label, moment in {
        "early": at(hours=-5), "in grace": at(minutes=14), "just late": at(minutes=16),
        "a day": at(hours=24, minutes=15), "a day and a bit": at(hours=24, minutes=16), "four": at(days=3, hours=2)}.items()}
    assert {k: (v.days_late, v.penalty_percent, v.accepted) for k, v in judged.items()} == {
        "early": (0, 0, True), "in grace": (0, 0, True), "just late": (1, 10, True), "a day": (1, 10, True),
        "a day and a bit": (2, 20, True), "four": (4, 100, False)}
    assert "not" not in judged["early"].describe() and "scores 0" in judged["four"].describe()


def test_no_late_hand_ins_and_late_however_late():
    closed = deadline.Policy.make(DUE, until=0)
    assert not closed.judge(at(seconds=1), "x").accepted and closed.judge(at(seconds=0), "x").accepted
    open_ended = deadline.Policy.make(DUE, penalty=30)
    assert open_ended.judge(at(days=9), "x").penalty_percent == 100 and open_ended.judge(at(days=9), "x").accepted
    assert "no late hand-ins" in closed.describe() and "however late" in open_ended.describe()


def test_the_gradebook_and_moodle_carry_the_penalty(tmp_path):
    policy = deadline.Policy.make(DUE, penalty=10)
    result = {"student": "ada", "status": "graded", "score": 4.0, "max_score": 5.0, "questions": [],
              "deadline": policy.to_dict(), "submitted_at": at(hours=30).isoformat(), "time_source": "the --times file"}
    row = report.with_lateness(result)
    assert row["score"] == pytest.approx(3.2) and row["score_on_time"] == 4.0 and row["late"]["days_late"] == 2
    book = report._gradebook([row], [], [], {"ada": {"name": "Ada L."}})
    header, line = book.splitlines()[:2]
    assert header.startswith("student,name,status,score") and "days late" in header
    assert line.startswith("ada,Ada L.,graded,3.2,5,64,") and "the --times file" in line
    moodle = export.moodle([row], column="hw1").splitlines()
    assert moodle[0].endswith("hw1,hw1 feedback") and "2 days late" in moodle[1] and ",3.2," in moodle[1]
    page = report.feedback_page(row)
    assert "handed in 2 days late" in page and "20% off" in page and "before the penalty: 4" in page


def test_times_csv_reads_an_lms_column_and_refuses_a_bad_one(tmp_path):
    good = tmp_path / "times.csv"
    good.write_text("Student,Submitted At\nada,2026-12-10T22:00Z\n", encoding="utf-8")
    assert deadline.read_times(good)["ada"] == datetime(2026, 12, 10, 22, 0, tzinfo=timezone.utc)
    bad = tmp_path / "bad.csv"
    bad.write_text("who,when\nada,2026-12-10T22:00Z\n", encoding="utf-8")
    with pytest.raises(InvalidValue, match="needs an id column"):
        deadline.read_times(bad)
    zoneless = tmp_path / "zoneless.csv"
    zoneless.write_text("id,submitted\nada,2026-12-10 22:00\n", encoding="utf-8")
    with pytest.raises(InvalidValue, match="line 2"):
        deadline.read_times(zoneless)
