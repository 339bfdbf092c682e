"""The benchmark plans ask for what docs/benchmarks.md says they measure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.plans import (
    CAPACITY_RATES,
    PENDING_SIZES,
    WORKLOADS,
    Step,
    default_workloads,
    plan,
    session_estimate_s,
    sessions_for,
)
from bench.systems import DEFAULT_SYSTEMS, KAFKA, PEERS, SYSTEMS


def step(steps: list[Step], name: str) -> dict[str, Any]:
    [found] = [s for s in steps if s.name == name]
    return dict(found.params)


def names(sessions: list[list[Step]]) -> list[list[str]]:
    return [[s.name for s in session] for session in sessions]


def test_the_full_plan_is_the_documented_one() -> None:
    steps = plan()
    assert step(steps, "steady") == {
        "rate": 5_000,
        "duration_s": 60,
        "min_delay_s": 1,
        "max_delay_s": 45,
        "settle_s": 20,
        "raw": False,
        "shadow": False,
    }
    assert step(steps, "steady-raw")["raw"] is True
    assert step(steps, "burst")["count"] == 50_000
    assert step(steps, "capacity")["rates"] == CAPACITY_RATES == [5_000, 10_000, 15_000, 20_000,
                                                                  25_000]  # fmt: skip
    assert step(steps, "capacity")["step_s"] == 20
    assert PENDING_SIZES == [10_000, 100_000, 1_000_000]
    assert step(steps, "idle") == {"pending": 1_000_000, "measure_s": 60}
    assert step(steps, "recovery-1000000")["pending"] == 1_000_000
    assert "burst-500k" not in {s.name for s in steps}
    long = plan(long=True)
    assert step(long, "burst-500k")["count"] == 500_000
    assert "pending-heavy-10000000" in {s.name for s in long}


def test_sessions_share_a_system_and_the_backlog_grows() -> None:
    steps = plan()
    assert names(sessions_for("delayline", default_workloads(), steps)) == [
        ["burst", "steady", "steady-raw", "capacity"],
        ["pending-heavy-10000", "pending-heavy-100000", "idle", "pending-heavy-1000000",
         "recovery-1000000"],
    ]  # fmt: skip
    zset = names(sessions_for("zset", default_workloads(), steps))
    assert zset[0] == ["burst", "steady", "capacity"]
    for peer in PEERS:
        assert names(sessions_for(peer, default_workloads(), steps)) == [["burst"], ["steady"]]
    # The half-million burst runs on a system of its own, not before steady.
    assert names(sessions_for("delayline", ["burst", "burst-500k", "steady"], plan(long=True))) == [
        ["burst", "steady"],
        ["burst-500k"],
    ]
    # A larger pending-heavy size comes after recovery's kill: on a fresh system.
    long = plan(long=True)
    assert names(sessions_for("delayline", ["pending-heavy", "recovery"], long)) == [
        ["pending-heavy-10000", "pending-heavy-100000", "pending-heavy-1000000",
         "recovery-1000000"],
        ["pending-heavy-10000000"],
    ]  # fmt: skip


def test_the_shadow_experiment_runs_only_when_named_in_a_session_of_its_own() -> None:
    steps = plan()
    assert "steady-shadow" not in default_workloads(long=True)
    assert step(steps, "steady-shadow")["shadow"] is True
    assert names(sessions_for("delayline", ["steady", "steady-shadow"], steps)) == [
        ["steady"],
        ["steady-shadow"],
    ]
    assert sessions_for("zset", ["steady-shadow"], steps) == []


def plan_seconds(systems: Sequence[str], workloads: Sequence[str]) -> float:
    steps = plan()
    return sum(
        seconds
        for system in systems
        for session in sessions_for(system, workloads, steps)
        for _, seconds in session_estimate_s(system, session)
    )


def test_the_full_plan_fits_in_40_minutes() -> None:
    assert plan_seconds(DEFAULT_SYSTEMS, default_workloads()) < 40 * 60


def test_the_kafka_plan_fits_in_40_minutes_beside_delayline_on_redis() -> None:
    assert set(DEFAULT_SYSTEMS) | set(KAFKA) == set(SYSTEMS)
    systems = ("delayline", *KAFKA)
    assert plan_seconds(systems, ["steady", "capacity"]) < 40 * 60
    for system in KAFKA:
        names = {step.name for session in sessions_for(system, WORKLOADS, plan())
                 for step in session}  # fmt: skip
        assert names == {"burst", "steady", "capacity"}


def test_quick_mode_runs_every_system_in_one_small_session() -> None:
    steps = plan(quick=True)
    [delayline] = names(sessions_for("delayline", WORKLOADS, steps, quick=True))
    assert {"steady-raw", "idle"} <= set(delayline)
    for peer in PEERS:
        assert names(sessions_for(peer, WORKLOADS, steps, quick=True)) == [["burst", "steady"]]
    assert step(steps, "burst")["count"] <= 1_000
