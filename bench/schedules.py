"""``python -m bench schedules``: 1,000 recurring schedules against 100,000 (issue 32).

Both sizes deliver about the same runs a second, so that their memory compares
the *number* of schedules, not the traffic: each has ``fast`` schedules every
1 s (1,000 runs/s), and the big one adds slow schedules (every 1 min to 1 h,
hourly and daily crons in five zones: bench/schedule_mix.py) that add about 3%.

First comes a one-shot control (:class:`OneShots`): the same 1,000 messages a
second, due at the same whole seconds on the same topics, sent by a producer
65 s ahead, so through the scheduler's wheel and the outbox as runs go: the
one-shot path's lateness on this machine, at this hour, for this traffic.
Then each size, small first. Each step runs on a fresh ``delayline run`` (its
defaults: the embedded Redis with AOF, the HTTP API; started and stopped as
``bench soak`` does):

1. put the schedules: the fast ones one by one with ``Client.schedule`` (timed:
   the SDK's cost per call), the others PUT_CHUNK to a pipeline, each the very
   record the SDK writes (its definition checked by the SDK's
   ``definition_from``, its XADD from ``plans.scheduling.put``);
2. wait until the scheduler has read them all (its inbound streams are empty:
   it trims what it committed) and a run of every fast schedule has arrived,
   then ``settle_s`` more;
3. measure ``duration_s``: the PSS and CPU of every process of ``delayline
   run``'s tree (bench.measure.Sampler), of the consumer, the load average,
   Redis's CPU per run; then, ``GRACE_S`` later, score the runs due in the
   window (:func:`bench.schedule_mix.score`: lateness = topic entry's ms - the
   id's due ms, early, duplicated, lost), and take Redis's memory and the data
   directory's size by part (the checkpoint: RocksDB's files and Spark's logs).

One consumer process (bench.soak's, writing this module's RUN records) reads
every topic with a consumer group and XACKs what it reads; the records of each
step are kept in ``logs/<stem>-<size>/runs.bin`` beside the result. The result
(JSON) is rewritten after each step, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
import redis

from bench import redis_load
from bench.measure import Sampler
from bench.schedule_load import LEAD_S, OneShots, put
from bench.schedule_mix import RUN, describe, mix, run_row, score, stalls, topics
from bench.schedule_report import (
    by_kind,
    cpu_per_1k_runs,
    headline,
    pressure_share,
    slow_commands,
    summary,
    table,
)
from bench.soak import (
    Soak,
    SoakParams,
    Tail,
    _keep_logs,
    _write,
    consume,
    dir_sizes,
    header,
    own_pss_mb,
    patiently,
)
from bench.soak import redis_memory as redis_memory_of
from delayline.redis import keys
from delayline.timing import now_ms

T = TypeVar("T")

RESULTS = Path(__file__).parent / "results"
#: After the window, how long the runs due at its end get to arrive (s).
GRACE_S = 5.0
#: Longest wait for the scheduler to read every schedule and send a run of each fast one.
TAKEN_IN_TIMEOUT_S = 900.0
#: Seconds between two samples of the processes' PSS and CPU.
SAMPLE_S = 2.0
#: Entries of Redis's slow log read every second (all it keeps by default).
SLOWLOG_KEPT = 128


@dataclass(frozen=True)
class Params:
    """One invocation: the sizes (schedules in all, small first), the fast
    schedules in each, the steady window and the rest before it (s)."""

    sizes: tuple[int, ...] = (1_000, 100_000)
    fast: int = 1_000
    duration_s: float = 300.0
    settle_s: float = 30.0
    delayline_options: tuple[str, ...] = ()
    control: bool = True


#: ``--quick``: what the options not given default to.
QUICK = {"sizes": (1_000, 10_000), "duration_s": 60.0, "settle_s": 15.0}


def params(quick: bool, given: dict[str, Any]) -> Params:
    """The parameters: the options ``given`` (None: not given), else QUICK's with
    ``quick``, else Params' defaults. Raises ValueError for a size below ``fast``."""
    chosen = {name: value for name, value in given.items() if value is not None}
    if quick:
        chosen = QUICK | chosen
    result = Params(**chosen)
    if min(result.sizes) < result.fast:
        raise ValueError(f"every size must hold the {result.fast:,} fast schedules")
    return result


