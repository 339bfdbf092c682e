"""``python -m bench``: run the benchmarks, profile the scheduler, or write docs/benchmarks.md.

python -m bench run --quick        # smoke test of every system's adapter, tiny sizes, ~1 min
python -m bench run --dry-run      # print the plan and its time estimate, run nothing
python -m bench run                # the full benchmark, every system and workload (~37 min)
python -m bench run --long         # also burst-500k and pending-heavy at 10M (~71 min)
python -m bench report             # docs/benchmarks.md from bench/results/full (seconds)
python -m bench profile --rate 5000   # where a batch's time goes (~1.5 min)
python -m bench send-many             # SDK producer throughput (~15 s)
python -m bench chaos                 # kills and a Redis outage, 1M pending (~7 min)
python -m bench aof --pending 1000000 # AOF size and restart load time (~2 min)
python -m bench pump                  # pump throughput, Redis time per message and part (~1.5 min)
python -m bench floor                 # PSS of the query's process model doing nothing (~1 min)
python -m bench forecast              # the forecast's answer time and memory, 10k..1M (~1 min)
python -m bench listing               # forecast and listing times at 1M pending (~6 min)
python -m bench rate-limit [--quick]  # a 2,000/s topic limit, a herd of 20,000 (~3 min; quick ~1)
python -m bench isolation [--quick]   # group A's 500k herd vs group B's 1,000/s (~6 min; quick ~4)
python -m bench scaling               # capacity on local-cluster 1 and 2, standalone (~12 min)
python -m bench redis-cluster         # 1 and 3 Redis shards on a 3+3 Redis Cluster (~20-27 min)
python -m bench redis-cluster --quick # its smoke test, 3 shards (~70 s)
python -m bench schedules [--quick]   # 1,000 vs 100,000 schedules (~21 min; --quick ~8 min)
python -m bench soak                  # memory and disk over 60 min at 5,000 msg/s (~62 min)
python -m bench soak --quick          # 3 min at 2,000 msg/s, then checks (~5 min)
python -m bench soak --report bench/results/soak/60min-5000.json  # plot and table
python -m bench run --systems delayline,delayline-kafka,delayline-kafka-in,kafka-pause \
    --workloads steady,capacity --out bench/results/kafka   # Kafka in and out (~22 min)
python -m bench run --systems delayline,delayline-kafka,delayline-kafka-eos \
    --workloads steady,capacity --out bench/results/kafka-delivery  # each guarantee (~17 min)
python -m bench run --systems delayline-kafka,delayline-kafka-typo \
    --workloads steady --out bench/results/kafka-typo-after  # a missing topic a second (~6 min)

``run`` prints its plan with an estimate of each step's wall time before it
starts, writes ``<out>/<system>-<name>.json`` per workload (each with its own
``wall_s``) and ``<out>/plan.json`` (each session's estimate and wall time).
The workloads (bench/plans.py has the parameters, bench/workloads.py the code):

burst          50,000 due in the same second                       all six systems
burst-500k     500,000 due in the same second (--long)              delayline, zset
steady         5,000 msg/s for 60 s, delays 1-45 s                 all six systems
steady-raw     the same as raw v1 records by plain XADD            delayline
capacity       5k..25k msg/s, 20 s steps after a 10 s warm-up      delayline, zset (+ Kafka)
pending-heavy  10k, 100k, 1M pending (10M with --long); PSS        delayline, zset
idle           1M pending, no traffic, 60 s: CPU cores and PSS     delayline, zset
recovery       SIGKILL and restart with 1M pending                 delayline, zset
steady-shadow  steady, plus as many raw records due 1-2 h ahead    delayline
               (an experiment: only when named in --workloads)

The job-queue peers (celery, dramatiq, arq, rq) run steady and burst only.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from bench import cluster_report, schedule_report
from bench.harness import run_system
from bench.plans import (
    IDLE_PENDING,
    LONG_ONLY,
    RECOVERY_PENDING,
    STEADY_RATE,
    WORKLOADS,
    Step,
    default_workloads,
    plan,
    session_estimate_s,
    sessions_for,
)
from bench.systems import DEFAULT_SYSTEMS, KAFKA, SYSTEMS, load

RESULTS = Path(__file__).parent / "results"
DOCS = Path(__file__).parents[1] / "docs"

Schedule = dict[str, list[list[Step]]]


def estimate(schedule: Schedule, parallel: bool) -> float:
    """Print the plan, session by session, with the estimated wall time; return the total."""
    totals: dict[str, float] = {}
    for system, sessions in schedule.items():
        for session in sessions:
            rows = session_estimate_s(system, session)
            seconds = sum(s for _, s in rows)
            totals[system] = totals.get(system, 0.0) + seconds
            steps = ", ".join(f"{name} {s:.0f} s" for name, s in rows)
            print(f"  {system:<9} {seconds / 60:5.1f} min  [{steps}]")
    total = sum(totals.values())
    if parallel:  # --quick: delayline's session runs beside the others
        total = max(totals.get("delayline", 0.0), total - totals.get("delayline", 0.0))
    print(f"estimated wall time: {total / 60:.1f} min", flush=True)
    return total


def run_plan(schedule: Schedule, out: Path, parallel: bool) -> int:
    """Run every session of ``schedule``; a failed session is reported and skipped.

    ``parallel`` (--quick): delayline's session, which spends most of its time
    waiting for Spark to start, runs beside the other systems' sessions.
    """
    failures: list[str] = []
    timings: list[dict[str, Any]] = []

    def run_sessions(system: str) -> None:
        for session in schedule[system]:
            began = time.monotonic()
            try:
                run_system(load(system), session, out)
            except Exception:
                traceback.print_exc()
                failures.append(f"{system}: {', '.join(step.name for step in session)}")
            timings.append(
                {
                    "system": system,
                    "steps": [step.name for step in session],
                    "estimated_s": round(sum(s for _, s in session_estimate_s(system, session))),
                    "wall_s": round(time.monotonic() - began, 1),
                }
            )

    began = time.monotonic()
    systems = list(schedule)
    if parallel and "delayline" in systems and len(systems) > 1:
        beside = threading.Thread(target=run_sessions, args=("delayline",))
        beside.start()
        for system in systems:
            if system != "delayline":
                run_sessions(system)
        beside.join()
    else:
        for system in systems:
            run_sessions(system)
    wall_s = time.monotonic() - began
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(
        json.dumps({"wall_s": round(wall_s, 1), "sessions": timings, "failed": failures}, indent=1)
        + "\n"
    )
    print(f"done in {wall_s / 60:.1f} min", flush=True)
    for failure in failures:
        print(f"FAILED: {failure}", flush=True)
    return 1 if failures else 0


def _report(out: Path, result: dict[str, Any]) -> int:
    """Write ``result`` to ``out`` as JSON and print it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run workloads against systems")
    run.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test (< 2.5 min)")
    run.add_argument("--long", action="store_true",
                     help="also burst-500k and pending-heavy at 10M")  # fmt: skip
    run.add_argument("--systems", default=",".join(DEFAULT_SYSTEMS),
                     help=f"comma-separated (default: all but {', '.join(KAFKA)})")  # fmt: skip
    run.add_argument("--workloads", default=None, help="comma-separated (default: all)")
    run.add_argument("--rate", type=float, default=STEADY_RATE, help="steady rate (msg/s)")
    run.add_argument("--rates", default=None, help="capacity steps, comma-separated (msg/s)")
    run.add_argument("--pending", default=None,
                     help="pending-heavy sizes, comma-separated (default 10k,100k,1M)")  # fmt: skip
    run.add_argument("--recovery-pending", type=int, default=RECOVERY_PENDING,
                     help="pending messages in the recovery workload")  # fmt: skip
    run.add_argument("--idle-pending", type=int, default=IDLE_PENDING,
                     help="pending messages in the idle workload")  # fmt: skip
    run.add_argument("--out", type=Path, default=None, help="results directory")
    run.add_argument("--dry-run", action="store_true", help="print the plan and its estimate")
    run.add_argument(
        "--delayline-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="an extra `delayline run` option (repeatable), as "
        "--delayline-option=--trigger-ms=1000: A/B runs of a setting",
    )

    producer = commands.add_parser("send-many", help="SDK send_many throughput to a local Redis")
    producer.add_argument("--messages", type=int, default=200_000)
    producer.add_argument("--chunk", type=int, default=1_000, help="messages per send_many call")
    producer.add_argument("--delay-ms", type=int, default=120_000,
                          help="past the horizon: inbound path; within: near path")  # fmt: skip
    producer.add_argument("--out", type=Path, default=RESULTS / "send_many.json")

    spy = commands.add_parser("profile", help="batch time breakdown of the scheduler under load")
    spy.add_argument("--rate", type=float, default=1_000)
    spy.add_argument("--duration", type=float, default=30)
    spy.add_argument("--py-spy", type=Path, default=None, help="write a py-spy raw profile here")
    spy.add_argument("--master", default=None, help="Spark master")
    spy.add_argument("--out", type=Path, default=None, help="also write the result here")
    for option in (
        "tick-ms",
        "horizon-ms",
        "trigger-ms",
        "partitions",
        "shards",
        "source-partitions",
    ):
        spy.add_argument(f"--{option}", type=int, default=None)

    chaos = commands.add_parser("chaos", help="kills and a Redis outage under load, 1M pending")
    chaos.add_argument("--quick", action="store_true", help="the CI size (about 3 minutes)")
    chaos.add_argument("--seed", type=int, default=None, help="replay a run")
    chaos.add_argument("--messages", type=int, default=None, help="messages sent (100,000)")
    chaos.add_argument("--pending", type=int, default=None, help="pending in an hour (1,000,000)")
    chaos.add_argument("--out", type=Path, default=RESULTS / "chaos.json")

    pump = commands.add_parser("pump", help="outbox pump throughput against a bare zset move")
    pump.add_argument("--messages", type=int, default=200_000)
    pump.add_argument("--port", type=int, default=16398)
    pump.add_argument("--out", type=Path, default=RESULTS / "pump.json")

    floor = commands.add_parser("floor", help="PSS of the query's process model doing nothing")
    floor.add_argument("--duration", type=float, default=30)
    floor.add_argument("--out", type=Path, default=RESULTS / "floor.json")

    aof = commands.add_parser("aof", help="AOF size and load time of the embedded Redis")
    aof.add_argument("--pending", type=int, default=1_000_000)
    aof.add_argument("--port", type=int, default=16399)
    aof.add_argument("--out", type=Path, default=RESULTS / "aof.json")

    forecast = commands.add_parser("forecast", help="the forecast's time and memory by pending")
    forecast.add_argument("--pending", default="10000,100000,1000000", help="comma-separated")
    forecast.add_argument("--days", type=int, default=30, help="the messages' spread")
    forecast.add_argument("--port", type=int, default=16397)
    forecast.add_argument("--out", type=Path, default=RESULTS / "forecast.json")

    listing = commands.add_parser("listing", help="forecast and listing times in a running run")
    listing.add_argument("--pending", type=int, default=1_000_000)
    listing.add_argument("--port", type=int, default=16396)
    listing.add_argument("--out", type=Path, default=RESULTS / "listing.json")

    rate = commands.add_parser("rate-limit", help="a topic's delivery rate limit and a herd")
    rate.add_argument("--rate", type=int, default=2_000)
    rate.add_argument("--herd", type=int, default=20_000)
    rate.add_argument("--wave", type=int, default=2_000, help="due 1 s after the herd")
    rate.add_argument("--lead-s", type=float, default=75.0)
    rate.add_argument("--quick", action="store_true", help="4,000 and 400, 20 s ahead")
    rate.add_argument("--port", type=int, default=16395)
    rate.add_argument("--out", type=Path, default=RESULTS / "rate-limit" / "rate_limit.json")

    isolate = commands.add_parser("isolation", help="one group's herd against another's traffic")
    isolate.add_argument("--herd", type=int, default=500_000)
    isolate.add_argument("--rate", type=int, default=1_000, help="group B's messages a second")
    isolate.add_argument("--lead-s", type=float, default=55.0, help="the herd's due time ahead")
    isolate.add_argument("--steady-s", type=float, default=10.0, help="B before and after")
    isolate.add_argument("--quick", action="store_true", help="a herd of 150,000, 30 s ahead")
    isolate.add_argument("--port", type=int, default=16397)
    isolate.add_argument("--out", type=Path, default=RESULTS / "isolation" / "isolation.json")

    scaling = commands.add_parser("scaling", help="capacity on three Spark deployments")
    scaling.add_argument("--quick", action="store_true", help="a smoke test (about 4 min)")
    scaling.add_argument("--deployments", default="local-cluster-1,local-cluster-2,standalone-2",
                         help="comma-separated")  # fmt: skip
    scaling.add_argument("--steps", default="capacity,absorb", help="comma-separated")
    scaling.add_argument("--inbound-shards", type=int, default=1,
                         help="delayline run --inbound-shards (the SDK spreads sends)")  # fmt: skip
    scaling.add_argument("--out", type=Path, default=None,
                         help="results directory [default: bench/results/scaling]")  # fmt: skip

    cluster = commands.add_parser("redis-cluster", help="1 and 3 Redis shards on a 3+3 cluster")
    cluster_report.add_arguments(cluster)

    soak = commands.add_parser("soak", help="Redis memory, disk and PSS over time under load")
    soak.add_argument("--quick", action="store_true",
                      help="3 min at 2,000 msg/s, 20 s samples, delays 1-20 s; then check "
                      "0 lost, dup and early and the bytes per message")  # fmt: skip
    soak.add_argument("--minutes", type=float, default=None, help="load duration (60)")
    soak.add_argument("--rate", type=float, default=None, help="msg/s in all (5,000)")
    soak.add_argument("--sample-s", type=float, default=None, help="s between rows (30)")
    soak.add_argument("--bodies", type=int, default=None, help="body size, bytes (200)")
    soak.add_argument("--min-delay-s", type=float, default=None, help="shortest delay (1)")
    soak.add_argument("--max-delay-s", type=float, default=None, help="longest delay (60)")
    soak.add_argument("--topics", type=int, default=None, help="topics soak.0.. (4)")
    soak.add_argument("--producers", type=int, default=None, help="producer processes (1)")
    soak.add_argument("--max-bytes-per-message", type=float, default=None,
                      help="fail if Redis retains this many bytes or more per delivered "
                      "message over the second half (default with --quick: 64)")  # fmt: skip
    soak.add_argument("--delayline-option", action="append", default=[], metavar="OPTION",
                      help="an extra `delayline run` option (repeatable); none: its "
                      "defaults")  # fmt: skip
    soak.add_argument("--out", type=Path, default=None,
                      help="result file [default: bench/results/soak/<minutes>min-<rate>.json, "
                      "or quick.json]")  # fmt: skip
    soak.add_argument("--report", type=Path, default=None, metavar="JSON",
                      help="run nothing: draw <docs>/img/soak-<name>.png from a result and "
                      "print its markdown section")  # fmt: skip
    soak.add_argument("--docs", type=Path, default=DOCS, help="where --report's img/ is")

    schedule_report.add_arguments(commands.add_parser("schedules", help="recurring schedules"))
    report_cmd = commands.add_parser("report", help="write docs/benchmarks.md from results")
    report_cmd.add_argument("--results", type=Path, default=RESULTS / "full")
    report_cmd.add_argument("--docs", type=Path, default=DOCS)

    args = parser.parse_args(argv)
    if args.command == "report":
        from bench import report  # matplotlib: only for this command

        extra = {path.stem: json.loads(path.read_text()) for path in RESULTS.glob("*.json")}
        print(report.write(args.results, args.docs, Path(__file__).parent / "notes.md", extra))
        return 0
    if args.command == "soak":
        from bench import soak as soak_run  # starts delayline run

        if args.report is not None:
            print(soak_run.report(args.report, args.docs))
            return 0
        given = {"minutes": args.minutes, "rate": args.rate, "sample_s": args.sample_s,
                 "body_bytes": args.bodies, "min_delay_s": args.min_delay_s,
                 "max_delay_s": args.max_delay_s, "topics": args.topics,
                 "producers": args.producers,
                 "delayline_options": tuple(args.delayline_option) or None}  # fmt: skip
        settings = soak_run.params(args.quick, given)
        bound = args.max_bytes_per_message
        if bound is None and args.quick:
            bound = soak_run.QUICK_MAX_BYTES_PER_MESSAGE
        out = args.out or RESULTS / "soak" / f"{'quick' if args.quick else settings.name}.json"
        return soak_run.main(settings, out, bound)
    if args.command == "schedules":
        from bench import schedules as schedules_run  # starts delayline run

        return schedules_run.from_args(args, parser.error)
    if args.command == "profile":
        from bench import profile  # starts Spark

        profile.main(args)
        return 0
    if args.command == "pump":
        from bench import pump as pump_run

        return _report(args.out, pump_run.main(args.messages, args.port))
    if args.command == "floor":
        from bench import floor as floor_run  # starts Spark

        return _report(args.out, floor_run.main(args.duration))
    if args.command == "forecast":
        from bench import forecast as forecast_run

        forecast_sizes = [int(size) for size in args.pending.split(",")]
        return _report(args.out, forecast_run.main(forecast_sizes, args.days, args.port))
    if args.command == "rate-limit":
        from bench import rate_limit  # starts delayline run

        if args.quick:
            args.herd, args.wave, args.lead_s = 4_000, 400, 20.0
        return _report(
            args.out, rate_limit.main(args.rate, args.herd, args.wave, args.lead_s, args.port)
        )
    if args.command == "isolation":
        from bench import isolation  # starts delayline run

        if args.quick:
            args.herd, args.lead_s, args.steady_s = 150_000, 30.0, 5.0
        return _report(
            args.out,
            isolation.main(args.herd, args.rate, args.lead_s, args.steady_s, args.port),
        )
    if args.command == "listing":
        from bench import list_latency  # starts delayline run

        return _report(args.out, list_latency.main(args.pending, args.port))
    if args.command == "aof":
        from bench import aof as aof_run

        return _report(args.out, aof_run.main(args.pending, args.port))
    if args.command == "chaos":
        from bench import chaos as chaos_run  # starts Redis and delayline run

        return _report(
            args.out,
            chaos_run.main(
                quick=args.quick, seed=args.seed, messages=args.messages, pending=args.pending
            ),
        )
    if args.command == "scaling":
        from bench import scaling as scaling_run  # starts clusters and delayline run

        deployments = args.deployments.split(",")
        unknown = sorted(set(deployments) - set(scaling_run.DEPLOYMENTS))
        if unknown:
            parser.error(f"unknown deployments: {', '.join(unknown)}")
        out = args.out or RESULTS / ("scaling-quick" if args.quick else "scaling")
        steps = args.steps.split(",")
        if sorted(set(steps) - set(scaling_run.STEPS)):
            parser.error(f"unknown steps: {', '.join(sorted(set(steps) - set(scaling_run.STEPS)))}")
        result = scaling_run.main(args.quick, out, deployments, steps, args.inbound_shards)
        print(json.dumps(result, indent=2))
        return 0
    if args.command == "redis-cluster":
        from bench import cluster_scaling  # starts clusters and delayline run

        try:
            chosen = cluster_scaling.params_from(args)
        except ValueError as exc:
            parser.error(str(exc))
        out = args.out or RESULTS / ("redis-cluster-quick" if args.quick else "redis-cluster")
        return cluster_scaling.run(chosen, out, dry_run=args.dry_run)
    if args.command == "send-many":
        from bench import send_many

        return _report(args.out, send_many.run(args.messages, args.chunk, args.delay_ms))
    out = args.out or RESULTS / ("quick" if args.quick else "full")
    names = args.workloads.split(",") if args.workloads else default_workloads(args.long)
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads: {', '.join(unknown)}")
    if not args.long and set(names) & LONG_ONLY:
        parser.error(f"{', '.join(sorted(set(names) & LONG_ONLY))} needs --long")
    systems = args.systems.split(",")
    if sorted(set(systems) - set(SYSTEMS)):
        parser.error(f"unknown systems: {', '.join(sorted(set(systems) - set(SYSTEMS)))}")
    rates = [float(r) for r in args.rates.split(",")] if args.rates else None
    sizes = [int(n) for n in args.pending.split(",")] if args.pending else None
    steps = plan(args.quick, args.long, args.rate, rates, sizes, args.recovery_pending,
                 args.idle_pending)  # fmt: skip
    schedule = {system: sessions_for(system, names, steps, args.quick) for system in systems}
    schedule = {system: sessions for system, sessions in schedule.items() if sessions}
    estimate(schedule, parallel=args.quick)
    if args.dry_run:
        return 0
    if args.delayline_option:
        load("delayline").run_options = tuple(args.delayline_option)  # type: ignore[attr-defined]
    return run_plan(schedule, out, parallel=args.quick)
