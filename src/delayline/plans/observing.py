"""The plans that read the scheduler's counters, histograms and heartbeat, and the forecast.

With Redis shards each shard keeps its own counters, forecast, rejects and
outbox; these plans read every shard a scheduler with ``shards`` writes to, and
the unsharded keys (:func:`keys.read_layout`), and add them up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from delayline.errors import SchedulerError
from delayline.forecast import (
    Forecast,
    Granularity,
    MinuteCounts,
    build_forecast,
    hot_candidates,
    minute_window,
)
from delayline.groups import DEFAULT_GROUP, group_of
from delayline.listing import ListingStatus, ListRequest, PendingMessage
from delayline.metrics import COUNTERS, SUM_FIELD, GroupSample, percentile_ms, render_prometheus
from delayline.plans import Plan
from delayline.plans.consuming import DLQ_SUFFIX
from delayline.redis import keys, script_args, scripts
from delayline.redis.commands import Command, as_text

R = TypeVar("R")


@dataclass(frozen=True)
class Metrics:
    """The scheduler's counters, histograms and heartbeat, read at ``read_at_ms``."""

    stats: dict[str, int]
    lateness: dict[str, int]
    batch_duration: dict[str, int]
    heartbeat: dict[str, str]
    read_at_ms: int
    #: Messages in the outbox: due within the horizon, waiting for the pump.
    outbox: int = 0
    #: How far ahead the running scheduler puts messages in the outbox (ms); None
    #: before one published it.
    horizon_ms: int | None = None
    #: Topics outside Redis whose messages wait, each with how long its oldest has (ms).
    blocked_ms: dict[str, int] = field(default_factory=dict)

    @property
    def counters(self) -> dict[str, int]:
        """Each counter by its public name (see metrics.COUNTERS)."""
        return {counter.name: self.stats.get(counter.field, 0) for counter in COUNTERS}

    @property
    def pending(self) -> int:
        """Accepted messages neither delivered, removed by a cancel, nor duplicates: a
        cancelled message counts until its time comes and the cancel is applied."""
        s = self.stats
        return s.get("accepted", 0) - sum(
            s.get(k, 0) for k in ("delivered", "dropped", "duplicates")
        )

    @property
    def last_batch_age_ms(self) -> int | None:
        """How long ago the scheduler last reported a completed batch; None if never."""
        updated = self.heartbeat.get(keys.BEAT_FIELD)
        return None if updated is None else self.read_at_ms - int(updated)

    def to_json(self) -> dict[str, object]:
        """The JSON form of ``delayline stats --json`` and ``GET /v1/stats``: the counters,
        ``pending``, ``outbox``, lateness percentiles and histogram (upper bound in ms
        -> count), and the scheduler's last batch."""
        last_batch = self.heartbeat.get("last_batch_ms")
        return {
            **self.counters,
            "pending": self.pending,
            "outbox": self.outbox,
            "lateness_p50_ms": percentile_ms(self.lateness, 0.5),
            "lateness_p99_ms": percentile_ms(self.lateness, 0.99),
            "lateness": {b: n for b, n in self.lateness.items() if b != SUM_FIELD},
            "last_batch_age_ms": self.last_batch_age_ms,
            "last_batch_ms": None if last_batch is None else int(last_batch),
            "horizon_ms": self.horizon_ms,
            "blocked_ms": self.blocked_ms,
            "read_at_ms": self.read_at_ms,
        }

    def prometheus(self, groups: Mapping[str, Metrics] | None = None) -> str:
        """These metrics in the Prometheus text format, and those of each of ``groups``
        (by name) with its ``group`` label."""
        samples = {
            name: GroupSample(m.stats, m.lateness, m.pending, m.outbox)
            for name, m in (groups or {}).items()
        }
        return render_prometheus(
            self.stats,
            self.lateness,
            self.batch_duration,
            self.pending,
            self.outbox,
            self.blocked_ms,
            samples,
        )


