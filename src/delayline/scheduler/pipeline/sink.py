"""The idempotent sink: messages to their topic streams (or the outbox), rejects to theirs.

Exactly once, even when Spark replays a batch after a crash: a replayed batch
has the same rows (same input range, same restored state, same batch
timestamp), and the sink orders a partition's rows the same way every time.
A marker per (query, partition) records how many rows of the current batch are
written; every chunk is written together with the marker in one Lua script, so
a replay resumes exactly after the last chunk that landed. See docs/design.md.

Never early: a message goes to its topic only once Redis's clock has reached
its ``deliver_at_ms``. One emitted ahead of its time (slots fire
``horizon_ms`` early) waits in the outbox, and the pump
(:mod:`delayline.scheduler.pump`) delivers it on time. The sink itself never
waits, so a batch is never longer than its work.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from delayline.rows import (
    Cascade,
    CountedRun,
    Drop,
    ForecastChange,
    Reject,
    Revoke,
    Run,
    SinkRow,
)
from delayline.scheduler.pipeline import packs, schemas
from delayline.scheduler.pipeline.chunks import write_once
from delayline.scheduler.pipeline.clients import store_for
from delayline.scheduler.pipeline.feeds import id_order
from delayline.scheduler.pipeline.task import current_batch_task
from delayline.scheduler.settings import SchedulerSettings
from delayline.timing import now_ms


def ordered_rows(batches: Iterable[pa.RecordBatch], rejected_at_ms: int) -> list[SinkRow]:
    """A partition's output records as sink rows, in the one order every replay uses.

    Rejects, drops, revoked runs and forecast changes first, then deliveries by
    (deliver_at_ms, inbound id). Inbound ids are unique but among a schedule's records,
    which share their version's: those of one key come in the same order every time,
    and the sort keeps it.
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
    if record.kind == packs.DELIVER:
        return record.deliver_at_ms, packs.as_deliver(record)
    if record.kind == packs.CASCADE:
        return record.deliver_at_ms, Cascade(*packs.as_deliver(record))
    if record.kind == packs.DROP:
        return 0, Drop(*packs.as_deliver(record))
    if record.kind == packs.RUN:
        return record.deliver_at_ms, Run(*packs.as_deliver(record))
    if record.kind == packs.COUNTED_RUN:
        return record.deliver_at_ms, CountedRun(*packs.as_deliver(record))
    if record.kind == packs.FORECAST:
        return 0, ForecastChange(record.topic, record.deliver_at_ms, record.attempt)
    if record.kind == packs.REVOKE:
        # Before the runs due at the same time: a replaced run loses.
        return 0, Revoke(record.id, record.deliver_at_ms, record.topic)
    # The source kept the original fields under names that cannot clash with these.
    fields = packs.decode_fields(record.body)
    fields += [
        (b"reason", record.reason.encode()),
        (b"rejected_at_ms", str(rejected_at_ms).encode()),
        (b"inbound_id", record.inbound_id.encode()),
    ]
    return 0, Reject(fields, record.reason, record.id or None)


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
        results = write_once(
            store_for(self._settings.redis_url, self._settings.fence_token),
            current_batch_task(),
            "sink",
            rows,
            journal_ttl_s=self._settings.journal_ttl_s,
            horizon_ms=self._settings.horizon_ms,
            shards=self._settings.inbound_shards,
        )
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
