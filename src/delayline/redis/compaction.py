"""When the embedded Redis rewrites (compacts) its AOF: once the file has doubled,
at a quiet moment (pure).

A rewrite forks Redis. Under a heavy write load the fork's copy-on-write faults
and the child's CPU stall Redis's one thread: on a 2-core machine at 20,000
msg/s, pump calls of 10 ms took up to 180 ms, and a second's deliveries came
up to 0.9 s late (docs/benchmarks.md, "AOF rewrites under load"). Redis's own
rule (rewrite when the file has doubled) fires in the middle of a load, and
every few seconds while it lasts. This one waits until the writes quiet down,
and forces the rewrite only once the file has grown by ``force_growth_bytes``,
which bounds the disk it takes and the time a restart spends loading it.

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
#: A due rewrite starts anyway once the file has grown by this much (bytes) since
#: the last one: about 2.4M messages sent, delivered and read (900 bytes each).
#: A restart loads that tail at about 80 MB/s (``python -m bench aof``): 27 s at
#: worst, after a crash at the end of a load that never paused for 2 s.
FORCE_GROWTH_BYTES = 2 * 1024 * 1024 * 1024


class AofCompaction:
    """Decides, from samples of the AOF's size, when to start a rewrite.

    Feed it :meth:`observe` every fraction of a second, with monotonic seconds.
    """

    def __init__(
        self,
        *,
        quiet_bytes_per_s: float = QUIET_BYTES_PER_S,
        quiet_for_s: float = QUIET_FOR_S,
        force_growth_bytes: int = FORCE_GROWTH_BYTES,
    ) -> None:
        self._quiet_bytes_per_s = quiet_bytes_per_s
        self._quiet_for_s = quiet_for_s
        self._force_growth_bytes = force_growth_bytes
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
        if current_bytes - base_bytes >= self._force_growth_bytes:
            return True
        return self._quiet_since_s is not None and at_s - self._quiet_since_s >= self._quiet_for_s
