"""The plan that reads the scheduler's counters, histograms and heartbeat."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
