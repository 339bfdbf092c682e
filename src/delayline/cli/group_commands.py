"""``delayline groups``: the group registry (see docs/groups.md): create a group with
its quotas and token, list the groups, show one's health, change its quotas. Client
commands, over the SDK; ``delayline --group NAME <command>`` acts for a group."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import click

from delayline.cli.options import redis_url_option
from delayline.client import Client
from delayline.groups import MAX_QUOTA, Group, Quotas
from delayline.metrics import percentile_ms

F = TypeVar("F", bound=Callable[..., Any])


@click.group()
def groups() -> None:
    """Groups: namespaces of topics with a delivery lane, counters and quotas of their
    own, so that one business does not delay or fill another's.

    \b
    Example:
      delayline groups create billing --max-pending 1000000 --topic-pattern 'invoices.*'
      delayline groups list
      delayline --group billing send invoices.eu '{...}' --delay 15d
    """


def quota_options(command: F) -> F:
    """--max-pending, --max-send-per-s, --max-body-bytes and --topic-pattern."""
    bound = click.IntRange(1, MAX_QUOTA)
    for option in reversed(
        [
            click.option("--max-pending", type=bound, help="Pending messages at most."),
            click.option("--max-send-per-s", type=bound, help="Messages sent a second at most."),
            click.option("--max-body-bytes", type=bound, help="Largest body, bytes."),
            click.option(
                "--topic-pattern",
                "topic_patterns",
                multiple=True,
                help="A topic the group may send to (shell pattern: 'invoices.*'); repeat it.",
            ),
        ]
    ):
        command = option(command)
    return command


def quotas_of(
    max_pending: int | None,
    max_send_per_s: int | None,
    max_body_bytes: int | None,
    topic_patterns: tuple[str, ...],
) -> Quotas:
    return Quotas(max_pending, max_send_per_s, max_body_bytes, topic_patterns)


def describe(group: Group) -> str:
    q = group.quotas
    bounds = [
        f"{name} {value:,}"
        for name, value in (
            ("pending", q.max_pending),
            ("sends/s", q.max_send_per_s),
            ("body bytes", q.max_body_bytes),
        )
        if value is not None
    ]
    if q.topic_patterns:
        bounds.append("topics " + " ".join(q.topic_patterns))
    return f"{group.name}: {', '.join(bounds) or 'no quota'}"


@groups.command("create")
@redis_url_option
@click.argument("name")
@quota_options
def create(redis_url: str, name: str, **quotas: Any) -> None:
    """Create group NAME with its quotas, and print its token: once, since delayline
    keeps only its digest."""
    with Client(redis_url) as client:
        created = client.create_group(name, quotas_of(**quotas))
    click.echo(f"created {describe(created.group)}")
    click.echo(f"token (shown once; keep it): {created.token}")


@groups.command("list")
@redis_url_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_groups(redis_url: str, as_json: bool) -> None:
    """Every group besides the default one, with its quotas."""
    with Client(redis_url) as client:
        found = client.groups()
    if as_json:
        click.echo(json.dumps([{"name": g.name, **g.stored_dict()} for g in found]))
    elif not found:
        click.echo("no group besides the default one")
    for group in [] if as_json else found:
        click.echo(describe(group))


@groups.command("show")
@redis_url_option
@click.argument("name")
def show(redis_url: str, name: str) -> None:
    """Group NAME's quotas and health: pending, delivered, lateness, the last minute."""
    with Client(redis_url) as admin:
        group = admin.get_group(name)
        client = admin.for_group(name)
        metrics, history = client.metrics(), client.history(1)
    click.echo(describe(group))
    lateness = {q: percentile_ms(metrics.lateness, q) for q in (0.5, 0.99)}
    click.echo(
        f"pending {metrics.pending:,}, delivered {metrics.counters['delivered']:,}, "
        f"rejected {metrics.counters['rejected']:,}; last minute {history.delivered:,} "
        f"delivered; lateness p50 {lateness[0.5]} ms, p99 {lateness[0.99]} ms"
    )


@groups.command("quotas")
@redis_url_option
@click.argument("name")
@quota_options
def set_quotas(redis_url: str, name: str, **quotas: Any) -> None:
    """Replace group NAME's quotas (those not given: no bound); clients apply them
    within 10 s."""
    with Client(redis_url) as client:
        click.echo(describe(client.set_group_quotas(name, quotas_of(**quotas))))
