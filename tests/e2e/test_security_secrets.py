"""Secrets are never printed: a Redis password is masked wherever a URL is shown, and
the environment takes the URL and the token, so that ``ps`` shows neither."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from delayline.testing import free_port
from delayline.urls import redacted

SECRET = "s3cr3t-PaSS"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://127.0.0.1:6390/0", "redis://127.0.0.1:6390/0"),
        (f"redis://:{SECRET}@10.0.0.5:6379/0", "redis://:***@10.0.0.5:6379/0"),
        (f"rediss://app:{SECRET}@cache.internal/2", "rediss://app:***@cache.internal/2"),
        (f"redis://app:{SECRET}:more@host", "redis://app:***@host"),
        (f"redis://host/0?password={SECRET}&ssl=1", "redis://host/0?password=***&ssl=1"),
        (f"redis://:{SECRET}@[::1]:6379", "redis://:***@[::1]:6379"),
        (f"redis://:{SECRET}@host:99999999999", "redis://:***@host:99999999999"),
        ("redis://[::1", "redis://***"),
    ],
)
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert redacted(url) == shown
    assert SECRET not in redacted(url)


def first_lines(args: list[str], until: str, env: dict[str, str], cwd: Path) -> str:
    """Start ``python -m delayline <args>``, read its output until a line has ``until``,
    and stop it (its whole group, whatever happens)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "delayline", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, **env},
        cwd=cwd,
        start_new_session=True,
        text=True,
    )
    seen: list[str] = []
    # Should ``until`` never come, the output ends when this kills the command.
    deadline = threading.Timer(60, os.killpg, (process.pid, signal.SIGKILL))
    deadline.start()
    try:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)
            if until in line:
                break
        return "".join(seen)
    finally:
        deadline.cancel()
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        if process.stdout is not None:
            process.stdout.close()


def test_run_takes_its_redis_url_from_the_environment_and_masks_the_password(
    tmp_path: Path,
) -> None:
    # Nothing listens there: run says it waits for Redis, naming it.
    url = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0"
    output = first_lines(
        ["run", "--data-dir", str(tmp_path / "data"), "--no-api"],
        "waiting",
        {"DELAYLINE_REDIS_URL": url},
        tmp_path,
    )
    assert "redis://:***@127.0.0.1" in output, output
    assert SECRET not in output


def test_the_api_command_masks_the_password(tmp_path: Path) -> None:
    url = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0"
    port = str(free_port())
    output = first_lines(
        ["api", "--port", port], "http api", {"DELAYLINE_REDIS_URL": url}, tmp_path
    )
    assert "over redis://:***@127.0.0.1" in output, output
    assert SECRET not in output
