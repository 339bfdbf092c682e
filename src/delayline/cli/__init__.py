"""The ``delayline`` command line: one click group over the SDK, its commands by audience.

- :mod:`.client_commands`: a producer's and a consumer's (send, cancel, status, ...);
  what ``pip install delayline`` serves.
- :mod:`.schedule_commands`: ``delayline schedule``, recurring schedules (add, pause,
  resume, rm, list, show, next); client commands too. :mod:`.schedule_views` prints them.
- :mod:`.limit_commands`: ``delayline limits``, topics' delivery limits (set, rm, list).
- :mod:`.group_commands`: ``delayline groups``, the group registry (create, list, show,
  quotas); ``delayline --group NAME <command>`` acts for a group.
- :mod:`.operator_commands`: stats, history, pending, and drain.
- :mod:`.server_commands`: run, api and entrypoint; the server extra loads inside them.
- :mod:`.cluster_commands`: ``delayline cluster``, a Spark standalone cluster.
- :mod:`.options`: what they share.

Errors print one line (``error: ...``) and exit 2 for bad input or
configuration, 1 for anything else; never a traceback. This is the one place
that turns errors into exit codes.
"""

from __future__ import annotations

from typing import Any

import click

from delayline.__about__ import __version__
from delayline.cli import (
    client_commands,
    cluster_commands,
    group_commands,
    limit_commands,
    operator_commands,
    schedule_commands,
    server_commands,
)
from delayline.cli.options import group_option
from delayline.errors import ConfigurationError, DelaylineError, ValidationError

#: Exit codes: 1 for a runtime failure, 2 for bad usage, input or configuration.
EXIT_FAILURE = 1
EXIT_USAGE = 2


class OneLineErrors(click.Group):
    """A group whose commands' delayline errors end as one line on standard error and
    an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DelaylineError as exc:
            click.echo(f"error: {exc}", err=True)
            usage = isinstance(exc, ValidationError | ConfigurationError)
            ctx.exit(EXIT_USAGE if usage else EXIT_FAILURE)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="delayline")
@group_option
def main() -> None:
    """delayline: delayed messages that are durable, cancellable, and never early.

    \b
    Example:
      delayline run                         # embedded Redis, scheduler, HTTP API
      delayline send orders.timeout order-42 --delay 30m
    """


main.add_command(client_commands.send)
main.add_command(client_commands.send_many)
main.add_command(client_commands.kafka_headers)
main.add_command(client_commands.cancel)
main.add_command(client_commands.reschedule)
main.add_command(client_commands.status)
main.add_command(client_commands.tail)
main.add_command(client_commands.levels)
main.add_command(schedule_commands.schedule)
main.add_command(limit_commands.limits)
main.add_command(group_commands.groups)
main.add_command(operator_commands.stats)
main.add_command(operator_commands.history)
main.add_command(operator_commands.pending)
main.add_command(operator_commands.drain)
main.add_command(server_commands.run)
main.add_command(server_commands.api)
main.add_command(server_commands.entrypoint)
main.add_command(cluster_commands.cluster)
