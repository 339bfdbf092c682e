"""The one exception tree of delayline.

::

    DelaylineError
    ├── ValidationError            bad input; ``.field`` and ``.rule`` name what and why
    │   └── InvalidMessageIdError       an id that delayline did not issue
    ├── MessageStateError          a message that can no longer be changed (``.state``)
    ├── ScheduleNotFoundError      no recurring schedule of that name and topic
    ├── DecodeError                an inbound record that cannot be read
    ├── ConfigurationError         bad settings, or settings that contradict a checkpoint
    │   └── JavaNotFoundError      no Java 17+ to run Spark
    ├── TransportError             Redis (or another broker) failed
    │   └── ConnectError       it could not be reached at all
    └── SchedulerError             the Spark query failed or stopped
        ├── FencedError            another scheduler took over: a newer lease's fence
        │                          (redis/lease.py), or a pump's Kafka transactional id
        └── ClusterError           a standalone Spark cluster did not start or is not there

Foreign exceptions (redis-py, py4j) are translated at the boundary with
``raise ... from exc``; only the CLI and the HTTP layer turn these into exit or
status codes.
"""

from __future__ import annotations

#: The most characters of a caller's value that an error message quotes; a value
#: can be megabytes, and its message becomes a reject's ``reason``.
MAX_QUOTED_CHARS = 100


def quoted(value: object) -> str:
    """``repr(value)`` for an error message, cut to MAX_QUOTED_CHARS characters ending in "…"."""
    if isinstance(value, str | bytes):
        # Cut before repr: it would copy the whole value first.
        value = value[: MAX_QUOTED_CHARS + 1]
    text = repr(value)
    return text if len(text) <= MAX_QUOTED_CHARS else text[: MAX_QUOTED_CHARS - 1] + "…"


class DelaylineError(Exception):
    """Root of every error delayline raises on purpose."""


class ValidationError(DelaylineError, ValueError):
    """Input broke a rule.

    ``field`` is the name of the offending argument or record field, ``rule`` a
    short machine-readable rule name (``"max_bytes"``, ``"pattern"``, ...).
    """

    def __init__(self, field: str, rule: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.rule = rule
        self.message = message


class InvalidMessageIdError(ValidationError):
    """A string that is not a delayline message id."""

    def __init__(self, message_id: object) -> None:
        super().__init__(
            "id",
            "format",
            f"not a delayline message id: {quoted(message_id)} "
            "(expected 26 Crockford base32 characters, due by the year 9999, as send returns)",
        )


class MessageStateError(DelaylineError):
    """The message cannot be changed: it is ``state`` (delivered, cancelled,
    rescheduled, rejected, or unknown)."""

    def __init__(self, message_id: str, state: str, action: str) -> None:
        super().__init__(f"cannot {action} message {message_id}: it is {state}")
        self.message_id = message_id
        self.state = state


class ScheduleNotFoundError(DelaylineError):
    """No recurring schedule ``name`` of ``topic`` is in the scheduler's state: none was
    put, it was deleted, or it was put a moment ago and the scheduler's next batch
    has not committed it yet (within about a second)."""

    def __init__(self, name: str, topic: str) -> None:
        super().__init__(
            f"no schedule {quoted(name)} of topic {quoted(topic)} (one put a moment ago "
            "shows once the scheduler's next batch has it, within about a second)"
        )
        self.name = name
        self.topic = topic


class GroupExistsError(DelaylineError):
    """A group of that name exists already."""


class GroupNotFoundError(DelaylineError):
    """No group of that name exists (delayline/groups.py)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no group {name!r}: create it first (delayline groups create {name})")
        self.name = name


class ForbiddenError(DelaylineError):
    """The caller may not do this: the Manager's routes need the admin token."""


class QuotaError(DelaylineError):
    """A group's quota refused a send: ``quota`` names it (``max_pending``,
    ``max_send_per_s``, ``max_body_bytes`` or ``topic_patterns``). Nothing was sent."""

    def __init__(self, group: str, quota: str, message: str) -> None:
        super().__init__(f"group {group!r}: {message}")
        self.group = group
        self.quota = quota


class DecodeError(DelaylineError):
    """An inbound stream record could not be decoded into a message or a cancel."""


class ConfigurationError(DelaylineError):
    """Settings are invalid, or differ from the ones a checkpoint was created with."""


class JavaNotFoundError(ConfigurationError):
    """Spark needs Java 17 or newer, and none was found."""


class TransportError(DelaylineError):
    """The message store (Redis) failed to do what was asked."""


class ConnectError(TransportError):
    """The message store could not be reached."""


class SchedulerError(DelaylineError):
    """The scheduling query failed or stopped unexpectedly."""


class FencedError(SchedulerError):
    """Another process took over this one's work: a scheduler with a newer lease raised
    the shards' fences above this one's token (redis/lease.py), or another pump uses
    this one's Kafka transactional id. Whatever raised it wrote nothing."""


class ClusterError(SchedulerError):
    """A standalone Spark cluster (``delayline cluster``) did not start, or none is there."""
