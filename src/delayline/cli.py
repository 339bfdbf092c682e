"""The ``delayline`` command line: one click group over the SDK.

Errors print one line (``error: ...``) and exit 2 for bad input or
configuration, 1 for anything else; never a traceback.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import Any, TextIO, TypeVar, cast

import click

from delayline import local, timing
from delayline.__about__ import __version__
from delayline.client import Client
from delayline.defaults import (
    DEFAULT_API_HOST,
    DEFAULT_API_PORT,
    DEFAULT_DATA_DIR,
    DEFAULT_REDIS_PORT,
    DEFAULT_REDIS_URL,
)
from delayline.delivery import DeliveryBase
from delayline.errors import ConfigurationError, DelaylineError, ValidationError
from delayline.forecast import DEFAULT_HOT_OVER, GRANULARITIES
from delayline.kafka.records import INBOUND_TOPIC, console_headers
from delayline.metrics import percentile_ms
from delayline.model import Message, message_from
from delayline.moments import parse_moment_ms
from delayline.progress import ProgressBar, format_bound
from delayline.retry import ROCKETMQ_RETRY_DELAYS_MS
from delayline.scheduler.settings import SchedulerSettings, run_options
from delayline.sending import numbered_arguments
from delayline.urls import redacted
from delayline.validation import Limits

#: Exit codes: 1 for a runtime failure, 2 for bad usage, input or configuration.
EXIT_FAILURE = 1
EXIT_USAGE = 2

F = TypeVar("F", bound=Callable[..., Any])

redis_url_option = click.option(
    "--redis-url",
    envvar="DELAYLINE_REDIS_URL",
    default=None,
    callback=lambda _context, _parameter, url: local.redis_url(url),
    help="The Redis that delayline uses [env: DELAYLINE_REDIS_URL; default: the embedded "
    "server of the `delayline run` in $DELAYLINE_DATA_DIR or ./delayline-data, "
    f"else {DEFAULT_REDIS_URL}].",
)
api_token_option = click.option(
    "--api-token",
    envvar="DELAYLINE_API_TOKEN",
    default=None,
    help="Require this bearer token on every route but /healthz [env: DELAYLINE_API_TOKEN].",
)


def api_guard_options(prefix: str, host_flag: str) -> Callable[[F], F]:
    """``--<prefix>allowed-hosts``, ``--<prefix>docs`` and ``--insecure-no-auth``, as
    the parameters ``allowed_hosts``, ``docs`` and ``insecure_no_auth``."""

    def add(command: F) -> F:
        for option in reversed(
            [
                click.option(
                    f"--{prefix}allowed-hosts",
                    "allowed_hosts",
                    default=None,
                    help="Comma-separated names the HTTP API answers to (* for any) "
                    f"[default: 127.0.0.1, localhost, ::1 and {host_flag}].",
                ),
                click.option(
                    f"--{prefix}docs",
                    "docs",
                    is_flag=True,
                    help="Serve Swagger UI at /docs (loaded from a CDN).",
                ),
                click.option(
                    "--insecure-no-auth",
                    is_flag=True,
                    help="Serve the HTTP API beyond loopback without a token "
                    "(something in front checks every request).",
                ),
            ]
        ):
            command = option(command)
        return command

    return add


def one_line_errors(command: F) -> F:
    """Turn delayline errors into one line on stderr and an exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except DelaylineError as exc:
            click.echo(f"error: {exc}", err=True)
            usage = isinstance(exc, ValidationError | ConfigurationError)
            sys.exit(EXIT_USAGE if usage else EXIT_FAILURE)

    return cast(F, wrapper)


#: Top-level modules of the server extra's packages: pyspark, pandas, pyarrow,
#: protobuf, fastapi and uvicorn, and what fastapi brings.
SERVER_MODULES = frozenset(
    {"pyspark", "pandas", "pyarrow", "google", "fastapi", "uvicorn", "starlette",
     "pydantic", "confluent_kafka"}
)  # fmt: skip


