"""``bench schedules``' pure parts, after the scoring: processes by kind, the ratios,
Redis's slow log and the machine's pressure, and the report (the summary against the
issue's targets, the console's lines, the markdown table). No I/O here."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from delayline.redis import scripts

#: The issue's targets: p99 lateness (ms), and PSS of the big size over the small's.
TARGET_P99_MS = 20
TARGET_PSS_RATIO = 1.1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``python -m bench schedules``' options (bench/schedules.py reads them)."""
    parser.description = "1,000 recurring schedules against 100,000, at the same runs/s"
    parser.add_argument("--quick", action="store_true",
                        help="1,000 and 10,000 schedules, 60 s each")  # fmt: skip
    parser.add_argument("--duration-s", type=float, default=None,
                        help="the steady window of each size, s (300; --quick: 60)")  # fmt: skip
    parser.add_argument("--sizes", default=None,
                        help="schedules in all, comma-separated, small first "
                        "(1000,100000; --quick: 1000,10000)")  # fmt: skip
    parser.add_argument("--fast", type=int, default=None,
                        help="schedules every 1 s in each size (1,000)")  # fmt: skip
    parser.add_argument("--no-control", action="store_true",
                        help="skip the one-shot control (the same load, as messages)")  # fmt: skip
    parser.add_argument("--delayline-option", action="append", default=[], metavar="OPTION",
                        help="an extra `delayline run` option (repeatable)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None,
                        help="result file [default: bench/results/schedules/schedules.json, "
                        "or bench/results/schedules-quick/ with --quick]")  # fmt: skip


def slow_commands(entries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Entries of Redis's slow log (``SLOWLOG GET``: commands over 10 ms, the server's
    default): how many, how many over 20 ms, and each command's count and longest (a
    script by its file)."""
    commands: dict[str, dict[str, float]] = {}
    count = over = 0
    for entry in entries:
        words = bytes(entry["command"]).split()
        name = words[0].decode().upper() if words else "?"
        script = scripts.by_sha(words[1]) if name == "EVALSHA" and len(words) > 1 else None
        name = script.file if script is not None else name
        seen = commands.setdefault(name, {"count": 0, "max_ms": 0.0})
        seen["count"] += 1
        seen["max_ms"] = max(seen["max_ms"], round(int(entry["duration"]) / 1000, 1))
        count += 1
        over += int(entry["duration"]) > 20_000
    ordered = sorted(commands.items(), key=lambda item: -item[1]["count"])
    return {"count": count, "over_20ms": over, "commands": dict(ordered)}


def pressure_share(before: Mapping[str, float], after: Mapping[str, float], wall_s: float
                   ) -> dict[str, float]:  # fmt: skip
    """The share of ``wall_s`` that tasks stalled on each resource (``cpu some``, ``io
    full``...), from two readings of /proc/pressure's totals (s)."""
    return {name: round((after[name] - before[name]) / wall_s, 3)
            for name in after if name in before and wall_s > 0}  # fmt: skip


def kind_of(process: str) -> str:
    """A process's kind: its label (``java``, ``python -m delayline run``) without
    the ``[pid]`` that bench.soak's tree_pss adds."""
    return process.rsplit(" [", 1)[0]


