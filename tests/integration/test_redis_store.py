"""The store side against a real server: the sink's exactly-once protocol above all,
the outbox and its pump."""

from __future__ import annotations

import pytest
import redis

from delayline import Client
from delayline.errors import TransportError
from delayline.ids import new_message_id
from delayline.model import Message, decode_record
from delayline.redis import keys
from delayline.redis.store import ChunkResult, DeliveryStore
from delayline.rows import Cascade, Deliver, Reject, SinkRow
from delayline.scheduler.pipeline.chunks import write_once
from delayline.scheduler.pipeline.task import BatchTask
from delayline.testing import wait_for
from delayline.timing import now_ms
from delayline.validation import Limits
from tests.support.sinking import dropped

#: A due time one minute ago: these rows go straight to their topics.
DUE_MS = now_ms() - 60_000


@pytest.fixture
def store(redis_url: str) -> DeliveryStore:
    return DeliveryStore.from_url(redis_url)


def deliver(message_id: str, topic: str = "orders", due_ms: int = DUE_MS) -> Deliver:
    return Deliver(
        topic=topic,
        id=message_id,
        body=b"\x00" + message_id.encode(),
        key="k",
        headers='{"h":"v"}',
        deliver_at_ms=due_ms,
        attempt=1,
    )


def stats(raw: redis.Redis) -> dict[str, int]:
    return {name.decode(): int(value) for name, value in raw.hgetall(keys.STATS).items()}


def write(
    store: DeliveryStore,
    batch_id: int,
    first_row: int,
    rows: list[SinkRow],
    *,
    journal_ttl_s: int = 3600,
) -> ChunkResult:
    return store.write_chunk(
        query_id="q",
        partition=0,
        batch_id=batch_id,
        first_row=first_row,
        rows=rows,
        journal_ttl_s=journal_ttl_s,
    )


