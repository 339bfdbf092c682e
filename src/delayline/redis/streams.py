"""The one seam between delayline and Redis.

Everything that talks to Redis (SDK, scheduler source and sink, CLI) goes
through :class:`RedisStreams` (or :class:`AsyncRedisStreams`), whose calls
translate redis-py's exceptions into delayline's (:mod:`delayline.redis.connection`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import redis
import redis.asyncio
import redis.asyncio.retry
from redis.backoff import NoBackoff

from delayline import ids
from delayline.defaults import DEFAULT_REDIS_URL
from delayline.metrics import SUM_FIELD, bucket_label
from delayline.redis import keys, scripts
from delayline.redis.connection import (
    DEFAULT_PATIENCE_MS,
    no_retries,
    translated_errors,
    with_patience,
    with_patience_async,
)
from delayline.rows import Cascade, Deliver, Drop, SinkRow
from delayline.timing import now_ms

#: How long sink and ingest markers outlive their last write (7 days, in s).
MARKER_TTL_S = 7 * 24 * 3600

T = TypeVar("T")

Command = tuple[Any, ...]
#: An entry as redis-py returns it for a client without decode_responses.
StreamEntry = tuple[bytes, dict[bytes, bytes]]


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

    def __init__(
        self, client: redis.Redis, *, patience_ms: int | None = DEFAULT_PATIENCE_MS
    ) -> None:
        self._redis = client
        self._patience_ms = patience_ms
        self._last_id_within = client.register_script(scripts.LAST_ID_WITHIN)
        self._count_ingest = client.register_script(scripts.COUNT_INGEST)
        self._write_chunk = client.register_script(scripts.WRITE_CHUNK)
        self._pump = client.register_script(scripts.PUMP)

    @classmethod
    def from_url(
        cls, url: str = DEFAULT_REDIS_URL, *, patience_ms: int | None = DEFAULT_PATIENCE_MS
    ) -> RedisStreams:
        """A client for ``url`` (``redis://host:port/db``); it connects on first use.

        Every call retries for up to ``patience_ms`` while Redis cannot serve
        (``None``: until it can). Raises ValueError for a malformed URL.
        """
        client = redis.Redis.from_url(
            url, socket_connect_timeout=5, health_check_interval=30, retry=no_retries()
        )
        return cls(client, patience_ms=patience_ms)

    def _call(self, action: str, call: Callable[[], T]) -> T:
        return with_patience(action, call, self._patience_ms)

    def close(self) -> None:
        """Release the connection pool."""
        self._redis.close()

    def ping(self) -> None:
        """Raise ConnectError unless Redis answers (within this client's patience)."""
        self._call("ping Redis", self._redis.ping)

    def loading_percent(self) -> float | None:
        """How much of its data a loading Redis has read (0-100), or None once it serves.

        Redis answers INFO while it loads its AOF, and nothing else. Raises
        ConnectError if it is unreachable.
        """
        with translated_errors("ask Redis for its loading progress"):
            info: Any = self._redis.info("persistence")
        if not int(info.get("loading", 0)):
            return None
        return float(info.get("loading_loaded_perc", 0.0))

    def execute(
        self, commands: Sequence[Command], *, action: str, transaction: bool, errors_ok: bool
    ) -> list[Any]:
        """Run ``commands`` in one round trip (MULTI/EXEC if ``transaction``).

        With ``errors_ok``, a command's error is returned in its place instead
        of raised. Other errors raise TransportError: "cannot <action>: ...".
        """

        def run() -> list[Any]:
            pipe = self._redis.pipeline(transaction=transaction)
            for command in commands:
                pipe.execute_command(*command)
            return list(pipe.execute(raise_on_error=not errors_ok))

        return self._call(action, run)

    # -- scheduler source --------------------------------------------------------------------

    def inbound_last_id_within(self, after_id: str, max_rows: int) -> str | None:
        """The id of the ``max_rows``-th inbound entry after ``after_id``, or the newest one.

        The newest may be ``after_id`` itself or older; None if the stream is empty.
        """
        entry_id = self._call(
            "read the inbound stream",
            lambda: self._last_id_within(keys=[keys.INBOUND], args=[after_id, max_rows]),
        )
        return entry_id.decode() if entry_id else None

    def inbound_last_id(self) -> str | None:
        """The id of the newest inbound entry, or None if the stream is empty."""
        newest = cast(
            list[StreamEntry],
            self._call(
                "read the inbound stream", lambda: self._redis.xrevrange(keys.INBOUND, count=1)
            ),
        )
        return newest[0][0].decode() if newest else None

    def read_inbound(
        self, after_id: str, upto_id: str, page_size: int = 500
    ) -> Iterator[tuple[str, dict[bytes, bytes]]]:
        """Entries with ``after_id < id <= upto_id``, in order, fetched a page at a time.

        Pages are small because a page holds Redis for its whole copy, while due
        messages wait for the pump: 500 entries take about a millisecond.
        """
        cursor = "(" + after_id
        while True:
            page = self._call(
                "read the inbound stream",
                functools.partial(self._xrange_inbound, cursor, upto_id, page_size),
            )
            for entry_id, fields in page:
                yield entry_id.decode(), fields
            if len(page) < page_size:
                return
            cursor = "(" + page[-1][0].decode()

    def _xrange_inbound(self, first: str, last: str, count: int) -> list[StreamEntry]:
        return cast(list[StreamEntry], self._redis.xrange(keys.INBOUND, first, last, count=count))

    def trim_inbound(self, upto_id: str) -> None:
        """Drop inbound entries up to and including ``upto_id``: they are committed."""
        ms, seq = upto_id.split("-")
        self._call(
            "trim the inbound stream",
            lambda: self._redis.xtrim(
                keys.INBOUND, minid=f"{ms}-{int(seq) + 1}", approximate=False
            ),
        )

    def record_cancel_requests(self, cancels: Sequence[tuple[str, int]], retention_ms: int) -> None:
        """Record a cancel request for each (id, deliver_at_ms), as ``Client.cancel`` does.

        The outbox pump drops a message that has one. A request already
        recorded keeps its time, so a replayed batch changes nothing.
        """
        if not cancels:
            return
        now = now_ms()

        def record() -> None:
            pipe = self._redis.pipeline(transaction=False)
            for message_id, deliver_at_ms in cancels:
                requests = keys.cancel_requests(deliver_at_ms)
                pipe.hsetnx(requests, message_id, now)
                pipe.expireat(requests, (keys.bucket_end_ms(deliver_at_ms) + retention_ms) // 1000)
            pipe.execute()

        self._call("record cancel requests", record)

    def due_wakeup(self, after_ms: int, upto_ms: int) -> bool:
        """True if a state timer is due in ``(after_ms, upto_ms]``.

        It forgets those up to ``after_ms``: a batch started after ``after_ms``
        fired every timer due by then.
        """

        def check() -> list[Any]:
            pipe = self._redis.pipeline(transaction=False)
            pipe.zremrangebyscore(keys.WAKEUPS, "-inf", after_ms)
            pipe.zrangebyscore(keys.WAKEUPS, f"({after_ms}", upto_ms, start=0, num=1)
            return list(pipe.execute())

        return bool(self._call("read the scheduler's wakeups", check)[1])

    def add_wakeups(self, times_ms: Iterable[int]) -> None:
        """Record when state timers will be due (epoch ms), so the source wakes for them."""
        mapping = {str(at_ms): at_ms for at_ms in times_ms}
        if mapping:
            self._call(
                "record the scheduler's wakeups", lambda: self._redis.zadd(keys.WAKEUPS, mapping)
            )

    def mark_settled(self, at_ms: int) -> None:
        """Record that the scheduler had nothing to do at ``at_ms``: no input, no timer due."""
        self._call(
            "record the heartbeat",
            lambda: self._redis.hset(
                keys.HEARTBEAT, mapping={"settled_at_ms": at_ms, "updated_at_ms": now_ms()}
            ),
        )

    def publish_horizon(self, horizon_ms: int) -> None:
        """Tell producers the scheduler's horizon: sends due within it go to the outbox."""
        self._call(
            "publish the horizon",
            lambda: self._redis.hset(keys.CONFIG, "horizon_ms", horizon_ms),
        )

    def count_ingest(
        self, query_id: str, partition: int, batch_id: int, accepted: int, cancels: int
    ) -> None:
        """Add a batch's ingest counts to the stats, once per (query, partition, batch)."""
        self._call(
            "update ingest counters",
            lambda: self._count_ingest(
                keys=[keys.ingest_marker(query_id, partition), keys.STATS],
                args=[batch_id, accepted, cancels, MARKER_TTL_S],
            ),
        )

    # -- graceful stop ----------------------------------------------------------------------

    def request_pause(self, run_token: str, ttl_s: int) -> None:
        """Ask the run's source to hold before its next batch (for up to ``ttl_s``)."""
        self._call(
            "request a pause", lambda: self._redis.set(keys.pause(run_token), "requested", ex=ttl_s)
        )

    def hold_while_paused(self, run_token: str, poll_s: float = 0.05) -> None:
        """Block while a pause is requested, saying "holding" so the driver can stop."""
        key = keys.pause(run_token)
        while self._call("check for a pause", lambda: self._redis.get(key)) is not None:
            self._call(
                "report holding", lambda: self._redis.set(key, "holding", xx=True, keepttl=True)
            )
            time.sleep(poll_s)

    def is_holding(self, run_token: str) -> bool:
        """True once the source is blocked between batches."""
        state = self._call("check for a pause", lambda: self._redis.get(keys.pause(run_token)))
        return state == b"holding"

    # -- scheduler sink ----------------------------------------------------------------------

    def sink_progress(
        self, query_id: str, partition: int, batch_id: int, *, stage: str = "sink"
    ) -> int:
        """How many rows of this batch's partition ``stage`` already wrote (0 if none)."""
        batch, written = cast(
            list[bytes | None],
            self._call(
                "read the sink marker",
                lambda: self._redis.hmget(
                    keys.sink_marker(query_id, partition, stage), ["batch", "written"]
                ),
            ),
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
        stage: str = "sink",
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
        chunk_keys = [
            keys.sink_marker(query_id, partition, stage),
            keys.STATS,
            keys.LATENESS,
            keys.REJECTS,
            keys.OUTBOX,
            keys.OUTBOX_DATA,
            keys.INBOUND,
            keys.OUTBOX_BELL,
        ]
        # Safe to retry: the marker makes a chunk that did land write nothing again.
        counts = self._call(
            "write deliveries", lambda: self._write_chunk(keys=chunk_keys, args=args)
        )
        return ChunkResult(*(int(count) for count in counts))

    def pump(self, max_messages: int, journal_ttl_s: int) -> PumpResult:
        """Deliver up to ``max_messages`` due messages from the outbox (by Redis's clock)."""
        moved, now_ms, next_due = self._call(
            "deliver from the outbox",
            lambda: self._pump(
                keys=[keys.OUTBOX, keys.OUTBOX_DATA, keys.STATS, keys.LATENESS, keys.REJECTS],
                args=[max_messages, journal_ttl_s],
            ),
        )
        next_due_ms = int(float(next_due))
        return PumpResult(int(moved), int(now_ms), None if next_due_ms < 0 else next_due_ms)

    def wait_for_bell(self, timeout_s: float) -> None:
        """Block until an entry due soon enters the outbox, or ``timeout_s`` passes.

        Redis times a blocked call out on its own cron (every 100 ms by default),
        so it may return that much later than asked.
        """
        self._call("wait for the outbox", lambda: self._redis.blpop([keys.OUTBOX_BELL], timeout_s))

    # -- observation -------------------------------------------------------------------------

    def record_batches(self, query_id: str, batches: Sequence[tuple[int, int, int]]) -> None:
        """Record completed batches, each (batch_id, batch_at_ms, duration_ms), and beat."""
        batch_id, batch_at_ms, duration_ms = batches[-1]

        def beat() -> None:
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
            for _, _, each_ms in batches:
                pipe.hincrby(keys.BATCH_DURATION, bucket_label(each_ms), 1)
                pipe.hincrby(keys.BATCH_DURATION, SUM_FIELD, each_ms)
            pipe.execute()

        self._call("record the heartbeat", beat)


class AsyncRedisStreams:
    """The asyncio counterpart of :meth:`RedisStreams.execute`, for AsyncClient."""

    def __init__(
        self, client: redis.asyncio.Redis, *, patience_ms: int | None = DEFAULT_PATIENCE_MS
    ) -> None:
        self._redis = client
        self._patience_ms = patience_ms

    @classmethod
    def from_url(
        cls, url: str = DEFAULT_REDIS_URL, *, patience_ms: int | None = DEFAULT_PATIENCE_MS
    ) -> AsyncRedisStreams:
        """As :meth:`RedisStreams.from_url`, for asyncio."""
        client = redis.asyncio.Redis.from_url(
            url, socket_connect_timeout=5, retry=redis.asyncio.retry.Retry(NoBackoff(), 0)
        )
        return cls(client, patience_ms=patience_ms)

    async def execute(
        self, commands: Sequence[Command], *, action: str, transaction: bool, errors_ok: bool
    ) -> list[Any]:
        """As :meth:`RedisStreams.execute`, awaited."""

        async def run() -> list[Any]:
            pipe = self._redis.pipeline(transaction=transaction)
            for command in commands:
                pipe.execute_command(*command)
            return list(await pipe.execute(raise_on_error=not errors_ok))

        return await with_patience_async(action, run, self._patience_ms)

    async def close(self) -> None:
        """Release the connection pool."""
        await self._redis.aclose()
