"""Every Spark schema of the scheduler, in one place.

Messages travel as packs (see :mod:`delayline.scheduler.packs`): one binary
value per wheel key, not one row per message.
"""

from __future__ import annotations

from pyspark.sql.types import BinaryType, LongType, StructField, StructType

# Nullable throughout: TWS with Avro state encoding refuses non-nullable fields.

#: What the source emits: one row per wheel key per source partition and batch.
SOURCE = StructType([StructField("wheel_key", LongType()), StructField("pack", BinaryType())])

#: One element of a wheel key's ``entries`` list state: the records one batch added.
ENTRIES = StructType([StructField("pack", BinaryType())])

#: What the processor emits and the sink writes: deliveries, drops and rejects.
OUTPUT = StructType([StructField("pack", BinaryType())])
