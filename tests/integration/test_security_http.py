"""The HTTP API's defenses: a Host allow-list against DNS rebinding, JSON-only bodies
against cross-site forms, one token per login, no CDN, a health check that tells a
stranger nothing, and no API open to the network without a token."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import httpx
import pytest

from delayline.api.app import create_app
from delayline.api.middleware import TOKEN_COOKIE
from delayline.testing import free_port
from tests.support.asgi import asgi_client

TOKEN = "t0ken-for-tests"
MESSAGE = {"topic": "orders", "body": "x", "delay_ms": 60_000}


def request(redis_url: str, method: str, url: str, app_options: dict[str, Any] | None = None,
            **kwargs: Any) -> httpx.Response:  # fmt: skip
    async def call() -> httpx.Response:
        async with asgi_client(create_app(redis_url, **(app_options or {}))) as client:
            return await client.request(method, url, **kwargs)

    return asyncio.run(call())


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:8470", True),
        ("localhost", True),
        ("[::1]:8470", True),
        ("LOCALHOST:8470", True),
        ("rebound.attacker.example", False),
        ("rebound.attacker.example:8470", False),
        ("127.0.0.1.nip.io", False),
        ("", False),
    ],
)
def test_only_loopback_names_are_answered_by_default(
    redis_url: str, host: str, allowed: bool
) -> None:
    response = request(redis_url, "GET", "http://x/v1/stats", headers={"host": host})
    if allowed:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 400, response.text
        assert response.json()["error"]["rule"] == "host"
    # A load balancer checks health by address.
    health = request(redis_url, "GET", "http://x/healthz", headers={"host": host})
    assert health.status_code in (200, 503)


def test_the_allowed_hosts_are_configurable(redis_url: str) -> None:
    named = {"allowed_hosts": ("delayline.internal",)}
    ok = request(redis_url, "GET", "http://delayline.internal/v1/stats", named)
    assert ok.status_code == 200
    assert request(redis_url, "GET", "http://127.0.0.1/v1/stats", named).status_code == 400
    anything = {"allowed_hosts": ("*",)}
    assert request(redis_url, "GET", "http://any.example/v1/stats", anything).status_code == 200


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_body_that_is_not_json_is_refused_before_anything_reads_it(
    redis_url: str, content_type: str | None
) -> None:
    # A cross-site form or fetch without a preflight can send these, never JSON.
    headers = {} if content_type is None else {"content-type": content_type}
    body = b'{"topic": "orders", "body": "x", "delay_ms": 60000}'
    for method, path in (("POST", "/v1/messages"), ("POST", "/v1/messages:batch"),
                         ("PATCH", "/v1/messages/01M87N869M4T14JMZ993P04STH")):  # fmt: skip
        response = request(redis_url, method, f"http://127.0.0.1{path}", content=body,
                           headers=headers)  # fmt: skip
        assert response.status_code == 415, (method, path, response.text)
        assert response.json()["error"]["rule"] == "content-type"
    accepted = request(
        redis_url, "POST", "http://127.0.0.1/v1/messages", content=body,
        headers={"content-type": "application/json; charset=utf-8"},
    )  # fmt: skip
    assert accepted.status_code == 201, accepted.text


def test_the_dashboard_login_takes_exactly_one_token(redis_url: str) -> None:
    auth = {"api_token": TOKEN}
    twice = request(redis_url, "GET", f"http://127.0.0.1/ui?token={TOKEN}&token=other", auth)
    assert twice.status_code == 401
    twice = request(redis_url, "GET", f"http://127.0.0.1/ui?token=other&token={TOKEN}", auth)
    assert twice.status_code == 401
    once = request(redis_url, "GET", f"http://127.0.0.1/ui?token={TOKEN}", auth)
    assert once.status_code == 303
    assert once.cookies[TOKEN_COOKIE] == TOKEN


def test_swagger_ui_is_off_unless_asked_for(redis_url: str) -> None:
    assert request(redis_url, "GET", "http://127.0.0.1/docs").status_code == 404
    assert request(redis_url, "GET", "http://127.0.0.1/openapi.json").status_code == 200
    asked = request(redis_url, "GET", "http://127.0.0.1/docs", {"docs": True})
    assert asked.status_code == 200


def test_the_health_check_tells_a_stranger_nothing_about_redis() -> None:
    url = f"redis://:hunter2@127.0.0.1:{free_port()}/0"  # nothing listens there
    response = request(url, "GET", "http://127.0.0.1/healthz")
    assert response.status_code == 503
    assert response.json()["error"] == "Redis is unavailable"
    assert "hunter2" not in response.text
    assert "127.0.0.1" not in response.text


@pytest.mark.parametrize(
    "args",
    [
        ["api", "--host", "0.0.0.0"],
        ["run", "--api-host", "0.0.0.0", "--redis-url", "redis://127.0.0.1:1/0"],
    ],
)
def test_an_api_beyond_loopback_needs_a_token(args: list[str], tmp_path: Any) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "delayline", *args, "--data-dir", str(tmp_path)]
        if args[0] == "run"
        else [sys.executable, "-m", "delayline", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "no token" in refused.stderr
    assert "--insecure-no-auth" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "checkpoint").exists()
