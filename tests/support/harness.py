"""Run the real scheduler in a subprocess, feed it a workload, and check what arrived."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import redis

from delayline import ids, local, testing, timing
from delayline.model import Cancel, Message
from delayline.redis import keys
from delayline.testing.streams import Arrival, arrivals, forecast_left, shard_layout
from delayline.validation import Limits
from tests.support.processes import alive, kill_processes, tagged_processes

#: Spark's first start in a fresh process takes 10-30 s on a 2-core machine.
START_TIMEOUT_S = 180.0


def wait_for(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    logs: Sequence[SchedulerProcess] = (),
    details: Callable[[], str] | None = None,
) -> None:
    """Poll ``condition`` every 0.1 s until it holds; fail after ``timeout_s`` seconds with
    the tails of the schedulers' logs (delayline.testing.wait_for, which this wraps).

    ``details``, if given, is called at the timeout and its text added to the failure.
    """

    def failure() -> str:
        parts = [details()] if details is not None else []
        parts += [f"--- scheduler {n} ---\n{p.output[-4000:]}" for n, p in enumerate(logs)]
        return "\n".join(parts)

    testing.wait_for(
        condition,
        timeout_s,
        what,
        interval_s=0.1,
        details=failure if details is not None or logs else None,
    )


#: Every process of one SchedulerProcess carries this variable, set to its own token.
TAG_VARIABLE = "DELAYLINE_TEST_SCHEDULER"

#: How long the Python workers of a killed scheduler may take to exit on their own.
ESCAPED_GRACE_S = 30.0

#: How often the process tree is recorded while the scheduler runs (s).
SNAPSHOT_INTERVAL_S = 0.5


def check_hermetic(args: Sequence[str]) -> None:
    """Refuse arguments that would use a default port (8470 for the API, 6390 for Redis)."""
    assert "--no-api" in args or "--api-port" in args, (
        "pass --api-port <free port> or --no-api: never the default API port"
    )
    assert "--redis-url" in args or "--redis-port" in args, (
        "pass --redis-url <a test Redis> or --redis-port <free port>: never the default"
    )


@dataclass(frozen=True)
class Service:
    """A running ``delayline run`` and its Redis (see ``default_service`` in conftest.py)."""

    url: str
    scheduler: SchedulerProcess
    raw: redis.Redis


class SchedulerProcess:
    """``python -m delayline run`` in its own process group, with its output captured.

    A context manager: leaving the block SIGKILLs the process group and every
    process the scheduler ever started, including those that left the group.
    PySpark's daemons call ``setpgid`` and, after a SIGKILLed JVM, live on
    reparented to init (see docs/design.md, "The sink"). They are found twice
    over: the process tree is recorded every ``SNAPSHOT_INTERVAL_S`` while the
    driver runs, and every process whose environment carries this run's
    ``TAG_VARIABLE`` is swept up at the end.
    """

    def __init__(
        self, args: Sequence[str], launcher: Sequence[str] = (sys.executable, "-m", "delayline")
    ) -> None:
        """``launcher``: what runs the CLI (``spark-submit ... <entry point>``, say)."""
        check_hermetic(args)
        self.args = [*launcher, "run", "--progress-interval", "1", *args]
        self.lines: list[str] = []
        self.process: subprocess.Popen[str] | None = None
        self.token = uuid.uuid4().hex
        self._seen: dict[int, psutil.Process] = {}
        self._seen_lock = threading.Lock()
        self._stopped = threading.Event()

    def __enter__(self) -> SchedulerProcess:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_quietly()

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    @property
    def embedded_url(self) -> str:
        """The embedded server's URL, password included, as the run left it in its
        ``--data-dir`` for clients."""
        data_dir = Path(self.args[self.args.index("--data-dir") + 1])
        url = local.read_url(local.server_dir(data_dir))
        assert url is not None, f"no URL in {local.server_dir(data_dir)}"
        return url

    def start(self) -> None:
        """Start it and wait for the query to run; if it does not, leave nothing behind."""
        process = self.launch()
        try:
            wait_for(
                lambda: "scheduler running" in self.output or process.poll() is not None,
                START_TIMEOUT_S,
                "the scheduler to start",
                [self],
            )
            assert process.poll() is None, f"the scheduler exited:\n{self.output[-5000:]}"
        except BaseException:
            self.stop_quietly()
            raise

    def launch(self) -> subprocess.Popen[str]:
        """Start it, and return at once."""
        self.process = subprocess.Popen(
            self.args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
            env={**os.environ, TAG_VARIABLE: self.token},
        )
        process = self.process
        self._record(psutil.Process(process.pid))
        threading.Thread(target=self._collect, args=(process,), daemon=True).start()
        threading.Thread(target=self._snapshots, daemon=True).start()
        return process

    def _collect(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        with process.stdout:
            for line in process.stdout:
                self.lines.append(line.rstrip("\n"))

    def _record(self, *processes: psutil.Process) -> None:
        with self._seen_lock:
            for process in processes:
                self._seen.setdefault(process.pid, process)

    def _snapshot(self) -> None:
        """Record the driver's descendants (JVM, executors, PySpark daemons and workers)."""
        assert self.process is not None
        # Once the driver is gone, its children were recorded while it ran.
        with contextlib.suppress(psutil.Error):
            self._record(*psutil.Process(self.process.pid).children(recursive=True))

    def _snapshots(self) -> None:
        while not self._stopped.wait(SNAPSHOT_INTERVAL_S):
            if self.process is None or self.process.poll() is not None:
                return
            self._snapshot()

    def leftovers(self) -> list[psutil.Process]:
        """Every process of this run that is still alive, in its process group or not."""
        with self._seen_lock:
            found = {pid: p for pid, p in self._seen.items() if alive(p)}
        for process in tagged_processes(TAG_VARIABLE, self.token):
            found.setdefault(process.pid, process)
        return list(found.values())

    def escaped(self) -> list[psutil.Process]:
        """Processes of this run still alive outside its process group."""
        group = self.process.pid if self.process is not None else None
        outside = []
        for process in self.leftovers():
            with contextlib.suppress(OSError):  # gone meanwhile
                if os.getpgid(process.pid) != group:
                    outside.append(process)
        return outside

    def kill(self) -> None:
        """SIGKILL the process group (driver, JVM, executors), as a crash would; wait until gone.

        Then the Python workers that live in groups of their own get
        ``ESCAPED_GRACE_S`` to notice and exit by themselves (they do, within
        about a second: their daemon sees its JVM's pipe close and SIGHUPs
        them); whichever has not is SIGKILLed. Nothing of this run survives.
        """
        assert self.process is not None
        group = self.process.pid
        # No snapshot first: it would delay the kill. Processes forked since the
        # last one carry this run's tag, and the sweep finds them.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        self.process.wait(30)
        self._stopped.set()

        def group_gone() -> bool:
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                return True
            return False

        wait_for(group_gone, 60, "the killed scheduler's processes to exit")
        deadline = time.monotonic() + ESCAPED_GRACE_S
        while (escaped := self.escaped()) and time.monotonic() < deadline:
            time.sleep(0.1)
        kill_processes(escaped)

    def interrupt(self, timeout_s: float) -> int:
        """Ctrl-C at a terminal: SIGINT to the whole process group, the driver JVM
        included; return the driver's exit code."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGINT)
        return self.process.wait(timeout_s)

    def terminate(self, timeout_s: float) -> int:
        """``kill -TERM -- -PGID``: SIGTERM to the whole process group, the driver JVM
        included; return the driver's exit code."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGTERM)
        return self.process.wait(timeout_s)

    def stop_quietly(self) -> None:
        """SIGKILL whatever of this run still runs, at once (the group and escaped processes)."""
        self._stopped.set()
        if self.process is None:
            return
        if self.process.poll() is None:
            self._snapshot()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(30)
        kill_processes(self.leftovers())


