"""The log files ``delayline run`` writes in its data directory, kept under a bound.

Spark's output (``spark.log``) and the embedded Redis's log grow for as long as
the service runs. Once one passes ``max_bytes``, its content moves to
``<name>.1`` (replacing the one before) and the file is emptied in place, as
logrotate's ``copytruncate`` does: its writers keep their file open (the JVM,
in append mode) or open it for each line (Redis), so both go on writing at its
start. A log then takes at most twice ``max_bytes`` on disk; lines written
between the copy and the truncation are lost, which a log can afford.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

#: A log is rotated once it is larger than this (bytes).
LOG_MAX_BYTES = 64 * 1024 * 1024


class LogFiles:
    """Logs to keep under ``max_bytes`` each; :meth:`bound` checks them."""

    def __init__(self, paths: Iterable[Path], max_bytes: int = LOG_MAX_BYTES) -> None:
        self._paths = list(paths)
        self._max_bytes = max_bytes
        #: How many times a log was rotated since this object was made.
        self.rotations = 0

    def bound(self) -> list[Path]:
        """Rotate each log larger than the bound; return those rotated. A log that is
        missing, or cannot be read or written, is left for the next call."""
        rotated = []
        for path in self._paths:
            try:
                if path.stat().st_size <= self._max_bytes:
                    continue
                kept = path.with_name(path.name + ".1")
                shutil.copyfile(path, kept)
                os.chmod(kept, 0o600)
                os.truncate(path, 0)
            except OSError:
                continue
            rotated.append(path)
            self.rotations += 1
        return rotated
