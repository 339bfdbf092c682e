"""The timing wheel as a Spark stateful processor.

Each state key is one (slot, shard) of the wheel. Its messages and cancels sit
in one RocksDB list state, a pack per batch that touched the key (see
:mod:`delayline.scheduler.pipeline.packs`), so every state call costs per key, not per
message. A processing-time timer fires the slot ``horizon_ms`` before it
starts. Each firing emits the messages due within the horizon (the sink holds
each one until its exact time), puts the rest back, and arms the timer for the
next one: a two-level wheel, with coarse slots in RocksDB and the fine timing in
the sink.

A coarse key (see :class:`delayline.timing.Wheel`) fires ``cascade_ahead_ms``
before its slot and emits all its messages as cascades: the sink appends them
to the inbound stream again, and they come back to fine keys.

Each timer set is also recorded in Redis (see :mod:`delayline.scheduler.pipeline.source`):
no-data batches are off, and the source wakes a batch when a timer is due.

A schedule (see :mod:`delayline.scheduler.pipeline.schedule_keys`) has a key of its
own, below the reject slot: its state holds the definition and the next run, and
its timer hands each run to the sink a horizon ahead.

Cancels are applied when their message is emitted. A cancel that arrives
before its message still wins, and cancels are kept ``cancel_retention_ms``
past their slot for messages that arrive late. A withdrawal (a reschedule's
cancel) is applied as soon as it reaches its key, since the new time may come
before the old slot fires.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)

from delayline import timing
from delayline.scheduler.pipeline import packs, schedule_keys, schemas
from delayline.schedules.ops import is_schedule_slot


class WheelProcessor(StatefulProcessor):
    """Holds packs per wheel key; emits what is due, drops what is cancelled."""

    def __init__(
        self,
        horizon_ms: int,
        cancel_retention_ms: int,
        wheel: timing.Wheel,
        record_wakeups: Callable[[Iterable[int]], None],
    ) -> None:
        """``record_wakeups`` is given the timers set by a partition of a batch (epoch ms)."""
        self._horizon_ms = horizon_ms
        self._cancel_retention_ms = cancel_retention_ms
        self._wheel = wheel
        self._record_wakeups = record_wakeups

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._entries = handle.getListState("entries", schemas.ENTRIES)
        self._wakeups: set[int] = set()

    def _arm(self, fire_at_ms: int) -> None:
        """Set the key's timer (idempotent), and note when the source must wake for it."""
        self._handle.registerTimer(fire_at_ms)
        self._wakeups.add(fire_at_ms)

    def handleInputRows(
        self, key: tuple[Any, ...], rows: Iterator[Any], timerValues: TimerValues
    ) -> Iterator[Row]:
        slot_ms, _shard, coarse = timing.split_wheel_key(key[0])
        packed = [row.pack for row in rows]
        incoming = b"".join(packed)
        if slot_ms == timing.REJECT_SLOT_MS:
            yield Row(pack=incoming)
            return
        now_ms = timerValues.getCurrentProcessingTimeInMs()
        if is_schedule_slot(slot_ms):
            yield from self._schedules(incoming, now_ms)
            return
        fire_at_ms = slot_ms - (self._wheel.cascade_ahead_ms if coarse else self._horizon_ms)
        if fire_at_ms > now_ms:
            self._arm(fire_at_ms)  # idempotent
            # The source puts a withdrawal first in its pack: one byte tells.
            if any(pack[0] == packs.WITHDRAW for pack in packed):
                yield from self._withdraw(incoming)
            else:
                # A future slot: store.
                self._entries.appendList([(incoming,)])
            return
        # The slot is firing already: deliver now rather than a batch later.
        yield from self._fire(slot_ms, coarse, now_ms, incoming)

    def handleExpiredTimer(
        self, key: tuple[Any, ...], timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        slot_ms, _shard, coarse = timing.split_wheel_key(key[0])
        now_ms = timerValues.getCurrentProcessingTimeInMs()
        if is_schedule_slot(slot_ms):
            yield from self._schedules(b"", now_ms)
        else:
            yield from self._fire(slot_ms, coarse, now_ms, b"")

    def _stored(self) -> bytes:
        """What the key holds: its packs, or a schedule key's encoded schedules."""
        return b"".join(entry[0] for entry in self._entries.get())

    def _settle(
        self, stored: bytes, keep: bytes, fire_at_ms: int | None, out: bytes
    ) -> Iterator[Row]:
        """Put ``keep`` in the key's state in place of ``stored`` (if it differs), arm
        its timer at ``fire_at_ms`` (None: none), and emit ``out``."""
        if keep and keep != stored:
            self._entries.put([(keep,)])
        elif not keep and stored:
            self._entries.clear()
        if fire_at_ms is not None:
            self._arm(fire_at_ms)
        if out:
            yield Row(pack=out)

    def _schedules(self, incoming: bytes, now_ms: int) -> Iterator[Row]:
        """A schedule key: apply its ops, hand its runs over, arm its timer."""
        stored = self._stored()
        firing = schedule_keys.fire(stored, incoming, now_ms=now_ms, horizon_ms=self._horizon_ms)
        yield from self._settle(stored, firing.stored, firing.fire_at_ms, firing.out)

    def _withdraw(self, incoming: bytes) -> Iterator[Row]:
        """Drop at once the stored messages that a withdrawal names (rarely: this reads
        the key's whole state), for the sink to reschedule."""
        stored = self._stored()
        out, keep = plan_withdrawal(stored + incoming)
        self._entries.put([(keep,)])
        if out:
            yield Row(pack=out)

    def _fire(self, slot_ms: int, coarse: bool, now_ms: int, incoming: bytes) -> Iterator[Row]:
        stored = self._stored()
        plan = plan_firing(
            stored + incoming,
            now_ms=now_ms,
            # A coarse slot hands down everything it holds (all due within ahead + tick).
            ahead_ms=self._wheel.cascade_ahead_ms + self._wheel.coarse_tick_ms
            if coarse
            else self._horizon_ms,
            cancels_until_ms=slot_ms + self._cancel_retention_ms,
            emit_as=packs.CASCADE if coarse else packs.DELIVER,
        )
        yield from self._settle(stored, plan.keep, plan.next_fire_ms, plan.out)

    def close(self) -> None:
        # Called once a partition of a batch is done: one Redis call for all its timers.
        if self._wakeups:
            self._record_wakeups(sorted(self._wakeups))
            self._wakeups.clear()


@dataclass(frozen=True, slots=True)
class Firing:
    """A slot firing: ``out`` to the sink, ``keep`` back in state, a timer at ``next_fire_ms``."""

    out: bytes
    keep: bytes
    next_fire_ms: int | None


def plan_firing(
    data: bytes,
    *,
    now_ms: int,
    ahead_ms: int,
    cancels_until_ms: int,
    emit_as: int = packs.DELIVER,
) -> Firing:
    """Split a key's records: emit what is due by ``now_ms + ahead_ms``, keep the rest.

    Emitted sends become ``emit_as`` (deliver, or cascade from a coarse slot),
    or ``drop`` if any cancel names them.
    Cancels stay until ``cancels_until_ms``, so that a late message still
    loses. The next timer is set for the earliest kept message, or for the
    cancels' expiry if only cancels remain.
    """
    records = list(packs.scan(data))
    cancelled = {record.id for record in records if record.kind in packs.CANCELS}
    due_by_ms = now_ms + ahead_ms
    out: list[bytes] = []
    keep: list[bytes] = []
    next_due_ms: int | None = None
    for record in records:
        if record.kind in packs.CANCELS:
            if now_ms < cancels_until_ms:
                keep.append(record.raw)
        elif record.deliver_at_ms <= due_by_ms:
            out.append(record.relabelled(packs.DROP if record.id in cancelled else emit_as))
        else:
            keep.append(record.raw)
            if next_due_ms is None or record.deliver_at_ms < next_due_ms:
                next_due_ms = record.deliver_at_ms
    if next_due_ms is not None:
        next_fire_ms: int | None = next_due_ms - ahead_ms
    else:
        next_fire_ms = cancels_until_ms if keep else None
    return Firing(b"".join(out), b"".join(keep), next_fire_ms)


def plan_withdrawal(data: bytes) -> tuple[bytes, bytes]:
    """Split a key's records into (sends that a withdrawal names, as drops; the rest).

    The withdrawals stay, as cancels do until the slot fires: a copy of the
    message that comes later is dropped too.
    """
    records = list(packs.scan(data))
    withdrawn = {record.id for record in records if record.kind == packs.WITHDRAW}
    out: list[bytes] = []
    keep: list[bytes] = []
    for record in records:
        if record.kind == packs.SEND and record.id in withdrawn:
            out.append(record.relabelled(packs.DROP))
        else:
            keep.append(record.raw)
    return b"".join(out), b"".join(keep)
