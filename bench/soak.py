"""``python -m bench soak``: do delayline's memory and disk stay flat under steady load?

Starts ``delayline run`` with its default settings (the embedded Redis with AOF
on, the HTTP API) on free ports and a fresh data directory. ``producers``
processes send ``rate`` msg/s in all with the SDK's ``send_many``, 100 ms
batches paced against a fixed schedule (no drift), bodies of ``body_bytes``,
delays uniform in [min, max] s, round-robin over the topics ``soak.0`` ..
One consumer process reads every topic through its own consumer group with
plain ``XREADGROUP`` and ``XACK``s every entry, as a real consumer does.

The producers write ``(id, deliver_at_ms)`` of each send, and the consumer
``(id, deliver_at_ms, delivered_at_ms, received_ms)`` of each entry read, to
binary files in the load generator's own scratch directory (not delayline's
data directory, nor its Redis). Lateness is the service's,
``delivered_at_ms - deliver_at_ms`` (Redis's clock); ``receive`` lateness is
``received_ms - deliver_at_ms`` (the consumer's clock, the same machine).

Every ``sample_s`` one row is added and the whole JSON file rewritten, so a run
cut short still has its rows: messages sent and delivered so far, Redis's
``INFO memory`` and its memory by key family (:func:`family`, ``MEMORY USAGE
key SAMPLES 5`` summed, from a random sample of FAMILY_SAMPLE keys scaled up in
a larger family), the data directory by part, the PSS of every process of
``delayline run``'s tree and of the load generator's, delayline's CPU seconds
in the window, and the lateness of the window's deliveries.

After ``minutes`` the producers stop; the run waits until every message sent is
delivered (at most ``max_delay_s`` + DRAIN_GRACE_S), then counts lost,
duplicated and early messages. The summary has, for every series, its
least-squares slope over the second half of the load's rows and where that
slope leads in 24 h and 30 days, Redis bytes retained per delivered message,
and the p99 of the first 10 minutes against the last 10 (thirds of a run shorter
than 30 minutes). :func:`report` draws the series and prints a markdown table.

Units: bytes for Redis and disk (disk is allocated space, ``st_blocks * 512``,
of the files), MB (2**20 bytes) for PSS as everywhere in bench, ms for times
unless named ``_s``.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Any, ClassVar, TypeVar, cast

import numpy as np
import numpy.typing as npt
import psutil  # type: ignore[import-untyped,unused-ignore]
import redis

from bench.measure import Sampler
from bench.systems.processes import fresh_log, spawn, terminate, wait_for_log
from delayline import Client, local
from delayline.testing import free_port

#: Topic ``n`` of the run is ``soak.<n>``; every topic has a consumer group GROUP.
TOPIC_PREFIX = "soak."
GROUP = "soak"
#: delayline's own keys start with this; any other stream is a topic.
PREFIX = "delayline:"
#: The family of every topic stream.
TOPICS_FAMILY = "topics"
#: SCAN's COUNT, MEMORY USAGE's SAMPLES, and how many keys of a family are measured.
SCAN_COUNT = 1_000
MEMORY_SAMPLES = 5
FAMILY_SAMPLE = 50
#: The producers' pacing: a batch every TICK_S, at most CATCH_UP_S of messages in one.
TICK_S = 0.1
CATCH_UP_S = 0.2
#: Entries per XREADGROUP, and how long it blocks (ms).
READ_COUNT = 1_000
READ_BLOCK_MS = 1_000
#: After the last message is due, how long to wait for the rest before calling them lost.
DRAIN_GRACE_S = 60
#: Spark's cold start on 2 cores, with room.
START_TIMEOUT_S = 300
#: The p99 of the first and the last this many seconds of the load are compared; a
#: run shorter than three of them compares its first and last thirds.
P99_WINDOW_S = 600
#: Projections: 24 h and 30 days from the start of the run, in hours.
HORIZONS_H = {"24h": 24.0, "30d": 720.0}
#: How long the processes of delayline's tree get to exit after it stopped (s).
STRAYS_GRACE_S = 10
#: The lines the child processes log once they are ready.
CONSUMER_READY = "soak consumer ready"

#: What a producer writes per message sent, and the consumer per entry read.
SENT = np.dtype([("id", "S26"), ("deliver_at_ms", "<i8")])
RECEIVED = np.dtype(
    [("id", "S26"), ("deliver_at_ms", "<i8"), ("delivered_at_ms", "<i8"), ("received_ms", "<i8")]
)

Records = npt.NDArray[Any]
#: A metric over time: (t_s, value) points.
Points = list[tuple[float, float]]


@dataclass(frozen=True)
class SoakParams:
    """One soak run's parameters. ``delayline_options``: extra ``delayline run`` options
    (none: its defaults)."""

    minutes: float = 60.0
    rate: float = 5_000.0
    sample_s: float = 30.0
    body_bytes: int = 200
    min_delay_s: float = 1.0
    max_delay_s: float = 60.0
    topics: int = 4
    producers: int = 1
    delayline_options: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The default result file's stem: ``60min-5000``."""
        return f"{self.minutes:g}min-{self.rate:g}"


#: ``--quick``: what the options not given default to.
QUICK = {"minutes": 3.0, "rate": 2_000.0, "sample_s": 20.0, "max_delay_s": 20.0}
#: ``--quick``: Redis bytes a delivered message may leave behind over the second half.
QUICK_MAX_BYTES_PER_MESSAGE = 64.0


