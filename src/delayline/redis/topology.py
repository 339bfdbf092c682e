"""Where a Redis URL's servers are and which one serves a key, from what they reply
(no I/O; :mod:`delayline.redis.routing` asks them).

Three kinds of URL name the servers:

- ``redis://[:password@]host:port[,host:port...][/db]`` (or ``rediss://``): one
  server, or a primary and its replicas, of which the one that says it is the
  primary (``ROLE``) is used; after a failover (by hand, or by an orchestrator)
  the promoted one is found again;
- ``redis+cluster://[:password@]host:port[,host:port...]`` (or
  ``rediss+cluster://``): a Redis or Valkey Cluster, any of its nodes as seeds;
  each key goes to the primary that serves its hash slot;
- ``redis+sentinel://[:password@]host:port[,host:port...]/<service>`` (or
  ``rediss+sentinel://``): the Sentinels of the primary named ``service``. The
  password is the data servers', and the Sentinels' if they require one.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

from delayline.errors import ConfigurationError
from delayline.redis.commands import Command, as_text
from delayline.urls import redacted

#: A server's address: host and port.
Address = tuple[str, int]
Kind = Literal["server", "cluster", "sentinel"]

#: The URL schemes of each kind, and the scheme each node is then reached with.
_SCHEMES: dict[str, tuple[Kind, str]] = {
    "redis": ("server", "redis"),
    "rediss": ("server", "rediss"),
    "redis+cluster": ("cluster", "redis"),
    "rediss+cluster": ("cluster", "rediss"),
    "redis+sentinel": ("sentinel", "redis"),
    "rediss+sentinel": ("sentinel", "rediss"),
}
DEFAULT_PORT = 6379
#: How long a write waits for one replica to confirm it, where the primary has
#: replicas (ms): what a failover promotes then has it. Past this the write is
#: taken as done (the replica lags or is gone). ``?replica_wait_ms=0`` in the URL
#: waits for none.
DEFAULT_REPLICA_WAIT_MS = 500
#: The URL parameter that sets it; redis-py never sees it.
REPLICA_WAIT_PARAMETER = "replica_wait_ms"
#: Redis Cluster's hash slots.
SLOTS = 16_384
#: What a URL is expected to look like, for errors.
EXPECTED = (
    "expected redis://[:password@]host[:port][,host:port...][/db], "
    "redis+cluster://[:password@]host:port[,host:port...] or "
    "redis+sentinel://[:password@]host:port[,host:port...]/<service> (or rediss...)"
)


@dataclass(frozen=True)
class Endpoints:
    """The servers a URL names, and how to reach each of them."""

    kind: Kind
    addresses: tuple[Address, ...]
    #: ``redis`` or ``rediss``: how each node is reached.
    scheme: str
    #: ``user:password@``, ``:password@`` or empty.
    user_info: str
    #: ``/<db>`` for a server; empty for a cluster (database 0 only).
    path: str
    query: str
    #: The Sentinels' name of the primary (``redis+sentinel`` only).
    service: str = ""
    #: How long a write waits for a replica to confirm it (ms; 0: not at all).
    replica_wait_ms: int = 0

    def url_for(self, address: Address, *, timeout_s: float | None = None) -> str:
        """A redis-py URL of the one server at ``address``, credentials and options kept;
        with ``timeout_s``, its connect and read timeouts that long (s)."""
        host, port = address
        query = self.query
        if timeout_s is not None:
            timeouts = f"socket_timeout={timeout_s}&socket_connect_timeout={timeout_s}"
            query = f"{query}&{timeouts}" if query else timeouts
        query = f"?{query}" if query else ""
        return f"{self.scheme}://{self.user_info}{host}:{port}{self.path}{query}"

    @property
    def password(self) -> str | None:
        """The password in the URL's user info, if any."""
        return urlsplit(f"{self.scheme}://{self.user_info}x").password


def parse_endpoints(url: str) -> Endpoints:
    """The servers ``url`` names. Raises ConfigurationError, the URL shown without its
    password, for an unknown scheme, no host, a bad port or a cluster database."""

    def refuse(why: str) -> ConfigurationError:
        return ConfigurationError(f"not a usable Redis URL: {redacted(url)} ({why}); {EXPECTED}")

    scheme, separator, rest = url.partition("://")
    if not separator or scheme.lower() not in _SCHEMES:
        raise refuse(f"unknown scheme {scheme!r}" if separator else "no scheme")
    kind, node_scheme = _SCHEMES[scheme.lower()]
    rest, _, query = rest.partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    wait_texts = [value for name, value in pairs if name == REPLICA_WAIT_PARAMETER]
    if any(not text.isdigit() for text in wait_texts):
        raise refuse(f"{REPLICA_WAIT_PARAMETER} must be a whole number of ms")
    replica_wait_ms = int(wait_texts[-1]) if wait_texts else DEFAULT_REPLICA_WAIT_MS
    query = urlencode([(name, value) for name, value in pairs if name != REPLICA_WAIT_PARAMETER])
    hosts, slash, path = rest.partition("/")
    user_info, at, hosts = hosts.rpartition("@")
    if not hosts:
        raise refuse("no host")
    addresses = tuple(_address(part, refuse) for part in hosts.split(","))
    service = ""
    if kind == "sentinel":
        service, path = path.strip("/"), ""
        if not service:
            raise refuse("no service name after the Sentinels' addresses")
    elif kind == "cluster" and path.strip("/") not in ("", "0"):
        raise refuse("a cluster has database 0 only")
    elif kind == "cluster":
        path = ""
    else:
        path = slash + path if path else ""
    return Endpoints(
        kind,
        addresses,
        node_scheme,
        user_info + at,
        path,
        query,
        service=service,
        replica_wait_ms=replica_wait_ms,
    )


