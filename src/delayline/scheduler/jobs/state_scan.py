"""Listing the messages in the scheduler's state: a batch query over its checkpoint.

Spark's state data source reads the ``entries`` list state of the last
committed batch, one row per pack, while the streaming query goes on; the
packs are decoded and filtered in Python workers, and only the messages asked
for come back to the driver. The scan reads the whole state: seconds at 1M
pending, on the same cores as the streaming query. A thread of ``delayline
run`` (:class:`ListingServer`) serves the requests that clients leave in
Redis, one at a time, and reports the scan's progress in tasks.

What that batch had not committed is read too, from the inbound feeds past its
offsets (:func:`unsettled`): a message sent a moment before the listing, still
on the inbound stream or in the batch in flight, is listed as ``inbound``, so
that a cancel by key finds it. A message leaves the inbound feeds only when a
later batch commits, which holds it in the state from then on.

A listing of recurring schedules (:func:`scan_schedules`) reads the schedule keys
only, told apart from the message slots by the key column in Spark
(:data:`~delayline.schedules.ops.SCHEDULE_KEYS_BELOW`), and decodes only the
schedules it asks for. It reads no inbound feed: a schedule put a moment ago is
listed once a batch has committed it, within about a second.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.functions import col

from delayline import timing
from delayline.errors import SchedulerError
from delayline.listing import SCHEDULES, ListRequest, PendingMessage
from delayline.redis.list_requests import ListRequests
from delayline.scheduler.background import Background
from delayline.scheduler.jobs.checkpoint_files import NO_BATCH_YET, CheckpointFiles
from delayline.scheduler.pipeline import packs, schemas
from delayline.scheduler.pipeline.clients import inbound_for, kafka_inbound_for
from delayline.scheduler.pipeline.feeds import START_ID, id_order, kafka_prefix, offset_fields
from delayline.scheduler.pipeline.records import to_packed
from delayline.scheduler.settings import SchedulerSettings
from delayline.schedules import ops, state
from delayline.schedules.listed import ListedSchedule

#: How many times a listing reads the inbound feeds past the last committed batch,
#: should a batch commit during each read (a read takes milliseconds, a batch seconds).
UNSETTLED_READS = 5

T = TypeVar("T")

#: A listed send: (deliver_at_ms, id, topic, key, attempt, body_bytes).
Listed = tuple[int, str, str, str, int, int]


def selected(request_json: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The first ``limit`` sends by due time in ``batches`` of packs (one state partition)
    that the request asks for and that no cancel in them names. Runs in a Python worker.

    A cancel waits in its message's key until the slot fires, and a key's packs
    all lie in one state partition: one task sees both.
    """
    request = ListRequest.from_json(request_json)
    records = (
        record
        for batch in batches
        for data in batch.column(0).to_pylist()
        for record in packs.unpack(data)
    )
    rows = [
        dict(zip(schemas.LISTED_ARROW.names, send, strict=True))
        for send in listed(request, records)
    ]
    yield pa.RecordBatch.from_pylist(rows, schema=schemas.LISTED_ARROW)


def listed(request: ListRequest, records: Iterable[packs.Record]) -> list[Listed]:
    """The first ``request.limit`` sends among ``records`` by due time that ``request``
    asks for and that no cancel among them names."""
    sends: list[Listed] = []
    cancelled: set[str] = set()
    for record in records:
        if record.kind in packs.CANCELS:
            cancelled.add(record.id)
        elif record.kind == packs.SEND and request.selects(
            record.topic, record.key, record.deliver_at_ms
        ):
            sends.append((record.deliver_at_ms, record.id, record.topic, record.key,
                          record.attempt, len(record.body)))  # fmt: skip
    return heapq.nsmallest(request.limit, (s for s in sends if s[1] not in cancelled))


def inbound_row(send: Listed) -> PendingMessage:
    """A send listed from an inbound feed, not yet in the state."""
    deliver_at_ms, message_id, topic, key, attempt, body_bytes = send
    return PendingMessage(message_id, topic, key, deliver_at_ms, attempt, body_bytes, "inbound")