@contextmanager
def server_extra(command: str) -> Iterator[None]:
    """Turn a missing server package into one line that names the extra to install.

    Raises ConfigurationError for a package of the server extra; any other
    missing module is a bug, and goes up as it is.
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in SERVER_MODULES:
            raise
        raise ConfigurationError(
            f"`delayline {command}` needs the server extra: pip install 'delayline[server]' "
            f"({exc.name} is not installed)"
        ) from exc


def scheduler_options(command: F) -> F:
    """One option per setting of the scheduler (``SchedulerSettings``), with its
    default, so that the two cannot drift apart. An option not given is None:
    the setting keeps its default."""
    for setting in reversed(run_options()):
        default = "" if setting.default is None else f" [default: {setting.default}]"
        command = click.option(
            setting.flag, setting.name, type=setting.type, default=None,
            help=setting.help + default,
        )(command)  # fmt: skip
    return command


def fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_FAILURE)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="delayline")
def main() -> None:
    """delayline: delayed messages that are durable, cancellable, and never early.

    \b
    Example:
      delayline run                         # embedded Redis, scheduler, HTTP API
      delayline send orders.timeout order-42 --delay 30m
    """


def embedded_redis_options(command: F) -> F:
    """--redis-url, --redis-port and --data-dir, as ``delayline run`` takes them."""
    for option in reversed(
        [
            click.option(
                "--redis-url",
                envvar="DELAYLINE_REDIS_URL",
                default=None,
                help="Use this Redis instead of the embedded one [env: DELAYLINE_REDIS_URL].",
            ),
            click.option(
                "--redis-port",
                default=DEFAULT_REDIS_PORT,
                show_default=True,
                help="Port of the embedded Redis (127.0.0.1 only).",
            ),
            click.option(
                "--data-dir",
                type=click.Path(path_type=Path),
                envvar=local.DATA_DIR_ENV,
                default=DEFAULT_DATA_DIR,
                show_default=True,
                help="Redis AOF, Spark checkpoint and state [env: DELAYLINE_DATA_DIR].",
            ),
        ]
    ):
        command = option(command)
    return command


@main.command()
@embedded_redis_options
@scheduler_options
@click.option("--api-host", default=DEFAULT_API_HOST, show_default=True, help="HTTP API address.")
@click.option("--api-port", default=DEFAULT_API_PORT, show_default=True, help="HTTP API port.")
@click.option("--no-api", is_flag=True, help="Do not serve the HTTP API.")
@api_token_option
@api_guard_options("api-", "--api-host")
@click.option(
    "--progress-interval",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds between progress lines.",
)
@click.option(
    "--verbose",
    is_flag=True,
    help="Show Spark's own output here too, instead of only in <data-dir>/spark.log.",
)
@one_line_errors
def run(
    redis_url: str | None,
    redis_port: int,
    data_dir: Path,
    api_host: str,
    api_port: int,
    no_api: bool,
    api_token: str | None,
    allowed_hosts: str | None,
    docs: bool,
    insecure_no_auth: bool,
    progress_interval: float,
    verbose: bool,
    **tuning: Any,
) -> None:
    """Run the scheduler (and the HTTP API), with an embedded Redis unless --redis-url.

    \b
    Example:
      delayline run
      delayline run --redis-url redis://10.0.0.5:6379/0 --data-dir /var/lib/delayline
    """
    # Spark and the web server load here, so that the client commands start fast
    # and work without them.
    with server_extra("run"):
        from delayline.api.server import ApiOptions
        from delayline.service import run_service

    settings = SchedulerSettings(data_dir=data_dir).with_overrides(redis_url=redis_url, **tuning)
    run_service(
        settings,
        embedded_port=None if redis_url else redis_port,
        api=None
        if no_api
        else ApiOptions(
            api_host,
            api_port,
            api_token,
            allowed_hosts=host_list(allowed_hosts),
            docs=docs,
            insecure_no_auth=insecure_no_auth,
        ),
        progress_interval_s=progress_interval,
        echo=click.echo,
        verbose=verbose,
    )


@main.command()
@embedded_redis_options
@click.option(
    "--checkpoint",
    default=None,
    help="The checkpoint, if not <data-dir>/checkpoint: a directory or any Hadoop URI "
    "(hdfs://, s3a://).",
)
@one_line_errors
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
    if report.left_in_outboxes:
        click.echo(
            f"outboxes  {report.left_in_outboxes} entries not yet due; the next run delivers them"
        )
    click.echo(f"old state {report.drained_checkpoint} (delete it once the new run is up)")
    click.echo("next      delayline run, with the new settings")


@main.command()
@redis_url_option
@click.option("--host", default=DEFAULT_API_HOST, show_default=True, help="Address to serve on.")
@click.option("--port", default=DEFAULT_API_PORT, show_default=True, help="Port to serve on.")
@api_token_option
@api_guard_options("", "--host")
@one_line_errors
def api(
    redis_url: str,
    host: str,
    port: int,
    api_token: str | None,
    allowed_hosts: str | None,
    docs: bool,
    insecure_no_auth: bool,
) -> None:
    """Serve only the HTTP API, for a scheduler that runs elsewhere.

    \b
    Example:
      export DELAYLINE_REDIS_URL=redis://:PASSWORD@10.0.0.5:6379/0
      export DELAYLINE_API_TOKEN=...
      delayline api --host 0.0.0.0 --allowed-hosts delayline.internal
    """
    with server_extra("api"):
        import uvicorn

        from delayline.api.app import create_app
        from delayline.api.server import ApiOptions

    options = ApiOptions(
        host,
        port,
        api_token,
        allowed_hosts=host_list(allowed_hosts),
        docs=docs,
        insecure_no_auth=insecure_no_auth,
    )
    options.check()

    click.echo(f"http api  http://{host}:{port} over {redacted(redis_url)}")
    # uvicorn drains on SIGINT/SIGTERM, then re-raises the signal to the handler
    # it found; a no-op one lets the command end with status 0 after the drain.
    for handled in (signal.SIGINT, signal.SIGTERM):
        signal.signal(handled, lambda *_: None)
    app = create_app(
        redis_url, api_token=api_token, allowed_hosts=options.hosts(), docs=options.docs
    )
    uvicorn.run(app, host=host, port=port, log_level="warning")
    click.echo("stopped")


def host_list(text: str | None) -> tuple[str, ...]:
    """``--allowed-hosts``: comma-separated names, or () for the default."""
    return tuple(name.strip() for name in (text or "").split(",") if name.strip())


def parse_headers(pairs: tuple[str, ...]) -> dict[str, str]:
    headers = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValidationError("header", "format", f"--header must be name=value, got {pair!r}")
        headers[name] = value
    return headers


def kafka_options(command: F) -> F:
    """``--kafka`` and ``--kafka-topic``: send through a Kafka inbound topic instead."""
    for option in reversed(
        [
            click.option(
                "--kafka",
                envvar="DELAYLINE_KAFKA",
                metavar="BROKERS",
                help="Produce to the Kafka inbound topic at these brokers (host:port,...) of "
                "a `delayline run --kafka` scheduler, rather than to Redis [env: DELAYLINE_KAFKA].",
            ),
            click.option(
                "--kafka-topic",
                default=INBOUND_TOPIC,
                show_default=True,
                help="With --kafka, the inbound topic.",
            ),
        ]
    ):
        command = option(command)
    return command


def when_options(command: F) -> F:
    """``--delay``, ``--at`` and ``--level``: when a message is due (one; none is now)."""
    for option in reversed(
        [
            click.option("--delay", help="How long from now: 90s, 30m, 2h, 15d, 1h30m."),
            click.option("--at", "at", help="When: RFC 3339 (2026-12-01T09:00:00Z) or epoch ms."),
            click.option(
                "--level", type=int, help="RocketMQ delay level 1..18 (see `delayline levels`)."
            ),
        ]
    ):
        command = option(command)
    return command


def when(delay: str | None, at: str | None, level: int | None) -> dict[str, int | None]:
    """The SDK's ``delay``, ``deliver_at`` and ``level`` from :func:`when_options`."""
    return {
        "delay": None if delay is None else timing.parse_duration_ms(delay),
        "deliver_at": None if at is None else parse_moment_ms(at, "--at"),
        "level": level,
    }


