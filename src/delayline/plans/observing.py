"""The plans that read the scheduler's counters, histograms and heartbeat, and the forecast."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from delayline.forecast import (
    Forecast,
    Granularity,
    MinuteCounts,
    build_forecast,
    hot_candidates,
    minute_window,
)
from delayline.metrics import COUNTERS, render_prometheus
from delayline.plans import Command, Plan, as_text
from delayline.redis import keys


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
        updated = self.heartbeat.get("updated_at_ms")
        return None if updated is None else self.read_at_ms - int(updated)

    def prometheus(self) -> str:
        """These metrics in the Prometheus text format."""
        return render_prometheus(
            self.stats, self.lateness, self.batch_duration, self.pending, self.outbox
        )


def metrics(*, now_ms: int) -> Plan[Metrics]:
    """Read every counter and histogram the scheduler keeps, in one round trip."""
    sources = (keys.STATS, keys.LATENESS, keys.BATCH_DURATION, keys.HEARTBEAT)
    commands: list[Command] = [("HGETALL", key) for key in sources]
    commands.append(("ZCARD", keys.OUTBOX))

    def parse(replies: list[Any]) -> Metrics:
        stats, lateness, batches, heartbeat = (
            {as_text(name): as_text(value) for name, value in reply.items()}
            for reply in replies[:-1]
        )
        return Metrics(
            stats={name: int(value) for name, value in stats.items()},
            lateness={name: int(value) for name, value in lateness.items()},
            batch_duration={name: int(value) for name, value in batches.items()},
            heartbeat=heartbeat,
            read_at_ms=now_ms,
            outbox=int(replies[-1]),
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
) -> Plan[Forecast]:
    """Read the forecast counters of the due minutes in ``[from_ms, to_ms)`` (None: open).

    Three round trips at most: the minutes, their counts, and the per-second
    counts of the minutes that may hold a hot instant. Raises ValidationError
    for a window that ends before it starts.
    """
    first, last = minute_window(from_ms, to_ms)
    forgotten = (now_ms // 1000 - keys.FORECAST_TTL_S) // 60
    commands: list[Command] = [
        # Minutes whose counters expired leave the index here, not on the write paths.
        ("ZREMRANGEBYSCORE", keys.FORECAST_INDEX, "-inf", f"({forgotten}"),
        (
            "ZRANGEBYSCORE",
            keys.FORECAST_INDEX,
            "-inf" if first is None else first,
            "+inf" if last is None else last,
        ),
    ]

    def read_minutes(replies: list[Any]) -> Plan[Forecast]:
        found = [int(minute) for minute in replies[1]]
        return Plan(
            [("HGETALL", keys.forecast(minute)) for minute in found],
            lambda counts: read_seconds(dict(zip(found, counts, strict=True))),
            "read the forecast",
        )

    def read_seconds(replies: Mapping[int, Mapping[Any, Any]]) -> Forecast | Plan[Forecast]:
        minutes = {
            minute: MinuteCounts.from_fields(
                {as_text(name): as_text(value) for name, value in fields.items()}
            )
            for minute, fields in replies.items()
        }
        hot = list(hot_candidates(minutes, hot_over))

        def built(seconds: list[Mapping[Any, Any]]) -> Forecast:
            per_second = {
                minute: {int(second): int(n) for second, n in counts.items()}
                for minute, counts in zip(hot, seconds, strict=True)
            }
            return build_forecast(minutes, per_second, by=by, topic=topic, hot_over=hot_over)

        if not hot:
            return built([])
        commands = [("HGETALL", keys.forecast(minute) + ":s") for minute in hot]
        return Plan(commands, built, "read the forecast's hot instants")

    return Plan(commands, read_minutes, "read the forecast")
