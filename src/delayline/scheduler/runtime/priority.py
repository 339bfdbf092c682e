"""The CPU priority of Spark's processes on a machine they share with Redis and the pump.

Spark is the coarse wheel: a batch that takes longer costs nothing while the
horizon covers it. The pump and Redis are the fine wheel: when they wait for a
core, messages are late. So Spark's JVMs, and the Python workers they start
(which inherit it), run at a lower priority; the pump and Redis keep 0.
"""

from __future__ import annotations

import os

#: The nice value of a Spark JVM beside the fine wheel.
SPARK_NICENESS = 10


def lower_to(niceness: int) -> None:
    """Make this process ``niceness`` nicer (a ``preexec_fn`` for a child)."""
    if niceness:
        os.nice(niceness)
