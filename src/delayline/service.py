"""``delayline run``: embedded (or external) Redis plus the scheduler, until a signal."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from delayline.progress import summary_line, take_snapshot
from delayline.scheduler.runner import Scheduler
from delayline.scheduler.session import resolve_master
from delayline.scheduler.settings import SchedulerSettings, data_dir_lock
from delayline.transports.embedded import EmbeddedRedis
from delayline.transports.redis_streams import RedisStreams

#: How often the loop checks that the query is alive, in s.
_WATCH_INTERVAL_S = 0.5


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
    progress_interval_s: float,
    echo: Callable[[str], None],
) -> None:
    """Run until SIGINT or SIGTERM, then finish the current batch and stop.

    With ``embedded_port`` set, start an embedded Redis on it (files in
    ``<data_dir>/redis``) and ignore ``settings.redis_url``. Raises
    DelaylineError subclasses for everything that goes wrong.
    """
    stop = threading.Event()
    with data_dir_lock(settings.data_dir), _stop_on_signals(stop):
        server = None
        if embedded_port is not None:
            server = EmbeddedRedis(settings.data_dir / "redis", embedded_port)
            server.start()
            settings = replace(settings, redis_url=server.url)
        scheduler = Scheduler(settings)
        streams = RedisStreams.from_url(settings.redis_url)
        try:
            streams.ping()
            kind = "embedded, AOF everysec" if server else "external"
            echo(f"redis     {settings.redis_url} ({kind})")
            echo(f"data dir  {settings.data_dir.resolve()}")
            master = resolve_master(settings) or "the spark-submit master"
            echo(f"starting the scheduler on Spark {master} ...")
            scheduler.start()
            scheduler.wait_ready()
            echo(f"scheduler running (query {scheduler.query_id}); Ctrl-C or SIGTERM stops it")
            _watch(scheduler, streams, stop, progress_interval_s, echo)
            echo("stopping: letting the current batch finish ...")
        finally:
            scheduler.stop()
            streams.close()
            if server is not None:
                server.stop()
        echo("stopped")


def _watch(
    scheduler: Scheduler,
    streams: RedisStreams,
    stop: threading.Event,
    progress_interval_s: float,
    echo: Callable[[str], None],
) -> None:
    last = take_snapshot(streams)
    while not stop.wait(_WATCH_INTERVAL_S):
        scheduler.check()
        current = take_snapshot(streams)
        if current.at_ms - last.at_ms >= progress_interval_s * 1000:
            echo(summary_line(last, current))
            last = current
