"""The memory floor of the scheduler's process model: the same query shape doing nothing.

delayline's query is a Python data source, a Python ``transformWithState``
processor and a Python data sink, on the Spark session ``delayline run`` builds
(same JVM heap and collector, same preloading worker daemon). This runs that
shape with a source that yields one row per batch, a processor that holds it,
and a sink that drops it: no Redis, no messages. Whatever memory it takes, the
scheduler cannot take less on the same machine. It samples the PSS of this
process and every process under it, as ``bench run`` samples a system's.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import Row
from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadLimit
from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from bench.measure import Sampler
from delayline.scheduler.runtime.session import build_session
from delayline.scheduler.settings import SchedulerSettings

ROW = StructType([StructField("wheel_key", LongType()), StructField("pack", BinaryType())])
OUT = StructType([StructField("pack", BinaryType())])


class TickSource(DataSource):
    """One row per batch, keyed by the batch's number."""

    @classmethod
    def name(cls) -> str:
        return "floor-ticks"

    def schema(self) -> StructType:
        return ROW

    def streamReader(self, schema: StructType) -> TickReader:
        return TickReader()


class TickReader(DataSourceStreamReader):
    def __init__(self) -> None:
        self._started = time.monotonic()

    def initialOffset(self) -> dict[str, int]:
        return {"tick": 0}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"tick": int(time.monotonic() - self._started)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition(end["tick"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        tick = partition.value
        yield pa.RecordBatch.from_pydict(
            {"wheel_key": [tick % 2], "pack": [b"x" * 64]},
            schema=pa.schema([("wheel_key", pa.int64()), ("pack", pa.binary())]),
        )


class NullSink(DataSource):
    @classmethod
    def name(cls) -> str:
        return "floor-null"

    def streamWriter(self, schema: StructType, overwrite: bool) -> NullWriter:
        return NullWriter()


class NullWriter(DataSourceStreamWriter):
    def write(self, iterator: Iterator[Row]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass


class HoldProcessor(StatefulProcessor):
    """Keeps the last pack per key, and emits nothing."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._last = handle.getValueState("last", StructType([StructField("pack", BinaryType())]))

    def handleInputRows(
        self, key: tuple[Any, ...], rows: Iterator[Any], timerValues: TimerValues
    ) -> Iterator[Row]:
        for row in rows:
            self._last.update((row.pack,))
        return iter(())

    def close(self) -> None:
        pass


def main(duration_s: float) -> dict[str, Any]:
    """Run the empty query for ``duration_s`` after its first batch; PSS of every process."""
    # The workers import this module by name: the repository root must be on their path.
    root = str(Path(__file__).resolve().parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    scratch = Path(tempfile.mkdtemp(prefix="floor-"))
    settings = SchedulerSettings(data_dir=scratch)
    spark = build_session(settings)
    spark.dataSource.register(TickSource)
    spark.dataSource.register(NullSink)
    query = (
        spark.readStream.format(TickSource.name())
        .load()
        .groupBy("wheel_key")
        .transformWithState(
            statefulProcessor=HoldProcessor(),
            outputStructType=OUT,
            outputMode="Append",
            timeMode="None",
        )
        .writeStream.format(NullSink.name())
        .option("checkpointLocation", str(scratch / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        while query.lastProgress is None:
            time.sleep(0.1)
        with Sampler([os.getpid()]) as sampler:
            time.sleep(duration_s)
        batches = query.lastProgress["batchId"]
    finally:
        query.stop()
        spark.stop()
    return {
        "benchmark": "floor",
        "duration_s": duration_s,
        "batches": batches,
        "peak_pss_mb": round(sampler.peak_pss_mb, 1),
        "python_processes": sum(
            1 for row in sampler.processes() if row["process"].startswith("python")
        ),
        "processes": sampler.processes(),
        "python": sys.version.split()[0],
    }
