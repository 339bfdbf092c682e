"""Helpers for tests against delayline, shared by its own tests and benchmarks.

A map:

- this module: a free port, polling with a deadline, and ``SMALL_WHEEL``
  (``delayline run`` options that make a short test exercise both wheel levels);
- :mod:`delayline.testing.streams`: what arrived in the topic streams, and what
  the forecast still counts;
- :mod:`delayline.testing.kafka`: a real single-node Kafka broker, from the jars
  that ``kafka-pom.xml`` (beside this file) names;
- :mod:`delayline.testing.redis_cluster`: ``LocalRedisCluster``, a real Redis
  Cluster of primaries with replicas, whose nodes a test kills, fails over and
  restarts;
- :mod:`delayline.testing.replicated`: ``ReplicatedRedis``, a real primary and
  replica, optionally with three Sentinels; promote the replica by hand, or kill
  the primary and wait for the Sentinels' failover;
- :mod:`delayline.testing.slots`: each Redis shard's slot moved to a primary of
  its own, as an operator places them;
- :mod:`delayline.testing.servers`: what those two share: a server process from
  a configuration private to the user, in a folder and a session of its own.

Importing this package needs the standard library only: the client install
(``pip install delayline``) imports it too. The launchers of replicated Redis
need redis-py and the embedded server (``delayline[server]``), imported by
their modules only. A failed wait raises AssertionError, as a failed test does.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: ``delayline run`` options for a small two-level wheel, so that a 0-15 s workload
#: exercises both levels: messages due more than 6 s ahead start coarse and are
#: handed down 3 s ahead, and fine slots fire 1 s ahead (a horizon of 1 s: the SDK
#: sends little to the outbox).
SMALL_WHEEL = (
    *("--coarse-after-ms", "6000", "--coarse-tick-ms", "2000", "--cascade-ahead-ms", "3000"),
    *("--horizon-ms", "1000"),
)


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
