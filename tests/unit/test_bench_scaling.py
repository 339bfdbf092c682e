"""``bench scaling``: what it derives from a capacity result."""

from __future__ import annotations

from bench.scaling import summary


def test_cpu_per_1k_msg_counts_the_warm_up_messages_too() -> None:
    result = {
        "params": {"rates": [1_000.0, 2_000.0], "warmup_s": 10.0},
        "capacity": 1_000.0,
        "capacity_achieved": 990.0,
        "cpu_s": 45.0,
        "peak_pss_mb": 900.0,
        "start_s": 30.0,
        "steps": [
            {"rate": 1_000.0, "received": 20_000, "lateness_p99_ms": 40, "good": True},
            {"rate": 2_000.0, "received": 15_000, "lateness_p99_ms": 900, "good": False},
        ],
    }
    found = summary(result)
    # 10,000 sent in the warm-up, 35,000 scored: 45 CPU s over 45,000 messages.
    assert found["delivered"] == 45_000
    assert found["cpu_per_1k_msg_s"] == 1.0
    assert [step["lateness_p99_ms"] for step in found["steps"]] == [40, 900]