def _address(text: str, refuse: Callable[[str], ConfigurationError]) -> Address:
    if text.startswith("["):  # [IPv6]:port
        host, _, port = text[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = text.partition(":")
    port = port or str(DEFAULT_PORT)
    if not host:
        raise refuse(f"no host in {text!r}")
    if not port.isdigit() or not 0 < int(port) < 65_536:
        raise refuse(f"bad port in {text!r}")
    return host, int(port)


@dataclass(frozen=True)
class SlotRange:
    """Hash slots ``first`` to ``last`` (inclusive), served by ``primary``, which has
    ``replicas`` replicas that the cluster counts healthy."""

    first: int
    last: int
    primary: Address
    replicas: int


def slot_ranges(reply: Sequence[Any], asked: Address) -> list[SlotRange]:
    """The slot ranges of a ``CLUSTER SLOTS`` reply, sorted; ``asked`` is the node
    that replied (a node may name itself with an empty host)."""
    ranges = []
    for first, last, primary, *replicas in reply:
        host = as_text(primary[0]) or asked[0]
        ranges.append(SlotRange(int(first), int(last), (host, int(primary[1])), len(replicas)))
    return sorted(ranges, key=lambda found: found.first)


def range_of(ranges: Sequence[SlotRange], slot: int) -> SlotRange | None:
    """The range of ``ranges`` (sorted) holding ``slot``; None if none serves it."""
    index = bisect.bisect_right([found.first for found in ranges], slot) - 1
    if index < 0 or ranges[index].last < slot:
        return None
    return ranges[index]


def connected_replicas(role: Sequence[Any]) -> int:
    """How many replicas a primary's ``ROLE`` reply lists (0 for a replica's reply)."""
    if not role or as_text(role[0]) != "master":
        return 0
    return len(role[2])


def is_primary(role: Sequence[Any]) -> bool:
    """Whether a ``ROLE`` reply is a primary's."""
    return bool(role) and as_text(role[0]) == "master"


#: The commands that name no key at their first argument, and where their first key is.
_FIRST_KEY = {"EVALSHA": 3, "EVAL": 3, "FCALL": 3, "XGROUP": 2, "XINFO": 2, "OBJECT": 2}
#: Commands that write nothing a failover must keep: a group of these only waits for
#: no replica.
_READS = frozenset({
    "GET", "HGET", "HGETALL", "HMGET", "HEXISTS", "HLEN", "EXISTS", "TYPE", "PTTL", "TTL",
    "XRANGE", "XREVRANGE", "XREAD", "XLEN", "XINFO", "XPENDING", "ZCARD", "ZRANGE",
    "ZRANGEBYSCORE", "ZSCORE", "SMEMBERS", "SCARD", "LRANGE", "LLEN", "SCAN", "PING", "INFO",
    "TIME", "ROLE", "SCRIPT", "WAIT",
})  # fmt: skip
#: Commands with no key: they go to any node (the first primary).
_KEYLESS = frozenset({"SCRIPT", "PING", "INFO", "TIME", "CONFIG", "SCAN", "ROLE", "WAIT"})


def command_key(command: Command) -> str | bytes | None:
    """The key that routes ``command`` (its first), or None for a keyless one.

    Every key of a command delayline sends is in one slot, so the first decides.
    """
    name = as_text(command[0]).upper()
    if name in _KEYLESS or len(command) < 2:
        return None
    if name in ("XREAD", "XREADGROUP"):
        words = [as_text(part).upper() if isinstance(part, str | bytes) else "" for part in command]
        return _as_key(command[words.index("STREAMS") + 1])
    position = _FIRST_KEY.get(name, 1)
    if position is None or len(command) <= position:
        return None
    if name in ("EVALSHA", "EVAL", "FCALL") and int(command[2]) == 0:
        return None
    return _as_key(command[position])


def writes(commands: Sequence[Command]) -> bool:
    """Whether any of ``commands`` may write data (a script call may)."""
    return any(as_text(command[0]).upper() not in _READS for command in commands)


def _as_key(part: object) -> str | bytes:
    return part if isinstance(part, str | bytes) else str(part)


def grouped(commands: Sequence[Command], route: Callable[[Command], Hashable]) -> list[list[int]]:
    """The indexes of ``commands`` grouped by ``route``, each group in the commands'
    order, the groups in the order of their first command; a command routed to None
    (keyless) joins the group of the next routed one (or the last group)."""
    groups: dict[Hashable, list[int]] = {}
    waiting: list[int] = []
    for index, command in enumerate(commands):
        target = route(command)
        if target is None:
            waiting.append(index)
            continue
        groups.setdefault(target, []).extend([*waiting, index])
        waiting = []
    if waiting:
        if groups:
            next(reversed(groups.values())).extend(waiting)
        else:
            groups[None] = waiting
    return list(groups.values())
