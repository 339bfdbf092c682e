"""Server processes for the launchers of replicated topologies (``redis_cluster.py``,
``replicated.py``): the embedded Valkey binary run from a configuration file
private to this user, in a folder of its own, in a session of its own, its
output in a log file beside the configuration.

The password goes in the configuration file (mode 0600), never on the command
line, where ``ps`` would show it; a server's umask (077) keeps the files it
writes private too. A server dies with the thread that started it
(Linux ``PR_SET_PDEATHSIG``), so a test process killed midway leaves none behind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import redis

from delayline.errors import TransportError
from delayline.lifetime import die_with_parent
from delayline.redis.connection import no_retries
from delayline.redis.embedded import server_executable
from delayline.testing import wait_for

T = TypeVar("T")

#: Where every server listens.
LOOPBACK = "127.0.0.1"
#: A server's address: (host, port).
Address = tuple[str, int]
#: How long a started server may take to answer PING (s): it may replay its AOF first.
START_TIMEOUT_S = 15.0
#: How long a SIGKILLed server may take to be reaped (s).
EXIT_TIMEOUT_S = 10.0
#: A client's connect and read timeout (s): short, for polling a server that may be dead.
SOCKET_TIMEOUT_S = 2.0


def new_password() -> str:
    """A random password of 32 hex digits: safe in a URL and a configuration line."""
    return secrets.token_hex(16)


def quoted(value: str) -> str:
    """``value`` as one argument of a configuration line.

    Raises ValueError for a line break, which the format cannot hold.
    """
    if "\n" in value or "\r" in value:
        raise ValueError(f"a configuration value has a line break: {value!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable and writable by this user only (0600)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        os.fchmod(file.fileno(), 0o600)  # an older file kept its mode
        file.write(text)


def port_is_free(port: int) -> bool:
    """True if nothing holds ``port`` on 127.0.0.1 right now."""
    with socket.socket() as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def client(port: int, password: str, **options: Any) -> redis.Redis:
    """A client of the server on 127.0.0.1:``port``: short timeouts, no retries
    (a caller polls with its own deadline), ``options`` passed on to redis.Redis."""
    return redis.Redis(
        host=LOOPBACK, port=port, password=password, socket_timeout=SOCKET_TIMEOUT_S,
        socket_connect_timeout=SOCKET_TIMEOUT_S, retry=no_retries(), **options,
    )  # fmt: skip


def answers(node: redis.Redis) -> bool:
    """True if ``node`` answers PING (False while it is down or still loading its data)."""
    try:
        return bool(node.ping())
    except redis.RedisError:
        return False


def command(node: redis.Redis, *args: str | int) -> Any:
    """``node.execute_command(*args)``: its reply (redis-py leaves the call unannotated)."""
    return cast(Any, node).execute_command(*args)


def quietly(condition: Callable[[], T]) -> T | None:
    """``condition()``, or None if a server did not answer (it may be down, or loading)."""
    try:
        return condition()
    except redis.RedisError:
        return None


def _in_child() -> None:
    # Runs in the child between fork and exec. The umask keeps what the server writes
    # private too: its AOF, its log, and the configuration a Sentinel rewrites (with
    # the password in it) by a rename, which would otherwise get mode 0644.
    os.umask(0o077)
    die_with_parent(signal.SIGKILL)


class ServerProcess:
    """One valkey-server (or, with ``sentinel``, a Sentinel) on 127.0.0.1:``port``,
    started at once from ``config`` written to ``directory`` (created, mode 0700).

    Raises FileExistsError if ``directory`` exists (a folder left by another run would
    bring its data and cluster state), ConfigurationError without the embedded server.
    """

    def __init__(self, directory: Path, port: int, config: str, *, sentinel: bool = False) -> None:
        self.directory = directory
        self.port = port
        self.sentinel = sentinel
        directory.mkdir(mode=0o700, parents=True)
        self.config_path = directory / ("sentinel.conf" if sentinel else "server.conf")
        self.log_path = directory / "server.log"
        write_private(self.config_path, config)
        self._process: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def address(self) -> Address:
        return (LOOPBACK, self.port)

    def running(self) -> bool:
        """True while the process started last has not exited."""
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the server from its configuration file; it does not wait for it to answer.

        Raises RuntimeError if it already runs.
        """
        if self.running():
            raise RuntimeError(f"the server on port {self.port} already runs")
        descriptor = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(descriptor, "ab") as log:
            self._process = subprocess.Popen(
                [server_executable(), str(self.config_path),
                 *(["--sentinel"] if self.sentinel else [])],
                cwd=self.directory, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_in_child,
            )  # fmt: skip

    def wait_until_answering(self, password: str, timeout_s: float = START_TIMEOUT_S) -> None:
        """Block until the server answers PING with ``password``, for ``timeout_s`` seconds.

        Raises TransportError at once if it exits, AssertionError on the deadline.
        """
        with client(self.port, password) as node:

            def up() -> bool:
                if not self.running():
                    raise TransportError(f"the server on port {self.port} exited: {self.log_path}")
                return answers(node)

            wait_for(up, timeout_s, f"the server on port {self.port}", interval_s=0.05)

    def kill(self) -> None:
        """SIGKILL the server's process group, and reap it; nothing if it is not running.

        Raises subprocess.TimeoutExpired if it is not gone within EXIT_TIMEOUT_S.
        """
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            # Its own session: its group's id is its pid.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        process.wait(EXIT_TIMEOUT_S)


def kill_all(servers: list[ServerProcess]) -> None:
    """Kill every server of ``servers``, even if killing one fails; then raise the first
    failure (subprocess.TimeoutExpired), if any."""
    failure: BaseException | None = None
    for server in servers:
        try:
            server.kill()
        except Exception as exc:  # keep killing the others
            failure = failure or exc
    if failure is not None:
        raise failure
