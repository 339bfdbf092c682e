"""The load of ``python -m bench redis-cluster``: producer and consumer processes on a
Redis Cluster, and the pure arithmetic of its schedule and its windows.

On 2 cores one Python process cannot send 25,000-50,000 msg/s through the SDK, so
the load comes from ``producers`` processes (``python -m bench.cluster_load produce
<config JSON>``), each sending its share of every phase with ``Client.send_many``
on the cluster's ``redis+cluster://`` URL; all of them follow one schedule of
absolute times. A producer writes each phase's due times (``<out>-<phase>.npy``,
message ``n`` is key ``<phase>-<index>-<n>``) and what it reached
(``<out>.json``). The consumer (``consume``) reads every topic with redis-py's
``RedisCluster``, a thread per topic (XREADGROUP names one slot a call), and
records receipts in the bench's receipts Redis as every bench consumer does.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

import numpy as np

from bench.systems.base import now_ms, record_receipts

T = TypeVar("T", bound=Hashable)

GROUP = "bench"
TOPIC_PREFIX = "bench.jobs."
#: Messages per ``send_many`` call, and per XREADGROUP.
BATCH = 1_000
#: A producer's pacing: a batch every TICK_S, at most CATCH_UP_S' worth at once.
TICK_S, CATCH_UP_S = 0.1, 0.2
#: What the consumer prints once its groups exist.
CONSUMER_READY = "consumer ready"


@dataclass(frozen=True)
class Phase:
    """``rate`` msg/s (in all, every producer together) for ``seconds``, from
    ``start_ms`` (epoch ms); its keys start with ``name``."""

    name: str
    rate: float
    seconds: float
    start_ms: int

    @property
    def end_ms(self) -> int:
        return self.start_ms + int(self.seconds * 1000)


def schedule(start_ms: int, warmup_s: float, rates: Sequence[float], step_s: float) -> list[Phase]:
    """The warm-up (``warm``, at the first rate, if ``warmup_s``) then a step per rate
    (``cap<rate>``), back to back from ``start_ms``."""
    phases: list[Phase] = []
    at = start_ms
    for name, rate, seconds in [
        *([("warm", rates[0], warmup_s)] if warmup_s else []),
        *((f"cap{int(rate)}", rate, step_s) for rate in rates),
    ]:
        phases.append(Phase(name, rate, seconds, at))
        at += int(seconds * 1000)
    return phases


def pick_topics(owner: Callable[[str], T], owners: Sequence[T], per_owner: int) -> list[str]:
    """``per_owner`` topic names (``bench.jobs.<i>``, lowest ``i`` first) for each of
    ``owners`` (the primaries), by ``owner(name)``: the topic writes spread evenly.

    Raises ValueError if 10,000 names do not give every owner its share.
    """
    chosen: dict[T, list[str]] = {node: [] for node in owners}
    for index in range(10_000):
        name = f"{TOPIC_PREFIX}{index}"
        found = chosen.get(owner(name))
        if found is not None and len(found) < per_owner:
            found.append(name)
        if all(len(names) == per_owner for names in chosen.values()):
            return [name for node in owners for name in chosen[node]]
    raise ValueError("no topic names for every primary")


def delivered_in(received_ms: np.ndarray[Any, Any], start_ms: int, end_ms: int) -> int:
    """How many of ``received_ms`` (sorted) fall in [start_ms, end_ms)."""
    low, high = np.searchsorted(received_ms, [start_ms, end_ms], side="left")
    return int(high - low)


def per_message_us(cpu_s: Mapping[str, float], messages: int) -> dict[str, float | None]:
    """CPU seconds per node turned into µs per message (None without messages)."""
    return {
        node: (round(seconds * 1e6 / messages, 1) if messages else None)
        for node, seconds in cpu_s.items()
    }


# --- the processes ------------------------------------------------------------------


def cluster_client(url: str) -> Any:
    """redis-py's RedisCluster from delayline's ``redis+cluster://:pw@h:p,...`` URL."""
    from redis.cluster import ClusterNode, RedisCluster

    parts = urlsplit(url)
    hosts = parts.netloc.rpartition("@")[2].split(",")
    nodes = [
        ClusterNode(h.rpartition(":")[0], int(h.rpartition(":")[2]))  # type: ignore[no-untyped-call]
        for h in hosts
    ]
    return RedisCluster(startup_nodes=nodes, password=parts.password)


def _sleep_until_ms(at_ms: int) -> None:
    time.sleep(max(0.0, (at_ms - now_ms()) / 1000))


