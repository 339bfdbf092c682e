"""``python -m bench``: run the benchmarks, profile the scheduler, or write docs/benchmarks.md.

python -m bench run --quick                      # smoke test, every system, < 3 min
python -m bench run                              # the full benchmark (hours)
python -m bench report                           # docs/benchmarks.md from bench/results/full
python -m bench profile --rate 5000              # where a batch's time goes
python -m bench send-many                        # SDK producer throughput
python -m bench chaos                            # kills and a Redis outage, 1M pending (~7 min)
python -m bench aof --pending 1000000            # AOF size and restart load time (~2 min)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench.harness import run_system
from bench.plans import RECOVERY_PENDING, Session, plan
from bench.systems import SYSTEMS, load

RESULTS = Path(__file__).parent / "results"
DOCS = Path(__file__).parents[1] / "docs"


#: What --quick runs: every workload is too slow for a CI smoke test of six systems.
QUICK = {"delayline": {"steady", "burst", "pending-heavy", "recovery"}}
QUICK_PEERS = {"steady", "burst"}


def sessions_for(
    system: str, names: list[str], groups: dict[str, list[Session]], quick: bool
) -> list[Session]:
    """The sessions to run for ``system``: quick mode folds its workloads into one session."""
    if not quick:
        return [session for name in names for session in groups[name]]
    keep = QUICK.get(system, QUICK_PEERS)
    return [
        [item for name in names if name in keep for session in groups[name] for item in session]
    ]


def _report(out: Path, result: dict[str, Any]) -> int:
    """Write ``result`` to ``out`` as JSON and print it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run workloads against systems")
    run.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test (<3 min)")
    run.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated names")
    run.add_argument("--workloads", default="steady,burst,pending-heavy,saturation,recovery")
    run.add_argument("--rate", type=float, default=5_000, help="steady-workload rate (msg/s)")
    run.add_argument("--rates", default=None, help="saturation steps, comma-separated (msg/s)")
    run.add_argument("--pending", default=None,
                     help="pending-heavy sizes, comma-separated (default 10k,100k,1M)")  # fmt: skip
    run.add_argument("--recovery-pending", type=int, default=RECOVERY_PENDING,
                     help="pending messages in the recovery workload")  # fmt: skip
    run.add_argument("--out", type=Path, default=None, help="results directory")

    producer = commands.add_parser("send-many", help="SDK send_many throughput to a local Redis")
    producer.add_argument("--messages", type=int, default=200_000)
    producer.add_argument("--chunk", type=int, default=1_000, help="messages per send_many call")
    producer.add_argument("--out", type=Path, default=RESULTS / "send_many.json")

    spy = commands.add_parser("profile", help="batch time breakdown of the scheduler under load")
    spy.add_argument("--rate", type=float, default=1_000)
    spy.add_argument("--duration", type=float, default=30)
    spy.add_argument("--py-spy", type=Path, default=None, help="write a py-spy raw profile here")
    spy.add_argument("--master", default=None, help="Spark master")
    spy.add_argument("--out", type=Path, default=None, help="also write the result here")
    for option in ("tick-ms", "lead-ms", "trigger-ms", "partitions", "shards", "source-partitions"):
        spy.add_argument(f"--{option}", type=int, default=None)

    chaos = commands.add_parser("chaos", help="kills and a Redis outage under load, 1M pending")
    chaos.add_argument("--quick", action="store_true", help="the CI size (about 3 minutes)")
    chaos.add_argument("--seed", type=int, default=None, help="replay a run")
    chaos.add_argument("--messages", type=int, default=None, help="messages sent (100,000)")
    chaos.add_argument("--pending", type=int, default=None, help="pending in an hour (1,000,000)")
    chaos.add_argument("--out", type=Path, default=RESULTS / "chaos.json")

    aof = commands.add_parser("aof", help="AOF size and load time of the embedded Redis")
    aof.add_argument("--pending", type=int, default=1_000_000)
    aof.add_argument("--port", type=int, default=16399)
    aof.add_argument("--out", type=Path, default=RESULTS / "aof.json")

    report_cmd = commands.add_parser("report", help="write docs/benchmarks.md from results")
    report_cmd.add_argument("--results", type=Path, default=RESULTS / "full")
    report_cmd.add_argument("--docs", type=Path, default=DOCS)

    args = parser.parse_args(argv)
    if args.command == "report":
        from bench import report  # matplotlib: only for this command

        extra = {path.stem: json.loads(path.read_text()) for path in RESULTS.glob("*.json")}
        print(report.write(args.results, args.docs, Path(__file__).parent / "notes.md", extra))
        return 0
    if args.command == "profile":
        from bench import profile  # starts Spark

        profile.main(args)
        return 0
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
    if args.command == "send-many":
        from bench import send_many

        return _report(args.out, send_many.run(args.messages, args.chunk))
    out = args.out or RESULTS / ("quick" if args.quick else "full")
    rates = [float(r) for r in args.rates.split(",")] if args.rates else None
    sizes = [int(n) for n in args.pending.split(",")] if args.pending else None
    groups = plan(args.quick, args.rate, rates, args.recovery_pending, sizes)
    for name in args.systems.split(","):
        for session in sessions_for(name, args.workloads.split(","), groups, args.quick):
            run_system(load(name), session, out)
    return 0