@dataclass
class Session(Soak):
    """One step on a fresh ``delayline run``: bench.soak's start and stop, with this
    module's consumer (RUN records of every topic of the mix); Redis's slow log read
    every second (it keeps 128 entries), and the BUSY replies counted."""

    roles: ClassVar[str] = "bench.schedules"
    busy_replies: int = 0
    slow: dict[int, Any] = field(default_factory=dict)

    def _child(self, role: str, name: str, config: dict[str, Any]) -> Any:
        return super()._child(role, name, config | {"streams": topics()})

    def call(self, command: Callable[[redis.Redis], T]) -> T:
        """``command(client)``, waiting out BUSY replies (:func:`patiently`)."""
        return patiently(lambda: command(self.client), self.busy)

    def busy(self) -> None:
        self.busy_replies += 1

    def wait(self, seconds: float) -> None:
        """Sleep ``seconds``, each second failing if a process exited and reading the
        slow log."""
        deadline = time.monotonic() + seconds
        while True:
            for process in (self.delayline, self.consumer):
                if process.poll() is not None:
                    raise RuntimeError(f"process {process.pid} exited; see {self.scratch}")
            for entry in self.call(lambda client: client.slowlog_get(SLOWLOG_KEPT)):
                self.slow[int(entry["id"])] = entry
            if (left := deadline - time.monotonic()) <= 0:
                return
            time.sleep(min(1.0, left))

    def slow_between(self, after_id: int, upto_id: float = float("inf")) -> list[Any]:
        return [entry for at, entry in sorted(self.slow.items()) if after_id < at <= upto_id]


def pressure() -> dict[str, float]:
    """/proc/pressure's totals (s): time tasks stalled on cpu, io and memory (``some``:
    at least one task, ``full``: all); none where the kernel has no PSI."""
    found = {}
    for resource in ("cpu", "io", "memory"):
        path = Path("/proc/pressure") / resource
        for line in path.read_text().splitlines() if path.exists() else []:
            kind, *pairs = line.split()
            found[f"{resource} {kind}"] = int(dict(p.split("=") for p in pairs)["total"]) / 1e6
    return found


def wait_taken_in(session: Session, streams: Sequence[str], fast_names: set[bytes]) -> float:
    """Wait until the inbound ``streams`` are empty (the scheduler trims what it
    committed) and a run of each of ``fast_names`` has arrived; the seconds it took.
    Raises TimeoutError after TAKEN_IN_TIMEOUT_S."""
    began = time.monotonic()
    tail = Tail(session.received_path, RUN)
    seen: set[bytes] = set()
    unread = -1
    while time.monotonic() - began < TAKEN_IN_TIMEOUT_S:
        seen |= set(tail.read()["schedule"].tolist())
        unread = session.call(lambda client: sum(int(client.xlen(s)) for s in streams))
        if not unread and fast_names <= seen:
            return round(time.monotonic() - began, 1)
        session.wait(1.0)
    raise TimeoutError(f"not taken in after {TAKEN_IN_TIMEOUT_S:g} s: {unread} unread records, "
                       f"{len(fast_names - seen)} fast schedules without a run")  # fmt: skip


def measure(session: Session, duration_s: float) -> dict[str, Any]:
    """The steady window: PSS and CPU of every process, the load average, the
    machine's pressure, Redis's slow commands and cost."""
    redis_before = session.call(redis_load.snapshot)
    slow_id, stalled = max(session.slow, default=-1), pressure()
    load = {"before": os.getloadavg()}
    own_cpu_s = time.process_time()
    with (
        Sampler([session.delayline.pid], SAMPLE_S) as tree,
        Sampler([session.consumer.pid], SAMPLE_S) as consumer,
    ):
        started_ms = now_ms()
        session.wait(duration_s)
        ended_ms = now_ms()
    load["after"] = os.getloadavg()
    rows = tree.processes()
    generator_cpu_s = consumer.cpu_s + time.process_time() - own_cpu_s
    return {
        "started_ms": started_ms,
        "ended_ms": ended_ms,
        "started_at": datetime.fromtimestamp(started_ms / 1000, UTC).isoformat(timespec="seconds"),
        "window_s": round(tree.wall_s, 1),
        "load_average": {when: [round(x, 2) for x in value] for when, value in load.items()},
        "pressure": pressure_share(stalled, pressure(), tree.wall_s),
        "cpu_s": round(tree.cpu_s, 1),
        "cpu_cores": round(tree.cpu_s / tree.wall_s, 3),
        "pss_total_mb": round(sum(row["pss_last_mb"] for row in rows), 1),
        "pss_peak_total_mb": round(tree.peak_pss_mb, 1),
        "by_kind": by_kind(rows),
        "processes": rows,
        "load_generator": {
            "cpu_cores": round(generator_cpu_s / tree.wall_s, 3),
            "pss_mb": round(consumer.last_pss_mb + own_pss_mb(), 1),
        },
        "redis_before": redis_before,
        "redis_slow_commands": slow_commands(session.slow_between(slow_id)),
        "slow_id": slow_id,
    }


