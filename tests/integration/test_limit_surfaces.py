"""Delivery limits through the HTTP API and the CLI, against a real server: set, list and
delete; bad input refused with a clear error (422, exit 2), never a traceback."""

from __future__ import annotations

import asyncio
import json

import redis
from click.testing import CliRunner

from delayline import Client
from delayline.api.app import create_app
from delayline.cli import main
from delayline.limits import TopicLimit
from delayline.redis import keys
from tests.support.asgi import asgi_client


def test_the_http_api_sets_lists_and_deletes_a_limit(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    async def scenario() -> None:
        app = create_app(redis_url)
        async with asgi_client(app, base_url="http://127.0.0.1:8470") as http:
            put = await http.put("/v1/limits/reports", json={"rate_per_s": 2000, "spread": "30s"})
            assert put.status_code == 200, put.text
            assert put.json() == {"topic": "reports", "rate_per_s": 2000, "spread_ms": 30_000}
            listed = await http.get("/v1/limits")
            assert listed.json() == [put.json()]
            for bad, field in [
                ({"rate_per_s": 0}, "rate_per_s"),
                ({"rate_per_s": "fast"}, "rate_per_s"),
                ({"spread": "soon"}, "spread_ms"),
                ({"spread": -1}, "spread_ms"),
                ({}, "limit"),
                ({"rate_per_s": 5, "burst": 2}, "burst"),
            ]:
                refused = await http.put("/v1/limits/reports", json=bad)
                assert refused.status_code == 422, (bad, refused.text)
                assert field in refused.text, (bad, refused.text)
            assert (await http.put("/v1/limits/delayline:x", json={"spread": 5})).status_code == 422
            assert (await http.delete("/v1/limits/reports")).status_code == 204
            gone = await http.delete("/v1/limits/reports")
            assert gone.status_code == 404
            assert gone.json()["error"]["rule"] == "unknown"

    asyncio.run(scenario())
    assert raw_redis.hlen(keys.UNSHARDED.limits) == 0


def test_the_cli_sets_lists_and_deletes_a_limit(redis_url: str) -> None:
    env = {"DELAYLINE_REDIS_URL": redis_url}
    run = CliRunner().invoke
    done = run(main, ["limits", "set", "reports", "--rate", "2000", "--spread", "1m"], env=env)
    assert done.exit_code == 0, done.output
    assert done.output.strip() == "reports: at most 2,000/s, spread over 1m"
    with Client(redis_url) as client:
        assert client.topic_limits() == [TopicLimit("reports", 2000, 60_000)]
    listed = run(main, ["limits", "list", "--json"], env=env)
    assert json.loads(listed.output) == [
        {"topic": "reports", "rate_per_s": 2000, "spread_ms": 60_000}
    ]
    for bad in (
        ["limits", "set", "reports"],
        ["limits", "set", "reports", "--rate", "0"],
        ["limits", "set", "reports", "--spread", "soon"],
        ["limits", "set", "delayline:x", "--rate", "1"],
        ["limits", "rm", "other"],
    ):
        refused = run(main, bad, env=env)
        assert refused.exit_code == 2, (bad, refused.output)
        assert "Traceback" not in refused.output
    assert run(main, ["limits", "rm", "reports"], env=env).exit_code == 0
    assert run(main, ["limits", "list"], env=env).output.strip() == "no topic has a delivery limit"
