"""The wheel processor under TwsTester: no Spark query, processing-time timers simulated."""

from __future__ import annotations

import pytest
from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from delayline import timing
from delayline.model import Cancel, Message
from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.processor import WheelProcessor
from delayline.scheduler.pipeline.records import to_packed
from delayline.validation import Limits

TICK_MS = 100
WHEEL = timing.Wheel(tick_ms=TICK_MS)
SHARDS = 1  # one key per slot keeps the tests about timing, not hashing
LEAD_MS = 300
RETENTION_MS = 60_000
T0 = 1_800_000_000_000


class Wheel:
    """A processor under test plus helpers to feed it records by slot."""

    def __init__(self) -> None:
        self.wakeups: list[int] = []
        self.processor = WheelProcessor(LEAD_MS, RETENTION_MS, WHEEL, self.wakeups.extend)
        self.tester = TwsTester(self.processor, timeMode="ProcessingTime")
        self.clock_ms = T0
        self.tester.setProcessingTime(T0)
        self._entries = 0

    def message(self, deliver_at_ms: int) -> Message:
        return Message.create("t", b"x", now_ms=T0, limits=Limits(), deliver_at=deliver_at_ms)

    def row(self, record: dict[bytes, bytes]) -> Row:
        self._entries += 1
        [(key, data), *_] = to_packed(
            f"{T0}-{self._entries}", record, limits=Limits(), wheel=WHEEL, shards=SHARDS
        )
        return Row(wheel_key=key, pack=data)

    def feed(self, *records: Message | Cancel) -> list[packs.Record]:
        """One batch of records; all must share a wheel key. Returns the records emitted."""
        rows = [self.row(record.to_record()) for record in records]
        keys = {row.wheel_key for row in rows}
        assert len(keys) == 1
        return emitted(self.tester.test(keys.pop(), rows))

    def advance_to(self, now_ms: int) -> list[packs.Record]:
        """Move processing time forward; returns what expired timers emitted."""
        self.clock_ms = now_ms
        return emitted(self.tester.setProcessingTime(now_ms))

    def stored(self, deliver_at_ms: int) -> list[packs.Record]:
        """The records held in state for the slot of ``deliver_at_ms``."""
        key = timing.wheel_key(timing.slot_start_ms(deliver_at_ms, TICK_MS), 0)
        return [
            r for (data,) in self.tester.peekListState("entries", key) for r in packs.unpack(data)
        ]


def emitted(rows: list[Row]) -> list[packs.Record]:
    return [record for row in rows for record in packs.unpack(row.pack)]


def ids_of(records: list[packs.Record], kind: int) -> set[str]:
    return {record.id for record in records if record.kind == kind}


@pytest.fixture
def wheel() -> Wheel:
    return Wheel()


def test_a_slot_fires_all_its_messages(wheel: Wheel) -> None:
    due_ms = T0 + 10_000
    messages = [wheel.message(due_ms + offset) for offset in (0, 10, 50, 99)]
    assert wheel.feed(*messages) == []  # stored, nothing out yet
    assert len(wheel.stored(due_ms)) == 4
    assert wheel.advance_to(due_ms - LEAD_MS - 1) == []  # one ms before the slot's timer
    emitted_at: dict[str, int] = {}
    for now_ms in range(due_ms - LEAD_MS, due_ms + TICK_MS):  # walk through the slot
        for record in wheel.advance_to(now_ms):
            assert record.kind == packs.DELIVER
            assert record.id not in emitted_at, "emitted twice"
            emitted_at[record.id] = now_ms
    assert set(emitted_at) == {m.id for m in messages}
    for message in messages:  # each leaves horizon_ms ahead of its time; the sink holds it
        assert emitted_at[message.id] == message.deliver_at_ms - LEAD_MS
    assert wheel.stored(due_ms) == []
    assert wheel.advance_to(due_ms + 5_000) == []  # fired once, never again


