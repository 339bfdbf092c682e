"""Names of the Redis keys delayline owns. Topics are streams named exactly like the topic."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from delayline import ids
from delayline.groups import DEFAULT_GROUP
from delayline.redis.commands import Command

T = TypeVar("T")

#: Producers append send and cancel records here; the scheduler trims what it has committed.
#: With inbound shards (``--inbound-shards N``, N > 1) it is still read: the default
#: stream for any producer that does not spread its records (see :func:`inbound_streams`).
INBOUND = "delayline:inbound"
#: Scheduler liveness (hash): query_id, batch_id, last_batch_at_ms, last_batch_ms,
#: updated_at_ms, and settled_at_ms (when the source last found nothing to do).
HEARTBEAT = "delayline:heartbeat"
#: HEARTBEAT's field that every beat sets (epoch ms): how liveness is told.
BEAT_FIELD = "updated_at_ms"
#: What the running scheduler tells producers (hash): ``horizon_ms``, ``inbound_shards``,
#: ``layout_shards`` (the shard count the delivery keys are laid out for) and
#: SHARD_HISTORY (every count they have been laid out for).
CONFIG = "delayline:config"
#: The field of CONFIG that lists every Redis shard count the delivery keys have been
#: laid out for, the current one last ("1,4,2"; see :func:`shard_history`).
SHARD_HISTORY = "shard_history"
#: When the scheduler's state has a timer due (sorted set of epoch ms, scored alike):
#: the source runs a batch only for new input or a due timer, never idle.
WAKEUPS = "delayline:wakeups"
#: Batch duration histogram (hash): upper bound in ms ("+Inf" last) -> count.
BATCH_DURATION = "delayline:batch_duration"

#: How long a minute's forecast counters outlive its end (7 days, in s).
FORECAST_TTL_S = 7 * 24 * 3600
#: What a minute's forecast hash name takes to name its per-second hash (lua/forecast.lua).
FORECAST_SECONDS_SUFFIX = ":s"

#: How long a minute's delivery history outlives its end (25 hours, in s): the last
#: day is always there, and a Redis holds at most about 1,500 minutes of it a shard.
HISTORY_TTL_S = 25 * 3600

#: How long a topic's rate-slot counters outlive their second (s; lua/delivery_limits.lua).
RATE_SLOTS_TTL_S = 120

#: The groups besides the default one (hash: name -> group as delayline/groups.py
#: stores it). The braces are a Redis Cluster hash tag shared with GROUP_TOKENS.
GROUPS = "delayline:{groups}"
#: Each group's token, by its digest (hash: SHA-256 hex -> group name).
GROUP_TOKENS = "delayline:{groups}:tokens"
#: The groups whose lanes a scheduler pumps (hash: name -> epoch ms it started), which
#: ``create_group`` waits for while a scheduler runs.
GROUP_LANES = "delayline:{groups}:lanes"


def group_sends(group: str, second: int) -> str:
    """A group's sends in a second (epoch s), for its rate quota (lua/take_sends.lua)."""
    return f"{GROUPS}:sent:{group}:{second}"


#: Listing requests for the running scheduler (list of "<listing id> <request JSON>").
LISTINGS = "delayline:listings"
#: How long a listing's status and rows are kept (s).
LISTING_TTL_S = 600

#: The rejects stream of each shard keeps about this many entries, the newest; the
#: rest are counted (``rejects_trimmed``) and trimmed.
REJECTS_MAX_LEN = 10_000

#: How long the status records of a message (delivered, cancelled, rescheduled,
#: rejected, a cancel request past its due minute) are kept by default (ms): the
#: window in which a repeated id is delivered once and ``status`` answers exactly.
#: About 100 bytes of Redis per message, so 10 minutes at 5,000 msg/s is 300 MB.
JOURNAL_RETENTION_MS = 600_000

#: Status records are grouped in hashes by the second their message is due. A
#: hash is freed whole when it expires: a minute's (300,000 ids at 5,000 msg/s)
#: stalled Redis's thread for 40-80 ms even with lazy freeing, a second's for 1.
JOURNAL_BUCKET_MS = 1_000
#: Cancel requests are grouped by the minute their message is due: they are few,
#: and each delivery asks once per hash whether it exists.
CANCELS_BUCKET_MS = 60_000
#: How long sink and ingest markers outlive their last write (7 days, in s).
MARKER_TTL_S = 7 * 24 * 3600


