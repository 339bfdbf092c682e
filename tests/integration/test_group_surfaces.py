"""Groups through the HTTP API against a real server: the Manager's routes behind the
admin token only; a group's token acts for the group (its topics, its counters); each
quota refused with its status and a clear error body."""

from __future__ import annotations

import asyncio

import redis
from click.testing import CliRunner

from delayline import Client
from delayline.api.app import create_app
from delayline.cli import main
from delayline.redis import keys
from tests.support.asgi import asgi_client

ADMIN = {"Authorization": "Bearer admin-token"}
BASE = "http://127.0.0.1:8470"


def test_the_manager_creates_groups_and_a_groups_token_sends_as_the_group(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    async def scenario() -> None:
        app = create_app(redis_url, api_token="admin-token")
        async with asgi_client(app, base_url=BASE) as http:
            body = {"name": "billing", "quotas": {"max_body_bytes": 8, "topic_patterns": ["inv.*"]}}
            created = await http.post("/v1/admin/groups", json=body, headers=ADMIN)
            assert created.status_code == 201, created.text
            token = created.json()["token"]
            assert created.json()["quotas"]["max_body_bytes"] == 8
            assert created.json()["health"]["pending"] == 0
            taken = await http.post("/v1/admin/groups", json=body, headers=ADMIN)
            assert taken.status_code == 409
            group = {"Authorization": f"Bearer {token}"}
            # The group's token is no admin's: the Manager's routes refuse it.
            refused = await http.get("/v1/admin/groups", headers=group)
            assert refused.status_code == 403
            assert refused.json()["error"]["rule"] == "admin"
            sent = await http.post(
                "/v1/messages",
                json={"topic": "inv.eu", "body": "x", "delay_ms": 3_600_000},
                headers=group,
            )
            assert sent.status_code == 201, sent.text
            for message, status, quota in [
                ({"topic": "other", "body": "x", "delay_ms": 3_600_000}, 403, "topic_patterns"),
                (
                    {"topic": "inv.eu", "body": "x" * 9, "delay_ms": 3_600_000},
                    413,
                    "max_body_bytes",
                ),
            ]:
                over = await http.post("/v1/messages", json=message, headers=group)
                assert over.status_code == status, over.text
                assert over.json()["error"]["field"] == quota
                assert "group 'billing'" in over.json()["error"]["message"]
            bad = await http.post("/v1/admin/groups", json={"name": "Bad Name"}, headers=ADMIN)
            assert bad.status_code == 422
            assert bad.json()["error"]["field"] == "group"
            listed = await http.get("/v1/admin/groups", headers=ADMIN)
            assert [g["name"] for g in listed.json()] == ["billing"]
            detail = await http.get("/v1/admin/groups/billing?minutes=5", headers=ADMIN)
            assert len(detail.json()["history"]["minutes"]) == 5
            changed = await http.put(
                "/v1/admin/groups/billing/quotas", json={"max_send_per_s": 1}, headers=ADMIN
            )
            assert changed.json()["quotas"]["max_send_per_s"] == 1
            assert changed.json()["quotas"]["max_body_bytes"] is None
            missing = await http.get("/v1/admin/groups/ghost", headers=ADMIN)
            assert missing.status_code == 404
            scraped = (await http.get("/metrics", headers=ADMIN)).text
            assert 'delayline_messages_accepted_total{group="billing"} ' in scraped
            assert 'group="' not in (await http.get("/metrics", headers=group)).text
            wrong = await http.get("/v1/stats", headers={"Authorization": "Bearer nobody"})
            assert wrong.status_code == 401

    asyncio.run(scenario())
    # The send went to the group's lane: its inbound record names the group's topic.
    ((_, record),) = raw_redis.xrange(keys.INBOUND)
    assert record[b"topic"] == b"billing/inv.eu"


def test_without_an_admin_token_the_manager_is_closed(redis_url: str) -> None:
    async def scenario() -> None:
        app = create_app(redis_url)
        async with asgi_client(app, base_url=BASE) as http:
            refused = await http.post("/v1/admin/groups", json={"name": "x"})
            assert refused.status_code == 403
            assert "admin token" in refused.json()["error"]["message"]
            assert (await http.get("/v1/stats")).status_code == 200  # the rest as before

    asyncio.run(scenario())


def test_the_cli_creates_lists_and_acts_for_a_group(redis_url: str, raw_redis: redis.Redis) -> None:
    env = {"DELAYLINE_REDIS_URL": redis_url}
    run = CliRunner().invoke
    made = run(
        main,
        ["groups", "create", "ops", "--max-body-bytes", "4", "--topic-pattern", "a.*"],
        env=env,
    )
    assert made.exit_code == 0, made.output
    assert made.output.splitlines()[0] == "created ops: body bytes 4, topics a.*"
    token = made.output.splitlines()[1].rpartition(" ")[2]
    with Client(redis_url) as client:
        assert client.group_of_token(token) == "ops"
    listed = run(main, ["groups", "list"], env=env)
    assert listed.output.strip() == "ops: body bytes 4, topics a.*"
    sent = run(main, ["--group", "ops", "send", "a.x", "hi", "--delay", "1h"], env=env)
    assert sent.exit_code == 0, sent.output
    ((_, record),) = raw_redis.xrange(keys.INBOUND)
    assert record[b"topic"] == b"ops/a.x"
    over = run(main, ["--group", "ops", "send", "a.x", "hello", "--delay", "1h"], env=env)
    assert over.exit_code == 1
    assert over.output.strip() == ("error: group 'ops': a body of 5 bytes is over the group's 4")
    bad = run(main, ["--group", "No Such", "stats"], env=env)
    assert bad.exit_code == 2
    assert "a group's name is 1-32 characters" in bad.output
    assert "Traceback" not in bad.output
    unknown = run(main, ["--group", "ghost", "send", "t", "x"], env=env)
    assert unknown.exit_code == 1
    assert "no group 'ghost'" in unknown.output
    taken = run(main, ["groups", "create", "ops"], env=env)
    assert taken.exit_code == 1
    assert "exists already" in taken.output
    shown = run(main, ["groups", "show", "ops"], env=env)
    assert shown.exit_code == 0, shown.output
    assert "pending 0" in shown.output
    changed = run(main, ["groups", "quotas", "ops", "--max-pending", "9"], env=env)
    assert changed.output.strip() == "ops: pending 9"


def test_the_pending_and_rate_quotas_answer_429_over_http(redis_url: str) -> None:
    async def scenario() -> None:
        app = create_app(redis_url, api_token="admin-token")
        async with asgi_client(app, base_url=BASE) as http:
            body = {"name": "small", "quotas": {"max_pending": 2}}
            token = (await http.post("/v1/admin/groups", json=body, headers=ADMIN)).json()["token"]
            group = {"Authorization": f"Bearer {token}"}
            message = {"topic": "t", "body": "x", "delay_ms": 30_000}  # near: counted at once
            for _ in range(2):
                sent = await http.post("/v1/messages", json=message, headers=group)
                assert sent.status_code == 201, sent.text
            full = await http.post("/v1/messages", json=message, headers=group)
            assert full.status_code == 429
            assert full.json()["error"]["field"] == "max_pending"
            quotas = {"max_send_per_s": 3}
            await http.put("/v1/admin/groups/small/quotas", json=quotas, headers=ADMIN)
            app.state.group_clients.clear()  # the API's clients read quotas every 10 s
            batch = {"messages": [message] * 4}
            over = await http.post("/v1/messages:batch", json=batch, headers=group)
            assert over.status_code == 429, over.text
            assert over.json()["error"]["field"] == "max_send_per_s"
            assert "4 more would pass the group's 3 a second" in over.json()["error"]["message"]

    asyncio.run(scenario())


def test_an_open_api_reads_as_before_with_a_stale_cookie_and_refuses_a_bad_header(
    redis_url: str,
) -> None:
    async def scenario() -> None:
        app = create_app(redis_url)  # no admin token: open on the loopback
        async with asgi_client(app, base_url=BASE) as http:
            stale = {"Cookie": "delayline_token=an-earlier-runs-token"}
            assert (await http.get("/v1/stats", headers=stale)).status_code == 200
            wrong = {"Authorization": "Bearer not-a-groups-token"}
            assert (await http.get("/v1/stats", headers=wrong)).status_code == 401

    asyncio.run(scenario())
