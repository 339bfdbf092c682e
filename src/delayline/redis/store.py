"""The delivery side of Redis: the sink's writes, the outbox and its pump.

The sink (and the source's hand-off of near sends) writes chunks of rows,
each with its marker, to the topics or the outbox; the pump moves what is due
from the outbox to the topics. The driver also tells producers the outbox's
reach (the horizon) and records the batches it completes (the heartbeat).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

import redis

from delayline.errors import FencedError, TransportError
from delayline.metrics import SUM_FIELD, bucket_label
from delayline.redis import keys, scripts
from delayline.redis.commands import Command
from delayline.redis.connection import DEFAULT_PATIENCE_MS, MIN_BLOCK_S, RedisConnection
from delayline.redis.lua_source import FENCED_MARK
from delayline.redis.routing import Router
from delayline.redis.scripts import ChunkResult, PumpResult, Settled
from delayline.rows import ReadyEntry, SinkRow
from delayline.timing import HORIZON_MS, now_ms

# What the store's methods take and return; declared with their scripts.
__all__ = ["ChunkResult", "DeliveryStore", "PumpResult", "Settled"]


#: How long a store goes by the groups it read (s).
GROUPS_FRESH_S = 5.0


class DeliveryStore(RedisConnection):
    """Where the scheduler puts messages on their way out: topics, outbox, status records.

    Its writes through the shard scripts (:meth:`write_chunk`, :meth:`pump`,
    :meth:`settle_ready`) carry :attr:`fence_token`, and raise FencedError once a
    scheduler with a higher token has taken the shard over (redis/lease.py).
    """

    def __init__(self, router: Router, *, patience_ms: int | None = DEFAULT_PATIENCE_MS) -> None:
        super().__init__(router, patience_ms=patience_ms)
        #: The lease's fencing token of the scheduler that writes through this store;
        #: 0 (no lease) passes only while no scheduler has taken the lease.
        self.fence_token = 0
        self._groups: frozenset[str] = frozenset()
        self._groups_read_at = -GROUPS_FRESH_S

    def record_lane(self, group: str) -> None:
        """Record that ``group``'s lane is pumped (keys.GROUP_LANES). Raises TransportError."""
        self._call(
            "record a group's lane",
            lambda: self._node(keys.GROUP_LANES).hset(keys.GROUP_LANES, group, now_ms()),
        )

    def group_names(self, fresh: bool = False) -> frozenset[str]:
        """The groups besides the default one, as read within GROUPS_FRESH_S (``fresh``:
        read now). Groups are never taken away, so an old list lacks only new ones.
        Raises TransportError."""
        if fresh or time.monotonic() - self._groups_read_at > GROUPS_FRESH_S:
            names = self._call(
                "read the groups", lambda: self._node(keys.GROUPS).hkeys(keys.GROUPS)
            )
            self._groups = frozenset(name.decode() for name in cast(list[bytes], names))
            self._groups_read_at = time.monotonic()
        return self._groups

    def _fenced_script(
        self,
        action: str,
        script: scripts.Script,
        script_keys: Sequence[str],
        args: Sequence[Any],
        calls: int = 1,
    ) -> list[Any]:
        """:meth:`_script_calls`, raising FencedError if the shard's fence is above the
        token (lua/fence.lua): the calls wrote nothing."""
        try:
            return self._script_calls(action, script, script_keys, args, calls)
        except TransportError as exc:
            cause = exc.__cause__
            # A pipelined call's error is prefixed with the command redis-py sent.
            if isinstance(cause, redis.ResponseError) and FENCED_MARK.decode() in str(cause):
                raise FencedError(f"cannot {action}: {cause}") from exc
            raise

    def check_fence(self, shard: keys.ShardKeys = keys.UNSHARDED) -> None:
        """Raise FencedError if ``shard``'s fence stands above :attr:`fence_token`: a
        newer scheduler took over (every takeover raises the unsharded layout's fence
        too). The source asks before it plans a batch, so that a scheduler that lost
        the lease adds no batch to the checkpoint. Raises TransportError."""
        fence = self._call("read the fence", lambda: self._node(shard.fence).get(shard.fence))
        if int(cast(bytes | None, fence) or 0) > self.fence_token:
            raise FencedError(
                f"{FENCED_MARK.decode()} the fence of {shard.namespace} stands above this "
                f"scheduler's lease token {self.fence_token}: another scheduler took over"
            )

    # -- the sink -----------------------------------------------------------------------------

    def sink_progress(
        self,
        query_id: str,
        partition: int,
        batch_id: int,
        *,
        stage: str = "sink",
        shard: keys.ShardKeys = keys.UNSHARDED,
    ) -> int:
        """How many of ``shard``'s rows of this batch's partition ``stage`` already
        wrote (0 if none)."""
        marker = shard.sink_marker(query_id, partition, stage)
        batch, written = cast(
            list[bytes | None],
            self._call(
                "read the sink marker",
                lambda: self._node(marker).hmget(marker, ["batch", "written"]),
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
        shard: keys.ShardKeys = keys.UNSHARDED,
        horizon_ms: int = HORIZON_MS,
    ) -> ChunkResult:
        """Write rows ``[first_row, first_row + len(rows))`` of ``shard``'s part of a sink
        partition atomically; every row's message must be of that shard.

        Messages already due (by Redis's clock) go to their topics; the rest to
        the outbox, for :meth:`pump`. A reschedule's new message due within
        ``horizon_ms`` goes to the outbox too, and a later one to the inbound stream.

        If another attempt already wrote past ``first_row``, nothing is written
        and the result's ``written`` says where to resume. Raises TransportError
        if Redis fails or the chunk would leave a gap, FencedError if another
        scheduler took the shard over.
        """
        args = scripts.chunk_args(
            batch_id,
            first_row,
            rows,
            journal_ttl_s=journal_ttl_s,
            horizon_ms=horizon_ms,
            shard=shard,
            fence_token=self.fence_token,
        )
        marker = shard.sink_marker(query_id, partition, stage)
        # Safe to retry: the marker makes a chunk that did land write nothing again.
        [counts] = self._fenced_script(
            "write deliveries",
            scripts.WRITE_CHUNK,
            scripts.WRITE_CHUNK.keys(shard, marker=marker),
            args,
        )
        return scripts.chunk_result(counts)

    # -- the outbox ---------------------------------------------------------------------------

    def pump(
        self,
        max_messages: int,
        journal_ttl_s: int,
        *,
        shard: keys.ShardKeys = keys.UNSHARDED,
        horizon_ms: int = HORIZON_MS,
        calls: int = 1,
    ) -> PumpResult:
        """Deliver up to ``max_messages`` due messages from ``shard``'s outbox (by Redis's
        clock), ``calls`` times in one round trip: a herd that needs several calls then
        waits for none of the pump's round trips between them. A reschedule's new
        message due within ``horizon_ms`` goes back to the outbox, and a later one to
        the inbound stream. Raises TransportError, or FencedError if another scheduler
        took the shard over (the calls then wrote nothing)."""
        replies = self._fenced_script(
            "deliver from the outbox",
            scripts.PUMP,
            scripts.PUMP.keys(shard),
            [max_messages, journal_ttl_s, horizon_ms, self.fence_token],
            calls,
        )
        return scripts.pump_result(replies)

    def flush_ready(
        self, shard: keys.ShardKeys, journal_ttl_s: int, max_entries: int = 1_000
    ) -> int:
        """Write up to ``max_entries`` of ``shard``'s ready stream to their Redis topic
        streams, then count them and take them off; how many it took (0: the stream is
        empty).

        The two steps of a sharded delivery after the shard's own (lua/topic_writes.lua):
        one script call in each topic's slot, then one in the shard's. Safe to repeat
        and to run in several processes: a topic stream takes an id once, and an entry
        is counted once. Topics outside Redis (Kafka's) are written by their own
        flusher (kafka/flushing.py) with :meth:`read_ready` and :meth:`settle_ready`.
        Raises TransportError if Redis fails; nothing is then settled.
        """
        entries = self.read_ready(shard, max_entries)
        if not entries:
            return 0
        errors = self._deliver_to_streams(entries, journal_ttl_s)
        self.settle_ready(
            shard,
            journal_ttl_s,
            [(entry, errors.get(entry[0], b"").decode()) for entry in entries],
        )
        return len(entries)

    def read_ready(
        self, shard: keys.ShardKeys, max_entries: int, after: bytes | None = None
    ) -> list[ReadyEntry]:
        """Up to ``max_entries`` of ``shard``'s ready entries, oldest first, from the
        start or only those after the entry id ``after``. Raises TransportError."""
        start = b"-" if after is None else b"(" + after
        return cast(
            list[ReadyEntry],
            self._call(
                "read the ready stream",
                lambda: self._node(shard.ready).xrange(shard.ready, min=start, count=max_entries),
            ),
        )

    def settle_ready(
        self, shard: keys.ShardKeys, journal_ttl_s: int, settled: Sequence[Settled]
    ) -> None:
        """Count each of ``settled`` as delivered, or keep it as a reject with its reason,
        and take it off ``shard``'s ready stream (lua/settle_ready.lua). An entry settled
        already is skipped, so a repeat is harmless. Raises TransportError, or
        FencedError if another scheduler took the shard over."""
        if not settled:
            return
        args = scripts.settle_args(journal_ttl_s, settled, self.fence_token)
        self._fenced_script(
            "settle delivered messages",
            scripts.SETTLE_READY,
            scripts.SETTLE_READY.keys(shard),
            args,
        )

    def _deliver_to_streams(
        self, entries: Sequence[ReadyEntry], journal_ttl_s: int
    ) -> dict[bytes, bytes]:
        """Write ready ``entries`` to their topic streams (lua/deliver_ready.lua, a call per
        topic); the error of each one a topic could not take."""
        by_topic: dict[bytes, list[ReadyEntry]] = {}
        for entry in entries:
            by_topic.setdefault(entry[1][b"topic"], []).append(entry)
        errors: dict[bytes, bytes] = {}
        for topic, topic_entries in by_topic.items():
            name = topic.decode()
            script_keys = scripts.DELIVER_READY.keys(topic=name, written=keys.topic_written(name))
            args = scripts.deliver_ready_args(journal_ttl_s, topic_entries)
            reply = self._script("deliver to a topic", scripts.DELIVER_READY, script_keys, args)
            errors.update(scripts.deliver_ready_failed(reply))
        return errors

    def record_blocked(
        self, shard: keys.ShardKeys, blocked_ms: Mapping[str, int], *, ttl_ms: int
    ) -> None:
        """Publish ``shard``'s topics whose messages wait, each with how long (ms), in
        place of the last list; it lapses after ``ttl_ms``. Raises TransportError."""

        def write() -> None:
            pipe = self._node(shard.blocked).pipeline(transaction=True)
            pipe.delete(shard.blocked)
            if blocked_ms:
                pipe.hset(shard.blocked, mapping=cast(Mapping[Any, Any], blocked_ms))
                pipe.pexpire(shard.blocked, ttl_ms)
            pipe.execute()

        self._call("publish the topics that wait", write)

    def target_of(self, shard: keys.ShardKeys) -> str | None:
        """Where ``shard``'s topics are (:attr:`keys.ShardKeys.target`); None: Redis."""
        found = cast(
            bytes | None,
            self._call("read the target", lambda: self._node(shard.target).get(shard.target)),
        )
        return None if found is None else found.decode()

    def set_target(self, layout: Sequence[keys.ShardKeys], target: str | None) -> None:
        """Deliver ``layout``'s messages to ``target`` (``kafka:<brokers>``), or to Redis
        streams if None, from now on (each shard's at once, on a cluster)."""
        commands: list[Command] = [
            ("DEL", shard.target) if target is None else ("SET", shard.target, target)
            for shard in layout
        ]
        self.execute(commands, action="record the target", transaction=True, errors_ok=False)

    def wait_for_bell(self, timeout_s: float, *, shard: keys.ShardKeys = keys.UNSHARDED) -> None:
        """Block until an entry due soon enters ``shard``'s outbox, or ``timeout_s`` passes.

        Redis times a blocked call out on its own cron (every 100 ms by default),
        so it may return that much later than asked.
        """
        timeout_s = max(timeout_s, MIN_BLOCK_S)
        bell = shard.outbox_bell
        self._call("wait for the outbox", lambda: self._node(bell).blpop([bell], timeout_s))

    def waiting(self, layout: Sequence[keys.ShardKeys]) -> int:
        """How many entries wait in ``layout``'s outboxes and ready streams."""

        commands: list[Command] = [
            command
            for shard in layout
            for command in (("ZCARD", shard.outbox), ("XLEN", shard.ready))
        ]
        found = self.execute(
            commands, action="count waiting entries", transaction=False, errors_ok=False
        )
        return sum(int(size) for size in found)

    def publish_config(self, horizon_ms: int, inbound_shards: int) -> None:
        """Tell producers the scheduler's horizon (sends due within it go to the outbox)
        and how many inbound shards it reads (sends spread over them)."""
        command = ("HSET", keys.CONFIG, "horizon_ms", horizon_ms, "inbound_shards", inbound_shards)
        self.execute([command], action="publish the config", transaction=False, errors_ok=False)

    # -- the heartbeat ------------------------------------------------------------------------

    def record_started(self) -> None:
        """Beat once the query runs, before its first batch completes: with a backlog
        that batch takes tens of seconds, and a listing or a new group asks whether a
        scheduler beat lately (plans/observing.py)."""
        command = ("HSET", keys.HEARTBEAT, keys.BEAT_FIELD, now_ms())
        self.execute([command], action="record the heartbeat", transaction=False, errors_ok=False)

    def record_batches(self, query_id: str, batches: Sequence[tuple[int, int, int]]) -> None:
        """Record completed batches, each (batch_id, batch_at_ms, duration_ms), and beat."""
        batch_id, batch_at_ms, duration_ms = batches[-1]
        commands: list[Command] = [
            (
                *("HSET", keys.HEARTBEAT, "query_id", query_id, "batch_id", batch_id),
                *("last_batch_at_ms", batch_at_ms, "last_batch_ms", duration_ms),
                *(keys.BEAT_FIELD, now_ms()),
            )
        ]
        for _, _, each_ms in batches:
            commands.append(("HINCRBY", keys.BATCH_DURATION, bucket_label(each_ms), 1))
            commands.append(("HINCRBY", keys.BATCH_DURATION, SUM_FIELD, each_ms))
        # On a cluster the two hashes are in two slots: a transaction each.
        self.execute(commands, action="record the heartbeat", transaction=True, errors_ok=False)
