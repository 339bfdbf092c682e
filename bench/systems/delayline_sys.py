"""delayline: ``delayline run`` against the bench's Redis, plus a plain XREADGROUP consumer."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Sequence

import redis

from bench.systems.base import Job, System, now_ms, record_receipts
from bench.systems.processes import fresh_log, kill_group, spawn, terminate, wait_for_log
from delayline import Client
from delayline.transports.keys import INBOUND

TOPIC = "bench.jobs"
GROUP = "bench"
BATCH = 1_000
#: Inbound entries left that count as absorbed: about one trigger's worth of input.
ABSORBED_BELOW = 1_000
#: Spark's cold start on 2 cores, plus the first batch after a restart with a backlog.
START_TIMEOUT_S = 300


class DelaylineSystem(System):
    name = "delayline"
    #: Extra ``delayline run`` options (tuning), set by the harness.
    run_options: Sequence[str] = ()

    def start(self) -> None:
        self._start_scheduler()
        self._consumer = spawn(
            [sys.executable, "-m", "bench.systems.delayline_sys", self.redis_url],
            env=self.child_env(),
            log=self.workdir / "consumer.log",
        )
        self._client = Client(self.redis_url)

    def _start_scheduler(self) -> None:
        log = fresh_log(self.workdir / "scheduler.log")
        self._scheduler = spawn(
            [
                sys.executable,
                "-m",
                "delayline",
                "run",
                "--redis-url",
                self.redis_url,
                "--data-dir",
                str(self.workdir / "data"),
                "--no-api",
                *self.run_options,
            ],
            env=self.child_env(),
            log=log,
        )
        wait_for_log(log, "scheduler running", START_TIMEOUT_S, self._scheduler)

    def schedule(self, jobs: Sequence[Job]) -> None:
        for start in range(0, len(jobs), BATCH):
            self._client.send_many(
                [
                    {"topic": TOPIC, "body": job.key, "deliver_at": job.due_ms}
                    for job in jobs[start : start + BATCH]
                ]
            )

    def wait_absorbed(self, timeout_s: float) -> None:
        """Until the scheduler has read its inbound stream (trimmed after each commit)."""
        inbound = redis.Redis.from_url(self.redis_url)
        deadline = time.monotonic() + timeout_s
        while inbound.xlen(INBOUND) > ABSORBED_BELOW and time.monotonic() < deadline:
            time.sleep(0.5)
        inbound.close()

    def pids(self) -> list[int]:
        return [self._scheduler.pid, self._consumer.pid]

    def kill(self) -> None:
        kill_group(self._scheduler)

    def restart(self) -> None:
        self._start_scheduler()

    def stop(self) -> None:
        self._client.close()
        terminate(self._scheduler, timeout_s=90)
        terminate(self._consumer)


def consume(url: str) -> None:
    """Read deliveries with plain XREADGROUP; record receipts and ack per batch."""
    client = redis.Redis.from_url(url)
    with contextlib.suppress(redis.ResponseError):  # the group exists
        client.xgroup_create(TOPIC, GROUP, id="0", mkstream=True)
    while True:
        found = client.xreadgroup(GROUP, "c1", {TOPIC: ">"}, count=BATCH, block=1_000)
        if not found:
            continue
        received_ms = now_ms()
        entries = found[0][1]
        record_receipts([fields[b"body"].decode() for _, fields in entries], received_ms)
        client.xack(TOPIC, GROUP, *(entry_id for entry_id, _ in entries))


if __name__ == "__main__":
    consume(sys.argv[1])
