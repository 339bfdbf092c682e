"""``delayline run``: embedded (or external) Redis plus the scheduler, until a signal; and
``delayline drain``, which hands a stopped scheduler's messages to a new checkpoint."""

from __future__ import annotations

import contextlib
import io
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

from delayline import local
from delayline.api.app import create_app
from delayline.api.server import ApiOptions, ApiServer
from delayline.client import Client
from delayline.errors import ConfigurationError, ConnectError, FencedError, SchedulerError
from delayline.logfiles import LogFiles
from delayline.plans.observing import Metrics
from delayline.progress import summary_line
from delayline.redis.connection import RedisConnection
from delayline.redis.embedded import EmbeddedRedis
from delayline.redis.lease import Lease, new_owner
from delayline.redis.lua_source import FENCED_MARK
from delayline.scheduler.jobs.drain import DrainReport, drain, refuse_early
from delayline.scheduler.lease_keeper import (
    LeaseKeeper,
    take_over,
    takeover_message,
    wait_for_lease,
)
from delayline.scheduler.runtime.rehearsal import warm_up
from delayline.scheduler.runtime.runner import Scheduler
from delayline.scheduler.runtime.session import build_session, resolve_master
from delayline.scheduler.settings import SchedulerSettings, data_dir_lock
from delayline.shard_count import shard_placement, with_redis_shards
from delayline.urls import redacted

