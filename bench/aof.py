"""``python -m bench aof``: how big the embedded Redis's AOF gets, and how long a restart loads it.

The worst case for a restart: ``pending`` messages sent with the SDK and not
yet read by a scheduler, so every record is live in the inbound stream. The
server is SIGKILLed (a crash: nothing flushed beyond ``appendfsync everysec``)
and started again on the same directory, as ``delayline run`` does; then the
same after an AOF rewrite, which is what the configured automatic rewrite
leaves behind.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import redis

from delayline import Client
from delayline.redis.connection import no_retries
from delayline.redis.embedded import EmbeddedRedis


def _restart_s(server: EmbeddedRedis) -> float:
    """SIGKILL the server, start it again, and return how long the start took (s)."""
    pid = int(redis.Redis.from_url(server.url, retry=no_retries()).info("server")["process_id"])
    os.kill(pid, signal.SIGKILL)
    server.stop()  # reaps the killed child
    started = time.monotonic()
    server.start(timeout_s=60)
    return time.monotonic() - started


def _wait_for_rewrite(client: redis.Redis) -> None:
    while int(client.info("persistence")["aof_rewrite_in_progress"]):
        time.sleep(0.1)


def main(pending: int, port: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="delayline-aof-") as tmp:
        directory = Path(tmp)
        server = EmbeddedRedis(directory, port)
        server.start()
        try:
            started = time.monotonic()
            with Client(server.url) as client:
                for start in range(0, pending, 10_000):
                    client.send_many(
                        [{"topic": "later", "body": b"x" * 64, "delay": 3_600_000}]
                        * min(10_000, pending - start)
                    )
            send_s = time.monotonic() - started
            raw = redis.Redis.from_url(server.url, retry=no_retries())
            _wait_for_rewrite(raw)
            time.sleep(1.5)  # appendfsync everysec: let the last second reach the file
            crashed_bytes = server.aof_bytes
            crashed_load_s = _restart_s(server)
            raw = redis.Redis.from_url(server.url, retry=no_retries())
            assert raw.xlen("delayline:inbound") == pending, "the restart lost records"
            raw.bgrewriteaof()
            time.sleep(0.5)
            _wait_for_rewrite(raw)
            rewritten_bytes = server.aof_bytes
            rewritten_load_s = _restart_s(server)
        finally:
            server.stop()
    return {
        "pending": pending,
        "send_s": round(send_s, 1),
        "aof_bytes_at_crash": crashed_bytes,
        "load_s_at_crash": round(crashed_load_s, 2),
        "aof_bytes_rewritten": rewritten_bytes,
        "load_s_rewritten": round(rewritten_load_s, 2),
        "command": f"python -m bench aof --pending {pending}",
    }
