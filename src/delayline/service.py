"""``delayline run``: embedded (or external) Redis plus the scheduler, until a signal."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace

from delayline.api.app import create_app
from delayline.api.server import ApiOptions, ApiServer
from delayline.client import Client
from delayline.progress import summary_line
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
    api: ApiOptions | None,
    progress_interval_s: float,
    echo: Callable[[str], None],
) -> None:
    """Run until SIGINT or SIGTERM, then finish the current batch and stop.

    With ``embedded_port`` set, start an embedded Redis on it (files in
    ``<data_dir>/redis``) and ignore ``settings.redis_url``. With ``api`` set,
    serve the HTTP API too (from as soon as Redis is up). Raises DelaylineError
    subclasses for everything that goes wrong.
    """
    stop = threading.Event()
    with data_dir_lock(settings.data_dir), _stop_on_signals(stop), ExitStack() as cleanup:
        if embedded_port is not None:
            server = EmbeddedRedis(settings.data_dir / "redis", embedded_port)
            server.start()
            cleanup.callback(server.stop)
            settings = replace(settings, redis_url=server.url)
        streams = RedisStreams.from_url(settings.redis_url)
        cleanup.callback(streams.close)
        streams.ping()
        kind = "embedded, AOF everysec" if embedded_port is not None else "external"
        echo(f"redis     {settings.redis_url} ({kind})")
        echo(f"data dir  {settings.data_dir.resolve()}")
        if api is not None:
            app = create_app(settings.redis_url, api_token=api.token, limits=settings.limits)
            api_server = ApiServer(app, api.host, api.port)
            api_server.start()
            cleanup.callback(api_server.stop)
            echo(f"http api  {api_server.url} (auth {'on' if api.token else 'off'})")
        scheduler = Scheduler(settings)
        cleanup.callback(scheduler.stop)
        master = resolve_master(settings) or "the spark-submit master"
        echo(f"starting the scheduler on Spark {master} ...")
        scheduler.start()
        scheduler.wait_ready()
        echo(f"scheduler running (query {scheduler.query_id}); Ctrl-C or SIGTERM stops it")
        with Client(settings.redis_url, limits=settings.limits) as client:
            _watch(scheduler, streams, client, stop, progress_interval_s, echo)
        echo("stopping: letting the current batch finish ...")
    echo("stopped")


def _watch(
    scheduler: Scheduler,
    streams: RedisStreams,
    client: Client,
    stop: threading.Event,
    progress_interval_s: float,
    echo: Callable[[str], None],
) -> None:
    last = client.metrics()
    query_id = scheduler.query_id
    while not stop.wait(_WATCH_INTERVAL_S):
        scheduler.check()
        batches = scheduler.completed_batches()
        if batches:
            streams.record_batches(query_id, batches)
        current = client.metrics()
        if current.read_at_ms - last.read_at_ms >= progress_interval_s * 1000:
            echo(summary_line(last, current))
            last = current
