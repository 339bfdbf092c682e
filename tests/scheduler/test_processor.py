"""The wheel processor under TwsTester: no Spark query, processing-time timers simulated."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from delayline import timing
from delayline.model import Cancel, Message
from delayline.scheduler import schemas
from delayline.scheduler.processor import WheelProcessor
from delayline.scheduler.records import to_source_row
from delayline.validation import Limits

TICK_MS = 100
SHARDS = 1  # one key per slot keeps the tests about timing, not hashing
LEAD_MS = 300
RETENTION_MS = 60_000
T0 = 1_800_000_000_000
SourceRow = Row(*schemas.SOURCE.fieldNames())


class Wheel:
    """A processor under test plus helpers to feed it records by slot."""

    def __init__(self) -> None:
        self.tester = TwsTester(WheelProcessor(LEAD_MS, RETENTION_MS), timeMode="ProcessingTime")
        self.clock_ms = T0
        self.tester.setProcessingTime(T0)
        self._entries = 0

    def message(self, deliver_at_ms: int) -> Message:
        return Message.create("t", b"x", now_ms=T0, limits=Limits(), deliver_at=deliver_at_ms)

    def row(self, record: dict[bytes, bytes]) -> Any:
        self._entries += 1
        fields = to_source_row(
            f"{T0}-{self._entries}", record, limits=Limits(), tick_ms=TICK_MS, shards=SHARDS
        )
        return SourceRow(*fields)

    def feed(self, *records: Message | Cancel) -> list[Row]:
        """One batch of records; all must share a wheel key. Returns the rows emitted."""
        rows = [self.row(record.to_record()) for record in records]
        keys = {row.wheel_key for row in rows}
        assert len(keys) == 1
        return self.tester.test(keys.pop(), rows)

    def advance_to(self, now_ms: int) -> list[Row]:
        """Move processing time forward; returns what expired timers emitted."""
        self.clock_ms = now_ms
        return list(self.tester.setProcessingTime(now_ms))

    def pending(self, deliver_at_ms: int) -> list[tuple[Any, ...]]:
        key = timing.wheel_key(timing.slot_start_ms(deliver_at_ms, TICK_MS), 0)
        return self.tester.peekListState("messages", key)


def ids_of(rows: list[Row], kind: str) -> set[str]:
    return {row.id for row in rows if row.kind == kind}


@pytest.fixture
def wheel() -> Wheel:
    return Wheel()


def test_a_slot_fires_all_its_messages_at_once(wheel: Wheel) -> None:
    due_ms = T0 + 10_000
    messages = [wheel.message(due_ms + offset) for offset in (0, 10, 50, 99)]
    assert wheel.feed(*messages) == []  # stored, nothing out yet
    assert len(wheel.pending(due_ms)) == 4

    assert wheel.advance_to(due_ms - LEAD_MS - 1) == []  # one ms before the timer
    fired = wheel.advance_to(due_ms - LEAD_MS)  # fires lead_ms early; the sink holds
    assert ids_of(fired, schemas.DELIVER) == {m.id for m in messages}
    assert {row.deliver_at_ms for row in fired} == {m.deliver_at_ms for m in messages}
    assert wheel.pending(due_ms) == []
    assert wheel.advance_to(due_ms + 5_000) == []  # fired once, never again


def test_output_rows_carry_the_whole_message(wheel: Wheel) -> None:
    message = Message.create(
        "orders", b"\x00body", now_ms=T0, limits=Limits(), delay=2_000, key="k", headers={"h": "v"}
    )
    wheel.feed(message)
    [row] = wheel.advance_to(message.deliver_at_ms)
    assert (row.kind, row.id, row.topic, row.body, row.key, row.headers, row.attempt) == (
        schemas.DELIVER,
        message.id,
        "orders",
        b"\x00body",
        "k",
        '{"h":"v"}',
        1,
    )
    assert row.inbound_id.startswith(f"{T0}-")


def test_a_cancel_before_the_fire_wins(wheel: Wheel) -> None:
    due_ms = T0 + 10_000
    keep, cancel = wheel.message(due_ms), wheel.message(due_ms + 1)
    wheel.feed(keep, cancel)
    wheel.advance_to(T0 + 5_000)
    assert wheel.feed(Cancel(cancel.id, T0 + 5_000)) == []
    fired = wheel.advance_to(due_ms)
    assert ids_of(fired, schemas.DELIVER) == {keep.id}
    assert ids_of(fired, schemas.DROP) == {cancel.id}


def test_a_cancel_that_arrives_before_its_message_still_wins(wheel: Wheel) -> None:
    due_ms = T0 + 10_000
    message = wheel.message(due_ms)
    assert wheel.feed(Cancel(message.id, T0)) == []
    wheel.advance_to(T0 + 1_000)
    assert wheel.feed(message) == []
    fired = wheel.advance_to(due_ms)
    assert ids_of(fired, schemas.DELIVER) == set()
    assert ids_of(fired, schemas.DROP) == {message.id}


def test_a_cancel_in_the_same_batch_as_its_message_wins(wheel: Wheel) -> None:
    message = wheel.message(T0 + 10_000)
    wheel.feed(message, Cancel(message.id, T0))
    assert ids_of(wheel.advance_to(T0 + 10_000), schemas.DELIVER) == set()


def test_a_past_due_message_is_emitted_immediately(wheel: Wheel) -> None:
    past = wheel.message(T0 - 5_000)
    emitted = wheel.feed(past)
    assert ids_of(emitted, schemas.DELIVER) == {past.id}
    assert wheel.pending(past.deliver_at_ms) == []


def test_a_message_due_within_the_lead_is_emitted_immediately(wheel: Wheel) -> None:
    soon = wheel.message(T0 + LEAD_MS - 1)  # its slot's timer would already be past
    assert ids_of(wheel.feed(soon), schemas.DELIVER) == {soon.id}


def test_a_late_message_loses_to_a_cancel_kept_after_the_slot_fired(wheel: Wheel) -> None:
    due_ms = T0 + 1_000
    message = wheel.message(due_ms)
    wheel.feed(Cancel(message.id, T0))
    wheel.advance_to(due_ms + 5_000)  # the slot fires with nothing to deliver
    emitted = wheel.feed(message)  # the message arrives late, e.g. from a slow producer
    assert ids_of(emitted, schemas.DELIVER) == set()
    assert ids_of(emitted, schemas.DROP) == {message.id}


def test_cancels_are_forgotten_after_the_retention(wheel: Wheel) -> None:
    due_ms = T0 + 1_000
    message = wheel.message(due_ms)
    wheel.feed(Cancel(message.id, T0))
    key = timing.wheel_key(timing.slot_start_ms(due_ms, TICK_MS), 0)
    wheel.advance_to(due_ms)
    assert wheel.tester.peekListState("cancels", key) == [(message.id,)]
    wheel.advance_to(timing.slot_start_ms(due_ms, TICK_MS) + RETENTION_MS)
    assert wheel.tester.peekListState("cancels", key) == []


def test_rejects_pass_straight_through(wheel: Wheel) -> None:
    row = wheel.row({b"v": b"1", b"op": b"nope"})
    [out] = wheel.tester.test(row.wheel_key, [row])
    assert (out.kind, out.inbound_id, out.raw) == (schemas.REJECT, row.inbound_id, row.raw)
    assert "unknown op" in out.reason
