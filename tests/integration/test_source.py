"""How the source sorts inbound records: the wheel, the outbox (near sends), the counters."""

from __future__ import annotations

from delayline.model import Cancel, Message
from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.handoff import sort_inbound
from delayline.scheduler.pipeline.records import CASCADE_FIELD
from delayline.scheduler.settings import SchedulerSettings
from delayline.validation import Limits

T0 = 1_800_000_000_000
HORIZON_MS = 60_000
SETTINGS = SchedulerSettings(horizon_ms=HORIZON_MS)


def send(delay_ms: int, extra: dict[bytes, bytes] | None = None) -> dict[bytes, bytes]:
    message = Message.create("t", b"x", now_ms=T0, limits=Limits(), delay=delay_ms, key="k")
    return {**message.to_record(), **(extra or {})}


def stored_ids(data: dict[int, bytes]) -> list[str]:
    return [record.id for pack in data.values() for record in packs.scan(pack)]


def test_a_send_due_within_the_horizon_of_its_entry_goes_to_the_outbox() -> None:
    near, edge, far = send(30_000), send(HORIZON_MS), send(HORIZON_MS + 1)
    batch = sort_inbound([(f"{T0}-0", near), (f"{T0}-1", edge), (f"{T0}-2", far)], SETTINGS)
    assert [message.id for message in batch.near] == [near[b"id"].decode(), edge[b"id"].decode()]
    assert stored_ids(batch.packs) == [far[b"id"].decode()]
    # Counted for the forecast per (due second, topic).
    assert batch.accepted == {(T0 + 30_000, "t"): 1, (T0 + HORIZON_MS, "t"): 2}
    [first, _] = batch.near
    assert (first.topic, first.body, first.key, first.attempt) == ("t", b"x", "k", 1)
    assert first.deliver_at_ms == T0 + 30_000


def test_near_is_judged_by_the_entry_id_so_a_replay_sorts_the_same_way() -> None:
    record = send(30_000)
    # Received 40 s after it was made: due in 30 s... of a minute ago, by its entry id.
    late = sort_inbound([(f"{T0 + 40_000}-0", record)], SETTINGS)
    assert len(late.near) == 1
    # Received well before: the wheel takes it, however late the batch reads it.
    early = sort_inbound([(f"{T0 - 60_000}-0", record)], SETTINGS)
    assert early.near == []
    assert stored_ids(early.packs) == [record[b"id"].decode()]
    assert sort_inbound([(f"{T0 - 60_000}-0", record)], SETTINGS) == early


def test_cancels_and_rejects_stay_on_the_wheel_and_a_near_cascade_is_not_counted() -> None:
    message = send(5_000)
    cancel = Cancel(message[b"id"].decode(), T0).to_record()
    cascade = send(1_000, {CASCADE_FIELD: b"1"})
    entries = [
        (f"{T0}-0", cancel),
        (f"{T0}-1", {b"v": b"1", b"op": b"send"}),  # malformed: a reject
        (f"{T0}-2", cascade),
    ]
    batch = sort_inbound(entries, SETTINGS)
    assert batch.cancels == [(message[b"id"].decode(), T0 + 5_000, "")]
    kinds = sorted(record.kind for data in batch.packs.values() for record in packs.scan(data))
    assert kinds == sorted([packs.CANCEL, packs.CANCEL, packs.REJECT])  # both levels' keys
    assert [m.id for m in batch.near] == [cascade[b"id"].decode()]
    assert batch.accepted == {}  # a cascade was counted when it first came in


def test_a_reschedule_goes_first_in_the_packs_of_both_levels_and_is_recorded() -> None:
    message = send(600_000)  # a coarse slot
    new_id = Message.create("t", b"x", now_ms=T0, limits=Limits(), delay=1_000).id
    withdrawal = Cancel(message[b"id"].decode(), T0, rescheduled_to=new_id).to_record()
    batch = sort_inbound([(f"{T0}-0", message), (f"{T0}-1", withdrawal)], SETTINGS)
    assert batch.cancels == [(message[b"id"].decode(), T0 + 600_000, new_id)]
    firsts = [next(packs.scan(data)).kind for data in batch.packs.values()]
    assert firsts == [packs.WITHDRAW, packs.WITHDRAW]  # the fine and the coarse key
