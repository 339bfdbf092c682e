"""A real Redis Cluster on loopback for tests and benchmarks: primaries with
replicas, from the embedded Valkey binary (:func:`delayline.redis.embedded.server_executable`).

Every node requires a random password (and replicates with it), keeps an AOF
(``appendfsync everysec`` unless told otherwise, no RDB snapshots), and has a
short node timeout, so that a killed primary's replica takes its slots within a
few seconds. Each node has a folder of its own under the base folder: its
configuration (mode 0600), its data, ``nodes.conf`` and ``server.log``.

The cluster is formed with CLUSTER ADDSLOTSRANGE, MEET and REPLICATE from
redis-py (valkey-cli's ``-a`` would put the password on a command line), each
step waited for with a deadline. Importing this module needs redis-py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import redis
from redis.crc import key_slot

from delayline.testing import free_port, wait_for
from delayline.testing.servers import (
    LOOPBACK,
    Address,
    ServerProcess,
    client,
    command,
    kill_all,
    new_password,
    port_is_free,
    quietly,
    quoted,
)

#: How many hash slots a cluster has.
SLOTS = 16_384
#: A node's cluster bus listens this much above its port.
BUS_PORT_OFFSET = 10_000
#: The highest TCP port.
MAX_PORT = 65_535
#: How long forming the cluster, or a restarted node's rejoining, may take (s).
FORM_TIMEOUT_S = 30.0
#: How long a failover may take by default (s): the node timeout, an election, gossip.
FAILOVER_TIMEOUT_S = 20.0
#: Flags of a node that is not (yet, or any more) a working member.
_NOT_WORKING = frozenset({"fail", "fail?", "handshake", "noaddr"})


def cluster_ports(count: int) -> list[int]:
    """``count`` distinct free ports, each with its cluster bus port (10,000 higher)
    free and valid (at most 65,535) too: a node on a port above 55,535 would exit at
    start. (The system may hand out a port twice while nothing listens on it yet.)"""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        bus = port + BUS_PORT_OFFSET
        taken = {p for q in ports for p in (q, q + BUS_PORT_OFFSET)}
        if bus <= MAX_PORT and port_is_free(bus) and not {port, bus} & taken:
            ports.append(port)
    return ports


@dataclass(frozen=True)
class ClusterNode:
    """One line of CLUSTER NODES: a node as the node asked sees it."""

    node_id: str
    address: Address
    #: ``master`` or ``slave``, ``myself``, ``fail?``, ``fail``, ...
    flags: frozenset[str]
    #: The node id of its primary, for a replica.
    primary_id: str | None
    #: The slots it serves, as inclusive (first, last) ranges.
    slots: tuple[tuple[int, int], ...]

    @property
    def is_primary(self) -> bool:
        return "master" in self.flags

    @property
    def working(self) -> bool:
        """Not flagged as failing, nor still in a handshake."""
        return not self.flags & _NOT_WORKING

    def serves(self, slot: int) -> bool:
        return any(first <= slot <= last for first, last in self.slots)


def parse_nodes(text: str) -> list[ClusterNode]:
    """The nodes of a CLUSTER NODES reply (slots being migrated, ``[...]``, left out)."""
    nodes = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        node_id, address, flags, primary = fields[:4]
        host, _, port = address.partition("@")[0].partition(",")[0].rpartition(":")
        slots = []
        for token in fields[8:]:
            if not token.startswith("["):
                first, _, last = token.partition("-")
                slots.append((int(first), int(last or first)))
        nodes.append(
            ClusterNode(
                node_id, (host, int(port)), frozenset(flags.split(",")),
                None if primary == "-" else primary, tuple(slots),
            )
        )  # fmt: skip
    return nodes


def parse_info(text: str) -> dict[str, str]:
    """The ``field:value`` lines of a CLUSTER INFO reply."""
    pairs = (line.partition(":") for line in text.splitlines() if ":" in line)
    return {name.strip(): value.strip() for name, _, value in pairs}


class LocalRedisCluster:
    """A started Redis Cluster of ``primaries`` primaries, each with
    ``replicas_per_primary`` replicas, its nodes' folders under ``base_dir``; a
    context manager, which kills every node however the block ends.

    ``node_timeout_ms`` is the cluster's node timeout (ms): a primary unreachable
    that long is failed over. ``appendfsync`` is ``always``, ``everysec`` or ``no``.
    Replicas do not migrate between primaries, and always stand for election
    however stale their data (a validity factor of 0), so a test's failover is
    deterministic. The constructor blocks until every node reports
    ``cluster_state:ok`` and every replica's link to its primary is up.

    Raises ValueError for a bad shape or ``appendfsync``, FileExistsError if a
    node's folder exists, TransportError if a node exits while starting, and
    AssertionError if the cluster is not formed within ``timeout_s`` seconds; the
    nodes started are killed first.
    """

    def __init__(
        self,
        base_dir: Path,
        *,
        primaries: int = 3,
        replicas_per_primary: int = 1,
        node_timeout_ms: int = 1_000,
        appendfsync: str = "everysec",
        timeout_s: float = FORM_TIMEOUT_S,
    ) -> None:
        if primaries < 1 or replicas_per_primary < 0 or node_timeout_ms < 1:
            raise ValueError("a cluster needs a primary, no negative replicas, a node timeout")
        if appendfsync not in {"always", "everysec", "no"}:
            raise ValueError(f"appendfsync is always, everysec or no, not {appendfsync!r}")
        self.password = new_password()
        self._servers: dict[int, ServerProcess] = {}
        self._admins: dict[int, redis.Redis] = {}
        self._slots_at_kill: dict[int, tuple[tuple[int, int], ...]] = {}
        ports = cluster_ports(primaries * (1 + replicas_per_primary))
        self._first_primaries = ports[:primaries]
        settings = (node_timeout_ms, appendfsync)
        try:
            for port in ports:
                directory = base_dir / f"node-{port}"
                config = self._config(port, directory, *settings)
                self._servers[port] = ServerProcess(directory, port, config)
            for server in self._servers.values():
                server.wait_until_answering(self.password)
            self._form(ports[:primaries], ports[primaries:], replicas_per_primary, timeout_s)
        except BaseException:
            self.close()
            raise

    def _config(self, port: int, directory: Path, node_timeout_ms: int, appendfsync: str) -> str:
        lines = [
            f"port {port}", f"bind {LOOPBACK}", "protected-mode yes",
            f"requirepass {quoted(self.password)}", f"masterauth {quoted(self.password)}",
            "cluster-enabled yes", "cluster-config-file nodes.conf",
            f"cluster-node-timeout {node_timeout_ms}", "cluster-replica-validity-factor 0",
            "cluster-allow-replica-migration no", "repl-diskless-sync-delay 0", "appendonly yes",
            f"appendfsync {appendfsync}", 'save ""', f"dir {quoted(str(directory))}",
        ]  # fmt: skip
        return "\n".join(lines) + "\n"

    def _form(
        self, primaries: list[int], replicas: list[int], per_primary: int, timeout_s: float
    ) -> None:
        ports = [*primaries, *replicas]
        for epoch, port in enumerate(ports, start=1):
            # Distinct epochs, as valkey-cli sets them: no collisions to resolve later.
            command(self._admin(port), "CLUSTER SET-CONFIG-EPOCH", epoch)
        for index, port in enumerate(primaries):
            first, last = index * SLOTS // len(primaries), (index + 1) * SLOTS // len(primaries)
            command(self._admin(port), "CLUSTER ADDSLOTSRANGE", first, last - 1)
        for port in ports[1:]:
            command(self._admin(port), "CLUSTER MEET", LOOPBACK, ports[0])

        def everyone_met() -> bool:
            views = [self._view(port) for port in ports]
            return all(len(v) == len(ports) and all(n.working for n in v) for v in views)

        wait_for(everyone_met, timeout_s, "every node to know every other", interval_s=0.05)
        for index, port in enumerate(replicas):
            primary_id = command(self._admin(primaries[index // per_primary]), "CLUSTER", "MYID")
            command(self._admin(port), "CLUSTER", "REPLICATE", primary_id)

        def formed() -> bool:
            for port in ports:
                view = self._view(port)
                working_replicas = [n for n in view if n.primary_id and n.working]
                if (
                    self._cluster_info(port).get("cluster_state") != "ok"
                    or len(working_replicas) != len(replicas)
                    or sum(1 for n in view if n.is_primary and n.slots) != len(primaries)
                ):
                    return False
            return all(self._link_up(port) for port in replicas)

        wait_for(lambda: quietly(formed), timeout_s, "the cluster to form", interval_s=0.1)

    # --- asking the nodes -----------------------------------------------------------------

    def _server(self, port: int) -> ServerProcess:
        if port not in self._servers:
            raise KeyError(f"no node of this cluster on port {port}")
        return self._servers[port]

    def _admin(self, port: int) -> redis.Redis:
        """This launcher's own client of a node (str replies)."""
        self._server(port)
        if port not in self._admins:
            self._admins[port] = client(port, self.password, decode_responses=True)
        return self._admins[port]

    def _view(self, port: int) -> list[ClusterNode]:
        # "CLUSTER", "NODES" as two words: redis-py leaves the reply as text.
        return parse_nodes(str(command(self._admin(port), "CLUSTER", "NODES")))

    def _cluster_info(self, port: int) -> dict[str, str]:
        return parse_info(str(command(self._admin(port), "CLUSTER", "INFO")))

    def _link_up(self, port: int) -> bool:
        info: dict[str, Any] = self._admin(port).info("replication")
        return info.get("role") == "slave" and info.get("master_link_status") == "up"

    def _live_ports(self) -> list[int]:
        return [port for port, server in self._servers.items() if server.running()]

    def nodes(self) -> list[ClusterNode]:
        """Every node, as the first live node that answers sees them.

        Raises redis.ConnectionError if no node answers.
        """
        failure: redis.RedisError = redis.ConnectionError("no node of the cluster runs")
        for port in self._live_ports():
            try:
                return self._view(port)
            except redis.RedisError as exc:
                failure = exc
        raise failure

    # --- the public API -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``redis+cluster://:<password>@127.0.0.1:<p1>,127.0.0.1:<p2>,...``: the
        primaries as the cluster was formed (a cluster client learns the rest)."""
        hosts = ",".join(f"{LOOPBACK}:{port}" for port in self._first_primaries)
        return f"redis+cluster://:{self.password}@{hosts}"

    @property
    def ports(self) -> list[int]:
        """Every node's port, the first primaries first."""
        return list(self._servers)

    def __repr__(self) -> str:  # never the password
        return f"LocalRedisCluster(ports={self.ports})"

    def primaries(self) -> list[Address]:
        """The primaries serving slots now (not flagged as failing), by their first slot.

        Raises redis.ConnectionError if no node answers.
        """
        serving = [n for n in self.nodes() if n.is_primary and n.slots and n.working]
        return [n.address for n in sorted(serving, key=lambda n: min(n.slots))]

    def primary_of(self, key: str | bytes) -> Address:
        """The primary serving ``key``'s slot now.

        Raises LookupError if no working primary serves it (during a failover, say),
        redis.ConnectionError if no node answers.
        """
        slot = key_slot(key.encode() if isinstance(key, str) else key)
        for node in self.nodes():
            if node.is_primary and node.working and node.serves(slot):
                return node.address
        raise LookupError(f"no working primary serves slot {slot}")

    def node_client(self, port: int, **options: Any) -> redis.Redis:
        """A new plain client of the node on ``port``, with the password; the caller
        closes it. ``options`` go to redis.Redis (``decode_responses=True``, ...).

        Raises KeyError if no node of this cluster has that port.
        """
        self._server(port)
        return redis.Redis(host=LOOPBACK, port=port, password=self.password, **options)

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port`` and reap it, remembering the slots it served.

        Raises KeyError if no node of this cluster has that port.
        """
        server = self._server(port)
        if server.running():
            mine = [n for n in quietly(lambda: self._view(port)) or [] if "myself" in n.flags]
            self._slots_at_kill[port] = mine[0].slots if mine else ()
        server.kill()

    def wait_for_failover(self, dead_port: int, timeout_s: float = FAILOVER_TIMEOUT_S) -> Address:
        """Block until every live node reports ``cluster_state:ok`` and sees every slot
        served by a live primary, then return the primary now serving the slots that the
        node on ``dead_port`` (killed with :meth:`kill`) served.

        Raises ValueError if that node served no slots when it was killed, and
        AssertionError after ``timeout_s`` seconds.
        """
        slots = self._slots_at_kill.get(dead_port)
        if not slots:
            raise ValueError(f"the node on port {dead_port} was killed serving no slots")

        def failed_over() -> Address | None:
            live = self._live_ports()
            successors = set()
            for port in live:
                if self._cluster_info(port).get("cluster_state") != "ok":
                    return None
                serving = [n for n in self._view(port) if n.is_primary and n.slots]
                if any(n.address[1] not in live or not n.working for n in serving):
                    return None
                if sum(last - first + 1 for n in serving for first, last in n.slots) != SLOTS:
                    return None
                successors |= {n.address for n in serving if n.serves(slots[0][0])}
            if len(successors) != 1:
                return None
            (successor,) = successors
            info: dict[str, Any] = self._admin(successor[1]).info("replication")
            return successor if info.get("role") == "master" else None

        return wait_for(
            lambda: quietly(failed_over), timeout_s,
            f"the failover of the node on port {dead_port}", interval_s=0.1,
        )  # fmt: skip

    def restart(self, port: int, timeout_s: float = FORM_TIMEOUT_S) -> None:
        """Start the killed node on ``port`` again, from its folder (its AOF and
        ``nodes.conf``), and block until it has rejoined: ``cluster_state:ok`` on it,
        as a replica its link to its primary up, and no live node flags it as failing.
        A primary that was failed over comes back as its successor's replica.

        Raises KeyError if no node of this cluster has that port, RuntimeError if it
        runs, TransportError if it exits, AssertionError after ``timeout_s`` seconds.
        """
        server = self._server(port)
        server.start()
        server.wait_until_answering(self.password, timeout_s)
        self._slots_at_kill.pop(port, None)

        def rejoined() -> bool:
            if self._cluster_info(port).get("cluster_state") != "ok":
                return False
            me = next(n for n in self._view(port) if "myself" in n.flags)
            if not me.is_primary and not self._link_up(port):
                return False
            for other in self._live_ports():  # and every live node sees it as it sees itself
                seen = [n for n in self._view(other) if n.address[1] == port]
                if not seen or not seen[0].working or seen[0].primary_id != me.primary_id:
                    return False
            return True

        wait_for(
            lambda: quietly(rejoined), timeout_s, f"the node on port {port} to rejoin",
            interval_s=0.1,
        )  # fmt: skip

    def close(self) -> None:
        """Kill every node this launcher started, and reap them; safe to call twice.

        Raises subprocess.TimeoutExpired if one is not gone in time (after killing all).
        """
        for admin in self._admins.values():
            admin.close()
        self._admins.clear()
        kill_all(list(self._servers.values()))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
