"""The listing's scan of one state partition, without Spark: packs in, chosen sends out."""

from __future__ import annotations

import pyarrow as pa

from delayline.listing import ListRequest
from delayline.scheduler.jobs.state_scan import selected
from delayline.scheduler.pipeline import packs


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
