"""The listing's scan of one state partition, without Spark: packs in, chosen sends
out; schedule keys' states in, chosen schedules out."""

from __future__ import annotations

import pyarrow as pa

from delayline.listing import SCHEDULES, ListRequest
from delayline.scheduler.jobs.state_scan import selected, selected_schedules
from delayline.scheduler.pipeline import packs
from delayline.schedules import runs, state
from delayline.schedules.listed import ListedSchedule
from delayline.schedules.recurrence import Every
from delayline.schedules.spec import Schedule
from delayline.validation import Limits

T0 = 1_800_000_000_000


def send(n: int, topic: str = "t", key: str = "") -> packs.Record:
    return packs.Record(
        packs.SEND, 1_000 + n, f"id{n}", f"{n}-0", topic=topic, key=key, body=b"x" * n
    )


def scanned(request: ListRequest, *pack_lists: list[packs.Record]) -> list[dict[str, object]]:
    batch = pa.RecordBatch.from_pydict(
        {"pack": [packs.pack(records) for records in pack_lists]},
        schema=pa.schema([("pack", pa.binary())]),
    )
    return [row for out in selected(request.to_json(), iter([batch])) for row in out.to_pylist()]


def test_a_scan_keeps_what_is_asked_for_and_not_cancelled_in_due_order() -> None:
    cancel = packs.Record(packs.CANCEL, 1_003, "id3", "9-0")
    withdrawal = packs.Record(packs.WITHDRAW, 1_004, "id4", "9-1", reason="new")
    rows = scanned(
        ListRequest(topic="t", from_ms=1_001, limit=3),
        [send(5), send(1), send(3)],
        [send(4), send(2, topic="other"), cancel, withdrawal, send(0), send(6), send(7)],
    )
    assert [(r["id"], r["deliver_at_ms"], r["body_bytes"]) for r in rows] == [
        ("id1", 1_001, 1),
        ("id5", 1_005, 5),
        ("id6", 1_006, 6),
    ]


def test_a_scan_of_nothing_yields_an_empty_batch() -> None:
    assert scanned(ListRequest(key="k"), [send(1, key="other")]) == []


def test_a_scan_of_schedule_keys_keeps_the_first_asked_for_by_topic_then_name() -> None:
    def armed(topic: str, name: str) -> runs.Armed:
        definition = Schedule.create(topic, name, b"x", Every(60_000), limits=Limits())
        return runs.arm(definition, "1-0", T0)

    keys_states = [
        state.encode([armed("reports", "c"), armed("alerts", "z")]),  # two in one key
        state.encode([armed("reports", "a")]),
        state.encode([armed("reports", "b")]),
    ]
    batch = pa.RecordBatch.from_pydict(
        {"pack": keys_states}, schema=pa.schema([("pack", pa.binary())])
    )

    def scanned(request: ListRequest) -> list[ListedSchedule]:
        out = selected_schedules(request.to_json(), T0 + 1, iter([batch]))
        return [ListedSchedule.from_json(row["row"]) for b in out for row in b.to_pylist()]

    rows = scanned(ListRequest(kind=SCHEDULES, topic="reports", limit=2))
    assert [(row.topic, row.name) for row in rows] == [("reports", "a"), ("reports", "b")]
    assert rows[0] == ListedSchedule.of(armed("reports", "a"), T0 + 1)
    every_one = scanned(ListRequest(kind=SCHEDULES))
    assert [row.name for row in every_one] == ["z", "a", "b", "c"]
    assert [row.name for row in scanned(ListRequest(kind=SCHEDULES, name="c"))] == ["c"]
    assert scanned(ListRequest(kind=SCHEDULES, topic="none")) == []
