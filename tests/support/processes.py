"""The processes a test started: is one alive, which carry a tag, kill them and their
groups, their session's nice value. The root conftest uses them to catch leaks; the
harness, to clean up."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterable
from pathlib import Path

import psutil

from delayline.testing import wait_for


def alive(process: psutil.Process) -> bool:
    """True while ``process`` (that very process, not a reuse of its pid) runs."""
    try:
        return bool(process.is_running() and process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def session_nice(pid: int | str) -> int | None:
    """The nice value of the session (autogroup) that process ``pid`` is in ("self":
    this one's), as the kernel ranks sessions (delayline/scheduler/runtime/priority.py);
    None for a process in no autogroup (see :func:`autogroup_nice`)."""
    return autogroup_nice(Path(f"/proc/{pid}/autogroup").read_text())


def autogroup_nice(text: str) -> int | None:
    """The nice value in the text of a ``/proc/<pid>/autogroup`` file.

    It reads "/autogroup-<id> nice <n>", or nothing at all for a process in the
    kernel's root group: one whose session began before autogroups, as PID 1's
    does and, in a container, everything that never called setsid(2).
    """
    fields = text.split()
    return int(fields[-1]) if fields else None


def tagged_processes(variable: str, value: str) -> list[psutil.Process]:
    """Running processes whose environment sets ``variable`` to ``value`` (never this one)."""
    found = []
    for process in psutil.process_iter():
        if process.pid == os.getpid():
            continue
        try:
            if process.environ().get(variable) == value and alive(process):
                found.append(process)
        except psutil.Error:  # gone, a zombie, or not ours to read
            continue
    return found


def kill_processes(processes: Iterable[psutil.Process], timeout_s: float = 30.0) -> None:
    """SIGKILL every process, and the process group of each that leads one; wait until gone.

    PySpark's daemons lead process groups of their own, with their forked
    workers in them: killing the group takes the workers it was about to fork
    too. This process's own group is never signalled. Raises AssertionError if
    a process outlives ``timeout_s``.
    """
    targets = [process for process in processes if alive(process)]
    own_group = os.getpgrp()
    for process in targets:
        with contextlib.suppress(OSError):
            if os.getpgid(process.pid) == process.pid != own_group:
                os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error):
            process.kill()
    wait_for(
        lambda: not any(alive(process) for process in targets),
        timeout_s,
        "the SIGKILLed processes to exit",
        details=lambda: f"still running: {[describe(p) for p in targets if alive(p)]}",
    )


def describe(process: psutil.Process) -> str:
    """pid, process group and command line, for a failure message."""
    try:
        command = " ".join(process.cmdline())[:200]
        group = os.getpgid(process.pid)
    except (psutil.Error, OSError):
        return f"pid {process.pid} (gone)"
    return f"pid {process.pid} (group {group}): {command}"
