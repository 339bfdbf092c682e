"""What the source does with an inbound range besides feeding the wheel.

:func:`sort_inbound` splits a range: packs for the wheel, sends due within the
horizon for the outbox, cancels, and counts of accepted sends. :func:`hand_off`
writes all but the packs while the source reads the range: the near sends to
the outbox (exactly once, as the sink writes), the cancel requests that the
sink and the pump check, and the forecast's counts.
:func:`record_waiting_cancels` does the cancels' part for what still waits on
the inbound side when a scheduler starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from delayline import ids, timing
from delayline.model import OP_CANCEL, OP_RESCHEDULE, RECORD_VERSION
from delayline.redis import keys
from delayline.redis.inbound import InboundStream
from delayline.rows import Deliver
from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.chunks import write_once
from delayline.scheduler.pipeline.clients import inbound_for, kafka_inbound_for, store_for
from delayline.scheduler.pipeline.feeds import START_ID
from delayline.scheduler.pipeline.records import CASCADE_FIELD, entry_time_ms, to_packed
from delayline.scheduler.pipeline.task import BatchTask
from delayline.scheduler.settings import SchedulerSettings


@dataclass(frozen=True)
class SortedInbound:
    """A range of inbound records, sorted for the wheel, the outbox and the counters."""

    #: One pack per wheel key, in order of first appearance: a replay builds the same.
    packs: dict[int, bytes]
    #: Sends due within the horizon of when Redis received them: for the outbox.
    near: list[Deliver]
    #: (id, deliver_at_ms, new id or "") of each cancel or reschedule, for the cancel
    #: requests that the sink and the pump check.
    cancels: list[tuple[str, int, str]]
    #: Sends accepted from producers (not cascades handed down again), per
    #: (due second as epoch ms, topic): the forecast's counts.
    accepted: dict[tuple[int, str], int]


def sort_inbound(
    entries: Iterable[tuple[str, Mapping[bytes, bytes]]], settings: SchedulerSettings
) -> SortedInbound:
    """Validate and place each (entry id, fields) of the inbound stream.

    A send that is near (:func:`delayline.timing.is_near`, within ``horizon_ms``)
    at its entry id's time goes to the outbox, as the SDK's near path would have
    put it, rather than a whole batch later. It is judged by the entry id, not
    the clock, so that a replay sorts the same range the same way.
    """
    grouped: dict[int, list[bytes]] = {}
    near: list[Deliver] = []
    cancels: list[tuple[str, int, str]] = []
    accepted: dict[tuple[int, str], int] = {}
    for entry_id, fields in entries:
        placed = to_packed(
            entry_id, fields, limits=settings.limits, wheel=settings.wheel, shards=settings.shards
        )
        # The kind is the record's first byte; only a cancel or a near send is decoded.
        kind = placed[0][1][0]
        if kind in packs.CANCELS:
            cancel = next(packs.unpack(placed[0][1]))
            cancels.append((cancel.id, cancel.deliver_at_ms, cancel.reason))
            if kind == packs.WITHDRAW:
                # First in its keys' packs: the processor looks no further to see one.
                for key, record in placed:
                    grouped.setdefault(key, []).insert(0, record)
                continue
        elif kind == packs.SEND:
            [(_, data)] = placed
            deliver_at_ms = packs.deliver_at_ms_of(data)
            if fields.get(CASCADE_FIELD) != b"1":
                counted = (deliver_at_ms - deliver_at_ms % 1000, fields[b"topic"].decode())
                accepted[counted] = accepted.get(counted, 0) + 1
            if timing.is_near(deliver_at_ms, entry_time_ms(entry_id), settings.horizon_ms):
                near.append(packs.as_deliver(next(packs.unpack(data))))
                continue
        for key, record in placed:
            grouped.setdefault(key, []).append(record)
    return SortedInbound(
        {key: b"".join(parts) for key, parts in grouped.items()}, near, cancels, accepted
    )


def hand_off(batch: SortedInbound, settings: SchedulerSettings, task: BatchTask) -> None:
    """Write what ``batch`` (the range ``task`` reads) holds besides its packs.

    Every attempt of ``task`` must pass the same batch: a replay resumes after
    what landed, and writes nothing twice.
    """
    inbound = inbound_for(settings.redis_url)
    # A raw cancel must also stop a message that already left Spark's state for
    # the outbox: the pump drops a message with a cancel request, as for the SDK's.
    # Recorded first, so that it also stops a message handed off just below.
    inbound.record_cancel_requests(
        batch.cancels, settings.journal_retention_ms, settings.inbound_shards
    )
    # As the sink writes: due ones to their topic, the rest to the outbox, a
    # duplicate id counted once, and a replay resuming after what landed.
    write_once(
        store_for(settings.redis_url, settings.fence_token),
        task,
        "handoff",
        batch.near,
        journal_ttl_s=settings.journal_ttl_s,
        horizon_ms=settings.horizon_ms,
        shards=settings.inbound_shards,
    )
    # The counts may go to any shard: readers add them up. The partition picks one.
    layout = keys.layout(settings.inbound_shards)
    inbound.count_ingest(
        task.query_id,
        task.partition,
        task.batch_id,
        batch.accepted,
        len(batch.cancels),
        layout[task.partition % len(layout)],
    )


def waiting_cancels(
    entries: Iterable[tuple[str, Mapping[bytes, bytes]]],
) -> list[tuple[str, int, str]]:
    """(id, deliver_at_ms, new id or "") of every well-formed raw cancel or reschedule
    among inbound ``entries``."""
    found = []
    for _, fields in entries:
        op = fields.get(b"op")
        if op in (OP_CANCEL, OP_RESCHEDULE) and fields.get(b"v") == RECORD_VERSION:
            claimed = fields.get(b"id", b"").decode("ascii", "replace")
            new_id = fields.get(b"new_id", b"").decode("ascii", "replace")
            if ids.is_message_id(claimed) and (op == OP_CANCEL or ids.is_message_id(new_id)):
                found.append((claimed, ids.deliver_at_ms_of(claimed), new_id))
    return found


def record_waiting_cancels(inbound: InboundStream, settings: SchedulerSettings) -> None:
    """Record a cancel request for each raw cancel that waits in an inbound stream,
    or in the Kafka inbound topic past the group's offsets.

    After a crash, the pump delivers what waits in the outbox before Spark is
    up to read the inbound side, so a raw cancel sent during the downtime
    would lose to it; this runs first. The streams hold only what Spark has
    not committed, so the scan is short; so is the topic's, past the offsets
    committed with Spark's last batch.
    """
    retention_ms, shards = settings.journal_retention_ms, settings.inbound_shards
    for stream in keys.inbound_streams(shards):
        waiting = waiting_cancels(inbound.read(START_ID, "+", stream=stream))
        inbound.record_cancel_requests(waiting, retention_ms, shards)
    if settings.kafka is not None:
        topic = kafka_inbound_for(settings.kafka, settings.kafka_inbound_topic)
        partitions = topic.partitions()
        ends = topic.ends(partitions)
        for partition, start in topic.starts(partitions).items():
            waiting = waiting_cancels(topic.read(partition, start, ends[partition]))
            inbound.record_cancel_requests(waiting, retention_ms, shards)
