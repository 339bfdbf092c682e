"""Workload parameters (the full benchmark, --long, and --quick), sessions, and time estimates.

Who runs what: delayline and the zset baseline run every workload; the job-queue
peers (Celery, dramatiq, arq, rq) run ``steady`` and ``burst`` only (their
producers and workers cannot sustain the other workloads' loads on 2 cores, and
each of their runs would cost minutes of timeouts); ``steady-raw`` is
delayline's alone (raw records are its wire format), and so is
``steady-shadow``, an experiment that runs only when named (see
``workloads.steady``). The Kafka systems (delayline delivering to Kafka, and
the pause-the-partition consumer) run burst, steady and capacity, only when
named in --systems.

A *session* runs its steps, in order, on one freshly started system with fresh
Redis servers. A system runs two sessions:

- ``main``: burst, steady, steady-raw, capacity. Each waits until
  everything it sent was received, so the next starts on a quiet system;
  capacity, which may overload it, comes last. The peers, which fall behind
  and leave a queue that would delay the next workload, get a fresh system for
  each workload instead (they start in a second or two).
- ``pending``: pending-heavy 10k, 100k, then idle, pending-heavy and recovery at
  1M: the backlog of far-future messages grows from one size to the next
  (loaded once, through the system's own producer). Recovery kills the system,
  so it ends the session; a larger pending-heavy size (10M, --long) gets a
  session of its own.
- with --long, ``burst-500k`` has a session of its own too: the half million
  deliveries it leaves in Redis would slow the AOF rewrites of what follows.

--quick folds each system's steps into one session of tiny sizes, a smoke test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

from bench import workloads
from bench.systems import KAFKA, PEERS, PRODUCER_RATE

#: The steady rate of the full benchmark (msg/s) and its delays (s).
STEADY_RATE = 5_000.0
STEADY_DELAY_S = (1, 45)
#: The capacity steps of the full benchmark (msg/s), 20 s each after a 10 s warm-up.
CAPACITY_RATES = [5_000.0, 10_000, 15_000, 20_000, 25_000]
#: Pending-message counts of the pending-heavy workload (the PSS-vs-pending plot).
PENDING_SIZES = [10_000, 100_000, 1_000_000]
LONG_PENDING_SIZES = [10_000_000]
#: Pending messages while the system idles, and while recovery kills and restarts it.
IDLE_PENDING = 1_000_000
RECOVERY_PENDING = 1_000_000

#: Every workload name, in the order a session runs them.
WORKLOADS = [
    "burst",
    "burst-500k",
    "steady",
    "steady-raw",
    "capacity",
    "pending-heavy",
    "idle",
    "recovery",
    "steady-shadow",
]
#: Only with --long.
LONG_ONLY = {"burst-500k"}
#: Experiments, run only when named in --workloads.
ON_REQUEST = {"steady-shadow"}


def default_workloads(long: bool = False) -> list[str]:
    """What ``python -m bench run`` runs without --workloads, in order."""
    skipped = ON_REQUEST if long else ON_REQUEST | LONG_ONLY
    return [name for name in WORKLOADS if name not in skipped]


OURS = ("delayline", "zset")
EVERYONE = (*OURS, *PEERS, *KAFKA)

#: Seconds to start a system (its first consumer ready) and to stop it, on 2 cores
#: (measured 2026-11-24: delayline 44-60 s to start, the peers 0.3-2.4 s).
START_S = {"delayline": 55.0, "zset": 1.0, "kafka-pause": 8.0}
STOP_S = {"delayline": 10.0, "zset": 1.0, "kafka-pause": 3.0}
for _kafka in (
    "delayline-kafka",
    "delayline-kafka-eos",
    "delayline-kafka-typo",
    "delayline-kafka-in",
):
    START_S[_kafka], STOP_S[_kafka] = 65.0, 12.0
PEER_START_S, PEER_STOP_S = 3.0, 5.0
#: How fast delayline's scheduler reads a far-future backlog once loaded (msg/s),
#: beyond the producer's own time, and its fixed absorption time (s).
ABSORB_RATE, ABSORB_FIXED_S = 40_000, 5.0


@dataclass(frozen=True)
class Step:
    """One workload run: ``name`` is its result file (``<system>-<name>.json``)."""

    workload: str
    name: str
    run: workloads.Workload
    systems: tuple[str, ...]
    session: str
    rank: tuple[int, ...]
    #: Wall seconds it takes, loading excluded, for a system name.
    estimate: Callable[[str], float]
    #: Far-future messages it needs pending (loaded by the session, once).
    pending: int = 0
    #: It kills the system: what would follow runs on a fresh one.
    ends_session: bool = False
    params: dict[str, object] = field(default_factory=dict)


#: Above this many messages in one workload, the peers fall behind and time out.
PEERS_KEEP_UP = 10_000


def _settle(system: str, settle_s: float, count: float) -> float:
    """What waiting for the last messages costs: the peers fall behind and time out."""
    return settle_s if system in PEERS and count > PEERS_KEEP_UP else 2.0


def _steady(name: str, rank: int, rate: float, duration_s: float, delays: tuple[float, float],
            settle_s: float, systems: tuple[str, ...]) -> Step:  # fmt: skip
    run = partial(workloads.steady, rate=rate, duration_s=duration_s, min_delay_s=delays[0],
                  max_delay_s=delays[1], settle_s=settle_s, raw=name == "steady-raw",
                  shadow=name == "steady-shadow")  # fmt: skip
    # The shadow's far-future records stay pending: a session of its own.
    session = "shadow" if name == "steady-shadow" else "main"
    return Step(name, name, run, systems, session, (0, rank),
                lambda s: duration_s + delays[1] + _settle(s, settle_s, rate * duration_s) + 1,
                params=dict(run.keywords))  # fmt: skip


def _burst(name: str, rank: int, count: int, head_start_s: float, settle_s: float,
           systems: tuple[str, ...], session: str = "main") -> Step:  # fmt: skip
    run = partial(workloads.burst, count=count, head_start_s=head_start_s, settle_s=settle_s,
                  name=name)  # fmt: skip
    return Step(name, name, run, systems, session, (0, rank),
                lambda s: head_start_s + count / PRODUCER_RATE.get(s, 1_000) + 1
                + _settle(s, settle_s, count), params=dict(run.keywords))  # fmt: skip


def _capacity(rates: list[float], step_s: float, warmup_s: float, delays: tuple[float, float],
              settle_s: float) -> Step:  # fmt: skip
    run = partial(workloads.capacity, rates=rates, step_s=step_s, warmup_s=warmup_s,
                  min_delay_s=delays[0], max_delay_s=delays[1], settle_s=settle_s)  # fmt: skip
    return Step("capacity", "capacity", run, (*OURS, *KAFKA), "main", (0, 4),
                lambda s: warmup_s + step_s * len(rates) + delays[1] + 3,
                params=dict(run.keywords))  # fmt: skip


def _pending_heavy(pending: int, rate: float, duration_s: float, delays: tuple[float, float],
                   settle_s: float) -> Step:  # fmt: skip
    run = partial(workloads.pending_heavy, pending=pending, rate=rate, duration_s=duration_s,
                  min_delay_s=delays[0], max_delay_s=delays[1], settle_s=settle_s)  # fmt: skip
    return Step("pending-heavy", f"pending-heavy-{pending}", run, OURS, "pending",
                (1, pending, 1), lambda s: duration_s + delays[1] + 2, pending,
                params=dict(run.keywords))  # fmt: skip


def _idle(pending: int, measure_s: float) -> Step:
    run = partial(workloads.idle, pending=pending, measure_s=measure_s)
    return Step("idle", "idle", run, OURS, "pending", (1, pending, 0), lambda s: measure_s + 1,
                pending, params=dict(run.keywords))  # fmt: skip


def _recovery(pending: int, rate: float, before_s: float, after_s: float,
              delays: tuple[float, float], settle_s: float,
              systems: tuple[str, ...]) -> Step:  # fmt: skip
    run = partial(workloads.recovery, pending=pending, rate=rate, before_s=before_s,
                  after_s=after_s, min_delay_s=delays[0], max_delay_s=delays[1],
                  settle_s=settle_s)  # fmt: skip
    return Step("recovery", f"recovery-{pending}", run, systems, "pending", (1, pending, 2),
                lambda s: before_s + START_S.get(s, PEER_START_S) + after_s + delays[1] + 2,
                pending,
                ends_session=True, params=dict(run.keywords))  # fmt: skip


def plan(
    quick: bool = False,
    long: bool = False,
    rate: float = STEADY_RATE,
    rates: list[float] | None = None,
    pending_sizes: list[int] | None = None,
    recovery_pending: int = RECOVERY_PENDING,
    idle_pending: int = IDLE_PENDING,
) -> list[Step]:
    """Every step of the benchmark. ``rate``: the steady rate; ``rates``: the capacity
    steps; ``pending_sizes``: those of pending-heavy; ``recovery_pending`` and
    ``idle_pending``: the backlogs of recovery and idle. They apply to the full
    benchmark only."""
    if quick:
        tiny = (0.5, 1.5)
        return [
            _burst("burst", 0, 300, 1, 10, EVERYONE),
            _steady("steady", 2, 100, 2, tiny, 10, EVERYONE),
            _steady("steady-raw", 3, 100, 2, tiny, 10, ("delayline",)),
            _capacity([100.0, 200.0], 1, 0.5, tiny, 10),
            _pending_heavy(500, 100, 2, tiny, 10),
            _idle(1_000, 3),
            # delayline's restart is a second JVM start (about a minute): not in --quick.
            _recovery(1_000, 100, 1, 1, tiny, 10, ("zset",)),
        ]
    sizes = pending_sizes or [*PENDING_SIZES, *(LONG_PENDING_SIZES if long else [])]
    steps = [
        _burst("burst", 0, 50_000, 5, workloads.SETTLE_S, EVERYONE),
        _steady("steady", 2, rate, 60, STEADY_DELAY_S, workloads.SETTLE_S, EVERYONE),
        _steady("steady-raw", 3, rate, 60, STEADY_DELAY_S, workloads.SETTLE_S, ("delayline",)),
        _steady("steady-shadow", 0, rate, 60, STEADY_DELAY_S, workloads.SETTLE_S, ("delayline",)),
        _capacity(rates or CAPACITY_RATES, 20, 10, STEADY_DELAY_S, workloads.SETTLE_S),
        *(_pending_heavy(n, 1_000, 20, (1, 10), workloads.SETTLE_S) for n in sizes),
        _idle(idle_pending, 60),
        _recovery(recovery_pending, 1_000, 10, 10, (1, 10), workloads.SETTLE_S, OURS),
    ]
    if long:
        # A session of its own: the half million deliveries it leaves in Redis (topic
        # stream, journal) would make every later workload's AOF rewrites slower.
        steps.append(_burst("burst-500k", 1, 500_000, 5, 60, OURS, session="burst-500k"))
    return steps


def sessions_for(
    system: str, names: Iterable[str], steps: list[Step], quick: bool = False
) -> list[list[Step]]:
    """The sessions ``system`` runs for the workloads ``names``: each is a list of steps
    for one started system. --quick folds them into one."""
    wanted = set(names)
    chosen = [step for step in steps if step.workload in wanted and system in step.systems]
    if system in PEERS and not quick:
        # A peer may not finish a workload (the rest would queue behind the next one),
        # and it starts in a second or two: a fresh one per workload.
        return [[step] for step in sorted(chosen, key=lambda s: s.rank)]
    keys = ["all"] if quick else list(dict.fromkeys(step.session for step in chosen))
    sessions: list[list[Step]] = []
    for key in keys:
        current: list[Step] = []
        for step in sorted(
            (step for step in chosen if quick or step.session == key), key=lambda s: s.rank
        ):
            current.append(step)
            if step.ends_session:
                sessions.append(current)
                current = []
        if current:
            sessions.append(current)
    return sessions


def load_estimate_s(system: str, count: int) -> float:
    """Seconds to load ``count`` far-future messages and wait until they are absorbed."""
    if count <= 0:
        return 0.0
    seconds = count / PRODUCER_RATE.get(system, 1_000)
    if system == "delayline":
        seconds += ABSORB_FIXED_S + count / ABSORB_RATE
    return seconds


def session_estimate_s(system: str, session: list[Step]) -> list[tuple[str, float]]:
    """(label, seconds) for starting the system, each step (loading included) and stopping."""
    rows = [("start", START_S.get(system, PEER_START_S))]
    pending = 0
    for step in session:
        load = load_estimate_s(system, step.pending - pending)
        pending = max(pending, step.pending)
        rows.append((step.name, step.estimate(system) + load))
    rows.append(("stop", STOP_S.get(system, PEER_STOP_S)))
    return rows
