"""Chaos: a mixed workload while ``delayline run`` is SIGKILLed and its Redis restarted.

Producers send through every door (SDK near and far, raw v1 records, HTTP),
cancel through the SDK and raw records, and put a burst at one instant. The
scenario kills the whole process group at random moments, restarts it each
time, and once shuts the (external) Redis down and starts it again. The check:
every message whose send succeeded arrives exactly once and never early, no
cancel that was recorded in time loses, and nothing unknown arrives.

The CI test (tests/e2e/test_chaos.py) runs it small; ``python -m bench chaos``
runs the long version. Each passes its own launcher of ``delayline run`` (a
:class:`Run`): the test's sweeps up every process of a run, for a hermetic suite.
"""

from __future__ import annotations

import collections
import random
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import redis

from delayline import Client
from delayline.model import Cancel, Message
from delayline.redis import keys
from delayline.redis.embedded import EmbeddedRedis
from delayline.testing import SMALL_WHEEL, free_port, wait_for
from delayline.testing.streams import Arrival, arrivals, forecast_left
from delayline.timing import now_ms
from delayline.validation import Limits

TOPICS = ("chaos.orders", "chaos.reminders", "chaos.retries")
#: A raw cancel must reach the inbound stream this long before its message is
#: due to be sure to win: the scheduler reads it within a batch or two.
RAW_CANCEL_MARGIN_MS = 6_000
#: An SDK cancel wins up to the moment it returns; this margin covers the
#: non-atomic status check before it writes.
SDK_CANCEL_MARGIN_MS = 500
#: Longest a restart may take to announce "scheduler running" (s).
RESTART_BOUND_S = 150.0


class Run(Protocol):
    """One ``delayline run`` of the scenario, in a process group of its own."""

    @property
    def process(self) -> subprocess.Popen[Any] | None:
        """Its driver process, once started."""

    @property
    def output(self) -> str:
        """What it printed so far (the scenario reads its progress lines)."""

    def start(self) -> None:
        """Start it; return once it printed "scheduler running", or raise."""

    def kill(self) -> None:
        """SIGKILL its whole process group, as a crash would; return once it is gone."""

    def stop_quietly(self) -> None:
        """SIGKILL whatever of it still runs."""


#: Makes a run (not yet started) from its ``delayline run`` options.
Launcher = Callable[[Sequence[str]], Run]


@dataclass(frozen=True)
class ChaosPlan:
    """How big and how long; the defaults are the CI size."""

    seed: int
    #: Messages per producer tick (SDK batch; raw batch is half of it).
    batch: int = 20
    tick_s: float = 0.1
    max_delay_ms: int = 20_000
    burst: int = 2_000
    kills: int = 2
    outage_s: float = 10.0
    #: Seconds of traffic between two disruptions, drawn uniformly.
    calm_s: tuple[float, float] = (3.0, 8.0)
    #: Messages due in an hour, sent before the first kill, to make the AOF and the state big.
    pending: int = 0
    #: Stop sending after this many messages (None: until the last disruption is over).
    messages: int | None = None


@dataclass
class Ledger:
    """What the producers know: sent messages, recorded cancels, uncertain HTTP sends."""

    sent: dict[str, Message] = field(default_factory=dict)
    #: id -> epoch ms at which the cancel was recorded (the call returned).
    cancelled_at_ms: dict[str, int] = field(default_factory=dict)
    cancel_margin_ms: dict[str, int] = field(default_factory=dict)
    #: Bodies of HTTP sends whose outcome is unknown (the service was down).
    uncertain_bodies: set[bytes] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def must_not_arrive(self) -> set[str]:
        return {
            message_id
            for message_id, at_ms in self.cancelled_at_ms.items()
            if at_ms + self.cancel_margin_ms[message_id] <= self.sent[message_id].deliver_at_ms
        }

    def must_arrive(self) -> set[str]:
        return set(self.sent) - set(self.cancelled_at_ms)


