"""What used to crash-loop the sink or break its word, against a real Redis.

A topic whose Redis key is not a stream: its messages become rejects. A second
message with the id of one waiting in the outbox: the first one wins.
"""

from __future__ import annotations

import pytest
import redis

from delayline.ids import new_message_id
from delayline.redis import keys
from delayline.redis.store import ChunkResult, DeliveryStore, PumpResult
from delayline.rows import Deliver
from delayline.testing import wait_for
from delayline.timing import now_ms

#: An hour ago: these messages are due at once.
DUE_MS = now_ms() - 3_600_000
#: A topic name taken by a key of another type (here a string).
POISONED = "orders.poisoned"


@pytest.fixture
def store(redis_url: str) -> DeliveryStore:
    return DeliveryStore.from_url(redis_url)


def deliver(topic: str, due_ms: int = DUE_MS) -> Deliver:
    return Deliver(
        topic=topic,
        id=new_message_id(due_ms),
        body=b"\x00body",
        key="k",
        headers='{"h":"v"}',
        deliver_at_ms=due_ms,
        attempt=3,
    )


def write(
    store: DeliveryStore, batch_id: int, *rows: Deliver, journal_ttl_s: int = 60
) -> ChunkResult:
    """Write ``rows`` as the whole of batch ``batch_id`` of partition 0."""
    return store.write_chunk(
        query_id="q",
        partition=0,
        batch_id=batch_id,
        first_row=0,
        rows=rows,
        journal_ttl_s=journal_ttl_s,
    )


def stats(raw: redis.Redis) -> dict[str, int]:
    return {name.decode(): int(value) for name, value in raw.hgetall(keys.STATS).items()}


def expected_reject(message: Deliver) -> dict[bytes, bytes]:
    """The documented fields of a reject for ``message``, without its two run-time ones."""
    return {
        b"id": message.id.encode(),
        b"topic": message.topic.encode(),
        b"body": message.body,
        b"key": message.key.encode(),
        b"headers": message.headers.encode(),
        b"deliver_at_ms": str(message.deliver_at_ms).encode(),
        b"attempt": str(message.attempt).encode(),
    }


def check_rejected(raw: redis.Redis, message: Deliver, before_ms: int) -> None:
    """``message`` is kept in the rejects, marked rejected for status, and not delivered."""
    [(_, fields)] = raw.xrange(keys.REJECTS)
    reason = fields.pop(b"reason")
    assert reason.startswith(f"cannot deliver to topic {POISONED}: WRONGTYPE".encode())
    assert int(fields.pop(b"rejected_at_ms")) >= before_ms
    assert fields == expected_reject(message)
    assert raw.hget(keys.rejected(message.deliver_at_ms), message.id) == reason
    assert raw.ttl(keys.rejected(message.deliver_at_ms)) > 0
    # Not delivered, so the journal must not say it was.
    assert raw.hget(keys.journal(message.deliver_at_ms), message.id) is None
    assert raw.get(POISONED) == b"not a stream"


def test_a_chunk_rejects_a_message_to_a_poisoned_topic_and_writes_the_rest(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    raw_redis.set(POISONED, "not a stream")
    poisoned, fine = deliver(POISONED), deliver("orders")
    before_ms = now_ms()
    result = write(store, 0, poisoned, fine)
    assert (result.written, result.delivered, result.rejected) == (2, 1, 1)
    check_rejected(raw_redis, poisoned, before_ms)
    assert [f[b"id"] for _, f in raw_redis.xrange("orders")] == [fine.id.encode()]
    assert stats(raw_redis) == {"delivered": 1, "rejected": 1}
    assert raw_redis.hget(keys.sink_marker("q", 0), "written") == b"2"


def test_the_pump_rejects_a_message_whose_topic_was_poisoned_while_it_waited(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    due_ms = now_ms() + 300
    waiting = deliver(POISONED, due_ms)
    write(store, 0, waiting)
    assert raw_redis.zscore(keys.OUTBOX, waiting.id) == due_ms
    raw_redis.set(POISONED, "not a stream")
    before_ms = now_ms()

    def pump_took_some() -> PumpResult | None:
        result = store.pump(100, 60)
        return result if result.moved else None

    pumped = wait_for(pump_took_some, 10, "the pump to take the message", interval_s=0.01)
    assert (pumped.moved, pumped.next_due_ms) == (1, None)
    check_rejected(raw_redis, waiting, before_ms)
    assert raw_redis.zcard(keys.OUTBOX) == raw_redis.hlen(keys.OUTBOX_DATA) == 0
    assert stats(raw_redis) == {"rejected": 1}


def test_without_a_journal_a_poisoned_topic_is_still_a_reject(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    raw_redis.set(POISONED, "not a stream")
    poisoned = deliver(POISONED)
    result = write(store, 0, poisoned, journal_ttl_s=0)
    assert (result.delivered, result.rejected) == (0, 1)
    [(_, fields)] = raw_redis.xrange(keys.REJECTS)
    assert fields[b"id"] == poisoned.id.encode()
    # No status records without a journal, as for every other reject.
    assert raw_redis.exists(keys.rejected(DUE_MS), keys.journal(DUE_MS)) == 0


def test_a_message_with_the_id_of_one_in_the_outbox_is_a_duplicate(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    due_ms = now_ms() + 60_000
    first = deliver("orders", due_ms)
    write(store, 0, first)
    assert write(store, 1, first._replace(body=b"second")).duplicates == 1
    assert raw_redis.zcard(keys.OUTBOX) == 1
    [stored] = raw_redis.hvals(keys.OUTBOX_DATA)
    assert first.body in stored
    assert b"second" not in stored
    assert stats(raw_redis) == {"duplicates": 1}


def test_a_due_duplicate_sends_the_first_one_waiting_in_the_outbox(
    store: DeliveryStore, raw_redis: redis.Redis
) -> None:
    due_ms = now_ms() + 300
    first = deliver("orders", due_ms)
    write(store, 0, first)
    wait_for(  # due now, but the pump has not run
        lambda: redis_time_ms(raw_redis) > due_ms,
        10,
        "Redis's clock to reach the due time",
        interval_s=0.01,
    )
    result = write(store, 1, first._replace(body=b"second"))
    assert (result.delivered, result.duplicates) == (1, 1)
    [(entry_id, fields)] = raw_redis.xrange("orders")
    assert (fields[b"id"], fields[b"body"]) == (first.id.encode(), first.body)
    assert int(entry_id.split(b"-")[0]) >= due_ms
    assert raw_redis.zcard(keys.OUTBOX) == raw_redis.hlen(keys.OUTBOX_DATA) == 0
    assert store.pump(100, 60).moved == 0


def redis_time_ms(raw: redis.Redis) -> int:
    seconds, micros = raw.time()
    return int(seconds) * 1000 + int(micros) // 1000
