"""The wheel's schedule keys: what the processor does when a schedule's op reaches its
key, or the key's timer fires (see :mod:`delayline.schedules.runs`, which decides).

A key's state is the encoded list of its schedules (:mod:`delayline.schedules.state`);
its timer fires ``horizon_ms`` before the earliest next run among them, or when a
finished one is to be forgotten (``runs.FINISHED_RETENTION_MS`` after its last run). Ops are
applied in the order of their inbound entries, then every schedule hands over
what is due within the horizon. Runs leave as RUN records, and the runs a change
cancels as REVOKE records, for the sink.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.feeds import id_order
from delayline.schedules import runs, state
from delayline.schedules.ops import DELETE, PAUSE, PUT, RESUME
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
    over every run due by ``now_ms + horizon_ms``."""
    schedules = {armed.schedule.address: armed for armed in state.decode(stored)}
    out: list[packs.Record] = []
    ops = sorted(packs.unpack(incoming), key=lambda op: id_order(op.inbound_id))
    for op in ops:
        out += revokes(apply(schedules, op, now_ms))
    for address, armed in list(schedules.items()):
        handoff = runs.hand_off(armed, now_ms=now_ms, horizon_ms=horizon_ms)
        schedules[address] = handoff.armed
        out += (run_record(armed, run) for run in handoff.runs)
        forget_ms = runs.forget_at_ms(handoff.armed)
        if forget_ms is not None and forget_ms <= now_ms:
            del schedules[address]
    fire_times = [runs.fire_at_ms(armed, horizon_ms) for armed in schedules.values()]
    pending = [at for at in fire_times if at is not None]
    return KeyFiring(
        state.encode(list(schedules.values())),
        packs.pack(out),
        min(pending) if pending else None,
    )


def apply(
    schedules: dict[tuple[str, str], runs.Armed], op: packs.Record, now_ms: int
) -> list[tuple[runs.Armed, runs.Run]]:
    """Apply one op to ``schedules`` (in place); the runs it cancels, each with the
    state that handed it over. An op on a schedule that does not exist does nothing."""
    address = (op.topic, op.key)
    old = schedules.get(address)
    cancels: list[runs.Run] = []
    if op.reason == PUT:
        definition = Schedule.from_json(op.body, state.STORED)
        schedules[address], cancels = runs.put(old, definition, op.inbound_id, now_ms)
    elif old is None:
        return []
    elif op.reason == DELETE:
        cancels = runs.handed_not_due(old, now_ms)
        del schedules[address]
    elif op.reason == PAUSE:
        schedules[address], cancels = runs.pause(old, op.inbound_id, now_ms)
    elif op.reason == RESUME:
        schedules[address] = runs.resume(old, op.inbound_id)
    return [(old, run) for run in cancels] if old is not None else []


def revokes(cancelled: Iterable[tuple[runs.Armed, runs.Run]]) -> list[packs.Record]:
    """REVOKE records of cancelled runs."""
    return [
        packs.Record(
            kind=packs.REVOKE,
            deliver_at_ms=run.run_ms,
            id=run.id,
            inbound_id=armed.version,
            topic=armed.schedule.topic,
        )
        for armed, run in cancelled
    ]


def run_record(armed: runs.Armed, run: runs.Run) -> packs.Record:
    """A RUN record: the schedule's message, with the run's id, time and headers."""
    schedule = armed.schedule
    return packs.Record(
        kind=packs.RUN,
        deliver_at_ms=run.run_ms,
        id=run.id,
        inbound_id=armed.version,
        topic=schedule.topic,
        body=schedule.body,
        key=schedule.key or "",
        headers=encode_headers(runs.run_headers(schedule, run.run_ms)),
    )
