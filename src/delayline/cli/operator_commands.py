"""The commands of an operator: stats, history and pending, which read what the
scheduler keeps, and drain, which hands a stopped scheduler's state to a new checkpoint (it
needs the server extra)."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from delayline import timing
from delayline.cli.options import connect, embedded_redis_options, redis_url_option, server_extra
from delayline.forecast import DEFAULT_HOT_OVER, GRANULARITIES
from delayline.history import DEFAULT_MINUTES, MAX_MINUTES
from delayline.metrics import percentile_ms
from delayline.moments import parse_moment_ms
from delayline.progress import ProgressBar, format_bound
from delayline.scheduler.settings import SchedulerSettings


@click.command()
@redis_url_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def stats(redis_url: str, as_json: bool) -> None:
    """Counts, lateness and scheduler liveness, from the same data as /metrics.

    \b
    Example:
      delayline stats
    """
    with connect(redis_url) as client:
        metrics = client.metrics()
    lateness = {q: percentile_ms(metrics.lateness, q) for q in (0.5, 0.99)}
    if as_json:
        click.echo(json.dumps(metrics.to_json()))
        return
    notes = {
        "cancels_applied": "as each cancelled message's time comes",
        "pending": "cancelled ones included until then",
    }
    rows = list(metrics.counters.items())
    rows += [("pending", metrics.pending), ("  in the outbox", metrics.outbox)]
    for name, count in rows:
        note = notes.get(name)
        click.echo(f"{name.replace('_', ' '):<18}{count:>12,}" + (f"  {note}" if note else ""))
    click.echo(
        f"{'lateness':<18}p50 {format_bound(lateness[0.5])}  p99 {format_bound(lateness[0.99])}"
    )
    age = metrics.last_batch_age_ms
    click.echo(
        f"{'scheduler':<18}"
        + ("never ran" if age is None else f"last batch {age / 1000:.1f} s ago")
    )


@click.command()
@redis_url_option
@click.option(
    "--minutes",
    type=click.IntRange(1, MAX_MINUTES),
    default=DEFAULT_MINUTES,
    show_default=True,
    help="How many minutes back, the current one included (the server keeps 25 hours).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON, every minute included.")
def history(redis_url: str, minutes: int, as_json: bool) -> None:
    """What each minute delivered, dropped and rejected, and how late: the history the
    server keeps, whoever reads it. Minutes with nothing are left out of the table.

    \b
    Example:
      delayline history --minutes 1440
    """
    with connect(redis_url) as client:
        found = client.history(minutes)
    if as_json:
        click.echo(json.dumps(found.to_json()))
        return
    shown = [m for m in found.minutes if m.delivered or m.dropped or m.rejected]
    if not shown:
        click.echo(f"nothing delivered, dropped or rejected in the last {minutes} minutes")
        return
    click.echo(f"{'minute (UTC)':<18}{'delivered':>10}{'dropped':>9}{'rejected':>10}  lateness")
    for minute in shown:
        p50, p99 = format_bound(minute.lateness_ms(0.5)), format_bound(minute.lateness_ms(0.99))
        at = timing.format_time(minute.minute_ms)[:16].replace("T", " ")
        click.echo(
            f"{at:<18}{minute.delivered:>10,}{minute.dropped:>9,}{minute.rejected:>10,}"
            f"  p50 {p50}  p99 {p99}"
        )
    click.echo(f"{'in all':<18}{found.delivered:>10,}")


def window_end(text: str | None, flag: str) -> datetime | None:
    """``--from`` or ``--to``: RFC 3339, epoch ms or a duration from now; None if not
    given. Raises ValidationError naming ``flag``."""
    if text is None:
        return None
    return timing.from_epoch_ms(parse_moment_ms(text, flag, now_ms=timing.now_ms()))


#: Width of the longest bar in ``delayline pending`` (characters).
BAR_WIDTH = 40


def bar(count: int, largest: int) -> str:
    """A bar proportional to ``count``; any count above zero shows at least one block."""
    return "\u2588" * max(1, round(BAR_WIDTH * count / largest)) if count else ""


@click.command()
@redis_url_option
@click.option(
    "--by", type=click.Choice(GRANULARITIES), default="minute", show_default=True,
    help="The bucket: minute, hour or day (UTC).",
)  # fmt: skip
@click.option("--topic", default=None, help="Only this topic.")
@click.option(
    "--from", "start", default=None,
    help="From this time: RFC 3339, epoch ms, or a duration from now (2h).",
)  # fmt: skip
@click.option("--to", "end", default=None, help="Up to this time, excluded (same forms).")
@click.option(
    "--hot-over", type=int, default=DEFAULT_HOT_OVER, show_default=True,
    help="Mark the seconds with more than this many due.",
)  # fmt: skip
@click.option("--list", "as_list", is_flag=True, help="List the messages themselves (a scan).")
@click.option("--key", default=None, help="With --list: only this producer key.")
@click.option("--limit", type=int, default=100, show_default=True, help="With --list: at most.")
@click.option(
    "--progress/--no-progress", default=None,
    help="With --list: a progress bar on standard error [default: on a terminal].",
)  # fmt: skip
@click.option("--json", "as_json", is_flag=True, help="Print JSON (as GET /v1/pending).")
def pending(
    redis_url: str,
    by: str,
    topic: str | None,
    start: str | None,
    end: str | None,
    hot_over: int,
    as_list: bool,
    key: str | None,
    limit: int,
    progress: bool | None,
    as_json: bool,
) -> None:
    """Show how many messages are pending, per time bucket and topic, and the hot instants;
    or, with --list, the pending messages themselves.

    The counts come from counters kept per due minute: instant, whatever the
    number pending. --list asks the running scheduler to scan its state (an
    operator's tool: seconds at 1M pending, on the scheduler's cores).

    \b
    Example:
      delayline pending --by hour
      delayline pending --topic orders.timeout --from 2026-12-01T00:00:00Z --to 1d
      delayline pending --list --topic orders.timeout --key 42
    """
    window = {"start": window_end(start, "--from"), "end": window_end(end, "--to")}
    if as_list:
        show = sys.stderr.isatty() if progress is None else progress
        list_messages(redis_url, topic, key, limit, window, show, as_json)
        return
    with connect(redis_url) as client:
        forecast = client.pending(by=by, topic=topic, hot_over=hot_over, **window)
    if as_json:
        click.echo(json.dumps(forecast.to_json(), separators=(",", ":")))
        return
    largest = max((bucket.count for bucket in forecast.buckets), default=0)
    for bucket in forecast.buckets:
        topics = "  ".join(
            f"{name} {n:,}" for name, n in sorted(bucket.topics.items(), key=lambda t: -t[1])
        )
        click.echo(
            f"{timing.format_time(bucket.start_ms)}  {bucket.count:>11,}  "
            f"{bar(bucket.count, largest):<{BAR_WIDTH}}  {topics}".rstrip()
        )
    click.echo(f"{'total':<24}  {forecast.total:>11,}")
    if forecast.hot:
        click.echo(f"hot instants (more than {hot_over:,} due in one second):")
        for instant in forecast.hot:
            click.echo(f"  {timing.format_time(instant.at_ms)}  {instant.count:>11,}")


def list_messages(
    redis_url: str,
    topic: str | None,
    key: str | None,
    limit: int,
    window: dict[str, Any],
    show_progress: bool,
    as_json: bool,
) -> None:
    """``delayline pending --list``: a line (or a JSON object) per pending message."""
    bar = ProgressBar("scanned", None, sys.stderr) if show_progress else None
    with connect(redis_url) as client:
        rows = client.list_pending(
            topic=topic,
            key=key,
            limit=limit,
            on_progress=None if bar is None else bar.update,
            **window,
        )
    if bar:
        bar.close()
    if as_json:
        click.echo(json.dumps({"messages": [row.to_json() for row in rows]}))
        return
    for row in rows:
        click.echo(
            f"{row.id}  {timing.format_time(row.deliver_at_ms)}  {row.topic}  "
            f"key={row.key or '-'}  attempt={row.attempt}  {row.body_bytes:,} B  {row.where}"
        )
    click.echo(f"{len(rows):,} listed" + (f" (the first {limit:,})" if len(rows) == limit else ""))


@click.command()
@embedded_redis_options
@click.option(
    "--checkpoint",
    default=None,
    help="The checkpoint, if not <data-dir>/checkpoint: a directory or any Hadoop URI "
    "(hdfs://, s3a://).",
)
def drain(redis_url: str | None, redis_port: int, data_dir: Path, checkpoint: str | None) -> None:
    """Hand a stopped scheduler's pending messages to a new checkpoint, to change pinned
    settings (--partitions, --inbound-shards, the wheel).

    Appends every message of the checkpoint's state to the inbound stream, then
    moves the checkpoint aside; the next run starts a new one, with any
    settings, that reads them back. Stop the scheduler first (Ctrl-C); if the
    drain stops midway, run it again: it appends only what it has not.

    \b
    Example:
      delayline drain
      delayline run --partitions 8
    """
    with server_extra("drain"):
        from delayline.service import drain_data_dir

    settings = SchedulerSettings(data_dir=data_dir).with_overrides(
        redis_url=redis_url, checkpoint=checkpoint
    )
    report = drain_data_dir(
        settings, embedded_port=None if redis_url else redis_port, echo=click.echo
    )
    click.echo(f"drained   {report.messages} pending messages onto the inbound stream")
    if report.schedules:
        click.echo(f"drained   {report.schedules} recurring schedules, put again for the next run")
    if report.left_in_outboxes:
        click.echo(
            f"outboxes  {report.left_in_outboxes} entries not yet due; the next run delivers them"
        )
    click.echo(f"old state {report.drained_checkpoint} (delete it once the new run is up)")
    click.echo("next      delayline run, with the new settings")