def checkpoint_batches(data_dir: Path) -> tuple[int, int]:
    """The newest batch id in the checkpoint's offset log, and in its commit log (-1: none).

    Equal means no batch was in flight; one more offset than commit means the
    newest batch was planned but not committed, and a restart runs it again.
    """
    newest = []
    for log in ("offsets", "commits"):
        folder = data_dir / "checkpoint" / log
        names = [p.name for p in folder.iterdir()] if folder.is_dir() else []
        newest.append(max((int(name) for name in names if name.isdigit()), default=-1))
    return newest[0], newest[1]


def kill_at(
    process: SchedulerProcess, data_dir: Path, *, in_flight: bool, timeout_s: float = 60.0
) -> int:
    """SIGKILL ``process`` while a batch is in flight, or while none is; return the batch id.

    In flight: the newest batch is planned (offset log) but not committed, so
    the restart runs it again. Not in flight: the newest batch is committed.
    The group is stopped (SIGSTOP) before the checkpoint is read a second time,
    so no batch can start or commit between that check and the kill.
    """
    assert process.process is not None
    group = process.process.pid
    deadline = time.monotonic() + timeout_s

    def wanted() -> bool:
        offsets, commits = checkpoint_batches(data_dir)
        return offsets == commits + 1 if in_flight else offsets == commits >= 0

    while True:
        if wanted():
            os.killpg(group, signal.SIGSTOP)
            if wanted():
                process.kill()
                return checkpoint_batches(data_dir)[0]
            os.killpg(group, signal.SIGCONT)
        if time.monotonic() > deadline:
            state = "in flight" if in_flight else "committed"
            raise AssertionError(f"no moment with the newest batch {state} in {timeout_s:.0f} s")
        time.sleep(0.002)


def stats_of(raw: redis.Redis) -> dict[str, int]:
    """The scheduler's counters, every shard's added up."""
    stats: dict[str, int] = {}
    for shard in shard_layout(raw):
        for name, value in raw.hgetall(shard.stats).items():
            stats[name.decode()] = stats.get(name.decode(), 0) + int(value)
    return stats


