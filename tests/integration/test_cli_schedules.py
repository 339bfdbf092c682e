"""``delayline schedule`` through click's CliRunner against a real Redis: add, pause,
resume and rm write their ``op=schedule`` records; next prints a definition's runs in
its zone and in UTC; bad input is one line and exit 2, with nothing written."""

from __future__ import annotations

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
