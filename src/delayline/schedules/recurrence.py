"""When a recurring schedule's runs fall: cron in a time zone, every, explicit times.

Pure arithmetic on integer epoch ms (``*_ms``); aware datetimes appear only where
zoneinfo needs them, naive wall times only where croniter does. Each recurrence
answers one question, :meth:`next_after`: its first run strictly after an instant,
or None if it has none (no run is later than ``timing.LAST_MS``, 9999-12-31).

- :class:`Cron`: 5 fields (minute hour day-of-month month day-of-week) or 6 (a
  second first, then the 5, as NATS, Quartz and Spring order them), matched on the
  wall clock of an IANA time zone. croniter reads the fields, with its extensions:
  names (``JAN``, ``MON``), ``L``, ``nW``, ``n#k``, ``?``; when both the day of
  month and the day of week are restricted, either one matching is enough (Vixie
  cron). Its random (``R``) and hashed (``H``) fields are refused: a schedule must
  run at the same times wherever it is computed.
- :class:`Every`: at ``anchor_ms + k * period_ms`` for every integer k, the period
  at least 1 s.
- :class:`Times`: explicit instants, at most 1000.

Daylight saving time (the contract)
-----------------------------------

Cron fields are matched on the zone's wall-clock time: croniter finds the next
matching naive wall time, and this module places it on the time line (croniter's
own time zone handling is not used). Following ISC/Vixie cron (and Cronos):

- A cron whose **hour field is** ``*`` (it runs every hour or more often; in the
  6-field form the hour field is the third) follows the real clock: a wall time
  the clock skips in spring does not run; a wall time the clock repeats in autumn
  runs in both passes. So ``*/15 * * * *`` keeps running every 15 minutes of real
  time, and ``0 * * * *`` runs at 02:00 CEST and again at 02:00 CET.
- Any other cron runs **at set hours**: a wall time the clock skips runs once, at
  the first instant after the skip (``30 2 * * *`` in Europe/Paris on the last
  Sunday of March runs at 03:00 CEST, 01:00Z); several skipped wall times that
  land on that instant are one run; a wall time the clock repeats runs once, in
  its first pass (fold=0).

Only a literal ``*`` is a ``*`` hour field: ``*/1`` and ``0-23`` run at set hours.

Bounds: :meth:`Cron.next_after` asks croniter for at most 18 wall times: each step
returns or jumps past a whole skipped stretch of wall time, and no zone skips whole
days 16 times in a row (were one to, the answer would be None). A clock change is
found by bisecting the zone's offset (about 22 steps for an hour, in ms). A cron that
never matches (``0 0 30 2 *``) is refused, rule ``never``, when no wall time from
2000-01-01 through 2027-12-31 matches it: those 28 years hold all 14 kinds of calendar
year (leap or not, starting on each weekday), and a cron's fields see only the calendar.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeAlias
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

from delayline.errors import ValidationError, quoted
from delayline.timing import (
    LAST_MS,
    format_duration,
    from_epoch_ms,
    in_range_ms,
    parse_duration_ms,
)

#: The shortest period of :class:`Every` (ms).
MIN_PERIOD_MS = 1_000
#: The most instants a :class:`Times` holds.
MAX_TIMES = 1_000

#: The most wall times one :meth:`Cron.next_after` asks croniter for, past the first.
_MAX_STEPS = 16
_MS = timedelta(milliseconds=1)
#: Wall times are counted in ms from this naive datetime, as instants from the epoch.
_WALL_EPOCH = datetime(1970, 1, 1)
#: A cron matches in these 28 years or never (see the module's docstring).
_NEVER_FROM = datetime(2000, 1, 1)
_NEVER_UNTIL = datetime(2028, 1, 1)
#: croniter splits fields on ASCII whitespace only; so does the field count here.
_FIELD = re.compile(r"\S+", re.ASCII)
#: Each field of the 5-field form, and the values it takes.
_FIELDS_5 = (
    ("minute", "0-59"), ("hour", "0-23"), ("day of month", "1-31, L, nW or ?"),
    ("month", "1-12 or JAN-DEC"),
    ("day of week", "0-7 (0 and 7 are Sunday), SUN-SAT, nL, n#k or ?"),
)  # fmt: skip
_FIELDS_6 = (("second", "0-59"), *_FIELDS_5)


@dataclass(frozen=True)
class Cron:
    """A cron ``expression`` on the wall clock of the IANA zone ``tz``; see the
    module's docstring for the fields and the daylight saving rules. Raises
    ValidationError (fields ``cron`` and ``tz``) unless both are valid."""

    expression: str
    tz: str = "UTC"

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str):
            raise _refused(
                "type",
                f"cron must be a string such as '0 9 * * MON-FRI'; got {quoted(self.expression)}",
            )
        _check_cron(self.expression)
        _zone(self.tz)

    @property
    def follows_clock(self) -> bool:
        """Whether the hour field is ``*``: the cron follows the real clock across a
        clock change (else it runs at set hours)."""
        return str(_FIELD.findall(self.expression)[-4]) == "*"

    def next_after(self, after_ms: int) -> int | None:
        """The first run strictly after ``after_ms`` (epoch ms), None if none."""
        try:
            found = self._next_after(after_ms)
        except (OverflowError, ValueError):
            # Past datetime's years (1 to 9999), or croniter found no match in 50 years.
            return None
        return found if found is not None and found <= LAST_MS else None

    def _next_after(self, after_ms: int) -> int | None:
        zone = _zone(self.tz)
        follows = self.follows_clock
        offset = _ms(from_epoch_ms(after_ms).astimezone(zone).utcoffset())
        wall = after_ms + offset
        first_offset, second_offset = _offsets_of(wall, zone)
        start = wall  # the search takes wall times after this one
        if first_offset > second_offset:
            # after_ms lies in a repeated stretch of wall time [change + second_offset,
            # change + first_offset), shown first before the clock change, then after.
            change = _change_between(wall - first_offset, wall - second_offset, zone)
            if offset == first_offset and follows:
                # The rest of the first pass comes first, then the whole second pass.
                ahead = self._next_wall(wall)
                if ahead < change + first_offset:
                    return ahead - first_offset
                start = change + second_offset - 1
            elif offset == second_offset and not follows:
                # The first pass ran this stretch; the next run is after it.
                start = change + first_offset - 1
        for _ in range(_MAX_STEPS + 1):
            found = self._next_wall(start)
            later = [run for run in _instants_of(found, zone, follows) if run > after_ms]
            if later:
                return later[0]
            first_offset, second_offset = _offsets_of(found, zone)
            if first_offset < second_offset:
                # A skipped wall time (the clock follows): go on from the skip's end.
                change = _change_between(found - second_offset, found - first_offset, zone)
                start = change + second_offset - 1
            else:
                start = found
        return None

    def _next_wall(self, after_wall_ms: int) -> int:
        """The first matching wall time (ms) strictly after ``after_wall_ms``. croniter
        is given whole seconds (as its matches are; exact in the float it counts in), and
        raises CroniterBadDateError when nothing matches within 50 years."""
        start = _wall(after_wall_ms // 1000 * 1000)
        six = len(_FIELD.findall(self.expression)) == 6
        cron = croniter(self.expression, start, ret_type=datetime, second_at_beginning=six)
        return _wall_ms(cron.get_next(datetime))


@dataclass(frozen=True)
class Every:
    """Runs at ``anchor_ms + k * period_ms`` for every integer k (of any sign). The
    anchor defaults to the Unix epoch: "every 1h" runs on the hour UTC, and a
    replaced schedule keeps its phase. Raises ValidationError (field ``every``)
    for a period under MIN_PERIOD_MS."""

    period_ms: int
    anchor_ms: int = 0

    def __post_init__(self) -> None:
        _check_int(self.period_ms, "every")
        _check_int(self.anchor_ms, "anchor")
        if self.period_ms < MIN_PERIOD_MS:
            raise ValidationError(
                "every",
                "min",
                f"every must be at least {format_duration(MIN_PERIOD_MS)}; "
                f"got {format_duration(self.period_ms)}",
            )

    def next_after(self, after_ms: int) -> int | None:
        """The first run strictly after ``after_ms`` (epoch ms), None past LAST_MS."""
        k = (after_ms - self.anchor_ms) // self.period_ms + 1  # floor: before the anchor too
        found = self.anchor_ms + k * self.period_ms
        return found if found <= LAST_MS else None


@dataclass(frozen=True)
class Times:
    """Explicit instants (epoch ms), stored sorted and without duplicates, at most
    MAX_TIMES of them. Raises ValidationError (field ``times``) for none, too many,
    or one that is not an integer up to LAST_MS."""

    times_ms: tuple[int, ...]

    def __post_init__(self) -> None:
        for time_ms in self.times_ms:
            _check_int(time_ms, "times")
            in_range_ms(time_ms, "times")
        normal = tuple(sorted(set(self.times_ms)))
        if not normal:
            raise ValidationError("times", "empty", "times must hold at least one time")
        if len(normal) > MAX_TIMES:
            raise ValidationError(
                "times", "max", f"times may hold at most {MAX_TIMES} times; got {len(normal)}"
            )
        object.__setattr__(self, "times_ms", normal)

    def next_after(self, after_ms: int) -> int | None:
        """The first time strictly after ``after_ms`` (epoch ms), None if none."""
        index = bisect.bisect_right(self.times_ms, after_ms)
        return self.times_ms[index] if index < len(self.times_ms) else None


Recurrence: TypeAlias = Cron | Every | Times


def runs_between(recurrence: Recurrence, after_ms: int, until_ms: int, limit: int) -> list[int]:
    """The runs r with after_ms < r <= until_ms, in order: the first ``limit`` of them."""
    runs: list[int] = []
    while len(runs) < limit:
        run = recurrence.next_after(runs[-1] if runs else after_ms)
        if run is None or run > until_ms:
            break
        runs.append(run)
    return runs


def parse_cron(expression: str, tz: str) -> Cron:
    """A :class:`Cron`; raises ValidationError (field ``cron`` or ``tz``) unless valid."""
    return Cron(expression, tz)


def parse_every(period: str | int, anchor_ms: int = 0) -> Every:
    """An :class:`Every` of ``period``: ms, or a duration such as ``1s``, ``15m``, ``1h``
    or ``1h30m`` (see :func:`delayline.timing.parse_duration_ms`). Raises
    ValidationError (field ``every``) for anything else or under 1 s."""
    if isinstance(period, str):
        try:
            period = parse_duration_ms(period)
        except ValidationError:
            raise ValidationError(
                "every",
                "duration",
                f"every must be a duration such as 1s, 15m, 1h or 1h30m; got {quoted(period)}",
            ) from None
    return Every(period, anchor_ms)


def parse_times(times_ms: Iterable[int]) -> Times:
    """A :class:`Times` of ``times_ms`` (epoch ms, in any order, duplicates dropped).
    Raises ValidationError (field ``times``) for none or more than MAX_TIMES."""
    given = tuple(itertools.islice(times_ms, MAX_TIMES + 1))
    if len(given) > MAX_TIMES:
        raise ValidationError("times", "max", f"times may hold at most {MAX_TIMES} times")
    return Times(given)


def _instants_of(wall_ms: int, zone: ZoneInfo, follows_clock: bool) -> list[int]:
    """The runs (epoch ms, in order) of a matching wall time (ms from _WALL_EPOCH).

    zoneinfo reads a wall time at fold=0 with the offset before a clock change and
    at fold=1 with the one after: equal, the wall time is shown once; the first
    larger, it is shown twice (repeated); the first smaller, never (skipped).
    """
    first_offset, second_offset = _offsets_of(wall_ms, zone)
    if first_offset == second_offset:
        return [wall_ms - first_offset]
    earlier = wall_ms - max(first_offset, second_offset)
    later = wall_ms - min(first_offset, second_offset)
    if first_offset > second_offset:  # repeated: the two passes
        return [earlier, later] if follows_clock else [earlier]
    # Skipped: the clock changes in (earlier, later]; its first instant after the skip.
    return [] if follows_clock else [_change_between(earlier, later, zone)]


def _change_between(low_ms: int, high_ms: int, zone: ZoneInfo) -> int:
    """The instant in (low_ms, high_ms] at which ``zone``'s offset changes from the
    one it has at low_ms (there is one change between them): a bisection."""
    before = _offset_at(low_ms, zone)
    while high_ms - low_ms > 1:
        middle = (low_ms + high_ms) // 2
        if _offset_at(middle, zone) == before:
            low_ms = middle
        else:
            high_ms = middle
    return high_ms


def _offset_at(instant_ms: int, zone: ZoneInfo) -> int:
    """``zone``'s UTC offset (ms) at an instant."""
    return _ms(from_epoch_ms(instant_ms).astimezone(zone).utcoffset())


