"""Kafka in the benchmark: delayline delivering to Kafka topics (``delayline run --kafka``),
and the Kafka-native alternative a user could build instead.

- ``delayline-kafka``: delayline as in ``delayline_sys`` (the SDK's ``send_many``),
  its topics a Kafka broker's.
- ``delayline-kafka-eos``: as ``delayline-kafka``, with ``--kafka-delivery
  exactly-once``; the receiver reads with ``isolation.level=read_committed``, so
  a message counts once its transaction is committed.
- ``delayline-kafka-typo``: as ``delayline-kafka``, plus one message a second
  addressed to a topic the broker does not have (a producer's typo): it must
  not slow the others (issue 29), and becomes a reject.
- ``delayline-kafka-in``: Kafka in and out. The SDK's ``send_many`` through
  ``Client(kafka=...)`` produces to the inbound topic (3 partitions), which
  the scheduler reads; due messages go to the Kafka topic as above.
- ``kafka-pause``: the design the founding Kafka delay-queue text rejected, at its
  best. Producers write each job to a delay topic with its due time in a
  header; one consumer forwards a record to the target topic once it is due.
  When the record at a partition's head is not due yet, it pauses that
  partition, seeks back to it and resumes it shortly before its due time (a
  resume takes most of a second here), holding what is due within that lead
  in memory until due. A partition is in send order, not due order: a job
  waits for every job sent before it in its partition.

Each system starts its own single-node broker (delayline.testing.kafka, from the
jars of ``make kafka-jars``); a plain Kafka consumer of the target topic
records the receipts (``python -m bench.systems.kafka_sys receive <brokers>``).
"""

from __future__ import annotations

import heapq
import itertools
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from typing import cast

from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # exported, not in __all__
    AdminClient,
    NewTopic,
)

from bench.systems.base import Job, System, now_ms, record_receipts
from bench.systems.delayline_sys import TOPIC, DelaylineSystem
from bench.systems.processes import fresh_log, kill_group, spawn, terminate, wait_for_log
from delayline import Client
from delayline.kafka.records import INBOUND_TOPIC
from delayline.testing.kafka import KafkaBroker, kafka_broker

#: The pause design's input topic.
DELAY_TOPIC = "bench.delay"
DUE_HEADER = "due_ms"
#: Partitions of each topic: as many as the consumers could use on 2 cores.
PARTITIONS = 3
BATCH = 1_000
#: How long before its head is due a paused partition resumes (ms): more than a
#: resume takes (about 0.8 s measured here), the records then held until due.
RESUME_LEAD_MS = 1_500


def start_broker(stack: ExitStack, system: System, topics: Sequence[str]) -> KafkaBroker:
    """A broker with ``topics`` created, stopped with ``stack``."""
    directory = system.workdir / "kafka"
    directory.mkdir(parents=True, exist_ok=True)
    broker = stack.enter_context(kafka_broker(directory))
    admin = AdminClient({"bootstrap.servers": broker.address})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        future.result(30)
    return broker


def receive_args(brokers: str, isolation: str = "read_uncommitted") -> list[str]:
    return [sys.executable, "-m", "bench.systems.kafka_sys", "receive", brokers, isolation]


class DelaylineKafkaSystem(DelaylineSystem):
    name = "delayline-kafka"
    #: The topics made before the scheduler starts.
    topics: tuple[str, ...] = (TOPIC,)

    def start(self) -> None:
        self._broker = ExitStack()
        self.kafka = start_broker(self._broker, self, self.topics)
        self.brokers = self.kafka.address
        self.run_options = (*self.run_options, "--kafka", self.brokers)
        super().start()
        wait_for_log(self.workdir / "consumer.log", CONSUMING, 60, self._consumer)

    def consumer_args(self) -> list[str]:
        return receive_args(self.brokers)

    def pids(self) -> list[int]:
        return [*super().pids(), self.kafka.pid]

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self._broker.close()


class DelaylineKafkaEosSystem(DelaylineKafkaSystem):
    name = "delayline-kafka-eos"

    def start(self) -> None:
        self.run_options = (*self.run_options, "--kafka-delivery", "exactly-once")
        super().start()

    def consumer_args(self) -> list[str]:
        return receive_args(self.brokers, "read_committed")


#: The topic the typo system's extra messages are addressed to (never created).
TYPO_TOPIC = "bench.no-such-topic"


class DelaylineKafkaTypoSystem(DelaylineKafkaSystem):
    name = "delayline-kafka-typo"

    def start(self) -> None:
        self._typo_at_ms = 0
        self.typos = 0
        super().start()

    def schedule(self, jobs: Sequence[Job]) -> None:
        # At most one a second, due with the first job of this call.
        if jobs and now_ms() - self._typo_at_ms >= 1_000:
            self._typo_at_ms = now_ms()
            self._client.send(TYPO_TOPIC, b"typo", deliver_at=jobs[0].due_ms)
            self.typos += 1
        super().schedule(jobs)


class DelaylineKafkaInSystem(DelaylineKafkaSystem):
    name = "delayline-kafka-in"
    topics = (TOPIC, INBOUND_TOPIC)

    def start(self) -> None:
        super().start()
        self._client.close()
        self._client = Client(self.redis_url, kafka=self.brokers)


