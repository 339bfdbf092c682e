"""Reading recurring schedules over HTTP, through httpx against the real app and a real
Redis: ``GET /v1/schedules``, ``GET /v1/schedules/{topic}/{name}`` and ``.../next``
answer what the scheduler's listing answers (a stand-in for it here; a running one in
tests/e2e/test_dashboard.py), 404 for a schedule it does not hold."""

from __future__ import annotations

from typing import Any

import httpx

from delayline.plans.scheduling import definition_from
from delayline.schedules.listed import ACTIVE, FINISHED, PAUSED, ListedSchedule
from delayline.timing import now_ms
from delayline.validation import Limits
from tests.integration.test_http_api import call, error_of
from tests.support.sinking import answer

LIMITS = Limits()
#: 2026-12-01T09:00:00Z; 2099-03-27T12:00:00Z, two days before Paris's spring change.
DECEMBER_MS = 1_796_115_600_000
SPRING_2099_MS = 4_078_296_000_000
DAY_MS = 86_400_000


def listed(
    name: str,
    topic: str,
    state: str,
    next_ms: int | None = None,
    last_ms: int | None = None,
    **definition: Any,
) -> ListedSchedule:
    """A schedule as the scheduler's listing answers it; one that ran ran 3 times and
    skipped 1."""
    schedule = definition_from(name, topic, "run", limits=LIMITS, **definition)
    ran = last_ms is not None
    return ListedSchedule(
        definition=schedule,
        version="1796115000000-0",
        state=state,
        next_run_ms=next_ms,
        last_run_ms=last_ms,
        runs=3 if ran else 0,
        skipped=1 if ran else 0,
        read_at_ms=now_ms(),
    )


#: Daily at 10:00 in Paris (09:00 UTC in winter): it last ran at DECEMBER_MS.
NIGHTLY = listed(
    "nightly", "reports", ACTIVE, DECEMBER_MS + DAY_MS, DECEMBER_MS, cron="0 10 * * *",
    tz="Europe/Paris", catch_up="all", catch_up_window=21_600_000,
)  # fmt: skip
TICK = listed("tick", "jobs", PAUSED, every="15m", paused=True, catch_up="skip")
ONCE = listed("once", "jobs", FINISHED, None, DECEMBER_MS, times=[DECEMBER_MS])
#: Spring 2099 in Paris: the runs cross the change of time.
SPRING = listed(
    "spring", "reports", ACTIVE, 4_078_344_600_000, cron="30 2 * * *", tz="Europe/Paris",
    start=SPRING_2099_MS,
)  # fmt: skip


def test_list_and_show_answer_the_state_and_the_definition_in_the_terms_of_a_put(
    redis_url: str,
) -> None:
    # In the scan's order: by topic, then name.
    scheduler = answer(redis_url, [ONCE, TICK, NIGHTLY], requests=3)

    async def scenario(http: httpx.AsyncClient) -> None:
        everything = await http.get("/v1/schedules")
        assert everything.status_code == 200, everything.text
        rows = everything.json()["schedules"]
        assert [(row["topic"], row["name"], row["state"]) for row in rows] == [
            ("jobs", "once", FINISHED),
            ("jobs", "tick", PAUSED),
            ("reports", "nightly", ACTIVE),
        ]
        nightly = rows[2]
        assert nightly == {
            "topic": "reports",
            "name": "nightly",
            "state": "active",
            "version": "1796115000000-0",
            "next_run": "2026-12-02T09:00:00.000Z",
            "next_run_ms": DECEMBER_MS + DAY_MS,
            "last_run": "2026-12-01T09:00:00.000Z",
            "last_run_ms": DECEMBER_MS,
            "runs": 3,
            "skipped": 1,
            "read_at": nightly["read_at"],
            "read_at_ms": NIGHTLY.read_at_ms,
            # As a PUT answers it: the options it does not use are left out.
            "definition": {
                "topic": "reports",
                "name": "nightly",
                "body": "run",
                "headers": {},
                "cron": "0 10 * * *",
                "tz": "Europe/Paris",
                "paused": False,
                "catch_up": "all",
                "catch_up_window": "6h",
                "catch_up_max_runs": 100,
            },
        }
        assert nightly["read_at"].endswith("Z")
        assert rows[0]["definition"]["times"] == ["2026-12-01T09:00:00.000Z"]
        assert (rows[1]["next_run"], rows[1]["last_run"], rows[1]["definition"]["every"]) == (
            None,
            None,
            "15m",
        )
        limited = await http.get("/v1/schedules", params={"topic": "jobs", "limit": 1})
        assert [row["name"] for row in limited.json()["schedules"]] == ["once"]
        one = await http.get("/v1/schedules/reports/nightly")
        assert one.status_code == 200, one.text
        assert one.json() == nightly

    call(redis_url, scenario)
    scheduler.join(5)
    asked = [(r.kind, r.topic, r.name, r.limit) for r in scheduler.asked]  # type: ignore[attr-defined]
    assert asked == [
        ("schedules", None, None, 100),
        ("schedules", "jobs", None, 1),
        ("schedules", "reports", "nightly", 1),
    ]


