"""The scheduler's life in this process: start the query, watch it, stop it between batches."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from delayline.errors import ConnectError, DelaylineError, FencedError, SchedulerError
from delayline.kafka.target import target_url
from delayline.redis import keys
from delayline.redis.inbound import InboundStream
from delayline.redis.layout import ShardLayout
from delayline.redis.list_requests import ListRequests
from delayline.redis.store import DeliveryStore
from delayline.scheduler.jobs.checkpoint_files import CheckpointFiles
from delayline.scheduler.jobs.state_scan import ListingServer
from delayline.scheduler.pipeline.clients import kafka_inbound_for
from delayline.scheduler.pipeline.handoff import record_waiting_cancels
from delayline.scheduler.pipeline.query import start_query
from delayline.scheduler.pump import Pump
from delayline.scheduler.runtime.quiet import QuietSpells
from delayline.scheduler.runtime.session import build_session, runs_locally
from delayline.scheduler.runtime.trimmer import Trimmer
from delayline.scheduler.settings import SchedulerSettings
from delayline.timing import to_epoch_ms

#: How long stopping waits for an unavailable Redis before it stops anyway (ms).
_PAUSE_PATIENCE_MS = 2_000

#: What a call into a Spark JVM that is gone raises: py4j's own error, or the
#: socket's when py4j cannot connect again.
_JVM_GONE = (Py4JError, ConnectionError)


class Scheduler:
    """The Spark scheduling query, owned by this process."""

    def __init__(self, settings: SchedulerSettings, spark_log: Path | None = None) -> None:
        """``spark_log``: where a Spark JVM started here, and its workers, write their
        output (None: this process's stdout and stderr)."""
        self.settings = settings
        self._spark_log = spark_log
        self._run_token = uuid.uuid4().hex
        self._spark: SparkSession | None = None
        self._query: StreamingQuery | None = None
        # A pump per Redis shard's outbox; _prepare adds one for each shard of an
        # older shard count.
        self._pumps = [self._pump(shard) for shard in keys.layout(settings.inbound_shards)]
        self._trimmer = Trimmer.of(settings)
        self._prepared = threading.Event()
        self._prepare_lock = threading.Lock()
        self._query_id = ""  # read once at start: the heartbeat names it twice a second
        self._last_reported_batch = -1
        # Batches completed but not yet in the heartbeat: Redis may be away for a while.
        self._unrecorded: list[tuple[int, int, int]] = []
        # No retries inside a call: the service's loop (for the heartbeat) and the
        # pump's (for _prepare) report an outage and call again.
        self._store = DeliveryStore.from_url(settings.redis_url, patience_ms=0)
        self._inbound = InboundStream.from_url(settings.redis_url, patience_ms=0)
        self._listings: ListingServer | None = None
        # Only a local driver runs the tasks and grows with a load (session.py).
        self._quiet = QuietSpells() if runs_locally(settings) else None
        # Set once another scheduler took over: stop without writing (see halt).
        self._halted = False
        # The groups whose lanes have pumps (_pump_new_lanes).
        self._pumped_groups: set[str] = set()
        self._lanes_lock = threading.Lock()

    def _pump(self, shard: keys.ShardKeys) -> Pump:
        current = shard in keys.layout(self.settings.inbound_shards)
        return Pump.of(self.settings, shard, self._prepare if current else None)

    def _pump_new_lanes(self) -> None:
        """Start a pump for each shard's lane of every group created since the last call
        (each group's lane delivers apart: redis/keys.py's ShardKeys.lane), and record
        that its lane is pumped (keys.GROUP_LANES). Raises TransportError."""
        with self._lanes_lock:
            for group in sorted(self._store.group_names(fresh=True) - self._pumped_groups):
                for shard in keys.layout(self.settings.inbound_shards, group):
                    lane = Pump.of(self.settings, shard)
                    self._pumps.append(lane)
                    lane.start()
                self._pumped_groups.add(group)
                self._store.record_lane(group)

    def _prepare(self) -> None:
        """Before the pumps' first delivery (on the first pump's thread, while the others
        wait): claim the shard layout (redis/layout.py) and pump the outboxes of every
        older one, tell producers the config, and let raw cancels that wait in the
        inbound stream win over the outbox."""
        with self._prepare_lock:
            if self._prepared.is_set():
                return
            layout = ShardLayout.from_url(self.settings.redis_url, patience_ms=0)
            try:
                history = layout.claim(self.settings.inbound_shards)
            finally:
                layout.close()
            kafka = self.settings.kafka
            self._store.set_target(
                keys.read_layout(max(history)),
                None if kafka is None else target_url(kafka, self.settings.delivery_to_kafka),
            )
            self._store.publish_config(self.settings.horizon_ms, self.settings.inbound_shards)
            record_waiting_cancels(self._inbound, self.settings)
            for shard in keys.read_layout(max(history)):
                if shard not in keys.layout(self.settings.inbound_shards):
                    retired = self._pump(shard)
                    self._pumps.append(retired)
                    retired.start()
            # The groups' lanes too, before Spark starts: what waits in them is due soon.
            self._pump_new_lanes()
            self._prepared.set()

    def start(self) -> None:
        """Start the outbox pump, then Spark and the query.

        The pump goes first: after a crash, what waits in the outbox is due
        within the horizon and needs no Spark, so it is delivered while the JVM
        starts (tens of seconds) rather than after. With ``--kafka``, the inbound
        topic is created first if missing. Raises JavaNotFoundError,
        ConfigurationError, TransportError (Kafka) or SchedulerError.
        """
        kafka = self.settings.kafka
        if kafka is not None:
            # Before the pumps: _prepare reads the topic for raw cancels.
            kafka_inbound_for(kafka, self.settings.kafka_inbound_topic).ensure_topic(
                self.settings.source_partitions
            )
        self.start_pumps()
        self._trimmer.start()
        if kafka is not None:
            # Until _prepare records the shards' target, the query's sink would write
            # due messages to Redis streams rather than ready them for Kafka.
            self._wait_prepared()
        self._spark = build_session(self.settings, self._spark_log)
        CheckpointFiles(self._spark, self.settings.checkpoint_location).refuse_if_draining()
        try:
            self._query = start_query(self._spark, self.settings, self._run_token)
            self._query_id = str(self._query.id)
            listings = ListRequests.from_url(self.settings.redis_url, patience_ms=0)
            self._listings = ListingServer(self._spark, self.settings, listings)
            self._listings.start()
        except (PySparkException, Py4JError) as exc:
            raise SchedulerError(f"the scheduler query did not start: {exc}") from exc
        # Redis away now: the first batch's beat records it instead.
        with contextlib.suppress(ConnectError):
            self._store.record_started()

    def _wait_prepared(self) -> None:
        """Block until the pumps' preparation has run (however long Redis takes to
        answer); raise SchedulerError if a pump stopped instead."""
        while not self._prepared.wait(0.1):
            for pump in self._pumps:
                if pump.failure is not None:
                    raise SchedulerError(f"the outbox pump stopped: {pump.failure}")

    def start_pumps(self) -> None:
        """Start a pump for each shard's outbox; the first to run claims the shard layout
        and starts one for each shard of an older count (:meth:`_prepare`)."""
        # Under _prepare's lock: the first pump's _prepare adds (and starts) a pump for
        # each shard of an older count, which this loop must not meet and start again.
        with self._prepare_lock:
            for pump in self._pumps:
                pump.start()

    def wait_ready(self, timeout_s: float = 300.0) -> None:
        """Block until the first batch has completed: then deliveries flow at full speed.

        The first batch starts the Python workers and replays overdue timers, so it
        takes far longer than the rest. Raises SchedulerError if the query dies
        or ``timeout_s`` passes first.
        """
        query = self._running_query()
        deadline = time.monotonic() + timeout_s
        with self._jvm_answers():
            while query.lastProgress is None:
                self.check()
                if time.monotonic() > deadline:
                    raise SchedulerError(
                        f"the first batch did not complete within {timeout_s:.0f} s"
                    )
                time.sleep(0.1)

    @property
    def query_id(self) -> str:
        """The query id, stable across restarts on the same checkpoint."""
        self._running_query()  # raises SchedulerError unless started
        return self._query_id

    def recent_progress(self) -> list[dict[str, Any]]:
        """Spark's progress events of the last batches (up to 100), oldest first."""
        return [dict(event) for event in self._running_query().recentProgress]

    def _completed_batches(self) -> list[tuple[int, int, int]]:
        """Batches completed since the last call: (batch_id, started_at_ms, duration_ms)."""
        # The service asks twice a second; an idle query has run no batch since. One
        # event through Py4J says so, where the recent list is a hundred of them.
        last = self._running_query().lastProgress
        if last is None or last["batchId"] <= self._last_reported_batch:
            return []
        fresh = []
        most_rows = 0
        for progress in self.recent_progress():
            if progress["batchId"] > self._last_reported_batch:
                started_ms = to_epoch_ms(datetime.fromisoformat(progress["timestamp"]))
                duration_ms = int(progress["durationMs"].get("triggerExecution", 0))
                fresh.append((int(progress["batchId"]), started_ms, duration_ms))
                most_rows = max(most_rows, int(progress.get("numInputRows") or 0))
        if fresh:
            self._last_reported_batch = fresh[-1][0]
            if self._quiet is not None:
                self._quiet.batch_completed(time.monotonic(), most_rows)
        return fresh

    def beat(self) -> None:
        """The heartbeat: record in Redis the batches completed since the last call, which
        status, ``/healthz`` and ``delayline stats`` read, give a quiet local driver's
        heap back, and pump the lanes of new groups. Call it often (the service does,
        twice a second). Raises ConnectError while Redis is unreachable: the batches are
        recorded at a later call."""
        with self._jvm_answers():
            self._unrecorded += self._completed_batches()
            self._give_back_memory_when_quiet()
        if self._unrecorded:
            self._store.record_batches(self.query_id, self._unrecorded)
            self._unrecorded.clear()
        if self._prepared.is_set():
            self._pump_new_lanes()

    def _give_back_memory_when_quiet(self) -> None:
        """Once per quiet spell of a local driver, a full collection of its heap, which
        returns what a load grew it to (quiet.py)."""
        if self._quiet is None or self._spark is None:
            return
        if self._quiet.collect_now(time.monotonic()):
            jvm = self._spark.sparkContext._jvm
            assert jvm is not None
            jvm.java.lang.System.gc()

    def check(self) -> None:
        """Raise SchedulerError if the query has stopped on its own, or its JVM is gone."""
        query = self._running_query()
        with self._jvm_answers():
            if not query.isActive:
                headline = _headline(query.exception())
                raise SchedulerError(f"the scheduler query stopped: {headline}{_advice(headline)}")
        for pump in self._pumps:
            if isinstance(pump.failure, FencedError):
                raise pump.failure
            if pump.failure is not None:
                raise SchedulerError(f"the outbox pump stopped: {pump.failure}")
            if not pump.alive:
                raise SchedulerError("the outbox pump stopped")

    def halt(self) -> None:
        """Stop delivering at once, from any thread, without waiting: another scheduler
        took over (redis/lease.py). The pumps are told to stop (a call in flight is
        refused by the fence), and :meth:`stop` then stops the query without asking it
        to pause between batches, which would write to Redis."""
        self._halted = True
        for pump in self._pumps:
            pump.stop(timeout_s=0)

    def stop(self, pause_timeout_s: float = 60.0) -> None:
        """Let the running batch finish, then stop the query and Spark.

        The source holds before planning the next batch (a pause flag in Redis);
        once it holds, no batch is in flight and stopping loses no work. After
        ``pause_timeout_s`` the query is stopped anyway: an interrupted batch is
        replayed, idempotently, at the next start.
        """
        listings, self._listings = self._listings, None
        if listings is not None:
            listings.stop()
        query, self._query = self._query, None
        # A JVM that is gone has no batch to finish and nothing to stop.
        with contextlib.suppress(*_JVM_GONE):
            if query is not None and query.isActive and not self._halted:
                # If Redis is gone nothing can be written anyway: just stop.
                with contextlib.suppress(DelaylineError):
                    self._pause_between_batches(query, pause_timeout_s)
            if query is not None and query.isActive:
                query.stop()
        for pump in self._pumps:
            pump.stop()
        self._trimmer.stop()
        self._store.close()
        self._inbound.close()
        spark, self._spark = self._spark, None
        if spark is not None:
            with contextlib.suppress(*_JVM_GONE):
                spark.stop()

    def _pause_between_batches(self, query: StreamingQuery, timeout_s: float) -> None:
        inbound = InboundStream.from_url(self.settings.redis_url, patience_ms=_PAUSE_PATIENCE_MS)
        try:
            inbound.request_pause(self._run_token, ttl_s=int(timeout_s) + 60)
            deadline = time.monotonic() + timeout_s
            while query.isActive and not inbound.is_holding(self._run_token):
                if time.monotonic() > deadline:
                    return
                time.sleep(0.05)
        finally:
            inbound.close()

    @contextlib.contextmanager
    def _jvm_answers(self) -> Iterator[None]:
        """Turn a call into a Spark JVM that is gone (killed, out of memory, crashed)
        into SchedulerError, with what to do."""
        try:
            yield
        except _JVM_GONE as exc:
            log = f"; its last words are in {self._spark_log}" if self._spark_log else ""
            raise SchedulerError(
                f"the Spark JVM stopped answering ({type(exc).__name__}){log}: start "
                "delayline run again, which resumes from the last committed batch and "
                "loses nothing"
            ) from exc

    def _running_query(self) -> StreamingQuery:
        if self._query is None:
            raise SchedulerError("the scheduler is not started")
        return self._query


def _advice(headline: str) -> str:
    """What to do about a stopped query, where the error says."""
    if "No space left on device" in headline:
        return (
            "; the disk of the data directory (checkpoint) is full: free space, then start "
            "delayline run again, which resumes from the last committed batch and loses nothing"
        )
    return ""


def _headline(error: object) -> str:
    """Spark's error message without the query plan dump that follows it."""
    if error is None:
        return "no error reported"
    return str(error).split("=== Streaming Query ===")[0].strip()
