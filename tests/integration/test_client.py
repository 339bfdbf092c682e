from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import redis

from delayline import Client, ids
from delayline.errors import InvalidMessageIdError, ValidationError
from delayline.model import decode_record
from delayline.redis import keys
from delayline.validation import Limits


@pytest.fixture
def client(redis_url: str) -> Client:
    return Client(redis_url)


def inbound(raw_redis: redis.Redis) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in raw_redis.xrange(keys.INBOUND)]


def test_send_appends_one_versioned_record(client: Client, raw_redis: redis.Redis) -> None:
    before = datetime.now(UTC)
    message_id = client.send(
        "orders.timeout",
        b"order-42",
        delay=timedelta(minutes=30),
        key="42",
        headers={"trace": "t1"},
    )
    [record] = inbound(raw_redis)
    message = decode_record(record, received_ms=int(before.timestamp() * 1000), limits=Limits())
    assert message.id == message_id
    assert (message.topic, message.body, message.key, message.headers) == (  # type: ignore[union-attr]
        "orders.timeout",
        b"order-42",
        "42",
        {"trace": "t1"},
    )
    due_ms = ids.deliver_at_ms_of(message_id)
    expected_ms = int((before + timedelta(minutes=30)).timestamp() * 1000)
    assert expected_ms <= due_ms <= expected_ms + 5_000


def test_send_forms_of_time(client: Client) -> None:
    assert ids.deliver_at_ms_of(client.send("t", b"x", deliver_at=1_767_225_600_000)) == (
        1_767_225_600_000
    )
    moment = datetime(2027, 1, 1, tzinfo=UTC)
    assert ids.deliver_at_ms_of(client.send("t", "text", deliver_at=moment)) == int(
        moment.timestamp() * 1000
    )
    level_id = client.send("retry.calls", b"...", level=5)
    assert (
        55_000
        < ids.deliver_at_ms_of(level_id) - int(datetime.now(UTC).timestamp() * 1000)
        <= 60_000
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"topic": "bad topic"}, "topic"),
        ({"level": 19}, "level"),
        ({"delay": -5}, "delay"),
        ({"delay": 1, "level": 1}, "level"),
        ({"deliver_at": datetime(2027, 1, 1)}, "deliver_at"),
        ({"headers": {"n": 1}}, "headers"),
    ],
)
def test_invalid_sends_raise_and_write_nothing(
    client: Client, raw_redis: redis.Redis, kwargs: dict[str, object], field: str
) -> None:
    arguments: dict[str, object] = {"topic": "t", "body": b"x"} | kwargs
    with pytest.raises(ValidationError) as caught:
        client.send(**arguments)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert raw_redis.exists(keys.INBOUND) == 0


def test_oversize_body_is_refused_by_the_clients_limits(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    small = Client(redis_url, limits=Limits(max_body_bytes=4))
    with pytest.raises(ValidationError, match="more than the limit of 4"):
        small.send("t", b"12345")
    assert raw_redis.exists(keys.INBOUND) == 0


def test_cancel_appends_a_cancel_record(client: Client, raw_redis: redis.Redis) -> None:
    message_id = client.send("t", b"x", delay=60_000)
    assert client.cancel(message_id) is True
    cancel = inbound(raw_redis)[-1]
    assert (cancel[b"op"], cancel[b"id"]) == (b"cancel", message_id.encode())


def test_cancel_of_a_malformed_id_raises(client: Client, raw_redis: redis.Redis) -> None:
    with pytest.raises(InvalidMessageIdError):
        client.cancel("nope")
    assert raw_redis.exists(keys.INBOUND) == 0
