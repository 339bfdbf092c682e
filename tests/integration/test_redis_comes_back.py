"""A Redis that is loading, restarting or gone: callers wait for it instead of failing."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from delayline import Client
from delayline.errors import ConnectError
from delayline.ids import new_message_id
from delayline.redis import keys
from delayline.redis.connection import RedisConnection, no_retries
from delayline.redis.embedded import EmbeddedRedis, server_executable
from delayline.redis.inbound import InboundStream
from delayline.redis.store import DeliveryStore
from delayline.rows import Deliver
from delayline.scheduler.pipeline.handoff import record_waiting_cancels
from delayline.scheduler.settings import SchedulerSettings
from delayline.testing import free_port, wait_for
from delayline.timing import now_ms

#: Keys in the slow-to-load AOF: enough for a load of a second or more on 2 cores.
BIG_AOF_KEYS = 3_000_000


@pytest.fixture(scope="module")
def big_aof(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory whose AOF holds BIG_AOF_KEYS keys as plain commands (slow to
    load), in the one-file layout that the server takes as its base."""
    directory = tmp_path_factory.mktemp("big-aof")
    value = b"v" * 64
    with (directory / "appendonly.aof").open("wb") as aof:
        for start in range(0, BIG_AOF_KEYS, 100_000):
            aof.write(
                b"".join(
                    b"*3\r\n$3\r\nSET\r\n$%d\r\nkey:%d\r\n$64\r\n%s\r\n"
                    % (len(b"key:%d" % n), n, value)
                    for n in range(start, start + 100_000)
                )
            )
    return directory


def copy_of(directory: Path, tmp_path: Path) -> Path:
    target = tmp_path / "redis"
    target.mkdir()
    (target / "appendonly.aof").write_bytes((directory / "appendonly.aof").read_bytes())
    return target


def test_embedded_start_waits_for_the_aof_and_reports_progress(
    big_aof: Path, tmp_path: Path
) -> None:
    progress: list[str] = []
    started = time.monotonic()
    with EmbeddedRedis(copy_of(big_aof, tmp_path), free_port()) as server:
        load_s = time.monotonic() - started
        client = redis.Redis.from_url(server.url)
        # Served at once: no LOADING error for the first command after start().
        assert client.dbsize() == BIG_AOF_KEYS
        client.close()
    progress_server = EmbeddedRedis(tmp_path / "redis", free_port())
    progress_server.start(on_progress=progress.append)
    try:
        assert redis.Redis.from_url(progress_server.url).dbsize() == BIG_AOF_KEYS
    finally:
        progress_server.stop()
    if load_s > 2.0:  # a load this long reports at least once a second
        assert progress, f"no progress reported over a {load_s:.1f} s load"
    assert all(line.startswith("loading ") and "% of " in line for line in progress)


