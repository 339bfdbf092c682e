"""Listing pending messages and recurring schedules: what is asked, and what each
listed message shows (pure; a listed schedule is
:class:`delayline.schedules.listed.ListedSchedule`).

A listing is an operator's tool. The messages and the schedules in the
scheduler's state are read by a batch query over its checkpoint (Spark's state
data source), which the running scheduler runs when asked (see
``scheduler/jobs/state_scan.py``); the messages in the outbox are read from
Redis. The cost is a scan of the whole state, in Spark, next to the streaming
query: seconds at 1M pending, on the same cores.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from delayline.errors import SchedulerError, ValidationError, quoted
from delayline.groups import group_of
from delayline.timing import format_time

#: The most messages (or schedules) one listing returns.
MAX_LIMIT = 10_000

#: A listing of pending messages.
MESSAGES = "messages"
#: A listing of recurring schedules.
SCHEDULES = "schedules"
#: What a listing lists.
KINDS = (MESSAGES, SCHEDULES)


@dataclass(frozen=True)
class ListRequest:
    """What to list: of ``kind`` ``messages``, the pending messages of ``topic`` and
    ``key`` (None: any), due in ``[from_ms, to_ms)`` (None: open), the first ``limit``
    by due time; of ``kind`` ``schedules``, the recurring schedules of ``topic`` and
    ``name`` (None: any), the first ``limit`` by topic, then name."""

    topic: str | None = None
    key: str | None = None
    from_ms: int | None = None
    to_ms: int | None = None
    limit: int = 100
    kind: str = MESSAGES
    name: str | None = None
    #: Only the messages or schedules of this group's topics (None: any group's).
    group: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= MAX_LIMIT:
            raise ValidationError("limit", "range", f"limit must be 1 to {MAX_LIMIT:,}")
        if self.from_ms is not None and self.to_ms is not None and self.to_ms <= self.from_ms:
            raise ValidationError("to", "order", "the window's end (to) must come after its start")
        if self.kind not in KINDS:
            raise ValidationError(
                "kind", "one_of", f"a listing is of {' or '.join(KINDS)}; got {quoted(self.kind)}"
            )
        if self.kind == MESSAGES and self.name is not None:
            raise ValidationError("name", "only_with", "a listing of messages takes no name")
        if self.kind == SCHEDULES and (self.key, self.from_ms, self.to_ms) != (None, None, None):
            raise ValidationError(
                "key", "only_with", "a listing of schedules takes a topic and a name only"
            )

    def selects(self, topic: str, key: str, deliver_at_ms: int) -> bool:
        """Whether a message of ``topic`` and ``key`` due at ``deliver_at_ms`` is asked for."""
        return (
            (self.topic is None or topic == self.topic)
            and (self.group is None or group_of(topic) == self.group)
            and (self.key is None or key == self.key)
            and (self.from_ms is None or deliver_at_ms >= self.from_ms)
            and (self.to_ms is None or deliver_at_ms < self.to_ms)
        )

    def selects_schedule(self, topic: str, name: str) -> bool:
        """Whether schedule ``name`` of ``topic`` is asked for."""
        return (
            (self.topic is None or topic == self.topic)
            and (self.group is None or group_of(topic) == self.group)
            and (self.name is None or name == self.name)
        )

    def to_json(self) -> str:
        """The request as JSON; a listing of messages without ``kind`` and ``name``, as a
        scheduler older than listings of schedules reads it."""
        fields = asdict(self)
        if self.kind == MESSAGES:
            del fields["kind"], fields["name"]
        if self.group is None:  # as a scheduler older than groups reads it
            del fields["group"]
        return json.dumps(fields)

    @classmethod
    def from_json(cls, text: str | bytes) -> ListRequest:
        """Raises ValidationError for anything but a request's JSON."""
        try:
            return cls(**json.loads(text))
        except (TypeError, ValueError) as exc:
            raise ValidationError("request", "format", f"not a listing request: {exc}") from exc


@dataclass(frozen=True)
class PendingMessage:
    """A pending message as a listing shows it; ``where`` is ``state``, ``outbox``, or
    ``inbound`` (sent, and not in a committed batch yet)."""

    id: str
    topic: str
    key: str
    deliver_at_ms: int
    attempt: int
    body_bytes: int
    where: str

    def to_json(self) -> dict[str, str | int]:
        return {**asdict(self), "deliver_at": format_time(self.deliver_at_ms)}

    def dumps(self) -> str:
        """The row as JSON text, as a listing keeps it in Redis."""
        return json.dumps(self.to_json())

    @classmethod
    def from_json(cls, text: str | bytes) -> PendingMessage:
        fields = json.loads(text)
        fields.pop("deliver_at", None)
        return cls(**fields)


@dataclass(frozen=True)
class ListingStatus:
    """How far the scheduler is with a listing: ``state`` is ``queued``, ``scanning``
    (``done`` of ``total`` tasks), ``done`` or ``failed`` (``error`` says why)."""

    state: str
    done: int = 0
    total: int = 0
    error: str = ""

    def finished(self) -> bool:
        """True once the rows are written. Raises SchedulerError if the scan failed."""
        if self.state == "failed":
            raise SchedulerError(f"the listing failed: {self.error}")
        return self.state == "done"


def by_due_time(rows: list[PendingMessage], limit: int) -> list[PendingMessage]:
    """The first ``limit`` of ``rows`` by due time (then id), each id once: a message
    read from an inbound feed may have reached the outbox by the time it is read."""
    unique = {row.id: row for row in reversed(rows)}.values()
    return sorted(unique, key=lambda row: (row.deliver_at_ms, row.id))[:limit]


def later_ones(rows: list[PendingMessage], done: list[PendingMessage]) -> list[PendingMessage]:
    """``rows`` but those in ``done`` (by id): what a listing adds to an earlier read."""
    seen = {row.id for row in done}
    return [row for row in rows if row.id not in seen]


#: How long a client waits for the scheduler to take up a listing (s).
PICKUP_TIMEOUT_S = 30.0
#: How often a client asks how far a listing is (s).
LISTING_POLL_S = 0.1


def listing_waits(
    status: ListingStatus,
    began: float,
    timeout_s: float,
    on_progress: Callable[[int, int], None] | None,
) -> None:
    """Account for one more wait on a listing not finished since ``began`` (a
    ``time.monotonic()``): tell ``on_progress(done, total)`` how far its scan is.
    Raises SchedulerError if no scheduler took it up in time, it expired, or it has
    taken over ``timeout_s``."""
    waited_s = time.monotonic() - began
    if status.state == "queued" and waited_s > PICKUP_TIMEOUT_S:
        raise SchedulerError(
            f"no scheduler took the listing up within {PICKUP_TIMEOUT_S:.0f} s: "
            "is `delayline run` running against this Redis?"
        )
    if status.state == "expired":
        raise SchedulerError("the listing expired before it finished")
    if waited_s > timeout_s:
        raise SchedulerError(f"the listing did not finish within {timeout_s:.0f} s")
    if on_progress and status.total:
        on_progress(status.done, status.total)
