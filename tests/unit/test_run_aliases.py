"""``delayline run``'s deprecated flags: each still sets its setting, with a warning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from delayline import service
from delayline.cli import main
from delayline.scheduler.settings import SchedulerSettings


def run_with(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *flags: str) -> tuple[Result, Any]:
    """``delayline run`` with ``flags``, up to the settings it would run the service with."""
    seen: list[SchedulerSettings] = []
    monkeypatch.setattr(service, "run_service", lambda settings, **_: seen.append(settings))
    result = CliRunner().invoke(main, ["run", "--data-dir", str(tmp_path), "--no-api", *flags])
    assert result.exit_code == 0, result.output
    [settings] = seen
    return result, settings


def test_lead_ms_sets_the_horizon_and_warns_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result, settings = run_with(monkeypatch, tmp_path, "--lead-ms", "1500")
    assert settings.horizon_ms == 1500
    assert result.stderr == "warning: --lead-ms is deprecated: use --horizon-ms\n"


def test_horizon_ms_wins_over_its_alias_and_does_not_warn(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result, settings = run_with(monkeypatch, tmp_path, "--horizon-ms", "1200")
    assert (settings.horizon_ms, result.stderr) == (1200, "")
    result, settings = run_with(monkeypatch, tmp_path, "--horizon-ms", "1200", "--lead-ms", "1500")
    assert settings.horizon_ms == 1200


def test_cascade_lead_ms_sets_cascade_ahead_ms(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result, settings = run_with(monkeypatch, tmp_path, "--cascade-lead-ms", "100000")
    assert settings.cascade_ahead_ms == 100_000
    assert "--cascade-lead-ms is deprecated: use --cascade-ahead-ms" in result.stderr


def test_the_aliases_stay_out_of_the_help() -> None:
    shown = CliRunner().invoke(main, ["run", "--help"], terminal_width=200).output
    assert "--horizon-ms" in shown
    assert "--lead-ms" not in shown
