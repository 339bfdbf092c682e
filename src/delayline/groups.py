"""Groups, the pure parts: names, the topics of a group, quotas and tokens.

A group is a namespace for topics, schedules, counters and limits, so that one
business cannot delay or fill another's. Group ``billing``'s topic ``invoices``
is the qualified topic ``billing/invoices`` everywhere delayline keeps it: in
records, in the scheduler's state, and as the name of the topic stream a
consumer reads. A plain topic (no ``/``) is the ``default`` group's, as every
topic was before groups. The group of a message is the part of its topic
before ``/`` (:func:`group_of`): nothing else needs to carry it.

Each group has its own delivery lane (its own outbox, counters and pump; see
redis/keys.py), so a herd in one group waits behind itself only. This module
owns the stored form of a group (:class:`Group`, JSON) and of its quotas, and
how a token is kept: by its SHA-256 digest, never in clear.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import re
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from delayline.errors import DecodeError, ValidationError, quoted

#: The group of every plain topic, and of a client that names none.
DEFAULT_GROUP = "default"
#: Between a group's name and its own topic name, in a qualified topic.
SEPARATOR = "/"
#: A group's name: 1-32 of lower-case letters, digits, ``-`` and ``_``, a letter or
#: digit first (it is part of Redis key names and of topic stream names).
GROUP_NAME_PATTERN = r"[a-z0-9][a-z0-9_-]{0,31}"
_NAME_PATTERN = re.compile(GROUP_NAME_PATTERN)
#: The most groups besides the default one: each has a pump thread per Redis shard.
MAX_GROUPS = 64
#: The most topic patterns a group's quota lists.
MAX_TOPIC_PATTERNS = 32
#: The largest value any numeric quota takes.
MAX_QUOTA = 10**12
#: How many random bytes a token holds (it is their URL-safe base64).
TOKEN_BYTES = 32


def validate_group(name: object) -> str:
    """Return ``name`` if it is a group's name. Raises ValidationError otherwise."""
    if not isinstance(name, str) or not _NAME_PATTERN.fullmatch(name):
        raise ValidationError(
            "group",
            "pattern",
            "a group's name is 1-32 characters of a-z, 0-9, '-' and '_', starting with a "
            f"letter or digit; got {quoted(name)}",
        )
    return name


def group_of(topic: str) -> str:
    """The group a (qualified) topic belongs to: the part before SEPARATOR, or
    DEFAULT_GROUP for a plain topic."""
    group, separator, _ = topic.partition(SEPARATOR)
    return group if separator else DEFAULT_GROUP


def qualify(group: str, topic: str) -> str:
    """Group ``group``'s topic ``topic`` as delayline keeps it: ``<group>/<topic>``,
    or ``topic`` itself in the default group (where a qualified topic is taken as
    given: the default group may address any group's topics).

    Raises ValidationError for a topic of another group than ``group``'s.
    """
    if group == DEFAULT_GROUP:
        return topic
    if SEPARATOR in topic:
        raise ValidationError(
            "topic",
            "group",
            f"a client of group {group!r} names its topics without a group; got {quoted(topic)}",
        )
    return f"{group}{SEPARATOR}{topic}"


def unqualified(topic: str) -> str:
    """A qualified topic's name within its group (a plain topic as it is)."""
    return topic.partition(SEPARATOR)[2] or topic


def new_token() -> str:
    """A fresh group or admin token: TOKEN_BYTES random bytes, URL-safe."""
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_digest(token: str) -> str:
    """What is kept of a token: its SHA-256, in hex."""
    return hashlib.sha256(token.encode()).hexdigest()


