from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest
import redis

from delayline.errors import ConfigurationError
from delayline.redis.embedded import REWRITE_NICENESS, EmbeddedRedis
from delayline.testing import free_port, wait_for


def test_embedded_redis_keeps_an_aof_and_survives_a_restart(tmp_path: Path) -> None:
    port = free_port()
    with EmbeddedRedis(tmp_path, port) as server:
        assert server.version == "Valkey 8.1.8 with mimalloc"
        client = redis.Redis.from_url(server.url)
        assert client.info("persistence")["aof_enabled"] == 1
        # glibc's malloc, which the wheel's build uses, doubled the pump's cost.
        pid = client.info("server")["process_id"]
        assert "libmimalloc.so" in Path(f"/proc/{pid}/maps").read_text()
        assert client.info("server")["valkey_version"] == "8.1.8"
        client.set("kept", "yes")
        client.close()
        first_url = server.url
    assert list((tmp_path / "appendonlydir").glob("*.incr.aof"))
    with EmbeddedRedis(tmp_path, port) as server:
        assert server.url == first_url  # the same password: clients keep working
        client = redis.Redis.from_url(server.url)
        assert client.get("kept") == b"yes"
        client.close()


def test_a_data_dir_of_the_redis_6_server_loads(tmp_path: Path) -> None:
    # Before Valkey, the embedded server kept one appendonly.aof; Valkey takes it as
    # the base of its multi-part AOF.
    (tmp_path / "appendonly.aof").write_bytes(b"*3\r\n$3\r\nSET\r\n$4\r\nkept\r\n$3\r\nyes\r\n")
    with EmbeddedRedis(tmp_path, free_port()) as server:
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


def test_a_rewrite_runs_at_the_lowest_cpu_priority(tmp_path: Path) -> None:
    # On 2 cores the rewrite's child competed with the server's own thread and
    # with Spark: p99 lateness doubled while it ran (docs/benchmarks.md, "Soak").
    with EmbeddedRedis(tmp_path, free_port()) as server:
        client = redis.Redis.from_url(server.url)
        value = b"x" * 1024
        for round_ in range(100):  # 100 MB: the child lives for a good fraction of a second
            pipe = client.pipeline(transaction=False)
            for n in range(1000):
                pipe.set(f"k{round_}:{n}", value)
            pipe.execute()
        client.bgrewriteaof()
        children = server._renice_rewrite()
        assert children, "no rewrite child to renice"
        for pid in children:
            with contextlib.suppress(ProcessLookupError):  # it finished already
                assert os.getpriority(os.PRIO_PROCESS, pid) == REWRITE_NICENESS
        client.close()