def produce(config: Mapping[str, Any]) -> None:
    """One producer: its share (1/``producers``) of each phase, or its share of a burst."""
    from delayline import Client

    index, producers, topics = config["index"], config["producers"], config["topics"]
    out = Path(config["out"])
    report: dict[str, Any] = {}
    with Client(config["url"], patience_ms=120_000) as client:

        def send(keys: Sequence[str], due: Sequence[int]) -> None:
            for at in range(0, len(keys), BATCH):
                client.send_many([
                    {"topic": topics[(at + n) % len(topics)], "body": key, "deliver_at": when}
                    for n, (key, when) in enumerate(zip(keys[at : at + BATCH],
                                                        due[at : at + BATCH], strict=True))
                ])  # fmt: skip

        if "burst" in config:
            burst = config["burst"]
            mine = range(index, burst["count"], producers)
            started = time.monotonic()
            after = 0
            for at in range(0, len(mine), 5 * BATCH):
                chunk = mine[at : at + 5 * BATCH]
                due = [burst["second_ms"] + n % 1000 for n in chunk]
                send([f"burst-{n}" for n in chunk], due)
                after += sum(1 for when in due if when < now_ms())
            report["burst"] = {"sent": len(mine), "produce_s": time.monotonic() - started,
                               "sent_after_due": after}  # fmt: skip
        for phase in (Phase(**row) for row in config.get("phases", [])):
            report[phase.name] = _produce_phase(phase, send, index, producers, config, out)
    out.with_suffix(".json").write_text(json.dumps(report))


def _produce_phase(phase: Phase, send: Callable[[Sequence[str], Sequence[int]], None],
                   index: int, producers: int, config: Mapping[str, Any],
                   out: Path) -> dict[str, Any]:  # fmt: skip
    """``phase.rate / producers`` msg/s for ``phase.seconds`` from its start, in ticks;
    one that falls behind sends what it owes, CATCH_UP_S' worth at a time, and stops
    at the phase's end all the same."""
    import random

    rng = random.Random(config["seed"] * 1_000 + index)
    low_ms, high_ms = config["delay_ms"]
    rate = phase.rate / producers
    due: list[int] = []
    _sleep_until_ms(phase.start_ms)
    started = time.monotonic() - max(0.0, (now_ms() - phase.start_ms) / 1000)
    tick = 0
    while tick * TICK_S < phase.seconds:
        pause = started + tick * TICK_S - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        elif time.monotonic() - started >= phase.seconds:
            break
        owed = int(rate * min(phase.seconds, (tick + 1) * TICK_S)) - len(due)
        count = min(owed, max(1, int(rate * CATCH_UP_S)))
        if count > 0:
            stamp = now_ms()
            fresh = [stamp + rng.randint(low_ms, high_ms) for _ in range(count)]
            send([f"{phase.name}-{index}-{n}" for n in range(len(due), len(due) + count)], fresh)
            due.extend(fresh)
        tick = max(tick + 1, int((time.monotonic() - started) / TICK_S))
    np.save(f"{out}-{phase.name}.npy", np.array(due, dtype=np.int64))
    return {"sent": len(due), "elapsed_s": max(time.monotonic() - started, phase.seconds)}


def consume(config: Mapping[str, Any]) -> None:
    """Read every topic (a thread each) with XREADGROUP; record receipts, ack per batch."""
    import redis

    setup = cluster_client(config["url"])
    for topic in config["topics"]:
        with contextlib.suppress(redis.ResponseError):  # the group exists
            setup.xgroup_create(topic, GROUP, id="0", mkstream=True)
    record_receipts([], 0)  # connect to the receipts Redis before the threads share it

    def read(topic: str) -> None:
        client = cluster_client(config["url"])  # a client of its own per thread
        while True:
            read = client.xreadgroup(GROUP, "c1", {topic: ">"}, count=BATCH, block=1_000)
            found = cast(list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]], read)
            if not found:
                continue
            received_ms = now_ms()
            entries = found[0][1]
            record_receipts([fields[b"body"].decode() for _, fields in entries], received_ms)
            client.xack(topic, GROUP, *(entry_id for entry_id, _ in entries))

    threads = [threading.Thread(target=read, args=(t,), daemon=True) for t in config["topics"]]
    for thread in threads:
        thread.start()
    print(CONSUMER_READY, flush=True)
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    # The configuration is a file (mode 0600): the URL holds the cluster's password.
    {"produce": produce, "consume": consume}[sys.argv[1]](json.loads(Path(sys.argv[2]).read_text()))
