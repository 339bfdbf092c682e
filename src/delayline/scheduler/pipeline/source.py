"""A replayable Spark source over the Redis inbound stream (Python Data Source API).

Offsets are stream entry ids (``{"id": "<ms>-<seq>", "run": token, "tick": ms}``),
one per inbound stream: ``id`` for ``delayline:inbound`` and, with inbound shards,
``id.<n>`` for shard n's stream. A batch is exactly the entries in
``(start, end]`` of each, so ``XRANGE`` replays it after a crash. The default
stream is read in ``source_partitions`` ranges, each shard's stream in one.
With ``--kafka``, each partition of the Kafka inbound topic is one more feed,
``kafka:<topic>:<partition>``, whose offsets are Kafka's (``[start, end)``).
Admission control caps a batch at ``max_batch_rows`` (``ReadMaxRows``), shared
evenly by the feeds; in a Redis stream a schedule's record counts as
``SCHEDULE_WEIGHT`` records. Once Spark commits a batch, its ranges are trimmed
from the streams (and committed to the Kafka group), so Redis memory does not
grow with the number of pending messages: they live in the scheduler's state.

The offset changes, and so a batch runs, only for new input, a new run, a state
timer that is due (the processor records each timer it sets in Redis), or
``idle_batch_ms`` without a batch: an idle scheduler costs next to nothing.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from delayline.errors import ConfigurationError, TransportError
from delayline.kafka.inbound import PLANNING_TIMEOUT_S, KafkaInbound
from delayline.redis import keys
from delayline.scheduler.pipeline import schemas
from delayline.scheduler.pipeline.clients import inbound_for, kafka_inbound_for, store_for
from delayline.scheduler.pipeline.feeds import (
    MAX_SEQ,
    START_ID,
    id_order,
    kafka_prefix,
    offset_fields,
)
from delayline.scheduler.pipeline.handoff import hand_off, sort_inbound
from delayline.scheduler.pipeline.task import current_batch_task
from delayline.scheduler.settings import SchedulerSettings
from delayline.timing import now_ms

log = logging.getLogger(__name__)

#: After the brokers failed to answer while a batch was planned, how long the source
#: plans without the Kafka inbound topic before it asks again (s).
KAFKA_RETRY_S = 5.0


@dataclass(frozen=True)
class InboundRange(InputPartition):
    """The entries ``after_id < id <= upto_id`` of inbound stream ``stream``."""

    after_id: str
    upto_id: str
    stream: str = keys.INBOUND


@dataclass(frozen=True)
class KafkaRange(InputPartition):
    """The records ``start <= offset < end`` of ``partition`` of the Kafka inbound topic."""

    partition: int
    start: int
    end: int


def split_range(after_id: str, upto_id: str, parts: int) -> list[InboundRange]:
    """Split ``(after_id, upto_id]`` of the default stream into up to ``parts``
    consecutive ranges by time."""
    low_ms = int(after_id.split("-")[0])
    high_ms = int(upto_id.split("-")[0])
    cuts = sorted({low_ms + (high_ms - low_ms) * k // parts for k in range(1, parts)} - {high_ms})
    bounds = [after_id, *(f"{ms}-{MAX_SEQ}" for ms in cuts), upto_id]
    return [InboundRange(lo, hi) for lo, hi in itertools.pairwise(bounds)]


class InboundSource(DataSource):
    """``spark.readStream.format("delayline-inbound").option("settings", json)``."""

    @classmethod
    def name(cls) -> str:
        return "delayline-inbound"

    def schema(self) -> StructType:
        return schemas.SOURCE

    def streamReader(self, schema: StructType) -> InboundReader:
        return InboundReader(
            SchedulerSettings.from_json(self.options["settings"]), self.options["run_token"]
        )


class InboundReader(DataSourceStreamReader):
    """Plans batches on the driver; ``read`` runs on executors."""

    def __init__(self, settings: SchedulerSettings, run_token: str) -> None:
        self._settings = settings
        self._run_token = run_token
        self._streams = offset_fields(settings.inbound_shards)
        self._trimmed_upto = dict.fromkeys([field for field, _ in self._streams], START_ID)
        self._kafka_committed: dict[int, int] = {}
        # (monotonic s) Until then the brokers are taken as away: see _kafka_ends.
        self._kafka_away_until = 0.0

    def _kafka(self) -> KafkaInbound | None:
        settings = self._settings
        if settings.kafka is None:
            return None
        return kafka_inbound_for(settings.kafka, settings.kafka_inbound_topic)

    def initialOffset(self) -> dict[str, str]:
        offsets = {field: START_ID for field, _ in self._streams}
        topic = self._kafka()
        if topic is not None:
            # A new checkpoint (a drain's) goes on where the group, so the old one, stopped;
            # a partition found later starts at its first record.
            starts = topic.starts(topic.partitions())
            prefix = kafka_prefix(topic.topic)
            offsets.update({f"{prefix}{p}": str(at) for p, at in starts.items()})
        return offsets

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self._settings.max_batch_rows)

    def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
        inbound = inbound_for(self._settings.redis_url)
        # Called on the stream thread before each batch is planned: holding here
        # lets the driver stop between batches, with none half done.
        inbound.hold_while_paused(self._run_token)
        # A scheduler that another took over from plans no batch into the checkpoint.
        store_for(self._settings.redis_url, self._settings.fence_token).check_fence()
        # A checkpoint from before a stream was read starts it at the beginning.
        begun = {field: start.get(field, START_ID) for field, _ in self._streams}
        ends = {}
        for field, stream in self._streams:
            if isinstance(limit, ReadMaxRows):
                share = max(1, limit.max_rows // len(self._streams))
                last = inbound.last_id_within(begun[field], share, stream=stream)
            else:  # ReadAllAvailable: the engine asks for everything, whatever our default
                last = inbound.last_id(stream=stream)
            if last is None or id_order(last) <= id_order(begun[field]):
                last = begun[field]
            ends[field] = last
        if self._kafka() is not None:
            kafka_begun, kafka_ends = self._kafka_ends(start, limit)
            begun.update(kafka_begun)
            ends.update(kafka_ends)
        now = now_ms()
        ticked_ms = int(start.get("tick", 0))
        # Asked before every batch, busy or idle: it also forgets the wakeups the last
        # batch fired, which a load that never lets the query idle would pile up.
        timer_due = inbound.due_wakeup(ticked_ms, now)
        if (
            ends != begun
            # The run's token is part of the offset. Spark runs a batch only for new
            # offsets; a run restarted after a kill between batches, with nothing new
            # to read, would run none and fire no overdue timer until input came. A
            # new token is a new offset: every run's first batch fires what is due.
            or start.get("run") != self._run_token
            # No-data batches are off (an idle query would run one every trigger):
            # a timer fires only in a batch, so wake one when a timer is due...
            or timer_due
            # ...or when none ran for a while, should a wakeup have been lost.
            or now - ticked_ms >= self._settings.idle_batch_ms
        ):
            # Spark stamps the batch after this call: every timer due by now fires.
            # Fields of feeds not read now (a Kafka topic of an earlier run) are kept.
            return {**start, **ends, "run": self._run_token, "tick": str(now)}
        # Spark commits a source range only when it plans the next batch, and an idle
        # query plans none; the batch that ended at ``start`` is committed by now.
        self._trim(begun)
        inbound.mark_settled(now)
        return start

    def _kafka_ends(
        self, start: Mapping[str, str], limit: ReadLimit
    ) -> tuple[dict[str, str], dict[str, str]]:
        """(begun, ends) of the Kafka topic's partitions; with the brokers away, nothing
        new (the Redis feeds and the timers go on)."""
        topic = self._kafka()
        assert topic is not None
        prefix = kafka_prefix(topic.topic)
        known = {f: at for f, at in start.items() if f.startswith(prefix)}
        if time.monotonic() < self._kafka_away_until:
            return known, known
        try:
            partitions = topic.partitions(PLANNING_TIMEOUT_S)
            latest = topic.ends(partitions, PLANNING_TIMEOUT_S)
        except (TransportError, ConfigurationError) as exc:
            # Asked again after a pause, so that an outage does not slow every batch.
            self._kafka_away_until = time.monotonic() + KAFKA_RETRY_S
            log.warning("the Kafka inbound topic is not read for %g s: %s", KAFKA_RETRY_S, exc)
            return known, known
        feeds = len(self._streams) + len(partitions)
        begun: dict[str, str] = {}
        ends: dict[str, str] = {}
        for partition in partitions:
            field = f"{prefix}{partition}"
            # A partition new to the checkpoint starts at its first record.
            first = int(start.get(field, 0))
            last = max(first, latest[partition])
            if isinstance(limit, ReadMaxRows):
                last = min(last, first + max(1, limit.max_rows // feeds))
            begun[field], ends[field] = str(first), str(last)
        return begun, ends

    def partitions(
        self, start: dict[str, str], end: dict[str, str]
    ) -> Sequence[InboundRange | KafkaRange]:
        ranges: list[InboundRange | KafkaRange] = []
        for field, stream in self._streams:
            after_id, upto_id = start.get(field, START_ID), end.get(field, START_ID)
            if after_id == upto_id:
                continue
            if stream == keys.INBOUND:
                ranges += split_range(after_id, upto_id, self._settings.source_partitions)
            else:  # a shard: one partition, as a Redis server would serve it
                ranges.append(InboundRange(after_id, upto_id, stream))
        for partition, (first, last) in self._kafka_ranges(start, end).items():
            if first < last:
                ranges.append(KafkaRange(partition, first, last))
        return ranges

    def _kafka_ranges(
        self, start: Mapping[str, str], end: Mapping[str, str]
    ) -> dict[int, tuple[int, int]]:
        """partition -> (start, end) of each Kafka inbound partition in ``end``."""
        topic = self._kafka()
        if topic is None:
            return {}
        prefix = kafka_prefix(topic.topic)
        return {
            int(field.removeprefix(prefix)): (int(start.get(field, 0)), int(last))
            for field, last in end.items()
            if field.startswith(prefix)
        }

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settings = self._settings
        entries: Iterable[tuple[str, Mapping[bytes, bytes]]]
        if isinstance(partition, KafkaRange):
            topic = self._kafka()
            assert topic is not None
            entries = topic.read(partition.partition, partition.start, partition.end)
        else:
            assert isinstance(partition, InboundRange)
            inbound = inbound_for(settings.redis_url)
            entries = inbound.read(partition.after_id, partition.upto_id, stream=partition.stream)
        batch = sort_inbound(entries, settings)
        hand_off(batch, settings, current_batch_task())
        if batch.packs:
            yield pa.RecordBatch.from_pydict(
                {"wheel_key": list(batch.packs), "pack": list(batch.packs.values())},
                schema=schemas.SOURCE_ARROW,
            )

    def commit(self, end: dict[str, str]) -> None:
        self._trim(end)

    def _trim(self, upto: Mapping[str, str]) -> None:
        """Trim each stream up to its id in ``upto``, and commit the Kafka offsets in
        it to the group, unless done already."""
        inbound = inbound_for(self._settings.redis_url)
        for field, stream in self._streams:
            upto_id = upto.get(field, START_ID)
            if upto_id not in (START_ID, self._trimmed_upto[field]):
                inbound.trim(upto_id, stream=stream)
                self._trimmed_upto[field] = upto_id
        topic = self._kafka()
        done = {p: last for p, (_, last) in self._kafka_ranges(upto, upto).items()}
        if topic is None or done == self._kafka_committed:
            return
        if time.monotonic() < self._kafka_away_until:
            return  # committed once the brokers answer again
        try:
            topic.commit(done)
        except TransportError as exc:  # only Kafka's tools and a next checkpoint read them
            log.warning("the Kafka group's offsets are not committed for now: %s", exc)
            return
        self._kafka_committed = done
