"""Lateness histogram buckets and percentile estimates (pure).

The sink counts every delivery into a bucket of ``delivered_at_ms -
deliver_at_ms``; the buckets are cumulative-friendly upper bounds so the HTTP
layer can expose them as a Prometheus histogram unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping

#: Upper bounds (ms) of the lateness buckets; a last "+Inf" bucket takes the rest.
LATENESS_BUCKETS_MS: tuple[int, ...] = tuple(
    int(bound)
    for bound in "1 2 5 10 20 50 100 200 300 500 750 1000 2000 5000 10000 30000 60000".split()  # noqa: SIM905
)
INF_BUCKET = "+Inf"


def bucket_labels() -> list[str]:
    """Bucket labels in ascending order, ``"+Inf"`` last."""
    return [str(bound) for bound in LATENESS_BUCKETS_MS] + [INF_BUCKET]


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
    for bound, label in zip((*LATENESS_BUCKETS_MS, float("inf")), bucket_labels(), strict=True):
        seen += histogram.get(label, 0)
        if seen >= rank:
            return float(bound)
    return float("inf")