def params(quick: bool, given: Mapping[str, Any]) -> SoakParams:
    """The run's parameters: the options ``given`` (None: not given), else QUICK's with
    ``quick``, else SoakParams' defaults."""
    chosen = {name: value for name, value in given.items() if value is not None}
    if quick:
        chosen = QUICK | chosen
    return SoakParams(**chosen)


# --- pure parts: names, statistics, trends ------------------------------------------


def family(key: str, stream: bool) -> str:
    """The family of a Redis key: its name with every run of digits replaced by ``#``
    (``delayline:journal:29424511`` -> ``delayline:journal:#``); any stream outside
    delayline's namespace is a topic (TOPICS_FAMILY)."""
    if stream and not key.startswith(PREFIX):
        return TOPICS_FAMILY
    return re.sub(r"\d+", "#", key)


def dir_part(relative: PurePath) -> str:
    """Which part of the data directory a file (its path in it) counts toward: ``logs``
    for delayline's and Redis's logs (``spark.log``, ``redis/redis.log``, rotated ones
    too), else its top directory (``redis``: the AOF; ``checkpoint``; ``spark-tmp``),
    else ``other`` (a file at the top: the lock, the pinned settings).

    RocksDB's ``*.log`` files in the checkpoint are its write-ahead log: checkpoint."""
    parts = relative.parts
    top_log = len(parts) == 1 and ".log" in relative.name
    redis_log = len(parts) == 2 and parts[0] == "redis" and relative.name.startswith("redis.log")
    if top_log or redis_log:
        return "logs"
    return parts[0] if len(parts) > 1 else "other"


def percentile(ordered: Sequence[int] | Records, fraction: float) -> int | None:
    """The value at ``fraction`` of ``ordered`` (sorted), by the rank
    ``bench.measure.Score.percentile`` uses; None if empty."""
    if len(ordered) == 0:
        return None
    return int(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])


def lateness_stats(received: Records) -> dict[str, int | None]:
    """Lateness of ``received`` (RECEIVED records) in ms: count, p50, p99, p999, max and
    early (lateness < 0) by Redis's clock; p50, p99, max and early by the consumer's."""
    late = np.sort(received["delivered_at_ms"] - received["deliver_at_ms"])
    seen = np.sort(received["received_ms"] - received["deliver_at_ms"])
    return {
        "count": len(late),
        "p50": percentile(late, 0.50),
        "p99": percentile(late, 0.99),
        "p999": percentile(late, 0.999),
        "max": int(late[-1]) if len(late) else None,
        "early": int((late < 0).sum()),
        "receive_p50": percentile(seen, 0.50),
        "receive_p99": percentile(seen, 0.99),
        "receive_max": int(seen[-1]) if len(seen) else None,
        "receive_early": int((seen < 0).sum()),
    }


def first_last_p99(received: Records, start_ms: int, end_ms: int) -> dict[str, Any]:
    """The p99 lateness (ms) of the messages received in the first and in the last
    P99_WINDOW_S of [start_ms, end_ms], or in its first and last thirds if it is
    shorter than three windows."""
    span_ms = max(0, end_ms - start_ms)
    window_ms = P99_WINDOW_S * 1000 if span_ms >= 3 * P99_WINDOW_S * 1000 else span_ms // 3
    at = received["received_ms"]
    first = received[(at >= start_ms) & (at < start_ms + window_ms)]
    last = received[(at > end_ms - window_ms) & (at <= end_ms)]
    result: dict[str, Any] = {"window_s": window_ms / 1000}
    for part, chunk in (("first", first), ("last", last)):
        stats = lateness_stats(chunk)
        result |= {
            f"{part}_count": stats["count"],
            f"{part}_p99_ms": stats["p99"],
            f"{part}_receive_p99_ms": stats["receive_p99"],
        }
    return result


def least_squares(points: Sequence[tuple[float, float]]) -> float | None:
    """The least-squares slope of ``points`` ((x, y)); None with fewer than two distinct x."""
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    if spread == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


def slope_per_h(points: Sequence[tuple[float, float]]) -> float | None:
    """The least-squares slope of ``points`` ((t_s, value)), in value per hour; None
    with fewer than two distinct times."""
    return least_squares([(t / 3600, v) for t, v in points])


def projection(last: tuple[float, float], slope: float | None, at_h: float) -> float | None:
    """The value at ``at_h`` hours from the start if it goes on from ``last`` ((t_s,
    value)) at ``slope`` per hour: ``value + slope * (at_h - t_h)``. A falling slope
    projects as flat: what shrinks while the load is steady (a sawtooth caught on its
    way down, a cache settling) does not go on shrinking."""
    if slope is None:
        return None
    t_s, value = last
    return value + max(slope, 0.0) * (at_h - t_s / 3600)