def summed(replies: Iterable[Mapping[Any, Any]]) -> dict[str, int]:
    """Hashes of counters (HGETALL replies), added up field by field."""
    total: dict[str, int] = {}
    for reply in replies:
        for name, value in reply.items():
            field = as_text(name)
            total[field] = total.get(field, 0) + int(value)
    return total


def metrics(*, now_ms: int, shards: int = 1, group: str = DEFAULT_GROUP) -> Plan[Metrics]:
    """Read every counter and histogram the scheduler keeps for ``group``, in one round
    trip."""
    layout = keys.read_layout(shards, group)
    commands: list[Command] = [("HGETALL", keys.BATCH_DURATION), ("HGETALL", keys.HEARTBEAT)]
    commands.append(("HGET", keys.CONFIG, "horizon_ms"))
    commands += [("HGETALL", shard.stats) for shard in layout]
    commands += [("HGETALL", shard.lateness) for shard in layout]
    commands += [("ZCARD", shard.outbox) for shard in layout]
    commands += [("HGETALL", shard.blocked) for shard in layout]

    def parse(replies: list[Any]) -> Metrics:
        batches, heartbeat, horizon = replies[:3]
        n = len(layout)
        blocked: dict[str, int] = {}
        for reply in replies[3 + 3 * n :]:
            for topic, waited_ms in reply.items():
                name = as_text(topic)
                blocked[name] = max(blocked.get(name, 0), int(waited_ms))
        return Metrics(
            stats=summed(replies[3 : 3 + n]),
            lateness=summed(replies[3 + n : 3 + 2 * n]),
            batch_duration=summed([batches]),
            heartbeat={as_text(name): as_text(value) for name, value in heartbeat.items()},
            read_at_ms=now_ms,
            outbox=sum(int(size) for size in replies[3 + 2 * n : 3 + 3 * n]),
            horizon_ms=None if horizon is None else int(horizon),
            blocked_ms=blocked,
        )

    return Plan(commands, parse, "read metrics")


def forecast(
    *,
    by: Granularity,
    topic: str | None,
    from_ms: int | None,
    to_ms: int | None,
    hot_over: int,
    now_ms: int,
    shards: int = 1,
    group: str = DEFAULT_GROUP,
) -> Plan[Forecast]:
    """Read the forecast counters of the due minutes in ``[from_ms, to_ms)`` (None: open).

    Three round trips at most: the minutes, their counts, and the per-second
    counts of the minutes that may hold a hot instant. Raises ValidationError
    for a window that ends before it starts.
    """
    layout = keys.read_layout(shards, group)
    first, last = minute_window(from_ms, to_ms)
    commands: list[Command] = []
    for shard in layout:
        commands += [
            # Minutes whose counters expired leave the index here, not on the write paths.
            keys.forget_expired_minutes(shard, now_ms),
            (
                "ZRANGEBYSCORE",
                shard.forecast_index,
                "-inf" if first is None else first,
                "+inf" if last is None else last,
            ),
        ]

    def each_shard(minutes: list[int], *, seconds: bool) -> list[Command]:
        return [
            ("HGETALL", shard.forecast_seconds(minute) if seconds else shard.forecast(minute))
            for minute in minutes
            for shard in layout
        ]

    def per_minute(minutes: list[int], replies: list[Any]) -> dict[int, dict[str, int]]:
        n = len(layout)
        return {minute: summed(replies[i * n : (i + 1) * n]) for i, minute in enumerate(minutes)}

    def read_minutes(replies: list[Any]) -> Plan[Forecast]:
        found = sorted({int(minute) for reply in replies[1::2] for minute in reply})
        return Plan(
            each_shard(found, seconds=False),
            lambda counts: read_seconds(per_minute(found, counts)),
            "read the forecast",
        )

    def read_seconds(counted: Mapping[int, Mapping[str, int]]) -> Forecast | Plan[Forecast]:
        minutes = {
            minute: MinuteCounts.from_fields({name: str(value) for name, value in fields.items()})
            for minute, fields in counted.items()
        }
        hot = list(hot_candidates(minutes, hot_over))

        def built(replies: list[Any]) -> Forecast:
            per_second = {
                minute: {int(second): n for second, n in counts.items()}
                for minute, counts in per_minute(hot, replies).items()
            }
            return build_forecast(minutes, per_second, by=by, topic=topic, hot_over=hot_over)

        if not hot:
            return built([])
        return Plan(each_shard(hot, seconds=True), built, "read the forecast's hot instants")

    return Plan(commands, read_minutes, "read the forecast")


