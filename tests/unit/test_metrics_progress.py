from __future__ import annotations

from delayline.metrics import (
    GroupSample,
    bucket_label,
    bucket_labels,
    diff_histogram,
    percentile_ms,
    render_prometheus,
)
from delayline.plans.observing import Metrics
from delayline.progress import summary_line


def test_percentiles_are_bucket_upper_bounds() -> None:
    histogram = {"10": 50, "100": 45, "1000": 4, "+Inf": 1, "sum": 123_456}
    assert percentile_ms(histogram, 0.5) == 10
    assert percentile_ms(histogram, 0.9) == 100
    assert percentile_ms(histogram, 0.99) == 1000
    assert percentile_ms(histogram, 1.0) == float("inf")
    assert percentile_ms({}, 0.5) is None


def test_bucket_label() -> None:
    assert [bucket_label(ms) for ms in (-3, 0, 1, 2, 3, 60_000, 60_001)] == [
        "1",
        "1",
        "1",
        "2",
        "5",
        "60000",
        "+Inf",
    ]


def test_window_is_the_difference_of_two_snapshots() -> None:
    older = {"10": 5, "100": 1}
    newer = {"10": 5, "100": 4, "500": 2}
    window = diff_histogram(newer, older)
    assert (window["10"], window["100"], window["500"]) == (0, 3, 2)
    assert set(window) == set(bucket_labels())


def metrics(at_ms: int, stats: dict[str, int], lateness: dict[str, int]) -> Metrics:
    return Metrics(stats, lateness, batch_duration={}, heartbeat={}, read_at_ms=at_ms)


def test_summary_line() -> None:
    older = metrics(0, {"accepted": 10, "delivered": 2}, {"100": 2})
    newer = metrics(
        2_000,
        {"accepted": 30, "delivered": 12, "dropped": 3, "duplicates": 1, "rejected": 4},
        {"100": 4, "200": 8},
    )
    assert newer.pending == 14
    assert summary_line(older, newer) == (
        "accepted 30  pending 14  delivered 5.0/s  rejected 4  lateness p50 <=200 ms  p99 <=200 ms"
    )
    assert summary_line(newer, newer).endswith("lateness p50 -  p99 -")


def test_the_summary_line_warns_when_a_hard_cap_trimmed_unread_entries() -> None:
    older = metrics(0, {"topic_trimmed": 900, "topic_trimmed_unread": 10}, {})
    newer = metrics(2_000, {"topic_trimmed": 9_000, "topic_trimmed_unread": 1_510}, {})
    assert summary_line(older, newer).endswith(
        "WARNING: the hard cap trimmed 1,500 topic entries a consumer group had not "
        "acknowledged (--topic-hard-max-len)"
    )
    # Trimming what every group acknowledged is retention, not news.
    assert "WARNING" not in summary_line(
        older, metrics(2_000, {"topic_trimmed": 9_000, "topic_trimmed_unread": 10}, {})
    )


def test_prometheus_text() -> None:
    scraped = Metrics(
        stats={"accepted": 5, "delivered": 3, "dropped": 1},
        lateness={"100": 2, "500": 1, "sum": 450},
        batch_duration={"750": 4, "sum": 2_800},
        heartbeat={"updated_at_ms": "900"},
        read_at_ms=1_000,
    )
    text = scraped.prometheus()
    assert "delayline_messages_accepted_total 5\n" in text
    assert "delayline_cancels_applied_total 1\n" in text
    assert "delayline_cancels_recorded_total 0\n" in text
    assert "delayline_pending_messages 1\n" in text
    assert 'delayline_lateness_seconds_bucket{le="0.05"} 0\n' in text
    assert 'delayline_lateness_seconds_bucket{le="0.1"} 2\n' in text
    assert 'delayline_lateness_seconds_bucket{le="0.5"} 3\n' in text
    assert 'delayline_lateness_seconds_bucket{le="+Inf"} 3\n' in text
    assert "delayline_lateness_seconds_sum 0.45\n" in text
    assert "delayline_lateness_seconds_count 3\n" in text
    assert "delayline_batch_duration_seconds_count 4\n" in text
    assert scraped.last_batch_age_ms == 100
    for line in text.splitlines():  # every sample line is "name[{labels}] value"
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            float(value)
            assert name.startswith("delayline_")


def test_prometheus_shows_the_topics_that_wait_longest_first_and_bounded() -> None:
    from delayline.metrics import MAX_BLOCKED_TOPICS

    blocked = {f"t{n}": n * 1_000 for n in range(MAX_BLOCKED_TOPICS + 5)}
    blocked['odd"name\\'] = 10**9
    scraped = Metrics({}, {}, {}, {}, read_at_ms=0, blocked_ms=blocked)
    text = scraped.prometheus()
    shown = [line for line in text.splitlines() if line.startswith("delayline_delivery_blocked_s")]
    assert len(shown) == MAX_BLOCKED_TOPICS
    assert shown[0] == 'delayline_delivery_blocked_seconds{topic="odd\\"name\\\\"} 1e+06'
    assert 'topic="t24"} 24\n' in text
    assert 'topic="t4"}' not in text  # the shortest waits are cut
    assert f"delayline_delivery_blocked_topics {len(blocked)}\n" in text
    assert Metrics({}, {}, {}, {}, read_at_ms=0).to_json()["blocked_ms"] == {}


def test_each_group_adds_its_own_labelled_samples_beside_the_default_groups() -> None:
    billing = GroupSample({"delivered": 7}, {"5": 2, "sum": 8}, pending=3, outbox=1)
    text = render_prometheus({"delivered": 1}, {}, {}, pending=0, groups={"billing": billing})
    assert "delayline_messages_delivered_total 1\n" in text
    assert 'delayline_messages_delivered_total{group="billing"} 7\n' in text
    assert 'delayline_pending_messages{group="billing"} 3\n' in text
    assert 'delayline_outbox_messages{group="billing"} 1\n' in text
    assert 'delayline_lateness_seconds_bucket{group="billing",le="0.005"} 2\n' in text
    assert 'delayline_lateness_seconds_count{group="billing"} 2\n' in text
    assert 'delayline_lateness_seconds_bucket{le="+Inf"} 0\n' in text
    # One HELP and TYPE a family: every group's samples are under it.
    assert text.count("# TYPE delayline_messages_delivered_total counter") == 1
