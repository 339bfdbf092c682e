from __future__ import annotations

import pytest

from delayline.errors import ValidationError
from delayline.retry import ROCKETMQ_RETRY_DELAYS_MS, RetryPolicy
from delayline.timing import format_duration


def test_default_is_rocketmqs_sixteen_retries() -> None:
    spelled = [format_duration(ms) for ms in ROCKETMQ_RETRY_DELAYS_MS]
    assert spelled == [
        "10s",
        "30s",
        "1m",
        "2m",
        "3m",
        "4m",
        "5m",
        "6m",
        "7m",
        "8m",
        "9m",
        "10m",
        "20m",
        "30m",
        "1h",
        "2h",
    ]
    policy = RetryPolicy()
    assert policy.max_retries == 16
    assert policy.delay_after(1) == 10_000  # first delivery failed: retry 1 in 10 s
    assert policy.delay_after(16) == 7_200_000
    assert policy.delay_after(17) is None  # retries used up: dead letter


def test_custom_policy() -> None:
    policy = RetryPolicy([100, 200])
    assert [policy.delay_after(a) for a in (1, 2, 3)] == [100, 200, None]
    assert RetryPolicy([]).delay_after(1) is None
    with pytest.raises(ValidationError):
        RetryPolicy([-1])


def test_format_duration() -> None:
    assert [format_duration(ms) for ms in (0, 250, 1500, 90_000, 86_400_000)] == [
        "0ms",
        "250ms",
        "1500ms",
        "90s",
        "1d",
    ]
