"""Helpers the tests and the benchmarks share: polling with a deadline, a free port.

Standard library only, and no pytest: ``bench`` imports this module too.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(
    condition: Callable[[], T | None],
    timeout_s: float,
    what: str,
    *,
    interval_s: float = 0.05,
    details: Callable[[], str] | None = None,
) -> T:
    """Call ``condition`` every ``interval_s`` seconds until it returns a truthy value; return that.

    After ``timeout_s`` seconds raise AssertionError naming ``what``, followed by
    the text of ``details()`` if given (called only then). An exception raised by
    ``condition`` propagates at once: a caller can fail fast, e.g. when a process
    it waits on has died. A condition may return ``X | None``: the result is an ``X``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        remaining_s = deadline - time.monotonic()
        if remaining_s <= 0:
            extra = f"\n{details()}" if details is not None else ""
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}{extra}")
        time.sleep(min(interval_s, remaining_s))