@main.command()
@redis_url_option
@click.argument("topic")
@click.argument("body", required=False)
@when_options
@click.option("--key", help="The message key.")
@click.option("--header", "headers", multiple=True, help="name=value; repeat for more.")
@kafka_options
@one_line_errors
def send(
    redis_url: str,
    kafka: str | None,
    kafka_topic: str,
    topic: str,
    body: str | None,
    delay: str | None,
    at: str | None,
    level: int | None,
    key: str | None,
    headers: tuple[str, ...],
) -> None:
    """Schedule BODY (or standard input, with - or no BODY) for TOPIC; print the id.

    \b
    Example:
      delayline send orders.timeout order-42 --delay 30m
      delayline send reminders '{"user": 7}' --at 2026-12-01T09:00:00Z --header kind=email
      echo -n payload | delayline send retry.calls - --level 5
      delayline send orders.timeout order-42 --delay 30m --kafka localhost:9092
    """
    # The argument's own bytes, as the shell gave them (Python decoded them losslessly).
    data = sys.stdin.buffer.read() if body is None or body == "-" else os.fsencode(body)
    with Client(redis_url, kafka=kafka, kafka_topic=kafka_topic) as client:
        message_id = client.send(
            topic, data, key=key, headers=parse_headers(headers), **when(delay, at, level)
        )
    click.echo(message_id)