#: Spark's output, in the data directory, unless ``delayline run --verbose``.
SPARK_LOG = "spark.log"
#: How often the loop checks that the query is alive, in s.
_WATCH_INTERVAL_S = 0.5
#: How often a wait for Redis says so on the console, in s.
_WAITING_REPORT_S = 5.0


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    handled = (signal.SIGINT, signal.SIGTERM)
    previous = {sig: signal.getsignal(sig) for sig in handled}
    for sig in handled:
        signal.signal(sig, lambda *_: stop.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_service(
    settings: SchedulerSettings,
    *,
    embedded_port: int | None,
    api: ApiOptions | None,
    progress_interval_s: float,
    echo: Callable[[str], None],
    verbose: bool = False,
    auto_shards: bool = False,
    standby: bool = False,
) -> None:
    """Run until SIGINT or SIGTERM, then finish the current batch and stop.

    With ``auto_shards`` (no ``--inbound-shards`` given), the Redis shard count is
    the checkpoint's, or for a new one the number of a Redis Cluster's primaries
    (1 on one server).

    Nothing is delivered before this process holds the scheduler's lease
    (redis/lease.py), which it waits for while another scheduler holds it. With
    ``standby``, Spark and its workers start first, and the API too, so that taking
    over costs the query's start alone. If another scheduler takes the lease from
    this one, it stops at once without writing more, and raises FencedError.

    Spark's own output (its JVM's and its workers') goes to
    ``<data_dir>/spark.log``, or with ``verbose`` to this process's console.

    With ``embedded_port`` set, start an embedded Redis on it (files in
    ``<data_dir>/redis``) and ignore ``settings.redis_url``. With ``api`` set,
    serve the HTTP API too (from as soon as Redis is up). A Redis that is
    loading or unreachable is waited for, at the start and while running,
    and said so on the console; an embedded one that dies is started again.
    Raises DelaylineError subclasses for everything else that goes wrong, and
    ConfigurationError before anything starts for an API open with no token, or a
    standby with the embedded Redis or without ``--checkpoint``.
    """
    if api is not None:
        api.check()
    if standby and (embedded_port is not None or settings.checkpoint is None):
        raise ConfigurationError(
            "--standby needs the external Redis that the active scheduler uses "
            "(--redis-url) and its checkpoint (--checkpoint, on storage both reach), "
            "with a data directory of its own"
        )
    stop = threading.Event()
    with data_dir_lock(settings.data_dir), _stop_on_signals(stop), ExitStack() as cleanup:
        settings, server = _start_embedded(settings, embedded_port, cleanup, echo)
        # No retries inside a call: the loops here wait, report, and stay stoppable.
        connection = RedisConnection.from_url(settings.redis_url, patience_ms=0)
        cleanup.callback(connection.close)
        if not _wait_for_redis(connection, settings.redis_url, stop, echo):
            echo("stopped")
            return
        settings = with_redis_shards(settings, connection, auto=auto_shards)
        kind = f"embedded {server.version}, AOF everysec" if server is not None else "external"
        if connection.cluster:
            kind += ", a cluster: " + shard_placement(settings, connection, echo)
        echo(f"redis     {redacted(settings.redis_url)} ({kind})")
        echo(f"data dir  {settings.data_dir.resolve()}")
        if api is not None:
            app = create_app(
                settings.redis_url,
                api_token=api.token,
                limits=settings.limits,
                allowed_hosts=api.hosts(),
                docs=api.docs,
            )
            api_server = ApiServer(app, api.host, api.port)
            api_server.start()
            cleanup.callback(api_server.stop)
            echo(f"http api  {api_server.url} (auth {'on' if api.token else 'off'})")
        spark_log = None if verbose else settings.data_dir.resolve() / SPARK_LOG
        if spark_log is not None:
            echo(f"spark log {spark_log}")
        master = resolve_master(settings) or "the spark-submit master"
        if standby:
            echo(f"standby   starting Spark {master} and its workers ...")
            with ticking(echo, "spark     starting", _START_TICK_S):
                cleanup.callback(warm_up(settings, spark_log).stop)
        lease = Lease.from_url(settings.redis_url, patience_ms=0)
        cleanup.callback(lease.close)
        owner = new_owner()
        token = wait_for_lease(lease, owner, settings.lease_ms, stop, echo)
        if token is None:
            echo("stopped")
            return
        settings = take_over(lease, settings, token)
        scheduler = Scheduler(settings, spark_log)

        def lost() -> None:
            scheduler.halt()
            stop.set()

        keeper = LeaseKeeper.of(settings, owner, lost)
        keeper.start()
        cleanup.callback(keeper.give_up)  # once the scheduler has stopped
        cleanup.callback(scheduler.stop)
        echo(f"lease     taken (token {token}); delivering")
        try:
            _serve(scheduler, settings, server, spark_log, master, stop, progress_interval_s, echo)
        except SchedulerError as exc:
            if keeper.lost.is_set() or FENCED_MARK.decode() in str(exc):
                scheduler.halt()
                raise FencedError(takeover_message(token)) from exc
            raise
        if keeper.lost.is_set():
            raise FencedError(takeover_message(token))
        echo("stopping: letting the current batch finish ...")
    echo("stopped")


def _serve(
    scheduler: Scheduler,
    settings: SchedulerSettings,
    server: EmbeddedRedis | None,
    spark_log: Path | None,
    master: str,
    stop: threading.Event,
    progress_interval_s: float,
    echo: Callable[[str], None],
) -> None:
    """Start ``scheduler`` and watch it until ``stop`` is set."""
    echo(f"starting the scheduler on Spark {master} ...")
    with ticking(echo, "spark     starting", _START_TICK_S):
        scheduler.start()
        scheduler.wait_ready()
    echo(f"scheduler running (query {scheduler.query_id}); Ctrl-C or SIGTERM stops it")
    with Client(settings.redis_url, limits=settings.limits, patience_ms=0) as client:
        logs = [path for path in (spark_log, server and server.log_path) if path]
        watch = _Watch(scheduler, client, server, progress_interval_s, echo, LogFiles(logs))
        while not stop.wait(_WATCH_INTERVAL_S):
            watch.step()


def drain_data_dir(
    settings: SchedulerSettings, *, embedded_port: int | None, echo: Callable[[str], None]
) -> DrainReport:
    """``delayline drain``: hand the pending messages of the data directory's checkpoint to
    the next one (scheduler/jobs/drain.py), with the embedded Redis of ``<data_dir>/redis`` on
    ``embedded_port`` unless None. Spark's output goes to ``<data_dir>/spark.log``.

    Raises ConfigurationError if a scheduler runs on the data directory, or as
    :func:`delayline.scheduler.jobs.drain.drain` does.
    """
    with data_dir_lock(settings.data_dir), ExitStack() as cleanup:
        refuse_early(settings)  # before Spark's start, where it can
        settings, _ = _start_embedded(settings, embedded_port, cleanup, echo)
        echo(f"redis     {redacted(settings.redis_url)}")
        settings = _hold_lease_to_drain(settings, cleanup)
        echo(f"draining  {settings.checkpoint_location}")
        with ticking(echo, "draining", _START_TICK_S):
            spark = build_session(settings, settings.data_dir.resolve() / SPARK_LOG)
            cleanup.callback(spark.stop)
            return drain(spark, settings)


def _hold_lease_to_drain(settings: SchedulerSettings, cleanup: ExitStack) -> SchedulerSettings:
    """Take the scheduler's lease for the drain, and raise the fences (its pumps write
    as a scheduler's do), renewed until ``cleanup`` gives it up; the settings with its
    token. Raises ConfigurationError if a scheduler holds it."""
    lease = Lease.from_url(settings.redis_url)
    cleanup.callback(lease.close)
    owner = new_owner()
    token = lease.take(owner, settings.lease_ms)
    if not token:
        holder = lease.holder()
        raise ConfigurationError(
            f"a scheduler holds the lease ({holder[1] if holder else 'just now'}): stop "
            "every delayline run on this Redis, standbys included, before the drain"
        )
    settings = take_over(lease, settings, token)
    keeper = LeaseKeeper.of(settings, owner, lambda: None)
    keeper.start()
    cleanup.callback(keeper.give_up)
    return settings


def _start_embedded(
    settings: SchedulerSettings,
    port: int | None,
    cleanup: ExitStack,
    echo: Callable[[str], None],
) -> tuple[SchedulerSettings, EmbeddedRedis | None]:
    """Start the data directory's embedded Redis on ``port``, stopped by ``cleanup``, and
    return the settings pointed at it, and it; with ``port`` None (an external Redis),
    the settings as they are, and None."""
    if port is None:
        return settings, None
    server = EmbeddedRedis(local.server_dir(settings.data_dir), port)
    cleanup.callback(server.stop)
    server.start(on_progress=lambda line: echo(f"redis     {line}"))
    return replace(settings, redis_url=server.url), server


#: How often ``delayline run`` says it is still starting Spark (s).
_START_TICK_S = 5.0


@contextmanager
def ticking(echo: Callable[[str], None], label: str, every_s: float) -> Iterator[None]:
    """Say ``label: <n> s`` every ``every_s`` seconds while the block runs: Spark's start
    takes 20 s or more and says nothing itself.

    While the JVM launches, this process's stdout points at Spark's log (see
    ``children_write_to``): the ticks go to a duplicate of the console taken
    first, or, where stdout is no file (a test's capture), through ``echo``.
    """
    try:
        console = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    except (OSError, ValueError, io.UnsupportedOperation):
        console = None
    done = threading.Event()
    began = time.monotonic()

    def tick() -> None:
        while not done.wait(every_s):
            line = f"{label}: {time.monotonic() - began:.0f} s"
            if console is None:
                echo(line)
            else:
                console.write(line + "\n")

    thread = threading.Thread(target=tick, name="delayline-start-ticker", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        if console is not None:
            console.close()


def _wait_for_redis(
    connection: RedisConnection, url: str, stop: threading.Event, echo: Callable[[str], None]
) -> bool:
    """Block until Redis serves (True) or a stop is asked for (False), saying why it waits."""
    last_said_at = -math.inf
    while True:
        try:
            connection.ping()
            return True
        except ConnectError as exc:
            reason = str(exc)
        with contextlib.suppress(ConnectError):
            percent = connection.loading_percent()
            if percent is not None:
                reason = f"Redis is loading its data: {percent:.0f}%"
        if time.monotonic() - last_said_at >= _WAITING_REPORT_S:
            last_said_at = time.monotonic()
            echo(f"waiting   for Redis at {redacted(url)}: {reason} (Ctrl-C stops)")
        if stop.wait(_WATCH_INTERVAL_S):
            return False


class _Watch:
    """The running service's loop body: liveness, the scheduler's heartbeat, progress,
    and Redis outages."""

    def __init__(
        self,
        scheduler: Scheduler,
        client: Client,
        server: EmbeddedRedis | None,
        progress_interval_s: float,
        echo: Callable[[str], None],
        logs: LogFiles,
    ) -> None:
        """``logs``: the log files to keep bounded, checked with each progress line."""
        self._scheduler = scheduler
        self._client = client
        self._server = server
        self._progress_interval_s = progress_interval_s
        self._echo = echo
        self._logs = logs
        self._last: Metrics | None = None
        self._outage_since: float | None = None
        self._outage_said_at = -math.inf

    def step(self) -> None:
        """Check the query, then record and report; raises SchedulerError if the query died."""
        self._scheduler.check()
        try:
            self._scheduler.beat()
            current = self._client.metrics()
        except ConnectError as exc:
            self._redis_away(exc)
            return
        if self._outage_since is not None:
            away_s = time.monotonic() - self._outage_since
            self._echo(f"redis     back after {away_s:.0f} s; the scheduler resumes")
            self._outage_since = None
        if self._last is None:
            self._last = current
        elif current.read_at_ms - self._last.read_at_ms >= self._progress_interval_s * 1000:
            self._echo(summary_line(self._last, current))
            self._last = current
            for path in self._logs.bound():
                self._echo(f"log       {path} passed its bound: kept as {path.name}.1, emptied")

    def _redis_away(self, exc: ConnectError) -> None:
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
        if now - self._outage_said_at >= self._progress_interval_s:
            self._outage_said_at = now
            self._echo(
                f"redis     unavailable for {now - self._outage_since:.0f} s ({exc}); "
                "the scheduler waits for it and loses nothing"
            )
        if self._server is not None and not self._server.running:
            self._echo("redis     the embedded Redis exited; starting it again")
            self._server.start(on_progress=lambda line: self._echo(f"redis     {line}"))
