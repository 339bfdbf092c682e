"""The topic streams' retention rules (pure)."""

from __future__ import annotations

import pytest

from delayline.errors import ConfigurationError
from delayline.retention import (
    RetentionPolicy,
    TopicRetention,
    first_needed,
    next_stream_id,
    stream_id_key,
)


def test_the_defaults_keep_a_day_or_the_newest_100k_and_have_no_hard_cap() -> None:
    policy = RetentionPolicy.parse("24h", "100000", "0")
    assert policy.for_topic("orders") == TopicRetention(86_400_000, 100_000, 0)


def test_the_first_matching_pattern_wins_and_others_take_the_default() -> None:
    policy = RetentionPolicy.parse(
        "24h,audit.*=7d,audit.eu=1h", "100_000,*.DLQ=1000", "0,*=5000000"
    )
    assert policy.for_topic("audit.eu") == TopicRetention(7 * 86_400_000, 100_000, 5_000_000)
    assert policy.for_topic("orders.DLQ") == TopicRetention(86_400_000, 1_000, 5_000_000)
    assert policy.for_topic("orders") == TopicRetention(86_400_000, 100_000, 5_000_000)


def test_zero_turns_a_bound_off_and_all_zeros_is_unbounded() -> None:
    retention = RetentionPolicy.parse("0", "0", "0").for_topic("t")
    assert retention == TopicRetention(0, 0, 0)
    assert not retention.bounded
    assert TopicRetention(0, 1, 0).bounded


@pytest.mark.parametrize(
    ("age", "length", "hard", "says"),
    [
        ("24", "1", "0", "topic_retention: '24' is not a valid value"),
        ("24h,=1h", "1", "0", "an override without a topic pattern"),
        ("24h", "1,2", "0", "topic_max_len: two defaults"),
        ("24h", "a*=1", "0", "topic_max_len: no default"),
        ("24h", "1", "-5", "topic_hard_max_len: '-5' is negative"),
        ("24h", "lots", "0", "topic_max_len: 'lots' is not a valid value"),
    ],
)
def test_a_malformed_rule_is_refused_naming_its_setting(
    age: str, length: str, hard: str, says: str
) -> None:
    with pytest.raises(ConfigurationError, match=says):
        RetentionPolicy.parse(age, length, hard)


def test_stream_ids_sort_as_redis_sorts_them() -> None:
    ids = ["10-2", "9-5", "10-10", "10-0"]
    assert sorted(ids, key=stream_id_key) == ["9-5", "10-0", "10-2", "10-10"]
    assert next_stream_id("10-9") == "10-10"


def test_a_group_needs_its_oldest_pending_entry_or_what_follows_its_last_read() -> None:
    assert first_needed([]) is None
    assert first_needed([("5-0", None)]) == "5-1"
    assert first_needed([("9-0", "3-1"), ("7-4", None)]) == "3-1"
    assert first_needed([("0-0", None), ("9-0", None)]) == "0-1"
