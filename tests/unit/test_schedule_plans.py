"""The SDK's schedule plans: its arguments made a definition (each refusal naming its
field and rule), and the one record each plan writes, to its schedule's shard."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from delayline.client_base import ClientBase
from delayline.errors import ValidationError
from delayline.plans import Plan
from delayline.plans.producing import Published
from delayline.plans.scheduling import change, definition_from, inbound_of, put
from delayline.redis import keys
from delayline.schedules import ops
from delayline.schedules.recurrence import Cron, Every, Times
from delayline.schedules.spec import ALL, SKIP, CatchUp, Schedule
from delayline.validation import Limits

pytestmark = pytest.mark.unit

LIMITS = Limits()
NOW_MS = 1_780_000_000_000
#: 2026-06-01T09:00:00Z, and the same instant two hours east of UTC.
JUNE_MS = 1_780_304_400_000
JUNE = datetime(2026, 6, 1, 9, tzinfo=UTC)
JUNE_EAST = datetime(2026, 6, 1, 11, tzinfo=timezone(timedelta(hours=2)))
ONE = Published()
FOUR = Published(shards=4, history=(4,))


def define(**arguments: Any) -> Schedule:
    return definition_from("daily", "reports", b"run", limits=LIMITS, **arguments)


def refusal(**arguments: Any) -> tuple[str, str]:
    with pytest.raises(ValidationError) as caught:
        define(**arguments)
    return caught.value.field, caught.value.rule


# -- the arguments, made a definition -----------------------------------------------------------


def test_a_cron_runs_in_utc_unless_given_a_zone() -> None:
    assert define(cron="0 9 * * *").recurrence == Cron("0 9 * * *", "UTC")
    paris = define(cron="0 9 * * MON-FRI", tz="Europe/Paris")
    assert paris.recurrence == Cron("0 9 * * MON-FRI", "Europe/Paris")
    assert paris.address == ("reports", "daily")
    assert paris.body == b"run"


@pytest.mark.parametrize(
    "every", [timedelta(minutes=15), 900_000, "15m", timedelta(minutes=15, microseconds=999)]
)
def test_every_is_a_timedelta_ms_or_a_duration(every: timedelta | int | str) -> None:
    assert define(every=every).recurrence == Every(900_000, 0)


@pytest.mark.parametrize("anchor", [JUNE, JUNE_EAST, JUNE_MS])
def test_an_anchor_is_an_aware_datetime_or_epoch_ms(anchor: datetime | int) -> None:
    assert define(every="1h", anchor=anchor).recurrence == Every(3_600_000, JUNE_MS)


def test_times_are_aware_datetimes_or_epoch_ms_in_any_order() -> None:
    times: Iterable[datetime | int] = (t for t in [JUNE_MS + 5, JUNE_EAST, 7, JUNE])
    assert define(times=times).recurrence == Times((7, JUNE_MS, JUNE_MS + 5))


def test_every_other_argument_reaches_the_definition() -> None:
    definition = define(
        cron="*/5 * * * *",
        start=JUNE_EAST,
        end=JUNE_MS + 86_400_000,
        max_runs=3,
        paused=True,
        catch_up=ALL,
        catch_up_window=timedelta(minutes=10),
        catch_up_max_runs=4,
        key="k-1",
        headers={"team": "billing"},
    )
    assert (definition.start_ms, definition.end_ms) == (JUNE_MS, JUNE_MS + 86_400_000)
    assert (definition.max_runs, definition.paused) == (3, True)
    assert definition.catch_up == CatchUp(ALL, 600_000, 4)
    assert (definition.key, dict(definition.headers)) == ("k-1", {"team": "billing"})
    assert define(every=1_000, catch_up=SKIP, catch_up_window=5).catch_up == CatchUp(SKIP, 5, 100)
    assert define(every=1_000).catch_up == CatchUp()


@pytest.mark.parametrize(
    ("arguments", "field", "rule"),
    [
        ({}, "recurrence", "one_of"),
        ({"cron": "* * * * *", "every": "1m"}, "recurrence", "one_of"),
        ({"every": "1m", "times": [1]}, "recurrence", "one_of"),
        ({"cron": "* * * * *", "every": "1m", "times": [1]}, "recurrence", "one_of"),
        ({"every": "1m", "tz": "Europe/Paris"}, "tz", "only_with"),
        ({"times": [1], "tz": "UTC"}, "tz", "only_with"),
        ({"cron": "0 9 * * *", "anchor": 0}, "anchor", "only_with"),
        ({"cron": "0 9 * * *", "tz": "Mars/Olympus"}, "tz", "zone"),
        ({"cron": "0 9 30 2 *"}, "cron", "never"),
        ({"every": "soon"}, "every", "duration"),
        ({"every": 1.5}, "every", "type"),
        ({"every": True}, "every", "type"),
        ({"every": timedelta(milliseconds=999)}, "every", "min"),
        ({"every": "1m", "anchor": "2026-06-01"}, "anchor", "type"),
        ({"times": []}, "times", "empty"),
        ({"times": "1700000000000"}, "times", "type"),
        ({"times": [JUNE, 1.0]}, "times", "type"),
        ({"every": "1m", "start": JUNE_MS, "end": JUNE_MS - 1}, "end", "order"),
        ({"every": "1m", "start": "today"}, "start", "type"),
        ({"every": "1m", "end": 10**20}, "end", "range"),
        ({"every": "1m", "start": -1}, "start", "range"),
        ({"every": "1m", "anchor": -(10**20)}, "anchor", "range"),
        ({"times": [datetime(1969, 12, 31, 23, 59, tzinfo=UTC)]}, "times", "range"),
        ({"every": "1m", "max_runs": 0}, "max_runs", "range"),
        ({"every": "1m", "paused": "yes"}, "paused", "type"),
        ({"every": "1m", "catch_up": "some"}, "catch_up", "policy"),
        ({"every": "1m", "catch_up_window": -1}, "catch_up_window", "range"),
        ({"every": "1m", "catch_up_window": 1.5}, "catch_up_window", "type"),
        ({"every": "1m", "catch_up_max_runs": 0}, "catch_up_max_runs", "range"),
        ({"every": "1m", "key": 7}, "key", "type"),
        ({"every": "1m", "headers": {"a": 1}}, "headers", "type"),
    ],
)
def test_each_refusal_names_its_field_and_rule(
    arguments: dict[str, Any], field: str, rule: str
) -> None:
    assert refusal(**arguments) == (field, rule)


def test_the_recurrence_refusal_says_what_to_give() -> None:
    with pytest.raises(ValidationError, match="give exactly one of cron, every and times"):
        define()


@pytest.mark.parametrize("argument", ["start", "end", "anchor", "times"])
def test_a_naive_datetime_is_refused(argument: str) -> None:
    naive = datetime(2026, 6, 1, 9)
    given: dict[str, Any] = {"times": [naive]} if argument == "times" else {argument: naive}
    if argument != "times":
        given["every"] = "1h"
    assert refusal(**given) == (argument, "timezone")


def test_the_message_rules_apply_to_a_definition() -> None:
    small = Limits(max_body_bytes=4)
    with pytest.raises(ValidationError) as caught:
        definition_from("n", "reports", b"12345", limits=small, every="1m")
    assert (caught.value.field, caught.value.rule) == ("body", "max_bytes")
    with pytest.raises(ValidationError) as caught:
        definition_from("n", "delayline:x", b"", limits=LIMITS, every="1m")
    assert (caught.value.field, caught.value.rule) == ("topic", "reserved")
    with pytest.raises(ValidationError) as caught:
        definition_from("no spaces", "reports", b"", limits=LIMITS, every="1m")
    assert (caught.value.field, caught.value.rule) == ("name", "pattern")


# -- the plans' records --------------------------------------------------------------------------


def written(plan: Plan[Any]) -> tuple[str, dict[bytes, bytes]]:
    """The stream and the record of a plan's one XADD."""
    [command] = plan.commands
    name, stream, entry_id, *parts = command
    assert (name, entry_id) == ("XADD", "*")
    fields = dict(zip(parts[::2], parts[1::2], strict=True))
    return stream, fields


