"""The pure half of delivery to Kafka: which topics exist, which wait, and for how long.

A topic that fails must not hold back the others (head-of-line blocking): its
ready messages wait here, apart, while every other topic's flow on. Three
parts, none with a Kafka client in it:

- :class:`TopicDirectory`, a cache of the topics the brokers have: a message
  to a topic it does not know waits, never at the producer, and becomes a
  reject once its topic has been unknown for ``UNKNOWN_TOPIC_MS``;
- :class:`TopicBackoff`, each failing topic's next try, doubling from
  ``FIRST_BACKOFF_MS`` to ``MAX_BACKOFF_MS``;
- :class:`HeldEntries`, the messages that wait, a queue per topic, in order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from delayline.rows import ReadyEntry

#: How long a message's topic may be unknown to the brokers before the message
#: becomes a reject (its retry budget), ms. A topic created meanwhile takes it.
UNKNOWN_TOPIC_MS = 5_000
#: How often the brokers are asked again about a topic they did not have, ms at most.
ASK_AGAIN_MS = 250
#: A failing topic's first wait before its next try, ms; it doubles at each failure.
FIRST_BACKOFF_MS = 100
#: A failing topic's longest wait before its next try, ms.
MAX_BACKOFF_MS = 10_000


class TopicDirectory:
    """The topics the brokers are known to have, asked with ``exists`` (which may
    raise TransportError) when a topic is not known yet, at most every
    ``ASK_AGAIN_MS`` for each topic."""

    def __init__(self, exists: Callable[[str], bool]) -> None:
        self._exists = exists
        self._known: set[str] = set()
        self._asked_ms: dict[str, int] = {}

    def knows(self, topic: str, now_ms: int) -> bool:
        """Whether the brokers have ``topic``, asking them if it is not known yet."""
        if topic in self._known:
            return True
        if now_ms - self._asked_ms.get(topic, now_ms - ASK_AGAIN_MS) < ASK_AGAIN_MS:
            return False
        if self._exists(topic):
            self._known.add(topic)
            self._asked_ms.pop(topic, None)
            return True
        # Bounded: a name leaves once its messages have all been refused (forget_asked).
        self._asked_ms[topic] = now_ms
        return False

    def forget(self, topic: str) -> None:
        """The brokers said ``topic`` is unknown after all (deleted): ask again next time."""
        self._known.discard(topic)

    def forget_asked(self, topic: str) -> None:
        """No message waits for ``topic`` any more: drop what was asked about it."""
        self._asked_ms.pop(topic, None)


@dataclass
class _Failing:
    failures: int
    retry_at_ms: int


class TopicBackoff:
    """When each failing topic may be tried again."""

    def __init__(self) -> None:
        self._failing: dict[str, _Failing] = {}

    def fail(self, topic: str, now_ms: int) -> None:
        """``topic`` failed (a timeout, a leader away, unknown): wait before trying it again."""
        failing = self._failing.get(topic)
        failures = 1 if failing is None else failing.failures + 1
        wait_ms = min(FIRST_BACKOFF_MS << min(failures - 1, 20), MAX_BACKOFF_MS)
        self._failing[topic] = _Failing(failures, now_ms + wait_ms)

    def succeed(self, topic: str) -> None:
        """``topic`` took a message: no more waiting."""
        self._failing.pop(topic, None)

    def open(self, topic: str, now_ms: int) -> bool:
        """Whether ``topic`` may be tried now."""
        failing = self._failing.get(topic)
        return failing is None or failing.retry_at_ms <= now_ms

    def retry_at_ms(self, topic: str) -> int | None:
        """When ``topic`` may be tried again (None: now)."""
        failing = self._failing.get(topic)
        return None if failing is None else failing.retry_at_ms

    def blocked_ms(self, now_ms: int) -> dict[str, int]:
        """How long each failing topic has yet to wait, ms."""
        return {t: max(f.retry_at_ms - now_ms, 0) for t, f in self._failing.items()}


@dataclass(frozen=True, slots=True)
class Held:
    """A ready entry that waits for its topic, and when it first tried it (ms)."""

    entry: ReadyEntry
    #: Its topic's name (decoded once, here).
    topic: str
    first_try_ms: int
    #: To be written in a round of its own: its batch was refused as too large.
    alone: bool = False


class HeldEntries:
    """Ready entries waiting for their topics: a queue per topic, oldest first."""

    def __init__(self) -> None:
        self._by_topic: dict[str, deque[Held]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, entry: ReadyEntry, now_ms: int) -> None:
        """Queue ``entry`` behind its topic's others."""
        topic = entry[1][b"topic"].decode()
        self._by_topic.setdefault(topic, deque()).append(Held(entry, topic, now_ms))
        self._count += 1

    def put_back(self, held: list[Held]) -> None:
        """Queue ``held`` (taken out, not written) ahead of their topics' others, in order."""
        for item in reversed(held):
            self._by_topic.setdefault(item.topic, deque()).appendleft(item)
        self._count += len(held)

    def topics(self) -> Iterator[str]:
        """The topics that have entries waiting."""
        return iter(list(self._by_topic))

    def take(self, topic: str, limit: int, *, tried_before_ms: int | None = None) -> list[Held]:
        """Up to ``limit`` of ``topic``'s entries, oldest first; only those first tried
        before ``tried_before_ms`` if given."""
        queue = self._by_topic.get(topic)
        taken: list[Held] = []
        while queue and len(taken) < limit:
            if tried_before_ms is not None and queue[0].first_try_ms >= tried_before_ms:
                break
            taken.append(queue.popleft())
        if queue is not None and not queue:
            del self._by_topic[topic]
        self._count -= len(taken)
        return taken

    def first(self, topic: str) -> Held | None:
        """``topic``'s oldest waiting entry, left in place (None: none waits)."""
        queue = self._by_topic.get(topic)
        return queue[0] if queue else None

    def oldest_try_ms(self, topic: str) -> int | None:
        """When ``topic``'s oldest waiting entry was first tried, ms (None: none waits)."""
        queue = self._by_topic.get(topic)
        return queue[0].first_try_ms if queue else None

    def waiting(self, topic: str) -> int:
        """How many of ``topic``'s entries wait."""
        return len(self._by_topic.get(topic, ()))
