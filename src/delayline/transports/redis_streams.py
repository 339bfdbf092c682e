"""The one seam between delayline and Redis.

Everything that talks to Redis (SDK, scheduler source and sink, CLI) goes
through :class:`RedisStreams`, and redis-py's exceptions are translated here
into :class:`~delayline.errors.TransportError`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import redis
import redis.asyncio

from delayline import ids
from delayline.errors import ConnectError, TransportError
from delayline.metrics import SUM_FIELD, bucket_label
from delayline.timing import now_ms
from delayline.transports import keys, redis_scripts

#: Where ``delayline run`` serves its embedded Redis, and what Client() connects to.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6390/0"

#: How long sink and ingest markers outlive their last write (7 days, in s).
MARKER_TTL_S = 7 * 24 * 3600


Command = tuple[Any, ...]
#: An entry as redis-py returns it for a client without decode_responses.
StreamEntry = tuple[bytes, dict[bytes, bytes]]


@contextmanager
def translated_errors(action: str) -> Iterator[None]:
    """Re-raise redis-py errors as delayline errors, naming what was being done."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ConnectError(f"cannot {action}: Redis is unreachable ({exc})") from exc
    except redis.RedisError as exc:
        raise TransportError(f"cannot {action}: {exc}") from exc


class OutgoingMessage(NamedTuple):
    """A message leaving the scheduler, as the sink writes it."""

    topic: str
    id: str
    body: bytes
    key: str
    headers: str
    deliver_at_ms: int
    attempt: int


class Deliver(OutgoingMessage):
    """A due message, bound for its topic stream."""

    __slots__ = ()


class Cascade(OutgoingMessage):
    """A message handed down from a coarse slot: back to the inbound stream, marked."""

    __slots__ = ()


class Drop(NamedTuple):
    """A due message that a cancel removed."""

    id: str
    deliver_at_ms: int


class Reject(NamedTuple):
    """A refused inbound record: its original fields plus reason and times.

    ``message_id`` is set when the record carried a well-formed id, so that
    ``status`` can answer "rejected" for it.
    """

    fields: Sequence[tuple[bytes, bytes]]
    reason: str
    message_id: str | None = None


SinkRow = Deliver | Cascade | Drop | Reject


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """What one sink chunk wrote; ``written`` is the marker after it (resume there)."""

    written: int
    delivered: int
    duplicates: int
    dropped: int
    rejected: int


@dataclass(frozen=True, slots=True)
class PumpResult:
    """One pump call: how many it moved, Redis's time, and the next due time (or None)."""

    moved: int
    now_ms: int
    next_due_ms: int | None


