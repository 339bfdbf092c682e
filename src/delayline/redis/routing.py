"""Which server serves a key: a redis-py client per server, found from the URL's kind
(:mod:`delayline.redis.topology`) and found again when a failover or a slot move
says the layout changed (:meth:`Router.invalidate`).

One server is the fast path: one client, no lookup. A cluster's layout comes from
``CLUSTER SLOTS``; a primary among several addresses is the one whose ``ROLE``
says so; Sentinels name theirs. :class:`AsyncRouter` is the same for asyncio.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel
from redis.crc import key_slot

from delayline.redis import topology
from delayline.redis.commands import Command
from delayline.redis.topology import Address, Endpoints

#: How long a primary's replica count is trusted before ROLE is asked again (s).
REPLICAS_TTL_S = 10.0
#: How long finding the servers waits for each one (s): a server that hangs (paused,
#: or its host gone) must not hold the search for the connection's read timeout.
PROBE_TIMEOUT_S = 1.0

C = TypeVar("C")
#: The address a Sentinel-managed primary goes by here: its client finds it itself.
_SENTINEL_PRIMARY: Address = ("sentinel", 0)


class Placement(Generic[C]):
    """What a router knows, with no I/O: the servers' addresses, the cluster's slot
    ranges or the primary, the replica counts, and a client for each address."""

    def __init__(self, endpoints: Endpoints, connect: Callable[[str], C]) -> None:
        self.endpoints = endpoints
        self._connect = connect
        self._clients: dict[Address, C] = {}
        self._probes: dict[Address, C] = {}
        self._ranges: list[topology.SlotRange] = []
        self._primary: Address | None = (
            endpoints.addresses[0]
            if endpoints.kind == "server" and len(endpoints.addresses) == 1
            else None
        )
        self._replicas: dict[Address, tuple[int, float]] = {}
        self._stale = self._primary is None

    @property
    def cluster(self) -> bool:
        """Whether the URL names a Redis Cluster."""
        return self.endpoints.kind == "cluster"

    def invalidate(self) -> None:
        """Find the servers again before the next call: a call failed in a way that a
        failover, a slot's move or a lost server explains."""
        # One server stays where it is, and Sentinels' client finds its primary itself.
        if self.cluster or (self.endpoints.kind == "server" and len(self.endpoints.addresses) > 1):
            self._stale = True
        self._replicas.clear()

    def client_at(self, address: Address) -> C:
        """The client of the server at ``address``, made on first use."""
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = self._connect(self.endpoints.url_for(address))
        return client

    def probe_at(self, address: Address) -> C:
        """A client of the server at ``address`` for finding the servers: short timeouts."""
        probe = self._probes.get(address)
        if probe is None:
            url = self.endpoints.url_for(address, timeout_s=PROBE_TIMEOUT_S)
            probe = self._probes[address] = self._connect(url)
        return probe

    def address_for(self, key: str | bytes | None) -> Address:
        """The primary serving ``key`` (any primary for None). Raises redis-py's
        ConnectionError if no live primary serves its slot."""
        if self._primary is not None:
            return self._primary
        if key is None:
            return self._ranges[0].primary
        found = topology.range_of(self._ranges, key_slot(_bytes(key)))
        if found is None:
            self._stale = True
            raise redis.ConnectionError(f"no primary serves the hash slot of {key!r}")
        return found.primary

    def primaries(self) -> list[Address]:
        """Every primary, each once."""
        if self._primary is not None:
            return [self._primary]
        return list(dict.fromkeys(found.primary for found in self._ranges))

    def route(self, command: Command, *, by_slot: bool) -> Any:
        """What groups ``command`` with those that share its slot (``by_slot``) or its
        server; None for a keyless command."""
        key = topology.command_key(command)
        if key is None:
            return None
        return key_slot(_bytes(key)) if by_slot and self.cluster else self.address_for(key)

    def groups(
        self, commands: Sequence[Command], *, transaction: bool
    ) -> list[tuple[Address, list[int]]]:
        """``commands``' indexes by the server that runs them, in order: a transaction
        per slot on a cluster (Redis refuses one across slots), else a pipeline per
        server."""
        if self._primary is not None:
            return [(self._primary, list(range(len(commands))))]
        found = []
        for indexes in topology.grouped(
            commands, lambda command: self.route(command, by_slot=transaction)
        ):
            key = next(
                (k for i in indexes if (k := topology.command_key(commands[i])) is not None), None
            )
            found.append((self.address_for(key), indexes))
        return found

    def known_replicas(self, address: Address) -> int | None:
        """How many replicas the primary at ``address`` has, if known and fresh."""
        if self.cluster:
            return max((r.replicas for r in self._ranges if r.primary == address), default=0)
        count, checked_at = self._replicas.get(address, (0, -REPLICAS_TTL_S))
        return count if time.monotonic() - checked_at < REPLICAS_TTL_S else None

    def note_replicas(self, address: Address, role: Sequence[Any] | None) -> int:
        """Record the replicas that ``role`` (a ROLE reply; None: not allowed) lists."""
        count = 0 if role is None else topology.connected_replicas(role)
        self._replicas[address] = (count, time.monotonic())
        return count

    def to_ask(self) -> tuple[list[Address], str]:
        """Whom to ask where the servers are, in order, and with which command: a
        cluster's known primaries then its seeds (the first answer will do), or every
        address of the URL (their ROLEs)."""
        if self.cluster:
            return list(dict.fromkeys([*self.primaries(), *self.endpoints.addresses])), (
                "CLUSTER SLOTS"
            )
        known = [] if self._primary is None else [self._primary]
        return list(dict.fromkeys([*known, *self.endpoints.addresses])), "ROLE"

    def learn(self, answers: dict[Address, Any], last_error: Exception | None) -> None:
        """Take in the answers to :meth:`to_ask`. Raises redis-py's ConnectionError if
        none came, or no server said it is the primary."""
        if not answers:
            raise redis.ConnectionError(f"no server of the URL answers: {last_error}")
        if self.cluster:
            asked, reply = next(iter(answers.items()))
            self._ranges = topology.slot_ranges(reply, asked)
        else:
            primaries = [a for a, role in answers.items() if topology.is_primary(role)]
            if not primaries:
                raise redis.ConnectionError("none of the servers is a primary")
            self._primary = primaries[0]
            self.note_replicas(self._primary, answers[self._primary])
        self._stale = False


