-- A library: shard_ns, the namespace of the shard whose keys ns names. A group's
-- lane (redis/keys.py's ShardKeys.lane: '<shard ns>${LANE_INFIX}<group>:') has its own
-- outbox, counters and status records, but shares its shard's fence, target and
-- topics set. ns is set by the including script before it.

local shard_ns = (string.gsub(ns, ':${LANE_INFIX}[^:]*:$', ':'))
