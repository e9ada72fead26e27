"""Late submissions: due dates, extensions and a penalty rule in one file, applied by one pure function.

The policy lives in `late_policy.toml` at the course root (beside `nbgrader_config.py`). TOML
because Python reads it without a dependency (`tomllib`), it has comments, and it has real
date-times. Every key is optional except the due dates you want enforced:

    timezone = "Europe/Berlin"     # IANA name; for due dates written without an offset
    missing_timestamp = "no_penalty"   # or "zero": no submission time recorded

    [penalty]                      # the rule for every assignment
    per = "day"                    # "day" (24 h of elapsed time) or "hour"
    percent = 10                   # of the maximum score, per started day/hour late
    grace_minutes = 15             # submitted up to this long after the deadline: on time
    max_percent = 50               # the deduction never exceeds this
    minimum_percent = 0            # nor takes the score below this percent of the maximum
    zero_after_days = 7            # more than 7 days (7 x 24 h) late: score 0

    [assignments.ch01_attention]
    due = 2026-02-06T23:59:00              # TOML local date-time: read in `timezone`
    [assignments.ch02_masks]
    due = 2026-02-13T23:59:00+01:00        # or with an explicit offset (also as a string)
    penalty = { percent = 20 }             # overrides keys of [penalty] for this assignment

    [[extensions]]
    student = "alice"
    assignment = "ch01_attention"  # leave out: every assignment
    days = 2                       # added to the due date (or hours = ..., or due = ...)

How a submission is judged (`apply`):

* Lateness is elapsed time after the effective due date (the assignment's, moved by the
  student's extension), so a daylight-saving change in between does not add or remove an hour.
  An extension of days or hours moves the due date on the wall clock of its zone (one day:
  the same time of day, the next day, even across a daylight-saving change).
  Submitted exactly at the due date is on time. Within the grace period: on time, no penalty.
* Past the grace period, the time late is counted from the due date and rounded *up* to whole
  days or hours (one second late = one day late with `per = "day"`).
* Deduction in percent of the maximum score = percent x units late, at most `max_percent`, and
  never below `minimum_percent` of the maximum (a score already below it is left alone). This is
  Canvas's own late policy (`LatePolicy#points_deducted` in instructure/canvas-lms: intervals
  rounded up, a percent of points possible per interval, a "lowest possible grade" floor), with a
  grace period, a cap and a hard deadline (`zero_after_days`) added.
* No timestamp: outcome `no_timestamp`, no penalty (or 0 points with `missing_timestamp = "zero"`).
  An assignment without a due date: outcome `no_deadline`, no penalty.

Times without a zone: due dates are read in `timezone`; a time that does not exist there (the
hour skipped in spring) or exists twice (the hour repeated in autumn) is an error naming the key.
A naive submission time is UTC, as nbgrader stores it (`nbgrader.utils.parse_utc`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

POLICY_FILE = "late_policy.toml"
UNITS = {"day": dt.timedelta(days=1), "hour": dt.timedelta(hours=1)}
MISSING_TIMESTAMP = ("no_penalty", "zero")
UTC = dt.timezone.utc


class PolicyError(ValueError):
    """A late policy file that cannot be used; the message names the file, the key and the line."""


@dataclasses.dataclass(frozen=True)
class PenaltyRule:
    """How much a late submission loses. Percents are of the maximum score."""

    percent: float = 0.0  # per started unit late
    per: str = "day"  # "day" or "hour"
    grace_minutes: float = 0.0
    max_percent: float = 100.0
    minimum_percent: float = 0.0
    zero_after_days: float | None = None  # later than this many days (24 h each): score 0

    @property
    def unit(self) -> dt.timedelta:
        return UNITS[self.per]


@dataclasses.dataclass(frozen=True)
class Extension:
    """More time for one student: a new due date, or time added to the assignment's."""

    student: str
    assignment: str | None  # None: every assignment
    due: dt.datetime | None = None
    extra: dt.timedelta = dt.timedelta(0)


