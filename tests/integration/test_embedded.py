from __future__ import annotations

from pathlib import Path

import pytest
import redis

from delayline.errors import ConfigurationError
from delayline.redis.embedded import EmbeddedRedis
from tests.support import free_port


def test_embedded_redis_keeps_an_aof_and_survives_a_restart(tmp_path: Path) -> None:
    port = free_port()
    with EmbeddedRedis(tmp_path, port) as server:
        client = redis.Redis.from_url(server.url)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
        assert client.config_get("bind")["bind"] == "127.0.0.1"
        client.set("kept", "yes")
        client.close()
    assert (tmp_path / "appendonly.aof").exists()
    with EmbeddedRedis(tmp_path, port) as server:
        client = redis.Redis.from_url(server.url)
        assert client.get("kept") == b"yes"
        client.close()


def test_a_taken_port_is_a_clear_error(tmp_path: Path, redis_url: str) -> None:
    taken = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(ConfigurationError, match=f"failed to start on 127.0.0.1:{taken}"):
        EmbeddedRedis(tmp_path, taken).start()


def test_a_relative_data_dir_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `delayline run`'s default is ./delayline-data: Redis enters its --dir
    # before it opens its --logfile, which must not be relative.
    monkeypatch.chdir(tmp_path)
    with EmbeddedRedis(Path("delayline-data") / "redis", free_port()) as server:
        client = redis.Redis.from_url(server.url)
        assert client.ping()
        client.close()
    assert (tmp_path / "delayline-data" / "redis" / "redis.log").exists()
