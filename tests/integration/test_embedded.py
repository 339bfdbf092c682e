from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from delayline.errors import ConfigurationError
from delayline.redis.embedded import EmbeddedRedis
from tests.support import free_port, wait_for


def test_embedded_redis_keeps_an_aof_and_survives_a_restart(tmp_path: Path) -> None:
    port = free_port()
    with EmbeddedRedis(tmp_path, port) as server:
        client = redis.Redis.from_url(server.url)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}
        assert client.config_get("bind")["bind"] == "127.0.0.1"
        # Big hashes (a journal minute) are freed off Redis's main thread when they expire.
        for what in ("expire", "server-del", "user-del", "eviction"):
            name = f"lazyfree-lazy-{what}"
            assert client.config_get(name) == {name: "yes"}
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


def test_the_aof_is_rewritten_once_writes_quiet_down_not_during_them(tmp_path: Path) -> None:
    with EmbeddedRedis(tmp_path, free_port()) as server:
        client = redis.Redis.from_url(server.url)
        value = b"x" * 1024
        # 1.2 MB a round, several MB/s for 2-4 s, past the 16 MB floor: due, but loud.
        for round_ in range(20):
            pipe = client.pipeline(transaction=False)
            for n in range(1200):
                pipe.set(f"k{round_}:{n}", value)
            pipe.execute()
            time.sleep(0.1)
            assert int(client.info("stats")["total_forks"]) == 0, "rewrote during the writes"
        written = int(client.info("persistence")["aof_current_size"])
        assert written > 16 * 1024 * 1024
        # Quiet: the rewrite comes about QUIET_FOR_S later, and shrinks nothing
        # but the file (the keys were all distinct).
        wait_for(
            lambda: (
                int(client.info("stats")["total_forks"]) >= 1
                and not int(client.info("persistence")["aof_rewrite_in_progress"])
            ),
            timeout_s=20,
            what="the AOF rewrite after the writes",
        )
        persistence = client.info("persistence")
        assert int(persistence["aof_base_size"]) == int(persistence["aof_current_size"])
        assert int(persistence["aof_base_size"]) < written
        assert client.dbsize() == 20 * 1200
        client.close()
