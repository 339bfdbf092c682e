"""``bench schedules``: its pure parts (the mix, the scoring of runs, the ratios, the
report). No Redis, no Spark, no sleeps."""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
import pytest
import redis
from bench import soak
from bench.schedule_mix import (
    CRON_ZONES,
    DAY_S,
    EVERY_MIX,
    HOUR_S,
    RUN,
    TOPICS,
    by_instant,
    describe,
    duplicates,
    expected_seconds,
    fields,
    lost_fast,
    mix,
    run_row,
    score,
    shares,
    stalls,
)
from bench.schedule_report import (
    add_arguments,
    by_kind,
    cpu_per_1k_runs,
    kind_of,
    pressure_share,
    pss_ratios,
    slow_commands,
    summary,
    table,
)
from bench.schedules import QUICK, from_args, params

from delayline import ids
from delayline.plans.scheduling import definition_from
from delayline.redis import scripts
from delayline.scheduler.pump import PUMP_BATCH
from delayline.schedules.runs import RUN_AT_HEADER, SCHEDULE_HEADER
from delayline.timing import format_time
from delayline.validation import Limits

T0 = 1_790_000_000_000  # a whole second


def test_shares_split_a_total_by_weights_and_give_the_rest_to_the_last() -> None:
    assert shares(10, [0.5, 0.3, 0.2]) == [5, 3, 2]
    assert shares(7, [0.5, 0.5]) == [3, 4]
    assert sum(shares(49_500, [w for _, w in EVERY_MIX])) == 49_500


def test_the_mix_has_the_fast_schedules_first_then_half_every_half_cron() -> None:
    specs = mix(1_000, 9_000)
    assert len(specs) == 10_000
    assert len({(spec.topic, spec.name) for spec in specs}) == 10_000
    fast = specs[:1_000]
    assert {spec.kind for spec in fast} == {"every 1s"}
    assert all(spec.every_ms == 1_000 and spec.anchor_ms is None for spec in fast)
    every = [spec for spec in specs[1_000:] if spec.every_ms is not None]
    cron = [spec for spec in specs[1_000:] if spec.cron is not None]
    assert len(every) == len(cron) == 4_500
    # Anchored at a whole second of their period, so that they do not all run at once.
    assert all(s.anchor_ms is not None and s.anchor_ms % 1_000 == 0 for s in every)
    assert all(0 <= (s.anchor_ms or 0) < (s.every_ms or 0) for s in every)
    assert len({s.anchor_ms for s in every if s.period_s == 3_600}) > 1_000
    assert {s.tz for s in cron} == set(CRON_ZONES)
    assert {spec.topic for spec in specs} == {f"sched.{n}" for n in range(TOPICS)}


