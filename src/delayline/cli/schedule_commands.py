"""``delayline schedule``: put, pause, resume and delete a recurring schedule, and preview
the runs of a definition. Client commands, over the SDK: ``pip install delayline`` is
enough. The runs shown are computed here, from the definition alone."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, BinaryIO
from zoneinfo import ZoneInfo

import click

from delayline import timing
from delayline.cli.client_commands import parse_headers
from delayline.cli.options import F, redis_url_option
from delayline.client import Client
from delayline.errors import ValidationError
from delayline.moments import parse_moment_ms
from delayline.plans.scheduling import ScheduleArguments, definition_from
from delayline.schedules.recurrence import Cron
from delayline.schedules.runs import preview
from delayline.schedules.spec import CATCH_UP_POLICIES, LATEST, Schedule
from delayline.validation import Limits

#: How many runs ``schedule add`` shows.
ADD_SHOWS_RUNS = 5
#: What a change's line ends with.
APPLIED = "the scheduler applies it in its next batch"


@click.group()
def schedule() -> None:
    """Recurring schedules: each run sends a message to the schedule's topic.

    A schedule is named, uniquely within its topic; putting it again replaces
    its definition. Every change travels through the inbound stream and the
    scheduler applies it in its next batch, within about a second.

    \b
    Example:
      delayline schedule add nightly --topic reports --body run --cron "0 2 * * *" --tz Europe/Paris
      delayline schedule add tick --topic jobs --body-file payload.bin --every 15m --catch-up skip
      delayline schedule pause nightly --topic reports
      delayline schedule next --cron "30 2 * * *" --tz Europe/Paris -n 3
    """


def recurrence_options(command: F) -> F:
    """When the runs fall: one of ``--cron`` (with ``--tz``), ``--every`` (with
    ``--anchor``) and ``--at``, within ``--start``, ``--end`` and ``--max-runs``."""
    for option in reversed(
        [
            click.option(
                "--cron",
                help="5 fields (minute hour day-of-month month day-of-week), or 6 with a "
                "second first: '0 9 * * MON-FRI'.",
            ),
            click.option(
                "--tz", help="With --cron: the IANA zone of its wall clock [default: UTC]."
            ),
            click.option("--every", help="A period of at least 1s: 90s, 15m, 1h30m."),
            click.option(
                "--anchor",
                help="With --every: runs fall at anchor + k * every (RFC 3339 or epoch ms) "
                "[default: the Unix epoch].",
            ),
            click.option(
                "--at",
                "times",
                multiple=True,
                help="A time to run at (RFC 3339 or epoch ms); repeat for more, up to 1000.",
            ),
            click.option("--start", help="No run before this time (RFC 3339 or epoch ms)."),
            click.option("--end", help="No run after this time (RFC 3339 or epoch ms)."),
            click.option("--max-runs", type=int, help="No run after this many."),
        ]
    ):
        command = option(command)
    return command


def recurrence_arguments(
    cron: str | None,
    tz: str | None,
    every: str | None,
    anchor: str | None,
    times: tuple[str, ...],
    start: str | None,
    end: str | None,
    max_runs: int | None,
) -> ScheduleArguments:
    """The SDK's arguments of :func:`recurrence_options`, their times parsed. Raises
    ValidationError naming the option."""
    if (cron is not None) + (every is not None) + bool(times) != 1:
        raise ValidationError(
            "recurrence", "one_of", "give exactly one of --cron, --every and --at"
        )
    return {
        "cron": cron,
        "tz": tz,
        "every": every,
        "anchor": _moment_ms(anchor, "--anchor"),
        "times": [parse_moment_ms(time, "--at") for time in times] or None,
        "start": _moment_ms(start, "--start"),
        "end": _moment_ms(end, "--end"),
        "max_runs": max_runs,
    }


def _moment_ms(text: str | None, option: str) -> int | None:
    return None if text is None else parse_moment_ms(text, option)


def _duration_ms(text: str | None, option: str) -> int | None:
    return None if text is None else timing.parse_duration_ms(text, option)


@schedule.command("add")
@redis_url_option
@click.argument("name")
@click.option("--topic", required=True, help="The topic each run is sent to.")
@click.option("--body", help="The body of each run, as text...")
@click.option(
    "--body-file",
    type=click.File("rb"),
    help="...or the bytes of this file (- for standard input).",
)
@recurrence_options
@click.option("--paused", is_flag=True, help="Put it paused (see `delayline schedule resume`).")
@click.option(
    "--catch-up", type=click.Choice(CATCH_UP_POLICIES), default=LATEST, show_default=True,
    help="What becomes of runs missed while delayline was down or the schedule paused: "
    "none is sent (skip), the latest one is, at once (latest), or each one within "
    "--catch-up-window (all).",
)  # fmt: skip
@click.option("--catch-up-window", help="With --catch-up all: how far back [default: 1h].")
@click.option(
    "--catch-up-max-runs", type=int, help="With --catch-up all: the most sent [default: 100]."
)
@click.option("--key", help="The key of each run's message.")
@click.option("--header", "headers", multiple=True, help="name=value; repeat for more.")
def add(
    redis_url: str,
    name: str,
    topic: str,
    body: str | None,
    body_file: BinaryIO | None,
    paused: bool,
    catch_up: str,
    catch_up_window: str | None,
    catch_up_max_runs: int | None,
    key: str | None,
    headers: tuple[str, ...],
    **when: Any,
) -> None:
    """Put schedule NAME of --topic (create it, or replace its definition); print the
    definition and its next 5 runs, in its zone and in UTC.

    Putting the very same definition again changes nothing (a paused schedule
    stays paused); a different one cancels the runs already handed to the outbox
    and not yet due.

    \b
    Example:
      delayline schedule add nightly --topic reports --body run --cron "0 2 * * *" --tz Europe/Paris
      delayline schedule add tick --topic jobs --body '{"n": 1}' --every 15m --max-runs 96
      delayline schedule add launch --topic mail --body go --at 2026-12-01T09:00:00Z \\
        --at 2026-12-08T09:00:00Z
    """
    if (body is None) == (body_file is None):
        raise ValidationError("body", "exclusive", "give exactly one of --body and --body-file")
    # The argument's own bytes, as the shell gave them (as `delayline send` takes them).
    data = body_file.read() if body_file is not None else os.fsencode(body or "")
    window = _duration_ms(catch_up_window, "--catch-up-window")
    arguments: ScheduleArguments = {
        **recurrence_arguments(**when),
        "paused": paused,
        "catch_up": catch_up,
        "catch_up_window": window,
        "catch_up_max_runs": catch_up_max_runs,
        "key": key,
        "headers": parse_headers(headers),
    }
    with Client(redis_url) as client:
        definition = client.schedule(name, topic, data, **arguments)
    click.echo(f"put {topic}/{name}: {APPLIED}")
    for field, value in described(definition):
        click.echo(f"  {field:<18} {value}")
    show_runs(definition, preview(definition, timing.now_ms(), ADD_SHOWS_RUNS))


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


def show_runs(definition: Schedule, runs: list[int]) -> None:
    """Print ``runs`` (epoch ms) in the definition's zone and in UTC."""
    recurrence = definition.recurrence
    zone = recurrence.tz if isinstance(recurrence, Cron) else "UTC"
    if not runs:
        click.echo("no run to come")
        return
    where = "UTC" if zone == "UTC" else f"{zone} and in UTC"
    click.echo(f"next {len(runs)} run{'s' if len(runs) > 1 else ''}, in {where}:")
    for run_ms in runs:
        if zone == "UTC":
            click.echo(f"  {timing.format_time(run_ms)}")
            continue
        local = timing.from_epoch_ms(run_ms).astimezone(ZoneInfo(zone))
        shown = local.isoformat(timespec="milliseconds" if run_ms % 1000 else "seconds")
        click.echo(f"  {shown} {local.tzname():<6} {timing.format_time(run_ms)}")


