"""``python -m bench redis-cluster``: its options, and the console line and markdown
tables of its results (no heavy imports: ``bench/cli.py`` builds its parser from here)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m bench redis-cluster`` (cluster_scaling.params_from)."""
    add = parser.add_argument
    add("--quick", action="store_true", help="a smoke test, 3 shards (about 70 s)")
    add("--dry-run", action="store_true", help="print the plan and its estimate")
    add("--shards", default=None, help="deployments, comma-separated: N shards, or N@P on "
        "P primaries (default: 3@1,3; --quick: 3)")  # fmt: skip
    add("--rates", default=None, help="capacity steps, comma-separated (msg/s)")
    add("--producers", type=int, default=None, help="producer processes (4)")
    add("--workloads", default=None, help="capacity,burst (the default)")
    add("--burst-rate", type=float, default=None, help="the burst is due 5 s + count / this "
        "ahead (5,000 msg/s; 10,000: within the 60 s horizon)")  # fmt: skip
    add("--settle-s", type=float, default=None,
        help="how long after the last is due a message may come (30)")  # fmt: skip
    add("--out", type=Path, default=None, help="results [default: bench/results/redis-cluster]")


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def headline(result: Mapping[str, Any]) -> str:
    """One line for the console."""
    if result["workload"] == "capacity":
        steps = ", ".join(
            f"{s['rate']:g}->{s['achieved_rate']:g}/s p99 {s['lateness_p99_ms']} "
            f"lost {s['lost']}" for s in result["steps"]
        )  # fmt: skip
        return f"capacity {result['capacity']:g}/s [{steps}] ({result['wall_s']:g} s)"
    return (
        f"burst {result['expected']:,}: last delivery {result['last_delivery_s']} s after due, "
        f"p50 {result['lateness_p50_ms']} p99 {result['lateness_p99_ms']} ms, lost "
        f"{result['lost']} dup {result['duplicates']} early {result['early']}, "
        f"{result['sent_after_due']} sent after due ({result['wall_s']:g} s)"
    )


def cores_per_1k(result: Mapping[str, Any]) -> float | None:
    """CPU seconds of the system's processes per 1,000 messages delivered (a capacity
    run's, warm-up and settling included; a burst's received)."""
    delivered = result.get("delivered") or result.get("received") or 0
    return round(result["cpu_s"] / (delivered / 1000), 3) if delivered else None


def primaries_us(window: Mapping[str, Any], key: str = "process_us_per_msg") -> str:
    """``p0 a / p1 b / p2 c`` µs per message of each primary in ``window``."""
    found = window[key]
    return " / ".join(f"{n} {_num(found[n], 1)}" for n in sorted(found) if n.startswith("p"))


def table(whole: Mapping[str, Any]) -> str:
    """The markdown tables: one row per shard count, then per node, then per process."""
    deployments: Sequence[Mapping[str, Any]] = list(whole["deployments"].values())
    rates = whole["params"]["rates"]
    steps = " / ".join(f"{r / 1000:g}k" for r in rates)
    lines = [
        f"| shards | capacity (msg/s) | p99 at {steps} msg/s (ms) | achieved msg/s | "
        "burst drain (s) | burst p50 / p99 (ms) | burst lost / dup / early | "
        "Redis µs/msg per primary (process CPU; capacity run) | cores per 1,000 msg/s | "
        "peak PSS (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for dep in deployments:
        if "error" in dep:
            lines.append(f"| {dep['shards']} | failed: {dep['error']} |" + " |" * 8)
            continue
        cap, bur = dep.get("capacity"), dep.get("burst")
        row = [str(dep["shards"])]
        if cap:
            scored = [s for s in cap["steps"] if s["phase"] != "warm"]
            top = max(rates)
            row += [
                (f"≥ {_num(cap['capacity'])}" if cap["capacity"] == top else
                 _num(cap["capacity"]) if cap["capacity"] else f"< {_num(min(rates))}"),
                " / ".join(_num(s["lateness_p99_ms"]) for s in scored),
                " / ".join(_num(s["achieved_rate"]) for s in scored),
            ]  # fmt: skip
        else:
            row += ["-"] * 3
        if bur:
            row += [
                _num(bur["last_delivery_s"], 1),
                f"{_num(bur['lateness_p50_ms'])} / {_num(bur['lateness_p99_ms'])}",
                " / ".join(_num(bur[key]) for key in ("lost", "duplicates", "early")),
            ]
        else:
            row += ["-"] * 3
        measured = [result for result in (cap, bur) if result]
        if measured:
            main, pss = measured[0], max(result["peak_pss_mb"] for result in measured)
            redis_us = primaries_us(main["redis"]) + ("" if cap else " (burst)")
            row += [redis_us, _num(cores_per_1k(main), 3), _num(pss)]
        else:
            row += ["-"] * 3
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", node_table(deployments)]
    return "\n".join(lines)


def node_table(deployments: Sequence[Mapping[str, Any]]) -> str:
    """Each node's µs per message (process CPU, and main thread) in each workload."""
    lines = [
        "| shards | node | holds | capacity: process / main thread µs/msg | "
        "burst: process / main thread µs/msg |",
        "|---|---|---|---|---|",
    ]
    for dep in deployments:
        if "error" in dep:
            continue
        cap, bur = dep.get("capacity"), dep.get("burst")
        for node in dep["nodes"]:
            cells = []
            for result in (cap, bur):
                window = result["redis"] if result else None
                cells.append(
                    "-" if window is None else
                    f"{_num(window['process_us_per_msg'][node], 1)} / "
                    f"{_num(window['main_thread_us_per_msg'][node], 1)}"
                )  # fmt: skip
            holds = ", ".join(dep["placement"].get(node, [])) or "(replica)"
            lines.append(f"| {dep['shards']} | {node} | {holds} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)
