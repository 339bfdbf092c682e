"""The reproduction of issue 8: kill -9 of ``delayline run`` with a big AOF, then start again.

The embedded Redis answers INFO while it loads its AOF and LOADING to anything
else; ``delayline run`` used to give up there ("Redis is loading the dataset
in memory"), every time, and leave the pending messages unreachable.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from delayline import Client
from delayline.testing import free_port
from delayline.timing import now_ms
from tests.support.harness import SchedulerProcess, wait_for

pytestmark = pytest.mark.spark

#: Messages pending at the kill, in batches of 10,000.
PENDING = 200_000
#: Of those, due while the service restarts (the rest in an hour).
DUE_SOON = 10_000


def test_a_killed_run_with_200k_pending_comes_back_and_delivers_once(tmp_path: Path) -> None:
    port = free_port()
    args = ["--redis-port", str(port), "--no-api", "--data-dir", str(tmp_path / "data")]
    first = SchedulerProcess(args)
    second = SchedulerProcess(args)
    try:
        first.start()
        url = first.embedded_url
        with Client(url) as client:
            for _ in range((PENDING - DUE_SOON) // 10_000):
                client.send_many(
                    [{"topic": "later", "body": b"x" * 64, "delay": 3_600_000}] * 10_000
                )
            # Due 25 s from now: after the kill, during or just after the restart.
            due_ms = now_ms() + 25_000
            soon = client.send_many(
                [
                    {"topic": "soon", "body": str(n), "deliver_at": due_ms + n}
                    for n in range(DUE_SOON)
                ]
            )
        # The AOF holds every record not yet rewritten away: several MB to load at
        # restart (the bug showed from 1.6 MB on).
        [aof] = (tmp_path / "data" / "redis" / "appendonlydir").glob("*.incr.aof")
        assert aof.stat().st_size > 1_600_000
        first.kill()

        second.start()
        assert "error" not in second.output.lower().replace("errors", "")
        raw = redis.Redis.from_url(url)
        wait_for(lambda: raw.xlen("soon") >= DUE_SOON, 180, "the messages due soon", [second])
        arrived = raw.xrange("soon")
        ids = [fields[b"id"].decode() for _, fields in arrived]
        assert len(ids) == len(set(ids)) == DUE_SOON, "a message arrived twice"
        assert set(ids) == set(soon)
        for entry_id, fields in arrived:
            assert int(entry_id.split(b"-")[0]) >= int(fields[b"deliver_at_ms"]), "early"
        # The soon ones waited in the outbox (due within the horizon), and the pump
        # delivers them while the source may still read the backlog the kill left:
        # each send is counted once, when a batch reads it.
        wait_for(
            lambda: int(raw.hget("delayline:stats", "accepted") or 0) >= PENDING,
            120,
            "every send counted",
            [second],
        )
        assert int(raw.hget("delayline:stats", "accepted") or 0) == PENDING
        raw.close()
    finally:
        second.stop_quietly()
        first.stop_quietly()
