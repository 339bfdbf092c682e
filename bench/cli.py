"""``python -m bench``: run the benchmarks, or turn their results into docs/benchmarks.md."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench import profile, send_many
from bench.harness import run_system
from bench.plans import plan
from bench.systems import SYSTEMS, load

RESULTS = Path(__file__).parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run workloads against systems")
    run.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test (<3 min)")
    run.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated names")
    run.add_argument("--workloads", default="steady,burst,pending-heavy,saturation,recovery")
    run.add_argument("--rate", type=float, default=5_000, help="steady-workload rate (msg/s)")
    run.add_argument("--rates", default=None, help="saturation steps, comma-separated (msg/s)")
    run.add_argument("--out", type=Path, default=None, help="results directory")

    producer = commands.add_parser("send-many", help="SDK send_many throughput to a local Redis")
    producer.add_argument("--messages", type=int, default=200_000)
    producer.add_argument("--chunk", type=int, default=1_000, help="messages per send_many call")
    producer.add_argument("--out", type=Path, default=RESULTS / "send_many.json")

    spy = commands.add_parser("profile", help="batch time breakdown of the scheduler under load")
    spy.add_argument("--rate", type=float, default=1_000)
    spy.add_argument("--duration", type=float, default=30)
    spy.add_argument("--py-spy", type=Path, default=None, help="write a py-spy raw profile here")
    for option in ("tick-ms", "lead-ms", "trigger-ms", "partitions", "shards", "source-partitions"):
        spy.add_argument(f"--{option}", type=int, default=None)

    args = parser.parse_args(argv)
    if args.command == "profile":
        profile.main(args)
        return 0
    if args.command == "send-many":
        result = send_many.run(args.messages, args.chunk)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return 0
    out = args.out or RESULTS / ("quick" if args.quick else "full")
    rates = [float(r) for r in args.rates.split(",")] if args.rates else None
    plans = plan(args.quick, args.rate, rates)
    chosen = [(name, plans[name]) for name in args.workloads.split(",")]
    for name in args.systems.split(","):
        run_system(load(name), chosen, out)
    return 0
