"""The wheel's schedule keys: what the processor does when a schedule's op reaches its
key, or the key's timer fires (see :mod:`delayline.schedules.runs`, which decides).

A key's state is the encoded list of its schedules (:mod:`delayline.schedules.state`);
its timer fires when the first of them is to fire (:func:`runs.fire_at_ms
<delayline.schedules.runs.fire_at_ms>`: ``horizon_ms`` before its next run, or up
to half a horizon sooner, at its phase), or when a finished one is to be forgotten
(``runs.FINISHED_RETENTION_MS`` after its last run). Ops are applied in the order of
their inbound entries, then every schedule hands over what is due within the
horizon and half a horizon more. Runs leave as RUN records (COUNTED_RUN if counted
ahead in the forecast), the runs a change cancels as REVOKE records, and the
changes of the forecast's counts of runs ahead as FORECAST records, for the sink.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.feeds import id_order
from delayline.schedules import ahead, runs, state
from delayline.schedules.ops import DELETE, PAUSE, PUT, RESUME, decode_counted
from delayline.schedules.spec import Schedule
from delayline.validation import encode_headers


@dataclass(frozen=True, slots=True)
class KeyFiring:
    """What a schedule key does now: ``stored`` back in state (empty: nothing),
    ``out`` to the sink, and its timer at ``fire_at_ms`` (None: none)."""

    stored: bytes
    out: bytes
    fire_at_ms: int | None


def fire(stored: bytes, incoming: bytes, *, now_ms: int, horizon_ms: int) -> KeyFiring:
    """Apply the ops packed in ``incoming`` to the key's ``stored`` schedules, then hand
    over every run due by ``now_ms + horizon_ms`` and count the runs ahead of that in the
    forecast (:mod:`delayline.schedules.ahead`)."""
    schedules = {armed.schedule.address: armed for armed in state.decode(stored)}
    out: list[packs.Record] = []
    ops = sorted(packs.unpack(incoming), key=lambda op: id_order(op.inbound_id))
    for op in ops:
        out += apply(schedules, op, now_ms)
    for address, armed in list(schedules.items()):
        handoff = runs.hand_off(armed, now_ms=now_ms, horizon_ms=horizon_ms)
        handed = [run.run_ms for run in handoff.runs]
        count = ahead.recount(armed, handoff.armed, handed, now_ms=now_ms, horizon_ms=horizon_ms)
        schedules[address] = count.armed
        out += (run_record(armed, run, run.run_ms in count.counted_handed) for run in handoff.runs)
        out += forecast_records(armed, count.deltas)
        forget_ms = runs.forget_at_ms(count.armed)
        if forget_ms is not None and forget_ms <= now_ms:
            del schedules[address]
    fire_times = [ahead.fire_at_ms(armed, horizon_ms) for armed in schedules.values()]
    pending = [at for at in fire_times if at is not None]
    return KeyFiring(
        state.encode(list(schedules.values())),
        packs.pack(out),
        min(pending) if pending else None,
    )


def apply(
    schedules: dict[tuple[str, str], runs.Armed], op: packs.Record, now_ms: int
) -> list[packs.Record]:
    """Apply one op to ``schedules`` (in place): REVOKE records of the runs it cancels,
    and FORECAST records taking back what the state it replaces counted ahead. An op on
    a schedule that does not exist does nothing."""
    address = (op.topic, op.key)
    old = schedules.get(address)
    new: runs.Armed | None = old
    cancels: list[runs.Run] = []
    out: list[packs.Record] = []
    if op.reason == PUT:
        definition = Schedule.from_json(op.body, state.STORED)
        new, cancels = runs.put(old, definition, op.inbound_id, now_ms)
        if op.headers:  # a drained put: what the old checkpoint counted ahead
            carried = runs.Armed(definition, op.inbound_id, None)
            out += forecast_records(carried, ahead.carried(definition, decode_counted(op.headers)))
    elif old is None:
        return []
    elif op.reason == DELETE:
        new, cancels = None, runs.handed_not_due(old, now_ms)
    elif op.reason == PAUSE:
        new, cancels = runs.pause(old, op.inbound_id, now_ms)
    elif op.reason == RESUME:
        new = runs.resume(old, op.inbound_id)
    if old is not None and new is not old:
        new = None if new is None else replace(new, counted_until_ms=None)
        out += revokes(old, cancels) + forecast_records(old, ahead.forget(old))
    if new is None:
        del schedules[address]
    else:
        schedules[address] = new
    return out


def revokes(armed: runs.Armed, cancelled: Iterable[runs.Run]) -> list[packs.Record]:
    """REVOKE records of runs that ``armed`` handed over and a change cancels."""
    return [
        packs.Record(
            kind=packs.REVOKE,
            deliver_at_ms=run.run_ms,
            id=run.id,
            inbound_id=armed.version,
            topic=armed.schedule.topic,
        )
        for run in cancelled
    ]


def forecast_records(armed: runs.Armed, deltas: Iterable[ahead.MinuteDelta]) -> list[packs.Record]:
    """FORECAST records of the changes of the counts of ``armed``'s topic."""
    return [
        packs.Record(
            kind=packs.FORECAST,
            deliver_at_ms=delta.minute_ms,
            id="",
            inbound_id=armed.version,
            topic=armed.schedule.topic,
            attempt=delta.delta,
        )
        for delta in deltas
    ]


def run_record(armed: runs.Armed, run: runs.Run, counted: bool) -> packs.Record:
    """A RUN record (COUNTED_RUN if the run was ``counted`` ahead in the forecast): the
    schedule's message, with the run's id, time and headers."""
    schedule = armed.schedule
    return packs.Record(
        kind=packs.COUNTED_RUN if counted else packs.RUN,
        deliver_at_ms=run.run_ms,
        id=run.id,
        inbound_id=armed.version,
        topic=schedule.topic,
        body=schedule.body,
        key=schedule.key or "",
        headers=encode_headers(runs.run_headers(schedule, run.run_ms)),
    )