def unsettled(
    settings: SchedulerSettings, committed: Mapping[str, str], request: ListRequest
) -> list[packs.Record]:
    """The cancels, and the sends ``request`` asks for, of every inbound feed past the
    ``committed`` offsets (a batch's end offset; empty for none), decoded as the
    source decodes them. Only those are kept: a backlog may hold millions."""
    inbound = inbound_for(settings.redis_url)
    feeds: list[Iterable[tuple[str, Mapping[bytes, bytes]]]] = []
    for field, stream in offset_fields(settings.inbound_shards):
        newest = inbound.last_id(stream=stream)
        after = committed.get(field, START_ID)
        if newest is not None and id_order(newest) > id_order(after):
            feeds.append(inbound.read(after, newest, stream=stream))
    if settings.kafka is not None:
        topic = kafka_inbound_for(settings.kafka, settings.kafka_inbound_topic)
        prefix = kafka_prefix(topic.topic)
        partitions = topic.partitions()
        for partition, end in topic.ends(partitions).items():
            feeds.append(topic.read(partition, int(committed.get(f"{prefix}{partition}", 0)), end))
    limits, wheel, shards = settings.limits, settings.wheel, settings.shards
    return [
        record
        for entry_id, fields in itertools.chain.from_iterable(feeds)
        for _, data in to_packed(entry_id, fields, limits=limits, wheel=wheel, shards=shards)
        for record in packs.unpack(data)
        if record.kind in packs.CANCELS
        or (
            record.kind == packs.SEND
            and request.selects(record.topic, record.key, record.deliver_at_ms)
        )
    ]


