"""Crash points: a test hook that kills this process at a named step.

With ``DELAYLINE_CRASH_AT=<point>`` (or ``<point>:<n>``, the n-th time it is
reached; 1 by default) in its environment, a process sends itself SIGKILL when
it reaches that point, as an operator's ``kill -9`` would at the worst moment.
The fault-injection tests use it to stop delivery between two of its writes
(tests/integration/test_kafka_crash_points.py). Unset, a point costs one
comparison.
"""

from __future__ import annotations

import os
import signal

#: The environment variable naming the point (and the time it is reached) to die at.
CRASH_AT_ENV = "DELAYLINE_CRASH_AT"


def _parse(spec: str) -> tuple[str, int]:
    name, _, times = spec.partition(":")
    return name, int(times) if times.isdigit() else 1


_point, _times = _parse(os.environ.get(CRASH_AT_ENV, ""))
_reached = 0


def crash_point(name: str) -> None:
    """Die here with SIGKILL if ``DELAYLINE_CRASH_AT`` names this point and this is
    the time it asks for; otherwise return at once."""
    global _reached
    if name != _point:
        return
    _reached += 1
    if _reached == _times:
        os.kill(os.getpid(), signal.SIGKILL)
