from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from delayline.errors import ConfigurationError
from delayline.kafka.target import KafkaDelivery, parse_target, target_url
from delayline.scheduler.pinning import (
    CHECKPOINT_PINNED_FILE,
    PINNED,
    PINNED_FILE,
    PINNED_WHILE_IN_FLIGHT,
    pin_settings,
    recorded_settings,
)
from delayline.scheduler.runtime.java import java_major_version
from delayline.scheduler.settings import (
    SchedulerSettings,
    data_dir_lock,
    driver_memory_mb,
    run_options,
)
from delayline.validation import Limits


def test_settings_round_trip_through_json() -> None:
    settings = SchedulerSettings(data_dir=Path("/x"), tick_ms=250, limits=Limits(max_body_bytes=9))
    assert SchedulerSettings.from_json(settings.to_json()) == settings


@pytest.mark.parametrize(
    "bad",
    [
        {"tick_ms": 0},
        {"shards": 257},
        {"horizon_ms": -1},
        {"state_partitions": 0},
        {"driver_memory": "256m"},
        {"driver_memory": "1.5g"},
        {"driver_memory": "512"},
    ],
)
def test_bad_settings_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ConfigurationError):
        SchedulerSettings(**bad)  # type: ignore[arg-type]


def test_driver_memory_sizes() -> None:
    assert [driver_memory_mb(size) for size in ("512m", "2G", " 1t ")] == [512, 2048, 1024 * 1024]
    with pytest.raises(ConfigurationError, match=r'look like "512m"'):
        driver_memory_mb("lots")
    with pytest.raises(ConfigurationError, match=r"at least 512m \(Spark's floor\), got 256m"):
        SchedulerSettings(driver_memory="256m")


def test_kafka_delivery_is_one_of_two_modes() -> None:
    assert SchedulerSettings().delivery_to_kafka is KafkaDelivery.AT_LEAST_ONCE
    exactly = SchedulerSettings(kafka_delivery="exactly-once")
    assert exactly.delivery_to_kafka is KafkaDelivery.EXACTLY_ONCE
    assert target_url("b:9092", exactly.delivery_to_kafka) == "kafka-exactly-once:b:9092"
    assert parse_target("kafka-exactly-once:b:9092") == (KafkaDelivery.EXACTLY_ONCE, "b:9092")
    assert parse_target("kafka:b:9092") == (KafkaDelivery.AT_LEAST_ONCE, "b:9092")
    with pytest.raises(ConfigurationError, match="at-least-once or exactly-once, got 'twice'"):
        SchedulerSettings(kafka_delivery="twice")
    with pytest.raises(ConfigurationError, match="unknown delivery target 'kafka:'"):
        parse_target("kafka:")


def test_overrides_ignore_none() -> None:
    settings = SchedulerSettings().with_overrides(tick_ms=None, shards=8)
    assert (settings.tick_ms, settings.shards) == (SchedulerSettings().tick_ms, 8)


def test_pinned_settings_cannot_change_under_a_checkpoint(tmp_path: Path) -> None:
    pin_settings(SchedulerSettings(data_dir=tmp_path, tick_ms=100))
    pin_settings(SchedulerSettings(data_dir=tmp_path, tick_ms=100, trigger_ms=999))
    with pytest.raises(ConfigurationError, match=r"tick_ms 100 -> 200.*run delayline drain"):
        pin_settings(SchedulerSettings(data_dir=tmp_path, tick_ms=200))


def test_the_horizon_changes_only_when_no_batch_is_in_flight(tmp_path: Path) -> None:
    pin_settings(SchedulerSettings(data_dir=tmp_path, horizon_ms=2_000))
    offsets, commits = tmp_path / "checkpoint" / "offsets", tmp_path / "checkpoint" / "commits"
    offsets.mkdir(parents=True)
    commits.mkdir()
    (offsets / "7").write_text("{}")
    with pytest.raises(ConfigurationError, match=r"horizon_ms 2000 -> 60000.*recorded value"):
        pin_settings(SchedulerSettings(data_dir=tmp_path))  # batch 7 would replay otherwise
    (commits / "7").write_text("{}")
    pin_settings(SchedulerSettings(data_dir=tmp_path))  # all committed: the change is safe
    (offsets / "8").write_text("{}")
    with pytest.raises(ConfigurationError, match=r"horizon_ms 60000 -> 2000"):
        pin_settings(SchedulerSettings(data_dir=tmp_path, horizon_ms=2_000))