def _sentinel_options(endpoints: Endpoints) -> dict[str, Any]:
    """How to talk to the Sentinels themselves: with the URL's password, if any."""
    options: dict[str, Any] = {"socket_timeout": 5, "socket_connect_timeout": 5}
    if endpoints.password:
        options["password"] = endpoints.password
    return options


def _bytes(key: str | bytes) -> bytes:
    return key if isinstance(key, bytes) else key.encode()


class Router(Placement[redis.Redis]):
    """The clients of the servers a URL names (see the module's docstring)."""

    def __init__(
        self,
        endpoints: Endpoints,
        connect: Callable[[str], redis.Redis],
        options: dict[str, Any] | None = None,
    ) -> None:
        """``connect`` makes the client of one server's URL; ``options`` are the
        redis-py options of a Sentinel-managed primary's client."""
        super().__init__(endpoints, connect)
        self._sentinel_client: redis.Redis | None = None
        if endpoints.kind == "sentinel":
            sentinels = redis.sentinel.Sentinel(
                list(endpoints.addresses), sentinel_kwargs=_sentinel_options(endpoints)
            )
            self._sentinel_client = sentinels.master_for(
                endpoints.service, password=endpoints.password, **(options or {})
            )
            self._primary = _SENTINEL_PRIMARY
            self._stale = False

    def client_for(self, key: str | bytes | None) -> redis.Redis:
        """The client of the primary serving ``key`` (any primary's for None)."""
        self._refresh()
        return self.client(self.address_for(key))

    def client(self, address: Address) -> redis.Redis:
        """The client at ``address``; a Sentinel-managed primary's, whatever its address."""
        if self._sentinel_client is not None:
            return self._sentinel_client
        return self.client_at(address)

    def every_primary(self) -> list[redis.Redis]:
        """A client of each primary."""
        self._refresh()
        return [self.client(address) for address in self.primaries()]

    def plan(
        self, commands: Sequence[Command], *, transaction: bool
    ) -> list[tuple[Any, list[int]]]:
        """:meth:`Placement.groups`, the servers found first if need be."""
        self._refresh()
        return self.groups(commands, transaction=transaction)

    def replicas(self, address: Address) -> int:
        """How many replicas the primary at ``address`` has (asked at most every
        REPLICAS_TTL_S); 0 where the URL says not to wait for them."""
        if not self.endpoints.replica_wait_ms:
            return 0
        known = self.known_replicas(address)
        if known is not None:
            return known
        try:
            role = self.client(address).execute_command("ROLE")
        except redis.ResponseError:  # not allowed to this user: wait for none
            role = None
        return self.note_replicas(address, role)

    def _refresh(self) -> None:
        if not self._stale:
            return
        addresses, command = self.to_ask()
        answers: dict[Address, Any] = {}
        last_error: Exception | None = None
        for address in addresses:
            try:
                answers[address] = self.probe_at(address).execute_command(command)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                last_error = exc
                continue
            if self.cluster or topology.is_primary(answers[address]):
                break
        self.learn(answers, last_error)

    def close(self) -> None:
        """Release every client."""
        for client in (*self._clients.values(), *self._probes.values()):
            client.close()
        if self._sentinel_client is not None:
            self._sentinel_client.close()


