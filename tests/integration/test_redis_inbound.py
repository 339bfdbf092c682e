"""The inbound side against a real server: offsets, reads and trims of the stream,
ingest counts, and the pause gate."""

from __future__ import annotations

import threading

import pytest
import redis

from delayline.redis import keys
from delayline.redis.inbound import LAST_ID_PAGE, InboundStream
from delayline.schedules.ops import OP_SCHEDULE, SCHEDULE_WEIGHT
from delayline.testing import wait_for
from delayline.timing import now_ms


@pytest.fixture
def inbound(redis_url: str) -> InboundStream:
    return InboundStream.from_url(redis_url)


def test_ingest_counts_are_added_once_per_batch(
    inbound: InboundStream, raw_redis: redis.Redis
) -> None:
    due_ms = (now_ms() // 60_000 + 60) * 60_000 + 10_000  # an hour ahead, 10 s into a minute
    inbound.count_ingest("q", 0, 5, accepted={(due_ms, "a"): 10}, cancels=2)
    inbound.count_ingest("q", 0, 5, accepted={(due_ms, "a"): 10}, cancels=2)  # replay
    inbound.count_ingest("q", 1, 5, accepted={(due_ms, "b"): 1}, cancels=0)  # another partition
    inbound.count_ingest("q", 0, 6, accepted={(due_ms, "a"): 2, (due_ms + 1000, "a"): 1}, cancels=0)
    assert raw_redis.hgetall(keys.STATS) == {b"accepted": b"14", b"cancels": b"2"}
    minute = due_ms // 60_000
    assert raw_redis.hgetall(keys.forecast(minute)) == {b"t:a": b"13", b"t:b": b"1"}
    second = due_ms // 1000 % 60
    assert raw_redis.hgetall(keys.forecast_seconds(minute)) == {
        str(second).encode(): b"13",
        str(second + 1).encode(): b"1",
    }


def test_inbound_offsets_reads_and_trim(inbound: InboundStream, raw_redis: redis.Redis) -> None:
    assert inbound.last_id() is None
    assert inbound.last_id_within("0-0", 10) is None
    entry_ids = [raw_redis.xadd(keys.INBOUND, {b"n": str(n).encode()}).decode() for n in range(5)]
    assert inbound.last_id() == entry_ids[-1]
    assert inbound.last_id_within("0-0", 3) == entry_ids[2]
    assert inbound.last_id_within(entry_ids[2], 100) == entry_ids[4]
    # More entries than asked for: counted from after_id, not from the stream's start.
    assert inbound.last_id_within(entry_ids[1], 2) == entry_ids[3]
    # Nothing after after_id: the newest, which the source compares with its offset.
    assert inbound.last_id_within(entry_ids[4], 100) == entry_ids[4]
    read = list(inbound.read(entry_ids[0], entry_ids[3], page_size=2))
    assert [entry_id for entry_id, _ in read] == entry_ids[1:4]
    assert read[0][1] == {b"n": b"1"}
    inbound.trim(entry_ids[2])
    assert [e.decode() for e, _ in raw_redis.xrange(keys.INBOUND)] == entry_ids[3:]


def test_planning_through_a_backlog_does_not_grow_redis_lua_heap(
    inbound: InboundStream, raw_redis: redis.Redis
) -> None:
    # Each planned batch of a backlog copies its entries into Lua; uncollected,
    # those copies piled up to 100 MB of Lua heap while 1M sends were loaded.
    pipe = raw_redis.pipeline(transaction=False)
    for n in range(20_000):
        pipe.xadd(keys.INBOUND, {b"op": b"send", b"body": f"message {n:08}".encode()})
    first, *_, last = (entry_id.decode() for entry_id in pipe.execute())
    lua_before = int(raw_redis.info("memory")["used_memory_lua"])
    for _ in range(20):
        assert inbound.last_id_within("0-0", 15_000) not in (None, first, last)
    grown = int(raw_redis.info("memory")["used_memory_lua"]) - lua_before
    assert grown < 1_000_000, f"Redis's Lua heap grew by {grown} bytes"


def test_a_look_through_a_backlog_copies_a_page_of_entries_a_call(
    inbound: InboundStream, raw_redis: redis.Redis
) -> None:
    # A call holds Redis for its whole copy, while due messages wait for the pump:
    # 50,000 entries in one call held it 0.3 s.
    pipe = raw_redis.pipeline(transaction=False)
    for n in range(2 * LAST_ID_PAGE + LAST_ID_PAGE // 2):
        pipe.xadd(keys.INBOUND, {b"n": str(n).encode()})
    ids = [entry_id.decode() for entry_id in pipe.execute()]

    def copies() -> int:
        return int(raw_redis.info("commandstats").get("cmdstat_xrange", {}).get("calls", 0))

    before = copies()
    assert inbound.last_id_within("0-0", 2 * LAST_ID_PAGE + 10) == ids[2 * LAST_ID_PAGE + 9]
    assert copies() - before == 3, "two whole pages and a part of one, a call each"
    # Exactly two pages.
    assert inbound.last_id_within("0-0", 2 * LAST_ID_PAGE) == ids[2 * LAST_ID_PAGE - 1]
    # Fewer follow than asked, ending within a page, and at a page's end.
    assert inbound.last_id_within(ids[LAST_ID_PAGE], 2 * LAST_ID_PAGE) == ids[-1]
    half = LAST_ID_PAGE // 2
    assert inbound.last_id_within(ids[half - 1], 2 * LAST_ID_PAGE + 10) == ids[-1]
    # None follows the newest.
    assert inbound.last_id_within(ids[-1], 10) is None


def test_a_schedule_record_weighs_more_against_a_batch(
    inbound: InboundStream, raw_redis: redis.Redis
) -> None:
    # A new schedule costs a batch about ten times a send: counted alike, 50,000 of
    # them made a batch of 32 s.
    assert SCHEDULE_WEIGHT == 10
    kinds = [b"send", b"send", OP_SCHEDULE, b"cancel", OP_SCHEDULE, OP_SCHEDULE, b"send"]
    ids = [raw_redis.xadd(keys.INBOUND, {b"v": b"1", b"op": op}).decode() for op in kinds]
    assert inbound.last_id_within("0-0", 12) == ids[2], "1 + 1 + 10"
    assert inbound.last_id_within("0-0", 11) == ids[1], "the schedule would overspend"
    assert inbound.last_id_within(ids[2], 5) == ids[3]
    # A look takes its first record whatever it weighs, or a batch could never end.
    assert inbound.last_id_within(ids[3], 5) == ids[4]
    # All of it fits (7 records weigh 70 at most): the newest, without a look.
    assert inbound.last_id_within("0-0", 70) == ids[-1]


def test_a_look_through_schedules_goes_on_by_weight_across_pages(
    inbound: InboundStream, raw_redis: redis.Redis
) -> None:
    pipe = raw_redis.pipeline(transaction=False)
    for _ in range(LAST_ID_PAGE + 5):
        pipe.xadd(keys.INBOUND, {b"v": b"1", b"op": OP_SCHEDULE})
    ids = [entry_id.decode() for entry_id in pipe.execute()]
    budget = SCHEDULE_WEIGHT * (LAST_ID_PAGE + 2)
    assert inbound.last_id_within("0-0", budget) == ids[LAST_ID_PAGE + 1]


def test_the_pause_gate_holds_until_the_flag_is_gone(
    inbound: InboundStream, redis_url: str, raw_redis: redis.Redis
) -> None:
    inbound.hold_while_paused("run")  # no flag: returns at once
    inbound.request_pause("run", ttl_s=30)
    released = threading.Event()

    def source() -> None:
        InboundStream.from_url(redis_url).hold_while_paused("run")
        released.set()

    holder = threading.Thread(target=source, daemon=True)
    holder.start()
    wait_for(lambda: inbound.is_holding("run"), 10, "the source to report holding", interval_s=0.01)
    assert not released.is_set()
    raw_redis.delete(keys.pause("run"))
    holder.join(10)
    assert released.is_set()
