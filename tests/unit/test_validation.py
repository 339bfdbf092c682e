from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delayline.errors import MAX_QUOTED_CHARS, ValidationError, quoted
from delayline.validation import (
    MAX_DELAY_MS,
    Limits,
    resolve_deliver_at_ms,
    validate_body,
    validate_headers,
    validate_key,
    validate_topic,
)

NOW_MS = 1_800_000_000_000
LIMITS = Limits()


def rule_of(call: object) -> tuple[str, str]:
    assert callable(call)
    with pytest.raises(ValidationError) as caught:
        call()
    return caught.value.field, caught.value.rule


@given(st.from_regex(r"[A-Za-z0-9._:-]{1,249}", fullmatch=True))
def test_valid_topics_pass(topic: str) -> None:
    if not topic.startswith("delayline:"):
        assert validate_topic(topic) == topic


@pytest.mark.parametrize(
    "topic",
    [
        "",
        "a" * 250,
        "has space",
        "two/sla/shes",
        "Upper/group",
        "/x",
        "x/",
        "ünïcode",
        "tab\t",
        None,
        7,
        b"bytes",
    ],
)
def test_invalid_topics_are_refused(topic: object) -> None:
    assert rule_of(lambda: validate_topic(topic)) == ("topic", "pattern")


def test_reserved_topic_prefix_is_refused() -> None:
    assert rule_of(lambda: validate_topic("delayline:inbound")) == ("topic", "reserved")


def test_body_accepts_bytes_and_str_up_to_the_limit() -> None:
    assert validate_body(b"x" * 1024 * 1024, LIMITS) == b"x" * 1024 * 1024
    assert validate_body("héllo", LIMITS) == "héllo".encode()
    assert validate_body(bytearray(b"ab"), LIMITS) == b"ab"


def test_body_over_the_limit_is_refused() -> None:
    big = b"x" * (1024 * 1024 + 1)
    assert rule_of(lambda: validate_body(big, LIMITS)) == ("body", "max_bytes")
    assert rule_of(lambda: validate_body(b"123", Limits(max_body_bytes=2))) == ("body", "max_bytes")


@pytest.mark.parametrize("body", [None, 12, {"a": 1}, ["x"]])
def test_body_of_other_types_is_refused(body: object) -> None:
    assert rule_of(lambda: validate_body(body, LIMITS)) == ("body", "type")


def test_headers_must_be_an_object_of_strings() -> None:
    assert validate_headers({"trace": "abc"}, LIMITS) == {"trace": "abc"}
    assert validate_headers(None, LIMITS) == {}
    assert rule_of(lambda: validate_headers({"n": 1}, LIMITS)) == ("headers", "type")
    assert rule_of(lambda: validate_headers(["a"], LIMITS)) == ("headers", "type")


def test_headers_over_16_kib_are_refused() -> None:
    headers = {"h": "x" * (16 * 1024)}
    assert rule_of(lambda: validate_headers(headers, LIMITS)) == ("headers", "max_bytes")


def test_key_is_an_optional_short_string() -> None:
    assert validate_key(None) is None
    assert validate_key("order-42") == "order-42"
    assert rule_of(lambda: validate_key(42)) == ("key", "type")
    assert rule_of(lambda: validate_key("k" * 1025)) == ("key", "type")


def resolve(**kwargs: object) -> int:
    return resolve_deliver_at_ms(now_ms=NOW_MS, limits=LIMITS, **kwargs)  # type: ignore[arg-type]


def test_schedule_forms() -> None:
    assert resolve() == NOW_MS
    assert resolve(delay=timedelta(minutes=30)) == NOW_MS + 1_800_000
    assert resolve(delay=1500) == NOW_MS + 1500
    assert resolve(deliver_at=NOW_MS + 42) == NOW_MS + 42
    moment = datetime(2027, 1, 15, tzinfo=UTC)
    assert resolve(deliver_at=moment) == int(moment.timestamp() * 1000)
    assert resolve(level=5) == NOW_MS + 60_000
    assert resolve(deliver_at=NOW_MS - 10_000) == NOW_MS - 10_000  # past: delivered at once


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delay": 1, "deliver_at": NOW_MS},
        {"delay": 1, "level": 2},
        {"deliver_at": NOW_MS, "level": 2},
        {"delay": 1, "deliver_at": NOW_MS, "level": 2},
    ],
)
def test_only_one_schedule_form_is_allowed(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="only one of delay, deliver_at or level"):
        resolve(**kwargs)


def test_negative_delays_are_refused() -> None:
    assert rule_of(lambda: resolve(delay=-1)) == ("delay", "negative")
    assert rule_of(lambda: resolve(delay=timedelta(seconds=-1))) == ("delay", "negative")


def test_naive_deliver_at_is_refused() -> None:
    naive = datetime(2027, 1, 1)
    assert rule_of(lambda: resolve(deliver_at=naive)) == ("deliver_at", "timezone")


def test_delivery_beyond_the_maximum_delay_is_refused() -> None:
    assert resolve(delay=MAX_DELAY_MS) == NOW_MS + MAX_DELAY_MS
    assert rule_of(lambda: resolve(delay=MAX_DELAY_MS + 1)) == ("delay", "max_delay")
    far = NOW_MS + MAX_DELAY_MS + 1
    assert rule_of(lambda: resolve(deliver_at=far)) == ("deliver_at", "max_delay")
    tight = Limits(max_delay_ms=1000)
    with pytest.raises(ValidationError, match="beyond the maximum delay of 1000 ms"):
        resolve_deliver_at_ms(now_ms=NOW_MS, limits=tight, delay=1001)


@pytest.mark.parametrize("bad", [1.5, "10s", True])
def test_delay_must_be_timedelta_or_int(bad: object) -> None:
    assert rule_of(lambda: resolve(delay=bad)) == ("delay", "type")


def test_deliver_at_before_the_epoch_is_refused() -> None:
    assert rule_of(lambda: resolve(deliver_at=-5)) == ("deliver_at", "range")


@pytest.mark.parametrize(("value", "shown"), [("abc", "'abc'"), (b"\x00", "b'\\x00'"), (7, "7")])
def test_short_values_are_quoted_as_their_repr(value: object, shown: str) -> None:
    assert quoted(value) == shown


@given(st.text(max_size=300) | st.binary(max_size=300) | st.integers())
def test_quoted_values_are_at_most_100_characters(value: object) -> None:
    shown = quoted(value)
    assert len(shown) <= MAX_QUOTED_CHARS
    full = repr(value)
    assert shown == full if len(full) <= MAX_QUOTED_CHARS else shown == full[:99] + "…"


def test_a_70000_character_topic_is_quoted_briefly() -> None:
    with pytest.raises(ValidationError) as caught:
        validate_topic("a b" * 70_000)
    shown = "'" + ("a b" * 33)[:98] + "…"  # the opening quote and 98 characters
    assert caught.value.message == f"topic must be 1-249 characters of [A-Za-z0-9._:-], got {shown}"
