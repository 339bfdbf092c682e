"""Listing the messages in the scheduler's state: a batch query over its checkpoint.

Spark's state data source reads the ``entries`` list state of the last
committed batch, one row per pack, while the streaming query goes on; the
packs are decoded and filtered in Python workers, and only the messages asked
for come back to the driver. The scan reads the whole state: seconds at 1M
pending, on the same cores as the streaming query. A thread of ``delayline
run`` (:class:`ListingServer`) serves the requests that clients leave in
Redis, one at a time, and reports the scan's progress in tasks.
"""

from __future__ import annotations

import functools
import heapq
import threading
import uuid
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from delayline.listing import ListRequest, PendingMessage
from delayline.redis.listings import Listings
from delayline.scheduler import packs
from delayline.scheduler.background import Background

#: Spark's error for a checkpoint with no committed batch: the state holds nothing yet.
NO_BATCH_YET = "STDS_COMMITTED_BATCH_UNAVAILABLE"

#: A listed send, in the order the scan sorts by: due time first.
LISTED_ARROW = pa.schema(
    [
        ("deliver_at_ms", pa.int64()),
        ("id", pa.string()),
        ("topic", pa.string()),
        ("key", pa.string()),
        ("attempt", pa.int32()),
        ("body_bytes", pa.int64()),
    ]
)
LISTED = StructType(
    [
        StructField("deliver_at_ms", LongType()),
        StructField("id", StringType()),
        StructField("topic", StringType()),
        StructField("key", StringType()),
        StructField("attempt", IntegerType()),
        StructField("body_bytes", LongType()),
    ]
)


def selected(request_json: str, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The first ``limit`` sends by due time in ``batches`` of packs (one state partition)
    that the request asks for and that no cancel in them names. Runs in a Python worker.

    A cancel waits in its message's key until the slot fires, and a key's packs
    all lie in one state partition: one task sees both.
    """
    request = ListRequest.from_json(request_json)
    sends: list[tuple[int, str, str, str, int, int]] = []
    cancelled: set[str] = set()
    for batch in batches:
        for data in batch.column(0).to_pylist():
            for record in packs.unpack(data):
                if record.kind in packs.CANCELS:
                    cancelled.add(record.id)
                elif record.kind == packs.SEND and request.selects(
                    record.topic, record.key, record.deliver_at_ms
                ):
                    sends.append((record.deliver_at_ms, record.id, record.topic, record.key,
                                  record.attempt, len(record.body)))  # fmt: skip
    first = heapq.nsmallest(request.limit, (s for s in sends if s[1] not in cancelled))
    rows = [dict(zip(LISTED_ARROW.names, send, strict=True)) for send in first]
    yield pa.RecordBatch.from_pylist(rows, schema=LISTED_ARROW)


def scan_state(
    spark: SparkSession, checkpoint: str, request: ListRequest, group: str
) -> list[PendingMessage]:
    """The first ``request.limit`` messages in the state that it asks for and that no
    cancel there names, by due time, as Spark job group ``group`` (for its progress)."""
    spark.sparkContext.setJobGroup(group, "delayline listing", interruptOnCancel=True)
    pending = (
        spark.read.format("statestore")
        .option("stateVarName", "entries")
        .load(checkpoint)
        .select("list_element.pack")
        .mapInArrow(functools.partial(selected, request.to_json()), LISTED)
        .orderBy("deliver_at_ms", "id")
        .limit(request.limit)
    )
    return [PendingMessage(**row.asDict(), where="state") for row in pending.collect()]


class ListingServer(Background):
    """Serves listing requests from Redis on a thread of its own, one at a time."""

    def __init__(self, spark: SparkSession, checkpoint: str, listings: Listings) -> None:
        self._spark = spark
        self._checkpoint = checkpoint
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
            rows = scan_state(self._spark, self._checkpoint, request, group)
        except Exception as exc:  # any failure is the listing's, not the service's
            done.set()
            if NO_BATCH_YET in str(exc):  # a first batch not committed yet: nothing held
                self._listings.finish(listing_id, [])
                return
            self._listings.fail(listing_id, f"the scan failed: {exc}"[:1000])
            return
        done.set()
        watcher.join()
        self._listings.finish(listing_id, rows)

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