@dataclasses.dataclass(frozen=True)
class LatePolicy:
    due: Mapping[str, dt.datetime]  # assignment -> due date (timezone-aware)
    penalty: PenaltyRule = PenaltyRule()
    penalties: Mapping[str, PenaltyRule] = dataclasses.field(default_factory=dict)
    extensions: Mapping[tuple[str, str | None], Extension] = dataclasses.field(default_factory=dict)
    timezone: str | None = None  # for display, and for due dates written without an offset
    missing_timestamp: str = "no_penalty"
    source: str = POLICY_FILE

    def rule(self, assignment: str) -> PenaltyRule:
        return self.penalties.get(assignment, self.penalty)

    def due_for(self, assignment: str, student: str) -> tuple[dt.datetime | None, Extension | None]:
        """The effective due date of one student (extension applied) and the extension used."""
        due = self.due.get(assignment)
        ext = self.extensions.get((student, assignment)) or self.extensions.get((student, None))
        if ext is None or due is None and ext.due is None:
            return due, None
        if ext.due is not None:
            return ext.due, ext
        return due + ext.extra, ext


class Outcome(str, enum.Enum):
    ON_TIME = "on_time"
    IN_GRACE = "in_grace"  # after the deadline, within the grace period: no penalty
    LATE = "late"
    TOO_LATE = "too_late"  # past `zero_after_days`: score 0
    NO_TIMESTAMP = "no_timestamp"
    NO_DEADLINE = "no_deadline"

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class LateResult:
    outcome: Outcome
    due: dt.datetime | None  # effective due date, extension included
    submitted_at: dt.datetime | None
    seconds_late: float  # 0 when on time
    units_late: int  # started days/hours counted for the penalty
    penalty_percent: float  # of the maximum score
    penalty: float  # points taken off
    score: float  # before the penalty
    final_score: float
    explanation: str  # one line, for the CSV and the feedback

    @property
    def minutes_late(self) -> int:
        """Whole minutes late, rounded up (one second late is one minute)."""
        return math.ceil(self.seconds_late / 60)


# --- applying the policy --------------------------------------------------------------------


