"""The rules a message must follow, shared by the SDK and the scheduler.

Each check raises :class:`~delayline.errors.ValidationError` naming the field
and the rule, so the HTTP layer can answer 422 and the scheduler can write the
reason next to the rejected record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from delayline import timing
from delayline.errors import ValidationError, quoted
from delayline.groups import DEFAULT_GROUP, GROUP_NAME_PATTERN, SEPARATOR
from delayline.ids import MAX_ID_TIME_MS

#: Default largest body, in bytes (1 MiB).
MAX_BODY_BYTES = 1024 * 1024
#: Default largest headers object, in bytes of its JSON encoding (16 KiB).
MAX_HEADERS_BYTES = 16 * 1024
#: Default furthest delivery time, in ms after sending (2 years of 365 days).
MAX_DELAY_MS = 2 * 365 * 24 * 3600 * 1000
#: Keys under this prefix belong to delayline itself; a topic there could loop.
RESERVED_TOPIC_PREFIX = "delayline:"

#: A topic: its own name, or ``<group>/<name>`` for a group's (delayline/groups.py).
_TOPIC_PATTERN = re.compile(rf"(?:{GROUP_NAME_PATTERN}{SEPARATOR})?[A-Za-z0-9._:-]+")
#: The most characters a topic has, with its group (Kafka's bound on a topic name).
MAX_TOPIC_CHARS = 249


@dataclass(frozen=True)
class Limits:
    """Size and time limits. Defaults are the documented ones."""

    max_body_bytes: int = MAX_BODY_BYTES
    max_headers_bytes: int = MAX_HEADERS_BYTES
    max_delay_ms: int = MAX_DELAY_MS


def validate_topic(topic: object) -> str:
    """Return ``topic`` if it is 1-249 characters of ``[A-Za-z0-9._:-]``, outside
    ``delayline:``, after an optional ``<group>/`` (a group's topic, delayline/groups.py)."""
    if (
        not isinstance(topic, str)
        or len(topic) > MAX_TOPIC_CHARS
        or not _TOPIC_PATTERN.fullmatch(topic)
    ):
        raise ValidationError(
            "topic",
            "pattern",
            f"topic must be 1-249 characters of [A-Za-z0-9._:-], got {quoted(topic)}",
        )
    if topic.startswith(DEFAULT_GROUP + SEPARATOR):
        raise ValidationError(
            "topic",
            "group",
            f"the {DEFAULT_GROUP!r} group's topics are plain: drop {DEFAULT_GROUP + SEPARATOR!r}",
        )
    if topic.startswith(RESERVED_TOPIC_PREFIX):
        raise ValidationError(
            "topic",
            "reserved",
            f"topics starting with {RESERVED_TOPIC_PREFIX!r} are reserved for delayline itself",
        )
    return topic


def utf8(field: str, text: str) -> bytes:
    """``text`` as UTF-8. Raises ValidationError if it holds a lone surrogate (from
    JSON's ``"\\ud800"``, say), which no UTF-8 text can."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            field, "utf-8", f"{field} is not valid Unicode text: it holds a lone surrogate"
        ) from None


def validate_body(body: object, limits: Limits) -> bytes:
    """Return ``body`` as bytes (str is UTF-8 encoded); refuse other types, text that
    UTF-8 cannot encode, and oversize."""
    if isinstance(body, str):
        body = utf8("body", body)
    if not isinstance(body, bytes | bytearray | memoryview):
        raise ValidationError(
            "body", "type", f"body must be bytes or str, got {type(body).__name__}"
        )
    body = bytes(body)
    if len(body) > limits.max_body_bytes:
        raise ValidationError(
            "body",
            "max_bytes",
            f"body is {len(body)} bytes, more than the limit of {limits.max_body_bytes}",
        )
    return body


def validate_key(key: object) -> str | None:
    """Return ``key`` if it is None or a string of at most 1024 characters."""
    if key is None:
        return None
    if not isinstance(key, str) or len(key) > 1024:
        raise ValidationError("key", "type", "key must be a string of at most 1024 characters")
    utf8("key", key)
    return key


def validate_headers(
    headers: object, limits: Limits, *, encoded_bytes: int | None = None
) -> dict[str, str]:
    """Return ``headers`` as a dict if it is a JSON object of strings within the size limit.

    ``encoded_bytes`` is the size of the JSON they came from, if any; otherwise
    their canonical encoding is measured.
    """
    if headers is None or headers == {}:
        return {}
    if not isinstance(headers, Mapping) or not all(
        isinstance(name, str) and isinstance(value, str) for name, value in headers.items()
    ):
        raise ValidationError(
            "headers", "type", "headers must be an object mapping strings to strings"
        )
    size = (
        encoded_bytes
        if encoded_bytes is not None
        else len(utf8("headers", encode_headers(headers)))
    )
    if size > limits.max_headers_bytes:
        raise ValidationError(
            "headers",
            "max_bytes",
            f"headers are {size} bytes as JSON, more than the limit of {limits.max_headers_bytes}",
        )
    return dict(headers)


def encode_headers(headers: Mapping[str, str]) -> str:
    """The canonical JSON text of a headers object (compact, key order kept)."""
    return json.dumps(headers, separators=(",", ":"), ensure_ascii=False)


def decode_headers(text: str, limits: Limits) -> dict[str, str]:
    """Parse and validate a headers JSON text. Raises ValidationError."""
    if not text:
        return {}
    try:
        headers = json.loads(text)
    except ValueError as exc:
        raise ValidationError("headers", "json", f"headers are not valid JSON: {exc}") from exc
    return validate_headers(headers, limits, encoded_bytes=len(text.encode()))


def resolve_deliver_at_ms(
    *,
    now_ms: int,
    limits: Limits,
    delay: timedelta | int | None = None,
    deliver_at: datetime | int | None = None,
    level: int | None = None,
) -> int:
    """The delivery time (epoch ms) asked for by exactly one of delay, deliver_at, level.

    ``delay`` is a timedelta or ms; ``deliver_at`` an aware datetime or epoch ms;
    ``level`` a RocketMQ level 1..18. Giving none means "now". Raises
    ValidationError for more than one, a negative delay, a naive datetime, an
    unknown level, or a time beyond ``limits.max_delay_ms`` from ``now_ms``.
    """
    given = [
        name
        for name, value in (("delay", delay), ("deliver_at", deliver_at), ("level", level))
        if value is not None
    ]
    if len(given) > 1:
        raise ValidationError(
            given[1],
            "exclusive",
            f"use only one of delay, deliver_at or level, not {' and '.join(given)}",
        )
    if delay is not None:
        delay_ms = delay_ms_of(delay)
        deliver_at_ms = now_ms + delay_ms
        field = "delay"
    elif deliver_at is not None:
        deliver_at_ms = _deliver_at_ms(deliver_at)
        field = "deliver_at"
    elif level is not None:
        deliver_at_ms = now_ms + timing.level_delay_ms(level)
        field = "level"
    else:
        return now_ms
    check_horizon(deliver_at_ms, now_ms=now_ms, limits=limits, field=field)
    return deliver_at_ms


def check_horizon(deliver_at_ms: int, *, now_ms: int, limits: Limits, field: str) -> None:
    """Refuse a delivery time further than ``limits.max_delay_ms`` after ``now_ms``."""
    if deliver_at_ms - now_ms > limits.max_delay_ms:
        raise ValidationError(
            field,
            "max_delay",
            f"delivery is {deliver_at_ms - now_ms} ms away, beyond the maximum delay of "
            f"{limits.max_delay_ms} ms",
        )
    # Ids carry 48 bits of time; nothing outside that can be scheduled.
    if not 0 <= deliver_at_ms <= MAX_ID_TIME_MS:
        raise ValidationError(field, "range", f"deliver_at_ms out of range: {deliver_at_ms}")


def delay_ms_of(delay: timedelta | int) -> int:
    """A delay given as a timedelta or integer ms, in ms. Raises ValidationError if negative."""
    if isinstance(delay, timedelta):
        delay_ms = int(delay / timedelta(milliseconds=1))
    elif isinstance(delay, int) and not isinstance(delay, bool):
        delay_ms = delay
    else:
        raise ValidationError(
            "delay", "type", f"delay must be a timedelta or integer ms, got {type(delay).__name__}"
        )
    if delay_ms < 0:
        raise ValidationError("delay", "negative", f"delay must not be negative, got {delay_ms} ms")
    return delay_ms


def _deliver_at_ms(deliver_at: datetime | int) -> int:
    if isinstance(deliver_at, datetime):
        return timing.to_epoch_ms(deliver_at)
    if isinstance(deliver_at, int) and not isinstance(deliver_at, bool):
        return deliver_at
    raise ValidationError(
        "deliver_at",
        "type",
        f"deliver_at must be an aware datetime or epoch ms, got {type(deliver_at).__name__}",
    )
