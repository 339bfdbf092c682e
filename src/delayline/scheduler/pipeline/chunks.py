"""Resumable, exactly-once writes of a task's rows to Redis, a chunk at a time.

A stage (the sink, or the source's hand-off to the outbox) writes the rows of
one (query, partition, batch) in a fixed order. Every chunk is written together
with a marker of how many rows are done, in one Lua script, so a retried or
replayed task resumes exactly after the last chunk that landed. With Redis
shards, each shard's rows (in the same order) have a marker of their own in
that shard. See docs/design.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from delayline.chunking import chunk_end
from delayline.redis import keys
from delayline.redis.store import ChunkResult, DeliveryStore
from delayline.rows import ForecastChange, OutgoingMessage, Reject, Revoke, SinkRow
from delayline.scheduler.pipeline.lanes import refuse_unknown_groups, row_group
from delayline.scheduler.pipeline.task import BatchTask

#: Rows per Lua call: enough to amortize the round trip, few enough not to hold
#: Redis (and the pump's due messages) for more than about a millisecond.
MAX_CHUNK_ROWS = 200
#: Payload bytes per Lua call (64 MiB), past which a chunk ends early (it keeps at
#: least one row). A chunk of large rejects could otherwise pass Redis's 1 GiB
#: limit on a client's query buffer, and Redis would drop the connection on
#: every retry.
MAX_CHUNK_BYTES = 64 * 1024 * 1024

ChunkWriter = Callable[[int, Sequence[SinkRow]], ChunkResult]


def row_bytes(row: SinkRow) -> int:
    """About how many bytes ``row`` adds to a chunk's script arguments."""
    if isinstance(row, Reject):
        return sum(len(name) + len(value) for name, value in row.fields)
    if isinstance(row, Revoke):
        return len(row.id) + len(row.topic)
    if isinstance(row, ForecastChange):
        return len(row.topic) + 20
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
        end = chunk_end(
            rows, index, max_items=max_chunk_rows, max_bytes=max_chunk_bytes, size_of=row_bytes
        )
        result = write_chunk(index, rows[index:end])
        results.append(result)
        index = result.written
    return results


def message_id_of(row: SinkRow) -> str | None:
    """The id of the message a sink row is about; None for a reject without one and for
    a forecast change (the forecast is read from every shard)."""
    if isinstance(row, ForecastChange):
        return None
    return row.id if isinstance(row, OutgoingMessage | Revoke) else row.message_id


def write_once(
    store: DeliveryStore,
    task: BatchTask,
    stage: str,
    rows: Sequence[SinkRow],
    *,
    journal_ttl_s: int,
    horizon_ms: int,
    shards: int,
) -> list[ChunkResult]:
    """Write ``rows`` of ``task`` for ``stage`` to their ``shards`` Redis shards, each in
    its group's lane (lanes.py), resuming after what an earlier attempt wrote.

    Every attempt of a task must pass the same rows in the same order.
    """
    results: list[ChunkResult] = []
    rows = refuse_unknown_groups(rows, store.group_names)
    # A reject without a well-formed id goes to the first shard; each row to its
    # group's lane there.
    lanes = keys.by_shard(rows, shards, message_id_of, row_group)
    for shard_keys, shard_rows in lanes.items():

        def write_chunk(
            first: int, chunk: Sequence[SinkRow], shard_keys: keys.ShardKeys = shard_keys
        ) -> ChunkResult:
            return store.write_chunk(
                shard=shard_keys,
                query_id=task.query_id,
                partition=task.partition,
                batch_id=task.batch_id,
                first_row=first,
                rows=chunk,
                journal_ttl_s=journal_ttl_s,
                horizon_ms=horizon_ms,
                stage=stage,
            )

        done = store.sink_progress(
            task.query_id, task.partition, task.batch_id, stage=stage, shard=shard_keys
        )
        results += write_in_chunks(shard_rows, done, write_chunk)
        if shards > 1 and store.target_of(shard_keys) is None:
            # A sharded delivery's due messages wait in the shard's ready stream:
            # write them to their topics now rather than at the pump's next call.
            # (Topics outside Redis are the pump's to write: the script rang it.)
            while store.flush_ready(shard_keys, journal_ttl_s):
                pass
    return results
