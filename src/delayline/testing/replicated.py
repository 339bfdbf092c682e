"""A real replicated Redis on loopback for tests and benchmarks: one primary and one
replica, optionally watched by three Sentinels, from the embedded Valkey binary
(:func:`delayline.redis.embedded.server_executable`).

Both servers require a random password (and replicate with it) and keep an AOF
(``appendfsync everysec`` unless told otherwise, no RDB snapshots). The
Sentinels require the same password (of their clients and of each other), and
fail the primary over once a quorum of 2 has not heard from it for
``down_after_ms``. Each server has a folder of its own under the base folder:
its configuration (mode 0600; a Sentinel rewrites its ``sentinel.conf``), its
data and ``server.log``. Importing this module needs redis-py.
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any, Self

import redis

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

#: How many Sentinels watch the primary, and how many must agree that it is down.
SENTINELS, QUORUM = 3, 2
#: The name the Sentinels monitor the primary by, unless told otherwise.
MASTER_NAME = "delayline"
#: How long starting (up to the replica's link, and the Sentinels knowing each other) may take (s).
START_TIMEOUT_S = 30.0
#: How long a failover may take by default (s): down-after, an election, the promotion.
FAILOVER_TIMEOUT_S = 20.0


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that nothing holds on 127.0.0.1 right now."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports and port_is_free(port):
            ports.append(port)
    return ports


class ReplicatedRedis:
    """A started primary and replica, with three Sentinels if ``sentinels``, their
    folders under ``base_dir``; a context manager, which kills every server however
    the block ends. The constructor blocks until the replica's link is up and every
    Sentinel knows the replica and the other Sentinels.

    ``down_after_ms`` and ``failover_timeout_ms`` (ms) are the Sentinels'
    ``down-after-milliseconds`` and ``failover-timeout`` for ``master_name``;
    ``appendfsync`` is ``always``, ``everysec`` or ``no``.

    Raises ValueError for a bad ``master_name`` or ``appendfsync``, FileExistsError
    if a server's folder exists, TransportError if a server exits while starting, and
    AssertionError after ``timeout_s`` seconds; the servers started are killed first.
    """

    def __init__(
        self,
        base_dir: Path,
        *,
        sentinels: bool = False,
        master_name: str = MASTER_NAME,
        down_after_ms: int = 1_000,
        failover_timeout_ms: int = 5_000,
        appendfsync: str = "everysec",
        timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        if not re.fullmatch(r"[A-Za-z0-9._-]+", master_name):
            raise ValueError(f"a master name is letters, digits, '.', '_' and '-': {master_name!r}")
        if appendfsync not in {"always", "everysec", "no"}:
            raise ValueError(f"appendfsync is always, everysec or no, not {appendfsync!r}")
        self.password = new_password()
        self.master_name = master_name
        self._nodes: dict[int, ServerProcess] = {}
        self._sentinels: list[ServerProcess] = []
        self._admins: dict[int, redis.Redis] = {}
        ports = free_ports(2 + (SENTINELS if sentinels else 0))
        self._first_ports = (ports[0], ports[1])
        self._former_primary = ports[0]
        try:
            for port in self._first_ports:
                config = self._node_config(port, base_dir / f"node-{port}", appendfsync)
                self._nodes[port] = ServerProcess(base_dir / f"node-{port}", port, config)
            for server in self._nodes.values():
                server.wait_until_answering(self.password, timeout_s)
            replica = ports[1]
            wait_for(
                lambda: quietly(lambda: self._synced(replica, ports[0])), timeout_s,
                f"the replica on port {replica} to sync", interval_s=0.05,
            )  # fmt: skip
            for port in ports[2:]:
                directory = base_dir / f"sentinel-{port}"
                config = self._sentinel_config(port, directory, down_after_ms, failover_timeout_ms)
                self._sentinels.append(ServerProcess(directory, port, config, sentinel=True))
            for sentinel in self._sentinels:
                sentinel.wait_until_answering(self.password, timeout_s)
            wait_for(
                lambda: quietly(self._sentinels_ready), timeout_s,
                "the Sentinels to know the replica and each other", interval_s=0.1,
            )  # fmt: skip
        except BaseException:
            self.close()
            raise

    def _node_config(self, port: int, directory: Path, appendfsync: str) -> str:
        lines = [
            f"port {port}", f"bind {LOOPBACK}", "protected-mode yes",
            f"requirepass {quoted(self.password)}", f"masterauth {quoted(self.password)}",
            "appendonly yes", f"appendfsync {appendfsync}", 'save ""',
            "repl-diskless-sync-delay 0", f"dir {quoted(str(directory))}",
        ]  # fmt: skip
        if port != self._first_ports[0]:
            lines.append(f"replicaof {LOOPBACK} {self._first_ports[0]}")
        return "\n".join(lines) + "\n"

    def _sentinel_config(
        self, port: int, directory: Path, down_after_ms: int, failover_timeout_ms: int
    ) -> str:
        name, password = self.master_name, quoted(self.password)
        lines = [
            f"port {port}", f"bind {LOOPBACK}", f"dir {quoted(str(directory))}",
            f"requirepass {password}", f"sentinel sentinel-pass {password}",
            "sentinel resolve-hostnames no",
            f"sentinel monitor {name} {LOOPBACK} {self._first_ports[0]} {QUORUM}",
            f"sentinel auth-pass {name} {password}",
            f"sentinel down-after-milliseconds {name} {down_after_ms}",
            f"sentinel failover-timeout {name} {failover_timeout_ms}",
        ]  # fmt: skip
        return "\n".join(lines) + "\n"

    # --- asking the servers ---------------------------------------------------------------

    def _admin(self, port: int) -> redis.Redis:
        """This launcher's own client of a server or Sentinel (str replies)."""
        if port not in self._admins:
            self._admins[port] = client(port, self.password, decode_responses=True)
        return self._admins[port]

    def _role(self, port: int) -> str:
        return str(command(self._admin(port), "ROLE")[0])

    def _link_up(self, port: int) -> bool:
        info: dict[str, Any] = self._admin(port).info("replication")
        return info.get("role") == "slave" and info.get("master_link_status") == "up"

    def _synced(self, replica: int, primary: int) -> bool:
        """The replica's link is up and the primary's ROLE lists it: what delayline's
        clients read to decide that a write waits for a replica (a replica whose link is
        up may not be listed yet, and a client that reads ROLE then waits for none)."""
        if not self._link_up(replica):
            return False
        role = command(self._admin(primary), "ROLE")
        return any(int(listed[1]) == replica for listed in role[2])

    def _sentinels_ready(self) -> bool:
        for sentinel in self._sentinels:
            reply = command(self._admin(sentinel.port), "SENTINEL", "MASTER", self.master_name)
            # A map in RESP3, a flat list of names and values in RESP2.
            state = (
                reply
                if isinstance(reply, dict)
                else dict(zip(reply[::2], reply[1::2], strict=True))
            )
            others = int(state.get("num-other-sentinels", 0))
            if state.get("flags") != "master" or others != SENTINELS - 1:
                return False
            if int(state.get("num-slaves", 0)) < 1:
                return False
        return True

    def _running(self) -> list[int]:
        return [port for port, server in self._nodes.items() if server.running()]

    def _with_role(self, role: str) -> list[int]:
        return [port for port in self._running() if quietly(partial(self._role, port)) == role]

    # --- the public API -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``redis://:<password>@127.0.0.1:<primary>,127.0.0.1:<replica>``: both
        servers, the primary as started first."""
        hosts = ",".join(f"{LOOPBACK}:{port}" for port in self._first_ports)
        return f"redis://:{self.password}@{hosts}"

    @property
    def sentinel_url(self) -> str:
        """``redis+sentinel://:<password>@127.0.0.1:<s1>,...,127.0.0.1:<s3>/<master name>``.

        Raises RuntimeError if it was started without Sentinels.
        """
        if not self._sentinels:
            raise RuntimeError("these servers were started without Sentinels")
        hosts = ",".join(f"{LOOPBACK}:{sentinel.port}" for sentinel in self._sentinels)
        return f"redis+sentinel://:{self.password}@{hosts}/{self.master_name}"

    @property
    def ports(self) -> list[int]:
        """The two servers' ports, the first primary first."""
        return list(self._first_ports)

    @property
    def sentinel_ports(self) -> list[int]:
        return [sentinel.port for sentinel in self._sentinels]

    def __repr__(self) -> str:  # never the password
        return f"ReplicatedRedis(ports={self.ports}, sentinel_ports={self.sentinel_ports})"

    def node_client(self, port: int, **options: Any) -> redis.Redis:
        """A new plain client of the server or Sentinel on ``port``, with the password;
        the caller closes it. ``options`` go to redis.Redis.

        Raises KeyError if no server or Sentinel of these has that port.
        """
        if port not in [*self.ports, *self.sentinel_ports]:
            raise KeyError(f"no server of these on port {port}")
        return redis.Redis(host=LOOPBACK, port=port, password=self.password, **options)

    def primary(self) -> Address:
        """The running server whose ROLE is ``master``.

        Raises LookupError unless exactly one is (none, during a failover).
        """
        primaries = self._with_role("master")
        if len(primaries) != 1:
            raise LookupError(f"not one primary among the running servers: {primaries}")
        return (LOOPBACK, primaries[0])

    def kill_primary(self) -> Address:
        """SIGKILL the current primary and reap it; return its address.

        Raises LookupError as :meth:`primary` does.
        """
        address = self.primary()
        self._nodes[address[1]].kill()
        self._former_primary = address[1]
        return address

    def promote_replica(self, timeout_s: float = FAILOVER_TIMEOUT_S) -> Address:
        """Promote the replica by hand (``REPLICAOF NO ONE``) and return its address. A
        primary still running is made its replica, and waited for until its link is up.

        Raises LookupError if no running server is a replica, AssertionError if the
        former primary's link is not up within ``timeout_s`` seconds.
        """
        replicas = self._with_role("slave")
        if not replicas:
            raise LookupError("no running server is a replica")
        promoted = replicas[0]
        command(self._admin(promoted), "REPLICAOF", "NO", "ONE")
        for port in self._with_role("master"):
            if port != promoted:
                self._former_primary = port
                command(self._admin(port), "REPLICAOF", LOOPBACK, promoted)
                wait_for(
                    partial(quietly, partial(self._synced, port, promoted)), timeout_s,
                    f"the former primary on port {port} to replicate", interval_s=0.05,
                )  # fmt: skip
        return (LOOPBACK, promoted)

    def wait_for_sentinel_failover(self, timeout_s: float = FAILOVER_TIMEOUT_S) -> Address:
        """Block until every running Sentinel names a new primary for the master name,
        the same one, and that server's ROLE is ``master``; return its address. The
        former primary is the one :meth:`kill_primary` killed, else the first one.

        Raises RuntimeError without Sentinels, AssertionError after ``timeout_s`` seconds.
        """
        if not self._sentinels:
            raise RuntimeError("these servers were started without Sentinels")

        def failed_over() -> Address | None:
            named = set()
            for sentinel in self._sentinels:
                if sentinel.running():
                    reply = command(
                        self._admin(sentinel.port), "SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                        self.master_name,
                    )  # fmt: skip
                    if not reply:
                        return None
                    named.add((str(reply[0]), int(reply[1])))
            if len(named) != 1:
                return None
            (host, port), *_ = named
            if port == self._former_primary or port not in self._running():
                return None
            return (host, port) if self._role(port) == "master" else None

        return wait_for(
            lambda: quietly(failed_over), timeout_s, "the Sentinels' failover", interval_s=0.1
        )

    def close(self) -> None:
        """Kill every server and Sentinel this launcher started, and reap them; safe to
        call twice.

        Raises subprocess.TimeoutExpired if one is not gone in time (after killing all).
        """
        for admin in self._admins.values():
            admin.close()
        self._admins.clear()
        kill_all([*self._sentinels, *self._nodes.values()])

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