class Producers:
    """One thread sending through every door until stopped."""

    def __init__(self, redis_url: str, api_port: int, plan: ChaosPlan) -> None:
        self.ledger = Ledger()
        self._rng = random.Random(plan.seed)
        self._plan = plan
        self._url = redis_url
        self._api = f"http://127.0.0.1:{api_port}"
        self._stop = threading.Event()
        self._burst_now = threading.Event()
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="chaos-producers", daemon=True)
        self._count = 0
        self._recent: collections.deque[Message] = collections.deque(maxlen=500)

    def start(self) -> None:
        self._thread.start()

    def burst(self) -> None:
        """Send the burst at the next tick."""
        self._burst_now.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), "the producers did not stop"
        if self._errors:
            raise AssertionError(f"a producer failed: {self._errors[0]!r}") from self._errors[0]

    def _run(self) -> None:
        # The SDK waits out outages itself; raw writes retry below.
        client = Client(self._url, patience_ms=None)
        raw = redis.Redis.from_url(self._url)
        http = httpx.Client(timeout=5.0)
        try:
            while not self._stop.wait(self._plan.tick_s):
                if self._plan.messages is not None and len(self.ledger.sent) >= self._plan.messages:
                    continue
                self._sdk_sends(client)
                self._raw_sends(raw)
                if self._count % 5 == 0:
                    self._http_send(http)
                self._cancels(client, raw)
                if self._burst_now.is_set():
                    self._burst_now.clear()
                    self._send_burst(client, raw)
                self._count += 1
        except BaseException as exc:  # reported by stop()
            self._errors.append(exc)
        finally:
            http.close()
            raw.close()
            client.close()

    def _delay_ms(self) -> int:
        # Half inside the SDK's 5 s near path, half beyond it (the coarse level too).
        if self._rng.random() < 0.5:
            return self._rng.randrange(100, 5_000)
        return self._rng.randrange(5_000, self._plan.max_delay_ms)

    def _message(
        self, body: bytes, delay_ms: int | None = None, at_ms: int | None = None
    ) -> Message:
        now = now_ms()
        return Message.create(
            self._rng.choice(TOPICS),
            body,
            now_ms=now,
            limits=Limits(),
            deliver_at=at_ms if at_ms is not None else now + (delay_ms or self._delay_ms()),
            key=str(self._rng.randrange(1000)),
        )

    def _body(self, door: str) -> bytes:
        self._count += 1
        return f"{door}-{self._plan.seed}-{self._count}-{time.monotonic_ns()}".encode()

    def _record(self, messages: Sequence[Message]) -> None:
        with self.ledger.lock:
            for message in messages:
                self.ledger.sent[message.id] = message
        self._recent.extend(messages)

    def _sdk_sends(self, client: Client) -> None:
        batch = [self._message(self._body("sdk")) for _ in range(self._plan.batch)]
        client.send_many(batch)
        self._record(batch)

    def _raw_sends(self, raw: redis.Redis) -> None:
        batch = [
            self._message(
                self._body("raw"), delay_ms=self._rng.randrange(100, self._plan.max_delay_ms)
            )
            for _ in range(self._plan.batch // 2)
        ]
        xadd_all(raw, [message.to_record() for message in batch])
        self._record(batch)

    def _http_send(self, http: httpx.Client) -> None:
        body = self._body("http")
        try:
            response = http.post(
                f"{self._api}/v1/messages",
                json={"topic": TOPICS[0], "body": body.decode(), "delay_ms": self._delay_ms()},
            )
        except httpx.TransportError:
            response = None  # killed mid-request, perhaps after the write
        if response is None or response.status_code != 201:
            # Down, or 503 while Redis is away: the write may or may not have landed.
            with self.ledger.lock:
                self.ledger.uncertain_bodies.add(body)
            return
        reply = response.json()
        message = Message(
            id=reply["id"],
            topic=TOPICS[0],
            body=body,
            deliver_at_ms=reply["deliver_at_ms"],
            sent_at_ms=now_ms(),
        )
        self._record([message])

    def _cancels(self, client: Client, raw: redis.Redis) -> None:
        # One cancel per tick, of a message sent recently (so it is still pending).
        if not self._recent:
            return
        message = self._rng.choice(self._recent)
        if message.id not in self.ledger.cancelled_at_ms:
            left_ms = message.deliver_at_ms - now_ms()
            if message.body.startswith(b"sdk") and left_ms > 2_000:
                if client.cancel(message.id):
                    self._cancelled(message.id, SDK_CANCEL_MARGIN_MS)
            elif message.body.startswith(b"raw") and left_ms > RAW_CANCEL_MARGIN_MS + 1_000:
                xadd_all(raw, [Cancel(message.id, now_ms()).to_record()])
                self._cancelled(message.id, RAW_CANCEL_MARGIN_MS)

    def _cancelled(self, message_id: str, margin_ms: int) -> None:
        with self.ledger.lock:
            self.ledger.cancelled_at_ms[message_id] = now_ms()
            self.ledger.cancel_margin_ms[message_id] = margin_ms

    def _send_burst(self, client: Client, raw: redis.Redis) -> None:
        at_ms = now_ms() + 8_000
        half = self._plan.burst // 2
        sdk = [self._message(self._body("sdk"), at_ms=at_ms) for _ in range(half)]
        for start in range(0, half, 1_000):
            client.send_many(sdk[start : start + 1_000])
        self._record(sdk)
        raws = [self._message(self._body("raw"), at_ms=at_ms) for _ in range(half)]
        xadd_all(raw, [message.to_record() for message in raws])
        self._record(raws)


def xadd_all(raw: redis.Redis, records: Sequence[dict[bytes, bytes]]) -> None:
    """XADD each record to the inbound stream, retrying while Redis is away.

    A retry after a lost reply appends a record twice; the scheduler delivers
    an id once, so that is what a real producer may do too.
    """

    def added() -> bool:
        try:
            pipe = raw.pipeline(transaction=False)
            for record in records:
                pipe.xadd(keys.INBOUND, dict(record))  # type: ignore[arg-type]
            pipe.execute()
            return True
        except (redis.ConnectionError, redis.TimeoutError):
            return False

    wait_for(added, 300, "Redis to come back and take the records", interval_s=0.2)


def wait_watching(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    runs: Sequence[Run] = (),
    details: Callable[[], str] | None = None,
) -> None:
    """Poll ``condition`` every 0.1 s until it holds; after ``timeout_s`` seconds raise
    AssertionError with ``details()`` and the tails of the runs' output."""

    def failure() -> str:
        parts = [details()] if details is not None else []
        parts += [f"--- run {n} ---\n{run.output[-4000:]}" for n, run in enumerate(runs)]
        return "\n".join(parts)

    wait_for(
        condition,
        timeout_s,
        what,
        interval_s=0.1,
        details=failure if details is not None or runs else None,
    )


@dataclass
class ChaosReport:
    seed: int
    sent: int
    cancelled: int
    delivered: int
    restarts_s: list[float]
    outage: Outage
    max_late_ms: int


@dataclass(frozen=True)
class Outage:
    """The Redis outage: how long, and what the restart had to load."""

    seconds: float
    aof_bytes: int
    load_s: float


def run_chaos(
    tmp_path: Path, plan: ChaosPlan, launch: Launcher, log: Callable[[str], None] = lambda _: None
) -> ChaosReport:
    """The whole scenario, its files in ``tmp_path``, each ``delayline run`` made by
    ``launch``; raises AssertionError (naming the seed) if a guarantee broke."""
    rng = random.Random(plan.seed)
    server = EmbeddedRedis(tmp_path / "redis", free_port())
    server.start()
    api_port = free_port()
    args = [
        "--redis-url",
        server.url,
        "--data-dir",
        str(tmp_path / "data"),
        "--api-port",
        str(api_port),
        # The outage is seen on the progress line.
        *("--progress-interval", "1"),
        *SMALL_WHEEL,
    ]
    runs: list[Run] = []
    raw = redis.Redis.from_url(server.url)
    producers = Producers(server.url, api_port, plan)
    restarts_s: list[float] = []
    outage = Outage(0.0, 0, 0.0)

    def start() -> None:
        run = launch(args)
        runs.append(run)
        started = time.monotonic()
        run.start()
        restarts_s.append(time.monotonic() - started)
        log(f"run {len(runs)} up in {restarts_s[-1]:.1f} s")

    def calm() -> None:
        pause_s = rng.uniform(*plan.calm_s)
        deadline = time.monotonic() + pause_s
        wait_watching(
            lambda: time.monotonic() > deadline or not alive(runs[-1]), pause_s + 5, "calm"
        )
        assert alive(runs[-1]), f"the scheduler exited:\n{runs[-1].output[-5000:]}"

    try:
        start()
        if plan.pending:
            fill_pending(server.url, plan.pending)
            log(f"{plan.pending:,} pending")
        producers.start()
        outage_at = rng.randrange(plan.kills + 1)
        for step in range(plan.kills + 1):
            calm()
            if step == 1:
                producers.burst()
            if step == outage_at:
                outage = redis_outage(server, runs[-1], api_port, plan.outage_s, log)
            if step < plan.kills:
                runs[-1].kill()
                log(f"killed run {len(runs)}")
                start()
        calm()
        producers.stop()
        ledger = producers.ledger
        last_due_ms = max(m.deliver_at_ms for m in ledger.sent.values())
        expected = ledger.must_arrive()

        def settled() -> bool:
            if now_ms() < last_due_ms:
                return False
            return expected <= {a.message_id for a in arrivals(raw, TOPICS)}

        wait_watching(
            settled,
            180 + plan.pending / 20_000,
            f"every message to arrive (seed {plan.seed})",
            runs,
        )
        found = arrivals(raw, TOPICS)
        report = check(found, ledger, plan.seed)
        # The cancelled messages leave the forecast as their slots fire, the last ones
        # just after the last delivery.
        wait_watching(
            lambda: not forecast_left(raw),
            30,
            f"the forecast to count nothing (seed {plan.seed})",
            runs,
            details=lambda: f"left: {forecast_left(raw)}",
        )
        slow = [s for s in restarts_s if s > RESTART_BOUND_S]
        assert not slow, f"seed {plan.seed}: a restart took {max(slow):.0f} s to run"
        return ChaosReport(
            seed=plan.seed,
            sent=len(ledger.sent),
            cancelled=len(ledger.cancelled_at_ms),
            delivered=len(found),
            restarts_s=restarts_s,
            outage=outage,
            max_late_ms=report,
        )
    finally:
        if producers._thread.is_alive():
            producers._stop.set()
        for run in runs:
            run.stop_quietly()
        raw.close()
        server.stop()


def alive(run: Run) -> bool:
    return run.process is not None and run.process.poll() is None


def redis_outage(
    server: EmbeddedRedis,
    run: Run,
    api_port: int,
    outage_s: float,
    log: Callable[[str], None],
) -> Outage:
    """Shut Redis down for ``outage_s``; the service must stay up and say so."""
    server.stop()
    stopped = time.monotonic()
    log("redis down")
    health = httpx.get(f"http://127.0.0.1:{api_port}/healthz", timeout=10)
    assert health.status_code == 503, health.text
    assert health.json()["redis"] is False
    assert health.json()["error"]
    wait_watching(
        lambda: "redis     unavailable" in run.output, 30, "the outage on the progress line", [run]
    )
    remaining_s = outage_s - (time.monotonic() - stopped)
    if remaining_s > 0:
        time.sleep(remaining_s)  # the outage itself: nothing to poll for
    assert alive(run), f"the scheduler exited during the outage:\n{run.output[-5000:]}"
    aof_bytes = server.aof_bytes
    loading = time.monotonic()
    server.start()
    load_s = time.monotonic() - loading
    log(f"redis up: loaded {aof_bytes / 1e6:.1f} MB of AOF in {load_s:.2f} s")
    wait_watching(
        lambda: "redis     back" in run.output, 60, "the service to see Redis back", [run]
    )
    return Outage(time.monotonic() - stopped, aof_bytes, load_s)


def fill_pending(url: str, count: int) -> None:
    """``count`` messages due in an hour, sent with the SDK 10,000 at a time."""
    with Client(url) as client:
        for start in range(0, count, 10_000):
            client.send_many(
                [{"topic": "chaos.later", "body": b"later", "delay": 3_600_000}]
                * min(10_000, count - start)
            )


def check(found: Sequence[Arrival], ledger: Ledger, seed: int) -> int:
    """Assert the guarantees; returns the largest lateness seen (ms)."""
    seen: dict[str, Arrival] = {}
    doubled = []
    for arrival in found:
        if arrival.message_id in seen:
            doubled.append(arrival.message_id)
        seen[arrival.message_id] = arrival
    assert not doubled, f"seed {seed}: {len(doubled)} messages arrived twice, e.g. {doubled[:3]}"
    missing = ledger.must_arrive() - set(seen)
    assert not missing, (
        f"seed {seed}: {len(missing)} messages never arrived, e.g. {sorted(missing)[:3]}"
    )
    lost_cancels = ledger.must_not_arrive() & set(seen)
    assert not lost_cancels, f"seed {seed}: {len(lost_cancels)} cancelled messages arrived"
    unknown = [
        a
        for a in found
        if a.message_id not in ledger.sent and a.body not in ledger.uncertain_bodies
    ]
    assert not unknown, f"seed {seed}: {len(unknown)} unknown messages arrived"
    max_late_ms = 0
    for arrival in found:
        sent = ledger.sent.get(arrival.message_id)
        if sent is not None:
            assert arrival.body == sent.body, f"seed {seed}: {arrival.message_id} changed"
            assert arrival.deliver_at_ms == sent.deliver_at_ms
        assert arrival.stream_ms >= arrival.deliver_at_ms, (
            f"seed {seed}: {arrival.message_id} early"
        )
        max_late_ms = max(max_late_ms, arrival.stream_ms - arrival.deliver_at_ms)
    return max_late_ms
