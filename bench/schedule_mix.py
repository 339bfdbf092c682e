"""``bench schedules``' pure parts: the mix of schedules, and the scoring of their runs.

The mix (:func:`mix`): ``fast`` schedules ``every="1s"`` (anchored at the Unix
epoch, the SDK's default, so that each second's runs fall at the whole second),
then ``slow`` ones, half of them ``every`` one of EVERY_MIX's periods with an
anchor at a random whole second of the period (so that they do not all fall at
the top of the hour), half cron: a third hourly (``M * * * *``), two thirds
daily (``M H * * *``), each kind's minutes (and hours) spread evenly, in
CRON_ZONES in turn. Every schedule is on one of TOPICS topics, in turn.

A delivered run is a RUN record (:func:`run_row`): its message id, the due time
the id encodes, the topic entry's time (Redis's clock at delivery), the
consumer's clock, and the schedule and run time of its headers. No I/O here.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from numpy.lib.recfunctions import repack_fields

from bench.soak import Records, lateness_stats, percentile
from delayline import ids
from delayline.scheduler.pump import PUMP_BATCH
from delayline.schedules.runs import RUN_AT_HEADER, SCHEDULE_HEADER
from delayline.timing import to_epoch_ms

#: A run later than this (ms) makes its instant late (the issue's p99 target).
LATE_MS = 20
#: A run later than this (ms) counts as stalled, in :func:`stalls`.
STALL_MS = 1_000
#: Topics ``sched.0`` ..; schedule n is on topic n mod TOPICS.
TOPICS = 10
TOPIC_PREFIX = "sched."
#: The fast schedules' period, ms.
FAST_EVERY_MS = 1_000
#: The slow ``every`` schedules' periods (s) and their shares of them.
EVERY_MIX = ((60, 0.005), (300, 0.02), (900, 0.075), (1_800, 0.2), (3_600, 0.7))
#: The zones of the cron schedules, in turn.
CRON_ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney")
#: One cron schedule in HOURLY_EVERY is hourly, the others daily.
HOURLY_EVERY = 3
HOUR_S = 3_600
DAY_S = 86_400

#: What the consumer writes per run delivered. ``deliver_at_ms`` is the time the
#: message id encodes, ``delivered_at_ms`` the topic entry's (its stream id's ms),
#: ``received_ms`` the consumer's clock: bench.soak's names, so that its
#: :func:`~bench.soak.lateness_stats` reads these records.
RUN = np.dtype(
    [
        ("id", "S26"),
        ("deliver_at_ms", "<i8"),
        ("delivered_at_ms", "<i8"),
        ("received_ms", "<i8"),
        ("schedule", "S40"),
        ("run_at_ms", "<i8"),
    ]
)


@dataclass(frozen=True)
class Spec:
    """One schedule of the mix: ``every_ms`` (and ``anchor_ms``) or ``cron`` in ``tz``;
    ``period_s`` is how often it runs (a cron's nominal period)."""

    name: str
    topic: str
    kind: str
    period_s: int
    every_ms: int | None = None
    anchor_ms: int | None = None
    cron: str | None = None
    tz: str | None = None

    def arguments(self) -> dict[str, Any]:
        """The recurrence arguments of ``Client.schedule``."""
        if self.cron is not None:
            return {"cron": self.cron, "tz": self.tz}
        return {"every": self.every_ms, "anchor": self.anchor_ms}


def topic(index: int) -> str:
    return f"{TOPIC_PREFIX}{index % TOPICS}"


def topics() -> list[str]:
    return [topic(n) for n in range(TOPICS)]


def shares(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` split by ``weights`` (which sum to 1), rounded down; the rest to the
    last share."""
    counts = [int(total * weight) for weight in weights]
    counts[-1] += total - sum(counts)
    return counts


def mix(fast: int, slow: int, seed: int = 32) -> list[Spec]:
    """The schedules of one size: ``fast`` every 1 s, then ``slow`` slow ones (see the
    module's docstring); names are unique, deterministic for a ``seed``."""
    rng = random.Random(seed)
    specs = [
        Spec(f"fast-{n:06d}", topic(n), "every 1s", 1, every_ms=FAST_EVERY_MS) for n in range(fast)
    ]
    n = fast
    every_count = slow // 2
    counts = shares(every_count, [weight for _, weight in EVERY_MIX])
    for (period_s, _), count in zip(EVERY_MIX, counts, strict=True):
        for _ in range(count):
            anchor_ms = rng.randrange(period_s) * 1_000
            name = f"every-{period_s}s-{n:06d}"
            every_ms = period_s * 1_000
            specs.append(Spec(name, topic(n), f"every {period_s}s", period_s, every_ms, anchor_ms))
            n += 1
    made = {"hourly": 0, "daily": 0}  # each kind's own count: its minutes spread evenly
    for k in range(slow - every_count):
        kind = "hourly" if k % HOURLY_EVERY == 0 else "daily"
        j = made[kind]
        made[kind] += 1
        minute, zone = j % 60, CRON_ZONES[k % len(CRON_ZONES)]
        if kind == "hourly":
            cron, period_s = f"{minute} * * * *", HOUR_S
        else:
            cron, period_s = f"{minute} {(j // 60) % 24} * * *", DAY_S
        spec = Spec(
            f"cron-{kind[0]}-{n:06d}", topic(n), f"cron {kind}", period_s, cron=cron, tz=zone
        )
        specs.append(spec)
        n += 1
    return specs


def describe(specs: Iterable[Spec]) -> dict[str, Any]:
    """The mix in numbers: schedules and expected runs/s by kind, and in all."""
    kinds: dict[str, dict[str, float]] = {}
    for spec in specs:
        kind = kinds.setdefault(spec.kind, {"schedules": 0, "runs_per_s": 0.0})
        kind["schedules"] += 1
        kind["runs_per_s"] += 1 / spec.period_s
    return {
        "schedules": int(sum(kind["schedules"] for kind in kinds.values())),
        "runs_per_s": round(sum(kind["runs_per_s"] for kind in kinds.values()), 2),
        "kinds": {
            name: {"schedules": int(kind["schedules"]), "runs_per_s": round(kind["runs_per_s"], 3)}
            for name, kind in kinds.items()
        },
    }


def run_row(entry_id: bytes, fields: Mapping[bytes, bytes], received_ms: int) -> tuple[Any, ...]:
    """A RUN record of a topic entry (``row_of`` of :func:`bench.soak.consume`)."""
    message_id = fields[b"id"]
    headers = json.loads(fields.get(b"headers") or b"{}")
    run_at = headers.get(RUN_AT_HEADER)
    run_at_ms = to_epoch_ms(datetime.fromisoformat(run_at)) if run_at else -1
    return (
        message_id,
        ids.deliver_at_ms_of(message_id.decode()),
        int(entry_id.split(b"-")[0]),
        received_ms,
        headers.get(SCHEDULE_HEADER, "").encode(),
        run_at_ms,
    )


def fields(records: Records, *names: str) -> Records:
    """``names`` of ``records``, as records of their own (so that np.unique compares them)."""
    return repack_fields(records[list(names)])


def duplicates(values: np.ndarray[Any, Any]) -> dict[str, int]:
    """How many values come more than once, and their extra copies."""
    if len(values) == 0:
        return {"duplicated": 0, "extra_copies": 0}
    _, counts = np.unique(values, return_counts=True)
    return {"duplicated": int((counts > 1).sum()), "extra_copies": int((counts - 1).sum())}


def expected_seconds(first_ms: int, last_ms: int) -> int:
    """How many whole seconds (multiples of 1,000 ms) fall in [first_ms, last_ms]."""
    return max(0, last_ms // 1_000 - (first_ms + 999) // 1_000 + 1)


def lost_fast(
    runs: Records, fast_names: Iterable[str], first_ms: int, last_ms: int
) -> dict[str, int]:
    """The fast schedules' runs due at a whole second in [first_ms, last_ms] that
    ``runs`` lacks (each such schedule has one at every whole second), and the runs
    of theirs that ``runs`` has off that grid (none should be)."""
    names = np.array([name.encode() for name in fast_names], dtype=RUN["schedule"])
    due = runs["deliver_at_ms"]
    theirs = runs[np.isin(runs["schedule"], names) & (due >= first_ms) & (due <= last_ms)]
    on_grid = theirs[theirs["deliver_at_ms"] % FAST_EVERY_MS == 0]
    found = len(np.unique(fields(on_grid, "schedule", "deliver_at_ms")))
    expected = len(names) * expected_seconds(first_ms, last_ms)
    return {
        "expected": expected,
        "found": found,
        "lost": expected - found,
        "off_grid": len(theirs) - len(on_grid),
    }


def by_instant(runs: Records) -> dict[str, Any]:
    """The lateness of ``runs`` by the instant (ms) they are due at: how many instants,
    how many had a run later than LATE_MS, percentiles of each instant's latest
    run, the most runs due at one instant, and how many instants had more than one
    pump call moves (PUMP_BATCH): they are split evenly over the calls they need,
    and each call after the first waits for the one before it. (The runs of one
    call share their topic entries' ms.)"""
    if len(runs) == 0:
        return {"count": 0, "late": 0, "worst_p50": None, "worst_p99": None,
                "most_runs": 0, "over_pump_batch": 0}  # fmt: skip
    ordered = np.sort(runs, order="deliver_at_ms")
    due = ordered["deliver_at_ms"]
    starts = np.flatnonzero(np.r_[True, due[1:] != due[:-1]])
    worst = np.sort(np.maximum.reduceat(ordered["delivered_at_ms"] - due, starts))
    sizes = np.diff(np.r_[starts, len(due)])
    return {
        "count": len(starts),
        "late": int((worst > LATE_MS).sum()),
        "worst_p50": percentile(worst, 0.50),
        "worst_p99": percentile(worst, 0.99),
        "most_runs": int(sizes.max()),
        "over_pump_batch": int((sizes > PUMP_BATCH).sum()),
    }


def score(runs: Records, fast_names: Sequence[str], first_ms: int, last_ms: int) -> dict[str, Any]:
    """The runs due in [first_ms, last_ms] (by their id): their rate, lateness (ms,
    topic entry - due, and the consumer's), early, duplicated (by id, and by
    schedule and run time) and lost (:func:`lost_fast`) counts."""
    due = runs["deliver_at_ms"]
    window = runs[(due >= first_ms) & (due <= last_ms)]
    window_s = max(1e-3, (last_ms - first_ms) / 1_000)
    late = np.sort(window["delivered_at_ms"] - window["deliver_at_ms"])
    fast = np.isin(window["schedule"], np.array([n.encode() for n in fast_names], RUN["schedule"]))
    wrong_run_at = int((window["run_at_ms"] != window["deliver_at_ms"]).sum())
    return {
        "runs": len(window),
        "runs_per_s": round(len(window) / window_s, 1),
        "fast_runs_per_s": round(int(fast.sum()) / window_s, 1),
        "slow_runs_per_s": round(int((~fast).sum()) / window_s, 1),
        "lateness_ms": lateness_stats(window) | {"p90": percentile(late, 0.90)},
        "slow_lateness_ms": lateness_stats(window[~fast]),
        "duplicates_by_id": duplicates(window["id"]),
        "duplicates_by_run": duplicates(fields(window, "schedule", "run_at_ms")),
        "run_at_not_due": wrong_run_at,
        "lost": lost_fast(runs, fast_names, first_ms, last_ms),
        "instants": by_instant(window),
    }


def stalls(runs: Records, from_ms: int, to_ms: int) -> dict[str, Any]:
    """What the runs delivered (by their topic entries' ms) in [from_ms, to_ms) say of
    stalls: how many came, how many more than STALL_MS late, the latest, and the
    longest gap between two deliveries (ms): the scheduler putting schedules in,
    before the steady window."""
    at = runs["delivered_at_ms"]
    chosen = runs[(at >= from_ms) & (at < to_ms)]
    at = np.sort(chosen["delivered_at_ms"])
    late = chosen["delivered_at_ms"] - chosen["deliver_at_ms"]
    return {
        "runs": len(chosen),
        "later_than_1s": int((late > STALL_MS).sum()),
        "max_lateness_ms": int(late.max()) if len(late) else None,
        "longest_gap_ms": int(np.diff(at).max()) if len(at) > 1 else None,
    }
