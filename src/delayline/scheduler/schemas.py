"""Every Spark schema of the scheduler, in one place."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

# Row kinds, on the way in (source) and on the way out (processor).
SEND = "send"
CANCEL = "cancel"
REJECT = "reject"
DELIVER = "deliver"
DROP = "drop"


def _struct(*columns: tuple[str, object]) -> StructType:
    # Nullable throughout: TWS with Avro state encoding refuses non-nullable fields.
    return StructType([StructField(name, kind, nullable=True) for name, kind in columns])  # type: ignore[arg-type]


_MESSAGE_COLUMNS = (
    ("inbound_id", StringType()),
    ("id", StringType()),
    ("topic", StringType()),
    ("body", BinaryType()),
    ("key", StringType()),
    ("headers", StringType()),
    ("deliver_at_ms", LongType()),
    ("attempt", IntegerType()),
)

#: What the source emits: one row per inbound record, keyed for the wheel.
#: ``raw`` (rejects only) is the original fields, flattened name, value, name, value...
SOURCE = _struct(
    ("kind", StringType()),
    ("wheel_key", LongType()),
    *_MESSAGE_COLUMNS,
    ("reason", StringType()),
    ("raw", ArrayType(BinaryType())),
)

#: One pending message in the ``messages`` list state of a wheel key.
MESSAGE_STATE = _struct(*_MESSAGE_COLUMNS)
MESSAGE_STATE_COLUMNS = [name for name, _ in _MESSAGE_COLUMNS]

#: One cancelled id in the ``cancels`` list state of a wheel key.
CANCEL_STATE = _struct(("id", StringType()))

#: What the processor emits and the sink writes.
OUTPUT = _struct(
    ("kind", StringType()),
    *_MESSAGE_COLUMNS,
    ("reason", StringType()),
    ("raw", ArrayType(BinaryType())),
)
OUTPUT_COLUMNS = OUTPUT.fieldNames()
