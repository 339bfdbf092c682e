"""A warm standby (``delayline run --standby``) beside an active scheduler, on one
external Redis and one checkpoint: it takes over when the active dies, and an
active that was only paused writes nothing once it wakes."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psutil
import pytest
import redis

from delayline import Client
from delayline.redis import keys
from delayline.redis.embedded import EmbeddedRedis
from delayline.testing.streams import Arrival, arrivals
from tests.support.harness import SchedulerProcess, wait_for

pytestmark = pytest.mark.spark

TOPIC = "standby.orders"
#: The default horizon, far longer than the standby takes to start its query and run
#: its first batch: every message due before the query is back waits in the outbox,
#: which the standby pumps at once. A small wheel besides, whose slots hand down
#: before the horizon.
HORIZON_MS = 60_000
WHEEL = (
    *("--coarse-after-ms", "90000", "--coarse-tick-ms", "2000"),
    *("--cascade-ahead-ms", "70000", "--horizon-ms", str(HORIZON_MS)),
    *("--partitions", "1", "--source-partitions", "1"),
)
#: Near sends take the SDK's path into the outbox; far ones go through Spark's wheel.
NEAR_DELAYS_MS = (300, 3_000)
FAR_DELAYS_MS = (HORIZON_MS + 1_000, HORIZON_MS + 4_000)
#: Longest from the active's kill to the standby's first batch (s): issue 31's target.
SPARK_BACK_S = 10.0
#: Sends per second of the steady load.
RATE_PER_S = 40


def schedulers(
    url: str, tmp_path: Path, runs: ExitStack, *, warm: bool = True
) -> tuple[SchedulerProcess, SchedulerProcess]:
    """An active scheduler running and a standby waiting, each with a data directory of
    its own, both on the Redis at ``url`` and one checkpoint. ``warm``: the standby is
    a ``--standby`` (else a plain second ``delayline run``, which starts Spark once it
    holds the lease)."""
    shared = ["--redis-url", url, "--no-api", "--checkpoint", str(tmp_path / "checkpoint")]
    active = SchedulerProcess([*shared, *WHEEL, "--data-dir", str(tmp_path / "a")])
    second = [*shared, *WHEEL, "--data-dir", str(tmp_path / "b")]
    standby = SchedulerProcess([*second, "--standby"] if warm else second)
    runs.callback(active.stop_quietly)
    runs.callback(standby.stop_quietly)
    active.launch()
    wait_for(lambda: "lease     taken" in active.output, 60, "the active's lease", [active])
    standby.launch()
    wait_for(lambda: "scheduler running" in active.output, 180, "the active", [active])
    wait_for(
        lambda: "waiting   for the scheduler lease" in standby.output,
        180,
        "the standby's Spark",
        [standby],
    )
    return active, standby


class Load:
    """Sends through the SDK at RATE_PER_S, near and far, until stopped."""

    def __init__(self, url: str, *, far: bool = True) -> None:
        """``far``: one send in four is far (else all are near)."""
        self._url = url
        self._far = far
        self.sent: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with Client(self._url) as client:
            n = 0
            while not self._stop.wait(1 / RATE_PER_S):
                low, high = FAR_DELAYS_MS if self._far and n % 4 == 0 else NEAR_DELAYS_MS
                delay_ms = low + (n * 7919) % (high - low)
                self.sent[client.send(TOPIC, f"m{n}".encode(), delay=delay_ms)] = delay_ms
                n += 1

    @contextmanager
    def running(self) -> Iterator[Load]:
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(10)


class Seen:
    """When lines first appeared in a scheduler's output (monotonic s), polled every 10 ms."""

    def __init__(self, process: SchedulerProcess, *needles: str) -> None:
        self.at: dict[str, float] = {}
        self._stop = threading.Event()

        def watch() -> None:
            while not self._stop.wait(0.01) and len(self.at) < len(needles):
                text = process.output
                for needle in needles:
                    if needle in text and needle not in self.at:
                        self.at[needle] = time.monotonic()

        threading.Thread(target=watch, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()


def check_once_and_on_time(raw: redis.Redis, sent: dict[str, int]) -> list[Arrival]:
    """Every message sent arrived once, none early; the arrivals."""
    wait_for(lambda: raw.xlen(TOPIC) >= len(sent), max(FAR_DELAYS_MS) / 1000 + 60, "every delivery")
    found = arrivals(raw, [TOPIC])
    delivered = [arrival.message_id for arrival in found]
    assert len(delivered) == len(set(delivered)), "a message arrived twice"
    assert set(delivered) == set(sent), "a message was lost"
    assert all(arrival.stream_ms >= arrival.deliver_at_ms for arrival in found), "early"
    # Nor did the standby's rehearsal (a query of rejects) write one.
    assert raw.xlen(keys.REJECTS) == 0
    return found


def p99(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[max(math.ceil(len(ordered) * 0.99) - 1, 0)]


@pytest.mark.parametrize("warm", [True, False], ids=["standby", "cold"])
def test_the_standby_takes_over_when_the_active_dies(
    own_redis: EmbeddedRedis, own_raw: redis.Redis, tmp_path: Path, warm: bool
) -> None:
    """A warm standby has the query back within SPARK_BACK_S; a plain second run (cold,
    printed beside it for the comparison) within the horizon."""
    with ExitStack() as runs:
        active, standby = schedulers(own_redis.url, tmp_path, runs, warm=warm)
        with Load(own_redis.url).running() as load:
            time.sleep(3)  # the steady load before the kill
            seen = Seen(standby, "lease     taken", "scheduler running")
            runs.callback(seen.stop)
            killed_at = time.monotonic()
            killed_at_ms = int(own_raw.time()[0]) * 1000
            active.kill()
            wait_for(lambda: "lease     taken" in standby.output, 10, "the takeover", [standby])
            time.sleep(3)  # the steady load after the takeover
        # The far messages sent before the kill wait in Spark's state: only the query,
        # back on the standby, hands them to the outbox.
        wait_for(lambda: "scheduler running" in standby.output, 120, "the query", [standby])
        found = check_once_and_on_time(own_raw, load.sent)
    lease_taken_s = seen.at["lease     taken"] - killed_at
    query_back_s = seen.at["scheduler running"] - killed_at
    during = [
        arrival.stream_ms - arrival.deliver_at_ms
        for arrival in found
        if killed_at_ms <= arrival.deliver_at_ms <= killed_at_ms + query_back_s * 1000
    ]
    print(
        f"{'standby' if warm else 'cold second run'}: lease taken {lease_taken_s:.2f} s "
        "after the kill, query back after "
        f"{query_back_s:.2f} s; {len(during)} messages due meanwhile, lateness p99 "
        f"{p99(during)} ms, max {max(during)} ms; {len(found)} delivered"
    )
    assert lease_taken_s <= 2.5
    assert query_back_s <= (SPARK_BACK_S if warm else HORIZON_MS / 1000)
    assert len(during) >= 20
    assert p99(during) <= 2_000


def test_a_paused_active_writes_nothing_once_it_wakes_and_exits(
    own_redis: EmbeddedRedis, own_raw: redis.Redis, tmp_path: Path
) -> None:
    with ExitStack() as runs:
        active, standby = schedulers(own_redis.url, tmp_path, runs)
        with Load(own_redis.url, far=False).running() as load:
            time.sleep(2)
            # Every process of the active, the JVM and the Python workers included.
            paused = [psutil.Process(p.pid) for p in active.leftovers()]
            for process in paused:
                process.suspend()
            try:
                wait_for(
                    lambda: "scheduler running" in standby.output, 120, "the takeover", [standby]
                )
                fence = int(own_raw.get(keys.UNSHARDED.fence) or 0)
                time.sleep(2)  # the standby delivers meanwhile
            finally:
                for process in paused:
                    process.resume()
        assert active.process is not None
        code = active.process.wait(60)
        assert code != 0
        assert "another scheduler took over" in active.output
        assert "start it again as a standby" in active.output
        holder = own_raw.get(keys.LEASE)
        assert holder is not None
        assert int(holder.split()[0]) == fence > 1
        check_once_and_on_time(own_raw, load.sent)
        assert standby.process is not None
        assert standby.process.poll() is None, "the standby stopped"
