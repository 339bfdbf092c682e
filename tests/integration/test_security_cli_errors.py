"""The CLI on a bad Redis URL or a wrong password: one line, the right exit code, no
traceback, no password shown, and no retrying what only the operator can fix."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest
import redis
from click.testing import CliRunner

from delayline import Client
from delayline.cli import main
from delayline.errors import ConfigurationError
from delayline.redis.embedded import server_executable
from delayline.testing import free_port, wait_for

SECRET = "s3cr3t-PaSS"


@pytest.mark.parametrize(
    "url", ["notaurl", f"redis://:{SECRET}@127.0.0.1:notaport/0", "http://127.0.0.1:6390/0"]
)
def test_a_malformed_url_is_one_line_and_exit_2(url: str) -> None:
    result = CliRunner().invoke(main, ["stats", "--redis-url", url])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: not a usable Redis URL"), result.output
    assert len(result.output.strip().splitlines()) == 1
    assert SECRET not in result.output


@pytest.fixture
def guarded_url() -> Iterator[str]:
    """A real Redis that requires the password ``right``; the URL names no password."""
    port = free_port()
    server = subprocess.Popen(
        [server_executable(), "--port", str(port), "--bind", "127.0.0.1",
         "--requirepass", "right", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        probe = redis.Redis(port=port, password="right")
        wait_for(lambda: _answers(probe), 10, "the guarded Redis")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.kill()
        server.wait(10)


def _answers(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False


def test_a_wrong_password_says_so_at_once(guarded_url: str) -> None:
    wrong = guarded_url.replace("redis://", f"redis://:{SECRET}@")
    for url, said in ((wrong, "refused the credentials"), (guarded_url, "refused the credentials")):
        began = time.monotonic()
        result = CliRunner().invoke(main, ["stats", "--redis-url", url])
        assert time.monotonic() - began < 3, "retried as if Redis were away"
        assert result.exit_code == 2, result.output
        assert said in result.output
        assert SECRET not in result.output
    right = guarded_url.replace("redis://", "redis://:right@")
    with Client(right) as client:
        assert client.metrics().counters is not None
    with Client(wrong) as client, pytest.raises(ConfigurationError, match="check the password"):
        client.metrics()