#: The most characters of a field's value that a listed stream entry keeps.
MAX_SHOWN_CHARS = 200


@dataclass(frozen=True)
class StreamEntry:
    """An entry of ``stream``, its fields as text (each cut to MAX_SHOWN_CHARS)."""

    stream: str
    entry_id: str
    fields: dict[str, str]

    @property
    def at_ms(self) -> int:
        """When Redis added the entry (epoch ms)."""
        return int(self.entry_id.split("-")[0])


def _entries(stream: str, reply: list[Any]) -> list[StreamEntry]:
    def shown(value: bytes | str) -> str:
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        return text if len(text) <= MAX_SHOWN_CHARS else text[: MAX_SHOWN_CHARS - 1] + "…"

    return [
        StreamEntry(stream, as_text(entry_id), {shown(k): shown(v) for k, v in fields.items()})
        for entry_id, fields in reply
    ]


def recent(stream: str, count: int) -> Plan[list[StreamEntry]]:
    """The newest ``count`` entries of ``stream``, newest first."""
    return Plan(
        [("XREVRANGE", stream, "+", "-", "COUNT", count)],
        lambda replies: _entries(stream, replies[0]),
        f"read {stream}",
    )


def dead_letters(count: int, group: str = DEFAULT_GROUP) -> Plan[list[StreamEntry]]:
    """The newest ``count`` dead letters across every ``<topic>.DLQ`` stream of ``group``'s
    topics, newest first.

    The streams are those that dead-lettering recorded among the topic streams
    (``consuming.dead_letter``), so no walk over the key space is needed: on a
    Redis Cluster that would take one per primary.
    """

    def listed(replies: list[Any]) -> Plan[list[StreamEntry]]:
        names = sorted(as_text(name) for name in replies[0])
        streams = [n for n in names if n.endswith(DLQ_SUFFIX) and group_of(n) == group]
        return newest(streams, count, "read the dead letters")

    return Plan([("SMEMBERS", keys.UNSHARDED.topics)], listed, "find the dead-letter streams")


def newest(streams: list[str], count: int, action: str) -> Plan[list[StreamEntry]]:
    """The newest ``count`` entries across ``streams``, newest first; a key that is not a
    stream (WRONGTYPE) is left out."""

    def merged(replies: list[Any]) -> list[StreamEntry]:
        entries = [
            e
            for stream, r in zip(streams, replies, strict=True)
            if not _is_wrong_type(r)
            for e in _entries(stream, r)
        ]
        entries.sort(key=lambda entry: tuple(map(int, entry.entry_id.split("-"))), reverse=True)
        return entries[:count]

    commands: list[Command] = [("XREVRANGE", s, "+", "-", "COUNT", count) for s in streams]
    return Plan(commands, merged, action, errors_ok=True)


def _is_wrong_type(reply: Any) -> bool:
    """Whether ``reply`` is the error of a key that holds another type; raises any
    other error."""
    if isinstance(reply, Exception):
        if "WRONGTYPE" in str(reply):
            return True
        raise reply
    return False


def rejects(count: int, *, shards: int = 1, group: str = DEFAULT_GROUP) -> Plan[list[StreamEntry]]:
    """The newest ``count`` rejects across every shard's rejects stream of ``group``'s
    lane, newest first."""
    streams = [shard.rejects for shard in keys.read_layout(shards, group)]
    return newest(streams, count, "read the rejects")