def run_size(
    settings: Params, size: int, scratch: Path, out: Path, control: bool = False
) -> dict[str, Any]:
    """One size on a fresh ``delayline run`` (steps 1 to 3 of the module's docstring);
    with ``control``, the one-shot control (OneShots) instead of schedules."""
    specs = mix(settings.fast, 0 if control else size - settings.fast)
    fast_names = [spec.name for spec in specs[: settings.fast]]
    name = "one-shot control" if control else f"schedules {size:,}"
    soak = SoakParams(topics=len(topics()), delayline_options=settings.delayline_options)
    session = Session(soak, scratch, out)
    producer = OneShots("", fast_names)
    began = time.monotonic()
    try:
        session.start()
        start_s = time.monotonic() - began
        print(f"[{name}] delayline run up in {start_s:.0f} s", flush=True)
        setup_ms, setup_pressure, setup_s = now_ms(), pressure(), time.monotonic()
        if control:
            producer.url = session.url
            producer.start()
            written: dict[str, Any] = {"one_shots_per_s": len(fast_names), "lead_s": LEAD_S}
            streams = []  # the producer keeps writing to them
        else:
            written = put(session.url, specs, settings.fast, session.busy)
            streams = [shard.inbound for shard in keys.layout(written["shards"])]
        taken_in_s = wait_taken_in(session, streams, {n.encode() for n in fast_names})
        print(f"[{name}] {written}; taken in after {taken_in_s} s", flush=True)
        session.wait(settings.settle_s)
        setup: dict[str, Any] = {
            "busy_replies": session.busy_replies,
            "pressure": pressure_share(setup_pressure, pressure(), time.monotonic() - setup_s),
        }
        window = measure(session, settings.duration_s)
        session.wait(GRACE_S)
        runs = np.fromfile(session.received_path, RUN)
        scored = score(runs, fast_names, window["started_ms"], window["ended_ms"])
        setup |= stalls(runs, setup_ms, window["started_ms"]) | {
            "redis_slow_commands": slow_commands(session.slow_between(-1, window.pop("slow_id")))
        }
        window["redis_load"] = redis_load.cost(
            window.pop("redis_before"), session.call(redis_load.snapshot), scored["runs"]
        )
        window["redis_memory"] = session.call(lambda c: redis_memory_of(c, random.Random(7)))
        window["data_dir"] = dir_sizes(session.data_dir)
        window["busy_replies"] = session.busy_replies - setup["busy_replies"]
    finally:
        producer.stopped.set()
        if producer.is_alive():
            producer.join()
        session.stop()
        logs = out.parent / "logs" / f"{out.stem}-{'control' if control else size}"
        _keep_logs(scratch, logs)
        if session.received_path.exists():  # every run received, RUN records: for a look later
            logs.mkdir(parents=True, exist_ok=True)
            shutil.copy2(session.received_path, logs / "runs.bin")
    return {
        "size": 0 if control else size,
        "control": control,
        "mix": describe(specs) if not control else {"one_shot_messages_per_s": len(fast_names)},
        "start_s": round(start_s, 1),
        "put": written,
        "taken_in_s": taken_in_s,
        "settle_s": settings.settle_s,
        "setup": setup,
        "score": scored,
        "cpu_per_1k_runs_per_s": cpu_per_1k_runs(window["cpu_cores"], scored["runs_per_s"]),
        **window,
        "wall_s": round(time.monotonic() - began, 1),
    }


def from_args(args: argparse.Namespace, error: Callable[[str], Any]) -> int:
    """Run with ``python -m bench schedules``' options (schedule_report.add_arguments);
    ``error`` reports bad ones."""
    counts = tuple(int(n) for n in args.sizes.split(",")) if args.sizes else None
    given = {"duration_s": args.duration_s, "sizes": counts, "fast": args.fast,
             "delayline_options": tuple(args.delayline_option) or None,
             "control": False if args.no_control else None}  # fmt: skip
    try:
        chosen = params(args.quick, given)
    except ValueError as exc:
        return int(error(str(exc)) or 2)
    folder = RESULTS / ("schedules-quick" if args.quick else "schedules")
    return main(chosen, args.out or folder / "schedules.json")


def main(settings: Params, out: Path) -> int:
    """The one-shot control (unless ``settings.control`` is off), then every size, small
    first, each on a fresh ``delayline run``; ``out`` rewritten after each. Prints the
    table."""
    units = ("ms for lateness; PSS in MB (2**20 bytes) at the end of the window; cpu_cores: "
             "CPU seconds over the window's wall seconds; disk in bytes (allocated)")  # fmt: skip
    result = header("schedules", asdict(settings), units) | {"control": None, "sizes": []}
    began = time.monotonic()
    steps = [(0, True)] if settings.control else []
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for size, control in [*steps, *((size, False) for size in settings.sizes)]:
            scratch = Path(tempfile.mkdtemp(prefix=f"delayline-schedules-{size}-"))
            try:
                measured = run_size(settings, size, scratch, out, control)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            if control:
                result["control"] = measured
            else:
                result["sizes"].append(measured)
            if result["sizes"]:
                result["summary"] = summary(result["sizes"], result["control"])
            result["wall_s"] = round(time.monotonic() - began, 1)
            _write(out, result)
            print(headline(measured), flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(table(result), flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "consume":  # the consumer process (Session's child)
        with contextlib.suppress(KeyboardInterrupt):
            consume(json.loads(sys.argv[2]), row_of=run_row, dtype=RUN)
