"""delayline: ``delayline run`` against the bench's Redis, plus a plain XREADGROUP consumer.

Two producers: the SDK's ``send_many`` (:meth:`DelaylineSystem.schedule`), and
raw v1 records written with plain pipelined ``XADD`` to ``delayline:inbound``
(:meth:`DelaylineSystem.schedule_raw`), the way a producer in another language
would write them: no near path, every record goes through the Spark job.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Sequence
from typing import cast

import redis

from bench.systems.base import Job, System, now_ms, record_receipts
from bench.systems.processes import fresh_log, kill_group, spawn, terminate, wait_for_log
from delayline import Client, ids
from delayline.model import Message
from delayline.redis.inbound import StreamEntry
from delayline.redis.keys import CONFIG, INBOUND, OUTBOX, STATS, inbound_streams

TOPIC = "bench.jobs"
GROUP = "bench"
BATCH = 1_000
#: Inbound entries left that count as absorbed: the scheduler trims what a batch read
#: when it commits, which may wait for the next batch.
ABSORBED_BELOW = 1_000
#: Once every send is counted, how long to wait for the inbound stream to be empty.
EMPTY_GRACE_S = 10
#: Spark's cold start on 2 cores, plus the first batch after a restart with a backlog.
START_TIMEOUT_S = 300


class DelaylineSystem(System):
    name = "delayline"
    #: Extra ``delayline run`` options (tuning): ``python -m bench run --delayline-option``.
    run_options: Sequence[str] = ()

    def start(self) -> None:
        self._sent = 0  # sends made by the bench, counted under _lock (recovery has two threads)
        self._lock = threading.Lock()
        self._start_scheduler()
        self._consumer = spawn(
            self.consumer_args(), env=self.child_env(), log=self.workdir / "consumer.log"
        )
        self._client = Client(self.redis_url)
        self._raw = redis.Redis.from_url(self.redis_url)

    def consumer_args(self) -> list[str]:
        """The command of the process that receives deliveries and records receipts."""
        return [sys.executable, "-m", "bench.systems.delayline_sys", self.redis_url]

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
            with self._lock:
                self._sent += len(jobs[start : start + BATCH])

    def schedule_raw(self, jobs: Sequence[Job]) -> None:
        """Write ``jobs`` as raw v1 send records: plain XADDs, pipelined 1,000 at a time."""
        sent_at_ms = now_ms()
        for start in range(0, len(jobs), BATCH):
            chunk = jobs[start : start + BATCH]
            pipe = self._raw.pipeline(transaction=False)
            for job in chunk:
                pipe.xadd(INBOUND, raw_record(job, sent_at_ms))  # type: ignore[arg-type]
            pipe.execute()
            with self._lock:
                self._sent += len(chunk)

    def wait_absorbed(self, timeout_s: float) -> bool:
        """Until ``delayline:stats`` counts every send the bench made (accepted or
        rejected) and the inbound stream is empty (or nearly: see ABSORBED_BELOW)."""
        deadline = time.monotonic() + timeout_s
        counted_at: float | None = None
        while time.monotonic() < deadline:
            backlog = self.backlog()
            if backlog["accepted"] + backlog["rejected"] >= self._sent:
                counted_at = counted_at or time.monotonic()
                if backlog["inbound"] == 0 or (
                    backlog["inbound"] <= ABSORBED_BELOW
                    and time.monotonic() - counted_at > EMPTY_GRACE_S
                ):
                    return True
            time.sleep(0.5)
        return False

    def backlog(self) -> dict[str, int]:
        """Inbound streams' length (every shard's), outbox size, and the accepted and
        rejected counters."""
        shards = int(self._raw.hget(CONFIG, "inbound_shards") or 1)
        pipe = self._raw.pipeline(transaction=False)
        pipe.zcard(OUTBOX)
        pipe.hmget(STATS, "accepted", "rejected")
        for stream in inbound_streams(shards):
            pipe.xlen(stream)
        outbox, (accepted, rejected), *lengths = pipe.execute()
        return {
            "sent": self._sent,
            "inbound": sum(int(length) for length in lengths),
            "outbox": int(outbox),
            "accepted": int(accepted or 0),
            "rejected": int(rejected or 0),
        }

    def pids(self) -> list[int]:
        return [self._scheduler.pid, self._consumer.pid]

    def kill(self) -> None:
        kill_group(self._scheduler)

    def restart(self) -> None:
        self._start_scheduler()

    def stop(self) -> None:
        self._client.close()
        self._raw.close()
        terminate(self._scheduler, timeout_s=90)
        terminate(self._consumer)


def raw_record(job: Job, sent_at_ms: int) -> dict[bytes, bytes]:
    """The v1 inbound record of ``job``, built with delayline's own model code."""
    return Message(
        id=ids.new_message_id(job.due_ms),
        topic=TOPIC,
        body=job.key.encode(),
        deliver_at_ms=job.due_ms,
        sent_at_ms=sent_at_ms,
    ).to_record()


def consume(url: str) -> None:
    """Read deliveries with plain XREADGROUP; record receipts and ack per batch."""
    client = redis.Redis.from_url(url)
    with contextlib.suppress(redis.ResponseError):  # the group exists
        client.xgroup_create(TOPIC, GROUP, id="0", mkstream=True)
    while True:
        found = cast(
            list[tuple[bytes, list[StreamEntry]]],
            client.xreadgroup(GROUP, "c1", {TOPIC: ">"}, count=BATCH, block=1_000),
        )
        if not found:
            continue
        received_ms = now_ms()
        entries = found[0][1]
        record_receipts([fields[b"body"].decode() for _, fields in entries], received_ms)
        client.xack(TOPIC, GROUP, *(entry_id for entry_id, _ in entries))


if __name__ == "__main__":
    consume(sys.argv[1])
