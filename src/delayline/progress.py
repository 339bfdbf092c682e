"""Progress for people: the one-line summary ``delayline run`` prints from the counters
in Redis, and the bar of commands that take a while."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from delayline.metrics import diff_histogram, percentile_ms
from delayline.plans.observing import Metrics

#: The counter of topic entries trimmed before every group acknowledged them.
UNREAD = "topic_trimmed_unread"


def summary_line(older: Metrics, newer: Metrics) -> str:
    """Totals, plus rate and lateness percentiles over the window between two reads."""
    window_s = max(newer.read_at_ms - older.read_at_ms, 1) / 1000
    delivered = newer.stats.get("delivered", 0) - older.stats.get("delivered", 0)
    window = diff_histogram(newer.lateness, older.lateness)
    p50, p99 = percentile_ms(window, 0.5), percentile_ms(window, 0.99)
    line = (
        f"accepted {newer.stats.get('accepted', 0):,}  pending {newer.pending:,}  "
        f"delivered {delivered / window_s:,.1f}/s  rejected {newer.stats.get('rejected', 0):,}  "
        f"lateness p50 {format_bound(p50)}  p99 {format_bound(p99)}"
    )
    unread = newer.stats.get(UNREAD, 0) - older.stats.get(UNREAD, 0)
    if unread > 0:
        line += (
            f"  WARNING: the hard cap trimmed {unread:,} topic entries a consumer group "
            "had not acknowledged (--topic-hard-max-len)"
        )
    return line


def format_bound(value_ms: float | None) -> str:
    """A percentile estimate (a bucket's upper bound) for people."""
    if value_ms is None:
        return "-"
    if value_ms == float("inf"):
        return ">60 s"
    return f"<={value_ms:.0f} ms"


#: Width of a progress bar's bar (characters).
BAR_WIDTH = 30


class ProgressBar:
    """A one-line progress bar, redrawn in place on ``stream`` (a terminal), at most
    every ``interval_s``: ``label  [#####     ]  done / total  rate/s``."""

    def __init__(
        self,
        label: str,
        total: int | None,
        stream: TextIO,
        *,
        interval_s: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._label = label
        self._total = total
        self._stream = stream
        self._interval_s = interval_s
        self._clock = clock
        self._started = self._drawn = clock()
        self._done = 0

    def update(self, done: int, total: int | None = None) -> None:
        """Record that ``done`` items (of ``total``, if it is known only now) are done;
        redraw if it is time."""
        self._done = done
        if total is not None:
            self._total = total
        if self._clock() - self._drawn >= self._interval_s:
            self._draw()

    def close(self) -> None:
        """Draw the final state, and end the line."""
        self._draw()
        self._stream.write("\n")
        self._stream.flush()

    def _draw(self) -> None:
        now = self._clock()
        self._drawn = now
        rate = self._done / max(now - self._started, 1e-9)
        if self._total:
            filled = round(BAR_WIDTH * self._done / self._total)
            bar = f"[{'#' * filled}{' ' * (BAR_WIDTH - filled)}]  {self._done:,} / {self._total:,}"
        else:
            bar = f"{self._done:,}"
        self._stream.write(f"\r{self._label}  {bar}  {rate:,.0f}/s")
        self._stream.flush()