def trend(unit: str, points: Points, half_from_s: float) -> dict[str, Any]:
    """First and last value of a series, its slope per hour over the points at or after
    ``half_from_s`` (the second half of the load), and its projections (HORIZONS_H)."""
    slope = slope_per_h([(t, v) for t, v in points if t >= half_from_s])
    sign = "none" if slope is None else "+" if slope > 0 else "-" if slope < 0 else "0"
    return {
        "unit": unit,
        "first": points[0][1],
        "last": points[-1][1],
        "slope_per_h": None if slope is None else round(slope, 3),
        "slope_sign": sign,
        **{
            f"projected_{name}": _rounded(projection(points[-1], slope, at_h))
            for name, at_h in HORIZONS_H.items()
        },
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def metric_series(rows: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, Points]]:
    """Every series of the rows: name -> (unit, points). A series starts at the first
    row that has it (a process born later, a family that appears)."""
    found: dict[str, tuple[str, Points]] = {}

    def add(name: str, unit: str, t_s: float, value: float) -> None:
        found.setdefault(name, (unit, []))[1].append((t_s, value))

    for row in rows:
        t_s, memory = row["t_s"], row["redis"]
        add("redis used_memory", "bytes", t_s, memory["used_memory"])
        add("redis used_memory_rss", "bytes", t_s, memory["used_memory_rss"])
        add("redis topic entries (XLEN)", "entries", t_s, memory["topic_entries"])
        for name, measured in memory["families"].items():
            add(f"redis {name}", "bytes", t_s, measured["bytes"])
        for part, size in row["data_dir"].items():
            add(f"disk {part}", "bytes", t_s, size)
        pss = row["pss_mb"]
        add("PSS delayline total", "MB", t_s, pss["delayline"]["total"])
        for process, mb in pss["delayline"]["processes"].items():
            add(f"PSS {process}", "MB", t_s, mb)
        add("PSS load generator total", "MB", t_s, pss["load_generator"]["total"])
    return found


