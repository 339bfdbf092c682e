"""``delayline schedule``: put, pause, resume and delete a recurring schedule; list the
schedules, show one, and preview the runs of a stored schedule or of a definition.
Client commands, over the SDK: ``pip install delayline`` is enough. The runs shown are
computed here, from the definition (a stored one as the scheduler's listing gives it);
how they are printed is :mod:`.schedule_views`."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, BinaryIO

import click

from delayline import timing
from delayline.cli.client_commands import parse_headers
from delayline.cli.options import F, connect, redis_url_option
from delayline.cli.schedule_views import described, show_fields, show_listed, show_runs, table
from delayline.client import Client
from delayline.client_base import MAX_PREVIEW
from delayline.errors import ValidationError
from delayline.listing import MAX_LIMIT
from delayline.moments import parse_moment_ms
from delayline.plans.scheduling import ScheduleArguments, definition_from
from delayline.schedules.listed import ACTIVE, PAUSED
from delayline.schedules.runs import preview
from delayline.schedules.spec import CATCH_UP_POLICIES, LATEST
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
      delayline schedule list --topic reports
      delayline schedule next nightly --topic reports -n 3
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
    with connect(redis_url) as client:
        definition = client.schedule(name, topic, data, **arguments)
    click.echo(f"put {topic}/{name}: {APPLIED}")
    show_fields(described(definition))
    show_runs(definition, preview(definition, timing.now_ms(), ADD_SHOWS_RUNS))


@schedule.command("list")
@redis_url_option
@click.option("--topic", help="Only this topic's schedules.")
@click.option("--limit", type=click.IntRange(1, MAX_LIMIT), default=100, show_default=True,
              help="At most this many, by topic, then name.")  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON (as GET /v1/schedules).")
def list_schedules(redis_url: str, topic: str | None, limit: int, as_json: bool) -> None:
    """List the recurring schedules: each one's state (active, paused or finished), when
    its runs fall, its next and last run (UTC), the runs sent and skipped, and its
    catch-up policy.

    The running scheduler scans its state for them (an operator's tool:
    seconds, on the scheduler's cores). A schedule put a moment ago shows once
    the scheduler's next batch has it, within about a second.

    \b
    Example:
      delayline schedule list
      delayline schedule list --topic reports --json
    """
    with connect(redis_url) as client:
        rows = client.schedules(topic=topic, limit=limit)
    if as_json:
        click.echo(json.dumps({"schedules": [row.to_view() for row in rows]}))
        return
    if rows:
        for line in table(rows):
            click.echo(line)
    click.echo(f"{len(rows):,} listed" + (f" (the first {limit:,})" if len(rows) == limit else ""))


@schedule.command("show")
@redis_url_option
@click.argument("name")
@click.option("--topic", required=True, help="The schedule's topic.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (as GET /v1/schedules/T/N).")
def show(redis_url: str, name: str, topic: str, as_json: bool) -> None:
    """Show schedule NAME of --topic: its state, its next and last run (in its zone and in
    UTC), the runs sent and skipped, and its definition. Exit 1 if the scheduler's state
    has no such schedule (or not yet: one put a moment ago shows within about a second).

    \b
    Example:
      delayline schedule show nightly --topic reports
    """
    with connect(redis_url) as client:
        listed = client.get_schedule(name, topic)
    if as_json:
        click.echo(json.dumps(listed.to_view()))
        return
    show_listed(listed)


@schedule.command("next")
@redis_url_option
@click.argument("name", required=False)
@click.option("--topic", help="With NAME: the stored schedule's topic.")
@recurrence_options
@click.option("-n", "--count", type=click.IntRange(1, MAX_PREVIEW), default=10,
              show_default=True, help="How many runs.")  # fmt: skip
@click.option(
    "--from", "since",
    help="Show the runs after this time (RFC 3339, epoch ms, or a duration from now, such "
    "as 30d) [default: now; with NAME, not before now].",
)  # fmt: skip
def next_runs(
    redis_url: str, name: str | None, topic: str | None, count: int, since: str | None,
    **when: Any,
) -> None:  # fmt: skip
    """Print the next runs of stored schedule NAME of --topic, or of the definition given
    by the options (--cron, --every or --at), in its zone and in UTC; nothing is written.

    With NAME, the runs are those of the definition the scheduler holds, within
    its start, its end and the --max-runs it has left (for a paused schedule:
    the runs to come once it is resumed). Without, the definition is the
    options', run as the scheduler would run it from --from.

    \b
    Example:
      delayline schedule next nightly --topic reports -n 3
      delayline schedule next --cron "0 9 * * MON-FRI" --tz America/New_York
      delayline schedule next --cron "30 2 * * *" --tz Europe/Paris --from 2027-03-26T00:00:00Z -n 3
      delayline schedule next --every 90m --anchor 2026-12-01T09:00:00Z --end 2026-12-02T00:00:00Z
    """
    now_ms = timing.now_ms()
    after_ms = now_ms if since is None else parse_moment_ms(since, "--from", now_ms=now_ms)
    if name is None and topic is None:
        # A definition needs an address and a body; none is written, so any valid ones do.
        arguments = recurrence_arguments(**when)
        definition = definition_from("preview", "preview", b"", limits=Limits(), **arguments)
        show_runs(definition, preview(definition, after_ms, count))
        return
    if name is None or topic is None:
        raise ValidationError(
            "topic" if topic is None else "name",
            "together",
            "a stored schedule is NAME and --topic, given together",
        )
    if any(value not in (None, ()) for value in when.values()):
        raise ValidationError(
            "recurrence",
            "exclusive",
            "give NAME --topic T for a stored schedule, or --cron, --every or --at for a "
            "definition, not both",
        )
    with connect(redis_url) as client:
        listed = client.get_schedule(name, topic)
    if listed.state != ACTIVE:
        click.echo(f"{topic}/{name} is {listed.state}" + (
            ": the runs to come once it is resumed" if listed.state == PAUSED else ""
        ))  # fmt: skip
    show_runs(listed.definition, listed.upcoming(count, after_ms))


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
        with connect(redis_url) as client:
            method(client, name, topic)
        click.echo(f"{done} {topic}/{name}: {APPLIED}")

    return change


for _name in CHANGES:
    schedule.add_command(change_command(_name))
