"""A standby's warm-up: Spark, its Python workers, and a rehearsal of the query.

A standby (``delayline run --standby``) must start its query quickly once it
takes over: what is due meanwhile waits in the outbox only up to the horizon.
Most of a cold start is the JVM, the Python workers, and the first batch of a
stateful streaming query (planning, code generation, RocksDB, the processor's
Python worker). The rehearsal runs a query of the same shape on a scratch
checkpoint in the standby's data directory: rows of Spark's rate source, each
one a reject's (which the processor passes through without state), through the
wheel processor into Spark's no-op sink. It reads and writes nothing of Redis.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterable
from pathlib import Path

from py4j.protocol import Py4JError
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession, functions

from delayline import timing
from delayline.errors import SchedulerError
from delayline.scheduler.pipeline import schemas
from delayline.scheduler.pipeline.processor import WheelProcessor
from delayline.scheduler.runtime.session import build_session
from delayline.scheduler.settings import SchedulerSettings

#: The rehearsal's checkpoint, in the standby's data directory (removed after it).
REHEARSAL_DIR = "rehearsal"
#: Batches the rehearsal runs: the first plans and generates code, the next passes a
#: row through the processor's Python worker.
REHEARSAL_BATCHES = 2
#: Longest the rehearsal may take (s).
REHEARSAL_TIMEOUT_S = 120.0


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
        rows = spark.readStream.format("rate").option("rowsPerSecond", 10).load()
        rejects = rows.select(
            functions.lit(timing.wheel_key(timing.REJECT_SLOT_MS, 0))
            .cast("long")
            .alias("wheel_key"),
            functions.lit(b"rehearsal").cast("binary").alias("pack"),
        )
        processor = WheelProcessor(
            settings.horizon_ms, settings.cancel_retention_ms, settings.wheel, no_wakeups
        )
        out = rejects.groupBy("wheel_key").transformWithState(
            statefulProcessor=processor,
            outputStructType=schemas.OUTPUT,
            outputMode="Append",
            timeMode="ProcessingTime",
        )
        query = (
            out.writeStream.format("noop")
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