def half_from_s(rows: Sequence[Mapping[str, Any]]) -> float:
    """Where the second half of ``rows`` starts (t_s of its middle row)."""
    return float(rows[len(rows) // 2]["t_s"]) if rows else 0.0


def retained_per_message(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """Redis bytes retained per message delivered between the first and the last of
    ``rows``: (used_memory last - first) / (delivered last - first); None if none was."""
    if len(rows) < 2:
        return None
    delivered = rows[-1]["delivered"] - rows[0]["delivered"]
    if delivered <= 0:
        return None
    grown = rows[-1]["redis"]["used_memory"] - rows[0]["redis"]["used_memory"]
    return round(float(grown / delivered), 1)


def retained_per_message_fit(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """The least-squares slope of used_memory against messages delivered over ``rows``
    (bytes per message): less sensitive than :func:`retained_per_message` to where the
    end rows fall in a sawtooth (journal buckets expiring a minute at a time)."""
    fitted = least_squares([(row["delivered"], row["redis"]["used_memory"]) for row in rows])
    return None if fitted is None else round(fitted, 1)


#: The order of the series in the summary and the table, by the start of their names.
SERIES_ORDER = ("redis used_memory", "redis topic entries", "redis ", "disk total", "disk ",
                "PSS delayline total", "PSS load generator total", "PSS ")  # fmt: skip


def _series_order(name: str) -> tuple[int, str]:
    return next(n for n, start in enumerate((*SERIES_ORDER, "")) if name.startswith(start)), name


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Trends of every series over the load's rows, and retained bytes per message."""
    load = [row for row in rows if row["phase"] == "load"]
    if not load:
        return {}
    half = half_from_s(load)
    load_s = load[-1]["t_s"] - load[0]["t_s"]
    series = metric_series(load)
    return {
        "load_rows": len(load),
        "second_half_from_s": half,
        "achieved_rate": round(load[-1]["sent"] / load_s, 1) if load_s > 0 else None,
        "retained_redis_bytes_per_message": retained_per_message(load),
        "retained_redis_bytes_per_message_second_half": retained_per_message(
            load[len(load) // 2 :]
        ),
        "retained_redis_bytes_per_message_second_half_fit": retained_per_message_fit(
            load[len(load) // 2 :]
        ),
        "trends": {name: trend(*series[name], half) for name in sorted(series, key=_series_order)},
    }


def account(sent: Records, received: Records) -> dict[str, int]:
    """What became of the messages ``sent`` (SENT records), by id, from what the consumer
    ``received`` (RECEIVED records): lost (sent, never received), duplicated (ids
    received more than once) and their extra deliveries, early (delivered before due,
    by Redis's clock, and received before due), entries whose ``deliver_at_ms`` is not
    the one sent, and ids received that were never sent."""
    sent = np.sort(sent, order="id")
    ids, counts = np.unique(received["id"], return_counts=True)
    sent_ids = np.unique(sent["id"])
    at = np.searchsorted(sent["id"], received["id"])
    known = at < len(sent)
    known[known] = sent["id"][at[known]] == received["id"][known]
    wrong_due = sent["deliver_at_ms"][at[known]] != received["deliver_at_ms"][known]
    return {
        "sent": len(sent),
        "delivered": len(received),
        "lost": len(np.setdiff1d(sent_ids, ids, assume_unique=True)),
        "duplicated": int((counts > 1).sum()),
        "duplicate_deliveries": int((counts - 1).sum()),
        "early": int((received["delivered_at_ms"] < received["deliver_at_ms"]).sum()),
        "receive_early": int((received["received_ms"] < received["deliver_at_ms"]).sum()),
        "wrong_due": int(wrong_due.sum()),
        "never_sent": len(np.setdiff1d(ids, sent_ids, assume_unique=True)),
    }


def checks(result: Mapping[str, Any], max_bytes_per_message: float) -> list[str]:
    """What ``--quick`` asserts, as failure messages: nothing lost, duplicated or early,
    and Redis bytes retained per delivered message over the second half below the bound."""
    failures = []
    counts = result.get("accounting") or {}
    if not counts:
        failures.append("the run ended before its messages were counted")
    for name in ("lost", "duplicated", "early", "receive_early", "wrong_due", "never_sent"):
        if counts.get(name):
            failures.append(f"{name}: {counts[name]:,} messages (must be 0)")
    retained = result.get("summary", {}).get("retained_redis_bytes_per_message_second_half")
    if retained is None:
        failures.append("no retained bytes per message (nothing delivered in the second half?)")
    elif retained >= max_bytes_per_message:
        failures.append(
            f"Redis retains {retained:,.1f} bytes per delivered message over the second half "
            f"(bound: under {max_bytes_per_message:g}, --max-bytes-per-message): "
            "it grows with what was delivered"
        )
    return failures


# --- measuring a running delayline ---------------------------------------------------


def redis_memory(client: redis.Redis, rng: random.Random) -> dict[str, Any]:
    """``INFO memory``'s used_memory and used_memory_rss, keys and bytes by family
    (:func:`family`; a family of more than FAMILY_SAMPLE keys is measured on a random
    sample of that many, scaled up), and the entries of every topic stream (XLEN)."""
    info = client.info("memory")
    by_family: dict[str, list[bytes]] = {}
    foreign: list[bytes] = []
    for key in client.scan_iter(count=SCAN_COUNT):
        name = bytes(key).decode(errors="replace")
        if name.startswith(PREFIX):
            by_family.setdefault(family(name, stream=False), []).append(key)
        else:
            foreign.append(key)
    pipe = client.pipeline(transaction=False)
    for key in foreign:
        pipe.type(key)
    for key, kind in zip(foreign, pipe.execute(), strict=True):
        name = bytes(key).decode(errors="replace")
        by_family.setdefault(family(name, stream=bytes(kind) == b"stream"), []).append(key)
    families = {}
    for name in sorted(by_family):
        keys = by_family[name]
        sampled = keys if len(keys) <= FAMILY_SAMPLE else rng.sample(keys, FAMILY_SAMPLE)
        pipe = client.pipeline(transaction=False)
        for key in sampled:
            pipe.memory_usage(key, samples=MEMORY_SAMPLES)
        measured = sum(int(used or 0) for used in pipe.execute())  # None: gone since SCAN
        families[name] = {
            "keys": len(keys),
            "sampled": len(sampled),
            "bytes": round(measured * len(keys) / len(sampled)),
        }
    pipe = client.pipeline(transaction=False)
    for key in by_family.get(TOPICS_FAMILY, []):
        pipe.xlen(key)
    return {
        "used_memory": int(info["used_memory"]),
        "used_memory_rss": int(info["used_memory_rss"]),
        "keys": sum(len(keys) for keys in by_family.values()),
        "topic_entries": sum(int(length) for length in pipe.execute()),
        "families": families,
    }


def dir_sizes(data_dir: Path) -> dict[str, int]:
    """Bytes allocated (``st_blocks * 512``) to the files of ``data_dir``, by
    :func:`dir_part`, and their ``total``. A file gone while walked is skipped."""
    parts: dict[str, int] = {}
    for root, _dirs, files in os.walk(data_dir):
        for name in files:
            path = Path(root) / name
            try:
                size = path.lstat().st_blocks * 512
            except FileNotFoundError:
                continue
            part = dir_part(path.relative_to(data_dir))
            parts[part] = parts.get(part, 0) + size
    return dict(sorted(parts.items())) | {"total": sum(parts.values())}


def own_pss_mb() -> float:
    """This process's PSS in MB, from /proc/self/smaps_rollup."""
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def tree_pss(sampler: Sampler) -> dict[str, Any]:
    """PSS (MB) of each live process of ``sampler``'s trees by ``name [pid]``, and the
    total, after a fresh sample."""
    sampler.sample()
    live = [row for row in sampler.processes() if row["pss_last_mb"] > 0]
    return {
        "processes": {f"{row['process']} [{row['pid']}]": row["pss_last_mb"] for row in live},
        "total": round(sampler.last_pss_mb, 1),
    }


class Tail:
    """The records appended to a file since the last :meth:`read`, whole ones only."""

    def __init__(self, path: Path, dtype: np.dtype[Any]) -> None:
        self.path = path
        self.dtype = dtype
        self.offset = 0
        self.count = 0

    def read(self) -> Records:
        if not self.path.exists():
            return np.empty(0, self.dtype)
        with open(self.path, "rb") as source:
            source.seek(self.offset)
            data = source.read()
        whole = len(data) - len(data) % self.dtype.itemsize
        self.offset += whole
        found = np.frombuffer(data[:whole], self.dtype)
        self.count += len(found)
        return found


# --- the load generator's processes -------------------------------------------------


def topic(index: int) -> str:
    return f"{TOPIC_PREFIX}{index}"


def _stop_on_sigterm() -> Callable[[], bool]:
    """Make SIGTERM set a flag; returns the flag's reader."""
    stopped: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
    return lambda: bool(stopped)


def produce(config: Mapping[str, Any]) -> None:
    """A producer process: ``rate`` msg/s for ``seconds`` (or until SIGTERM) with
    ``Client.send_many``, a batch every TICK_S against a fixed schedule; a producer
    that falls behind sends what it owes, CATCH_UP_S' worth at a time. Appends each
    sent message's (id, deliver_at_ms) to ``out``."""
    stopped = _stop_on_sigterm()
    rng = random.Random(config["seed"])
    rate, seconds, topics = config["rate"], config["seconds"], config["topics"]
    low_ms, high_ms = config["delay_ms"]
    tag, size = config["index"], config["body_bytes"]
    sent = 0
    with Client(config["url"]) as client, open(config["out"], "ab") as out:
        started = time.monotonic()
        tick = 0
        while not stopped():
            pause = started + tick * TICK_S - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            elapsed = time.monotonic() - started
            if elapsed >= seconds:
                break
            owed = int(rate * min(seconds, (tick + 1) * TICK_S)) - sent
            count = min(owed, max(1, int(rate * CATCH_UP_S)))
            if count > 0:
                stamp = int(time.time() * 1000)
                batch = [
                    {
                        "topic": topic((sent + n) % topics),
                        "body": f"{tag}-{sent + n}".encode().ljust(size, b"."),
                        "deliver_at": stamp + rng.randint(low_ms, high_ms),
                    }
                    for n in range(count)
                ]
                ids = client.send_many(batch)
                rows = [(mid, m["deliver_at"]) for mid, m in zip(ids, batch, strict=True)]
                out.write(np.array(rows, SENT).tobytes())
                out.flush()
                sent += count
            tick = max(tick + 1, int((time.monotonic() - started) / TICK_S))


#: How long a call waits out Redis's BUSY replies (a script past its 5 s limit), s.
BUSY_PATIENCE_S = 120.0

T = TypeVar("T")


def patiently(call: Callable[[], T], on_busy: Callable[[], None] = lambda: None) -> T:
    """``call()``, again while Redis answers BUSY (a script has run past its 5 s limit:
    Redis refuses every command meanwhile), for BUSY_PATIENCE_S at most; ``on_busy``
    is told of each BUSY reply."""
    deadline = time.monotonic() + BUSY_PATIENCE_S
    while True:
        try:
            return call()
        except redis.ResponseError as exc:
            if not str(exc).startswith("BUSY") or time.monotonic() > deadline:
                raise
            on_busy()
            time.sleep(0.5)


def received_row(
    entry_id: bytes, fields: Mapping[bytes, bytes], received_ms: int
) -> tuple[Any, ...]:
    """A RECEIVED record of a topic entry: (id, deliver_at_ms, delivered_at_ms,
    received_ms), from the entry's fields."""
    return (fields[b"id"], int(fields[b"deliver_at_ms"]), int(fields[b"delivered_at_ms"]),
            received_ms)  # fmt: skip


#: What the consumer writes of each entry: (entry id, fields, received_ms) -> a record.
RowOf = Callable[[bytes, Mapping[bytes, bytes], int], tuple[Any, ...]]


def consume(
    config: Mapping[str, Any], row_of: RowOf = received_row, dtype: np.dtype[Any] = RECEIVED
) -> None:
    """The consumer process: a consumer group GROUP on every topic (``streams``, else
    ``topic(n)`` for n below ``topics``), read with plain XREADGROUP (all topics in one
    call) until SIGTERM, every entry XACKed; appends each entry's ``row_of`` (a
    ``dtype`` record; RECEIVED's by default) to ``out``."""
    stopped = _stop_on_sigterm()
    client = redis.Redis.from_url(config["url"])
    streams = config.get("streams") or [topic(n) for n in range(config["topics"])]
    for stream in streams:
        with contextlib.suppress(redis.ResponseError):  # the group exists
            client.xgroup_create(stream, GROUP, id="0", mkstream=True)
    print(CONSUMER_READY, flush=True)
    with open(config["out"], "ab") as out:
        while not stopped():
            read = patiently(
                lambda: client.xreadgroup(
                    GROUP, "c1", dict.fromkeys(streams, ">"), count=READ_COUNT, block=READ_BLOCK_MS
                )
            )
            found = cast(list[tuple[bytes, list[tuple[bytes, dict[bytes, bytes]]]]], read)
            if not found:
                continue
            received_ms = int(time.time() * 1000)
            rows = []
            pipe = client.pipeline(transaction=False)
            for name, entries in found:
                rows += [row_of(entry_id, fields, received_ms) for entry_id, fields in entries]
                pipe.xack(name, GROUP, *(entry_id for entry_id, _ in entries))
            out.write(np.array(rows, dtype).tobytes())
            out.flush()
            patiently(pipe.execute)  # after the write: an XACK answered BUSY loses nothing


# --- the run --------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    """The environment of the child processes: the repository on PYTHONPATH."""
    repo = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, env.get("PYTHONPATH")]))
    return env


def header(benchmark: str, settings: Mapping[str, Any], units: str) -> dict[str, Any]:
    """What a result file says first: the benchmark, the command, its parameters, when,
    on what, and the units of its numbers."""
    return {
        "benchmark": benchmark,
        "command": "python -m bench " + " ".join(sys.argv[1:]),
        "params": dict(settings),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
        "python": platform.python_version(),
        "units": units,
    }


def _write(out: Path, result: Mapping[str, Any]) -> None:
    """Replace ``out`` with ``result`` as JSON, atomically: a reader never sees half."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".json.partial")
    partial.write_text(json.dumps(result, indent=1) + "\n")
    partial.replace(out)


@dataclass
class Soak:
    """One soak run: ``delayline run``, the load generator, and the rows taken so far."""

    settings: SoakParams
    scratch: Path
    out: Path
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    rows: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)
    children: list[subprocess.Popen[bytes]] = field(default_factory=list)
    #: The module whose ``__main__`` runs the child processes' roles.
    roles: ClassVar[str] = "bench.soak"

    @property
    def data_dir(self) -> Path:
        return self.scratch / "data"

    @property
    def load_dir(self) -> Path:
        return self.scratch / "load"

    def start(self) -> None:
        """Start ``delayline run`` and the consumer; return once both are ready."""
        redis_port = free_port()
        api_port = free_port()
        while api_port == redis_port:
            api_port = free_port()
        command = [sys.executable, "-m", "delayline", "run", "--data-dir", str(self.data_dir),
                   "--redis-port", str(redis_port), "--api-port", str(api_port),
                   *self.settings.delayline_options]  # fmt: skip
        self.result["delayline_run"] = command[2:]
        log = fresh_log(self.scratch / "run.log")
        self.delayline = spawn(command, env=child_env(), log=log)
        self.children.append(self.delayline)
        wait_for_log(log, "scheduler running", START_TIMEOUT_S, self.delayline)
        self.url = str(local.read_url(local.server_dir(self.data_dir)))
        self.client = redis.Redis.from_url(self.url)
        self.load_dir.mkdir(parents=True, exist_ok=True)
        self.consumer = self._child("consume", "consumer", {"out": str(self.received_path)})
        wait_for_log(self.scratch / "consumer.log", CONSUMER_READY, 60, self.consumer)

    @property
    def received_path(self) -> Path:
        return self.load_dir / "received.bin"

    def _child(self, role: str, name: str, config: dict[str, Any]) -> subprocess.Popen[bytes]:
        """Start ``python -m <roles> <role> <config as JSON>``, logging to ``<name>.log``."""
        config = {"url": self.url, "topics": self.settings.topics} | config
        process = spawn([sys.executable, "-m", self.roles, role, json.dumps(config)],
                        env=child_env(), log=self.scratch / f"{name}.log")  # fmt: skip
        self.children.append(process)
        return process

    def run(self) -> dict[str, Any]:
        """Start everything, take the rows, drain, count; returns the result (also in
        ``out``, rewritten at every row)."""
        s = self.settings
        self.result |= header(
            "soak",
            asdict(s),
            "Redis and disk in bytes (disk: allocated, st_blocks * 512, of files); "
            "PSS in MB (2**20 bytes); times in ms unless _s; slopes per hour over the "
            "second half of the load's rows; cpu_s: CPU seconds in the row's window",
        ) | {
            "complete": False,
            "rows": self.rows,
        }
        self.start()
        self.sampler = Sampler([self.delayline.pid])
        self.sampler.sample()  # CPU counts from here: Spark's start is not in the load
        self.producers = [
            self._child("produce", f"producer-{n}", {
                "index": n, "rate": s.rate / s.producers, "seconds": s.minutes * 60,
                "delay_ms": [int(s.min_delay_s * 1000), int(s.max_delay_s * 1000)],
                "body_bytes": s.body_bytes, "seed": 1_000 + n,
                "out": str(self.load_dir / f"sent-{n}.bin")})
            for n in range(s.producers)
        ]  # fmt: skip
        self.generator = Sampler([self.consumer.pid, *(p.pid for p in self.producers)])
        self.sent = [Tail(self.load_dir / f"sent-{n}.bin", SENT) for n in range(s.producers)]
        self.received = Tail(self.received_path, RECEIVED)
        self.window: list[Records] = []
        self.started = time.monotonic()
        self.started_ms = int(time.time() * 1000)
        self.cpu = (self.sampler.cpu_s, self.generator.cpu_s + time.process_time())
        self.sample("load")
        k = 1
        while k * s.sample_s <= s.minutes * 60 + 1e-6:
            self._sleep_until(self.started + k * s.sample_s)
            self.sample("load")
            k += 1
        for producer in self.producers:
            producer.wait(timeout=max(60.0, self.started + s.minutes * 60 - time.monotonic() + 60))
        self.result["load_ended_ms"] = int(time.time() * 1000)
        self._drain(k)
        self.result["complete"] = True
        _write(self.out, self.result)
        return self.result

    def _sleep_until(self, at: float) -> None:
        """Sleep until monotonic ``at``, reading the files meanwhile; fail if a process
        of the run died."""
        while (left := at - time.monotonic()) > 0:
            time.sleep(min(1.0, left))
            self._refresh()
            for process in (self.delayline, self.consumer):
                if process.poll() is not None:
                    raise RuntimeError(f"process {process.pid} exited; see {self.scratch}")

    def _refresh(self) -> None:
        for tail in self.sent:
            tail.read()
        chunk = self.received.read()
        if len(chunk):
            self.window.append(chunk)

    @property
    def sent_count(self) -> int:
        return sum(tail.count for tail in self.sent)

    def _drain(self, k: int) -> None:
        """Until every message sent is delivered (or the last is due plus
        DRAIN_GRACE_S), rows going on; then a last row and the counts."""
        deadline = time.monotonic() + self.settings.max_delay_s + DRAIN_GRACE_S
        while time.monotonic() < deadline:
            self._refresh()
            if self.received.count >= self.sent_count and not self._accounting()["lost"]:
                break
            if time.monotonic() >= self.started + k * self.settings.sample_s:
                self.sample("drain")
                k += 1
            time.sleep(1.0)
        self.result["drained_s"] = round(time.monotonic() - self.started, 1)
        self.result["accounting"] = self._accounting()
        self.sample("end")
        self.result["summary"] |= {
            "lateness_first_vs_last": first_last_p99(
                np.fromfile(self.received_path, RECEIVED),
                self.started_ms,
                self.result["load_ended_ms"],
            )
        }

    def _accounting(self) -> dict[str, int]:
        sent = np.concatenate([np.fromfile(tail.path, SENT) for tail in self.sent])
        return account(sent, np.fromfile(self.received_path, RECEIVED))

    def sample(self, phase: str) -> None:
        """Take one row, add it, rewrite the result file."""
        t_s = time.monotonic() - self.started
        began = time.monotonic()
        self._refresh()
        window = np.concatenate(self.window) if self.window else np.empty(0, RECEIVED)
        self.window = []
        delayline = tree_pss(self.sampler)
        generator = tree_pss(self.generator)
        mine = round(own_pss_mb(), 1)
        generator["processes"][f"python -m bench soak [{os.getpid()}]"] = mine
        generator["total"] = round(generator["total"] + mine, 1)
        cpu = (self.sampler.cpu_s, self.generator.cpu_s + time.process_time())
        row = {
            "t_s": round(t_s, 1),
            "phase": phase,
            "sent": self.sent_count,
            "delivered": self.received.count,
            "redis": redis_memory(self.client, self.rng),
            "data_dir": dir_sizes(self.data_dir),
            "pss_mb": {"delayline": delayline, "load_generator": generator},
            "cpu_s": {
                "delayline": round(cpu[0] - self.cpu[0], 2),
                "load_generator": round(cpu[1] - self.cpu[1], 2),
            },
            "lateness_ms": lateness_stats(window),
        }
        self.cpu = cpu
        row["sample_ms"] = round((time.monotonic() - began) * 1000)
        self.rows.append(row)
        self.result["summary"] = summarize(self.rows)
        _write(self.out, self.result)
        print(headline(row), flush=True)

    def stop(self) -> None:
        """Stop every process of the run: each child's whole process group (SIGTERM, then
        SIGKILL), delayline's last; then whatever of delayline's tree outlived it in
        groups of its own (its Redis, PySpark's worker daemons), by pid."""
        tree = _descendants([child.pid for child in self.children])
        for process in reversed(self.children):
            with contextlib.suppress(Exception):
                terminate(process, timeout_s=60)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # members the leader left behind
        _gone, alive = psutil.wait_procs(tree, timeout=STRAYS_GRACE_S)
        for process in alive:
            with contextlib.suppress(psutil.Error):
                process.kill()


def _descendants(pids: Iterable[int]) -> list[psutil.Process]:
    """Every live descendant of ``pids`` (psutil's handles: safe against pid reuse)."""
    found: list[psutil.Process] = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            found += psutil.Process(pid).children(recursive=True)
    return found


def headline(row: Mapping[str, Any]) -> str:
    """One line per row for the console."""
    memory, late = row["redis"], row["lateness_ms"]
    return (
        f"[soak {row['t_s']:7.1f} s {row['phase']:<5}] sent {row['sent']:,} "
        f"delivered {row['delivered']:,}  redis {memory['used_memory'] / 2**20:,.1f} MB "
        f"({memory['topic_entries']:,} topic entries)  disk "
        f"{row['data_dir']['total'] / 2**20:,.1f} MB  PSS "
        f"{row['pss_mb']['delayline']['total']:,.0f} MB  cpu {row['cpu_s']['delayline']} s  "
        f"p99 {late['p99']} ms early {late['early']}"
    )


def _keep_logs(scratch: Path, target: Path) -> None:
    """Copy the run's logs (``delayline run``'s, Spark's, Redis's, the load
    generator's) next to the result: they explain the numbers."""
    logs = [*scratch.glob("*.log*"), *(scratch / "data").glob("*.log*"),
            *(scratch / "data" / "redis").glob("*.log*")]  # fmt: skip
    if logs:
        target.mkdir(parents=True, exist_ok=True)
        for log in logs:
            shutil.copy2(log, target / log.name)


def main(settings: SoakParams, out: Path, max_bytes_per_message: float | None) -> int:
    """Run the soak, write ``out``; with ``max_bytes_per_message``, check the run
    (:func:`checks`): 1 and the failures printed if one fails."""
    scratch = Path(tempfile.mkdtemp(prefix="delayline-soak-"))
    soak = Soak(settings, scratch, out)
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        result = soak.run()
    finally:
        soak.stop()
        signal.signal(signal.SIGTERM, previous)
        _keep_logs(scratch, out.parent / "logs" / out.stem)
        shutil.rmtree(scratch, ignore_errors=True)
    print(table(result, processes=False), flush=True)
    if max_bytes_per_message is None:
        return 0
    failures = checks(result, max_bytes_per_message)
    result["checks"] = {"max_bytes_per_message": max_bytes_per_message, "failures": failures}
    _write(out, result)
    for failure in failures:
        print(f"FAILED: soak: {failure}", flush=True)
    if not failures:
        print(f"soak: checks passed (0 lost, duplicated, early; under {max_bytes_per_message:g} "
              "bytes per delivered message)", flush=True)  # fmt: skip
    return 1 if failures else 0


# --- the report -----------------------------------------------------------------------


def _human(value: float | None, unit: str, signed: bool = False) -> str:
    """``value`` in ``unit`` for the table: bytes as KB or MB (2**10, 2**20), MB as MB,
    else a count."""
    if value is None:
        return "-"
    sign = "+" if signed and value > 0 else ""
    if unit == "bytes" and abs(value) < 2**20:
        return f"{sign}{value / 1024:,.1f} KB"
    if unit == "bytes":
        return f"{sign}{value / 2**20:,.1f} MB"
    if unit == "MB":
        return f"{sign}{value:,.1f} MB"
    return f"{sign}{value:,.0f}"


#: A byte series that stays under this, projected to 30 days too, is counted, not shown.
SMALL_BYTES = 2**20


def table(result: Mapping[str, Any], processes: bool = True) -> str:
    """The markdown section: one row per series (metric, first, last, slope per hour
    over the second half, projected at 24 h and 30 days; without ``processes``, PSS
    totals only), then the counts, the p99s and the retained bytes per message."""
    summary, params = result.get("summary", {}), result["params"]
    lines = [
        f"Soak: {params['minutes']:g} min at {params['rate']:,.0f} msg/s, delays "
        f"{params['min_delay_s']:g}-{params['max_delay_s']:g} s, {params['body_bytes']}-byte "
        f"bodies, {params['topics']} topics ({result.get('started_at', '?')}, "
        f"`{result.get('command', 'python -m bench soak')}`).",
        "",
        "| metric | first | last | slope/h (2nd half) | projected 24 h | projected 30 d |",
        "|---|---|---|---|---|---|",
    ]
    small = 0
    for name, t in summary.get("trends", {}).items():
        if not processes and name.startswith("PSS ") and not name.endswith(" total"):
            continue
        unit = t["unit"]
        if unit == "bytes" and max(t["last"], t["projected_30d"] or 0) < SMALL_BYTES:
            small += 1
            continue
        lines.append(
            f"| {name} | {_human(t['first'], unit)} | {_human(t['last'], unit)} | "
            f"{_human(t['slope_per_h'], unit, signed=True)} | "
            f"{_human(t['projected_24h'], unit)} | {_human(t['projected_30d'], unit)} |"
        )
    counts = result.get("accounting")
    lines.append("")
    if small:
        lines.append(f"{small} more series (key families, files) stay under 1 MB to 30 days.")
    if counts:
        lines.append(
            f"Sent {counts['sent']:,}, delivered {counts['delivered']:,}: lost {counts['lost']}, "
            f"duplicated {counts['duplicated']}, early {counts['early']} "
            f"(received before due: {counts['receive_early']})."
        )
    else:
        lines.append("The run was cut short: no final counts.")
    p99 = summary.get("lateness_first_vs_last")
    if p99:
        lines.append(
            f"Lateness p99, first {p99['window_s'] / 60:.1f} min: {p99['first_p99_ms']} ms "
            f"({p99['first_count']:,} messages); last {p99['window_s'] / 60:.1f} min: "
            f"{p99['last_p99_ms']} ms ({p99['last_count']:,})."
        )
    lines.append(
        "Redis bytes retained per delivered message: "
        f"{summary.get('retained_redis_bytes_per_message')} over the load, "
        f"{summary.get('retained_redis_bytes_per_message_second_half')} over its second half "
        f"({summary.get('retained_redis_bytes_per_message_second_half_fit')} by a least-squares "
        "fit against messages delivered)."
    )
    return "\n".join(lines)


def plot(result: Mapping[str, Any], out: Path) -> None:
    """Redis memory, its families, the data directory's parts and PSS against time."""
    # Only for --report; the bench extra has it. "unused-ignore": where it is installed.
    import matplotlib  # type: ignore[import-not-found,unused-ignore]

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]

    series = metric_series(result["rows"])
    load = [row["t_s"] for row in result["rows"] if row["phase"] == "load"]
    ended_s = load[-1] if load and len(load) < len(result["rows"]) else None
    panels = (
        ("Redis INFO memory (MB)", ("redis used_memory", "redis used_memory_rss"), 2**20),
        ("Redis by key family (MB)", _names(series, "redis delayline:", "redis topics"), 2**20),
        ("data directory (MB allocated)", _names(series, "disk "), 2**20),
        ("PSS (MB)", _names(series, "PSS "), 1),
    )
    figure, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    for ax, (title, names, scale) in zip(axes.flat, panels, strict=True):
        for name in names:
            points = series[name][1]
            ax.plot([t / 60 for t, _ in points], [v / scale for _, v in points],
                    label=name.split(" ", 1)[1], linewidth=1.2)  # fmt: skip
        if ended_s is not None:
            ax.axvline(ended_s / 60, color="grey", linestyle=":", linewidth=1)
        ax.set_title(title)
        ax.set_xlabel("minutes (dotted: the load stops)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    params = result["params"]
    figure.suptitle(f"soak: {params['rate']:,.0f} msg/s, delays "
                    f"{params['min_delay_s']:g}-{params['max_delay_s']:g} s")  # fmt: skip
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)


def _names(series: Mapping[str, tuple[str, Points]], *prefixes: str, top: int = 8) -> list[str]:
    """The ``top`` series named with one of ``prefixes`` by their largest value."""
    names = [name for name in series if name.startswith(prefixes)]
    return sorted(names, key=lambda name: -max(v for _, v in series[name][1]))[:top]


def report(path: Path, docs: Path) -> str:
    """Draw ``<docs>/img/soak-<stem>.png`` from the result at ``path``; return the
    markdown section that shows it."""
    result = json.loads(path.read_text())
    image = docs / "img" / f"soak-{path.stem}.png"
    plot(result, image)
    return f"{table(result)}\n\n![soak: memory and disk over time](img/{image.name})\n"


if __name__ == "__main__":
    roles = {"produce": produce, "consume": consume}
    roles[sys.argv[1]](json.loads(sys.argv[2]))
