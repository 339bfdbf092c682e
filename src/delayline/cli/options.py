"""What every part of the ``delayline`` command line shares: the options that name a
Redis, and the line that names the server extra when one of its packages is missing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from delayline import local
from delayline.client import Client
from delayline.defaults import DEFAULT_DATA_DIR, DEFAULT_REDIS_PORT, DEFAULT_REDIS_URL
from delayline.errors import ConfigurationError, ValidationError
from delayline.groups import DEFAULT_GROUP, validate_group

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

#: Where ``--group`` leaves its value, in the click context's meta.
_GROUP = "delayline.group"


def _remember_group(context: click.Context, _parameter: click.Parameter, group: str) -> str:
    try:
        context.meta[_GROUP] = validate_group(group)
    except ValidationError as exc:
        raise click.BadParameter(exc.message) from None
    return group


group_option = click.option(
    "--group",
    envvar="DELAYLINE_GROUP",
    default=DEFAULT_GROUP,
    expose_value=False,
    callback=_remember_group,
    help="Act for this group: its topics, counters, limits and quotas "
    f"[env: DELAYLINE_GROUP; default: {DEFAULT_GROUP}].",
)


def connect(redis_url: str, **options: Any) -> Client:
    """The SDK client of a command: for ``redis_url``, acting for the group that
    ``delayline --group`` named (:data:`group_option`, on the command line's root)."""
    context = click.get_current_context(silent=True)
    group = DEFAULT_GROUP if context is None else context.meta.get(_GROUP, DEFAULT_GROUP)
    return Client(redis_url, group=group, **options)


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
