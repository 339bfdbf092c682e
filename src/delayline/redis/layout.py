"""The delivery keys' shard layout, and what a change of the shard count moves.

A message's outbox entry, status records and cancel requests live in its shard
(:func:`keys.keys_of`), which depends on the count (``--inbound-shards``). The
count is pinned by the checkpoint, so it changes after a drain, which hands
the state's messages to the default inbound stream and pumps the outboxes
empty. The scheduler that starts with the new count claims it here, before
its first delivery:

- Every count used is recorded (``keys.SHARD_HISTORY``): readers add up every
  shard that ever held counters, and look a status up under each count; the
  scheduler pumps every outbox that ever held entries (a producer may go by
  the old count for up to ``producing.SHARDS_REFRESH_MS``).
- Cancel requests are copied into each message's shard under the new count,
  where a handed-over message is dropped when due. A reschedule's request whose
  new message now falls in another shard is marked to send it through the
  inbound stream, which routes it to its shard, instead of the outbox.
- At every start, what waits in an inbound stream that the count does not read
  is moved to the default stream, which every count reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from delayline.redis import keys
from delayline.redis.commands import Command
from delayline.redis.connection import RedisConnection
from delayline.redis.execution import run_commands
from delayline.redis.lua_source import FORECAST_TAKEN, VIA_INBOUND

#: Entries moved from an unread inbound stream per transaction.
MOVE_BATCH = 500


class ShardLayout(RedisConnection):
    """The record of the shard counts in ``delayline:config``, and the moves a change needs."""

    def claim(self, shards: int) -> tuple[int, ...]:
        """Lay the delivery keys out for ``shards`` Redis shards (see the module's text);
        return every count used, ``shards`` last. Keys written before any count was
        recorded are taken as unsharded. Safe to repeat after a crash midway."""
        history = self.history()
        old = history[-1]
        if old != shards:
            self._copy_cancel_requests(keys.read_layout(max(history)), shards)
            history = (*(count for count in history if count != shards), shards)
            text = keys.shard_history_text(history)
            self._call(
                "record the shard layout",
                lambda: self._node(keys.CONFIG).hset(
                    keys.CONFIG, mapping={"layout_shards": shards, keys.SHARD_HISTORY: text}
                ),
            )
        for shard in keys.read_layout(max(history)):
            if shard.inbound not in keys.inbound_streams(shards):
                self._move_to_default(shard.inbound)
        return history

    def history(self) -> tuple[int, ...]:
        """Every shard count the delivery keys have been laid out for, the current one
        last; (1,) before any was recorded."""
        recorded, history_text = cast(
            list[bytes | None],
            self._call(
                "read the shard layout",
                lambda: self._node(keys.CONFIG).hmget(
                    keys.CONFIG, ["layout_shards", keys.SHARD_HISTORY]
                ),
            ),
        )
        return keys.shard_history(history_text, 1 if recorded is None else int(recorded))

    def _copy_cancel_requests(self, old: Sequence[keys.ShardKeys], shards: int) -> None:
        """Copy every cancel request of ``old``'s shards into its message's shard of
        ``shards``, unless one is recorded there already."""
        for shard in old:
            prefix = shard.cancel_requests(0)[:-1]  # "<namespace>cancelled:"
            names = cast(
                list[bytes],
                self._call(
                    "find cancel requests",
                    lambda: [
                        name
                        for client in self._router.every_primary()
                        for name in client.scan_iter(match=prefix + "*", count=1_000)  # noqa: B023
                    ],
                ),
            )
            for name in names:
                minute = int(name.decode()[len(prefix) :])
                self._copy_minute(shard, minute, shards)

    def _copy_minute(self, shard: keys.ShardKeys, minute: int, shards: int) -> None:
        name = shard.cancel_requests(minute * keys.CANCELS_BUCKET_MS)

        def read() -> list[Any]:
            pipe = self._node(name).pipeline(transaction=False)
            pipe.hgetall(name)
            pipe.pttl(name)
            return list(pipe.execute())

        requests, ttl_ms = cast(
            tuple[dict[bytes, bytes], int], self._call("read cancel requests", read)
        )
        copies: dict[str, dict[bytes, bytes]] = {}
        for field, value in requests.items():
            # "<FORECAST_TAKEN><id>" holds the topic the request took out of the forecast.
            message_id = field.removeprefix(FORECAST_TAKEN).decode()
            target = keys.keys_of(message_id, shards)
            if target == shard:
                continue
            parts = value.split(b":")
            rescheduled = not field.startswith(FORECAST_TAKEN) and len(parts) == 3
            if rescheduled and keys.keys_of(parts[1].decode(), shards) != target:
                value += VIA_INBOUND
            copies.setdefault(target.cancel_requests(minute * keys.CANCELS_BUCKET_MS), {})[
                field
            ] = value
        if not copies:
            return

        commands: list[Command] = []
        for copy, fields in copies.items():
            commands += [("HSETNX", copy, field, value) for field, value in fields.items()]
            if ttl_ms > 0:
                commands.append(("PEXPIRE", copy, ttl_ms))
        # On a cluster, a transaction per shard: each copy is safe to repeat.
        self.execute(commands, action="copy cancel requests", transaction=True, errors_ok=False)

    def _move_to_default(self, stream: str) -> None:
        """Move what waits in ``stream`` to the end of the default inbound stream, in order,
        a transaction at a time (each reads what it moves: a retry moves nothing twice).

        On a cluster the two streams are in two slots: each batch is appended, then
        deleted, and a crash between the two leaves it in both, which the scheduler
        takes once (a message id is delivered once)."""

        def move() -> int:
            if self.cluster:
                return self._copy_then_delete(stream)
            with self._node(stream).pipeline(transaction=True) as pipe:
                pipe.watch(stream)
                entries = cast(
                    list[tuple[bytes, dict[bytes, bytes]]], pipe.xrange(stream, count=MOVE_BATCH)
                )
                if entries:
                    pipe.multi()
                    for _, fields in entries:
                        pipe.xadd(keys.INBOUND, fields)  # type: ignore[arg-type]
                    pipe.xdel(stream, *(entry_id for entry_id, _ in entries))
                    pipe.execute()
                return len(entries)

        while self._call("move records to the default inbound stream", move):
            pass

    def _copy_then_delete(self, stream: str) -> int:
        entries = cast(
            list[tuple[bytes, dict[bytes, bytes]]],
            self._node(stream).xrange(stream, count=MOVE_BATCH),
        )
        if entries:
            commands: list[Command] = [
                ("XADD", keys.INBOUND, "*", *(part for pair in fields.items() for part in pair))
                for _, fields in entries
            ]
            run_commands(self._router, commands, transaction=True, errors_ok=False)
            self._node(stream).xdel(stream, *(entry_id for entry_id, _ in entries))
        return len(entries)