#: The scheduler's lease (string "<token> <owner>", expiring after the lease's ttl): the
#: one scheduler that holds it delivers (redis/lease.py). The braces are a Redis
#: Cluster hash tag shared with LEASE_TOKEN, so that one script touches both.
LEASE = "delayline:{lease}"
#: The last fencing token a scheduler took the lease with (an integer that only grows).
LEASE_TOKEN = "delayline:{lease}:token"


def inbound_shard(shard: int) -> str:
    """Inbound stream ``shard`` of a sharded inbound: ``delayline:inbound:{<shard>}``,
    the braces a Redis Cluster hash tag, so that each shard's keys can share a slot."""
    return f"{INBOUND}:{{{shard}}}"


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


def listing(listing_id: str) -> str:
    """Hash of a listing's progress: state (queued, scanning, done, failed), done and
    total tasks of its scan, error; ``listing(id) + ":rows"`` holds its rows (JSON)."""
    return f"delayline:listing:{listing_id}"


def pause(run_token: str) -> str:
    """Set while a scheduler run drains: "requested", then "holding" once no batch runs."""
    return f"delayline:pause:{run_token}"


def drain_marker(query_id: str) -> str:
    """Hash (state partition -> chunks appended) of the drain of a query's checkpoint.

    Its hash tag is the default inbound stream's name, so that on a Redis Cluster
    it shares that stream's slot, and a chunk and its count are one transaction."""
    return f"{{{INBOUND}}}:drain:{query_id}"


#: The namespace of the unsharded layout: every delivery key is this and a name.
NAMESPACE = "delayline:"
#: What a group's lane adds to its shard's namespace, before ``<group>:``
#: (:meth:`ShardKeys.lane`; lua/shard_ns.lua takes it off).
LANE_INFIX = "g:"


