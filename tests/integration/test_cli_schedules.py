"""``delayline schedule`` through click's CliRunner against a real Redis: add, pause,
resume and rm write their ``op=schedule`` records; next prints a definition's runs in
its zone and in UTC; list, show and next NAME print what the scheduler's listing
answers; bad input is one line and exit 2, with nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from click.testing import Result

from delayline.plans.scheduling import definition_from
from delayline.redis import keys
from delayline.schedules import ops
from delayline.schedules.spec import ALL
from delayline.testing import free_port
from delayline.validation import Limits
from tests.integration.test_cli import invoke
from tests.integration.test_http_schedule_reads import NIGHTLY, ONCE, SPRING, TICK
from tests.support.sinking import answer

LIMITS = Limits()
#: 2026-12-01T09:00:00Z, and 2020-01-01T09:00:00Z.
DECEMBER_MS = 1_796_115_600_000
JANUARY_2020_MS = 1_577_869_200_000


def records(raw: redis.Redis) -> list[ops.ScheduleOp]:
    """Every record of the inbound stream, decoded as the scheduler will."""
    return [
        ops.decode_op(fields, sent_at_ms=int(fields[b"sent_at_ms"]), limits=LIMITS)
        for _, fields in raw.xrange(keys.INBOUND)
    ]


def ok(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_add_pause_resume_and_rm_write_their_records(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    added = ok(
        invoke(
            redis_url, "schedule", "add", "nightly", "--topic", "reports", "--body", "run",
            "--cron", "30 2 * * *", "--tz", "Europe/Paris", "--start", "2026-12-01T09:00:00Z",
            "--max-runs", "30", "--catch-up", "all", "--catch-up-window", "6h",
            "--catch-up-max-runs", "4", "--key", "k", "--header", "team=data",
        )
    )  # fmt: skip
    paused = ok(invoke(redis_url, "schedule", "pause", "nightly", "--topic", "reports"))
    resumed = ok(invoke(redis_url, "schedule", "resume", "nightly", "--topic", "reports"))
    removed = ok(invoke(redis_url, "schedule", "rm", "nightly", "--topic", "reports"))

    put, *changes = records(raw_redis)
    assert put.definition == definition_from(
        "nightly", "reports", "run", limits=LIMITS, cron="30 2 * * *", tz="Europe/Paris",
        start=DECEMBER_MS, max_runs=30, catch_up=ALL, catch_up_window=21_600_000,
        catch_up_max_runs=4, key="k", headers={"team": "data"},
    )  # fmt: skip
    assert [(op.action, op.topic, op.name) for op in changes] == [
        (action, "reports", "nightly") for action in (ops.PAUSE, ops.RESUME, ops.DELETE)
    ]
    assert added[0] == "put reports/nightly: the scheduler applies it in its next batch"
    assert {
        "  body               run (3 bytes)",
        "  cron               30 2 * * *",
        "  tz                 Europe/Paris",
        "  start              2026-12-01T09:00:00.000Z",
        "  headers            team=data",
        "  catch_up_window    6h",
    } <= set(added)
    assert added[-6] == "next 5 runs, in Europe/Paris and in UTC:"
    assert all(line.endswith(":30:00.000Z") for line in added[-5:])
    assert paused == ["paused reports/nightly: the scheduler applies it in its next batch"]
    assert resumed == ["resumed reports/nightly: the scheduler applies it in its next batch"]
    assert removed == ["deleted reports/nightly: the scheduler applies it in its next batch"]


def test_add_takes_every_and_times_and_a_body_from_a_file(
    redis_url: str, raw_redis: redis.Redis, tmp_path: Path
) -> None:
    payload = tmp_path / "payload.bin"
    payload.write_bytes(b"\xff\x00")
    every = ok(
        invoke(redis_url, "schedule", "add", "tick", "--topic", "jobs", "--body-file",
               str(payload), "--every", "90s", "--anchor", "1796115600250", "--paused")
    )  # fmt: skip
    times = ok(
        invoke(redis_url, "schedule", "add", "twice", "--topic", "jobs", "--body-file", "-",
               "--at", "2020-01-01T10:00:00+01:00", "--at", str(JANUARY_2020_MS + 1),
               input=b"from stdin")
    )  # fmt: skip
    tick, twice = (op.definition for op in records(raw_redis))
    assert tick == definition_from(
        "tick", "jobs", b"\xff\x00", limits=LIMITS, every=90_000, anchor=DECEMBER_MS + 250,
        paused=True,
    )  # fmt: skip
    assert twice == definition_from(
        "twice", "jobs", b"from stdin", limits=LIMITS, times=[JANUARY_2020_MS, JANUARY_2020_MS + 1]
    )
    assert "  body (base64)      /wA= (2 bytes)" in every
    assert "  every              90s" in every
    assert "  paused             True" in every
    assert times[-1] == "no run to come"  # both are past


def test_next_shows_the_runs_in_the_zone_and_in_utc_across_a_change_of_time(
    redis_url: str, raw_redis: redis.Redis
) -> None:
    # Paris skips 02:00-03:00 on 28 March 2027: a cron at set hours runs at 03:00 CEST.
    shown = ok(
        invoke(redis_url, "schedule", "next", "--cron", "30 2 * * *", "--tz", "Europe/Paris",
               "--from", "2027-03-26T12:00:00Z", "-n", "3")
    )  # fmt: skip
    assert shown == [
        "next 3 runs, in Europe/Paris and in UTC:",
        "  2027-03-27T02:30:00+01:00 CET    2027-03-27T01:30:00.000Z",
        "  2027-03-28T03:00:00+02:00 CEST   2027-03-28T01:00:00.000Z",
        "  2027-03-29T02:30:00+02:00 CEST   2027-03-29T00:30:00.000Z",
    ]
    # In autumn 02:30 comes twice; a cron at set hours runs in the first pass only.
    autumn = ok(
        invoke(redis_url, "schedule", "next", "--cron", "30 2 * * *", "--tz", "Europe/Paris",
               "--from", "2027-10-30T12:00:00Z", "-n", "2")
    )  # fmt: skip
    assert autumn[1:] == [
        "  2027-10-31T02:30:00+02:00 CEST   2027-10-31T00:30:00.000Z",
        "  2027-11-01T02:30:00+01:00 CET    2027-11-01T01:30:00.000Z",
    ]
    assert raw_redis.keys("delayline:inbound*") == []  # a preview writes nothing


def test_next_keeps_to_start_end_and_max_runs(redis_url: str) -> None:
    every = ["schedule", "next", "--every", "90m", "--from", "2026-12-01T00:00:00Z"]
    assert ok(invoke(redis_url, *every, "-n", "2")) == [
        "next 2 runs, in UTC:",
        "  2026-12-01T01:30:00.000Z",
        "  2026-12-01T03:00:00.000Z",
    ]
    bounded = ok(
        invoke(redis_url, *every, "--anchor", "2026-12-01T09:00:00.250Z",
               "--start", "2026-12-01T09:00:00Z", "--end", "2026-12-01T12:00:00Z")
    )  # fmt: skip
    assert bounded[1:] == [
        "  2026-12-01T09:00:00.250Z",
        "  2026-12-01T10:30:00.250Z",
    ]
    capped = ok(invoke(redis_url, *every, "--max-runs", "1", "-n", "5"))
    assert capped == ["next 1 run, in UTC:", "  2026-12-01T01:30:00.000Z"]
    ended = ok(invoke(redis_url, *every, "--end", "2026-12-01T01:00:00Z"))
    assert ended == ["no run to come"]
    millis = ok(
        invoke(redis_url, "schedule", "next", "--cron", "*/20 * * * * *", "--tz", "Asia/Kolkata",
               "--from", "1796115600000", "-n", "1")
    )  # fmt: skip
    assert millis[1] == "  2026-12-01T14:30:20+05:30 IST    2026-12-01T09:00:20.000Z"


ADD = ["schedule", "add", "s", "--topic", "t", "--body", "x"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*ADD, "--cron", "61 * * * *"], "cron field 1 (minute) '61'"),
        (["schedule", "next", "--cron", "0 9 30 2 *"], "never runs"),
        ([*ADD, "--cron", "0 9 * * *", "--tz", "Mars/Olympus"], "unknown time zone"),
        ([*ADD, "--every", "999ms"], "every must be at least 1s; got 999ms"),
        ([*ADD, "--every", "900000"], "every must be a duration such as 1s"),
        ([*ADD, "--cron", "0 9 * * *", "--every", "1h"], "exactly one of --cron, --every"),
        ([*ADD], "give exactly one of --cron, --every and --at"),
        (["schedule", "next", "--every", "1h", "--tz", "UTC"], "tz goes with cron only"),
        ([*ADD, "--every", "1h", "--start", "2026-12-01T09:00:00"], "has no timezone offset"),
        ([*ADD, "--at", "tomorrow"], "--at 'tomorrow' is not RFC 3339"),
        ([*ADD, "--every", "1h", "--max-runs", "0"], "max_runs must be 1 or more"),
        ([*ADD, "--every", "1h", "--catch-up-window", "soon"], "not a duration: 'soon'"),
        ([*ADD, "--every", "1h", "--header", "novalue"], "--header must be name=value"),
        ([*ADD, "--every", "1h", "--body-file", "-"], "exactly one of --body and --body-file"),
        (["schedule", "add", "s", "--topic", "t", "--every", "1h"], "exactly one of --body"),
        (["schedule", "add", "no spaces", "--topic", "t", "--body", "x", "--every", "1h"],
         "a schedule's name must be 1-200 characters"),
        (["schedule", "pause", "s", "--topic", "delayline:x"], "reserved for delayline"),
        (["schedule", "next", "--every", "1h", "--from", "soon"], "--from 'soon' is not"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    redis_url: str, raw_redis: redis.Redis, args: list[str], message: str
) -> None:
    result = invoke(redis_url, *args)
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ")
    assert message in result.output
    assert result.output.count("\n") == 1
    assert raw_redis.keys("delayline:inbound*") == []


def test_an_unreachable_redis_is_exit_1() -> None:
    result = invoke(f"redis://127.0.0.1:{free_port()}/0", "schedule", "rm", "s", "--topic", "t")
    assert result.exit_code == 1
    assert result.output.startswith("error: ")
    assert "Redis is unreachable" in result.output
    assert result.output.count("\n") == 1


# -- reading schedules: list, show, next NAME (a stand-in answers the scheduler's listing) ----


def test_list_prints_a_line_a_schedule_and_json_as_the_http_api(redis_url: str) -> None:
    scheduler = answer(redis_url, [ONCE, TICK, NIGHTLY], requests=3)
    shown = ok(invoke(redis_url, "schedule", "list"))
    assert [line.rstrip() for line in shown] == [
        "TOPIC    NAME     STATE     SPEC                          NEXT RUN                  "
        "LAST RUN                  RUNS  SKIPPED  CATCH-UP",
        "jobs     once     finished  at 2026-12-01T09:00:00.000Z   -                         "
        "2026-12-01T09:00:00.000Z     3        1  latest",
        "jobs     tick     paused    every 15m                     -                         "
        "-                            0        0  skip",
        "reports  nightly  active    cron 0 10 * * * Europe/Paris  2026-12-02T09:00:00.000Z  "
        "2026-12-01T09:00:00.000Z     3        1  all 6h ≤100",
        "3 listed",
    ]
    as_json = ok(invoke(redis_url, "schedule", "list", "--topic", "jobs", "--json"))
    assert json.loads(as_json[0]) == {"schedules": [ONCE.to_view(), TICK.to_view()]}
    first = ok(invoke(redis_url, "schedule", "list", "--limit", "1"))
    assert first[-1] == "1 listed (the first 1)"
    scheduler.join(5)
    asked = [(r.topic, r.limit) for r in scheduler.asked]  # type: ignore[attr-defined]
    assert asked == [(None, 100), ("jobs", 100), (None, 1)]


def test_show_prints_the_state_then_the_definition(redis_url: str) -> None:
    scheduler = answer(redis_url, [NIGHTLY, TICK], requests=3)
    shown = ok(invoke(redis_url, "schedule", "show", "nightly", "--topic", "reports"))
    assert shown[0].startswith("reports/nightly: active, as of 20")
    assert shown[1:7] == [
        "  next run           2026-12-02T10:00:00+01:00 CET    2026-12-02T09:00:00.000Z",
        "  last run           2026-12-01T10:00:00+01:00 CET    2026-12-01T09:00:00.000Z",
        "  runs sent          3",
        "  runs skipped       1",
        "  version            1796115000000-0",
        "  body               run (3 bytes)",
    ]
    assert {"  cron               0 10 * * *", "  catch_up           all"} <= set(shown)
    as_json = ok(invoke(redis_url, "schedule", "show", "tick", "--topic", "jobs", "--json"))
    assert json.loads(as_json[0]) == TICK.to_view()
    missing = invoke(redis_url, "schedule", "show", "nope", "--topic", "reports")
    assert missing.exit_code == 1, missing.output
    assert missing.output.startswith("error: no schedule 'nope' of topic 'reports'")
    assert missing.output.count("\n") == 1
    scheduler.join(5)


def test_next_name_previews_the_stored_schedule(redis_url: str) -> None:
    scheduler = answer(redis_url, [SPRING, TICK], requests=3)
    spring = ok(invoke(redis_url, "schedule", "next", "spring", "--topic", "reports", "-n", "3"))
    assert spring == [
        "next 3 runs, in Europe/Paris and in UTC:",
        "  2099-03-28T02:30:00+01:00 CET    2099-03-28T01:30:00.000Z",
        "  2099-03-29T03:00:00+02:00 CEST   2099-03-29T01:00:00.000Z",
        "  2099-03-30T02:30:00+02:00 CEST   2099-03-30T00:30:00.000Z",
    ]
    later = ok(
        invoke(redis_url, "schedule", "next", "spring", "--topic", "reports", "-n", "1",
               "--from", "2099-03-28T12:00:00Z")
    )  # fmt: skip
    assert later[1:] == ["  2099-03-29T03:00:00+02:00 CEST   2099-03-29T01:00:00.000Z"]
    paused = ok(invoke(redis_url, "schedule", "next", "tick", "--topic", "jobs", "-n", "1"))
    assert paused[:2] == ["jobs/tick is paused: the runs to come once it is resumed",
                          "next 1 run, in UTC:"]  # fmt: skip
    scheduler.join(5)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["next", "nightly"], "a stored schedule is NAME and --topic, given together"),
        (["next", "--topic", "reports", "--every", "1h"], "NAME and --topic, given together"),
        (["next", "nightly", "--topic", "reports", "--every", "1h"],
         "give NAME --topic T for a stored schedule, or --cron, --every or --at"),
        (["next", "nightly", "--topic", "reports", "--max-runs", "0"], "not both"),
        (["show", "no spaces", "--topic", "reports"], "a schedule's name must be 1-200"),
        (["list", "--limit", "0"], "0 is not in the range 1<=x<=10000"),
    ],
)  # fmt: skip
def test_reading_with_bad_input_is_exit_2(redis_url: str, args: list[str], message: str) -> None:
    result = invoke(redis_url, "schedule", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_reading_without_a_scheduler_is_one_line_and_exit_1(redis_url: str) -> None:
    for args in (["list"], ["show", "s", "--topic", "t"], ["next", "s", "--topic", "t"]):
        result = invoke(redis_url, "schedule", *args)
        assert result.exit_code == 1, result.output
        assert result.output.startswith("error: ")
        assert result.output.count("\n") == 1
