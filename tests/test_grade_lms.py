"""LMS exports (Canvas, Moodle) and the late-submission policy of bertcourse.grade.

The expected files are written out byte for byte. The Canvas checks mirror the rules of Canvas's
own parser (instructure/canvas-lms, lib/gradebook_importer.rb: `row_has_student_headers?`,
`update_column_count`, `Assignment.title_and_id`, the "Points Possible" row) and the Moodle
checks those of moodle/moodle grade/import/csv/classes/load_data.php (one identity column
mapped to username/useremail/useridnumber, "" or "-" = no grade, gradepointmax).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from zoneinfo import ZoneInfo

import pytest

from bertcourse.grade import late
from bertcourse.grade.lms import (
    GradeRow,
    RosterEntry,
    load_roster,
    read_grades_csv,
    write_canvas_csv,
    write_moodle_csv,
)

UTC = dt.timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")


def read(path) -> str:
    with open(path, newline="", encoding="utf-8") as f:
        return f.read()


def cells(path) -> list[list[str]]:
    return list(csv.reader(io.StringIO(read(path))))


# --- Canvas ---------------------------------------------------------------------------------


@pytest.fixture
def out(tmp_path):
    return tmp_path / "export.csv"


def test_canvas_file_byte_for_byte(out):
    rows = [
        GradeRow("bob", "ch01_attention", 3.333, 7, late_penalty=0.7),
        GradeRow("alice", "ch01_attention", 7, 7),
        GradeRow("alice", "ch02_masks", 2.675, 7),
        GradeRow("carol", "ch01_attention", 7, 7, status="tampered"),
        GradeRow("dave", "ch02_masks", None, 7, status="pending"),
    ]
    summary = write_canvas_csv(rows, out, assignment_ids={"ch01_attention": 4521})
    assert read(out) == (
        "Student,ID,SIS User ID,SIS Login ID,Section,ch01_attention (4521),ch02_masks\r\n"
        "    Points Possible,,,,,7,7\r\n"
        ",,,alice,,7,2.68\r\n"
        ",,,bob,,2.63,\r\n"
    )
    assert summary.students == 2
    assert [(r.student_id, r.status) for r in summary.held] == [
        ("carol", "tampered"),
        ("dave", "pending"),
    ]


def test_canvas_header_satisfies_the_importer(out):
    """The checks of GradebookImporter#header? and #parse_assignments, on our header."""
    write_canvas_csv(
        [GradeRow("alice", "ch01_attention", 1, 3), GradeRow("alice", "ch07_assembly", 2, 5)],
        out,
        assignment_ids={"ch01_attention": 11, "ch07_assembly": 9876543},
        titles={"ch07_assembly": "Chapter 7: assembly, (part 2)"},
    )
    header, points, student = cells(out)
    assert (
        len(header) > 3 and "Student" in header[0] and "ID" in header[1]
    )  # row_has_student_headers?
    assert re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3])
    assert "Section" in header[4]  # last student info column
    title_and_id = re.compile(r"\A(.*)\s\((\d+)\)\Z")  # Assignment.title_and_id
    assert [title_and_id.match(h).groups() for h in header[5:]] == [
        ("ch01_attention", "11"),
        ("Chapter 7: assembly, (part 2)", "9876543"),
    ]
    assert "Points Possible" in points[0] and points[5:] == ["3", "5"]
    assert student[3] == "alice" and student[5:] == ["1", "2"]
    write_canvas_csv([GradeRow("alice", "a", 1, 3)], out, points_possible_row=False)
    assert read(out) == "Student,ID,SIS User ID,SIS Login ID,Section,a\r\n,,,alice,,1\r\n"


