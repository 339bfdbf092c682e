"""The pure parts of a topic's delivery limit: its checks, and its stored form."""

from __future__ import annotations

from datetime import timedelta

import pytest

from delayline.errors import DecodeError, ValidationError
from delayline.limits import (
    MAX_RATE_PER_S,
    MAX_SPREAD_MS,
    TopicLimit,
    from_stored,
    shard_rate_per_s,
    spread_ms_of,
)


@pytest.mark.parametrize(
    ("rate", "spread", "field"),
    [
        (0, 0, "rate_per_s"),
        (MAX_RATE_PER_S + 1, 0, "rate_per_s"),
        (True, 0, "rate_per_s"),
        (1.5, 0, "rate_per_s"),
        (None, -1, "spread_ms"),
        (None, MAX_SPREAD_MS + 1, "spread_ms"),
        (None, 2.0, "spread_ms"),
        (None, 0, "limit"),
    ],
)
def test_a_bad_limit_is_refused_naming_its_field(rate: object, spread: object, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        TopicLimit("orders", rate, spread)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_a_bad_topic_is_refused() -> None:
    with pytest.raises(ValidationError, match="reserved"):
        TopicLimit("delayline:outbox", 5)


@pytest.mark.parametrize(("rate", "shards", "share"), [(2000, 1, 2000), (2000, 3, 667), (1, 4, 1)])
def test_each_shard_keeps_its_share_of_the_rate_rounded_up(
    rate: int, shards: int, share: int
) -> None:
    assert shard_rate_per_s(rate, shards) == share
    assert f'"shard_rate_per_s": {share}' in TopicLimit("t", rate).stored(shards)


def test_a_stored_limit_reads_back_as_it_was_set() -> None:
    for limit in (TopicLimit("a", 5), TopicLimit("b", None, 30_000), TopicLimit("c", 7, 1)):
        assert from_stored(limit.topic, limit.stored(3)) == limit
    assert TopicLimit("b", None, 5).stored(2).count('"shard_rate_per_s": 0') == 1


def test_a_malformed_stored_limit_is_a_decode_error() -> None:
    for stored in ("{", "[]", '{"rate_per_s": 1}', '{"rate_per_s": 0, "spread_ms": 0}'):
        with pytest.raises((DecodeError, ValidationError)):
            from_stored("t", stored)


@pytest.mark.parametrize(
    ("given", "spread_ms"),
    [(None, 0), (250, 250), ("1m30s", 90_000), (timedelta(seconds=2), 2_000)],
)
def test_a_spread_is_taken_as_ms_text_or_a_timedelta(given: object, spread_ms: int) -> None:
    assert spread_ms_of(given) == spread_ms  # type: ignore[arg-type]


def test_a_spread_of_a_fraction_of_a_ms_is_refused() -> None:
    with pytest.raises(ValidationError, match="whole ms"):
        spread_ms_of(timedelta(microseconds=1500))
    with pytest.raises(ValidationError, match="not a duration"):
        spread_ms_of("soon")
