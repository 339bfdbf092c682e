"""Names of the Redis keys delayline owns. Topics are streams named exactly like the topic."""

from __future__ import annotations

from delayline import ids

#: Producers append send and cancel records here; the scheduler trims what it has committed.
#: With inbound shards (``--inbound-shards N``, N > 1) it is still read: the default
#: stream for any producer that does not spread its records (see :func:`inbound_streams`).
INBOUND = "delayline:inbound"
#: Every record the scheduler refused, with its original fields and a ``reason``.
REJECTS = "delayline:rejects"
#: Counters (hash): accepted, cancels, delivered, dropped, duplicates, rejected.
STATS = "delayline:stats"
#: Delivery lateness histogram (hash): upper bound in ms ("+Inf" last) -> count.
LATENESS = "delayline:lateness"

#: Messages the scheduler emitted ahead of their time (sorted set: id by deliver_at_ms)...
OUTBOX = "delayline:outbox"
#: ...and their contents (hash: id -> packed message), until the pump delivers them.
OUTBOX_DATA = "delayline:outbox:data"
#: Rings the pump's bell (a list of at most one element) when an entry due soon
#: enters the outbox, so that an idle pump can block instead of polling.
OUTBOX_BELL = "delayline:outbox:bell"
#: Scheduler liveness (hash): query_id, batch_id, last_batch_at_ms, last_batch_ms,
#: updated_at_ms, and settled_at_ms (when the source last found nothing to do).
HEARTBEAT = "delayline:heartbeat"
#: What the running scheduler tells producers (hash): ``horizon_ms``, ``inbound_shards``.
CONFIG = "delayline:config"
#: When the scheduler's state has a timer due (sorted set of epoch ms, scored alike):
#: the source runs a batch only for new input or a due timer, never idle.
WAKEUPS = "delayline:wakeups"
#: Batch duration histogram (hash): upper bound in ms ("+Inf" last) -> count.
BATCH_DURATION = "delayline:batch_duration"

#: The minutes that have forecast counters (sorted set: minute -> minute since the epoch).
FORECAST_INDEX = "delayline:forecast"
#: How long a minute's forecast counters outlive its end (7 days, in s).
FORECAST_TTL_S = 7 * 24 * 3600

#: Listing requests for the running scheduler (list of "<listing id> <request JSON>").
LISTINGS = "delayline:listings"
#: How long a listing's status and rows are kept (s).
LISTING_TTL_S = 600

#: Status records are grouped in hashes by the minute their message is due.
JOURNAL_BUCKET_MS = 60_000
#: How long sink and ingest markers outlive their last write (7 days, in s).
MARKER_TTL_S = 7 * 24 * 3600


def inbound_shard(shard: int) -> str:
    """Inbound stream ``shard`` of a sharded inbound: ``delayline:inbound:{<shard>}``,
    the braces a Redis Cluster hash tag, so that each shard's keys can share a slot."""
    return f"{INBOUND}:{{{shard}}}"


#: A pattern (SCAN MATCH) for every shard's stream, whatever the shard count.
INBOUND_SHARDS_GLOB = f"{INBOUND}:{{*}}"


def inbound_streams(inbound_shards: int) -> list[str]:
    """Every inbound stream the scheduler reads: INBOUND, then, with more than one
    shard, each shard's (:func:`inbound_shard`)."""
    if inbound_shards <= 1:
        return [INBOUND]
    return [INBOUND, *(inbound_shard(shard) for shard in range(inbound_shards))]


def inbound_for(message_id: str, inbound_shards: int) -> str:
    """The inbound stream a producer appends ``message_id``'s send to: its shard's,
    chosen by a stable hash of the id, or INBOUND without shards."""
    if inbound_shards <= 1:
        return INBOUND
    return inbound_shard(ids.shard_of(message_id, inbound_shards))


def journal(deliver_at_ms: int) -> str:
    """Hash of id -> delivered_at_ms (or "cancelled" once a cancel dropped it)."""
    return f"delayline:delivered:{deliver_at_ms // JOURNAL_BUCKET_MS}"


def cancel_requests(deliver_at_ms: int) -> str:
    """Hash of id -> epoch ms at which the SDK recorded a cancel."""
    return f"delayline:cancelled:{deliver_at_ms // JOURNAL_BUCKET_MS}"


def rejected(deliver_at_ms: int) -> str:
    """Hash of id -> reason, for rejected sends whose id was well formed."""
    return f"delayline:rejected:{deliver_at_ms // JOURNAL_BUCKET_MS}"


def forecast(minute: int) -> str:
    """Hash of a due minute's pending counts: ``t:<topic>`` -> n, and ``u``, cancels
    not yet applied whose topic is unknown; ``forecast(minute) + ":s"`` holds
    <second of the minute> -> n. See lua/pending.lua."""
    return f"delayline:forecast:{minute}"


def listing(listing_id: str) -> str:
    """Hash of a listing's progress: state (queued, scanning, done, failed), done and
    total tasks of its scan, error; ``listing(id) + ":rows"`` holds its rows (JSON)."""
    return f"delayline:listing:{listing_id}"


def bucket_end_ms(deliver_at_ms: int) -> int:
    """When the status bucket holding ``deliver_at_ms`` ends (epoch ms)."""
    return (deliver_at_ms // JOURNAL_BUCKET_MS + 1) * JOURNAL_BUCKET_MS


def pause(run_token: str) -> str:
    """Set while a scheduler run drains: "requested", then "holding" once no batch runs."""
    return f"delayline:pause:{run_token}"


def sink_marker(query_id: str, partition: int, stage: str = "sink") -> str:
    """Hash (batch, written) recording how far a stage got in a query's partition.

    The stages are the sink, and the source's hand-off of near sends ("handoff").
    """
    return f"delayline:{stage}:{query_id}:{partition}"


def drain_marker(query_id: str) -> str:
    """Hash (state partition -> chunks appended) of the drain of a query's checkpoint."""
    return f"delayline:drain:{query_id}"


def ingest_marker(query_id: str, partition: int) -> str:
    """The last batch whose ingest counts were added, per query and source partition."""
    return f"delayline:ingest:{query_id}:{partition}"