#: A scheduler that reported this recently (ms) is taken to be running.
SCHEDULER_ALIVE_MS = 30_000

#: Outbox entries a listing looks at per script call: Redis is held briefly.
OUTBOX_SCAN = 10_000


def request_listing(listing_id: str, request: ListRequest, *, now_ms: int) -> Plan[None]:
    """Ask the running scheduler to list what its state holds. Raises SchedulerError at
    once if no scheduler reported in the last SCHEDULER_ALIVE_MS."""
    commands: list[Command] = [
        ("HSET", keys.listing(listing_id), "state", "queued"),
        ("EXPIRE", keys.listing(listing_id), keys.LISTING_TTL_S),
        ("LPUSH", keys.LISTINGS, f"{listing_id} {request.to_json()}"),
    ]

    def ask(replies: list[Any]) -> Plan[None]:
        updated = replies[0]
        if updated is None or now_ms - int(updated) > SCHEDULER_ALIVE_MS:
            raise SchedulerError(
                "no scheduler is running against this Redis (a listing needs `delayline run`)"
            )
        return Plan(commands, lambda _: None, "ask for a listing", transaction=True)

    return Plan([("HGET", keys.HEARTBEAT, keys.BEAT_FIELD)], ask, "ask for a listing")


def listing_status(listing_id: str) -> Plan[ListingStatus]:
    """How far the scheduler is with a listing."""

    def parse(replies: list[Any]) -> ListingStatus:
        fields = {as_text(name): as_text(value) for name, value in replies[0].items()}
        return ListingStatus(
            fields.get("state", "expired"),
            int(fields.get("done", 0)),
            int(fields.get("total", 0)),
            fields.get("error", ""),
        )

    return Plan([("HGETALL", keys.listing(listing_id))], parse, "read a listing's progress")


def listing_rows(listing_id: str, parse: Callable[[bytes], R]) -> Plan[list[R]]:
    """A finished listing's rows from the scheduler's state, each read by ``parse``
    (:meth:`PendingMessage.from_json`, or
    :meth:`delayline.schedules.listed.ListedSchedule.from_json` for schedules)."""
    return Plan(
        [("LRANGE", keys.listing(listing_id) + ":rows", 0, -1)],
        lambda replies: [parse(row) for row in replies[0]],
        "read a listing",
    )


def outbox_listing(
    request: ListRequest, *, shards: int = 1, on_cluster: bool = False, group: str = DEFAULT_GROUP
) -> Plan[list[PendingMessage]]:
    """What waits in the outboxes that ``request`` asks for (the first ``limit`` by due
    time of each shard's, :func:`keys.read_layout`), OUTBOX_SCAN entries a round trip.
    On a cluster the unsharded outbox is left out: no script can fill it there."""
    found: list[PendingMessage] = []
    low = "-inf" if request.from_ms is None else request.from_ms
    high = "+inf" if request.to_ms is None else f"({request.to_ms}"
    unsharded = keys.UNSHARDED.lane(group)
    layout = [s for s in keys.read_layout(shards, group) if not (on_cluster and s == unsharded)]
    if not layout:
        return Plan([], lambda _: [], "list the outbox")

    def call(index: int, rank: int) -> Plan[list[PendingMessage]]:
        shard, wanted = layout[index], request.limit * (index + 1) - len(found)
        args = [low, high, rank, OUTBOX_SCAN, wanted, request.topic or "", request.key or ""]
        command = scripts.LIST_OUTBOX.command(scripts.LIST_OUTBOX.keys(shard), args)
        return Plan([command], lambda replies: parse(index, replies), "list the outbox")

    def parse(index: int, replies: list[Any]) -> list[PendingMessage] | Plan[list[PendingMessage]]:
        next_rank, page = script_args.outbox_page(replies[0])
        found.extend(page)
        if next_rank >= 0 and len(found) < request.limit * (index + 1):
            return call(index, next_rank)
        if index + 1 < len(layout):
            return call(index + 1, 0)
        return found

    return call(0, 0)
