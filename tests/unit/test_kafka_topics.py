"""The pure half of delivery to Kafka: the topic cache, the backoff, the queues."""

from __future__ import annotations

from delayline.kafka.topics import (
    ASK_AGAIN_MS,
    FIRST_BACKOFF_MS,
    MAX_BACKOFF_MS,
    HeldEntries,
    TopicBackoff,
    TopicDirectory,
)
from delayline.rows import ReadyEntry


def entry(n: int, topic: str) -> ReadyEntry:
    return (f"{n}-0".encode(), {b"topic": topic.encode()})


def test_the_directory_asks_about_an_unknown_topic_at_most_every_so_often() -> None:
    asked: list[str] = []
    existing = {"orders"}

    def exists(topic: str) -> bool:
        asked.append(topic)
        return topic in existing

    directory = TopicDirectory(exists)
    assert directory.knows("orders", 0)
    assert directory.knows("orders", 1)
    assert asked == ["orders"]  # known: never asked again
    assert not directory.knows("typo", 10)
    assert not directory.knows("typo", 10 + ASK_AGAIN_MS - 1)
    assert asked == ["orders", "typo"]
    existing.add("typo")  # created meanwhile
    assert directory.knows("typo", 10 + ASK_AGAIN_MS)
    directory.forget("orders")  # deleted: asked again next time
    existing.discard("orders")
    assert not directory.knows("orders", 10_000)
    assert asked == ["orders", "typo", "typo", "orders"]


def test_a_failing_topic_backs_off_doubling_to_a_ceiling_and_opens_on_success() -> None:
    backoff = TopicBackoff()
    assert backoff.open("t", 0)
    backoff.fail("t", 0)
    assert not backoff.open("t", FIRST_BACKOFF_MS - 1)
    assert backoff.open("t", FIRST_BACKOFF_MS)
    backoff.fail("t", 1_000)
    assert backoff.retry_at_ms("t") == 1_000 + 2 * FIRST_BACKOFF_MS
    for _ in range(30):
        backoff.fail("t", 1_000)
    assert backoff.retry_at_ms("t") == 1_000 + MAX_BACKOFF_MS
    assert backoff.open("other", 1_000)  # only its own topic waits
    assert backoff.blocked_ms(2_000) == {"t": MAX_BACKOFF_MS - 1_000}
    backoff.succeed("t")
    assert backoff.open("t", 1_000)
    assert backoff.blocked_ms(1_000) == {}


def test_held_entries_queue_per_topic_in_order_and_go_back_in_front() -> None:
    held = HeldEntries()
    for n in range(5):
        held.add(entry(n, "a" if n % 2 else "b"), now_ms=n)
    assert len(held) == 5
    assert sorted(held.topics()) == ["a", "b"]
    taken = held.take("b", 2)
    assert [h.entry[0] for h in taken] == [b"0-0", b"2-0"]
    held.put_back(taken)
    assert [h.entry[0] for h in held.take("b", 10)] == [b"0-0", b"2-0", b"4-0"]
    assert list(held.topics()) == ["a"]
    assert len(held) == 2
    # Only those first tried before a time (an unknown topic's budget spent).
    assert [h.entry[0] for h in held.take("a", 10, tried_before_ms=2)] == [b"1-0"]
    assert held.oldest_try_ms("a") == 3
    assert held.waiting("a") == 1
    assert held.oldest_try_ms("b") is None
