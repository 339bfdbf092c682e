"""Calling Redis: redis-py's errors translated into delayline's, and calls retried
with backoff, for a while, when Redis cannot serve yet."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from delayline.errors import ConnectError, TransportError

#: How long a call keeps retrying a Redis that cannot serve (loading its data,
#: unreachable, refusing writes it cannot persist) before raising ConnectError (ms).
DEFAULT_PATIENCE_MS = 5_000
#: The first wait between such retries (s); it doubles up to MAX_BACKOFF_S.
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0

T = TypeVar("T")


@contextmanager
def translated_errors(action: str) -> Iterator[None]:
    """Re-raise redis-py errors as delayline errors, naming what was being done.

    ConnectError means "not now": Redis is loading its data, unreachable, or
    refusing writes because it cannot persist them. Retrying later can succeed.
    """
    try:
        yield
    except redis.BusyLoadingError as exc:
        raise ConnectError(f"cannot {action}: Redis is loading its data into memory") from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ConnectError(f"cannot {action}: Redis is unreachable ({exc})") from exc
    except redis.RedisError as exc:
        if "MISCONF" in str(exc):
            raise ConnectError(
                f"cannot {action}: Redis refuses writes because it cannot persist them "
                f"(is its disk full?): {exc}"
            ) from exc
        raise TransportError(f"cannot {action}: {exc}") from exc


def no_retries() -> Retry:
    """For redis-py clients: delayline retries itself (:func:`with_patience`).

    redis-py 6+ otherwise retries a refused connection 3 times, about 1 s apart,
    before it reports it, which would hide how long we wait and for what.
    """
    return Retry(NoBackoff(), 0)


def backoff_delays(patience_ms: int | None) -> Iterator[float]:
    """Waits (s) between retries: from FIRST_BACKOFF_S, doubling to MAX_BACKOFF_S.

    They stop once ``patience_ms`` would be spent; ``None`` never stops.
    """
    deadline = None if patience_ms is None else time.monotonic() + patience_ms / 1000
    delay_s = FIRST_BACKOFF_S
    while deadline is None or time.monotonic() + delay_s <= deadline:
        yield delay_s
        delay_s = min(delay_s * 2, MAX_BACKOFF_S)


def with_patience(action: str, call: Callable[[], T], patience_ms: int | None) -> T:
    """``call()``, retried with backoff while Redis cannot serve, for up to ``patience_ms``.

    Raises ConnectError once patience runs out, TransportError at once for
    other failures. Retrying is safe for every delayline write: each is
    idempotent (sink marker, journal) or harmless to repeat (a re-sent record
    is deduplicated by its id).
    """
    delays = backoff_delays(patience_ms)
    while True:
        try:
            with translated_errors(action):
                return call()
        except ConnectError:
            delay_s = next(delays, None)
            if delay_s is None:
                raise
            time.sleep(delay_s)


async def with_patience_async(
    action: str, call: Callable[[], Awaitable[T]], patience_ms: int | None
) -> T:
    """:func:`with_patience` for a coroutine."""
    delays = backoff_delays(patience_ms)
    while True:
        try:
            with translated_errors(action):
                return await call()
        except ConnectError:
            delay_s = next(delays, None)
            if delay_s is None:
                raise
            await asyncio.sleep(delay_s)
