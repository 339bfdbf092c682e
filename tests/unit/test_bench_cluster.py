"""``bench redis-cluster``: its schedule, topics, windows, deployments and table."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from bench.cluster_deploy import parse_spec
from bench.cluster_load import delivered_in, per_message_us, pick_topics, schedule
from bench.cluster_report import add_arguments, cores_per_1k, table
from bench.cluster_scaling import FULL, QUICK, estimate_s, params_from


def test_the_steps_follow_the_warm_up_back_to_back_at_absolute_times() -> None:
    phases = schedule(1_000_000, 10.0, [25_000.0, 30_000.0], 30.0)
    assert [(p.name, p.rate, p.start_ms, p.end_ms) for p in phases] == [
        ("warm", 25_000.0, 1_000_000, 1_010_000),
        ("cap25000", 25_000.0, 1_010_000, 1_040_000),
        ("cap30000", 30_000.0, 1_040_000, 1_070_000),
    ]
    assert [p.name for p in schedule(0, 0.0, [100.0], 1.0)] == ["cap100"]


def test_topics_are_spread_evenly_over_the_primaries_lowest_names_first() -> None:
    owner = {"bench.jobs.0": "a", "bench.jobs.1": "a", "bench.jobs.2": "b", "bench.jobs.3": "c"}
    found = pick_topics(lambda name: owner.get(name, "a"), ["a", "b", "c"], 1)
    assert found == ["bench.jobs.0", "bench.jobs.2", "bench.jobs.3"]
    two = pick_topics(lambda name: ["a", "b"][int(name.rsplit(".", 1)[1]) % 2], ["a", "b"], 2)
    assert two == ["bench.jobs.0", "bench.jobs.2", "bench.jobs.1", "bench.jobs.3"]
    with pytest.raises(ValueError, match="every primary"):
        pick_topics(lambda name: "a", ["a", "b"], 1)


def test_a_window_counts_the_deliveries_from_its_start_up_to_not_including_its_end() -> None:
    received = np.array([5, 10, 10, 19, 20, 30], dtype=np.int64)
    assert delivered_in(received, 10, 20) == 3
    assert delivered_in(received, 0, 100) == 6
    assert delivered_in(received, 31, 40) == 0


def test_cpu_per_message_in_microseconds() -> None:
    assert per_message_us({"p0": 1.5, "r0": 0.25}, 50_000) == {"p0": 30.0, "r0": 5.0}
    assert per_message_us({"p0": 1.0}, 0) == {"p0": None}


def test_a_deployment_is_n_shards_or_n_shards_on_p_primaries() -> None:
    assert parse_spec("3") == (3, None)
    assert parse_spec("3@1") == (3, 1)
    for bad in ("", "0", "x", "3@", "3@0", "3@a"):
        with pytest.raises(ValueError, match="N or N@P"):
            parse_spec(bad)


def test_the_full_plan_fits_in_40_minutes_and_the_smoke_test_in_4() -> None:
    assert estimate_s(FULL) <= 40 * 60
    assert estimate_s(QUICK) < 4 * 60
    assert estimate_s(replace(FULL, workloads=("capacity",))) < estimate_s(FULL)
    assert FULL.rates == [25_000.0, 30_000.0, 40_000.0, 50_000.0]
    assert {"3@1", "3"} <= set(FULL.shards)


def _deployment(shards: str, capacity: float, p99s: list[int]) -> dict[str, Any]:
    window = {
        "process_us_per_msg": {"p0": 12.5, "p1": 3.0, "r0": 4.0},
        "main_thread_us_per_msg": {"p0": 11.0, "p1": 2.5, "r0": 1.0},
    }
    steps = [{"phase": "warm", "lateness_p99_ms": 1, "achieved_rate": 1.0}]
    steps += [
        {"phase": f"cap{rate}", "lateness_p99_ms": p99, "achieved_rate": rate - 1.0}
        for rate, p99 in zip([100, 200], p99s, strict=True)
    ]
    return {
        "shards": shards,
        "nodes": {"p0": 1, "p1": 2, "r0": 3},
        "placement": {"p0": ["delayline:{0}:"], "p1": ["bench.jobs.1"]},
        "capacity": {
            "capacity": capacity,
            "steps": steps,
            "redis": window,
            "cpu_s": 30.0,
            "delivered": 60_000,
            "peak_pss_mb": 900.0,
        },
        "burst": {
            "last_delivery_s": 2.25,
            "lateness_p50_ms": 900,
            "lateness_p99_ms": 2_000,
            "lost": 0,
            "duplicates": 0,
            "early": 0,
            "peak_pss_mb": 1_200.0,
            "redis": window,
        },
    }


def test_the_table_has_a_row_per_deployment_and_a_row_per_node() -> None:
    whole = {
        "params": {"rates": [100.0, 200.0]},
        "deployments": {
            "1": {"shards": "1", "error": "TransportError('CROSSSLOT')"},
            "3@1": _deployment("3@1", 0.0, [150, 300]),
            "3": _deployment("3", 200.0, [20, 40]),
        },
    }
    text = table(whole)
    assert "| 1 | failed: TransportError('CROSSSLOT') |" in text
    assert "| 3@1 | < 100 | 150 / 300 | 99 / 199 | 2.2 | 900 / 2,000 | 0 / 0 / 0 |" in text
    assert "| 3 | ≥ 200 | 20 / 40 |" in text
    assert "p0 12.5 / p1 3.0 | 0.500 | 1,200 |" in text
    assert "| 3 | r0 | (replica) | 4.0 / 1.0 | 4.0 / 1.0 |" in text
    assert cores_per_1k({"cpu_s": 30.0, "delivered": 0}) is None
    burst_only = {"params": {"rates": [100.0]}, "deployments": {"3": _deployment("3", 0, [1, 2])}}
    del burst_only["deployments"]["3"]["capacity"]
    burst_only["deployments"]["3"]["burst"] |= {"cpu_s": 10.0, "received": 20_000}
    assert "| 3 | - | - | - | 2.2 |" in table(burst_only)
    assert "p0 12.5 / p1 3.0 (burst) | 0.500 | 1,200 |" in table(burst_only)


def test_the_options_make_the_plan() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    asked = ["--shards", "3@1,3", "--rates", "5000,10000", "--workloads", "capacity"]
    chosen = params_from(parser.parse_args([*asked, "--settle-s", "120"]))
    assert chosen.shards == ("3@1", "3")
    assert chosen.rates == [5_000.0, 10_000.0]
    assert chosen.workloads == ("capacity",)
    assert chosen.settle_s == 120
    assert chosen.burst_rate == FULL.burst_rate
    assert params_from(parser.parse_args(["--quick"])) == QUICK
    for bad in (["--workloads", "soak"], ["--shards", "3@"]):
        with pytest.raises(ValueError, match=r"workloads|N or N@P"):
            params_from(parser.parse_args(bad))