def test_every_timer_set_is_recorded_as_a_wakeup_when_the_partition_closes(
    wheel: Wheel,
) -> None:
    soon, later = wheel.message(T0 + 10_000), wheel.message(T0 + 10_050)
    wheel.feed(soon, later)
    assert wheel.wakeups == []  # recorded once per partition, not per key
    wheel.processor.close()
    assert wheel.wakeups == [T0 + 10_000 - LEAD_MS]
    wheel.advance_to(T0 + 10_000 - LEAD_MS)  # emits soon, keeps later: a timer for it
    wheel.processor.close()
    assert wheel.wakeups == [T0 + 10_000 - LEAD_MS, T0 + 10_050 - LEAD_MS]
    wheel.processor.close()  # nothing new: nothing recorded
    assert len(wheel.wakeups) == 2


def test_output_rows_carry_the_whole_message(wheel: Wheel) -> None:
    message = Message.create(
        "orders", b"\x00body", now_ms=T0, limits=Limits(), delay=2_000, key="k", headers={"h": "v"}
    )
    wheel.feed(message)
    [row] = wheel.advance_to(message.deliver_at_ms)
    assert (row.kind, row.id, row.topic, row.body, row.key, row.headers, row.attempt) == (
        packs.DELIVER,
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
    assert ids_of(fired, packs.DELIVER) == {keep.id}
    assert ids_of(fired, packs.DROP) == {cancel.id}


def test_a_cancel_that_arrives_before_its_message_still_wins(wheel: Wheel) -> None:
    due_ms = T0 + 10_000
    message = wheel.message(due_ms)
    assert wheel.feed(Cancel(message.id, T0)) == []
    wheel.advance_to(T0 + 1_000)
    assert wheel.feed(message) == []
    fired = wheel.advance_to(due_ms)
    assert ids_of(fired, packs.DELIVER) == set()
    assert ids_of(fired, packs.DROP) == {message.id}


def test_a_cancel_in_the_same_batch_as_its_message_wins(wheel: Wheel) -> None:
    message = wheel.message(T0 + 10_000)
    wheel.feed(message, Cancel(message.id, T0))
    assert ids_of(wheel.advance_to(T0 + 10_000), packs.DELIVER) == set()


def test_a_past_due_message_is_emitted_immediately(wheel: Wheel) -> None:
    past = wheel.message(T0 - 5_000)
    emitted = wheel.feed(past)
    assert ids_of(emitted, packs.DELIVER) == {past.id}
    assert wheel.stored(past.deliver_at_ms) == []


def test_a_message_due_within_the_lead_is_emitted_immediately(wheel: Wheel) -> None:
    soon = wheel.message(T0 + LEAD_MS - 1)  # its slot's timer would already be past
    assert ids_of(wheel.feed(soon), packs.DELIVER) == {soon.id}


def test_a_late_message_loses_to_a_cancel_kept_after_the_slot_fired(wheel: Wheel) -> None:
    due_ms = T0 + 1_000
    message = wheel.message(due_ms)
    wheel.feed(Cancel(message.id, T0))
    wheel.advance_to(due_ms + 5_000)  # the slot fires with nothing to deliver
    emitted = wheel.feed(message)  # the message arrives late, e.g. from a slow producer
    assert ids_of(emitted, packs.DELIVER) == set()
    assert ids_of(emitted, packs.DROP) == {message.id}


def test_cancels_are_forgotten_after_the_retention(wheel: Wheel) -> None:
    due_ms = T0 + 1_000
    message = wheel.message(due_ms)
    wheel.feed(Cancel(message.id, T0))
    wheel.advance_to(due_ms)
    assert [(r.kind, r.id) for r in wheel.stored(due_ms)] == [(packs.CANCEL, message.id)]
    wheel.advance_to(timing.slot_start_ms(due_ms, TICK_MS) + RETENTION_MS)
    assert wheel.stored(due_ms) == []


def test_a_firing_keeps_what_is_not_due_within_the_lead(wheel: Wheel) -> None:
    soon, later = wheel.message(T0 + 10_000), wheel.message(T0 + 10_000 + TICK_MS - 1)
    wheel.feed(soon, later)
    assert ids_of(wheel.advance_to(T0 + 10_000 - LEAD_MS), packs.DELIVER) == {soon.id}
    assert [r.id for r in wheel.stored(soon.deliver_at_ms)] == [later.id]
    assert ids_of(wheel.advance_to(later.deliver_at_ms - LEAD_MS), packs.DELIVER) == {later.id}
    assert wheel.stored(soon.deliver_at_ms) == []


def test_rejects_pass_straight_through(wheel: Wheel) -> None:
    row = wheel.row({b"v": b"1", b"op": b"nope"})
    [out] = emitted(wheel.tester.test(row.wheel_key, [row]))
    assert out.kind == packs.REJECT
    assert "unknown op" in out.reason
    assert packs.decode_fields(out.body) == [(b"v", b"1"), (b"op", b"nope")]


def test_a_coarse_slot_hands_its_messages_down_at_its_lead(wheel: Wheel) -> None:
    far_ms = T0 + WHEEL.coarse_after_ms + 30_000
    messages = [wheel.message(far_ms), wheel.message(far_ms + 5_000)]
    assert wheel.feed(*messages) == []
    coarse_slot = timing.slot_start_ms(far_ms, WHEEL.coarse_tick_ms)
    assert wheel.advance_to(coarse_slot - WHEEL.cascade_ahead_ms - 1) == []
    handed_down = wheel.advance_to(coarse_slot - WHEEL.cascade_ahead_ms)
    assert [(r.kind, r.id) for r in handed_down] == [(packs.CASCADE, m.id) for m in messages]
    assert handed_down[0].topic == "t"  # the whole message goes back to the inbound stream


def test_a_cancel_at_the_coarse_level_drops_instead_of_handing_down(wheel: Wheel) -> None:
    far_ms = T0 + WHEEL.coarse_after_ms + 30_000
    message = wheel.message(far_ms)
    wheel.feed(message)
    cancels = to_packed(
        f"{T0}-99", Cancel(message.id, T0).to_record(), limits=Limits(), wheel=WHEEL, shards=SHARDS
    )
    [(key, data)] = [(k, d) for k, d in cancels if timing.split_wheel_key(k)[2]]  # the coarse one
    cancel = Row(wheel_key=key, pack=data)
    assert emitted(wheel.tester.test(key, [cancel])) == []
    coarse_slot = timing.slot_start_ms(far_ms, WHEEL.coarse_tick_ms)
    [dropped] = wheel.advance_to(coarse_slot - WHEEL.cascade_ahead_ms)
    assert (dropped.kind, dropped.id) == (packs.DROP, message.id)


def test_a_withdrawal_drops_its_message_at_once_and_then_stays_a_cancel(wheel: Wheel) -> None:
    due_ms = T0 + 10_000
    keep, moved = wheel.message(due_ms), wheel.message(due_ms + 1)
    wheel.feed(keep, moved)
    wheel.advance_to(T0 + 1_000)
    withdrawal = Cancel(moved.id, T0 + 1_000, rescheduled_to=wheel.message(T0 + 2_000).id)
    out = wheel.feed(withdrawal)
    # Dropped now, whole (the sink sends its copy under the new id), not when the slot fires.
    assert [(r.kind, r.id, r.body, r.topic) for r in out] == [(packs.DROP, moved.id, b"x", "t")]
    assert {r.id for r in wheel.stored(due_ms) if r.kind == packs.SEND} == {keep.id}
    wheel.feed(moved)  # a copy of it, late: the withdrawal, kept as a cancel, drops it
    fired = wheel.advance_to(due_ms)
    assert ids_of(fired, packs.DELIVER) == {keep.id}
    assert ids_of(fired, packs.DROP) == {moved.id}


def test_a_withdrawal_in_the_same_batch_as_its_message_drops_it_at_once(wheel: Wheel) -> None:
    message = wheel.message(T0 + 10_000)
    new_id = wheel.message(T0 + 1_000).id
    out = wheel.feed(Cancel(message.id, T0, rescheduled_to=new_id), message)
    assert ids_of(out, packs.DROP) == {message.id}
    assert ids_of(wheel.advance_to(T0 + 10_000), packs.DELIVER) == set()
