"""Input that once made a 500, or left something behind for millennia, gets a 4xx in
the error shape and changes nothing: through HTTP, the SDK and raw records."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import redis

from delayline import Client
from delayline.api.app import create_app
from delayline.errors import ValidationError
from delayline.ids import new_message_id
from delayline.model import Message, decode_record
from delayline.timing import now_ms
from delayline.validation import Limits
from tests.support.asgi import asgi_client

YEAR_MS = 365 * 24 * 3600 * 1000
#: Well formed, but due after the year 9999.
AFTER_9999 = "7" * 26


def http(redis_url: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async def call() -> httpx.Response:
        async with asgi_client(create_app(redis_url), base_url="http://127.0.0.1") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(call())


def refused(response: httpx.Response, field: str, rule: str) -> None:
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field, response.text
    assert response.json()["error"]["rule"] == rule, response.text


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ('"body": "\\ud800"', "body"),
        ('"body": "x", "key": "order-\\udfff"', "key"),
        ('"body": "x", "headers": {"trace": "\\ud83d"}', "headers"),
        ('"body": "x", "headers": {"\\ud83d": "v"}', "headers"),
    ],
)
def test_a_lone_surrogate_is_a_422_and_nothing_is_sent(
    redis_url: str, raw_redis: redis.Redis, item: str, field: str
) -> None:
    content = ('{"topic": "orders", "delay_ms": 60000, ' + item + "}").encode()
    response = http(
        redis_url, "POST", "/v1/messages", content=content,
        headers={"content-type": "application/json"},
    )  # fmt: skip
    refused(response, field, "utf-8")
    batch = http(
        redis_url, "POST", "/v1/messages:batch",
        content=b'{"messages": [{"topic": "orders", ' + item.encode() + b"}]}",
        headers={"content-type": "application/json"},
    )  # fmt: skip
    assert batch.status_code == 200, batch.text
    assert batch.json()["results"][0]["error"]["rule"] == "utf-8"
    assert raw_redis.keys("delayline:inbound*") == []
    with Client(redis_url) as client, pytest.raises(ValidationError, match="lone surrogate"):
        client.send("orders", "\ud800", delay=60_000)


@pytest.mark.parametrize(
    "query", ["from=9999-12-31T23:59:59-23:59", "to=9999-12-31T23:59:59.999-00:01"]
)
def test_a_window_after_the_year_9999_is_a_422(redis_url: str, query: str) -> None:
    refused(http(redis_url, "GET", f"/v1/pending?{query}"), query.split("=")[0], "range")


def test_an_id_due_after_the_year_9999_is_not_an_id(redis_url: str) -> None:
    for method in ("GET", "DELETE"):
        refused(http(redis_url, method, f"/v1/messages/{AFTER_9999}"), "id", "format")


def test_a_cancel_of_a_made_up_far_future_id_is_refused_and_keeps_nothing(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    made_up = new_message_id(now_ms() + 5_000 * YEAR_MS)
    refused(http(redis_url, "DELETE", f"/v1/messages/{made_up}"), "id", "max_delay")
    with Client(redis_url) as client:
        with pytest.raises(ValidationError, match="beyond the maximum delay"):
            client.cancel(made_up)
        with pytest.raises(ValidationError, match="beyond the maximum delay"):
            client.reschedule(made_up, delay=1_000)
    assert raw_redis.keys("*") == []


def test_raw_cancels_and_reschedules_are_held_to_the_sends_time_range() -> None:
    limits, now = Limits(), now_ms()
    original = Message.create("orders", b"x", now_ms=now, limits=limits, delay=60_000)
    far = new_message_id(now + 5_000 * YEAR_MS)
    fields = {
        b"v": b"1",
        b"op": b"reschedule",
        b"id": original.id.encode(),
        b"new_id": far.encode(),
    }
    # Refused whole: the reschedule cancels nothing, and the original is delivered.
    with pytest.raises(ValidationError, match="beyond the maximum delay") as raised:
        decode_record(fields, received_ms=now, limits=limits)
    assert raised.value.field == "new_id"
    cancel = {b"v": b"1", b"op": b"cancel", b"id": far.encode()}
    with pytest.raises(ValidationError, match="beyond the maximum delay"):
        decode_record(cancel, received_ms=now, limits=limits)
    beyond = {b"v": b"1", b"op": b"cancel", b"id": AFTER_9999.encode()}
    with pytest.raises(ValidationError, match="not a delayline message id"):
        decode_record(beyond, received_ms=now, limits=limits)