def selected_schedules(
    request_json: str, now_ms: int, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """The first ``limit`` schedules by topic, then name, in ``batches`` of schedule
    keys' states (one state partition) that the request asks for, as they stand at
    ``now_ms``. Runs in a Python worker; only those are decoded and checked."""
    request = ListRequest.from_json(request_json)
    candidates = (
        (address, line)
        for batch in batches
        for value in batch.column(0).to_pylist()
        for address, line in state.addresses(value)
        if request.selects_schedule(*address)
    )
    chosen = heapq.nsmallest(request.limit, candidates, key=lambda candidate: candidate[0])
    rows = [
        {
            "topic": topic,
            "name": name,
            "row": ListedSchedule.of(state.decode_line(line), now_ms).dumps(),
        }
        for (topic, name), line in chosen
    ]
    yield pa.RecordBatch.from_pylist(rows, schema=schemas.LISTED_SCHEDULE_ARROW)


def state_entries(
    spark: SparkSession, checkpoint: str, batch_id: int, request: ListRequest
) -> DataFrame:
    """The elements (``pack``) of the ``entries`` state after batch ``batch_id`` that
    ``request`` may ask for: those of the message slots for messages, of the schedule
    keys for schedules (of the one key that holds it, for a schedule named with its
    topic). The keys are told apart in Spark, on the key column."""
    if request.kind != SCHEDULES:
        kept = message_slots()
    elif request.topic is not None and request.name is not None:
        kept = col(WHEEL_KEY).isin(ops.schedule_key(request.topic, request.name))
    else:
        kept = schedule_keys()
    return entries(spark, checkpoint, kept, batch_id)


#: The key column of the ``entries`` state.
WHEEL_KEY = "key.wheel_key"


def message_slots() -> Column:
    """The keys of the ``entries`` state that are message slots (the reject slot too)."""
    return col(WHEEL_KEY) >= ops.SCHEDULE_KEYS_BELOW


def schedule_keys() -> Column:
    """The keys of the ``entries`` state that hold recurring schedules."""
    return col(WHEEL_KEY) < ops.SCHEDULE_KEYS_BELOW


def entries(
    spark: SparkSession, checkpoint: str, kept: Column, batch_id: int | None = None
) -> DataFrame:
    """The elements (``pack``) of the ``entries`` state whose keys are ``kept``, after
    batch ``batch_id`` (None: the last committed), read by Spark's state data source."""
    reader = spark.read.format("statestore").option("stateVarName", "entries")
    if batch_id is not None:
        reader = reader.option("batchId", batch_id)
    return reader.load(checkpoint).where(kept).select("list_element.pack")


def scan_state(
    spark: SparkSession, checkpoint: str, request: ListRequest, group: str, batch_id: int
) -> list[PendingMessage]:
    """The first ``request.limit`` messages in the state after batch ``batch_id`` that
    it asks for and that no cancel there names, by due time, as Spark job group
    ``group`` (for its progress)."""
    spark.sparkContext.setJobGroup(group, "delayline listing", interruptOnCancel=True)
    pending = (
        state_entries(spark, checkpoint, batch_id, request)
        .mapInArrow(functools.partial(selected, request.to_json()), schemas.LISTED)
        .orderBy("deliver_at_ms", "id")
        .limit(request.limit)
    )
    return [PendingMessage(**row.asDict(), where="state") for row in pending.collect()]


def scan_schedules(
    spark: SparkSession,
    checkpoint: str,
    request: ListRequest,
    group: str,
    batch_id: int,
    now_ms: int,
) -> list[ListedSchedule]:
    """The first ``request.limit`` schedules in the state after batch ``batch_id`` that
    it asks for, by topic then name, as they stand at ``now_ms``, as Spark job group
    ``group``."""
    spark.sparkContext.setJobGroup(group, "delayline listing", interruptOnCancel=True)
    listed_ones = (
        state_entries(spark, checkpoint, batch_id, request)
        .mapInArrow(
            functools.partial(selected_schedules, request.to_json(), now_ms),
            schemas.LISTED_SCHEDULE,
        )
        .orderBy("topic", "name")
        .limit(request.limit)
    )
    return [ListedSchedule.from_json(row["row"]) for row in listed_ones.collect()]


class ListingServer(Background):
    """Serves listing requests from Redis on a thread of its own, one at a time."""

    def __init__(
        self, spark: SparkSession, settings: SchedulerSettings, listings: ListRequests
    ) -> None:
        self._spark = spark
        self._settings = settings
        self._checkpoint = CheckpointFiles(spark, settings.checkpoint_location)
        self._listings = listings
        super().__init__("delayline-listings")

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop taking requests (a scan under way is left to Spark's stop), and close."""
        super().stop(timeout_s)
        self._listings.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                waiting = self._listings.next_request(timeout_s=1)
            except Exception:  # Redis away: the service reports it; try again
                self._stop.wait(1)
                continue
            if waiting is not None:
                self._answer(*waiting)

    def _answer(self, listing_id: str, request: ListRequest) -> None:
        group = f"delayline-listing-{uuid.uuid4().hex}"
        done = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(listing_id, group, done), daemon=True)
        watcher.start()
        try:
            if request.kind == SCHEDULES:
                rows: list[PendingMessage] | list[ListedSchedule] = self._schedules(request, group)
            else:
                rows = self._messages(request, group)
        except Exception as exc:  # any failure is the listing's, not the service's
            done.set()
            self._listings.fail(listing_id, f"the scan failed: {exc}"[:1000])
            return
        done.set()
        watcher.join()
        self._listings.finish(listing_id, rows)

    def _messages(self, request: ListRequest, group: str) -> list[PendingMessage]:
        """The state's messages, and the inbound feeds' past the batch scanned."""
        batch_id, records = self._unsettled(request)
        rows: list[PendingMessage] = []
        if batch_id >= 0:
            location = self._checkpoint.location
            rows = self._scan(lambda: scan_state(self._spark, location, request, group, batch_id))
        # A message of the state cancelled since, on an inbound feed, is not listed.
        cancelled = {record.id for record in records if record.kind in packs.CANCELS}
        rows = [row for row in rows if row.id not in cancelled]
        return rows + [inbound_row(send) for send in listed(request, records)]

    def _schedules(self, request: ListRequest, group: str) -> list[ListedSchedule]:
        """The schedules of the last committed batch, as they stand now."""
        batch_id = self._checkpoint.last_batch("commits")
        if batch_id < 0:
            return []
        location, now_ms = self._checkpoint.location, timing.now_ms()
        return self._scan(
            lambda: scan_schedules(self._spark, location, request, group, batch_id, now_ms)
        )

    def _unsettled(self, request: ListRequest) -> tuple[int, list[packs.Record]]:
        """(the last committed batch, or -1, and the records past its offsets). Read
        again if a batch committed meanwhile: the source trims a batch's records once
        the one after it commits, and those would be in neither place."""
        for _ in range(UNSETTLED_READS):
            batch_id = self._checkpoint.last_batch("commits")
            offsets = self._checkpoint.offsets(batch_id) if batch_id >= 0 else {}
            records = unsettled(self._settings, offsets, request)
            if self._checkpoint.last_batch("commits") == batch_id:
                return batch_id, records
        raise SchedulerError(
            f"batches committed during each of {UNSETTLED_READS} reads of the inbound feeds"
        )

    def _scan(self, scan: Callable[[], list[T]]) -> list[T]:
        try:
            return scan()
        except Exception as exc:
            if NO_BATCH_YET in str(exc):  # a first batch not committed yet: nothing held
                return []
            raise

    def _watch(self, listing_id: str, group: str, done: threading.Event) -> None:
        """Report the scan's tasks, done and in all, until it ends."""
        tracker = self._spark.sparkContext.statusTracker()
        while not done.wait(0.2):
            finished = total = 0
            for job_id in tracker.getJobIdsForGroup(group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job else []:
                    stage = tracker.getStageInfo(stage_id)
                    if stage:
                        finished += stage.numCompletedTasks
                        total += stage.numTasks
            self._listings.report(listing_id, "scanning", finished, total)
