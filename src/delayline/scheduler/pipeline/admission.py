"""How many inbound records the source lets into its next batch (pure).

A batch's time grows with what it reads, and a record of one kind costs many
times one of another: a one-shot send costs the processor about 0.1 ms, a new
schedule's definition about 0.6 ms (its first firing hands runs to the outbox
too). With a fixed cap of 50,000, 99,000 new schedules went in batches of 17, 23
and 32 s, and the runs due meanwhile were handed over up to 22 s late
(bench/notes.md, "A batch's time, not its rows"); a slower batch would outlast
the horizon, which every message counts on (delayline.timing.HORIZON_MS).

So the cap follows the batches' time. After a batch that left records waiting
(the cap bound it), the next cap is scaled by ``target_ms`` over the batch's
time: smaller after a slow batch, larger (at most twice) after a fast one,
between LEAST_ROWS and ``most_rows``. A batch the cap did not bind says nothing
about records (its time went to timers, or to a cold start), and changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The smallest cap, so that a scheduler slowed by something else (its timers, a
#: busy machine) still reads on.
LEAST_ROWS = 1_000
#: The cap of a run's first batch, at most ``most_rows``: a backlog reaches the
#: cap its batches' time allows by doubling, not by a first batch of ``most_rows``.
FIRST_ROWS = 2_000
#: The most a fast batch multiplies the cap by.
MOST_GROWTH = 2.0


@dataclass
class Admission:
    """The cap on a batch's inbound records (``rows``), kept near ``target_ms`` a batch."""

    most_rows: int
    target_ms: int
    rows: int = 0

    def __post_init__(self) -> None:
        if not self.rows:
            self.rows = min(self.most_rows, FIRST_ROWS)

    def observe(self, elapsed_ms: float, capped: bool) -> None:
        """Learn from the batch planned with the cap ``rows``: it ran for ``elapsed_ms``
        (from its planning to the next's), and ``capped`` says whether records were
        left waiting for the next."""
        if not capped:
            return
        factor = min(MOST_GROWTH, self.target_ms / max(elapsed_ms, 1.0))
        least = min(LEAST_ROWS, self.most_rows)
        self.rows = max(least, min(self.most_rows, int(self.rows * factor)))