def test_a_record_written_before_the_renames_is_read_under_the_new_names(
    tmp_path: Path,
) -> None:
    old = {"tick_ms": 500, "shards": 4, "state_partitions": 2, "inbound_shards": 1,
           "coarse_tick_ms": 60_000, "coarse_after_ms": 300_000,
           "cascade_lead_ms": 3_000, "fire_lead_ms": 2_000}  # fmt: skip
    (tmp_path / PINNED_FILE).write_text(json.dumps(old))
    recorded = recorded_settings(tmp_path)
    assert (recorded["horizon_ms"], recorded["cascade_ahead_ms"]) == (2_000, 3_000)
    assert "fire_lead_ms" not in recorded
    # Pinned under its new name: another cascade_ahead_ms is refused...
    with pytest.raises(ConfigurationError, match=r"cascade_ahead_ms 3000 -> 120000"):
        pin_settings(SchedulerSettings(data_dir=tmp_path, horizon_ms=2_000))
    offsets = tmp_path / "checkpoint" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text("{}")
    # ...and so is another horizon while a batch is in flight.
    with pytest.raises(ConfigurationError, match=r"horizon_ms 2000 -> 60000"):
        pin_settings(SchedulerSettings(data_dir=tmp_path, cascade_ahead_ms=3_000))
    # The same values pass, and the record is written again with the new names.
    pin_settings(SchedulerSettings(data_dir=tmp_path, cascade_ahead_ms=3_000, horizon_ms=2_000))
    rewritten = json.loads((tmp_path / PINNED_FILE).read_text())
    assert (rewritten["horizon_ms"], rewritten["cascade_ahead_ms"]) == (2_000, 3_000)
    assert not {"fire_lead_ms", "cascade_lead_ms"} & set(rewritten)


def test_the_horizon_and_the_cascade_keep_their_old_flags_as_aliases() -> None:
    flags = {option.name: (option.flag, option.aliases) for option in run_options()}
    assert flags["horizon_ms"] == ("--horizon-ms", ("--lead-ms",))
    assert flags["cascade_ahead_ms"] == ("--cascade-ahead-ms", ("--cascade-lead-ms",))


def test_the_journal_ttl_is_whole_seconds() -> None:
    assert SchedulerSettings(journal_retention_ms=90_999).journal_ttl_s == 90


def _try_lock(data_dir: Path, result: multiprocessing.Queue[str]) -> None:
    try:
        with data_dir_lock(data_dir):
            result.put("locked")
    except ConfigurationError as exc:
        result.put(str(exc))


def test_one_scheduler_per_data_dir(tmp_path: Path) -> None:
    result: multiprocessing.Queue[str] = multiprocessing.get_context("spawn").Queue()
    with data_dir_lock(tmp_path):
        other = multiprocessing.get_context("spawn").Process(
            target=_try_lock, args=(tmp_path, result)
        )
        other.start()
        other.join(60)
        assert "another delayline scheduler is running" in result.get(timeout=5)
    with data_dir_lock(tmp_path):  # released: can be taken again
        pass


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_392"', 8),
        ("nonsense", None),
    ],
)
def test_java_version_parsing(output: str, major: int | None) -> None:
    assert java_major_version(output) == major


def test_a_standby_with_a_data_dir_of_its_own_checks_the_settings_of_a_shared_checkpoint(
    tmp_path: Path,
) -> None:
    shared = str(tmp_path / "shared" / "checkpoint")
    pin_settings(SchedulerSettings(data_dir=tmp_path / "a", checkpoint=shared, tick_ms=100))
    assert (Path(shared) / CHECKPOINT_PINNED_FILE).exists()
    with pytest.raises(ConfigurationError, match=r"delayline-pinned.json: tick_ms 100 -> 200"):
        pin_settings(SchedulerSettings(data_dir=tmp_path / "b", checkpoint=shared, tick_ms=200))
    pin_settings(SchedulerSettings(data_dir=tmp_path / "b", checkpoint=shared, tick_ms=100))


def test_the_lease_is_an_option_that_no_checkpoint_pins(tmp_path: Path) -> None:
    assert "lease_ms" not in (*PINNED, *PINNED_WHILE_IN_FLIGHT)
    assert any(option.flag == "--lease-ms" for option in run_options())
    assert not any(option.name == "fence_token" for option in run_options())
    with pytest.raises(ConfigurationError, match="lease_ms must be at least 500"):
        SchedulerSettings(lease_ms=100)
    pin_settings(SchedulerSettings(data_dir=tmp_path, lease_ms=1_500))
    pin_settings(SchedulerSettings(data_dir=tmp_path, lease_ms=5_000))
    settings = SchedulerSettings(data_dir=tmp_path, lease_ms=3_000, fence_token=7)
    assert SchedulerSettings.from_json(settings.to_json()) == settings
