"""The one-line progress summary ``delayline run`` prints, from the counters in Redis."""

from __future__ import annotations

from dataclasses import dataclass

from delayline.metrics import diff_histogram, percentile_ms
from delayline.timing import now_ms
from delayline.transports.redis_streams import RedisStreams


@dataclass(frozen=True)
class Snapshot:
    """Counters and lateness histogram at one moment (epoch ms)."""

    at_ms: int
    stats: dict[str, int]
    lateness: dict[str, int]

    @property
    def pending(self) -> int:
        """Accepted messages neither delivered, dropped by a cancel, nor suppressed duplicates."""
        s = self.stats
        return s.get("accepted", 0) - sum(
            s.get(k, 0) for k in ("delivered", "dropped", "duplicates")
        )


def take_snapshot(streams: RedisStreams) -> Snapshot:
    """Read the counters now."""
    return Snapshot(now_ms(), streams.stats(), streams.lateness_histogram())


def summary_line(older: Snapshot, newer: Snapshot) -> str:
    """Totals, plus rate and lateness percentiles over the window between the snapshots."""
    window_s = max(newer.at_ms - older.at_ms, 1) / 1000
    delivered = newer.stats.get("delivered", 0) - older.stats.get("delivered", 0)
    window = diff_histogram(newer.lateness, older.lateness)
    p50, p99 = percentile_ms(window, 0.5), percentile_ms(window, 0.99)
    return (
        f"accepted {newer.stats.get('accepted', 0):,}  pending {newer.pending:,}  "
        f"delivered {delivered / window_s:,.1f}/s  rejected {newer.stats.get('rejected', 0):,}  "
        f"lateness p50 {_bound(p50)}  p99 {_bound(p99)}"
    )


def _bound(value_ms: float | None) -> str:
    if value_ms is None:
        return "-"
    if value_ms == float("inf"):
        return ">60 s"
    return f"<={value_ms:.0f} ms"