@schedule.command("next")
@recurrence_options
@click.option("-n", "--count", type=click.IntRange(1, 1_000), default=10, show_default=True,
              help="How many runs.")  # fmt: skip
@click.option(
    "--from", "since",
    help="Show the runs after this time (RFC 3339, epoch ms, or a duration from now, such "
    "as 30d) [default: now].",
)  # fmt: skip
def next_runs(count: int, since: str | None, **when: Any) -> None:
    """Print the next runs of the definition given here, in its zone and in UTC, as the
    scheduler would run them from --from; nothing is written.

    \b
    Example:
      delayline schedule next --cron "0 9 * * MON-FRI" --tz America/New_York
      delayline schedule next --cron "30 2 * * *" --tz Europe/Paris --from 2027-03-26T00:00:00Z -n 3
      delayline schedule next --every 90m --anchor 2026-12-01T09:00:00Z --end 2026-12-02T00:00:00Z
    """
    now_ms = timing.now_ms()
    after_ms = now_ms if since is None else parse_moment_ms(since, "--from", now_ms=now_ms)
    # A definition needs an address and a body; none is written, so any valid ones do.
    arguments = recurrence_arguments(**when)
    definition = definition_from("preview", "preview", b"", limits=Limits(), **arguments)
    show_runs(definition, preview(definition, after_ms, count))


#: ``delayline schedule pause|resume|rm``: what each asks of the client, and says done.
CHANGES: dict[str, tuple[Callable[[Client, str, str], None], str, str]] = {
    "pause": (Client.pause, "paused", "Pause schedule NAME of --topic: no run is sent until "
              "it is resumed, and the runs already handed over and not yet due are cancelled."),
    "resume": (Client.resume, "resumed", "Resume schedule NAME of --topic: the runs it missed "
               "while paused follow its --catch-up policy."),
    "rm": (Client.delete_schedule, "deleted", "Delete schedule NAME of --topic: no run is sent "
           "any more, and the runs already handed over and not yet due are cancelled."),
}  # fmt: skip


def change_command(command_name: str) -> click.Command:
    """The command that pauses, resumes or deletes a schedule (:data:`CHANGES`)."""
    method, done, help_text = CHANGES[command_name]

    example = f"delayline schedule {command_name} nightly --topic reports"

    @click.command(command_name, help=f"{help_text}\n\n\b\nExample:\n  {example}")
    @redis_url_option
    @click.argument("name")
    @click.option("--topic", required=True, help="The schedule's topic.")
    def change(redis_url: str, name: str, topic: str) -> None:
        with Client(redis_url) as client:
            method(client, name, topic)
        click.echo(f"{done} {topic}/{name}: {APPLIED}")

    return change


for _name in CHANGES:
    schedule.add_command(change_command(_name))