@main.command("kafka-headers")
@click.argument("topic")
@when_options
@one_line_errors
def kafka_headers(topic: str, delay: str | None, at: str | None, level: int | None) -> None:
    """Print a new message's send record for TOPIC as kafka-console-producer headers.

    Write the line, a tab and the body to kafka-console-producer with
    ``--property parse.headers=true``; the scheduler (delayline run --kafka)
    reads it from its inbound topic. The message's id is in the line.

    \b
    Example:
      printf '%s\tclose order 42\n' "$(delayline kafka-headers orders.timeout --delay 30s)" |
        kafka-console-producer.sh --bootstrap-server localhost:9092 \\
          --topic delayline.inbound --property parse.headers=true
    """
    due = when(delay, at, level)
    message = Message.create(
        topic,
        b"",
        now_ms=timing.now_ms(),
        limits=Limits(),
        delay=due["delay"],
        deliver_at=due["deliver_at"],
        level=due["level"],
    )
    click.echo(console_headers(message.to_record()))


#: Messages per transaction of ``send-many``: one round trip each.
SEND_MANY_CHUNK = 10_000


@main.command("send-many")
@redis_url_option
@click.argument("source", metavar="FILE", type=click.File("r", encoding="utf-8"))
@click.option(
    "--progress/--no-progress", default=None,
    help="A progress bar on standard error [default: when it is a terminal].",
)  # fmt: skip
@kafka_options
@one_line_errors
def send_many(
    redis_url: str, kafka: str | None, kafka_topic: str, source: TextIO, progress: bool | None
) -> None:
    """Schedule the messages of FILE (- for standard input), one JSON object per line
    with send's arguments; print their ids, one per line.

    Every line is checked before any is sent: a bad one is named by its number,
    and nothing is sent. Then they go 10,000 to a transaction.

    \b
    Example:
      delayline send-many messages.jsonl
      echo '{"topic": "t", "body": "x", "delay": "30m"}' | delayline send-many -
    """
    # A file is read twice (checked, then sent); standard input is kept in memory.
    lines: Sequence[str] | TextIO = source if source.seekable() else source.readlines()
    show = sys.stderr.isatty() if progress is None else progress
    with Client(redis_url, kafka=kafka, kafka_topic=kafka_topic) as client:
        checked = 0
        for number, arguments in numbered_arguments(lines):
            try:
                message_from(arguments, now_ms=timing.now_ms(), limits=client.limits)
            except ValidationError as exc:
                raise ValidationError(exc.field, exc.rule, f"line {number}: {exc}") from exc
            checked += 1
        if lines is source:
            source.seek(0)
        bar = ProgressBar("sent", checked, sys.stderr) if show else None
        sent = 0
        items = (arguments for _, arguments in numbered_arguments(lines))
        while chunk := list(islice(items, SEND_MANY_CHUNK)):
            click.echo("\n".join(client.send_many(chunk)))
            sent += len(chunk)
            if bar:
                bar.update(sent)
        if bar:
            bar.close()


def target(message_id: str | None, topic: str | None, key: str | None) -> str | tuple[str, str]:
    """The ID a command names, or the (topic, key) of its ``--topic`` and ``--key``.
    Raises ValidationError unless it is one or the other."""
    if message_id is not None and topic is None and key is None:
        return message_id
    if message_id is None and topic is not None and key is not None:
        return topic, key
    raise ValidationError("id", "exclusive", "give either ID, or both --topic and --key")


key_options = [
    click.option("--topic", default=None, help="With --key: every pending message of TOPIC..."),
    click.option("--key", default=None, help="...with this producer key (a scan of the state)."),
]


def with_key_options(command: F) -> F:
    for option in reversed(key_options):
        command = option(command)
    return command


