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


def reroute_after(router: Placement[Any], error: redis.RedisError) -> None:
    """Have ``router`` find the servers again before its next call if ``error`` (a
    lost connection, a timeout, a moved slot, a demoted primary) says they changed."""
    if isinstance(error, redis.ConnectionError | redis.TimeoutError) or (
        isinstance(error, redis.ResponseError) and is_moved(error)
    ):
        router.invalidate()


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
    calls that it answers NOSCRIPT: their SCRIPT LOADs and the calls once more; each
    round followed by ``wait``, if given, on its connection (WAIT counts what that
    connection wrote)."""
    replies = _round(client, commands, transaction, wait)
    missing = _missing_scripts(commands, replies)
    again = _round(client, _reloaded(commands, missing), transaction, wait) if missing else []
    return _spliced(replies, missing, again)


def _round(
    client: redis.Redis, commands: Sequence[Command], transaction: bool, wait: Command | None
) -> list[Any]:
    """The replies of ``commands`` (errors in their places), then ``wait`` run on the
    same connection; one round trip."""
    if wait is not None and transaction:
        return _transaction_then(client, commands, wait)
    if wait is None and len(commands) == 1:  # the pump's call: no pipeline to build
        try:
            return [client.execute_command(*commands[0])]
        except redis.ResponseError as exc:
            return [exc]
    pipe = client.pipeline(transaction=transaction)
    for command in (*commands, wait) if wait is not None else commands:
        pipe.execute_command(*command)
    replies = list(pipe.execute(raise_on_error=False))
    return replies[: len(commands)]


def _transaction_then(client: redis.Redis, commands: Sequence[Command], then: Command) -> list[Any]:
    """MULTI, ``commands``, EXEC and ``then`` on one connection of ``client``'s pool, in
    one round trip (redis-py's transactions release the connection after EXEC); the
    replies as redis-py's would read them."""
    pool = client.connection_pool
    connection = _connection_of(pool)
    try:
        connection.send_packed_command(
            connection.pack_commands([("MULTI",), *commands, ("EXEC",), then])
        )
        replies = _transaction_replies(connection.read_response, len(commands))
    except BaseException:
        connection.disconnect()  # what it holds unread is garbage now
        raise
    finally:
        pool.release(connection)
    return _parsed(client.response_callbacks, commands, replies)


async def _transaction_then_async(
    client: redis.asyncio.Redis, commands: Sequence[Command], then: Command
) -> list[Any]:
    """:func:`_transaction_then` for asyncio."""
    pool = client.connection_pool
    connection = await _connection_of(pool)
    try:
        await connection.send_packed_command(
            connection.pack_commands([("MULTI",), *commands, ("EXEC",), then])
        )
        replies: list[Any] = []
        for _ in range(len(commands) + 3):
            try:
                replies.append(await connection.read_response())
            except redis.ResponseError as exc:
                replies.append(exc)
        found = _exec_replies(replies, len(commands))
    except BaseException:
        await connection.disconnect()
        raise
    finally:
        await pool.release(connection)
    return _parsed(client.response_callbacks, commands, found)


def _connection_of(pool: Any) -> Any:
    """A connection of ``pool`` (a coroutine for asyncio's): redis-py 5.2 asks for the
    command it is for, and 5.3 on warns when told."""
    try:
        return pool.get_connection()
    except TypeError:
        return pool.get_connection("MULTI")


def _transaction_replies(read: Any, count: int) -> list[Any]:
    """Read the replies to MULTI, ``count`` queued commands, EXEC and one more."""
    replies: list[Any] = []
    for _ in range(count + 3):
        try:
            replies.append(read())
        except redis.ResponseError as exc:
            replies.append(exc)
    return _exec_replies(replies, count)


def _exec_replies(replies: list[Any], count: int) -> list[Any]:
    """EXEC's replies among MULTI's, the QUEUEDs, EXEC's and the last command's; raises
    the first error that aborted the transaction, as redis-py does."""
    queued, executed = replies[1 : 1 + count], replies[1 + count]
    if isinstance(executed, Exception):
        raise next((r for r in queued if isinstance(r, Exception)), executed)
    return list(executed)


def _parsed(callbacks: Any, commands: Sequence[Command], replies: list[Any]) -> list[Any]:
    """``replies`` through redis-py's response callbacks, as its transactions do."""
    parsed = []
    for command, reply in zip(commands, replies, strict=True):
        callback = callbacks.get(str(command[0]).upper())
        parsed.append(
            reply if callback is None or isinstance(reply, Exception) else callback(reply)
        )
    return parsed


async def _on_server_async(
    client: redis.asyncio.Redis,
    commands: Sequence[Command],
    transaction: bool,
    wait: Command | None,
) -> list[Any]:
    """:func:`_on_server` for asyncio."""
    replies = await _round_async(client, commands, transaction, wait)
    missing = _missing_scripts(commands, replies)
    again = (
        await _round_async(client, _reloaded(commands, missing), transaction, wait)
        if missing
        else []
    )
    return _spliced(replies, missing, again)


async def _round_async(
    client: redis.asyncio.Redis,
    commands: Sequence[Command],
    transaction: bool,
    wait: Command | None,
) -> list[Any]:
    """:func:`_round` for asyncio."""
    if wait is not None and transaction:
        return await _transaction_then_async(client, commands, wait)
    pipe = client.pipeline(transaction=transaction)
    for command in (*commands, wait) if wait is not None else commands:
        pipe.execute_command(*command)
    replies = list(await pipe.execute(raise_on_error=False))
    return replies[: len(commands)]


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
