"""Run the real scheduler in a subprocess, feed it a workload, and check what arrived."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import redis

from delayline import ids, timing
from delayline.model import Cancel, Message
from delayline.transports import keys
from delayline.validation import Limits

#: Spark's first start in a fresh process takes 10-30 s on a 2-core machine.
START_TIMEOUT_S = 180.0

#: A small two-level wheel, so that a 0-15 s workload exercises the coarse level:
#: messages due more than 6 s ahead start coarse and are handed down 3 s ahead.
SMALL_WHEEL = ["--coarse-after-ms", "6000", "--coarse-tick-ms", "2000", "--cascade-lead-ms", "3000"]


def wait_for(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    logs: Sequence[SchedulerProcess] = (),
) -> None:
    """Poll ``condition`` until it holds; fail after ``timeout_s`` with the schedulers' logs."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            tails = "".join(
                f"\n--- scheduler {n} ---\n{p.output[-4000:]}" for n, p in enumerate(logs)
            )
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}{tails}")
        time.sleep(0.1)


class SchedulerProcess:
    """``python -m delayline run`` in its own process group, with its output captured."""

    def __init__(self, args: Sequence[str]) -> None:
        self.args = [sys.executable, "-m", "delayline", "run", "--progress-interval", "1", *args]
        self.lines: list[str] = []
        self.process: subprocess.Popen[str] | None = None

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def start(self) -> None:
        """Start it and wait for the query to run."""
        self.process = subprocess.Popen(
            self.args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        threading.Thread(target=self._collect, args=(self.process,), daemon=True).start()
        wait_for(
            lambda: "scheduler running" in self.output or self.process.poll() is not None,  # type: ignore[union-attr]
            START_TIMEOUT_S,
            "the scheduler to start",
        )
        assert self.process.poll() is None, f"the scheduler exited:\n{self.output[-5000:]}"

    def _collect(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                self.lines.append(line.rstrip("\n"))

    def kill(self) -> None:
        """SIGKILL the whole process group (driver and JVM) and wait until it is gone."""
        assert self.process is not None
        group = self.process.pid
        os.killpg(group, signal.SIGKILL)
        self.process.wait(30)

        def group_gone() -> bool:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return True
            return False

        wait_for(group_gone, 60, "the killed scheduler's processes to exit")

    def terminate(self, timeout_s: float) -> int:
        """SIGTERM the driver only, as a service manager would; return its exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)

    def stop_quietly(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.kill()


@dataclass
class Workload:
    """What was sent: every message, the ids that were cancelled, the raw bad records."""

    messages: dict[str, Message] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)
    malformed: list[dict[bytes, bytes]] = field(default_factory=list)

    @property
    def expected(self) -> set[str]:
        return set(self.messages) - self.cancelled


TOPICS = ("orders.timeout", "reminders", "retry.calls")


def send_workload(
    redis_url: str,
    *,
    total: int = 2_000,
    max_delay_ms: int = 15_000,
    burst: int = 300,
    malformed: int = 20,
    seed: int = 7,
) -> Workload:
    """Send the standard workload straight to the inbound stream.

    ``total`` messages with delays spread over 0..max_delay_ms, ``burst`` of them
    due at the same millisecond, 10% cancelled (a few of them cancelled *before*
    the message is sent), and ``malformed`` raw records of every kind of wrong.
    """
    rng = random.Random(seed)
    raw = redis.Redis.from_url(redis_url)
    limits = Limits()
    now = timing.now_ms()
    burst_at_ms = now + max_delay_ms // 2
    workload = Workload()
    records: list[dict[bytes, bytes]] = []
    for n in range(total):
        due_ms = burst_at_ms if n < burst else now + rng.randrange(max_delay_ms)
        message = Message.create(
            TOPICS[n % len(TOPICS)],
            f"body-{n}".encode(),
            now_ms=now,
            limits=limits,
            deliver_at=due_ms,
            key=f"k{n}",
        )
        workload.messages[message.id] = message
        # Cancel 10%, only among messages due far enough ahead for the cancel to
        # reach the scheduler first; ten of them cancel before the message is sent.
        cancel = n % 10 == 0 and due_ms - now > 4_000
        if cancel and len(workload.cancelled) < 10:
            records.append(Cancel(message.id, now).to_record())
            records.append(message.to_record())
        else:
            records.append(message.to_record())
            if cancel:
                records.append(Cancel(message.id, now).to_record())
        if cancel:
            workload.cancelled.add(message.id)
    workload.malformed = bad_records(malformed, now)
    records[len(records) // 2 : len(records) // 2] = workload.malformed
    pipe = raw.pipeline(transaction=False)
    for record in records:
        pipe.xadd(keys.INBOUND, dict(record))  # type: ignore[arg-type]
    pipe.execute()
    raw.close()
    return workload


def bad_records(count: int, now_ms: int) -> list[dict[bytes, bytes]]:
    """``count`` raw records, each wrong in one way the scheduler must reject."""
    good = Message.create("t", b"x", now_ms=now_ms, limits=Limits(), delay=1_000).to_record()
    variants: list[dict[bytes, bytes]] = [
        {b"garbage": b"\xff\xfe"},
        good | {b"v": b"9"},
        good | {b"op": b"explode"},
        good | {b"id": b"not-an-id"},
        good | {b"deliver_at_ms": b"tomorrow"},
        good | {b"topic": b"has spaces"},
        good | {b"topic": b"delayline:inbound"},
        good | {b"headers": b"[not an object]"},
        good | {b"attempt": b"-1"},
        beyond_max_delay(now_ms),
        {k: v for k, v in good.items() if k != b"body"},
    ]
    return [variants[n % len(variants)] | {b"n": str(n).encode()} for n in range(count)]


def beyond_max_delay(now_ms: int) -> dict[bytes, bytes]:
    """A well-formed send due 3 years out: past the default 2-year maximum."""
    due_ms = now_ms + 3 * 365 * 24 * 3600 * 1000
    message = Message(
        id=ids.new_message_id(due_ms), topic="t", body=b"x", deliver_at_ms=due_ms, sent_at_ms=now_ms
    )
    return message.to_record()


@dataclass(frozen=True)
class Arrival:
    message_id: str
    topic: str
    body: bytes
    key: str
    deliver_at_ms: int
    delivered_at_ms: int
    stream_ms: int  # Redis's clock when the entry was added


def arrivals(raw: redis.Redis) -> list[Arrival]:
    found = []
    for topic in TOPICS:
        for entry_id, fields in raw.xrange(topic):
            found.append(
                Arrival(
                    message_id=fields[b"id"].decode(),
                    topic=topic,
                    body=fields[b"body"],
                    key=fields[b"key"].decode(),
                    deliver_at_ms=int(fields[b"deliver_at_ms"]),
                    delivered_at_ms=int(fields[b"delivered_at_ms"]),
                    stream_ms=int(entry_id.split(b"-")[0]),
                )
            )
    return found


def settled(raw: redis.Redis, workload: Workload) -> bool:
    """True once every message is delivered or dropped and every bad record rejected."""
    stats = {k.decode(): int(v) for k, v in raw.hgetall(keys.STATS).items()}
    return (
        stats.get("delivered", 0) >= len(workload.expected)
        and stats.get("dropped", 0) >= len(workload.cancelled)
        and stats.get("rejected", 0) >= len(workload.malformed)
    )


def check_exactly_once(raw: redis.Redis, workload: Workload, *, max_late_ms: int | None) -> None:
    """Every expected message exactly once, none cancelled, none early; rejects kept."""
    found = arrivals(raw)
    ids = [arrival.message_id for arrival in found]
    duplicated = {i for i in ids if ids.count(i) > 1}
    assert not duplicated, f"{len(duplicated)} messages arrived more than once"
    assert not set(ids) & workload.cancelled, "a cancelled message was delivered"
    missing = workload.expected - set(ids)
    assert not missing, f"{len(missing)} messages never arrived"
    assert set(ids) == workload.expected
    for arrival in found:
        sent = workload.messages[arrival.message_id]
        assert (arrival.topic, arrival.body, arrival.key) == (sent.topic, sent.body, sent.key)
        assert arrival.deliver_at_ms == sent.deliver_at_ms
        assert arrival.stream_ms >= sent.deliver_at_ms, f"{arrival.message_id} arrived early"
        assert arrival.delivered_at_ms >= sent.deliver_at_ms
        if max_late_ms is not None:
            late_ms = arrival.stream_ms - sent.deliver_at_ms
            assert late_ms <= max_late_ms, f"{arrival.message_id} was {late_ms} ms late"
    rejects = [fields for _, fields in raw.xrange(keys.REJECTS)]
    assert len(rejects) == len(workload.malformed)
    for fields in rejects:
        assert fields[b"reason"], "a reject without a reason"
        assert int(fields[b"rejected_at_ms"]) > 0
    kept = sorted(int(fields[b"n"]) for fields in rejects)
    assert kept == list(range(len(workload.malformed))), "a malformed record was lost"
