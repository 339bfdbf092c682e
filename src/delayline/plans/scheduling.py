"""Plans for recurring schedules: put, pause, resume and delete, each one ``op=schedule``
record (:mod:`delayline.schedules.ops`) on the inbound stream of the schedule's shard;
and :func:`definition_from`, which makes the SDK's arguments a checked definition
(the HTTP API and the CLI give it theirs, their times already parsed)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TypedDict

from delayline.errors import ValidationError, quoted
from delayline.plans import Plan, xadd
from delayline.plans.producing import Published
from delayline.redis import keys
from delayline.redis.commands import Command
from delayline.schedules import ops
from delayline.schedules.recurrence import Recurrence, parse_cron, parse_every, parse_times
from delayline.schedules.spec import LATEST, CatchUp, Schedule, validate_name
from delayline.timing import in_range_ms, to_epoch_ms
from delayline.validation import Limits, validate_topic

#: The actions that name a schedule without a definition.
CHANGES = (ops.PAUSE, ops.RESUME, ops.DELETE)


class ScheduleArguments(TypedDict, total=False):
    """:func:`definition_from`'s keyword arguments (but ``limits``) as the HTTP API and
    the CLI pass them on: times in epoch ms, their text already parsed."""

    cron: str | None
    tz: str | None
    every: int | str | None
    anchor: int | None
    times: Iterable[int] | None
    start: int | None
    end: int | None
    max_runs: int | None
    paused: bool
    catch_up: str
    catch_up_window: int | None
    catch_up_max_runs: int | None
    key: str | None
    headers: Mapping[str, str] | None


def definition_from(
    name: str,
    topic: str,
    body: bytes | str,
    *,
    limits: Limits,
    cron: str | None = None,
    tz: str | None = None,
    every: timedelta | int | str | None = None,
    anchor: datetime | int | None = None,
    times: Iterable[datetime | int] | None = None,
    start: datetime | int | None = None,
    end: datetime | int | None = None,
    max_runs: int | None = None,
    paused: bool = False,
    catch_up: str = LATEST,
    catch_up_window: timedelta | int | None = None,
    catch_up_max_runs: int | None = None,
    key: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Schedule:
    """The checked definition of :meth:`delayline.Client.schedule`'s arguments (see it
    for their meaning and units). Raises ValidationError naming the field."""
    recurrence = _recurrence(cron, tz, every, anchor, times)
    if not isinstance(paused, bool):
        raise ValidationError(
            "paused", "type", f"paused must be True or False; got {quoted(paused)}"
        )
    window_ms = (
        None if catch_up_window is None else _duration_ms(catch_up_window, "catch_up_window")
    )
    return Schedule.create(
        topic,
        name,
        body,
        recurrence,
        limits=limits,
        key=key,
        headers=headers,
        start_ms=None if start is None else _epoch_ms(start, "start"),
        end_ms=None if end is None else _epoch_ms(end, "end"),
        max_runs=max_runs,
        paused=paused,
        catch_up=CatchUp.create(catch_up, window_ms, catch_up_max_runs),
    )


def put(definition: Schedule, *, now_ms: int, published: Published) -> Plan[Schedule]:
    """Put ``definition`` under its address, replacing any other; the plan returns it."""
    op = ops.ScheduleOp(ops.PUT, definition.topic, definition.name, now_ms, definition)
    return Plan([_write(op, published)], lambda _: definition, "put a schedule")


def change(action: str, topic: str, name: str, *, now_ms: int, published: Published) -> Plan[None]:
    """Pause, resume or delete (``action``, one of CHANGES) schedule ``(topic, name)``.
    Raises ValidationError for another action, or a topic or name no schedule can have."""
    if action not in CHANGES:
        raise ValidationError(
            "action", "one_of", f"action must be one of {', '.join(CHANGES)}; got {quoted(action)}"
        )
    op = ops.ScheduleOp(action, validate_topic(topic), validate_name(name), now_ms)
    return Plan([_write(op, published)], lambda _: None, f"{action} a schedule")


def inbound_of(topic: str, name: str, shards: int) -> str:
    """The inbound stream that carries every record of schedule ``(topic, name)``."""
    return keys.layout(shards)[ops.shard_of(topic, name, shards)].inbound


def _write(op: ops.ScheduleOp, published: Published) -> Command:
    # A plain XADD, as a far send's: no script, so it needs no published shards on a
    # cluster (the unsharded stream is always read), and no MAXLEN (the scheduler
    # trims the stream as it commits what it read).
    return xadd(inbound_of(op.topic, op.name, published.shards), op.to_record())


def _recurrence(
    cron: str | None,
    tz: str | None,
    every: timedelta | int | str | None,
    anchor: datetime | int | None,
    times: Iterable[datetime | int] | None,
) -> Recurrence:
    given = [
        name
        for name, value in (("cron", cron), ("every", every), ("times", times))
        if value is not None
    ]
    if len(given) != 1:
        raise ValidationError("recurrence", "one_of", "give exactly one of cron, every and times")
    if tz is not None and cron is None:
        raise ValidationError(
            "tz", "only_with", "tz goes with cron only (the zone of its wall clock)"
        )
    if anchor is not None and every is None:
        raise ValidationError("anchor", "only_with", "anchor goes with every only")
    if cron is not None:
        return parse_cron(cron, "UTC" if tz is None else tz)
    if every is not None:
        anchor_ms = 0 if anchor is None else _epoch_ms(anchor, "anchor")
        period = every if isinstance(every, str) else _duration_ms(every, "every")
        return parse_every(period, anchor_ms)
    assert times is not None
    if isinstance(times, str | bytes) or not isinstance(times, Iterable):
        raise ValidationError(
            "times", "type", "times must be a list of aware datetimes or epoch ms"
        )
    return parse_times(_epoch_ms(time, "times") for time in times)


def _epoch_ms(moment: datetime | int, field: str) -> int:
    """Epoch ms of an aware datetime or of epoch ms, from 1970 to 9999. Raises
    ValidationError naming ``field``."""
    if isinstance(moment, datetime):
        epoch_ms = to_epoch_ms(moment, field)
    elif isinstance(moment, int) and not isinstance(moment, bool):
        epoch_ms = in_range_ms(moment, field)
    else:
        raise ValidationError(
            field, "type", f"{field} must be an aware datetime or epoch ms; got {quoted(moment)}"
        )
    if epoch_ms < 0:
        # Nothing runs before 1970; and a time before year 1 could not be shown.
        raise ValidationError(field, "range", f"{field} is before 1970-01-01T00:00:00Z")
    return epoch_ms


def _duration_ms(duration: timedelta | int, field: str) -> int:
    """Ms of a timedelta (whole ms, rounded down) or of ms. Raises ValidationError."""
    if isinstance(duration, timedelta):
        return duration // timedelta(milliseconds=1)
    if isinstance(duration, int) and not isinstance(duration, bool):
        return duration
    raise ValidationError(
        field, "type", f"{field} must be a timedelta or ms; got {quoted(duration)}"
    )
