"""The ``delayline`` command line. Errors print one line and exit non-zero."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from delayline.__about__ import __version__
from delayline.errors import ConfigurationError, DelaylineError
from delayline.scheduler.settings import SchedulerSettings
from delayline.transports.embedded import DEFAULT_PORT

#: Exit codes: 1 for a runtime failure, 2 for bad usage or configuration.
EXIT_FAILURE = 1
EXIT_CONFIG = 2


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="delayline")
def main() -> None:
    """delayline: delayed messages that are durable, cancellable, and never early."""


@main.command()
@click.option("--redis-url", default=None, help="Use this Redis instead of the embedded one.")
@click.option(
    "--redis-port",
    default=DEFAULT_PORT,
    show_default=True,
    help="Port of the embedded Redis (127.0.0.1 only).",
)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=Path("delayline-data"),
    show_default=True,
    help="Redis AOF, Spark checkpoint and state live here.",
)
@click.option("--master", default=None, help="Spark master [default: local[2,4]].")
@click.option(
    "--checkpoint",
    default=None,
    help="Checkpoint URI (hdfs://, s3a://, file://) [default: <data-dir>/checkpoint].",
)
@click.option("--tick-ms", type=int, default=None, help="Wheel slot width [default: 100].")
@click.option("--shards", type=int, default=None, help="State keys per slot [default: 4].")
@click.option(
    "--partitions",
    "state_partitions",
    type=int,
    default=None,
    help="State partitions, fixed per checkpoint [default: 2].",
)
@click.option("--trigger-ms", type=int, default=None, help="Micro-batch interval [default: 250].")
@click.option(
    "--lead-ms",
    "fire_lead_ms",
    type=int,
    default=None,
    help="Fire slots this early; the sink still waits [default: 300].",
)
@click.option(
    "--max-batch-rows",
    type=int,
    default=None,
    help="Inbound records per batch at most [default: 50000].",
)
@click.option(
    "--progress-interval",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds between progress lines.",
)
def run(
    redis_url: str | None,
    redis_port: int,
    data_dir: Path,
    progress_interval: float,
    **tuning: int | str | None,
) -> None:
    """Run the scheduler, with an embedded Redis unless --redis-url is given.

    \b
    Example:
      delayline run
      delayline run --redis-url redis://10.0.0.5:6379/0 --data-dir /var/lib/delayline
    """
    from delayline.service import run_service  # imports Spark; keep --help fast

    try:
        settings = SchedulerSettings(data_dir=data_dir).with_overrides(
            redis_url=redis_url, **tuning
        )
        run_service(
            settings,
            embedded_port=None if redis_url else redis_port,
            progress_interval_s=progress_interval,
            echo=click.echo,
        )
    except DelaylineError as exc:
        _fail(exc)


def _fail(exc: DelaylineError) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(EXIT_CONFIG if isinstance(exc, ConfigurationError) else EXIT_FAILURE)