@pytest.fixture
def loading_redis(big_aof: Path, tmp_path: Path) -> Iterator[str]:
    """A bare redis-server that has just begun loading the big AOF; its URL."""
    port = free_port()
    process = subprocess.Popen(
        [
            server_executable(),
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(copy_of(big_aof, tmp_path)),
            "--appendonly",
            "yes",
            "--save",
            "",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        # No redis-py retries: they would sleep through the load this waits to see.
        probe = redis.Redis(port=port, retry=no_retries())

        def loading() -> bool:
            try:
                probe.ping()
            except redis.BusyLoadingError:
                return True
            except redis.ConnectionError:
                return False  # not listening yet
            pytest.fail("Redis finished loading before the test could see it loading")

        wait_for(loading, 30, "redis-server to start", interval_s=0.01)
        probe.close()
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.kill()
        process.wait()


def test_the_sdk_waits_for_a_loading_redis(loading_redis: str) -> None:
    with Client(loading_redis, patience_ms=120_000) as client:
        message_id = client.send("t", b"after the load", delay=60_000)
        assert client.status(message_id).state == "pending"


def test_a_loading_redis_past_patience_is_a_clear_connect_error(loading_redis: str) -> None:
    with (
        Client(loading_redis, patience_ms=0) as client,
        pytest.raises(ConnectError, match="Redis is loading its data into memory"),
    ):
        client.send("t", b"x")


def test_the_scheduler_side_waits_through_a_restart(tmp_path: Path) -> None:
    port = free_port()
    server = EmbeddedRedis(tmp_path, port)
    server.start()
    store = DeliveryStore.from_url(server.url, patience_ms=None)
    store.ping()
    server.stop()
    wrote = threading.Event()
    message_id = new_message_id(now_ms() - 1_000)

    def sink() -> None:
        row = Deliver("t", message_id, b"b", "", "{}", now_ms() - 1_000, 1)
        store.write_chunk(
            query_id="q", partition=0, batch_id=1, first_row=0, rows=[row], journal_ttl_s=60
        )
        wrote.set()

    writer = threading.Thread(target=sink, daemon=True)
    writer.start()
    assert not wrote.wait(1.5), "the write claimed success while Redis was down"
    server.start()
    try:
        assert wrote.wait(30), "the write did not resume once Redis was back"
        assert redis.Redis.from_url(server.url).xlen("t") == 1
    finally:
        store.close()
        server.stop()


def test_an_orphaned_server_on_the_same_data_dir_is_taken_over(tmp_path: Path) -> None:
    port = free_port()
    orphan = EmbeddedRedis(tmp_path, port)
    orphan.start()
    redis.Redis.from_url(orphan.url).set("kept", "yes")
    successor = EmbeddedRedis(tmp_path, port)
    try:
        successor.start()
        client = redis.Redis.from_url(successor.url)
        assert client.get("kept") == b"yes", "the orphan's data did not reach its successor"
        assert client.info("server")["process_id"] != orphan._process.pid  # type: ignore[union-attr]
        client.close()
    finally:
        successor.stop()
        orphan.stop()


def test_a_raw_cancel_stops_a_message_already_in_the_outbox(redis_url: str) -> None:
    store = DeliveryStore.from_url(redis_url)
    inbound = InboundStream.from_url(redis_url)
    due_ms = now_ms() + 1_500
    message_id = new_message_id(due_ms)
    row = Deliver("outboxed", message_id, b"b", "", "{}", due_ms, 1)
    store.write_chunk(
        query_id="q", partition=0, batch_id=1, first_row=0, rows=[row], journal_ttl_s=60
    )
    raw = redis.Redis.from_url(redis_url)
    assert raw.zscore(keys.OUTBOX, message_id) == due_ms
    # What the source does for a raw op=cancel record it reads, replayed once.
    inbound.record_cancel_requests([(message_id, due_ms, "")], retention_ms=60_000)
    inbound.record_cancel_requests([(message_id, due_ms, "")], retention_ms=60_000)

    def outbox_empty() -> bool:
        if not raw.zcard(keys.OUTBOX):
            return True
        store.pump(100, journal_ttl_s=60)
        return False

    wait_for(outbox_empty, 10, "the pump to take the message", interval_s=0.01)
    assert raw.xlen("outboxed") == 0, "a cancelled message was delivered"
    assert raw.hget(keys.journal(due_ms), message_id) == b"cancelled"
    assert raw.ttl(keys.cancel_requests(due_ms)) > 0
    raw.close()
    store.close()
    inbound.close()


def test_raw_cancels_waiting_in_the_inbound_stream_are_recorded_first(
    redis_url: str,
) -> None:
    due_ms = now_ms() + 60_000
    cancelled, other = new_message_id(due_ms), new_message_id(due_ms)
    raw = redis.Redis.from_url(redis_url)
    raw.xadd(keys.INBOUND, {"v": "1", "op": "send", "id": other, "topic": "t", "body": "b"})
    raw.xadd(keys.INBOUND, {"v": "1", "op": "cancel", "id": cancelled})
    raw.xadd(keys.INBOUND, {"v": "2", "op": "cancel", "id": other})  # not a v1 cancel
    raw.xadd(keys.INBOUND, {"v": "1", "op": "cancel", "id": "not-an-id"})
    inbound = InboundStream.from_url(redis_url)
    record_waiting_cancels(
        inbound, SchedulerSettings(redis_url=redis_url, journal_retention_ms=60_000)
    )
    requested = raw.hkeys(keys.cancel_requests(due_ms))
    # "~<id>": the forecast took the message out already (see lua/forecast.lua).
    assert sorted(requested) == [cancelled.encode(), b"~" + cancelled.encode()]
    assert raw.xlen(keys.INBOUND) == 4, "the scan must leave the stream to Spark"
    raw.close()
    inbound.close()


def test_an_unreachable_redis_is_a_connect_error() -> None:
    connection = RedisConnection.from_url(f"redis://127.0.0.1:{free_port()}/0")
    with pytest.raises(ConnectError, match="cannot ping: Redis is unreachable") as caught:
        connection.execute([("PING",)], action="ping", transaction=False, errors_ok=False)
    assert isinstance(caught.value.__cause__, redis.ConnectionError)
