"""Starting and stopping the child processes of a system under test."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from delayline import local
from delayline.testing import wait_for


def spawn(args: Sequence[str], *, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``args`` in its own process group, output to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            list(args), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def fresh_log(log: Path) -> Path:
    """Move an earlier run's ``log`` aside (kept, with a time suffix); return ``log``.

    A restarted process then waits for its own ready line, not the first run's.
    """
    if log.exists():
        log.rename(log.with_suffix(f"{log.suffix}.{time.time_ns()}"))
    return log


def kill_group(process: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
    """Signal the process's whole group; wait for the leader."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)


def terminate(process: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    """SIGTERM the group, then SIGKILL it if it is still there after ``timeout_s``."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout_s
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    kill_group(process)


def wait_for_log(log: Path, text: str, timeout_s: float, process: subprocess.Popen[bytes]) -> None:
    """Wait until ``text`` appears in ``log``; fail if the process dies or after ``timeout_s``
    seconds."""

    def logged() -> bool:
        if log.exists() and text in log.read_text(errors="replace"):
            return True
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited; see {log}")
        return False

    wait_for(logged, timeout_s, f"{text!r} in {log}", interval_s=0.2)


def start_delayline_run(
    workdir: Path, port: int, timeout_s: float, *options: str
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``delayline run`` (embedded Redis on ``port``, no API, ``options`` after) in
    ``workdir``; return it once its scheduler runs, and its Redis URL."""
    log = fresh_log(workdir / "run.log")
    args = ["--redis-port", str(port), "--no-api", "--data-dir", str(workdir / "data"), *options]
    process = spawn(
        [sys.executable, "-m", "delayline", "run", *args], env=dict(os.environ), log=log
    )
    try:
        wait_for_log(log, "scheduler running", timeout_s, process)
    except BaseException:
        kill_group(process)
        raise
    return process, str(local.read_url(local.server_dir(workdir / "data")))