def apply(
    policy: LatePolicy,
    assignment: str,
    student: str,
    submitted_at: dt.datetime | None,
    score: float,
    max_score: float,
) -> LateResult:
    """Judge one submission: deterministic, no clock, no I/O. See the module docstring."""
    rule = policy.rule(assignment)
    due, ext = policy.due_for(assignment, student)
    zone = _display_zone(policy)
    score = float(score)
    result = dict(due=due, submitted_at=submitted_at, score=score)

    if due is None:
        return LateResult(
            Outcome.NO_DEADLINE, seconds_late=0.0, units_late=0, penalty_percent=0.0,
            penalty=0.0, final_score=score,
            explanation=f"no due date for {assignment} in {policy.source}: no late penalty",
            **result,
        )  # fmt: skip
    due_text = f"due {_fmt(due, zone)}" + (f" with {student}'s extension" if ext else "")
    if submitted_at is None:
        if policy.missing_timestamp == "zero":
            return LateResult(
                Outcome.NO_TIMESTAMP, seconds_late=0.0, units_late=0, penalty_percent=100.0,
                penalty=score, final_score=0.0,
                explanation=f"no submission time recorded ({due_text}): score 0 "
                f'(missing_timestamp = "zero")',
                **result,
            )  # fmt: skip
        return LateResult(
            Outcome.NO_TIMESTAMP, seconds_late=0.0, units_late=0, penalty_percent=0.0,
            penalty=0.0, final_score=score,
            explanation=f"no submission time recorded ({due_text}): no late penalty applied",
            **result,
        )  # fmt: skip

    submitted = submitted_at if submitted_at.tzinfo else submitted_at.replace(tzinfo=UTC)
    result["submitted_at"] = submitted
    # In UTC: Python subtracts two datetimes that share a tzinfo by their wall clocks, which
    # would make the day of a DST change 24 h long instead of 23 or 25.
    late = submitted.astimezone(UTC) - due.astimezone(UTC)
    submitted_text = f"submitted {_fmt(submitted, zone)}"
    if late <= dt.timedelta(0):
        return LateResult(
            Outcome.ON_TIME, seconds_late=0.0, units_late=0, penalty_percent=0.0, penalty=0.0,
            final_score=score, explanation=f"on time ({submitted_text}, {due_text})", **result,
        )  # fmt: skip
    seconds = late.total_seconds()
    late_text = f"late by {_duration(late)} ({submitted_text}, {due_text})"
    if late <= dt.timedelta(minutes=rule.grace_minutes):
        return LateResult(
            Outcome.IN_GRACE, seconds_late=seconds, units_late=0, penalty_percent=0.0,
            penalty=0.0, final_score=score,
            explanation=f"{late_text}: within the {_num(rule.grace_minutes)} min grace period, "
            "no penalty",
            **result,
        )  # fmt: skip
    units = -(-late // rule.unit)  # ceil on exact timedeltas (integer microseconds)
    plural = "s" if units != 1 else ""
    if rule.zero_after_days is not None and late > dt.timedelta(days=rule.zero_after_days):
        return LateResult(
            Outcome.TOO_LATE, seconds_late=seconds, units_late=units, penalty_percent=100.0,
            penalty=score, final_score=0.0,
            explanation=f"{late_text}: more than {_num(rule.zero_after_days)} days late, "
            "score 0",
            **result,
        )  # fmt: skip

    percent = rule.percent * units
    how = f"{units} {rule.per}{plural} x {_num(rule.percent)}% = {_num(percent)}%"
    if percent > rule.max_percent:
        percent = rule.max_percent
        how += f", capped at {_num(rule.max_percent)}%"
    score_percent = 100.0 * score / max_score if max_score > 0 else 0.0
    room = max(score_percent - rule.minimum_percent, 0.0)  # Canvas's "lowest possible grade"
    if percent > room:
        percent = room
        how += f", limited to {_num(percent)}% to keep {_num(rule.minimum_percent)}% of the points"
    penalty = round(max_score * percent / 100.0, 6) if max_score > 0 else 0.0
    final = round(score - penalty, 6)
    return LateResult(
        Outcome.LATE, seconds_late=seconds, units_late=units, penalty_percent=percent,
        penalty=penalty, final_score=final,
        explanation=f"{late_text}: {how} of {_num(max_score)} points = -{_num(penalty)}",
        **result,
    )  # fmt: skip


def _display_zone(policy: LatePolicy) -> dt.tzinfo:
    return ZoneInfo(policy.timezone) if policy.timezone else UTC


def _fmt(t: dt.datetime, zone: dt.tzinfo) -> str:
    local = t.astimezone(zone)
    seconds = f":{local:%S}" if local.second or local.microsecond else ""
    return f"{local:%Y-%m-%d %H:%M}{seconds} {local.tzname()}"


def _duration(d: dt.timedelta) -> str:
    """'1 d 2 h 5 min', rounded up to the minute (one second late reads '1 min')."""
    minutes = math.ceil(d.total_seconds() / 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    parts = [f"{days} d"] if days else []
    if days or hours:
        parts.append(f"{hours} h")
    parts.append(f"{minutes} min")
    return " ".join(parts)


def _num(x: float) -> str:
    return f"{x:.6g}"


# --- timestamps -----------------------------------------------------------------------------

_NBGRADER_TIMESTAMP = re.compile(
    r"^(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?) ([A-Za-z_/+\-0-9]+)$"
)


def parse_timestamp(text: str) -> dt.datetime:
    """A submission time from nbgrader's `timestamp.txt`, strictly: an aware datetime, or ValueError.

    Accepts ISO 8601 (`2026-02-06T23:59:00+01:00`, `...Z`; without an offset: UTC, as nbgrader
    reads it) and nbgrader's own format `2026-02-06 22:59:00.123456 UTC` (a zone name or a
    numeric offset after a space). Nothing is guessed: no day-first dates, no partial dates.
    """
    text = text.strip()
    if not text:
        raise ValueError("empty timestamp")
    match = _NBGRADER_TIMESTAMP.match(text)
    if match:
        when, zone = match.groups()
        base = dt.datetime.fromisoformat(when)
        if re.fullmatch(r"[+-]\d{4}", zone):
            sign = 1 if zone[0] == "+" else -1
            offset = dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[3:5]))
            return base.replace(tzinfo=dt.timezone(sign * offset))
        if zone.upper() in ("UTC", "GMT", "Z"):
            return base.replace(tzinfo=UTC)
        try:
            tz = ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError) as error:
            raise ValueError(f"unknown time zone {zone!r} in timestamp {text!r}") from error
        try:
            return _localize(base, tz)
        except ValueError as error:
            raise ValueError(f"timestamp {text!r}: {error}") from error
    if not re.match(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}", text):
        raise ValueError(f"not a timestamp (expected YYYY-MM-DD HH:MM[:SS] and a zone): {text!r}")
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError as error:
        raise ValueError(f"not a timestamp: {text!r} ({error})") from error
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _localize(naive: dt.datetime, tz: ZoneInfo) -> dt.datetime:
    """`naive` in `tz`; ValueError for a wall-clock time a DST change skips or repeats."""
    early, late = naive.replace(tzinfo=tz, fold=0), naive.replace(tzinfo=tz, fold=1)
    if early.utcoffset() != late.utcoffset():
        back = early.astimezone(UTC).astimezone(tz).replace(tzinfo=None)
        what = "does not exist" if back != naive else "happens twice"
        example = f"{naive:%Y-%m-%dT%H:%M:%S}{early:%z}"
        example = example[:-2] + ":" + example[-2:]
        raise ValueError(
            f"{naive:%Y-%m-%d %H:%M} {what} in {tz.key} (a daylight-saving change): "
            f"write the time with its UTC offset, e.g. {example}"
        )
    return early


