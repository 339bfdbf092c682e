"""The scheduler source's side of Redis: the inbound stream producers append to.

The source plans batches by entry id, reads and trims them, records the
cancels it reads, counts what it ingests, wakes for the state's timers, and
holds between batches while the driver stops (the pause gate). A drain
(``delayline drain``) hands a checkpoint's pending messages back to the
default stream.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

from delayline.redis import keys, scripts
from delayline.redis.connection import RedisConnection
from delayline.schedules.ops import SCHEDULE_WEIGHT
from delayline.timing import now_ms

#: An entry as redis-py returns it for a client without decode_responses.
StreamEntry = tuple[bytes, dict[bytes, bytes]]
#: Most entries one call copies into Lua to find a batch's end (lua/last_id_within.lua):
#: a call holds Redis for its copy, a few ms for a thousand.
LAST_ID_PAGE = 1_000


class InboundStream(RedisConnection):
    """The inbound streams as the scheduler's source reads them (``stream``: which
    one, ``delayline:inbound`` unless said), and what goes with them."""

    # -- the stream ---------------------------------------------------------------------------

    def last_id_within(
        self, after_id: str, max_rows: int, *, stream: str = keys.INBOUND
    ) -> str | None:
        """The id where a batch of ``max_rows`` after ``after_id`` ends, each record
        weighing 1 and a schedule's SCHEDULE_WEIGHT (the first record is taken
        whatever it weighs), or the newest one if less follows.

        The newest may be ``after_id`` itself or older; None if the stream is empty
        or, on a backlog, if none follows ``after_id``. On a backlog each call copies
        LAST_ID_PAGE entries at most, so that the pump's calls go between them.
        """
        script = scripts.LAST_ID_WITHIN
        cursor, left = after_id, max_rows
        while True:
            entry_id, ended, spent = self._script(
                "read the inbound stream",
                script,
                script.keys(inbound=stream),
                [cursor, left, LAST_ID_PAGE, SCHEDULE_WEIGHT],
            )
            if ended:
                if entry_id is not None:
                    return cast(bytes, entry_id).decode()
                return None if cursor == after_id else cursor
            cursor, left = cast(bytes, entry_id).decode(), left - int(spent)

    def last_id(self, *, stream: str = keys.INBOUND) -> str | None:
        """The id of the newest entry, or None if the stream is empty."""
        newest = cast(
            list[StreamEntry],
            self._call(
                "read the inbound stream", lambda: self._node(stream).xrevrange(stream, count=1)
            ),
        )
        return newest[0][0].decode() if newest else None

    def read(
        self, after_id: str, upto_id: str, page_size: int = 500, *, stream: str = keys.INBOUND
    ) -> Iterator[tuple[str, dict[bytes, bytes]]]:
        """Entries with ``after_id < id <= upto_id``, in order, fetched a page at a time.

        Pages are small because a page holds Redis for its whole copy, while due
        messages wait for the pump: 500 entries take about a millisecond.
        """
        cursor = "(" + after_id
        while True:
            page = self._call(
                "read the inbound stream",
                functools.partial(self._xrange, stream, cursor, upto_id, page_size),
            )
            for entry_id, fields in page:
                yield entry_id.decode(), fields
            if len(page) < page_size:
                return
            cursor = "(" + page[-1][0].decode()

    def _xrange(self, stream: str, first: str, last: str, count: int) -> list[StreamEntry]:
        return cast(list[StreamEntry], self._node(stream).xrange(stream, first, last, count=count))

    def trim(self, upto_id: str, *, stream: str = keys.INBOUND) -> None:
        """Drop entries up to and including ``upto_id``: they are committed."""
        ms, seq = upto_id.split("-")
        self._call(
            "trim the inbound stream",
            lambda: self._node(stream).xtrim(
                stream, minid=f"{ms}-{int(seq) + 1}", approximate=False
            ),
        )

    # -- what the source records --------------------------------------------------------------

    def record_cancel_requests(
        self, cancels: Sequence[tuple[str, int, str]], retention_ms: int, shards: int = 1
    ) -> None:
        """Record a cancel request for each (id, deliver_at_ms, new id or ""), in its
        message's shard of ``shards``, as ``Client.cancel`` and ``Client.reschedule`` do.

        The outbox pump drops a message that has one, and the forecast no longer
        counts it. A request already recorded keeps its time, so a replayed batch
        changes nothing.
        """
        for shard, shard_cancels in keys.by_shard(cancels, shards, lambda c: c[0]).items():
            args = scripts.cancel_args(now_ms(), retention_ms, shard_cancels)
            self._script("record cancel requests", scripts.CANCEL, scripts.CANCEL.keys(shard), args)

    def due_wakeup(self, after_ms: int, upto_ms: int) -> bool:
        """True if a state timer is due in ``(after_ms, upto_ms]``.

        It forgets those up to ``after_ms``: a batch started after ``after_ms``
        fired every timer due by then.
        """

        def check() -> list[Any]:
            pipe = self._node(keys.WAKEUPS).pipeline(transaction=False)
            pipe.zremrangebyscore(keys.WAKEUPS, "-inf", after_ms)
            pipe.zrangebyscore(keys.WAKEUPS, f"({after_ms}", upto_ms, start=0, num=1)
            return list(pipe.execute())

        return bool(self._call("read the scheduler's wakeups", check)[1])

    def add_wakeups(self, times_ms: Iterable[int]) -> None:
        """Record when state timers will be due (epoch ms), so the source wakes for them."""
        mapping = {str(at_ms): at_ms for at_ms in times_ms}
        if mapping:
            self._call(
                "record the scheduler's wakeups",
                lambda: self._node(keys.WAKEUPS).zadd(keys.WAKEUPS, mapping),
            )

    def mark_settled(self, at_ms: int) -> None:
        """Record that the scheduler had nothing to do at ``at_ms``: no input, no timer due."""
        self._call(
            "record the heartbeat",
            lambda: self._node(keys.HEARTBEAT).hset(
                keys.HEARTBEAT, mapping={"settled_at_ms": at_ms, keys.BEAT_FIELD: now_ms()}
            ),
        )

    def count_ingest(
        self,
        query_id: str,
        partition: int,
        batch_id: int,
        accepted: Mapping[tuple[int, str], int],
        cancels: int,
        shard: keys.ShardKeys = keys.UNSHARDED,
    ) -> None:
        """Add a batch's ingest counts to ``shard``'s stats and forecast (a reader adds
        up every shard's), once per (query, partition, batch). ``accepted`` counts the
        sends per (due second, topic); the second is given as epoch ms within it."""
        script = scripts.COUNT_INGEST
        script_keys = script.keys(shard, ingest_marker=shard.ingest_marker(query_id, partition))
        args = scripts.ingest_args(batch_id, accepted, cancels)
        self._script("update ingest counters", script, script_keys, args)

    # -- the pause gate: a graceful stop ------------------------------------------------------

    def request_pause(self, run_token: str, ttl_s: int) -> None:
        """Ask the run's source to hold before its next batch (for up to ``ttl_s``)."""
        self._call(
            "request a pause",
            lambda: self._node(keys.pause(run_token)).set(
                keys.pause(run_token), "requested", ex=ttl_s
            ),
        )

    def hold_while_paused(self, run_token: str, poll_s: float = 0.05) -> None:
        """Block while a pause is requested, saying "holding" so the driver can stop."""
        key = keys.pause(run_token)
        while self._call("check for a pause", lambda: self._node(key).get(key)) is not None:
            self._call(
                "report holding", lambda: self._node(key).set(key, "holding", xx=True, keepttl=True)
            )
            time.sleep(poll_s)

    def is_holding(self, run_token: str) -> bool:
        """True once the source is blocked between batches."""
        state = self._call(
            "check for a pause",
            lambda: self._node(keys.pause(run_token)).get(keys.pause(run_token)),
        )
        return state == b"holding"

    # -- a drain: an old checkpoint's messages handed to a new one ---------------------------

    def forget_wakeups(self) -> None:
        """Forget a stopped scheduler's timer wakeups: the next checkpoint has timers of
        its own."""
        self._call(
            "forget the scheduler's wakeups", lambda: self._node(keys.WAKEUPS).delete(keys.WAKEUPS)
        )

    def drained_chunks(self, marker: str, partition: int) -> int:
        """How many chunks of state partition ``partition`` the drain ``marker`` appended."""
        done = self._call(
            "read the drain's marker", lambda: self._node(marker).hget(marker, partition)
        )
        return int(done or 0)

    def append_drained(
        self, marker: str, partition: int, chunk: int, records: Sequence[Mapping[bytes, bytes]]
    ) -> None:
        """Append ``records`` to the default stream and mark chunk ``chunk`` of
        ``partition`` appended, in one transaction, unless the marker says it is: a
        drain run again, or a call retried after its reply was lost, appends nothing twice."""

        def append() -> None:
            # The marker shares the default stream's slot (keys.drain_marker).
            with self._node(keys.INBOUND).pipeline(transaction=True) as pipe:
                pipe.watch(marker)
                if int(pipe.hget(marker, str(partition)) or 0) > chunk:
                    return
                pipe.multi()
                for record in records:
                    pipe.xadd(keys.INBOUND, dict(record))  # type: ignore[arg-type]
                pipe.hset(marker, str(partition), chunk + 1)
                pipe.expire(marker, keys.MARKER_TTL_S)
                pipe.execute()

        self._call("append drained messages", append)
