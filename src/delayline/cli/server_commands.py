"""The commands that serve: run (the scheduler, the HTTP API and the embedded Redis),
api (the HTTP API alone) and entrypoint (for spark-submit). Spark and the web server
load inside the commands, so that the client's commands start fast and work without
them."""

from __future__ import annotations

import functools
import importlib.util
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from delayline.cli.options import F, embedded_redis_options, redis_url_option, server_extra
from delayline.defaults import DEFAULT_API_HOST, DEFAULT_API_PORT
from delayline.scheduler.settings import RunOption, SchedulerSettings, run_options
from delayline.urls import redacted

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


def scheduler_options(command: F) -> F:
    """One option per setting of the scheduler (``SchedulerSettings``), with its
    default, so that the two cannot drift apart. An option not given is None:
    the setting keeps its default."""
    for setting in reversed(run_options()):
        default = "" if setting.default is None else f" [default: {setting.default}]"
        command = click.option(
            setting.flag, setting.name, type=setting.type, default=None,
            help=setting.help + default, callback=_or_alias,
        )(command)  # fmt: skip
        for alias in setting.aliases:
            # Eager: read before every setting, so the setting's callback finds it.
            command = click.option(
                alias, f"{setting.name}_as_{alias.strip('-').replace('-', '_')}",
                type=setting.type, hidden=True, is_eager=True, expose_value=False,
                callback=functools.partial(_deprecated_alias, setting),
            )(command)  # fmt: skip
    return command


def _deprecated_alias(
    setting: RunOption, ctx: click.Context, param: click.Parameter, value: Any
) -> None:
    """Warn that a deprecated flag of ``setting`` was given, and keep its value."""
    if value is not None:
        click.echo(f"warning: {param.opts[0]} is deprecated: use {setting.flag}", err=True)
        ctx.meta[f"delayline.alias.{setting.name}"] = value


def _or_alias(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """A setting's value, or that of a deprecated alias if only that was given."""
    return value if value is not None else ctx.meta.get(f"delayline.alias.{param.name}")


@click.command()
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
@click.option(
    "--standby",
    is_flag=True,
    help="A warm standby: start Spark, its workers and the HTTP API, then take over when "
    "the active scheduler's lease lapses (--lease-ms). Needs --redis-url and the active's "
    "--checkpoint, and a --data-dir of its own.",
)
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
    standby: bool,
    **tuning: Any,
) -> None:
    """Run the scheduler (and the HTTP API), with an embedded Redis unless --redis-url.

    \b
    Example:
      delayline run
      delayline run --redis-url redis://10.0.0.5:6379/0 --data-dir /var/lib/delayline
      delayline run --standby --redis-url redis://10.0.0.5:6379/0 --checkpoint /shared/ckpt
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
        auto_shards=tuning.get("inbound_shards") is None,
        standby=standby,
    )


@click.command()
@redis_url_option
@click.option("--host", default=DEFAULT_API_HOST, show_default=True, help="Address to serve on.")
@click.option("--port", default=DEFAULT_API_PORT, show_default=True, help="Port to serve on.")
@api_token_option
@api_guard_options("", "--host")
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


@click.command()
def entrypoint() -> None:
    """Print the path of the CLI's entry point, for spark-submit to run.

    \b
    Example:
      spark-submit --master spark://master:7077 "$(delayline entrypoint)" run --redis-url ...
    """
    spec = importlib.util.find_spec("delayline.__main__")
    assert spec is not None  # this very package
    click.echo(spec.origin)
