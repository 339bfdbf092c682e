"""A Spark process's session given a nice value as a whole, on the real kernel: where
sessions share the CPU as groups (autogroups), a nice value ranks a process only
within its session (delayline/scheduler/runtime/priority.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from delayline.scheduler.runtime.priority import SPARK_NICENESS, lower_session
from tests.support.processes import session_nice

AUTOGROUP = Path("/proc/self/autogroup")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A process leading a session of its own, as Spark's JVMs do."""
    process = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def test_the_kernel_here_groups_by_session() -> None:
    # Without autogroups lower_session has nothing to do, and the tests below
    # would prove nothing: this machine is expected to have them.
    assert AUTOGROUP.exists(), "this kernel has no autogroups (CONFIG_SCHED_AUTOGROUP)"


def test_a_session_leader_gets_the_nice_value_for_its_whole_session(
    sleeper: subprocess.Popen[bytes],
) -> None:
    ours = session_nice("self")
    assert session_nice(sleeper.pid) == 0
    lower_session(sleeper.pid, SPARK_NICENESS)
    assert session_nice(sleeper.pid) == SPARK_NICENESS
    # Not this test's session: only the sleeper's.
    assert session_nice("self") == ours


def test_a_process_in_this_session_leaves_the_session_alone() -> None:
    # A JVM that did not get a session of its own shares the pump's: lowering it
    # would lower the pump too.
    child = subprocess.Popen(["sleep", "60"])
    try:
        before = session_nice("self")
        lower_session(child.pid, SPARK_NICENESS)
        assert session_nice(child.pid) == session_nice("self") == before
    finally:
        child.kill()
        child.wait()


def test_a_process_gone_is_no_error(sleeper: subprocess.Popen[bytes]) -> None:
    sleeper.kill()
    sleeper.wait()
    lower_session(sleeper.pid, SPARK_NICENESS)