def by_kind(processes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """PSS at the end (MB), CPU s and count of ``processes`` (bench.measure.Sampler's
    rows), by kind, the largest PSS first. A process gone by the end (PSS 0) counts
    its CPU only."""
    kinds: dict[str, dict[str, float]] = {}
    for row in processes:
        kind = kinds.setdefault(kind_of(row["process"]), {"count": 0, "pss_mb": 0.0, "cpu_s": 0.0})
        kind["count"] += 1 if row["pss_last_mb"] > 0 else 0
        kind["pss_mb"] = round(kind["pss_mb"] + row["pss_last_mb"], 1)
        kind["cpu_s"] = round(kind["cpu_s"] + row["cpu_s"], 2)
    return dict(sorted(kinds.items(), key=lambda item: -item[1]["pss_mb"]))


def ratio(big: float | None, small: float | None) -> float | None:
    """``big / small`` to 3 places; None without both or with a zero ``small``."""
    if big is None or not small:
        return None
    return round(big / small, 3)


def pss_ratios(small: Mapping[str, Any], big: Mapping[str, Any]) -> dict[str, Any]:
    """PSS of the big size over the small's, in total and by process kind (of those
    alive at the end of either)."""
    kinds = sorted(
        kind
        for kind in set(small["by_kind"]) | set(big["by_kind"])
        if any(size["by_kind"].get(kind, {}).get("pss_mb") for size in (small, big))
    )
    return {
        "total": ratio(big["pss_total_mb"], small["pss_total_mb"]),
        "by_kind": {
            kind: ratio(
                big["by_kind"].get(kind, {}).get("pss_mb"),
                small["by_kind"].get(kind, {}).get("pss_mb"),
            )
            for kind in kinds
        },
    }


def cpu_per_1k_runs(cores: float, runs_per_s: float) -> float | None:
    """Cores per 1,000 runs/s: ``cores / (runs_per_s / 1000)``."""
    return None if runs_per_s <= 0 else round(cores / (runs_per_s / 1_000), 3)


# --- the report ------------------------------------------------------------------


def summary(
    sizes: Sequence[Mapping[str, Any]], control: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The smallest size against the largest (PSS ratios against TARGET_PSS_RATIO),
    and each one's p99 lateness against TARGET_P99_MS and the one-shot control's."""
    ratios = pss_ratios(sizes[0], sizes[-1])
    p99 = {label(s): s["score"]["lateness_ms"]["p99"] for s in (*sizes, *filter(None, [control]))}
    return {
        "pss_ratio": ratios,
        "pss_ratio_target": TARGET_PSS_RATIO,
        "pss_ratio_met": ratios["total"] is not None and ratios["total"] <= TARGET_PSS_RATIO,
        "lateness_p99_ms": p99,
        "lateness_p99_target_ms": TARGET_P99_MS,
        "lateness_p99_met": {
            name: ms is not None and ms <= TARGET_P99_MS for name, ms in p99.items()
        },
    }


def label(size: Mapping[str, Any]) -> str:
    """A size's name in the report: ``1,000 schedules``, or ``one-shot control``."""
    return "one-shot control" if size.get("control") else f"{size['size']:,} schedules"


def headline(size: Mapping[str, Any]) -> str:
    """One line per size for the console."""
    scored, late = size["score"], size["score"]["lateness_ms"]
    return (
        f"[{label(size)}] {scored['runs_per_s']:,.1f} runs/s p50 {late['p50']} p99 {late['p99']} "
        f"max {late['max']} ms early {late['early']} lost {scored['lost']['lost']} dup "
        f"{scored['duplicates_by_id']['extra_copies']} PSS {size['pss_total_mb']:,.0f} MB cpu "
        f"{size['cpu_cores']} cores ({size['wall_s']} s)"
    )


def setup_table(steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """Before each window: the put, the scheduler taking it in, and the deliveries
    meanwhile (runs over a second late, the longest gap between two deliveries, Redis
    commands over 20 ms, its BUSY replies)."""
    lines = [
        "| before the window | put s | taken in s | runs > 1 s late | latest ms | longest gap ms "
        "| Redis commands > 20 ms | BUSY replies |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for step in steps:
        setup, put = step["setup"], step["put"]
        put_s = round(put.get("sdk_s", 0) + put.get("pipelined_s", 0), 1) if "sdk_s" in put else "-"
        lines.append(
            f"| {label(step)} | {put_s} | {step['taken_in_s']} | {setup['later_than_1s']:,} | "
            f"{setup['max_lateness_ms']} | {setup['longest_gap_ms']} | "
            f"{setup['redis_slow_commands']['over_20ms']} | {setup['busy_replies']} |"
        )
    return lines


def table(result: Mapping[str, Any]) -> str:
    """The markdown tables: the steady window of each size (and the control), what came
    before it, and the PSS ratio by process kind."""
    lines = [
        "| | runs/s | lateness p50 / p90 / p99 / max ms | instants > 20 ms | early | lost "
        "| dup (id / run) | PSS MB | CPU cores | cores per 1,000 runs/s | checkpoint MB "
        "| load avg (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    control = result.get("control")
    for size in [*filter(None, [control]), *result["sizes"]]:
        scored, load = size["score"], size["load_average"]
        late, instants = scored["lateness_ms"], scored["instants"]
        lines.append(
            f"| {label(size)} | {scored['runs_per_s']:,.1f} | {late['p50']} / {late['p90']} / "
            f"{late['p99']} / {late['max']} | {instants['late']} of {instants['count']} | "
            f"{late['early']} | {scored['lost']['lost']} of {scored['lost']['expected']:,} | "
            f"{scored['duplicates_by_id']['extra_copies']} / "
            f"{scored['duplicates_by_run']['extra_copies']} | {size['pss_total_mb']:,.0f} | "
            f"{size['cpu_cores']:.2f} | {size['cpu_per_1k_runs_per_s']} | "
            f"{size['data_dir'].get('checkpoint', 0) / 2**20:,.1f} | "
            f"{load['before'][0]:g} -> {load['after'][0]:g} |"
        )
    lines += ["", *setup_table([*filter(None, [control]), *result["sizes"]])]
    ratio = result.get("summary", {}).get("pss_ratio")
    if not ratio:
        return "\n".join(lines)
    small, big = result["sizes"][0], result["sizes"][-1]
    lines += [
        "",
        f"PSS, {big['size']:,} schedules over {small['size']:,}: {ratio['total']} in all.",
        "",
        f"| process kind | PSS MB, {small['size']:,} | PSS MB, {big['size']:,} | ratio |",
        "|---|---|---|---|",
    ]
    for kind, value in ratio["by_kind"].items():
        mb = [size["by_kind"].get(kind, {}).get("pss_mb", "-") for size in (small, big)]
        lines.append(f"| {kind} | {mb[0]} | {mb[1]} | {value} |")
    return "\n".join(lines)
