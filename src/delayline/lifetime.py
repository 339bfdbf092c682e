"""Child processes that end with the process that started them, even on SIGKILL."""

from __future__ import annotations

import ctypes
import sys

_PR_SET_PDEATHSIG = 1


def die_with_parent(signal_number: int) -> None:
    """Have the kernel send ``signal_number`` to this process when the thread that
    started it exits (Linux ``PR_SET_PDEATHSIG``; elsewhere nothing). Meant for a
    child, between fork and exec: the setting survives the exec."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal_number)
