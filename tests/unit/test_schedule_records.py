"""A schedule's op on its way into the wheel: its inbound record, where the scheduler
places it, what it refuses, and how a key's schedules are stored."""

from __future__ import annotations

import pytest

from delayline import timing
from delayline.kafka.records import from_ready
from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.records import to_packed
from delayline.schedules import ops, runs, state
from delayline.schedules.recurrence import Every, parse_cron
from delayline.schedules.spec import Schedule
from delayline.validation import Limits, encode_headers

pytestmark = pytest.mark.unit

T0 = 1_800_000_000_000
DEFINITION = Schedule.create("reports", "daily", b"x", Every(86_400_000), limits=Limits())


def placed(record: dict[bytes, bytes]) -> list[tuple[int, packs.Record]]:
    return [
        (key, next(packs.unpack(data)))
        for key, data in to_packed(
            f"{T0}-0", record, limits=Limits(), wheel=timing.Wheel(), shards=4
        )
    ]


def test_a_put_goes_to_its_schedules_key_with_its_definition() -> None:
    [(key, record)] = placed(
        ops.ScheduleOp(ops.PUT, "reports", "daily", T0, DEFINITION).to_record()
    )
    assert key == ops.schedule_key("reports", "daily")
    slot_ms, _, _ = timing.split_wheel_key(key)
    assert ops.is_schedule_slot(slot_ms)
    assert (record.kind, record.topic, record.key, record.reason) == (
        packs.SCHEDULE,
        "reports",
        "daily",
        ops.PUT,
    )
    assert record.inbound_id == f"{T0}-0"
    assert Schedule.from_json(record.body, Limits()) == DEFINITION


def test_schedule_keys_spread_and_stay_below_the_reject_slot() -> None:
    keys = {ops.schedule_key("t", f"s{n}") for n in range(1_000)}
    assert len(keys) == 1_000
    assert all(timing.split_wheel_key(key)[0] <= ops.SCHEDULE_SLOT_MS for key in keys)
    assert all(-(2**63) <= key < 0 for key in keys)
    assert len({timing.split_wheel_key(key)[0] % 8 for key in keys}) == 8


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        ({b"action": b"stop", b"topic": b"t", b"name": b"n"}, "action must be one of"),
        ({b"action": b"put", b"topic": b"t", b"name": b"n"}, "missing field 'definition'"),
        ({b"action": b"pause", b"topic": b"t", b"name": b"a b"}, "a schedule's name must be"),
        (
            {b"action": b"put", b"topic": b"t", b"name": b"other", b"definition": b""},
            "not JSON",
        ),
    ],
)
def test_a_bad_op_becomes_a_reject_with_its_reason(record: dict[bytes, bytes], reason: str) -> None:
    [(key, rejected)] = placed({b"v": b"1", b"op": b"schedule", **record})
    assert timing.split_wheel_key(key)[0] == timing.REJECT_SLOT_MS
    assert rejected.kind == packs.REJECT
    assert reason in rejected.reason


def test_a_definition_of_another_address_is_refused() -> None:
    record = ops.ScheduleOp(ops.PUT, "reports", "other", T0, DEFINITION).to_record()
    [(_, rejected)] = placed(record)
    assert rejected.kind == packs.REJECT
    assert "not of the record's reports/other" in rejected.reason


def test_every_op_of_one_schedule_goes_to_one_shard_and_schedules_spread() -> None:
    assert len({ops.shard_of("t", "n", 4) for _ in range(5)}) == 1
    assert len({ops.shard_of("t", f"n{i}", 4) for i in range(100)}) == 4


def test_a_keys_schedules_are_stored_and_read_back() -> None:
    cron = Schedule.create(
        "reports", "weekly", b"\xff", parse_cron("0 9 * * 1", "Europe/Paris"), limits=Limits()
    )
    stored = [
        runs.Armed(DEFINITION, "1-0", T0, handed_until_ms=T0 - 1, runs=3, skipped=2),
        runs.Armed(cron, "2-5", None),
    ]
    assert state.decode(state.encode(stored)) == stored
    assert state.decode(b"") == []
    with pytest.raises(ValueError, match="format"):
        state.decode(b'{"v": 9}')


def test_a_runs_headers_become_kafka_headers_as_any_messages_do() -> None:
    headers = runs.run_headers(DEFINITION, T0)
    ready = {
        b"topic": b"reports",
        b"id": runs.run_id(DEFINITION, "1-0", T0).encode(),
        b"deliver_at_ms": str(T0).encode(),
        b"delivered_at_ms": str(T0).encode(),
        b"attempt": b"1",
        b"body": b"x",
        b"headers": encode_headers(headers).encode(),
    }
    kafka_headers = dict(from_ready(ready).headers)
    assert kafka_headers["delayline-schedule"] == b"daily"
    assert kafka_headers["delayline-run-at"] == b"2027-01-15T08:00:00.000Z"


def test_a_drained_puts_counted_runs_travel_with_it_and_a_bad_span_is_refused() -> None:
    op = ops.ScheduleOp(ops.PUT, "reports", "daily", T0, DEFINITION, (T0, T0 + 60_000))
    [(_, record)] = placed(op.to_record())
    assert record.kind == packs.SCHEDULE
    assert ops.decode_counted(record.headers) == (T0, T0 + 60_000)
    for bad in (b"1:", b"x:1", b"5:4"):
        [(_, rejected)] = placed({**op.to_record(), b"counted": bad})
        assert rejected.kind == packs.REJECT
        assert "counted must be <from_ms>:<until_ms>" in rejected.reason
