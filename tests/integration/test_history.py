"""The delivery history against a real server: the scripts that deliver, drop and
reject count each minute, with its lateness, for a day and an hour; the SDK, the
HTTP API and the CLI read it."""

from __future__ import annotations

import asyncio
import json

import redis
from click.testing import CliRunner

from delayline import Client
from delayline.api.app import create_app
from delayline.cli import main
from delayline.ids import new_message_id
from delayline.metrics import bucket_labels
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.rows import Reject
from delayline.testing import wait_for
from delayline.timing import now_ms
from tests.support.asgi import asgi_client
from tests.support.sinking import delivered, dropped, sink


def test_each_minute_counts_what_was_delivered_dropped_and_rejected(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    late = [new_message_id(now_ms() - 40) for _ in range(3)]
    sink(redis_url, *(delivered(message_id, topic="orders") for message_id in late))
    sink(redis_url, dropped(new_message_id(now_ms() - 5)))
    sink(redis_url, Reject([(b"op", b"nope")], "unknown op 'nope'"))
    # One through the outbox and the pump.
    store = DeliveryStore.from_url(redis_url)
    sink(redis_url, delivered(new_message_id(now_ms() + 200), topic="orders"))
    wait_for(lambda: store.pump(100, 3600).moved, 10, "the pump", interval_s=0.01)
    with Client(redis_url) as client:
        history = client.history(2)
    assert len(history.minutes) == 2
    assert history.delivered == 4
    assert sum(m.dropped for m in history.minutes) == 1
    assert sum(m.rejected for m in history.minutes) == 1
    lateness = {}
    for minute in history.minutes:
        for label, count in minute.lateness.items():
            lateness[label] = lateness.get(label, 0) + count
    # The three due 40 ms before they were written: in the buckets past 20 ms.
    assert sum(lateness.get(label, 0) for label in bucket_labels()[5:]) >= 3
    assert bucket_labels()[4] == "20"
    # Kept for a day and an hour after its minute, no longer.
    [key] = [k for k in raw_redis.keys(keys.UNSHARDED.history(0)[:-1] + "*")]
    assert 24 * 3600 < raw_redis.ttl(key) <= keys.HISTORY_TTL_S + 60


def test_the_http_api_and_the_cli_read_it(redis_url: str) -> None:
    sink(redis_url, delivered(new_message_id(now_ms() - 3), topic="orders"))

    async def scenario() -> None:
        app = create_app(redis_url)
        async with asgi_client(app, base_url="http://127.0.0.1:8470") as http:
            body = (await http.get("/v1/history", params={"minutes": 5})).json()
            assert (body["delivered"], len(body["minutes"])) == (1, 5)
            assert body["from"] < body["to"]
            assert body["minutes"][-1]["delivered"] + body["minutes"][-2]["delivered"] == 1
            refused = await http.get("/v1/history", params={"minutes": 0})
            assert refused.status_code == 422

    asyncio.run(scenario())
    env = {"DELAYLINE_REDIS_URL": redis_url}
    table = CliRunner().invoke(main, ["history", "--minutes", "3"], env=env)
    assert table.exit_code == 0, table.output
    [total] = [line for line in table.output.splitlines() if line.startswith("in all")]
    assert total.split() == ["in", "all", "1"]
    shown = CliRunner().invoke(main, ["history", "--json"], env=env)
    assert json.loads(shown.output)["delivered"] == 1
    refused = CliRunner().invoke(main, ["history", "--minutes", "0"], env=env)
    assert refused.exit_code == 2
    assert "Traceback" not in refused.output
