"""The commands of a producer or a consumer, over the SDK: send, send-many,
kafka-headers, cancel, reschedule, status, tail and levels. They need only the
client (``pip install delayline``)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from itertools import islice
from typing import TextIO

import click

from delayline import timing
from delayline.cli.options import F, connect, redis_url_option
from delayline.delivery import DeliveryBase
from delayline.errors import MessageStateError, ValidationError
from delayline.kafka.records import INBOUND_TOPIC, console_headers
from delayline.model import Message, message_from
from delayline.moments import parse_moment_ms
from delayline.progress import ProgressBar
from delayline.retry import ROCKETMQ_RETRY_DELAYS_MS
from delayline.sending import numbered_arguments
from delayline.validation import Limits


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


@click.command()
@redis_url_option
@click.argument("topic")
@click.argument("body", required=False)
@when_options
@click.option("--key", help="The message key.")
@click.option("--header", "headers", multiple=True, help="name=value; repeat for more.")
@kafka_options
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
    with connect(redis_url, kafka=kafka, kafka_topic=kafka_topic) as client:
        message_id = client.send(
            topic, data, key=key, headers=parse_headers(headers), **when(delay, at, level)
        )
    click.echo(message_id)


@click.command("kafka-headers")
@click.argument("topic")
@when_options
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


@click.command("send-many")
@redis_url_option
@click.argument("source", metavar="FILE", type=click.File("r", encoding="utf-8"))
@click.option(
    "--progress/--no-progress", default=None,
    help="A progress bar on standard error [default: when it is a terminal].",
)  # fmt: skip
@kafka_options
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
    with connect(redis_url, kafka=kafka, kafka_topic=kafka_topic) as client:
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


@click.command()
@redis_url_option
@click.argument("message_id", metavar="[ID]", required=False)
@with_key_options
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
        with connect(redis_url) as client:
            cancelled = client.cancel_key(*named)
        click.echo(f"cancelled {cancelled:,} of topic {named[0]} with key {named[1]}")
        return
    message_id = named
    with connect(redis_url) as client:
        current = client.status(message_id)
        if current.state in ("unknown", "delivered", "rejected") or not client.cancel(message_id):
            raise MessageStateError(message_id, current.state, "cancel")
    click.echo(f"cancelled {message_id}")


@click.command()
@redis_url_option
@click.argument("message_id", metavar="[ID]", required=False)
@with_key_options
@when_options
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
    with connect(redis_url) as client:
        if isinstance(named, tuple):
            topic, key = named
            for old, new in client.reschedule_key(topic, key, **when(delay, at, level)).items():
                click.echo(f"{old} {new}")
        else:
            click.echo(client.reschedule(named, **when(delay, at, level)))


@click.command()
@redis_url_option
@click.argument("message_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(redis_url: str, message_id: str, as_json: bool) -> None:
    """Show what became of a message: pending, delivered, cancelled, rejected or unknown.

    \b
    Example:
      delayline status 01KDVDNA00QZ3X5E4T5M2J8K9R
    """
    with connect(redis_url) as client:
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


@click.command()
@redis_url_option
@click.argument("topic")
@click.option("--group", help="Read as this consumer group, acking each delivery.")
@click.option("--count", type=int, default=None, help="Stop after this many deliveries.")
def tail(redis_url: str, topic: str, group: str | None, count: int | None) -> None:
    """Follow TOPIC's deliveries as they arrive, with their lateness.

    Without --group it only watches new entries; with --group it consumes
    (and acknowledges) as a member of that group.

    \b
    Example:
      delayline tail orders.timeout
      delayline tail orders.timeout --group billing --count 10
    """
    with connect(redis_url) as client:
        if group:
            for delivery in islice(client.consume(topic, group), count):
                click.echo(describe(delivery))
                delivery.ack()
        else:
            for watched in islice(client.follow(topic), count):
                click.echo(describe(watched))


@click.command()
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