# --- reading the file -----------------------------------------------------------------------

_TOP_KEYS = {"timezone", "missing_timestamp", "penalty", "assignments", "extensions"}
_RULE_KEYS = {f.name for f in dataclasses.fields(PenaltyRule)}
_ASSIGNMENT_KEYS = {"due", "penalty"}
_EXTENSION_KEYS = {"student", "assignment", "due", "days", "hours"}


def load_policy(path: str | Path) -> LatePolicy:
    """Read and check a late policy file (see the module docstring for its keys)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PolicyError(f"{path}: cannot read the late policy: {error}") from error
    return parse_policy(text, source=str(path))


def parse_policy(text: str, source: str = POLICY_FILE) -> LatePolicy:
    """A `LatePolicy` from the TOML text; `PolicyError` naming the key (and line) otherwise."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PolicyError(f"{source}: not valid TOML: {error}") from error
    return _Reader(text, source).policy(data)


class _Reader:
    def __init__(self, text: str, source: str) -> None:
        self.lines = text.splitlines()
        self.source = source

    # errors that say where
    def error(
        self, key: str, message: str, table: str | None = None, index: int = 0
    ) -> PolicyError:
        line = self._line(key, table, index)
        where = f"{self.source}, line {line}" if line else self.source
        return PolicyError(f"{where}: {key}: {message}")

    def _line(self, key: str, table: str | None, index: int) -> int | None:
        """Best effort: the line of `key` (its last part) after the header of its table."""
        start = 0
        if table is not None:
            header = re.compile(rf"^\s*\[+\s*{re.escape(table)}\s*\]+")
            found = [i for i, line in enumerate(self.lines) if header.match(line)]
            if len(found) <= index:
                return None
            start = found[index]
        name = key.rsplit(".", 1)[-1]
        pattern = re.compile(rf"^\s*(?:[\w.\"-]+\.)?\"?{re.escape(name)}\"?\s*=")
        for i in range(start, len(self.lines)):
            if i > start and table is not None and self.lines[i].lstrip().startswith("["):
                break
            if pattern.match(self.lines[i]) or (
                table is None and re.match(rf"^\s*\[+\s*{re.escape(key)}\s*\]+", self.lines[i])
            ):
                return i + 1
        return start + 1 if table is not None else None

    def unknown(
        self, given: Mapping[str, Any], allowed: set[str], prefix: str, table=None, index=0
    ):
        extra = sorted(set(given) - allowed)
        if extra:
            key = f"{prefix}{extra[0]}"
            raise self.error(
                key, f"unknown key (allowed: {', '.join(sorted(allowed))})", table, index
            )

    # the parts of the file
    def policy(self, data: dict[str, Any]) -> LatePolicy:
        self.unknown(data, _TOP_KEYS, "")
        zone_name = data.get("timezone")
        tz = None
        if zone_name is not None:
            if not isinstance(zone_name, str):
                raise self.error(
                    "timezone", f'must be a string such as "Europe/Berlin", got {zone_name!r}'
                )
            try:
                tz = ZoneInfo(zone_name)
            except (ZoneInfoNotFoundError, ValueError) as error:
                raise self.error(
                    "timezone",
                    f'unknown time zone {zone_name!r} (use an IANA name such as "Europe/Berlin" or "UTC")',
                ) from error
        missing = data.get("missing_timestamp", "no_penalty")
        if missing not in MISSING_TIMESTAMP:
            raise self.error(
                "missing_timestamp", f"must be one of {MISSING_TIMESTAMP}, got {missing!r}"
            )
        base = self.rule(data.get("penalty", {}), PenaltyRule(), "penalty", "penalty")

        assignments = data.get("assignments", {})
        if not isinstance(assignments, dict):
            raise self.error("assignments", "must be a table: [assignments.<name>] with due = ...")
        due: dict[str, dt.datetime] = {}
        penalties: dict[str, PenaltyRule] = {}
        for name, entry in assignments.items():
            table = f"assignments.{name}"
            if not isinstance(entry, dict):
                raise self.error(table, "must be a table with due = ...", None)
            self.unknown(entry, _ASSIGNMENT_KEYS, f"{table}.", table)
            if "due" not in entry:
                raise self.error(
                    f"{table}.due", "missing (every listed assignment needs a due date)", table
                )
            due[name] = self.when(entry["due"], f"{table}.due", tz, table)
            if "penalty" in entry:
                penalties[name] = self.rule(entry["penalty"], base, f"{table}.penalty", table)

        extensions: dict[tuple[str, str | None], Extension] = {}
        entries = data.get("extensions", [])
        if not isinstance(entries, list):
            raise self.error("extensions", "must be an array of tables: [[extensions]]")
        for i, entry in enumerate(entries):
            ext = self.extension(entry, i, tz, due)
            key = (ext.student, ext.assignment)
            if key in extensions:
                which = ext.assignment or "every assignment"
                raise self.error(
                    f"extensions[{i}]",
                    f"a second extension for {ext.student} on {which}",
                    "extensions",
                    i,
                )
            extensions[key] = ext
        return LatePolicy(
            due=due, penalty=base, penalties=penalties, extensions=extensions,
            timezone=zone_name, missing_timestamp=missing, source=self.source,
        )  # fmt: skip

    def rule(self, given: Any, base: PenaltyRule, prefix: str, table: str) -> PenaltyRule:
        if not isinstance(given, dict):
            raise self.error(prefix, "must be a table of penalty keys", table)
        self.unknown(given, _RULE_KEYS, f"{prefix}.", table)
        values: dict[str, Any] = {}
        for key, value in given.items():
            name = f"{prefix}.{key}"
            if key == "per":
                if value not in UNITS:
                    raise self.error(name, f'must be "day" or "hour", got {value!r}', table)
                values[key] = value
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
            ):
                raise self.error(name, f"must be a number, got {value!r}", table)
            if value < 0:
                raise self.error(name, f"must not be negative, got {value!r}", table)
            if key in ("percent", "max_percent", "minimum_percent") and value > 100:
                raise self.error(
                    name, f"is a percent of the maximum score: at most 100, got {value!r}", table
                )
            values[key] = float(value)
        return dataclasses.replace(base, **values)

    def when(
        self, value: Any, key: str, tz: ZoneInfo | None, table: str | None, index: int = 0
    ) -> dt.datetime:
        if isinstance(value, str):
            try:
                value = dt.datetime.fromisoformat(value.strip())
            except ValueError as error:
                raise self.error(
                    key,
                    f"not a date-time: {value!r} ({error}); write e.g. 2026-02-06T23:59:00",
                    table,
                    index,
                ) from error
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                return value
            if tz is None:
                raise self.error(
                    key,
                    f'{value:%Y-%m-%dT%H:%M:%S} has no UTC offset and the file sets no timezone: add timezone = "Europe/Berlin" (say) at the top, or write the offset',
                    table,
                    index,
                )
            try:
                return _localize(value, tz)
            except ValueError as error:
                raise self.error(key, str(error), table, index) from error
        if isinstance(value, dt.date):
            raise self.error(
                key, f"{value} has no time of day: write e.g. {value}T23:59:00", table, index
            )
        raise self.error(
            key, f"must be a date-time such as 2026-02-06T23:59:00, got {value!r}", table, index
        )

    def extension(
        self, entry: Any, i: int, tz: ZoneInfo | None, due: Mapping[str, dt.datetime]
    ) -> Extension:
        key = f"extensions[{i}]"
        if not isinstance(entry, dict):
            raise self.error(key, "must be a table", "extensions", i)
        self.unknown(entry, _EXTENSION_KEYS, f"{key}.", "extensions", i)
        student = entry.get("student")
        if not isinstance(student, str) or not student:
            raise self.error(f"{key}.student", "missing or not a string", "extensions", i)
        assignment = entry.get("assignment")
        if assignment is not None and not isinstance(assignment, str):
            raise self.error(
                f"{key}.assignment", f"must be a string, got {assignment!r}", "extensions", i
            )
        given = [k for k in ("due", "days", "hours") if k in entry]
        if not given:
            raise self.error(key, "give due = <date-time>, days = N or hours = N", "extensions", i)
        if "due" in entry and len(given) > 1:
            raise self.error(
                key, "give either a new due date or days/hours to add, not both", "extensions", i
            )
        if "due" in entry:
            if assignment is None:
                raise self.error(
                    f"{key}.due",
                    "a new due date needs an assignment (days/hours may apply to every assignment)",
                    "extensions",
                    i,
                )
            return Extension(
                student, assignment, due=self.when(entry["due"], f"{key}.due", tz, "extensions", i)
            )
        extra = dt.timedelta(0)
        for unit in ("days", "hours"):
            if unit in entry:
                value = entry[unit]
                if (
                    isinstance(value, bool)
                    or not isinstance(value, (int, float))
                    or not math.isfinite(value)
                    or value < 0
                ):
                    raise self.error(
                        f"{key}.{unit}", f"must be a number >= 0, got {value!r}", "extensions", i
                    )
                extra += dt.timedelta(**{unit: value})
        if assignment is not None and assignment not in due:
            raise self.error(
                f"{key}.assignment",
                f"{assignment!r} has no due date in [assignments]: nothing to extend",
                "extensions",
                i,
            )
        return Extension(student, assignment, extra=extra)
