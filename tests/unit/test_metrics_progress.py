from __future__ import annotations

from delayline.metrics import bucket_labels, diff_histogram, percentile_ms
from delayline.progress import Snapshot, summary_line


def test_percentiles_are_bucket_upper_bounds() -> None:
    histogram = {"10": 50, "100": 45, "1000": 4, "+Inf": 1}
    assert percentile_ms(histogram, 0.5) == 10
    assert percentile_ms(histogram, 0.9) == 100
    assert percentile_ms(histogram, 0.99) == 1000
    assert percentile_ms(histogram, 1.0) == float("inf")
    assert percentile_ms({}, 0.5) is None


def test_window_is_the_difference_of_two_snapshots() -> None:
    older = {"10": 5, "100": 1}
    newer = {"10": 5, "100": 4, "500": 2}
    window = diff_histogram(newer, older)
    assert (window["10"], window["100"], window["500"]) == (0, 3, 2)
    assert set(window) == set(bucket_labels())


def test_summary_line() -> None:
    older = Snapshot(0, {"accepted": 10, "delivered": 2}, {"100": 2})
    newer = Snapshot(
        2_000,
        {"accepted": 30, "delivered": 12, "dropped": 3, "duplicates": 1, "rejected": 4},
        {"100": 4, "200": 8},
    )
    assert newer.pending == 14
    assert summary_line(older, newer) == (
        "accepted 30  pending 14  delivered 5.0/s  rejected 4  lateness p50 <=200 ms  p99 <=200 ms"
    )
    assert summary_line(newer, newer).endswith("lateness p50 -  p99 -")