def test_canvas_roster_and_odd_names_are_quoted(out, tmp_path):
    roster_csv = tmp_path / "roster.csv"
    roster_csv.write_text(
        "student_id,name,canvas_id,sis_user_id,sis_login_id,section\n"
        'alice,"Doe, Alice ""Al""",1043,S001,alice.doe,A1\n'
        "bob,=HYPERLINK(1),77,,,B\n",
        encoding="utf-8",
    )
    roster = load_roster(roster_csv)
    assert roster["alice"].name == 'Doe, Alice "Al"'
    write_canvas_csv(
        [GradeRow("alice", "quiz", 1.5, 2), GradeRow("bob", "quiz", 0, 2)], out, roster=roster
    )
    assert read(out).splitlines()[2:] == [
        '"Doe, Alice ""Al""",1043,S001,alice.doe,A1,1.5',
        "'=HYPERLINK(1),77,,,B,0",  # a formula in a name is defused, not run by a spreadsheet
    ]
    assert cells(out)[2][0] == 'Doe, Alice "Al"'


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"titles": {"a": "Quiz (2)"}}, "reads as an assignment id"),
        ({"titles": {"a": "Final Grade of week 1"}}, "drops such columns"),
        ({"titles": {"a": "Section"}}, "student column"),
        ({"assignment_ids": {"a": "12a"}}, "must be digits"),
        ({"identity": "email"}, "identity must be one of"),
    ],
)
def test_canvas_refuses_what_the_importer_would_misread(out, kwargs, message):
    with pytest.raises(ValueError, match=message):
        write_canvas_csv([GradeRow("alice", "a", 1, 2)], out, **kwargs)
    assert not out.exists()


def test_canvas_refuses_inconsistent_rows(out):
    with pytest.raises(ValueError, match="two rows for alice on a"):
        write_canvas_csv([GradeRow("alice", "a", 1, 2), GradeRow("alice", "a", 2, 2)], out)
    with pytest.raises(ValueError, match="two maximum scores"):
        write_canvas_csv([GradeRow("alice", "a", 1, 2), GradeRow("bob", "a", 2, 3)], out)
    with pytest.raises(ValueError, match="not in the roster: bob"):
        roster = {"alice": RosterEntry("alice", sis_login_id="alice")}
        write_canvas_csv(
            [GradeRow("alice", "a", 1, 2), GradeRow("bob", "a", 2, 2)], out, roster=roster
        )
    with pytest.raises(ValueError, match="by name only"):
        write_canvas_csv(
            [GradeRow("alice", "a", 1, 2)], out, roster={"alice": RosterEntry("alice", name="A")}
        )
    with pytest.raises(ValueError, match="formula character"):
        write_canvas_csv([GradeRow("-alice", "a", 1, 2)], out)


@pytest.mark.parametrize(
    ("score", "text"),
    [
        (7.0, "7"),
        (2.675, "2.68"),
        (0.005, "0.01"),
        (1 / 3, "0.33"),
        (99.995, "100"),
        (1e-9, "0"),
        (70, "70"),
        (-0.001, "0"),
    ],
)
def test_scores_are_rounded_half_up_to_two_decimals(out, score, text):
    write_canvas_csv([GradeRow("alice", "a", score, 100)], out)
    assert cells(out)[2][5] == text


# --- Moodle ---------------------------------------------------------------------------------


def test_moodle_file_byte_for_byte(out):
    rows = [
        GradeRow(
            "bob",
            "ch01_attention",
            3.333,
            7,
            late_penalty=0.7,
            late_explanation="late by 1 h 2 min: -0.7",
        ),
        GradeRow("alice", "ch01_attention", 7, 7),
        GradeRow("carol", "ch01_attention", 7, 7, status="needs_review"),
    ]
    summary = write_moodle_csv(rows, out)
    assert read(out) == (
        "Username,ch01_attention,ch01_attention (Feedback)\r\n"
        "alice,7,graded\r\n"
        "bob,2.63,graded; late by 1 h 2 min: -0.7\r\n"
    )
    assert summary.students == 2 and [r.student_id for r in summary.held] == ["carol"]


def test_moodle_identity_from_the_roster(out):
    roster = {
        "alice": RosterEntry("alice", email="alice@uni.example", id_number="S1"),
        "bob": RosterEntry("bob", email="b.o.b@uni.example", id_number="S2"),
    }
    rows = [GradeRow("alice", "a", 1, 2), GradeRow("bob", "a", 2, 2)]
    write_moodle_csv(rows, out, roster=roster, identity="email", item_name="Quiz 1", feedback=False)
    assert read(out) == "Email address,Quiz 1\r\nalice@uni.example,1\r\nb.o.b@uni.example,2\r\n"
    write_moodle_csv(rows, out, roster=roster, identity="id_number", feedback=False)
    assert cells(out) == [["ID number", "a"], ["S1", "1"], ["S2", "2"]]


