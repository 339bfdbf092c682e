"""Command line of the benchmark harness."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench import send_many

RESULTS = Path(__file__).parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    producer = commands.add_parser("send-many", help="SDK send_many throughput to a local Redis")
    producer.add_argument("--messages", type=int, default=200_000)
    producer.add_argument("--chunk", type=int, default=1_000, help="messages per send_many call")
    producer.add_argument("--out", type=Path, default=RESULTS / "send_many.json")
    args = parser.parse_args(argv)
    if args.command == "send-many":
        result = send_many.run(args.messages, args.chunk)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0
