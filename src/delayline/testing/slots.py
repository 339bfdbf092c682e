"""Placing delayline's Redis shards on a local cluster's primaries, one shard per
primary in turn, as an operator of a cluster for delayline would (docs/scaling.md,
"Placing the shards"): each shard's keys share one hash slot, and an empty slot
moves to another primary with a few CLUSTER SETSLOT calls.

Importing this module needs redis-py.
"""

from __future__ import annotations

from typing import Any

import redis
from redis.crc import key_slot

from delayline.redis import keys
from delayline.testing import wait_for
from delayline.testing.redis_cluster import LocalRedisCluster
from delayline.testing.servers import Address

#: How long every node may take to agree on a moved slot (s).
AGREE_TIMEOUT_S = 20.0


def shard_slots(shards: int) -> list[int]:
    """The hash slot of each shard's keys, for a layout of ``shards`` shards."""
    return [key_slot(shard.namespace.encode()) for shard in keys.layout(shards)]


def spread_shards(cluster: LocalRedisCluster, shards: int) -> dict[int, Address]:
    """Move the slot of shard ``n`` to the ``n mod P``-th primary (of P, by their first
    slot), unless it is there; return each shard's primary. Raises ValueError if a
    slot to move holds keys (start delayline after placing its shards)."""
    primaries = cluster.primaries()
    placed: dict[int, Address] = {}
    for shard, slot in enumerate(shard_slots(shards)):
        target = primaries[shard % len(primaries)]
        if cluster.primary_of(keys.layout(shards)[shard].namespace) != target:
            move_empty_slot(cluster, slot, target)
        placed[shard] = target
    return placed


def move_empty_slot(cluster: LocalRedisCluster, slot: int, target: Address) -> None:
    """Serve ``slot`` from the primary at ``target``: IMPORTING on the target, MIGRATING
    on the source, then NODE on the target, the source and every other primary, as
    Redis Cluster's resharding does for a slot with no keys; wait until every live
    node agrees. Raises ValueError if the slot holds keys."""
    nodes = {node.address: node for node in cluster.nodes()}
    source = next(n for n in nodes.values() if n.is_primary and n.working and n.serves(slot))
    destination = nodes[target]
    with (
        cluster.node_client(source.address[1]) as from_client,
        cluster.node_client(target[1]) as to_client,
    ):
        if int(from_client.execute_command("CLUSTER COUNTKEYSINSLOT", slot)):
            raise ValueError(f"slot {slot} holds keys: move it with valkey-cli --cluster reshard")
        to_client.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source.node_id)
        from_client.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", destination.node_id)
        to_client.execute_command("CLUSTER SETSLOT", slot, "NODE", destination.node_id)
        from_client.execute_command("CLUSTER SETSLOT", slot, "NODE", destination.node_id)
    for node in nodes.values():
        if node.is_primary and node.working and node.address not in (target, source.address):
            with cluster.node_client(node.address[1]) as other:
                other.execute_command("CLUSTER SETSLOT", slot, "NODE", destination.node_id)

    wait_for(
        lambda: all(owner == target[1] for owner in _owners(cluster, slot)),
        AGREE_TIMEOUT_S,
        f"every node to serve slot {slot} from {target}",
    )


def _owners(cluster: LocalRedisCluster, slot: int) -> list[int | None]:
    """The port of the primary that each node that answers says serves ``slot``."""
    found: list[int | None] = []
    for port in cluster.ports:
        with cluster.node_client(port) as client:
            try:
                reply: list[Any] = client.execute_command("CLUSTER SLOTS")
            except redis.ConnectionError:  # a node killed by the test
                continue
        owner = [int(p[1]) for first, last, p, *_ in reply if int(first) <= slot <= int(last)]
        found.append(owner[0] if owner else None)
    return found
