"""Every Spark schema of the scheduler, in one place, each with its Arrow twin
where Python builds the rows.

Messages travel as packs (see :mod:`delayline.scheduler.pipeline.packs`): one
binary value per wheel key, not one row per message. The streaming query uses
SOURCE, ENTRIES and OUTPUT; the jobs over the checkpoint use LISTED and
LISTED_SCHEDULE (the state scan) and DRAINED (the drain).
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

# Nullable throughout: TWS with Avro state encoding refuses non-nullable fields.

#: What the source emits: one row per wheel key per source partition and batch.
SOURCE = StructType([StructField("wheel_key", LongType()), StructField("pack", BinaryType())])
SOURCE_ARROW = pa.schema([("wheel_key", pa.int64()), ("pack", pa.binary())])

#: One element of a wheel key's ``entries`` list state: the records one batch added.
ENTRIES = StructType([StructField("pack", BinaryType())])

#: What the processor emits and the sink writes: deliveries, drops and rejects.
OUTPUT = StructType([StructField("pack", BinaryType())])

#: A send listed by the state scan, in the order it sorts by: due time first.
LISTED = StructType(
    [
        StructField("deliver_at_ms", LongType()),
        StructField("id", StringType()),
        StructField("topic", StringType()),
        StructField("key", StringType()),
        StructField("attempt", IntegerType()),
        StructField("body_bytes", LongType()),
    ]
)
LISTED_ARROW = pa.schema(
    [
        ("deliver_at_ms", pa.int64()),
        ("id", pa.string()),
        ("topic", pa.string()),
        ("key", pa.string()),
        ("attempt", pa.int32()),
        ("body_bytes", pa.int64()),
    ]
)

#: A schedule listed by the state scan, in the order it sorts by: its row is
#: :meth:`delayline.schedules.listed.ListedSchedule.dumps`'s JSON.
LISTED_SCHEDULE = StructType(
    [
        StructField("topic", StringType()),
        StructField("name", StringType()),
        StructField("row", StringType()),
    ]
)
LISTED_SCHEDULE_ARROW = pa.schema(
    [("topic", pa.string()), ("name", pa.string()), ("row", pa.string())]
)

#: What each state partition's task of a drain reports.
DRAINED = StructType([StructField("partition", IntegerType()), StructField("messages", LongType())])
DRAINED_ARROW = pa.schema([("partition", pa.int32()), ("messages", pa.int64())])
