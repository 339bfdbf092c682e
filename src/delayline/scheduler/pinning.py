"""The settings a checkpoint pins, recorded next to it in the data directory.

A record is JSON, ``{name: value}`` for each pinned setting. A record written
before a setting was renamed names it the old way (:data:`RENAMED`); it is read
under the new name, and written again with it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from delayline.errors import ConfigurationError
from delayline.scheduler.settings import PRIVATE_DIR_MODE, SchedulerSettings

#: Settings that shape the state keys. Changing them under an existing checkpoint
#: would misroute cancels, so they are pinned for good.
PINNED = (
    "tick_ms",
    "shards",
    "state_partitions",
    "inbound_shards",
    "coarse_tick_ms",
    "coarse_after_ms",
    "cascade_ahead_ms",
)
#: Settings that shape a batch's output but not the state: a replayed batch must
#: write the rows its first attempt wrote, so they may change only while no batch
#: is in flight (every batch in the offset log is committed).
PINNED_WHILE_IN_FLIGHT = ("horizon_ms",)
#: Old name -> name of each pinned setting renamed since records were first written.
RENAMED = {"fire_lead_ms": "horizon_ms", "cascade_lead_ms": "cascade_ahead_ms"}

#: Where the pinned settings are recorded, in the data directory.
PINNED_FILE = "scheduler.json"


#: The copy of the record inside a checkpoint given by ``--checkpoint`` on the local
#: file system (a shared one, say): an active scheduler and its standby have data
#: directories of their own, and check each other's settings through it. A drain
#: moves it aside with the checkpoint.
CHECKPOINT_PINNED_FILE = "delayline-pinned.json"


def record_paths(settings: SchedulerSettings) -> list[Path]:
    """Where the pinned settings are recorded: the data directory, and inside a local
    checkpoint given by ``--checkpoint`` (CHECKPOINT_PINNED_FILE)."""
    paths = [settings.data_dir / PINNED_FILE]
    root = local_path(settings.checkpoint_location)
    if settings.checkpoint is not None and root is not None:
        paths.append(root / CHECKPOINT_PINNED_FILE)
    return paths


def pin_settings(settings: SchedulerSettings) -> None:
    """Record the pinned settings next to the checkpoint, or check them against each
    record (:func:`record_paths`).

    A setting of PINNED_WHILE_IN_FLIGHT may change when the checkpoint has no
    batch in flight; the record then takes the new value. Raises
    ConfigurationError naming each setting that differs from the recorded one
    and may not change now.
    """
    names = (*PINNED, *PINNED_WHILE_IN_FLIGHT)
    current = {name: getattr(settings, name) for name in names}
    # Every record is checked before any is written: a refusal leaves them all as they were.
    stale = [path for path in record_paths(settings) if _stale(path, settings, current)]
    for path in stale:
        path.parent.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        # Written aside and renamed over: a crash leaves the old record or the new one.
        aside = path.with_name(f".{path.name}.tmp")
        descriptor = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(json.dumps(current, indent=2) + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(aside, path)


def _stale(path: Path, settings: SchedulerSettings, current: dict[str, Any]) -> bool:
    """Whether the record at ``path`` must be written (again) with ``current``. Raises
    ConfigurationError as :func:`pin_settings` does."""
    names = tuple(current)
    written = _read_record(path)
    recorded = _renamed(written)
    differs = [name for name in names if name in recorded and recorded[name] != current[name]]
    refused = [
        name
        for name in differs
        if name in PINNED or not checkpoint_settled(settings.checkpoint_location)
    ]
    if refused:
        changed = ", ".join(f"{name} {recorded[name]} -> {current[name]}" for name in refused)
        raise ConfigurationError(
            f"the checkpoint was created with other settings (recorded in {path}: "
            f"{changed}); use the recorded values, or hand the pending messages to a "
            "new checkpoint: stop, run delayline drain, then start with the new values"
            + (
                ""
                if all(name in PINNED for name in refused)
                else "; horizon_ms can change once the last batch is committed: "
                "start once with the recorded value and stop with Ctrl-C"
            )
        )
    return bool(differs) or not path.exists() or set(written) != set(names)


def recorded_settings(data_dir: Path) -> dict[str, Any]:
    """The pinned settings recorded in ``data_dir`` (PINNED_FILE) under their current
    names, or {} if none are.

    Raises ConfigurationError if the record cannot be read as JSON settings.
    """
    return _renamed(_read_record(data_dir / PINNED_FILE))


def _renamed(written: dict[str, Any]) -> dict[str, Any]:
    """A record with each setting under its current name (see RENAMED)."""
    return {RENAMED.get(name, name): value for name, value in written.items()}


def _read_record(path: Path) -> dict[str, Any]:
    """The record at ``path`` as written, or {} if there is none.

    Raises ConfigurationError if it cannot be read as JSON settings.
    """
    if not path.exists():
        return {}
    try:
        recorded = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problem = str(exc)
    else:
        if isinstance(recorded, dict):
            return recorded
        problem = "not a JSON object"
    raise ConfigurationError(
        f"{path} is not a record of settings ({problem}). It holds the settings the "
        "checkpoint was created with: restore it, or delete it and start with those "
        "settings, and it is written again"
    )


def checkpoint_settled(location: str) -> bool:
    """True if every batch in the checkpoint's offset log is committed (or there is none).

    Only a local checkpoint can be read here; any other counts as unsettled.
    """
    root = local_path(location)
    if root is None:
        return False

    def last_batch(log: str) -> int:
        numbered = [int(p.name) for p in (root / log).glob("*") if p.name.isdigit()]
        return max(numbered, default=-1)

    return last_batch("offsets") <= last_batch("commits")


def local_path(location: str) -> Path | None:
    """The directory of a checkpoint on the local file system, or None for any other."""
    if "://" in location and not location.startswith("file:"):
        return None
    return Path(location.removeprefix("file://").removeprefix("file:"))
