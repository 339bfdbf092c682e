"""docs/benchmarks.md and its plots, generated from the result files of one run.

``write`` fills the ``{{PLACEHOLDERS}}`` of bench/notes.md (the page's text) with
tables built from ``<results>/*.json``, the target table included, and draws
``img/lateness_cdf.png`` and ``img/rss_vs_pending.png`` (PSS, the file name kept).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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
    "peak_pss_mb",
    "cpu_s",
    "wall_s",
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
    "peak PSS MB",
    "CPU s",
    "wall s",
)

Found = dict[tuple[str, str], dict[str, Any]]


def load(results: Path) -> Found:
    """(system, result name) -> result. The name is the file's, less the system."""
    found = {}
    for path in sorted(results.glob("*.json")):
        result = json.loads(path.read_text())
        if "system" in result and "workload" in result:
            name = result.get("name") or path.stem.split("-", 1)[1]
            if "peak_pss_mb" not in result and "peak_rss_mb" in result:  # older files
                result["peak_pss_mb"] = result["peak_rss_mb"]
            found[(result["system"], name)] = result
    return found


def systems_in(found: Found) -> list[str]:
    present = {system for system, _ in found}
    return [s for s in ORDER if s in present] + sorted(present - set(ORDER))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} ms"


def _rows(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def table(found: Found, name: str, extra: tuple[tuple[str, str], ...] = ()) -> str:
    """One row per system for result ``name``; ``extra``: (header, key) columns."""
    rows = []
    for system in systems_in(found):
        result = found.get((system, name))
        if result is not None:
            rows.append(
                [system, *(result.get(c) for c in COLUMNS), *(result.get(k) for _, k in extra)]
            )
    if not rows:
        return "*Not run.*"
    return _rows([*HEADERS, *(h for h, _ in extra)], rows)


def by_delay_table(found: Found) -> str:
    """delayline's steady (SDK), steady-raw (XADD) and, if run, steady-shadow (SDK with
    unscored raw input), below and above 10 s of delay."""
    rows = []
    producers = (("steady", "SDK"), ("steady-raw", "raw XADD"),
                 ("steady-shadow", "SDK, with as much raw input due in 1-2 h"))  # fmt: skip
    for name, producer in producers:
        result = found.get(("delayline", name))
        if not result or "by_delay" not in result:
            continue
        split_s = result["by_delay"]["split_ms"] / 1000
        for part, label in (("below", f"< {split_s:g} s"), ("above", f">= {split_s:g} s")):
            s = result["by_delay"][part]
            rows.append([producer, label, s["expected"], s["lateness_p50_ms"],
                         s["lateness_p99_ms"], s["lateness_max_ms"], s["early"], s["lost"],
                         s["duplicates"]])  # fmt: skip
    if not rows:
        return "*Not run.*"
    header = ["producer", "delay", "messages", "p50 ms", "p99 ms", "max ms", "early", "lost", "dup"]
    return _rows(header, rows)


def capacity_table(found: Found) -> str:
    rows = []
    for system in systems_in(found):
        result = found.get((system, "capacity"))
        if result is None:
            continue
        for step in result["steps"]:
            rows.append([system, f"{step['rate']:,.0f}", step["achieved_rate"],
                         step["lateness_p50_ms"], step["lateness_p99_ms"],
                         step["lateness_max_ms"], step["lost"], step["duplicates"],
                         step["early"], "yes" if step["good"] else
                         ("generator short" if step["generator_limited"] else "no")])  # fmt: skip
        rows.append([f"**{system}**", "**capacity**", f"**{result['capacity']:,.0f}**",
                     "", "", "", "", "", "",
                     f"(at the achieved rate: {result['capacity_achieved']:,.0f})"])  # fmt: skip
    if not rows:
        return "*Not run.*"
    header = ["system", "step msg/s", "achieved/s", "p50 ms", "p99 ms", "max ms", "lost", "dup",
              "early", "good"]  # fmt: skip
    return _rows(header, rows)


def pending_sizes(found: Found) -> list[int]:
    return sorted({int(w.rsplit("-", 1)[1]) for _, w in found if w.startswith("pending-heavy-")})


def memory_table(found: Found) -> str:
    sizes = pending_sizes(found)
    if not sizes:
        return "*Not run.*"
    header = ["system", *(f"peak PSS MB at {n:,} pending" for n in sizes), "ratio last/first"]
    rows = []
    for system in systems_in(found):
        pss = [found.get((system, f"pending-heavy-{n}"), {}).get("peak_pss_mb") for n in sizes]
        if not any(pss):
            continue
        ratio = f"{pss[-1] / pss[0]:.2f}" if pss and pss[0] and pss[-1] else "-"
        rows.append([system, *pss, ratio])
    return _rows(header, rows)


def processes_table(result: dict[str, Any] | None, key: str = "pss_peak_mb") -> str:
    """Per-process PSS (and CPU) of one result, largest first."""
    if not result or not result.get("processes"):
        return "*Not run.*"
    rows = [
        [p["process"], str(p["pid"]), p[key], p["cpu_s"]]
        for p in result["processes"]
        if p[key] or p["cpu_s"]
    ]
    total = sum(p[key] for p in result["processes"])
    rows.append(["**all**", "", f"**{total:,.1f}**", ""])
    return _rows(["process", "pid", "PSS MB", "CPU s"], rows)


def redis_load_table(found: Found) -> str:
    """Each workload's cost to the system's Redis: main-thread CPU per message, forks, memory."""
    rows = []
    for system in systems_in(found):
        for name in _LOAD_ORDER:
            for (owner, result_name), result in sorted(found.items()):
                load = result.get("redis_load")
                if owner != system or not load or not result_name.startswith(name):
                    continue
                rows.append(_load_row(system, result_name, load))
    if not rows:
        return "*Not run.*"
    header = ["system", "workload", "Redis main thread CPU s", "µs per message",
              "msg/s at one core", "AOF rewrite forks", "last fork ms",
              "used / Lua / resident MB after", "costliest commands (ms)",
              "scheduler's own p99 ms, at most"]  # fmt: skip
    return _rows(header, rows)


#: The workloads of redis_load_table, in its order (a prefix names several).
_LOAD_ORDER = ("burst", "steady", "capacity", "pending-heavy", "recovery")


def _load_row(system: str, name: str, load: dict[str, Any]) -> list[Any]:
    per_message = load["main_us_per_message"]
    top = ", ".join(f"{command} {stats['ms']:,}" for command, stats in
                    list(load["top_commands"].items())[:3])  # fmt: skip
    return [system, name, load["main_cpu_s"], per_message,
            round(1e6 / per_message) if per_message else None, load["forks"],
            load["latest_fork_ms"], _memory_cell(load),
            top, (load.get("service_lateness") or {}).get("p99_ms_at_most")]  # fmt: skip


def _memory_cell(load: dict[str, Any]) -> str:
    lua = load.get("lua_memory_mb")  # results before it was recorded have none
    lua_part = "?" if lua is None else f"{lua:,.0f}"
    return f"{load['used_memory_mb']:,.0f} / {lua_part} / {load['rss_mb']:,.0f}"


def idle_table(found: Found) -> str:
    rows = []
    for system in systems_in(found):
        result = found.get((system, "idle"))
        if result is None:
            continue
        busiest = sorted(result["processes"], key=lambda p: -p["cpu_s"])[:3]
        rows.append([system, result["params"]["pending"], f"{result['cpu_cores']:.3f}",
                     result["cpu_s"], result["measured_s"], result["pss_mb"],
                     ", ".join(f"{p['process']} {p['cpu_s']:g} s" for p in busiest),
                     result["params"]["absorb_s"]])  # fmt: skip
    if not rows:
        return "*Not run.*"
    header = ["system", "pending", "cores", "CPU s", "measured s", "PSS MB",
              "busiest processes (CPU s)", "absorb s"]  # fmt: skip
    return _rows(header, rows)


def recovery_table(found: Found) -> str:
    order = {system: n for n, system in enumerate(systems_in(found))}
    runs = sorted(
        (result for (_, name), result in found.items() if name.startswith("recovery")),
        key=lambda result: (-result["params"]["pending"], order[result["system"]]),
    )
    rows = []
    for r in runs:
        during = r.get("during_restart") or {}
        rows.append([r["system"], r["params"]["pending"], r["restart_s"],
                     r["first_delivery_after_restart_s"], r.get("spark_back_s"),
                     during.get("expected"), during.get("lateness_p99_ms"),
                     during.get("lateness_max_ms"), r["lateness_p99_ms"], r["lost"],
                     r["duplicates"], r["early"]])  # fmt: skip
    if not rows:
        return "*Not run.*"
    header = ["system", "pending", "restart s", "first delivery s", "Spark path back s",
              "due during restart", "their p99 ms", "their max ms", "all p99 ms", "lost", "dup",
              "early"]  # fmt: skip
    return _rows(header, rows)


def wall_table(found: Found, plan: dict[str, Any] | None) -> str:
    """Each result's wall time; each session's, estimated and measured, from plan.json."""
    rows = [
        [system, name, found[(system, name)].get("wall_s")]
        for system in systems_in(found)
        for name in sorted(n for s, n in found if s == system)
    ]
    text = _rows(["system", "result", "wall s"], rows) if rows else "*Not run.*"
    if plan:
        sessions = [
            [s["system"], ", ".join(s["steps"]), s["estimated_s"], s["wall_s"]]
            for s in plan["sessions"]
        ]
        text += (
            "\n\nSessions (start and stop included), whole run "
            f"{plan['wall_s'] / 60:.1f} min:\n\n"
            + _rows(["system", "steps", "estimated s", "wall s"], sessions)
        )
    return text


@dataclass
class Target:
    """One row of the target table: what is measured, against what, and whether it is met."""

    target: str
    measured: str
    met: bool | None  # None: not run

    def row(self) -> list[str]:
        status = "not run" if self.met is None else ("**met**" if self.met else "**not met**")
        return [self.target, self.measured, status]


def _get(found: Found, system: str, name: str) -> dict[str, Any] | None:
    return found.get((system, name))


def _p(result: dict[str, Any] | None, key: str, part: str | None = None) -> float | None:
    if result is None or (part and "by_delay" not in result):
        return None
    source = result["by_delay"][part] if part else result
    value = source.get(key)
    return None if value is None else float(value)


def targets(found: Found) -> list[Target]:
    """The targets of issue 9, for delayline, each against the measured number."""
    rows: list[Target] = []
    steady = _get(found, "delayline", "steady")
    zset = _get(found, "zset", "steady")
    raw = _get(found, "delayline", "steady-raw")

    def limit(target: str, value: float | None, bound: float, unit: str = "ms") -> Target:
        if value is None:
            return Target(target, "-", None)
        return Target(target, f"{value:,.0f} {unit}", value <= bound)

    rows.append(limit("steady 5k msg/s, delays 1-45 s, SDK: p50 <= 5 ms",
                      _p(steady, "lateness_p50_ms"), 5))  # fmt: skip
    rows.append(limit("steady, SDK: p99 <= 50 ms", _p(steady, "lateness_p99_ms"), 50))
    ours, theirs = _p(steady, "lateness_p99_ms"), _p(zset, "lateness_p99_ms")
    if ours is None or theirs is None:
        rows.append(Target("steady, SDK: p99 <= 2x the zset's", "-", None))
    else:
        rows.append(Target("steady, SDK: p99 <= 2x the zset's",
                           f"{ours:,.0f} ms against 2 x {theirs:,.0f} ms",
                           ours <= 2 * theirs))  # fmt: skip
    sdk_long, raw_long = _p(steady, "lateness_p99_ms", "above"), _p(raw, "lateness_p99_ms", "above")
    same = "steady raw XADD, delays >= 10 s: same as the SDK (p99 within 20% or 10 ms)"
    if sdk_long is None or raw_long is None:
        rows.append(Target(same, "-", None))
    else:
        rows.append(Target(same, f"p99 {raw_long:,.0f} ms raw, {sdk_long:,.0f} ms SDK",
                           raw_long <= max(1.2 * sdk_long, sdk_long + 10)))  # fmt: skip
    rows.append(limit("steady raw XADD, delays < 10 s: p99 <= 1 s",
                      _p(raw, "lateness_p99_ms", "below"), 1_000))  # fmt: skip

    capacity = _get(found, "delayline", "capacity")
    name = "capacity >= 20,000 msg/s at p99 <= 100 ms, 0 lost/dup/early"
    if capacity is None:
        rows.append(Target(name, "-", None))
    else:
        short = [s for s in capacity["steps"] if s["generator_limited"]]
        note = (
            f" (the generator reached {short[0]['achieved_rate']:,.0f} of "
            f"{short[0]['rate']:,.0f} msg/s)"
            if short
            else ""
        )
        rows.append(Target(name, f"{capacity['capacity']:,.0f} msg/s{note}",
                           capacity["capacity"] >= 20_000))  # fmt: skip

    burst = _get(found, "delayline", "burst")
    name = "burst 50k: p99 <= 100 ms"
    if burst is None:
        rows.append(Target(name, "-", None))
    else:
        rows.append(Target(name, f"p99 {burst['lateness_p99_ms']} ms, lost {burst['lost']}, "
                                 f"early {burst['early']}",
                           burst["lateness_p99_ms"] is not None
                           and burst["lateness_p99_ms"] <= 100))  # fmt: skip
    big = _get(found, "delayline", "burst-500k")
    name = "burst 500k: all delivered within 5 s, none early"
    if big is None:
        rows.append(Target(name, "not run (--long)", None))
    else:
        last = big["last_delivery_s"]
        rows.append(Target(name, f"last delivery {last} s after due, lost {big['lost']}, "
                                 f"early {big['early']}",
                           last is not None and last <= 5 and big["lost"] == 0
                           and big["early"] == 0))  # fmt: skip

    idle = _get(found, "delayline", "idle")
    name = "idle with 1M pending: <= 0.05 cores"
    if idle is None:
        rows.append(Target(name, "-", None))
    else:
        pending = idle["params"]["pending"]
        rows.append(Target(name, f"{idle['cpu_cores']:.3f} cores ({pending:,} pending)",
                           idle["cpu_cores"] <= 0.05))  # fmt: skip

    sizes = [n for n in pending_sizes(found) if ("delayline", f"pending-heavy-{n}") in found]
    pss = {n: found[("delayline", f"pending-heavy-{n}")]["peak_pss_mb"] for n in sizes}
    name = "memory: PSS of all processes <= 1 GB at 1M pending"
    if 1_000_000 in pss:
        rows.append(Target(name, f"{pss[1_000_000]:,.0f} MB", pss[1_000_000] <= 1024))
    else:
        rows.append(Target(name, "-", None))
    if len(sizes) >= 2:
        first, last = sizes[0], sizes[-1]
        ratio = pss[last] / pss[first]
        rows.append(Target(f"memory: <= 1.1x from {first:,} to {last:,} pending",
                           f"{ratio:.2f}x ({pss[first]:,.0f} -> {pss[last]:,.0f} MB)",
                           ratio <= 1.1))  # fmt: skip
    else:
        rows.append(Target("memory: <= 1.1x from 10k to 10M pending", "-", None))

    recovery = _get(found, "delayline", "recovery-1000000")
    during = (recovery or {}).get("during_restart") or {}
    rows.append(limit("SIGKILL + restart, 1M pending: p99 lateness of messages due during "
                      "the restart <= 1 s", during.get("lateness_p99_ms"), 1_000))  # fmt: skip
    rows.append(limit("SIGKILL + restart, 1M pending: Spark path back within 20 s",
                      (recovery or {}).get("spark_back_s"), 20, "s"))  # fmt: skip
    return rows


def target_table(found: Found) -> str:
    return _rows(["target", "measured", "status"], [t.row() for t in targets(found)])


def plot_lateness_cdf(found: Found, out: Path) -> None:
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for system in systems_in(found):
        for name, suffix in (("steady", ""), ("steady-raw", " (raw XADD)")):
            result = found.get((system, name))
            if not result or not result.get("lateness_sample_ms"):
                continue
            sample = sorted(max(1, v) for v in result["lateness_sample_ms"])
            fractions = [(i + 1) / len(sample) for i in range(len(sample))]
            axes.step(sample, fractions, where="post", label=system + suffix)
    axes.set_xscale("log")
    axes.set_xlabel("lateness: received - due (ms, log scale; early shown as 1 ms)")
    axes.set_ylabel("fraction of messages")
    axes.set_title("Steady workload: lateness CDF")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def plot_pss_vs_pending(found: Found, out: Path) -> None:
    sizes = pending_sizes(found)
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for system in systems_in(found):
        points = [
            (n, found[(system, f"pending-heavy-{n}")]["peak_pss_mb"])
            for n in sizes
            if (system, f"pending-heavy-{n}") in found
        ]
        if points:
            axes.plot(*zip(*points, strict=True), marker="o", label=system)
    axes.set_xscale("log")
    axes.set_xlabel("pending messages (log scale)")
    axes.set_ylabel("peak PSS of all the system's processes (MB)")
    axes.set_title("Pending-heavy workload: memory against pending messages")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def _without_batch_list(result: Any) -> Any:
    """A profile's result without its list of every batch (kept in the file, not the page)."""
    if isinstance(result, dict) and isinstance(result.get("batches"), dict):
        batches = {k: v for k, v in result["batches"].items() if k != "last_batches"}
        return result | {"batches": batches}
    return result


def listing_table(result: dict[str, Any] | None) -> str:
    """The times of ``python -m bench listing``, a row per query."""
    if not result:
        return "*Not run.*"
    rows = [
        [name, f"{query['median_s'] * 1000:,.0f} ms", f"{query['found']:,}"]
        for name, query in result["queries"].items()
    ]
    return f"**{result['pending']:,} pending**\n\n" + _rows(["query", "time", "found"], rows)


#: The soak shown in docs/benchmarks.md, in bench/results/soak.
SOAK_RESULT = "60min-5000-valkey.json"


def soak_section(path: Path, docs: Path) -> str:
    """The soak's table and plot (bench/soak.py), or a line saying it was not run."""
    if not path.exists():
        return f"*Not run: no {path.name}.*"
    from bench import soak  # numpy and psutil: only when there is a soak to show

    return soak.report(path, docs)


def write(results: Path, docs: Path, notes: Path, extra: dict[str, Any]) -> Path:
    """Write docs/benchmarks.md and docs/img/*.png from the results in ``results``."""
    found = load(results)
    plan_file = results / "plan.json"
    plan = json.loads(plan_file.read_text()) if plan_file.exists() else None
    images = docs / "img"
    images.mkdir(parents=True, exist_ok=True)
    plot_lateness_cdf(found, images / "lateness_cdf.png")
    plot_pss_vs_pending(found, images / "rss_vs_pending.png")
    sizes = pending_sizes(found)
    largest = f"pending-heavy-{sizes[-1]}" if sizes else ""
    burst_columns = (("last delivery s after due", "last_delivery_s"),
                     ("sent after due", "sent_after_due"))  # fmt: skip
    sections = {
        "TARGETS": target_table(found),
        "TABLE_STEADY": table(found, "steady"),
        "TABLE_STEADY_RAW": table(found, "steady-raw"),
        "TABLE_BY_DELAY": by_delay_table(found),
        "TABLE_BURST": table(found, "burst", burst_columns),
        "TABLE_BURST_500K": table(found, "burst-500k", burst_columns),
        "TABLE_CAPACITY": capacity_table(found),
        "TABLE_PENDING": "\n\n".join(
            f"**{n:,} pending**\n\n" + table(found, f"pending-heavy-{n}") for n in sizes
        )
        or "*Not run.*",
        "TABLE_MEMORY": memory_table(found),
        "TABLE_PROCESSES": processes_table(found.get(("delayline", largest))),
        "TABLE_IDLE": idle_table(found),
        "TABLE_REDIS_LOAD": redis_load_table(found),
        "TABLE_IDLE_PROCESSES": processes_table(found.get(("delayline", "idle")), "pss_last_mb"),
        "TABLE_RECOVERY": recovery_table(found),
        "TABLE_WALL": wall_table(found, plan),
        "REDIS": next(iter(found.values()))["redis"] if found else "-",
        "LISTING_TABLE": listing_table(extra.get("listing")),
        "SOAK": soak_section(results.parent / "soak" / SOAK_RESULT, docs),
        **{key: json.dumps(_without_batch_list(value), indent=1) for key, value in extra.items()},
    }
    text = notes.read_text()
    for key, value in sections.items():
        text = text.replace("{{" + key + "}}", value)
    target = docs / "benchmarks.md"
    target.write_text(text)
    return target
