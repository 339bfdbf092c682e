"""``bench isolation``'s scoring: lateness by Redis's clock, early, lost and doubled."""

from __future__ import annotations

from bench.isolation import _score


def test_the_score_counts_early_lost_and_doubled_entries() -> None:
    entries = [("a", 1_000, 1_002), ("b", 1_000, 999), ("b", 1_000, 1_050)]
    score = _score(entries, ["a", "b", "c"])
    assert score["delivered"] == 3
    assert score["lost"] == 1
    assert score["duplicated"] == 1
    assert score["early"] == 1
    assert score["lateness_ms"]["max"] == 50
