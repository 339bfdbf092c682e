"""A schedule's definition: its checks, each with a clear error, and its one JSON
encoding, which reads back what it wrote."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delayline.errors import DecodeError, ValidationError
from delayline.schedules.recurrence import Every, Times, parse_cron
from delayline.schedules.spec import ALL, CatchUp, Schedule, validate_name
from delayline.validation import Limits

pytestmark = pytest.mark.unit

LIMITS = Limits()


def test_a_definition_reads_back_what_it_wrote() -> None:
    schedules = [
        Schedule.create(
            "reports",
            "monday-9",
            b"\x00binary\xff",
            parse_cron("0 9 * * 1", "Europe/Paris"),
            limits=LIMITS,
            key="k",
            headers={"a": "b"},
            start_ms=1,
            end_ms=2_000_000_000_000,
            max_runs=10,
            paused=True,
            catch_up=CatchUp.create(ALL, window_ms=60_000, max_runs=5),
        ),
        Schedule.create("t", "every", "text", Every(1_000, anchor_ms=-7), limits=LIMITS),
        Schedule.create("t", "times", b"", Times((5, 3)), limits=LIMITS),
    ]
    for schedule in schedules:
        assert Schedule.from_json(schedule.to_json(), LIMITS) == schedule


def test_the_view_is_the_definition_in_the_terms_a_person_gives() -> None:
    cron = Schedule.create(
        "reports", "nightly", "run", parse_cron("30 2 * * *", "Europe/Paris"), limits=LIMITS,
        key="k", headers={"a": "b"}, start_ms=1_796_115_600_000, max_runs=3,
        catch_up=CatchUp.create(ALL, window_ms=5_400_000, max_runs=7),
    )  # fmt: skip
    assert cron.to_view() == {
        "topic": "reports",
        "name": "nightly",
        "body": "run",
        "key": "k",
        "headers": {"a": "b"},
        "cron": "30 2 * * *",
        "tz": "Europe/Paris",
        "start": "2026-12-01T09:00:00.000Z",
        "max_runs": 3,
        "paused": False,
        "catch_up": "all",
        "catch_up_window": "90m",
        "catch_up_max_runs": 7,
    }
    every = Schedule.create("t", "n", b"\xff", Every(900_000, 250), limits=LIMITS, end_ms=9)
    view = every.to_view()
    assert (view["body_b64"], "body" in view, "key" in view) == ("/w==", False, False)
    assert (view["every"], view["anchor"], view["end"]) == (
        "15m",
        "1970-01-01T00:00:00.250Z",
        "1970-01-01T00:00:00.009Z",
    )
    assert Schedule.create("t", "n", b"", Times((2, 1)), limits=LIMITS).to_view()["times"] == [
        "1970-01-01T00:00:00.001Z",
        "1970-01-01T00:00:00.002Z",
    ]


@settings(max_examples=50, deadline=None)
@given(body=st.binary(max_size=200), name=st.from_regex(r"[A-Za-z0-9._:-]{1,40}", fullmatch=True))
def test_any_body_and_name_survive_the_encoding(body: bytes, name: str) -> None:
    schedule = Schedule.create("t", name, body, Every(60_000), limits=LIMITS)
    assert Schedule.from_json(schedule.to_json(), LIMITS) == schedule


@pytest.mark.parametrize(
    ("change", "field", "rule"),
    [
        ({"name": ""}, "name", "pattern"),
        ({"name": "a b"}, "name", "pattern"),
        ({"topic": "delayline:x"}, "topic", "reserved"),
        ({"max_runs": 0}, "max_runs", "range"),
        ({"max_runs": True}, "max_runs", "range"),
        ({"start_ms": 10, "end_ms": 5}, "end", "order"),
        ({"body": 5}, "body", "type"),
        ({"headers": {"a": 1}}, "headers", "type"),
    ],
)
def test_each_rule_is_refused_with_its_field(
    change: dict[str, object], field: str, rule: str
) -> None:
    arguments: dict[str, object] = {"topic": "t", "name": "n", "body": b"x", **change}
    topic, name, body = arguments.pop("topic"), arguments.pop("name"), arguments.pop("body")
    with pytest.raises(ValidationError) as raised:
        Schedule.create(topic, name, body, Every(1_000), limits=LIMITS, **arguments)  # type: ignore[arg-type]
    assert (raised.value.field, raised.value.rule) == (field, rule)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        (("often",), "catch_up"),
        ((ALL, -1), "catch_up_window"),
        ((ALL, None, 0), "catch_up_max_runs"),
        ((ALL, None, 10_001), "catch_up_max_runs"),
    ],
)
def test_a_bad_catch_up_is_refused(arguments: tuple[object, ...], field: str) -> None:
    with pytest.raises(ValidationError) as raised:
        CatchUp.create(*arguments)
    assert raised.value.field == field


def test_the_default_catch_up_is_latest() -> None:
    assert Schedule.create("t", "n", b"", Every(1_000), limits=LIMITS).catch_up.policy == "latest"


def test_validate_name_says_what_a_name_may_hold() -> None:
    with pytest.raises(ValidationError, match=r"1-200 characters of \[A-Za-z0-9._:-\]"):
        validate_name("x" * 201)


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"v": 2}',
    ],
)
def test_what_is_not_a_definition_is_a_decode_error(text: str) -> None:
    with pytest.raises(DecodeError):
        Schedule.from_json(text, LIMITS)


@pytest.mark.parametrize(
    ("recurrence", "field"),
    [
        (None, "recurrence"),
        ({}, "recurrence"),
        ({"cron": "* * * * *", "every_ms": 1000}, "recurrence"),
        ({"every_ms": 10}, "every"),
        ({"times_ms": ["x"]}, "times"),
        ({"cron": "* * *"}, "cron"),
        ({"cron": "* * * * *", "tz": "Mars/Olympus"}, "tz"),
    ],
)
def test_a_bad_recurrence_is_refused(recurrence: object, field: str) -> None:
    good = json.loads(Schedule.create("t", "n", b"", Every(1_000), limits=LIMITS).to_json())
    with pytest.raises(ValidationError) as raised:
        Schedule.from_json(json.dumps({**good, "recurrence": recurrence}), LIMITS)
    assert raised.value.field == field