def pipeline_state(raw: redis.Redis, data_dir: Path) -> str:
    """Where the messages are, and how far the query got: for a failure message."""
    stats = stats_of(raw)
    offsets, commits = checkpoint_batches(data_dir)
    outbox = sum(raw.zcard(shard.outbox) for shard in shard_layout(raw))
    return (
        f"inbound {raw.xlen(keys.INBOUND)}, outbox {outbox}, "
        f"delivered {len(arrivals(raw, TOPICS))}, stats {stats}; "
        f"checkpoint: newest offset batch {offsets}, newest commit {commits}"
    )


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
    inbound_shards: int = 1,
    raw: redis.Redis | None = None,
) -> Workload:
    """Send the standard workload (:func:`workload_records`) straight to the inbound
    stream; with ``inbound_shards``, each record of a message to its shard's stream,
    and one send in four to the default stream, as a producer that does not know them.
    ``raw`` writes them if given (a cluster's client, say), else a client of ``redis_url``.
    """
    workload, records = workload_records(
        total=total, max_delay_ms=max_delay_ms, burst=burst, malformed=malformed, seed=seed
    )
    own = raw is None
    raw = redis.Redis.from_url(redis_url) if raw is None else raw
    pipe = raw.pipeline(transaction=False)
    for n, record in enumerate(records):
        claimed = record.get(b"id", b"").decode("ascii", "replace")
        sharded = inbound_shards > 1 and n % 4 and ids.is_message_id(claimed)
        stream = keys.inbound_for(claimed, inbound_shards) if sharded else keys.INBOUND
        pipe.xadd(stream, dict(record))  # type: ignore[arg-type]
    pipe.execute()
    if own:
        raw.close()
    return workload


def workload_records(
    *, total: int, max_delay_ms: int, burst: int, malformed: int, seed: int
) -> tuple[Workload, list[dict[bytes, bytes]]]:
    """The standard workload and its inbound records, in the order to write them.

    ``total`` messages with delays spread over 0..max_delay_ms, ``burst`` of them
    due at the same millisecond, 10% cancelled (a few of them cancelled *before*
    the message is sent), and ``malformed`` raw records of every kind of wrong.
    """
    rng = random.Random(seed)
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
    return workload, records


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


def settled(raw: redis.Redis, workload: Workload) -> bool:
    """True once every message is delivered or dropped and every bad record rejected."""
    stats = stats_of(raw)
    return (
        stats.get("delivered", 0) >= len(workload.expected)
        and stats.get("dropped", 0) >= len(workload.cancelled)
        and stats.get("rejected", 0) >= len(workload.malformed)
    )


def check_exactly_once(
    raw: redis.Redis,
    workload: Workload,
    *,
    max_late_ms: int | None,
    found: list[Arrival] | None = None,
) -> None:
    """Every expected message exactly once (among ``found``, or the topic streams'
    entries), none cancelled, none early; rejects kept."""
    found = arrivals(raw, TOPICS) if found is None else found
    ids = [arrival.message_id for arrival in found]
    duplicated = {i for i in ids if ids.count(i) > 1}
    assert not duplicated, f"{len(duplicated)} messages arrived more than once"
    check_delivered(raw, workload, found, max_late_ms=max_late_ms)


def check_at_least_once(raw: redis.Redis, workload: Workload, found: list[Arrival]) -> int:
    """Every expected message at least once, each repeat the same as its first, none
    cancelled, none early; rejects kept. Returns how many arrivals were repeats."""
    first: dict[str, Arrival] = {}
    for arrival in found:
        seen = first.setdefault(arrival.message_id, arrival)
        assert (seen.topic, seen.body, seen.key) == (arrival.topic, arrival.body, arrival.key)
    check_delivered(raw, workload, list(first.values()), max_late_ms=None)
    return len(found) - len(first)


def check_delivered(
    raw: redis.Redis, workload: Workload, found: list[Arrival], *, max_late_ms: int | None
) -> None:
    """``found`` (each id once) holds every expected message, as it was sent, none
    cancelled, none early; every malformed record is kept as a reject."""
    ids = [arrival.message_id for arrival in found]
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
    rejects = [fields for shard in shard_layout(raw) for _, fields in raw.xrange(shard.rejects)]
    assert len(rejects) == len(workload.malformed)
    for fields in rejects:
        assert fields[b"reason"], "a reject without a reason"
        assert int(fields[b"rejected_at_ms"]) > 0
    kept = sorted(int(fields[b"n"]) for fields in rejects)
    assert kept == list(range(len(workload.malformed))), "a malformed record was lost"
    # Each message changed the forecast's counters once when accepted and once when
    # settled: with every message settled, they are all back to zero.
    assert not forecast_left(raw), f"the forecast still counts {forecast_left(raw)}"
