"""A checkpoint's files through Hadoop's FileSystem (``file://`` here, the code HDFS and S3
take too), for the drain: what it holds, whether it is settled, and moving it aside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from pyspark.sql import SparkSession

from delayline.errors import ConfigurationError
from delayline.redis import keys
from delayline.redis.inbound import InboundStream
from delayline.scheduler.jobs.checkpoint_files import CheckpointFiles
from delayline.scheduler.jobs.drain import check_drainable, trim_committed


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_checkpoint_is_read_and_moved_aside_through_hadoop(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "checkpoint"
    files = CheckpointFiles(spark, root.as_uri())
    assert not files.exists()
    with pytest.raises(ConfigurationError, match="no checkpoint to drain"):
        check_drainable(files)

    write(root / "metadata", json.dumps({"id": "the-query"}))
    offsets = [{"id": f"{n}-0", "id.0": f"{n}-1", "run": "r", "tick": "5"} for n in range(3)]
    for batch, offset in enumerate(offsets):
        write(root / "offsets" / str(batch), f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps(offset)}')
    write(root / "commits" / "0", "v1\n{}")
    write(root / "commits" / "1", "v1\n{}")
    write(root / "offsets" / ".3.0c1f.tmp", "a batch being written: not one yet")
    assert files.exists()
    assert files.query_id() == "the-query"
    assert (files.last_batch("offsets"), files.last_batch("commits")) == (2, 1)
    assert not files.settled()
    with pytest.raises(ConfigurationError, match="batch in flight"):
        check_drainable(files)
    assert files.committed_offsets() == offsets[1]

    write(root / "commits" / "2", "v1\n{}")
    check_drainable(files)
    assert not files.draining()
    files.mark_draining('{"query_id": "the-query"}')
    assert files.draining()
    assert files.committed_offsets() == offsets[2]
    pinned = tmp_path / "data" / "scheduler.json"
    write(pinned, '{"state_partitions": 2}')
    aside = files.move_aside(".drained-x", keep=pinned)
    assert not root.exists()
    assert not pinned.exists()
    moved = tmp_path / "checkpoint.drained-x"
    assert CheckpointFiles(spark, aside).query_id() == "the-query"
    assert CheckpointFiles(spark, aside).draining()  # the mark went with it
    assert json.loads((moved / "scheduler.json").read_text()) == {"state_partitions": 2}
    assert (moved / "commits" / "2").exists()


def test_the_drain_trims_each_stream_up_to_its_committed_offset(
    spark: SparkSession, tmp_path: Path, redis_url: str, raw_redis: redis.Redis
) -> None:
    streams = [keys.INBOUND, keys.inbound_shard(0), keys.inbound_shard(1)]
    added = {s: [raw_redis.xadd(s, {"n": n}).decode() for n in range(4)] for s in streams}
    root = tmp_path / "checkpoint"
    write(root / "metadata", json.dumps({"id": "q"}))
    # The last committed batch read the default stream to its 2nd entry and shard 0 to its
    # 3rd; shard 1 not at all. The batch after it is planned, not committed.
    committed = {"id": added[keys.INBOUND][1], "id.0": added[keys.inbound_shard(0)][2]}
    write(root / "offsets" / "0", f"v1\n{{}}\n{json.dumps({**committed, 'id.1': '0-0'})}")
    write(root / "commits" / "0", "v1\n{}")
    write(root / "offsets" / "1", f"v1\n{{}}\n{json.dumps({'id': added[keys.INBOUND][3]})}")
    inbound = InboundStream.from_url(redis_url)
    trim_committed(inbound, CheckpointFiles(spark, str(root)), inbound_shards=2)
    inbound.close()
    left = {stream: [e.decode() for e, _ in raw_redis.xrange(stream)] for stream in streams}
    assert left[keys.INBOUND] == added[keys.INBOUND][2:]
    assert left[keys.inbound_shard(0)] == added[keys.inbound_shard(0)][3:]
    assert left[keys.inbound_shard(1)] == added[keys.inbound_shard(1)]
