"""Histograms kept as Redis hashes, percentile estimates, and the Prometheus text format (pure).

A histogram hash maps each bucket's upper bound in ms (``"+Inf"`` last) to a
count, plus ``"sum"``, the total of the observed values in ms. The buckets are
the same for delivery lateness and batch duration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

#: Upper bounds (ms) of the buckets; a last "+Inf" bucket takes the rest.
BUCKETS_MS: tuple[int, ...] = tuple(
    int(bound)
    for bound in "1 2 5 10 20 50 100 200 300 500 750 1000 2000 5000 10000 30000 60000".split()  # noqa: SIM905
)
INF_BUCKET = "+Inf"
SUM_FIELD = "sum"


def bucket_labels() -> list[str]:
    """Bucket labels in ascending order, ``"+Inf"`` last."""
    return [str(bound) for bound in BUCKETS_MS] + [INF_BUCKET]


def bucket_label(value_ms: int) -> str:
    """The label of the bucket that counts ``value_ms``."""
    for bound in BUCKETS_MS:
        if value_ms <= bound:
            return str(bound)
    return INF_BUCKET


def diff_histogram(newer: Mapping[str, int], older: Mapping[str, int]) -> dict[str, int]:
    """Counts added between two snapshots of the same histogram."""
    return {label: newer.get(label, 0) - older.get(label, 0) for label in bucket_labels()}


def percentile_ms(histogram: Mapping[str, int], fraction: float) -> float | None:
    """Estimate the ``fraction`` quantile (0..1) as the upper bound of its bucket.

    Returns None for an empty histogram and ``inf`` if the quantile lies in the
    last bucket. An upper bound errs on the late side, which is the safe side.
    """
    total = sum(histogram.get(label, 0) for label in bucket_labels())
    if total <= 0:
        return None
    rank = fraction * total
    seen = 0
    for bound, label in zip((*BUCKETS_MS, float("inf")), bucket_labels(), strict=True):
        seen += histogram.get(label, 0)
        if seen >= rank:
            return float(bound)
    return float("inf")


@dataclass(frozen=True)
class Counter:
    """A counter of the ``delayline:stats`` hash, named once for every interface."""

    #: Its field in the hash.
    field: str
    #: Its name in ``delayline stats`` (underscores as spaces) and in its JSON.
    name: str
    #: Its Prometheus metric.
    metric: str
    help: str


#: The counters, in the order ``delayline stats`` shows them. A cancel is
#: recorded when the scheduler reads it and applied when its message's time
#: comes: until then the message still counts as pending.
COUNTERS = (
    Counter("accepted", "accepted", "delayline_messages_accepted_total",
            "Sends the scheduler accepted."),
    Counter("delivered", "delivered", "delayline_messages_delivered_total",
            "Messages written to their topic."),
    Counter("rejected", "rejected", "delayline_records_rejected_total",
            "Inbound records refused."),
    Counter("duplicates", "duplicates", "delayline_duplicates_suppressed_total",
            "Repeated ids not delivered again."),
    Counter("cancels", "cancels_recorded", "delayline_cancels_recorded_total",
            "Cancels the scheduler recorded; each is applied when its message's time comes."),
    Counter("dropped", "cancels_applied", "delayline_cancels_applied_total",
            "Messages a cancel removed, counted when their time came."),
    Counter("topic_trimmed", "topic_trimmed", "delayline_topic_trimmed_total",
            "Topic stream entries removed by their retention."),
    Counter("topic_trimmed_unread", "topic_trimmed_unread",
            "delayline_topic_trimmed_unread_total",
            "Topic stream entries a hard cap removed while a consumer group still needed them."),
    Counter("rejects_trimmed", "rejects_trimmed", "delayline_rejects_trimmed_total",
            "Old rejects removed to keep the rejects stream bounded."),
)  # fmt: skip
#: What ``pending`` counts, in words.
PENDING_HELP = (
    "Accepted messages not yet delivered or removed: a cancelled one counts until its time comes."
)


#: What ``delayline_delivery_blocked_seconds`` measures, in words.
BLOCKED_HELP = (
    "How long the oldest message waiting for a topic outside Redis (Kafka's) has waited: "
    "unknown, backing off after a failure, or slow to acknowledge."
)
#: Most topics ``delayline_delivery_blocked_seconds`` shows (the longest waiting), so
#: that its labels stay few.
MAX_BLOCKED_TOPICS = 20


class GroupSample(NamedTuple):
    """A group's own metrics, for its ``group`` label: counters, lateness, pending, outbox."""

    stats: Mapping[str, int]
    lateness: Mapping[str, int]
    pending: int
    outbox: int


