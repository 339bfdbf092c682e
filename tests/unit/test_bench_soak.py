"""``bench soak``: its pure parts (key families, data directory parts, percentiles,
slopes and projections, accounting, the checks). No Redis, no Spark, no sleeps."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

import numpy as np
import pytest
from bench.soak import (
    QUICK,
    RECEIVED,
    SENT,
    SoakParams,
    account,
    checks,
    dir_part,
    family,
    first_last_p99,
    lateness_stats,
    metric_series,
    params,
    percentile,
    projection,
    retained_per_message,
    retained_per_message_fit,
    slope_per_h,
    summarize,
    table,
    trend,
)


@pytest.mark.parametrize(
    ("key", "stream", "expected"),
    [
        ("delayline:journal:29424511", False, "delayline:journal:#"),
        ("delayline:{3}:outbox", False, "delayline:{#}:outbox"),
        ("delayline:forecast:29424511:s", False, "delayline:forecast:#:s"),
        ("delayline:inbound", True, "delayline:inbound"),  # delayline's own stream
        ("delayline:inbound:{12}", True, "delayline:inbound:{#}"),
        ("soak.3", True, "topics"),
        ("orders.timeout.DLQ", True, "topics"),
        ("cache:42", False, "cache:#"),  # not a stream, not delayline's: by its name
    ],
)
def test_family_replaces_digit_runs_and_groups_topic_streams(
    key: str, stream: bool, expected: str
) -> None:
    assert family(key, stream) == expected


@pytest.mark.parametrize(
    ("path", "part"),
    [
        ("redis/appendonly.aof", "redis"),
        ("redis/redis.log", "logs"),
        ("spark.log", "logs"),
        ("spark.log.1", "logs"),
        ("checkpoint/state/0/1/000012.log", "checkpoint"),  # RocksDB's WAL, not a log
        ("spark-tmp/blockmgr-1/0c/shuffle_0", "spark-tmp"),
        (".lock", "other"),
    ],
)
def test_dir_part(path: str, part: str) -> None:
    assert dir_part(PurePath(path)) == part


def test_percentile_uses_the_bench_rank_and_is_none_when_empty() -> None:
    ordered = list(range(1, 101))  # 1..100
    assert percentile(ordered, 0.50) == 51
    assert percentile(ordered, 0.99) == 100
    assert percentile(ordered, 0.0) == 1
    assert percentile([], 0.99) is None


def _received(rows: list[tuple[str, int, int, int]]) -> Any:
    return np.array([(i.encode(), due, at, seen) for i, due, at, seen in rows], RECEIVED)


def test_lateness_stats_of_a_window() -> None:
    # Lateness 0..999 ms by Redis's clock; one early message; the consumer 5 ms later.
    rows = [(f"m{n}", 1_000, 1_000 + n, 1_005 + n) for n in range(1_000)]
    rows.append(("early", 1_000, 990, 995))
    stats = lateness_stats(_received(rows))
    assert stats["count"] == 1_001
    assert stats["p50"] == 499
    assert stats["p99"] == 989
    assert stats["p999"] == 998
    assert stats["max"] == 999
    assert stats["early"] == 1
    assert stats["receive_max"] == 1_004
    assert stats["receive_early"] == 1


def test_lateness_stats_of_an_empty_window() -> None:
    stats = lateness_stats(np.empty(0, RECEIVED))
    assert stats["count"] == 0
    assert stats["p99"] is None
    assert stats["max"] is None
    assert stats["early"] == 0


def test_first_last_p99_compares_ten_minute_windows_of_a_long_run() -> None:
    start, end = 0, 3_600_000
    # 1 ms late during the first 10 minutes, 50 ms during the last 10, 20 ms between.
    rows = [(f"a{t}", t, t + 1, t + 2) for t in range(0, 600_000, 1_000)]
    rows += [(f"b{t}", t, t + 20, t + 21) for t in range(600_000, 3_000_001, 1_000)]
    rows += [(f"c{t}", t, t + 50, t + 51) for t in range(3_001_000, 3_600_001, 1_000)]
    found = first_last_p99(_received(rows), start, end)
    assert found["window_s"] == 600
    assert found["first_p99_ms"] == 1
    assert found["last_p99_ms"] == 50
    assert found["first_count"] == 600
    assert found["last_receive_p99_ms"] == 51


def test_first_last_p99_uses_thirds_of_a_short_run() -> None:
    rows = [(f"m{t}", t, t + t // 60_000, t) for t in range(0, 180_000, 1_000)]
    found = first_last_p99(_received(rows), 0, 180_000)
    assert found["window_s"] == 60
    assert found["first_p99_ms"] == 0
    assert found["last_p99_ms"] == 2


def test_slope_per_h_is_least_squares_per_hour() -> None:
    # 1 MB every 30 minutes: 2 MB/h, whatever the noise around the line.
    points = [(0.0, 0.0), (1_800.0, 1.0e6), (3_600.0, 2.0e6), (5_400.0, 3.0e6)]
    assert slope_per_h(points) == pytest.approx(2.0e6)
    noisy = [(0.0, 10.0), (3_600.0, 10.0), (3_600.0, 30.0), (7_200.0, 30.0)]
    assert slope_per_h(noisy) == pytest.approx(10.0)
    assert slope_per_h([(0.0, 5.0)]) is None
    assert slope_per_h([(60.0, 5.0), (60.0, 6.0)]) is None  # one time: no slope


def test_projection_goes_on_from_the_last_value_and_a_fall_is_flat() -> None:
    # At 1 h, 100; +10/h: 330 at 24 h, 7,290 at 720 h.
    assert projection((3_600.0, 100.0), 10.0, 24) == pytest.approx(330.0)
    assert projection((3_600.0, 100.0), 10.0, 720) == pytest.approx(7_290.0)
    # A falling series projects as flat, from its last value.
    assert projection((3_600.0, 100.0), -10.0, 24) == pytest.approx(100.0)
    assert projection((3_600.0, 100.0), None, 24) is None


def test_trend_fits_only_the_second_half() -> None:
    # Flat at 500 through the first half (a warm-up ramp before), +60/h after.
    points = [(0.0, 0.0), (600.0, 500.0), (1_200.0, 500.0), (1_800.0, 510.0), (2_400.0, 520.0)]
    found = trend("bytes", points, half_from_s=1_200.0)
    assert found["first"] == 0.0
    assert found["last"] == 520.0
    assert found["slope_per_h"] == pytest.approx(60.0)
    assert found["slope_sign"] == "+"
    assert found["projected_24h"] == pytest.approx(520.0 + 60.0 * (24 - 2_400 / 3_600), abs=0.1)
    assert found["projected_30d"] == pytest.approx(520.0 + 60.0 * (720 - 2_400 / 3_600), abs=0.1)


def _row(t_s: float, used: int, delivered: int, phase: str = "load") -> dict[str, Any]:
    return {
        "t_s": t_s,
        "phase": phase,
        "sent": delivered + 100,
        "delivered": delivered,
        "redis": {
            "used_memory": used,
            "used_memory_rss": used * 2,
            "topic_entries": delivered,
            "families": {"topics": {"keys": 4, "sampled": 4, "bytes": used // 2}},
        },
        "data_dir": {"redis": 1_000, "total": 1_500},
        "pss_mb": {
            "delayline": {
                "processes": {"java [1]": 300.0, "redis-server [2]": 10.0},
                "total": 310.0,
            },
            "load_generator": {"processes": {}, "total": 60.0},
        },
    }


def test_retained_per_message_is_growth_over_deliveries() -> None:
    rows = [_row(0, 1_000_000, 0), _row(30, 1_300_000, 10_000), _row(60, 1_400_000, 20_000)]
    assert retained_per_message(rows) == 20.0  # 400,000 bytes over 20,000 messages
    assert retained_per_message(rows[1:]) == 10.0
    assert retained_per_message(rows[:1]) is None
    assert retained_per_message([_row(0, 1, 5), _row(30, 2, 5)]) is None  # none delivered


def test_retained_per_message_fit_sees_through_a_sawtooth() -> None:
    # 10 bytes per message retained, plus a 1 MB bucket that comes and goes.
    rows = [_row(t, 10 * 1_000 * int(t) + (1_000_000 if n % 2 else 0), 1_000 * int(t))
            for n, t in enumerate((0.0, 30.0, 60.0, 90.0, 120.0, 150.0))]  # fmt: skip
    assert retained_per_message_fit(rows) == pytest.approx(12.9)  # 10, and 2.9 of the saw
    # From a peak to a trough, the end rows alone say memory went down.
    assert retained_per_message(rows[1:5]) == pytest.approx(-1.1)
    assert retained_per_message_fit(rows[:1]) is None


def test_metric_series_names_each_family_part_and_process() -> None:
    series = metric_series([_row(0, 1_000, 0), _row(30, 2_000, 10)])
    assert series["redis used_memory"] == ("bytes", [(0, 1_000), (30, 2_000)])
    assert series["redis topics"] == ("bytes", [(0, 500), (30, 1_000)])
    assert series["disk total"][1] == [(0, 1_500), (30, 1_500)]
    assert series["PSS java [1]"] == ("MB", [(0, 300.0), (30, 300.0)])
    assert series["PSS delayline total"][0] == "MB"


def test_summarize_fits_load_rows_only() -> None:
    rows = [_row(t, 1_000_000 + 10 * int(t), 100 * int(t)) for t in (0.0, 30.0, 60.0, 90.0)]
    rows.append(_row(120.0, 9_000_000, 12_000, phase="drain"))  # not part of the fit
    summary = summarize(rows)
    assert summary["load_rows"] == 4
    assert summary["second_half_from_s"] == 60.0
    assert summary["retained_redis_bytes_per_message"] == 0.1
    # 10 bytes a second is 36,000 an hour.
    assert summary["trends"]["redis used_memory"]["slope_per_h"] == pytest.approx(36_000)
    assert summary["trends"]["redis used_memory"]["last"] == 1_000_900


def test_account_counts_lost_duplicated_early_by_id() -> None:
    sent = np.array([(b"a", 100), (b"b", 200), (b"c", 300), (b"d", 400)], SENT)
    received = _received([
        ("a", 100, 100, 101),
        ("b", 200, 201, 202),
        ("b", 200, 205, 206),  # b twice
        ("c", 300, 299, 299),  # early
        ("x", 500, 500, 500),  # never sent
    ])  # fmt: skip
    counts = account(sent, received)
    assert counts == {
        "sent": 4,
        "delivered": 5,
        "lost": 1,  # d
        "duplicated": 1,
        "duplicate_deliveries": 1,
        "early": 1,
        "receive_early": 1,
        "wrong_due": 0,
        "never_sent": 1,
    }


def test_account_notices_a_deliver_at_that_is_not_the_one_sent() -> None:
    sent = np.array([(b"a", 100), (b"b", 200)], SENT)
    received = _received([("b", 250, 250, 251), ("a", 100, 100, 100)])
    assert account(sent, received)["wrong_due"] == 1


def test_checks_pass_a_clean_flat_run_and_name_what_fails() -> None:
    clean = {
        "accounting": {"lost": 0, "duplicated": 0, "early": 0},
        "summary": {"retained_redis_bytes_per_message_second_half": 12.5},
    }
    assert checks(clean, 64) == []
    grown = {
        "accounting": {"lost": 2, "duplicated": 0, "early": 1},
        "summary": {"retained_redis_bytes_per_message_second_half": 410.0},
    }
    failures = checks(grown, 64)
    assert any(failure.startswith("lost: 2") for failure in failures)
    assert any(failure.startswith("early: 1") for failure in failures)
    assert any("410.0 bytes per delivered message" in failure for failure in failures)
    assert checks({"summary": {}}, 64)[0] == "the run ended before its messages were counted"


def test_params_quick_presets_yield_to_given_options() -> None:
    assert params(False, {"minutes": None}) == SoakParams()
    quick = params(True, {"minutes": 2.0, "rate": 1_000.0, "sample_s": None})
    assert (quick.minutes, quick.rate, quick.sample_s) == (2.0, 1_000.0, QUICK["sample_s"])
    assert quick.max_delay_s == QUICK["max_delay_s"]
    assert quick.name == "2min-1000"


def test_table_has_a_row_per_series_and_the_counts() -> None:
    rows = [_row(t, 1_000_000 + 10 * int(t), 100 * int(t)) for t in (0.0, 30.0, 60.0, 90.0)]
    result = {
        "params": {
            "minutes": 1.5,
            "rate": 100.0,
            "min_delay_s": 1.0,
            "max_delay_s": 20.0,
            "body_bytes": 200,
            "topics": 4,
        },
        "summary": summarize(rows),
        "accounting": {
            "sent": 9_000,
            "delivered": 9_000,
            "lost": 0,
            "duplicated": 0,
            "early": 0,
            "receive_early": 0,
        },
    }
    text = table(result)
    assert "| redis used_memory | 976.6 KB | 977.4 KB | +35.2 KB |" in text
    assert "| PSS java [1] |" in text
    assert "lost 0, duplicated 0, early 0" in text
    assert "| PSS java [1] |" not in table(result, processes=False)
