"""The hand-rolled baseline: a Redis sorted set scored by due time, a poller that
moves due members atomically (Lua) to a ready list, and a consumer on that list."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import cast

import redis

from bench.systems.base import Job, System, now_ms, record_receipts
from bench.systems.processes import kill_group, spawn, terminate

DELAYED = "bench:zset:delayed"
READY = "bench:zset:ready"
#: How often the poller looks when nothing was due (ms): the baseline's tick.
POLL_MS = 10
BATCH = 1_000

MOVE_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
if #due > 0 then
  redis.call('ZREM', KEYS[1], unpack(due))
  redis.call('RPUSH', KEYS[2], unpack(due))
end
return #due
"""


class ZsetSystem(System):
    name = "zset"

    def start(self) -> None:
        env = self.child_env()
        self._poller = spawn(
            [sys.executable, "-m", "bench.systems.zset", "poll", self.redis_url],
            env=env,
            log=self.workdir / "poller.log",
        )
        self._consumer = spawn(
            [sys.executable, "-m", "bench.systems.zset", "consume", self.redis_url],
            env=env,
            log=self.workdir / "consumer.log",
        )

    def schedule(self, jobs: Sequence[Job]) -> None:
        client = redis.Redis.from_url(self.redis_url)
        for start in range(0, len(jobs), BATCH):
            client.zadd(DELAYED, {job.key: job.due_ms for job in jobs[start : start + BATCH]})
        client.close()

    def backlog(self) -> dict[str, int]:
        client = redis.Redis.from_url(self.redis_url)
        try:
            return {"delayed": int(client.zcard(DELAYED)), "ready": int(client.llen(READY))}
        finally:
            client.close()

    def pids(self) -> list[int]:
        return [self._poller.pid, self._consumer.pid]

    def kill(self) -> None:
        kill_group(self._poller)

    def restart(self) -> None:
        self._poller = spawn(
            [sys.executable, "-m", "bench.systems.zset", "poll", self.redis_url],
            env=self.child_env(),
            log=self.workdir / "poller.log",
        )

    def stop(self) -> None:
        terminate(self._poller)
        terminate(self._consumer)


def poll(url: str) -> None:
    client = redis.Redis.from_url(url)
    move = client.register_script(MOVE_DUE)
    while True:
        if move(keys=[DELAYED, READY], args=[now_ms(), BATCH]) < BATCH:
            time.sleep(POLL_MS / 1000)


def consume(url: str) -> None:
    client = redis.Redis.from_url(url)
    while True:
        popped = cast(tuple[bytes, bytes] | None, client.blpop([READY], timeout=1))
        if popped is None:
            continue
        received_ms = now_ms()
        more = cast(list[bytes] | None, client.lpop(READY, BATCH - 1)) or []
        record_receipts([popped[1].decode(), *(key.decode() for key in more)], received_ms)


if __name__ == "__main__":
    {"poll": poll, "consume": consume}[sys.argv[1]](sys.argv[2])
