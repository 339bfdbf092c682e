"""Calling Redis: redis-py's errors translated into delayline's, calls retried with
backoff, for a while, when Redis cannot serve yet, and the client every side builds
on (:class:`RedisConnection`, and :class:`AsyncRedisConnection` for asyncio)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Self, TypeVar

import redis
import redis.asyncio
import redis.asyncio.retry
from redis.backoff import NoBackoff
from redis.retry import Retry

from delayline.errors import ConfigurationError, ConnectError, TransportError
from delayline.redis import scripts, topology
from delayline.redis.commands import Command
from delayline.redis.execution import is_moved, reroute_after, run_commands, run_commands_async
from delayline.redis.routing import AsyncRouter, Router
from delayline.urls import redacted

#: How long a call keeps retrying a Redis that cannot serve (loading its data,
#: unreachable, refusing writes it cannot persist) before raising ConnectError (ms).
DEFAULT_PATIENCE_MS = 5_000
#: How long a reply may take (s): a server that accepts connections and never
#: answers is unreachable after this, not a hang. Every blocking command blocks
#: for less: the pump's and the listings' at most 1 s, a consumer's read at most
#: consuming.MAX_BLOCK_MS, however long its caller waits in all.
READ_TIMEOUT_S = 10.0
#: Redis reads a blocking command's timeout in seconds and truncates it to whole
#: ms: under 1 ms, and 0.001 itself (long double arithmetic), it means "block for
#: ever". Every timeout we give BLPOP or BRPOP is at least this (s).
MIN_BLOCK_S = 0.01
#: The first wait between such retries (s); it doubles up to MAX_BACKOFF_S.
FIRST_BACKOFF_S = 0.05
MAX_BACKOFF_S = 1.0

T = TypeVar("T")


@contextmanager
def malformed_url(url: str) -> Iterator[None]:
    """Re-raise redis-py's complaint about ``url`` as a ConfigurationError that shows the
    URL without its password."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise ConfigurationError(
            f"not a usable Redis URL: {redacted(url)} ({exc}); {topology.EXPECTED}"
        ) from None


@contextmanager
def translated_errors(action: str) -> Iterator[None]:
    """Re-raise redis-py errors as delayline errors, naming what was being done.

    ConnectError means "not now": Redis is loading its data, unreachable, or
    refusing writes because it cannot persist them. Retrying later can succeed.
    """
    try:
        yield
    except redis.AuthenticationError as exc:
        # Not "unreachable", and no retry will fix it: the operator must.
        raise ConfigurationError(
            f"cannot {action}: Redis refused the credentials ({exc}); check the password "
            "in the Redis URL (DELAYLINE_REDIS_URL)"
        ) from exc
    except redis.BusyLoadingError as exc:
        raise ConnectError(f"cannot {action}: Redis is loading its data into memory") from exc
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise ConnectError(f"cannot {action}: Redis is unreachable ({exc})") from exc
    except redis.ResponseError as exc:
        if is_moved(exc):
            raise ConnectError(
                f"cannot {action}: the Redis servers changed (a failover, or a slot moved): {exc}"
            ) from exc
        if "MISCONF" in str(exc):
            raise ConnectError(
                f"cannot {action}: Redis refuses writes because it cannot persist them "
                f"(is its disk full?): {exc}"
            ) from exc
        raise TransportError(f"cannot {action}: {exc}") from exc
    except redis.RedisError as exc:
        raise TransportError(f"cannot {action}: {exc}") from exc


def no_retries() -> Retry:
    """For redis-py clients: delayline retries itself (:func:`with_patience`).

    redis-py 6+ otherwise retries a refused connection 3 times, about 1 s apart,
    before it reports it, which would hide how long we wait and for what.
    """
    return Retry(NoBackoff(), 0)


def backoff_delays(patience_ms: int | None) -> Iterator[float]:
    """Waits (s) between retries: from FIRST_BACKOFF_S, doubling to MAX_BACKOFF_S.

    They stop once ``patience_ms``, counted from this call, would be spent;
    ``None`` never stops.
    """
    # Now, not at the first wait: a first attempt that timed out has spent patience too.
    deadline = None if patience_ms is None else time.monotonic() + patience_ms / 1000
    return _delays(deadline)


def _delays(deadline: float | None) -> Iterator[float]:
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


def _client_options() -> dict[str, Any]:
    """redis-py's options for every server's client."""
    return {
        "socket_connect_timeout": 5,
        "socket_timeout": READ_TIMEOUT_S,
        "health_check_interval": 30,
        "retry": no_retries(),
    }


