"""Proving that a peer framework's freshly started worker consumes, before the bench starts."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Sequence
from typing import cast

import redis

from bench.systems.base import RECEIPTS_KEY, Job, System, now_ms
from delayline.testing import wait_for

#: The line the peer workers log at WARNING from their framework's "ready" hook.
READY_LINE = "bench worker ready"
#: Import, broker connection and the first poll, on 2 busy cores.
START_TIMEOUT_S = 120


def wait_consuming(
    system: System,
    processes: Sequence[subprocess.Popen[bytes]],
    timeout_s: float = START_TIMEOUT_S,
) -> None:
    """Schedule a probe job due now; return once it is received, then clear the receipts."""
    key = f"probe-{uuid.uuid4().hex}"
    receipts = redis.Redis.from_url(system.receipts_url)
    try:
        system.schedule([Job(key, now_ms())])

        def received() -> bool:
            found = cast(list[bytes], receipts.lrange(RECEIPTS_KEY, 0, -1))
            if any(raw.decode().split(" ")[0] == key for raw in found):
                return True
            for process in processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{process.args!r} exited; see {system.workdir}")
            return False

        wait_for(received, timeout_s, f"{system.name} to receive the probe", interval_s=0.1)
        receipts.delete(RECEIPTS_KEY)
    finally:
        receipts.close()
