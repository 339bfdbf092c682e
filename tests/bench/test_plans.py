"""The benchmark plans ask for what docs/benchmarks.md says they measure."""

from __future__ import annotations

from typing import Any

from bench.cli import sessions_for
from bench.plans import PENDING_SIZES, plan

WORKLOADS = ["steady", "burst", "pending-heavy", "saturation", "recovery"]


def kwargs(groups: dict[str, Any], group: str, index: int = 0) -> dict[str, Any]:
    return dict(groups[group][index][0][1].keywords)


def test_the_full_plan_is_the_documented_one() -> None:
    groups = plan(quick=False, rate=5_000)
    assert kwargs(groups, "steady") == {
        "rate": 5_000,
        "duration_s": 60,
        "min_delay_s": 1,
        "max_delay_s": 30,
    }
    assert kwargs(groups, "burst") == {"count": 50_000}
    assert [kwargs(groups, "pending-heavy", i)["pending"] for i in range(3)] == PENDING_SIZES
    assert PENDING_SIZES == [10_000, 100_000, 1_000_000]
    assert kwargs(groups, "recovery")["pending"] == 1_000_000
    smaller = plan(quick=False, rate=5_000, recovery_pending=10_000)
    assert kwargs(smaller, "recovery")["pending"] == 10_000
    assert smaller["recovery"][0][0][0] == "recovery-10000"  # its own result file
    fewer = plan(quick=False, rate=5_000, pending_sizes=[10_000])
    assert [session[0][0] for session in fewer["pending-heavy"]] == ["pending-heavy-10000"]
    assert kwargs(groups, "saturation")["rates"][-1] >= 20_000


def test_quick_mode_folds_everything_into_one_small_session_per_system() -> None:
    groups = plan(quick=True, rate=5_000)
    [delayline] = sessions_for("delayline", WORKLOADS, groups, quick=True)
    assert [name for name, _ in delayline] == ["steady", "burst", "pending-heavy-1000", "recovery"]
    [peer] = sessions_for("celery", WORKLOADS, groups, quick=True)
    assert [name for name, _ in peer] == ["steady", "burst"]
    assert kwargs(groups, "burst")["count"] <= 1_000
    full = sessions_for("celery", WORKLOADS, plan(quick=False, rate=5_000), quick=False)
    assert len(full) == 1 + 1 + len(PENDING_SIZES) + 1 + 1  # a fresh system per session
