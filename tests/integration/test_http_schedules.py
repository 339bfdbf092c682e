"""``/v1/schedules`` through httpx against the real app and a real Redis: each route
writes one ``op=schedule`` record to its schedule's inbound stream, and a definition
that breaks a rule is a 422 naming the field, with nothing written."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delayline.api.app import create_app
from delayline.plans.scheduling import definition_from, inbound_of
from delayline.redis import keys
from delayline.redis.embedded import EmbeddedRedis
from delayline.schedules import ops
from delayline.schedules.recurrence import Cron, Every, Times
from delayline.schedules.spec import ALL, CatchUp
from delayline.timing import LAST_MS, now_ms
from delayline.validation import Limits
from tests.integration.test_http_api import call, error_of
from tests.support.asgi import asgi_client

LIMITS = Limits()
#: 2026-12-01T09:00:00Z.
DECEMBER_MS = 1_796_115_600_000
#: What a POST without a body still says (see test_a_bodiless_post_must_still_say_json).
JSON = {"content-type": "application/json"}


def records(raw: redis.Redis, stream: str = keys.INBOUND) -> list[ops.ScheduleOp]:
    """Every record of ``stream``, decoded as the scheduler will."""
    return [
        ops.decode_op(fields, sent_at_ms=int(fields[b"sent_at_ms"]), limits=LIMITS)
        for _, fields in raw.xrange(stream)
    ]


def test_a_put_writes_one_record_and_answers_the_definition(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    answers: list[dict[str, Any]] = []

    async def scenario(http: httpx.AsyncClient) -> None:
        cron = await http.put(
            "/v1/schedules/reports/nightly",
            json={
                "body": "run",
                "cron": "30 2 * * *",
                "tz": "Europe/Paris",
                "start": "2026-12-01T09:00:00+00:00",
                "end": DECEMBER_MS + 86_400_000,
                "max_runs": 10,
                "catch_up": "all",
                "catch_up_window": "6h",
                "catch_up_max_runs": 4,
                "key": "k",
                "headers": {"team": "data"},
            },
        )
        every = await http.put(
            "/v1/schedules/jobs/tick",
            json={"body_b64": base64.b64encode(b"\xff\x00").decode(), "every": 90_000,
                  "anchor": "2026-12-01T09:00:00.250Z", "paused": True},
        )  # fmt: skip
        times = await http.put(
            "/v1/schedules/jobs/twice",
            json={"body": "", "times": [DECEMBER_MS + 1, "2026-12-01T10:00:00+01:00"]},
        )
        for response in (cron, every, times):
            assert response.status_code == 200, response.text
            answers.append(response.json())

    before = now_ms()
    call(redis_url, scenario)
    put_cron, put_every, put_times = records(raw_redis)
    assert all(op.action == ops.PUT for op in (put_cron, put_every, put_times))
    assert before <= put_cron.sent_at_ms <= now_ms()
    nightly = put_cron.definition
    assert nightly is not None
    assert (nightly.topic, nightly.name, nightly.body) == ("reports", "nightly", b"run")
    assert nightly.recurrence == Cron("30 2 * * *", "Europe/Paris")
    assert (nightly.start_ms, nightly.end_ms, nightly.max_runs) == (
        DECEMBER_MS,
        DECEMBER_MS + 86_400_000,
        10,
    )
    assert nightly.catch_up == CatchUp(ALL, 21_600_000, 4)
    assert (nightly.key, dict(nightly.headers)) == ("k", {"team": "data"})
    # The answer is the definition as stored, in the terms of the request.
    assert answers[0] == {
        "topic": "reports",
        "name": "nightly",
        "body": "run",
        "key": "k",
        "headers": {"team": "data"},
        "cron": "30 2 * * *",
        "tz": "Europe/Paris",
        "start": "2026-12-01T09:00:00.000Z",
        "end": "2026-12-02T09:00:00.000Z",
        "max_runs": 10,
        "paused": False,
        "catch_up": "all",
        "catch_up_window": "6h",
        "catch_up_max_runs": 4,
    }
    tick = put_every.definition
    assert tick is not None
    assert (tick.body, tick.recurrence, tick.paused) == (
        b"\xff\x00",
        Every(90_000, DECEMBER_MS + 250),
        True,
    )
    assert answers[1]["body_b64"] == "/wA="
    assert (answers[1]["every"], answers[1]["anchor"]) == ("90s", "2026-12-01T09:00:00.250Z")
    assert "body" not in answers[1]
    assert put_times.definition is not None
    assert put_times.definition.recurrence == Times((DECEMBER_MS, DECEMBER_MS + 1))
    assert answers[2]["times"] == ["2026-12-01T09:00:00.000Z", "2026-12-01T09:00:00.001Z"]
    assert answers[2]["catch_up"] == "latest"


def test_a_replace_is_one_more_record_of_the_same_schedule(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        for every in ("1m", "5m"):
            response = await http.put("/v1/schedules/t/s", json={"body": "x", "every": every})
            assert response.status_code == 200, response.text

    call(redis_url, scenario)
    first, second = records(raw_redis)
    assert (first.name, second.name) == ("s", "s")
    assert second.definition == definition_from("s", "t", "x", limits=LIMITS, every="5m")


def test_with_published_shards_a_schedule_goes_to_its_own(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    raw_redis.hset(keys.CONFIG, mapping={"inbound_shards": 3, "horizon_ms": 60_000})
    names = [f"s{n}" for n in range(6)]

    async def scenario(http: httpx.AsyncClient) -> None:
        for name in names:
            response = await http.put(f"/v1/schedules/t/{name}", json={"body": "", "every": "1h"})
            assert response.status_code == 200, response.text
            response = await http.post(f"/v1/schedules/t/{name}/pause", headers=JSON)
            assert response.status_code == 202, response.text

    call(redis_url, scenario)
    assert raw_redis.xlen(keys.INBOUND) == 0
    for name in names:
        mine = [op for op in records(raw_redis, inbound_of("t", name, 3)) if op.name == name]
        assert [op.action for op in mine] == [ops.PUT, ops.PAUSE]


def test_delete_pause_and_resume_write_their_records(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        paused = await http.post("/v1/schedules/reports/nightly/pause", headers=JSON)
        resumed = await http.post("/v1/schedules/reports/nightly/resume", headers=JSON)
        deleted = await http.delete("/v1/schedules/reports/nightly")
        for response, action in ((paused, "pause"), (resumed, "resume"), (deleted, "delete")):
            assert response.status_code == 202, response.text
            assert response.json() == {"topic": "reports", "name": "nightly", "action": action}
        bad = await http.post("/v1/schedules/reports/no%20spaces/pause", headers=JSON)
        assert error_of(bad) == (422, "name", "pattern")
        reserved = await http.delete("/v1/schedules/delayline:inbound/nightly")
        assert error_of(reserved) == (422, "topic", "reserved")

    call(redis_url, scenario)
    assert [(op.action, op.topic, op.name, op.definition) for op in records(raw_redis)] == [
        (action, "reports", "nightly", None) for action in (ops.PAUSE, ops.RESUME, ops.DELETE)
    ]


EVERY = {"body": "x", "every": "1h"}


@pytest.mark.parametrize(
    ("path", "payload", "field", "rule"),
    [
        ("t/s", {"body": "x", "cron": "61 * * * *"}, "cron", "format"),
        ("t/s", {"body": "x", "cron": "0 0 30 2 *"}, "cron", "never"),
        ("t/s", {"body": "x", "cron": "0 9 * * *", "tz": "Mars/Olympus"}, "tz", "zone"),
        ("t/s", {"body": "x", "every": "999ms"}, "every", "min"),
        ("t/s", {"body": "x", "every": 999}, "every", "min"),
        ("t/s", {"body": "x", "every": "soon"}, "every", "duration"),
        ("t/s", {"body": "x", "cron": "0 9 * * *", "every": "1h"}, "recurrence", "one_of"),
        ("t/s", {"body": "x"}, "recurrence", "one_of"),
        ("t/s", {"body": "x", "every": "1h", "tz": "UTC"}, "tz", "only_with"),
        ("t/s", {"body": "x", "cron": "0 9 * * *", "anchor": 0}, "anchor", "only_with"),
        ("t/s", {**EVERY, "start": "2026-12-01T09:00:00"}, "start", "timezone"),
        ("t/s", {"body": "x", "times": ["2026-12-01T09:00:00"]}, "times", "timezone"),
        ("t/s", {**EVERY, "anchor": "tomorrow"}, "anchor", "rfc3339"),
        ("t/s", {**EVERY, "start": -1}, "start", "range"),
        ("t/s", {**EVERY, "end": 10**20}, "end", "range"),
        ("t/s", {**EVERY, "start": DECEMBER_MS, "end": DECEMBER_MS - 1}, "end", "order"),
        ("t/s", {"body": "x", "times": []}, "times", "empty"),
        ("t/s", {"body": "x", "times": list(range(1, 1_002))}, "times", "max"),
        ("t/s", {**EVERY, "max_runs": 0}, "max_runs", "range"),
        ("t/s", {**EVERY, "catch_up": "some"}, "catch_up", "policy"),
        ("t/s", {**EVERY, "catch_up_window": "a while"}, "catch_up_window", "duration"),
        ("t/s", {**EVERY, "catch_up_window": -1}, "catch_up_window", "range"),
        ("t/s", {**EVERY, "catch_up_max_runs": 10_001}, "catch_up_max_runs", "range"),
        ("t/s", {**EVERY, "paused": "yes"}, "paused", "bool_type"),
        ("t/s", {**EVERY, "colour": "red"}, "colour", "extra_forbidden"),
        ("t/s", {"every": "1h"}, "body", "exclusive"),
        ("t/s", {**EVERY, "body_b64": "eA=="}, "body", "exclusive"),
        ("t/s", {"body_b64": "%%%", "every": "1h"}, "body_b64", "base64"),
        ("t/s", {"body": "x" * 1_048_577, "every": "1h"}, "body", "max_bytes"),
        ("t/s", {**EVERY, "headers": {"n": 1}}, "headers.n", "string_type"),
        ("t/no%20spaces", EVERY, "name", "pattern"),
        (f"t/{'n' * 201}", EVERY, "name", "pattern"),
        ("bad%20topic/s", EVERY, "topic", "pattern"),
        ("delayline:inbound/s", EVERY, "topic", "reserved"),
    ],
)
def test_a_bad_definition_is_422_naming_the_field_and_writes_nothing(
    redis_url: str, raw_redis: redis.Redis, path: str, payload: dict[str, Any], field: str,
    rule: str,
) -> None:  # fmt: skip
    async def scenario(http: httpx.AsyncClient) -> None:
        response = await http.put(f"/v1/schedules/{path}", json=payload)
        assert error_of(response) == (422, field, rule)
        assert response.json()["error"]["message"]

    call(redis_url, scenario)
    assert raw_redis.keys("delayline:inbound*") == []


def test_the_routes_need_the_token_and_json(redis_url: str, raw_redis: redis.Redis) -> None:
    authorized = {"authorization": "Bearer s3cret"}

    async def scenario(http: httpx.AsyncClient) -> None:
        for method, path in (("PUT", "/v1/schedules/t/s"), ("DELETE", "/v1/schedules/t/s"),
                             ("POST", "/v1/schedules/t/s/pause"),
                             ("POST", "/v1/schedules/t/s/resume")):  # fmt: skip
            refused = await http.request(method, path, json=EVERY)
            assert error_of(refused) == (401, "request", "auth"), (method, path)
        as_text = await http.put(
            "/v1/schedules/t/s", content=b'{"body": "x", "every": "1h"}', headers=authorized
        )
        assert error_of(as_text) == (415, "request", "content-type")
        assert raw_redis.keys("delayline:inbound*") == []
        put = await http.put("/v1/schedules/t/s", json=EVERY, headers=authorized)
        assert put.status_code == 200, put.text
        paused = await http.post("/v1/schedules/t/s/pause", headers={**authorized, **JSON})
        assert paused.status_code == 202, paused.text

    call(redis_url, scenario, api_token="s3cret")
    assert [op.action for op in records(raw_redis)] == [ops.PUT, ops.PAUSE]


def test_a_request_over_the_size_limit_is_413(redis_url: str, raw_redis: redis.Redis) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        big = await http.put("/v1/schedules/t/s", json={"body": "x" * 5_000, "every": "1h"})
        assert error_of(big) == (413, "request", "max_bytes")

    call(redis_url, scenario, max_request_bytes=4_000)
    assert raw_redis.keys("delayline:inbound*") == []


def test_a_bodiless_post_must_still_say_json(redis_url: str, raw_redis: redis.Redis) -> None:
    # A form or a fetch on another site can POST without a preflight, never as JSON.
    async def scenario(http: httpx.AsyncClient) -> None:
        for action in ("pause", "resume"):
            refused = await http.post(f"/v1/schedules/t/s/{action}")
            assert error_of(refused) == (415, "request", "content-type")
            form = {"content-type": "application/x-www-form-urlencoded"}
            assert (await http.post(f"/v1/schedules/t/s/{action}", headers=form)).status_code == 415

    call(redis_url, scenario)
    assert raw_redis.keys("delayline:inbound*") == []


# -- any input: a definition or a 422, never a 5xx ----------------------------------------------

#: Mostly valid values, then anything of the type, to reach past the first refusal.
TIME_TEXT = st.one_of(
    st.integers(0, LAST_MS),
    st.sampled_from(["2026-12-01T09:00:00Z", "2026-12-01T09:00:00.5+05:30", "2026-12-01T09:00:00",
                     "9999-12-31T23:59:59-01:00", "1969-12-31T23:59:59Z", "soon", ""]),
    st.integers(),
    st.text(max_size=30),
)  # fmt: skip
DURATION = st.one_of(
    st.integers(1_000, 10**12),
    st.sampled_from(["15m", "1h30m", "999ms", "0s", "1s"]),
    st.integers(),
    st.text(max_size=10),
)
CRON = st.one_of(
    st.sampled_from(["0 9 * * *", "30 2 * * *", "*/15 * * * *", "0 0 30 2 *", "0 0 L * *",
                     "0 0 * * 5#3", "0 30 2 * * *", "R * * * *", "0 9 * * * * *"]),
    st.text(max_size=30),
)  # fmt: skip
TZ = st.one_of(
    st.sampled_from(["Europe/Paris", "UTC", "America/St_Johns", "Mars/Olympus", "Europe/", ".."]),
    st.text(max_size=30),
)
TIMES = st.lists(TIME_TEXT, max_size=4)
RECURRENCE = st.one_of(
    st.fixed_dictionaries({"cron": CRON}, optional={"tz": TZ}),
    st.fixed_dictionaries({"every": DURATION}, optional={"anchor": TIME_TEXT}),
    st.fixed_dictionaries({"times": TIMES}),
    st.fixed_dictionaries(
        {},
        optional={"cron": CRON, "tz": TZ, "every": DURATION, "anchor": TIME_TEXT, "times": TIMES},
    ),
)
BODY = st.one_of(
    st.fixed_dictionaries({"body": st.text(st.characters(codec="utf-8"), max_size=20)}),
    st.fixed_dictionaries({"body_b64": st.sampled_from(["", "/wA=", "aGk=", "%%%", "\u0080"])}),
    st.fixed_dictionaries({}, optional={"body": st.text(max_size=5), "body_b64": st.text()}),
)
REST = st.fixed_dictionaries(
    {},
    optional={
        "start": TIME_TEXT,
        "end": TIME_TEXT,
        "max_runs": st.integers(),
        "paused": st.booleans(),
        "catch_up": st.sampled_from(["skip", "latest", "all", "ALL", ""]),
        "catch_up_window": DURATION,
        "catch_up_max_runs": st.integers(),
        "key": st.text(max_size=10),
        "headers": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
    },
)
DEFINITION = st.builds(lambda *parts: {k: v for part in parts for k, v in part.items()},
                       BODY, RECURRENCE, REST)  # fmt: skip
SEGMENT = st.one_of(st.from_regex(r"[A-Za-z0-9._:-]{1,20}", fullmatch=True), st.text(max_size=12))


Put = Callable[[str, dict[str, Any]], httpx.Response]
#: The fields of an answer that the path gives a request.
PATH = ("topic", "name")


@pytest.fixture(scope="module")
def put(redis_server: EmbeddedRedis) -> Iterator[Put]:
    """PUT to one app for every example of a property, on one event loop (the app's
    Redis client keeps to its loop); the examples share the session's Redis."""
    loop = asyncio.new_event_loop()
    context = asgi_client(create_app(redis_server.url), base_url="http://127.0.0.1")
    http = loop.run_until_complete(context.__aenter__())
    yield lambda path, body: loop.run_until_complete(http.put(path, json=body))
    loop.run_until_complete(context.__aexit__(None, None, None))
    loop.close()


@given(topic=SEGMENT, name=SEGMENT, definition=DEFINITION)
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
def test_any_put_is_the_definition_stored_or_a_422(
    raw_redis: redis.Redis, put: Put, topic: str, name: str, definition: dict[str, Any]
) -> None:
    written = raw_redis.xlen(keys.INBOUND)
    path = f"/v1/schedules/{quote(topic, safe='')}/{quote(name, safe='')}"
    response = put(path, definition)
    # A segment with a slash makes another path: no route (404, 405), or Starlette's
    # redirect of a trailing slash (307), which writes nothing either.
    assert response.status_code in (200, 307, 404, 405, 422), response.text
    if response.status_code != 200:
        assert raw_redis.xlen(keys.INBOUND) == written
        if response.status_code == 422:
            assert set(response.json()["error"]) == {"field", "rule", "message"}
        return
    [(_, fields)] = raw_redis.xrevrange(keys.INBOUND, count=1)
    stored = ops.decode_op(fields, sent_at_ms=0, limits=LIMITS).definition
    assert stored is not None
    assert response.json() == stored.to_view()
    # The answer, less its address, puts the same definition again.
    again = {field: value for field, value in response.json().items() if field not in PATH}
    assert put(path, again).json() == response.json()
