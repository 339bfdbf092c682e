"""The sink's pure parts: row order, and holding each row until it is due."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from delayline.ids import new_message_id
from delayline.scheduler import schemas
from delayline.scheduler.sink import ordered_rows, write_when_due
from delayline.transports.redis_streams import ChunkResult, Deliver, Drop, Reject, SinkRow

ARROW_SCHEMA = to_arrow_schema(schemas.OUTPUT)


def out_row(kind: str, inbound_id: str, **values: object) -> dict[str, object]:
    row: dict[str, object] = dict.fromkeys(schemas.OUTPUT_COLUMNS)
    row.update(kind=kind, inbound_id=inbound_id, **values)
    return row


def deliver(inbound_id: str, deliver_at_ms: int, message_id: str = "M") -> dict[str, object]:
    return out_row(
        schemas.DELIVER,
        inbound_id,
        id=message_id,
        topic="t",
        body=b"b",
        key=None,
        headers=None,
        deliver_at_ms=deliver_at_ms,
        attempt=2,
    )


def batch(*rows: dict[str, object]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(list(rows), schema=ARROW_SCHEMA)


def test_order_is_total_and_independent_of_input_order() -> None:
    rows = [
        deliver("10-0", 500, "A"),
        deliver("9-0", 500, "B"),
        deliver("11-0", 100, "C"),
        out_row(schemas.DROP, "12-0", id="D", deliver_at_ms=50),
        out_row(schemas.REJECT, "8-5", reason="bad", raw=[b"v", b"9"]),
    ]
    forward = ordered_rows([batch(*rows)], rejected_at_ms=1)
    backward = ordered_rows([batch(*rows[3:]), batch(*reversed(rows[:3]))], rejected_at_ms=1)
    assert forward == backward
    assert [due for due, _ in forward] == [0, 0, 100, 500, 500]
    assert isinstance(forward[0][1], Reject)
    assert forward[1][1] == Drop(id="D", deliver_at_ms=50)
    assert [row.id for _, row in forward[2:] if isinstance(row, Deliver)] == ["C", "B", "A"]
    assert forward[2][1] == Deliver(
        topic="t", id="C", body=b"b", key="", headers="{}", deliver_at_ms=100, attempt=2
    )


def test_reject_keeps_original_fields_and_renames_clashes() -> None:
    raw = [b"v", b"1", b"reason", b"mine", b"body", b"\x00\xff"]
    [(_, row)] = ordered_rows(
        [batch(out_row(schemas.REJECT, "7-1", reason="unknown op", raw=raw))], rejected_at_ms=99
    )
    assert isinstance(row, Reject)
    assert (row.reason, row.message_id) == ("unknown op", None)
    assert list(row.fields) == [
        (b"v", b"1"),
        (b"original.reason", b"mine"),
        (b"body", b"\x00\xff"),
        (b"reason", b"unknown op"),
        (b"rejected_at_ms", b"99"),
        (b"inbound_id", b"7-1"),
    ]


class FakeClock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def sleep(self, seconds: float) -> None:
        self.now_ms += max(1, round(seconds * 1000))


def run(
    rows: Sequence[tuple[int, SinkRow]],
    first_row: int = 0,
    start_ms: int = 1_000,
    max_chunk_rows: int = 500,
) -> list[tuple[int, list[SinkRow], int]]:
    clock = FakeClock(start_ms)
    writes: list[tuple[int, list[SinkRow], int]] = []

    def write_chunk(first: int, chunk: Sequence[SinkRow], delivered_at_ms: int) -> ChunkResult:
        writes.append((first, list(chunk), delivered_at_ms))
        return ChunkResult(first + len(chunk), len(chunk), 0, 0, 0)

    write_when_due(
        rows, first_row, write_chunk, clock=clock, sleep=clock.sleep, max_chunk_rows=max_chunk_rows
    )
    return writes


def drop(n: int) -> Drop:
    return Drop(id=str(n), deliver_at_ms=n)


def test_nothing_is_written_before_it_is_due() -> None:
    rows = [(0, drop(0)), (900, drop(1)), (1_000, drop(2)), (1_250, drop(3)), (3_000, drop(4))]
    writes = run(rows, start_ms=1_000)
    assert [first for first, _, _ in writes] == [0, 3, 4]
    for first, chunk, delivered_at_ms in writes:
        for offset in range(len(chunk)):
            assert delivered_at_ms >= rows[first + offset][0]  # never early
    assert writes[1][2] == 1_250  # held exactly until due, not later
    assert writes[2][2] == 3_000


def test_writing_resumes_after_the_rows_already_written() -> None:
    rows = [(0, drop(n)) for n in range(10)]
    writes = run(rows, first_row=7)
    assert writes == [(7, [drop(7), drop(8), drop(9)], 1_000)]
    assert run(rows, first_row=10) == []


def test_chunks_are_bounded() -> None:
    rows = [(0, drop(n)) for n in range(1_201)]
    assert [(first, len(chunk)) for first, chunk, _ in run(rows, max_chunk_rows=500)] == [
        (0, 500),
        (500, 500),
        (1_000, 201),
    ]


def test_writing_jumps_ahead_when_another_attempt_got_further() -> None:
    rows = [(0, drop(n)) for n in range(6)]
    calls: list[int] = []

    def write_chunk(first: int, chunk: Sequence[SinkRow], delivered_at_ms: int) -> ChunkResult:
        calls.append(first)
        if first == 0:  # someone else already wrote rows 0..3
            return ChunkResult(written=4, delivered=0, duplicates=0, dropped=0, rejected=0)
        return ChunkResult(first + len(chunk), 0, 0, len(chunk), 0)

    write_when_due(rows, 0, write_chunk, clock=lambda: 10, sleep=lambda _: None, max_chunk_rows=2)
    assert calls == [0, 4]


def test_a_rejected_send_with_a_valid_id_names_it_for_status() -> None:
    message_id = new_message_id(1_800_000_000_000)
    send = [b"v", b"1", b"op", b"send", b"id", message_id.encode()]
    cancel = [b"v", b"1", b"op", b"cancel", b"id", message_id.encode()]
    rows = ordered_rows(
        [
            batch(
                out_row(schemas.REJECT, "1-0", reason="bad topic", raw=send),
                out_row(schemas.REJECT, "2-0", reason="bad", raw=cancel),
            )
        ],
        rejected_at_ms=5,
    )
    assert [row.message_id for _, row in rows if isinstance(row, Reject)] == [message_id, None]
