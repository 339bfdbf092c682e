"""A drain: a stopped scheduler's pending messages, handed to a new checkpoint.

The settings that shape the state (state partitions, the wheel) are pinned by
the checkpoint. To change them, ``delayline drain``
reads the state of the last committed batch with Spark's state data source,
as the listing does, and appends every message it holds to the default
inbound stream. Then it moves the checkpoint aside, and the next ``delayline
run`` starts a new one, with any settings, that reads those messages back.

- **Once each.** A state partition's messages are appended in chunks, in a
  fixed order; each chunk goes in one transaction with its mark in a Redis
  hash, so that a drain stopped midway and run again appends the rest only.
  While a drain is unfinished, ``delayline run`` refuses the checkpoint: the
  drain marks it first, and the rename that ends the drain takes the mark along.
- **Counted once.** The appended records carry ``cascade=1``, as a coarse
  slot's hand-down does: the source does not count them as accepted again, and
  the forecast, which counts them still, stays right.
- **Cancels.** Every cancel is recorded in Redis as well as in the state (the
  source records raw ones). A cancelled message is handed over all the same,
  and dropped when it comes due, as it would have been: the drop counts it,
  marks its status and, for a reschedule, sends its copy.
- **Schedules** are handed over as puts of their definitions (paused ones
  paused), which the new checkpoint arms afresh: their runs start after its
  first batch, as a new definition's do; runs that fell between the two are
  not caught up, and the counts of runs and skipped runs start again.
- **The inbound streams.** What the old checkpoint committed is trimmed away;
  what it did not read stays for the new one.
- **The outboxes.** What waits there is due within the horizon. While it
  works, the drain pumps every shard's outbox, as the scheduler does, and
  before it ends it waits (up to twice the horizon) until they are empty: their
  messages go out on time, and a new shard count (``--inbound-shards``) starts
  with no message in an outbox of the old one (see redis/layout.py).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
from py4j.protocol import Py4JError
from pyspark import TaskContext
from pyspark.errors import PySparkException
from pyspark.sql import Column, SparkSession

from delayline.chunking import chunks
from delayline.errors import ConfigurationError, SchedulerError
from delayline.groups import DEFAULT_GROUP
from delayline.model import Message
from delayline.redis import keys
from delayline.redis.inbound import InboundStream
from delayline.redis.layout import ShardLayout
from delayline.redis.store import DeliveryStore
from delayline.scheduler.jobs.checkpoint_files import NO_BATCH_YET, CheckpointFiles
from delayline.scheduler.jobs.state_scan import entries, message_slots, schedule_keys
from delayline.scheduler.pinning import PINNED_FILE, local_path, recorded_settings
from delayline.scheduler.pipeline import packs, schemas
from delayline.scheduler.pipeline.clients import inbound_for
from delayline.scheduler.pipeline.feeds import offset_fields
from delayline.scheduler.pipeline.records import CASCADE_FIELD
from delayline.scheduler.pump import Pump
from delayline.scheduler.settings import SchedulerSettings
from delayline.schedules import ahead, state
from delayline.schedules.ops import PUT, ScheduleOp
from delayline.schedules.runs import Armed
from delayline.timing import now_ms
from delayline.validation import Limits, decode_headers

#: A chunk of drained messages, one transaction: at most this many...
CHUNK_MESSAGES = 5_000
#: ...and about this many bytes (8 MiB).
CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class DrainReport:
    """What a drain did."""

    #: Pending messages appended to the default inbound stream.
    messages: int
    #: Where the old checkpoint (and its pinned settings) now is.
    drained_checkpoint: str
    #: Entries still in the outboxes when the drain stopped waiting for them; the
    #: next run's pumps deliver them.
    left_in_outboxes: int = 0
    #: Recurring schedules appended as puts.
    schedules: int = 0


def as_inbound_record(record: packs.Record, *, now_ms: int, limits: Limits) -> dict[bytes, bytes]:
    """The inbound record (v1, marked as a cascade) that sends ``record`` again, unchanged."""
    message = Message(
        id=record.id,
        topic=record.topic,
        body=record.body,
        deliver_at_ms=record.deliver_at_ms,
        sent_at_ms=now_ms,
        key=record.key or None,
        headers=decode_headers(record.headers, limits),
        attempt=record.attempt,
    )
    return {**message.to_record(), CASCADE_FIELD: b"1"}


def hand_over(
    redis_url: str, marker: str, limits: Limits, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Append the pending messages of one state partition's ``batches`` of packs to the
    default inbound stream, resuming after the chunks ``marker`` counts. Runs in a
    Python worker, on the whole partition: its messages are held in memory to be sorted.
    """
    context = TaskContext.get()
    assert context is not None
    partition = context.partitionId()
    sends = [
        record
        for batch in batches
        for data in batch.column(0).to_pylist()
        for record in packs.unpack(data)
        if record.kind == packs.SEND
    ]
    append_partition(inbound_for(redis_url), marker, partition, sends, limits)
    yield pa.RecordBatch.from_pylist(
        [{"partition": partition, "messages": len(sends)}], schema=schemas.DRAINED_ARROW
    )


