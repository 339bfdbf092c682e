"""The HTTP API through httpx against the real app and a real Redis."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
import pytest
import redis

from delayline.api.app import create_app
from delayline.ids import deliver_at_ms_of, new_message_id
from delayline.listing import PendingMessage
from delayline.redis import keys
from delayline.redis.store import DeliveryStore
from delayline.rows import Reject
from delayline.testing import free_port
from delayline.timing import now_ms
from tests.support.asgi import asgi_client
from tests.support.sinking import answer, count_inbound, delivered, sink

Scenario = Callable[[httpx.AsyncClient], Coroutine[Any, Any, None]]


def call(redis_url: str, scenario: Scenario, **app_options: Any) -> None:
    """Run ``scenario`` against a fresh app, over httpx's ASGI transport."""

    async def main() -> None:
        app = create_app(redis_url, **app_options)
        async with asgi_client(app, base_url="http://127.0.0.1:8470") as http:
            await scenario(http)

    asyncio.run(main())


def error_of(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    return response.status_code, body["error"]["field"], body["error"]["rule"]


def test_post_a_message(redis_url: str, raw_redis: redis.Redis) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        before = now_ms()
        response = await http.post(
            "/v1/messages",
            json={
                "topic": "orders.timeout",
                "body": "order-42",
                "delay_ms": 1_800_000,
                "key": "42",
                "headers": {"trace": "t1"},
            },
        )
        assert response.status_code == 201
        created = response.json()
        assert set(created) == {"id", "deliver_at", "deliver_at_ms"}
        assert before + 1_800_000 <= created["deliver_at_ms"] <= now_ms() + 1_800_000
        assert created["deliver_at"].endswith("Z")
        binary = await http.post(
            "/v1/messages",
            json={"topic": "t", "level": 6, "body_b64": base64.b64encode(b"\x00\xff").decode()},
        )
        assert binary.status_code == 201
        at = await http.post(
            "/v1/messages",
            json={"topic": "t", "body": "x", "deliver_at": "2027-01-01T00:00:00+08:00"},
        )
        assert at.json()["deliver_at"] == "2026-12-31T16:00:00.000Z"
        epoch = await http.post(
            "/v1/messages", json={"topic": "t", "body": "x", "deliver_at": 1_800_000_000_000}
        )
        assert epoch.json()["deliver_at_ms"] == 1_800_000_000_000

    call(redis_url, scenario)
    records = [fields for _, fields in raw_redis.xrange(keys.INBOUND)]
    assert [r[b"topic"] for r in records] == [b"orders.timeout", b"t", b"t", b"t"]
    assert records[0][b"headers"] == b'{"trace":"t1"}'
    assert records[1][b"body"] == b"\x00\xff"


@pytest.mark.parametrize(
    ("payload", "field", "rule"),
    [
        ({"topic": "bad topic", "body": "x"}, "topic", "pattern"),
        ({"topic": "delayline:inbound", "body": "x"}, "topic", "reserved"),
        ({"topic": "t"}, "body", "exclusive"),
        ({"topic": "t", "body": "x", "body_b64": "eA=="}, "body", "exclusive"),
        ({"topic": "t", "body_b64": "%%%"}, "body_b64", "base64"),
        ({"topic": "t", "body_b64": "\u0080"}, "body_b64", "base64"),  # found by schemathesis
        (
            {"topic": "t", "body": "x", "deliver_at": "2026-12-01T09:00:00"},
            "deliver_at",
            "timezone",
        ),
        ({"topic": "t", "body": "x", "deliver_at": "soon"}, "deliver_at", "rfc3339"),
        ({"topic": "t", "body": "x", "deliver_at": "2026-W50-1T09:00Z"}, "deliver_at", "rfc3339"),
        ({"topic": "t", "body": "x", "deliver_at": "2026-335T09:00:00Z"}, "deliver_at", "rfc3339"),
        ({"topic": "t", "body": "x", "deliver_at": ""}, "deliver_at", "rfc3339"),
        ({"topic": "t", "body": "x", "delay_ms": -1}, "delay", "negative"),
        ({"topic": "t", "body": "x", "delay_ms": 1, "level": 1}, "level", "exclusive"),
        ({"topic": "t", "body": "x", "level": 19}, "level", "range"),
        ({"topic": "t", "body": "x", "delay_ms": 10**13}, "delay", "max_delay"),
        ({"topic": "t", "body": "x", "headers": {"n": 1}}, "headers.n", "string_type"),
        ({"topic": "t", "body": "x", "colour": "red"}, "colour", "extra_forbidden"),
        ({"topic": 7, "body": "x"}, "topic", "string_type"),
        ({"topic": "t", "body": "x", "delay_ms": 1.5}, "delay_ms", "int_type"),
    ],
)
def test_bad_messages_get_422_and_write_nothing(
    redis_url: str, raw_redis: redis.Redis, payload: dict[str, Any], field: str, rule: str
) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        response = await http.post("/v1/messages", json=payload)
        assert error_of(response) == (422, field, rule)
        assert response.json()["error"]["message"]

    call(redis_url, scenario)
    assert raw_redis.exists(keys.INBOUND) == 0


def test_oversize_body_and_malformed_json(redis_url: str, raw_redis: redis.Redis) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        big = await http.post("/v1/messages", json={"topic": "t", "body": "x" * 2_000_000})
        assert error_of(big) == (422, "body", "max_bytes")
        huge = await http.post(
            "/v1/messages",
            content=b"{" + b" " * 5_000_000 + b"}",
            headers={"content-type": "application/json"},
        )
        assert error_of(huge) == (413, "request", "max_bytes")
        broken = await http.post(
            "/v1/messages", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert broken.status_code == 422

    call(redis_url, scenario, max_request_bytes=4_000_000)
    assert raw_redis.exists(keys.INBOUND) == 0


def test_batch_reports_each_item_and_sends_the_good_ones(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        response = await http.post(
            "/v1/messages:batch",
            json={
                "messages": [
                    {"topic": "t", "body": "a", "delay_ms": 120_000},
                    {"topic": "t"},
                    {"topic": 3, "body": "x"},
                    {"topic": "t", "body_b64": "aGk=", "level": 6},
                ]
            },
        )
        assert response.status_code == 200
        report = response.json()
        assert (report["accepted"], report["rejected"]) == (2, 2)
        results = report["results"]
        assert [r["index"] for r in results] == [0, 1, 2, 3]
        assert ("id" in results[0], "error" in results[0]) == (True, False)
        assert results[1]["error"]["field"] == "body"
        assert results[2]["error"] == {
            "field": "topic",
            "rule": "string_type",
            "message": "Input should be a valid string",
        }
        sent = [results[0]["id"], results[3]["id"]]
        assert [f[b"id"].decode() for _, f in raw_redis.xrange(keys.INBOUND)] == sent
        too_many = await http.post(
            "/v1/messages:batch", json={"messages": [{"topic": "t", "body": ""}] * 10_001}
        )
        assert error_of(too_many) == (422, "messages", "too_long")
        empty = await http.post("/v1/messages:batch", json={"messages": []})
        assert error_of(empty) == (422, "messages", "too_short")

    call(redis_url, scenario)


def test_status_and_cancel(redis_url: str, raw_redis: redis.Redis) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        created = (
            await http.post("/v1/messages", json={"topic": "t", "body": "x", "delay_ms": 60_000})
        ).json()
        pending = await http.get(f"/v1/messages/{created['id']}")
        assert pending.status_code == 200
        assert pending.json()["state"] == "pending"
        assert pending.json()["deliver_at_ms"] == created["deliver_at_ms"]

        cancelled = await http.delete(f"/v1/messages/{created['id']}")
        assert cancelled.status_code == 200
        assert cancelled.json() == {"id": created["id"], "cancelled": True}
        assert (await http.get(f"/v1/messages/{created['id']}")).json()["state"] == "cancelled"
        again = await http.delete(f"/v1/messages/{created['id']}")
        assert again.status_code == 200  # idempotent

        shipped = (await http.post("/v1/messages", json={"topic": "t", "body": "x"})).json()["id"]
        sink(redis_url, delivered(shipped))
        status = (await http.get(f"/v1/messages/{shipped}")).json()
        assert status["state"] == "delivered"
        assert status["delivered_at_ms"] >= status["deliver_at_ms"]
        assert error_of(await http.delete(f"/v1/messages/{shipped}")) == (409, "id", "delivered")

        refused = new_message_id(now_ms())
        store = DeliveryStore.from_url(redis_url)
        store.write_chunk(
            query_id="q",
            partition=1,
            batch_id=1,
            first_row=0,
            rows=[Reject([(b"op", b"send")], "bad topic", message_id=refused)],
            journal_ttl_s=3600,
        )
        store.close()
        assert (await http.get(f"/v1/messages/{refused}")).json()["reason"] == "bad topic"
        assert error_of(await http.delete(f"/v1/messages/{refused}")) == (409, "id", "rejected")

        raw_redis.hset(keys.HEARTBEAT, "last_batch_at_ms", now_ms())
        lost = new_message_id(now_ms() - 3_600_000)
        assert (await http.get(f"/v1/messages/{lost}")).json()["state"] == "unknown"
        assert error_of(await http.delete(f"/v1/messages/{lost}")) == (404, "id", "unknown")
        assert error_of(await http.get("/v1/messages/nope")) == (422, "id", "format")
        assert error_of(await http.delete("/v1/messages/nope")) == (422, "id", "format")

    call(redis_url, scenario)


def test_healthz_and_metrics(redis_url: str) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        silent = await http.get("/healthz")
        assert silent.status_code == 503
        assert silent.json() == {
            "status": "degraded",
            "redis": True,
            "scheduler_alive": False,
            "query_id": None,
            "last_batch_age_ms": None,
            "error": None,
        }
        store = DeliveryStore.from_url(redis_url)
        store.record_batches("query-1", [(7, now_ms() - 400, 350), (8, now_ms(), 420)])
        store.close()
        alive = await http.get("/healthz")
        assert alive.status_code == 200
        body = alive.json()
        assert (body["status"], body["query_id"]) == ("ok", "query-1")
        assert 0 <= body["last_batch_age_ms"] < 5_000

        shipped = (await http.post("/v1/messages", json={"topic": "t", "body": "x"})).json()["id"]
        sink(redis_url, delivered(shipped))
        metrics = await http.get("/metrics")
        assert metrics.status_code == 200
        assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
        assert "delayline_messages_delivered_total 1\n" in metrics.text
        assert "delayline_batch_duration_seconds_count 2\n" in metrics.text
        assert "delayline_batch_duration_seconds_sum 0.77\n" in metrics.text
        assert 'delayline_lateness_seconds_bucket{le="+Inf"} 1\n' in metrics.text

    call(redis_url, scenario)


def test_bearer_token(redis_url: str) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        payload = {"topic": "t", "body": "x"}
        missing = await http.post("/v1/messages", json=payload)
        assert error_of(missing) == (401, "request", "auth")
        assert missing.headers["www-authenticate"] == "Bearer"
        wrong = await http.post(
            "/v1/messages", json=payload, headers={"authorization": "Bearer nope"}
        )
        assert wrong.status_code == 401
        for path in ("/openapi.json", "/metrics", f"/v1/messages/{new_message_id(1)}"):
            assert (await http.get(path)).status_code == 401
        assert (await http.get("/healthz")).status_code == 503  # open, and honest
        authorized = {"authorization": "Bearer s3cret"}
        assert (
            await http.post("/v1/messages", json=payload, headers=authorized)
        ).status_code == 201
        assert (await http.get("/openapi.json", headers=authorized)).status_code == 200

    call(redis_url, scenario, api_token="s3cret")


def test_without_a_token_everything_is_open(redis_url: str) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        assert (await http.get("/openapi.json")).status_code == 200
        assert (await http.get("/metrics")).status_code == 200

    call(redis_url, scenario)


def test_redis_down_is_503() -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        response = await http.post("/v1/messages", json={"topic": "t", "body": "x"})
        assert error_of(response) == (503, "redis", "unavailable")
        health = await http.get("/healthz")
        assert health.status_code == 503
        assert health.json()["redis"] is False

    call(f"redis://127.0.0.1:{free_port()}/0", scenario)


def test_pending_forecast(redis_url: str) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        due = "2026-12-10T10:00:00Z"
        for topic in ("a", "a", "b"):
            response = await http.post(
                "/v1/messages", json={"topic": topic, "body": "x", "deliver_at": due}
            )
            assert response.status_code == 201
        # Sent far ahead, they wait in the inbound stream until the scheduler counts
        # them: the source's count is what puts them in the forecast.
        count_inbound(redis_url)
        response = await http.get(
            "/v1/pending", params={"by": "hour", "from": "2026-12-10T00:00:00Z", "to": due}
        )
        assert response.json()["total"] == 0  # the window ends before they are due
        response = await http.get("/v1/pending", params={"by": "hour", "hot_over": 2})
        assert response.status_code == 200
        assert response.json() == {
            "by": "hour",
            "topic": None,
            "total": 3,
            "buckets": [
                {"start": "2026-12-10T10:00:00.000Z", "count": 3, "topics": {"a": 2, "b": 1}}
            ],
            "hot_over": 2,
            "hot": [{"at": "2026-12-10T10:00:00.000Z", "count": 3}],
        }
        topic_b = (await http.get("/v1/pending", params={"topic": "b"})).json()
        assert (topic_b["total"], topic_b["buckets"][0]["topics"]) == (1, {"b": 1})
        assert error_of(await http.get("/v1/pending", params={"by": "week"})) == (
            422,
            "by",
            "choice",
        )
        assert error_of(await http.get("/v1/pending", params={"from": "soon"})) == (
            422,
            "from",
            "rfc3339",
        )
        # The window takes the CLI's forms: RFC 3339, epoch ms, a duration from now.
        for start, end in [("2026-12-10T10:00:00Z", "1798761600000"), ("2h", "3h")]:
            within = await http.get("/v1/pending", params={"from": start, "to": end})
            assert within.status_code == 200, within.text

    call(redis_url, scenario)


def test_patch_reschedules_a_pending_message(redis_url: str, raw_redis: redis.Redis) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        sent = await http.post(
            "/v1/messages", json={"topic": "orders", "body": "order-42", "delay_ms": 30_000}
        )
        old = sent.json()["id"]
        response = await http.patch(
            f"/v1/messages/{old}", json={"deliver_at": "2026-12-10T10:00:00Z"}
        )
        assert response.status_code == 200, response.text
        moved = response.json()
        assert (moved["previous_id"], moved["deliver_at"]) == (old, "2026-12-10T10:00:00.000Z")
        assert moved["deliver_at_ms"] == deliver_at_ms_of(moved["id"])
        status = (await http.get(f"/v1/messages/{old}")).json()
        assert (status["state"], status["rescheduled_to"]) == ("rescheduled", moved["id"])
        again = await http.patch(f"/v1/messages/{old}", json={"delay_ms": 1_000})
        assert error_of(again) == (409, "id", "rescheduled")
        shipped = new_message_id(now_ms())
        sink(redis_url, delivered(shipped))
        late = await http.patch(f"/v1/messages/{shipped}", json={"delay_ms": 1_000})
        assert error_of(late) == (409, "id", "delivered")
        raw_redis.hset(keys.HEARTBEAT, "last_batch_at_ms", now_ms())
        unknown = new_message_id(now_ms() - 3_600_000)
        missing = await http.patch(f"/v1/messages/{unknown}", json={"delay_ms": 1_000})
        assert error_of(missing) == (404, "id", "unknown")
        both = await http.patch(f"/v1/messages/{moved['id']}", json={"delay_ms": 1, "level": 2})
        assert error_of(both) == (422, "level", "exclusive")
        stray = await http.patch(f"/v1/messages/{moved['id']}", json={"when": 1})
        assert error_of(stray)[0] == 422

    call(redis_url, scenario)


def test_the_dashboard_takes_the_token_once_and_reads_with_a_cookie(redis_url: str) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        assert (await http.get("/ui")).status_code == 401
        assert (await http.get("/ui", params={"token": "nope"})).status_code == 401
        login = await http.get("/ui", params={"token": "s3cret"})
        assert (login.status_code, login.headers["location"]) == (303, "/ui")
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        page = await http.get("/ui")  # httpx keeps the cookie, as a browser does
        assert page.status_code == 200
        assert '<svg id="timeline"' in page.text
        assert (await http.get("/v1/stats")).status_code == 200
        # The cookie reads; it never writes: another site could make a browser send it.
        refused = await http.post("/v1/messages", json={"topic": "t", "body": "x"})
        assert refused.status_code == 401
        http.cookies.clear()
        assert (await http.get("/v1/stats")).status_code == 401

    call(redis_url, scenario, api_token="s3cret")


def test_stats_rejects_and_dead_letters_for_the_dashboard(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        shipped = new_message_id(now_ms() - 5)
        sink(redis_url, delivered(shipped, topic="orders"))
        reason = b"unknown op 'nope'"
        sink(redis_url, Reject([(b"op", b"nope"), (b"body", b"b" * 500), (b"reason", reason)], ""))
        for n, topic in enumerate(("a", "b", "a")):
            entry_id = f"{now_ms() + n}-0"  # one ms apart: newest first is well defined
            raw_redis.xadd(f"{topic}.DLQ", {"id": f"m{n}", "reason": f"r{n}"}, id=entry_id)
        # Recorded as a consumer's dead-lettering records them (plans/consuming.py).
        raw_redis.sadd(keys.UNSHARDED.topics, "a.DLQ", "b.DLQ", "x.DLQ", "orders")
        raw_redis.set("x.DLQ", "not a stream")  # ignored: only streams are read
        stats = (await http.get("/v1/stats")).json()
        assert (stats["delivered"], stats["pending"], stats["outbox"]) == (1, -1, 0)
        assert sum(stats["lateness"].values()) == 1
        assert stats["lateness_p99_ms"] is not None
        [reject] = (await http.get("/v1/rejects")).json()
        assert reject["fields"]["reason"] == "unknown op 'nope'"
        assert len(reject["fields"]["body"]) == 200  # cut for display
        letters = (await http.get("/v1/dead-letters", params={"count": 2})).json()
        assert [(e["stream"], e["fields"]["id"]) for e in letters] == [
            ("a.DLQ", "m2"),
            ("b.DLQ", "m1"),
        ]
        assert error_of(await http.get("/v1/rejects", params={"count": 0}))[0] == 422

    call(redis_url, scenario)


def test_pending_messages_lists_what_the_scheduler_answers(redis_url: str) -> None:
    due_ms = now_ms() + 600_000
    held = PendingMessage(new_message_id(due_ms), "orders", "42", due_ms, 1, 9, "state")
    server = answer(redis_url, [held])

    async def scenario(http: httpx.AsyncClient) -> None:
        response = await http.get("/v1/pending/messages", params={"topic": "orders", "key": "42"})
        assert response.status_code == 200, response.text
        assert response.json() == {"messages": [held.to_json()]}
        assert error_of(await http.get("/v1/pending/messages", params={"limit": 0}))[0] == 422
        assert error_of(await http.get("/v1/pending/messages", params={"to": "later"})) == (
            422,
            "to",
            "rfc3339",
        )

    call(redis_url, scenario)
    server.join(5)


def test_by_key_cancel_and_reschedule(redis_url: str, raw_redis: redis.Redis) -> None:
    due_ms = now_ms() + 600_000
    held = [
        PendingMessage(new_message_id(due_ms + n), "orders", "42", due_ms + n, 1, 9, "state")
        for n in range(2)
    ]

    async def scenario(http: httpx.AsyncClient) -> None:
        server = answer(redis_url, held[:1])
        cancelled = await http.delete("/v1/messages", params={"topic": "orders", "key": "42"})
        server.join(5)
        assert cancelled.json() == {"cancelled": 1}
        assert (await http.get(f"/v1/messages/{held[0].id}")).json()["state"] == "cancelled"
        server = answer(redis_url, held[1:])
        moved = await http.patch(
            "/v1/messages", params={"topic": "orders", "key": "42"}, json={"delay_ms": 60_000}
        )
        server.join(5)
        [entry] = moved.json()["rescheduled"]
        assert entry["previous_id"] == held[1].id
        status = (await http.get(f"/v1/messages/{held[1].id}")).json()
        assert status["rescheduled_to"] == entry["id"]
        missing = await http.delete("/v1/messages", params={"topic": "orders"})
        assert error_of(missing)[0] == 422

    call(redis_url, scenario)