@main.command()
@redis_url_option
@click.argument("message_id", metavar="[ID]", required=False)
@with_key_options
@one_line_errors
def cancel(redis_url: str, message_id: str | None, topic: str | None, key: str | None) -> None:
    """Cancel a pending message, or every one of a topic with a producer key.

    By key, the running scheduler scans its state to find them (seconds at 1M
    pending), up to 10,000 a call.

    \b
    Example:
      delayline cancel 01KDVDNA00QZ3X5E4T5M2J8K9R
      delayline cancel --topic orders.timeout --key 42
    """
    named = target(message_id, topic, key)
    if isinstance(named, tuple):
        with Client(redis_url) as client:
            cancelled = client.cancel_key(*named)
        click.echo(f"cancelled {cancelled:,} of topic {named[0]} with key {named[1]}")
        return
    message_id = named
    with Client(redis_url) as client:
        current = client.status(message_id)
        if current.state in ("unknown", "delivered", "rejected") or not client.cancel(message_id):
            fail(f"message {message_id} cannot be cancelled: it is {current.state}")
    click.echo(f"cancelled {message_id}")


@main.command()
@redis_url_option
@click.argument("message_id", metavar="[ID]", required=False)
@with_key_options
@when_options
@one_line_errors
def reschedule(
    redis_url: str,
    message_id: str | None,
    topic: str | None,
    key: str | None,
    delay: str | None,
    at: str | None,
    level: int | None,
) -> None:
    """Move a pending message (or every one of a topic with a producer key) to a new time;
    print the id of the message that replaces it (by key: "old new" per line).

    The old one is never delivered; its copy is, once, at the new time.

    \b
    Example:
      delayline reschedule 01KDVDNA00QZ3X5E4T5M2J8K9R --delay 10m
      delayline reschedule --topic orders.timeout --key 42 --delay 1h
    """
    named = target(message_id, topic, key)
    with Client(redis_url) as client:
        if isinstance(named, tuple):
            topic, key = named
            for old, new in client.reschedule_key(topic, key, **when(delay, at, level)).items():
                click.echo(f"{old} {new}")
        else:
            click.echo(client.reschedule(named, **when(delay, at, level)))


@main.command()
@redis_url_option
@click.argument("message_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@one_line_errors
def status(redis_url: str, message_id: str, as_json: bool) -> None:
    """Show what became of a message: pending, delivered, cancelled, rejected or unknown.

    \b
    Example:
      delayline status 01KDVDNA00QZ3X5E4T5M2J8K9R
    """
    with Client(redis_url) as client:
        current = client.status(message_id)
    if as_json:
        click.echo(json.dumps(current.to_json(), separators=(",", ":")))
        return
    click.echo(f"id            {current.id}")
    click.echo(f"state         {current.state}")
    click.echo(f"deliver_at    {timing.format_time(current.deliver_at_ms)}")
    if current.delivered_at_ms is not None:
        late_ms = current.delivered_at_ms - current.deliver_at_ms
        click.echo(
            f"delivered_at  {timing.format_time(current.delivered_at_ms)} (late {late_ms} ms)"
        )
    if current.reason:
        click.echo(f"reason        {current.reason}")
    if current.rescheduled_to:
        click.echo(f"replaced by   {current.rescheduled_to}")


def describe(delivery: DeliveryBase) -> str:
    late_ms = round((delivery.delivered_at - delivery.deliver_at).total_seconds() * 1000)
    preview = delivery.body[:60].decode("utf-8", "replace").replace("\n", " ")
    return (
        f"{timing.format_time(int(delivery.delivered_at.timestamp() * 1000))}  "
        f"late {late_ms:>6} ms  {delivery.id}  attempt {delivery.attempt}  {preview}"
    )


@main.command()
@redis_url_option
@click.argument("topic")
@click.option("--group", help="Read as this consumer group, acking each delivery.")
@click.option("--count", type=int, default=None, help="Stop after this many deliveries.")
@one_line_errors
def tail(redis_url: str, topic: str, group: str | None, count: int | None) -> None:
    """Follow TOPIC's deliveries as they arrive, with their lateness.

    Without --group it only watches new entries; with --group it consumes
    (and acknowledges) as a member of that group.

    \b
    Example:
      delayline tail orders.timeout
      delayline tail orders.timeout --group billing --count 10
    """
    with Client(redis_url) as client:
        if group:
            for delivery in islice(client.consume(topic, group), count):
                click.echo(describe(delivery))
                delivery.ack()
        else:
            for watched in islice(client.follow(topic), count):
                click.echo(describe(watched))


@main.command()
@redis_url_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@one_line_errors
def stats(redis_url: str, as_json: bool) -> None:
    """Counts, lateness and scheduler liveness, from the same data as /metrics.

    \b
    Example:
      delayline stats
    """
    with Client(redis_url) as client:
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


@main.command()
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
@one_line_errors
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
    with Client(redis_url) as client:
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
    with Client(redis_url) as client:
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


@main.command()
def levels() -> None:
    """Print the RocketMQ delay levels and the default retry schedule.

    \b
    Example:
      delayline levels
    """
    click.echo("level  delay   retry")
    retries = len(timing.LEVELS_MS) - len(ROCKETMQ_RETRY_DELAYS_MS)  # levels before retry 1
    for level, delay_ms in enumerate(timing.LEVELS_MS, start=1):
        retry = str(level - retries) if level > retries else "-"
        click.echo(f"{level:>5}  {timing.format_duration(delay_ms):<6}  {retry:>5}")


#: Where ``delayline cluster`` keeps its record, logs and work directories.
DEFAULT_CLUSTER_DIR = DEFAULT_DATA_DIR / "cluster"

cluster_dir_option = click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    default=DEFAULT_CLUSTER_DIR,
    show_default=True,
    help="The cluster's record, logs and work directories.",
)