def _quota(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_QUOTA:
        raise ValidationError(
            name, "range", f"{name} must be a whole number from 1 to {MAX_QUOTA:,}, got {value!r}"
        )
    return value


@dataclass(frozen=True, slots=True)
class Quotas:
    """What a group may do; None (or no pattern) is no bound.

    ``max_pending``: messages pending at once; ``max_send_per_s``: messages sent a
    second; ``max_body_bytes``: one message's body; ``topic_patterns``: the
    group's topics it may send to (shell-style: ``orders.*``; none: any).
    Raises ValidationError for a bound out of range or a bad pattern.
    """

    max_pending: int | None = None
    max_send_per_s: int | None = None
    max_body_bytes: int | None = None
    topic_patterns: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for name in ("max_pending", "max_send_per_s", "max_body_bytes"):
            _quota(name, getattr(self, name))
        patterns = self.topic_patterns
        if not isinstance(patterns, tuple) or len(patterns) > MAX_TOPIC_PATTERNS:
            raise ValidationError(
                "topic_patterns",
                "range",
                f"topic_patterns is a list of at most {MAX_TOPIC_PATTERNS} patterns",
            )
        for pattern in patterns:
            if (
                not isinstance(pattern, str)
                or not 1 <= len(pattern) <= 249
                or not re.fullmatch(r"[A-Za-z0-9._:*?\[\]-]+", pattern)
            ):
                raise ValidationError(
                    "topic_patterns",
                    "pattern",
                    "a topic pattern is 1-249 characters of topic characters and the "
                    f"wildcards * ? [ ]; got {quoted(pattern)}",
                )

    def allows_topic(self, topic: str) -> bool:
        """Whether ``topic`` (the group's own name for it) matches a pattern, or none
        is set."""
        return not self.topic_patterns or any(
            fnmatch.fnmatchcase(topic, pattern) for pattern in self.topic_patterns
        )


@dataclass(frozen=True, slots=True)
class Group:
    """A group as the registry keeps it: its name, quotas, and when it was created
    (epoch ms). Its token is kept apart, by digest. The default group has no quotas.
    Raises ValidationError for a bad name."""

    name: str
    quotas: Quotas = field(default_factory=Quotas)
    created_at_ms: int = 0

    def __post_init__(self) -> None:
        validate_group(self.name)

    def stored(self) -> str:
        """The group as the registry keeps it (JSON)."""
        return json.dumps(self.stored_dict())

    def stored_dict(self) -> dict[str, Any]:
        """What :meth:`stored` holds: ``quotas`` (every field, None for no bound) and
        ``created_at_ms``."""
        quotas = asdict(self.quotas)
        quotas["topic_patterns"] = list(self.quotas.topic_patterns)
        return {"quotas": quotas, "created_at_ms": self.created_at_ms}

    @classmethod
    def from_stored(cls, name: str, stored: str | bytes) -> Group:
        """Read back :meth:`stored`. Raises DecodeError for anything else."""
        try:
            data: Any = json.loads(stored)
            quotas = dict(data["quotas"])
            quotas["topic_patterns"] = tuple(quotas.get("topic_patterns") or ())
            return cls(name, Quotas(**quotas), int(data["created_at_ms"]))
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            raise DecodeError(
                f"group {name!r} is stored in a form this version cannot read"
            ) from exc


def quotas_from(document: object) -> Quotas:
    """Quotas from a JSON object (HTTP, the CLI): its keys are Quotas' fields, each
    optional. Raises ValidationError for unknown keys or bad values."""
    if document is None:
        return Quotas()
    if not isinstance(document, dict):
        raise ValidationError("quotas", "type", "quotas must be an object")
    unknown = set(document) - set(Quotas.__dataclass_fields__)
    if unknown:
        raise ValidationError(
            "quotas", "unknown", f"unknown quotas: {', '.join(sorted(map(str, unknown)))}"
        )
    values = dict(document)
    patterns = values.get("topic_patterns")
    if patterns is not None:
        if not isinstance(patterns, list):
            raise ValidationError("topic_patterns", "type", "topic_patterns must be a list")
        values["topic_patterns"] = tuple(patterns)
    return Quotas(**values)
