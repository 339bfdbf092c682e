"""The idempotent sink: due messages to their topic streams, rejects to the rejects stream.

Exactly once, even when Spark replays a batch after a crash: a replayed batch
has the same rows (same input range, same restored state, same batch
timestamp), and the sink orders a partition's rows the same way every time.
A marker per (query, partition) records how many rows of the current batch are
written; every chunk is written together with the marker in one Lua script, so
a replay resumes exactly after the last chunk that landed. See docs/design.md.

Never early: rows are written only once the executor's clock has reached their
``deliver_at_ms``; slots fire a little ahead so that this wait, not the batch
latency, decides when a message goes out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from delayline import ids
from delayline.scheduler import schemas
from delayline.scheduler.settings import SchedulerSettings
from delayline.scheduler.source import id_order, streams_for
from delayline.scheduler.task import current_batch_task
from delayline.timing import now_ms
from delayline.transports.redis_streams import ChunkResult, Deliver, Drop, Reject, SinkRow

#: Rows per Lua call: big enough to amortize the round trip, small enough not to
#: block Redis for long.
MAX_CHUNK_ROWS = 500

#: Fields the sink adds to a rejected record; an original field of the same name
#: is kept under "original.<name>".
REJECT_FIELDS = (b"reason", b"rejected_at_ms", b"inbound_id")

DueRow = tuple[int, SinkRow]


def ordered_rows(batches: Iterable[pa.RecordBatch], rejected_at_ms: int) -> list[DueRow]:
    """A partition's output rows as (due ms, row), in the one order every replay uses.

    Rejects and drops come first (due 0: nothing to wait for), then deliveries by
    (deliver_at_ms, inbound id). Inbound ids are unique, so the order is total.
    """
    keyed: list[tuple[tuple[int, int, int], DueRow]] = []
    for batch in batches:
        for row in batch.to_pylist():
            inbound = id_order(row["inbound_id"])
            kind = row["kind"]
            if kind == schemas.DELIVER:
                due = row["deliver_at_ms"]
                sink_row: SinkRow = Deliver(
                    topic=row["topic"],
                    id=row["id"],
                    body=row["body"],
                    key=row["key"] or "",
                    headers=row["headers"] or "{}",
                    deliver_at_ms=due,
                    attempt=row["attempt"],
                )
            elif kind == schemas.DROP:
                due = 0
                sink_row = Drop(id=row["id"], deliver_at_ms=row["deliver_at_ms"])
            else:
                due = 0
                sink_row = _reject(row, rejected_at_ms)
            keyed.append(((due, *inbound), (due, sink_row)))
    keyed.sort(key=lambda item: item[0])
    return [due_row for _, due_row in keyed]


def _reject(row: dict[str, object], rejected_at_ms: int) -> Reject:
    raw = row["raw"] or []
    assert isinstance(raw, list)
    original = dict(zip(raw[0::2], raw[1::2], strict=True))
    fields = [
        (b"original." + name if name in REJECT_FIELDS else name, value)
        for name, value in original.items()
    ]
    reason = str(row["reason"])
    fields += [
        (b"reason", reason.encode()),
        (b"rejected_at_ms", str(rejected_at_ms).encode()),
        (b"inbound_id", str(row["inbound_id"]).encode()),
    ]
    # Only a refused *send* says anything about its id: a bad cancel does not
    # make a pending message "rejected".
    claimed_id = original.get(b"id", b"").decode("ascii", "replace")
    is_send = original.get(b"op") == b"send" and ids.is_message_id(claimed_id)
    return Reject(fields, reason, claimed_id if is_send else None)


ChunkWriter = Callable[[int, Sequence[SinkRow], int], ChunkResult]


def write_when_due(
    rows: Sequence[DueRow],
    first_row: int,
    write_chunk: ChunkWriter,
    *,
    clock: Callable[[], int] = now_ms,
    sleep: Callable[[float], None] = time.sleep,
    max_chunk_rows: int = MAX_CHUNK_ROWS,
) -> list[ChunkResult]:
    """Write ``rows[first_row:]`` in order, each chunk only once all its rows are due.

    ``write_chunk(first, rows, delivered_at_ms)`` must write atomically and
    report where the partition's marker stands after it; writing goes on from
    there. ``delivered_at_ms`` is read from ``clock`` once every row of the
    chunk is due.
    """
    results = []
    index = first_row
    while index < len(rows):
        now = clock()
        due_ms = rows[index][0]
        if due_ms > now:
            sleep((due_ms - now) / 1000)
            continue
        end = index
        while end < len(rows) and end - index < max_chunk_rows and rows[end][0] <= now:
            end += 1
        chunk = [row for _, row in rows[index:end]]
        result = write_chunk(index, chunk, max(clock(), now))
        results.append(result)
        index = result.written
    return results


@dataclass(frozen=True)
class DeliveryCommit(WriterCommitMessage):
    """What one partition wrote, reported to the driver."""

    delivered: int
    duplicates: int
    dropped: int
    rejected: int


class DeliverySink(DataSource):
    """``df.writeStream.format("delayline-sink").option("settings", json)``."""

    @classmethod
    def name(cls) -> str:
        return "delayline-sink"

    def schema(self) -> StructType:
        return schemas.OUTPUT

    def streamWriter(self, schema: StructType, overwrite: bool) -> DeliveryWriter:
        return DeliveryWriter(SchedulerSettings.from_json(self.options["settings"]))


class DeliveryWriter(DataSourceStreamArrowWriter):
    """Writes one partition of a batch, resuming after whatever a crashed attempt wrote."""

    def __init__(self, settings: SchedulerSettings) -> None:
        self._settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> DeliveryCommit:
        rows = ordered_rows(iterator, rejected_at_ms=now_ms())
        if not rows:
            return DeliveryCommit(delivered=0, duplicates=0, dropped=0, rejected=0)
        task = current_batch_task()
        streams = streams_for(self._settings.redis_url)
        journal_ttl_s = self._settings.journal_retention_ms // 1000

        def write_chunk(first: int, chunk: Sequence[SinkRow], delivered_at_ms: int) -> ChunkResult:
            return streams.write_chunk(
                query_id=task.query_id,
                partition=task.partition,
                batch_id=task.batch_id,
                first_row=first,
                rows=chunk,
                delivered_at_ms=delivered_at_ms,
                journal_ttl_s=journal_ttl_s,
            )

        done = streams.sink_progress(task.query_id, task.partition, task.batch_id)
        results = write_when_due(rows, done, write_chunk)
        return DeliveryCommit(
            delivered=sum(r.delivered for r in results),
            duplicates=sum(r.duplicates for r in results),
            dropped=sum(r.dropped for r in results),
            rejected=sum(r.rejected for r in results),
        )

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every chunk was committed to Redis as it was written."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: a retry resumes from the marker."""
