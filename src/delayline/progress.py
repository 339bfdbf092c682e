"""The one-line progress summary ``delayline run`` prints, from the counters in Redis."""

from __future__ import annotations

from delayline.metrics import diff_histogram, percentile_ms
from delayline.plans.observing import Metrics


def summary_line(older: Metrics, newer: Metrics) -> str:
    """Totals, plus rate and lateness percentiles over the window between two reads."""
    window_s = max(newer.read_at_ms - older.read_at_ms, 1) / 1000
    delivered = newer.stats.get("delivered", 0) - older.stats.get("delivered", 0)
    window = diff_histogram(newer.lateness, older.lateness)
    p50, p99 = percentile_ms(window, 0.5), percentile_ms(window, 0.99)
    return (
        f"accepted {newer.stats.get('accepted', 0):,}  pending {newer.pending:,}  "
        f"delivered {delivered / window_s:,.1f}/s  rejected {newer.stats.get('rejected', 0):,}  "
        f"lateness p50 {format_bound(p50)}  p99 {format_bound(p99)}"
    )


def format_bound(value_ms: float | None) -> str:
    """A percentile estimate (a bucket's upper bound) for people."""
    if value_ms is None:
        return "-"
    if value_ms == float("inf"):
        return ">60 s"
    return f"<={value_ms:.0f} ms"
