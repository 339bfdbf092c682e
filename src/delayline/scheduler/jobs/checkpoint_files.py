"""A checkpoint's own files, read through Hadoop's FileSystem in the Spark driver, so
that one code reads a local directory, HDFS (``hdfs://``) and S3 (``s3a://``) alike.

Spark's checkpoint holds ``metadata`` (the query id, as JSON), the offset log
``offsets/<batch>`` (a version line, the batch's metadata, then one line per
source with its offset as JSON) and the commit log ``commits/<batch>``. A drain
adds ``draining.json`` (DRAINING_FILE) while it runs; Spark reads none of it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from delayline.errors import ConfigurationError

#: In a checkpoint that a drain has begun: it is renamed with the checkpoint, so that
#: the rename alone says the drain has finished.
DRAINING_FILE = "draining.json"

#: Spark's error when the state data source is asked for a checkpoint with no
#: committed batch: the state holds nothing yet.
NO_BATCH_YET = "STDS_COMMITTED_BATCH_UNAVAILABLE"


class CheckpointFiles:
    """The files of the checkpoint at ``location`` (any Hadoop URI, or a local path)."""

    def __init__(self, spark: SparkSession, location: str) -> None:
        context = spark.sparkContext
        assert context._jvm is not None  # a live driver has both
        assert context._jsc is not None
        self._jvm: Any = context._jvm
        self._root: Any = self._jvm.org.apache.hadoop.fs.Path(location)
        self._fs: Any = self._root.getFileSystem(context._jsc.hadoopConfiguration())

    @property
    def location(self) -> str:
        """The checkpoint's location, as Hadoop names it."""
        return str(self._root.toString())

    def _path(self, *parts: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(self._root, "/".join(parts))

    def exists(self) -> bool:
        """True if a checkpoint is there: it has its ``metadata``."""
        return bool(self._fs.exists(self._path("metadata")))

    def query_id(self) -> str:
        """The id of the query that the checkpoint belongs to."""
        query_id: str = json.loads(self._read("metadata"))["id"]
        return query_id

    def draining(self) -> bool:
        """True if a drain of this checkpoint has begun (and so not finished)."""
        return bool(self._fs.exists(self._path(DRAINING_FILE)))

    def refuse_if_draining(self) -> None:
        """Raise ConfigurationError if a drain of this checkpoint has begun: a query
        must not run on it until the drain has finished."""
        if self.draining():
            raise ConfigurationError(
                f"a drain of the checkpoint {self.location} has not finished: "
                "run delayline drain again, then start"
            )

    def mark_draining(self, text: str) -> None:
        """Write DRAINING_FILE with ``text``: the checkpoint is being drained."""
        stream = self._fs.create(self._path(DRAINING_FILE), True)
        try:
            stream.write(text.encode())
        finally:
            stream.close()

    def last_batch(self, log: str) -> int:
        """The newest batch in the ``offsets`` or ``commits`` log, or -1 if none."""
        if not self._fs.exists(self._path(log)):
            return -1
        names = [status.getPath().getName() for status in self._fs.listStatus(self._path(log))]
        return max((int(name) for name in names if name.isdigit()), default=-1)

    def settled(self) -> bool:
        """True if every batch in the offset log is committed (or there is none)."""
        return self.last_batch("offsets") <= self.last_batch("commits")

    def committed_offsets(self) -> dict[str, str]:
        """The source's offset (field -> value) at the end of the last committed batch;
        empty if none is committed."""
        batch = self.last_batch("commits")
        return {} if batch < 0 else self.offsets(batch)

    def offsets(self, batch: int) -> dict[str, str]:
        """The source's offset (field -> value) at the end of ``batch``."""
        offsets: dict[str, str] = json.loads(self._read("offsets", str(batch)).splitlines()[-1])
        return offsets

    def move_aside(self, suffix: str, keep: Path | None = None) -> str:
        """Rename the checkpoint to ``<name><suffix>`` beside it, moving the local file
        ``keep`` (if given and present) into it; return its new location."""
        aside = self._jvm.org.apache.hadoop.fs.Path(
            self._root.getParent(), self._root.getName() + suffix
        )
        if not self._fs.rename(self._root, aside):
            raise OSError(f"could not rename {self.location} to {aside.toString()}")
        if keep is not None and keep.exists():
            hadoop_path = self._jvm.org.apache.hadoop.fs.Path
            # delSrc: it moves, overwrite: a move that stopped midway is done again.
            self._fs.copyFromLocalFile(
                True, True, hadoop_path(str(keep.resolve())), hadoop_path(aside, keep.name)
            )
        return str(aside.toString())

    def _read(self, *parts: str) -> str:
        stream = self._fs.open(self._path(*parts))
        try:
            text: str = self._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
        return text