class KafkaPauseSystem(System):
    name = "kafka-pause"

    def start(self) -> None:
        self._broker = ExitStack()
        self.kafka = start_broker(self._broker, self, [DELAY_TOPIC, TOPIC])
        self.brokers = self.kafka.address
        self._receiver = spawn(
            receive_args(self.brokers), env=self.child_env(), log=self.workdir / "receiver.log"
        )
        self._start_forwarder()
        wait_for_log(self.workdir / "receiver.log", CONSUMING, 60, self._receiver)
        self._producer = Producer(
            {"bootstrap.servers": self.brokers, "enable.idempotence": True, "linger.ms": 5}
        )

    def _start_forwarder(self) -> None:
        log = fresh_log(self.workdir / "forwarder.log")
        self._forwarder = spawn(
            [sys.executable, "-m", "bench.systems.kafka_sys", "forward", self.brokers],
            env=self.child_env(),
            log=log,
        )
        wait_for_log(log, CONSUMING, 60, self._forwarder)

    def schedule(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            while True:
                try:
                    self._producer.produce(
                        DELAY_TOPIC, value=job.key, headers=[(DUE_HEADER, str(job.due_ms))]
                    )
                    break
                except BufferError:
                    self._producer.poll(0.05)
            self._producer.poll(0)
        self._producer.flush(30)

    def pids(self) -> list[int]:
        return [self._forwarder.pid, self._receiver.pid, self.kafka.pid]

    def kill(self) -> None:
        kill_group(self._forwarder)

    def restart(self) -> None:
        self._start_forwarder()

    def stop(self) -> None:
        try:
            self._producer.flush(10)
            terminate(self._forwarder)
            terminate(self._receiver)
        finally:
            self._broker.close()


#: What a consumer logs once it has its partitions: ``start`` waits for it.
CONSUMING = "consuming"


def announce(_: Consumer, partitions: list[TopicPartition]) -> None:
    print(f"{CONSUMING} {len(partitions)} partitions", flush=True)


def arrived(consumer: Consumer, timeout_s: float) -> list[Message]:
    """The next record as soon as it arrives (or none after ``timeout_s``), and what else is
    already fetched. (``consume(n, timeout)`` would wait out the timeout for n records.)"""
    first = consumer.poll(timeout_s)
    return [] if first is None else [first, *consumer.consume(BATCH, 0)]


def forward(brokers: str) -> None:
    """The pause design's one consumer, at its best: forward each delay record to the
    target topic when due. A partition whose head is due later than RESUME_LEAD_MS is
    paused (and sought back to its head) until RESUME_LEAD_MS before that; a record
    due sooner is held in memory until due, so that the resume's own delay does not
    make it late. Offsets are committed when nothing is held and what was forwarded
    is acknowledged: at least once."""
    consumer = Consumer(
        {
            "bootstrap.servers": brokers,
            "group.id": "bench-forwarder",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    producer = Producer({"bootstrap.servers": brokers, "enable.idempotence": True, "linger.ms": 0})
    consumer.subscribe([DELAY_TOPIC], on_assign=announce)
    paused: dict[tuple[str, int], int] = {}  # (topic, partition) -> when its head is due
    held: list[tuple[int, int, bytes]] = []  # (due ms, arrival order, value): a heap
    order = itertools.count()
    while True:
        now = now_ms()
        ready = [tp for tp, at_ms in paused.items() if at_ms - RESUME_LEAD_MS <= now]
        if ready:
            consumer.resume([TopicPartition(topic, partition) for topic, partition in ready])
            for tp in ready:
                del paused[tp]
        forwarded = False
        while held and held[0][0] <= now:
            producer.produce(TOPIC, value=heapq.heappop(held)[2])
            forwarded = True
        wakes = [at_ms - RESUME_LEAD_MS for at_ms in paused.values()]
        head_ms = [held[0][0]] if held else []
        wait_ms = min([*wakes, *head_ms, now + 100]) - now
        for message in arrived(consumer, max(wait_ms, 1) / 1000):
            if message.error() is not None:
                continue
            tp = (message.topic() or "", message.partition() or 0)
            if tp in paused:
                continue  # fetched before the pause: read again from its head
            due_ms = int(cast(bytes, dict(message.headers() or [])[DUE_HEADER]))
            if due_ms - now_ms() > RESUME_LEAD_MS:
                head = TopicPartition(tp[0], tp[1], message.offset() or 0)
                consumer.pause([head])
                consumer.seek(head)
                paused[tp] = due_ms
            elif due_ms > now_ms():
                heapq.heappush(held, (due_ms, next(order), message.value() or b""))
            else:
                producer.produce(TOPIC, value=message.value())
                forwarded = True
        if forwarded:
            producer.flush(30)
            if not held:
                consumer.commit(asynchronous=True)


def receive(brokers: str, isolation: str = "read_uncommitted") -> None:
    """Record a receipt for every record of the target topic (its value is the job's key),
    read with ``isolation`` (``isolation.level``)."""
    consumer = Consumer(
        {
            "bootstrap.servers": brokers,
            "group.id": "bench",
            "auto.offset.reset": "earliest",
            "isolation.level": isolation,
        }
    )
    consumer.subscribe([TOPIC], on_assign=announce)
    while True:
        found = [m for m in arrived(consumer, 1.0) if m.error() is None]
        if found:
            record_receipts([(m.value() or b"").decode() for m in found], now_ms())


if __name__ == "__main__":
    if sys.argv[1] == "forward":
        forward(sys.argv[2])
    else:
        receive(*sys.argv[2:4])
