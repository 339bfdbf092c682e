"""``delayline limits``: set, delete and list topics' delivery limits (a rate, a
spread; see :mod:`delayline.limits`). Client commands, over the SDK."""

from __future__ import annotations

import json

import click

from delayline import timing
from delayline.cli.options import connect, redis_url_option
from delayline.errors import ValidationError
from delayline.limits import MAX_RATE_PER_S, TopicLimit


@click.group()
def limits() -> None:
    """Topics' delivery limits: at most N deliveries a second, earliest due first, and a
    spread of each herd past its due time. Never early; no limit by default.

    \b
    Example:
      delayline limits set reports --rate 2000 --spread 30s
      delayline limits list
      delayline limits rm reports
    """


def describe(limit: TopicLimit) -> str:
    rate = "no rate" if limit.rate_per_s is None else f"at most {limit.rate_per_s:,}/s"
    spread = (
        "no spread"
        if not limit.spread_ms
        else f"spread over {timing.format_duration(limit.spread_ms)}"
    )
    return f"{limit.topic}: {rate}, {spread}"


@limits.command("set")
@redis_url_option
@click.argument("topic")
@click.option(
    "--rate",
    "rate_per_s",
    type=click.IntRange(1, MAX_RATE_PER_S),
    help="At most this many deliveries a second, earliest due first.",
)
@click.option("--spread", help="Spread each message up to this long past its due time (30s, 5m).")
def set_limit(redis_url: str, topic: str, rate_per_s: int | None, spread: str | None) -> None:
    """Set (or replace) TOPIC's delivery limit; it applies from the pump's next call."""
    if rate_per_s is None and spread is None:
        raise ValidationError("limit", "empty", "give --rate, --spread, or both")
    with connect(redis_url) as client:
        click.echo(describe(client.set_topic_limit(topic, rate_per_s=rate_per_s, spread=spread)))


@limits.command("rm")
@redis_url_option
@click.argument("topic")
def delete_limit(redis_url: str, topic: str) -> None:
    """Take TOPIC's limit away: its messages go at their due time again."""
    with connect(redis_url) as client:
        if not client.delete_topic_limit(topic):
            raise ValidationError("topic", "unknown", f"topic {topic!r} has no delivery limit")
    click.echo(f"{topic}: no limit")


@limits.command("list")
@redis_url_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_limits(redis_url: str, as_json: bool) -> None:
    """Every topic's delivery limit."""
    with connect(redis_url) as client:
        found = client.topic_limits()
    if as_json:
        click.echo(json.dumps([limit.to_dict() for limit in found]))
    elif not found:
        click.echo("no topic has a delivery limit")
    for limit in [] if as_json else found:
        click.echo(describe(limit))