@dataclass(frozen=True, slots=True)
class ShardKeys:
    """The keys of one Redis shard's delivery side: its outbox, status records, counters
    and markers, each ``namespace`` and a name.

    The unsharded layout (:data:`UNSHARDED`) has the names above; shard ``n`` of a
    sharded one has ``delayline:{n}:`` names, the braces a Redis Cluster hash tag
    shared with its inbound stream (:func:`inbound_shard`), so that every script
    that runs in a shard touches one hash slot.
    """

    namespace: str
    #: The inbound stream in the shard's slot: cascades and far sends are appended here.
    inbound: str
    #: A group's lane: the namespace of its shard, whose fence, target and topics set
    #: it shares ("": these keys are a shard's own).
    shard_namespace: str = ""

    def lane(self, group: str) -> ShardKeys:
        """The keys of ``group``'s delivery lane in this shard: its own outbox, status
        records, counters, limits and markers, under ``<namespace>g:<group>:`` (see
        LANE_INFIX; so in the shard's Redis Cluster slot), with the shard's inbound
        stream, fence, target and topics set. The default group's lane is the shard."""
        if group == DEFAULT_GROUP:
            return self
        return ShardKeys(f"{self.namespace}{LANE_INFIX}{group}:", self.inbound, self.namespace)

    @property
    def _shard(self) -> str:
        return self.shard_namespace or self.namespace

    @property
    def outbox(self) -> str:
        """Messages emitted ahead of their time (sorted set: id by deliver_at_ms)."""
        return self.namespace + "outbox"

    @property
    def outbox_data(self) -> str:
        """The outbox's contents (hash: id -> packed message, see lua/outbox.lua)."""
        return self.namespace + "outbox:data"

    @property
    def outbox_bell(self) -> str:
        """Rung (a list of at most one element) when an entry due soon enters the
        outbox, so that an idle pump can block instead of polling."""
        return self.namespace + "outbox:bell"

    @property
    def stats(self) -> str:
        """Counters (hash): accepted, cancels, delivered, dropped, duplicates, rejected."""
        return self.namespace + "stats"

    @property
    def lateness(self) -> str:
        """Delivery lateness histogram (hash): upper bound in ms ("+Inf" last) -> count."""
        return self.namespace + "lateness"

    @property
    def rejects(self) -> str:
        """Every record the scheduler refused, with its original fields and a ``reason``."""
        return self.namespace + "rejects"

    @property
    def ready(self) -> str:
        """A sharded layout's due messages on their way to their topics (stream; see
        lua/topic_writes.lua): the topic entry's fields and ``topic``."""
        return self.namespace + "ready"

    @property
    def target(self) -> str:
        """Where the shard's topics are when not in Redis (string, ``kafka:<brokers>``;
        absent for Redis streams), set by the scheduler: its due messages then go
        through the ready stream, which the pump writes to them."""
        return self._shard + "target"

    @property
    def blocked(self) -> str:
        """Topics outside Redis whose messages wait (hash: topic -> ms its oldest has
        waited), as the shard's pump last saw them; it expires unless renewed."""
        return self.namespace + "blocked"

    @property
    def topics(self) -> str:
        """The topic streams the shard's deliveries wrote to (set), which the scheduler
        trims by their retention (see delayline/retention.py)."""
        return self._shard + "topics"

    @property
    def limits(self) -> str:
        """Topics' delivery limits (hash: topic -> limit as delayline/limits.py stores
        it, with this shard's share of the rate)."""
        return self.namespace + "limits"

    def rate_slots(self, topic: str) -> str:
        """The first second not known full of ``topic``'s rate slots (string); with
        ``:<second>`` after it, the slots of that second taken (lua/delivery_limits.lua)."""
        return f"{self.namespace}rate:{topic}"

    @property
    def fence(self) -> str:
        """The highest fencing token that has taken the shard over (an integer; see
        redis/lease.py): the scheduler's shard scripts refuse a call with a lower one."""
        return self._shard + "fence"

    @property
    def forecast_index(self) -> str:
        """The minutes that have forecast counters (sorted set: minute -> minute)."""
        return self.namespace + "forecast"

    def journal(self, deliver_at_ms: int) -> str:
        """Hash of id -> delivered_at_ms (or "cancelled" once a cancel dropped it)."""
        return f"{self.namespace}delivered:{deliver_at_ms // JOURNAL_BUCKET_MS}"

    def cancel_requests(self, deliver_at_ms: int) -> str:
        """Hash of id -> epoch ms at which the SDK recorded a cancel."""
        return f"{self.namespace}cancelled:{deliver_at_ms // CANCELS_BUCKET_MS}"

    def rejected(self, deliver_at_ms: int) -> str:
        """Hash of id -> reason, for rejected sends whose id was well formed."""
        return f"{self.namespace}rejected:{deliver_at_ms // JOURNAL_BUCKET_MS}"

    def forecast(self, minute: int) -> str:
        """Hash of a due minute's pending counts, its fields as :mod:`delayline.forecast`
        names them (per topic, and cancels of unknown topic). See lua/forecast.lua."""
        return f"{self.namespace}forecast:{minute}"

    def history(self, minute: int) -> str:
        """Hash of what was delivered in a minute (by Redis's clock), its fields as
        :mod:`delayline.history` names them. See lua/topic_writes.lua."""
        return f"{self.namespace}history:{minute}"

    def forecast_seconds(self, minute: int) -> str:
        """Hash of a due minute's pending counts per second: <second of the minute> -> n."""
        return self.forecast(minute) + FORECAST_SECONDS_SUFFIX

    def sink_marker(self, query_id: str, partition: int, stage: str = "sink") -> str:
        """Hash (batch, written) recording how far a stage got in a query's partition.

        The stages are the sink, and the source's hand-off of near sends ("handoff").
        """
        return f"{self.namespace}{stage}:{query_id}:{partition}"

    def ingest_marker(self, query_id: str, partition: int) -> str:
        """The last batch whose ingest counts were added, per query and source partition."""
        return f"{self.namespace}ingest:{query_id}:{partition}"


#: The layout without shards (``--inbound-shards 1``), and the names a sharded
#: deployment still reads its older counters and rejects from.
UNSHARDED = ShardKeys(NAMESPACE, INBOUND)


def shard_keys(shard: int) -> ShardKeys:
    """The keys of shard ``shard`` of a sharded layout (``delayline:{<shard>}:...``)."""
    return ShardKeys(f"{NAMESPACE}{{{shard}}}:", inbound_shard(shard))


