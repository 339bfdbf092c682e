"""Which streaming batch a Python task belongs to, from Spark's task-local properties."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import TaskContext

from delayline.errors import SchedulerError


@dataclass(frozen=True)
class BatchTask:
    """Query id (stable across restarts), micro-batch id and partition of a running task."""

    query_id: str
    batch_id: int
    partition: int


def current_batch_task() -> BatchTask:
    """The batch task this code runs in. Raises SchedulerError outside a streaming task."""
    context = TaskContext.get()
    query_id = context.getLocalProperty("sql.streaming.queryId") if context else None
    batch_id = context.getLocalProperty("streaming.sql.batchId") if context else None
    if context is None or query_id is None or batch_id is None:
        raise SchedulerError("not running inside a Spark streaming task")
    return BatchTask(query_id=query_id, batch_id=int(batch_id), partition=context.partitionId())
