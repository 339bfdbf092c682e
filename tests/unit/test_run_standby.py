"""``delayline run --standby``: what it needs, refused before anything starts."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from delayline.cli import main


def test_a_standby_with_the_embedded_redis_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "standby"
    result = CliRunner().invoke(main, ["run", "--standby", "--no-api", "--data-dir", str(data_dir)])
    assert result.exit_code != 0
    assert "--standby needs the external Redis" in result.output
    assert "--checkpoint" in result.output
    assert not data_dir.exists()  # nothing started, nothing written


def test_a_standby_without_the_actives_checkpoint_is_refused(tmp_path: Path) -> None:
    # Its own checkpoint would start the query afresh, without the active's state.
    flags = ["--standby", "--no-api", "--redis-url", "redis://127.0.0.1:1/0"]
    result = CliRunner().invoke(main, ["run", *flags, "--data-dir", str(tmp_path / "b")])
    assert result.exit_code != 0
    assert "--standby needs" in result.output


def test_the_lease_is_an_option_of_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["run", "--help"])
    assert "--standby" in result.output
    assert "--lease-ms" in result.output
