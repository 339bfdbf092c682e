"""How long delivered entries stay in the topic streams delayline writes (pure).

A topic stream keeps an entry until it is past one of the soft bounds, older
than its ``max_age_ms`` or beyond its newest ``max_len`` entries, *and* every
consumer group of the stream has read and acknowledged it. A hard cap,
``hard_max_len``, trims the oldest entries even if a group still needs them;
those are counted (``delayline_topic_trimmed_unread_total``). 0 turns a bound
off.

Each bound is a rule text: a default, then ``pattern=value`` overrides, comma
separated, the first matching pattern winning (shell-style, as
:func:`fnmatch.fnmatchcase`): ``"24h,audit.*=7d,orders.timeout=1h"``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from delayline.errors import ConfigurationError, ValidationError
from delayline.timing import parse_duration_ms

#: Defaults: a day of entries, at most the newest 100,000, and no hard cap.
DEFAULT_MAX_AGE = "24h"
DEFAULT_MAX_LEN = "100000"
DEFAULT_HARD_MAX_LEN = "0"


@dataclass(frozen=True)
class TopicRetention:
    """One topic's bounds: entries older than ``max_age_ms`` or beyond the newest
    ``max_len`` go once every group acknowledged them; beyond ``hard_max_len``
    they go anyway. 0: no such bound."""

    max_age_ms: int
    max_len: int
    hard_max_len: int

    @property
    def bounded(self) -> bool:
        """Whether any bound applies (an unbounded topic is never trimmed)."""
        return bool(self.max_age_ms or self.max_len or self.hard_max_len)


@dataclass(frozen=True)
class Rule:
    """A bound's default and its overrides by topic pattern, in the order given."""

    default: int
    overrides: tuple[tuple[str, int], ...] = ()

    def for_topic(self, topic: str) -> int:
        """The value of the first override whose pattern matches ``topic``, or the default."""
        for pattern, value in self.overrides:
            if fnmatchcase(topic, pattern):
                return value
        return self.default


def parse_rule(text: str, name: str, parse_value: Callable[[str], int]) -> Rule:
    """Read a rule text (see the module's text) for setting ``name``.

    Raises ConfigurationError, naming the setting, for a malformed part.
    """
    default: int | None = None
    overrides: list[tuple[str, int]] = []
    for part in (piece.strip() for piece in text.split(",")):
        pattern, sign, value_text = part.rpartition("=")
        try:
            value = parse_value(value_text.strip())
        except (ValidationError, ValueError):
            raise ConfigurationError(
                f"{name}: {value_text.strip()!r} is not a valid value in {text!r}"
            ) from None
        if value < 0:
            raise ConfigurationError(f"{name}: {value_text.strip()!r} is negative in {text!r}")
        if not sign:
            if default is not None:
                raise ConfigurationError(f"{name}: two defaults in {text!r}")
            default = value
        elif not pattern.strip():
            raise ConfigurationError(f"{name}: an override without a topic pattern in {text!r}")
        else:
            overrides.append((pattern.strip(), value))
    if default is None:
        raise ConfigurationError(f"{name}: no default (a value without a pattern) in {text!r}")
    return Rule(default, tuple(overrides))


def parse_age_ms(text: str) -> int:
    """A duration (``24h``, ``90m``), or ``0`` for none, in ms. Raises ValidationError."""
    return 0 if text == "0" else parse_duration_ms(text)


def parse_count(text: str) -> int:
    """A count of entries (``100000``, or ``100_000``). Raises ValueError."""
    return int(text.replace("_", ""))


@dataclass(frozen=True)
class RetentionPolicy:
    """The retention of every topic stream: one rule per bound."""

    max_age: Rule
    max_len: Rule
    hard_max_len: Rule

    @classmethod
    def parse(cls, max_age: str, max_len: str, hard_max_len: str) -> RetentionPolicy:
        """The policy of ``--topic-retention``, ``--topic-max-len`` and
        ``--topic-hard-max-len``. Raises ConfigurationError."""
        return cls(
            parse_rule(max_age, "topic_retention", parse_age_ms),
            parse_rule(max_len, "topic_max_len", parse_count),
            parse_rule(hard_max_len, "topic_hard_max_len", parse_count),
        )

    def for_topic(self, topic: str) -> TopicRetention:
        """The bounds that apply to ``topic``."""
        return TopicRetention(
            self.max_age.for_topic(topic),
            self.max_len.for_topic(topic),
            self.hard_max_len.for_topic(topic),
        )


def stream_id_key(stream_id: str) -> tuple[int, int]:
    """A stream entry id (``"<ms>-<seq>"``) as a tuple that sorts as Redis sorts ids."""
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


def next_stream_id(stream_id: str) -> str:
    """The smallest id after ``stream_id``."""
    ms, seq = stream_id_key(stream_id)
    return f"{ms}-{seq + 1}"


def first_needed(groups: list[tuple[str, str | None]]) -> str | None:
    """The first entry id some consumer group still needs, or None if none does.

    Each group is (its last delivered id, its oldest pending id or None): it
    needs every entry after the first, and every entry from the second on.
    """
    needed = [
        pending if pending is not None else next_stream_id(last_delivered)
        for last_delivered, pending in groups
    ]
    return min(needed, key=stream_id_key, default=None)