def test_moodle_refuses_what_would_break_the_import(out):
    with pytest.raises(ValueError, match="one assignment"):
        write_moodle_csv([GradeRow("alice", "a", 1, 2), GradeRow("alice", "b", 1, 2)], out)
    with pytest.raises(ValueError, match="gradepointmax"):
        write_moodle_csv([GradeRow("alice", "a", 150, 200)], out)
    write_moodle_csv([GradeRow("alice", "a", 150, 200)], out, grade_point_max=200)
    assert cells(out)[1][:2] == ["alice", "150"]
    with pytest.raises(ValueError, match="not an email address"):
        write_moodle_csv([GradeRow("alice", "a", 1, 2)], out, identity="email")
    with pytest.raises(ValueError, match="not in the roster: bob"):
        write_moodle_csv([GradeRow("bob", "a", 1, 2)], out, roster={})
    with pytest.raises(ValueError, match="control characters"):
        write_moodle_csv([GradeRow("al\nice", "a", 1, 2)], out)


def test_roster_errors_name_the_line(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("student_id,nickname\nalice,Al\n")
    with pytest.raises(ValueError, match=r"line 1: .*unknown: nickname"):
        load_roster(path)
    path.write_text("student_id,email\nalice,a@x\nbob,b@x\nalice,c@x\n")
    with pytest.raises(ValueError, match=r"line 4: student_id 'alice' appears twice"):
        load_roster(path)


def test_late_verdict_reaches_both_files(tmp_path):
    policy = late.parse_policy(
        '[penalty]\npercent = 10\n[assignments.a]\ndue = "2026-02-06T23:59:00+01:00"\n'
    )
    submitted = dt.datetime(2026, 2, 7, 1, 0, tzinfo=UTC)  # 02:00 in Berlin: 2 h 1 min late
    result = late.apply(policy, "a", "alice", submitted, 6, 7)
    row = GradeRow("alice", "a", 6, 7).with_late(result)
    assert row.final_score == pytest.approx(5.3) and result.penalty == pytest.approx(0.7)
    write_moodle_csv([row], tmp_path / "m.csv")
    assert cells(tmp_path / "m.csv")[1] == [
        "alice",
        "5.3",
        "graded; late by 2 h 1 min (submitted 2026-02-07 01:00 UTC, due 2026-02-06 22:59 UTC): "
        "1 day x 10% = 10% of 7 points = -0.7",
    ]
    write_canvas_csv([row], tmp_path / "c.csv")
    assert cells(tmp_path / "c.csv")[2][5] == "5.3"


def test_read_the_graders_csv(tmp_path):
    path = tmp_path / "grades.csv"
    path.write_text(
        "student_id,assignment,status,score,max_score,sdpa_tests,detail\n"
        "alice,ch01_attention,graded,7,7,3,\n"
        "bob,ch01_attention,tampered,2.5,7,0,\"edited test cell 'sdpa_tests'\"\n"
        "carol,ch01_attention,pending,,7,,\n"
    )
    assert read_grades_csv(path) == [
        GradeRow("alice", "ch01_attention", 7.0, 7.0, "graded"),
        GradeRow("bob", "ch01_attention", 2.5, 7.0, "tampered"),
        GradeRow("carol", "ch01_attention", None, 7.0, "pending"),
    ]
    path.write_text(
        "student_id,assignment,status,score,late_penalty,max_score,late\n"
        "alice,a,graded,6,0.7,7,late by 2 h: -0.7\n"
        "bob,a,graded,5,,7,\n"
    )
    alice, bob = read_grades_csv(path)
    assert (alice.final_score, alice.comment) == (pytest.approx(5.3), "graded; late by 2 h: -0.7")
    assert (bob.final_score, bob.comment) == (5.0, "graded")
    path.write_text("student_id,assignment,score\nalice,a,1\n")
    with pytest.raises(ValueError, match="line 1: no column status, max_score"):
        read_grades_csv(path)
    path.write_text("student_id,assignment,status,score,max_score\nalice,a,graded,seven,7\n")
    with pytest.raises(ValueError, match="line 2"):
        read_grades_csv(path)


# --- the late policy ------------------------------------------------------------------------

POLICY = """\
timezone = "Europe/Berlin"

[penalty]
percent = 10
grace_minutes = 15
max_percent = 50
zero_after_days = 7

[assignments.ch01_attention]
due = 2026-02-06T23:59:00

[assignments.ch04_loss]
due = 2026-03-28T12:00:00
penalty = { per = "hour", percent = 1, grace_minutes = 0 }

[[extensions]]
student = "alice"
assignment = "ch01_attention"
days = 2

[[extensions]]
student = "bob"
hours = 12

[[extensions]]
student = "bob"
assignment = "ch04_loss"
due = "2026-03-30T12:00:00+02:00"
"""


@pytest.fixture(scope="module")
def policy() -> late.LatePolicy:
    return late.parse_policy(POLICY)


DUE1 = dt.datetime(2026, 2, 6, 23, 59, tzinfo=BERLIN)  # = 22:59 UTC


def judge(policy, when, student="eve", assignment="ch01_attention", score=7.0, max_score=7.0):
    return late.apply(policy, assignment, student, when, score, max_score)


def test_exactly_at_the_deadline_is_on_time(policy):
    at = judge(policy, DUE1.astimezone(UTC))
    assert (at.outcome, at.final_score, at.seconds_late) == (late.Outcome.ON_TIME, 7.0, 0.0)
    assert at.due == DUE1 and at.due.utcoffset() == dt.timedelta(hours=1)
    assert "on time (submitted 2026-02-06 23:59 CET, due 2026-02-06 23:59 CET)" == at.explanation


def test_grace_period_edges(policy):
    inside = judge(policy, DUE1 + dt.timedelta(minutes=15))
    assert (inside.outcome, inside.penalty, inside.minutes_late) == (late.Outcome.IN_GRACE, 0.0, 15)
    after = judge(policy, DUE1 + dt.timedelta(minutes=15, microseconds=1))
    assert after.outcome == late.Outcome.LATE and after.units_late == 1
    assert after.minutes_late == 16  # rounded up
    assert (after.penalty_percent, after.penalty, after.final_score) == (10.0, 0.7, 6.3)


def test_days_are_started_days_of_elapsed_time_and_capped(policy):
    r = judge(policy, DUE1 + dt.timedelta(days=2, seconds=1))
    assert (r.units_late, r.penalty_percent) == (3, 30.0)
    assert r.penalty == pytest.approx(2.1) and r.final_score == pytest.approx(4.9)
    capped = judge(policy, DUE1 + dt.timedelta(days=7))  # 7 days x 10% = 70%, capped at 50%
    assert (capped.outcome, capped.penalty_percent, capped.final_score) == (
        late.Outcome.LATE,
        50.0,
        3.5,
    )
    assert "7 days x 10% = 70%, capped at 50%" in capped.explanation
    too_late = judge(policy, DUE1 + dt.timedelta(days=7, seconds=1))
    assert (too_late.outcome, too_late.final_score, too_late.penalty) == (
        late.Outcome.TOO_LATE,
        0.0,
        7.0,
    )


def test_minimum_percent_floor_follows_canvas():
    """LatePolicy#points_deducted: the deduction never takes the score below the minimum, and
    a score already below it loses nothing."""
    policy = late.parse_policy(
        '[penalty]\npercent = 30\nminimum_percent = 40\n[assignments.a]\ndue = "2026-01-01T00:00:00Z"\n'
    )
    when = dt.datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert late.apply(policy, "a", "s", when, 5, 10).final_score == 4.0  # 30% limited to 10%
    assert late.apply(policy, "a", "s", when, 8, 10).final_score == 5.0  # 30% in full
    assert late.apply(policy, "a", "s", when, 3, 10).final_score == 3.0  # below 40% already


def test_extensions(policy):
    when = DUE1 + dt.timedelta(days=1)
    assert judge(policy, when).outcome == late.Outcome.LATE
    alice = judge(policy, when, student="alice")
    assert alice.outcome == late.Outcome.ON_TIME and alice.due == DUE1 + dt.timedelta(days=2)
    assert "with alice's extension" in alice.explanation
    bob = judge(policy, DUE1 + dt.timedelta(hours=12))  # bob's 12 h apply to every assignment
    assert bob.outcome == late.Outcome.LATE
    assert (
        judge(policy, DUE1 + dt.timedelta(hours=12), student="bob").outcome == late.Outcome.ON_TIME
    )
    # an extension for one assignment wins over the student's general one
    due4 = dt.datetime(2026, 3, 30, 12, 0, tzinfo=BERLIN)
    assert judge(policy, due4, "bob", "ch04_loss").outcome == late.Outcome.ON_TIME
    assert judge(policy, due4 + dt.timedelta(seconds=1), "bob", "ch04_loss").units_late == 1


def test_daylight_saving_change_counts_elapsed_hours(policy):
    """Due Saturday 12:00 CET (UTC+1); the clocks go forward on Sunday 29 March 2026."""
    sunday_noon = dt.datetime(2026, 3, 29, 12, 0, tzinfo=BERLIN)  # CEST, 23 h later
    r = judge(policy, sunday_noon, assignment="ch04_loss")
    assert (r.seconds_late, r.units_late, r.penalty_percent) == (23 * 3600, 23, 23.0)
    assert (
        "late by 23 h 0 min (submitted 2026-03-29 12:00 CEST, due 2026-03-28 12:00 CET)"
        in r.explanation
    )
    assert r.penalty == pytest.approx(7 * 0.23)


def test_an_extension_of_days_keeps_the_time_of_day_across_dst():
    policy = late.parse_policy(
        'timezone = "Europe/Berlin"\n[assignments.a]\ndue = 2026-03-28T12:00:00\n'
        '[[extensions]]\nstudent = "s"\ndays = 1\n'
    )
    due, _ = policy.due_for("a", "s")
    assert due == dt.datetime(2026, 3, 29, 12, 0, tzinfo=BERLIN)  # 23 h later: clocks went forward
    assert due.astimezone(UTC) == dt.datetime(2026, 3, 29, 10, 0, tzinfo=UTC)
    noon = dt.datetime(2026, 3, 29, 10, 0, 1, tzinfo=UTC)
    assert late.apply(policy, "a", "s", noon, 1, 1).units_late == 1


def test_naive_submission_time_is_utc_as_in_nbgrader(policy):
    naive = dt.datetime(2026, 2, 6, 23, 0)  # 23:00 UTC = 00:00 CET: one minute late... in grace
    r = judge(policy, naive)
    assert r.outcome == late.Outcome.IN_GRACE and r.minutes_late == 1


def test_missing_timestamp_and_missing_due_date(policy):
    r = judge(policy, None)
    assert (r.outcome, r.final_score) == (late.Outcome.NO_TIMESTAMP, 7.0)
    assert "no submission time recorded" in r.explanation
    strict = late.parse_policy(
        POLICY.replace(
            'timezone = "Europe/Berlin"', 'timezone = "Europe/Berlin"\nmissing_timestamp = "zero"'
        )
    )
    assert judge(strict, None).final_score == 0.0
    r = judge(policy, DUE1, assignment="ch03_mlm")
    assert (r.outcome, r.final_score) == (late.Outcome.NO_DEADLINE, 7.0)
    assert r.explanation == "no due date for ch03_mlm in late_policy.toml: no late penalty"


def test_apply_is_deterministic(policy):
    when = DUE1 + dt.timedelta(days=3, hours=5)
    assert judge(policy, when) == judge(policy, when)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[penalty]\npercnt = 3\n", r"line 2: penalty.percnt: unknown key"),
        ('timezone = "Mars/Olympus"\n', r"line 1: timezone: unknown time zone"),
        ("[penalty]\npercent = 120\n", r"line 2: penalty.percent: .*at most 100"),
        ('[penalty]\nper = "week"\n', r"line 2: penalty.per: must be \"day\" or \"hour\""),
        ("[penalty]\ngrace_minutes = -5\n", r"penalty.grace_minutes: must not be negative"),
        ('[penalty]\npercent = "ten"\n', r"penalty.percent: must be a number"),
        ("[assignments.a]\ndue = 2026-02-06\n", r"line 2: assignments.a.due: .*no time of day"),
        (
            "[assignments.a]\ndue = 2026-02-06T23:59:00\n",
            r"line 2: assignments.a.due: .*no UTC offset",
        ),
        ('[assignments.a]\ndue = "next friday"\n', r"assignments.a.due: not a date-time"),
        ("[assignments.a]\npenalty = { percent = 5 }\n", r"assignments.a.due: missing"),
        (
            'timezone = "Europe/Berlin"\n\n[assignments.a]\ndue = 2026-03-29T02:30:00\n',
            r"line 4: assignments.a.due: 2026-03-29 02:30 does not exist in Europe/Berlin",
        ),
        (
            'timezone = "Europe/Berlin"\n[assignments.a]\ndue = 2026-10-25T02:30:00\n',
            r"line 3: assignments.a.due: 2026-10-25 02:30 happens twice .*2026-10-25T02:30:00\+02:00",
        ),
        ("x = [\n", r"not valid TOML"),
        (
            '[assignments.a]\ndue = "2026-01-01T00:00:00Z"\n[[extensions]]\nstudent = "s"\nweeks = 1\n',
            r"line 5: extensions\[0\]\.weeks: unknown key",
        ),
        (
            '[assignments.a]\ndue = "2026-01-01T00:00:00Z"\n'
            '[[extensions]]\nstudent = "s"\ndays = 1\n[[extensions]]\nstudent = "s"\nhours = 2\n',
            r"line 6: extensions\[1\]: a second extension for s on every assignment",
        ),
        ('[[extensions]]\nstudent = "s"\nassignment = "zz"\ndays = 1\n', r"'zz' has no due date"),
        (
            '[[extensions]]\nstudent = "s"\ndays = 1\nhours = 1\ndue = "2026-01-01T00:00:00Z"\n',
            r"not both",
        ),
    ],
)
def test_bad_policy_files_name_the_key_and_line(text, message):
    with pytest.raises(late.PolicyError, match=message):
        late.parse_policy(text)