def render_prometheus(
    stats: Mapping[str, int],
    lateness: Mapping[str, int],
    batch_duration: Mapping[str, int],
    pending: int,
    outbox: int = 0,
    blocked_ms: Mapping[str, int] | None = None,
    groups: Mapping[str, GroupSample] | None = None,
) -> str:
    """The Prometheus text exposition (version 0.0.4) of delayline's metrics; of the
    topics in ``blocked_ms``, the MAX_BLOCKED_TOPICS that waited longest. The default
    group's samples have no label, as before groups; each of ``groups`` (at most
    groups.MAX_GROUPS) adds its own, labelled ``group``, to the counters, the pending
    and outbox gauges and the lateness histogram."""
    by_group = {_label(name): sample for name, sample in (groups or {}).items()}
    lines: list[str] = []
    for counter in COUNTERS:
        lines += [
            f"# HELP {counter.metric} {counter.help}",
            f"# TYPE {counter.metric} counter",
            f"{counter.metric} {stats.get(counter.field, 0)}",
        ]
        lines += [
            f'{counter.metric}{{group="{name}"}} {sample.stats.get(counter.field, 0)}'
            for name, sample in by_group.items()
        ]
    lines += [
        f"# HELP delayline_pending_messages {PENDING_HELP}",
        "# TYPE delayline_pending_messages gauge",
        f"delayline_pending_messages {pending}",
        *(f'delayline_pending_messages{{group="{n}"}} {s.pending}' for n, s in by_group.items()),
        "# HELP delayline_outbox_messages Pending messages in the outbox (due within the horizon).",
        "# TYPE delayline_outbox_messages gauge",
        f"delayline_outbox_messages {outbox}",
        *(f'delayline_outbox_messages{{group="{n}"}} {s.outbox}' for n, s in by_group.items()),
        f"# HELP delayline_delivery_blocked_seconds {BLOCKED_HELP}",
        "# TYPE delayline_delivery_blocked_seconds gauge",
    ]
    longest = sorted((blocked_ms or {}).items(), key=lambda item: -item[1])
    lines += [
        f'delayline_delivery_blocked_seconds{{topic="{_label(topic)}"}} {_seconds(waited_ms)}'
        for topic, waited_ms in longest[:MAX_BLOCKED_TOPICS]
    ]
    lines += [
        "# HELP delayline_delivery_blocked_topics Topics whose messages wait (all of them).",
        "# TYPE delayline_delivery_blocked_topics gauge",
        f"delayline_delivery_blocked_topics {len(longest)}",
    ]
    lateness_by_group = {"": lateness} | {
        f'group="{name}",': sample.lateness for name, sample in by_group.items()
    }
    lines += _histogram(
        "delayline_lateness_seconds",
        "delivered_at - deliver_at of each delivery.",
        lateness_by_group,
    )
    lines += _histogram(
        "delayline_batch_duration_seconds",
        "Duration of each scheduler batch.",
        {"": batch_duration},
    )
    return "\n".join(lines) + "\n"


def _histogram(
    metric: str, help_text: str, histograms: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """A histogram family: a series per ``histograms`` key, the labels it puts before
    ``le`` (``""``: none)."""
    lines = [f"# HELP {metric} {help_text}", f"# TYPE {metric} histogram"]
    for labels, histogram in histograms.items():
        cumulative = 0
        for bound, label in zip((*BUCKETS_MS, None), bucket_labels(), strict=True):
            cumulative += histogram.get(label, 0)
            le = "+Inf" if bound is None else _seconds(bound)
            lines.append(f'{metric}_bucket{{{labels}le="{le}"}} {cumulative}')
        series = f"{{{labels.rstrip(',')}}}" if labels else ""
        lines.append(f"{metric}_sum{series} {_seconds(histogram.get(SUM_FIELD, 0))}")
        lines.append(f"{metric}_count{series} {cumulative}")
    return lines


def _label(value: str) -> str:
    """``value`` escaped as a Prometheus label value."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _seconds(value_ms: int) -> str:
    return f"{value_ms / 1000:g}"