class AsyncRouter(Placement[redis.asyncio.Redis]):
    """:class:`Router` for asyncio."""

    def __init__(
        self,
        endpoints: Endpoints,
        connect: Callable[[str], redis.asyncio.Redis],
        options: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(endpoints, connect)
        self._sentinel_client: redis.asyncio.Redis | None = None
        if endpoints.kind == "sentinel":
            sentinels = redis.asyncio.sentinel.Sentinel(
                list(endpoints.addresses), sentinel_kwargs=_sentinel_options(endpoints)
            )
            self._sentinel_client = sentinels.master_for(
                endpoints.service, password=endpoints.password, **(options or {})
            )
            self._primary = _SENTINEL_PRIMARY
            self._stale = False

    def client(self, address: Address) -> redis.asyncio.Redis:
        """As :meth:`Router.client`."""
        if self._sentinel_client is not None:
            return self._sentinel_client
        return self.client_at(address)

    async def plan(
        self, commands: Sequence[Command], *, transaction: bool
    ) -> list[tuple[Any, list[int]]]:
        """As :meth:`Router.plan`."""
        await self._refresh()
        return self.groups(commands, transaction=transaction)

    async def replicas(self, address: Address) -> int:
        """As :meth:`Router.replicas`."""
        if not self.endpoints.replica_wait_ms:
            return 0
        known = self.known_replicas(address)
        if known is not None:
            return known
        try:
            role = await self.client(address).execute_command("ROLE")
        except redis.ResponseError:
            role = None
        return self.note_replicas(address, role)

    async def _refresh(self) -> None:
        if not self._stale:
            return
        addresses, command = self.to_ask()
        answers: dict[Address, Any] = {}
        last_error: Exception | None = None
        for address in addresses:
            try:
                answers[address] = await self.probe_at(address).execute_command(command)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                last_error = exc
                continue
            if self.cluster or topology.is_primary(answers[address]):
                break
        self.learn(answers, last_error)

    async def close(self) -> None:
        """Release every client."""
        for client in (*self._clients.values(), *self._probes.values()):
            await client.aclose()
        if self._sentinel_client is not None:
            await self._sentinel_client.aclose()