@pytest.mark.parametrize("published", [ONE, FOUR], ids=["1 shard", "4 shards"])
def test_a_put_writes_the_definition_to_its_shard(published: Published) -> None:
    definition = define(cron="0 9 * * *", tz="Europe/Paris", key="k")
    plan = put(definition, now_ms=NOW_MS, published=published)
    stream, fields = written(plan)
    shard = ops.shard_of("reports", "daily", published.shards)
    assert stream == keys.layout(published.shards)[shard].inbound
    assert stream == (keys.INBOUND if published.shards == 1 else keys.inbound_shard(shard))
    assert (fields[b"v"], fields[b"op"], fields[b"action"]) == (b"1", b"schedule", b"put")
    assert (fields[b"topic"], fields[b"name"]) == (b"reports", b"daily")
    assert fields[b"sent_at_ms"] == str(NOW_MS).encode()
    assert fields[b"definition"] == definition.to_json().encode()
    decoded = ops.decode_op(fields, sent_at_ms=NOW_MS, limits=LIMITS)
    assert decoded == ops.ScheduleOp(ops.PUT, "reports", "daily", NOW_MS, definition)
    assert plan.parse([b"1-0"]) == definition
    assert (plan.action, plan.transaction) == ("put a schedule", False)


@pytest.mark.parametrize("action", [ops.PAUSE, ops.RESUME, ops.DELETE])
@pytest.mark.parametrize("published", [ONE, FOUR], ids=["1 shard", "4 shards"])
def test_a_change_names_the_schedule_in_the_same_stream(action: str, published: Published) -> None:
    plan = change(action, "reports", "daily", now_ms=NOW_MS, published=published)
    stream, fields = written(plan)
    assert stream == inbound_of("reports", "daily", published.shards)
    assert fields[b"action"] == action.encode()
    assert b"definition" not in fields
    decoded = ops.decode_op(fields, sent_at_ms=NOW_MS, limits=LIMITS)
    assert decoded == ops.ScheduleOp(action, "reports", "daily", NOW_MS)
    assert plan.parse([b"1-0"]) is None
    assert plan.action == f"{action} a schedule"


