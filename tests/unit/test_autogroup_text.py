"""The session nice value that the tests read from ``/proc/<pid>/autogroup``
(tests/support/processes.py), from each text the kernel writes there."""

from __future__ import annotations

from tests.support.processes import autogroup_nice


def test_a_process_in_an_autogroup_has_its_nice_value() -> None:
    assert autogroup_nice("/autogroup-6178 nice 0\n") == 0
    assert autogroup_nice("/autogroup-42 nice 10\n") == 10
    assert autogroup_nice("/autogroup-7 nice -5\n") == -5


def test_a_process_in_the_root_group_has_none() -> None:
    # The kernel writes nothing for a task in no autogroup: in a container, every
    # process that never called setsid(2), as CI's pytest (it raised IndexError).
    assert autogroup_nice("") is None
