"""The idempotent sink: messages to their topic streams (or the outbox), rejects to theirs.

Exactly once, even when Spark replays a batch after a crash: a replayed batch
has the same rows (same input range, same restored state, same batch
timestamp), and the sink orders a partition's rows the same way every time.
A marker per (query, partition) records how many rows of the current batch are
written; every chunk is written together with the marker in one Lua script, so
a replay resumes exactly after the last chunk that landed. See docs/design.md.

Never early: a message goes to its topic only once Redis's clock has reached
its ``deliver_at_ms``. One emitted ahead of its time (slots fire
``fire_lead_ms`` early) waits in the outbox, and the pump
(:mod:`delayline.scheduler.pump`) delivers it on time. The sink itself never
waits, so a batch is never longer than its work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from delayline.scheduler import packs, schemas
from delayline.scheduler.settings import SchedulerSettings
from delayline.scheduler.source import id_order, streams_for
from delayline.scheduler.task import current_batch_task
from delayline.timing import now_ms
from delayline.transports.redis_streams import (
    Cascade,
    ChunkResult,
    Deliver,
    Drop,
    Reject,
    SinkRow,
)

#: Rows per Lua call: enough to amortize the round trip, few enough not to
#: block Redis for long.
MAX_CHUNK_ROWS = 500
#: Payload bytes per Lua call (64 MiB), past which a chunk ends early (it keeps at
#: least one row). 500 rejects of 4 MiB would pass Redis's 1 GiB limit on a
#: client's query buffer, and Redis would drop the connection on every retry.
MAX_CHUNK_BYTES = 64 * 1024 * 1024


def ordered_rows(batches: Iterable[pa.RecordBatch], rejected_at_ms: int) -> list[SinkRow]:
    """A partition's output records as sink rows, in the one order every replay uses.

    Rejects and drops first, then deliveries by (deliver_at_ms, inbound id).
    Inbound ids are unique, so the order is total.
    """
    keyed: list[tuple[tuple[int, int, int], SinkRow]] = []
    for batch in batches:
        for data in batch.column("pack").to_pylist():
            for record in packs.unpack(data):
                due_ms, row = _sink_row(record, rejected_at_ms)
                keyed.append(((due_ms, *id_order(record.inbound_id)), row))
    keyed.sort(key=lambda item: item[0])
    return [row for _, row in keyed]


def _sink_row(record: packs.Record, rejected_at_ms: int) -> tuple[int, SinkRow]:
    if record.kind in (packs.DELIVER, packs.CASCADE):
        row = Deliver if record.kind == packs.DELIVER else Cascade
        message = row(
            topic=record.topic,
            id=record.id,
            body=record.body,
            key=record.key,
            headers=record.headers or "{}",
            deliver_at_ms=record.deliver_at_ms,
            attempt=record.attempt,
        )
        return record.deliver_at_ms, message
    if record.kind == packs.DROP:
        return 0, Drop(id=record.id, deliver_at_ms=record.deliver_at_ms)
    # The source kept the original fields under names that cannot clash with these.
    fields = packs.decode_fields(record.body)
    fields += [
        (b"reason", record.reason.encode()),
        (b"rejected_at_ms", str(rejected_at_ms).encode()),
        (b"inbound_id", record.inbound_id.encode()),
    ]
    return 0, Reject(fields, record.reason, record.id or None)


ChunkWriter = Callable[[int, Sequence[SinkRow]], ChunkResult]


def row_bytes(row: SinkRow) -> int:
    """About how many bytes ``row`` adds to a chunk's script arguments."""
    if isinstance(row, Drop):
        return len(row.id)
    if isinstance(row, Reject):
        return sum(len(name) + len(value) for name, value in row.fields)
    return len(row.topic) + len(row.body) + len(row.key) + len(row.headers)


def write_in_chunks(
    rows: Sequence[SinkRow],
    first_row: int,
    write_chunk: ChunkWriter,
    *,
    max_chunk_rows: int = MAX_CHUNK_ROWS,
    max_chunk_bytes: int = MAX_CHUNK_BYTES,
) -> list[ChunkResult]:
    """Write ``rows[first_row:]`` in order, at most ``max_chunk_rows`` at a time.

    A chunk also ends before the row that would take it past ``max_chunk_bytes``
    (see :func:`row_bytes`), but always holds at least one row. Chunks need not
    match between attempts, since the marker counts rows. ``write_chunk(first,
    rows)`` must write atomically and report where the partition's marker stands
    after it; writing goes on from there.
    """
    results = []
    index = first_row
    while index < len(rows):
        end = index + 1
        size = row_bytes(rows[index])
        while end < min(len(rows), index + max_chunk_rows):
            size += row_bytes(rows[end])
            if size > max_chunk_bytes:
                break
            end += 1
        result = write_chunk(index, rows[index:end])
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

        def write_chunk(first: int, chunk: Sequence[SinkRow]) -> ChunkResult:
            return streams.write_chunk(
                query_id=task.query_id,
                partition=task.partition,
                batch_id=task.batch_id,
                first_row=first,
                rows=chunk,
                journal_ttl_s=journal_ttl_s,
            )

        done = streams.sink_progress(task.query_id, task.partition, task.batch_id)
        results = write_in_chunks(rows, done, write_chunk)
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