def test_each_second_has_its_own_journal_hash_with_its_own_expiry(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    # A hash is freed whole when it expires; a minute's at 5,000 msg/s stalled
    # Redis for 40-80 ms, so the journal is grouped by the second.
    minute_ms = DUE_MS - DUE_MS % 60_000
    rows = [deliver(f"S{second}", due_ms=minute_ms + second * 1_000) for second in range(3)]
    assert write(store, 0, 0, rows).delivered == 3
    journals = [keys.journal(row.deliver_at_ms) for row in rows]
    assert len(set(journals)) == 3
    for row, journal in zip(rows, journals, strict=True):
        assert raw_redis.hkeys(journal) == [row.id.encode()]
        assert 0 < raw_redis.ttl(journal) <= 3600


def test_a_chunk_writes_topic_entries_in_the_documented_format(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    before_ms = now_ms()
    result = write(store, 0, 0, [deliver("A"), deliver("B", topic="other")])
    after_ms = now_ms()
    assert (result.delivered, result.duplicates) == (2, 0)
    [(entry_id, fields)] = raw_redis.xrange("orders")
    delivered_at_ms = int(fields.pop(b"delivered_at_ms"))
    assert fields == {
        b"id": b"A",
        b"body": b"\x00A",
        b"key": b"k",
        b"headers": b'{"h":"v"}',
        b"deliver_at_ms": str(DUE_MS).encode(),
        b"attempt": b"1",
    }
    # Stamped by Redis's clock, the one that made the entry id; the script's TIME
    # and the id are two reads of it, which can fall in adjacent milliseconds.
    assert before_ms - 1_000 <= delivered_at_ms
    assert 0 <= int(entry_id.split(b"-")[0]) - delivered_at_ms <= 1
    assert raw_redis.xlen("other") == 1
    assert raw_redis.hget(keys.journal(DUE_MS), "A") == str(delivered_at_ms).encode()
    assert 0 < raw_redis.ttl(keys.journal(DUE_MS)) <= 3600
    assert stats(raw_redis)["delivered"] == 2
    lateness = {k.decode(): int(v) for k, v in raw_redis.hgetall(keys.LATENESS).items()}
    total_ms = lateness.pop("sum")
    assert sum(lateness.values()) == 2  # one histogram count per delivery
    # DUE_MS is fixed at import, so the lateness is however long ago that was.
    assert 2 * (before_ms - 1_000 - DUE_MS) <= total_ms <= 2 * (after_ms + 1_000 - DUE_MS)


def test_a_message_not_yet_due_waits_in_the_outbox_for_the_pump(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    due_ms = now_ms() + 1_500
    soon = deliver(new_message_id(due_ms), due_ms=due_ms)
    write(store, 0, 0, [soon])
    assert raw_redis.xlen("orders") == 0
    assert raw_redis.zscore(keys.OUTBOX, soon.id) == due_ms
    early = store.pump(100, 3600)
    assert (early.moved, early.next_due_ms) == (0, due_ms)
    wait_for(lambda: store.pump(100, 3600).moved, 10, "the pump to deliver", interval_s=0.01)
    [(entry_id, fields)] = raw_redis.xrange("orders")
    assert fields[b"id"] == soon.id.encode()
    assert int(entry_id.split(b"-")[0]) >= due_ms  # never early, by Redis's clock
    assert raw_redis.zcard(keys.OUTBOX) == 0
    assert raw_redis.hlen(keys.OUTBOX_DATA) == 0
    assert stats(raw_redis)["delivered"] == 1


def test_the_sources_hand_off_is_exactly_once_across_a_replay(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    soon_ms, later_ms = now_ms() + 500, now_ms() + 30_000
    soon = deliver(new_message_id(soon_ms), due_ms=soon_ms)
    later = deliver(new_message_id(later_ms), due_ms=later_ms)
    again = soon._replace(body=b"a second send with the same id")
    task = BatchTask(query_id="q", batch_id=3, partition=1)
    rows = [soon, later, again]
    [first] = write_once(
        store, task, "handoff", rows, journal_ttl_s=3600, horizon_ms=60_000, shards=1
    )
    assert (first.written, first.duplicates) == (3, 1)
    assert raw_redis.lrange(keys.OUTBOX_BELL, 0, -1) == [b"1"]  # one ring for the pump
    again_written = write_once(
        store, task, "handoff", rows, journal_ttl_s=3600, horizon_ms=60_000, shards=1
    )
    assert again_written == []
    assert store.sink_progress("q", 1, 3) == 0  # the sink's marker is its own
    wait_for(lambda: store.pump(100, 3600).moved, 10, "the pump to deliver", interval_s=0.01)
    [(_, fields)] = raw_redis.xrange("orders")
    assert (fields[b"id"], fields[b"body"]) == (soon.id.encode(), soon.body)  # the first wins
    assert int(fields[b"delivered_at_ms"]) >= soon_ms
    assert raw_redis.zrange(keys.OUTBOX, 0, -1) == [later.id.encode()]
    assert (stats(raw_redis)["delivered"], stats(raw_redis)["duplicates"]) == (1, 1)


def test_a_cascade_goes_back_to_the_inbound_stream_as_a_marked_send(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    due_ms = now_ms() + 3_600_000
    message_id = new_message_id(due_ms)
    write(store, 0, 0, [Cascade("orders", message_id, b"\x00b", "k", '{"h":"v"}', due_ms, 2)])
    [(entry_id, fields)] = raw_redis.xrange(keys.INBOUND)
    assert fields[b"cascade"] == b"1"
    received_ms = int(entry_id.split(b"-")[0])
    message = decode_record(fields, received_ms=received_ms, limits=Limits())
    assert message == Message(
        id=message_id,
        topic="orders",
        body=b"\x00b",
        deliver_at_ms=due_ms,
        sent_at_ms=received_ms,
        key="k",
        headers={"h": "v"},
        attempt=2,
    )
    assert stats(raw_redis)["cascaded"] == 1


def test_an_sdk_cancel_wins_while_the_message_is_in_the_outbox(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    due_ms = now_ms() + 300
    doomed = deliver(new_message_id(due_ms), due_ms=due_ms)
    write(store, 0, 0, [doomed])
    raw_redis.hset(keys.cancel_requests(due_ms), doomed.id, now_ms())  # what Client.cancel writes
    wait_for(
        lambda: store.pump(100, 3600).moved, 10, "the pump to take the message", interval_s=0.01
    )
    assert raw_redis.exists("orders") == 0
    assert raw_redis.hget(keys.journal(due_ms), doomed.id) == b"cancelled"
    assert stats(raw_redis)["dropped"] == 1


def test_a_cancel_requested_after_its_slot_fired_wins_over_a_late_sink_write(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    # Spark emitted both before the cancel came, and the sink writes them only
    # once they are due (a slow batch): the cancel request recorded meanwhile wins.
    doomed, other = deliver(new_message_id(DUE_MS)), deliver(new_message_id(DUE_MS))
    raw_redis.hset(keys.cancel_requests(DUE_MS), doomed.id, now_ms())  # what Client.cancel writes
    result = write(store, 0, 0, [doomed, other])
    assert (result.delivered, result.dropped, result.duplicates) == (1, 1, 0)
    assert [f[b"id"].decode() for _, f in raw_redis.xrange("orders")] == [other.id]
    assert raw_redis.hget(keys.journal(DUE_MS), doomed.id) == b"cancelled"
    # A cancel recorded after the delivery changes nothing: a replay is a duplicate.
    raw_redis.hset(keys.cancel_requests(DUE_MS), other.id, now_ms())
    replay = write(store, 1, 0, [other])
    assert (replay.delivered, replay.dropped, replay.duplicates) == (0, 0, 1)
    assert raw_redis.hget(keys.journal(DUE_MS), other.id) != b"cancelled"
    assert raw_redis.xlen("orders") == 1


def test_one_pump_call_drops_only_the_cancelled_among_minutes_with_and_without_cancels(
    store: DeliveryStore, redis_url: str, raw_redis: redis.Redis
) -> None:
    # Three overdue messages in the outbox (the near path takes them), over two
    # minutes: the first minute has a cancel request for one of its two, the
    # second minute has none. One pump call takes all three.
    now = now_ms()
    with Client(redis_url) as client:
        doomed, kept, later = client.send_many(
            [
                {"topic": "orders", "body": b"d", "deliver_at": now - 61_000},
                {"topic": "orders", "body": b"k", "deliver_at": now - 61_000},
                {"topic": "orders", "body": b"l", "deliver_at": now - 1_000},
            ]
        )
    assert raw_redis.zcard(keys.OUTBOX) == 3
    raw_redis.hset(keys.cancel_requests(now - 61_000), doomed, now)  # what Client.cancel writes
    assert not raw_redis.exists(keys.cancel_requests(now - 1_000))
    assert store.pump(100, 3600).moved == 3
    delivered = [fields[b"id"].decode() for _, fields in raw_redis.xrange("orders")]
    assert delivered == [kept, later]
    assert raw_redis.hget(keys.journal(now - 61_000), doomed) == b"cancelled"
    assert stats(raw_redis)["dropped"] == 1
    assert raw_redis.zcard(keys.OUTBOX) == raw_redis.hlen(keys.OUTBOX_DATA) == 0


def test_a_replayed_batch_resumes_after_the_last_chunk_that_landed(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    rows = [deliver(str(n)) for n in range(5)]
    write(store, 7, 0, rows[:2])  # the first attempt wrote two rows, then died
    assert store.sink_progress("q", 0, 7) == 2
    # The replay asks where to resume and writes only the rest.
    resume = store.sink_progress("q", 0, 7)
    write(store, 7, resume, rows[resume:])
    assert [f[b"id"] for _, f in raw_redis.xrange("orders")] == [b"0", b"1", b"2", b"3", b"4"]
    assert stats(raw_redis)["delivered"] == 5
    assert store.sink_progress("q", 0, 8) == 0  # the next batch starts from zero


def test_a_chunk_behind_the_marker_writes_nothing_and_says_where_to_resume(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    rows = [deliver(str(n)) for n in range(4)]
    write(store, 3, 0, rows[:3])  # say, an orphaned worker of a killed run got this far
    stale = write(store, 3, 0, rows[:2])  # the replay, which read the marker earlier
    assert stale == ChunkResult(written=3, delivered=0, duplicates=0, dropped=0, rejected=0)
    assert write(store, 3, stale.written, rows[3:]).written == 4
    assert [f[b"id"] for _, f in raw_redis.xrange("orders")] == [b"0", b"1", b"2", b"3"]


def test_a_chunk_that_would_leave_a_gap_is_refused(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    write(store, 3, 0, [deliver("A")])
    with pytest.raises(TransportError, match="DELAYLINE_MARKER"):
        write(store, 3, 5, [deliver("B")])
    assert raw_redis.xlen("orders") == 1


def test_the_journal_suppresses_a_second_delivery_of_an_id(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    write(store, 0, 0, [deliver("A")])
    result = write(store, 1, 0, [deliver("A"), deliver("B")])  # e.g. a producer's retry
    assert (result.delivered, result.duplicates) == (1, 1)
    assert [f[b"id"] for _, f in raw_redis.xrange("orders")] == [b"A", b"B"]
    assert stats(raw_redis)["duplicates"] == 1


def test_without_a_journal_there_is_no_id_dedupe(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    write(store, 0, 0, [deliver("A")], journal_ttl_s=0)
    write(store, 1, 0, [deliver("A")], journal_ttl_s=0)
    assert raw_redis.xlen("orders") == 2
    assert raw_redis.exists(keys.journal(DUE_MS)) == 0


def test_drops_and_rejects(store: DeliveryStore, raw_redis: redis.Redis) -> None:
    fields = [(b"op", b"bad"), (b"reason", b"unknown op"), (b"inbound_id", b"1-0")]
    sent_id = new_message_id(DUE_MS)
    rejects = [Reject(fields, "unknown op"), Reject(fields, "bad topic", message_id=sent_id)]
    result = write(store, 0, 0, [dropped("C", "orders", DUE_MS), *rejects])
    assert (result.dropped, result.rejected) == (1, 2)
    assert raw_redis.hget(keys.journal(DUE_MS), "C") == b"cancelled"
    kept = [entry for _, entry in raw_redis.xrange(keys.REJECTS)]
    assert kept == [{b"op": b"bad", b"reason": b"unknown op", b"inbound_id": b"1-0"}] * 2
    assert raw_redis.hgetall(keys.rejected(DUE_MS)) == {sent_id.encode(): b"bad topic"}
    assert stats(raw_redis) == {"dropped": 1, "rejected": 2}
