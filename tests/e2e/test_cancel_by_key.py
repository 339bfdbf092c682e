"""A cancel by key right after the send wins, through the SDK, HTTP and the CLI, for a
message due within the horizon (the outbox) and one beyond it (the inbound stream,
then Spark's state), against the session's running scheduler (1 s horizon).

"Cancel the timeout of order 42" comes a moment after the order: the messages are
then on the inbound stream or in the batch in flight, which the last committed
batch's state does not hold yet.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
from click.testing import CliRunner

from delayline import Client
from delayline.api.app import create_app
from delayline.cli import main
from tests.support.asgi import asgi_client
from tests.support.harness import Service, wait_for

pytestmark = pytest.mark.spark

#: Within the shared service's 1 s horizon (straight to the outbox), and beyond it.
DELAYS_MS = {"near": 500, "far": 2_500}
DOOMED = 3


def send_and_cancel_sdk(url: str, topic: str, delay_ms: int) -> tuple[list[str], int]:
    with Client(url) as client:
        sent = client.send_many(
            [{"topic": topic, "body": b"x", "delay": delay_ms, "key": "order-42"}] * DOOMED
        )
        return sent, client.cancel_key(topic, "order-42")


def send_and_cancel_http(url: str, topic: str, delay_ms: int) -> tuple[list[str], int]:
    async def scenario() -> tuple[list[str], int]:
        async with asgi_client(create_app(url), base_url="http://127.0.0.1") as http:
            item = {"topic": topic, "body": "x", "delay_ms": delay_ms, "key": "order-42"}
            sent = await http.post("/v1/messages:batch", json={"messages": [item] * DOOMED})
            assert sent.status_code == 200, sent.text
            cancelled = await http.delete(
                "/v1/messages", params={"topic": topic, "key": "order-42"}
            )
            assert cancelled.status_code == 200, cancelled.text
            ids = [result["id"] for result in sent.json()["results"]]
            return ids, int(cancelled.json()["cancelled"])

    return asyncio.run(scenario())


def send_and_cancel_cli(url: str, topic: str, delay_ms: int) -> tuple[list[str], int]:
    runner, env = CliRunner(), {"DELAYLINE_REDIS_URL": url}
    sent = []
    for _ in range(DOOMED):
        result = runner.invoke(
            main, ["send", topic, "x", "--delay", f"{delay_ms}ms", "--key", "order-42"], env=env
        )
        assert result.exit_code == 0, result.output
        sent.append(result.output.strip())
    result = runner.invoke(main, ["cancel", "--topic", topic, "--key", "order-42"], env=env)
    assert result.exit_code == 0, result.output
    assert result.output.startswith("cancelled "), result.output
    return sent, int(result.output.split()[1])


SURFACES: dict[str, Callable[[str, str, int], tuple[list[str], int]]] = {
    "sdk": send_and_cancel_sdk,
    "http": send_and_cancel_http,
    "cli": send_and_cancel_cli,
}


@pytest.mark.parametrize("path", DELAYS_MS)
@pytest.mark.parametrize("surface", SURFACES)
def test_a_cancel_by_key_right_after_the_send_wins(
    default_service: Service, surface: str, path: str
) -> None:
    topic = f"bykey.{uuid.uuid4().hex[:8]}"
    delay_ms = DELAYS_MS[path]
    doomed, cancelled = SURFACES[surface](default_service.url, topic, delay_ms)
    with Client(default_service.url) as client:
        # Due after the doomed ones: once it is delivered, they would have been too.
        kept = client.send(topic, b"kept", delay=delay_ms + 300, key="order-7")
        assert cancelled == DOOMED
        assert {client.status(message_id).state for message_id in doomed} == {"cancelled"}
    wait_for(lambda: default_service.raw.xlen(topic) >= 1, 30, "the kept message's delivery")
    delivered = [fields[b"id"].decode() for _, fields in default_service.raw.xrange(topic)]
    assert delivered == [kept]


@pytest.mark.parametrize("path", DELAYS_MS)
def test_a_reschedule_by_key_right_after_the_send_moves_every_one(
    default_service: Service, path: str
) -> None:
    topic = f"rekey.{uuid.uuid4().hex[:8]}"
    delay_ms = DELAYS_MS[path]
    with Client(default_service.url) as client:
        sent = client.send_many(
            [{"topic": topic, "body": b"x", "delay": delay_ms, "key": "order-42"}] * DOOMED
        )
        moved = client.reschedule_key(topic, "order-42", delay=delay_ms + 1_000)
        assert set(moved) == set(sent)
        assert {client.status(message_id).state for message_id in sent} == {"rescheduled"}
    wait_for(lambda: default_service.raw.xlen(topic) >= DOOMED, 30, "the moved messages")
    delivered = [fields[b"id"].decode() for _, fields in default_service.raw.xrange(topic)]
    assert sorted(delivered) == sorted(moved.values())
