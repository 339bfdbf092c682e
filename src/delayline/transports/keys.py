"""Names of the Redis keys delayline owns. Topics are streams named exactly like the topic."""

from __future__ import annotations

#: Producers append send and cancel records here; the scheduler trims what it has committed.
INBOUND = "delayline:inbound"
#: Every record the scheduler refused, with its original fields and a ``reason``.
REJECTS = "delayline:rejects"
#: Counters (hash): accepted, cancels, delivered, dropped, duplicates, rejected.
STATS = "delayline:stats"
#: Delivery lateness histogram (hash): upper bound in ms ("+Inf" last) -> count.
LATENESS = "delayline:lateness"

#: Journal buckets group delivered ids by the minute they were due.
JOURNAL_BUCKET_MS = 60_000


def journal(deliver_at_ms: int) -> str:
    """Hash of id -> delivered_at_ms for messages due in the same minute."""
    return f"delayline:delivered:{deliver_at_ms // JOURNAL_BUCKET_MS}"


def pause(run_token: str) -> str:
    """Set while a scheduler run drains: "requested", then "holding" once no batch runs."""
    return f"delayline:pause:{run_token}"


def sink_marker(query_id: str, partition: int) -> str:
    """Hash (batch, written) recording how far the sink got in a query's partition."""
    return f"delayline:sink:{query_id}:{partition}"


def ingest_marker(query_id: str, partition: int) -> str:
    """The last batch whose ingest counts were added, per query and source partition."""
    return f"delayline:ingest:{query_id}:{partition}"
