"""``bench redis-cluster``: its schedule, topics and windows."""

from __future__ import annotations

import numpy as np
import pytest
from bench.cluster_load import delivered_in, per_message_us, pick_topics, schedule


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