def test_schedules_spread_over_the_shards_and_each_keeps_its_own() -> None:
    streams = {inbound_of("reports", f"s{n}", 4) for n in range(40)}
    assert streams == {keys.inbound_shard(shard) for shard in range(4)}
    assert inbound_of("reports", "s1", 4) == inbound_of("reports", "s1", 4)
    # On a cluster no scheduler has published to, a plain XADD to the default stream.
    cluster = Published(on_cluster=True)
    stream, _ = written(put(define(every="1m"), now_ms=NOW_MS, published=cluster))
    assert stream == keys.INBOUND


@pytest.mark.parametrize(
    ("action", "topic", "name", "field"),
    [
        (ops.PUT, "reports", "daily", "action"),
        ("stop", "reports", "daily", "action"),
        (ops.PAUSE, "bad topic", "daily", "topic"),
        (ops.DELETE, "reports", "", "name"),
    ],
)
def test_a_change_of_no_possible_schedule_is_refused(
    action: str, topic: str, name: str, field: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        change(action, topic, name, now_ms=NOW_MS, published=ONE)
    assert caught.value.field == field


# -- the client's plans: the config read first, as for a send ------------------------------------


def test_the_client_reads_the_published_config_then_writes_to_its_shard() -> None:
    base = ClientBase(limits=None, status_retention_ms=1)
    first = base._schedule_plan(define(every="1m"))
    assert first.commands[0][:2] == ("HMGET", keys.CONFIG)
    assert first.action == "put a schedule"
    then = first.parse([[b"4", b"60000", b"4"]])
    assert isinstance(then, Plan)
    stream, fields = written(then)
    assert stream == inbound_of("reports", "daily", 4)
    assert Schedule.from_json(fields[b"definition"], LIMITS).recurrence == Every(60_000)
    # Known now: the next plan writes at once.
    paused_stream, paused = written(base._schedule_change_plan(ops.PAUSE, "daily", "reports"))
    assert paused_stream == stream
    assert (paused[b"action"], paused[b"topic"], paused[b"name"]) == (
        b"pause",
        b"reports",
        b"daily",
    )


def test_the_client_refuses_a_bad_change_before_any_command() -> None:
    base = ClientBase(limits=None, status_retention_ms=1)
    with pytest.raises(ValidationError):
        base._schedule_change_plan(ops.RESUME, "daily", "not a topic")
