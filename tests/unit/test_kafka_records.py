"""delayline's records in Kafka: the inbound layout round-trips, entry ids are unique
and never a Redis stream's, and the console form refuses what it cannot carry."""

from __future__ import annotations

import pytest

from delayline.errors import ValidationError
from delayline.kafka import records
from delayline.model import Cancel, Message
from delayline.scheduler.pipeline.feeds import id_order
from delayline.scheduler.pipeline.records import entry_time_ms
from delayline.validation import Limits


def message(key: str | None = None, headers: dict[str, str] | None = None) -> Message:
    return Message.create(
        "orders", b"\x00body", now_ms=1_000, limits=Limits(), delay=60_000, key=key, headers=headers
    )


@pytest.mark.parametrize(
    "fields",
    [
        message(key="order-42", headers={"trace": "t"}).to_record(),
        message().to_record(),
        Cancel(id=message().id, sent_at_ms=1_000).to_record(),
    ],
)
def test_an_inbound_record_comes_back_field_for_field(fields: dict[bytes, bytes]) -> None:
    kafka = records.to_inbound(fields)
    assert kafka.topic == records.INBOUND_TOPIC
    assert kafka.value == fields.get(b"body")
    assert kafka.key == fields.get(b"key")
    headers = [(name, value if isinstance(value, bytes) else None) for name, value in kafka.headers]
    assert records.from_inbound(kafka.key, kafka.value, headers) == fields


def test_the_kafka_key_is_the_message_key_unless_a_header_gives_one() -> None:
    assert records.from_inbound(b"k", b"v", [("v", b"1")]) == {
        b"v": b"1",
        b"body": b"v",
        b"key": b"k",
    }
    assert records.from_inbound(b"k", None, [("key", b"h")]) == {b"key": b"h"}


def test_entry_ids_carry_the_timestamp_and_sort_by_partition_then_offset() -> None:
    ids = [records.entry_id(5_000, p, o) for p in (0, 1, 7) for o in (0, 1, 2**40 - 1)]
    assert len(set(ids)) == len(ids)
    assert all(entry_time_ms(entry_id) == 5_000 for entry_id in ids)
    assert sorted(ids, key=id_order) == ids
    # A Redis stream's seq at the same millisecond is far smaller.
    assert id_order("5000-999999") < id_order(ids[0])
    # A record without a timestamp (-1) counts from the epoch: never from the future.
    assert entry_time_ms(records.entry_id(-1, 0, 0)) == 0


def test_console_headers_name_every_field_but_the_body() -> None:
    fields = message(key="order-42").to_record()
    line = records.console_headers(fields)
    parsed = dict(part.split(":", 1) for part in line.split(","))
    assert parsed == {k.decode(): v.decode() for k, v in fields.items() if k != b"body"}


def test_console_headers_refuse_a_value_the_console_format_cannot_carry() -> None:
    with pytest.raises(ValidationError, match="headers: kafka-console-producer cannot carry"):
        records.console_headers(message(headers={"a": "b"}).to_record())