def hand_over_schedules(
    redis_url: str, marker: str, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Append a put of every schedule in one state partition's ``batches`` (the encoded
    schedules of its schedule keys) to the default inbound stream, once, as
    :func:`hand_over` does messages. Runs in a Python worker."""
    context = TaskContext.get()
    assert context is not None
    partition = context.partitionId()
    at_ms = now_ms()
    puts = sorted(
        (
            armed
            for batch in batches
            for data in batch.column(0).to_pylist()
            for armed in state.decode(data)
        ),
        key=lambda armed: armed.schedule.address,
    )
    inbound = inbound_for(redis_url)
    done = inbound.drained_chunks(marker, partition)
    for chunk, part in enumerate(
        chunks(puts, max_items=CHUNK_MESSAGES, max_bytes=CHUNK_BYTES, size_of=_definition_bytes)
    ):
        if chunk >= done:
            records = [drained_put(armed, at_ms).to_record() for armed in part]
            inbound.append_drained(marker, partition, chunk, records)
    yield pa.RecordBatch.from_pylist(
        [{"partition": partition, "messages": len(puts)}], schema=schemas.DRAINED_ARROW
    )


def drained_put(armed: Armed, at_ms: int) -> ScheduleOp:
    """The put that carries a schedule to the new checkpoint, with the runs it counted
    ahead in the forecast, for the new one to take back (it counts them again)."""
    schedule, counted = armed.schedule, ahead.counted(armed)
    span = (counted[0], counted[-1]) if counted else None
    return ScheduleOp(PUT, schedule.topic, schedule.name, at_ms, schedule, span)


def _definition_bytes(armed: Armed) -> int:
    schedule = armed.schedule
    return len(schedule.body) * 4 // 3 + len(schedule.topic) + len(schedule.name) + 500


def refuse_early(settings: SchedulerSettings) -> None:
    """Refuse, before Spark starts, a local checkpoint location that holds no checkpoint
    (ConfigurationError); any other is checked by :func:`drain`, through Hadoop."""
    root = local_path(settings.checkpoint_location)
    if root is not None and not (root / "metadata").exists():
        raise ConfigurationError(f"there is no checkpoint to drain in {root}")


def check_drainable(files: CheckpointFiles) -> None:
    """Raise ConfigurationError unless ``files`` hold a checkpoint whose batches are all
    committed."""
    if not files.exists():
        raise ConfigurationError(f"there is no checkpoint to drain in {files.location}")
    if not files.settled():
        raise ConfigurationError(
            f"the checkpoint in {files.location} has a batch in flight: start delayline run "
            "once with its recorded settings and stop it with Ctrl-C, then drain"
        )


def append_partition(
    inbound: InboundStream,
    marker: str,
    partition: int,
    sends: list[packs.Record],
    limits: Limits,
    chunk_messages: int = CHUNK_MESSAGES,
) -> None:
    """Append ``sends`` (of state partition ``partition``) to the default inbound stream,
    in chunks of up to ``chunk_messages`` (and about CHUNK_BYTES), skipping the chunks
    that ``marker`` counts as appended already."""
    # The same order whenever it runs, so that the chunks marked done stay done.
    sends = sorted(sends, key=lambda record: (record.deliver_at_ms, record.id))
    done = inbound.drained_chunks(marker, partition)
    at_ms = now_ms()
    parts = chunks(
        sends,
        max_items=chunk_messages,
        max_bytes=CHUNK_BYTES,
        size_of=lambda r: len(r.body) + len(r.headers) + len(r.topic) + 100,
    )
    for chunk, part in enumerate(parts):
        if chunk >= done:
            records = [as_inbound_record(r, now_ms=at_ms, limits=limits) for r in part]
            inbound.append_drained(marker, partition, chunk, records)


def trim_committed(inbound: InboundStream, files: CheckpointFiles, inbound_shards: int) -> None:
    """Trim each inbound stream that the checkpoint reads (it has ``inbound_shards``) up
    to its offset at the last committed batch. A running source trims a batch's records
    only when it plans the next one; a new checkpoint reads every stream from the start."""
    committed = files.committed_offsets()
    for field, stream in offset_fields(inbound_shards):
        if field in committed:
            inbound.trim(committed[field], stream=stream)


def drain(spark: SparkSession, settings: SchedulerSettings) -> DrainReport:
    """Hand the pending messages of ``settings``' checkpoint (a local directory, HDFS or
    S3) to the next one (see the module's text). The scheduler must be stopped, and its
    data directory locked.

    Raises ConfigurationError as :func:`check_drainable` does; SchedulerError if
    the Spark job fails (run it again: it resumes).
    """
    files = CheckpointFiles(spark, settings.checkpoint_location)
    check_drainable(files)
    query_id = files.query_id()
    files.mark_draining(json.dumps({"query_id": query_id, "started_at_ms": now_ms()}) + "\n")
    recorded = recorded_settings(settings.data_dir)
    # The pumps place a reschedule's new message by the horizon the scheduler had.
    ran_with = settings.with_overrides(horizon_ms=recorded.get("horizon_ms"))
    deadline = time.monotonic() + 2 * ran_with.horizon_ms / 1000
    inbound = InboundStream.from_url(settings.redis_url)
    try:
        with outboxes_pumped(ran_with) as wait_until_empty:
            inbound.forget_wakeups()
            trim_committed(inbound, files, int(recorded.get("inbound_shards", 1)))
            marker = keys.drain_marker(query_id)
            messages = _append_pending(
                spark,
                files.location,
                message_slots(),
                functools.partial(hand_over, settings.redis_url, marker, settings.limits),
            )
            schedules = _append_pending(
                spark,
                files.location,
                schedule_keys(),
                functools.partial(hand_over_schedules, settings.redis_url, f"{marker}:schedules"),
            )
            left = wait_until_empty(deadline)
    finally:
        inbound.close()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    aside = files.move_aside(f".drained-{stamp}", keep=settings.data_dir / PINNED_FILE)
    return DrainReport(messages, aside, left, schedules)


@contextmanager
def outboxes_pumped(settings: SchedulerSettings) -> Iterator[Callable[[float], int]]:
    """Pump the outbox of every shard of every count used, and of every group's lane in
    them (see redis/keys.py's ShardKeys.lane), while the block runs. It is
    given ``wait_until_empty(deadline)`` (a ``time.monotonic()`` value), which returns how
    many entries are left in them once they are empty or the deadline has passed."""
    store = DeliveryStore.from_url(settings.redis_url)
    layout = ShardLayout.from_url(settings.redis_url)
    pumps: list[Pump] = []

    def wait_until_empty(deadline: float) -> int:
        while (left := store.waiting(outboxes)) and time.monotonic() < deadline:
            time.sleep(0.1)  # each pump delivers each entry when it is due
        return left

    try:
        lanes = [DEFAULT_GROUP, *sorted(store.group_names(fresh=True))]
        outboxes = [
            shard for group in lanes for shard in keys.read_layout(max(layout.history()), group)
        ]
        pumps = [Pump.of(settings, shard) for shard in outboxes]
        for pump in pumps:
            pump.start()
        yield wait_until_empty
    finally:
        for pump in pumps:
            pump.stop()
        store.close()
        layout.close()


def _append_pending(
    spark: SparkSession,
    checkpoint: str,
    kept: Column,
    append: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
) -> int:
    """Run the Spark job that ``append``s the elements of the ``entries`` state whose
    keys are ``kept`` (:func:`hand_over` for the message slots, :func:`hand_over_schedules`
    for the schedule keys); how many it appended."""
    try:
        reports = entries(spark, checkpoint, kept).mapInArrow(append, schemas.DRAINED).collect()
    except (PySparkException, Py4JError) as exc:
        if NO_BATCH_YET in str(exc):  # no batch committed: the state holds nothing
            return 0
        raise SchedulerError(
            f"the drain's Spark job failed: {exc}; run delayline drain again, which "
            "appends only what it has not"
        ) from exc
    return sum(int(row["messages"]) for row in reports)
