"""How ``delayline schedule`` shows recurring schedules: a definition's fields, run times
in the schedule's zone and in UTC, a listed schedule's state, and the table of
``schedule list``. Printing only; the commands are in :mod:`.schedule_commands`."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import click

from delayline import timing
from delayline.schedules.listed import ListedSchedule
from delayline.schedules.recurrence import Cron, Every
from delayline.schedules.spec import ALL, Schedule

#: The width of the field names of ``schedule add`` and ``schedule show``.
FIELD_WIDTH = 18
#: The columns of ``schedule list``.
COLUMNS = (
    "TOPIC", "NAME", "STATE", "SPEC", "NEXT RUN", "LAST RUN", "RUNS", "SKIPPED", "CATCH-UP",
)  # fmt: skip
#: The columns of ``schedule list`` aligned to the right: counts.
COUNTS = ("RUNS", "SKIPPED")


def described(definition: Schedule) -> list[tuple[str, str]]:
    """The definition's fields as a person reads them; the body cut to its start."""
    view = definition.to_view()
    view.pop("topic")
    view.pop("name")
    text = view.pop("body", None)
    preview = view.pop("body_b64", None) if text is None else text.replace("\n", " ")
    size = len(definition.body)
    body = f"{preview[:60]}{'…' if len(preview) > 60 else ''} ({size:,} byte{'s' * (size != 1)})"
    shown = [("body" if text is not None else "body (base64)", body)]
    for field, value in view.items():
        if isinstance(value, dict):
            value = ", ".join(f"{n}={v}" for n, v in value.items()) or "none"
        elif isinstance(value, list):
            value = ", ".join(value)
        shown.append((field, str(value)))
    return shown


def show_fields(fields: list[tuple[str, str]]) -> None:
    """Print ``fields``, one a line, their names in a column."""
    for field, value in fields:
        click.echo(f"  {field:<{FIELD_WIDTH}} {value}")


def zoned(run_ms: int, zone: str) -> str:
    """A time (epoch ms) on the wall clock of ``zone`` with the zone's abbreviation, then
    in UTC; in UTC alone for a schedule in UTC."""
    if zone == "UTC":
        return timing.format_time(run_ms)
    local = timing.from_epoch_ms(run_ms).astimezone(ZoneInfo(zone))
    shown = local.isoformat(timespec="milliseconds" if run_ms % 1000 else "seconds")
    return f"{shown} {local.tzname():<6} {timing.format_time(run_ms)}"


def show_runs(definition: Schedule, runs: list[int]) -> None:
    """Print ``runs`` (epoch ms) in the definition's zone and in UTC."""
    zone = definition.zone
    if not runs:
        click.echo("no run to come")
        return
    where = "UTC" if zone == "UTC" else f"{zone} and in UTC"
    click.echo(f"next {len(runs)} run{'s' if len(runs) > 1 else ''}, in {where}:")
    for run_ms in runs:
        click.echo(f"  {zoned(run_ms, zone)}")


def show_listed(listed: ListedSchedule) -> None:
    """``schedule show``: where the schedule's runs stand, then its definition."""
    zone = listed.definition.zone
    click.echo(
        f"{listed.topic}/{listed.name}: {listed.state}, as of "
        f"{timing.format_time(listed.read_at_ms)}"
    )
    show_fields(
        [
            ("next run", "-" if listed.next_run_ms is None else zoned(listed.next_run_ms, zone)),
            ("last run", "-" if listed.last_run_ms is None else zoned(listed.last_run_ms, zone)),
            ("runs sent", f"{listed.runs:,}"),
            ("runs skipped", f"{listed.skipped:,}"),
            ("version", listed.version),
            *described(listed.definition),
        ]
    )


def spec_of(definition: Schedule) -> str:
    """When the runs fall, in a few words: ``cron 0 9 * * * Europe/Paris``, ``every
    15m``, ``at 2026-12-01T09:00:00.000Z +2`` (the first time, and how many follow)."""
    recurrence = definition.recurrence
    if isinstance(recurrence, Cron):
        return f"cron {recurrence.expression} {recurrence.tz}"
    if isinstance(recurrence, Every):
        return f"every {timing.format_duration(recurrence.period_ms)}"
    first, *others = recurrence.times_ms
    return f"at {timing.format_time(first)}" + (f" +{len(others)}" if others else "")


def catch_up_of(definition: Schedule) -> str:
    """The catch-up policy, with its window and cap for ``all``: ``all 1h ≤100``."""
    policy = definition.catch_up
    if policy.policy != ALL:
        return policy.policy
    return f"{ALL} {timing.format_duration(policy.window_ms)} ≤{policy.max_runs}"


def table(rows: list[ListedSchedule]) -> list[str]:
    """``schedule list``'s lines: a header and a line a schedule, in aligned columns."""
    cells = [
        [
            row.topic,
            row.name,
            row.state,
            spec_of(row.definition),
            "-" if row.next_run_ms is None else timing.format_time(row.next_run_ms),
            "-" if row.last_run_ms is None else timing.format_time(row.last_run_ms),
            f"{row.runs:,}",
            f"{row.skipped:,}",
            catch_up_of(row.definition),
        ]
        for row in rows
    ]
    widths = [max(len(line[n]) for line in [list(COLUMNS), *cells]) for n in range(len(COLUMNS))]
    return [
        "  ".join(
            cell.rjust(width) if column in COUNTS else cell.ljust(width)
            for column, cell, width in zip(COLUMNS, line, widths, strict=True)
        ).rstrip()
        for line in [list(COLUMNS), *cells]
    ]
