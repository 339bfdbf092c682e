"""A standby's warm-up: Spark, its Python workers, and a rehearsal of the query.

A standby (``delayline run --standby``) must start its query quickly once it
takes over: what is due meanwhile waits in the outbox only up to the horizon.
Most of a cold start is the JVM, the Python workers, and the first batch of a
stateful streaming query (planning, code generation, RocksDB, the processor's
Python worker). Spark also starts a Python daemon per kind of data source call
(creating the source, creating the sink's writer, committing a batch) the first
time a query makes it, then forks from it; a query over other sources would warm
none of them (measured: 11.5 s from takeover to the first batch, against 3.5 s).

So the rehearsal runs a query of the scheduler's shape on a scratch checkpoint in
the standby's data directory: a Python source of one reject's row per batch,
through the wheel processor (which passes rejects through without state), into
the scheduler's own sink. A filter in front of the sink drops every row, and the
sink's settings name a Redis that does not exist: the rehearsal reads and writes
nothing of Redis.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession, functions
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.types import StructType

from delayline import timing
from delayline.errors import SchedulerError
from delayline.scheduler.pipeline import schemas
from delayline.scheduler.pipeline.processor import WheelProcessor
from delayline.scheduler.pipeline.sink import DeliverySink
from delayline.scheduler.runtime.session import build_session
from delayline.scheduler.settings import SchedulerSettings

#: The rehearsal's checkpoint, in the standby's data directory (removed after it).
REHEARSAL_DIR = "rehearsal"
#: Batches the rehearsal runs: the first plans and generates code, the next passes a
#: row through the processor's Python worker.
REHEARSAL_BATCHES = 2
#: Longest the rehearsal may take (s).
REHEARSAL_TIMEOUT_S = 120.0
#: The Redis the rehearsal's sink is told of: the discard port on loopback, where no
#: Redis listens, so that a row reaching the sink fails the rehearsal loudly.
NOWHERE_URL = "redis://127.0.0.1:9/0"


class RehearsalSource(DataSource):
    """``spark.readStream.format("delayline-rehearsal")``: one reject's row per batch."""

    @classmethod
    def name(cls) -> str:
        return "delayline-rehearsal"

    def schema(self) -> StructType:
        return schemas.SOURCE

    def streamReader(self, schema: StructType) -> RehearsalReader:
        return RehearsalReader()


class RehearsalReader(DataSourceStreamReader):
    """Offsets count batches: every plan has one more row to read."""

    def initialOffset(self) -> dict[str, int]:
        return {"batches": 0}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"batches": start["batches"] + 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition(end["batches"])]

    def read(self, partition: InputPartition) -> Iterator[tuple[int, bytes]]:
        yield timing.wheel_key(timing.REJECT_SLOT_MS, 0), b"rehearsal"


def no_wakeups(times_ms: Iterable[int]) -> None:
    """The rehearsal's processor records no wakeups (it sets no timers anyway)."""


def warm_up(settings: SchedulerSettings, spark_log: Path | None = None) -> SparkSession:
    """Start Spark (the JVM) and its Python workers, and rehearse the query, for a
    standby: the :class:`~delayline.scheduler.runtime.runner.Scheduler` that takes
    over later finds them warm. Raises JavaNotFoundError, SchedulerError."""
    spark = build_session(settings, spark_log)
    scratch = settings.data_dir.resolve() / REHEARSAL_DIR
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        spark.dataSource.register(RehearsalSource)
        spark.dataSource.register(DeliverySink)
        processor = WheelProcessor(
            settings.horizon_ms, settings.cancel_retention_ms, settings.wheel, no_wakeups
        )
        out = (
            spark.readStream.format(RehearsalSource.name())
            .load()
            .groupBy("wheel_key")
            .transformWithState(
                statefulProcessor=processor,
                outputStructType=schemas.OUTPUT,
                outputMode="Append",
                timeMode="ProcessingTime",
            )
        )
        query = (
            # Drops every row. A literal false would let the optimizer prune the
            # whole plan, the processor with it.
            out.where(functions.length("pack") < 0)
            .writeStream.format(DeliverySink.name())
            .option("settings", settings.with_overrides(redis_url=NOWHERE_URL).to_json())
            .option("checkpointLocation", str(scratch))
            .trigger(processingTime=f"{settings.trigger_ms} milliseconds")
            .start()
        )
        try:
            deadline = time.monotonic() + REHEARSAL_TIMEOUT_S
            while (last := query.lastProgress) is None or last["batchId"] < REHEARSAL_BATCHES - 1:
                if not query.isActive or time.monotonic() > deadline:
                    raise SchedulerError(
                        f"the standby's rehearsal query failed: {query.exception()}"
                    )
                time.sleep(0.05)
        finally:
            query.stop()
    except (PySparkException, Py4JError) as exc:
        raise SchedulerError(f"the standby's rehearsal query failed: {exc}") from exc
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return spark
