"""The Kafka inbound topic as the scheduler source's feeds, against a real broker.

Producers write v1 records to the topic (headers plus value); each partition is
a feed of the source, read by offset ranges that a replay reads again, shared
under admission control, and committed to the consumer group once Spark has
committed them. A raw cancel that waits past the group's offsets is recorded
before the pump delivers anything.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import closing

import pytest
import redis
from confluent_kafka import Producer
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from delayline.ids import new_message_id
from delayline.kafka import records
from delayline.kafka.inbound import PLANNING_TIMEOUT_S, KafkaInbound
from delayline.model import Cancel, Message
from delayline.redis import keys
from delayline.redis.inbound import InboundStream
from delayline.scheduler.pipeline.feeds import kafka_prefix
from delayline.scheduler.pipeline.handoff import record_waiting_cancels
from delayline.scheduler.pipeline.source import (
    InboundReader,
    KafkaRange,
)
from delayline.scheduler.settings import SchedulerSettings
from delayline.testing import free_port, wait_for
from delayline.testing.kafka import kafka_broker
from delayline.timing import now_ms
from delayline.validation import Limits


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with kafka_broker(tmp_path_factory.mktemp("kafka")) as broker:
        yield broker.address


@pytest.fixture
def topic(brokers: str) -> Iterator[KafkaInbound]:
    """A new inbound topic with 2 partitions."""
    inbound = KafkaInbound(brokers, f"inbound-{uuid.uuid4().hex[:8]}")
    inbound.ensure_topic(2)
    yield inbound
    inbound.close()


def produce(brokers: str, topic: str, partition: int, fields: list[Mapping[bytes, bytes]]) -> None:
    producer = Producer({"bootstrap.servers": brokers})
    for record in fields:
        kafka = records.to_inbound(record, topic)
        producer.produce(
            kafka.topic, kafka.value, kafka.key, partition=partition, headers=kafka.headers
        )
    assert producer.flush(30) == 0


def message(delay_ms: int = 60_000, key: str | None = "order-42") -> Message:
    return Message.create(
        "orders",
        b"close order 42",
        now_ms=now_ms(),
        limits=Limits(),
        delay=delay_ms,
        key=key,
        headers={"trace": "t-1"},
    )


def test_records_come_back_field_for_field_in_offset_order(
    brokers: str, topic: KafkaInbound
) -> None:
    sent = [message().to_record(), message(key=None).to_record()]
    sent.append(Cancel(id=message().id, sent_at_ms=now_ms()).to_record())
    before_ms = now_ms()
    produce(brokers, topic.topic, 1, sent)
    assert topic.partitions() == [0, 1]
    assert topic.ends([0, 1]) == {0: 0, 1: 3}
    # The whole partition, then a range of it: a replay reads the same records.
    read = list(topic.read(1, 0, 3))
    assert [fields for _, fields in read] == sent
    assert list(topic.read(1, 1, 2)) == read[1:2]
    assert list(topic.read(0, 0, 0)) == []
    entry_ids = [entry_id for entry_id, _ in read]
    assert len(set(entry_ids)) == 3
    # The entry id carries the record's timestamp, for the max-delay rule and the horizon.
    assert all(before_ms - 1000 <= int(e.split("-")[0]) <= now_ms() for e in entry_ids)


def test_a_range_short_of_the_log_end_is_read_without_waiting_for_more(
    brokers: str, topic: KafkaInbound
) -> None:
    produce(brokers, topic.topic, 0, [message().to_record() for _ in range(300)])
    assert len(list(topic.read(0, 0, 300))) == 300  # the first read connects
    took_s = []
    for _ in range(3):
        began = time.monotonic()
        assert len(list(topic.read(0, 100, 200))) == 100
        took_s.append(time.monotonic() - began)
    # Waiting for a batch of records that never come (1 s), or for a fetch that
    # waits at the log's end (500 ms), would show here.
    assert min(took_s) < 0.25, took_s


def test_the_source_shares_a_batch_over_the_partitions_and_commits_to_the_group(
    brokers: str, topic: KafkaInbound, redis_url: str
) -> None:
    produce(brokers, topic.topic, 0, [message().to_record() for _ in range(10)])
    produce(brokers, topic.topic, 1, [message().to_record() for _ in range(4)])
    settings = SchedulerSettings(
        redis_url=redis_url, kafka=brokers, kafka_inbound_topic=topic.topic
    )
    reader = InboundReader(settings, run_token="run")
    prefix = kafka_prefix(topic.topic)
    start = reader.initialOffset()
    assert start == {"id": "0-0", f"{prefix}0": "0", f"{prefix}1": "0"}
    # Three feeds (the Redis stream and two partitions) share 6 rows: 2 each.
    end = reader.latestOffset(start, ReadMaxRows(6))
    assert (end[f"{prefix}0"], end[f"{prefix}1"]) == ("2", "2")
    assert list(reader.partitions(start, end)) == [KafkaRange(0, 0, 2), KafkaRange(1, 0, 2)]
    everything = reader.latestOffset(start, ReadAllAvailable())
    assert (everything[f"{prefix}0"], everything[f"{prefix}1"]) == ("10", "4")
    # Nothing new: no batch (the offset stays), until the idle timeout.
    reader.commit(everything)
    assert reader.latestOffset(everything, ReadMaxRows(6)) == everything
    # A new checkpoint (after a drain) starts where the group says, once the
    # commit (sent without waiting) has landed.
    committed = {"id": "0-0", f"{prefix}0": "10", f"{prefix}1": "4"}
    wait_for(
        lambda: InboundReader(settings, run_token="new").initialOffset() == committed,
        10,
        "the group's offsets",
    )


def test_an_offset_from_before_kafka_reads_the_topic_from_its_start_and_keeps_other_fields(
    brokers: str, topic: KafkaInbound, redis_url: str
) -> None:
    produce(brokers, topic.topic, 1, [message().to_record()])
    settings = SchedulerSettings(
        redis_url=redis_url, kafka=brokers, kafka_inbound_topic=topic.topic
    )
    old = {"id": "0-0", "run": "old", "tick": "0", "kafka:gone:0": "7"}
    end = InboundReader(settings, run_token="run").latestOffset(old, ReadMaxRows(100))
    prefix = kafka_prefix(topic.topic)
    assert end[f"{prefix}1"] == "1"
    assert end["kafka:gone:0"] == "7"


def test_raw_cancels_past_the_group_offsets_are_recorded_at_a_start(
    brokers: str, topic: KafkaInbound, redis_url: str
) -> None:
    due_ms = now_ms() + 60_000
    committed, waiting = new_message_id(due_ms), new_message_id(due_ms)
    produce(brokers, topic.topic, 0, [Cancel(id=committed, sent_at_ms=now_ms()).to_record()])
    topic.commit({0: 1})
    wait_for(lambda: topic.starts([0]) == {0: 1}, 10, "the group's offset")
    produce(brokers, topic.topic, 0, [Cancel(id=waiting, sent_at_ms=now_ms()).to_record()])
    produce(brokers, topic.topic, 1, [{b"v": b"1", b"op": b"cancel", b"id": b"not-an-id"}])
    settings = SchedulerSettings(
        redis_url=redis_url, kafka=brokers, kafka_inbound_topic=topic.topic
    )
    with closing(InboundStream.from_url(redis_url)) as inbound:
        record_waiting_cancels(inbound, settings)
    requested = redis.Redis.from_url(redis_url).hkeys(keys.cancel_requests(due_ms))
    # Only the one Spark has not committed: the other took effect in its batch.
    assert {r.decode().lstrip("~") for r in requested} == {waiting}


def test_with_the_brokers_away_the_redis_feeds_go_on_and_kafka_is_asked_again_later(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    raw_redis.xadd(keys.INBOUND, dict(message().to_record()))  # type: ignore[arg-type]
    settings = SchedulerSettings(redis_url=redis_url, kafka=f"127.0.0.1:{free_port()}")
    reader = InboundReader(settings, run_token="run")
    start = {"id": "0-0", "run": "run", "tick": str(now_ms()), "kafka:delayline.inbound:0": "5"}
    began = time.monotonic()
    end = reader.latestOffset(start, ReadMaxRows(100))
    # The Redis stream's record is planned, the Kafka offset kept as it was.
    assert end["id"] != "0-0"
    assert end["kafka:delayline.inbound:0"] == "5"
    assert time.monotonic() - began < PLANNING_TIMEOUT_S + 2
    # Within the pause, the brokers are not asked at all.
    began = time.monotonic()
    assert reader.latestOffset(end, ReadMaxRows(100))["kafka:delayline.inbound:0"] == "5"
    assert time.monotonic() - began < 0.5