def test_next_shows_the_runs_in_utc_and_in_the_zone_across_a_change_of_time(
    redis_url: str,
) -> None:
    scheduler = answer(redis_url, [SPRING, TICK], requests=3)

    async def scenario(http: httpx.AsyncClient) -> None:
        response = await http.get("/v1/schedules/reports/spring/next", params={"n": 3})
        assert response.status_code == 200, response.text
        assert response.json() == {
            "topic": "reports",
            "name": "spring",
            "state": "active",
            "tz": "Europe/Paris",
            "runs": [
                {"at": "2099-03-28T01:30:00.000Z", "at_ms": 4_078_344_600_000,
                 "local": "2099-03-28T02:30:00.000+01:00"},
                # 02:30 does not exist on the 29th: a cron at set hours runs at 03:00 CEST.
                {"at": "2099-03-29T01:00:00.000Z", "at_ms": 4_078_429_200_000,
                 "local": "2099-03-29T03:00:00.000+02:00"},
                {"at": "2099-03-30T00:30:00.000Z", "at_ms": 4_078_513_800_000,
                 "local": "2099-03-30T02:30:00.000+02:00"},
            ],
        }  # fmt: skip
        default = (await http.get("/v1/schedules/reports/spring/next")).json()
        assert len(default["runs"]) == 10
        # A paused schedule: the runs to come once it is resumed, every 15 minutes in UTC.
        paused = (await http.get("/v1/schedules/jobs/tick/next", params={"n": 2})).json()
        assert (paused["state"], paused["tz"]) == ("paused", "UTC")
        first, second = (run["at_ms"] for run in paused["runs"])
        assert (first % 900_000, second - first) == (0, 900_000)
        assert paused["runs"][0]["local"].endswith("+00:00")
        for n in (0, 1_001, "ten"):
            refused = await http.get("/v1/schedules/reports/spring/next", params={"n": n})
            assert error_of(refused)[0] == 422, n

    call(redis_url, scenario)
    scheduler.join(5)


def test_a_schedule_the_scheduler_does_not_hold_is_404(redis_url: str) -> None:
    scheduler = answer(redis_url, [NIGHTLY], requests=2)

    async def scenario(http: httpx.AsyncClient) -> None:
        for path in ("/v1/schedules/reports/nope", "/v1/schedules/reports/nope/next"):
            response = await http.get(path)
            assert error_of(response) == (404, "name", "unknown"), response.text
            assert "no schedule 'nope' of topic 'reports'" in response.json()["error"]["message"]
        # Checked before the scheduler is asked.
        bad = await http.get("/v1/schedules/reports/no%20spaces")
        assert error_of(bad) == (422, "name", "pattern")
        reserved = await http.get("/v1/schedules/delayline:inbound/nightly/next")
        assert error_of(reserved) == (422, "topic", "reserved")
        assert error_of(await http.get("/v1/schedules", params={"limit": 0}))[0] == 422

    call(redis_url, scenario)
    scheduler.join(5)


def test_without_a_scheduler_the_reads_are_503(redis_url: str) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        for path in ("/v1/schedules", "/v1/schedules/reports/nightly",
                     "/v1/schedules/reports/nightly/next"):  # fmt: skip
            assert error_of(await http.get(path)) == (503, "scheduler", "unavailable"), path

    call(redis_url, scenario)


def test_the_reads_need_the_token(redis_url: str) -> None:
    async def scenario(http: httpx.AsyncClient) -> None:
        for path in ("/v1/schedules", "/v1/schedules/reports/nightly",
                     "/v1/schedules/reports/nightly/next"):  # fmt: skip
            assert error_of(await http.get(path)) == (401, "request", "auth"), path

    call(redis_url, scenario, api_token="s3cret")
