"""The CPU priority of Spark's processes on a machine they share with Redis and the pump.

Spark is the coarse wheel: a batch that takes longer costs nothing while the
horizon covers it. The pump and Redis are the fine wheel: when they wait for a
core, messages are late. So Spark's JVMs, and the Python workers they start
(which inherit it), run at a lower priority; the pump and Redis keep 0.

A nice value alone is not enough where the kernel groups tasks by session
(autogroups: ``/proc/sys/kernel/sched_autogroup_enabled``, on by default in
most distributions' kernels). Each session then shares the CPU as one group,
and a process's nice value ranks it only within its own session. Spark's JVMs
lead sessions of their own (so that a SIGTERM to ``delayline run``'s group
leaves them to finish their batch), and so competed with Redis as equals: while
99,000 schedules were taken in, Redis waited for a core for over a second at a
time, and one pump call took 4.7 s (bench/notes.md, "Spark's session at nice
10"). So each of their sessions is given the same nice value as a whole
(:func:`lower_session`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

#: The nice value of a Spark JVM beside the fine wheel.
SPARK_NICENESS = 10
#: How long :func:`lower_session` asks again while the kernel answers EAGAIN (s): an
#: unprivileged process may change some session's nice value once per 100 ms.
SESSION_NICE_PATIENCE_S = 1.0


def lower_to(niceness: int) -> None:
    """Make this process ``niceness`` nicer (a ``preexec_fn`` for a child)."""
    if niceness:
        os.nice(niceness)


def lower_session(pid: int, niceness: int) -> None:
    """Give the session that process ``pid`` leads the nice value ``niceness``, as a
    group (``/proc/<pid>/autogroup``; see the module's docstring).

    Nothing changes for a process that does not lead its session (its session may
    be this one, with the pump in it), on a kernel without autogroups, or for a
    process gone meanwhile. Asks again for up to SESSION_NICE_PATIENCE_S while the
    kernel says to; after that it leaves the session as it is.
    """
    try:
        if not niceness or os.getsid(pid) != pid:
            return
    except ProcessLookupError:
        return
    deadline = time.monotonic() + SESSION_NICE_PATIENCE_S
    while True:
        try:
            Path(f"/proc/{pid}/autogroup").write_text(str(niceness))
            return
        except BlockingIOError:  # EAGAIN: another session's nice changed within 100 ms
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)
        except OSError:  # no autogroups here, or the process ended
            return