def _offsets_of(wall_ms: int, zone: ZoneInfo) -> tuple[int, int]:
    """``zone``'s UTC offsets (ms) for a wall time at fold=0 and at fold=1."""
    wall = _wall(wall_ms)
    first, second = (wall.replace(tzinfo=zone, fold=fold).utcoffset() for fold in (0, 1))
    return _ms(first), _ms(second)


def _ms(delta: timedelta | None) -> int:
    return (delta or timedelta()) // _MS


def _wall(wall_ms: int) -> datetime:
    return _WALL_EPOCH + timedelta(milliseconds=wall_ms)


def _wall_ms(wall: datetime) -> int:
    return (wall - _WALL_EPOCH) // _MS


def _zone(tz: str) -> ZoneInfo:
    """The zone named ``tz``; ValidationError (field ``tz``, rule ``zone``) if none."""
    try:
        return ZoneInfo(tz)
    except (LookupError, ValueError, TypeError, OSError):
        # No such zone (a KeyError), a malformed name, a folder of zones (Europe/).
        raise ValidationError(
            "tz",
            "zone",
            f"unknown time zone {quoted(tz)} (an IANA name such as Europe/Paris or UTC)",
        ) from None


def _check_int(value: object, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(
            field, "type", f"{field} must be an integer (ms); got {quoted(value)}"
        )


def _refused(rule: str, message: str) -> ValidationError:
    return ValidationError("cron", rule, message)


@functools.lru_cache(maxsize=1024)
def _check_cron(expression: str) -> None:
    """Raise ValidationError (field ``cron``) unless croniter reads ``expression`` as a
    5- or 6-field cron that matches some wall time; name the first bad field. The
    valid ones are remembered: a schedule read again costs no search."""
    fields = _FIELD.findall(expression)
    if len(fields) not in (5, 6):
        raise _refused(
            "format",
            "cron must have 5 fields (minute hour day month weekday) or 6 (second first); "
            f"got {len(fields)}: {quoted(expression)}",
        )
    six = len(fields) == 6
    named = zip(_FIELDS_6 if six else _FIELDS_5, fields, strict=True)
    for index, ((name, takes), field) in enumerate(named):
        where = f"cron field {index + 1} ({name}) {quoted(field)} in {quoted(expression)}"
        if field[0] in "RrHh":
            raise _refused("format", f"{where}: random (R) and hashed (H) fields are not supported")
        # Each field alone among stars, so that the message names the bad one.
        alone = " ".join(field if other == index else "*" for other in range(len(fields)))
        if not _croniter_accepts(alone, six):
            raise _refused(
                "format",
                f"{where} is not valid: the {name} takes {takes}, "
                "with a-b ranges, */n or a-b/n steps and a,b lists",
            )
    if not _croniter_accepts(expression, six):
        raise _refused("format", f"cron {quoted(expression)} is not valid")
    years = _NEVER_UNTIL.year - _NEVER_FROM.year
    try:
        cron = croniter(expression, _NEVER_FROM - timedelta(seconds=1), ret_type=datetime,
                        second_at_beginning=six, max_years_between_matches=years)  # fmt: skip
        never = cron.get_next(datetime) >= _NEVER_UNTIL
    except CroniterBadDateError:
        never = True
    except Exception:  # croniter must not raise past this module, whatever it raises
        raise _refused("format", f"cron {quoted(expression)} is not valid") from None
    if never:
        raise _refused(
            "never",
            f"cron {quoted(expression)} never runs: no date matches it (such as 30 February)",
        )


def _croniter_accepts(expression: str, six: bool) -> bool:
    try:
        return bool(croniter.is_valid(expression, second_at_beginning=six))
    except Exception:  # croniter must not raise past this module, whatever it raises
        return False