def test_the_cron_schedules_are_hourly_or_daily_at_minutes_spread_evenly() -> None:
    cron = [spec for spec in mix(0, 2 * 3 * 60 * 24) if spec.cron is not None]
    hourly = [spec for spec in cron if spec.period_s == HOUR_S]
    daily = [spec for spec in cron if spec.period_s == DAY_S]
    assert len(hourly) * 2 == len(daily)
    minutes = [int(spec.cron.split()[0]) for spec in hourly if spec.cron]
    assert all(minutes.count(m) == len(hourly) // 60 for m in range(60))
    at = {tuple(spec.cron.split()[:2]) for spec in daily if spec.cron}
    assert len(at) == 60 * 24  # every minute of the day, once per daily cron family
    assert all(spec.cron.endswith("* * *") for spec in cron if spec.cron)


def test_the_mix_is_the_same_for_a_seed() -> None:
    assert mix(10, 100) == mix(10, 100)
    assert mix(10, 100) != mix(10, 100, seed=1)


def test_every_schedule_of_the_mix_is_one_the_sdk_accepts() -> None:
    for spec in mix(5, 400):
        definition = definition_from(spec.name, spec.topic, b"run", limits=Limits(),
                                     **spec.arguments())  # fmt: skip
        assert definition.address == (spec.topic, spec.name)


def test_describe_counts_the_runs_per_second_of_each_kind() -> None:
    small, big = describe(mix(1_000, 0)), describe(mix(1_000, 99_000))
    assert small["runs_per_s"] == 1_000.0
    assert big["schedules"] == 100_000
    assert big["kinds"]["every 1s"] == {"schedules": 1_000, "runs_per_s": 1_000.0}
    # The slow ones add a few percent: the two sizes deliver about the same.
    assert 1_000 < big["runs_per_s"] < 1_050
    hourly = big["kinds"]["cron hourly"]
    assert hourly["runs_per_s"] == pytest.approx(hourly["schedules"] / 3_600, abs=1e-3)


def _runs(rows: list[tuple[str, int, int, int]]) -> np.ndarray[Any, Any]:
    """RUN records of (schedule, due ms, delivered ms, run-at ms); ids derived per run."""
    return np.array(
        [
            (ids.derived_message_id(due, name.encode()), due, at, at + 2, name.encode(), run_at)
            for name, due, at, run_at in rows
        ],
        RUN,
    )


def test_run_row_reads_the_due_time_from_the_id_and_the_schedule_from_the_headers() -> None:
    message_id = ids.derived_message_id(T0, b"x")
    headers = {SCHEDULE_HEADER: "fast-000001", RUN_AT_HEADER: format_time(T0), "a": "b"}
    entry = {
        b"id": message_id.encode(),
        b"body": b"run",
        b"headers": json.dumps(headers).encode(),
        b"deliver_at_ms": str(T0).encode(),
        b"delivered_at_ms": str(T0 + 7).encode(),
    }
    row = np.array([run_row(f"{T0 + 7}-3".encode(), entry, T0 + 9)], RUN)[0]
    assert row["id"] == message_id.encode()
    assert row["deliver_at_ms"] == T0
    assert row["delivered_at_ms"] == T0 + 7  # the topic entry's id, Redis's clock
    assert row["received_ms"] == T0 + 9
    assert row["schedule"] == b"fast-000001"
    assert row["run_at_ms"] == T0


def test_run_row_of_a_message_without_the_run_headers() -> None:
    entry = {b"id": ids.derived_message_id(T0, b"y").encode(), b"headers": b"{}"}
    row = np.array([run_row(f"{T0}-0".encode(), entry, T0)], RUN)[0]
    assert row["schedule"] == b""
    assert row["run_at_ms"] == -1


def test_expected_seconds_counts_whole_seconds_in_a_closed_range() -> None:
    assert expected_seconds(T0, T0) == 1
    assert expected_seconds(T0, T0 + 2_999) == 3
    assert expected_seconds(T0 + 1, T0 + 999) == 0
    assert expected_seconds(T0 - 1, T0 + 1_000) == 2
    assert expected_seconds(T0 + 5_000, T0) == 0


def test_lost_fast_finds_the_whole_seconds_a_fast_schedule_did_not_run() -> None:
    rows = [(name, T0 + s * 1_000, T0 + s * 1_000 + 1, T0 + s * 1_000)
            for name in ("fast-a", "fast-b") for s in range(5)]  # fmt: skip
    runs = _runs([row for row in rows if row[:2] != ("fast-b", T0 + 3_000)])
    found = lost_fast(runs, ["fast-a", "fast-b", "fast-c"], T0, T0 + 4_000)
    assert found == {"expected": 15, "found": 9, "lost": 6, "off_grid": 0}
    # A run twice is found once; a run off the grid is counted as such; outside: ignored.
    extra = _runs([("fast-a", T0, T0 + 5, T0), ("fast-a", T0 + 500, T0 + 501, T0 + 500),
                   ("fast-a", T0 + 9_000, T0 + 9_001, T0 + 9_000)])  # fmt: skip
    both = np.concatenate([runs, extra])
    assert lost_fast(both, ["fast-a", "fast-b"], T0, T0 + 4_000) == {
        "expected": 10, "found": 9, "lost": 1, "off_grid": 1}  # fmt: skip


def test_duplicates_count_values_more_than_once_and_their_extra_copies() -> None:
    assert duplicates(np.array([1, 2, 2, 3, 3, 3])) == {"duplicated": 2, "extra_copies": 3}
    assert duplicates(np.array([], dtype=int)) == {"duplicated": 0, "extra_copies": 0}
    runs = _runs([("s", T0, T0, T0), ("s", T0, T0 + 1, T0), ("t", T0, T0, T0)])
    assert duplicates(fields(runs, "schedule", "run_at_ms"))["extra_copies"] == 1


def test_by_instant_groups_runs_by_due_ms_and_counts_those_past_one_pump_call() -> None:
    rows = [("a", T0, T0 + 1, T0)] * 3 + [("b", T0 + 1_000, T0 + 1_030, T0 + 1_000)]
    found = by_instant(_runs(rows))
    assert found == {"count": 2, "late": 1, "worst_p50": 30, "worst_p99": 30, "most_runs": 3,
                     "over_pump_batch": 0}  # fmt: skip
    crowd = _runs([("a", T0, T0 + 1, T0)] * (PUMP_BATCH + 1))
    assert by_instant(crowd)["over_pump_batch"] == 1
    assert by_instant(_runs([]))["count"] == 0


def test_score_keeps_the_runs_due_in_the_window_and_counts_what_went_wrong() -> None:
    fast = ["fast-a", "fast-b"]
    rows = [(name, T0 + s * 1_000, T0 + s * 1_000 + s, T0 + s * 1_000)
            for name in fast for s in range(10)]  # fmt: skip
    rows += [("every-60s-x", T0 + 2_500, T0 + 2_480, T0 + 2_500)]  # 20 ms early
    rows += [("fast-a", T0 + 3_000, T0 + 3_050, T0 + 3_000)]  # a second copy
    rows += [("fast-a", T0 - 1_000, T0, T0 - 1_000)]  # before the window
    found = score(_runs(rows), fast, T0, T0 + 9_000)
    assert found["runs"] == 22
    assert found["fast_runs_per_s"] == pytest.approx(21 / 9, abs=0.1)
    assert found["lateness_ms"]["early"] == 1
    assert found["lateness_ms"]["max"] == 50
    assert found["lateness_ms"]["p50"] == 5  # -20, 0, 0, 1, 1, ..., 9, 9, 50: the 12th
    assert found["slow_lateness_ms"]["count"] == 1
    assert found["duplicates_by_id"]["extra_copies"] == 1
    assert found["duplicates_by_run"]["extra_copies"] == 1
    assert found["lost"]["lost"] == 0
    assert found["run_at_not_due"] == 0


def _size(n: int, pss: dict[str, float], p99: int = 5, control: bool = False) -> dict[str, Any]:
    processes = [{"process": f"{kind} [{i}]", "pss_last_mb": mb, "cpu_s": 1.0}
                 for i, (kind, mb) in enumerate(pss.items())]  # fmt: skip
    late = {"p50": 1, "p90": 2, "p99": p99, "max": 9, "early": 0}
    return {
        "size": n, "control": control, "pss_total_mb": sum(pss.values()),
        "by_kind": by_kind(processes), "cpu_cores": 1.1, "cpu_per_1k_runs_per_s": 1.1,
        "wall_s": 300.0, "data_dir": {"checkpoint": 2**20}, "taken_in_s": 5.0,
        "put": {"sdk_s": 0.2, "pipelined_s": 10.0}, "setup": {
            "later_than_1s": 0, "max_lateness_ms": 3, "longest_gap_ms": 990, "busy_replies": 0,
            "redis_slow_commands": {"over_20ms": 2}}, "load_average": {
            "before": [2.0, 2.0, 2.0], "after": [2.5, 2.1, 2.0]},
        "score": {"runs_per_s": 1_000.0, "lateness_ms": late,
                  "instants": {"late": 0, "count": 300},
                  "lost": {"lost": 0, "expected": 300_000},
                  "duplicates_by_id": {"extra_copies": 0},
                  "duplicates_by_run": {"extra_copies": 0}},
    }  # fmt: skip


def test_by_kind_sums_processes_of_one_kind_and_counts_the_live_ones() -> None:
    rows = [
        {"process": "java [1]", "pss_last_mb": 400.0, "cpu_s": 10.0},
        {"process": "python -m pyspark.worker [2]", "pss_last_mb": 60.0, "cpu_s": 1.0},
        {"process": "python -m pyspark.worker [3]", "pss_last_mb": 61.0, "cpu_s": 2.0},
        {"process": "python -m pyspark.worker [4]", "pss_last_mb": 0.0, "cpu_s": 0.5},
    ]
    kinds = by_kind(rows)
    assert list(kinds) == ["java", "python -m pyspark.worker"]
    assert kinds["python -m pyspark.worker"] == {"count": 2, "pss_mb": 121.0, "cpu_s": 3.5}
    assert kind_of("redis-server [12]") == "redis-server"


def test_pss_ratios_in_all_and_by_kind_of_the_live_processes() -> None:
    small = _size(1_000, {"java": 400.0, "redis-server": 50.0, "?": 0.0})
    big = _size(100_000, {"java": 440.0, "redis-server": 50.0, "python -m x": 10.0})
    ratios = pss_ratios(small, big)
    assert ratios["total"] == pytest.approx(500 / 450, abs=1e-3)
    assert ratios["by_kind"] == {"java": 1.1, "python -m x": None, "redis-server": 1.0}


def test_cpu_per_1k_runs_per_s() -> None:
    assert cpu_per_1k_runs(1.1, 1_000.0) == 1.1
    assert cpu_per_1k_runs(0.5, 2_000.0) == 0.25
    assert cpu_per_1k_runs(0.5, 0.0) is None


def test_summary_and_table_compare_the_sizes_and_the_control() -> None:
    control = _size(0, {"java": 390.0}, p99=9, control=True)
    sizes = [_size(1_000, {"java": 400.0}), _size(100_000, {"java": 480.0}, p99=35)]
    found = summary(sizes, control)
    assert found["pss_ratio"]["total"] == 1.2
    assert found["pss_ratio_met"] is False
    assert found["lateness_p99_ms"] == {"1,000 schedules": 5, "100,000 schedules": 35,
                                        "one-shot control": 9}  # fmt: skip
    assert found["lateness_p99_met"]["100,000 schedules"] is False
    text = table({"control": control, "sizes": sizes, "summary": found})
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows[1].startswith("| one-shot control |")
    assert rows[3].startswith("| 100,000 schedules | 1,000.0 | 1 / 2 / 35 / 9 |")
    assert "| java | 400.0 | 480.0 | 1.2 |" in text
    assert "| 100,000 schedules | 10.2 | 5.0 | 0 | 3 | 990 | 2 | 0 |" in text


def test_params_quick_and_given_and_sizes_that_cannot_hold_the_fast_ones() -> None:
    assert params(False, {}).sizes == (1_000, 100_000)
    assert params(True, {"duration_s": None}).sizes == QUICK["sizes"]
    assert params(True, {"duration_s": 30.0}).duration_s == 30.0
    with pytest.raises(ValueError, match="fast schedules"):
        params(False, {"sizes": (500, 1_000)})


def test_slow_commands_count_them_and_name_scripts_by_their_file() -> None:
    pump = f"EVALSHA {scripts.PUMP.sha} 3 a b c 1000".encode()
    entries = [
        {"id": 12, "duration": 25_000, "command": pump},
        {"id": 11, "duration": 12_000, "command": pump},
        {"id": 10, "duration": 15_000, "command": b"XRANGE delayline:inbound - +"},
    ]
    found = slow_commands(entries)
    assert found["count"] == 3
    assert found["over_20ms"] == 1
    assert found["commands"] == {scripts.PUMP.file: {"count": 2, "max_ms": 25.0},
                                 "XRANGE": {"count": 1, "max_ms": 15.0}}  # fmt: skip
    assert slow_commands([]) == {"count": 0, "over_20ms": 0, "commands": {}}


def test_stalls_read_the_deliveries_between_two_times() -> None:
    rows = [
        ("a", T0, T0 + 1, T0),
        ("a", T0 + 1_000, T0 + 4_000, T0 + 1_000),
        ("a", T0 + 2_000, T0 + 4_001, T0 + 2_000),
        ("a", T0 + 9_000, T0 + 9_000, T0 + 9_000),  # after the span
    ]
    found = stalls(_runs(rows), T0, T0 + 5_000)
    assert found == {"runs": 3, "later_than_1s": 2, "max_lateness_ms": 3_000,
                     "longest_gap_ms": 3_999}  # fmt: skip
    assert stalls(_runs([]), T0, T0 + 1)["longest_gap_ms"] is None


def test_pressure_share_is_the_stalled_share_of_the_wall_time() -> None:
    before = {"cpu some": 10.0, "io full": 2.0}
    after = {"cpu some": 40.0, "io full": 2.5, "memory some": 1.0}
    assert pressure_share(before, after, 100.0) == {"cpu some": 0.3, "io full": 0.005}


def test_patiently_waits_out_busy_replies_and_raises_other_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(soak.time, "sleep", lambda _: None)
    replies: list[object] = [redis.ResponseError("BUSY Valkey is busy running a script."),
                             redis.ResponseError("BUSY again"), "done"]  # fmt: skip
    busy: list[bool] = []

    def call() -> object:
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    assert soak.patiently(call, lambda: busy.append(True)) == "done"
    assert len(busy) == 2
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        soak.patiently(lambda: (_ for _ in ()).throw(redis.ResponseError("WRONGTYPE")))


def test_the_command_line_refuses_sizes_that_cannot_hold_the_fast_ones() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--sizes", "500,1000"])
    errors: list[str] = []
    assert from_args(args, errors.append) == 2
    assert errors == ["every size must hold the 1,000 fast schedules"]