def test_load_policy_reads_the_file_and_names_it(tmp_path):
    path = tmp_path / late.POLICY_FILE
    path.write_text(POLICY)
    assert late.load_policy(path).due["ch01_attention"] == DUE1
    with pytest.raises(late.PolicyError, match="cannot read"):
        late.load_policy(tmp_path / "nope.toml")
    path.write_text("[penalty]\npercent = 1\nmax_percentt = 2\n")
    with pytest.raises(
        late.PolicyError, match=rf"{re.escape(str(path))}, line 3: penalty.max_percentt"
    ):
        late.load_policy(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-02-06 22:59:00.123456 UTC", dt.datetime(2026, 2, 6, 22, 59, 0, 123456, tzinfo=UTC)),
        ("2026-02-06 23:59:00 Europe/Berlin", dt.datetime(2026, 2, 6, 22, 59, tzinfo=UTC)),
        ("2026-02-06 23:59:00 +0100", dt.datetime(2026, 2, 6, 22, 59, tzinfo=UTC)),
        ("2026-02-06T23:59:00+01:00", dt.datetime(2026, 2, 6, 22, 59, tzinfo=UTC)),
        ("2026-02-06T22:59:00Z", dt.datetime(2026, 2, 6, 22, 59, tzinfo=UTC)),
        ("2026-02-06 22:59:00\n", dt.datetime(2026, 2, 6, 22, 59, tzinfo=UTC)),  # naive: UTC
    ],
)
def test_parse_timestamp(text, expected):
    parsed = late.parse_timestamp(text)
    assert parsed == expected and parsed.tzinfo is not None


@pytest.mark.parametrize(
    "text",
    [
        "",
        "12",
        "06/02/2026 23:59",
        "yesterday",
        "2026-02-30 10:00:00 UTC",
        "2026-02-06 10:00 Mars/Base",
    ],
)
def test_parse_timestamp_guesses_nothing(text):
    with pytest.raises(ValueError):
        late.parse_timestamp(text)
