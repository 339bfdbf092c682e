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

    A spell starts at the last load batch (or at creation: starting up is a
    load) and ends at the next one; times are monotonic seconds.
    """

    def __init__(self, started_s: float, after_s: float = COLLECT_AFTER_LOAD_S) -> None:
        self._after_s = after_s
        self._last_load_s = started_s
        self._collected = False

    def batch_completed(self, at_s: float, rows: int) -> None:
        """A batch of ``rows`` input rows completed at ``at_s``: a load starts a new spell."""
        if rows >= LOAD_BATCH_ROWS:
            self._last_load_s = at_s
            self._collected = False

    def collect_now(self, now_s: float) -> bool:
        """True the first time ``now_s`` is ``after_s`` past the last load; then False
        until another load batch completes."""
        if self._collected or now_s - self._last_load_s < self._after_s:
            return False
        self._collected = True
        return True
