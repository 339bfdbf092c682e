"""How many Redis shards ``delayline run`` uses, and how they fall on a cluster's
primaries: the checkpoint's count, or for a new one the number of a cluster's
primaries (at least MIN_CLUSTER_SHARDS), 1 on one server."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from delayline.errors import ConfigurationError
from delayline.redis import keys
from delayline.redis.connection import RedisConnection
from delayline.scheduler.pinning import recorded_settings
from delayline.scheduler.settings import SchedulerSettings

#: The fewest Redis shards on a cluster: each shard's keys share a hash slot, and the
#: unsharded layout's (one shard) do not.
MIN_CLUSTER_SHARDS = 2


def with_redis_shards(
    settings: SchedulerSettings, connection: RedisConnection, *, auto: bool
) -> SchedulerSettings:
    """``settings`` with their Redis shard count: as given, or with ``auto`` (no
    ``--inbound-shards``) the checkpoint's or a new one's (see the module). Raises
    ConfigurationError for fewer than MIN_CLUSTER_SHARDS on a cluster, and
    ConnectError if the cluster does not answer."""
    if auto:
        settings = replace(settings, inbound_shards=_auto_shards(settings, connection))
    if connection.cluster and settings.inbound_shards < MIN_CLUSTER_SHARDS:
        raise ConfigurationError(
            f"--inbound-shards {settings.inbound_shards} on a Redis Cluster: the unsharded "
            "keys share no hash slot, which the delivery scripts need; use "
            f"--inbound-shards {MIN_CLUSTER_SHARDS} or more (a new checkpoint: see "
            "docs/scaling.md, Redis shards)"
        )
    return settings


def shard_placement(
    settings: SchedulerSettings, connection: RedisConnection, echo: Callable[[str], None]
) -> str:
    """How the Redis shards fall on a cluster's primaries, said in a few words; with a
    warning when some primary holds more of them than an even spread would."""
    shards = settings.inbound_shards
    owners = connection.primaries_of([shard.outbox for shard in keys.layout(shards)])
    primaries = connection.primary_count()
    busiest = max(Counter(owners).values())
    if busiest > -(-shards // primaries):
        echo(
            f"warning: {busiest} of the {shards} Redis shards are on one primary; place each "
            "shard's slot on a primary of its own (docs/scaling.md, Placing the shards)"
        )
    return f"{shards} shards on {len(set(owners))} of {primaries} primaries"


def _auto_shards(settings: SchedulerSettings, connection: RedisConnection) -> int:
    """The checkpoint's Redis shard count, or for a new one the number of a cluster's
    primaries (at least MIN_CLUSTER_SHARDS; 1 on one server). Raises ConnectError if the
    cluster does not answer."""
    recorded = recorded_settings(settings.data_dir).get("inbound_shards")
    if recorded is not None:
        return int(recorded)
    return max(MIN_CLUSTER_SHARDS, connection.primary_count()) if connection.cluster else 1
