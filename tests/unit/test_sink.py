"""The sink's pure parts: row order, and holding each row until it is due."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from delayline.ids import new_message_id
from delayline.redis.store import ChunkResult
from delayline.rows import Deliver, Drop, Reject, SinkRow
from delayline.scheduler.pipeline import packs
from delayline.scheduler.pipeline.chunks import MAX_CHUNK_BYTES, row_bytes, write_in_chunks
from delayline.scheduler.pipeline.sink import ordered_rows


def deliver(inbound_id: str, deliver_at_ms: int, message_id: str = "M") -> packs.Record:
    return packs.Record(
        packs.DELIVER,
        deliver_at_ms,
        message_id,
        inbound_id,
        topic="t",
        body=b"b",
        headers="",
        attempt=2,
    )


def batch(*records: packs.Record) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"pack": [packs.pack(records)]})


def reject(
    inbound_id: str, reason: str, raw: list[tuple[bytes, bytes]], message_id: str = ""
) -> packs.Record:
    return packs.Record(
        packs.REJECT, 0, message_id, inbound_id, body=packs.encode_fields(raw), reason=reason
    )


def test_order_is_total_and_independent_of_input_order() -> None:
    records = [
        deliver("10-0", 500, "A"),
        deliver("9-0", 500, "B"),
        deliver("11-0", 100, "C"),
        packs.Record(packs.DROP, 50, "D", "12-0", topic="t"),
        reject("8-5", "bad", [(b"v", b"9")]),
    ]
    forward = ordered_rows([batch(*records)], rejected_at_ms=1)
    backward = ordered_rows([batch(*records[3:]), batch(*reversed(records[:3]))], rejected_at_ms=1)
    assert forward == backward
    assert isinstance(forward[0], Reject)
    assert forward[1] == Drop("t", "D", b"", "", "{}", 50, 1)
    assert [row.id for row in forward[2:] if isinstance(row, Deliver)] == ["C", "B", "A"]
    assert forward[2] == Deliver(
        topic="t", id="C", body=b"b", key="", headers="{}", deliver_at_ms=100, attempt=2
    )


def test_reject_keeps_the_fields_the_source_kept_and_adds_its_own() -> None:
    # The source already renamed clashes (original.reason) and cut what was too big.
    raw = [(b"v", b"1"), (b"original.reason", b"mine"), (b"body", b"\x00\xff")]
    [row] = ordered_rows([batch(reject("7-1", "unknown op", raw))], rejected_at_ms=99)
    assert isinstance(row, Reject)
    assert (row.reason, row.message_id) == ("unknown op", None)
    assert list(row.fields) == [
        *raw,
        (b"reason", b"unknown op"),
        (b"rejected_at_ms", b"99"),
        (b"inbound_id", b"7-1"),
    ]


def test_a_rejected_send_names_its_id_for_status() -> None:
    message_id = new_message_id(1_800_000_000_000)
    [row] = ordered_rows([batch(reject("1-0", "bad topic", [], message_id))], rejected_at_ms=5)
    assert isinstance(row, Reject)
    assert row.message_id == message_id


def run(
    rows: Sequence[SinkRow],
    first_row: int = 0,
    max_chunk_rows: int = 500,
    ahead: dict[int, int] | None = None,
    max_chunk_bytes: int = MAX_CHUNK_BYTES,
) -> list[tuple[int, list[SinkRow]]]:
    """Write with a fake chunk writer; ``ahead`` maps a first row to where another attempt got."""
    writes: list[tuple[int, list[SinkRow]]] = []

    def write_chunk(first: int, chunk: Sequence[SinkRow]) -> ChunkResult:
        if ahead and first in ahead:
            return ChunkResult(ahead[first], delivered=0, duplicates=0, dropped=0, rejected=0)
        writes.append((first, list(chunk)))
        return ChunkResult(
            first + len(chunk), delivered=len(chunk), duplicates=0, dropped=0, rejected=0
        )

    write_in_chunks(
        rows,
        first_row,
        write_chunk,
        max_chunk_rows=max_chunk_rows,
        max_chunk_bytes=max_chunk_bytes,
    )
    return writes


def drop(n: int) -> Drop:
    return Drop("t", str(n), b"", "", "{}", n, 1)


def test_rows_are_written_in_order_in_bounded_chunks() -> None:
    rows = [drop(n) for n in range(1_201)]
    writes = run(rows, max_chunk_rows=500)
    assert [(first, len(chunk)) for first, chunk in writes] == [(0, 500), (500, 500), (1_000, 201)]
    assert [row for _, chunk in writes for row in chunk] == rows


def test_writing_resumes_after_the_rows_already_written() -> None:
    rows = [drop(n) for n in range(10)]
    assert run(rows, first_row=7) == [(7, [drop(7), drop(8), drop(9)])]
    assert run(rows, first_row=10) == []


def test_writing_jumps_ahead_when_another_attempt_got_further() -> None:
    rows = [drop(n) for n in range(6)]
    writes = run(rows, max_chunk_rows=2, ahead={0: 4})  # another attempt wrote rows 0..3
    assert writes == [(4, [drop(4), drop(5)])]


def big_reject(n: int, body: bytes) -> Reject:
    return Reject([(b"body", body)], reason="too big", message_id=str(n))


def test_a_chunk_ends_before_it_would_pass_its_byte_limit() -> None:
    rows: list[SinkRow] = [big_reject(n, bytes(400)) for n in range(5)] + [drop(5)]
    writes = run(rows, max_chunk_bytes=1_000)
    assert [(first, len(chunk)) for first, chunk in writes] == [(0, 2), (2, 2), (4, 2)]
    assert [row for _, chunk in writes for row in chunk] == rows


def test_a_row_bigger_than_the_byte_limit_is_a_chunk_of_its_own() -> None:
    rows: list[SinkRow] = [drop(0), big_reject(1, bytes(5_000)), drop(2)]
    writes = run(rows, max_chunk_bytes=1_000)
    assert [(first, len(chunk)) for first, chunk in writes] == [(0, 1), (1, 1), (2, 1)]


def test_the_byte_limit_holds_500_rejects_of_the_largest_size_apart() -> None:
    # 500 rejects of 4 MiB in one script would pass Redis's 1 GiB query buffer.
    body = bytes(4 * 1024 * 1024)
    rows: list[SinkRow] = [big_reject(n, body) for n in range(40)]
    writes = run(rows)
    assert all(sum(row_bytes(row) for row in chunk) <= MAX_CHUNK_BYTES for _, chunk in writes)
    assert [len(chunk) for _, chunk in writes] == [15, 15, 10]  # 15 x (4 MiB + "body")
