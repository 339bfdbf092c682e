"""The embedded server is locked: a password that only this user can read, no
commands that write files or load code, and nothing secret on a command line."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from delayline import Client, local
from delayline.cli import main
from delayline.defaults import DEFAULT_REDIS_URL
from delayline.redis.embedded import EmbeddedRedis
from delayline.testing import free_port


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def server(data_dir: Path) -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis(local.server_dir(data_dir), free_port()) as server:
        yield server


def password_of(url: str) -> str:
    return url.split("@")[0].rsplit(":", 1)[1]


def test_a_client_without_the_password_is_refused(server: EmbeddedRedis) -> None:
    anonymous = redis.Redis(port=server.port, socket_timeout=5)
    with pytest.raises(redis.AuthenticationError):
        anonymous.set("k", "v")
    anonymous.close()


@pytest.mark.parametrize("command", [("CONFIG", "SET", "dir", "/tmp"), ("DEBUG", "SLEEP", "0"),
                                     ("MODULE", "LIST")])  # fmt: skip
def test_commands_that_write_files_or_load_code_are_gone(
    server: EmbeddedRedis, command: tuple[str, ...]
) -> None:
    client = redis.Redis.from_url(server.url)
    with pytest.raises(redis.ResponseError, match="unknown command"):
        client.execute_command(*command)
    client.close()


def test_the_password_is_private_and_never_on_a_command_line(
    server: EmbeddedRedis, data_dir: Path
) -> None:
    url_file = local.server_dir(data_dir) / local.URL_FILE_NAME
    assert url_file.read_text().strip() == server.url
    assert stat.S_IMODE(url_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(local.server_dir(data_dir).stat().st_mode) == 0o700
    assert len(password_of(server.url)) >= 32
    client = redis.Redis.from_url(server.url)
    pid = client.info("server")["process_id"]
    client.close()
    command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
    assert password_of(server.url).encode() not in command_line


def test_each_data_directory_gets_its_own_password(tmp_path: Path) -> None:
    first = EmbeddedRedis(tmp_path / "a", free_port())
    second = EmbeddedRedis(tmp_path / "b", free_port())
    assert password_of(first.url) != password_of(second.url)


def test_the_sdk_and_cli_find_the_server_of_the_data_directory(
    server: EmbeddedRedis, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(local.URL_ENV, raising=False)
    monkeypatch.setenv(local.DATA_DIR_ENV, str(data_dir))
    with Client() as client:
        message_id = client.send("t", b"x", delay=60_000)
        assert client.status(message_id).state == "pending"
    result = CliRunner().invoke(main, ["status", message_id])
    assert result.exit_code == 0, result.output
    assert "pending" in result.output
    assert password_of(server.url) not in result.output


def test_which_url_a_client_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_dir: Path
) -> None:
    monkeypatch.delenv(local.URL_ENV, raising=False)
    monkeypatch.setenv(local.DATA_DIR_ENV, str(data_dir))
    assert local.redis_url() == DEFAULT_REDIS_URL  # no run has left a URL there
    local.server_dir(data_dir).mkdir(parents=True)
    local.write_url(local.server_dir(data_dir), "redis://:file@127.0.0.1:1/0")
    assert local.redis_url() == "redis://:file@127.0.0.1:1/0"
    monkeypatch.setenv(local.URL_ENV, "redis://:env@127.0.0.1:2/0")
    assert local.redis_url() == "redis://:env@127.0.0.1:2/0"
    assert local.redis_url("redis://given:3/0") == "redis://given:3/0"