class RedisStreams:
    """Redis Streams operations of delayline, over one connection pool."""

    def __init__(self, client: redis.Redis) -> None:
        self._redis = client
        self._last_id_within = client.register_script(redis_scripts.LAST_ID_WITHIN)
        self._count_ingest = client.register_script(redis_scripts.COUNT_INGEST)
        self._write_chunk = client.register_script(redis_scripts.WRITE_CHUNK)
        self._pump = client.register_script(redis_scripts.PUMP)

    @classmethod
    def from_url(cls, url: str = DEFAULT_REDIS_URL) -> RedisStreams:
        """A client for ``url`` (``redis://host:port/db``); it connects on first use.

        Raises ValueError for a malformed URL.
        """
        return cls(redis.Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30))

    def close(self) -> None:
        """Release the connection pool."""
        self._redis.close()

    def ping(self) -> None:
        """Raise ConnectError unless Redis answers."""
        with translated_errors("ping Redis"):
            self._redis.ping()

    def execute(
        self, commands: Sequence[Command], *, action: str, transaction: bool, errors_ok: bool
    ) -> list[Any]:
        """Run ``commands`` in one round trip (MULTI/EXEC if ``transaction``).

        With ``errors_ok``, a command's error is returned in its place instead
        of raised. Other errors raise TransportError: "cannot <action>: ...".
        """
        with translated_errors(action):
            pipe = self._redis.pipeline(transaction=transaction)
            for command in commands:
                pipe.execute_command(*command)
            return list(pipe.execute(raise_on_error=not errors_ok))

    # -- scheduler source --------------------------------------------------------------------

    def inbound_last_id_within(self, after_id: str, max_rows: int) -> str | None:
        """The id of the ``max_rows``-th inbound entry after ``after_id``, or the last one."""
        with translated_errors("read the inbound stream"):
            entry_id = self._last_id_within(keys=[keys.INBOUND], args=[after_id, max_rows])
        return entry_id.decode() if entry_id else None

    def inbound_last_id(self) -> str | None:
        """The id of the newest inbound entry, or None if the stream is empty."""
        with translated_errors("read the inbound stream"):
            newest = cast(list[StreamEntry], self._redis.xrevrange(keys.INBOUND, count=1))
        return newest[0][0].decode() if newest else None

    def read_inbound(
        self, after_id: str, upto_id: str, page_size: int = 2000
    ) -> Iterator[tuple[str, dict[bytes, bytes]]]:
        """Entries with ``after_id < id <= upto_id``, in order, fetched a page at a time."""
        cursor = "(" + after_id
        while True:
            with translated_errors("read the inbound stream"):
                page = cast(
                    list[StreamEntry],
                    self._redis.xrange(keys.INBOUND, cursor, upto_id, count=page_size),
                )
            for entry_id, fields in page:
                yield entry_id.decode(), fields
            if len(page) < page_size:
                return
            cursor = "(" + page[-1][0].decode()

    def trim_inbound(self, upto_id: str) -> None:
        """Drop inbound entries up to and including ``upto_id``: they are committed."""
        ms, seq = upto_id.split("-")
        with translated_errors("trim the inbound stream"):
            self._redis.xtrim(keys.INBOUND, minid=f"{ms}-{int(seq) + 1}", approximate=False)

    def count_ingest(
        self, query_id: str, partition: int, batch_id: int, accepted: int, cancels: int
    ) -> None:
        """Add a batch's ingest counts to the stats, once per (query, partition, batch)."""
        with translated_errors("update ingest counters"):
            self._count_ingest(
                keys=[keys.ingest_marker(query_id, partition), keys.STATS],
                args=[batch_id, accepted, cancels, MARKER_TTL_S],
            )

    # -- graceful stop ----------------------------------------------------------------------

    def request_pause(self, run_token: str, ttl_s: int) -> None:
        """Ask the run's source to hold before its next batch (for up to ``ttl_s``)."""
        with translated_errors("request a pause"):
            self._redis.set(keys.pause(run_token), "requested", ex=ttl_s)

    def hold_while_paused(self, run_token: str, poll_s: float = 0.05) -> None:
        """Block while a pause is requested, saying "holding" so the driver can stop."""
        key = keys.pause(run_token)
        with translated_errors("check for a pause"):
            while self._redis.get(key) is not None:
                self._redis.set(key, "holding", xx=True, keepttl=True)
                time.sleep(poll_s)

    def is_holding(self, run_token: str) -> bool:
        """True once the source is blocked between batches."""
        with translated_errors("check for a pause"):
            return self._redis.get(keys.pause(run_token)) == b"holding"

    # -- scheduler sink ----------------------------------------------------------------------

    def sink_progress(self, query_id: str, partition: int, batch_id: int) -> int:
        """How many rows of this batch's partition were already written (0 if none)."""
        with translated_errors("read the sink marker"):
            batch, written = cast(
                list[bytes | None],
                self._redis.hmget(keys.sink_marker(query_id, partition), ["batch", "written"]),
            )
        if batch is None or written is None or int(batch) != batch_id:
            return 0
        return int(written)

    def write_chunk(
        self,
        *,
        query_id: str,
        partition: int,
        batch_id: int,
        first_row: int,
        rows: Sequence[SinkRow],
        journal_ttl_s: int,
    ) -> ChunkResult:
        """Write rows ``[first_row, first_row + len(rows))`` of a sink partition atomically.

        Messages already due (by Redis's clock) go to their topics; the rest to
        the outbox, for :meth:`pump`.

        If another attempt already wrote past ``first_row``, nothing is written
        and the result's ``written`` says where to resume. Raises TransportError
        if Redis fails or the chunk would leave a gap.
        """
        args: list[Any] = [batch_id, first_row, len(rows), MARKER_TTL_S, journal_ttl_s]
        for row in rows:
            if isinstance(row, Deliver):
                args += [
                    "d",
                    row.topic,
                    row.id,
                    row.body,
                    row.key,
                    row.headers,
                    row.deliver_at_ms,
                    row.attempt,
                    keys.journal(row.deliver_at_ms),
                    keys.cancel_requests(row.deliver_at_ms),
                ]
            elif isinstance(row, Cascade):
                args += [
                    "c",
                    row.id,
                    row.topic,
                    row.body,
                    row.key,
                    row.headers,
                    row.deliver_at_ms,
                    row.attempt,
                ]
            elif isinstance(row, Drop):
                args += ["x", row.id, keys.journal(row.deliver_at_ms)]
            else:
                if row.message_id is None:
                    args += ["r", "", "", row.reason]
                else:
                    status_key = keys.rejected(ids.deliver_at_ms_of(row.message_id))
                    args += ["r", status_key, row.message_id, row.reason]
                args.append(len(row.fields))
                for name, value in row.fields:
                    args += [name, value]
        with translated_errors("write deliveries"):
            counts = self._write_chunk(
                keys=[
                    keys.sink_marker(query_id, partition),
                    keys.STATS,
                    keys.LATENESS,
                    keys.REJECTS,
                    keys.OUTBOX,
                    keys.OUTBOX_DATA,
                    keys.INBOUND,
                ],
                args=args,
            )
        return ChunkResult(*(int(count) for count in counts))

    def pump(self, max_messages: int, journal_ttl_s: int) -> PumpResult:
        """Deliver up to ``max_messages`` due messages from the outbox (by Redis's clock)."""
        with translated_errors("deliver from the outbox"):
            moved, now_ms, next_due = self._pump(
                keys=[keys.OUTBOX, keys.OUTBOX_DATA, keys.STATS, keys.LATENESS],
                args=[max_messages, journal_ttl_s],
            )
        next_due_ms = int(float(next_due))
        return PumpResult(int(moved), int(now_ms), None if next_due_ms < 0 else next_due_ms)

    # -- observation -------------------------------------------------------------------------

    def record_batches(self, query_id: str, batches: Sequence[tuple[int, int, int]]) -> None:
        """Record completed batches, each (batch_id, batch_at_ms, duration_ms), and beat."""
        batch_id, batch_at_ms, duration_ms = batches[-1]
        with translated_errors("record the heartbeat"):
            pipe = self._redis.pipeline(transaction=True)
            pipe.hset(
                keys.HEARTBEAT,
                mapping={
                    "query_id": query_id,
                    "batch_id": batch_id,
                    "last_batch_at_ms": batch_at_ms,
                    "last_batch_ms": duration_ms,
                    "updated_at_ms": now_ms(),
                },
            )
            for _, _, duration_ms in batches:
                pipe.hincrby(keys.BATCH_DURATION, bucket_label(duration_ms), 1)
                pipe.hincrby(keys.BATCH_DURATION, SUM_FIELD, duration_ms)
            pipe.execute()


class AsyncRedisStreams:
    """The asyncio counterpart of :meth:`RedisStreams.execute`, for AsyncClient."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self._redis = client

    @classmethod
    def from_url(cls, url: str = DEFAULT_REDIS_URL) -> AsyncRedisStreams:
        """A client for ``url``; it connects on first use. Raises ValueError for a bad URL."""
        return cls(redis.asyncio.Redis.from_url(url, socket_connect_timeout=5))

    async def execute(
        self, commands: Sequence[Command], *, action: str, transaction: bool, errors_ok: bool
    ) -> list[Any]:
        """As :meth:`RedisStreams.execute`, awaited."""
        with translated_errors(action):
            pipe = self._redis.pipeline(transaction=transaction)
            for command in commands:
                pipe.execute_command(*command)
            return list(await pipe.execute(raise_on_error=not errors_ok))

    async def close(self) -> None:
        """Release the connection pool."""
        await self._redis.aclose()
