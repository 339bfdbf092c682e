"""When a local driver gives back the heap a load grew it to (pure).

A local driver is also the executor: absorbing a load (a million sends, say)
grows its heap in batches of tens of thousands of rows, and the serial
collector keeps that heap until a full collection says it is free. Once the
load is over, one full collection returns it, so memory follows what is
pending, not the largest load seen.
"""

from __future__ import annotations

#: A batch with at least this many input rows is a load: it grows the heap.
LOAD_BATCH_ROWS = 10_000
#: Seconds after the last load batch at which the driver's heap is collected.
#: Short, so memory drops soon after a load; batches of a steady trickle (a few
#: thousand rows) do not put it off, and collecting costs a fraction of a second.
COLLECT_AFTER_LOAD_S = 5.0


class QuietSpells:
    """Says once per quiet spell that the heap should be collected.

    A spell starts at the last load batch, or at the first batch of all
    (starting up is a load: the first batch replays what a restart left), and
    ends at the next load batch; times are monotonic seconds. Nothing is
    collected before the first batch: a collection would only slow the start.
    """

    def __init__(self, after_s: float = COLLECT_AFTER_LOAD_S) -> None:
        self._after_s = after_s
        self._last_load_s: float | None = None
        self._collected = False

    def batch_completed(self, at_s: float, rows: int) -> None:
        """A batch of ``rows`` input rows completed at ``at_s``: a load, or the first
        batch, starts a new spell."""
        if rows >= LOAD_BATCH_ROWS or self._last_load_s is None:
            self._last_load_s = at_s
            self._collected = False

    def collect_now(self, now_s: float) -> bool:
        """True the first time ``now_s`` is ``after_s`` past the last load; then False
        until another load batch completes."""
        if self._last_load_s is None or self._collected:
            return False
        if now_s - self._last_load_s < self._after_s:
            return False
        self._collected = True
        return True