@main.group()
def cluster() -> None:
    """A Spark standalone cluster on this machine: a Master and Workers, from the
    spark-class that pyspark ships.

    \b
    Example:
      delayline cluster up --workers 2
      delayline run --master spark://127.0.0.1:7077 --redis-url redis://127.0.0.1:6379/0
      delayline cluster down
    """


@main.command()
def entrypoint() -> None:
    """Print the path of the CLI's entry point, for spark-submit to run.

    \b
    Example:
      spark-submit --master spark://master:7077 "$(delayline entrypoint)" run --redis-url ...
    """
    spec = importlib.util.find_spec("delayline.__main__")
    assert spec is not None  # this very package
    click.echo(spec.origin)


@cluster.command("up")
@cluster_dir_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address of every process.")
@click.option("--port", default=7077, show_default=True, help="The Master's port.")
@click.option("--webui-port", default=8080, show_default=True, help="The Master's web UI port.")
@click.option("--workers", type=click.IntRange(1), default=2, show_default=True)
@click.option("--cores", type=click.IntRange(1), default=1, show_default=True,
              help="Cores each Worker offers.")  # fmt: skip
@click.option("--memory", default="1g", show_default=True, help="Memory each Worker offers.")
@click.option("--nice", "niceness", type=click.IntRange(0, 19), default=10, show_default=True,
              help="How much nicer the cluster runs than Redis and the pump on this machine "
                   "(0 on a machine of its own).")  # fmt: skip
@one_line_errors
def cluster_up(directory: Path, **spec: Any) -> None:
    """Start the Master and the Workers, and wait until every Worker is alive."""
    from delayline.scheduler import standalone  # here: the client commands start without it

    running = standalone.up(standalone.ClusterSpec(directory, **spec))
    click.echo(f"master    {running.master_url}")
    each = f"{spec['cores']} core(s) and {spec['memory']}"
    click.echo(f"workers   {spec['workers']}, each with {each}")
    click.echo(f"web ui    {running.webui_url}")
    click.echo(f"run       delayline run --master {running.master_url} --redis-url ...")
    click.echo(f"stop      delayline cluster down --dir {directory}")


@cluster.command("down")
@cluster_dir_option
@one_line_errors
def cluster_down(directory: Path) -> None:
    """Stop the cluster started from --dir, its executors too."""
    from delayline.scheduler import standalone

    click.echo(f"stopped   {standalone.down(directory)} processes")


@cluster.command("status")
@cluster_dir_option
@one_line_errors
def cluster_status(directory: Path) -> None:
    """What the Master says: its state, the Workers alive, cores in use, applications."""
    from delayline.scheduler import standalone

    running = standalone.RunningCluster.recorded_in(directory)
    state = running.state()
    apps = ", ".join(app.get("name", "?") for app in state.get("activeapps", [])) or "none"
    click.echo(f"master    {running.master_url} ({state.get('status')})")
    click.echo(f"workers   {state.get('aliveworkers')} alive")
    click.echo(f"cores     {state.get('coresused')} of {state.get('cores')} in use")
    click.echo(f"apps      {apps}")
