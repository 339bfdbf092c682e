"""The scheduling query: inbound source -> wheel processor -> delivery sink."""

from __future__ import annotations

import functools

from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from delayline.scheduler.pinning import pin_settings
from delayline.scheduler.pipeline import schemas
from delayline.scheduler.pipeline.clients import record_wakeups
from delayline.scheduler.pipeline.processor import WheelProcessor
from delayline.scheduler.pipeline.sink import DeliverySink
from delayline.scheduler.pipeline.source import InboundSource
from delayline.scheduler.settings import SchedulerSettings

QUERY_NAME = "delayline"


def start_query(spark: SparkSession, settings: SchedulerSettings, run_token: str) -> StreamingQuery:
    """Start the scheduler query on ``spark``; it resumes from the checkpoint if there is one.

    ``run_token`` names this run's pause flag (see ``Scheduler.stop``).

    Raises ConfigurationError if the checkpoint was made with other pinned settings.
    """
    pin_settings(settings)
    spark.dataSource.register(InboundSource)
    spark.dataSource.register(DeliverySink)
    options = settings.to_json()
    inbound = (
        spark.readStream.format(InboundSource.name())
        .option("settings", options)
        .option("run_token", run_token)
        .load()
    )
    due = inbound.groupBy("wheel_key").transformWithState(
        statefulProcessor=WheelProcessor(
            settings.horizon_ms,
            settings.cancel_retention_ms,
            settings.wheel,
            functools.partial(record_wakeups, settings.redis_url),
        ),
        outputStructType=schemas.OUTPUT,
        outputMode="Append",
        timeMode="ProcessingTime",
    )
    return (
        due.writeStream.format(DeliverySink.name())
        .option("settings", options)
        .option("checkpointLocation", settings.checkpoint_location)
        .trigger(processingTime=f"{settings.trigger_ms} milliseconds")
        .queryName(QUERY_NAME)
        .start()
    )
