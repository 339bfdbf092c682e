"""The data directory is private to its user, and its own files cannot be turned
against it: the lock follows no link, and a damaged settings record is a clear error."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from delayline.errors import ConfigurationError
from delayline.scheduler.pinning import PINNED_FILE, pin_settings
from delayline.scheduler.settings import SchedulerSettings, data_dir_lock


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_data_directory_and_what_is_written_in_it_are_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)  # as an earlier version left it
    data_dir.chmod(0o755)
    with data_dir_lock(data_dir):
        pin_settings(SchedulerSettings(data_dir=data_dir))
        # What the embedded server and Spark create under the lock is private too.
        (data_dir / "appendonly.aof").write_bytes(b"every body")
    assert mode(data_dir) == 0o700
    for name in (".lock", PINNED_FILE, "appendonly.aof"):
        assert mode(data_dir / name) == 0o600, name
    assert [p.name for p in data_dir.iterdir() if p.name.endswith(".tmp")] == []


def test_the_lock_follows_no_link_and_truncates_nothing(tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / ".lock").symlink_to(precious)
    with (
        pytest.raises(ConfigurationError, match=r"is a symbolic link.*remove"),
        data_dir_lock(data_dir),
    ):
        pass
    assert precious.read_text() == "keep me"
    # A lock file with something in it is not emptied either.
    (data_dir / ".lock").unlink()
    (data_dir / ".lock").write_text("pid 42")
    with data_dir_lock(data_dir):
        pass
    assert (data_dir / ".lock").read_text() == "pid 42"


@pytest.mark.parametrize("damage", ["{not json", "[1, 2]", "\udcff"])
def test_a_damaged_settings_record_is_a_configuration_error(tmp_path: Path, damage: str) -> None:
    (tmp_path / PINNED_FILE).write_bytes(damage.encode("utf-8", "surrogateescape"))
    with pytest.raises(ConfigurationError, match=r"scheduler.json is not a record of settings"):
        pin_settings(SchedulerSettings(data_dir=tmp_path))


def test_the_settings_record_is_replaced_whole(tmp_path: Path) -> None:
    pin_settings(SchedulerSettings(data_dir=tmp_path))
    first = (tmp_path / PINNED_FILE).stat().st_ino
    recorded = json.loads((tmp_path / PINNED_FILE).read_text())
    recorded.pop(next(iter(recorded)))  # an older version's record, one setting short
    (tmp_path / PINNED_FILE).write_text(json.dumps(recorded))
    pin_settings(SchedulerSettings(data_dir=tmp_path))
    # Renamed over, not written in place: a crash midway leaves a whole record.
    assert (tmp_path / PINNED_FILE).stat().st_ino != first
    assert set(json.loads((tmp_path / PINNED_FILE).read_text())) > set(recorded)
    assert os.listdir(tmp_path) == [PINNED_FILE]
