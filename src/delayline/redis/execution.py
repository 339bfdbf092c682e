"""Running commands on the servers that serve their keys: one round trip per server
(a transaction per hash slot on a cluster), scripts loaded where a server lacks
them, writes confirmed by a replica where the primary has one.

Raises redis-py's errors; :mod:`delayline.redis.connection` translates them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis
import redis.asyncio

from delayline.redis import scripts, topology
from delayline.redis.commands import Command
from delayline.redis.routing import AsyncRouter, Placement, Router

#: The errors that say a key's server changed: a slot moved or is moving, the
#: cluster lost a primary, or a server became a replica. Found again, the servers
#: serve the call.
_MOVED = ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "LOADING")


#: redis-py's classes for them (which may leave the code out of the message).
_MOVED_ERRORS = (
    redis.exceptions.MovedError,
    redis.exceptions.AskError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.MasterDownError,
    redis.exceptions.ReadOnlyError,
)


def is_moved(error: redis.ResponseError) -> bool:
    """Whether ``error`` says the servers' layout changed (see _MOVED). redis-py may
    have prefixed the server's message with the command it answered."""
    message = str(error).rpartition("caused error: ")[2]
    return message.startswith(_MOVED) or isinstance(error, _MOVED_ERRORS)


def _missing_scripts(commands: Sequence[Command], replies: Sequence[Any]) -> list[int]:
    """The indexes of the script calls that Redis answered NOSCRIPT."""
    return [
        index
        for index, reply in enumerate(replies)
        if isinstance(reply, redis.exceptions.NoScriptError)
        and scripts.by_sha(commands[index][1]) is not None
    ]


def _reloaded(commands: Sequence[Command], missing: Sequence[int]) -> list[Command]:
    """The calls at ``missing`` again, after the loads of their scripts."""
    shas = dict.fromkeys(commands[index][1] for index in missing)
    loads = [script.load_command() for sha in shas if (script := scripts.by_sha(sha))]
    return [*loads, *(commands[index] for index in missing)]


def _spliced(replies: list[Any], missing: Sequence[int], again: Sequence[Any]) -> list[Any]:
    """``replies`` with the retried calls' replies in their places (the loads' left out);
    raises a reply that says the servers' layout changed (see :func:`is_moved`)."""
    for index, reply in zip(missing, again[len(again) - len(missing) :], strict=True):
        replies[index] = reply
    for reply in replies:
        if isinstance(reply, redis.ResponseError) and is_moved(reply):
            raise reply
    return replies


def _checked(replies: list[Any], errors_ok: bool) -> list[Any]:
    """``replies``, or their first error raised unless ``errors_ok``."""
    if not errors_ok:
        for reply in replies:
            if isinstance(reply, redis.exceptions.ResponseError):
                raise reply
    return replies


def _wait_command(router: Placement[Any], commands: Sequence[Command]) -> Command | None:
    """The WAIT that makes ``commands`` survive a failover, if they write."""
    wait_ms = router.endpoints.replica_wait_ms
    return ("WAIT", 1, wait_ms) if wait_ms and topology.writes(commands) else None


def _on_server(
    client: redis.Redis, commands: Sequence[Command], transaction: bool, wait: Command | None
) -> list[Any]:
    """Run ``commands`` on one server in one round trip, and a second for the script
    calls that it answers NOSCRIPT: their SCRIPT LOADs and the calls once more; then
    ``wait`` if given (for a replica's confirmation)."""
    pipe = client.pipeline(transaction=transaction)
    for command in commands:
        pipe.execute_command(*command)
    replies = list(pipe.execute(raise_on_error=False))
    missing = _missing_scripts(commands, replies)
    again: list[Any] = []
    if missing:
        pipe = client.pipeline(transaction=transaction)
        for command in _reloaded(commands, missing):
            pipe.execute_command(*command)
        again = list(pipe.execute(raise_on_error=False))
    if wait is not None:
        client.execute_command(*wait)
    return _spliced(replies, missing, again)


async def _on_server_async(
    client: redis.asyncio.Redis,
    commands: Sequence[Command],
    transaction: bool,
    wait: Command | None,
) -> list[Any]:
    """:func:`_on_server` for asyncio."""
    pipe = client.pipeline(transaction=transaction)
    for command in commands:
        pipe.execute_command(*command)
    replies = list(await pipe.execute(raise_on_error=False))
    missing = _missing_scripts(commands, replies)
    again: list[Any] = []
    if missing:
        pipe = client.pipeline(transaction=transaction)
        for command in _reloaded(commands, missing):
            pipe.execute_command(*command)
        again = list(await pipe.execute(raise_on_error=False))
    if wait is not None:
        await client.execute_command(*wait)
    return _spliced(replies, missing, again)


def run_commands(
    router: Router, commands: Sequence[Command], *, transaction: bool, errors_ok: bool
) -> list[Any]:
    """Run ``commands``: in one round trip (MULTI/EXEC if ``transaction``) on one server;
    on a cluster, one per server, and a transaction per hash slot (each all or
    nothing, one after the other in the commands' order). A script that a server
    lacks is loaded there and called again (the one way to call a script, see
    :mod:`delayline.redis.scripts`). Writes wait for a replica's confirmation where
    the primary has replicas.

    With ``errors_ok``, a command's error is returned in its place instead of
    raised. Raises redis-py's errors.
    """
    replies: list[Any] = [None] * len(commands)
    for address, indexes in router.plan(commands, transaction=transaction):
        part = [commands[index] for index in indexes]
        wait = _wait_command(router, part) if router.replicas(address) else None
        found = _on_server(router.client(address), part, transaction, wait)
        for index, reply in zip(indexes, found, strict=True):
            replies[index] = reply
    return _checked(replies, errors_ok)


async def run_commands_async(
    router: AsyncRouter,
    commands: Sequence[Command],
    *,
    transaction: bool,
    errors_ok: bool,
) -> list[Any]:
    """:func:`run_commands` for asyncio."""
    replies: list[Any] = [None] * len(commands)
    for address, indexes in await router.plan(commands, transaction=transaction):
        part = [commands[index] for index in indexes]
        wait = _wait_command(router, part) if await router.replicas(address) else None
        found = await _on_server_async(router.client(address), part, transaction, wait)
        for index, reply in zip(indexes, found, strict=True):
            replies[index] = reply
    return _checked(replies, errors_ok)
