"""Log files kept under a bound, with their writers still writing."""

from __future__ import annotations

from pathlib import Path

from delayline.logfiles import LogFiles


def test_a_log_past_its_bound_is_kept_as_dot_1_and_emptied_for_its_writer(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    other = tmp_path / "redis.log"
    other.write_bytes(b"short\n")
    logs = LogFiles([log, other, tmp_path / "missing.log"], max_bytes=100)
    with open(log, "ab") as writer:  # as the JVM holds spark.log: open, appending
        writer.write(b"x" * 150)
        writer.flush()
        assert logs.bound() == [log]
        writer.write(b"after\n")
        writer.flush()
    assert (tmp_path / "spark.log.1").read_bytes() == b"x" * 150
    assert (tmp_path / "spark.log.1").stat().st_mode & 0o777 == 0o600
    # The writer goes on at the start of the emptied file, not past a hole.
    assert log.read_bytes() == b"after\n"
    assert other.read_bytes() == b"short\n"
    assert logs.bound() == []
    log.write_bytes(b"y" * 101)
    assert logs.bound() == [log]
    assert (tmp_path / "spark.log.1").read_bytes() == b"y" * 101
    assert logs.rotations == 2
