"""When the embedded server rewrites (compacts) its AOF: once the file has doubled,
at a quiet moment, and at the latest once it outgrows the live data (pure).

A rewrite forks Redis. Under a heavy write load the fork's copy-on-write faults
and the child's CPU stall Redis's one thread: on a 2-core machine at 20,000
msg/s, pump calls of 10 ms took up to 180 ms, and a second's deliveries came
up to 0.9 s late (docs/benchmarks.md, "AOF rewrites under load"). Redis's own
rule (rewrite when the file has doubled) fires in the middle of a load, and
every few seconds while it lasts. This one waits until the writes quiet down,
and forces the rewrite only once the file has grown by several times its base
(what the last rewrite wrote: the live data), so that under a load that never
pauses the AOF stays proportional to the live data, and by at most
``FORCE_GROWTH_MAX_BYTES``, which bounds the time a restart spends loading it.

Nothing is less durable for the wait: every write is in the AOF as before
(``appendfsync everysec``); only its compaction waits.
"""

from __future__ import annotations

#: Rewrite no AOF smaller than this (bytes): Redis's auto-aof-rewrite-min-size.
MIN_SIZE_BYTES = 16 * 1024 * 1024
#: A rewrite is due once the file is this many times its size after the last one.
DUE_GROWTH_FACTOR = 2
#: Writes are quiet while the AOF grows by less than this (bytes/s): about 1,000
#: messages a second, whose copy-on-write a fork barely feels.
QUIET_BYTES_PER_S = 1024 * 1024
#: How long writes must have been quiet (s) before a due rewrite starts.
QUIET_FOR_S = 2.0
#: A due rewrite starts anyway once the file has grown by this many times its base
#: since the last one (a base of 300 MB at 5,000 msg/s: every 3 minutes or so)...
FORCE_GROWTH_FACTOR = 4
#: ... or by this much (bytes), whichever is more, so that a small base under a
#: heavy load is not rewritten every few seconds...
FORCE_GROWTH_MIN_BYTES = 256 * 1024 * 1024
#: ... and at the latest once it has grown by this much (bytes): about 2.4M
#: messages sent, delivered and read (900 bytes each). A restart loads that
#: tail at about 80 MB/s (``python -m bench aof``): 27 s at worst.
FORCE_GROWTH_MAX_BYTES = 2 * 1024 * 1024 * 1024


def force_growth_bytes(base_bytes: int) -> int:
    """How much an AOF whose base is ``base_bytes`` may grow (bytes) before a rewrite
    starts under any load."""
    return min(
        FORCE_GROWTH_MAX_BYTES, max(FORCE_GROWTH_MIN_BYTES, FORCE_GROWTH_FACTOR * base_bytes)
    )


class AofCompaction:
    """Decides, from samples of the AOF's size, when to start a rewrite.

    Feed it :meth:`observe` every fraction of a second, with monotonic seconds.
    """

    def __init__(
        self,
        *,
        quiet_bytes_per_s: float = QUIET_BYTES_PER_S,
        quiet_for_s: float = QUIET_FOR_S,
    ) -> None:
        self._quiet_bytes_per_s = quiet_bytes_per_s
        self._quiet_for_s = quiet_for_s
        self._last: tuple[float, int] | None = None
        self._quiet_since_s: float | None = None

    def observe(self, at_s: float, current_bytes: int, base_bytes: int, rewriting: bool) -> bool:
        """True if a rewrite should start now: the AOF is ``current_bytes`` long,
        ``base_bytes`` after the last rewrite (or the load), and ``rewriting`` says
        whether one is under way already."""
        if self._last is not None and at_s > self._last[0]:
            since_s, since_bytes = self._last
            rate = (current_bytes - since_bytes) / (at_s - since_s)
            if rate >= self._quiet_bytes_per_s:
                self._quiet_since_s = None
            elif self._quiet_since_s is None:
                self._quiet_since_s = since_s
        self._last = (at_s, current_bytes)
        if rewriting or current_bytes < max(MIN_SIZE_BYTES, DUE_GROWTH_FACTOR * base_bytes):
            return False
        if current_bytes - base_bytes >= force_growth_bytes(base_bytes):
            return True
        return self._quiet_since_s is not None and at_s - self._quiet_since_s >= self._quiet_for_s