class RedisConnection:
    """The clients of the Redis a URL names, every call translated, routed to the server
    that serves its keys, and retried (within patience).

    The SDK runs its plans through :meth:`execute`; the scheduler's sides
    (:mod:`delayline.redis.inbound`, :mod:`delayline.redis.store`) add their calls,
    each through :meth:`_node` (the client serving a key) or :meth:`execute`.
    """

    def __init__(self, router: Router, *, patience_ms: int | None = DEFAULT_PATIENCE_MS) -> None:
        self._router = router
        self._patience_ms = patience_ms

    @classmethod
    def from_url(cls, url: str, *, patience_ms: int | None = DEFAULT_PATIENCE_MS) -> Self:
        """A client for ``url`` (one server, a primary and its replicas, a cluster or
        Sentinels: see :mod:`delayline.redis.topology`); it connects on first use.

        Every call retries for up to ``patience_ms`` while Redis cannot serve
        (``None``: until it can). Raises ConfigurationError for a malformed URL.
        """
        endpoints = topology.parse_endpoints(url)
        options = _client_options()

        def connect(node_url: str) -> redis.Redis:
            with malformed_url(url):
                return redis.Redis.from_url(node_url, **options)

        connect(endpoints.url_for(endpoints.addresses[0])).close()  # a bad option fails now
        return cls(Router(endpoints, connect, options), patience_ms=patience_ms)

    @property
    def cluster(self) -> bool:
        """Whether the URL names a Redis Cluster."""
        return self._router.cluster

    def _node(self, key: str | bytes) -> redis.Redis:
        """The client of the server that serves ``key`` (call it inside :meth:`_call`)."""
        return self._router.client_for(key)

    def _call(self, action: str, call: Callable[[], T]) -> T:
        return with_patience(action, self._rerouted(call), self._patience_ms)

    def _rerouted(self, call: Callable[[], T]) -> Callable[[], T]:
        """``call``, the servers found again before the next call if it fails in a way
        that a failover or a lost server explains."""

        def attempt() -> T:
            try:
                return call()
            except redis.RedisError as exc:
                reroute_after(self._router, exc)
                raise

        return attempt

    def close(self) -> None:
        """Release the connection pools."""
        self._router.close()

    def ping(self) -> None:
        """Raise ConnectError unless every primary answers (within this client's patience)."""
        self._call("ping Redis", lambda: [c.ping() for c in self._router.every_primary()])

    def primary_count(self) -> int:
        """How many primaries serve the keys (1 but on a cluster). Raises ConnectError."""
        return self._call("find the primaries", lambda: len(self._router.every_primary()))

    def primaries_of(self, names: Sequence[str]) -> list[tuple[str, int]]:
        """The address of the primary serving each key of ``names``. Raises ConnectError."""

        def find() -> list[tuple[str, int]]:
            self._router.every_primary()  # the servers found, if need be
            return [self._router.address_for(name) for name in names]

        return self._call("find the primaries", find)

    def loading_percent(self) -> float | None:
        """How much of its data a loading Redis has read (0-100), or None once every
        primary serves.

        Redis answers INFO while it loads its AOF, and nothing else. Raises
        ConnectError if it is unreachable.
        """
        with translated_errors("ask Redis for its loading progress"):
            for client in self._rerouted(self._router.every_primary)():
                info: Any = client.info("persistence")
                if int(info.get("loading", 0)):
                    return float(info.get("loading_loaded_perc", 0.0))
        return None

    def execute(
        self, commands: Sequence[Command], *, action: str, transaction: bool, errors_ok: bool
    ) -> list[Any]:
        """Run ``commands`` in one round trip (MULTI/EXEC if ``transaction``; see
        :func:`run_commands` for a cluster, and for a script Redis lacks).

        With ``errors_ok``, a command's error is returned in its place instead
        of raised. Other errors raise TransportError: "cannot <action>: ...".
        """

        return self._call(
            action,
            lambda: run_commands(
                self._router, commands, transaction=transaction, errors_ok=errors_ok
            ),
        )

    def _script(
        self, action: str, script: scripts.Script, script_keys: Sequence[str], args: Sequence[Any]
    ) -> Any:
        """The reply of one ``script`` call, as :func:`run_commands` makes it (on the
        server of its keys), retried within patience. Raises TransportError: "cannot
        <action>: ..."."""
        return self._script_calls(action, script, script_keys, args, 1)[0]

    def _script_calls(
        self,
        action: str,
        script: scripts.Script,
        script_keys: Sequence[str],
        args: Sequence[Any],
        calls: int,
    ) -> list[Any]:
        """The replies of ``calls`` identical ``script`` calls sent in one round trip,
        which the server runs one after the other; as :meth:`_script` otherwise."""
        commands = [script.command(script_keys, args)] * calls

        def call() -> list[Any]:
            return run_commands(self._router, commands, transaction=False, errors_ok=False)

        return self._call(action, call)


class AsyncRedisConnection:
    """The asyncio counterpart of :meth:`RedisConnection.execute`, for AsyncClient."""

    def __init__(
        self, router: AsyncRouter, *, patience_ms: int | None = DEFAULT_PATIENCE_MS
    ) -> None:
        self._router = router
        self._patience_ms = patience_ms

    @classmethod
    def from_url(cls, url: str, *, patience_ms: int | None = DEFAULT_PATIENCE_MS) -> Self:
        """As :meth:`RedisConnection.from_url`, for asyncio."""
        endpoints = topology.parse_endpoints(url)
        options: dict[str, Any] = {
            "socket_connect_timeout": 5,
            "socket_timeout": READ_TIMEOUT_S,
            "retry": redis.asyncio.retry.Retry(NoBackoff(), 0),
        }

        def connect(node_url: str) -> redis.asyncio.Redis:
            with malformed_url(url):
                return redis.asyncio.Redis.from_url(node_url, **options)

        connect(endpoints.url_for(endpoints.addresses[0]))  # a bad option fails now
        return cls(AsyncRouter(endpoints, connect, options), patience_ms=patience_ms)

    @property
    def cluster(self) -> bool:
        """Whether the URL names a Redis Cluster."""
        return self._router.cluster

    async def execute(
        self, commands: Sequence[Command], *, action: str, transaction: bool, errors_ok: bool
    ) -> list[Any]:
        """As :meth:`RedisConnection.execute`, awaited."""

        async def call() -> list[Any]:
            try:
                return await run_commands_async(
                    self._router, commands, transaction=transaction, errors_ok=errors_ok
                )
            except redis.RedisError as exc:
                reroute_after(self._router, exc)
                raise

        return await with_patience_async(action, call, self._patience_ms)

    async def close(self) -> None:
        """Release the connection pools."""
        await self._router.close()
