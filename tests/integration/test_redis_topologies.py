"""The launchers of replicated topologies, on real servers: a Redis Cluster of
primaries with replicas (delayline.testing.redis_cluster), and a primary with a
replica, with or without Sentinels (delayline.testing.replicated).

Each test owns its servers: the launchers are context managers, which kill
every server however the block ends.
"""

from __future__ import annotations

import socket
from pathlib import Path

import psutil
import pytest
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot
from redis.sentinel import Sentinel

from delayline.testing.redis_cluster import LocalRedisCluster
from delayline.testing.replicated import ReplicatedRedis
from delayline.testing.servers import Address


def key_on(cluster: LocalRedisCluster, primary: Address) -> str:
    """A key whose slot ``primary`` serves."""
    (node,) = [n for n in cluster.nodes() if n.address == primary]
    n = 0
    while not node.serves(key_slot(f"key-{n}".encode())):
        n += 1
    return f"key-{n}"


def written(cluster: LocalRedisCluster, key: str, value: str) -> Address:
    """Write ``key`` on the primary serving it, acknowledged by its replica; the primary."""
    primary = cluster.primary_of(key)
    with cluster.node_client(primary[1]) as node:
        node.set(key, value)
        assert node.execute_command("WAIT", 1, 1000) == 1, "the replica acknowledged it"
    return primary


def listens(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def server_children(under: Path | None = None) -> list[psutil.Process]:
    """The servers this process started, those running in a folder under ``under`` only
    if given (other tests' servers, a session's shared one say, are theirs)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "valkey" in child.name() and (
                under is None or Path(child.cwd()).is_relative_to(under)
            ):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def test_a_cluster_of_three_primaries_with_a_replica_each_serves_a_write_on_each(
    tmp_path: Path,
) -> None:
    with LocalRedisCluster(tmp_path) as cluster:
        primaries = cluster.primaries()
        assert len(set(primaries)) == 3
        replicas = [n for n in cluster.nodes() if not n.is_primary]
        by_id = {n.node_id: n.address for n in cluster.nodes()}
        assert sorted(by_id[r.primary_id or ""] for r in replicas) == sorted(primaries)
        hosts = ",".join(f"{host}:{port}" for host, port in primaries)
        assert cluster.url == f"redis+cluster://:{cluster.password}@{hosts}"
        assert cluster.password not in repr(cluster)
        keys = {primary: key_on(cluster, primary) for primary in primaries}
        for primary, key in keys.items():
            assert written(cluster, key, f"on {primary[1]}") == primary
        client = RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in primaries],
            password=cluster.password,
        )
        try:
            for primary, key in keys.items():
                assert client.get(key) == f"on {primary[1]}".encode()
        finally:
            client.close()
    assert not [port for port in cluster.ports if listens(port)]
    assert server_children(tmp_path) == []


def test_a_killed_primarys_replica_takes_its_slots_and_the_primary_rejoins_as_its_replica(
    tmp_path: Path,
) -> None:
    with LocalRedisCluster(tmp_path) as cluster:
        first = cluster.primaries()[0]
        key = key_on(cluster, first)
        assert written(cluster, key, "before the kill") == first
        nodes = cluster.nodes()
        first_id = next(n.node_id for n in nodes if n.address == first)
        (replica,) = [n.address for n in nodes if n.primary_id == first_id]

        cluster.kill(first[1])
        assert cluster.wait_for_failover(first[1], timeout_s=15) == replica
        assert cluster.primary_of(key) == replica
        assert first not in cluster.primaries()
        assert len(cluster.primaries()) == 3
        with cluster.node_client(replica[1]) as node:
            assert node.get(key) == b"before the kill"

        cluster.restart(first[1], timeout_s=15)
        with cluster.node_client(first[1], decode_responses=True) as node:
            replication = node.info("replication")
            assert (replication["role"], replication["master_port"]) == ("slave", replica[1])
            node.execute_command("READONLY")
            assert node.get(key) == "before the kill"
        assert cluster.primary_of(key) == replica


def test_a_failed_cluster_start_leaves_no_server_running(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="timed out"):
        LocalRedisCluster(tmp_path, primaries=1, replicas_per_primary=1, timeout_s=0.001)
    assert server_children(tmp_path) == []


def test_a_replica_promoted_by_hand_serves_what_the_primary_had(tmp_path: Path) -> None:
    with ReplicatedRedis(tmp_path) as servers:
        first, second = servers.ports
        assert servers.url == f"redis://:{servers.password}@127.0.0.1:{first},127.0.0.1:{second}"
        assert servers.primary() == ("127.0.0.1", first)
        with servers.node_client(first) as node:
            node.set("key", "before")
            assert node.execute_command("WAIT", 1, 1000) == 1

        assert servers.promote_replica() == ("127.0.0.1", second)
        assert servers.primary() == ("127.0.0.1", second)
        with servers.node_client(second) as node:
            assert node.get("key") == b"before"
            node.set("key", "after")
            assert node.execute_command("WAIT", 1, 1000) == 1, "the former primary replicates"
        with servers.node_client(first) as node:
            assert node.execute_command("ROLE")[0] == b"slave"
            assert node.get("key") == b"after"
        with pytest.raises(RuntimeError, match="without Sentinels"):
            _ = servers.sentinel_url
    assert server_children(tmp_path) == []


def test_the_sentinels_fail_a_killed_primary_over_to_its_replica(tmp_path: Path) -> None:
    with ReplicatedRedis(tmp_path, sentinels=True) as servers:
        first, second = servers.ports
        hosts = ",".join(f"127.0.0.1:{port}" for port in servers.sentinel_ports)
        assert servers.sentinel_url == f"redis+sentinel://:{servers.password}@{hosts}/delayline"
        with servers.node_client(first) as node:
            node.set("key", "before the kill")
            assert node.execute_command("WAIT", 1, 1000) == 1
        assert servers.kill_primary() == ("127.0.0.1", first)

        assert servers.wait_for_sentinel_failover(timeout_s=15) == ("127.0.0.1", second)
        assert servers.primary() == ("127.0.0.1", second)
        sentinel = Sentinel(
            [("127.0.0.1", port) for port in servers.sentinel_ports],
            sentinel_kwargs={"password": servers.password}, password=servers.password,
        )  # fmt: skip
        primary = sentinel.master_for("delayline", socket_timeout=2)
        try:
            assert primary.get("key") == b"before the kill"
        finally:
            primary.close()
            for client in sentinel.sentinels:
                client.close()
        # The password is in files private to the user, and on no command line.
        assert all(path.stat().st_mode & 0o077 == 0 for path in tmp_path.glob("*/*.conf"))
        assert all(path.stat().st_mode & 0o077 == 0 for path in tmp_path.glob("*/*.log"))
        assert not [p for p in server_children() if servers.password in " ".join(p.cmdline())]
        assert len(server_children(tmp_path)) == 4, "the promoted replica and three Sentinels"
    assert server_children(tmp_path) == []
