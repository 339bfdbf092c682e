"""The drain's Redis side (``delayline drain``), against a real Redis: chunks appended
once however often they are tried, shard streams moved whole to the default stream,
and producers that follow a changed shard count."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from delayline import ids
from delayline.errors import ConfigurationError
from delayline.model import decode_record
from delayline.redis import keys
from delayline.redis.inbound import InboundStream
from delayline.scheduler.jobs.drain import append_partition, as_inbound_record, refuse_early
from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.records import CASCADE_FIELD
from delayline.scheduler.settings import SchedulerSettings
from delayline.timing import now_ms
from delayline.validation import Limits

MARKER = keys.drain_marker("query")


def pending(count: int, due_ms: int) -> list[packs.Record]:
    """``count`` sends as the state holds them, due from ``due_ms`` on, newest first."""
    return [
        packs.Record(packs.SEND, due_ms + n, ids.new_message_id(due_ms + n), "1-0", "t", b"%d" % n)
        for n in reversed(range(count))
    ]


def test_a_drained_record_sends_the_same_message_again_as_a_hand_down() -> None:
    message_id = ids.new_message_id(1_900_000_000_000)
    record = packs.Record(
        packs.SEND, 1_900_000_000_000, message_id, "5-0", "orders", b"\x00body", "k",
        '{"h":"v"}', attempt=3,
    )  # fmt: skip
    fields = as_inbound_record(record, now_ms=1_899_000_000_000, limits=Limits())
    assert fields[CASCADE_FIELD] == b"1"  # not counted as accepted a second time
    message = decode_record(fields, received_ms=1_899_000_000_000, limits=Limits())
    assert (message.id, message.topic, message.body, message.key) == (message_id, "orders",
                                                                      b"\x00body", "k")  # fmt: skip
    assert (message.deliver_at_ms, message.attempt) == (1_900_000_000_000, 3)
    assert dict(message.headers) == {"h": "v"}  # type: ignore[union-attr]


def test_a_partition_resumes_after_its_last_appended_chunk(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    inbound = InboundStream.from_url(redis_url)
    sends = pending(10, now_ms() + 60_000)
    # A drain that stopped after its first chunk of four...
    append_partition(inbound, MARKER, 1, sends, Limits(), chunk_messages=4)
    first = [fields[b"body"] for _, fields in raw_redis.xrange(keys.INBOUND)]
    raw_redis.delete(keys.INBOUND)
    raw_redis.hset(MARKER, "1", 1)
    # ...run again: only the chunks after it, in due order.
    append_partition(inbound, MARKER, 1, sends, Limits(), chunk_messages=4)
    rest = [fields[b"body"] for _, fields in raw_redis.xrange(keys.INBOUND)]
    assert first == [b"%d" % n for n in range(10)]  # by due time
    assert rest == first[4:]
    assert raw_redis.hget(MARKER, "1") == b"3"
    # A chunk tried again once marked (a retry whose reply was lost) appends nothing.
    inbound.append_drained(MARKER, 1, 2, [{b"id": b"again"}])
    assert raw_redis.xlen(keys.INBOUND) == 6
    assert raw_redis.ttl(MARKER) > 0
    inbound.close()


def test_a_local_location_without_a_checkpoint_is_refused_before_spark_starts(
    tmp_path: Path,
) -> None:
    settings = SchedulerSettings(data_dir=tmp_path)
    with pytest.raises(ConfigurationError, match="no checkpoint to drain"):
        refuse_early(settings)
    refuse_early(settings.with_overrides(checkpoint="s3a://bucket/checkpoint"))  # later, in Spark
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "metadata").write_text(json.dumps({"id": "query"}))
    refuse_early(settings)
