"""When a quiet local driver gives back the heap it grew to (pure).

A local driver is also the executor: absorbing a load (a million sends, say)
grows its heap, and the serial collector keeps that heap until full
collections say it is free. Once the query has run no batch for a while, one
full collection returns it, so memory follows what is pending, not the
largest load seen.
"""

from __future__ import annotations

#: Seconds without a completed batch after which the driver's heap is collected.
COLLECT_AFTER_QUIET_S = 20.0


class QuietSpells:
    """Says once per quiet spell that the heap should be collected.

    A spell starts at the last completed batch (or at creation) and ends at
    the next one; times are monotonic seconds.
    """

    def __init__(self, started_s: float, after_s: float = COLLECT_AFTER_QUIET_S) -> None:
        self._after_s = after_s
        self._last_batch_s = started_s
        self._collected = False

    def batch_completed(self, at_s: float) -> None:
        """A batch completed at ``at_s``: a new spell may start after it."""
        self._last_batch_s = at_s
        self._collected = False

    def collect_now(self, now_s: float) -> bool:
        """True the first time ``now_s`` is ``after_s`` past the last batch; then False
        until another batch completes."""
        if self._collected or now_s - self._last_batch_s < self._after_s:
            return False
        self._collected = True
        return True
