"""docs/benchmarks.md and its plots, generated from the result files of one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

ORDER = ["delayline", "zset", "celery", "dramatiq", "arq", "rq"]
COLUMNS = (
    "achieved_rate",
    "lateness_p50_ms",
    "lateness_p99_ms",
    "lateness_max_ms",
    "early",
    "lost",
    "duplicates",
    "peak_rss_mb",
    "cpu_s",
)
HEADERS = (
    "system",
    "rate/s",
    "p50 ms",
    "p99 ms",
    "max ms",
    "early",
    "lost",
    "dup",
    "peak RSS MB",
    "CPU s",
)


def load(results: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(system, workload) -> result."""
    found = {}
    for path in sorted(results.glob("*.json")):
        result = json.loads(path.read_text())
        if "system" in result and "workload" in result:
            name = path.stem.split("-", 1)[1]
            found[(result["system"], name)] = result
    return found


def systems_in(found: dict[tuple[str, str], Any]) -> list[str]:
    present = {system for system, _ in found}
    return [s for s in ORDER if s in present] + sorted(present - set(ORDER))


def table(found: dict[tuple[str, str], dict[str, Any]], workload: str) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for system in systems_in(found):
        result = found.get((system, workload))
        if result is None:
            continue
        cells = [_cell(result.get(column)) for column in COLUMNS]
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def saturation_table(found: dict[tuple[str, str], dict[str, Any]]) -> str:
    lines = [
        "| system | capacity (msg/s, p99 <= 1 s, kept up) | steps: rate -> p99 ms |",
        "|---|---|---|",
    ]
    for system in systems_in(found):
        result = found.get((system, "saturation"))
        if result is None:
            continue
        steps = ", ".join(
            f"{step['params']['rate']:,.0f} -> {_cell(step['lateness_p99_ms'])}"
            + ("" if step["good"] else " (fails)")
            for step in result["steps"]
        )
        lines.append(f"| {system} | {result['capacity']:,.0f} | {steps} |")
    return "\n".join(lines)


def recovery_table(found: dict[tuple[str, str], dict[str, Any]]) -> str:
    lines = [
        "| system | pending | restart s | first delivery after restart s "
        "| p99 ms | lost | dup | early |",
        "|---|---|---|---|---|---|---|---|",
    ]
    order = {system: n for n, system in enumerate(systems_in(found))}
    runs = sorted(
        (result for (_, workload), result in found.items() if workload.startswith("recovery")),
        key=lambda result: (-result["params"]["pending"], order[result["system"]]),
    )
    for result in runs:
        lines.append(
            f"| {result['system']} | {result['params']['pending']:,} | {result['restart_s']} | "
            f"{_cell(result['first_delivery_after_restart_s'])} | "
            f"{_cell(result['lateness_p99_ms'])} | "
            f"{result['lost']:,} | {result['duplicates']:,} | {result['early']:,} |"
        )
    return "\n".join(lines)


def pending_sizes(found: dict[tuple[str, str], Any]) -> list[int]:
    return sorted({int(w.rsplit("-", 1)[1]) for _, w in found if w.startswith("pending-heavy-")})


def memory_table(found: dict[tuple[str, str], dict[str, Any]]) -> str:
    sizes = pending_sizes(found)
    header = ["system", *(f"peak RSS MB at {n:,} pending" for n in sizes), "ratio last/first"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for system in systems_in(found):
        rss = [found.get((system, f"pending-heavy-{n}"), {}).get("peak_rss_mb") for n in sizes]
        ratio = f"{rss[-1] / rss[0]:.2f}" if rss and rss[0] and rss[-1] else "-"
        lines.append(f"| {system} | " + " | ".join(_cell(v) for v in rss) + f" | {ratio} |")
    return "\n".join(lines)


def plot_lateness_cdf(found: dict[tuple[str, str], dict[str, Any]], out: Path) -> None:
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for system in systems_in(found):
        result = found.get((system, "steady"))
        if not result or not result.get("lateness_sample_ms"):
            continue
        sample = sorted(max(1, v) for v in result["lateness_sample_ms"])
        fractions = [(i + 1) / len(sample) for i in range(len(sample))]
        axes.step(sample, fractions, where="post", label=system)
    axes.set_xscale("log")
    axes.set_xlabel("lateness: received - due (ms, log scale; early shown as 1 ms)")
    axes.set_ylabel("fraction of messages")
    axes.set_title("Steady workload: lateness CDF")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def plot_rss_vs_pending(found: dict[tuple[str, str], dict[str, Any]], out: Path) -> None:
    sizes = pending_sizes(found)
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for system in systems_in(found):
        points = [
            (n, found[(system, f"pending-heavy-{n}")]["peak_rss_mb"])
            for n in sizes
            if (system, f"pending-heavy-{n}") in found
        ]
        if points:
            axes.plot(*zip(*points, strict=True), marker="o", label=system)
    axes.set_xscale("log")
    axes.set_xlabel("pending messages (log scale)")
    axes.set_ylabel("peak RSS of all the system's processes (MB)")
    axes.set_title("Pending-heavy workload: memory against pending messages")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def write(results: Path, docs: Path, notes: Path, extra: dict[str, Any]) -> Path:
    """Write docs/benchmarks.md and docs/img/*.png from the results in ``results``."""
    found = load(results)
    images = docs / "img"
    images.mkdir(parents=True, exist_ok=True)
    plot_lateness_cdf(found, images / "lateness_cdf.png")
    plot_rss_vs_pending(found, images / "rss_vs_pending.png")
    sizes = pending_sizes(found)
    sections = {
        "TABLE_STEADY": table(found, "steady"),
        "TABLE_BURST": table(found, "burst"),
        "TABLE_PENDING": "\n\n".join(
            f"**{n:,} pending**\n\n" + table(found, f"pending-heavy-{n}") for n in sizes
        ),
        "TABLE_MEMORY": memory_table(found),
        "TABLE_SATURATION": saturation_table(found),
        "TABLE_RECOVERY": recovery_table(found),
        "REDIS": next(iter(found.values()))["redis"] if found else "-",
        **{key: json.dumps(value, indent=1) for key, value in extra.items()},
    }
    text = notes.read_text()
    for key, value in sections.items():
        text = text.replace("{{" + key + "}}", value)
    target = docs / "benchmarks.md"
    target.write_text(text)
    return target
