"""A pump in a process of its own, for the crash-point tests: ``python -m
tests.support.pump_process <redis url> <count>`` pumps the unsharded outbox until
``count`` messages are settled (delivered or rejected), then exits 0. With
``DELAYLINE_CRASH_AT`` set, it dies with SIGKILL at that point instead."""

from __future__ import annotations

import sys
import time

import redis

from delayline.redis import keys
from delayline.scheduler.pump import Pump


def main(redis_url: str, count: int) -> int:
    pump = Pump(redis_url, journal_ttl_s=3_600)
    pump.start()
    client = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            stats = client.hgetall(keys.STATS)
            settled = int(stats.get(b"delivered", 0)) + int(stats.get(b"rejected", 0))
            if settled >= count and client.xlen(keys.UNSHARDED.ready) == 0:
                return 0
            if pump.failure is not None:
                print(f"pump failed: {pump.failure}", file=sys.stderr)
                return 2
            time.sleep(0.05)
        print("timed out", file=sys.stderr)
        return 3
    finally:
        pump.stop()
        client.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2])))