def layout(shards: int, group: str = DEFAULT_GROUP) -> list[ShardKeys]:
    """The shards delayline writes to with ``shards`` Redis shards: UNSHARDED alone for
    one, or else each shard's keys (:func:`shard_keys`); each as ``group``'s lane
    (:meth:`ShardKeys.lane`)."""
    if shards <= 1:
        return [UNSHARDED.lane(group)]
    return [shard_keys(shard).lane(group) for shard in range(shards)]


def read_layout(shards: int, group: str = DEFAULT_GROUP) -> list[ShardKeys]:
    """The shards whose counters, forecast and rejects a reader of ``group`` adds up:
    UNSHARDED (what was counted before sharding), then each shard's; each as the
    group's lane."""
    if shards <= 1:
        return [UNSHARDED.lane(group)]
    return [UNSHARDED.lane(group), *layout(shards, group)]


def shard_history(recorded: bytes | str | None, current: int) -> tuple[int, ...]:
    """The shard counts of a SHARD_HISTORY field, ``current`` last and once."""
    text = recorded.decode() if isinstance(recorded, bytes) else recorded
    counts = [int(part) for part in text.split(",")] if text else []
    return (*(count for count in counts if count != current), current)


def shard_history_text(history: Iterable[int]) -> str:
    """The SHARD_HISTORY field that :func:`shard_history` reads back."""
    return ",".join(str(count) for count in history)


def topic_written(topic: str) -> str:
    """The prefix of the hashes (``<prefix>:<due minute>``: id -> 1) of the ids a sharded
    delivery wrote to ``topic``, in the topic's Redis Cluster slot (a topic has no
    braces, so its whole name is its hash tag)."""
    return f"{NAMESPACE}written:{{{topic}}}"


def forget_expired_minutes(shard: ShardKeys, now_ms: int) -> Command:
    """Take the minutes whose forecast counters expired off ``shard``'s index; the
    forecast does it as it reads, and the scheduler's trimmer every second, so that
    the index stays bounded with nobody reading it."""
    forgotten = (now_ms // 1000 - FORECAST_TTL_S) // 60
    return ("ZREMRANGEBYSCORE", shard.forecast_index, "-inf", f"({forgotten}")


def keys_of(message_id: str, shards: int, group: str = DEFAULT_GROUP) -> ShardKeys:
    """The shard holding ``message_id``'s outbox entry and status records (the shard of
    its inbound stream, :func:`inbound_for`), as the lane of its topic's ``group``."""
    if shards <= 1:
        return UNSHARDED.lane(group)
    return shard_keys(ids.shard_of(message_id, shards)).lane(group)


def by_shard(
    items: Iterable[T],
    shards: int,
    message_id: Callable[[T], str | None],
    group_of: Callable[[T], str] = lambda _: DEFAULT_GROUP,
) -> dict[ShardKeys, list[T]]:
    """``items`` grouped by the shard of their ``message_id`` (:func:`keys_of`) and the
    lane of their ``group_of``, each group in the items' order; an item without an id
    goes to the first shard."""
    found_lanes: dict[ShardKeys, list[T]] = {}
    for item in items:
        found, group = message_id(item), group_of(item)
        shard = layout(shards, group)[0] if found is None else keys_of(found, shards, group)
        found_lanes.setdefault(shard, []).append(item)
    return found_lanes


# The unsharded layout's names, by which most of the code and the tests know them.
OUTBOX = UNSHARDED.outbox
OUTBOX_DATA = UNSHARDED.outbox_data
OUTBOX_BELL = UNSHARDED.outbox_bell
STATS = UNSHARDED.stats
LATENESS = UNSHARDED.lateness
REJECTS = UNSHARDED.rejects
FORECAST_INDEX = UNSHARDED.forecast_index
journal = UNSHARDED.journal
cancel_requests = UNSHARDED.cancel_requests
rejected = UNSHARDED.rejected
forecast = UNSHARDED.forecast
forecast_seconds = UNSHARDED.forecast_seconds
sink_marker = UNSHARDED.sink_marker
ingest_marker = UNSHARDED.ingest_marker
